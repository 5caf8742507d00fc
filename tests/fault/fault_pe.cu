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
 *   local     work that never waits for a peer (any backend): what the host
 *             of a PE looks like while it waits for a kernel that keeps
 *             being answered; only the abort grace ends it
 *   ar ag a2a rs bcast a2av                    stream collectives (native)
 *   dev_ar    a kernel making 50 block-scope all-reduces (native)
 *   dev_coll  a kernel making 10 rounds of the grid-scope device collectives
 *             (all-reduce, all-gather, all-to-all, reduce-scatter,
 *             broadcast, collective barrier; 4 blocks) (native)
 *   rma       a kernel ring of 200 put_signal + signal waits (native)
 *   devloop   one kernel ring of 8-byte put_signal + waits lasting about
 *             min(30 s, <seconds>) (its pace measured at start): every wait
 *             is answered at once, also by a stopped PE's kernel (native)
 *   moe_ll moe_ht  MoE dispatch + combine, low-latency / high-throughput
 *             mode (symm_moe.h; native)
 * The victim PE, `fault_ms` after READY, does the fault: trap (a kernel
 * that traps), busy (stays out of symm for 60 s, alive), mismatch (other
 * arguments: a malloc size, an all-reduce count, all_to_allv counts), exit
 * (exits without finalize); kill and stop come from outside (none here).
 * Lines (times are CLOCK_MONOTONIC seconds, as Python's time.monotonic):
 *   PID <pid>              this process (for faults sent from outside)
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
#include "symm/symm_moe.h"
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

__global__ void ring_kernel(const symm_ctx_t *ctx, char *dst, const char *src, uint64_t *sig, uint64_t base,
                            uint64_t iters) {
    int me = symm_ctx_my_pe(ctx), np = symm_ctx_n_pes(ctx);
    for (uint64_t i = 1; i <= iters; i++) {
        symm_put_signal_block(ctx, dst, src, 8, sig, base + i, SYMM_SIGNAL_SET, (me + 1) % np);
        if (threadIdx.x == 0)
            symm_signal_wait_until(ctx, sig, SYMM_CMP_GE, base + i);
        __syncthreads();
    }
}

__global__ void dev_coll_kernel(const symm_ctx_t *ctx, float *dst, const float *src, size_t c, int np) {
    int blk = (int)blockIdx.x, nb = (int)gridDim.x;
    for (int i = 0; i < 10; i++) {
        symm_all_reduce_grid(ctx, dst, src, c * (size_t)np, SYMM_DTYPE_F32, SYMM_OP_SUM, blk, nb);
        symm_all_gather_grid(ctx, dst, src, c, SYMM_DTYPE_F32, blk, nb);
        symm_all_to_all_grid(ctx, dst, src, c, SYMM_DTYPE_F32, blk, nb);
        symm_reduce_scatter_grid(ctx, dst, src, c, SYMM_DTYPE_F32, SYMM_OP_SUM, blk, nb);
        symm_broadcast_grid(ctx, dst, src, c * (size_t)np, SYMM_DTYPE_F32, i % np, blk, nb);
        symm_coll_barrier_grid(ctx, blk, nb);
    }
}

/* MoE handles and their (non-symmetric) buffers: tokens with distinct experts. */
typedef struct moe_job {
    symm_moe_t *h;
    size_t E, K, H, M, L, rows;
    int32_t *num;
    void *ox, *x, *out, *y;
    uint32_t *idx;
    float *w;
    symm_moe_ht_recv_t r;
} moe_job_t;

typedef struct job {
    const char *kind;
    int me, n, victim, native;
    char *a, *b;
    uint64_t *sig;
    uint64_t rma_base;
    uint64_t loop_iters; /* devloop: iterations of one kernel */
    const symm_ctx_t *ctx;
    cudaStream_t stream;
    moe_job_t moe;
    char cuda_err[256];
} job_t;

static cudaError_t moe_setup(job_t *j, int mode) {
    moe_job_t *m = &j->moe;
    symm_moe_config_t c;
    memset(&c, 0, sizeof c);
    m->E = 4 * (size_t)j->n;
    m->K = 2;
    m->H = 512;
    m->M = mode == SYMM_MOE_LOW_LATENCY ? 32 : 256;
    c.mode = mode;
    c.max_num_tokens = m->M;
    c.num_experts = m->E;
    c.experts_per_token = m->K;
    c.hidden_dim = m->H;
    c.hidden_dim_bytes = m->H * 2;
    c.dp_size = 1;
    SYMM_CHECK(symm_moe_create(&c, NULL, &m->h));
    m->L = symm_moe_local_experts(m->h);
    m->rows = m->M * (size_t)j->n;
    if (mode == SYMM_MOE_HIGH_THROUGHPUT)
        SYMM_CHECK(symm_moe_ht_recv_buffers(m->h, &m->r));
    size_t yrows = mode == SYMM_MOE_LOW_LATENCY ? m->L * m->rows : m->r.capacity;
    uint32_t *idx = (uint32_t *)malloc(m->M * m->K * sizeof *idx);
    float *w = (float *)malloc(m->M * m->K * sizeof *w);
    if (!idx || !w)
        return cudaErrorMemoryAllocation;
    for (size_t t = 0; t < m->M; t++) /* K distinct experts per token */
        for (size_t k = 0; k < m->K; k++) {
            idx[t * m->K + k] = (uint32_t)((t * 7 + (size_t)j->me * 3 + k * (m->E / m->K)) % m->E);
            w[t * m->K + k] = 0.5f;
        }
    cudaError_t e = cudaMalloc(&m->num, m->L * sizeof(int32_t));
    if (e == cudaSuccess)
        e = cudaMalloc(&m->ox, m->L * m->rows * m->H * 2);
    if (e == cudaSuccess)
        e = cudaMalloc(&m->x, m->M * m->H * 2);
    if (e == cudaSuccess)
        e = cudaMalloc(&m->out, m->M * m->H * 2);
    if (e == cudaSuccess)
        e = cudaMalloc(&m->y, yrows * m->H * (mode == SYMM_MOE_LOW_LATENCY ? 4 : 2));
    if (e == cudaSuccess)
        e = cudaMalloc(&m->idx, m->M * m->K * sizeof(uint32_t));
    if (e == cudaSuccess)
        e = cudaMalloc(&m->w, m->M * m->K * sizeof(float));
    if (e == cudaSuccess)
        e = cudaMemset(m->x, 0x3c, m->M * m->H * 2);
    if (e == cudaSuccess)
        e = cudaMemset(m->y, 0, yrows * m->H * (mode == SYMM_MOE_LOW_LATENCY ? 4 : 2));
    if (e == cudaSuccess)
        e = cudaMemcpy(m->idx, idx, m->M * m->K * sizeof(uint32_t), cudaMemcpyHostToDevice);
    if (e == cudaSuccess)
        e = cudaMemcpy(m->w, w, m->M * m->K * sizeof(float), cudaMemcpyHostToDevice);
    free(idx);
    free(w);
    return e;
}

static void moe_free(job_t *j) {
    moe_job_t *m = &j->moe;
    if (m->h)
        (void)symm_moe_destroy(m->h);
    cudaFree(m->num); cudaFree(m->ox); cudaFree(m->x); cudaFree(m->out); cudaFree(m->y); cudaFree(m->idx);
    cudaFree(m->w);
    memset(m, 0, sizeof *m);
}

/* One dispatch and one combine of the MoE handle. */
static symm_status_t moe_step(job_t *j) {
    moe_job_t *m = &j->moe;
    symm_status_t st;
    if (strcmp(j->kind, "moe_ll") == 0) {
        symm_moe_dispatch_args_t d;
        symm_moe_combine_args_t c;
        memset(&d, 0, sizeof d);
        d.out_expert_num_tokens = m->num;
        d.out_expert_x = m->ox;
        d.out_expert_x_stride[0] = (int64_t)(m->rows * m->H);
        d.out_expert_x_stride[1] = (int64_t)m->H;
        d.out_expert_rows = m->rows;
        d.dp_x = m->x;
        d.dp_x_stride = (int64_t)m->H;
        d.indices = m->idx;
        d.num_tokens = m->M;
        d.x_dtype = SYMM_DTYPE_BF16;
        memset(&c, 0, sizeof c);
        c.out_tokens = m->out;
        c.out_stride = (int64_t)m->H;
        c.out_rows = m->M;
        c.out_dtype = SYMM_DTYPE_BF16;
        c.indices = m->idx;
        c.weights = m->w;
        c.num_tokens = m->M;
        c.expert_y = m->y;
        c.expert_y_stride[0] = (int64_t)(m->rows * m->H);
        c.expert_y_stride[1] = (int64_t)m->H;
        c.expert_y_rows = m->rows;
        c.y_dtype = SYMM_DTYPE_F32;
        if ((st = symm_moe_dispatch(m->h, &d, SYMM_MOE_SEND_RECV, j->stream)) != SYMM_SUCCESS)
            return st;
        return symm_moe_combine(m->h, &c, SYMM_MOE_SEND_RECV, j->stream);
    }
    symm_moe_ht_dispatch_args_t d;
    memset(&d, 0, sizeof d);
    d.x = m->x;
    d.x_stride = (int64_t)m->H;
    d.x_dtype = SYMM_DTYPE_BF16;
    d.indices = m->idx;
    d.indices_dtype = SYMM_DTYPE_U32;
    d.weights = m->w;
    d.num_tokens = m->M;
    if ((st = symm_moe_ht_dispatch(m->h, &d, SYMM_MOE_SEND_RECV, j->stream)) != SYMM_SUCCESS)
        return st;
    return symm_moe_ht_combine(m->h, m->y, SYMM_DTYPE_BF16, (int64_t)m->H, m->r.capacity, m->out, SYMM_DTYPE_BF16,
                               (int64_t)m->H, m->M, SYMM_MOE_SEND_RECV, j->stream);
}

/* devloop: iterations of the 8-byte ring that take about `seconds`, from
 * two timed runs of 500 (the same count on every PE: the slowest's). */
static uint64_t calibrate_ring(job_t *j, double seconds) {
    double per = 0;
    for (int rep = 0; rep < 2; rep++) {
        double t0 = now_s();
        ring_kernel<<<1, 32, 0, j->stream>>>(j->ctx, j->b, j->a, j->sig, j->rma_base, 500);
        CUDA_CHECK(cudaStreamSynchronize(j->stream));
        j->rma_base += 500;
        per = (now_s() - t0) / 500.0;
    }
    double all[64];
    SYMM_CHECK(symm_host_allgather(&per, all, sizeof per));
    for (int p = 0; p < j->n; p++)
        if (all[p] > per)
            per = all[p];
    double it = seconds / (per > 1e-8 ? per : 1e-8);
    return (uint64_t)(it < 1e3 ? 1e3 : it > 1e10 ? 1e10 : it);
}

#define BUF ((size_t)8 << 20)

/* One iteration; `odd`: the victim's mismatched arguments. */
static symm_status_t step(job_t *j, int it, int odd) {
    static const size_t counts[] = {1000, 70001, 1 << 19};
    size_t c = counts[it % 3] / (size_t)j->n;
    const char *k = j->kind;
    symm_status_t st = SYMM_SUCCESS;
    if (strcmp(k, "barrier") == 0)
        return symm_barrier_all();
    if (strcmp(k, "local") == 0) {
        usleep(1000);
        return SYMM_SUCCESS;
    }
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
    } else if (strcmp(k, "dev_coll") == 0) {
        dev_coll_kernel<<<4, 256, 0, j->stream>>>(j->ctx, (float *)j->b, (const float *)j->a, c + (odd ? 100 : 0), j->n);
    } else if (strcmp(k, "rma") == 0) {
        rma_kernel<<<1, 256, 0, j->stream>>>(j->ctx, j->b, j->a, (size_t)64 << 10, j->sig, j->rma_base);
        j->rma_base += 200;
    } else if (strcmp(k, "devloop") == 0) {
        ring_kernel<<<1, 32, 0, j->stream>>>(j->ctx, j->b, j->a, j->sig, j->rma_base, j->loop_iters);
        j->rma_base += j->loop_iters;
    } else if (strncmp(k, "moe_", 4) == 0) {
        st = moe_step(j);
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
    if (j.native) {
        /* the driver's own descriptors and threads (per device: its context's
         * too) count as before: open the context of the GPU symm will pick */
        const char *lr = getenv("LOCAL_RANK");
        int ndev = 0;
        if (lr && cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0)
            (void)cudaSetDevice(atoi(lr) % ndev);
        (void)cudaFree(0);
    }
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
    if (j.native && (strcmp(j.kind, "moe_ll") == 0 || strcmp(j.kind, "moe_ht") == 0))
        CUDA_CHECK(moe_setup(&j, strcmp(j.kind, "moe_ll") == 0 ? SYMM_MOE_LOW_LATENCY : SYMM_MOE_HIGH_THROUGHPUT));
    if (j.native && strcmp(j.kind, "devloop") == 0)
        j.loop_iters = calibrate_ring(&j, limit < 30.0 ? limit : 30.0); /* one kernel, the whole run */
    SYMM_CHECK(symm_barrier_all());
    double t_ready = now_s();
    printf("PID %ld\n", (long)getpid());
    printf("READY %.6f\n", t_ready);
    int is_victim = j.me == j.victim, faulted = 0, it = 0;
    symm_status_t err = SYMM_SUCCESS;
    int quiet = strcmp(fault, "none") == 0;
    /* work that never waits for a peer stops on its own clock: agreeing
     * when to stop would be waiting */
    int alone = strcmp(j.kind, "local") == 0 || strcmp(j.kind, "devloop") == 0;
    for (;;) {
        int odd = 0;
        if (quiet && !alone && it % 16 == 0) {
            /* no fault: stop together, on PE 0's clock */
            int32_t stop = now_s() - t_ready >= limit;
            if ((err = symm_host_broadcast(&stop, sizeof stop, 0)) != SYMM_SUCCESS || stop)
                break;
        } else if ((!quiet || alone) && now_s() - t_ready >= limit) {
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
    if (j.moe.h && err == SYMM_SUCCESS)
        moe_free(&j); /* collective: only while every PE is still here */
    (void)symm_finalize();
    if (j.native)
        (void)cudaStreamDestroy(j.stream);
    printf("LEAKS %d %d\n", count_fds() - fds0, count_threads() - threads0);
    return 0;
}
