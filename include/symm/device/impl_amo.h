/*
 * device/impl_amo.h - atomics on a peer's word: relaxed, system scope,
 * performed at the target (NVLink native atomics). Fetch is a relaxed load
 * and set a relaxed store (single aligned accesses are atomic); increment is
 * add 1, because PTX atom.inc wraps at a bound. Order them with fence/quiet.
 */
#ifndef SYMM_DEVICE_IMPL_AMO_H
#define SYMM_DEVICE_IMPL_AMO_H

#define SYMM__UT(S) SYMM__CAT(SYMM__CAT(uint, SYMM__W_##S), _t)

#define SYMM__DEFINE_AMO(S, T)                                                                   \
    SYMM_DEVICE_FN T symm_atomic_fetch_##S(const symm_ctx_t *ctx, const T *ptr, int pe) {        \
        return (T)SYMM__CAT(symm__ld_b, SYMM__W_##S)(symm__peer_api(ctx, ptr, pe), SYMM_SEM_RELAXED, \
                                                     SYMM_SCOPE_SYS);                            \
    }                                                                                            \
    SYMM_DEVICE_FN void symm_atomic_set_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe) {    \
        SYMM__CAT(symm__st_b, SYMM__W_##S)(symm__peer_api(ctx, ptr, pe), (SYMM__UT(S))value,     \
                                           SYMM_SEM_RELAXED, SYMM_SCOPE_SYS);                    \
    }                                                                                            \
    SYMM_DEVICE_FN T symm_atomic_swap_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe) {      \
        return (T)SYMM__CAT(symm__atom_exch_b, SYMM__W_##S)(symm__peer_api(ctx, ptr, pe),        \
                                                            (SYMM__UT(S))value);                 \
    }                                                                                            \
    SYMM_DEVICE_FN T symm_atomic_compare_swap_##S(const symm_ctx_t *ctx, T *ptr, T cond, T value, \
                                                  int pe) {                                      \
        return (T)SYMM__CAT(symm__atom_cas_b, SYMM__W_##S)(symm__peer_api(ctx, ptr, pe),         \
                                                           (SYMM__UT(S))cond, (SYMM__UT(S))value); \
    }                                                                                            \
    SYMM_DEVICE_FN void symm_atomic_inc_##S(const symm_ctx_t *ctx, T *ptr, int pe) {             \
        SYMM__CAT(symm__red_add_b, SYMM__W_##S)(symm__peer_api(ctx, ptr, pe), 1);                \
    }                                                                                            \
    SYMM_DEVICE_FN T symm_atomic_fetch_inc_##S(const symm_ctx_t *ctx, T *ptr, int pe) {          \
        return (T)SYMM__CAT(symm__atom_add_b, SYMM__W_##S)(symm__peer_api(ctx, ptr, pe), 1);     \
    }                                                                                            \
    SYMM_DEVICE_FN void symm_atomic_add_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe) {    \
        SYMM__CAT(symm__red_add_b, SYMM__W_##S)(symm__peer_api(ctx, ptr, pe), (SYMM__UT(S))value); \
    }                                                                                            \
    SYMM_DEVICE_FN T symm_atomic_fetch_add_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe) { \
        return (T)SYMM__CAT(symm__atom_add_b, SYMM__W_##S)(symm__peer_api(ctx, ptr, pe),         \
                                                           (SYMM__UT(S))value);                  \
    }                                                                                            \
    SYMM_DEVICE_FN void symm_atomic_and_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe) {    \
        SYMM__CAT(symm__red_and_b, SYMM__W_##S)(symm__peer_api(ctx, ptr, pe), (SYMM__UT(S))value); \
    }                                                                                            \
    SYMM_DEVICE_FN T symm_atomic_fetch_and_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe) { \
        return (T)SYMM__CAT(symm__atom_and_b, SYMM__W_##S)(symm__peer_api(ctx, ptr, pe),         \
                                                           (SYMM__UT(S))value);                  \
    }                                                                                            \
    SYMM_DEVICE_FN void symm_atomic_or_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe) {     \
        SYMM__CAT(symm__red_or_b, SYMM__W_##S)(symm__peer_api(ctx, ptr, pe), (SYMM__UT(S))value); \
    }                                                                                            \
    SYMM_DEVICE_FN T symm_atomic_fetch_or_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe) {  \
        return (T)SYMM__CAT(symm__atom_or_b, SYMM__W_##S)(symm__peer_api(ctx, ptr, pe),          \
                                                          (SYMM__UT(S))value);                   \
    }                                                                                            \
    SYMM_DEVICE_FN void symm_atomic_xor_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe) {    \
        SYMM__CAT(symm__red_xor_b, SYMM__W_##S)(symm__peer_api(ctx, ptr, pe), (SYMM__UT(S))value); \
    }                                                                                            \
    SYMM_DEVICE_FN T symm_atomic_fetch_xor_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe) { \
        return (T)SYMM__CAT(symm__atom_xor_b, SYMM__W_##S)(symm__peer_api(ctx, ptr, pe),         \
                                                           (SYMM__UT(S))value);                  \
    }
SYMM_FOR_EACH_AMO_TYPE(SYMM__DEFINE_AMO)
#undef SYMM__DEFINE_AMO
#undef SYMM__UT

#endif /* SYMM_DEVICE_IMPL_AMO_H */
