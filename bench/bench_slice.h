/*
 * bench_slice.h - how the put-bandwidth kernels (symm and NVSHMEM alike) cut
 * n bytes among the blocks of a grid, and the GPU clock the latency kernels
 * read. Shared so both libraries are measured with the very same shape.
 */
#ifndef SYMM_BENCH_SLICE_H
#define SYMM_BENCH_SLICE_H

#include <stddef.h>
#include <stdint.h>

/* Block b of nblocks gets [*off, *off + return) of n bytes: equal slices
 * rounded up to 16 bytes, so every slice but the last starts 16-byte aligned
 * (the last may be short or empty). */
static __host__ __device__ inline size_t bench_slice(size_t n, unsigned b, unsigned nblocks, size_t *off) {
    size_t chunk = ((n + nblocks - 1) / nblocks + 15) & ~(size_t)15;
    size_t o = (size_t)b * chunk;
    *off = o;
    if (o >= n)
        return 0;
    return n - o < chunk ? n - o : chunk;
}

/* The GPU's global nanosecond timer: latency kernels time themselves, so the
 * skew between the two PEs' kernel launches is not counted. */
static __device__ inline uint64_t bench_globaltimer(void) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

#endif /* SYMM_BENCH_SLICE_H */
