"""Where the fused GEMM examples' host time goes, timed on a machine without
a GPU: the Python side of each step the host makes per call.

    SYMM_BITCODE_DIR=build/bitcode python examples/triton/host_profile.py

- Triton's launch path: ag_gemm_kernel launched by kernel[grid](...)
  (symm.triton.launch: binding, specialisation, cache look-up every call)
  and by a symm.triton.prepare'd launch, the compiled kernel real (sm_90,
  the symm bitcode linked), Triton's driver a stand-in whose launcher does
  nothing, so the figures are the Python path alone;
- the prepared launches of gemm_rs.py's GemmRSCE (its GEMM and its
  finish_kernel: the two launches of a call, beside the side program's
  graph replay and two stream joins);
- per chunk of the all-gather: the views and the two copy_ calls the
  per-chunk form made (torch dispatch on CPU tensors; a GPU adds the driver
  calls), against a symm.cubin.CopyList entry (one ctypes call; the driver
  a stand-in here); a call's 24 copies one by one against replayed as one
  graph launch (the driver's own time comes on top, only on a GPU).
A GPU run prints the whole host time per call next to the stream time
(examples/triton/gemm_bars.py, column "host us/call").
"""
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.runtime import driver  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

import symm.cubin  # noqa: E402
import symm.triton as st  # noqa: E402


def per_call_us(fn, n=2000, repeats=5):
    for _ in range(100):
        fn()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(samples)


class _Tensor:
    """What Triton's launcher reads of a tensor."""

    def __init__(self, ptr, dtype):
        self.ptr, self.dtype = ptr, dtype

    def data_ptr(self):
        return self.ptr


class _Driver:
    """Triton's driver, standing in for the CUDA one: sm_90 target, a made-up
    CUfunction, a launcher that returns at once."""

    class launcher_cls:  # noqa: N801 - Triton's attribute name
        def __init__(self, src, metadata):
            pass

        def __call__(self, *args):
            pass

    class utils:  # noqa: N801
        @staticmethod
        def load_binary(name, kernel, shared, device):
            return "module", 0xF00D, 32, 0, 1024

        @staticmethod
        def get_device_properties(device):
            return {"max_shared_mem": 232448, "multiprocessor_count": 132}

    def get_current_device(self):
        return 0

    def get_current_stream(self, device):
        return 0x5000

    def get_current_target(self):
        from triton.backends.compiler import GPUTarget
        return GPUTarget("cuda", 90, 32)


class _Cuda:
    """libcuda standing in for symm.cubin: every call returns success."""

    def __getattr__(self, name):
        return lambda *args: 0


def main():
    import ag_gemm
    import _gemm as G
    rows = []
    driver.set_active(_Driver())
    bf16, i64 = tl.bfloat16, tl.int64
    cx, opts = G.split(G.GEMM_CONFIG["ag_gemm"])

    def desc(ptr, rows, cols, block):
        return TensorDescriptor(_Tensor(ptr, bf16), [rows, cols], [cols, 1], block)
    a_blk, b_blk = [cx["BM"], cx["BK"]], [cx["BK"], cx["BN"]]
    args = (0x7F0000001000, desc(1 << 20, 2048, 8192, a_blk), desc(2 << 20, 8192, 8192, a_blk),
            desc(3 << 20, 8192, 2048, b_blk), _Tensor(4 << 20, bf16), _Tensor(5 << 20, i64), _Tensor(6 << 20, i64),
            _Tensor(7 << 20, i64), 8192, 2048, 8192, 2048, 512, 4, 0, 4)
    grid = (512,)
    t0 = time.time()
    st.launch(ag_gemm.ag_gemm_kernel, grid, *args, **cx, **opts)       # compiles (sm_90)
    print("ag_gemm_kernel compiled in %.1f s" % (time.time() - t0))
    rows.append(("Triton launch: kernel[grid](...) via symm.triton.launch",
                 per_call_us(lambda: st.launch(ag_gemm.ag_gemm_kernel, grid, *args, **cx, **opts))))
    prepared = st.prepare(ag_gemm.ag_gemm_kernel, grid, *args, **cx, **opts)
    rows.append(("Triton launch: symm.triton.prepare'd (fast=%s)" % prepared.fast, per_call_us(prepared)))
    import _waits as W
    import gemm_rs
    rs_args = (0x7F0000001000, desc(1 << 20, 8192, 2048, a_blk), desc(2 << 20, 2048, 8192, b_blk),
               _Tensor(3 << 20, bf16),
               _Tensor(4 << 20, bf16), _Tensor(5 << 20, i64), _Tensor(6 << 20, i64), _Tensor(7 << 20, bf16),
               _Tensor(8 << 20, i64), 8192, 2048, 2048, 1024, 0, 4, 0)
    rs = st.prepare(gemm_rs.gemm_rs_ce_kernel, (2048,), *rs_args, VEC=True, **cx, **opts)
    rows.append(("Triton launch: gemm_rs_ce_kernel prepare'd (fast=%s)" % rs.fast, per_call_us(rs)))
    fin = st.prepare(W.finish_kernel, (1,), 0x7F0000001000, _Tensor(8 << 20, i64), _Tensor(9 << 20, i64), 8,
                     BLOCK=32, num_warps=1)
    rows.append(("Triton launch: finish_kernel prepare'd (flag reset + report)", per_call_us(fin)))

    full = torch.zeros((2, 64, 16), dtype=torch.bfloat16)
    a = torch.zeros((16, 16), dtype=torch.bfloat16)
    flags = torch.zeros((2, 16), dtype=torch.int64)
    epoch = torch.zeros(1, dtype=torch.int64)
    rows_, r = slice(16, 32), slice(4, 8)

    def chunk_views_and_copies():
        full[1, rows_][r].copy_(a[r])
        flags[1, 5:6].copy_(epoch)
    rows.append(("per chunk: views + 2 copy_ (torch dispatch, CPU tensors)", per_call_us(chunk_views_and_copies)))
    rows.append(("per call: epoch.add_(1) (torch dispatch, CPU tensor)", per_call_us(lambda: epoch.add_(1))))
    symm.cubin._driver = _Cuda()
    ce = symm.cubin.CopyList([(0x1000, 0x2000, 1 << 20), (0x3000, 0x4000, 8)])
    rows.append(("per chunk: CopyList, data + flag (ctypes, stand-in driver)", per_call_us(lambda: ce(0x5000))))
    # ag_gemm at 4 PEs, 4 chunks: 24 copies a call, issued one by one or replayed as one graph
    pairs = [(0x1000 + i * 0x100, 0x2000, 8) for i in range(24)]
    each, replay = symm.cubin.CopyList(pairs), symm.cubin.CopyList(pairs, replay=True)
    rows.append(("per call: 24-copy CopyList, one cuMemcpyAsync each (Python side)", per_call_us(lambda: each(0x5000))))
    rows.append(("per call: 24-copy CopyList, replay=True (Python side)", per_call_us(lambda: replay(0x5000))))
    print("| host step | us per call |\n| --- | --- |")
    for what, us in rows:
        print("| %s | %.1f |" % (what, us))


if __name__ == "__main__":
    main()
