"""Simple shift: every PE sends its buffer to the next PE (put_signal_block
per block, then a wait for the previous PE's blocks).

    torchrun --nproc-per-node N examples/tilelang/ring_shift.py [--aot build-tilelang]"""
import sys

import torch

import symm

from _common import all_ok, example_main, rand, row, sync_all, time_op

CONFIGS = [dict(n=1 << 20, block=16384)]
THREADS = 256


def k_shift(n, blk):
    import tilelang.language as T
    import symm.tilelang as sT
    from _tiles import wait_all_threads
    nb = n // blk

    @T.prim_func
    def shift(ctx: T.uint64, x: T.Tensor((n,), "float16"), y: T.Tensor((n,), "float16"),
              sig: T.Tensor((1,), "uint64"), epoch: T.uint64):
        with T.Kernel(nb, threads=THREADS) as bx:
            nxt = (sT.get_rank(ctx) + 1) % sT.get_num_ranks(ctx)
            sT.put_signal_block(ctx, x[bx * blk], y[bx * blk], blk, sig[0], 1, "add", nxt)
            wait_all_threads(ctx, sig, 0, epoch * nb)
    return shift


def kernels(world, cfg):
    return {"ring_shift_n%d" % cfg["n"]: lambda: k_shift(cfg["n"], cfg["block"])}


def run(env, ks, cfg, args):
    (k,) = ks.values()
    n = cfg["n"]
    nxt, prv = (env.rank + 1) % env.world, (env.rank - 1) % env.world
    rows = []
    with symm.scope():
        x, y = symm.tensor((n,), torch.float16), symm.zeros((n,), torch.float16)
        sig = symm.zeros((1,), torch.uint64)
        epoch = [0]

        def op():
            epoch[0] += 1
            k(env.ctx, x, y, sig, epoch[0])
        ok = True
        for it in range(args.checks):
            x.copy_(rand((n,), torch.float16, env.device, "shift", it, env.rank))
            sync_all()
            op()
            sync_all()
            ok = ok and torch.equal(y, rand((n,), torch.float16, env.device, "shift", it, prv))
        times = {}
        if not args.no_bench:
            times["tilelang us"] = time_op(op, args.iters)
            peer = symm.get_peer_tensor(y, nxt)
            times["torch copy_ + barrier us"] = time_op(lambda: (peer.copy_(x), symm.barrier_on_stream()),
                                                         args.iters)
        rows.append(row("ring_shift", "%d KiB" % (2 * n // 1024), env, all_ok(ok), **times))
    return rows


if __name__ == "__main__":
    example_main(sys.modules[__name__], "ring shift")
