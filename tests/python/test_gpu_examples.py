"""The Triton examples (examples/triton), each checked against torch + NCCL
on GPUs with fresh random data, at small shapes.

Run: torchrun --nproc-per-node N -m pytest tests/python  (N = 1, 2, 4...).
"""
import os
import sys

import pytest

pytestmark = pytest.mark.gpu

EXAMPLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                            "examples", "triton")


def shapes(w):
    return {
        "ring_shift": dict(numel=1000003),
        "all_gather": dict(numel=100003),
        "all_to_all": dict(numel=50001),
        "all_reduce": dict(numel=100001),
        "ag_gemm": dict(m=512 * w, k=512, n=256 * w),
        "gemm_rs": dict(m=256 * w, k=256 * w, n=384),
        "seq_all_to_all": dict(seq=1024 * w, heads=8 * w, dim=64),
    }


@pytest.mark.parametrize("name", list(shapes(1)))
def test_example(pe, name):
    if EXAMPLES_DIR not in sys.path:
        sys.path.insert(0, EXAMPLES_DIR)
    import importlib
    mod = importlib.import_module(name)
    res = mod.run(**shapes(pe.world)[name], bench=False)
    assert res["ok"], "%s failed its check on some PE" % name
