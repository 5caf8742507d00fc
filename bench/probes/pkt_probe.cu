// Probe: one-way latency of a packet ping-pong between GPU 0 and GPU 1 (one process), by the
// number of 16-byte packets ({4 data bytes, flag, 4 data bytes, flag}) one thread sends and by the
// store/load flavour, then as symm-bench's packet rows run it, plain and through symm_put_pkt /
// symm_pkt_wait: where a one-thread packet message of several packets spends its time.
// Build: nvcc -O2 -arch=sm_90 -I include -o pkt_probe bench/probes/pkt_probe.cu -lcuda   (built by CMake too)
// Run:   ./pkt_probe            (needs 2 GPUs with peer access)
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <algorithm>
#include <vector>
#include <cstring>
#include <cuda.h>
#include <cuda_runtime.h>
#include <symm/symm_device.h>

#define CU(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { printf("CU error %d at %s:%d\n", (int)r_, __FILE__, __LINE__); exit(1); } } while (0)
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); exit(1); } } while (0)

// store flavours of the sender; load flavours of the poller
enum { ST_VOLATILE = 0, ST_RELAXED = 1, ST_WEAK = 2, NST };
enum { LD_VOLATILE = 0, LD_RELAXED = 1, NLD };
static const char *st_name[] = {"st.volatile.v4", "st.relaxed.sys.v4", "st.global.v4 (weak)"};
static const char *ld_name[] = {"ld.volatile.v4", "ld.relaxed.sys.v4"};

__device__ __forceinline__ uint64_t gtimer() { uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }

__device__ __forceinline__ void st16(uint4 *p, uint4 v, int f) {
    if (f == ST_VOLATILE)
        asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
    else if (f == ST_RELAXED)
        asm volatile("st.relaxed.sys.global.v4.u32 [%0], {%1, %2, %3, %4};" :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
    else
        asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
__device__ __forceinline__ uint4 ld16(const uint4 *p, int f) {
    uint4 v;
    if (f == LD_VOLATILE)
        asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
    else
        asm volatile("ld.relaxed.sys.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
    return v;
}

// One thread per GPU (lanes = 1), or `lanes` threads each with one packet. Role 0 sends first;
// each waits for all npkt packets of round k (flag k + base) in its own buffer, then (role 1)
// answers. `echo`: the answer's payload is the payload just received, stored to `scratch` and
// loaded back from it (a message relayed through memory, as symm-bench's rma rows do).
__global__ void pingpong(int role, const uint4 *mine, uint4 *peer, volatile uint32_t *scratch, int npkt, int stf, int ldf,
                         int echo, uint32_t base, int warm, int iters, unsigned long long *ns, int *err,
                         unsigned long long *sink) {
    const int lane = threadIdx.x, lanes = blockDim.x;
    uint64_t t0 = 0, deadline = gtimer() + 5000000000ull;
    uint32_t acc = 0, pay[16];
    for (int i = 0; i < 16; i++) pay[i] = (uint32_t)(i * 2654435761u);
    for (int k = 0; k < warm + iters; k++) {
        const uint32_t flag = base + (uint32_t)k + 1u;
        if (k == warm) t0 = gtimer();
        if (role == 0)
            for (int j = lane, i = 0; j < npkt && i < 8; j += lanes, i++)
                st16(peer + j, make_uint4(pay[2 * i], flag, pay[2 * i + 1], flag), stf);
        // wait: every packet of this lane at once, then again for those not there
        {
            uint32_t pending = 0;
            uint4 v[8];
            for (int j = lane, i = 0; j < npkt && i < 8; j += lanes, i++) pending |= 1u << i;
            for (unsigned s = 0; pending; s++) {
#pragma unroll
                for (int i = 0; i < 8; i++)
                    if (pending & (1u << i)) v[i] = ld16(mine + lane + i * lanes, ldf);
#pragma unroll
                for (int i = 0; i < 8; i++)
                    if ((pending & (1u << i)) && v[i].y == flag && v[i].w == flag) {
                        pending &= ~(1u << i);
                        if (echo) { scratch[2 * (lane + i * lanes)] = v[i].x; scratch[2 * (lane + i * lanes) + 1] = v[i].z; }
                        else acc += v[i].x ^ v[i].z;
                    }
                if ((s & 4095u) == 4095u && gtimer() > deadline) { *err = 1; return; }
            }
        }
        if (echo) {
#pragma unroll
            for (int i = 0; i < 8; i++)
                if (lane + i * lanes < npkt) { pay[2 * i] = scratch[2 * (lane + i * lanes)]; pay[2 * i + 1] = scratch[2 * (lane + i * lanes) + 1]; }
        }
        if (role == 1)
            for (int j = lane, i = 0; j < npkt && i < 8; j += lanes, i++)
                st16(peer + j, make_uint4(pay[2 * i], flag, pay[2 * i + 1], flag), stf);
    }
    if (role == 0 && lane == 0) *ns = gtimer() - t0;
    sink[lane] = acc;
}

// The ping-pong as symm-bench's packet rows run it, one thread: the sender writes the payload into
// `src` with plain stores and the put loads it back (`stage`); the receiver stores the payload into
// `dst` and reads it back with volatile loads for a check one round later (`check`).
__device__ __forceinline__ uint64_t word_of(uint32_t v, int j) { return (uint64_t)v * 0x9e3779b97f4a7c15ull + (uint64_t)j; }
__global__ void harness(int role, const uint4 *mine, uint4 *peer, uint64_t *src, uint64_t *dst, int npkt, int stage,
                        int check, uint32_t base, int warm, int iters, unsigned long long *ns, int *err,
                        unsigned long long *sink) {
    uint64_t t0 = 0, deadline = gtimer() + 5000000000ull, seen[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    unsigned long long bad = 0;
    for (int k = 0; k < warm + iters; k++) {
        const uint32_t flag = base + (uint32_t)k + 1u;
        if (k == warm) t0 = gtimer();
        for (int pass = 0; pass < 2; pass++) {
            if ((pass == 0) == (role == 0)) {
                uint64_t w[8];
                if (stage) {
                    for (int j = 0; j < npkt; j++) src[j] = word_of(flag, j);
#pragma unroll
                    for (int j = 0; j < 8; j++) w[j] = j < npkt ? src[j] : 0;
                } else {
#pragma unroll
                    for (int j = 0; j < 8; j++) w[j] = word_of(flag, j);
                }
#pragma unroll
                for (int j = 0; j < 8; j++)
                    if (j < npkt) st16(peer + j, make_uint4((uint32_t)w[j], flag, (uint32_t)(w[j] >> 32), flag), ST_VOLATILE);
            } else {
                uint32_t pending = (1u << npkt) - 1u;
                uint4 v[8];
                for (unsigned s = 0; pending; s++) {
#pragma unroll
                    for (int i = 0; i < 8; i++)
                        if (pending & (1u << i)) v[i] = ld16(mine + i, LD_VOLATILE);
#pragma unroll
                    for (int i = 0; i < 8; i++)
                        if ((pending & (1u << i)) && v[i].y == flag && v[i].w == flag) pending &= ~(1u << i);
                    if ((s & 4095u) == 4095u && gtimer() > deadline) { *err = 1; return; }
                }
                if (check) {
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        if (j < npkt) { bad += seen[j] != word_of(flag - 1u, j); dst[j] = ((uint64_t)v[j].z << 32) | v[j].x; }
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        if (j < npkt) seen[j] = *(volatile const uint64_t *)&dst[j];
                } else {
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        if (j < npkt) bad += v[j].x ^ v[j].z;
                }
            }
        }
    }
    if (role == 0) *ns = gtimer() - t0;
    sink[0] = bad;
}

// The same ping-pong through symm's calls (symm_put_pkt / symm_pkt_wait) over a context made here
// for two plain allocations (peer address = own address + (pe - my_pe) * stride).
__device__ void my_put(const symm_ctx_t *ctx, char *page, const uint64_t *src, int nbytes, uint32_t flag, int pe) {
    uint4 *q = (uint4 *)symm_ctx_ptr(ctx, page, pe);
    uint64_t w[8];
#pragma unroll
    for (int j = 0; j < 8; j++) w[j] = j < nbytes / 8 ? src[j] : 0;
#pragma unroll
    for (int j = 0; j < 8; j++)
        if (j < nbytes / 8) st16(q + j, make_uint4((uint32_t)w[j], flag, (uint32_t)(w[j] >> 32), flag), ST_VOLATILE);
}
__device__ void my_wait(const char *page, uint64_t *dst, int nbytes, uint32_t flag) {
    const uint4 *mine = (const uint4 *)page;
    uint32_t pending = (1u << (nbytes / 8)) - 1u;
    uint4 v[8];
    while (pending) {
#pragma unroll
        for (int i = 0; i < 8; i++)
            if (pending & (1u << i)) v[i] = ld16(mine + i, LD_VOLATILE);
#pragma unroll
        for (int i = 0; i < 8; i++)
            if ((pending & (1u << i)) && v[i].y == flag && v[i].w == flag) pending &= ~(1u << i);
    }
#pragma unroll
    for (int j = 0; j < 8; j++)
        if (j < nbytes / 8) dst[j] = ((uint64_t)v[j].z << 32) | v[j].x;
}
__global__ void symm_harness(const symm_ctx_t *ctx, int role, char *page, uint64_t *src, uint64_t *dst, int nbytes,
                             uint32_t base, int warm, int iters, unsigned long long *ns, unsigned long long *sink,
                             int mine_put, int mine_wait) {
    uint64_t t0 = 0, seen[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    unsigned long long bad = 0;
    for (int k = 0; k < warm + iters; k++) {
        const uint32_t flag = base + (uint32_t)k + 1u;
        if (k == warm) t0 = gtimer();
        for (int pass = 0; pass < 2; pass++) {
            if ((pass == 0) == (role == 0)) {
                for (int j = 0; j < nbytes / 8; j++) src[j] = word_of(flag, j);
                if (mine_put) my_put(ctx, page, src, nbytes, flag, 1 - role);
                else symm_put_pkt(ctx, page, src, (size_t)nbytes, flag, 1 - role);
            } else {
                if (mine_wait) my_wait(page, dst, nbytes, flag);
                else symm_pkt_wait(ctx, page, dst, (size_t)nbytes, flag);
#pragma unroll
                for (int j = 0; j < 8; j++)
                    if (j < nbytes / 8) bad += seen[j] != word_of(flag - 1u, j);
#pragma unroll
                for (int j = 0; j < 8; j++)
                    if (j < nbytes / 8) seen[j] = *(volatile const uint64_t *)&dst[j];
            }
        }
    }
    if (role == 0) *ns = gtimer() - t0;
    sink[0] = bad;
}

// 2 MiB of GPU d's memory through the driver's virtual memory calls, mapped for both GPUs (as a
// symmetric heap maps its chunks).
static char *vmm_alloc(int d) {
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
    CK(cudaSetDevice(d));
    CK(cudaMemset((void *)p, 0, gran));
    return (char *)p;
}

static const int warm = 200, iters = 5000;

int main() {
    int ngpu = 0;
    CK(cudaGetDeviceCount(&ngpu));
    if (ngpu < 2) { printf("pkt_probe: needs 2 GPUs (found %d)\n", ngpu); return 0; }
    uint4 *buf[2];
    uint32_t *scratch[2];
    unsigned long long *sink[2];
    cudaStream_t s[2];
    for (int d = 0; d < 2; d++) {
        CK(cudaSetDevice(d));
        CK(cudaDeviceEnablePeerAccess(1 - d, 0));
        CK(cudaMalloc(&buf[d], 4096));
        CK(cudaMemset(buf[d], 0, 4096));
        CK(cudaMalloc(&scratch[d], 4096));
        CK(cudaMalloc(&sink[d], 4096));
        CK(cudaStreamCreateWithFlags(&s[d], cudaStreamNonBlocking));
    }
    unsigned long long *ns;
    int *err;
    CK(cudaHostAlloc(&ns, 8, cudaHostAllocMapped));
    CK(cudaHostAlloc(&err, 4, cudaHostAllocMapped));
    uint32_t base = 0;
    /* Median one-way us of 5 launches of both sides (the responder, role 1, first, so it is
     * resident when role 0 starts); launch(i) starts GPU i's side; -1 when one timed out.
     * Every launch moves base on by 2 * (warm + iters) + 2: each round's flags are new. */
    auto median_us = [&](auto launch) {
        std::vector<double> v;
        for (int r = 0; r < 5; r++) {
            *err = 0;
            for (int i = 1; i >= 0; i--) {
                CK(cudaSetDevice(i));
                launch(i);
                CK(cudaGetLastError());
            }
            for (int i = 0; i < 2; i++) { CK(cudaSetDevice(i)); CK(cudaStreamSynchronize(s[i])); }
            base += 2 * (warm + iters) + 2;
            if (*err) return -1.0;
            v.push_back((double)*ns / iters / 2 / 1000.0);
        }
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    auto measure = [&](int npkt, int lanes, int stf, int ldf, int echo) {
        return median_us([&](int i) {
            pingpong<<<1, lanes, 0, s[i]>>>(i, buf[i], buf[1 - i], scratch[i], npkt, stf, ldf, echo, base, warm, iters,
                                            ns, err, sink[i]);
        });
    };
    printf("# Packet ping-pong, GPU 0 <-> GPU 1, one-way us (median of 5 launches of %d round trips after %d)\n\n",
           iters, warm);
    printf("| packets (payload) | threads | store | load | echo | one-way us |\n| ---: | ---: | :--- | :--- | :---: | ---: |\n");
    const int npk[] = {1, 2, 4, 8};
    for (int e = 0; e < 2; e++)
        for (int pk : npk)
            for (int stf = 0; stf < NST; stf++)
                for (int ldf = 0; ldf < NLD; ldf++) {
                    if (e && (stf != ST_VOLATILE || ldf != LD_VOLATILE)) continue;
                    double us = measure(pk, 1, stf, ldf, e);
                    printf("| %d (%d B) | 1 | %s | %s | %s | %.3f |\n", pk, 8 * pk, st_name[stf], ld_name[ldf], e ? "yes" : "no", us);
                }
    for (int pk : npk) {
        double us = measure(pk, pk, ST_VOLATILE, LD_VOLATILE, 0);
        printf("| %d (%d B) | %d | %s | %s | no | %.3f |\n", pk, 8 * pk, pk, st_name[0], ld_name[0], us);
    }
    uint64_t *hsrc[2], *hdst[2];
    for (int d = 0; d < 2; d++) {
        CK(cudaSetDevice(d));
        CK(cudaMalloc(&hsrc[d], 4096));
        CK(cudaMalloc(&hdst[d], 4096));
    }
    auto hmeasure = [&](int npkt, int stage, int check) {
        return median_us([&](int i) {
            harness<<<1, 1, 0, s[i]>>>(i, buf[i], buf[1 - i], hsrc[i], hdst[i], npkt, stage, check, base, warm, iters,
                                       ns, err, sink[i]);
        });
    };
    printf("\n## As symm-bench's packet rows (one thread; volatile packets)\n\n");
    printf("| packets (payload) | payload staged through src | received payload stored and read back | one-way us |\n| ---: | :---: | :---: | ---: |\n");
    for (int pk : npk)
        for (int st = 0; st < 2; st++)
            for (int ck = 0; ck < 2; ck++)
                printf("| %d (%d B) | %s | %s | %.3f |\n", pk, 8 * pk, st ? "yes" : "no", ck ? "yes" : "no", hmeasure(pk, st, ck));
    {   /* the packets, src and dst in one 4 KiB page of VMM memory, as symm-bench's flag pages */
        char *vm[2];
        for (int d = 0; d < 2; d++) vm[d] = vmm_alloc(d);
        for (int pk : {1, 8})
            for (int same = 0; same < 2; same++) {
                uint4 *save[2] = {buf[0], buf[1]};
                uint64_t *ss[2] = {hsrc[0], hsrc[1]}, *sd[2] = {hdst[0], hdst[1]};
                for (int d = 0; d < 2; d++) {
                    buf[d] = (uint4 *)(vm[d] + (same ? 0 : 65536));
                    if (same) { hsrc[d] = (uint64_t *)(vm[d] + 2048); hdst[d] = (uint64_t *)(vm[d] + 3072); }
                }
                printf("| %d (%d B) VMM packets%s | yes | yes | %.3f |\n", pk, 8 * pk,
                       same ? ", src and dst in their page" : "", hmeasure(pk, 1, 1));
                for (int d = 0; d < 2; d++) { buf[d] = save[d]; hsrc[d] = ss[d]; hdst[d] = sd[d]; }
            }
    }
    {   /* symm's own calls on the first buffers */
        symm_ctx_t h[2];
        symm_ctx_t *dctx[2];
        for (int d = 0; d < 2; d++) {
            memset(&h[d], 0, sizeof h[d]);
            h[d].magic = SYMM_CTX_MAGIC;
            h[d].version = SYMM_CTX_VERSION;
            h[d].my_pe = h[d].world_pe = d;
            h[d].n_pes = 2;
            h[d].heap_base = (uint64_t)(uintptr_t)buf[d];
            h[d].heap_size = 4096;
            h[d].stride = (int64_t)((uintptr_t)buf[1] - (uintptr_t)buf[0]);
            h[d].ldst_first = 0;
            h[d].ldst_count = 2;
            CK(cudaSetDevice(d));
            CK(cudaMalloc(&dctx[d], sizeof(symm_ctx_t)));
            CK(cudaMemcpy(dctx[d], &h[d], sizeof(symm_ctx_t), cudaMemcpyHostToDevice));
        }
        const int pairs[][2] = {{0, 0}, {1, 1}, {1, 0}, {0, 1}};
        for (int nb : {8, 64}) for (auto &pr2 : pairs) {
            const int mp = pr2[0], mw = pr2[1];
            /* symm's waits stop the kernel with their own message past the deadline */
            double us = median_us([&](int i) {
                symm_harness<<<1, 1, 0, s[i]>>>(dctx[i], i, (char *)buf[i], hsrc[i], hdst[i], nb, base, warm, iters, ns,
                                                 sink[i], mp, mw);
            });
            static const char *pn[] = {"symm_put_pkt", "plain packet stores"};
            static const char *wn[] = {"symm_pkt_wait", "plain batch poll"};
            printf("| %d (%d B) %s + %s | yes | yes | %.3f |\n", nb / 8, nb, pn[mp], wn[mw], us);
        }
    }
    return 0;
}
