/*
 * device/impl_rma.h - context queries, peer addresses, p/g, put/get at
 * thread, warp and block scope, put_signal, and the signal calls.
 */
#ifndef SYMM_DEVICE_IMPL_RMA_H
#define SYMM_DEVICE_IMPL_RMA_H

/* ---- peers ----------------------------------------------------------------- */

/* PE pe's copy of p, for the public calls (put/get, p/g, ld/st, atomics). */
SYMM__DEVICE_INTERNAL void *symm__peer_api(const symm_ctx_t *ctx, const void *p, int pe) {
    int32_t my;
    int64_t stride;
    symm__ctx_pe_stride(ctx, &my, &stride);
    return (void *)((uintptr_t)p + (uintptr_t)((int64_t)(pe - my) * stride));
}

/* The same with plain loads of the context, for the collectives and the
 * barrier: their kernels take the context as a __grid_constant__ parameter,
 * where the address-space test cannot fold and only costs registers. */
SYMM__DEVICE_INTERNAL void *symm__peer(const symm_ctx_t *ctx, const void *p, int pe) {
    return (void *)((uintptr_t)p + (uintptr_t)((int64_t)(pe - ctx->my_pe) * ctx->stride));
}

/* PE pe's copy of p at an address this GPU loads and stores: the window's
 * arithmetic, else the backend's own address for it, else NULL (the call
 * then goes through the backend's library, backend/dispatch.h). */
SYMM__DEVICE_INTERNAL void *symm__addr(const symm_ctx_t *ctx, const void *p, int pe) {
    if (symm__ldst_peer(ctx, pe))
        return symm__peer_api(ctx, p, pe);
    return symm__far_ptr(ctx, p, pe);
}

SYMM_DEVICE_FN int symm_ctx_my_pe(const symm_ctx_t *ctx) {
    int32_t my;
    int64_t stride;
    symm__ctx_pe_stride(ctx, &my, &stride);
    return my;
}

SYMM_DEVICE_FN int symm_ctx_n_pes(const symm_ctx_t *ctx) {
    int32_t n;
    uint64_t base, size;
    symm__ctx_range(ctx, &n, &base, &size);
    return n;
}

SYMM_DEVICE_FN void *symm_ctx_ptr(const symm_ctx_t *ctx, const void *ptr, int pe) {
    uintptr_t a = (uintptr_t)ptr;
    int32_t n;
    uint64_t base, size;
    symm__ctx_range(ctx, &n, &base, &size);
    if (pe < 0 || pe >= n)
        return NULL;
    if (a < base || a - base >= size)
        return NULL;
    return symm__addr(ctx, ptr, pe);
}

/* ---- p and g ------------------------------------------------------------------ */

/* Bits of each RMA type, and conversions to/from the register that carries
 * them (sub-word values travel zero-extended in 32 bits). */
#define SYMM__W_i8  8
#define SYMM__W_u8  8
#define SYMM__W_i16 16
#define SYMM__W_u16 16
#define SYMM__W_i32 32
#define SYMM__W_u32 32
#define SYMM__W_f32 32
#define SYMM__W_i64 64
#define SYMM__W_u64 64
#define SYMM__W_f64 64

SYMM__DEVICE_INTERNAL uint32_t symm__f32_bits(float f) {
    union { float f; uint32_t u; } c;
    c.f = f;
    return c.u;
}
SYMM__DEVICE_INTERNAL float symm__bits_f32(uint32_t u) {
    union { float f; uint32_t u; } c;
    c.u = u;
    return c.f;
}
SYMM__DEVICE_INTERNAL uint64_t symm__f64_bits(double f) {
    union { double f; uint64_t u; } c;
    c.f = f;
    return c.u;
}
SYMM__DEVICE_INTERNAL double symm__bits_f64(uint64_t u) {
    union { double f; uint64_t u; } c;
    c.u = u;
    return c.f;
}

#define SYMM__TOBITS_i8(x)    ((uint32_t)(uint8_t)(x))
#define SYMM__TOBITS_u8(x)    ((uint32_t)(x))
#define SYMM__TOBITS_i16(x)   ((uint32_t)(uint16_t)(x))
#define SYMM__TOBITS_u16(x)   ((uint32_t)(x))
#define SYMM__TOBITS_i32(x)   ((uint32_t)(x))
#define SYMM__TOBITS_u32(x)   (x)
#define SYMM__TOBITS_f32(x)   symm__f32_bits(x)
#define SYMM__TOBITS_i64(x)   ((uint64_t)(x))
#define SYMM__TOBITS_u64(x)   (x)
#define SYMM__TOBITS_f64(x)   symm__f64_bits(x)
#define SYMM__FROMBITS_i8(x)  ((int8_t)(uint8_t)(x))
#define SYMM__FROMBITS_u8(x)  ((uint8_t)(x))
#define SYMM__FROMBITS_i16(x) ((int16_t)(uint16_t)(x))
#define SYMM__FROMBITS_u16(x) ((uint16_t)(x))
#define SYMM__FROMBITS_i32(x) ((int32_t)(x))
#define SYMM__FROMBITS_u32(x) (x)
#define SYMM__FROMBITS_f32(x) symm__bits_f32(x)
#define SYMM__FROMBITS_i64(x) ((int64_t)(x))
#define SYMM__FROMBITS_u64(x) (x)
#define SYMM__FROMBITS_f64(x) symm__bits_f64(x)

#define SYMM__CAT_(a, b) a##b
#define SYMM__CAT(a, b) SYMM__CAT_(a, b)

/* p is a relaxed system-scope store: a strong store, so a peer polling the
 * word sees it without further help, but not ordered against other stores
 * (fence/quiet do that). g is a relaxed system-scope load: it always reads
 * the peer's memory, never a stale cached line. */
/* The unsigned type of each width, for values that come back from a backend. */
#define SYMM__BITS_T(S) SYMM__CAT(SYMM__CAT(uint, SYMM__W_##S), _t)

#define SYMM__DEFINE_PG(S, T)                                                                \
    SYMM_DEVICE_FN void symm_p_##S(const symm_ctx_t *ctx, T *dest, T value, int pe) {       \
        void *q = symm__addr(ctx, dest, pe);                                                 \
        if (q)                                                                              \
            SYMM__CAT(symm__st_b, SYMM__W_##S)(q, SYMM__TOBITS_##S(value), SYMM_SEM_RELAXED, \
                                               SYMM_SCOPE_SYS);                             \
        else                                                                                \
            symm__far_p(ctx, dest, (uint64_t)SYMM__TOBITS_##S(value), SYMM__W_##S, pe);      \
    }                                                                                       \
    SYMM_DEVICE_FN T symm_g_##S(const symm_ctx_t *ctx, const T *src, int pe) {              \
        const void *q = symm__addr(ctx, src, pe);                                            \
        if (q)                                                                              \
            return SYMM__FROMBITS_##S(SYMM__CAT(symm__ld_b, SYMM__W_##S)(q, SYMM_SEM_RELAXED, \
                                                                         SYMM_SCOPE_SYS));   \
        return SYMM__FROMBITS_##S((SYMM__BITS_T(S))symm__far_g(ctx, src, SYMM__W_##S, pe)); \
    }
SYMM_FOR_EACH_RMA_TYPE(SYMM__DEFINE_PG)
#undef SYMM__DEFINE_PG

/* ---- put and get ----------------------------------------------------------------- */

/* The data movement of every put (put != 0: dest is symmetric) and get (src
 * is), shared by `nlanes` threads of which this is `lane`. When dest, src and
 * the stride are multiples of 16, so is the peer address: the body is the bare
 * 16-byte loop and the last lane copies the tail (below 16 bytes), the peer
 * address computed only by the lanes that move something. A block-scope call
 * runs this in every warp of the block, and a small one leaves most warps
 * idle, so what an idle warp executes per call is paid many times over: here
 * two compares. Other alignments take the general copy. */
SYMM__DEVICE_INTERNAL void symm__rma_data(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes,
                                          int pe, uint32_t lane, uint32_t nlanes, int put) {
    int32_t my;
    int64_t stride;
    symm__ctx_pe_stride(ctx, &my, &stride);
    if ((((uint32_t)(uintptr_t)dest | (uint32_t)(uintptr_t)src | (uint32_t)stride) & 15u) == 0) {
        const size_t nvec = nbytes >> 4, tail = nbytes & 15;
        const int has_vec = lane < nvec, has_tail = tail != 0 && lane == nlanes - 1;
        if (has_vec || has_tail) {
            const uintptr_t off = (uintptr_t)((int64_t)(pe - my) * stride);
            char *d = (char *)dest + (put ? off : 0);
            const char *s = (const char *)src + (put ? 0 : off);
            if (has_vec && nvec <= nlanes) /* one vector per lane at most: no loop */
                symm__cst16(d + (size_t)lane * 16, symm__cld16(s + (size_t)lane * 16, !put), put);
            else if (has_vec)
                symm__copy_loop16(d, s, nvec, lane, nlanes, put);
            if (has_tail)
                symm__copy_small(d + (nbytes - tail), s + (nbytes - tail), tail, put);
        }
        return;
    }
    if (put)
        symm__copy(symm__peer_api(ctx, dest, pe), src, nbytes, lane, nlanes, 1);
    else
        symm__copy(dest, symm__peer_api(ctx, src, pe), nbytes, lane, nlanes, 0);
}

/* Every put and get: the data movement above for a peer in the window; for
 * another, the same copy at the backend's address for it, or the backend's
 * own call for the group g (SYMM__G_*; nbi: it may return before the data
 * moved). Every thread of the group calls it with the same arguments. */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__rma(const symm_ctx_t *ctx, void *dest, const void *src,
                                                      size_t nbytes, int pe, uint32_t lane, uint32_t nlanes,
                                                      int put, int g, int nbi) {
    void *q;
    if (symm__ldst_peer(ctx, pe)) {
        symm__rma_data(ctx, dest, src, nbytes, pe, lane, nlanes, put);
        return;
    }
    q = symm__far_ptr(ctx, put ? dest : src, pe);
    if (q && put)
        symm__copy(q, src, nbytes, lane, nlanes, 1);
    else if (q)
        symm__copy(dest, q, nbytes, lane, nlanes, 0);
    else
        symm__far_rma(ctx, dest, src, nbytes, pe, g, put, nbi);
}

/* Thread scope: the loads of the source are complete when their values are
 * stored, so a blocking put returns once the stores are issued; the nbi
 * forms are the same code (they promise less). */
SYMM_DEVICE_FN void symm_put(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes, int pe) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_THREAD);
    symm__rma(ctx, dest, src, nbytes, pe, 0, 1, 1, SYMM__G_THREAD, 0);
    SYMM__TRACE_RMA(ctx, t_, SYMM_TRACE_PUT, SYMM__G_THREAD, 0, pe, dest, nbytes);
}

SYMM_DEVICE_FN void symm_put_nbi(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes, int pe) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_THREAD);
    symm__rma(ctx, dest, src, nbytes, pe, 0, 1, 1, SYMM__G_THREAD, 1);
    SYMM__TRACE_RMA(ctx, t_, SYMM_TRACE_PUT, SYMM__G_THREAD, 1, pe, dest, nbytes);
}

SYMM_DEVICE_FN void symm_get(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes, int pe) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_THREAD);
    symm__rma(ctx, dest, src, nbytes, pe, 0, 1, 0, SYMM__G_THREAD, 0);
    SYMM__TRACE_RMA(ctx, t_, SYMM_TRACE_GET, SYMM__G_THREAD, 0, pe, dest, nbytes);
}

SYMM_DEVICE_FN void symm_get_nbi(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes, int pe) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_THREAD);
    symm__rma(ctx, dest, src, nbytes, pe, 0, 1, 0, SYMM__G_THREAD, 1);
    SYMM__TRACE_RMA(ctx, t_, SYMM_TRACE_GET, SYMM__G_THREAD, 1, pe, dest, nbytes);
}

/* Warp scope: the lanes share the copy; the blocking forms end with a warp
 * barrier, after which every lane may reuse the source (put) or read any
 * byte of dest (get). */
SYMM_DEVICE_FN SYMM__CONVERGENT void symm_put_warp(const symm_ctx_t *ctx, void *dest, const void *src,
                                                   size_t nbytes, int pe) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_WARP);
    symm__rma(ctx, dest, src, nbytes, pe, symm__lane(), 32, 1, SYMM__G_WARP, 0);
    symm__warp_sync();
    SYMM__TRACE_RMA(ctx, t_, SYMM_TRACE_PUT, SYMM__G_WARP, 0, pe, dest, nbytes);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_put_warp_nbi(const symm_ctx_t *ctx, void *dest, const void *src,
                                                       size_t nbytes, int pe) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_WARP);
    symm__rma(ctx, dest, src, nbytes, pe, symm__lane(), 32, 1, SYMM__G_WARP, 1);
    SYMM__TRACE_RMA(ctx, t_, SYMM_TRACE_PUT, SYMM__G_WARP, 1, pe, dest, nbytes);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_get_warp(const symm_ctx_t *ctx, void *dest, const void *src,
                                                   size_t nbytes, int pe) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_WARP);
    symm__rma(ctx, dest, src, nbytes, pe, symm__lane(), 32, 0, SYMM__G_WARP, 0);
    symm__warp_sync();
    SYMM__TRACE_RMA(ctx, t_, SYMM_TRACE_GET, SYMM__G_WARP, 0, pe, dest, nbytes);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_get_warp_nbi(const symm_ctx_t *ctx, void *dest, const void *src,
                                                       size_t nbytes, int pe) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_WARP);
    symm__rma(ctx, dest, src, nbytes, pe, symm__lane(), 32, 0, SYMM__G_WARP, 1);
    SYMM__TRACE_RMA(ctx, t_, SYMM_TRACE_GET, SYMM__G_WARP, 1, pe, dest, nbytes);
}

/* Block scope: the same with the block's threads and a block barrier. */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__put_block_data(const symm_ctx_t *ctx, void *dest,
                                                                 const void *src, size_t nbytes, int pe,
                                                                 int nbi) {
    if (!symm__ldst_peer(ctx, pe)) {
        symm__rma(ctx, dest, src, nbytes, pe, symm__block_tid(), symm__block_nthreads(), 1, SYMM__G_BLOCK, nbi);
        return;
    }
    symm__rma_data(ctx, dest, src, nbytes, pe, symm__block_tid(), symm__block_nthreads(), 1);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_put_block(const symm_ctx_t *ctx, void *dest, const void *src,
                                                    size_t nbytes, int pe) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_BLOCK);
    symm__put_block_data(ctx, dest, src, nbytes, pe, 0);
    symm__block_sync();
    SYMM__TRACE_RMA(ctx, t_, SYMM_TRACE_PUT, SYMM__G_BLOCK, 0, pe, dest, nbytes);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_put_block_nbi(const symm_ctx_t *ctx, void *dest, const void *src,
                                                        size_t nbytes, int pe) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_BLOCK);
    symm__put_block_data(ctx, dest, src, nbytes, pe, 1);
    SYMM__TRACE_RMA(ctx, t_, SYMM_TRACE_PUT, SYMM__G_BLOCK, 1, pe, dest, nbytes);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_get_block(const symm_ctx_t *ctx, void *dest, const void *src,
                                                    size_t nbytes, int pe) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_BLOCK);
    symm__rma(ctx, dest, src, nbytes, pe, symm__block_tid(), symm__block_nthreads(), 0, SYMM__G_BLOCK, 0);
    symm__block_sync();
    SYMM__TRACE_RMA(ctx, t_, SYMM_TRACE_GET, SYMM__G_BLOCK, 0, pe, dest, nbytes);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_get_block_nbi(const symm_ctx_t *ctx, void *dest, const void *src,
                                                        size_t nbytes, int pe) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_BLOCK);
    symm__rma(ctx, dest, src, nbytes, pe, symm__block_tid(), symm__block_nthreads(), 0, SYMM__G_BLOCK, 1);
    SYMM__TRACE_RMA(ctx, t_, SYMM_TRACE_GET, SYMM__G_BLOCK, 1, pe, dest, nbytes);
}

/* ---- signals ------------------------------------------------------------------- */

/* Release update of a (peer's) signal word: everything the calling thread
 * wrote or observed before (including, through a preceding warp/block
 * barrier, its group's stores) is visible to a PE that acquires the new
 * value. Unknown ops are SET. */
SYMM__DEVICE_INTERNAL void symm__signal_update(uint64_t *sig, uint64_t value, int sig_op) {
    if (sig_op == SYMM_SIGNAL_ADD)
        symm__signal_add_release(sig, value);
    else
        symm__signal_set_release(sig, value);
}

SYMM_DEVICE_FN void symm_signal_op(const symm_ctx_t *ctx, uint64_t *sig, uint64_t value, int sig_op, int pe) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_THREAD);
    uint64_t *q = (uint64_t *)symm__addr(ctx, sig, pe);
    if (q)
        symm__signal_update(q, value, sig_op);
    else
        symm__far_signal_op(ctx, sig, value, sig_op, pe);
    SYMM__TRACE_SIGNAL(ctx, t_, pe, sig, value, sig_op);
}

SYMM_DEVICE_FN uint64_t symm_signal_fetch(const symm_ctx_t *ctx, const uint64_t *sig) {
    (void)ctx;
    return symm__ld_b64(sig, SYMM_SEM_ACQUIRE, SYMM_SCOPE_SYS);
}

SYMM_DEVICE_FN uint64_t symm_signal_wait_until(const symm_ctx_t *ctx, const uint64_t *sig, int cmp,
                                               uint64_t value) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_THREAD);
    uint64_t v = symm__wait_u64(ctx, sig, cmp, value);
    SYMM__TRACE_WAIT(ctx, t_, SYMM_TRACE_WAIT_SIGNAL, sig, -1, cmp, value, v);
    return v;
}

#define SYMM__DEFINE_WAIT_UNTIL(S, T)                                                        \
    SYMM_DEVICE_FN T symm_wait_until_##S(const symm_ctx_t *ctx, const T *ivar, int cmp, T value) { \
        SYMM__TRACE_START(ctx, t_, SYMM__G_THREAD);                                          \
        T v = symm__wait_##S(ctx, ivar, cmp, value);                                         \
        SYMM__TRACE_WAIT(ctx, t_, SYMM_TRACE_WAIT_WORD, ivar, -1, cmp, value, v);            \
        return v;                                                                            \
    }
SYMM_FOR_EACH_AMO_TYPE(SYMM__DEFINE_WAIT_UNTIL)
#undef SYMM__DEFINE_WAIT_UNTIL

/* ---- put with signal ----------------------------------------------------------- */

/* Data first, then the signal with release semantics. The group forms put a
 * warp/block barrier between the two, so one thread's release covers every
 * lane's stores (the barrier orders them before it, and release is
 * cumulative). The loads of the source are done by then, so on symm's own
 * path the blocking and nbi forms are the same code; a backend's library may
 * treat them differently. */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__put_signal(const symm_ctx_t *ctx, void *dest, const void *src,
                                                             size_t nbytes, uint64_t *sig, uint64_t signal,
                                                             int sig_op, int pe, int g, int nbi) {
    const uint32_t lane = g == SYMM__G_THREAD ? 0 : g == SYMM__G_WARP ? symm__lane() : symm__block_tid();
    const uint32_t nlanes = g == SYMM__G_THREAD ? 1 : g == SYMM__G_WARP ? 32 : symm__block_nthreads();
    uint64_t *qs;
    if (symm__ldst_peer(ctx, pe)) {
        if (g == SYMM__G_BLOCK)
            symm__put_block_data(ctx, dest, src, nbytes, pe, nbi);
        else
            symm__rma_data(ctx, dest, src, nbytes, pe, lane, nlanes, 1);
        qs = (uint64_t *)symm__peer_api(ctx, sig, pe);
    } else {
        /* outside the window: symm's own path only when the backend maps
         * both the data and the signal word here */
        void *q = symm__far_ptr(ctx, dest, pe);
        qs = (uint64_t *)symm__far_ptr(ctx, sig, pe);
        if (!q || !qs) {
            symm__far_put_signal(ctx, dest, src, nbytes, sig, signal, sig_op, pe, g, nbi);
            return;
        }
        symm__copy(q, src, nbytes, lane, nlanes, 1);
    }
    if (g == SYMM__G_WARP)
        symm__warp_sync();
    else if (g == SYMM__G_BLOCK)
        symm__block_sync();
    if (lane == 0)
        symm__signal_update(qs, signal, sig_op);
}

SYMM_DEVICE_FN void symm_put_signal(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes,
                                    uint64_t *sig, uint64_t signal, int sig_op, int pe) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_THREAD);
    symm__put_signal(ctx, dest, src, nbytes, sig, signal, sig_op, pe, SYMM__G_THREAD, 0);
    SYMM__TRACE_PUT_SIGNAL(ctx, t_, SYMM__G_THREAD, 0, pe, sig, nbytes, signal, sig_op);
}

SYMM_DEVICE_FN void symm_put_signal_nbi(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes,
                                        uint64_t *sig, uint64_t signal, int sig_op, int pe) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_THREAD);
    symm__put_signal(ctx, dest, src, nbytes, sig, signal, sig_op, pe, SYMM__G_THREAD, 1);
    SYMM__TRACE_PUT_SIGNAL(ctx, t_, SYMM__G_THREAD, 1, pe, sig, nbytes, signal, sig_op);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_put_signal_warp(const symm_ctx_t *ctx, void *dest, const void *src,
                                                          size_t nbytes, uint64_t *sig, uint64_t signal,
                                                          int sig_op, int pe) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_WARP);
    symm__put_signal(ctx, dest, src, nbytes, sig, signal, sig_op, pe, SYMM__G_WARP, 0);
    SYMM__TRACE_PUT_SIGNAL(ctx, t_, SYMM__G_WARP, 0, pe, sig, nbytes, signal, sig_op);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_put_signal_warp_nbi(const symm_ctx_t *ctx, void *dest,
                                                              const void *src, size_t nbytes, uint64_t *sig,
                                                              uint64_t signal, int sig_op, int pe) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_WARP);
    symm__put_signal(ctx, dest, src, nbytes, sig, signal, sig_op, pe, SYMM__G_WARP, 1);
    SYMM__TRACE_PUT_SIGNAL(ctx, t_, SYMM__G_WARP, 1, pe, sig, nbytes, signal, sig_op);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_put_signal_block(const symm_ctx_t *ctx, void *dest, const void *src,
                                                           size_t nbytes, uint64_t *sig, uint64_t signal,
                                                           int sig_op, int pe) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_BLOCK);
    symm__put_signal(ctx, dest, src, nbytes, sig, signal, sig_op, pe, SYMM__G_BLOCK, 0);
    SYMM__TRACE_PUT_SIGNAL(ctx, t_, SYMM__G_BLOCK, 0, pe, sig, nbytes, signal, sig_op);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_put_signal_block_nbi(const symm_ctx_t *ctx, void *dest,
                                                               const void *src, size_t nbytes, uint64_t *sig,
                                                               uint64_t signal, int sig_op, int pe) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_BLOCK);
    symm__put_signal(ctx, dest, src, nbytes, sig, signal, sig_op, pe, SYMM__G_BLOCK, 1);
    SYMM__TRACE_PUT_SIGNAL(ctx, t_, SYMM__G_BLOCK, 1, pe, sig, nbytes, signal, sig_op);
}

#endif /* SYMM_DEVICE_IMPL_RMA_H */
