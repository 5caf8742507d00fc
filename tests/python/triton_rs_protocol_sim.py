"""The copy-engine protocol of the Triton gemm_rs (examples/triton/gemm_rs.py
GemmRSCE) on the CPU model of P GPUs of tilelang_protocol_sim.py: the
example's host class, unchanged, queues its side-stream program (symm.copyengine)
and its two launches per call; a model of gemm_rs_ce_kernel (the same band,
sub-chunk and tile order, counts and flags, fp32 sums of bf16 partials) runs
one block per tile on few block slots, dispatched in order as slots free
(a grid larger than the GPU); a seeded random scheduler runs whatever can
run. Every call's output is checked against torch, calls follow each other
without a pause, kernel_only() calls are mixed in, and PEs that share a GPU
(two launches and a stream barrier) are modelled too. Needs torch and
Triton (the example imports it; nothing is compiled), no GPU.

    python3 tests/python/triton_rs_protocol_sim.py [--seeds N] [--calls N]   (exit 0: all passed)
"""
import importlib
import os
import sys
import types

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rs_protocol_sim as R  # noqa: E402
from rs_protocol_sim import BF16, S  # noqa: E402

TRITON_EX = os.path.join(R.REPO, "examples", "triton")


def cdiv(a, b):
    return -(-a // b)


def band_tile(pid, n, m_loc, bm, bn, group_m):
    """_gemm.band_tile on ints."""
    num_n = cdiv(n, bn)
    mb = m_loc // bm
    band, r = divmod(pid, mb * num_n)
    per_group = group_m * num_n
    first_m = (r // per_group) * group_m
    gsz = min(mb - first_m, group_m)
    return band, first_m + (r % per_group) % gsz, (r % per_group) // gsz


def chunk_tile(pid, n, chunk_m, bm, bn, group_m):
    chunk, pid_m, pid_n = band_tile(pid, n, chunk_m, bm, bn, group_m)
    return chunk * chunk_m + pid_m * bm, pid_n


def ce_kernel(sim, cx, grid, args):
    """A launch of the model of gemm_rs_ce_kernel with prepare()'s arguments."""
    (ctx, a, b, stage, recv, done, rflag, out, rec, n, k, m_loc, sub_m, me, npes, t0) = args
    bm, bn, gm = cx["BM"], cx["BN"], cx["GROUP_M"]
    # A and B come as TMA descriptors (_gemm.operand): the model reads their tensors
    assert list(a.block_shape) == [bm, cx["BK"]] and list(b.block_shape) == [cx["BK"], bn]
    a, b = a.base, b.base
    assert me == sim.cur and npes == sim.P and rec.numel() == 4
    band_tiles = (m_loc // bm) * cdiv(n, bn)
    subs = m_loc // sub_m
    blocks = []
    for t in range(t0, t0 + grid[0]):
        band, r = divmod(t, band_tiles)
        row0, pid_n = chunk_tile(r, n, sub_m, bm, bn, gm)
        owner = (me + 1 + band) % npes
        sub = row0 // sub_m
        c0, c1 = pid_n * bn, min(n, (pid_n + 1) * bn)
        part = (lambda r0=owner * m_loc + row0, c0=c0, c1=c1: S.mm(a[r0:r0 + bm], b[:, c0:c1]))
        if owner != me:
            def act(r0=owner * m_loc + row0, c0=c0, c1=c1, part=part, i=owner * subs + sub):
                stage[r0:r0 + bm, c0:c1] = part().to(BF16)
                S.add_flag(done, i, 1)
            blocks.append((lambda: True, act))
        else:
            peers = [(me + npes - i) % npes for i in range(1, npes)]

            def cond(peers=peers, sub=sub):
                return all(S.flag(rflag, p * subs + sub) >= 1 for p in peers)

            def act(row0=row0, c0=c0, c1=c1, part=part, peers=peers):
                acc = part()                        # fp32, as the kernel's accumulator
                for p in peers:
                    acc += recv[p * m_loc + row0:p * m_loc + row0 + bm, c0:c1].float()
                out[row0:row0 + bm, c0:c1] = acc.to(BF16)
            blocks.append((cond, act))
    sim.kernel("gemm_rs_ce", blocks)


def finish_kernel(sim, args):
    ctx, rec, flags, nflags = args

    def act():
        assert S.flag(rec, 0) == 0, "a wait gave up"
        for i in range(nflags):
            S.u64(flags.data_ptr() + 8 * i).value = 0
    sim.kernel("finish", [(lambda: True, act)])


def load_gemm_rs(sim):
    """examples/triton/gemm_rs.py over this model's symm (its symm.triton's
    prepare launching the models above, its copy-engine Side queuing on the
    model)."""
    fake, ce = R.fake_symm(sim, TRITON_EX, ("_common", "_gemm", "_waits", "gemm_rs"))
    fake.trace_label = lambda *a, **k: None
    fake.initialized = lambda: True
    fake_st = types.ModuleType("symm.triton")
    fake.triton = fake_st
    sys.modules["symm.triton"] = fake_st
    mod = importlib.import_module("gemm_rs")
    assert mod.ce is ce

    def prepare(kernel, grid, *args, **kw):
        pe = sim.cur
        if kernel is mod.gemm_rs_ce_kernel:
            cx = {k: kw[k] for k in ("BM", "BN", "BK", "GROUP_M")}

            def run():
                assert sim.cur == pe, "a launch prepared on PE %d called on PE %d" % (pe, sim.cur)
                ce_kernel(sim, cx, grid, args)
            return run
        if kernel is mod.W.finish_kernel:
            return lambda: finish_kernel(sim, args)
        raise AssertionError("the model has no kernel %r" % (kernel,))
    fake_st.prepare = prepare
    return mod


class Env:
    def __init__(self, rank, world, shared):
        self.rank, self.world, self.shared = rank, world, shared
        self.device, self.ctx = torch.device("cpu"), 0x7000


def scenario(sim, calls, P, m_loc, n, lanes, shared):
    """calls plain calls, a kernel_only(), a plain call again, on every PE."""
    mod = load_gemm_rs(sim)
    m, k = P * m_loc, 64
    cfg = dict(mod.G.GEMM_CONFIG["gemm_rs"])
    ops = []
    for p in range(P):
        sim.cur = p
        op = mod.GemmRSCE(Env(p, P, shared), m, k, n, lanes=lanes, config=cfg)
        ops.append((op, torch.empty(m, k, dtype=BF16), torch.empty(k, n, dtype=BF16),
                    torch.empty(m_loc, n, dtype=BF16)))
    seq = ["fused"] * calls + ["kernel", "fused"]
    outs = {}
    R.queue_calls(sim, ops, seq, outs)
    sim.run()
    R.check_outputs(seq, outs, P, m_loc,
                    lambda i: sum(S.mm(R.rnd((m, k), "A", i, p), R.rnd((k, n), "B", i, p)) for p in range(P)))
    for p in range(P):      # every count, flag and entered word is back to zero
        op = ops[p][0]
        for name in ("done", "rflag", "entered"):
            assert int(getattr(op, name).view(torch.int64).abs().sum()) == 0, "PE %d: %s left set" % (p, name)


def main():
    # (PEs, rows per band, N, lanes, PEs share a GPU): 1024 rows: one sub-chunk of
    # 8 row tiles per band, 2048: two; 384 rows: one sub-chunk of 3 row tiles;
    # N = 320: a masked last column tile
    cases = [(1, 1024, 256, 1, False), (2, 2048, 256, 1, False), (2, 1024, 320, 1, True),
             (3, 384, 512, "owners", False), (4, 2048, 256, 1, False), (4, 1024, 320, "owners", False),
             (4, 2048, 256, 1, True)]
    return R.run_cases(__doc__.splitlines()[0], cases, scenario,
                       lambda P, m_loc, n, lanes, shared: "triton gemm_rs ce P=%d rows/band=%d N=%d lanes=%s shared=%s"
                       % (P, m_loc, n, lanes, shared))


if __name__ == "__main__":
    sys.exit(main())
