/*
 * device/impl_ldst.h - symm_ld_<T> / symm_st_<T>: one remote load or store
 * with the caller's choice of ordering (enum symm_sem) and scope
 * (enum symm_scope). Mapping, in impl_ptx.h: WEAK -> ld/st.global, VOLATILE
 * -> .volatile, RELAXED -> .relaxed.<scope>, ACQUIRE (loads) / RELEASE
 * (stores) -> .acquire/.release.<scope>; a load given RELEASE acquires, a
 * store given ACQUIRE releases (the nearest stronger ordering).
 */
#ifndef SYMM_DEVICE_IMPL_LDST_H
#define SYMM_DEVICE_IMPL_LDST_H

/* A peer the backend reaches only through its library gets the library's
 * g/p; the ordering then comes from fences around it: an acquiring load
 * fences after the value arrived, a releasing store completes this PE's
 * earlier operations (quiet) before it. */
#define SYMM__DEFINE_LDST(S, T)                                                                 \
    SYMM_DEVICE_FN T symm_ld_##S(const symm_ctx_t *ctx, const T *ptr, int pe, int sem, int scope) { \
        const void *q = symm__addr(ctx, ptr, pe);                                              \
        SYMM__BITS_T(S) v;                                                                     \
        if (q)                                                                                 \
            return SYMM__FROMBITS_##S(SYMM__CAT(symm__ld_b, SYMM__W_##S)(q, sem, scope));      \
        v = (SYMM__BITS_T(S))symm__far_g(ctx, ptr, SYMM__W_##S, pe);                           \
        if (sem == SYMM_SEM_ACQUIRE || sem == SYMM_SEM_RELEASE)                                \
            symm__fence_acq_rel_sys();                                                         \
        return SYMM__FROMBITS_##S(v);                                                          \
    }                                                                                          \
    SYMM_DEVICE_FN void symm_st_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe, int sem, int scope) { \
        void *q = symm__addr(ctx, ptr, pe);                                                    \
        if (q) {                                                                               \
            SYMM__CAT(symm__st_b, SYMM__W_##S)(q, SYMM__TOBITS_##S(value), sem, scope);        \
            return;                                                                            \
        }                                                                                      \
        if (sem == SYMM_SEM_RELEASE || sem == SYMM_SEM_ACQUIRE) {                              \
            symm__fence_sc_sys();                                                              \
            symm__far_quiet(ctx);                                                              \
        }                                                                                      \
        symm__far_p(ctx, ptr, (uint64_t)SYMM__TOBITS_##S(value), SYMM__W_##S, pe);             \
    }
SYMM_FOR_EACH_LDST_TYPE(SYMM__DEFINE_LDST)
#undef SYMM__DEFINE_LDST

#endif /* SYMM_DEVICE_IMPL_LDST_H */
