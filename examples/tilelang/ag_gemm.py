"""All-gather + GEMM: C = all_gather(A_shard) @ B, A sharded by rows.
plain: the all-gather kernel (by hand), then a TileLang GEMM.
overlapped: one kernel; its first blocks (by ticket) push this PE's shard
to every PE with put_signal_block, in pieces of a tile row, the GEMM tiles
wait on the signal of the piece they need (their own chunk first), so the
GEMM runs while the shards arrive. Against torch.matmul after symm.all_gather.

    torchrun --nproc-per-node N examples/tilelang/ag_gemm.py [--aot build-tilelang]"""
import sys

import torch

import symm

from _common import all_ok, close, example_main, rand, row, sync_all, time_graph
from _exchange import exchange_blocks, exchange_state

CONFIGS = [dict(m_loc=1024, k=4096, n=4096)]
BM, BN, BK, THREADS = 128, 128, 64, 256


def k_gemm(M, N, K):
    import tilelang.language as T
    from _tiles import ACC, DTYPE, gemm_k

    @T.prim_func
    def gemm(A: T.Tensor((M, K), DTYPE), B: T.Tensor((K, N), DTYPE), C: T.Tensor((M, N), DTYPE)):
        with T.Kernel(N // BN, M // BM, threads=THREADS) as (bx, by):
            acc = T.alloc_fragment((BM, BN), ACC)
            T.clear(acc)
            gemm_k(A, B, acc, by * BM, bx * BN, 0, K, BM, BN, BK)
            T.copy(acc, C[by * BM, bx * BN])
    return gemm


# The overlapped kernel pushes the shard in pieces of BM rows (the rows one
# GEMM tile row needs), each piece split among PUSH_SPLIT blocks: one block
# per destination moving the whole shard ran at a single SM's copy rate and
# made the overlapped kernel slower than all-gather then GEMM.
PUSH_SPLIT = 2


def k_overlapped(P, m_loc, N, K):
    import tilelang.language as T
    import symm.tilelang as sT
    from _tiles import ACC, DTYPE, gemm_k, raw_ticket, wait_all_threads
    M = P * m_loc
    tiles_n, tiles_chunk = N // BN, (m_loc // BM) * (N // BN)
    rows_c = m_loc // BM                       # row pieces of a chunk
    npush = P * rows_c * PUSH_SPLIT            # push blocks, P per part
    rows_p = BM // PUSH_SPLIT                  # rows a push block moves
    nblocks = npush + P * tiles_chunk

    @T.prim_func
    def ag_gemm(ctx: T.uint64, A: T.Tensor((m_loc, K), DTYPE), Afull: T.Tensor((M, K), DTYPE),
                B: T.Tensor((K, N), DTYPE), C: T.Tensor((M, N), DTYPE), entry: T.Tensor((P,), "uint64"),
                ready: T.Tensor((P * rows_c,), "uint64"), counter: T.Tensor((1,), "int32")):
        with T.Kernel(nblocks, threads=THREADS):
            raw = raw_ticket(ctx, counter)
            t = raw % nblocks
            epoch = T.cast(raw // nblocks + 1, "uint64")   # this call's number, from the ticket
            me = sT.get_rank(ctx)
            if t < npush:
                # push part j of this PE's shard to PE d once d has entered
                # this call (so its previous GEMM no longer reads Afull); the
                # first P tickets (part 0 for every destination, so always
                # running, whatever fits on the GPU) announce this PE's entry
                d = (me + t % P) % P
                j = t // P
                if j == 0:
                    if T.get_thread_binding(0) == 0:
                        sT.signal_op(ctx, entry[me], 1, "add", d)
                wait_all_threads(ctx, entry, d, epoch)
                sT.put_signal_block(ctx, A[j * rows_p, 0], Afull[me * m_loc + j * rows_p, 0], rows_p * K,
                                    ready[me * rows_c + j // PUSH_SPLIT], 1, "add", d)
            else:
                g = t - npush
                c = (me + g // tiles_chunk) % P        # this PE's chunk first
                r = g % tiles_chunk
                m0 = c * m_loc + (r // tiles_n) * BM
                n0 = (r % tiles_n) * BN
                wait_all_threads(ctx, ready, c * rows_c + r // tiles_n, epoch * PUSH_SPLIT)
                acc = T.alloc_fragment((BM, BN), ACC)
                T.clear(acc)
                gemm_k(Afull, B, acc, m0, n0, 0, K, BM, BN, BK)
                T.copy(acc, C[m0, n0])
    return ag_gemm


def _names(world, cfg):
    key = "p%d_m%d_k%d_n%d" % (world, cfg["m_loc"], cfg["k"], cfg["n"])
    return {"ag": "ag_gemm_ag_" + key, "gemm": "ag_gemm_gemm_" + key, "fused": "ag_gemm_overlapped_" + key}


def kernels(world, cfg):
    nm = _names(world, cfg)
    m_loc, K, N = cfg["m_loc"], cfg["k"], cfg["n"]

    def ag():
        from _tiles import exchange_kernel
        return exchange_kernel("gather", m_loc * K, world)
    return {nm["ag"]: ag, nm["gemm"]: lambda: k_gemm(world * m_loc, N, K),
            nm["fused"]: lambda: k_overlapped(world, m_loc, N, K)}


def run(env, ks, cfg, args):
    P, me = env.world, env.rank
    m_loc, K, N = cfg["m_loc"], cfg["k"], cfg["n"]
    M = P * m_loc
    nm = _names(P, cfg)
    ag, gemm, fused = ks[nm["ag"]], ks[nm["gemm"]], ks[nm["fused"]]
    rows = []
    with symm.scope():
        A = symm.tensor((m_loc, K), torch.float16)
        Afull = symm.zeros((M, K), torch.float16)
        B = torch.empty((K, N), dtype=torch.float16, device=env.device)
        C = torch.zeros((M, N), dtype=torch.float16, device=env.device)
        entry, arrived, calls = exchange_state()
        ag_grid = exchange_blocks(2 * m_loc * K)
        fentry, ready = symm.zeros((P,), torch.uint64), symm.zeros((P * (m_loc // BM),), torch.uint64)
        counter = symm.zeros((1,), torch.int32)

        def plain():
            ag(env.ctx, A.view(-1), Afull.view(-1), entry, arrived, calls, grid=ag_grid)
            gemm(Afull, B, C)

        def overlapped():
            fused(env.ctx, A, Afull, B, C, fentry, ready, counter)

        def check(op, it):
            A.copy_(rand((m_loc, K), torch.float16, env.device, "agA", it, me) / 8)
            B.copy_(rand((K, N), torch.float16, env.device, "agB", it) / 8)
            C.zero_()
            sync_all()
            op()
            sync_all()
            full = torch.cat([rand((m_loc, K), torch.float16, env.device, "agA", it, p) / 8 for p in range(P)])
            return close(C, full @ B, 2e-2, 2e-2)

        for label, op in (("plain (all-gather, then GEMM)", plain), ("overlapped (tiles wait per chunk)", overlapped)):
            ok = all([check(op, it) for it in range(args.checks)])
            times = {}
            if not args.no_bench:
                # every party as a CUDA graph of back-to-back calls (both kernels keep
                # their call count on the device)
                t = time_graph(op, args.graph_iters)
                ref = time_graph(lambda: (symm.all_gather(Afull.view(-1), A.view(-1)),
                                          torch.matmul(Afull, B, out=C)), args.graph_iters)
                mm = time_graph(lambda: torch.matmul(Afull, B, out=C), args.graph_iters)
                times.update({"tilelang us": t, "symm.all_gather + torch.matmul us": ref,
                              "ratio": ref / t if ref and t else "n/a", "torch.matmul alone us": mm})
                ok = check(op, args.checks) and ok   # fresh data after the graphs' replays
            rows.append(row("ag_gemm", "%s, M=%d K=%d N=%d" % (label, M, K, N), env, all_ok(ok), **times))
    return rows


if __name__ == "__main__":
    example_main(sys.modules[__name__], "all-gather + GEMM")
