"""Host side the GEMM examples share (gemm.py, ag_gemm.py, gemm_rs.py,
cannon.py, summa.py): which GEMM configuration to use at a shape (the
fastest alone, timed here once per shape and run), the timings of the fused
kernel, the GEMM alone and the unfused torch + NCCL path on a plain stream
and in CUDA graphs, and the row with the ratios held against the bars."""
import torch
import torch.distributed as dist

import symm

import _gemm
from _common import time_graph, time_op

# issue #29's bars: fused within 1.10x of the GEMM alone, and 1.25x faster
# than torch.matmul + NCCL, in graphs and on a plain stream
BAR_VS_GEMM = 1.10
BAR_VS_TORCH = 1.25
BF16 = torch.bfloat16

_best = {}   # (M, N, K) -> (config name, {name: us})


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


def pick_config(env, ks, M, N, K, args):
    """The configuration whose GEMM alone is fastest at (M, N, K) on this run's
    GPUs (the slowest PE's time counts; every PE picks the same), and every
    configuration's time. --gemm-config fixes the choice."""
    key = (M, N, K)
    if key in _best:
        return _best[key]
    names = [c for c in _gemm.CONFIGS if gemm_name(c, M, N, K) in ks]
    if not names:
        raise KeyError("no GEMM kernel for M=%d N=%d K=%d: rebuild with examples/tilelang/build.py" % key)
    forced = getattr(args, "gemm_config", None)
    if forced:
        if forced not in names:
            raise KeyError("--gemm-config %s: not built (%s)" % (forced, ", ".join(names)))
        names = [forced]
    a = torch.randn(M, K, device=env.device).to(BF16)
    b = (torch.randn(K, N, device=env.device) / K ** 0.5).to(BF16)
    c = torch.empty(M, N, device=env.device, dtype=BF16)
    times = {}
    for n in names:
        k = launcher(ks[gemm_name(n, M, N, K)], _gemm.CONFIGS[n])
        times[n] = time_graph(lambda k=k: k(a, b, c), max(5, args.graph_iters // 4), repeats=3)
    best = min((t, n) for n, t in times.items() if t is not None)[1] if any(times.values()) else names[0]
    _best[key] = (best, times)
    return _best[key]


def timed(env, fn, args):
    """(graph us, stream us) of fn, each None where it could not run."""
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
