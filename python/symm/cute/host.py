"""Host side of symm.cute: symmetric torch tensors as CuTe tensors, and
compilation with the bitcode of the target architecture.

    x = symm.tensor((n,), torch.float32)
    xc = symm.cute.host.as_tensor(x)                     # a CuTe tensor over x
    nxt = symm.cute.host.get_peer_tensor(x, (me + 1) % n_pes)
    fn = symm.cute.compile(launch, symm.ctx(), xc, ...)   # cute.compile + symm bitcode

Inside kernels, symm.cute.peer_tensor(ctx, view, pe) gives a peer's copy of a
view; these host calls are for tensors handed to kernels or to @cute.jit code.
"""
import re

import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack, make_ptr

from .. import _backends, _lib, _tensor
from ._bitcode import current_device_arch, link_files, parse_arch, resolve_backend, target

_TORCH_TO_CUTLASS = {
    "float32": cutlass.Float32, "float16": cutlass.Float16, "bfloat16": cutlass.BFloat16,
    "float64": cutlass.Float64, "int8": cutlass.Int8, "int16": cutlass.Int16,
    "int32": cutlass.Int32, "int64": cutlass.Int64, "uint8": cutlass.Uint8,
    "uint16": cutlass.Uint16, "uint32": cutlass.Uint32, "uint64": cutlass.Uint64,
    "float8_e4m3fn": cutlass.Float8E4M3FN, "float8_e5m2": cutlass.Float8E5M2,
}


def cutlass_dtype(torch_dtype):
    """The cutlass element type of a torch dtype (torch.float32 -> cutlass.Float32)."""
    name = str(torch_dtype).replace("torch.", "")
    if name not in _TORCH_TO_CUTLASS:
        raise TypeError("no CuTe element type for torch dtype %s" % torch_dtype)
    return _TORCH_TO_CUTLASS[name]


def torch_dtype(cutlass_type):
    """The torch dtype of a cutlass element type."""
    import torch
    for name, t in _TORCH_TO_CUTLASS.items():
        if t is cutlass_type:
            return getattr(torch, name)
    raise TypeError("no torch dtype for %s" % cutlass_type)


def _check_cuda(t, call):
    if not hasattr(t, "data_ptr") or not getattr(t, "is_cuda", False):
        raise TypeError("symm.cute.host.%s: expected a CUDA torch tensor, got %s"
                        % (call, type(t).__name__))


def as_tensor(t, *, assumed_align=16, dynamic=True):
    """A CuTe tensor over the torch CUDA tensor t (through DLPack; no copy).

    assumed_align: byte alignment CuTe may assume of the first element (the
    symmetric heap's allocations are 256-byte aligned; a view into the middle
    of one may need less). dynamic: shapes and strides are runtime values, so
    one compiled kernel serves every size; False bakes them into the kernel.
    """
    _check_cuda(t, "as_tensor")
    if t.data_ptr() % assumed_align:
        raise ValueError("symm.cute.host.as_tensor: the tensor's address 0x%x is not %d-byte "
                         "aligned; pass a smaller assumed_align" % (t.data_ptr(), assumed_align))
    c = from_dlpack(t, assumed_align=assumed_align)
    return c.mark_layout_dynamic() if dynamic and t.dim() > 0 else c


def pointer(t, *, assumed_align=16):
    """A cute.Pointer to the first element of the torch CUDA tensor t, for
    kernels that take pointers (symm.cute.Kernel parameters of type Ptr)."""
    _check_cuda(t, "pointer")
    if t.data_ptr() % assumed_align:
        raise ValueError("symm.cute.host.pointer: address 0x%x is not %d-byte aligned"
                         % (t.data_ptr(), assumed_align))
    return make_ptr(cutlass_dtype(t.dtype), t.data_ptr(), cute.AddressSpace.gmem,
                    assumed_align=assumed_align)


def get_peer_tensor(t, pe, **kwargs):
    """PE pe's copy of the symmetric torch tensor t as a CuTe tensor (loads and
    stores through it go over NVLink). Keyword arguments as for as_tensor."""
    return as_tensor(_tensor.get_peer_tensor(t, pe), **kwargs)


def get_multicast_tensor(t, **kwargs):
    """The multicast (NVLS) view of the symmetric tensor t as a CuTe tensor, for
    multimem instructions. Multicast is opt-in and gated (docs/design.md decision
    7): this raises symm.UnsupportedError unless it is enabled and the library
    provides a multicast address (symm.get_multicast_tensor)."""
    return as_tensor(_tensor.get_multicast_tensor(t), **kwargs)


_ARCH_OPT = re.compile(r"--gpu-arch[ =](\S+)")


def compile(fn, *args, arch=None, options=None, backend=None, trace=None, **kwargs):  # noqa: A001 - cute.compile's name
    """cute.compile(fn, *args, options=..., **kwargs) linking the symm bitcode of
    the architecture and backend compiled for.

    arch: 90, "sm_90a", "sm_80"...: adds `--gpu-arch sm_XX[a]` to the options.
    Without it the architecture is the one in options, else the current
    GPU's (CuTe DSL's own default target). The bitcode is chosen to match.
    backend: "native", "nvshmem" or "nccl" (docs/backends.md); None: the
    running symm's backend, else $SYMM_BACKEND, else native. nvshmem also links NVSHMEM's device
    bitcode, and the result initialises NVSHMEM's state in its loaded module
    before its first launch (see ModuleInit); native and nccl need no step.
    trace: True links the traced bitcode, whose calls record into the device
    trace (docs/trace.md); None follows $SYMM_TRACE.
    """
    opts = options or ""
    m = _ARCH_OPT.search(opts)
    if arch is not None:
        a = parse_arch(arch)
        if m and parse_arch(m.group(1)) != a:
            raise ValueError("symm.cute.compile: arch=%r but options say --gpu-arch %s"
                             % (arch, m.group(1)))
        if not m:
            opts = ("%s --gpu-arch %s" % (opts, arch_name(a))).strip()
    elif m:
        a = parse_arch(m.group(1))
    else:
        a = current_device_arch()
    a = a if a is not None else 90
    backend = resolve_backend(backend)
    trace = _lib.trace_requested(trace)
    files = link_files(a, backend, trace)  # every file checked before anything is traced
    if len(files) > 1:
        # symm's file is declared by the extern calls; the others (NVSHMEM's)
        # only through the option, which CuTe DSL merges with the declared ones
        opts = ("%s --link-libraries=%s" % (opts, ",".join(files[1:]))).strip()
    with target(a, backend, trace):
        fn = cute.compile(fn, *args, options=opts, **kwargs) if opts else cute.compile(fn, *args, **kwargs)
    return ModuleInit(fn, backend) if _backends.get(backend).module_init else fn


class ModuleInit:
    """A function compiled for a backend whose modules need a set-up (list.h's
    module_init: nvshmem keeps its device state in a __constant__ of every
    module linking its device library), so before the first launch in a CUDA
    context the loaded module goes to symm_backend_module_init (symm.triton
    does the same for Triton's modules). Everything else (__ptx__, __cubin__,
    export_to_c...) is the compiled function's."""

    def __init__(self, fn, backend="nvshmem"):
        self.fn = fn
        self.backend = backend
        self._contexts = set()

    def __getattr__(self, name):
        return getattr(self.fn, name)

    def __call__(self, *args, **kwargs):
        self.init_module()
        return self.fn(*args, **kwargs)

    def init_module(self):
        """Set up the module in the current CUDA context (once per context)."""
        from .. import _runtime, cubin
        running = _runtime.backend() if _runtime.initialized() else None
        if running != self.backend:
            raise RuntimeError("symm.cute: this kernel was compiled for the %s backend, but symm %s; "
                               "compile it for the running backend (backend=None)"
                               % (self.backend, "runs %s" % running if running else "is not initialised"))
        ctx = cubin.current_context()
        if ctx not in self._contexts:
            # CuTe DSL loads its cubin as a CUDA library (context-independent);
            # the module of this context is the one whose constant NVSHMEM fills
            _runtime.backend_module_init(cubin.library_module(int(self.fn.library)))
            self._contexts.add(ctx)


def arch_name(arch):
    """90 -> 'sm_90a' (the arch-specific target wgmma and TMA need), 80 -> 'sm_80'."""
    a = parse_arch(arch)
    return "sm_%d%s" % (a, "a" if a >= 90 else "")
