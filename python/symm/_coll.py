"""Stream collectives on torch tensors (symm_coll.h).

Each call enqueues the collective on a stream (default: torch's current
stream on symm's device) and returns at once, like torch.distributed with
async_op=False from the host's point of view of ordering, but without a host
wait. Collective: every PE of the team makes the same calls in the same order
with the same sizes, dtypes and ops. Tensors may be anywhere on this PE's GPU;
symmetric ones (symm.tensor) take the direct path, others are staged.

Everything about the arguments (tensor type, device, dtype, contiguity,
sizes, op) is checked here before the C call, so mistakes raise
TypeError/ValueError and nothing is enqueued.
"""
import ctypes

from . import _consts as C
from . import _lib, _runtime
from ._errors import UnsupportedError

# torch dtype name -> enum symm_dtype (symm_coll_types.h)
_DTYPE_CODES = {"float32": C.DTYPE_F32, "float16": C.DTYPE_F16, "bfloat16": C.DTYPE_BF16,
                "float64": C.DTYPE_F64, "int32": C.DTYPE_I32, "uint32": C.DTYPE_U32,
                "int64": C.DTYPE_I64, "uint64": C.DTYPE_U64, "float8_e4m3fn": C.DTYPE_FP8_E4M3,
                "float8_e5m2": C.DTYPE_FP8_E5M2, "uint8": C.DTYPE_U8}
DTYPE_DEFAULT = C.DTYPE_DEFAULT
OPS = C.names("symm_redop", "SYMM_OP_")
ALGOS = C.names("symm_coll_algo", "SYMM_COLL_ALGO_")
_INTEGER = {"int32", "uint32", "int64", "uint64"}
_ACCS = {None: DTYPE_DEFAULT, "float32": C.DTYPE_F32, "float16": C.DTYPE_F16}


def _torch():
    from ._tensor import _torch as t
    return t()


def _fn(name):
    if not _lib.has(name):
        raise UnsupportedError(name, UnsupportedError.status,
                               "this libsymm has no stream collectives (symm_coll.h)")
    return getattr(_lib.load(), name)


def _dtype_name(torch, t):
    return str(t.dtype).replace("torch.", "")


def _check_tensor(torch, t, what, call):
    if not isinstance(t, torch.Tensor):
        raise TypeError("%s: %s must be a torch.Tensor, got %s" % (call, what, type(t).__name__))
    dev = _runtime.device()
    if t.device.type != "cuda" or t.device.index != dev:
        raise ValueError("%s: %s is on %s; symm's collectives run on cuda:%d" % (call, what, t.device, dev))
    if not t.is_contiguous():
        raise ValueError("%s: %s must be contiguous" % (call, what))
    name = _dtype_name(torch, t)
    if name not in _DTYPE_CODES:
        raise TypeError("%s: dtype %s is not supported (supported: %s)"
                        % (call, t.dtype, ", ".join(sorted(_DTYPE_CODES))))
    return _DTYPE_CODES[name]


def _same_dtype(a, b, call):
    if a.dtype != b.dtype:
        raise TypeError("%s: input is %s, output %s: they must match" % (call, a.dtype, b.dtype))


def _op(op, dtype_name, call):
    key = getattr(op, "name", op)
    key = str(key).lower()
    key = {"bitwise_and": "band", "bitwise_or": "bor", "bitwise_xor": "bxor"}.get(key, key)
    if key not in OPS:
        raise ValueError("%s: op %r is not one of %s" % (call, op, ", ".join(OPS)))
    if dtype_name == "uint8":
        raise TypeError("%s: uint8 is for data movement only, not reductions" % call)
    if key in ("band", "bor", "bxor") and dtype_name not in _INTEGER:
        raise TypeError("%s: %s needs an integer dtype (int32, uint32, int64, uint64), got %s"
                        % (call, key, dtype_name))
    return OPS[key]


def _algo(algo, call):
    if algo not in ALGOS:
        raise ValueError("%s: algo %r is not one of %s" % (call, algo, ", ".join(ALGOS)))
    return ALGOS[algo]


def _acc(torch, acc, call):
    name = None if acc is None else str(acc).replace("torch.", "")
    if name not in _ACCS:
        raise ValueError("%s: acc must be None, torch.float32 or torch.float16" % call)
    return _ACCS[name]


def _team(team):
    return None if team is None else team._h


def _team_size(team):
    n = _runtime.n_pes() if team is None else team.n_pes()
    if n < 1:
        _runtime._check("symm collective", -2)
    return n


def _stream(stream):
    return _runtime._stream_handle(stream) or None


def _run(call, fn, *args):
    _runtime._check(call, fn(*args))


def all_reduce(tensor, op="sum", *, out=None, team=None, stream=None, algo="auto", acc=None):
    """out[i] = op over PEs of tensor[i] (in place when out is None); returns
    the result tensor. op: sum, min, max, band, bor, bxor. algo: auto,
    packet, oneshot, twoshot, multimem, push (one that cannot run falls back).
    acc: the accumulator for fp8 (torch.float32 default, or torch.float16)."""
    torch = _torch()
    call = "symm.all_reduce"
    code = _check_tensor(torch, tensor, "tensor", call)
    out = tensor if out is None else out
    _check_tensor(torch, out, "out", call)
    _same_dtype(tensor, out, call)
    if out.numel() != tensor.numel():
        raise ValueError("%s: out has %d elements, tensor %d" % (call, out.numel(), tensor.numel()))
    opc = _op(op, _dtype_name(torch, tensor), call)
    fn = _fn("symm_all_reduce_ex")
    _team_size(team)
    _run("symm_all_reduce_ex", fn, tensor.data_ptr(), out.data_ptr(), tensor.numel(), code, opc,
         _acc(torch, acc, call), _algo(algo, call), _team(team), _stream(stream))
    return out


def reduce_scatter(output, input, op="sum", *, team=None, stream=None, algo="auto", acc=None):
    """input holds n_pes pieces of output.numel() elements; PE r's output
    gets the reduction over PEs of piece r. Returns output."""
    torch = _torch()
    call = "symm.reduce_scatter"
    code = _check_tensor(torch, input, "input", call)
    _check_tensor(torch, output, "output", call)
    _same_dtype(input, output, call)
    n = _team_size(team)
    if input.numel() != n * output.numel():
        raise ValueError("%s: input has %d elements; it must hold n_pes (%d) x output (%d)"
                         % (call, input.numel(), n, output.numel()))
    opc = _op(op, _dtype_name(torch, input), call)
    fn = _fn("symm_reduce_scatter_ex")
    _run("symm_reduce_scatter_ex", fn, input.data_ptr(), output.data_ptr(), output.numel(), code,
         opc, _acc(torch, acc, call), _algo(algo, call), _team(team), _stream(stream))
    return output


def all_gather(output, input, *, team=None, stream=None):
    """output (n_pes x input.numel() elements) gets PE p's input at block p.
    Returns output."""
    torch = _torch()
    call = "symm.all_gather"
    code = _check_tensor(torch, input, "input", call)
    _check_tensor(torch, output, "output", call)
    _same_dtype(input, output, call)
    n = _team_size(team)
    if output.numel() != n * input.numel():
        raise ValueError("%s: output has %d elements; it must hold n_pes (%d) x input (%d)"
                         % (call, output.numel(), n, input.numel()))
    fn = _fn("symm_all_gather")
    _run("symm_all_gather", fn, input.data_ptr(), output.data_ptr(), input.numel(), code,
         _team(team), _stream(stream))
    return output


def all_to_all(output, input, *, team=None, stream=None):
    """input and output hold n_pes equal blocks; block p of input goes to PE
    p, landing at block my_pe of its output. Returns output."""
    torch = _torch()
    call = "symm.all_to_all"
    code = _check_tensor(torch, input, "input", call)
    _check_tensor(torch, output, "output", call)
    _same_dtype(input, output, call)
    n = _team_size(team)
    if input.numel() != output.numel() or input.numel() % n:
        raise ValueError("%s: input (%d) and output (%d) must have the same number of elements, "
                         "a multiple of n_pes (%d)" % (call, input.numel(), output.numel(), n))
    fn = _fn("symm_all_to_all")
    _run("symm_all_to_all", fn, input.data_ptr(), output.data_ptr(), input.numel() // n, code,
         _team(team), _stream(stream))
    return output


def _splits(sizes, n, rows, what, call):
    sizes = [int(s) for s in sizes]
    if len(sizes) != n or any(s < 0 for s in sizes):
        raise ValueError("%s: %s needs n_pes (%d) sizes >= 0, got %r" % (call, what, n, sizes))
    if sum(sizes) > rows:
        raise ValueError("%s: %s add up to %d rows; the tensor has %d" % (call, what, sum(sizes), rows))
    return sizes


def all_to_allv(output, input, output_split_sizes, input_split_sizes, *, team=None, stream=None):
    """torch.distributed.all_to_all_single with split sizes: input rows
    (along dim 0) [sum(input_split_sizes[:p]), +input_split_sizes[p]) go to
    PE p; output rows of PE p arrive at sum(output_split_sizes[:p]).
    output_split_sizes[p] must equal what PE p sends here. Returns output."""
    torch = _torch()
    call = "symm.all_to_allv"
    code = _check_tensor(torch, input, "input", call)
    _check_tensor(torch, output, "output", call)
    _same_dtype(input, output, call)
    if input.dim() == 0 or output.dim() == 0 or input.shape[1:] != output.shape[1:]:
        raise ValueError("%s: input %s and output %s must agree beyond dim 0"
                         % (call, tuple(input.shape), tuple(output.shape)))
    n = _team_size(team)
    row = 1
    for d in input.shape[1:]:
        row *= d
    send = _splits(input_split_sizes, n, input.shape[0], "input_split_sizes", call)
    recv = _splits(output_split_sizes, n, output.shape[0], "output_split_sizes", call)

    def arrays(sizes):
        counts = (ctypes.c_size_t * n)(*[s * row for s in sizes])
        displs, acc = (ctypes.c_size_t * n)(), 0
        for i, s in enumerate(sizes):
            displs[i] = acc * row
            acc += s
        return counts, displs
    sc, sd = arrays(send)
    rc, rd = arrays(recv)
    fn = _fn("symm_all_to_allv")
    _run("symm_all_to_allv", fn, input.data_ptr(), sc, sd, output.data_ptr(), rc, rd, code,
         _team(team), _stream(stream))
    return output


def broadcast(tensor, root, *, out=None, team=None, stream=None):
    """Every PE's out (default: tensor, in place) gets root's tensor. Returns out."""
    torch = _torch()
    call = "symm.broadcast"
    code = _check_tensor(torch, tensor, "tensor", call)
    out = tensor if out is None else out
    _check_tensor(torch, out, "out", call)
    _same_dtype(tensor, out, call)
    if out.numel() != tensor.numel():
        raise ValueError("%s: out has %d elements, tensor %d" % (call, out.numel(), tensor.numel()))
    n = _team_size(team)
    if not isinstance(root, int) or not 0 <= root < n:
        raise ValueError("%s: root %r is outside [0, %d)" % (call, root, n))
    fn = _fn("symm_broadcast")
    _run("symm_broadcast", fn, tensor.data_ptr(), out.data_ptr(), tensor.numel(), code, root,
         _team(team), _stream(stream))
    return out


def last_algo():
    """The algorithm the last collective of this thread used, e.g. "oneshot"."""
    raw = _fn("symm_coll_last_algo")()
    return raw.decode() if raw else ""
