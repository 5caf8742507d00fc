/*
 * The CUDA C twins of the collective kernels in kernels.py: the same
 * algorithm, grid, block, flag layout and device calls, written against
 * symm_device.h, so that a table row compares CuTe DSL with CUDA C and
 * nothing else. c_twins.py compiles this file (nvcc -cubin) next to the
 * CuTe cubins; the drivers launch both through symm.cubin.
 */
#include <stdint.h>

#include <symm/symm_device.h>
#include <symm/symm_device_coll.h>

#define COLL_THREADS 512
#define UNITS 4            /* 16-byte vectors per thread per round */
#define FLAG_WORDS 4096    /* one handshake's words: [CTA][PE] */
#define MAX_CTAS 1024
#define EPOCH_OFF (3 * FLAG_WORDS)

typedef const symm_ctx_t *ctx_t;

/* [lo, hi) of n items for CTA b of nb (contiguous, balanced) */
__device__ static void cta_range(int n, int b, int nb, int *lo, int *hi) {
    int per = (n + nb - 1) / nb;
    *lo = min(b * per, n);
    *hi = min(*lo + per, n);
}

/* cta_range cut at multiples of 64 elements: every piece starts 16-byte aligned */
__device__ static void cta_range16(int n, int b, int nb, int *lo, int *hi) {
    int per = ((n + nb - 1) / nb + 63) / 64 * 64;
    *lo = min(b * per, n);
    *hi = min(*lo + per, n);
}

__device__ static uint64_t next_epoch(const uint64_t *counter, int b) {
    return counter[b] + 1;
}

__device__ static void end_epoch(uint64_t *counter, int b, uint64_t epoch) {
    __syncthreads();
    if (threadIdx.x == 0)
        counter[b] = epoch;
}

/* CTA b of every PE waits for CTA b of every other PE */
__device__ static void handshake(ctx_t ctx, uint64_t *flags, int b, uint64_t epoch) {
    int me = symm_ctx_my_pe(ctx), npes = symm_ctx_n_pes(ctx), t = threadIdx.x;
    __syncthreads();
    if (t < npes && t != me) {
        symm_signal_op(ctx, flags + (b * npes + me), epoch, SYMM_SIGNAL_SET, t);
        symm_signal_wait_until(ctx, flags + (b * npes + t), SYMM_CMP_GE, epoch);
    }
    __syncthreads();
}

__device__ static const float4 *peer4(ctx_t ctx, const float *p, int pe) {
    return (const float4 *)symm_ctx_ptr(ctx, p, pe);
}

/* dst[v] = sum over PEs (in PE order) of src[v], vectors v in [lo4, hi4):
 * rounds of UNITS vectors per thread and peer, a peer's loads issued before
 * the sums use them, then single vectors */
__device__ static void sum_peers(ctx_t ctx, float *dst, const float *src, int lo4, int hi4, int npes) {
    float4 *d = (float4 *)dst;
    int i = lo4 + threadIdx.x;
    for (; i + (UNITS - 1) * COLL_THREADS < hi4; i += UNITS * COLL_THREADS) {
        float4 acc[UNITS], v[UNITS];
        const float4 *q = peer4(ctx, src, 0);
#pragma unroll
        for (int j = 0; j < UNITS; j++)
            acc[j] = q[i + j * COLL_THREADS];
#pragma unroll 2
        for (int p = 1; p < npes; p++) {
            q = peer4(ctx, src, p);
#pragma unroll
            for (int j = 0; j < UNITS; j++)
                v[j] = q[i + j * COLL_THREADS];
#pragma unroll
            for (int j = 0; j < UNITS; j++) {
                acc[j].x += v[j].x; acc[j].y += v[j].y; acc[j].z += v[j].z; acc[j].w += v[j].w;
            }
        }
#pragma unroll
        for (int j = 0; j < UNITS; j++)
            d[i + j * COLL_THREADS] = acc[j];
    }
    for (; i < hi4; i += COLL_THREADS) {
        float4 acc = peer4(ctx, src, 0)[i];
        for (int p = 1; p < npes; p++) {
            float4 v = peer4(ctx, src, p)[i];
            acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
        }
        d[i] = acc;
    }
}

/* the last n % 4 elements, by thread 0 of CTA 0 */
__device__ static void sum_tail(ctx_t ctx, float *dst, const float *src, int n, int npes) {
    if (threadIdx.x != 0 || blockIdx.x != 0)
        return;
    for (int j = n / 4 * 4; j < n; j++) {
        float a = ((const float *)symm_ctx_ptr(ctx, src, 0))[j];
        for (int p = 1; p < npes; p++)
            a += ((const float *)symm_ctx_ptr(ctx, src, p))[j];
        dst[j] = a;
    }
}

/* dst[v] = PE pe's src[v], vectors v in [lo4, hi4), rounds of UNITS loads per thread */
__device__ static void copy_from(ctx_t ctx, float *dst, const float *src, int lo4, int hi4, int pe) {
    float4 *d = (float4 *)dst;
    const float4 *q = peer4(ctx, src, pe);
    int i = lo4 + threadIdx.x;
    for (; i + (UNITS - 1) * COLL_THREADS < hi4; i += UNITS * COLL_THREADS) {
        float4 v[UNITS];
#pragma unroll
        for (int j = 0; j < UNITS; j++)
            v[j] = q[i + j * COLL_THREADS];
#pragma unroll
        for (int j = 0; j < UNITS; j++)
            d[i + j * COLL_THREADS] = v[j];
    }
    for (; i < hi4; i += COLL_THREADS)
        d[i] = q[i];
}

extern "C" {

/* kernels.py ag_push: put_signal_block of this CTA's share into every other PE, ADD 1 */
__global__ void __launch_bounds__(COLL_THREADS)
c_ag_push(const symm_ctx_t *ctx, float *dst, const float *src, uint64_t *sig, int n) {
    int b = blockIdx.x, nb = gridDim.x, me = symm_ctx_my_pe(ctx), npes = symm_ctx_n_pes(ctx), lo, hi;
    uint64_t epoch = next_epoch(sig + MAX_CTAS, b);
    cta_range16(n, b, nb, &lo, &hi);
    float *d = dst + ((int64_t)me * n + lo);
    size_t bytes = (size_t)(hi - lo) * sizeof(float);
    for (int i = 1; i < npes; i++)
        symm_put_signal_block(ctx, d, src + lo, bytes, sig + b, 1, SYMM_SIGNAL_ADD, (me + i) % npes);
    symm_put_block(ctx, d, src + lo, bytes, me);
    if (npes > 1)
        symm_signal_wait_until(ctx, sig + b, SYMM_CMP_GE, epoch * (uint64_t)(npes - 1));
    end_epoch(sig + MAX_CTAS, b, epoch);
}

__global__ void __launch_bounds__(COLL_THREADS)
c_ag_device(const symm_ctx_t *ctx, float *dst, const float *src, int n) {
    symm_all_gather_grid(ctx, dst, src, (size_t)n, SYMM_DTYPE_F32, blockIdx.x, gridDim.x);
}

/* kernels.py ar_oneshot: handshake, sum every PE's src over NVLink, handshake */
__global__ void __launch_bounds__(COLL_THREADS)
c_ar_oneshot(const symm_ctx_t *ctx, float *dst, const float *src, uint64_t *flags, int n) {
    int b = blockIdx.x, nb = gridDim.x, npes = symm_ctx_n_pes(ctx), lo, hi;
    uint64_t epoch = next_epoch(flags + EPOCH_OFF, b);
    handshake(ctx, flags, b, epoch);
    cta_range(n / 4, b, nb, &lo, &hi);
    sum_peers(ctx, dst, src, lo, hi, npes);
    sum_tail(ctx, dst, src, n, npes);
    handshake(ctx, flags + FLAG_WORDS, b, epoch);
    end_epoch(flags + EPOCH_OFF, b, epoch);
}

/* kernels.py ar_twoshot: reduce slice my_pe, handshake, read the other slices from their owners */
__global__ void __launch_bounds__(COLL_THREADS)
c_ar_twoshot(const symm_ctx_t *ctx, float *dst, const float *src, uint64_t *flags, int n) {
    int b = blockIdx.x, nb = gridDim.x, me = symm_ctx_my_pe(ctx), npes = symm_ctx_n_pes(ctx), lo, hi;
    uint64_t epoch = next_epoch(flags + EPOCH_OFF, b);
    int n4 = n / 4;
    handshake(ctx, flags, b, epoch);
    cta_range(n4, me * nb + b, npes * nb, &lo, &hi);
    sum_peers(ctx, dst, src, lo, hi, npes);
    handshake(ctx, flags + FLAG_WORDS, b, epoch);
    for (int i = 1; i < npes; i++) {
        int q = (me + i) % npes;
        cta_range(n4, q * nb + b, npes * nb, &lo, &hi);
        copy_from(ctx, dst, dst, lo, hi, q);
    }
    handshake(ctx, flags + 2 * FLAG_WORDS, b, epoch);
    end_epoch(flags + EPOCH_OFF, b, epoch);
}

/* kernels.py rs_oneshot: PE r sums piece r of every PE's src */
__global__ void __launch_bounds__(COLL_THREADS)
c_rs_oneshot(const symm_ctx_t *ctx, float *dst, const float *src, uint64_t *flags, int n) {
    int b = blockIdx.x, nb = gridDim.x, me = symm_ctx_my_pe(ctx), npes = symm_ctx_n_pes(ctx), lo, hi;
    uint64_t epoch = next_epoch(flags + EPOCH_OFF, b);
    handshake(ctx, flags, b, epoch);
    cta_range(n / 4, b, nb, &lo, &hi);
    sum_peers(ctx, dst, src + (int64_t)me * n, lo, hi, npes);
    handshake(ctx, flags + FLAG_WORDS, b, epoch);
    end_epoch(flags + EPOCH_OFF, b, epoch);
}

__global__ void __launch_bounds__(COLL_THREADS)
c_ar_device(const symm_ctx_t *ctx, float *dst, const float *src, int n) {
    symm_all_reduce_grid(ctx, dst, src, (size_t)n, SYMM_DTYPE_F32, SYMM_OP_SUM, blockIdx.x, gridDim.x);
}

__global__ void __launch_bounds__(COLL_THREADS)
c_rs_device(const symm_ctx_t *ctx, float *dst, const float *src, int n) {
    symm_reduce_scatter_grid(ctx, dst, src, (size_t)n, SYMM_DTYPE_F32, SYMM_OP_SUM, blockIdx.x, gridDim.x);
}

} /* extern "C" */
