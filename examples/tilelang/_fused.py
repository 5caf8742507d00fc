"""Host side the GEMM examples share (gemm.py, ag_gemm.py, gemm_rs.py,
cannon.py, summa.py): which GEMM configuration is fastest alone at a shape,
the variants of a fused example tried on the GPU (tile configuration, piece
count, side-stream plan) and the one kept, the timings of the fused call
next to the GEMM alone (replays interleaved: same clocks), and the row with
the ratios held against the bars.

Timing is fair only under the same load: every figure a ratio is taken of
comes from one time_graphs call with real (random) data in every operand,
since a GEMM over zeros draws less power and runs at a higher clock."""
import torch
import torch.distributed as dist

import symm

import _gemm
from _common import all_ok, rand, row, time_graph, time_graphs, time_op

# issue #29's bars: fused within 1.10x of the GEMM alone, and 1.25x faster
# than torch.matmul + NCCL, in graphs and on a plain stream
BAR_VS_GEMM = 1.10
BAR_VS_TORCH = 1.25
BF16 = torch.bfloat16

_best = {}   # (M, N, K) -> Alone


def gemm_name(cfg_name, M, N, K):
    return "gemm_%s_m%d_n%d_k%d" % (cfg_name, M, N, K)


def gemm_kernels(M, N, K, world=_gemm.SPEED_PES):
    """{name: builder} of the GEMM alone at one shape, in the configurations
    built for `world` PEs."""
    out = {}
    for c in _gemm.config_names(world):
        out[gemm_name(c, M, N, K)] = (lambda c=c: _gemm.k_gemm(M, N, K, _gemm.CONFIGS[c]))
    return out


def launcher(k, cfg):
    """k(*args) for a kernel of _gemm.py's family, which takes nsm last: a
    persistent configuration's grid (one block per SM this PE may fill, so
    that every block is resident: their tiles may wait for data), passed as
    the launch grid too where the kernel was built ahead of time; 0 (unused)
    otherwise."""
    if not cfg.get("persistent"):
        return lambda *a: k(*a, 0)
    n = max(1, min(_gemm.NSM_MAX, symm.sm_share()))
    if type(k).__module__ == "symm.cubin":
        return lambda *a: k(*a, n, grid=(n,))
    if n < _gemm.NSM_MAX:   # TileLang's own launch keeps the grid it was compiled with
        raise RuntimeError("a persistent GEMM compiled here runs %d blocks, more than the %d SMs this PE may "
                           "fill: use another configuration (--gemm-config)" % (_gemm.NSM_MAX, n))
    return lambda *a: k(*a, _gemm.NSM_MAX)


class Alone:
    """The GEMM alone at one shape: every configuration built, timed with
    torch.matmul on the same random operands (replays interleaved), and the
    fastest. run(us_key) gives a callable GEMM on fresh operands of this
    shape for the fused examples' side-by-side timing."""

    def __init__(self, env, ks, M, N, K, args):
        self.shape = (M, N, K)
        names = [c for c in _gemm.CONFIGS if gemm_name(c, M, N, K) in ks]
        if not names:
            raise KeyError("no GEMM kernel for M=%d N=%d K=%d: rebuild with examples/tilelang/build.py" % (M, N, K))
        forced = getattr(args, "gemm_config", None)
        if forced:
            if forced not in names:
                raise KeyError("--gemm-config %s: not built (%s)" % (forced, ", ".join(names)))
            names = [forced]
        self.env, self.names = env, names
        self.a = rand((M, K), BF16, env.device, "alone A", M, N, K)
        self.b = (rand((K, N), torch.float32, env.device, "alone B", M, N, K) * K ** -0.5).to(BF16)
        self.c = torch.empty(M, N, device=env.device, dtype=BF16)
        self.kernels = {n: launcher(ks[gemm_name(n, M, N, K)], _gemm.CONFIGS[n]) for n in names}
        self.times, self.torch_us, self.best = {}, None, names[0]
        if not args.no_bench:
            fns = {n: (lambda k=k: k(self.a, self.b, self.c)) for n, k in self.kernels.items()}
            fns["torch.matmul"] = lambda: torch.matmul(self.a, self.b, out=self.c)
            got = time_graphs(fns, args.graph_iters, repeats=3)
            self.torch_us = got.pop("torch.matmul")
            self.times = got
            timed = [(t, n) for n, t in got.items() if t is not None]
            if timed:
                self.best = min(timed)[1]

    def fn(self, name=None):
        """The GEMM alone in configuration `name` (the fastest by default) on
        this shape's random operands."""
        k = self.kernels[name or self.best]
        return lambda: k(self.a, self.b, self.c)


def pick_config(env, ks, M, N, K, args):
    """Alone at (M, N, K), timed once per shape and process (every PE picks
    the same: the slowest PE's time counts). --gemm-config fixes the choice."""
    key = (M, N, K)
    if key not in _best:
        _best[key] = Alone(env, ks, M, N, K, args)
    return _best[key]


def quick(fn, args):
    """A short graph timing to rank the variants of a fused example (the kept
    one is timed again, fully, next to the GEMM alone)."""
    return time_graph(fn, max(4, args.graph_iters // 2), repeats=2, warmup=2)


def timed(env, fn, args):
    """(graph us, stream us) of fn, each None where it could not run."""
    from _common import time_op
    g = time_graph(fn, args.graph_iters) if not args.no_bench else None
    s = time_op(fn, args.iters) if not args.no_bench else None
    return g, s


def nccl_ok(env):
    """torch.distributed runs on NCCL here (each PE its own GPU)."""
    return env.dist_backend == "nccl"


def all_gather_ref(env, full, shard):
    """torch.distributed's all-gather of `shard` into `full` (in place when
    shard is full's own slice)."""
    dist.all_gather_into_tensor(full, shard)


def ratio(a, b):
    return a / b if a and b else None


def bar_cells(fused_g, fused_s, gemm_g, torch_g, torch_s, gemm_bar=BAR_VS_GEMM, torch_bar=BAR_VS_TORCH):
    """The ratio columns and whether each bar is met (gemm_bar None: the
    ratio to the GEMM alone is shown, not held against a bar)."""
    vs_gemm = ratio(fused_g, gemm_g)
    sp_g, sp_s = ratio(torch_g, fused_g), ratio(torch_s, fused_s)
    cells = {"fused / GEMM alone": vs_gemm, "torch+NCCL / fused (graph)": sp_g,
             "torch+NCCL / fused (stream)": sp_s}
    verdict = []
    if vs_gemm is not None and gemm_bar is not None:
        verdict.append("gemm %s" % ("pass" if vs_gemm <= gemm_bar else "MISS"))
    for tag, sp in (("graph", sp_g), ("stream", sp_s)):
        if sp is not None:
            verdict.append("%s %s" % (tag, "pass" if sp >= torch_bar else "MISS"))
    bars = ["torch+NCCL / fused >= %.2f" % torch_bar]
    if gemm_bar is not None:
        bars.insert(0, "fused / GEMM <= %.2f" % gemm_bar)
    cells["bars (%s)" % ", ".join(bars)] = ", ".join(verdict) or "n/a"
    return cells


def sweep(env, args, example, label, variants, check, call):
    """Try every variant of a fused example: variants is a list of
    (name, enter) where enter() makes it current (building what it needs);
    each is checked once with fresh data (check(it) -> bool) and, unless
    --no-bench, timed briefly (call()). Returns (the fastest variant that
    passed, or the first, its index; the rows of a table of all)."""
    rows, best = [], None
    for i, (name, enter) in enumerate(variants):
        enter()
        ok = all_ok(check(1000 + i))
        us = quick(call, args) if not args.no_bench and ok else None
        rows.append(row(example + " variants", label, env, ok, variant=name, **{"fused graph us": us}))
        if us is not None and (best is None or us < best[0]):
            best = (us, i)
    return (best[1] if best else 0), rows


def variants(op, ks, world, cfg, args, fused_name, plans, key, unit):
    """(name, enter) of every fused variant built: configuration, pieces of
    cfg[key] (named `unit`), plan; args.gemm_config forces one configuration."""
    names = _gemm.fused_config_names(world)
    forced = getattr(args, "gemm_config", None)
    if forced:
        names = [forced]
    out = []
    for c in names:
        for n in cfg[key]:
            fused = ks.get(fused_name(c, world, cfg, n))
            if fused is None:
                raise KeyError("%s is not built (examples/tilelang/build.py)" % fused_name(c, world, cfg, n))
            for plan in (plans if world > 1 else plans[:1]):
                out.append(("%s, %d %s%s, %s" % (c, n, unit, "s" if n > 1 else "", plan),
                            lambda c=c, n=n, plan=plan, fused=fused: op.use(
                                fused, ks[_gemm.finish_name(world * n)], _gemm.CONFIGS[c], n, plan)))
    return out


TIME_KEYS = ("fused graph us", "fused stream us", "GEMM alone us", "torch.matmul us", "torch+NCCL graph us",
             "torch+NCCL stream us", "fused kernel only us", "copies only us")


def time_cells(env, op, fns, fused_call, args):
    """A fused example's timing cells: fns (name -> call) replayed from graphs,
    the fused call and torch + NCCL on a plain stream, the side work's shape
    and the bars."""
    got = time_graphs(fns, args.graph_iters)
    got["fused stream us"] = time_op(fused_call, args.iters)
    got["torch+NCCL stream us"] = time_op(fns["torch+NCCL graph us"], args.iters) if nccl_ok(env) else None
    cells = {k: got.get(k) for k in TIME_KEYS}
    cells["CE calls per call"] = str(op.program.count()) if op.program else "0"
    cells["side work"] = ("graph" if op.side.graphed(op.program) else "queued") if op.program else "-"
    cells.update(bar_cells(got["fused graph us"], got["fused stream us"], got["GEMM alone us"],
                           got.get("torch+NCCL graph us"), got["torch+NCCL stream us"]))
    return cells
