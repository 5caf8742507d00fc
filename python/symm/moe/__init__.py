"""MoE token dispatch and combine on symm (include/symm/symm_moe.h).

Two classes, thin over the C API (ctypes), registered as torch custom ops
(torch.ops.symm.moe_*) so torch.compile traces through them:

AllToAll -- pplx-kernels' API: a pplx user changes the import and nothing else::

    from symm.moe import AllToAll          # was: from pplx_kernels import AllToAll
    ata = AllToAll.intranode(max_num_tokens, num_experts, experts_per_token, rank,
                             world_size, dp_size, hidden_dim, hidden_dim_bytes,
                             hidden_dim_scale_bytes)
    ata.dispatch(out_expert_num_tokens, out_expert_x, out_expert_x_scale, dp_x,
                 dp_x_scale, indices, bound_m, do_send=True, do_recv=True)
    ata.combine(out_tokens, indices, weights, expert_y, bound_m, do_send=True, do_recv=True)
    ata.destroy()

HighThroughput -- prefill-sized batches (DeepEP's "normal" layout): a layout
step, dispatch of thousands of tokens (once per destination PE, fp8 with
scales or bf16), combine in bf16.

symm.moe.deep_ep -- DeepEP's Buffer (normal and low-latency modes, on one
node) over these two: a DeepEP user changes the import (docs/moe.md).

pplx's start: symm.moe.nvshmem_init(global_rank, local_rank, world_size, device)
starts symm over the running torch.distributed group (processes spawned with
an explicit init_process_group need no launcher variables); its older form
nvshmem_init(uid, rank, world_size) takes nvshmem_get_unique_id()'s tensor.

set_num_sms(n) on either object caps every kernel at n blocks (one per SM),
leaving the other SMs to the expert GEMMs; 0 is the default, every SM.

Everything runs on torch's current stream without a host synchronisation and
captures into CUDA graphs. Eager calls go straight to the C library (the
custom ops are what torch.compile traces) and repeat no check whose inputs
(shapes, strides, dtypes, devices) are those of the previous call. do_send / do_recv split a call into its send and
receive halves so other work can run between them. Every call is collective:
all PEs make the same calls in the same order (dispatch, combine, dispatch...;
a dispatch may also follow a dispatch whose combine is skipped, and a combine
works on the last dispatch). An index of -1 (int32 or int64) marks a top-k slot
with no expert: it is skipped.

Arguments are checked before anything runs (TypeError / ValueError, or the C
library's InvalidArgumentError for sizes against the configuration). Expert
indices live on the GPU: a bad one is found there, the route is skipped, and
the error is raised by the next call on the object (or by check(), which
synchronises the stream).
"""
import ctypes
import itertools
from typing import List, Optional

from .. import _lib, _runtime
from .._coll import _DTYPE_CODES
from .._errors import UnsupportedError

try:
    import torch
except ImportError:  # pragma: no cover - the message is the point
    raise ImportError("symm.moe needs torch (pip install torch)") from None

LOW_LATENCY, HIGH_THROUGHPUT = 0, 1
SEND, RECV = 1, 2
SCALE_BLOCK = 128

_c_int, _c_size_t, _c_void_p, _c_int64 = ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int64


# ---------------------------------------------------------------------------
# The C structures (symm_moe.h); tests/python/test_moe.py checks the layouts
# ---------------------------------------------------------------------------

class Config(ctypes.Structure):
    _fields_ = [("mode", _c_int), ("max_num_tokens", _c_size_t), ("num_experts", _c_size_t),
                ("experts_per_token", _c_size_t), ("hidden_dim", _c_size_t), ("hidden_dim_bytes", _c_size_t),
                ("hidden_dim_scale_bytes", _c_size_t), ("dp_size", _c_int), ("max_recv_tokens", _c_size_t)]


class DispatchArgs(ctypes.Structure):
    _fields_ = [("out_expert_num_tokens", _c_void_p), ("out_expert_x", _c_void_p),
                ("out_expert_x_stride", _c_int64 * 2), ("out_expert_rows", _c_size_t),
                ("out_expert_x_scale", _c_void_p), ("out_expert_x_scale_stride", _c_int64 * 3),
                ("dp_x", _c_void_p), ("dp_x_stride", _c_int64), ("dp_x_scale", _c_void_p),
                ("dp_x_scale_stride", _c_int64 * 2), ("indices", _c_void_p), ("num_tokens", _c_size_t),
                ("bound_m", _c_void_p), ("x_dtype", _c_int)]


class CombineArgs(ctypes.Structure):
    _fields_ = [("out_tokens", _c_void_p), ("out_stride", _c_int64), ("out_rows", _c_size_t),
                ("out_dtype", _c_int), ("indices", _c_void_p), ("weights", _c_void_p),
                ("num_tokens", _c_size_t), ("expert_y", _c_void_p), ("expert_y_stride", _c_int64 * 2),
                ("expert_y_rows", _c_size_t), ("y_dtype", _c_int), ("bound_m", _c_void_p)]


class HtDispatchArgs(ctypes.Structure):
    _fields_ = [("x", _c_void_p), ("x_stride", _c_int64), ("x_dtype", _c_int), ("x_scale", _c_void_p),
                ("x_scale_stride", _c_int64 * 2), ("indices", _c_void_p), ("indices_dtype", _c_int),
                ("weights", _c_void_p), ("num_tokens", _c_size_t)]


class HtRecv(ctypes.Structure):
    _fields_ = [("x", _c_void_p), ("x_scale", _c_void_p), ("indices", _c_void_p), ("weights", _c_void_p),
                ("src", _c_void_p), ("num_recv", _c_void_p), ("num_recv_per_expert", _c_void_p),
                ("capacity", _c_size_t), ("scale_cols", _c_size_t)]


class HtRecvCopy(ctypes.Structure):
    _fields_ = [("rows", _c_size_t), ("src_token", _c_void_p), ("indices", _c_void_p), ("indices_dtype", _c_int),
                ("weights", _c_void_p), ("counts", _c_void_p)]


class HtWeights(ctypes.Structure):
    _fields_ = [("w", _c_void_p), ("w_stride", _c_int64), ("w_rows", _c_size_t), ("out_w", _c_void_p),
                ("out_w_stride", _c_int64), ("out_w_rows", _c_size_t), ("cols", _c_size_t)]


STRUCTS = {"symm_moe_config_t": Config, "symm_moe_dispatch_args_t": DispatchArgs,
           "symm_moe_combine_args_t": CombineArgs, "symm_moe_ht_dispatch_args_t": HtDispatchArgs,
           "symm_moe_ht_recv_t": HtRecv, "symm_moe_ht_weights_t": HtWeights,
           "symm_moe_ht_recv_copy_t": HtRecvCopy}


_fns = {}


def _fn(name):
    # the ctypes function, looked up once: eager calls resolve it on every call
    f = _fns.get(name)
    if f is None:
        if not _lib.has(name):
            raise UnsupportedError(name, UnsupportedError.status, "this libsymm has no MoE exchange (symm_moe.h)")
        f = _fns[name] = getattr(_lib.load(), name)
    return f


def _call(name, *args):
    _runtime._check(name, _fn(name)(*args))


# ---------------------------------------------------------------------------
# Checks on tensors (no GPU needed: `device` None skips the device check)
# ---------------------------------------------------------------------------

_codes = {}


def _dtype_code(t):
    # by the dtype object, cached: str(dtype) per call costs more than the C call's checks
    c = _codes.get(t.dtype)
    if c is None:
        c = _codes[t.dtype] = _DTYPE_CODES.get(str(t.dtype).replace("torch.", ""), -1)
    return c


def _tensor(t, what, call, dims, dtypes=None, device=None, contiguous=False, last_contiguous=True):
    if not isinstance(t, torch.Tensor):
        raise TypeError("%s: %s must be a torch.Tensor, got %s" % (call, what, type(t).__name__))
    if t.dim() != dims:
        raise ValueError("%s: %s must have %d dimensions, got shape %s" % (call, what, dims, tuple(t.shape)))
    if dtypes is not None and t.dtype not in dtypes:
        raise TypeError("%s: %s is %s; expected %s" % (call, what, t.dtype,
                                                       " or ".join(str(d) for d in dtypes)))
    if device is not None and t.device != device:
        raise ValueError("%s: %s is on %s; this PE runs on %s" % (call, what, t.device, device))
    if contiguous and not t.is_contiguous():
        raise ValueError("%s: %s must be contiguous" % (call, what))
    if last_contiguous and t.numel() > 0 and dims > 0 and t.stride(-1) != 1 and t.size(-1) > 1:
        raise ValueError("%s: %s must be contiguous in its last dimension (stride %s)" % (call, what, t.stride()))
    return t


def _shape(t, what, call, want):
    got = tuple(t.shape)
    for i, w in enumerate(want):
        if w is not None and got[i] != w:
            raise ValueError("%s: %s has shape %s; expected %s" % (
                call, what, got, "(" + ", ".join("*" if x is None else str(x) for x in want) + ")"))


_X_DTYPES = (torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.float8_e5m2, torch.float32, torch.uint8)
_OUT_DTYPES = (torch.bfloat16, torch.float16)
_Y_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
_IDX_DTYPES = (torch.uint32, torch.int32, torch.int64)


def _ll_indices(indices, call, m, k, device):
    _tensor(indices, "indices", call, 2, _IDX_DTYPES, device, contiguous=True)
    _shape(indices, "indices", call, (m, k))
    if indices.dtype == torch.int64:
        indices = indices.to(torch.int32)
    return indices


def _bound(bound_m, call, device):
    if bound_m is None:
        return None
    _tensor(bound_m, "bound_m", call, 1, (torch.uint32, torch.int32), device)
    if bound_m.numel() != 1:
        raise ValueError("%s: bound_m must hold one element, got %d" % (call, bound_m.numel()))
    return bound_m


def check_dispatch(spec, out_expert_num_tokens, out_expert_x, out_expert_x_scale, dp_x, dp_x_scale, indices,
                   bound_m, device=None):
    """The Python-side checks of AllToAll.dispatch against `spec` (a dict of
    the configuration: local_experts, rows, hidden_dim, experts_per_token,
    scale_cols, has_scales); returns the indices to pass (int64 converted)."""
    call = "AllToAll.dispatch"
    L, H, K = spec["local_experts"], spec["hidden_dim"], spec["experts_per_token"]
    _tensor(out_expert_num_tokens, "out_expert_num_tokens", call, 1, (torch.int32,), device, contiguous=True)
    _shape(out_expert_num_tokens, "out_expert_num_tokens", call, (L,))
    _tensor(dp_x, "dp_x", call, 2, _X_DTYPES, device)
    _shape(dp_x, "dp_x", call, (None, H))
    _tensor(out_expert_x, "out_expert_x", call, 3, (dp_x.dtype,), device)
    _shape(out_expert_x, "out_expert_x", call, (L, None, H))
    m = dp_x.size(0)
    if spec["has_scales"]:
        if out_expert_x_scale is None or dp_x_scale is None:
            raise ValueError("%s: the AllToAll was made with scales (hidden_dim_scale_bytes > 0): "
                             "out_expert_x_scale and dp_x_scale must be given" % call)
        _tensor(dp_x_scale, "dp_x_scale", call, 2, (torch.float32,), device, last_contiguous=False)
        _shape(dp_x_scale, "dp_x_scale", call, (m, spec["scale_cols"]))
        _tensor(out_expert_x_scale, "out_expert_x_scale", call, 3, (torch.float32,), device,
                last_contiguous=False)
        _shape(out_expert_x_scale, "out_expert_x_scale", call, (L, out_expert_x.size(1), spec["scale_cols"]))
    elif out_expert_x_scale is not None or dp_x_scale is not None:
        raise ValueError("%s: the AllToAll was made without scales (hidden_dim_scale_bytes 0): "
                         "out_expert_x_scale and dp_x_scale must be None" % call)
    indices = _ll_indices(indices, call, m, K, device)
    _bound(bound_m, call, device)
    return indices


def check_combine(spec, out_tokens, indices, weights, expert_y, bound_m, device=None):
    """The Python-side checks of AllToAll.combine; returns the indices to pass."""
    call = "AllToAll.combine"
    L, H, K = spec["local_experts"], spec["hidden_dim"], spec["experts_per_token"]
    _tensor(out_tokens, "out_tokens", call, 2, _OUT_DTYPES, device)
    _shape(out_tokens, "out_tokens", call, (None, H))
    m = indices.size(0) if isinstance(indices, torch.Tensor) and indices.dim() == 2 else None
    indices = _ll_indices(indices, call, m, K, device)
    _tensor(weights, "weights", call, 2, (torch.float32,), device, contiguous=True)
    _shape(weights, "weights", call, (indices.size(0), K))
    _tensor(expert_y, "expert_y", call, 3, _Y_DTYPES, device)
    _shape(expert_y, "expert_y", call, (L, None, H))
    if out_tokens.size(0) < indices.size(0):
        raise ValueError("%s: out_tokens has %d rows, below the %d tokens of indices" % (
            call, out_tokens.size(0), indices.size(0)))
    _bound(bound_m, call, device)
    return indices


def _ptr(t):
    return None if t is None else t.data_ptr()


_Tensor = torch.Tensor
_I64 = torch.int64
_is_compiling = torch.compiler.is_compiling
_dispatch_modes = torch._C._len_torch_dispatch_stack
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _stream(device_index=None):
    """torch's current stream (its cudaStream_t) on the device."""
    if _raw_stream is not None:
        return _raw_stream(torch.cuda.current_device() if device_index is None else device_index)
    return torch.cuda.current_stream().cuda_stream


def _traced(t):
    """Does this call have to go through the custom op: torch.compile is
    tracing it, its tensors are fake or functional (subclasses), or a dispatch
    mode wants to see the op? Otherwise the call goes straight to the C
    library (the checks are the same)."""
    return _is_compiling() or _dispatch_modes() != 0 or (type(t) is not _Tensor and isinstance(t, _Tensor))


def _meta(t):
    """What the checks of a tensor argument depend on (None stays None). The
    device as its index and is_cuda: ints and bools compare without making a
    torch.device per call."""
    return None if t is None else (t.shape, t.stride(), t.dtype, t.get_device(), t.is_cuda)


# ---------------------------------------------------------------------------
# Handles and the custom ops
# ---------------------------------------------------------------------------

_live = {}
_keys = itertools.count(1)


def _handle(key):
    h = _live.get(key)
    if h is None:
        raise ValueError("symm.moe: the handle was destroyed")
    return h


def _ensure_init():
    if not _runtime.initialized():
        _runtime.init()


class _Handle:
    """A symm_moe_t: made collectively, destroyed with destroy()."""

    def __init__(self, cfg, call):
        _ensure_init()
        self._cfg = cfg
        self._c = ctypes.c_void_p()
        _call("symm_moe_create", ctypes.addressof(cfg), None, ctypes.byref(self._c))
        self.local_experts = int(_fn("symm_moe_local_experts")(self._c))
        self.first_expert = int(_fn("symm_moe_first_expert")(self._c))
        self.device = torch.device("cuda", _runtime.device())
        self._dev = self.device.index
        self._is_cuda = True  # with _dev: what a tensor's is_cuda and get_device() must say (no torch.device made)
        self._key = next(_keys)
        _live[self._key] = self
        self._call_name = call

    def _h(self):
        if self._c is None or not self._c.value:
            raise ValueError("%s: the object was destroyed" % self._call_name)
        return self._c

    def check(self):
        """Wait for the current stream, then raise the error the device
        recorded (a bad expert index, bound_m above the tokens, ...), if any."""
        _call("symm_moe_check", self._h(), _stream(self._dev))

    def set_num_sms(self, num_sms):
        """The SM budget (DeepEP's Buffer.set_num_sms): every kernel of this
        object launches at most num_sms blocks, one per SM, leaving the other
        SMs to work running beside it. 0 restores the default: every SM this
        PE may fill (symm.sm_share(), the whole GPU unless PEs share it). Per
        object and per PE; not collective; applies from the next call."""
        if not isinstance(num_sms, int) or isinstance(num_sms, bool):
            raise TypeError("%s.set_num_sms: num_sms must be an int, got %r" % (type(self).__name__, num_sms))
        _call("symm_moe_set_num_sms", self._h(), num_sms)

    def get_num_sms(self):
        """The SM budget in effect (the default resolved to its number)."""
        n = ctypes.c_int()
        _call("symm_moe_get_num_sms", self._h(), ctypes.byref(n))
        return n.value

    def launched_blocks(self):
        """For tests and tuning: wait for the current stream, then the most
        blocks any kernel of this object ran with since it was made or this
        was last called (each kernel records its own grid), and start anew."""
        n = ctypes.c_int()
        _call("symm_moe_launched_blocks", self._h(), _stream(self._dev), ctypes.byref(n))
        return n.value

    def destroy(self):
        """Release the buffers. Collective (every PE calls it); idempotent."""
        if self._c is not None and self._c.value:
            torch.cuda.current_stream().synchronize()
            _live.pop(self._key, None)
            c, self._c = self._c, None
            _call("symm_moe_destroy", c)

    def heap_bytes(self):
        """Bytes of symmetric memory the object holds on each PE."""
        return int(_fn("symm_moe_heap_bytes")(ctypes.addressof(self._cfg), _runtime.n_pes()))

    def _destroyed(self):
        raise ValueError("%s: the object was destroyed" % self._call_name)


def _flags(do_send, do_recv, call):
    f = (SEND if do_send else 0) | (RECV if do_recv else 0)
    if f == 0:
        raise ValueError("%s: do_send and do_recv cannot both be False" % call)
    return f


@torch.library.custom_op("symm::moe_dispatch",
                         mutates_args=("out_expert_num_tokens", "out_expert_x", "out_expert_x_scale"))
def _moe_dispatch(handle: int, out_expert_num_tokens: torch.Tensor, out_expert_x: torch.Tensor,
                  out_expert_x_scale: Optional[torch.Tensor], dp_x: torch.Tensor,
                  dp_x_scale: Optional[torch.Tensor], indices: torch.Tensor, bound_m: Optional[torch.Tensor],
                  do_send: bool, do_recv: bool) -> None:
    _handle(handle)._dispatch(out_expert_num_tokens, out_expert_x, out_expert_x_scale, dp_x, dp_x_scale, indices,
                              bound_m, do_send, do_recv)


@_moe_dispatch.register_fake
def _(handle, out_expert_num_tokens, out_expert_x, out_expert_x_scale, dp_x, dp_x_scale, indices, bound_m,
      do_send, do_recv):
    return None


@torch.library.custom_op("symm::moe_combine", mutates_args=("out_tokens",))
def _moe_combine(handle: int, out_tokens: torch.Tensor, indices: torch.Tensor, weights: torch.Tensor,
                 expert_y: torch.Tensor, bound_m: Optional[torch.Tensor], do_send: bool, do_recv: bool) -> None:
    _handle(handle)._combine(out_tokens, indices, weights, expert_y, bound_m, do_send, do_recv)


@_moe_combine.register_fake
def _(handle, out_tokens, indices, weights, expert_y, bound_m, do_send, do_recv):
    return None


class AllToAll(_Handle):
    """pplx-kernels' AllToAll on symm (see the module docstring).

    max_num_tokens is per DP group; ranks rank // dp_size share tokens (tensor
    parallel replicas): each token is sent once per group and its combined
    output reaches every rank of the group. Experts are split evenly, expert e
    on rank e // (num_experts // world_size).

    A call made outside torch.compile tracing goes straight to the C library:
    the checks whose inputs (shapes, strides, dtypes, devices of the
    arguments) are those of the previous call are not repeated, and one ctypes
    call enqueues the kernel, so an eager call costs a few microseconds of
    host time."""

    def __init__(self, max_num_tokens, num_experts, experts_per_token, rank, world_size, dp_size, hidden_dim,
                 hidden_dim_bytes, hidden_dim_scale_bytes):
        call = "AllToAll.intranode"
        for name, v in (("max_num_tokens", max_num_tokens), ("num_experts", num_experts),
                        ("experts_per_token", experts_per_token), ("rank", rank), ("world_size", world_size),
                        ("dp_size", dp_size), ("hidden_dim", hidden_dim), ("hidden_dim_bytes", hidden_dim_bytes),
                        ("hidden_dim_scale_bytes", hidden_dim_scale_bytes)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError("%s: %s must be an int >= 0, got %r" % (call, name, v))
        if dp_size < 1 or world_size < 1 or world_size % dp_size:
            raise ValueError("%s: world_size %d is not a multiple of dp_size %d" % (call, world_size, dp_size))
        _ensure_init()
        if world_size != _runtime.n_pes() or rank != _runtime.my_pe():
            raise ValueError("%s: rank %d of world_size %d, but symm runs this process as PE %d of %d" % (
                call, rank, world_size, _runtime.my_pe(), _runtime.n_pes()))
        cfg = Config(LOW_LATENCY, max_num_tokens, num_experts, experts_per_token, hidden_dim, hidden_dim_bytes,
                     hidden_dim_scale_bytes, dp_size, 0)
        super().__init__(cfg, call)
        self.max_num_tokens, self.num_experts, self.experts_per_token = max_num_tokens, num_experts, experts_per_token
        self.rank, self.world_size, self.dp_size, self.hidden_dim = rank, world_size, dp_size, hidden_dim
        self.num_dp = world_size // dp_size
        self._has_scales = hidden_dim_scale_bytes > 0
        self._spec = {"local_experts": self.local_experts, "hidden_dim": hidden_dim,
                      "experts_per_token": experts_per_token, "has_scales": self._has_scales,
                      "scale_cols": hidden_dim_scale_bytes // 4, "rows": max_num_tokens * self.num_dp}
        # per-call state, reused: the C argument structures and the metadata
        # of the arguments they were last checked and filled for
        self._dargs, self._cargs = DispatchArgs(), CombineArgs()
        self._daddr, self._caddr = ctypes.addressof(self._dargs), ctypes.addressof(self._cargs)
        self._dmeta = self._cmeta = None
        self._cdispatch, self._ccombine = _fn("symm_moe_dispatch"), _fn("symm_moe_combine")

    @classmethod
    def intranode(cls, max_num_tokens, num_experts, experts_per_token, rank, world_size, dp_size, hidden_dim,
                  hidden_dim_bytes, hidden_dim_scale_bytes, group_name="default"):
        """pplx's constructor (group_name is accepted and unused: symm's own
        bootstrap connects the PEs). Collective."""
        return cls(max_num_tokens, num_experts, experts_per_token, rank, world_size, dp_size, hidden_dim,
                   hidden_dim_bytes, hidden_dim_scale_bytes)

    @classmethod
    def internode(cls, max_num_tokens, num_experts, experts_per_token, rank, world_size, dp_size, hidden_dim,
                  hidden_dim_bytes, hidden_dim_scale_bytes):
        """As intranode: symm's native backend spans one node (every PE loads and
        stores the others' memory), which is what intranode needs."""
        return cls(max_num_tokens, num_experts, experts_per_token, rank, world_size, dp_size, hidden_dim,
                   hidden_dim_bytes, hidden_dim_scale_bytes)

    def dispatch(self, out_expert_num_tokens, out_expert_x, out_expert_x_scale, dp_x, dp_x_scale, indices,
                 bound_m, do_send=True, do_recv=True):
        """Send each token of dp_x to its experts; fill out_expert_num_tokens
        (int32 [local_experts]), out_expert_x ([local_experts, max_num_tokens *
        num_dp, hidden]) and, with scales, out_expert_x_scale (float32,
        [local_experts, rows, ceil(hidden / 128)])."""
        if _is_compiling() or _dispatch_modes() or (type(dp_x) is not _Tensor and isinstance(dp_x, _Tensor)):
            torch.ops.symm.moe_dispatch(self._key, out_expert_num_tokens, out_expert_x, out_expert_x_scale, dp_x,
                                        dp_x_scale, indices, bound_m, bool(do_send), bool(do_recv))
        else:
            self._dispatch(out_expert_num_tokens, out_expert_x, out_expert_x_scale, dp_x, dp_x_scale, indices,
                           bound_m, do_send, do_recv)

    def routes(self):
        """Where the last dispatch's rows came from (symm_moe_ll_routes): an int64
        tensor [local_experts, max_num_tokens * num_dp] on this PE's GPU, a view
        of the object's own memory rewritten by the next dispatch. Entry [l, r]
        for r < out_expert_num_tokens[l]: bits 0-15 the source rank, 16-31 the
        top-k slot, 32-62 the token's index in its DP group's batch."""
        ptr, rows = ctypes.c_void_p(), ctypes.c_size_t()
        _call("symm_moe_ll_routes", self._h(), ctypes.byref(ptr), ctypes.byref(rows))
        from .._tensor import _wrap
        n = self.local_experts * rows.value
        return _wrap(torch, ptr.value, n * 8, self.device, torch.int64, (self.local_experts, rows.value))

    def combine(self, out_tokens, indices, weights, expert_y, bound_m, do_send=True, do_recv=True):
        """out_tokens[t] = sum_k weights[t, k] * expert_y[row of (t, k)], for t
        below bound_m (or indices.size(0)), in float32, stored as bf16/f16."""
        if (_is_compiling() or _dispatch_modes() or
                (type(out_tokens) is not _Tensor and isinstance(out_tokens, _Tensor))):
            torch.ops.symm.moe_combine(self._key, out_tokens, indices, weights, expert_y, bound_m, bool(do_send),
                                       bool(do_recv))
        else:
            self._combine(out_tokens, indices, weights, expert_y, bound_m, do_send, do_recv)

    def _dispatch(self, out_expert_num_tokens, out_expert_x, out_expert_x_scale, dp_x, dp_x_scale, indices,
                  bound_m, do_send, do_recv):
        c = self._c
        if c is None:
            self._destroyed()
        flags = (SEND if do_send else 0) | (RECV if do_recv else 0)
        if flags == 0:
            raise ValueError("AllToAll.dispatch: do_send and do_recv cannot both be False")
        try:
            # one flat tuple, the optional tensors' part only when one is given
            meta = (out_expert_num_tokens.shape, out_expert_num_tokens.is_contiguous(), out_expert_num_tokens.dtype,
                    out_expert_num_tokens.get_device(), out_expert_num_tokens.is_cuda, out_expert_x.shape,
                    out_expert_x.stride(), out_expert_x.dtype, out_expert_x.get_device(), out_expert_x.is_cuda,
                    dp_x.shape, dp_x.stride(), dp_x.dtype, dp_x.get_device(), dp_x.is_cuda, indices.shape,
                    indices.is_contiguous(), indices.dtype, indices.get_device(), indices.is_cuda)
            if out_expert_x_scale is not None or dp_x_scale is not None or bound_m is not None:
                meta += (_meta(out_expert_x_scale), _meta(dp_x_scale), _meta(bound_m))
        except (AttributeError, TypeError):
            meta = None  # not tensors: the checks below say what is wrong
        a = self._dargs
        if meta is None or meta != self._dmeta:
            self._dmeta = None
            checked = check_dispatch(self._spec, out_expert_num_tokens, out_expert_x, out_expert_x_scale, dp_x,
                                     dp_x_scale, indices, bound_m, self.device)
            a.out_expert_x_stride[0], a.out_expert_x_stride[1] = out_expert_x.stride(0), out_expert_x.stride(1)
            a.out_expert_rows = out_expert_x.size(1)
            if self._has_scales:
                for i in range(3):
                    a.out_expert_x_scale_stride[i] = out_expert_x_scale.stride(i)
                a.dp_x_scale_stride[0], a.dp_x_scale_stride[1] = dp_x_scale.stride(0), dp_x_scale.stride(1)
            a.dp_x_stride = dp_x.stride(0)
            a.num_tokens = dp_x.size(0)
            a.x_dtype = _dtype_code(dp_x)
            self._dmeta = meta
            indices = checked
        elif indices.dtype is _I64:
            indices = indices.to(torch.int32)
        a.out_expert_num_tokens = out_expert_num_tokens.data_ptr()
        a.out_expert_x = out_expert_x.data_ptr()
        if self._has_scales:
            a.out_expert_x_scale = out_expert_x_scale.data_ptr()
            a.dp_x_scale = dp_x_scale.data_ptr()
        a.dp_x = dp_x.data_ptr()
        a.indices = indices.data_ptr()
        a.bound_m = None if bound_m is None else bound_m.data_ptr()
        st = self._cdispatch(c, self._daddr, flags, _stream(self._dev))
        if st:
            _runtime._check("symm_moe_dispatch", st)

    def _combine(self, out_tokens, indices, weights, expert_y, bound_m, do_send, do_recv):
        c = self._c
        if c is None:
            self._destroyed()
        flags = (SEND if do_send else 0) | (RECV if do_recv else 0)
        if flags == 0:
            raise ValueError("AllToAll.combine: do_send and do_recv cannot both be False")
        try:
            meta = (out_tokens.shape, out_tokens.stride(), out_tokens.dtype, out_tokens.get_device(),
                    out_tokens.is_cuda, indices.shape, indices.is_contiguous(), indices.dtype, indices.get_device(),
                    indices.is_cuda, weights.shape, weights.is_contiguous(), weights.dtype, weights.get_device(),
                    weights.is_cuda, expert_y.shape, expert_y.stride(), expert_y.dtype, expert_y.get_device(),
                    expert_y.is_cuda)
            if bound_m is not None:
                meta += (_meta(bound_m),)
        except (AttributeError, TypeError):
            meta = None
        a = self._cargs
        if meta is None or meta != self._cmeta:
            self._cmeta = None
            checked = check_combine(self._spec, out_tokens, indices, weights, expert_y, bound_m, self.device)
            a.out_stride = out_tokens.stride(0)
            a.out_rows = out_tokens.size(0)
            a.out_dtype = _dtype_code(out_tokens)
            a.num_tokens = checked.size(0)
            a.expert_y_stride[0], a.expert_y_stride[1] = expert_y.stride(0), expert_y.stride(1)
            a.expert_y_rows = expert_y.size(1)
            a.y_dtype = _dtype_code(expert_y)
            self._cmeta = meta
            indices = checked
        elif indices.dtype is _I64:
            indices = indices.to(torch.int32)
        a.out_tokens = out_tokens.data_ptr()
        a.indices = indices.data_ptr()
        a.weights = weights.data_ptr()
        a.expert_y = expert_y.data_ptr()
        a.bound_m = None if bound_m is None else bound_m.data_ptr()
        st = self._ccombine(c, self._caddr, flags, _stream(self._dev))
        if st:
            _runtime._check("symm_moe_combine", st)


# ---------------------------------------------------------------------------
# pplx-kernels' NVSHMEM entry points (pplx_kernels.nvshmem)
# ---------------------------------------------------------------------------

def _uid_bytes(uid):
    n = _lib.SYMM_UNIQUE_ID_BYTES
    if isinstance(uid, torch.Tensor):
        if uid.dtype != torch.uint8 or uid.numel() != n:
            raise TypeError("nvshmem_init: a uid tensor must be %d uint8 values (from nvshmem_get_unique_id), "
                            "got %s %s" % (n, uid.dtype, tuple(uid.shape)))
        return bytes(uid.detach().cpu().contiguous().numpy().tobytes())
    if isinstance(uid, (bytes, bytearray)) and len(uid) == n:
        return bytes(uid)
    raise TypeError("nvshmem_init: uid must be the %d bytes (or uint8 tensor) of nvshmem_get_unique_id(), got %r"
                    % (n, type(uid).__name__))


def _device_index(device, call):
    """The CUDA ordinal `device` names (an int, 'cuda:N', torch.device), or None."""
    if device is None:
        return None
    if isinstance(device, bool):
        raise TypeError("%s: device must be an int, a string or a torch.device, got %r" % (call, device))
    if isinstance(device, int):
        idx = device
    else:
        try:
            d = torch.device(device)
        except (TypeError, RuntimeError) as e:
            raise TypeError("%s: device %r is not a device (%s)" % (call, device, e)) from None
        if d.type != "cuda":
            raise ValueError("%s: device %s is not a CUDA device" % (call, d))
        idx = d.index if d.index is not None else (torch.cuda.current_device() if torch.cuda.is_available() else 0)
    if idx < 0:
        raise ValueError("%s: device %d is negative" % (call, idx))
    return idx


def _check_rank_args(call, global_rank, local_rank, world_size):
    for name, v in (("global_rank", global_rank), ("local_rank", local_rank), ("world_size", world_size)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
            raise TypeError("%s: %s must be an int, got %r" % (call, name, v))
    if world_size is not None and world_size < 1:
        raise ValueError("%s: world_size %d is below 1" % (call, world_size))
    if global_rank is not None and (global_rank < 0 or (world_size is not None and global_rank >= world_size)):
        raise ValueError("%s: global_rank %d is outside [0, world_size %s)" % (call, global_rank, world_size))
    if local_rank is not None and local_rank < 0:
        raise ValueError("%s: local_rank %d is negative" % (call, local_rank))


def _check_running(call, global_rank, world_size, want_dev):
    """symm runs: does it agree with the caller's view? Nothing is changed."""
    if global_rank is not None and global_rank != _runtime.my_pe():
        raise ValueError("%s: global_rank %d, but symm runs this process as PE %d"
                         % (call, global_rank, _runtime.my_pe()))
    if world_size is not None and world_size != _runtime.n_pes():
        raise ValueError("%s: world_size %d, but symm has %d PEs" % (call, world_size, _runtime.n_pes()))
    dev = _runtime.device()
    if want_dev is not None and dev >= 0 and dev != want_dev:
        raise ValueError("%s: device %d was asked for, but symm runs this PE on GPU %d (PE i of a node takes "
                         "GPU i %% device_count)" % (call, want_dev, dev))


def nvshmem_init(global_rank=None, local_rank=None, world_size=None, device=None, uid=None):
    """pplx_kernels.nvshmem_init's place: start symm for pplx-kernels' code.

    nvshmem_init(global_rank, local_rank, world_size, device)
        pplx's form: over the running torch.distributed group (its rank 0
        makes symm's unique id and broadcasts it; every rank joins with its
        group rank), so processes started by torch.multiprocessing with an
        explicit init_process_group need no launcher variables. Without a
        torch.distributed group, symm starts from the launcher's environment
        (torchrun, symmrun, mpirun, srun) or, for world_size 1, alone.
    nvshmem_init(uid, rank, world_size)
        pplx's older form: uid from nvshmem_get_unique_id() on rank 0
        (nvshmem_alloc_empty_unique_id() elsewhere), broadcast by the caller.

    The arguments are checked before anything starts and against what symm
    runs afterwards (rank, size, GPU). When symm is already running, it only
    checks them. Collective."""
    call = "nvshmem_init"
    if isinstance(global_rank, (torch.Tensor, bytes, bytearray)):  # (uid, rank, world_size)
        if uid is not None or device is not None:
            raise TypeError("%s: the (uid, rank, world_size) form takes no uid= or device=" % call)
        uid, global_rank, local_rank = global_rank, local_rank, None
    _check_rank_args(call, global_rank, local_rank, world_size)
    want_dev = _device_index(device, call)
    if want_dev is None and local_rank is not None and torch.cuda.is_available() and torch.cuda.device_count():
        want_dev = local_rank % torch.cuda.device_count()
    if _runtime.initialized():
        _check_running(call, global_rank, world_size, want_dev)
        return
    if uid is not None:
        if global_rank is None or world_size is None:
            raise ValueError("%s: with a uid, global_rank and world_size must be given" % call)
        _runtime._init_uid(_uid_bytes(uid), global_rank, world_size)
    else:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            rank, world = dist.get_rank(), dist.get_world_size()
            if global_rank is not None and global_rank != rank:
                raise ValueError("%s: global_rank %d, but this process is rank %d of the torch.distributed "
                                 "group" % (call, global_rank, rank))
            if world_size is not None and world_size != world:
                raise ValueError("%s: world_size %d, but the torch.distributed group has %d ranks"
                                 % (call, world_size, world))
            _runtime._init_group(dist.group.WORLD)
        else:
            _runtime.init()
            if world_size is not None and world_size != _runtime.n_pes():
                n = _runtime.n_pes()
                _runtime.finalize()
                raise RuntimeError("%s: world_size %d, but without torch.distributed or launcher variables "
                                   "(RANK/WORLD_SIZE, ...) symm found %d PE(s): call "
                                   "torch.distributed.init_process_group() first, start the processes with "
                                   "torchrun / symmrun, or pass a uid" % (call, world_size, n))
    torch_dev = _runtime.device()
    if torch_dev >= 0 and torch.cuda.is_available():
        torch.cuda.set_device(torch_dev)
    try:
        _check_running(call, global_rank, world_size, want_dev)
    except ValueError:
        _runtime.finalize()
        raise


def nvshmem_get_unique_id():
    """pplx's nvshmem_get_unique_id: on the future rank 0 only; a uint8 CPU
    tensor to broadcast (torch.distributed.broadcast) and pass to nvshmem_init."""
    b = _runtime.get_unique_id()
    return torch.frombuffer(bytearray(b), dtype=torch.uint8).clone()


def nvshmem_alloc_empty_unique_id():
    """pplx's nvshmem_alloc_empty_unique_id: the zeroed tensor the other ranks
    receive the id into."""
    return torch.zeros(_lib.SYMM_UNIQUE_ID_BYTES, dtype=torch.uint8)


def nvshmem_finalize():
    """pplx's nvshmem_finalize: stop symm (collective); nothing when it is not running."""
    if _runtime.initialized():
        _runtime.finalize()


def nvshmem_my_pe():
    return _runtime.my_pe()


def nvshmem_n_pes():
    return _runtime.n_pes()


def nvshmem_barrier_all():
    _runtime.barrier()


def nvshmem_barrier_all_on_current_stream():
    _runtime.barrier_on_stream()


# ---------------------------------------------------------------------------
# High-throughput mode
# ---------------------------------------------------------------------------

@torch.library.custom_op("symm::moe_ht_dispatch",
                         mutates_args=("recv_x", "recv_x_scale", "recv_indices", "recv_weights", "recv_src",
                                       "num_recv", "num_recv_per_expert"))
def _moe_ht_dispatch(handle: int, recv_x: torch.Tensor, recv_x_scale: Optional[torch.Tensor],
                     recv_indices: torch.Tensor, recv_weights: torch.Tensor, recv_src: torch.Tensor,
                     num_recv: torch.Tensor, num_recv_per_expert: torch.Tensor, x: torch.Tensor,
                     x_scale: Optional[torch.Tensor], topk_idx: torch.Tensor, topk_weights: Optional[torch.Tensor],
                     do_send: bool, do_recv: bool) -> None:
    _handle(handle)._dispatch(x, x_scale, topk_idx, topk_weights, do_send, do_recv, recv_x, recv_x_scale)


@_moe_ht_dispatch.register_fake
def _(handle, recv_x, recv_x_scale, recv_indices, recv_weights, recv_src, num_recv, num_recv_per_expert, x,
      x_scale, topk_idx, topk_weights, do_send, do_recv):
    return None


@torch.library.custom_op("symm::moe_ht_combine", mutates_args=("out", "out_weights"))
def _moe_ht_combine(handle: int, out: torch.Tensor, y: torch.Tensor, do_send: bool, do_recv: bool,
                    weights: Optional[torch.Tensor], out_weights: Optional[torch.Tensor]) -> None:
    _handle(handle)._combine(out, y, do_send, do_recv, weights, out_weights)


@_moe_ht_combine.register_fake
def _(handle, out, y, do_send, do_recv, weights, out_weights):
    return None


@torch.library.custom_op("symm::moe_ht_layout",
                         mutates_args=("num_tokens_per_rank", "num_tokens_per_expert", "is_token_in_rank"))
def _moe_ht_layout(handle: int, topk_idx: torch.Tensor, num_tokens_per_rank: torch.Tensor,
                   num_tokens_per_expert: torch.Tensor, is_token_in_rank: torch.Tensor) -> None:
    _handle(handle)._layout(topk_idx, num_tokens_per_rank, num_tokens_per_expert, is_token_in_rank)


@_moe_ht_layout.register_fake
def _(handle, topk_idx, num_tokens_per_rank, num_tokens_per_expert, is_token_in_rank):
    return None


def _ht_indices(topk_idx, call, k, device):
    """The indices as the kernels read them (a slice such as argsort(...)[:, :k]
    is copied to a dense tensor on the current stream) and their dtype code."""
    _tensor(topk_idx, "topk_idx", call, 2, (torch.int64, torch.int32, torch.uint32), device, last_contiguous=False)
    _shape(topk_idx, "topk_idx", call, (None, k))
    return topk_idx.contiguous(), _DTYPE_CODES[str(topk_idx.dtype).replace("torch.", "")]


class HighThroughput(_Handle):
    """Dispatch and combine for prefill-sized batches (DeepEP's normal mode,
    on one node). Each PE sends up to max_num_tokens tokens; a token goes
    once to each PE holding one of its experts, arriving with its top-k
    indices mapped to that PE's local experts (-1 for the others), its
    weights and its origin; rows arrive ordered by source PE, then token.

    dispatch() returns views of the object's receive buffers (rewritten by
    the next dispatch), sized for the most a PE can receive (max_recv_tokens,
    default max_num_tokens * world size): rows [0, num_recv) hold data, with
    num_recv a device tensor (no host synchronisation). combine(y) sums, per
    token, the rows y[i] the PEs return for the tokens they received."""

    def __init__(self, num_experts, experts_per_token, hidden_dim, max_num_tokens, x_dtype=torch.bfloat16,
                 scales=False, max_recv_tokens=0):
        call = "HighThroughput"
        if x_dtype not in _X_DTYPES:
            raise TypeError("%s: x_dtype %s is not one of %s" % (call, x_dtype, ", ".join(map(str, _X_DTYPES))))
        itemsize = torch.empty((), dtype=x_dtype).element_size()
        scale_bytes = 4 * ((hidden_dim + SCALE_BLOCK - 1) // SCALE_BLOCK) if scales else 0
        cfg = Config(HIGH_THROUGHPUT, max_num_tokens, num_experts, experts_per_token, hidden_dim,
                     hidden_dim * itemsize, scale_bytes, 1, max_recv_tokens)
        super().__init__(cfg, call)
        self.num_experts, self.experts_per_token, self.hidden_dim = num_experts, experts_per_token, hidden_dim
        self.max_num_tokens, self.x_dtype, self.has_scales = max_num_tokens, x_dtype, bool(scales)
        self._x_code = _DTYPE_CODES.get(str(x_dtype).replace("torch.", ""), -1)
        self.world_size = _runtime.n_pes()
        self._num_tokens = 0
        r = HtRecv()
        _call("symm_moe_ht_recv_buffers", self._h(), ctypes.addressof(r))
        from .._tensor import _wrap
        cap, k, L = int(r.capacity), experts_per_token, self.local_experts
        self.capacity = cap

        def view(ptr, dtype, shape):
            n = 1
            for d in shape:
                n *= d
            return _wrap(torch, ptr, n * torch.empty((), dtype=dtype).element_size(), self.device, dtype, shape)
        self._recv_x = view(r.x, x_dtype, (cap, hidden_dim))
        self._recv_scale = view(r.x_scale, torch.float32, (cap, int(r.scale_cols))) if scales else None
        self._recv_idx = view(r.indices, torch.int32, (cap, k))
        self._recv_w = view(r.weights, torch.float32, (cap, k))
        self._wargs = HtWeights()  # the argument block of _combine_checked's weights, refilled per call
        self._wargs_at = ctypes.addressof(self._wargs)
        self._rcargs = HtRecvCopy()  # recv_copy's argument block, refilled per call
        self._rcargs_at = ctypes.addressof(self._rcargs)
        self._recv_src = view(r.src, torch.int32, (cap, 2))
        self._num_recv = view(r.num_recv, torch.int32, (1,))
        self._num_recv_per_expert = view(r.num_recv_per_expert, torch.int32, (L,))

    def get_dispatch_layout(self, topk_idx):
        """(num_tokens_per_rank int32 [world], num_tokens_per_expert int32
        [num_experts], is_token_in_rank bool [tokens, world]) of a batch, on
        the current stream (local; no communication). -1 entries are skipped."""
        m = topk_idx.size(0) if isinstance(topk_idx, torch.Tensor) else 0
        per_rank = torch.empty(self.world_size, dtype=torch.int32, device=self.device)
        per_expert = torch.empty(self.num_experts, dtype=torch.int32, device=self.device)
        in_rank = torch.empty((m, self.world_size), dtype=torch.bool, device=self.device)
        if _traced(topk_idx):
            torch.ops.symm.moe_ht_layout(self._key, topk_idx, per_rank, per_expert, in_rank)
        else:
            self._layout(topk_idx, per_rank, per_expert, in_rank)
        return per_rank, per_expert, in_rank

    def _layout(self, topk_idx, per_rank, per_expert, in_rank):
        call = "HighThroughput.get_dispatch_layout"
        topk_idx, code = _ht_indices(topk_idx, call, self.experts_per_token, self.device)
        _call("symm_moe_ht_layout", self._h(), topk_idx.data_ptr(), code, topk_idx.size(0), per_rank.data_ptr(),
              per_expert.data_ptr(), in_rank.data_ptr(), _stream(self._dev))

    def recv_copy(self, rows, src_token=None, topk_idx=None, topk_weights=None, counts=None):
        """The last dispatch's received sources, top-k indices and weights copied
        into tensors of the caller's (the next dispatch rewrites the object's),
        in one kernel on the current stream (symm_moe_ht_recv_copy): rows 0 ..
        rows - 1 of src_token (int32 [>= rows]: the token index on its source),
        topk_idx (int32 or int64 [>= rows, top-k], contiguous: the local experts,
        -1 elsewhere), topk_weights (float32, likewise: 0 where the index is
        -1); rows at or past num_recv get -1, -1 and 0. counts: int32 [>= 1 +
        local experts], num_recv then the tokens per local expert. Any may be None."""
        call = "HighThroughput.recv_copy"
        self._h()
        if not isinstance(rows, int) or isinstance(rows, bool) or rows < 0:
            raise TypeError("%s: rows must be an int >= 0, got %r" % (call, rows))
        k = self.experts_per_token
        if src_token is not None:
            _tensor(src_token, "src_token", call, 1, (torch.int32,), self.device, contiguous=True)
            _shape(src_token, "src_token", call, (None,))
            if src_token.size(0) < rows:
                raise ValueError("%s: src_token has %d rows, below rows %d" % (call, src_token.size(0), rows))
        for name, t, dtypes in (("topk_idx", topk_idx, (torch.int32, torch.int64)),
                                ("topk_weights", topk_weights, (torch.float32,))):
            if t is not None:
                _tensor(t, name, call, 2, dtypes, self.device, contiguous=True)
                _shape(t, name, call, (None, k))
                if t.size(0) < rows:
                    raise ValueError("%s: %s has %d rows, below rows %d" % (call, name, t.size(0), rows))
        if counts is not None:
            _tensor(counts, "counts", call, 1, (torch.int32,), self.device, contiguous=True)
            if counts.size(0) < 1 + self.local_experts:
                raise ValueError("%s: counts has %d entries, below 1 + %d local experts" % (
                    call, counts.size(0), self.local_experts))
        self._recv_copy(rows, src_token, topk_idx, topk_weights, counts)

    def _recv_copy(self, rows, src_token, topk_idx, topk_weights, counts):
        """recv_copy without the Python checks (the caller's own tensors; the C call checks rows and dtypes)."""
        a = self._rcargs
        a.rows = rows
        a.src_token = None if src_token is None else src_token.data_ptr()
        a.indices = None if topk_idx is None else topk_idx.data_ptr()
        a.indices_dtype = _DTYPE_CODES["int64" if topk_idx is not None and topk_idx.dtype is _I64 else "int32"]
        a.weights = None if topk_weights is None else topk_weights.data_ptr()
        a.counts = None if counts is None else counts.data_ptr()
        _call("symm_moe_ht_recv_copy", self._h(), self._rcargs_at, _stream(self._dev))

    def dispatch(self, x, topk_idx, topk_weights=None, x_scale=None, do_send=True, do_recv=True, recv_x=None,
                 recv_x_scale=None):
        """Returns (recv_x, recv_x_scale or None, recv_topk_idx, recv_topk_weights,
        recv_src, num_recv, num_recv_per_expert): views of the receive buffers.
        recv_x / recv_x_scale: the caller's receive buffers for x and its
        scales instead of the object's (symm_moe_ht_dispatch_into): symmetric
        tensors (symm.tensor) of [>= capacity, hidden] x_dtype and [>=
        capacity, scale columns] float32, row-contiguous; the peers store the
        rows straight into them, and they are what comes back."""
        self._h()
        rx = self._recv_x if recv_x is None else recv_x
        rs = self._recv_scale if recv_x_scale is None else recv_x_scale
        if _traced(x):
            torch.ops.symm.moe_ht_dispatch(self._key, rx, rs, self._recv_idx, self._recv_w,
                                           self._recv_src, self._num_recv, self._num_recv_per_expert, x, x_scale,
                                           topk_idx, topk_weights, bool(do_send), bool(do_recv))
        else:
            self._dispatch(x, x_scale, topk_idx, topk_weights, do_send, do_recv, rx, rs)
        return (rx, rs, self._recv_idx, self._recv_w, self._recv_src, self._num_recv, self._num_recv_per_expert)

    def _into(self, recv_x, recv_x_scale, call):
        """The C pointers of the caller's receive buffers (None: the object's), checked."""
        px = ps = None
        if recv_x is not None and recv_x.data_ptr() != self._recv_x.data_ptr():
            _tensor(recv_x, "recv_x", call, 2, (self.x_dtype,), self.device)
            _shape(recv_x, "recv_x", call, (None, self.hidden_dim))
            if recv_x.size(0) < self.capacity or recv_x.stride(0) != self.hidden_dim:
                raise ValueError("%s: recv_x has shape %s, strides %s; expected at least (%d, %d), rows contiguous "
                                 "(the receive capacity)" % (call, tuple(recv_x.shape), recv_x.stride(),
                                                             self.capacity, self.hidden_dim))
            px = recv_x.data_ptr()
        if recv_x_scale is not None and (self._recv_scale is None or
                                         recv_x_scale.data_ptr() != self._recv_scale.data_ptr()):
            if not self.has_scales:
                raise ValueError("%s: the object was made without scales: recv_x_scale must be None" % call)
            cols = self._recv_scale.size(1)
            _tensor(recv_x_scale, "recv_x_scale", call, 2, (torch.float32,), self.device)
            _shape(recv_x_scale, "recv_x_scale", call, (None, cols))
            if recv_x_scale.size(0) < self.capacity or recv_x_scale.stride(0) != cols:
                raise ValueError("%s: recv_x_scale has shape %s, strides %s; expected at least (%d, %d), rows "
                                 "contiguous (the receive capacity)" % (call, tuple(recv_x_scale.shape),
                                                                        recv_x_scale.stride(), self.capacity, cols))
            ps = recv_x_scale.data_ptr()
        return px, ps

    def _dispatch(self, x, x_scale, topk_idx, topk_weights, do_send, do_recv, recv_x=None, recv_x_scale=None):
        call = "HighThroughput.dispatch"
        flags = _flags(do_send, do_recv, call)
        px, ps = self._into(recv_x, recv_x_scale, call)
        _tensor(x, "x", call, 2, (self.x_dtype,), self.device)
        _shape(x, "x", call, (None, self.hidden_dim))
        m = x.size(0)
        topk_idx, code = _ht_indices(topk_idx, call, self.experts_per_token, self.device)
        _shape(topk_idx, "topk_idx", call, (m, None))
        a = HtDispatchArgs()
        if self.has_scales:
            if x_scale is None:
                raise ValueError("%s: the object was made with scales: x_scale must be given" % call)
            _tensor(x_scale, "x_scale", call, 2, (torch.float32,), self.device, last_contiguous=False)
            _shape(x_scale, "x_scale", call, (m, (self.hidden_dim + SCALE_BLOCK - 1) // SCALE_BLOCK))
            a.x_scale = x_scale.data_ptr()
            a.x_scale_stride[0], a.x_scale_stride[1] = x_scale.stride(0), x_scale.stride(1)
        elif x_scale is not None:
            raise ValueError("%s: the object was made without scales: x_scale must be None" % call)
        if topk_weights is not None:
            _tensor(topk_weights, "topk_weights", call, 2, (torch.float32,), self.device, last_contiguous=False)
            _shape(topk_weights, "topk_weights", call, (m, self.experts_per_token))
            topk_weights = topk_weights.contiguous()  # (a copy only for a strided view)
            a.weights = topk_weights.data_ptr()
        a.x = x.data_ptr()
        a.x_stride = x.stride(0)
        a.x_dtype = _dtype_code(x)
        a.indices = topk_idx.data_ptr()
        a.indices_dtype = code
        a.num_tokens = m
        if px is None and ps is None:
            _call("symm_moe_ht_dispatch", self._h(), ctypes.addressof(a), flags, _stream(self._dev))
        else:
            _call("symm_moe_ht_dispatch_into", self._h(), ctypes.addressof(a), px, ps, flags, _stream(self._dev))
        if flags & SEND:
            self._num_tokens = m

    def _prepare(self, topk_idx, topk_weights=None):
        """The argument block of dispatches that repeat one routing (symm.moe.deep_ep's
        cached dispatch), checked once; _dispatch_prepared fills in x."""
        call = "HighThroughput.dispatch"
        topk_idx, code = _ht_indices(topk_idx, call, self.experts_per_token, self.device)
        a = HtDispatchArgs()
        if topk_weights is not None:
            _tensor(topk_weights, "topk_weights", call, 2, (torch.float32,), self.device, contiguous=True)
            _shape(topk_weights, "topk_weights", call, (topk_idx.size(0), self.experts_per_token))
            a.weights = topk_weights.data_ptr()
        a.indices = topk_idx.data_ptr()
        a.indices_dtype = code
        a.num_tokens = topk_idx.size(0)
        return (a, ctypes.addressof(a), topk_idx, topk_weights, _fn("symm_moe_ht_dispatch"),
                _fn("symm_moe_ht_dispatch_into"), (a.num_tokens, (self.hidden_dim + SCALE_BLOCK - 1) // SCALE_BLOCK))

    def _dispatch_prepared(self, prep, x, x_scale=None, recv_x=None, recv_x_scale=None, checked=False):
        """Both halves of a dispatch of prep's routing: x (and x_scale) checked
        against it here (unless `checked`: the caller compared them with ones
        that passed these checks), the rest by the C library; recv_x /
        recv_x_scale as for dispatch (symmetric tensors; their bounds are the
        caller's to check) or None."""
        call = "HighThroughput.dispatch"
        a = prep[0]
        if not checked:
            # the device as its index (-1 on the CPU): x.device makes a torch.device per call
            if type(x) is not _Tensor or x.dtype != self.x_dtype or x.dim() != 2 or x.size(0) != a.num_tokens or \
                    x.size(1) != self.hidden_dim or x.get_device() != self._dev or x.is_cuda != self._is_cuda or \
                    x.stride(1) != 1:
                raise ValueError("%s: x must be %s [%d, %d] on %s, rows contiguous; got %s %s" % (
                    call, self.x_dtype, a.num_tokens, self.hidden_dim, self.device, getattr(x, "dtype", type(x)),
                    tuple(getattr(x, "shape", ()))))
            if (x_scale is None) == self.has_scales:
                raise ValueError("%s: the object was made %s scales: x_scale must %s" % (
                    call, "with" if self.has_scales else "without", "be given" if self.has_scales else "be None"))
            if x_scale is not None and (
                    type(x_scale) is not _Tensor or x_scale.dtype != torch.float32 or x_scale.shape != prep[6] or
                    x_scale.get_device() != self._dev or x_scale.is_cuda != self._is_cuda):
                _tensor(x_scale, "x_scale", call, 2, (torch.float32,), self.device, last_contiguous=False)
                _shape(x_scale, "x_scale", call, prep[6])
        a.x = x.data_ptr()
        a.x_stride = x.stride(0)
        a.x_dtype = self._x_code
        if x_scale is not None:
            a.x_scale = x_scale.data_ptr()
            a.x_scale_stride[0], a.x_scale_stride[1] = x_scale.stride(0), x_scale.stride(1)
        if recv_x is None and recv_x_scale is None:
            _runtime._check("symm_moe_ht_dispatch", prep[4](self._h(), prep[1], SEND | RECV, _stream(self._dev)))
        else:
            _runtime._check("symm_moe_ht_dispatch_into", prep[5](self._h(), prep[1], _ptr(recv_x),
                                                                 _ptr(recv_x_scale), SEND | RECV,
                                                                 _stream(self._dev)))
        self._num_tokens = a.num_tokens
        return (self._recv_x if recv_x is None else recv_x, self._recv_scale if recv_x_scale is None else recv_x_scale,
                self._recv_idx, self._recv_w, self._recv_src, self._num_recv, self._num_recv_per_expert)

    def combine(self, y, out=None, out_dtype=torch.bfloat16, do_send=True, do_recv=True, weights=None,
                out_weights=None):
        """out[t] (a new [tokens, hidden] tensor unless given) = the sum of the
        rows y[i] the PEs return for token t of the last dispatch. With
        weights (float32 [rows of y, cols], cols <= experts_per_token, e.g.
        dispatch's recv_topk_weights): row i's values go back with y[i], and
        out_weights[t] (float32 [tokens, cols], new unless given) = the sum of
        the values the PEs return for t, PE by PE in PE order (DeepEP's
        combined_topk_weights); returns (out, out_weights) then."""
        self._h()
        if out is None:
            out = torch.empty((self._num_tokens, self.hidden_dim), dtype=out_dtype, device=self.device)
        if weights is not None and out_weights is None:
            cols = weights.size(1) if isinstance(weights, torch.Tensor) and weights.dim() == 2 else 0
            out_weights = torch.empty((self._num_tokens, cols), dtype=torch.float32, device=self.device)
        if _traced(y):
            torch.ops.symm.moe_ht_combine(self._key, out, y, bool(do_send), bool(do_recv), weights, out_weights)
        else:
            self._combine(out, y, do_send, do_recv, weights, out_weights)
        return out if weights is None else (out, out_weights)

    def _combine_checked(self, y, out, weights=None, out_weights=None):
        """combine(y, out=out, weights=, out_weights=) of tensors the caller
        checked as _combine does (symm.moe.deep_ep: against its handle's
        shapes; weights and out_weights contiguous float32 on this device, or
        both None): the C call alone, its own checks included; through
        combine() where that would take the custom op."""
        if _is_compiling() or _dispatch_modes() != 0:
            return self.combine(y, out=out, weights=weights, out_weights=out_weights)
        if weights is None:
            _runtime._check("symm_moe_ht_combine", _fn("symm_moe_ht_combine")(
                self._h(), y.data_ptr(), _dtype_code(y), y.stride(0), y.size(0), out.data_ptr(), _dtype_code(out),
                out.stride(0), out.size(0), SEND | RECV, _stream(self._dev)))
            return out
        w = self._wargs
        w.w, w.w_stride, w.w_rows = weights.data_ptr(), weights.stride(0), weights.size(0)
        w.out_w, w.out_w_stride, w.out_w_rows = out_weights.data_ptr(), out_weights.stride(0), out_weights.size(0)
        w.cols = weights.size(1)
        _runtime._check("symm_moe_ht_combine_weights", _fn("symm_moe_ht_combine_weights")(
            self._h(), y.data_ptr(), _dtype_code(y), y.stride(0), y.size(0), out.data_ptr(), _dtype_code(out),
            out.stride(0), out.size(0), self._wargs_at, SEND | RECV, _stream(self._dev)))
        return out, out_weights

    def _combine(self, out, y, do_send, do_recv, weights=None, out_weights=None):
        call = "HighThroughput.combine"
        flags = _flags(do_send, do_recv, call)
        if not self._combine_ok(y):
            _tensor(y, "y", call, 2, _OUT_DTYPES, self.device)
            _shape(y, "y", call, (None, self.hidden_dim))
        if not self._combine_ok(out):
            _tensor(out, "out", call, 2, _OUT_DTYPES, self.device)
            _shape(out, "out", call, (None, self.hidden_dim))
        if weights is None and out_weights is None:
            _runtime._check("symm_moe_ht_combine", _fn("symm_moe_ht_combine")(
                self._h(), y.data_ptr(), _dtype_code(y), y.stride(0), y.size(0), out.data_ptr(), _dtype_code(out),
                out.stride(0), out.size(0), flags, _stream(self._dev)))
            return
        if weights is None or out_weights is None:
            raise ValueError("%s: weights and out_weights go together (out_weights is made when only weights is "
                             "given)" % call)
        _tensor(weights, "weights", call, 2, (torch.float32,), self.device)
        cols = weights.size(1)
        if cols > self.experts_per_token:
            raise ValueError("%s: weights has %d columns, above experts_per_token %d" % (
                call, cols, self.experts_per_token))
        _tensor(out_weights, "out_weights", call, 2, (torch.float32,), self.device)
        _shape(out_weights, "out_weights", call, (None, cols))
        # a stride of one row or none says nothing: what C checks is then the plain layout's
        w = HtWeights(weights.data_ptr(), weights.stride(0) if weights.size(0) > 1 else cols, weights.size(0),
                      out_weights.data_ptr(), out_weights.stride(0) if out_weights.size(0) > 1 else cols,
                      out_weights.size(0), cols)
        _runtime._check("symm_moe_ht_combine_weights", _fn("symm_moe_ht_combine_weights")(
            self._h(), y.data_ptr(), _dtype_code(y), y.stride(0), y.size(0), out.data_ptr(), _dtype_code(out),
            out.stride(0), out.size(0), ctypes.addressof(w), flags, _stream(self._dev)))

    def _combine_ok(self, t):
        """What _tensor and _shape check of y and out, in one expression (they
        raise the message when it fails)."""
        return type(t) is _Tensor and t.dim() == 2 and t.dtype in _OUT_DTYPES and t.size(1) == self.hidden_dim and \
            t.get_device() == self._dev and t.is_cuda == self._is_cuda and (t.stride(1) == 1 or t.size(1) <= 1 or
                                                                             t.numel() == 0)


__all__: List[str] = ["AllToAll", "HighThroughput", "nvshmem_init", "nvshmem_finalize", "nvshmem_get_unique_id",
                       "nvshmem_alloc_empty_unique_id", "nvshmem_my_pe", "nvshmem_n_pes", "nvshmem_barrier_all",
                       "nvshmem_barrier_all_on_current_stream", "check_dispatch", "check_combine"]
