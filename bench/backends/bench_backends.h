/*
 * bench_backends.h - the device side of symm-bench's "backends" mode: kernels
 * that call symm's device API compiled with every backend it has
 * (SYMM_DEVICE_WITH_NVSHMEM / _NCCL where their headers were found), behind a
 * plain C interface, so that the rest of symm-bench stays native-only
 * whole-program CUDA (NVSHMEM's device code needs relocatable device code
 * and a device link of its own).
 */
#ifndef SYMM_BENCH_BACKENDS_H
#define SYMM_BENCH_BACKENDS_H

#include <stddef.h>
#include <stdint.h>

#include "symm/symm_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which backends' device calls these kernels carry (enum symm_backend_kind
 * bits: 1 << SYMM_BACKEND_NVSHMEM...); native always. */
unsigned bench_be_kernels_backends(void);

/* `blocks` blocks of 512 threads put their slices of [0, n) to `pe`, `inner`
 * times, then a block-scope quiet. Returns 0, or -1 when the launch failed. */
int bench_be_put(const symm_ctx_t *ctx, void *dst, const void *src, size_t n, int blocks, int inner, int pe,
                 void *stream);

/* One thread: `iters` round trips with `pe` (an 8-byte put_signal each way;
 * with pe == this PE, to itself and back), after `warm` untimed ones. role 0
 * starts and writes the nanoseconds of the timed ones to *d_ns, role 1
 * answers. `base` keeps the signal values rising across launches. *d_err
 * counts payloads that arrived wrong. */
int bench_be_ping(const symm_ctx_t *ctx, uint64_t *words, int role, int pe, int warm, int iters, uint64_t base,
                  unsigned long long *d_ns, unsigned long long *d_err, void *stream);

/* One thread: `iters` dependent fetch-adds of 1 on `pe`'s word; the time to
 * *d_ns, the last value fetched to *d_last. */
int bench_be_fetch_add(const symm_ctx_t *ctx, uint64_t *word, int pe, int warm, int iters,
                       unsigned long long *d_ns, unsigned long long *d_last, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* SYMM_BENCH_BACKENDS_H */
