/*
 * test_moe.cu - the MoE exchange (symm_moe.h) on GPUs, through the C API,
 * under symmrun (PEs may share a GPU). argv[1] = expected PEs, argv[2] = part
 * (or "all": every part in turn, in one process):
 *
 *   ll      low-latency dispatch/combine: fp8 with scales and bf16, dp_size 1
 *           and 2, bound_m below the tokens, a PE with no tokens, 50 calls
 *           back to back with fresh data, -1 (no expert) in some slots, a
 *           dispatch whose combine is skipped, sizes whose rows go as packets
 *           in some calls and plainly in others (SYMM_MOE_PACKETS=auto; the
 *           GPU script runs it again with 1 and 0); every expert's received rows
 *           (bytes and scales, as a multiset), every row's route
 *           (symm_moe_ll_routes) and every combined token checked exactly
 *           against a host reference
 *   ht      high-throughput layout / dispatch / combine (fp8 + scales, 2048
 *           tokens per PE, a dispatch whose combine is skipped; then bf16
 *           rows of hidden 2056, whose combine rows are no whole number of
 *           a warp reducer's slices): every received row, its order, mapped
 *           indices, weights, source, the counts, and every combined token,
 *           exactly
 *           The combine's float32 side channel (symm_moe_ht_combine_weights)
 *           on most calls: every combined value's bits against the host's
 *           sum in PE order, its refused arguments
 *   graph   both modes captured into one CUDA graph with the send and
 *           receive halves split by other work, replayed with fresh data
 *           (the HT combine with its side channel)
 *   errors  an expert index out of range and a repeated one (skipped on the
 *           device, reported by the next call and by symm_moe_check), calls
 *           out of order, sizes above the configuration (nothing launched)
 *   budget  SM budgets of 1, 2, 8, 24 and all SMs, different on odd and even
 *           PEs: no kernel launches more blocks (recorded on the device) and
 *           every round of both modes stays exact (the HT combine with its
 *           side channel); bad budgets are refused
 *
 * Exactness: the data are small integers and eighths, so every product and
 * sum the kernels form in float32 is exact, and the host forms the same
 * float32 values in the same order before rounding to bf16.
 */
#include <algorithm>
#include <math.h>
#include <string.h>
#include <string>
#include <vector>

#include "symm_test.h"
#include "symm_test_cuda.h"
#include "symm/symm_moe.h"

static int me, npes;
static cudaStream_t stream;
static int failures;

#include "moe_checkf.h"

/* ---- the model the test uses: values, expert function ------------------------------- */

/* bf16 <-> f32 on host and device, rounding to nearest even as the kernels do. */
__host__ __device__ static float bf16_f32(uint32_t h) {
    union { uint32_t u; float f; } c;
    c.u = (h & 0xffffu) << 16;
    return c.f;
}

__host__ __device__ static uint32_t f32_bf16(float f) {
    union { uint32_t u; float f; } c;
    c.f = f;
    return ((c.u + 0x7fffu + ((c.u >> 16) & 1u)) >> 16) & 0xffffu;
}

/* An element's value: bf16 bits as they are; fp8 bytes as (byte - 128) / 4. */
__host__ __device__ static float conv(const unsigned char *x, int esz, uint32_t h) {
    if (esz == 1)
        return (float)((int)x[h] - 128) * 0.25f;
    return bf16_f32((uint32_t)x[2 * h] | ((uint32_t)x[2 * h + 1] << 8));
}

__host__ __device__ static float expert_scale(uint32_t e) { return 1.0f + (float)(e % 4) * 0.25f; }

/* Low-latency experts: y[l][r][h] = conv(x[l][r][h]) * scale(first + l), f32. */
__global__ void ll_experts(const unsigned char *x, int esz, const int32_t *num, float *y, uint32_t L,
                           uint32_t rows, uint32_t H, uint32_t first, int ybf) {
    for (uint32_t l = blockIdx.y; l < L; l += gridDim.y)
        for (uint32_t r = blockIdx.x; r < (uint32_t)num[l]; r += gridDim.x)
            for (uint32_t h = threadIdx.x; h < H; h += blockDim.x) {
                const float v = conv(x + ((uint64_t)l * rows + r) * H * esz, esz, h) * expert_scale(first + l);
                if (ybf) /* bf16, (ybf 2) one element past the buffer's alignment */
                    ((uint16_t *)y)[(ybf == 2) + ((uint64_t)l * rows + r) * H + h] = (uint16_t)f32_bf16(v);
                else
                    y[((uint64_t)l * rows + r) * H + h] = v;
            }
}

/* High-throughput experts: y[r][h] = bf16(conv(x[r][h]) * sum over local k of w * scale). */
__global__ void ht_experts(const unsigned char *x, int esz, const int32_t *idx, const float *w, const int32_t *num,
                           uint16_t *y, uint32_t K, uint32_t H, uint32_t first) {
    for (uint32_t r = blockIdx.x; r < (uint32_t)num[0]; r += gridDim.x) {
        float ws = 0;
        for (uint32_t k = 0; k < K; k++)
            if (idx[r * K + k] >= 0)
                ws += w[r * K + k] * expert_scale(first + (uint32_t)idx[r * K + k]);
        for (uint32_t h = threadIdx.x; h < H; h += blockDim.x)
            y[(uint64_t)r * H + h] = (uint16_t)f32_bf16(conv(x + (uint64_t)r * H * esz, esz, h) * ws);
    }
}

/* The combine's side channel on the expert side: v[r][c] = w[r][c] x 2^(11 (pe % 3)), exact, so a
 * token's values from PEs of different scales sum to different float32 bits in different orders. */
__host__ __device__ static float wscale(int pe) { return (float)(1u << (11 * (pe % 3))); }

__global__ void ht_wexperts(const float *w, const int32_t *num, float *v, uint32_t K, int pe) {
    for (uint32_t q = blockIdx.x * blockDim.x + threadIdx.x; q < (uint32_t)num[0] * K; q += gridDim.x * blockDim.x)
        v[q] = w[q] * wscale(pe);
}

__global__ void spin(uint64_t ns) {
    uint64_t t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

/* ---- one batch of tokens per DP group (the same on every PE) --------------------------- */

struct Batch {
    uint32_t m;                     /* tokens */
    uint32_t bound;                 /* tokens sent (<= m) */
    std::vector<unsigned char> x;   /* m x H x esz */
    std::vector<float> scale;       /* m x cols */
    std::vector<uint32_t> idx;      /* m x K */
    std::vector<float> w;           /* m x K */
};

static uint64_t rnd(uint64_t *s) { return symm_test_rand(s); }

static void make_batch(Batch &b, uint32_t m, uint32_t bound, uint32_t E, uint32_t K, uint32_t H, int esz,
                       uint32_t cols, uint64_t seed) {
    uint64_t s = seed;
    b.m = m;
    b.bound = bound;
    b.x.resize((size_t)m * H * esz);
    for (size_t i = 0; i < (size_t)m * H; i++) {
        if (esz == 1) {
            b.x[i] = (unsigned char)rnd(&s);
        } else {
            float v = (float)((int)(rnd(&s) % 17) - 8) * 0.25f;
            uint32_t bits = f32_bf16(v);
            b.x[2 * i] = (unsigned char)bits;
            b.x[2 * i + 1] = (unsigned char)(bits >> 8);
        }
    }
    b.scale.resize((size_t)m * cols);
    for (auto &v : b.scale)
        v = (float)(rnd(&s) % 1000) / 64.0f;
    b.idx.resize((size_t)m * K);
    b.w.resize((size_t)m * K);
    for (uint32_t t = 0; t < m; t++) {
        std::vector<uint32_t> perm(E);
        for (uint32_t e = 0; e < E; e++)
            perm[e] = e;
        for (uint32_t e = E - 1; e > 0; e--)
            std::swap(perm[e], perm[rnd(&s) % (e + 1)]);
        for (uint32_t k = 0; k < K; k++) {
            b.idx[(size_t)t * K + k] = perm[k];
            b.w[(size_t)t * K + k] = (float)(1 + rnd(&s) % 8) * 0.125f;
        }
    }
}

/* FNV-1a of a row and its scales: received rows are compared as multisets. */
static uint64_t row_hash(const unsigned char *x, size_t nb, const float *sc, size_t cols, size_t sstride) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < nb; i++)
        h = (h ^ x[i]) * 1099511628211ull;
    for (size_t c = 0; c < cols; c++) {
        uint32_t u;
        memcpy(&u, &sc[c * sstride], 4);
        for (int i = 0; i < 4; i++)
            h = (h ^ ((u >> (8 * i)) & 0xff)) * 1099511628211ull;
    }
    return h;
}

template <typename T> static T *dalloc(size_t n) {
    T *p = NULL;
    CUDA_CHECK(cudaMalloc((void **)&p, (n ? n : 1) * sizeof(T)));
    return p;
}

/* ---- low latency ---------------------------------------------------------------------- */

struct LL {
    symm_moe_config_t cfg;
    symm_moe_t *h;
    uint32_t E, K, H, M, L, G, D, rows, cols, first;
    int esz;
    int ybf; /* expert_y: 0 f32, 1 bf16, 2 bf16 one element past 16-byte alignment */
    int32_t *d_num;
    unsigned char *d_ox, *d_x;
    float *d_os, *d_xs, *d_y, *d_w;
    uint32_t *d_idx, *d_bound;
    uint16_t *d_out;
};

/* A configuration with fp8 (esz 1) or 2-byte tokens and optional scales. */
static symm_moe_config_t moe_config(int mode, uint32_t E, uint32_t K, uint32_t H, uint32_t M, int esz,
                                    uint32_t cols, int dp) {
    symm_moe_config_t c;
    memset(&c, 0, sizeof(c));
    c.mode = mode;
    c.max_num_tokens = M;
    c.num_experts = E;
    c.experts_per_token = K;
    c.hidden_dim = H;
    c.hidden_dim_bytes = (size_t)H * esz;
    c.hidden_dim_scale_bytes = (size_t)cols * 4;
    c.dp_size = dp;
    return c;
}

static void ll_make(LL &t, uint32_t E, uint32_t K, uint32_t H, uint32_t M, int esz, int scales, int dp) {
    memset(&t, 0, sizeof(t));
    t.E = E; t.K = K; t.H = H; t.M = M; t.esz = esz; t.D = (uint32_t)dp;
    t.cols = scales ? (H + 127) / 128 : 0;
    t.cfg = moe_config(SYMM_MOE_LOW_LATENCY, E, K, H, M, esz, t.cols, dp);
    SYMM_CHECK(symm_moe_create(&t.cfg, NULL, &t.h));
    t.L = (uint32_t)symm_moe_local_experts(t.h);
    t.first = (uint32_t)symm_moe_first_expert(t.h);
    t.G = (uint32_t)npes / t.D;
    t.rows = M * t.G;
    t.d_num = dalloc<int32_t>(t.L);
    t.d_ox = dalloc<unsigned char>((size_t)t.L * t.rows * H * esz);
    t.d_os = dalloc<float>((size_t)t.L * t.rows * t.cols);
    t.d_x = dalloc<unsigned char>((size_t)M * H * esz);
    t.d_xs = dalloc<float>((size_t)M * t.cols);
    t.d_idx = dalloc<uint32_t>((size_t)M * K);
    t.d_w = dalloc<float>((size_t)M * K);
    t.d_y = dalloc<float>((size_t)t.L * t.rows * H);
    t.d_out = dalloc<uint16_t>((size_t)M * H);
    t.d_bound = dalloc<uint32_t>(1);
}

static void ll_free(LL &t) {
    SYMM_CHECK(symm_moe_destroy(t.h));
    cudaFree(t.d_num); cudaFree(t.d_ox); cudaFree(t.d_os); cudaFree(t.d_x); cudaFree(t.d_xs);
    cudaFree(t.d_idx); cudaFree(t.d_w); cudaFree(t.d_y); cudaFree(t.d_out); cudaFree(t.d_bound);
}

/* The batches of every DP group for call `it`; group `empty` has no tokens. */
static std::vector<Batch> ll_batches(const LL &t, uint64_t seed, int it, int use_bound, int empty) {
    std::vector<Batch> b(t.G);
    uint64_t s = seed * 7919 + (uint64_t)it;
    for (uint32_t g = 0; g < t.G; g++) {
        uint32_t m = (int)g == empty ? 0 : 1 + (uint32_t)(rnd(&s) % t.M);
        uint32_t bound = use_bound && m > 1 ? m - 1 - (uint32_t)(rnd(&s) % (m / 2)) : m;
        make_batch(b[g], m, bound, t.E, t.K, t.H, t.esz, t.cols, s + g * 104729);
        if (it % 2) /* odd calls: some slots hold -1, no expert (skipped without an error) */
            for (uint32_t tok = 2; tok < m; tok += 5)
                b[g].idx[(size_t)tok * t.K + t.K - 1] = SYMM_MOE_NO_EXPERT;
    }
    return b;
}

static void ll_upload(LL &t, const Batch &b) {
    CUDA_CHECK(cudaMemcpyAsync(t.d_x, b.x.data(), b.x.size(), cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaMemcpyAsync(t.d_xs, b.scale.data(), b.scale.size() * 4, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaMemcpyAsync(t.d_idx, b.idx.data(), b.idx.size() * 4, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaMemcpyAsync(t.d_w, b.w.data(), b.w.size() * 4, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaMemcpyAsync(t.d_bound, &b.bound, 4, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
}

static void ll_args(LL &t, const Batch &b, int use_bound, symm_moe_dispatch_args_t *d, symm_moe_combine_args_t *c) {
    memset(d, 0, sizeof(*d));
    d->out_expert_num_tokens = t.d_num;
    d->out_expert_x = t.d_ox;
    d->out_expert_x_stride[0] = (int64_t)t.rows * t.H;
    d->out_expert_x_stride[1] = t.H;
    d->out_expert_rows = t.rows;
    if (t.cols) {
        /* column-major scales per expert, as a GEMM's TMA wants them */
        d->out_expert_x_scale = t.d_os;
        d->out_expert_x_scale_stride[0] = (int64_t)t.rows * t.cols;
        d->out_expert_x_scale_stride[1] = 1;
        d->out_expert_x_scale_stride[2] = t.rows;
        d->dp_x_scale = t.d_xs;
        d->dp_x_scale_stride[0] = t.cols;
        d->dp_x_scale_stride[1] = 1;
    }
    d->dp_x = t.d_x;
    d->dp_x_stride = t.H;
    d->indices = t.d_idx;
    d->num_tokens = b.m;
    d->bound_m = use_bound ? t.d_bound : NULL;
    d->x_dtype = t.esz == 1 ? SYMM_DTYPE_FP8_E4M3 : SYMM_DTYPE_BF16;
    memset(c, 0, sizeof(*c));
    c->out_tokens = t.d_out;
    c->out_stride = t.H;
    c->out_rows = t.M;
    c->out_dtype = SYMM_DTYPE_BF16;
    c->indices = t.d_idx;
    c->weights = t.d_w;
    c->num_tokens = b.m;
    c->expert_y = t.ybf ? (void *)((uint16_t *)t.d_y + (t.ybf == 2)) : (void *)t.d_y;
    c->expert_y_stride[0] = (int64_t)t.rows * t.H;
    c->expert_y_stride[1] = t.H;
    c->expert_y_rows = t.rows;
    c->y_dtype = t.ybf ? SYMM_DTYPE_BF16 : SYMM_DTYPE_F32;
    c->bound_m = use_bound ? t.d_bound : NULL;
}

static void ll_experts_launch(LL &t) {
    dim3 grid(64, t.L < 64 ? t.L : 64);
    ll_experts<<<grid, 256, 0, stream>>>(t.d_ox, t.esz, t.d_num, t.d_y, t.L, t.rows, t.H, t.first, t.ybf);
}

/* Check this PE's received rows and its group's combined tokens. */
static void ll_verify(LL &t, const std::vector<Batch> &bs, const char *what) {
    const uint32_t H = t.H, K = t.K, L = t.L, cols = t.cols;
    std::vector<int32_t> num(L);
    std::vector<unsigned char> ox((size_t)L * t.rows * H * t.esz);
    std::vector<float> os((size_t)L * t.rows * cols);
    std::vector<uint16_t> out((size_t)t.M * H);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaMemcpy(num.data(), t.d_num, L * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(ox.data(), t.d_ox, ox.size(), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(os.data(), t.d_os, os.size() * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(out.data(), t.d_out, out.size() * 2, cudaMemcpyDeviceToHost));
    {
        /* every row's route (symm_moe_ll_routes): source PE, slot and token name a route to this
         * expert, the row holds that token, and the sources come in order */
        const uint64_t *d_routes = NULL;
        size_t rows = 0;
        SYMM_CHECK(symm_moe_ll_routes(t.h, &d_routes, &rows));
        CHECKF(rows == t.rows, "%s: routes have %zu rows, expected %u", what, rows, t.rows);
        std::vector<uint64_t> routes((size_t)L * rows);
        CUDA_CHECK(cudaMemcpy(routes.data(), d_routes, routes.size() * 8, cudaMemcpyDeviceToHost));
        for (uint32_t l = 0; l < L; l++) {
            uint32_t last_src = 0;
            for (int r = 0; r < num[l] && r < (int)t.rows; r++) {
                const uint64_t rt = routes[(size_t)l * rows + r];
                const uint32_t src = (uint32_t)(rt & 0xffffu), k = (uint32_t)((rt >> 16) & 0xffffu);
                const uint32_t tok = (uint32_t)(rt >> 32);
                const Batch &b = bs[src / t.D];
                const int ok = src < (uint32_t)npes && src >= last_src && k < K && tok < b.bound &&
                               tok % t.D == src % t.D && b.idx[(size_t)tok * K + k] == t.first + l &&
                               memcmp(&ox[((size_t)l * t.rows + r) * H * t.esz], &b.x[(size_t)tok * H * t.esz],
                                      (size_t)H * t.esz) == 0;
                CHECKF(ok, "%s: expert %u row %d: route (PE %u, slot %u, token %u) is not the row's", what,
                       t.first + l, r, src, k, tok);
                if (!ok)
                    break;
                last_src = src;
            }
        }
    }
    for (uint32_t l = 0; l < L; l++) {
        std::vector<uint64_t> want, got;
        uint32_t e = t.first + l;
        for (uint32_t g = 0; g < t.G; g++)
            for (uint32_t tok = 0; tok < bs[g].bound; tok++)
                for (uint32_t k = 0; k < K; k++)
                    if (bs[g].idx[(size_t)tok * K + k] == e)
                        want.push_back(row_hash(&bs[g].x[(size_t)tok * H * t.esz], (size_t)H * t.esz,
                                                cols ? &bs[g].scale[(size_t)tok * cols] : NULL, cols, 1));
        CHECKF((size_t)num[l] == want.size(), "%s: expert %u got %d tokens, expected %zu", what, e, num[l],
               want.size());
        for (int r = 0; r < num[l] && r < (int)t.rows; r++)
            got.push_back(row_hash(&ox[((size_t)l * t.rows + r) * H * t.esz], (size_t)H * t.esz,
                                   cols ? &os[(size_t)l * t.rows * cols + r] : NULL, cols, t.rows));
        std::sort(want.begin(), want.end());
        std::sort(got.begin(), got.end());
        CHECKF(want == got, "%s: expert %u received a different set of tokens/scales", what, e);
    }
    int partial = -1;
    SYMM_CHECK(symm_moe_ll_partial(t.h, &partial));
    if (partial) {
        /* SYMM_MOE_LL_COMBINE=partial: each expert PE's weighted sum of its routes rounds once to bf16,
         * the token's PE sums those partials in PE order in float32 and rounds again. Against the exact
         * (float64) sum S, with P_r each PE's partial: |out - S| <= 2^-8 sum|P_r| (each partial's
         * rounding; bf16 keeps 8 significant bits) + (n - 1) 2^-24 sum|P_r| (the float32 additions) +
         * 2^-8 (|S| + 2^-8 sum|P_r| + ...) (the last rounding), below tol = 2^-8 (|S| + 2 sum|P_r|).
         * The test's data are exact in float32, so the value must also equal that order of roundings
         * formed on the host, bit for bit. */
        const Batch &b = bs[(uint32_t)me / t.D];
        int bad = 0, far = 0;
        for (uint32_t tok = 0; tok < b.bound; tok++)
            for (uint32_t h = 0; h < H; h++) {
                double exact = 0, sabs = 0;
                float acc = 0;
                for (int r = 0; r < npes; r++) {
                    float pr = 0;
                    int any = 0;
                    for (uint32_t k = 0; k < K; k++) {
                        uint32_t e = b.idx[(size_t)tok * K + k];
                        if (e == SYMM_MOE_NO_EXPERT || e / L != (uint32_t)r)
                            continue;
                        const float y = conv(&b.x[(size_t)tok * H * t.esz], t.esz, h) * expert_scale(e);
                        const float yv = t.ybf ? bf16_f32(f32_bf16(y)) : y;
                        pr += b.w[(size_t)tok * K + k] * yv;
                        exact += (double)b.w[(size_t)tok * K + k] * (double)yv;
                        any = 1;
                    }
                    if (any) {
                        sabs += fabs((double)pr);
                        acc += bf16_f32(f32_bf16(pr));
                    }
                }
                const uint16_t wantb = (uint16_t)f32_bf16(acc), got = out[(size_t)tok * H + h];
                const double tol = (fabs(exact) + 2.0 * sabs) / 256.0;
                if (fabs((double)bf16_f32(got) - exact) > tol && far++ < 3)
                    CHECKF(0, "%s: token %u h %u: combined %g, exact %g, beyond the tolerance %g", what, tok, h,
                           (double)bf16_f32(got), exact, tol);
                if (got != wantb && bad++ < 3)
                    CHECKF(0, "%s: token %u h %u: combined %#x, expected %#x (partials in PE order)", what, tok, h,
                           got, wantb);
            }
        CHECKF(bad == 0 && far == 0, "%s: partial combine: %d values differ, %d beyond the tolerance", what, bad,
               far);
    } else {
        const Batch &b = bs[(uint32_t)me / t.D];
        int bad = 0;
        for (uint32_t tok = 0; tok < b.bound; tok++)
            for (uint32_t h = 0; h < H; h++) {
                float acc = 0;
                for (uint32_t k = 0; k < K; k++) {
                    uint32_t e = b.idx[(size_t)tok * K + k];
                    if (e == SYMM_MOE_NO_EXPERT)
                        continue;
                    const float y = conv(&b.x[(size_t)tok * H * t.esz], t.esz, h) * expert_scale(e);
                    acc += b.w[(size_t)tok * K + k] * (t.ybf ? bf16_f32(f32_bf16(y)) : y);
                }
                uint16_t wantb = (uint16_t)f32_bf16(acc);
                if (out[(size_t)tok * H + h] != wantb && bad++ < 3)
                    CHECKF(0, "%s: token %u h %u: combined %#x, expected %#x (%g)", what, tok, h,
                           out[(size_t)tok * H + h], wantb, acc);
            }
        CHECKF(bad == 0, "%s: %d combined values differ", what, bad);
    }
}

/* skip: a dispatch of half the tokens first, whose combine is skipped (the handle's
 * order allows it); the round's own dispatch and combine must not see it. */
static void ll_round(LL &t, const std::vector<Batch> &bs, int use_bound, int split, int skip = 0) {
    symm_moe_dispatch_args_t d;
    symm_moe_combine_args_t c;
    const Batch &b = bs[(uint32_t)me / t.D];
    ll_upload(t, b);
    ll_args(t, b, use_bound, &d, &c);
    if (skip) {
        symm_moe_dispatch_args_t half = d;
        half.num_tokens = b.m / 2;
        half.bound_m = NULL;
        SYMM_CHECK(symm_moe_dispatch(t.h, &half, SYMM_MOE_SEND_RECV, stream));
    }
    if (split) {
        SYMM_CHECK(symm_moe_dispatch(t.h, &d, SYMM_MOE_SEND, stream));
        spin<<<1, 32, 0, stream>>>(20000);
        SYMM_CHECK(symm_moe_dispatch(t.h, &d, SYMM_MOE_RECV, stream));
    } else {
        SYMM_CHECK(symm_moe_dispatch(t.h, &d, SYMM_MOE_SEND_RECV, stream));
    }
    ll_experts_launch(t);
    if (split) {
        SYMM_CHECK(symm_moe_combine(t.h, &c, SYMM_MOE_SEND, stream));
        spin<<<1, 32, 0, stream>>>(20000);
        SYMM_CHECK(symm_moe_combine(t.h, &c, SYMM_MOE_RECV, stream));
    } else {
        SYMM_CHECK(symm_moe_combine(t.h, &c, SYMM_MOE_SEND_RECV, stream));
    }
}

static void part_ll(void) {
    /* ybf: expert_y in bf16 (else f32); 2: its rows one element past 16-byte alignment */
    struct { uint32_t E, K, H, M; int esz, scales, dp, bound, empty, iters, ybf; } cases[] = {
        {8, 3, 512, 10, 1, 1, 1, 0, -1, 3, 0},
        {8, 3, 512, 10, 1, 1, 2, 1, -1, 3, 0},
        {8, 3, 512, 10, 2, 0, 1, 1, 0, 3, 0},
        {8, 3, 512, 10, 2, 0, 2, 0, 1, 3, 0},
        {64, 6, 2048, 33, 1, 1, 1, 1, -1, 50, 0},
        /* rows large enough that, with SYMM_MOE_PACKETS=auto, some calls' rows go as packets and others
         * plainly (moe_ll.cuh), in both directions, the form changing from call to call and from PE to PE */
        {16, 4, 7168, 48, 1, 1, 1, 1, -1, 8, 0},
        {16, 2, 4096, 70, 2, 0, 2, 0, -1, 8, 0},
        {16, 2, 1024, 200, 2, 0, 1, 1, -1, 8, 0},
        /* the decode shape's experts and top-k: calls of 32 tokens and more post their lists block by
         * block; more (expert, source) items than a block's threads (each block takes its own items),
         * and more routes than one index chunk (the lists scanned expert by expert, chunk by chunk) */
        {256, 8, 512, 128, 1, 1, 1, 1, -1, 6, 0},
        {1024, 8, 256, 100, 2, 0, 2, 0, -1, 3, 0},
        {64, 8, 256, 1000, 1, 1, 1, 1, -1, 4, 0},
        {1024, 8, 128, 600, 1, 1, 1, 0, -1, 3, 0},
        /* bf16 rows back, as the bench's (calls of 256 routes and more take their own combine kernel) */
        {256, 8, 1024, 128, 1, 1, 1, 1, -1, 4, 1},
        {64, 6, 2048, 100, 2, 0, 2, 0, -1, 3, 1},
        {64, 6, 512, 96, 1, 1, 1, 0, -1, 3, 2},
    };
    for (auto &cs : cases) {
        LL t;
        char what[128];
        if (cs.dp > npes || npes % cs.dp || cs.E % (uint32_t)npes)
            continue;
        ll_make(t, cs.E, cs.K, cs.H, cs.M, cs.esz, cs.scales, cs.dp);
        t.ybf = cs.ybf;
        for (int it = 0; it < cs.iters; it++) {
            std::vector<Batch> bs = ll_batches(t, 1000 + cs.E + cs.H + cs.dp, it, cs.bound,
                                               cs.empty >= (int)t.G ? -1 : cs.empty);
            snprintf(what, sizeof what, "ll E%u K%u H%u M%u esz%d dp%d bound%d y%s call %d", cs.E, cs.K, cs.H, cs.M,
                     cs.esz, cs.dp, cs.bound, cs.ybf ? (cs.ybf == 2 ? " bf16 unaligned" : " bf16") : " f32", it);
            ll_round(t, bs, cs.bound, it % 2, it == 2);
            ll_verify(t, bs, what);
        }
        SYMM_CHECK(symm_moe_check(t.h, stream));
        ll_free(t);
    }
}

/* ---- high throughput ------------------------------------------------------------------ */

struct HT {
    symm_moe_config_t cfg;
    symm_moe_t *h;
    symm_moe_ht_recv_t r;
    uint32_t E, K, H, M, L, cols, first;
    int esz;
    uint32_t yoff; /* y starts this many elements into its allocation */
    unsigned char *d_x;
    float *d_xs, *d_w;
    int32_t *d_idx;
    uint16_t *d_y, *d_out; /* d_y: y_heap or y_dev, what the next combine reads */
    uint16_t *y_heap, *y_dev; /* y in the symmetric heap (a pull combine's peers read it there) or not */
    void *into_x;  /* symm_moe_ht_dispatch_into's buffers for the next round (NULL: the handle's) */
    float *into_s;
    const void *rx; /* where the last round's rows landed */
    const float *rs;
    uint32_t wcols;  /* the combine's side channel: values per row (0: plain symm_moe_ht_combine) */
    float *d_wv;     /* its values on the expert side, [capacity][K] (ht_wexperts) */
    float *d_ow;     /* what comes back, [M][K + 1]: rows one value apart */
};

/* The side channel of a combine of HT handle t (NULL without one). */
static const symm_moe_ht_weights_t *ht_wargs(const HT &t, symm_moe_ht_weights_t *w) {
    if (!t.wcols)
        return NULL;
    memset(w, 0, sizeof(*w));
    w->w = t.d_wv;
    w->w_stride = t.K;
    w->w_rows = t.r.capacity;
    w->out_w = t.d_ow;
    w->out_w_stride = t.K + 1;
    w->out_w_rows = t.M;
    w->cols = t.wcols;
    return w;
}

/* A combine of t with its side channel when it has one. */
static symm_status_t ht_combine_call(const HT &t, int flags) {
    symm_moe_ht_weights_t w;
    return symm_moe_ht_combine_weights(t.h, t.d_y + t.yoff, SYMM_DTYPE_BF16, t.H, t.r.capacity, t.d_out,
                                       SYMM_DTYPE_BF16, t.H, t.M, ht_wargs(t, &w), flags, stream);
}

static void ht_make(HT &t, uint32_t E, uint32_t K, uint32_t H, uint32_t M, int esz, int scales) {
    memset(&t, 0, sizeof(t));
    t.E = E; t.K = K; t.H = H; t.M = M; t.esz = esz;
    t.cols = scales ? (H + 127) / 128 : 0;
    t.cfg = moe_config(SYMM_MOE_HIGH_THROUGHPUT, E, K, H, M, esz, t.cols, 1);
    SYMM_CHECK(symm_moe_create(&t.cfg, NULL, &t.h));
    SYMM_CHECK(symm_moe_ht_recv_buffers(t.h, &t.r));
    t.rx = t.r.x; /* until a round names other buffers (part_graph dispatches without ht_round) */
    t.rs = t.r.x_scale;
    t.L = (uint32_t)symm_moe_local_experts(t.h);
    t.first = (uint32_t)symm_moe_first_expert(t.h);
    t.d_x = dalloc<unsigned char>((size_t)M * H * esz);
    t.d_xs = dalloc<float>((size_t)M * t.cols);
    t.d_w = dalloc<float>((size_t)M * K);
    t.d_idx = dalloc<int32_t>((size_t)M * K);
    t.y_dev = dalloc<uint16_t>(t.r.capacity * H + 8);
    SYMM_CHECK(symm_malloc((t.r.capacity * H + 8) * 2, (void **)&t.y_heap));
    t.d_y = t.y_heap;
    t.d_out = dalloc<uint16_t>((size_t)M * H);
    t.d_wv = dalloc<float>(t.r.capacity * K);
    t.d_ow = dalloc<float>((size_t)M * (K + 1));
}

static void ht_free(HT &t) {
    SYMM_CHECK(symm_moe_destroy(t.h));
    cudaFree(t.d_x); cudaFree(t.d_xs); cudaFree(t.d_w); cudaFree(t.d_idx); cudaFree(t.y_dev); cudaFree(t.d_out);
    cudaFree(t.d_wv); cudaFree(t.d_ow);
    SYMM_CHECK(symm_free(t.y_heap));
}

/* Every PE's batch (PE `empty` sends nothing); a few slots are -1. */
static std::vector<Batch> ht_batches(const HT &t, uint64_t seed, int it, int empty) {
    std::vector<Batch> b(npes);
    uint64_t s = seed * 31337 + (uint64_t)it;
    for (int p = 0; p < npes; p++) {
        uint32_t m = p == empty ? 0 : t.M - (uint32_t)(rnd(&s) % (t.M / 4 + 1));
        make_batch(b[p], m, m, t.E, t.K, t.H, t.esz, t.cols, s + (uint64_t)p * 7777);
        for (uint32_t tok = 0; tok < m; tok += 13)
            b[p].idx[(size_t)tok * t.K + t.K - 1] = 0xffffffffu; /* -1: no expert */
    }
    return b;
}

/* The dispatch arguments of HT handle t's inputs for m tokens (weights: t's, or NULL). */
static symm_moe_ht_dispatch_args_t ht_args(const HT &t, size_t m, int weights) {
    symm_moe_ht_dispatch_args_t d;
    memset(&d, 0, sizeof(d));
    d.x = t.d_x;
    d.x_stride = t.H;
    d.x_dtype = t.esz == 1 ? SYMM_DTYPE_FP8_E4M3 : SYMM_DTYPE_BF16;
    d.x_scale = t.cols ? t.d_xs : NULL;
    d.x_scale_stride[0] = t.cols;
    d.x_scale_stride[1] = 1;
    d.indices = t.d_idx;
    d.indices_dtype = SYMM_DTYPE_I32;
    d.weights = weights ? t.d_w : NULL;
    d.num_tokens = m;
    return d;
}

/* The experts of HT handle t on the last dispatch's rows: y, and the side channel's values. */
static void ht_experts_launch(HT &t) {
    ht_experts<<<256, 256, 0, stream>>>((const unsigned char *)t.rx, t.esz, t.r.indices, t.r.weights, t.r.num_recv,
                                        t.d_y + t.yoff, t.K, t.H, t.first);
    ht_wexperts<<<64, 256, 0, stream>>>(t.r.weights, t.r.num_recv, t.d_wv, t.K, me);
}

static void ht_round(HT &t, const Batch &b, int split, int skip = 0) {
    symm_moe_ht_dispatch_args_t d;
    CUDA_CHECK(cudaMemcpyAsync(t.d_x, b.x.data(), b.x.size(), cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaMemcpyAsync(t.d_xs, b.scale.data(), b.scale.size() * 4, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaMemcpyAsync(t.d_idx, b.idx.data(), b.idx.size() * 4, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaMemcpyAsync(t.d_w, b.w.data(), b.w.size() * 4, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    d = ht_args(t, b.m, 1);
    if (skip) { /* a dispatch of half the tokens whose combine is skipped */
        symm_moe_ht_dispatch_args_t half = d;
        half.num_tokens = b.m / 2;
        SYMM_CHECK(symm_moe_ht_dispatch(t.h, &half, SYMM_MOE_SEND_RECV, stream));
    }
    t.rx = t.into_x ? t.into_x : t.r.x;
    t.rs = t.into_s ? t.into_s : t.r.x_scale;
    if (split && (t.into_x || t.into_s)) { /* the receive half takes what the send half named (or NULL) */
        SYMM_CHECK(symm_moe_ht_dispatch_into(t.h, &d, t.into_x, t.into_s, SYMM_MOE_SEND, stream));
        spin<<<1, 32, 0, stream>>>(20000);
        SYMM_CHECK(symm_moe_ht_dispatch_into(t.h, &d, NULL, t.into_s, SYMM_MOE_RECV, stream));
    } else if (split) {
        SYMM_CHECK(symm_moe_ht_dispatch(t.h, &d, SYMM_MOE_SEND, stream));
        spin<<<1, 32, 0, stream>>>(20000);
        SYMM_CHECK(symm_moe_ht_dispatch(t.h, &d, SYMM_MOE_RECV, stream));
    } else if (t.into_x || t.into_s) {
        SYMM_CHECK(symm_moe_ht_dispatch_into(t.h, &d, t.into_x, t.into_s, SYMM_MOE_SEND_RECV, stream));
    } else {
        SYMM_CHECK(symm_moe_ht_dispatch(t.h, &d, SYMM_MOE_SEND_RECV, stream));
    }
    ht_experts_launch(t);
    if (!t.wcols) { /* the plain call, as callers without weights make it */
        SYMM_CHECK(symm_moe_ht_combine(t.h, t.d_y + t.yoff, SYMM_DTYPE_BF16, t.H, t.r.capacity, t.d_out,
                                       SYMM_DTYPE_BF16, t.H, t.M, split ? SYMM_MOE_SEND : SYMM_MOE_SEND_RECV, stream));
        if (split)
            SYMM_CHECK(symm_moe_ht_combine(t.h, t.d_y + t.yoff, SYMM_DTYPE_BF16, t.H, t.r.capacity, t.d_out,
                                           SYMM_DTYPE_BF16, t.H, t.M, SYMM_MOE_RECV, stream));
        return;
    }
    CUDA_CHECK(cudaMemsetAsync(t.d_ow, 0xff, (size_t)t.M * (t.K + 1) * 4, stream)); /* NaNs where nothing is written */
    SYMM_CHECK(ht_combine_call(t, split ? SYMM_MOE_SEND : SYMM_MOE_SEND_RECV));
    if (split)
        SYMM_CHECK(ht_combine_call(t, SYMM_MOE_RECV));
}

static void ht_verify(HT &t, const std::vector<Batch> &bs, const char *what) {
    const uint32_t H = t.H, K = t.K, L = t.L, cols = t.cols, cap = (uint32_t)t.r.capacity;
    const size_t xb = (size_t)H * t.esz;
    int32_t num = 0;
    std::vector<int32_t> per(L), idx((size_t)cap * K), src((size_t)cap * 2);
    std::vector<unsigned char> x((size_t)cap * xb);
    std::vector<float> sc((size_t)cap * cols), w((size_t)cap * K);
    std::vector<uint16_t> out((size_t)t.M * H);
    std::vector<int32_t> want_per(L, 0);
    uint32_t row = 0;
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaMemcpy(&num, t.r.num_recv, 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(per.data(), t.r.num_recv_per_expert, L * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(idx.data(), t.r.indices, idx.size() * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(src.data(), t.r.src, src.size() * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(x.data(), t.rx, x.size(), cudaMemcpyDeviceToHost));
    if (cols)
        CUDA_CHECK(cudaMemcpy(sc.data(), t.rs, sc.size() * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(w.data(), t.r.weights, w.size() * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(out.data(), t.d_out, out.size() * 2, cudaMemcpyDeviceToHost));
    for (int p = 0; p < npes; p++) {
        const Batch &b = bs[p];
        for (uint32_t tok = 0; tok < b.m; tok++) {
            int here = 0;
            for (uint32_t k = 0; k < K; k++) {
                uint32_t e = b.idx[(size_t)tok * K + k];
                if (e != 0xffffffffu && e / L == (uint32_t)me) {
                    here = 1;
                    want_per[e % L]++;
                }
            }
            if (!here)
                continue;
            if (row < (uint32_t)num && row < cap) {
                CHECKF(src[2 * row] == p && src[2 * row + 1] == (int32_t)tok, "%s: row %u from (%d, %d), expected "
                       "(%d, %u)", what, row, src[2 * row], src[2 * row + 1], p, tok);
                CHECKF(memcmp(&x[(size_t)row * xb], &b.x[(size_t)tok * xb], xb) == 0, "%s: row %u data", what, row);
                CHECKF(cols == 0 || memcmp(&sc[(size_t)row * cols], &b.scale[(size_t)tok * cols], cols * 4) == 0,
                       "%s: row %u scales", what, row);
                for (uint32_t k = 0; k < K; k++) {
                    uint32_t e = b.idx[(size_t)tok * K + k];
                    int32_t le = e != 0xffffffffu && e / L == (uint32_t)me ? (int32_t)(e % L) : -1;
                    CHECKF(idx[(size_t)row * K + k] == le, "%s: row %u slot %u index %d, expected %d", what, row, k,
                           idx[(size_t)row * K + k], le);
                    CHECKF(w[(size_t)row * K + k] == b.w[(size_t)tok * K + k], "%s: row %u weight", what, row);
                }
            }
            row++;
        }
    }
    CHECKF((uint32_t)num == row, "%s: received %d rows, expected %u", what, num, row);
    CHECKF(per == want_per, "%s: tokens per local expert differ", what);
    {
        const Batch &b = bs[me];
        int bad = 0;
        for (uint32_t tok = 0; tok < b.m; tok++)
            for (uint32_t h = 0; h < H; h++) {
                float acc = 0;
                for (int r = 0; r < npes; r++) {
                    float ws = 0;
                    int in = 0;
                    for (uint32_t k = 0; k < K; k++) {
                        uint32_t e = b.idx[(size_t)tok * K + k];
                        if (e != 0xffffffffu && e / L == (uint32_t)r) {
                            ws += b.w[(size_t)tok * K + k] * expert_scale(e);
                            in = 1;
                        }
                    }
                    if (in)
                        acc += bf16_f32(
                            f32_bf16(conv(&b.x[(size_t)tok * xb], t.esz, h) * ws));
                }
                uint16_t want = (uint16_t)f32_bf16(acc);
                if (out[(size_t)tok * H + h] != want && bad++ < 3)
                    CHECKF(0, "%s: token %u h %u: combined %#x, expected %#x", what, tok, h, out[(size_t)tok * H + h],
                           want);
            }
        CHECKF(bad == 0, "%s: %d combined values differ", what, bad);
    }
    if (t.wcols) { /* the side channel: per token, the PEs' values in PE order, added in float32 from 0 */
        const Batch &b = bs[me];
        const uint32_t ows = K + 1;
        std::vector<float> ow((size_t)t.M * ows);
        int bad = 0;
        CUDA_CHECK(cudaMemcpy(ow.data(), t.d_ow, ow.size() * 4, cudaMemcpyDeviceToHost));
        for (uint32_t tok = 0; tok < b.m; tok++)
            for (uint32_t c = 0; c < t.wcols; c++) {
                float acc = 0.0f;
                for (int r = 0; r < npes; r++) {
                    int in = 0;
                    for (uint32_t k = 0; k < K; k++) {
                        uint32_t e = b.idx[(size_t)tok * K + k];
                        in |= e != 0xffffffffu && e / L == (uint32_t)r;
                    }
                    if (in) {
                        volatile float v = b.w[(size_t)tok * K + c] * wscale(r); /* no fused multiply-add */
                        acc += v;
                    }
                }
                const float got = ow[(size_t)tok * ows + c];
                if (memcmp(&got, &acc, 4) != 0 && bad++ < 3)
                    CHECKF(0, "%s: token %u weight column %u: %a, expected %a", what, tok, c, (double)got,
                           (double)acc);
            }
        for (uint32_t tok = 0; tok < b.m && t.wcols < ows; tok++) { /* columns past cols stay untouched */
            uint32_t u;
            memcpy(&u, &ow[(size_t)tok * ows + t.wcols], 4);
            if (u != 0xffffffffu && bad++ < 3)
                CHECKF(0, "%s: token %u weight column %u (past cols %u) was written", what, tok, t.wcols, t.wcols);
        }
        CHECKF(bad == 0, "%s: %d combined weights differ", what, bad);
    }
}

static void expect_msg(symm_status_t st, symm_status_t want, const char *needle, const char *what);

/* symm_moe_ht_combine_weights' checks, before anything runs (each refused call leaves the
 * handle where it was), on a dispatch of the tokens the last round left in t's inputs; then
 * a receive half whose cols differ from its send half's. The handle works on afterwards. */
static void ht_weight_errors(HT &t) {
    symm_moe_ht_dispatch_args_t d = ht_args(t, t.M / 2, 1);
    symm_moe_ht_weights_t w, b;
    const uint32_t saved = t.wcols;
    t.wcols = t.K;
    ht_wargs(t, &w);
    SYMM_CHECK(symm_moe_ht_dispatch(t.h, &d, SYMM_MOE_SEND_RECV, stream));
    t.rx = t.r.x;
    t.rs = t.r.x_scale;
    ht_experts_launch(t);
#define WBAD(field, value, needle, what)                                                                      \
    do {                                                                                                      \
        b = w;                                                                                                \
        b.field = value;                                                                                      \
        expect_msg(symm_moe_ht_combine_weights(t.h, t.d_y, SYMM_DTYPE_BF16, t.H, t.r.capacity, t.d_out,       \
                                               SYMM_DTYPE_BF16, t.H, t.M, &b, SYMM_MOE_SEND_RECV, stream),     \
                   SYMM_ERR_INVALID_ARG, needle, what);                                                       \
    } while (0)
    WBAD(w, NULL, "weights.w is NULL", "weights: w NULL");
    WBAD(out_w, NULL, "weights.out_w is NULL", "weights: out_w NULL");
    WBAD(cols, t.K + 1, "above experts_per_token", "weights: cols above top-k");
    WBAD(w_stride, (int64_t)t.K - 1, "row stride", "weights: w stride below cols");
    WBAD(out_w_stride, -1, "row stride", "weights: negative out_w stride");
    WBAD(w_rows, t.r.capacity - 1, "below y's", "weights: w shorter than y");
    WBAD(out_w_rows, t.M / 2 - 1, "below the dispatch's num_tokens", "weights: out_w short");
    WBAD(w, (const float *)(const void *)((const char *)t.d_wv + 2), "4-byte aligned", "weights: w misaligned");
#undef WBAD
    SYMM_CHECK(symm_moe_ht_combine_weights(t.h, t.d_y, SYMM_DTYPE_BF16, t.H, t.r.capacity, t.d_out, SYMM_DTYPE_BF16,
                                           t.H, t.M, &w, SYMM_MOE_SEND, stream));
    b = w;
    b.cols = t.K - 1;
    expect_msg(symm_moe_ht_combine_weights(t.h, t.d_y, SYMM_DTYPE_BF16, t.H, t.r.capacity, t.d_out, SYMM_DTYPE_BF16,
                                           t.H, t.M, &b, SYMM_MOE_RECV, stream),
               SYMM_ERR_INVALID_ARG, "its send half had", "weights: a receive half with other cols");
    expect_msg(symm_moe_ht_combine(t.h, t.d_y, SYMM_DTYPE_BF16, t.H, t.r.capacity, t.d_out, SYMM_DTYPE_BF16, t.H, t.M,
                                   SYMM_MOE_RECV, stream),
               SYMM_ERR_INVALID_ARG, "its send half had", "weights: a plain receive half after a weighted send");
    SYMM_CHECK(symm_moe_ht_combine_weights(t.h, t.d_y, SYMM_DTYPE_BF16, t.H, t.r.capacity, t.d_out, SYMM_DTYPE_BF16,
                                           t.H, t.M, &w, SYMM_MOE_RECV, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    t.wcols = saved;
}

/* symm_moe_ht_dispatch_into's checks, before anything runs: buffers outside
 * the heap, misaligned, short, inside the handle, overlapping; scales on a
 * handle without them; a receive half with other buffers than its send half.
 * The handle works on afterwards. */
static void ht_into_errors(HT &t, void *a, float *as) {
    symm_moe_ht_dispatch_args_t d;
    size_t xb = t.r.capacity * (size_t)t.H * (size_t)t.esz;
    void *small = NULL, *dev = NULL;
    d = ht_args(t, 0, 0);
    SYMM_CHECK(symm_malloc(xb / 2, &small));
    CUDA_CHECK(cudaMalloc(&dev, xb));
    expect_msg(symm_moe_ht_dispatch_into(t.h, &d, dev, as, SYMM_MOE_SEND_RECV, stream), SYMM_ERR_INVALID_ARG,
               "symmetric heap", "into: cudaMalloc'd recv_x");
    expect_msg(symm_moe_ht_dispatch_into(t.h, &d, small, as, SYMM_MOE_SEND_RECV, stream), SYMM_ERR_INVALID_ARG,
               "inside one block", "into: recv_x of half the bytes");
    expect_msg(symm_moe_ht_dispatch_into(t.h, &d, (char *)a + 8, as, SYMM_MOE_SEND_RECV, stream),
               SYMM_ERR_INVALID_ARG, "16-byte aligned", "into: misaligned recv_x");
    expect_msg(symm_moe_ht_dispatch_into(t.h, &d, (void *)((const char *)t.r.x - 4096), as, SYMM_MOE_SEND_RECV,
                                         stream), SYMM_ERR_INVALID_ARG, "overlaps the handle", "into: recv_x inside the handle");
    expect_msg(symm_moe_ht_dispatch_into(t.h, &d, a, (float *)a, SYMM_MOE_SEND_RECV, stream), SYMM_ERR_INVALID_ARG,
               "overlap", "into: recv_x_scale over recv_x");
    SYMM_CHECK(symm_moe_ht_dispatch_into(t.h, &d, a, as, SYMM_MOE_SEND, stream));
    expect_msg(symm_moe_ht_dispatch_into(t.h, &d, NULL, t.r.x_scale, SYMM_MOE_RECV, stream), SYMM_ERR_INVALID_ARG,
               "send half", "into: a receive half with other buffers");
    SYMM_CHECK(symm_moe_ht_dispatch_into(t.h, &d, a, NULL, SYMM_MOE_RECV, stream));
    SYMM_CHECK(symm_moe_ht_combine(t.h, t.d_y, SYMM_DTYPE_BF16, t.H, t.r.capacity, t.d_out, SYMM_DTYPE_BF16, t.H,
                                   t.M, SYMM_MOE_SEND_RECV, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    SYMM_CHECK(symm_free(small));
    CUDA_CHECK(cudaFree(dev));
}

static void part_ht(void) {
    HT t;
    char what[128];
    void *a = NULL, *b = NULL;
    if (256 % npes)
        return;
    ht_make(t, 256, 8, 1024, 2048, 1, 1);
    /* the caller's receive buffers: x and scales of one allocation each time, as symm.moe.deep_ep's */
    {
        const size_t xb = t.r.capacity * (size_t)t.H, sb = t.r.capacity * (size_t)t.cols * 4;
        SYMM_CHECK(symm_malloc(xb + sb, &a));
        SYMM_CHECK(symm_malloc(xb + sb, &b));
        ht_into_errors(t, a, (float *)(void *)((char *)a + xb));
        /* calls 0-3: the handle's; 4-7: each PE its own choice (none, A, B, A's x with the handle's scales),
         * and the halves as one kernel on some PEs, as two on the others */
        for (int it = 0; it < 8; it++) {
            std::vector<Batch> bs = ht_batches(t, 77, it, it == 2 ? npes - 1 : -1);
            const int pick = it < 4 ? 0 : (it + me) % 4, split = it < 4 ? it % 2 : (it + me) % 2;
            void *base = pick == 1 || pick == 3 ? a : pick == 2 ? b : NULL;
            t.into_x = base;
            t.into_s = base && pick != 3 ? (float *)(void *)((char *)base + xb) : NULL;
            /* y outside the heap on some PEs some calls: a pull combine's PE then pushes its rows */
            t.d_y = (it + me) % 3 == 1 ? t.y_dev : t.y_heap;
            /* the side channel (the same cols on every PE): none, every top-k column, all but the last three */
            t.wcols = it % 3 == 0 ? 0 : it % 3 == 1 ? t.K : t.K - 3;
            snprintf(what, sizeof what, "ht call %d (receive buffers %s, y %s, %s, %u weights)", it,
                     pick == 0 ? "the handle's" : pick == 1 ? "A" : pick == 2 ? "B" : "A's x, the handle's scales",
                     t.d_y == t.y_heap ? "in the heap" : "cudaMalloc'd", split ? "halves apart" : "one kernel",
                     t.wcols);
            ht_round(t, bs[me], split, it == 3 || it == 6);
            ht_verify(t, bs, what);
        }
        t.into_x = NULL;
        t.into_s = NULL;
        ht_weight_errors(t);
        { /* and on after the refused calls, with fresh data */
            std::vector<Batch> bs = ht_batches(t, 78, 0, -1);
            t.wcols = t.K;
            ht_round(t, bs[me], 0);
            ht_verify(t, bs, "ht after the weights' refused calls");
        }
    }
    SYMM_CHECK(symm_moe_check(t.h, stream));
    ht_free(t);
    SYMM_CHECK(symm_free(a));
    SYMM_CHECK(symm_free(b));
    /* bf16 rows of 257 vectors: several slices of a warp reducer's 128 per token, the last
     * one partial; both halves in one kernel, the combine schedule's own path */
    ht_make(t, 256, 8, 2056, 300, 2, 0);
    for (int it = 0; it < 2; it++) {
        std::vector<Batch> bs = ht_batches(t, 91, it, -1);
        t.wcols = it ? t.K : 0;
        snprintf(what, sizeof what, "ht hidden 2056, call %d, %u weights", it, t.wcols);
        ht_round(t, bs[me], 0);
        ht_verify(t, bs, what);
    }
    SYMM_CHECK(symm_moe_check(t.h, stream));
    ht_free(t);
    /* y one element (2 bytes) into its allocation: off the 16-byte alignment
     * the one-kernel combine reads this PE's rows with */
    ht_make(t, 256, 8, 1024, 300, 2, 0);
    t.yoff = 1;
    for (int it = 0; it < 2; it++) {
        std::vector<Batch> bs = ht_batches(t, 53, it, -1);
        t.wcols = 5;
        snprintf(what, sizeof what, "ht y at 2 bytes past alignment, call %d, 5 weights", it);
        ht_round(t, bs[me], it);
        ht_verify(t, bs, what);
    }
    SYMM_CHECK(symm_moe_check(t.h, stream));
    ht_free(t);
}

/* ---- graphs ---------------------------------------------------------------------------- */

static void part_graph(void) {
    LL l;
    HT h;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    symm_moe_dispatch_args_t d;
    symm_moe_combine_args_t c;
    symm_moe_ht_dispatch_args_t hd;
    if (8 % npes || 256 % npes)
        return;
    ll_make(l, 8, 3, 512, 10, 1, 1, 1);
    ht_make(h, 256, 8, 1024, 512, 1, 1);
    /* warm-up call outside the capture, then capture both modes with split halves */
    {
        std::vector<Batch> bs = ll_batches(l, 5, 0, 0, -1);
        ll_round(l, bs, 0, 0);
        ll_verify(l, bs, "graph warm-up");
    }
    {
        Batch dummy;
        make_batch(dummy, l.M, l.M, l.E, l.K, l.H, l.esz, l.cols, 1);
        ll_args(l, dummy, 1, &d, &c);
    }
    d.num_tokens = c.num_tokens = l.M; /* the graph keeps the sizes; bound_m says how many are real */
    hd = ht_args(h, h.M, 1); /* fp8 with scales */
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    SYMM_CHECK(symm_moe_dispatch(l.h, &d, SYMM_MOE_SEND, stream));
    spin<<<1, 32, 0, stream>>>(10000);
    SYMM_CHECK(symm_moe_dispatch(l.h, &d, SYMM_MOE_RECV, stream));
    ll_experts_launch(l);
    SYMM_CHECK(symm_moe_combine(l.h, &c, SYMM_MOE_SEND, stream));
    SYMM_CHECK(symm_moe_ht_dispatch(h.h, &hd, SYMM_MOE_SEND, stream));
    SYMM_CHECK(symm_moe_combine(l.h, &c, SYMM_MOE_RECV, stream));
    SYMM_CHECK(symm_moe_ht_dispatch(h.h, &hd, SYMM_MOE_RECV, stream));
    ht_experts_launch(h);
    h.wcols = h.K - 1; /* with the side channel: checked on every replay */
    CUDA_CHECK(cudaMemsetAsync(h.d_ow, 0xff, (size_t)h.M * (h.K + 1) * 4, stream));
    SYMM_CHECK(ht_combine_call(h, SYMM_MOE_SEND_RECV));
    CUDA_CHECK(cudaStreamEndCapture(stream, &g));
    CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
    for (int it = 0; it < 6; it++) {
        char what[64];
        std::vector<Batch> bs = ll_batches(l, 9, it, 1, -1);
        std::vector<Batch> hb;
        /* the graph sends M tokens; bound_m says how many count */
        for (size_t g = 0; g < bs.size(); g++) {
            Batch full;
            make_batch(full, l.M, bs[g].bound, l.E, l.K, l.H, l.esz, l.cols, 4242 + (uint64_t)it * 31 + g);
            bs[g] = full;
        }
        ll_upload(l, bs[(uint32_t)me / l.D]);
        hb = ht_batches(h, 11, it, -1);
        for (auto &b : hb) { /* the graph's num_tokens is M: give every PE full batches */
            Batch full;
            make_batch(full, h.M, h.M, h.E, h.K, h.H, h.esz, h.cols, 999 + (uint64_t)it * 17 + (uint64_t)(&b - &hb[0]));
            b = full;
        }
        CUDA_CHECK(cudaMemcpyAsync(h.d_x, hb[me].x.data(), hb[me].x.size(), cudaMemcpyHostToDevice, stream));
        CUDA_CHECK(
            cudaMemcpyAsync(h.d_xs, hb[me].scale.data(), hb[me].scale.size() * 4, cudaMemcpyHostToDevice, stream));
        CUDA_CHECK(cudaMemcpyAsync(h.d_idx, hb[me].idx.data(), hb[me].idx.size() * 4, cudaMemcpyHostToDevice, stream));
        CUDA_CHECK(cudaMemcpyAsync(h.d_w, hb[me].w.data(), hb[me].w.size() * 4, cudaMemcpyHostToDevice, stream));
        CUDA_CHECK(cudaGraphLaunch(ge, stream));
        snprintf(what, sizeof what, "graph replay %d (low latency)", it);
        ll_verify(l, bs, what);
        snprintf(what, sizeof what, "graph replay %d (high throughput)", it);
        ht_verify(h, hb, what);
        SYMM_CHECK(symm_barrier_all()); /* nobody uploads the next inputs while a peer still sends these */
    }
    CUDA_CHECK(cudaGraphExecDestroy(ge));
    CUDA_CHECK(cudaGraphDestroy(g));
    SYMM_CHECK(symm_moe_check(l.h, stream));
    SYMM_CHECK(symm_moe_check(h.h, stream));
    ll_free(l);
    ht_free(h);
}

/* ---- errors ---------------------------------------------------------------------------- */

static void expect_msg_in(symm_status_t st, const char *msg, symm_status_t want, const char *needle,
                          const char *what) {
    CHECKF(st == want, "%s: status %d, expected %d (%s)", what, (int)st, (int)want, msg);
    CHECKF(strstr(msg, needle) != NULL, "%s: message '%s' lacks '%s'", what, msg, needle);
}

static void expect_msg(symm_status_t st, symm_status_t want, const char *needle, const char *what) {
    expect_msg_in(st, symm_last_error(), want, needle, what);
}

/* One round whose PE 0 names a bad expert (`dup`: token 2 repeats its slot 0
 * in slot 1; else token 1's slot 2 is 99): the route is skipped on the device,
 * every PE completes, PE 0 gets the error (from the next call or the check). */
static void error_round(LL &t, int dup, int round) {
    symm_moe_dispatch_args_t d;
    symm_moe_combine_args_t c;
    symm_status_t st;
    std::vector<Batch> bs(t.G);
    for (uint32_t g = 0; g < t.G; g++)
        make_batch(bs[g], t.M, t.M, t.E, t.K, t.H, t.esz, t.cols, 31337 + (uint64_t)round * 101 + g);
    Batch &b = bs[me];
    int inject = me == 0;
    if (inject) {
        if (dup)
            b.idx[2 * 3 + 1] = b.idx[2 * 3 + 0];
        else
            b.idx[1 * 3 + 2] = 99;
    }
    ll_upload(t, b);
    ll_args(t, b, 0, &d, &c);
    /* every call is enqueued; PE 0's error comes from whichever call looks
     * after the kernel recorded it, or from the check */
    std::string msg; /* the report's message, kept before a later call clears it */
    st = symm_moe_dispatch(t.h, &d, SYMM_MOE_SEND_RECV, stream);
    msg = symm_last_error();
    ll_experts_launch(t);
    if (st == SYMM_SUCCESS) {
        st = symm_moe_combine(t.h, &c, SYMM_MOE_SEND_RECV, stream);
        msg = symm_last_error();
    } else {
        CHECKF(symm_moe_combine(t.h, &c, SYMM_MOE_SEND_RECV, stream) == SYMM_SUCCESS, "combine after the report");
    }
    if (inject) {
        if (st == SYMM_SUCCESS) {
            st = symm_moe_check(t.h, stream);
            msg = symm_last_error();
        }
        expect_msg_in(st, msg.c_str(), SYMM_ERR_INVALID_ARG,
                      dup ? "indices[2][1] = " : "indices[1][2] = 99 is outside [0, num_experts 8)",
                      dup ? "repeated expert" : "expert out of range");
        if (dup)
            expect_msg_in(st, msg.c_str(), SYMM_ERR_INVALID_ARG, "repeats an earlier expert", "repeated expert");
        expect_msg(symm_moe_check(t.h, stream), SYMM_SUCCESS, "", "reported once");
    } else {
        SYMM_CHECK(st);
        SYMM_CHECK(symm_moe_check(t.h, stream));
    }
    SYMM_CHECK(symm_barrier_all());
}

static void part_errors(void) {
    LL t;
    symm_moe_dispatch_args_t d, bad;
    symm_moe_combine_args_t c;
    if (8 % npes)
        return;
    ll_make(t, 8, 3, 512, 10, 2, 0, 1);
    {
        std::vector<Batch> bs = ll_batches(t, 3, 0, 0, -1);
        ll_upload(t, bs[me]);
        ll_args(t, bs[me], 0, &d, &c);
    }
    /* out of order and too large: refused before anything is launched, on every PE */
    expect_msg(symm_moe_combine(t.h, &c, SYMM_MOE_SEND_RECV, stream), SYMM_ERR_INVALID_ARG, "out of order",
               "combine first");
    bad = d;
    bad.num_tokens = 11;
    expect_msg(symm_moe_dispatch(t.h, &bad, SYMM_MOE_SEND_RECV, stream), SYMM_ERR_INVALID_ARG,
               "above max_num_tokens", "too many tokens");
    expect_msg(symm_moe_dispatch(t.h, &d, 0, stream), SYMM_ERR_INVALID_ARG, "cannot both be false", "flags 0");
    error_round(t, 0, 1);
    error_round(t, 1, 2);
    /* and a clean round after them is exact again */
    {
        std::vector<Batch> bs = ll_batches(t, 4, 0, 0, -1);
        ll_round(t, bs, 0, 0);
        ll_verify(t, bs, "after the errors");
    }
    ll_free(t);
}

/* ---- the SM budget ------------------------------------------------------------------------- */

/* Budgets of 1, 2, 8, 24 SMs and the default (all the PE may fill), odd PEs
 * one less than even ones where they can (budgets are per PE): every kernel
 * of both modes launches at most the budget (as the kernels record it), and
 * every round is exact, split halves included. Bad budgets are refused. */
static void part_budget(void) {
    LL l;
    HT h;
    int share = 0, got = 0;
    const int budgets[] = {1, 2, 8, 24, 0};
    if (8 % npes || 256 % npes)
        return;
    SYMM_CHECK(symm_sm_share(&share));
    ll_make(l, 8, 3, 512, 10, 1, 1, 1);
    ht_make(h, 256, 8, 1024, 512, 1, 1);
    expect_msg(symm_moe_set_num_sms(l.h, -1), SYMM_ERR_INVALID_ARG, "num_sms -1 is not in 0..", "negative budget");
    expect_msg(symm_moe_set_num_sms(h.h, share + 1), SYMM_ERR_INVALID_ARG, "symm_sm_share", "budget above the share");
    expect_msg(symm_moe_set_num_sms(NULL, 1), SYMM_ERR_INVALID_ARG, "handle is NULL", "NULL handle");
    SYMM_CHECK(symm_moe_get_num_sms(l.h, &got));
    CHECKF(got == share, "default budget %d, expected the SM share %d", got, share);
    for (int i = 0; i < 5; i++) {
        int b = budgets[i], want = b ? b : share;
        char what[96];
        if (want > share)
            continue; /* a shared GPU leaves each PE fewer SMs */
        if (b > 1 && (me & 1)) {
            b--;
            want--;
        }
        SYMM_CHECK(symm_moe_set_num_sms(l.h, b));
        SYMM_CHECK(symm_moe_set_num_sms(h.h, b));
        SYMM_CHECK(symm_moe_get_num_sms(h.h, &got));
        CHECKF(got == want, "budget %d: get_num_sms says %d", want, got);
        SYMM_CHECK(symm_moe_launched_blocks(l.h, stream, &got)); /* start counting */
        SYMM_CHECK(symm_moe_launched_blocks(h.h, stream, &got));
        for (int it = 0; it < 2; it++) {
            std::vector<Batch> bs = ll_batches(l, 70 + (uint64_t)i, it, it, -1);
            std::vector<Batch> hb = ht_batches(h, 50 + (uint64_t)i, it, it == 1 ? 0 : -1);
            snprintf(what, sizeof what, "budget %d (low latency, call %d)", want, it);
            ll_round(l, bs, it, it % 2);
            ll_verify(l, bs, what);
            /* with the side channel: at budget 1 on 4 PEs a pull warp pushes several chunks' values */
            h.wcols = it ? h.K - 3 : h.K;
            snprintf(what, sizeof what, "budget %d (high throughput, call %d, %u weights)", want, it, h.wcols);
            ht_round(h, hb[me], it % 2);
            ht_verify(h, hb, what);
        }
        SYMM_CHECK(symm_moe_launched_blocks(l.h, stream, &got));
        CHECKF(got >= 1 && got <= want, "budget %d: a low-latency kernel ran %d blocks", want, got);
        if (want == 1)
            CHECKF(got == 1, "budget 1: the low-latency kernels ran %d blocks", got);
        SYMM_CHECK(symm_moe_launched_blocks(h.h, stream, &got));
        CHECKF(got >= 1 && got <= want, "budget %d: a high-throughput kernel ran %d blocks", want, got);
        if (want >= 2)
            CHECKF(got >= 2, "budget %d: the high-throughput kernels ran at most %d blocks", want, got);
        SYMM_CHECK(symm_barrier_all());
    }
    SYMM_CHECK(symm_moe_check(l.h, stream));
    SYMM_CHECK(symm_moe_check(h.h, stream));
    ll_free(l);
    ht_free(h);
}

int main(int argc, char **argv) {
    int want = argc > 1 ? atoi(argv[1]) : 0;
    const char *part = argc > 2 ? argv[2] : "ll";
    symm_test_require_pes(want > 0 ? want : 1);
    SYMM_CHECK(symm_init());
    me = symm_my_pe();
    npes = symm_n_pes();
    if (want && want != npes)
        TEST_FAIL("expected %d PEs, got %d", want, npes);
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    if (!strcmp(part, "all")) { /* every part, one start-up */
        part_ll();
        part_ht();
        part_graph();
        part_errors();
        part_budget();
    } else if (!strcmp(part, "ll"))
        part_ll();
    else if (!strcmp(part, "ht"))
        part_ht();
    else if (!strcmp(part, "graph"))
        part_graph();
    else if (!strcmp(part, "errors"))
        part_errors();
    else if (!strcmp(part, "budget"))
        part_budget();
    else
        TEST_FAIL("unknown part %s", part);
    CUDA_CHECK(cudaStreamDestroy(stream));
    SYMM_CHECK(symm_finalize());
    if (failures) {
        fprintf(stderr, "[pe %d] %s: %d checks failed\n", me, part, failures);
        return 1;
    }
    printf("[pe %d] moe %s: passed on %d PEs\n", me, part, npes);
    return 0;
}
