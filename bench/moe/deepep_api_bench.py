"""DeepEP's intranode benchmark shape through symm.moe.deep_ep (DeepEP's API
over symm), beside symm's own API (symm.moe.HighThroughput), on the same GPUs:

    torchrun --nproc-per-node 4 bench/moe/deepep_api_bench.py [--out FILE]

(any number of ranks; more ranks than GPUs share them, and the title says so)

4096 tokens per rank, hidden 7168, top-8, 256 experts (DeepEP's
tests/test_intranode.py defaults); x as fp8 e4m3 with a float32 scale per 128
elements, and as bf16; combine in bf16. GB/s as DeepEP's test counts them:
received rows x row bytes (bf16: hidden x 2; fp8: hidden + hidden / 128 x 4)
over the call's time; combine: the same rows x hidden x 2. Two timings, on
rank 0, of --reps calls after --warmup:
  back to back  DeepEP's (its tests' bench()): an event before and after each
                call, no host synchronisation between calls, 256 MB of L2 flushed
                first; the mean over the calls but the first. The host runs ahead,
                so this is the calls' time on the GPU.
  idle GPU      each call behind a barrier on the stream and a host
                synchronisation (the ranks start together, the GPU waits for the
                host): the median; the host's time before the launch counts here.
A combine is timed with the dispatch it needs run, untimed, before it (before
its start event; before its barrier).

Rows, at an SM budget of 24 and at every SM this rank may use:
  own          symm.moe.HighThroughput: dispatch returns views of its receive
               buffers, no host synchronisation
  api cached   Buffer.dispatch(x, handle=...) (what DeepEP's test times): fresh
               tensors, as DeepEP returns them, over one of the Buffer's
               receive buffers that no tensor holds, where the peers stored
               the rows (no copy)
  api copy     the same with Buffer(..., num_recv_buffers=0): the rows copied
               into fresh tensors (what happens while the caller holds every
               receive buffer)
  api views    the same with Buffer(..., zero_copy_recv=True): views of symm's
               own receive buffers, valid until the next dispatch
  api full     Buffer.dispatch with the layout tensors and top-k: the ranks'
               counts exchanged and read by the host first (DeepEP's notify)
and a ratio table (api / own time). Rank 0 prints the tables; --out writes
them as markdown with the machine, the command and the date.

Without GPUs or a launcher it prints one line `n/a: <reason>` and exits 0.
"""
import argparse
import datetime
import os
import platform
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
sys.path.insert(0, HERE)
from deepep_inputs import deepep_inputs, fp8_rows  # noqa: E402,F401 - fp8_rows: the tests cast with it


def na(why, out=None):
    line = "n/a: " + why
    print(line)
    if out:
        with open(out, "w") as f:
            f.write("### DeepEP's API over symm\n\n" + line + "\n")
    return 0


class Clock:
    """Times fn() with events on the current stream after barrier() (the
    ranks' starting line), `before()` (untimed) ahead of the barrier; the
    median over reps, in microseconds."""

    def __init__(self, event, barrier, sync, reps, warmup, flush):
        self.event, self.barrier, self.sync, self.reps, self.warmup = event, barrier, sync, reps, warmup
        self.flush = flush

    def back_to_back(self, fn, before=None):
        """DeepEP's timing: events around each call, no synchronisation between
        calls; the mean over the calls but the first, in microseconds."""
        for _ in range(self.warmup):
            if before:
                before()
            fn()
        self.sync()
        self.barrier()
        self.flush()
        marks = [(self.event(), self.event()) for _ in range(self.reps)]
        for a, b in marks:
            if before:
                before()
            a.record()
            fn()
            b.record()
        self.sync()
        times = [a.elapsed_time(b) * 1e3 for a, b in marks][1:]
        return sum(times) / len(times)

    def both(self, fn, before=None):
        """{"b2b": back to back, "idle": behind a barrier} in microseconds."""
        return {"b2b": self.back_to_back(fn, before), "idle": self.time(fn, before)}

    def time(self, fn, before=None):
        for _ in range(self.warmup):
            if before:
                before()
            fn()
        self.sync()
        times = []
        for _ in range(self.reps):
            if before:
                before()
            self.barrier()
            a, b = self.event(), self.event()
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) * 1e3)
        return statistics.median(times)


def measure(torch, dep, own_ht, make_buffer, data, n, sms_list, share, clock):
    """The rows of the table: [(path, sms, {"fp8": us, "bf16": us, "combine": us}, rows received)], and a
    check that the API's received rows are the own API's."""
    x, x8, s8, idx, w, E = data
    own8 = own_ht(torch.float8_e4m3fn, True)
    own16 = own_ht(torch.bfloat16, False)
    api = make_buffer("pool")
    apic = make_buffer("copy")
    apiv = make_buffer("views")
    per_rank, _, per_expert, in_rank, _ = api.get_dispatch_layout(idx, E)
    full = dict(num_tokens_per_rank=per_rank, is_token_in_rank=in_rank, num_tokens_per_expert=per_expert,
                topk_idx=idx, topk_weights=w)
    results = []
    check = None
    for sms in sms_list:
        budget = sms or share
        even = budget // 2 * 2
        dcfg, ccfg = dep.Config(even), dep.Config(even)
        own8.set_num_sms(sms)
        own16.set_num_sms(sms)
        r = {}
        views = own16.dispatch(x, idx, w)
        rx16, nrecv = views[0], views[5]
        r["fp8"] = clock.both(lambda: own8.dispatch(x8, idx, w, x_scale=s8))
        r["bf16"] = clock.both(lambda: own16.dispatch(x, idx, w))
        R = int(nrecv.item())
        y = torch.zeros((R, x.size(1)), dtype=torch.bfloat16, device=x.device)
        y.copy_(rx16[:R])
        r["combine"] = clock.both(lambda: own16.combine(y), before=lambda: own16.dispatch(x, idx, w))
        results.append(("own (symm.moe.HighThroughput)", budget, r, R))
        for name, buf in (("api cached (symm.moe.deep_ep)", api), ("api copy (num_recv_buffers=0)", apic),
                          ("api views (zero_copy_recv=True)", apiv)):
            r = {}
            (rx8, _), _, _, _, h8, _ = buf.dispatch((x8, s8), config=dcfg, **full)
            rx, _, _, _, h16, _ = buf.dispatch(x, config=dcfg, **full)
            if check is None:
                check = torch.equal(rx.view(torch.int16), y.view(torch.int16)) and rx.size(0) == R
            r["fp8"] = clock.both(lambda: buf.dispatch((x8, s8), handle=h8, config=dcfg))
            r["bf16"] = clock.both(lambda: buf.dispatch(x, handle=h16, config=dcfg))
            yy = rx.clone()
            r["combine"] = clock.both(lambda: buf.combine(yy, h16, config=ccfg),
                                      before=lambda: buf.dispatch(x, handle=h16, config=dcfg))
            results.append((name, budget, r, rx.size(0)))
        r = {"fp8": clock.both(lambda: api.dispatch((x8, s8), config=dcfg, **full)),
             "bf16": clock.both(lambda: api.dispatch(x, config=dcfg, **full)), "combine": None}
        results.append(("api full (counts read by the host)", budget, r, R))
    for b in (api, apic, apiv):
        b.destroy()
    own8.destroy()
    own16.destroy()
    return results, check


_TIMINGS = (("b2b", "back to back (DeepEP's timing: the calls' time on the GPU)"),
            ("idle", "idle GPU (each call behind a barrier and a host synchronisation: the host's time counts)"))


def table(results, hidden, check):
    fp8_row, bf16_row = hidden + hidden // 128 * 4, hidden * 2
    lines = []

    def cell(t, rows, row_bytes):
        return "-" if t is None else "%.1f (%.0f)" % (rows * row_bytes / t * 1e-3, t)
    for how, title in _TIMINGS:
        lines += ["#### " + title, "", "| path | SMs | dispatch fp8 GB/s (us) | dispatch bf16 GB/s (us) | "
                  "combine GB/s (us) |", "| --- | ---: | ---: | ---: | ---: |"]
        for path, sms, r, rows in results:
            t = {k: None if v is None else v[how] for k, v in r.items()}
            lines.append("| %s | %d | %s | %s | %s |" % (path, sms, cell(t["fp8"], rows, fp8_row),
                                                         cell(t["bf16"], rows, bf16_row),
                                                         cell(t["combine"], rows, bf16_row)))
        own = {sms: r for path, sms, r, _ in results if path.startswith("own")}
        lines += ["", "| path / own, time (%s) | SMs | dispatch fp8 | dispatch bf16 | combine |" % how,
                  "| --- | ---: | ---: | ---: | ---: |"]
        for path, sms, r, _ in results:
            if path.startswith("own"):
                continue
            o = own[sms]
            lines.append("| %s | %d | %s |" % (path, sms, " | ".join(
                "-" if r[k] is None else "%.2f" % (r[k][how] / o[k][how]) for k in ("fp8", "bf16", "combine"))))
        lines.append("")
    lines += ["received rows of the API = the own API's (bf16, rank 0): %s" % ("yes" if check else "NO")]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="also write the tables (markdown) here")
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--hidden", type=int, default=7168)
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--experts", type=int, default=256)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        return na("torch is not installed", args.out)
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        return na("no CUDA GPU", args.out)
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return na("start it with torchrun --nproc-per-node N", args.out)
    import torch.distributed as dist
    import symm
    import symm.moe as moe
    import symm.moe.deep_ep as dep
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local % torch.cuda.device_count())
    dist.init_process_group("gloo")
    symm.init()
    rank, n = symm.my_pe(), symm.n_pes()
    T, H, K, E = args.tokens, args.hidden, args.topk, args.experts
    if E % n:
        symm.finalize()
        dist.destroy_process_group()
        return na("%d experts do not split over %d ranks" % (E, n), args.out if rank == 0 else None)
    dev = torch.device("cuda", symm.device())
    x, x8, s8, idx, w = deepep_inputs(T, H, K, E, dev, rank)
    share = symm.sm_share()
    sms_list = [24, 0] if share > 24 else [0]
    cache = torch.empty(int(256e6 // 4), dtype=torch.int32, device=dev)  # DeepEP's L2 flush
    clock = Clock(lambda: torch.cuda.Event(enable_timing=True), lambda: symm.barrier_on_stream(),
                  torch.cuda.synchronize, args.reps, args.warmup, cache.zero_)

    def own_ht(dtype, scales):
        return moe.HighThroughput(E, K, H, T, x_dtype=dtype, scales=scales)

    def make_buffer(how):
        return dep.Buffer(dist.group.WORLD, int(1e9), explicitly_destroy=True, max_num_tokens=T,
                          num_recv_buffers=0 if how == "copy" else 2, zero_copy_recv=how == "views")
    results, check = measure(torch, dep, own_ht, make_buffer, (x, x8, s8, idx, w, E), n, sms_list, share, clock)
    if rank == 0:
        gpus = torch.cuda.device_count()
        where = (", one per GPU" if n <= gpus else " sharing one GPU (no NVLink traffic: the ratios, not the GB/s, "
                 "are the point)" if gpus == 1 else " sharing %d GPUs" % gpus)
        head = ["### DeepEP's API over symm (symm.moe.deep_ep) beside symm's own, %d ranks%s" % (n, where), "",
                "- machine: %s, %s, %d GPU(s): %s" % (platform.node(), platform.machine(), torch.cuda.device_count(),
                                                     torch.cuda.get_device_name()),
                "- command: %s" % " ".join([os.path.basename(sys.executable)] + sys.argv),
                "- date: %s" % datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "- %d tokens per rank, hidden %d, top-%d, %d experts; rank 0's figures over %d calls (back to back: the mean but the first; idle GPU: the median); %d received "
                "rows on rank 0" % (T, H, K, E, args.reps, results[0][3]), ""]
        text = "\n".join(head) + table(results, H, check)
        print(text)
        if args.out:
            with open(args.out, "w") as f:
                f.write(text + "\n")
    symm.barrier()
    symm.finalize()
    dist.destroy_process_group()
    return 0 if check else 1


if __name__ == "__main__":
    sys.exit(main())
