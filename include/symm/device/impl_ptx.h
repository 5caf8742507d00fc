/*
 * device/impl_ptx.h - the only place for hand-written PTX in symm's device
 * code: every other header (the device API, the collectives, the bitcode
 * source) calls the functions here and spells no instruction itself
 * (ctest tree_layers checks it).
 *
 * Memory accesses are `asm volatile` with a "memory" clobber, so the
 * compiler neither reorders them against other memory accesses of the thread
 * nor caches values across them: the ordering is the PTX one written here,
 * nothing less. Addresses are generic pointers into global memory (a heap
 * address, a peer's copy of one, or the host-mapped abort flag), hence the
 * .global forms.
 *
 * sem/scope are the int values of enum symm_sem / enum symm_scope; inlined
 * with constants the switches fold to one instruction. Widths 8 and 16 travel
 * in 32-bit registers (PTX allows a wider register for sub-word ld/st).
 */
#ifndef SYMM_DEVICE_IMPL_PTX_H
#define SYMM_DEVICE_IMPL_PTX_H

#include <stdint.h>
#include "symm/symm_types.h"
#include "symm/device/defs.h"

/* ---- special registers, fences, stopping ------------------------------------- */

/* Lane of the calling thread in its warp (warps are cut from the linear
 * thread index, so this is right for any block shape). */
SYMM__DEVICE_INTERNAL uint32_t symm__lane(void) {
    uint32_t lane;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    return lane;
}

/* ---- time ------------------------------------------------------------------ */

/* %globaltimer: nanoseconds, shared by every SM of the GPU. */
SYMM__DEVICE_INTERNAL uint64_t symm__globaltimer(void) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* Suspends the thread for about `ns` nanoseconds (at most 1 ms): lets a
 * thread that only waits give its issue slots to the others. */
SYMM__DEVICE_INTERNAL void symm__nanosleep(uint32_t ns) {
    asm volatile("nanosleep.u32 %0;" ::"r"(ns));
}

/* Programmatic dependent launch (sm_90+; nothing on older GPUs, and nothing
 * in a grid launched without it): wait until the grids this one depends on
 * have completed and their memory is visible; let the grid launched after
 * this one on its stream start its blocks now. */
SYMM__DEVICE_INTERNAL void symm__griddep_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

SYMM__DEVICE_INTERNAL void symm__griddep_launch(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* Have x computed here: the compiler keeps volatile asm in program order, so arithmetic
 * pinned before a wait (griddepcontrol.wait) is done while the wait lasts, not after it. */
SYMM__DEVICE_INTERNAL void symm__pin_u32(uint32_t *x) {
    asm volatile("" : "+r"(*x));
}

SYMM__DEVICE_INTERNAL void symm__pin_u64(uint64_t *x) {
    asm volatile("" : "+l"(*x));
}

/* Bring the line of p (a generic address) into this SM's L1 without holding a
 * register or waiting: later loads of it hit. */
SYMM__DEVICE_INTERNAL void symm__prefetch_l1(const void *p) {
    asm volatile("prefetch.L1 [%0];" ::"l"(p));
}

/* bar.sync id, n: the barrier `id` (1..15; 0 is the whole block's) over n
 * threads (a multiple of 32), so groups of warps of one block meet without
 * the others. nvcc only: symm__group_sync (impl_arch.h) is the caller. */
SYMM__DEVICE_INTERNAL void symm__ptx_bar_sync_n(uint32_t id, uint32_t n) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}

/* cp.async.cg.shared.global (sm_80+): 16 bytes from global memory at `gmem`
 * into shared memory at `smem` (both 16-byte aligned, generic addresses)
 * without holding a register while they travel; complete for the issuing
 * thread after a cp.async.wait_group that covers its group. */
SYMM__DEVICE_INTERNAL void symm__cp_async16(void *smem, const void *gmem) {
    asm volatile("{\n\t.reg .u64 sa, ga;\n\tcvta.to.shared.u64 sa, %0;\n\tcvta.to.global.u64 ga, %1;\n\t"
                 "cp.async.cg.shared.global [sa], [ga], 16;\n\t}" ::"l"(smem), "l"(gmem) : "memory");
}

/* Close this thread's group of cp.async copies. */
SYMM__DEVICE_INTERNAL void symm__cp_async_commit(void) {
    asm volatile("cp.async.commit_group;" ::: "memory");
}

/* Wait until at most `pending` (0..3, a constant after inlining) of this
 * thread's newest groups are still in flight. */
SYMM__DEVICE_INTERNAL void symm__cp_async_wait(int pending) {
    switch (pending) {
    case 0: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
    }
}

/* ---- bulk copies into shared memory (sm_90+; the MoE pull combine) ---------- */
/* On older GPUs these compile to nothing: callers check __CUDA_ARCH__ and take
 * another path there. Shared addresses are generic pointers; the copies read
 * any global address, a peer's heap included. */

/* mbarrier.init of the 8-byte barrier at `bar` for `count` arrivals, then
 * fence.mbarrier_init so the copy engine sees it initialised. */
SYMM__DEVICE_INTERNAL void symm__mbar_init(void *bar, uint32_t count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("{\n\t.reg .u64 sa;\n\t.reg .u32 s32;\n\tcvta.to.shared.u64 sa, %0;\n\tcvt.u32.u64 s32, sa;\n\t"
                 "mbarrier.init.shared::cta.b64 [s32], %1;\n\tfence.mbarrier_init.release.cluster;\n\t}"
                 ::"l"(bar), "r"(count) : "memory");
#else
    (void)bar;
    (void)count;
#endif
}

/* Arrive once at `bar` and expect `bytes` more of transfer in its current
 * phase, then copy `bytes` (a multiple of 16, both addresses 16-byte aligned)
 * from global `gmem` into shared `smem` by the copy engine: the phase
 * completes when the bytes have landed. */
SYMM__DEVICE_INTERNAL void symm__bulk_load(void *smem, const void *gmem, uint32_t bytes, void *bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("{\n\t.reg .u64 sa, ba, ga;\n\t.reg .u32 s32, b32;\n\t"
                 "cvta.to.shared.u64 sa, %0;\n\tcvt.u32.u64 s32, sa;\n\t"
                 "cvta.to.shared.u64 ba, %3;\n\tcvt.u32.u64 b32, ba;\n\t"
                 "cvta.to.global.u64 ga, %1;\n\t"
                 "mbarrier.arrive.expect_tx.shared::cta.b64 _, [b32], %2;\n\t"
                 "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [s32], [ga], %2, [b32];\n\t}"
                 ::"l"(smem), "l"(gmem), "r"(bytes), "l"(bar) : "memory");
#else
    (void)smem;
    (void)gmem;
    (void)bytes;
    (void)bar;
#endif
}

/* 1 once the phase of `bar` with parity `parity` has completed (its bytes
 * are visible to the waiting thread), else 0 after a bounded wait. */
SYMM__DEVICE_INTERNAL uint32_t symm__mbar_try_wait(void *bar, uint32_t parity) {
    uint32_t ok = 1;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("{\n\t.reg .u64 ba;\n\t.reg .u32 b32;\n\t.reg .pred p;\n\t"
                 "cvta.to.shared.u64 ba, %1;\n\tcvt.u32.u64 b32, ba;\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [b32], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(ok) : "l"(bar), "r"(parity) : "memory");
#else
    (void)bar;
    (void)parity;
#endif
    return ok;
}

/* fence.proxy.async: what this thread has seen through ordinary loads (and,
 * after a barrier, its group's) is what its later bulk copies see: data
 * acquired by a flag is then read by the copy engine as by a load. */
SYMM__DEVICE_INTERNAL void symm__fence_proxy_async(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("fence.proxy.async;" ::: "memory");
#endif
}

/* ---- fences ------------------------------------------------------------------ */

/* fence.acq_rel.sys: orders this thread's earlier memory operations before its
 * later ones as seen from any PE (and the host). What symm_fence needs. */
SYMM__DEVICE_INTERNAL void symm__fence_acq_rel_sys(void) {
    asm volatile("fence.acq_rel.sys;" ::: "memory");
}

/* fence.sc.sys: sequentially consistent at system scope; after it, every
 * earlier store of this thread is visible to all PEs. What symm_quiet needs. */
SYMM__DEVICE_INTERNAL void symm__fence_sc_sys(void) {
    asm volatile("fence.sc.sys;" ::: "memory");
}

/* Stop the kernel: the launch fails with an illegal-instruction error that the
 * host sees at its next synchronisation. */
SYMM__DEVICE_INTERNAL void symm__trap(void) {
    asm volatile("trap;" ::: "memory");
}

/* ---- what the device trace records (device/trace_record.h) ------------------ */

/* The SM the calling thread runs on. */
SYMM__DEVICE_INTERNAL uint32_t symm__smid(void) {
    uint32_t id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    return id;
}

/* The lanes of the warp executing this instruction together. */
SYMM__DEVICE_INTERNAL uint32_t symm__activemask(void) {
    uint32_t m;
    asm volatile("activemask.b32 %0;" : "=r"(m));
    return m;
}

/* The lanes of `mask` whose `key` equals this lane's. */
SYMM__DEVICE_INTERNAL uint32_t symm__match_any_b64(uint32_t mask, uint64_t key) {
    uint32_t m;
    asm volatile("match.any.sync.b64 %0, %1, %2;" : "=r"(m) : "l"(key), "r"(mask));
    return m;
}

/* Set bits of x. */
SYMM__DEVICE_INTERNAL uint32_t symm__popc(uint32_t x) {
    uint32_t n;
    asm("popc.b32 %0, %1;" : "=r"(n) : "r"(x));
    return n;
}

/* A slot of a trace sub-buffer: relaxed at GPU scope (only this GPU's
 * threads claim, the host reads after the kernels finished). */
SYMM__DEVICE_INTERNAL uint64_t symm__trace_claim(uint64_t *counter) {
    uint64_t old;
    asm volatile("atom.relaxed.gpu.global.add.u64 %0, [%1], 1;" : "=l"(old) : "l"(counter) : "memory");
    return old;
}

/* 16 bytes of a trace event (p 16-byte aligned): an event is four of these,
 * each made of values computed just before it, so that the recorder never
 * holds all eight words in registers at once. */
SYMM__DEVICE_INTERNAL void symm__trace_store16(void *p, uint64_t w0, uint64_t w1) {
    asm volatile("st.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(w0), "l"(w1) : "memory");
}

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

/* ---- the grid barrier's words (symm_coll_barrier_grid, coll_api.h): GPU scope -- */

/* Arrive: acq_rel increment of the arrival counter; the count before it. */
SYMM__DEVICE_INTERNAL uint64_t symm__grid_arrive(uint64_t *p) {
    uint64_t old;
    asm volatile("atom.acq_rel.gpu.global.add.u64 %0, [%1], 1;" : "=l"(old) : "l"(p) : "memory");
    return old;
}

SYMM__DEVICE_INTERNAL uint64_t symm__grid_ld_acquire(const uint64_t *p) {
    uint64_t v;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

SYMM__DEVICE_INTERNAL void symm__grid_st_relaxed(uint64_t *p, uint64_t v) {
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

SYMM__DEVICE_INTERNAL void symm__grid_st_release(uint64_t *p, uint64_t v) {
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* ---- the context's fields, through the read-only path (impl_rma.h) --------------- */

/* Whether the context is in global memory (the device pointer the host hands
 * out), where the readers below may take the read-only path. */
SYMM__DEVICE_INTERNAL int symm__ctx_in_global(const symm_ctx_t *ctx) {
#if defined(__CUDACC__)
    return __isGlobal(ctx) != 0;
#else
    return __nvvm_isspacep_global(ctx);
#endif
}

/*
 * PE pe's copy of the symmetric address p is p + (pe - my_pe) * stride
 * (docs/design.md decision 2); no range check on the hot path (symm_ctx_ptr is the
 * checked form).
 *
 * my_pe and stride never change while a kernel runs (the host writes the
 * context before kernels use it). When the context is in global memory, the
 * device pointer the host hands out, the public calls read both through the
 * read-only path with an asm statement that has no memory operand: to the
 * compiler a pure function of the pointer, so it loads them once, ahead of
 * the caller's loops, instead of again after every "memory" clobber, barrier,
 * call and acquire in them (after an acquire, which invalidates L1, the
 * reload comes from L2: 0.940 against 0.795 us per p ping-pong,
 * docs/tuning.md). The compiler may execute that asm where the context is
 * not global, so the asm tests the address space itself and loads nothing
 * (yields 0) elsewhere. A
 * context elsewhere (a local copy, a __grid_constant__ or by-value kernel
 * parameter) takes plain loads, which the compiler keeps in registers; nvcc
 * copies a by-value (not __grid_constant__) parameter to local memory once
 * when its address reaches the test.
 */
SYMM__DEVICE_INTERNAL void symm__ctx_pe_stride(const symm_ctx_t *ctx, int32_t *my_pe, int64_t *stride) {
    const int global = symm__ctx_in_global(ctx);
    if (global) {
        int32_t m;
        int64_t s;
        asm("{\n\t.reg .pred g;\n\t.reg .u64 a, b;\n\t"
            "isspacep.global g, %2;\n\t"
            "mov.b32 %0, 0;\n\tmov.b64 %1, 0;\n\t"
            "@g cvta.to.global.u64 a, %2;\n\t@g cvta.to.global.u64 b, %3;\n\t"
            "@g ld.global.nc.b32 %0, [a];\n\t@g ld.global.nc.b64 %1, [b];\n\t}"
            : "=r"(m), "=l"(s) : "l"(&ctx->my_pe), "l"(&ctx->stride));
        *my_pe = m;
        *stride = s;
    } else {
        *my_pe = ctx->my_pe;
        *stride = ctx->stride;
    }
}

/* The context's trace word (symm_ctx_t.trace), read the same way as my_pe
 * and stride: loaded once per kernel and kept, so that a build with
 * SYMM_TRACE pays one register test per call while no trace records. */
SYMM__DEVICE_INTERNAL uint64_t symm__ctx_trace(const symm_ctx_t *ctx) {
    const int global = symm__ctx_in_global(ctx);
    if (global) {
        uint64_t t;
        asm("{\n\t.reg .pred g;\n\t.reg .u64 a;\n\t"
            "isspacep.global g, %1;\n\t"
            "mov.b64 %0, 0;\n\t"
            "@g cvta.to.global.u64 a, %1;\n\t"
            "@g ld.global.nc.b64 %0, [a];\n\t}"
            : "=l"(t) : "l"(&ctx->trace));
        return t;
    }
    return ctx->trace;
}

/* The context's load/store window (ldst_first, ldst_count: two adjacent
 * int32s), read the same way and for the same reason as my_pe and stride:
 * every call that may leave the window tests it (backend/dispatch.h). */
SYMM__DEVICE_INTERNAL void symm__ctx_ldst(const symm_ctx_t *ctx, int32_t *first, int32_t *count) {
    const int global = symm__ctx_in_global(ctx);
    if (global) {
        int32_t f, c;
        asm("{\n\t.reg .pred g;\n\t.reg .u64 a;\n\t"
            "isspacep.global g, %2;\n\t"
            "mov.b32 %0, 0;\n\tmov.b32 %1, 0;\n\t"
            "@g cvta.to.global.u64 a, %2;\n\t"
            "@g ld.global.nc.v2.b32 {%0, %1}, [a];\n\t}"
            : "=r"(f), "=r"(c) : "l"(&ctx->ldst_first));
        *first = f;
        *count = c;
    } else {
        *first = ctx->ldst_first;
        *count = ctx->ldst_count;
    }
}

/* n_pes and the heap's range (heap_base, heap_size), which symm_ctx_n_pes and
 * symm_ctx_ptr's range check read, the same way and for the same reason:
 * DSL-generated kernels call them once per peer and round, and without it
 * reload them after every store the compiler cannot tell apart from the
 * context. heap_size only grows; a kernel checks against the heap as mapped
 * when it first reads the context. */
SYMM__DEVICE_INTERNAL void symm__ctx_range(const symm_ctx_t *ctx, int32_t *n_pes, uint64_t *base, uint64_t *size) {
    const int global = symm__ctx_in_global(ctx);
    if (global) {
        int32_t n;
        uint64_t b, z;
        asm("{\n\t.reg .pred g;\n\t.reg .u64 a, c, d;\n\t"
            "isspacep.global g, %3;\n\t"
            "mov.b32 %0, 0;\n\tmov.b64 %1, 0;\n\tmov.b64 %2, 0;\n\t"
            "@g cvta.to.global.u64 a, %3;\n\t@g cvta.to.global.u64 c, %4;\n\t@g cvta.to.global.u64 d, %5;\n\t"
            "@g ld.global.nc.b32 %0, [a];\n\t@g ld.global.nc.b64 %1, [c];\n\t@g ld.global.nc.b64 %2, [d];\n\t}"
            : "=r"(n), "=l"(b), "=l"(z) : "l"(&ctx->n_pes), "l"(&ctx->heap_base), "l"(&ctx->heap_size));
        *n_pes = n;
        *base = b;
        *size = z;
    } else {
        *n_pes = ctx->n_pes;
        *base = ctx->heap_base;
        *size = ctx->heap_size;
    }
}

/* ---- bulk copy loops: one element of each width, local or remote (impl_copy.h) ---- */

#ifndef SYMM_COPY_VARIANT
#  define SYMM_COPY_VARIANT 0
#endif
#if SYMM_COPY_VARIANT == 1
#  if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 /* the prefetch-size hint is sm_80+ */
#    define SYMM__LD_LOCAL "ld.global.L1::no_allocate.L2::256B"
#  else
#    define SYMM__LD_LOCAL "ld.global.L1::no_allocate"
#  endif
#  define SYMM__ST_LOCAL  "st.global"
#  define SYMM__LD_REMOTE "ld.global.L1::no_allocate"
#  define SYMM__ST_REMOTE "st.global"
#elif SYMM_COPY_VARIANT == 0
#  define SYMM__LD_LOCAL  "ld"
#  define SYMM__ST_LOCAL  "st"
#  define SYMM__LD_REMOTE "ld.global"
#  define SYMM__ST_REMOTE "st.global"
#else
#  error "SYMM_COPY_VARIANT must be 0 or 1"
#endif

typedef struct symm__v4 {
    uint32_t x, y, z, w;
} symm__v4_t;

/* `remote` is a constant after inlining, so each call is one instruction. */

SYMM__DEVICE_INTERNAL symm__v4_t symm__cld16(const void *p, int remote) {
    symm__v4_t v;
    if (remote)
        asm volatile(SYMM__LD_REMOTE ".v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
    else
        asm volatile(SYMM__LD_LOCAL ".v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
    return v;
}

SYMM__DEVICE_INTERNAL void symm__cst16(void *p, symm__v4_t v, int remote) {
    if (remote)
        asm volatile(SYMM__ST_REMOTE ".v4.u32 [%0], {%1, %2, %3, %4};"
                     ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
    else
        asm volatile(SYMM__ST_LOCAL ".v4.u32 [%0], {%1, %2, %3, %4};"
                     ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

#define SYMM__DEFINE_CLDST(W, RT, C, TY)                                                     \
    SYMM__DEVICE_INTERNAL RT symm__cld##W(const void *p, int remote) {                      \
        RT v;                                                                               \
        if (remote)                                                                         \
            asm volatile(SYMM__LD_REMOTE "." TY " %0, [%1];" : "=" C(v) : "l"(p) : "memory"); \
        else                                                                                \
            asm volatile(SYMM__LD_LOCAL "." TY " %0, [%1];" : "=" C(v) : "l"(p) : "memory"); \
        return v;                                                                           \
    }                                                                                       \
    SYMM__DEVICE_INTERNAL void symm__cst##W(void *p, RT v, int remote) {                    \
        if (remote)                                                                         \
            asm volatile(SYMM__ST_REMOTE "." TY " [%0], %1;" ::"l"(p), C(v) : "memory");    \
        else                                                                                \
            asm volatile(SYMM__ST_LOCAL "." TY " [%0], %1;" ::"l"(p), C(v) : "memory");     \
    }

SYMM__DEFINE_CLDST(8, uint64_t, "l", "u64")
SYMM__DEFINE_CLDST(4, uint32_t, "r", "u32")
SYMM__DEFINE_CLDST(2, uint32_t, "r", "u16")
SYMM__DEFINE_CLDST(1, uint32_t, "r", "u8")
#undef SYMM__DEFINE_CLDST

/* ---- the collectives' words and units (coll_units.h, coll_sync.h, coll_packet.h) --- */

SYMM__DEVICE_INTERNAL symm__v4_t symm__c_ld16(const void *p) {
    symm__v4_t v;
    asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
    return v;
}

SYMM__DEVICE_INTERNAL void symm__c_st16(void *p, symm__v4_t v) {
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};"
                 ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

/* Packets: volatile so every poll reaches memory and the 16-byte store is not
 * split or merged by the compiler. Each 8-byte half is single-copy atomic. */
SYMM__DEVICE_INTERNAL symm__v4_t symm__c_ld16_vol(const void *p) {
    symm__v4_t v;
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
    return v;
}

SYMM__DEVICE_INTERNAL void symm__c_st16_vol(void *p, symm__v4_t v) {
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};"
                 ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

SYMM__DEVICE_INTERNAL uint64_t symm__c_ld8(const void *p) {
    uint64_t v;
    asm volatile("ld.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

SYMM__DEVICE_INTERNAL void symm__c_st8(void *p, uint64_t v) {
    asm volatile("st.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

SYMM__DEVICE_INTERNAL uint32_t symm__c_ld1(const void *p) {
    uint32_t v;
    asm volatile("ld.global.u8 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

SYMM__DEVICE_INTERNAL void symm__c_st1(void *p, uint32_t v) {
    asm volatile("st.global.u8 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

SYMM__DEVICE_INTERNAL uint32_t symm__c_ld4(const void *p) {
    uint32_t v;
    asm volatile("ld.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

SYMM__DEVICE_INTERNAL void symm__c_st4(void *p, uint32_t v) {
    asm volatile("st.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

SYMM__DEVICE_INTERNAL uint64_t symm__c_ld8_vol(const void *p) {
    uint64_t v;
    asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

SYMM__DEVICE_INTERNAL void symm__c_st8_vol(void *p, uint64_t v) {
    asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

SYMM__DEVICE_INTERNAL void symm__c_st4_release(void *p, uint32_t v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

SYMM__DEVICE_INTERNAL uint32_t symm__c_ld4_acquire(const void *p) {
    uint32_t v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* The chain's progress words (coll_move.h): both halves in one access. */
SYMM__DEVICE_INTERNAL void symm__c_st8_release(void *p, uint64_t v) {
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

SYMM__DEVICE_INTERNAL uint64_t symm__c_ld8_acquire(const void *p) {
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

/* ---- conversions and f16 arithmetic (the collectives' reductions) ----------------- */

SYMM__DEVICE_INTERNAL float symm__cvt_f32_f16(unsigned short s) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(s));
    return f;
}

SYMM__DEVICE_INTERNAL unsigned short symm__cvt_f16_f32(float f) {
    unsigned short s;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(s) : "f"(f));
    return s;
}

SYMM__DEVICE_INTERNAL unsigned short symm__min_f16(unsigned short x, unsigned short y) {
    unsigned short r;
    asm("min.f16 %0, %1, %2;" : "=h"(r) : "h"(x), "h"(y));
    return r;
}

SYMM__DEVICE_INTERNAL unsigned short symm__max_f16(unsigned short x, unsigned short y) {
    unsigned short r;
    asm("max.f16 %0, %1, %2;" : "=h"(r) : "h"(x), "h"(y));
    return r;
}

SYMM__DEVICE_INTERNAL unsigned short symm__add_f16(unsigned short x, unsigned short y) {
    unsigned short r;
    asm("add.rn.f16 %0, %1, %2;" : "=h"(r) : "h"(x), "h"(y));
    return r;
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890 /* fp8 conversions: sm_89+ */
/* One fp8 pair to two f16; the callers put the value in both halves. */
SYMM__DEVICE_INTERNAL uint32_t symm__cvt_f16x2_e4m3x2(unsigned short in) {
    uint32_t out;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(out) : "h"(in));
    return out;
}

SYMM__DEVICE_INTERNAL unsigned short symm__cvt_e4m3x2_f32(float f) {
    unsigned short out;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %1;" : "=h"(out) : "f"(f));
    return out;
}

SYMM__DEVICE_INTERNAL unsigned short symm__cvt_e5m2x2_f32(float f) {
    unsigned short out;
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %1;" : "=h"(out) : "f"(f));
    return out;
}
#endif

/* ---- multimem (NVLS) reductions and stores (coll_direct.h) ------------------------ */

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#  define SYMM__C_MM_LDRED(OPTY, v, a)                                                      \
    asm volatile("multimem.ld_reduce.relaxed.sys.global." OPTY " {%0, %1, %2, %3}, [%4];"  \
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(a) : "memory")
#  define SYMM__C_MM_ST(TY, v, a)                                                           \
    asm volatile("multimem.st.relaxed.sys.global." TY " [%0], {%1, %2, %3, %4};"          \
                 ::"l"(a), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory")
#endif

/* ---- async proxy (symm_tilelang.h: TMA loads after a wait) ------------------------ */

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/* Generic accesses of this thread so far ordered before its later async-proxy
 * (TMA) accesses to global memory. */
SYMM__DEVICE_INTERNAL void symm__fence_proxy_async_global(void) {
    asm volatile("fence.proxy.async.global;" ::: "memory");
}
#endif

#endif /* SYMM_DEVICE_IMPL_PTX_H */
