"""The collectives callable inside kernels (symm_device_coll.h).

dst and src are symmetric buffers (or their elements / addresses); counts
are in elements, the type comes from the buffers. _block: one block per PE
calls it, every thread, with the same arguments. _grid: `nblocks` blocks per
PE call it together, block `block` doing its share; both default to the
whole grid (the calling block's linear index, the grid's block count).
acc / algo choose the accumulator and the algorithm (the _ex forms)."""
import tilelang.language as T

from ._args import ALGOS, COLL_DTYPES, REDOPS, address, call, coll_dtype, enum, numel


def _bufs(what, dst, src):
    d, ddt = address(dst, what + " dst")
    s, sdt = address(src, what + " src")
    dt = sdt or ddt
    if dt is None:
        raise TypeError("%s: raw pointers carry no element type: pass buffers or elements" % what)
    if ddt is not None and sdt is not None and ddt != sdt:
        raise TypeError("%s: dst is %s but src is %s" % (what, ddt, sdt))
    return d, s, coll_dtype(dt, what)


def _count(what, count, default):
    if count is not None:
        return count
    if default is None:
        raise TypeError("%s: give count (elements)" % what)
    return default


def _grid(block, nblocks):
    if block is None:
        block = T.call_extern("int32", "symm_tl_block")
    if nblocks is None:
        nblocks = T.call_extern("int32", "symm_tl_nblocks")
    return [block, nblocks]


def _reduce(kind, scope, ctx, dst, src, count, op, acc, algo, block, nblocks, default):
    what = "%s_%s" % (kind, scope)
    d, s, dt = _bufs(what, dst, src)
    args = [d, s, _count(what, count, default), dt, enum(op, REDOPS, what + " op")]
    name = kind
    if acc is not None or algo is not None:
        name += "_ex"
        args += [-1 if acc is None else enum(acc, COLL_DTYPES, what + " acc"),
                 enum("auto" if algo is None else algo, ALGOS, what + " algo")]
    if scope == "grid":
        args += _grid(block, nblocks)
    return call("handle", "%s_%s" % (name, scope), ctx, *args)


def all_reduce_block(ctx, dst, src, count=None, op="sum", acc=None, algo=None):
    """dst[i] = op over PEs of src[i] (in place allowed)."""
    return _reduce("all_reduce", "block", ctx, dst, src, count, op, acc, algo, None, None, numel(src))


def all_reduce_grid(ctx, dst, src, count=None, op="sum", acc=None, algo=None, block=None, nblocks=None):
    return _reduce("all_reduce", "grid", ctx, dst, src, count, op, acc, algo, block, nblocks, numel(src))


def reduce_scatter_block(ctx, dst, src, count=None, op="sum", acc=None, algo=None):
    """src holds n_pes pieces of count elements; PE r gets the reduction of piece r."""
    return _reduce("reduce_scatter", "block", ctx, dst, src, count, op, acc, algo, None, None, numel(dst))


def reduce_scatter_grid(ctx, dst, src, count=None, op="sum", acc=None, algo=None, block=None,
                        nblocks=None):
    return _reduce("reduce_scatter", "grid", ctx, dst, src, count, op, acc, algo, block, nblocks,
                   numel(dst))


def _move(kind, scope, ctx, dst, src, count, default, extra, block, nblocks):
    what = "%s_%s" % (kind, scope)
    d, s, dt = _bufs(what, dst, src)
    args = [d, s, _count(what, count, default), dt] + extra
    if scope == "grid":
        args += _grid(block, nblocks)
    return call("handle", what, ctx, *args)


def all_gather_block(ctx, dst, src, count=None):
    """dst (n_pes * count elements) gets PE p's src at p * count."""
    return _move("all_gather", "block", ctx, dst, src, count, numel(src), [], None, None)


def all_gather_grid(ctx, dst, src, count=None, block=None, nblocks=None):
    return _move("all_gather", "grid", ctx, dst, src, count, numel(src), [], block, nblocks)


def all_to_all_block(ctx, dst, src, count):
    """Block p of src (count elements) goes to PE p, landing at block my_pe of its dst."""
    return _move("all_to_all", "block", ctx, dst, src, count, None, [], None, None)


def all_to_all_grid(ctx, dst, src, count, block=None, nblocks=None):
    return _move("all_to_all", "grid", ctx, dst, src, count, None, [], block, nblocks)


def broadcast_block(ctx, dst, src, count=None, root=0):
    """dst of every PE gets count elements of root's src."""
    return _move("broadcast", "block", ctx, dst, src, count, numel(src), [root], None, None)


def broadcast_grid(ctx, dst, src, count=None, root=0, block=None, nblocks=None):
    return _move("broadcast", "grid", ctx, dst, src, count, numel(src), [root], block, nblocks)


def _allv(scope, ctx, dst, src, send_counts, send_displs, recv_counts, recv_displs, block, nblocks):
    what = "all_to_allv_" + scope
    d, s, dt = _bufs(what, dst, src)
    arrays = []
    for name, x in (("send_counts", send_counts), ("send_displs", send_displs),
                    ("recv_counts", recv_counts), ("recv_displs", recv_displs)):
        a, adt = address(x, "%s %s" % (what, name))
        if adt is not None and adt != "uint64":
            raise TypeError("%s: %s must be a uint64 buffer (n_pes entries), got %s" % (what, name, adt))
        arrays.append(a)
    args = [d, s] + arrays + [dt]
    if scope == "grid":
        args += _grid(block, nblocks)
    return call("handle", what, ctx, *args)


def all_to_allv_block(ctx, dst, src, send_counts, send_displs, recv_counts, recv_displs):
    """All-to-all with per-PE counts and displacements (uint64 buffers of
    n_pes entries, in elements)."""
    return _allv("block", ctx, dst, src, send_counts, send_displs, recv_counts, recv_displs, None, None)


def all_to_allv_grid(ctx, dst, src, send_counts, send_displs, recv_counts, recv_displs, block=None,
                     nblocks=None):
    return _allv("grid", ctx, dst, src, send_counts, send_displs, recv_counts, recv_displs, block,
                 nblocks)


def coll_barrier_block(ctx):
    """The calling block waits for the calling block of every PE."""
    return call("handle", "coll_barrier_block", ctx)


def coll_barrier_grid(ctx, block=None, nblocks=None):
    """Every block of the grid on every PE waits for all (co-resident grid)."""
    return call("handle", "coll_barrier_grid", ctx, *_grid(block, nblocks))


__all__ = ["all_reduce_block", "all_reduce_grid", "reduce_scatter_block", "reduce_scatter_grid",
           "all_gather_block", "all_gather_grid", "all_to_all_block", "all_to_all_grid",
           "broadcast_block", "broadcast_grid", "all_to_allv_block", "all_to_allv_grid",
           "coll_barrier_block", "coll_barrier_grid"]
