/*
 * test_moe_recv_copy.cu - symm_moe_ht_recv_copy on GPUs, under symmrun on N
 * PEs (argv[1]; PEs may share a GPU): after high-throughput dispatches of
 * fresh random batches (some slots -1, one PE with no tokens in one round),
 * the copy's sources, indices (int32 and int64), weights and counts against
 * the handle's own receive buffers read back: rows below num_recv copied,
 * weights 0 where the index is -1, rows from num_recv up to the capacity
 * -1 / -1 / 0, outputs filled with garbage first, any output left out (NULL)
 * untouched, 0 rows. Then the copy captured in a CUDA graph and replayed
 * after a new dispatch, and refused calls (NULL handle or arguments, rows
 * above the capacity, a bad dtype, misaligned outputs) that leave every
 * output as it was.
 */
#include <string.h>
#include <vector>

#include "symm_test.h"
#include "symm_test_cuda.h"
#include "symm/symm_moe.h"

static int me, npes, failures;
static cudaStream_t stream;

#include "moe_checkf.h"

static const uint32_t K = 3, H = 64, M = 150;

struct Setup {
    symm_moe_t *h;
    symm_moe_ht_recv_t r;
    uint32_t E, L;
    void *x;
    int32_t *idx;
    float *w;
};

/* One collective dispatch of fresh data (PE `empty` sends nothing). */
static void dispatch(Setup &s, uint64_t seed, int empty) {
    uint64_t st = seed * 7919 + (uint64_t)me;
    const uint32_t m = me == empty ? 0 : M - (uint32_t)(symm_test_rand(&st) % 40);
    std::vector<int32_t> idx((size_t)m * K);
    std::vector<float> w((size_t)m * K);
    for (uint32_t t = 0; t < m; t++) {
        uint32_t base = (uint32_t)(symm_test_rand(&st) % s.E);
        for (uint32_t k = 0; k < K; k++) {
            idx[t * K + k] = (int32_t)((base + k * 5) % s.E); /* distinct: E >= 16 */
            if (symm_test_rand(&st) % 7 == 0)
                idx[t * K + k] = -1;
            w[t * K + k] = (float)(1 + symm_test_rand(&st) % 64) / 8.0f;
        }
    }
    CUDA_CHECK(cudaMemcpyAsync(s.idx, idx.data(), idx.size() * 4, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaMemcpyAsync(s.w, w.data(), w.size() * 4, cudaMemcpyHostToDevice, stream));
    symm_moe_ht_dispatch_args_t d;
    memset(&d, 0, sizeof(d));
    d.x = s.x;
    d.x_stride = H;
    d.x_dtype = SYMM_DTYPE_BF16;
    d.indices = s.idx;
    d.indices_dtype = SYMM_DTYPE_I32;
    d.weights = s.w;
    d.num_tokens = m;
    SYMM_CHECK(symm_moe_ht_dispatch(s.h, &d, SYMM_MOE_SEND_RECV, (symm_stream_t)stream));
    SYMM_CHECK(symm_moe_check(s.h, (symm_stream_t)stream));
}

/* What the copy must give, from the handle's buffers as they are now. */
struct Want {
    std::vector<int32_t> src, idx, counts;
    std::vector<float> w;
};

static Want expected(const Setup &s, size_t rows) {
    const size_t cap = s.r.capacity;
    std::vector<int32_t> bsrc(cap * 2), bidx(cap * K), nrecv(1), per(s.L);
    std::vector<float> bw(cap * K);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaMemcpy(bsrc.data(), s.r.src, bsrc.size() * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(bidx.data(), s.r.indices, bidx.size() * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(bw.data(), s.r.weights, bw.size() * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(nrecv.data(), s.r.num_recv, 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(per.data(), s.r.num_recv_per_expert, s.L * 4, cudaMemcpyDeviceToHost));
    Want wt;
    wt.src.assign(rows, -1);
    wt.idx.assign(rows * K, -1);
    wt.w.assign(rows * K, 0.0f);
    for (size_t r = 0; r < rows && r < (size_t)nrecv[0]; r++) {
        wt.src[r] = bsrc[2 * r + 1];
        for (uint32_t k = 0; k < K; k++) {
            wt.idx[r * K + k] = bidx[r * K + k];
            wt.w[r * K + k] = bidx[r * K + k] >= 0 ? bw[r * K + k] : 0.0f;
        }
    }
    wt.counts.push_back(nrecv[0]);
    wt.counts.insert(wt.counts.end(), per.begin(), per.end());
    return wt;
}

/* The caller's outputs, sized for the capacity. */
struct Out {
    int32_t *src, *counts;
    void *idx;
    float *w;
};

static void garbage(const Out &o, size_t cap, uint32_t L) {
    CUDA_CHECK(cudaMemsetAsync(o.src, 0x5a, cap * 4, stream));
    CUDA_CHECK(cudaMemsetAsync(o.idx, 0x5a, cap * K * 8, stream));
    CUDA_CHECK(cudaMemsetAsync(o.w, 0x5a, cap * K * 4, stream));
    CUDA_CHECK(cudaMemsetAsync(o.counts, 0x5a, (1 + L) * 4, stream));
}

/* Compare o with wt for `rows` rows (outputs left out: still garbage). */
static void compare(const Out &o, const Want &wt, size_t rows, size_t cap, uint32_t L, int idx64, int with_rows,
                    int with_counts, const char *what) {
    std::vector<int32_t> src(cap), counts(1 + L);
    std::vector<int64_t> i64(cap * K);
    std::vector<int32_t> i32(cap * K * 2);
    std::vector<float> w(cap * K);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaMemcpy(src.data(), o.src, cap * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(i64.data(), o.idx, cap * K * 8, cudaMemcpyDeviceToHost));
    memcpy(i32.data(), i64.data(), cap * K * 8);
    CUDA_CHECK(cudaMemcpy(w.data(), o.w, cap * K * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(counts.data(), o.counts, (1 + L) * 4, cudaMemcpyDeviceToHost));
    const int32_t g32 = 0x5a5a5a5a;
    const int64_t g64 = 0x5a5a5a5a5a5a5a5all;
    for (size_t r = 0; r < cap; r++) {
        const int in = with_rows && r < rows;
        CHECKF(src[r] == (in ? wt.src[r] : g32), "%s: src_token[%zu] = %d, expected %d", what, r, src[r],
               in ? wt.src[r] : g32);
        for (uint32_t k = 0; k < K; k++) {
            const size_t i = r * K + k;
            if (idx64)
                CHECKF(i64[i] == (in ? (int64_t)wt.idx[i] : g64), "%s: indices[%zu][%u] = %lld, expected %lld", what,
                       r, k, (long long)i64[i], in ? (long long)wt.idx[i] : (long long)g64);
            else
                CHECKF(i32[i] == (in ? wt.idx[i] : g32), "%s: indices[%zu][%u] = %d, expected %d", what, r, k, i32[i],
                       in ? wt.idx[i] : g32);
            float gw;
            memcpy(&gw, &g32, 4);
            const float ew = in ? wt.w[i] : gw;
            CHECKF(memcmp(&w[i], &ew, 4) == 0, "%s: weights[%zu][%u] = %g, expected %g", what, r, k, w[i], ew);
        }
    }
    for (uint32_t x = 0; x <= L; x++)
        CHECKF(counts[x] == (with_counts ? wt.counts[x] : g32), "%s: counts[%u] = %d, expected %d", what, x, counts[x],
               with_counts ? wt.counts[x] : g32);
}

static symm_moe_ht_recv_copy_t args(const Out &o, size_t rows, int idx64, int with_rows, int with_counts) {
    symm_moe_ht_recv_copy_t c;
    memset(&c, 0, sizeof(c));
    c.rows = rows;
    c.src_token = with_rows ? o.src : NULL;
    c.indices = with_rows ? o.idx : NULL;
    c.indices_dtype = idx64 ? SYMM_DTYPE_I64 : SYMM_DTYPE_I32;
    c.weights = with_rows ? o.w : NULL;
    c.counts = with_counts ? o.counts : NULL;
    return c;
}

static void expect_bad(symm_status_t st, const char *needle, const char *what) {
    CHECKF(st == SYMM_ERR_INVALID_ARG, "%s: status %d, expected SYMM_ERR_INVALID_ARG", what, (int)st);
    CHECKF(strstr(symm_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'", what, symm_last_error(), needle);
}

int main(int argc, char **argv) {
    const int want = argc > 1 ? atoi(argv[1]) : 1;
    symm_test_require_pes(want);
    SYMM_CHECK(symm_init());
    me = symm_my_pe();
    npes = symm_n_pes();
    if (want != npes)
        TEST_FAIL("expected %d PEs, got %d", want, npes);
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    Setup s;
    memset(&s, 0, sizeof(s));
    s.E = 16u * (uint32_t)npes;
    symm_moe_config_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.mode = SYMM_MOE_HIGH_THROUGHPUT;
    cfg.max_num_tokens = M;
    cfg.num_experts = s.E;
    cfg.experts_per_token = K;
    cfg.hidden_dim = H;
    cfg.hidden_dim_bytes = H * 2;
    cfg.dp_size = 1;
    SYMM_CHECK(symm_moe_create(&cfg, NULL, &s.h));
    SYMM_CHECK(symm_moe_ht_recv_buffers(s.h, &s.r));
    s.L = (uint32_t)symm_moe_local_experts(s.h);
    CUDA_CHECK(cudaMalloc(&s.x, (size_t)M * H * 2));
    CUDA_CHECK(cudaMemset(s.x, 0, (size_t)M * H * 2));
    CUDA_CHECK(cudaMalloc((void **)&s.idx, (size_t)M * K * 4));
    CUDA_CHECK(cudaMalloc((void **)&s.w, (size_t)M * K * 4));
    const size_t cap = s.r.capacity;
    Out o;
    CUDA_CHECK(cudaMalloc((void **)&o.src, cap * 4));
    CUDA_CHECK(cudaMalloc(&o.idx, cap * K * 8 + 8));
    CUDA_CHECK(cudaMalloc((void **)&o.w, cap * K * 4));
    CUDA_CHECK(cudaMalloc((void **)&o.counts, (1 + s.L) * 4));
    const symm_stream_t ss = (symm_stream_t)stream;

    for (int round = 0; round < 4; round++) {
        dispatch(s, 100 + (uint64_t)round, round == 2 ? npes - 1 : -1);
        const Want full = expected(s, cap);
        const size_t nrecv = (size_t)full.counts[0];
        CHECKF(nrecv <= cap, "round %d: num_recv %zu above the capacity %zu", round, nrecv, cap);
        struct { size_t rows; int idx64, with_rows, with_counts; } cases[] = {
            {nrecv, 1, 1, 1}, {cap, 0, 1, 1}, {cap, 1, 1, 0}, {0, 1, 1, 1}, {nrecv, 0, 0, 1}, {nrecv / 2, 0, 1, 0},
        };
        for (auto &c : cases) {
            char what[128];
            snprintf(what, sizeof what, "round %d rows %zu int%d rows %d counts %d", round, c.rows,
                     c.idx64 ? 64 : 32, c.with_rows, c.with_counts);
            garbage(o, cap, s.L);
            symm_moe_ht_recv_copy_t a = args(o, c.rows, c.idx64, c.with_rows, c.with_counts);
            SYMM_CHECK(symm_moe_ht_recv_copy(s.h, &a, ss));
            compare(o, full, c.rows, cap, s.L, c.idx64, c.with_rows, c.with_counts, what);
        }
    }

    /* captured once; a later dispatch, then the replay copies what that one received */
    {
        cudaGraph_t g;
        cudaGraphExec_t ge;
        symm_moe_ht_recv_copy_t a = args(o, cap, 1, 1, 1);
        CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        SYMM_CHECK(symm_moe_ht_recv_copy(s.h, &a, ss));
        CUDA_CHECK(cudaStreamEndCapture(stream, &g));
        CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
        for (int rep = 0; rep < 3; rep++) {
            dispatch(s, 500 + (uint64_t)rep, -1);
            const Want full = expected(s, cap);
            garbage(o, cap, s.L);
            CUDA_CHECK(cudaGraphLaunch(ge, stream));
            compare(o, full, cap, cap, s.L, 1, 1, 1, "graph replay");
        }
        CUDA_CHECK(cudaGraphExecDestroy(ge));
        CUDA_CHECK(cudaGraphDestroy(g));
    }

    /* refused: nothing runs */
    {
        const Want full = expected(s, cap);
        garbage(o, cap, s.L);
        symm_moe_ht_recv_copy_t a = args(o, cap, 1, 1, 1);
        expect_bad(symm_moe_ht_recv_copy(NULL, &a, ss), "NULL handle", "NULL handle");
        expect_bad(symm_moe_ht_recv_copy(s.h, NULL, ss), "NULL copy arguments", "NULL arguments");
        a.rows = cap + 1;
        expect_bad(symm_moe_ht_recv_copy(s.h, &a, ss), "above the receive capacity", "rows past the capacity");
        a = args(o, cap, 1, 1, 1);
        a.indices_dtype = SYMM_DTYPE_F32;
        expect_bad(symm_moe_ht_recv_copy(s.h, &a, ss), "indices dtype", "float indices");
        a = args(o, cap, 1, 1, 1);
        a.indices = (char *)o.idx + 4;
        expect_bad(symm_moe_ht_recv_copy(s.h, &a, ss), "not aligned", "misaligned int64 indices");
        a = args(o, cap, 1, 1, 1);
        a.counts = (int32_t *)(void *)((char *)o.counts + 2);
        expect_bad(symm_moe_ht_recv_copy(s.h, &a, ss), "not aligned", "misaligned counts");
        compare(o, full, cap, cap, s.L, 1, 0, 0, "after refused calls");
    }

    SYMM_CHECK(symm_moe_destroy(s.h));
    cudaFree(s.x);
    cudaFree(s.idx);
    cudaFree(s.w);
    cudaFree(o.src);
    cudaFree(o.idx);
    cudaFree(o.w);
    cudaFree(o.counts);
    CUDA_CHECK(cudaStreamDestroy(stream));
    SYMM_CHECK(symm_finalize());
    if (failures) {
        fprintf(stderr, "[pe %d] moe recv_copy: %d checks failed\n", me, failures);
        return 1;
    }
    printf("[pe %d] moe recv_copy: passed on %d PEs\n", me, npes);
    return 0;
}
