"""Waits, loads and stores with scope and ordering, fences and barriers."""
import tilelang.language as T

from ._args import (AMO_TYPES, CMPS, LDST_TYPES, SCOPES, SEMS, address, call, element, enum,
                    pe_expr, typed)


def _is_local(peer):
    return peer is None or (isinstance(peer, int) and peer == -1)


def wait_until(ctx, value, cmp, expected, peer=-1):
    """Spin until (value cmp expected) holds, with acquire semantics at
    system scope, honouring symm's deadline and abort flag; returns the value
    that satisfied it. `value` is an element (buf[i]) of a 32/64-bit integer
    buffer; peer -1 waits on this PE's word (symm_wait_until_<T>), another PE
    polls that PE's copy over NVLink. Every thread that reaches it waits."""
    addr, sfx = element(value, AMO_TYPES, "wait")
    c = enum(cmp, CMPS, "wait cmp")
    dt = address(value, "wait")[1]
    if _is_local(peer):
        return call(dt, "wait_until_" + sfx, ctx, addr, c, typed(expected, sfx))
    return T.call_extern(dt, "symm_tl_wait_peer_" + sfx, ctx, addr, c, typed(expected, sfx), peer)


def wait_eq(ctx, value, expected, peer=-1):
    """Wait until value == expected (see wait_until)."""
    return wait_until(ctx, value, "eq", expected, peer)


def wait_ne(ctx, value, expected, peer=-1):
    """Wait until value != expected (see wait_until)."""
    return wait_until(ctx, value, "ne", expected, peer)


def wait_gt(ctx, value, expected, peer=-1):
    """Wait until value > expected (see wait_until)."""
    return wait_until(ctx, value, "gt", expected, peer)


def wait_ge(ctx, value, expected, peer=-1):
    """Wait until value >= expected (see wait_until)."""
    return wait_until(ctx, value, "ge", expected, peer)


def wait_lt(ctx, value, expected, peer=-1):
    """Wait until value < expected (see wait_until)."""
    return wait_until(ctx, value, "lt", expected, peer)


def wait_le(ctx, value, expected, peer=-1):
    """Wait until value <= expected (see wait_until)."""
    return wait_until(ctx, value, "le", expected, peer)


REC_WORDS = 8   # SYMM_TL_REC_WORDS: uint64 words of a wait record


def wait_rec(ctx, value, cmp, expected, rec):
    """wait_until on this PE's word for kernels that issue wgmma (T.gemm on
    sm_90): the same acquire spin-wait, deadline and abort flag, but with no
    function call in the kernel (ptxas serialises every wgmma of a kernel that
    has one, and symm's waits print through one). A wait that gives up writes
    what it waited for into `rec` (a zeroed uint64 buffer of REC_WORDS words)
    and returns, as does every later wait that sees the record; wait_report
    in a kernel launched after this one then prints symm's message and traps.
    Every thread that reaches it waits; returns the value seen."""
    addr, sfx = element(value, AMO_TYPES, "wait_rec")
    raddr, rdt = address(rec, "wait_rec record")
    if rdt is not None and rdt != "uint64":
        raise TypeError("wait_rec: the record is a uint64 buffer, got %s" % rdt)
    dt = address(value, "wait_rec")[1]
    return T.call_extern(dt, "symm_tl_wait_rec_" + sfx, ctx, addr, enum(cmp, CMPS, "wait_rec cmp"),
                         typed(expected, sfx), raddr)


def wait_report(ctx, rec):
    """Print symm's timeout or abort message and trap if a wait_rec of an
    earlier kernel gave up; nothing otherwise."""
    raddr, rdt = address(rec, "wait_report record")
    if rdt is not None and rdt != "uint64":
        raise TypeError("wait_report: the record is a uint64 buffer, got %s" % rdt)
    return T.call_extern("handle", "symm_tl_wait_report", ctx, raddr)


def add_release(word, value):
    """Add value to this PE's 64-bit word (buf[i] of a uint64 buffer), released
    at system scope after the thread's earlier stores (and, behind a block
    barrier, the block's): a count of finished work that a stream wait
    (cuStreamWaitValue64) or an acquire sees with everything before it. No
    call, so kernels that issue wgmma may use it (see wait_rec)."""
    addr, sfx = element(word, ("u64",), "add_release")
    return T.call_extern("handle", "symm_tl_add_release_u64", addr, typed(value, sfx))


def fence_proxy_async_global():
    """Order this thread's earlier generic memory accesses (a wait's acquire)
    before its later TMA (async-proxy) accesses to global memory."""
    return T.call_extern("handle", "symm_tl_fence_proxy_async_global")


def signal_wait_until(ctx, sig, cmp, value):
    """Wait until the local 64-bit signal word satisfies (cmp, value)
    (acquire; symm_signal_wait_until); returns the value seen."""
    addr, dtype = address(sig, "signal_wait_until sig")
    if dtype is not None and dtype != "uint64":
        raise TypeError("signal_wait_until: signal words are uint64 buffers, got %s" % dtype)
    return call("uint64", "signal_wait_until", ctx, addr, enum(cmp, CMPS, "signal_wait_until cmp"),
                typed(value, "u64"))


def ld(ctx, src, scope="gpu", sem="weak", src_pe=-1):
    """Load src (buf[i]) of PE src_pe (-1: this PE) with ordering `sem`
    (weak, relaxed, acquire, volatile) at `scope` (cta, gpu, sys); returns
    the value (symm_ld_<T>). 32/64-bit integer and float elements."""
    addr, sfx = element(src, LDST_TYPES, "ld")
    sm = enum(sem, SEMS, "ld sem")
    if sm == SEMS["release"]:
        raise ValueError("ld: a load cannot release (sem is weak, relaxed, acquire or volatile)")
    return call(address(src, "ld")[1], "ld_" + sfx, ctx, addr, pe_expr(ctx, src_pe), sm,
                enum(scope, SCOPES, "ld scope"))


def st(ctx, dst, value, scope="gpu", sem="weak", dst_pe=-1):
    """Store value into dst (buf[i]) of PE dst_pe (-1: this PE) with ordering
    `sem` (weak, relaxed, release, volatile) at `scope` (cta, gpu, sys)
    (symm_st_<T>). A release store at sys scope publishes the thread's
    earlier stores to whoever acquires the new value."""
    addr, sfx = element(dst, LDST_TYPES, "st")
    sm = enum(sem, SEMS, "st sem")
    if sm == SEMS["acquire"]:
        raise ValueError("st: a store cannot acquire (sem is weak, relaxed, release or volatile)")
    return call("handle", "st_" + sfx, ctx, addr, typed(value, sfx), pe_expr(ctx, dst_pe), sm,
                enum(scope, SCOPES, "st scope"))


# OpenSHMEM ordering (symm_fence* / symm_quiet*)
def fence(ctx):
    """The caller's puts/stores/atomics to each PE before it are delivered
    before those after it (fence.acq_rel.sys)."""
    return call("handle", "fence", ctx)


def fence_warp(ctx):
    """fence for a whole warp (its 32 lanes together): every lane's puts,
    stores and atomics to each PE before it are delivered before any lane's
    after it (fence.acq_rel.sys in each lane, then a warp barrier).
    Nothing is waited for."""
    return call("handle", "fence_warp", ctx)


def fence_block(ctx):
    """fence for a whole block (every thread together): the block's puts,
    stores and atomics to each PE before it are delivered before any
    thread's after it, so one thread's signal to that PE after it follows
    the block's puts (fence.acq_rel.sys in each thread, then a block
    barrier). Nothing is waited for: use quiet_block to know the puts are
    complete everywhere (and their sources reusable)."""
    return call("handle", "fence_block", ctx)


def quiet(ctx):
    """Every earlier put/store/atomic of the caller is complete and visible
    to every PE (fence.sc.sys)."""
    return call("handle", "quiet", ctx)


def quiet_warp(ctx):
    """quiet for a whole warp (its 32 lanes together): every put, store and
    atomic any lane issued before it is complete and visible to every PE,
    and the sources of nbi puts may be reused, when any lane goes on."""
    return call("handle", "quiet_warp", ctx)


def quiet_block(ctx):
    """quiet for a whole block (every thread together): every put, store
    and atomic any thread of the block issued before it is complete and
    visible to every PE when any thread goes on (one fence.sc.sys between
    two block barriers), so a signal by one thread after it publishes the
    whole block's data, and nbi puts' sources may be reused."""
    return call("handle", "quiet_block", ctx)


# TileScale's memory fences by scope: CUDA's own, no communication involved
def fence_cta():
    """Memory fence at block scope (__threadfence_block)."""
    return T.call_extern("handle", "__threadfence_block")


def fence_gpu():
    """Memory fence at GPU scope (__threadfence)."""
    return T.call_extern("handle", "__threadfence")


def fence_sys():
    """Memory fence at system scope (__threadfence_system): orders the
    thread's stores to peers' memory too."""
    return T.call_extern("handle", "__threadfence_system")


# Barriers across the PEs of the team (symm_barrier*, symm_sync_block)
def barrier(ctx):
    """One thread per PE: quiet, then wait for every PE (symm_barrier)."""
    return call("handle", "barrier", ctx)


def barrier_warp(ctx):
    """One warp per PE, its 32 lanes together: quiet, then wait for every
    PE (symm_barrier_warp); every PE's earlier puts are visible after it.
    barrier, barrier_warp and barrier_block share one state per team: one
    caller per PE at a time."""
    return call("handle", "barrier_warp", ctx)


def barrier_block(ctx):
    """One block per PE, every thread: quiet, then wait for every PE; all
    puts of every PE are visible after it (symm_barrier_block)."""
    return call("handle", "barrier_block", ctx)


def sync_block(ctx):
    """barrier_block without the quiet (the block's stores are still
    released before the arrival; symm_sync_block)."""
    return call("handle", "sync_block", ctx)


def barrier_blocks(ctx):
    """Every block of the grid on every PE waits for all of them, and every
    store before it by any of them is visible after it (TileScale's
    barrier_blocks; symm_coll_barrier_grid with this block's index). The
    grid must be co-resident (at most one wave) and under 256 blocks."""
    return T.call_extern("handle", "symm_tl_barrier_blocks", ctx)


__all__ = ["REC_WORDS", "wait_rec", "wait_report", "add_release", "fence_proxy_async_global", "wait_until", "wait_eq", "wait_ne", "wait_gt", "wait_ge", "wait_lt", "wait_le",
           "signal_wait_until", "ld", "st", "fence", "fence_warp", "fence_block", "quiet",
           "quiet_warp", "quiet_block", "fence_cta", "fence_gpu", "fence_sys", "barrier",
           "barrier_warp", "barrier_block", "sync_block", "barrier_blocks"]
