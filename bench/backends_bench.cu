/*
 * backends_bench.cu - the "backends" mode of symm-bench: the same device calls
 * and collectives on each backend of --backend, side by side in one table
 * (docs/backends.md). symm-bench runs the selected modes once per backend
 * (symm_init with SYMM_BACKEND set, then symm_finalize); this mode keeps its
 * numbers from each run and bench_backends_emit prints them as columns.
 *
 * Rows: block-scope put bandwidth to the next PE (to itself on one GPU),
 * put_signal round trip, dependent fetch-add, all-reduce (f32) latency and
 * bandwidth, and the stream barrier; every figure is checked (the put's
 * destination against the source's pattern, the ping-pong payloads, the
 * fetch-add counter, the all-reduce's sums) and reads "WRONG DATA" otherwise.
 * A call the backend cannot carry to that PE reads "n/a" with the reason.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/bench_backends.h"
#include "bench_modes.h"

#define BE_MAX_COLS 8
#define BE_ROWS 9

typedef struct be_col {
    char label[40];
    char cell[BE_ROWS][48];
} be_col_t;

static be_col_t g_cols[BE_MAX_COLS];
static int g_ncols;

static const char *const g_rows[BE_ROWS] = {
    "put_block 64 KiB (GB/s)",     "put_block 1 MiB (GB/s)",      "put_block 64 MiB (GB/s)",
    "put_signal round trip (us)",  "fetch_add round trip (us)",   "all_reduce f32 1 KiB (us)",
    "all_reduce f32 16 MiB (GB/s)", "barrier_all_on_stream (us)", "collective path",
};

typedef struct put_arg {
    const symm_ctx_t *ctx;
    void *dst;
    const void *src;
    size_t n;
    int blocks, pe;
} put_arg_t;

static void enqueue_put(void *a, cudaStream_t s) {
    put_arg_t *p = (put_arg_t *)a;
    if (bench_be_put(p->ctx, p->dst, p->src, p->n, p->blocks, 1, p->pe, s) != 0)
        bench_fatal(__FILE__, __LINE__, "bench_be_put", cudaGetErrorString(cudaGetLastError()));
}

typedef struct ar_arg {
    const void *send;
    void *recv;
    size_t count;
} ar_arg_t;

static void enqueue_ar(void *a, cudaStream_t s) {
    ar_arg_t *p = (ar_arg_t *)a;
    BENCH_SYMM(symm_all_reduce(p->send, p->recv, p->count, SYMM_DTYPE_F32, SYMM_OP_SUM, NULL, s));
}

static void enqueue_barrier(void *a, cudaStream_t s) {
    (void)a;
    BENCH_SYMM(symm_barrier_all_on_stream(s));
}

__global__ static void fill_f32(float *p, size_t n, float v) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = v;
}

__global__ static void count_not_f32(const float *p, size_t n, float v, unsigned long long *bad) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        if (p[i] != v)
            atomicAdd(bad, 1ull);
}

/* Why the kernels cannot reach `pe` for a call that needs `cap`, or NULL. */
static const char *no_path(const symm_ctx_t *h, uint32_t caps, uint32_t cap, int pe) {
    unsigned built = bench_be_kernels_backends();
    if (pe >= h->ldst_first && pe < h->ldst_first + h->ldst_count)
        return NULL;
    if (!(built & (1u << h->backend)))
        return "n/a (kernels built without this backend)";
    if (!(caps & cap))
        return "n/a (the backend cannot)";
    return NULL;
}

static int run_backends(bench_env_t *env) {
    if (g_ncols == BE_MAX_COLS)
        return 0;
    be_col_t *c = &g_cols[g_ncols++];
    snprintf(c->label, sizeof c->label, "%s", env->backend_label ? env->backend_label : symm_backend_name());
    for (int r = 0; r < BE_ROWS; r++)
        snprintf(c->cell[r], sizeof c->cell[r], "-");
    symm_ctx_t h;
    uint32_t caps = 0;
    BENCH_SYMM(symm_team_ctx_copy(symm_team_world(), &h));
    BENCH_SYMM(symm_backend_caps(&caps));
    const int me = env->me, n = env->npes, next = (me + 1) % n, prev = (me + n - 1) % n;
    const size_t big = (size_t)64 << 20;
    int sms = 0;
    BENCH_SYMM(symm_sm_share(&sms));
    const int blocks = sms < 32 ? sms : 32;
    const int repeats = env->quick ? 2 : 5, iters = env->quick ? 3 : 10;

    /* ---- put bandwidth ---- */
    char *src, *dst;
    BENCH_SYMM(symm_malloc(big, (void **)&src));
    BENCH_SYMM(symm_malloc(big, (void **)&dst));
    const size_t sizes[3] = {(size_t)64 << 10, (size_t)1 << 20, big};
    const char *why = no_path(&h, caps, SYMM_CAP_REMOTE_PUT, next);
    for (int k = 0; k < 3; k++) {
        if (why) {
            snprintf(c->cell[k], sizeof c->cell[k], "%s", why);
            continue;
        }
        bench_phase_begin("backends %s: put %zu bytes", c->label, sizes[k]);
        bench_fill_pattern(src, sizes[k], (uint32_t)(me + 1), 0, env->stream);
        bench_fill_pattern(dst, sizes[k], (uint32_t)(prev + 1), 1, env->stream);
        BENCH_CUDA(cudaStreamSynchronize(env->stream));
        bench_barrier();
        put_arg_t a = {env->ctx, dst, src, sizes[k], blocks, next};
        enqueue_put(&a, env->stream);
        BENCH_CUDA(cudaStreamSynchronize(env->stream));
        bench_barrier();
        int ok = bench_all_true(bench_count_mismatch(dst, sizes[k], (uint32_t)(prev + 1), env->stream) == 0);
        bench_barrier();
        double ms = bench_time_stream(enqueue_put, &a, env->stream, 1, iters, repeats);
        bench_barrier();
        if (!ok)
            snprintf(c->cell[k], sizeof c->cell[k], "WRONG DATA");
        else
            snprintf(c->cell[k], sizeof c->cell[k], "%.1f", (double)sizes[k] / (ms * 1e-3) / 1e9);
    }

    /* ---- put_signal round trip and fetch_add, PE 0 with PE 1 (itself on one GPU) ---- */
    uint64_t *words;
    unsigned long long *d, hres[2];
    BENCH_SYMM(symm_malloc(4 * sizeof(uint64_t), (void **)&words));
    BENCH_CUDA(cudaMemset(words, 0, 4 * sizeof(uint64_t)));
    BENCH_CUDA(cudaMalloc(&d, 2 * sizeof(unsigned long long)));
    const int partner = n >= 2 ? (me == 0 ? 1 : 0) : 0, active = me < 2;
    const int lat_iters = env->quick ? 200 : 2000, warm = 20;
    bench_barrier();
    why = no_path(&h, caps, SYMM_CAP_REMOTE_SIGNAL, n >= 2 ? 1 : 0);
    /* every PE asks, so that all agree on skipping */
    int can = bench_all_true(why == NULL);
    if (!can) {
        snprintf(c->cell[3], sizeof c->cell[3], "%s", why ? why : "n/a (on another PE)");
    } else {
        bench_phase_begin("backends %s: put_signal ping-pong", c->label);
        if (active && bench_be_ping(env->ctx, words, me == 0 ? 0 : 1, partner, warm, lat_iters, 1, d, d + 1,
                                    env->stream) != 0)
            bench_fatal(__FILE__, __LINE__, "bench_be_ping", cudaGetErrorString(cudaGetLastError()));
        BENCH_CUDA(cudaStreamSynchronize(env->stream));
        BENCH_CUDA(cudaMemcpy(hres, d, sizeof hres, cudaMemcpyDeviceToHost));
        int ok = bench_all_true(!active || hres[1] == 0);
        if (!ok)
            snprintf(c->cell[3], sizeof c->cell[3], "WRONG DATA");
        else
            snprintf(c->cell[3], sizeof c->cell[3], "%.2f", (double)hres[0] / lat_iters / 1e3);
    }
    bench_barrier();
    why = no_path(&h, caps, SYMM_CAP_REMOTE_AMO, n >= 2 ? 1 : 0);
    can = bench_all_true(why == NULL);
    if (!can) {
        snprintf(c->cell[4], sizeof c->cell[4], "%s", why ? why : "n/a (on another PE)");
    } else {
        bench_phase_begin("backends %s: fetch_add", c->label);
        if (me == 0 && bench_be_fetch_add(env->ctx, &words[3], n >= 2 ? 1 : 0, warm, lat_iters, d, d + 1,
                                          env->stream) != 0)
            bench_fatal(__FILE__, __LINE__, "bench_be_fetch_add", cudaGetErrorString(cudaGetLastError()));
        BENCH_CUDA(cudaStreamSynchronize(env->stream));
        BENCH_CUDA(cudaMemcpy(hres, d, sizeof hres, cudaMemcpyDeviceToHost));
        /* the word started at 0 and got one add per iteration: the last fetch saw all but one */
        int ok = bench_all_true(me != 0 || hres[1] == (unsigned long long)(warm + lat_iters - 1));
        if (!ok)
            snprintf(c->cell[4], sizeof c->cell[4], "WRONG DATA");
        else
            snprintf(c->cell[4], sizeof c->cell[4], "%.2f", (double)hres[0] / lat_iters / 1e3);
    }
    bench_barrier();

    /* ---- all-reduce and the stream barrier (host API: any backend) ---- */
    float *fs = (float *)src, *fr = (float *)dst;
    const size_t counts[2] = {256, (size_t)4 << 20};
    unsigned long long *bad = d;
    for (int k = 0; k < 2; k++) {
        bench_phase_begin("backends %s: all_reduce %zu floats", c->label, counts[k]);
        fill_f32<<<256, 256, 0, env->stream>>>(fs, counts[k], (float)(me + 1));
        BENCH_CUDA(cudaMemsetAsync(bad, 0, sizeof *bad, env->stream));
        ar_arg_t a = {fs, fr, counts[k]};
        enqueue_ar(&a, env->stream);
        count_not_f32<<<256, 256, 0, env->stream>>>(fr, counts[k], (float)(n * (n + 1) / 2), bad);
        BENCH_CUDA(cudaStreamSynchronize(env->stream));
        BENCH_CUDA(cudaMemcpy(hres, bad, sizeof *bad, cudaMemcpyDeviceToHost));
        int ok = bench_all_true(hres[0] == 0);
        if (k == 0)
            snprintf(c->cell[8], sizeof c->cell[8], "%s", symm_coll_last_algo());
        double ms = bench_time_stream(enqueue_ar, &a, env->stream, 2, iters * 10, repeats);
        if (!ok)
            snprintf(c->cell[5 + k], sizeof c->cell[5 + k], "WRONG DATA");
        else if (k == 0)
            snprintf(c->cell[5], sizeof c->cell[5], "%.2f", ms * 1e3);
        else /* algorithm bandwidth: bytes of one PE's vector per second */
            snprintf(c->cell[6], sizeof c->cell[6], "%.1f", (double)(counts[k] * 4) / (ms * 1e-3) / 1e9);
    }
    bench_phase_begin("backends %s: stream barrier", c->label);
    double ms = bench_time_stream(enqueue_barrier, NULL, env->stream, 2, iters * 10, repeats);
    snprintf(c->cell[7], sizeof c->cell[7], "%.2f", ms * 1e3);
    bench_phase_end();

    BENCH_CUDA(cudaFree(d));
    bench_barrier();
    BENCH_SYMM(symm_free(words));
    BENCH_SYMM(symm_free(dst));
    BENCH_SYMM(symm_free(src));
    return 0;
}

void bench_backends_failed(const char *label, const char *why) {
    if (g_ncols == BE_MAX_COLS)
        return;
    be_col_t *c = &g_cols[g_ncols++];
    snprintf(c->label, sizeof c->label, "%s", label);
    for (int r = 0; r < BE_ROWS; r++)
        snprintf(c->cell[r], sizeof c->cell[r], "init failed: %.30s", why);
}

void bench_backends_emit(bench_report_t *report, int npes) {
    if (g_ncols == 0)
        return;
    const char *headers[1 + BE_MAX_COLS];
    headers[0] = "";
    for (int k = 0; k < g_ncols; k++)
        headers[1 + k] = g_cols[k].label;
    bench_table_t *t = bench_table_new(
        bench_fmt("the same calls on each backend, %d PE%s (put and ping to %s)", npes, npes > 1 ? "s" : "",
                  npes > 1 ? "the next PE / PE 1" : "itself"),
        1 + g_ncols, headers);
    for (int r = 0; r < BE_ROWS; r++) {
        const char *cells[1 + BE_MAX_COLS];
        cells[0] = g_rows[r];
        for (int k = 0; k < g_ncols; k++)
            cells[1 + k] = g_cols[k].cell[r];
        bench_table_row(t, cells);
    }
    bench_table_note(t, "\":remote\": SYMM_DEBUG_FORCE_REMOTE=1, no peer reached by load/store: every call takes the "
                        "library's own path (NVSHMEM's device calls, NCCL's GIN and collectives)");
    bench_table_emit(report, t);
}

BENCH_MODE(backends, 90, "the same device calls and collectives on each backend of --backend, side by side",
           run_backends)
