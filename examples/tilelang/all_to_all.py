"""All-to-all: piece p of every PE goes to PE p, by hand
(TileScale's put + signal pattern) and as symm's device collective inside a
TileLang kernel; against symm.all_to_all (stream) and torch.distributed.

    torchrun --nproc-per-node N examples/tilelang/all_to_all.py [--aot build-tilelang]"""
import sys

import _exchange
from _common import example_main

CONFIGS = [dict(n=32768), dict(n=1 << 20)]


def kernels(world, cfg):
    return _exchange.builders("a2a", world, cfg)


def run(env, ks, cfg, args):
    return _exchange.run(env, ks, cfg, args, "a2a", "all_to_all")


if __name__ == "__main__":
    example_main(sys.modules[__name__], "all-to-all")
