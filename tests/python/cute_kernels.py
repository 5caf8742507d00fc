"""CuTe DSL kernels that exercise every family of symm.cute on GPUs.

Compiled ahead of time with the examples (examples/cute/build_cubins.py) or
just in time; tests/python/cute_gpu_check.py launches them on 1, 2 and 4 PEs
and checks the results against references built from the inputs' seeds.
Every kernel takes plain scalars and pointers (symm.cute.Kernel); views are
made inside with cute.make_tensor.
"""
import cutlass
import cutlass.cute as cute

import symm.cute as sc
from symm.cute import Kernel, Ptr

F32, I32, I64, U64 = cutlass.Float32, cutlass.Int32, cutlass.Int64, cutlass.Uint64
BLOCK = 128


def vec(ptr, n):
    return cute.make_tensor(ptr, cute.make_layout(n))


@cute.kernel
def t_pg(ctx: I64, dst: cute.Pointer, src: cute.Pointer, got: cute.Pointer, n: I32):
    """Thread i: p of src[i] into the next PE's dst[i]; after a device
    barrier, g of the previous PE's src[i] into got[i]."""
    tid, _, _ = cute.arch.thread_idx()
    me, npes = sc.my_pe(ctx), sc.n_pes(ctx)
    nxt, prv = (me + 1) % npes, (me + npes - 1) % npes
    d, s, g = vec(dst, n), vec(src, n), vec(got, n)
    i = tid
    while i < n:
        sc.p(ctx, d.iterator + i, s[i], nxt)
        g[i] = sc.g(ctx, s.iterator + i, prv)
        i += BLOCK
    sc.barrier_block(ctx)


@cute.kernel
def t_bulk(ctx: I64, dst: cute.Pointer, got: cute.Pointer, src: cute.Pointer, n: I32):
    """CTA b runs variant b of put/get x (thread, warp, block) x (blocking,
    nbi) on segment b (n elements): put src[b] into the next PE's dst[b], get
    the previous PE's src[b] into got[b]; nbi forms are completed by the quiet
    of their scope. A device barrier then makes the puts visible."""
    tid, _, _ = cute.arch.thread_idx()
    b, _, _ = cute.arch.block_idx()
    me, npes = sc.my_pe(ctx), sc.n_pes(ctx)
    nxt, prv = (me + 1) % npes, (me + npes - 1) % npes
    off = b * n
    d = vec(dst + off, n)
    g = vec(got + off, n)
    s = vec(src + off, n)
    half = n // 2  # put with an explicit count of the first half, then the rest
    if b == 0:
        if tid == 0:
            sc.put(ctx, d, s, nxt)
            sc.get(ctx, g, s, prv)
    if b == 1:
        if tid == 0:
            sc.put_nbi(ctx, d, s, nxt)
            sc.get_nbi(ctx, g, s, prv)
            sc.quiet(ctx)
    if b == 2:
        if tid < 32:
            sc.put_warp(ctx, d, s, nxt)
            sc.get_warp(ctx, g, s, prv)
    if b == 3:
        if tid < 32:
            sc.put_warp_nbi(ctx, d, s, nxt)
            sc.get_warp_nbi(ctx, g, s, prv)
            sc.quiet_warp(ctx)
    if b == 4:
        sc.put_block(ctx, d, s, nxt)
        sc.get_block(ctx, g, s, prv)
    if b == 5:
        sc.put_block_nbi(ctx, d.iterator, s.iterator, nxt, nelems=half)
        sc.put_block_nbi(ctx, d.iterator + half, s.iterator + half, nxt, nelems=n - half)
        sc.get_block_nbi(ctx, g, s, prv)
        sc.quiet_block(ctx)


@cute.kernel
def t_put_signal(ctx: I64, dst: cute.Pointer, got: cute.Pointer, src: cute.Pointer,
                 sig: cute.Pointer, n: I32, epoch: I64):
    """CTA b: variant b % 6 of put_signal x (thread, warp, block) x (blocking,
    nbi) into the next PE's dst[b] with signal word b, SET to epoch (b < 6) or
    ADD 1 (b >= 6); then wait for the previous PE's signal on word b (acquire)
    and copy dst[b] into got[b]: the data must be there once the signal is."""
    tid, _, _ = cute.arch.thread_idx()
    b, _, _ = cute.arch.block_idx()
    me, npes = sc.my_pe(ctx), sc.n_pes(ctx)
    nxt = (me + 1) % npes
    off = b * n
    d, g, s = vec(dst + off, n), vec(got + off, n), vec(src + off, n)
    word = sig + b
    v = b % 6
    op = sc.SIGNAL_SET
    val = cutlass.Uint64(epoch)
    if b >= 6:
        op = sc.SIGNAL_ADD
        val = cutlass.Uint64(1)
    if v == 0:
        if tid == 0:
            sc.put_signal(ctx, d, s, word, val, op, nxt)
    if v == 1:
        if tid == 0:
            sc.put_signal_nbi(ctx, d, s, word, val, op, nxt)
            sc.quiet(ctx)
    if v == 2:
        if tid < 32:
            sc.put_signal_warp(ctx, d, s, word, val, op, nxt)
    if v == 3:
        if tid < 32:
            sc.put_signal_warp_nbi(ctx, d, s, word, val, op, nxt)
            sc.quiet_warp(ctx)
    if v == 4:
        sc.put_signal_block(ctx, d, s, word, val, op, nxt)
    if v == 5:
        sc.put_signal_block_nbi(ctx, d, s, word, val, op, nxt)
        sc.quiet_block(ctx)
    sc.signal_wait_until(ctx, word, sc.CMP_GE, cutlass.Uint64(epoch))
    i = tid
    while i < n:
        g[i] = d[i]
        i += BLOCK


@cute.kernel
def t_words(ctx: I64, w32: cute.Pointer, w64: cute.Pointer, u32: cute.Pointer,
            u64: cute.Pointer, f32: cute.Pointer, f64: cute.Pointer, out: cute.Pointer,
            epoch: I64):
    """Thread 0: st of epoch-derived values into the next PE's words of every
    ld/st type (several orderings and scopes), fence, signal_op (SET epoch)
    on u64[1], wait for the previous PE's signal. After a device barrier
    (every PE has its words), thread 0 reads its own words (out[0..5]), the
    previous PE's through ld (out[6..11]), signal_fetch (out[12]) and
    wait_until_u32 (out[13]); thread 1 wait_until on the i32 and i64 words
    (out[14], out[15]). out is f64."""
    tid, _, _ = cute.arch.thread_idx()
    me, npes = sc.my_pe(ctx), sc.n_pes(ctx)
    nxt, prv = (me + 1) % npes, (me + npes - 1) % npes
    e = epoch
    o = vec(out, 16)
    if tid == 0:
        sc.st(ctx, w32, cutlass.Int32(e * 3 + me), nxt, sc.SEM_RELEASE, sc.SCOPE_SYS)
        sc.st(ctx, w64, cutlass.Int64(e * 5 + me), nxt, sc.SEM_RELEASE, sc.SCOPE_SYS)
        sc.st(ctx, u32, cutlass.Uint32(e * 7 + me), nxt, sc.SEM_RELAXED, sc.SCOPE_SYS)
        sc.st(ctx, f32, cutlass.Float32(e) + cutlass.Float32(0.5), nxt, sc.SEM_VOLATILE,
              sc.SCOPE_SYS)
        sc.st(ctx, f64, cutlass.Float64(e) + cutlass.Float64(0.25), nxt, sc.SEM_RELEASE,
              sc.SCOPE_GPU)
        sc.st(ctx, u64, cutlass.Uint64(e * 11 + me), nxt, sc.SEM_WEAK, sc.SCOPE_SYS)
        sc.fence(ctx)
        sc.signal_op(ctx, u64 + 1, cutlass.Uint64(e), sc.SIGNAL_SET, nxt)
        sc.signal_wait_until(ctx, u64 + 1, sc.CMP_EQ, cutlass.Uint64(e))
    if tid == 1:
        sc.signal_wait_until(ctx, u64 + 1, sc.CMP_GE, cutlass.Uint64(e))
        o[14] = cutlass.Float64(sc.wait_until(ctx, w32, sc.CMP_GE, cutlass.Int32(e * 3)))
        o[15] = cutlass.Float64(sc.wait_until(ctx, w64, sc.CMP_GT, cutlass.Int64(e * 5 - 1)))
    sc.barrier_block(ctx)
    if tid == 0:
        o[0] = cutlass.Float64(vec(w32, 1)[0])
        o[1] = cutlass.Float64(vec(w64, 1)[0])
        o[2] = cutlass.Float64(vec(u32, 1)[0])
        o[3] = cutlass.Float64(vec(u64, 1)[0])
        o[4] = cutlass.Float64(vec(f32, 1)[0])
        o[5] = cutlass.Float64(vec(f64, 1)[0])
        o[6] = cutlass.Float64(sc.ld(ctx, w32, prv, sc.SEM_ACQUIRE, sc.SCOPE_SYS))
        o[7] = cutlass.Float64(sc.ld(ctx, w64, prv, sc.SEM_ACQUIRE, sc.SCOPE_SYS))
        o[8] = cutlass.Float64(sc.ld(ctx, u32, prv, sc.SEM_RELAXED, sc.SCOPE_SYS))
        o[9] = cutlass.Float64(sc.ld(ctx, u64, prv, sc.SEM_VOLATILE, sc.SCOPE_SYS))
        o[10] = cutlass.Float64(sc.ld(ctx, f32, prv, sc.SEM_WEAK, sc.SCOPE_SYS))
        o[11] = cutlass.Float64(sc.ld(ctx, f64, prv, sc.SEM_ACQUIRE, sc.SCOPE_GPU))
        o[12] = cutlass.Float64(sc.signal_fetch(ctx, u64 + 1))
        o[13] = cutlass.Float64(sc.wait_until(ctx, u32, sc.CMP_NE, cutlass.Uint32(0xFFFFFFFF)))
    sc.barrier_block(ctx)


def _amo_family(ctx, w, T, ones, t, nxt, o, slot):
    """The atomics of one type on the next PE's words w[0..5] (see t_amo)."""
    sc.atomic_add(ctx, w, T(1), nxt)
    sc.atomic_inc(ctx, w + 1, nxt)
    r = sc.atomic_fetch_add(ctx, w + 2, T(2), nxt)
    r2 = sc.atomic_fetch_inc(ctx, w + 3, nxt)
    sc.atomic_or(ctx, w + 4, T(1) << T(t % 32), nxt)
    sc.atomic_xor(ctx, w + 5, T(1) << T(t % 7), nxt)
    sc.atomic_and(ctx, w + 6, T(ones) ^ (T(1) << T(t % 16)), nxt)
    o[slot] = cutlass.Int64(r) + cutlass.Int64(r2)


@cute.kernel
def t_amo(ctx: I64, a32: cute.Pointer, a64: cute.Pointer, u32: cute.Pointer,
          u64: cute.Pointer, out: cute.Pointer):
    """Every thread of every PE: atomics on the next PE's words. Per type, 16
    words: [0] add 1, [1] inc, [2] fetch_add 2, [3] fetch_inc (each thread's
    two results summed into out[type * BLOCK + tid]), [4] or 1 << (tid % 32),
    [5] xor 1 << (tid % 7), [6] and ~(1 << (tid % 16)) from all ones,
    [7] a compare_swap chain (each thread adds 1 by CAS, after an
    atomic_fetch), [8] fetch_or / fetch_xor / fetch_and as [4]-[6] on
    u32 / i64 / i32. Thread 0 then swaps 77 into its own u64[9] (the old value
    to out[4 * BLOCK]), sets u32[9] to 5 and reads it back (out[4 * BLOCK + 1])."""
    tid, _, _ = cute.arch.thread_idx()
    me, npes = sc.my_pe(ctx), sc.n_pes(ctx)
    nxt = (me + 1) % npes
    o = vec(out, 4 * BLOCK + 2)
    _amo_family(ctx, a32, cutlass.Int32, -1, tid, nxt, o, tid)
    _amo_family(ctx, a64, cutlass.Int64, -1, tid, nxt, o, BLOCK + tid)
    _amo_family(ctx, u32, cutlass.Uint32, 0xFFFFFFFF, tid, nxt, o, 2 * BLOCK + tid)
    _amo_family(ctx, u64, cutlass.Uint64, 0xFFFFFFFFFFFFFFFF, tid, nxt, o, 3 * BLOCK + tid)
    done = cutlass.Int32(0)
    while done == 0:
        cur = sc.atomic_fetch(ctx, u64 + 7, nxt)
        old = sc.atomic_compare_swap(ctx, u64 + 7, cur, cur + cutlass.Uint64(1), nxt)
        if old == cur:
            done = cutlass.Int32(1)
    sc.atomic_fetch_or(ctx, u32 + 8, cutlass.Uint32(1) << cutlass.Uint32(tid % 32), nxt)
    sc.atomic_fetch_xor(ctx, a64 + 8, cutlass.Int64(1) << cutlass.Int64(tid % 7), nxt)
    sc.atomic_fetch_and(ctx, a32 + 8, cutlass.Int32(-1) ^ (cutlass.Int32(1) << cutlass.Int32(tid % 16)),
                        nxt)
    sc.barrier_block(ctx)
    if tid == 0:
        o[4 * BLOCK] = cutlass.Int64(sc.atomic_swap(ctx, u64 + 9, cutlass.Uint64(77), me))
        sc.atomic_set(ctx, u32 + 9, cutlass.Uint32(5), me)
        o[4 * BLOCK + 1] = cutlass.Int64(sc.atomic_fetch(ctx, u32 + 9, me))


@cute.kernel
def t_sync(ctx: I64, data: cute.Pointer, out: cute.Pointer, n: I32, epoch: I32):
    """Every thread stores into every PE's data[me * n + k] through peer
    views; then one of four ways of ordering and synchronising (epoch % 4:
    barrier_block; fence_warp + barrier_warp by warp 0; fence_block + barrier
    by thread 0; quiet_block + sync_block), after which data holds every
    PE's contribution, copied into out. One CTA per PE."""
    tid, _, _ = cute.arch.thread_idx()
    me, npes = sc.my_pe(ctx), sc.n_pes(ctx)
    v = epoch % 4
    i = tid
    while i < npes * n:
        pv = sc.peer_tensor(ctx, vec(data, npes * n), i // n)
        pv[me * n + i % n] = cutlass.Float32(epoch * 1000 + me * n + i % n)
        i += BLOCK
    if v == 0:
        sc.barrier_block(ctx)
    if v == 1:
        sc.fence_warp(ctx)
        cute.arch.barrier()
        if tid < 32:
            sc.barrier_warp(ctx)
        cute.arch.barrier()
    if v == 2:
        sc.fence_block(ctx)
        if tid == 0:
            sc.barrier(ctx)
        cute.arch.barrier()
    if v == 3:
        sc.quiet_block(ctx)
        sc.sync_block(ctx)
    d, o = vec(data, npes * n), vec(out, npes * n)
    j = tid
    while j < npes * n:
        o[j] = d[j]
        j += BLOCK


@cute.kernel
def t_coll(ctx: I64, ar: cute.Pointer, src: cute.Pointer, ag: cute.Pointer, rs: cute.Pointer,
           a2a: cute.Pointer, bc: cute.Pointer, n: I32):
    """The device collectives on views, one CTA per PE: all-reduce (sum) of
    src (n * n_pes elements) into ar, reduce-scatter of src into rs (n),
    all-gather of src's first n into ag, all-to-all of src into a2a,
    broadcast of src from PE 0 into bc; coll_barrier_block between them."""
    npes = sc.n_pes(ctx)
    m = n * npes
    s = vec(src, m)
    sc.all_reduce_block(ctx, vec(ar, m), s, sc.OP_SUM)
    sc.coll_barrier_block(ctx)
    sc.reduce_scatter_block(ctx, vec(rs, n), s, sc.OP_SUM)
    sc.all_gather_block(ctx, vec(ag, m), vec(src, n))
    sc.all_to_all_block(ctx, vec(a2a, m), s)
    sc.broadcast_block(ctx, vec(bc, m), s, 0)
    sc.coll_barrier_block(ctx)


@cute.kernel
def t_coll_grid(ctx: I64, ar: cute.Pointer, src: cute.Pointer, n: I32):
    """all_reduce_ex_grid (two-shot forced) and all_reduce_grid (max) over
    the grid's CTAs; coll_barrier_grid between them."""
    b, _, _ = cute.arch.block_idx()
    nb, _, _ = cute.arch.grid_dim()
    m = n * sc.n_pes(ctx)
    sc.all_reduce_ex_grid(ctx, vec(ar, m), vec(src, m), sc.OP_SUM, sc.DTYPE_DEFAULT,
                          sc.ALGO_TWOSHOT, b, nb)
    sc.coll_barrier_grid(ctx, b, nb)
    sc.all_reduce_grid(ctx, vec(ar + m, m), vec(src, m), sc.OP_MAX, b, nb)


P = Ptr(F32)
KERNELS = [
    Kernel(t_pg, [("ctx", I64), ("dst", P), ("src", P), ("got", P), ("n", I32)], block=BLOCK),
    Kernel(t_bulk, [("ctx", I64), ("dst", P), ("got", P), ("src", P), ("n", I32)], block=BLOCK),
    Kernel(t_put_signal, [("ctx", I64), ("dst", P), ("got", P), ("src", P), ("sig", Ptr(U64, 8)),
                          ("n", I32), ("epoch", I64)], block=BLOCK),
    Kernel(t_words, [("ctx", I64), ("w32", Ptr(I32, 4)), ("w64", Ptr(I64, 8)),
                     ("u32", Ptr(cutlass.Uint32, 4)), ("u64", Ptr(U64, 8)), ("f32", Ptr(F32, 4)),
                     ("f64", Ptr(cutlass.Float64, 8)), ("out", Ptr(cutlass.Float64, 8)),
                     ("epoch", I64)], block=64),
    Kernel(t_amo, [("ctx", I64), ("a32", Ptr(I32, 4)), ("a64", Ptr(I64, 8)),
                   ("u32", Ptr(cutlass.Uint32, 4)), ("u64", Ptr(U64, 8)),
                   ("out", Ptr(I64, 8))], block=BLOCK),
    Kernel(t_sync, [("ctx", I64), ("data", P), ("out", P), ("n", I32), ("epoch", I32)],
           block=BLOCK),
    Kernel(t_coll, [("ctx", I64), ("ar", P), ("src", P), ("ag", P), ("rs", P), ("a2a", P),
                    ("bc", P), ("n", I32)], block=256),
    Kernel(t_coll_grid, [("ctx", I64), ("ar", P), ("src", P), ("n", I32)], block=256),
]
