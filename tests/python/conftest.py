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


def pytest_addoption(parser):
    parser.addoption("--shard", default="", metavar="I/K",
                     help="run only the tests whose index is I modulo K (0 <= I < K): K jobs of one "
                          "process each run the suite in parallel, compiling its kernels in parallel "
                          "into a shared TRITON_CACHE_DIR")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs GPUs; run with torchrun --nproc-per-node N -m pytest tests/python")


def _shard(config):
    text = config.getoption("--shard")
    if not text:
        return None
    try:
        i, k = (int(x) for x in text.split("/"))
    except ValueError:
        raise pytest.UsageError("--shard wants I/K with 0 <= I < K, not %r" % text) from None
    if not 0 <= i < k:
        raise pytest.UsageError("--shard wants I/K with 0 <= I < K, not %r" % text)
    return i, k


def pytest_collection_modifyitems(config, items):
    shard = _shard(config)
    if shard:
        i, k = shard
        keep = [it for n, it in enumerate(items) if n % k == i]
        config.hook.pytest_deselected(items=[it for n, it in enumerate(items) if n % k != i])
        items[:] = keep
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


def mps_running():
    """Is an MPS control daemon there to join (its pipe in
    CUDA_MPS_PIPE_DIRECTORY, by default /tmp/nvidia-mps)?"""
    pipes = os.environ.get("CUDA_MPS_PIPE_DIRECTORY") or "/tmp/nvidia-mps"
    return os.path.exists(os.path.join(pipes, "control"))


@pytest.fixture(scope="session")
def pe():
    """symm and torch.distributed set up once per process. The group is gloo,
    not NCCL: NCCL refuses two ranks on one GPU, which is how PEs share a GPU
    (references come from the data's seeds; gloo only carries small
    host-side exchanges)."""
    torch = pytest.importorskip("torch")
    if not UNDER_LAUNCHER:
        pytest.skip("GPU test: run with torchrun --nproc-per-node N -m pytest tests/python")
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        pytest.skip("no CUDA device on this machine")
    local = int(os.environ["LOCAL_RANK"])
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ["WORLD_SIZE"]))
    ngpu = torch.cuda.device_count()
    per_gpu = -(-local_world // ngpu)
    if per_gpu > 2 and not mps_running():
        pytest.skip("%d PEs on %d GPU(s) need an MPS daemon (README, 'Develop on one GPU')"
                    % (local_world, ngpu))
    os.environ.setdefault("SYMM_WAIT_TIMEOUT", "60")  # a hang becomes a failure with a message
    torch.cuda.set_device(local % ngpu)
    import torch.distributed as dist
    dist.init_process_group("gloo")
    import symm
    symm.init()
    assert symm.device() == local % ngpu, (symm.device(), local, ngpu)
    seed = symm.host_broadcast(random.getrandbits(31).to_bytes(4, "little"), 0)
    info = PE(torch, symm.my_pe(), symm.n_pes(), torch.device("cuda", local % ngpu),
              int.from_bytes(seed, "little"))
    if info.rank == 0:
        shared = " (%d per GPU, sharing %d GPU(s))" % (per_gpu, ngpu) if per_gpu > 1 else ""
        print("\nsymm GPU tests: %d PEs%s, seed %d" % (info.world, shared, info.seed))
    yield info
    torch.cuda.synchronize()
    symm.finalize()
    dist.destroy_process_group()
