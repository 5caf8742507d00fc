"""GEMM + reduce-scatter with symm.cute (tensor-parallel row layer):
out_r = rows r*M/n.. of the sum over PEs of A_p @ Bt_p^T, reduced inside one
Hopper GEMM (hopper_gemm.py rs_hgemm: TMA, wgmma, 4-stage pipeline).

Every PE holds a column shard A [M, K/n] of the activations and the matching
shard Bt [N, K/n] of the weight. One persistent grid per PE computes the
partial bands in the order owner = me+1, me+2, ..., me:
  - a peer's band: each tile's epilogue stores it (bf16) straight into slot
    `me` of the owner's symmetric receive buffer over NVLink, then one
    thread sets the owner's flag for that tile to the call's epoch (release,
    after a barrier of the tile's threads): the communication rides on the
    GEMM's own epilogue, no extra SMs and no copy engine;
  - its own band, last: each tile waits for the peers' flags of that tile
    (acquire), adds their partials to its own in fp32 and stores the sum.
    PE me-1 computes this PE's band first and me+1 last, so by the time the
    own band runs most partials have arrived.
Receive buffers and flags come in two parity buffers (the epoch's parity):
a peer can start call e+1 while this PE still reads call e's partials, not
call e+2. The epoch is counted per CTA on the GPU, so graphs replay it.

Checked against torch.matmul + torch.distributed's reduce_scatter_tensor (or,
where PEs share a GPU, the sum rebuilt from the seeds) with fresh data every
iteration, and timed (CUDA graphs and a plain stream) next to the GEMM alone
at the same per-PE shape and the unfused torch + NCCL.

    torchrun --nproc-per-node 4 examples/cute/gemm_rs.py [--cubins build-cute] [--shape square,llm]
"""
import torch
import torch.distributed as dist

import _common as C
import symm

BM, BN, BK = 128, 256, 64   # hopper_gemm.py's tile
# (M, K, N) of the layer, K sharded over the PEs: the square benchmark shape,
# an LLM MLP down-projection (intermediate 28672, hidden 8192, 4096 tokens), and
# a small one for quick runs and PEs sharing a GPU
SHAPES = {"square": (8192, 8192, 8192), "llm": (4096, 28672, 8192), "small": (1024, 2048, 1024)}


class GemmRS:
    """out [M/n, N] = reduce_scatter(a [M, K/n] @ bt [N, K/n]^T) on the current stream."""

    def __init__(self, env, m, k_loc, n):
        w = env.world
        self.env, self.m, self.k, self.n, self.m_loc = env, m, k_loc, n, m // w
        if m % w or self.m_loc % BM or n % BN or k_loc % BK:
            raise ValueError("gemm_rs: M/n_pes must be a multiple of %d, N of %d and K/n_pes of %d "
                             "(got M=%d over %d PEs, N=%d, K/PE=%d)" % (BM, BN, BK, m, w, n, k_loc))
        band_tiles = (self.m_loc // BM) * (n // BN)
        self.recv = symm.zeros((2 * w * self.m_loc, n), torch.bfloat16)   # [parity][sender] slots
        self.flags = symm.zeros((2 * w * band_tiles,), torch.uint64)      # [parity][sender][tile]
        self.grid = min(w * band_tiles, symm.sm_share())
        self.counters = torch.zeros(self.grid, dtype=torch.uint64, device=env.device)
        symm.barrier()

    def __call__(self, a, bt, out):
        if (a.shape != (self.m, self.k) or bt.shape != (self.n, self.k) or out.shape != (self.m_loc, self.n)
                or not (a.is_contiguous() and bt.is_contiguous() and out.is_contiguous())):
            raise ValueError("gemm_rs: expected contiguous a [%d, %d], bt [%d, %d], out [%d, %d]"
                             % (self.m, self.k, self.n, self.k, self.m_loc, self.n))
        self.env.k["rs_hgemm"](self.grid, self.env.ctx, a, bt, self.recv, self.flags, out, self.counters,
                               self.m, self.n, self.k)
        return out

    def close(self):
        torch.cuda.synchronize()
        symm.barrier()
        symm.free_tensor(self.flags)
        symm.free_tensor(self.recv)


def run(env, args):
    rows, ok = [], True
    w, me = env.world, env.rank
    reps = 5 if args.quick else 10
    names = C.gemm_shapes(env, args)
    for name in names:
        m, k, n = SHAPES[name]
        k_loc = k // w
        op = GemmRS(env, m, k_loc, n)
        a = torch.empty((m, k_loc), dtype=torch.bfloat16, device=env.device)
        bt = torch.empty((n, k_loc), dtype=torch.bfloat16, device=env.device)
        out = torch.empty((m // w, n), dtype=torch.bfloat16, device=env.device)
        part = torch.empty((m, n), dtype=torch.bfloat16, device=env.device)
        out_ref = torch.empty((m // w, n), dtype=torch.bfloat16, device=env.device)
        group, why = C.nccl_group(env)

        def unfused():
            torch.matmul(a, bt.t(), out=part)
            dist.reduce_scatter_tensor(out_ref, part, group=group)

        def inputs(s, p):
            return (C.data(env, s, p, a.numel(), torch.bfloat16).view_as(a).mul_(0.05),
                    C.data(env, s, 1000 + p, bt.numel(), torch.bfloat16).view_as(bt).mul_(0.05))

        def fill(s):
            ai, bi = inputs(s, me)
            a.copy_(ai)
            bt.copy_(bi)
            out.fill_(float("nan"))

        worst = [0.0]

        def verify(s):
            if group is not None:
                unfused()
            else:
                total = torch.zeros((m // w, n), dtype=torch.float32, device=env.device)
                for p in range(w):
                    ai, bi = inputs(s, p)
                    total += torch.matmul(ai[me * (m // w):(me + 1) * (m // w)], bi.t()).float()
                out_ref.copy_(total)
            good, err = C.close_to(out, out_ref)
            worst[0] = max(worst[0], err)
            return good

        good = C.check(env, lambda: op(a, bt, out), fill, verify)
        ok &= good
        fused = C.graph_stream_us(lambda: op(a, bt, out), reps)
        alone = C.graph_stream_us(lambda: env.k["hgemm"](C.gemm_grid(m, n), a, bt, part, m, n, k_loc), reps)
        base = C.graph_stream_us(unfused, reps) if group is not None else "n/a: " + why
        rows += C.overlap_rows("gemm_rs %s" % name, (m, n, k_loc), good, fused, alone, base)
        env.log("gemm_rs %s: check %s (max |diff| %.2e over %d iterations)"
                % (name, "ok" if good else "WRONG", worst[0], env.iters))
        op.close()
    return ("GEMM + reduce-scatter, bf16 (symm.cute, Hopper TMA + wgmma GEMM; partials pushed by the "
            "epilogue, reduced in the own band's epilogue)", C.OVERLAP_HEADER, rows, ok)


if __name__ == "__main__":
    C.main(run, __doc__)
