/*
 * use_all.cu - calls every function of symm_device.h, so that every inline
 * PTX statement reaches the assembler. Not a test to run: the build compiles
 * it with nvcc (as CUDA, for every architecture, in each copy-engine
 * variant), and check_device_header.cmake compiles it with clang as plain C
 * for nvptx64 and assembles the result with ptxas. Valid C and CUDA C++.
 */
#include "symm/symm_device.h"

#if defined(__CUDACC__)
#  define USE_FN extern "C" __global__ void
#else
#  define USE_FN void
#endif

USE_FN symm_use_ctx(const symm_ctx_t *ctx, void *buf, int pe, uint64_t *out) {
    out[0] = (uint64_t)symm_ctx_my_pe(ctx) + (uint64_t)symm_ctx_n_pes(ctx) +
             (uint64_t)(uintptr_t)symm_ctx_ptr(ctx, buf, pe);
}

#define USE_PG(S, T)                                                                       \
    USE_FN symm_use_pg_##S(const symm_ctx_t *ctx, T *buf, T v, int pe) {                  \
        symm_p_##S(ctx, buf, v, pe);                                                       \
        buf[1] = symm_g_##S(ctx, buf, pe);                                                 \
    }
SYMM_FOR_EACH_RMA_TYPE(USE_PG)

USE_FN symm_use_put(const symm_ctx_t *ctx, void *d, const void *s, size_t n, int pe) {
    symm_put(ctx, d, s, n, pe);
    symm_put_nbi(ctx, d, s, n, pe);
    symm_put_warp(ctx, d, s, n, pe);
    symm_put_warp_nbi(ctx, d, s, n, pe);
    symm_put_block(ctx, d, s, n, pe);
    symm_put_block_nbi(ctx, d, s, n, pe);
}

USE_FN symm_use_get(const symm_ctx_t *ctx, void *d, const void *s, size_t n, int pe) {
    symm_get(ctx, d, s, n, pe);
    symm_get_nbi(ctx, d, s, n, pe);
    symm_get_warp(ctx, d, s, n, pe);
    symm_get_warp_nbi(ctx, d, s, n, pe);
    symm_get_block(ctx, d, s, n, pe);
    symm_get_block_nbi(ctx, d, s, n, pe);
}

USE_FN symm_use_signal(const symm_ctx_t *ctx, void *d, const void *s, size_t n, uint64_t *sig, uint64_t v,
                       int op, int cmp, int pe) {
    symm_put_signal(ctx, d, s, n, sig, v, op, pe);
    symm_put_signal_nbi(ctx, d, s, n, sig, v, op, pe);
    symm_put_signal_warp(ctx, d, s, n, sig, v, op, pe);
    symm_put_signal_warp_nbi(ctx, d, s, n, sig, v, op, pe);
    symm_put_signal_block(ctx, d, s, n, sig, v, op, pe);
    symm_put_signal_block_nbi(ctx, d, s, n, sig, v, op, pe);
    symm_signal_op(ctx, sig, v, op, pe);
    sig[1] = symm_signal_fetch(ctx, sig) + symm_signal_wait_until(ctx, sig, cmp, v);
}

USE_FN symm_use_pkt(const symm_ctx_t *ctx, void *pkt, const void *s, void *d, size_t n, uint32_t flag, int pe) {
    symm_put_pkt(ctx, pkt, s, n, flag, pe);
    symm_put_pkt_warp(ctx, pkt, s, n, flag, pe);
    symm_put_pkt_block(ctx, pkt, s, n, flag, pe);
    symm_pkt_wait(ctx, pkt, d, n, flag);
    symm_pkt_wait_warp(ctx, pkt, d, n, flag);
    symm_pkt_wait_block(ctx, pkt, d, n, flag);
    symm_put_pkt_v64(ctx, pkt, (uint64_t)n, flag, pe);
    symm_put_pkt_v64_warp(ctx, pkt, (uint64_t)n, 32, flag, pe);
    *(uint64_t *)d = symm_pkt_wait_v64(ctx, pkt, flag) + symm_pkt_wait_v64_warp(ctx, pkt, 8, flag);
}

#define USE_WAIT(S, T)                                                                     \
    USE_FN symm_use_wait_##S(const symm_ctx_t *ctx, T *w, int cmp, T v) {                 \
        w[1] = symm_wait_until_##S(ctx, w, cmp, v);                                        \
    }
SYMM_FOR_EACH_AMO_TYPE(USE_WAIT)

#define USE_LDST(S, T)                                                                     \
    USE_FN symm_use_ldst_##S(const symm_ctx_t *ctx, T *p, T v, int pe, int sem, int scope) { \
        symm_st_##S(ctx, p, v, pe, sem, scope);                                            \
        p[1] = symm_ld_##S(ctx, p, pe, sem, scope);                                        \
    }
SYMM_FOR_EACH_LDST_TYPE(USE_LDST)

#define USE_AMO(S, T)                                                                      \
    USE_FN symm_use_amo_##S(const symm_ctx_t *ctx, T *p, T v, T c, int pe, T *out) {      \
        out[0] = symm_atomic_fetch_##S(ctx, p, pe);                                        \
        symm_atomic_set_##S(ctx, p, v, pe);                                                \
        out[1] = symm_atomic_swap_##S(ctx, p, v, pe);                                      \
        out[2] = symm_atomic_compare_swap_##S(ctx, p, c, v, pe);                           \
        symm_atomic_inc_##S(ctx, p, pe);                                                   \
        out[3] = symm_atomic_fetch_inc_##S(ctx, p, pe);                                    \
        symm_atomic_add_##S(ctx, p, v, pe);                                                \
        out[4] = symm_atomic_fetch_add_##S(ctx, p, v, pe);                                 \
        symm_atomic_and_##S(ctx, p, v, pe);                                                \
        out[5] = symm_atomic_fetch_and_##S(ctx, p, v, pe);                                 \
        symm_atomic_or_##S(ctx, p, v, pe);                                                 \
        out[6] = symm_atomic_fetch_or_##S(ctx, p, v, pe);                                  \
        symm_atomic_xor_##S(ctx, p, v, pe);                                                \
        out[7] = symm_atomic_fetch_xor_##S(ctx, p, v, pe);                                 \
    }
SYMM_FOR_EACH_AMO_TYPE(USE_AMO)

USE_FN symm_use_sync(const symm_ctx_t *ctx) {
    symm_fence(ctx);
    symm_fence_warp(ctx);
    symm_fence_block(ctx);
    symm_quiet(ctx);
    symm_quiet_warp(ctx);
    symm_quiet_block(ctx);
    symm_barrier(ctx);
    symm_barrier_warp(ctx);
    symm_barrier_block(ctx);
    symm_sync_block(ctx);
}
