/*
 * moe_k_ht.cu - the high-throughput (DeepEP "normal" layout) MoE kernels.
 *
 * Dispatch, epoch e (p = e & 1), one kernel:
 *   send  Block b owns the tokens [m b / B, m (b + 1) / B). It computes the
 *         PEs each token goes to for every token before its range end (the
 *         prefix of its range is how many tokens before it go to each PE);
 *         the last block counts every token per PE and per expert and posts
 *         this PE's row of the count matrix, (e << 32 | tokens) for every
 *         PE in ht_mat[p][me][r] and per expert in ht_emat[p][me][l], on
 *         every PE. Every block waits for every PE's row: the rows PEs
 *         before this one send to r come first there, and a PE posts its
 *         row only after its previous combine, i.e. once it is done with
 *         what this dispatch overwrites in it. Then the block stores each
 *         of its tokens once per destination PE straight into its final row
 *         there (ordered by source PE, then token): x, scales, top-k mapped
 *         to that PE's local experts (-1 elsewhere), weights and (source,
 *         token); batches of 32 tokens, each token loaded once for all its
 *         PEs. At the end each block adds the rows it addressed to r into
 *         r's ht_rcv[me] with a release (an atomic; rows dropped for
 *         capacity count too): ht_rcv counts rows over all dispatches, and
 *         the receiver knows how many to expect from ht_mat.
 *         That is the batches form (SYMM_MOE_HT_DISPATCH=batches); the warps
 *         form (the default, ht_dispatch_send_warps) gives the same rows and
 *         counts, but block b counts only its own tokens and takes the
 *         prefix from the earlier blocks' counts (ht_bcnt, ht_bflag), and
 *         each warp sends whole tokens with no block barrier between them.
 *   recv  One block: waits for every PE's counts and its rows (ht_rcv up
 *         to what it expects so far), notes where each source's rows start,
 *         and publishes num_recv and the tokens per local expert.
 * Combine, same epoch:
 *   send  The received rows of source s go back to s, SYMM__MOE_HT_CHUNK
 *         rows at a time, into ht_cbuf[me][position of the token among the
 *         tokens s sent me]; behind each chunk a release of
 *         ht_cflag[me][chunk] = e at s. Chunks are taken round-robin over
 *         the sources so every PE's data comes in from the start.
 *   recv  Per token: wait for the chunk flags of the rows it gets back and
 *         sum them in float32, in PE order. With both halves in one kernel
 *         and few blocks, every block sends its share and then reduces; with
 *         many, half the blocks send and half reduce as the data arrives
 *         (SYMM_MOE_HT_COMBINE; no block waits before it has sent, so
 *         neither form can deadlock). The rows this PE returns to itself are
 *         read from y.
 *   side channel (symm_moe_ht_combine_weights): each row's w values go
 *         into ht_cwbuf beside its row, stored after the rows of their
 *         chunk and before its flag, which covers them; every reducer sums
 *         them in one pass after its rows (the flags already acquired), a
 *         thread or lane per token, PE order, float32.
 * Reuse: r's ht_cbuf, ht_cwbuf and ht_cflag are written by combine e + 1 of s only
 * after s's dispatch e + 1 waited for r's count row of e + 1, posted after
 * r's combine e had read them; the parity-indexed count rows are written
 * again two dispatches later, after the writer waited for the reader's next
 * row, posted after the reader's dispatch had read them.
 */
#include "moe/moe_kernels.cuh"

#define TAG(e, c) (((uint64_t)(e) << 32) | (uint64_t)(uint32_t)(c))
#define HT_UNROLL 8
#define HT_BATCH 32 /* tokens per dispatch step of a block */
#define HT_RED_U 4  /* combine: 16-byte vectors a thread reduces at once */
#define HT_RED_G 2  /* combine: sources of each loaded at once */
/* combine, overlap: vectors a sending thread loads at once; its warps are a
 * part of the block, so each holds twice the bytes in flight */
#define HT_SEND_U_WS 16
/* combine, overlap-async: items in flight per reducing warp, and its ring of vectors in shared memory */
#define HT_AS_STAGES 4
#define HT_AS_RING (HT_AS_STAGES * HT_RED_G * HT_RED_U * 32)
/* combine, overlap-ring: stages of HT_SR_U vectors each sending thread has in flight through
 * shared memory (cp.async waits for at most 3 groups), so the send half keeps 4x the bytes of
 * its registers' loads moving */
#define HT_SR_STAGES 4
#define HT_SR_U 8
#define HT_SR_THREAD (HT_SR_STAGES * HT_SR_U) /* vectors of a sending thread's ring */

/* The PEs token t goes to (bit r), counting its experts into ecnt when given;
 * -1 in a signed index type is no expert, other values outside the experts
 * are errors (recorded when `report`). */
SYMM__DEVICE_INTERNAL uint64_t ht_token_mask(const symm__moe_kargs_t *A, uint64_t t, uint32_t *ecnt, int report) {
    uint64_t mask = 0;
    /* eight indices loaded before any is used: the counts' shared atomics would otherwise
     * order each load behind the previous index's atomic (one memory round trip per slot) */
    for (uint32_t k0 = 0; k0 < A->topk; k0 += 8) {
        int64_t xs[8];
#pragma unroll
        for (uint32_t i = 0; i < 8; i++)
            xs[i] = k0 + i < A->topk ? moe_index(A, t * A->topk + k0 + i) : -1;
#pragma unroll
        for (uint32_t i = 0; i < 8; i++) {
            const int64_t ex = xs[i];
            if (k0 + i >= A->topk || (ex == -1 && A->idx_kind != 0))
                continue;
            if (ex < 0 || ex >= (int64_t)A->experts) {
                if (report)
                    moe_error(A, SYMM__MOE_ERR_EXPERT_RANGE, (int64_t)t, (int64_t)(k0 + i), ex);
                continue;
            }
            if (ecnt)
                atomicAdd(&ecnt[ex], 1u);
            mask |= 1ull << (uint32_t)(ex / A->local);
        }
    }
    return mask;
}

/* ---- the layout for the caller (symm_moe_ht_layout) --------------------------------------- */

__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ht_layout(const __grid_constant__ symm__moe_kargs_t a) {
    const symm__moe_kargs_t *A = &a;
    const uint32_t tid = symm__block_tid(), n = (uint32_t)A->n;
    const uint64_t m = A->num_tokens, chunk = (m + SYMM__MOE_THREADS - 1) / SYMM__MOE_THREADS;
    const uint64_t t0 = tid * chunk < m ? tid * chunk : m, t1 = t0 + chunk < m ? t0 + chunk : m;
    extern __shared__ uint32_t ecnt[]; /* [experts] */
    moe_begin(A, 0);
    for (uint32_t x = tid; x < A->experts; x += SYMM__MOE_THREADS)
        ecnt[x] = 0;
    symm__block_sync();
    for (uint64_t t = t0; t < t1; t++) {
        const uint64_t mk = ht_token_mask(A, t, ecnt, 1);
        if (A->in_rank)
            for (uint32_t r = 0; r < n; r++)
                A->in_rank[t * n + r] = (uint8_t)((mk >> r) & 1u);
    }
    symm__block_sync();
    if (A->per_rank) {
        for (uint32_t r = 0; r < n; r++) {
            uint32_t c = 0, total;
            for (uint64_t t = t0; t < t1; t++)
                c += (uint32_t)((ht_token_mask(A, t, NULL, 0) >> r) & 1u);
            moe_block_scan(c, &total);
            if (tid == 0)
                A->per_rank[r] = (int32_t)total;
        }
    }
    if (A->per_expert)
        for (uint32_t x = tid; x < A->experts; x += SYMM__MOE_THREADS)
            A->per_expert[x] = (int32_t)ecnt[x];
}

/* ---- dispatch --------------------------------------------------------------------------- */

/* Both dispatch forms, once every count is known: the last block sends every PE the
 * rows I send it (tot, per PE) and its local experts' rows (ecnt); then every block
 * reads my first row at every PE (off: what the PEs before me send it) and every PE's
 * receive buffers (rx_at, rs_at, as my addresses). */
SYMM__DEVICE_INTERNAL void ht_publish_locate(const symm__moe_kargs_t *A, uint64_t e, int last, const uint32_t *tot,
                                             const uint32_t *ecnt, uint32_t *off, char **rx_at, char **rs_at,
                                             const uint64_t *hdst) {
    const uint32_t tid = symm__block_tid(), n = (uint32_t)A->n, L = A->local, me = (uint32_t)A->me;
    const uint32_t p = (uint32_t)(e & 1u);
    if (last) {
        for (uint32_t x = tid; x < n * n; x += SYMM__MOE_THREADS) {
            SYMM__TRACE_START(&A->ctx, ts_, SYMM__G_THREAD);
            symm__st_b64(moe_peer(A, MOE_U64(A, ht_mat) + ((uint64_t)p * n + me) * n + x % n, (int)(x / n)),
                         TAG(e, tot[x % n]), SYMM_SEM_RELAXED, SYMM_SCOPE_SYS);
            SYMM__TRACE_SIGNAL(&A->ctx, ts_, (int)(x / n), MOE_U64(A, ht_mat) + ((uint64_t)p * n + me) * n + x % n,
                               TAG(e, tot[x % n]), SYMM_SIGNAL_SET);
        }
        for (uint32_t x = tid; x < n * L; x += SYMM__MOE_THREADS) {
            SYMM__TRACE_START(&A->ctx, ts_, SYMM__G_THREAD);
            symm__st_b64(moe_peer(A, MOE_U64(A, ht_emat) + ((uint64_t)p * n + me) * L + x % L, (int)(x / L)),
                         TAG(e, ecnt[x]), SYMM_SEM_RELAXED, SYMM_SCOPE_SYS);
            SYMM__TRACE_SIGNAL(&A->ctx, ts_, (int)(x / L), MOE_U64(A, ht_emat) + ((uint64_t)p * n + me) * L + x % L,
                               TAG(e, ecnt[x]), SYMM_SIGNAL_SET);
        }
    }
    /* every PE's row: my first row at r is what the PEs before me send it */
    for (uint32_t x = tid; x < n * n; x += SYMM__MOE_THREADS) {
        const uint32_t c = (uint32_t)moe_wait(A, MOE_U64(A, ht_mat) + (uint64_t)p * n * n + x, TAG(e, 0), (int)(x / n));
        if (x / n < me)
            atomicAdd(&off[x % n], c);
    }
    /* every PE's receive buffers (offsets in the heap are the same on every PE) */
    if (tid < n) {
        moe_wait(A, hdst + (uint64_t)tid * 4u + 2u, TAG(e, 0), (int)tid);
        rx_at[tid] = (char *)(uintptr_t)(A->base + symm__ld_b64(hdst + tid * 4u, SYMM_SEM_RELAXED, SYMM_SCOPE_SYS));
        rs_at[tid] = (char *)(uintptr_t)(A->base + symm__ld_b64(hdst + tid * 4u + 1u, SYMM_SEM_RELAXED, SYMM_SCOPE_SYS));
    }
}

SYMM__DEVICE_INTERNAL void ht_dispatch_send(const symm__moe_kargs_t *A, uint64_t e) {
    const uint32_t tid = symm__block_tid(), lane = tid & 31u, warp = tid >> 5;
    const uint32_t n = (uint32_t)A->n, L = A->local, K = A->topk, E = A->experts, me = (uint32_t)A->me;
    const uint32_t p = (uint32_t)(e & 1u), B = gridDim.x, b = blockIdx.x;
    const uint64_t m = A->num_tokens, lo = m * b / B, hi = m * (b + 1) / B;
    const int last = b == B - 1;
    const uint32_t nvx = A->x_bytes / 16u, cols = A->scale_cols, xb = A->x_bytes;
    const uint64_t xrow = (uint64_t)A->x_stride * A->x_esz;
    const int xal = moe_al16((uint64_t)(uintptr_t)A->x) && moe_al16(xrow);
    uint64_t *hmask = MOE_U64(A, ht_mask);
    uint32_t *hpos = MOE_U32(A, ht_pos);
    extern __shared__ uint32_t ecnt[]; /* [experts], the last block only */
    __shared__ uint32_t pre[SYMM__MOE_MAX_PES], tot[SYMM__MOE_MAX_PES], off[SYMM__MOE_MAX_PES];
    __shared__ uint32_t run[SYMM__MOE_MAX_PES];
    __shared__ uint64_t smask[HT_BATCH];
    __shared__ uint32_t srow[HT_BATCH][SYMM__MOE_MAX_PES];
    __shared__ char *rx_at[SYMM__MOE_MAX_PES], *rs_at[SYMM__MOE_MAX_PES]; /* r's receive buffers, as my addresses */
    uint64_t *hdst = MOE_U64(A, ht_dst) + (uint64_t)p * n * 4u;
    if (tid < n)
        pre[tid] = tot[tid] = off[tid] = run[tid] = 0;
    /* where my rows go at every PE: posted first, it depends on nothing but the stream order of my calls */
    if (last && tid < n) {
        uint64_t *d = (uint64_t *)moe_peer(A, hdst + (uint64_t)me * 4u, (int)tid);
        symm__st_b64(d, (uint64_t)A->ht_rx_at, SYMM_SEM_WEAK, SYMM_SCOPE_SYS);
        symm__st_b64(d + 1, (uint64_t)A->ht_rs_at, SYMM_SEM_WEAK, SYMM_SCOPE_SYS);
        symm__st_b64(d + 2, TAG(e, 1), SYMM_SEM_RELEASE, SYMM_SCOPE_SYS);
    }
    if (last)
        for (uint32_t x = tid; x < E; x += SYMM__MOE_THREADS)
            ecnt[x] = 0;
    symm__block_sync();
    /* masks of the block's range, the prefix before it, and (last block) the totals */
    for (uint64_t t = tid; t < (last ? m : hi); t += SYMM__MOE_THREADS) {
        const int own = t >= lo && t < hi;
        const uint64_t mask = ht_token_mask(A, t, last ? ecnt : NULL, own);
        if (own)
            hmask[t] = mask;
        for (uint64_t mm = mask; mm; mm &= mm - 1) {
            const int r = __ffsll((long long)mm) - 1;
            if (t < lo)
                atomicAdd(&pre[r], 1u);
            if (last)
                atomicAdd(&tot[r], 1u);
        }
    }
    symm__block_sync();
    ht_publish_locate(A, e, last, tot, ecnt, off, rx_at, rs_at, hdst);
    for (uint64_t t0 = lo; t0 < hi; t0 += HT_BATCH) {
        const uint32_t nb = hi - t0 < HT_BATCH ? (uint32_t)(hi - t0) : HT_BATCH;
        symm__block_sync();
        if (warp == 0) {
            const uint64_t mask = lane < nb ? hmask[t0 + lane] : 0;
            for (uint32_t r = 0; r < n; r++) {
                const int in = (int)((mask >> r) & 1u);
                const uint32_t ball = __ballot_sync(MOE_FULL, in), base = pre[r] + run[r];
                if (in) {
                    const uint32_t pos = base + (uint32_t)__popc(ball & ((1u << lane) - 1u));
                    srow[lane][r] = off[r] + pos;
                    hpos[(t0 + lane) * n + r] = pos;
                }
                __syncwarp();
                if (lane == 0)
                    run[r] += (uint32_t)__popc(ball);
                __syncwarp();
            }
            smask[lane] = mask;
        }
        symm__block_sync();
        if (xal) {
            const uint32_t total = nb * nvx;
            for (uint32_t q0 = tid; q0 < total; q0 += SYMM__MOE_THREADS * HT_UNROLL) {
                symm__v4_t v[HT_UNROLL];
#pragma unroll
                for (int u = 0; u < HT_UNROLL; u++) {
                    const uint32_t q = q0 + (uint32_t)u * SYMM__MOE_THREADS;
                    if (q < total)
                        v[u] = symm__cld16((const char *)A->x + (t0 + q / nvx) * xrow + 16u * (q % nvx), 0);
                }
#pragma unroll
                for (int u = 0; u < HT_UNROLL; u++) {
                    const uint32_t q = q0 + (uint32_t)u * SYMM__MOE_THREADS;
                    if (q < total) {
                        const uint32_t j = q / nvx;
                        for (uint64_t mm = smask[j]; mm; mm &= mm - 1) {
                            const int r = __ffsll((long long)mm) - 1;
                            const uint32_t row = srow[j][r];
                            if (row < A->cap)
                                symm__cst16(moe_peer(A, rx_at[r] + (uint64_t)row * xb + 16u * (q % nvx), r),
                                            v[u], 1);
                        }
                    }
                }
            }
        } else {
            for (uint32_t j = 0; j < nb; j++)
                for (uint64_t mm = smask[j]; mm; mm &= mm - 1) {
                    const int r = __ffsll((long long)mm) - 1;
                    const uint32_t row = srow[j][r];
                    if (row < A->cap)
                        symm__copy(moe_peer(A, rx_at[r] + (uint64_t)row * xb, r),
                                   (const char *)A->x + (t0 + j) * xrow, xb, tid, SYMM__MOE_THREADS, 1);
                }
        }
        /* scales, the mapped top-k, weights (four at a time) and the source: per (token, unit) */
        {
            const uint32_t cq = (cols + 3) / 4, kq = (K + 3) / 4, units = cq + 2 * kq + 1;
            for (uint32_t q = tid; q < nb * units; q += SYMM__MOE_THREADS) {
                const uint32_t j = q / units, u = q % units;
                const uint64_t t = t0 + j;
                uint32_t w[4] = {0, 0, 0, 0}, cnt = 0, at = 0;
                int64_t ex[4] = {0, 0, 0, 0};
                if (u < cq) {
                    at = 4 * u;
                    cnt = cols - at < 4 ? cols - at : 4;
                    for (uint32_t i = 0; i < cnt; i++)
                        w[i] = symm__f32_bits(A->x_scale[(int64_t)t * A->xs_stride[0] + (int64_t)(at + i) * A->xs_stride[1]]);
                } else if (u < cq + 2 * kq) {
                    at = 4 * (u < cq + kq ? u - cq : u - cq - kq);
                    cnt = K - at < 4 ? K - at : 4;
                    for (uint32_t i = 0; i < cnt; i++) {
                        if (u < cq + kq)
                            ex[i] = moe_index(A, t * K + at + i);
                        else
                            w[i] = A->weights ? symm__f32_bits(A->weights[t * K + at + i]) : 0u;
                    }
                }
                for (uint64_t mm = smask[j]; mm; mm &= mm - 1) {
                    const int r = __ffsll((long long)mm) - 1;
                    const uint64_t row = srow[j][r];
                    uint32_t v[4] = {w[0], w[1], w[2], w[3]};
                    char *dst;
                    if (row >= A->cap)
                        continue;
                    if (u == units - 1) {
                        symm__cst8(moe_peer(A, MOE_AT(A, ht_rsrc) + row * 8u, r), (uint64_t)me | (t << 32), 1);
                        continue;
                    }
                    if (u < cq) {
                        dst = rs_at[r] + (row * cols + at) * 4u;
                    } else if (u < cq + kq) {
                        for (uint32_t i = 0; i < cnt; i++)
                            v[i] = (uint32_t)(ex[i] >= 0 && ex[i] < (int64_t)E && (uint32_t)(ex[i] / L) == (uint32_t)r
                                                  ? (int32_t)(ex[i] % L) : -1);
                        dst = MOE_AT(A, ht_ridx) + (row * K + at) * 4u;
                    } else {
                        dst = MOE_AT(A, ht_rw) + (row * K + at) * 4u;
                    }
                    dst = (char *)moe_peer(A, dst, r);
                    if (cnt == 4 && moe_al16((uint64_t)(uintptr_t)dst)) {
                        symm__v4_t vv;
                        vv.x = v[0];
                        vv.y = v[1];
                        vv.z = v[2];
                        vv.w = v[3];
                        symm__cst16(dst, vv, 1);
                    } else {
                        for (uint32_t i = 0; i < cnt; i++)
                            moe_put32(dst + 4u * i, v[i]);
                    }
                }
            }
        }
    }
    /* the rows this block addressed to each PE, behind its stores */
    symm__block_sync();
    if (tid < n && run[tid] != 0) {
        SYMM__TRACE_START(&A->ctx, ts_, SYMM__G_THREAD);
        symm__fence_acq_rel_sys();
        symm__atom_add_b64(moe_peer(A, MOE_U64(A, ht_rcv) + me, (int)tid), (uint64_t)run[tid]);
        SYMM__TRACE_SIGNAL(&A->ctx, ts_, (int)tid, MOE_U64(A, ht_rcv) + me, run[tid], SYMM_SIGNAL_ADD);
    }
}

/* Dispatch's send half, warps form (SYMM_MOE_HT_DISPATCH=warps): block b
 * counts only its own tokens, per PE and per expert, posts those counts in
 * ht_bcnt[b] behind ht_bflag[b] = e, and takes its first row per PE from the
 * counts of the blocks before it; the last block sums every block's counts
 * into this PE's count rows. Then each warp sends whole tokens on its own
 * (tokens lo + w, lo + w + 16, ...): the row's vectors loaded once, stored
 * into every PE the token goes to, then its scales, top-k and source, with
 * no block barrier between tokens. Rows, positions and the counts' meaning
 * are the batches form's. */
#define HT_WU 8 /* warps form: 16-byte vectors a lane loads before it stores any */
SYMM__DEVICE_INTERNAL void ht_dispatch_send_warps(const symm__moe_kargs_t *A, uint64_t e) {
    const uint32_t tid = symm__block_tid(), lane = tid & 31u, warp = tid >> 5;
    const uint32_t n = (uint32_t)A->n, L = A->local, K = A->topk, E = A->experts, me = (uint32_t)A->me;
    const uint32_t p = (uint32_t)(e & 1u), B = gridDim.x, b = blockIdx.x, bw = n + E;
    const uint64_t m = A->num_tokens, lo = m * b / B, hi = m * (b + 1) / B;
    const int last = b == B - 1;
    const uint32_t nvx = A->x_bytes / 16u, cols = A->scale_cols, xb = A->x_bytes;
    const uint64_t xrow = (uint64_t)A->x_stride * A->x_esz;
    const int xal = moe_al16((uint64_t)(uintptr_t)A->x) && moe_al16(xrow);
    uint64_t *hmask = MOE_U64(A, ht_mask), *bflag = MOE_U64(A, ht_bflag);
    uint32_t *hpos = MOE_U32(A, ht_pos), *bcnt = MOE_U32(A, ht_bcnt);
    extern __shared__ uint32_t ecnt[]; /* [experts]: my tokens' counts, then (last block) every block's */
    __shared__ uint32_t cnt[SYMM__MOE_MAX_PES], pre[SYMM__MOE_MAX_PES], off[SYMM__MOE_MAX_PES];
    __shared__ uint32_t tot[SYMM__MOE_MAX_PES], wsum[SYMM__MOE_WARPS][SYMM__MOE_MAX_PES];
    __shared__ char *rx_at[SYMM__MOE_MAX_PES], *rs_at[SYMM__MOE_MAX_PES]; /* r's receive buffers, as my addresses */
    uint64_t *hdst = MOE_U64(A, ht_dst) + (uint64_t)p * n * 4u;
    if (tid < n)
        cnt[tid] = pre[tid] = off[tid] = tot[tid] = 0;
    /* where my rows go at every PE: posted first, it depends on nothing but the stream order of my calls */
    if (last && tid < n) {
        uint64_t *d = (uint64_t *)moe_peer(A, hdst + (uint64_t)me * 4u, (int)tid);
        symm__st_b64(d, (uint64_t)A->ht_rx_at, SYMM_SEM_WEAK, SYMM_SCOPE_SYS);
        symm__st_b64(d + 1, (uint64_t)A->ht_rs_at, SYMM_SEM_WEAK, SYMM_SCOPE_SYS);
        symm__st_b64(d + 2, TAG(e, 1), SYMM_SEM_RELEASE, SYMM_SCOPE_SYS);
    }
    for (uint32_t x = tid; x < E; x += SYMM__MOE_THREADS)
        ecnt[x] = 0;
    symm__block_sync();
    /* my tokens' masks and, per PE, their positions among my block's tokens going there
     * (a ballot per PE in each warp, the warps' sums scanned by one thread per PE) */
    for (uint64_t t0 = lo; t0 < hi; t0 += SYMM__MOE_THREADS) {
        const uint64_t t = t0 + tid;
        const uint64_t mask = t < hi ? ht_token_mask(A, t, ecnt, 1) : 0;
        if (t < hi)
            hmask[t] = mask;
        for (uint32_t r = 0; r < n; r++) {
            const uint32_t ball = __ballot_sync(MOE_FULL, (uint32_t)(mask >> r) & 1u);
            if (lane == 0)
                wsum[warp][r] = (uint32_t)__popc(ball);
        }
        symm__block_sync();
        if (tid < n) {
            uint32_t s = cnt[tid];
            for (uint32_t w = 0; w < SYMM__MOE_WARPS; w++) {
                const uint32_t c = wsum[w][tid];
                wsum[w][tid] = s;
                s += c;
            }
            cnt[tid] = s;
        }
        symm__block_sync();
        for (uint32_t r = 0; r < n; r++) {
            const uint32_t ball = __ballot_sync(MOE_FULL, (uint32_t)(mask >> r) & 1u);
            if ((mask >> r) & 1u)
                hpos[t * n + r] = wsum[warp][r] + (uint32_t)__popc(ball & ((1u << lane) - 1u));
        }
        symm__block_sync();
    }
    /* my counts for the blocks after me and for the last block */
    for (uint32_t x = tid; x < bw; x += SYMM__MOE_THREADS)
        bcnt[(uint64_t)b * bw + x] = x < n ? cnt[x] : ecnt[x - n];
    symm__block_sync();
    if (tid == 0)
        symm__st_b64(bflag + b, e, SYMM_SEM_RELEASE, SYMM_SCOPE_GPU);
    /* the rows the blocks before me send each PE; the last block: every block's counts */
    for (uint32_t x = tid; x < (last ? B : b) * n; x += SYMM__MOE_THREADS) {
        const uint32_t ob = x / n, r = x % n;
        uint32_t c;
        if (ob != b)
            moe_wait(A, bflag + ob, e, (int)me);
        c = bcnt[(uint64_t)ob * bw + r];
        if (ob < b)
            atomicAdd(&pre[r], c);
        if (last)
            atomicAdd(&tot[r], c);
    }
    symm__block_sync(); /* the waits above acquired every flag the reads below need */
    if (last) {
        for (uint32_t x = tid; x < E; x += SYMM__MOE_THREADS) {
            uint32_t s = 0;
            for (uint32_t ob = 0; ob < B; ob++)
                s += bcnt[(uint64_t)ob * bw + n + x];
            ecnt[x] = s;
        }
        symm__block_sync();
    }
    ht_publish_locate(A, e, last, tot, ecnt, off, rx_at, rs_at, hdst);
    symm__block_sync();
    /* each warp its tokens: lane l holds the row of PE l (and l + 32) */
    uint64_t nmask = lo + warp < hi ? hmask[lo + warp] : 0;
    for (uint64_t t = lo + warp; t < hi; t += SYMM__MOE_WARPS) {
        const uint64_t mask = nmask;
        const char *src = (const char *)A->x + t * xrow;
        uint32_t row0 = 0, row1 = 0;
        for (uint32_t r = lane; r < n; r += 32u) {
            if ((mask >> r) & 1u) {
                const uint32_t pos = pre[r] + hpos[t * n + r];
                hpos[t * n + r] = pos; /* the combine's: among all my tokens going to r */
                if (r < 32u)
                    row0 = off[r] + pos;
                else
                    row1 = off[r] + pos;
            }
        }
        nmask = t + SYMM__MOE_WARPS < hi ? hmask[t + SYMM__MOE_WARPS] : 0;
        if (xal) {
            for (uint32_t v0 = 0; v0 < nvx; v0 += 32u * HT_WU) {
                symm__v4_t v[HT_WU];
#pragma unroll
                for (int u = 0; u < HT_WU; u++) {
                    const uint32_t q = v0 + lane + 32u * (uint32_t)u;
                    if (q < nvx)
                        v[u] = symm__cld16(src + 16u * q, 0);
                }
                for (uint64_t mm = mask; mm; mm &= mm - 1) {
                    const uint32_t r = (uint32_t)(__ffsll((long long)mm) - 1);
                    const uint32_t row = __shfl_sync(MOE_FULL, r < 32u ? row0 : row1, r & 31u);
                    if (row >= A->cap)
                        continue;
                    char *dst = (char *)moe_peer(A, rx_at[r] + (uint64_t)row * xb, (int)r);
#pragma unroll
                    for (int u = 0; u < HT_WU; u++) {
                        const uint32_t q = v0 + lane + 32u * (uint32_t)u;
                        if (q < nvx)
                            symm__cst16(dst + 16u * q, v[u], 1);
                    }
                }
            }
        } else {
            for (uint64_t mm = mask; mm; mm &= mm - 1) {
                const uint32_t r = (uint32_t)(__ffsll((long long)mm) - 1);
                const uint32_t row = __shfl_sync(MOE_FULL, r < 32u ? row0 : row1, r & 31u);
                if (row < A->cap)
                    symm__copy(moe_peer(A, rx_at[r] + (uint64_t)row * xb, (int)r), src, xb, lane, 32u, 1);
            }
        }
        /* scales, then the top-k mapped to each PE's local experts (-1 elsewhere) with the weights, then the source */
        for (uint32_t i0 = 0; i0 < cols; i0 += 32u) {
            const uint32_t i = i0 + lane;
            const uint32_t w = i < cols
                ? symm__f32_bits(A->x_scale[(int64_t)t * A->xs_stride[0] + (int64_t)i * A->xs_stride[1]]) : 0u;
            for (uint64_t mm = mask; mm; mm &= mm - 1) {
                const uint32_t r = (uint32_t)(__ffsll((long long)mm) - 1);
                const uint32_t row = __shfl_sync(MOE_FULL, r < 32u ? row0 : row1, r & 31u);
                if (row < A->cap && i < cols)
                    moe_put32(moe_peer(A, rs_at[r] + ((uint64_t)row * cols + i) * 4u, (int)r), w);
            }
        }
        for (uint32_t k0 = 0; k0 < K; k0 += 32u) {
            const uint32_t k = k0 + lane;
            const int64_t ex = k < K ? moe_index(A, t * K + k) : -1;
            const uint32_t w = k < K && A->weights ? symm__f32_bits(A->weights[t * K + k]) : 0u;
            for (uint64_t mm = mask; mm; mm &= mm - 1) {
                const uint32_t r = (uint32_t)(__ffsll((long long)mm) - 1);
                const uint32_t row = __shfl_sync(MOE_FULL, r < 32u ? row0 : row1, r & 31u);
                if (row < A->cap && k < K) {
                    const int32_t le = ex >= 0 && ex < (int64_t)E && (uint32_t)(ex / L) == r ? (int32_t)(ex % L) : -1;
                    moe_put32(moe_peer(A, MOE_AT(A, ht_ridx) + ((uint64_t)row * K + k) * 4u, (int)r), (uint32_t)le);
                    moe_put32(moe_peer(A, MOE_AT(A, ht_rw) + ((uint64_t)row * K + k) * 4u, (int)r), w);
                }
            }
        }
        for (uint64_t mm = mask; mm; mm &= mm - 1) {
            const uint32_t r = (uint32_t)(__ffsll((long long)mm) - 1);
            const uint32_t row = __shfl_sync(MOE_FULL, r < 32u ? row0 : row1, r & 31u);
            if (lane == 0 && row < A->cap)
                symm__cst8(moe_peer(A, MOE_AT(A, ht_rsrc) + (uint64_t)row * 8u, (int)r), (uint64_t)me | (t << 32), 1);
        }
    }
    /* the rows this block addressed to each PE, behind its stores */
    symm__block_sync();
    if (tid < n && cnt[tid] != 0) {
        SYMM__TRACE_START(&A->ctx, ts_, SYMM__G_THREAD);
        symm__fence_acq_rel_sys();
        symm__atom_add_b64(moe_peer(A, MOE_U64(A, ht_rcv) + me, (int)tid), (uint64_t)cnt[tid]);
        SYMM__TRACE_SIGNAL(&A->ctx, ts_, (int)tid, MOE_U64(A, ht_rcv) + me, cnt[tid], SYMM_SIGNAL_ADD);
    }
}

/* The receive half of epoch e (one block): every PE's rows are in; publish
 * the counts, and where each source's rows start (for the combine). */
SYMM__DEVICE_INTERNAL void ht_dispatch_recv(const symm__moe_kargs_t *A, uint64_t e) {
    const uint32_t tid = symm__block_tid(), n = (uint32_t)A->n, L = A->local, me = (uint32_t)A->me;
    const uint32_t p = (uint32_t)(e & 1u);
    uint32_t *roff = MOE_U32(A, ht_roff);
    __shared__ uint32_t from[SYMM__MOE_MAX_PES];
    symm__block_sync();
    if (tid < n) {
        const uint64_t c =
            (uint32_t)moe_wait(A, MOE_U64(A, ht_mat) + ((uint64_t)p * n + tid) * n + me, TAG(e, 0), (int)tid);
        uint64_t *expect = MOE_U64(A, ht_exp) + tid;
        from[tid] = (uint32_t)c;
        moe_wait(A, MOE_U64(A, ht_rcv) + tid, *expect + c, (int)tid);
        *expect += c;
    }
    for (uint32_t le = tid; le < L; le += SYMM__MOE_THREADS) {
        uint32_t c = 0;
        for (uint32_t s = 0; s < n; s++)
            c += (uint32_t)moe_wait(A, MOE_U64(A, ht_emat) + ((uint64_t)p * n + s) * L + le, TAG(e, 0), (int)s);
        MOE_I32(A, ht_rpe)[le] = (int32_t)c;
    }
    symm__block_sync();
    if (tid == 0) {
        uint64_t total = 0;
        for (uint32_t s = 0; s < n; s++) {
            roff[s] = (uint32_t)total;
            roff[n + s] = from[s];
            total += from[s];
        }
        if (total > A->cap)
            moe_error(A, SYMM__MOE_ERR_CAPACITY, (int64_t)total, (int64_t)A->cap, 0);
        MOE_I32(A, ht_rnum)[0] = (int32_t)(total < A->cap ? total : A->cap);
    }
}

__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ht_dispatch(const __grid_constant__ symm__moe_kargs_t a) {
    const symm__moe_kargs_t *A = &a;
    const int send = (A->flags & SYMM_MOE_SEND) != 0;
    const uint64_t e = moe_begin(A, send);
    if (send)
        MOE_TRACE_HALF(A, SYMM_TRACE_COLL_MOE_HT_DISPATCH,
                       if (A->ht_dwarps) ht_dispatch_send_warps(A, e); else ht_dispatch_send(A, e));
    if ((A->flags & SYMM_MOE_RECV) && blockIdx.x == 0)
        MOE_TRACE_HALF(A, SYMM_TRACE_COLL_MOE_HT_DISPATCH_RECV, ht_dispatch_recv(A, e));
    if (send)
        moe_close_epoch(A, SYMM__MK_HT_DISPATCH, e);
}

/* ---- combine ---------------------------------------------------------------------------- */

/* Chunks of completion flags per source PE. */
SYMM__DEVICE_INTERNAL uint32_t ht_nchunks(const symm__moe_kargs_t *A) {
    return (A->max_tokens + SYMM__MOE_HT_CHUNK - 1) / SYMM__MOE_HT_CHUNK;
}

/* The side channel (symm_moe_ht_combine_weights): the row of values source r
 * returns for my token at position pos among those I sent it, after its chunk
 * flag was acquired: in ht_cwbuf, or (own rows of a fused combine) in my w; 0
 * for a row w does not have (y did not either: an error reported). */
SYMM__DEVICE_INTERNAL uint64_t ht_wrow(const symm__moe_kargs_t *A, uint32_t r, uint32_t pos, int own) {
    if (own) {
        const uint64_t row = (uint64_t)MOE_U32(A, ht_roff)[r] + pos;
        return row < A->w_rows ? (uint64_t)(uintptr_t)(A->w + (int64_t)row * A->w_stride) : 0u;
    }
    return (uint64_t)(uintptr_t)(MOE_AT(A, ht_cwbuf) + ((uint64_t)r * A->max_tokens + pos) * A->w_cols * 4u);
}

/* A chunk flag for the warp reducers: they share their SM with the senders,
 * so a flag not there yet is polled every quarter microsecond, not in a
 * tight loop; the deadline as in every wait. */
SYMM__DEVICE_INTERNAL void ht_wait_lazy(const symm__moe_kargs_t *A, const uint64_t *word, uint64_t v, int from) {
    SYMM__TRACE_START(&A->ctx, t_, SYMM__G_THREAD);
    uint64_t t0 = 0, seen;
    uint32_t polls = 0;
    while ((seen = symm__ld_b64(word, SYMM_SEM_ACQUIRE, SYMM_SCOPE_SYS)) < v) {
        symm__nanosleep(256u);
        if (++polls % 1024u == 0)
            t0 = symm__wait_check(&A->ctx, word, SYMM_CMP_GE, v, seen, t0);
    }
    SYMM__TRACE_WAIT(&A->ctx, t_, SYMM_TRACE_WAIT_MOE, word, from, SYMM_CMP_GE, v, seen);
    (void)from;
}

/* Token t's side channel, by one thread: 8 columns at a time, the sources in
 * PE order four at a time (their positions, then their 8 values each, loaded
 * before any is added: a few round trips per token, not a few per source),
 * summed in float32 from 0, then stored. The sources' chunk flags were
 * acquired before (by this thread, or by one of its warp or block behind a
 * barrier since), or with `wait` (e: the epoch) are acquired here (pull:
 * rows read in place came with no flag; their values did). */
SYMM__DEVICE_INTERNAL void ht_weights_token(const symm__moe_kargs_t *A, uint64_t t, int fused, uint64_t e, int wait) {
    const uint32_t n = (uint32_t)A->n, me = (uint32_t)A->me, wc = A->w_cols;
    const uint64_t mask = MOE_U64(A, ht_mask)[t];
    const uint32_t *hpos = MOE_U32(A, ht_pos) + t * n;
    float *o = A->out_w + (int64_t)t * A->ow_stride;
    for (uint32_t c0 = 0; c0 < wc; c0 += 8u) {
        float acc[8];
#pragma unroll
        for (int j = 0; j < 8; j++)
            acc[j] = 0.0f;
        for (uint64_t mm = mask; mm;) {
            uint32_t r[4], pos[4], v[4][8];
            uint64_t row[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                r[i] = mm ? (uint32_t)(__ffsll((long long)mm) - 1) : 0u;
                pos[i] = mm ? hpos[r[i]] : ~0u;
                mm &= mm - 1;
            }
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int own = fused && r[i] == me;
                if (wait && pos[i] != ~0u && !own)
                    ht_wait_lazy(A, MOE_U64(A, ht_cflag) + (uint64_t)r[i] * ht_nchunks(A) + pos[i] / SYMM__MOE_HT_CHUNK,
                                 e, (int)r[i]);
                row[i] = pos[i] != ~0u ? ht_wrow(A, r[i], pos[i], own) : 0u;
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 8; j++)
                    v[i][j] = row[i] != 0u && c0 + (uint32_t)j < wc
                                  ? symm__cld4((const char *)(uintptr_t)row[i] + 4u * (c0 + (uint32_t)j), 0) : 0u;
#pragma unroll
            for (int i = 0; i < 4; i++) /* PE order, as the rows are summed */
                if (row[i] != 0u)
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        acc[j] += symm__bits_f32(v[i][j]);
        }
#pragma unroll
        for (int j = 0; j < 8; j++)
            if (c0 + (uint32_t)j < wc)
                o[c0 + (uint32_t)j] = acc[j];
    }
}

/* A warp reducer's side channel, once its rows are summed: its tokens w, w +
 * nw, ..., a lane each (their flags were acquired by lanes of this warp, with
 * a warp barrier since), so the tokens' loads overlap instead of adding a
 * round trip to each token of the row loop. Out of line: the row loops keep
 * their registers. */
SYMM__NOINLINE void ht_weights_tail_warp(const symm__moe_kargs_t *A, uint64_t w, uint64_t nw, int fused, uint64_t e,
                                         int wait) {
    symm__warp_sync();
    for (uint64_t t = w + symm__lane() * nw; t < A->num_tokens; t += 32u * nw)
        ht_weights_token(A, t, fused, e, wait);
}

/* The threads of a block that run one half: `tid` of `nthr`, meeting at
 * barrier `bar` (0: the whole block; else a named group of warps). */
typedef struct ht_group {
    uint32_t tid, nthr, bar;
} ht_group_t;

SYMM__DEVICE_INTERNAL void ht_group_sync(ht_group_t g) {
    if (g.bar == 0)
        symm__block_sync();
    else
        symm__group_sync(g.bar, g.nthr);
}

/* The side channel's values of chunk c of the rows source s gets back (rows
 * j0 .. j0 + lim - 1 of w) into s's ht_cwbuf at my rows there, by threads tid
 * of nthr, before the chunk's flag, four values per thread loaded before any
 * is stored. Out of line: the send loops keep their registers. */
SYMM__NOINLINE void ht_send_chunk_weights_any(const symm__moe_kargs_t *A, const float *src, char *dst, uint32_t nv,
                                              uint32_t tid, uint32_t nthr) {
    const uint32_t wc = A->w_cols;
    for (uint32_t q0 = tid; q0 < nv; q0 += 4u * nthr) {
        uint32_t v[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const uint32_t q = q0 + (uint32_t)u * nthr;
            v[u] = q < nv ? symm__f32_bits(src[(int64_t)(q / wc) * A->w_stride + q % wc]) : 0u;
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const uint32_t q = q0 + (uint32_t)u * nthr;
            if (q < nv)
                moe_put32(dst + 4u * q, v[u]);
        }
    }
}

/* Where my values of chunk c go: source s's ht_cwbuf, at my rows there. */
SYMM__DEVICE_INTERNAL char *ht_cw_dst(const symm__moe_kargs_t *A, uint32_t s, uint32_t c) {
    return (char *)moe_peer(A, MOE_AT(A, ht_cwbuf) + ((uint64_t)A->me * A->max_tokens +
                                                     (uint64_t)c * SYMM__MOE_HT_CHUNK) * A->w_cols * 4u, (int)s);
}

/* Can nv values from src go to dst as 16-byte vectors (w packed and aligned)? */
SYMM__DEVICE_INTERNAL int ht_cw_vec(const symm__moe_kargs_t *A, const float *src, const char *dst, uint32_t nv) {
    return A->w_stride == (int64_t)A->w_cols && nv % 4u == 0 &&
           moe_al16((uint64_t)(uintptr_t)src | (uint64_t)(uintptr_t)dst);
}

/* The side channel's values of chunk c, as ht_send_chunk_weights_any copies
 * them, or where w's rows are packed (w_stride == cols, as DeepEP's
 * topk_weights) and aligned as one block of 16-byte vectors (one per thread
 * for 32 rows of 8 values). */
SYMM__DEVICE_INTERNAL void ht_send_chunk_weights(const symm__moe_kargs_t *A, uint32_t s, uint32_t c, uint64_t j0,
                                                 uint32_t lim, uint32_t tid, uint32_t nthr) {
    const uint32_t wc = A->w_cols, nv = lim * wc;
    const float *src = A->w + (int64_t)j0 * A->w_stride;
    char *dst = ht_cw_dst(A, s, c);
    if (!ht_cw_vec(A, src, dst, nv)) {
        ht_send_chunk_weights_any(A, src, dst, nv, tid, nthr);
        return;
    }
    for (uint32_t q = tid; q < nv / 4u; q += nthr)
        symm__cst16(dst + 16u * q, symm__cld16((const char *)src + 16u * q, 0), 1);
}

/* The same, out of line: the send loops that an inline copy would make spill (all but overlap's). */
SYMM__NOINLINE void ht_send_chunk_weights_call(const symm__moe_kargs_t *A, uint32_t s, uint32_t c, uint64_t j0,
                                               uint32_t lim, uint32_t tid, uint32_t nthr) {
    ht_send_chunk_weights(A, s, c, j0, lim, tid, nthr);
}

/* Send half: this block is `b` of `nb` senders, with the threads of `g`,
 * each with U 16-byte vectors loaded before it stores any. With `fused`, the
 * rows this PE returns to itself stay in y for the receive half to read.
 * With `ring` (HT_SR_THREAD vectors of shared memory per thread of `g`,
 * thread-interleaved so a warp's 16-byte accesses take no bank twice; U =
 * HT_SR_U), y's vectors come in by cp.async HT_SR_STAGES - 1 rounds ahead of
 * the round stored; every thread reads back only what it copied itself. */
template <int U>
SYMM__DEVICE_INTERNAL void ht_combine_send(const symm__moe_kargs_t *A, uint64_t e, uint32_t b, uint32_t nb,
                                           int fused, ht_group_t g, symm__v4_t *ring = NULL) {
    const uint32_t tid = g.tid, nthr = g.nthr, n = (uint32_t)A->n, me = (uint32_t)A->me;
    const uint32_t *roff = MOE_U32(A, ht_roff);
    const uint64_t rb = (uint64_t)A->hidden * 2u, ystride = (uint64_t)A->y_stride[1] * 2u;
    const uint32_t nvr = (uint32_t)(rb / 16u), nch = ht_nchunks(A);
    const uint64_t got = (uint64_t)MOE_I32(A, ht_rnum)[0];
    const uint64_t rows = got < A->y_rows ? got : A->y_rows;
    const int yal = moe_al16((uint64_t)(uintptr_t)A->y) && moe_al16(ystride), ylin = ystride == rb;
    uint32_t maxc = 0, item = 0;
    if (got > A->y_rows && b == 0 && tid == 0)
        moe_error(A, SYMM__MOE_ERR_Y_ROWS, (int64_t)got, (int64_t)A->y_rows, 0);
    for (uint32_t s = 0; s < n; s++) {
        const uint32_t c = (roff[n + s] + SYMM__MOE_HT_CHUNK - 1) / SYMM__MOE_HT_CHUNK;
        maxc = c > maxc ? c : maxc;
    }
    for (uint32_t c = 0; c < maxc; c++) {
        for (uint32_t i = 1; i <= n; i++) {
            const uint32_t s = (me + i) % n, cnt = roff[n + s];
            uint64_t j0, nr, lim;
            if (c * SYMM__MOE_HT_CHUNK >= cnt || (fused && s == me))
                continue;
            if (item++ % nb != b)
                continue;
            j0 = (uint64_t)roff[s] + (uint64_t)c * SYMM__MOE_HT_CHUNK;
            nr = cnt - c * SYMM__MOE_HT_CHUNK < SYMM__MOE_HT_CHUNK ? cnt - c * SYMM__MOE_HT_CHUNK : SYMM__MOE_HT_CHUNK;
            lim = j0 < rows ? (rows - j0 < nr ? rows - j0 : nr) : 0; /* rows of y there are */
            {
                char *dst = (char *)moe_peer(A, MOE_AT(A, ht_cbuf) + ((uint64_t)me * A->max_tokens +
                                                                      (uint64_t)c * SYMM__MOE_HT_CHUNK) * rb, (int)s);
                const char *src = (const char *)A->y + j0 * ystride;
                if (yal && ring) {
                    const uint32_t total = (uint32_t)lim * nvr, step = nthr * U;
                    const uint32_t rounds = tid < total ? (total - tid + step - 1) / step : 0;
                    for (uint32_t k = 0; k < rounds + HT_SR_STAGES - 1; k++) {
                        if (k < rounds) {
#pragma unroll
                            for (int u = 0; u < U; u++) {
                                const uint32_t q = tid + k * step + (uint32_t)u * nthr;
                                if (q < total)
                                    symm__cp_async16(&ring[((k % HT_SR_STAGES) * U + (uint32_t)u) * nthr + tid],
                                                     src + (ylin ? (uint64_t)(q * 16u)
                                                                 : (q / nvr) * ystride + 16u * (q % nvr)));
                            }
                        }
                        symm__cp_async_commit(); /* empty past the last round: the count of groups stays right */
                        if (k + 1 < HT_SR_STAGES)
                            continue;
                        symm__cp_async_wait(HT_SR_STAGES - 1); /* round k - (HT_SR_STAGES - 1) is in */
                        {
                            const uint32_t j = k - (HT_SR_STAGES - 1);
#pragma unroll
                            for (int u = 0; u < U; u++) {
                                const uint32_t q = tid + j * step + (uint32_t)u * nthr;
                                if (q < total)
                                    symm__cst16(dst + (uint64_t)(q * 16u),
                                                symm__cld16(&ring[((j % HT_SR_STAGES) * U + (uint32_t)u) * nthr + tid], 0), 1);
                            }
                        }
                    }
                    symm__cp_async_wait(0);
                } else if (yal) {
                    const uint32_t total = (uint32_t)lim * nvr;
                    for (uint32_t q0 = tid; q0 < total; q0 += nthr * U) {
                        symm__v4_t v[U];
#pragma unroll
                        for (int u = 0; u < U; u++) {
                            const uint32_t q = q0 + (uint32_t)u * nthr;
                            if (q < total)
                                v[u] = symm__cld16(
                                    src + (ylin ? (uint64_t)(q * 16u) : (q / nvr) * ystride + 16u * (q % nvr)), 0);
                        }
#pragma unroll
                        for (int u = 0; u < U; u++) {
                            const uint32_t q = q0 + (uint32_t)u * nthr;
                            if (q < total) /* q * 16 < 2^32: a chunk is at most 32 rows of 2^17 bytes */
                                symm__cst16(dst + (uint64_t)(q * 16u), v[u], 1);
                        }
                    }
                } else {
                    for (uint32_t j = 0; j < lim; j++)
                        symm__copy(dst + j * rb, src + j * ystride, rb, tid, nthr, 1);
                }
            }
            if (A->w_cols && U == HT_SEND_U_WS) /* the side channel's values of these rows, behind the same flag */
                ht_send_chunk_weights(A, s, c, j0, (uint32_t)lim, tid, nthr);
            else if (A->w_cols)
                ht_send_chunk_weights_call(A, s, c, j0, (uint32_t)lim, tid, nthr);
            ht_group_sync(g);
            if (tid == 0)
                /* not traced here (the receiver's wait names PE s): a record in these loops makes
                 * ptxas spill this kernel, which sits at its 128-register limit */
                symm__st_b64(moe_peer(A, MOE_U64(A, ht_cflag) + (uint64_t)me * nch + c, (int)s), e, SYMM_SEM_RELEASE,
                             SYMM_SCOPE_SYS);
        }
    }
}

/* The block reducer's side channel, once its rows are summed: the block's
 * tokens (batches of tb, b-th of nb reducers), a thread each (their flags
 * were acquired by threads of this block, with a block barrier since). Out
 * of line: the row loops keep their registers. */
SYMM__NOINLINE void ht_weights_tail_block(const symm__moe_kargs_t *A, uint32_t b, uint32_t nb, uint32_t tb, int fused) {
    symm__block_sync();
    for (uint64_t u = symm__block_tid();; u += SYMM__MOE_THREADS) {
        const uint64_t t = ((uint64_t)b + (u / tb) * nb) * tb + u % tb;
        if (t >= A->num_tokens)
            break;
        ht_weights_token(A, t, fused, 0, 0);
    }
}

/* Receive half: this block is `b` of `nb` reducers; tokens go round-robin in
 * batches so every reducer moves through the tokens in the order their rows
 * arrive. */
SYMM__DEVICE_INTERNAL void ht_combine_recv(const symm__moe_kargs_t *A, uint64_t e, uint32_t b, uint32_t nb,
                                           int fused) {
    const uint32_t tid = symm__block_tid(), n = (uint32_t)A->n, me = (uint32_t)A->me, h8 = A->hidden / 8u;
    const uint32_t nch = ht_nchunks(A);
    const uint64_t m = A->num_tokens, rb = (uint64_t)A->hidden * 2u, ystride = (uint64_t)A->y_stride[1] * 2u;
    const uint32_t *roff = MOE_U32(A, ht_roff);
    uint32_t tb = 8192u / h8; /* about four passes of HT_RED_U vectors per thread */
    __shared__ uint64_t smask[HT_BATCH];
    __shared__ uint32_t spos[SYMM__MOE_THREADS];
    tb = tb < 1 ? 1 : (tb > HT_BATCH ? HT_BATCH : tb);
    if (tb * n > SYMM__MOE_THREADS)
        tb = SYMM__MOE_THREADS / n;
    for (uint64_t t0 = (uint64_t)b * tb; t0 < m; t0 += (uint64_t)nb * tb) {
        const uint32_t cnt = m - t0 < tb ? (uint32_t)(m - t0) : tb, total = cnt * h8;
        symm__block_sync();
        if (tid < cnt * n) {
            const uint32_t j = tid / n, r = tid % n;
            const uint64_t t = t0 + j, mask = MOE_U64(A, ht_mask)[t];
            if (r == 0)
                smask[j] = mask;
            if ((mask >> r) & 1u) {
                const uint32_t pos = MOE_U32(A, ht_pos)[t * n + r];
                spos[tid] = pos;
                if (!(fused && r == me))
                    moe_wait(A, MOE_U64(A, ht_cflag) + (uint64_t)r * nch + pos / SYMM__MOE_HT_CHUNK, e, (int)r);
            }
        }
        symm__block_sync();
        /* HT_RED_U vectors per thread, each with up to HT_RED_G sources loaded before any is
         * summed: the loads, not the arithmetic, bound this loop */
        for (uint32_t q0 = tid; q0 < total; q0 += SYMM__MOE_THREADS * HT_RED_U) {
            float acc[HT_RED_U][8];
            uint64_t mm[HT_RED_U], any = 0;
#pragma unroll
            for (int u = 0; u < HT_RED_U; u++) {
                const uint32_t q = q0 + (uint32_t)u * SYMM__MOE_THREADS;
                mm[u] = q < total ? smask[q / h8] : 0;
                any |= mm[u];
#pragma unroll
                for (int k = 0; k < 8; k++)
                    acc[u][k] = 0.0f;
            }
            while (any) {
                symm__v4_t va[HT_RED_U][HT_RED_G], none = {0, 0, 0, 0}; /* y is bf16 or f16: 16 bytes per 8 */
                int have[HT_RED_U][HT_RED_G];
                any = 0;
#pragma unroll
                for (int u = 0; u < HT_RED_U; u++) {
                    const uint32_t q = q0 + (uint32_t)u * SYMM__MOE_THREADS, j = q / h8, v = q % h8;
#pragma unroll
                    for (int i = 0; i < HT_RED_G; i++) { /* PE order, as the reference sums */
                        have[u][i] = mm[u] != 0;
                        if (have[u][i]) {
                            const uint32_t r = (uint32_t)(__ffsll((long long)mm[u]) - 1);
                            const uint32_t pos = spos[j * n + r];
                            const char *src = fused && r == me
                                                  ? (const char *)A->y + ((uint64_t)roff[me] + pos) * ystride
                                                  : MOE_AT(A, ht_cbuf) + ((uint64_t)r * A->max_tokens + pos) * rb;
                            mm[u] &= mm[u] - 1;
                            va[u][i] = symm__cld16(src + (uint64_t)v * 16u, 0);
                        }
                    }
                    any |= mm[u];
                }
#pragma unroll
                for (int u = 0; u < HT_RED_U; u++)
#pragma unroll
                    for (int i = 0; i < HT_RED_G; i++)
                        if (have[u][i])
                            moe_fma8(A->y_kind, va[u][i], none, 1.0f, acc[u]);
            }
#pragma unroll
            for (int u = 0; u < HT_RED_U; u++) {
                const uint32_t q = q0 + (uint32_t)u * SYMM__MOE_THREADS, j = q / h8, v = q % h8;
                if (q < total)
                    moe_store8((char *)A->out + ((int64_t)(t0 + j) * A->out_stride + (int64_t)v * 8) * 2, A->out_kind,
                               acc[u]);
            }
        }
    }
    if (A->w_cols)
        ht_weights_tail_block(A, b, nb, tb, fused);
}

/* A reducing warp's summed slice of token t (its vectors kb + lane + 32 u below h8) stored
 * to out, then its sums cleared for the next slice. */
SYMM__DEVICE_INTERNAL void ht_store_slice(const symm__moe_kargs_t *A, uint64_t t, uint32_t kb, uint32_t lane,
                                          uint32_t h8, float (&acc)[HT_RED_U][8]) {
#pragma unroll
    for (int u = 0; u < HT_RED_U; u++) {
        const uint32_t v = kb + lane + 32u * (uint32_t)u;
        if (v < h8)
            moe_store8((char *)A->out + ((int64_t)t * A->out_stride + (int64_t)v * 8) * 2, A->out_kind, acc[u]);
#pragma unroll
        for (int q = 0; q < 8; q++)
            acc[u][q] = 0.0f;
    }
}

/* A reducing warp's summing cursor once slice kb of token t is summed: the
 * slice stored, then the next slice, or the first of token t + nw (returns 1:
 * the caller takes that token's mask). */
SYMM__DEVICE_INTERNAL int ht_slice_done(const symm__moe_kargs_t *A, uint64_t *t, uint32_t *kb, uint32_t slice,
                                        uint32_t nw, uint32_t lane, uint32_t h8, float (&acc)[HT_RED_U][8]) {
    ht_store_slice(A, *t, *kb, lane, h8, acc);
    *kb += slice;
    if (*kb < h8)
        return 0;
    *kb = 0;
    *t += nw;
    return 1;
}

/* Receive half by warps: warp `w` of `nw` sums tokens w, w + nw, ... on its
 * own (no barrier with other warps), so one warp's wait for a flag or a load
 * hides behind the others' loads. Lane l finds source l's (and l + 32's) row
 * and waits for its chunk; the next token's mask and positions are loaded
 * while this one is summed. Sums in PE order, like ht_combine_recv. */
SYMM__DEVICE_INTERNAL void ht_combine_recv_warps(const symm__moe_kargs_t *A, uint64_t e, uint32_t w, uint32_t nw,
                                                 int fused) {
    const uint32_t lane = symm__lane(), n = (uint32_t)A->n, me = (uint32_t)A->me, h8 = A->hidden / 8u;
    const uint32_t nch = ht_nchunks(A);
    const uint64_t m = A->num_tokens, rb = (uint64_t)A->hidden * 2u, ystride = (uint64_t)A->y_stride[1] * 2u;
    const uint32_t *roff = MOE_U32(A, ht_roff), *hpos = MOE_U32(A, ht_pos);
    const uint64_t *hmask = MOE_U64(A, ht_mask);
    uint64_t mask = 0;
    uint32_t pos0 = 0, pos1 = 0;
    if (w < m) {
        mask = hmask[w];
        pos0 = lane < n ? hpos[(uint64_t)w * n + lane] : 0;
        pos1 = lane + 32u < n ? hpos[(uint64_t)w * n + lane + 32u] : 0;
    }
    for (uint64_t t = w; t < m; t += nw) {
        const uint64_t tn = t + nw;
        uint64_t src0 = 0, src1 = 0; /* lane l: the row of source l, and of source l + 32 */
        uint64_t nmask = 0;
        uint32_t npos0 = 0, npos1 = 0;
        for (uint32_t r = lane; r < n; r += 32u) {
            const uint32_t pos = r < 32u ? pos0 : pos1;
            uint64_t a = 0;
            if ((mask >> r) & 1u) {
                if (fused && r == me) {
                    a = (uint64_t)(uintptr_t)A->y + ((uint64_t)roff[me] + pos) * ystride;
                } else {
                    ht_wait_lazy(A, MOE_U64(A, ht_cflag) + (uint64_t)r * nch + pos / SYMM__MOE_HT_CHUNK, e, (int)r);
                    a = (uint64_t)(uintptr_t)(MOE_AT(A, ht_cbuf) + ((uint64_t)r * A->max_tokens + pos) * rb);
                }
            }
            if (r < 32u)
                src0 = a;
            else
                src1 = a;
        }
        /* lane r's acquire of its flag covers the other lanes' loads of that row */
        symm__warp_sync();
        if (tn < m) {
            nmask = hmask[tn];
            npos0 = lane < n ? hpos[tn * n + lane] : 0;
            npos1 = lane + 32u < n ? hpos[tn * n + lane + 32u] : 0;
        }
        for (uint32_t kb = 0; kb < h8; kb += 32u * HT_RED_U) { /* the same trips on every lane: shuffles inside */
            const uint32_t k0 = kb + lane;
            float acc[HT_RED_U][8];
            uint64_t mm = mask;
#pragma unroll
            for (int u = 0; u < HT_RED_U; u++)
#pragma unroll
                for (int k = 0; k < 8; k++)
                    acc[u][k] = 0.0f;
            while (mm) {
                symm__v4_t va[HT_RED_U][HT_RED_G], none = {0, 0, 0, 0};
                const char *src[HT_RED_G];
                int ng = 0;
#pragma unroll
                for (int i = 0; i < HT_RED_G; i++) { /* PE order, as the reference sums */
                    src[i] = NULL;
                    if (mm) {
                        const uint32_t r = (uint32_t)(__ffsll((long long)mm) - 1);
                        mm &= mm - 1;
                        src[i] = (const char *)(uintptr_t)__shfl_sync(MOE_FULL, r < 32u ? src0 : src1, r & 31u);
                        ng = i + 1;
                    }
                }
#pragma unroll
                for (int u = 0; u < HT_RED_U; u++) {
                    const uint32_t v = k0 + 32u * (uint32_t)u;
#pragma unroll
                    for (int i = 0; i < HT_RED_G; i++)
                        if (i < ng && v < h8)
                            va[u][i] = symm__cld16(src[i] + (uint64_t)v * 16u, 0);
                }
#pragma unroll
                for (int u = 0; u < HT_RED_U; u++)
#pragma unroll
                    for (int i = 0; i < HT_RED_G; i++)
                        if (i < ng && k0 + 32u * (uint32_t)u < h8)
                            moe_fma8(A->y_kind, va[u][i], none, 1.0f, acc[u]);
            }
#pragma unroll
            for (int u = 0; u < HT_RED_U; u++) {
                const uint32_t v = k0 + 32u * (uint32_t)u;
                if (v < h8)
                    moe_store8((char *)A->out + ((int64_t)t * A->out_stride + (int64_t)v * 8) * 2, A->out_kind,
                               acc[u]);
            }
        }
        mask = nmask;
        pos0 = npos0;
        pos1 = npos1;
    }
    if (A->w_cols)
        ht_weights_tail_warp(A, w, nw, fused, 0, 0);
}

/* The rows of token t's sources for a warp reducer: lane l gets source l's
 * (and l + 32's) row address, after the acquire of its chunk flag; the warp
 * barrier extends each lane's acquire to the others' loads of that row. */
SYMM__DEVICE_INTERNAL uint64_t ht_token_rows(const symm__moe_kargs_t *A, uint64_t e, uint64_t t, int fused,
                                             uint64_t *src0, uint64_t *src1) {
    const uint32_t lane = symm__lane(), n = (uint32_t)A->n, me = (uint32_t)A->me, nch = ht_nchunks(A);
    const uint64_t rb = (uint64_t)A->hidden * 2u, ystride = (uint64_t)A->y_stride[1] * 2u;
    const uint64_t mask = MOE_U64(A, ht_mask)[t];
    *src0 = *src1 = 0;
    for (uint32_t r = lane; r < n; r += 32u) {
        uint64_t a = 0;
        if ((mask >> r) & 1u) {
            const uint32_t pos = MOE_U32(A, ht_pos)[t * n + r];
            if (fused && r == me) {
                a = (uint64_t)(uintptr_t)A->y + ((uint64_t)MOE_U32(A, ht_roff)[me] + pos) * ystride;
            } else {
                ht_wait_lazy(A, MOE_U64(A, ht_cflag) + (uint64_t)r * nch + pos / SYMM__MOE_HT_CHUNK, e, (int)r);
                a = (uint64_t)(uintptr_t)(MOE_AT(A, ht_cbuf) + ((uint64_t)r * A->max_tokens + pos) * rb);
            }
        }
        if (r < 32u)
            *src0 = a;
        else
            *src1 = a;
    }
    symm__warp_sync();
    return mask;
}

/* Warp reducer with its loads through shared memory (cp.async): the same
 * sums as ht_combine_recv_warps, but an item (a token's slice of 32 x
 * HT_RED_U vectors from up to HT_RED_G sources) is copied HT_AS_STAGES - 1
 * items ahead of the one summed, so a warp keeps that many items in flight
 * without registers to hold them. `ring`: this warp's
 * [HT_AS_STAGES][HT_RED_G][HT_RED_U][32] vectors; every lane reads back only
 * what it copied itself. */
SYMM__DEVICE_INTERNAL void ht_combine_recv_async(const symm__moe_kargs_t *A, uint64_t e, uint32_t w, uint32_t nw,
                                                 int fused, symm__v4_t *ring) {
    const uint32_t lane = symm__lane(), h8 = A->hidden / 8u, slice = 32u * HT_RED_U;
    const uint64_t m = A->num_tokens;
    /* the copying cursor: token ti, slice kbi, sources mmi still to copy there */
    uint64_t ti = w, mmi = 0, maski = 0, src0 = 0, src1 = 0;
    uint32_t kbi = 0, si = 0;
    /* the summing cursor */
    uint64_t tc = w, mmc = 0, maskc = 0, maskn = 0; /* maskn: the mask of token tc + nw, loaded early */
    uint32_t kbc = 0, sc = 0;
    float acc[HT_RED_U][8];
    if (ti < m)
        mmi = maski = ht_token_rows(A, e, ti, fused, &src0, &src1);
    if (tc < m)
        mmc = maskc = MOE_U64(A, ht_mask)[tc];
    if (tc + nw < m)
        maskn = MOE_U64(A, ht_mask)[tc + nw];
#pragma unroll
    for (int u = 0; u < HT_RED_U; u++)
#pragma unroll
        for (int k = 0; k < 8; k++)
            acc[u][k] = 0.0f;
    for (uint32_t k = 0;; k++) {
        /* copy the next item into stage si (an empty group past the last token) */
        if (ti < m) {
#pragma unroll
            for (int i = 0; i < HT_RED_G; i++) {
                if (mmi) {
                    const uint32_t r = (uint32_t)(__ffsll((long long)mmi) - 1);
                    const char *src = (const char *)(uintptr_t)__shfl_sync(MOE_FULL, r < 32u ? src0 : src1, r & 31u);
                    mmi &= mmi - 1;
#pragma unroll
                    for (int u = 0; u < HT_RED_U; u++) {
                        const uint32_t v = kbi + lane + 32u * (uint32_t)u;
                        if (v < h8)
                            symm__cp_async16(&ring[((si * HT_RED_G + i) * HT_RED_U + u) * 32u + lane],
                                             src + (uint64_t)v * 16u);
                    }
                }
            }
            if (mmi == 0) { /* the slice's last group: on to the next slice or token */
                kbi += slice;
                if (kbi >= h8) {
                    kbi = 0;
                    ti += nw;
                    if (ti < m)
                        maski = ht_token_rows(A, e, ti, fused, &src0, &src1);
                }
                mmi = maski;
            }
        }
        symm__cp_async_commit();
        si = si + 1 == HT_AS_STAGES ? 0 : si + 1;
        if (k + 1 < HT_AS_STAGES)
            continue; /* filling the pipeline */
        if (tc >= m)
            break;
        /* sum the oldest item, stage sc */
        symm__cp_async_wait(HT_AS_STAGES - 1);
        {
            symm__v4_t none = {0, 0, 0, 0};
#pragma unroll
            for (int i = 0; i < HT_RED_G; i++) {
                if (mmc) {
                    mmc &= mmc - 1;
#pragma unroll
                    for (int u = 0; u < HT_RED_U; u++)
                        if (kbc + lane + 32u * (uint32_t)u < h8)
                            moe_fma8(A->y_kind, symm__cld16(&ring[((sc * HT_RED_G + i) * HT_RED_U + u) * 32u + lane], 0),
                                     none, 1.0f, acc[u]);
                }
            }
        }
        sc = sc + 1 == HT_AS_STAGES ? 0 : sc + 1;
        if (mmc == 0) { /* the slice is summed: store it, then the next slice or token */
            if (ht_slice_done(A, &tc, &kbc, slice, nw, lane, h8, acc)) {
                maskc = maskn;
                maskn = tc + nw < m ? MOE_U64(A, ht_mask)[tc + nw] : 0;
            }
            mmc = maskc;
        }
    }
    symm__cp_async_wait(0);
    if (A->w_cols)
        ht_weights_tail_warp(A, w, nw, fused, 0, 0);
}

/* Both halves, overlapped in every block (SYMM__MOE_HT_OVERLAP): warps [0, S)
 * send, the others reduce as rows arrive. Under a small SM budget serial runs
 * the two one after the other, each with only one half's bytes in flight per
 * SM; here both are in flight at once on every SM. SYMM__MOE_HT_SERIAL_WARPS:
 * every warp sends, then every warp reduces by tokens. A kernel of its own,
 * so its register allocation is not the other schedules'.
 * Why: at 24 SMs (2 PEs, DeepEP's shape) an SM moves 12.2 MB per combine, 7.4 per dispatch; 300 us
 * needs ~41 KB in flight at ~1 us all the time (Little's law), which serial has only inside its passes. */
template <int SCHED>
__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ht_combine_ws(const __grid_constant__ symm__moe_kargs_t a) {
    const symm__moe_kargs_t *A = &a;
    const uint64_t e = moe_begin(A, 0);
    const uint32_t B = gridDim.x, b = blockIdx.x, tid = symm__block_tid(), warp = tid >> 5, S = A->ht_send_warps;
    /* SYMM__MOE_HT_OVERLAP_ASYNC: HT_AS_RING per reducing warp; _RING: HT_SR_THREAD per sending thread */
    extern __shared__ symm__v4_t ht_ring[];
    if (SCHED == SYMM__MOE_HT_SERIAL_WARPS) { /* serial's order, the warp reducers */
        const ht_group_t all = {tid, SYMM__MOE_THREADS, 0u};
        MOE_TRACE_HALF(A, SYMM_TRACE_COLL_MOE_HT_COMBINE, ht_combine_send<HT_UNROLL>(A, e, b, B, 1, all));
        MOE_TRACE_HALF(A, SYMM_TRACE_COLL_MOE_HT_COMBINE_RECV,
                       ht_combine_recv_warps(A, e, warp * B + b, SYMM__MOE_WARPS * B, 1); symm__block_sync());
    } else if (warp < S && SCHED == SYMM__MOE_HT_OVERLAP_RING) {
        const ht_group_t g = {tid, S * 32u, 1u};
        MOE_TRACE_HALF(A, SYMM_TRACE_COLL_MOE_HT_COMBINE,
                       ht_combine_send<HT_SR_U>(A, e, b, B, 1, g, ht_ring));
    } else if (warp < S) {
        const ht_group_t g = {tid, S * 32u, 1u};
        MOE_TRACE_HALF(A, SYMM_TRACE_COLL_MOE_HT_COMBINE, ht_combine_send<HT_SEND_U_WS>(A, e, b, B, 1, g));
    } else {
        /* traced builds: the reducing warps' half as one slice per block, like MOE_TRACE_HALF's */
#if SYMM__TRACE_ON
        __shared__ uint64_t tr_;
        if (tid == S * 32u)
            tr_ = symm__trace_start(&A->ctx, SYMM__G_BLOCK);
#endif
        if (SCHED == SYMM__MOE_HT_OVERLAP_ASYNC)
            ht_combine_recv_async(A, e, (warp - S) * B + b, (SYMM__MOE_WARPS - S) * B, 1,
                                  ht_ring + (size_t)(warp - S) * HT_AS_RING);
        else
            ht_combine_recv_warps(A, e, (warp - S) * B + b, (SYMM__MOE_WARPS - S) * B, 1);
#if SYMM__TRACE_ON
        symm__group_sync(2u, (SYMM__MOE_WARPS - S) * 32u);
        if (tid == S * 32u)
            SYMM__TRACE_COLL(&A->ctx, tr_, SYMM_TRACE_COLL_MOE_HT_COMBINE_RECV, SYMM_COLL_ALGO_AUTO,
                             SYMM_TRACE_F_STREAM, 0);
#endif
    }
}

/* ---- combine, pull schedule (SYMM__MOE_HT_PULL) ------------------------------------------ */
/*
 * Each PE's reducers load their tokens' rows from the PEs that hold them, in
 * place in those PEs' y, instead of every PE pushing its rows back first: a row
 * crosses the link once and its bytes are stored once (in the sum), where the
 * push schedules store it remotely, then load it again. Combine e:
 *   start   every PE r posts every PE s where s's rows lie in r's y: ht_phdr[r]
 *           at s, released as epoch << 32 | 1 (y written by the kernels before
 *           this one on r's stream is what s reads). A PE whose y is not in the
 *           heap, or that runs the halves as two kernels, posts | 2 instead and
 *           pushes its rows into ht_cbuf with chunk flags, as overlap does.
 *   reduce  warp w of nw: tokens w, w + nw, ...; per token, slice by slice of
 *           SYMM__MOE_HT_PULL_SLICE vectors, each source in PE order: one bulk
 *           copy of the slice into a stage of the warp's ring (S stages in
 *           flight), summed from there in float32.
 *   values  (side channel) rows read in place still have their values pushed:
 *           each reducing warp first stores the chunks that fall to it into
 *           ht_cwbuf at their sources, each behind a release of the chunk's
 *           ht_cflag; the reducers acquire those flags in their values' pass.
 *   end     the block that finishes last tells every PE it is done reading
 *           (ht_pdone[me] = e there); a PE whose y was read in place waits for
 *           every PE's word before its kernel ends, so y may be reused after the
 *           call as after the other schedules.
 * Reuse: r's ht_phdr at s is written again by r's combine e + 1, after r's
 * dispatch e + 1 waited for s's count row of e + 1, which s posts after its
 * combine e read it. ht_pdone only grows.
 */

static_assert(SYMM__MOE_HT_PULL_SLICE == 32 * HT_RED_U, "a pull stage is HT_RED_U vectors per lane");

/* Rows of y that PE s's rows fill here: from its first row, at most the rows received and y has. */
SYMM__DEVICE_INTERNAL uint32_t ht_pull_rows(const symm__moe_kargs_t *A, uint32_t s) {
    const uint32_t *roff = MOE_U32(A, ht_roff);
    const uint64_t got = (uint64_t)MOE_I32(A, ht_rnum)[0], rows = got < A->y_rows ? got : A->y_rows;
    const uint64_t at = roff[s], cnt = roff[(uint32_t)A->n + s];
    return at >= rows ? 0u : (uint32_t)(cnt < rows - at ? cnt : rows - at);
}

/* Post PE s where its rows are (or that they come pushed). */
SYMM__DEVICE_INTERNAL void ht_pull_post(const symm__moe_kargs_t *A, uint64_t e, uint32_t s) {
    uint64_t *h = (uint64_t *)moe_peer(A, MOE_U64(A, ht_phdr) + (uint64_t)A->me * 4u, (int)s);
    if (A->ht_pull_y) {
        const uint64_t ystride = (uint64_t)A->y_stride[1] * 2u;
        const uint64_t got = (uint64_t)MOE_I32(A, ht_rnum)[0];
        if (s == 0 && got > A->y_rows)
            moe_error(A, SYMM__MOE_ERR_Y_ROWS, (int64_t)got, (int64_t)A->y_rows, 0);
        symm__st_b64(h, (uint64_t)(uintptr_t)A->y + (uint64_t)MOE_U32(A, ht_roff)[s] * ystride - A->base,
                     SYMM_SEM_WEAK, SYMM_SCOPE_SYS);
        symm__st_b64(h + 1, ystride, SYMM_SEM_WEAK, SYMM_SCOPE_SYS);
        symm__st_b64(h + 2, ht_pull_rows(A, s), SYMM_SEM_WEAK, SYMM_SCOPE_SYS);
    }
    moe_release(A, MOE_U64(A, ht_phdr) + (uint64_t)A->me * 4u + 3u, TAG(e, A->ht_pull_y ? 1u : 2u), (int)s);
}

/* A reducer lane's view of one source PE: its rows' base and stride when
 * read in place (inplace), else they come to ht_cbuf; rows: how many exist. */
typedef struct ht_psrc {
    uint64_t base, stride;
    uint32_t rows, inplace;
} ht_psrc_t;

SYMM__DEVICE_INTERNAL ht_psrc_t ht_pull_source(const symm__moe_kargs_t *A, uint64_t e, uint32_t r, int fused) {
    ht_psrc_t s = {0, 0, 0, 0};
    const uint64_t *h = MOE_U64(A, ht_phdr) + (uint64_t)r * 4u;
    if (fused && r == (uint32_t)A->me) { /* my own rows: in my y (aligned: the host split the halves otherwise) */
        s.stride = (uint64_t)A->y_stride[1] * 2u;
        s.base = (uint64_t)(uintptr_t)A->y + (uint64_t)MOE_U32(A, ht_roff)[r] * s.stride;
        s.rows = ht_pull_rows(A, r);
        s.inplace = 1;
        return s;
    }
    ht_wait_lazy(A, h + 3, TAG(e, 0), (int)r);
    if ((uint32_t)symm__ld_b64(h + 3, SYMM_SEM_RELAXED, SYMM_SCOPE_SYS) == 1u) {
        s.base = (uint64_t)(uintptr_t)moe_peer(
            A, (const void *)(uintptr_t)(A->base + symm__ld_b64(h, SYMM_SEM_RELAXED, SYMM_SCOPE_SYS)), (int)r);
        s.stride = symm__ld_b64(h + 1, SYMM_SEM_RELAXED, SYMM_SCOPE_SYS);
        s.rows = (uint32_t)symm__ld_b64(h + 2, SYMM_SEM_RELAXED, SYMM_SCOPE_SYS);
        s.inplace = 1;
    }
    return s;
}

/* The address of my row at position pos among the tokens I sent source r: in
 * r's y, or in ht_cbuf once its chunk flag says it is there; 0 for a row y
 * does not have (an error the holder reported). */
SYMM__DEVICE_INTERNAL uint64_t ht_pull_row(const symm__moe_kargs_t *A, uint64_t e, uint32_t r, uint32_t pos,
                                           const ht_psrc_t *s) {
    if (s->inplace)
        return pos < s->rows ? s->base + (uint64_t)pos * s->stride : 0u;
    ht_wait_lazy(A, MOE_U64(A, ht_cflag) + (uint64_t)r * ht_nchunks(A) + pos / SYMM__MOE_HT_CHUNK, e, (int)r);
    return (uint64_t)(uintptr_t)(MOE_AT(A, ht_cbuf) + ((uint64_t)r * A->max_tokens + pos) * A->hidden * 2u);
}

/* Lane l: the rows of sources l and l + 32 for token t (mask: its PEs; p0, p1:
 * its positions there). The warp barrier extends each lane's acquires to the
 * copies lane 0 issues, and a proxy fence to the copy engine where a row came
 * pushed (its chunk flag acquired here; rows read in place were acquired with
 * the headers). One fence per such token, not per copy: a fence may wait
 * for the lane's stores in flight. */
SYMM__DEVICE_INTERNAL void ht_pull_token(const symm__moe_kargs_t *A, uint64_t e, uint64_t mask, uint32_t p0,
                                         uint32_t p1, const ht_psrc_t *s0, const ht_psrc_t *s1, uint64_t *a0,
                                         uint64_t *a1) {
    const uint32_t lane = symm__lane(), n = (uint32_t)A->n;
    *a0 = lane < n && ((mask >> lane) & 1u) ? ht_pull_row(A, e, lane, p0, s0) : 0u;
    *a1 = lane + 32u < n && ((mask >> (lane + 32u)) & 1u) ? ht_pull_row(A, e, lane + 32u, p1, s1) : 0u;
    const uint32_t pushed = __ballot_sync(MOE_FULL, (*a0 != 0u && !s0->inplace) || (*a1 != 0u && !s1->inplace));
    symm__warp_sync();
    if (pushed != 0u && lane == 0)
        symm__fence_proxy_async();
}

/* Does this GPU take bulk copies (sm_90+)? Else, or with `lanes`
 * (pull-lanes), each lane copies its own vectors by cp.async. */
SYMM__DEVICE_INTERNAL int ht_pull_bulk(uint32_t lanes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    return !lanes;
#else
    (void)lanes;
    return 0;
#endif
}

/* Copy vectors [kb, kb + SLICE) of the row at `src` into `stage`: one bulk
 * copy by lane 0 completing `bar` (the warp barrier after the stage's last
 * reads orders them before it, as a pipeline's empty barrier would); or each
 * lane its own vectors by cp.async, one group per stage (the caller commits
 * it). */
SYMM__DEVICE_INTERNAL void ht_pull_issue(symm__v4_t *stage, uint64_t *bar, uint64_t src, uint32_t kb, uint32_t h8,
                                         int bulk) {
    const uint32_t lane = symm__lane(), nv = h8 - kb < SYMM__MOE_HT_PULL_SLICE ? h8 - kb : SYMM__MOE_HT_PULL_SLICE;
    if (bulk) {
        if (lane == 0)
            symm__bulk_load(stage, (const char *)(uintptr_t)src + (uint64_t)kb * 16u, nv * 16u, bar);
        return;
    }
    for (uint32_t v = lane; v < nv; v += 32u)
        symm__cp_async16(&stage[v], (const char *)(uintptr_t)src + (uint64_t)(kb + v) * 16u);
}

/* Wait for the copy into a stage: `parity` its barrier's phase (bulk), or
 * `pending` later groups of this lane left in flight (cp.async; waiting for
 * more than asked is only slower). */
SYMM__DEVICE_INTERNAL void ht_pull_wait(uint64_t *bar, uint32_t parity, uint32_t pending, int bulk) {
    if (bulk) {
        while (!symm__mbar_try_wait(bar, parity)) { /* a local copy: it completes with no peer's help */
        }
        return;
    }
    symm__cp_async_wait(pending > 3u ? 3 : (int)pending);
}

/* Pull with the side channel, y read in place: the values of my rows still
 * go to their sources, chunk by chunk behind the chunk's flag, as the push
 * schedules send them (their reducers wait for those flags in their values'
 * pass only). Items (source, chunk) are numbered source by source from me +
 * 1 on, from each source's count of chunks (lane i: source me + 1 + i's, and
 * i + 32's), so a warp finds its items by a ballot over prefix sums instead
 * of walking every chunk. Item k goes to warp nw - 1 - k % nw: where the
 * warps do not divide the tokens, the last ones have a token fewer. A warp
 * copies an item's values (two 16-byte vectors per lane loaded before any is
 * stored, for 32 rows of 8), then its lane 0 releases the chunk's flag. Out
 * of line: the reduce loop keeps its registers. */
SYMM__NOINLINE void ht_pull_push_weights(const symm__moe_kargs_t *A, uint64_t e, uint32_t w, uint32_t nw) {
    const uint32_t lane = symm__lane(), n = (uint32_t)A->n, me = (uint32_t)A->me, nch = ht_nchunks(A);
    const uint32_t *roff = MOE_U32(A, ht_roff);
    const uint64_t got = (uint64_t)MOE_I32(A, ht_rnum)[0], rows = got < A->y_rows ? got : A->y_rows;
    uint32_t nc[2] = {0u, 0u}, pre[2] = {0u, 0u}, total = 0;
#pragma unroll
    for (uint32_t h = 0; h < 2u; h++) {
        if (h == 1u && n <= 33u)
            break; /* no source past lane 31 */
        const uint32_t i = lane + 32u * h, s = me + 1u + i < n ? me + 1u + i : me + 1u + i - n;
        uint32_t x;
        nc[h] = i + 1u < n ? (roff[n + s] + SYMM__MOE_HT_CHUNK - 1) / SYMM__MOE_HT_CHUNK : 0u;
        x = nc[h];
        for (uint32_t d = 1; d < 32u; d <<= 1) { /* inclusive prefix over the lanes */
            const uint32_t y = __shfl_up_sync(MOE_FULL, x, d);
            x += lane >= d ? y : 0u;
        }
        pre[h] = total + x - nc[h];
        total += __shfl_sync(MOE_FULL, x, 31);
    }
    for (uint32_t k = nw - 1u - w; k < total; k += nw) {
        uint32_t h = 0, hit = __ballot_sync(MOE_FULL, k - pre[0] < nc[0]);
        if (hit == 0u) {
            h = 1;
            hit = __ballot_sync(MOE_FULL, k - pre[1] < nc[1]);
        }
        const uint32_t l = (uint32_t)__ffs((int)hit) - 1u, i = l + 32u * h;
        const uint32_t c = k - __shfl_sync(MOE_FULL, h ? pre[1] : pre[0], l);
        const uint32_t s = me + 1u + i < n ? me + 1u + i : me + 1u + i - n, cnt = roff[n + s];
        const uint64_t j0 = (uint64_t)roff[s] + (uint64_t)c * SYMM__MOE_HT_CHUNK;
        const uint64_t nr = cnt - c * SYMM__MOE_HT_CHUNK < SYMM__MOE_HT_CHUNK ? cnt - c * SYMM__MOE_HT_CHUNK
                                                                            : SYMM__MOE_HT_CHUNK;
        const uint32_t lim = (uint32_t)(j0 < rows ? (rows - j0 < nr ? rows - j0 : nr) : 0), nv = lim * A->w_cols;
        const float *src = A->w + (int64_t)j0 * A->w_stride;
        char *dst = ht_cw_dst(A, s, c);
        if (ht_cw_vec(A, src, dst, nv)) {
            for (uint32_t q = lane; q < nv / 4u; q += 64u) {
                const int two = q + 32u < nv / 4u;
                const symm__v4_t v0 = symm__cld16((const char *)src + 16u * q, 0);
                symm__v4_t v1 = {0, 0, 0, 0};
                if (two)
                    v1 = symm__cld16((const char *)src + 16u * (q + 32u), 0);
                symm__cst16(dst + 16u * q, v0, 1);
                if (two)
                    symm__cst16(dst + 16u * (q + 32u), v1, 1);
            }
        } else {
            ht_send_chunk_weights_any(A, src, dst, nv, lane, 32u);
        }
        symm__warp_sync();
        if (lane == 0)
            symm__st_b64(moe_peer(A, MOE_U64(A, ht_cflag) + (uint64_t)me * nch + c, (int)s), e, SYMM_SEM_RELEASE,
                         SYMM_SCOPE_SYS);
    }
}

/* Warp reducer of the pull schedule: warp w of nw; `ring` its S stages of
 * SYMM__MOE_HT_PULL_SLICE vectors, `bars` their S barriers (initialised).
 * The copying cursor runs up to S items (token, slice, source) ahead of the
 * summing one; both walk the same sequence, a slice of a token sent nowhere
 * being one item with no copy (its sum is 0). Sums in PE order, as
 * ht_combine_recv_warps: the same bits. */
SYMM__DEVICE_INTERNAL void ht_pull_reduce(const symm__moe_kargs_t *A, uint64_t e, uint32_t w, uint32_t nw, int fused,
                                          symm__v4_t *ring, uint64_t *bars, uint32_t S) {
    const uint32_t lane = symm__lane(), n = (uint32_t)A->n, h8 = A->hidden / 8u, SL = SYMM__MOE_HT_PULL_SLICE;
    const uint64_t m = A->num_tokens;
    const uint64_t *hmask = MOE_U64(A, ht_mask);
    const uint32_t *hpos = MOE_U32(A, ht_pos);
    const int bulk = ht_pull_bulk(A->ht_pull_lanes);
    ht_psrc_t s0 = {0, 0, 0, 0}, s1 = {0, 0, 0, 0};
    uint64_t ti = w, tc = w, tn = (uint64_t)w + nw, maski, maskc, mmi, mmc, nmask, a0 = 0, a1 = 0;
    uint32_t kbi = 0, kbc = 0, si = 0, sc = 0, inflight = 0, vmask = 0, ph = 0, np0, np1;
    float acc[HT_RED_U][8];
    if (A->w_cols && A->ht_pull_y && n > 1u) /* my rows are read in place: their values are pushed */
        ht_pull_push_weights(A, e, w, nw);
    if (w >= m)
        return;
    if (lane < n)
        s0 = ht_pull_source(A, e, lane, fused);
    if (lane + 32u < n)
        s1 = ht_pull_source(A, e, lane + 32u, fused);
    symm__warp_sync();
    if (lane == 0) /* the rows read in place were released with the headers the warp just acquired */
        symm__fence_proxy_async();
    maski = maskc = mmi = mmc = hmask[ti];
    ht_pull_token(A, e, maski, lane < n ? hpos[ti * n + lane] : 0u, lane + 32u < n ? hpos[ti * n + lane + 32u] : 0u,
                  &s0, &s1, &a0, &a1);
    /* the next token's mask and positions, loaded while this one is copied */
    nmask = tn < m ? hmask[tn] : 0u;
    np0 = tn < m && lane < n ? hpos[tn * n + lane] : 0u;
    np1 = tn < m && lane + 32u < n ? hpos[tn * n + lane + 32u] : 0u;
#pragma unroll
    for (int u = 0; u < HT_RED_U; u++)
#pragma unroll
        for (int k = 0; k < 8; k++)
            acc[u][k] = 0.0f;
    for (;;) {
        while (inflight < S && ti < m) {
            uint64_t src = 0;
            if (mmi) {
                const uint32_t r = (uint32_t)(__ffsll((long long)mmi) - 1);
                mmi &= mmi - 1;
                src = __shfl_sync(MOE_FULL, r < 32u ? a0 : a1, r & 31u);
            }
            if (src != 0) {
                ht_pull_issue(ring + (size_t)si * SL, &bars[si], src, kbi, h8, bulk);
                vmask |= 1u << si;
            } else {
                vmask &= ~(1u << si);
            }
            if (!bulk)
                symm__cp_async_commit(); /* one group per stage, empty or not */
            if (mmi == 0) { /* the slice's last source: on to the next slice or token */
                kbi += SL;
                if (kbi >= h8) {
                    kbi = 0;
                    ti = tn;
                    tn += nw;
                    if (ti < m) {
                        maski = nmask;
                        ht_pull_token(A, e, maski, np0, np1, &s0, &s1, &a0, &a1);
                        nmask = tn < m ? hmask[tn] : 0u;
                        np0 = tn < m && lane < n ? hpos[tn * n + lane] : 0u;
                        np1 = tn < m && lane + 32u < n ? hpos[tn * n + lane + 32u] : 0u;
                    }
                }
                mmi = maski;
            }
            si = si + 1 == S ? 0 : si + 1;
            inflight++;
        }
        if (inflight == 0)
            break;
        /* sum the oldest item, stage sc */
        if (mmc) {
            mmc &= mmc - 1;
            if ((vmask >> sc) & 1u) {
                const symm__v4_t *st = ring + (size_t)sc * SL, none = {0, 0, 0, 0};
                ht_pull_wait(&bars[sc], (ph >> sc) & 1u, inflight - 1u, bulk);
                ph ^= 1u << sc;
#pragma unroll
                for (int u = 0; u < HT_RED_U; u++) {
                    const uint32_t v = lane + 32u * (uint32_t)u;
                    if (kbc + v < h8)
                        moe_fma8(A->y_kind, st[v], none, 1.0f, acc[u]);
                }
            }
        }
        if (mmc == 0) { /* the slice is summed: store it, then the next slice or token */
            if (ht_slice_done(A, &tc, &kbc, SL, nw, lane, h8, acc))
                maskc = tc < m ? hmask[tc] : 0u;
            mmc = maskc;
        }
        symm__warp_sync(); /* every lane has read stage sc before it is copied into again */
        sc = sc + 1 == S ? 0 : sc + 1;
        inflight--;
    }
    if (A->w_cols) /* the values of rows read in place come behind chunk flags of their own: wait for them */
        ht_weights_tail_warp(A, w, nw, fused, e, 1);
}

/* The pull schedule's kernel, for both halves or either (a handle's PEs all
 * pull, so even a PE that runs the halves apart speaks its protocol). Both:
 * every warp reduces when y is read in place, else the first
 * ht_send_warps push as in overlap; send half: every warp pushes; receive
 * half: every warp reduces. */
__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ht_combine_pull(const __grid_constant__ symm__moe_kargs_t a) {
    const symm__moe_kargs_t *A = &a;
    const uint64_t e = moe_begin(A, 0);
    const uint32_t B = gridDim.x, b = blockIdx.x, tid = symm__block_tid(), warp = tid >> 5, lane = tid & 31u;
    const uint32_t n = (uint32_t)A->n, me = (uint32_t)A->me, S = A->ht_pull_stages;
    const int send = (A->flags & SYMM_MOE_SEND) != 0, recv = (A->flags & SYMM_MOE_RECV) != 0, fused = send && recv;
    const uint32_t nsend = !send ? 0u : !recv ? (uint32_t)SYMM__MOE_WARPS : A->ht_pull_y ? 0u : A->ht_send_warps;
    extern __shared__ symm__v4_t ht_ring[]; /* [warps][S][SYMM__MOE_HT_PULL_SLICE] */
    __shared__ uint64_t bars[SYMM__MOE_WARPS][SYMM__MOE_HT_PULL_MAX_STAGES];
    __shared__ uint32_t last;
    if (send && b == 0 && tid < n)
        ht_pull_post(A, e, tid);
    if (warp < nsend) {
        const ht_group_t g = {tid, nsend * 32u, nsend == SYMM__MOE_WARPS ? 0u : 1u};
        ht_combine_send<HT_UNROLL>(A, e, b, B, fused, g); /* the fallback: fewer registers than overlap's */
    } else if (recv) {
        if (lane < S)
            symm__mbar_init(&bars[warp][lane], 1u);
        symm__warp_sync();
        ht_pull_reduce(A, e, (warp - nsend) * B + b, (SYMM__MOE_WARPS - nsend) * B, fused,
                       ht_ring + (size_t)warp * S * SYMM__MOE_HT_PULL_SLICE, bars[warp], S);
    }
    if (!recv)
        return;
    /* the last block: every block's reads are done; tell the PEs whose rows they read */
    symm__block_sync();
    if (tid == 0) {
        symm__moe_state_t *st = moe_state(A);
        __threadfence();
        last = atomicAdd(&st->done[SYMM__MK_HT_COMBINE], 1u) == B - 1;
        if (last)
            atomicExch(&st->done[SYMM__MK_HT_COMBINE], 0u);
    }
    symm__block_sync();
    if (!last || tid >= n)
        return;
    symm__fence_acq_rel_sys();
    moe_release(A, MOE_U64(A, ht_pdone) + me, e, (int)tid);
    if (A->ht_pull_y) /* my y was read in place: it stays until every PE is done with it */
        moe_wait(A, MOE_U64(A, ht_pdone) + tid, e, (int)tid);
}

__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ht_combine(const __grid_constant__ symm__moe_kargs_t a) {
    const symm__moe_kargs_t *A = &a;
    const uint64_t e = moe_begin(A, 0);
    const uint32_t B = gridDim.x, b = blockIdx.x;
    const ht_group_t all = {symm__block_tid(), SYMM__MOE_THREADS, 0u};
    if (A->flags == SYMM_MOE_SEND_RECV) {
        if (B == 1 || A->ht_sched == SYMM__MOE_HT_SERIAL) {
            MOE_TRACE_HALF(A, SYMM_TRACE_COLL_MOE_HT_COMBINE, ht_combine_send<HT_UNROLL>(A, e, b, B, 1, all));
            MOE_TRACE_HALF(A, SYMM_TRACE_COLL_MOE_HT_COMBINE_RECV, ht_combine_recv(A, e, b, B, 1));
        } else if (b < B / 2) {
            MOE_TRACE_HALF(A, SYMM_TRACE_COLL_MOE_HT_COMBINE, ht_combine_send<HT_UNROLL>(A, e, b, B / 2, 1, all));
        } else {
            MOE_TRACE_HALF(A, SYMM_TRACE_COLL_MOE_HT_COMBINE_RECV, ht_combine_recv(A, e, b - B / 2, B - B / 2, 1));
        }
    } else if (A->flags & SYMM_MOE_SEND) {
        MOE_TRACE_HALF(A, SYMM_TRACE_COLL_MOE_HT_COMBINE, ht_combine_send<HT_UNROLL>(A, e, b, B, 0, all));
    } else {
        MOE_TRACE_HALF(A, SYMM_TRACE_COLL_MOE_HT_COMBINE_RECV, ht_combine_recv(A, e, b, B, 0));
    }
}

/* Shared memory of the overlap-async kernel (a ring per reducing warp) and
 * of the overlap-ring kernel (a ring per sending thread). */
static size_t ht_async_smem(uint32_t sched, uint32_t send_warps) {
    if (sched == SYMM__MOE_HT_OVERLAP_RING)
        return (size_t)send_warps * 32u * HT_SR_THREAD * sizeof(symm__v4_t);
    return (size_t)(SYMM__MOE_WARPS - send_warps) * HT_AS_RING * sizeof(symm__v4_t);
}

/* Shared memory of the pull kernel: S stages of a slice per warp. */
static size_t ht_pull_smem(uint32_t stages) {
    return (size_t)SYMM__MOE_WARPS * stages * SYMM__MOE_HT_PULL_SLICE * sizeof(symm__v4_t);
}

extern "C" int symm__moe_ht_pull_prepare(int stages) {
    int dev = 0, most = 0;
    cudaFuncAttributes fa;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
        cudaFuncGetAttributes(&fa, symm__k_ht_combine_pull) != cudaSuccess) {
        (void)cudaGetLastError();
        return 1;
    }
    while (stages > 1 && ht_pull_smem((uint32_t)stages) + fa.sharedSizeBytes > (size_t)most)
        stages--;
    if (cudaFuncSetAttribute(symm__k_ht_combine_pull, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)ht_pull_smem((uint32_t)stages)) != cudaSuccess) {
        (void)cudaGetLastError();
        return 1;
    }
    return stages;
}

extern "C" int symm__moe_ht_async_prepare(int sched, int send_warps) {
    const size_t smem = ht_async_smem((uint32_t)sched, (uint32_t)send_warps);
    int dev = 0, most = 0;
    if (cudaGetDevice(&dev) == cudaSuccess &&
        cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) == cudaSuccess &&
        smem <= (size_t)most &&
        cudaFuncSetAttribute(sched == SYMM__MOE_HT_OVERLAP_RING ? symm__k_ht_combine_ws<SYMM__MOE_HT_OVERLAP_RING>
                                                                : symm__k_ht_combine_ws<SYMM__MOE_HT_OVERLAP_ASYNC>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) == cudaSuccess)
        return 1;
    (void)cudaGetLastError();
    return 0;
}

symm_status_t symm__moe_launch_ht(const symm__moe_kargs_t *a, cudaStream_t s) {
    switch (a->kernel) {
    case SYMM__MK_HT_LAYOUT:
        symm__k_ht_layout<<<1, SYMM__MOE_THREADS, a->experts * sizeof(uint32_t), s>>>(*a);
        return symm__moe_launched("the MoE layout kernel");
    case SYMM__MK_HT_DISPATCH:
        symm__k_ht_dispatch<<<a->nblocks, SYMM__MOE_THREADS, a->experts * sizeof(uint32_t), s>>>(*a);
        return symm__moe_launched("the MoE high-throughput dispatch kernel");
    default:
        if (a->ht_sched == SYMM__MOE_HT_PULL) {
            symm__k_ht_combine_pull<<<a->nblocks, SYMM__MOE_THREADS,
                                      (a->flags & SYMM_MOE_RECV) ? ht_pull_smem(a->ht_pull_stages) : 0u, s>>>(*a);
        } else if (a->flags == SYMM_MOE_SEND_RECV && a->ht_sched == SYMM__MOE_HT_OVERLAP_ASYNC) {
            symm__k_ht_combine_ws<SYMM__MOE_HT_OVERLAP_ASYNC>
                <<<a->nblocks, SYMM__MOE_THREADS, ht_async_smem(a->ht_sched, a->ht_send_warps), s>>>(*a);
        } else if (a->flags == SYMM_MOE_SEND_RECV && a->ht_sched == SYMM__MOE_HT_OVERLAP_RING) {
            symm__k_ht_combine_ws<SYMM__MOE_HT_OVERLAP_RING>
                <<<a->nblocks, SYMM__MOE_THREADS, ht_async_smem(a->ht_sched, a->ht_send_warps), s>>>(*a);
        } else if (a->flags == SYMM_MOE_SEND_RECV && a->ht_sched == SYMM__MOE_HT_OVERLAP)
            symm__k_ht_combine_ws<SYMM__MOE_HT_OVERLAP><<<a->nblocks, SYMM__MOE_THREADS, 0, s>>>(*a);
        else if (a->flags == SYMM_MOE_SEND_RECV && a->ht_sched == SYMM__MOE_HT_SERIAL_WARPS)
            symm__k_ht_combine_ws<SYMM__MOE_HT_SERIAL_WARPS><<<a->nblocks, SYMM__MOE_THREADS, 0, s>>>(*a);
        else
            symm__k_ht_combine<<<a->nblocks, SYMM__MOE_THREADS, 0, s>>>(*a);
        return symm__moe_launched("the MoE high-throughput combine kernel");
    }
}
