"""Which libsymm_device*.bc the extern declarations link.

The bitcode is per architecture (bitcode/README.md), and the architecture a
kernel is compiled for is known only when it is compiled, so the path is
resolved when CuTe DSL first declares a symm function in a module: from the
architecture symm.cute.compile (or `with symm.cute.target(arch):`) was given,
else the current GPU's, else sm_90 (whose file serves sm_90 and newer, and so
CuTe DSL's default target as well).
"""
import contextlib
import contextvars

import cutlass.cute as cute

from .. import _lib

_ARCH = contextvars.ContextVar("symm_cute_arch", default=None)


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


@contextlib.contextmanager
def target(arch):
    """Compile the kernels traced inside for `arch` (selects the bitcode)."""
    token = _ARCH.set(parse_arch(arch))
    try:
        yield
    finally:
        _ARCH.reset(token)


class _SymmBitCode(cute.BitCode):
    """A cute.BitCode whose path is chosen when a module declares a call."""

    def __init__(self):  # the dataclass field is replaced by the property
        pass

    @property
    def path(self):
        return _lib.bitcode_path(selected_arch())

    def __repr__(self):
        return "SymmBitCode(sm_%d)" % selected_arch()


BITCODE = _SymmBitCode()
