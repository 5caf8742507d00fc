"""All-gather + GEMM with symm.cute: C = all_gather(A) @ Bt^T, the GEMM
starting on the chunks of A that have arrived.

One grid (kernels.py ag_gemm): its first CTAs put this PE's A shard into
every PE's a_full with put_signal_block, ADD 1 on the chunk's word; the other
CTAs compute C tiles on tensor cores (mma.sync bf16 -> f32, gemm_tile),
visiting row tiles starting with their own chunk, and before a chunk's rows
thread 0 waits for the chunk's word (acquire). Checked exactly against torch (integer-valued bf16
data: every product and sum is exact in f32), timed next to symm.all_gather
followed by torch.matmul (run one after the other), and next to
torch.distributed's all_gather_into_tensor (NCCL, where every PE has a GPU of
its own) followed by torch.matmul.

    torchrun --nproc-per-node 2 examples/cute/ag_gemm.py [--cubins build-cute]
"""
import torch
import torch.distributed as dist

import _common as C
import symm

SHAPES = ((128, 256, 256), (256, 1024, 1024), (512, 2048, 4096))  # (m per PE, n, k)
COMM_CTAS = 8
BM, BN = 128, 128


def run(env, args):
    rows, ok = [], True
    w, me = env.world, env.rank
    sig = symm.zeros((w,), torch.uint64)
    ep = C.Epochs()
    for m, n, k in (SHAPES[:2] if args.quick else SHAPES):
        a_local = symm.tensor((m, k), torch.bfloat16)
        a_full = symm.tensor((w * m, k), torch.bfloat16)
        bt = torch.empty((n, k), dtype=torch.bfloat16, device=env.device)
        c = torch.empty((w * m, n), dtype=torch.float32, device=env.device)
        c_ref = torch.empty((w * m, n), dtype=torch.bfloat16, device=env.device)

        def fill(s):
            a_local.copy_(C.data(env, s, me, m * k, torch.bfloat16, integer=True).view(m, k))
            bt.copy_(C.data(env, s, 1000, n * k, torch.bfloat16, integer=True).view(n, k))
            c.zero_()

        def verify(s):
            a = torch.cat([C.data(env, s, p, m * k, torch.bfloat16, integer=True).view(m, k)
                           for p in range(w)]).float()
            return torch.equal(c, a @ bt.float().t())

        def call():
            env.k["ag_gemm"](COMM_CTAS + (w * m // BM) * (n // BN), env.ctx, c, a_full, a_local,
                             bt, sig, m, n, k, COMM_CTAS, ep.next("ag_gemm"))

        def base():
            symm.all_gather(a_full, a_local)
            torch.matmul(a_full, bt.t(), out=c_ref)

        a_dist = torch.empty((w * m, k), dtype=torch.bfloat16, device=env.device)

        def base_dist(group):
            dist.all_gather_into_tensor(a_dist, a_local, group=group)
            torch.matmul(a_dist, bt.t(), out=c_ref)

        good, t, tb = C.check_and_time(env, args, call, fill, verify, base)
        ok &= good
        rows.append(C.gemm_row("ag_gemm", (w * m, n, k), good, t, tb, C.time_dist(env, args, base_dist)))
        symm.free_tensor(a_local)
        symm.free_tensor(a_full)
    symm.free_tensor(sig)
    header = ("kernel", "M x N x K", "check", "CuTe us", "symm.all_gather + torch.matmul us",
              "ratio (base / CuTe)", "torch.distributed all_gather + torch.matmul us", "ratio (torch / CuTe)",
              "CuTe TFLOP/s")
    return "all-gather + GEMM, bf16 in (symm.cute)", header, rows, ok


if __name__ == "__main__":
    C.main(run, __doc__)
