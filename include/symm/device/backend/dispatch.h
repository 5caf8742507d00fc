/*
 * device/backend/dispatch.h - where a device call to a peer goes
 * (docs/backends.md).
 *
 * A peer inside the context's load/store window (ldst_first, ldst_count) is
 * reached at p + (pe - my_pe) * stride by the native code of impl_rma.h and
 * friends (native.h says who is in the window). Any other peer goes to the
 * context's backend: its device file (nvshmem.h, nccl.h beside this one)
 * first offers an address this GPU can load and store (nvshmem_ptr, NCCL's
 * LSA pointers), which the native code then uses, and otherwise does the call
 * through the library (NVSHMEM RMA, NCCL GIN). A switch on ctx->backend,
 * expanded from list.h, picks the file, never a function pointer (decision 8).
 *
 * Which backends a compilation carries:
 *   SYMM_DEVICE_BACKEND=<name>    exactly that one (a name of list.h with
 *                                 device calls, or native): the switch is a
 *                                 constant; with native every peer is in the
 *                                 window and the test folds away too.
 *   neither                       native, plus each backend <name> of kind
 *                                 KIND whose SYMM_DEVICE_WITH_<KIND> is
 *                                 defined, chosen at run time by ctx->backend.
 * A call that has no way to a peer stops the kernel with a message naming
 * the call, the peer and what is missing (symm__no_path), never silently.
 */
#ifndef SYMM_DEVICE_BACKEND_DISPATCH_H
#define SYMM_DEVICE_BACKEND_DISPATCH_H

#include "symm/device/backend/list.h"

#define SYMM__BE_CAT_(a, b) a##b
#define SYMM__BE_CAT(a, b) SYMM__BE_CAT_(a, b)
#define SYMM__BE_CAT2_(a, b) a##b
#define SYMM__BE_CAT2(a, b) SYMM__BE_CAT2_(a, b)
/* 1 when SYMM_DEVICE_BACKEND names the backend whose device file defined
 * SYMM__BE_ID_<name> as `id` (non-zero: an unknown name pastes to an
 * undefined macro, which #if reads as 0). */
#define SYMM__BE_CHOSEN(id) (SYMM__BE_CAT(SYMM__BE_ID_, SYMM_DEVICE_BACKEND) == (id))

/* The tokens of a list line's dev column: far backends give their device
 * file's SYMM__BE_IF_<name>(...) (the tokens when compiled in, else nothing);
 * the others nothing. SYMM__BE_IS_FAR keeps the tokens for every far backend. */
#define SYMM__BE_DEV_none(name, ...)
#define SYMM__BE_DEV_far(name, ...) SYMM__BE_CAT(SYMM__BE_IF_, name)(__VA_ARGS__)
#define SYMM__BE_FAR(name, dev, ...) SYMM__BE_CAT2(SYMM__BE_DEV_, dev)(name, __VA_ARGS__)
#define SYMM__BE_ALL_none(...)
#define SYMM__BE_ALL_far(...) __VA_ARGS__
#define SYMM__BE_IS_FAR(dev, ...) SYMM__BE_CAT2(SYMM__BE_ALL_, dev)(__VA_ARGS__)

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


/* One file per backend with device calls, and native's window: each decides
 * whether this compilation carries it. */
#include "symm/device/backend/native.h"
#include "symm/device/backend/nvshmem.h"
#include "symm/device/backend/nccl.h"

#if defined(SYMM_DEVICE_BACKEND) && !defined(SYMM__BE_FIXED)
#  error "SYMM_DEVICE_BACKEND must name native or a backend of symm/device/backend/list.h with device calls"
#endif

/* The backend of the context: ctx->backend, or the compile-time choice. */
SYMM__DEVICE_INTERNAL uint32_t symm__backend_of(const symm_ctx_t *ctx) {
#if defined(SYMM__BE_FIXED)
    (void)ctx;
    return SYMM__BE_FIXED;
#else
    return ctx->backend;
#endif
}

/* Why a context's backend is not in this compilation. */
SYMM__DEVICE_INTERNAL const char *symm__missing_backend(const symm_ctx_t *ctx) {
    switch (ctx->backend) {
#define SYMM__X(name, KIND, dev, bitcode, ...)                                                                \
    SYMM__BE_IS_FAR(dev, case SYMM_BACKEND_##KIND:                                                            \
                    return "the context is on the " #name " backend, which this kernel was compiled without " \
                           "(define SYMM_DEVICE_WITH_" #KIND ", or link " bitcode "_sm*.bc)";)
        SYMM__BACKEND_LIST(SYMM__X)
#undef SYMM__X
    default:
        return "the peer is outside the context's load/store window and its backend has no "
               "device calls";
    }
}

/* ---- the dispatch: one switch per kind of call, a case per far backend ------- */

/* An address of PE pe's copy of p that this GPU can load and store, when the
 * backend has one (NULL otherwise). pe is outside the arithmetic window. */
SYMM__DEVICE_INTERNAL void *symm__far_ptr(const symm_ctx_t *ctx, const void *p, int pe) {
    switch (symm__backend_of(ctx)) {
#define SYMM__X(name, KIND, dev, ...) \
    SYMM__BE_FAR(name, dev, case SYMM_BACKEND_##KIND: return symm__##name##_ptr(ctx, p, pe);)
        SYMM__BACKEND_LIST(SYMM__X)
#undef SYMM__X
    default: (void)p; (void)pe; return NULL;
    }
}

/* Bulk put (put != 0) or get through the library, by group g. */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__far_rma(const symm_ctx_t *ctx, void *dest, const void *src,
                                                          size_t nbytes, int pe, int g, int put, int nbi) {
    switch (symm__backend_of(ctx)) {
#define SYMM__X(name, KIND, dev, ...)                                                         \
    SYMM__BE_FAR(name, dev, case SYMM_BACKEND_##KIND:                                         \
                 symm__##name##_rma(ctx, dest, src, nbytes, pe, g, put, nbi); return;)
        SYMM__BACKEND_LIST(SYMM__X)
#undef SYMM__X
    default:
        (void)dest; (void)src; (void)nbytes; (void)g; (void)nbi;
        symm__no_path(ctx, put ? "put" : "get", pe, symm__missing_backend(ctx));
    }
}

/* One value of `width` bits (8, 16, 32, 64) stored to / loaded from PE pe. */
SYMM__DEVICE_INTERNAL void symm__far_p(const symm_ctx_t *ctx, void *dest, uint64_t bits, int width, int pe) {
    switch (symm__backend_of(ctx)) {
#define SYMM__X(name, KIND, dev, ...) \
    SYMM__BE_FAR(name, dev, case SYMM_BACKEND_##KIND: symm__##name##_p(ctx, dest, bits, width, pe); return;)
        SYMM__BACKEND_LIST(SYMM__X)
#undef SYMM__X
    default:
        (void)dest; (void)bits; (void)width;
        symm__no_path(ctx, "p/st", pe, symm__missing_backend(ctx));
    }
}

SYMM__DEVICE_INTERNAL uint64_t symm__far_g(const symm_ctx_t *ctx, const void *src, int width, int pe) {
    switch (symm__backend_of(ctx)) {
#define SYMM__X(name, KIND, dev, ...) \
    SYMM__BE_FAR(name, dev, case SYMM_BACKEND_##KIND: return symm__##name##_g(ctx, src, width, pe);)
        SYMM__BACKEND_LIST(SYMM__X)
#undef SYMM__X
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
#define SYMM__X(name, KIND, dev, ...)                                                                     \
    SYMM__BE_FAR(name, dev, case SYMM_BACKEND_##KIND:                                                     \
                 symm__##name##_put_signal(ctx, dest, src, nbytes, sig, signal, sig_op, pe, g, nbi); return;)
        SYMM__BACKEND_LIST(SYMM__X)
#undef SYMM__X
    default:
        (void)dest; (void)src; (void)nbytes; (void)sig; (void)signal; (void)sig_op; (void)g; (void)nbi;
        symm__no_path(ctx, "put_signal", pe, symm__missing_backend(ctx));
    }
}

SYMM__DEVICE_INTERNAL void symm__far_signal_op(const symm_ctx_t *ctx, uint64_t *sig, uint64_t value, int sig_op,
                                               int pe) {
    switch (symm__backend_of(ctx)) {
#define SYMM__X(name, KIND, dev, ...) \
    SYMM__BE_FAR(name, dev, case SYMM_BACKEND_##KIND: symm__##name##_signal_op(ctx, sig, value, sig_op, pe); return;)
        SYMM__BACKEND_LIST(SYMM__X)
#undef SYMM__X
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
#define SYMM__X(name, KIND, dev, ...) \
    SYMM__BE_FAR(name, dev, case SYMM_BACKEND_##KIND: return symm__##name##_amo(ctx, op, width, ptr, value, cond, pe);)
        SYMM__BACKEND_LIST(SYMM__X)
#undef SYMM__X
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
#define SYMM__X(name, KIND, dev, ...) SYMM__BE_FAR(name, dev, case SYMM_BACKEND_##KIND: symm__##name##_fence(ctx); return;)
        SYMM__BACKEND_LIST(SYMM__X)
#undef SYMM__X
    default: return;
    }
}

SYMM__DEVICE_INTERNAL void symm__far_quiet(const symm_ctx_t *ctx) {
    switch (symm__backend_of(ctx)) {
#define SYMM__X(name, KIND, dev, ...) SYMM__BE_FAR(name, dev, case SYMM_BACKEND_##KIND: symm__##name##_quiet(ctx); return;)
        SYMM__BACKEND_LIST(SYMM__X)
#undef SYMM__X
    default: return;
    }
}

/* The team barrier through the library (some PE is outside the window), by
 * group g; quiet != 0: barrier (completes this PE's operations first), else
 * sync. */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__far_barrier(const symm_ctx_t *ctx, int g, int quiet) {
    switch (symm__backend_of(ctx)) {
#define SYMM__X(name, KIND, dev, ...) \
    SYMM__BE_FAR(name, dev, case SYMM_BACKEND_##KIND: symm__##name##_barrier(ctx, g, quiet); return;)
        SYMM__BACKEND_LIST(SYMM__X)
#undef SYMM__X
    default:
        (void)g; (void)quiet;
        symm__no_path(ctx, "barrier", ctx->ldst_first == 0 ? ctx->ldst_count : 0, symm__missing_backend(ctx));
    }
}

#endif /* SYMM_DEVICE_BACKEND_DISPATCH_H */
