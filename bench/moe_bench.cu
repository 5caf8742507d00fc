/*
 * moe_bench.cu - the "moe" mode of symm-bench: MoE dispatch and combine
 * (symm_moe.h) with fp8 e4m3 dispatch (float32 scales per 128 elements) and
 * bf16 combine, side by side with NCCL's all-to-all (grouped ncclSend /
 * ncclRecv, what torch.distributed.all_to_all_single runs) moving the same
 * bytes, and the figures pplx-kernels, DeepEP, NCCL EP and UCCL-EP publish.
 *
 *   low latency      pplx-kernels' shapes: 64 experts top-6 hidden 2048, and
 *                    256 experts top-8 hidden 7168, 1..128 tokens per PE
 *                    (dp_size 1): microseconds per dispatch and per combine.
 *   high throughput  DeepEP's shape: 4096 tokens per PE, hidden 7168, top-8,
 *                    256 experts: the dispatch (layout included) and the
 *                    combine, in GB/s of the bytes each PE receives.
 *
 * Each sample: a stream barrier over all PEs, then dispatch and combine,
 * timed with events on the stream; the medians over the samples are shown.
 * Routing is uniform random (each token's experts distinct). The NCCL column
 * sends each peer an equal share of the same bytes (dispatch: tokens x top-k
 * x (hidden + scales); combine: tokens x top-k x hidden x 2 in the low-latency
 * table; the bytes actually received in the high-throughput one); with PEs
 * sharing a GPU NCCL cannot run (it refuses two ranks on one GPU) and the
 * column says so. Tables from PEs sharing a GPU say so in their title.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "bench_modes.h"
#include "symm/symm_moe.h"

#define SAMPLES 20
#define WARMUP 5

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

/* A handle of `mode` for fp8 tokens with scales, dp_size 1. */
static symm_moe_t *fp8_handle(int mode, uint32_t E, uint32_t K, uint32_t H, uint32_t m) {
    symm_moe_config_t cfg;
    symm_moe_t *h = NULL;
    memset(&cfg, 0, sizeof cfg);
    cfg.mode = mode;
    cfg.max_num_tokens = m;
    cfg.num_experts = E;
    cfg.experts_per_token = K;
    cfg.hidden_dim = H;
    cfg.hidden_dim_bytes = H;
    cfg.hidden_dim_scale_bytes = (size_t)(H + 127) / 128 * 4;
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

/* Microseconds per NCCL all-to-all of per_peer bytes, or -1 when NCCL cannot run. */
static double nccl_us(bench_env_t *env, size_t per_peer, int quick) {
    a2a_arg_t a;
    double ms;
    if (!env->nccl_ok || per_peer == 0)
        return -1;
    a.env = env;
    a.per_peer = per_peer;
    BENCH_CUDA(cudaMalloc((void **)&a.send, per_peer * (size_t)env->npes));
    BENCH_CUDA(cudaMalloc((void **)&a.recv, per_peer * (size_t)env->npes));
    ms = bench_time_stream(nccl_a2a, &a, env->stream, quick ? 2 : WARMUP, 1, quick ? 5 : SAMPLES);
    BENCH_CUDA(cudaFree(a.send));
    BENCH_CUDA(cudaFree(a.recv));
    return ms * 1e3;
}

/* ---- timing of dispatch + combine pairs ------------------------------------------------ */

typedef void (*moe_step_fn)(void *arg, cudaStream_t s, int half); /* half 0: dispatch, 1: combine */

/* Medians (us) of the dispatch and combine of `samples` pairs, each after a
 * stream barrier over all PEs. */
static void time_pairs(bench_env_t *env, moe_step_fn fn, void *arg, int samples, double *d_us, double *c_us) {
    std::vector<cudaEvent_t> ev((size_t)samples * 3);
    std::vector<double> d((size_t)samples), c((size_t)samples);
    for (auto &e : ev)
        BENCH_CUDA(cudaEventCreate(&e));
    for (int w = 0; w < WARMUP; w++) {
        fn(arg, env->stream, 0);
        fn(arg, env->stream, 1);
    }
    for (int i = 0; i < samples; i++) {
        BENCH_SYMM(symm_barrier_all_on_stream(env->stream));
        BENCH_CUDA(cudaEventRecord(ev[3 * i], env->stream));
        fn(arg, env->stream, 0);
        BENCH_CUDA(cudaEventRecord(ev[3 * i + 1], env->stream));
        fn(arg, env->stream, 1);
        BENCH_CUDA(cudaEventRecord(ev[3 * i + 2], env->stream));
    }
    BENCH_CUDA(cudaStreamSynchronize(env->stream));
    for (int i = 0; i < samples; i++) {
        float a, b;
        BENCH_CUDA(cudaEventElapsedTime(&a, ev[3 * i], ev[3 * i + 1]));
        BENCH_CUDA(cudaEventElapsedTime(&b, ev[3 * i + 1], ev[3 * i + 2]));
        d[(size_t)i] = a * 1e3;
        c[(size_t)i] = b * 1e3;
    }
    for (auto &e : ev)
        BENCH_CUDA(cudaEventDestroy(e));
    *d_us = bench_median(d.data(), samples);
    *c_us = bench_median(c.data(), samples);
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

static void ll_row(bench_env_t *env, bench_table_t *t, uint32_t E, uint32_t K, uint32_t H, uint32_t m, int quick) {
    const int n = env->npes;
    const uint32_t cols = (H + 127) / 128;
    ll_case_t l;
    double d_us, c_us, nd, nc;
    size_t disp_bytes = (size_t)m * K * (H + cols * 4), comb_bytes = (size_t)m * K * H * 2;
    bench_phase_begin("moe low latency E%u K%u H%u tokens %u", E, K, H, m);
    l.h = fp8_handle(SYMM_MOE_LOW_LATENCY, E, K, H, m);
    const uint32_t L = (uint32_t)symm_moe_local_experts(l.h), rows = m * (uint32_t)n;
    std::vector<uint32_t> idx = route(m, E, K, 1000 + (uint64_t)env->me * 7 + m);
    uint32_t *d_idx = dev<uint32_t>(idx.size());
    BENCH_CUDA(cudaMemcpy(d_idx, idx.data(), idx.size() * 4, cudaMemcpyHostToDevice));
    unsigned char *x = dev<unsigned char>((size_t)m * H), *ox = dev<unsigned char>((size_t)L * rows * H);
    float *xs = dev<float>((size_t)m * cols), *os = dev<float>((size_t)L * rows * cols), *w = dev<float>((size_t)m * K);
    int32_t *num = dev<int32_t>(L);
    uint16_t *y = dev<uint16_t>((size_t)L * rows * H), *out = dev<uint16_t>((size_t)m * H);
    bench_fill_pattern(x, (size_t)m * H, 7u + (uint32_t)env->me, 0, env->stream);
    memset(&l.d, 0, sizeof l.d);
    l.d.out_expert_num_tokens = num;
    l.d.out_expert_x = ox;
    l.d.out_expert_x_stride[0] = (int64_t)rows * H;
    l.d.out_expert_x_stride[1] = H;
    l.d.out_expert_rows = rows;
    l.d.out_expert_x_scale = os;
    l.d.out_expert_x_scale_stride[0] = (int64_t)rows * cols;
    l.d.out_expert_x_scale_stride[1] = cols;
    l.d.out_expert_x_scale_stride[2] = 1;
    l.d.dp_x = x;
    l.d.dp_x_stride = H;
    l.d.dp_x_scale = xs;
    l.d.dp_x_scale_stride[0] = cols;
    l.d.dp_x_scale_stride[1] = 1;
    l.d.indices = d_idx;
    l.d.num_tokens = m;
    l.d.x_dtype = SYMM_DTYPE_FP8_E4M3;
    memset(&l.c, 0, sizeof l.c);
    l.c.out_tokens = out;
    l.c.out_stride = H;
    l.c.out_rows = m;
    l.c.out_dtype = SYMM_DTYPE_BF16;
    l.c.indices = d_idx;
    l.c.weights = w;
    l.c.num_tokens = m;
    l.c.expert_y = y;
    l.c.expert_y_stride[0] = (int64_t)rows * H;
    l.c.expert_y_stride[1] = H;
    l.c.expert_y_rows = rows;
    l.c.y_dtype = SYMM_DTYPE_BF16;
    time_pairs(env, ll_step, &l, quick ? 5 : SAMPLES, &d_us, &c_us);
    BENCH_SYMM(symm_moe_check(l.h, env->stream));
    nd = nccl_us(env, (disp_bytes + (size_t)n - 1) / (size_t)n, quick);
    nc = nccl_us(env, (comb_bytes + (size_t)n - 1) / (size_t)n, quick);
    {
        const char *cells[] = {bench_fmt("%u", E), bench_fmt("%u", K), bench_fmt("%u", H), bench_fmt("%u", m),
                               bench_fmt("%.1f", d_us), bench_fmt("%.1f", c_us), bench_fmt_bytes(disp_bytes),
                               nd > 0 ? bench_fmt("%.1f", nd) : "n/a", nc > 0 ? bench_fmt("%.1f", nc) : "n/a",
                               bench_fmt_ratio(nd + nc, d_us + c_us)};
        bench_table_row(t, cells);
    }
    BENCH_SYMM(symm_moe_destroy(l.h));
    cudaFree(d_idx); cudaFree(x); cudaFree(ox); cudaFree(xs); cudaFree(os); cudaFree(w); cudaFree(num);
    cudaFree(y); cudaFree(out);
    bench_phase_end();
}

/* ---- high throughput ------------------------------------------------------------------- */

typedef struct ht_case {
    symm_moe_t *h;
    symm_moe_ht_dispatch_args_t d;
    void *y, *out;
    uint32_t H, m;
    size_t cap;
} ht_case_t;

static void ht_step(void *arg, cudaStream_t s, int half) {
    ht_case_t *c = (ht_case_t *)arg;
    if (half == 0)
        BENCH_SYMM(symm_moe_ht_dispatch(c->h, &c->d, SYMM_MOE_SEND_RECV, (symm_stream_t)s));
    else
        BENCH_SYMM(symm_moe_ht_combine(c->h, c->y, SYMM_DTYPE_BF16, c->H, c->cap, c->out, SYMM_DTYPE_BF16, c->H,
                                       c->m, SYMM_MOE_SEND_RECV, (symm_stream_t)s));
}

static void ht_row(bench_env_t *env, bench_table_t *t, uint32_t E, uint32_t K, uint32_t H, uint32_t m, int quick) {
    const int n = env->npes;
    const uint32_t cols = (H + 127) / 128;
    symm_moe_ht_recv_t r;
    ht_case_t c;
    double d_us, c_us, nd, nc;
    int32_t got = 0;
    bench_phase_begin("moe high throughput E%u K%u H%u tokens %u", E, K, H, m);
    c.h = fp8_handle(SYMM_MOE_HIGH_THROUGHPUT, E, K, H, m);
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
    unsigned char *x = dev<unsigned char>((size_t)m * H);
    float *xs = dev<float>((size_t)m * cols), *w = dev<float>((size_t)m * K);
    bench_fill_pattern(x, (size_t)m * H, 11u + (uint32_t)env->me, 0, env->stream);
    c.y = dev<uint16_t>(r.capacity * H);
    c.out = dev<uint16_t>((size_t)m * H);
    c.H = H;
    c.m = m;
    c.cap = r.capacity;
    memset(&c.d, 0, sizeof c.d);
    c.d.x = x;
    c.d.x_stride = H;
    c.d.x_dtype = SYMM_DTYPE_FP8_E4M3;
    c.d.x_scale = xs;
    c.d.x_scale_stride[0] = cols;
    c.d.x_scale_stride[1] = 1;
    c.d.indices = d_idx;
    c.d.indices_dtype = SYMM_DTYPE_U32;
    c.d.weights = w;
    c.d.num_tokens = m;
    time_pairs(env, ht_step, &c, quick ? 3 : SAMPLES / 2, &d_us, &c_us);
    BENCH_SYMM(symm_moe_check(c.h, env->stream));
    BENCH_CUDA(cudaMemcpy(&got, r.num_recv, 4, cudaMemcpyDeviceToHost));
    size_t disp_bytes = (size_t)got * (H + cols * 4), comb_bytes = returned * (size_t)H * 2;
    nd = nccl_us(env, (disp_bytes + (size_t)n - 1) / (size_t)n, quick);
    nc = nccl_us(env, (comb_bytes + (size_t)n - 1) / (size_t)n, quick);
    {
        const char *cells[] = {bench_fmt("%u", m), bench_fmt("%d", got),
                               bench_fmt("%.0f", d_us), bench_fmt("%.1f", (double)disp_bytes / d_us * 1e-3),
                               bench_fmt("%.0f", c_us), bench_fmt("%.1f", (double)comb_bytes / c_us * 1e-3),
                               nd > 0 ? bench_fmt("%.1f", (double)disp_bytes / nd * 1e-3) : "n/a",
                               nc > 0 ? bench_fmt("%.1f", (double)comb_bytes / nc * 1e-3) : "n/a",
                               bench_fmt_ratio(nd + nc, d_us + c_us)};
        bench_table_row(t, cells);
    }
    BENCH_SYMM(symm_moe_destroy(c.h));
    cudaFree(d_idx); cudaFree(x); cudaFree(xs); cudaFree(w); cudaFree(c.y); cudaFree(c.out);
    bench_phase_end();
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
        {"DeepEP README (V2)", "SM100, EP8 over NVLink, 64 SMs", "8192 tokens, 7168, top-8, fp8 / bf16",
         "726 GB/s", "740 GB/s"},
        {"UCCL-EP README", "8x H200 (p5en), EP8 intranode, normal kernels", "4096 tokens, 7168, top-8, fp8 / bf16",
         "320 GB/s, 500 us", "319 GB/s, 973 us"},
    };
    bench_table_t *t = bench_table_new("Published figures (their machines, not this one)", 5, h);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        bench_table_row(t, rows[i]);
    bench_table_note(t, "DeepEP's and UCCL-EP's GB/s are their 'bottleneck bandwidth' of NVLink bytes per GPU; "
                        "NCCL EP's are per-rank GB/s of its ep_bench. Compare like with like: same GPU, EP size "
                        "and shape.");
    bench_table_emit(env->report, t);
}

static int run_moe(bench_env_t *env) {
    const int n = env->npes, shared = shares_gpu(env);
    char where[96];
    static const uint32_t toks[] = {1, 4, 8, 16, 32, 64, 128};
    static const uint32_t quick_toks[] = {1, 128};
    const char *nccl_why = shared ? "n/a: PEs share a GPU (NCCL refuses two ranks on one GPU)"
                                  : env->nccl_status;
    if (shared)
        snprintf(where, sizeof where, " -- %d PEs sharing one GPU, not a multi-GPU figure", n);
    else
        snprintf(where, sizeof where, " -- %d GPUs, one PE each", n);
    bench_report_section(env->report, "MoE dispatch and combine (symm_moe.h)");
    bench_report_text(env->report, "fp8 e4m3 dispatch with float32 scales per 128 elements, bf16 combine, dp_size 1, "
                      "uniform random routing. Medians of dispatch and combine on the stream, each sample after a "
                      "stream barrier. NCCL column: an all-to-all of the same bytes split evenly over the PEs "
                      "(ncclSend/ncclRecv in a group, as torch.distributed.all_to_all_single); %s.", nccl_why);
    {
        static const char *h[] = {"experts", "top-k", "hidden", "tokens/PE", "dispatch us", "combine us",
                                  "dispatch bytes/PE", "NCCL a2a us (dispatch bytes)", "NCCL a2a us (combine bytes)",
                                  "NCCL / symm"};
        bench_table_t *t = bench_table_new(bench_fmt("Low latency (pplx-kernels' shapes)%s", where), 10, h);
        const uint32_t shapes[2][3] = {{64, 6, 2048}, {256, 8, 7168}};
        for (int s = 0; s < 2; s++) {
            if (shapes[s][0] % (uint32_t)n)
                continue;
            const uint32_t *tk = env->quick ? quick_toks : toks;
            int nt = env->quick ? 2 : 7;
            for (int i = 0; i < nt; i++)
                ll_row(env, t, shapes[s][0], shapes[s][1], shapes[s][2], tk[i], env->quick);
        }
        bench_table_note(t, "NCCL / symm: NCCL's two all-to-alls over symm's dispatch + combine (above 1: symm is "
                            "faster).");
        bench_table_emit(env->report, t);
    }
    if (256 % n == 0) {
        static const char *h[] = {"tokens/PE", "rows received", "dispatch us", "dispatch GB/s", "combine us",
                                  "combine GB/s", "NCCL a2a GB/s (dispatch bytes)", "NCCL a2a GB/s (combine bytes)",
                                  "NCCL / symm"};
        bench_table_t *t = bench_table_new(bench_fmt("High throughput (DeepEP's shape: hidden 7168, top-8, 256 "
                                                     "experts)%s", where), 9, h);
        ht_row(env, t, 256, 8, 7168, env->quick ? 1024 : 4096, env->quick);
        bench_table_note(t, "GB/s: bytes this PE receives (dispatch: rows x (7168 + 224 scale bytes); combine: "
                            "rows returned x 7168 x 2) over the time of the call; dispatch includes the layout step.");
        bench_table_emit(env->report, t);
    }
    published(env);
    return 0;
}

BENCH_MODE(moe, 40, "MoE dispatch/combine (pplx and DeepEP shapes) vs NCCL all-to-all", run_moe)
