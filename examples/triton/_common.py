"""What every example shares: set-up under torchrun, timing, reporting.

Each example is run as `torchrun --nproc-per-node N examples/triton/<name>.py`
and imported by tests/python/test_gpu_examples.py, which calls its run().
"""
import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
if os.path.isdir(os.path.join(REPO, "python", "symm")):
    sys.path.insert(0, os.path.join(REPO, "python"))  # a source checkout

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import triton  # noqa: E402

import symm  # noqa: E402
import symm.triton as st  # noqa: E402


@triton.jit
def arrive_and_wait(ctx, counter, target):
    """Add 1 to `counter` on every PE (a release, so this program's earlier
    stores come first), then wait until this PE's copy reaches `target`
    (acquire): a barrier between the programs of one index across PEs."""
    me = st.my_pe(ctx)
    npes = st.n_pes(ctx)
    for i in range(0, npes):
        st.signal_op(ctx, counter, 1, st.SIGNAL_ADD, (me + i) % npes)
    st.signal_wait_until(ctx, counter, st.CMP_GE, target)


class Env:
    def __init__(self):
        self.rank = symm.my_pe()
        self.world = symm.n_pes()
        self.device = torch.device("cuda", symm.device())
        self.ctx = symm.ctx()


def setup():
    """torch.distributed (NCCL, for the reference) and symm, once per process."""
    if not symm.initialized():
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        if not dist.is_initialized():
            dist.init_process_group("nccl")
        symm.init()
    return Env()


def teardown():
    torch.cuda.synchronize()
    if symm.initialized():
        symm.finalize()
    if dist.is_initialized():
        dist.destroy_process_group()


def parse(description, **defaults):
    ap = argparse.ArgumentParser(description=description)
    for k, v in defaults.items():
        ap.add_argument("--" + k.replace("_", "-"), type=type(v), default=v)
    ap.add_argument("--iters", type=int, default=50, help="timed iterations")
    ap.add_argument("--no-bench", action="store_true", help="check only")
    return ap.parse_args()


def time_us(fn, iters=50, warmup=5):
    """Median time of fn() in microseconds (CUDA events, all PEs in step)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    dist.barrier()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0)
    # the slowest PE's median is what a user waits for
    t = torch.tensor([statistics.median(times)], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def all_ok(ok):
    """True only if every PE's check passed."""
    t = torch.tensor([0 if ok else 1], device="cuda")
    dist.all_reduce(t)
    return t.item() == 0


def report(env, name, checked, ok, timings=()):
    """One line per example on PE 0: what was checked, and each timing with
    its ratio to the first (the symm.triton kernel): `speedup xR` means the
    symm.triton version is R times faster than that one."""
    if env.rank != 0:
        return
    line = "%s [%d PEs]: %s: %s" % (name, env.world, checked, "OK" if ok else "FAILED")
    timings = [(k, v) for k, v in timings if v is not None]
    for i, (label, us) in enumerate(timings):
        line += " | %s %.1f us" % (label, us)
        if i:
            line += " (speedup x%.2f)" % (us / timings[0][1])
    print(line, flush=True)
    RESULTS.append({"name": name, "pes": env.world, "checked": checked, "ok": ok,
                    "timings": timings})


RESULTS = []  # what report() printed, for run_all.py


def main(run, description, **defaults):
    args = parse(description, **defaults)
    setup()
    try:
        res = run(**{k: getattr(args, k) for k in defaults}, iters=args.iters, bench=not args.no_bench)
    finally:
        teardown()
    sys.exit(0 if res["ok"] else 1)
