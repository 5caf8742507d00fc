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

#define SYMM__DEFINE_LDST(S, T)                                                                 \
    SYMM_DEVICE_FN T symm_ld_##S(const symm_ctx_t *ctx, const T *ptr, int pe, int sem, int scope) { \
        return SYMM__FROMBITS_##S(                                                             \
            SYMM__CAT(symm__ld_b, SYMM__W_##S)(symm__peer_api(ctx, ptr, pe), sem, scope));     \
    }                                                                                          \
    SYMM_DEVICE_FN void symm_st_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe, int sem, int scope) { \
        SYMM__CAT(symm__st_b, SYMM__W_##S)(symm__peer_api(ctx, ptr, pe), SYMM__TOBITS_##S(value), sem, scope); \
    }
SYMM_FOR_EACH_LDST_TYPE(SYMM__DEFINE_LDST)
#undef SYMM__DEFINE_LDST

#endif /* SYMM_DEVICE_IMPL_LDST_H */
