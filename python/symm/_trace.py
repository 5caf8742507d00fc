"""The device trace from Python (docs/trace.md): start, stop and dump the
trace that kernels compiled with it record (symm.triton / symm.cute /
symm.tilelang with trace=True or SYMM_TRACE=1, CUDA C with -DSYMM_TRACE),
and the `symm.trace` block that does all three.

    with symm.trace("trace.json", names={1: "gemm"}):
        op(a, b, c)                       # kernels compiled with the trace
    # trace.json: every PE's events, clocks aligned (PE 0 writes it)

Every call here is collective (every PE, the same order) except name() and
counts(); each synchronises this PE's GPU first. `symm-trace plot` and
`symm-trace summary` read the file (symm.trace_tools).
"""
import ctypes
import os

from . import _lib
from ._runtime import _c, _check


def _need(name):
    if not _lib.has(name):
        raise _lib.LibraryNotFoundError("libsymm at %s has no device trace (%s): it is older than this "
                                        "package" % (_lib.library_path(), name))
    return getattr(_c(), name)


def trace_start(capacity=None):
    """Start recording, `capacity` events per PE (64 bytes each; None: the
    SYMM_TRACE_CAPACITY default, 1048576). Collective, the same capacity
    on every PE. Events of an earlier trace are discarded."""
    if capacity is None:
        capacity = 0
    if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 0:
        raise ValueError("capacity must be a positive int or None, got %r" % (capacity,))
    _check("symm_trace_start", _need("symm_trace_start")(capacity))


def trace_stop():
    """Stop recording; the events stay for trace_dump. Collective."""
    _check("symm_trace_stop", _need("symm_trace_stop")())


def trace_dump(path):
    """Write every PE's events to `path` (Chrome-trace JSON, written by PE
    0; the others' path is ignored). Collective."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError("path must be a str or os.PathLike, got %r" % (type(path).__name__,))
    _check("symm_trace_dump", _need("symm_trace_dump")(os.fsencode(path)))


def trace_name(name_id, name):
    """Show user region `name_id` (symm_trace_begin/_end) as `name` in the
    dumps (None removes it). Local; PE 0's names are written."""
    if not isinstance(name_id, int) or isinstance(name_id, bool) or name_id < 0:
        raise ValueError("name_id must be an int >= 0, got %r" % (name_id,))
    if name is not None and not isinstance(name, str):
        raise TypeError("name must be a str or None")
    raw = None if name is None else name.encode()
    if raw is not None and len(raw) > 63:
        raise ValueError("name %r is longer than 63 bytes" % name)
    _check("symm_trace_name", _need("symm_trace_name")(name_id, raw))


def trace_label(target, name, pe=-1, nbytes=None):
    """Name words of this PE's memory in the dumps: a wait on them is named
    `name` and, with pe >= 0, "from PE pe" (flags that a copy engine or the
    host writes, which no traced call does). `target`: a tensor (its
    bytes, or the first `nbytes`) or an address (then nbytes is needed).
    name None removes the label at that address. Local; kept until
    finalize."""
    if isinstance(target, int) and not isinstance(target, bool):
        addr = target
        if name is not None and nbytes is None:
            raise ValueError("trace_label: an address needs nbytes")
    elif hasattr(target, "data_ptr"):
        addr = target.data_ptr()
        if nbytes is None:
            nbytes = target.numel() * target.element_size()
    else:
        raise TypeError("trace_label: target must be a tensor or an int address, got %r" % type(target).__name__)
    if not isinstance(pe, int) or isinstance(pe, bool):
        raise TypeError("trace_label: pe must be an int")
    raw = None if name is None else name.encode()
    _check("symm_trace_label", _need("symm_trace_label")(addr, nbytes or 0, pe, raw))


def trace_counts():
    """(recorded, dropped): this PE's events of the current or last trace."""
    rec, drop = ctypes.c_uint64(), ctypes.c_uint64()
    _check("symm_trace_counts", _need("symm_trace_counts")(ctypes.byref(rec), ctypes.byref(drop)))
    return rec.value, drop.value


def trace_active():
    """True while a trace records."""
    return bool(_lib.has("symm_trace_active") and _c().symm_trace_active())


def trace_library_traced():
    """True when libsymm's own kernels (stream collectives, MoE) record: a
    build configured with -DSYMM_TRACE=ON (docs/trace.md)."""
    return bool(_lib.has("symm_trace_library_traced") and _c().symm_trace_library_traced())


class trace:
    """Record the device trace of a block and write it at its end:

        with symm.trace("trace.json", capacity=1 << 20, names={1: "gemm"}) as t:
            ...
        t.counts    # (recorded, dropped) of this PE

    Collective: every PE enters and leaves the block together. The trace is
    stopped and written even when the block raises. `names` maps region ids
    (symm_trace_begin/_end) to names."""

    def __init__(self, path, capacity=None, names=None):
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError("path must be a str or os.PathLike, got %r" % (type(path).__name__,))
        self.path, self.capacity, self.names = path, capacity, dict(names or {})
        self.counts = None

    def __enter__(self):
        for k, v in self.names.items():
            trace_name(k, v)
        trace_start(self.capacity)
        return self

    def __exit__(self, *exc):
        trace_stop()
        self.counts = trace_counts()
        trace_dump(self.path)
        return False
