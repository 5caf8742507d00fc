"""GEMM + reduce-scatter, overlapped (tensor-parallel row layer).

Every PE holds a column shard A [M, K/n] of the activations and the matching
row shard B [K/n, N] of the weight; the layer computes
out_r = sum over PEs of (A @ B)[rows of PE r] (a "band": the M/n rows PE r
owns). Instead of a full GEMM followed by a reduce-scatter, the partial bands
travel while the GEMM runs, moved by the copy engines (no SMs taken from the
GEMM), and the reduction is fused into the GEMM of this PE's own band. Two
designs (--design):

ce (GemmRSCE, the default): one Triton GEMM (gemm_rs_ce_kernel) over every
band, in the order owner = me+1, me+2, ..., me (own band last), each band
sub-chunk by sub-chunk (a group of GROUP_M row tiles x every column). A peer
band's tile is stored into a local staging buffer and counted per sub-chunk
(a release add after a barrier of the program). A side stream, filled once
per operation (symm.copyengine: replayed as a CUDA graph on a plain stream,
queued into the caller's graph under capture), waits on the GPU for each
count (cuStreamWaitValue64), copies the sub-chunk into the owner's receive
slot (cuMemcpyAsync: the copy engines over NVLink) and then sets the
owner's flag for it (an 8-byte copy after the data on the same stream). The
own band's tiles wait for their sub-chunk's flags inline (_waits.py: no
function call, so ptxas keeps the wgmma pipelined), add the peers' partials
in fp32 and store the sum. The host's work per call: one fork, the GEMM
launch, the side graph's replay, one small kernel (flag reset, report of a
wait that gave up), one join. GemmRSCE's docstring has the protocol.

events (GemmRS): the design below, kept for comparison.

  - the main stream computes the partial bands of the other PEs, in the
    order owner = me+1, me+2, ..., me-1, each band in `chunks` row chunks,
    one plain GEMM launch per chunk into a local staging buffer (no
    communication inside: by default torch.mm, the fastest GEMM at hand;
    --partial triton runs the examples' Triton GEMM, _gemm.gemm_kernel);
  - after each chunk, a side stream waits for the main stream (an event),
    copies the chunk into the owner's symmetric receive buffer (slot `me`,
    peer tensors, cudaMemcpyAsync on the copy engines), then copies this
    call's epoch into the owner's flags of that chunk's row tiles (same
    stream, so the flags land after the data). Chunks go to the side streams
    round robin (--streams, one by default, as in ag_gemm.py);
  - the own band comes last, in one Triton kernel (gemm_rs_kernel), its
    tiles chunk by chunk in the order the chunks arrive: each tile
    runs its main loop, then, for each peer p in the order their partials
    arrive (me-1 computed this PE's band first, me+1 last), waits for p's flag
    of its row tile (inline, acquire), adds p's partial tile to
    its fp32 accumulator, and writes the output: the reduction costs no
    separate pass and its inputs crossed NVLink while the GEMM ran.

Per PE: (n-1)/n of the GEMM at cuBLAS speed + the own band's fused GEMM,
with the copies hidden behind them except for the last chunk of the band PE
me+1 computed last (its copy runs beside this PE's own band; the tiles that
need it come last in the own band's tile order, --chunks makes the piece
smaller). The tile configuration of the Triton GEMMs is _gemm.GEMM_CONFIG.

Synchronisation of the events design. Each call has an epoch e (1, 2, ..., counted on the GPU)
and a parity par (the host's call count mod 2, so e and par alternate
together):

  Buffers. recv[par][p] (symmetric, M/n x N bf16) and flags[par][p][t]
  (symmetric int64, one per row tile t of the own kernel): PE p's partial of
  this PE's band and the epoch of the last parity-`par` call whose rows of
  tile t arrived. staging (local, M x N bf16): this PE's partial bands before
  they are copied. epoch (local int64): e, incremented on the main stream at
  the start of the call, so CUDA graph replays count too.

  Wait targets. The own kernel of call e waits for flags[par][p][t] >= e.
  Only parity-`par` calls write that word, with their epochs, so before this
  call's write it holds e-2 or less (0 at first); it holds e or more only
  once this call's (or, see below, a later call's) data is there. Every PE
  makes the same calls in the same order (eagerly or in graphs of an even
  number of calls), so epoch and parity mean the same call on every PE: the
  host keeps the parity (calls % 2, advanced at capture time by an even
  count), the GPU the epoch.

  Reuse of recv/flags (double buffering). PE p writes recv[par][p] and its
  flags again in call e+2. That happens after this PE's call-e own kernel
  finished reading them: p's call-(e+2) copies wait (events) for p's
  call-(e+2) GEMMs, which follow p's call-(e+1) own kernel on p's main
  stream; that kernel finished only after it saw this PE's call-(e+1) flags,
  copied by this PE's side stream after this PE's call-(e+1) GEMMs, which
  follow this PE's call-e own kernel on its main stream. So a flag >= e seen
  in call e is this call's, never the next same-parity call's.
  Reuse of staging (single): call e+1's GEMMs follow, on the main stream,
  the end of call e, which joins the side streams (all call-e copies done).

  No deadlock. The own kernel of call e waits only for the peers' call-e
  copies. A peer's call-e copies wait only for that peer's call-e partial
  GEMMs (no waits in them), which follow the peer's call-(e-1) own kernel:
  by induction over calls every call-e copy is issued and runs. The copies
  are cudaMemcpyAsync between contiguous device buffers of one dtype, done
  by copy engines (as in ag_gemm.py), so they run even while the own
  kernel's waiting tiles hold every SM of the GPU, here or on the peer (its
  grid is larger than the GPU: later tiles run when earlier ones finish;
  none of them feeds a wait). The own kernel of a PE is
  enqueued after all of its partial GEMMs and copies, so a slow host (first
  call: Triton compiles the kernel) delays only its own output. Graph
  replays keep every edge above: the side streams fork from and join the
  main stream through events, which capture records as graph edges, and
  each replay starts after the previous one finished on that PE. A wait that
  still could not finish (a bug, a dead peer) stops the kernel after
  SYMM_WAIT_TIMEOUT seconds with a message instead of hanging.

  PEs sharing one GPU: their kernels run side by side only as far as the SMs
  allow, so a peer's partial GEMM or copy could wait behind waiting tiles that
  hold those SMs; there every PE's copies land (join, then a stream barrier)
  before any own kernel starts, whose waits then pass at once (no overlap, the
  same results).

  Ordering of data and flag: the flag copy follows the data copy on the same
  stream (it starts after the data copy completed); the waiting threads
  acquire at system scope before they load the partial.

    torchrun --nproc-per-node 4 examples/triton/gemm_rs.py --M 8192 --K 8192 --N 8192
             [--design ce|events] [--lanes 1 (0: a side stream per owner)] [--stages 0]
             [--chunks 2] [--streams 1] [--partial torch|triton]   (the last three: events)

Reference: torch.matmul, then torch.distributed.reduce_scatter_tensor.
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
from symm import copyengine as ce


@triton.jit
def gemm_rs_kernel(ctx, a, b, recv, counters, out, gen, rec, M, N, K, M_LOC, CHUNK_M, VEC: tl.constexpr,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    """out = A[own band] @ B + the n-1 peers' partials of the band.

    a: the whole A shard [M, K] (its TMA descriptor, as b's: _gemm.operand),
    of which this kernel reads rows me*M_LOC ... (M = n * M_LOC itself is not
    needed: offsets come from M_LOC).
    recv: this parity's receive buffer [n, M_LOC, N] (slot p: PE p's
    partial). counters: this parity's flags [n, M_LOC/BM],
    one per sender and row tile (the epoch of the last call whose rows of the
    tile arrived). gen: this call's epoch (gen[0]). VEC: N % 8 == 0 and out
    16-byte aligned (recv is: symmetric), told to Triton for 16-byte
    loads/stores whatever it infers from N. CHUNK_M: rows per copied
    chunk; the tiles go chunk by chunk, in the order the chunks arrive
    (chunk 0 first from every sender), so the tiles that need the last copy
    (PE me+1's last chunk, which runs beside this kernel) come last.
    rec: the record of a wait that gave up (_waits: inline, no call).
    Grid: (M_LOC/BM) * cdiv(N, BN) programs, one tile each."""
    me = st.my_pe(ctx)
    npes = st.n_pes(ctx)
    row0, pid_n = G.chunk_tile(tl.program_id(0), N, CHUNK_M, BM, BN, GROUP_M)
    pid_m = row0 // BM
    acc = G.mma_tile(a, me * M_LOC + row0, b, K, pid_n, BM, BN, BK)
    lrow = row0 + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    idx = lrow[:, None] * N + offs_n[None, :]
    nmask = offs_n[None, :] < N
    epoch = tl.load(gen)
    row_tiles = M_LOC // BM
    for i in range(1, npes):
        p = (me + npes - i) % npes             # PE me-1 sent this band first, PE me+1 last
        W.wait_flag_inline(ctx, counters + p * row_tiles + pid_m, epoch, rec)
        src = recv + p * M_LOC * N + idx
        if VEC:
            src = tl.max_contiguous(tl.multiple_of(src, [16, 16]), [1, BN])
        acc += tl.load(src, mask=nmask).to(tl.float32)
    dst = out + idx
    if VEC:
        dst = tl.max_contiguous(tl.multiple_of(dst, [16, 16]), [1, BN])
    tl.store(dst, acc.to(out.dtype.element_ty), mask=nmask)



@triton.jit
def gemm_rs_ce_kernel(ctx, a, b, stage, recv, done, rflag, out, rec, N, K, M_LOC, SUB_M, ME, NPES, T0,
                      VEC: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                      GROUP_M: tl.constexpr):
    """GemmRSCE's kernel: tile T0 + program_id of the bands in the order
    owner = ME+1, ME+2, ..., ME (own band last), each band sub-chunk by
    sub-chunk (SUB_M rows, grouped inside: _gemm.chunk_tile).

    A peer band's tile is stored into stage (this PE's memory, rows of the
    owner's band) and counted in done[owner][sub] with a release add after
    a barrier of the program: the side stream's copy of the sub-chunk waits
    for the count (cuStreamWaitValue64). An own-band tile waits for
    rflag[p][sub] of every peer p (set to 1 by p's copy engine after the
    data; inline, so the wgmma stay pipelined), adds recv[p]'s rows in fp32
    and stores the sum into out. rec: the record of a wait that gave up.
    a, b: TMA descriptors (_gemm.operand)."""
    t = T0 + tl.program_id(0)
    band_tiles = (M_LOC // BM) * tl.cdiv(N, BN)
    band = t // band_tiles
    row0, pid_n = G.chunk_tile(t - band * band_tiles, N, SUB_M, BM, BN, GROUP_M)
    owner = (ME + 1 + band) % NPES
    acc = G.mma_tile(a, owner * M_LOC + row0, b, K, pid_n, BM, BN, BK)
    offs_m = row0 + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    idx = offs_m[:, None] * N + offs_n[None, :]
    nmask = offs_n[None, :] < N
    subs = M_LOC // SUB_M
    sub = row0 // SUB_M
    if owner != ME:
        dst = stage + owner * M_LOC * N + idx
        if VEC:
            dst = tl.max_contiguous(tl.multiple_of(dst, [16, 16]), [1, BN])
        tl.store(dst, acc.to(stage.dtype.element_ty), mask=nmask)
        tl.debug_barrier()                      # every thread's stores, then one release add
        tl.atomic_add(done + owner * subs + sub, 1, sem="release", scope="sys")
    else:
        for i in range(1, NPES):               # PE ME-1 computed this band first, ME+1 last
            W.wait_flag_inline(ctx, rflag + ((ME + NPES - i) % NPES) * subs + sub, 1, rec)
        # the sum in two column halves: half the registers for the partials' tiles
        lo, hi = acc.reshape(BM, 2, BN // 2).permute(0, 2, 1).split()
        _add_partials_store(lo, recv, out, row0, pid_n * BN, N, M_LOC, ME, NPES, VEC, BM, BN // 2)
        _add_partials_store(hi, recv, out, row0, pid_n * BN + BN // 2, N, M_LOC, ME, NPES, VEC, BM, BN // 2)


@triton.jit
def _add_partials_store(acc, recv, out, row0, col0, N, M_LOC, ME, NPES, VEC: tl.constexpr, BM: tl.constexpr,
                        BW: tl.constexpr):
    """out[row0:+BM, col0:+BW] = acc + the peers' partials of those elements."""
    offs_m = row0 + tl.arange(0, BM)
    offs_n = col0 + tl.arange(0, BW)
    idx = offs_m[:, None] * N + offs_n[None, :]
    nmask = offs_n[None, :] < N
    for i in range(1, NPES):
        src = recv + ((ME + NPES - i) % NPES) * M_LOC * N + idx
        if VEC:
            src = tl.max_contiguous(tl.multiple_of(src, [16, 16]), [1, BW])
        acc += tl.load(src, mask=nmask).to(tl.float32)
    dst = out + idx
    if VEC:
        dst = tl.max_contiguous(tl.multiple_of(dst, [16, 16]), [1, BW])
    tl.store(dst, acc.to(out.dtype.element_ty), mask=nmask)

class GemmRSCE:
    """out = reduce_scatter(a @ b) over the PEs, a [M, K/n], b [K/n, N],
    out [M/n, N], all contiguous, on the current stream: one Triton GEMM
    over every band (gemm_rs_ce_kernel), the peers' partials moved by the
    copy engines from a side stream that the host fills once per operation
    (symm.copyengine: a CUDA graph replayed per call on a plain stream, its
    operations queued into the caller's graph under capture).

    Per call, the side stream (forked from the caller's stream): tells
    every peer that this PE's receive slot for it is free (a copy of 1 into
    the peer's entered[me]); then per owner c, in the kernel's band order:
    waits until c said the same (entered[c] == 1, zeroed after), and per
    sub-chunk waits until the kernel counted its tiles (done[c][sub] ==
    tiles per sub-chunk, zeroed after), copies the sub-chunk into c's
    recv[me] rows (cuMemcpyAsync over NVLink) and copies 1 into c's
    rflag[me][sub] (same stream: after the data). After the kernel,
    finish_kernel zeroes rflag (every flag was waited for) and reports a
    wait that gave up; then the caller's stream joins the side stream.

    Why no slot is overwritten early: a peer's call-(e+1) copies into our
    recv wait for our call-(e+1) entered word, which our side stream sends
    only after our stream's call-e work (the kernel that read recv, the
    flag reset) finished. done and stage are reused only after the join.
    No deadlock: the peer bands' tiles wait for nothing; own-band tiles
    wait only for copies that wait only for peer-band tiles and entered
    words sent at the start of each PE's call. PEs sharing one GPU: the
    peer bands run as one launch, every PE's copies land (join, stream
    barrier), then the own band runs (its waits pass at once).

    lanes: 1 (every owner's sub-chunks on one side stream) or "owners" (a
    side stream per owner). config: GEMM_CONFIG["gemm_rs"] by default."""

    def __init__(self, env, m, k_local, n, lanes=1, dtype=torch.bfloat16, config=None):
        w = env.world
        self.cx, self.opts = G.split(config or G.GEMM_CONFIG["gemm_rs"])
        bm, bn, bk, gm = self.cx["BM"], self.cx["BN"], self.cx["BK"], self.cx["GROUP_M"]
        self.env, self.m, self.k, self.n, self.m_loc, self.dtype = env, m, k_local, n, m // w, dtype
        if m % w or self.m_loc % bm or k_local % bk:
            raise ValueError("gemm_rs: M/n_pes must be a multiple of %d and K/n_pes of %d (got M=%d over %d PEs, "
                             "K/PE=%d)" % (bm, bk, m, w, k_local))
        if lanes not in (1, "owners"):
            raise ValueError("gemm_rs: lanes is 1 or 'owners', not %r" % (lanes,))
        if w > 1:
            ce.check_memops(env.device.index)
        # a sub-chunk is whole groups of row tiles (the GEMM's order inside a band)
        self.sub_m = gm * bm if self.m_loc % (gm * bm) == 0 else self.m_loc
        self.subs = self.m_loc // self.sub_m
        self.tiles_sub = (self.sub_m // bm) * triton.cdiv(n, bn)
        self.band_tiles = self.subs * self.tiles_sub
        self.tiles = w * self.band_tiles
        self.vec = C.vec_ok(n)
        self.stage = torch.empty((m, n), dtype=dtype, device=env.device)   # the peers' rows only
        self.recv = symm.zeros((w * self.m_loc, n), dtype)                  # [sender][m_loc][n]
        self.done = torch.zeros(w * self.subs, dtype=torch.int64, device=env.device)  # [owner][sub]
        self.rflag = symm.zeros((w * self.subs,), torch.int64)              # [sender][sub]: landed
        self.entered = symm.zeros((w,), torch.int64)                        # [peer]: its slot for us is free
        for q in range(w):
            symm.trace_label(self.rflag[q * self.subs:(q + 1) * self.subs], "partial of PE %d" % q, pe=q)
        self.rec = W.new_record(env.device)
        self.ones = ce.ones(env.device)
        self.program = self.side = None
        if w > 1:
            self.program = self._program(w - 1 if lanes == "owners" else 1)
            self.side = ce.Side(env.device, self.program.lanes)
            self.side.prepare(self.program)
        self._finish = st.prepare(W.finish_kernel, (1,), env.ctx, self.rec, self.rflag, w * self.subs,
                                  BLOCK=32, num_warps=1)
        self._launches = {}                    # (a, b, out addresses) -> {tile range: PreparedLaunch}
        symm.barrier()

    def _program(self, lanes):
        w, me, n = self.env.world, self.env.rank, self.n
        es, one, esz = 8, self.ones.data_ptr(), self.stage.element_size()
        piece = self.sub_m * n * esz
        prog = ce.Program(lanes)
        for q in range(w):
            if q != me:
                prog.copy(ce.peer(self.entered.data_ptr() + me * es, q), one, es)
        for i, c in enumerate(G.rs_band_order(me, w)):
            lane = i % lanes
            entered = self.entered.data_ptr() + c * es
            prog.wait_eq(entered, 1, lane)
            prog.write(entered, 0, lane)
            for j in range(self.subs):
                done = self.done.data_ptr() + (c * self.subs + j) * es
                prog.wait_ge(done, self.tiles_sub, lane)
                prog.write(done, 0, lane)
                src = self.stage.data_ptr() + c * self.m_loc * n * esz + j * piece
                dst = ce.peer(self.recv.data_ptr() + me * self.m_loc * n * esz + j * piece, c)
                prog.copy(dst, src, piece, lane)
                prog.copy(ce.peer(self.rflag.data_ptr() + (me * self.subs + j) * es, c), one, es, lane)
        return prog

    def _check(self, a, b, out):
        if (a.shape != (self.m, self.k) or b.shape != (self.k, self.n) or out.shape != (self.m_loc, self.n)
                or not (a.is_contiguous() and b.is_contiguous() and out.is_contiguous())
                or not a.dtype == b.dtype == out.dtype == self.dtype):
            raise ValueError("gemm_rs: expected contiguous %s a [%d, %d], b [%d, %d], out [%d, %d]"
                             % (self.dtype, self.m, self.k, self.k, self.n, self.m_loc, self.n))

    def _gemm(self, a, b, out, t0, t1):
        """The prepared launch of tiles t0..t1 for these tensors (made once)."""
        key = (a.data_ptr(), b.data_ptr(), out.data_ptr())
        runs = self._launches.get(key)
        if runs is None:
            if len(self._launches) >= 8:
                self._launches.clear()
            runs = self._launches[key] = {}
        run = runs.get((t0, t1))
        if run is None:
            vec = self.vec and out.data_ptr() % 16 == 0
            run = runs[(t0, t1)] = st.prepare(
                gemm_rs_ce_kernel, (t1 - t0,), self.env.ctx, *G.operands(a, b, self.cx), self.stage, self.recv,
                self.done, self.rflag,
                out, self.rec, self.n, self.k, self.m_loc, self.sub_m, self.env.rank, self.env.world, t0,
                VEC=vec, **self.cx, **self.opts)
        return run

    def __call__(self, a, b, out):
        self._check(a, b, out)
        s = self.side
        if s is None:                          # one PE: its own band, nothing to wait for
            self._gemm(a, b, out, 0, self.tiles)()
            return out
        s.begin(self.program)
        if self.env.shared:
            own = self.tiles - self.band_tiles
            self._gemm(a, b, out, 0, own)()
            s.run()
            s.end()
            symm.barrier_on_stream()
            self._gemm(a, b, out, own, self.tiles)()
        else:
            self._gemm(a, b, out, 0, self.tiles)()   # launched first: the side stream then waits on it
            s.run()
        self._finish()
        if not self.env.shared:
            s.end()
        return out

    def kernel_only(self, a, b, out):
        """The fused kernel with no communication (flags set beforehand, the
        counts its tiles leave zeroed after it): what the GEMM's SMs pay."""
        self._check(a, b, out)
        if self.side is None:
            self._gemm(a, b, out, 0, self.tiles)()
            return
        s = self.side
        s.main_fill(self.rflag, 1)
        self._gemm(a, b, out, 0, self.tiles)()
        s.main_fill(self.done, 0)
        s.main_fill(self.rflag, 0)

    def close(self):
        torch.cuda.synchronize()
        symm.barrier()
        self.side = self.program = None        # its graph names the buffers freed next
        for q in range(self.env.world):
            symm.trace_label(self.rflag[q * self.subs:(q + 1) * self.subs], None)
        for t in (self.entered, self.rflag, self.recv):
            symm.free_tensor(t)


class GemmRS:
    """out = reduce_scatter(a @ b) over the PEs, a [M, K/n], b [K/n, N],
    out [M/n, N], all contiguous, on the current stream.

    chunks: row chunks per partial band (one GEMM launch, one copy and one
    flag copy each); streams: side streams for the copies; partial: "torch"
    (torch.mm) or "triton" (_gemm.gemm_kernel) for the partial bands;
    config: the own kernel's GEMM_CONFIG entry."""

    def __init__(self, env, m, k_local, n, chunks=2, streams=1, partial="torch",
                 dtype=torch.bfloat16, config=None):
        w = env.world
        self.cx, self.opts = G.split(config or G.GEMM_CONFIG["gemm_rs"])
        self.pcx, self.popts = G.split(G.GEMM_CONFIG["gemm_rs_partial"])
        bm, bk = self.cx["BM"], self.cx["BK"]
        self.env, self.m, self.k, self.n = env, m, k_local, n
        self.m_loc = m // w
        if partial not in ("torch", "triton"):
            raise ValueError("partial must be 'torch' or 'triton', got %r" % (partial,))
        if chunks < 1 or streams < 1:
            raise ValueError("chunks and streams must be at least 1")
        self.chunk_m = self.m_loc // chunks
        if m % w or self.m_loc % chunks or self.chunk_m % bm or k_local % bk:
            raise ValueError("shapes: M/n_pes/chunks must be a multiple of %d and K/n_pes of %d"
                             % (bm, bk))
        if partial == "triton" and (self.chunk_m % self.pcx["BM"] or k_local % self.pcx["BK"]):
            raise ValueError("shapes: M/n_pes/chunks must be a multiple of %d and K/n_pes of %d "
                             "for --partial triton" % (self.pcx["BM"], self.pcx["BK"]))
        self.chunks, self.partial = chunks, partial
        self.row_tiles = self.m_loc // bm
        self.tiles_per_chunk = self.chunk_m // bm
        self.vec = C.vec_ok(n)
        self.recv = symm.zeros((2, w, self.m_loc, n), dtype)
        self.flags = symm.zeros((2, w, self.row_tiles), torch.int64)
        # the copy engines write the flags, which a device trace cannot see:
        # say whose they are, so that its waits on them name the PE (docs/trace.md)
        for par in range(2):
            for q in range(w):
                symm.trace_label(self.flags[par, q], "partial of PE %d" % q, pe=q)
        self.staging = torch.empty((m, n), dtype=dtype, device=env.device)
        # this call's epoch in every entry: the source of one chunk's flag copy
        self.epoch = torch.zeros(self.tiles_per_chunk, dtype=torch.int64, device=env.device)
        self.sides = [torch.cuda.Stream(env.device) for _ in range(streams)]
        self.dtype = dtype
        self.grid = (self.row_tiles * triton.cdiv(n, self.cx["BN"]),)
        # per parity, the chunks in the order they are computed:
        # (rows of A, staging rows, owner's recv rows address, owner's flags address, side stream)
        me, cm, tpc = env.rank, self.chunk_m, self.tiles_per_chunk
        self.plan = [[], []]
        for par in range(2):
            for s, q in enumerate(G.rs_band_order(me, w)):   # the next PE's band first
                recv_q = symm.get_peer_tensor(self.recv, q)[par, me]
                flags_q = symm.get_peer_tensor(self.flags, q)[par, me]
                for ch in range(chunks):
                    j = s * chunks + ch
                    rows = slice(q * self.m_loc + ch * cm, q * self.m_loc + (ch + 1) * cm)
                    dst = recv_q[ch * cm:(ch + 1) * cm]
                    # contiguous and of one dtype: one cuMemcpyAsync (copy engines)
                    assert dst.is_contiguous()
                    self.plan[par].append((rows, self.staging[rows], dst.data_ptr(),
                                           flags_q[ch * tpc:].data_ptr(), self.sides[j % streams]))
        # events: one per chunk (its partial is computed), one per side stream (its copies are done)
        self.ready = [torch.cuda.Event() for _ in self.plan[0]]
        self.done = [torch.cuda.Event() for _ in self.sides]
        self.rec = W.new_record(env.device)    # a wait that gave up (_waits)
        self._report = st.prepare(W.wait_report_kernel, (1,), env.ctx, self.rec, num_warps=1)
        self.calls = 0
        self._steps = {}                       # (parity, a's address) -> [(a rows, staged, CopyList, side)]
        self._launches = {}                    # (parity, a, b, out addresses) -> PreparedLaunch
        symm.barrier()

    def _partial_gemm(self, a_rows, b, c_rows):
        if self.partial == "torch":
            torch.mm(a_rows, b, out=c_rows)
            return
        rows = a_rows.shape[0]
        grid = ((rows // self.pcx["BM"]) * triton.cdiv(self.n, self.pcx["BN"]),)
        G.gemm_kernel[grid](*G.operands(a_rows, b, self.pcx), c_rows, rows, self.n, self.k, rows, **self.pcx,
                            **self.popts)

    def _steps_for(self, a, par):
        """Per chunk: its rows of a (a view made once per input tensor:
        indexing costs host time in every call), its staging rows, and the
        copy engines' CopyList (data into the owner's slot `me`, then this
        call's epoch into the owner's flags of its row tiles)."""
        key = (par, a.data_ptr())
        steps = self._steps.get(key)
        if steps is None:
            if len(self._steps) >= 8:
                self._steps.clear()
            esz = a.element_size()
            steps = []
            for rows, staged, dst, flag, side in self.plan[par]:
                ce = symm.cubin.CopyList([(dst, staged.data_ptr(), staged.numel() * esz),
                                          (flag, self.epoch.data_ptr(), self.tiles_per_chunk * 8)])
                steps.append((a[rows], staged, ce, side))
            self._steps[key] = steps
        return steps

    def _own(self, a, b, out, par):
        key = (par, a.data_ptr(), b.data_ptr(), out.data_ptr())
        run = self._launches.get(key)
        if run is None:
            if len(self._launches) >= 8:
                self._launches.clear()
            vec = self.vec and out.data_ptr() % 16 == 0
            run = self._launches[key] = st.prepare(
                gemm_rs_kernel, self.grid, self.env.ctx, *G.operands(a, b, self.cx), self.recv[par],
                self.flags[par], out,
                self.epoch, self.rec, self.m, self.n, self.k, self.m_loc, self.chunk_m, VEC=vec, **self.cx, **self.opts)
        return run

    def __call__(self, a, b, out):
        if not (a.is_contiguous() and b.is_contiguous() and out.is_contiguous()):
            raise ValueError("a, b and out must be contiguous")
        if (a.shape != (self.m, self.k) or b.shape != (self.k, self.n)
                or out.shape != (self.m_loc, self.n) or not a.dtype == b.dtype == out.dtype == self.dtype):
            raise ValueError("shapes: %s a [%d, %d], b [%d, %d], out [%d, %d] expected"
                             % (self.dtype, self.m, self.k, self.k, self.n, self.m_loc, self.n))
        par = self.calls % 2
        self.calls += 1
        steps, own = self._steps_for(a, par), self._own(a, b, out, par)
        main = torch.cuda.current_stream()
        self.epoch.add_(1)                     # this call's epoch, counted on the GPU
        for (a_rows, staged, ce, side), ready in zip(steps, self.ready):
            self._partial_gemm(a_rows, b, staged)
            ready.record(main)                 # the chunk and this call's epoch are ready
            side.wait_event(ready)
            ce(side)                           # into the owner's slot `me`, then its flags
        for side, done in zip(self.sides, self.done):
            done.record(side)
        if self.env.shared:
            # PEs on one GPU run side by side only as far as SMs allow: every
            # PE's copies land before any own kernel starts, so its tiles
            # never spin on SMs a peer's partial GEMM or copy needs
            for done in self.done:
                main.wait_event(done)
            symm.barrier_on_stream()
        own()
        self._report()
        for done in self.done:
            main.wait_event(done)              # staging is free again; graph capture joins here
        return out

    def close(self):
        torch.cuda.synchronize()
        symm.barrier()
        for par in range(2):
            for q in range(self.env.world):
                symm.trace_label(self.flags[par, q], None)
        symm.free_tensor(self.flags)
        symm.free_tensor(self.recv)


DESIGNS = ("ce", "events")


def run(m=8192, k=8192, n=8192, iters=20, bench=True, checks=2, chunks=2, streams=1,
        partial="torch", stages=0, design="ce", lanes=1):
    """design: "ce" (GemmRSCE: one Triton GEMM, copies on the copy engines
    waiting on its tile counts; lanes 1 or 0 = a side stream per owner) or
    "events" (GemmRS: partial bands by torch.mm chunk by chunk, events,
    chunks/streams/partial apply). stages: pipeline stages of the Triton
    GEMM (0: GEMM_CONFIG). Checked with fresh data before and after timing."""
    if design not in DESIGNS:
        raise ValueError("design must be one of %s, got %r" % (", ".join(DESIGNS), design))
    env = C.setup()
    w = env.world
    k_loc = k // w
    config = dict(G.GEMM_CONFIG["gemm_rs"])
    if stages:
        config["num_stages"] = stages
    if design == "ce":
        op = GemmRSCE(env, m, k_loc, n, lanes="owners" if lanes == 0 else 1, config=config)
        how = "one Triton GEMM, partials on the copy engines (%s, sub-chunks of %d rows)" % (
            "a side stream per owner" if lanes == 0 else "one side stream", op.sub_m)
    else:
        op = GemmRS(env, m, k_loc, n, chunks=chunks, streams=streams, partial=partial, config=config)
        how = "partial bands by %s in %d chunks, %d copy stream(s)" % (
            "torch.mm" if partial == "torch" else "Triton", chunks, streams)
    a = torch.empty(m, k_loc, dtype=torch.bfloat16, device=env.device)
    b = torch.empty(k_loc, n, dtype=torch.bfloat16, device=env.device)
    out = torch.empty(m // w, n, dtype=torch.bfloat16, device=env.device)
    worst = [0.0]

    def check(first):
        good = True
        for it in range(first, first + checks):
            g = torch.Generator(device=env.device).manual_seed(41000 * it + env.rank)
            a.normal_(generator=g).mul_(0.05)
            b.normal_(generator=g).mul_(0.05)
            out.fill_(float("nan"))            # a tile the kernel missed cannot pass
            op(a, b, out)
            ref = torch.empty_like(out)
            C.REF.reduce_scatter_tensor(ref, torch.matmul(a, b))
            worst[0] = max(worst[0], (out.float() - ref.float()).abs().max().item())
            good &= torch.allclose(out.float(), ref.float(), rtol=2e-2, atol=2e-2)
        return good
    ok = C.all_ok(check(0))
    t_symm = t_ref = t_mm = host = t_kernel = None
    if bench:
        partial_full = torch.empty(m, n, dtype=a.dtype, device=env.device)
        ref_out = torch.empty_like(out)

        def ref():
            torch.matmul(a, b, out=partial_full)
            C.REF.reduce_scatter_tensor(ref_out, partial_full)
        t_symm = C.bench(lambda: op(a, b, out), iters)
        host = C.LAST_HOST_US
        t_ref = C.bench_ref(ref, iters)
        # the GEMM alone, no communication: the floor the overlap aims at
        t_mm = C.bench(lambda: torch.matmul(a, b, out=partial_full), iters)
        if design == "ce":
            # the fused kernel with its flags preset: what the SMs pay without communication
            t_kernel = C.time_graph_us(lambda: op.kernel_only(a, b, out), iters)
        ok = C.all_ok(check(checks)) and ok    # fresh data after the timed calls
    op.close()
    C.report(env, "gemm_rs", "M=%d K=%d (K/PE=%d) N=%d bf16, %s, Triton GEMM %d stages; %d iterations vs "
             "matmul+reduce_scatter, max abs err %.2e%s"
             % (m, k, k_loc, n, how, config["num_stages"], 2 * checks if bench else checks, worst[0],
                "; its kernel alone (flags preset) %.1f us in a graph" % t_kernel if t_kernel else ""), ok,
             [("symm.triton", t_symm), ("torch.matmul + NCCL reduce_scatter", t_ref),
              ("torch.matmul alone", t_mm)])
    return {"ok": ok, "symm_us": t_symm, "ref_us": t_ref, "alone_us": t_mm, "alone": "torch.matmul",
            "mnk": (m, n, k_loc), "host_us": host, "kernel_us": t_kernel, "design": design}


if __name__ == "__main__":
    C.main(run, __doc__.split("\n")[0], m=8192, k=8192, n=8192, chunks=2, streams=1,
           partial="torch", stages=0, design="ce", lanes=1)
