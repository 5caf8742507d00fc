/*
 * device/backend/native.h - the native backend's part of the dispatch
 * (included by dispatch.h): which peers a kernel reaches by load/store at
 * p + (pe - my_pe) * stride. The native backend has no device calls of its
 * own beyond that window: impl_rma.h and friends are its device code.
 */
#ifndef SYMM_DEVICE_BACKEND_NATIVE_H
#define SYMM_DEVICE_BACKEND_NATIVE_H

/* Whether SYMM_DEVICE_BACKEND=native fixed this compilation to it. */
#define SYMM__BE_ID_native 100 /* 100 + SYMM_BACKEND_NATIVE */
#if defined(SYMM_DEVICE_BACKEND) && SYMM__BE_CHOSEN(SYMM__BE_ID_native)
#  define SYMM__BE_ONLY_NATIVE 1
#  define SYMM__BE_FIXED SYMM_BACKEND_NATIVE
#else
#  define SYMM__BE_ONLY_NATIVE 0
#endif

/* 1 when team PE pe is reached at p + (pe - my_pe) * stride. */
SYMM__DEVICE_INTERNAL int symm__ldst_peer(const symm_ctx_t *ctx, int pe) {
#if SYMM__BE_ONLY_NATIVE
    (void)ctx;
    (void)pe;
    return 1;
#else
    int32_t first, count;
    symm__ctx_ldst(ctx, &first, &count);
    return (uint32_t)(pe - first) < (uint32_t)count;
#endif
}

/* 1 when every PE of the team is in the window (symm's own barrier and
 * device collectives need that). */
SYMM__DEVICE_INTERNAL int symm__ldst_all(const symm_ctx_t *ctx) {
#if SYMM__BE_ONLY_NATIVE
    (void)ctx;
    return 1;
#else
    int32_t first, count;
    symm__ctx_ldst(ctx, &first, &count);
    return first == 0 && count == ctx->n_pes;
#endif
}

#endif /* SYMM_DEVICE_BACKEND_NATIVE_H */
