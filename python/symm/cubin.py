"""symm.cubin: launch kernels compiled ahead of time, with no DSL installed.

A build folder holds <name>.cubin files and a manifest.json of
{name: entry}; an entry names the cubin, its kernel symbol ("entry"), its
parameters in the entry's order ([name, kind, dtype, shape, extra]; kind is
"ptr", "i32", "u32", "i64", "u64", "f32", "f64" or "tma"; the rest optional,
null where unknown; extra is a pointer's alignment in bytes, or a tma
operand's box and swizzle), and may fix the launch ("grid", "block", "smem")
and the order callers pass the arguments in ("call": names; it may name
arguments the kernel does not take, which are accepted and ignored), and the
symm backend its device code was compiled for ("backend": native, nvshmem or
nccl; absent means native). symm.tilelang.build and symm.cute.aot write these
(build writes or updates manifest.json itself; aot's Kernel.aot returns the
entry and `python -m symm.cute.aot` writes it).

    kernels = symm.cubin.load("build-tilelang")
    kernels["shift"](symm.ctx(), src, dst, sig)         # torch's current stream

Pointer parameters take torch tensors or integer addresses. A tensor must be
contiguous, on a CUDA device, and of the recorded dtype and shape where the
entry records them (symm.tilelang.build records both; symm.cute.aot the dtype
of each symm.cute.Ptr, and no shape, the kernel taking its sizes as
arguments); a tensor's address, and an integer address, must be a multiple
of the recorded alignment (symm.cute.aot: Ptr's align). A wrong argument
raises TypeError / ValueError before anything is launched. A "tma" parameter
(symm.cute.Tma: a 2-D operand read by TMA) takes a 2-D tensor with
contiguous rows; its entry's extra says the box (box_rows x box_cols
elements) and the swizzle, from which the 128-byte descriptor is encoded
here (cuTensorMapEncodeTiled) and passed by value, followed by the tensor's
(rows, cols) as two int32. A "tmap" parameter (a CUtensorMap
passed by value, for TMA copies: symm.tilelang.lower records
cuTensorMapEncodeTiled's arguments in the entry's fifth field) takes the
tensor; the descriptor is encoded from its address at launch and kept for
the next launch with that address. The module is
loaded into the current CUDA context through the driver API (libcuda,
ctypes) on first use, after checking that its backend is the running
symm's; an nvshmem module then gets symm_backend_module_init (NVSHMEM's
per-module device state).
"""
import ctypes
import fcntl
import json
import numbers
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
# cuda.h: CUtensorMapDataType, CUtensorMapSwizzle, CUtensorMapL2promotion
_TMA_DTYPES = {"float16": 6, "bfloat16": 9}
_TMA_SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}
_TMA_L2_PROMOTION_256B = 3
_TMA_CACHE_MAX = 256
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
        lib.cuMemcpyAsync.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p]
        u64p, u32p = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32)
        lib.cuTensorMapEncodeTiled.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                                               u64p, u64p, u32p, u32p, ctypes.c_int, ctypes.c_int,
                                               ctypes.c_int, ctypes.c_int]
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


def pointer_value(kernel, name, v, dtype=None, shape=None, align=None):
    """The address a pointer parameter gets from `v` (a torch tensor or an
    int), after the checks the manifest allows: a tensor's dtype (a torch
    dtype name such as "float32") and shape where given, contiguity and
    device; the address a multiple of `align` where given."""
    if hasattr(v, "data_ptr"):
        if dtype is not None and str(v.dtype) != "torch." + _TORCH_DTYPES.get(dtype, dtype):
            raise TypeError("%s: %s must be %s, got %s" % (kernel, name, dtype, v.dtype))
        if shape is not None and list(v.shape) != list(shape):
            raise ValueError("%s: %s must have shape %s, got %s" % (kernel, name, list(shape), list(v.shape)))
        if not v.is_contiguous():
            raise ValueError("%s: %s must be contiguous" % (kernel, name))
        if v.device.type != "cuda":
            raise ValueError("%s: %s must be on a CUDA device, got %s" % (kernel, name, v.device))
        addr = v.data_ptr()
    elif isinstance(v, numbers.Integral) and not isinstance(v, bool):
        addr = int(v)
    else:
        raise TypeError("%s: %s must be a tensor or an address (int), got %r" % (kernel, name, v))
    if align and addr % align:
        raise ValueError("%s: %s (0x%x) is not %d-byte aligned, which the kernel assumes"
                         % (kernel, name, addr, align))
    return addr


def tma_encode_args(extra, ptr, rows, cols, ld):
    """The arguments of cuTensorMapEncodeTiled for a row-major rows x cols
    tensor at `ptr` (row stride `ld` elements) read in boxes of extra's
    box_rows x box_cols: (data type, rank, address, dims, byte strides, box,
    element strides, interleave, swizzle, L2 promotion, OOB fill); dims and
    box innermost first. Raises ValueError for what TMA cannot address."""
    dtype = extra.get("dtype")
    if dtype not in _TMA_DTYPES:
        raise ValueError("tma: data type %r is not one of %s" % (dtype, ", ".join(sorted(_TMA_DTYPES))))
    swizzle = int(extra.get("swizzle", 128))
    if swizzle not in _TMA_SWIZZLE:
        raise ValueError("tma: swizzle %r is not 0, 32, 64 or 128 bytes" % (swizzle,))
    box_rows, box_cols, esize = int(extra["box_rows"]), int(extra["box_cols"]), 2
    if not (0 < box_rows <= 256 and 0 < box_cols <= 256) or (swizzle and box_cols * esize > swizzle):
        raise ValueError("tma: box %d x %d does not fit the %d-byte swizzle" % (box_rows, box_cols, swizzle))
    if ptr % 16 or (ld * esize) % 16 or ld < cols:
        raise ValueError("tma: the tensor must start 16-byte aligned with 16-byte aligned rows "
                         "(address 0x%x, row stride %d elements, %d columns)" % (ptr, ld, cols))
    if not (0 < rows < 2**32 and 0 < cols < 2**32):
        raise ValueError("tma: %d x %d is not a shape TMA can address" % (rows, cols))
    return (_TMA_DTYPES[dtype], 2, ptr, (cols, rows), (ld * esize,), (box_cols, box_rows), (1, 1), 0,
            _TMA_SWIZZLE[swizzle], _TMA_L2_PROMOTION_256B, 0)


class TensorMap:
    """A CUtensorMap (128 bytes, 64-byte aligned, as the driver wants it)
    encoded by cuTensorMapEncodeTiled from its arguments (tma_encode_args'
    order); `desc` is the descriptor, `param()` what cuLaunchKernel takes
    for it as a by-value parameter."""

    def __init__(self, dtype, rank, address, dims, strides, box, elem_strides, interleave, swizzle, l2, oob,
                 what="tensor map"):
        self._raw = ctypes.create_string_buffer(_TMAP_BYTES + _TMAP_ALIGN)
        off = (-ctypes.addressof(self._raw)) % _TMAP_ALIGN
        self.desc = (ctypes.c_uint8 * _TMAP_BYTES).from_buffer(self._raw, off)
        self.address = ctypes.addressof(self.desc)
        c64, c32 = ctypes.c_uint64, ctypes.c_uint32
        _check(_cuda().cuTensorMapEncodeTiled(
            ctypes.c_void_p(self.address), int(dtype), rank, ctypes.c_void_p(address), (c64 * rank)(*dims),
            (c64 * max(1, rank - 1))(*strides), (c32 * rank)(*box), (c32 * rank)(*elem_strides),
            int(interleave), int(swizzle), int(l2), int(oob)), "cuTensorMapEncodeTiled(%s)" % what)

    def param(self):
        """The pointer cuLaunchKernel takes for this by-value parameter."""
        return ctypes.c_void_p(self.address)


def tensor_map_from_spec(spec, address, what):
    """The TensorMap of a "tmap" parameter: `spec` holds
    cuTensorMapEncodeTiled's arguments but the address (symm.tilelang.lower
    records them), `address` the tensor's."""
    missing = [k for k in _TMAP_KEYS if k not in spec]
    if missing:
        raise ValueError("%s: the tensor-map spec lacks %s" % (what, ", ".join(missing)))
    rank = int(spec["rank"])
    if not (len(spec["dims"]) == len(spec["box"]) == len(spec["elem_strides"]) == rank
            and len(spec["strides"]) == rank - 1):
        raise ValueError("%s: the tensor-map spec's lengths do not match its rank %d" % (what, rank))
    if address % 16:
        raise ValueError("%s: TMA needs a 16-byte-aligned address, got 0x%x" % (what, address))
    return TensorMap(spec["dtype"], rank, address, spec["dims"], spec["strides"], spec["box"],
                     spec["elem_strides"], spec["interleave"], spec["swizzle"], spec["l2"], spec["oob"], what)


class Kernel:
    """One manifest entry: call it with the kernel's arguments (in the
    entry's "call" order if it has one, else its parameter order; or by
    name), grid= / stream= to override the launch."""

    def __init__(self, name, entry, folder):
        self.name, self.entry, self.folder = name, entry, folder
        self.params = [tuple(p) + (None,) * (5 - len(p)) for p in entry["params"]]
        for p in self.params:
            if p[1] == "tma":
                if not isinstance(p[4], dict) or not {"box_rows", "box_cols", "dtype"} <= set(p[4]):
                    raise ValueError("%s: tma parameter %s needs box_rows, box_cols and dtype" % (name, p[0]))
                continue
            if p[1] == "tmap":
                if not isinstance(p[4], dict):
                    raise ValueError("%s: tensor-map parameter %s has no spec" % (name, p[0]))
                continue
            if len(p) != 5 or p[1] not in _KINDS:
                raise ValueError("%s: parameter %s is not [name, kind (one of %s), dtype, shape, align]"
                                 % (name, list(p), ", ".join(sorted(set(_KINDS) | {"tma", "tmap"}))))
            if p[1] != "ptr" and (p[3] or p[4]):
                raise ValueError("%s: scalar parameter %s records a shape or alignment" % (name, p[0]))
        self._tmaps = {}   # (parameter index, address) -> TensorMap of a tmap parameter
        names = [p[0] for p in self.params]
        self.call_order = list(entry.get("call") or names)
        if not set(names) <= set(self.call_order) or len(set(self.call_order)) != len(self.call_order):
            raise ValueError("%s: 'call' %s does not name the parameters %s" % (name, self.call_order, names))
        self.grid = _dims(entry["grid"], "grid") if "grid" in entry else None
        self.block = _dims(entry.get("block", 1), "block")
        self.smem = int(entry.get("smem", 0))
        self._func = None
        self._module = None
        self._maps = {}

    def __repr__(self):
        return "symm.cubin.Kernel(%s: %s(%s))" % (self.name, self.entry["entry"], ", ".join(self.call_order))

    def pack(self, args, kwargs):
        """The ctypes values of the kernel's parameters, in entry order (a
        tma parameter gives two: its descriptor and its shape)."""
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
        out = []
        for i, p in enumerate(self.params):
            if p[1] == "tma":
                m, shape = self._tensor_map(p, given[p[0]])
                out += [m.desc, shape]
            elif p[1] == "tmap":
                out.append(self._tmap(i, p, given[p[0]]))
            else:
                out.append(self._value(p, given[p[0]]))
        return out

    def _tensor_map(self, p, v):
        """The TensorMap of tensor v for tma parameter p (encoded once per
        address, shape and stride; kept for later calls)."""
        name, _, dtype, _, extra = p
        if not hasattr(v, "data_ptr") or v.dim() != 2:
            raise TypeError("%s: %s must be a 2-D tensor (a TMA operand)" % (self.name, name))
        if str(v.dtype) != "torch." + _TORCH_DTYPES.get(dtype, dtype):
            raise TypeError("%s: %s must be %s, got %s" % (self.name, name, dtype, v.dtype))
        if v.device.type != "cuda" or v.stride(1) != 1:
            raise ValueError("%s: %s must be a CUDA tensor with contiguous rows" % (self.name, name))
        key = (v.data_ptr(), v.shape[0], v.shape[1], v.stride(0))
        m = self._maps.get(key)
        if m is None:
            try:
                args = tma_encode_args(extra, *key)
            except ValueError as e:
                raise ValueError("%s: %s: %s" % (self.name, name, e)) from None
            if len(self._maps) >= _TMA_CACHE_MAX:
                self._maps.clear()
            m = self._maps[key] = (TensorMap(*args, what="%s: %s" % (self.name, name)),
                                   (ctypes.c_int32 * 2)(key[1], key[2]))
        return m

    def _tmap(self, i, p, v):
        """The TensorMap of tmap parameter i for tensor v (kept per address)."""
        name, _, dtype, shape, spec = p
        addr = pointer_value(self.name, name, v, dtype, shape)
        tm = self._tmaps.get((i, addr))
        if tm is None:
            if len(self._tmaps) >= _TMA_CACHE_MAX:   # tensors come and go: keep the newest few
                self._tmaps.clear()
            tm = self._tmaps[(i, addr)] = tensor_map_from_spec(spec, addr, "%s: %s" % (self.name, name))
        return tm

    def _value(self, p, v):
        name, kind, dtype, shape, align = p
        if kind != "ptr":
            if hasattr(v, "data_ptr"):
                raise TypeError("%s: %s is a %s scalar, got a tensor" % (self.name, name, kind))
            return _KINDS[kind](v)
        return ctypes.c_uint64(pointer_value(self.name, name, v, dtype, shape, align))

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


class CopyList:
    """Device-to-device copies issued back to back on one stream with the
    driver's cuMemcpyAsync: done by the copy engines (no SM), ordered after
    what the stream holds and before what follows, captured by CUDA graphs
    like any stream work. Addresses are ints (a peer's symmetric memory
    included: unified addressing); the list is fixed at construction, so a
    call costs one driver call per copy and no tensor bookkeeping.

        ce = symm.cubin.CopyList([(dst, src, nbytes), ...])
        ce(stream)        # torch.cuda.Stream, a raw handle, or None (current)
    """

    def __init__(self, copies):
        self.copies = []
        for dst, src, n in copies:
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in (dst, src, n)) or n <= 0:
                raise ValueError("symm.cubin.CopyList: copies are (dst, src, nbytes) ints, nbytes > 0; got %r"
                                 % ((dst, src, n),))
            self.copies.append((ctypes.c_uint64(dst), ctypes.c_uint64(src), ctypes.c_size_t(n)))

    def __len__(self):
        return len(self.copies)

    def __call__(self, stream=None):
        cu, h = _cuda(), ctypes.c_void_p(_stream_handle(stream))
        for dst, src, n in self.copies:
            rc = cu.cuMemcpyAsync(dst, src, n, h)
            if rc:
                _check(rc, "cuMemcpyAsync(0x%x <- 0x%x, %d bytes)" % (dst.value, src.value, n.value))


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
        raise FileNotFoundError("%s: no manifest.json: symm.tilelang.build and python -m symm.cute.aot write "
                                "it; for entries of your own (symm.cute's Kernel.aot returns one), "
                                "symm.cubin.write_manifest(folder, {name: entry})" % folder) from None


def write_manifest(folder, entries, drop=()):
    """Merge {name: entry} into folder/manifest.json, and remove the names in
    `drop` with their cubins (kernels that failed to build now: an older entry
    left in place would run code older than its source). Processes writing
    one folder at once take turns (a lock on the folder), and a reader never
    sees a half-written file (it is written aside, then renamed)."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "manifest.json")
    lock = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        manifest = read_manifest(folder) if os.path.exists(path) else {}
        manifest.update(entries)
        for name in drop:
            entry = manifest.pop(name, None)
            cubin = entry and os.path.join(folder, entry["cubin"])
            if cubin and os.path.exists(cubin):
                os.remove(cubin)
        tmp = "%s.%d.tmp" % (path, os.getpid())
        try:
            with open(tmp, "w") as f:
                json.dump(manifest, f, indent=1, sort_keys=True)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    finally:
        os.close(lock)  # releases the lock
    return path


def load(folder):
    """{name: Kernel} of a build folder's manifest.json."""
    return {name: Kernel(name, entry, folder) for name, entry in read_manifest(folder).items()}
