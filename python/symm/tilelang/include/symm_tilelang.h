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
 * peer pointer. No state: nothing here is initialised per module.
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

/* Wait until PE pe's copy of *ivar satisfies (cmp, value): the acquire
 * spin-wait of symm_wait_until_<T>, polling the peer's word over NVLink. */
#define SYMM_TL__WAIT_PEER(S, T)                                                           \
    SYMM_TL_FN T symm_tl_wait_peer_##S(uint64_t ctx, const T *ivar, int cmp, T value, int pe) { \
        const symm_ctx_t *c = symm_tl_ctx(ctx);                                            \
        return symm_wait_until_##S(c, (const T *)symm_ctx_ptr(c, ivar, pe), cmp, value);   \
    }
SYMM_FOR_EACH_AMO_TYPE(SYMM_TL__WAIT_PEER)
#undef SYMM_TL__WAIT_PEER

#endif /* SYMM_TILELANG_H */
