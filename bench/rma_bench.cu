/*
 * rma_bench.cu - the "rma" mode of symm-bench: one-sided put bandwidth and
 * ping-pong / atomic latency between PE 0 and PE 1, symm side by side with the
 * raw hardware (cudaMemcpyPeerAsync, a volatile-flag ping-pong), NCCL
 * send/recv and NVSHMEM, in one run on the same two GPUs.
 *
 * Every number is guarded by a data check: the put destination is compared
 * with the source pattern for every size and library before it is timed
 * (a wrong byte prints "WRONG DATA" instead of a bandwidth), ping-pong
 * payloads are compared on arrival, and the atomic counter is compared with
 * the number of adds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_modes.h"
#include "bench_slice.h"
#include "nvshmem/bench_nvshmem.h"
#include "symm/symm_device.h"

/* ---- kernels ------------------------------------------------------------------ */

/* Block b puts its slice of [0, n) `inner` times, then all of it is made
 * visible once (quiet), like the NVSHMEM kernel in bench_nvshmem.cu. */
__global__ static void symm_put_kernel(const symm_ctx_t *ctx, char *dst, const char *src, size_t n,
                                       int inner, int pe) {
    size_t off;
    size_t len = bench_slice(n, blockIdx.x, gridDim.x, &off);
    for (int it = 0; it < inner; ++it)
        if (len) /* uniform per block, so the block-scope call is safe */
            symm_put_block(ctx, dst + off, src + off, len, pe);
    symm_quiet_block(ctx);
}

/* Latency words in the symmetric heap, one set per kind (values of each kind
 * rise monotonically across launches, so nothing is reset between them). */
struct lat_words {
    int32_t flag[BENCH_LAT_KINDS];
    int32_t counter;
    int32_t raw_flag;
    uint64_t sig[BENCH_LAT_KINDS];
    uint64_t data[BENCH_LAT_KINDS];
    uint64_t src[BENCH_LAT_KINDS];
};

/* The ping-pong / atomic loop with symm calls; mirrors nv_lat_kernel.
 * CTX_IN_REGS copies the context into a local first, so its fields live in
 * registers instead of being reloaded through the pointer after each acquire. */
template <bool CTX_IN_REGS>
__global__ static void symm_lat_kernel(const symm_ctx_t *ctxp, int kind, int role, int peer, int warm,
                                       int iters, uint32_t base, struct lat_words *L,
                                       unsigned long long *d_ns, unsigned long long *d_err) {
    symm_ctx_t local;
    const symm_ctx_t *ctx = ctxp;
    if (CTX_IN_REGS) {
        local = *ctxp;
        ctx = &local;
    }
    uint64_t t0 = 0;
    unsigned long long bad = 0;
    int32_t old = 0;
    int total = warm + iters;
    for (int k = 0; k < total; ++k) {
        uint32_t v = base + (uint32_t)k + 1u;
        if (k == warm)
            t0 = bench_globaltimer();
        switch (kind) {
        case BENCH_LAT_P:
            if (role == 0) {
                symm_p_i32(ctx, &L->flag[kind], (int32_t)v, peer);
                symm_wait_until_i32(ctx, &L->flag[kind], SYMM_CMP_EQ, (int32_t)v);
            } else {
                symm_wait_until_i32(ctx, &L->flag[kind], SYMM_CMP_EQ, (int32_t)v);
                symm_p_i32(ctx, &L->flag[kind], (int32_t)v, peer);
            }
            break;
        case BENCH_LAT_PUT_SIGNAL:
        case BENCH_LAT_PUT_SIGNAL_NBI:
            if (role == 1) {
                symm_signal_wait_until(ctx, &L->sig[kind], SYMM_CMP_EQ, v);
                bad += *(volatile uint64_t *)&L->data[kind] != v;
            }
            L->src[kind] = v;
            if (kind == BENCH_LAT_PUT_SIGNAL)
                symm_put_signal(ctx, &L->data[kind], &L->src[kind], 8, &L->sig[kind], v, SYMM_SIGNAL_SET, peer);
            else
                symm_put_signal_nbi(ctx, &L->data[kind], &L->src[kind], 8, &L->sig[kind], v, SYMM_SIGNAL_SET,
                                    peer);
            if (role == 0) {
                symm_signal_wait_until(ctx, &L->sig[kind], SYMM_CMP_EQ, v);
                bad += *(volatile uint64_t *)&L->data[kind] != v;
            }
            break;
        case BENCH_LAT_FETCH_ADD:
            /* The value added depends on the previous result (it is always
             * 1: the counter stays below 2^30), so each add waits for the
             * last one's answer: a true round trip per add. */
            old = symm_atomic_fetch_add_i32(ctx, &L->counter, 1 + (old >> 30), peer);
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

/* The hardware floor: plain volatile stores into the peer's memory through
 * its mapped address, volatile polling of the local copy. Its own deadline
 * (10 s) so a lost flag ends the kernel with a message instead of a hang.
 * It returns with *d_err set rather than trapping: the peer's kernel then
 * times out the same way, both contexts stay usable, the row reads WRONG
 * DATA and the run goes on to the other measurements. */
__global__ static void raw_flag_kernel(int me, int role, volatile int32_t *local, volatile int32_t *remote,
                                       int warm, int iters, uint32_t base, unsigned long long *d_ns,
                                       unsigned long long *d_err) {
    const uint64_t deadline = bench_globaltimer() + 10ull * 1000000000ull;
    uint64_t t0 = 0;
    int total = warm + iters;
    *d_err = 0;
    for (int k = 0; k < total; ++k) {
        int32_t v = (int32_t)(base + (uint32_t)k + 1u);
        if (k == warm)
            t0 = bench_globaltimer();
        if (role == 0)
            *remote = v;
        for (unsigned spin = 0; *local != v; ++spin) {
            if ((spin & 4095u) == 4095u && bench_globaltimer() > deadline) {
                printf("bench: pe %d: raw_flag kernel timed out (10 s): role %d, round trip %d, waiting for %d, "
                       "seen %d\n",
                       me, role, k, v, *local);
                *d_err = 1;
                return;
            }
        }
        if (role == 1)
            *remote = v;
    }
    if (role == 0)
        *d_ns = bench_globaltimer() - t0;
}

/* ---- put_signal forms, on the same flag pages ---------------------------------------- */

/* Every way to send a small message with a signal, and the raw flag, timed
 * at the same addresses (the flag's page decides much of the latency:
 * bench/results/latest/latency-probe.md). A page holds the flag word (the
 * raw flag, p's word, the signal, or the packet buffer) at offset 0, the
 * put_signal data at FP_DATA, the source at FP_SRC, the packets' local
 * destination at FP_DST. */
enum lat_form {
    LF_RAW, LF_P, LF_PS8, LF_PS64, LF_PS8_ADD, LF_PS8_FENCE, LF_PKT8, LF_PKT64, LF_V64_8, LF_V64W_64, LF_V64W_256,
    LF_COUNT
};
static const char *const lf_name[LF_COUNT] = {
    "raw volatile flag (int)", "symm_p_i32 + wait_until", "symm_put_signal 8 B (SET)", "symm_put_signal 64 B (SET)",
    "symm_put_signal 8 B (ADD)", "put 8 B + fence.acq_rel.sys + relaxed signal", "symm_put_pkt 8 B + symm_pkt_wait",
    "symm_put_pkt 64 B + symm_pkt_wait", "symm_put_pkt_v64 8 B + symm_pkt_wait_v64 (registers)",
    "symm_put_pkt_v64_warp 64 B (8 lanes) + symm_pkt_wait_v64_warp", "symm_put_pkt_v64_warp 256 B (32 lanes) + symm_pkt_wait_v64_warp"};
/* The register forms: lanes (threads of the launch) and bytes. */
static int lf_v64(int f) { return f == LF_V64_8 || f == LF_V64W_64 || f == LF_V64W_256; }
static int lf_threads(int f) { return f == LF_V64W_64 || f == LF_V64W_256 ? 32 : 1; }
#define FP_DATA 1024
#define FP_SRC 2048
#define FP_DST 3072
#define FP_PAGES 8

__device__ static inline uint64_t fp_word(uint32_t v, int j) { return (uint64_t)v * 0x9e3779b97f4a7c15ull + (uint64_t)j; }

/* The rounds of every form's ping-pong: `warm` untimed, then `iters` timed, with the
 * values 1, 2, ...; in each round the initiator (role 0) sends, then receives, and the
 * responder receives, then sends: side(v, send) does one of them and returns 0 to stop the
 * kernel (a lost value). *t0: the globaltimer at the first timed round. Returns 0 when a
 * side stopped it. */
template <class Side>
__device__ static inline int fp_rounds(int role, int warm, int iters, uint64_t *t0, Side side) {
    for (int k = 0; k < warm + iters; ++k) {
        uint32_t v = (uint32_t)k + 1u;
        if (k == warm)
            *t0 = bench_globaltimer();
        for (int pass = 0; pass < 2; pass++)
            if (!side(v, (pass == 0) == (role == 0)))
                return 0;
    }
    return 1;
}

/* One side of the ping-pong of form f on `page` (zeroed before the
 * launch): values 1, 2, ... ; each received payload is checked. */
__global__ static void form_lat_kernel(const symm_ctx_t *ctx, int f, int role, int peer, int warm, int iters,
                                       char *page, unsigned long long *d_ns, unsigned long long *d_err) {
    const uint64_t deadline = bench_globaltimer() + 10ull * 1000000000ull;
    int nbytes = (f == LF_PS64 || f == LF_PKT64) ? 64 : 8;
    uint64_t *sig = (uint64_t *)page, *data = (uint64_t *)(page + FP_DATA), *src = (uint64_t *)(page + FP_SRC);
    uint64_t *dst = (uint64_t *)(page + FP_DST);
    volatile int32_t *raw_local = (volatile int32_t *)page;
    volatile int32_t *raw_remote = (volatile int32_t *)symm_ctx_ptr(ctx, page, peer);
    unsigned long long bad = 0;
    uint64_t t0 = 0;
    /* each payload is read on arrival and compared one round later, so the
     * read's latency overlaps the reply instead of sitting on the timed path */
    uint64_t seen[8];
    uint32_t seen_v = 0;
    auto side = [&](uint32_t v, int send) -> int {
        if (f == LF_RAW) {
            if (send) {
                *raw_remote = (int32_t)v;
            } else {
                for (unsigned spin = 0; *raw_local != (int32_t)v; ++spin)
                    if ((spin & 4095u) == 4095u && bench_globaltimer() > deadline) {
                        printf("bench: raw flag form timed out (role %d, value %u)\n", role, v);
                        *d_err = 1;
                        return 0;
                    }
            }
            return 1;
        }
        if (f == LF_P) {
            if (send)
                symm_p_i32(ctx, (int32_t *)page, (int32_t)v, peer);
            else
                symm_wait_until_i32(ctx, (const int32_t *)page, SYMM_CMP_EQ, (int32_t)v);
            return 1;
        }
        if (send) {
            for (int j = 0; j < nbytes / 8; j++)
                src[j] = fp_word(v, j);
            switch (f) {
            case LF_PS8:
            case LF_PS64: symm_put_signal(ctx, data, src, (size_t)nbytes, sig, v, SYMM_SIGNAL_SET, peer); break;
            case LF_PS8_ADD: symm_put_signal(ctx, data, src, 8, sig, 1, SYMM_SIGNAL_ADD, peer); break;
            case LF_PS8_FENCE:
                symm_put_nbi(ctx, data, src, 8, peer);
                symm__fence_acq_rel_sys(); /* the data before the signal, for whoever acquires it */
                symm_p_u64(ctx, sig, v, peer);
                break;
            default: symm_put_pkt(ctx, page, src, (size_t)nbytes, v, peer); break;
            }
        } else {
            const uint64_t *got = data;
            if (f == LF_PKT8 || f == LF_PKT64) {
                symm_pkt_wait(ctx, page, dst, (size_t)nbytes, v);
                got = dst;
            } else {
                symm_signal_wait_until(ctx, sig, SYMM_CMP_EQ, v);
            }
#pragma unroll
            for (int j = 0; j < 8; j++)
                if (seen_v != 0 && j < nbytes / 8)
                    bad += seen[j] != fp_word(seen_v, j);
#pragma unroll
            for (int j = 0; j < 8; j++)
                if (j < nbytes / 8)
                    seen[j] = *(volatile const uint64_t *)&got[j];
            seen_v = v;
        }
        return 1;
    };
    if (!fp_rounds(role, warm, iters, &t0, side))
        return;
#pragma unroll
    for (int j = 0; j < 8; j++)
        if (seen_v != 0 && f != LF_RAW && f != LF_P && j < nbytes / 8)
            bad += seen[j] != fp_word(seen_v, j);
    if (role == 0)
        *d_ns = bench_globaltimer() - t0;
    *d_err += bad;
}

/* The register forms' ping-pong: lane j (< nwords) sends fp_word(v, j) from
 * a register and checks the word it receives one round later, as above. */
__global__ static void form_v64_kernel(const symm_ctx_t *ctx, int f, int role, int peer, int warm, int iters,
                                       char *page, unsigned long long *d_ns, unsigned long long *d_err) {
    const uint32_t nwords = f == LF_V64W_256 ? 32u : f == LF_V64W_64 ? 8u : 1u, lane = threadIdx.x;
    const int warp = f != LF_V64_8;
    unsigned long long bad = 0;
    uint64_t t0 = 0, seen = 0;
    uint32_t seen_v = 0;
    fp_rounds(role, warm, iters, &t0, [&](uint32_t v, int send) -> int {
        if (send) {
            if (warp)
                symm_put_pkt_v64_warp(ctx, page, fp_word(v, (int)lane), nwords, v, peer);
            else
                symm_put_pkt_v64(ctx, page, fp_word(v, 0), v, peer);
        } else {
            uint64_t got = warp ? symm_pkt_wait_v64_warp(ctx, page, nwords, v) : symm_pkt_wait_v64(ctx, page, v);
            if (seen_v != 0 && lane < nwords)
                bad += seen != fp_word(seen_v, (int)lane);
            seen = got;
            seen_v = v;
        }
        return 1;
    });
    if (seen_v != 0 && lane < nwords)
        bad += seen != fp_word(seen_v, (int)lane);
    if (role == 0 && lane == 0)
        *d_ns = bench_globaltimer() - t0;
    if (bad)
        atomicAdd(d_err, bad);
}

/* ---- state of one rma run ------------------------------------------------------- */

typedef struct rma {
    bench_env_t *env;
    int peer;              /* PE that PE 0 talks to: 1, or 0 itself with one PE */
    int npes;
    int sms;
    size_t max_bytes;
    char *src, *dst;       /* symmetric, max_bytes each */
    struct lat_words *lat; /* symmetric */
    /* cudaMemcpyPeerAsync baseline (PE 0 only) */
    int peer_ord;          /* peer GPU's ordinal in this process, -1 if not visible */
    void *peer_dst;        /* cudaMalloc'd on peer_ord */
    const char *copy_label;
    /* NVSHMEM */
    int nv;                /* NVSHMEM usable with buffers */
    void *nv_src, *nv_dst;
    /* device scratch for latency results */
    unsigned long long *d_ns, *d_err;
    /* sequence bases (see lat_words) and adds made on the peer's counter */
    uint32_t symm_base[BENCH_LAT_KINDS], nv_base[BENCH_LAT_KINDS], raw_base;
    uint32_t symm_adds, nv_adds;
    int data_errors;       /* any failed check: the mode fails */
} rma_t;

/* ---- put bandwidth ------------------------------------------------------------ */

enum put_lib { LIB_SYMM = 0, LIB_NVSHMEM = 1, LIB_COPY = 2, LIB_NCCL = 3 };
static const char *const put_lib_name[] = {"symm", "nvshmem", "memcpy", "nccl"};

typedef struct put_call {
    rma_t *r;
    int lib;
    size_t n;
    int blocks, threads, inner;
} put_call_t;

static void enqueue_put(void *arg, cudaStream_t s) {
    put_call_t *c = (put_call_t *)arg;
    rma_t *r = c->r;
    switch (c->lib) {
    case LIB_SYMM:
        symm_put_kernel<<<c->blocks, c->threads, 0, s>>>(r->env->ctx, r->dst, r->src, c->n, c->inner, r->peer);
        break;
    case LIB_NVSHMEM:
        bench_nv_put_launch(r->nv_dst, r->nv_src, c->n, c->blocks, c->threads, c->inner, r->peer, s);
        break;
    case LIB_COPY:
        for (int i = 0; i < c->inner; ++i) {
            if (r->peer_dst)
                BENCH_CUDA(cudaMemcpyPeerAsync(r->peer_dst, r->peer_ord, r->src, r->env->device, c->n, s));
            else
                BENCH_CUDA(cudaMemcpyAsync(symm_ptr(r->dst, r->peer), r->src, c->n, cudaMemcpyDeviceToDevice, s));
        }
        break;
#if SYMM_BENCH_HAVE_NCCL
    case LIB_NCCL:
        for (int i = 0; i < c->inner; ++i) {
            ncclResult_t nr = r->env->me == 0 ? ncclSend(r->src, c->n, ncclChar, r->peer, r->env->nccl, s)
                                              : ncclRecv(r->dst, c->n, ncclChar, 0, r->env->nccl, s);
            if (nr != ncclSuccess)
                bench_fatal(__FILE__, __LINE__, "ncclSend/ncclRecv", ncclGetErrorString(nr));
        }
        break;
#endif
    default:
        break;
    }
}

/* Blocks for n bytes: at least one 16-byte vector per thread, at most the tuned
 * grid. The same for symm and NVSHMEM. */
static int blocks_for(size_t n, int max_blocks, int threads) {
    size_t per_block = (size_t)threads * 16;
    size_t b = (n + per_block - 1) / per_block;
    if (b < 1)
        b = 1;
    return b > (size_t)max_blocks ? max_blocks : (int)b;
}

/* One put on PE 0 into the peer's dst, checked on the peer. Collective.
 * Returns the number of wrong bytes (0 = the data arrived). */
static unsigned long long check_put(rma_t *r, int lib, size_t n, int blocks, int threads, uint32_t seed) {
    bench_env_t *env = r->env;
    char *dst = lib == LIB_SYMM ? r->dst : (char *)r->nv_dst;
    unsigned long long bad = 0;
    bench_phase_begin("rma: check %s put %s (%dx%d)", put_lib_name[lib], bench_fmt_bytes(n), blocks, threads);
    if (env->me == r->peer) {
        bench_fill_pattern(dst, n, seed, 1, env->stream);
        BENCH_CUDA(cudaStreamSynchronize(env->stream));
    }
    if (lib == LIB_NVSHMEM)
        bench_nv_barrier_all();
    bench_barrier();
    if (env->me == 0) {
        put_call_t c = {r, lib, n, blocks, threads, 1};
        enqueue_put(&c, env->stream);
        BENCH_CUDA(cudaGetLastError());
        BENCH_CUDA(cudaStreamSynchronize(env->stream));
    }
    if (lib == LIB_NVSHMEM)
        bench_nv_barrier_all();
    bench_barrier();
    if (env->me == r->peer)
        bad = bench_count_mismatch(dst, n, seed, env->stream);
    BENCH_SYMM(symm_host_broadcast(&bad, sizeof bad, r->peer));
    bench_phase_end();
    return bad;
}

/* GB/s of `lib` for n bytes, timed on PE 0 (NCCL: PE 0 sends, the peer
 * receives, both run the same loop). Collective; 0 on PEs that do not time. */
static double time_put(rma_t *r, int lib, size_t n, int blocks, int threads) {
    bench_env_t *env = r->env;
    const size_t k256m = (size_t)256 << 20, k1g = (size_t)1 << 30;
    int inner = (int)(k256m / n < 1 ? 1 : (k256m / n > 100 ? 100 : k256m / n));
    size_t per_call = n * (size_t)inner;
    int iters = (int)(k1g / per_call);
    int lo = env->quick ? 2 : 5, hi = env->quick ? 5 : 20;
    int repeats = env->quick ? 3 : 7;
    double ms = 0.0;
    iters = iters < lo ? lo : (iters > hi ? hi : iters);
    put_call_t c = {r, lib, n, blocks, threads, inner};
    bench_phase_begin("rma: time %s put %s (%dx%d, %d x %d calls)", put_lib_name[lib], bench_fmt_bytes(n), blocks,
                      threads, repeats, iters);
    bench_barrier();
    int takes_part = env->me == 0 || (lib == LIB_NCCL && env->me == r->peer);
    if (takes_part)
        ms = bench_time_stream(enqueue_put, &c, env->stream, 2, iters, repeats);
    bench_barrier();
    bench_phase_end();
    if (env->me != 0 || ms <= 0.0)
        return 0.0;
    return (double)per_call / (ms * 1e-3) / 1e9;
}

static const char *gbps_cell(double gbps) { return gbps > 0.0 ? bench_fmt("%.1f", gbps) : "-"; }

/* Sweep grid shapes at the largest size; pick symm's best (used for NVSHMEM
 * too). Collective; every PE gets the choice. */
static void tune_grid(rma_t *r, size_t n, int *best_blocks, int *best_threads) {
    bench_env_t *env = r->env;
    const int threads_c[] = {256, 512, 1024};
    int blocks_c[4] = {r->sms / 2, r->sms, 2 * r->sms, 4 * r->sms};
    const char *hdr[] = {"grid (blocks x threads)", "symm GB/s", "NVSHMEM GB/s"};
    bench_table_t *t = bench_table_new(bench_fmt("Grid sweep: put of %s, PE 0 -> PE %d", bench_fmt_bytes(n), r->peer),
                                       3, hdr);
    double best = -1.0;
    int nb = env->quick ? 2 : 4, nt = env->quick ? 2 : 3;
    *best_blocks = r->sms;
    *best_threads = 512;
    for (int bi = env->quick ? 1 : 0; bi < (env->quick ? 1 + nb : nb); ++bi) {
        for (int ti = env->quick ? 1 : 0; ti < (env->quick ? 1 + nt : nt); ++ti) {
            int blocks = blocks_c[bi] > 0 ? blocks_c[bi] : 1, threads = threads_c[ti];
            double g = time_put(r, LIB_SYMM, n, blocks, threads);
            double gn = r->nv ? time_put(r, LIB_NVSHMEM, n, blocks, threads) : 0.0;
            const char *cells[] = {bench_fmt("%d x %d", blocks, threads), gbps_cell(g),
                                   r->nv ? gbps_cell(gn) : "n/a"};
            bench_table_row(t, cells);
            if (g > best) {
                best = g;
                *best_blocks = blocks;
                *best_threads = threads;
            }
        }
    }
    *best_blocks = bench_bcast_int(*best_blocks);
    *best_threads = bench_bcast_int(*best_threads);
    bench_table_note(t, bench_fmt("chosen for every size: up to %d blocks x %d threads (fewer blocks for small "
                                  "sizes: one 16-byte vector per thread at least)",
                                  *best_blocks, *best_threads));
    bench_table_emit(env->report, t);
}

static int size_cmp(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* Results kept for the summary. */
typedef struct put_result {
    size_t n;
    double symm, nv, copy, nccl;
    int symm_ok, nv_ok;
} put_result_t;

static int run_put_bw(rma_t *r, put_result_t *res, int *nres) {
    bench_env_t *env = r->env;
    size_t sizes[40];
    int ns = 0;
    if (env->quick) {
        const size_t q[] = {8, 1000, 65536, ((size_t)1 << 20) + 3, (size_t)16 << 20, (size_t)256 << 20};
        for (size_t i = 0; i < sizeof q / sizeof q[0]; ++i)
            sizes[ns++] = q[i];
    } else {
        for (size_t n = 8; n <= ((size_t)256 << 20); n *= 2)
            sizes[ns++] = n;
        sizes[ns++] = 1000;                          /* not a multiple of 16 */
        sizes[ns++] = ((size_t)1 << 20) + 3;         /* odd tail */
        sizes[ns++] = 100000007;                     /* large, odd, prime */
        qsort(sizes, (size_t)ns, sizeof sizes[0], size_cmp);
    }
    int blocks, threads;
    tune_grid(r, r->max_bytes, &blocks, &threads);

    const char *copy_hdr = r->peer_dst ? "cudaMemcpyPeer GB/s" : r->copy_label;
    const char *hdr[] = {"size", "grid", "symm GB/s", copy_hdr, "NVSHMEM GB/s", "NCCL send/recv GB/s",
                         "symm/memcpyPeer", "symm/NVSHMEM"};
    bench_table_t *t = bench_table_new(
        bench_fmt("Put bandwidth, block scope (symm_put_block vs nvshmemx_putmem_block), PE 0 -> PE %d", r->peer),
        8, hdr);
    int nccl = env->nccl_ok && r->npes >= 2;
    for (int i = 0; i < ns; ++i) {
        size_t n = sizes[i];
        int b = blocks_for(n, blocks, threads);
        uint32_t seed = 0x5eed0000u + (uint32_t)i;
        put_result_t *p = &res[i];
        memset(p, 0, sizeof *p);
        p->n = n;
        /* The source pattern is rewritten per size so each check is fresh. */
        if (env->me == 0) {
            bench_fill_pattern(r->src, n, seed, 0, env->stream);
            if (r->nv)
                bench_fill_pattern(r->nv_src, n, seed, 0, env->stream);
            BENCH_CUDA(cudaStreamSynchronize(env->stream));
        }
        unsigned long long bad = check_put(r, LIB_SYMM, n, b, threads, seed);
        p->symm_ok = bad == 0;
        p->symm = p->symm_ok ? time_put(r, LIB_SYMM, n, b, threads) : 0.0;
        if (r->nv) {
            unsigned long long nbad = check_put(r, LIB_NVSHMEM, n, b, threads, seed);
            p->nv_ok = nbad == 0;
            p->nv = p->nv_ok ? time_put(r, LIB_NVSHMEM, n, b, threads) : 0.0;
            if (!p->nv_ok && env->me == 0)
                fprintf(stderr, "symm-bench: NVSHMEM put of %zu bytes: %llu wrong bytes at the target\n", n, nbad);
        }
        p->copy = time_put(r, LIB_COPY, n, b, threads);
        if (nccl)
            p->nccl = time_put(r, LIB_NCCL, n, b, threads);
        if (!p->symm_ok) {
            r->data_errors++;
            if (env->me == 0)
                fprintf(stderr, "symm-bench: symm put of %zu bytes: %llu wrong bytes at the target\n", n, bad);
        }
        const char *cells[] = {bench_fmt_bytes(n),
                               bench_fmt("%dx%d", b, threads),
                               p->symm_ok ? gbps_cell(p->symm) : bench_fmt("WRONG DATA (%llu B)", bad),
                               gbps_cell(p->copy),
                               !r->nv ? "n/a" : (p->nv_ok ? gbps_cell(p->nv) : "WRONG DATA"),
                               nccl ? gbps_cell(p->nccl) : "n/a",
                               bench_fmt_ratio(p->symm, p->copy),
                               bench_fmt_ratio(p->symm, p->nv)};
        bench_table_row(t, cells);
    }
    bench_table_note(t, bench_fmt("each figure: median of %d repeats of back-to-back calls (CUDA events); a call "
                                  "moves the size `inner` times (up to 100 for small sizes); the put destination "
                                  "was checked byte for byte on PE %d before timing.",
                                  env->quick ? 3 : 7, r->peer));
    if (!r->peer_dst && r->npes >= 2)
        bench_table_note(t, bench_fmt("baseline column: %s (PE %d's GPU is not visible to PE 0's process, so "
                                      "cudaMemcpyPeerAsync could not be used)",
                                      r->copy_label, r->peer));
    if (!r->nv)
        bench_table_note(t, bench_fmt("NVSHMEM: %s", env->nvshmem_status));
    if (!nccl)
        bench_table_note(t, r->npes < 2 ? "NCCL: send/recv needs 2 PEs" : env->nccl_status);
    bench_table_emit(env->report, t);
    *nres = ns;
    return 0;
}

/* ---- latency -------------------------------------------------------------------- */

enum lat_lib { LAT_SYMM_PTR = 0, LAT_SYMM_REG = 1, LAT_NVSHMEM = 2, LAT_RAW = 3 };
static const char *const lat_lib_name[] = {"symm", "symm(ctx in regs)", "nvshmem", "raw flag"};
static const char *const lat_kind_name[BENCH_LAT_KINDS] = {"p", "put_signal", "put_signal_nbi", "fetch_add"};

/* Median one-way latency in microseconds (round trip / 2; FETCH_ADD: the
 * whole round trip) over launches of `iters` timed round trips each, on PE
 * 0; -1 elsewhere. Collective; payload errors are added to r->data_errors. */
static double run_latency(rma_t *r, int lib, int kind) {
    bench_env_t *env = r->env;
    int launches = env->quick ? 3 : 7, warm = env->quick ? 50 : 200, iters = env->quick ? 1000 : 10000;
    double us[64];
    unsigned long long errs = 0;
    int role = env->me == 0 ? 0 : (env->me == r->peer ? 1 : -1);
    int active = role == 0 || (role == 1 && kind != BENCH_LAT_FETCH_ADD);
    int target = role == 0 ? r->peer : 0; /* the initiator sends to the responder, the responder back to PE 0 */
    uint32_t *basep = lib == LAT_RAW ? &r->raw_base : (lib == LAT_NVSHMEM ? &r->nv_base[kind] : &r->symm_base[kind]);
    for (int l = 0; l < launches; ++l) {
        unsigned long long ns = 0, err = 0;
        bench_phase_begin("rma: latency %s %s, launch %d of %d (%s)", lat_lib_name[lib],
                          lib == LAT_RAW ? "ping-pong" : lat_kind_name[kind], l + 1, launches,
                          active ? (role == 0 ? "initiator" : "responder") : "idle");
        if (lib == LAT_NVSHMEM)
            bench_nv_barrier_all();
        bench_barrier();
        if (active) {
            BENCH_CUDA(cudaMemsetAsync(r->d_err, 0, sizeof *r->d_err, env->stream));
            switch (lib) {
            case LAT_SYMM_PTR:
                symm_lat_kernel<false><<<1, 1, 0, env->stream>>>(env->ctx, kind, role, target, warm, iters, *basep,
                                                                  r->lat, r->d_ns, r->d_err);
                break;
            case LAT_SYMM_REG:
                symm_lat_kernel<true><<<1, 1, 0, env->stream>>>(env->ctx, kind, role, target, warm, iters, *basep,
                                                                 r->lat, r->d_ns, r->d_err);
                break;
            case LAT_NVSHMEM:
                if (bench_nv_latency(kind, role, target, warm, iters, *basep, r->d_ns, r->d_err, env->stream) != 0)
                    bench_fatal(__FILE__, __LINE__, "bench_nv_latency", "launch failed");
                break;
            case LAT_RAW: {
                volatile int32_t *mine = &r->lat->raw_flag;
                volatile int32_t *theirs = (volatile int32_t *)symm_ptr(&r->lat->raw_flag, target);
                if (!theirs)
                    bench_fatal(__FILE__, __LINE__, "symm_ptr", "no peer mapping for the raw flag");
                raw_flag_kernel<<<1, 1, 0, env->stream>>>(env->me, role, mine, theirs, warm, iters, *basep, r->d_ns, r->d_err);
                break;
            }
            default:
                break;
            }
            BENCH_CUDA(cudaGetLastError());
            BENCH_CUDA(cudaStreamSynchronize(env->stream));
            BENCH_CUDA(cudaMemcpy(&err, r->d_err, sizeof err, cudaMemcpyDeviceToHost));
            if (role == 0)
                BENCH_CUDA(cudaMemcpy(&ns, r->d_ns, sizeof ns, cudaMemcpyDeviceToHost));
        }
        errs += err;
        *basep += (uint32_t)(warm + iters);
        us[l] = (double)ns / 1000.0 / iters / (kind == BENCH_LAT_FETCH_ADD ? 1.0 : 2.0);
    }
    bench_phase_begin("rma: latency %s %s: checks", lat_lib_name[lib], lib == LAT_RAW ? "ping-pong" : lat_kind_name[kind]);
    if (kind == BENCH_LAT_FETCH_ADD && lib != LAT_RAW) {
        uint32_t *adds = lib == LAT_NVSHMEM ? &r->nv_adds : &r->symm_adds;
        uint32_t seen = 0;
        *adds += (uint32_t)(launches * (warm + iters));
        if (lib == LAT_NVSHMEM)
            bench_nv_barrier_all();
        bench_barrier();
        if (role == 1) {
            if (lib == LAT_NVSHMEM) {
                if (bench_nv_read_counter(&seen) != 0)
                    bench_fatal(__FILE__, __LINE__, "bench_nv_read_counter", "failed");
            } else {
                BENCH_CUDA(cudaMemcpy(&seen, &r->lat->counter, sizeof seen, cudaMemcpyDeviceToHost));
            }
            if (seen != *adds) {
                fprintf(stderr, "symm-bench [pe %d]: %s fetch_add: counter is %u after %u adds\n", env->me,
                        lib == LAT_NVSHMEM ? "NVSHMEM" : "symm", seen, *adds);
                errs++;
            }
        }
    }
    /* Everyone learns whether any PE saw a wrong payload. */
    unsigned long long all[64] = {0};
    if (r->npes <= 64) {
        BENCH_SYMM(symm_host_allgather(&errs, all, sizeof errs));
        errs = 0;
        for (int p = 0; p < r->npes; ++p)
            errs += all[p];
    }
    bench_phase_end();
    if (errs) {
        r->data_errors++;
        if (env->me == 0)
            fprintf(stderr, "symm-bench: latency kind %d lib %d: %llu payload/counter errors\n", kind, lib, errs);
        return -2.0;
    }
    return env->me == 0 ? bench_median(us, launches) : -1.0;
}

static const char *us_cell(double us) {
    if (us == -2.0)
        return "WRONG DATA";
    return us > 0.0 ? bench_fmt("%.3f", us) : "-";
}

/* The flag placements of the p ping-pong sweep: one lat_words per 4 KiB page
 * of a symmetric buffer. A flag's one-way latency depends on its address
 * (NVLink traffic is spread over the switch planes by address): on 4x H200
 * GPUs 0-1 the same volatile-flag kernel took 0.63-0.79 us depending on the
 * page (bench/probes/pingpong_probe.cu), so one placement is one sample. */
#define LAT_PLACEMENTS 32
#define LAT_PLACEMENT_STRIDE 4096

typedef struct lat_result {
    double form_med[LF_COUNT];         /* median one-way us over the flag pages (0: not run) */
    double raw, symm[BENCH_LAT_KINDS], symm_reg[BENCH_LAT_KINDS], nv[BENCH_LAT_KINDS];
    int nplaced;                       /* placements measured (0: sweep not run) */
    double raw_med, p_med, raw_min, raw_max, p_min, p_max;
} lat_result_t;

static void run_latencies(rma_t *r, lat_result_t *lr) {
    bench_env_t *env = r->env;
    static const char *names[BENCH_LAT_KINDS] = {
        "p ping-pong (int), one-way", "put_signal 8 B ping-pong, one-way", "put_signal_nbi 8 B ping-pong, one-way",
        "fetch_add (int), round trip"};
    static const char *nv_names[BENCH_LAT_KINDS] = {
        "nvshmem_int_p + int_wait_until", "nvshmem_putmem_signal + signal_wait_until",
        "nvshmem_putmem_signal_nbi + signal_wait_until", "nvshmem_int_atomic_fetch_add"};
    memset(lr, 0, sizeof *lr);
    lr->raw = run_latency(r, LAT_RAW, 0);
    for (int k = 0; k < BENCH_LAT_KINDS; ++k) {
        lr->symm[k] = run_latency(r, LAT_SYMM_PTR, k);
        lr->symm_reg[k] = run_latency(r, LAT_SYMM_REG, k);
        lr->nv[k] = r->nv ? run_latency(r, LAT_NVSHMEM, k) : 0.0;
    }
    const char *hdr[] = {"operation", "symm us", "symm us (ctx in regs)", "NVSHMEM us", "symm/NVSHMEM",
                         "symm/raw flag"};
    bench_table_t *t = bench_table_new(bench_fmt("Latency, PE 0 <-> PE %d (single thread, lower is better)", r->peer),
                                       6, hdr);
    const char *raw_cells[] = {"raw volatile-flag ping-pong, one-way", us_cell(lr->raw), "-", "-", "-", "1.00x"};
    bench_table_row(t, raw_cells);
    for (int k = 0; k < BENCH_LAT_KINDS; ++k) {
        const char *cells[] = {names[k],
                               us_cell(lr->symm[k]),
                               us_cell(lr->symm_reg[k]),
                               r->nv ? us_cell(lr->nv[k]) : "n/a",
                               bench_fmt_ratio(lr->symm[k], lr->nv[k]),
                               k == BENCH_LAT_FETCH_ADD ? "-" : bench_fmt_ratio(lr->symm[k], lr->raw)};
        bench_table_row(t, cells);
    }
    bench_table_note(t, bench_fmt("median over %d launches of %d round trips each (after %d untimed), timed inside "
                                  "the kernel with %%globaltimer; one-way = round trip / 2.",
                                  env->quick ? 3 : 7, env->quick ? 1000 : 10000, env->quick ? 50 : 200));
    bench_table_note(t, "symm us: the context read through its device pointer (the API's usual form); "
                        "ctx in regs: the kernel copies *ctx into a local first.");
    if (r->nv) {
        char buf[512] = "NVSHMEM calls:";
        for (int k = 0; k < BENCH_LAT_KINDS; ++k) {
            strncat(buf, k ? "; " : " ", sizeof buf - strlen(buf) - 1);
            strncat(buf, nv_names[k], sizeof buf - strlen(buf) - 1);
        }
        bench_table_note(t, buf);
    } else {
        bench_table_note(t, bench_fmt("NVSHMEM: %s", env->nvshmem_status));
    }
    bench_table_emit(env->report, t);
}

/* The raw flag and symm's p ping-pong at the same addresses, page by page:
 * their ratio at each placement, and the spread of each over the pages. */
static void run_placements(rma_t *r, lat_result_t *lr) {
    bench_env_t *env = r->env;
    struct lat_words *keep = r->lat;
    char *buf = NULL;
    double raw[LAT_PLACEMENTS], p[LAT_PLACEMENTS];
    int n = 0;
    BENCH_SYMM(symm_calloc(LAT_PLACEMENTS, LAT_PLACEMENT_STRIDE, (void **)&buf));
    const char *hdr[] = {"flag page offset", "raw flag us", "symm p us", "symm/raw flag"};
    bench_table_t *t = bench_table_new(bench_fmt("p ping-pong by flag placement, PE 0 <-> PE %d (one-way us)", r->peer),
                                       4, hdr);
    for (int i = 0; i < LAT_PLACEMENTS; ++i) {
        r->lat = (struct lat_words *)(buf + (size_t)i * LAT_PLACEMENT_STRIDE);
        double a = run_latency(r, LAT_RAW, 0), b = run_latency(r, LAT_SYMM_PTR, BENCH_LAT_P);
        if (env->me == 0 && a > 0 && b > 0) {
            lr->raw_min = n == 0 || a < lr->raw_min ? a : lr->raw_min;
            lr->raw_max = n == 0 || a > lr->raw_max ? a : lr->raw_max;
            lr->p_min = n == 0 || b < lr->p_min ? b : lr->p_min;
            lr->p_max = n == 0 || b > lr->p_max ? b : lr->p_max;
            raw[n] = a;
            p[n] = b;
            n++;
        }
        const char *cells[] = {bench_fmt("%d KiB", i * LAT_PLACEMENT_STRIDE / 1024), us_cell(a), us_cell(b),
                               bench_fmt_ratio(b, a)};
        bench_table_row(t, cells);
    }
    r->lat = keep;
    bench_barrier();
    BENCH_SYMM(symm_free(buf));
    if (n > 0) {
        lr->nplaced = n;
        lr->raw_med = bench_median(raw, n);
        lr->p_med = bench_median(p, n);
        bench_table_note(t, bench_fmt("over %d pages: raw flag median %.3f (%.3f-%.3f), symm p median %.3f "
                                      "(%.3f-%.3f); each cell: median of launches as in the latency table",
                                      n, lr->raw_med, lr->raw_min, lr->raw_max, lr->p_med, lr->p_min, lr->p_max));
    }
    bench_table_note(t, "the latency table above has its flags at one fixed place (struct lat_words); a flag's "
                        "latency depends on its address, so each page here is one more sample of both");
    bench_table_emit(env->report, t);
}

/* Median one-way us of form f on `page`: launches of `iters` round trips,
 * the page zeroed on both sides before each. Collective; -2 on wrong data. */
static double form_latency(rma_t *r, int f, char *page) {
    bench_env_t *env = r->env;
    int launches = env->quick ? 2 : 3, warm = env->quick ? 50 : 100, iters = env->quick ? 500 : 2000;
    int role = env->me == 0 ? 0 : (env->me == r->peer ? 1 : -1);
    double us[8];
    unsigned long long errs = 0;
    for (int l = 0; l < launches; ++l) {
        unsigned long long ns = 0, err = 0;
        bench_phase_begin("rma: form %s, launch %d of %d", lf_name[f], l + 1, launches);
        BENCH_CUDA(cudaMemsetAsync(page, 0, LAT_PLACEMENT_STRIDE, env->stream));
        BENCH_CUDA(cudaStreamSynchronize(env->stream));
        bench_barrier();
        if (role >= 0) {
            BENCH_CUDA(cudaMemsetAsync(r->d_err, 0, sizeof *r->d_err, env->stream));
            if (lf_v64(f))
                form_v64_kernel<<<1, lf_threads(f), 0, env->stream>>>(env->ctx, f, role, role == 0 ? r->peer : 0,
                                                                      warm, iters, page, r->d_ns, r->d_err);
            else
                form_lat_kernel<<<1, 1, 0, env->stream>>>(env->ctx, f, role, role == 0 ? r->peer : 0, warm, iters,
                                                          page, r->d_ns, r->d_err);
            BENCH_CUDA(cudaGetLastError());
            BENCH_CUDA(cudaStreamSynchronize(env->stream));
            BENCH_CUDA(cudaMemcpy(&err, r->d_err, sizeof err, cudaMemcpyDeviceToHost));
            if (role == 0)
                BENCH_CUDA(cudaMemcpy(&ns, r->d_ns, sizeof ns, cudaMemcpyDeviceToHost));
        }
        errs += err;
        us[l] = (double)ns / 1000.0 / iters / 2.0;
    }
    bench_phase_end();
    errs = bench_all_true(errs == 0) ? 0 : 1;
    if (errs) {
        r->data_errors++;
        if (env->me == 0)
            fprintf(stderr, "symm-bench: form %s: wrong payloads\n", lf_name[f]);
        return -2.0;
    }
    return env->me == 0 ? bench_median(us, launches) : -1.0;
}

/* Every form on FP_PAGES pages of one symmetric buffer: the median over the
 * pages, the spread, and the median of the per-page ratio to the raw flag. */
static void run_forms(rma_t *r, lat_result_t *lr) {
    bench_env_t *env = r->env;
    char *buf = NULL;
    static double us[LF_COUNT][FP_PAGES];
    int wrong[LF_COUNT] = {0};
    BENCH_SYMM(symm_calloc(FP_PAGES, LAT_PLACEMENT_STRIDE, (void **)&buf));
    for (int i = 0; i < FP_PAGES; i++)
        for (int f = 0; f < LF_COUNT; f++) {
            double x = form_latency(r, f, buf + (size_t)i * LAT_PLACEMENT_STRIDE);
            us[f][i] = x;
            wrong[f] |= x == -2.0;
        }
    bench_barrier();
    BENCH_SYMM(symm_free(buf));
    const char *hdr[] = {"form", "one-way us (median of pages)", "min-max us", "form / raw flag (median of pages)"};
    bench_table_t *t = bench_table_new(bench_fmt("put with signal: every form at the same %d flag pages, PE 0 <-> PE %d",
                                                 FP_PAGES, r->peer), 4, hdr);
    for (int f = 0; f < LF_COUNT; f++) {
        double ratio[FP_PAGES], ok[FP_PAGES], lo = 0, hi = 0;
        int n = 0;
        for (int i = 0; i < FP_PAGES; i++)
            if (us[f][i] > 0 && us[LF_RAW][i] > 0) {
                ok[n] = us[f][i];
                ratio[n++] = us[f][i] / us[LF_RAW][i];
                lo = n == 1 || us[f][i] < lo ? us[f][i] : lo;
                hi = n == 1 || us[f][i] > hi ? us[f][i] : hi;
            }
        lr->form_med[f] = n && !wrong[f] ? bench_median(ok, n) : 0;
        const char *cells[] = {lf_name[f], wrong[f] ? "WRONG DATA" : n ? bench_fmt("%.3f", lr->form_med[f]) : "-",
                               n ? bench_fmt("%.3f-%.3f", lo, hi) : "-",
                               n ? bench_fmt("%.2fx", bench_median(ratio, n)) : "-"};
        bench_table_row(t, cells);
    }
    if (env->me == 0 && r->nv && lr->nv[BENCH_LAT_PUT_SIGNAL] > 0) {
        const char *cells[] = {"nvshmem_putmem_signal 8 B (its own heap: the latency table's address)",
                               bench_fmt("%.3f", lr->nv[BENCH_LAT_PUT_SIGNAL]), "-", "-"};
        bench_table_row(t, cells);
    }
    bench_table_note(t, bench_fmt("each cell: %d launches of %d round trips (after %d untimed) per page, one-way = "
                                  "round trip / 2, the page zeroed before each launch; every payload read on "
                                  "arrival and compared during the next round trip. put_signal forms wait with "
                                  "symm_signal_wait_until; the packet forms with symm_pkt_wait (the flag is inside the data: "
                                  "no fence); the v64 forms keep the payload in registers at both ends",
                                  env->quick ? 2 : 3, env->quick ? 500 : 2000, env->quick ? 50 : 100));
    bench_table_emit(env->report, t);
}

/* ---- summary against the bars ----------------------------------------------------- */

static const char *verdict(int have, int pass) { return !have ? "N/A" : (pass ? "PASS" : "MISS"); }

static void summary(rma_t *r, const put_result_t *pr, int npr, const lat_result_t *lr, int have_lat) {
    bench_env_t *env = r->env;
    const char *hdr[] = {"bar", "measured", "target", "result"};
    bench_table_t *t = bench_table_new("Summary against the bars (reported, not asserted)", 4, hdr);
    const put_result_t *top = npr ? &pr[npr - 1] : NULL;

    int have = top && top->symm > 0 && top->copy > 0 && r->npes >= 2;
    double ratio = have ? top->symm / top->copy : 0.0;
    const char *c1[] = {bench_fmt("put BW at %s vs cudaMemcpyPeer", top ? bench_fmt_bytes(top->n) : "?"),
                        have ? bench_fmt("%.1f / %.1f GB/s = %.3fx", top->symm, top->copy, ratio) : "-", ">= 0.98x",
                        verdict(have, ratio >= 0.98)};
    bench_table_row(t, c1);

    double p = have_lat ? lr->symm[BENCH_LAT_P] : 0.0;
    const char *c2[] = {"p ping-pong, one-way", p > 0 ? bench_fmt("%.3f us", p) : "-", "<= 0.75 us",
                        verdict(p > 0, p <= 0.75)};
    bench_table_row(t, c2);
    if (have_lat && lr->nplaced > 0) {
        const char *c2b[] = {bench_fmt("p ping-pong, one-way, median over %d flag pages", lr->nplaced),
                             bench_fmt("%.3f us (%.3f-%.3f; raw flag %.3f)", lr->p_med, lr->p_min, lr->p_max,
                                       lr->raw_med),
                             "<= 0.75 us", verdict(1, lr->p_med <= 0.75)};
        bench_table_row(t, c2b);
    }
    double ps = have_lat ? lr->symm[BENCH_LAT_PUT_SIGNAL] : 0.0;
    const char *c3[] = {"put_signal 8 B ping-pong, one-way", ps > 0 ? bench_fmt("%.3f us", ps) : "-", "<= 1.2 us",
                        verdict(ps > 0, ps <= 1.2)};
    bench_table_row(t, c3);
    {
        /* the forms table: put_signal and the packet put at 8 and 64 B, medians over the pages */
        double a = lr->form_med[LF_PS8], b = lr->form_med[LF_PS64], c = lr->form_med[LF_PKT8],
               d = lr->form_med[LF_PKT64];
        int h1 = a > 0 && b > 0, h2 = c > 0 && d > 0;
        const char *r1[] = {"put_signal 8-64 B one-way (median over flag pages)",
                            h1 ? bench_fmt("8 B %.3f, 64 B %.3f us", a, b) : "-", "<= 1.2 us",
                            verdict(h1, h1 && a <= 1.2 && b <= 1.2)};
        const char *r2[] = {"packet put (symm_put_pkt) 8-64 B one-way (median over flag pages)",
                            h2 ? bench_fmt("8 B %.3f, 64 B %.3f us", c, d) : "-", "<= 1.2 us",
                            verdict(h2, h2 && c <= 1.2 && d <= 1.2)};
        bench_table_row(t, r1);
        bench_table_row(t, r2);
        /* the fastest correct form at each size (0 where a form was not run or was wrong) */
        static const int at8[] = {LF_PS8, LF_PKT8, LF_V64_8}, at64[] = {LF_PS64, LF_PKT64, LF_V64W_64};
        int b8 = -1, b64 = -1;
        for (int i = 0; i < 3; i++) {
            if (lr->form_med[at8[i]] > 0 && (b8 < 0 || lr->form_med[at8[i]] < lr->form_med[b8]))
                b8 = at8[i];
            if (lr->form_med[at64[i]] > 0 && (b64 < 0 || lr->form_med[at64[i]] < lr->form_med[b64]))
                b64 = at64[i];
        }
        int h3 = b8 >= 0 && b64 >= 0;
        const char *r3[] = {"put with its flag 8-64 B one-way, fastest correct form (median over flag pages)",
                            h3 ? bench_fmt("8 B %.3f (%s), 64 B %.3f (%s) us", lr->form_med[b8], lf_name[b8],
                                           lr->form_med[b64], lf_name[b64])
                               : "-",
                            "<= 1.2 us", verdict(h3, h3 && lr->form_med[b8] <= 1.2 && lr->form_med[b64] <= 1.2)};
        bench_table_row(t, r3);
        if (env->me == 0) {
            bench_report_text(env->report, "bar: put_signal 8-64 B one-way <= 1.2 us: %s (%s)", r1[3], r1[1]);
            bench_report_text(env->report, "bar: packet put 8-64 B one-way <= 1.2 us: %s (%s)", r2[3], r2[1]);
            bench_report_text(env->report, "bar: put with its flag 8-64 B one-way, fastest form <= 1.2 us: %s (%s)",
                              r3[3], r3[1]);
        }
    }

    /* every figure >= NVSHMEM's */
    int below = 0, below2 = 0, compared = 0;
    double worst = 0.0;
    size_t worst_n = 0;
    for (int i = 0; i < npr; ++i) {
        if (pr[i].symm > 0 && pr[i].nv > 0) {
            double q = pr[i].symm / pr[i].nv;
            compared++;
            below += q < 1.0;
            below2 += q < 0.98; /* beyond run-to-run noise */
            if (worst == 0.0 || q < worst) {
                worst = q;
                worst_n = pr[i].n;
            }
        }
    }
    const char *c4[] = {"put BW >= NVSHMEM at every size",
                        compared ? bench_fmt("%d of %d sizes below (%d by > 2%%); lowest %.2fx at %s", below,
                                             compared, below2, worst, bench_fmt_bytes(worst_n))
                                 : bench_fmt("NVSHMEM: %s", r->nv ? "no data" : env->nvshmem_status),
                        ">= 1.00x", verdict(compared > 0, below == 0)};
    bench_table_row(t, c4);
    static const char *lat_names[BENCH_LAT_KINDS] = {"p latency <= NVSHMEM", "put_signal latency <= NVSHMEM",
                                                     "put_signal_nbi latency <= NVSHMEM",
                                                     "fetch_add latency <= NVSHMEM"};
    for (int k = 0; k < BENCH_LAT_KINDS; ++k) {
        double s = have_lat ? lr->symm[k] : 0.0, n = have_lat ? lr->nv[k] : 0.0;
        int h = s > 0 && n > 0;
        const char *c[] = {lat_names[k], h ? bench_fmt("%.3f vs %.3f us", s, n) : "-", "<= 1.00x",
                           verdict(h, s <= n)};
        bench_table_row(t, c);
    }
    const char *c5[] = {"data checks (put destinations, payloads, counters)",
                        r->data_errors ? bench_fmt("%d failed", r->data_errors) : "all correct", "all correct",
                        r->data_errors ? "FAIL" : "PASS"};
    bench_table_row(t, c5);
    if (r->npes < 2)
        bench_table_note(t, "one PE: the peer bars need >= 2 GPUs (the put above went to the same GPU).");
    bench_table_emit(env->report, t);
}

/* ---- setup and the mode ----------------------------------------------------------- */

/* The peer GPU as a CUDA ordinal of this process (matched by PCI bus id),
 * for a true cudaMemcpyPeerAsync between two cudaMalloc'd buffers. */
static void setup_copy_baseline(rma_t *r) {
    bench_env_t *env = r->env;
    char mine[32] = {0}, *all;
    r->peer_ord = -1;
    r->peer_dst = NULL;
    r->copy_label = r->npes >= 2 ? "cudaMemcpyAsync to peer mapping GB/s" : "cudaMemcpyAsync D2D (same GPU) GB/s";
    BENCH_CUDA(cudaDeviceGetPCIBusId(mine, sizeof mine, env->device));
    all = (char *)calloc((size_t)r->npes, sizeof mine);
    if (!all)
        bench_fatal(__FILE__, __LINE__, "calloc", "out of memory");
    BENCH_SYMM(symm_host_allgather(mine, all, sizeof mine));
    if (env->me == 0 && r->npes >= 2) {
        int ord = -1, can = 0;
        if (cudaDeviceGetByPCIBusId(&ord, all + (size_t)r->peer * sizeof mine) == cudaSuccess && ord != env->device &&
            cudaDeviceCanAccessPeer(&can, env->device, ord) == cudaSuccess && can) {
            cudaError_t e = cudaDeviceEnablePeerAccess(ord, 0);
            if (e == cudaErrorPeerAccessAlreadyEnabled)
                (void)cudaGetLastError();
            else
                BENCH_CUDA(e);
            BENCH_CUDA(cudaSetDevice(ord));
            BENCH_CUDA(cudaMalloc(&r->peer_dst, r->max_bytes));
            BENCH_CUDA(cudaSetDevice(env->device));
            r->peer_ord = ord;
        } else {
            (void)cudaGetLastError();
        }
    }
    free(all);
}

static int run_rma(bench_env_t *env) {
    rma_t r;
    cudaDeviceProp prop;
    memset(&r, 0, sizeof r);
    r.env = env;
    r.npes = env->npes;
    r.peer = env->npes >= 2 ? 1 : 0;
    r.max_bytes = (size_t)256 << 20;
    BENCH_CUDA(cudaGetDeviceProperties(&prop, env->device));
    r.sms = prop.multiProcessorCount;

    if (env->npes < 2)
        bench_report_text(env->report, "Only one PE (one GPU): the peer benchmarks need >= 2 GPUs. Measuring the "
                                       "put bandwidth of PE 0 into its own heap instead; latency is skipped.");
    else
        bench_report_text(env->report, "Pair measured: PE 0 (GPU %d) -> PE 1; %d PEs in the job (the others only "
                                       "join the barriers).",
                          env->device, env->npes);

    bench_phase_begin("rma: symm_malloc 2 x %s", bench_fmt_bytes(r.max_bytes));
    BENCH_SYMM(symm_malloc(r.max_bytes, (void **)&r.src));
    BENCH_SYMM(symm_malloc(r.max_bytes, (void **)&r.dst));
    BENCH_SYMM(symm_calloc(1, sizeof(struct lat_words), (void **)&r.lat));
    BENCH_CUDA(cudaMalloc((void **)&r.d_ns, sizeof *r.d_ns));
    BENCH_CUDA(cudaMalloc((void **)&r.d_err, sizeof *r.d_err));
    bench_phase_begin("rma: cudaMemcpyPeer baseline set-up");
    setup_copy_baseline(&r);
    if (env->nvshmem_ok) {
        bench_phase_begin("rma: nvshmem_malloc 2 x %s", bench_fmt_bytes(r.max_bytes));
        int ok = bench_nv_alloc(r.max_bytes, &r.nv_src, &r.nv_dst) == 0;
        r.nv = bench_all_true(ok);
        if (!r.nv)
            bench_report_text(env->report, "NVSHMEM: nvshmem_malloc of 2 x %zu bytes failed; no NVSHMEM columns.",
                              r.max_bytes);
    }

    put_result_t pr[40];
    int npr = 0;
    lat_result_t lr;
    memset(&lr, 0, sizeof lr);
    if (!(getenv("SYMM_BENCH_RMA_LAT_ONLY") && atoi(getenv("SYMM_BENCH_RMA_LAT_ONLY"))))
        run_put_bw(&r, pr, &npr);
    else
        bench_report_text(env->report, "Put bandwidth: not run (SYMM_BENCH_RMA_LAT_ONLY=1).");
    if (env->npes >= 2) {
        run_latencies(&r, &lr);
        run_placements(&r, &lr);
        run_forms(&r, &lr);
    }
    summary(&r, pr, npr, &lr, env->npes >= 2);

    bench_phase_begin("rma: free");
    bench_barrier();
    if (r.peer_dst) {
        BENCH_CUDA(cudaSetDevice(r.peer_ord));
        BENCH_CUDA(cudaFree(r.peer_dst));
        BENCH_CUDA(cudaSetDevice(env->device));
    }
    BENCH_CUDA(cudaFree(r.d_err));
    BENCH_CUDA(cudaFree(r.d_ns));
    BENCH_SYMM(symm_free(r.lat));
    BENCH_SYMM(symm_free(r.dst));
    BENCH_SYMM(symm_free(r.src));
    bench_phase_end();
    return r.data_errors ? 1 : 0;
}

BENCH_MODE(rma, 10, "one-sided put bandwidth and latency vs cudaMemcpyPeer, a raw flag ping-pong, NCCL and NVSHMEM",
           run_rma)
