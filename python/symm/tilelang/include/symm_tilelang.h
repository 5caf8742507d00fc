/*
 * symm_tilelang.h - what TileLang-generated CUDA needs beyond symm_device.h.
 *
 * symm.tilelang lowers every primitive to a call of a symm device function
 * (symm_put_warp, symm_wait_until_u64, ...) in the generated source, and the
 * post-processing hook it registers with TileLang includes this header there.
 * It adds only what TileLang's IR cannot spell: the context arrives as a
 * 64-bit integer kernel parameter (symm.ctx() on the host) and becomes the
 * pointer the device API takes; the grid collectives and barrier_blocks need
 * the calling block's linear index; a wait on a peer's word needs a typed
 * peer pointer; a view of this PE's own read-only buffer needs its const
 * dropped. No state: nothing here is initialised per module.
 */
#ifndef SYMM_TILELANG_H
#define SYMM_TILELANG_H

#include "symm/symm_device.h"

#define SYMM_TL_FN static __device__ __forceinline__

/* The team context a kernel got as a uint64 parameter. */
SYMM_TL_FN const symm_ctx_t *symm_tl_ctx(uint64_t ctx) {
    return (const symm_ctx_t *)(uintptr_t)ctx;
}

/* Linear index of the calling block in its grid, and the grid's block count
 * (the `block` / `nblocks` of the _grid collectives). */
SYMM_TL_FN int symm_tl_block(void) {
    return (int)(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
}

SYMM_TL_FN int symm_tl_nblocks(void) {
    return (int)(gridDim.x * gridDim.y * gridDim.z);
}

/* Every block of the grid on every PE of the team: symm_coll_barrier_grid
 * (needs the grid co-resident; orders memory like symm_barrier). */
SYMM_TL_FN void symm_tl_barrier_blocks(uint64_t ctx) {
    symm_coll_barrier_grid(symm_tl_ctx(ctx), symm_tl_block(), symm_tl_nblocks());
}

/* This PE's own buffer at p as a view's base (peer_tensor with PE -1): no
 * lookup, so valid on every backend; TileLang declares a buffer the kernel
 * only reads const, the view's handle is not. */
SYMM_TL_FN void *symm_tl_local(const void *p) {
    return (void *)p;
}

/* Wait until PE pe's copy of *ivar satisfies (cmp, value): the acquire
 * spin-wait of symm_wait_until_<T>, polling the peer's word over NVLink; a
 * peer not reachable by load/store (another node, SYMM_DEBUG_FORCE_REMOTE) is
 * polled with the backend's atomic fetch instead of faulting on a NULL view,
 * under the same deadline and abort checks. */
#define SYMM_TL__WAIT_PEER(S, T)                                                           \
    SYMM_TL_FN T symm_tl_wait_peer_##S(uint64_t ctx, const T *ivar, int cmp, T value, int pe) { \
        const symm_ctx_t *c = symm_tl_ctx(ctx);                                            \
        const T *p = (const T *)symm_ctx_ptr(c, ivar, pe);                                 \
        if (p != NULL)                                                                     \
            return symm_wait_until_##S(c, p, cmp, value);                                  \
        uint64_t t0 = 0;                                                                   \
        for (uint32_t polls = 1;; polls++) {                                               \
            T v = symm_atomic_fetch_##S(c, ivar, pe);                                      \
            if (symm__cmp_ok_##S(c, ivar, v, cmp, value))                                  \
                return v;                                                                  \
            if (polls % SYMM__WAIT_CHECK_EVERY == 0)                                       \
                t0 = symm__wait_check(c, ivar, cmp, (uint64_t)value, (uint64_t)v, t0);     \
        }                                                                                  \
    }
SYMM_FOR_EACH_AMO_TYPE(SYMM_TL__WAIT_PEER)
#undef SYMM_TL__WAIT_PEER

/*
 * Waits for kernels that issue wgmma (TileLang's GEMMs on sm_90). A kernel
 * that contains any function call has every wgmma serialised by ptxas
 * (C7510), and symm's waits print through an out-of-line function when they
 * give up. symm_tl_wait_rec_<T> is the same acquire spin-wait with the
 * deadline (ctx->timeout_ns) and the abort flag checked inline: a wait that
 * gives up records what it waited for in rec (SYMM_TL_REC_WORDS uint64 words,
 * zeroed) and returns, and every later wait of any thread that sees the record
 * returns at once, so the kernel ends; symm_tl_wait_report, in a kernel
 * launched after it, prints symm's message for the record and traps.
 * rec[0]: 0 none, 1 deadline, 2 abort flag, 3 invalid comparison;
 * rec[1] address, rec[2] value waited for, rec[3] value last seen,
 * rec[4] nanoseconds waited (1) or the abort flag (2), rec[5] comparison.
 */
#define SYMM_TL_REC_WORDS 8
#define SYMM_TL_REC_TIMEOUT 1u
#define SYMM_TL_REC_ABORT 2u
#define SYMM_TL_REC_BADCMP 3u

SYMM_TL_FN void symm_tl__record(uint64_t *rec, uint64_t why, const void *addr, int cmp, uint64_t expected,
                                uint64_t seen, uint64_t info) {
    if (symm__atom_cas_b64(rec, 0ull, why) == 0ull) {
        symm__st_b64(rec + 1, (uint64_t)(uintptr_t)addr, SYMM_SEM_RELAXED, SYMM_SCOPE_GPU);
        symm__st_b64(rec + 2, expected, SYMM_SEM_RELAXED, SYMM_SCOPE_GPU);
        symm__st_b64(rec + 3, seen, SYMM_SEM_RELAXED, SYMM_SCOPE_GPU);
        symm__st_b64(rec + 4, info, SYMM_SEM_RELAXED, SYMM_SCOPE_GPU);
        symm__st_b64(rec + 5, (uint64_t)cmp, SYMM_SEM_RELAXED, SYMM_SCOPE_GPU);
    }
}

#define SYMM_TL__CMP(v, cmp, value, ok)                                                   \
    switch (cmp) {                                                                        \
    case SYMM_CMP_EQ: ok = (v) == (value); break;                                         \
    case SYMM_CMP_NE: ok = (v) != (value); break;                                         \
    case SYMM_CMP_GT: ok = (v) > (value); break;                                          \
    case SYMM_CMP_GE: ok = (v) >= (value); break;                                         \
    case SYMM_CMP_LT: ok = (v) < (value); break;                                          \
    case SYMM_CMP_LE: ok = (v) <= (value); break;                                         \
    default: ok = -1; break;                                                              \
    }

#define SYMM_TL__WAIT_REC(S, T)                                                                    \
    SYMM_TL_FN T symm_tl_wait_rec_##S(uint64_t ctx, const T *ivar, int cmp, T value, uint64_t *rec) { \
        const symm_ctx_t *c = symm_tl_ctx(ctx);                                                    \
        uint64_t t0 = 0;                                                                           \
        for (uint32_t polls = 1;; polls++) {                                                       \
            T v = sizeof(T) == 8 ? (T)symm__ld_b64(ivar, SYMM_SEM_ACQUIRE, SYMM_SCOPE_SYS)         \
                                 : (T)symm__ld_b32(ivar, SYMM_SEM_ACQUIRE, SYMM_SCOPE_SYS);        \
            int ok;                                                                                \
            SYMM_TL__CMP(v, cmp, value, ok)                                                        \
            if (ok == 1)                                                                           \
                return v;                                                                          \
            if (ok < 0) {                                                                          \
                symm_tl__record(rec, SYMM_TL_REC_BADCMP, ivar, cmp, (uint64_t)value, (uint64_t)v, 0); \
                return v;                                                                          \
            }                                                                                      \
            if (polls % SYMM__WAIT_CHECK_EVERY == 0) {                                             \
                uint64_t now = symm__globaltimer();                                                \
                if (t0 == 0)                                                                       \
                    t0 = now;                                                                      \
                if (symm__ld_b64(rec, SYMM_SEM_RELAXED, SYMM_SCOPE_GPU) != 0)                      \
                    return v; /* another wait gave up: the kernel is ending */                    \
                if (c->abort_flag != 0 && now - t0 >= SYMM__ABORT_CHECK_NS) {                      \
                    uint32_t f = symm__ld_b32((const void *)(uintptr_t)c->abort_flag,              \
                                              SYMM_SEM_RELAXED, SYMM_SCOPE_SYS);                   \
                    if (f != 0) {                                                                  \
                        symm_tl__record(rec, SYMM_TL_REC_ABORT, ivar, cmp, (uint64_t)value,        \
                                        (uint64_t)v, f);                                           \
                        return v;                                                                  \
                    }                                                                              \
                }                                                                                  \
                if (c->timeout_ns != 0 && now - t0 >= c->timeout_ns) {                             \
                    symm_tl__record(rec, SYMM_TL_REC_TIMEOUT, ivar, cmp, (uint64_t)value,          \
                                    (uint64_t)v, now - t0);                                        \
                    return v;                                                                      \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }
SYMM_FOR_EACH_AMO_TYPE(SYMM_TL__WAIT_REC)
#undef SYMM_TL__WAIT_REC
#undef SYMM_TL__CMP

/* Prints and traps, as symm's waits do, if a symm_tl_wait_rec of an earlier
 * kernel gave up (rec[0] != 0); nothing otherwise. Any thread may call it. */
SYMM_TL_FN void symm_tl_wait_report(uint64_t ctx, const uint64_t *rec) {
    const symm_ctx_t *c = symm_tl_ctx(ctx);
    uint64_t why = symm__ld_b64(rec, SYMM_SEM_ACQUIRE, SYMM_SCOPE_GPU);
    if (why == 0)
        return;
    const void *addr = (const void *)(uintptr_t)rec[1];
    if (why == SYMM_TL_REC_ABORT)
        symm__report_abort(c, addr, (uint32_t)rec[4]);
    else if (why == SYMM_TL_REC_TIMEOUT)
        symm__report_timeout(c, (double)rec[4] * 1e-9, addr, symm__cmp_name((int)rec[5]),
                             (unsigned long long)rec[2], (unsigned long long)rec[3]);
    else
        symm__report_bad_cmp(c->world_pe, addr, (int)rec[5]);
}

/* Adds v to this PE's word *p, released at system scope after the thread's
 * earlier memory operations (and, behind a block barrier, the block's):
 * fence.acq_rel.sys then a relaxed red.add. No call, so kernels with wgmma
 * may count finished tiles with it; a stream wait (cuStreamWaitValue64) or
 * an acquire on the word sees everything before it. */
SYMM_TL_FN void symm_tl_add_release_u64(uint64_t *p, uint64_t v) {
    symm__fence_acq_rel_sys();
    symm__red_add_b64(p, v);
}

/* This thread's earlier generic accesses (the acquire of a wait) ordered
 * before its later async-proxy ones (TMA loads of what the wait announced). */
SYMM_TL_FN void symm_tl_fence_proxy_async_global(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    symm__fence_proxy_async_global();
#else
    __threadfence();
#endif
}

#endif /* SYMM_TILELANG_H */
