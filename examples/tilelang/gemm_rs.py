"""GEMM + reduce-scatter, overlapped: out = sum over PEs of (A_p @ B_p), each
PE keeping its row chunk. A is sharded by columns (K), B by rows. One
kernel: a first block (by ticket) announces this PE's entry to every PE;
the GEMM tiles compute the other PEs' chunks first, wait until the chunk's
owner has entered this call, store their partial tile straight into the
owner's receive buffer (a peer_tensor view: stores over NVLink) and signal
it; the last blocks wait for all partials of this PE's chunk and reduce
them. Against torch.matmul then symm.reduce_scatter.

    torchrun --nproc-per-node N examples/tilelang/gemm_rs.py [--aot build-tilelang]"""
import sys

import torch

import symm

from _common import all_ok, close, example_main, rand, row, sync_all, time_op

CONFIGS = [dict(m=4096, k_loc=1024, n=4096)]
BM, BN, BK, THREADS = 128, 128, 64, 256
RROWS = 16   # rows per reduce block


def k_gemm_rs(P, M, K, N):
    import tilelang.language as T
    import symm.tilelang as sT
    from _tiles import ACC, DTYPE, gemm_k, ticket, wait_all_threads
    m_loc = M // P
    tiles_n, tiles_chunk = N // BN, (m_loc // BM) * (N // BN)
    ntiles = P * tiles_chunk
    nred = m_loc // RROWS
    nblocks = 1 + ntiles + nred

    @T.prim_func
    def gemm_rs(ctx: T.uint64, A: T.Tensor((M, K), DTYPE), B: T.Tensor((K, N), DTYPE),
                recv: T.Tensor((P, m_loc, N), DTYPE), out: T.Tensor((m_loc, N), DTYPE),
                entry: T.Tensor((P,), "uint64"), done: T.Tensor((1,), "uint64"),
                counter: T.Tensor((1,), "int32"), epoch: T.uint64):
        with T.Kernel(nblocks, threads=THREADS):
            t = ticket(ctx, counter, nblocks)
            me = sT.get_rank(ctx)
            tx = T.get_thread_binding(0)
            if t == 0:
                if tx < P:
                    sT.signal_op(ctx, entry[me], 1, "add", tx)
            elif t <= ntiles:
                g = t - 1
                c = (me + 1 + g // tiles_chunk) % P       # other PEs' chunks first
                r = g % tiles_chunk
                m0 = (r // tiles_n) * BM
                n0 = (r % tiles_n) * BN
                acc = T.alloc_fragment((BM, BN), ACC)
                T.clear(acc)
                gemm_k(A, B, acc, c * m_loc + m0, n0, 0, K, BM, BN, BK)
                wait_all_threads(ctx, entry, c, epoch)   # the owner no longer reads the last call's partials
                remote = sT.peer_tensor(ctx, recv, c)
                T.copy(acc, remote[me, m0, n0])
                T.sync_threads()
                if tx == 0:
                    sT.signal_op(ctx, done[0], 1, "add", c)
            else:
                rr = (t - 1 - ntiles) * RROWS
                wait_all_threads(ctx, done, 0, epoch * P * tiles_chunk)
                s = T.alloc_fragment((RROWS, N // 8), ACC)
                part = T.alloc_fragment((RROWS, N // 8), DTYPE)
                for q in T.serial(8):
                    T.clear(s)
                    for p in T.serial(P):
                        T.copy(recv[p, rr, q * (N // 8)], part)
                        for i, j in T.Parallel(RROWS, N // 8):
                            s[i, j] += part[i, j]
                    T.copy(s, out[rr, q * (N // 8)])
    return gemm_rs


def _name(world, cfg):
    return "gemm_rs_p%d_m%d_k%d_n%d" % (world, cfg["m"], cfg["k_loc"], cfg["n"])


def kernels(world, cfg):
    return {_name(world, cfg): lambda: k_gemm_rs(world, cfg["m"], cfg["k_loc"], cfg["n"])}


def run(env, ks, cfg, args):
    P, me = env.world, env.rank
    M, K, N = cfg["m"], cfg["k_loc"], cfg["n"]
    m_loc = M // P
    k = ks[_name(P, cfg)]
    rows = []
    with symm.scope():
        A = torch.empty((M, K), dtype=torch.float16, device=env.device)
        B = torch.empty((K, N), dtype=torch.float16, device=env.device)
        recv = symm.zeros((P, m_loc, N), torch.float16)
        out = symm.zeros((m_loc, N), torch.float16)
        entry, done = symm.zeros((P,), torch.uint64), symm.zeros((1,), torch.uint64)
        counter = symm.zeros((1,), torch.int32)
        full = symm.zeros((M, N), torch.float16)
        epoch = [0]

        def op():
            epoch[0] += 1
            k(env.ctx, A, B, recv, out, entry, done, counter, epoch[0])

        ok = True
        for it in range(args.checks):
            A.copy_(rand((M, K), torch.float16, env.device, "rsA", it, me) / 8)
            B.copy_(rand((K, N), torch.float16, env.device, "rsB", it, me) / 8)
            sync_all()
            op()
            sync_all()
            want = sum(rand((M, K), torch.float16, env.device, "rsA", it, p).float() / 8 @
                       (rand((K, N), torch.float16, env.device, "rsB", it, p).float() / 8) for p in range(P))
            ok = ok and close(out, want[me * m_loc:(me + 1) * m_loc], 3e-2, 3e-2)
        times = {}
        if not args.no_bench:
            t = time_op(op, args.iters)
            ref = time_op(lambda: (torch.matmul(A, B, out=full), symm.reduce_scatter(out, full)), args.iters)
            mm = time_op(lambda: torch.matmul(A, B, out=full), args.iters)
            times.update({"tilelang us": t, "torch.matmul + symm.reduce_scatter us": ref, "ratio": ref / t,
                          "torch.matmul alone us": mm})
        rows.append(row("gemm_rs", "overlapped, M=%d K=%d per PE, N=%d" % (M, K, N), env, all_ok(ok), **times))
    return rows


if __name__ == "__main__":
    example_main(sys.modules[__name__], "GEMM + reduce-scatter")
