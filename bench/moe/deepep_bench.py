"""DeepEP's normal (intranode) kernels at symm-bench's high-throughput shape,
on the same GPUs, for the column beside `symm-bench --mode moe`:

    torchrun --nproc-per-node 4 bench/moe/deepep_bench.py [--out FILE]

4096 tokens per rank, hidden 7168, top-8, 256 experts; dispatch fp8 (scales
per 128 elements) and bf16, combine bf16; with DeepEP's SM budget at 24 and
at every SM. GB/s as DeepEP's own test counts them: received rows x row bytes
(bf16: hidden x 2; fp8: hidden + hidden / 128 x 4) over the call's time, the
median of 20 calls timed with CUDA events on rank 0. The layout
(get_dispatch_layout) is outside the timed dispatch, as in DeepEP's test.

Without an importable `deep_ep` (or without GPUs or a launcher) it prints one
line `n/a: <reason>` and exits 0, so a GPU script can always run it.
"""
import argparse
import os
import statistics
import sys

from deepep_inputs import deepep_inputs


def na(why, out=None):
    line = "n/a: " + why
    print(line)
    if out:
        with open(out, "w") as f:
            f.write("### DeepEP normal kernels\n\n" + line + "\n")
    return 0


def timed(torch, fn, reps=20, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="also write the table (markdown) here")
    ap.add_argument("--tokens", type=int, default=4096)
    args = ap.parse_args()
    try:
        import deep_ep
    except Exception as e:  # noqa: BLE001 - any failure to load is the reason to report
        return na("deep_ep is not importable (%s: %s)" % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""),
                  args.out)
    import torch
    import torch.distributed as dist
    if not torch.cuda.is_available():
        return na("no CUDA GPU", args.out)
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return na("start it with torchrun --nproc-per-node N (one rank per GPU)", args.out)
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, n = dist.get_rank(), dist.get_world_size()
    group = dist.group.WORLD
    tokens, hidden, topk, experts = args.tokens, 7168, 8, 256
    if experts % n:
        dist.destroy_process_group()
        return na("%d experts do not split over %d ranks" % (experts, n), args.out if rank == 0 else None)
    x, x8, s8, topk_idx, topk_w = deepep_inputs(tokens, hidden, topk, experts, torch.device("cuda"), rank)
    x8 = (x8, s8)
    buffer = deep_ep.Buffer(group, int(1e9), 0)
    per_rank, _, per_expert, in_rank, _ = buffer.get_dispatch_layout(topk_idx, experts)
    sms_all = torch.cuda.get_device_properties(local).multi_processor_count // 2 * 2
    rows = []
    for num_sms in (24, sms_all):
        deep_ep.Buffer.set_num_sms(num_sms)
        dcfg, ccfg = deep_ep.Buffer.get_dispatch_config(n), deep_ep.Buffer.get_combine_config(n)
        result = {}
        for name, cur in (("fp8", x8), ("bf16", x)):
            kw = dict(x=cur, num_tokens_per_rank=per_rank, is_token_in_rank=in_rank,
                      num_tokens_per_expert=per_expert, topk_idx=topk_idx, topk_weights=topk_w, config=dcfg)
            recv_x, _, _, _, handle, _ = buffer.dispatch(**kw)
            recv_rows = (recv_x[0] if isinstance(recv_x, tuple) else recv_x).size(0)
            row_bytes = hidden + hidden // 128 * 4 if name == "fp8" else hidden * 2
            us = timed(torch, lambda: buffer.dispatch(**kw))
            result[name] = (recv_rows * row_bytes / us * 1e-3, us)
            if name == "bf16":
                comb = dict(x=recv_x, handle=handle, config=ccfg)
                cus = timed(torch, lambda: buffer.combine(**comb))
                result["combine"] = (recv_rows * hidden * 2 / cus * 1e-3, cus)
        rows.append((num_sms, result))
        dist.barrier()
    if rank == 0:
        lines = ["### DeepEP normal kernels, %d ranks (%s)" % (n, torch.cuda.get_device_name()), "",
                 "%d tokens per rank, hidden %d, top-%d, %d experts; rank 0's medians of 20 calls" % (
                     tokens, hidden, topk, experts), "",
                 "| SMs | dispatch fp8 GB/s (us) | dispatch bf16 GB/s (us) | combine GB/s (us) |",
                 "| ---: | ---: | ---: | ---: |"]
        for num_sms, r in rows:
            lines.append("| %d | %.1f (%.0f) | %.1f (%.0f) | %.1f (%.0f) |" % (
                num_sms, r["fp8"][0], r["fp8"][1], r["bf16"][0], r["bf16"][1], r["combine"][0], r["combine"][1]))
        text = "\n".join(lines)
        print(text)
        if args.out:
            with open(args.out, "w") as f:
                f.write(text + "\n")
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
