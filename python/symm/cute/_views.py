"""The device calls on CuTe tensor views and typed pointers.

symm.cute.raw has every function with its C signature (byte counts, element
type codes, one function per element type). Here the same calls take what a
CuTe kernel holds: tensor views and cute.Pointers carry their element type, so

  - bulk moves (put/get/put_signal at every scope) move
    min(size(dst), size(src)) elements (or `nelems`, required when either side
    is a pointer), and dst and src must have the same element type;
  - the one-element families (p, g, ld, st, wait_until, atomic_*) pick the C
    function of the pointer's element type;
  - the collectives take the element type from the views and their count from
    the sizes (or `nelems`).
Every check here runs while the kernel is traced, so a wrong element type is
a compile-time error that names the call. Integer addresses have no element
type: use symm.cute.raw with them.
"""
import cutlass
import cutlass.cute as cute

from . import raw
from ._convert import is_pointer, is_tensor
from ._signatures import CONSTANTS

_C = {name: value for name, value, _ in CONSTANTS}

SUFFIX = {
    cutlass.Int8: "i8", cutlass.Int16: "i16", cutlass.Int32: "i32", cutlass.Int64: "i64",
    cutlass.Uint8: "u8", cutlass.Uint16: "u16", cutlass.Uint32: "u32", cutlass.Uint64: "u64",
    cutlass.Float32: "f32", cutlass.Float64: "f64",
}

# element type -> enum symm_dtype of the collectives
COLL_DTYPE = {
    cutlass.Float32: _C["DTYPE_F32"], cutlass.Float16: _C["DTYPE_F16"],
    cutlass.BFloat16: _C["DTYPE_BF16"], cutlass.Float64: _C["DTYPE_F64"],
    cutlass.Int32: _C["DTYPE_I32"], cutlass.Uint32: _C["DTYPE_U32"],
    cutlass.Int64: _C["DTYPE_I64"], cutlass.Uint64: _C["DTYPE_U64"],
    cutlass.Float8E4M3FN: _C["DTYPE_FP8_E4M3"], cutlass.Float8E5M2: _C["DTYPE_FP8_E5M2"],
    cutlass.Uint8: _C["DTYPE_U8"], cutlass.Int8: _C["DTYPE_U8"],
}

RMA_TYPES = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f32", "f64")
LDST_TYPES = ("i32", "i64", "u32", "u64", "f32", "f64")
AMO_TYPES = ("i32", "i64", "u32", "u64")


def element_type(x, call, what):
    if is_tensor(x):
        return x.element_type
    if is_pointer(x):
        return x.dtype
    raise TypeError("symm.cute.%s: %s must be a cute tensor view or a cute.Pointer (it carries "
                    "the element type), got %s; with an integer address use symm.cute.raw.%s"
                    % (call, what, type(x).__name__, call))


def _tname(t):
    return getattr(t, "__name__", str(t))


def _typed(family, x, allowed, what="the pointer"):
    """The raw function family_<suffix> for x's element type."""
    t = element_type(x, family, what)
    s = SUFFIX.get(t)
    if s not in allowed:
        raise TypeError("symm.cute.%s: element type %s of %s is not supported; it takes %s"
                        % (family, _tname(t), what, ", ".join(allowed)))
    return getattr(raw, "%s_%s" % (family, s))


def _check_contiguous(call, what, t):
    if is_tensor(t) and cute.is_static(t.layout) and cute.cosize(t.layout) != cute.size(t.layout):
        raise ValueError("symm.cute.%s: %s has layout %s, which is not contiguous; the bulk "
                         "calls move a contiguous range of elements" % (call, what, t.layout))


def _width_bytes(call, t):
    w = t.width
    if w % 8:
        raise TypeError("symm.cute.%s: element type %s is narrower than a byte" % (call, _tname(t)))
    return w // 8


def count(call, dst, src, nelems=None):
    """(element type, element count) of a move from src to dst, checked."""
    dt = element_type(dst, call, "dst")
    st = element_type(src, call, "src")
    if dt is not st:
        raise TypeError("symm.cute.%s: dst and src element types differ (%s and %s); they must "
                        "match" % (call, _tname(dt), _tname(st)))
    _check_contiguous(call, "dst", dst)
    _check_contiguous(call, "src", src)
    if nelems is None:
        if not (is_tensor(dst) and is_tensor(src)):
            raise TypeError("symm.cute.%s: pass nelems= when dst or src is a pointer (only tensor "
                            "views carry a size)" % call)
        nelems = cutlass.min(cute.size(dst), cute.size(src))
    return dt, nelems


def nbytes(call, dst, src, nelems=None):
    t, n = count(call, dst, src, nelems)
    return cutlass.Uint64(n) * cutlass.Uint64(_width_bytes(call, t))


def _check_signal(call, sig):
    if is_tensor(sig) or is_pointer(sig):
        t = element_type(sig, call, "sig")
        if t not in (cutlass.Uint64, cutlass.Int64):
            raise TypeError("symm.cute.%s: the signal word must be 64-bit (Uint64), got %s"
                            % (call, _tname(t)))


# ---------------------------------------------------------------------------
# Context, peer pointers and peer views
# ---------------------------------------------------------------------------

def my_pe(ctx):
    """This PE's index in the context's team (symm_ctx_my_pe). Any thread."""
    return raw.ctx_my_pe(ctx)


def n_pes(ctx):
    """The team's PE count (symm_ctx_n_pes). Any thread."""
    return raw.ctx_n_pes(ctx)


def peer_ptr(ctx, ptr, pe):
    """PE pe's copy of the symmetric object at ptr (symm_ctx_ptr), loadable and
    storable from this GPU: a cute.Pointer of the same element type and
    alignment for a cute.Pointer (or a tensor: its first element), an Int64
    address for an integer address. Any thread."""
    if is_tensor(ptr):
        ptr = ptr.iterator
    peer = raw.ctx_ptr(ctx, ptr, pe)
    if not is_pointer(ptr):
        return peer
    return cute.make_ptr(ptr.dtype, peer, cute.AddressSpace.gmem, assumed_align=ptr.alignment)


def peer_tensor(ctx, tensor, pe):
    """PE pe's copy of a view of symmetric memory: a tensor with the same
    layout over the peer's address (for loads, stores, cute.copy, or as a
    put/get operand on this PE's side). Any thread."""
    if not is_tensor(tensor):
        raise TypeError("symm.cute.peer_tensor: expected a cute tensor, got %s"
                        % type(tensor).__name__)
    return cute.make_tensor(peer_ptr(ctx, tensor.iterator, pe), tensor.layout)


get_peer_tensor = peer_tensor


# ---------------------------------------------------------------------------
# One element: p, g, ld, st, wait_until, atomics
# ---------------------------------------------------------------------------

def p(ctx, dst, value, pe):
    """Store value into PE pe's copy of dst's first element (symm_p_<T>). Thread
    scope; blocking (value may be reused), delivery ordered by fence/quiet."""
    return _typed("p", dst, RMA_TYPES, "dst")(ctx, dst, value, pe)


def g(ctx, src, pe):
    """Load PE pe's copy of src's first element (symm_g_<T>). Thread scope."""
    return _typed("g", src, RMA_TYPES, "src")(ctx, src, pe)


def ld(ctx, ptr, pe, sem, scope):
    """Load PE pe's copy of *ptr with ordering sem at scope (symm_ld_<T>)."""
    return _typed("ld", ptr, LDST_TYPES)(ctx, ptr, pe, sem, scope)


def st(ctx, ptr, value, pe, sem, scope):
    """Store into PE pe's copy of *ptr with ordering sem at scope (symm_st_<T>)."""
    return _typed("st", ptr, LDST_TYPES)(ctx, ptr, value, pe, sem, scope)


def wait_until(ctx, ivar, cmp, value):
    """Wait until (*ivar cmp value) on this PE, acquire (symm_wait_until_<T>);
    returns the value seen. Honours the deadline."""
    return _typed("wait_until", ivar, AMO_TYPES, "ivar")(ctx, ivar, cmp, value)


def _amo(op, params, doc):
    family = "atomic_" + op

    def fn(ctx, ptr, *args):
        return _typed(family, ptr, AMO_TYPES)(ctx, ptr, *args)
    fn.__name__ = fn.__qualname__ = family
    fn.__doc__ = "%s(ctx, ptr, %s): %s on PE pe's copy of *ptr (symm_%s_<T>: i32, i64, u32, " \
                 "u64). Thread scope, relaxed, system scope." % (family, params, doc, family)
    return fn


atomic_fetch = _amo("fetch", "pe", "atomic read")
atomic_set = _amo("set", "value, pe", "atomic store")
atomic_swap = _amo("swap", "value, pe", "exchange, returns the old value")
atomic_compare_swap = _amo("compare_swap", "cond, value, pe", "compare and swap, returns the old value")
atomic_inc = _amo("inc", "pe", "increment")
atomic_fetch_inc = _amo("fetch_inc", "pe", "increment, returns the old value")
atomic_add = _amo("add", "value, pe", "add")
atomic_fetch_add = _amo("fetch_add", "value, pe", "add, returns the old value")
atomic_and = _amo("and", "value, pe", "bitwise and")
atomic_fetch_and = _amo("fetch_and", "value, pe", "bitwise and, returns the old value")
atomic_or = _amo("or", "value, pe", "bitwise or")
atomic_fetch_or = _amo("fetch_or", "value, pe", "bitwise or, returns the old value")
atomic_xor = _amo("xor", "value, pe", "bitwise xor")
atomic_fetch_xor = _amo("fetch_xor", "value, pe", "bitwise xor, returns the old value")


# ---------------------------------------------------------------------------
# Bulk moves and signals
# ---------------------------------------------------------------------------

_SCOPE_DOC = {
    "": "Thread scope: the calling thread alone.",
    "_warp": "Warp scope: all 32 lanes of the warp call it together, with the same arguments.",
    "_block": "Block scope: every thread of the CTA calls it together, with the same arguments.",
}


def _bulk(op, scope, nbi):
    name = op + scope + ("_nbi" if nbi else "")
    fn_raw = getattr(raw, name)

    def fn(ctx, dst, src, pe, nelems=None):
        return fn_raw(ctx, dst, src, nbytes(name, dst, src, nelems), pe)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (
        "%s(ctx, dst, src, pe, nelems=None): symm_%s on views. %s, "
        "min(size(dst), size(src)) elements (nelems= overrides; required with pointers); "
        "dst and src have the same element type. %s %s"
        % (name, name, "Put local src into PE pe's copy of dst" if op == "put"
           else "Get PE pe's copy of src into local dst", _SCOPE_DOC[scope],
           "Non-blocking: complete after the next quiet." if nbi else "Blocking."))
    return fn


def _put_signal(scope, nbi):
    name = "put_signal" + scope + ("_nbi" if nbi else "")
    fn_raw = getattr(raw, name)

    def fn(ctx, dst, src, sig, signal, sig_op, pe, nelems=None):
        _check_signal(name, sig)
        return fn_raw(ctx, dst, src, nbytes(name, dst, src, nelems), sig, signal, sig_op, pe)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (
        "%s(ctx, dst, src, sig, signal, sig_op, pe, nelems=None): symm_%s on views: put "
        "min(size(dst), size(src)) elements into PE pe's copy of dst, then update its copy of "
        "the 64-bit word sig (SIGNAL_SET / SIGNAL_ADD) with release semantics after the data. "
        "%s" % (name, name, _SCOPE_DOC[scope]))
    return fn


_g = globals()
for _op in ("put", "get"):
    for _scope in ("", "_warp", "_block"):
        for _nbi in (False, True):
            _f = _bulk(_op, _scope, _nbi)
            _g[_f.__name__] = _f
for _scope in ("", "_warp", "_block"):
    for _nbi in (False, True):
        _f = _put_signal(_scope, _nbi)
        _g[_f.__name__] = _f
del _g, _op, _scope, _nbi, _f


def signal_op(ctx, sig, value, sig_op, pe):
    """Update PE pe's copy of the 64-bit word sig (SIGNAL_SET / SIGNAL_ADD)
    with release semantics (symm_signal_op). Thread scope."""
    _check_signal("signal_op", sig)
    return raw.signal_op(ctx, sig, value, sig_op, pe)


def signal_fetch(ctx, sig):
    """Read the local signal word, acquire (symm_signal_fetch)."""
    _check_signal("signal_fetch", sig)
    return raw.signal_fetch(ctx, sig)


def signal_wait_until(ctx, sig, cmp, value):
    """Wait until (*sig cmp value) on the local signal word, acquire; returns
    the value seen (symm_signal_wait_until). Honours the deadline."""
    _check_signal("signal_wait_until", sig)
    return raw.signal_wait_until(ctx, sig, cmp, value)


# ---------------------------------------------------------------------------
# Collectives (symm_device_coll.h) on views
# ---------------------------------------------------------------------------

def coll_dtype(call, x):
    t = element_type(x, call, "dst")
    if t not in COLL_DTYPE:
        raise TypeError("symm.cute.%s: element type %s has no collective type code; supported: %s"
                        % (call, _tname(t), ", ".join(_tname(k) for k in COLL_DTYPE)))
    return COLL_DTYPE[t]


def _coll_count(call, dst, src, nelems, size_of):
    count(call, dst, src, 0)  # element types, contiguity
    if nelems is not None:
        return nelems
    side = dst if size_of == "dst" else src
    if not is_tensor(side):
        raise TypeError("symm.cute.%s: pass nelems= when %s is a pointer" % (call, size_of))
    return cute.size(side)


def all_reduce_block(ctx, dst, src, op, nelems=None):
    """dst = op over PEs of src (symm_all_reduce_block), size(dst) elements.
    Block scope; every PE makes the same call."""
    n = _coll_count("all_reduce_block", dst, src, nelems, "dst")
    return raw.all_reduce_block(ctx, dst, src, n, coll_dtype("all_reduce_block", dst), op)


def all_reduce_grid(ctx, dst, src, op, block, nblocks, nelems=None):
    """symm_all_reduce_grid on views: CTA `block` of `nblocks` does its share."""
    n = _coll_count("all_reduce_grid", dst, src, nelems, "dst")
    return raw.all_reduce_grid(ctx, dst, src, n, coll_dtype("all_reduce_grid", dst), op, block,
                               nblocks)


def all_reduce_ex_block(ctx, dst, src, op, acc, algo, nelems=None):
    """symm_all_reduce_ex_block on views (accumulator type, algorithm)."""
    n = _coll_count("all_reduce_ex_block", dst, src, nelems, "dst")
    return raw.all_reduce_ex_block(ctx, dst, src, n, coll_dtype("all_reduce_ex_block", dst), op,
                                   acc, algo)


def all_reduce_ex_grid(ctx, dst, src, op, acc, algo, block, nblocks, nelems=None):
    """symm_all_reduce_ex_grid on views."""
    n = _coll_count("all_reduce_ex_grid", dst, src, nelems, "dst")
    return raw.all_reduce_ex_grid(ctx, dst, src, n, coll_dtype("all_reduce_ex_grid", dst), op,
                                  acc, algo, block, nblocks)


def reduce_scatter_block(ctx, dst, src, op, nelems=None):
    """symm_reduce_scatter_block on views: src holds n_pes pieces of size(dst)
    elements; dst gets the reduction of piece my_pe. Block scope."""
    n = _coll_count("reduce_scatter_block", dst, src, nelems, "dst")
    return raw.reduce_scatter_block(ctx, dst, src, n, coll_dtype("reduce_scatter_block", dst), op)


def reduce_scatter_grid(ctx, dst, src, op, block, nblocks, nelems=None):
    """symm_reduce_scatter_grid on views."""
    n = _coll_count("reduce_scatter_grid", dst, src, nelems, "dst")
    return raw.reduce_scatter_grid(ctx, dst, src, n, coll_dtype("reduce_scatter_grid", dst), op,
                                   block, nblocks)


def reduce_scatter_ex_block(ctx, dst, src, op, acc, algo, nelems=None):
    """symm_reduce_scatter_ex_block on views."""
    n = _coll_count("reduce_scatter_ex_block", dst, src, nelems, "dst")
    return raw.reduce_scatter_ex_block(ctx, dst, src, n,
                                       coll_dtype("reduce_scatter_ex_block", dst), op, acc, algo)


def reduce_scatter_ex_grid(ctx, dst, src, op, acc, algo, block, nblocks, nelems=None):
    """symm_reduce_scatter_ex_grid on views."""
    n = _coll_count("reduce_scatter_ex_grid", dst, src, nelems, "dst")
    return raw.reduce_scatter_ex_grid(ctx, dst, src, n, coll_dtype("reduce_scatter_ex_grid", dst),
                                      op, acc, algo, block, nblocks)


def all_gather_block(ctx, dst, src, nelems=None):
    """symm_all_gather_block on views: dst gets PE p's src (size(src)
    elements) at p * size(src). Block scope."""
    n = _coll_count("all_gather_block", dst, src, nelems, "src")
    return raw.all_gather_block(ctx, dst, src, n, coll_dtype("all_gather_block", dst))


def all_gather_grid(ctx, dst, src, block, nblocks, nelems=None):
    """symm_all_gather_grid on views."""
    n = _coll_count("all_gather_grid", dst, src, nelems, "src")
    return raw.all_gather_grid(ctx, dst, src, n, coll_dtype("all_gather_grid", dst), block, nblocks)


def _per_pe(ctx, call, dst, nelems):
    if nelems is not None:
        return nelems
    if not is_tensor(dst):
        raise TypeError("symm.cute.%s: pass nelems= when dst is a pointer" % call)
    return cute.size(dst) // raw.ctx_n_pes(ctx)


def all_to_all_block(ctx, dst, src, nelems=None):
    """symm_all_to_all_block on views: block p of src (size(dst) / n_pes
    elements, or nelems) goes to PE p. Block scope."""
    count("all_to_all_block", dst, src, 0)
    n = _per_pe(ctx, "all_to_all_block", dst, nelems)
    return raw.all_to_all_block(ctx, dst, src, n, coll_dtype("all_to_all_block", dst))


def all_to_all_grid(ctx, dst, src, block, nblocks, nelems=None):
    """symm_all_to_all_grid on views."""
    count("all_to_all_grid", dst, src, 0)
    n = _per_pe(ctx, "all_to_all_grid", dst, nelems)
    return raw.all_to_all_grid(ctx, dst, src, n, coll_dtype("all_to_all_grid", dst), block, nblocks)


def all_to_allv_block(ctx, dst, src, send_counts, send_displs, recv_counts, recv_displs):
    """symm_all_to_allv_block on views (counts and displacements in elements,
    uint64 arrays of n_pes entries that the GPU can read)."""
    count("all_to_allv_block", dst, src, 0)
    return raw.all_to_allv_block(ctx, dst, src, send_counts, send_displs, recv_counts, recv_displs,
                                 coll_dtype("all_to_allv_block", dst))


def all_to_allv_grid(ctx, dst, src, send_counts, send_displs, recv_counts, recv_displs, block,
                     nblocks):
    """symm_all_to_allv_grid on views."""
    count("all_to_allv_grid", dst, src, 0)
    return raw.all_to_allv_grid(ctx, dst, src, send_counts, send_displs, recv_counts, recv_displs,
                                coll_dtype("all_to_allv_grid", dst), block, nblocks)


def broadcast_block(ctx, dst, src, root, nelems=None):
    """symm_broadcast_block on views: dst of every PE gets root's src,
    min(size(dst), size(src)) elements. Block scope."""
    _, n = count("broadcast_block", dst, src, nelems)
    return raw.broadcast_block(ctx, dst, src, n, coll_dtype("broadcast_block", dst), root)


def broadcast_grid(ctx, dst, src, root, block, nblocks, nelems=None):
    """symm_broadcast_grid on views."""
    _, n = count("broadcast_grid", dst, src, nelems)
    return raw.broadcast_grid(ctx, dst, src, n, coll_dtype("broadcast_grid", dst), root, block,
                              nblocks)


__all__ = [
    "my_pe", "n_pes", "peer_ptr", "peer_tensor", "get_peer_tensor", "p", "g", "ld", "st",
    "wait_until", "signal_op", "signal_fetch", "signal_wait_until",
] + ["atomic_" + op for op in ("fetch", "set", "swap", "compare_swap", "inc", "fetch_inc", "add",
                               "fetch_add", "and", "fetch_and", "or", "fetch_or", "xor",
                               "fetch_xor")] \
  + [op + s + n for op in ("put", "get") for s in ("", "_warp", "_block") for n in ("", "_nbi")] \
  + ["put_signal" + s + n for s in ("", "_warp", "_block") for n in ("", "_nbi")] \
  + ["all_reduce_block", "all_reduce_grid", "all_reduce_ex_block", "all_reduce_ex_grid",
     "reduce_scatter_block", "reduce_scatter_grid", "reduce_scatter_ex_block",
     "reduce_scatter_ex_grid", "all_gather_block", "all_gather_grid", "all_to_all_block",
     "all_to_all_grid", "all_to_allv_block", "all_to_allv_grid", "broadcast_block",
     "broadcast_grid"]
