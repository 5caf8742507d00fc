/*
 * moe_k_ll_dispatch.cu - the generic low-latency dispatch: its send half
 * (expert lists, rows as packets or plain), its receive half (counts, list
 * entries, the rows' copy) and its two kernels, symm__k_ll_dispatch and
 * symm__k_ll_dispatch_big (calls of LL_POST_ROUTES routes and more). The
 * protocol: moe_ll.cuh.
 */
#include "moe/moe_ll.cuh"

/* A PE's expert lists when its tokens fit one index chunk (sidx: the chunk's top-k indices,
 * ntok tokens below the bound; tag and parity of epoch e; mode: this call's count bits). A
 * route's place in its expert's list is the number of earlier tokens that name that expert, so
 * any block can work it out from sidx alone: block b stores the entries of its own tokens (b,
 * b + blocks, ..., those whose rows it sends) and posts the counts of experts blocks - 1 - b,
 * 2 * blocks - 1 - b, ... (the count of all ntok tokens). Each such count is one query, taken
 * by one warp (16 bytes of sidx a lane and load, a sum over the warp) whose lane 0 stores the
 * result: no barrier, no serial scan per expert, and no block's lists wait for another block.
 * srank (plain rows): the own routes' places go there instead (~0: no entry), for the entries
 * to be released behind the rows, and the counts say so (LL_CNT_EREL). */
SYMM__DEVICE_INTERNAL void ll_post_lists(const symm__moe_kargs_t *A, const uint32_t *sidx, uint32_t ntok, uint64_t e,
                                         uint64_t mode, uint32_t *srank) {
    const uint32_t tid = symm__block_tid(), lane = tid & 31u, warp = tid >> 5, K = A->topk, L = A->local;
    const uint32_t E = A->experts, B = gridDim.x, b = blockIdx.x, o = B - 1 - b;
    const uint32_t nr = (ntok > b ? (ntok - b + B - 1) / B : 0) * K, nq = nr + (E > o ? (E - o + B - 1) / B : 0);
    LL_FSTAMP(A, LLS_DG_PL0);
    /* (q depends on the warp alone: every lane runs the loop and the reduction) */
    for (uint32_t q = warp; q < nq; q += SYMM__MOE_WARPS) {
        const uint32_t k = q % K, i = q < nr ? b + (q / K) * B : 0;
        const uint32_t ex = q < nr ? sidx[i * K + k] : o + (q - nr) * B; /* the route's expert, or the count's */
        /* a route's expert named by an earlier slot of its token: a ballot over the slots below 32 */
        const uint32_t dup = __ballot_sync(MOE_FULL, q < nr && lane < k && sidx[i * K + lane] == ex);
        const int ok = q >= nr || (ex < E && dup == 0 && (k <= 32 || ll_valid(&sidx[i * K], k, E)));
        const uint32_t np = q >= nr ? ntok * K : ok ? i * K : 0; /* how many of sidx's first routes count */
        uint32_t c = 0;
        for (uint32_t j = 4u * lane; j < np; j += 128) {
            const uint4 v = reinterpret_cast<const uint4 *>(sidx)[j / 4u];
            uint32_t hit = (uint32_t)(v.x == ex) | (uint32_t)(v.y == ex) << 1 | (uint32_t)(v.z == ex) << 2 |
                           (uint32_t)(v.w == ex) << 3;
            if (np - j < 4u)
                hit &= (1u << (np - j)) - 1u;
            for (; hit != 0; hit &= hit - 1u) { /* (rare) a hit counts where its token names ex first */
                const uint32_t jj = j + (uint32_t)__ffs((int)hit) - 1u;
                c += (uint32_t)ll_valid(&sidx[jj - jj % K], jj % K, E);
            }
        }
        c = __reduce_add_sync(MOE_FULL, c);
        if (q == warp) {
            LL_FPIN32(c);
            LL_FSTAMP(A, LLS_DG_PL1);
        }
        if (lane == 0 && srank != NULL && q < nr)
            srank[q] = ok ? c : ~0u;
        else if (lane == 0 && ok) {
            const uint32_t p = (uint32_t)(e & 1u), n = (uint32_t)A->n, me = (uint32_t)A->me;
            if (q >= nr)
                symm__st_b64(moe_peer(A, MOE_U64(A, ll_cnt) + ((uint64_t)p * n + me) * L + ex % L, (int)(ex / L)),
                             (e << 32) | (mode << 30) | (srank != NULL ? LL_CNT_EREL : 0u) | c, SYMM_SEM_RELAXED,
                             SYMM_SCOPE_SYS);
            else
                symm__st_b64(moe_peer(A, MOE_U64(A, ll_list) + (((uint64_t)p * n + me) * L + ex % L) * A->cap + c,
                                      (int)(ex / L)),
                             ((uint64_t)ll_tag(e) << 32) | (i << 8) | (q % K), SYMM_SEM_RELAXED, SYMM_SCOPE_SYS);
        }
    }
}

/* The send half opens the epoch: thread 0 reads the last one with the first
 * chunk's indices (*se: the block's copy; `again`: a second pass of
 * SYMM_MOE_LL_PROBE=twice takes the next one from there). The block is
 * counted after it (ll_count_late). */
SYMM__DEVICE_INTERNAL void ll_dispatch_send(const symm__moe_kargs_t *A, uint64_t *se, int again, int big) {
    const uint32_t tid = symm__block_tid(), lane = tid & 31u, warp = tid >> 5;
    const uint32_t K = A->topk, L = A->local, E = A->experts, n = (uint32_t)A->n, dp = (uint32_t)A->dp;
    const uint32_t me = (uint32_t)A->me, dpr = me % dp;
    /* the epoch and each thread's first two indices of the first chunk go out before anything
     * else is computed (they are staged below, once the prologue is done) */
    const uint32_t kq = tid / K, kq1 = (tid + SYMM__MOE_THREADS) / K;
    const uint64_t tq = dpr + (uint64_t)kq * dp, tq1 = dpr + (uint64_t)kq1 * dp;
    const int has_ix0 = (kq + 1) * K <= SYMM__MOE_IDX_CHUNK && tq < A->num_tokens;
    const int has_ix1 = big && (kq1 + 1) * K <= SYMM__MOE_IDX_CHUNK && tq1 < A->num_tokens;
    const uint64_t ev0 = tid == 0 && !again ? *(volatile uint64_t *)&moe_state(A)->epoch : 0;
    const uint32_t ix0 = has_ix0 ? ((const uint32_t *)A->idx)[tq * K + (tid - kq * K)] : 0;
    const uint32_t ix1 = has_ix1 ? ((const uint32_t *)A->idx)[tq1 * K + (tid + SYMM__MOE_THREADS - kq1 * K)] : 0;
    uint64_t e = 0;
    uint32_t p = 0, tag = 0;
    /* experts are owned from the last block down, tokens from the first block up: with few tokens
     * the lists and the rows leave from different SMs at once */
    const uint32_t B = gridDim.x, GW = B * SYMM__MOE_WARPS, gw = (B - 1 - blockIdx.x) * SYMM__MOE_WARPS + warp;
    const uint32_t per_warp = (E + GW - 1) / GW, ctok = SYMM__MOE_IDX_CHUNK / K;
    __shared__ uint64_t sbraw; /* *bound_m: loaded by the last warp, read after the indices are staged */
    uint32_t mine = 0;
    /* (num_tokens <= max_num_tokens, a 32-bit count: the host checks it) */
    const uint32_t all = (uint32_t)A->num_tokens > dpr ? ((uint32_t)A->num_tokens - dpr + dp - 1) / dp : 0;
    const uint32_t nvx = A->x_bytes / 16u, cols = A->scale_cols, cq = (cols + 3) / 4;
    const uint32_t tb = ll_batch(nvx + cq);
    const uint64_t xrow = (uint64_t)A->x_stride * A->x_esz, foff = ll_sdata(A);
    const uint32_t lanes_below = (1u << lane) - 1u;
    /* this call's form: packets while this PE's rows fit the packet slots; its group's combine rows
     * come back as packets while they fit too (every PE of the group decides alike) */
    const int pk = A->pkt && all <= A->pcap;
    /* packet rows of fewer tokens than half the blocks: each row in sl slices, one per block (block
     * b: token b / sl, slice b % sl), so every block issues a small share of the stores */
    const uint32_t sl = pk && all > 0 && all <= ctok && 2u * all <= B ? B / all : 1u;
    const uint64_t mode = (pk ? LL_MODE_DPKT : 0u) | (A->pkt && A->num_tokens <= A->pmt ? LL_MODE_CPKT : 0u);
    extern __shared__ uint32_t ecnt[]; /* [warps][per_warp]: running route counts of owned experts */
    __shared__ __align__(16) uint32_t sidx[SYMM__MOE_IDX_CHUNK]; /* (read 16 bytes at a time) */
    __shared__ uint32_t srank[SYMM__MOE_IDX_CHUNK]; /* own routes' list places (ll_post_lists, plain rows) */
    __shared__ uint64_t smask[LL_BATCH];
    __shared__ uint32_t stok[LL_BATCH];
    symm__v4_t pv[LL_UNROLL]; /* the first batch's x and scales, loaded with the indices: not after them */
    uint32_t pw[4] = {0, 0, 0, 0};
    for (uint32_t w = lane; w < per_warp; w += 32)
        ecnt[warp * per_warp + w] = 0;
    if (tid == SYMM__MOE_THREADS - 32)
        sbraw = ll_bound_load(A);
    if (sl > 1) {
        /* the block's slice: its first vector per thread (x, or a quad of scales) */
        const uint32_t i = blockIdx.x / sl, z = blockIdx.x % sl, nv = nvx + cq;
        const uint32_t v = nv * z / sl + tid;
        const uint64_t t = dpr + (uint64_t)i * dp;
        if (i < all && v < nv * (z + 1) / sl) {
            if (v < nvx)
                pv[0] = ll_ld16((const char *)A->x + t * xrow + 16u * v);
            else
                ll_ld_scales(A, (int64_t)t, 4u * (v - nvx), pw);
        }
    } else {
        /* this block's first tokens below num_tokens (a superset of those below bound_m, which
         * need not be known yet); the copy below takes the values of the tokens it sends */
        const uint32_t b = blockIdx.x, n0 = all < ctok ? all : ctok, own0 = n0 > b ? (n0 - b + B - 1) / B : 0;
        const uint32_t pre = (own0 < tb ? own0 : tb) * nvx;
#pragma unroll
        for (int u = 0; u < LL_UNROLL; u++) {
            const uint32_t q = tid + (uint32_t)u * SYMM__MOE_THREADS;
            if (q < pre)
                pv[u] = ll_ld16((const char *)A->x + (dpr + (uint64_t)(b + (q / nvx) * B) * dp) * xrow +
                                16u * (q % nvx));
        }
        if (tid < (own0 < tb ? own0 : tb) * cq)
            ll_ld_scales(A, (int64_t)(dpr + (uint64_t)(b + (tid / cq) * B) * dp), 4 * (tid % cq), pw);
    }
    ll_stamp(A, LLS_D_PRO);
    for (uint32_t c0 = 0;; c0 += ctok) {
        const uint32_t nst = all > c0 ? (all - c0 < ctok ? all - c0 : ctok) : 0; /* >= ntok */
        uint32_t ntok;
        int last;
        /* stage the chunk's indices (up to num_tokens: these loads need not wait for bound_m's);
         * the first chunk's go with the epoch's load (nothing read sidx before it) */
        if (c0 != 0)
            symm__block_sync();
        {
            /* (a second pass of SYMM_MOE_LL_PROBE=twice, the block counted: the next epoch) */
            const uint64_t ev = c0 != 0 || tid != 0 ? 0 : again ? *se : ev0;
            for (uint32_t q = tid; q < nst * K; q += SYMM__MOE_THREADS) {
                const uint64_t t = dpr + (uint64_t)(c0 + q / K) * dp;
                sidx[q] = c0 == 0 && q == tid                       ? ix0
                          : c0 == 0 && q == tid + SYMM__MOE_THREADS ? ix1
                                                                    : ((const uint32_t *)A->idx)[t * K + q % K];
            }
            if (c0 == 0 && tid == 0)
                *se = ev + 1u;
        }
        symm__block_sync();
        if (c0 == 0) {
            const uint32_t bound = (uint32_t)ll_bound_use(A, sbraw, blockIdx.x == 0 && tid == 0);
            mine = bound > dpr ? (bound - dpr + dp - 1) / dp : 0;
        }
        ntok = mine > c0 ? (mine - c0 < ctok ? mine - c0 : ctok) : 0;
        last = c0 + ctok >= mine;
        if (c0 == 0) {
            e = *se;
            p = (uint32_t)(e & 1u);
            tag = ll_tag(e);
            ll_stamp(A, LLS_D_IDX);
        }
        /* expert lists (and, with the last chunk, their counts): tagged entries, relaxed stores;
         * a PE's tokens in one chunk, at least LL_POST_ROUTES routes: every block its own share
         * (ll_post_lists); else warp w of the grid owns experts w, w + warps, ... and scans the
         * routes in token order, chunk by chunk (ballots, so every route gets the same slot
         * whichever block looks): a ballot or two when the routes are few */
        if (big && all <= ctok && all * K >= LL_POST_ROUTES)
            ll_post_lists(A, sidx, ntok, e, mode, pk ? NULL : srank);
        for (uint32_t w = 0; w < per_warp && !(big && all <= ctok && all * K >= LL_POST_ROUTES); w++) {
            const uint32_t ex = gw + w * GW, r = ex / L, le = ex % L;
            uint32_t run;
            uint64_t *list;
            if (ex >= E)
                break;
            run = ecnt[warp * per_warp + w];
            list = (uint64_t *)moe_peer(A, MOE_AT(A, ll_list) + (((uint64_t)p * n + me) * L + le) * A->cap * 8u,
                                        (int)r);
            for (uint32_t q0 = 0; q0 < ntok * K; q0 += 32) {
                const uint32_t q = q0 + lane;
                const int hit = q < ntok * K && sidx[q] == ex && ll_valid(&sidx[q - q % K], q % K, E);
                const uint32_t ball = __ballot_sync(MOE_FULL, hit);
                if (hit)
                    symm__st_b64(list + run + __popc(ball & lanes_below),
                                 ((uint64_t)tag << 32) | ((c0 + q / K) << 8) | (q % K), SYMM_SEM_RELAXED,
                                 SYMM_SCOPE_SYS);
                run += (uint32_t)__popc(ball);
            }
            __syncwarp();
            if (lane == 0) {
                ecnt[warp * per_warp + w] = run;
                if (last)
                    symm__st_b64(moe_peer(A, MOE_U64(A, ll_cnt) + ((uint64_t)p * n + me) * L + le, (int)r),
                                 (e << 32) | (mode << 30) | run, SYMM_SEM_RELAXED, SYMM_SCOPE_SYS);
            }
            __syncwarp();
        }
        if (c0 == 0)
            ll_stamp(A, LLS_D_LIST);
        if (sl > 1) { /* (one chunk) */
            const uint32_t i = blockIdx.x / sl, z = blockIdx.x % sl, nv = nvx + cq;
            if (i < ntok) {
                const uint32_t lo = nv * z / sl, hi = nv * (z + 1) / sl, *row = &sidx[i * K];
                const uint64_t t = dpr + (uint64_t)i * dp;
                char *slot = ll_pslot(A, p, me, i);
                uint64_t mask = 0;
                /* the token's PEs, found by every warp itself (a lane per route, OR over the warp):
                 * no barrier before the stores; slice 0's first warp reports bad routes */
                for (uint32_t k0 = 0; k0 < K; k0 += 32) {
                    const uint32_t k = k0 + lane;
                    uint64_t m = 0;
                    if (k < K) {
                        const uint32_t ex = row[k];
                        if (ex >= E) {
                            if (ex != SYMM_MOE_NO_EXPERT && z == 0 && warp == 0)
                                moe_error(A, SYMM__MOE_ERR_EXPERT_RANGE, (int64_t)t, (int64_t)k, (int64_t)ex);
                        } else if (!ll_valid(row, k, E)) {
                            if (z == 0 && warp == 0)
                                moe_error(A, SYMM__MOE_ERR_EXPERT_DUP, (int64_t)t, (int64_t)k, (int64_t)ex);
                        } else {
                            m = 1ull << (ex / L);
                        }
                    }
                    mask |= ((uint64_t)__reduce_or_sync(MOE_FULL, (uint32_t)(m >> 32)) << 32) |
                            __reduce_or_sync(MOE_FULL, (uint32_t)m);
                }
                ll_stamp(A, LLS_D_MASK);
                {
                    symm__v4_t d0 = pv[0]; /* the prefetched vector: x, or a quad of scales */
                    if (lo + tid >= nvx) {
                        d0.x = pw[0];
                        d0.y = pw[1];
                        d0.z = pw[2];
                        d0.w = pw[3];
                    }
                    ll_put_slice(A, slot, t, lo, hi, mask, tag, &d0);
                }
                ll_stamp(A, LLS_D_XST);
            }
            break;
        }
        /* token rows: this block's tokens of the chunk, a batch at a time */
        {
            const uint32_t b = blockIdx.x, nown = ntok > b ? (ntok - b + B - 1) / B : 0;
            for (uint32_t o0 = 0; o0 < nown; o0 += tb) {
                const uint32_t nb = nown - o0 < tb ? nown - o0 : tb;
                symm__block_sync();
                MOE_TRACE_T0(tb_, A);
                if (c0 == 0 && o0 == 0)
                    LL_FSTAMP(A, LLS_DG_RB);
                /* each token's PEs: warp w takes tokens w, w + warps, ... of the batch, a lane per
                 * route and an OR over the warp (the routes' checks side by side, not one thread's
                 * K in turn); every lane runs the loops and the reductions */
                for (uint32_t j = warp; j < nb; j += SYMM__MOE_WARPS) {
                    const uint32_t i = b + (o0 + j) * B;
                    uint64_t mask = 0;
                    for (uint32_t k0 = 0; k0 < K; k0 += 32) {
                        const uint32_t k = k0 + lane, ex = k < K ? sidx[i * K + k] : SYMM_MOE_NO_EXPERT;
                        /* a route counts where its token names its expert first: the lowest lane of
                         * its match (lanes past K match nothing: E + lane is no expert) */
                        const uint32_t same = __match_any_sync(MOE_FULL, k < K ? ex : E + lane);
                        uint64_t m = 0;
                        if (ex < E && (k0 == 0 ? (uint32_t)__ffs((int)same) - 1u == lane : ll_valid(&sidx[i * K], k, E)))
                            m = 1ull << (ex / L);
                        else if (ex != SYMM_MOE_NO_EXPERT) /* -1 marks a slot with no expert */
                            moe_error(A, ex < E ? SYMM__MOE_ERR_EXPERT_DUP : SYMM__MOE_ERR_EXPERT_RANGE,
                                      (int64_t)(dpr + (uint64_t)(c0 + i) * dp), (int64_t)k, (int64_t)ex);
                        mask |= ((uint64_t)__reduce_or_sync(MOE_FULL, (uint32_t)(m >> 32)) << 32) |
                                __reduce_or_sync(MOE_FULL, (uint32_t)m);
                    }
                    if (lane == 0) {
                        smask[j] = mask;
                        stok[j] = c0 + i;
                    }
                    if (c0 == 0 && o0 == 0 && j == 0) {
                        LL_FPIN64(mask);
                        LL_FSTAMP(A, LLS_DG_MK);
                    }
                }
                symm__block_sync();
                if (c0 == 0 && o0 == 0) {
                    ll_stamp(A, LLS_D_MASK);
                    LL_FPIN32(pv[0].x);
                    LL_FSTAMP(A, LLS_DG_PV);
                }
                /* x, 16 bytes per thread and step, loaded once for all the token's PEs */
                {
                    const uint32_t total = nb * nvx;
                    for (uint32_t q0 = tid; q0 < total; q0 += SYMM__MOE_THREADS * LL_UNROLL) {
                        symm__v4_t v[LL_UNROLL];
#pragma unroll
                        for (int u = 0; u < LL_UNROLL; u++) {
                            const uint32_t q = q0 + (uint32_t)u * SYMM__MOE_THREADS;
                            if (q < total) {
                                const uint64_t t = dpr + (uint64_t)stok[q / nvx] * dp;
                                v[u] = c0 == 0 && o0 == 0 && q0 == tid
                                           ? pv[u]
                                           : ll_ld16((const char *)A->x + t * xrow + 16u * (q % nvx));
                            }
                        }
#pragma unroll
                        for (int u = 0; u < LL_UNROLL; u++) {
                            const uint32_t q = q0 + (uint32_t)u * SYMM__MOE_THREADS;
                            if (q < total) {
                                const uint32_t j = q / nvx;
                                for (uint64_t m = smask[j]; m; m &= m - 1) {
                                    const int r = __ffsll((long long)m) - 1;
                                    if (pk)
                                        ll_put_pkt2(moe_peer(A, ll_pslot(A, p, me, stok[j]) + 32u * (q % nvx), r),
                                                    v[u], tag);
                                    else
                                        symm__cst16(moe_peer(A, ll_slot(A, p, me, stok[j]) + 16u * (q % nvx), r),
                                                    v[u], 1);
                                }
                            }
                        }
                    }
                }
                if (c0 == 0 && o0 == 0)
                    ll_stamp(A, LLS_D_XST);
                /* scales, four per 16 bytes (the slot's scales start 16-byte aligned) */
                for (uint32_t q = tid; q < nb * cq; q += SYMM__MOE_THREADS) {
                    const uint32_t j = q / cq, s0 = 4 * (q % cq);
                    symm__v4_t v;
                    uint32_t w[4] = {pw[0], pw[1], pw[2], pw[3]};
                    if (c0 != 0 || o0 != 0 || q != tid)
                        ll_ld_scales(A, (int64_t)(dpr + (uint64_t)stok[j] * dp), s0, w);
                    v.x = w[0];
                    v.y = w[1];
                    v.z = w[2];
                    v.w = w[3];
                    for (uint64_t m = smask[j]; m; m &= m - 1) {
                        const int r = __ffsll((long long)m) - 1;
                        if (pk)
                            ll_put_pkt2(moe_peer(A, ll_pslot(A, p, me, stok[j]) + 2u * A->x_bytes + 8u * s0, r), v,
                                        tag);
                        else
                            symm__cst16(moe_peer(A, ll_slot(A, p, me, stok[j]) + A->x_bytes + 4u * s0, r), v, 1);
                    }
                }
                /* plain rows: each row's flag, released behind the whole block's stores; lists posted
                 * block by block: the rows' entries instead (no flag), each where ll_post_lists placed it */
                if (big && !pk && all <= ctok && all * K >= LL_POST_ROUTES) {
                    symm__block_sync();
                    for (uint32_t x = tid; x < nb * K; x += SYMM__MOE_THREADS) {
                        const uint32_t j = x / K, k = x % K, rank = srank[(o0 + j) * K + k], i = stok[j];
                        const uint32_t ex = sidx[i * K + k];
                        if (rank != ~0u)
                            symm__st_b64(
                                moe_peer(A, MOE_U64(A, ll_list) + (((uint64_t)p * n + me) * L + ex % L) * A->cap + rank,
                                         (int)(ex / L)),
                                ((uint64_t)tag << 32) | (i << 8) | k, SYMM_SEM_RELEASE, SYMM_SCOPE_SYS);
                    }
                } else if (!pk) {
                    symm__block_sync();
                    for (uint32_t x = tid; x < nb * n; x += SYMM__MOE_THREADS) {
                        const uint32_t j = x / n, r = x % n;
                        if ((smask[j] >> r) & 1u)
                            MOE_RELEASE_PUT(A, tb_, (uint64_t *)(void *)(ll_slot(A, p, me, stok[j]) + foff), e,
                                            (int)r, A->x_bytes + 4u * cols);
                    }
                }
            }
        }
        if (last)
            break;
    }
    ll_stamp(A, LLS_D_SENT);
}

/* Most (local expert, source) items a block waits for at once: one thread
 * per (item, source) count, so SYMM__MOE_THREADS / n of them (all with one PE). */
#define LL_ITEMS SYMM__MOE_THREADS

/* The receive half; `ticket` (or NULL): the block is counted in it as the first waits start. */
SYMM__DEVICE_INTERNAL void ll_dispatch_recv(const symm__moe_kargs_t *A, uint64_t e, uint32_t *ticket, int big) {
    const uint32_t tid = symm__block_tid(), n = (uint32_t)A->n, L = A->local, dp = (uint32_t)A->dp;
    const uint32_t p = (uint32_t)(e & 1u), tag = ll_tag(e), nvx = A->x_bytes / 16u, cols = A->scale_cols;
    const uint32_t B = gridDim.x, items = n * L, ipb = SYMM__MOE_THREADS / n;
    const uint32_t rb = big ? LL_RROWS : ll_batch(nvx + cols); /* rows taken (entries, flags) at once */
    const uint64_t foff = ll_sdata(A), esz = A->x_esz;
    __shared__ uint32_t cnt[SYMM__MOE_THREADS];   /* [item of the round][source]: routes */
    __shared__ uint32_t ioff[LL_ITEMS], ipre[LL_ITEMS];
    __shared__ uint64_t sent0[LL_ITEMS]; /* each item's first list entry, as loaded with its count */
    __shared__ uint32_t smode[SYMM__MOE_MAX_PES];
    __shared__ uint32_t stl[LL_RROWS], ssrc[LL_RROWS], sle[LL_RROWS], srow[LL_RROWS];
    __shared__ const char *sfrom[LL_RROWS]; /* a plain row's slot */
    __shared__ char *sto[LL_RROWS];         /* its row of out_expert_x */
    symm__v4_t sv = {0, 0, 0, 0}; /* the batch's first scale (packet, or plain bits in x) */
    /* glob (at most a block's threads of items, and this PE's own routes at least
     * LL_POST_ROUTES, a proxy of what it receives: below, one item or two per block is less work
     * on the chain than all of them): every block waits for every item's count, one thread
     * each, and takes an equal share of all the rows (items in order: a contiguous range), so no
     * block copies more than its share whichever experts are loaded; else items go round-robin
     * over the blocks */
    const int glob = big && items <= SYMM__MOE_THREADS && (uint32_t)A->num_tokens * A->topk >= LL_POST_ROUTES;
    /* some source sends its rows as packets (smode, once the first counts are in); the small-call
     * kernel always takes the general copy */
    uint32_t pkany = big ? 0u : 1u;
    for (uint32_t i0 = glob ? 0 : blockIdx.x; i0 < items; i0 += glob ? items : B * ipb) {
        const uint32_t left = (items - i0 + B - 1) / B, ni = glob ? items : left < ipb ? left : ipb;
        const uint32_t istep = glob ? 1u : B; /* item j of the round: i0 + j * istep */
        uint32_t total, jlo = 0, jhi;
        /* the counts of every item of this round, at once */
        symm__block_sync();
        ll_count_late(A, ticket);
        if (i0 == (glob ? 0 : blockIdx.x))
            LL_FSTAMP(A, LLS_DG_CW);
        if (glob ? tid < items : tid < ni * n) {
            /* the count of (le, x): glob, item tid's own (its source is x); else item j's source x */
            const uint32_t j = glob ? tid : tid / n, x = tid % n, le = (i0 + j * istep) / n, s = (i0 + j * istep) % n;
            uint64_t first = 0;
            const uint64_t v =
                ll_wait_count(A, MOE_U64(A, ll_cnt) + ((uint64_t)p * n + x) * L + le, e,
                              x == s ? MOE_U64(A, ll_list) + (((uint64_t)p * n + s) * L + le) * A->cap : NULL, &first,
                              (int)x);
            cnt[tid] = (uint32_t)v & LL_ROUTES;
            if (x == s)
                sent0[j] = first;
            if (j == 0 || (glob && le == 0)) {
                smode[x] = ((uint32_t)(v >> 30) & 3u) | ((uint32_t)v & LL_CNT_EREL ? LL_SM_EREL : 0u);
                MOE_U32(A, ll_mode)[x] = (uint32_t)(v >> 30) & 3u; /* for the combine; every block agrees */
            }
        }
        symm__block_sync();
        if (i0 == (glob ? 0 : blockIdx.x))
            ll_stamp(A, LLS_D_CNT);
        for (uint32_t x = 0; big && x < n && i0 == (glob ? 0 : blockIdx.x); x++)
            pkany |= smode[x] & LL_MODE_DPKT;
        {
            uint32_t num = 0;
            if (tid < ni) {
                const uint32_t item = i0 + tid * istep, le = item / n, s = item % n;
                const uint32_t *c = &cnt[glob ? le * n : tid * n]; /* le's counts by source */
                uint32_t off = 0, sum = 0;
                for (uint32_t x = 0; x < n; x++) {
                    off += x < s ? c[x] : 0;
                    sum += c[x];
                }
                num = c[s];
                ioff[tid] = off;
                if (s == 0 && (!glob || le % B == blockIdx.x)) {
                    A->out_num[le] = (int32_t)sum;
                    MOE_U32(A, ll_rcnt)[le] = sum;
                }
            }
            /* the round's routes as one stream: item i's start */
            const uint32_t pre = moe_block_scan(num, &total);
            if (tid < ni)
                ipre[tid] = pre;
            if (i0 == (glob ? 0 : blockIdx.x))
                ll_stamp(A, LLS_D_SCAN);
        }
        jhi = total;
        if (glob) {
            jlo = (uint32_t)((uint64_t)total * blockIdx.x / B);
            jhi = (uint32_t)((uint64_t)total * (blockIdx.x + 1) / B);
        }
        for (uint32_t j0 = jlo; j0 < jhi; j0 += rb) {
            const uint32_t nb = jhi - j0 < rb ? jhi - j0 : rb;
            symm__block_sync();
            if (tid < nb) {
                const uint32_t j = j0 + tid;
                const uint32_t lo = ll_bisect(ipre, ni, j); /* route j's item */
                {
                    const uint32_t item = i0 + lo * istep, le = item / n, s = item % n, r = j - ipre[lo];
                    /* (an entry released behind its row: polled with acquire, not taken from the count's load) */
                    const int erel = (smode[s] & LL_SM_EREL) != 0;
                    uint32_t ent =
                        r == 0 && !erel && (uint32_t)(sent0[lo] >> 32) == tag
                            ? (uint32_t)sent0[lo]
                            : ll_take_entry(A, MOE_U64(A, ll_list) + (((uint64_t)p * n + s) * L + le) * A->cap + r, tag,
                                            erel);
                    const uint32_t tl = ent >> 8;
                    const uint64_t t = (uint64_t)tl * dp + s % dp;
                    if (j0 == jlo) {
                        LL_FPIN32(ent);
                        LL_FSTAMP(A, LLS_DG_E1);
                    }
                    if (!(smode[s] & (LL_MODE_DPKT | LL_SM_EREL)))
                        moe_wait(A, (const uint64_t *)(const void *)(ll_slot(A, p, s, tl) + foff), e, (int)s);
                    if (j0 == jlo)
                        LL_FSTAMP(A, LLS_DG_F1);
                    stl[tid] = tl;
                    ssrc[tid] = s;
                    sle[tid] = le;
                    srow[tid] = ioff[lo] + r;
                    if (!pkany) {
                        sfrom[tid] = ll_slot(A, p, s, tl);
                        sto[tid] = (char *)A->out_x +
                                   ((int64_t)le * A->ox_stride[0] + (int64_t)(ioff[lo] + r) * A->ox_stride[1]) *
                                       (int64_t)esz;
                    }
                    MOE_U64(A, ll_route)[(uint64_t)le * A->rows + ioff[lo] + r] =
                        (uint64_t)s | ((uint64_t)(ent & 255u) << 16) | (t << 32);
                }
            }
            symm__block_sync();
            if (i0 == (glob ? 0 : blockIdx.x) && j0 == jlo)
                ll_stamp(A, LLS_D_ENT);
            /* the first scales' loads go out with the rows' (a packet not there yet is polled again) */
            if (tid < nb * cols) {
                const uint32_t j = tid / cols, c = tid % cols, s = ssrc[j];
                if (smode[s] & LL_MODE_DPKT)
                    sv = symm__c_ld16_vol(ll_pslot(A, p, s, stl[j]) + 2u * A->x_bytes + 16u * (c / 2));
                else
                    sv.x = ((const uint32_t *)(const void *)(ll_slot(A, p, s, stl[j]) + A->x_bytes))[c];
            }
            /* x: 16 bytes per thread and step (packets: two, polled until they carry the tag);
             * plain rows alone (every source's): from the addresses each row's thread worked out */
            if (!pkany) {
                const uint32_t tv = nb * nvx;
                for (uint32_t q0 = tid; q0 < tv; q0 += SYMM__MOE_THREADS * LL_RUNROLL) {
                    symm__v4_t va[LL_RUNROLL];
#pragma unroll
                    for (int u = 0; u < LL_RUNROLL; u++) {
                        const uint32_t q = q0 + (uint32_t)u * SYMM__MOE_THREADS;
                        if (q < tv)
                            va[u] = symm__cld16(sfrom[q / nvx] + 16u * (q % nvx), 0);
                    }
                    if (q0 == tid && j0 == jlo) {
                        LL_FPIN32(va[0].x);
                        LL_FSTAMP(A, LLS_DG_C1);
                    }
#pragma unroll
                    for (int u = 0; u < LL_RUNROLL; u++) {
                        const uint32_t q = q0 + (uint32_t)u * SYMM__MOE_THREADS;
                        if (q < tv)
                            ll_st16(sto[q / nvx] + 16u * (q % nvx), va[u]);
                    }
                }
                if (j0 == jlo)
                    LL_FSTAMP(A, LLS_DG_C2);
            } else {
                const uint32_t tv = nb * nvx;
                for (uint32_t q0 = tid; q0 < tv; q0 += SYMM__MOE_THREADS * LL_UNROLL) {
                    symm__v4_t va[LL_UNROLL], vb[LL_UNROLL];
#pragma unroll
                    for (int u = 0; u < LL_UNROLL; u++) {
                        const uint32_t q = q0 + (uint32_t)u * SYMM__MOE_THREADS;
                        if (q < tv) {
                            const uint32_t j = q / nvx, s = ssrc[j];
                            if (smode[s] & LL_MODE_DPKT) {
                                const char *src = ll_pslot(A, p, s, stl[j]) + 32u * (q % nvx);
                                va[u] = symm__c_ld16_vol(src);
                                vb[u] = symm__c_ld16_vol(src + 16);
                            } else {
                                va[u] = symm__cld16(ll_slot(A, p, s, stl[j]) + 16u * (q % nvx), 0);
                            }
                        }
                    }
                    /* packets without the tag yet: loaded again all together until none is
                     * missing (one round trip per round, not one per packet) */
                    for (uint32_t polls = 0;;) {
                        uint32_t miss = 0;
#pragma unroll
                        for (int u = 0; u < LL_UNROLL; u++) {
                            const uint32_t q = q0 + (uint32_t)u * SYMM__MOE_THREADS;
                            if (q < tv && (smode[ssrc[q / nvx]] & LL_MODE_DPKT) &&
                                !(ll_pkt_ok(va[u], tag) && ll_pkt_ok(vb[u], tag)))
                                miss |= 1u << u;
                        }
                        if (miss == 0)
                            break;
#pragma unroll
                        for (int u = 0; u < LL_UNROLL; u++)
                            if ((miss >> u) & 1u) {
                                const uint32_t q = q0 + (uint32_t)u * SYMM__MOE_THREADS, j = q / nvx;
                                const char *src = ll_pslot(A, p, ssrc[j], stl[j]) + 32u * (q % nvx);
                                if (++polls % SYMM__WAIT_CHECK_EVERY == 0) /* the deadline, on one of them */
                                    (void)ll_pkt_data(A, src, tag, va[u], vb[u]);
                                va[u] = symm__c_ld16_vol(src);
                                vb[u] = symm__c_ld16_vol(src + 16);
                            }
                    }
#pragma unroll
                    for (int u = 0; u < LL_UNROLL; u++) {
                        const uint32_t q = q0 + (uint32_t)u * SYMM__MOE_THREADS;
                        if (q < tv) {
                            const uint32_t j = q / nvx, s = ssrc[j];
                            char *dst = (char *)A->out_x +
                                        ((int64_t)sle[j] * A->ox_stride[0] + (int64_t)srow[j] * A->ox_stride[1]) *
                                            (int64_t)esz + 16u * (q % nvx);
                            if (smode[s] & LL_MODE_DPKT) {
                                va[u].y = va[u].z;
                                va[u].z = vb[u].x;
                                va[u].w = vb[u].z;
                            }
                            ll_st16(dst, va[u]);
                        }
                    }
                }
            }
            /* scales */
            for (uint32_t q = tid; q < nb * cols; q += SYMM__MOE_THREADS) {
                const uint32_t j = q / cols, c = q % cols, s = ssrc[j];
                float f;
                if (smode[s] & LL_MODE_DPKT) {
                    /* data byte x_bytes + 4c lies in packet (x_bytes + 4c) / 8, half c % 2 */
                    const char *src = ll_pslot(A, p, s, stl[j]) + 2u * A->x_bytes + 16u * (c / 2);
                    symm__v4_t v = q == tid ? sv : symm__c_ld16_vol(src);
                    if (!ll_pkt_ok(v, tag))
                        v = ll_pkt_wait(A, src, tag, v);
                    f = symm__bits_f32(c % 2 ? v.z : v.x);
                } else {
                    f = q == tid ? symm__bits_f32(sv.x)
                                 : ((const float *)(const void *)(ll_slot(A, p, s, stl[j]) + A->x_bytes))[c];
                }
                A->out_scale[(int64_t)sle[j] * A->os_stride[0] + (int64_t)srow[j] * A->os_stride[1] +
                             (int64_t)c * A->os_stride[2]] = f;
            }
        }
    }
    ll_stamp(A, LLS_D_COPY);
}

/* Dispatch: the epoch is opened by the send half (ll_dispatch_send) or read
 * here; the block counted last stores it as it ends (every block read the
 * old value before it was counted; the next kernel on the stream sees the
 * new one), so no block waits for the count at the end. big (a constant of
 * each kernel): calls of LL_POST_ROUTES routes and more, whose lists go block
 * by block (ll_post_lists) and whose rows split evenly; the kernel of smaller
 * calls has none of that code, so its registers and chains are its own
 * (either kernel takes the rows of a source that used the other). */
SYMM__DEVICE_INTERNAL void ll_dispatch_kernel(const symm__moe_kargs_t *A, int big) {
    const uint32_t tid = symm__block_tid();
    const int send = (A->flags & SYMM_MOE_SEND) != 0;
    const int real = A->probe == SYMM__MOE_PROBE_NONE || A->probe == SYMM__MOE_PROBE_STAMPS ||
                     A->probe == SYMM__MOE_PROBE_TWICE;
    const int passes = A->probe == SYMM__MOE_PROBE_TWICE && send && (A->flags & SYMM_MOE_RECV) ? 2 : 1;
    __shared__ uint64_t se;
    uint32_t ticket = 0;
    uint64_t e = 0;
    ll_stamps_begin(A);
    ll_pdl_begin(A);
    if (blockIdx.x == 0 && tid == 0)
        atomicMax(&moe_state(A)->max_grid, gridDim.x);
#pragma unroll 1
    for (int pass = 0; pass < passes; pass++) { /* SYMM_MOE_LL_PROBE=twice: dispatches e and e + 1 */
        if (pass)
            symm__block_sync();
        if (send && real) {
            MOE_TRACE_HALF(A, SYMM_TRACE_COLL_MOE_DISPATCH, ll_dispatch_send(A, &se, pass, big));
        } else {
            if (tid == 0)
                se = *(volatile uint64_t *)&moe_state(A)->epoch + (send ? 1u : 0u);
            symm__block_sync();
            if (send && tid == 0)
                ticket = ll_count_block(A, SYMM__MK_LL_DISPATCH);
        }
        e = se;
        if (A->probe == SYMM__MOE_PROBE_HOP)
            ll_probe_hop(A, e, 0);
        else if (real && (A->flags & SYMM_MOE_RECV))
            MOE_TRACE_HALF(A, SYMM_TRACE_COLL_MOE_DISPATCH_RECV, ll_dispatch_recv(A, e, send ? &ticket : NULL, big));
        if (send && real) /* (a send half alone, or a receive half with no items here) */
            ll_count_late(A, &ticket);
    }
    if (ticket == gridDim.x) { /* the thread that counted the block counted last */
        atomicExch(&moe_state(A)->done[SYMM__MK_LL_DISPATCH], 0u);
        *(volatile uint64_t *)&moe_state(A)->epoch = e;
    }
    ll_stamps_end(A, "dispatch", e, LLS_D_END);
}

__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ll_dispatch(const __grid_constant__ symm__moe_kargs_t a) {
    ll_dispatch_kernel(&a, 0);
}

__global__ void __launch_bounds__(SYMM__MOE_THREADS)
    symm__k_ll_dispatch_big(const __grid_constant__ symm__moe_kargs_t a) {
    ll_dispatch_kernel(&a, 1);
}
