/*
 * device/backend/nvshmem.h - the nvshmem backend's device calls (included by
 * dispatch.h; empty unless the compilation carries the nvshmem backend).
 *
 * Peers that NVSHMEM maps into this GPU (nvshmem_ptr not NULL) are handed back
 * to symm's native code; the others go through NVSHMEM's device library:
 *   CUDA C     nvcc with -rdc=true, NVSHMEM's include folder, and a device link
 *              with libnvshmem_device.a (plus -lnvshmem_host); NVSHMEM's own
 *              headers provide the functions.
 *   bitcode    clang C for nvptx (libsymm_device_nvshmem_*.bc); NVSHMEM's
 *              libnvshmem_device.bc, linked beside it, defines the functions
 *              declared below with their C names.
 * NVSHMEM keeps its device state in a __constant__ of every module that links
 * its device library; symm initialises it (see the end of this file for CUDA
 * C, symm.triton for the bitcode), so kernels need no init step of the user.
 * PE numbers: a team PE is translated to NVSHMEM's world PE through the
 * team's state (symm__nvshmem_state_t); the world team is the identity.
 */
#ifndef SYMM_DEVICE_BACKEND_NVSHMEM_H
#define SYMM_DEVICE_BACKEND_NVSHMEM_H

/* Whether this compilation carries the nvshmem backend (dispatch.h). */
#define SYMM__BE_ID_nvshmem 102 /* 100 + SYMM_BACKEND_NVSHMEM */
#if defined(SYMM_DEVICE_BACKEND)
#  if SYMM__BE_CHOSEN(SYMM__BE_ID_nvshmem)
#    define SYMM__BE_WITH_NVSHMEM 1
#    define SYMM__BE_FIXED SYMM_BACKEND_NVSHMEM
#  else
#    define SYMM__BE_WITH_NVSHMEM 0
#  endif
#elif defined(SYMM_DEVICE_WITH_NVSHMEM)
#  define SYMM__BE_WITH_NVSHMEM 1
#else
#  define SYMM__BE_WITH_NVSHMEM 0
#endif
#if SYMM__BE_WITH_NVSHMEM
#  define SYMM__BE_IF_nvshmem(...) __VA_ARGS__
#else
#  define SYMM__BE_IF_nvshmem(...)
#endif

#if SYMM__BE_WITH_NVSHMEM

#include "symm/device/backend/state.h"

#if defined(__CUDACC__)
#  include <nvshmem.h>
#  include <nvshmemx.h>
#  define SYMM__NVSHMEM_SIGNAL_SET NVSHMEM_SIGNAL_SET
#  define SYMM__NVSHMEM_SIGNAL_ADD NVSHMEM_SIGNAL_ADD
#else
/* NVSHMEM's values (nvshmem_common_transport.h, nvshmem_common.cuh). */
#  define SYMM__NVSHMEM_SIGNAL_SET 9
#  define SYMM__NVSHMEM_SIGNAL_ADD 10
#  define NVSHMEM_TEAM_WORLD 0
typedef int32_t nvshmem_team_t;
void *nvshmem_ptr(const void *ptr, int pe);
void nvshmem_putmem(void *dest, const void *src, size_t nbytes, int pe);
void nvshmem_putmem_nbi(void *dest, const void *src, size_t nbytes, int pe);
void nvshmem_getmem(void *dest, const void *src, size_t nbytes, int pe);
void nvshmem_getmem_nbi(void *dest, const void *src, size_t nbytes, int pe);
void nvshmemx_putmem_warp(void *dest, const void *src, size_t nbytes, int pe);
void nvshmemx_putmem_nbi_warp(void *dest, const void *src, size_t nbytes, int pe);
void nvshmemx_getmem_warp(void *dest, const void *src, size_t nbytes, int pe);
void nvshmemx_getmem_nbi_warp(void *dest, const void *src, size_t nbytes, int pe);
void nvshmemx_putmem_block(void *dest, const void *src, size_t nbytes, int pe);
void nvshmemx_putmem_nbi_block(void *dest, const void *src, size_t nbytes, int pe);
void nvshmemx_getmem_block(void *dest, const void *src, size_t nbytes, int pe);
void nvshmemx_getmem_nbi_block(void *dest, const void *src, size_t nbytes, int pe);
void nvshmem_uint8_p(uint8_t *dest, uint8_t value, int pe);
void nvshmem_uint16_p(uint16_t *dest, uint16_t value, int pe);
void nvshmem_uint32_p(uint32_t *dest, uint32_t value, int pe);
void nvshmem_uint64_p(uint64_t *dest, uint64_t value, int pe);
uint8_t nvshmem_uint8_g(const uint8_t *src, int pe);
uint16_t nvshmem_uint16_g(const uint16_t *src, int pe);
uint32_t nvshmem_uint32_g(const uint32_t *src, int pe);
uint64_t nvshmem_uint64_g(const uint64_t *src, int pe);
void nvshmem_putmem_signal(void *dest, const void *src, size_t nbytes, uint64_t *sig, uint64_t signal,
                           int sig_op, int pe);
void nvshmem_putmem_signal_nbi(void *dest, const void *src, size_t nbytes, uint64_t *sig, uint64_t signal,
                               int sig_op, int pe);
void nvshmemx_putmem_signal_warp(void *dest, const void *src, size_t nbytes, uint64_t *sig, uint64_t signal,
                                 int sig_op, int pe);
void nvshmemx_putmem_signal_nbi_warp(void *dest, const void *src, size_t nbytes, uint64_t *sig,
                                     uint64_t signal, int sig_op, int pe);
void nvshmemx_putmem_signal_block(void *dest, const void *src, size_t nbytes, uint64_t *sig, uint64_t signal,
                                  int sig_op, int pe);
void nvshmemx_putmem_signal_nbi_block(void *dest, const void *src, size_t nbytes, uint64_t *sig,
                                      uint64_t signal, int sig_op, int pe);
void nvshmemx_signal_op(uint64_t *sig, uint64_t signal, int sig_op, int pe);
#  define SYMM__NVSHMEM_DECL_AMO(W)                                                               \
    uint##W##_t nvshmem_uint##W##_atomic_fetch(const uint##W##_t *p, int pe);                     \
    void nvshmem_uint##W##_atomic_set(uint##W##_t *p, uint##W##_t v, int pe);                     \
    uint##W##_t nvshmem_uint##W##_atomic_swap(uint##W##_t *p, uint##W##_t v, int pe);             \
    uint##W##_t nvshmem_uint##W##_atomic_compare_swap(uint##W##_t *p, uint##W##_t c, uint##W##_t v, int pe); \
    uint##W##_t nvshmem_uint##W##_atomic_fetch_add(uint##W##_t *p, uint##W##_t v, int pe);        \
    void nvshmem_uint##W##_atomic_add(uint##W##_t *p, uint##W##_t v, int pe);                     \
    uint##W##_t nvshmem_uint##W##_atomic_fetch_and(uint##W##_t *p, uint##W##_t v, int pe);        \
    void nvshmem_uint##W##_atomic_and(uint##W##_t *p, uint##W##_t v, int pe);                     \
    uint##W##_t nvshmem_uint##W##_atomic_fetch_or(uint##W##_t *p, uint##W##_t v, int pe);         \
    void nvshmem_uint##W##_atomic_or(uint##W##_t *p, uint##W##_t v, int pe);                      \
    uint##W##_t nvshmem_uint##W##_atomic_fetch_xor(uint##W##_t *p, uint##W##_t v, int pe);        \
    void nvshmem_uint##W##_atomic_xor(uint##W##_t *p, uint##W##_t v, int pe);
SYMM__NVSHMEM_DECL_AMO(32)
SYMM__NVSHMEM_DECL_AMO(64)
#  undef SYMM__NVSHMEM_DECL_AMO
void nvshmem_fence(void);
void nvshmem_quiet(void);
void nvshmem_barrier_all(void);
void nvshmem_sync_all(void);
void nvshmem_barrier(nvshmem_team_t team);
void nvshmem_team_sync(nvshmem_team_t team);
void nvshmemx_barrier_all_warp(void);
void nvshmemx_barrier_all_block(void);
void nvshmemx_sync_all_warp(void);
void nvshmemx_sync_all_block(void);
void nvshmemx_barrier_warp(nvshmem_team_t team);
void nvshmemx_barrier_block(nvshmem_team_t team);
void nvshmemx_team_sync_warp(nvshmem_team_t team);
void nvshmemx_team_sync_block(nvshmem_team_t team);
#endif

SYMM__DEVICE_INTERNAL const symm__nvshmem_state_t *symm__nvshmem_state(const symm_ctx_t *ctx) {
    return (const symm__nvshmem_state_t *)(uintptr_t)ctx->backend_state;
}

/* NVSHMEM's PE for team PE pe. */
SYMM__DEVICE_INTERNAL int symm__nvshmem_pe(const symm_ctx_t *ctx, int pe) {
    const symm__nvshmem_state_t *st = symm__nvshmem_state(ctx);
    if (st->flags & SYMM__BE_IDENTITY)
        return pe;
    return ((const int32_t *)(uintptr_t)st->pe_map)[pe];
}

SYMM__DEVICE_INTERNAL int symm__nvshmem_sig_op(int sig_op) {
    return sig_op == SYMM_SIGNAL_ADD ? SYMM__NVSHMEM_SIGNAL_ADD : SYMM__NVSHMEM_SIGNAL_SET;
}

SYMM__DEVICE_INTERNAL void *symm__nvshmem_ptr(const symm_ctx_t *ctx, const void *p, int pe) {
    if (symm__nvshmem_state(ctx)->flags & SYMM__BE_NO_PTR)
        return NULL;
    return nvshmem_ptr(p, symm__nvshmem_pe(ctx, pe));
}

SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__nvshmem_rma(const symm_ctx_t *ctx, void *dest, const void *src,
                                                              size_t nbytes, int pe, int g, int put, int nbi) {
    const int w = symm__nvshmem_pe(ctx, pe);
    switch (g * 4 + put * 2 + nbi) {
    case SYMM__G_THREAD * 4 + 0: nvshmem_getmem(dest, src, nbytes, w); break;
    case SYMM__G_THREAD * 4 + 1: nvshmem_getmem_nbi(dest, src, nbytes, w); break;
    case SYMM__G_THREAD * 4 + 2: nvshmem_putmem(dest, src, nbytes, w); break;
    case SYMM__G_THREAD * 4 + 3: nvshmem_putmem_nbi(dest, src, nbytes, w); break;
    case SYMM__G_WARP * 4 + 0: nvshmemx_getmem_warp(dest, src, nbytes, w); break;
    case SYMM__G_WARP * 4 + 1: nvshmemx_getmem_nbi_warp(dest, src, nbytes, w); break;
    case SYMM__G_WARP * 4 + 2: nvshmemx_putmem_warp(dest, src, nbytes, w); break;
    case SYMM__G_WARP * 4 + 3: nvshmemx_putmem_nbi_warp(dest, src, nbytes, w); break;
    case SYMM__G_BLOCK * 4 + 0: nvshmemx_getmem_block(dest, src, nbytes, w); break;
    case SYMM__G_BLOCK * 4 + 1: nvshmemx_getmem_nbi_block(dest, src, nbytes, w); break;
    case SYMM__G_BLOCK * 4 + 2: nvshmemx_putmem_block(dest, src, nbytes, w); break;
    default: nvshmemx_putmem_nbi_block(dest, src, nbytes, w); break;
    }
}

SYMM__DEVICE_INTERNAL void symm__nvshmem_p(const symm_ctx_t *ctx, void *dest, uint64_t bits, int width, int pe) {
    const int w = symm__nvshmem_pe(ctx, pe);
    switch (width) {
    case 8: nvshmem_uint8_p((uint8_t *)dest, (uint8_t)bits, w); break;
    case 16: nvshmem_uint16_p((uint16_t *)dest, (uint16_t)bits, w); break;
    case 32: nvshmem_uint32_p((uint32_t *)dest, (uint32_t)bits, w); break;
    default: nvshmem_uint64_p((uint64_t *)dest, bits, w); break;
    }
}

SYMM__DEVICE_INTERNAL uint64_t symm__nvshmem_g(const symm_ctx_t *ctx, const void *src, int width, int pe) {
    const int w = symm__nvshmem_pe(ctx, pe);
    switch (width) {
    case 8: return nvshmem_uint8_g((const uint8_t *)src, w);
    case 16: return nvshmem_uint16_g((const uint16_t *)src, w);
    case 32: return nvshmem_uint32_g((const uint32_t *)src, w);
    default: return nvshmem_uint64_g((const uint64_t *)src, w);
    }
}

SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__nvshmem_put_signal(const symm_ctx_t *ctx, void *dest,
                                                                     const void *src, size_t nbytes,
                                                                     uint64_t *sig, uint64_t signal, int sig_op,
                                                                     int pe, int g, int nbi) {
    const int w = symm__nvshmem_pe(ctx, pe), op = symm__nvshmem_sig_op(sig_op);
    switch (g * 2 + nbi) {
    case SYMM__G_THREAD * 2 + 0: nvshmem_putmem_signal(dest, src, nbytes, sig, signal, op, w); break;
    case SYMM__G_THREAD * 2 + 1: nvshmem_putmem_signal_nbi(dest, src, nbytes, sig, signal, op, w); break;
    case SYMM__G_WARP * 2 + 0: nvshmemx_putmem_signal_warp(dest, src, nbytes, sig, signal, op, w); break;
    case SYMM__G_WARP * 2 + 1: nvshmemx_putmem_signal_nbi_warp(dest, src, nbytes, sig, signal, op, w); break;
    case SYMM__G_BLOCK * 2 + 0: nvshmemx_putmem_signal_block(dest, src, nbytes, sig, signal, op, w); break;
    default: nvshmemx_putmem_signal_nbi_block(dest, src, nbytes, sig, signal, op, w); break;
    }
}

SYMM__DEVICE_INTERNAL void symm__nvshmem_signal_op(const symm_ctx_t *ctx, uint64_t *sig, uint64_t value,
                                                   int sig_op, int pe) {
    nvshmemx_signal_op(sig, value, symm__nvshmem_sig_op(sig_op), symm__nvshmem_pe(ctx, pe));
}

/* Signed types travel as their unsigned bits: NVSHMEM's unsigned atomics give
 * the same bits for every operation symm has (two's complement add, cas,
 * bitwise), and they are the complete set in its device library. */
#define SYMM__NVSHMEM_AMO(W, op, p, v, c, pe, out)                                                  \
    switch (op) {                                                                                   \
    case SYMM__AMO_FETCH: out = nvshmem_uint##W##_atomic_fetch((const uint##W##_t *)p, pe); break;  \
    case SYMM__AMO_SET: nvshmem_uint##W##_atomic_set((uint##W##_t *)p, (uint##W##_t)v, pe); break;  \
    case SYMM__AMO_SWAP: out = nvshmem_uint##W##_atomic_swap((uint##W##_t *)p, (uint##W##_t)v, pe); break; \
    case SYMM__AMO_CAS:                                                                             \
        out = nvshmem_uint##W##_atomic_compare_swap((uint##W##_t *)p, (uint##W##_t)c, (uint##W##_t)v, pe); \
        break;                                                                                      \
    case SYMM__AMO_FETCH_ADD:                                                                       \
        out = nvshmem_uint##W##_atomic_fetch_add((uint##W##_t *)p, (uint##W##_t)v, pe);             \
        break;                                                                                      \
    case SYMM__AMO_ADD: nvshmem_uint##W##_atomic_add((uint##W##_t *)p, (uint##W##_t)v, pe); break;  \
    case SYMM__AMO_FETCH_AND:                                                                       \
        out = nvshmem_uint##W##_atomic_fetch_and((uint##W##_t *)p, (uint##W##_t)v, pe);             \
        break;                                                                                      \
    case SYMM__AMO_AND: nvshmem_uint##W##_atomic_and((uint##W##_t *)p, (uint##W##_t)v, pe); break;  \
    case SYMM__AMO_FETCH_OR:                                                                        \
        out = nvshmem_uint##W##_atomic_fetch_or((uint##W##_t *)p, (uint##W##_t)v, pe);              \
        break;                                                                                      \
    case SYMM__AMO_OR: nvshmem_uint##W##_atomic_or((uint##W##_t *)p, (uint##W##_t)v, pe); break;    \
    case SYMM__AMO_FETCH_XOR:                                                                       \
        out = nvshmem_uint##W##_atomic_fetch_xor((uint##W##_t *)p, (uint##W##_t)v, pe);             \
        break;                                                                                      \
    default: nvshmem_uint##W##_atomic_xor((uint##W##_t *)p, (uint##W##_t)v, pe); break;            \
    }

SYMM__DEVICE_INTERNAL uint64_t symm__nvshmem_amo(const symm_ctx_t *ctx, int op, int width, void *ptr,
                                                 uint64_t value, uint64_t cond, int pe) {
    const int w = symm__nvshmem_pe(ctx, pe);
    uint64_t out = 0;
    if (width == 32) {
        SYMM__NVSHMEM_AMO(32, op, ptr, value, cond, w, out)
    } else {
        SYMM__NVSHMEM_AMO(64, op, ptr, value, cond, w, out)
    }
    return out;
}
#undef SYMM__NVSHMEM_AMO

SYMM__DEVICE_INTERNAL void symm__nvshmem_fence(const symm_ctx_t *ctx) {
    (void)ctx;
    nvshmem_fence();
}

SYMM__DEVICE_INTERNAL void symm__nvshmem_quiet(const symm_ctx_t *ctx) {
    (void)ctx;
    nvshmem_quiet();
}

/* NVSHMEM's barrier over the team's NVSHMEM team (world, or the node team);
 * its barrier includes the quiet, its sync does not. */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__nvshmem_barrier(const symm_ctx_t *ctx, int g, int quiet) {
    const nvshmem_team_t t = (nvshmem_team_t)symm__nvshmem_state(ctx)->team;
    if (t == NVSHMEM_TEAM_WORLD) {
        switch (g * 2 + quiet) {
        case SYMM__G_THREAD * 2 + 0: nvshmem_sync_all(); break;
        case SYMM__G_THREAD * 2 + 1: nvshmem_barrier_all(); break;
        case SYMM__G_WARP * 2 + 0: nvshmemx_sync_all_warp(); break;
        case SYMM__G_WARP * 2 + 1: nvshmemx_barrier_all_warp(); break;
        case SYMM__G_BLOCK * 2 + 0: nvshmemx_sync_all_block(); break;
        default: nvshmemx_barrier_all_block(); break;
        }
        return;
    }
    switch (g * 2 + quiet) {
    case SYMM__G_THREAD * 2 + 0: nvshmem_team_sync(t); break;
    case SYMM__G_THREAD * 2 + 1: nvshmem_barrier(t); break;
    case SYMM__G_WARP * 2 + 0: nvshmemx_team_sync_warp(t); break;
    case SYMM__G_WARP * 2 + 1: nvshmemx_barrier_warp(t); break;
    case SYMM__G_BLOCK * 2 + 0: nvshmemx_team_sync_block(t); break;
    default: nvshmemx_barrier_block(t); break;
    }
}

/*
 * CUDA C: make NVSHMEM's device state of this program's module ready without
 * a user step. Every file that includes this header registers, before main,
 * a function that finds its module through a kernel of its own; symm_init
 * (or this registration, when symm is already up) calls it and hands the
 * module to nvshmemx_cumodule_init. Host pass of nvcc only; the bitcode's
 * modules are set up by symm.triton (symm_backend_module_init).
 */
#if defined(__CUDACC__) && !defined(SYMM_BITCODE)
static __global__ void symm__nvshmem_module_anchor(void) {}
#  if !defined(__CUDA_ARCH__)
extern "C" void symm_backend_module_source(void *(*find)(void));
static void *symm__nvshmem_module_function(void) {
    cudaFunction_t f = NULL;
    if (cudaGetFuncBySymbol(&f, (const void *)symm__nvshmem_module_anchor) != cudaSuccess)
        return NULL;
    return (void *)f;
}
__attribute__((constructor)) static void symm__nvshmem_module_register(void) {
    symm_backend_module_source(symm__nvshmem_module_function);
}
#  endif
#endif

#endif /* SYMM__BE_WITH_NVSHMEM */

#endif /* SYMM_DEVICE_BACKEND_NVSHMEM_H */
