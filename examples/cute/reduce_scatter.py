"""Reduce-scatter (f32 sum) with symm.cute: src holds n_pes pieces of n; PE r
gets the sum over PEs of piece r.

rs_oneshot reads piece r of every PE's src over NVLink (handshakes before and
after, like ar_oneshot); rs_device calls the device-callable collective
reduce_scatter_grid. Checked against torch sums of every PE's data, timed
from CUDA graphs next to its CUDA C twin (c_twins.cu) and to
symm.reduce_scatter (the library's stream collective, also eagerly):
algo="twoshot" for rs_oneshot (its direct kernel reads piece my_pe of every
PE's input too), auto for rs_device.

    torchrun --nproc-per-node 2 examples/cute/reduce_scatter.py [--cubins build-cute]
"""
import torch

import _common as C
import symm

SIZES = (1000, 1 << 15, 1 << 20, 1 << 22)   # elements per piece, multiples of 4
FLAGS_WORDS = 3 * 4096 + 1024  # kernels.FLAGS_WORDS


def run(env, args):
    rows, ok = [], True
    w, me = env.world, env.rank
    flags = symm.zeros((FLAGS_WORDS,), torch.uint64)
    for n in (SIZES[:2] if args.quick else SIZES):
        src, dst = symm.tensor((n * w,), torch.float32), symm.tensor((n,), torch.float32)
        nb = C.device_grid(4 * n)
        g = C.coll_grid(4 * n)

        def fill(s):
            src.copy_(C.data(env, s, me, n * w, integer=True))
            dst.zero_()

        def verify(s):
            total = sum(C.data(env, s, p, n * w, integer=True) for p in range(w))
            return torch.equal(dst, total[me * n:(me + 1) * n])

        def base(algo):
            return ("symm.reduce_scatter %s" % algo, lambda: symm.reduce_scatter(dst, src, algo=algo))

        calls = {
            "rs_oneshot": ((g, env.ctx, dst, src, flags, n), base("twoshot")),
            "rs_device": ((nb, env.ctx, dst, src, n), base("auto")),
        }
        good, r = C.run_coll(env, args, calls, fill, verify, 4 * n * w)
        ok &= good
        rows += r
        symm.free_tensor(src)
        symm.free_tensor(dst)
    symm.free_tensor(flags)
    return "reduce-scatter f32 sum (symm.cute), bytes in", C.COLL_HEADER, rows, ok


if __name__ == "__main__":
    C.main(run, __doc__)
