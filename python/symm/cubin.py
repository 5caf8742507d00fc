"""symm.cubin: launch kernels compiled ahead of time (symm.cute.Kernel.aot,
`python -m symm.cute.aot`) on a machine without CuTe DSL.

    lib = symm.cubin.load("build-cute")           # reads build-cute/manifest.json
    lib["ring"](grid, symm.ctx(), dst, src, n)    # torch's current stream

Each manifest entry names a cubin, its entry point and its parameters (kinds
i32, u32, i64, u64, f32, ptr), block shape and dynamic shared memory. The
cubin is loaded into the current CUDA context (torch's, once it has touched
the GPU) with cuModuleLoadData and launched with cuLaunchKernel through
ctypes and libcuda: no CuTe DSL, no compiler, no per-module initialisation
(symm's device calls take the context as an argument).
"""
import ctypes
import json
import os

_KIND_CTYPE = {"i32": ctypes.c_int32, "u32": ctypes.c_uint32, "i64": ctypes.c_int64,
               "u64": ctypes.c_uint64, "f32": ctypes.c_float, "ptr": ctypes.c_uint64}
_MAX_DYNAMIC_SMEM_ATTR = 8      # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
_STATIC_SMEM_LIMIT = 48 * 1024  # above this the kernel must opt in

_libcuda = None


class CubinError(RuntimeError):
    """A driver call failed while loading or launching a cubin."""


def _cuda():
    global _libcuda
    if _libcuda is None:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise CubinError("symm.cubin needs the CUDA driver (libcuda.so.1): %s" % e) from e
        vp, i, u = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint
        lib.cuGetErrorString.argtypes = [i, ctypes.POINTER(ctypes.c_char_p)]
        lib.cuCtxGetCurrent.argtypes = [ctypes.POINTER(vp)]
        lib.cuModuleLoadData.argtypes = [ctypes.POINTER(vp), ctypes.c_char_p]
        lib.cuModuleUnload.argtypes = [vp]
        lib.cuModuleGetFunction.argtypes = [ctypes.POINTER(vp), vp, ctypes.c_char_p]
        lib.cuFuncSetAttribute.argtypes = [vp, i, i]
        lib.cuLaunchKernel.argtypes = [vp, u, u, u, u, u, u, u, vp, ctypes.POINTER(vp), vp]
        _libcuda = lib
    return _libcuda


def _check(call, rc):
    if rc != 0:
        msg = ctypes.c_char_p()
        _cuda().cuGetErrorString(rc, ctypes.byref(msg))
        raise CubinError("%s failed: %s (%d)" % (call, (msg.value or b"?").decode(), rc))


def _dims(x):
    x = (x,) if isinstance(x, int) else tuple(int(v) for v in x)
    if not 1 <= len(x) <= 3 or any(v < 1 for v in x):
        raise ValueError("grid must be 1 to 3 positive ints, got %r" % (x,))
    return x + (1,) * (3 - len(x))


class CubinKernel:
    """One kernel of a manifest; call it as (grid, *args, stream=None).

    Pointer arguments take torch tensors (their data pointer) or integer
    addresses; 'stream' is a torch stream, a raw handle, or None for torch's
    current stream."""

    def __init__(self, folder, name, entry):
        self.folder, self.name, self.entry = folder, name, entry
        self.params = [tuple(p) for p in entry["params"]]
        self.block = tuple(entry["block"])
        self.smem = int(entry.get("smem", 0))
        self._module = None
        self._func = None

    def __repr__(self):
        return "CubinKernel(%s, %s)" % (self.name, ", ".join("%s:%s" % p for p in self.params))

    def _load(self):
        if self._func is not None:
            return self._func
        cu = _cuda()
        ctx = ctypes.c_void_p()
        _check("cuCtxGetCurrent", cu.cuCtxGetCurrent(ctypes.byref(ctx)))
        if not ctx.value:
            raise CubinError("%s: no current CUDA context; initialise the GPU first (e.g. "
                             "torch.cuda.set_device and any CUDA tensor)" % self.name)
        with open(os.path.join(self.folder, self.entry["cubin"]), "rb") as f:
            image = f.read()
        module, func = ctypes.c_void_p(), ctypes.c_void_p()
        _check("cuModuleLoadData(%s)" % self.entry["cubin"],
               cu.cuModuleLoadData(ctypes.byref(module), image))
        rc = cu.cuModuleGetFunction(ctypes.byref(func), module, self.entry["entry"].encode())
        if rc != 0:
            cu.cuModuleUnload(module)
            _check("cuModuleGetFunction(%s)" % self.entry["entry"], rc)
        if self.smem > _STATIC_SMEM_LIMIT:
            _check("cuFuncSetAttribute", cu.cuFuncSetAttribute(func, _MAX_DYNAMIC_SMEM_ATTR,
                                                               self.smem))
        self._module, self._func = module, func
        return func

    def pack(self, args):
        """The kernel parameters as ctypes values, checked against the manifest."""
        if len(args) != len(self.params):
            raise TypeError("%s takes %d arguments (%s), got %d" % (
                self.name, len(self.params), ", ".join(n for n, _ in self.params), len(args)))
        vals = []
        for (name, kind), a in zip(self.params, args):
            if kind == "ptr":
                a = a.data_ptr() if hasattr(a, "data_ptr") else a
            if isinstance(a, bool) or not isinstance(a, (int, float)):
                try:
                    a = a.item() if hasattr(a, "item") else int(a)
                except (TypeError, ValueError):
                    raise TypeError("%s: argument %s (%s) must be a number%s, got %s" % (
                        self.name, name, kind, " or a tensor" if kind == "ptr" else "",
                        type(a).__name__)) from None
            vals.append(_KIND_CTYPE[kind](a))
        return vals

    def __call__(self, grid, *args, stream=None):
        func = self._load()
        vals = self.pack(args)
        ptrs = (ctypes.c_void_p * max(1, len(vals)))(*[ctypes.addressof(v) for v in vals])
        gx, gy, gz = _dims(grid)
        bx, by, bz = self.block
        _check("cuLaunchKernel(%s)" % self.name,
               _cuda().cuLaunchKernel(func, gx, gy, gz, bx, by, bz, self.smem,
                                      ctypes.c_void_p(_stream_handle(stream)), ptrs, None))

    def unload(self):
        if self._module is not None:
            _cuda().cuModuleUnload(self._module)
            self._module = self._func = None


def _stream_handle(stream):
    if stream is None:
        import torch
        return torch.cuda.current_stream().cuda_stream
    return int(getattr(stream, "cuda_stream", stream))


class Library:
    """The kernels of one folder written by symm.cute.aot, by name."""

    def __init__(self, folder):
        self.folder = folder
        path = os.path.join(folder, "manifest.json")
        if not os.path.isfile(path):
            raise FileNotFoundError("%s not found: build the cubins first (python -m "
                                    "symm.cute.aot, on a machine with CuTe DSL)" % path)
        with open(path) as f:
            self.manifest = json.load(f)
        self._kernels = {}

    def __contains__(self, name):
        return name in self.manifest

    def __iter__(self):
        return iter(sorted(self.manifest))

    def __getitem__(self, name):
        if name not in self.manifest:
            raise KeyError("no kernel %r in %s (has: %s)" % (name, self.folder,
                                                              ", ".join(sorted(self.manifest))))
        if name not in self._kernels:
            self._kernels[name] = CubinKernel(self.folder, name, self.manifest[name])
        return self._kernels[name]

    def unload(self):
        for k in self._kernels.values():
            k.unload()


def load(folder):
    """The Library of cubins in folder (its manifest.json)."""
    return Library(folder)


def kernels(source, folder=None):
    """name -> launcher for the Kernels of `source` (a Python file defining
    symm.cute.Kernels): their cubins in `folder` when given (no CuTe DSL
    needed), else the Kernels compiled just in time for this GPU with CuTe
    DSL. Either way each launcher is called as (grid, *args, stream=None)."""
    if folder:
        lib = load(folder)
        return {name: lib[name] for name in lib}
    import importlib.util
    path = os.path.abspath(source)
    spec = importlib.util.spec_from_file_location(
        "symm_jit_" + os.path.splitext(os.path.basename(path))[0], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from symm.cute.aot import kernels_of
    return {k.name: k.compile() for k in kernels_of(mod)}
