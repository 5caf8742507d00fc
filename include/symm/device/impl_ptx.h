/*
 * device/impl_ptx.h - PTX loads, stores and atomics by width, ordering and
 * scope: the only place the device API spells memory instructions (the bulk
 * copy loops in impl_copy.h have their own vector forms).
 *
 * Every access is `asm volatile` with a "memory" clobber, so the compiler
 * neither reorders it against other memory accesses of the thread nor caches
 * values across it: the ordering is the PTX one written here, nothing less.
 * Addresses are generic pointers into global memory (a heap address, a peer's
 * copy of one, or the host-mapped abort flag), hence the .global forms.
 *
 * sem/scope are the int values of enum symm_sem / enum symm_scope; inlined
 * with constants the switches fold to one instruction. Widths 8 and 16 travel
 * in 32-bit registers (PTX allows a wider register for sub-word ld/st).
 */
#ifndef SYMM_DEVICE_IMPL_PTX_H
#define SYMM_DEVICE_IMPL_PTX_H

/* ---- load / store with ordering and scope ---------------------------------- */

#define SYMM__ASM_LD(ins, C, v, p) \
    asm volatile(ins " %0, [%1];" : "=" C(v) : "l"(p) : "memory")
#define SYMM__ASM_ST(ins, C, v, p) \
    asm volatile(ins " [%0], %1;" ::"l"(p), C(v) : "memory")

/* symm__ld_b<W>(p, sem, scope): WEAK -> ld.global (cacheable, not ordered);
 * VOLATILE -> ld.volatile; RELAXED -> ld.relaxed.<scope>; anything else
 * (ACQUIRE, or RELEASE taken as the nearest stronger) -> ld.acquire.<scope>.
 * Unknown scopes are SYS, the strongest. */
#define SYMM__DEFINE_LD(W, RT, C, TY)                                                       \
    SYMM__DEVICE_INTERNAL RT symm__ld_b##W(const void *p, int sem, int scope) {            \
        RT v;                                                                              \
        switch (sem) {                                                                     \
        case SYMM_SEM_WEAK: SYMM__ASM_LD("ld.global." TY, C, v, p); break;                 \
        case SYMM_SEM_VOLATILE: SYMM__ASM_LD("ld.volatile.global." TY, C, v, p); break;    \
        case SYMM_SEM_RELAXED:                                                             \
            switch (scope) {                                                               \
            case SYMM_SCOPE_CTA: SYMM__ASM_LD("ld.relaxed.cta.global." TY, C, v, p); break; \
            case SYMM_SCOPE_GPU: SYMM__ASM_LD("ld.relaxed.gpu.global." TY, C, v, p); break; \
            default: SYMM__ASM_LD("ld.relaxed.sys.global." TY, C, v, p); break;            \
            }                                                                              \
            break;                                                                         \
        default:                                                                           \
            switch (scope) {                                                               \
            case SYMM_SCOPE_CTA: SYMM__ASM_LD("ld.acquire.cta.global." TY, C, v, p); break; \
            case SYMM_SCOPE_GPU: SYMM__ASM_LD("ld.acquire.gpu.global." TY, C, v, p); break; \
            default: SYMM__ASM_LD("ld.acquire.sys.global." TY, C, v, p); break;            \
            }                                                                              \
            break;                                                                         \
        }                                                                                  \
        return v;                                                                          \
    }

/* symm__st_b<W>(p, v, sem, scope): WEAK -> st.global; VOLATILE -> st.volatile;
 * RELAXED -> st.relaxed.<scope>; anything else (RELEASE, or ACQUIRE taken as
 * the nearest stronger) -> st.release.<scope>. */
#define SYMM__DEFINE_ST(W, RT, C, TY)                                                        \
    SYMM__DEVICE_INTERNAL void symm__st_b##W(void *p, RT v, int sem, int scope) {           \
        switch (sem) {                                                                      \
        case SYMM_SEM_WEAK: SYMM__ASM_ST("st.global." TY, C, v, p); break;                  \
        case SYMM_SEM_VOLATILE: SYMM__ASM_ST("st.volatile.global." TY, C, v, p); break;     \
        case SYMM_SEM_RELAXED:                                                              \
            switch (scope) {                                                                \
            case SYMM_SCOPE_CTA: SYMM__ASM_ST("st.relaxed.cta.global." TY, C, v, p); break; \
            case SYMM_SCOPE_GPU: SYMM__ASM_ST("st.relaxed.gpu.global." TY, C, v, p); break; \
            default: SYMM__ASM_ST("st.relaxed.sys.global." TY, C, v, p); break;             \
            }                                                                               \
            break;                                                                          \
        default:                                                                            \
            switch (scope) {                                                                \
            case SYMM_SCOPE_CTA: SYMM__ASM_ST("st.release.cta.global." TY, C, v, p); break; \
            case SYMM_SCOPE_GPU: SYMM__ASM_ST("st.release.gpu.global." TY, C, v, p); break; \
            default: SYMM__ASM_ST("st.release.sys.global." TY, C, v, p); break;             \
            }                                                                               \
            break;                                                                          \
        }                                                                                   \
    }

SYMM__DEFINE_LD(8, uint32_t, "r", "u8")
SYMM__DEFINE_LD(16, uint32_t, "r", "u16")
SYMM__DEFINE_LD(32, uint32_t, "r", "b32")
SYMM__DEFINE_LD(64, uint64_t, "l", "b64")
SYMM__DEFINE_ST(8, uint32_t, "r", "u8")
SYMM__DEFINE_ST(16, uint32_t, "r", "u16")
SYMM__DEFINE_ST(32, uint32_t, "r", "b32")
SYMM__DEFINE_ST(64, uint64_t, "l", "b64")

#undef SYMM__DEFINE_LD
#undef SYMM__DEFINE_ST

/* ---- atomics: relaxed, system scope, performed at the target --------------- */

/* Fetching forms (atom) return the old value; the others (red) do not wait
 * for one, so a stream of them does not stall on NVLink round trips. PTX's
 * atom.inc wraps at a bound, so increment is add 1 (in impl_amo.h). */
#define SYMM__DEFINE_ATOM(W, RT, C)                                                          \
    SYMM__DEVICE_INTERNAL RT symm__atom_add_b##W(void *p, RT v) {                           \
        RT old;                                                                             \
        asm volatile("atom.relaxed.sys.global.add.u" #W " %0, [%1], %2;"                    \
                     : "=" C(old) : "l"(p), C(v) : "memory");                               \
        return old;                                                                         \
    }                                                                                       \
    SYMM__DEVICE_INTERNAL RT symm__atom_exch_b##W(void *p, RT v) {                          \
        RT old;                                                                             \
        asm volatile("atom.relaxed.sys.global.exch.b" #W " %0, [%1], %2;"                   \
                     : "=" C(old) : "l"(p), C(v) : "memory");                               \
        return old;                                                                         \
    }                                                                                       \
    SYMM__DEVICE_INTERNAL RT symm__atom_cas_b##W(void *p, RT cmp, RT v) {                   \
        RT old;                                                                             \
        asm volatile("atom.relaxed.sys.global.cas.b" #W " %0, [%1], %2, %3;"                \
                     : "=" C(old) : "l"(p), C(cmp), C(v) : "memory");                       \
        return old;                                                                         \
    }                                                                                       \
    SYMM__DEVICE_INTERNAL RT symm__atom_and_b##W(void *p, RT v) {                           \
        RT old;                                                                             \
        asm volatile("atom.relaxed.sys.global.and.b" #W " %0, [%1], %2;"                    \
                     : "=" C(old) : "l"(p), C(v) : "memory");                               \
        return old;                                                                         \
    }                                                                                       \
    SYMM__DEVICE_INTERNAL RT symm__atom_or_b##W(void *p, RT v) {                            \
        RT old;                                                                             \
        asm volatile("atom.relaxed.sys.global.or.b" #W " %0, [%1], %2;"                     \
                     : "=" C(old) : "l"(p), C(v) : "memory");                               \
        return old;                                                                         \
    }                                                                                       \
    SYMM__DEVICE_INTERNAL RT symm__atom_xor_b##W(void *p, RT v) {                           \
        RT old;                                                                             \
        asm volatile("atom.relaxed.sys.global.xor.b" #W " %0, [%1], %2;"                    \
                     : "=" C(old) : "l"(p), C(v) : "memory");                               \
        return old;                                                                         \
    }                                                                                       \
    SYMM__DEVICE_INTERNAL void symm__red_add_b##W(void *p, RT v) {                          \
        asm volatile("red.relaxed.sys.global.add.u" #W " [%0], %1;" ::"l"(p), C(v) : "memory"); \
    }                                                                                       \
    SYMM__DEVICE_INTERNAL void symm__red_and_b##W(void *p, RT v) {                          \
        asm volatile("red.relaxed.sys.global.and.b" #W " [%0], %1;" ::"l"(p), C(v) : "memory"); \
    }                                                                                       \
    SYMM__DEVICE_INTERNAL void symm__red_or_b##W(void *p, RT v) {                           \
        asm volatile("red.relaxed.sys.global.or.b" #W " [%0], %1;" ::"l"(p), C(v) : "memory"); \
    }                                                                                       \
    SYMM__DEVICE_INTERNAL void symm__red_xor_b##W(void *p, RT v) {                          \
        asm volatile("red.relaxed.sys.global.xor.b" #W " [%0], %1;" ::"l"(p), C(v) : "memory"); \
    }

SYMM__DEFINE_ATOM(32, uint32_t, "r")
SYMM__DEFINE_ATOM(64, uint64_t, "l")

#undef SYMM__DEFINE_ATOM

/* ---- signal updates: release, system scope ------------------------------------- */

/* The word is updated after (in the release sense) everything this thread has
 * written or observed: a PE that reads the new value with acquire sees it. */
SYMM__DEVICE_INTERNAL void symm__signal_set_release(uint64_t *p, uint64_t v) {
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

SYMM__DEVICE_INTERNAL void symm__signal_add_release(uint64_t *p, uint64_t v) {
    asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

#endif /* SYMM_DEVICE_IMPL_PTX_H */
