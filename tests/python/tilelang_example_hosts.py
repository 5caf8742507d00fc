"""The GEMM examples' whole host side (run(): the GEMM alone and its pick,
every fused variant checked and timed, the interleaved timings, the rows)
on the CPU model of tilelang_protocol_sim.py, one thread per PE, at tiny
shapes: what a GPU run would execute, short of the GPU. The kernels are the
model's; CUDA graphs capture by calling (a replay does nothing), events
time nothing, and every torch.cuda.synchronize is a cut where all PEs meet
and the model runs what they queued. Catches a host path that raises, a
collective that not every PE reaches, a variant that deadlocks or computes
a wrong result.

    python3 tests/python/tilelang_example_hosts.py [--pes 1 4] [--only ag_gemm ...]   (exit 0: all passed)
"""
import argparse
import contextlib
import os
import re
import sys
import threading
import traceback
import types

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tilelang_protocol_sim as S  # noqa: E402

BF16 = torch.bfloat16
TINY = {"t1": dict(S.CFG), "t2": dict(S.CFG, stages=3)}


class Meet:
    """All PE threads meet; one of them runs fn in between."""

    def __init__(self, P):
        self.bar = threading.Barrier(P, timeout=120)
        self.slots = [None] * P
        self.err = None

    def sync(self, fn=None):
        if self.bar.wait() == 0 and fn is not None:
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - raised in every thread below
                self.err = e
        self.bar.wait()
        if self.err is not None:
            raise self.err

    def allgather(self, me, data):
        self.slots[me] = data
        self.sync()
        out = list(self.slots)
        self.sync()
        return out


class PerThread(dict):
    """A module-level cache that is per process on the GPU: per PE thread here."""

    def __init__(self):
        super().__init__()
        self._t = threading.local()

    def _d(self):
        if not hasattr(self._t, "d"):
            self._t.d = {}
        return self._t.d

    def __contains__(self, k):
        return k in self._d()

    def __getitem__(self, k):
        return self._d()[k]

    def __setitem__(self, k, v):
        self._d()[k] = v


def fake_cuda(sim, meet):
    """torch.cuda as the examples' timing code uses it, on the model."""
    tl = threading.local()

    class Graph:
        def replay(self):
            pass

    @contextlib.contextmanager
    def graph(g, pool=None, stream=None, capture_error_mode="global"):
        tl.capturing = True
        try:
            yield
        finally:
            tl.capturing = False

    def synchronize(*a, **k):
        meet.sync(sim.run)

    class Event:
        def __init__(self, enable_timing=False):
            pass

        def record(self, stream=None):
            pass

        def synchronize(self):
            synchronize()

        def elapsed_time(self, other):
            return 1.0

    torch.cuda.CUDAGraph = Graph
    torch.cuda.graph = graph
    torch.cuda.is_current_stream_capturing = lambda: getattr(tl, "capturing", False)
    torch.cuda.synchronize = synchronize
    torch.cuda.Event = Event


def gemm_kernel(sim):
    def launch(a, b, c, nsm):
        def act():
            c.copy_(S.mm(a, b).to(BF16))
        sim.kernel("gemm", [(lambda: True, act)])
    return S.FakeKernel(launch)


def kernels_of(sim, mods, names):
    """{name: model kernel} for the example's kernel names."""
    g = mods["_gemm"]
    ks = {}
    for name in names:
        m = re.match(r"gemm_finish_(\d+)$", name)
        if m:
            ks[name] = S.FakeKernel(S.finish_kernel(sim, int(m.group(1))))
            continue
        m = re.match(r"ag_gemm_(\w+?)_p(\d+)_m(\d+)_k(\d+)_n(\d+)_c(\d+)$", name)
        if m:
            c, P, M, _, N, ch = m.group(1), *map(int, m.groups()[1:])
            ks[name] = S.ag_kernel(sim, P, M // P, N // P, ch, g.CONFIGS[c], g.tile_mn, g.group_of)
            continue
        m = re.match(r"gemm_rs_(\w+?)_p(\d+)_m(\d+)_k(\d+)_n(\d+)_s(\d+)$", name)
        if m:
            c, P, M, _, N, sb = m.group(1), *map(int, m.groups()[1:])
            ks[name] = S.rs_kernel(sim, P, M, N, sb, g.CONFIGS[c], g.tile_mn, g.group_of)
            continue
        m = re.match(r"grid2d_gemm_(\w+?)_q(\d+)_s(\d+)_p(\d+)$", name)
        if m:
            c, q, s, p = m.group(1), *map(int, m.groups()[1:])
            ks[name] = S.grid_kernel(sim, q, s, p, g.CONFIGS[c], g.tile_mn, g.group_of)
            continue
        if re.match(r"gemm_(\w+?)_m(\d+)_n(\d+)_k(\d+)$", name):
            ks[name] = gemm_kernel(sim)
            continue
        raise KeyError("no model of kernel %s" % name)
    return ks


def tiny_configs(P, example):
    q = S.CFG["bm"]
    return {"gemm": [dict(what="tiny", m=4 * q, n=2 * q, k=2 * q)],
            "ag_gemm": [dict(m=P * 4 * q, k=2 * q, n=P * 2 * q, chunks=(2, 1))],
            "gemm_rs": [dict(m=P * 4 * q, k=P * 2 * q, n=2 * q, subs=(2, 1))],
            "cannon": [dict(s=4 * q * 2)], "summa": [dict(s=4 * q * 2)]}[example]


def run_example(example, P, seed=0, nsm=2):
    sim = S.Sim(P, seed, nsm)
    meet = Meet(P)
    mods = S.load_examples(sim)
    import importlib
    for name in ("_common", "gemm"):
        mods[name] = importlib.import_module(name)
    fs = sys.modules["symm"]
    fs.my_pe = lambda: sim.cur
    fs.n_pes = lambda: P
    fs.barrier = lambda: meet.sync()
    fs.host_allgather = lambda data: meet.allgather(sim.cur, data)
    for name in ("_common", "_fused", "_grid2d", "ag_gemm", "gemm_rs"):
        mods[name].symm = fs
    g = mods["_gemm"]
    g.CONFIGS, g.FUSED, g.DEFAULT, g.SPEED_PES = dict(TINY), ("t1", "t2"), "t1", P
    mods["_fused"]._best = PerThread()
    fake_cuda(sim, meet)
    mod = mods[example]
    mod.CONFIGS = tiny_configs(P, example)
    args = types.SimpleNamespace(iters=2, graph_iters=2, checks=1, no_bench=False, gemm_config=None)
    results, errors = {}, {}

    def pe(p):
        sim.cur = p
        env = types.SimpleNamespace(rank=p, world=P, device="cpu", ctx=0, dist_backend=None, shared_gpu=False,
                                    backend="native")
        try:
            rows = []
            for cfg in mod.CONFIGS:
                rows += mod.run(env, kernels_of(sim, mods, mod.kernels(P, cfg)), cfg, args)
            results[p] = rows
        except BaseException as e:  # noqa: BLE001 - reported below
            errors[p] = "".join(traceback.format_exception(e))[-3000:]
            meet.bar.abort()

    threads = [threading.Thread(target=pe, args=(p,)) for p in range(P)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        first = min(errors)
        raise AssertionError("PE %d: %s" % (first, errors[first]))
    rows = results[0]
    bad = [r for r in rows if r["check"] != "ok" and not r["check"].startswith("skipped")]
    assert not bad, "rows that failed: %s" % bad
    assert rows, "no rows"
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pes", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--only", nargs="+", choices=["gemm", "ag_gemm", "gemm_rs", "cannon", "summa"])
    args = ap.parse_args()
    failures = 0
    for example in args.only or ["gemm", "ag_gemm", "gemm_rs", "cannon", "summa"]:
        for P in args.pes:
            try:
                rows = run_example(example, P)
                status = "ok (%d rows: %s)" % (len(rows), "; ".join(
                    str(r.get("variant") or r.get("config") or r["case"]) for r in rows[:3]))
            except Exception as e:  # noqa: BLE001 - every example is reported
                failures += 1
                status = "FAIL: %s: %s" % (type(e).__name__, e)
            print("%-8s P=%d: %s" % (example, P, status), flush=True)
    print("%d failed" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
