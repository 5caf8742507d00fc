"""DeepEP's Python API (deep_ep V1: Buffer, Config, EventOverlap) over symm, on one node.

A DeepEP user changes the import and nothing else::

    import symm.moe.deep_ep as deep_ep          # was: import deep_ep
    buffer = deep_ep.Buffer(group, num_nvl_bytes=int(1e9))
    num_tokens_per_rank, _, num_tokens_per_expert, is_token_in_rank, _ = \\
        buffer.get_dispatch_layout(topk_idx, num_experts)
    recv_x, recv_topk_idx, recv_topk_weights, num_recv_tokens_per_expert_list, handle, event = \\
        buffer.dispatch(x, num_tokens_per_rank=num_tokens_per_rank, is_token_in_rank=is_token_in_rank,
                        num_tokens_per_expert=num_tokens_per_expert, topk_idx=topk_idx,
                        topk_weights=topk_weights)
    combined_x, combined_topk_weights, event = buffer.combine(y, handle, topk_weights=recv_topk_weights)

The normal ("high-throughput") calls run on symm.moe.HighThroughput, the
low-latency ones on symm.moe.AllToAll; docs/moe.md puts the three APIs side by
side. Shapes, dtypes, orderings and return values are DeepEP's: rows arrive
ordered by source rank, then token; top-k indices are mapped to the receiving
rank's local experts with -1 elsewhere, and their weights are 0 there;
expert_alignment rounds the per-expert counts; cached handles, num_worst_tokens,
async_finish / previous_event / allocate_on_comm_stream on the Buffer's
communication stream, bias in combine, and the low-latency receive hooks behave
as DeepEP documents them. What differs, and why:

- Memory. symm's kernels write into buffers in its symmetric heap, sized by
  tokens, not by num_nvl_bytes / num_rdma_bytes (those are checked as DeepEP
  checks them, and otherwise only recorded). The Buffer makes symm handles
  lazily, per (token bound, hidden, dtype, top-k, experts), at most two per
  shape (two dispatches in flight); Buffer.heap_bytes() says what it holds.
  Making one is collective: every rank makes the same calls in the same order
  (DeepEP's rule too), and the shapes are checked against the other ranks'.
- The token bound of the normal mode is agreed among the ranks from the counts
  every non-cached dispatch exchanges anyway (the maximum of the ranks'
  num_tokens, grown by doubling), or from num_worst_tokens / num_ranks, or from
  Buffer(..., max_num_tokens=N). A dispatch without a CPU synchronisation
  (num_worst_tokens > 0, or a cached handle) cannot agree: its num_tokens must
  fit a bound agreed before, and num_worst_tokens must be the same on every rank.
- Received tensors are fresh tensors, as DeepEP returns them. recv_x and its
  scales lie in one of the Buffer's symmetric receive buffers (num_recv_buffers
  per shape), where the peers stored the rows: no copy. A buffer serves a new
  dispatch only once torch has freed every tensor over it; while the caller
  holds all of them, the rows are copied into fresh tensors (one device copy of
  what was received). Buffer(..., zero_copy_recv=True) returns views of symm's
  own receive buffers instead, valid until the Buffer's next dispatch.
- symm's combine works on the state of a dispatch. A combine whose dispatch is
  no longer the last one over its symm handle (two combines of one handle, or
  more dispatches in flight than the Buffer keeps) first runs the dispatch's
  routing again, with zeros, on the stream (it costs one dispatch; a warning
  says so once per Buffer).
- The low-latency mode takes bf16 in and casts to fp8 on the stream before the
  transfer (DeepEP casts inside its kernel): four small kernels. Its received
  rows are laid out as DeepEP's (per local expert, by source rank, scales
  column-major) with no copy; src_info and layout_range are computed from symm's
  routes when the handle's first two entries are read.
- combine's bias is added to the bf16 sum (DeepEP adds it before rounding): one
  more rounding of the result.
- Streams. A call with neither async_finish nor previous_event runs on the
  current stream, where DeepEP runs it on its communication stream between two
  waits: the same order without the switches. Calls made on different streams
  are ordered as if they shared one, as DeepEP's are.

What symm cannot do raises symm.UnsupportedError naming it: internode
(RDMA) traffic and groups spanning several nodes, shrink mode (rank masks),
LogFMT combine, the wait-time statistics tensors, a low-latency mode without
NVLink, scales that are neither one float32 (or int32) per 128 elements nor
fewer columns than that, and get_local_buffer_tensor.
"""
import contextlib
import ctypes
import itertools
import warnings
import weakref
import zlib
from typing import Callable, List, Optional, Tuple, Union

import torch

from .. import _runtime
from .._errors import UnsupportedError
from . import SCALE_BLOCK, AllToAll, HighThroughput
from . import _fn as _moe_fn

topk_idx_t = torch.int64

# Symm handles one Buffer keeps per shape: two dispatches can wait for their combines.
_SLOTS_PER_SHAPE = 2
# Symmetric receive buffers per shape that normal dispatches return their rows in (Buffer(num_recv_buffers=)).
_RECV_BUFFERS = 2
# The normal mode's token bound grows in steps of this many tokens (at least doubling).
_BOUND_STEP = 256
_X_DTYPES = (torch.bfloat16, torch.float16, torch.float32, torch.float8_e4m3fn, torch.float8_e5m2)
_IDX_DTYPES = (torch.int64, torch.int32)
# e4m3's largest finite value, and its float32 reciprocal (DeepEP multiplies by it)
_E4M3_MAX = 448.0
_INV_E4M3_MAX = torch.tensor(1.0 / 448.0, dtype=torch.float32).item()


def _unsupported(call, what):
    return UnsupportedError(call, UnsupportedError.status, what)


def _int(v, name, call, lo=0):
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError("%s: %s must be an int, got %r" % (call, name, v))
    if v < lo:
        raise ValueError("%s: %s must be >= %d, got %d" % (call, name, lo, v))
    return v


def _tensor(t, name, call, dims=None, dtypes=None, device=None, contiguous=True):
    if not isinstance(t, torch.Tensor):
        raise TypeError("%s: %s must be a torch.Tensor, got %s" % (call, name, type(t).__name__))
    if dims is not None and t.dim() != dims:
        raise ValueError("%s: %s must have %d dimensions, got shape %s" % (call, name, dims, tuple(t.shape)))
    if dtypes is not None and t.dtype not in dtypes:
        raise TypeError("%s: %s is %s; expected %s" % (call, name, t.dtype, " or ".join(map(str, dtypes))))
    if device is not None and t.device != device:
        raise ValueError("%s: %s is on %s; this rank runs on %s" % (call, name, t.device, device))
    if contiguous and not t.is_contiguous():
        raise ValueError("%s: %s must be contiguous" % (call, name))
    return t


def _fits(got, want):
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if w is not None and g != w:
            return False
    return True


def _shape(t, name, call, want):
    if not _fits(t.shape, want):
        raise ValueError("%s: %s has shape %s; expected (%s)" % (
            call, name, tuple(t.shape), ", ".join("*" if w is None else str(w) for w in want)))


def _align(v, a):
    return (v + a - 1) // a * a


# ---------------------------------------------------------------------------
# Config
# ---------------------------------------------------------------------------

class Config:
    """DeepEP's performance configuration. symm honours num_sms (the SMs the
    normal kernels may use, at most what this rank may fill: symm.sm_share());
    the chunk sizes tune DeepEP's ring buffers, which symm's kernels do not
    have: they are checked as DeepEP checks them and have no effect."""

    def __init__(self, num_sms: int = 20, num_max_nvl_chunked_send_tokens: int = 6,
                 num_max_nvl_chunked_recv_tokens: int = 256, num_max_rdma_chunked_send_tokens: int = 6,
                 num_max_rdma_chunked_recv_tokens: int = 256) -> None:
        call = "Config"
        _int(num_sms, "num_sms", call)
        ns, nr = _int(num_max_nvl_chunked_send_tokens, "num_max_nvl_chunked_send_tokens", call, 1), \
            _int(num_max_nvl_chunked_recv_tokens, "num_max_nvl_chunked_recv_tokens", call, 1)
        rs, rr = _int(num_max_rdma_chunked_send_tokens, "num_max_rdma_chunked_send_tokens", call, 1), \
            _int(num_max_rdma_chunked_recv_tokens, "num_max_rdma_chunked_recv_tokens", call, 1)
        if ns >= nr:
            raise ValueError("%s: num_max_nvl_chunked_send_tokens %d must be below num_max_nvl_chunked_recv_tokens %d"
                             % (call, ns, nr))
        rr = _align(rr, rs)
        if rs > rr // 2:
            raise ValueError("%s: num_max_rdma_chunked_send_tokens %d must be at most half of "
                             "num_max_rdma_chunked_recv_tokens %d (rounded up to a multiple of it)" % (call, rs, rr))
        self.num_sms = num_sms
        self.num_max_nvl_chunked_send_tokens, self.num_max_nvl_chunked_recv_tokens = ns, nr
        self.num_max_rdma_chunked_send_tokens, self.num_max_rdma_chunked_recv_tokens = rs, rr

    def get_nvl_buffer_size_hint(self, hidden_bytes: int, num_ranks: int) -> int:
        """The num_nvl_bytes DeepEP's ring buffers would take for this config
        (channels x ranks x recv-chunk tokens x (a row and its metadata)), kept so
        code that sizes num_nvl_bytes from it runs unchanged. symm's normal mode
        allocates its own buffers, sized by tokens (Buffer.heap_bytes())."""
        _int(hidden_bytes, "hidden_bytes", "Config.get_nvl_buffer_size_hint", 1)
        _int(num_ranks, "num_ranks", "Config.get_nvl_buffer_size_hint", 1)
        if num_ranks > 8:
            raise _unsupported("Config.get_nvl_buffer_size_hint", "%d ranks: symm.moe.deep_ep runs on one node "
                               "(internode RDMA is not supported)" % num_ranks)
        # per channel and rank: 5 ints of head / tail / prefix, and per token the row, an 8-byte source
        # record, 128 top-k indices (int64) and weights (float32), 128 float32 scales
        per_token = hidden_bytes + 8 + 128 * (8 + 4 + 4)
        size = (self.num_sms // 2) * num_ranks * (self.num_max_nvl_chunked_recv_tokens * per_token + 5 * 4)
        return _align(max(size, 1), 128)

    def get_rdma_buffer_size_hint(self, hidden_bytes: int, num_ranks: int) -> int:
        """0 on one node (DeepEP's too: its normal mode needs no RDMA buffer
        there); more ranks would be internode, which symm does not do."""
        _int(hidden_bytes, "hidden_bytes", "Config.get_rdma_buffer_size_hint", 1)
        _int(num_ranks, "num_ranks", "Config.get_rdma_buffer_size_hint", 1)
        if num_ranks > 8:
            raise _unsupported("Config.get_rdma_buffer_size_hint", "%d ranks: internode RDMA is not supported by "
                               "symm.moe.deep_ep (one node)" % num_ranks)
        return 0

    def __repr__(self):
        return "Config(num_sms=%d, nvl=(%d, %d), rdma=(%d, %d))" % (
            self.num_sms, self.num_max_nvl_chunked_send_tokens, self.num_max_nvl_chunked_recv_tokens,
            self.num_max_rdma_chunked_send_tokens, self.num_max_rdma_chunked_recv_tokens)


# ---------------------------------------------------------------------------
# Streams and events (tests give a CPU stand-in with the same methods)
# ---------------------------------------------------------------------------

_get_stream = getattr(torch._C, "_cuda_getCurrentStream", None)
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
_is_capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", torch.cuda.is_current_stream_capturing)


class _Cuda:
    """torch.cuda's streams and events, as the Buffer uses them."""

    def __init__(self, device):
        self.device = device
        self._pinned = None
        self._read_ev = None
        self._index = torch.device(device).index if device is not None else None
        self._streams = {}

    def current(self):
        # the raw query and a Stream made from its ids: torch.cuda.current_stream
        # re-resolves the device and may switch to it on every call. The Stream
        # objects are kept by id (a wrapper owns nothing; one made again for the
        # same ids is equal), so a call makes none.
        if self._index is None or _get_stream is None:
            return torch.cuda.current_stream(self.device)
        ids = _get_stream(self._index)
        st = self._streams.get(ids)
        if st is None:
            if len(self._streams) >= 64:
                self._streams.clear()
            sid, dev, kind = ids
            st = self._streams[ids] = torch.cuda.Stream(stream_id=sid, device_index=dev, device_type=kind)
        return st

    def new_stream(self):
        return torch.cuda.Stream(self.device)

    def use(self, stream):
        return torch.cuda.stream(stream)

    def wait_stream(self, waiter, stream):
        waiter.wait_stream(stream)

    def record(self, stream):
        ev = torch.cuda.Event()
        ev.record(stream)
        return ev

    def wait_event(self, stream, event):
        stream.wait_event(event)

    def record_stream(self, t, stream):
        if t is not None and t.is_cuda:
            t.record_stream(stream)

    def capturing(self):
        return _is_capturing()

    def synchronize(self):
        torch.cuda.synchronize(self.device)

    def read(self, t):
        """The int32 values of device tensor t, flat, in a CPU tensor (pinned
        memory, valid until the next read), ordered on the current stream (the
        host waits for it)."""
        n = t.numel()
        if self._pinned is None or self._pinned.numel() < n:
            self._pinned = torch.empty(max(n, 1024), dtype=torch.int32, pin_memory=True)
        host = self._pinned[:n]
        host.copy_(t.reshape(-1), non_blocking=True)
        if self._read_ev is None:
            self._read_ev = torch.cuda.Event()
        self._read_ev.record(self.current())
        self._read_ev.synchronize()
        return host


class _SymmEngine:
    """What the Buffer needs from symm: its handles, two collectives, the PE picture."""

    def __init__(self, group, comm, call):
        rank, size = (group.rank(), group.size()) if group is not None else (comm.Get_rank(), comm.Get_size())
        torch_dev = torch.cuda.current_device() if torch.cuda.is_available() else -1
        if not _runtime.initialized():
            if group is not None:
                _runtime.init(group=group)
            else:
                _runtime.init()
        if _runtime.n_pes() != size or _runtime.my_pe() != rank:
            raise ValueError("%s: the group has %d ranks (this is rank %d), but symm runs %d PEs (this is PE %d): "
                             "the group must be all of symm's PEs, in the same order" % (
                                 call, size, rank, _runtime.n_pes(), _runtime.my_pe()))
        node = _runtime.team_node().n_pes()
        if node != size:
            raise _unsupported(call, "the group spans several nodes (%d of its %d ranks on this one): internode "
                                     "(RDMA) dispatch and combine are not supported by symm.moe.deep_ep" % (node, size))
        dev = _runtime.device()
        if dev < 0:
            raise _unsupported(call, "symm runs without a GPU here (backend %s)" % _runtime.backend())
        if torch_dev != dev:
            raise ValueError("%s: torch's current device was cuda:%d but symm runs this rank on cuda:%d (rank i of "
                             "a node takes GPU i %% device_count); call torch.cuda.set_device(%d) first" % (
                                 call, torch_dev, dev, dev))
        self.rank, self.n, self.device = rank, size, torch.device("cuda", dev)
        self.share = _runtime.sm_share()
        self.cuda = _Cuda(self.device)
        self._colls, self._codes = {}, {}

    def ht(self, num_experts, k, hidden, max_tokens, x_dtype, scales):
        return HighThroughput(num_experts, k, hidden, max_tokens, x_dtype=x_dtype, scales=scales)

    def ll(self, max_tokens, num_experts, k, hidden, x_dtype, scales):
        itemsize = torch.empty((), dtype=x_dtype).element_size()
        scale_bytes = 4 * ((hidden + SCALE_BLOCK - 1) // SCALE_BLOCK) if scales else 0
        return AllToAll(max_tokens, num_experts, k, self.rank, self.n, 1, hidden, hidden * itemsize, scale_bytes)

    def pool_alloc(self, nbytes):
        """nbytes of symmetric memory (collective), as a uint8 tensor."""
        from .._tensor import tensor
        return tensor((nbytes,), torch.uint8)

    def pool_free(self, t):
        """Free a pool_alloc tensor (collective)."""
        from .._tensor import free_tensor
        free_tensor(t)

    # The collectives move the Buffer's own tensors: contiguous, on this rank's
    # device, int32 or float32, out n times inp (all_gather) or as large
    # (all_to_all), which is what symm.all_gather / symm.all_to_all check in
    # Python; so symm's C call alone (its own checks stay), its function looked
    # up once, on the current stream: their Python costs more than the call.

    def all_gather(self, out, inp):
        _runtime._check("symm_all_gather", self._coll("symm_all_gather")(
            inp.data_ptr(), out.data_ptr(), inp.numel(), self._code(inp), None, self._stream()))

    def all_to_all(self, out, inp):
        _runtime._check("symm_all_to_all", self._coll("symm_all_to_all")(
            inp.data_ptr(), out.data_ptr(), inp.numel() // self.n, self._code(inp), None, self._stream()))

    def all_to_allv(self, out, inp, counts):
        """inp's rows [in_displs[p], +in_counts[p]) to rank p, landing at
        out_displs of its out (a2av_counts' arrays, elements)."""
        sc, sd, rc, rd = counts
        _runtime._check("symm_all_to_allv", self._coll("symm_all_to_allv")(
            inp.data_ptr(), sc, sd, out.data_ptr(), rc, rd, self._code(inp), None, self._stream()))

    def a2av_counts(self, out_rows, in_rows, row):
        """all_to_allv's count and displacement arrays (elements) for rows of
        `row` elements: in_rows[p] to rank p, out_rows[p] from it."""
        def arrays(rows):
            counts, displs, at = (ctypes.c_size_t * self.n)(), (ctypes.c_size_t * self.n)(), 0
            for p, c in enumerate(rows):
                counts[p], displs[p] = c * row, at * row
                at += c
            return counts, displs
        return arrays(in_rows) + arrays(out_rows)

    def layout(self, idx, num_experts, in_rank, per_rank, per_expert):
        """get_dispatch_layout's three tensors from idx (contiguous int32 or
        int64 [tokens, top-k] on this rank's device), checked by the C call
        before its one kernel, on the current stream (symm_moe_layout)."""
        f = self._colls.get("symm_moe_layout")
        if f is None:
            f = self._colls["symm_moe_layout"] = _moe_fn("symm_moe_layout")
        _runtime._check("symm_moe_layout", f(
            idx.data_ptr(), self._code(idx), idx.size(0), idx.size(1), num_experts, self.n, per_rank.data_ptr(),
            per_expert.data_ptr(), in_rank.data_ptr(), self._stream()))

    def _coll(self, name):
        f = self._colls.get(name)
        if f is None:
            from .._coll import _fn
            f = self._colls[name] = _fn(name)
        return f

    def _code(self, t):
        c = self._codes.get(t.dtype)
        if c is None:
            from .._coll import _DTYPE_CODES
            c = self._codes[t.dtype] = _DTYPE_CODES[str(t.dtype).replace("torch.", "")]
        return c

    def _stream(self):
        i = self.device.index
        return _raw_stream(i) if _raw_stream is not None else torch.cuda.current_stream(i).cuda_stream


def _make_engine(group, comm, call):
    return _SymmEngine(group, comm, call)


# tests replace these with CPU stand-ins (tests/python/deepep_fake.py)
_engine_factory = _make_engine
_cuda_factory = lambda: _Cuda(torch.cuda.current_device())  # noqa: E731 - for EventHandle() alone


class EventHandle:
    """A CUDA event recorded on the current stream when made (DeepEP's EventHandle)."""

    def __init__(self, _cuda=None, _stream=None):
        self._cuda = _cuda if _cuda is not None else _cuda_factory()
        self._event = self._cuda.record(_stream if _stream is not None else self._cuda.current())

    def current_stream_wait(self) -> None:
        """The current stream waits for the event."""
        self._cuda.wait_event(self._cuda.current(), self._event)


class EventOverlap:
    """DeepEP's EventOverlap: an event (or None) and tensors kept alive until it
    is waited for; `with event:` runs its body, then the current stream waits."""

    def __init__(self, event: Optional[EventHandle] = None, extra_tensors: Optional[Tuple[torch.Tensor]] = None):
        self.event = event
        self.extra_tensors = extra_tensors

    def current_stream_wait(self) -> None:
        if self.event is None:
            raise ValueError("EventOverlap.current_stream_wait: there is no event (the call was not made with "
                             "async_finish=True)")
        self.event.current_stream_wait()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        if self.event is not None:
            self.event.current_stream_wait()


# ---------------------------------------------------------------------------
# Handles
# ---------------------------------------------------------------------------

_route_ids = itertools.count(1)


class _Route:
    """One dispatch's routing: what a combine, a cached dispatch or a handle's
    tensors need from it."""

    def __init__(self, kind, **kw):
        self.id = next(_route_ids)
        self.kind = kind
        self.preps = {}  # slot -> its symm handle's argument block for this routing (cached dispatches)
        self.fast = {}   # (x dtype, scales dtype or None) -> _CachedKind of the cached dispatches that passed
        self.wplan = None  # combine's index tensors for a topk_weights wider than top-k (Buffer._combine_weights)
        self.sent_host = self.recv_host = None  # rows sent to / received from each rank, when the host knows them
        self.__dict__.update(kw)


class _CachedKind:
    """What the cached dispatches of one routing with one x dtype and scales
    dtype share: the symm handle shape (key), the x and scales shapes that
    passed the checks, and whether the scales go to symm as they are."""

    __slots__ = ("key", "x_shape", "s_shape", "direct")

    def __init__(self, key, x_shape, s_shape, direct):
        self.key, self.x_shape, self.s_shape, self.direct = key, x_shape, s_shape, direct


class DispatchHandle(tuple):
    """The normal mode's handle: DeepEP's 6-tuple (rank_prefix_matrix,
    channel_prefix_matrix, recv_channel_prefix_matrix, recv_src_idx,
    is_token_in_rank, send_head). rank_prefix_matrix (int32 [ranks, ranks]:
    [i][j] = tokens ranks 0..i send rank j), recv_src_idx (int32 [received]:
    each row's token index on its source) and is_token_in_rank are DeepEP's;
    the channel matrices and send_head belong to DeepEP's ring-buffer kernels
    and are None. Pass it back to dispatch (cached) and combine."""

    def __new__(cls, items, route, buffer):
        h = super().__new__(cls, items)
        h._route = route
        h._buffer = buffer
        return h


class LowLatencyHandle:
    """The low-latency handle: DeepEP's 5-tuple (src_info, layout_range,
    num_max_dispatch_tokens_per_rank, hidden, num_experts), indexable and
    unpackable. src_info (int32 [local experts, ranks x max tokens]: each row's
    token index on its source, -1 past the expert's count) and layout_range
    (int64 [local experts, ranks]: first row << 32 | rows, per source rank) are
    computed from symm's routes on the current stream when first read."""

    def __init__(self, route, buffer, num_max_dispatch_tokens_per_rank, hidden, num_experts):
        self._route, self._buffer = route, buffer
        self._tail = (num_max_dispatch_tokens_per_rank, hidden, num_experts)
        self._tensors = None

    def _materialize(self):
        if self._tensors is None:
            got = self._buffer._ll_decode(self._route)
            if self._buffer._cuda.capturing():  # made in a capture, they hold values only once the graph replays
                return got
            self._tensors = got
        return self._tensors

    def __len__(self):
        return 5

    def __iter__(self):
        return iter(self._materialize() + self._tail)

    def __getitem__(self, i):
        if isinstance(i, int) and not isinstance(i, bool):
            if not -5 <= i < 5:
                raise IndexError("LowLatencyHandle index out of range")
            i %= 5
            return self._tail[i - 2] if i >= 2 else self._materialize()[i]
        return tuple(self)[i]

    def __repr__(self):
        return "LowLatencyHandle(max_tokens=%d, hidden=%d, num_experts=%d)" % self._tail


# ---------------------------------------------------------------------------
# The symm handles a Buffer holds
# ---------------------------------------------------------------------------

class _Slot:
    """A symm handle and where its call order stands: idle (a dispatch may
    come), sent (a dispatch's receive half is due), dispatched (its combine may
    come, or another dispatch), combine_sent (a combine's receive half is due)."""

    def __init__(self, key, h, seq):
        self.key, self.h = key, h
        self.route = None
        self.state = "idle"
        self.used = seq
        self.sms = None
        self.holder = None       # weakref to the LowLatencyHandle of the last dispatch
        self.combine_buf = None  # get_next_low_latency_combine_buffer's tensor
        self.routes_view = None


_SAME_STREAM = contextlib.nullcontext()


_inference_mode = torch.is_inference_mode_enabled

# A storage's reference count (a torch without it: no receive buffers, every dispatch copies)
_use_count = getattr(torch._C, "_storage_Use_Count", None)


class _RecvEntry:
    """One symmetric receive buffer of a shape: x at byte 0, the scales at
    `s_at`, as one allocation (a uint8 tensor). The tensors dispatch returns
    over it are set onto its storage, so it is held while any of them (or a
    view of one) lives: its storage then has more references than the
    entry's own (torch frees a storage by the same count). `stream`: where
    the last of them was handed out (a dispatch on another stream waits for
    it before the peers write the buffer again)."""

    def __init__(self, buf, s_at, x, sc):
        self.buf, self.s_at = buf, s_at
        self.views = (x, sc)  # x [cap, hidden], scales [cap, cols] or None: what symm's dispatch writes
        self.storage = buf.untyped_storage()
        self.stream = None
        # (rows, x dtype, scales dtype, inference mode) -> (x, scales) set onto the storage: what tensors() detaches
        self.made = {}
        self._own = _use_count(self.storage._cdata)

    def held(self):
        return _use_count(self.storage._cdata) > self._own

    def tensors(self, R, x_dtype, s_dtype):
        """recv_x [R, hidden] (and its scales [R, cols], or None) over this
        buffer, as tensors of their own: detached from ones set onto the
        storage once per shape (a CUDA tensor made and set_ per call costs
        more host time than the dispatch's launch). Only while no tensor holds
        the buffer: the templates' own references are counted then. Per
        inference mode: a tensor made in it is an inference tensor (autograd
        refuses those outside it), one made outside is not."""
        key = (R, x_dtype, s_dtype, _inference_mode())
        t = self.made.get(key)
        if t is None:
            if len(self.made) >= 4:
                self.made.clear()
            dev = self.buf.device
            x = torch.empty((0,), dtype=x_dtype, device=dev).set_(self.storage, 0, (R, self.views[0].size(1)))
            sc = None if s_dtype is None else torch.empty((0,), dtype=s_dtype, device=dev).set_(
                self.storage, self.s_at // 4, (R, self.views[1].size(1)))
            t = self.made[key] = (x, sc)
            self._own = _use_count(self.storage._cdata)
        return t[0].detach(), None if t[1] is None else t[1].detach()


class _RecvPool:
    """The receive buffers of one handle shape (key), made with its first symm handle."""

    def __init__(self, entries, cap, hidden, x_dtype, cols):
        self.entries, self.cap, self.hidden, self.x_dtype, self.cols = entries, cap, hidden, x_dtype, cols

    def free_entry(self):
        for e in self.entries:
            if not e.held():
                return e
        return None


def _fingerprint(*parts):
    return zlib.crc32(repr(parts).encode()) & 0x7fffffff


# ---------------------------------------------------------------------------
# Buffer
# ---------------------------------------------------------------------------

# DeepEP's recommended chunk sizes (nvl send, nvl recv, rdma send, rdma recv) per rank count on one node
_DISPATCH_CHUNKS = {2: (24, 256, 6, 128), 4: (6, 256, 6, 128), 8: (6, 256, 6, 128)}
_COMBINE_CHUNKS = {2: (10, 256, 6, 128), 4: (9, 256, 6, 128), 8: (4, 256, 6, 128)}


def _recommended(num_ranks, table, call):
    _int(num_ranks, "num_ranks", call, 1)
    if num_ranks > 8:
        raise _unsupported(call, "%d ranks: symm.moe.deep_ep runs on one node (at most 8 ranks; internode RDMA is "
                                 "not supported)" % num_ranks)
    return table.get(num_ranks, table[8])


class Buffer:
    """DeepEP's Buffer over symm, on one node (module docstring; docs/moe.md).

    Attributes as DeepEP's: rank, group_size, group, num_nvl_bytes,
    num_rdma_bytes, low_latency_mode, explicitly_destroy, enable_shrink;
    Buffer.num_sms (class level) is the SM budget of the normal kernels that
    get_dispatch_config / get_combine_config put in their Config.

    Keyword-only additions: max_num_tokens (a token bound for the normal
    mode, the same on every rank: dispatches without a CPU synchronisation may
    then use up to it from the start), num_recv_buffers (symmetric receive
    buffers per shape, default 2: a normal dispatch returns recv_x and its
    scales in one that no tensor holds any more, written by the peers in
    place, with no copy; when every one is held, the rows are copied into
    fresh tensors; 0: always copy) and zero_copy_recv (dispatch returns views
    of symm's own receive buffers, valid until the next dispatch)."""

    num_sms: int = 20

    def __init__(self, group, num_nvl_bytes: int = 0, num_rdma_bytes: int = 0, low_latency_mode: bool = False,
                 num_qps_per_rank: int = 24, allow_nvlink_for_low_latency_mode: bool = True,
                 allow_mnnvl: bool = False, use_fabric: bool = False, explicitly_destroy: bool = False,
                 enable_shrink: bool = False, comm=None, *, max_num_tokens: int = 0,
                 num_recv_buffers: int = _RECV_BUFFERS, zero_copy_recv: bool = False) -> None:
        call = "Buffer"
        _int(num_nvl_bytes, "num_nvl_bytes", call)
        _int(num_rdma_bytes, "num_rdma_bytes", call)
        _int(num_qps_per_rank, "num_qps_per_rank", call)
        _int(max_num_tokens, "max_num_tokens", call)
        _int(num_recv_buffers, "num_recv_buffers", call)
        if group is None and comm is None:
            raise ValueError("%s: either 'group' or 'comm' must be provided" % call)
        if enable_shrink:
            raise _unsupported(call, "enable_shrink=True: shrink mode (masking ranks) is not supported by "
                                     "symm.moe.deep_ep")
        if low_latency_mode and num_qps_per_rank < 1:
            raise ValueError("%s: the low-latency mode needs num_qps_per_rank > 0" % call)
        if low_latency_mode and not allow_nvlink_for_low_latency_mode:
            raise _unsupported(call, "allow_nvlink_for_low_latency_mode=False: symm moves the low-latency traffic "
                                     "over NVLink only (no RDMA loopback)")
        self._engine = _engine_factory(group, comm, call)
        e = self._engine
        self._cuda = e.cuda
        self.rank, self.group_size = e.rank, e.n
        self.group = group if group is not None else comm
        self.num_nvl_bytes, self.num_rdma_bytes = num_nvl_bytes, num_rdma_bytes
        self.low_latency_mode, self.explicitly_destroy = bool(low_latency_mode), bool(explicitly_destroy)
        self.enable_shrink = False
        self.allow_mnnvl, self.use_fabric = bool(allow_mnnvl), bool(use_fabric)
        self._device = e.device
        # a CUDA tensor's get_device() against this: t.device makes a torch.device per call
        self._cuda_index = e.device.index if e.device.type == "cuda" else None
        self._comm = self._cuda.new_stream()
        self._zero_copy_recv = bool(zero_copy_recv)
        self._num_recv_buffers = 0 if zero_copy_recv or _use_count is None else num_recv_buffers
        self._pools = {}            # key -> _RecvPool (normal mode)
        self._x_ok = set()          # (x dtype, hidden[, scales dtype, columns]) that passed _x_parts' checks
        self._kept = []             # receive buffers of retired pools that a tensor still held when they retired
        self._slots = {}            # key -> [_Slot]
        self._seq = 0
        self._bound = max_num_tokens  # the normal mode's agreed token bound
        # the count row's head on the device: tokens and fingerprint (written when they change), how far
        # past num_worst_tokens a dispatch received, and what the last dispatch received until the next
        # synchronising one checks it (_pending: what every rank expected there, on the host). A captured
        # graph keeps their addresses: they are never freed while the Buffer lives.
        self._hdr = torch.zeros(2, dtype=torch.int32, device=self._device)
        self._hdr_is = None
        self._over = torch.zeros(1, dtype=torch.int32, device=self._device)
        self._got = torch.zeros(1 + 256, dtype=torch.int32, device=self._device)
        self._got_views = {}
        self._count_bufs = {}     # W -> (count row, gathered rows) of synchronising dispatches
        self._prefix_stage = None  # host staging of rank_prefix_matrix
        self._got_retired = []
        self._pending = None
        self._fps = {}
        self._default_configs = {}
        # a scalar for where(..., out=), which takes no Python numbers
        self._minus_one_i32 = torch.full((), -1, dtype=torch.int32, device=self._device)
        self._first_experts = {}
        self._wbufs = {}  # (token bound, width) -> (symmetric buffer, float32 view): combine's wide topk_weights
        self._last = None            # the stream the last call ran on (calls are ordered as on one stream)
        self._last_captured = False
        self._warned = False
        self._destroyed = False
        self._cuda.synchronize()  # the tensors above are read on whichever stream the first call uses

    # ---- life ---------------------------------------------------------------------------

    def destroy(self) -> None:
        """Release every symm handle (collective). Only with explicitly_destroy=True,
        as in DeepEP; otherwise the handles live until symm.finalize() or exit."""
        if not self.explicitly_destroy:
            raise ValueError("Buffer.destroy: the Buffer was made with explicitly_destroy=False")
        if self._destroyed:
            return
        self._cuda.synchronize()
        for slots in self._slots.values():
            for s in slots:
                s.h.destroy()
        self._slots.clear()
        self._retire_pools(list(self._pools))
        for raw, _ in self._wbufs.values():
            self._engine.pool_free(raw)
        self._wbufs.clear()
        self._destroyed = True

    def _alive(self, call):
        if self._destroyed:
            raise RuntimeError("%s: the Buffer was destroyed" % call)

    def heap_bytes(self) -> int:
        """Bytes of symm's symmetric heap the Buffer's handles, receive buffers and combine's weight
        buffers hold on this rank."""
        return sum(s.h.heap_bytes() for slots in self._slots.values() for s in slots) + \
            sum(e.buf.numel() for p in self._pools.values() for e in p.entries) + \
            sum(e.buf.numel() for e in self._kept) + sum(raw.numel() for raw, _ in self._wbufs.values())

    # ---- DeepEP's static calls ------------------------------------------------------------

    @staticmethod
    def is_sm90_compiled() -> bool:
        """True: symm's kernels move fp8 and take scales on every GPU it runs on."""
        return True

    @staticmethod
    def set_num_sms(new_num_sms: int) -> None:
        """The SMs of the normal kernels (even, as DeepEP requires), for the
        configs get_dispatch_config / get_combine_config give from now on."""
        _int(new_num_sms, "new_num_sms", "Buffer.set_num_sms")
        if new_num_sms % 2:
            raise ValueError("Buffer.set_num_sms: the SM count must be even, got %d" % new_num_sms)
        Buffer.num_sms = new_num_sms

    @staticmethod
    def capture() -> EventOverlap:
        """An event on the current stream (for previous_event=)."""
        return EventOverlap(EventHandle())

    @staticmethod
    def get_low_latency_rdma_size_hint(num_max_dispatch_tokens_per_rank: int, hidden: int, num_ranks: int,
                                       num_experts: int) -> int:
        """Bytes of symmetric memory the low-latency calls may take for these
        shapes (two calls in flight, bf16 and fp8, up to min(num_experts, 64)
        experts per token): a size for num_rdma_bytes. symm allocates it itself
        as calls need it."""
        call = "Buffer.get_low_latency_rdma_size_hint"
        for name, v in (("num_max_dispatch_tokens_per_rank", num_max_dispatch_tokens_per_rank), ("hidden", hidden),
                        ("num_ranks", num_ranks), ("num_experts", num_experts)):
            _int(v, name, call, 1)
        if num_experts % num_ranks:
            raise ValueError("%s: num_experts %d is not a multiple of num_ranks %d" % (call, num_experts, num_ranks))
        from . import LOW_LATENCY, Config as _Cfg, _fn
        k = min(num_experts, 64)
        total = 0
        for esz, scales in ((2, False), (1, True)):
            cfg = _Cfg(LOW_LATENCY, num_max_dispatch_tokens_per_rank, num_experts, k, hidden, hidden * esz,
                       4 * ((hidden + SCALE_BLOCK - 1) // SCALE_BLOCK) if scales else 0, 1, 0)
            b = int(_fn("symm_moe_heap_bytes")(ctypes.addressof(cfg), num_ranks))
            if b == 0:
                raise ValueError("%s: symm cannot make a low-latency handle for %d tokens, hidden %d, %d ranks, %d "
                                 "experts" % (call, num_max_dispatch_tokens_per_rank, hidden, num_ranks, num_experts))
            total += _SLOTS_PER_SHAPE * b
        return total

    @staticmethod
    def get_dispatch_config(num_ranks: int) -> Config:
        """DeepEP's recommended dispatch Config for num_ranks on one node, with
        Buffer.num_sms SMs (ranks counts DeepEP has no entry for, up to 8, get
        its 8-rank one)."""
        return Config(Buffer.num_sms, *_recommended(num_ranks, _DISPATCH_CHUNKS, "Buffer.get_dispatch_config"))

    @staticmethod
    def get_combine_config(num_ranks: int) -> Config:
        """DeepEP's recommended combine Config for num_ranks on one node, with
        Buffer.num_sms SMs (as get_dispatch_config)."""
        return Config(Buffer.num_sms, *_recommended(num_ranks, _COMBINE_CHUNKS, "Buffer.get_combine_config"))

    def get_comm_stream(self) -> torch.cuda.Stream:
        """The stream the Buffer's calls run on (unless return_recv_hook is set)."""
        return self._comm

    def get_local_buffer_tensor(self, dtype, size=None, offset=0, use_rdma_buffer=False):
        raise _unsupported("Buffer.get_local_buffer_tensor", "symm.moe.deep_ep has no raw NVLink/RDMA buffer to "
                                                             "expose (symm sizes its buffers per call shape)")

    def internode_dispatch(self, *args, **kwargs):
        raise _unsupported("Buffer.internode_dispatch", "internode (RDMA) dispatch is not supported by "
                                                        "symm.moe.deep_ep (one node)")

    def internode_combine(self, *args, **kwargs):
        raise _unsupported("Buffer.internode_combine", "internode (RDMA) combine is not supported by "
                                                       "symm.moe.deep_ep (one node)")

    def low_latency_update_mask_buffer(self, rank_to_mask: int, mask: bool = False):
        raise _unsupported("Buffer.low_latency_update_mask_buffer", "shrink mode (masking ranks) is not supported")

    def low_latency_query_mask_buffer(self, mask_status: torch.Tensor):
        raise _unsupported("Buffer.low_latency_query_mask_buffer", "shrink mode (masking ranks) is not supported")

    def low_latency_clean_mask_buffer(self):
        raise _unsupported("Buffer.low_latency_clean_mask_buffer", "shrink mode (masking ranks) is not supported")

    # ---- streams ------------------------------------------------------------------------

    def _use(self, stream):
        """A context that makes `stream` current; None: the current stream stays."""
        return _SAME_STREAM if stream is None else self._cuda.use(stream)

    def _after_last(self, stream):
        """Order `stream` after the Buffer's previous call, when that call ran
        on another stream (DeepEP runs every call on its one communication
        stream, so its calls never overlap). Not across a capture's start:
        torch.cuda.graph synchronises the device before it captures."""
        last = self._last
        # `is` first: the streams are kept per id, and Stream's == runs Python
        if last is not None and last is not stream and last != stream and \
                (self._last_captured or not self._cuda.capturing()):
            self._cuda.wait_stream(stream, last)

    def _comm_after(self, compute, event):
        """The communication stream waits for `event` (an EventHandle), else
        for the current stream, and for the Buffer's previous call."""
        if event is not None:
            self._cuda.wait_event(self._comm, event._event)
        else:
            self._cuda.wait_stream(self._comm, compute)
            if self._last is not None and self._last != compute:
                self._after_last(self._comm)
            return
        self._after_last(self._comm)

    def _ran_on(self, stream, capturing=None):
        """`capturing`: the current stream's capture state, when the call asked already."""
        self._last = stream
        # the current stream's: a comm stream in it joined it
        self._last_captured = self._cuda.capturing() if capturing is None else capturing

    def _enter(self, call, previous_event, async_finish, allocate_on_comm_stream):
        """DeepEP's stream protocol: the communication stream waits for
        previous_event (else the current stream); returns (compute, the
        stream the call runs on, the stream outputs are allocated on), None
        for the current stream. A call with neither async_finish nor
        previous_event runs on the current stream: DeepEP would run it on the
        communication stream between two waits, the same order, at the cost
        of the stream switches and events."""
        if previous_event is not None and not isinstance(previous_event, EventOverlap):
            raise TypeError("%s: previous_event must be an EventOverlap (Buffer.capture()), got %s"
                            % (call, type(previous_event).__name__))
        if allocate_on_comm_stream and not (previous_event is not None and async_finish):
            raise ValueError("%s: allocate_on_comm_stream=True needs previous_event and async_finish=True (as in "
                             "DeepEP)" % call)
        c = self._cuda
        compute = c.current()
        ev = getattr(previous_event, "event", None)
        if ev is None and not async_finish:
            self._after_last(compute)
            return compute, None, None
        self._comm_after(compute, ev)
        return compute, self._comm, (self._comm if allocate_on_comm_stream else compute)

    def _leave(self, compute, comm, async_finish, allocate_on_comm_stream, tensors, capturing=None):
        """async_finish: an event on the communication stream, the tensors
        recorded on the streams they cross; else the current stream waits
        (nothing to wait for when the call ran on it)."""
        c = self._cuda
        if comm is None:
            self._ran_on(compute, capturing)
            return EventOverlap(None)
        if async_finish:
            self._ran_on(self._comm, capturing)
            for t in tensors:
                if isinstance(t, torch.Tensor):
                    c.record_stream(t, self._comm)
                    if allocate_on_comm_stream:
                        c.record_stream(t, compute)
            return EventOverlap(EventHandle(c, self._comm))
        c.wait_stream(compute, self._comm)
        self._ran_on(compute, capturing)
        return EventOverlap(None)

    # ---- slots --------------------------------------------------------------------------

    def _make_slot(self, key, make, call):
        if self._cuda.capturing():
            raise RuntimeError("%s: this call needs a new symm handle (%s), which cannot be made during CUDA graph "
                               "capture: run the same calls once before capturing" % (call, self._key_text(key)))
        if make is None:
            make = self._ht_make(key) if key[0] == "ht" else self._ll_make(key)
        self._seq += 1
        s = _Slot(key, make(), self._seq)
        self._slots.setdefault(key, []).append(s)
        if key[0] == "ht" and self._num_recv_buffers and key not in self._pools:
            self._pools[key] = self._make_pool(key, s.h)
        return s

    # ---- receive buffers ----------------------------------------------------------------

    def _make_pool(self, key, h):
        """num_recv_buffers symmetric buffers for the shape of handle h (collective, like the handle)."""
        _, M, H, x_dtype, scaled, K, E = key
        cap, esz = h.capacity, torch.empty((), dtype=x_dtype).element_size()
        cols = (H + SCALE_BLOCK - 1) // SCALE_BLOCK if scaled else 0
        s_at = _align(cap * H * esz, 256)
        entries = []
        for _ in range(self._num_recv_buffers):
            buf = self._engine.pool_alloc(s_at + cap * cols * 4)
            x = buf[:cap * H * esz].view(x_dtype).view(cap, H)
            sc = buf[s_at:s_at + cap * cols * 4].view(torch.float32).view(cap, cols) if scaled else None
            entries.append(_RecvEntry(buf, s_at, x, sc))
        return _RecvPool(entries, cap, H, x_dtype, cols)

    def _retire_pools(self, keys):
        """Free the receive buffers of these shapes (and the kept ones) that no
        rank's tensors hold any more; keep the others until a later retirement
        (collective: the ranks agree on what each still holds)."""
        entries = [e for k in keys for e in self._pools.pop(k).entries] + self._kept
        if not entries:
            return
        held = torch.tensor([1 if e.held() else 0 for e in entries], dtype=torch.int32, device=self._device)
        every = torch.empty((self.group_size, len(entries)), dtype=torch.int32, device=self._device)
        self._engine.all_gather(every.view(-1), held)
        anywhere = self._cuda.read(every).view(self.group_size, len(entries)).amax(dim=0).tolist()
        self._cuda.synchronize()
        self._kept = []
        for e, h in zip(entries, anywhere):
            if h:
                self._kept.append(e)
            else:
                self._engine.pool_free(e.buf)

    def _recv_entry(self, key, scales, launch, capturing=None):
        """A receive buffer of the shape that no tensor holds (None: copy
        instead), ordered after the stream it was last handed out on."""
        pool = self._pools.get(key)
        if pool is None or (scales is not None and scales.size(1) != pool.cols) or \
                (self._cuda.capturing() if capturing is None else capturing):
            return None  # a captured graph rewrites its buffers on every replay: fresh tensors there
        e = pool.free_entry()
        if e is not None and e.stream is not None and e.stream is not launch and e.stream != launch:
            self._cuda.wait_stream(launch, e.stream)
        return e

    @staticmethod
    def _key_text(key):
        if key[0] == "ht":
            return "normal mode, %d tokens, hidden %d, %s%s, %d top-k columns, %d experts" % (
                key[1], key[2], key[3], " with scales" if key[4] else "", key[5], key[6])
        return "low latency, %d tokens, hidden %d, %d experts, top-%d, %s" % (
            key[1], key[2], key[3], key[4], "fp8" if key[5] else "bf16")

    def _slot_for_dispatch(self, key, route, make, call):
        """The symm handle a dispatch of `route` goes over: one whose last
        dispatch had the same routing and waits for its combine, else an idle
        one, else a new one (up to _SLOTS_PER_SHAPE), else the one whose
        dispatch has waited longest (its combine will run its routing again)."""
        slots = self._slots.get(key, [])
        pick = idle = None
        for s in slots:  # one pass (a call's host time): the last with this routing, the least recently used idle
            if s.route is route and s.state == "dispatched":
                pick = s
            elif s.state == "idle" and (idle is None or s.used < idle.used):
                idle = s
        if pick is None:
            if idle is not None:
                pick = idle
            elif len(slots) < _SLOTS_PER_SHAPE:
                pick = self._make_slot(key, make, call)
            else:
                done = [s for s in slots if s.state == "dispatched"]
                if not done:
                    raise RuntimeError("%s: every symm handle of this shape (%d) has a receive hook outstanding: call "
                                       "the hooks of the earlier calls first" % (call, len(slots)))
                pick = min(done, key=lambda s: s.used)
        if pick.state in ("sent", "combine_sent"):
            raise RuntimeError("%s: the receive hook of the earlier call on this handle was not called" % call)
        self._keep_routes(pick)
        self._seq += 1
        pick.used = self._seq
        return pick

    def _keep_routes(self, slot):
        """Before a low-latency handle's routes are overwritten: copy them for a
        DeepEP handle that is still alive and has not been read yet."""
        holder = slot.holder() if slot.holder is not None else None
        if holder is not None and holder._tensors is None and getattr(holder._route, "routes", None) is None:
            if self._cuda.capturing():  # a copy made in a capture runs at replay, after the routes changed
                holder._route.lost = True
            else:
                holder._route.routes = self._routes_of(slot).clone()
        slot.holder = None

    def _routes_of(self, slot):
        if slot.routes_view is None:
            slot.routes_view = slot.h.routes()
        return slot.routes_view

    def _slot_for_combine(self, route, call):
        best = None
        for slots in self._slots.values():
            for s in slots:
                if s.route is route:
                    if s.state == "sent":
                        raise RuntimeError("%s: the dispatch's receive hook was not called yet" % call)
                    if s.state == "combine_sent":
                        raise RuntimeError("%s: the receive hook of this handle's previous combine was not called"
                                           % call)
                    if s.state == "dispatched" and (best is None or s.used > best.used):
                        best = s
        return best

    def _warn_redispatch(self, call):
        if not self._warned:
            self._warned = True
            warnings.warn("%s: this handle's dispatch is no longer the last one over its symm handle (it was "
                          "combined already, or more dispatches were in flight than the Buffer keeps): its routing "
                          "was dispatched again, with zeros, before the combine (one dispatch's cost). symm combines "
                          "each dispatch once; said once per Buffer." % call, stacklevel=3)

    def _set_sms(self, slot, config):
        want = 0 if config is None else min(config.num_sms, self._engine.share)
        if slot.sms != want:
            slot.h.set_num_sms(want)
            slot.sms = want

    def _config(self, config, call, combine=False):
        if config is None:  # DeepEP's recommended one, made once per SM count
            key = (combine, Buffer.num_sms)
            config = self._default_configs.get(key)
            if config is None:
                config = self._default_configs[key] = (self.get_combine_config if combine else
                                                       self.get_dispatch_config)(self.group_size)
            return config
        if not isinstance(config, Config):
            raise TypeError("%s: config must be a symm.moe.deep_ep.Config, got %s" % (call, type(config).__name__))
        if config.num_sms % 2:
            raise ValueError("%s: config.num_sms must be even (as in DeepEP), got %d" % (call, config.num_sms))
        return config

    def _here(self, t):
        """t is on this rank's device (what _tensor's device check says, without a torch.device per call)."""
        i = self._cuda_index
        return t.get_device() == i and t.is_cuda if i is not None else t.device == self._device

    def _need_normal(self, call):
        self._alive(call)
        if self.num_nvl_bytes <= 0:
            raise ValueError("%s: the Buffer was made with num_nvl_bytes=0; the normal (high-throughput) mode needs "
                             "num_nvl_bytes > 0, as in DeepEP" % call)

    def _need_ll(self, call):
        self._alive(call)
        if not self.low_latency_mode:
            raise ValueError("%s: the Buffer was made with low_latency_mode=False" % call)
        if self.num_rdma_bytes <= 0:
            raise ValueError("%s: the Buffer was made with num_rdma_bytes=0; the low-latency mode needs a size "
                             "(Buffer.get_low_latency_rdma_size_hint), as in DeepEP" % call)

    # ---- layout -------------------------------------------------------------------------

    def get_dispatch_layout(self, topk_idx: torch.Tensor, num_experts: int, previous_event: Optional[EventOverlap] = None,
                            async_finish: bool = False, allocate_on_comm_stream: bool = False) -> \
            Tuple[torch.Tensor, Optional[torch.Tensor], torch.Tensor, torch.Tensor, EventOverlap]:
        """(num_tokens_per_rank int32 [ranks], None (intranode), num_tokens_per_expert
        int32 [num_experts], is_token_in_rank bool [tokens, ranks], event) of
        topk_idx ([tokens, top-k], int64 or int32, -1 for none; it and every
        other index outside the experts counts nowhere). Local: no
        communication; one symm kernel (symm_moe_layout)."""
        call = "Buffer.get_dispatch_layout"
        self._alive(call)
        _tensor(topk_idx, "topk_idx", call, 2, _IDX_DTYPES, self._device)
        _int(num_experts, "num_experts", call, 1)
        if num_experts % self.group_size:
            raise ValueError("%s: num_experts %d is not a multiple of the %d ranks" % (call, num_experts,
                                                                                      self.group_size))
        compute, comm, alloc = self._enter(call, previous_event, async_finish, allocate_on_comm_stream)
        n, T, dev = self.group_size, topk_idx.size(0), self._device
        with self._use(alloc):
            per_rank = torch.empty(n, dtype=torch.int32, device=dev)
            per_expert = torch.empty(num_experts, dtype=torch.int32, device=dev)
            in_rank = torch.empty((T, n), dtype=torch.bool, device=dev)
        with self._use(comm):
            self._engine.layout(topk_idx, num_experts, in_rank, per_rank, per_expert)
        event = self._leave(compute, comm, async_finish, allocate_on_comm_stream,
                            (topk_idx, per_rank, per_expert, in_rank))
        return per_rank, None, per_expert, in_rank, event

    # ---- normal dispatch ----------------------------------------------------------------

    def _x_parts(self, x, call):
        """(x, scales or None), checked; a shape and dtype checked before are not checked again."""
        scales = None
        if type(x) is tuple and len(x) == 2:
            x, scales = x
        if type(x) is torch.Tensor and x.dim() == 2 and self._here(x) and x.is_contiguous() and \
                (x.dtype, x.size(1)) in self._x_ok and (scales is None or (
                    type(scales) is torch.Tensor and scales.dim() == 2 and self._here(scales) and
                    (x.dtype, x.size(1), scales.dtype, scales.size(1)) in self._x_ok and
                    scales.size(0) == x.size(0))):
            return x, scales
        x, scales = self._x_parts_checked((x, scales) if scales is not None else x, call)
        self._x_ok.add((x.dtype, x.size(1)))
        if scales is not None:
            self._x_ok.add((x.dtype, x.size(1), scales.dtype, scales.size(1)))
        return x, scales

    def _x_parts_checked(self, x, call):
        if isinstance(x, tuple):
            if len(x) != 2:
                raise TypeError("%s: x must be a tensor or a (tensor, scales) pair, got a tuple of %d" % (call, len(x)))
            x, scales = x
        else:
            x, scales = x, None
        _tensor(x, "x", call, 2, _X_DTYPES, self._device)
        if x.size(1) * x.element_size() % 16:
            raise ValueError("%s: a row of x is %d bytes; it must be a multiple of 16 (as in DeepEP)"
                             % (call, x.size(1) * x.element_size()))
        if x.size(1) % 8:
            raise ValueError("%s: hidden %d is not a multiple of 8" % (call, x.size(1)))
        if scales is not None:
            _tensor(scales, "x scales", call, None, None, self._device, contiguous=False)
            if scales.dim() != 2:
                raise _unsupported(call, "x scales of %d dimensions: symm moves [tokens, columns] scales" %
                                   scales.dim())
            if scales.dtype not in (torch.float32, torch.int32):
                raise TypeError("%s: x scales are %s; expected torch.float32 or torch.int32" % (call, scales.dtype))
            if x.element_size() != 1:
                raise ValueError("%s: scales go with an 8-bit x (fp8), not %s" % (call, x.dtype))
            _shape(scales, "x scales", call, (x.size(0), None))
            cols = (x.size(1) + SCALE_BLOCK - 1) // SCALE_BLOCK
            if scales.size(1) > cols or scales.size(1) < 1:
                raise _unsupported(call, "x scales with %d columns: symm carries 1 to %d 4-byte scales per token "
                                   "(one per %d elements of hidden %d)" % (scales.size(1), cols, SCALE_BLOCK,
                                                                           x.size(1)))
        return x, scales

    def _scales_in(self, scales, hidden):
        """The scales as symm takes them: float32 [tokens, ceil(hidden / 128)]
        (int32 scales travel as their bits; fewer columns are padded)."""
        if scales is None:
            return None
        s = scales.view(torch.float32) if scales.dtype == torch.int32 else scales
        cols = (hidden + SCALE_BLOCK - 1) // SCALE_BLOCK
        if s.size(1) == cols:
            return s
        out = torch.zeros((s.size(0), cols), dtype=torch.float32, device=s.device)
        out[:, :s.size(1)] = s
        return out

    def _ht_make(self, key):
        _, M, H, x_dtype, scaled, K, E = key
        return lambda: self._engine.ht(E, K, H, M, x_dtype, scaled)

    def _ht_key(self, M, x, scales, K, E):
        return ("ht", M, x.size(1), x.dtype, scales is not None, K, E)

    def _grow_bound(self, need):
        if need > self._bound:
            old = self._bound
            self._bound = max(_align(need, _BOUND_STEP), 2 * old)
            self._drop_small_slots()
        return self._bound

    def _drop_small_slots(self):
        """Idle normal-mode handles below the token bound will not be used again (collective)."""
        gone = [(k, s) for k, slots in self._slots.items() for s in slots
                if k[0] == "ht" and k[1] < self._bound and s.state == "idle"]
        if not gone:
            return
        self._cuda.synchronize()
        for k, s in gone:
            self._slots[k].remove(s)
            if not self._slots[k]:
                del self._slots[k]
            s.h.destroy()
        self._retire_pools([k for k in self._pools if k not in self._slots])

    def dispatch(self, x: Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]], handle: Optional[Tuple] = None,
                 num_tokens_per_rank: Optional[torch.Tensor] = None,
                 num_tokens_per_rdma_rank: Optional[torch.Tensor] = None,
                 is_token_in_rank: Optional[torch.Tensor] = None, num_tokens_per_expert: Optional[torch.Tensor] = None,
                 topk_idx: Optional[torch.Tensor] = None, topk_weights: Optional[torch.Tensor] = None,
                 expert_alignment: int = 1, num_worst_tokens: int = 0, config: Optional[Config] = None,
                 previous_event: Optional[EventOverlap] = None, async_finish: bool = False,
                 allocate_on_comm_stream: bool = False) -> \
            Tuple[Union[Tuple[torch.Tensor, torch.Tensor], torch.Tensor], Optional[torch.Tensor],
                  Optional[torch.Tensor], List[int], Tuple, EventOverlap]:
        """DeepEP's dispatch: returns (recv_x or (recv_x, recv_x_scales),
        recv_topk_idx, recv_topk_weights, num_recv_tokens_per_expert_list,
        handle, event). Rows come ordered by source rank, then token; top-k
        indices are the receiver's local experts (-1 elsewhere, weight 0). With
        handle= (cached), the routing of that dispatch is used again and only
        recv_x comes back. With num_worst_tokens > 0 there is no CPU
        synchronisation: every output has num_worst_tokens rows (top-k indices
        -1 past the received ones) and the list is empty."""
        if handle is not None and previous_event is None and not async_finish and not allocate_on_comm_stream and \
                topk_idx is None and topk_weights is None and type(handle) is DispatchHandle:
            out = self._cached_fast(x, handle, config, expert_alignment, num_worst_tokens)
            if out is not None:
                return out
        call = "Buffer.dispatch"
        self._need_normal(call)
        config = self._config(config, call)
        x, scales = self._x_parts(x, call)
        _int(expert_alignment, "expert_alignment", call, 1)
        _int(num_worst_tokens, "num_worst_tokens", call)
        if handle is not None:
            if topk_idx is not None or topk_weights is not None:
                raise ValueError("%s: a cached dispatch (handle=) takes no topk_idx / topk_weights" % call)
            return self._cached_dispatch(x, scales, handle, config, previous_event, async_finish,
                                         allocate_on_comm_stream, call)
        n, T = self.group_size, x.size(0)
        if num_tokens_per_rank is None or is_token_in_rank is None or num_tokens_per_expert is None:
            raise ValueError("%s: num_tokens_per_rank, is_token_in_rank and num_tokens_per_expert must be given "
                             "(get_dispatch_layout's), unless handle= is" % call)
        _tensor(num_tokens_per_rank, "num_tokens_per_rank", call, 1, (torch.int32,), self._device)
        _shape(num_tokens_per_rank, "num_tokens_per_rank", call, (n,))
        _tensor(is_token_in_rank, "is_token_in_rank", call, 2, (torch.bool,), self._device)
        _shape(is_token_in_rank, "is_token_in_rank", call, (T, n))
        _tensor(num_tokens_per_expert, "num_tokens_per_expert", call, 1, (torch.int32,), self._device)
        E = num_tokens_per_expert.size(0)
        if E < n or E % n:
            raise ValueError("%s: num_tokens_per_expert has %d experts, not a positive multiple of the %d ranks"
                             % (call, E, n))
        if (topk_idx is None) != (topk_weights is None):
            raise ValueError("%s: topk_idx and topk_weights go together (both or neither)" % call)
        if topk_idx is not None:
            _tensor(topk_idx, "topk_idx", call, 2, _IDX_DTYPES, self._device)
            _shape(topk_idx, "topk_idx", call, (T, None))
            _tensor(topk_weights, "topk_weights", call, 2, (torch.float32,), self._device)
            _shape(topk_weights, "topk_weights", call, (T, topk_idx.size(1)))
        elif num_worst_tokens:
            raise ValueError("%s: num_worst_tokens > 0 needs topk_idx and topk_weights (as in DeepEP)" % call)
        L = E // n
        K = topk_idx.size(1) if topk_idx is not None else n
        fp = self._fingerprint((x.size(1), x.dtype, None if scales is None else (scales.dtype, scales.size(1)),
                                K, E, topk_idx is not None, num_worst_tokens))
        if num_worst_tokens:  # no count exchange to agree on: a bound from what every rank passes alike
            M = self._worst_bound(num_worst_tokens, T, call)

        compute, comm, alloc = self._enter(call, previous_event, async_finish, allocate_on_comm_stream)
        c = self._cuda
        G = 0 if self._pending is None else len(self._pending[0])
        W = 3 + G + n + E
        with self._use(comm):
            # every rank's counts (DeepEP's notify step): [tokens, fingerprint, how far past num_worst_tokens
            # an earlier dispatch received, what the last checked one received, per rank, per expert]
            hdr = self._hdr
            if self._hdr_is != (T, fp):
                if c.capturing():  # the graph's replays would rewrite _hdr behind _hdr_is: it fills its own
                    hdr = torch.empty(2, dtype=torch.int32, device=self._device)
                    hdr.view(torch.int64).fill_((fp << 32) | T)
                else:
                    hdr.view(torch.int64).fill_((fp << 32) | T)
                    self._hdr_is = (T, fp)
            if num_worst_tokens:  # fresh: a capture may hold them, and the route keeps a column
                row = torch.empty(W, dtype=torch.int32, device=self._device)
                gathered = torch.empty((n, W), dtype=torch.int32, device=self._device)
            else:  # the host reads them before the call returns: the next one may use them again
                row, gathered = self._count_buffers(W)
            torch.cat((hdr, self._over, self._got_head(G), num_tokens_per_rank, num_tokens_per_expert), out=row)
            self._engine.all_gather(gathered.view(-1), row)
            if num_worst_tokens == 0:
                host = c.read(gathered).view(n, W)
        if num_worst_tokens == 0:
            # the narrow columns as one list, the per-expert counts summed by torch: three tensor calls where
            # a dozen small ones on slices (sums, equals, items) took longer than the work
            rows = host.narrow(1, 0, 3 + G + n).tolist()
            self._check_gathered(rows, G, call, comm)
            M = self._grow_bound(max(r[0] for r in rows))
            sent_by = [r[3 + G:] for r in rows]  # [s][p]: rows rank s sends rank p
            counts = [sum(col) for col in zip(*sent_by)]
            R = counts[self.rank]
            recv_host = [r[self.rank] for r in sent_by]
            sent_host = sent_by[self.rank]
            per_expert_all = host.narrow(1, 3 + G + n, E).sum(dim=0, dtype=torch.int32).tolist()
            per_expert_recv = per_expert_all[self.rank * L:(self.rank + 1) * L]
            recv_counts = None
        else:
            R = num_worst_tokens
            per_expert_recv = counts = per_expert_all = recv_host = sent_host = None
            recv_counts = gathered.select(1, 3 + G + self.rank)  # the rows from each rank, on the device
        key = self._ht_key(M, x, scales, K, E)
        slot = self._slot_for_dispatch(key, None, self._ht_make(key), call)
        self._set_sms(slot, config)
        with self._use(comm):
            # the routing, kept for a cached dispatch, a re-run and the weights of combine: DeepEP's handle
            # keeps is_token_in_rank for these too (the rows a token goes to are the ranks it is in)
            idx = None if topk_idx is not None else self._route_idx_of(is_token_in_rank, L, K)
            route = _Route("ht", idx=idx, in_rank=is_token_in_rank, T=T, M=M, K=K, E=E, hidden=x.size(1), rows=R,
                           recv_counts=recv_counts, recv_host=recv_host, sent_host=sent_host,
                           num_recv=None if num_worst_tokens else R,
                           key=key)
            entry = self._recv_entry(key, scales, comm or compute)
            into = {} if entry is None else {"recv_x": entry.views[0], "recv_x_scale": entry.views[1]}
            views = slot.h.dispatch(x, topk_idx if topk_idx is not None else idx, topk_weights,
                                    x_scale=self._scales_in(scales, x.size(1)), **into)
        slot.route, slot.state = route, "dispatched"
        out = self._ht_outputs(views, route, x, scales, topk_idx, R, num_worst_tokens > 0, comm, alloc,
                               entry=entry, home=alloc or compute, h=slot.h,
                               counts=None if num_worst_tokens else self._got_room(L))
        recv_x, recv_scales, recv_idx, recv_w, recv_src = out
        with self._use(alloc):
            rank_prefix = torch.empty((n, n), dtype=torch.int32, device=self._device)
        with self._use(comm):
            if num_worst_tokens:
                torch.cumsum(gathered.narrow(1, 3 + G, n), dim=0, dtype=torch.int32, out=rank_prefix)
            else:  # the host has the counts: their prefix goes down in one copy (a device scan is two kernels)
                rank_prefix.copy_(self._prefix_staged(sent_by, n), non_blocking=True)
            self._note_received(views, counts, per_expert_all, topk_idx is not None, num_worst_tokens, L)
        handle = DispatchHandle((rank_prefix, None, None, recv_src, is_token_in_rank, None), route, self)
        lst = [] if per_expert_recv is None else \
            per_expert_recv if expert_alignment == 1 else [_align(v, expert_alignment) for v in per_expert_recv]
        # views of symm's buffers are not torch's
        mine = () if self._zero_copy_recv or entry is not None else (recv_x, recv_scales)
        event = self._leave(compute, comm, async_finish, allocate_on_comm_stream,
                            (x, scales, topk_idx, topk_weights, num_tokens_per_rank, is_token_in_rank,
                             num_tokens_per_expert, recv_idx, recv_w, recv_src, rank_prefix) + mine)
        return (recv_x, recv_scales) if scales is not None else recv_x, recv_idx, recv_w, lst, handle, event

    def _fingerprint(self, parts):
        """What the ranks' dispatches must agree on, as one int (computed once per distinct shape)."""
        fp = self._fps.get(parts)
        if fp is None:
            fp = self._fps[parts] = _fingerprint(*(str(p) if isinstance(p, torch.dtype) else p for p in parts))
        return fp

    def _route_idx_of(self, in_rank, L, K, capturing=False):
        """int32 [tokens, K]: the first local expert of each rank a token goes
        to, -1 in the other columns: a routing symm's dispatch sends exactly
        where is_token_in_rank says (a token goes to at most K ranks).
        `capturing`: the call is being captured into a CUDA graph."""
        n = self.group_size
        first = self._first_experts.get(L)
        if first is None:
            first = torch.arange(n, dtype=torch.int32, device=self._device) * L
            if not capturing:  # made in a capture, it holds values only once the graph replays
                self._first_experts[L] = first
        if K < n:  # the ranks of each token first: the K largest of (first expert or -1)
            return torch.topk(torch.where(in_rank, first, self._minus_one_i32), K, dim=1).values
        idx = torch.full((in_rank.size(0), K), -1, dtype=torch.int32, device=self._device)
        torch.where(in_rank, first, self._minus_one_i32, out=idx[:, :n])
        return idx

    def _route_idx(self, route):
        """The routing of a dispatch made with topk_idx, from its is_token_in_rank
        (DeepEP's handle keeps that tensor too), made when first needed and
        kept, unless made during a CUDA graph capture: such a tensor holds its
        values only once the graph replays, so an eager call would read none."""
        idx = route.idx
        if idx is None:
            capturing = self._cuda.capturing()
            idx = self._route_idx_of(route.in_rank, route.E // self.group_size, route.K, capturing)
            if not capturing:
                route.idx = idx
        return idx

    def _check_gathered(self, heads, G, call, comm):
        """The ranks' count rows, as lists, starting [tokens, fingerprint,
        overflow], then the G columns of what each rank's last checked dispatch
        received: raise, on every rank alike, when the calls differ or an
        earlier dispatch received other counts than its layout said."""
        fps = [h[1] for h in heads]
        if len(set(fps)) > 1:
            raise ValueError("%s: the ranks' dispatches differ in hidden size, x dtype, scales, top-k, "
                             "num_experts or num_worst_tokens (every rank must make the same calls with the same "
                             "shapes); ranks %s differ from rank 0" % (call, [i for i, f in enumerate(fps)
                                                                               if f != fps[0]]))
        bad = {i for i, h in enumerate(heads) if h[2] > 0}
        if G:
            bad.update(i for i, (h, want) in enumerate(zip(heads, self._pending)) if h[3:3 + G] != want)
        self._pending = None
        if bad:
            if heads[self.rank][2] > 0:
                with self._use(comm):
                    self._over.zero_()
            raise RuntimeError("%s: an earlier dispatch on rank(s) %s received other counts than "
                               "num_tokens_per_rank / num_tokens_per_expert said (they must be get_dispatch_layout's "
                               "for the topk_idx passed, or num_worst_tokens too small): its outputs were wrong"
                               % (call, sorted(bad)))

    def _worst_bound(self, worst, T, call):
        per = -(-worst // self.group_size)
        if per > self._bound:
            if self._cuda.capturing():
                raise RuntimeError("%s: num_worst_tokens %d needs a token bound of %d, above the %d agreed so far; "
                                   "run this dispatch once before capturing" % (call, worst, per, self._bound))
            self._bound = per
            self._drop_small_slots()
        if T > self._bound:
            raise ValueError("%s: num_tokens %d is above the token bound %d this dispatch can use without a CPU "
                             "synchronisation (num_worst_tokens / ranks, or the bound earlier dispatches agreed, or "
                             "Buffer(max_num_tokens=)); every rank must pass the same num_worst_tokens"
                             % (call, T, self._bound))
        return self._bound

    def _ht_outputs(self, views, route, x, scales, topk_idx, R, worst, comm, alloc, src=True, entry=None,
                    home=None, h=None, counts=None):
        """DeepEP's outputs from symm's receive buffers: rows [0, R) of x and
        scales where they landed (a receive buffer of the pool, `entry`), else
        copied (or viewed, zero_copy_recv); with src (a dispatch that is not
        cached, over symm handle h) the source token indices and, with
        topk_idx, the indices in its dtype and the weights (0 where the index
        is -1; with num_worst_tokens, -1 and 0 past the rows received), with
        `counts` (what the dispatch received, for the next one's check), all
        in symm's one copy kernel (symm_moe_ht_recv_copy). `home`: the stream
        the outputs belong to."""
        rx, rs = views[0], views[1]
        cap = rx.size(0)
        if R > cap:
            raise ValueError("Buffer.dispatch: %d rows to return but symm's receive buffers hold %d" % (R, cap))
        ncols = None if scales is None else scales.size(1)
        with self._use(alloc):
            if entry is not None:
                entry.stream = home  # held while they live; a later dispatch elsewhere waits for this stream
                recv_x, recv_scales = entry.tensors(R, x.dtype, None if scales is None else scales.dtype)
            elif self._zero_copy_recv:
                recv_x, recv_scales = rx.narrow(0, 0, R), None
                if scales is not None:
                    recv_scales = rs.narrow(0, 0, R).narrow(1, 0, ncols)
                    recv_scales = recv_scales.view(torch.int32) if scales.dtype == torch.int32 else recv_scales
            else:
                recv_x = torch.empty((R, x.size(1)), dtype=x.dtype, device=self._device)
                recv_scales = None if scales is None else torch.empty((R, ncols), dtype=scales.dtype,
                                                                      device=self._device)
            recv_src = torch.empty(R, dtype=torch.int32, device=self._device) if src else None
            recv_idx = recv_w = None
            if topk_idx is not None:
                recv_idx = torch.empty((R, topk_idx.size(1)), dtype=topk_idx.dtype, device=self._device)
                recv_w = torch.empty((R, topk_idx.size(1)), dtype=torch.float32, device=self._device)
        with self._use(comm):
            if not self._zero_copy_recv and entry is None:
                recv_x.copy_(rx.narrow(0, 0, R))
                if scales is not None:
                    s = rs.narrow(0, 0, R).narrow(1, 0, ncols)
                    recv_scales.copy_(s.view(torch.int32) if scales.dtype == torch.int32 else s)
            if src:
                h._recv_copy(R, recv_src, recv_idx, recv_w, counts)
        return recv_x, recv_scales, recv_idx, recv_w, recv_src

    def _got_room(self, L):
        """The first 1 + L entries of _got, where a dispatch's copy kernel puts
        what it received (rows, then per local expert) for the next
        synchronising dispatch's count row."""
        if self._got.numel() < 1 + L:  # the old one stays alive: the last row may still be reading it
            self._got_retired.append(self._got)
            self._got = torch.zeros(1 + L, dtype=torch.int32, device=self._device)
            self._got_views = {}
        return self._got_head(1 + L)

    def _got_head(self, k):
        """_got's first k entries (a view made once per k)."""
        v = self._got_views.get(k)
        if v is None:
            v = self._got_views[k] = self._got.narrow(0, 0, k)
        return v

    def _count_buffers(self, W):
        """The count row and its gathered rows of a synchronising dispatch with
        rows of W, kept per W: each call's are read by the host before it
        returns, so the next call's (ordered after it on the stream) may
        rewrite them."""
        bufs = self._count_bufs.get(W)
        if bufs is None:
            if len(self._count_bufs) >= 8:
                self._count_bufs.clear()
            bufs = self._count_bufs[W] = (torch.empty(W, dtype=torch.int32, device=self._device),
                                          torch.empty((self.group_size, W), dtype=torch.int32, device=self._device))
        return bufs

    def _prefix_staged(self, sent_by, n):
        """rank_prefix_matrix ([i][j]: rows ranks 0..i send rank j) of the
        counts the host read, in a staging tensor (pinned memory on GPUs) to
        copy to the device. One per Buffer: the next synchronising dispatch
        writes it only after its host read, which waits for this one's copy
        (calls are ordered as on one stream)."""
        st = self._prefix_stage
        if st is None or st.numel() < n * n:
            st = self._prefix_stage = torch.empty(n * n, dtype=torch.int32,
                                                  pin_memory=self._device.type == "cuda")
        flat, acc = [], [0] * n
        for r in sent_by:
            acc = [a + b for a, b in zip(acc, r)]
            flat += acc
        ctypes.memmove(st.data_ptr(), (ctypes.c_int32 * (n * n))(*flat), 4 * n * n)  # no torch op
        return st[:n * n].view(n, n)

    def _note_received(self, views, counts, per_expert_all, with_topk, worst, L):
        """What symm received against what the layout said, for the next
        synchronising dispatch to check on every rank (no synchronisation
        now): with num_worst_tokens, how far past it, kept on the device; else
        the rows (and with top-k the per-expert counts), which _got holds (the
        copy kernel wrote them) and the next dispatch's count row carries to
        every rank, beside what every rank expects (_pending: per rank, the
        list those columns must hold; counts and per_expert_all are lists,
        over the ranks and over every expert)."""
        if worst:
            torch.maximum(self._over, views[5] - worst, out=self._over)
            return
        if with_topk:
            self._pending = [[c] + per_expert_all[p * L:(p + 1) * L] for p, c in enumerate(counts)]
        else:
            self._pending = [[c] for c in counts]

    def _cached_dispatch(self, x, scales, handle, config, previous_event, async_finish, allocate_on_comm_stream,
                         call):
        route = self._own_handle(handle, DispatchHandle, call)
        T, H = x.shape
        if T != route.T:
            raise ValueError("%s: the cached handle is for %d tokens, x has %d" % (call, route.T, T))
        if H != route.hidden:
            raise ValueError("%s: the cached handle is for hidden %d, x has %d" % (call, route.hidden, H))
        kind = (x.dtype, None if scales is None else scales.dtype)
        fast = route.fast.get(kind)
        if fast is None:
            key = self._ht_key(route.M, x, scales, route.K, route.E)
            fast = _CachedKind(key, x.shape, None if scales is None else scales.shape,
                               scales is None or (scales.dtype == torch.float32 and
                                                  scales.size(1) == (H + SCALE_BLOCK - 1) // SCALE_BLOCK))
        compute, comm, alloc = self._enter(call, previous_event, async_finish, allocate_on_comm_stream)
        capturing = self._cuda.capturing()
        recv_x, recv_scales, entry = self._cached_run(route, fast, x, scales, config, compute, comm, alloc, capturing,
                                                      False, call)
        # the checks above passed for this x dtype, shape and scales: _cached_fast compares against them
        route.fast[kind] = fast
        mine = () if self._zero_copy_recv or entry is not None else (recv_x, recv_scales)
        event = self._leave(compute, comm, async_finish, allocate_on_comm_stream, (x, scales) + mine, capturing)
        return (recv_x, recv_scales) if scales is not None else recv_x, None, None, None, None, event

    def _cached_fast(self, x, handle, config, expert_alignment, num_worst_tokens):
        """A cached dispatch on the current stream (no events) of an x whose
        dtype, shape and scales passed the checks for this handle before: the
        same steps as _cached_dispatch, its checks reduced to comparisons with
        what passed. None when the call is not such a one (nothing was done:
        the general path runs and checks)."""
        route = handle._route
        if handle._buffer is not self or self._destroyed or self.num_nvl_bytes <= 0 or \
                type(expert_alignment) is not int or expert_alignment < 1 or \
                type(num_worst_tokens) is not int or num_worst_tokens < 0 or \
                (config is not None and (type(config) is not Config or config.num_sms % 2)):
            return None
        scales = None
        if type(x) is tuple:
            if len(x) != 2:
                return None
            x, scales = x
            if type(scales) is not torch.Tensor:
                return None
        if type(x) is not torch.Tensor:
            return None
        fast = route.fast.get((x.dtype, None if scales is None else scales.dtype))
        if fast is None or x.shape != fast.x_shape or not self._here(x) or not x.is_contiguous() or \
                (scales is not None and (scales.shape != fast.s_shape or not self._here(scales))):
            return None
        call = "Buffer.dispatch"
        c = self._cuda
        compute = c.current()
        if self._last is not compute:
            self._after_last(compute)
        capturing = c.capturing()
        recv_x, recv_scales, _ = self._cached_run(route, fast, x, scales, self._config(config, call), compute, None,
                                                  None, capturing, True, call)
        self._last, self._last_captured = compute, capturing
        return (recv_x, recv_scales) if scales is not None else recv_x, None, None, None, None, EventOverlap(None)

    def _cached_run(self, route, fast, x, scales, config, compute, comm, alloc, capturing, checked, call):
        """A cached dispatch's symm call (on comm, None: the current stream)
        and outputs (allocated on alloc): (recv_x, recv_scales, the receive
        buffer they lie in or None). `checked`: x and scales were compared
        with ones that passed symm's checks too (_cached_fast)."""
        key = fast.key
        slot = self._slot_for_dispatch(key, route, None, call)
        self._set_sms(slot, config)
        with _SAME_STREAM if comm is None else self._cuda.use(comm):
            entry = self._recv_entry(key, scales, comm or compute, capturing)
            # the routing's argument block for this symm handle, checked once: a cached dispatch only adds x
            prep = route.preps.get(slot)
            if prep is None:
                idx = self._route_idx(route)
                prep = slot.h._prepare(idx)
                if idx is route.idx:  # not over an index tensor that a capture made (_route_idx)
                    route.preps[slot] = prep
            views = slot.h._dispatch_prepared(prep, x, scales if fast.direct else self._scales_in(scales, x.size(1)),
                                              *((None, None) if entry is None else entry.views), checked=checked)
        slot.route, slot.state = route, "dispatched"
        if entry is not None:  # the rows are where the peers stored them: no copy
            entry.stream = alloc or compute
            recv_x, recv_scales = entry.tensors(route.rows, x.dtype, None if scales is None else scales.dtype)
        else:
            recv_x, recv_scales, _, _, _ = self._ht_outputs(views, route, x, scales, None, route.rows,
                                                            route.num_recv is None, comm, alloc, src=False)
        return recv_x, recv_scales, entry

    def _own_handle(self, handle, cls, call):
        if not isinstance(handle, cls):
            raise TypeError("%s: handle must be the %s a dispatch of this Buffer returned, got %s"
                            % (call, cls.__name__, type(handle).__name__))
        if handle._buffer is not self:
            raise ValueError("%s: the handle comes from another Buffer" % call)
        return handle._route

    # ---- normal combine -----------------------------------------------------------------

    def _redispatch_ht(self, route, call):
        """Dispatch route's routing again (zeros) so that a combine can use it."""
        self._warn_redispatch(call)
        _, M, H, x_dtype, scaled, K, E = route.key
        key = route.key
        slot = self._slot_for_dispatch(key, route, self._ht_make(key), call)
        x = torch.zeros((route.T, H), dtype=x_dtype, device=self._device)
        s = torch.zeros((route.T, (H + SCALE_BLOCK - 1) // SCALE_BLOCK), dtype=torch.float32,
                        device=self._device) if scaled else None
        slot.h.dispatch(x, self._route_idx(route), None, x_scale=s)
        slot.route, slot.state = route, "dispatched"
        return slot

    def combine(self, x: torch.Tensor, handle: Tuple, topk_weights: Optional[torch.Tensor] = None,
                bias: Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]] = None, config: Optional[Config] = None,
                previous_event: Optional[EventOverlap] = None, async_finish: bool = False,
                allocate_on_comm_stream: bool = False) -> Tuple[torch.Tensor, Optional[torch.Tensor], EventOverlap]:
        """DeepEP's combine: combined_x[t] = the sum (no weights) of the rows
        x[i] the ranks return for token t, plus bias; combined_topk_weights[t]
        = the sum of the topk_weights rows returned for t, in rank order (in
        symm's combine itself, up to the dispatch's top-k columns). Returns
        (combined_x, combined_topk_weights or None, event)."""
        if previous_event is None and not async_finish and not allocate_on_comm_stream and \
                type(handle) is DispatchHandle:
            out = self._combine_fast(x, handle, topk_weights, bias, config)
            if out is not None:
                return out
        call = "Buffer.combine"
        self._need_normal(call)
        route = self._own_handle(handle, DispatchHandle, call)
        config = self._config(config, call, combine=True)
        _tensor(x, "x", call, 2, (torch.bfloat16, torch.float16), self._device)
        _shape(x, "x", call, (route.rows, route.hidden))
        if topk_weights is not None:
            _tensor(topk_weights, "topk_weights", call, 2, (torch.float32,), self._device)
            _shape(topk_weights, "topk_weights", call, (route.rows, None))
        biases = ()
        if bias is not None:
            biases = bias if isinstance(bias, tuple) else (bias,)
            if len(biases) not in (1, 2):
                raise ValueError("%s: bias is a tensor or a pair of tensors, got %d" % (call, len(biases)))
            for i, b in enumerate(biases):
                _tensor(b, "bias[%d]" % i, call, 2, (x.dtype,), self._device)
                _shape(b, "bias[%d]" % i, call, (route.T, route.hidden))
        compute, comm, alloc = self._enter(call, previous_event, async_finish, allocate_on_comm_stream)
        slot = self._slot_for_combine(route, call)
        out, combined_w = self._combine_run(route, slot, x, topk_weights, biases, config, comm, alloc, False, call)
        event = self._leave(compute, comm, async_finish, allocate_on_comm_stream,
                            (x, topk_weights, out, combined_w) + tuple(biases))
        return out, combined_w, event

    def _combine_fast(self, x, handle, topk_weights, bias, config):
        """A combine on the current stream (no events) whose arguments pass
        combine's checks, tested as comparisons with the handle's shapes; None
        when they do not (nothing was done: the general path runs and raises)."""
        route = handle._route
        if handle._buffer is not self or self._destroyed or self.num_nvl_bytes <= 0 or \
                (config is not None and (type(config) is not Config or config.num_sms % 2)) or \
                type(x) is not torch.Tensor or (x.dtype is not torch.bfloat16 and x.dtype is not torch.float16) or \
                x.shape != (route.rows, route.hidden) or not self._here(x) or not x.is_contiguous():
            return None
        if topk_weights is not None and (
                type(topk_weights) is not torch.Tensor or topk_weights.dtype is not torch.float32 or
                topk_weights.dim() != 2 or topk_weights.size(0) != route.rows or not self._here(topk_weights) or
                not topk_weights.is_contiguous()):
            return None
        biases = ()
        if bias is not None:
            biases = bias if type(bias) is tuple else (bias,)
            if not 1 <= len(biases) <= 2:
                return None
            for b in biases:
                if type(b) is not torch.Tensor or b.dtype is not x.dtype or b.shape != (route.T, route.hidden) or \
                        not self._here(b) or not b.is_contiguous():
                    return None
        call = "Buffer.combine"
        compute = self._cuda.current()
        if self._last is not compute:
            self._after_last(compute)
        slot = self._slot_for_combine(route, call)
        out, combined_w = self._combine_run(route, slot, x, topk_weights, biases, self._config(config, call, True),
                                            None, None, True, call)
        self._ran_on(compute)
        return out, combined_w, EventOverlap(None)

    def _combine_run(self, route, slot, x, topk_weights, biases, config, comm, alloc, checked, call):
        """Combine's work after its checks, on comm (None: the current stream),
        outputs allocated on alloc: (combined_x, combined_topk_weights or None).
        `checked`: x is a plain tensor that passed what symm's combine checks
        (_combine_fast), which then goes to the C call alone."""
        with self._use(comm):
            if slot is None:
                slot = self._redispatch_ht(route, call)
        self._set_sms(slot, config)
        # topk_weights ride in symm's combine (its side channel) up to the handle's top-k columns; a wider
        # matrix (DeepEP takes any width; its own callers pass the dispatch's top-k) takes an exchange of its own
        side = topk_weights is not None and topk_weights.size(1) <= route.K
        with self._use(alloc):
            out = x.new_empty((route.T, route.hidden))
            combined_w = torch.empty((route.T, topk_weights.size(1)), dtype=torch.float32,
                                     device=self._device) if side else None
        with self._use(comm):
            w, cw = (topk_weights, combined_w) if side else (None, None)
            if checked:
                slot.h._combine_checked(x, out, w, cw)
            else:
                slot.h.combine(x, out=out, weights=w, out_weights=cw)
            slot.state = "idle"
            if topk_weights is not None and not side:
                combined_w = self._combine_weights(route, topk_weights, alloc)
            if len(biases) == 1:
                out.add_(biases[0])  # in float32, rounded once: what adding to a float32 copy and copying back gives
            elif biases:
                torch.add(out.float().add_(biases[0]), biases[1], out=out)
        if slot.key[0] == "ht" and slot.key[1] < self._bound:
            self._drop_small_slots()
        return out, combined_w

    def _weights_plan(self, route, R):
        """The index tensors of _combine_weights' all-to-all path that depend
        on the routing alone: where each received row's weights go in the
        all-to-all's send blocks (rows past a block go to rows of their own
        past the blocks), the send rows, per token and rank (flat) the row of
        the block it comes back in, or the zero row past the blocks where the
        token did not go to that rank, and each token's first entry there."""
        n, M, dev = self.group_size, route.M, self._device
        if route.recv_host is not None:  # the rows from each source, known on the host
            dest = torch.cat([torch.arange(s * M, s * M + cnt, device=dev)
                              for s, cnt in enumerate(route.recv_host)] +
                             [torch.empty(0, dtype=torch.int64, device=dev)])
            rows = n * M
        else:  # num_worst_tokens: placed on the device; rows past the received ones are dropped
            counts = route.recv_counts.to(torch.int64)
            incl = counts.cumsum(0)
            r = torch.arange(R, device=dev)
            src = torch.searchsorted(incl, r, right=True)
            srcc = src.clamp(max=n - 1)
            pos = r - (incl - counts)[srcc]
            # past the blocks, each such row to a row of its own (unique indices: deterministic)
            dest = torch.where((src < n) & (pos < M), srcc * M + pos, n * M + r)
            rows = n * M + R
        # token t's row from rank r is row (t's place among the tokens sent to r) of r's block
        offs = torch.arange(n, device=dev) * M - 1
        gidx = torch.where(route.in_rank, route.in_rank.cumsum(0) + offs, n * M)
        return dest, rows, gidx.view(-1), torch.arange(0, route.T * n, n, device=dev)

    def _weights_buf(self, M, K):
        """The symmetric float32 buffer of (ranks x M + 1) rows of K that
        combine's weights come back into, its last row zero (what the rows of
        ranks a token did not go to read): one per token bound and top-k, made
        at the first such combine (collective, as combine is)."""
        got = self._wbufs.get((M, K))
        if got is None:
            rows = self.group_size * M + 1
            raw = self._engine.pool_alloc(rows * K * 4)
            view = raw.view(torch.float32).view(rows, K)
            view[-1].zero_()
            got = self._wbufs[(M, K)] = (raw, view)
        return got[1]

    def _weights_v(self, route, K):
        """(buffer, the all-to-allv's counts, the gather index [tokens, ranks])
        of combine's weights when the host knows the rows per rank: each
        rank's rows go back to it as they are, and token t's row from rank r
        is at (r's block start in what this rank sent) + (t's place among the
        tokens sent to r), or the zero row where t did not go to r."""
        n, M = self.group_size, route.M
        buf = self._weights_buf(M, K)
        zero_row = n * M
        starts, at = [], 0
        for c in route.sent_host:
            starts.append(at)
            at += c
        with torch.inference_mode(False):
            first = torch.tensor(starts, dtype=torch.int64, device=self._device) - 1
            place = (route.in_rank.cumsum(0) + first).clamp_(max=zero_row)
            gidx = torch.where(route.in_rank, place, torch.full((), zero_row, dtype=torch.int64, device=self._device))
        return buf, self._engine.a2av_counts(route.sent_host, route.recv_host, K), gidx

    def _weights_plan_of(self, route, K, R):
        """What _combine_weights needs of the routing, made once per handle
        and kept, unless made during a CUDA graph capture (its tensors would
        hold values only once the graph replays): (K, the symmetric buffer,
        the all-to-allv's counts, the flat gather index, each token's first
        entry in it) when the host knows
        the rows per rank, outside a capture (the buffer is collective, the
        index starts from the host's counts); else (K, None, R,
        _weights_plan's four), made on the device alone."""
        capturing = self._cuda.capturing()
        with torch.inference_mode(False):  # kept for later calls: no inference tensors (autograd refuses them)
            if route.sent_host is not None and not capturing:
                buf, counts, gidx = self._weights_v(route, K)
                n = self.group_size
                plan = (K, buf, counts, gidx.view(-1), torch.arange(0, route.T * n, n, device=self._device))
            else:
                plan = (K, None, R) + self._weights_plan(route, R)
        if not capturing:
            route.wplan = plan
        return plan

    def _combine_weights(self, route, w, alloc):
        """combine's topk_weights wider than the handle's top-k (narrower ones
        ride in symm's combine itself): each row's weights go back to its
        source, which sums, per token, the rows it gets from the ranks it sent
        the token to, in rank order.
        When the host knows the rows per rank (not num_worst_tokens): one
        all-to-allv of the rows as they are into a symmetric buffer, then one
        kernel gathers and sums them. Else an all-to-all of [ranks, bound,
        top-k] blocks: the rows placed, the zero row set, then gathered and
        summed (three kernels). The index tensors are the routing's, made once
        per handle outside graph capture. Outputs allocated on another stream
        (alloc) take one copy more."""
        K = w.size(1)
        plan = route.wplan
        if plan is None or plan[0] != K or (plan[1] is None and plan[2] != w.size(0)):
            plan = self._weights_plan_of(route, K, w.size(0))
        if plan[1] is not None:  # the all-to-allv and one kernel: the call's whole work
            self._engine.all_to_allv(plan[1], w, plan[2])
            # per token, the sum of its rows (the ranks' in rank order, the zero row where it did not go): a bag
            # sum, which adds a bag's rows one after another, in float32
            got = torch.embedding_bag(plan[1], plan[3], plan[4], False, 0)[0]
            if alloc is None:
                return got
            with self._use(alloc):
                out = torch.empty((route.T, K), dtype=torch.float32, device=self._device)
            return out.copy_(got)
        n, M, dev, T = self.group_size, route.M, self._device, route.T
        _, _, _, dest, rows, gidx, first = plan
        send = torch.empty((rows, K), dtype=torch.float32, device=dev)
        send.index_copy_(0, dest, w)
        got = torch.empty((n * M + 1, K), dtype=torch.float32, device=dev)
        got.narrow(0, n * M, 1).zero_()
        self._engine.all_to_all(got.narrow(0, 0, n * M).view(-1), send.narrow(0, 0, n * M).reshape(-1))
        summed = torch.embedding_bag(got, gidx, first, False, 0)[0]
        if alloc is None:
            return summed
        with self._use(alloc):
            out = torch.empty((T, K), dtype=torch.float32, device=dev)
        return out.copy_(summed)

    # ---- low latency --------------------------------------------------------------------

    def clean_low_latency_buffer(self, num_max_dispatch_tokens_per_rank: int, hidden: int, num_experts: int) -> None:
        """Nothing to clean: symm's handles count calls instead of zeroing flags,
        so normal and low-latency calls mix freely. Checks the arguments."""
        call = "Buffer.clean_low_latency_buffer"
        self._need_ll(call)
        _int(num_max_dispatch_tokens_per_rank, "num_max_dispatch_tokens_per_rank", call, 1)
        _int(hidden, "hidden", call, 1)
        _int(num_experts, "num_experts", call, 1)
        if num_experts % self.group_size:
            raise ValueError("%s: num_experts %d is not a multiple of the %d ranks" % (call, num_experts,
                                                                                      self.group_size))

    def _ll_make(self, key):
        _, M, H, E, K, fp8 = key
        return lambda: self._engine.ll(M, E, K, H, torch.float8_e4m3fn if fp8 else torch.bfloat16, fp8)

    @staticmethod
    def _cast_fp8(x, round_scale):
        """x (bf16 [T, H], H a multiple of 128) as e4m3 with one float32 scale
        per 128 elements, as DeepEP's kernel casts: amax (at least 1e-4) of the
        block, scale = amax x float32(1 / 448) and x x (448 / amax), or with
        round_scale scale = 2^e, e the exponent bits' ceil(log2(amax / 448)),
        and x x 2^-e; saturated to +-448."""
        T, H = x.shape
        xf = x.view(T, H // 128, 128).float()
        amax = xf.abs().amax(dim=2).clamp_(min=1e-4)
        scale = amax * _INV_E4M3_MAX
        if round_scale:
            bits = scale.view(torch.int32)
            e = ((bits >> 23) & 0xff) + (bits & 0x7fffff).ne(0).to(torch.int32) - 127
            scale = ((e + 127) << 23).view(torch.float32)
            mul = ((127 - e) << 23).view(torch.float32)
        else:
            mul = torch.full_like(amax, _E4M3_MAX).div_(amax)
        q = (xf * mul.unsqueeze(2)).clamp_(-_E4M3_MAX, _E4M3_MAX).to(torch.float8_e4m3fn).view(T, H)
        return q, scale

    def low_latency_dispatch(self, x: torch.Tensor, topk_idx: torch.Tensor, num_max_dispatch_tokens_per_rank: int,
                             num_experts: int, cumulative_local_expert_recv_stats: Optional[torch.Tensor] = None,
                             dispatch_wait_recv_cost_stats: Optional[torch.Tensor] = None, use_fp8: bool = True,
                             round_scale: bool = False, use_ue8m0: bool = False, async_finish: bool = False,
                             return_recv_hook: bool = False) -> \
            Tuple[Union[Tuple[torch.Tensor, torch.Tensor], torch.Tensor], torch.Tensor, Tuple, EventOverlap,
                  Optional[Callable]]:
        """DeepEP's low_latency_dispatch: returns (recv_x, recv_count, handle,
        event, hook). recv_x is [local experts, ranks x max tokens, hidden]
        (bf16, or fp8 e4m3 with its scales [local experts, rows, hidden / 128]
        float32, column-major, or with use_ue8m0 int32 [..., hidden / 512] of
        packed exponents); expert l's rows 0 .. recv_count[l] - 1 hold its
        tokens, by source rank (handle: src_info, layout_range). With
        return_recv_hook the call only sends; hook() receives, on the stream
        current at the call."""
        call = "Buffer.low_latency_dispatch"
        self._need_ll(call)
        n = self.group_size
        if dispatch_wait_recv_cost_stats is not None:
            raise _unsupported(call, "dispatch_wait_recv_cost_stats: symm does not time the waits per rank")
        if async_finish and return_recv_hook:
            raise ValueError("%s: async_finish and return_recv_hook cannot both be set (as in DeepEP)" % call)
        if use_ue8m0 and not round_scale:
            raise ValueError("%s: use_ue8m0 needs round_scale=True (as in DeepEP)" % call)
        _tensor(x, "x", call, 2, (torch.bfloat16,), self._device)
        _tensor(topk_idx, "topk_idx", call, 2, _IDX_DTYPES, self._device)
        M = _int(num_max_dispatch_tokens_per_rank, "num_max_dispatch_tokens_per_rank", call, 1)
        E = _int(num_experts, "num_experts", call, 1)
        T, H, K = x.size(0), x.size(1), topk_idx.size(1)
        _shape(topk_idx, "topk_idx", call, (T, K))
        if T > M:
            raise ValueError("%s: x has %d tokens, above num_max_dispatch_tokens_per_rank %d" % (call, T, M))
        if E % n:
            raise ValueError("%s: num_experts %d is not a multiple of the %d ranks" % (call, E, n))
        if H % 8:
            raise ValueError("%s: hidden %d is not a multiple of 8" % (call, H))
        if use_fp8 and H % (512 if use_ue8m0 else 128):
            raise ValueError("%s: fp8 needs hidden a multiple of %d, got %d" % (call, 512 if use_ue8m0 else 128, H))
        L = E // n
        if cumulative_local_expert_recv_stats is not None:
            _tensor(cumulative_local_expert_recv_stats, "cumulative_local_expert_recv_stats", call, 1,
                    (torch.int32,), self._device)
            _shape(cumulative_local_expert_recv_stats, "cumulative_local_expert_recv_stats", call, (L,))
        key = ("ll", M, H, E, K, bool(use_fp8))
        c = self._cuda
        compute = c.current()
        launch, here = self._ll_stream(compute, async_finish)
        rows, G = n * M, H // 128
        recv_x = torch.empty((L, rows, H), dtype=torch.float8_e4m3fn if use_fp8 else torch.bfloat16,
                             device=self._device)
        count = torch.empty(L, dtype=torch.int32, device=self._device)
        scales = target = None
        if use_fp8 and not use_ue8m0:
            scales = target = torch.empty((L, G, rows), dtype=torch.float32, device=self._device).transpose(1, 2)
        elif use_fp8:
            scales = torch.empty((L, G // 4, rows), dtype=torch.int32, device=self._device).transpose(1, 2)
        route = _Route("ll", T=T, M=M, K=K, E=E, hidden=H, key=key, count=count, routes=None)
        with self._use(here):
            slot = self._slot_for_dispatch(key, route, self._ll_make(key), call)
            if use_fp8:
                q, s = self._cast_fp8(x, round_scale)
                if use_ue8m0:
                    target = torch.empty((L, rows, G), dtype=torch.float32, device=self._device)
            else:
                q, s = x, None
            slot.h.dispatch(count, recv_x, target, q, s, topk_idx, None, do_send=True, do_recv=not return_recv_hook)
        slot.route = route
        handle = LowLatencyHandle(route, self, M, H, E)
        slot.holder = weakref.ref(handle)

        def received():
            if use_ue8m0:
                exps = ((target.view(torch.int32) >> 23) & 0xff).to(torch.uint8)
                scales.copy_(exps.view(torch.int32))
            if cumulative_local_expert_recv_stats is not None:
                cumulative_local_expert_recv_stats.add_(count)

        kept = (x, topk_idx, q, s, recv_x, scales, target, count, cumulative_local_expert_recv_stats)
        if return_recv_hook:
            slot.state = "sent"
            done = [False]

            def hook():
                if done[0]:
                    raise RuntimeError("low_latency_dispatch hook: already called")
                done[0] = True
                with c.use(launch):
                    slot.h.dispatch(count, recv_x, target, q, s, topk_idx, None, do_send=False, do_recv=True)
                    received()
                slot.state = "dispatched"
            event, out_hook = EventOverlap(None), hook
        else:
            with self._use(here):
                received()
            slot.state = "dispatched"
            event = EventOverlap(EventHandle(c, launch), kept) if async_finish else EventOverlap(None)
            out_hook = None
        self._ran_on(launch)
        return (recv_x, scales) if use_fp8 else recv_x, count, handle, event, out_hook

    def _ll_stream(self, compute, async_finish):
        """(the stream a low-latency call runs on, None when it is the current
        one): the communication stream, after the current one, with
        async_finish; else the current stream (a receive hook's too)."""
        if async_finish:
            self._comm_after(compute, None)
            return self._comm, self._comm
        self._after_last(compute)
        return compute, None

    def _ll_decode(self, route):
        """src_info and layout_range of a low-latency dispatch, from its routes."""
        n, dev = self.group_size, self._device
        routes = route.routes
        if routes is None:
            slot = next((s for slots in self._slots.values() for s in slots if s.route is route), None)
            if slot is None:
                if getattr(route, "lost", False):
                    raise RuntimeError("LowLatencyHandle: the dispatch's routes were rewritten by a low-latency "
                                       "dispatch captured into a CUDA graph before this handle was read (a copy "
                                       "made in the capture would hold values only at replay): read handle[0] "
                                       "and handle[1] before capturing")
                raise RuntimeError("LowLatencyHandle: the dispatch's routes are gone")
            routes = self._routes_of(slot)
        L, rows = routes.shape
        valid = torch.arange(rows, device=dev).unsqueeze(0) < route.count.to(torch.int64).unsqueeze(1)
        src = routes & 0xffff
        src_info = torch.where(valid, routes >> 32, torch.full((), -1, dtype=torch.int64, device=dev)).to(torch.int32)
        hits = (src.unsqueeze(2) == torch.arange(n, device=dev)) & valid.unsqueeze(2)
        counts = hits.sum(dim=1)
        begin = counts.cumsum(dim=1) - counts
        return src_info, (begin << 32) | counts

    def _ll_slot_for_combine(self, route, topk_idx, call):
        slot = self._slot_for_combine(route, call)
        if slot is not None:
            return slot
        self._warn_redispatch(call)
        _, M, H, E, K, fp8 = route.key
        slot = self._slot_for_dispatch(route.key, route, self._ll_make(route.key), call)
        n, L = self.group_size, E // self.group_size
        x = torch.zeros((route.T, H), dtype=torch.float8_e4m3fn if fp8 else torch.bfloat16, device=self._device)
        s = torch.ones((route.T, H // 128), dtype=torch.float32, device=self._device) if fp8 else None
        ex = torch.empty((L, n * M, H), dtype=x.dtype, device=self._device)
        exs = torch.empty((L, n * M, H // 128), dtype=torch.float32, device=self._device) if fp8 else None
        cnt = torch.empty(L, dtype=torch.int32, device=self._device)
        slot.h.dispatch(cnt, ex, exs, x, s, topk_idx, None)
        slot.route, slot.state = route, "dispatched"
        return slot

    def get_next_low_latency_combine_buffer(self, handle) -> torch.Tensor:
        """The bf16 [local experts, ranks x max tokens, hidden] tensor that
        low_latency_combine(..., zero_copy=True) reads the expert outputs from,
        for this handle's dispatch: fill it, then combine."""
        call = "Buffer.get_next_low_latency_combine_buffer"
        self._need_ll(call)
        route = self._own_handle(handle, LowLatencyHandle, call)
        slot = self._slot_for_combine(route, call)
        if slot is None:
            raise RuntimeError("%s: the handle's dispatch is no longer the last over its symm handle; dispatch "
                               "again first" % call)
        if slot.combine_buf is None:
            n, L = self.group_size, route.E // self.group_size
            slot.combine_buf = torch.empty((L, n * route.M, route.hidden), dtype=torch.bfloat16, device=self._device)
        return slot.combine_buf

    def low_latency_combine(self, x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor, handle: Tuple,
                            use_logfmt: bool = False, zero_copy: bool = False, async_finish: bool = False,
                            return_recv_hook: bool = False, out: Optional[torch.Tensor] = None,
                            combine_wait_recv_cost_stats: Optional[torch.Tensor] = None) -> \
            Tuple[torch.Tensor, EventOverlap, Optional[Callable]]:
        """DeepEP's low_latency_combine: combined_x[t] = sum over k of
        topk_weights[t, k] x (expert topk_idx[t, k]'s output row for t), -1
        slots skipped, accumulated in float32. x is bf16 [local experts, ranks x
        max tokens, hidden] laid out as the dispatch gave the rows (zero_copy:
        read from get_next_low_latency_combine_buffer(handle) instead). Returns
        (combined_x, event, hook)."""
        call = "Buffer.low_latency_combine"
        self._need_ll(call)
        if use_logfmt:
            raise _unsupported(call, "use_logfmt=True: symm's combine moves bf16 (no LogFMT)")
        if combine_wait_recv_cost_stats is not None:
            raise _unsupported(call, "combine_wait_recv_cost_stats: symm does not time the waits per rank")
        if async_finish and return_recv_hook:
            raise ValueError("%s: async_finish and return_recv_hook cannot both be set (as in DeepEP)" % call)
        route = self._own_handle(handle, LowLatencyHandle, call)
        n, L, M, H = self.group_size, route.E // self.group_size, route.M, route.hidden
        _tensor(x, "x", call, 3, (torch.bfloat16,), self._device)
        _shape(x, "x", call, (L, n * M, H))
        _tensor(topk_idx, "topk_idx", call, 2, _IDX_DTYPES, self._device)
        _shape(topk_idx, "topk_idx", call, (route.T, route.K))
        _tensor(topk_weights, "topk_weights", call, 2, (torch.float32,), self._device)
        _shape(topk_weights, "topk_weights", call, (route.T, route.K))
        if out is not None:
            _tensor(out, "out", call, 2, (torch.bfloat16,), self._device)
            _shape(out, "out", call, (route.T, H))
        c = self._cuda
        compute = c.current()
        launch, here = self._ll_stream(compute, async_finish)
        with self._use(here):
            slot = self._ll_slot_for_combine(route, topk_idx, call)
        y = x
        if zero_copy:
            if slot.combine_buf is None:
                raise ValueError("%s: zero_copy=True, but get_next_low_latency_combine_buffer(handle) was not "
                                 "called for this dispatch" % call)
            y = slot.combine_buf
        combined = out if out is not None else torch.empty((route.T, H), dtype=torch.bfloat16, device=self._device)
        with self._use(here):
            slot.h.combine(combined, topk_idx, topk_weights, y, None, do_send=True, do_recv=not return_recv_hook)
        self._ran_on(launch)
        kept = (x, topk_idx, topk_weights, y, combined)
        if return_recv_hook:
            slot.state = "combine_sent"
            done = [False]

            def hook():
                if done[0]:
                    raise RuntimeError("low_latency_combine hook: already called")
                done[0] = True
                with c.use(launch):
                    slot.h.combine(combined, topk_idx, topk_weights, y, None, do_send=False, do_recv=True)
                slot.state = "idle"
            return combined, EventOverlap(None), hook
        slot.state = "idle"
        if async_finish:
            return combined, EventOverlap(EventHandle(c, launch), kept), None
        return combined, EventOverlap(None), None


__all__ = ["Buffer", "Config", "EventHandle", "EventOverlap", "DispatchHandle", "LowLatencyHandle", "topk_idx_t"]
