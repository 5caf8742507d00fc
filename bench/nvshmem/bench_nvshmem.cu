/*
 * bench_nvshmem.cu - NVSHMEM side of the rma comparisons (see bench_nvshmem.h).
 *
 * Built with relocatable device code and device-linked against
 * libnvshmem_device.a in its own static library, so the rest of symm-bench
 * is ordinary whole-program CUDA. The kernels mirror rma_bench.cu's symm
 * kernels call for call: same grid slicing, same loops, same checks.
 */
#include <stdio.h>
#include <string.h>

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
    void *src, *dst;
    struct nv_lat *lat;
} g_nv;

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

extern "C" void bench_nv_barrier_all(void) { nvshmem_barrier_all(); }

extern "C" void bench_nv_finalize(void) {
    if (!g_nv.inited)
        return;
    nvshmem_free(g_nv.lat);
    nvshmem_free(g_nv.dst);
    nvshmem_free(g_nv.src);
    g_nv.lat = NULL;
    g_nv.src = g_nv.dst = NULL;
    nvshmem_finalize();
    g_nv.inited = 0;
}
