"""The fused Triton GEMMs' tile orders, computed by their own order functions
(examples/triton/_gemm.py) under Triton's interpreter on the CPU, for
test_tile_order.py, which runs this file in a process of its own (the
interpreter is chosen when triton loads, for the whole process):

    python tile_order_orders.py '{"ag": [[me, npes, m_loc, n, chunk_m, group_m], ...],
                                  "chunk": [[rows, n, chunk_m, group_m], ...],
                                  "band": [[rows, n, m_loc, group_m], ...]}'

prints the same keys, each case's list of tiles in program order: ag
(source PE, first row in its shard, column tile), chunk and band (first
row, column tile).
"""
import importlib.util
import json
import os
import sys

os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "_gemm", os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "triton", "_gemm.py"))
G = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(G)
BM, BN = 128, 256


@triton.jit
def _ag_order(out, me, npes, N, M_LOC, CHUNK_M, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    src, row, pid_n = G.ag_tile(pid, me, npes, N, M_LOC, CHUNK_M, BM, BN, GROUP_M)
    tl.store(out + pid * 3, src)
    tl.store(out + pid * 3 + 1, row)
    tl.store(out + pid * 3 + 2, pid_n)


@triton.jit
def _chunk_order(out, N, CHUNK_M, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    row, pid_n = G.chunk_tile(pid, N, CHUNK_M, BM, BN, GROUP_M)
    tl.store(out + pid * 2, row)
    tl.store(out + pid * 2 + 1, pid_n)


@triton.jit
def _band_order(out, N, M_LOC, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    band, pid_m, pid_n = G.band_tile(pid, N, M_LOC, BM, BN, GROUP_M)
    tl.store(out + pid * 2, band * M_LOC + pid_m * BM)
    tl.store(out + pid * 2 + 1, pid_n)


def _run(kernel, tiles, width, *args, group_m):
    out = torch.full((tiles * width,), -1, dtype=torch.int32)
    kernel[(tiles,)](out, *args, BM=BM, BN=BN, GROUP_M=group_m)
    return out.view(-1, width).tolist()


def main():
    cases = json.loads(sys.argv[1])
    res = {
        "ag": [_run(_ag_order, npes * (m_loc // BM) * triton.cdiv(n, BN), 3, me, npes, n, m_loc, chunk_m,
                    group_m=gm) for me, npes, m_loc, n, chunk_m, gm in cases.get("ag", [])],
        "chunk": [_run(_chunk_order, (rows // BM) * triton.cdiv(n, BN), 2, n, chunk_m, group_m=gm)
                  for rows, n, chunk_m, gm in cases.get("chunk", [])],
        "band": [_run(_band_order, (rows // BM) * triton.cdiv(n, BN), 2, n, m_loc, group_m=gm)
                 for rows, n, m_loc, gm in cases.get("band", [])],
    }
    print(json.dumps(res))


if __name__ == "__main__":
    main()
