// Probe: host time of one kernel launch, by how it is made: <<<>>> against cudaLaunchKernelEx
// (with and without the programmatic-dependent-launch attribute the low-latency MoE kernels use)
// and the driver's cuLaunchKernelEx on a function looked up once, each with an 8-byte and a
// 784-byte argument block (the size of the MoE kernels' symm__moe_kargs_t). What an eager
// symm_moe_dispatch / combine pays for its launch, beside what its checks cost.
// Build: nvcc -O2 -arch=sm_90 -o launch_probe bench/probes/launch_probe.cu -lcuda   (built by CMake too)
// Run:   ./launch_probe [launches per repeat, default 200] [repeats, default 9]
// Prints a markdown table: median microseconds of host time per launch over back-to-back
// launches without a synchronisation (the stream is drained between repeats).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda.h>
#include <cuda_runtime.h>

#define CK(x)                                                                                              \
    do {                                                                                                   \
        cudaError_t e_ = (x);                                                                              \
        if (e_ != cudaSuccess) {                                                                           \
            printf("CUDA %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__);                     \
            exit(1);                                                                                       \
        }                                                                                                  \
    } while (0)
#define CU(x)                                                                                              \
    do {                                                                                                   \
        CUresult r_ = (x);                                                                                 \
        if (r_ != CUDA_SUCCESS) {                                                                          \
            printf("CU error %d at %s:%d\n", (int)r_, __FILE__, __LINE__);                                 \
            exit(1);                                                                                       \
        }                                                                                                  \
    } while (0)

struct Big {
    uint64_t w[98]; // 784 bytes
};
static_assert(sizeof(Big) == 784, "the MoE argument block's size");

// Both read their argument so it is not dropped, and write only when it holds a value never passed.
__global__ void k_small(uint64_t *p) {
    if (p != nullptr && threadIdx.x == 0 && blockIdx.x == 0)
        p[0] += 1;
}
__global__ void k_big(Big b) {
    if (b.w[97] == 1 && threadIdx.x == 0 && blockIdx.x == 0)
        ((uint64_t *)(uintptr_t)b.w[0])[0] += 1;
}

enum How { CHEVRON, EX_PLAIN, EX_PDL, DRV_PDL };
static const char *how_name[] = {"<<<>>>", "cudaLaunchKernelEx, no attribute",
                                 "cudaLaunchKernelEx, PDL attribute", "cuLaunchKernelEx (cached CUfunction), PDL"};

struct Ctx {
    cudaStream_t s;
    CUfunction f_small, f_big;
    int blocks, threads;
};

static void launch(const Ctx &c, How how, bool big, const Big &b) {
    uint64_t *nil = nullptr;
    if (how == CHEVRON) {
        if (big)
            k_big<<<c.blocks, c.threads, 0, c.s>>>(b);
        else
            k_small<<<c.blocks, c.threads, 0, c.s>>>(nil);
        return;
    }
    if (how == DRV_PDL) {
        CUlaunchAttribute at = {};
        at.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        at.value.programmaticStreamSerializationAllowed = 1;
        CUlaunchConfig cfg = {};
        cfg.gridDimX = (unsigned)c.blocks;
        cfg.gridDimY = cfg.gridDimZ = 1;
        cfg.blockDimX = (unsigned)c.threads;
        cfg.blockDimY = cfg.blockDimZ = 1;
        cfg.hStream = (CUstream)c.s;
        cfg.attrs = &at;
        cfg.numAttrs = 1;
        void *arg = big ? (void *)&b : (void *)&nil;
        CU(cuLaunchKernelEx(&cfg, big ? c.f_big : c.f_small, &arg, nullptr));
        return;
    }
    cudaLaunchAttribute at[1] = {};
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)c.blocks);
    cfg.blockDim = dim3((unsigned)c.threads);
    cfg.stream = c.s;
    cfg.attrs = at;
    cfg.numAttrs = how == EX_PDL ? 1 : 0;
    if (big)
        CK(cudaLaunchKernelEx(&cfg, k_big, b));
    else
        CK(cudaLaunchKernelEx(&cfg, k_small, nil));
}

static double per_launch_us(const Ctx &c, How how, bool big, int n, int repeats) {
    Big b = {};
    std::vector<double> t;
    for (int r = 0; r < repeats; r++) {
        CK(cudaStreamSynchronize(c.s));
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < n; i++)
            launch(c, how, big, b);
        auto t1 = std::chrono::steady_clock::now();
        t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / n);
    }
    CK(cudaStreamSynchronize(c.s));
    CK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 200, repeats = argc > 2 ? atoi(argv[2]) : 9, ndev = 0;
    if (n < 1 || repeats < 1) {
        fprintf(stderr, "usage: launch_probe [launches per repeat >= 1] [repeats >= 1]\n");
        return 2;
    }
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("SKIP: launch_probe: no CUDA device\n");
        return 0;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    CK(cudaSetDevice(0));
    Ctx c;
    CK(cudaStreamCreateWithFlags(&c.s, cudaStreamNonBlocking));
    CK(cudaGetFuncBySymbol((cudaFunction_t *)&c.f_small, (const void *)k_small));
    CK(cudaGetFuncBySymbol((cudaFunction_t *)&c.f_big, (const void *)k_big));
    printf("### host time per kernel launch, %s (%d launches back to back, median of %d)\n\n", prop.name, n,
           repeats);
    printf("| launch | grid | 8-byte args, us | 784-byte args, us |\n| --- | --- | ---: | ---: |\n");
    const int grids[2][2] = {{1, 32}, {64, 512}}; // a warp; the low-latency MoE kernels' shape at 1 token/PE
    for (int g = 0; g < 2; g++) {
        c.blocks = grids[g][0];
        c.threads = grids[g][1];
        for (int h = 0; h < 4; h++) {
            if (g == 1 && h == EX_PLAIN)
                continue;
            per_launch_us(c, (How)h, false, n, 1); // warm
            per_launch_us(c, (How)h, true, n, 1);
            double s = per_launch_us(c, (How)h, false, n, repeats);
            double b = per_launch_us(c, (How)h, true, n, repeats);
            printf("| %s | %dx%d | %.2f | %.2f |\n", how_name[h], c.blocks, c.threads, s, b);
        }
    }
    CK(cudaStreamDestroy(c.s));
    return 0;
}
