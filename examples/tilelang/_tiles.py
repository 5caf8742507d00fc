"""Pieces the TileLang example kernels share (imported by kernel builders
only: it needs TileLang). The helpers are T.macro, so that their Python
`if` on device values becomes device code as in a prim_func body."""
import tilelang.language as T

import symm.tilelang as sT

DTYPE = "float16"


@T.macro
def wait_all_threads(ctx, words, i, value):
    """Thread 0 waits (acquire) until words[i] >= value, then the whole
    block goes on: the block barrier extends the acquire to every thread.
    (A macro's arguments are values, so the word comes as buffer + index.)"""
    if T.get_thread_binding(0) == 0:
        sT.wait_ge(ctx, words[i], value)
    T.sync_threads()


@T.macro
def arrive_and_wait(ctx, counters, i, peers_value, npes):
    """Add 1 to counters[i] on every PE (release, after the block's stores:
    the block barrier orders them before thread t's signal to PE t), then
    wait until this PE's counters[i] reaches peers_value (acquire)."""
    tx = T.get_thread_binding(0)
    T.sync_threads()
    if tx < npes:
        sT.signal_op(ctx, counters[i], 1, "add", tx)
    wait_all_threads(ctx, counters, i, peers_value)


# Most blocks of an exchange launch: the stream collectives' cap for a data
# move (SYMM__COLL_MOVE_BLOCKS); the grid is chosen per call (exchange_blocks).
MAX_BLOCKS = 128
# The stream collectives' block size for data moves (SYMM__COLL_THREADS in src/coll/coll_launch.h).
MOVE_THREADS = 512


def exchange_kernel(kind, n, npes_static, threads=MOVE_THREADS):
    """TileScale-style all-gather (kind "gather": out[p*n:] = inp of PE p)
    or all-to-all ("a2a": piece p of inp goes to PE p, landing at piece me of
    its out) by hand: launched with any grid of at most MAX_BLOCKS blocks,
    the same on every PE, each block takes a 16-byte-aligned slice of the
    piece, enters with an arrive-and-wait (no PE writes into a peer still
    reading the previous call's output), puts its slice to every PE with one
    put_block each (nbi), quiets, and signals its arrival. The call number
    lives on the device (calls[bx], this PE's alone), so a captured CUDA
    graph replays it unchanged; entry / arrived / calls start at zero."""
    in_n = n if kind == "gather" else npes_static * n
    units = n // 8  # 16-byte vectors of float16 per piece
    if n % 8:
        raise ValueError("exchange_kernel: n must be a multiple of 8 (16-byte slices)")

    @T.prim_func
    def exchange(ctx: T.uint64, inp: T.Tensor((in_n,), DTYPE), out: T.Tensor((npes_static * n,), DTYPE),
                 entry: T.Tensor((MAX_BLOCKS,), "uint64"), arrived: T.Tensor((MAX_BLOCKS,), "uint64"),
                 calls: T.Tensor((MAX_BLOCKS,), "uint64")):
        with T.Kernel(MAX_BLOCKS, threads=threads) as bx:
            me = sT.get_rank(ctx)
            npes = sT.get_num_ranks(ctx)
            nblk = T.call_extern("int32", "symm_tl_nblocks")
            # every index is >= 0: C division, not floor division's sign tests
            lo = T.truncdiv(bx * units, nblk) * 8
            hi = T.truncdiv((bx + 1) * units, nblk) * 8
            want = T.alloc_var("uint64", init=0)  # what the waits expect (thread 0's)
            if T.get_thread_binding(0) == 0:
                calls[bx] = calls[bx] + T.uint64(1)
                want = calls[bx] * T.cast(npes, "uint64")
            arrive_and_wait(ctx, entry, bx, want, npes)
            for i in T.serial(npes):
                p = (me + i) % npes
                if kind == "gather":
                    sT.put_block(ctx, inp[lo], out[me * n + lo], hi - lo, p, nbi=True)
                else:
                    sT.put_block(ctx, inp[p * n + lo], out[me * n + lo], hi - lo, p, nbi=True)
            sT.quiet_block(ctx)
            arrive_and_wait(ctx, arrived, bx, want, npes)
    return exchange


def device_coll_kernel(kind, n, npes_static, threads=MOVE_THREADS):
    """The same collective as one call of symm's device collective
    (all_gather_grid / all_to_all_grid) inside a TileLang kernel, launched
    with any grid of at most MAX_BLOCKS blocks (the collective splits the
    work by the grid's size)."""
    in_n = n if kind == "gather" else npes_static * n

    @T.prim_func
    def coll(ctx: T.uint64, inp: T.Tensor((in_n,), DTYPE), out: T.Tensor((npes_static * n,), DTYPE)):
        with T.Kernel(MAX_BLOCKS, threads=threads):
            if kind == "gather":
                sT.all_gather_grid(ctx, out, inp, n)
            else:
                sT.all_to_all_grid(ctx, out, inp, n)
    return coll


# Packet exchange: 4-byte words of data per block (one per thread) and the
# block size; the grid is one block per PKT_WORDS words (exchange_blocks).
PKT_WORDS = 256
PKT_THREADS = 256


def packet_kernel(kind, n, npes_static, threads=PKT_THREADS):
    """The all-gather / all-to-all of exchange_kernel for small sizes, with
    no handshake: every 4-byte word travels as one 8-byte packet (data low,
    the call number high) stored with one relaxed st into the peer's staging
    buffer (stage: 2 parities x npes sources x n/2 words, symmetric, zeroed);
    the receiver waits for each word until its call number arrives and copies
    the data out. Block b of every PE sends and receives the same words, and
    has at least one word from every peer, so it cannot start call c + 2
    before each peer's block b has started call c + 1, i.e. finished reading
    call c's packets: the parity (c & 1) halves never hold a live packet when
    overwritten, and a half's stale packets carry c - 2 < c (wait_ge on the
    whole word is the flag test). inp / out are the float16 tensors viewed as
    int32; calls[bx] (this PE's, zeroed) holds the block's call number."""
    if n % 2:
        raise ValueError("packet_kernel: n must be even (4-byte words of float16)")
    words = n // 2
    in_w = words if kind == "gather" else npes_static * words

    @T.prim_func
    def packet(ctx: T.uint64, inp: T.Tensor((in_w,), "int32"), out: T.Tensor((npes_static * words,), "int32"),
               stage: T.Tensor((2 * npes_static * words,), "uint64"), calls: T.Tensor((MAX_BLOCKS,), "uint64")):
        with T.Kernel(MAX_BLOCKS, threads=threads) as bx:
            tx = T.get_thread_binding(0)
            me = sT.get_rank(ctx)
            nblk = T.call_extern("int32", "symm_tl_nblocks")
            # clamped and static strides: TileLang's bounds pass must prove
            # every staging index in range (it cannot guard an address)
            lo = T.max(T.min(T.truncdiv(bx * words, nblk), words), 0)
            hi = T.max(T.min(T.truncdiv((bx + 1) * words, nblk), words), 0)
            call = calls[bx] + T.uint64(1)
            T.sync_threads()  # every thread has read the old count
            if tx == 0:
                calls[bx] = call
            flag = call << T.uint64(32)
            par = T.floormod(T.cast(call, "int32"), 2) * npes_static
            for j in T.serial(T.truncdiv(hi - lo + threads - 1, threads)):
                k = lo + j * threads + tx
                if k < hi and k < words:
                    for i in T.serial(npes_static - 1):
                        p = T.floormod(me + i + 1, npes_static)
                        src = k if kind == "gather" else p * words + k
                        sT.st(ctx, stage[(par + T.floormod(me, npes_static)) * words + k],
                              flag | T.cast(T.cast(inp[src], "uint32"), "uint64"),
                              scope="sys", sem="relaxed", dst_pe=p)
                    out[me * words + k] = inp[k if kind == "gather" else me * words + k]
            for j in T.serial(T.truncdiv(hi - lo + threads - 1, threads)):
                k = lo + j * threads + tx
                if k < hi and k < words:
                    for i in T.serial(npes_static - 1):
                        p = T.floormod(me + i + 1, npes_static)
                        v = sT.wait_ge(ctx, stage[(par + p) * words + k], flag)
                        out[p * words + k] = T.cast(T.cast(v & T.uint64(0xFFFFFFFF), "uint32"), "int32")
    return packet
