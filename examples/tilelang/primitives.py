"""Every symm.tilelang primitive in a kernel, each checked on the GPU with
fresh random data: TileScale's primitive examples (put / get at warp and
block scope, remote st, sync), then the rest (thread-scope and nbi put /
get, put with signal, signals, p / g, ld / st, waits local and on a peer,
atomics, fences, barriers, the device collectives).

    torchrun --nproc-per-node N examples/tilelang/primitives.py [--aot build-tilelang]

Data moves around the ring: PE me writes into PE nxt = (me + 1) % n and
reads what PE prv = (me - 1) % n wrote. Kernels take the team size from the
context, so one build serves every PE count. tests/python/test_tilelang_aot.py
compiles these kernels in CI and checks their PTX."""
import sys

import torch

import symm

from _common import all_ok, close, example_main, ldst_reach, rand, row, skipped, sync_all, time_op

N = 65536          # elements moved by the put / get kernels
BLOCK = 4096       # elements per block
THREADS = 128
M = 1000           # elements per put_signal region (not a multiple of 16 bytes)
NMAX = 8           # collective buffers hold up to NMAX PEs' pieces
COUNT = 1000       # collective count per piece
GRID_BLOCKS = 4
LDST = ("int32", "int64", "uint32", "uint64", "float32", "float64")
RMA = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64")
AMO = ("int32", "int64", "uint32", "uint64")
SEMS_ST = ("weak", "relaxed", "release", "volatile")
SEMS_LD = ("weak", "relaxed", "acquire", "volatile")
SCOPES = ("cta", "gpu", "sys")
CMPS = (("eq", 5), ("ne", 4), ("gt", 4), ("ge", 5), ("lt", 6), ("le", 5))
FENCES = ("fence", "fence_warp", "fence_block", "quiet", "quiet_warp", "quiet_block",
          "fence_cta", "fence_gpu", "fence_sys")
COLLS = ("all_reduce", "all_reduce_ex", "reduce_scatter", "reduce_scatter_ex", "all_gather",
         "all_to_all", "broadcast", "all_to_allv")
CONFIGS = [dict()]


# ---------------------------------------------------------------------------------------
# kernels (builders import TileLang)
# ---------------------------------------------------------------------------------------

def k_bulk(kind, scope, nbi):
    """put / get of N float16 elements to / from the next PE: each block its
    BLOCK slice; scope warp: each warp a quarter of it; thread: thread 0."""
    import tilelang.language as T
    import symm.tilelang as sT
    fn = getattr(sT, kind + ("_" + scope if scope != "thread" else ""))
    quiet = {"thread": sT.quiet, "warp": sT.quiet_warp, "block": sT.quiet_block}[scope]
    per_warp = BLOCK // (THREADS // 32)

    @T.prim_func
    def bulk(ctx: T.uint64, src: T.Tensor((N,), "float16"), dst: T.Tensor((N,), "float16")):
        with T.Kernel(N // BLOCK, threads=THREADS) as bx:
            tx = T.get_thread_binding(0)
            nxt = (sT.get_rank(ctx) + 1) % sT.get_num_ranks(ctx)
            if scope == "warp":
                off = bx * BLOCK + (tx // 32) * per_warp
                fn(ctx, src[off], dst[off], per_warp, nxt, nbi=nbi)
                if nbi:
                    quiet(ctx)
            elif scope == "block":
                fn(ctx, src[bx * BLOCK], dst[bx * BLOCK], BLOCK, nxt, nbi=nbi)
                if nbi:
                    quiet(ctx)
            else:
                if tx == 0:
                    fn(ctx, src[bx * BLOCK], dst[bx * BLOCK], BLOCK, nxt, nbi=nbi)
                    if nbi:
                        quiet(ctx)
    return bulk


def k_peer_copy():
    """TileLang's own tile copy into the next PE's buffer (peer_tensor)."""
    import tilelang.language as T
    import symm.tilelang as sT

    @T.prim_func
    def peer_copy(ctx: T.uint64, src: T.Tensor((N,), "float16"), dst: T.Tensor((N,), "float16")):
        with T.Kernel(N // BLOCK, threads=THREADS) as bx:
            nxt = (sT.get_rank(ctx) + 1) % sT.get_num_ranks(ctx)
            remote = sT.peer_tensor(ctx, dst, nxt)
            T.copy(src[bx * BLOCK:(bx + 1) * BLOCK], remote[bx * BLOCK:(bx + 1) * BLOCK])
    return peer_copy


def k_remote_st():
    """st into the next PE with every (sem, scope), then ld of what the
    previous PE stored here and of what this PE stored there."""
    import tilelang.language as T
    import symm.tilelang as sT

    @T.prim_func
    def remote_st(ctx: T.uint64, vals: T.Tensor((THREADS,), "int32"), raw: T.Tensor((len(LDST) * THREADS * 8,), "uint8"),
                  out_here: T.Tensor((len(LDST), THREADS), "float64"), out_there: T.Tensor((len(LDST), THREADS), "float64")):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding(0)
            nxt = (sT.get_rank(ctx) + 1) % sT.get_num_ranks(ctx)
            for j, dt in enumerate(LDST):
                words = sT.peer_tensor(ctx, raw[j * THREADS * 8], -1, (THREADS,), dt)
                v = T.Cast(dt, vals[tx] + j)
                for s, sem in enumerate(SEMS_ST):
                    for c, scope in enumerate(SCOPES):
                        if tx % 12 == s * 3 + c:
                            sT.st(ctx, words[tx], v, scope=scope, sem=sem, dst_pe=nxt)
            sT.barrier_block(ctx)
            for j, dt in enumerate(LDST):
                words = sT.peer_tensor(ctx, raw[j * THREADS * 8], -1, (THREADS,), dt)
                for s, sem in enumerate(SEMS_LD):
                    for c, scope in enumerate(SCOPES):
                        if tx % 12 == s * 3 + c:
                            out_here[j, tx] = T.Cast("float64", sT.ld(ctx, words[tx], scope=scope, sem=sem))
                            out_there[j, tx] = T.Cast("float64", sT.ld(ctx, words[tx], scope=scope, sem=sem,
                                                                        src_pe=nxt))
    return remote_st


def k_sync():
    """TileScale's sync example: data put to the next PE, a release st of a
    flag there, the receiver's local wait then acquire loads; and a wait on
    the previous PE's own flag word (a wait on a peer)."""
    import tilelang.language as T
    import symm.tilelang as sT
    n = 1024

    @T.prim_func
    def sync(ctx: T.uint64, data: T.Tensor((n,), "float32"), recv: T.Tensor((n,), "float32"),
             out: T.Tensor((n,), "float32"), flag: T.Tensor((2,), "int32"), epoch: T.int32):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding(0)
            me = sT.get_rank(ctx)
            npes = sT.get_num_ranks(ctx)
            nxt = (me + 1) % npes
            prv = (me + npes - 1) % npes
            sT.put_block(ctx, data, recv, n, nxt)
            T.sync_threads()
            if tx == 0:
                sT.st(ctx, flag[0], epoch, scope="sys", sem="release", dst_pe=nxt)
                sT.st(ctx, flag[1], epoch, scope="sys", sem="release")
            sT.wait_ge(ctx, flag[0], epoch)
            sT.wait_ge(ctx, flag[1], epoch, peer=prv)
            for i in T.serial(n // THREADS):
                out[i * THREADS + tx] = sT.ld(ctx, recv[i * THREADS + tx], scope="sys", sem="acquire")
    return sync


def k_signals():
    """put_signal at the three scopes, blocking and nbi, and signal_op set /
    add, into the next PE; then the waits and fetches of what the previous
    PE signalled here."""
    import tilelang.language as T
    import symm.tilelang as sT

    @T.prim_func
    def signals(ctx: T.uint64, src: T.Tensor((6 * M,), "float32"), dst: T.Tensor((6 * M,), "float32"),
                sig: T.Tensor((8,), "uint64"), out: T.Tensor((16,), "uint64"), epoch: T.uint64):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding(0)
            nxt = (sT.get_rank(ctx) + 1) % sT.get_num_ranks(ctx)
            if tx == 0:
                sT.put_signal(ctx, src[0], dst[0], M, sig[0], epoch, "set", nxt)
                sT.put_signal(ctx, src[M], dst[M], M, sig[1], 1, "add", nxt, nbi=True)
                sT.signal_op(ctx, sig[6], epoch, "set", nxt)
                sT.signal_op(ctx, sig[7], 1, "add", nxt)
            if tx // 32 == 1:
                sT.put_signal_warp(ctx, src[2 * M], dst[2 * M], M, sig[2], epoch, "set", nxt)
                sT.put_signal_warp(ctx, src[3 * M], dst[3 * M], M, sig[3], 1, "add", nxt, nbi=True)
            sT.put_signal_block(ctx, src[4 * M], dst[4 * M], M, sig[4], epoch, "set", nxt)
            sT.put_signal_block(ctx, src[5 * M], dst[5 * M], M, sig[5], 1, "add", nxt, nbi=True)
            if tx < 8:
                out[tx] = sT.signal_wait_until(ctx, sig[tx], "ge", epoch)
            T.sync_threads()
            if tx < 8:
                out[8 + tx] = sT.signal_fetch(ctx, sig[tx])
    return signals


def k_packets():
    """put_pkt at the three scopes into the next PE's packet buffers, then
    pkt_wait at the three scopes for what the previous PE put here (the
    flag is the call's epoch: each call's flag is new to the buffers)."""
    import tilelang.language as T
    import symm.tilelang as sT

    @T.prim_func
    def packets(ctx: T.uint64, src: T.Tensor((3 * M,), "float32"), pkt: T.Tensor((6 * M,), "float32"),
                dst: T.Tensor((3 * M,), "float32"), epoch: T.uint32):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding(0)
            nxt = (sT.get_rank(ctx) + 1) % sT.get_num_ranks(ctx)
            if tx == 0:
                sT.put_pkt(ctx, src[0], pkt[0], M, epoch, nxt)
            if tx // 32 == 1:
                sT.put_pkt_warp(ctx, src[M], pkt[2 * M], M, epoch, nxt)
            sT.put_pkt_block(ctx, src[2 * M], pkt[4 * M], M, epoch, nxt)
            if tx == 0:
                sT.pkt_wait(ctx, pkt[0], dst[0], M, epoch)
            if tx // 32 == 1:
                sT.pkt_wait_warp(ctx, pkt[2 * M], dst[M], M, epoch)
            sT.pkt_wait_block(ctx, pkt[4 * M], dst[2 * M], M, epoch)
    return packets


def k_packets_v64():
    """The register packet forms into the next PE: thread 0 puts word 0 with
    put_pkt_v64, warp 1 words 1..32 with put_pkt_v64_warp; then the same
    threads wait for the previous PE's words and store what the waits return."""
    import tilelang.language as T
    import symm.tilelang as sT

    @T.prim_func
    def packets_v64(ctx: T.uint64, src: T.Tensor((33,), "int64"), pkt: T.Tensor((66,), "int64"),
                    dst: T.Tensor((33,), "int64"), epoch: T.uint32):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding(0)
            nxt = (sT.get_rank(ctx) + 1) % sT.get_num_ranks(ctx)
            if tx == 0:
                sT.put_pkt_v64(ctx, src[0], pkt[0], epoch, nxt)
            if tx // 32 == 1:
                sT.put_pkt_v64_warp(ctx, src[1 + tx % 32], pkt[2], 32, epoch, nxt)
            if tx == 0:
                dst[0] = T.Cast("int64", sT.pkt_wait_v64(ctx, pkt[0], epoch))
            if tx // 32 == 1:
                dst[1 + tx % 32] = T.Cast("int64", sT.pkt_wait_v64_warp(ctx, pkt[2], 32, epoch))
    return packets_v64


def k_p_g():
    """p of every element type into the next PE, a device barrier, then g of
    what this PE put there."""
    import tilelang.language as T
    import symm.tilelang as sT

    @T.prim_func
    def p_g(ctx: T.uint64, vals: T.Tensor((64,), "int32"), raw: T.Tensor((len(RMA) * 64 * 8,), "uint8"),
            out: T.Tensor((len(RMA), 64), "float64")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding(0)
            nxt = (sT.get_rank(ctx) + 1) % sT.get_num_ranks(ctx)
            for j, dt in enumerate(RMA):
                v = sT.peer_tensor(ctx, raw[j * 64 * 8], -1, (64,), dt)
                sT.p(ctx, v[tx], T.Cast(dt, vals[tx] + j), nxt)
            sT.barrier_block(ctx)
            for j, dt in enumerate(RMA):
                v = sT.peer_tensor(ctx, raw[j * 64 * 8], -1, (64,), dt)
                out[j, tx] = T.Cast("float64", sT.g(ctx, v[tx], nxt))
    return p_g


def k_waits():
    """Every comparison of wait_until on this PE's word and on the next PE's,
    for the four word types (the words hold 5)."""
    import tilelang.language as T
    import symm.tilelang as sT

    @T.prim_func
    def waits(ctx: T.uint64, raw: T.Tensor((len(AMO) * 8,), "uint8"), out: T.Tensor((len(AMO), 12), "float64")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding(0)
            nxt = (sT.get_rank(ctx) + 1) % sT.get_num_ranks(ctx)
            if tx == 0:
                for j, dt in enumerate(AMO):
                    w = sT.peer_tensor(ctx, raw[j * 8], -1, (1,), dt)
                    sT.st(ctx, w[0], 5, scope="sys", sem="release")
            sT.barrier_block(ctx)
            if tx == 0:
                for j, dt in enumerate(AMO):
                    w = sT.peer_tensor(ctx, raw[j * 8], -1, (1,), dt)
                    for c, (cmp, x) in enumerate(CMPS):
                        out[j, c] = T.Cast("float64", sT.wait_until(ctx, w[0], cmp, x))
                        out[j, 6 + c] = T.Cast("float64", sT.wait_until(ctx, w[0], cmp, x, peer=nxt))
                w0 = sT.peer_tensor(ctx, raw[0], -1, (1,), "int32")
                sT.wait_eq(ctx, w0[0], 5)
                sT.wait_ne(ctx, w0[0], 4, peer=nxt)
                sT.wait_gt(ctx, w0[0], 4)
                sT.wait_lt(ctx, w0[0], 6, peer=nxt)
                sT.wait_le(ctx, w0[0], 5)
            sT.barrier_block(ctx)
    return waits


# atomics: (word, op, operands, who: "all" threads or thread 0)
AMO_OPS = (("set", (7,), "t0"), ("swap", (9,), "t0"), ("compare_swap", (0, 11), "t0"), ("inc", (), "all"),
           ("fetch_inc", (), "all"), ("add", (3,), "all"), ("fetch_add", (2,), "all"), ("and", (0x0F,), "t0"),
           ("fetch_and", (0x0F,), "t0"), ("or", (0x30,), "t0"), ("fetch_or", (0x30,), "t0"),
           ("xor", (0x5A,), "t0"), ("fetch_xor", (0x5A,), "t0"))
AMO_INIT = {"and": 0xFF, "fetch_and": 0xFF, "xor": 0xFF, "fetch_xor": 0xFF}


def k_atomics():
    import tilelang.language as T
    import symm.tilelang as sT
    nw = len(AMO_OPS) + 1

    @T.prim_func
    def atomics(ctx: T.uint64, raw: T.Tensor((len(AMO) * nw * 8,), "uint8"), out: T.Tensor((len(AMO), nw), "float64")):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding(0)
            nxt = (sT.get_rank(ctx) + 1) % sT.get_num_ranks(ctx)
            for j, dt in enumerate(AMO):
                w = sT.peer_tensor(ctx, raw[j * nw * 8], -1, (nw,), dt)
                for k, (op, operands, who) in enumerate(AMO_OPS):
                    fn = getattr(sT, "atomic_" + op)
                    returns = op.startswith("fetch") or op in ("swap", "compare_swap")
                    if who == "all":
                        fn(ctx, w[k], *operands, nxt)
                    elif returns:
                        if tx == 0:
                            out[j, k] = T.Cast("float64", fn(ctx, w[k], *operands, nxt))
                    else:
                        if tx == 0:
                            fn(ctx, w[k], *operands, nxt)
            sT.barrier_block(ctx)
            if tx == 0:
                for j, dt in enumerate(AMO):
                    w = sT.peer_tensor(ctx, raw[j * nw * 8], -1, (nw,), dt)
                    out[j, nw - 1] = T.Cast("float64", sT.atomic_fetch(ctx, w[0], nxt))
    return atomics


def k_fences():
    """Message passing through each fence: data by p, the fence, then a flag
    by p; the receiver waits for the flag (acquire) and reads the data."""
    import tilelang.language as T
    import symm.tilelang as sT
    nf = len(FENCES)

    @T.prim_func
    def fences(ctx: T.uint64, data: T.Tensor((nf,), "int32"), flag: T.Tensor((nf,), "int32"),
               out: T.Tensor((nf,), "int32"), epoch: T.int32):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding(0)
            nxt = (sT.get_rank(ctx) + 1) % sT.get_num_ranks(ctx)
            if tx == 0:
                sT.trace_begin(ctx, 1)  # a region on the device trace (nothing unless traced)
            for f, name in enumerate(FENCES):
                if tx == 0:
                    sT.p(ctx, data[f], epoch * 16 + f, nxt)
                fn = getattr(sT, name)
                if name.startswith("fence_") and name != "fence_warp" and name != "fence_block":
                    if tx == 0:
                        fn()
                elif name.endswith("_block"):
                    fn(ctx)
                elif name.endswith("_warp"):
                    if tx < 32:
                        fn(ctx)
                else:
                    if tx == 0:
                        fn(ctx)
                if tx == 0:
                    sT.p(ctx, flag[f], epoch, nxt)
            if tx == 0:
                sT.trace_end(ctx, 1)
            if tx < nf:
                sT.wait_ge(ctx, flag[tx], epoch)
                out[tx] = sT.ld(ctx, data[tx], scope="sys", sem="relaxed")
    return fences


BARRIERS = ("barrier", "barrier_warp", "barrier_block", "sync_block")   # every backend


def k_barriers():
    """Each PE-wide barrier: store into the next PE, the barrier, read what
    the previous PE stored here."""
    import tilelang.language as T
    import symm.tilelang as sT
    nb = len(BARRIERS)

    @T.prim_func
    def barriers(ctx: T.uint64, slots: T.Tensor((nb,), "int32"), out: T.Tensor((nb,), "int32"), epoch: T.int32):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding(0)
            nxt = (sT.get_rank(ctx) + 1) % sT.get_num_ranks(ctx)
            for b, name in enumerate(BARRIERS):
                if tx == 0:
                    sT.st(ctx, slots[b], epoch * 8 + b, scope="sys", sem="relaxed", dst_pe=nxt)
                fn = getattr(sT, name)
                if name == "barrier":
                    if tx == 0:
                        fn(ctx)
                    T.sync_threads()
                elif name == "barrier_warp":
                    if tx < 32:
                        fn(ctx)
                    T.sync_threads()
                else:
                    fn(ctx)
                if tx == 0:
                    out[b] = sT.ld(ctx, slots[b], scope="sys", sem="relaxed")
                T.sync_threads()
    return barriers


def k_grid_barriers():
    """The collective barriers (load/store only): barrier_blocks and
    coll_barrier_grid with GRID_BLOCKS blocks, then coll_barrier_block in
    block 0: before each, block b stores into the next PE's slot b; after it,
    reads its own slot b."""
    import tilelang.language as T
    import symm.tilelang as sT

    @T.prim_func
    def grid_barriers(ctx: T.uint64, slots: T.Tensor((3, GRID_BLOCKS), "int32"),
                      out: T.Tensor((3, GRID_BLOCKS), "int32"), epoch: T.int32):
        with T.Kernel(GRID_BLOCKS, threads=THREADS) as bx:
            tx = T.get_thread_binding(0)
            nxt = (sT.get_rank(ctx) + 1) % sT.get_num_ranks(ctx)
            for b in range(2):
                if tx == 0:
                    sT.st(ctx, slots[b, bx], epoch * 8 + b, scope="sys", sem="relaxed", dst_pe=nxt)
                if b == 0:
                    sT.barrier_blocks(ctx)
                else:
                    sT.coll_barrier_grid(ctx)
                if tx == 0:
                    out[b, bx] = sT.ld(ctx, slots[b, bx], scope="sys", sem="relaxed")
            if bx == 0:
                if tx == 0:
                    sT.st(ctx, slots[2, 0], epoch * 8 + 2, scope="sys", sem="relaxed", dst_pe=nxt)
                sT.coll_barrier_block(ctx)
                if tx == 0:
                    out[2, 0] = sT.ld(ctx, slots[2, 0], scope="sys", sem="relaxed")
    return grid_barriers


def k_coll(kind, grid):
    """One device collective on float32 pieces of COUNT elements."""
    import tilelang.language as T
    import symm.tilelang as sT
    nblk = GRID_BLOCKS if grid else 1
    suffix = "_grid" if grid else "_block"

    @T.prim_func
    def coll(ctx: T.uint64, dst: T.Tensor((NMAX * COUNT,), "float32"), src: T.Tensor((NMAX * COUNT,), "float32"),
             counts: T.Tensor((4, NMAX), "uint64")):
        with T.Kernel(nblk, threads=THREADS):
            if kind == "all_reduce":
                getattr(sT, "all_reduce" + suffix)(ctx, dst, src, COUNT, "sum")
            elif kind == "all_reduce_ex":
                getattr(sT, "all_reduce" + suffix)(ctx, dst, src, COUNT, "max", algo="oneshot")
            elif kind == "reduce_scatter":
                getattr(sT, "reduce_scatter" + suffix)(ctx, dst, src, COUNT, "sum")
            elif kind == "reduce_scatter_ex":
                getattr(sT, "reduce_scatter" + suffix)(ctx, dst, src, COUNT, "min", acc="float32")
            elif kind == "all_gather":
                getattr(sT, "all_gather" + suffix)(ctx, dst, src, COUNT)
            elif kind == "all_to_all":
                getattr(sT, "all_to_all" + suffix)(ctx, dst, src, COUNT)
            elif kind == "broadcast":
                getattr(sT, "broadcast" + suffix)(ctx, dst, src, COUNT, root=0)
            else:
                getattr(sT, "all_to_allv" + suffix)(ctx, dst, src, counts[0, 0], counts[1, 0], counts[2, 0],
                                                     counts[3, 0])
            if grid:
                sT.coll_barrier_grid(ctx)
            else:
                sT.coll_barrier_block(ctx)
    return coll


def kernels(world, cfg):
    ks = {}
    for kind in ("put", "get"):
        for scope in ("thread", "warp", "block"):
            for nbi in (False, True):
                ks["prim_%s_%s%s" % (kind, scope, "_nbi" if nbi else "")] = (
                    lambda kind=kind, scope=scope, nbi=nbi: k_bulk(kind, scope, nbi))
    ks.update(prim_peer_copy=k_peer_copy, prim_remote_st=k_remote_st, prim_sync=k_sync, prim_signals=k_signals, prim_packets=k_packets,
              prim_packets_v64=k_packets_v64,
              prim_p_g=k_p_g,
              prim_waits=k_waits, prim_atomics=k_atomics, prim_fences=k_fences, prim_barriers=k_barriers,
              prim_grid_barriers=k_grid_barriers)
    for kind in COLLS:
        for grid in (False, True):
            ks["prim_coll_%s_%s" % (kind, "grid" if grid else "block")] = (
                lambda kind=kind, grid=grid: k_coll(kind, grid))
    return ks


# ---------------------------------------------------------------------------------------
# checks (no TileLang needed)
# ---------------------------------------------------------------------------------------

def _ring(env):
    return (env.rank + 1) % env.world, (env.rank - 1) % env.world


# what needs every PE reachable by load/store: a view of a peer's buffer, the device
# collectives (and the torch copy_ baselines); skipped where the backend sends every call
# remote (SYMM_DEBUG_FORCE_REMOTE) or across nodes
NO_LDST = "a peer is not reachable by load/store on this backend"


def _bulk_case(env, ks, kind, scope, nbi, args, rows, ldst):
    name = "prim_%s_%s%s" % (kind, scope, "_nbi" if nbi else "") if scope else "prim_peer_copy"
    if scope is None and not ldst:
        rows.append(skipped("primitives", name[5:], env, NO_LDST))
        return
    k = ks[name]
    src = symm.tensor((N,), torch.float16)
    dst = symm.zeros((N,), torch.float16)
    nxt, prv = _ring(env)
    ok = True
    for it in range(args.checks):
        src.copy_(rand((N,), torch.float16, env.device, name, it, env.rank))
        sync_all()  # get reads the peers' src
        k(env.ctx, src, dst)
        sync_all()
        want = rand((N,), torch.float16, env.device, name, it, prv if kind == "put" else nxt)
        ok = ok and torch.equal(dst, want)
    times = {}
    if not args.no_bench and scope != "thread":
        times["tilelang us"] = time_op(lambda: k(env.ctx, src, dst), args.iters)
        if ldst:
            peer = symm.get_peer_tensor(dst if kind == "put" else src, nxt)
            times["torch copy_ us"] = time_op(
                (lambda: peer.copy_(src)) if kind == "put" else (lambda: dst.copy_(peer)), args.iters)
    rows.append(row("primitives", name[5:], env, all_ok(ok), **times))
    symm.free_tensor(dst)
    symm.free_tensor(src)


def _check(env, rows, case, fn, iters):
    ok = True
    for it in range(iters):
        ok = bool(fn(it)) and ok
    rows.append(row("primitives", case, env, all_ok(ok)))


def _typed(vals, dt):
    return vals.to(getattr(torch, dt)).double() if dt not in ("uint16", "uint32", "uint64") else \
        vals.to(torch.int64).double()


def run(env, ks, cfg, args):
    rows = []
    nxt, prv = _ring(env)
    with symm.scope():
        ldst = ldst_reach(env, symm.zeros((1,), torch.int32))
    for kind in ("put", "get"):
        for scope in ("thread", "warp", "block"):
            for nbi in (False, True):
                _bulk_case(env, ks, kind, scope, nbi, args, rows, ldst)
    _bulk_case(env, ks, "put", None, False, args, rows, ldst)

    with symm.scope():
        vals = symm.tensor((THREADS,), torch.int32)
        raw = symm.zeros((len(LDST) * THREADS * 8,), torch.uint8)
        here = torch.zeros((len(LDST), THREADS), dtype=torch.float64, device=env.device)
        there = torch.zeros_like(here)

        def remote_st(it):
            vals.copy_(rand((THREADS,), torch.int32, env.device, "st", it, env.rank) % 1000)
            raw.zero_()
            sync_all()
            ks["prim_remote_st"](env.ctx, vals, raw, here, there)
            sync_all()
            mine = vals.double()
            theirs = (rand((THREADS,), torch.int32, env.device, "st", it, prv) % 1000).double()
            j = torch.arange(len(LDST), device=env.device, dtype=torch.float64)[:, None]
            return torch.equal(here, theirs[None] + j) and torch.equal(there, mine[None] + j)
        _check(env, rows, "remote_st (st/ld, all sem x scope x type)", remote_st, args.checks)

    with symm.scope():
        n = 1024
        data, recv = symm.tensor((n,), torch.float32), symm.zeros((n,), torch.float32)
        out = symm.zeros((n,), torch.float32)
        flag = symm.zeros((2,), torch.int32)

        def sync(it):
            data.copy_(rand((n,), torch.float32, env.device, "sync", it, env.rank))
            sync_all()
            ks["prim_sync"](env.ctx, data, recv, out, flag, it + 1)
            sync_all()
            return torch.equal(out, rand((n,), torch.float32, env.device, "sync", it, prv))
        _check(env, rows, "sync (put, st release, wait local / peer, ld acquire)", sync, args.checks)

    with symm.scope():
        src, dst = symm.tensor((6 * M,), torch.float32), symm.zeros((6 * M,), torch.float32)
        sig = symm.zeros((8,), torch.uint64)
        out = symm.zeros((16,), torch.uint64)

        def signals(it):
            src.copy_(rand((6 * M,), torch.float32, env.device, "sig", it, env.rank))
            sync_all()
            ks["prim_signals"](env.ctx, src, dst, sig, out, it + 1)
            sync_all()
            return (torch.equal(dst, rand((6 * M,), torch.float32, env.device, "sig", it, prv)) and
                    out.to(torch.int64).eq(it + 1).all().item())
        _check(env, rows, "put_signal x3 scopes x nbi, signal_op, signal waits", signals, args.checks)

    with symm.scope():
        src, dst = symm.tensor((3 * M,), torch.float32), symm.zeros((3 * M,), torch.float32)
        pkt = symm.zeros((6 * M,), torch.float32)

        def packets(it):
            src.copy_(rand((3 * M,), torch.float32, env.device, "pkt", it, env.rank))
            sync_all()
            ks["prim_packets"](env.ctx, src, pkt, dst, it + 1)
            sync_all()
            return torch.equal(dst, rand((3 * M,), torch.float32, env.device, "pkt", it, prv))
        _check(env, rows, "put_pkt / pkt_wait x3 scopes", packets, args.checks)

    with symm.scope():
        src, dst = symm.tensor((33,), torch.int64), symm.zeros((33,), torch.int64)
        pkt = symm.zeros((66,), torch.int64)

        def words(it, pe):  # both halves of each word nonzero
            r = rand((33,), torch.int64, env.device, "pkt64", it, pe)
            return r | (r << 40)

        def packets_v64(it):
            src.copy_(words(it, env.rank))
            sync_all()
            ks["prim_packets_v64"](env.ctx, src, pkt, dst, it + 1)
            sync_all()
            return torch.equal(dst, words(it, prv))
        _check(env, rows, "put_pkt_v64 / pkt_wait_v64, thread and warp", packets_v64, args.checks)

    with symm.scope():
        vals = symm.tensor((64,), torch.int32)
        raw = symm.zeros((len(RMA) * 64 * 8,), torch.uint8)
        out = torch.zeros((len(RMA), 64), dtype=torch.float64, device=env.device)

        def p_g(it):
            vals.copy_(rand((64,), torch.int32, env.device, "pg", it, env.rank) % 100)
            sync_all()
            ks["prim_p_g"](env.ctx, vals, raw, out)
            sync_all()
            j = torch.arange(len(RMA), device=env.device, dtype=torch.float64)[:, None]
            ok = torch.equal(out, vals.double()[None] + j)
            theirs = (rand((64,), torch.int32, env.device, "pg", it, prv) % 100).to(torch.int64)
            for i, dt in enumerate(RMA):
                got = raw[i * 512:i * 512 + 64 * torch.empty((), dtype=getattr(torch, dt)).element_size()]
                got = got.view(getattr(torch, dt)).to(torch.float64)
                ok = ok and torch.equal(got, (theirs + i).double())
            return ok
        _check(env, rows, "p / g, ten element types", p_g, args.checks)

    with symm.scope():
        raw = symm.zeros((len(AMO) * 8,), torch.uint8)
        out = torch.zeros((len(AMO), 12), dtype=torch.float64, device=env.device)

        def waits(it):
            out.zero_()
            sync_all()
            ks["prim_waits"](env.ctx, raw, out)
            sync_all()
            return out.eq(5).all().item()
        _check(env, rows, "wait_until x6 cmps x4 types, local and peer; wait_eq..le", waits, args.checks)

    with symm.scope():
        nw = len(AMO_OPS) + 1
        raw = symm.zeros((len(AMO) * nw * 8,), torch.uint8)
        out = torch.zeros((len(AMO), nw), dtype=torch.float64, device=env.device)

        def atomics(it):
            init = torch.zeros((len(AMO), nw), dtype=torch.int64, device=env.device)
            for k, (op, _, _) in enumerate(AMO_OPS):
                init[:, k] = AMO_INIT.get(op, 0)
            for j, dt in enumerate(AMO):
                w = raw[j * nw * 8:(j + 1) * nw * 8]
                w.view(torch.int64 if "64" in dt else torch.int32)[:nw].copy_(init[j].to(
                    torch.int64 if "64" in dt else torch.int32))
            out.zero_()
            sync_all()
            ks["prim_atomics"](env.ctx, raw, out)
            sync_all()
            final = {"set": 7, "swap": 9, "compare_swap": 11, "inc": THREADS, "fetch_inc": THREADS,
                     "add": 3 * THREADS, "fetch_add": 2 * THREADS, "and": 0x0F, "fetch_and": 0x0F,
                     "or": 0x30, "fetch_or": 0x30, "xor": 0xA5, "fetch_xor": 0xA5}
            ret = {"swap": 0, "compare_swap": 0, "fetch_and": 0xFF, "fetch_or": 0, "fetch_xor": 0xFF}
            ok = True
            for j, dt in enumerate(AMO):
                w = raw[j * nw * 8:(j + 1) * nw * 8].view(torch.int64 if "64" in dt else torch.int32)[:nw]
                for k, (op, _, _) in enumerate(AMO_OPS):
                    ok = ok and int(w[k]) == final[op]
                    if op in ret:
                        ok = ok and int(out[j, k]) == ret[op]
                ok = ok and int(out[j, nw - 1]) == 7  # atomic_fetch of the next PE's "set" word
                # fetch_inc / fetch_add by every thread: the returned values are a permutation
            return ok
        _check(env, rows, "atomics: 13 ops + fetch, x4 types", atomics, args.checks)

    with symm.scope():
        nf = len(FENCES)
        data, flag = symm.zeros((nf,), torch.int32), symm.zeros((nf,), torch.int32)
        out = symm.zeros((nf,), torch.int32)

        def fences(it):
            sync_all()
            ks["prim_fences"](env.ctx, data, flag, out, it + 1)
            sync_all()
            return torch.equal(out.cpu(), torch.tensor([(it + 1) * 16 + f for f in range(nf)], dtype=torch.int32))
        _check(env, rows, "fence / quiet (x3 scopes), fence_cta/gpu/sys", fences, args.checks)

    with symm.scope():
        nb = len(BARRIERS)
        slots, out = symm.zeros((nb,), torch.int32), symm.zeros((nb,), torch.int32)

        def barriers(it):
            sync_all()
            ks["prim_barriers"](env.ctx, slots, out, it + 1)
            sync_all()
            return torch.equal(out.cpu(), torch.tensor([(it + 1) * 8 + b for b in range(nb)], dtype=torch.int32))
        _check(env, rows, "barrier, _warp, _block, sync_block", barriers, args.checks)

    case = "coll_barrier_grid, barrier_blocks, coll_barrier_block"
    if not ldst:
        rows.append(skipped("primitives", case, env, NO_LDST))
    else:
        with symm.scope():
            gslots, gout = symm.zeros((3, GRID_BLOCKS), torch.int32), symm.zeros((3, GRID_BLOCKS), torch.int32)

            def coll_barriers(it):
                gout.zero_()
                sync_all()
                ks["prim_grid_barriers"](env.ctx, gslots, gout, it + 1)
                sync_all()
                want = torch.tensor([[(it + 1) * 8 + b] * GRID_BLOCKS for b in range(3)], dtype=torch.int32)
                want[2, 1:] = 0   # coll_barrier_block: block 0 only
                return torch.equal(gout.cpu(), want)
            _check(env, rows, case, coll_barriers, args.checks)

    _collectives(env, ks, args, rows, ldst)
    return rows


def _collectives(env, ks, args, rows, ldst):
    n, me = env.world, env.rank
    if not ldst:
        for kind in COLLS:
            for grid in (False, True):
                rows.append(skipped("primitives", "device collective %s_%s" % (kind, "grid" if grid else "block"),
                                    env, NO_LDST))
        return
    with symm.scope():
        dst = symm.zeros((NMAX * COUNT,), torch.float32)
        src = symm.zeros((NMAX * COUNT,), torch.float32)
        counts = torch.zeros((4, NMAX), dtype=torch.uint64, device=env.device)

        def inputs(it, pe):
            return rand((NMAX * COUNT,), torch.float32, env.device, "coll", it, pe)

        for kind in COLLS:
            for grid in (False, True):
                name = "prim_coll_%s_%s" % (kind, "grid" if grid else "block")

                def one(it, kind=kind, name=name):
                    x = [inputs(it, p) for p in range(n)]
                    src.copy_(x[me])
                    dst.zero_()
                    if kind == "all_to_allv":
                        # PE p sends (p + q) % 3 + 1 hundred elements to PE q
                        sc = [((me + q) % 3 + 1) * 100 for q in range(n)]
                        rc = [((p + me) % 3 + 1) * 100 for p in range(n)]
                        sd = [sum(sc[:q]) for q in range(n)]
                        rd = [sum(rc[:p]) for p in range(n)]
                        for r, v in enumerate((sc, sd, rc, rd)):
                            counts[r, :n] = torch.tensor(v, dtype=torch.uint64)
                    sync_all()
                    ks[name](env.ctx, dst, src, counts)
                    sync_all()
                    c = COUNT
                    if kind == "all_reduce":
                        return close(dst[:c], sum(xi[:c] for xi in x), 1e-4, 1e-4)
                    if kind == "all_reduce_ex":
                        return torch.equal(dst[:c], torch.stack([xi[:c] for xi in x]).amax(0))
                    if kind == "reduce_scatter":
                        return close(dst[:c], sum(xi[me * c:(me + 1) * c] for xi in x), 1e-4, 1e-4)
                    if kind == "reduce_scatter_ex":
                        return torch.equal(dst[:c], torch.stack([xi[me * c:(me + 1) * c] for xi in x]).amin(0))
                    if kind == "all_gather":
                        return torch.equal(dst[:n * c], torch.cat([xi[:c] for xi in x]))
                    if kind == "all_to_all":
                        return torch.equal(dst[:n * c], torch.cat([xi[me * c:(me + 1) * c] for xi in x]))
                    if kind == "broadcast":
                        return torch.equal(dst[:c], x[0][:c])
                    want = []
                    for p in range(n):
                        scp = [((p + q) % 3 + 1) * 100 for q in range(n)]
                        off = sum(scp[:me])
                        want.append(x[p][off:off + scp[me]])
                    want = torch.cat(want)
                    return torch.equal(dst[:want.numel()], want)
                _check(env, rows, "device collective " + name[10:], one, args.checks)


if __name__ == "__main__":
    example_main(sys.modules[__name__], "symm.tilelang primitives")
