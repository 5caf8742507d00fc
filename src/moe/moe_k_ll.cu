/*
 * moe_k_ll.cu - the low-latency (pplx-layout) MoE kernels: one kernel per
 * dispatch and one per combine (or one per half when the flags split a call).
 * Nothing runs on the host between calls and no kernel waits for another
 * block of its own grid before it has done all of its sending, so a grid no
 * larger than the SMs the PE may fill (the handle's SM budget) cannot stall
 * a peer.
 *
 * Dispatch, epoch e (dispatches so far, kept on the device; p = e & 1):
 *   send  Every block stages the top-k indices of this PE's tokens (t =
 *         dp_rank, dp_rank + dp, ... below the bound) in shared memory.
 *         Expert lists: warp w of the grid owns experts w, w + warps, ...;
 *         for each it scans the routes in token order (ballots, so every
 *         route gets the same slot whichever block looks) and stores the
 *         route (t / dp, k) into the expert's PE at ll_list[p][me][l][j],
 *         then releases the count (e << 32 | routes) at ll_cnt[p][me][l]:
 *         list and count travel together, one release per expert.
 *         Token rows: block b owns tokens b, b + blocks, ...; it stores each
 *         token once into every PE that holds one of its experts (not once
 *         per expert), into ll_dbuf[p][me][t / dp], then releases the row's
 *         flag (e) behind it: a put with signal per (token, PE).
 *   recv  Block b takes (local expert l, source s) items b, b + blocks, ...:
 *         it waits for the counts of l from every source (their prefix is
 *         s's first row of expert l, as pplx orders rows by source), then
 *         for each listed route polls that row's flag and copies the row to
 *         out_expert_x[l][row] and its scales, noting the route for combine.
 * Combine, same epoch:
 *   send  Each received row goes back, weighted by nothing, to every PE of
 *         its token's DP group, into ll_cbuf[t][k], with a release of
 *         ll_cflag[t][k] = e behind it.
 *   recv  Per token: wait for the flags of its valid routes, sum weight x
 *         row in float32 in slot order, store.
 *
 * Why two buffers by parity suffice, with no acknowledgement: PE s writes
 * r's parity-p buffers (counts, lists, rows) in dispatch e and next in
 * dispatch e + 2. In between, s's dispatch e + 1 receive half waited for r's
 * counts of e + 1 (every PE posts a count for every expert, zero included),
 * and r posts those only in its dispatch e + 1 send half, which its stream
 * runs after r's dispatch e receive half finished reading the parity-p
 * buffers. So r is done with them before s can write them again. The
 * combine buffers need only one copy by the same chain: r writes s's ll_cbuf
 * in combine e + 1 after its dispatch e + 1 receive half, which waited for
 * s's counts of e + 1, posted after s's combine e receive half had read them.
 */
#include "moe/moe_kernels.cuh"

#define LL_UNROLL 4
#define LL_BATCH 32  /* most tokens (or rows) a block handles in one step */

/* Route k of a token (its K experts at `row`) valid: an expert in range that
 * no earlier slot of the token names. The same rule everywhere. */
SYMM__DEVICE_INTERNAL int ll_valid(const uint32_t *row, uint32_t k, uint32_t E) {
    const uint32_t ex = row[k];
    if (ex >= E)
        return 0;
    for (uint32_t j = 0; j < k; j++)
        if (row[j] == ex)
            return 0;
    return 1;
}

/* Bytes from a ll_dbuf slot's start to its flag. */
SYMM__DEVICE_INTERNAL uint64_t ll_flag_off(const symm__moe_kargs_t *A) {
    return A->x_bytes + (((uint64_t)A->scale_cols * 4u + 15u) & ~(uint64_t)15u);
}

/* Slot of token tl (t / dp) from source s, parity p, in ll_dbuf. */
SYMM__DEVICE_INTERNAL char *ll_slot(const symm__moe_kargs_t *A, uint32_t p, uint32_t s, uint32_t tl) {
    return MOE_AT(A, ll_dbuf) + (((uint64_t)p * (uint32_t)A->n + s) * A->cap + tl) * A->tok_stride;
}

/* Tokens of a batch so that each thread has a few vectors to move. */
SYMM__DEVICE_INTERNAL uint32_t ll_batch(uint32_t units) {
    uint32_t b = 4096u / (units ? units : 1u);
    return b < 1 ? 1 : (b > LL_BATCH ? LL_BATCH : b);
}

/* ---- dispatch --------------------------------------------------------------------------- */

SYMM__DEVICE_INTERNAL void ll_dispatch_send(const symm__moe_kargs_t *A, uint64_t e) {
    const uint32_t tid = symm__block_tid(), lane = tid & 31u, warp = tid >> 5;
    const uint32_t K = A->topk, L = A->local, E = A->experts, n = (uint32_t)A->n, dp = (uint32_t)A->dp;
    const uint32_t me = (uint32_t)A->me, dpr = me % dp, p = (uint32_t)(e & 1u);
    /* experts are owned from the last block down, tokens from the first block up: with few tokens
     * the lists and the rows leave from different SMs at once */
    const uint32_t B = gridDim.x, GW = B * SYMM__MOE_WARPS, gw = (B - 1 - blockIdx.x) * SYMM__MOE_WARPS + warp;
    const uint32_t per_warp = (E + GW - 1) / GW, ctok = SYMM__MOE_IDX_CHUNK / K;
    const uint64_t bound = moe_bound(A, blockIdx.x == 0 && tid == 0);
    const uint32_t mine = bound > dpr ? (uint32_t)((bound - dpr + dp - 1) / dp) : 0;
    const uint32_t all = A->num_tokens > dpr ? (uint32_t)((A->num_tokens - dpr + dp - 1) / dp) : 0;
    const uint32_t nvx = A->x_bytes / 16u, cols = A->scale_cols, cq = (cols + 3) / 4;
    const uint32_t tb = ll_batch(nvx + cq);
    const uint64_t xrow = (uint64_t)A->x_stride * A->x_esz, foff = ll_flag_off(A);
    const int xal = moe_al16((uint64_t)(uintptr_t)A->x) && moe_al16(xrow);
    const uint32_t lanes_below = (1u << lane) - 1u;
    extern __shared__ uint32_t ecnt[]; /* [warps][per_warp]: running route counts of owned experts */
    __shared__ uint32_t sidx[SYMM__MOE_IDX_CHUNK];
    __shared__ uint64_t smask[LL_BATCH];
    __shared__ uint32_t stok[LL_BATCH];
    for (uint32_t w = lane; w < per_warp; w += 32)
        ecnt[warp * per_warp + w] = 0;
    for (uint32_t c0 = 0;; c0 += ctok) {
        const uint32_t ntok = mine > c0 ? (mine - c0 < ctok ? mine - c0 : ctok) : 0;
        const uint32_t nst = all > c0 ? (all - c0 < ctok ? all - c0 : ctok) : 0; /* >= ntok */
        const int last = c0 + ctok >= mine;
        /* stage the chunk's indices (up to num_tokens: these loads need not wait for bound_m's) */
        symm__block_sync();
        for (uint32_t q = tid; q < nst * K; q += SYMM__MOE_THREADS) {
            const uint64_t t = dpr + (uint64_t)(c0 + q / K) * dp;
            sidx[q] = ((const uint32_t *)A->idx)[t * K + q % K];
        }
        symm__block_sync();
        /* expert lists (and, with the last chunk, their counts) */
        for (uint32_t w = 0; w < per_warp; w++) {
            const uint32_t ex = gw + w * GW, r = ex / L, le = ex % L;
            uint32_t run, *list;
            if (ex >= E)
                break;
            run = ecnt[warp * per_warp + w];
            list = (uint32_t *)moe_peer(A, MOE_AT(A, ll_list) + (((uint64_t)p * n + me) * L + le) * A->cap * 4u,
                                        (int)r);
            for (uint32_t q0 = 0; q0 < ntok * K; q0 += 32) {
                const uint32_t q = q0 + lane;
                const int hit = q < ntok * K && sidx[q] == ex && ll_valid(&sidx[q - q % K], q % K, E);
                const uint32_t ball = __ballot_sync(MOE_FULL, hit);
                if (hit)
                    moe_put32(list + run + __popc(ball & lanes_below), ((c0 + q / K) << 8) | (q % K));
                run += (uint32_t)__popc(ball);
            }
            __syncwarp();
            if (lane == 0) {
                ecnt[warp * per_warp + w] = run;
                if (last)
                    moe_release(A, MOE_U64(A, ll_cnt) + ((uint64_t)p * n + me) * L + le, (e << 32) | run,
                                (int)r);
            }
            __syncwarp();
        }
        /* token rows: this block's tokens of the chunk, a batch at a time */
        {
            const uint32_t b = blockIdx.x, nown = ntok > b ? (ntok - b + B - 1) / B : 0;
            for (uint32_t o0 = 0; o0 < nown; o0 += tb) {
                const uint32_t nb = nown - o0 < tb ? nown - o0 : tb;
                symm__block_sync();
                if (tid < nb) {
                    const uint32_t i = b + (o0 + tid) * B;
                    const uint32_t *row = &sidx[i * K];
                    const uint64_t t = dpr + (uint64_t)(c0 + i) * dp;
                    uint64_t mask = 0;
                    for (uint32_t k = 0; k < K; k++) {
                        const uint32_t ex = row[k];
                        if (ex >= E) {
                            if (ex != SYMM_MOE_NO_EXPERT) /* -1 marks a slot with no expert */
                                moe_error(A, SYMM__MOE_ERR_EXPERT_RANGE, (int64_t)t, (int64_t)k, (int64_t)ex);
                        } else if (!ll_valid(row, k, E))
                            moe_error(A, SYMM__MOE_ERR_EXPERT_DUP, (int64_t)t, (int64_t)k, (int64_t)ex);
                        else
                            mask |= 1ull << (ex / L);
                    }
                    smask[tid] = mask;
                    stok[tid] = c0 + i;
                }
                symm__block_sync();
                if (xal) {
                    const uint32_t total = nb * nvx;
                    for (uint32_t q0 = tid; q0 < total; q0 += SYMM__MOE_THREADS * LL_UNROLL) {
                        symm__v4_t v[LL_UNROLL];
#pragma unroll
                        for (int u = 0; u < LL_UNROLL; u++) {
                            const uint32_t q = q0 + (uint32_t)u * SYMM__MOE_THREADS;
                            if (q < total) {
                                const uint64_t t = dpr + (uint64_t)stok[q / nvx] * dp;
                                v[u] = symm__cld16((const char *)A->x + t * xrow + 16u * (q % nvx), 0);
                            }
                        }
#pragma unroll
                        for (int u = 0; u < LL_UNROLL; u++) {
                            const uint32_t q = q0 + (uint32_t)u * SYMM__MOE_THREADS;
                            if (q < total) {
                                const uint32_t j = q / nvx;
                                char *dst = ll_slot(A, p, me, stok[j]) + 16u * (q % nvx);
                                for (uint64_t m = smask[j]; m; m &= m - 1)
                                    symm__cst16(moe_peer(A, dst, __ffsll((long long)m) - 1), v[u], 1);
                            }
                        }
                    }
                } else {
                    for (uint32_t j = 0; j < nb; j++) {
                        const uint64_t t = dpr + (uint64_t)stok[j] * dp;
                        for (uint64_t m = smask[j]; m; m &= m - 1)
                            symm__copy(moe_peer(A, ll_slot(A, p, me, stok[j]), __ffsll((long long)m) - 1),
                                       (const char *)A->x + t * xrow, A->x_bytes, tid, SYMM__MOE_THREADS, 1);
                    }
                }
                /* scales, four per 16-byte store (the slot's scales start 16-byte aligned) */
                for (uint32_t q = tid; q < nb * cq; q += SYMM__MOE_THREADS) {
                    const uint32_t j = q / cq, c0 = 4 * (q % cq), cnt = cols - c0 < 4 ? cols - c0 : 4;
                    const int64_t t = (int64_t)(dpr + (uint64_t)stok[j] * dp);
                    char *dst = ll_slot(A, p, me, stok[j]) + A->x_bytes + 4u * c0;
                    symm__v4_t v;
                    uint32_t w[4] = {0, 0, 0, 0};
                    for (uint32_t i = 0; i < cnt; i++)
                        w[i] = symm__f32_bits(A->x_scale[t * A->xs_stride[0] + (int64_t)(c0 + i) * A->xs_stride[1]]);
                    v.x = w[0];
                    v.y = w[1];
                    v.z = w[2];
                    v.w = w[3];
                    for (uint64_t m = smask[j]; m; m &= m - 1)
                        symm__cst16(moe_peer(A, dst, __ffsll((long long)m) - 1), v, 1);
                }
                /* each row's flag, released behind the whole block's stores */
                symm__block_sync();
                for (uint32_t x = tid; x < nb * n; x += SYMM__MOE_THREADS) {
                    const uint32_t j = x / n, r = x % n;
                    if ((smask[j] >> r) & 1u)
                        moe_release(A, (uint64_t *)(void *)(ll_slot(A, p, me, stok[j]) + foff), e, (int)r);
                }
            }
        }
        if (last)
            break;
    }
}

SYMM__DEVICE_INTERNAL void ll_dispatch_recv(const symm__moe_kargs_t *A, uint64_t e) {
    const uint32_t tid = symm__block_tid(), n = (uint32_t)A->n, L = A->local, dp = (uint32_t)A->dp;
    const uint32_t p = (uint32_t)(e & 1u), nvx = A->x_bytes / 16u, cols = A->scale_cols;
    const uint64_t foff = ll_flag_off(A), esz = A->x_esz;
    const int oal = moe_al16((uint64_t)(uintptr_t)A->out_x) && moe_al16((uint64_t)A->ox_stride[0] * esz) &&
                    moe_al16((uint64_t)A->ox_stride[1] * esz);
    const uint32_t rb = ll_batch(nvx + cols);
    __shared__ uint32_t cnt[SYMM__MOE_MAX_PES];
    __shared__ uint32_t stl[LL_BATCH];
    for (uint32_t item = blockIdx.x; item < n * L; item += gridDim.x) {
        const uint32_t le = item / n, s = item % n;
        uint32_t off = 0, num, total = 0;
        symm__block_sync();
        if (tid < n)
            cnt[tid] = (uint32_t)moe_wait(A, MOE_U64(A, ll_cnt) + ((uint64_t)p * n + tid) * L + le, e << 32);
        symm__block_sync();
        for (uint32_t x = 0; x < n; x++) {
            off += x < s ? cnt[x] : 0;
            total += cnt[x];
        }
        num = cnt[s];
        if (s == 0 && tid == 0) {
            A->out_num[le] = (int32_t)total;
            MOE_U32(A, ll_rcnt)[le] = total;
        }
        for (uint32_t j0 = 0; j0 < num; j0 += rb) {
            const uint32_t nb = num - j0 < rb ? num - j0 : rb;
            symm__block_sync();
            if (tid < nb) {
                const uint32_t ent = MOE_U32(A, ll_list)[(((uint64_t)p * n + s) * L + le) * A->cap + j0 + tid];
                const uint32_t tl = ent >> 8;
                const uint64_t t = (uint64_t)tl * dp + s % dp;
                moe_wait(A, (const uint64_t *)(const void *)(ll_slot(A, p, s, tl) + foff), e);
                stl[tid] = tl;
                MOE_U64(A, ll_route)[(uint64_t)le * A->rows + off + j0 + tid] =
                    (uint64_t)s | ((uint64_t)(ent & 255u) << 16) | (t << 32);
            }
            symm__block_sync();
            if (oal) {
                const uint32_t total_v = nb * nvx;
                for (uint32_t q0 = tid; q0 < total_v; q0 += SYMM__MOE_THREADS * LL_UNROLL) {
                    symm__v4_t v[LL_UNROLL];
#pragma unroll
                    for (int u = 0; u < LL_UNROLL; u++) {
                        const uint32_t q = q0 + (uint32_t)u * SYMM__MOE_THREADS;
                        if (q < total_v)
                            v[u] = symm__cld16(ll_slot(A, p, s, stl[q / nvx]) + 16u * (q % nvx), 0);
                    }
#pragma unroll
                    for (int u = 0; u < LL_UNROLL; u++) {
                        const uint32_t q = q0 + (uint32_t)u * SYMM__MOE_THREADS;
                        if (q < total_v) {
                            const uint64_t row = (uint64_t)off + j0 + q / nvx;
                            char *dst = (char *)A->out_x +
                                        ((int64_t)le * A->ox_stride[0] + (int64_t)row * A->ox_stride[1]) * (int64_t)esz;
                            symm__cst16(dst + 16u * (q % nvx), v[u], 0);
                        }
                    }
                }
            } else {
                for (uint32_t j = 0; j < nb; j++) {
                    const uint64_t row = (uint64_t)off + j0 + j;
                    symm__copy((char *)A->out_x + ((int64_t)le * A->ox_stride[0] + (int64_t)row * A->ox_stride[1]) *
                                                      (int64_t)esz,
                               ll_slot(A, p, s, stl[j]), A->x_bytes, tid, SYMM__MOE_THREADS, 0);
                }
            }
            for (uint32_t q = tid; q < nb * cols; q += SYMM__MOE_THREADS) {
                const uint32_t j = q / cols, c = q % cols;
                const int64_t row = (int64_t)off + j0 + j;
                A->out_scale[(int64_t)le * A->os_stride[0] + row * A->os_stride[1] + (int64_t)c * A->os_stride[2]] =
                    ((const float *)(const void *)(ll_slot(A, p, s, stl[j]) + A->x_bytes))[c];
            }
        }
    }
}

__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ll_dispatch(const __grid_constant__ symm__moe_kargs_t a) {
    const symm__moe_kargs_t *A = &a;
    const int send = (A->flags & SYMM_MOE_SEND) != 0;
    const uint64_t e = moe_begin(A, send);
    if (send)
        ll_dispatch_send(A, e);
    if (A->flags & SYMM_MOE_RECV)
        ll_dispatch_recv(A, e);
    if (send)
        moe_close_epoch(A, SYMM__MK_LL_DISPATCH, e);
}

/* ---- combine ---------------------------------------------------------------------------- */

SYMM__DEVICE_INTERNAL void ll_combine_send(const symm__moe_kargs_t *A, uint64_t e) {
    const uint32_t tid = symm__block_tid(), L = A->local, K = A->topk, dp = (uint32_t)A->dp;
    const uint32_t ysz = moe_kind_size(A->y_kind), nvy = A->hidden * ysz / 16u;
    const uint64_t slot_bytes = (uint64_t)A->hidden * 4u;
    const uint64_t *routes = MOE_U64(A, ll_route);
    const int yal = moe_al16((uint64_t)(uintptr_t)A->y) && moe_al16((uint64_t)A->y_stride[0] * ysz) &&
                    moe_al16((uint64_t)A->y_stride[1] * ysz);
    extern __shared__ uint32_t pre[]; /* [L + 1]: first flat row of each local expert */
    __shared__ uint64_t sridx[LL_BATCH], syoff[LL_BATCH];
    uint32_t total, run = 0, rb;
    for (uint32_t b0 = 0; b0 < L; b0 += SYMM__MOE_THREADS) {
        const uint32_t x = b0 + tid, c = x < L ? MOE_U32(A, ll_rcnt)[x] : 0;
        uint32_t sum, ex = moe_block_scan(c, &sum);
        if (x < L)
            pre[x] = run + ex;
        run += sum;
    }
    if (tid == 0)
        pre[L] = run;
    symm__block_sync();
    total = pre[L];
    /* few rows: one per block, so they all leave at once */
    rb = ll_batch(nvy);
    if (rb > (total + gridDim.x - 1) / gridDim.x)
        rb = (total + gridDim.x - 1) / gridDim.x;
    if (rb < 1)
        rb = 1;
    for (uint32_t r0 = blockIdx.x * rb; r0 < total; r0 += gridDim.x * rb) {
        const uint32_t nb = total - r0 < rb ? total - r0 : rb;
        symm__block_sync();
        if (tid < nb) {
            const uint32_t r = r0 + tid;
            uint32_t lo = 0, hi = L - 1; /* the last expert whose first row is <= r */
            while (lo < hi) {
                const uint32_t mid = (lo + hi + 1) / 2;
                if (pre[mid] <= r)
                    lo = mid;
                else
                    hi = mid - 1;
            }
            sridx[tid] = (uint64_t)lo * A->rows + (r - pre[lo]);
            syoff[tid] = (uint64_t)((int64_t)lo * A->y_stride[0] + (int64_t)(r - pre[lo]) * A->y_stride[1]) * ysz;
        }
        symm__block_sync();
        /* the routes are read after the rows' loads are issued, so both are in flight together */
        if (yal) {
            const uint32_t tv = nb * nvy;
            for (uint32_t q0 = tid; q0 < tv; q0 += SYMM__MOE_THREADS * LL_UNROLL) {
                symm__v4_t v[LL_UNROLL];
#pragma unroll
                for (int u = 0; u < LL_UNROLL; u++) {
                    const uint32_t q = q0 + (uint32_t)u * SYMM__MOE_THREADS;
                    if (q < tv)
                        v[u] = symm__cld16((const char *)A->y + syoff[q / nvy] + 16u * (q % nvy), 0);
                }
#pragma unroll
                for (int u = 0; u < LL_UNROLL; u++) {
                    const uint32_t q = q0 + (uint32_t)u * SYMM__MOE_THREADS;
                    if (q < tv) {
                        const uint64_t route = routes[sridx[q / nvy]];
                        const uint32_t src = (uint32_t)(route & 0xffffu), k = (uint32_t)((route >> 16) & 0xffffu);
                        const uint32_t g0 = src / dp * dp;
                        char *dst = MOE_AT(A, ll_cbuf) + ((route >> 32) * K + k) * slot_bytes + 16u * (q % nvy);
                        for (uint32_t d = 0; d < dp; d++)
                            symm__cst16(moe_peer(A, dst, (int)(g0 + d)), v[u], 1);
                    }
                }
            }
        } else {
            for (uint32_t j = 0; j < nb; j++) {
                const uint64_t route = routes[sridx[j]];
                const uint32_t src = (uint32_t)(route & 0xffffu), k = (uint32_t)((route >> 16) & 0xffffu);
                const uint32_t g0 = src / dp * dp;
                char *dst = MOE_AT(A, ll_cbuf) + ((route >> 32) * K + k) * slot_bytes;
                for (uint32_t d = 0; d < dp; d++)
                    symm__copy(moe_peer(A, dst, (int)(g0 + d)), (const char *)A->y + syoff[j],
                               (uint64_t)A->hidden * ysz, tid, SYMM__MOE_THREADS, 1);
            }
        }
        symm__block_sync();
        for (uint32_t x = tid; x < nb * dp; x += SYMM__MOE_THREADS) {
            const uint64_t route = routes[sridx[x / dp]];
            const uint32_t src = (uint32_t)(route & 0xffffu), k = (uint32_t)((route >> 16) & 0xffffu);
            moe_release(A, MOE_U64(A, ll_cflag) + (route >> 32) * K + k, e, (int)(src / dp * dp + x % dp));
        }
    }
}

SYMM__DEVICE_INTERNAL void ll_combine_recv(const symm__moe_kargs_t *A, uint64_t e) {
    const uint32_t tid = symm__block_tid(), K = A->topk, E = A->experts;
    const uint64_t slot_bytes = (uint64_t)A->hidden * 4u;
    const uint32_t ysz = moe_kind_size(A->y_kind), h8 = A->hidden / 8u;
    const uint64_t bound = moe_bound(A, blockIdx.x == 0 && tid == 0);
    uint32_t tb = 1024u / h8;
    __shared__ float sw[SYMM__MOE_THREADS];
    __shared__ uint8_t sok[SYMM__MOE_THREADS];
    tb = tb < 1 ? 1 : (tb > LL_BATCH ? LL_BATCH : tb);
    if (tb * K > SYMM__MOE_THREADS)
        tb = SYMM__MOE_THREADS / K;
    if ((uint64_t)tb * gridDim.x > bound) /* few tokens: spread them over the blocks */
        tb = bound > gridDim.x ? (uint32_t)((bound + gridDim.x - 1) / gridDim.x) : 1;
    for (uint64_t t0 = (uint64_t)blockIdx.x * tb; t0 < bound; t0 += (uint64_t)gridDim.x * tb) {
        const uint32_t nb = bound - t0 < tb ? (uint32_t)(bound - t0) : tb;
        symm__block_sync();
        if (tid < nb * K) {
            const uint64_t t = t0 + tid / K;
            const uint32_t k = tid % K;
            const int ok = ll_valid((const uint32_t *)A->idx + t * K, k, E);
            sok[tid] = (uint8_t)ok;
            sw[tid] = ok ? A->weights[t * K + k] : 0.0f;
            if (ok)
                moe_wait(A, MOE_U64(A, ll_cflag) + t * K + k, e);
        }
        symm__block_sync();
        for (uint32_t q = tid; q < nb * h8; q += SYMM__MOE_THREADS) {
            const uint32_t j = q / h8, v = q % h8;
            const uint64_t t = t0 + j;
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (uint32_t k0 = 0; k0 < K; k0 += MOE_GATHER) {
                symm__v4_t ra[MOE_GATHER], rb[MOE_GATHER];
#pragma unroll
                for (uint32_t i = 0; i < MOE_GATHER; i++)
                    if (k0 + i < K && sok[j * K + k0 + i])
                        moe_ld8_raw(MOE_AT(A, ll_cbuf) + (t * K + k0 + i) * slot_bytes + (uint64_t)v * 8u * ysz,
                                    A->y_kind, &ra[i], &rb[i]);
#pragma unroll
                for (uint32_t i = 0; i < MOE_GATHER; i++)
                    if (k0 + i < K && sok[j * K + k0 + i]) /* slot order, as the reference sums */
                        moe_fma8(A->y_kind, ra[i], rb[i], sw[j * K + k0 + i], acc);
            }
            moe_store8((char *)A->out + ((int64_t)t * A->out_stride + (int64_t)v * 8) * 2, A->out_kind, acc);
        }
    }
}

__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ll_combine(const __grid_constant__ symm__moe_kargs_t a) {
    const symm__moe_kargs_t *A = &a;
    const uint64_t e = moe_begin(A, 0);
    if (A->flags & SYMM_MOE_SEND)
        ll_combine_send(A, e);
    if (A->flags & SYMM_MOE_RECV)
        ll_combine_recv(A, e);
}

/* Dynamic shared memory of each kernel for a grid of `blocks`. */
extern "C" size_t symm__moe_ll_smem(const symm__moe_kargs_t *a, int blocks) {
    if (a->kernel == SYMM__MK_LL_DISPATCH) {
        const uint64_t gw = (uint64_t)(blocks > 0 ? blocks : 1) * SYMM__MOE_WARPS;
        return (size_t)(SYMM__MOE_WARPS * ((a->experts + gw - 1) / gw) * sizeof(uint32_t));
    }
    return (size_t)(a->local + 1) * sizeof(uint32_t);
}

symm_status_t symm__moe_launch_ll(const symm__moe_kargs_t *a, cudaStream_t s) {
    const size_t smem = symm__moe_ll_smem(a, a->nblocks);
    if (a->kernel == SYMM__MK_LL_DISPATCH) {
        symm__k_ll_dispatch<<<a->nblocks, SYMM__MOE_THREADS, smem, s>>>(*a);
        return symm__moe_launched("the MoE dispatch kernel");
    }
    symm__k_ll_combine<<<a->nblocks, SYMM__MOE_THREADS, (a->flags & SYMM_MOE_SEND) ? smem : 0, s>>>(*a);
    return symm__moe_launched("the MoE combine kernel");
}
