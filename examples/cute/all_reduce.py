"""All-reduce (f32 sum) with symm.cute.

ar_oneshot reads the peers' tensors directly: a handshake (every PE's src is
ready), each CTA sums its share of every PE's src over NVLink into its own
dst (16-byte loads, several in flight per thread), a second handshake.
ar_twoshot sums slice my_pe of every PE's src, then reads the other slices
from their owners' dst. ar_device calls the device-callable collective
all_reduce_grid from CuTe. Checked against the sum of every PE's data
(integer-valued, so every order of summation is exact), timed from CUDA
graphs next to its CUDA C twin (c_twins.cu: the same kernel in CUDA C) and
to symm.all_reduce (the library's stream collective, also eagerly), with
the closest algorithm: algo="oneshot" for ar_oneshot (a push into scratch
and one handshake, where ar_oneshot reads the peers' src between two),
"twoshot" for ar_twoshot (the table names the kernel symm ran). The multimem twin
(ar_multimem: multimem.ld_reduce + multimem.st through the multicast
address) is compiled with the others but runs only where multicast is
enabled: here symm.cute.host.get_multicast_tensor raises, which this example
checks and reports.

    torchrun --nproc-per-node 2 examples/cute/all_reduce.py [--cubins build-cute]
"""
import torch

import _common as C
import symm

SIZES = (1000, 1 << 15, 1 << 20, 1 << 23)
FLAGS_WORDS = 3 * 4096 + 1024  # kernels.FLAGS_WORDS: 3 handshakes, then the call counters


def multicast_row(env, buf):
    """The multimem twin: run only with a multicast address; say why not."""
    try:
        symm.get_multicast_tensor(buf)
    except symm.SymmError as e:
        return ("ar_multimem", "-", "not run: %s" % str(e).split(":")[-1].strip()[:60]) + ("-",) * 8
    return ("ar_multimem", "-", "multicast available: not exercised by this example") + ("-",) * 8


def run(env, args):
    rows, ok = [], True
    w = env.world
    flags = symm.zeros((FLAGS_WORDS,), torch.uint64)
    for n in (SIZES[:2] if args.quick else SIZES):
        src, dst = symm.tensor((n,), torch.float32), symm.tensor((n,), torch.float32)
        nb = C.device_grid(4 * n, direct_bytes=4 * n // w)  # twoshot: a slice per PE
        g1, g2 = C.coll_grid(4 * n), C.coll_grid(4 * n // w)

        def fill(s):
            src.copy_(C.data(env, s, env.rank, n, integer=True))
            dst.zero_()

        def verify(s):
            return torch.equal(dst, sum(C.data(env, s, p, n, integer=True) for p in range(w)))

        def base(algo):
            return ("symm.all_reduce %s" % algo, lambda: symm.all_reduce(src, out=dst, algo=algo))

        calls = {
            "ar_oneshot": ((g1, env.ctx, dst, src, flags, n), base("oneshot")),
            "ar_twoshot": ((g2, env.ctx, dst, src, flags, n), base("twoshot")),
            "ar_device": ((nb, env.ctx, dst, src, n), base("auto")),
        }
        good, r = C.run_coll(env, args, calls, fill, verify, 4 * n)
        ok &= good
        rows += r
        if n == SIZES[0]:
            rows.append(multicast_row(env, src))
        symm.free_tensor(src)
        symm.free_tensor(dst)
    symm.free_tensor(flags)
    return "all-reduce f32 sum (symm.cute)", C.COLL_HEADER, rows, ok


if __name__ == "__main__":
    C.main(run, __doc__)
