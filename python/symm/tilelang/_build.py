"""Compiling TileLang kernels that call symm: the header hook, the include
paths and pass configuration both paths share, ahead-of-time lowering to
CUDA source and a cubin (no GPU needed), and the just-in-time path through
tilelang.compile.

Both paths lower the same way (the same pass configuration, the same
post-processing hook), so a kernel runs the same code whether TileLang
compiled it on the user's GPU or `build()` made a cubin that symm.cubin
launches on a machine without TileLang."""
import os
import re
import subprocess

import tilelang
import tvm_ffi
from tilelang import tvm
from tilelang.engine.callback import register_cuda_postproc
from tvm import tirx
from tvm.target import Target

from .. import _lib

SHIM_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")
SHIM = "symm_tilelang.h"
_INCLUDE = '#include "%s"\n' % SHIM
_USES_SYMM = re.compile(r"\bsymm_\w+\s*\(")

# TMA descriptors and warp specialisation would make the kernel's parameters
# depend on TileLang's host wrapper (a CUtensorMap built per call); without
# them every parameter is a pointer or a scalar, which a cubin launcher can
# pass. GEMMs still use wgmma on sm_90.
PASS_CONFIGS = {"tl.disable_tma_lower": True, "tl.disable_warp_specialized": True}

# nvcc diagnostics of TileLang's own headers (tl_templates), which TileLang
# itself compiles with -w: #20012 "__device__ annotation is ignored on a
# function explicitly defaulted" (cuda_fp8.h). Everything else is an error.
TILELANG_HEADER_DIAGS = ("20012",)

_HOOK_NAME = "tilelang_callback_cuda_postproc"


def include_dirs():
    """Folders the generated CUDA needs besides TileLang's: symm's headers
    and this package's symm_tilelang.h."""
    return [_lib.include_dir(), SHIM_DIR]


def compile_flags():
    """nvcc flags for tilelang.compile(..., compile_flags=...)."""
    return ["-I" + d for d in include_dirs()]


def pass_configs(extra=None):
    cfg = dict(PASS_CONFIGS)
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


def compile(func, target=None, execution_backend=None, pass_configs=None, compile_flags=None,
            **kwargs):  # noqa: A001 - mirrors tilelang.compile
    """tilelang.compile with what a kernel calling symm needs: the header
    hook, the include folders and the shared pass configuration. Returns
    TileLang's kernel; call it with the prim_func's arguments in order (the
    context as an int: symm.ctx())."""
    install_hook()
    flags = globals()["compile_flags"]() + list(compile_flags or [])
    if isinstance(target, (int, str)) and str(target).lower().replace("sm_", "").rstrip("a").isdigit():
        target = target_of(target)
    return tilelang.compile(func, target=target, execution_backend=execution_backend,
                            pass_configs=globals()["pass_configs"](pass_configs),
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

    def manifest(self, name, arch):
        return {"cubin": name + ".cubin", "source": name + ".cu", "entry": self.entry,
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
    with tvm.transform.PassContext(opt_level=3, config=globals()["pass_configs"](pass_configs)), target:
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
    params = []
    for p in dev.params:
        if p.name not in by_name:
            raise ValueError("kernel parameter %s is not one of the prim_func's (%s): dynamic shapes "
                             "are not supported ahead of time" % (p.name, ", ".join(call_names)))
        params.append(by_name[p.name])
    return Lowered(art.kernel_source, gv.name_hint, params, call_names, grid, block, smem)


def tilelang_include_dirs():
    """TileLang's templates and the CUTLASS headers they include."""
    from tilelang.env import CUTLASS_INCLUDE_DIR, TILELANG_TEMPLATE_PATH
    return [os.path.normpath(TILELANG_TEMPLATE_PATH), os.path.normpath(CUTLASS_INCLUDE_DIR)]


def nvcc_command(source, output, arch=90, fmt="cubin", werror=True, nvcc="nvcc"):
    """The nvcc command that compiles generated source to a cubin (or PTX).
    With werror every warning is an error except those TileLang's own
    headers are known to raise (TILELANG_HEADER_DIAGS)."""
    a = str(arch).lower().replace("sm_", "").rstrip("a")
    # Hopper's wgmma (TileLang's GEMMs) exists only in the arch-specific sm_90a
    a = a + "a" if a == "90" else a
    cmd = [nvcc, "-std=c++20", "-O3", "-lineinfo", "-arch=sm_%s" % a, "--" + fmt]
    if werror:
        cmd += ["-Werror", "all-warnings"]
    cmd += ["-Xcudafe", "--diag_suppress=" + ",".join(TILELANG_HEADER_DIAGS)]
    for d in tilelang_include_dirs():
        cmd += ["-isystem", d]
    for d in include_dirs():
        cmd += ["-I", d]
    return cmd + ["-o", output, source]


def build(func, out_dir, name, arch=90, pass_configs=None, nvcc="nvcc", keep_ptx=False):
    """Lower `func`, compile it with nvcc into out_dir/<name>.cubin (the CUDA
    source kept as <name>.cu) and return its manifest entry (symm.cubin)."""
    os.makedirs(out_dir, exist_ok=True)
    low = lower(func, arch, pass_configs, name=name)
    src = os.path.join(out_dir, name + ".cu")
    with open(src, "w") as f:
        f.write(low.source)
    outs = [("cubin", name + ".cubin")] + ([("ptx", name + ".ptx")] if keep_ptx else [])
    for fmt, out in outs:
        r = subprocess.run(nvcc_command(src, os.path.join(out_dir, out), arch, fmt, nvcc=nvcc),
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("nvcc failed on %s (%s):\n%s" % (src, fmt, (r.stdout + r.stderr)[-6000:]))
    return low.manifest(name, arch)
