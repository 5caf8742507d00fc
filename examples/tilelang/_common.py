"""What the TileLang examples share: set-up under torchrun, where kernels
come from (built ahead of time, or compiled by TileLang on this GPU),
reproducible random data, timing and the result rows.

An example module defines
    CONFIGS                  list of dicts (sizes); run_all.py and build.py use them all
    kernels(world, cfg)      {name: builder}: a builder returns the prim_func
                             (only builders import TileLang)
    run(env, ks, cfg, args)  checks against torch with fresh random data each
                             iteration, times, returns result rows
"""
import argparse
import hashlib
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
if os.path.isdir(os.path.join(REPO, "python", "symm")):
    sys.path.insert(0, os.path.join(REPO, "python"))  # a source checkout

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import symm  # noqa: E402
from symm import timing  # noqa: E402


class Env:
    def __init__(self):
        self.rank, self.world = symm.my_pe(), symm.n_pes()
        self.device = torch.device("cuda", symm.device())
        self.ctx = symm.ctx()
        self.local_world = int(os.environ.get("LOCAL_WORLD_SIZE", self.world))
        self.shared_gpu = torch.cuda.device_count() < self.local_world
        self.dist_backend = dist.get_backend() if dist.is_initialized() else None
        self.backend = symm.backend()
        self.iteration = 0


def setup():
    """symm, and torch.distributed for the reference timings: NCCL where every
    PE has a GPU of its own, gloo (CPU tensors) where PEs share a GPU, since
    NCCL refuses two ranks on one GPU."""
    os.environ.setdefault("SYMM_WAIT_TIMEOUT", "15")  # a lost signal stops the kernel with a message
    if not symm.initialized():
        local = int(os.environ.get("LOCAL_RANK", "0"))
        ngpu = torch.cuda.device_count()
        torch.cuda.set_device(local % ngpu)
        if "WORLD_SIZE" in os.environ and not dist.is_initialized():
            shared = ngpu < int(os.environ.get("LOCAL_WORLD_SIZE", os.environ["WORLD_SIZE"]))
            dist.init_process_group("gloo" if shared else "nccl")
        symm.init()
    return Env()


def teardown():
    torch.cuda.synchronize()
    if symm.initialized():
        symm.finalize()
    if dist.is_initialized():
        dist.destroy_process_group()


class Kernels:
    """Kernels by name: from a build folder (symm.cubin, no TileLang needed),
    or compiled here by TileLang (symm.tilelang.compile) from their builders.
    Both are called with the prim_func's arguments in order."""

    def __init__(self, aot_dir=None):
        self.aot_dir, self._cache = aot_dir, {}
        if aot_dir:
            import symm.cubin
            self._built = symm.cubin.load(aot_dir)

    def backends(self):
        """The symm backends the build folder's kernels were compiled for."""
        return sorted({k.entry.get("backend", "native") for k in self._built.values()}) if self.aot_dir else []

    @property
    def mode(self):
        return "aot" if self.aot_dir else "jit"

    def get(self, name, builder):
        if name not in self._cache:
            if self.aot_dir:
                if name not in self._built:
                    raise KeyError("%s is not in %s: rebuild with examples/tilelang/build.py" % (name, self.aot_dir))
                self._cache[name] = self._built[name]
            else:
                import symm.tilelang as sT
                self._cache[name] = sT.compile(builder())
        return self._cache[name]

    def module(self, mod, world, cfg):
        """{name: kernel} of an example module for this world and config."""
        return {n: self.get(n, b) for n, b in mod.kernels(world, cfg).items()}


def seed_of(*parts):
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:7], "little")


def rand(shape, dtype, device, *key):
    """Random data that any PE can reproduce from the key (for references
    computed without communication)."""
    g = torch.Generator(device=device)
    g.manual_seed(seed_of(*key))
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g, device=device, dtype=torch.float32).to(dtype)
    return torch.randint(0, 1 << 20, shape, generator=g, device=device, dtype=torch.int64).to(dtype)


def sync_all():
    """Every GPU op of every PE done."""
    torch.cuda.synchronize()
    symm.barrier()


def time_op(fn, iters, warmup=3):
    """Mean microseconds per call of fn() over `iters` back-to-back calls on
    this PE's stream, the slowest PE's figure (every PE starts together)."""
    for _ in range(warmup):
        fn()
    sync_all()
    return timing.slowest(timing.window_us(fn, iters))


def time_graph(fn, iters, repeats=5, warmup=3):
    """Median microseconds per call of fn() with no host in the way: after
    warm-up, `iters` calls are captured into one CUDA graph on a side stream
    (kernels launched through symm.cubin and symm's stream collectives both
    capture), which is replayed `repeats` times, every PE starting each
    replay together; the slowest PE's figure. fn must carry no host-side
    state from call to call (the graph replays the same arguments). None on
    every PE when any PE could not capture (the reason is printed)."""
    return time_graphs({"fn": fn}, iters, repeats, warmup)["fn"]


def time_graphs(fns, iters, repeats=5, warmup=3):
    """time_graph of several functions ({name: fn}) with their replays
    interleaved (the first, the second, ..., the first again), so that each
    sees the same clocks and temperature: a GEMM that runs for 20 ms heats
    the GPU and lowers its clock, and a comparison of two figures taken
    under different loads is not one. {name: us, or None}."""
    graphs = {}
    for name, fn in fns.items():
        for _ in range(warmup):
            fn()
        sync_all()
        graph, err = timing.capture(fn, iters)
        if all_ok(err is None):
            graphs[name] = graph
        elif err is not None:
            print("PE %d: CUDA graph capture of %s failed (%s): no graph time" % (symm.my_pe(), name, err),
                  flush=True)
    for graph in graphs.values():
        sync_all()
        graph.replay()  # the first replay uploads the graph
    samples = {name: [] for name in graphs}
    for _ in range(repeats):
        for name, graph in graphs.items():
            sync_all()
            samples[name].append(timing.window_us(graph.replay) / iters)
    graphs.clear()
    # every PE has the same graphs (all_ok above), so every PE gathers alike
    return {name: timing.slowest(statistics.median(samples[name])) if name in samples else None for name in fns}


def time_host(fn, iters, warmup=1):
    """Mean microseconds per call of a host-synchronous fn (gloo references)."""
    import time
    for _ in range(warmup):
        fn()
    sync_all()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    us = (time.perf_counter() - t0) * 1e6 / iters
    return timing.slowest(us)


def all_ok(ok):
    """True when the check passed on every PE."""
    return all(x == b"1" for x in symm.host_allgather(b"1" if ok else b"0"))


def close(a, b, rtol=1e-2, atol=1e-2):
    return torch.allclose(a.float(), b.float(), rtol=rtol, atol=atol)


class Row(dict):
    """One result: example, case, PEs, check, then timings (us) by column."""


def row(example, case, env, ok, **times):
    r = Row(example=example, case=case, pes=env.world, check="ok" if ok else "FAIL")
    r.update(times)
    return r


def skipped(example, case, env, why):
    """A case that cannot run here (the same on every PE), neither passed nor failed."""
    return Row(example=example, case=case, pes=env.world, check="skipped: " + why)


def is_skipped(r):
    return r["check"].startswith("skipped")


def ldst_reach(env, t):
    """Whether this PE reaches every PE's copy of symmetric tensor t by load/store
    (not where the backend sends every call remote, SYMM_DEBUG_FORCE_REMOTE, or
    across nodes); the same answer on every PE."""
    return all_ok(all(symm.peer_ptr(t.data_ptr(), p) for p in range(env.world)))


def torch_dist_ref(env, fn_gpu, make_cpu=None):
    """The torch.distributed reference timing and its label: fn_gpu on NCCL,
    or with gloo (PEs sharing one GPU) the CPU version of the op, copies
    included; None where there is no such op."""
    if env.dist_backend == "nccl":
        return fn_gpu, "nccl"
    if env.dist_backend == "gloo" and make_cpu is not None:
        return make_cpu(), "gloo (CPU tensors, with the copies)"
    return None, "n/a"


def parse(description):
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--aot", default=os.environ.get("SYMM_TILELANG_AOT"),
                    help="build folder of examples/tilelang/build.py (else TileLang compiles here)")
    ap.add_argument("--iters", type=int, default=20, help="timed iterations")
    ap.add_argument("--graph-iters", type=int, default=50,
                    help="calls captured in each CUDA graph of the graph timings")
    ap.add_argument("--checks", type=int, default=3, help="checked iterations, fresh data each")
    ap.add_argument("--no-bench", action="store_true", help="check only")
    ap.add_argument("--out", help="write the result table (markdown) here")
    ap.add_argument("--gemm-config", metavar="NAME",
                    help="GEMM examples: use this tile configuration (_gemm.CONFIGS) instead of the fastest alone")
    ap.add_argument("--only", nargs="+", metavar="EXAMPLE",
                    help="run_all.py: only these examples (e.g. primitives, for a folder built with --only prim_)")
    return ap.parse_args()


def fmt_us(x):
    return "-" if x is None else ("%.1f" % x if x < 1000 else "%.0f" % x)


def fmt_cell(col, x):
    # ratios are held against bars such as 0.9x: one decimal would round 0.88 up to it
    if isinstance(x, float):
        return "%.2f" % x if col == "ratio" or " / " in col else fmt_us(x)
    return str("" if x is None else x)


def table(rows, title):
    cols = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)
    lines = ["## " + title, "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(fmt_cell(c, r.get(c)) for c in cols) + " |")
    return "\n".join(lines) + "\n"


def median(xs):
    return statistics.median(xs) if xs else None


def title_note(env):
    if env.shared_gpu:
        return "%d PEs sharing one GPU: not a measure of NVLink, symm backend %s" % (env.world, env.backend)
    return "%d PEs, one GPU each, symm backend %s" % (env.world, env.backend)


def example_main(mod, title):
    """Run one example module on every config under torchrun."""
    args = parse(mod.__doc__.splitlines()[0])
    env = setup()
    ks = Kernels(args.aot)
    rows = []
    for cfg in mod.CONFIGS:
        rows += mod.run(env, ks.module(mod, env.world, cfg), cfg, args)
    text = table(rows, "%s (%s)" % (title, title_note(env)))
    if env.rank == 0:
        print(text)
        if args.out:
            with open(args.out, "a") as f:
                f.write(text + "\n")
    teardown()
    return rows
