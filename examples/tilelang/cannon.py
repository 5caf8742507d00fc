"""Cannon's algorithm on a sqrt(P) x sqrt(P) PE grid (P = 1, 4, 9...), M = N =
K = q S, bf16: C_ij = sum_k A_ik B_kj. The blocks travel as Cannon moves
them, on the copy engines (_grid2d.py): the skew (A_ij to PE (i, j - i), B_ij
to PE (i - j, j), into slot 0), then at each step s every PE forwards its
slot s - 1 blocks to its left / upper neighbour's slot s, piece by piece as
they arrive (the side stream waits for each piece's flag on the GPU, no SM).
One GEMM kernel (_grid2d.k_grid_gemm) runs all q steps in one pipeline,
each tile's producer warps waiting for the pieces it reads next. Against
the unfused torch path (all-gather of every block with NCCL, torch.matmul).

    torchrun --nproc-per-node 4 examples/tilelang/cannon.py [--aot build-tilelang]"""
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
    # the skew: step 0's blocks, from the inputs
    g.send_block(g.abuf, g.aflag, 0, g.pe(i, j - i), 0, src_ptr=a.data_ptr())
    g.send_block(g.bbuf, g.bflag, 0, g.pe(i - j, j), 0, src_ptr=b.data_ptr())
    # then each step's blocks on to the left / upper neighbour as they land
    for s in range(1, q):
        g.send_block(g.abuf, g.aflag, s - 1, g.pe(i, j - 1), s, wait_src=True)
        g.send_block(g.bbuf, g.bflag, s - 1, g.pe(i - 1, j), s, wait_src=True)
    g.first, g.skip_a, g.skip_b = 0, -1, -1
    return g, lambda a, b: None


def run(env, ks, cfg, args):
    return _grid2d.run(env, ks, cfg, args, "cannon", make)


if __name__ == "__main__":
    example_main(sys.modules[__name__], "Cannon (copy engines)")
