"""The copy-engine protocols of the fused TileLang GEMM examples (ag_gemm,
gemm_rs, cannon, summa) on a CPU model of the GPUs
(tilelang_protocol_sim.py): the examples' host code, unchanged, queues its
copies, stream waits and kernels; a seeded random scheduler runs them with
few block slots per GPU; every call's output must match torch and nothing
may deadlock. Then each GEMM example's whole run() (variants, timings,
rows) on that model, one thread per PE (tilelang_example_hosts.py). Needs
torch, not TileLang or a GPU. Runs in subprocesses: the model replaces the
symm module."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from symm_testutil import REPO, optional_import  # noqa: E402

SIM = os.path.join(HERE, "tilelang_protocol_sim.py")
HOSTS = os.path.join(HERE, "tilelang_example_hosts.py")


@pytest.mark.parametrize("example", ["ag_gemm", "gemm_rs", "cannon", "summa"])
def test_protocol(example):
    if optional_import("torch") is None:
        pytest.skip("torch not installed")
    r = subprocess.run([sys.executable, SIM, "--seeds", "2", "--calls", "2", "--only", example],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "0 failed" in r.stdout, r.stdout[-4000:] + r.stderr[-4000:]


@pytest.mark.parametrize("example", ["gemm", "ag_gemm", "gemm_rs", "cannon", "summa"])
def test_example_host_side(example):
    if optional_import("torch") is None:
        pytest.skip("torch not installed")
    r = subprocess.run([sys.executable, HOSTS, "--pes", "1", "4", "--only", example],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "0 failed" in r.stdout, r.stdout[-4000:] + r.stderr[-4000:]


def test_copy_within_one_gpu_is_refused():
    """Such a copy may run on the SMs, behind GEMM blocks that wait for the
    flag queued after it (Cannon's skew to its own PE once hung that way)."""
    if optional_import("torch") is None:
        pytest.skip("torch not installed")
    code = ("import sys; sys.path[:0] = [%r]\n"
            "from symm import copyengine as ce\n"
            "p = ce.Program(1)\n"
            "p.copy(ce.PeerAddr(4096), 8192, 64)\n"
            "p.copy(4096, ce.PeerAddr(8192), 64)\n"
            "try:\n"
            "    p.copy(4096, 8192, 64)\n"
            "except ValueError as e:\n"
            "    print('refused:', e)\n"
            "print(p.count(), p.describe())\n") % os.path.join(REPO, "python")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "refused: copy 0x1000 <- 0x2000 (64 bytes): both ends are on this GPU" in r.stdout, r.stdout
    assert "2 1 lanes, 2 copies" in r.stdout, r.stdout
