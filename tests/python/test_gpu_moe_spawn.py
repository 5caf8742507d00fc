"""pplx-kernels' way of starting, on GPUs: processes from
torch.multiprocessing.spawn with an explicit torch.distributed group and no
launcher variables, then symm.moe.nvshmem_init(rank, local_rank, world_size,
device) and pplx's dispatch/combine round (tests/python/moe_spawn.py). Run it
without torchrun (it starts its own processes):

    python -m pytest -q tests/python/test_gpu_moe_spawn.py

It skips, saying so, without two GPUs.
"""
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from symm_testutil import child_env  # noqa: E402

torch = pytest.importorskip("torch")
HERE = os.path.dirname(os.path.abspath(__file__))


def test_pplx_start_in_spawned_processes():
    if "WORLD_SIZE" in os.environ and "LOCAL_RANK" in os.environ:
        pytest.skip("runs its own processes: start it without torchrun")
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if n < 2:
        pytest.skip("needs 2 GPUs, this machine has %d" % n)
    world = 4 if n >= 4 else 2
    r = subprocess.run([sys.executable, os.path.join(HERE, "moe_spawn.py"), "gpu", str(world)],
                       env=child_env({"SYMM_WAIT_TIMEOUT": os.environ.get("SYMM_WAIT_TIMEOUT", "15")}),
                       capture_output=True, text=True, timeout=240)
    if r.returncode == 77:
        pytest.skip(r.stdout.strip())
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    assert "moe_spawn gpu: passed on %d processes" % world in r.stdout
