/*
 * device/backend/nccl.h - the nccl backend's device calls (included by
 * dispatch.h; empty unless the compilation carries the nccl backend).
 *
 * NCCL's device API is C++ templates (nccl_device.h), so this file is the one
 * device file that is CUDA C++: nvcc for CUDA C users (NCCL's include folder
 * on the path; nothing to link, the API is header-only), clang -x cuda for
 * libsymm_device_nccl_*.bc (bitcode/symm_device_nccl_bitcode.cu), where the
 * functions below become part of the plain-C-named symm_* exports.
 *
 * The heap is one NCCL symmetric window. Peers of the window's LSA team are
 * handed back to symm's native code at NCCL's address for them
 * (ncclGetPeerPointer); other peers go through GIN, which in NCCL 2.28 has
 * puts (put, putValue), completion of the source (flush) and barriers, and
 * no gets, no atomics and no signals at addresses: those calls stop the
 * kernel with a message (docs/backends.md, capabilities).
 */
#ifndef SYMM_DEVICE_BACKEND_NCCL_H
#define SYMM_DEVICE_BACKEND_NCCL_H

/* Whether this compilation carries the nccl backend (dispatch.h). */
#define SYMM__BE_ID_nccl 103 /* 100 + SYMM_BACKEND_NCCL */
#if defined(SYMM_DEVICE_BACKEND)
#  if SYMM__BE_CHOSEN(SYMM__BE_ID_nccl)
#    define SYMM__BE_WITH_NCCL 1
#    define SYMM__BE_FIXED SYMM_BACKEND_NCCL
#  else
#    define SYMM__BE_WITH_NCCL 0
#  endif
#elif defined(SYMM_DEVICE_WITH_NCCL)
#  define SYMM__BE_WITH_NCCL 1
#else
#  define SYMM__BE_WITH_NCCL 0
#endif
#if SYMM__BE_WITH_NCCL
#  define SYMM__BE_IF_nccl(...) __VA_ARGS__
#else
#  define SYMM__BE_IF_nccl(...)
#endif

#if SYMM__BE_WITH_NCCL && !defined(__CUDACC__)
#  error "the nccl device backend is CUDA C++ (NCCL's device API): compile with nvcc or clang -x cuda"
#endif

#if SYMM__BE_WITH_NCCL

#include "symm/device/backend/nccl_ptx.h"

/* clang in CUDA mode (the nccl bitcode) needs two things nvcc gives NCCL's
 * headers: __CUDACC__ with a value (NCCL tests `#if __CUDACC__`, clang
 * defines it empty), and __stwt for uint4 (the write-through store of GIN's
 * proxy queue, missing from clang's CUDA headers; nccl_ptx.h). */
#if defined(__clang__) && defined(__CUDA__)
#  undef __CUDACC__
#  define __CUDACC__ 1
static __device__ __forceinline__ void __stwt(uint4 *p, uint4 v) { symm__st_wt_v4(p, v.x, v.y, v.z, v.w); }
#endif

/* NCCL's headers are not -Wextra clean (unused parameters) for the host compiler. */
#if defined(__GNUC__)
#  pragma GCC diagnostic push
#  pragma GCC diagnostic ignored "-Wunused-parameter"
#endif
#include <nccl_device.h>
#if defined(__GNUC__)
#  pragma GCC diagnostic pop
#endif

#include "symm/device/backend/state.h"

#define SYMM__NCCL_NO_GIN                                                                    \
    "the nccl backend reaches PEs outside the LSA team only through GIN, and this "          \
    "communicator has none (docs/multinode.md: a GIN-capable network and NCCL_GIN_TYPE)"

SYMM__DEVICE_INTERNAL const symm__nccl_state_t *symm__nccl_state(const symm_ctx_t *ctx) {
    return (const symm__nccl_state_t *)(uintptr_t)ctx->backend_state;
}

SYMM__DEVICE_INTERNAL const ncclDevComm &symm__nccl_comm(const symm_ctx_t *ctx) {
    return *(const ncclDevComm *)((const char *)symm__nccl_state(ctx) + SYMM__NCCL_DEVCOMM_OFFSET);
}

SYMM__DEVICE_INTERNAL ncclWindow_t symm__nccl_window(const symm_ctx_t *ctx) {
    return (ncclWindow_t)(uintptr_t)symm__nccl_state(ctx)->window;
}

/* NCCL's rank of team PE pe. */
SYMM__DEVICE_INTERNAL int symm__nccl_rank(const symm_ctx_t *ctx, int pe) {
    const symm__nccl_state_t *st = symm__nccl_state(ctx);
    if (st->flags & SYMM__BE_IDENTITY)
        return pe;
    return ((const int32_t *)(uintptr_t)st->pe_map)[pe];
}

/* Offset of p in the heap window, or (size_t)-1 when p is not in the heap. */
SYMM__DEVICE_INTERNAL size_t symm__nccl_offset(const symm_ctx_t *ctx, const void *p) {
    const symm__nccl_state_t *st = symm__nccl_state(ctx);
    uint64_t off = (uint64_t)(uintptr_t)p - st->heap_base;
    return off < st->heap_size ? (size_t)off : (size_t)-1;
}

SYMM__DEVICE_INTERNAL void *symm__nccl_ptr(const symm_ctx_t *ctx, const void *p, int pe) {
    const symm__nccl_state_t *st = symm__nccl_state(ctx);
    const ncclDevComm &comm = symm__nccl_comm(ctx);
    const int r = symm__nccl_rank(ctx, pe);
    const size_t off = symm__nccl_offset(ctx, p);
    if ((st->flags & (SYMM__BE_NO_PTR | SYMM__BE_NO_DEVCOMM)) || off == (size_t)-1 ||
        !ncclTeamRankIsMember(ncclTeamLsa(comm), ncclTeamWorld(comm), r))
        return NULL;
    return ncclGetPeerPointer(symm__nccl_window(ctx), off, r);
}

/* A GIN put of nbytes by the group's coop; blocking: the source may be
 * reused on return (flush). */
template <typename Coop>
SYMM__DEVICE_INTERNAL void symm__nccl_gin_put(const symm_ctx_t *ctx, Coop coop, size_t dst_off, size_t src_off,
                                              size_t nbytes, int r, int nbi) {
    const ncclDevComm &comm = symm__nccl_comm(ctx);
    ncclGin gin(comm, 0);
    gin.put(ncclTeamWorld(comm), r, symm__nccl_window(ctx), dst_off, symm__nccl_window(ctx), src_off, nbytes,
            ncclGin_None{}, ncclGin_None{}, coop);
    if (!nbi)
        gin.flush(coop);
}

SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__nccl_rma(const symm_ctx_t *ctx, void *dest, const void *src,
                                                           size_t nbytes, int pe, int g, int put, int nbi) {
    if (!put) {
        symm__no_path(ctx, "get", pe, "NCCL's GIN has no get (a put from that PE, or the nvshmem backend)");
        return;
    }
    if (!symm__nccl_state(ctx)->gin) {
        symm__no_path(ctx, "put", pe, SYMM__NCCL_NO_GIN);
        return;
    }
    const size_t dst_off = symm__nccl_offset(ctx, dest), src_off = symm__nccl_offset(ctx, src);
    if (dst_off == (size_t)-1 || src_off == (size_t)-1) {
        symm__no_path(ctx, "put", pe, "a GIN put needs both dest and src in the symmetric heap");
        return;
    }
    const int r = symm__nccl_rank(ctx, pe);
    switch (g) {
    case SYMM__G_THREAD: symm__nccl_gin_put(ctx, ncclCoopThread{}, dst_off, src_off, nbytes, r, nbi); break;
    case SYMM__G_WARP: symm__nccl_gin_put(ctx, ncclCoopWarp{}, dst_off, src_off, nbytes, r, nbi); break;
    default: symm__nccl_gin_put(ctx, ncclCoopCta{}, dst_off, src_off, nbytes, r, nbi); break;
    }
}

SYMM__DEVICE_INTERNAL void symm__nccl_p(const symm_ctx_t *ctx, void *dest, uint64_t bits, int width, int pe) {
    const size_t off = symm__nccl_offset(ctx, dest);
    if (!symm__nccl_state(ctx)->gin || off == (size_t)-1) {
        symm__no_path(ctx, "p/st", pe, symm__nccl_state(ctx)->gin ? "dest is not in the symmetric heap"
                                                                   : SYMM__NCCL_NO_GIN);
        return;
    }
    const ncclDevComm &comm = symm__nccl_comm(ctx);
    ncclGin gin(comm, 0);
    const int r = symm__nccl_rank(ctx, pe);
    const ncclTeam world = ncclTeamWorld(comm);
    switch (width) {
    case 8: gin.putValue(world, r, symm__nccl_window(ctx), off, (uint8_t)bits); break;
    case 16: gin.putValue(world, r, symm__nccl_window(ctx), off, (uint16_t)bits); break;
    case 32: gin.putValue(world, r, symm__nccl_window(ctx), off, (uint32_t)bits); break;
    default: gin.putValue(world, r, symm__nccl_window(ctx), off, bits); break;
    }
}

SYMM__DEVICE_INTERNAL uint64_t symm__nccl_g(const symm_ctx_t *ctx, const void *src, int width, int pe) {
    (void)src;
    (void)width;
    symm__no_path(ctx, "g/ld", pe, "NCCL's GIN has no remote reads");
    return 0;
}

SYMM__DEVICE_INTERNAL void symm__nccl_put_signal(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes,
                                                 uint64_t *sig, uint64_t signal, int sig_op, int pe, int g,
                                                 int nbi) {
    (void)dest; (void)src; (void)nbytes; (void)sig; (void)signal; (void)sig_op; (void)g; (void)nbi;
    symm__no_path(ctx, "put_signal", pe,
                  "NCCL 2.28's GIN signals are ids in NCCL's own pool, not words of the heap (put, "
                  "then a barrier; or the nvshmem backend)");
}

SYMM__DEVICE_INTERNAL void symm__nccl_signal_op(const symm_ctx_t *ctx, uint64_t *sig, uint64_t value, int sig_op,
                                                int pe) {
    (void)sig; (void)value; (void)sig_op;
    symm__no_path(ctx, "signal_op", pe, "NCCL 2.28's GIN signals are ids in NCCL's own pool, not words "
                                        "of the heap");
}

SYMM__DEVICE_INTERNAL uint64_t symm__nccl_amo(const symm_ctx_t *ctx, int op, int width, void *ptr, uint64_t value,
                                              uint64_t cond, int pe) {
    (void)op; (void)width; (void)ptr; (void)value; (void)cond;
    symm__no_path(ctx, "atomic", pe, "NCCL's GIN has no remote atomics");
    return 0;
}

/* GIN orders nothing between plain puts; fence adds nothing to symm's own. */
SYMM__DEVICE_INTERNAL void symm__nccl_fence(const symm_ctx_t *ctx) { (void)ctx; }

/* The sources of this thread's GIN puts may be reused; their arrival is only
 * known through a barrier (capability SYMM_CAP_REMOTE_QUIET is off). */
SYMM__DEVICE_INTERNAL void symm__nccl_quiet(const symm_ctx_t *ctx) {
    if (!symm__nccl_state(ctx)->gin)
        return;
    ncclGin gin(symm__nccl_comm(ctx), 0);
    gin.flush(ncclCoopThread{});
}

/* Barrier index of each team: 0 for the world team, 1 for a team that is the
 * LSA team (the node team on one node); the host asks for two. The world
 * barrier across nodes is the LSA barrier (release) then the GIN barrier of
 * the rail team (acquire), spelled out rather than through
 * ncclBarrierSession, whose Optional<> members clang-19 rejects (a dependent
 * type without `typename` in NCCL 2.28's utility.h). */
template <typename Coop>
SYMM__DEVICE_INTERNAL void symm__nccl_barrier_coop(const symm_ctx_t *ctx, Coop coop) {
    const symm__nccl_state_t *st = symm__nccl_state(ctx);
    const ncclDevComm &comm = symm__nccl_comm(ctx);
    const int world = (st->flags & SYMM__BE_IDENTITY) != 0;
    {
        ncclLsaBarrierSession<Coop> lsa(coop, comm, ncclTeamTagLsa{}, world ? 0 : 1);
        lsa.sync(coop, world && st->gin ? cuda::memory_order_release : cuda::memory_order_acq_rel);
    }
    if (world && st->gin) {
        ncclGin gin(comm, 0);
        ncclGinBarrierSession<Coop> rail(coop, gin, ncclTeamTagRail{}, 0);
        rail.sync(coop, cuda::memory_order_acquire, ncclGinFenceLevel::Relaxed);
    }
}

SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__nccl_barrier(const symm_ctx_t *ctx, int g, int quiet) {
    const symm__nccl_state_t *st = symm__nccl_state(ctx);
    const ncclDevComm &comm = symm__nccl_comm(ctx);
    if (st->flags & SYMM__BE_NO_DEVCOMM) {
        symm__no_path(ctx, "barrier", 0, SYMM__NCCL_NO_GIN);
        return;
    }
    /* A team other than the world is served only when it is exactly the LSA team. */
    if (!(st->flags & SYMM__BE_IDENTITY) && st->n_pes != comm.lsaSize) {
        symm__no_path(ctx, "barrier", 0, "the nccl backend has device barriers for the world team and "
                                         "for a team that is the LSA team");
        return;
    }
    if ((st->flags & SYMM__BE_IDENTITY) && !st->gin && comm.nRanks != comm.lsaSize) {
        symm__no_path(ctx, "barrier", 0, SYMM__NCCL_NO_GIN);
        return;
    }
    if (quiet)
        symm__nccl_quiet(ctx);
    switch (g) {
    case SYMM__G_THREAD: symm__nccl_barrier_coop(ctx, ncclCoopThread{}); break;
    case SYMM__G_WARP: symm__nccl_barrier_coop(ctx, ncclCoopWarp{}); break;
    default: symm__nccl_barrier_coop(ctx, ncclCoopCta{}); break;
    }
}

#endif /* SYMM__BE_WITH_NCCL */

#endif /* SYMM_DEVICE_BACKEND_NCCL_H */
