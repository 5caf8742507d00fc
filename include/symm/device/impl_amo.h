/*
 * device/impl_amo.h - atomics on a peer's word: relaxed, system scope,
 * performed at the target (NVLink native atomics). Fetch is a relaxed load
 * and set a relaxed store (single aligned accesses are atomic); increment is
 * add 1, because PTX atom.inc wraps at a bound. Order them with fence/quiet.
 */
#ifndef SYMM_DEVICE_IMPL_AMO_H
#define SYMM_DEVICE_IMPL_AMO_H

#define SYMM__UT(S) SYMM__CAT(SYMM__CAT(uint, SYMM__W_##S), _t)

/* One atomic: at the load/store address when there is one (native PTX
 * atomics), else through the backend's library (op: SYMM__AMO_*). */
#define SYMM__AMO_AT(S, T, q, ctx, op, ptr, v, c, pe, native)                                     \
    void *q = symm__addr(ctx, ptr, pe);                                                          \
    if (q) {                                                                                     \
        native;                                                                                  \
    }                                                                                            \
    return (T)symm__far_amo(ctx, op, SYMM__W_##S, (void *)(ptr), (uint64_t)(SYMM__UT(S))(v),     \
                            (uint64_t)(SYMM__UT(S))(c), pe)

#define SYMM__DEFINE_AMO(S, T)                                                                   \
    SYMM_DEVICE_FN T symm_atomic_fetch_##S(const symm_ctx_t *ctx, const T *ptr, int pe) {        \
        SYMM__AMO_AT(S, T, q, ctx, SYMM__AMO_FETCH, ptr, 0, 0, pe,                                  \
                     return (T)SYMM__CAT(symm__ld_b, SYMM__W_##S)(q, SYMM_SEM_RELAXED, SYMM_SCOPE_SYS)); \
    }                                                                                            \
    SYMM_DEVICE_FN void symm_atomic_set_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe) {    \
        void *q = symm__addr(ctx, ptr, pe);                                                      \
        if (q)                                                                                   \
            SYMM__CAT(symm__st_b, SYMM__W_##S)(q, (SYMM__UT(S))value, SYMM_SEM_RELAXED, SYMM_SCOPE_SYS); \
        else                                                                                     \
            (void)symm__far_amo(ctx, SYMM__AMO_SET, SYMM__W_##S, ptr, (uint64_t)(SYMM__UT(S))value, 0, pe); \
    }                                                                                            \
    SYMM_DEVICE_FN T symm_atomic_swap_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe) {      \
        SYMM__AMO_AT(S, T, q, ctx, SYMM__AMO_SWAP, ptr, value, 0, pe,                               \
                     return (T)SYMM__CAT(symm__atom_exch_b, SYMM__W_##S)(q, (SYMM__UT(S))value)); \
    }                                                                                            \
    SYMM_DEVICE_FN T symm_atomic_compare_swap_##S(const symm_ctx_t *ctx, T *ptr, T cond, T value, \
                                                  int pe) {                                      \
        SYMM__AMO_AT(S, T, q, ctx, SYMM__AMO_CAS, ptr, value, cond, pe,                             \
                     return (T)SYMM__CAT(symm__atom_cas_b, SYMM__W_##S)(q, (SYMM__UT(S))cond,    \
                                                                         (SYMM__UT(S))value));   \
    }                                                                                            \
    SYMM_DEVICE_FN void symm_atomic_inc_##S(const symm_ctx_t *ctx, T *ptr, int pe) {             \
        symm_atomic_add_##S(ctx, ptr, (T)1, pe);                                                 \
    }                                                                                            \
    SYMM_DEVICE_FN T symm_atomic_fetch_inc_##S(const symm_ctx_t *ctx, T *ptr, int pe) {          \
        return symm_atomic_fetch_add_##S(ctx, ptr, (T)1, pe);                                    \
    }                                                                                            \
    SYMM__DEFINE_AMO_OP(S, T, add, ADD)                                                          \
    SYMM__DEFINE_AMO_OP(S, T, and, AND)                                                          \
    SYMM__DEFINE_AMO_OP(S, T, or, OR)                                                            \
    SYMM__DEFINE_AMO_OP(S, T, xor, XOR)

/* symm_atomic_<op> (red: no old value wanted) and symm_atomic_fetch_<op>. */
#define SYMM__DEFINE_AMO_OP(S, T, op, OP)                                                        \
    SYMM_DEVICE_FN void symm_atomic_##op##_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe) { \
        void *q = symm__addr(ctx, ptr, pe);                                                      \
        if (q)                                                                                   \
            SYMM__CAT(symm__red_##op##_b, SYMM__W_##S)(q, (SYMM__UT(S))value);                   \
        else                                                                                     \
            (void)symm__far_amo(ctx, SYMM__AMO_##OP, SYMM__W_##S, ptr, (uint64_t)(SYMM__UT(S))value, 0, pe); \
    }                                                                                            \
    SYMM_DEVICE_FN T symm_atomic_fetch_##op##_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe) { \
        SYMM__AMO_AT(S, T, q, ctx, SYMM__AMO_FETCH_##OP, ptr, value, 0, pe,                         \
                     return (T)SYMM__CAT(symm__atom_##op##_b, SYMM__W_##S)(q, (SYMM__UT(S))value)); \
    }

SYMM_FOR_EACH_AMO_TYPE(SYMM__DEFINE_AMO)
#undef SYMM__DEFINE_AMO
#undef SYMM__DEFINE_AMO_OP
#undef SYMM__AMO_AT
#undef SYMM__UT

#endif /* SYMM_DEVICE_IMPL_AMO_H */
