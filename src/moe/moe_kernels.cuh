/*
 * moe_kernels.cuh - device helpers shared by the MoE kernels (moe_k_ll_*.cu,
 * moe_k_ht.cu): the handle's regions, recorded errors, the last block of a
 * grid, a block scan, index loads and 8-wide format conversions. Plain C on
 * symm's device API (peer stores, release flags, deadline-checked waits).
 */
#ifndef SYMM_MOE_KERNELS_CUH
#define SYMM_MOE_KERNELS_CUH

#include <cuda_runtime.h>

#include "symm/symm_device.h"
#include "symm/symm_moe.h"
#include "symm/device/convert.h" /* element conversions */

extern "C" {
#include "core/log.h"
#include "moe/moe_launch.h"
}

#define MOE_FULL 0xffffffffu

/* A region of the handle's symmetric memory on this PE, by its layout field. */
#define MOE_AT(A, field) ((char *)(uintptr_t)((A)->base + (A)->lay.field))
#define MOE_U64(A, field) ((uint64_t *)(void *)MOE_AT(A, field))
#define MOE_U32(A, field) ((uint32_t *)(void *)MOE_AT(A, field))
#define MOE_I32(A, field) ((int32_t *)(void *)MOE_AT(A, field))

SYMM__DEVICE_INTERNAL symm__moe_state_t *moe_state(const symm__moe_kargs_t *A) {
    return (symm__moe_state_t *)(void *)MOE_AT(A, state);
}

/* PE pe's copy of the handle address p. */
SYMM__DEVICE_INTERNAL void *moe_peer(const symm__moe_kargs_t *A, const void *p, int pe) {
    return symm__peer(&A->ctx, p, pe);
}

/* Wait (acquire, with the deadline) until *word >= v; returns the value.
 * `from` is the PE that releases the word: the device trace names it. */
SYMM__DEVICE_INTERNAL uint64_t moe_wait(const symm__moe_kargs_t *A, const uint64_t *word, uint64_t v, int from) {
    SYMM__TRACE_START(&A->ctx, t_, SYMM__G_THREAD);
    const uint64_t seen = symm__wait_u64(&A->ctx, word, SYMM_CMP_GE, v);
    SYMM__TRACE_WAIT(&A->ctx, t_, SYMM_TRACE_WAIT_MOE, word, from, SYMM_CMP_GE, v, seen);
    (void)from;
    return seen;
}

/* Data words into a peer (ordered by the release that follows). */
SYMM__DEVICE_INTERNAL void moe_put32(void *peer_addr, uint32_t v) {
    symm__st_b32(peer_addr, v, SYMM_SEM_WEAK, SYMM_SCOPE_SYS);
}

/*
 * Record the first error of the handle (moe_launch.h). The record is
 * host-mapped memory, where device atomics are not atomic; a lock word in the
 * handle's state serialises writers, and a record the host has not cleared
 * yet is kept.
 */
SYMM__NOINLINE void moe_error(const symm__moe_kargs_t *A, uint32_t code, int64_t x, int64_t y, int64_t z) {
    volatile symm__moe_err_t *e = (volatile symm__moe_err_t *)(uintptr_t)A->err;
    uint32_t *lock = &moe_state(A)->err_lock;
    if (e->code != 0 || atomicCAS(lock, 0u, 1u) != 0u)
        return;
    if (e->code == 0) {
        e->call = A->kernel;
        e->a = x;
        e->b = y;
        e->c = z;
        __threadfence_system();
        e->code = code;
        __threadfence_system();
    }
    atomicExch(lock, 0u);
}

/* Release store of a flag or count into PE pe's copy of `word`: every store
 * this thread made, and every store the block made before a barrier this
 * thread passed, is visible to whoever acquires it (fences are cumulative). */
SYMM__DEVICE_INTERNAL void moe_release(const symm__moe_kargs_t *A, uint64_t *word, uint64_t v, int pe) {
    SYMM__TRACE_START(&A->ctx, t_, SYMM__G_THREAD);
    symm__st_b64(moe_peer(A, word, pe), v, SYMM_SEM_RELEASE, SYMM_SCOPE_SYS);
    SYMM__TRACE_SIGNAL(&A->ctx, t_, pe, word, v, SYMM_SIGNAL_SET);
}

/*
 * The device trace in the MoE kernels (a build with -DSYMM_TRACE=ON; all of
 * it is nothing otherwise). Start times that span a copy loop live in shared
 * memory, written by thread 0, not in a register of every thread: the copy
 * loops are at the register limit, and a 64-bit value live across them
 * spills.
 *   MOE_TRACE_T0(name, A)  declares `name` and stamps it (thread 0); the
 *                          threads that read it must pass a block barrier first
 *   MOE_RELEASE_PUT(...)   a row's or chunk's flag, released (moe_release)
 *                          and recorded as a put with signal of nbytes from t
 *   MOE_TRACE_HALF(...)    a kernel half as one slice per block
 */
#if SYMM__TRACE_ON
#  define MOE_TRACE_T0(name, A)                                                                      \
    __shared__ uint64_t name;                                                                        \
    if (symm__block_tid() == 0)                                                                      \
    name = symm__trace_start(&(A)->ctx, SYMM__G_BLOCK)
#else
#  define MOE_TRACE_T0(name, A)
#endif

#define MOE_RELEASE_PUT(A, t, word, v, pe, nbytes)                                                          \
    do {                                                                                                   \
        symm__st_b64(moe_peer((A), (word), (pe)), (v), SYMM_SEM_RELEASE, SYMM_SCOPE_SYS);                 \
        SYMM__TRACE_PUT_SIGNAL(&(A)->ctx, t, SYMM__G_THREAD, 0, (pe), (word), (nbytes), (v), SYMM_SIGNAL_SET); \
    } while (0)

#define MOE_TRACE_HALF(A, kind, body)                                                                      \
    do {                                                                                                   \
        MOE_TRACE_T0(th_, A);                                                                              \
        body;                                                                                              \
        if (SYMM__TRACE_ON && symm__block_tid() == 0) {                                                    \
            SYMM__TRACE_COLL(&(A)->ctx, th_, (kind), SYMM_COLL_ALGO_AUTO, SYMM_TRACE_F_STREAM, 0);         \
        }                                                                                                  \
    } while (0)

/* Every kernel of a handle starts with it: the epoch it works on (a send
 * half opens the next one, a receive half or combine works on the current
 * one), and the grid size recorded for symm_moe_launched_blocks. */
SYMM__DEVICE_INTERNAL uint64_t moe_begin(const symm__moe_kargs_t *A, int opens) {
    symm__moe_state_t *st = moe_state(A);
    if (blockIdx.x == 0 && symm__block_tid() == 0)
        atomicMax(&st->max_grid, gridDim.x);
    return *(volatile uint64_t *)&st->epoch + (opens ? 1u : 0u);
}

/* The block that finishes last stores the epoch it opened. Every block read
 * the old value at its start, before it counted itself here; the next kernel
 * on the stream sees the new one. */
SYMM__DEVICE_INTERNAL void moe_close_epoch(const symm__moe_kargs_t *A, uint32_t kernel, uint64_t e) {
    symm__moe_state_t *st = moe_state(A);
    symm__block_sync();
    if (symm__block_tid() == 0 && atomicAdd(&st->done[kernel], 1u) == gridDim.x - 1) {
        atomicExch(&st->done[kernel], 0u);
        *(volatile uint64_t *)&st->epoch = e;
    }
}

/* Is every address and stride 16-byte aligned (vector copies)? */
SYMM__DEVICE_INTERNAL int moe_al16(uint64_t a) { return (a & 15u) == 0; }

/* Exclusive prefix sum of v over the block (SYMM__MOE_THREADS threads); the
 * block's total in *total. Every thread calls it. */
SYMM__DEVICE_INTERNAL uint32_t moe_block_scan(uint32_t v, uint32_t *total) {
    __shared__ uint32_t warp_sum[SYMM__MOE_WARPS];
    const uint32_t tid = symm__block_tid(), lane = tid & 31u, warp = tid >> 5;
    uint32_t x = v, r;
    for (uint32_t o = 1; o < 32; o <<= 1) {
        uint32_t y = __shfl_up_sync(MOE_FULL, x, o);
        if (lane >= o)
            x += y;
    }
    if (lane == 31)
        warp_sum[warp] = x;
    symm__block_sync();
    if (warp == 0) {
        uint32_t w = lane < SYMM__MOE_WARPS ? warp_sum[lane] : 0;
        for (uint32_t o = 1; o < 32; o <<= 1) {
            uint32_t y = __shfl_up_sync(MOE_FULL, w, o);
            if (lane >= o)
                w += y;
        }
        if (lane < SYMM__MOE_WARPS)
            warp_sum[lane] = w;
    }
    symm__block_sync();
    r = (warp ? warp_sum[warp - 1] : 0) + x - v;
    *total = warp_sum[SYMM__MOE_WARPS - 1];
    symm__block_sync();
    return r;
}

/* Element i of the call's index array (uint32, int32 or int64), as int64. */
SYMM__DEVICE_INTERNAL int64_t moe_index(const symm__moe_kargs_t *A, uint64_t i) {
    switch (A->idx_kind) {
    case 0: return (int64_t)((const uint32_t *)A->idx)[i];
    case 1: return (int64_t)((const int32_t *)A->idx)[i];
    default: return ((const int64_t *)A->idx)[i];
    }
}

/* The token's bound: *bound (when given and valid) else num_tokens. */
SYMM__DEVICE_INTERNAL uint64_t moe_bound(const symm__moe_kargs_t *A, int report) {
    uint64_t m = A->num_tokens, b;
    if (A->bound == NULL)
        return m;
    b = *A->bound;
    if (b <= m)
        return b;
    if (report)
        moe_error(A, SYMM__MOE_ERR_BOUND, (int64_t)b, (int64_t)m, 0);
    return m;
}

/* ---- 8 elements of f32 / bf16 / f16 --------------------------------------------------- */

/* Up to MOE_GATHER rows are loaded before any is summed, so a thread has
 * that many loads in flight instead of one at a time. */
#define MOE_GATHER 8

/* The raw bytes of 8 elements of `kind` at p (16-byte aligned): 16 (bf16,
 * f16) or 32 (f32, into a and b). */
SYMM__DEVICE_INTERNAL void moe_ld8_raw(const char *p, uint32_t kind, symm__v4_t *a, symm__v4_t *b) {
    *a = symm__cld16(p, 0);
    if (kind == SYMM_DTYPE_F32)
        *b = symm__cld16(p + 16, 0);
}

/* acc[i] += w * element i of the 8 raw elements in a (and b). */
SYMM__DEVICE_INTERNAL void moe_fma8(uint32_t kind, symm__v4_t a, symm__v4_t b, float w, float *acc) {
    const uint32_t v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    if (kind == SYMM_DTYPE_F32) {
        for (int i = 0; i < 8; i++)
            acc[i] += w * symm__bits_f32(v[i]);
        return;
    }
    for (int i = 0; i < 4; i++) {
        if (kind == SYMM_DTYPE_BF16) {
            acc[2 * i] += w * symm__c_bf16_to_f32(v[i] & 0xffffu);
            acc[2 * i + 1] += w * symm__c_bf16_to_f32(v[i] >> 16);
        } else {
            acc[2 * i] += w * symm__c_f16_to_f32(v[i] & 0xffffu);
            acc[2 * i + 1] += w * symm__c_f16_to_f32(v[i] >> 16);
        }
    }
}

/* Store 8 floats as bf16 or f16 at p (any 2-byte alignment). */
SYMM__DEVICE_INTERNAL void moe_store8(char *p, uint32_t kind, const float *f) {
    uint32_t w[4];
    for (int i = 0; i < 4; i++) {
        uint32_t lo, hi;
        if (kind == SYMM_DTYPE_BF16) {
            lo = symm__c_f32_to_bf16(f[2 * i]);
            hi = symm__c_f32_to_bf16(f[2 * i + 1]);
        } else {
            lo = symm__c_f32_to_f16(f[2 * i]);
            hi = symm__c_f32_to_f16(f[2 * i + 1]);
        }
        w[i] = (lo & 0xffffu) | (hi << 16);
    }
    if (((uintptr_t)p & 15u) == 0) {
        symm__v4_t v;
        v.x = w[0]; v.y = w[1]; v.z = w[2]; v.w = w[3];
        symm__cst16(p, v, 0);
    } else {
        for (int i = 0; i < 4; i++) {
            symm__cst2(p + 4 * i, w[i] & 0xffffu, 0);
            symm__cst2(p + 4 * i + 2, w[i] >> 16, 0);
        }
    }
}

SYMM__DEVICE_INTERNAL uint32_t moe_kind_size(uint32_t kind) { return kind == SYMM_DTYPE_F32 ? 4u : 2u; }

/* Launchers each kernel file defines (moe_launch.cu dispatches to them). */
symm_status_t symm__moe_launch_ll(const symm__moe_kargs_t *a, cudaStream_t s);
symm_status_t symm__moe_launch_ht(const symm__moe_kargs_t *a, cudaStream_t s);
/* Launch `kernel` (a host stub taking symm__moe_kargs_t) with programmatic dependent launch:
 * a->nblocks blocks of SYMM__MOE_THREADS, `smem` dynamic shared bytes. `what` names it in
 * errors. Errors: SYMM_ERR_CUDA. */
symm_status_t symm__moe_launch_pdl(const void *kernel, const symm__moe_kargs_t *a, size_t smem, cudaStream_t s,
                                   const char *what);

static inline symm_status_t symm__moe_launched(const char *what) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return symm__error(SYMM_ERR_CUDA, "launching %s: %s (%s)", what, cudaGetErrorName(e),
                           cudaGetErrorString(e));
    return SYMM_SUCCESS;
}

#endif /* SYMM_MOE_KERNELS_CUH */
