/*
 * put_signal_pipeline: PE p streams a buffer to PE p + 1 in chunks, and
 * PE p + 1 works on each chunk as soon as it lands instead of waiting for
 * the whole buffer. In one kernel, block 0 produces: it computes a chunk
 * and puts it with put_signal (non-blocking: the data, then +1 on the
 * receiver's signal word, in that order); block 1 consumes what the
 * previous PE sends: it waits until the signal counts chunk k, then sums
 * chunk k. The sums are checked against what the sender computed.
 */
#include <symm/symm_device.h>

#include "example.h"

#define CHUNKS     64
#define CHUNK_ELEM 16384 /* 64 KiB of uint32 per chunk */
#define RUNS       3

/* Element i of what PE pe sends in run `run` (wraps in 32 bits alike on both sides). */
__host__ __device__ static uint32_t value(int pe, int run, size_t i) {
    return (uint32_t)(pe * 7919 + run * 104729) + (uint32_t)i;
}

/* stage: local staging of what this PE sends; inbox: where the previous PE's
 * chunks land (symmetric, as is `sig`); sums[k]: what the consumer found in
 * chunk k. `base` is the signal count before this run. */
__global__ void pipeline(const symm_ctx_t *ctx, uint32_t *stage, uint32_t *inbox, uint64_t *sig,
                         unsigned long long *sums, int run, uint64_t base) {
    int me = symm_ctx_my_pe(ctx), npes = symm_ctx_n_pes(ctx);
    int next = (me + 1) % npes;
    if (blockIdx.x == 0) { /* producer */
        for (int k = 0; k < CHUNKS; k++) {
            uint32_t *chunk = stage + (size_t)k * CHUNK_ELEM;
            for (size_t i = threadIdx.x; i < CHUNK_ELEM; i += blockDim.x)
                chunk[i] = value(me, run, (size_t)k * CHUNK_ELEM + i);
            __syncthreads(); /* the chunk is complete before the put reads it */
            symm_put_signal_block_nbi(ctx, inbox + (size_t)k * CHUNK_ELEM, chunk, CHUNK_ELEM * sizeof(uint32_t),
                                      sig, 1, SYMM_SIGNAL_ADD, next);
        }
        symm_quiet_block(ctx); /* stage may be rewritten by the next run */
    } else { /* consumer */
        __shared__ unsigned long long acc;
        for (int k = 0; k < CHUNKS; k++) {
            if (threadIdx.x == 0) {
                symm_signal_wait_until(ctx, sig, SYMM_CMP_GE, base + (uint64_t)k + 1);
                acc = 0;
            }
            __syncthreads(); /* the wait's acquire covers the block from here */
            unsigned long long part = 0;
            for (size_t i = threadIdx.x; i < CHUNK_ELEM; i += blockDim.x)
                part += inbox[(size_t)k * CHUNK_ELEM + i];
            atomicAdd(&acc, part);
            __syncthreads();
            if (threadIdx.x == 0)
                sums[k] = acc;
        }
    }
}

int main(void) {
    SYMM_CHECK(symm_init());
    int me = symm_my_pe(), npes = symm_n_pes(), prev = (me + npes - 1) % npes;
    const symm_ctx_t *ctx;
    uint32_t *stage, *inbox;
    uint64_t *sig;
    unsigned long long *sums, host[CHUNKS];
    const size_t bytes = (size_t)CHUNKS * CHUNK_ELEM * sizeof(uint32_t);
    SYMM_CHECK(symm_ctx(&ctx));
    SYMM_CHECK(symm_malloc(bytes, (void **)&stage));
    SYMM_CHECK(symm_malloc(bytes, (void **)&inbox));
    SYMM_CHECK(symm_calloc(1, sizeof(uint64_t), (void **)&sig));
    CUDA_CHECK(cudaMalloc(&sums, sizeof(host)));

    long bad = 0;
    for (int run = 0; run < RUNS; run++) {
        pipeline<<<2, 256>>>(ctx, stage, inbox, sig, sums, run, (uint64_t)run * CHUNKS);
        CUDA_CHECK_KERNEL();
        /* every PE's consumer is done with its inbox before anyone sends again */
        SYMM_CHECK(symm_barrier_all());
        CUDA_CHECK(cudaMemcpy(host, sums, sizeof(host), cudaMemcpyDeviceToHost));
        for (int k = 0; k < CHUNKS; k++) {
            unsigned long long want = 0;
            for (size_t i = 0; i < CHUNK_ELEM; i++)
                want += value(prev, run, (size_t)k * CHUNK_ELEM + i);
            bad += host[k] != want;
        }
    }
    int rc = example_report("put_signal_pipeline", bad, "64 chunks x 3 runs from the previous PE");
    CUDA_CHECK(cudaFree(sums));
    SYMM_CHECK(symm_free(sig));
    SYMM_CHECK(symm_free(inbox));
    SYMM_CHECK(symm_free(stage));
    SYMM_CHECK(symm_finalize());
    return rc;
}
