"""Host time of symm.moe.deep_ep's cached dispatch and combine (plain, and with
topk_weights) beside symm's own HighThroughput.dispatch and combine (torchrun, any PEs;
perf_counter per call, median of 200, no sync between calls), then cProfile's
top 15 by own time for each path.

    torchrun --nproc-per-node N bench/moe/deepep_host_prof.py
"""
import cProfile, io, os, pstats, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "python"))
import torch, torch.distributed as dist
import symm, symm.moe as moe, symm.moe.deep_ep as dep
from deepep_inputs import deepep_inputs
local = int(os.environ.get("LOCAL_RANK", "0"))
torch.cuda.set_device(local % torch.cuda.device_count())
dist.init_process_group("gloo")
symm.init()
rank = symm.my_pe()
T, H, K, E = 4096, 7168, 8, 256
dev = torch.device("cuda", symm.device())
x, x8, s8, idx, w = deepep_inputs(T, H, K, E, dev, rank)
buf = dep.Buffer(dist.group.WORLD, int(1e9), explicitly_destroy=True, max_num_tokens=T)
own = moe.HighThroughput(E, K, H, T, x_dtype=torch.float8_e4m3fn, scales=True)
own.set_num_sms(24)
cfg = dep.Config(24)
per_rank, _, per_expert, in_rank, _ = buf.get_dispatch_layout(idx, E)
(rx8, _), _, _, _, h8, _ = buf.dispatch((x8, s8), config=cfg, num_tokens_per_rank=per_rank, is_token_in_rank=in_rank,
                                        num_tokens_per_expert=per_expert, topk_idx=idx, topk_weights=w)
rx, _, rw16, _, h16, _ = buf.dispatch(x, config=cfg, num_tokens_per_rank=per_rank, is_token_in_rank=in_rank,
                                   num_tokens_per_expert=per_expert, topk_idx=idx, topk_weights=w)
yy = rx.clone()
N = 200
def api8(): return buf.dispatch((x8, s8), handle=h8, config=cfg)
def api16(): return buf.dispatch(x, handle=h16, config=cfg)
def own8(): return own.dispatch(x8, idx, w, x_scale=s8)
def ownpair8(): own.dispatch(x8, idx, w, x_scale=s8); return own.combine(yy)
def pair16():  # a combine follows its dispatch: a combine alone would re-dispatch zeros first
    buf.dispatch(x, handle=h16, config=cfg); return buf.combine(yy, h16, config=cfg)
def pairw16():  # the same with combine's topk_weights (their all-to-all and sum)
    buf.dispatch(x, handle=h16, config=cfg); return buf.combine(yy, h16, topk_weights=rw16, config=cfg)
res = {}
for name, fn in (("own dispatch fp8", own8), ("own pair fp8", ownpair8), ("api cached fp8", api8),
                 ("api cached bf16", api16), ("api pair bf16", pair16), ("api pair+w bf16", pairw16)):
    for _ in range(10): fn()
    torch.cuda.synchronize(); symm.barrier()
    hs = []
    for _ in range(N):
        t0 = time.perf_counter(); fn(); hs.append(time.perf_counter() - t0)
    torch.cuda.synchronize(); symm.barrier()
    hs.sort(); res[name] = hs[len(hs) // 2] * 1e6
if rank == 0:
    print("host us per call (median of %d, no sync between calls):" % N)
    for k, v in res.items(): print("host: %-20s %8.1f us" % (k, v))
    print("host: %-20s %8.1f us (pair - dispatch)" % ("own combine", res["own pair fp8"] - res["own dispatch fp8"]))
    print("host: %-20s %8.1f us (pair - cached bf16 dispatch)" % ("api combine", res["api pair bf16"] - res["api cached bf16"]))
    print("host: %-20s %8.1f us (pair+w - cached bf16 dispatch)" % ("api combine+w", res["api pair+w bf16"] - res["api cached bf16"]))
for name, fn in (("own dispatch fp8", own8), ("own pair fp8", ownpair8), ("api cached fp8", api8),
                 ("api pair bf16", pair16), ("api pair+w bf16", pairw16)):
    pr = cProfile.Profile()
    torch.cuda.synchronize(); symm.barrier()
    pr.enable()
    for _ in range(N): fn()
    pr.disable()
    torch.cuda.synchronize(); symm.barrier()
    if rank == 0:
        s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(15)
        print("==== cProfile %s, %d calls, top 15 by own time" % (name, N)); print(s.getvalue()[:9000])
        s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("cumtime").print_stats("symm", 15)
        print("==== cProfile %s, symm's functions, top 15 by cumulative time" % name); print(s.getvalue()[:9000])
buf.destroy(); own.destroy()
symm.barrier(); symm.finalize(); dist.destroy_process_group()
