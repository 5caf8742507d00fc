"""Context queries, peer addresses, put / get, put with signal and signals.

TileScale's conventions: the source comes first (put_warp(src, dst, size,
dst_pe)), sizes count elements of the source's type (`nbytes=` counts bytes
instead), addresses are buffers, elements (buf[i]) or T.address_of(buf[i]).
Who executes a call is CUDA's rule, as in symm_device.h: the plain form is
one thread's call (every thread that reaches it performs it), _warp needs
the 32 lanes of a warp together, _block every thread of the block together,
each with the same arguments.
"""
import tilelang.language as T
from tilelang import tvm  # noqa: F401 - the tvm TileLang ships
from tvm import tirx

from ._args import (RMA_TYPES, SIGNAL_OPS, address, byte_count, call, ctx_expr, element, enum,
                    pe_expr, typed)


def get_rank(ctx):
    """This PE's index in the context's team (symm_ctx_my_pe)."""
    return call("int32", "ctx_my_pe", ctx)


def get_num_ranks(ctx):
    """The number of PEs in the team (symm_ctx_n_pes)."""
    return call("int32", "ctx_n_pes", ctx)


my_pe, n_pes = get_rank, get_num_ranks


def peer_ptr(ctx, x, pe):
    """PE pe's copy of the symmetric object at x (a handle; symm_ctx_ptr)."""
    addr, _ = address(x, "peer_ptr")
    return call("handle", "ctx_ptr", ctx, addr, pe)


def peer_tensor(ctx, x, pe, shape=None, dtype=None):
    """PE pe's copy of the symmetric buffer x, as a buffer of the same shape
    and type whose loads and stores go to that PE (T.copy into it is a put,
    out of it a get; order them with fence / quiet, a signal or a barrier).
    pe -1 (or None) is x itself, with no lookup: valid on every backend, also
    where no PE is reached by load/store (SYMM_DEBUG_FORCE_REMOTE). With
    shape / dtype, a typed view starting at x (a buffer or an element
    buf[i]), e.g. words of another type in a byte buffer."""
    addr, dt = address(x, "peer_tensor")
    if shape is None:
        if not isinstance(x, tirx.Buffer):
            raise TypeError("peer_tensor: give shape= for a view that starts at an element")
        shape = list(x.shape)
    dtype = dtype or dt
    if dtype is None:
        raise TypeError("peer_tensor: give dtype= for a raw pointer")
    if pe is None or (isinstance(pe, int) and pe == -1):
        return T.make_tensor_from_addr(T.call_extern("handle", "symm_tl_local", addr), list(shape), str(dtype))
    return T.make_tensor_from_addr(call("handle", "ctx_ptr", ctx, addr, pe_expr(ctx, pe)),
                                   list(shape), str(dtype))


def _bulk(kind, scope, ctx, src, dst, size, pe, nbytes, nbi):
    what = kind + ("_" + scope if scope else "")
    s, sdt = address(src, what + " src")
    d, ddt = address(dst, what + " dst")
    n = byte_count(size, nbytes, sdt or ddt, what)
    name = what + ("_nbi" if nbi else "")
    return call("handle", name, ctx, d, s, n, pe)


def put(ctx, src, dst, size=None, dst_pe=None, *, nbytes=None, nbi=False):
    """One thread copies `size` elements from local src to PE dst_pe's dst
    (symm_put[_nbi]). Blocking: src may be reused on return; delivery is
    ordered by fence / quiet / a signal / a barrier."""
    return _bulk("put", "", ctx, src, dst, size, _pe(ctx, dst_pe, "dst_pe"), nbytes, nbi)


def put_warp(ctx, src, dst, size=None, dst_pe=None, *, nbytes=None, nbi=False):
    """A warp copies `size` elements to PE dst_pe (symm_put_warp[_nbi])."""
    return _bulk("put", "warp", ctx, src, dst, size, _pe(ctx, dst_pe, "dst_pe"), nbytes, nbi)


def put_block(ctx, src, dst, size=None, dst_pe=None, *, nbytes=None, nbi=False):
    """The block copies `size` elements to PE dst_pe (symm_put_block[_nbi])."""
    return _bulk("put", "block", ctx, src, dst, size, _pe(ctx, dst_pe, "dst_pe"), nbytes, nbi)


def get(ctx, src, dst, size=None, src_pe=None, *, nbytes=None, nbi=False):
    """One thread copies `size` elements of PE src_pe's src into local dst
    (symm_get[_nbi]); blocking: dst holds the data on return."""
    return _bulk("get", "", ctx, src, dst, size, _pe(ctx, src_pe, "src_pe"), nbytes, nbi)


def get_warp(ctx, src, dst, size=None, src_pe=None, *, nbytes=None, nbi=False):
    """A warp gets `size` elements from PE src_pe (symm_get_warp[_nbi])."""
    return _bulk("get", "warp", ctx, src, dst, size, _pe(ctx, src_pe, "src_pe"), nbytes, nbi)


def get_block(ctx, src, dst, size=None, src_pe=None, *, nbytes=None, nbi=False):
    """The block gets `size` elements from PE src_pe (symm_get_block[_nbi]);
    on return every thread of the block sees them."""
    return _bulk("get", "block", ctx, src, dst, size, _pe(ctx, src_pe, "src_pe"), nbytes, nbi)


def _pe(ctx, pe, what):
    if pe is None:
        raise TypeError("%s is required" % what)
    return pe_expr(ctx, pe)


def _signal_word(sig, what):
    addr, dtype = address(sig, what)
    if dtype is not None and dtype != "uint64":
        raise TypeError("%s: signal words are uint64 buffers, got %s" % (what, dtype))
    return addr


def _put_signal(scope, ctx, src, dst, size, sig, signal, sig_op, dst_pe, nbytes, nbi):
    what = "put_signal" + ("_" + scope if scope else "")
    s, sdt = address(src, what + " src")
    d, ddt = address(dst, what + " dst")
    n = byte_count(size, nbytes, sdt or ddt, what)
    return call("handle", what + ("_nbi" if nbi else ""), ctx, d, s, n, _signal_word(sig, what + " sig"),
                typed(signal, "u64"), enum(sig_op, SIGNAL_OPS, what + " sig_op"), _pe(ctx, dst_pe, "dst_pe"))


def put_signal(ctx, src, dst, size=None, sig=None, signal=1, sig_op="set", dst_pe=None, *,
               nbytes=None, nbi=False):
    """Put, then update PE dst_pe's 64-bit signal word `sig` (sig_op "set" or
    "add") with release semantics after the data (symm_put_signal[_nbi]):
    a PE that waits for the signal sees the data."""
    return _put_signal("", ctx, src, dst, size, sig, signal, sig_op, dst_pe, nbytes, nbi)


def put_signal_warp(ctx, src, dst, size=None, sig=None, signal=1, sig_op="set", dst_pe=None, *,
                    nbytes=None, nbi=False):
    """put_signal by a warp (symm_put_signal_warp[_nbi])."""
    return _put_signal("warp", ctx, src, dst, size, sig, signal, sig_op, dst_pe, nbytes, nbi)


def put_signal_block(ctx, src, dst, size=None, sig=None, signal=1, sig_op="set", dst_pe=None, *,
                     nbytes=None, nbi=False):
    """put_signal by the block (symm_put_signal_block[_nbi])."""
    return _put_signal("block", ctx, src, dst, size, sig, signal, sig_op, dst_pe, nbytes, nbi)


def signal_op(ctx, sig, value, sig_op="set", pe=None):
    """Set or add to PE pe's signal word with release semantics: the caller's
    earlier stores are visible to whoever observes the new value."""
    return call("handle", "signal_op", ctx, _signal_word(sig, "signal_op sig"), typed(value, "u64"),
                enum(sig_op, SIGNAL_OPS, "signal_op sig_op"), _pe(ctx, pe, "pe"))


def signal_fetch(ctx, sig):
    """The local signal word, read with acquire semantics."""
    return call("uint64", "signal_fetch", ctx, _signal_word(sig, "signal_fetch sig"))


def p(ctx, dst, value, pe):
    """Store one element into PE pe's copy of dst (buf[i]) (symm_p_<T>)."""
    addr, sfx = element(dst, RMA_TYPES, "p")
    return call("handle", "p_" + sfx, ctx, addr, typed(value, sfx), pe_expr(ctx, pe))


def g(ctx, src, pe):
    """Load one element of PE pe's copy of src (buf[i]) (symm_g_<T>)."""
    addr, sfx = element(src, RMA_TYPES, "g")
    return call(_dtype_of(src), "g_" + sfx, ctx, addr, pe_expr(ctx, pe))


def _dtype_of(x):
    return address(x, "element")[1]


def _put_pkt(scope, ctx, src, pkt, size, flag, dst_pe, nbytes):
    what = "put_pkt" + ("_" + scope if scope else "")
    s, sdt = address(src, what + " src")
    q, _ = address(pkt, what + " pkt")
    n = byte_count(size, nbytes, sdt, what)
    return call("handle", what, ctx, q, s, n, typed(flag, "u32"), _pe(ctx, dst_pe, "dst_pe"))


def put_pkt(ctx, src, pkt, size=None, flag=1, dst_pe=None, *, nbytes=None):
    """Put `size` elements of src into PE dst_pe's packet buffer pkt
    (symm_put_pkt): each 8 bytes travel in one 16-byte store beside two
    copies of `flag` (a nonzero number the buffer does not hold yet), so the
    receiver's pkt_wait sees data and flag together; no fence. pkt holds
    SYMM_PKT_BYTES(bytes) = 16 bytes per 8 of payload."""
    return _put_pkt("", ctx, src, pkt, size, flag, dst_pe, nbytes)


def put_pkt_warp(ctx, src, pkt, size=None, flag=1, dst_pe=None, *, nbytes=None):
    """put_pkt by a warp (symm_put_pkt_warp)."""
    return _put_pkt("warp", ctx, src, pkt, size, flag, dst_pe, nbytes)


def put_pkt_block(ctx, src, pkt, size=None, flag=1, dst_pe=None, *, nbytes=None):
    """put_pkt by the block (symm_put_pkt_block)."""
    return _put_pkt("block", ctx, src, pkt, size, flag, dst_pe, nbytes)


def _pkt_wait(scope, ctx, pkt, dst, size, flag, nbytes):
    what = "pkt_wait" + ("_" + scope if scope else "")
    q, _ = address(pkt, what + " pkt")
    d, ddt = address(dst, what + " dst")
    n = byte_count(size, nbytes, ddt, what)
    return call("handle", what, ctx, q, d, n, typed(flag, "u32"))


def pkt_wait(ctx, pkt, dst, size=None, flag=1, *, nbytes=None):
    """Wait until every packet of the local pkt carries `flag`, copying the
    `size` elements of payload into dst as they arrive (symm_pkt_wait; with
    the deadline and the abort flag of every wait)."""
    return _pkt_wait("", ctx, pkt, dst, size, flag, nbytes)


def pkt_wait_warp(ctx, pkt, dst, size=None, flag=1, *, nbytes=None):
    """pkt_wait by a warp (symm_pkt_wait_warp)."""
    return _pkt_wait("warp", ctx, pkt, dst, size, flag, nbytes)


def pkt_wait_block(ctx, pkt, dst, size=None, flag=1, *, nbytes=None):
    """pkt_wait by the block (symm_pkt_wait_block)."""
    return _pkt_wait("block", ctx, pkt, dst, size, flag, nbytes)


def _pkt_buf(pkt, what):
    q, _ = address(pkt, what + " pkt")
    return q


def _nwords(nwords, what):
    if isinstance(nwords, int) and not 1 <= nwords <= 32:
        raise ValueError("%s: nwords must be 1..32 (one packet per lane), got %d" % (what, nwords))
    return typed(nwords, "u32")


def put_pkt_v64(ctx, value, pkt, flag=1, dst_pe=None):
    """Put one 8-byte value (a register, cast to uint64) as the one packet of
    PE dst_pe's packet buffer pkt (symm_put_pkt_v64; 16 bytes of buffer):
    nothing of the payload is loaded from memory."""
    return call("handle", "put_pkt_v64", ctx, _pkt_buf(pkt, "put_pkt_v64"), typed(value, "u64"),
                typed(flag, "u32"), _pe(ctx, dst_pe, "dst_pe"))


def put_pkt_v64_warp(ctx, value, pkt, nwords, flag=1, dst_pe=None):
    """put_pkt_v64 by a warp (symm_put_pkt_v64_warp): lane i < nwords (1..32)
    puts its own value as packet i, all in flight together; every lane calls
    it with the same pkt, nwords, flag and dst_pe."""
    return call("handle", "put_pkt_v64_warp", ctx, _pkt_buf(pkt, "put_pkt_v64_warp"), typed(value, "u64"),
                _nwords(nwords, "put_pkt_v64_warp"), typed(flag, "u32"), _pe(ctx, dst_pe, "dst_pe"))


def pkt_wait_v64(ctx, pkt, flag=1):
    """Wait until the local packet pkt carries `flag`; its 8-byte value as a
    uint64 expression (symm_pkt_wait_v64; the usual deadline and abort)."""
    return call("uint64", "pkt_wait_v64", ctx, _pkt_buf(pkt, "pkt_wait_v64"), typed(flag, "u32"))


def pkt_wait_v64_warp(ctx, pkt, nwords, flag=1):
    """pkt_wait_v64 by a warp (symm_pkt_wait_v64_warp): lane i < nwords gets
    packet i's value, the other lanes 0."""
    return call("uint64", "pkt_wait_v64_warp", ctx, _pkt_buf(pkt, "pkt_wait_v64_warp"),
                _nwords(nwords, "pkt_wait_v64_warp"), typed(flag, "u32"))


__all__ = ["get_rank", "get_num_ranks", "my_pe", "n_pes", "peer_ptr", "peer_tensor", "put", "put_warp",
           "put_block", "get", "get_warp", "get_block", "put_signal", "put_signal_warp",
           "put_signal_block", "put_pkt", "put_pkt_warp", "put_pkt_block", "pkt_wait", "pkt_wait_warp",
           "pkt_wait_block", "put_pkt_v64", "put_pkt_v64_warp", "pkt_wait_v64", "pkt_wait_v64_warp", "signal_op", "signal_fetch", "p", "g", "ctx_expr"]
