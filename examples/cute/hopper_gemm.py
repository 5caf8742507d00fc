"""A Hopper GEMM in CuTe DSL (TMA loads, warpgroup MMA, a multi-stage
pipeline), alone and fused with all-gather or reduce-scatter, as
symm.cute.Kernels (compiled ahead of time by build_cubins.py).

    C[M, N] (bf16) = A[M, K] (bf16) @ Bt[N, K]^T, fp32 accumulation

Bt is the weight as nn.Linear keeps it (output features x input features):
both operands are K-major, the layout warpgroup MMA reads from shared
memory. M, N and K are multiples of the tile (BM x BN x BK = 128 x 256 x 64);
the drivers check that before anything is launched.

One CTA per SM, persistent: CTA b computes tiles b, b + grid, b + 2 grid...
in the order the variant wants them (tile_coords). Its 384 threads are three
warpgroups:
  - warpgroup 0, the producer: one warp issues the TMA loads of a tile's A
    and B k-slices into STAGES shared-memory buffers (PipelineTmaAsync: an
    mbarrier per buffer counts the bytes landed, another the consumers'
    release), running ahead into the next tile while the consumers finish
    the current one; the other three warps leave. It gives registers back
    (setmaxnreg 40) to
  - warpgroups 1 and 2, the consumers (setmaxnreg 232): each owns 64 rows of
    the 128 x 256 tile, issues m64n256k16 wgmma on the buffers (keeping one
    group in flight, releasing a buffer once the group reading it is done)
    and accumulates in fp32 registers; the epilogue goes through padded
    shared memory in 64-column chunks, rows of 16-byte vector stores.

Variants (the same producer, mainloop and epilogue):
  hgemm      the GEMM alone, plain grouped tile order.
  ag_hgemm   C = all_gather(A) @ Bt^T. Row tiles come in the order the
             rows arrive: this PE's own shard first (its A is a_local: it
             never waits), then PE me+1's, me+2's, ... (ag_gemm.py pushes
             each PE's shard to me-1 first), each shard chunk by chunk (the
             rows one flag covers; a group of GROUP_M row tiles never spans
             two chunks). Before loading a peer's rows, the producer warp
             waits for the flag of their chunk (acquire), so a tile waits
             for its own chunk only.
  rs_hgemm   out = reduce_scatter(A @ Bt^T). Bands are the owners' rows, in
             the order me+1, me+2, ..., me: a peer band's tiles are stored by
             the epilogue straight into slot `me` of the owner's receive
             buffer over NVLink, then flagged (release, one flag per tile);
             the own band comes last, and each of its tiles waits for the
             peers' flags of that tile and adds their partials before its
             store: the reduction costs no pass of its own.

Every call has an epoch e (ag_hgemm: a device word the driver increments;
rs_hgemm: each CTA's counter word), and its parity selects one of two
receive/flag buffers: a peer may start call e+1 while this PE still reads
call e's data, never call e+2 (it needs this PE's call-(e+1) data first).
"""
import cutlass
import cutlass.cute as cute
import cutlass.memory
import cutlass.pipeline as pipeline
from cutlass.cute.nvgpu import cpasync, warpgroup

import symm.cute as sc
from symm.cute import Kernel, Ptr, Tma, tma_smem_layout

BF16, F32, I32, I64, U32, U64 = (cutlass.BFloat16, cutlass.Float32, cutlass.Int32, cutlass.Int64, cutlass.Uint32,
                                 cutlass.Uint64)

BM, BN, BK = 128, 256, 64    # CTA tile; BK is one 128-byte swizzle atom of bf16
STAGES = 4                   # A+B buffers of 48 KiB each
THREADS = 384                # producer warpgroup + two consumer warpgroups
CONSUMERS = 256
GROUP_M = 8                  # row tiles that walk the column tiles together (L2 reuse)
EPI_N = 64                   # epilogue chunk: 64 columns per warpgroup at a time
EPI_PITCH = EPI_N + 8        # padded rows: the fragment stores hit distinct banks
PRODUCER_REGS, CONSUMER_REGS = 40, 232
TX_BYTES = (BM + BN) * BK * 2
SMEM = (STAGES * TX_BYTES            # A and B buffers
        + BM * EPI_PITCH * 2         # epilogue staging, both consumer warpgroups
        + 2 * STAGES * 8             # full and empty mbarriers
        + 2048)                      # alignment of the 1024-byte-aligned buffers


@cute.jit
def tile_coords(t, band_tiles_m, tiles_n, nbands, first):
    """Tile t of a persistent schedule -> (band, row tile inside the band,
    column tile). Bands follow each other from `first` (mod nbands); inside
    a band, groups of GROUP_M row tiles walk the column tiles together."""
    per_band = band_tiles_m * tiles_n
    bi = t // per_band
    band = (first + bi) % nbands
    r = t - bi * per_band
    per_group = GROUP_M * tiles_n
    g = r // per_group
    first_m = g * GROUP_M
    gsz = cutlass.min(band_tiles_m - first_m, GROUP_M)
    rr = r - g * per_group
    return band, first_m + rr % gsz, rr // gsz


def ag_tile(t, chunk_tiles_m, tiles_n, chunks, npes, me):
    """ag_hgemm's tile t -> (source PE, chunk, row tile inside the source's
    shard, column tile): the unit of the order is a chunk, u = src * chunks
    + chunk, taken from this PE's first chunk on (src me, me+1, ..., each
    chunk 0, 1, ...), groups of row tiles inside a chunk. A plain function:
    traced into the kernel, and callable on ints (tests/python/test_tile_order.py)."""
    unit, r, tn = tile_coords(t, chunk_tiles_m, tiles_n, npes * chunks, me * chunks)
    src = unit // chunks
    chunk = unit - src * chunks
    return src, chunk, chunk * chunk_tiles_m + r, tn


def shared_storage():
    """The CTA's shared memory: A and B stage buffers (swizzled as TMA
    writes them and wgmma reads them), the epilogue staging tile, and the
    pipeline over the stage buffers (its mbarriers initialised here, by
    every thread, before any warp goes its own way)."""
    smem = cutlass.memory.SmemAllocator()
    la, lb = tma_smem_layout(BF16, BM, STAGES), tma_smem_layout(BF16, BN, STAGES)
    sA = smem.allocate_tensor(BF16, la.outer, 1024, swizzle=la.inner)
    sB = smem.allocate_tensor(BF16, lb.outer, 1024, swizzle=lb.inner)
    # a (BM, BN) view whose 64-column chunks all land in one padded BM x EPI_N buffer
    sC = smem.allocate_tensor(BF16, cute.make_layout((BM, (EPI_N, BN // EPI_N)), stride=(EPI_PITCH, (1, 0))), 16)
    bars = smem.allocate_array(I64, 2 * STAGES, byte_alignment=8)
    pipe = pipeline.PipelineTmaAsync.create(
        barrier_storage=bars, num_stages=STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, CONSUMERS // 32),
        tx_count=TX_BYTES, cta_layout_vmnk=cute.make_layout((1, 1, 1, 1)))
    return sA, sB, sC, pipe


def tma_views(atom, mX, s, rows):
    """(shared, global) TMA partitions of an operand: shared (.., stage),
    global (.., row tile, k tile)."""
    g = cute.local_tile(mX, (rows, BK), (None, None))
    return cpasync.tma_partition(atom, 0, cute.make_layout(1), cute.group_modes(s, 0, 2),
                                 cute.group_modes(g, 0, 2))


@cute.jit
def load_ab(pipe, st, atom_a, tAgA, tAsA, atom_b, tBgB, tBsB, tm, tn, k_tiles):
    """The producer's loads of one tile: for every k slice, wait for a free
    buffer, arm its barrier with the bytes to come, issue both TMA copies
    (one elected lane). Returns the advanced pipeline state."""
    for kt in cutlass.range(k_tiles, unroll=1):
        pipe.producer_acquire(st)
        bar = pipe.producer_get_barrier(st)
        cute.copy(atom_a, tAgA[(None, tm, kt)], tAsA[(None, st.index)], tma_bar_ptr=bar)
        cute.copy(atom_b, tBgB[(None, tn, kt)], tBsB[(None, st.index)], tma_bar_ptr=bar)
        st.advance()
    return st


def mma_setup(sA, sB, sC, ct):
    """A consumer thread's MMA state: the tiled MMA over both consumer
    warpgroups (64 rows each), its operand fragments (shared-memory
    descriptors), its partition of the staging view, the fp32 accumulator."""
    op = warpgroup.MmaF16BF16Op(BF16, F32, (64, BN, 16), warpgroup.OperandSource.SMEM,
                                cute.nvgpu.OperandMajorMode.K, cute.nvgpu.OperandMajorMode.K)
    tiled = cute.make_tiled_mma(cute.make_mma_atom(op), (2, 1, 1))
    thr = tiled.get_slice(ct)
    tCsC = thr.partition_C(sC)
    acc = cute.make_rmem_tensor(tCsC.shape, F32)
    tiled.set(warpgroup.Field.ACCUMULATE, True)
    return tiled, tiled.make_fragment_A(thr.partition_A(sA)), tiled.make_fragment_B(thr.partition_B(sB)), tCsC, acc


def epilogue_copy(sC, ct):
    """The epilogue's copy for a consumer thread: the 128 threads of its
    warpgroup move 16 rows x 8 vectors of 16 bytes per pass; returns the
    thread's slice and its part of the warpgroup's staging rows."""
    cp = cute.make_tiled_copy_tv(
        cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), BF16, num_bits_per_copy=128),
        cute.make_layout((16, 8), stride=(8, 1)), cute.make_layout((1, 8)))
    thr_cp = cp.get_slice(ct % 128)
    sW = cute.make_tensor(sC.iterator + (ct // 128) * 64 * EPI_PITCH,
                          cute.make_layout((64, EPI_N), stride=(EPI_PITCH, 1)))
    return thr_cp, thr_cp.partition_S(sW)


@cute.jit
def mma_tile(pipe, rd, rl, tiled, tCrA, tCrB, acc, k_tiles):
    """The consumers' mainloop for one tile: acc = sum over k slices of
    A_k @ B_k^T. Waits for each buffer, issues its four wgmma (k16 each) as
    one group, keeps one group in flight and releases a buffer once the group
    that read it has completed. Returns the advanced (read, release) states."""
    acc.fill(0.0)
    for kt in cutlass.range(k_tiles, unroll=1):
        pipe.consumer_wait(rd)
        warpgroup.fence()
        for kb in cutlass.range_constexpr(BK // 16):
            cute.gemm(tiled, acc, tCrA[(None, None, kb, rd.index)], tCrB[(None, None, kb, rd.index)], acc)
        warpgroup.commit_group()
        if kt > 0:
            warpgroup.wait_group(1)
            pipe.consumer_release(rl)
            rl.advance()
        rd.advance()
    warpgroup.wait_group(0)
    pipe.consumer_release(rl)
    rl.advance()
    return rd, rl


@cute.jit
def stage_chunk(acc, tCsC, w, ch):
    """Columns ch*EPI_N.. of this thread's accumulator, as bf16, into its
    warpgroup's (w) padded staging rows; then the warpgroup's barrier. The
    fragment (2, 2, 32) is (column pair, row + 8, group of 8 columns), so a
    chunk's 8 groups are 32 consecutive values."""
    a = cute.make_tensor(acc.iterator + ch * 32, cute.make_layout((2, 2, 8), stride=(1, 2, 4)))
    s = cute.make_tensor(tCsC.iterator, cute.make_layout((2, 2, 8), stride=(1, 8 * EPI_PITCH, 8)))
    s.store(a.load().to(BF16))
    cute.arch.barrier(barrier_id=1 + w, number_of_threads=128)


@cute.jit
def chunk_view(base, n, row0, col0):
    """The 64 x EPI_N bf16 block at (row0, col0) of a row-major matrix with
    n columns (n a multiple of 8: rows stay 16-byte aligned)."""
    nn = cute.assume(n, divby=8)
    return cute.make_tensor((base + (I64(row0) * nn + col0)).align(16), cute.make_layout((64, EPI_N), stride=(nn, 1)))


@cute.jit
def store_tile(acc, tCsC, thr_cp, tS, w, dst, n, tm, tn):
    """The tile (tm, tn) into the row-major bf16 matrix dst (n columns, local
    or a peer's), chunk by chunk through shared memory: warpgroup w's rows."""
    row0 = tm * BM + w * 64
    for ch in cutlass.range_constexpr(BN // EPI_N):
        stage_chunk(acc, tCsC, w, ch)
        thr_cp.partition_D(chunk_view(dst, n, row0, tn * BN + ch * EPI_N)).store(tS.load())
        cute.arch.barrier(barrier_id=1 + w, number_of_threads=128)


# ---------------------------------------------------------------------------
# The GEMM alone
# ---------------------------------------------------------------------------

@cute.kernel
def hgemm(atom_a: cute.CopyAtom, mA: cute.Tensor, atom_b: cute.CopyAtom, mB: cute.Tensor,
          c: cute.Pointer, m: I32, n: I32, k: I32):
    """C = A @ Bt^T (see the module's description)."""
    tid, _, _ = cute.arch.thread_idx()
    bid, _, _ = cute.arch.block_idx()
    nblk, _, _ = cute.arch.grid_dim()
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    sA, sB, sC, pipe = shared_storage()
    tAsA, tAgA = tma_views(atom_a, mA, sA, BM)
    tBsB, tBgB = tma_views(atom_b, mB, sB, BN)
    tiles_m, tiles_n, k_tiles = m // BM, n // BN, k // BK
    tiles = tiles_m * tiles_n
    if warp < 4:
        cute.arch.setmaxregister_decrease(PRODUCER_REGS)
        if warp == 0:
            cpasync.prefetch_descriptor(atom_a)
            cpasync.prefetch_descriptor(atom_b)
            st = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, STAGES)
            t = bid
            while t < tiles:
                _, tm, tn = tile_coords(t, tiles_m, tiles_n, 1, 0)
                st = load_ab(pipe, st, atom_a, tAgA, tAsA, atom_b, tBgB, tBsB, tm, tn, k_tiles)
                t += nblk
            pipe.producer_tail(st)
    else:
        cute.arch.setmaxregister_increase(CONSUMER_REGS)
        ct = tid - 128
        w = ct // 128
        tiled, tCrA, tCrB, tCsC, acc = mma_setup(sA, sB, sC, ct)
        thr_cp, tS = epilogue_copy(sC, ct)
        rd = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
        rl = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
        t = bid
        while t < tiles:
            _, tm, tn = tile_coords(t, tiles_m, tiles_n, 1, 0)
            rd, rl = mma_tile(pipe, rd, rl, tiled, tCrA, tCrB, acc, k_tiles)
            store_tile(acc, tCsC, thr_cp, tS, w, c, n, tm, tn)
            t += nblk


# ---------------------------------------------------------------------------
# All-gather + GEMM: each tile waits for its own chunk only
# ---------------------------------------------------------------------------

@cute.kernel
def ag_hgemm(ctx: I64, atom_al: cute.CopyAtom, mAl: cute.Tensor, atom_af: cute.CopyAtom, mAf: cute.Tensor,
             atom_b: cute.CopyAtom, mB: cute.Tensor, c: cute.Pointer, flags: cute.Pointer,
             epoch_ptr: cute.Pointer, rec: cute.Pointer, m: I32, n: I32, k: I32, m_loc: I32, chunk_m: I32):
    """C (m x n) = all_gather(A) @ Bt^T. a_local: this PE's m_loc rows;
    a_full: two parity buffers of all m rows ((2 m) x k), peer rows written
    there by the copy engines; flags: [2][n_pes][m_loc / chunk_m] words, the
    epoch of the last call whose chunk arrived (set by the copy engines after
    the chunk's data); epoch_ptr: this call's epoch (a device word); rec:
    the record of a wait that gave up (wait_flag_inline: no function call,
    so the wgmma stay pipelined)."""
    tid, _, _ = cute.arch.thread_idx()
    bid, _, _ = cute.arch.block_idx()
    nblk, _, _ = cute.arch.grid_dim()
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    me, npes = sc.my_pe(ctx), sc.n_pes(ctx)
    sA, sB, sC, pipe = shared_storage()
    tAsAl, tAgAl = tma_views(atom_al, mAl, sA, BM)
    tAsAf, tAgAf = tma_views(atom_af, mAf, sA, BM)
    tBsB, tBgB = tma_views(atom_b, mB, sB, BN)
    band_tiles_m, tiles_n, k_tiles = m_loc // BM, n // BN, k // BK
    tiles = band_tiles_m * npes * tiles_n
    chunks = m_loc // chunk_m
    chunk_tiles_m = chunk_m // BM
    if warp < 4:
        cute.arch.setmaxregister_decrease(PRODUCER_REGS)
        if warp == 0:
            cpasync.prefetch_descriptor(atom_al)
            cpasync.prefetch_descriptor(atom_af)
            cpasync.prefetch_descriptor(atom_b)
            epoch = cute.make_tensor(epoch_ptr, cute.make_layout(1))[0]
            par = I32(epoch % 2)
            st = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, STAGES)
            t = bid
            while t < tiles:
                src, chunk, tm, tn = ag_tile(t, chunk_tiles_m, tiles_n, chunks, npes, me)
                if src == me:
                    st = load_ab(pipe, st, atom_al, tAgAl, tAsAl, atom_b, tBgB, tBsB, tm, tn, k_tiles)
                else:
                    # every lane acquires the flag itself, then orders the TMA
                    # (async proxy) reads of the chunk after it
                    wait_flag_inline(ctx, flags + ((par * npes + src) * chunks + chunk), U64(epoch), rec)
                    cute.arch.fence_proxy("async.global")
                    row_tile = (par * m + src * m_loc) // BM + tm
                    st = load_ab(pipe, st, atom_af, tAgAf, tAsAf, atom_b, tBgB, tBsB, row_tile, tn,
                                 k_tiles)
                t += nblk
            pipe.producer_tail(st)
    else:
        cute.arch.setmaxregister_increase(CONSUMER_REGS)
        ct = tid - 128
        w = ct // 128
        tiled, tCrA, tCrB, tCsC, acc = mma_setup(sA, sB, sC, ct)
        thr_cp, tS = epilogue_copy(sC, ct)
        rd = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
        rl = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
        t = bid
        while t < tiles:
            src, _, tm, tn = ag_tile(t, chunk_tiles_m, tiles_n, chunks, npes, me)
            rd, rl = mma_tile(pipe, rd, rl, tiled, tCrA, tCrB, acc, k_tiles)
            store_tile(acc, tCsC, thr_cp, tS, w, c, n, src * band_tiles_m + tm, tn)
            t += nblk


# ---------------------------------------------------------------------------
# GEMM + reduce-scatter: peer bands pushed by the epilogue, own band reduced
# ---------------------------------------------------------------------------

@cute.jit
def store_reduced(acc, tCsC, thr_cp, tS, w, out, recv, n, tm, tn, me, npes, slot):
    """The own band's tile (tm, tn): this PE's partial (staged as bf16) plus
    the peers' partials of the same tile in recv (slot p: PE p's, `slot`
    elements apart), summed in fp32, into out."""
    row0 = tm * BM + w * 64
    for ch in cutlass.range_constexpr(BN // EPI_N):
        stage_chunk(acc, tCsC, w, ch)
        col0 = tn * BN + ch * EPI_N
        total = tS.load().to(F32)
        for i in cutlass.range(1, npes, unroll=2):
            p = (me + i) % npes
            total = total + thr_cp.partition_S(chunk_view(recv + p * slot, n, row0, col0)).load().to(F32)
        thr_cp.partition_D(chunk_view(out, n, row0, col0)).store(total.to(BF16))
        cute.arch.barrier(barrier_id=1 + w, number_of_threads=128)


@cute.kernel
def rs_hgemm(ctx: I64, atom_a: cute.CopyAtom, mA: cute.Tensor, atom_b: cute.CopyAtom, mB: cute.Tensor,
             recv: cute.Pointer, flags: cute.Pointer, out: cute.Pointer, counters: cute.Pointer,
             m: I32, n: I32, k: I32):
    """out (m / n_pes x n) = rows my_pe of the sum over PEs of A_p @ Bt_p^T.
    recv: two parity buffers of n_pes slots of m/n_pes x n bf16 (slot p: PE
    p's partial of this PE's rows); flags: [2][n_pes][tiles of a band], the
    epoch of the last call whose tile arrived; counters: this PE's call count
    per CTA (local words, read at the start and stored at the end)."""
    tid, _, _ = cute.arch.thread_idx()
    bid, _, _ = cute.arch.block_idx()
    nblk, _, _ = cute.arch.grid_dim()
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    me, npes = sc.my_pe(ctx), sc.n_pes(ctx)
    sA, sB, sC, pipe = shared_storage()
    tAsA, tAgA = tma_views(atom_a, mA, sA, BM)
    tBsB, tBgB = tma_views(atom_b, mB, sB, BN)
    m_loc = m // npes
    band_tiles_m, tiles_n, k_tiles = m_loc // BM, n // BN, k // BK
    band_tiles = band_tiles_m * tiles_n
    tiles = band_tiles * npes
    first = (me + 1) % npes
    if warp < 4:
        cute.arch.setmaxregister_decrease(PRODUCER_REGS)
        if warp == 0:
            cpasync.prefetch_descriptor(atom_a)
            cpasync.prefetch_descriptor(atom_b)
            st = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, STAGES)
            t = bid
            while t < tiles:
                owner, tm, tn = tile_coords(t, band_tiles_m, tiles_n, npes, first)
                st = load_ab(pipe, st, atom_a, tAgA, tAsA, atom_b, tBgB, tBsB, owner * band_tiles_m + tm,
                             tn, k_tiles)
                t += nblk
            pipe.producer_tail(st)
    else:
        cute.arch.setmaxregister_increase(CONSUMER_REGS)
        ct = tid - 128
        w = ct // 128
        tiled, tCrA, tCrB, tCsC, acc = mma_setup(sA, sB, sC, ct)
        thr_cp, tS = epilogue_copy(sC, ct)
        counter = cute.make_tensor(counters, cute.make_layout(nblk))
        epoch = counter[bid] + U64(1)
        par = I32(epoch % U64(2))
        slot = I64(m_loc) * n                  # elements per sender slot
        rd = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
        rl = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
        t = bid
        while t < tiles:
            owner, tm, tn = tile_coords(t, band_tiles_m, tiles_n, npes, first)
            ti = tm * tiles_n + tn
            rd, rl = mma_tile(pipe, rd, rl, tiled, tCrA, tCrB, acc, k_tiles)
            if owner != me:
                dst = sc.peer_ptr(ctx, recv + (par * npes + me) * slot, owner)
                store_tile(acc, tCsC, thr_cp, tS, w, dst, n, tm, tn)
                # both warpgroups' stores, then one release flag on the owner
                cute.arch.barrier(barrier_id=3, number_of_threads=CONSUMERS)
                if ct == 0:
                    sc.signal_op(ctx, flags + ((par * npes + me) * band_tiles + ti), epoch, sc.SIGNAL_SET,
                                 owner)
            else:
                if ct == 0:
                    for i in cutlass.range(1, npes, unroll=1):
                        p = (me + i) % npes
                        sc.signal_wait_until(ctx, flags + ((par * npes + p) * band_tiles + ti), sc.CMP_GE, epoch)
                cute.arch.barrier(barrier_id=3, number_of_threads=CONSUMERS)
                store_reduced(acc, tCsC, thr_cp, tS, w, out, recv + par * npes * slot, n, tm, tn, me, npes, slot)
            t += nblk
        # every consumer has read this call's epoch; the next call counts from here
        cute.arch.barrier(barrier_id=3, number_of_threads=CONSUMERS)
        if ct == 0:
            counter[bid] = epoch


# ---------------------------------------------------------------------------
# GEMM + reduce-scatter with the transfers on the copy engines
# ---------------------------------------------------------------------------

# symm_ctx_t's timeout_ns and abort_flag as 64-bit words (include/symm/symm_types.h)
CTX_TIMEOUT_WORD, CTX_ABORT_WORD = 6, 7
REC_WORDS = 4   # a wait that gave up: [0] 1, [1] the flag's address, [2] the value seen, [3] ns waited


# how often a spinning wait looks at its deadline and the record, and how long
# it spins before it reads the abort flag (include/symm/device/impl_wait.h's
# SYMM__WAIT_CHECK_EVERY and SYMM__ABORT_CHECK_NS): the abort flag is host
# memory, and a sys-scope read of it on every poll of every waiting CTA keeps
# the GPU's host interface busy, which starves the copy engines and the
# stream waits that feed these very flags (the 4-PE collapse of issue #29)
WAIT_CHECK_EVERY = 64
ABORT_CHECK_NS = 1000000


@cute.jit
def wait_flag_inline(ctx, flag, value, rec):
    """Acquire-wait until *flag >= value with symm's deadline and abort flag (read
    from the context), written inline: a kernel with any function call (symm's
    waits print through one when they give up) has every wgmma serialised by
    ptxas (C7510). The loop polls the flag alone; every WAIT_CHECK_EVERY polls
    it reads the clock and the record, and after ABORT_CHECK_NS of waiting the
    abort flag. A wait that gives up records itself in rec and returns, as
    does every later wait that sees the record, so the kernel ends;
    wait_report, launched after it, reports and stops."""
    v = cute.arch.load(flag, U64, sem="acquire", scope="sys")
    if v < value:
        words = cute.make_ptr(U64, ctx, cute.AddressSpace.gmem, assumed_align=8)
        timeout = cute.arch.load(words + CTX_TIMEOUT_WORD, U64)
        abort_addr = cute.arch.load(words + CTX_ABORT_WORD, U64)
        stop = cute.arch.load(rec, U64, sem="relaxed", scope="gpu")
        t0 = cute.arch.globaltimer()
        polls = U32(0)
        while v < value and stop == U64(0):
            polls = polls + U32(1)
            if polls % U32(WAIT_CHECK_EVERY) == U32(0):
                waited = U64(cute.arch.globaltimer() - t0)
                stop = cute.arch.load(rec, U64, sem="relaxed", scope="gpu")
                aborted = U32(0)
                if abort_addr != U64(0) and waited >= U64(ABORT_CHECK_NS):
                    aborted = cute.arch.load(cute.make_ptr(U32, I64(abort_addr), cute.AddressSpace.gmem,
                                                           assumed_align=4), U32, sem="relaxed", scope="sys")
                if stop == U64(0) and (aborted != U32(0) or (timeout != U64(0) and waited > timeout)):
                    stop = U64(1)
                    if cute.arch.atomic_cas(rec, cmp=U64(0), val=U64(1), sem="relaxed", scope="gpu") == U64(0):
                        r = cute.make_tensor(rec, cute.make_layout(REC_WORDS))
                        r[1] = U64(flag.toint())
                        r[2] = v
                        r[3] = waited
            if stop == U64(0):
                v = cute.arch.load(flag, U64, sem="acquire", scope="sys")


@cute.kernel
def wait_report(ctx: I64, rec: cute.Pointer):
    """After a kernel that waits with wait_flag_inline: if one of its waits
    gave up, say which and stop through symm's own wait on the record (its
    message, then a trap)."""
    tid, _, _ = cute.arch.thread_idx()
    if tid == 0:
        r = cute.make_tensor(rec, cute.make_layout(REC_WORDS))
        if r[0] != U64(0):
            cute.printf("symm: PE %d: fused GEMM: a wait for the flag at 0x%llx gave up (deadline or abort) after %llu ns, "
                        "last seen %llu", sc.my_pe(ctx), r[1], r[3], r[2])
            sc.signal_wait_until(ctx, rec, sc.CMP_EQ, U64(0))


@cute.jit
def prefetch_partials(recv, slot, n, tm, tn, me, npes, ct):
    """Consumer thread ct's share of the L2 prefetch of the peers' partials
    of tile (tm, tn): 128 rows x 512 bytes = 512 lines of 128 bytes a peer,
    two lines per thread."""
    for i in cutlass.range(1, npes, unroll=1):
        base = recv + ((me + i) % npes) * slot
        for j in cutlass.range_constexpr(2):
            line = ct + j * CONSUMERS
            row = tm * BM + line // 4
            col = tn * BN + (line % 4) * 64
            cute.arch.prefetch((base + (I64(row) * n + col)).llvm_ptr, cache_level="L2")


@cute.kernel
def rs_hgemm_ce(ctx: I64, atom_a: cute.CopyAtom, mA: cute.Tensor, atom_b: cute.CopyAtom, mB: cute.Tensor,
                stage: cute.Pointer, recv: cute.Pointer, done: cute.Pointer, rflag: cute.Pointer,
                out: cute.Pointer, rec: cute.Pointer, m: I32, n: I32, k: I32, sub_m: I32, t_begin: I32,
                t_end: I32, prefetch: I32):
    """out (m / n_pes x n) = rows my_pe of the sum over PEs of A_p @ Bt_p^T,
    tiles t_begin.. t_end of the band order me+1, ..., me (the whole call, or
    the peer bands and then the own band as two launches). prefetch (0/1):
    an own-band tile asks L2 for the peers' partials before its mainloop, so
    its epilogue's loads hit L2 (the GPU's point of coherence: a line
    fetched before the copy engine rewrites it is updated, never stale).
    stage: this PE's m x n partials (local; only the peers' rows are written);
    a peer band's tile is stored there and counted in done[owner][sub-chunk]
    (release, after both warpgroups' stores), which the copy engines wait for
    (cuStreamWaitValue64) before moving the sub-chunk of sub_m rows into the
    owner's recv slot and setting its rflag. recv: n_pes slots of m/n_pes x n
    (slot p: PE p's partial of this PE's rows); rflag: [n_pes][sub-chunks],
    1 once PE p's sub-chunk landed (zeroed by the host after the call). Own
    band tiles wait for every peer's flag of their sub-chunk, then add the
    peers' partials to their own before the store."""
    tid, _, _ = cute.arch.thread_idx()
    bid, _, _ = cute.arch.block_idx()
    nblk, _, _ = cute.arch.grid_dim()
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    me, npes = sc.my_pe(ctx), sc.n_pes(ctx)
    sA, sB, sC, pipe = shared_storage()
    tAsA, tAgA = tma_views(atom_a, mA, sA, BM)
    tBsB, tBgB = tma_views(atom_b, mB, sB, BN)
    m_loc = m // npes
    band_tiles_m, tiles_n, k_tiles = m_loc // BM, n // BN, k // BK
    subs = m_loc // sub_m
    sub_tiles_m = sub_m // BM
    first = (me + 1) % npes
    if warp < 4:
        cute.arch.setmaxregister_decrease(PRODUCER_REGS)
        if warp == 0:
            cpasync.prefetch_descriptor(atom_a)
            cpasync.prefetch_descriptor(atom_b)
            st = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, STAGES)
            t = t_begin + bid
            while t < t_end:
                owner, tm, tn = tile_coords(t, band_tiles_m, tiles_n, npes, first)
                st = load_ab(pipe, st, atom_a, tAgA, tAsA, atom_b, tBgB, tBsB, owner * band_tiles_m + tm,
                             tn, k_tiles)
                t += nblk
            pipe.producer_tail(st)
    else:
        cute.arch.setmaxregister_increase(CONSUMER_REGS)
        ct = tid - 128
        w = ct // 128
        tiled, tCrA, tCrB, tCsC, acc = mma_setup(sA, sB, sC, ct)
        thr_cp, tS = epilogue_copy(sC, ct)
        slot = I64(m_loc) * n                  # elements per sender slot
        rd = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
        rl = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
        t = t_begin + bid
        while t < t_end:
            owner, tm, tn = tile_coords(t, band_tiles_m, tiles_n, npes, first)
            sub = tm // sub_tiles_m
            if owner == me and prefetch != 0:
                prefetch_partials(recv, slot, n, tm, tn, me, npes, ct)
            rd, rl = mma_tile(pipe, rd, rl, tiled, tCrA, tCrB, acc, k_tiles)
            if owner != me:
                store_tile(acc, tCsC, thr_cp, tS, w, stage, n, owner * band_tiles_m + tm, tn)
                # both warpgroups' stores, then one release count the copy engines wait for
                cute.arch.barrier(barrier_id=3, number_of_threads=CONSUMERS)
                if ct == 0:
                    cute.arch.red(done + (owner * subs + sub), U64(1), op="add", dtype=U64, sem="release",
                                  scope="sys")
            else:
                if ct == 0:
                    # me-1 computed this band first, so its partials land first
                    for i in cutlass.range(1, npes, unroll=1):
                        p = (me + npes - i) % npes
                        wait_flag_inline(ctx, rflag + (p * subs + sub), U64(1), rec)
                cute.arch.barrier(barrier_id=3, number_of_threads=CONSUMERS)
                store_reduced(acc, tCsC, thr_cp, tS, w, out, recv, n, tm, tn, me, npes, slot)
            t += nblk


PB = Ptr(BF16)
S = Ptr(U64, 8)
KERNELS = [
    Kernel(hgemm, [("a", Tma(BF16, BM)), ("bt", Tma(BF16, BN)), ("c", PB), ("m", I32), ("n", I32),
                   ("k", I32)], block=THREADS, smem=SMEM),
    Kernel(ag_hgemm, [("ctx", I64), ("a_local", Tma(BF16, BM)), ("a_full", Tma(BF16, BM)),
                      ("bt", Tma(BF16, BN)), ("c", PB), ("flags", S), ("epoch", Ptr(I64, 8)), ("rec", S), ("m", I32),
                      ("n", I32), ("k", I32), ("m_loc", I32), ("chunk_m", I32)], block=THREADS, smem=SMEM),
    Kernel(rs_hgemm, [("ctx", I64), ("a", Tma(BF16, BM)), ("bt", Tma(BF16, BN)), ("recv", PB), ("flags", S),
                      ("out", PB), ("counters", S), ("m", I32), ("n", I32), ("k", I32)],
           block=THREADS, smem=SMEM),
    Kernel(rs_hgemm_ce, [("ctx", I64), ("a", Tma(BF16, BM)), ("bt", Tma(BF16, BN)), ("stage", PB), ("recv", PB),
                         ("done", S), ("rflag", S), ("out", PB), ("rec", S), ("m", I32), ("n", I32), ("k", I32),
                         ("sub_m", I32), ("t_begin", I32), ("t_end", I32), ("prefetch", I32)],
           block=THREADS, smem=SMEM),
    Kernel(wait_report, [("ctx", I64), ("rec", S)], block=32),
]
