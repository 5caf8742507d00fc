"""Host side of Cannon and SUMMA: a sqrt(P) x sqrt(P) PE grid, PE (i, j) =
i * q + j holding blocks A_ij, B_ij (S x S) of the q S x q S matrices and
computing C_ij; the reference is computed from every PE's reproducible
blocks; the comparison is symm.all_gather of A and B then torch.matmul of
the row and column of blocks this PE needs."""
import math

import torch

import symm

from _common import all_ok, close, rand, row, sync_all, time_op

THREADS = 256


def grid_side(world):
    q = math.isqrt(world)
    return q if q * q == world else None


def run(env, ks, cfg, args, example, name, barrier_name):
    P, me = env.world, env.rank
    q = grid_side(P)
    if q is None:
        return [row(example, "skipped: needs a square number of PEs", env, True)]
    S = cfg["s"]
    i, j = divmod(me, q)
    k, bar = ks[name], ks[barrier_name]
    rows = []
    with symm.scope():
        A, B = symm.tensor((S, S), torch.float16), symm.tensor((S, S), torch.float16)
        Abuf, Bbuf = symm.zeros((q, S, S), torch.float16), symm.zeros((q, S, S), torch.float16)
        C = torch.zeros((S, S), dtype=torch.float16, device=env.device)
        sig = symm.zeros((2 * q,), torch.uint64)
        counter = symm.zeros((1,), torch.int32)
        Aall, Ball = symm.zeros((P, S, S), torch.float16), symm.zeros((P, S, S), torch.float16)
        epoch = [0]

        def op():
            epoch[0] += 1
            k(env.ctx, A, B, Abuf, Bbuf, C, sig, counter, epoch[0])
            bar(env.ctx)   # every PE done reading its buffers before the next call writes them

        def blk(kind, it, pe):
            return rand((S, S), torch.float16, env.device, example + kind, it, pe) / 8

        ok = True
        for it in range(args.checks):
            A.copy_(blk("A", it, me))
            B.copy_(blk("B", it, me))
            sync_all()
            op()
            sync_all()
            want = sum(blk("A", it, i * q + kk).float() @ blk("B", it, kk * q + j).float() for kk in range(q))
            ok = ok and close(C, want, 3e-2, 3e-2)

        def ref():
            symm.all_gather(Aall.view(-1), A.view(-1))
            symm.all_gather(Ball.view(-1), B.view(-1))
            arow = Aall[i * q:(i + 1) * q].permute(1, 0, 2).reshape(S, q * S)
            bcol = Ball[j::q].reshape(q * S, S)
            torch.matmul(arow, bcol, out=C)
        times = {}
        if not args.no_bench:
            t = time_op(op, args.iters)
            r = time_op(ref, args.iters)
            times.update({"tilelang us": t, "symm.all_gather x2 + torch.matmul us": r, "ratio": r / t})
        rows.append(row(example, "%dx%d grid of %dx%d blocks" % (q, q, S, S), env, all_ok(ok), **times))
    return rows


def barrier_kernel():
    """One block per PE: symm_barrier_block."""
    import tilelang.language as T
    import symm.tilelang as sT

    @T.prim_func
    def barrier(ctx: T.uint64):
        with T.Kernel(1, threads=THREADS):
            sT.barrier_block(ctx)
    return barrier
