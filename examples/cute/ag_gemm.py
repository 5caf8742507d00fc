"""All-gather + GEMM with symm.cute (tensor-parallel column layer):
C = all_gather(A) @ Bt^T, the shards travelling on the copy engines while a
Hopper GEMM (hopper_gemm.py ag_hgemm: TMA, wgmma, 4-stage pipeline) computes
on whatever has arrived.

Every PE holds a row shard A_me [M/n, K] and its column shard Bt [N/n, K] of
the weight. Per call:
  - the main stream bumps the call's epoch (a device word);
  - a side stream pushes A_me into every peer's symmetric A_full (rows
    me*M/n.., one of two parity buffers), chunk by chunk, with cuMemcpyAsync
    (copy engines: no SM taken from the GEMM; symm.cubin.CopyList), and
    after each chunk copies the epoch into the peer's flag for that chunk
    (same stream: the flag lands after the data). All chunks go to PE me-1
    first, which needs this shard right after its own rows, then me-2, ...;
  - the GEMM, one persistent grid on the main stream, takes its tiles in
    the order the rows arrive: this PE's own rows first (read from A_me: no
    wait), then the rows of me+1, me+2, ..., each shard chunk by chunk;
    before loading a peer's rows its producer warp waits for that chunk's
    flag only.
Where PEs share a GPU the pushes land (join, stream barrier) before the GEMM
starts: waiting tiles could otherwise hold the SMs a peer needs.

Checked against torch.distributed's all_gather_into_tensor + torch.matmul
(or, where PEs share a GPU, the gathered inputs rebuilt from the seeds) with
fresh data every iteration, and timed (CUDA graphs and a plain stream) next
to the GEMM alone at the same per-PE shape and the unfused torch + NCCL.

    torchrun --nproc-per-node 4 examples/cute/ag_gemm.py [--cubins build-cute] [--shape square,llm]
"""
import torch
import torch.distributed as dist

import _common as C
import _timeline as T
import symm
import symm.cubin

BM, BN, BK = 128, 256, 64   # hopper_gemm.py's tile
# (M, K, N) of the layer, N sharded over the PEs: the square benchmark shape,
# an LLM MLP up-projection (hidden 8192, intermediate 28672, 4096 tokens), and
# a small one for quick runs and PEs sharing a GPU
SHAPES = {"square": (8192, 8192, 8192), "llm": (4096, 8192, 28672), "small": (1024, 1024, 2048)}
GROUP_M = 8                 # hopper_gemm.py's row tiles per group
# rows per flag: a tile waits for its own chunk only; one group of row tiles,
# so the chunk order is the GEMM's group order and no group needs two chunks
CHUNK_ROWS = GROUP_M * BM
REC_WORDS = 4               # hopper_gemm.py's record of a wait that gave up


def push_order(me, npes):
    """The PEs this PE's shard is copied to, in order: me-1 first (it reads
    this shard right after its own rows), then me-2, ...; so PE q gets the
    shard of q+1 first, then q+2's..., the order of ag_hgemm's tiles."""
    return [(me - i) % npes for i in range(1, npes)]


class AGGemm:
    """c [M, N/n] = all_gather(a [M/n, K]) @ bt [N/n, K]^T on the current stream."""

    def __init__(self, env, m, k, n_loc):
        w = env.world
        self.env, self.m, self.k, self.n, self.m_loc = env, m, k, n_loc, m // w
        if m % w or self.m_loc % BM or n_loc % BN or k % BK:
            raise ValueError("ag_gemm: M/n_pes must be a multiple of %d, N/n_pes of %d and K of %d "
                             "(got M=%d over %d PEs, N/PE=%d, K=%d)" % (BM, BN, BK, m, w, n_loc, k))
        self.chunk_m = CHUNK_ROWS if self.m_loc % CHUNK_ROWS == 0 else self.m_loc
        self.chunks = self.m_loc // self.chunk_m
        self.a_full = symm.zeros((2 * m, k), torch.bfloat16)             # two parity buffers
        self.flags = symm.zeros((2 * w * self.chunks,), torch.uint64)    # [parity][source PE][chunk]
        self.epoch = torch.zeros(1, dtype=torch.int64, device=env.device)
        self.rec = torch.zeros(REC_WORDS, dtype=torch.uint64, device=env.device)  # a wait that gave up
        self.side = torch.cuda.Stream(env.device)
        self.grid = min((m // BM) * (n_loc // BN), symm.sm_share())
        self.calls = 0
        self._copies = {}
        symm.barrier()

    def push_peers(self):
        """The peers this PE's shard goes to, in push order."""
        return push_order(self.env.rank, self.env.world)

    def copy_tuples(self, a, par):
        """(dst, src, bytes) of a call: A_me into each peer's a_full (parity
        par), chunk then flag, PE me-1 first."""
        w, me = self.env.world, self.env.rank
        chunk_bytes = self.chunk_m * self.k * 2
        copies = []
        for q in self.push_peers():
            dst = symm.get_peer_tensor(self.a_full, q)[par * self.m + me * self.m_loc:].data_ptr()
            flag = symm.get_peer_tensor(self.flags, q)[(par * w + me) * self.chunks:].data_ptr()
            for ch in range(self.chunks):
                copies.append((dst + ch * chunk_bytes, a.data_ptr() + ch * chunk_bytes, chunk_bytes))
                copies.append((flag + ch * 8, self.epoch.data_ptr(), 8))
        return copies

    def _copy_list(self, a, par):
        key = (a.data_ptr(), par)
        if key not in self._copies:
            copies = self.copy_tuples(a, par)
            if len(self._copies) >= 8:
                self._close_copies()
            # replay: one graph launch per call instead of 2 * chunks * (n - 1) cuMemcpyAsync
            self._copies[key] = symm.cubin.CopyList(copies, replay=True) if copies else None
        return self._copies[key]

    def launch(self, a, bt, c):
        """The fused kernel of a call (its epoch bumped), then the report of a wait that gave up."""
        self.env.k["ag_hgemm"](self.grid, self.env.ctx, a, self.a_full, bt, c, self.flags, self.epoch, self.rec,
                               self.m, self.n, self.k, self.m_loc, self.chunk_m)
        self.env.k["wait_report"](1, self.env.ctx, self.rec)   # stops with symm's message if a wait gave up

    def __call__(self, a, bt, c):
        if (a.shape != (self.m_loc, self.k) or bt.shape != (self.n, self.k) or c.shape != (self.m, self.n)
                or not (a.is_contiguous() and bt.is_contiguous() and c.is_contiguous())):
            raise ValueError("ag_gemm: expected contiguous a [%d, %d], bt [%d, %d], c [%d, %d]"
                             % (self.m_loc, self.k, self.n, self.k, self.m, self.n))
        self.calls += 1
        par = self.calls % 2                 # the parity of this call's epoch (calls counted from 1)
        ce = self._copy_list(a, par)
        main = torch.cuda.current_stream()
        self.epoch.add_(1)
        if ce is not None:
            self.side.wait_stream(main)      # a and the epoch are ready
            ce(self.side)
            if self.env.shared:
                main.wait_stream(self.side)
                symm.barrier_on_stream()
        self.launch(a, bt, c)
        if ce is not None:
            main.wait_stream(self.side)      # a may change after the call
        return c

    def copies_only(self, a):
        """A call's copies and flags with no GEMM (the caller's stream waits
        for them): what the copy engines take to push this PE's shard to
        every peer, the floor of the fused call where they are slower than
        the GEMM."""
        self.calls += 1
        ce = self._copy_list(a, self.calls % 2)
        main = torch.cuda.current_stream()
        self.epoch.add_(1)
        if ce is not None:
            self.side.wait_stream(main)
            ce(self.side)
            main.wait_stream(self.side)

    def _close_copies(self):
        for ce in self._copies.values():
            if ce is not None:
                ce.close()
        self._copies.clear()

    def close(self):
        torch.cuda.synchronize()
        self._close_copies()
        symm.barrier()
        symm.free_tensor(self.flags)
        symm.free_tensor(self.a_full)


def run(env, args):
    rows, ok = [], True
    w, me = env.world, env.rank
    reps = 5 if args.quick else 10
    names = C.gemm_shapes(env, args)
    for name in names:
        m, k, n = SHAPES[name]
        n_loc = n // w
        op = AGGemm(env, m, k, n_loc)
        a = torch.empty((m // w, k), dtype=torch.bfloat16, device=env.device)
        bt = torch.empty((n_loc, k), dtype=torch.bfloat16, device=env.device)
        c = torch.empty((m, n_loc), dtype=torch.bfloat16, device=env.device)
        a_all = torch.empty((m, k), dtype=torch.bfloat16, device=env.device)
        c_ref = torch.empty((m, n_loc), dtype=torch.bfloat16, device=env.device)
        group, why = C.nccl_group(env)

        def unfused():
            dist.all_gather_into_tensor(a_all, a, group=group)
            torch.matmul(a_all, bt.t(), out=c_ref)

        def fill(s):
            a.copy_(C.data(env, s, me, a.numel(), torch.bfloat16).view_as(a).mul_(0.05))
            bt.copy_(C.data(env, s, 1000 + me, bt.numel(), torch.bfloat16).view_as(bt).mul_(0.05))
            c.fill_(float("nan"))        # a tile the kernel missed cannot pass

        worst = [0.0]

        def verify(s):
            if group is not None:
                unfused()
            else:
                a_all.copy_(torch.cat([C.data(env, s, p, a.numel(), torch.bfloat16).view_as(a).mul_(0.05)
                                       for p in range(w)]))
                torch.matmul(a_all, bt.t(), out=c_ref)
            good, err = C.close_to(c, c_ref)
            worst[0] = max(worst[0], err)
            return good

        good = C.check(env, lambda: op(a, bt, c), fill, verify)
        ok &= good
        # fused, the GEMM alone and torch + NCCL timed in turns (C.paired_us)
        parties = {"fused": lambda: op(a, bt, c),
                   "alone": lambda: env.k["hgemm"](C.gemm_grid(m, n_loc), a_all, bt, c_ref, m, n_loc, k)}
        if group is not None:
            parties["unfused"] = unfused
        t = C.paired_us(parties, reps)
        fused, alone = t["fused"], t["alone"]
        base = t["unfused"] if group is not None else "n/a: " + why
        extra = ""
        if w > 1 and not env.shared:
            comm = C.graph_stream_us(lambda: op.copies_only(a), reps)["graph"]
            extra = "; its copies alone (no GEMM) %s us in a graph (%s)" % (
                C.us(comm), C.rate(comm, (w - 1) * a.numel() * 2))
            if args.timeline:
                T.report(env, [T.ag_call(op, a, bt, c, "ag_gemm %s" % name) for _ in range(2)][-1:])
            good = C.check(env, lambda: op(a, bt, c), fill, verify) and good   # fresh data after timing
            ok &= good
        rows += C.overlap_rows("ag_gemm %s" % name, (m, n_loc, k), good, fused, alone, base)
        env.log("ag_gemm %s: check %s (max |diff| %.2e over %d iterations)%s"
                % (name, "ok" if good else "WRONG", worst[0], 2 * env.iters if extra else env.iters, extra))
        op.close()
    return ("all-gather + GEMM, bf16 (symm.cute, Hopper TMA + wgmma GEMM; copies on the copy engines)",
            C.OVERLAP_HEADER, rows, ok)


if __name__ == "__main__":
    C.main(run, __doc__)
