"""GPU timing windows shared by the examples' benchmarks (CuTe DSL,
TileLang, Triton, the GEMM alone): CUDA events around calls on the current
stream, CUDA graph capture of a number of calls, and the slowest PE's
figure. Imports torch and symm when first used (so a test's stand-in for
either, put in sys.modules, is the one used)."""
import struct


def window_us(fn, calls=1):
    """fn() called `calls` times between two CUDA events on the current
    stream; microseconds per call on this PE (the host waits for the end)."""
    import torch
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(calls):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1000.0 / calls


def capture(fn, calls):
    """`calls` calls of fn() captured into one CUDA graph (thread_local
    mode: another thread, gloo or the allocator, may touch CUDA meanwhile).
    (graph, None), or (None, the reason) where capture failed; either way
    the device is synchronised after it."""
    import torch
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            for _ in range(calls):
                fn()
    except Exception as e:  # noqa: BLE001 - the caller reports the reason
        torch.cuda.synchronize()
        return None, "%s: %s" % (type(e).__name__, (str(e).splitlines() or [""])[0])
    torch.cuda.synchronize()
    return graph, None


def slowest(us):
    """The largest of every PE's figure (each PE passes its own); a
    collective's time is its slowest PE's. Every PE must call it."""
    import symm
    # host_allgather wants the same length on every PE: a fixed-width double
    return max(struct.unpack("<d", x)[0] for x in symm.host_allgather(struct.pack("<d", float(us))))
