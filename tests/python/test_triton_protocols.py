"""The copy-engine protocol of the Triton gemm_rs (examples/triton/gemm_rs.py,
GemmRSCE) on the CPU model of the GPUs (triton_rs_protocol_sim.py): the
example's host class, unchanged, queues its side program (symm.copyengine)
and its launches; a seeded random scheduler runs them with few block slots
per GPU on 1 to 4 PEs, one side stream or one per owner, PEs on their own
GPUs or sharing one; every call's output must match torch, nothing may
deadlock, and every count, flag and entered word must be back to zero.
Needs torch and Triton (imported, nothing compiled), no GPU. Runs in a
subprocess: the model replaces the symm module."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from symm_testutil import optional_import  # noqa: E402

SIM = os.path.join(HERE, "triton_rs_protocol_sim.py")


def test_gemm_rs_copy_engine_protocol():
    if optional_import("torch") is None or optional_import("triton") is None:
        pytest.skip("torch or triton not installed")
    r = subprocess.run([sys.executable, SIM, "--seeds", "3", "--calls", "3"], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0 and "0 failed" in r.stdout, r.stdout[-4000:] + r.stderr[-4000:]


def test_gemm_rs_ce_kernel_in_the_interpreter():
    """gemm_rs_ce_kernel itself, run by Triton's interpreter on the CPU
    (triton_rs_interp.py): stage, counts and the own band's sum."""
    if optional_import("torch") is None or optional_import("triton") is None:
        pytest.skip("torch or triton not installed")
    r = subprocess.run([sys.executable, os.path.join(HERE, "triton_rs_interp.py")], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0 and "0 failed" in r.stdout, r.stdout[-4000:] + r.stderr[-4000:]
