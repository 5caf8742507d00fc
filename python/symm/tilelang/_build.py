"""Compiling TileLang kernels that call symm: the header hook, the include
paths and pass configuration both paths share, ahead-of-time lowering to
CUDA source and a cubin (no GPU needed), and the just-in-time path through
tilelang.compile.

Both paths lower the same way (the same pass configuration, the same
post-processing hook), so a kernel runs the same code whether TileLang
compiled it on the user's GPU or `build()` made a cubin that symm.cubin
launches on a machine without TileLang.

Each path compiles for one symm backend (docs/backends.md, "Compile-time
choice"): native, nccl (NCCL's device headers, nothing to link) or nvshmem
(relocatable device code, device-linked with libnvshmem_device.a; ahead of
time only).

Each path compiles the device trace's recording in (-DSYMM_TRACE=1, docs/trace.md)
with trace=True, or with $SYMM_TRACE set when trace is None."""
import os
import re
import subprocess

import tilelang
import tvm_ffi
from tilelang import tvm
from tilelang.engine.callback import register_cuda_postproc
from tvm import tirx
from tvm.target import Target

from .. import _backends, _lib
from ..cubin import read_manifest, write_manifest

SHIM_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")
SHIM = "symm_tilelang.h"
_INCLUDE = '#include "%s"\n' % SHIM
_USES_SYMM = re.compile(r"\bsymm_\w+\s*\(")

# By default TMA lowering and warp specialisation are off: every kernel
# parameter is then a pointer or a scalar, and GEMMs still use wgmma on sm_90
# (loading their tiles with cp.async). TMA_PASS_CONFIGS turns both on, for
# GEMMs that need TMA loads and a producer warp group to reach the tensor
# cores' rate: such a kernel takes a CUtensorMap per TMA-copied buffer, which
# lower() records in the manifest (the "tmap" parameters) and symm.cubin
# builds from the tensor at launch, as TileLang's host wrapper would.
PASS_CONFIGS = {"tl.disable_tma_lower": True, "tl.disable_warp_specialized": True}
TMA_PASS_CONFIGS = {"tl.disable_tma_lower": False, "tl.disable_warp_specialized": False}

# ptxas's note that it serialised every wgmma of a kernel because the kernel
# contains a function call (symm's waits print through an out-of-line
# function): such a GEMM runs at a fraction of the tensor cores' rate, so a
# build that meets it fails (a kernel with wgmma waits with symm_tl_wait_rec).
WGMMA_SERIALIZED = "C7510"

# nvcc diagnostics of TileLang's own headers (tl_templates), which TileLang
# itself compiles with -w: #20012 "__device__ annotation is ignored on a
# function explicitly defaulted" (cuda_fp8.h). Everything else is an error.
TILELANG_HEADER_DIAGS = ("20012",)
# NVSHMEM's device headers, written for C++17, under -std=c++20: #3012 / #3013
# "volatile ... is deprecated" (barrier.cuh, reduce.cuh, nvshmemi_wait_until_apis.cuh).
NVSHMEM_HEADER_DIAGS = ("3012", "3013")
# the diagnostics a backend library's own headers raise (nvcc numbers), per backend
_LIBRARY_HEADER_DIAGS = {"nvshmem": NVSHMEM_HEADER_DIAGS}

_HOOK_NAME = "tilelang_callback_cuda_postproc"


BACKENDS = _lib.BACKENDS

# backend -> (pip package under nvidia/, environment variable, a header that must be there)
_BACKEND_HEADERS = {"nccl": ("nccl", "SYMM_NCCL_INCLUDE", "nccl_device.h"),
                    "nvshmem": ("nvshmem", "SYMM_NVSHMEM_INCLUDE", "nvshmem.h")}


def _pip_dir(module, sub):
    lib = _lib._pip_lib_dir(module)
    return os.path.join(os.path.dirname(lib), sub) if lib else None


def backend_include_dir(backend):
    """NCCL's or NVSHMEM's include folder: $SYMM_NCCL_INCLUDE /
    $SYMM_NVSHMEM_INCLUDE, else the pip package nvidia-nccl-cu13 /
    nvidia-nvshmem-cu13."""
    module, var, header = _BACKEND_HEADERS[backend]
    d = os.environ.get(var) or _pip_dir(module, "include")
    if not d or not os.path.isfile(os.path.join(d, header)):
        raise _lib.LibraryNotFoundError(
            "the %s backend needs %s (looked in %s): pip install nvidia-%s-cu13 or set %s to its include "
            "folder" % (backend, header, d or "no %s and no pip package nvidia.%s" % (var, module), module, var))
    return d


def nvshmem_device_library():
    """libnvshmem_device.a, which the nvshmem backend's cubins are device-linked
    with: $SYMM_NVSHMEM_DEVICE_LIB, else the pip package nvidia-nvshmem-cu13."""
    path = os.environ.get("SYMM_NVSHMEM_DEVICE_LIB") or os.path.join(_pip_dir("nvshmem", "lib") or "",
                                                                      "libnvshmem_device.a")
    if not os.path.isfile(path):
        raise _lib.LibraryNotFoundError("the nvshmem backend needs libnvshmem_device.a (looked at %s): pip install "
                                        "nvidia-nvshmem-cu13 or set SYMM_NVSHMEM_DEVICE_LIB" % path)
    return path


def backend_flags(backend):
    """nvcc flags that fix symm's device API to `backend`; native adds none,
    so its kernels stay what they were before the scale-out backends."""
    if not _backends.get(_lib.check_backend(backend)).far:
        return []
    flags = ["-DSYMM_DEVICE_BACKEND=" + backend, "-I" + backend_include_dir(backend)]
    # a device library (NVSHMEM's libnvshmem_device.a) is relocatable code, linked after
    return flags + (["-rdc=true"] if _backends.get(backend).device_lib else [])


def running_backend():
    """The backend a kernel compiled here will meet (symm._runtime.compile_backend:
    the running symm's, else $SYMM_BACKEND before symm.init, else native)."""
    from .. import _runtime
    return _runtime.compile_backend()


def include_dirs():
    """Folders the generated CUDA needs besides TileLang's: symm's headers
    and this package's symm_tilelang.h."""
    return [_lib.include_dir(), SHIM_DIR]


def trace_flags(trace=None):
    """nvcc flags that compile the device trace's recording in (trace True;
    None: $SYMM_TRACE): the kernels' symm calls record (docs/trace.md)."""
    return ["-DSYMM_TRACE=1"] if _lib.trace_requested(trace) else []


def compile_flags(backend=None, trace=None):
    """nvcc flags for tilelang.compile(..., compile_flags=...) on `backend`
    (by default running_backend(); native or nccl: TileLang's path has no
    device link for nvshmem), traced with trace=True (None: $SYMM_TRACE)."""
    backend = _lib.check_backend(backend or running_backend())
    if _backends.get(backend).device_lib:
        raise NotImplementedError(_NO_JIT_NVSHMEM)
    return ["-I" + d for d in include_dirs()] + backend_flags(backend) + trace_flags(trace)


_TMA_ATTR = "symm_tilelang.tma"


def with_tma(func):
    """The prim_func marked to be lowered with TMA_PASS_CONFIGS (TMA loads and
    warp specialisation) by lower(), build() and compile(), so that whoever
    builds it need not know: what a pipelined GEMM needs on sm_90."""
    return func.with_attr(_TMA_ATTR, True)


def pass_configs(extra=None, func=None):
    """The pass configuration a kernel is lowered with: PASS_CONFIGS, or
    TMA_PASS_CONFIGS for a prim_func marked by with_tma(), then `extra`."""
    cfg = dict(PASS_CONFIGS)
    if func is not None and func.attrs is not None and _TMA_ATTR in func.attrs:
        cfg.update(TMA_PASS_CONFIGS)
    cfg.update(extra or {})
    return cfg


def add_include(code):
    """The generated source with symm_tilelang.h included, when it calls symm."""
    if _USES_SYMM.search(code) and _INCLUDE not in code:
        return _INCLUDE + code
    return code


def _chain(previous):
    def symm_tilelang_postproc(code, target):
        if previous is not None:
            code = previous(code, target)
        return add_include(code)
    return symm_tilelang_postproc


_PROBE = "symm_probe();\n"


def install_hook():
    """Register the CUDA post-processing hook that includes symm_tilelang.h
    (TileLang's register_cuda_postproc). A hook registered before keeps
    running, first; installing twice is harmless. Called on import and again
    by lower() / compile(), in case another hook replaced it since."""
    current = tvm_ffi.get_global_func(_HOOK_NAME, allow_missing=True)
    if current is not None and _INCLUDE in str(current(_PROBE, target_of(90))):
        return
    register_cuda_postproc(_chain(current), override=True)


def target_of(arch):
    """A TileLang CUDA target for sm_<arch> (90, "90", "sm_90")."""
    a = str(arch).lower().replace("sm_", "").rstrip("a")
    if not a.isdigit():
        raise ValueError("arch must look like 90 or 'sm_90', got %r" % (arch,))
    return Target({"kind": "cuda", "arch": "sm_%s" % a})


# -- just in time -------------------------------------------------------------------

_NO_JIT_NVSHMEM = (
    "symm.tilelang cannot compile for the nvshmem backend just in time: NVSHMEM's device library needs "
    "relocatable device code, a device link with libnvshmem_device.a and nvshmemx_cumodule_init on the "
    "loaded module, and tilelang.compile has no hook for either. Build ahead of time instead "
    "(symm.tilelang.build(..., backend='nvshmem') or examples/tilelang/build.py --backend nvshmem) and "
    "launch with symm.cubin, or pass backend='native' (load/store peers only)")


def compile(func, target=None, execution_backend=None, pass_configs=None, compile_flags=None,
            backend=None, trace=None, **kwargs):  # noqa: A001 - mirrors tilelang.compile
    """tilelang.compile with what a kernel calling symm needs: the header
    hook, the include folders and the shared pass configuration. `backend`
    (native or nccl) defaults to running_backend(); nvshmem raises (build it
    ahead of time). trace=True compiles the device trace in (None:
    $SYMM_TRACE). Returns TileLang's kernel; call it with the prim_func's
    arguments in order (the context as an int: symm.ctx())."""
    install_hook()
    flags = globals()["compile_flags"](backend, trace) + list(compile_flags or [])
    if isinstance(target, (int, str)) and str(target).lower().replace("sm_", "").rstrip("a").isdigit():
        target = target_of(target)
    return tilelang.compile(func, target=target, execution_backend=execution_backend,
                            pass_configs=globals()["pass_configs"](pass_configs, func),
                            compile_flags=flags, **kwargs)


# -- ahead of time ------------------------------------------------------------------

_SCALAR_KINDS = {"int32": "i32", "uint32": "u32", "int64": "i64", "uint64": "u64",
                 "float32": "f32", "float64": "f64"}


class Lowered:
    """A kernel lowered to CUDA source, with what a launcher needs: the entry
    symbol, its parameters in entry order (name, kind, dtype, shape), the
    order the prim_func takes them in (TileLang leaves out of the entry a
    buffer the kernel never touches) and the fixed launch shape."""

    def __init__(self, source, entry, params, call, grid, block, smem):
        self.source, self.entry, self.params, self.call = source, entry, params, call
        self.grid, self.block, self.smem = grid, block, smem

    @property
    def uses_tma(self):
        return any(p[1] == "tmap" for p in self.params)

    def manifest(self, name, arch, backend="native"):
        return {"cubin": name + ".cubin", "source": name + ".cu", "entry": self.entry, "backend": backend,
                "arch": int(str(arch).lower().replace("sm_", "").rstrip("a")),
                "params": [list(p) for p in self.params], "call": list(self.call),
                "grid": list(self.grid), "block": list(self.block), "smem": self.smem}


def _static(x, what):
    if isinstance(x, int):
        return x
    if isinstance(x, tirx.IntImm):
        return int(x.value)
    raise ValueError("%s is not a constant (%s): kernels built ahead of time need static shapes and "
                     "launch sizes" % (what, x))


def lower(func, arch=90, pass_configs=None, name=None):
    """Lower a prim_func to sm_<arch> CUDA source, no GPU needed (one kernel
    per prim_func, static shapes). `name` renames it (the kernel symbol is
    <name>_kernel), so that kernels built from one Python function differ."""
    install_hook()
    if name is not None:
        func = func.with_attr("global_symbol", name)
    target = target_of(arch)
    with tvm.transform.PassContext(opt_level=3, config=globals()["pass_configs"](pass_configs, func)), target:
        art = tilelang.lower(func, target=target, enable_device_compile=False)
    kernels = list(art.device_mod.functions.items())
    if len(kernels) != 1:
        raise ValueError("expected one kernel in the prim_func, TileLang made %d" % len(kernels))
    gv, dev = kernels[0]
    attrs = dev.attrs
    grid, block = [1, 1, 1], [1, 1, 1]
    for tag, ext in attrs["thread_extent"].items():
        dims = block if "threadIdx" in tag else grid
        dims["xyz".index(tag[-1])] = _static(ext, tag)
    smem = int(attrs["dyn_shared_memory_buf"]) if "dyn_shared_memory_buf" in attrs else 0

    by_name, call_names = {}, []
    for var in func.params:
        if var in func.buffer_map:
            buf = func.buffer_map[var]
            shape = [_static(d, "shape of %s" % buf.name) for d in buf.shape]
            spec = (buf.name, "ptr", str(buf.dtype), shape)
            for key in (var.name, buf.name, buf.data.name):
                by_name[key] = spec
            call_names.append(buf.name)
        else:
            kind = _SCALAR_KINDS.get(str(var.dtype))
            if kind is None:
                raise ValueError("parameter %s: type %s cannot be passed to a cubin" % (var.name, var.dtype))
            by_name[var.name] = (var.name, kind, str(var.dtype), [])
            call_names.append(var.name)
    tmaps = _tensor_maps(art.host_mod, by_name)
    params = []
    for p in dev.params:
        if p.name in tmaps:
            params.append(tmaps[p.name])
        elif p.name in by_name:
            params.append(by_name[p.name])
        else:
            raise ValueError("kernel parameter %s is not one of the prim_func's (%s): dynamic shapes "
                             "are not supported ahead of time" % (p.name, ", ".join(call_names)))
    return Lowered(art.kernel_source, gv.name_hint, params, call_names, grid, block, smem)


def _tensor_maps(host_mod, by_name):
    """{descriptor parameter: manifest parameter} of the CUtensorMaps TileLang's
    host code would build (its "tma_descriptor_args"): [buffer name, "tmap",
    dtype, shape, spec], where spec holds cuTensorMapEncodeTiled's arguments
    but the address (the buffer's, at launch): data type, rank, global dims
    and byte strides (innermost stride left out, as the call takes them), box,
    element strides, interleave, swizzle, L2 promotion, out-of-bounds fill."""
    out = {}
    for _, hf in host_mod.functions.items():
        attrs = hf.attrs
        if attrs is None or "tma_descriptor_args" not in attrs:
            continue
        for var, args in attrs["tma_descriptor_args"].items():
            name = var.name
            kind = str(args[0]).strip('"')
            if kind != "__tvm_tensormap_create_tiled":
                raise ValueError("%s: %s descriptors cannot be built ahead of time (tiled TMA only)" % (name, kind))
            dtype_code, rank = _static(args[2], name + " data type"), _static(args[3], name + " rank")
            addr = args[4]
            if not isinstance(addr, tirx.Var) or addr.name not in by_name:
                raise ValueError("%s: the TMA descriptor's address %s is not a kernel buffer's base" % (name, addr))
            rest = [_static(x, name) for x in args[5:]]
            if len(rest) != 4 * rank + 4:
                raise ValueError("%s: %d TMA descriptor arguments for rank %d" % (name, len(rest), rank))
            buf, _, dtype, shape = by_name[addr.name]
            dims, strides = rest[:rank], rest[rank:2 * rank]
            if dims != list(reversed(shape)):
                raise ValueError("%s: the descriptor spans %s, the buffer %s" % (name, dims, shape))
            spec = {"dtype": dtype_code, "rank": rank, "dims": dims, "strides": strides[1:],
                    "box": rest[2 * rank:3 * rank], "elem_strides": rest[3 * rank:4 * rank],
                    "interleave": rest[4 * rank], "swizzle": rest[4 * rank + 1], "l2": rest[4 * rank + 2],
                    "oob": rest[4 * rank + 3]}
            out[name] = (buf, "tmap", dtype, shape, spec)
    return out


def tilelang_include_dirs():
    """TileLang's templates and the CUTLASS headers they include."""
    from tilelang.env import CUTLASS_INCLUDE_DIR, TILELANG_TEMPLATE_PATH
    return [os.path.normpath(TILELANG_TEMPLATE_PATH), os.path.normpath(CUTLASS_INCLUDE_DIR)]


def _sm(arch):
    a = str(arch).lower().replace("sm_", "").rstrip("a")
    # Hopper's wgmma (TileLang's GEMMs) exists only in the arch-specific sm_90a
    return "sm_" + (a + "a" if a == "90" else a)


def nvcc_command(source, output, arch=90, fmt="cubin", werror=True, nvcc="nvcc", backend="native", trace=False):
    """The nvcc command that compiles generated source to a cubin (or PTX)
    for sm_<arch> (arch 90: sm_90a) and a symm backend (on nvshmem a
    relocatable cubin: see dlink_command), with the device trace compiled in
    when trace is True (None: $SYMM_TRACE).
    With werror every warning is an error except those TileLang's own
    headers are known to raise (TILELANG_HEADER_DIAGS)."""
    cmd = [nvcc, "-std=c++20", "-O3", "-lineinfo", "-arch=" + _sm(arch), "--" + fmt] + backend_flags(backend)
    cmd += trace_flags(trace)
    if werror:
        cmd += ["-Werror", "all-warnings"]
    # one -Xcudafe per number: nvcc splits an -X option's value at commas
    for d in TILELANG_HEADER_DIAGS + _LIBRARY_HEADER_DIAGS.get(backend, ()):
        cmd += ["-Xcudafe", "--diag_suppress=" + d]
    for d in tilelang_include_dirs():
        cmd += ["-isystem", d]
    for d in include_dirs():
        cmd += ["-I", d]
    return cmd + ["-o", output, source]


def dlink_command(relocatable, output, arch=90, nvcc="nvcc"):
    """The device link of a relocatable cubin with libnvshmem_device.a into a
    loadable cubin (nvshmem backend): the kernel, NVSHMEM's device functions
    it calls and its device state (nvshmemi_device_state_d)."""
    return [nvcc, "-arch=" + _sm(arch), "-dlink", "--cubin", "-o", output, relocatable, nvshmem_device_library()]


def _run(cmd, what):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s failed:\n%s\n%s" % (what, " ".join(cmd), (r.stdout + r.stderr)[-6000:]))
    if WGMMA_SERIALIZED in r.stdout + r.stderr:
        raise RuntimeError("%s: ptxas serialised the kernel's wgmma instructions because the kernel calls a "
                           "function (%s); a GEMM kernel must wait with symm_tl_wait_rec, not symm's "
                           "printing waits:\n%s" % (what, WGMMA_SERIALIZED, (r.stdout + r.stderr)[-3000:]))


def _check_folder_backend(out_dir, name, backend):
    """A folder holds one backend's kernels: refuse to add another's."""
    if not os.path.exists(os.path.join(out_dir, "manifest.json")):
        return
    others = {e.get("backend", "native") for n, e in read_manifest(out_dir).items() if n != name} - {backend}
    if others:
        raise ValueError("%s holds kernels built for %s: build %s kernels into another folder"
                         % (out_dir, " ".join(sorted(others)), backend))


def build(func, out_dir, name, arch=90, pass_configs=None, nvcc="nvcc", keep_ptx=False, backend="native",
          manifest=True, trace=None):
    """Lower `func` for sm_<arch>, compile it with nvcc into
    out_dir/<name>.cubin (the CUDA source kept as <name>.cu) for a symm
    backend (native, nccl or nvshmem), and return its manifest entry, which
    records the backend. arch 90 compiles for sm_90a (Hopper's wgmma, which
    TileLang's GEMMs use, exists only there), so the cubin runs on H100 and
    H200; other archs compile for sm_<arch>. With `manifest` (the default)
    the entry is also merged into out_dir/manifest.json, so that
    symm.cubin.load(out_dir) launches it at once; a folder holds one
    backend's kernels (ValueError before compiling otherwise).
    trace=True compiles the device trace in (None: $SYMM_TRACE)."""
    _lib.check_backend(backend)
    trace = _lib.trace_requested(trace)
    if manifest:
        _check_folder_backend(out_dir, name, backend)
    os.makedirs(out_dir, exist_ok=True)
    low = lower(func, arch, pass_configs, name=name)
    src = os.path.join(out_dir, name + ".cu")
    with open(src, "w") as f:
        f.write(low.source)
    cubin = os.path.join(out_dir, name + ".cubin")
    dlink = bool(_backends.get(backend).device_lib)  # relocatable code, device-linked with the library
    rel = os.path.join(out_dir, name + ".rdc.cubin") if dlink else cubin
    outs = [("cubin", rel)] + ([("ptx", os.path.join(out_dir, name + ".ptx"))] if keep_ptx else [])
    for fmt, out in outs:
        _run(nvcc_command(src, out, arch, fmt, nvcc=nvcc, backend=backend, trace=trace),
             "nvcc on %s (%s)" % (src, fmt))
    if dlink:
        _run(dlink_command(rel, cubin, arch, nvcc=nvcc), "device link of %s" % rel)
        os.remove(rel)
    entry = low.manifest(name, arch, backend)
    if manifest:
        write_manifest(out_dir, {name: entry})
    return entry
