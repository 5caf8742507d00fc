"""GEMM + reduce-scatter with symm.cute (tensor-parallel row layer):
out_r = rows r*M/n.. of the sum over PEs of A_p @ Bt_p^T, one Hopper GEMM
(hopper_gemm.py: TMA, wgmma, 4-stage pipeline) per PE with the reduction
inside it.

Every PE holds a column shard A [M, K/n] of the activations and the matching
shard Bt [N, K/n] of the weight. One persistent grid per PE computes the
partial bands (the rows one PE owns) in the order owner = me+1, me+2, ...,
me, so PE me-1 computes this PE's band first and the own band comes last.
Two ways to move the peers' partials (--variants):

  ce    (GemmRSCE, rs_hgemm_ce) the GEMM's SMs only compute: a peer band's
        tile is stored locally (a staging buffer) and counted per sub-chunk
        (GROUP_M row tiles x every column, release). A side stream that the
        host fills once per operation, without the CPU in the loop at run
        time, waits on the GPU for each sub-chunk's count
        (cuStreamWaitValue64), copies the sub-chunk into the owner's receive
        slot with cuMemcpyAsync (the copy engines over NVLink: no SM) and
        then sets the owner's flag for it (an 8-byte copy after the data on
        the same stream). The own band's tiles wait for their sub-chunk's
        flags, add the peers' partials in fp32 and store the sum. An
        `entered` word per peer keeps a fast peer from copying call e+1 into
        a receive slot this PE still reads in call e. An own-band tile asks
        L2 for the peers' partials before its mainloop (ce-noprefetch: not).
        ce-owners: a side stream per owner (copies to several at once).
  push  (GemmRS, rs_hgemm) a peer band's tile is stored by the epilogue
        straight into the owner's receive buffer over NVLink (SM stores),
        then flagged; the own band reduces as above.

Where PEs share a GPU, the ce variant runs as two launches (the peer bands,
then -- once every PE's copies have landed -- the own band), so no waiting
tile holds SMs that a copy might need; push waits as is.

Checked against torch.matmul + torch.distributed's reduce_scatter_tensor (or,
where PEs share a GPU, the sum rebuilt from the seeds) with fresh data every
iteration, and timed (CUDA graphs and a plain stream) next to the GEMM alone
at the same per-PE shape and the unfused torch + NCCL.

    torchrun --nproc-per-node 4 examples/cute/gemm_rs.py [--cubins build-cute] [--shape square,llm]
        [--variants ce,ce-owners,ce-noprefetch,push]
"""
import torch
import torch.distributed as dist

import _common as C
import _timeline as T
import symm
from symm import copyengine as ce

BM, BN, BK = 128, 256, 64   # hopper_gemm.py's tile
GROUP_M = 8                 # hopper_gemm.py's row tiles per group
REC_WORDS = 4               # hopper_gemm.py's record of a wait that gave up
VARIANTS = ("ce", "ce-owners", "ce-noprefetch", "push")
# (M, K, N) of the layer, K sharded over the PEs: the square benchmark shape,
# an LLM MLP down-projection (intermediate 28672, hidden 8192, 4096 tokens), and
# a small one for quick runs and PEs sharing a GPU
SHAPES = {"square": (8192, 8192, 8192), "llm": (4096, 28672, 8192), "small": (1024, 2048, 1024)}


class GemmRS:
    """out [M/n, N] = reduce_scatter(a [M, K/n] @ bt [N, K/n]^T) on the current stream."""

    def __init__(self, env, m, k_loc, n):
        w = env.world
        self.env, self.m, self.k, self.n, self.m_loc = env, m, k_loc, n, m // w
        if m % w or self.m_loc % BM or n % BN or k_loc % BK:
            raise ValueError("gemm_rs: M/n_pes must be a multiple of %d, N of %d and K/n_pes of %d "
                             "(got M=%d over %d PEs, N=%d, K/PE=%d)" % (BM, BN, BK, m, w, n, k_loc))
        band_tiles = (self.m_loc // BM) * (n // BN)
        self.recv = symm.zeros((2 * w * self.m_loc, n), torch.bfloat16)   # [parity][sender] slots
        self.flags = symm.zeros((2 * w * band_tiles,), torch.uint64)      # [parity][sender][tile]
        self.grid = min(w * band_tiles, symm.sm_share())
        self.counters = torch.zeros(self.grid, dtype=torch.uint64, device=env.device)
        symm.barrier()

    def __call__(self, a, bt, out):
        if (a.shape != (self.m, self.k) or bt.shape != (self.n, self.k) or out.shape != (self.m_loc, self.n)
                or not (a.is_contiguous() and bt.is_contiguous() and out.is_contiguous())):
            raise ValueError("gemm_rs: expected contiguous a [%d, %d], bt [%d, %d], out [%d, %d]"
                             % (self.m, self.k, self.n, self.k, self.m_loc, self.n))
        self.env.k["rs_hgemm"](self.grid, self.env.ctx, a, bt, self.recv, self.flags, out, self.counters,
                               self.m, self.n, self.k)
        return out

    def close(self):
        torch.cuda.synchronize()
        symm.barrier()
        symm.free_tensor(self.flags)
        symm.free_tensor(self.recv)


class GemmRSCE:
    """out [M/n, N] = reduce_scatter(a [M, K/n] @ bt [N, K/n]^T) on the current
    stream, the partials moved by the copy engines (module doc: ce).

    lanes: 1 (every owner's sub-chunks on one side stream, in band order) or
    "owners" (a side stream per owner); prefetch: the own band's tiles
    prefetch the peers' partials into L2 before their mainloop."""

    def __init__(self, env, m, k_loc, n, lanes=1, prefetch=True):
        w = env.world
        self.env, self.m, self.k, self.n, self.m_loc = env, m, k_loc, n, m // w
        self.prefetch = 1 if prefetch else 0
        if m % w or self.m_loc % BM or n % BN or k_loc % BK:
            raise ValueError("gemm_rs: M/n_pes must be a multiple of %d, N of %d and K/n_pes of %d "
                             "(got M=%d over %d PEs, N=%d, K/PE=%d)" % (BM, BN, BK, m, w, n, k_loc))
        if lanes not in (1, "owners"):
            raise ValueError("gemm_rs: lanes is 1 or 'owners', not %r" % (lanes,))
        if w > 1:
            ce.check_memops(env.device.index)
        # a sub-chunk is whole groups of row tiles (the GEMM's order inside a band)
        self.sub_m = GROUP_M * BM if self.m_loc % (GROUP_M * BM) == 0 else self.m_loc
        self.subs = self.m_loc // self.sub_m
        self.tiles_sub = (self.sub_m // BM) * (n // BN)
        self.tiles = w * self.subs * self.tiles_sub
        self.stage = torch.empty((m, n), dtype=torch.bfloat16, device=env.device)  # peers' rows only
        self.recv = symm.zeros((w * self.m_loc, n), torch.bfloat16)     # [sender][m_loc][n]
        self.done = symm.zeros((w * self.subs,), torch.uint64)          # [owner][sub]: tiles stored
        self.rflag = symm.zeros((w * self.subs,), torch.uint64)         # [sender][sub]: landed
        self.entered = symm.zeros((w,), torch.uint64)                   # [peer]: its slot for us is free
        self.rec = torch.zeros(REC_WORDS, dtype=torch.uint64, device=env.device)  # a wait that gave up
        self.ones = ce.ones(env.device)
        self.grid = min(self.tiles, symm.sm_share())
        self.program = self.side = None
        if w > 1:
            self.program = self._program(w - 1 if lanes == "owners" else 1)
            self.side = ce.Side(env.device, self.program.lanes)
            self.side.prepare(self.program)
        symm.barrier()

    def _program(self, lanes):
        """The side streams' work of one call (fixed addresses and values, so
        a CUDA graph replays it): tell every peer that our receive slots are
        free; then per owner, in the GEMM's band order: wait until it said
        so, and per sub-chunk wait for its count, zero the count, copy the
        sub-chunk into the owner's slot and set the owner's flag."""
        w, me, n = self.env.world, self.env.rank, self.n
        es, one = 8, self.ones.data_ptr()
        piece = self.sub_m * n * 2
        prog = ce.Program(lanes)
        for q in range(w):
            if q != me:
                prog.copy(ce.peer(self.entered.data_ptr() + me * es, q), one, es)
        for b in range(w - 1):
            c = (me + 1 + b) % w
            lane = b % lanes
            entered = self.entered.data_ptr() + c * es
            prog.wait_eq(entered, 1, lane)
            prog.write(entered, 0, lane)
            for j in range(self.subs):
                done = self.done.data_ptr() + (c * self.subs + j) * es
                prog.wait_ge(done, self.tiles_sub, lane)
                prog.write(done, 0, lane)
                src = self.stage.data_ptr() + (c * self.m_loc * n) * 2 + j * piece
                dst = ce.peer(self.recv.data_ptr() + (me * self.m_loc * n) * 2 + j * piece, c)
                prog.copy(dst, src, piece, lane)
                prog.copy(ce.peer(self.rflag.data_ptr() + (me * self.subs + j) * es, c), one, es, lane)
        return prog

    def _check(self, a, bt, out):
        if (a.shape != (self.m, self.k) or bt.shape != (self.n, self.k) or out.shape != (self.m_loc, self.n)
                or not (a.is_contiguous() and bt.is_contiguous() and out.is_contiguous())):
            raise ValueError("gemm_rs: expected contiguous a [%d, %d], bt [%d, %d], out [%d, %d]"
                             % (self.m, self.k, self.n, self.k, self.m_loc, self.n))

    def _gemm(self, a, bt, out, t0, t1):
        self.env.k["rs_hgemm_ce"](self.grid, self.env.ctx, a, bt, self.stage, self.recv, self.done, self.rflag,
                                  out, self.rec, self.m, self.n, self.k, self.sub_m, t0, t1, self.prefetch)

    def _report(self):
        """Stop with symm's message if one of the kernel's waits gave up."""
        self.env.k["wait_report"](1, self.env.ctx, self.rec)

    def __call__(self, a, bt, out):
        self._check(a, bt, out)
        s = self.side
        if s is None:
            self._gemm(a, bt, out, 0, self.tiles)
            return out
        s.begin(self.program)
        if self.env.shared:
            # the peer bands; every PE's copies landed; then the own band
            own = self.tiles - self.subs * self.tiles_sub
            self._gemm(a, bt, out, 0, own)
            s.run()
            s.end()
            symm.barrier_on_stream()
            self._gemm(a, bt, out, own, self.tiles)
        else:
            self._gemm(a, bt, out, 0, self.tiles)   # launched first: the side stream then waits on it
            s.run()
        self._report()
        s.main_fill(self.rflag, 0)                   # every flag was waited for by some own-band tile
        if not self.env.shared:
            s.end()
        return out

    def kernel_only(self, a, bt, out):
        """The fused kernel with no communication (flags set beforehand, the
        counts its tiles leave zeroed after it): what the GEMM's SMs pay."""
        self._check(a, bt, out)
        if self.side is None:                        # one PE: no peer band, no flag
            self._gemm(a, bt, out, 0, self.tiles)
            return
        self.side.main_fill(self.rflag, 1)
        self._gemm(a, bt, out, 0, self.tiles)
        self.side.main_fill(self.done, 0)
        self.side.main_fill(self.rflag, 0)

    def comm_only(self):
        """The side stream's work of a call with no GEMM (every count set as
        the GEMM leaves it; the caller's stream waits for the peers' flags):
        what the copy engines take to move this PE's partials, the floor of
        the fused call where they are slower than the GEMM."""
        s = self.side
        if s is None:
            return
        w, me = self.env.world, self.env.rank
        s.main_fill(self.done, self.tiles_sub)
        s.begin(self.program)
        s.run()
        for p in range(w):
            if p != me:
                for j in range(self.subs):
                    s.main_wait_eq(self.rflag.data_ptr() + (p * self.subs + j) * 8, 1)
        s.end()
        s.main_fill(self.done, 0)                    # this PE's own band's counts are never waited for
        s.main_fill(self.rflag, 0)

    def close(self):
        torch.cuda.synchronize()
        symm.barrier()
        self.side = self.program = None              # its graph names the buffers freed next
        for t in (self.entered, self.rflag, self.done, self.recv):
            symm.free_tensor(t)


def make_op(env, variant, m, k_loc, n):
    if variant == "push":
        return GemmRS(env, m, k_loc, n)
    return GemmRSCE(env, m, k_loc, n, lanes="owners" if variant == "ce-owners" else 1,
                    prefetch=variant != "ce-noprefetch")


def variants_of(args):
    names = (getattr(args, "variants", None) or "ce,push").split(",")
    bad = [v for v in names if v not in VARIANTS]
    if bad:
        raise ValueError("gemm_rs: no variant %s (choose among %s)" % (", ".join(bad), ", ".join(VARIANTS)))
    return names


def run(env, args):
    rows, ok = [], True
    w, me = env.world, env.rank
    reps = 5 if args.quick else 10
    names = C.gemm_shapes(env, args)
    variants = variants_of(args)
    for name in names:
        m, k, n = SHAPES[name]
        k_loc = k // w
        a = torch.empty((m, k_loc), dtype=torch.bfloat16, device=env.device)
        bt = torch.empty((n, k_loc), dtype=torch.bfloat16, device=env.device)
        out = torch.empty((m // w, n), dtype=torch.bfloat16, device=env.device)
        part = torch.empty((m, n), dtype=torch.bfloat16, device=env.device)
        out_ref = torch.empty((m // w, n), dtype=torch.bfloat16, device=env.device)
        group, why = C.nccl_group(env)

        def unfused():
            torch.matmul(a, bt.t(), out=part)
            dist.reduce_scatter_tensor(out_ref, part, group=group)

        def inputs(s, p):
            return (C.data(env, s, p, a.numel(), torch.bfloat16).view_as(a).mul_(0.05),
                    C.data(env, s, 1000 + p, bt.numel(), torch.bfloat16).view_as(bt).mul_(0.05))

        def fill(s):
            ai, bi = inputs(s, me)
            a.copy_(ai)
            bt.copy_(bi)
            out.fill_(float("nan"))

        worst = [0.0]

        def verify(s):
            if group is not None:
                unfused()
            else:
                total = torch.zeros((m // w, n), dtype=torch.float32, device=env.device)
                for p in range(w):
                    ai, bi = inputs(s, p)
                    total += torch.matmul(ai[me * (m // w):(me + 1) * (m // w)], bi.t()).float()
                out_ref.copy_(total)
            good, err = C.close_to(out, out_ref)
            worst[0] = max(worst[0], err)
            return good

        def alone_fn():
            env.k["hgemm"](C.gemm_grid(m, n), a, bt, part, m, n, k_loc)

        for v in variants:
            op = make_op(env, v, m, k_loc, n)
            try:
                worst[0] = 0.0
                good = C.check(env, lambda: op(a, bt, out), fill, verify)
                # fused, the GEMM alone and torch + NCCL timed in turns (C.paired_us)
                parties = {"fused": lambda: op(a, bt, out), "alone": alone_fn}
                if group is not None:
                    parties["unfused"] = unfused
                if isinstance(op, GemmRSCE):
                    parties["kernel"] = lambda: op.kernel_only(a, bt, out)
                t = C.paired_us(parties, reps)
                fused, alone = t["fused"], t["alone"]
                base = t["unfused"] if group is not None else "n/a: " + why
                extra = ""
                if isinstance(op, GemmRSCE):
                    extra = "; its kernel alone (no communication) %s us in a graph (GEMM alone %s)" % (
                        C.us(t["kernel"]["graph"]), C.us(alone["graph"]))
                    if op.side is not None and not env.shared:
                        comm = C.graph_stream_us(op.comm_only, reps)["graph"]
                        extra += "; its copies alone (no GEMM) %s us in a graph (%s)" % (
                            C.us(comm), C.rate(comm, (w - 1) * (m // w) * n * 2))
                        if args.timeline:
                            T.report(env, [T.rs_call(op, a, bt, out, "gemm_rs %s %s" % (name, v))
                                           for _ in range(2)][-1:])
                    if op.side is not None and op.side.graph_error:
                        extra += "; side program not graphed (%s)" % op.side.graph_error
                good = C.check(env, lambda: op(a, bt, out), fill, verify) and good   # fresh data after timing
            finally:
                op.close()
            ok &= good
            rows += C.overlap_rows("gemm_rs %s %s" % (name, v), (m, n, k_loc), good, fused, alone, base)
            env.log("gemm_rs %s %s: check %s (max |diff| %.2e over %d iterations)%s"
                    % (name, v, "ok" if good else "WRONG", worst[0], 2 * env.iters, extra))
    return ("GEMM + reduce-scatter, bf16 (symm.cute, Hopper TMA + wgmma GEMM; ce: partials staged locally "
            "and moved by the copy engines; push: partials stored to the owner by the epilogue)",
            C.OVERLAP_HEADER, rows, ok)


if __name__ == "__main__":
    C.main(run, __doc__)
