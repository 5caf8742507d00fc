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

#endif /* SYMM_TILELANG_H */
