"""symm.cute.Kernel: one description of a kernel launch, compiled just in time
on the user's GPU or ahead of time into a cubin that symm.cubin launches on a
machine without CuTe DSL.

A Kernel is a @cute.kernel whose parameters are scalars and pointers only
(build tensor views inside the kernel with cute.make_tensor), with a fixed
block shape and dynamic shared memory. Both forms are called the same way:

    k = symm.cute.Kernel(ring_kernel, [("ctx", cutlass.Int64), ("dst", Ptr(cutlass.Float32)),
                                       ("n", cutlass.Int32)], block=256)
    run = k.compile()                    # JIT, this GPU (or k.compile(arch=90))
    run(symm.ctx(), dst_tensor, n, grid=g)   # torch's current stream (stream= to choose)

    python -m symm.cute.aot -o build-cute FILE   # cubins + manifest.json (no GPU needed)
    run = symm.cubin.load("build-cute")["ring_kernel"]   # same call, no CuTe DSL

Scalars and pointers keep the kernel's parameter list plain, so the cubin's
entry point takes exactly these parameters in this order (8-byte pointers and
64-bit integers, 4-byte 32-bit values), which is all a launcher without CuTe
needs to know. One richer kind: Tma(dtype, box_rows), a 2-D operand the
kernel reads with TMA bulk copies. The kernel gets it as two parameters (the
copy atom, whose 128-byte descriptor travels by value, and the TMA
coordinate tensor); callers pass one 2-D tensor, whose descriptor CuTe DSL
encodes on the JIT path and symm.cubin (cuTensorMapEncodeTiled) on the AOT
path, from the box and swizzle the manifest records.
"""
import os
import re
import tempfile

import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import make_fake_stream, make_ptr

from ..cubin import pointer_value
from ._bitcode import parse_arch, resolve_backend
from .host import arch_name, compile as symm_compile

# parameter kinds of the manifest (symm.cubin packs them)
_SCALAR_KIND = {cutlass.Int32: "i32", cutlass.Uint32: "u32", cutlass.Int64: "i64",
                cutlass.Uint64: "u64", cutlass.Float32: "f32"}
_KIND_BYTES = {"i32": 4, "u32": 4, "f32": 4, "i64": 8, "u64": 8, "ptr": 8}
# torch's name of a pointer's element type: the manifest records it and
# symm.cubin checks tensors against it (a type torch lacks is not checked)
_TORCH_NAMES = {"Float16": "float16", "BFloat16": "bfloat16", "Float32": "float32", "Float64": "float64",
                "Int8": "int8", "Uint8": "uint8", "Int16": "int16", "Uint16": "uint16", "Int32": "int32",
                "Uint32": "uint32", "Int64": "int64", "Uint64": "uint64", "Boolean": "bool",
                "Float8E4M3FN": "float8_e4m3fn", "Float8E5M2": "float8_e5m2"}


def torch_dtype_name(dtype):
    """"float32" for cutlass.Float32...; None for a type torch has no name for."""
    return _TORCH_NAMES.get(getattr(dtype, "__name__", None))
# a Tma operand: the descriptor (128 bytes, by value) and the coordinate
# tensor's shape (rows, cols as two int32)
_TMA_BYTES = [128, 8]
_SWIZZLE_BYTES = 128


class Ptr:
    """A pointer parameter: element type and the alignment the kernel may
    assume (bytes; 16 by default, what 128-bit vector accesses need). The
    kernel receives it as a cute.Pointer of that type and alignment; a
    tensor or address passed for it must be that aligned (the launchers
    check), so declare less (Ptr(cutlass.Uint64, 8)) for pointers into the
    middle of a buffer, such as one signal word of several."""

    def __init__(self, dtype, align=16):
        if not isinstance(align, int) or align < 1 or align & (align - 1):
            raise ValueError("Ptr align must be a power of two (bytes), got %r" % (align,))
        self.dtype, self.align = dtype, align

    def __repr__(self):
        return "Ptr(%s, align=%d)" % (getattr(self.dtype, "__name__", self.dtype), self.align)


class Tma:
    """A 2-D operand the kernel reads with TMA (cp.async.bulk.tensor): a
    row-major matrix (rows x cols, cols contiguous, 16-byte aligned rows) of a
    16-bit type, copied in boxes of `box_rows` rows by 128 bytes of columns
    (64 elements) into 128-byte-swizzled shared memory, the K-major layout
    warpgroup MMA reads (tma_smem_layout gives it, staged, for the kernel's
    buffers). In the kernel it is two parameters, the copy atom and the TMA
    coordinate tensor (rows x cols): partition them with
    cute.nvgpu.cpasync.tma_partition. Callers pass one 2-D tensor."""

    def __init__(self, dtype, box_rows):
        if getattr(dtype, "width", None) != 16:
            raise TypeError("symm.cute.Tma: 16-bit element types only (BFloat16, Float16), got %r" % (dtype,))
        if not isinstance(box_rows, int) or not 8 <= box_rows <= 256 or box_rows % 8:
            raise ValueError("symm.cute.Tma: box_rows must be a multiple of 8 in [8, 256], got %r" % (box_rows,))
        self.dtype, self.box_rows = dtype, box_rows
        self.box_cols = _SWIZZLE_BYTES * 8 // dtype.width

    def __repr__(self):
        return "Tma(%s, box_rows=%d)" % (getattr(self.dtype, "__name__", self.dtype), self.box_rows)

    def manifest(self):
        """What symm.cubin needs to encode the descriptor of a tensor."""
        from .host import torch_dtype
        return {"box_rows": self.box_rows, "box_cols": self.box_cols, "swizzle": _SWIZZLE_BYTES,
                "dtype": str(torch_dtype(self.dtype)).replace("torch.", "")}


def tma_smem_layout(dtype, rows, stages=None):
    """The shared-memory layout a Tma(dtype, rows) operand lands in: 128-byte
    swizzle atoms (8 rows x 128 bytes) tiled over rows x 64 columns, times
    `stages` buffers when given (shape (rows, 64, stages))."""
    from cutlass.cute.nvgpu import warpgroup
    atom = warpgroup.make_smem_layout_atom(warpgroup.SmemLayoutAtomKind.K_SW128, dtype)
    cols = _SWIZZLE_BYTES * 8 // dtype.width
    if stages is None:
        return cute.tile_to_shape(atom, (rows, cols), order=(0, 1))
    return cute.tile_to_shape(atom, (rows, cols, stages), order=(0, 1, 2))


def _tma_operand(spec, ptr, rows, cols, ld):
    """(copy atom, TMA coordinate tensor) of a Tma operand, built while the
    launcher is traced (on the JIT path CuTe DSL's host code encodes the
    descriptor from these)."""
    from cutlass.cute.nvgpu import cpasync
    ld = cute.assume(ld, divby=16 * 8 // spec.dtype.width)
    t = cute.make_tensor(ptr, cute.make_layout((rows, cols), stride=(ld, 1)))
    return cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), t,
                                       tma_smem_layout(spec.dtype, spec.box_rows),
                                       (spec.box_rows, spec.box_cols))


def _kind(t):
    if isinstance(t, Ptr):
        return "ptr"
    if isinstance(t, Tma):
        return "tma"
    if t in _SCALAR_KIND:
        return _SCALAR_KIND[t]
    raise TypeError("symm.cute.Kernel parameters are cutlass.Int32/Uint32/Int64/Uint64/Float32, "
                    "symm.cute.Ptr(dtype) or symm.cute.Tma(dtype, box_rows), got %r" % (t,))


def _dims(x, what):
    x = (x,) if isinstance(x, int) else tuple(x)
    if not 1 <= len(x) <= 3 or any(not isinstance(v, int) or v < 1 for v in x):
        raise ValueError("%s must be 1 to 3 positive ints, got %r" % (what, x))
    return x + (1,) * (3 - len(x))


class Kernel:
    """A @cute.kernel with its parameter list (name, type) and launch shape.

    `fn` takes the parameters of `params` in that order: a scalar
    (cutlass.Int32 / Uint32 / Int64 / Uint64 / Float32) arrives as that type,
    a Ptr(dtype, align) as a cute.Pointer to global memory of that element
    type and assumed alignment (annotate it `cute.Pointer`); `ptr + k` is k
    elements further, cute.make_tensor(ptr, layout) a view over it. `block`
    is 1 to 3 ints, `smem` the dynamic shared memory in bytes, `name` the
    kernel's name in the manifest and its cubin's file name (default: fn's
    name; give one to describe one function twice). Launches take grid= as
    an int or 1 to 3 ints."""

    def __init__(self, fn, params, *, block, smem=0, name=None):
        self.fn = fn
        self.params = [(str(n), t) for n, t in params]
        self.kinds = [_kind(t) for _, t in self.params]
        self.block = _dims(block, "block")
        self.smem = int(smem)
        self.name = name or getattr(fn, "__name__", None) or getattr(
            getattr(fn, "_dsl_object", None), "__name__", "kernel")
        self._launcher = None

    def __repr__(self):
        return "Kernel(%s, block=%s, smem=%d)" % (self.name, self.block, self.smem)

    # -- the @cute.jit launcher shared by both forms -------------------------

    def launcher(self):
        """A @cute.jit function (params..., grid_x, grid_y, grid_z, stream)
        that launches the kernel; what both compile() and aot() compile. A
        Tma parameter x is four launcher parameters (x, x_rows, x_cols,
        x_ld) and two kernel arguments (its copy atom and TMA tensor)."""
        if self._launcher is None:
            import cuda.bindings.driver as cuda
            ann, names, body, call = {}, [], [], []
            ns = {"kernel": self.fn, "_tma_operand": _tma_operand}
            for n, t in self.params:
                if isinstance(t, Tma):
                    dims = [n + "_rows", n + "_cols", n + "_ld"]
                    names += [n] + dims
                    ann[n] = cute.Pointer
                    ann.update({d: cutlass.Int32 for d in dims})
                    ns["_spec_" + n] = t
                    body.append("    %s_atom, %s_tma = _tma_operand(_spec_%s, %s, %s)"
                                % (n, n, n, n, ", ".join(dims)))
                    call += [n + "_atom", n + "_tma"]
                else:
                    names.append(n)
                    ann[n] = cute.Pointer if isinstance(t, Ptr) else t
                    call.append(n)
            src = ("def launch(%s, grid_x, grid_y, grid_z, stream):\n%s"
                   "    kernel(%s).launch(grid=[grid_x, grid_y, grid_z], block=%r, smem=%d, "
                   "stream=stream)\n" % (", ".join(names), "".join(b + "\n" for b in body),
                                         ", ".join(call), list(self.block), self.smem))
            exec(compile(src, "<symm.cute launcher %s>" % self.name, "exec"), ns)  # noqa: S102
            launch = ns["launch"]
            ann.update(grid_x=cutlass.Int32, grid_y=cutlass.Int32, grid_z=cutlass.Int32,
                       stream=cuda.CUstream)
            launch.__annotations__ = ann
            launch.__name__ = launch.__qualname__ = "launch_" + self.name
            self._launcher = cute.jit(preprocess=False)(launch)
        return self._launcher

    def fake_args(self):
        """Placeholder arguments for compiling without data or a GPU."""
        out = []
        for _, t in self.params:
            if isinstance(t, Ptr):
                out.append(make_ptr(t.dtype, 0, cute.AddressSpace.gmem, assumed_align=t.align))
            elif isinstance(t, Tma):
                out += [make_ptr(t.dtype, 0, cute.AddressSpace.gmem, assumed_align=16)] + [cutlass.Int32(1)] * 3
            else:
                out.append(t(0))
        return out + [cutlass.Int32(1)] * 3 + [make_fake_stream()]

    # -- just in time ----------------------------------------------------------

    def compile(self, arch=None, options=None, backend=None):
        """Compile for this GPU (or `arch`) and the running symm backend (or
        `backend`) with CuTe DSL; returns a JitLaunch."""
        fn = symm_compile(self.launcher(), *self.fake_args(), arch=arch, options=options, backend=backend)
        return JitLaunch(self, fn)

    # -- ahead of time ---------------------------------------------------------

    def aot(self, out_dir, arch=90, options=None, keep_ptx=False, backend="native"):
        """Compile for `arch` and a symm backend (no GPU needed) into
        out_dir/<name>.cubin and return its manifest entry (symm.cubin reads
        it, and refuses it under another backend); keep_ptx also writes
        out_dir/<name>.ptx."""
        backend = resolve_backend(backend)
        os.makedirs(out_dir, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="symm-cute-") as dump:
            opts = "--gpu-arch %s --keep-ptx --keep-cubin --dump-dir %s %s" % (
                arch_name(arch), dump, options or "")
            fn = symm_compile(self.launcher(), *self.fake_args(), options=opts.strip(), backend=backend)
            cubin, ptx = fn.__cubin__, fn.__ptx__
        entries = list(getattr(fn, "kernel_info", {}) or {})
        entry = entries[0] if len(entries) == 1 else None
        params = ptx_entry_params(ptx, entry)
        if entry is None:
            if len(params) != 1:
                raise RuntimeError("%s: expected one kernel in the module, found %s"
                                   % (self.name, sorted(params)))
            entry = next(iter(params))
        sizes = params[entry]
        want = [b for k in self.kinds for b in (_TMA_BYTES if k == "tma" else [_KIND_BYTES[k]])]
        if sizes != want:
            raise RuntimeError("%s: the cubin's entry %s takes parameters of %s bytes, the "
                               "Kernel declares %s" % (self.name, entry, sizes, want))
        with open(os.path.join(out_dir, self.name + ".cubin"), "wb") as f:
            f.write(cubin)
        if keep_ptx:
            with open(os.path.join(out_dir, self.name + ".ptx"), "w") as f:
                f.write(ptx)
        return {"cubin": self.name + ".cubin", "entry": entry, "arch": parse_arch(arch),
                "params": [[n, k, t.manifest()["dtype"], None, t.manifest()] if k == "tma"
                           else self._manifest_param(n, t, k) for (n, t), k in zip(self.params, self.kinds)],
                "block": list(self.block), "smem": self.smem, "backend": backend}

    @staticmethod
    def _manifest_param(name, t, kind):
        """[name, kind], and for a pointer [name, "ptr", dtype, shape (none:
        the kernel takes its sizes as arguments), align] (symm.cubin)."""
        return [name, kind] if kind != "ptr" else [name, kind, torch_dtype_name(t.dtype), None, t.align]


_ENTRY = re.compile(r"\.entry\s+(\w+)\s*\(([^)]*)\)", re.S)
_PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.(\w+)(?:\s+\.ptr[\w\s\.]*?)?\s+\w+(?:\[(\d+)\])?")


def ptx_entry_params(ptx, entry=None):
    """{entry name: [parameter sizes in bytes]} of the kernels in a PTX text."""
    out = {}
    for m in _ENTRY.finditer(ptx):
        if entry is not None and m.group(1) != entry:
            continue
        sizes = []
        for p in _PARAM.finditer(m.group(2)):
            t, n = p.group(1), p.group(2)
            bits = int(re.sub(r"\D", "", t) or 8)
            sizes.append(int(n) * bits // 8 if n else bits // 8)
        out[m.group(1)] = sizes
    return out


class JitLaunch:
    """A Kernel compiled by CuTe DSL, called like a symm.cubin kernel:
    (*args, grid=, stream=None). Pointer arguments take torch tensors (their
    data pointer; checked as symm.cubin checks them: the Ptr's dtype,
    contiguous, on a CUDA device), cute.Pointers or integer addresses, each
    aligned as the Ptr says; the stream defaults to torch's current stream."""

    def __init__(self, kernel, fn):
        self.kernel, self.fn = kernel, fn

    def __call__(self, *args, grid, stream=None):
        k = self.kernel
        if len(args) != len(k.params):
            raise TypeError("%s takes %d arguments (%s), got %d" % (
                k.name, len(k.params), ", ".join(n for n, _ in k.params), len(args)))
        conv = []
        for (name, t), a in zip(k.params, args):
            if isinstance(t, Tma):
                conv += _tma_args(k.name, name, t, a)
                continue
            if isinstance(t, Ptr):
                if isinstance(a, cute.Pointer):
                    conv.append(a)
                    continue
                addr = pointer_value(k.name, name, a, torch_dtype_name(t.dtype), None, t.align)
                conv.append(make_ptr(t.dtype, addr, cute.AddressSpace.gmem, assumed_align=t.align))
            else:
                conv.append(t(a))
        gx, gy, gz = _dims(grid, "grid")
        import cuda.bindings.driver as cuda
        self.fn(*conv, gx, gy, gz, cuda.CUstream(_stream_handle(stream)))


def _tma_args(kname, name, spec, t):
    """The launcher's (pointer, rows, cols, ld) of a 2-D tensor for a Tma parameter."""
    from .host import torch_dtype
    if not hasattr(t, "data_ptr") or t.dim() != 2:
        raise TypeError("%s: %s must be a 2-D tensor (a Tma operand), got %r" % (kname, name, type(t).__name__))
    if t.dtype != torch_dtype(spec.dtype):
        raise TypeError("%s: %s must be %s, got %s" % (kname, name, torch_dtype(spec.dtype), t.dtype))
    esize = spec.dtype.width // 8
    if t.stride(1) != 1 or t.data_ptr() % 16 or (t.stride(0) * esize) % 16:
        raise ValueError("%s: %s must have contiguous rows starting 16-byte aligned (a TMA operand)"
                         % (kname, name))
    ptr = make_ptr(spec.dtype, t.data_ptr(), cute.AddressSpace.gmem, assumed_align=16)
    return [ptr, cutlass.Int32(t.shape[0]), cutlass.Int32(t.shape[1]), cutlass.Int32(t.stride(0))]


def _stream_handle(stream):
    if stream is None:
        import torch
        return torch.cuda.current_stream().cuda_stream
    return int(getattr(stream, "cuda_stream", stream))
