/*
 * put_variants.cu - the copy-engine variants of symm_put_block side by side
 * with the copy engine (cudaMemcpyAsync into the peer's mapping), on the same
 * GPUs in one run, to choose the defaults of impl_copy.h; and
 * (--small) where the time of a small block put, a p ping-pong and a remote
 * fetch_add goes, formulation by formulation. A measuring tool, not a test:
 * it asserts nothing about speed, only that every variant delivered the right
 * bytes (and every add arrived once).
 *
 * Large puts: PE 0 puts to PE 1 (a grid of blocks, each symm_put_block on a
 * slice); for each size and variant it reports the best of several grid
 * shapes. Then the small-call tables below (small_puts, small_variants,
 * latency).
 * Usage: symmrun -n 2 device_put_variants [max_MiB]   large puts, then small
 *        symmrun -n 2 device_put_variants --small     the small tables only
 */
#include <stdlib.h>
#include <string.h>

#include "device_test.h"

typedef cudaError_t (*pv_fn)(const symm_ctx_t *, char *, const char *, size_t, int, int, int, cudaStream_t);
typedef cudaError_t (*pv_small_fn)(const symm_ctx_t *, char *, const char *, size_t, int, int, int,
                                   unsigned long long *);
#define PV_DECL(name, desc)                                                                                    \
    extern "C" cudaError_t name(const symm_ctx_t *, char *, const char *, size_t, int, int, int, cudaStream_t); \
    extern "C" cudaError_t name##_small(const symm_ctx_t *, char *, const char *, size_t, int, int, int,       \
                                        unsigned long long *);
#define PV_LIST(X)                                                                  \
    X(pv_sm_u4, "SM ld/st, 4 loads in flight (default)")                            \
    X(pv_sm_u2, "SM ld/st, 2 in flight")                                            \
    X(pv_sm_u8, "SM ld/st, 8 in flight")                                            \
    X(pv_sm_global_u4, "SM, .global + L1::no_allocate + L2::256B, 4 in flight")
PV_LIST(PV_DECL)
#define PV_ENTRY(name, desc) {name, name##_small, #name, desc},
static const struct { pv_fn fn; pv_small_fn small; const char *name, *desc; } variants[] = {PV_LIST(PV_ENTRY)};
#define N_VARIANTS (int)(sizeof variants / sizeof variants[0])

/* ---- small puts, p and fetch_add: where the time of a small call goes ----------
 * `--small` (and the end of a default run). PE 0 -> PE 1, one block of 1024
 * threads; each timing is one kernel of SM_INNER back-to-back calls, timed
 * inside the kernel with %globaltimer (no launch overhead) up to a final
 * barrier and one thread's fence.sc.sys (the bench's quiet); the figure is
 * the median of SM_REPS such kernels, in microseconds per call. Every
 * formulation's destination is poisoned on PE 1 before and checked byte for
 * byte after. Formulations (each changes one thing):
 *   api        symm_put_block(ctx, ...) as built (the library under test)
 *   old        the baseline: symm_put_block without its fast path, frozen
 *              here (per-call plain context loads + head/width/tail copy)
 *   api_local  symm_put_block with the context copied into a local first
 *   old_peer1  old copy engine, peer address computed once outside the loop
 *   lib_peer1  the library's symm__copy, peer address computed once
 *   fast_plain bare 16-byte loop (no head/tail), per-call plain ctx loads
 *   fast_ldg   bare 16-byte loop, per-call ctx loads with __ldg when global
 *   fast_hoist bare 16-byte loop, peer address computed once
 *   plain      plain CUDA int4 loop, peer once, ld.global source (NVSHMEM's
 *              putmem_block shape)
 *   plain_gen  plain with a generic (not .global) load of the source, as the
 *              library's local side is (it may be shared memory)
 * "-": the formulation needs a multiple of 16 bytes. */

#define SM_INNER 100
#define SM_REPS 7
#define SM_THREADS 1024

/* -- the measured baseline (column "old" of bench/results/latest/small-puts.md):
 * symm_put_block's copy loop without the fast path, frozen on purpose, so it
 * repeats impl_copy.h's loop and must not follow its changes -- */
#define PV_OLD_LOOP(W)                                                                              \
    __device__ __forceinline__ static void pv_old_loop##W(char *d, const char *s, size_t n, size_t lane, \
                                                          size_t nlanes, int remote_dst) {        \
        const size_t step = nlanes * (W);                                                         \
        size_t i = lane;                                                                          \
        d += lane * (W);                                                                          \
        s += lane * (W);                                                                          \
        for (; i + (SYMM_COPY_UNROLL - 1) * nlanes < n; i += SYMM_COPY_UNROLL * nlanes) {         \
            symm__e##W##_t v[SYMM_COPY_UNROLL];                                                   \
            SYMM__PRAGMA_UNROLL                                                                   \
            for (int k = 0; k < SYMM_COPY_UNROLL; k++)                                            \
                v[k] = symm__cld##W(s + (size_t)k * step, !remote_dst);                           \
            SYMM__PRAGMA_UNROLL                                                                   \
            for (int k = 0; k < SYMM_COPY_UNROLL; k++)                                            \
                symm__cst##W(d + (size_t)k * step, v[k], remote_dst);                             \
            d += SYMM_COPY_UNROLL * step;                                                         \
            s += SYMM_COPY_UNROLL * step;                                                         \
        }                                                                                         \
        for (; i < n; i += nlanes) {                                                              \
            symm__cst##W(d, symm__cld##W(s, !remote_dst), remote_dst);                            \
            d += step;                                                                            \
            s += step;                                                                            \
        }                                                                                         \
    }
PV_OLD_LOOP(16)
PV_OLD_LOOP(8)
PV_OLD_LOOP(4)
PV_OLD_LOOP(2)
PV_OLD_LOOP(1)
#undef PV_OLD_LOOP

__device__ __forceinline__ static void pv_old_small(char *d, const char *s, size_t n, int remote_dst) {
    while (n != 0) {
        uintptr_t a = (uintptr_t)d | (uintptr_t)s;
        if (n >= 8 && (a & 7) == 0) {
            symm__cst8(d, symm__cld8(s, !remote_dst), remote_dst);
            d += 8; s += 8; n -= 8;
        } else if (n >= 4 && (a & 3) == 0) {
            symm__cst4(d, symm__cld4(s, !remote_dst), remote_dst);
            d += 4; s += 4; n -= 4;
        } else if (n >= 2 && (a & 1) == 0) {
            symm__cst2(d, symm__cld2(s, !remote_dst), remote_dst);
            d += 2; s += 2; n -= 2;
        } else {
            symm__cst1(d, symm__cld1(s, !remote_dst), remote_dst);
            d += 1; s += 1; n -= 1;
        }
    }
}

__device__ __forceinline__ static void pv_old_copy(void *dst, const void *src, size_t n, uint32_t lane,
                                                   uint32_t nlanes, int remote_dst) {
    char *d = (char *)dst;
    const char *s = (const char *)src;
    uintptr_t x = ((uintptr_t)d ^ (uintptr_t)s) | 16u;
    size_t w = (size_t)(x & (~x + 1u));
    size_t head = (size_t)(-(uintptr_t)d) & (w - 1);
    size_t body, tail;
    if (head > n)
        head = n;
    if (head != 0 && lane == 0)
        pv_old_small(d, s, head, remote_dst);
    d += head;
    s += head;
    n -= head;
    tail = n & (w - 1);
    switch (w) {
    case 16: body = n >> 4; pv_old_loop16(d, s, body, lane, nlanes, remote_dst); break;
    case 8: body = n >> 3; pv_old_loop8(d, s, body, lane, nlanes, remote_dst); break;
    case 4: body = n >> 2; pv_old_loop4(d, s, body, lane, nlanes, remote_dst); break;
    case 2: body = n >> 1; pv_old_loop2(d, s, body, lane, nlanes, remote_dst); break;
    default: body = n; pv_old_loop1(d, s, body, lane, nlanes, remote_dst); break;
    }
    if (tail != 0 && lane == nlanes - 1)
        pv_old_small(d + body * w, s + body * w, tail, remote_dst);
}

/* The old peer translation: plain loads of the context on every call. */
__device__ __forceinline__ static void *pv_old_peer(const symm_ctx_t *ctx, const void *p, int pe) {
    return (void *)((uintptr_t)p + (uintptr_t)((int64_t)(pe - ctx->my_pe) * ctx->stride));
}

/* Context loads through the compiler's read-only intrinsic when global. */
__device__ __forceinline__ static void *pv_ldg_peer(const symm_ctx_t *ctx, const void *p, int pe) {
    if (__isGlobal(ctx))
        return (void *)((uintptr_t)p + (uintptr_t)((int64_t)(pe - __ldg(&ctx->my_pe)) * __ldg(&ctx->stride)));
    return pv_old_peer(ctx, p, pe);
}

/* The bare 16-byte loop: d, s, n multiples of 16; one vector per thread per step. */
__device__ __forceinline__ static void pv_fast16(char *d, const char *s, size_t n) {
    for (size_t i = threadIdx.x; i < n / 16; i += blockDim.x)
        symm__cst16(d + 16 * i, symm__cld16(s + 16 * i, 0), 1);
}

__device__ __forceinline__ static void pv_plain(char *d, const char *s, size_t n) {
    const int4 *s4 = (const int4 *)s;
    int4 *d4 = (int4 *)d;
    for (size_t i = threadIdx.x; i < n / 16; i += blockDim.x)
        d4[i] = s4[i];
}

__device__ __forceinline__ static void pv_plain_gen(char *d, const char *s, size_t n) {
    int4 *d4 = (int4 *)d;
    for (size_t i = threadIdx.x; i < n / 16; i += blockDim.x) {
        int4 v;
        asm volatile("ld.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(s + 16 * i) : "memory");
        d4[i] = v;
    }
}

enum {
    SM_API, SM_OLD, SM_API_LOCAL, SM_OLD_PEER1, SM_LIB_PEER1, SM_FAST_PLAIN, SM_FAST_LDG, SM_FAST_HOIST,
    SM_PLAIN, SM_PLAIN_GEN, SM_N
};
static const char *const sm_name[SM_N] = {"api",        "old",      "api_local",  "old_peer1", "lib_peer1",
                                          "fast_plain", "fast_ldg", "fast_hoist", "plain",     "plain_gen"};
static int sm_needs16(int k) { return k >= SM_FAST_PLAIN; }

__device__ static inline uint64_t pv_now(void) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* One formulation's SM_INNER calls; ctx is the device pointer, or a local
 * copy of it for SM_API_LOCAL (separate call sites, so each inlined call sees
 * its context's address space the way a user's kernel would). */
__device__ __forceinline__ static void sm_calls(const symm_ctx_t *ctx, char *peer, char *dst, const char *src,
                                                size_t n, int pe, int kind) {
    switch (kind) {
    case SM_API:
    case SM_API_LOCAL:
        for (int it = 0; it < SM_INNER; ++it)
            symm_put_block(ctx, dst, src, n, pe);
        break;
    case SM_OLD:
        for (int it = 0; it < SM_INNER; ++it) {
            pv_old_copy(pv_old_peer(ctx, dst, pe), src, n, threadIdx.x, blockDim.x, 1);
            __syncthreads();
        }
        break;
    case SM_OLD_PEER1:
        for (int it = 0; it < SM_INNER; ++it) {
            pv_old_copy(peer, src, n, threadIdx.x, blockDim.x, 1);
            __syncthreads();
        }
        break;
    case SM_LIB_PEER1:
        for (int it = 0; it < SM_INNER; ++it) {
            symm__copy(peer, src, n, threadIdx.x, blockDim.x, 1);
            __syncthreads();
        }
        break;
    case SM_FAST_PLAIN:
        for (int it = 0; it < SM_INNER; ++it) {
            pv_fast16((char *)pv_old_peer(ctx, dst, pe), src, n);
            __syncthreads();
        }
        break;
    case SM_FAST_LDG:
        for (int it = 0; it < SM_INNER; ++it) {
            pv_fast16((char *)pv_ldg_peer(ctx, dst, pe), src, n);
            __syncthreads();
        }
        break;
    case SM_FAST_HOIST:
        for (int it = 0; it < SM_INNER; ++it) {
            pv_fast16(peer, src, n);
            __syncthreads();
        }
        break;
    case SM_PLAIN:
        for (int it = 0; it < SM_INNER; ++it) {
            pv_plain(peer, src, n);
            __syncthreads();
        }
        break;
    default:
        for (int it = 0; it < SM_INNER; ++it) {
            pv_plain_gen(peer, src, n);
            __syncthreads();
        }
        break;
    }
}

__global__ static void sm_kernel(const symm_ctx_t *ctx, char *dst, const char *src, size_t n, int pe, int kind,
                                 unsigned long long *ns) {
    char *peer = (char *)symm_ctx_ptr(ctx, dst, pe);
    uint64_t t0 = 0;
    __syncthreads();
    if (threadIdx.x == 0)
        t0 = pv_now();
    if (kind == SM_API_LOCAL) {
        symm_ctx_t local = *ctx;
        sm_calls(&local, peer, dst, src, n, pe, kind);
    } else {
        sm_calls(ctx, peer, dst, src, n, pe, kind);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("fence.sc.sys;" ::: "memory");
        *ns = pv_now() - t0;
    }
}

static int pv_cmp_u64(const void *a, const void *b) {
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

static double pv_median_us(unsigned long long *v, int n, int per) {
    qsort(v, (size_t)n, sizeof v[0], pv_cmp_u64);
    return (double)v[n / 2] * 1e-3 / per;
}

static void small_puts(dt_env_t *e, char *dst, const char *src, unsigned long long *d_ns) {
    const size_t sizes[] = {8, 64, 512, 2048, 16384, 131072};
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    if (e->me == 0) {
        printf("\nsmall block puts, PE 0 -> PE 1: 1 block x %d threads, %d back-to-back calls per kernel, median "
               "of %d kernels timed in-kernel; microseconds per call (lower is better)\n%8s",
               SM_THREADS, SM_INNER, SM_REPS, "bytes");
        for (int k = 0; k < SM_N; k++)
            printf(" %10s", sm_name[k]);
        printf("\n");
    }
    for (int si = 0; si < nsizes; si++) {
        size_t n = sizes[si];
        if (e->me == 0)
            printf("%8zu", n);
        for (int k = 0; k < SM_N; k++) {
            int skip = sm_needs16(k) && n % 16 != 0;
            if (e->me == 1 && !skip)
                dt_fill(dst, n, 42, 1);
            CUDA_CHECK(cudaDeviceSynchronize());
            SYMM_CHECK(symm_barrier_all());
            if (e->me == 0) {
                if (skip) {
                    printf(" %10s", "-");
                } else {
                    unsigned long long ns[SM_REPS];
                    sm_kernel<<<1, SM_THREADS>>>(e->ctx, dst, src, n, 1, k, d_ns); /* warm-up */
                    CUDA_CHECK_KERNEL();
                    for (int r = 0; r < SM_REPS; r++) {
                        sm_kernel<<<1, SM_THREADS>>>(e->ctx, dst, src, n, 1, k, d_ns);
                        CUDA_CHECK_KERNEL();
                        CUDA_CHECK(cudaMemcpy(&ns[r], d_ns, sizeof ns[r], cudaMemcpyDeviceToHost));
                    }
                    printf(" %10.3f", pv_median_us(ns, SM_REPS, SM_INNER));
                }
                fflush(stdout);
            }
            SYMM_CHECK(symm_barrier_all());
            if (e->me == 1 && !skip)
                dt_check(e, dst, n, 42, 0, 0, sm_name[k]);
        }
        if (e->me == 0)
            printf("\n");
    }
}

/* ---- p ping-pong and fetch_add round trip -----------------------------------
 *   api      symm_p_i32 + symm_wait_until_i32 / symm_atomic_fetch_add_i32 (ctx pointer)
 *   local    the same with the context copied into a local first
 *   old      the 32355c1 peer translation (plain ctx loads per call), then the
 *            same store / wait / atom
 *   relaxed  p only: symm_p_i32, then a wait that polls ld.relaxed.sys and ends
 *            with one fence.acq_rel.sys (an acquire pattern in the PTX model)
 *            instead of an ld.acquire.sys per poll; its own 10 s deadline
 *   raw      the peer address computed once: st.volatile + ld.volatile poll (p),
 *            atom.relaxed.sys (fetch_add); its own 10 s deadline
 * one-way = round trip / 2 for p; a fetch_add's value depends on the previous
 * one's result, so each is a full round trip. */
enum { LT_API, LT_LOCAL, LT_OLD, LT_RLX, LT_RAW, LT_N };
static const char *const lt_name[LT_N] = {"api", "local", "old", "relaxed", "raw"};
#define LT_WARM 200
#define LT_ITERS 5000

struct pv_lat {
    int32_t flag[LT_N];
    int32_t counter[LT_N];
};

__device__ static inline void pv_p_old(const symm_ctx_t *ctx, int32_t *dest, int32_t v, int pe) {
    asm volatile("st.relaxed.sys.global.b32 [%0], %1;" ::"l"(pv_old_peer(ctx, dest, pe)), "r"(v) : "memory");
}

/* Poll relaxed, then one fence: 0, or 1 past the deadline. */
__device__ __forceinline__ static int lt_wait_relaxed(const int32_t *flag, int32_t v, uint64_t deadline) {
    int32_t x;
    for (unsigned spin = 0;; ++spin) {
        asm volatile("ld.relaxed.sys.global.b32 %0, [%1];" : "=r"(x) : "l"(flag) : "memory");
        if (x == v)
            break;
        if ((spin & 4095u) == 4095u && pv_now() > deadline)
            return 1;
    }
    asm volatile("fence.acq_rel.sys;" ::: "memory");
    return 0;
}

__device__ __forceinline__ static int lt_p_loop(const symm_ctx_t *ctx, int kind, int role, int peer, uint32_t base,
                                                int32_t *flag, volatile int32_t *rflag, uint64_t *t0) {
    const uint64_t deadline = pv_now() + 10ull * 1000000000ull;
    for (int k = 0; k < LT_WARM + LT_ITERS; ++k) {
        int32_t v = (int32_t)(base + (uint32_t)k + 1u);
        if (k == LT_WARM)
            *t0 = pv_now();
        if (kind == LT_RAW) {
            if (role == 0)
                *rflag = v;
            for (unsigned spin = 0; *(volatile int32_t *)flag != v; ++spin)
                if ((spin & 4095u) == 4095u && pv_now() > deadline)
                    return 1;
            if (role == 1)
                *rflag = v;
            continue;
        }
        if (role == 0) {
            if (kind == LT_OLD)
                pv_p_old(ctx, flag, v, peer);
            else
                symm_p_i32(ctx, flag, v, peer);
        }
        if (kind == LT_RLX) {
            if (lt_wait_relaxed(flag, v, deadline))
                return 1;
        } else {
            symm_wait_until_i32(ctx, flag, SYMM_CMP_EQ, v);
        }
        if (role == 1) {
            if (kind == LT_OLD)
                pv_p_old(ctx, flag, v, peer);
            else
                symm_p_i32(ctx, flag, v, peer);
        }
    }
    return 0;
}

__global__ static void lt_p_kernel(const symm_ctx_t *ctx, int kind, int role, int peer, uint32_t base,
                                   struct pv_lat *L, unsigned long long *ns, unsigned long long *err) {
    int32_t *flag = &L->flag[kind];
    volatile int32_t *rflag = (volatile int32_t *)symm_ctx_ptr(ctx, flag, peer);
    uint64_t t0 = 0;
    int bad;
    if (kind == LT_LOCAL) {
        symm_ctx_t local = *ctx;
        bad = lt_p_loop(&local, kind, role, peer, base, flag, rflag, &t0);
    } else {
        bad = lt_p_loop(ctx, kind, role, peer, base, flag, rflag, &t0);
    }
    if (bad)
        *err = 1;
    else if (role == 0)
        *ns = pv_now() - t0;
}

__device__ __forceinline__ static int32_t lt_fadd_loop(const symm_ctx_t *ctx, int kind, int peer, int32_t *c,
                                                       int32_t *rc, uint64_t *t0) {
    int32_t old = 0;
    for (int k = 0; k < LT_WARM + LT_ITERS; ++k) {
        if (k == LT_WARM)
            *t0 = pv_now();
        int32_t add = 1 + (old >> 30); /* always 1; depends on the last result */
        switch (kind) {
        case LT_OLD:
            asm volatile("atom.relaxed.sys.global.add.u32 %0, [%1], %2;"
                         : "=r"(old) : "l"(pv_old_peer(ctx, c, peer)), "r"(add) : "memory");
            break;
        case LT_RAW:
            asm volatile("atom.relaxed.sys.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(rc), "r"(add) : "memory");
            break;
        default:
            old = symm_atomic_fetch_add_i32(ctx, c, add, peer);
            break;
        }
    }
    return old;
}

__global__ static void lt_fadd_kernel(const symm_ctx_t *ctx, int kind, int peer, struct pv_lat *L,
                                      unsigned long long *ns, unsigned long long *err) {
    int32_t *c = &L->counter[kind];
    int32_t *rc = (int32_t *)symm_ctx_ptr(ctx, c, peer);
    uint64_t t0 = 0;
    int32_t old;
    if (kind == LT_LOCAL) {
        symm_ctx_t local = *ctx;
        old = lt_fadd_loop(&local, kind, peer, c, rc, &t0);
    } else {
        old = lt_fadd_loop(ctx, kind, peer, c, rc, &t0);
    }
    *ns = pv_now() - t0;
    *err = old < 0;
}

static void latency(dt_env_t *e, unsigned long long *d_ns) {
    struct pv_lat *L;
    SYMM_CHECK(symm_calloc(1, sizeof *L, (void **)&L));
    SYMM_CHECK(symm_barrier_all());
    unsigned long long *d_err = e->d_err;
    double p_us[LT_N] = {0}, a_us[LT_N] = {0};
    for (int k = 0; k < LT_N; k++) {
        unsigned long long ns[SM_REPS] = {0};
        for (int r = -1; r < SM_REPS; r++) { /* r = -1: warm-up */
            uint32_t base = (uint32_t)(r + 1) * (LT_WARM + LT_ITERS);
            dt_err_reset(e);
            SYMM_CHECK(symm_barrier_all());
            lt_p_kernel<<<1, 1>>>(e->ctx, k, e->me, 1 - e->me, base, L, d_ns, d_err);
            CUDA_CHECK_KERNEL();
            TEST_ASSERT(dt_err_read(e, 0) == 0, "p ping-pong %s: flag timed out", lt_name[k]);
            if (e->me == 0 && r >= 0)
                CUDA_CHECK(cudaMemcpy(&ns[r], d_ns, sizeof ns[r], cudaMemcpyDeviceToHost));
        }
        p_us[k] = e->me == 0 ? pv_median_us(ns, SM_REPS, 2 * LT_ITERS) : 0;
    }
    for (int k = 0; k < LT_N; k++) {
        unsigned long long ns[SM_REPS] = {0};
        if (k == LT_RLX) /* a p-only formulation */
            continue;
        SYMM_CHECK(symm_barrier_all());
        if (e->me == 0) {
            for (int r = -1; r < SM_REPS; r++) {
                dt_err_reset(e);
                lt_fadd_kernel<<<1, 1>>>(e->ctx, k, 1, L, d_ns, d_err);
                CUDA_CHECK_KERNEL();
                TEST_ASSERT(dt_err_read(e, 0) == 0, "fetch_add %s: counter went negative", lt_name[k]);
                if (r >= 0)
                    CUDA_CHECK(cudaMemcpy(&ns[r], d_ns, sizeof ns[r], cudaMemcpyDeviceToHost));
            }
            a_us[k] = pv_median_us(ns, SM_REPS, LT_ITERS);
        }
        SYMM_CHECK(symm_barrier_all());
        if (e->me == 1) { /* every add arrived, exactly once */
            int32_t got;
            CUDA_CHECK(cudaMemcpy(&got, &L->counter[k], sizeof got, cudaMemcpyDeviceToHost));
            TEST_ASSERT(got == (SM_REPS + 1) * (LT_WARM + LT_ITERS), "fetch_add %s: counter %d, want %d",
                        lt_name[k], got, (SM_REPS + 1) * (LT_WARM + LT_ITERS));
        }
    }
    if (e->me == 0) {
        printf("\nlatency, PE 0 <-> PE 1, one thread, median of %d kernels of %d (after %d untimed), us (lower is "
               "better)\n%24s", SM_REPS, LT_ITERS, LT_WARM, "");
        for (int k = 0; k < LT_N; k++)
            printf(" %8s", lt_name[k]);
        printf("\n%24s", "p ping-pong, one-way");
        for (int k = 0; k < LT_N; k++)
            printf(" %8.3f", p_us[k]);
        printf("\n%24s", "fetch_add, round trip");
        for (int k = 0; k < LT_N; k++)
            if (k == LT_RLX)
                printf(" %8s", "-");
            else
                printf(" %8.3f", a_us[k]);
        printf("\n");
    }
    SYMM_CHECK(symm_barrier_all());
    SYMM_CHECK(symm_free(L));
}

/* symm_put_block as each compile variant builds it (put_variants_kernel.cu),
 * same sizes and timing as small_puts: pv_sm_u4 is the default build. */
static void small_variants(dt_env_t *e, char *dst, const char *src, unsigned long long *d_ns) {
    const size_t sizes[] = {8, 64, 512, 2048, 16384, 131072};
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    if (e->me == 0) {
        printf("\nsmall block puts per compile variant (symm_put_block; same timing), us per call\n%8s", "bytes");
        for (int v = 0; v < N_VARIANTS; v++)
            printf(" %15s", variants[v].name);
        printf("\n");
    }
    for (int si = 0; si < nsizes; si++) {
        size_t n = sizes[si];
        if (e->me == 0)
            printf("%8zu", n);
        for (int v = 0; v < N_VARIANTS; v++) {
            if (e->me == 1)
                dt_fill(dst, n, 42, 1);
            CUDA_CHECK(cudaDeviceSynchronize());
            SYMM_CHECK(symm_barrier_all());
            if (e->me == 0) {
                unsigned long long ns[SM_REPS];
                for (int r = -1; r < SM_REPS; r++) { /* r = -1: warm-up */
                    CUDA_CHECK(variants[v].small(e->ctx, dst, src, n, 1, SM_INNER, SM_THREADS, d_ns));
                    CUDA_CHECK(cudaDeviceSynchronize());
                    if (r >= 0)
                        CUDA_CHECK(cudaMemcpy(&ns[r], d_ns, sizeof ns[r], cudaMemcpyDeviceToHost));
                }
                printf(" %15.3f", pv_median_us(ns, SM_REPS, SM_INNER));
                fflush(stdout);
            }
            SYMM_CHECK(symm_barrier_all());
            if (e->me == 1)
                dt_check(e, dst, n, 42, 0, 0, variants[v].name);
        }
        if (e->me == 0)
            printf("\n");
    }
}

int main(int argc, char **argv) {
    dt_env_t e;
    dt_init(&e, 2);
    const int small_only = argc > 1 && strcmp(argv[1], "--small") == 0;
    size_t max = (argc > 1 && !small_only ? (size_t)atoi(argv[1]) : 256) << 20;
    if (small_only)
        max = 1 << 20; /* the small tables move at most 128 KiB */
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
    if (e.me == 0 && !small_only) {
        printf("device_put_variants: %s, %d SMs; PE 0 -> PE 1, best of grids {1,2,4} x SMs x {256,512,1024} "
               "threads, %d iterations each\n", prop.name, sms, iters);
        for (int v = 0; v < N_VARIANTS; v++)
            printf("  %-18s %s\n", variants[v].name, variants[v].desc);
        printf("%10s %12s", "bytes", "CE GB/s");
        for (int v = 0; v < N_VARIANTS; v++)
            printf(" %18s", variants[v].name);
        printf("\n");
    }
    for (size_t n = (size_t)1 << 20; !small_only && n <= max; n *= 4) {
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
    if (e.me == 0)
        printf("\ndevice_put_variants small calls: %s, %d SMs\n", prop.name, sms);
    small_puts(&e, dst, src, e.d_err + 8);
    small_variants(&e, dst, src, e.d_err + 8);
    latency(&e, e.d_err + 8);
    CUDA_CHECK(cudaEventDestroy(t0));
    CUDA_CHECK(cudaEventDestroy(t1));
    CUDA_CHECK(cudaStreamDestroy(s));
    SYMM_CHECK(symm_free(dst));
    SYMM_CHECK(symm_free(src));
    dt_fini(&e);
    return 0;
}
