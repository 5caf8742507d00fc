/*
 * fault_pe.cu - one PE of a fault-matrix run (scripts/fault_matrix.py, which
 * starts the PEs, injects the outside faults and reads what each prints).
 *
 *   fault_pe <kind> <fault> <victim> <fault_ms> <seconds>
 *   fault_pe --probe    does the GPU serve a new client (under MPS: has the
 *                       server recovered from a fault)? exit 0 if so
 *
 * Every PE runs `kind` in a loop for at most `seconds`:
 *   barrier   symm_barrier_all                 (any backend)
 *   malloc    symm_malloc + symm_free          (any backend)
 *   hostx     symm_host_allgather + broadcast  (any backend)
 *   teambar   symm_barrier_all_on_stream       (any backend: a kernel, or the CPU)
 *   ar ag a2a rs bcast a2av                    stream collectives (native)
 *   dev_ar    a kernel making 50 block-scope all-reduces (native)
 *   rma       a kernel ring of 200 put_signal + signal waits (native)
 * The victim PE, `fault_ms` after READY, does the fault: trap (a kernel
 * that traps), busy (stays out of symm for 60 s, alive), mismatch (other
 * arguments: a malloc size, an all-reduce count, all_to_allv counts), exit
 * (exits without finalize); kill and stop come from outside (none here).
 * Lines (times are CLOCK_MONOTONIC seconds, as Python's time.monotonic):
 *   READY <t>              init done, the loop starts
 *   FAULT <t> <what>       the victim's own fault, just before it
 *   RESULT <t> <status> <message>    the first error (or NONE / DONE)
 *   WHO <message>          after a CUDA error: what symm_barrier_all says
 *   LEAKS <fds> <threads>  descriptors (not the driver's /dev/nvidia*) and
 *                          threads left after finalize, beyond those before init
 */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "symm/symm.h"
#include "symm/symm_device.h"
#include "symm_test_cuda.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Open descriptors that are not the CUDA driver's own device files. */
static int count_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;
    if (!d)
        return -1;
    while ((e = readdir(d))) {
        char path[300], target[PATH_MAX];
        ssize_t k;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        k = readlink(path, target, sizeof target - 1);
        target[k > 0 ? k : 0] = '\0';
        if (strncmp(target, "/dev/nvidia", 11) != 0 && strcmp(target, "/proc/self/fd") != 0 &&
            strncmp(target, "/proc/", 6) != 0)
            n++;
    }
    closedir(d);
    return n;
}

static int count_threads(void) {
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;
    if (!d)
        return -1;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

__global__ void trap_kernel(void) { asm volatile("trap;"); }

__global__ void dev_ar_kernel(const symm_ctx_t *ctx, float *dst, const float *src, size_t n) {
    for (int i = 0; i < 50; i++)
        symm_all_reduce_block(ctx, dst, src, n, SYMM_DTYPE_F32, SYMM_OP_SUM);
}

__global__ void rma_kernel(const symm_ctx_t *ctx, char *dst, const char *src, size_t n, uint64_t *sig,
                           uint64_t base) {
    int me = symm_ctx_my_pe(ctx), np = symm_ctx_n_pes(ctx);
    for (uint64_t i = 1; i <= 200; i++) {
        symm_put_signal_block(ctx, dst, src, n, sig, base + i, SYMM_SIGNAL_SET, (me + 1) % np);
        if (threadIdx.x == 0)
            symm_signal_wait_until(ctx, sig, SYMM_CMP_GE, base + i);
        __syncthreads();
    }
}

typedef struct job {
    const char *kind;
    int me, n, victim, native;
    char *a, *b;
    uint64_t *sig;
    uint64_t rma_base;
    const symm_ctx_t *ctx;
    cudaStream_t stream;
    char cuda_err[256];
} job_t;

#define BUF ((size_t)8 << 20)

/* One iteration; `odd`: the victim's mismatched arguments. */
static symm_status_t step(job_t *j, int it, int odd) {
    static const size_t counts[] = {1000, 70001, 1 << 19};
    size_t c = counts[it % 3] / (size_t)j->n;
    const char *k = j->kind;
    symm_status_t st = SYMM_SUCCESS;
    if (strcmp(k, "barrier") == 0)
        return symm_barrier_all();
    if (strcmp(k, "malloc") == 0) {
        void *p;
        if ((st = symm_malloc(4096 * (size_t)(1 + it % 4) + (odd ? 64 : 0), &p)) != SYMM_SUCCESS)
            return st;
        return symm_free(p);
    }
    if (strcmp(k, "hostx") == 0) {
        char mine[64], all[64 * 64], buf[64];
        memset(mine, j->me, sizeof mine);
        if ((st = symm_host_allgather(mine, all, sizeof mine)) != SYMM_SUCCESS)
            return st;
        return symm_host_broadcast(buf, sizeof buf, it % j->n);
    }
    if (strcmp(k, "teambar") == 0)
        st = symm_barrier_all_on_stream(j->native ? j->stream : NULL);
    else if (strcmp(k, "ar") == 0)
        st = symm_all_reduce(j->a, j->b, c * (size_t)j->n + (odd ? 1000 : 0), SYMM_DTYPE_F32, SYMM_OP_SUM, NULL,
                             j->stream);
    else if (strcmp(k, "ag") == 0)
        st = symm_all_gather(j->a, j->b, c + (odd ? 1000 : 0), SYMM_DTYPE_F32, NULL, j->stream);
    else if (strcmp(k, "a2a") == 0)
        st = symm_all_to_all(j->a, j->b, c, SYMM_DTYPE_F32, NULL, j->stream);
    else if (strcmp(k, "rs") == 0)
        st = symm_reduce_scatter(j->a, j->b, c + (odd ? 1000 : 0), SYMM_DTYPE_F32, SYMM_OP_SUM, NULL, j->stream);
    else if (strcmp(k, "bcast") == 0)
        st = symm_broadcast(j->a, j->b, c * (size_t)j->n + (odd ? 1000 : 0), SYMM_DTYPE_F32, it % j->n, NULL,
                            j->stream);
    else if (strcmp(k, "a2av") == 0) {
        size_t sc[64], sd[64], rc[64], rd[64];
        for (int p = 0; p < j->n; p++) {
            sc[p] = rc[p] = c;
            if (odd) /* what the victim sends differs from what the others expect */
                sc[p] = c + 7;
            sd[p] = rd[p] = (size_t)p * (c + 8);
        }
        st = symm_all_to_allv(j->a, sc, sd, j->b, rc, rd, SYMM_DTYPE_F32, NULL, j->stream);
    } else if (strcmp(k, "dev_ar") == 0) {
        dev_ar_kernel<<<1, 256, 0, j->stream>>>(j->ctx, (float *)j->b, (const float *)j->a, c + (odd ? 100 : 0));
    } else if (strcmp(k, "rma") == 0) {
        rma_kernel<<<1, 256, 0, j->stream>>>(j->ctx, j->b, j->a, (size_t)64 << 10, j->sig, j->rma_base);
        j->rma_base += 200;
    } else {
        fprintf(stderr, "fault_pe: unknown kind %s\n", k);
        exit(2);
    }
    if (st != SYMM_SUCCESS || !j->native)
        return st;
    cudaError_t e = cudaStreamSynchronize(j->stream);
    if (e == cudaSuccess)
        e = cudaGetLastError();
    if (e != cudaSuccess) {
        snprintf(j->cuda_err, sizeof j->cuda_err, "%s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
        return SYMM_ERR_CUDA;
    }
    return SYMM_SUCCESS;
}

/* A context, an allocation and a memset: what a PE's init needs from the GPU. */
static int probe(void) {
    void *p = NULL;
    cudaError_t e = cudaFree(0);
    if (e == cudaSuccess)
        e = cudaMalloc(&p, 4096);
    if (e == cudaSuccess)
        e = cudaMemset(p, 0, 4096);
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (p)
        (void)cudaFree(p);
    printf("PROBE %s %s\n", cudaGetErrorName(e), cudaGetErrorString(e));
    return e == cudaSuccess ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--probe") == 0)
        return probe();
    if (argc != 6) {
        fprintf(stderr, "usage: %s <kind> <fault> <victim> <fault_ms> <seconds>\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    job_t j;
    memset(&j, 0, sizeof j);
    j.kind = argv[1];
    const char *fault = argv[2];
    j.victim = atoi(argv[3]);
    double fault_after = atof(argv[4]) * 1e-3, limit = atof(argv[5]);
    const char *be = getenv("SYMM_BACKEND");
    j.native = !(be && strcmp(be, "host") == 0);
    if (j.native)
        (void)cudaFree(0); /* the driver's own descriptors and threads count as before */
    int fds0 = count_fds(), threads0 = count_threads();
    symm_status_t st = symm_init();
    if (st != SYMM_SUCCESS) {
        printf("RESULT %.6f %s %s\n", now_s(), symm_strerror(st), symm_last_error());
        return 0;
    }
    j.me = symm_my_pe();
    j.n = symm_n_pes();
    if (j.native) {
        SYMM_CHECK(symm_ctx(&j.ctx));
        CUDA_CHECK(cudaStreamCreateWithFlags(&j.stream, cudaStreamNonBlocking));
    }
    SYMM_CHECK(symm_calloc(1, BUF, (void **)&j.a));
    SYMM_CHECK(symm_calloc(1, BUF, (void **)&j.b));
    SYMM_CHECK(symm_calloc(1, sizeof(uint64_t), (void **)&j.sig));
    SYMM_CHECK(symm_barrier_all());
    double t_ready = now_s();
    printf("READY %.6f\n", t_ready);
    int is_victim = j.me == j.victim, faulted = 0, it = 0;
    symm_status_t err = SYMM_SUCCESS;
    int quiet = strcmp(fault, "none") == 0;
    for (;;) {
        int odd = 0;
        if (quiet && it % 16 == 0) {
            /* no fault: stop together, on PE 0's clock */
            int32_t stop = now_s() - t_ready >= limit;
            if ((err = symm_host_broadcast(&stop, sizeof stop, 0)) != SYMM_SUCCESS || stop)
                break;
        } else if (!quiet && now_s() - t_ready >= limit) {
            break;
        }
        if (is_victim && !faulted && now_s() - t_ready >= fault_after) {
            faulted = 1;
            printf("FAULT %.6f %s\n", now_s(), fault);
            if (strcmp(fault, "trap") == 0 && j.native) {
                trap_kernel<<<1, 1>>>();
                (void)cudaDeviceSynchronize();
            } else if (strcmp(fault, "busy") == 0) {
                sleep(60);
            } else if (strcmp(fault, "exit") == 0) {
                _exit(3);
            } else if (strcmp(fault, "mismatch") == 0) {
                odd = 1;
            }
        }
        err = step(&j, it++, odd);
        if (err != SYMM_SUCCESS)
            break;
    }
    double t_err = now_s();
    if (err == SYMM_SUCCESS) {
        printf("RESULT %.6f NONE no error in %.0f s (%d iterations)\n", t_err, limit, it);
    } else if (err == SYMM_ERR_CUDA && j.cuda_err[0]) {
        printf("RESULT %.6f SYMM_ERR_CUDA %s\n", t_err, j.cuda_err);
        /* who left the job: the bootstrap knows */
        st = symm_barrier_all();
        printf("WHO %.6f %s %s\n", now_s(), symm_strerror(st), symm_last_error());
    } else {
        printf("RESULT %.6f %s %s\n", t_err, symm_strerror(err), symm_last_error());
    }
    (void)symm_finalize();
    if (j.native)
        (void)cudaStreamDestroy(j.stream);
    printf("LEAKS %d %d\n", count_fds() - fds0, count_threads() - threads0);
    return 0;
}
