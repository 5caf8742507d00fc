"""Finding and loading libsymm.so, the device bitcode and the headers.

Nothing here needs a GPU or torch. The library is loaded on first use, not at
`import symm`, so the package imports anywhere; a missing library is reported
by the first call that needs it, with the places that were searched.

Search order (first hit wins):
  library   $SYMM_LIBRARY, <package>/lib/libsymm.so.0 (pip install),
            <repo>/build*/src/libsymm.so (a source checkout, newest first)
  bitcode   $SYMM_BITCODE_DIR, <package>/lib, <repo>/build*/bitcode
  NVSHMEM's device bitcode (nvshmem backend, Triton)
            $SYMM_NVSHMEM_DEVICE_BC, the pip package nvidia-nvshmem-cu13
  headers   <package>/include, <repo>/include
  programs  <package>/bin (symmrun, symm-info), <repo>/build*/tools
"""
import ctypes
import glob
import os
import threading

from . import _backends

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
# python/symm -> the repository root, when running from a source checkout
_REPO_DIR = os.path.dirname(os.path.dirname(_PKG_DIR))

_lock = threading.Lock()
_lib = None


class LibraryNotFoundError(ImportError):
    """libsymm.so (or the bitcode) could not be found or loaded."""


def _build_dirs():
    """<repo>/build*/ folders of a source checkout, newest first."""
    dirs = [d for d in glob.glob(os.path.join(_REPO_DIR, "build*")) if os.path.isdir(d)]
    return sorted(dirs, key=os.path.getmtime, reverse=True)


def _library_candidates():
    env = os.environ.get("SYMM_LIBRARY")
    if env:
        return [env]
    # the wheel's copy carries its SONAME, which symm-info (symm/bin) links against
    cands = [os.path.join(_PKG_DIR, "lib", "libsymm.so.0")]
    cands += [os.path.join(d, "src", "libsymm.so") for d in _build_dirs()]
    return cands


def library_path():
    """Path of the libsymm.so that symm uses (raises LibraryNotFoundError)."""
    cands = _library_candidates()
    for c in cands:
        if os.path.isfile(c):
            return c
    raise LibraryNotFoundError(
        "libsymm.so not found; looked at: %s. Install the package (pip install .), build the "
        "library (cmake --build build) or set SYMM_LIBRARY to its path" % ", ".join(cands))


def bitcode_dir():
    """The folder holding libsymm_device*.bc (raises LibraryNotFoundError)."""
    env = os.environ.get("SYMM_BITCODE_DIR")
    cands = [env] if env else [os.path.join(_PKG_DIR, "lib")] + \
        [os.path.join(d, "bitcode") for d in _build_dirs()]
    for c in cands:
        if os.path.isfile(os.path.join(c, "libsymm_device.bc")):
            return c
    raise LibraryNotFoundError(
        "libsymm_device.bc not found; looked in: %s. It is built by CMake when clang-19 is "
        "installed (apt-get install clang-19 llvm-19); SYMM_BITCODE_DIR names its folder"
        % ", ".join(cands))


# the backends with device calls of their own (include/symm/device/backend/list.h)
SCALE_OUT_BACKENDS = _backends.FAR
# every backend a kernel can be compiled for (docs/backends.md)
BACKENDS = _backends.COMPILE_TARGETS


def check_backend(backend, who=""):
    """`backend` if it is one of BACKENDS, else a ValueError naming them
    (`who`, e.g. "symm.cute: ", leads the message)."""
    if backend not in BACKENDS:
        raise ValueError("%sbackend %r: expected one of %s" % (who, backend, ", ".join(BACKENDS)))
    return backend


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def trace_requested(trace=None):
    """Whether kernels compiled now should record into the device trace
    (docs/trace.md): `trace` when given (True/False), else $SYMM_TRACE
    (1/0, true/false, yes/no, on/off; unset: False), which the C library's
    environment table lists too. A bad value raises ValueError."""
    if trace is not None:
        if not isinstance(trace, bool):
            raise TypeError("trace must be True, False or None, got %r" % (trace,))
        return trace
    v = os.environ.get("SYMM_TRACE", "").strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ValueError("SYMM_TRACE=%r: expected 1/0, true/false, yes/no or on/off" % os.environ["SYMM_TRACE"])


def bitcode_path(arch=None, backend=None, trace=None):
    """The device bitcode for a GPU architecture.

    `arch` is a compute capability as an int (80, 86, 90, 100...), a string
    ("sm_90", "90") or None for the default file. Architectures 80-89 get
    libsymm_device_sm80.bc, 90 and newer libsymm_device_sm90.bc; older ones are
    not supported by symm. `backend` "nvshmem" or "nccl" gives the file fixed
    to that backend (docs/backends.md), built for sm_90 and newer. `trace`
    True gives the traced file of the same (<name>_trace.bc: the device
    trace's recording compiled in, docs/trace.md); None asks $SYMM_TRACE.
    """
    d = bitcode_dir()
    sfx = "_trace" if trace_requested(trace) else ""
    if backend is not None:
        check_backend(backend)
    if backend in SCALE_OUT_BACKENDS:
        b = _backends.get(backend)
        if arch is not None and _arch_int(arch) < 90:
            raise ValueError("the %s device bitcode is built for sm_90 and newer (got %s)" % (backend, arch))
        path = os.path.join(d, "%s_sm90%s.bc" % (b.bitcode, sfx))
        if not os.path.isfile(path):
            raise LibraryNotFoundError("%s not found (built by CMake with clang-19%s)" % (
                path, " and the library's device headers (%s)" % b.include_var if b.include_var else ""))
        return path
    if arch is None:
        name = "libsymm_device%s.bc" % sfx
    else:
        arch = _arch_int(arch)
        if arch < 80:
            raise ValueError("symm needs compute capability 8.0 or newer (got %d)" % arch)
        name = "libsymm_device_sm%d%s.bc" % (80 if arch < 90 else 90, sfx)
    path = os.path.join(d, name)
    if sfx and not os.path.isfile(path):
        raise LibraryNotFoundError("%s not found: the traced device bitcode is built with the plain one "
                                   "(bitcode/CMakeLists.txt); rebuild, or copy it next to libsymm_device.bc" % path)
    return path


def _arch_int(arch):
    if isinstance(arch, str):
        digits = arch.lower().replace("sm_", "").replace("sm", "").rstrip("a")
        if not digits.isdigit():
            raise ValueError("arch %r: expected e.g. 90, 'sm_90' or '90'" % arch)
        return int(digits)
    return int(arch)


def _pip_lib_dir(module):
    """<site-packages>/nvidia/<module>/lib of a pip package, or None."""
    try:
        import importlib
        m = importlib.import_module("nvidia." + module)
    except ImportError:
        return None
    for p in getattr(m, "__path__", []):
        if os.path.isdir(os.path.join(p, "lib")):
            return os.path.join(p, "lib")
    return None


def device_lib_bitcode(backend):
    """The bitcode of `backend`'s own device library (its list.h device_lib,
    e.g. NVSHMEM's libnvshmem_device.bc), which a Triton kernel links next to
    symm's file for that backend: $SYMM_<NAME>_DEVICE_BC, else the pip
    package nvidia-<name>-cu13. None for a backend without one; raises
    LibraryNotFoundError when it has one that is not found."""
    b = _backends.get(backend)
    if not b.device_lib:
        return None
    var = "SYMM_%s_DEVICE_BC" % b.name.upper()
    env = os.environ.get(var)
    d = _pip_lib_dir(b.name)
    cands = [env] if env else ([os.path.join(d, b.device_lib + ".bc")] if d else [])
    for c in cands:
        if os.path.isfile(c):
            return c
    raise LibraryNotFoundError("%s.bc not found (looked at: %s); pip install nvidia-%s-cu13 or set %s" % (
        b.device_lib, ", ".join(cands) or "nothing", b.name, var))


def nvshmem_device_bitcode():
    """NVSHMEM's libnvshmem_device.bc, which a Triton kernel links next to
    libsymm_device_nvshmem_sm90.bc (raises LibraryNotFoundError)."""
    return device_lib_bitcode("nvshmem")


def set_library_defaults():
    """SYMM_NVSHMEM_LIB / SYMM_NCCL_LIB from the pip packages when they are
    installed and the variables unset, so that the scale-out backends find
    the same copies torch uses."""
    for module, var in (("nvshmem", "SYMM_NVSHMEM_LIB"), ("nccl", "SYMM_NCCL_LIB")):
        if not os.environ.get(var):
            d = _pip_lib_dir(module)
            if d:
                os.environ[var] = d


def tool_path(name):
    """Path of the symm program `name` ("symmrun" or "symm-info")."""
    cands = [os.path.join(_PKG_DIR, "bin", name)] + \
        [os.path.join(d, "tools", name) for d in _build_dirs()]
    for c in cands:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise LibraryNotFoundError("%s not found; looked at: %s. Install the package (pip install .) "
                               "or build symm (cmake --build build)" % (name, ", ".join(cands)))


def include_dir():
    """The folder holding symm/symm.h and symm/symm_device.h (for CUDA C users)."""
    for c in (os.path.join(_PKG_DIR, "include"), os.path.join(_REPO_DIR, "include")):
        if os.path.isfile(os.path.join(c, "symm", "symm_device.h")):
            return c
    raise LibraryNotFoundError("symm headers not found next to the package or in the source tree")


# ---------------------------------------------------------------------------
# ctypes prototypes of the host API (include/symm/symm.h)
# ---------------------------------------------------------------------------

SYMM_UNIQUE_ID_BYTES = 128


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * SYMM_UNIQUE_ID_BYTES)]


_c_int, _c_void_p, _c_size_t = ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t
_P = ctypes.POINTER

# name: (restype, argtypes); functions that return symm_status_t use c_int.
PROTOTYPES = {
    "symm_strerror": (ctypes.c_char_p, [_c_int]),
    "symm_backend_name": (ctypes.c_char_p, []),
    "symm_backend_caps": (_c_int, [_c_void_p]),
    "symm_backend_module_init": (_c_int, [_c_void_p]),
    "symm_last_error": (ctypes.c_char_p, []),
    "symm_init": (_c_int, []),
    "symm_get_unique_id": (_c_int, [_P(UniqueId)]),
    "symm_init_with_uid": (_c_int, [_P(UniqueId), _c_int, _c_int]),
    "symm_finalize": (_c_int, []),
    "symm_initialized": (_c_int, []),
    "symm_my_pe": (_c_int, []),
    "symm_n_pes": (_c_int, []),
    "symm_device": (_c_int, []),
    "symm_gpu_pes": (_c_int, [_P(_c_int)]),
    "symm_sm_share": (_c_int, [_P(_c_int)]),
    "symm_team_world": (_c_void_p, []),
    "symm_team_node": (_c_void_p, []),
    "symm_team_my_pe": (_c_int, [_c_void_p]),
    "symm_team_n_pes": (_c_int, [_c_void_p]),
    "symm_team_translate_pe": (_c_int, [_c_void_p, _c_int, _c_void_p]),
    "symm_team_ctx": (_c_int, [_c_void_p, _P(_c_void_p)]),
    "symm_ctx": (_c_int, [_P(_c_void_p)]),
    "symm_malloc": (_c_int, [_c_size_t, _P(_c_void_p)]),
    "symm_calloc": (_c_int, [_c_size_t, _c_size_t, _P(_c_void_p)]),
    "symm_align": (_c_int, [_c_size_t, _c_size_t, _P(_c_void_p)]),
    "symm_free": (_c_int, [_c_void_p]),
    "symm_ptr": (_c_void_p, [_c_void_p, _c_int]),
    "symm_heap_info": (_c_int, [_P(_c_size_t), _P(_c_size_t)]),
    "symm_barrier_all": (_c_int, []),
    "symm_barrier_all_on_stream": (_c_int, [_c_void_p]),
    "symm_team_barrier_on_stream": (_c_int, [_c_void_p, _c_void_p]),
    "symm_host_broadcast": (_c_int, [_c_void_p, _c_size_t, _c_int]),
    "symm_host_allgather": (_c_int, [_c_void_p, _c_void_p, _c_size_t]),
    "symm_multicast_allowed": (_c_int, []),
    # stream collectives (symm_coll.h); enums travel as int
    "symm_all_reduce_ex": (_c_int, [_c_void_p, _c_void_p, _c_size_t, _c_int, _c_int, _c_int, _c_int,
                                    _c_void_p, _c_void_p]),
    "symm_reduce_scatter_ex": (_c_int, [_c_void_p, _c_void_p, _c_size_t, _c_int, _c_int, _c_int,
                                        _c_int, _c_void_p, _c_void_p]),
    "symm_all_gather": (_c_int, [_c_void_p, _c_void_p, _c_size_t, _c_int, _c_void_p, _c_void_p]),
    "symm_all_to_all": (_c_int, [_c_void_p, _c_void_p, _c_size_t, _c_int, _c_void_p, _c_void_p]),
    "symm_all_to_allv": (_c_int, [_c_void_p, _P(_c_size_t), _P(_c_size_t), _c_void_p, _P(_c_size_t),
                                  _P(_c_size_t), _c_int, _c_void_p, _c_void_p]),
    "symm_broadcast": (_c_int, [_c_void_p, _c_void_p, _c_size_t, _c_int, _c_int, _c_void_p,
                                _c_void_p]),
    "symm_coll_algo_name": (ctypes.c_char_p, [_c_int]),
    # device trace (symm_trace.h)
    "symm_trace_start": (_c_int, [_c_size_t]),
    "symm_trace_stop": (_c_int, []),
    "symm_trace_dump": (_c_int, [ctypes.c_char_p]),
    "symm_trace_name": (_c_int, [_c_int, ctypes.c_char_p]),
    "symm_trace_label": (_c_int, [_c_void_p, _c_size_t, _c_int, ctypes.c_char_p]),
    "symm_trace_counts": (_c_int, [_P(ctypes.c_uint64), _P(ctypes.c_uint64)]),
    "symm_trace_active": (_c_int, []),
    "symm_trace_library_traced": (_c_int, []),
    "symm_coll_last_algo": (ctypes.c_char_p, []),
    # MoE dispatch/combine (symm_moe.h); structures travel by address (symm/moe/__init__.py)
    "symm_moe_create": (_c_int, [_c_void_p, _c_void_p, _P(_c_void_p)]),
    "symm_moe_destroy": (_c_int, [_c_void_p]),
    "symm_moe_heap_bytes": (_c_size_t, [_c_void_p, _c_int]),
    "symm_moe_local_experts": (_c_size_t, [_c_void_p]),
    "symm_moe_first_expert": (_c_size_t, [_c_void_p]),
    "symm_moe_check": (_c_int, [_c_void_p, _c_void_p]),
    "symm_moe_set_num_sms": (_c_int, [_c_void_p, _c_int]),
    "symm_moe_get_num_sms": (_c_int, [_c_void_p, _P(_c_int)]),
    "symm_moe_launched_blocks": (_c_int, [_c_void_p, _c_void_p, _P(_c_int)]),
    "symm_moe_dispatch": (_c_int, [_c_void_p, _c_void_p, _c_int, _c_void_p]),
    "symm_moe_combine": (_c_int, [_c_void_p, _c_void_p, _c_int, _c_void_p]),
    "symm_moe_ll_routes": (_c_int, [_c_void_p, _P(_c_void_p), _P(_c_size_t)]),
    "symm_moe_ht_layout": (_c_int, [_c_void_p, _c_void_p, _c_int, _c_size_t, _c_void_p, _c_void_p, _c_void_p,
                                    _c_void_p]),
    "symm_moe_layout": (_c_int, [_c_void_p, _c_int, _c_size_t, _c_size_t, _c_size_t, _c_int, _c_void_p, _c_void_p,
                                 _c_void_p, _c_void_p]),
    "symm_moe_ht_dispatch": (_c_int, [_c_void_p, _c_void_p, _c_int, _c_void_p]),
    "symm_moe_ht_dispatch_into": (_c_int, [_c_void_p, _c_void_p, _c_void_p, _c_void_p, _c_int, _c_void_p]),
    "symm_moe_ht_recv_buffers": (_c_int, [_c_void_p, _c_void_p]),
    "symm_moe_ht_recv_copy": (_c_int, [_c_void_p, _c_void_p, _c_void_p]),
    "symm_moe_ht_combine": (_c_int, [_c_void_p, _c_void_p, _c_int, ctypes.c_int64, _c_size_t, _c_void_p, _c_int,
                                     ctypes.c_int64, _c_size_t, _c_int, _c_void_p]),
    "symm_moe_ht_combine_weights": (_c_int, [_c_void_p, _c_void_p, _c_int, ctypes.c_int64, _c_size_t, _c_void_p,
                                             _c_int, ctypes.c_int64, _c_size_t, _c_void_p, _c_int, _c_void_p]),
}

# Calls that newer or optional parts of the C library provide; absent ones are
# reported when used (see has()).
OPTIONAL = {"symm_all_reduce_ex", "symm_reduce_scatter_ex", "symm_all_gather", "symm_all_to_all",
            "symm_all_to_allv", "symm_broadcast", "symm_coll_algo_name", "symm_coll_last_algo"}
OPTIONAL |= {name for name in PROTOTYPES if name.startswith("symm_moe_")}
OPTIONAL |= {"symm_backend_name", "symm_backend_caps", "symm_backend_module_init"}
OPTIONAL |= {name for name in PROTOTYPES if name.startswith("symm_trace_")}


def _declare(lib):
    missing = []
    for name, (restype, argtypes) in PROTOTYPES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            if name not in OPTIONAL:
                missing.append(name)
            continue
        fn.restype = restype
        fn.argtypes = argtypes
    if missing:
        raise LibraryNotFoundError("libsymm at %s lacks %s: it is older than this package"
                                   % (lib._name, ", ".join(missing)))


def load():
    """The loaded libsymm (ctypes.CDLL), loading it on first call."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            path = library_path()
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                raise LibraryNotFoundError("cannot load %s: %s" % (path, e)) from None
            _declare(lib)
            _lib = lib
    return _lib


def has(name):
    """True when the loaded libsymm exports `name` (for optional calls)."""
    return hasattr(load(), name)
