"""Cannon's algorithm on a sqrt(P) x sqrt(P) PE grid (P = 1, 4, 9...): C_ij =
sum_k A_ik B_kj. One kernel: two blocks (the first tickets) skew A along the
row and B along the column, then forward each step's blocks to the left /
upper neighbour as soon as they arrive (put_signal_block, one signal per step);
the GEMM tiles accumulate step by step, each step once its A and B blocks
have arrived. A one-block barrier kernel ends the call.

    torchrun --nproc-per-node 4 examples/tilelang/cannon.py [--aot build-tilelang]"""
import sys

import _grid2d
from _common import example_main

CONFIGS = [dict(s=2048)]
BM, BN, BK = 128, 128, 64


def k_cannon(q, S):
    import tilelang.language as T
    import symm.tilelang as sT
    from _tiles import ACC, DTYPE, gemm_k, ticket, wait_all_threads
    tiles_n = S // BN
    ntiles = (S // BM) * tiles_n
    nblocks = 2 + ntiles

    @T.prim_func
    def cannon(ctx: T.uint64, A: T.Tensor((S, S), DTYPE), B: T.Tensor((S, S), DTYPE),
               Abuf: T.Tensor((q, S, S), DTYPE), Bbuf: T.Tensor((q, S, S), DTYPE), C: T.Tensor((S, S), DTYPE),
               sig: T.Tensor((2 * q,), "uint64"), counter: T.Tensor((1,), "int32"), epoch: T.uint64):
        with T.Kernel(nblocks, threads=_grid2d.THREADS):
            t = ticket(ctx, counter, nblocks)
            me = sT.get_rank(ctx)
            i = me // q
            j = me % q
            if t == 0:   # A: skew (A_ij to (i, j - i)), then shift left step by step
                sT.put_signal_block(ctx, A, Abuf[0, 0, 0], S * S, sig[0], 1, "add", i * q + (j - i + q) % q)
                for s in T.serial(q - 1):
                    wait_all_threads(ctx, sig, s, epoch)
                    sT.put_signal_block(ctx, Abuf[s, 0, 0], Abuf[s + 1, 0, 0], S * S, sig[s + 1], 1, "add",
                                        i * q + (j + q - 1) % q)
            elif t == 1:  # B: skew (B_ij to (i - j, j)), then shift up
                sT.put_signal_block(ctx, B, Bbuf[0, 0, 0], S * S, sig[q], 1, "add", ((i - j + q) % q) * q + j)
                for s in T.serial(q - 1):
                    wait_all_threads(ctx, sig, q + s, epoch)
                    sT.put_signal_block(ctx, Bbuf[s, 0, 0], Bbuf[s + 1, 0, 0], S * S, sig[q + s + 1], 1, "add",
                                        ((i + q - 1) % q) * q + j)
            else:
                g = t - 2
                m0 = (g // tiles_n) * BM
                n0 = (g % tiles_n) * BN
                acc = T.alloc_fragment((BM, BN), ACC)
                T.clear(acc)
                for s in T.serial(q):
                    wait_all_threads(ctx, sig, s, epoch)
                    wait_all_threads(ctx, sig, q + s, epoch)
                    a = sT.peer_tensor(ctx, Abuf[s, 0, 0], -1, (S, S))   # step s's blocks, as 2-D views
                    b = sT.peer_tensor(ctx, Bbuf[s, 0, 0], -1, (S, S))
                    gemm_k(a, b, acc, m0, n0, 0, S, BM, BN, BK)
                T.copy(acc, C[m0, n0])
    return cannon


def _names(world, cfg):
    return "cannon_p%d_s%d" % (world, cfg["s"]), "grid2d_barrier"


def kernels(world, cfg):
    q = _grid2d.grid_side(world)
    if q is None:
        return {}
    name, bar = _names(world, cfg)
    return {name: lambda: k_cannon(q, cfg["s"]), bar: _grid2d.barrier_kernel}


def run(env, ks, cfg, args):
    name, bar = _names(env.world, cfg)
    return _grid2d.run(env, ks, cfg, args, "cannon", name, bar)


if __name__ == "__main__":
    example_main(sys.modules[__name__], "Cannon")
