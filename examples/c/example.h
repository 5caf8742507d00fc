/*
 * example.h - what every example in this folder shares: stop on the first
 * failed call with the reason, and report the verification.
 */
#ifndef SYMM_EXAMPLE_H
#define SYMM_EXAMPLE_H

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>
#include <symm/symm.h>

/* A failed symm call: print symm_last_error() (it names the PE and the
 * reason) and exit; the other PEs then fail too instead of waiting. */
#define SYMM_CHECK(call)                                                                 \
    do {                                                                                 \
        symm_status_t st_ = (call);                                                      \
        if (st_ != SYMM_SUCCESS) {                                                       \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                \
                    symm_last_error()[0] ? symm_last_error() : symm_strerror(st_));      \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

#define CUDA_CHECK(call)                                                                 \
    do {                                                                                 \
        cudaError_t e_ = (call);                                                         \
        if (e_ != cudaSuccess) {                                                         \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                \
                    cudaGetErrorString(e_));                                             \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

/* After a kernel launch: the launch, then the kernel itself. */
#define CUDA_CHECK_KERNEL()                                                              \
    do {                                                                                 \
        CUDA_CHECK(cudaGetLastError());                                                  \
        CUDA_CHECK(cudaDeviceSynchronize());                                             \
    } while (0)

/* Every PE says whether its result was right; the exit status is non-zero on
 * every PE when any PE's was wrong. */
static inline int example_report(const char *name, long bad, const char *what) {
    int me = symm_my_pe(), n = symm_n_pes();
    long *all = (long *)calloc((size_t)n, sizeof(long));
    if (!all) {
        fprintf(stderr, "%s: out of host memory\n", name);
        exit(1);
    }
    SYMM_CHECK(symm_host_allgather(&bad, all, sizeof(bad)));
    long total = 0;
    for (int p = 0; p < n; p++)
        total += all[p];
    free(all);
    if (bad)
        printf("%s: PE %d of %d: %ld wrong values (%s)\n", name, me, n, bad, what);
    else if (me == 0)
        printf("%s: %s on %d PEs: %s\n", name, what, n, total ? "FAILED" : "ok");
    return total ? 1 : 0;
}

#endif /* SYMM_EXAMPLE_H */
