/*
 * bench_nvshmem.cu - NVSHMEM side of the rma comparisons and of the coll
 * mode's on-stream collectives (see bench_nvshmem.h).
 *
 * Built with relocatable device code and device-linked against
 * libnvshmem_device.a in its own static library, so the rest of symm-bench
 * is ordinary whole-program CUDA. The kernels mirror rma_bench.cu's symm
 * kernels call for call: same grid slicing, same loops, same checks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>

#include "bench_nvshmem.h"
#include "../bench_slice.h"

/* Latency words, one set per kind so that each kind's values rise on their own. */
struct nv_lat {
    int flag[BENCH_LAT_KINDS];
    int counter;
    int pad;
    uint64_t sig[BENCH_LAT_KINDS];
    uint64_t data[BENCH_LAT_KINDS];
    uint64_t src[BENCH_LAT_KINDS];
};

static struct {
    int inited;
    char version[64];
    char coll_info[256];
    size_t heap_bytes;       /* NVSHMEM_SYMMETRIC_SIZE as NVSHMEM will read it (0: unknown) */
    size_t used_bytes;       /* what bench_nv_alloc took from the heap */
    void *src, *dst;
    struct nv_lat *lat;
    void *coll_src, *coll_dst;
    size_t coll_bytes;
} g_nv;

/* The heap the bench needs: the coll mode's largest pair (all-to-all: 1 GiB
 * to send and 1 GiB to receive per PE; all-gather: 256 MiB and npes x 256 MiB),
 * rma's two 256 MiB buffers, and room for alignment, rounded up to GiB.
 * NVSHMEM keeps its own internal buffers outside this size. */
static size_t nv_heap_need(int nranks) {
    const size_t mib = (size_t)1 << 20, gib = (size_t)1 << 30;
    size_t coll = (size_t)(nranks + 1) * 256 * mib;
    if (coll < 2 * gib)
        coll = 2 * gib;
    size_t need = coll + 512 * mib + 512 * mib;
    return (need + gib - 1) / gib * gib;
}

/* NVSHMEM_SYMMETRIC_SIZE syntax: a number, optionally with one k/m/g/t
 * suffix (powers of 1024). 0 when it does not parse. */
static size_t nv_parse_size(const char *v) {
    char *end = NULL;
    double x = strtod(v, &end);
    if (end == v || x <= 0)
        return 0;
    switch (*end) {
    case 'k': case 'K': x *= 1024.0; break;
    case 'm': case 'M': x *= 1024.0 * 1024.0; break;
    case 'g': case 'G': x *= 1024.0 * 1024.0 * 1024.0; break;
    case 't': case 'T': x *= 1024.0 * 1024.0 * 1024.0 * 1024.0; break;
    default: break;
    }
    return (size_t)x;
}

/* NVSHMEM's environment for the comparisons, set before anything of NVSHMEM
 * runs (rank 0's nvshmemx_get_uniqueid already reads its options, and every
 * PE must see the same heap size):
 * - NVSHMEM_DISABLE_NCCL=1 unless set: this NVSHMEM is built with NCCL and
 *   would hand its on-stream collectives to the libnccl.so.2 that symm-bench
 *   itself loads, so the "NVSHMEM" column would time NCCL again.
 * - NVSHMEM_SYMMETRIC_SIZE raised to nv_heap_need when it is below (the
 *   bench's 2G default fits rma but not coll's 1 GiB all-to-all); a larger
 *   value is kept. With CUDA VMM (NVSHMEM's default over NVLink) the size is
 *   an address reservation, mapped only as nvshmem_malloc needs it. */
static void nv_set_env(int nranks) {
    char want[32], was[48], raised[96] = "";
    const char *nccl, *nvls, *cur = getenv("NVSHMEM_SYMMETRIC_SIZE");
    size_t need = nv_heap_need(nranks), have = cur ? nv_parse_size(cur) : 0;
    snprintf(was, sizeof was, "%s", cur ? cur : "unset (NVSHMEM's 1 GiB default)");
    (void)setenv("NVSHMEM_DISABLE_NCCL", "1", 0); /* on failure the info line below says what is set */
    if (have < need) {
        snprintf(want, sizeof want, "%zuG", need >> 30); /* need is whole GiB */
        if (setenv("NVSHMEM_SYMMETRIC_SIZE", want, 1) == 0) {
            snprintf(raised, sizeof raised, " (raised from %s)", was);
            have = need;
        }
    }
    g_nv.heap_bytes = have;
    cur = getenv("NVSHMEM_SYMMETRIC_SIZE");
    nccl = getenv("NVSHMEM_DISABLE_NCCL");
    nvls = getenv("NVSHMEM_DISABLE_NVLS");
    if (nccl && (!strcmp(nccl, "1") || !strcasecmp(nccl, "true") || !strcasecmp(nccl, "yes")))
        snprintf(g_nv.coll_info, sizeof g_nv.coll_info, "NVSHMEM's own kernels (NVSHMEM_DISABLE_NCCL=%s)", nccl);
    else
        snprintf(g_nv.coll_info, sizeof g_nv.coll_info,
                 "NVSHMEM_DISABLE_NCCL=%s: NVSHMEM may hand these to NCCL", nccl ? nccl : "unset");
    snprintf(g_nv.coll_info + strlen(g_nv.coll_info), sizeof g_nv.coll_info - strlen(g_nv.coll_info),
             ", NVSHMEM_DISABLE_NVLS=%s, NVSHMEM_SYMMETRIC_SIZE=%s%s", nvls ? nvls : "unset", cur ? cur : "unset",
             raised);
}

typedef struct nv_uid_msg {
    int ok;
    nvshmemx_uniqueid_t id;
} nv_uid_msg_t;

extern "C" int bench_nv_init(int rank, int nranks, int (*bcast)(void *buf, size_t n), char *why,
                             size_t why_len) {
    nv_uid_msg_t msg;
    nvshmemx_uniqueid_t id0 = NVSHMEMX_UNIQUEID_INITIALIZER;
    nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
    int st, major = 0, minor = 0, patch = 0;

    nv_set_env(nranks);
    memset(&msg, 0, sizeof msg);
    msg.id = id0;
    if (rank == 0)
        msg.ok = nvshmemx_get_uniqueid(&msg.id) == 0;
    /* Rank 0's verdict travels with the id so every rank gives up together. */
    if (bcast(&msg, sizeof msg) != 0) {
        snprintf(why, why_len, "broadcast of the NVSHMEM unique id failed");
        return -1;
    }
    if (!msg.ok) {
        snprintf(why, why_len, "nvshmemx_get_uniqueid failed on rank 0");
        return -1;
    }
    if (nvshmemx_set_attr_uniqueid_args(rank, nranks, &msg.id, &attr) != 0) {
        snprintf(why, why_len, "nvshmemx_set_attr_uniqueid_args failed");
        return -1;
    }
    /* The public entry point. It exits the process when init fails, and that
     * is what we want: a PE that returned with an error while its peer sat
     * inside NVSHMEM's bootstrap waiting for it would hang the run, whereas
     * an exit makes symmrun stop every PE at once (then rerun with
     * --no-nvshmem). */
    st = nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr);
    if (st != 0) {
        snprintf(why, why_len, "nvshmemx init with unique id failed (status %d)", st);
        return -1;
    }
    if (nvshmem_my_pe() != rank || nvshmem_n_pes() != nranks) {
        snprintf(why, why_len, "NVSHMEM PE %d of %d differs from symm's %d of %d", nvshmem_my_pe(),
                 nvshmem_n_pes(), rank, nranks);
        return -1;
    }
    nvshmemx_vendor_get_version_info(&major, &minor, &patch);
    snprintf(g_nv.version, sizeof g_nv.version, "NVSHMEM %d.%d.%d", major, minor, patch);
    g_nv.inited = 1;
    return 0;
}

extern "C" const char *bench_nv_version(void) { return g_nv.version; }

extern "C" int bench_nv_alloc(size_t bytes, void **src, void **dst) {
    g_nv.src = nvshmem_malloc(bytes);
    g_nv.dst = nvshmem_malloc(bytes);
    g_nv.lat = (struct nv_lat *)nvshmem_calloc(1, sizeof(struct nv_lat));
    if (!g_nv.src || !g_nv.dst || !g_nv.lat)
        return -1;
    g_nv.used_bytes += 2 * bytes + sizeof(struct nv_lat);
    *src = g_nv.src;
    *dst = g_nv.dst;
    return 0;
}

__global__ static void nv_put_kernel(char *dst, const char *src, size_t n, int inner, int pe) {
    size_t off;
    size_t len = bench_slice(n, blockIdx.x, gridDim.x, &off);
    for (int it = 0; it < inner; ++it)
        if (len)
            nvshmemx_putmem_block(dst + off, src + off, len, pe);
    __syncthreads();
    if (threadIdx.x == 0)
        nvshmem_quiet();
}

extern "C" void bench_nv_put_launch(void *dst, const void *src, size_t n, int blocks, int threads,
                                    int inner, int pe, void *stream) {
    nv_put_kernel<<<blocks, threads, 0, (cudaStream_t)stream>>>((char *)dst, (const char *)src, n,
                                                                inner, pe);
}

__global__ static void nv_lat_kernel(int kind, int role, int peer, int warm, int iters, uint32_t base,
                                     struct nv_lat *L, unsigned long long *d_ns,
                                     unsigned long long *d_err) {
    uint64_t t0 = 0;
    unsigned long long bad = 0;
    int old = 0;
    int total = warm + iters;
    for (int k = 0; k < total; ++k) {
        uint32_t v = base + (uint32_t)k + 1u;
        if (k == warm)
            t0 = bench_globaltimer();
        switch (kind) {
        case BENCH_LAT_P:
            if (role == 0) {
                nvshmem_int_p(&L->flag[kind], (int)v, peer);
                nvshmem_int_wait_until(&L->flag[kind], NVSHMEM_CMP_EQ, (int)v);
            } else {
                nvshmem_int_wait_until(&L->flag[kind], NVSHMEM_CMP_EQ, (int)v);
                nvshmem_int_p(&L->flag[kind], (int)v, peer);
            }
            break;
        case BENCH_LAT_PUT_SIGNAL:
        case BENCH_LAT_PUT_SIGNAL_NBI:
            if (role == 1) {
                nvshmem_signal_wait_until(&L->sig[kind], NVSHMEM_CMP_EQ, v);
                bad += *(volatile uint64_t *)&L->data[kind] != v;
            }
            L->src[kind] = v;
            if (kind == BENCH_LAT_PUT_SIGNAL)
                nvshmem_putmem_signal(&L->data[kind], &L->src[kind], 8, &L->sig[kind], v,
                                      NVSHMEM_SIGNAL_SET, peer);
            else
                nvshmem_putmem_signal_nbi(&L->data[kind], &L->src[kind], 8, &L->sig[kind], v,
                                          NVSHMEM_SIGNAL_SET, peer);
            if (role == 0) {
                nvshmem_signal_wait_until(&L->sig[kind], NVSHMEM_CMP_EQ, v);
                bad += *(volatile uint64_t *)&L->data[kind] != v;
            }
            break;
        case BENCH_LAT_FETCH_ADD:
            /* The added value depends on the previous result (always 1, as
             * the counter stays below 2^30), so each add waits for the last. */
            old = nvshmem_int_atomic_fetch_add(&L->counter, 1 + (old >> 30), peer);
            break;
        default:
            break;
        }
    }
    if (role == 0) {
        *d_ns = bench_globaltimer() - t0;
        *d_err = bad + (kind == BENCH_LAT_FETCH_ADD && old < 0);
    } else {
        *d_err = bad;
    }
}

extern "C" int bench_nv_latency(int kind, int role, int peer, int warm, int iters, uint32_t base,
                                unsigned long long *d_ns, unsigned long long *d_err, void *stream) {
    if (!g_nv.lat || kind < 0 || kind >= BENCH_LAT_KINDS)
        return -1;
    nv_lat_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(kind, role, peer, warm, iters, base, g_nv.lat,
                                                     d_ns, d_err);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" int bench_nv_read_counter(uint32_t *value) {
    int v = 0;
    if (!g_nv.lat || cudaMemcpy(&v, &g_nv.lat->counter, sizeof v, cudaMemcpyDeviceToHost) != cudaSuccess)
        return -1;
    *value = (uint32_t)v;
    return 0;
}

/* ---- on-stream collectives ------------------------------------------------------ */

extern "C" const char *bench_nv_coll_info(void) { return g_nv.coll_info; }

extern "C" void bench_nv_coll_free(void) {
    if (!g_nv.coll_src)
        return;
    nvshmem_free(g_nv.coll_dst);
    nvshmem_free(g_nv.coll_src);
    g_nv.coll_src = g_nv.coll_dst = NULL;
    g_nv.coll_bytes = 0;
}

extern "C" int bench_nv_coll_alloc(size_t src_bytes, size_t dst_bytes, void **src, void **dst) {
    /* 64 MiB of the heap stay free for the allocator's own rounding. */
    const size_t slack = (size_t)64 << 20;
    bench_nv_coll_free();
    /* Every PE computes the same answer from the same sizes and environment,
     * so all of them skip nvshmem_malloc (collective) together. */
    if (!g_nv.inited || src_bytes == 0 || dst_bytes == 0 || g_nv.heap_bytes < slack ||
        g_nv.used_bytes + src_bytes + dst_bytes > g_nv.heap_bytes - slack)
        return -1;
    g_nv.coll_src = nvshmem_malloc(src_bytes);
    g_nv.coll_dst = nvshmem_malloc(dst_bytes);
    if (!g_nv.coll_src || !g_nv.coll_dst) {
        if (g_nv.coll_dst)
            nvshmem_free(g_nv.coll_dst);
        if (g_nv.coll_src)
            nvshmem_free(g_nv.coll_src);
        g_nv.coll_src = g_nv.coll_dst = NULL;
        return -1;
    }
    g_nv.coll_bytes = src_bytes + dst_bytes;
    *src = g_nv.coll_src;
    *dst = g_nv.coll_dst;
    return 0;
}

/* One typed call: NVSHMEM's status, or *none set when there is no such
 * collective for the type. */
static int nv_coll_f32(int kind, float *dst, const float *src, size_t count, int root, cudaStream_t s,
                       int *none) {
    switch (kind) {
    case BENCH_NV_ALL_REDUCE: return nvshmemx_float_sum_reduce_on_stream(NVSHMEM_TEAM_WORLD, dst, src, count, s);
    case BENCH_NV_REDUCE_SCATTER:
        return nvshmemx_float_sum_reducescatter_on_stream(NVSHMEM_TEAM_WORLD, dst, src, count, s);
    case BENCH_NV_ALL_GATHER: return nvshmemx_float_fcollect_on_stream(NVSHMEM_TEAM_WORLD, dst, src, count, s);
    case BENCH_NV_ALL_TO_ALL: return nvshmemx_float_alltoall_on_stream(NVSHMEM_TEAM_WORLD, dst, src, count, s);
    case BENCH_NV_BROADCAST:
        return nvshmemx_float_broadcast_on_stream(NVSHMEM_TEAM_WORLD, dst, src, count, root, s);
    default: *none = 1; return 0;
    }
}

static int nv_coll_bf16(int kind, __nv_bfloat16 *dst, const __nv_bfloat16 *src, size_t count, int root,
                        cudaStream_t s, int *none) {
    switch (kind) {
    case BENCH_NV_ALL_REDUCE:
        return nvshmemx_bfloat16_sum_reduce_on_stream(NVSHMEM_TEAM_WORLD, dst, src, count, s);
    case BENCH_NV_REDUCE_SCATTER:
        return nvshmemx_bfloat16_sum_reducescatter_on_stream(NVSHMEM_TEAM_WORLD, dst, src, count, s);
    case BENCH_NV_ALL_GATHER: return nvshmemx_bfloat16_fcollect_on_stream(NVSHMEM_TEAM_WORLD, dst, src, count, s);
    case BENCH_NV_ALL_TO_ALL: return nvshmemx_bfloat16_alltoall_on_stream(NVSHMEM_TEAM_WORLD, dst, src, count, s);
    case BENCH_NV_BROADCAST:
        return nvshmemx_bfloat16_broadcast_on_stream(NVSHMEM_TEAM_WORLD, dst, src, count, root, s);
    default: *none = 1; return 0;
    }
}

extern "C" int bench_nv_coll(int kind, int dtype, void *dst, const void *src, size_t count, int root,
                             void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    int r, none = 0;
    if (!g_nv.inited)
        return -1;
    if (dtype == BENCH_NV_F32)
        r = nv_coll_f32(kind, (float *)dst, (const float *)src, count, root, s, &none);
    else if (dtype == BENCH_NV_BF16)
        r = nv_coll_bf16(kind, (__nv_bfloat16 *)dst, (const __nv_bfloat16 *)src, count, root, s, &none);
    else
        none = 1, r = 0;
    if (none)
        return 1;
    /* NVSHMEM's status, then the launch it made (a capture that refused it
     * shows up here). */
    if (r != 0 || cudaGetLastError() != cudaSuccess)
        return -1;
    return 0;
}

extern "C" void bench_nv_barrier_all(void) { nvshmem_barrier_all(); }

extern "C" void bench_nv_finalize(void) {
    if (!g_nv.inited)
        return;
    bench_nv_coll_free();
    nvshmem_free(g_nv.lat);
    nvshmem_free(g_nv.dst);
    nvshmem_free(g_nv.src);
    g_nv.lat = NULL;
    g_nv.src = g_nv.dst = NULL;
    nvshmem_finalize();
    g_nv.inited = 0;
}
