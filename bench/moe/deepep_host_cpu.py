"""Where symm.moe.deep_ep's host time per eager call goes, on a machine
without a GPU: the Buffer's Python and symm.moe.HighThroughput's real Python
path (checks, argument blocks, the ctypes call) on CPU tensors, with the C
library's calls and the stream queries stubbed out (they do nothing), one
rank of n whose peers send what it sends.

    python3 bench/moe/deepep_host_cpu.py [--profile PATH] [--python DIR]

Prints host us per call (median of 5 rounds of 2000 calls) for the cached
dispatch (bf16, fp8 with scales), the cached dispatch + combine pair (plain,
with topk_weights, with a bias) and the full dispatch, and the torch ops a
call makes besides views, allocations and symm's (each launches a kernel on
a GPU, except the full dispatch's work on the counts it read to the host);
--profile PATH adds cProfile's top 25 by own time for that path. --python DIR imports symm from DIR (e.g.
another checkout's python/, for a before/after). What a GPU adds on top (the
kernel launch, torch's CUDA allocator and stream calls) is not here:
bench/moe/deepep_host_prof.py measures the whole call on GPUs.
"""
import argparse
import cProfile
import ctypes
import io
import os
import pstats
import statistics
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
# aten ops that launch nothing on a GPU (allocations, views, metadata; tolist's conjugate / negative checks)
_NO_LAUNCH = {"empty", "new_empty", "set_", "detach", "view", "slice", "as_strided", "alias", "lift_fresh", "resize_",
              "_reshape_alias", "reshape", "narrow", "select", "resolve_conj", "resolve_neg"}
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from deepep_inputs import RankZeroGroup  # noqa: E402


def _cpu_ht(moe, E, K, H, M, x_dtype, scales, n, rank):
    """A symm.moe.HighThroughput over CPU tensors (what __init__ sets, without the C handle)."""
    import torch
    h = object.__new__(moe.HighThroughput)
    esz = torch.empty((), dtype=x_dtype).element_size()
    cols = (H + moe.SCALE_BLOCK - 1) // moe.SCALE_BLOCK
    h._cfg = moe.Config(moe.HIGH_THROUGHPUT, M, E, K, H, H * esz, 4 * cols if scales else 0, 1, 0)
    h._c = ctypes.c_void_p(1)
    h.local_experts, h.first_expert = E // n, rank * (E // n)
    h.device, h._dev, h._is_cuda, h._key, h._call_name = torch.device("cpu"), -1, False, -1, "HighThroughput"
    h.num_experts, h.experts_per_token, h.hidden_dim = E, K, H
    h.max_num_tokens, h.x_dtype, h.has_scales = M, x_dtype, bool(scales)
    h._x_code = moe._DTYPE_CODES.get(str(x_dtype).replace("torch.", ""), -1)
    h.world_size, h._num_tokens, h.capacity = n, 0, M * n
    cap = M * n
    h._recv_x = torch.zeros((cap, H), dtype=x_dtype)
    h._recv_scale = torch.ones((cap, cols)) if scales else None
    h._recv_idx = torch.zeros((cap, K), dtype=torch.int32)
    h._recv_w = torch.zeros((cap, K))
    h._recv_src = torch.zeros((cap, 2), dtype=torch.int32)
    h._num_recv = torch.zeros(1, dtype=torch.int32)
    h._num_recv_per_expert = torch.zeros(E // n, dtype=torch.int32)
    if hasattr(moe, "HtWeights"):  # combine's side channel (absent from an older symm given by --python)
        h._wargs = moe.HtWeights()
        h._wargs_at = ctypes.addressof(h._wargs)
    if hasattr(moe, "HtRecvCopy"):  # the received metadata's copy kernel (likewise)
        h._rcargs = moe.HtRecvCopy()
        h._rcargs_at = ctypes.addressof(h._rcargs)
    h.destroy = lambda: None
    h.heap_bytes = lambda: 0
    return h


class _Engine:
    """The Buffer's engine: real HighThroughput Python over stubbed C, collectives as copies."""

    def __init__(self, n):
        import torch
        self.counts = None  # (rows received, per local expert) of the routing: the stub writes no counts
        sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
        from deepep_fake import FakeCuda
        self.rank, self.n, self.device, self.share = 0, n, torch.device("cpu"), 16
        self.cuda = FakeCuda()
        self.cuda.read = lambda t: self._symm(lambda: t.reshape(-1).clone())

    listing = False  # while the ops are listed: symm's work goes in a range of its own

    def _symm(self, fn):
        """What symm does (a collective, the host's read of the counts): nested
        in a profiler range while the ops are listed, so the list leaves it out
        (the range is not timed: it costs more than the stand-in's work)."""
        if not _Engine.listing:
            return fn()
        import torch
        with torch.profiler.record_function("symm (stand-in)"):
            return fn()

    def ht(self, E, K, H, M, x_dtype, scales):
        import torch
        import symm.moe as moe
        h = _cpu_ht(moe, E, K, H, M, x_dtype, scales, self.n, self.rank)
        h._num_recv.fill_(self.counts[0])
        h._num_recv_per_expert.copy_(self.counts[1])
        if hasattr(h, "_recv_copy"):  # the real Python call, then what its kernel writes that the Buffer checks
            real = h._recv_copy

            def recv_copy(rows, src_token, topk_idx, topk_weights, counts):
                real(rows, src_token, topk_idx, topk_weights, counts)
                if counts is not None:
                    self._symm(lambda: counts[:1 + h.local_experts].copy_(
                        torch.cat((h._num_recv, h._num_recv_per_expert))))
            h._recv_copy = recv_copy
        return h

    def layout(self, idx, num_experts, in_rank, per_rank, per_expert):
        """symm_moe_layout (one kernel), its results by torch (the full dispatch checks them)."""
        import torch
        n, L = self.n, num_experts // self.n
        e = idx.long()

        def run():
            for r in range(n):
                in_rank[:, r] = ((e >= r * L) & (e < (r + 1) * L)).any(dim=1)
            per_rank.copy_(in_rank.sum(dim=0, dtype=torch.int32))
            ok = (e >= 0) & (e < num_experts)
            per_expert.copy_(torch.bincount(e[ok], minlength=num_experts).to(torch.int32))
        self._symm(run)

    def all_gather(self, out, inp):
        self._symm(lambda: out.view(self.n, -1).copy_(inp.view(1, -1)))

    def all_to_all(self, out, inp):
        self._symm(lambda: out.copy_(inp))

    def a2av_counts(self, out_rows, in_rows, row):
        return out_rows, in_rows, row

    def all_to_allv(self, out, inp, counts):
        self._symm(lambda: None)  # the values do not matter here

    def pool_alloc(self, nbytes):
        import torch
        return torch.zeros(nbytes, dtype=torch.uint8)

    def pool_free(self, t):
        pass


def main(argv=None):
    """Prints the table (and a profile); returns {path: host us per call}."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--experts", type=int, default=256)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--profile", help="a path's name: its cProfile top 25 by own time")
    ap.add_argument("--python", default=os.path.join(ROOT, "python"), help="where symm is imported from")
    args = ap.parse_args(argv)
    sys.path.insert(0, args.python)
    import torch
    import symm.moe as moe
    import symm.moe.deep_ep as dep
    saved = (moe._fn, moe._stream, dep._engine_factory, torch.get_num_threads())
    torch.set_num_threads(1)  # tiny ops: no worker threads to wake
    moe._fn = lambda name: (lambda *a: 0)  # the C library: every call succeeds and does nothing
    moe._stream = lambda device_index=None: 0
    try:
        return _measure(args, torch, dep)
    finally:
        moe._fn, moe._stream, dep._engine_factory = saved[:3]
        torch.set_num_threads(saved[3])


def _measure(args, torch, dep):
    n, T, H, K, E = args.ranks, args.tokens, args.hidden, args.topk, args.experts
    engines = []
    dep._engine_factory = lambda group, comm, call: engines.append(_Engine(n)) or engines[-1]

    buf = dep.Buffer(RankZeroGroup(n), 1 << 30, explicitly_destroy=True, max_num_tokens=T)
    g = torch.Generator().manual_seed(1)
    x = torch.randn((T, H), generator=g).to(torch.bfloat16)
    x8, s8 = x.to(torch.float8_e4m3fn), torch.ones((T, H // 128))
    L, t, k = E // n, torch.arange(T).view(T, 1), torch.arange(K).view(1, K)
    idx = ((k % n) * L + (t + k // n) % L).contiguous()  # slot k to rank k % n: every rank gets every token
    w = torch.rand((T, K), generator=g)
    mine = (idx >= 0) & (idx < L)
    engines[0].counts = (int(mine.any(dim=1).sum()) * n, torch.bincount(idx[mine], minlength=L).to(torch.int32) * n)
    pr, _, pe, ir, _ = buf.get_dispatch_layout(idx, E)
    full = dict(num_tokens_per_rank=pr, is_token_in_rank=ir, num_tokens_per_expert=pe, topk_idx=idx, topk_weights=w)
    cfg = dep.Config(24)
    rx, _, rw, _, h16, _ = buf.dispatch(x, config=cfg, **full)
    h8 = buf.dispatch((x8, s8), config=cfg, **full)[4]
    y, bias = rx.clone(), torch.randn((T, H), generator=g).to(torch.bfloat16)
    paths = {
        "cached bf16": lambda: buf.dispatch(x, handle=h16, config=cfg),
        "cached fp8": lambda: buf.dispatch((x8, s8), handle=h8, config=cfg),
        "pair bf16": lambda: (buf.dispatch(x, handle=h16, config=cfg), buf.combine(y, h16, config=cfg)),
        "pair + weights": lambda: (buf.dispatch(x, handle=h16, config=cfg),
                                   buf.combine(y, h16, topk_weights=rw, config=cfg)),
        "pair + bias": lambda: (buf.dispatch(x, handle=h16, config=cfg), buf.combine(y, h16, bias=bias, config=cfg)),
        "full bf16": lambda: buf.dispatch(x, config=cfg, **full),
    }
    counts = {}
    for name, fn in paths.items():
        for _ in range(50):
            fn()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the profiler's notes on its cycles
            _Engine.listing = True
            try:
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                    fn()
            finally:
                _Engine.listing = False
        counts[name] = [e.name for e in prof.events() if e.name.startswith("aten::") and e.cpu_parent is None]
    res = {}
    print("deep_ep host us per call on the CPU (symm's C calls stubbed), %d tokens, hidden %d, top-%d, %d experts, "
          "%d ranks; symm from %s" % (T, H, K, E, n, args.python))
    for name, fn in paths.items():
        rounds = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(args.calls):
                fn()
            rounds.append((time.perf_counter() - t0) / args.calls * 1e6)
        ops = [o[6:] for o in counts[name] if o[6:] not in _NO_LAUNCH]
        res[name] = (statistics.median(rounds), ops)
        print("cpu host: %-16s %7.1f us   torch ops: %d (%s)" % (
            name, statistics.median(rounds), len(ops), ", ".join(ops)))
    if args.profile:
        fn = paths[args.profile]
        p = cProfile.Profile()
        p.enable()
        for _ in range(args.calls):
            fn()
        p.disable()
        s = io.StringIO()
        pstats.Stats(p, stream=s).sort_stats("tottime").print_stats(25)
        print("==== cProfile %s, %d calls, top 25 by own time" % (args.profile, args.calls))
        print(s.getvalue())
    buf.destroy()
    return res


if __name__ == "__main__":
    main()
