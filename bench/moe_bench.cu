/*
 * moe_bench.cu - the "moe" mode of symm-bench: MoE dispatch and combine
 * (symm_moe.h) side by side with NCCL's all-to-all (grouped ncclSend /
 * ncclRecv, what torch.distributed.all_to_all_single runs) moving the same
 * bytes, the SMs each run used, and the issue's bars as pass/miss lines.
 *
 *   low latency      pplx-kernels' shapes: 64 experts top-6 hidden 2048, and
 *                    256 experts top-8 hidden 7168, 1..128 tokens per PE
 *                    (dp_size 1), fp8 e4m3 dispatch with float32 scales per
 *                    128 elements, bf16 combine: microseconds per dispatch
 *                    and per combine, timed inside a CUDA graph.
 *   high throughput  DeepEP's shape: 4096 tokens per PE, hidden 7168, top-8,
 *                    256 experts, dispatch fp8 (with scales) and bf16,
 *                    combine bf16, with a budget of 24 SMs and with every SM:
 *                    GB/s as DeepEP's test counts them (rows this PE
 *                    receives x row bytes over the time of the call).
 *
 * Timing: `SAMPLES` dispatch + combine pairs captured into one CUDA graph,
 * each behind an on-stream barrier over all PEs, with events around each call
 * inside the graph; the graph is replayed, and the per-call medians of the
 * slowest PE are shown. Where a graph cannot be captured the same sequence
 * runs on the stream (the table says which). The low-latency rows are also
 * timed back to back (calls replayed from a graph with nothing between them),
 * the way NCCL's all-to-all is timed beside them (bench_time_graph); NCCL is
 * timed per call too, and every bar is decided on both. The DeepEP column repeats what its own
 * intranode test measured on 4x H100 (DESIGN.md); bench/moe/deepep_bench.py
 * runs DeepEP itself where it is installed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "bench_modes.h"
#include "symm/symm_moe.h"

#define SAMPLES 20
#define WARMUP 3

/* DeepEP's normal kernels on 4x H100, 24 SMs (DESIGN.md, 2026-11-28). */
#define DEEPEP_DISPATCH_FP8 254.0
#define DEEPEP_DISPATCH_BF16 260.0
#define DEEPEP_COMBINE 354.0

/* Do two PEs of this run share a GPU (same PCI bus id)? */
static int shares_gpu(const bench_env_t *env) {
    char mine[32] = {0};
    std::vector<char> all((size_t)env->npes * sizeof mine);
    BENCH_CUDA(cudaDeviceGetPCIBusId(mine, (int)sizeof mine - 1, env->device));
    BENCH_SYMM(symm_host_allgather(mine, all.data(), sizeof mine));
    for (int p = 0; p < env->npes; p++)
        for (int q = p + 1; q < env->npes; q++)
            if (!strncmp(&all[(size_t)p * sizeof mine], &all[(size_t)q * sizeof mine], sizeof mine))
                return 1;
    return 0;
}

/* The largest of every PE's x. */
static double max_over_pes(int npes, double x) {
    std::vector<double> all((size_t)npes);
    double m = x;
    BENCH_SYMM(symm_host_allgather(&x, all.data(), sizeof x));
    for (double v : all)
        m = v > m ? v : m;
    return m;
}

/* Top-k distinct experts per token, different on each PE and call seed. */
static std::vector<uint32_t> route(uint32_t m, uint32_t E, uint32_t K, uint64_t seed) {
    std::vector<uint32_t> idx((size_t)m * K), perm(E);
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (uint32_t t = 0; t < m; t++) {
        for (uint32_t e = 0; e < E; e++)
            perm[e] = e;
        for (uint32_t k = 0; k < K; k++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            uint32_t j = k + (uint32_t)(s % (E - k));
            uint32_t tmp = perm[k];
            perm[k] = perm[j];
            perm[j] = tmp;
            idx[(size_t)t * K + k] = perm[k];
        }
    }
    return idx;
}

template <typename T> static T *dev(size_t n) {
    T *p = NULL;
    BENCH_CUDA(cudaMalloc((void **)&p, (n ? n : 1) * sizeof(T)));
    BENCH_CUDA(cudaMemset(p, 0, (n ? n : 1) * sizeof(T)));
    return p;
}

/* A handle of `mode` for fp8 tokens with scales (esz 1) or bf16 (esz 2), dp_size 1. */
static symm_moe_t *make_handle(int mode, uint32_t E, uint32_t K, uint32_t H, uint32_t m, int esz) {
    symm_moe_config_t cfg;
    symm_moe_t *h = NULL;
    memset(&cfg, 0, sizeof cfg);
    cfg.mode = mode;
    cfg.max_num_tokens = m;
    cfg.num_experts = E;
    cfg.experts_per_token = K;
    cfg.hidden_dim = H;
    cfg.hidden_dim_bytes = (size_t)H * esz;
    cfg.hidden_dim_scale_bytes = esz == 1 ? (size_t)(H + 127) / 128 * 4 : 0;
    cfg.dp_size = 1;
    BENCH_SYMM(symm_moe_create(&cfg, NULL, &h));
    return h;
}

/* ---- NCCL all-to-all of `per_peer` bytes to every PE ---------------------------------- */

typedef struct a2a_arg {
    bench_env_t *env;
    char *send, *recv;
    size_t per_peer;
} a2a_arg_t;

static void nccl_a2a(void *arg, cudaStream_t s) {
#if SYMM_BENCH_HAVE_NCCL
    a2a_arg_t *a = (a2a_arg_t *)arg;
    ncclResult_t r = ncclGroupStart();
    for (int p = 0; p < a->env->npes && r == ncclSuccess; p++) {
        r = ncclSend(a->send + (size_t)p * a->per_peer, a->per_peer, ncclChar, p, a->env->nccl, s);
        if (r == ncclSuccess)
            r = ncclRecv(a->recv + (size_t)p * a->per_peer, a->per_peer, ncclChar, p, a->env->nccl, s);
    }
    if (r == ncclSuccess)
        r = ncclGroupEnd();
    if (r != ncclSuccess)
        bench_fatal(__FILE__, __LINE__, "ncclSend/ncclRecv", ncclGetErrorString(r));
#else
    (void)arg;
    (void)s;
#endif
}

/* Microseconds per NCCL all-to-all of per_peer bytes (graph-timed), or -1
 * when NCCL cannot run. */
static double nccl_us(bench_env_t *env, size_t per_peer, int quick) {
    a2a_arg_t a;
    double ms;
    if (!env->nccl_ok || per_peer == 0)
        return -1;
    a.env = env;
    a.per_peer = per_peer;
    BENCH_CUDA(cudaMalloc((void **)&a.send, per_peer * (size_t)env->npes));
    BENCH_CUDA(cudaMalloc((void **)&a.recv, per_peer * (size_t)env->npes));
    bench_barrier();
    ms = bench_time_graph(nccl_a2a, &a, env->stream, 5, 2, quick ? 2 : 4, quick ? 3 : 7);
    BENCH_CUDA(cudaFree(a.send));
    BENCH_CUDA(cudaFree(a.recv));
    return max_over_pes(env->npes, ms * 1e3);
}

/* ---- timing of dispatch + combine pairs ------------------------------------------------ */

typedef void (*moe_step_fn)(void *arg, cudaStream_t s, int half); /* half 0: dispatch, 1: combine */

/* Enqueue `samples` pairs, each behind a stream barrier, with events. While
 * capturing, the records must be external: a plain record in a capture only
 * orders streams and leaves the event without a time. */
static void enqueue_pairs(bench_env_t *env, moe_step_fn fn, void *arg, int samples, cudaEvent_t *ev, int captured) {
    unsigned int fl = captured ? cudaEventRecordExternal : cudaEventRecordDefault;
    for (int i = 0; i < samples; i++) {
        BENCH_SYMM(symm_barrier_all_on_stream(env->stream));
        BENCH_CUDA(cudaEventRecordWithFlags(ev[3 * i], env->stream, fl));
        fn(arg, env->stream, 0);
        BENCH_CUDA(cudaEventRecordWithFlags(ev[3 * i + 1], env->stream, fl));
        fn(arg, env->stream, 1);
        BENCH_CUDA(cudaEventRecordWithFlags(ev[3 * i + 2], env->stream, fl));
    }
}

/* Medians (us, the slowest PE's) of the dispatch and combine of `samples`
 * pairs replayed from a CUDA graph; *graphed = 0 when the pairs ran on the
 * stream instead (every PE decides alike). */
static void time_pairs(bench_env_t *env, moe_step_fn fn, void *arg, int samples, double *d_us, double *c_us,
                       int *graphed) {
    std::vector<cudaEvent_t> ev((size_t)samples * 3);
    std::vector<double> d((size_t)samples), c((size_t)samples);
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    int ok;
    for (auto &e : ev)
        BENCH_CUDA(cudaEventCreate(&e));
    for (int w = 0; w < WARMUP; w++) {
        fn(arg, env->stream, 0);
        fn(arg, env->stream, 1);
    }
    BENCH_CUDA(cudaStreamSynchronize(env->stream));
    ok = cudaStreamBeginCapture(env->stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
    if (ok) {
        enqueue_pairs(env, fn, arg, samples, ev.data(), 1);
        ok = cudaStreamEndCapture(env->stream, &graph) == cudaSuccess &&
             cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
    }
    (void)cudaGetLastError();
    *graphed = bench_all_true(ok);
    bench_barrier();
    if (*graphed) {
        BENCH_CUDA(cudaGraphLaunch(exec, env->stream)); /* warm */
        BENCH_CUDA(cudaStreamSynchronize(env->stream));
        bench_barrier();
        BENCH_CUDA(cudaGraphLaunch(exec, env->stream));
    } else {
        enqueue_pairs(env, fn, arg, samples, ev.data(), 0);
    }
    BENCH_CUDA(cudaStreamSynchronize(env->stream));
    for (int i = 0; i < samples; i++) {
        float a, b;
        BENCH_CUDA(cudaEventElapsedTime(&a, ev[3 * i], ev[3 * i + 1]));
        BENCH_CUDA(cudaEventElapsedTime(&b, ev[3 * i + 1], ev[3 * i + 2]));
        d[(size_t)i] = a * 1e3;
        c[(size_t)i] = b * 1e3;
    }
    if (exec)
        BENCH_CUDA(cudaGraphExecDestroy(exec));
    if (graph)
        BENCH_CUDA(cudaGraphDestroy(graph));
    for (auto &e : ev)
        BENCH_CUDA(cudaEventDestroy(e));
    *d_us = max_over_pes(env->npes, bench_median(d.data(), samples));
    *c_us = max_over_pes(env->npes, bench_median(c.data(), samples));
}

/* The most blocks a kernel of h ran with since the last look, over all PEs. */
static int sms_used(bench_env_t *env, symm_moe_t *h) {
    int b = 0;
    BENCH_SYMM(symm_moe_launched_blocks(h, (symm_stream_t)env->stream, &b));
    return (int)max_over_pes(env->npes, (double)b);
}

/* ---- low latency ------------------------------------------------------------------------- */

typedef struct ll_case {
    symm_moe_t *h;
    symm_moe_dispatch_args_t d;
    symm_moe_combine_args_t c;
} ll_case_t;

static void ll_step(void *arg, cudaStream_t s, int half) {
    ll_case_t *l = (ll_case_t *)arg;
    if (half == 0)
        BENCH_SYMM(symm_moe_dispatch(l->h, &l->d, SYMM_MOE_SEND_RECV, (symm_stream_t)s));
    else
        BENCH_SYMM(symm_moe_combine(l->h, &l->c, SYMM_MOE_SEND_RECV, (symm_stream_t)s));
}

/* ---- the two timings of a low-latency call ----------------------------------------------
 * Per call: each dispatch + combine pair behind an on-stream barrier, events around each
 * call (time_pairs): every PE starts together, but each call pays the barrier's end, the
 * event nodes and a launch that nothing overlaps. Back to back: the calls replayed from one
 * graph with nothing between them (bench_time_graph), as a decode step's stream runs them
 * and as the NCCL columns are timed. Both are shown, for symm and NCCL alike. */

static void ll_pair(void *arg, cudaStream_t s) {
    ll_step(arg, s, 0);
    ll_step(arg, s, 1);
}

static void ll_dispatch_only(void *arg, cudaStream_t s) {
    ll_step(arg, s, 0);
}

/* Microseconds per dispatch + combine pair, and per dispatch alone (a dispatch may follow
 * a dispatch whose combine is skipped: symm_moe.h), replayed back to back from a graph, the
 * slowest PE's. A combine cannot repeat alone: its figure is the pair's less the dispatch's. */
static void ll_back_to_back(bench_env_t *env, ll_case_t *l, int quick, double *pair_us, double *d_us) {
    double ms = bench_time_graph(ll_pair, l, env->stream, 8, 2, quick ? 3 : 5, quick ? 3 : 7);
    *pair_us = max_over_pes(env->npes, ms * 1e3);
    ms = bench_time_graph(ll_dispatch_only, l, env->stream, 8, 2, quick ? 3 : 5, quick ? 3 : 7);
    *d_us = max_over_pes(env->npes, ms * 1e3);
}

/* NCCL's all-to-alls of a dispatch's and a combine's bytes as a "pair", for
 * time_pairs: per call behind the same barrier as symm's calls. */
typedef struct nccl_pair {
    a2a_arg_t d, c;
} nccl_pair_t;

static void nccl_pair_step(void *arg, cudaStream_t s, int half) {
    nccl_pair_t *p = (nccl_pair_t *)arg;
    nccl_a2a(half == 0 ? &p->d : &p->c, s);
}

/* Per-call medians (us) of NCCL's all-to-alls of d and c bytes per PE, each
 * pair behind a barrier, as time_pairs times symm; -1 without NCCL. */
static void nccl_per_call(bench_env_t *env, size_t d_bytes, size_t c_bytes, int quick, double *d_us,
                          double *c_us) {
    nccl_pair_t p;
    int graphed;
    *d_us = *c_us = -1;
    if (!env->nccl_ok || d_bytes == 0 || c_bytes == 0)
        return;
    p.d.env = p.c.env = env;
    p.d.per_peer = (d_bytes + (size_t)env->npes - 1) / (size_t)env->npes;
    p.c.per_peer = (c_bytes + (size_t)env->npes - 1) / (size_t)env->npes;
    BENCH_CUDA(cudaMalloc((void **)&p.d.send, p.d.per_peer * (size_t)env->npes));
    BENCH_CUDA(cudaMalloc((void **)&p.d.recv, p.d.per_peer * (size_t)env->npes));
    BENCH_CUDA(cudaMalloc((void **)&p.c.send, p.c.per_peer * (size_t)env->npes));
    BENCH_CUDA(cudaMalloc((void **)&p.c.recv, p.c.per_peer * (size_t)env->npes));
    bench_barrier();
    time_pairs(env, nccl_pair_step, &p, quick ? 5 : SAMPLES, d_us, c_us, &graphed);
    BENCH_CUDA(cudaFree(p.d.send));
    BENCH_CUDA(cudaFree(p.d.recv));
    BENCH_CUDA(cudaFree(p.c.send));
    BENCH_CUDA(cudaFree(p.c.recv));
}

/* One row's results, for the bars: per call behind a barrier (d_us, c_us; NCCL's pd, pc)
 * and back to back (bd, bc = pair - bd; NCCL's nd, nc). -1: not measured. */
typedef struct ll_result {
    uint32_t E, m;
    double d_us, c_us, pd, pc;
    double bd, bc, nd, nc;
} ll_result_t;

/* How the rows of a low-latency call of m tokens per PE (dp_size 1) on handle h travel
 * (symm_moe.h, SYMM_MOE_PACKETS): "packets" or "plain", for dispatch (fp8
 * rows and their scales) and combine (bf16 rows, K per token, or one per token and PE:
 * "partial", SYMM_MOE_LL_COMBINE). */
static const char *ll_forms(const symm_moe_t *h, uint32_t K, uint32_t H, uint32_t m) {
    const char *v = getenv("SYMM_MOE_PACKETS");
    const int on = v && !strcmp(v, "1"), off = v && !strcmp(v, "0");
    const uint64_t drow = (uint64_t)H + ((((uint64_t)H + 127) / 128 * 4 + 15) & ~(uint64_t)15);
    const int d = on || (!off && (uint64_t)m * drow <= SYMM_MOE_PACKET_BYTES);
    const int c = on || (!off && (uint64_t)m * K * H * 2 <= SYMM_MOE_PACKET_BYTES);
    int part = 0;
    BENCH_SYMM(symm_moe_ll_partial(h, &part));
    return bench_fmt("%s / %s%s", d ? "packets" : "plain", c ? "packets" : "plain", part ? " partial" : "");
}

/* A low-latency case: a handle for m tokens/PE and its buffers, fp8 dispatch
 * with scales, bf16 combine, uniform random routing. */
typedef struct ll_bufs {
    ll_case_t l;
    size_t disp_bytes, comb_bytes;
    uint32_t *d_idx;
    unsigned char *x, *ox;
    float *xs, *os, *w;
    int32_t *num;
    uint16_t *y, *out;
} ll_bufs_t;

static void ll_open(bench_env_t *env, ll_bufs_t *b, uint32_t E, uint32_t K, uint32_t H, uint32_t m) {
    const int n = env->npes;
    const uint32_t cols = (H + 127) / 128;
    ll_case_t &l = b->l;
    b->disp_bytes = (size_t)m * K * (H + cols * 4);
    b->comb_bytes = (size_t)m * K * H * 2;
    l.h = make_handle(SYMM_MOE_LOW_LATENCY, E, K, H, m, 1);
    const uint32_t L = (uint32_t)symm_moe_local_experts(l.h), rows = m * (uint32_t)n;
    std::vector<uint32_t> idx = route(m, E, K, 1000 + (uint64_t)env->me * 7 + m);
    b->d_idx = dev<uint32_t>(idx.size());
    BENCH_CUDA(cudaMemcpy(b->d_idx, idx.data(), idx.size() * 4, cudaMemcpyHostToDevice));
    b->x = dev<unsigned char>((size_t)m * H);
    b->ox = dev<unsigned char>((size_t)L * rows * H);
    b->xs = dev<float>((size_t)m * cols);
    b->os = dev<float>((size_t)L * rows * cols);
    b->w = dev<float>((size_t)m * K);
    b->num = dev<int32_t>(L);
    b->y = dev<uint16_t>((size_t)L * rows * H);
    b->out = dev<uint16_t>((size_t)m * H);
    bench_fill_pattern(b->x, (size_t)m * H, 7u + (uint32_t)env->me, 0, env->stream);
    memset(&l.d, 0, sizeof l.d);
    l.d.out_expert_num_tokens = b->num;
    l.d.out_expert_x = b->ox;
    l.d.out_expert_x_stride[0] = (int64_t)rows * H;
    l.d.out_expert_x_stride[1] = H;
    l.d.out_expert_rows = rows;
    l.d.out_expert_x_scale = b->os;
    l.d.out_expert_x_scale_stride[0] = (int64_t)rows * cols;
    l.d.out_expert_x_scale_stride[1] = cols;
    l.d.out_expert_x_scale_stride[2] = 1;
    l.d.dp_x = b->x;
    l.d.dp_x_stride = H;
    l.d.dp_x_scale = b->xs;
    l.d.dp_x_scale_stride[0] = cols;
    l.d.dp_x_scale_stride[1] = 1;
    l.d.indices = b->d_idx;
    l.d.num_tokens = m;
    l.d.x_dtype = SYMM_DTYPE_FP8_E4M3;
    memset(&l.c, 0, sizeof l.c);
    l.c.out_tokens = b->out;
    l.c.out_stride = H;
    l.c.out_rows = m;
    l.c.out_dtype = SYMM_DTYPE_BF16;
    l.c.indices = b->d_idx;
    l.c.weights = b->w;
    l.c.num_tokens = m;
    l.c.expert_y = b->y;
    l.c.expert_y_stride[0] = (int64_t)rows * H;
    l.c.expert_y_stride[1] = H;
    l.c.expert_y_rows = rows;
    l.c.y_dtype = SYMM_DTYPE_BF16;
}

static void ll_close(ll_bufs_t *b) {
    BENCH_SYMM(symm_moe_destroy(b->l.h));
    cudaFree(b->d_idx); cudaFree(b->x); cudaFree(b->ox); cudaFree(b->xs); cudaFree(b->os); cudaFree(b->w);
    cudaFree(b->num); cudaFree(b->y); cudaFree(b->out);
}

static ll_result_t ll_row(bench_env_t *env, bench_table_t *t, uint32_t E, uint32_t K, uint32_t H, uint32_t m,
                          int quick) {
    const int n = env->npes;
    ll_bufs_t b;
    ll_result_t res;
    double pair;
    int graphed, sms;
    bench_phase_begin("moe low latency E%u K%u H%u tokens %u", E, K, H, m);
    ll_open(env, &b, E, K, H, m);
    sms_used(env, b.l.h); /* start counting */
    time_pairs(env, ll_step, &b.l, quick ? 5 : SAMPLES, &res.d_us, &res.c_us, &graphed);
    ll_back_to_back(env, &b.l, quick, &pair, &res.bd);
    res.bc = pair - res.bd;
    sms = sms_used(env, b.l.h);
    BENCH_SYMM(symm_moe_check(b.l.h, env->stream));
    res.nd = nccl_us(env, (b.disp_bytes + (size_t)n - 1) / (size_t)n, quick);
    res.nc = nccl_us(env, (b.comb_bytes + (size_t)n - 1) / (size_t)n, quick);
    nccl_per_call(env, b.disp_bytes, b.comb_bytes, quick, &res.pd, &res.pc);
    res.E = E;
    res.m = m;
    {
        const char *cells[] = {bench_fmt("%u", E), bench_fmt("%u", K), bench_fmt("%u", H), bench_fmt("%u", m),
                               bench_fmt("%d", sms), ll_forms(b.l.h, K, H, m), bench_fmt_bytes(b.disp_bytes),
                               bench_fmt("%.1f / %.1f", res.bd, res.bc),
                               res.nd > 0 ? bench_fmt("%.1f / %.1f", res.nd, res.nc) : "n/a",
                               res.nd > 0 ? bench_fmt("%s / %s", bench_fmt_ratio(res.nd, res.bd),
                                                      bench_fmt_ratio(res.nc, res.bc))
                                          : "n/a",
                               bench_fmt("%.1f / %.1f", res.d_us, res.c_us),
                               res.pd > 0 ? bench_fmt("%.1f / %.1f", res.pd, res.pc) : "n/a",
                               res.pd > 0 ? bench_fmt("%s / %s", bench_fmt_ratio(res.pd, res.d_us),
                                                      bench_fmt_ratio(res.pc, res.c_us))
                                          : "n/a",
                               graphed ? "graph" : "stream"};
        bench_table_row(t, cells);
    }
    ll_close(&b);
    bench_phase_end();
    return res;
}

/* ---- high throughput ------------------------------------------------------------------- */

typedef struct ht_case {
    symm_moe_t *h;
    symm_moe_ht_dispatch_args_t d;
    void *y, *out;
    uint32_t H, m;
    size_t cap;
    const symm_moe_ht_weights_t *w; /* combine's side channel (DeepEP's combined_topk_weights), or NULL */
} ht_case_t;

static void ht_step(void *arg, cudaStream_t s, int half) {
    ht_case_t *c = (ht_case_t *)arg;
    if (half == 0)
        BENCH_SYMM(symm_moe_ht_dispatch(c->h, &c->d, SYMM_MOE_SEND_RECV, (symm_stream_t)s));
    else
        BENCH_SYMM(symm_moe_ht_combine_weights(c->h, c->y, SYMM_DTYPE_BF16, c->H, c->cap, c->out, SYMM_DTYPE_BF16,
                                               c->H, c->m, c->w, SYMM_MOE_SEND_RECV, (symm_stream_t)s));
}

typedef struct ht_result {
    int budget, esz;
    double d_gbs, c_gbs;
} ht_result_t;

static ht_result_t ht_row(bench_env_t *env, bench_table_t *t, uint32_t E, uint32_t K, uint32_t H, uint32_t m,
                          int esz, int budget, int quick) {
    const int n = env->npes;
    const uint32_t cols = esz == 1 ? (H + 127) / 128 : 0;
    symm_moe_ht_recv_t r;
    ht_case_t c;
    ht_result_t res;
    double d_us, c_us, cw_us, nd, nc;
    symm_moe_ht_weights_t wt;
    int32_t got = 0;
    int graphed, sms;
    bench_phase_begin("moe high throughput %s budget %d tokens %u", esz == 1 ? "fp8" : "bf16", budget, m);
    c.h = make_handle(SYMM_MOE_HIGH_THROUGHPUT, E, K, H, m, esz);
    BENCH_SYMM(symm_moe_set_num_sms(c.h, budget));
    BENCH_SYMM(symm_moe_ht_recv_buffers(c.h, &r));
    const uint32_t L = (uint32_t)symm_moe_local_experts(c.h);
    std::vector<uint32_t> idx = route(m, E, K, 5000 + (uint64_t)env->me * 11);
    size_t returned = 0; /* rows the PEs send back to me in combine */
    for (uint32_t tok = 0; tok < m; tok++) {
        uint64_t mask = 0;
        for (uint32_t k = 0; k < K; k++)
            mask |= 1ull << (idx[(size_t)tok * K + k] / L);
        returned += (size_t)__builtin_popcountll(mask);
    }
    uint32_t *d_idx = dev<uint32_t>(idx.size());
    BENCH_CUDA(cudaMemcpy(d_idx, idx.data(), idx.size() * 4, cudaMemcpyHostToDevice));
    unsigned char *x = dev<unsigned char>((size_t)m * H * esz);
    float *xs = dev<float>((size_t)m * (cols ? cols : 1)), *w = dev<float>((size_t)m * K);
    bench_fill_pattern(x, (size_t)m * H * esz, 11u + (uint32_t)env->me, 0, env->stream);
    /* y in the heap, as a pull combine needs to read it in place (the push schedules read it locally either way) */
    BENCH_SYMM(symm_malloc(r.capacity * H * 2, &c.y));
    c.out = dev<uint16_t>((size_t)m * H);
    c.H = H;
    c.m = m;
    c.cap = r.capacity;
    memset(&c.d, 0, sizeof c.d);
    c.d.x = x;
    c.d.x_stride = H;
    c.d.x_dtype = esz == 1 ? SYMM_DTYPE_FP8_E4M3 : SYMM_DTYPE_BF16;
    c.d.x_scale = cols ? xs : NULL;
    c.d.x_scale_stride[0] = cols;
    c.d.x_scale_stride[1] = 1;
    c.d.indices = d_idx;
    c.d.indices_dtype = SYMM_DTYPE_U32;
    c.d.weights = w;
    c.d.num_tokens = m;
    c.w = NULL;
    sms_used(env, c.h);
    time_pairs(env, ht_step, &c, quick ? 3 : SAMPLES / 2, &d_us, &c_us, &graphed);
    sms = sms_used(env, c.h);
    /* again with the received top-k weights returned and summed per token (what DeepEP's combine takes) */
    memset(&wt, 0, sizeof wt);
    wt.w = r.weights;
    wt.w_stride = K;
    wt.w_rows = r.capacity;
    wt.out_w = dev<float>((size_t)m * K);
    wt.out_w_stride = K;
    wt.out_w_rows = m;
    wt.cols = K;
    c.w = &wt;
    {
        double d2;
        int g2;
        time_pairs(env, ht_step, &c, quick ? 3 : SAMPLES / 2, &d2, &cw_us, &g2);
        graphed = graphed && g2;
    }
    BENCH_SYMM(symm_moe_check(c.h, env->stream));
    BENCH_CUDA(cudaMemcpy(&got, r.num_recv, 4, cudaMemcpyDeviceToHost));
    size_t disp_bytes = (size_t)got * ((size_t)H * esz + cols * 4), comb_bytes = returned * (size_t)H * 2;
    nd = nccl_us(env, (disp_bytes + (size_t)n - 1) / (size_t)n, quick);
    nc = nccl_us(env, (comb_bytes + (size_t)n - 1) / (size_t)n, quick);
    res.budget = budget;
    res.esz = esz;
    res.d_gbs = (double)disp_bytes / d_us * 1e-3;
    res.c_gbs = (double)comb_bytes / c_us * 1e-3;
    {
        const double dd = esz == 1 ? DEEPEP_DISPATCH_FP8 : DEEPEP_DISPATCH_BF16;
        const char *cells[] = {budget ? bench_fmt("%d", budget) : "all", bench_fmt("%d", sms),
                               esz == 1 ? "fp8 + scales" : "bf16", bench_fmt("%d", got),
                               bench_fmt("%.0f", d_us), bench_fmt("%.1f", res.d_gbs),
                               bench_fmt("%.0f", c_us), bench_fmt("%.1f", res.c_gbs), bench_fmt("%.0f", cw_us),
                               nd > 0 ? bench_fmt("%.1f", (double)disp_bytes / nd * 1e-3) : "n/a",
                               nc > 0 ? bench_fmt("%.1f", (double)comb_bytes / nc * 1e-3) : "n/a",
                               bench_fmt("%.0f / %.0f", dd, DEEPEP_COMBINE),
                               bench_fmt("%.2fx / %.2fx", res.d_gbs / dd, res.c_gbs / DEEPEP_COMBINE),
                               graphed ? "graph" : "stream"};
        bench_table_row(t, cells);
    }
    BENCH_SYMM(symm_moe_destroy(c.h));
    cudaFree(d_idx); cudaFree(x); cudaFree(xs); cudaFree(w); cudaFree(c.out); cudaFree(wt.out_w);
    BENCH_SYMM(symm_free(c.y));
    bench_phase_end();
    return res;
}

/* ---- bars ------------------------------------------------------------------------------------ */

static void bar(bench_report_t *rep, const char *what, int pass, const char *got) {
    bench_report_text(rep, "- bar: %s: **%s** (%s)", what, pass ? "pass" : "MISS", got);
}

/* The low-latency bars, each decided twice: on the back-to-back figures (symm's calls timed as
 * NCCL's all-to-alls beside them are) and on the per-call figures (each call behind a barrier,
 * NCCL's the same way). */
static void ll_bars_by(bench_env_t *env, const std::vector<ll_result_t> &rs, int per_call) {
    const char *how = per_call ? "per call behind a barrier" : "back to back";
    for (uint32_t E : {256u, 64u}) {
        double worst = 1e30;
        char worst_at[64] = "";
        int have = 0;
        for (const ll_result_t &r : rs) {
            const double d = per_call ? r.d_us : r.bd, c = per_call ? r.c_us : r.bc;
            const double nd = per_call ? r.pd : r.nd, nc = per_call ? r.pc : r.nc;
            if (r.E != E)
                continue;
            have = 1;
            if (r.m == 1) {
                bar(env->report, bench_fmt("low latency E%u, 1 token/PE: dispatch <= 10 us, %s", E, how), d <= 10,
                    bench_fmt("%.1f us", d));
                bar(env->report, bench_fmt("low latency E%u, 1 token/PE: combine <= 10 us, %s", E, how), c <= 10,
                    bench_fmt("%.1f us", c));
            }
            if (r.m == 128) {
                bar(env->report, bench_fmt("low latency E%u, 128 tokens/PE: dispatch <= 30 us, %s", E, how),
                    d <= 30, bench_fmt("%.1f us", d));
                bar(env->report, bench_fmt("low latency E%u, 128 tokens/PE: combine <= 50 us, %s", E, how),
                    c <= 50, bench_fmt("%.1f us", c));
            }
            if (nd > 0 && nd / d < worst) {
                worst = nd / d;
                snprintf(worst_at, sizeof worst_at, "dispatch at %u tokens", r.m);
            }
            if (nc > 0 && nc / c < worst) {
                worst = nc / c;
                snprintf(worst_at, sizeof worst_at, "combine at %u tokens", r.m);
            }
        }
        if (!have)
            continue;
        if (worst < 1e29)
            bar(env->report,
                bench_fmt("low latency E%u: >= 1.5x NCCL's all-to-all of the same bytes at every row, %s", E, how),
                worst >= 1.5, bench_fmt("worst %.2fx, %s", worst, worst_at));
        else
            bench_report_text(env->report, "- bar: low latency E%u: >= 1.5x NCCL, %s: n/a (NCCL did not run)", E, how);
    }
}

static void ll_bars(bench_env_t *env, const std::vector<ll_result_t> &rs) {
    ll_bars_by(env, rs, 0);
    ll_bars_by(env, rs, 1);
}

static void ht_bars(bench_env_t *env, const std::vector<ht_result_t> &rs) {
    double all_d16 = 0, all_c = 0, b_d8 = 0, b_d16 = 0, b_c = 0;
    for (const ht_result_t &r : rs) {
        if (r.budget == 24) {
            if (r.esz == 1)
                b_d8 = r.d_gbs;
            else
                b_d16 = r.d_gbs;
            b_c = b_c > r.c_gbs ? b_c : r.c_gbs;
        } else if (r.budget == 0) {
            if (r.esz == 2)
                all_d16 = r.d_gbs;
            all_c = all_c > r.c_gbs ? all_c : r.c_gbs;
        }
    }
    if (b_d8 > 0)
        bar(env->report, bench_fmt("high throughput, 24 SMs: dispatch fp8 >= 1.2x DeepEP (%.0f GB/s)",
                                   1.2 * DEEPEP_DISPATCH_FP8), b_d8 >= 1.2 * DEEPEP_DISPATCH_FP8,
            bench_fmt("%.1f GB/s", b_d8));
    if (b_d16 > 0)
        bar(env->report, bench_fmt("high throughput, 24 SMs: dispatch bf16 >= 1.2x DeepEP (%.0f GB/s)",
                                   1.2 * DEEPEP_DISPATCH_BF16), b_d16 >= 1.2 * DEEPEP_DISPATCH_BF16,
            bench_fmt("%.1f GB/s", b_d16));
    if (b_c > 0)
        bar(env->report, bench_fmt("high throughput, 24 SMs: combine >= 1.1x DeepEP (%.0f GB/s)",
                                   1.1 * DEEPEP_COMBINE), b_c >= 1.1 * DEEPEP_COMBINE, bench_fmt("%.1f GB/s", b_c));
    if (all_c > 0)
        bar(env->report, "high throughput, every SM: combine >= 380 GB/s", all_c >= 380, bench_fmt("%.1f GB/s", all_c));
    if (b_c > 0 && b_d16 > 0)
        bar(env->report, "high throughput, 24 SMs: combine at least as fast as the bf16 dispatch", b_c >= b_d16,
            bench_fmt("%.1f vs %.1f GB/s", b_c, b_d16));
    if (all_c > 0 && all_d16 > 0)
        bar(env->report, "high throughput, every SM: combine at least as fast as the bf16 dispatch", all_c >= all_d16,
            bench_fmt("%.1f vs %.1f GB/s", all_c, all_d16));
}

/* ---- the mode ------------------------------------------------------------------------------ */

static void published(bench_env_t *env) {
    static const char *h[] = {"source", "GPUs, EP", "shape", "dispatch", "combine"};
    static const char *rows[][5] = {
        {"pplx-kernels README", "EP8 over NVLink, one node (GPU not named)", "1 token/GPU", "41.6 us", "41.7 us"},
        {"pplx-kernels README", "EP8 over NVLink, one node (GPU not named)", "128 tokens/GPU", "83.6 us", "102.3 us"},
        {"NCCL EP README (NCCL 2.29u1)", "H100, EP8 on one node, low latency, bf16 both ways",
         "128 tokens, 7168, top-8, 256 experts", "224.3 GB/s", "185.2 GB/s"},
        {"DeepEP README (V1 / legacy)", "H800, EP8 intranode, normal kernels",
         "4096 tokens, 7168, top-8, fp8 / bf16", "153 GB/s (NVLink)", "158 GB/s (NVLink)"},
        {"DeepEP test_intranode (DESIGN.md)", "4x H100, 24 SMs, normal kernels", "4096 tokens, 7168, top-8, 256 "
         "experts, fp8 / bf16", "254 / 260 GB/s", "354 GB/s"},
        {"UCCL-EP README", "8x H200 (p5en), EP8 intranode, normal kernels", "4096 tokens, 7168, top-8, fp8 / bf16",
         "320 GB/s, 500 us", "319 GB/s, 973 us"},
    };
    bench_table_t *t = bench_table_new("Published and recorded figures (their machines, not this run)", 5, h);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        bench_table_row(t, rows[i]);
    bench_table_note(t, "DeepEP's and UCCL-EP's GB/s are received rows x row bytes per GPU over time; NCCL EP's "
                        "are per-rank GB/s of its ep_bench. Compare like with like: same GPU, EP size and shape.");
    bench_table_emit(env->report, t);
}

static int run_moe(bench_env_t *env) {
    const int n = env->npes, shared = shares_gpu(env);
    char where[96];
    static const uint32_t toks[] = {1, 4, 8, 16, 32, 64, 128};
    static const uint32_t quick_toks[] = {1, 128};
    const char *nccl_why = shared ? "n/a: PEs share a GPU (NCCL refuses two ranks on one GPU)"
                                  : env->nccl_status;
    std::vector<ll_result_t> ll;
    std::vector<ht_result_t> ht;
    int share = 0;
    BENCH_SYMM(symm_sm_share(&share));
    if (shared)
        snprintf(where, sizeof where, " -- %d PEs sharing one GPU, not a multi-GPU figure", n);
    else
        snprintf(where, sizeof where, " -- %d GPUs, one PE each", n);
    bench_report_section(env->report, "MoE dispatch and combine (symm_moe.h)");
    bench_report_text(env->report, "Uniform random routing (each token's experts distinct), dp_size 1. Per-call "
                      "medians of the slowest PE over %d dispatch + combine pairs captured in one CUDA graph, each "
                      "behind an on-stream barrier; the low-latency rows also back to back (below). NCCL columns: "
                      "an all-to-all of the same bytes split evenly over the PEs (ncclSend/ncclRecv in a group, as "
                      "torch.distributed.all_to_all_single), timed in a graph back to back (and per call in the "
                      "low-latency rows); %s. SMs: the most blocks any kernel of the run launched (one block per SM); the "
                      "budget is all %d SMs a PE may fill unless the row says otherwise.", SAMPLES, nccl_why, share);
    if (env->moe_rows & BENCH_MOE_LL) {
        static const char *h[] = {"experts", "top-k", "hidden", "tokens/PE", "SMs", "rows (dispatch / combine)",
                                  "dispatch bytes/PE", "back to back: dispatch / combine us",
                                  "NCCL us (dispatch / combine bytes)", "NCCL / symm",
                                  "per call: dispatch / combine us", "NCCL per call us", "NCCL / symm per call",
                                  "timed"};
        bench_table_t *t = bench_table_new(bench_fmt("Low latency (pplx-kernels' shapes; fp8 dispatch, bf16 "
                                                     "combine)%s", where), 14, h);
        const uint32_t shapes[2][3] = {{256, 8, 7168}, {64, 6, 2048}};
        for (int s = 0; s < 2; s++) {
            if (shapes[s][0] % (uint32_t)n)
                continue;
            const uint32_t *tk = env->quick ? quick_toks : toks;
            int nt = env->quick ? 2 : 7;
            for (int i = 0; i < nt; i++)
                ll.push_back(ll_row(env, t, shapes[s][0], shapes[s][1], shapes[s][2], tk[i], env->quick));
        }
        bench_table_note(t, "Back to back: 8 calls replayed from one graph with nothing between them, as a decode "
                            "step's stream runs them and as NCCL's all-to-alls are timed beside them (a combine "
                            "cannot repeat alone: its figure is a back-to-back dispatch + combine pair's less the "
                            "dispatch's). Per call: each dispatch + combine pair behind an on-stream barrier, "
                            "events around each call in the graph (the barrier's end, the event nodes and a launch "
                            "nothing overlaps are in every call), NCCL's all-to-alls timed the same way.");
        bench_table_note(t, bench_fmt("NCCL / symm: NCCL's all-to-all time over symm's for the same call (above 1: "
                                      "symm is faster). Rows: packets (data and flag together, no fence, twice the "
                                      "bytes) or plain (rows, then a released flag), as SYMM_MOE_PACKETS=%s chooses.",
                                      getenv("SYMM_MOE_PACKETS") ? getenv("SYMM_MOE_PACKETS") : "auto"));
        bench_table_emit(env->report, t);
    }
    if ((env->moe_rows & BENCH_MOE_HT) && 256 % n == 0) {
        static const char *h[] = {"SM budget", "SMs", "dispatch x", "rows received", "dispatch us", "dispatch GB/s",
                                  "combine us", "combine GB/s", "combine + weights us", "NCCL GB/s (dispatch bytes)",
                                  "NCCL GB/s (combine bytes)", "DeepEP 24 SMs GB/s (dispatch / combine)",
                                  "symm / DeepEP", "timed"};
        bench_table_t *t = bench_table_new(bench_fmt("High throughput (DeepEP's shape: hidden 7168, top-8, 256 "
                                                     "experts, %u tokens/PE)%s", env->quick ? 1024u : 4096u, where),
                                           14, h);
        const int budgets[] = {24, 0};
        for (int b : budgets) {
            if (b > share)
                continue;
            for (int esz : {1, 2})
                ht.push_back(ht_row(env, t, 256, 8, 7168, env->quick ? 1024 : 4096, esz, b, env->quick));
        }
        bench_table_note(t, "GB/s: bytes this PE receives over the time of the call, as DeepEP's test counts them "
                            "(dispatch: rows x (7168 + 224 scale bytes) for fp8, rows x 14336 for bf16; combine: "
                            "rows returned x 14336); dispatch includes the layout. DeepEP column: its normal kernels "
                            "on 4x H100 with 24 SMs (DESIGN.md), not this run (bench/moe/deepep_bench.py runs it). Combine's y "
                            "(the expert outputs) lies in the symmetric heap. combine + weights us: the same "
                            "combine with the received top-k weights (8 float32 per row) returned and summed per "
                            "token (symm_moe_ht_combine_weights, DeepEP's combined_topk_weights), timed apart.");
        bench_table_note(t, bench_fmt("Combine schedule: SYMM_MOE_HT_COMBINE=%s.", getenv("SYMM_MOE_HT_COMBINE")
                                                                                   ? getenv("SYMM_MOE_HT_COMBINE")
                                                                                   : "auto"));
        bench_table_emit(env->report, t);
    }
    bench_report_text(env->report, "Bars (issue 27; defined for 4 GPUs, one PE each, 4096 tokens):");
    if (n != 4 || shared || env->quick) {
        bench_report_text(env->report, "- bars: n/a: this run has %d PEs%s%s", n, shared ? " sharing a GPU" : "",
                          env->quick ? ", --quick sizes" : "");
    } else {
        ll_bars(env, ll);
        ht_bars(env, ht);
    }
    published(env);
    return 0;
}

BENCH_MODE(moe, 40, "MoE dispatch/combine (pplx and DeepEP shapes) vs NCCL all-to-all, SM budgets, bars", run_moe)

/* ---- the low-latency rows alone ------------------------------------------------------- */

static int run_moe_ll(bench_env_t *env) {
    const int n = env->npes, shared = shares_gpu(env);
    const char *probe = getenv("SYMM_MOE_LL_PROBE");
    static const uint32_t rows[][4] = {{256, 8, 7168, 1}, {256, 8, 7168, 8}, {256, 8, 7168, 128},
                                       {64, 6, 2048, 1},  {64, 6, 2048, 8},  {64, 6, 2048, 128}};
    static const char *h[] = {"experts", "top-k", "hidden", "tokens/PE", "SMs", "rows (dispatch / combine)",
                              "dispatch us", "combine us", "NCCL per call us (dispatch / combine bytes)",
                              "pair us (back to back)", "NCCL us (dispatch bytes)", "NCCL us (combine bytes)",
                              "NCCL pair / symm pair", "dispatch us (back to back)", "timed"};
    bench_table_t *t = bench_table_new(
        bench_fmt("Low latency, %d PEs%s, SYMM_MOE_LL_PROBE=%s", n, shared ? " sharing a GPU" : " one per GPU",
                  probe && *probe ? probe : "(unset: the real exchange)"),
        15, h);
    for (const auto &r : rows) {
        const uint32_t E = r[0], K = r[1], H = r[2], m = r[3];
        ll_bufs_t b;
        double d_us, c_us, pair, bd, nd, nc, ncd, ncc;
        int graphed, sms;
        if (E % (uint32_t)n || (env->quick && m == 8) || (env->quick && E == 64))
            continue;
        bench_phase_begin("moe_ll E%u K%u H%u tokens %u", E, K, H, m);
        ll_open(env, &b, E, K, H, m);
        sms_used(env, b.l.h);
        time_pairs(env, ll_step, &b.l, env->quick ? 5 : SAMPLES, &d_us, &c_us, &graphed);
        ll_back_to_back(env, &b.l, env->quick, &pair, &bd);
        sms = sms_used(env, b.l.h);
        BENCH_SYMM(symm_moe_check(b.l.h, env->stream));
        nd = nccl_us(env, (b.disp_bytes + (size_t)n - 1) / (size_t)n, env->quick);
        nc = nccl_us(env, (b.comb_bytes + (size_t)n - 1) / (size_t)n, env->quick);
        nccl_per_call(env, b.disp_bytes, b.comb_bytes, env->quick, &ncd, &ncc);
        {
            const char *cells[] = {bench_fmt("%u", E), bench_fmt("%u", K), bench_fmt("%u", H), bench_fmt("%u", m),
                                   bench_fmt("%d", sms), ll_forms(b.l.h, K, H, m), bench_fmt("%.1f", d_us),
                                   bench_fmt("%.1f", c_us),
                                   ncd > 0 ? bench_fmt("%.1f / %.1f", ncd, ncc) : "n/a", bench_fmt("%.1f", pair),
                                   nd > 0 ? bench_fmt("%.1f", nd) : "n/a", nc > 0 ? bench_fmt("%.1f", nc) : "n/a",
                                   nd > 0 && nc > 0 ? bench_fmt_ratio(nd + nc, pair) : "n/a", bench_fmt("%.1f", bd),
                                   graphed ? "graph" : "stream"};
            bench_table_row(t, cells);
        }
        ll_close(&b);
        bench_phase_end();
    }
    bench_table_note(t, "dispatch us / combine us: per call, each pair behind an on-stream barrier (as --mode moe); NCCL per "
                        "call: its all-to-alls of the same bytes timed the same way. "
                        "pair us: a dispatch + combine pair, 8 pairs replayed back to back from one graph, no "
                        "barrier: timed like the NCCL columns (back-to-back all-to-alls in a graph); dispatch us "
                        "(back to back): 8 dispatches replayed the same way. "
                        "SYMM_MOE_LL_PROBE (diagnostic): empty / hop: the kernels reduced to their start and "
                        "end / one flag exchange (results wrong); twice: each dispatch kernel does its call twice; "
                        "stamps: each block prints its stage times for one call.");
    bench_table_emit(env->report, t);
    return 0;
}

BENCH_MODE(moe_ll, 41, "MoE low-latency rows alone: per call and back-to-back pairs vs NCCL (SYMM_MOE_LL_PROBE)",
           run_moe_ll)
