"""pytest setup shared by tests/python.

Two ways these tests run:
  ctest / plain pytest     the single-process tests (no GPU needed); GPU tests skip
  torchrun --nproc-per-node N -m pytest tests/python
                           the GPU tests (marked gpu), one process per PE; the
                           single-process tests skip there, since they need to run
                           only once
"""
import os
import random
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))

UNDER_LAUNCHER = "WORLD_SIZE" in os.environ and "LOCAL_RANK" in os.environ


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs GPUs; run with torchrun --nproc-per-node N -m pytest tests/python")


def pytest_collection_modifyitems(config, items):
    if not UNDER_LAUNCHER:
        return
    skip = pytest.mark.skip(reason="single-process test: it runs without torchrun (ctest)")
    for item in items:
        if "gpu" not in item.keywords:
            item.add_marker(skip)


class PE:
    """What a GPU test knows about its process: rank, world, device, seed."""

    def __init__(self, torch, rank, world, device, seed):
        self.torch, self.rank, self.world, self.device, self.seed = torch, rank, world, device, seed
        self.iteration = 0

    def next_seed(self):
        """A fresh seed for every test and iteration, the same on every PE."""
        self.iteration += 1
        return self.seed * 1000003 + self.iteration


@pytest.fixture(scope="session")
def pe():
    """symm and torch.distributed (NCCL, for references) set up once per process."""
    torch = pytest.importorskip("torch")
    if not UNDER_LAUNCHER:
        pytest.skip("GPU test: run with torchrun --nproc-per-node N -m pytest tests/python")
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        pytest.skip("no CUDA device on this machine")
    local = int(os.environ["LOCAL_RANK"])
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ["WORLD_SIZE"]))
    if torch.cuda.device_count() < local_world:
        pytest.skip("needs %d GPUs, found %d" % (local_world, torch.cuda.device_count()))
    os.environ.setdefault("SYMM_WAIT_TIMEOUT", "60")  # a hang becomes a failure with a message
    torch.cuda.set_device(local)
    import torch.distributed as dist
    dist.init_process_group("nccl")
    import symm
    symm.init()
    assert symm.device() == local, (symm.device(), local)
    seed = symm.host_broadcast(random.getrandbits(31).to_bytes(4, "little"), 0)
    info = PE(torch, symm.my_pe(), symm.n_pes(), torch.device("cuda", local),
              int.from_bytes(seed, "little"))
    if info.rank == 0:
        print("\nsymm GPU tests: %d PEs, seed %d" % (info.world, info.seed))
    yield info
    torch.cuda.synchronize()
    symm.finalize()
    dist.destroy_process_group()
