"""The CuTe DSL kernels of the examples, as symm.cute.Kernels.

Each kernel takes the context and plain pointers and sizes (so its cubin can
be launched without CuTe DSL, symm.cubin), builds tensor views inside, and
calls symm through symm.cute. The drivers (ring.py, all_gather.py, ...) run
them, check them against torch and time them; build_cubins.py compiles them
ahead of time. Conventions:
  - `epoch` counts the calls (1, 2, ...): signal words are never reset, a
    call waits for the value its own epoch makes. The ring kernels take it
    as an argument; the collectives (ag_push, ar_*, rs_*) count it on the
    device, one word per CTA, so their launches replay from a CUDA graph;
  - f32 data moves as 16-byte vectors (4 elements) with a scalar tail; the
    collectives keep UNITS of them per thread in flight, from a grid of up
    to one CTA of COLL_THREADS per SM (the driver sizes it);
  - block-scope calls are made by every thread of the CTA, thread-scope
    ones by the threads named in the code.
"""
import cutlass
import cutlass.cute as cute

import symm.cute as sc
from symm.cute import Kernel, Ptr, multimem

F32, I32, I64, U64 = cutlass.Float32, cutlass.Int32, cutlass.Int64, cutlass.Uint64
THREADS = 256


def vec(ptr, n):
    return cute.make_tensor(ptr, cute.make_layout(n))


def vec4(ptr, n4):
    """n4 rows of 4 f32: row i is one 16-byte load or store."""
    return cute.make_tensor(ptr, cute.make_layout((n4, 4), stride=(4, 1)))


def cta_range(n, b, nb):
    """[lo, hi) of n items for CTA b of nb (contiguous, balanced)."""
    per = (n + nb - 1) // nb
    lo = cutlass.min(b * per, n)
    hi = cutlass.min(lo + per, n)
    return lo, hi


FLAG_WORDS = 4096  # one handshake's words: [CTA][PE]; the next handshake follows
MAX_CTAS = 1024    # CTAs of a collective's grid, at most (FLAG_WORDS / n_pes with 4 PEs)
EPOCH_OFF = 3 * FLAG_WORDS  # flags: 3 handshakes, then one call counter per CTA
FLAGS_WORDS = EPOCH_OFF + MAX_CTAS
COLL_THREADS = 512
UNITS = 4          # 16-byte vectors per thread per round, all loaded before any is used


@cute.jit
def handshake(ctx, flags, b, epoch):
    """CTA b of every PE waits for CTA b of every other PE: thread p < n_pes
    (p != me) sets word [b][me] on PE p to epoch (release) and waits for its
    own word [b][p] (acquire); the CTA barrier then orders the whole CTA
    after it. No word to itself: its own CTA barrier already orders it."""
    tid, _, _ = cute.arch.thread_idx()
    me, npes = sc.my_pe(ctx), sc.n_pes(ctx)
    cute.arch.barrier()
    if tid < npes and tid != me:
        sc.signal_op(ctx, flags + (b * npes + me), cutlass.Uint64(epoch), sc.SIGNAL_SET, tid)
        sc.signal_wait_until(ctx, flags + (b * npes + tid), sc.CMP_GE, cutlass.Uint64(epoch))
    cute.arch.barrier()


@cute.jit
def next_epoch(counter, b):
    """This call's epoch for CTA b: its counter word (this PE's memory,
    written by the previous call in stream order) plus one. Every thread
    reads it first; end_epoch stores it last."""
    return vec(counter, b + 1)[b] + cutlass.Uint64(1)


@cute.jit
def end_epoch(counter, b, epoch):
    """Store CTA b's epoch once every thread of the CTA is done with the call."""
    tid, _, _ = cute.arch.thread_idx()
    cute.arch.barrier()
    if tid == 0:
        vec(counter, b + 1)[b] = epoch


# ---------------------------------------------------------------------------
# Ring: put with signal, and get after a signal
# ---------------------------------------------------------------------------

@cute.kernel
def ring_put(ctx: I64, dst: cute.Pointer, src: cute.Pointer, sig: cute.Pointer, n: I32,
             epoch: I64):
    """CTA b puts its share of src into the next PE's dst and sets the next
    PE's signal word b to epoch (put_signal_block: data, then the release
    signal); then it waits for its own word b from the previous PE."""
    b, _, _ = cute.arch.block_idx()
    nb, _, _ = cute.arch.grid_dim()
    me, npes = sc.my_pe(ctx), sc.n_pes(ctx)
    lo, hi = cta_range(n, b, nb)
    d = vec(dst + lo, hi - lo)
    s = vec(src + lo, hi - lo)
    sc.put_signal_block(ctx, d, s, sig + b, cutlass.Uint64(epoch), sc.SIGNAL_SET, (me + 1) % npes)
    sc.signal_wait_until(ctx, sig + b, sc.CMP_GE, cutlass.Uint64(epoch))


@cute.kernel
def ring_get(ctx: I64, dst: cute.Pointer, src: cute.Pointer, sig: cute.Pointer, n: I32,
             epoch: I64):
    """Every PE tells the next one that its src is ready (signal_op SET
    epoch on word b), waits for the previous PE's word, and gets the previous
    PE's src into dst (get_block); a second word (b + nb) then tells the
    previous PE that its src may change again."""
    tid, _, _ = cute.arch.thread_idx()
    b, _, _ = cute.arch.block_idx()
    nb, _, _ = cute.arch.grid_dim()
    me, npes = sc.my_pe(ctx), sc.n_pes(ctx)
    nxt, prv = (me + 1) % npes, (me + npes - 1) % npes
    lo, hi = cta_range(n, b, nb)
    if tid == 0:
        sc.signal_op(ctx, sig + b, cutlass.Uint64(epoch), sc.SIGNAL_SET, nxt)
        sc.signal_wait_until(ctx, sig + b, sc.CMP_GE, cutlass.Uint64(epoch))
    cute.arch.barrier()
    sc.get_block(ctx, vec(dst + lo, hi - lo), vec(src + lo, hi - lo), prv)
    if tid == 0:
        sc.signal_op(ctx, sig + (nb + b), cutlass.Uint64(epoch), sc.SIGNAL_SET, prv)
        sc.signal_wait_until(ctx, sig + (nb + b), sc.CMP_GE, cutlass.Uint64(epoch))
    cute.arch.barrier()


# ---------------------------------------------------------------------------
# All-gather
# ---------------------------------------------------------------------------

@cute.jit
def cta_range16(n, b, nb):
    """cta_range in f32 elements, cut at multiples of 64 elements (256 bytes)
    so that every CTA's piece starts 16-byte aligned."""
    per = ((n + nb - 1) // nb + 63) // 64 * 64
    lo = cutlass.min(b * per, n)
    hi = cutlass.min(lo + per, n)
    return lo, hi


@cute.kernel
def ag_push(ctx: I64, dst: cute.Pointer, src: cute.Pointer, sig: cute.Pointer, n: I32):
    """dst (n_pes * n) gets PE p's src at p * n: CTA b copies its share of
    src into its own dst (put_block), puts it into every other PE's dst with
    put_signal_block, ADD 1 on that PE's word [b]; then waits until its word
    [b] counts n_pes - 1 per epoch. sig: MAX_CTAS signal words, then
    MAX_CTAS call counters."""
    b, _, _ = cute.arch.block_idx()
    nb, _, _ = cute.arch.grid_dim()
    me, npes = sc.my_pe(ctx), sc.n_pes(ctx)
    epoch = next_epoch(sig + MAX_CTAS, b)
    lo, hi = cta_range16(n, b, nb)
    s = vec(src + lo, hi - lo)
    d = vec(dst + (me * n + lo), hi - lo)
    for i in cutlass.range(1, npes):
        sc.put_signal_block(ctx, d, s, sig + b, cutlass.Uint64(1), sc.SIGNAL_ADD, (me + i) % npes)
    sc.put_block(ctx, d, s, me)
    if npes > 1:
        sc.signal_wait_until(ctx, sig + b, sc.CMP_GE, epoch * cutlass.Uint64(npes - 1))
    end_epoch(sig + MAX_CTAS, b, epoch)


@cute.kernel
def ag_device(ctx: I64, dst: cute.Pointer, src: cute.Pointer, n: I32):
    """The same all-gather through the device-callable collective
    (all_gather_grid: the CUDA C algorithms of symm_device_coll.h)."""
    b, _, _ = cute.arch.block_idx()
    nb, _, _ = cute.arch.grid_dim()
    sc.all_gather_grid(ctx, vec(dst, n * sc.n_pes(ctx)), vec(src, n), b, nb)


# ---------------------------------------------------------------------------
# All-reduce and reduce-scatter (f32 sum)
# ---------------------------------------------------------------------------

@cute.jit
def units(ptr, i):
    """This thread's UNITS 16-byte vectors of a round, starting at vector i:
    vectors i, i + COLL_THREADS, ... (a warp's accesses stay contiguous)."""
    return cute.make_tensor((ptr + i * 4).align(16),
                            cute.make_layout((4, UNITS), stride=(1, 4 * COLL_THREADS)))


@cute.jit
def _sum_peers(ctx, dst, src, lo4, hi4, npes):
    """dst[v] = sum over PEs (in PE order) of src[v] for the 16-byte vectors
    v in [lo4, hi4) (dst and src 16-byte aligned), loading the peers' copies
    over NVLink: rounds of UNITS vectors per thread and peer, every load of a
    peer issued before the sums use them; then single vectors for the end."""
    tid, _, _ = cute.arch.thread_idx()
    i = lo4 + tid
    while i + (UNITS - 1) * COLL_THREADS < hi4:
        s = units(src, i)
        acc = sc.peer_tensor(ctx, s, 0).load()
        for p in cutlass.range(1, npes, unroll=2):
            acc = acc + sc.peer_tensor(ctx, s, p).load()
        units(dst, i).store(acc)
        i += UNITS * COLL_THREADS
    while i < hi4:
        s = vec4(src, hi4)
        acc = sc.peer_tensor(ctx, s, 0)[i, None].load()
        for p in cutlass.range(1, npes):
            acc = acc + sc.peer_tensor(ctx, s, p)[i, None].load()
        vec4(dst, hi4)[i, None].store(acc)
        i += COLL_THREADS


@cute.jit
def _sum_tail(ctx, dst, src, n, npes):
    """The last n % 4 elements, by thread 0 of CTA 0."""
    tid, _, _ = cute.arch.thread_idx()
    b, _, _ = cute.arch.block_idx()
    if tid == 0 and b == 0:
        for j in cutlass.range(n // 4 * 4, n):
            a = sc.peer_tensor(ctx, vec(src, n), 0)[j]
            for p in cutlass.range(1, npes):
                a = a + sc.peer_tensor(ctx, vec(src, n), p)[j]
            vec(dst, n)[j] = a


@cute.jit
def _copy_from(ctx, dst, src, lo4, hi4, pe):
    """dst[v] = PE pe's src[v] for the 16-byte vectors v in [lo4, hi4), in
    rounds of UNITS loads per thread like _sum_peers."""
    tid, _, _ = cute.arch.thread_idx()
    i = lo4 + tid
    while i + (UNITS - 1) * COLL_THREADS < hi4:
        units(dst, i).store(sc.peer_tensor(ctx, units(src, i), pe).load())
        i += UNITS * COLL_THREADS
    while i < hi4:
        vec4(dst, hi4)[i, None].store(sc.peer_tensor(ctx, vec4(src, hi4), pe)[i, None].load())
        i += COLL_THREADS


@cute.kernel
def ar_oneshot(ctx: I64, dst: cute.Pointer, src: cute.Pointer, flags: cute.Pointer, n: I32):
    """One-shot all-reduce reading the peers' tensors: after a handshake
    (every PE's src is ready), CTA b sums its share of every PE's src into
    its own dst, then a second handshake (the next FLAG_WORDS words) keeps
    the peers' src unchanged until everyone has read it."""
    b, _, _ = cute.arch.block_idx()
    nb, _, _ = cute.arch.grid_dim()
    npes = sc.n_pes(ctx)
    epoch = next_epoch(flags + EPOCH_OFF, b)
    handshake(ctx, flags, b, epoch)
    lo, hi = cta_range(n // 4, b, nb)
    _sum_peers(ctx, dst, src, lo, hi, npes)
    _sum_tail(ctx, dst, src, n, npes)
    handshake(ctx, flags + FLAG_WORDS, b, epoch)
    end_epoch(flags + EPOCH_OFF, b, epoch)


@cute.kernel
def ar_twoshot(ctx: I64, dst: cute.Pointer, src: cute.Pointer, flags: cute.Pointer, n: I32):
    """Two-shot all-reduce reading the peers' tensors (n a multiple of 4):
    PE r sums slice r of every PE's src into slice r of its own dst
    (reduce-scatter), a handshake, then it reads slice q of PE q's dst for
    every other q (all-gather); CTA b of every PE takes the same part of each
    slice, so the handshakes pair CTA b with CTA b. Each PE loads 2 (n_pes -
    1) / n_pes of the data from peers instead of the one-shot's n_pes - 1."""
    b, _, _ = cute.arch.block_idx()
    nb, _, _ = cute.arch.grid_dim()
    me, npes = sc.my_pe(ctx), sc.n_pes(ctx)
    epoch = next_epoch(flags + EPOCH_OFF, b)
    n4 = n // 4
    handshake(ctx, flags, b, epoch)
    lo, hi = cta_range(n4, me * nb + b, npes * nb)
    _sum_peers(ctx, dst, src, lo, hi, npes)
    handshake(ctx, flags + FLAG_WORDS, b, epoch)
    for i in cutlass.range(1, npes):
        q = (me + i) % npes
        lo, hi = cta_range(n4, q * nb + b, npes * nb)
        _copy_from(ctx, dst, dst, lo, hi, q)
    handshake(ctx, flags + 2 * FLAG_WORDS, b, epoch)
    end_epoch(flags + EPOCH_OFF, b, epoch)


@cute.kernel
def rs_oneshot(ctx: I64, dst: cute.Pointer, src: cute.Pointer, flags: cute.Pointer, n: I32):
    """Reduce-scatter reading the peers' tensors: src holds n_pes pieces of
    n (a multiple of 4); PE r's dst gets the sum over PEs of piece r."""
    b, _, _ = cute.arch.block_idx()
    nb, _, _ = cute.arch.grid_dim()
    me, npes = sc.my_pe(ctx), sc.n_pes(ctx)
    epoch = next_epoch(flags + EPOCH_OFF, b)
    handshake(ctx, flags, b, epoch)
    lo, hi = cta_range(n // 4, b, nb)
    # piece me of src (n % 4 == 0, so the piece stays 16-byte aligned)
    _sum_peers(ctx, dst, (src + me * n).align(16), lo, hi, npes)
    handshake(ctx, flags + FLAG_WORDS, b, epoch)
    end_epoch(flags + EPOCH_OFF, b, epoch)


@cute.kernel
def ar_device(ctx: I64, dst: cute.Pointer, src: cute.Pointer, n: I32):
    """All-reduce through the device-callable collective (all_reduce_grid)."""
    b, _, _ = cute.arch.block_idx()
    nb, _, _ = cute.arch.grid_dim()
    sc.all_reduce_grid(ctx, vec(dst, n), vec(src, n), sc.OP_SUM, b, nb)


@cute.kernel
def rs_device(ctx: I64, dst: cute.Pointer, src: cute.Pointer, n: I32):
    """Reduce-scatter through the device-callable collective."""
    b, _, _ = cute.arch.block_idx()
    nb, _, _ = cute.arch.grid_dim()
    sc.reduce_scatter_grid(ctx, vec(dst, n), vec(src, n * sc.n_pes(ctx)), sc.OP_SUM, b, nb)


@cute.kernel
def ar_multimem(ctx: I64, mc_dst: I64, mc_src: I64, flags: cute.Pointer, n: I32, epoch: I64):
    """The multimem twin of ar_oneshot (n a multiple of 4): PE r reduces
    slice r of the multicast src with multimem.ld_reduce and stores the sums
    to every PE's dst with multimem.st; a handshake before (src ready) and
    after (every slice stored). mc_dst / mc_src are multicast byte addresses
    (symm.cute.host.get_multicast_tensor): compiled here, run only where
    multicast is enabled."""
    tid, _, _ = cute.arch.thread_idx()
    b, _, _ = cute.arch.block_idx()
    nb, _, _ = cute.arch.grid_dim()
    me, npes = sc.my_pe(ctx), sc.n_pes(ctx)
    handshake(ctx, flags, b, epoch)
    lo, hi = cta_range(n // 4, me * nb + b, npes * nb)
    i = lo + tid
    while i < hi:
        v = multimem.ld_reduce_add_v4_f32(mc_src + cutlass.Int64(i) * 16)
        multimem.st_v4_f32(mc_dst + cutlass.Int64(i) * 16, v)
        i += THREADS
    sc.fence_block(ctx)
    handshake(ctx, flags + FLAG_WORDS, b, epoch)


P = Ptr(F32)
S = Ptr(U64, 8)
KERNELS = [
    Kernel(ring_put, [("ctx", I64), ("dst", P), ("src", P), ("sig", S), ("n", I32), ("epoch", I64)],
           block=THREADS),
    Kernel(ring_get, [("ctx", I64), ("dst", P), ("src", P), ("sig", S), ("n", I32), ("epoch", I64)],
           block=THREADS),
    Kernel(ag_push, [("ctx", I64), ("dst", P), ("src", P), ("sig", S), ("n", I32)],
           block=COLL_THREADS),
    Kernel(ag_device, [("ctx", I64), ("dst", P), ("src", P), ("n", I32)], block=512),
    Kernel(ar_oneshot, [("ctx", I64), ("dst", P), ("src", P), ("flags", S), ("n", I32)],
           block=COLL_THREADS),
    Kernel(ar_twoshot, [("ctx", I64), ("dst", P), ("src", P), ("flags", S), ("n", I32)],
           block=COLL_THREADS),
    Kernel(rs_oneshot, [("ctx", I64), ("dst", P), ("src", P), ("flags", S), ("n", I32)],
           block=COLL_THREADS),
    Kernel(ar_device, [("ctx", I64), ("dst", P), ("src", P), ("n", I32)], block=512),
    Kernel(rs_device, [("ctx", I64), ("dst", P), ("src", P), ("n", I32)], block=512),
    Kernel(ar_multimem, [("ctx", I64), ("mc_dst", I64), ("mc_src", I64), ("flags", S), ("n", I32),
                         ("epoch", I64)], block=THREADS),
]
