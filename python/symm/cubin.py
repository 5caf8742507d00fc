"""symm.cubin: launch kernels compiled ahead of time, with no DSL installed.

A build folder holds <name>.cubin files and a manifest.json of
{name: entry}; an entry names the cubin, its kernel symbol ("entry"), its
parameters in the entry's order ([name, kind, dtype, shape]; kind is "ptr",
"i32", "u32", "i64", "u64", "f32" or "f64"; dtype and shape optional), and
may fix the launch ("grid", "block", "smem") and the order callers pass the
arguments in ("call": names; it may name arguments the kernel does not
take, which are accepted and ignored), and the symm backend its device code
was compiled for ("backend": native, nvshmem or nccl; absent means native).
symm.tilelang.build and symm.cute.aot write these.

    kernels = symm.cubin.load("build-tilelang")
    kernels["shift"](symm.ctx(), src, dst, sig)         # torch's current stream

Pointer parameters take torch tensors (checked against the recorded dtype,
shape and device) or integer addresses. A "tmap" parameter (a CUtensorMap
passed by value, for TMA copies: symm.tilelang.lower records
cuTensorMapEncodeTiled's arguments in the entry's fifth field) takes the same
tensor; the descriptor is encoded from its address at launch and kept for the
next launch with that address. The module is loaded into the
current CUDA context through the driver API (libcuda, ctypes) on first use,
after checking that its backend is the running symm's; an nvshmem module then
gets symm_backend_module_init (NVSHMEM's per-module device state).
"""
import ctypes
import json
import os

from ._lib import BACKENDS

_KINDS = {"ptr": ctypes.c_uint64, "i32": ctypes.c_int32, "u32": ctypes.c_uint32,
          "i64": ctypes.c_int64, "u64": ctypes.c_uint64, "f32": ctypes.c_float,
          "f64": ctypes.c_double}
_TORCH_DTYPES = {"float16": "float16", "bfloat16": "bfloat16", "float32": "float32",
                 "float64": "float64", "int8": "int8", "uint8": "uint8", "int16": "int16",
                 "int32": "int32", "int64": "int64", "uint16": "uint16", "uint32": "uint32",
                 "uint64": "uint64", "bool": "bool", "float8_e4m3": "float8_e4m3fn",
                 "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2"}
_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
_TMAP_BYTES, _TMAP_ALIGN = 128, 64   # sizeof(CUtensorMap), and its alignment
_TMAP_KEYS = ("dtype", "rank", "dims", "strides", "box", "elem_strides", "interleave", "swizzle", "l2", "oob")
_driver = None


class CudaDriverError(RuntimeError):
    pass


def _cuda():
    global _driver
    if _driver is None:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise CudaDriverError("symm.cubin needs the CUDA driver (libcuda.so.1): %s" % e) from e
        lib.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        lib.cuModuleLoadData.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
        lib.cuModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                                            ctypes.c_char_p]
        lib.cuFuncSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        lib.cuLibraryGetModule.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
        lib.cuCtxGetCurrent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        lib.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 6 + [
            ctypes.c_uint, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
        u64p, u32p = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32)
        lib.cuTensorMapEncodeTiled.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                                               u64p, u64p, u32p, u32p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                               ctypes.c_int]
        _driver = lib
    return _driver


def _check(rc, what):
    if rc != 0:
        msg = ctypes.c_char_p()
        _cuda().cuGetErrorString(rc, ctypes.byref(msg))
        raise CudaDriverError("%s failed: CUDA error %d (%s)" % (
            what, rc, msg.value.decode() if msg.value else "unknown"))


def current_context():
    """The current CUDA context (CUcontext handle as an int; 0 for none)."""
    ctx = ctypes.c_void_p()
    _check(_cuda().cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
    return ctx.value or 0


def library_module(library):
    """The CUmodule (int) of a CUDA library (CUlibrary / cudaLibrary_t handle)
    in the current context, loading it there if it is not yet."""
    mod = ctypes.c_void_p()
    _check(_cuda().cuLibraryGetModule(ctypes.byref(mod), ctypes.c_void_p(library)), "cuLibraryGetModule")
    return mod.value


def check_backend(name, entry, running):
    """Raise unless the manifest entry's backend (absent: native) is
    `running`, the backend symm runs ("host" and None count as native)."""
    built = entry.get("backend", "native")
    if built not in BACKENDS:
        raise ValueError("%s: the manifest's backend %r is not one of %s" % (name, built, ", ".join(BACKENDS)))
    running = running if running in BACKENDS else "native"
    if built != running:
        raise RuntimeError("%s was built for the %s backend, but symm runs %s: rebuild it with --backend %s "
                           "(or run with SYMM_BACKEND=%s)" % (name, built, running, running, built))


def _running_backend():
    from . import _runtime
    return _runtime.backend() if _runtime.initialized() else None


def _dims(x, what):
    x = (x,) if isinstance(x, int) else tuple(x)
    if not 1 <= len(x) <= 3 or any(not isinstance(v, int) or v < 1 for v in x):
        raise ValueError("%s must be 1 to 3 positive ints, got %r" % (what, x))
    return x + (1,) * (3 - len(x))


class TensorMap:
    """A CUtensorMap (128 bytes, 64-byte aligned) encoded with
    cuTensorMapEncodeTiled from a manifest spec and a global address."""

    def __init__(self, spec, address, what):
        missing = [k for k in _TMAP_KEYS if k not in spec]
        if missing:
            raise ValueError("%s: the tensor-map spec lacks %s" % (what, ", ".join(missing)))
        rank = int(spec["rank"])
        if not (len(spec["dims"]) == len(spec["box"]) == len(spec["elem_strides"]) == rank
                and len(spec["strides"]) == rank - 1):
            raise ValueError("%s: the tensor-map spec's lengths do not match its rank %d" % (what, rank))
        if address % 16:
            raise ValueError("%s: TMA needs a 16-byte-aligned address, got 0x%x" % (what, address))
        self._raw = ctypes.create_string_buffer(_TMAP_BYTES + _TMAP_ALIGN)
        base = ctypes.addressof(self._raw)
        self.address = base + (-base % _TMAP_ALIGN)
        dims = (ctypes.c_uint64 * rank)(*spec["dims"])
        strides = (ctypes.c_uint64 * max(1, rank - 1))(*spec["strides"])
        box = (ctypes.c_uint32 * rank)(*spec["box"])
        estr = (ctypes.c_uint32 * rank)(*spec["elem_strides"])
        _check(_cuda().cuTensorMapEncodeTiled(ctypes.c_void_p(self.address), int(spec["dtype"]), rank,
                                              ctypes.c_void_p(address), dims, strides, box, estr,
                                              int(spec["interleave"]), int(spec["swizzle"]), int(spec["l2"]),
                                              int(spec["oob"])),
               "cuTensorMapEncodeTiled(%s)" % what)

    def param(self):
        """The pointer cuLaunchKernel takes for this by-value parameter."""
        return ctypes.c_void_p(self.address)


class Kernel:
    """One manifest entry: call it with the kernel's arguments (in the
    entry's "call" order if it has one, else its parameter order; or by
    name), grid= / stream= to override the launch."""

    def __init__(self, name, entry, folder):
        self.name, self.entry, self.folder = name, entry, folder
        self.params = [tuple(p) + (None,) * (5 - len(p)) for p in entry["params"]]
        for p in self.params:
            if p[1] not in _KINDS and p[1] != "tmap":
                raise ValueError("%s: parameter %s has kind %r (one of %s, tmap)"
                                 % (name, p[0], p[1], ", ".join(sorted(_KINDS))))
            if p[1] == "tmap" and not isinstance(p[4], dict):
                raise ValueError("%s: tensor-map parameter %s has no spec" % (name, p[0]))
        self._tmaps = {}   # (parameter index, address) -> TensorMap
        names = [p[0] for p in self.params]
        self.call_order = list(entry.get("call") or names)
        if not set(names) <= set(self.call_order) or len(set(self.call_order)) != len(self.call_order):
            raise ValueError("%s: 'call' %s does not name the parameters %s" % (name, self.call_order, names))
        self.grid = _dims(entry["grid"], "grid") if "grid" in entry else None
        self.block = _dims(entry.get("block", 1), "block")
        self.smem = int(entry.get("smem", 0))
        self._func = None
        self._module = None

    def __repr__(self):
        return "symm.cubin.Kernel(%s: %s(%s))" % (self.name, self.entry["entry"], ", ".join(self.call_order))

    def pack(self, args, kwargs):
        """The ctypes values of the parameters, in entry order."""
        if len(args) > len(self.call_order):
            raise TypeError("%s takes %d arguments (%s), got %d" % (
                self.name, len(self.call_order), ", ".join(self.call_order), len(args)))
        given = dict(zip(self.call_order, args))
        for k, v in kwargs.items():
            if k not in self.call_order:
                raise TypeError("%s has no parameter %r (%s)" % (self.name, k, ", ".join(self.call_order)))
            if k in given:
                raise TypeError("%s: %s given twice" % (self.name, k))
            given[k] = v
        missing = [n for n in self.call_order if n not in given]
        if missing:
            raise TypeError("%s: missing %s" % (self.name, ", ".join(missing)))
        return [self._value(i, p, given[p[0]]) for i, p in enumerate(self.params)]

    def _value(self, i, p, v):
        name, kind, dtype, shape, spec = p
        if kind == "tmap":
            addr = self._value(i, (name, "ptr", dtype, shape, None), v).value
            tm = self._tmaps.get((i, addr))
            if tm is None:
                if len(self._tmaps) >= 64:   # tensors come and go: keep the newest few
                    self._tmaps.clear()
                tm = self._tmaps[(i, addr)] = TensorMap(spec, addr, "%s: %s" % (self.name, name))
            return tm
        if kind != "ptr":
            if hasattr(v, "data_ptr"):
                raise TypeError("%s: %s is a %s scalar, got a tensor" % (self.name, name, kind))
            return _KINDS[kind](v)
        if hasattr(v, "data_ptr"):
            if dtype is not None and str(v.dtype) != "torch." + _TORCH_DTYPES.get(dtype, dtype):
                raise TypeError("%s: %s must be %s, got %s" % (self.name, name, dtype, v.dtype))
            if shape is not None and list(v.shape) != list(shape):
                raise ValueError("%s: %s must have shape %s, got %s" % (self.name, name, list(shape),
                                                                      list(v.shape)))
            if not v.is_contiguous():
                raise ValueError("%s: %s must be contiguous" % (self.name, name))
            if v.device.type != "cuda":
                raise ValueError("%s: %s must be on a CUDA device, got %s" % (self.name, name, v.device))
            return ctypes.c_uint64(v.data_ptr())
        if isinstance(v, int) and not isinstance(v, bool):
            return ctypes.c_uint64(v)
        raise TypeError("%s: %s must be a tensor or an address (int), got %r" % (self.name, name, v))

    def function(self):
        """The CUfunction, loaded into the current context on first use."""
        if self._func is None:
            check_backend(self.name, self.entry, _running_backend())
            cu = _cuda()
            with open(os.path.join(self.folder, self.entry["cubin"]), "rb") as f:
                image = f.read()
            mod = ctypes.c_void_p()
            buf = ctypes.create_string_buffer(image, len(image))
            _check(cu.cuModuleLoadData(ctypes.byref(mod), buf), "cuModuleLoadData(%s)" % self.entry["cubin"])
            if self.entry.get("backend") == "nvshmem":
                from . import _runtime
                _runtime.backend_module_init(mod.value)  # before any launch from it
            fn = ctypes.c_void_p()
            _check(cu.cuModuleGetFunction(ctypes.byref(fn), mod, self.entry["entry"].encode()),
                   "cuModuleGetFunction(%s)" % self.entry["entry"])
            if self.smem > 48 * 1024:
                _check(cu.cuFuncSetAttribute(fn, _CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, self.smem),
                       "cuFuncSetAttribute(max dynamic shared memory %d)" % self.smem)
            self._module, self._func = mod, fn
        return self._func

    def __call__(self, *args, grid=None, stream=None, **kwargs):
        values = self.pack(args, kwargs)
        g = _dims(grid, "grid") if grid is not None else self.grid
        if g is None:
            raise TypeError("%s: the manifest fixes no grid: pass grid=" % self.name)
        fn = self.function()
        ptrs = (ctypes.c_void_p * len(values))(*[
            v.param() if isinstance(v, TensorMap) else ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in values])
        b = self.block
        _check(_cuda().cuLaunchKernel(fn, g[0], g[1], g[2], b[0], b[1], b[2], self.smem,
                                      ctypes.c_void_p(_stream_handle(stream)), ptrs, None),
               "cuLaunchKernel(%s)" % self.name)


def _stream_handle(stream):
    if stream is None:
        import torch
        return torch.cuda.current_stream().cuda_stream
    return int(getattr(stream, "cuda_stream", stream))


def read_manifest(folder):
    path = os.path.join(folder, "manifest.json")
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise FileNotFoundError("%s: no manifest.json (build the kernels first)" % folder) from None


def write_manifest(folder, entries, drop=()):
    """Merge {name: entry} into folder/manifest.json, and remove the names in
    `drop` with their cubins (kernels that failed to build now: an older entry
    left in place would run code older than its source)."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "manifest.json")
    manifest = read_manifest(folder) if os.path.exists(path) else {}
    manifest.update(entries)
    for name in drop:
        entry = manifest.pop(name, None)
        cubin = entry and os.path.join(folder, entry["cubin"])
        if cubin and os.path.exists(cubin):
            os.remove(cubin)
    with open(path, "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    return path


def load(folder):
    """{name: Kernel} of a build folder's manifest.json."""
    return {name: Kernel(name, entry, folder) for name, entry in read_manifest(folder).items()}
