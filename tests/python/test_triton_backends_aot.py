"""The per-backend device bitcode links into Triton kernels ahead of time
(sm_90, no GPU): libsymm_device_nvshmem_sm90.bc with NVSHMEM's own
libnvshmem_device.bc, and libsymm_device_nccl_sm90.bc, which carries NCCL's
device API. A kernel calling a put, a put with signal, an atomic, a quiet and a
barrier compiles to a cubin for each, and its PTX holds what only that
backend's path has (docs/backends.md).
"""
import os
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from symm_testutil import PYTHON_DIR, in_ci  # noqa: E402

sys.path.insert(0, PYTHON_DIR)

try:
    import triton  # noqa: F401
    HAVE_TRITON = True
except ImportError:
    if in_ci():
        raise
    HAVE_TRITON = False

pytestmark = pytest.mark.skipif(not HAVE_TRITON, reason="triton not installed (pip install triton==3.6.0)")

from symm import _backends  # noqa: E402

# every backend of the list with its own device calls and a bitcode file
BACKENDS = [b.name for b in _backends.BACKENDS.values() if b.far and b.bitcode]

KERNEL = '''
import triton
import triton.language as tl
import symm.triton as st


@triton.jit
def k(ctx, dst, src, sig, word, out, pe):
    st.put_block(ctx, dst, src, 1024, pe)
    st.put_signal(ctx, dst, src, 8, sig, 1, st.SIGNAL_ADD, pe)
    tl.store(out, st.atomic_fetch_add_u64(ctx, word, 1, pe))
    st.quiet(ctx)
    st.barrier_block(ctx)
'''

# What only the backend's own path puts in the PTX, where known: NVSHMEM's
# per-module device state; the write-through store of NCCL's GIN proxy queue.
MARKS = {"nvshmem": "nvshmemi_device_state_d", "nccl": "st.global.wt.v4.u32"}


def _libs(backend):
    from symm import _lib
    import symm.triton as st
    try:
        return st.extern_libs(90, backend=backend)
    except _lib.LibraryNotFoundError as e:
        if in_ci() and backend == "nvshmem":  # its bitcode and NVSHMEM's are always there in CI
            raise
        pytest.skip(str(e))


@pytest.mark.parametrize("backend", BACKENDS)
def test_links_and_assembles(backend, monkeypatch):
    import importlib.util

    from triton.backends.compiler import GPUTarget
    libs = _libs(backend)
    tmp = tempfile.mkdtemp(prefix="symm-be-aot-")
    monkeypatch.setenv("TRITON_CACHE_DIR", os.path.join(tmp, "cache"))
    path = os.path.join(tmp, "kernels_%s.py" % backend)
    with open(path, "w") as f:
        f.write(KERNEL)
    spec = importlib.util.spec_from_file_location("kernels_%s" % backend, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sig = {"ctx": "i64", "dst": "*u8", "src": "*u8", "sig": "*u64", "word": "*u64", "out": "*u64", "pe": "i32"}
    src = triton.compiler.ASTSource(fn=mod.k, signature=sig, constexprs={})
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"extern_libs": libs, "num_warps": 4})
    ptx = k.asm["ptx"]
    assert k.asm.get("cubin"), "no cubin for the %s kernel" % backend
    if backend in MARKS:
        assert MARKS[backend] in ptx, "the %s kernel's PTX lacks %r" % (backend, MARKS[backend])
    devlib = _backends.get(backend).device_lib
    if devlib:  # the library's own device bitcode, linked beside symm's under the backend's name
        assert backend in libs and libs[backend].endswith(devlib + ".bc"), libs
