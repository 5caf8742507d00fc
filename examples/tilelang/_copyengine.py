"""Communication on the copy engines, issued by the host on a side stream:
what the fused GEMM examples use so that moving the data takes no SM from
the GEMM.

A Side is a torch stream forked from the caller's stream and joined back
with events (edges of the graph when the caller's stream is being captured).
Between the two it queues, through the CUDA driver (ctypes, no compiled
extension):
  copy(dst, src, n)       cuMemcpyAsync: a copy engine moves the bytes; dst
                          or src may be a peer's symmetric memory (its address
                          in this process, symm.peer_ptr), which NVLink reaches
  wait_eq / wait_ge(a, v) cuStreamWaitValue64: later work on the side stream
                          waits until the 64-bit word at a (this GPU's memory)
                          equals / reaches v, with no SM spinning
  write(a, v)             cuStreamWriteValue64 of a word of this GPU's memory
Signals to a peer are 8-byte copies from a word holding the value (ones()),
queued after the data on the same stream, so they land after it.

The values are constants fixed when the call is queued (a captured graph
replays them), so the protocols built on them set a flag to 1 and reset it
to 0 once consumed, never count calls."""
import ctypes

import torch

import symm
import symm.cubin

_CU_STREAM_WAIT_VALUE_GEQ, _CU_STREAM_WAIT_VALUE_EQ = 0x0, 0x1
_CU_STREAM_WRITE_VALUE_DEFAULT = 0x0
_CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS = 122
_drv = None


def _driver():
    global _drv
    if _drv is None:
        lib = symm.cubin._cuda()
        lib.cuMemcpyAsync.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p]
        for name in ("cuStreamWaitValue64_v2", "cuStreamWriteValue64_v2"):
            getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint]
        lib.cuDeviceGet.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int]
        lib.cuDeviceGetAttribute.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int]
        _drv = lib
    return _drv


def _check(rc, what):
    symm.cubin._check(rc, what)


def check_memops(device_index):
    """Raise unless the GPU takes 64-bit stream memory operations (every
    GPU with a CUDA 12 or later driver does)."""
    lib = _driver()
    dev, v = ctypes.c_int(), ctypes.c_int()
    _check(lib.cuDeviceGet(ctypes.byref(dev), device_index), "cuDeviceGet")
    _check(lib.cuDeviceGetAttribute(ctypes.byref(v), _CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, dev),
           "cuDeviceGetAttribute(CAN_USE_64_BIT_STREAM_MEM_OPS)")
    if not v.value:
        raise RuntimeError("this GPU does not take 64-bit stream memory operations (cuStreamWaitValue64), which "
                           "the copy-engine examples use")


def peer(addr, pe):
    """PE pe's address of this PE's symmetric address `addr` (symm.peer_ptr),
    raising where that PE is not reachable from here (another node, or
    SYMM_DEBUG_FORCE_REMOTE): a copy engine can only reach mapped peers."""
    p = symm.peer_ptr(addr, pe)
    if not p:
        raise RuntimeError("PE %d is not mapped into this process: the copy-engine examples need every PE on this "
                           "node, reachable by load/store (NVLink / PCIe peer access)" % pe)
    return p


def ones(device):
    """A device word holding 1 (uint64), the source of flag writes to peers."""
    return torch.ones(1, dtype=torch.int64, device=device)


class Side:
    """The side stream of one operation; queue work between begin() and end()."""

    def __init__(self, device):
        self.stream = torch.cuda.Stream(device)
        self._h = ctypes.c_void_p(self.stream.cuda_stream)
        self._lib = _driver()
        self.calls = 0  # driver calls queued by the last begin()..end() (host cost)

    def begin(self):
        """Fork: the side stream waits for everything queued on the caller's."""
        self.stream.wait_stream(torch.cuda.current_stream())
        self.calls = 0

    def end(self):
        """Join: the caller's stream waits for everything queued here."""
        torch.cuda.current_stream().wait_stream(self.stream)

    def copy(self, dst, src, nbytes):
        self.calls += 1
        _check(self._lib.cuMemcpyAsync(dst, src, nbytes, self._h), "cuMemcpyAsync")

    def wait_eq(self, addr, value):
        self.calls += 1
        _check(self._lib.cuStreamWaitValue64_v2(self._h, addr, value, _CU_STREAM_WAIT_VALUE_EQ),
               "cuStreamWaitValue64(==)")

    def wait_ge(self, addr, value):
        self.calls += 1
        _check(self._lib.cuStreamWaitValue64_v2(self._h, addr, value, _CU_STREAM_WAIT_VALUE_GEQ),
               "cuStreamWaitValue64(>=)")

    def write(self, addr, value):
        self.calls += 1
        _check(self._lib.cuStreamWriteValue64_v2(self._h, addr, value, _CU_STREAM_WRITE_VALUE_DEFAULT),
               "cuStreamWriteValue64")
