/*
 * test_backend_coll.cu - stream collectives and barriers on a scale-out
 * backend (SYMM_BACKEND=nvshmem|nccl), through whichever path the team takes:
 * symm's kernels when every PE is in the load/store window, the library's
 * collectives otherwise (SYMM_DEBUG_FORCE_REMOTE=1, or PEs on other "hosts").
 *
 * Usage: test_backend_coll <npes> <part> [near|far]
 *   coll     all-reduce (f32 sum, i32 max), reduce-scatter, all-gather,
 *            all-to-all, broadcast and the stream barrier, at several sizes,
 *            each checked element by element; what the library lacks must
 *            be refused with SYMM_ERR_UNSUPPORTED before anything runs
 *   caps     the backend's name and capabilities, printed and checked
 *   nogin    (nccl, PEs on different "hosts" without GIN) a put to the other
 *            PE stops the kernel with the backend's message
 * `near` / `far`: the path the collectives must have taken
 * (symm_coll_last_algo() is "backend" for the library's).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symm/symm_device.h"
#include "symm_test.h"
#include "symm_test_cuda.h"

static int g_me, g_n;
static const char *g_path = "";

static void check_path(const char *what) {
    const char *algo = symm_coll_last_algo();
    int far = strcmp(algo, "backend") == 0;
    if (!strcmp(g_path, "far"))
        TEST_ASSERT(far, "%s ran as '%s', expected the backend's collective", what, algo);
    if (!strcmp(g_path, "near"))
        TEST_ASSERT(!far, "%s ran through the backend, expected symm's kernels", what);
}

static void sync_stream(cudaStream_t s) { CUDA_CHECK(cudaStreamSynchronize(s)); }

/* Ordered on the collective's stream: a plain cudaMemcpy from pageable memory
 * may still be in flight on the legacy stream, which a non-blocking stream
 * does not wait for. */
static void to_device(void *dst, const void *src, size_t bytes, cudaStream_t s) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
}

static void part_coll(void) {
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const size_t sizes[] = {1, 1000, 262147};
    const size_t maxn = 262147;
    float *fs, *fr;
    int32_t *is, *ir;
    SYMM_CHECK(symm_malloc(maxn * (size_t)g_n * sizeof(float), (void **)&fs));
    SYMM_CHECK(symm_malloc(maxn * (size_t)g_n * sizeof(float), (void **)&fr));
    SYMM_CHECK(symm_malloc(maxn * (size_t)g_n * sizeof(int32_t), (void **)&is));
    SYMM_CHECK(symm_malloc(maxn * (size_t)g_n * sizeof(int32_t), (void **)&ir));
    float *hf = (float *)malloc(maxn * (size_t)g_n * sizeof(float));
    int32_t *hi = (int32_t *)malloc(maxn * (size_t)g_n * sizeof(int32_t));
    TEST_ASSERT(hf && hi, "host memory");
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k], all = n * (size_t)g_n;
        /* all-reduce, f32 sum: element i of PE p is p + 1 + (i % 7) */
        for (size_t i = 0; i < all; i++)
            hf[i] = (float)(g_me + 1 + (int)(i % 7));
        to_device(fs, hf, all * sizeof(float), s);
        SYMM_CHECK(symm_all_reduce(fs, fr, n, SYMM_DTYPE_F32, SYMM_OP_SUM, NULL, s));
        check_path("all_reduce");
        sync_stream(s);
        CUDA_CHECK(cudaMemcpy(hf, fr, n * sizeof(float), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n; i++) {
            float want = (float)(g_n * (g_n + 1) / 2 + g_n * (int)(i % 7));
            TEST_ASSERT(hf[i] == want, "all_reduce sum n=%zu [%zu]: %g, want %g", n, i, hf[i], want);
        }
        /* all-reduce, i32 max: element i of PE p is (p * 31 + i) % 97 */
        for (size_t i = 0; i < n; i++)
            hi[i] = (int32_t)(((size_t)g_me * 31 + i) % 97) - 50;
        to_device(is, hi, n * sizeof(int32_t), s);
        SYMM_CHECK(symm_all_reduce(is, ir, n, SYMM_DTYPE_I32, SYMM_OP_MAX, NULL, s));
        sync_stream(s);
        CUDA_CHECK(cudaMemcpy(hi, ir, n * sizeof(int32_t), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n; i++) {
            int32_t want = -1000;
            for (int p = 0; p < g_n; p++) {
                int32_t v = (int32_t)(((size_t)p * 31 + i) % 97) - 50;
                want = v > want ? v : want;
            }
            TEST_ASSERT(hi[i] == want, "all_reduce max n=%zu [%zu]: %d, want %d", n, i, hi[i], want);
        }
        /* reduce-scatter, f32 sum: piece r of PE p holds p + r */
        for (size_t i = 0; i < all; i++)
            hf[i] = (float)(g_me + (int)(i / n));
        to_device(fs, hf, all * sizeof(float), s);
        SYMM_CHECK(symm_reduce_scatter(fs, fr, n, SYMM_DTYPE_F32, SYMM_OP_SUM, NULL, s));
        check_path("reduce_scatter");
        sync_stream(s);
        CUDA_CHECK(cudaMemcpy(hf, fr, n * sizeof(float), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n; i++) {
            float want = (float)(g_n * (g_n - 1) / 2 + g_n * g_me);
            TEST_ASSERT(hf[i] == want, "reduce_scatter n=%zu [%zu]: %g, want %g", n, i, hf[i], want);
        }
        /* all-gather, i32: PE p's element i is p * 1000003 + i */
        for (size_t i = 0; i < n; i++)
            hi[i] = (int32_t)((size_t)g_me * 1000003 + i);
        to_device(is, hi, n * sizeof(int32_t), s);
        SYMM_CHECK(symm_all_gather(is, ir, n, SYMM_DTYPE_I32, NULL, s));
        check_path("all_gather");
        sync_stream(s);
        CUDA_CHECK(cudaMemcpy(hi, ir, all * sizeof(int32_t), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < all; i++)
            TEST_ASSERT(hi[i] == (int32_t)((i / n) * 1000003 + i % n), "all_gather n=%zu [%zu]: %d", n, i, hi[i]);
        /* all-to-all, i32: block q of PE p is p * 1000 + q * 7 + i */
        for (size_t i = 0; i < all; i++)
            hi[i] = (int32_t)(g_me * 1000 + (int)(i / n) * 7 + (int)(i % n));
        to_device(is, hi, all * sizeof(int32_t), s);
        SYMM_CHECK(symm_all_to_all(is, ir, n, SYMM_DTYPE_I32, NULL, s));
        check_path("all_to_all");
        sync_stream(s);
        CUDA_CHECK(cudaMemcpy(hi, ir, all * sizeof(int32_t), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < all; i++) {
            int32_t want = (int32_t)((int)(i / n) * 1000 + g_me * 7 + (int)(i % n));
            TEST_ASSERT(hi[i] == want, "all_to_all n=%zu [%zu]: %d, want %d", n, i, hi[i], want);
        }
        /* broadcast from the last PE */
        int root = g_n - 1;
        for (size_t i = 0; i < n; i++)
            hf[i] = g_me == root ? (float)(i % 1000) * 0.5f : -1.0f;
        to_device(fr, hf, n * sizeof(float), s);
        SYMM_CHECK(symm_broadcast(fr, fr, n, SYMM_DTYPE_F32, root, NULL, s));
        check_path("broadcast");
        SYMM_CHECK(symm_barrier_all_on_stream(s));
        sync_stream(s);
        CUDA_CHECK(cudaMemcpy(hf, fr, n * sizeof(float), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n; i++)
            TEST_ASSERT(hf[i] == (float)(i % 1000) * 0.5f, "broadcast n=%zu [%zu]: %g", n, i, hf[i]);
    }
    /* What a library lacks is refused before anything runs, on every PE. */
    if (!strcmp(g_path, "far")) {
        const char *be = symm_backend_name();
        if (!strcmp(be, "nccl"))
            SYMM_EXPECT(symm_all_reduce(is, ir, 16, SYMM_DTYPE_I32, SYMM_OP_BXOR, NULL, s), SYMM_ERR_UNSUPPORTED);
        if (!strcmp(be, "nvshmem"))
            SYMM_EXPECT(symm_all_reduce(is, ir, 16, SYMM_DTYPE_FP8_E4M3, SYMM_OP_SUM, NULL, s),
                        SYMM_ERR_UNSUPPORTED);
        size_t counts[64], displs[64];
        for (int p = 0; p < g_n; p++)
            counts[p] = 1, displs[p] = (size_t)p;
        SYMM_EXPECT(symm_all_to_allv(is, counts, displs, ir, counts, displs, SYMM_DTYPE_I32, NULL, s),
                    SYMM_ERR_UNSUPPORTED);
    }
    sync_stream(s);
    SYMM_CHECK(symm_barrier_all());
    free(hf);
    free(hi);
    SYMM_CHECK(symm_free(ir));
    SYMM_CHECK(symm_free(is));
    SYMM_CHECK(symm_free(fr));
    SYMM_CHECK(symm_free(fs));
    CUDA_CHECK(cudaStreamDestroy(s));
    printf("coll (%s, %d PEs, %s path): ok\n", symm_backend_name(), g_n, g_path[0] ? g_path : "any");
}

static void part_caps(void) {
    uint32_t caps = 0;
    SYMM_CHECK(symm_backend_caps(&caps));
    const char *be = symm_backend_name();
    printf("backend %s: caps 0x%x:%s%s%s%s%s%s%s%s\n", be, caps, caps & SYMM_CAP_PEER_LDST ? " peer_ldst" : "",
           caps & SYMM_CAP_REMOTE_PUT ? " remote_put" : "", caps & SYMM_CAP_REMOTE_GET ? " remote_get" : "",
           caps & SYMM_CAP_REMOTE_SIGNAL ? " remote_signal" : "", caps & SYMM_CAP_REMOTE_AMO ? " remote_amo" : "",
           caps & SYMM_CAP_REMOTE_QUIET ? " remote_quiet" : "", caps & SYMM_CAP_COLL ? " coll" : "",
           caps & SYMM_CAP_MULTI_NODE ? " multi_node" : "");
    TEST_ASSERT(!strcmp(be, getenv("SYMM_BACKEND") ? getenv("SYMM_BACKEND") : "native"), "backend %s", be);
    TEST_ASSERT(caps & SYMM_CAP_COLL, "collectives");
    if (!strcmp(be, "nvshmem"))
        TEST_ASSERT((caps & 0xffu) == 0xffu, "nvshmem does everything");
    if (!strcmp(be, "nccl"))
        TEST_ASSERT(!(caps & (SYMM_CAP_REMOTE_GET | SYMM_CAP_REMOTE_SIGNAL | SYMM_CAP_REMOTE_AMO)),
                    "nccl 2.28 has no remote get, signal or atomic");
    symm_ctx_t c;
    SYMM_CHECK(symm_team_ctx_copy(symm_team_world(), &c));
    printf("world window: PEs %d..%d of %d; backend state %s\n", c.ldst_first, c.ldst_first + c.ldst_count - 1,
           c.n_pes, c.backend_state ? "set" : "none");
}

__global__ static void put_kernel(const symm_ctx_t *ctx, int *dst, const int *src, int pe) {
    symm_put(ctx, dst, src, sizeof(int), pe);
    symm_quiet(ctx);
}

static void part_nogin(void) {
    int *buf;
    const symm_ctx_t *ctx;
    SYMM_CHECK(symm_malloc(2 * sizeof(int), (void **)&buf));
    SYMM_CHECK(symm_ctx(&ctx));
    symm_ctx_t c;
    SYMM_CHECK(symm_team_ctx_copy(symm_team_world(), &c));
    int other = (g_me + 1) % g_n;
    TEST_ASSERT(other < c.ldst_first || other >= c.ldst_first + c.ldst_count,
                "PE %d is in the load/store window [%d, +%d): not a test of the GIN path", other, c.ldst_first,
                c.ldst_count);
    put_kernel<<<1, 1>>>(ctx, buf, buf + 1, other);
    cudaError_t e = cudaDeviceSynchronize();
    TEST_ASSERT(e != cudaSuccess, "the put to PE %d through a communicator without GIN succeeded", other);
    printf("nogin: the kernel stopped (%s), as it must\n", cudaGetErrorString(e));
    /* the context is gone: leave without symm_finalize's device work */
    exit(0);
}

int main(int argc, char **argv) {
    int need = argc > 1 ? atoi(argv[1]) : 1;
    const char *part = argc > 2 ? argv[2] : "coll";
    g_path = argc > 3 ? argv[3] : "";
    symm_test_require_pes(need);
    SYMM_CHECK(symm_init());
    g_me = symm_my_pe();
    g_n = symm_n_pes();
    if (!strcmp(part, "coll"))
        part_coll();
    else if (!strcmp(part, "caps"))
        part_caps();
    else if (!strcmp(part, "nogin"))
        part_nogin();
    else
        TEST_FAIL("unknown part %s", part);
    SYMM_CHECK(symm_finalize());
    return 0;
}
