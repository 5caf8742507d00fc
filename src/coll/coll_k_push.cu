/*
 * coll_k_push.cu - the push pipeline (coll.h): reduce-scatter and two-shot
 * all-reduce in which every byte crosses NVLink as a store.
 *
 * Chunk p of the data (bytes [p * piece, p * piece + len_p) of src, len_p <=
 * L) is reduced by PE p. Block slot b of every PE takes the same share of
 * every chunk and walks it in steps of one buffer (SYMM__COLL_PUSH_BUF(n)
 * bytes). At step s block b of PE me
 *   send:    stores step s of chunk p into PE p's buffer [b][me][q], q the
 *            step's place in the ring, for every peer p, then releases
 *            ready[b][me] = g on each peer (g: the slot's step count);
 *   receive: waits for ready[b][p] >= g from every peer, reduces step s of
 *            its own chunk from src and the buffers [b][p][q] in PE order,
 *            stores the result into recv (all-reduce: also into every
 *            peer's recv, at chunk me) and releases freed[b][me] = g on
 *            each peer: buffer q there may be reused, and the peer has the
 *            result stores of steps <= s.
 * A send waits until each peer freed the step that last used its buffer
 * (g - K). The send of step s + 1 is made before the receive of step s, so
 * the exchange of one step overlaps the reduction of the other. An
 * all-reduce ends by waiting for every peer's last freed (its result stores
 * have landed); a reduce-scatter ends without waiting (the next call's sends
 * wait for the buffers).
 *
 * Every PE derives the same number of steps for every slot from the same
 * arguments, so the counters stay equal across PEs; they count steps over
 * all calls and are compared modulo 2^32.
 *
 * Every warp of a block both sends and reduces: warps split into senders and
 * reducers were no faster (docs/tuning.md).
 *
 * The all-reduce stores into the peers' recv at the heap offset each peer
 * publishes before its first release (aux[b][p]); peers are inside the call
 * when their first data arrives, so their recv is free by then. In place is
 * safe: a PE stores into chunk me of PE p's buffer only after p's data of
 * that range has arrived, so p has read it; and it reads and writes its own
 * chunk unit by unit in the same thread.
 */
#include "coll/coll_kernels.cuh"

extern "C" {
#include "coll/coll.h"
}

namespace {

struct push_area {
    uint64_t base; /* heap address of this PE's copy */
    uint64_t buf;  /* bytes per buffer */
};

__device__ __forceinline__ uint64_t *push_steps(const push_area &a, uint32_t slot) {
    return (uint64_t *)(uintptr_t)(a.base + SYMM__COLL_PUSH_STEPS_OFF) + slot;
}
__device__ __forceinline__ uint32_t *push_word(const push_area &a, uint64_t off, uint32_t slot, int pe) {
    return (uint32_t *)(uintptr_t)(a.base + off) + (uint64_t)slot * SYMM_COLL_MAX_PES + (uint32_t)pe;
}
__device__ __forceinline__ uint64_t *push_aux(const push_area &a, uint32_t slot, int pe) {
    return (uint64_t *)(uintptr_t)(a.base + SYMM__COLL_PUSH_AUX_OFF) + (uint64_t)slot * SYMM_COLL_MAX_PES +
           (uint32_t)pe;
}
/* PE pe's signature of the call whose first step used buffer q. */
__device__ __forceinline__ uint64_t *push_sig(const push_area &a, uint32_t slot, int pe, uint32_t q) {
    return (uint64_t *)(uintptr_t)(a.base + SYMM__COLL_PUSH_SIG_OFF) +
           ((uint64_t)slot * SYMM_COLL_MAX_PES + (uint32_t)pe) * SYMM__COLL_PUSH_K + q;
}
__device__ __forceinline__ char *push_buf(const push_area &a, int n, uint32_t slot, int src, uint32_t q) {
    return (char *)(uintptr_t)(a.base + SYMM__COLL_PUSH_SYNC) +
           (((uint64_t)slot * (uint32_t)n + (uint32_t)src) * SYMM__COLL_PUSH_K + q) * a.buf;
}

/* Wait until the local counter has reached `want` (mod 2^32; acquire). */
__device__ void wait_reach(const symm_ctx_t *ctx, const uint32_t *p, uint32_t want) {
    uint32_t polls = 0;
    uint64_t t0 = 0;
    for (;;) {
        uint32_t v = symm__c_ld4_acquire(p);
        if ((int32_t)(v - want) >= 0)
            return;
        if (++polls % SYMM__WAIT_CHECK_EVERY == 0)
            t0 = symm__wait_check(ctx, p, SYMM_CMP_GE, want, v, t0);
    }
}

/* Threads t < n of the block: wait until every peer's counter `off` here
 * has reached `want`. */
__device__ void wait_peers(const symm_ctx_t *ctx, const push_area &a, uint64_t off, uint32_t slot, int n, int me,
                           uint32_t want) {
    for (int p = (int)symm__block_tid(); p < n; p += (int)symm__block_nthreads())
        if (p != me) {
            SYMM__TRACE_START(ctx, t_, SYMM__G_THREAD);
            wait_reach(ctx, push_word(a, off, slot, p), want);
            SYMM__TRACE_WAIT(ctx, t_, SYMM_TRACE_WAIT_COLL, push_word(a, off, slot, p), p, SYMM_CMP_GE, want, want);
        }
}

/* Threads t < n of the block: release this PE's counter `off` on every peer
 * (after a block barrier, the release covers the whole block's stores). */
__device__ void release_peers(const symm_ctx_t *ctx, const push_area &a, uint64_t off, uint32_t slot, int n, int me,
                              uint32_t value) {
    for (int p = (int)symm__block_tid(); p < n; p += (int)symm__block_nthreads())
        if (p != me)
            symm__c_st4_release(symm__c_peer(ctx, push_word(a, off, slot, me), p), value);
}

/* What one call computes, the same on every PE. */
struct push_call {
    int n, me, ar;
    uint64_t L;       /* bytes of a (nominal) chunk, a multiple of 16 for the all-reduce */
    uint64_t piece;   /* distance between chunks of src */
    uint64_t total;   /* bytes of src: chunk p holds [p * piece, min(p * piece + L, total)) */
    uint64_t lo, hi;  /* this slot's share of every chunk, bytes */
    uint64_t ns;      /* steps of this slot (one buffer, push_area.buf bytes, each) */
    uint64_t sig;     /* the call's signature (symm__c_sig) */
};

__device__ __forceinline__ uint64_t chunk_len(const push_call &c, int p) {
    uint64_t a = (uint64_t)p * c.piece;
    return a >= c.total ? 0 : (c.total - a < c.L ? c.total - a : c.L);
}

/* Step s of the slot's share, clipped to chunk p: [*x0, *x1). */
__device__ __forceinline__ void step_range(const push_area &ar, const push_call &c, uint64_t s, int p, uint64_t *x0,
                                           uint64_t *x1) {
    uint64_t len = chunk_len(c, p), a = c.lo + s * ar.buf, b = a + ar.buf < c.hi ? a + ar.buf : c.hi;
    *x0 = a < len ? a : len;
    *x1 = b < len ? b : len;
}

__device__ void send_step(const symm_ctx_t *ctx, const push_area &a, const push_call &c, const char *src,
                          uint32_t slot, uint64_t T, uint64_t s) {
    uint32_t t = symm__block_tid(), nt = symm__block_nthreads();
    uint64_t g = T + s + 1, x0, x1;
    uint32_t q = (uint32_t)((T + s) % SYMM__COLL_PUSH_K);
    if (g > SYMM__COLL_PUSH_K)
        wait_peers(ctx, a, SYMM__COLL_PUSH_FREED_OFF, slot, c.n, c.me, (uint32_t)(g - SYMM__COLL_PUSH_K));
    symm__block_sync();
    for (int i = 0; i < c.n; i++) {
        int p = symm__c_step_pe(c.me, i, slot, c.n);
        step_range(a, c, s, p, &x0, &x1);
        if (p != c.me && x1 > x0)
            symm__copy(symm__c_peer(ctx, push_buf(a, c.n, slot, c.me, q), p), src + (uint64_t)p * c.piece + x0,
                       x1 - x0, t, nt, 1);
    }
    /* the first step carries the signature: buffer q's word is next written
     * by a step that waits until this one is freed */
    if (s == 0)
        for (int p = (int)t; p < c.n; p += (int)nt)
            if (p != c.me)
                symm__c_st8(symm__c_peer(ctx, push_sig(a, slot, c.me, q), p), c.sig);
    symm__block_sync(); /* the releases below cover every thread's stores */
    release_peers(ctx, a, SYMM__COLL_PUSH_READY_OFF, slot, c.n, c.me, (uint32_t)g);
}

/* 16 bytes (nb < 16: the chunk's short last unit) at p, any alignment. */
__device__ __forceinline__ symm__v4_t push_ld(const char *p, uint32_t nb) {
    symm__v4_t v;
    if (nb == 16 && ((uintptr_t)p & 15u) == 0)
        return symm__c_ld16(p);
    uint64_t w0 = symm__c_ldw(p, nb >= 8 ? 8u : nb), w1 = nb > 8 ? symm__c_ldw(p + 8, nb - 8) : 0;
    v.x = (uint32_t)w0; v.y = (uint32_t)(w0 >> 32);
    v.z = (uint32_t)w1; v.w = (uint32_t)(w1 >> 32);
    return v;
}

__device__ __forceinline__ void push_st(char *p, uint32_t nb, uint64_t w0, uint64_t w1) {
    if (nb == 16 && ((uintptr_t)p & 15u) == 0) {
        symm__v4_t v;
        v.x = (uint32_t)w0; v.y = (uint32_t)(w0 >> 32);
        v.z = (uint32_t)w1; v.w = (uint32_t)(w1 >> 32);
        symm__c_st16(p, v);
    } else {
        symm__c_stw(p, w0, nb >= 8 ? 8u : nb);
        if (nb > 8)
            symm__c_stw(p + 8, w1, nb - 8);
    }
}

/*
 * Receive step s: reduce [x0, x1) of chunk me, in PE order, into dst (at
 * chunk me for an all-reduce, which also stores it into every peer's recv,
 * peer_dst[p] in shared memory). The buffers are aligned; src and the
 * recvs may not be (any pointer aligned to its element type works, so the
 * choice of this algorithm never depends on a PE's own buffers).
 *
 * One unit at a time per thread: these loads are local, and batching them as
 * symm__c_red_units does for NVLink loads spills (all-reduce 256 MiB 1313
 * against 1204 us, bench/results/latest/coll-push.md).
 */
#define SYMM__C_DEFINE_PUSH_REDUCE(S)                                                             \
    __device__ void push_reduce_##S(const symm_ctx_t *ctx, const push_area &a, const push_call &c,  \
                                    char *dst, const char *src, uint32_t slot, uint32_t q,          \
                                    uint64_t x0, uint64_t x1, char *const *peer_dst, int op) {      \
        uint64_t t = symm__block_tid(), nt = symm__block_nthreads();                                \
        const char *mine = src + (uint64_t)c.me * c.piece;                                          \
        uint64_t out = c.ar ? (uint64_t)c.me * c.L : 0;                                             \
        for (uint64_t x = x0 + 16 * t; x < x1; x += 16 * nt) {                                      \
            uint32_t nb = x1 - x >= 16 ? 16u : (uint32_t)(x1 - x);                                  \
            symm__c_acc_##S a0, a1;                                                                 \
            for (int p = 0; p < c.n; p++) {                                                         \
                symm__v4_t v = push_ld(p == c.me ? mine + x : push_buf(a, c.n, slot, p, q) + (x - x0), nb); \
                uint64_t w0 = ((uint64_t)v.y << 32) | v.x, w1 = ((uint64_t)v.w << 32) | v.z;         \
                if (p == 0) { symm__c_first_##S(&a0, w0); symm__c_first_##S(&a1, w1); }             \
                else { symm__c_next_##S(&a0, w0, op); symm__c_next_##S(&a1, w1, op); }              \
            }                                                                                       \
            uint64_t r0 = symm__c_last_##S(&a0), r1 = symm__c_last_##S(&a1);                        \
            for (int i = 0; i < (c.ar ? c.n : 1); i++) {                                            \
                int p = c.ar ? symm__c_step_pe(c.me, i, slot, c.n) : c.me;                          \
                push_st((p == c.me ? dst : symm__c_peer(ctx, peer_dst[p], p)) + out + x, nb, r0, r1); \
            }                                                                                       \
        }                                                                                           \
    }
SYMM__C_FOR_EACH_RED(SYMM__C_DEFINE_PUSH_REDUCE)
} /* namespace */
#undef SYMM__C_DEFINE_PUSH_REDUCE

#define SYMM__C_CASE_PUSH(S)                                                                        \
    case SYMM__C_RED_##S: push_reduce_##S(ctx, a, c, dst, src, slot, q, x0, x1, peer_dst, op); break;

__global__ void __launch_bounds__(SYMM__COLL_THREADS)
symm__k_push(const __grid_constant__ symm_ctx_t ctx_, uint64_t base, uint64_t buf, char *dst, const char *src,
             uint64_t total, uint64_t L, uint64_t piece, int ar, int kind, int op) {
    __shared__ char *peer_dst[SYMM_COLL_MAX_PES];
    const symm_ctx_t *ctx = &ctx_;
    uint32_t slot = blockIdx.x, nslots = gridDim.x, t = symm__block_tid(), nt = symm__block_nthreads();
    push_area a;
    push_call c;
    uint64_t lo, hi, T, s;
    SYMM__TRACE_START(ctx, t_, SYMM__G_BLOCK);
    a.base = base;
    a.buf = buf;
    c.n = ctx->n_pes;
    c.me = ctx->my_pe;
    c.ar = ar;
    c.L = L;
    c.piece = piece;
    c.total = total;
    c.sig = symm__c_sig(ar ? SYMM__C_CALL_AR : SYMM__C_CALL_RS, ar ? total : L, kind, op, -1);
    symm__c_split((L + 15) / 16, nslots, slot, &lo, &hi);
    c.lo = 16 * lo;
    c.hi = 16 * hi;
    c.ns = (c.hi - c.lo + a.buf - 1) / a.buf;
    T = symm__c_ld8_vol(push_steps(a, slot));
    if (ar)
        for (int p = (int)t; p < c.n; p += (int)nt)
            if (p != c.me)
                symm__c_st8(symm__c_peer(ctx, push_aux(a, slot, c.me), p), symm__c_heap_off(ctx, dst));
    if (c.ns > 0)
        send_step(ctx, a, c, src, slot, T, 0);
    for (s = 0; s < c.ns; s++) {
        uint64_t g = T + s + 1, x0, x1;
        uint32_t q = (uint32_t)((T + s) % SYMM__COLL_PUSH_K);
        if (s + 1 < c.ns)
            send_step(ctx, a, c, src, slot, T, s + 1);
        wait_peers(ctx, a, SYMM__COLL_PUSH_READY_OFF, slot, c.n, c.me, (uint32_t)g);
        if (s == 0) /* (the threads that acquired each peer's step) */
            for (int p = (int)t; p < c.n; p += (int)nt)
                if (p != c.me && symm__c_ld8_vol(push_sig(a, slot, p, q)) != c.sig)
                    symm__c_fail_call(ctx, p, symm__c_ld8_vol(push_sig(a, slot, p, q)), c.sig);
        if (s == 0 && ar)
            for (int p = (int)t; p < c.n; p += (int)nt)
                peer_dst[p] = p == c.me ? dst
                                        : (char *)(uintptr_t)(ctx->heap_base + symm__c_ld8_vol(push_aux(a, slot, p)));
        symm__block_sync();
        step_range(a, c, s, c.me, &x0, &x1);
        switch (kind) { SYMM__C_FOR_EACH_RED(SYMM__C_CASE_PUSH) default: break; }
        symm__block_sync(); /* every load of the buffers and store of results is made */
        release_peers(ctx, a, SYMM__COLL_PUSH_FREED_OFF, slot, c.n, c.me, (uint32_t)g);
    }
    if (ar)
        wait_peers(ctx, a, SYMM__COLL_PUSH_FREED_OFF, slot, c.n, c.me, (uint32_t)(T + c.ns));
    symm__block_sync();
    if (t == 0)
        symm__c_st8_vol(push_steps(a, slot), T + c.ns);
    SYMM__TRACE_COLL(ctx, t_, ar ? SYMM_TRACE_COLL_ALL_REDUCE : SYMM_TRACE_COLL_REDUCE_SCATTER, SYMM_COLL_ALGO_PUSH,
                     SYMM_TRACE_F_STREAM, ar ? total : L);
}
#undef SYMM__C_CASE_PUSH

symm_status_t symm__coll_launch_push(const symm__coll_launch_t *l, cudaStream_t s) {
    int ar = l->kernel == SYMM__CK_AR_PUSH;
    uint64_t n = (uint64_t)l->ctx.n_pes;
    /* all-reduce: chunks of ceil(nbytes / n) rounded up to 16 bytes, so every
     * chunk starts aligned; reduce-scatter: l->nbytes per PE, l->piece apart */
    uint64_t L = ar ? ((l->nbytes + n - 1) / n + 15) & ~(uint64_t)15 : l->nbytes;
    uint64_t piece = ar ? L : l->piece;
    uint64_t total = ar ? l->nbytes : (n - 1) * l->piece + l->nbytes;
    symm__k_push<<<l->nblocks, l->nthreads, 0, s>>>(l->ctx, l->push, l->push_buf, (char *)l->dst,
                                                    (const char *)l->src, total, L, piece, ar, l->kind, l->op);
    return symm__coll_launched(ar ? "the push all-reduce kernel" : "the push reduce-scatter kernel");
}
