/*
 * test_moe_layout.cu - symm_moe_layout (DeepEP's dispatch layout without a
 * handle). argv[1] = part:
 *
 *   args    every refused argument, before anything runs (no GPU, no runtime:
 *           the call must return before touching CUDA)
 *   gpu N   under symmrun on N PEs (argv[2]), each PE with its own fresh
 *           random indices: int64, int32 and uint32, -1 and other values
 *           outside the experts, an expert named twice by one token, 0 and 1
 *           tokens, token counts that are no multiple of a warp, top-k not a
 *           multiple of the kernel's loads, 1, 3, N and 64 ranks, experts
 *           beyond one block's chunk (several counting blocks); every output
 *           compared exactly with a host reference, outputs filled with
 *           garbage first (so every value must be written). Then the call
 *           captured in a CUDA graph and replayed with fresh indices, and
 *           refused calls that must leave the outputs as they were.
 */
#include <string.h>
#include <vector>

#include "symm_test.h"
#include "symm_test_cuda.h"
#include "symm/symm_moe.h"

static int failures;

#define CHECKF(cond, ...)                                                \
    do {                                                                 \
        if (!(cond)) {                                                   \
            if (failures++ < 20) {                                       \
                fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);     \
                fprintf(stderr, __VA_ARGS__);                            \
                fprintf(stderr, "\n");                                   \
            }                                                            \
        }                                                                \
    } while (0)

/* st must be SYMM_ERR_INVALID_ARG with a message containing needle. */
static void expect_bad(symm_status_t st, const char *needle, const char *what) {
    CHECKF(st == SYMM_ERR_INVALID_ARG, "%s: status %d, expected SYMM_ERR_INVALID_ARG", what, (int)st);
    CHECKF(strstr(symm_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'", what, symm_last_error(),
           needle);
}

/* Refused arguments; with GPU buffers (gpu) they are real, else stand-ins never dereferenced. */
static void refusals(void *idx, int32_t *pr, int32_t *pe, uint8_t *ir, cudaStream_t s) {
    symm_stream_t st = (symm_stream_t)s;
    expect_bad(symm_moe_layout(NULL, SYMM_DTYPE_I64, 4, 2, 8, 2, pr, pe, ir, st), "indices is NULL", "NULL indices");
    expect_bad(symm_moe_layout(idx, SYMM_DTYPE_F32, 4, 2, 8, 2, pr, pe, ir, st), "indices dtype", "float indices");
    expect_bad(symm_moe_layout(idx, SYMM_DTYPE_I64, 4, 2, 8, 0, pr, pe, ir, st), "num_ranks 0", "0 ranks");
    expect_bad(symm_moe_layout(idx, SYMM_DTYPE_I64, 4, 2, 130, 65, pr, pe, ir, st), "num_ranks 65", "65 ranks");
    expect_bad(symm_moe_layout(idx, SYMM_DTYPE_I64, 4, 2, 9, 2, pr, pe, ir, st), "num_experts 9", "9 experts, 2 ranks");
    expect_bad(symm_moe_layout(idx, SYMM_DTYPE_I64, 4, 2, 0, 2, pr, pe, ir, st), "num_experts 0", "0 experts");
    expect_bad(symm_moe_layout((char *)idx + 4, SYMM_DTYPE_I64, 4, 2, 8, 2, pr, pe, ir, st), "not aligned",
               "misaligned int64 indices");
    expect_bad(symm_moe_layout((char *)idx + 2, SYMM_DTYPE_I32, 4, 2, 8, 2, pr, pe, ir, st), "not aligned",
               "misaligned int32 indices");
    expect_bad(symm_moe_layout(idx, SYMM_DTYPE_I64, 4, 2, 8, 2, NULL, pe, ir, st), "num_tokens_per_rank",
               "NULL num_tokens_per_rank");
    expect_bad(symm_moe_layout(idx, SYMM_DTYPE_I64, 4, 2, 8, 2, pr, NULL, ir, st), "num_tokens_per_expert",
               "NULL num_tokens_per_expert");
    expect_bad(symm_moe_layout(idx, SYMM_DTYPE_I64, 4, 2, 8, 2, pr, pe, NULL, st), "is_token_in_rank",
               "NULL is_token_in_rank");
    expect_bad(symm_moe_layout(idx, SYMM_DTYPE_I64, (size_t)1 << 28, 16, 8, 2, pr, pe, ir, st), "int32",
               "counts past int32");
    expect_bad(symm_moe_layout(idx, SYMM_DTYPE_I64, (size_t)1 << 31, 1, 8, 2, pr, pe, ir, st), "int32",
               "tokens past int32");
}

static void part_args(void) {
    int64_t idx[8] = {0};
    int32_t pr[2], pe[8];
    uint8_t ir[8];
    refusals(idx, pr, pe, ir, NULL);
}

/* ---- GPU ------------------------------------------------------------------------------------ */

static uint64_t rnd(uint64_t *s) { return symm_test_rand(s); }

/* Indices as the caller means them (-1: no expert), some outside the experts, some named twice. */
static std::vector<int64_t> make_indices(uint64_t *s, size_t T, size_t K, size_t E) {
    std::vector<int64_t> v(T * K);
    for (size_t t = 0; t < T; t++)
        for (size_t k = 0; k < K; k++) {
            const uint64_t r = rnd(s) % 100;
            int64_t e = (int64_t)(rnd(s) % E);
            if (r < 10)
                e = -1;
            else if (r < 13)
                e = (int64_t)E + (int64_t)(rnd(s) % 1000); /* past the experts */
            else if (r < 15)
                e = -2 - (int64_t)(rnd(s) % 1000);          /* negative, not -1 */
            else if (r < 20 && k > 0)
                e = v[t * K + k - 1];                       /* the same expert again */
            v[t * K + k] = e;
        }
    return v;
}

/* The reference, from the values the kernel sees (uint32: -1 is 4294967295, past the experts). */
static void reference(const std::vector<int64_t> &v, symm_dtype_t dt, size_t T, size_t K, size_t E, int n,
                      std::vector<int32_t> &pr, std::vector<int32_t> &pe, std::vector<uint8_t> &ir) {
    const size_t L = E / (size_t)n;
    pr.assign((size_t)n, 0);
    pe.assign(E, 0);
    ir.assign(T * (size_t)n, 0);
    for (size_t t = 0; t < T; t++) {
        for (size_t k = 0; k < K; k++) {
            int64_t e = v[t * K + k];
            if (dt == SYMM_DTYPE_U32)
                e = (int64_t)(uint32_t)e;
            else if (dt == SYMM_DTYPE_I32)
                e = (int64_t)(int32_t)e;
            if (e < 0 || e >= (int64_t)E)
                continue;
            pe[(size_t)e]++;
            ir[t * (size_t)n + (size_t)e / L] = 1;
        }
        for (int r = 0; r < n; r++)
            pr[(size_t)r] += ir[t * (size_t)n + (size_t)r];
    }
}

/* The indices in dtype dt, as bytes. */
static std::vector<unsigned char> as_dtype(const std::vector<int64_t> &v, symm_dtype_t dt) {
    const size_t esz = dt == SYMM_DTYPE_I64 ? 8 : 4;
    std::vector<unsigned char> b(v.size() * esz + 1);
    for (size_t i = 0; i < v.size(); i++) {
        if (esz == 8)
            memcpy(&b[i * 8], &v[i], 8);
        else {
            const int32_t x = (int32_t)v[i];
            memcpy(&b[i * 4], &x, 4);
        }
    }
    return b;
}

struct Dev {
    void *idx = nullptr;
    int32_t *pr = nullptr, *pe = nullptr;
    uint8_t *ir = nullptr;
    size_t idx_bytes = 0, T = 0, E = 0;
    int n = 0;
};

static void dev_make(Dev &d, size_t T, size_t K, size_t E, int n) {
    d.T = T;
    d.E = E;
    d.n = n;
    d.idx_bytes = T * K * 8 + 8;
    CUDA_CHECK(cudaMalloc(&d.idx, d.idx_bytes));
    CUDA_CHECK(cudaMalloc((void **)&d.pr, (size_t)n * 4));
    CUDA_CHECK(cudaMalloc((void **)&d.pe, E * 4));
    CUDA_CHECK(cudaMalloc((void **)&d.ir, T * (size_t)n + 1));
}

static void dev_free(Dev &d) {
    cudaFree(d.idx);
    cudaFree(d.pr);
    cudaFree(d.pe);
    cudaFree(d.ir);
}

/* Garbage in every output (0xab bytes), so a value the kernel leaves unwritten shows. */
static void garbage(const Dev &d, cudaStream_t s) {
    CUDA_CHECK(cudaMemsetAsync(d.pr, 0xab, (size_t)d.n * 4, s));
    CUDA_CHECK(cudaMemsetAsync(d.pe, 0xab, d.E * 4, s));
    CUDA_CHECK(cudaMemsetAsync(d.ir, 0xab, d.T * (size_t)d.n + 1, s));
}

static void compare(const Dev &d, cudaStream_t s, const std::vector<int32_t> &pr, const std::vector<int32_t> &pe,
                    const std::vector<uint8_t> &ir, const char *what) {
    std::vector<int32_t> gpr((size_t)d.n), gpe(d.E);
    std::vector<uint8_t> gir(d.T * (size_t)d.n + 1);
    CUDA_CHECK(cudaStreamSynchronize(s));
    CUDA_CHECK(cudaMemcpy(gpr.data(), d.pr, gpr.size() * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(gpe.data(), d.pe, gpe.size() * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(gir.data(), d.ir, gir.size(), cudaMemcpyDeviceToHost));
    for (int r = 0; r < d.n; r++)
        CHECKF(gpr[(size_t)r] == pr[(size_t)r], "%s: num_tokens_per_rank[%d] = %d, expected %d", what, r,
               gpr[(size_t)r], pr[(size_t)r]);
    for (size_t e = 0; e < d.E; e++)
        CHECKF(gpe[e] == pe[e], "%s: num_tokens_per_expert[%zu] = %d, expected %d", what, e, gpe[e], pe[e]);
    for (size_t i = 0; i < d.T * (size_t)d.n; i++)
        CHECKF(gir[i] == ir[i], "%s: is_token_in_rank[%zu][%zu] = %u, expected %u", what, i / (size_t)d.n,
               i % (size_t)d.n, gir[i], ir[i]);
    CHECKF(gir[d.T * (size_t)d.n] == 0xab, "%s: a byte past is_token_in_rank was written", what);
}

static const symm_dtype_t DTYPES[3] = {SYMM_DTYPE_I64, SYMM_DTYPE_I32, SYMM_DTYPE_U32};

static void part_gpu(int me, int npes) {
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    uint64_t seed = 0x1a7e5eedull + 7919ull * (uint64_t)me;
    struct Case { size_t T, K, E; int n; } cases[] = {
        {0, 8, 256, npes}, {1, 1, (size_t)npes, npes}, {37, 3, 16, 1}, {4096, 8, 256, npes}, {4096, 8, 256, 8},
        {1000, 9, 8200, 8}, {777, 6, 128, 64}, {513, 2, 60, 3}, {2000, 64, 512, npes}, {65, 8, 4096 * 3, 4},
    };
    for (const Case &c : cases) {
        Dev d;
        dev_make(d, c.T, c.K, c.E, c.n);
        for (symm_dtype_t dt : DTYPES)
            for (int rep = 0; rep < 2; rep++) {
                char what[160];
                snprintf(what, sizeof what, "T %zu K %zu E %zu ranks %d dtype %d rep %d", c.T, c.K, c.E, c.n, (int)dt,
                         rep);
                std::vector<int64_t> v = make_indices(&seed, c.T, c.K, c.E);
                std::vector<unsigned char> b = as_dtype(v, dt);
                std::vector<int32_t> pr, pe;
                std::vector<uint8_t> ir;
                reference(v, dt, c.T, c.K, c.E, c.n, pr, pe, ir);
                CUDA_CHECK(cudaMemcpyAsync(d.idx, b.data(), b.size(), cudaMemcpyHostToDevice, s));
                garbage(d, s);
                SYMM_CHECK(symm_moe_layout(c.T ? d.idx : NULL, dt, c.T, c.K, c.E, c.n, d.pr, d.pe,
                                           c.T ? d.ir : NULL, (symm_stream_t)s));
                compare(d, s, pr, pe, ir, what);
            }
        dev_free(d);
    }

    /* captured once, replayed with fresh indices each time */
    {
        const size_t T = 3000, K = 8, E = 256;
        const int n = npes;
        Dev d;
        dev_make(d, T, K, E, n);
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        SYMM_CHECK(symm_moe_layout(d.idx, SYMM_DTYPE_I64, T, K, E, n, d.pr, d.pe, d.ir, (symm_stream_t)s));
        CUDA_CHECK(cudaStreamEndCapture(s, &g));
        CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
        for (int rep = 0; rep < 5; rep++) {
            std::vector<int64_t> v = make_indices(&seed, T, K, E);
            std::vector<unsigned char> b = as_dtype(v, SYMM_DTYPE_I64);
            std::vector<int32_t> pr, pe;
            std::vector<uint8_t> ir;
            reference(v, SYMM_DTYPE_I64, T, K, E, n, pr, pe, ir);
            CUDA_CHECK(cudaMemcpyAsync(d.idx, b.data(), b.size(), cudaMemcpyHostToDevice, s));
            garbage(d, s);
            CUDA_CHECK(cudaGraphLaunch(ge, s));
            compare(d, s, pr, pe, ir, "graph replay");
        }
        CUDA_CHECK(cudaGraphExecDestroy(ge));
        CUDA_CHECK(cudaGraphDestroy(g));

        /* refused calls with real buffers: nothing may run */
        garbage(d, s);
        CUDA_CHECK(cudaStreamSynchronize(s));
        refusals(d.idx, d.pr, d.pe, d.ir, s);
        std::vector<int32_t> pr((size_t)n, (int32_t)0xabababab), pe(E, (int32_t)0xabababab);
        std::vector<uint8_t> ir(T * (size_t)n, 0xab);
        compare(d, s, pr, pe, ir, "after refused calls");
        dev_free(d);
    }
    CUDA_CHECK(cudaStreamDestroy(s));
}

int main(int argc, char **argv) {
    const char *part = argc > 1 ? argv[1] : "args";
    if (!strcmp(part, "args")) {
        part_args();
        if (failures) {
            fprintf(stderr, "moe layout args: %d checks failed\n", failures);
            return 1;
        }
        printf("moe layout args: passed\n");
        return 0;
    }
    if (strcmp(part, "gpu"))
        TEST_FAIL("unknown part %s", part);
    const int want = argc > 2 ? atoi(argv[2]) : 1;
    symm_test_require_pes(want);
    SYMM_CHECK(symm_init());
    const int me = symm_my_pe(), npes = symm_n_pes();
    if (want != npes)
        TEST_FAIL("expected %d PEs, got %d", want, npes);
    part_gpu(me, npes);
    SYMM_CHECK(symm_finalize());
    if (failures) {
        fprintf(stderr, "[pe %d] moe layout: %d checks failed\n", me, failures);
        return 1;
    }
    printf("[pe %d] moe layout: passed on %d PEs\n", me, npes);
    return 0;
}
