"""The copy-engine protocol of the CuTe DSL gemm_rs (examples/cute/gemm_rs.py
GemmRSCE) on the CPU model of P GPUs of tilelang_protocol_sim.py: the
example's host class, unchanged, queues its side-stream program, fills and
kernel launches; a model of hopper_gemm.py's rs_hgemm_ce (same band and tile
order, same counts and flags, the same sums on bf16 tensors) runs as a
persistent grid on few block slots; a seeded random scheduler runs whatever
can run. Every call's output is checked against torch, calls follow each
other without a pause (a host far ahead of its GPUs), the diagnostic
kernel_only() and comm_only() calls are mixed in, and PEs that share a GPU (two launches
and a stream barrier) are modelled too. Needs torch only.

    python3 tests/python/cute_rs_protocol_sim.py [--seeds N] [--calls N]   (exit 0: all passed)
"""
import importlib.util
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rs_protocol_sim as R  # noqa: E402
from rs_protocol_sim import BF16, S  # noqa: E402

CUTE = os.path.join(R.REPO, "examples", "cute")


def tile_coords(t, band_tiles_m, tiles_n, nbands, first, group_m):
    """hopper_gemm.py tile_coords on ints: (band, row tile in it, column tile)."""
    per_band = band_tiles_m * tiles_n
    bi, r = divmod(t, per_band)
    band = (first + bi) % nbands
    per_group = group_m * tiles_n
    g, rr = divmod(r, per_group)
    first_m = g * group_m
    gsz = min(band_tiles_m - first_m, group_m)
    return band, first_m + rr % gsz, rr // gsz


def rs_ce_kernel(sim, mod):
    """The model of rs_hgemm_ce, launched as symm.cubin launches the built one."""
    BM, BN, GROUP_M = mod.BM, mod.BN, mod.GROUP_M

    def launch(grid, ctx, a, bt, stage, recv, done, rflag, out, rec, m, n, k, sub_m, t0, t1, prefetch):
        P, me = sim.P, sim.cur
        m_loc = m // P
        band_tiles_m, tiles_n = m_loc // BM, n // BN
        subs, sub_tiles_m = m_loc // sub_m, sub_m // BM
        assert grid == sim.nsm, "the persistent grid is one block per slot"
        assert a.shape == (m, k) and bt.shape == (n, k) and out.shape == (m_loc, n) and prefetch in (0, 1)
        blocks = []
        for t in range(t0, t1):
            owner, tm, tn = tile_coords(t, band_tiles_m, tiles_n, P, (me + 1) % P, GROUP_M)
            sub = tm // sub_tiles_m
            r0, c0 = owner * m_loc + tm * BM, tn * BN
            part = (lambda r0=r0, c0=c0: S.mm(a[r0:r0 + BM], bt[c0:c0 + BN].t()))
            if owner != me:
                def act(r0=r0, c0=c0, part=part, i=owner * subs + sub):
                    stage[r0:r0 + BM, c0:c0 + BN] = part().to(BF16)
                    S.add_flag(done, i, 1)
                blocks.append((lambda: True, act))
            else:
                peers = [(me + P - i) % P for i in range(1, P)]

                def cond(peers=peers, sub=sub):
                    return all(S.flag(rflag, p * subs + sub) >= 1 for p in peers)

                def act(tm=tm, c0=c0, part=part, peers=peers):
                    acc = part().to(BF16).float()      # the kernel stages its own partial as bf16
                    for p in peers:
                        acc += recv[p * m_loc + tm * BM:p * m_loc + (tm + 1) * BM, c0:c0 + BN].float()
                    out[tm * BM:(tm + 1) * BM, c0:c0 + BN] = acc.to(BF16)
                blocks.append((cond, act))
        sim.kernel("rs_hgemm_ce", blocks, sim.nsm)
    return S.FakeKernel(lambda *args: launch(*args))


def report_kernel(sim):
    """wait_report: no wait of the model gives up, so its record stays empty."""
    def launch(grid, ctx, rec):
        def act():
            assert int(rec.view(torch.int64).abs().sum()) == 0, "a wait gave up"
        sim.kernel("wait_report", [(lambda: True, act)])
    return S.FakeKernel(lambda *args: launch(*args))


class Env:
    def __init__(self, rank, world, shared, kernels):
        self.rank, self.world, self.shared, self.k = rank, world, shared, kernels
        self.device, self.ctx = torch.device("cpu"), 0


def load_gemm_rs(sim):
    """examples/cute/gemm_rs.py (and its _common, symm.copyengine) over this
    model's symm; the copy-engine Side queues on the model."""
    _, ce = R.fake_symm(sim, CUTE, ("_common", "cute_gemm_rs_model"))
    spec = importlib.util.spec_from_file_location("cute_gemm_rs_model", os.path.join(CUTE, "gemm_rs.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.ce is ce
    return mod


def scenario(sim, calls, P, m_loc, lanes, shared):
    """calls plain calls, a kernel_only(), a plain call again, on every PE."""
    mod = load_gemm_rs(sim)
    m = P * m_loc
    # two column tiles where the receive buffer fits the model's heap, else one
    k, n = 64, (2 if P * m_loc * 2 * mod.BN * 2 <= S.Sim.HEAP * 3 // 4 else 1) * mod.BN
    ops = []
    for p in range(P):
        sim.cur = p
        env = Env(p, P, shared, {"rs_hgemm_ce": rs_ce_kernel(sim, mod), "wait_report": report_kernel(sim)})
        op = mod.GemmRSCE(env, m, k, n, lanes=lanes)
        ops.append((op, torch.empty(m, k, dtype=BF16), torch.empty(n, k, dtype=BF16),
                    torch.empty(m_loc, n, dtype=BF16)))
    # the diagnostics: the kernel alone, and the copies alone (one PE per GPU only)
    seq = ["fused"] * calls + ["kernel", "fused"] + ([] if shared else ["comm", "fused"])
    outs = {}
    R.queue_calls(sim, ops, seq, outs)
    sim.run()
    R.check_outputs(seq, outs, P, m_loc,
                    lambda i: sum(S.mm(R.rnd((m, k), "A", i, p), R.rnd((n, k), "B", i, p).t()) for p in range(P)))
    for p in range(P):      # every count and flag is back to zero, ready for the next call
        op = ops[p][0]
        assert int(op.done.view(torch.int64).abs().sum()) == 0, "PE %d: counts left set" % p
        assert int(op.rflag.view(torch.int64).abs().sum()) == 0, "PE %d: flags left set" % p


def main():
    # (PEs, rows per band, lanes, PEs share a GPU): 1024 rows: one sub-chunk per band, 2048: two
    cases = [(1, 1024, 1, False), (2, 2048, 1, False), (2, 1024, 1, True), (3, 1024, "owners", False),
             (4, 2048, 1, False), (4, 1024, "owners", False), (4, 2048, 1, True)]
    return R.run_cases(__doc__.splitlines()[0], cases, scenario,
                       lambda P, m_loc, lanes, shared: "gemm_rs ce P=%d rows/band=%d lanes=%s shared=%s"
                       % (P, m_loc, lanes, shared))


if __name__ == "__main__":
    sys.exit(main())
