#!/usr/bin/env python3
"""The GPU side of scripts/gpu_trace.sh: the Triton fused examples and the
MoE low-latency exchange with and without the device trace, and the table
of what the trace costs them.

    torchrun --nproc-per-node N scripts/trace_run.py example ag_gemm [gemm_rs] [--record]
        [--artifact-dir D [--artifact-size S]]
    torchrun --nproc-per-node N scripts/trace_run.py moe --artifact F [--tokens 16]
    python3 scripts/trace_run.py overhead LOG... [--bench A.md B.md]

example: run examples/triton/<name>.py's run() (its check and its timing)
  as it is, for each name in turn in one process; SYMM_TRACE=1 in the
  environment links the traced bitcode. --record records the device trace
  over the whole timed run (started before, stopped after; nothing is
  written: the cost of recording, not of writing); --artifact-dir D then
  runs the example once more (one checked call, no timing) inside
  symm.trace(D/<name>.json): a small trace to look at. PE 0 prints one line
  per example `TRACE_RUN example=... trace=0|1 record=0|1 stream_us=...
  graph_us=... recorded=... dropped=...`.
moe: symm.moe.AllToAll (low latency, 64 experts top-6 hidden 2048, fp8
  with scales, `--tokens` per PE) dispatch + combine twice to warm up, then
  twice inside symm.trace(F). Needs a libsymm built -DSYMM_TRACE=ON
  (SYMM_LIBRARY) for the MoE kernels to record.
overhead: the table of the TRACE_RUN lines in the logs (each traced run
  against the untraced run of the same example), and with --bench two
  symm-bench --out files (untraced first): the MoE rows side by side.
"""
import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "python"))


def _example(args):
    sys.path.insert(0, os.path.join(REPO, "examples", "triton"))
    import importlib

    import _common as C
    import symm
    env = C.setup()
    traced = symm._lib.trace_requested()
    ok = True
    try:
        for name in args.names:
            mod = importlib.import_module(name)
            recorded = dropped = None
            if args.record:
                symm.trace_start(args.capacity)
            res = mod.run(m=args.M, k=args.K, n=args.N, iters=args.iters, bench=True)
            if args.record:
                symm.trace_stop()
                recorded, dropped = symm.trace_counts()
            if args.artifact_dir:
                size = args.artifact_size or args.M
                path = os.path.join(args.artifact_dir, name + ".json")
                with symm.trace(path, capacity=1 << 18) as t:
                    art = mod.run(m=size, k=size, n=size, iters=1, bench=False, checks=1)
                res["ok"] = res.get("ok") and art.get("ok")
                if env.rank == 0:
                    print("artifact %s: PE 0 recorded %d events, dropped %d" % (path, *t.counts), flush=True)
            us = res.get("symm_us") or (None, None)
            if env.rank == 0:
                print("TRACE_RUN example=%s pes=%d trace=%d record=%d ok=%d stream_us=%s graph_us=%s recorded=%s "
                      "dropped=%s" % (name, env.world, traced, bool(args.record), bool(res.get("ok")),
                                      "%.2f" % us[0] if us[0] else "-", "%.2f" % us[1] if us[1] else "-",
                                      recorded if recorded is not None else "-",
                                      dropped if dropped is not None else "-"), flush=True)
            ok = ok and bool(res.get("ok"))
    finally:
        C.teardown()
    return 0 if ok else 1


def _moe(args):
    import torch

    import symm
    from symm import moe
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local % torch.cuda.device_count())
    os.environ.setdefault("SYMM_WAIT_TIMEOUT", "30")
    symm.init()
    me, n = symm.my_pe(), symm.n_pes()
    E, K, H, M = 64, 6, 2048, args.tokens
    if E % n:
        raise SystemExit("moe: %d experts do not split over %d PEs" % (E, n))
    dev = torch.device("cuda", torch.cuda.current_device())
    ata = moe.AllToAll.intranode(M, E, K, me, n, 1, H, H, 4 * (H // 128))
    try:
        L = ata.local_experts
        g = torch.Generator(device=dev).manual_seed(1000 + me)
        x = torch.randn((M, H), device=dev, generator=g).to(torch.float8_e4m3fn)
        xs = torch.ones((M, H // 128), device=dev)
        idx = torch.stack([torch.randperm(E, device=dev, generator=g)[:K] for _ in range(M)]).to(torch.uint32)
        w = torch.full((M, K), 1.0 / K, device=dev)
        num = torch.empty(L, dtype=torch.int32, device=dev)
        ex = torch.empty((L, M * n, H), dtype=torch.float8_e4m3fn, device=dev)
        exs = torch.empty((L, M * n, H // 128), device=dev)
        y = torch.zeros((L, M * n, H), dtype=torch.bfloat16, device=dev)
        out = torch.empty((M, H), dtype=torch.bfloat16, device=dev)

        def step():
            ata.dispatch(num, ex, exs, x, xs, idx, None)
            ata.combine(out, idx, w, y, None)
        for _ in range(2):
            step()
        torch.cuda.synchronize()
        if not symm.trace_library_traced() and me == 0:
            print("NOTE: this libsymm was built without -DSYMM_TRACE=ON: the MoE kernels record nothing "
                  "(SYMM_LIBRARY=<build-trace>/src/libsymm.so)", flush=True)
        with symm.trace(args.artifact, capacity=1 << 20) as t:
            for _ in range(2):
                step()
        ata.check()
        if me == 0:
            print("moe artifact %s: %d PEs, %d tokens/PE, PE 0 recorded %d events, dropped %d"
                  % (args.artifact, n, M, *t.counts), flush=True)
    finally:
        ata.destroy()
        symm.finalize()
    return 0


RUN = re.compile(r"TRACE_RUN example=(\S+) pes=(\d+) trace=(\d) record=(\d) ok=(\d) stream_us=(\S+) graph_us=(\S+)"
                 r" recorded=(\S+) dropped=(\S+)")


def _num(s):
    try:
        return float(s)
    except ValueError:
        return None


def _ratio(a, b):
    return "%+.1f%%" % (100.0 * (a / b - 1.0)) if a and b else "-"


def _md_rows(path):
    """The rows of every table in a symm-bench --out file: {title: [cells]}."""
    tables, title = {}, None
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("### "):
            title = line[4:]
            tables[title] = []
        elif title and line.startswith("|") and not set(line) <= set("|-: "):
            tables[title].append([c.strip() for c in line.strip("|").split("|")])
    return tables


def _overhead(args):
    runs = []
    for log in args.logs:
        if os.path.isfile(log):
            runs += [m.groups() for m in RUN.finditer(open(log).read())]
    rows = []
    base = {r[0]: r for r in runs if r[2] == "0"}
    for r in runs:
        if r[2] == "0":
            continue
        b = base.get(r[0])
        what = "traced code, recording" if r[3] == "1" else "traced code, not recording"
        rows.append((r[0], r[1], what, b[5] if b else "-", r[5], _ratio(_num(r[5]), _num(b[5]) if b else None),
                     b[6] if b else "-", r[6], _ratio(_num(r[6]), _num(b[6]) if b else None),
                     "%s / %s" % (r[7], r[8])))
    print("Triton fused examples, with and without the device trace (slowest PE; us per call)")
    hdr = ("example", "PEs", "run", "stream plain", "stream traced", "stream +", "graph plain", "graph traced",
           "graph +", "events kept / dropped (PE 0)")
    print(" | ".join(hdr))
    for r in rows:
        print(" | ".join(str(c) for c in r))
    if not rows:
        print("(no TRACE_RUN lines found)")
    if args.bench and len(args.bench) == 2 and all(os.path.isfile(p) for p in args.bench):
        a, b = _md_rows(args.bench[0]), _md_rows(args.bench[1])
        print("\nsymm-bench --mode moe, without and with the device trace recording (same machine, same run)")
        for title, rows_a in a.items():
            if not title.startswith(("Low latency", "High throughput")) or title not in b:
                continue
            hdr = rows_a[0]
            # one figure per cell, or "dispatch / combine" pairs (the low-latency table's two timings)
            cols = [i for i, h in enumerate(hdr) if h in ("dispatch us", "combine us") or h.endswith(
                "dispatch / combine us")]
            keys = [i for i, h in enumerate(hdr)
                    if h in ("experts", "top-k", "hidden", "tokens/PE", "SM budget", "dispatch x")]
            names = []
            for c in cols:
                h = hdr[c]
                if h.endswith("dispatch / combine us"):
                    how = h.split(":")[0]
                    names += ["%s dispatch us" % how, "%s combine us" % how]
                else:
                    names.append(h)
            print("\n" + title)
            print(" | ".join([hdr[i] for i in keys] + ["%s plain | %s traced | +" % (n, n) for n in names]))
            for ra, rb in zip(rows_a[1:], b[title][1:]):
                cells = [ra[i] for i in keys]
                for c in cols:
                    for x, y in zip(ra[c].split(" / "), rb[c].split(" / ")):
                        cells += [x, y, _ratio(_num(y), _num(x))]
                print(" | ".join(cells))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("example")
    e.add_argument("names", nargs="+", choices=("ag_gemm", "gemm_rs"))
    e.add_argument("--M", type=int, default=8192)
    e.add_argument("--K", type=int, default=8192)
    e.add_argument("--N", type=int, default=8192)
    e.add_argument("--iters", type=int, default=10)
    e.add_argument("--record", action="store_true")
    e.add_argument("--capacity", type=int, default=1 << 22)
    e.add_argument("--artifact-dir")
    e.add_argument("--artifact-size", type=int, default=0, help="M = K = N of the small traced call (default --M)")
    m = sub.add_parser("moe")
    m.add_argument("--artifact", required=True)
    m.add_argument("--tokens", type=int, default=16)
    o = sub.add_parser("overhead")
    o.add_argument("logs", nargs="*")
    o.add_argument("--bench", nargs=2)
    args = ap.parse_args(argv)
    return {"example": _example, "moe": _moe, "overhead": _overhead}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
