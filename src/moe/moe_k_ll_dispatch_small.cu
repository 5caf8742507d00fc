/*
 * moe_k_ll_dispatch_small.cu - the small dispatch (a handle's ll_small:
 * every row as packets, a header per PE instead of expert lists) and its
 * kernel, symm__k_ll_dispatch_small. The protocol: moe_ll.cuh.
 */
#include "moe/moe_ll.cuh"


/* Routes one source may send one PE in a small dispatch: each of its tokens names at most
 * min(K, L) of that PE's experts (the call's plan, symm__moe_llplan_t). */
SYMM__DEVICE_INTERNAL uint32_t ll_hmax(const symm__moe_kargs_t *A) { return A->llp.hmax; }

/* Header of source s at parity p on this PE: packet 0 (routes, mode), then one packet a route. */
SYMM__DEVICE_INTERNAL char *ll_hslot(const symm__moe_kargs_t *A, uint32_t p, uint32_t s) {
    return MOE_AT(A, ll_hdr) + ((uint64_t)p * (uint32_t)A->n + s) * (1u + ll_hmax(A)) * 16u;
}

/* 8 data bytes (lo, hi) as one packet at dst. */
SYMM__DEVICE_INTERNAL void ll_put_pkt1(void *dst, uint32_t lo, uint32_t hi, uint32_t tag) {
    symm__v4_t a;
    a.x = lo;
    a.y = tag;
    a.z = hi;
    a.w = tag;
    symm__c_st16_vol(dst, a);
}

/* ll_valid of route k, whose expert ix the thread holds, its token's slots staged at row: with
 * top-k at most LL_KREG the earlier slots' loads all go out at once (unrolled), not one after
 * another. */
SYMM__DEVICE_INTERNAL int ll_valid_staged(const uint32_t *row, uint32_t k, uint32_t ix, uint32_t K, uint32_t E) {
    int ok = ix < E;
    if (K > LL_KREG)
        return ll_valid(row, k, E);
#pragma unroll
    for (uint32_t j = 0; j + 1 < LL_KREG; j++)
        if (j < k && row[j] == ix)
            ok = 0;
    return ok;
}

/* The PEs that token t's valid routes go to, found by one warp without shared memory or a
 * barrier: lane k holds slot k (and k + 32), a shuffle per slot finds repeats (ll_valid's rule). */
SYMM__DEVICE_INTERNAL uint64_t ll_warp_mask(const symm__moe_kargs_t *A, uint32_t a, uint32_t b) {
    const uint32_t lane = symm__block_tid() & 31u, K = A->topk, E = A->experts;
    int oka = a < E, okb = b < E;
    uint64_t m;
    for (uint32_t j = 0; j < K && j < 32u; j++) {
        const uint32_t x = __shfl_sync(MOE_FULL, a, j);
        oka &= !(j < lane && x == a);
        okb &= x != b;
    }
    for (uint32_t j = 32; j < K; j++) {
        const uint32_t x = __shfl_sync(MOE_FULL, b, j - 32u);
        okb &= !(j < lane + 32u && x == b);
    }
    m = (oka ? 1ull << ll_fdiv(a, A->llp.ml) : 0ull) | (okb ? 1ull << ll_fdiv(b, A->llp.ml) : 0ull);
    return ((uint64_t)__reduce_or_sync(MOE_FULL, (uint32_t)(m >> 32)) << 32) | __reduce_or_sync(MOE_FULL, (uint32_t)m);
}

/* The send half's first unit, worked out before the PDL wait (ll_small_dispatch): the header
 * block's route (token index hi, slot hk; what & 1; h32 = 32 / K) and a row block's token (index ri, id rt) and
 * vectors rlo .. rhi - 1 of its row (what & 4; what & 2: this thread has one). */
typedef struct ll_sunit {
    uint32_t hi, hk, h32, ri, rlo, rhi, what;
    uint64_t rt;
} ll_sunit_t;

/* The rows of the tokens after each row block's first (more tokens than row blocks): tokens
 * blockIdx.x + RB, blockIdx.x + 2 RB, ... below the bound, a whole row each. Out of line: a decode
 * step never takes it, and inlined, its code lay between the decode path's steps (a far jump is a
 * new stretch of instructions to fetch). Every thread of the block calls it. */
SYMM__NOINLINE void ll_small_send_more(const symm__moe_kargs_t *A, uint64_t e, uint32_t bound) {
    const uint32_t lane = symm__block_tid() & 31u, K = A->topk, E = A->experts, dp = (uint32_t)A->dp;
    const uint32_t dpr = A->llp.dpr, all = A->llp.all, nv = A->llp.nv;
    const uint32_t RB = gridDim.x > 1 ? gridDim.x - 1u : 1u;
    const uint32_t me = (uint32_t)A->me, p = (uint32_t)(e & 1u), tag = ll_tag(e);
    for (uint32_t u = blockIdx.x + RB; u < all; u += RB) {
        const uint64_t t = dpr + (uint64_t)u * dp;
        if (t >= bound)
            break; /* (tokens go in order: the later ones are at or above the bound too) */
        const uint32_t xa = lane < K ? ((const uint32_t *)A->idx)[t * K + lane] : E;
        const uint32_t xb = lane + 32u < K ? ((const uint32_t *)A->idx)[t * K + lane + 32u] : E;
        ll_put_slice(A, ll_pslot(A, p, me, u), t, 0, nv, ll_warp_mask(A, xa, xb), tag, NULL);
    }
}

/* The send half of a small dispatch (e: its epoch, bound: the tokens it sends, both published by
 * the caller's barrier; ix, xa, xb, pv: this thread's prologue loads, see ll_small_dispatch).
 * The last block (of two or more) builds every PE's header: each thread one route of this PE's
 * tokens, its place in its PE's list from a match over the warp and the warps' counts, so one
 * barrier; the others send the rows, a token's row once to every PE it goes to, in slices when
 * tokens are fewer than those blocks. A token is below the bound when its id is (no division). */
SYMM__DEVICE_INTERNAL void ll_small_send(const symm__moe_kargs_t *A, uint64_t e, uint32_t bound, const ll_sunit_t *su,
                                         uint32_t ix, uint32_t xa, uint32_t xb, const symm__v4_t *pv0, uint32_t *sidx,
                                         uint32_t *wcnt) {
    const uint32_t tid = symm__block_tid(), lane = tid & 31u, warp = tid >> 5;
    const uint32_t K = A->topk, L = A->local, E = A->experts, n = (uint32_t)A->n, dp = (uint32_t)A->dp;
    const uint32_t me = (uint32_t)A->me, dpr = A->llp.dpr, B = gridDim.x, p = (uint32_t)(e & 1u);
    const uint32_t all = A->llp.all, tag = ll_tag(e);
    const uint32_t RB = B > 1 ? B - 1 : 1, mode = A->llp.dmode;
    if (blockIdx.x == B - 1) {
        /* the header: route q = i * K + k of token i (below the bound) */
        const uint32_t q = tid, i = su->hi, k = su->hk;
        const uint64_t t = dpr + (uint64_t)i * dp;
        int ok = 0, one;
        uint32_t r = 0xffffffffu, mm, pos = 0, nw;
        if ((su->what & 1u) && t < bound) {
            ok = ll_valid_staged(&sidx[q - k], k, ix, K, E);
            if (ix >= E) {
                if (ix != SYMM_MOE_NO_EXPERT)
                    moe_error(A, SYMM__MOE_ERR_EXPERT_RANGE, (int64_t)t, (int64_t)k, (int64_t)ix);
            } else if (!ok) {
                moe_error(A, SYMM__MOE_ERR_EXPERT_DUP, (int64_t)t, (int64_t)k, (int64_t)ix);
            }
            if (ok)
                r = ll_fdiv(ix, A->llp.ml);
        }
        LL_FPIN32(r);
        LL_FSTAMP(A, LLS_DS_VALID);
        /* the routes are threads 0 .. routes - 1: with 32 at most (a decode step's) warp 0 alone
         * posts the header, with no barrier (thread 32's route, if any, is token h32's slot
         * 32 - K x h32) */
        one = !(32u < all * K && dpr + (uint64_t)su->h32 * dp < bound);
        if (!one || warp == 0) {
            mm = __match_any_sync(MOE_FULL, r);
            if (ok && (mm & ((1u << lane) - 1u)) == 0)
                wcnt[warp * n + r] = (uint32_t)__popc(mm);
            if (one) {
                __syncwarp();
                nw = 1;
            } else {
                nw = ((uint32_t)__syncthreads_count((su->what & 1u) && t < bound) + 31u) / 32u;
            }
            ll_stamp(A, LLS_DS_HSYNC);
            if (ok) {
#pragma unroll 1 /* (none in a decode step: kept short, not unrolled into code the step jumps over) */
                for (uint32_t w = 0; w < warp; w++)
                    pos += wcnt[w * n + r];
                pos += (uint32_t)__popc(mm & ((1u << lane) - 1u));
                {
                    uint64_t ha = (uint64_t)moe_peer(A, ll_hslot(A, p, me) + 16u * (1u + pos), (int)r);
                    LL_FPIN64(ha);
                    LL_FSTAMP(A, LLS_DS_HADDR);
                    ll_put_pkt1((void *)ha, (ix - r * L) | (k << 24), i, tag);
                }
            }
            for (uint32_t x = one ? lane : tid; x < n; x += one ? 32u : SYMM__MOE_THREADS) {
                uint32_t c = 0;
#pragma unroll 1
                for (uint32_t w = 0; w < nw; w++)
                    c += wcnt[w * n + x];
                ll_put_pkt1(moe_peer(A, ll_hslot(A, p, me), (int)x), c, mode, tag);
            }
            ll_stamp(A, LLS_D_LIST);
        }
        if (B > 1)
            return;
    }
    /* rows: the first unit as the prologue found it (token ri, vectors rlo .. rhi - 1, its first
     * vector and the warp's view of its slots loaded); then, with more tokens than row blocks (a
     * token a block), tokens blockIdx.x + RB, ... */
    if ((su->what & 4u) && su->rt < bound && warp * 32u < su->rhi - su->rlo) { /* (warps with no vector leave) */
        const uint64_t mask = ll_warp_mask(A, xa, xb);
        ll_stamp(A, LLS_D_MASK);
        ll_put_slice(A, ll_pslot(A, p, me, su->ri), su->rt, su->rlo, su->rhi, mask, tag, pv0);
        ll_stamp(A, LLS_D_XST);
    }
    if (blockIdx.x + RB < all) /* (block-uniform) */
        ll_small_send_more(A, e, bound);
}

#define LL_HPOLL 4 /* header entries a lane polls at once */

/* The receive half's split (ll_small_recv) and this block's first unit in it, arithmetic on the
 * arguments alone (worked out before the PDL wait): sl slices a (source, token slot) pair, units
 * in all; unit blockIdx.x is pair (s, tl), vectors lo .. hi - 1 of its row. The thread polls that
 * row's vectors v0, v0 + threads, ... below vend from the start. fast: every block has one unit
 * at most, a slice of at most a vector a thread, and its (route, vector) pairs fit the block in
 * a few rounds (a decode step's); then the block is groups of G threads (G: the power of two at
 * or above the longest slice, 2^lg), thread x polls vector lo + x % G and stores it for the
 * unit's routes di = x / G, di + threads / G, ..., so each thread polls the one vector it stores,
 * no thread waits for another's, and no division is needed. */
typedef struct ll_runit {
    uint32_t sl, units, s, tl, lo, hi, v0, vend, di, lg, fast;
} ll_runit_t;

#define LL_FAST_ROUNDS SYMM__MOE_SMALL_FAST_ROUNDS /* most routes a thread of the decode form stores its vector for */
#define LL_SHIST SYMM__MOE_SMALL_SHIST /* most (source, local expert) counts the decode form keeps */

/* (the split, the decode form and its groups are the call's plan, symm__moe_ll_plan: the block's
 * unit is a few multiplies of its index) */
SYMM__DEVICE_INTERNAL ll_runit_t ll_small_unit(const symm__moe_kargs_t *A) {
    const symm__moe_llplan_t *P = &A->llp;
    const uint32_t cap = A->cap, u = blockIdx.x, nv = P->nv, kl = P->kl, tid = symm__block_tid();
    uint32_t q, z;
    ll_runit_t r;
    r.sl = P->rsl;
    r.units = P->runits;
    q = ll_fdiv(u, P->mrsl);
    z = u - q * r.sl;
    r.s = ll_fdiv(q, P->mcap);
    r.tl = q - r.s * cap;
    r.lo = ll_fdiv(nv * z, P->mrsl);
    r.hi = ll_fdiv(nv * (z + 1), P->mrsl);
    r.lg = P->rlg;
    /* (grid-uniform: the blocks that own a pair's first slice note its routes for the combine) */
    r.fast = P->rfast;
    r.v0 = r.lo + tid;
    r.vend = u < r.units ? r.hi : 0u;
    r.di = 0;
    if (r.fast) {
        r.v0 = r.lo + (tid & ((1u << r.lg) - 1u));
        r.di = tid >> r.lg;
        r.vend = u < r.units && r.v0 < r.hi && r.di < kl ? r.v0 + 1u : 0u;
    }
    return r;
}

/* Vector v of a received row (data bytes d) into row `row` of local expert le: 16 bytes of x
 * (v < nvx), else a quad of its scales. */
SYMM__DEVICE_INTERNAL void ll_small_put_vec(const symm__moe_kargs_t *A, uint32_t le, uint32_t row, uint32_t v,
                                            symm__v4_t d) {
    const uint32_t nvx = A->x_bytes / 16u, cols = A->scale_cols;
    if (v < nvx) {
        ll_st16((char *)A->out_x + ((int64_t)le * A->ox_stride[0] + (int64_t)row * A->ox_stride[1]) * (int64_t)A->x_esz +
                    16u * v,
                d);
    } else {
        const uint32_t w[4] = {d.x, d.y, d.z, d.w};
        for (uint32_t j = 0; j < 4 && 4u * (v - nvx) + j < cols; j++)
            A->out_scale[(int64_t)le * A->os_stride[0] + (int64_t)row * A->os_stride[1] +
                         (int64_t)(4u * (v - nvx) + j) * A->os_stride[2]] = symm__bits_f32(w[j]);
    }
}

/* Load again this thread's first-unit packets (ll_runit_t: v0, v0 + threads, ... below vend) that
 * do not carry the tag yet; whether any did not. A poll round of the header loops issues these
 * with its own loads, so the row comes in the same round trips as the header. */
SYMM__DEVICE_INTERNAL uint32_t ll_small_repoll(const char *src, const ll_runit_t *ru, uint32_t tag, symm__v4_t *va,
                                               symm__v4_t *vb, int nx) {
    uint32_t miss = 0;
#pragma unroll
    for (int x = 0; x < LL_UNROLL; x++) {
        if (x >= nx)
            break;
        const uint32_t v = ru->v0 + (uint32_t)x * SYMM__MOE_THREADS;
        if (v < ru->vend && !(ll_pkt_ok(va[x], tag) && ll_pkt_ok(vb[x], tag))) {
            miss |= 1u << x;
            va[x] = symm__c_ld16_vol(src + 32u * v);
            vb[x] = symm__c_ld16_vol(src + 32u * v + 16u);
        }
    }
    return miss;
}

/* The decode form's placement of one 32-entry chunk of source s's header (entry q = this lane's,
 * in rent), by the warp that polled it, before the barrier that publishes the headers: the
 * entry's rank among s's earlier entries of its expert (rrow; a match over the chunk plus the
 * chunk's running count in shist[s][expert]), and the first entry and number of entries of each
 * token (tfirst, tn: the entries of one token are adjacent). *ylast: the token of the chunk's
 * last entry, for the next chunk's first. The warp calls it for every chunk in order. */
SYMM__DEVICE_INTERNAL void ll_small_place(const symm__moe_kargs_t *A, uint32_t s, uint32_t q, uint32_t cnt,
                                          const uint2 *rent, uint32_t *rrow, uint32_t *shist, uint16_t *tfirst,
                                          uint32_t *tn, uint32_t *ylast) {
    const uint32_t lane = symm__block_tid() & 31u, L = A->local, cap = A->cap, ok = q < cnt, hmax = ll_hmax(A);
    const uint2 r = ok ? rent[s * hmax + q] : make_uint2(0xffffffffu, 0u);
    const uint32_t le = r.x & 0xffffffu, y = r.y, m = __match_any_sync(MOE_FULL, ok ? le : 0xffffffffu);
    const uint32_t lt = m & ((1u << lane) - 1u), h = ok ? shist[s * L + le] : 0u;
    const uint32_t yp = __shfl_up_sync(MOE_FULL, y, 1);
    __syncwarp();
    if (ok) {
        rrow[s * hmax + q] = h + (uint32_t)__popc(lt);
        if (lt == 0)
            shist[s * L + le] = h + (uint32_t)__popc(m);
        if (q == 0 || y != (lane == 0 ? *ylast : yp))
            tfirst[s * cap + y] = (uint16_t)q;
        atomicAdd(&tn[s * cap + y], 1u);
    }
    *ylast = __shfl_sync(MOE_FULL, y, 31);
    __syncwarp(); /* (the counts, for the next chunk's reads) */
}

/* The decode form's copy (ru->fast), after the barrier that published the headers and their
 * placement (ll_small_place): lane d of every warp takes the unit's token's d-th route here, its
 * row the entry's rank in its source plus the earlier sources' counts of its expert (a few
 * shared loads). Each thread stores its vector into its routes' rows (ll_runit_t); no barrier,
 * no shared copy of the slice. The block with the pair's first slice notes the routes for the
 * combine. */
SYMM__DEVICE_INTERNAL void ll_small_copy_fast(const symm__moe_kargs_t *A, uint32_t tag, const ll_runit_t *ru,
                                              const char *src, symm__v4_t a, symm__v4_t b, const uint2 *rent,
                                              const uint32_t *scnt, const uint32_t *smode, const uint32_t *rrow,
                                              const uint32_t *shist, const uint16_t *tfirst, const uint32_t *tn) {
    const uint32_t tid = symm__block_tid(), lane = tid & 31u, s = ru->s, tl = ru->tl, hmax = ll_hmax(A);
    const uint32_t kl = A->topk < A->local ? A->topk : A->local, L = A->local, nd = tn[s * A->cap + tl];
    uint32_t first, xd = 0xffffffffu, kd = 0, c = 0, le, row;
    if (nd == 0)
        return; /* (no route of this token comes here: its slot holds nothing of this call) */
    first = tfirst[s * A->cap + tl];
    LL_FPIN32(first);
    LL_FSTAMP(A, LLS_DS_UNIT);
    if (lane < nd) {
        const uint2 r = rent[s * hmax + first + lane];
        xd = r.x & 0xffffffu;
        kd = r.x >> 24;
        c = rrow[s * hmax + first + lane];
        for (uint32_t s2 = 0; s2 < s; s2++)
            c += shist[s2 * L + xd];
    }
    ll_stamp(A, LLS_D_SCAN);
    if (ru->v0 < ru->vend && ru->di < nd) { /* (its later routes di + threads / G, ... are later ones) */
        a = ll_pkt_data(A, src + 32u * ru->v0, tag, a, b);
        ll_stamp(A, LLS_D_ENT);
    }
    for (uint32_t x = 0; x < ((kl << ru->lg) + SYMM__MOE_THREADS - 1u) >> 9; x++) { /* (threads = 2^9) */
        const uint32_t di = ru->di + (x << (9u - ru->lg));
        le = __shfl_sync(MOE_FULL, xd, di & 31u);
        row = __shfl_sync(MOE_FULL, c, di & 31u);
        LL_FPIN32(row);
        if (x == 0)
            LL_FSTAMP(A, LLS_DS_RD);
        if (ru->v0 < ru->vend && di < nd)
            ll_small_put_vec(A, le, row, ru->v0, a);
        if (x == 0)
            LL_FSTAMP(A, LLS_DS_ST1);
    }
    if (tid < 32u && ru->lo == 0 && lane < nd) { /* the routes for combine, by row and in the flat list */
        const uint32_t dp = (uint32_t)A->dp;
        uint32_t P = first + lane;
        for (uint32_t s2 = 0; s2 < s; s2++)
            P += scnt[s2];
        {
            const uint64_t rw = (uint64_t)s | ((uint64_t)kd << 16) | (((uint64_t)tl * dp + s % dp) << 32);
            MOE_U64(A, ll_route)[(uint64_t)xd * A->rows + c] = rw;
            MOE_U64(A, ll_flat)[2u + 2u * P] = rw;
            MOE_U64(A, ll_flat)[3u + 2u * P] = ((uint64_t)xd << 32) | ((uint64_t)smode[s] << 30) | c;
        }
    }
}

/* Every local expert's rows without a barrier (decode form, after the copy): block b's thread x
 * the experts b + x x blocks, ... (no division: this runs last in every block, cold, so it is
 * kept to a few instructions), each the sum of the sources' counts ll_small_place kept. */
SYMM__DEVICE_INTERNAL void ll_small_count_fast(const symm__moe_kargs_t *A, const uint32_t *shist) {
    const uint32_t n = (uint32_t)A->n, L = A->local;
#pragma unroll 1
    for (uint32_t x = blockIdx.x + symm__block_tid() * gridDim.x; x < L; x += SYMM__MOE_THREADS * gridDim.x) {
        uint32_t c = 0;
#pragma unroll 1
        for (uint32_t s = 0; s < n; s++)
            c += shist[s * L + x];
        A->out_num[x] = (int32_t)c;
        MOE_U32(A, ll_rcnt)[x] = c;
    }
}

/* The kernel's end (the epoch rule of symm__k_ll_dispatch): the thread that counted the block last
 * (ticket = blocks) stores the epoch; the handle's most blocks noted; the stamps. */
SYMM__DEVICE_INTERNAL void ll_small_end(const symm__moe_kargs_t *A, uint64_t e, uint32_t ticket) {
    if (blockIdx.x == 0 && symm__block_tid() == 0)
        atomicMax(&moe_state(A)->max_grid, gridDim.x);
    if (ticket == gridDim.x) {
        atomicExch(&moe_state(A)->done[SYMM__MK_LL_DISPATCH], 0u);
        *(volatile uint64_t *)&moe_state(A)->epoch = e;
    }
    ll_stamps_end(A, "dispatch-small", e, LLS_DS_END);
}

/* The receive half of a small dispatch (epoch e; ticket: the block is counted as its polls start,
 * or NULL). Its units are (source s, token slot tl, slice z), known before any header: unit u =
 * (s, tl) u / sl, slice u % sl, where sl splits a row when the pairs are fewer than the blocks.
 * So a block's first unit's row packets are loaded with the headers and loaded again in each
 * round that polls a packet 0, in the same round trips. Every block polls every source's header
 * (warp w: sources w, w + warps, ...; packet 0 and the first entries loaded together, in every
 * round); one barrier. The routes in source order, then token order, are pplx's rows, so a route's row is the number of
 * routes before it with the same expert. Decode form (ru->fast): the polling warp places its
 * source's entries (ll_small_place) and each thread stores its own vector (ll_small_copy_fast),
 * with no other barrier. Otherwise the
 * block places every route in shared memory (a barrier) and a unit whose token names experts
 * here copies its slice to each of their rows (loaded once). A unit no route names is dropped
 * unread. Then block b counts its share of the experts' rows. */
SYMM__DEVICE_INTERNAL void ll_small_recv(const symm__moe_kargs_t *A, uint64_t e, uint32_t *ticket, uint32_t *hleft,
                                         const ll_runit_t *ru) {
    const uint32_t tid = symm__block_tid(), lane = tid & 31u, warp = tid >> 5;
    const uint32_t n = (uint32_t)A->n, L = A->local, dp = (uint32_t)A->dp, B = gridDim.x, hmax = ll_hmax(A);
    const uint32_t p = (uint32_t)(e & 1u), tag = ll_tag(e), nv = A->llp.nv, cap = A->cap, pairs = n * cap;
    const uint32_t sl = ru->sl, units = ru->units;
    __shared__ uint2 rent[SYMM__MOE_SMALL_RECV]; /* [source][route]: expert | k << 24, token / dp */
    __shared__ uint32_t rrow[SYMM__MOE_SMALL_RECV]; /* [source][route]: its row at its expert */
    __shared__ uint32_t scnt[SYMM__MOE_MAX_PES], smode[SYMM__MOE_MAX_PES], hist[SYMM__MOE_THREADS];
    __shared__ uint32_t pcnt[SYMM__MOE_SMALL_RECV];  /* [source][token slot]: its routes here */
    __shared__ uint16_t pdst[SYMM__MOE_SMALL_RECV];  /* [source][token slot][kl]: those routes (rent index);
                                                      * decode form: [source][token slot] its first entry */
    __shared__ symm__v4_t sdat[SYMM__MOE_THREADS];  /* a slice's vectors, for the copy's (route, vector) pairs */
    uint32_t *const shist = (uint32_t *)sdat;       /* decode form: [source][local expert] routes (LL_SHIST) */
    symm__v4_t va[LL_UNROLL], vb[LL_UNROLL]; /* the first unit's first packets, loaded with the headers */
    const uint32_t kl = A->topk < L ? A->topk : L;
    const char *const src0 = ll_pslot(A, p, ru->s, ru->tl); /* the first unit's row */
    uint32_t R = 0;
#pragma unroll
    for (int x = 0; x < LL_UNROLL; x++) {
        const uint32_t v = ru->v0 + (uint32_t)x * SYMM__MOE_THREADS;
        if (v < ru->vend) {
            va[x] = symm__c_ld16_vol(src0 + 32u * v);
            vb[x] = symm__c_ld16_vol(src0 + 32u * v + 16u);
        }
    }
    if (!ru->fast) { /* (the decode form's counters: each polling warp clears its own source's) */
#pragma unroll 1 /* (a few rounds at most: short code, no unrolled copies to jump over) */
        for (uint32_t x = tid; x < pairs; x += SYMM__MOE_THREADS)
            pcnt[x] = 0;
    }
    hist[tid] = 0; /* (published by the barrier after the headers) */
    ll_count_late(A, ticket); /* (after this thread's loads: its warp waits for the atomic) */
    LL_FSTAMP(A, LLS_DS_RECV);
    for (uint32_t s = warp; s < n; s += SYMM__MOE_WARPS) {
        const char *h = ll_hslot(A, p, s);
        symm__v4_t h0 = symm__c_ld16_vol(h), ev[LL_HPOLL];
        uint32_t cnt, mode, polls = 0;
        uint64_t t0 = 0;
#pragma unroll
        for (uint32_t j = 0; j < LL_HPOLL; j++)
            if (lane + 32u * j < hmax)
                ev[j] = symm__c_ld16_vol(h + 16u * (1u + lane + 32u * j));
        if (ru->fast) {
            /* source s's counters (ll_small_place), cleared by the warp that keeps them, as its loads
             * travel: no other warp touches them before the barrier after the headers (cleared by
             * every thread instead, with no barrier before this warp's placement, a slower warp's
             * clearing could come after it). (sdat's room: the decode form copies no slice through it.) */
#pragma unroll 1
            for (uint32_t x = lane; x < L; x += 32u)
                shist[s * L + x] = 0;
#pragma unroll 1
            for (uint32_t x = lane; x < cap; x += 32u)
                pcnt[s * cap + x] = 0;
        }
        if (s == 0)
            LL_FSTAMP(A, LLS_DS_HPOLL);
        while (!__all_sync(MOE_FULL, ll_pkt_ok(h0, tag))) {
            if (++polls % SYMM__WAIT_CHECK_EVERY == 0)
                t0 = symm__wait_check(&A->ctx, h, SYMM_CMP_EQ, tag, h0.y == tag ? h0.w : h0.y, t0);
            h0 = symm__c_ld16_vol(h);
#pragma unroll
            for (uint32_t j = 0; j < LL_HPOLL; j++) /* (the entries too: posted as packet 0 is) */
                if (lane + 32u * j < hmax && !ll_pkt_ok(ev[j], tag))
                    ev[j] = symm__c_ld16_vol(h + 16u * (1u + lane + 32u * j));
            (void)ll_small_repoll(src0, ru, tag, va, vb, 1);
        }
        if (s == 0)
            LL_FSTAMP(A, LLS_DS_H0);
        cnt = __shfl_sync(MOE_FULL, h0.x, 0);
        mode = __shfl_sync(MOE_FULL, h0.z, 0);
        if (lane == 0) {
            scnt[s] = cnt;
            smode[s] = mode & 3u;
        }
        for (uint32_t i0 = 0; i0 < cnt; i0 += 32u * LL_HPOLL) {
            if (i0 != 0) {
#pragma unroll
                for (uint32_t j = 0; j < LL_HPOLL; j++)
                    if (i0 + lane + 32u * j < cnt)
                        ev[j] = symm__c_ld16_vol(h + 16u * (1u + i0 + lane + 32u * j));
            }
            for (polls = 0;;) {
                uint32_t miss = 0;
#pragma unroll
                for (uint32_t j = 0; j < LL_HPOLL; j++)
                    if (i0 + lane + 32u * j < cnt && !ll_pkt_ok(ev[j], tag))
                        miss |= 1u << j;
                if (!__any_sync(MOE_FULL, miss != 0))
                    break;
#pragma unroll
                for (uint32_t j = 0; j < LL_HPOLL; j++)
                    if ((miss >> j) & 1u) {
                        const char *q = h + 16u * (1u + i0 + lane + 32u * j);
                        if (++polls % SYMM__WAIT_CHECK_EVERY == 0)
                            t0 = symm__wait_check(&A->ctx, q, SYMM_CMP_EQ, tag,
                                                  ev[j].y == tag ? ev[j].w : ev[j].y, t0);
                        ev[j] = symm__c_ld16_vol(q);
                    }
            }
#pragma unroll
            for (uint32_t j = 0; j < LL_HPOLL; j++)
                if (i0 + lane + 32u * j < cnt)
                    rent[s * hmax + i0 + lane + 32u * j] = make_uint2(ev[j].x, ev[j].z);
        }
        if (ru->fast) {
            __syncwarp();
#pragma unroll 1
            for (uint32_t q0 = 0, ylast = 0; q0 < cnt; q0 += 32u)
                ll_small_place(A, s, q0 + lane, cnt, rent, rrow, shist, pdst, pcnt, &ylast);
        }
    }
    if (warp < n) {
        __syncwarp();
        LL_FSTAMP(A, LLS_DS_HENT);
        if (lane == 0)
            atomicSub(hleft, 1u);
    }
    /* While other warps still wait for headers, the first unit's row packets are polled: they
     * travel beside the headers, so they are mostly in when the routes are placed, not a round
     * trip after. A slot no route names this call never gets the tag; the polls end with the
     * headers either way (and a packet with the tag is this call's: tags differ between the
     * calls that share a buffer). (hleft is read before the packets: a warp leaves as the
     * headers are in, its loads in flight.) */
    while (*(volatile uint32_t *)hleft != 0 && ll_small_repoll(src0, ru, tag, va, vb, LL_UNROLL) != 0) {
    }
    symm__block_sync();
    ll_stamp(A, LLS_D_CNT);
    if (ru->fast) {
        if (blockIdx.x < units)
            ll_small_copy_fast(A, tag, ru, src0, va[0], vb[0], rent, scnt, smode, rrow, shist, pdst, pcnt);
        ll_stamp(A, LLS_D_COPY);
        /* the notes for the combine and the experts' row counts here, so that their code follows the
         * copy's and not the general form's: a far jump is a new stretch of instructions to fetch */
        if (blockIdx.x == 0 && tid < n)
            MOE_U32(A, ll_mode)[tid] = smode[tid];
        if (blockIdx.x == 0 && tid == 0) {
            for (uint32_t s = 0; s < n; s++)
                R += scnt[s];
            MOE_U64(A, ll_flat)[0] = R;
        }
        LL_FSTAMP(A, LLS_DS_NOTE);
        ll_small_count_fast(A, shist);
        LL_FSTAMP(A, LLS_DS_XCNT);
        ll_small_end(A, e, ticket != NULL ? *ticket : 0u); /* (the kernel's end here too, for the same reason) */
        return;
    } else {
        for (uint32_t s = 0; s < n; s++)
            R += scnt[s];
        /* every route's row: the routes before it (earlier sources, earlier tokens) of its expert;
         * at most 32 routes (a decode step's): one warp, a lane a route, counted by matches, not by a
         * loop over the routes before it */
        for (uint32_t P = tid; P < R && (R > 32u || warp == 0); P += SYMM__MOE_THREADS) {
            uint32_t s = 0, i = P, c = 0, le;
            while (i >= scnt[s]) {
                i -= scnt[s];
                s++;
            }
            le = rent[s * hmax + i].x & 0xffffffu;
            if (R <= 32u) {
                const uint32_t pr = s * cap + rent[s * hmax + i].y, act = R < 32u ? (1u << R) - 1u : MOE_FULL;
                const uint32_t below = act & ((1u << lane) - 1u), mp = __match_any_sync(act, pr);
                c = (uint32_t)__popc(__match_any_sync(act, le) & below);
                pdst[pr * kl + (uint32_t)__popc(mp & below)] = (uint16_t)(s * hmax + i);
                if ((mp & below) == 0)
                    pcnt[pr] = (uint32_t)__popc(mp);
            } else {
                for (uint32_t s2 = 0; s2 <= s; s2++) {
                    const uint32_t lim = s2 < s ? scnt[s2] : i;
                    for (uint32_t j = 0; j < lim; j++)
                        c += (rent[s2 * hmax + j].x & 0xffffffu) == le;
                }
                {
                    const uint32_t pr = s * cap + rent[s * hmax + i].y;
                    pdst[pr * kl + atomicAdd(&pcnt[pr], 1u)] = (uint16_t)(s * hmax + i);
                }
            }
            rrow[s * hmax + i] = c;
            if (blockIdx.x == 0) { /* the route for combine, by row and in the flat list */
                const uint32_t tl = rent[s * hmax + i].y, k = rent[s * hmax + i].x >> 24;
                const uint64_t rw = (uint64_t)s | ((uint64_t)k << 16) | (((uint64_t)tl * dp + s % dp) << 32);
                MOE_U64(A, ll_route)[(uint64_t)le * A->rows + c] = rw;
                MOE_U64(A, ll_flat)[2u + 2u * P] = rw;
                MOE_U64(A, ll_flat)[3u + 2u * P] = ((uint64_t)le << 32) | ((uint64_t)smode[s] << 30) | c;
            }
        }
        symm__block_sync();
        ll_stamp(A, LLS_D_SCAN);
        for (uint32_t u = blockIdx.x; u < units; u += B) {
            uint32_t s = ru->s, tl = ru->tl, lo = ru->lo, hi = ru->hi;
            const char *src;
            if (u != blockIdx.x) {
                const uint32_t z = u % sl;
                s = u / sl / cap;
                tl = u / sl % cap;
                lo = nv * z / sl;
                hi = nv * (z + 1) / sl;
            }
            src = ll_pslot(A, p, s, tl);
            const uint32_t nd = pcnt[s * cap + tl];
            const int spread = hi - lo <= SYMM__MOE_THREADS;
            if (nd == 0)
                continue; /* (no route of this token comes here: its slot holds nothing of this call) */
            if (u == blockIdx.x)
                LL_FSTAMP(A, LLS_DS_UNIT);
            for (uint32_t v0 = lo + tid; v0 < hi; v0 += SYMM__MOE_THREADS * LL_UNROLL) {
                if (u != blockIdx.x || v0 != lo + tid) {
#pragma unroll
                    for (int x = 0; x < LL_UNROLL; x++) {
                        const uint32_t v = v0 + (uint32_t)x * SYMM__MOE_THREADS;
                        if (v < hi) {
                            va[x] = symm__c_ld16_vol(src + 32u * v);
                            vb[x] = symm__c_ld16_vol(src + 32u * v + 16u);
                        }
                    }
                }
                /* packets without the tag yet: loaded again all together until none is missing */
                for (uint32_t polls = 0;;) {
                    uint32_t miss = 0;
#pragma unroll
                    for (int x = 0; x < LL_UNROLL; x++)
                        if (v0 + (uint32_t)x * SYMM__MOE_THREADS < hi && !(ll_pkt_ok(va[x], tag) && ll_pkt_ok(vb[x], tag)))
                            miss |= 1u << x;
                    if (miss == 0)
                        break;
#pragma unroll
                    for (int x = 0; x < LL_UNROLL; x++)
                        if ((miss >> x) & 1u) {
                            const char *q = src + 32u * (v0 + (uint32_t)x * SYMM__MOE_THREADS);
                            if (++polls % SYMM__WAIT_CHECK_EVERY == 0) /* the deadline, on one of them */
                                (void)ll_pkt_data(A, q, tag, va[x], vb[x]);
                            va[x] = symm__c_ld16_vol(q);
                            vb[x] = symm__c_ld16_vol(q + 16);
                        }
                }
                if (u == blockIdx.x && v0 == lo + tid)
                    ll_stamp(A, LLS_D_ENT);
                if (spread) { /* (its vector, for the pairs below) */
                    symm__v4_t d;
                    d.x = va[0].x;
                    d.y = va[0].z;
                    d.z = vb[0].x;
                    d.w = vb[0].z;
                    sdat[v0 - lo] = d;
                    continue;
                }
                /* the slice into the row of every route of the token here */
                for (uint32_t di = 0; di < nd; di++) {
                    const uint32_t ri = pdst[(s * cap + tl) * kl + di];
#pragma unroll
                    for (int x = 0; x < LL_UNROLL; x++) {
                        const uint32_t v = v0 + (uint32_t)x * SYMM__MOE_THREADS;
                        symm__v4_t d;
                        if (v >= hi)
                            continue;
                        d.x = va[x].x;
                        d.y = va[x].z;
                        d.z = vb[x].x;
                        d.w = vb[x].z;
                        ll_small_put_vec(A, rent[ri].x & 0xffffffu, rrow[ri], v, d);
                    }
                }
            }
            if (spread) {
                /* a slice of at most one vector a thread: its (route, vector) pairs spread over the
                 * block, so no thread stores its vector once per route, one route after another */
                const uint32_t nvs = hi - lo;
                symm__block_sync();
                for (uint32_t q = tid; q < nd * nvs; q += SYMM__MOE_THREADS) {
                    const uint32_t ri = pdst[(s * cap + tl) * kl + q / nvs], w = q % nvs;
                    if (q == 0)
                        LL_FSTAMP(A, LLS_DS_RD);
                    ll_small_put_vec(A, rent[ri].x & 0xffffffu, rrow[ri], lo + w, sdat[w]);
                    if (q == 0)
                        LL_FSTAMP(A, LLS_DS_ST1);
                }
                if (u + B < units) /* (sdat is the next unit's) */
                    symm__block_sync();
            }
        }
        ll_stamp(A, LLS_D_COPY);
    }
    /* every local expert's rows (none included), block b counting experts b x threads, ...; the
     * sources' modes for the combine */
    if (blockIdx.x == 0 && tid < n)
        MOE_U32(A, ll_mode)[tid] = smode[tid];
    if (blockIdx.x == 0 && tid == 0)
        MOE_U64(A, ll_flat)[0] = R;
    LL_FSTAMP(A, LLS_DS_NOTE);
    for (uint32_t c0 = blockIdx.x * SYMM__MOE_THREADS; c0 < L; c0 += B * SYMM__MOE_THREADS) {
        if (c0 != blockIdx.x * SYMM__MOE_THREADS) { /* (the first range's zeroes went out with the polls) */
            symm__block_sync();
            hist[tid] = 0;
            symm__block_sync();
        }
        for (uint32_t s = 0; s < n; s++)
            for (uint32_t j = tid; j < scnt[s]; j += SYMM__MOE_THREADS) {
                const uint32_t le = rent[s * hmax + j].x & 0xffffffu;
                if (le - c0 < SYMM__MOE_THREADS)
                    atomicAdd(&hist[le - c0], 1u);
            }
        symm__block_sync();
        if (c0 + tid < L) {
            A->out_num[c0 + tid] = (int32_t)hist[tid];
            MOE_U32(A, ll_rcnt)[c0 + tid] = hist[tid];
        }
    }
    LL_FSTAMP(A, LLS_DS_XCNT);
    ll_small_end(A, e, ticket != NULL ? *ticket : 0u);
}

/* A small dispatch: the halves the flags name, then the kernel's end (ll_small_end). Before the
 * wait for the kernel before it (PDL: while that one still runs) it works out every address of
 * its first loads and clears its shared counters; after it, the prologue issues every first load before
 * anything waits for one: the epoch (thread 0), *bound_m (the last warp), the header block's
 * indices (a route per thread), each row block's first vector and its warps' view of the first
 * token's slots; one barrier publishes them, and no block waits for another of its grid before
 * its sending is done. */
SYMM__DEVICE_INTERNAL void ll_small_dispatch(const symm__moe_kargs_t *A, uint32_t *ticket) {
    const symm__moe_llplan_t *P = &A->llp; /* (the call's plan: no division here) */
    const uint32_t tid = symm__block_tid(), lane = tid & 31u, K = A->topk, E = A->experts, n = (uint32_t)A->n;
    const uint32_t dp = (uint32_t)A->dp, dpr = P->dpr, B = gridDim.x, RB = B > 1 ? B - 1 : 1;
    const int send = (A->flags & SYMM_MOE_SEND) != 0, recv = (A->flags & SYMM_MOE_RECV) != 0;
    const uint32_t all = P->all, nv = P->nv;
    __shared__ uint64_t se, sbraw;
    __shared__ uint32_t sidx[SYMM__MOE_SMALL_SEND], wcnt[SYMM__MOE_WARPS * SYMM__MOE_MAX_PES];
    __shared__ uint32_t hleft; /* header-polling warps of the receive half not done yet */
    uint32_t ix = E, xa = E, xb = E;
    symm__v4_t pv = {0, 0, 0, 0};
    uint64_t e, ev = 0, bv = 0;
    /* the first loads' addresses: the header block's route (ixo), a row block's token su.rt and
     * vector v; su.what = 1: a header route, 2: a row vector, 4: the row's slots */
    uint64_t ixo = 0;
    uint32_t v = 0;
    ll_sunit_t su = {0, 0, 0, 0, 0, 0, 0, 0};
    ll_runit_t ru = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}; /* the receive half's first unit */
    if (send && blockIdx.x == B - 1) {
#pragma unroll 1
        for (uint32_t x = tid; x < SYMM__MOE_WARPS * n; x += SYMM__MOE_THREADS)
            wcnt[x] = 0;
        su.h32 = P->h32;
        if (tid < all * K) {
            su.hi = ll_fdiv(tid, P->mk);
            su.hk = tid - su.hi * K;
            ixo = (dpr + (uint64_t)su.hi * dp) * K + su.hk;
            su.what = 1;
        }
    }
    if (send && (B == 1 || blockIdx.x < RB)) {
        const uint32_t sl = P->dsl, u = blockIdx.x;
        if (u < P->dunits) {
            su.ri = ll_fdiv(u, P->mdsl);
            su.rt = dpr + (uint64_t)su.ri * dp;
            su.rlo = ll_fdiv(nv * (u - su.ri * sl), P->mdsl);
            su.rhi = ll_fdiv(nv * (u - su.ri * sl + 1), P->mdsl);
            v = su.rlo + tid;
            su.what |= 4u | (v < su.rhi ? 2u : 0u);
        }
    }
    if (tid == 0)
        hleft = n < SYMM__MOE_WARPS ? n : SYMM__MOE_WARPS;
    symm__pin_u64(&ixo);
    symm__pin_u64(&su.rt);
    symm__pin_u32(&v);
    symm__pin_u32(&su.what);
    symm__pin_u32(&su.hi);
    symm__pin_u32(&su.hk);
    symm__pin_u32(&su.h32);
    symm__pin_u32(&su.ri);
    symm__pin_u32(&su.rlo);
    symm__pin_u32(&su.rhi);
    if (recv) {
        ru = ll_small_unit(A);
        symm__pin_u32(&ru.sl);
        symm__pin_u32(&ru.units);
        symm__pin_u32(&ru.s);
        symm__pin_u32(&ru.tl);
        symm__pin_u32(&ru.lo);
        symm__pin_u32(&ru.hi);
        symm__pin_u32(&ru.v0);
        symm__pin_u32(&ru.vend);
        symm__pin_u32(&ru.di);
        symm__pin_u32(&ru.lg);
        symm__pin_u32(&ru.fast);
    }
    LL_FSTAMP(A, LLS_DS_PRE);
    ll_pdl_begin(A);
    ll_stamp(A, LLS_DEP);
    /* every load goes out before any shared store that needs one (a warp stalls at such a store, and
     * its later loads would wait a round trip behind it) */
    if (tid == 0)
        ev = *(volatile uint64_t *)&moe_state(A)->epoch;
    if (send) {
        if (tid == SYMM__MOE_THREADS - 32)
            bv = ll_bound_load(A);
        if (su.what & 1u) /* (asm loads: issued here, not moved to their first use) */
            ix = symm__cld4((const uint32_t *)A->idx + ixo, 0);
        if (su.what & 4u) {
            if (lane < K)
                xa = symm__cld4((const uint32_t *)A->idx + su.rt * K + lane, 0);
            if (lane + 32u < K)
                xb = symm__cld4((const uint32_t *)A->idx + su.rt * K + lane + 32u, 0);
            if (su.what & 2u)
                pv = ll_row_vec(A, su.rt, v);
        }
        if (su.what & 1u)
            sidx[tid] = ix;
        if (tid == SYMM__MOE_THREADS - 32)
            sbraw = bv;
    }
    if (tid == 0)
        se = ev + (send ? 1u : 0u);
    ll_stamp(A, LLS_D_PRO);
    symm__block_sync();
    e = se;
    ll_stamp(A, LLS_D_IDX);
    if (send) {
        const uint32_t bound = (uint32_t)ll_bound_use(A, sbraw, blockIdx.x == 0 && tid == 0);
        ll_small_send(A, e, bound, &su, ix, xa, xb, &pv, sidx, wcnt);
        ll_stamp(A, LLS_D_SENT);
    }
    if (recv) { /* (it ends the kernel: ll_small_end) */
        ll_small_recv(A, e, send ? ticket : NULL, &hleft, &ru);
    } else {
        if (send)
            ll_count_late(A, ticket);
        ll_small_end(A, e, *ticket);
    }
}

/* The small dispatch (a->ll_small, the real exchange or its stamps): its own kernel, so its
 * registers, shared memory and code are its own. Epoch as in symm__k_ll_dispatch. */
__global__ void __launch_bounds__(SYMM__MOE_THREADS)
    symm__k_ll_dispatch_small(const __grid_constant__ symm__moe_kargs_t a) {
    uint32_t ticket = 0;
    ll_stamps_begin(&a);
    ll_small_dispatch(&a, &ticket); /* (its prologue waits for the kernel before it: PDL; it ends with ll_small_end) */
}
