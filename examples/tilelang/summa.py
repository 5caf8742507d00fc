"""SUMMA on a sqrt(P) x sqrt(P) PE grid (P = 1, 4, 9...), M = N = K = q S,
bf16: for each k the owner of A_ik sends it along row i and the owner of
B_kj along column j; C_ij = sum_k A_ik B_kj. This PE's blocks sit in place
in their slots (A_ij is step j's A of row i, B_ij step i's B of column j),
and go on the copy engines (_grid2d.py) straight into the same slot of each
row / column peer, piece by piece, in the order the peers need them. One
GEMM kernel (_grid2d.k_grid_gemm) runs all q steps in one pipeline, starting
with step i (its B is here, so a tile first waits only for the piece of A
holding its rows) and waiting, in each tile's producer warps, for the
pieces it reads next. Against the unfused torch path (all-gather of
every block with NCCL, torch.matmul).

    torchrun --nproc-per-node 4 examples/tilelang/summa.py [--aot build-tilelang]"""
import sys

import _grid2d
from _common import example_main

CONFIGS = [dict(s=4096)]


def kernels(world, cfg):
    return _grid2d.kernels(world, cfg)


def make(env, finish, q, S, a, b):
    g = _grid2d.Grid2D(env, finish, q, S)
    i, j = g.i, g.j
    g.plan()
    # PE (x, y) runs steps x, x+1, ...: step x's B is its own, and a tile
    # waits only for the piece of A holding its rows there (a B piece, by
    # rows of K, every tile reads). It needs A_ij (row peers x = i, step j)
    # at its position (j - i) % q and B_ij (column peers y = j, step i) at
    # position (i - x) % q: sent in that order, A first at a tie.
    sends = [((j - i) % q, "A", g.pe(i, y)) for y in range(q) if y != j]
    sends += [((i - x) % q, "B", g.pe(x, j)) for x in range(q) if x != i]
    for _, kind, dst in sorted(sends):
        if kind == "A":
            g.send_block(g.abuf, g.aflag, j, dst, j)
        else:
            g.send_block(g.bbuf, g.bflag, i, dst, i)
    g.first, g.skip_a, g.skip_b = i, j, i
    g.commit()

    def place(a, b):
        g.abuf[j].copy_(a)
        g.bbuf[i].copy_(b)
    return g, place


def run(env, ks, cfg, args):
    return _grid2d.run(env, ks, cfg, args, "summa", make)


if __name__ == "__main__":
    example_main(sys.modules[__name__], "SUMMA (copy engines)")
