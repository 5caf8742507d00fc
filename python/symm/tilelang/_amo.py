"""Atomics on PE pe's copy of an element (relaxed, system scope, performed
at the target; order them with fence / quiet). 32/64-bit integers; pe -1 is
this PE. Each thread that reaches a call performs it."""
from ._args import AMO_TYPES, address, call, element, pe_expr, typed


def _amo(op, ctx, dst, pe, *values, fetch):
    addr, sfx = element(dst, AMO_TYPES, "atomic_" + op)
    ret = address(dst, op)[1] if fetch else "handle"
    return call(ret, "atomic_%s_%s" % (op, sfx), ctx, addr, *[typed(v, sfx) for v in values],
                pe_expr(ctx, pe))


def atomic_fetch(ctx, src, pe=-1):
    """Atomic read."""
    return _amo("fetch", ctx, src, pe, fetch=True)


def atomic_set(ctx, dst, value, pe=-1):
    return _amo("set", ctx, dst, pe, value, fetch=False)


def atomic_swap(ctx, dst, value, pe=-1):
    """Store value, return the old one."""
    return _amo("swap", ctx, dst, pe, value, fetch=True)


def atomic_compare_swap(ctx, dst, cond, value, pe=-1):
    """Store value if the word equals cond; return the old word."""
    return _amo("compare_swap", ctx, dst, pe, cond, value, fetch=True)


def atomic_inc(ctx, dst, pe=-1):
    return _amo("inc", ctx, dst, pe, fetch=False)


def atomic_fetch_inc(ctx, dst, pe=-1):
    return _amo("fetch_inc", ctx, dst, pe, fetch=True)


def atomic_add(ctx, dst, value, pe=-1):
    return _amo("add", ctx, dst, pe, value, fetch=False)


def atomic_fetch_add(ctx, dst, value, pe=-1):
    return _amo("fetch_add", ctx, dst, pe, value, fetch=True)


def atomic_and(ctx, dst, value, pe=-1):
    return _amo("and", ctx, dst, pe, value, fetch=False)


def atomic_fetch_and(ctx, dst, value, pe=-1):
    return _amo("fetch_and", ctx, dst, pe, value, fetch=True)


def atomic_or(ctx, dst, value, pe=-1):
    return _amo("or", ctx, dst, pe, value, fetch=False)


def atomic_fetch_or(ctx, dst, value, pe=-1):
    return _amo("fetch_or", ctx, dst, pe, value, fetch=True)


def atomic_xor(ctx, dst, value, pe=-1):
    return _amo("xor", ctx, dst, pe, value, fetch=False)


def atomic_fetch_xor(ctx, dst, value, pe=-1):
    return _amo("fetch_xor", ctx, dst, pe, value, fetch=True)


__all__ = ["atomic_fetch", "atomic_set", "atomic_swap", "atomic_compare_swap", "atomic_inc",
           "atomic_fetch_inc", "atomic_add", "atomic_fetch_add", "atomic_and", "atomic_fetch_and",
           "atomic_or", "atomic_fetch_or", "atomic_xor", "atomic_fetch_xor"]
