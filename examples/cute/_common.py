"""What the CuTe DSL examples (and the library's GPU check) share: set-up
under torchrun, the kernels (cubins or just-in-time), timing and tables.

Kernels come from examples/cute/kernels.py and tests/python/cute_kernels.py:
with --cubins DIR (or SYMM_CUTE_CUBINS) the cubins built ahead of time by
examples/cute/build_cubins.py are launched through symm.cubin (no CuTe DSL
on this machine); without it the same Kernels are compiled just in time
with CuTe DSL for this GPU. Everything else is the same code. The CUDA C
twins of the collective kernels (c_twins.cu: c_<kernel>) come from the same
folder, or are compiled here by nvcc; without them their columns say "-".
"""
import argparse
import os
import statistics
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
if os.path.isdir(os.path.join(REPO, "python", "symm")):
    sys.path.insert(0, os.path.join(REPO, "python"))  # a source checkout

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import symm  # noqa: E402
import symm.cubin  # noqa: E402
from symm import timing  # noqa: E402

SOURCES = (os.path.join(HERE, "kernels.py"), os.path.join(HERE, "hopper_gemm.py"),
           os.path.join(REPO, "tests", "python", "cute_kernels.py"))


class Env:
    """This PE: rank, world, device, seed, the kernels, and whether PEs share a GPU."""

    def __init__(self, kernels, rank, world, device, seed, shared, iters):
        self.k, self.rank, self.world, self.device = kernels, rank, world, device
        self.seed, self.shared, self.iters = seed, shared, iters
        self.ctx = symm.ctx()
        self._it = 0
        self._nccl = None

    def next_seed(self):
        """A fresh seed per call, the same on every PE."""
        self._it += 1
        return self.seed * 1000003 + self._it

    def gen(self, seed, pe):
        g = torch.Generator(device=self.device)
        g.manual_seed(seed * 131 + pe)
        return g

    def log(self, *a):
        if self.rank == 0:
            print(*a, flush=True)


def parser(doc):
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--cubins", default=os.environ.get("SYMM_CUTE_CUBINS"),
                    help="folder of cubins built by build_cubins.py (default: compile with CuTe DSL)")
    ap.add_argument("--iters", type=int, default=5, help="checked iterations (fresh data each)")
    ap.add_argument("--quick", action="store_true", help="fewer sizes and timing repetitions")
    ap.add_argument("--out", help="append the result table (markdown) to this file")
    ap.add_argument("--shape", help="GEMM examples: comma-separated shapes among square, llm, small "
                    "(default square,llm; small with --quick or where PEs share a GPU)")
    ap.add_argument("--variants", help="gemm_rs: comma-separated among ce (copy engines, one side stream), "
                    "ce-owners (a side stream per owner), ce-noprefetch (ce without the L2 prefetch of the "
                    "partials), push (SM stores to the owner) (default ce,push)")
    ap.add_argument("--timeline", action="store_true", help="ag_gemm, gemm_rs ce: log one call's schedule per "
                    "PE (when each piece became ready to copy and landed; CUDA events on the side stream)")
    return ap


def setup(args):
    """torch on this PE's GPU, a gloo group (NCCL refuses two ranks on one
    GPU), symm, a common seed, and the kernels."""
    local = int(os.environ.get("LOCAL_RANK", "0"))
    ngpu = torch.cuda.device_count()
    if ngpu == 0:
        raise SystemExit("SKIP: no CUDA device")
    torch.cuda.set_device(local % ngpu)
    torch.empty(1, device="cuda")  # the CUDA context, before cubins load into it
    os.environ.setdefault("SYMM_WAIT_TIMEOUT", "15")
    if "WORLD_SIZE" not in os.environ:
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                          MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("MASTER_PORT", "29517"))
    dist.init_process_group("gloo")
    symm.init()
    seed = int.from_bytes(symm.host_broadcast(os.urandom(4), 0), "little") % (1 << 30)
    world = symm.n_pes()
    shared = world > ngpu
    kern = load_kernels(args.cubins)
    return Env(kern, symm.my_pe(), world, torch.device("cuda", local % ngpu), seed, shared,
               args.iters)


def load_kernels(cubins=None):
    """name -> launch(grid, *args, stream=None) for every Kernel of SOURCES:
    their cubins in `cubins` (symm.cubin, no CuTe DSL needed), else the
    Kernels compiled just in time for this GPU with CuTe DSL."""
    if cubins:
        found = symm.cubin.load(cubins)
    else:
        from symm.cute.aot import _load_source, kernels_of
        found = {k.name: k.compile() for src in SOURCES for k in kernels_of(_load_source(src))}
        found.update(_jit_twins())

    def launcher(k):
        return lambda grid, *a, stream=None: k(*a, grid=grid, stream=stream)
    return {name: launcher(k) for name, k in found.items()}


def _jit_twins():
    """The C twins compiled by nvcc for this GPU (native backend), or none,
    with the reason on PE 0's log."""
    import tempfile
    import c_twins
    if symm.backend() != "native":
        return {}
    major, minor = torch.cuda.get_device_capability()
    folder = tempfile.mkdtemp(prefix="symm-c-twins-")
    try:
        c_twins.build(folder, "%d%d" % (major, minor))
    except (RuntimeError, OSError) as e:
        if symm.my_pe() == 0:
            print("no CUDA C twins: %s" % str(e).splitlines()[0], flush=True)
        return {}
    return symm.cubin.load(folder)


def finish():
    torch.cuda.synchronize()
    symm.barrier()
    symm.finalize()
    dist.destroy_process_group()


GRAPH_CALLS = 10  # calls per CUDA graph replay


def _sync_time(fn, reps):
    """Median of reps timings (us) of fn(), each between host barriers of
    every PE (so the PEs start together), CUDA events around it."""
    # the slowest PE's median is the collective's time
    return timing.slowest(statistics.median([_window_us(fn, 1) for _ in range(reps)]))


def time_us(fn, reps=20, warmup=3, graph=True):
    """Time of one fn() call in microseconds. graph: GRAPH_CALLS calls
    captured into a CUDA graph (torch's capture stream: the launches of
    symm.cubin, CuTe DSL and symm's collectives are captured alike), the
    median replay divided by GRAPH_CALLS, so the host's launch path is left
    out. Else (eager) one call per timing, launch included."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    if not graph:
        return _sync_time(fn, reps)
    g, err = timing.capture(fn, GRAPH_CALLS)
    if g is None:
        raise RuntimeError("CUDA graph capture failed: " + err)
    g.replay()
    torch.cuda.synchronize()
    t = _sync_time(g.replay, reps) / GRAPH_CALLS
    del g
    return t


def stream_us(fn, calls=10, reps=5, warmup=2):
    """Time of one fn() call in microseconds on a plain stream: `calls`
    calls enqueued back to back between one pair of CUDA events, the median
    of `reps` such windows (each after a host barrier of every PE), the
    slowest PE's. The host's launch path counts only where the GPU finishes
    a call before the host has enqueued the next one."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    return timing.slowest(statistics.median([_window_us(fn, calls) for _ in range(reps)]))


def graph_stream_us(fn, reps):
    """{"graph": us, "stream": us} of fn(): GRAPH_CALLS calls replayed from a
    CUDA graph (time_us), and back-to-back calls on a plain stream
    (stream_us). The same method for every party compared. A graph that
    could not be captured on some PE gives the reason instead of a time."""
    graph = _capture(fn)
    g = graph if isinstance(graph, str) else _sync_time(graph.replay, reps) / GRAPH_CALLS
    del graph
    return {"graph": g, "stream": stream_us(fn, GRAPH_CALLS, reps)}


def _capture(fn):
    """fn() warmed up, then GRAPH_CALLS calls captured in a CUDA graph and
    replayed once; the graph, or (when some PE could not capture it) the
    reason as a string, on every PE alike."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    graph, err = timing.capture(fn, GRAPH_CALLS)
    if not check_all_pes(err is None):     # every PE replays, or none
        return "n/a: graph capture failed (%s)" % (err or "on another PE")
    graph.replay()
    torch.cuda.synchronize()
    return graph


def _window_us(fn, calls):
    """One timing window on every PE (after a host barrier): fn() called
    `calls` times between CUDA events, us per call on this PE."""
    symm.barrier()
    return timing.window_us(fn, calls)


def paired_us(fns, reps):
    """{name: {"graph": us, "stream": us}} of every fn of fns {name: fn},
    timed in turns: each repetition times every party once (a graph replay
    of GRAPH_CALLS calls, then GRAPH_CALLS calls on a plain stream), the
    order rotating, so a drift of the GPUs' clocks over the run (they slow
    down as they warm up) weighs on every party alike instead of on whichever
    was timed last. The median per party, the slowest PE's; a graph that
    could not be captured on some PE gives the reason instead of a time."""
    names = list(fns)
    graphs = {}
    for name in names:
        graphs[name] = _capture(fns[name])
    times = {(n, mode): [] for n in names for mode in ("graph", "stream")}
    for r in range(reps):
        k = r % len(names)
        for n in names[k:] + names[:k]:
            if not isinstance(graphs[n], str):
                times[(n, "graph")].append(_window_us(graphs[n].replay, 1) / GRAPH_CALLS)
            times[(n, "stream")].append(_window_us(fns[n], GRAPH_CALLS))
    keys = sorted(times)
    mine = [statistics.median(times[key]) if times[key] else float("nan") for key in keys]
    # host_allgather wants the same length on every PE: fixed-width doubles
    every = [struct.unpack("<%dd" % len(keys), x) for x in symm.host_allgather(struct.pack("<%dd" % len(keys), *mine))]
    out = {n: {} for n in names}
    for i, (n, mode) in enumerate(keys):
        if mode == "graph" and isinstance(graphs[n], str):
            out[n][mode] = graphs[n]
        else:
            out[n][mode] = max(v[i] for v in every)
    graphs.clear()
    return out


# The overlap bars (issue: fused GEMM + communication): fused at most
# FUSED_OVER_GEMM x the GEMM alone at the same per-PE shape, and at least
# SPEEDUP_OVER_UNFUSED x faster than torch.matmul + NCCL, in graphs and on a
# plain stream. Measured figures only: a party that could not run says why.
FUSED_OVER_GEMM, SPEEDUP_OVER_UNFUSED = 1.10, 1.25
OVERLAP_HEADER = ("example", "M x N x K (per PE)", "check", "mode", "fused us", "GEMM alone us",
                  "fused / GEMM alone (<= %.2f)" % FUSED_OVER_GEMM, "torch.matmul + NCCL us",
                  "speedup (>= %.2f)" % SPEEDUP_OVER_UNFUSED, "bars")


def us(t):
    """A time cell: us with one decimal, or the reason there is none."""
    return "%.1f" % t if isinstance(t, float) else str(t)


def rate(t, nbytes):
    """GB/s of nbytes moved in t us (a time or the reason there is none)."""
    return "%.0f GB/s for %.1f MiB out" % (nbytes / t / 1e3, nbytes / 2**20) if isinstance(t, float) and t > 0 \
        else "-"


def overlap_rows(name, mnk, good, fused, alone, unfused):
    """Table rows (graph, stream) of a fused example: fused, alone and
    unfused are {"graph": us, "stream": us} (a time may be a string saying
    why there is none; unfused may be such a string for both modes)."""
    m, n, k = mnk
    rows = []
    for mode in ("graph", "stream"):
        f, g = fused[mode], alone[mode]
        u = unfused[mode] if isinstance(unfused, dict) else unfused
        num = [isinstance(x, float) for x in (f, g, u)]
        over = f / g if num[0] and num[1] else None
        speed = u / f if num[0] and num[2] else None
        verdict = []
        if over is None:
            verdict.append("no fused or GEMM-alone time")
        elif over > FUSED_OVER_GEMM:
            verdict.append("fused/GEMM %.2f > %.2f" % (over, FUSED_OVER_GEMM))
        if speed is None:
            verdict.append("no torch + NCCL time")
        elif speed < SPEEDUP_OVER_UNFUSED:
            verdict.append("speedup %.2f < %.2f" % (speed, SPEEDUP_OVER_UNFUSED))
        show = [("%.1f" % x) if isinstance(x, float) else str(x) for x in (f, g, u)]
        rows.append((name, "%dx%dx%d" % (m, n, k), "ok" if good else "WRONG", mode, show[0], show[1],
                     "-" if over is None else "%.2f" % over, show[2], "-" if speed is None else "%.2f" % speed,
                     "WRONG" if not good else ("pass" if not verdict else "miss: " + "; ".join(verdict))))
    return rows


def gemm_shapes(env, args):
    """The GEMM examples' shape names for this run."""
    if args.shape:
        return args.shape.split(",")
    return ["small"] if args.quick or env.shared else ["square", "llm"]


def gemm_grid(m, n, bm=128, bn=256):
    """CTAs of a persistent hopper_gemm.py grid: one per tile, at most one
    per SM of this PE's share."""
    return max(1, min((m // bm) * (n // bn), symm.sm_share()))


def close_to(out, ref, atol=1e-2, rtol=2e-2):
    """(every element within atol + rtol |ref|, the largest difference)."""
    d = (out.float() - ref.float()).abs()
    return bool((d <= atol + rtol * ref.float().abs()).all().item()), d.max().item()


def title(env, what):
    backend = symm.backend()  # cubins run only on the backend they were built for
    if env.shared:
        return ("%s: %d PEs sharing one GPU (time-sliced or under MPS; not a measure of NVLink), "
                "backend %s" % (what, env.world, backend))
    return "%s: %d PEs, one GPU each, backend %s" % (what, env.world, backend)


def table(env, what, header, rows, out=None):
    """Print (and append to `out`) a markdown table on PE 0."""
    if env.rank != 0:
        return
    lines = ["", "### " + title(env, what), "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    text = "\n".join(lines)
    print(text, flush=True)
    if out:
        with open(out, "a") as f:
            f.write(text + "\n")


def nccl_group(env):
    """torch.distributed's NCCL group over every PE, for the GEMM examples'
    torch baseline: (group, None), or (None, why) where PEs share a GPU (NCCL
    refuses two ranks on one) or NCCL did not come up on every PE. Made once,
    by every PE (the default group stays gloo, which works everywhere)."""
    if env.shared:
        return None, "PEs share a GPU"
    if env._nccl is None:
        group, why = None, None
        try:
            group = dist.new_group(backend="nccl")
            probe = torch.ones(1, device=env.device)
            dist.all_reduce(probe, group=group)
            good = int(probe.item()) == env.world
        except Exception as e:  # noqa: BLE001 - the column says why instead
            good, why = False, "NCCL: %s" % str(e).splitlines()[0][:60]
        if not check_all_pes(good):
            group, why = None, why or "NCCL failed on another PE"
        env._nccl = (group, why)
    return env._nccl


def time_dist(env, args, fn):
    """The eager time (us) of fn(group) on the NCCL group, or the reason there is none."""
    group, why = nccl_group(env)
    if group is None:
        return "n/a: " + why
    return time_us(lambda: fn(group), 5 if args.quick else 20, graph=False)


def check_all_pes(ok):
    """True only if `ok` on every PE."""
    return all(x == b"1" for x in symm.host_allgather(b"1" if ok else b"0"))


def main(run, doc):
    """Run one example as a script under torchrun: `run(env, args)` returns
    (title, header, rows, ok)."""
    args = parser(doc).parse_args()
    env = setup(args)
    what, header, rows, ok = run(env, args)
    table(env, what, header, rows, args.out)
    finish()
    if not ok:
        raise SystemExit(1)


def check(env, call, fill, verify):
    """env.iters times: fill(seed) the inputs, call(), verify(seed) on every
    PE (a fresh seed each time). True only if right on every PE."""
    good = True
    for _ in range(env.iters):
        s = env.next_seed()
        fill(s)
        torch.cuda.synchronize()
        symm.barrier()
        call()
        torch.cuda.synchronize()
        symm.barrier()
        good = bool(verify(s)) and good
    return check_all_pes(good)


def check_and_time(env, args, call, fill, verify, base=None, graph=False):
    """check() call, then the median time of call() and of the baseline
    base() (time_us, graph or eager). Returns (ok on every PE, us, baseline
    us or None)."""
    good = check(env, call, fill, verify)
    reps = 5 if args.quick else 20
    t = time_us(call, reps, graph=graph)
    tb = time_us(base, reps, graph=graph) if base is not None else None
    return good, t, tb


def run_each(env, args, calls, fill, verify, base, size):
    """check_and_time each of calls {name: call} against one baseline,
    eagerly (kernels whose epoch is an argument cannot replay from a graph);
    returns (ok, table rows)."""
    ok, rows = True, []
    for name, call in calls.items():
        good, t, tb = check_and_time(env, args, call, fill, verify, base)
        ok &= good
        rows.append(row(name, size, good, t, tb))
    return ok, rows


COLL_HEADER = ("kernel", "bytes", "check", "CuTe us", "C twin us", "ratio (twin / CuTe)", "library us",
               "ratio (library / CuTe)", "library call", "CuTe eager us", "library eager us")


def run_coll(env, args, calls, fill, verify, size):
    """Check each CuTe kernel of calls {name: ((grid, *args), (label, base))},
    and its CUDA C twin c_<name> (c_twins.cu: same algorithm, grid and
    arguments) where loaded, and time them from CUDA graphs; the library's
    stream collective base() is timed beside them (graphs and eagerly,
    launch included), once per label. The ratios are C time / CuTe time.
    Returns (ok, table rows)."""
    ok, rows, done = True, [], {}
    reps = 5 if args.quick else 20
    for name, ((grid, *kargs), (label, base)) in calls.items():
        call = (lambda k=env.k[name], g=grid, a=kargs: k(g, *a))
        twin = env.k.get("c_" + name)
        twin = twin and (lambda k=twin, g=grid, a=kargs: k(g, *a))
        good = check(env, call, fill, verify)
        twin_good = twin is None or check(env, twin, fill, verify)
        ok &= good and twin_good
        t, te = time_us(call, reps), time_us(call, reps, graph=False)
        tt = time_us(twin, reps) if twin else None
        if label not in done:
            base()
            algo = symm.last_algo()
            done[label] = (time_us(base, reps), time_us(base, reps, graph=False),
                           "%s (%s)" % (label, algo) if algo else label)
        tb, tbe, what = done[label]
        verdict = "ok" if good and twin_good else "WRONG" if not good else "C twin WRONG"
        rows.append((name, size, verdict, "%.1f" % t, "%.1f" % tt if tt else "-",
                     "%.2f" % (tt / t) if tt else "-", "%.1f" % tb, "%.2f" % (tb / t), what,
                     "%.1f" % te, "%.1f" % tbe))
    return ok, rows


def row(name, nbytes, good, t, tb):
    return (name, nbytes, "ok" if good else "WRONG", "%.1f" % t,
            "%.1f" % tb if tb is not None else "-", "%.2f" % (tb / t) if tb else "-")


class Epochs:
    """Per-kernel call counters (the epoch a call's signals carry)."""

    def __init__(self):
        self.n = {}

    def next(self, name):
        self.n[name] = self.n.get(name, 0) + 1
        return self.n[name]


def _cdiv(a, b):
    return -(-a // b)


# The stream collectives' block choice (src/coll/coll_choose.c), mirrored so
# that the CuTe kernels and the device-callable collectives run the grid the
# CUDA C kernel of the same size runs: region_blocks (packet and one-shot:
# one block per SYMM__COLL_REGION_UNITS 16-byte units) and direct_blocks
# (one per 16 KiB, at most SYMM__COLL_DIRECT_BLOCKS, or
# SYMM__COLL_MOVE_BLOCKS for the all-gather), never more than this PE's
# share of SMs (a grid that waits on peers must fit on the GPU at once).
REGION_UNITS, DIRECT_BLOCKS, MOVE_BLOCKS = 128, 64, 128
DEV_PACKET_MAX = 128 << 10  # SYMM__COLL_DEV_PACKET_MAX: device collectives' packet path
DEV_NBMAX = 32              # SYMM__COLL_WS_NBMAX: block slots of the device packet path


def _clamp(nb, cap):
    return max(1, min(cap, symm.sm_share(), nb))


def coll_grid(nbytes):
    """CTAs of the CuTe collectives (kernels.py) for nbytes per PE: one per
    REGION_UNITS 16-byte vectors (the C one-shot/packet kernels' choice), at
    most one per SM of this PE's share, so the whole grid is resident while
    it waits on its peers."""
    return _clamp(_cdiv(nbytes, 16 * REGION_UNITS), symm.sm_share())


def device_grid(nbytes, direct_bytes=None, move=False):
    """CTAs of a device-callable collective (all_reduce_grid, ...) on nbytes
    per PE (its `count` in bytes), as the stream collective picks them for
    the same size: up to DEV_PACKET_MAX the packet path's (one per
    REGION_UNITS 8-byte words, at most its DEV_NBMAX slots), above it the
    direct kernels' (one per 16 KiB of direct_bytes, default nbytes)."""
    if nbytes <= DEV_PACKET_MAX:
        return _clamp(_cdiv(nbytes, 8 * REGION_UNITS), DEV_NBMAX)
    return _clamp(_cdiv(nbytes if direct_bytes is None else direct_bytes, 16384),
                  MOVE_BLOCKS if move else DIRECT_BLOCKS)


def data(env, seed, pe, n, dtype=torch.float32, integer=False):
    """PE pe's input for a seed (every PE can rebuild every PE's input)."""
    g = env.gen(seed, pe)
    if integer:
        return torch.randint(-8, 8, (n,), generator=g, device=env.device).to(dtype)
    return torch.randn(n, generator=g, device=env.device).to(dtype)
