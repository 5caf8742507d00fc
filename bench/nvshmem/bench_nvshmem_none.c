/*
 * bench_nvshmem_none.c - used when the build found no NVSHMEM: init fails
 * with the reason, so every NVSHMEM column reads "not installed". The other
 * calls are never reached after a failed init; they fail too, to be safe.
 */
#include <stdio.h>

#include "bench_nvshmem.h"

int bench_nv_init(int rank, int nranks, int (*bcast)(void *buf, size_t n), char *why, size_t why_len) {
    (void)rank;
    (void)nranks;
    (void)bcast;
    snprintf(why, why_len, "not installed (symm-bench was built without NVSHMEM: set SYMM_NVSHMEM_HOME "
                           "or pip install nvidia-nvshmem-cu13, then re-run cmake)");
    return -1;
}

const char *bench_nv_version(void) { return "NVSHMEM not installed"; }

int bench_nv_alloc(size_t bytes, void **src, void **dst) {
    (void)bytes;
    (void)src;
    (void)dst;
    return -1;
}

void bench_nv_put_launch(void *dst, const void *src, size_t n, int blocks, int threads, int inner,
                         int pe, void *stream) {
    (void)dst, (void)src, (void)n, (void)blocks, (void)threads, (void)inner, (void)pe, (void)stream;
}

int bench_nv_latency(int kind, int role, int peer, int warm, int iters, uint32_t base,
                     unsigned long long *d_ns, unsigned long long *d_err, void *stream) {
    (void)kind, (void)role, (void)peer, (void)warm, (void)iters, (void)base, (void)d_ns, (void)d_err,
        (void)stream;
    return -1;
}

int bench_nv_read_counter(uint32_t *value) {
    (void)value;
    return -1;
}

const char *bench_nv_coll_info(void) { return "NVSHMEM not installed"; }

int bench_nv_coll_alloc(size_t src_bytes, size_t dst_bytes, void **src, void **dst) {
    (void)src_bytes, (void)dst_bytes, (void)src, (void)dst;
    return -1;
}

void bench_nv_coll_free(void) {}

int bench_nv_coll(int kind, int dtype, void *dst, const void *src, size_t count, int root, void *stream) {
    (void)kind, (void)dtype, (void)dst, (void)src, (void)count, (void)root, (void)stream;
    return -1;
}

void bench_nv_barrier_all(void) {}

void bench_nv_finalize(void) {}
