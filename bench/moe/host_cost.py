"""Host time of symm.moe's eager calls (AllToAll.dispatch / combine).

    python bench/moe/host_cost.py --mock          no GPU: CPU tensors and a stand-in
                                                  C call (a tiny C function built here
                                                  with cc, or a ctypes callback without
                                                  one); the Python side as it runs
    torchrun --nproc-per-node 4 bench/moe/host_cost.py
                                                  GPUs: 64 experts, top-6, hidden 2048,
                                                  bf16, 1 token per PE

Each measurement: time.perf_counter around `pairs` back-to-back dispatch +
combine pairs without a synchronisation (the host runs ahead of the GPU, so
this is what the host spends per call), the median over `repeats`. Beside
it, with --op, the same calls forced through torch's custom-op dispatcher
(what torch.compile uses), and on GPUs the wall time per pair once the GPU
is waited for (eager) against one pair replayed in a CUDA graph. Prints one
table; rank 0 prints, `--out FILE` also writes it as markdown.

With SYMM_MOE_NO_LAUNCH=1 in the environment the library checks and fills
every call's arguments but enqueues no kernel: the rows are then the host
cost without the launch (use --host-only: no wall, graph or bar rows, the
results being wrong).
"""
import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))

import torch  # noqa: E402

E, K, H, M = 64, 6, 2048, 1


def _mock_c():
    """A C function int f(void *, void *, int, void *) { return 0; }, built with
    cc; None when no compiler is there."""
    d = tempfile.mkdtemp(prefix="symm_moe_mock_")
    src, lib = os.path.join(d, "m.c"), os.path.join(d, "libm.so")
    with open(src, "w") as f:
        f.write("int symm_mock_call(void *h, void *a, int f, void *s) { (void)h; (void)a; (void)f; (void)s; "
                "return 0; }\n")
    try:
        subprocess.run([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", src, "-o", lib], check=True,
                       capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    fn = ctypes.CDLL(lib).symm_mock_call
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    return fn


def mock_ata(moe):
    """An AllToAll over CPU tensors whose C calls are the stand-in."""
    fn = _mock_c()
    how = "a C function (cc)"
    if fn is None:
        fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                              ctypes.c_void_p)(lambda *a: 0)
        how = "a ctypes callback (no cc): slower than the real call"
    ata = object.__new__(moe.AllToAll)
    ata._c = ctypes.c_void_p(1)
    ata._call_name = "AllToAll"
    ata.device, ata._dev = torch.device("cpu"), None
    ata.local_experts, ata.first_expert, ata.world_size = E // 4, 0, 4
    ata._spec = {"local_experts": E // 4, "hidden_dim": H, "experts_per_token": K, "has_scales": False,
                 "scale_cols": 0, "rows": M * 4}
    ata._has_scales = False
    ata._dargs, ata._cargs = moe.DispatchArgs(), moe.CombineArgs()
    ata._daddr, ata._caddr = ctypes.addressof(ata._dargs), ctypes.addressof(ata._cargs)
    ata._dmeta = ata._cmeta = None
    ata._cdispatch = ata._ccombine = fn
    ata._key = -12345
    moe._live[ata._key] = ata
    moe._stream = lambda dev=None: 0
    return ata, how


def tensors(ata, device, dtype=torch.bfloat16):
    L, rows = ata.local_experts, M * ata.world_size
    idx = torch.stack([torch.randperm(E)[:K] for _ in range(M)]).to(torch.uint32).to(device)
    return dict(num=torch.empty(L, dtype=torch.int32, device=device),
                ex=torch.empty((L, rows, H), dtype=dtype, device=device),
                x=torch.randn((M, H), device=device).to(dtype), idx=idx,
                w=torch.rand((M, K), device=device), out=torch.empty((M, H), dtype=dtype, device=device),
                y=torch.zeros((L, rows, H), dtype=dtype, device=device))


def pair(ata, t, op=False):
    if op:
        torch.ops.symm.moe_dispatch(ata._key, t["num"], t["ex"], None, t["x"], None, t["idx"], None, True, True)
        torch.ops.symm.moe_combine(ata._key, t["out"], t["idx"], t["w"], t["y"], None, True, True)
    else:
        ata.dispatch(t["num"], t["ex"], None, t["x"], None, t["idx"], None)
        ata.combine(t["out"], t["idx"], t["w"], t["y"], None)


def host_us(ata, t, pairs, repeats, op=False, sync=None):
    """Median microseconds of host time per call (two calls per pair)."""
    out = []
    for _ in range(repeats):
        if sync:
            sync()
        t0 = time.perf_counter()
        for _ in range(pairs):
            pair(ata, t, op)
        out.append((time.perf_counter() - t0) / (2 * pairs) * 1e6)
    if sync:
        sync()
    return statistics.median(out)


def c_us(ata, moe, pairs, repeats, sync):
    """Median microseconds per call of symm_moe_dispatch / symm_moe_combine
    called straight through ctypes with the argument structures the eager
    pairs left filled: the library's share of an eager call."""
    c, d, cb, da, ca = ata._c, ata._cdispatch, ata._ccombine, ata._daddr, ata._caddr
    flags = moe.SEND | moe.RECV
    stream = moe._stream(ata._dev)
    out = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        for _ in range(pairs):
            if d(c, da, flags, stream) or cb(c, ca, flags, stream):
                raise RuntimeError("symm_moe_dispatch/combine failed in the C-only timing")
        out.append((time.perf_counter() - t0) / (2 * pairs) * 1e6)
    sync()
    return statistics.median(out)


def profile(ata, t, pairs, top):
    """cProfile over `pairs` eager pairs; prints the `top` functions by own time
    (every PE runs the calls, so the peers' kernels stay matched)."""
    import cProfile
    import io
    import pstats
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(pairs):
        pair(ata, t)
    pr.disable()
    if top:
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(top)
        print("==== cProfile: symm.moe eager pairs (%d), top %d by own time" % (pairs, top))
        print(s.getvalue())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mock", action="store_true", help="no GPU: CPU tensors and a stand-in C call")
    ap.add_argument("--pairs", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--op", action="store_true", help="also time the custom-op path")
    ap.add_argument("--out", help="also write the table (markdown) here")
    ap.add_argument("--host-only", action="store_true",
                    help="only the host-time rows (no custom-op, wall, graph rows or bars; SYMM_MOE_NO_LAUNCH=1 runs)")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="also print cProfile's top N functions (by own time) over the eager pairs")
    args = ap.parse_args()
    import symm.moe as moe
    rows = []
    if args.mock:
        ata, how = mock_ata(moe)
        t = tensors(ata, "cpu")
        pair(ata, t)  # first call: the full checks
        rows.append(("eager call, stand-in C call (%s)" % how, host_us(ata, t, args.pairs, args.repeats)))
        if args.profile:
            profile(ata, t, args.pairs, args.profile)
        if args.op:
            rows.append(("custom-op path, stand-in C call", host_us(ata, t, args.pairs, args.repeats, op=True)))
        title, rank = "symm.moe host time per call (no GPU)", 0
    else:
        if not torch.cuda.is_available():
            print("n/a: no CUDA GPU (use --mock)")
            return 0
        import symm
        symm.init()
        rank, n = symm.my_pe(), symm.n_pes()
        if E % n:
            print("n/a: %d experts do not split over %d PEs" % (E, n))
            return 0
        ata = moe.AllToAll.intranode(M, E, K, rank, n, 1, H, H * 2, 0)
        t = tensors(ata, ata.device)
        for _ in range(10):
            pair(ata, t)
        torch.cuda.synchronize()
        symm.barrier()
        rows.append(("eager call: host time (perf_counter, %d pairs, no sync)" % args.pairs,
                     host_us(ata, t, args.pairs, args.repeats, sync=lambda: (torch.cuda.synchronize(),
                                                                             symm.barrier()))))
        rows.append(("the C calls alone (ctypes, arguments filled by the pairs above)",
                     c_us(ata, moe, args.pairs, args.repeats, lambda: (torch.cuda.synchronize(), symm.barrier()))))
        if args.profile:
            torch.cuda.synchronize()
            symm.barrier()
            profile(ata, t, args.pairs, args.profile if rank == 0 else 0)
            torch.cuda.synchronize()
            symm.barrier()
        if args.op and not args.host_only:
            rows.append(("custom-op path: host time", host_us(ata, t, args.pairs, args.repeats, op=True,
                                                              sync=lambda: (torch.cuda.synchronize(),
                                                                            symm.barrier()))))
        # wall time per pair, eager (the GPU waited for) and replayed in a graph
        walls = [] if not args.host_only else None
        for _ in range(args.repeats if walls is not None else 0):
            torch.cuda.synchronize()
            symm.barrier()
            t0 = time.perf_counter()
            for _ in range(args.pairs):
                pair(ata, t)
            torch.cuda.synchronize()
            walls.append((time.perf_counter() - t0) / args.pairs * 1e6)
        if walls:
            rows.append(("eager pair: wall time per dispatch + combine", statistics.median(walls)))
            g = torch.cuda.CUDAGraph()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                with torch.cuda.graph(g, stream=s):
                    pair(ata, t)
            torch.cuda.current_stream().wait_stream(s)
            reps = []
            for _ in range(args.repeats):
                torch.cuda.synchronize()
                symm.barrier()
                t0 = time.perf_counter()
                for _ in range(args.pairs):
                    g.replay()
                torch.cuda.synchronize()
                reps.append((time.perf_counter() - t0) / args.pairs * 1e6)
            rows.append(("graph replay: wall time per dispatch + combine", statistics.median(reps)))
        torch.cuda.synchronize()
        symm.barrier()
        ata.check()
        ata.destroy()
        title = "symm.moe host time per call, %d PEs (%s)%s" % (
            n, torch.cuda.get_device_name(),
            ", SYMM_MOE_NO_LAUNCH=1: no kernel enqueued" if os.environ.get("SYMM_MOE_NO_LAUNCH") == "1" else "")
    if rank == 0:
        lines = ["### " + title, "", "64 experts, top-6, hidden 2048, bf16, %d token per PE; medians of %d repeats"
                 % (M, args.repeats), "", "| what | us |", "| --- | ---: |"]
        lines += ["| %s | %.2f |" % (k, v) for k, v in rows]
        eager = [v for k, v in rows if k.startswith("eager call") and not args.host_only]
        bar = 10.0
        if eager:
            lines += ["", "bar: host time per eager call <= %.0f us: %s (%.2f us)" % (
                bar, "pass" if eager[0] <= bar else "MISS", eager[0])]
        wall = {k.split(":")[0]: v for k, v in rows}
        if "eager pair" in wall and "graph replay" in wall:
            r = wall["eager pair"] / wall["graph replay"]
            lines += ["bar: eager pair within 1.2x of the graph replay: %s (%.2fx)" % (
                "pass" if r <= 1.2 else "MISS", r)]
        text = "\n".join(lines)
        print(text)
        if args.out:
            with open(args.out, "w") as f:
                f.write(text + "\n")
    if not args.mock:
        import symm
        symm.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
