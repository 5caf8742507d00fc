"""How much moving data beside a GEMM slows the GEMM, on one GPU: the
question behind the fused examples' overlap (issue 29: their communication
runs on the copy engines or on a few SMs next to the GEMM, and fused time
stayed 1.16-1.35x of the GEMM alone on 4 GPUs while the kernel without the
copies and the copies without the kernel each took about the GEMM's time).

Each case runs torch.matmul at one of the examples' per-PE shapes and, on a
side stream started with it, the bytes that PE's communication writes into
its memory (three quarters of the gathered operand or of the output, as on
4 PEs), moved by
  sm S       a copy kernel of S blocks (launched first, so they are resident),
             plain loads and stores
  sm S cs    the same with evict-first loads and streaming (.cs) stores, so
             the copied lines do not push the GEMM's tiles out of L2
(No copy-engine row: on one GPU a local copy runs on the SMs, with or
without cuMemcpyBatchAsync's hint to overlap compute, which the check
below shows; the fused examples' copy engines move peer data, which needs
a second GPU.) Figures: GEMM alone, copy alone, both (until both are done) and the GEMM's
own time beside the copy (its stream's events), medians of REPS windows;
"slowdown" = GEMM beside the copy / GEMM alone. On one GPU a copy reads and
writes the same HBM (a copy over NVLink reads on the sender and writes on
the receiver: the same bytes per GPU when every PE sends as much as it
receives, as in an all-gather or reduce-scatter), and whether a local copy
runs on a copy engine is checked first (a copy finishing while every SM is
held by a spinning kernel).

    python3 bench/probes/gemm_copy_probe.py [--reps 15] [--out FILE.md]
"""
import argparse
import ctypes
import os
import statistics
import sys
import time

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from symm import timing  # noqa: E402  (the examples' CUDA-event window; no libsymm needed)

MIB = 1 << 20
# (name, M, N, K, bytes the PE's communication writes into it on 4 PEs)
SHAPES = [
    ("ag_gemm square", 8192, 2048, 8192, 3 * 2048 * 8192 * 2),
    ("gemm_rs square", 8192, 8192, 2048, 3 * 2048 * 8192 * 2),
    ("ag_gemm llm", 4096, 7168, 8192, 3 * 1024 * 8192 * 2),
    ("gemm_rs llm", 4096, 8192, 7168, 3 * 1024 * 8192 * 2),
]


@triton.jit
def copy_kernel(dst, src, n16, CS: tl.constexpr, BLOCK: tl.constexpr):
    """Persistent copy of n16 16-byte words (as 4 int32 each) by the grid."""
    pid, nprog = tl.program_id(0), tl.num_programs(0)
    offs = tl.arange(0, BLOCK)
    for start in range(pid * BLOCK, n16 * 4, nprog * BLOCK):
        idx = start + offs
        m = idx < n16 * 4
        if CS:
            v = tl.load(src + idx, mask=m, eviction_policy="evict_first")
            tl.store(dst + idx, v, mask=m, cache_modifier=".cs")
        else:
            v = tl.load(src + idx, mask=m)
            tl.store(dst + idx, v, mask=m)


@triton.jit
def spin_kernel(out, ns):
    """Each block holds its SM for `ns` nanoseconds."""
    t0 = tl.extra.cuda.globaltimer()
    while tl.extra.cuda.globaltimer() - t0 < ns:
        pass
    tl.store(out + tl.program_id(0), 1)


class _Attrs(ctypes.Structure):
    """CUmemcpyAttributes: source order, two location hints, flags."""
    _fields_ = [("order", ctypes.c_int), ("src_type", ctypes.c_int), ("src_id", ctypes.c_int),
                ("dst_type", ctypes.c_int), ("dst_id", ctypes.c_int), ("flags", ctypes.c_uint)]


_ORDER_STREAM, _PREFER_OVERLAP = 1, 1


def batch_copier():
    """copy(dst, src, stream): dst.copy_(src) as a cuMemcpyBatchAsync of one
    copy with the hint to overlap compute (a copy engine where the driver
    honours it)."""
    cu = ctypes.CDLL("libcuda.so.1")
    try:
        fn, fail = cu.cuMemcpyBatchAsync_v2, False
    except AttributeError:
        fn, fail = cu.cuMemcpyBatchAsync, True
    attrs = _Attrs(_ORDER_STREAM, 0, 0, 0, 0, _PREFER_OVERLAP)
    zero = ctypes.c_size_t(0)

    def copy(dst, src, stream):
        d, sr = ctypes.c_uint64(dst.data_ptr()), ctypes.c_uint64(src.data_ptr())
        sz = ctypes.c_size_t(src.numel() * src.element_size())
        args = [ctypes.byref(d), ctypes.byref(sr), ctypes.byref(sz), ctypes.c_size_t(1), ctypes.byref(attrs),
                ctypes.byref(zero), ctypes.c_size_t(1)]
        if fail:
            args.append(ctypes.byref(ctypes.c_size_t(0)))
        rc = fn(*args, ctypes.c_void_p(stream.cuda_stream))
        if rc != 0:
            raise RuntimeError("cuMemcpyBatchAsync failed: CUresult %d" % rc)
    return copy


def timed(fn, reps):
    """Median over reps CUDA-event windows of one fn() call, us."""
    return statistics.median(timing.window_us(fn) for _ in range(reps))


def runs_beside_spin(dev, sms, copy):
    """copy() of 256 MiB issued while every SM spins: (done before the spin
    ends, so no SM ran it; copy done us; spin done us)."""
    src = torch.empty(256 * MIB, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    flag = torch.zeros(sms * 2, dtype=torch.int32, device=dev)
    side = torch.cuda.Stream()
    spin_done, copy_done = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start = torch.cuda.Event(enable_timing=True)
    spin_kernel[(sms * 2,)](flag, 1000, num_warps=32)  # compiled and loaded before the timed launch
    copy(dst, src, side)
    torch.cuda.synchronize()
    start.record()
    spin_kernel[(sms * 2,)](flag, 20_000_000, num_warps=32)
    spin_done.record()
    side.wait_event(start)
    copy(dst, src, side)
    copy_done.record(side)
    torch.cuda.synchronize()
    ok = torch.equal(dst, src)
    c, s = start.elapsed_time(copy_done) * 1000.0, start.elapsed_time(spin_done) * 1000.0
    return ok and c < 0.9 * s, c, s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--out", default=None)
    ap.add_argument("--sms", default="8,16,32", help="copy-kernel block counts")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("SKIP: gemm_copy_probe: no GPU")
        return 0
    dev = torch.device("cuda", 0)
    props = torch.cuda.get_device_properties(dev)
    nsm = props.multi_processor_count
    def memcpy(dst, src, stream):
        with torch.cuda.stream(stream):
            dst.copy_(src, non_blocking=True)

    checks = [("local cudaMemcpyAsync", runs_beside_spin(dev, nsm, memcpy)),
              ("cuMemcpyBatchAsync, prefer overlap", runs_beside_spin(dev, nsm, batch_copier()))]
    lines = ["# GEMM beside a copy on one GPU (%s, %d SMs), %s" % (props.name, nsm, time.strftime("%Y-%m-%d %H:%M UTC",
                                                                                           time.gmtime())),
             "",
             "command: `python3 bench/probes/gemm_copy_probe.py --reps %d --sms %s`" % (args.reps, args.sms),
             "",
             "256 MiB copied on a side stream while every SM spins 20 ms:"] + [
             "- %s: done at %.0f us, the spin at %.0f us: %s" % (name, c, sp, "beside the spin (a copy engine)" if ok
                                                                 else "not before the spin ended (SMs)")
             for name, (ok, c, sp) in checks] + ["",
             "| shape | M x N x K | MiB moved | mover | GEMM alone us | copy alone us | both us | GEMM beside copy us |"
             " slowdown | both / max(alone) |",
             "|---|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    print("\n".join(lines), flush=True)
    side = torch.cuda.Stream()
    for name, M, N, K, nbytes in SHAPES:
        a = torch.randn(M, K, dtype=torch.bfloat16, device=dev)
        b = torch.randn(K, N, dtype=torch.bfloat16, device=dev)
        c = torch.empty(M, N, dtype=torch.bfloat16, device=dev)
        src = torch.randint(0, 1 << 30, (nbytes // 4,), dtype=torch.int32, device=dev)
        dst = torch.empty_like(src)

        def gemm():
            torch.matmul(a, b, out=c)

        def mover(kind, S):
            def go():
                copy_kernel[(S,)](dst, src, nbytes // 16, CS=(kind == "sm cs"), BLOCK=4096, num_warps=8)
            return go

        movers = [(k, int(s)) for s in args.sms.split(",") for k in ("sm", "sm cs")]
        for _ in range(3):
            gemm()
        t_gemm = timed(gemm, args.reps)
        for kind, S in movers:
            go = mover(kind, S)
            go()
            torch.cuda.synchronize()
            t_copy = timed(go, args.reps)
            both, beside = [], []
            for _ in range(args.reps):
                e0, e1, g1 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
                main = torch.cuda.current_stream()
                e0.record()
                side.wait_stream(main)
                with torch.cuda.stream(side):
                    go()
                gemm()
                g1.record()
                main.wait_stream(side)
                e1.record()
                e1.synchronize()
                both.append(e0.elapsed_time(e1) * 1000.0)
                beside.append(e0.elapsed_time(g1) * 1000.0)
            if not torch.equal(dst, src):
                print("FAIL: %s %s: the copy is wrong" % (name, kind))
                return 1
            t_both, t_beside = statistics.median(both), statistics.median(beside)
            label = "%s %d" % (kind, S)
            row = "| %s | %dx%dx%d | %d | %s | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f |" % (
                name, M, N, K, nbytes // MIB, label, t_gemm, t_copy, t_both, t_beside, t_beside / t_gemm,
                t_both / max(t_gemm, t_copy))
            lines.append(row)
            print(row, flush=True)
            dst.zero_()
        del a, b, c, src, dst
        torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
