"""Which libsymm_device*.bc the extern declarations link.

The bitcode is per architecture (bitcode/README.md) and per backend
(docs/backends.md), and both are known only when a kernel is compiled, so the
path is resolved when CuTe DSL first declares a symm function in a module:
from the architecture and backend symm.cute.compile (or `with
symm.cute.target(arch, backend=...):`) was given, else the current GPU's
(else sm_90, whose file serves sm_90 and newer, and so CuTe DSL's default
target as well) and the running symm's backend (else $SYMM_BACKEND, else native);
the traced file (docs/trace.md) when symm.cute.compile(..., trace=True) or
target(..., trace=True) asks for it, else when $SYMM_TRACE is set.
"""
import contextlib
import contextvars
import os

import cutlass.cute as cute

from .. import _backends, _lib

_ARCH = contextvars.ContextVar("symm_cute_arch", default=None)
_BACKEND = contextvars.ContextVar("symm_cute_backend", default=None)
_TRACE = contextvars.ContextVar("symm_cute_trace", default=None)
BACKENDS = _lib.BACKENDS


def parse_arch(arch):
    """90, "90", "sm_90", "sm_90a" -> 90."""
    if isinstance(arch, int) and not isinstance(arch, bool):
        return arch
    if isinstance(arch, str):
        digits = arch.lower().replace("sm_", "").replace("sm", "").rstrip("af")
        if digits.isdigit():
            return int(digits)
    raise ValueError("arch %r: expected e.g. 90, 'sm_90' or 'sm_90a'" % (arch,))


def current_device_arch():
    """Compute capability of the current CUDA device as 90, 100...; None
    without a driver or a GPU."""
    try:
        from cuda.bindings import driver as cu
    except ImportError:
        return None
    try:
        err, = cu.cuInit(0)
        if err != cu.CUresult.CUDA_SUCCESS:
            return None
        err, dev = cu.cuCtxGetDevice()
        if err != cu.CUresult.CUDA_SUCCESS:
            err, dev = cu.cuDeviceGet(0)
            if err != cu.CUresult.CUDA_SUCCESS:
                return None
        a = cu.CUdevice_attribute
        err, major = cu.cuDeviceGetAttribute(a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
        err2, minor = cu.cuDeviceGetAttribute(a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
        if err != cu.CUresult.CUDA_SUCCESS or err2 != cu.CUresult.CUDA_SUCCESS:
            return None
        return major * 10 + minor
    except Exception:  # noqa: BLE001 - no usable driver: fall back to the default
        return None


def selected_arch():
    arch = _ARCH.get()
    if arch is None:
        arch = current_device_arch() or 90
    return arch


def resolve_backend(backend=None):
    """`backend` checked ("native", "nvshmem", "nccl"); None: the running
    symm's backend, else $SYMM_BACKEND before symm.init, else native
    (symm._runtime.compile_backend)."""
    if backend is None:
        from .. import _runtime
        return _runtime.compile_backend()
    return _lib.check_backend(backend, "symm.cute: ")


def selected_backend():
    return _BACKEND.get() or resolve_backend()


def selected_trace():
    """Whether the bitcode declared now is the traced one: target()'s
    choice, else $SYMM_TRACE."""
    t = _TRACE.get()
    return _lib.trace_requested(None) if t is None else t


def nvshmem_device_bitcode(arch=90):
    """NVSHMEM's device bitcode that CuTe DSL can link for `arch`.

    libNVVM (CuTe DSL's backend, unlike Triton's LLVM) refuses the section
    markers (".text.compute") of the generic libnvshmem_device.bc that
    NVSHMEM 3.4 ships; newer NVSHMEM (3.8.0 checked) ships
    libnvshmem_device_sm_<arch>.bc files, which it accepts. So: the file
    $SYMM_NVSHMEM_DEVICE_BC names, else the per-architecture file of the pip
    package, else an error that says why the generic file will not do."""
    env = os.environ.get("SYMM_NVSHMEM_DEVICE_BC")
    if env:
        if not os.path.isfile(env):
            raise _lib.LibraryNotFoundError("SYMM_NVSHMEM_DEVICE_BC=%s: no such file" % env)
        return env
    d = _lib._pip_lib_dir("nvshmem")
    a = parse_arch(arch)
    names = ["libnvshmem_device_sm_%d.bc" % a] + (["libnvshmem_device_sm_90.bc"] if a > 90 else [])
    for name in names:
        if d and os.path.isfile(os.path.join(d, name)):
            return os.path.join(d, name)
    if d and os.path.isfile(os.path.join(d, "libnvshmem_device.bc")):
        raise _lib.LibraryNotFoundError(
            "symm.cute on nvshmem: %s has only the generic libnvshmem_device.bc, whose section markers "
            "libNVVM (CuTe DSL's compiler) rejects; CuTe kernels need NVSHMEM's per-architecture "
            "bitcode (%s, in nvidia-nvshmem-cu13 3.8.0) or SYMM_NVSHMEM_DEVICE_BC naming such a file. "
            "Triton kernels link the generic file." % (d, names[0]))
    raise _lib.LibraryNotFoundError(
        "symm.cute on nvshmem: NVSHMEM's device bitcode (%s) not found (looked in %s); pip install "
        "nvidia-nvshmem-cu13 or set SYMM_NVSHMEM_DEVICE_BC" % (names[0], d or "no pip package nvidia.nvshmem"))


def link_files(arch, backend, trace=None):
    """The bitcode files a kernel for (arch, backend) links, checked to exist:
    symm's file (traced with trace=True; None: $SYMM_TRACE), and on a backend
    with a device library of its own (nvshmem) that library's bitcode after it."""
    backend = resolve_backend(backend)
    b = _backends.get(backend)
    if not b.far:
        path = _lib.bitcode_path(arch, trace=trace)
        if not os.path.isfile(path):
            raise _lib.LibraryNotFoundError("%s not found (build the bitcode, or set SYMM_BITCODE_DIR)" % path)
        return [path]
    files = [_lib.bitcode_path(arch, backend=backend, trace=trace)]
    if b.device_lib:
        find = _DEVICE_LIB_FINDERS.get(b.device_lib)
        if find is None:
            raise _lib.LibraryNotFoundError("symm.cute on %s: no finder for its device library %s "
                                            "(symm/cute/_bitcode.py, _DEVICE_LIB_FINDERS)" % (backend, b.device_lib))
        files.append(find(arch))
    return files


# list.h's device_lib -> the function that finds that library's bitcode for
# an architecture in a form libNVVM accepts
_DEVICE_LIB_FINDERS = {"libnvshmem_device": nvshmem_device_bitcode}


@contextlib.contextmanager
def target(arch, backend=None, trace=None):
    """Compile the kernels traced inside for `arch` and a symm backend (None:
    the running one); selects symm's bitcode, the traced one with trace=True
    (None: $SYMM_TRACE; docs/trace.md). On nvshmem a plain cute.compile
    must also link NVSHMEM's bitcode: symm.cute.compile does that."""
    a_token = _ARCH.set(parse_arch(arch))
    b_token = _BACKEND.set(resolve_backend(backend))
    t_token = _TRACE.set(_lib.trace_requested(trace))
    try:
        yield
    finally:
        _TRACE.reset(t_token)
        _BACKEND.reset(b_token)
        _ARCH.reset(a_token)


class _SymmBitCode(cute.BitCode):
    """A cute.BitCode whose path is chosen when a module declares a call."""

    def __init__(self):  # the dataclass field is replaced by the property
        pass

    @property
    def path(self):
        backend = selected_backend()
        return _lib.bitcode_path(selected_arch(), backend=backend if _backends.get(backend).far else None,
                                 trace=selected_trace())

    def __repr__(self):
        return "SymmBitCode(sm_%d, %s%s)" % (selected_arch(), selected_backend(),
                                             ", traced" if selected_trace() else "")


BITCODE = _SymmBitCode()
