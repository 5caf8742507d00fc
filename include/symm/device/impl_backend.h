/*
 * device/impl_backend.h - where a device call to a peer goes (docs/backends.md).
 *
 * A peer inside the context's load/store window (ldst_first, ldst_count) is
 * reached at p + (pe - my_pe) * stride by the native code of impl_rma.h and
 * friends. Any other peer goes to the context's backend: its device file
 * (backend_nvshmem.h, backend_nccl.h) first offers an address this GPU can
 * load and store (nvshmem_ptr, NCCL's LSA pointers), which the native code
 * then uses, and otherwise does the call through the library (NVSHMEM RMA,
 * NCCL GIN). A switch on ctx->backend picks the file, never a function
 * pointer (decision 8).
 *
 * Which backends a compilation carries:
 *   SYMM_DEVICE_BACKEND=native|nvshmem|nccl  exactly that one: the switch is a
 *                                 constant; with native every peer is in the
 *                                 window and the test folds away too.
 *   neither                       native, plus nvshmem with SYMM_DEVICE_WITH_NVSHMEM
 *                                 and nccl with SYMM_DEVICE_WITH_NCCL, chosen at
 *                                 run time by ctx->backend.
 * A call that has no way to a peer stops the kernel with a message naming
 * the call, the peer and what is missing (symm__no_path), never silently.
 */
#ifndef SYMM_DEVICE_IMPL_BACKEND_H
#define SYMM_DEVICE_IMPL_BACKEND_H

#define SYMM__BE_CAT_(a, b) a##b
#define SYMM__BE_CAT(a, b) SYMM__BE_CAT_(a, b)
/* Non-zero codes: an unknown name pastes to an undefined macro, which #if
 * reads as 0 and reports below. */
#define SYMM__BE_native 100
#define SYMM__BE_nvshmem 102
#define SYMM__BE_nccl 103

#if defined(SYMM_DEVICE_BACKEND)
#  if SYMM__BE_CAT(SYMM__BE_, SYMM_DEVICE_BACKEND) == SYMM__BE_native
#    define SYMM__BE_FIXED SYMM_BACKEND_NATIVE
#    define SYMM__BE_WITH_NVSHMEM 0
#    define SYMM__BE_WITH_NCCL 0
#  elif SYMM__BE_CAT(SYMM__BE_, SYMM_DEVICE_BACKEND) == SYMM__BE_nvshmem
#    define SYMM__BE_FIXED SYMM_BACKEND_NVSHMEM
#    define SYMM__BE_WITH_NVSHMEM 1
#    define SYMM__BE_WITH_NCCL 0
#  elif SYMM__BE_CAT(SYMM__BE_, SYMM_DEVICE_BACKEND) == SYMM__BE_nccl
#    define SYMM__BE_FIXED SYMM_BACKEND_NCCL
#    define SYMM__BE_WITH_NVSHMEM 0
#    define SYMM__BE_WITH_NCCL 1
#  else
#    error "SYMM_DEVICE_BACKEND must be native, nvshmem or nccl"
#  endif
#else
#  if defined(SYMM_DEVICE_WITH_NVSHMEM)
#    define SYMM__BE_WITH_NVSHMEM 1
#  else
#    define SYMM__BE_WITH_NVSHMEM 0
#  endif
#  if defined(SYMM_DEVICE_WITH_NCCL)
#    define SYMM__BE_WITH_NCCL 1
#  else
#    define SYMM__BE_WITH_NCCL 0
#  endif
#endif

#if defined(SYMM_DEVICE_BACKEND) && SYMM__BE_CAT(SYMM__BE_, SYMM_DEVICE_BACKEND) == SYMM__BE_native
#  define SYMM__BE_ONLY_NATIVE 1
#else
#  define SYMM__BE_ONLY_NATIVE 0
#endif

#if SYMM__BE_WITH_NCCL && !defined(__CUDACC__)
#  error "the nccl device backend is CUDA C++ (NCCL's device API): compile with nvcc or clang -x cuda"
#endif

/* Who executes a call: one thread, the 32 lanes of a warp, or a whole block. */
enum { SYMM__G_THREAD = 0, SYMM__G_WARP = 1, SYMM__G_BLOCK = 2 };

/* Atomic operations, as the backend files take them (inc is add 1). */
enum {
    SYMM__AMO_FETCH = 0,
    SYMM__AMO_SET,
    SYMM__AMO_SWAP,
    SYMM__AMO_CAS,
    SYMM__AMO_FETCH_ADD,
    SYMM__AMO_ADD,
    SYMM__AMO_FETCH_AND,
    SYMM__AMO_AND,
    SYMM__AMO_FETCH_OR,
    SYMM__AMO_OR,
    SYMM__AMO_FETCH_XOR,
    SYMM__AMO_XOR
};

/* The backend of the context: ctx->backend, or the compile-time choice. */
SYMM__DEVICE_INTERNAL uint32_t symm__backend_of(const symm_ctx_t *ctx) {
#if defined(SYMM__BE_FIXED)
    (void)ctx;
    return SYMM__BE_FIXED;
#else
    return ctx->backend;
#endif
}

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

#define SYMM__MSG_NO_PATH "symm: PE %d: %s to PE %d: %s\n"

/* Stop the kernel: `what` (the call) cannot reach team PE `pe`, because
 * `why`. Prints once per calling warp. */
SYMM__NOINLINE void symm__no_path(const symm_ctx_t *ctx, const char *what, int pe, const char *why) {
    if (symm__lane() == 0) {
#if defined(__CUDACC__)
        printf(SYMM__MSG_NO_PATH, ctx->world_pe, what, pe, why);
#else
        struct { int me; const char *what; int pe; const char *why; } a = { ctx->world_pe, what, pe, why };
        symm__vprintf(SYMM__MSG_NO_PATH, &a);
#endif
    }
    symm__trap();
}

/* Why a context's backend is not in this compilation. */
SYMM__DEVICE_INTERNAL const char *symm__missing_backend(const symm_ctx_t *ctx) {
    switch (ctx->backend) {
    case SYMM_BACKEND_NVSHMEM:
        return "the context is on the nvshmem backend, which this kernel was compiled without "
               "(define SYMM_DEVICE_WITH_NVSHMEM, or link libsymm_device_nvshmem_sm*.bc)";
    case SYMM_BACKEND_NCCL:
        return "the context is on the nccl backend, which this kernel was compiled without "
               "(define SYMM_DEVICE_WITH_NCCL, or link libsymm_device_nccl_sm*.bc)";
    default:
        return "the peer is outside the context's load/store window and its backend has no "
               "device calls";
    }
}

#if SYMM__BE_WITH_NVSHMEM
#  include "symm/device/backend_nvshmem.h"
#endif
#if SYMM__BE_WITH_NCCL
#  include "symm/device/backend_nccl.h"
#endif

/* ---- the dispatch: one switch per kind of call ------------------------------- */

/* An address of PE pe's copy of p that this GPU can load and store, when the
 * backend has one (NULL otherwise). pe is outside the arithmetic window. */
SYMM__DEVICE_INTERNAL void *symm__far_ptr(const symm_ctx_t *ctx, const void *p, int pe) {
    switch (symm__backend_of(ctx)) {
#if SYMM__BE_WITH_NVSHMEM
    case SYMM_BACKEND_NVSHMEM: return symm__nvshmem_ptr(ctx, p, pe);
#endif
#if SYMM__BE_WITH_NCCL
    case SYMM_BACKEND_NCCL: return symm__nccl_ptr(ctx, p, pe);
#endif
    default: (void)p; (void)pe; return NULL;
    }
}

/* Bulk put (put != 0) or get through the library, by group g. */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__far_rma(const symm_ctx_t *ctx, void *dest, const void *src,
                                                          size_t nbytes, int pe, int g, int put, int nbi) {
    switch (symm__backend_of(ctx)) {
#if SYMM__BE_WITH_NVSHMEM
    case SYMM_BACKEND_NVSHMEM: symm__nvshmem_rma(ctx, dest, src, nbytes, pe, g, put, nbi); return;
#endif
#if SYMM__BE_WITH_NCCL
    case SYMM_BACKEND_NCCL: symm__nccl_rma(ctx, dest, src, nbytes, pe, g, put, nbi); return;
#endif
    default:
        (void)dest; (void)src; (void)nbytes; (void)g; (void)nbi;
        symm__no_path(ctx, put ? "put" : "get", pe, symm__missing_backend(ctx));
    }
}

/* One value of `width` bits (8, 16, 32, 64) stored to / loaded from PE pe. */
SYMM__DEVICE_INTERNAL void symm__far_p(const symm_ctx_t *ctx, void *dest, uint64_t bits, int width, int pe) {
    switch (symm__backend_of(ctx)) {
#if SYMM__BE_WITH_NVSHMEM
    case SYMM_BACKEND_NVSHMEM: symm__nvshmem_p(ctx, dest, bits, width, pe); return;
#endif
#if SYMM__BE_WITH_NCCL
    case SYMM_BACKEND_NCCL: symm__nccl_p(ctx, dest, bits, width, pe); return;
#endif
    default:
        (void)dest; (void)bits; (void)width;
        symm__no_path(ctx, "p/st", pe, symm__missing_backend(ctx));
    }
}

SYMM__DEVICE_INTERNAL uint64_t symm__far_g(const symm_ctx_t *ctx, const void *src, int width, int pe) {
    switch (symm__backend_of(ctx)) {
#if SYMM__BE_WITH_NVSHMEM
    case SYMM_BACKEND_NVSHMEM: return symm__nvshmem_g(ctx, src, width, pe);
#endif
#if SYMM__BE_WITH_NCCL
    case SYMM_BACKEND_NCCL: return symm__nccl_g(ctx, src, width, pe);
#endif
    default:
        (void)src; (void)width;
        symm__no_path(ctx, "g/ld", pe, symm__missing_backend(ctx));
        return 0;
    }
}

/* Data, then the signal word updated by sig_op after it, through the library. */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__far_put_signal(const symm_ctx_t *ctx, void *dest, const void *src,
                                                                 size_t nbytes, uint64_t *sig, uint64_t signal,
                                                                 int sig_op, int pe, int g, int nbi) {
    switch (symm__backend_of(ctx)) {
#if SYMM__BE_WITH_NVSHMEM
    case SYMM_BACKEND_NVSHMEM:
        symm__nvshmem_put_signal(ctx, dest, src, nbytes, sig, signal, sig_op, pe, g, nbi);
        return;
#endif
#if SYMM__BE_WITH_NCCL
    case SYMM_BACKEND_NCCL:
        symm__nccl_put_signal(ctx, dest, src, nbytes, sig, signal, sig_op, pe, g, nbi);
        return;
#endif
    default:
        (void)dest; (void)src; (void)nbytes; (void)sig; (void)signal; (void)sig_op; (void)g; (void)nbi;
        symm__no_path(ctx, "put_signal", pe, symm__missing_backend(ctx));
    }
}

SYMM__DEVICE_INTERNAL void symm__far_signal_op(const symm_ctx_t *ctx, uint64_t *sig, uint64_t value, int sig_op,
                                               int pe) {
    switch (symm__backend_of(ctx)) {
#if SYMM__BE_WITH_NVSHMEM
    case SYMM_BACKEND_NVSHMEM: symm__nvshmem_signal_op(ctx, sig, value, sig_op, pe); return;
#endif
#if SYMM__BE_WITH_NCCL
    case SYMM_BACKEND_NCCL: symm__nccl_signal_op(ctx, sig, value, sig_op, pe); return;
#endif
    default:
        (void)sig; (void)value; (void)sig_op;
        symm__no_path(ctx, "signal_op", pe, symm__missing_backend(ctx));
    }
}

/* Atomic `op` (SYMM__AMO_*) on a `width`-bit (32, 64) word of PE pe; returns
 * the old value for the fetching forms. */
SYMM__DEVICE_INTERNAL uint64_t symm__far_amo(const symm_ctx_t *ctx, int op, int width, void *ptr, uint64_t value,
                                             uint64_t cond, int pe) {
    switch (symm__backend_of(ctx)) {
#if SYMM__BE_WITH_NVSHMEM
    case SYMM_BACKEND_NVSHMEM: return symm__nvshmem_amo(ctx, op, width, ptr, value, cond, pe);
#endif
#if SYMM__BE_WITH_NCCL
    case SYMM_BACKEND_NCCL: return symm__nccl_amo(ctx, op, width, ptr, value, cond, pe);
#endif
    default:
        (void)op; (void)width; (void)ptr; (void)value; (void)cond;
        symm__no_path(ctx, "atomic", pe, symm__missing_backend(ctx));
        return 0;
    }
}

/* What the library adds to symm's own fence / quiet (the native part, a PTX
 * fence, is done by the caller). Thread scope; a group form calls it in every
 * thread. Nothing for a backend this compilation lacks: there can be nothing
 * in flight through it. */
SYMM__DEVICE_INTERNAL void symm__far_fence(const symm_ctx_t *ctx) {
    switch (symm__backend_of(ctx)) {
#if SYMM__BE_WITH_NVSHMEM
    case SYMM_BACKEND_NVSHMEM: symm__nvshmem_fence(ctx); return;
#endif
#if SYMM__BE_WITH_NCCL
    case SYMM_BACKEND_NCCL: symm__nccl_fence(ctx); return;
#endif
    default: return;
    }
}

SYMM__DEVICE_INTERNAL void symm__far_quiet(const symm_ctx_t *ctx) {
    switch (symm__backend_of(ctx)) {
#if SYMM__BE_WITH_NVSHMEM
    case SYMM_BACKEND_NVSHMEM: symm__nvshmem_quiet(ctx); return;
#endif
#if SYMM__BE_WITH_NCCL
    case SYMM_BACKEND_NCCL: symm__nccl_quiet(ctx); return;
#endif
    default: return;
    }
}

/* The team barrier through the library (some PE is outside the window), by
 * group g; quiet != 0: barrier (completes this PE's operations first), else
 * sync. */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__far_barrier(const symm_ctx_t *ctx, int g, int quiet) {
    switch (symm__backend_of(ctx)) {
#if SYMM__BE_WITH_NVSHMEM
    case SYMM_BACKEND_NVSHMEM: symm__nvshmem_barrier(ctx, g, quiet); return;
#endif
#if SYMM__BE_WITH_NCCL
    case SYMM_BACKEND_NCCL: symm__nccl_barrier(ctx, g, quiet); return;
#endif
    default:
        (void)g; (void)quiet;
        symm__no_path(ctx, "barrier", ctx->ldst_first == 0 ? ctx->ldst_count : 0, symm__missing_backend(ctx));
    }
}

#endif /* SYMM_DEVICE_IMPL_BACKEND_H */
