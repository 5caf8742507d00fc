"""SUMMA on a sqrt(P) x sqrt(P) PE grid (P = 1, 4, 9...): for k, the owner of
A_ik broadcasts it along row i and the owner of B_kj along column j; C_ij +=
A_ik B_kj. One kernel: two blocks (the first tickets) send this PE's A to
its row and B to its column (put_signal_block into slot k of each PE's
buffers), the GEMM tiles accumulate over k, each step once its two blocks
have arrived. A one-block barrier kernel ends the call.

    torchrun --nproc-per-node 4 examples/tilelang/summa.py [--aot build-tilelang]"""
import sys

import _grid2d
from _common import example_main

CONFIGS = [dict(s=2048)]
BM, BN, BK = 128, 128, 64


def k_summa(q, S):
    import tilelang.language as T
    import symm.tilelang as sT
    from _tiles import ACC, DTYPE, gemm_k, ticket, wait_all_threads
    tiles_n = S // BN
    ntiles = (S // BM) * tiles_n
    nblocks = 2 + ntiles

    @T.prim_func
    def summa(ctx: T.uint64, A: T.Tensor((S, S), DTYPE), B: T.Tensor((S, S), DTYPE),
              Abuf: T.Tensor((q, S, S), DTYPE), Bbuf: T.Tensor((q, S, S), DTYPE), C: T.Tensor((S, S), DTYPE),
              sig: T.Tensor((2 * q,), "uint64"), counter: T.Tensor((1,), "int32"), epoch: T.uint64):
        with T.Kernel(nblocks, threads=_grid2d.THREADS):
            t = ticket(ctx, counter, nblocks)
            me = sT.get_rank(ctx)
            i = me // q
            j = me % q
            if t == 0:   # A_ij is step j's A block of every PE in row i
                for jj in T.serial(q):
                    sT.put_signal_block(ctx, A, Abuf[j, 0, 0], S * S, sig[j], 1, "add", i * q + jj)
            elif t == 1:  # B_ij is step i's B block of every PE in column j
                for ii in T.serial(q):
                    sT.put_signal_block(ctx, B, Bbuf[i, 0, 0], S * S, sig[q + i], 1, "add", ii * q + j)
            else:
                g = t - 2
                m0 = (g // tiles_n) * BM
                n0 = (g % tiles_n) * BN
                acc = T.alloc_fragment((BM, BN), ACC)
                T.clear(acc)
                for k in T.serial(q):
                    kk = (k + j) % q          # start with a block that is not everyone's first
                    wait_all_threads(ctx, sig, kk, epoch)
                    wait_all_threads(ctx, sig, q + kk, epoch)
                    a = sT.peer_tensor(ctx, Abuf[kk, 0, 0], -1, (S, S))
                    b = sT.peer_tensor(ctx, Bbuf[kk, 0, 0], -1, (S, S))
                    gemm_k(a, b, acc, m0, n0, 0, S, BM, BN, BK)
                T.copy(acc, C[m0, n0])
    return summa


def _names(world, cfg):
    return "summa_p%d_s%d" % (world, cfg["s"]), "grid2d_barrier"


def kernels(world, cfg):
    q = _grid2d.grid_side(world)
    if q is None:
        return {}
    name, bar = _names(world, cfg)
    return {name: lambda: k_summa(q, cfg["s"]), bar: _grid2d.barrier_kernel}


def run(env, ks, cfg, args):
    name, bar = _names(env.world, cfg)
    return _grid2d.run(env, ks, cfg, args, "summa", name, bar)


if __name__ == "__main__":
    example_main(sys.modules[__name__], "SUMMA")
