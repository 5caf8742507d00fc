/*
 * coll_ce_pipe.cu - broadcast and reduce-scatter through the copy engines,
 * pipelined by chunks (symm__coll_ce_bcast, symm__coll_ce_rs; coll.h).
 *
 * Why: one copy-engine stream moves more out of a GPU than SM stores do
 * (bench/results/latest/copy-engine-probe.md), but a copy cannot wait for a
 * peer. So the copies stay on the caller's stream, one chunk after the
 * other, and small kernels carry the chunks' state between the PEs: a
 * signal kernel on a side stream releases "chunk k landed" (kind-3 flags of
 * slot 0, indexed by chunk) once chunk k's copies have completed (a copy
 * completes before the next operation of its stream starts, and the event
 * that forks the signal kernel follows the copies), and the kernels that
 * consume the chunks wait for those flags. Every call starts with one
 * kernel that counts it in slot 0 and handshakes with every PE (so every
 * buffer the copies write is free, and the call's signature is compared);
 * every later kernel of the call takes the flag value from that counter, so
 * graphs replay without any reset.
 *
 * Broadcast: the root copies part j of each chunk into non-root j's recv
 * and signals the chunk; non-root j forwards part j of every signalled chunk
 * to the other non-roots on its own copy engine (a one-thread kernel waits
 * for the chunk's flag, then the copies follow it on the stream), so the
 * root sends each byte once, the non-roots share the rest and no SM stores
 * (with one non-root: one copy of the whole buffer); an end handshake tells
 * every PE that everything written into it has landed.
 *
 * Reduce-scatter: each PE copies chunk k of piece q into PE q's staging
 * area (a ring of nbuf buffers per source PE) and signals it; PE q's
 * reduction kernel for chunk k (on a side stream, one kernel per chunk, in
 * order) waits for chunk k from every peer, reduces it with its own piece
 * in PE order into recv, and, as the next one starts, frees the buffer
 * (kind-4 flags): a sender waits for that before it copies chunk k + nbuf
 * into the same buffer. The reductions overlap the next chunks' copies.
 */
#include <cuda_runtime.h>

#include "coll/coll_kernels.cuh"

extern "C" {
#include "heap/heap.h"
#include "coll/coll.h"
}
#include "coll/coll_ce.h"

#define PIPE_KIND_LANDED 3u
#define PIPE_KIND_FREED  4u
#define PIPE_MAX_CHUNKS  SYMM_COLL_MAX_BLOCKS /* kind-3/4 flags: one slot index per chunk */

/* Part j of m of a chunk of len bytes, in 16-byte units (byte range). The
 * host's copies and the non-roots' forwarding cut chunks alike. */
__host__ __device__ static inline void pipe_part(uint64_t len, int m, int j, uint64_t *lo, uint64_t *hi) {
    uint64_t units = (len + 15) / 16, per = (units + (uint64_t)m - 1) / (uint64_t)m, a = per * (uint64_t)j, b;
    if (a > units)
        a = units;
    b = a + per > units ? units : a + per;
    *lo = 16 * a > len ? len : 16 * a; /* an empty part: lo == hi */
    *hi = 16 * b > len ? len : 16 * b;
}

/* ---- kernels ---------------------------------------------------------------------- */

/* Counts the call in slot 0 and handshakes with every PE (kind 0), which
 * compares the calls' signatures. */
__global__ void __launch_bounds__(64)
symm__k_pipe_begin(const __grid_constant__ symm_ctx_t ctx, const __grid_constant__ symm__coll_ws_t ws, int call,
                   uint64_t bytes, int kind, int op, int root) {
    int c = call == SYMM__PIPE_AR ? SYMM__C_CALL_AR : call == SYMM__PIPE_RS ? SYMM__C_CALL_RS : SYMM__C_CALL_BCAST;
    symm__c_ep_t e = symm__c_epoch_begin(&ws, 0);
    (void)symm__c_handshake_pub(&ctx, &ws, e, 0, NULL, NULL, 0, 0, symm__c_sig(c, bytes, kind, op, root), 0);
    symm__c_epoch_end(&ws, 0, e);
}

/* The end handshake (kind 1) of the call slot 0 counts. */
__global__ void __launch_bounds__(64)
symm__k_pipe_end(const __grid_constant__ symm_ctx_t ctx, const __grid_constant__ symm__coll_ws_t ws) {
    symm__c_handshake(&ctx, &ws, 1, symm__c_epoch_now(&ws, 0), 0);
}

/* Flag `kind` of chunk k, this PE's word on every peer, with a release
 * (after everything this PE's stream did before it). */
__global__ void __launch_bounds__(64)
symm__k_pipe_signal(const __grid_constant__ symm_ctx_t ctx, const __grid_constant__ symm__coll_ws_t ws,
                    uint32_t kind, uint32_t k) {
    symm__c_ep_t e = symm__c_epoch_now(&ws, 0);
    for (int p = (int)threadIdx.x; p < ctx.n_pes; p += (int)blockDim.x)
        if (p != ctx.my_pe)
            symm__c_st4_release(symm__c_peer(&ctx, symm__c_flag(&ws, kind, e.par, k, ctx.my_pe), p), e.flag);
}

/* Wait for flag `kind` of chunk k from PE `from`, or from every peer (-1). */
__global__ void __launch_bounds__(64)
symm__k_pipe_wait(const __grid_constant__ symm_ctx_t ctx, const __grid_constant__ symm__coll_ws_t ws,
                  uint32_t kind, uint32_t k, int from) {
    symm__c_ep_t e = symm__c_epoch_now(&ws, 0);
    for (int p = (int)threadIdx.x; p < ctx.n_pes; p += (int)blockDim.x)
        if (p != ctx.my_pe && (from < 0 || p == from))
            symm__c_wait_flag_from(&ctx, symm__c_flag(&ws, kind, e.par, k, p), e.flag, p);
}

/* Reduce-scatter: the reduction of chunk k (len bytes at out / own) from
 * this PE's own piece and the n - 1 staged chunks of buffer `stage`, in PE
 * order (the order of every other algorithm: the results are the same). */
#define PIPE_DEFINE_REDUCE(S)                                                                      \
    static __device__ void pipe_reduce_##S(int me, int n, char *out, const char *own, const char *stage, \
                                           uint64_t chunk, uint64_t len, int op) {                 \
        uint64_t lo, hi, u, w0, w1, t = threadIdx.x, nt = blockDim.x;                              \
        int fast = (((uintptr_t)own | (uintptr_t)out) & 15u) == 0;                                 \
        symm__c_split((len + 15) / 16, gridDim.x, blockIdx.x, &lo, &hi);                           \
        for (u = lo + t; u < hi; u += nt) {                                                        \
            uint64_t rem = len - 16 * u;                                                           \
            symm__c_acc_##S a0, a1;                                                                \
            for (int p = 0; p < n; p++) {                                                          \
                if (p == me)                                                                       \
                    symm__c_ld_unit(own + 16 * u, rem, fast, &w0, &w1);                            \
                else                                                                               \
                    symm__c_ld_unit(stage + (uint64_t)((p - me - 1 + n) % n) * chunk + 16 * u, rem, 1, \
                                    &w0, &w1);                                                     \
                if (p == 0) { symm__c_first_##S(&a0, w0); symm__c_first_##S(&a1, w1); }            \
                else { symm__c_next_##S(&a0, w0, op); symm__c_next_##S(&a1, w1, op); }             \
            }                                                                                      \
            symm__c_st_unit(out + 16 * u, rem, fast, symm__c_last_##S(&a0), symm__c_last_##S(&a1)); \
        }                                                                                          \
    }
SYMM__C_FOR_EACH_RED(PIPE_DEFINE_REDUCE)
#undef PIPE_DEFINE_REDUCE

/* Reduce-scatter, chunk k on this PE: free the buffer of chunk k - 1 (the
 * previous kernel of this stream, now over) when a later chunk reuses it,
 * wait for chunk k from every peer, reduce it. */
__global__ void __launch_bounds__(SYMM__COLL_THREADS)
symm__k_pipe_rs_reduce(const __grid_constant__ symm_ctx_t ctx, const __grid_constant__ symm__coll_ws_t ws,
                       char *out, const char *own, const char *stage, uint64_t chunk, uint64_t len, uint32_t k,
                       uint32_t nbuf, uint32_t nchunks, int kind, int op) {
    int me = ctx.my_pe, n = ctx.n_pes;
    symm__c_ep_t e = symm__c_epoch_now(&ws, 0);
    if (blockIdx.x == 0 && k >= 1 && k - 1 + nbuf < nchunks)
        for (int p = (int)threadIdx.x; p < n; p += (int)blockDim.x)
            if (p != me)
                symm__c_st4_release(symm__c_peer(&ctx, symm__c_flag(&ws, PIPE_KIND_FREED, e.par, k - 1, me), p),
                                    e.flag);
    for (int p = (int)threadIdx.x; p < n; p += (int)blockDim.x)
        if (p != me)
            symm__c_wait_flag_from(&ctx, symm__c_flag(&ws, PIPE_KIND_LANDED, e.par, k, p), e.flag, p);
    symm__block_sync();
    switch (kind) {
#define PIPE_CASE(S)                                                                               \
    case SYMM__C_RED_##S: pipe_reduce_##S(me, n, out, own, stage, chunk, len, op); break;
        SYMM__C_FOR_EACH_RED(PIPE_CASE)
#undef PIPE_CASE
    default: break;
    }
}

/* ---- host side ---------------------------------------------------------------------- */

static symm_status_t pipe_fail(const char *what, cudaError_t e) {
    return symm__error(SYMM_ERR_CUDA, "collectives (copy-engine pipeline): %s: %s", what, cudaGetErrorString(e));
}

/* Check the last launch or call. */
static symm_status_t pipe_check(const char *what) {
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? SYMM_SUCCESS : pipe_fail(what, e);
}

/* Bytes per chunk: the pipeline's, a multiple of 16, and few enough chunks
 * for the flag slots; at most `cap` (0: none). */
static uint64_t pipe_chunk(uint64_t want, uint64_t nbytes, uint64_t cap) {
    uint64_t c = want < 16 ? 16 : want > ((uint64_t)1 << 40) ? (uint64_t)1 << 40 : (want + 15) & ~(uint64_t)15;
    uint64_t least = ((nbytes + PIPE_MAX_CHUNKS - 1) / PIPE_MAX_CHUNKS + 15) & ~(uint64_t)15;
    if (c < least)
        c = least;
    if (cap && c > cap)
        c = cap;
    return c;
}

/* PE p's copy of this PE's heap address `mine` (host side), or NULL. */
static void *pipe_peer(const symm__coll_pipe_t *pp, const void *mine, int p) {
    int wp = symm_team_translate_pe(pp->team, p, symm_team_world());
    return wp < 0 ? NULL : symm__heap_peer(mine, wp);
}

/* Fork stream `to` off `s` (its later work follows everything on s so far;
 * under capture it joins the capture). */
static symm_status_t pipe_fork(cudaEvent_t ev, cudaStream_t s, cudaStream_t to) {
    cudaError_t e;
    if ((e = cudaEventRecord(ev, s)) != cudaSuccess || (e = cudaStreamWaitEvent(to, ev, 0)) != cudaSuccess)
        return pipe_fail("forking a side stream", e);
    return SYMM_SUCCESS;
}

static symm_status_t pipe_begin(const symm__coll_pipe_t *pp, cudaStream_t s) {
    symm__k_pipe_begin<<<1, 64, 0, s>>>(*pp->ctx, *pp->ws, pp->call, pp->sig_bytes, pp->kind, pp->op, pp->root);
    return pipe_check("launching the pipeline's start kernel");
}

/* The root's chunk k is on its way: its signal follows the copies made so
 * far on s, on the signal stream. */
static symm_status_t pipe_signal(const symm__coll_pipe_t *pp, uint32_t k, cudaStream_t s) {
    symm_status_t st = pipe_fork(pp->ce->step, s, pp->ce->sig);
    if (st != SYMM_SUCCESS)
        return st;
    symm__k_pipe_signal<<<1, 64, 0, pp->ce->sig>>>(*pp->ctx, *pp->ws, PIPE_KIND_LANDED, k);
    return pipe_check("launching a chunk's signal kernel");
}

extern "C" symm_status_t symm__coll_ce_bcast(const symm__coll_pipe_t *pp, const void *send, void *recv,
                                             uint64_t nbytes, int root, symm_stream_t stream) {
    cudaStream_t s = (cudaStream_t)stream;
    symm__coll_ce_t *ce = pp->ce;
    int n = pp->ctx->n_pes, me = pp->ctx->my_pe, m = n - 1;
    /* with one non-root nothing forwards, so chunks would only split the copy */
    uint64_t chunk = m > 1 ? pipe_chunk(pp->chunk, nbytes, 0) : nbytes > 0 ? nbytes : 16;
    uint32_t nchunks = (uint32_t)((nbytes + chunk - 1) / chunk);
    symm_status_t st;
    cudaError_t e;
    if ((st = pipe_begin(pp, s)) != SYMM_SUCCESS)
        return st;
    if (me == root) {
        int local = send != recv;
        if ((st = pipe_fork(ce->fork, s, ce->sig)) != SYMM_SUCCESS)
            return st;
        if (local) {
            if ((e = cudaStreamWaitEvent(ce->side, ce->fork, 0)) != cudaSuccess ||
                (e = cudaMemcpyAsync(recv, send, nbytes, cudaMemcpyDefault, ce->side)) != cudaSuccess ||
                (e = cudaEventRecord(ce->join, ce->side)) != cudaSuccess)
                return pipe_fail("the root's own copy", e);
        }
        for (uint32_t k = 0; k < nchunks; k++) {
            uint64_t c0 = (uint64_t)k * chunk, len = nbytes - c0 < chunk ? nbytes - c0 : chunk;
            for (int i = 0; i < m; i++) {
                /* each chunk starts at another non-root */
                int j = (int)(((uint32_t)i + k) % (uint32_t)m), q = (root + 1 + j) % n;
                uint64_t plo, phi;
                void *d;
                pipe_part(len, m, j, &plo, &phi);
                if (phi <= plo)
                    continue;
                if ((d = pipe_peer(pp, (char *)recv + c0 + plo, q)) == NULL)
                    return symm__error(SYMM_ERR_INTERNAL, "collectives (copy engines): no address of PE %d's recv",
                                       q);
                if ((e = cudaMemcpyAsync(d, (const char *)send + c0 + plo, phi - plo, cudaMemcpyDefault, s)) !=
                    cudaSuccess)
                    return pipe_fail("copying a chunk to a peer", e);
            }
            if (m > 1 && (st = pipe_signal(pp, k, s)) != SYMM_SUCCESS)
                return st;
        }
        if ((e = cudaEventRecord(ce->join_sig, ce->sig)) != cudaSuccess ||
            (e = cudaStreamWaitEvent(s, ce->join_sig, 0)) != cudaSuccess ||
            (local && (e = cudaStreamWaitEvent(s, ce->join, 0)) != cudaSuccess))
            return pipe_fail("joining the side streams", e);
    } else if (m > 1) {
        int mine = (me - root - 1 + n) % n;
        for (uint32_t k = 0; k < nchunks; k++) {
            uint64_t c0 = (uint64_t)k * chunk, len = nbytes - c0 < chunk ? nbytes - c0 : chunk, plo, phi;
            pipe_part(len, m, mine, &plo, &phi);
            if (phi <= plo)
                continue; /* the same on every chunk but a short last one: nothing of it to forward */
            symm__k_pipe_wait<<<1, 32, 0, s>>>(*pp->ctx, *pp->ws, PIPE_KIND_LANDED, k, root);
            if ((st = pipe_check("launching a chunk's wait kernel")) != SYMM_SUCCESS)
                return st;
            for (int i = 1; i < m; i++) {
                /* each non-root starts at another target, and each chunk at the next one */
                int j = (mine + 1 + (int)(((uint32_t)i - 1u + k) % (uint32_t)(m - 1))) % m, q = (root + 1 + j) % n;
                void *d = pipe_peer(pp, (char *)recv + c0 + plo, q);
                if (d == NULL)
                    return symm__error(SYMM_ERR_INTERNAL, "collectives (copy engines): no address of PE %d's recv",
                                       q);
                if ((e = cudaMemcpyAsync(d, (const char *)recv + c0 + plo, phi - plo, cudaMemcpyDefault, s)) !=
                    cudaSuccess)
                    return pipe_fail("forwarding a chunk's part", e);
            }
        }
    }
    symm__k_pipe_end<<<1, 64, 0, s>>>(*pp->ctx, *pp->ws);
    return pipe_check("launching the pipeline's end kernel");
}

/* One pass of the reduce-scatter pipeline over bytes [off, off + nbytes) of
 * every piece (at most PIPE_MAX_CHUNKS chunks). */
static symm_status_t rs_pass(const symm__coll_pipe_t *pp, const char *send, char *recv, uint64_t nbytes,
                             uint64_t piece, uint64_t chunk, uint32_t nbuf, int kind, int op, cudaStream_t s) {
    symm__coll_ce_t *ce = pp->ce;
    int n = pp->ctx->n_pes, me = pp->ctx->my_pe;
    uint32_t nchunks = (uint32_t)((nbytes + chunk - 1) / chunk);
    symm_status_t st;
    cudaError_t e;
    if ((st = pipe_begin(pp, s)) != SYMM_SUCCESS || (st = pipe_fork(ce->fork, s, ce->sig)) != SYMM_SUCCESS ||
        (st = pipe_fork(ce->fork, s, ce->red)) != SYMM_SUCCESS)
        return st;
    for (uint32_t k = 0; k < nchunks; k++) {
        uint64_t c0 = (uint64_t)k * chunk, len = nbytes - c0 < chunk ? nbytes - c0 : chunk;
        uint32_t b = k % nbuf;
        if (k >= nbuf) {
            symm__k_pipe_wait<<<1, 64, 0, s>>>(*pp->ctx, *pp->ws, PIPE_KIND_FREED, k - nbuf, -1);
            if ((st = pipe_check("launching a buffer wait kernel")) != SYMM_SUCCESS)
                return st;
        }
        for (int i = 1; i < n; i++) {
            int q = (me + i) % n;
            /* this PE's buffer on q: source index (me - q - 1) mod n */
            const char *mine = pp->stage + ((uint64_t)b * (uint64_t)(n - 1) + (uint64_t)((me - q - 1 + n) % n)) * chunk;
            void *d = pipe_peer(pp, mine, q);
            if (d == NULL)
                return symm__error(SYMM_ERR_INTERNAL, "collectives (copy engines): no address of PE %d's stage", q);
            if ((e = cudaMemcpyAsync(d, send + (uint64_t)q * piece + c0, len, cudaMemcpyDefault, s)) != cudaSuccess)
                return pipe_fail("copying a chunk to a peer", e);
        }
        if ((st = pipe_fork(ce->step, s, ce->sig)) != SYMM_SUCCESS)
            return st;
        symm__k_pipe_signal<<<1, 64, 0, ce->sig>>>(*pp->ctx, *pp->ws, PIPE_KIND_LANDED, k);
        if ((st = pipe_check("launching a chunk's signal kernel")) != SYMM_SUCCESS)
            return st;
        symm__k_pipe_rs_reduce<<<pp->blocks, SYMM__COLL_THREADS, 0, ce->red>>>(
            *pp->ctx, *pp->ws, recv + c0, send + (uint64_t)me * piece + c0,
            pp->stage + (uint64_t)b * (uint64_t)(n - 1) * chunk, chunk, len, k, nbuf, nchunks, kind, op);
        if ((st = pipe_check("launching a chunk's reduction kernel")) != SYMM_SUCCESS)
            return st;
    }
    if ((e = cudaEventRecord(ce->join_sig, ce->sig)) != cudaSuccess ||
        (e = cudaEventRecord(ce->join_red, ce->red)) != cudaSuccess ||
        (e = cudaStreamWaitEvent(s, ce->join_sig, 0)) != cudaSuccess ||
        (e = cudaStreamWaitEvent(s, ce->join_red, 0)) != cudaSuccess)
        return pipe_fail("joining the side streams", e);
    return SYMM_SUCCESS;
}

extern "C" symm_status_t symm__coll_ce_rs(const symm__coll_pipe_t *pp, const void *send, void *recv, uint64_t nbytes,
                                          uint64_t piece, int kind, int op, symm_stream_t stream) {
    int n = pp->ctx->n_pes;
    /* at least two buffers per source in the stage */
    uint64_t cap = ((uint64_t)SYMM__COLL_STAGE_BYTES / (2 * (uint64_t)(n > 1 ? n - 1 : 1))) & ~(uint64_t)15;
    uint64_t chunk = pipe_chunk(pp->chunk, nbytes, cap), step = chunk * PIPE_MAX_CHUNKS, off;
    uint64_t nbuf = (uint64_t)SYMM__COLL_STAGE_BYTES / ((uint64_t)(n > 1 ? n - 1 : 1) * chunk);
    symm_status_t st;
    if (nbuf > 4)
        nbuf = 4;
    for (off = 0; off < nbytes; off += step) {
        uint64_t len = nbytes - off < step ? nbytes - off : step;
        if ((st = rs_pass(pp, (const char *)send + off, (char *)recv + off, len, piece, chunk, (uint32_t)nbuf, kind,
                          op, (cudaStream_t)stream)) != SYMM_SUCCESS)
            return st;
    }
    return SYMM_SUCCESS;
}
