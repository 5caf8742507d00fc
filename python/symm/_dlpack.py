"""DLPack capsules over memory symm owns, so torch (or numpy, for CPU memory in
tests) can wrap it without copying.

Why DLPack rather than __cuda_array_interface__: DLPack names the device, so a
peer's memory mapped into this process becomes a tensor on *this* GPU (the
array interface makes torch ask the driver, which answers with the peer's
GPU), and its deleter tells us when the last tensor over the memory is gone.

The deleter only drops bookkeeping: freeing symmetric memory is collective and
must never happen at a garbage-collection point that differs between PEs, so
it is done by symm.free_tensor(), a scope, or finalize.
"""
import ctypes
import threading

KDL_CPU = 1
KDL_CUDA = 2
_KDL_UINT = 1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", _DELETER)]

_CAPSULE_NAME = b"dltensor"
_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

# Live exports: address of the DLManagedTensor -> (struct, shape array, on_free).
# The struct memory must outlive the consumer's tensor, so we hold it here
# until the consumer calls the deleter.
_live = {}
_live_lock = threading.Lock()


def _on_delete(managed):
    try:
        addr = ctypes.cast(managed, ctypes.c_void_p).value
        with _live_lock:
            entry = _live.pop(addr, None)
        if entry is not None and entry[2] is not None:
            entry[2]()
    except Exception:  # noqa: BLE001 - a deleter must not raise into C
        pass


_deleter = _DELETER(_on_delete)
# Tensors may be released after this module is torn down at interpreter exit;
# the C thunk must outlive them, so it is never freed.
ctypes.pythonapi.Py_IncRef(ctypes.py_object(_deleter))


def byte_capsule(ptr, nbytes, device_type, device_id, on_free=None):
    """A DLPack capsule describing `nbytes` bytes at `ptr` as a 1-D uint8
    tensor on (device_type, device_id). on_free() runs when the consumer
    releases the last reference."""
    m = DLManagedTensor()
    shape = (ctypes.c_int64 * 2)(nbytes, 1)  # [shape, stride]
    m.dl_tensor.data = ptr
    m.dl_tensor.device = DLDevice(device_type, device_id)
    m.dl_tensor.ndim = 1
    m.dl_tensor.dtype = DLDataType(_KDL_UINT, 8, 1)
    m.dl_tensor.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    m.dl_tensor.strides = ctypes.cast(ctypes.byref(shape, 8), ctypes.POINTER(ctypes.c_int64))
    m.dl_tensor.byte_offset = 0
    m.manager_ctx = None
    m.deleter = _deleter
    addr = ctypes.addressof(m)
    with _live_lock:
        _live[addr] = (m, shape, on_free)
    return _PyCapsule_New(addr, _CAPSULE_NAME, None)


def live_exports():
    """How many exported capsules the consumers still hold (for tests)."""
    with _live_lock:
        return len(_live)


class Exporter:
    """An object speaking the __dlpack__ protocol for one capsule (what
    numpy.from_dlpack and torch.from_dlpack expect)."""

    def __init__(self, ptr, nbytes, device_type, device_id, on_free=None):
        self._args = (ptr, nbytes, device_type, device_id, on_free)
        self._used = False

    def __dlpack__(self, stream=None, **_kwargs):
        if self._used:
            raise BufferError("this symm buffer was already exported")
        self._used = True
        return byte_capsule(*self._args)

    def __dlpack_device__(self):
        return (self._args[2], self._args[3])
