"""What symm.moe.deep_ep (DeepEP's API over symm) adds to symm's own API per
call: device work launched and host time.

    python3 bench/moe/deepep_overhead.py [--out FILE]                      # CPU: a stand-in for symm
    torchrun --nproc-per-node N bench/moe/deepep_overhead.py [--out FILE]  # GPUs (PEs may share one)

Paths, per call:
  own dispatch / combine   symm.moe.HighThroughput: symm's kernel(s) alone
  api full                 Buffer.dispatch with the layout tensors and top-k (the
                           ranks' counts exchanged and read by the host first)
  api cached               Buffer.dispatch(x, handle=...): the received rows land in
                           one of the Buffer's receive buffers that no tensor holds
                           and come back as fresh tensors over it (no copy)
  api cached copy          the same with Buffer(..., num_recv_buffers=0): the rows
                           copied into fresh tensors (what happens while the caller
                           holds every receive buffer)
  api views                the same with Buffer(..., zero_copy_recv=True)
  api combine              Buffer.combine(y, handle), and with topk_weights
  own / api layout         HighThroughput.get_dispatch_layout / Buffer.get_dispatch_layout
each for bf16 and fp8 (float32 scales per 128) x.

Columns: symm launches (symm's own kernels and collectives), other launches
(torch kernels and copies the wrapper adds), host syncs (the host waits for
the device), host us (the call's wall time on the host, the device idle
before it: Python, checks and launches), and on GPUs call us (CUDA events
around the call after a barrier on the stream, host time included, as
deepep_api_bench.py times it) and its ratio to the own API.

On the CPU the Buffer runs over a stand-in engine whose symm calls do nothing
but count (tests/python/deepep_fake.py's streams); every torch op that would
launch a kernel or a copy on a GPU is counted (views and allocations are not),
and host us is the Python and CPU-op time of the call on tiny shapes. On GPUs
the launches are torch.profiler's kernels, copies and fills, symm's named
symm__*. Rank 0 prints the table; --out writes it as markdown.
"""
import argparse
import datetime
import os
import platform
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, HERE)
from deepep_inputs import RankZeroGroup  # noqa: E402

import torch  # noqa: E402

# aten ops that launch nothing on a GPU (views, allocations, metadata)
_NO_LAUNCH = {"empty", "empty_strided", "empty_like", "new_empty", "view", "_unsafe_view", "slice", "select", "as_strided",
              "t", "transpose", "unsqueeze", "squeeze", "expand", "detach", "alias", "permute", "lift_fresh",
              "_reshape_alias", "reshape", "view_as", "split", "unbind", "narrow", "set_", "resize_",
              "is_pinned", "_pin_memory", "record_stream", "_local_scalar_dense"}


def _op_name(func):
    return func.__name__.split(".")[0] if hasattr(func, "__name__") else str(func)


def _tag_host(t):
    t._deepep_overhead_host = True


def _on_host(t):
    return getattr(t, "_deepep_overhead_host", False)


class OpCounter(torch.utils._python_dispatch.TorchDispatchMode):
    """Counts the aten ops that would launch device work: not inside symm's
    stand-in, and not on what the host read back from the device (tensors
    the stand-in's read returned, tagged, and what ops make of them alone)."""

    def __init__(self):
        super().__init__()
        self.ops = []
        self.paused = 1  # counts only while a call is measured (cpu_count); tags host tensors always

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        from torch.utils._pytree import tree_flatten
        name = _op_name(func)
        out = func(*args, **(kwargs or {}))
        ins = [t for t in tree_flatten((args, kwargs or {}))[0] if isinstance(t, torch.Tensor) and t.dim() > 0]
        if ins and all(_on_host(t) for t in ins):
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    _tag_host(t)
        elif not self.paused and name not in _NO_LAUNCH:
            self.ops.append(name)
        return out


# ---------------------------------------------------------------------------
# The CPU stand-in: symm's handles and collectives as counters
# ---------------------------------------------------------------------------

class _Quiet:
    """Runs the stand-in's own bookkeeping outside the op count."""

    def __init__(self, counter):
        self.counter = counter

    def __enter__(self):
        if self.counter is not None:
            self.counter.paused += 1

    def __exit__(self, *exc):
        if self.counter is not None:
            self.counter.paused -= 1


class NullEngine:
    """Rank 0 of n ranks that all send what rank 0 sends: symm's calls count
    and leave the receive buffers with the counts the wrapper expects."""

    def __init__(self, n, stats):
        sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
        from deepep_fake import FakeCuda
        self.rank, self.n, self.device, self.share = 0, n, torch.device("cpu"), 16
        self.cuda = FakeCuda()
        self.stats = stats
        self.layouts = {}

        def read(t):
            stats["syncs"] += 1
            with _Quiet(stats["counter"]):  # the device-to-host copy: counted as the sync
                out = t.reshape(-1).clone()
            _tag_host(out)
            return out
        self.cuda.read = read

    def ht(self, E, K, H, M, x_dtype, scales):
        return NullHT(self, E, K, H, M, x_dtype, scales)

    def layout(self, idx, num_experts, in_rank, per_rank, per_expert):
        self.stats["symm"] += 1  # symm_moe_layout: one kernel writes all three
        with _Quiet(self.stats["counter"]):
            key = (idx.data_ptr(), idx._version, num_experts)
            got = self.layouts.get(key)
            if got is None:  # the results of an index tensor, by torch, once (not the call's time)
                n, L, e = self.n, num_experts // self.n, idx.long()
                ir = torch.stack([((e >= r * L) & (e < (r + 1) * L)).any(dim=1) for r in range(n)], dim=1)
                ok = (e >= 0) & (e < num_experts)
                got = self.layouts[key] = (ir.sum(dim=0, dtype=torch.int32), torch.bincount(
                    e[ok], minlength=num_experts).to(torch.int32), ir)
            per_rank.copy_(got[0])
            per_expert.copy_(got[1])
            in_rank.copy_(got[2])

    def all_gather(self, out, inp):
        self.stats["symm"] += 1
        with _Quiet(self.stats["counter"]):
            out.view(self.n, -1).copy_(inp.view(1, -1))

    def pool_alloc(self, nbytes):
        return torch.zeros(nbytes, dtype=torch.uint8)

    def pool_free(self, t):
        pass

    def all_to_all(self, out, inp):
        self.stats["symm"] += 1
        with _Quiet(self.stats["counter"]):
            out.copy_(inp)

    def a2av_counts(self, out_rows, in_rows, row):
        return out_rows, in_rows, row

    def all_to_allv(self, out, inp, counts):
        self.stats["symm"] += 1  # rank 0's rows come back to it unchanged: what it reads is already there


class NullHT:
    def __init__(self, eng, E, K, H, M, x_dtype, scales):
        self.eng, self.E, self.K, self.H, self.n = eng, E, K, H, eng.n
        self.local_experts = E // eng.n
        self.capacity = cap = M * eng.n
        self.views = (torch.zeros((cap, H), dtype=x_dtype), torch.ones((cap, (H + 127) // 128)) if scales else None,
                      torch.zeros((cap, K), dtype=torch.int32), torch.zeros((cap, K)),
                      torch.zeros((cap, 2), dtype=torch.int32), torch.zeros(1, dtype=torch.int32),
                      torch.zeros(self.local_experts, dtype=torch.int32))
        self.sms = 0
        self.counts = {}

    def set_num_sms(self, n):
        self.sms = n

    def get_num_sms(self):
        return self.sms

    def heap_bytes(self):
        return 0

    def destroy(self):
        pass

    def dispatch(self, x, topk_idx, topk_weights=None, x_scale=None, do_send=True, do_recv=True, recv_x=None,
                 recv_x_scale=None):
        self.eng.stats["symm"] += 1
        with _Quiet(self.eng.stats["counter"]):
            key = (topk_idx.data_ptr(), topk_idx._version)
            if key not in self.counts:  # the counts of a routing, once (not the call's time)
                L, idx = self.local_experts, topk_idx.long()
                mine = (idx >= 0) & (idx < L)
                self.counts[key] = (int(mine.any(dim=1).sum()) * self.n,
                                    torch.bincount(idx[mine], minlength=L) * self.n)
            nrecv, nper = self.counts[key]
            self.views[5].fill_(nrecv)
            self.views[6].copy_(nper)
        if recv_x is None:
            return self.views
        return (recv_x, recv_x_scale) + self.views[2:]

    def _prepare(self, topk_idx, topk_weights=None):
        return (topk_idx, topk_weights)

    def _recv_copy(self, rows, src_token, topk_idx, topk_weights, counts):
        self.eng.stats["symm"] += 1  # symm_moe_ht_recv_copy: one kernel (the counts, uncounted, for the next check)
        if counts is not None:
            with _Quiet(self.eng.stats["counter"]):
                counts[0] = self.views[5][0]
                counts[1:1 + self.local_experts] = self.views[6]

    def _dispatch_prepared(self, prep, x, x_scale=None, recv_x=None, recv_x_scale=None, checked=False):
        return self.dispatch(x, prep[0], prep[1], x_scale=x_scale, recv_x=recv_x, recv_x_scale=recv_x_scale)

    def _combine_checked(self, y, out, weights=None, out_weights=None):
        return self.combine(y, out=out, weights=weights, out_weights=out_weights)

    def combine(self, y, out=None, out_dtype=torch.bfloat16, do_send=True, do_recv=True, weights=None,
                out_weights=None):
        self.eng.stats["symm"] += 1
        return out if weights is None else (out, out_weights)

    def get_dispatch_layout(self, topk_idx):
        self.eng.stats["symm"] += 1
        return self.views[5], self.views[6], self.views[4]


# ---------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------

def host_us(fn, reps, sync):
    times = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    sync()
    return statistics.median(times)


def cpu_count(fn, before, stats):
    """(symm launches, other launches, host syncs, op names) of one call of fn
    (after one uncounted, so that what a call keeps for the next is tagged)."""
    c = stats["counter"]
    with c:
        if before:
            before()
        fn()
        if before:
            before()
        stats.update(symm=0, syncs=0)
        c.ops = []
        c.paused -= 1
        try:
            fn()
        finally:
            c.paused += 1
    return stats["symm"], len(c.ops), stats["syncs"], c.ops


def gpu_count(fn, before):
    """(symm launches, other launches, host syncs, names) of one call of fn, from torch.profiler."""
    from torch.profiler import ProfilerActivity, profile
    if before:
        before()
    torch.cuda.synchronize()

    def na(e):
        return None, None, None, ["n/a: torch.profiler: %s" % (str(e).splitlines() or [type(e).__name__])[0][:80]]
    # a profiler that cannot trace here (e.g. under MPS) leaves the counts n/a; the call still runs, so the
    # ranks stay in step, and its own errors are raised
    prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    try:
        prof.__enter__()
    except Exception as e:  # noqa: BLE001
        fn()
        return na(e)
    try:
        fn()
        torch.cuda.synchronize()
    finally:
        try:
            prof.__exit__(None, None, None)
            events = prof.events()
        except Exception as e:  # noqa: BLE001
            events = e
    if isinstance(events, Exception):
        return na(events)
    symm, other, syncs, names = 0, 0, 0, []
    for e in events:
        name = e.name
        if name.startswith("void "):  # a template kernel's name carries its return type
            name = name[5:]
        if e.device_type == torch.autograd.DeviceType.CUDA:
            if name.startswith("Memcpy DtoH"):
                continue  # the host's read of the counts: counted as its synchronisation
            if name.startswith("symm__"):
                symm += 1
            else:
                other += 1
                names.append(name.split("<")[0][:40])
        elif name in ("cudaStreamSynchronize", "cudaEventSynchronize", "cudaDeviceSynchronize") or \
                name.startswith("cudaMemcpy") and "Async" not in name:
            syncs += 1
    return symm, other, max(syncs - 1, 0), names  # the profile's own synchronize is not the call's


def measure(paths, count, sync, timer, reps):
    """paths: [(name, fn, before)] -> rows [(name, symm, other, syncs, host us, call us or None, op names)]."""
    rows = []
    for name, fn, before in paths:
        for _ in range(3):  # warm: handles made, allocator cached
            if before:
                before()
            fn()
        symm, other, syncs, ops = count(fn, before)

        def timed():
            fn()
        hs = []
        for _ in range(reps):
            if before:
                before()
            hs.append(host_us(timed, 1, sync))
        call = None
        if timer is not None:
            call = timer(fn, before)
        rows.append((name, symm, other, syncs, statistics.median(hs), call, ops))
    return rows


def paths_for(dep, own, buf, bufv, bufc, data, E):
    """The calls to measure, for bf16 and fp8."""
    x, x8, s8, idx, w = data
    out = []
    per_rank, _, per_expert, in_rank, _ = buf.get_dispatch_layout(idx, E)
    full = dict(num_tokens_per_rank=per_rank, is_token_in_rank=in_rank, num_tokens_per_expert=per_expert,
                topk_idx=idx, topk_weights=w)
    out.append(("own layout", lambda: own["bf16"].get_dispatch_layout(idx), None))
    out.append(("api layout", lambda: buf.get_dispatch_layout(idx, E), None))
    for kind, xin, o in (("bf16", x, own["bf16"]), ("fp8", (x8, s8), own["fp8"])):
        xo, so = (x, None) if kind == "bf16" else (x8, s8)
        out.append(("own dispatch %s" % kind, lambda o=o, xo=xo, so=so: o.dispatch(xo, idx, w, x_scale=so), None))
        out.append(("api full %s" % kind, lambda xin=xin: buf.dispatch(xin, **full), None))
        recv, _, rw, _, h, _ = buf.dispatch(xin, **full)
        out.append(("api cached %s" % kind, lambda xin=xin, h=h: buf.dispatch(xin, handle=h), None))
        hc = bufc.dispatch(xin, **full)[4]
        out.append(("api cached copy %s" % kind, lambda xin=xin, hc=hc: bufc.dispatch(xin, handle=hc), None))
        hv = bufv.dispatch(xin, **full)[4]
        out.append(("api views %s" % kind, lambda xin=xin, hv=hv: bufv.dispatch(xin, handle=hv), None))
        if kind == "bf16":
            rx = recv
            y = rx.clone()
            views = o.dispatch(x, idx, w)
            yo = views[0][:rx.size(0)].clone()
            out.append(("own combine", lambda o=o: o.combine(yo), lambda o=o: o.dispatch(x, idx, w)))
            out.append(("api combine", lambda h=h: buf.combine(y, h), lambda h=h: buf.dispatch(x, handle=h)))
            out.append(("api combine + topk_weights", lambda h=h: buf.combine(y, h, topk_weights=rw),
                        lambda h=h: buf.dispatch(x, handle=h)))
    return out


def table(rows, title, gpu):
    own = {}
    for name, _, _, _, hus, call, _ in rows:
        if name.startswith("own"):
            own[name.split(" ", 1)[1]] = (hus, call)
    head = "| path | symm launches | other launches | host syncs | host us |"
    rule = "| --- | ---: | ---: | ---: | ---: |"
    if gpu:
        head += " call us | call / own |"
        rule += " ---: | ---: |"
    lines = [title, "", head, rule]
    def num(v):
        return "-" if v is None else "%d" % v
    for name, symm, other, syncs, hus, call, _ in rows:
        line = "| %s | %s | %s | %s | %.0f |" % (name, num(symm), num(other), num(syncs), hus)
        if gpu:
            key = "combine" if "combine" in name else "layout" if "layout" in name else "dispatch " + name.split()[-1]
            ref = own.get(key, (None, None))[1]
            line += " %.0f | %s |" % (call, "-" if not ref else "%.2f" % (call / ref))
        lines.append(line)
    lines += ["", "other launches, per path: " + "; ".join(
        "%s: %s" % (name, ", ".join(ops) if ops else "none") for name, _, other, _, _, _, ops in rows
        if not name.startswith("own"))]
    return "\n".join(lines)


def run_cpu(args):
    import symm.moe.deep_ep as dep
    stats = {"symm": 0, "syncs": 0, "counter": OpCounter()}
    n = args.ranks
    eng_box = []

    def factory(group, comm, call):
        eng_box.append(NullEngine(n, stats))
        return eng_box[-1]
    saved, dep._engine_factory = dep._engine_factory, factory
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny ops: no worker threads to wake (they would time the machine's load)
    try:
        return _run_cpu(args, dep, stats, eng_box)
    finally:
        dep._engine_factory = saved
        torch.set_num_threads(threads)


def _run_cpu(args, dep, stats, eng_box):
    n, T, H, K, E = args.ranks, args.tokens, args.hidden, args.topk, args.experts
    g = torch.Generator().manual_seed(1)
    x = torch.randn((T, H), generator=g).to(torch.bfloat16)
    x8 = x.to(torch.float8_e4m3fn)
    s8 = torch.ones((T, H // 128))
    # every rank gets the same: slot k goes to rank k % n, local expert (t + k // n) % L (the stand-in's
    # ranks all send rank 0's batch, so each receives what rank 0 does)
    L, t, k = E // n, torch.arange(T).view(T, 1), torch.arange(K).view(1, K)
    if K % n or K // n > L:
        raise ValueError("--topk must be a multiple of --ranks, at most experts / ranks per rank")
    idx = ((k % n) * L + (t + k // n) % L).contiguous()
    w = torch.rand((T, K), generator=g)

    buf = dep.Buffer(RankZeroGroup(n), 1 << 30, explicitly_destroy=True, max_num_tokens=T)
    bufv = dep.Buffer(RankZeroGroup(n), 1 << 30, explicitly_destroy=True, max_num_tokens=T, zero_copy_recv=True)
    bufc = dep.Buffer(RankZeroGroup(n), 1 << 30, explicitly_destroy=True, max_num_tokens=T, num_recv_buffers=0)
    eng = eng_box[0]
    own = {"bf16": eng.ht(E, K, H, T, torch.bfloat16, False), "fp8": eng.ht(E, K, H, T, torch.float8_e4m3fn, True)}
    rows = measure(paths_for(dep, own, buf, bufv, bufc, (x, x8, s8, idx, w), E),
                   lambda fn, before: cpu_count(fn, before, stats), lambda: None, None, args.reps)
    title = ("### symm.moe.deep_ep's overhead per call, CPU stand-in (symm's calls counted, not run)\n\n"
             "- %d tokens, hidden %d, top-%d, %d experts, %d ranks (rank 0); medians of %d calls; %s"
             % (T, H, K, E, n, args.reps, _stamp()))
    for b in (buf, bufv, bufc):
        b.destroy()
    return table(rows, title, False), rows


def _stamp():
    return "%s, %s, %s" % (platform.node(), datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                           " ".join([os.path.basename(sys.executable)] + sys.argv))


def run_gpu(args):
    import torch.distributed as dist
    import symm
    import symm.moe as moe
    import symm.moe.deep_ep as dep
    sys.path.insert(0, HERE)
    from deepep_inputs import deepep_inputs
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local % torch.cuda.device_count())
    dist.init_process_group("gloo")
    symm.init()
    rank, n = symm.my_pe(), symm.n_pes()
    T, H, K, E = args.tokens, args.hidden, args.topk, args.experts
    dev = torch.device("cuda", symm.device())
    x, x8, s8, idx, w = deepep_inputs(T, H, K, E, dev, rank)
    own = {"bf16": moe.HighThroughput(E, K, H, T, x_dtype=torch.bfloat16),
           "fp8": moe.HighThroughput(E, K, H, T, x_dtype=torch.float8_e4m3fn, scales=True)}
    buf = dep.Buffer(dist.group.WORLD, int(1e9), explicitly_destroy=True, max_num_tokens=T)
    bufv = dep.Buffer(dist.group.WORLD, int(1e9), explicitly_destroy=True, max_num_tokens=T, zero_copy_recv=True)
    bufc = dep.Buffer(dist.group.WORLD, int(1e9), explicitly_destroy=True, max_num_tokens=T, num_recv_buffers=0)
    for b in (buf, bufv, bufc):  # every kernel of both APIs on every SM this PE may use
        b.set_num_sms(symm.sm_share() // 2 * 2)
    for o in own.values():
        o.set_num_sms(0)

    def timer(fn, before):
        times = []
        for _ in range(args.reps):
            if before:
                before()
            symm.barrier_on_stream()
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) * 1e3)
        return statistics.median(times)

    def sync():  # the device idle and the ranks together before a host-timed call
        torch.cuda.synchronize()
        symm.barrier()
    rows = measure(paths_for(dep, own, buf, bufv, bufc, (x, x8, s8, idx, w), E), gpu_count, sync, timer, args.reps)
    shared = n > torch.cuda.device_count()
    title = ("### symm.moe.deep_ep's overhead per call, %d PE(s)%s\n\n"
             "- %d tokens per PE, hidden %d, top-%d, %d experts; rank 0's medians of %d calls; %s GPU(s): %s; %s"
             % (n, " sharing one GPU" if shared and torch.cuda.device_count() == 1 else
                (" sharing GPUs" if shared else ", one per GPU"), T, H, K, E, args.reps, torch.cuda.device_count(),
                torch.cuda.get_device_name(), _stamp()))
    text = table(rows, title, True)
    for b in (buf, bufv, bufc):
        b.destroy()
    for o in own.values():
        o.destroy()
    symm.barrier()
    symm.finalize()
    dist.destroy_process_group()
    return (text if rank == 0 else None), rows


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="also write the table (markdown) here")
    ap.add_argument("--cpu", action="store_true", help="the CPU stand-in even where GPUs are")
    ap.add_argument("--ranks", type=int, default=4, help="ranks of the CPU stand-in (default 4)")
    ap.add_argument("--tokens", type=int)
    ap.add_argument("--hidden", type=int)
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--experts", type=int, default=256)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args(argv)
    args.gpu = not args.cpu and torch.cuda.is_available() and torch.cuda.device_count() > 0
    # DeepEP's intranode shape on GPUs; tiny shapes on the CPU (its copies would be the CPU's, not the wrapper's)
    args.tokens = args.tokens or (4096 if args.gpu else 64)
    args.hidden = args.hidden or (7168 if args.gpu else 256)
    return args


def main():
    args = parse()
    gpu = args.gpu
    if gpu and ("RANK" not in os.environ or "WORLD_SIZE" not in os.environ):
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=os.environ.get("MASTER_PORT", "29731"))
    text, _ = run_gpu(args) if gpu else run_cpu(args)
    if text:
        print(text)
        if args.out:
            with open(args.out, "w") as f:
                f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
