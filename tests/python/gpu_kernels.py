"""Triton kernels exercising every symm.triton function, for test_gpu_triton.py
(and compiled without a GPU by test_triton_aot.py's example check).

Typed families take the symm.triton function as a constexpr argument (FN),
so one kernel serves every type. Each kernel is one program unless it says
otherwise; `ctx` is symm.ctx().
"""
import triton
import triton.language as tl

import symm.triton as st


@triton.jit
def k_ctx(ctx, out, ptr_in, ptr_out):
    tl.store(out + 0, st.my_pe(ctx))
    tl.store(out + 1, st.n_pes(ctx))
    nxt = (st.my_pe(ctx) + 1) % st.n_pes(ctx)
    tl.store(ptr_out, st.ctx_ptr(ctx, ptr_in, nxt).to(tl.int64))


# ---- p / g: one element per program --------------------------------------------

@triton.jit(do_not_specialize=["pe"])
def k_p(ctx, dest, vals, pe, FN: tl.constexpr):
    i = tl.program_id(0)
    FN(ctx, dest + i, tl.load(vals + i), pe)


@triton.jit(do_not_specialize=["pe"])
def k_g(ctx, src, out, pe, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, FN(ctx, src + offs, pe))   # element-wise, every thread


@triton.jit(do_not_specialize=["pe"])
def k_g_scalar(ctx, src, out, pe, FN: tl.constexpr):
    i = tl.program_id(0)
    tl.store(out + i, FN(ctx, src + i, pe))


# ---- bulk put / get, with the quiet that completes nbi forms -----------------------

@triton.jit(do_not_specialize=["pe"])
def k_copy(ctx, dest, src, nbytes, pe, FN: tl.constexpr, QUIET: tl.constexpr):
    FN(ctx, dest, src, nbytes, pe)
    if QUIET is not None:
        QUIET(ctx)


# ---- put with signal: send to the next PE, wait for the previous one ---------------

@triton.jit(do_not_specialize=["nxt"])
def k_put_signal(ctx, dest, src, nbytes, sig, value, sig_op, wait_for, recv, out, nxt,
                 FN: tl.constexpr, BLOCK: tl.constexpr):
    FN(ctx, dest, src, nbytes, sig, value, sig_op, nxt)
    got = st.signal_wait_until(ctx, sig, st.CMP_GE, wait_for)
    tl.store(out, got)
    # the data is visible once the signal is: copy it out in the same kernel
    for start in range(0, nbytes, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        tl.store(recv + offs, tl.load(dest + offs, mask=offs < nbytes), mask=offs < nbytes)


# ---- signals --------------------------------------------------------------------------

@triton.jit
def k_signals(ctx, sig_add, sig_set, add_target, set_value, out):
    me = st.my_pe(ctx)
    n = st.n_pes(ctx)
    for q in range(0, n):
        st.signal_op(ctx, sig_add, me + 1, st.SIGNAL_ADD, q)
    st.signal_op(ctx, sig_set, set_value + me, st.SIGNAL_SET, (me + 1) % n)
    a = st.signal_wait_until(ctx, sig_add, st.CMP_EQ, add_target)
    want = set_value + (me + n - 1) % n
    b = st.signal_wait_until(ctx, sig_set, st.CMP_EQ, want)
    tl.store(out + 0, a)
    tl.store(out + 1, b)
    tl.store(out + 2, st.signal_fetch(ctx, sig_add))


@triton.jit
def k_wait_until(ctx, ivar, value, out, STORE: tl.constexpr, WAIT: tl.constexpr):
    me = st.my_pe(ctx)
    n = st.n_pes(ctx)
    STORE(ctx, ivar, value + me, (me + 1) % n, st.SEM_RELEASE, st.SCOPE_SYS)
    tl.store(out, WAIT(ctx, ivar, st.CMP_EQ, value + (me + n - 1) % n))


# ---- remote ld / st with every ordering ---------------------------------------------

@triton.jit(do_not_specialize=["pe"])
def k_st_all(ctx, dest, vals, pe, FN: tl.constexpr):
    # slot s*3 + c: stored with sem s (WEAK, RELAXED, RELEASE, VOLATILE) at scope c
    for s in tl.static_range(4):
        for c in tl.static_range(3):
            # sem s + (s >= 2): WEAK, RELAXED, RELEASE, VOLATILE
            FN(ctx, dest + s * 3 + c, tl.load(vals + s * 3 + c), pe, s + (s >= 2), c)


@triton.jit(do_not_specialize=["pe"])
def k_ld_all(ctx, src, out, pe, FN: tl.constexpr):
    for s in tl.static_range(4):
        for c in tl.static_range(3):
            # sem s + (s >= 3): WEAK, RELAXED, ACQUIRE, VOLATILE
            tl.store(out + s * 3 + c, FN(ctx, src + s * 3 + c, pe, s + (s >= 3), c))


# ---- atomics ------------------------------------------------------------------------

@triton.jit(do_not_specialize=["pe"])
def k_fetch_op(ctx, target, value, pe, outs, FN: tl.constexpr, NT: tl.constexpr,
               PER_PROGRAM: tl.constexpr):
    """Every program applies FN once (with value + program id when
    PER_PROGRAM); every thread records the result it got."""
    pid = tl.program_id(0)
    v = value
    if PER_PROGRAM:
        v = value + pid
    r = FN(ctx, target, v, pe)
    tl.store(outs + pid * NT + tl.arange(0, NT), r + tl.zeros((NT,), r.dtype))


@triton.jit(do_not_specialize=["pe"])
def k_fetch_inc(ctx, target, pe, outs, FN: tl.constexpr, NT: tl.constexpr):
    r = FN(ctx, target, pe)
    pid = tl.program_id(0)
    tl.store(outs + pid * NT + tl.arange(0, NT), r + tl.zeros((NT,), r.dtype))


@triton.jit(do_not_specialize=["pe"])
def k_op(ctx, target, value, pe, FN: tl.constexpr):
    FN(ctx, target, value, pe)


@triton.jit(do_not_specialize=["pe"])
def k_inc(ctx, target, pe, FN: tl.constexpr):
    FN(ctx, target, pe)


@triton.jit(do_not_specialize=["pe"])
def k_cas(ctx, target, cond, value, pe, outs, FN: tl.constexpr):
    tl.store(outs + tl.program_id(0), FN(ctx, target, cond, value, pe))


@triton.jit(do_not_specialize=["pe"])
def k_fetch(ctx, target, pe, out, FN: tl.constexpr):
    tl.store(out + tl.program_id(0), FN(ctx, target, pe))


# ---- fence / quiet between dependent stores ----------------------------------------

@triton.jit(do_not_specialize=["pe"])
def k_ordered_p(ctx, data, flag, vals, n, pe, ORDER: tl.constexpr):
    """Thread-0 p's of the data, ORDER (fence or quiet, any scope), then the
    flag: a PE that sees the flag with an acquire load sees the data."""
    for i in range(0, n):
        st.p_i32(ctx, data + i, tl.load(vals + i), pe)
    ORDER(ctx)
    st.p_i32(ctx, flag, 1, pe)


@triton.jit
def k_await_flag(ctx, data, flag, out, n, BLOCK: tl.constexpr):
    st.wait_until_i32(ctx, flag, st.CMP_EQ, 1)
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(data + offs, mask=offs < n), mask=offs < n)


# ---- device barriers ----------------------------------------------------------------

@triton.jit
def k_barrier(ctx, slots, out, rounds, BARRIER: tl.constexpr, NT: tl.constexpr):
    """Each round every thread stores round-stamped values into the next PE's
    slots; after the barrier every thread reads what the previous PE stored."""
    me = st.my_pe(ctx)
    n = st.n_pes(ctx)
    peer = st.peer_ptr(ctx, slots, (me + 1) % n)
    offs = tl.arange(0, NT)
    bad = tl.zeros((NT,), tl.int32)
    for r in range(0, rounds):
        tl.store(peer + (r % 2) * NT + offs, r * 1000 + me * 10 + offs % 7)
        BARRIER(ctx)
        got = tl.load(slots + (r % 2) * NT + offs, volatile=True)
        want = r * 1000 + ((me + n - 1) % n) * 10 + offs % 7
        bad += (got != want).to(tl.int32)
    tl.store(out + offs, bad)


@triton.jit
def k_barrier_put(ctx, slots, stage, out, rounds, BARRIER: tl.constexpr, NT: tl.constexpr):
    """k_barrier where the next PE is not reachable by load/store (its pointer
    is NULL): each round's values go there with put_block from a local row."""
    me = st.my_pe(ctx)
    n = st.n_pes(ctx)
    nxt = (me + 1) % n
    offs = tl.arange(0, NT)
    bad = tl.zeros((NT,), tl.int32)
    for r in range(0, rounds):
        row = (r % 2) * NT
        tl.store(stage + row + offs, r * 1000 + me * 10 + offs % 7)
        tl.debug_barrier()
        st.put_block(ctx, slots + row, stage + row, NT * 4, nxt)
        BARRIER(ctx)
        got = tl.load(slots + row + offs, volatile=True)
        want = r * 1000 + ((me + n - 1) % n) * 10 + offs % 7
        bad += (got != want).to(tl.int32)
    tl.store(out + offs, bad)


@triton.jit
def k_coll_barrier_grid(ctx, slots, out, rounds, NT: tl.constexpr):
    pid = tl.program_id(0)
    nb = tl.num_programs(0)
    me = st.my_pe(ctx)
    n = st.n_pes(ctx)
    peer = st.peer_ptr(ctx, slots, (me + 1) % n)
    offs = tl.arange(0, NT)
    bad = tl.zeros((NT,), tl.int32)
    for r in range(0, rounds):
        base = ((r % 2) * nb + pid) * NT
        tl.store(peer + base + offs, r * 1000 + me * 10 + pid)
        st.coll_barrier_grid(ctx, pid, nb)
        got = tl.load(slots + base + offs, volatile=True)
        bad += (got != r * 1000 + ((me + n - 1) % n) * 10 + pid).to(tl.int32)
    tl.store(out + pid * NT + offs, bad)


# ---- device collectives ---------------------------------------------------------------

@triton.jit
def k_coll(ctx, dest, src, count, FN: tl.constexpr, DT: tl.constexpr, OP: tl.constexpr,
           KIND: tl.constexpr, ALGO: tl.constexpr):
    """KIND 0: reduce (dest, src, count, dtype, op); 1: ..._ex with ALGO;
    2: data movement (dest, src, count, dtype); 3: broadcast from root OP.
    k_coll_grid: the same for the _grid forms, one share per program."""
    if KIND == 0:
        FN(ctx, dest, src, count, DT, OP)
    elif KIND == 1:
        FN(ctx, dest, src, count, DT, OP, st.DTYPE_DEFAULT, ALGO)
    elif KIND == 2:
        FN(ctx, dest, src, count, DT)
    else:
        FN(ctx, dest, src, count, DT, OP)


@triton.jit
def k_coll_grid(ctx, dest, src, count, FN: tl.constexpr, DT: tl.constexpr, OP: tl.constexpr,
                KIND: tl.constexpr, ALGO: tl.constexpr):
    pid = tl.program_id(0)
    nb = tl.num_programs(0)
    if KIND == 0:
        FN(ctx, dest, src, count, DT, OP, pid, nb)
    elif KIND == 1:
        FN(ctx, dest, src, count, DT, OP, st.DTYPE_DEFAULT, ALGO, pid, nb)
    elif KIND == 2:
        FN(ctx, dest, src, count, DT, pid, nb)
    else:
        FN(ctx, dest, src, count, DT, OP, pid, nb)


@triton.jit
def k_all_to_allv(ctx, dest, src, sc, sd, rc, rd, FN: tl.constexpr, DT: tl.constexpr,
                  GRID: tl.constexpr):
    if GRID:
        FN(ctx, dest, src, sc, sd, rc, rd, DT, tl.program_id(0), tl.num_programs(0))
    else:
        FN(ctx, dest, src, sc, sd, rc, rd, DT)
