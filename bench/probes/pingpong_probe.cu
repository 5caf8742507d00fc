// Probe: one-way latency of a flag ping-pong between GPU 0 and GPU 1, one process, by flag memory
// and by the load/store flavour: what symm-bench's raw ping-pong depends on besides symm
// (results: bench/results/latest/latency-probe.md).
// Tables: GPUs 0-1 by flag memory (cudaMalloc, VMM) and load/store flavour; GPUs 0-1 by flag
// offset inside one allocation; every GPU pair, push and pull; the first table again at the end.
// Build: nvcc -O2 -arch=sm_90 -o pingpong_probe bench/probes/pingpong_probe.cu -lcuda
// Run:   ./pingpong_probe            (needs 2 GPUs with peer access)
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <algorithm>
#include <vector>
#include <cuda.h>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); exit(1); } } while (0)
#define CU(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char *s_; cuGetErrorString(r_, &s_); printf("CU %s at %s:%d\n", s_, __FILE__, __LINE__); exit(1); } } while (0)

enum { VOLATILE = 0, RELAXED = 1, ACQREL = 2, ACQPOLL = 3, NFLAVOURS };
static const char *flavour_name[] = {"volatile ld/st", "ld/st.relaxed.sys", "ld.acquire.sys / st.release.sys",
                                     "ld.acquire.sys / st.relaxed.sys (symm_p + symm_wait_until)"};

__device__ __forceinline__ uint64_t gtimer() { uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ int ld_flag(const int *p, int f) {
    int v;
    if (f == VOLATILE) asm volatile("ld.volatile.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    else if (f == RELAXED) asm volatile("ld.relaxed.sys.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    else if (f == ACQPOLL) asm volatile("ld.acquire.sys.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    else asm volatile("ld.acquire.sys.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void st_flag(int *p, int v, int f) {
    if (f == VOLATILE) asm volatile("st.volatile.global.s32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
    else if (f == RELAXED || f == ACQPOLL) asm volatile("st.relaxed.sys.global.s32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
    else asm volatile("st.release.sys.global.s32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}

// role 0 writes first; each polls `poll` and writes `write` (push: poll the local flag, write the
// peer's; pull: write the local flag, poll the peer's over NVLink); values never repeat
__global__ void pingpong(int role, int *poll, int *write, int base, int warm, int iters, int f,
                         unsigned long long *ns, int *err) {
    uint64_t t0 = 0, deadline = gtimer() + 5000000000ull;
    for (int k = 0; k < warm + iters; k++) {
        int v = base + k + 1;
        if (k == warm) t0 = gtimer();
        if (role == 0) st_flag(write, v, f);
        for (unsigned s = 0; ld_flag(poll, f) != v; s++)
            if ((s & 4095u) == 4095u && gtimer() > deadline) { *err = 1; return; }
        if (role == 1) st_flag(write, v, f);
    }
    if (role == 0) *ns = gtimer() - t0;
}

struct flags { int *f[2]; const char *name; };

static flags cudamalloc_flags() {
    flags fl; fl.name = "cudaMalloc + peer access";
    for (int d = 0; d < 2; d++) { CK(cudaSetDevice(d)); CK(cudaMalloc(&fl.f[d], 4096)); CK(cudaMemset(fl.f[d], 0, 4096)); }
    return fl;
}

// One VMM allocation per GPU (2 MiB, its memory), mapped once in this process with access for both GPUs:
// the way symm's heap maps a peer's chunk (there through an imported POSIX fd).
static flags vmm_flags() {
    flags fl; fl.name = "cuMemCreate/cuMemMap (VMM)";
    for (int d = 0; d < 2; d++) {
        CUmemAllocationProp prop = {};
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = d;
        size_t gran = 0;
        CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
        CUmemGenericAllocationHandle h;
        CU(cuMemCreate(&h, gran, &prop, 0));
        CUdeviceptr p;
        CU(cuMemAddressReserve(&p, gran, gran, 0, 0));
        CU(cuMemMap(p, gran, 0, h, 0));
        CUmemAccessDesc acc[2] = {};
        for (int a = 0; a < 2; a++) {
            acc[a].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
            acc[a].location.id = a;
            acc[a].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        }
        CU(cuMemSetAccess(p, gran, acc, 2));
        fl.f[d] = (int *)p;
        CK(cudaSetDevice(d));
        CK(cudaMemset(fl.f[d], 0, 4096));
    }
    return fl;
}

// State shared by the measurements: one stream per GPU, the result words in mapped host memory,
// and the running base that keeps every round trip's value new.
struct probe {
    int ngpu;
    cudaStream_t s[8];
    unsigned long long *ns;
    int *err;
    int base;
};
static const int warm = 200, iters = 10000;

// Median one-way latency (us) of 7 launches: role 0 on GPU d0 polls poll0 and writes write0, role 1
// on GPU d1 polls poll1 and writes write1; -1 when a launch timed out.
static double measure(probe &pr, int d0, int d1, int *poll0, int *write0, int *poll1, int *write1, int f) {
    int dev[2] = {d0, d1};
    int *poll[2] = {poll0, poll1}, *write[2] = {write0, write1};
    std::vector<double> v;
    for (int r = 0; r < 7; r++) {
        *pr.err = 0;
        for (int i = 1; i >= 0; i--) {  // the responder first, so it is resident when role 0 starts
            CK(cudaSetDevice(dev[i]));
            pingpong<<<1, 1, 0, pr.s[dev[i]]>>>(i, poll[i], write[i], pr.base, warm, iters, f, pr.ns, pr.err);
            CK(cudaGetLastError());
        }
        for (int i = 0; i < 2; i++) { CK(cudaSetDevice(dev[i])); CK(cudaStreamSynchronize(pr.s[dev[i]])); }
        pr.base += warm + iters;
        if (*pr.err) return -1;
        v.push_back((double)*pr.ns / iters / 2 / 1000.0);
    }
    std::sort(v.begin(), v.end());
    return v[3];
}

static void cell(double us) { printf(us < 0 ? " timed out |" : " %.3f |", us); }

// GPUs 0-1: each polls its own flag (word 0 of its allocation) and writes the other's.
static void table_memory(probe &pr, flags *all, const char *title) {
    printf("\n%s\n\n| flag memory | flavour | one-way us (median of 7) |\n| --- | --- | ---: |\n", title);
    for (int m = 0; m < 2; m++)
        for (int f = 0; f < NFLAVOURS; f++) {
            printf("| %s | %s |", all[m].name, flavour_name[f]);
            cell(measure(pr, 0, 1, all[m].f[0], all[m].f[1], all[m].f[1], all[m].f[0], f));
            printf("\n");
            fflush(stdout);
        }
}

// GPUs 0-1, cudaMalloc: the same flag offset on both GPUs, swept (NVLink traffic is spread over the
// switch planes by address, so the path, and its latency, may depend on the address).
static void table_offsets(probe &pr) {
    static const size_t offs[] = {0, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 65536, (size_t)1 << 20,
                                  (size_t)2 << 20, ((size_t)2 << 20) + 4096, (size_t)3 << 20};
    char *big[2];
    for (int d = 0; d < 2; d++) {
        CK(cudaSetDevice(d));
        CK(cudaMalloc(&big[d], (size_t)4 << 20));
        CK(cudaMemset(big[d], 0, (size_t)4 << 20));
    }
    printf("\n| GPUs 0-1, flag offset in a 4 MiB cudaMalloc | volatile (us) | st.relaxed.sys / ld.acquire.sys (us) |\n"
           "| ---: | ---: | ---: |\n");
    for (size_t o : offs) {
        int *a = (int *)(big[0] + o), *b = (int *)(big[1] + o);
        printf("| %zu |", o);
        cell(measure(pr, 0, 1, a, b, b, a, VOLATILE));
        cell(measure(pr, 0, 1, a, b, b, a, ACQPOLL));
        printf("\n");
        fflush(stdout);
    }
    for (int d = 0; d < 2; d++) { CK(cudaSetDevice(d)); CK(cudaFree(big[d])); }
}

// Every pair of GPUs, cudaMalloc flags: push (poll the local flag, write the peer's) with volatile
// and with symm's flavour, and pull (write the local flag, poll the peer's over NVLink).
static void table_pairs(probe &pr) {
    int *fm[8];
    for (int d = 0; d < pr.ngpu; d++) {
        CK(cudaSetDevice(d));
        for (int e = 0; e < pr.ngpu; e++)
            if (e != d) {
                cudaError_t pe = cudaDeviceEnablePeerAccess(e, 0);
                if (pe != cudaSuccess && pe != cudaErrorPeerAccessAlreadyEnabled) CK(pe);
                (void)cudaGetLastError();
            }
        CK(cudaMalloc(&fm[d], 4096));
        CK(cudaMemset(fm[d], 0, 4096));
    }
    printf("\n| GPU pair | push, volatile (us) | push, st.relaxed.sys / ld.acquire.sys poll (us) | "
           "pull: write local, poll peer, volatile (us) |\n| --- | ---: | ---: | ---: |\n");
    for (int a = 0; a < pr.ngpu; a++)
        for (int b = a + 1; b < pr.ngpu; b++) {
            // role 0 (GPU a) waits on word 0, role 1 (GPU b) on word 16 of where the flags live
            printf("| %d-%d |", a, b);
            cell(measure(pr, a, b, fm[a], fm[b] + 16, fm[b] + 16, fm[a], VOLATILE));
            cell(measure(pr, a, b, fm[a], fm[b] + 16, fm[b] + 16, fm[a], ACQPOLL));
            cell(measure(pr, a, b, fm[b] + 16, fm[a], fm[a], fm[b] + 16, VOLATILE));
            printf("\n");
            fflush(stdout);
        }
    for (int d = 0; d < pr.ngpu; d++) { CK(cudaSetDevice(d)); CK(cudaFree(fm[d])); }
}

int main() {
    int n = 0;
    CK(cudaGetDeviceCount(&n));
    if (n < 2) { printf("SKIP: needs 2 GPUs\n"); return 0; }
    probe pr = {};
    pr.ngpu = n < 8 ? n : 8;
    for (int d = 0; d < 2; d++) { CK(cudaSetDevice(d)); CK(cudaDeviceEnablePeerAccess(1 - d, 0)); CK(cudaFree(0)); }
    for (int d = 0; d < pr.ngpu; d++) { CK(cudaSetDevice(d)); CK(cudaStreamCreateWithFlags(&pr.s[d], cudaStreamNonBlocking)); }
    // pinned host words, mapped for every GPU (unified addressing: the same pointer in kernels)
    CK(cudaHostAlloc(&pr.ns, sizeof(*pr.ns), cudaHostAllocPortable | cudaHostAllocMapped));
    CK(cudaHostAlloc(&pr.err, sizeof(*pr.err), cudaHostAllocPortable | cudaHostAllocMapped));
    flags all[2] = {cudamalloc_flags(), vmm_flags()};
    table_memory(pr, all, "GPUs 0-1, first thing in the process");
    table_offsets(pr);
    table_pairs(pr);
    table_memory(pr, all, "GPUs 0-1 again, after the other tables");
    return 0;
}
