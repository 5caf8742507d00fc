"""The copy-engine protocols of the fused TileLang GEMM examples (ag_gemm,
gemm_rs, cannon, summa) on a CPU model of the GPUs
(tilelang_protocol_sim.py): the examples' host code, unchanged, queues its
copies, stream waits and kernels; a seeded random scheduler runs them with
few block slots per GPU; every call's output must match torch and nothing
may deadlock. Needs torch, not TileLang or a GPU. Runs in a subprocess: the
model replaces the symm module."""
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from symm_testutil import optional_import  # noqa: E402

SIM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tilelang_protocol_sim.py")


@pytest.mark.parametrize("example", ["ag_gemm", "gemm_rs", "cannon", "summa"])
def test_protocol(example):
    if optional_import("torch") is None:
        pytest.skip("torch not installed")
    r = subprocess.run([sys.executable, SIM, "--seeds", "2", "--calls", "2", "--only", example],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "0 failed" in r.stdout, r.stdout[-4000:] + r.stderr[-4000:]
