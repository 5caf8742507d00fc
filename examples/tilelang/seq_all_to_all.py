"""Sequence parallelism around attention (Ulysses): the all-to-all before
attention turns a sequence shard with all heads, x [S/P, H, D], into all
of the sequence for a head shard, y [S, H/P, D]; the one after attention
(with the transpose from the attention output's head-major layout) turns
o [H/P, S, D] back into out [S/P, H, D]. Each row of D (pre: H/P * D)
elements goes to its PE with put_warp (one warp per row), after an entry
handshake, then a quiet and an arrival signal per block. Against
symm.all_to_all of the rearranged tensor plus torch's rearrangements.

    torchrun --nproc-per-node N examples/tilelang/seq_all_to_all.py [--aot build-tilelang]"""
import sys

import torch

import symm

from _common import all_ok, example_main, rand, row, sync_all, time_op

CONFIGS = [dict(s=4096, h=32, d=128)]
THREADS = 256
NB = 32     # blocks (each a share of the rows; all resident, since each waits for its peers)


def k_seq(kind, P, S, H, D):
    import tilelang.language as T
    import symm.tilelang as sT
    from _tiles import DTYPE, arrive_and_wait
    s_loc, h_loc = S // P, H // P
    warps = THREADS // 32
    if kind == "pre":
        nrows = S * 1        # rows (destination PE, local sequence position): P * s_loc
        in_shape, out_shape = (s_loc, H, D), (S, h_loc, D)
    else:
        nrows = h_loc * S    # rows (head, sequence position)
        in_shape, out_shape = (h_loc, S, D), (s_loc, H, D)
    nb = NB
    rows_per_block = nrows // NB

    @T.prim_func
    def seq(ctx: T.uint64, x: T.Tensor(in_shape, DTYPE), y: T.Tensor(out_shape, DTYPE),
            entry: T.Tensor((nb,), "uint64"), arrived: T.Tensor((nb,), "uint64"), epoch: T.uint64):
        with T.Kernel(nb, threads=THREADS) as bx:
            me = sT.get_rank(ctx)
            npes = sT.get_num_ranks(ctx)
            w = T.get_thread_binding(0) // 32
            arrive_and_wait(ctx, entry, bx, epoch * npes, npes)
            for rr in T.serial(rows_per_block // warps):
                r = bx * rows_per_block + rr * warps + w
                if kind == "pre":
                    p = r // s_loc           # x[s, p's heads, :] -> PE p's y[me * s_loc + s]
                    s = r % s_loc
                    sT.put_warp(ctx, x[s, p * h_loc, 0], y[me * s_loc + s, 0, 0], h_loc * D, p, nbi=True)
                else:
                    h = r // S               # o[h, s, :] -> PE s // s_loc's out[s % s_loc, me * h_loc + h]
                    s = r % S
                    sT.put_warp(ctx, x[h, s, 0], y[s % s_loc, me * h_loc + h, 0], D, s // s_loc, nbi=True)
            sT.quiet_block(ctx)
            arrive_and_wait(ctx, arrived, bx, epoch * npes, npes)
    return seq


def _names(world, cfg):
    key = "p%d_s%d_h%d_d%d" % (world, cfg["s"], cfg["h"], cfg["d"])
    return "seq_pre_" + key, "seq_post_" + key


def kernels(world, cfg):
    pre, post = _names(world, cfg)
    a = (world, cfg["s"], cfg["h"], cfg["d"])
    return {pre: lambda: k_seq("pre", *a), post: lambda: k_seq("post", *a)}


def run(env, ks, cfg, args):
    P, me = env.world, env.rank
    S, H, D = cfg["s"], cfg["h"], cfg["d"]
    s_loc, h_loc = S // P, H // P
    rows = []
    for kind, name in zip(("pre", "post"), _names(P, cfg)):
        k = ks[name]
        in_shape, out_shape = ((s_loc, H, D), (S, h_loc, D)) if kind == "pre" else ((h_loc, S, D), (s_loc, H, D))
        nb = NB
        with symm.scope():
            x, y = symm.tensor(in_shape, torch.float16), symm.zeros(out_shape, torch.float16)
            entry, arrived = symm.zeros((nb,), torch.uint64), symm.zeros((nb,), torch.uint64)
            stage, recv = symm.zeros((x.numel(),), torch.float16), symm.zeros((x.numel(),), torch.float16)
            epoch = [0]

            def op():
                epoch[0] += 1
                k(env.ctx, x, y, entry, arrived, epoch[0])

            def want(it):
                xs = [rand(in_shape, torch.float16, env.device, "seq" + kind, it, p) for p in range(P)]
                if kind == "pre":   # y[p * s_loc + s, h] = x_p[s, me * h_loc + h]
                    return torch.cat([xp[:, me * h_loc:(me + 1) * h_loc] for xp in xs])
                # out[s, p * h_loc + h] = o_p[h, me * s_loc + s]
                return torch.cat([xp[:, me * s_loc:(me + 1) * s_loc].transpose(0, 1) for xp in xs], dim=1)

            def ref():   # torch rearranges, symm's stream all-to-all moves
                if kind == "pre":
                    stage.view(P, s_loc, h_loc, D).copy_(x.view(s_loc, P, h_loc, D).transpose(0, 1))
                    symm.all_to_all(recv, stage)
                    y.copy_(recv.view(S, h_loc, D))
                else:
                    stage.view(P, h_loc, s_loc, D).copy_(x.view(h_loc, P, s_loc, D).transpose(0, 1))
                    symm.all_to_all(recv, stage)
                    y.view(s_loc, P, h_loc, D).copy_(recv.view(P, h_loc, s_loc, D).permute(2, 0, 1, 3))
            ok = True
            for it in range(args.checks):
                x.copy_(rand(in_shape, torch.float16, env.device, "seq" + kind, it, me))
                y.zero_()
                sync_all()
                op()
                sync_all()
                ok = ok and torch.equal(y, want(it))
                y.zero_()
                sync_all()
                ref()
                sync_all()
                ok = ok and torch.equal(y, want(it))   # the reference path itself
            times = {}
            if not args.no_bench:
                t = time_op(op, args.iters)
                r = time_op(ref, args.iters)
                times.update({"tilelang us": t, "torch + symm.all_to_all us": r, "ratio": r / t})
            label = "pre-attention" if kind == "pre" else "post-attention, with transpose"
            rows.append(row("seq_all_to_all", "%s, S=%d H=%d D=%d" % (label, S, H, D), env, all_ok(ok), **times))
    return rows


if __name__ == "__main__":
    example_main(sys.modules[__name__], "sequence-parallel all-to-all")
