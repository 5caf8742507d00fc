"""Host time of symm.moe.deep_ep's calls (cached dispatch, combine plain and
with topk_weights, the full dispatch) beside symm's own HighThroughput.dispatch
and combine (torchrun, any PEs), then cProfile's top 15 by own time per path.

    torchrun --nproc-per-node N bench/moe/deepep_host_prof.py [--python DIR] [--tokens T] [--no-profile]

Two timings per path, perf_counter per call, median of --calls:
- "queued": calls back to back, no sync between them (what a training loop
  sees). Once the GPU falls behind and its launch queue fills, a launch waits
  for the GPU, so this column can show GPU time, not host time.
- "idle": the device synchronised before each call, the call alone timed:
  no launch waits for a full queue, but each call starts right after a
  synchronisation, which can cost more than back to back.
The full dispatch reads counts on the host (it waits for its count exchange),
so only its "idle" column is printed. "own pair+w fp8" is the own pair with
combine's weights (symm_moe_ht_combine_weights; only where symm.moe's
HighThroughput.combine takes weights=).
--python DIR imports symm from DIR (e.g. another checkout's python/, for a
before/after on one machine).
"""
import argparse
import cProfile
import inspect
import io
import os
import pstats
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--python", default=os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
ap.add_argument("--tokens", type=int, default=4096)
ap.add_argument("--calls", type=int, default=200)
ap.add_argument("--no-profile", action="store_true")
args = ap.parse_args()
sys.path.insert(0, args.python)
sys.path.insert(0, HERE)
import torch, torch.distributed as dist  # noqa: E402,E401
import symm, symm.moe as moe, symm.moe.deep_ep as dep  # noqa: E402,E401
from deepep_inputs import deepep_inputs  # noqa: E402
local = int(os.environ.get("LOCAL_RANK", "0"))
torch.cuda.set_device(local % torch.cuda.device_count())
dist.init_process_group("gloo")
symm.init()
rank = symm.my_pe()
T, H, K, E = args.tokens, 7168, 8, 256
dev = torch.device("cuda", symm.device())
x, x8, s8, idx, w = deepep_inputs(T, H, K, E, dev, rank)
buf = dep.Buffer(dist.group.WORLD, int(1e9), explicitly_destroy=True, max_num_tokens=T)
own = moe.HighThroughput(E, K, H, T, x_dtype=torch.float8_e4m3fn, scales=True)
own.set_num_sms(24)
cfg = dep.Config(24)
per_rank, _, per_expert, in_rank, _ = buf.get_dispatch_layout(idx, E)
full = dict(config=cfg, num_tokens_per_rank=per_rank, is_token_in_rank=in_rank, num_tokens_per_expert=per_expert,
            topk_idx=idx, topk_weights=w)
(rx8, _), _, _, _, h8, _ = buf.dispatch((x8, s8), **full)
rx, _, rw16, _, h16, _ = buf.dispatch(x, **full)
yy = rx.clone()
N = args.calls
def own8(): return own.dispatch(x8, idx, w, x_scale=s8)
def ownpair8(): own.dispatch(x8, idx, w, x_scale=s8); return own.combine(yy)
def api8(): return buf.dispatch((x8, s8), handle=h8, config=cfg)
def api16(): return buf.dispatch(x, handle=h16, config=cfg)
def pair16():  # a combine follows its dispatch: a combine alone would re-dispatch zeros first
    buf.dispatch(x, handle=h16, config=cfg); return buf.combine(yy, h16, config=cfg)
def pairw16():  # the same with combine's topk_weights
    buf.dispatch(x, handle=h16, config=cfg); return buf.combine(yy, h16, topk_weights=rw16, config=cfg)
def full16(): return buf.dispatch(x, **full)
rw8 = own.dispatch(x8, idx, w, x_scale=s8)[3]
def ownpairw8(): own.dispatch(x8, idx, w, x_scale=s8); return own.combine(yy, weights=rw8)
paths = (("own dispatch fp8", own8), ("own pair fp8", ownpair8), ("api cached fp8", api8),
         ("api cached bf16", api16), ("api pair bf16", pair16), ("api pair+w bf16", pairw16),
         ("api full bf16", full16))
if "weights" in inspect.signature(moe.HighThroughput.combine).parameters:
    paths += (("own pair+w fp8", ownpairw8),)


def timed(fn, idle):
    for _ in range(10):
        fn()
    torch.cuda.synchronize(); symm.barrier()
    hs = []
    for _ in range(N):
        if idle:
            torch.cuda.synchronize()
        t0 = time.perf_counter(); fn(); hs.append(time.perf_counter() - t0)
    torch.cuda.synchronize(); symm.barrier()
    hs.sort()
    return hs[len(hs) // 2] * 1e6


res = {}
for name, fn in paths:
    res[name] = (None if name == "api full bf16" else timed(fn, False), timed(fn, True))
if rank == 0:
    print("host us per call, %d tokens, hidden %d, top-%d, %d experts, %d PE(s); symm from %s; median of %d" % (
        T, H, K, E, symm.n_pes(), args.python, N))
    print("host: %-34s %10s %10s" % ("path", "queued", "idle"))
    for k, (q, i) in res.items():
        print("host: %-34s %10s %10.1f" % (k, "-" if q is None else "%.1f" % q, i))
    for label, a, b in (("own combine (pair - dispatch)", "own pair fp8", "own dispatch fp8"),
                        ("api combine (pair - cached bf16)", "api pair bf16", "api cached bf16"),
                        ("api combine+w (pair+w - cached bf16)", "api pair+w bf16", "api cached bf16"),
                        ("own combine+w (pair+w - dispatch)", "own pair+w fp8", "own dispatch fp8")):
        if a in res:
            print("host: %-34s %10.1f %10.1f" % (label, res[a][0] - res[b][0], res[a][1] - res[b][1]))
if not args.no_profile:
    for name, fn in paths:
        pr = cProfile.Profile()
        torch.cuda.synchronize(); symm.barrier()
        pr.enable()
        for _ in range(N): fn()
        pr.disable()
        torch.cuda.synchronize(); symm.barrier()
        if rank == 0:
            s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(15)
            print("==== cProfile %s, %d calls, top 15 by own time" % (name, N)); print(s.getvalue()[:9000])
buf.destroy(); own.destroy()
symm.barrier(); symm.finalize(); dist.destroy_process_group()
