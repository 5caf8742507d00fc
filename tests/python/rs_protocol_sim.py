"""What the copy-engine GEMM + reduce-scatter protocol sims of the CuTe DSL
and Triton examples (cute_rs_protocol_sim.py, triton_rs_protocol_sim.py)
share on the CPU model of P GPUs of tilelang_protocol_sim.py: the stream
barrier, the model's symm with its copy-engine side, the calls queued on
every PE and their checks, and the command line that runs the cases."""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tilelang_protocol_sim as S  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
BF16 = torch.bfloat16


class StreamBarrier:
    """symm.barrier_on_stream on the model: an operation on each PE's main
    stream that completes once every PE's main stream has reached it."""

    def __init__(self, sim):
        self.sim, self.queued, self.arrived = sim, [0] * sim.P, [0] * sim.P

    def __call__(self):
        p = self.sim.cur
        self.queued[p] += 1
        i = self.queued[p]

        def ready(p=p, i=i):
            self.arrived[p] = max(self.arrived[p], i)
            return all(a >= i for a in self.arrived)
        self.sim.queue("main", S.Op("barrier", ready=ready, what="barrier_on_stream %d" % i))


def fake_symm(sim, examples, modules):
    """The model's symm (with barrier_on_stream) as the `symm` module and
    symm.copyengine's Side queuing on the model; the examples' folder on
    sys.path and the named modules unloaded, so an import reads them again
    over this model. Returns the fake symm and symm.copyengine."""
    fake = sim.fake_symm()
    fake.barrier_on_stream = StreamBarrier(sim)
    sys.modules["symm"] = fake
    sys.modules["symm.cubin"] = fake.cubin
    ce = S.load_copyengine(fake)
    ce.Side = lambda device, lanes=1: S.FakeSide(sim, lanes)
    ce.check_memops = lambda device_index: None
    if examples not in sys.path:
        sys.path.insert(0, examples)
    for name in modules:
        sys.modules.pop(name, None)
    return fake, ce


def rnd(shape, *key):
    return S.rnd(shape, *key) * 0.25


def queue_calls(sim, ops, seq, outs):
    """Call after call on every PE, in seq's order ("fused": the op itself,
    its output kept in outs[(call, PE)]; "kernel": kernel_only(); "comm":
    comm_only()), each on fresh inputs and an output filled with NaN. ops[p]
    is PE p's (op, a, b, out)."""
    for i, mode in enumerate(seq):
        for p, (op, a, b, out) in enumerate(ops):
            sim.cur = p
            sim.host(lambda a=a, b=b, out=out, i=i, p=p: (a.copy_(rnd(a.shape, "A", i, p)),
                                                         b.copy_(rnd(b.shape, "B", i, p)),
                                                         out.fill_(float("nan"))), "inputs")
            if mode == "fused":
                op(a, b, out)
                sim.host(lambda out=out, i=i, p=p: outs.__setitem__((i, p), out.clone()), "output")
            elif mode == "kernel":
                op.kernel_only(a, b, out)
            else:
                op.comm_only()


def check_outputs(seq, outs, P, m_loc, total):
    """Every fused call's output on every PE: each tile written, and PE p's
    rows of total(call) (the sum over the PEs' products) in it."""
    for i, mode in enumerate(seq):
        if mode != "fused":
            continue
        want = total(i)
        for p in range(P):
            got = outs[(i, p)]
            assert not torch.isnan(got).any(), "call %d PE %d: a tile was never written" % (i, p)
            assert S.close(got, want[p * m_loc:(p + 1) * m_loc]), "call %d PE %d wrong" % (i, p)


def run_cases(description, cases, scenario, name):
    """The sims' command line ([--seeds N] [--calls N]): scenario(sim, calls,
    *case) for every case on every seed, on a fresh model with 1 + seed % 4
    block slots (case[0] is the PE count); a line per run, named by
    name(*case). Returns the exit status: 1 when a run failed."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--calls", type=int, default=3)
    args = ap.parse_args()
    failures = 0
    for case in cases:
        for seed in range(args.seeds):
            nsm = 1 + seed % 4
            sim = S.Sim(case[0], seed, nsm)
            try:
                scenario(sim, args.calls, *case)
                status = "ok"
            except Exception as e:  # noqa: BLE001 - a wrong protocol is a failed case
                failures += 1
                status = "FAIL: %s: %s" % (type(e).__name__, str(e)[:400])
            print("%s seed=%d slots=%d: %s" % (name(*case), seed, nsm, status), flush=True)
    print("%d failed" % failures)
    return 1 if failures else 0
