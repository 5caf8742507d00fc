"""Ring shift with symm.cute: every PE sends its tensor to the next PE.

Two kernels (kernels.py): ring_put (put_signal_block: data, then the release
signal; the receiver waits on its word) and ring_get (a ready signal, then
get_block from the previous PE, then a done signal). Checked against the
previous PE's data (fresh random data each iteration, odd sizes), timed next
to the same shift done by torch's copy into the peer tensor
(symm.get_peer_tensor) followed by symm's stream barrier.

    torchrun --nproc-per-node 2 examples/cute/ring.py [--cubins build-cute]
"""
import torch

import _common as C
import symm

SIZES = (1001, 1 << 16, (1 << 22) + 3)
CTAS = 16


def run(env, args):
    rows, ok = [], True
    sig = symm.zeros((4 * CTAS,), torch.uint64)
    words = {"ring_put": sig[:CTAS], "ring_get": sig[2 * CTAS:]}
    prv, nxt = (env.rank - 1) % env.world, (env.rank + 1) % env.world
    ep = C.Epochs()
    for n in (SIZES[:2] if args.quick else SIZES):
        src, dst = symm.tensor((n,), torch.float32), symm.tensor((n,), torch.float32)
        peer_dst = symm.get_peer_tensor(dst, nxt)

        def fill(s):
            src.copy_(torch.randn(n, generator=env.gen(s, env.rank), device=env.device))
            dst.zero_()

        def verify(s):
            return torch.equal(dst, torch.randn(n, generator=env.gen(s, prv), device=env.device))

        def base():
            peer_dst.copy_(src)
            symm.barrier_on_stream()

        calls = {name: (lambda name=name: env.k[name](CTAS, env.ctx, dst, src, words[name], n,
                                                       ep.next(name)))
                 for name in ("ring_put", "ring_get")}
        good, r = C.run_each(env, args, calls, fill, verify, base, 4 * n)
        ok &= good
        rows += r
        symm.free_tensor(src)
        symm.free_tensor(dst)
    symm.free_tensor(sig)
    header = ("kernel", "bytes", "check", "CuTe eager us", "torch peer copy + barrier eager us", "ratio")
    return "ring shift (symm.cute)", header, rows, ok


if __name__ == "__main__":
    C.main(run, __doc__)
