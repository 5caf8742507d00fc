"""All-gather: every PE contributes a shard and receives all of them, by hand
(TileScale's put + signal pattern) and as symm's device collective inside a
TileLang kernel; against symm.all_gather (stream) and torch.distributed.

    torchrun --nproc-per-node N examples/tilelang/all_gather.py [--aot build-tilelang]"""
import sys

import _exchange
from _common import example_main

CONFIGS = [dict(n=32768), dict(n=4 << 20)]


def kernels(world, cfg):
    return _exchange.builders("gather", world, cfg)


def run(env, ks, cfg, args):
    return _exchange.run(env, ks, cfg, args, "gather", "all_gather")


if __name__ == "__main__":
    example_main(sys.modules[__name__], "all-gather")
