"""What every example shares: set-up under torchrun, timing, reporting.

Each example is run as `torchrun --nproc-per-node N examples/triton/<name>.py`
and imported by tests/python/test_gpu_examples.py, which calls its run().
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
if os.path.isdir(os.path.join(REPO, "python", "symm")):
    sys.path.insert(0, os.path.join(REPO, "python"))  # a source checkout

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import symm  # noqa: E402
import symm.triton as st  # noqa: E402


@triton.jit
def arrive_and_wait(ctx, counter, target):
    """Add 1 to `counter` on every PE, released once after this program's
    earlier stores, then wait until this PE's copy reaches `target`
    (acquire): a barrier between the programs of one index across PEs.

    One release for all PEs: after a program barrier, thread 0 issues one
    system-scope fence (symm fence: fence.acq_rel.sys, which through the
    barrier covers every thread's earlier stores) and then relaxed
    system-scope adds (symm atomic_add: red.relaxed.sys), instead of a
    release add per PE."""
    me = st.my_pe(ctx)
    npes = st.n_pes(ctx)
    tl.debug_barrier()
    if st.tid() == 0:
        st.raw.fence(ctx)
        for i in range(0, npes):
            st.raw.atomic_add_u64(ctx, counter, 1, (me + i) % npes)
    tl.debug_barrier()
    st.signal_wait_until(ctx, counter, st.CMP_GE, target)


@triton.jit
def vec_ptrs(base, offs, VEC: tl.constexpr, BLOCK: tl.constexpr):
    """base + offs, telling Triton that each contiguous run of BLOCK pointers
    starts 16-byte aligned, so each thread moves 16 B per load/store.
    Pointers from peer_ptr come out of an extern call, about which Triton
    knows nothing, and would otherwise be accessed element by element. Only
    when the host checked the alignment (VEC: every offset a multiple of
    16 B; symmetric allocations are). The hint must sit on the op that makes
    the pointers (here, the add), not on a function argument."""
    ptrs = base + offs
    if VEC:
        ptrs = tl.max_contiguous(tl.multiple_of(ptrs, 16), BLOCK)
    return ptrs


@triton.jit
def next_epoch(gen):
    """This program's call count, kept on the GPU in its own word of `gen`
    (store it back with end_epoch): signal targets computed from it stay
    right when the launch is replayed from a CUDA graph, where a host-side
    count would be frozen at its capture-time value."""
    return tl.load(gen) + 1


@triton.jit
def end_epoch(gen, epoch):
    tl.store(gen, epoch)


def num_sms(device):
    """Programs a grid that waits on peers may have: one per SM of this PE's
    share of the GPU (all of it unless PEs share the GPU; symm.sm_share)."""
    return symm.sm_share()


def vec_ok(*elems):
    """True when every element offset is a multiple of 16 bytes (bf16: 8)."""
    return all(e % 8 == 0 for e in elems)


class PreparedPerInput:
    """Kernel launches whose arguments are fixed but for one input tensor:
    `make(inp)` (symm.triton.prepare calls) runs once per input tensor and
    its result is kept until another one comes, so repeated calls on the
    same tensor skip Triton's per-call argument handling. get(inp) returns
    what make built; calling the object launches it (make built one)."""

    def __init__(self, make):
        self._make = make
        self._prepared = self._input = None

    def get(self, inp):
        if self._prepared is None or self._input is not inp:
            self._prepared = self._make(inp)
            self._input = inp
        return self._prepared

    def __call__(self, inp):
        self.get(inp)()


class TiledPush:
    """A persistent-grid kernel that moves `numel` elements per block in tiles
    of BLOCK (about one program per SM, each looping over tiles i, i+P...)
    into a symmetric output of `out_numel` elements, with per-program
    counters in the heap and a per-program call count on the GPU; launched
    through a prepared launch per input tensor. The shape of all_gather,
    all_to_all and ring_shift, whose kernels take (ctx, out, inp, numel,
    *counters, gen, VEC=, BLOCK=)."""
    NUM_WARPS = 8
    BLOCK = 2 * NUM_WARPS * 32 * 8              # 2 x 16 B of bf16 per thread

    def __init__(self, env, kernel, numel, out_numel, ncounters=2, dtype=torch.bfloat16):
        self.env, self.numel = env, numel
        self.grid = (max(1, min(triton.cdiv(numel, self.BLOCK), num_sms(env.device))),)
        self.vec = vec_ok(numel)
        self.out = symm.zeros((out_numel,), dtype)
        self.counters = [symm.zeros((self.grid[0],), torch.int64) for _ in range(ncounters)]
        self.gen = torch.zeros((self.grid[0],), dtype=torch.int64, device=env.device)
        self._launch = PreparedPerInput(
            lambda inp: st.prepare(kernel, self.grid, env.ctx, self.out, inp, numel, *self.counters,
                                   self.gen, VEC=self.vec, BLOCK=self.BLOCK, num_warps=self.NUM_WARPS))
        symm.barrier()

    def __call__(self, inp):
        self._launch(inp)
        return self.out

    def close(self):
        torch.cuda.synchronize()
        symm.barrier()
        for t in self.counters + [self.out]:
            symm.free_tensor(t)


def bench_symm_c(collective, inp, out_shape, iters=50):
    """Time symm's CUDA C stream collective `collective(out, inp)` on
    symmetric copies of the buffers (its fast path), for comparison."""
    c_in, c_out = symm.tensor(inp.shape, inp.dtype), symm.tensor(out_shape, inp.dtype)
    c_in.copy_(inp)
    t = bench(lambda: collective(c_out, c_in), iters)
    torch.cuda.synchronize()
    symm.free_tensor(c_out)
    symm.free_tensor(c_in)
    return t


class Env:
    def __init__(self):
        self.rank = symm.my_pe()
        self.world = symm.n_pes()
        self.device = torch.device("cuda", symm.device())
        self.ctx = symm.ctx()
        self.shared = SHARED


class HostRef:
    """The torch.distributed calls the examples take their references from,
    on host copies over gloo: NCCL refuses two ranks on one GPU, which is how
    PEs share a GPU. Checks only; nothing here is timed."""
    ReduceOp = dist.ReduceOp

    @staticmethod
    def _gather(x):
        parts = [torch.empty_like(x, device="cpu") for _ in range(dist.get_world_size())]
        dist.all_gather(parts, x.detach().cpu().contiguous())
        return parts

    def all_gather(self, outs, x):
        for o, p in zip(outs, self._gather(x)):
            o.copy_(p)

    def all_gather_into_tensor(self, out, x):
        out.copy_(torch.cat([p.reshape(-1) for p in self._gather(x)]).view_as(out))

    def all_reduce(self, t, op=dist.ReduceOp.SUM):
        host = t.detach().cpu()
        acc = host.double() if host.is_floating_point() else host
        dist.all_reduce(acc, op=op)
        t.copy_(acc.to(host.dtype))

    def reduce_scatter_tensor(self, out, x):
        full = x.detach().cpu().reshape(-1).clone()
        self.all_reduce(full)
        n = out.numel()
        out.copy_(full[dist.get_rank() * n:(dist.get_rank() + 1) * n].view_as(out))

    def all_to_all_single(self, out, x, out_splits=None, in_splits=None):
        w, r = dist.get_world_size(), dist.get_rank()
        splits = [None] * w
        dist.all_gather_object(splits, list(in_splits) if in_splits else [x.shape[0] // w] * w)
        rows = max(sum(s) for s in splits)
        padded = torch.zeros((rows,) + tuple(x.shape[1:]), dtype=x.dtype)
        padded[:x.shape[0]] = x.detach().cpu()
        parts = self._gather(padded)
        got = [parts[p][sum(splits[p][:r]):sum(splits[p][:r + 1])] for p in range(w)]
        out.copy_(torch.cat(got).view_as(out))


def setup():
    """symm, then torch.distributed for the references: NCCL where every PE
    has its own GPU, else gloo with host references (HostRef); symm and the
    group are made once per process (a test harness may have made them)."""
    global REF, SHARED
    if not symm.initialized():
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local % torch.cuda.device_count())
        # a wait that can never finish stops its kernel with a message
        # (PE, address, values) instead of hanging every PE
        os.environ.setdefault("SYMM_WAIT_TIMEOUT", "30")
        symm.init()
    shares = symm.host_allgather(symm.gpu_pes().to_bytes(4, "little"))
    SHARED = max(int.from_bytes(b, "little") for b in shares) > 1
    if not dist.is_initialized():
        dist.init_process_group("gloo" if SHARED else "nccl")
    REF = dist if dist.get_backend() == "nccl" else HostRef()
    return Env()


# Where the references come from (torch.distributed over NCCL, or HostRef),
# and whether PEs share a GPU; set by setup().
REF = dist
SHARED = False


def bench_ref(fn, iters=50):
    """bench() of a torch.distributed reference, or None without NCCL (PEs
    sharing a GPU): the report says n/a."""
    return bench(fn, iters) if REF is dist else None


def teardown():
    torch.cuda.synchronize()
    if symm.initialized():
        symm.finalize()
    if dist.is_initialized():
        dist.destroy_process_group()


def parse(description, **defaults):
    ap = argparse.ArgumentParser(description=description)
    for k, v in defaults.items():
        # torchrun's own parser takes --m and --n as abbreviations of its
        # options (--max-restarts, --nnodes...) and stops: single-letter
        # sizes also answer to --M/--K/--N, which it leaves to the script.
        names = ["--" + k.upper()] if len(k) == 1 else []
        ap.add_argument(*names, "--" + k.replace("_", "-"), dest=k, type=type(v), default=v)
    ap.add_argument("--iters", type=int, default=50, help="timed iterations")
    ap.add_argument("--no-bench", action="store_true", help="check only")
    return ap.parse_args()


def _in_step():
    """Every earlier GPU op finished on every PE, and all PEs got here."""
    torch.cuda.synchronize()
    dist.barrier()
    torch.cuda.synchronize()


def _slowest(us):
    """The slowest PE's value: what a user waits for."""
    t = torch.tensor([us], dtype=torch.float64, device="cpu" if SHARED else "cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def _window_us(enqueue, calls, host=None):
    """GPU time per call of `calls` calls that enqueue() puts on the stream
    back to back, between one pair of CUDA events; the host's time per call
    to enqueue them is appended to `host` (a list) when given."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    t0 = time.perf_counter()
    enqueue()
    if host is not None:
        host.append((time.perf_counter() - t0) * 1e6 / calls)
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1000.0 / calls


def time_us(fn, iters=50, warmup=5, repeats=5):
    """Stream time of fn() in microseconds: after warm-up and a barrier,
    `iters` calls are enqueued back to back between one event pair; the
    median per-call time of `repeats` such windows, slowest PE. Host launch
    cost still counts where the GPU finishes a call before the host has
    enqueued the next one (short kernels); time_graph_us removes it."""
    for _ in range(warmup):
        fn()

    def enqueue():
        for _ in range(iters):
            fn()
    samples, host = [], []
    for _ in range(repeats):
        _in_step()
        samples.append(_window_us(enqueue, iters, host))
    global LAST_HOST_US
    LAST_HOST_US = _slowest(statistics.median(host))
    return _slowest(statistics.median(samples))


# the host's time per call (us) to enqueue the calls of the last time_us(),
# slowest PE: where it nears the stream time, the host is the bottleneck
LAST_HOST_US = None


GRAPHS = os.environ.get("SYMM_EXAMPLES_GRAPHS", "1") != "0"


def time_graph_us(fn, iters=50, repeats=5):
    """GPU time of fn() with no host in the way: `iters` calls (rounded up to
    an even count, so ops that alternate buffers by call parity replay in
    step) are captured into one CUDA graph, which is replayed `repeats` times
    after a barrier each; median per-call time, slowest PE. fn must have run
    before (compiled, communicators set up). None on every PE when any PE
    could not capture (the reason is printed), or with
    SYMM_EXAMPLES_GRAPHS=0."""
    if not GRAPHS:
        return None
    calls = iters + iters % 2
    graph, err = torch.cuda.CUDAGraph(), None
    _in_step()
    try:
        # thread_local: the NCCL watchdog thread may query events meanwhile
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            for _ in range(calls):
                fn()
    except Exception as e:  # noqa: BLE001 - reported, and the column stays empty
        err = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
    if not all_ok(err is None):
        if err is not None:
            print("PE %d: CUDA graph capture failed (%s); no graph time" % (symm.my_pe(), err),
                  flush=True)
        torch.cuda.synchronize()
        return None
    _in_step()
    graph.replay()                      # warm-up replay
    samples = []
    for _ in range(repeats):
        _in_step()
        samples.append(_window_us(graph.replay, calls))
    us = _slowest(statistics.median(samples))
    del graph
    return us


def bench(fn, iters=50):
    """(stream time, CUDA graph time) of fn() in microseconds, the same
    method for every party compared (time_us, time_graph_us)."""
    eager = time_us(fn, iters)
    return (eager, time_graph_us(fn, iters))


def all_ok(ok):
    """True only if every PE's check passed."""
    t = torch.tensor([0 if ok else 1], device="cpu" if SHARED else "cuda")
    dist.all_reduce(t)
    return t.item() == 0


def report(env, name, checked, ok, timings=()):
    """One line per example on PE 0: what was checked, and each party's time
    (label, (stream us, graph us)) with its ratio to the first party's (the
    symm.triton kernel): `speedup xR` means the symm.triton version is R
    times faster than that one, by the same method."""
    if env.rank != 0:
        return
    where = ", sharing one GPU: not a measure of NVLink" if env.shared else ""
    line = "%s [%d PEs%s]: %s: %s" % (name, env.world, where, checked, "OK" if ok else "FAILED")
    why = "NCCL refuses PEs that share a GPU" if env.shared else "no NCCL group"
    if timings and timings[0][1] is not None:  # timed: say which party could not be
        line += "".join(" | %s: n/a (%s)" % (k, why) for k, v in timings[1:] if v is None and "NCCL" in k)
    timings = [(k, v if isinstance(v, tuple) else (v, None)) for k, v in timings
               if v is not None]
    base = timings[0][1] if timings else (None, None)
    for i, (label, (us, gus)) in enumerate(timings):
        line += " | %s: stream %s" % (label, _fmt(us))
        if i and us and base[0]:
            line += " (x%.2f)" % (us / base[0])
        line += ", graph %s" % _fmt(gus)
        if i and gus and base[1]:
            line += " (x%.2f)" % (gus / base[1])
    print(line, flush=True)
    RESULTS.append({"name": name, "pes": env.world, "checked": checked, "ok": ok,
                    "shared": env.shared, "timings": timings})


def _fmt(us):
    return "-" if us is None else "%.1f us" % us


RESULTS = []  # what report() printed, for run_all.py


def main(run, description, **defaults):
    args = parse(description, **defaults)
    setup()
    try:
        res = run(**{k: getattr(args, k) for k in defaults}, iters=args.iters, bench=not args.no_bench)
    finally:
        teardown()
    sys.exit(0 if res["ok"] else 1)
