"""Run every Triton example at its benchmark shapes and write the results.

    torchrun --nproc-per-node 4 examples/triton/run_all.py [--out bench/results/archive/<date>-<host>-4gpu-triton-examples.md]
             [--quick] [--only ag_gemm,gemm_rs]

Each example checks its result against torch + NCCL first (host copies over
gloo where PEs share a GPU, whose tables then say so), then times the
symm.triton kernel, the unfused torch + NCCL equivalent and, for the plain
collectives, symm's own CUDA C stream collective, each by the same two
methods (back-to-back stream launches, and CUDA graph replay;
SYMM_EXAMPLES_GRAPHS=0 skips the graphs). PE 0 prints one line per
example and, with --out, writes a markdown table with the machine, the
command and the date.
"""
import argparse
import datetime
import importlib
import os
import subprocess
import sys

import _common as C

# benchmark shapes: a tensor-parallel LLM layer (M=K=N=8192, bf16) for the GEMMs
FULL = {
    "ring_shift": dict(numel=64 * 1024 * 1024),
    "all_gather": dict(numel=16 * 1024 * 1024),
    "all_to_all": dict(numel=4 * 1024 * 1024),
    "all_reduce": dict(numel=1024 * 1024),
    "ag_gemm": dict(m=8192, k=8192, n=8192),
    "gemm_rs": dict(m=8192, k=8192, n=8192),
    "seq_all_to_all": dict(seq=32768, heads=32, dim=128),
}
QUICK = {
    "ring_shift": dict(numel=1024 * 1024),
    "all_gather": dict(numel=256 * 1024),
    "all_to_all": dict(numel=64 * 1024),
    "all_reduce": dict(numel=64 * 1024),
    "ag_gemm": dict(m=2048, k=2048, n=2048),
    "gemm_rs": dict(m=2048, k=2048, n=2048),
    "seq_all_to_all": dict(seq=4096, heads=16, dim=128),
}


def machine():
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "(nvidia-smi not found)"


def _us(v):
    return "-" if v is None else "%.1f" % v


def _ratio(other, base):
    return "x%.2f" % (other / base) if other and base else "-"


def write_table(path, env, args):
    rows = ["| example | PEs | check | symm.triton stream (us) | symm.triton graph (us) | compared with "
            "| their stream (us) | their graph (us) | speedup stream | speedup graph |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in C.RESULTS:
        t = r["timings"]
        base = t[0][1] if t else (None, None)
        others = t[1:] or [("- (n/a with PEs sharing a GPU)" if r["shared"] else "-", (None, None))]
        for label, (us, gus) in others:
            rows.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                r["name"], r["pes"], "OK" if r["ok"] else "FAILED", _us(base[0]), _us(base[1]),
                label, _us(us), _us(gus), _ratio(us, base[0]), _ratio(gus, base[1])))
    title = "# symm.triton examples vs torch + NCCL"
    if env.shared:
        title = ("# symm.triton examples, PEs sharing one GPU: not a measure of NVLink (torch + NCCL: "
                 "n/a, NCCL refuses PEs that share a GPU)")
    text = [title, "",
            "- date: %s" % datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "- command: `torchrun --nproc-per-node %d examples/triton/run_all.py %s`"
            % (env.world, " ".join(sys.argv[1:])),
            "- machine:", "", "```", machine(), "```", "",
            "Every party is timed the same way (examples/triton/_common.py), slowest PE's median "
            "of 5 windows: *stream*: %d calls enqueued back to back between one CUDA event pair, "
            "time per call (host launch cost shows only where the GPU outruns the host); "
            "*graph*: the same %d calls captured in one CUDA graph and replayed (no host in the "
            "way; '-' where capture failed). speedup > 1 means the symm.triton kernel is faster. "
            "Each example's check is listed in its docstring." % (args.iters, args.iters + args.iters % 2),
            ""] + rows
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(text) + "\n")
    print("wrote", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None, help="markdown file for the results (PE 0 writes it)")
    ap.add_argument("--quick", action="store_true", help="small shapes")
    ap.add_argument("--only", default="", help="comma-separated example names")
    ap.add_argument("--iters", type=int, default=30)
    args = ap.parse_args()
    shapes = QUICK if args.quick else FULL
    names = [n for n in shapes if not args.only or n in args.only.split(",")]
    env = C.setup()
    ok = True
    try:
        for name in names:
            mod = importlib.import_module(name)
            res = mod.run(**shapes[name], iters=args.iters, bench=True)
            ok &= res["ok"]
        if args.out and env.rank == 0:
            write_table(args.out, env, args)
    finally:
        C.teardown()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
