"""torch tensors over symmetric memory.

symm.tensor() allocates with symm_malloc (collective) and wraps the memory in a
torch tensor on this PE's GPU through DLPack (see _dlpack.py for why). The
memory stays allocated until symm.free_tensor(t), the end of the symm.scope()
that made it, or symm.finalize(): dropping the tensor does not free it,
because freeing is collective and garbage collection happens at different
moments on different PEs. When the memory is freed, the tensors symm made
over it (the tensor itself and its peer tensors) are emptied in place
(t.set_()), so a stale use fails instead of touching freed memory; views the
caller derived from them cannot be reached and must not be used afterwards.
"""
import weakref

from . import _dlpack, _runtime
from ._errors import NoPeerAccessError, UnsupportedError

# Tensors symm made -> the key of their allocation (zero-byte tensors have no
# pointer, so the storage address alone cannot identify them).
# id(tensor) -> allocation key, dropped when the tensor dies. Not a
# WeakKeyDictionary: its lookups compare tensors with ==, which torch makes
# element-wise (and ambiguous as a bool).
_keys = {}


def _torch():
    try:
        import torch
    except ImportError:
        raise ImportError("symm tensors need torch (pip install torch)") from None
    return torch


def _device(torch):
    if not _runtime.initialized():
        _runtime._check("symm tensor", -2)  # NotInitializedError
    d = _runtime.device()
    if d < 0:
        raise RuntimeError("symm runs without a GPU here (SYMM_BACKEND=host?): tensors need one; "
                           "use symm.malloc() for raw symmetric memory")
    if not torch.cuda.is_available():
        raise RuntimeError("torch sees no CUDA device, but symm uses GPU %d" % d)
    return torch.device("cuda", d)


def _shape(shape):
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise TypeError("shape must be an int or a sequence of ints, got %r" % (shape,)) from None
    for d in dims:
        if not isinstance(d, int) or isinstance(d, bool):
            raise TypeError("shape must hold ints, got %r" % (shape,))
        if d < 0:
            raise ValueError("shape must not be negative, got %r" % (shape,))
    return dims


def _dtype(torch, dtype):
    if not isinstance(dtype, torch.dtype):
        raise TypeError("dtype must be a torch.dtype, got %r" % (dtype,))
    if dtype.is_complex:
        raise TypeError("complex dtypes are not supported by symm tensors")
    return dtype


def _itemsize(torch, dtype):
    return torch.empty((), dtype=dtype).element_size()


def _empty_out(ref):
    t = ref()
    if t is not None:
        torch = _torch()
        with torch.no_grad():
            t.set_()


def _wrap(torch, ptr, nbytes, dev, dtype, size, stride=None, offset=0):
    """A tensor of dtype/size/stride over the nbytes at ptr, on dev, sharing
    the memory. The bytes come in through DLPack; the tensor is then set onto
    that storage directly (not a view of a view), so set_() can empty it."""
    capsule = _dlpack.byte_capsule(ptr, nbytes, _dlpack.KDL_CUDA, dev.index)
    storage = torch.utils.dlpack.from_dlpack(capsule).untyped_storage()
    out = torch.empty((0,), dtype=dtype, device=dev)
    if stride is None:
        out.set_(storage, offset, size)
    else:
        out.set_(storage, offset, size, stride)
    return out


def tensor(shape, dtype=None, *, zero=False):
    """A tensor of `shape` and `dtype` (default float32) in symmetric memory on
    this PE's GPU. Collective: every PE passes the same shape and dtype and
    gets the same offset in its heap. Uninitialised unless zero=True."""
    torch = _torch()
    dims = _shape(shape)
    dtype = _dtype(torch, torch.float32 if dtype is None else dtype)
    dev = _device(torch)
    numel = 1
    for d in dims:
        numel *= d
    nbytes = numel * _itemsize(torch, dtype)
    key, alloc = _runtime._malloc(nbytes, zero)
    ptr = alloc.ptr
    t = err = None
    try:
        if nbytes == 0:
            t = torch.empty(dims, dtype=dtype, device=dev)
        else:
            t = _wrap(torch, ptr, nbytes, dev, dtype, dims)
    except BaseException as e:  # noqa: BLE001 - settled on every PE, then re-raised
        err = e
    _runtime._settle(key, err, "symm.tensor")
    _keys[id(t)] = key
    weakref.finalize(t, _keys.pop, id(t), None)
    alloc.invalidators.append(lambda r=weakref.ref(t): _empty_out(r))
    return t


def zeros(shape, dtype=None):
    """tensor(shape, dtype, zero=True)."""
    return tensor(shape, dtype, zero=True)


def _allocation_of(t, what):
    torch = _torch()
    if not isinstance(t, torch.Tensor):
        raise TypeError("%s: expected a torch.Tensor, got %s" % (what, type(t).__name__))
    key = _keys.get(id(t))
    if key is None:
        key = t.untyped_storage().data_ptr()
    alloc = _runtime._allocs.get(key)
    if alloc is None or (alloc.ptr and t.untyped_storage().data_ptr() != alloc.ptr):
        raise ValueError("%s: the tensor is not in symmetric memory (make it with symm.tensor(); "
                         "it may also have been freed)" % what)
    return key, alloc


def is_symmetric(t):
    """True when t (or the tensor it is a view of) was made by symm.tensor()
    and is still allocated."""
    try:
        _allocation_of(t, "is_symmetric")
    except (TypeError, ValueError):
        return False
    return True


def free_tensor(t):
    """Free the symmetric memory under t (made by symm.tensor(), or a view of
    one). Collective. t and the peer tensors over it become empty."""
    key, _ = _allocation_of(t, "symm.free_tensor")
    _runtime._free_key(key)


def get_peer_tensor(t, pe):
    """PE pe's copy of the symmetric tensor t, as a tensor on this PE's GPU
    (same shape, strides and dtype): reading and writing it are loads and
    stores over NVLink. Not collective. Valid until t's memory is freed."""
    torch = _torch()
    key, alloc = _allocation_of(t, "symm.get_peer_tensor")
    if not isinstance(pe, int) or isinstance(pe, bool):
        raise TypeError("pe must be an int")
    n = _runtime.n_pes()
    if not 0 <= pe < n:
        raise ValueError("pe %d is outside [0, %d)" % (pe, n))
    if alloc.nbytes == 0 or t.numel() == 0:
        return torch.empty_like(t)
    peer = _runtime.peer_ptr(alloc.ptr, pe)
    if not peer:
        raise NoPeerAccessError("symm_ptr", NoPeerAccessError.status,
                                "PE %d's memory cannot be loaded/stored from this GPU" % pe)
    dev = _device(torch)
    out = _wrap(torch, peer, alloc.nbytes, dev, t.dtype, t.size(), t.stride(), t.storage_offset())
    alloc.invalidators.append(lambda r=weakref.ref(out): _empty_out(r))
    return out


def get_multicast_tensor(t):
    """The multicast (NVLS) view of the symmetric tensor t: stores reach every
    PE's copy, multimem reductions read them all.

    Multicast is opt-in (docs/design.md decision 7): this raises UnsupportedError
    unless symm.multicast_allowed() and the C library provides a multicast
    address for the allocation. It never creates a multicast object itself.
    Every symm collective has a unicast path, so this is an optimisation only.
    """
    _allocation_of(t, "symm.get_multicast_tensor")
    if not _runtime.multicast_allowed():
        raise UnsupportedError(
            "symm.get_multicast_tensor", UnsupportedError.status,
            "multicast is disabled: it needs SYMM_ENABLE_MULTICAST=1 and none of "
            "NCCL_NVLS_ENABLE=0, NVSHMEM_DISABLE_NVLS=1, TORCH_SYMM_MEM_DISABLE_MULTICAST=1")
    # The host API has no call that returns a multicast address (the native
    # backend maps peers by unicast only), so even with the gate open there is
    # nothing to wrap; say so rather than creating anything.
    raise UnsupportedError(
        "symm.get_multicast_tensor", UnsupportedError.status,
        "this libsymm creates no multicast objects (its native backend maps peers by unicast "
        "only); use get_peer_tensor() or the collectives, which have unicast paths")
