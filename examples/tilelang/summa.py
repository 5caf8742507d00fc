"""SUMMA on a sqrt(P) x sqrt(P) PE grid (P = 1, 4, 9...), M = N = K = q S,
bf16: for each k the owner of A_ik sends it along row i and the owner of
B_kj along column j; C_ij = sum_k A_ik B_kj. This PE's blocks sit in place
in their slots (A_ij is step j's A of row i, B_ij step i's B of column j),
and go on the copy engines (_grid2d.py) straight into the same slot of each
row / column peer, piece by piece, in the order the peers need them. One
GEMM kernel (_grid2d.k_grid_gemm) runs all q steps in one pipeline, starting
with step j (its A is here) and waiting, in each tile's producer warps, for
the pieces it reads next. Against the unfused torch path (all-gather of
every block with NCCL, torch.matmul).

    torchrun --nproc-per-node 4 examples/tilelang/summa.py [--aot build-tilelang]"""
import sys

import _grid2d
from _common import example_main

CONFIGS = [dict(s=4096)]


def kernels(world, cfg):
    return _grid2d.kernels(world, cfg)


def make(env, fused, finish, q, S, a, b, cfg):
    g = _grid2d.Grid2D(env, fused, finish, q, S, cfg)
    i, j = g.i, g.j
    g.plan()
    # PE (x, y) runs steps y, y+1, ...: it needs A_ij (step j, row peers x = i)
    # at its step (j - y) % q and B_ij (step i, column peers y = j) at (i - j) % q
    sends = [((i - j) % q, "B", g.pe(ii, j)) for ii in range(q) if ii != i]
    sends += [((j - jj) % q, "A", g.pe(i, jj)) for jj in range(q) if jj != j]
    for _, kind, dst in sorted(sends):
        if kind == "A":
            g.send_block(g.abuf, g.aflag, j, dst, j)
        else:
            g.send_block(g.bbuf, g.bflag, i, dst, i)
    g.first, g.skip_a, g.skip_b = j, j, i

    def place(a, b):
        g.abuf[j].copy_(a)
        g.bbuf[i].copy_(b)
    return g, place


def run(env, ks, cfg, args):
    return _grid2d.run(env, ks, cfg, args, "summa", make)


if __name__ == "__main__":
    example_main(sys.modules[__name__], "SUMMA (copy engines)")
