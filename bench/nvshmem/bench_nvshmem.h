/*
 * bench_nvshmem.h - the NVSHMEM side of the comparisons, behind a plain C
 * interface so that nothing else in symm-bench needs NVSHMEM's headers or
 * relocatable device code.
 *
 * Two implementations: bench_nvshmem.cu (built with -rdc against
 * libnvshmem_device.a / libnvshmem_host.so when NVSHMEM is found) and
 * bench_nvshmem_none.c (NVSHMEM not installed: bench_nv_init says so and
 * fails, and the tables print "NVSHMEM: not installed" columns).
 */
#ifndef SYMM_BENCH_NVSHMEM_H
#define SYMM_BENCH_NVSHMEM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Latency kernels, the same set for symm (rma_bench.cu) and NVSHMEM. */
enum bench_lat_kind {
    BENCH_LAT_P = 0,              /* int p, then wait_until on the local copy */
    BENCH_LAT_PUT_SIGNAL = 1,     /* 8 B put_signal (blocking), signal_wait_until */
    BENCH_LAT_PUT_SIGNAL_NBI = 2, /* 8 B put_signal_nbi, signal_wait_until */
    BENCH_LAT_FETCH_ADD = 3,      /* int fetch_add round trip (one-sided) */
    BENCH_LAT_KINDS = 4
};

/* Collective over all PEs (rank/nranks as in symm). Sets up NVSHMEM with its
 * unique-id bootstrap (nvshmemx_init_attr, on the calling thread's current
 * CUDA device); `bcast(buf, n)` must broadcast rank 0's bytes to every rank
 * (symm_host_broadcast). Returns 0, or -1 with the reason in why when the
 * failure is found before or after NVSHMEM's own init; a failure inside it
 * exits the process (NVSHMEM's behaviour; symmrun then stops every PE).
 * Before NVSHMEM starts it sets NVSHMEM_DISABLE_NCCL=1 unless set, and raises
 * NVSHMEM_SYMMETRIC_SIZE to what rma and coll need for `nranks` PEs (3G for 4;
 * a larger value is kept): see bench_nv_coll_info. */
int bench_nv_init(int rank, int nranks, int (*bcast)(void *buf, size_t n), char *why, size_t why_len);

/* "NVSHMEM 3.4.5" after init. */
const char *bench_nv_version(void);

/* Collective: two symmetric buffers of `bytes` (src, dst) plus the latency
 * words. Returns 0, or -1 (nvshmem_malloc failed). */
int bench_nv_alloc(size_t bytes, void **src, void **dst);

/* Enqueue one put-bandwidth kernel: `blocks` blocks of `threads`, block b
 * puts its 16-byte-aligned slice of dst[0..n) `inner` times with
 * nvshmemx_putmem_block to `pe`, then one quiet. */
void bench_nv_put_launch(void *dst, const void *src, size_t n, int blocks, int threads, int inner,
                         int pe, void *stream);

/*
 * One latency kernel launch on this PE (single thread). role 0 initiates and
 * times (writes the nanoseconds of the `iters` timed round trips to
 * *d_ns, a device address), role 1 answers. `warm` untimed round trips come
 * first; values used are base+1 .. base+warm+iters, so launches need no
 * reset when base grows. *d_err (device) counts payloads that arrived wrong.
 * Returns 0, or -1 if the launch failed. Not for FETCH_ADD role 1 (nothing).
 */
int bench_nv_latency(int kind, int role, int peer, int warm, int iters, uint32_t base,
                     unsigned long long *d_ns, unsigned long long *d_err, void *stream);

/* Value of this PE's fetch_add counter (after the initiator's adds and a
 * barrier): lets the responder check that every add arrived. */
int bench_nv_read_counter(uint32_t *value);

/* ---- on-stream collectives (the coll mode) ---------------------------------- */

enum bench_nv_coll_kind {
    BENCH_NV_ALL_REDUCE = 0,     /* sum; count = elements of src and of dst */
    BENCH_NV_REDUCE_SCATTER = 1, /* sum; count = elements of dst (src has npes x count) */
    BENCH_NV_ALL_GATHER = 2,     /* fcollect; count = elements of src (dst has npes x count) */
    BENCH_NV_ALL_TO_ALL = 3,     /* count = elements per peer (src and dst have npes x count) */
    BENCH_NV_BROADCAST = 4       /* from `root`; count = elements of src and of dst */
};
enum bench_nv_dtype { BENCH_NV_F32 = 0, BENCH_NV_BF16 = 1 };

/* What the coll mode's NVSHMEM figures are, e.g. "NVSHMEM's own kernels
 * (NVSHMEM_DISABLE_NCCL=1), symmetric heap 4 GiB": one line for the report. */
const char *bench_nv_coll_info(void);

/* Collective: nvshmem_malloc of two symmetric buffers, src_bytes and
 * dst_bytes, for the on-stream collectives (any previous pair is freed
 * first). Refused (-1, nothing allocated, no NVSHMEM call made, the same
 * answer on every PE) when the pair would not fit in the symmetric heap
 * beside what is already allocated, so a size that does not fit is skipped
 * instead of ending the process inside NVSHMEM. */
int bench_nv_coll_alloc(size_t src_bytes, size_t dst_bytes, void **src, void **dst);

/* Collective: free the pair of bench_nv_coll_alloc (no-op if none). */
void bench_nv_coll_free(void);

/* Enqueue one NVSHMEM on-stream collective over NVSHMEM_TEAM_WORLD on
 * `stream` (capturable into a CUDA graph: NVSHMEM's on-stream collectives
 * launch kernels only, once their first call at a size has been made outside
 * a capture). dst and src: symmetric (bench_nv_coll_alloc). Returns 0; 1 when
 * NVSHMEM has no such (kind, dtype) (nothing enqueued: the table prints
 * "n/a"); -1 when NVSHMEM's call returned an error or the launch failed. */
int bench_nv_coll(int kind, int dtype, void *dst, const void *src, size_t count, int root, void *stream);

/* Collective: nvshmem_barrier_all. */
void bench_nv_barrier_all(void);

/* Collective: free the buffers (rma's and coll's) and finalize. */
void bench_nv_finalize(void);

#ifdef __cplusplus
}
#endif

#endif /* SYMM_BENCH_NVSHMEM_H */
