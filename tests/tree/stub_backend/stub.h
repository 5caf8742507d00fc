/*
 * device/backend/stub.h - the stub backend's device calls (included by
 * dispatch.h; empty unless the compilation carries the stub backend). Every
 * call goes to an undefined library function symm_stub_lib_*, so a test sees
 * in the bitcode which compilations carry it.
 */
#ifndef SYMM_DEVICE_BACKEND_STUB_H
#define SYMM_DEVICE_BACKEND_STUB_H

#define SYMM__BE_ID_stub 104 /* 100 + SYMM_BACKEND_STUB */
#if defined(SYMM_DEVICE_BACKEND)
#  if SYMM__BE_CHOSEN(SYMM__BE_ID_stub)
#    define SYMM__BE_WITH_STUB 1
#    define SYMM__BE_FIXED SYMM_BACKEND_STUB
#  else
#    define SYMM__BE_WITH_STUB 0
#  endif
#elif defined(SYMM_DEVICE_WITH_STUB)
#  define SYMM__BE_WITH_STUB 1
#else
#  define SYMM__BE_WITH_STUB 0
#endif
#if SYMM__BE_WITH_STUB
#  define SYMM__BE_IF_stub(...) __VA_ARGS__
#else
#  define SYMM__BE_IF_stub(...)
#endif

#if SYMM__BE_WITH_STUB

/* the library's device function (undefined: nothing links this bitcode) */
#if defined(__CUDACC__)
extern "C" __device__ void symm_stub_lib_call(const char *what, int pe);
#else
void symm_stub_lib_call(const char *what, int pe);
#endif

SYMM__DEVICE_INTERNAL void *symm__stub_ptr(const symm_ctx_t *ctx, const void *p, int pe) {
    (void)ctx; (void)p; (void)pe;
    return NULL;
}
SYMM__DEVICE_INTERNAL void symm__stub_rma(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes, int pe,
                                          int g, int put, int nbi) {
    (void)ctx; (void)dest; (void)src; (void)nbytes; (void)g; (void)nbi;
    symm_stub_lib_call(put ? "put" : "get", pe);
}
SYMM__DEVICE_INTERNAL void symm__stub_p(const symm_ctx_t *ctx, void *dest, uint64_t bits, int width, int pe) {
    (void)ctx; (void)dest; (void)bits; (void)width;
    symm_stub_lib_call("p", pe);
}
SYMM__DEVICE_INTERNAL uint64_t symm__stub_g(const symm_ctx_t *ctx, const void *src, int width, int pe) {
    (void)ctx; (void)src; (void)width;
    symm_stub_lib_call("g", pe);
    return 0;
}
SYMM__DEVICE_INTERNAL void symm__stub_put_signal(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes,
                                                 uint64_t *sig, uint64_t signal, int sig_op, int pe, int g, int nbi) {
    (void)ctx; (void)dest; (void)src; (void)nbytes; (void)sig; (void)signal; (void)sig_op; (void)g; (void)nbi;
    symm_stub_lib_call("put_signal", pe);
}
SYMM__DEVICE_INTERNAL void symm__stub_signal_op(const symm_ctx_t *ctx, uint64_t *sig, uint64_t value, int sig_op,
                                                int pe) {
    (void)ctx; (void)sig; (void)value; (void)sig_op;
    symm_stub_lib_call("signal_op", pe);
}
SYMM__DEVICE_INTERNAL uint64_t symm__stub_amo(const symm_ctx_t *ctx, int op, int width, void *ptr, uint64_t value,
                                              uint64_t cond, int pe) {
    (void)ctx; (void)op; (void)width; (void)ptr; (void)value; (void)cond;
    symm_stub_lib_call("atomic", pe);
    return 0;
}
SYMM__DEVICE_INTERNAL void symm__stub_fence(const symm_ctx_t *ctx) { (void)ctx; symm_stub_lib_call("fence", -1); }
SYMM__DEVICE_INTERNAL void symm__stub_quiet(const symm_ctx_t *ctx) { (void)ctx; symm_stub_lib_call("quiet", -1); }
SYMM__DEVICE_INTERNAL void symm__stub_barrier(const symm_ctx_t *ctx, int g, int quiet) {
    (void)ctx; (void)g; (void)quiet;
    symm_stub_lib_call("barrier", -1);
}

#endif /* SYMM__BE_WITH_STUB */

#endif /* SYMM_DEVICE_BACKEND_STUB_H */
