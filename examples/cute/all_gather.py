"""All-gather with symm.cute: dst (n_pes * n) gets every PE's src.

Two CuTe DSL kernels (kernels.py): ag_push (each CTA puts its share of src
into every PE's dst with put_signal_block and waits on its counting signal
word) and ag_device (the device-callable collective all_gather_grid, the
CUDA C algorithms of symm_device_coll.h called from CuTe). Checked against
the concatenation of every PE's data, timed from CUDA graphs next to its
CUDA C twin (c_twins.cu: the same kernel in CUDA C) and to symm.all_gather
(the library's stream collective, also eagerly: packets up to its packet
size, then a push of every PE's input into every peer, ag_push's algorithm).

    torchrun --nproc-per-node 2 examples/cute/all_gather.py [--cubins build-cute]
"""
import torch

import _common as C
import symm

SIZES = (1000, 1 << 15, 1 << 20, 1 << 23)
SIG_WORDS = 2 * 1024  # kernels.MAX_CTAS signal words, then as many call counters


def run(env, args):
    rows, ok = [], True
    w = env.world
    sig = symm.zeros((SIG_WORDS,), torch.uint64)
    for n in (SIZES[:2] if args.quick else SIZES):
        src, dst = symm.tensor((n,), torch.float32), symm.tensor((n * w,), torch.float32)
        nb = C.device_grid(4 * n, move=True)
        g = C.coll_grid(4 * n)
        base = ("symm.all_gather", lambda: symm.all_gather(dst, src))

        def fill(s):
            src.copy_(C.data(env, s, env.rank, n))
            dst.zero_()

        def verify(s):
            return torch.equal(dst, torch.cat([C.data(env, s, p, n) for p in range(w)]))

        calls = {
            "ag_push": ((g, env.ctx, dst, src, sig, n), base),
            "ag_device": ((nb, env.ctx, dst, src, n), base),
        }
        good, r = C.run_coll(env, args, calls, fill, verify, 4 * n * w)
        ok &= good
        rows += r
        symm.free_tensor(src)
        symm.free_tensor(dst)
    symm.free_tensor(sig)
    return "all-gather (symm.cute), bytes out", C.COLL_HEADER, rows, ok


if __name__ == "__main__":
    C.main(run, __doc__)
