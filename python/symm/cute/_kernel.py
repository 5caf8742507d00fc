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
needs to know.
"""
import os
import re
import tempfile

import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import make_fake_stream, make_ptr

from ._bitcode import parse_arch, resolve_backend
from .host import arch_name, compile as symm_compile

# parameter kinds of the manifest (symm.cubin packs them)
_SCALAR_KIND = {cutlass.Int32: "i32", cutlass.Uint32: "u32", cutlass.Int64: "i64",
                cutlass.Uint64: "u64", cutlass.Float32: "f32"}
_KIND_BYTES = {"i32": 4, "u32": 4, "f32": 4, "i64": 8, "u64": 8, "ptr": 8}


class Ptr:
    """A pointer parameter: element type and the alignment the kernel may
    assume (bytes)."""

    def __init__(self, dtype, align=16):
        self.dtype, self.align = dtype, align

    def __repr__(self):
        return "Ptr(%s, align=%d)" % (getattr(self.dtype, "__name__", self.dtype), self.align)


def _kind(t):
    if isinstance(t, Ptr):
        return "ptr"
    if t in _SCALAR_KIND:
        return _SCALAR_KIND[t]
    raise TypeError("symm.cute.Kernel parameters are cutlass.Int32/Uint32/Int64/Uint64/Float32 "
                    "or symm.cute.Ptr(dtype), got %r" % (t,))


def _dims(x, what):
    x = (x,) if isinstance(x, int) else tuple(x)
    if not 1 <= len(x) <= 3 or any(not isinstance(v, int) or v < 1 for v in x):
        raise ValueError("%s must be 1 to 3 positive ints, got %r" % (what, x))
    return x + (1,) * (3 - len(x))


class Kernel:
    """A @cute.kernel with its parameter list (name, type) and launch shape."""

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
        that launches the kernel; what both compile() and aot() compile."""
        if self._launcher is None:
            names = [n for n, _ in self.params]
            args = ", ".join(names)
            src = ("def launch(%s, grid_x, grid_y, grid_z, stream):\n"
                   "    kernel(%s).launch(grid=[grid_x, grid_y, grid_z], block=%r, smem=%d, "
                   "stream=stream)\n" % (", ".join(names), args, list(self.block), self.smem))
            ns = {"kernel": self.fn}
            exec(compile(src, "<symm.cute launcher %s>" % self.name, "exec"), ns)  # noqa: S102
            launch = ns["launch"]
            import cuda.bindings.driver as cuda
            ann = {n: (cute.Pointer if isinstance(t, Ptr) else t) for n, t in self.params}
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
            else:
                out.append(t(0))
        return out + [cutlass.Int32(1)] * 3 + [make_fake_stream()]

    # -- just in time ----------------------------------------------------------

    def compile(self, arch=None, options=None, backend=None, trace=None):
        """Compile for this GPU (or `arch`) and the running symm backend (or
        `backend`) with CuTe DSL, traced with trace=True (None: $SYMM_TRACE);
        returns a JitLaunch."""
        fn = symm_compile(self.launcher(), *self.fake_args(), arch=arch, options=options, backend=backend,
                          trace=trace)
        return JitLaunch(self, fn)

    # -- ahead of time ---------------------------------------------------------

    def aot(self, out_dir, arch=90, options=None, keep_ptx=False, backend="native", trace=None):
        """Compile for `arch` and a symm backend (no GPU needed) into
        out_dir/<name>.cubin and return its manifest entry (symm.cubin reads
        it, and refuses it under another backend); keep_ptx also writes
        out_dir/<name>.ptx; trace=True links the traced bitcode (None:
        $SYMM_TRACE)."""
        backend = resolve_backend(backend)
        os.makedirs(out_dir, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="symm-cute-") as dump:
            opts = "--gpu-arch %s --keep-ptx --keep-cubin --dump-dir %s %s" % (
                arch_name(arch), dump, options or "")
            fn = symm_compile(self.launcher(), *self.fake_args(), options=opts.strip(), backend=backend,
                              trace=trace)
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
        want = [_KIND_BYTES[k] for k in self.kinds]
        if sizes != want:
            raise RuntimeError("%s: the cubin's entry %s takes parameters of %s bytes, the "
                               "Kernel declares %s" % (self.name, entry, sizes, want))
        with open(os.path.join(out_dir, self.name + ".cubin"), "wb") as f:
            f.write(cubin)
        if keep_ptx:
            with open(os.path.join(out_dir, self.name + ".ptx"), "w") as f:
                f.write(ptx)
        return {"cubin": self.name + ".cubin", "entry": entry, "arch": parse_arch(arch),
                "params": [[n, k] for (n, _), k in zip(self.params, self.kinds)],
                "block": list(self.block), "smem": self.smem, "backend": backend}


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
    data pointer), cute.Pointers or integer addresses; the stream defaults to
    torch's current stream."""

    def __init__(self, kernel, fn):
        self.kernel, self.fn = kernel, fn

    def __call__(self, *args, grid, stream=None):
        k = self.kernel
        if len(args) != len(k.params):
            raise TypeError("%s takes %d arguments (%s), got %d" % (
                k.name, len(k.params), ", ".join(n for n, _ in k.params), len(args)))
        conv = []
        for (name, t), a in zip(k.params, args):
            if isinstance(t, Ptr):
                if isinstance(a, cute.Pointer):
                    conv.append(a)
                    continue
                addr = a.data_ptr() if hasattr(a, "data_ptr") else int(a)
                if addr % t.align:
                    raise ValueError("%s: %s (0x%x) is not %d-byte aligned"
                                     % (k.name, name, addr, t.align))
                conv.append(make_ptr(t.dtype, addr, cute.AddressSpace.gmem, assumed_align=t.align))
            else:
                conv.append(t(a))
        gx, gy, gz = _dims(grid, "grid")
        import cuda.bindings.driver as cuda
        self.fn(*conv, gx, gy, gz, cuda.CUstream(_stream_handle(stream)))


def _stream_handle(stream):
    if stream is None:
        import torch
        return torch.cuda.current_stream().cuda_stream
    return int(getattr(stream, "cuda_stream", stream))
