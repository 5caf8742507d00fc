"""Linking libsymm_device*.bc into Triton kernels."""
from .. import _lib
from .raw import LIB_NAME


def _current_arch():
    """Compute capability of the GPU Triton would compile for, or None."""
    try:
        import sys
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return major * 10 + minor
        from triton.runtime import driver
        target = driver.active.get_current_target()
        return int(target.arch) if target.backend == "cuda" else None
    except Exception:  # noqa: BLE001 - no GPU or driver: use the default file
        return None


def extern_libs(arch=None):
    """{"symm": <bitcode path>} to pass as extern_libs= when launching or
    compiling a kernel that calls symm.triton. `arch` is the target's compute
    capability (e.g. 90); by default the current GPU's, or the sm_90 file when
    there is no GPU."""
    if arch is None:
        arch = _current_arch()
    return {LIB_NAME: _lib.bitcode_path(arch)}


# bitcode path per CUDA device index: launch() runs on every kernel call, and
# asking torch for the capability and building the path each time costs host
# time that a short kernel cannot hide
_PATH_BY_DEVICE = {}


def _cached_path():
    device = None
    try:
        import sys
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            device = torch.cuda.current_device()
    except Exception:  # noqa: BLE001 - no GPU: one entry for "no device"
        device = None
    path = _PATH_BY_DEVICE.get(device)
    if path is None:
        path = _PATH_BY_DEVICE[device] = extern_libs()[LIB_NAME]
    return path


def launch(kernel, grid, *args, **kwargs):
    """kernel[grid](*args, **kwargs) with the symm bitcode added to extern_libs
    (its path is looked up once per device, then cached)."""
    libs = kwargs.pop("extern_libs", None)
    if libs is None:
        libs = {LIB_NAME: _cached_path()}
    elif LIB_NAME not in libs:
        libs = dict(libs)
        libs[LIB_NAME] = _cached_path()
    return kernel[grid](*args, extern_libs=libs, **kwargs)
