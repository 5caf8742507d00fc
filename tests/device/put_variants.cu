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

/* ---- small puts: where the time of one block-scope put goes ----------------------
 * One block of `threads` puts the same n bytes `inner` times in one kernel, as
 * symm-bench's rma mode does for sizes up to 128 KiB (where symm measured
 * 0.44-0.53x NVSHMEM). Each kernel changes one thing against the first:
 *   sp_api       symm_put_block x inner, then symm_quiet_block (the bench)
 *   sp_oldquiet  the same with the former quiet_block: fence.sc.sys in every
 *                thread, then the barrier
 *   sp_noquiet   symm_put_block x inner, no quiet at all
 *   sp_peer1     the peer address computed once; the library copy engine
 *                (symm__copy) + __syncthreads per put: no ctx reloads
 *   sp_plain     the peer address once; plain CUDA int4 loads/stores, one
 *                element per thread per step, + __syncthreads (NVSHMEM's
 *                putmem_block shape, which also has a barrier in front)
 *   sp_plain2    sp_plain with __syncthreads before and after each put
 * The last three end with __syncthreads + one thread's fence.sc.sys, like
 * nv_put_kernel. */
enum { SP_API, SP_OLDQUIET, SP_NOQUIET, SP_PEER1, SP_PLAIN, SP_PLAIN2, SP_N };
static const char *const sp_name[SP_N] = {"sp_api", "sp_oldquiet", "sp_noquiet", "sp_peer1", "sp_plain", "sp_plain2"};

__device__ static void sp_plain_copy(char *d, const char *s, size_t n) {
    /* 16-byte aligned buffers (the test's are), n a multiple of 16 here. */
    const int4 *s4 = (const int4 *)s;
    int4 *d4 = (int4 *)d;
    for (size_t i = threadIdx.x; i < n / 16; i += blockDim.x)
        d4[i] = s4[i];
}

__global__ static void sp_kernel(const symm_ctx_t *ctx, char *dst, const char *src, size_t n, int inner, int pe,
                                 int kind) {
    char *peer = (char *)symm_ctx_ptr(ctx, dst, pe);
    switch (kind) {
    case SP_API:
    case SP_OLDQUIET:
    case SP_NOQUIET:
        for (int it = 0; it < inner; ++it)
            symm_put_block(ctx, dst, src, n, pe);
        if (kind == SP_API) {
            symm_quiet_block(ctx);
        } else if (kind == SP_OLDQUIET) {
            asm volatile("fence.sc.sys;" ::: "memory");
            __syncthreads();
        }
        return;
    case SP_PEER1:
        for (int it = 0; it < inner; ++it) {
            symm__copy(peer, src, n, threadIdx.x, blockDim.x, 1);
            __syncthreads();
        }
        break;
    case SP_PLAIN:
        for (int it = 0; it < inner; ++it) {
            sp_plain_copy(peer, src, n);
            __syncthreads();
        }
        break;
    default:
        for (int it = 0; it < inner; ++it) {
            __syncthreads();
            sp_plain_copy(peer, src, n);
            __syncthreads();
        }
        break;
    }
    __syncthreads();
    if (threadIdx.x == 0)
        asm volatile("fence.sc.sys;" ::: "memory");
}

/* Microseconds per put of each small-put kernel; checks the bytes on PE 1. */
static void small_puts(dt_env_t *e, char *dst, const char *src, cudaStream_t s, cudaEvent_t t0, cudaEvent_t t1) {
    const size_t sizes[] = {64, 1024, 16384, 131072};
    const int inner = 100, iters = 20, threads = 1024;
    if (e->me == 0) {
        printf("\nsmall puts: 1 block x %d threads, %d puts per kernel, %d kernels; microseconds per put "
               "(lower is better)\n%10s", threads, inner, iters, "bytes");
        for (int k = 0; k < SP_N; k++)
            printf(" %12s", sp_name[k]);
        printf("\n");
    }
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        size_t n = sizes[si];
        if (e->me == 0)
            printf("%10zu", n);
        for (int k = 0; k < SP_N; k++) {
            if (e->me == 1)
                dt_fill(dst, n, 42, 1);
            CUDA_CHECK(cudaDeviceSynchronize());
            SYMM_CHECK(symm_barrier_all());
            if (e->me == 0) {
                for (int w = 0; w < 2; w++)
                    sp_kernel<<<1, threads, 0, s>>>(e->ctx, dst, src, n, inner, 1, k);
                CUDA_CHECK(cudaGetLastError());
                CUDA_CHECK(cudaEventRecord(t0, s));
                for (int i = 0; i < iters; i++)
                    sp_kernel<<<1, threads, 0, s>>>(e->ctx, dst, src, n, inner, 1, k);
                CUDA_CHECK(cudaGetLastError());
                CUDA_CHECK(cudaEventRecord(t1, s));
                CUDA_CHECK(cudaEventSynchronize(t1));
                float ms;
                CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
                printf(" %12.3f", (double)ms * 1e3 / ((double)iters * inner));
                fflush(stdout);
            }
            SYMM_CHECK(symm_barrier_all());
            if (e->me == 1)
                dt_check(e, dst, n, 42, 0, 0, sp_name[k]);
        }
        if (e->me == 0)
            printf("\n");
    }
}

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
    small_puts(&e, dst, src, s, t0, t1);
    CUDA_CHECK(cudaEventDestroy(t0));
    CUDA_CHECK(cudaEventDestroy(t1));
    CUDA_CHECK(cudaStreamDestroy(s));
    SYMM_CHECK(symm_free(dst));
    SYMM_CHECK(symm_free(src));
    dt_fini(&e);
    return 0;
}
