"""All-gather + GEMM, fused with per-chunk signals (tensor-parallel column layer).

Every PE holds a row shard A_me [M/n, K] of the activations and its column
shard B [K, N/n] of the weight; the layer computes C = all_gather(A) @ B.
Instead of gathering first and multiplying after, the shards travel while the
GEMM runs:

  - the Triton GEMM starts at once: tiles of its own rows read A_me directly,
    tiles of a peer's rows first wait for that chunk's flag
    (signal_wait_until, acquire), so the GEMM computes on whatever has arrived.
    Tiles go in the order the rows arrive: this PE's rows first (they never
    wait), then PE me+1's, me+2's..., each shard chunk by chunk; inside a
    chunk, GROUP_M row tiles share each column tile (_gemm.ag_tile; the
    tile configuration is _gemm.GEMM_CONFIG). A chunk is one such group of
    row tiles by default (--chunks: more, smaller flags), so a group never
    waits for two chunks;
  - a side stream pushes this PE's shard, chunk by chunk, into the peers'
    symmetric A_full with the copy engines (cuMemcpyAsync: no SMs taken from
    the GEMM), and after each chunk copies the call's epoch into the peer's
    flag for that chunk (same stream, so the flag lands after the data).
    Its order matches the consumers': PE me-1 needs this shard right after
    its own rows, PE me-2 after that..., so all chunks go to me-1 first,
    then to me-2, ... (_gemm.ag_push_order).

The epoch is counted on the GPU (main stream), so the call can be captured
into a CUDA graph: the side stream forks from and joins the main stream
through events, which capture records as graph edges.
A_full and the flags are double-buffered by call parity: a peer's push for call
e+2 can only start after this PE finished the GEMM of call e (it waited for
that peer's call-e+1 push, which starts after the peer's call-e GEMM).
PEs sharing one GPU: their kernels run side by side only as far as the SMs
allow, so a peer's push could wait behind waiting GEMM tiles that hold those
SMs; there every PE's pushes land (join, then a stream barrier) before any GEMM
starts (no overlap, the same results).

    torchrun --nproc-per-node 4 examples/triton/ag_gemm.py --M 8192 --K 8192 --N 8192

Reference: torch.distributed.all_gather_into_tensor, then torch.matmul.
"""
import torch
import triton
import triton.language as tl

import _common as C
import _gemm as G
import _waits as W
import symm
import symm.cubin
import symm.triton as st


@triton.jit
def ag_gemm_kernel(ctx, a_local, a_full, b, c, flags, epoch_ptr, rec, M, N, K, M_LOC, CHUNK_M, CHUNKS, ME, NPES,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    """c = all_gather(a) @ b; a peer's rows wait for their chunk's flag
    (>= this call's epoch) inline (_waits: no function call, so the wgmma
    stay pipelined); rec: the record of a wait that gave up. ME, NPES: this
    PE and the PE count (host values: no symm call in the kernel). a_local
    (this PE's rows), a_full (this parity's gathered rows) and b: TMA
    descriptors (_gemm.operand)."""
    me = ME
    npes = NPES
    # this PE's rows first, then the next PE's, ..., each chunk by chunk
    src, row_loc, pid_n = G.ag_tile(tl.program_id(0), me, npes, N, M_LOC, CHUNK_M, BM, BN, GROUP_M)
    a_rows = a_local
    row0 = row_loc
    if src != me:
        chunk = row_loc // CHUNK_M
        W.wait_flag_inline(ctx, flags + src * CHUNKS + chunk, tl.load(epoch_ptr), rec)
        W.fence_proxy_async()                   # the chunk's TMA reads after the flag's acquire
        a_rows = a_full
        row0 = src * M_LOC + row_loc
    acc = G.mma_tile(a_rows, row0, b, K, pid_n, BM, BN, BK)
    offs_m = src * M_LOC + row_loc + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    tl.store(c + offs_m[:, None] * N + offs_n[None, :], acc.to(c.dtype.element_ty),
             mask=offs_n[None, :] < N)


@triton.jit
def ag_finish_kernel(ctx, rec, epoch_ptr):
    """After the GEMM and the join of the side stream (every copy of this
    call's epoch done): report a wait that gave up, then advance the epoch
    for the next call (one launch instead of a report and a torch add)."""
    if tl.load(rec) != 0:
        if st.tid() == 0:
            tl.device_print("symm ag_gemm: a flag wait gave up (deadline or abort): flag address, value seen, "
                            "ns waited", tl.load(rec + 1), tl.load(rec + 2), tl.load(rec + 3))
        st.signal_wait_until(ctx, rec, st.CMP_EQ, 0)
    if st.tid() == 0:
        tl.store(epoch_ptr, tl.load(epoch_ptr) + 1)


class AGGemm:
    """c = all_gather(a) @ b over the PEs: a [M/n, K] this PE's rows, b
    [K, N/n], c [M, N/n], on the current stream.

    The host path does per call only what must happen per call: fork the
    side stream, issue the copy engines' copies
    (a symm.cubin.CopyList, addresses worked out once per input tensor and
    parity, replayed as one CUDA graph launch outside capture instead of
    2 * chunks * (n - 1) cuMemcpyAsync calls, 12 at 4 PEs and 2 chunks) and
    one prepared Triton launch
    (symm.triton.prepare: argument binding and specialisation done once per
    set of tensors), join, and one prepared launch of ag_finish_kernel
    (report a wait that gave up, advance the epoch on the GPU). Why: per chunk, slicing peer tensors and two
    torch copy_ calls cost about 12 us of torch dispatch before their two
    driver calls, and kernel[grid](...) about 100 us (timed on a CPU
    machine, examples/triton/host_profile.py), so with 12 chunks the host
    path rivals the GPU's time per call and a plain stream waits on the
    host; a CopyList entry is one driver call."""

    def __init__(self, env, m, k, n_local, chunks=0, dtype=torch.bfloat16, config=None):
        w = env.world
        self.cx, self.opts = G.split(config or G.GEMM_CONFIG["ag_gemm"])
        bm, bk = self.cx["BM"], self.cx["BK"]
        if chunks < 0:
            raise ValueError("chunks must be 0 (one group of row tiles each) or more, got %d" % chunks)
        self.env, self.m, self.k, self.n = env, m, k, n_local
        self.m_loc = m // w
        if m % w or self.m_loc % bm or k % bk:
            raise ValueError("shapes: M/n_pes must be a multiple of %d and K of %d" % (bm, bk))
        if not chunks:
            chunks = self.m_loc // G.auto_chunk_rows(self.m_loc, bm, self.cx["GROUP_M"])
        self.chunks = chunks
        self.chunk_m = self.m_loc // chunks
        if self.m_loc % chunks or self.chunk_m % bm:
            raise ValueError("shapes: M/n_pes/chunks must be a multiple of %d (M/n_pes=%d, chunks=%d)"
                             % (bm, self.m_loc, chunks))
        self.dtype = dtype
        self.a_full = symm.zeros((2, m, k), dtype)
        self.flags = symm.zeros((2, w * chunks), torch.int64)
        # the copy engines write the flags, which a device trace cannot see:
        # say whose they are, so that its waits on them name the PE (docs/trace.md)
        for par in range(2):
            for q in range(w):
                symm.trace_label(self.flags[par, q * chunks:(q + 1) * chunks], "A rows of PE %d" % q, pe=q)
        # this call's epoch (1 at the first call), advanced on the GPU after each call
        self.epoch_dev = torch.ones(1, dtype=torch.int64, device=env.device)
        self.rec = W.new_record(env.device)
        self._finish = st.prepare(ag_finish_kernel, (1,), env.ctx, self.rec, self.epoch_dev, num_warps=1)
        self.side = torch.cuda.Stream(env.device)
        self._fork, self._join = torch.cuda.Event(), torch.cuda.Event()   # made once: no allocation per call
        self.grid = ((m // bm) * triton.cdiv(n_local, self.cx["BN"]),)
        self.calls = 0
        self._copies = {}                      # (a's address, parity) -> CopyList
        self._launches = {}                    # (parity, a, b, c addresses) -> PreparedLaunch
        symm.barrier()

    def _copy_list(self, a, par):
        """This PE's shard into every peer's a_full[par] (rows me*M/n..),
        chunk by chunk, each chunk followed by its flag word (this call's
        epoch, copied from the device word): all chunks to PE me-1 first, which
        needs this shard right after its own rows, then me-2, ..."""
        key = (a.data_ptr(), par)
        ce = self._copies.get(key)
        if ce is None:
            w, me = self.env.world, self.env.rank
            esz = a.element_size()
            chunk_bytes = self.chunk_m * self.k * esz
            copies = []
            for q in G.ag_push_order(me, w):
                dst = symm.get_peer_tensor(self.a_full, q)[par, me * self.m_loc:].data_ptr()
                flag = symm.get_peer_tensor(self.flags, q)[par, me * self.chunks:].data_ptr()
                for ch in range(self.chunks):
                    copies.append((dst + ch * chunk_bytes, a.data_ptr() + ch * chunk_bytes, chunk_bytes))
                    copies.append((flag + ch * 8, self.epoch_dev.data_ptr(), 8))
            if len(self._copies) >= 8:
                self._close_copies()
            # replay: one graph launch per call instead of 2 * chunks * (n - 1) cuMemcpyAsync
            ce = self._copies[key] = symm.cubin.CopyList(copies, replay=True)
        return ce

    def _launch(self, a, b, c, par):
        key = (par, a.data_ptr(), b.data_ptr(), c.data_ptr())
        run = self._launches.get(key)
        if run is None:
            if len(self._launches) >= 8:
                self._launches.clear()
            a_d, b_d = G.operands(a, b, self.cx)
            full_d = G.operand(self.a_full[par], self.cx["BM"], self.cx["BK"], "the gathered rows")
            run = self._launches[key] = st.prepare(
                ag_gemm_kernel, self.grid, self.env.ctx, a_d, full_d, b_d, c, self.flags[par],
                self.epoch_dev, self.rec, self.m, self.n, self.k, self.m_loc, self.chunk_m, self.chunks,
                self.env.rank, self.env.world,
                **self.cx, **self.opts)
        return run

    def __call__(self, a, b, c):
        if (a.shape != (self.m_loc, self.k) or b.shape != (self.k, self.n) or c.shape != (self.m, self.n)
                or not (a.is_contiguous() and b.is_contiguous() and c.is_contiguous())
                or not a.dtype == b.dtype == c.dtype == self.dtype):
            raise ValueError("expected contiguous %s a [%d, %d], b [%d, %d], c [%d, %d]"
                             % (self.dtype, self.m_loc, self.k, self.k, self.n, self.m, self.n))
        par = self.calls % 2
        self.calls += 1
        ce, run = self._copy_list(a, par), self._launch(a, b, c, par)
        main = torch.cuda.current_stream()
        self._fork.record(main)
        self.side.wait_event(self._fork)       # a and this call's epoch_dev are ready
        ce(self.side)
        self._join.record(self.side)
        if self.env.shared:
            # PEs on one GPU run side by side only as far as SMs allow: every
            # PE's pushes land before any GEMM starts, so its tiles never spin
            # on SMs a peer's push needs
            main.wait_event(self._join)
            symm.barrier_on_stream()
        run()
        main.wait_event(self._join)            # a may be reused after this call
        self._finish()                         # report; the next call's epoch
        return c

    def _close_copies(self):
        for ce in self._copies.values():
            ce.close()
        self._copies.clear()

    def close(self):
        torch.cuda.synchronize()
        self._close_copies()
        symm.barrier()
        for par in range(2):
            for q in range(self.env.world):
                symm.trace_label(self.flags[par, q * self.chunks:(q + 1) * self.chunks], None)
        symm.free_tensor(self.flags)
        symm.free_tensor(self.a_full)


def run(m=8192, k=8192, n=8192, iters=20, bench=True, checks=2, chunks=0):
    """Check the fused op against NCCL all_gather + torch.matmul (fresh data
    each iteration), then time it, the unfused torch + NCCL, and the GEMM
    alone (the examples' Triton GEMM at the per-PE shape, no communication).
    chunks: flags per shard (0: one group of row tiles each)."""
    env = C.setup()
    w = env.world
    n_loc = n // w
    op = AGGemm(env, m, k, n_loc, chunks=chunks)
    a = torch.empty(m // w, k, dtype=torch.bfloat16, device=env.device)
    b = torch.empty(k, n_loc, dtype=torch.bfloat16, device=env.device)
    c = torch.empty(m, n_loc, dtype=torch.bfloat16, device=env.device)
    full = torch.empty(m, k, dtype=torch.bfloat16, device=env.device)
    worst = [0.0]

    def check(first):
        good = True
        for it in range(first, first + checks):
            g = torch.Generator(device=env.device).manual_seed(31000 * it + env.rank)
            a.normal_(generator=g).mul_(0.05)
            b.normal_(generator=g).mul_(0.05)
            c.fill_(float("nan"))              # a tile the kernel missed cannot pass
            op(a, b, c)
            C.REF.all_gather_into_tensor(full, a)
            ref = torch.matmul(full, b)
            worst[0] = max(worst[0], (c.float() - ref.float()).abs().max().item())
            good &= torch.allclose(c.float(), ref.float(), rtol=2e-2, atol=2e-2)
        return good
    ok = C.all_ok(check(0))
    t_symm = t_ref = t_alone = host = None
    if bench:
        c_ref = torch.empty_like(c)

        def ref():
            C.REF.all_gather_into_tensor(full, a)
            torch.matmul(full, b, out=c_ref)
        cx, opts = op.cx, op.opts
        alone = st.prepare(G.gemm_kernel, op.grid, *G.operands(full, b, cx), c_ref, m, n_loc, k, op.m_loc, **cx,
                           **opts)
        t_symm = C.bench(lambda: op(a, b, c), iters)
        host = C.LAST_HOST_US
        t_ref = C.bench_ref(ref, iters)
        t_alone = C.bench(alone, iters)
        ok = C.all_ok(check(checks)) and ok    # fresh data after the timed calls
    op.close()
    C.report(env, "ag_gemm", "M=%d K=%d N=%d (N/PE=%d) bf16, %d chunks per shard, %d iterations vs "
             "all_gather+matmul, max abs err %.2e" % (m, k, n, n_loc, op.chunks, 2 * checks if bench else checks,
                                                      worst[0]), ok,
             [("symm.triton", t_symm), ("NCCL all_gather + torch.matmul", t_ref),
              ("Triton GEMM alone", t_alone)])
    return {"ok": ok, "symm_us": t_symm, "ref_us": t_ref, "alone_us": t_alone, "alone": "Triton GEMM",
            "mnk": (m, n_loc, k), "host_us": host}


if __name__ == "__main__":
    C.main(run, __doc__.split("\n")[0], m=8192, k=8192, n=8192, chunks=0)
