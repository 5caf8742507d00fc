/*
 * put_variants.cu - the copy-engine variants of symm_put_block side by side
 * with the copy engine (cudaMemcpyAsync into the peer's mapping), on the same
 * GPUs in one run, to choose the defaults of impl_copy.h / impl_tma.h. A
 * measuring tool, not a test: it asserts nothing about speed, only that
 * every variant delivered the right bytes.
 *
 * PE 0 puts to PE 1 (a grid of blocks, each symm_put_block on a slice);
 * for each size and variant it reports the best of several grid shapes.
 * Usage: symmrun -n 2 device_put_variants [max_MiB]
 */
#include "device_test.h"

typedef cudaError_t (*pv_fn)(const symm_ctx_t *, char *, const char *, size_t, int, int, int, cudaStream_t);
#define PV_DECL(name, desc) extern "C" cudaError_t name(const symm_ctx_t *, char *, const char *, size_t, int, int, int, cudaStream_t);
#define PV_LIST(X)                                                                  \
    X(pv_sm_u4, "SM ld/st, 4 loads in flight (default)")                            \
    X(pv_sm_u2, "SM ld/st, 2 in flight")                                            \
    X(pv_sm_u8, "SM ld/st, 8 in flight")                                            \
    X(pv_sm_global_u4, "SM, .global + L1::no_allocate + L2::256B, 4 in flight")     \
    X(pv_tma_8k4, "TMA bulk copy, 4 x 8 KiB stages")                                \
    X(pv_tma_16k2, "TMA bulk copy, 2 x 16 KiB stages")
PV_LIST(PV_DECL)
#define PV_ENTRY(name, desc) {name, #name, desc},
static const struct { pv_fn fn; const char *name, *desc; } variants[] = {PV_LIST(PV_ENTRY)};
#define N_VARIANTS (int)(sizeof variants / sizeof variants[0])

int main(int argc, char **argv) {
    dt_env_t e;
    dt_init(&e, 2);
    size_t max = (argc > 1 ? (size_t)atoi(argv[1]) : 256) << 20;
    char *src, *dst;
    SYMM_CHECK(symm_malloc(max, (void **)&src));
    SYMM_CHECK(symm_malloc(max, (void **)&dst));
    dt_fill(src, max, 42, 0);
    CUDA_CHECK(cudaDeviceSynchronize());
    int dev, sms;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    cudaStream_t s;
    cudaEvent_t t0, t1;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreate(&t0));
    CUDA_CHECK(cudaEventCreate(&t1));
    const int grids[] = {sms, 2 * sms, 4 * sms}, blocks[] = {256, 512, 1024};
    const int iters = 10;
    if (e.me == 0) {
        printf("device_put_variants: %s, %d SMs; PE 0 -> PE 1, best of grids {1,2,4} x SMs x {256,512,1024} "
               "threads, %d iterations each\n", prop.name, sms, iters);
        for (int v = 0; v < N_VARIANTS; v++)
            printf("  %-18s %s\n", variants[v].name, variants[v].desc);
        printf("%10s %12s", "bytes", "CE GB/s");
        for (int v = 0; v < N_VARIANTS; v++)
            printf(" %18s", variants[v].name);
        printf("\n");
    }
    for (size_t n = (size_t)1 << 20; n <= max; n *= 4) {
        double ce = 0;
        if (e.me == 0) {
            void *peer = symm_ptr(dst, 1);
            TEST_ASSERT(peer != NULL, "no peer mapping for PE 1");
            for (int w = 0; w < 2; w++)
                CUDA_CHECK(cudaMemcpyAsync(peer, src, n, cudaMemcpyDeviceToDevice, s));
            CUDA_CHECK(cudaEventRecord(t0, s));
            for (int i = 0; i < iters; i++)
                CUDA_CHECK(cudaMemcpyAsync(peer, src, n, cudaMemcpyDeviceToDevice, s));
            CUDA_CHECK(cudaEventRecord(t1, s));
            CUDA_CHECK(cudaEventSynchronize(t1));
            float ms;
            CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
            ce = (double)n * iters / (ms * 1e-3) / 1e9;
            printf("%10zu %12.1f", n, ce);
        }
        for (int v = 0; v < N_VARIANTS; v++) {
            if (e.me == 1)
                dt_fill(dst, n, 42, 1); /* poison: the check below needs every byte delivered */
            CUDA_CHECK(cudaDeviceSynchronize());
            SYMM_CHECK(symm_barrier_all());
            double best = 0;
            int bg = 0, bb = 0;
            if (e.me == 0) {
                for (int gi = 0; gi < 3; gi++)
                    for (int bi = 0; bi < 3; bi++) {
                        for (int w = 0; w < 2; w++)
                            CUDA_CHECK(variants[v].fn(e.ctx, dst, src, n, 1, grids[gi], blocks[bi], s));
                        CUDA_CHECK(cudaEventRecord(t0, s));
                        for (int i = 0; i < iters; i++)
                            CUDA_CHECK(variants[v].fn(e.ctx, dst, src, n, 1, grids[gi], blocks[bi], s));
                        CUDA_CHECK(cudaEventRecord(t1, s));
                        CUDA_CHECK(cudaEventSynchronize(t1));
                        float ms;
                        CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
                        double gbs = (double)n * iters / (ms * 1e-3) / 1e9;
                        if (gbs > best) { best = gbs; bg = grids[gi]; bb = blocks[bi]; }
                    }
                printf(" %6.1f %4.2fx %3dx%-4d", best, best / ce, bg, bb);
                fflush(stdout);
            }
            SYMM_CHECK(symm_barrier_all());
            if (e.me == 1)
                dt_check(&e, dst, n, 42, 0, 0, variants[v].name);
        }
        if (e.me == 0)
            printf("\n");
    }
    CUDA_CHECK(cudaEventDestroy(t0));
    CUDA_CHECK(cudaEventDestroy(t1));
    CUDA_CHECK(cudaStreamDestroy(s));
    SYMM_CHECK(symm_free(dst));
    SYMM_CHECK(symm_free(src));
    dt_fini(&e);
    return 0;
}
