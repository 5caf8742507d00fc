"""symm.copyengine: communication on the copy engines, issued by the host on
side streams, so that moving data takes no SM from the kernels beside it
(the fused GEMM examples of every front end use it: Triton, CuTe DSL and
TileLang). Needs torch and a CUDA driver; imported on its own
(`from symm import copyengine`), not by `import symm`.

A call's side work is a Program, fixed when the operation is built (the same
addresses and values every call): on one or more lanes (side streams),
  copy(dst, src, n)       cuMemcpyAsync of n bytes to or from a peer's
                          symmetric memory (an address from peer()): a copy
                          engine moves them over NVLink
  wait_eq / wait_ge(a, v) cuStreamWaitValue64: the lane's later work waits
                          until the 64-bit word at a (this GPU's memory)
                          equals / reaches v, with no SM spinning
  write(a, v)             cuStreamWriteValue64 of a word of this GPU's memory
  after(lane, other)      lane waits for what `other` has queued so far
Signals to a peer are copies of 8-byte words of ones (ones()), queued after
the data on the same lane, so they land after it.

A copy whose two ends are on this GPU is refused: the driver may run it on
the SMs, where it queues behind the GEMM's blocks, which may be spinning on
the very flag queued after that copy (a deadlock until the wait deadline).
Such a copy goes on the caller's stream, before the GEMM (Side.main_copy).

Side runs a Program once per call between begin() (the lanes wait for the
caller's stream; the caller then launches its kernels) and end() (the caller's stream waits for the lanes). On a
plain stream it replays a CUDA graph of the program captured when the
program was prepared (one host call instead of one per operation); while
the caller's stream is being captured into a graph, it queues the operations
themselves (they become part of the caller's graph).

The values are constants fixed when the program is built (a captured graph
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
                           "symm.copyengine uses")


class PeerAddr(int):
    """An address in this process of another PE's symmetric memory (peer())."""


def peer(addr, pe):
    """PE pe's address of this PE's symmetric address `addr` (symm.peer_ptr),
    raising where that PE is not reachable from here (another node, or
    SYMM_DEBUG_FORCE_REMOTE): a copy engine can only reach mapped peers."""
    p = symm.peer_ptr(addr, pe)
    if not p:
        raise RuntimeError("PE %d is not mapped into this process: symm.copyengine needs every PE on this "
                           "node, reachable by load/store (NVLink / PCIe peer access)" % pe)
    return PeerAddr(p)


def check_copy(dst, src, n):
    """Refuse a side-stream copy with both ends on this GPU (see above)."""
    if n <= 0:
        raise ValueError("a copy of %d bytes" % n)
    if not isinstance(dst, PeerAddr) and not isinstance(src, PeerAddr):
        raise ValueError("copy 0x%x <- 0x%x (%d bytes): both ends are on this GPU, so the driver may run it on the "
                         "SMs, behind GEMM blocks that wait for it; copy on the caller's stream before the GEMM "
                         "(Side.main_copy), or name a peer's address (peer())" % (dst, src, n))


def ones(device, words=1):
    """Device words holding 1 (uint64), the source of flag writes to peers
    (a copy of k of them sets k consecutive flags)."""
    return torch.ones(words, dtype=torch.int64, device=device)


class Program:
    """One call's side work on `lanes` side streams (see the module's doc)."""

    def __init__(self, lanes=1):
        self.lanes, self.ops = lanes, []

    def _lane(self, lane):
        if not 0 <= lane < self.lanes:
            raise ValueError("lane %d of a program with %d lanes" % (lane, self.lanes))
        return lane

    def copy(self, dst, src, n, lane=0):
        check_copy(dst, src, n)
        self.ops.append(("copy", self._lane(lane), int(dst), int(src), n))

    def wait_eq(self, addr, value, lane=0):
        self.ops.append(("wait_eq", self._lane(lane), int(addr), value))

    def wait_ge(self, addr, value, lane=0):
        self.ops.append(("wait_ge", self._lane(lane), int(addr), value))

    def write(self, addr, value, lane=0):
        self.ops.append(("write", self._lane(lane), int(addr), value))

    def after(self, lane, other):
        """`lane` waits for everything queued on `other` so far."""
        if lane != other:
            self.ops.append(("after", self._lane(lane), self._lane(other)))

    def count(self):
        """Copy-engine and stream memory operations per call."""
        return sum(op[0] != "after" for op in self.ops)

    def describe(self):
        n = {k: sum(op[0] == k for op in self.ops) for k in ("copy", "wait_eq", "wait_ge", "write")}
        return "%d lanes, %d copies, %d waits, %d writes" % (self.lanes, n["copy"], n["wait_eq"] + n["wait_ge"],
                                                             n["write"])


class Side:
    """The side streams of one operation: begin(), run(program), end()."""

    def __init__(self, device, lanes=1):
        self.device = device
        self.streams = [torch.cuda.Stream(device) for _ in range(lanes)]
        self._h = [ctypes.c_void_p(s.cuda_stream) for s in self.streams]
        self._lib = _driver()
        # fork and join events made once: no allocation per call
        self._fork = torch.cuda.Event()
        self._joins = [torch.cuda.Event() for _ in range(lanes)]
        self._graphs = {}       # id(program) -> (program, CUDA graph of it)
        self.graph_error = None  # why a program could not be captured (it is then queued op by op)
        self._graph, self._prog, self._used = None, None, 1

    # -- preparing ---------------------------------------------------------------------
    def prepare(self, program):
        """Capture `program` into a CUDA graph that run() replays on a plain
        stream (call it with no call of this operation in flight)."""
        if program.lanes > len(self.streams):
            raise ValueError("a program of %d lanes on a Side of %d" % (program.lanes, len(self.streams)))
        if id(program) in self._graphs:
            return
        g = torch.cuda.CUDAGraph()
        s0 = self.streams[0]
        try:
            with torch.cuda.graph(g, stream=s0, capture_error_mode="thread_local"):
                for s in self.streams[1:program.lanes]:
                    s.wait_stream(s0)
                self._queue(program)
                for s in self.streams[1:program.lanes]:
                    s0.wait_stream(s)
        except Exception as e:  # noqa: BLE001 - the program still runs, op by op
            self.graph_error = "%s: %s" % (type(e).__name__, (str(e).splitlines() or [""])[0])
            torch.cuda.synchronize()
            return
        self._graphs[id(program)] = (program, g)

    def graphed(self, program):
        return id(program) in self._graphs

    # -- one call ------------------------------------------------------------------------
    def begin(self, program):
        """Fork: the lanes `program` uses wait for everything queued on the
        caller's stream (lane 0 alone where a graph of it will replay: the
        graph forks the others). Then launch the caller's kernels, run(), end()."""
        if program.lanes > len(self.streams):
            raise ValueError("a program of %d lanes on a Side of %d" % (program.lanes, len(self.streams)))
        capturing = torch.cuda.is_current_stream_capturing()
        self._graph = None if capturing else self._graphs.get(id(program), (None, None))[1]
        self._prog = program
        self._used = 1 if self._graph is not None else program.lanes
        self._fork.record(torch.cuda.current_stream())
        for s in self.streams[:self._used]:
            s.wait_event(self._fork)

    def run(self):
        """Queue the program begin() named, or replay its graph."""
        if self._graph is None:
            self._queue(self._prog)
        else:
            with torch.cuda.stream(self.streams[0]):
                self._graph.replay()

    def end(self):
        """Join: the caller's stream waits for everything queued on the lanes."""
        cur = torch.cuda.current_stream()
        for s, ev in zip(self.streams[:self._used], self._joins):
            ev.record(s)
            cur.wait_event(ev)

    def _queue(self, program):
        lib, h = self._lib, self._h
        for op in program.ops:
            kind, lane = op[0], op[1]
            if kind == "copy":
                _check(lib.cuMemcpyAsync(op[2], op[3], op[4], h[lane]), "cuMemcpyAsync")
            elif kind == "wait_eq":
                _check(lib.cuStreamWaitValue64_v2(h[lane], op[2], op[3], _CU_STREAM_WAIT_VALUE_EQ),
                       "cuStreamWaitValue64(==)")
            elif kind == "wait_ge":
                _check(lib.cuStreamWaitValue64_v2(h[lane], op[2], op[3], _CU_STREAM_WAIT_VALUE_GEQ),
                       "cuStreamWaitValue64(>=)")
            elif kind == "write":
                _check(lib.cuStreamWriteValue64_v2(h[lane], op[2], op[3], _CU_STREAM_WRITE_VALUE_DEFAULT),
                       "cuStreamWriteValue64")
            else:  # after
                self.streams[lane].wait_stream(self.streams[op[2]])

    # -- on the caller's stream ------------------------------------------------------------
    def main_copy(self, dst, src, n):
        """A copy on the caller's stream (within this GPU: queue it before the
        GEMM that waits for it, never beside it)."""
        _check(self._lib.cuMemcpyAsync(int(dst), int(src), n, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)),
               "cuMemcpyAsync")

    def main_fill(self, words, value):
        """Every 64-bit word of tensor `words` set to value on the caller's
        stream (one small kernel)."""
        words.view(torch.int64).fill_(value)

    def main_write(self, addr, value):
        _check(self._lib.cuStreamWriteValue64_v2(ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), int(addr),
                                                 value, _CU_STREAM_WRITE_VALUE_DEFAULT), "cuStreamWriteValue64")

    def main_wait_eq(self, addr, value):
        _check(self._lib.cuStreamWaitValue64_v2(ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), int(addr),
                                                value, _CU_STREAM_WAIT_VALUE_EQ), "cuStreamWaitValue64(==)")
