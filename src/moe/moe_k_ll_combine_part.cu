/*
 * moe_k_ll_combine_part.cu - the low-latency combine that sums a token's routes where its experts
 * are (SYMM_MOE_LL_COMBINE=partial): one row per (token, expert PE) crosses the links instead of
 * one per route. Its kernel, symm__k_ll_combine_part; the protocol: moe_ll.cuh ("Partial combine").
 */
#include "moe/moe_ll.cuh"

/* The kernel's shared state: the send half's chunk of (source, token) units (each route's row in
 * y and weight, a route per thread: unit j's slot k at j x top-k + k; each unit's routes here as a
 * mask of slots, its token, its first PE | LL_CB_PKT), and the receive half's chunk of tokens (a
 * route per thread: its expert; each token's heads, the first slot of each expert PE, in PE order). */
#define LP_PKT 0x80000000u
typedef struct ll_part {
    uint64_t syoff[SYMM__MOE_THREADS];
    float sw[SYMM__MOE_THREADS];
    uint64_t smask[LL_BATCH];
    uint64_t st[LL_BATCH];
    uint32_t sg0[LL_BATCH];
    uint32_t six[SYMM__MOE_THREADS];
    uint8_t shead[SYMM__MOE_THREADS], sord[SYMM__MOE_THREADS];
    uint32_t snh[LL_BATCH];
    uint8_t spk[LL_BATCH];
} ll_part_t;

/* 8 floats as 16 bytes of bf16 or f16. */
SYMM__DEVICE_INTERNAL symm__v4_t lp_pack8(uint32_t kind, const float *f) {
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const uint32_t lo = kind == SYMM_DTYPE_BF16 ? symm__c_f32_to_bf16(f[2 * i]) : symm__c_f32_to_f16(f[2 * i]);
        const uint32_t hi =
            kind == SYMM_DTYPE_BF16 ? symm__c_f32_to_bf16(f[2 * i + 1]) : symm__c_f32_to_f16(f[2 * i + 1]);
        w[i] = (lo & 0xffffu) | (hi << 16);
    }
    symm__v4_t v;
    v.x = w[0];
    v.y = w[1];
    v.z = w[2];
    v.w = w[3];
    return v;
}

#define LP_GATHER 4 /* rows a thread loads at once before it sums them */

/* acc += the unit j's routes (mask m) w x row, its 8 elements at byte `at` of each row, in slot
 * order: LP_GATHER rows' loads in flight at a time. */
SYMM__DEVICE_INTERNAL void lp_sum_rows(const ll_part_t *S, const char *y, uint32_t j, uint32_t K, uint64_t at,
                                       uint64_t m, uint32_t kind, float *acc) {
    while (m != 0) {
        symm__v4_t a[LP_GATHER], b[LP_GATHER];
        float w[LP_GATHER];
#pragma unroll
        for (uint32_t i = 0; i < LP_GATHER; i++) {
            a[i] = b[i] = symm__v4_t{0, 0, 0, 0};
            w[i] = 0.0f;
            if (m != 0) {
                const uint32_t k = (uint32_t)__ffsll((long long)m) - 1u;
                const char *r = y + S->syoff[j * K + k] + at;
                m &= m - 1u;
                a[i] = ll_ld16(r);
                if (kind == SYMM_DTYPE_F32)
                    b[i] = ll_ld16(r + 16);
                w[i] = S->sw[j * K + k];
            }
        }
#pragma unroll
        for (uint32_t i = 0; i < LP_GATHER; i++)
            moe_fma8(kind, a[i], b[i], w[i], acc);
    }
}

/* The weights' slot of source s's token slot tl, route k (ll_cw: the word is tag << 32 | the
 * float's bits, stored by s in one 8-byte store). */
SYMM__DEVICE_INTERNAL uint64_t *lp_wslot(const symm__moe_kargs_t *A, uint32_t s, uint64_t tl, uint32_t k) {
    return MOE_U64(A, ll_cw) + ((uint64_t)s * A->cap + tl) * A->topk + k;
}

/* A thread's two output groups q and q + SYMM__MOE_THREADS of a chunk (Q groups, h8 a unit), the
 * window its rounds of loads take rows from: each one's unit, vector and the routes whose rows are
 * not loaded yet (0 past Q or for a unit with no route here; all of them: S->smask). */
typedef struct lp_pair {
    uint32_t q, ja, va, jb, vb;
    uint64_t ma, mb;
} lp_pair_t;

SYMM__DEVICE_INTERNAL lp_pair_t lp_pair(const ll_part_t *S, uint32_t q, uint32_t Q, uint32_t h8) {
    lp_pair_t P;
    const uint32_t qb = q + SYMM__MOE_THREADS;
    P.q = q;
    P.ja = q < Q ? q / h8 : 0;
    P.va = q < Q ? q % h8 : 0;
    P.jb = qb < Q ? qb / h8 : 0;
    P.vb = qb < Q ? qb % h8 : 0;
    P.ma = q < Q ? S->smask[P.ja] : 0;
    P.mb = qb < Q ? S->smask[P.jb] : 0;
    return P;
}

/* One round of a pair's rows (y's rows 16-byte aligned): up to LP_SLOTS vectors loaded (group a's routes in slot order, then
 * b's), the first n slots filled, slot i's route k in byte i of ks and its group in bit i of sel. */
#define LP_SLOTS 6 /* (8 spill at the 128 registers of 512 threads) */
#define LP_RSLOTS 6 /* the receive half's: partial rows a round loads */
typedef struct lp_round {
    symm__v4_t v[LP_SLOTS];
    uint64_t ks;
    uint32_t sel, n;
} lp_round_t;

SYMM__DEVICE_INTERNAL void lp_issue(lp_round_t *R, lp_pair_t *P, const ll_part_t *S, const char *y, uint32_t K) {
    R->sel = 0;
    R->n = 0;
    R->ks = 0;
#pragma unroll
    for (uint32_t i = 0; i < LP_SLOTS; i++) {
        R->v[i] = symm__v4_t{0, 0, 0, 0};
        if (P->ma | P->mb) {
            const int b = P->ma == 0;
            const uint64_t m = b ? P->mb : P->ma;
            const uint32_t k = (uint32_t)__ffsll((long long)m) - 1u, j = b ? P->jb : P->ja, v = b ? P->vb : P->va;
            if (b)
                P->mb &= P->mb - 1u;
            else
                P->ma &= P->ma - 1u;
            R->v[i] = symm__cld16(y + S->syoff[j * K + k] + (uint64_t)v * 16u, 0);
            R->ks |= (uint64_t)k << (8 * i);
            R->sel |= (uint32_t)b << i;
            R->n = i + 1;
        }
    }
}

/* acc0 / acc1 += each loaded row x its weight (in the slots' order: slot order within a group). */
SYMM__DEVICE_INTERNAL void lp_consume(const lp_round_t *R, const lp_pair_t *P, const ll_part_t *S, uint32_t K,
                                      uint32_t kind, float *acc0, float *acc1) {
    const symm__v4_t none = {0, 0, 0, 0};
#pragma unroll
    for (uint32_t i = 0; i < LP_SLOTS; i++)
        if (i < R->n) {
            const uint32_t k = (uint32_t)(R->ks >> (8 * i)) & 0xffu;
            const float w = S->sw[(((R->sel >> i) & 1u) ? P->jb : P->ja) * K + k];
            if ((R->sel >> i) & 1u)
                moe_fma8(kind, R->v[i], none, w, acc1);
            else
                moe_fma8(kind, R->v[i], none, w, acc0);
        }
}

/* Post this PE's tokens' weights (t = dp_rank, dp_rank + dp, ... below num_tokens: a superset of
 * what the dispatch sent) to the PE of each route's expert, a route per thread over the grid, before
 * anything waits: relaxed 8-byte stores, each carrying the tag. A slot no route of this call names
 * is never read, so the routes past the bound and repeated experts need no test here. */
SYMM__DEVICE_INTERNAL void lp_post_weights(const symm__moe_kargs_t *A, uint32_t tag) {
    const uint32_t K = A->topk, dp = (uint32_t)A->dp, me = (uint32_t)A->me, dpr = me % dp;
    const uint64_t mine = A->num_tokens > dpr ? (A->num_tokens - dpr + dp - 1) / dp : 0;
    const uint32_t *idx = (const uint32_t *)A->idx;
    for (uint64_t x = (uint64_t)blockIdx.x * SYMM__MOE_THREADS + symm__block_tid(); x < mine * K;
         x += (uint64_t)gridDim.x * SYMM__MOE_THREADS) {
        const uint64_t tl = x / K, t = tl * dp + dpr;
        const uint32_t k = (uint32_t)(x % K);
        const uint32_t ex = symm__cld4(idx + t * K + k, 0);
        const uint32_t wb = symm__cld4(A->weights + t * K + k, 0);
        if (ex < A->experts)
            symm__st_b64(moe_peer(A, lp_wslot(A, me, tl, k), (int)(ex / A->local)), ((uint64_t)tag << 32) | wb,
                         SYMM_SEM_RELAXED, SYMM_SCOPE_SYS);
    }
}

/* pre[l]: the first flat row of local expert l (a block scan of the rows each received, ll_rcnt,
 * which the dispatch left here), pre[L] their number (returned). Ends with a barrier. */
SYMM__DEVICE_INTERNAL uint32_t lp_rows_scan(const symm__moe_kargs_t *A, uint32_t *pre) {
    const uint32_t tid = symm__block_tid();
    return ll_rcnt_scan(A, tid < A->local ? MOE_U32(A, ll_rcnt)[tid] : 0u, pre);
}

/* A thread per route of the chunk's nu units polls its weight into S->sw (the caller's barrier
 * publishes them). */
SYMM__DEVICE_INTERNAL void lp_take_weights(const symm__moe_kargs_t *A, ll_part_t *S, uint32_t nu, uint32_t tag) {
    const uint32_t tid = symm__block_tid(), K = A->topk, dp = (uint32_t)A->dp;
    if (tid < nu * K) {
        const uint32_t j = tid / K, k = tid % K;
        const uint64_t t = S->st[j];
        if ((S->smask[j] >> k) & 1u)
            S->sw[tid] = symm__bits_f32(
                ll_take_entry(A, lp_wslot(A, (uint32_t)(S->sg0[j] + t % dp), t / dp, k), tag, 0));
    }
}

/* Unit j's output group v (its routes m), summed in acc: rounded once to the output type and
 * stored to every PE of the token's DP group, at the unit's first slot (packets or plainly). */
SYMM__DEVICE_INTERNAL void lp_put_group(const symm__moe_kargs_t *A, const ll_part_t *S, uint32_t j, uint32_t v,
                                        uint64_t m, const float *acc, uint32_t tag) {
    const symm__v4_t o = lp_pack8(A->out_kind, acc);
    const uint64_t t = S->st[j];
    const uint32_t k0 = (uint32_t)__ffsll((long long)m) - 1u, g0 = S->sg0[j], dp = (uint32_t)A->dp;
    if (S->spk[j]) {
        char *dst = ll_pcslot(A, t, k0) + 32u * v;
        for (uint32_t d = 0; d < dp; d++)
            ll_put_pkt2(moe_peer(A, dst, (int)(g0 + d)), o, tag);
    } else {
        char *dst = MOE_AT(A, ll_cbuf) + (t * A->topk + k0) * (uint64_t)A->hidden * 4u + 16u * v;
        for (uint32_t d = 0; d < dp; d++)
            symm__cst16(moe_peer(A, dst, (int)(g0 + d)), o, 1);
    }
}

/* Units (source s, token slot tl), u = tl n + s; block b takes u = b, b + B, ... (a token's sources
 * side by side, so the slots past the sources' tokens, which hold no route, fall at the end), C at
 * a time. Per chunk: every received row whose route (ll_route) falls in the chunk notes its place in
 * y and its slot; a barrier; a thread per route polls its weight while every thread's first round
 * of rows is already loaded; a barrier; then per output group (8 elements; two a thread at a time
 * with 2-byte rows) the unit's routes in slot order, w x row summed in float32, rounded once to the output type and stored to every PE of the
 * token's DP group (into ll_cbuf[t][k0] or as packets into ll_pcbuf[t][k0], k0 the unit's first
 * slot), then the plain units' flags released behind a barrier. */
SYMM__DEVICE_INTERNAL void lp_send(const symm__moe_kargs_t *A, ll_part_t *S, uint64_t e, const uint32_t *modes,
                                   uint32_t *pre) {
    const uint32_t tid = symm__block_tid(), n = (uint32_t)A->n, L = A->local, K = A->topk, B = gridDim.x;
    const uint32_t dp = (uint32_t)A->dp, h8 = A->hidden / 8u, kind = A->y_kind;
    const uint32_t ysz = moe_kind_size(kind), tag = ll_tag(e);
    const uint64_t U = (uint64_t)A->cap * n;
    const uint64_t ub = U > blockIdx.x ? (U - blockIdx.x + B - 1) / B : 0; /* this block's units */
    uint32_t C = SYMM__MOE_THREADS / K;
    const char *y = (const char *)A->y;
    const int al = moe_al16((uint64_t)(uintptr_t)y) && moe_al16((uint64_t)A->y_stride[0] * ysz) &&
                   moe_al16((uint64_t)A->y_stride[1] * ysz);
    MOE_TRACE_T0(tb_, A);
    if (C > LL_BATCH)
        C = LL_BATCH;
    lp_post_weights(A, tag); /* (before anything waits: moe_ll.cuh says why no PE then waits for ever) */
    const uint32_t R = lp_rows_scan(A, pre);
    ll_stamp(A, LLS_C_SCAN);
    for (uint64_t i0 = 0; i0 < ub; i0 += C) {
        const uint32_t nu = ub - i0 < C ? (uint32_t)(ub - i0) : C;
        if (i0 > 0)
            symm__block_sync(); /* (the last chunk's state is read) */
        if (tid < nu) {
            const uint64_t u = blockIdx.x + (i0 + tid) * B;
            const uint32_t s = (uint32_t)(u % n);
            const uint64_t t = u / n * dp + s % dp;
            S->smask[tid] = 0;
            S->st[tid] = t;
            S->sg0[tid] = s / dp * dp;
            S->spk[tid] = (uint8_t)ll_cpkt(A, modes[s], t);
        }
        symm__block_sync();
        for (uint32_t f = tid; f < R; f += SYMM__MOE_THREADS) { /* every route received: the chunk's note theirs */
            const uint32_t l = ll_bisect(pre, L, f), row = f - pre[l];
            const uint64_t route = MOE_U64(A, ll_route)[(uint64_t)l * A->rows + row];
            const uint32_t s = (uint32_t)(route & 0xffffu), k = (uint32_t)((route >> 16) & 0xffffu);
            const uint64_t u = (route >> 32) / dp * n + s;
            if (u % B == blockIdx.x && u / B >= i0 && u / B < i0 + nu) {
                const uint32_t jj = (uint32_t)(u / B - i0);
                S->syoff[jj * K + k] =
                    (uint64_t)((int64_t)l * A->y_stride[0] + (int64_t)row * A->y_stride[1]) * ysz;
                atomicOr((unsigned long long *)&S->smask[jj], 1ull << k);
            }
        }
        symm__block_sync();
        if (i0 == 0)
            ll_stamp(A, LLS_C_SLOT);
        if (ysz == 2 && al) { /* 2-byte rows, aligned: two groups a thread at a time, LP_SLOTS rows' loads in flight */
            lp_pair_t P = lp_pair(S, tid, nu * h8, h8);
            lp_round_t rd;
            lp_issue(&rd, &P, S, y, K); /* (the first round's loads ride with the weights' crossing) */
            lp_take_weights(A, S, nu, tag);
            symm__block_sync();
            if (i0 == 0)
                ll_stamp(A, LLS_CB_COPY);
            if (P.q < nu * h8) { /* a window of two groups sliding over the thread's groups: full rounds */
                float acc0[8] = {0, 0, 0, 0, 0, 0, 0, 0}, acc1[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                for (;;) {
                    lp_consume(&rd, &P, S, K, kind, acc0, acc1);
                    if (P.ma == 0) { /* a's rows all summed (a round takes a's first): a out, b in its place */
                        const uint32_t qn = P.q + 2u * SYMM__MOE_THREADS;
                        if (S->smask[P.ja])
                            lp_put_group(A, S, P.ja, P.va, S->smask[P.ja], acc0, tag);
                        P.q += SYMM__MOE_THREADS;
                        if (P.q >= nu * h8)
                            break;
                        P.ja = P.jb;
                        P.va = P.vb;
                        P.ma = P.mb;
                        P.jb = qn < nu * h8 ? qn / h8 : 0u;
                        P.vb = qn < nu * h8 ? qn % h8 : 0u;
                        P.mb = qn < nu * h8 ? S->smask[P.jb] : 0u;
#pragma unroll
                        for (int i = 0; i < 8; i++) {
                            acc0[i] = acc1[i];
                            acc1[i] = 0.0f;
                        }
                    }
                    lp_issue(&rd, &P, S, y, K);
                }
            }
        } else { /* f32 rows, or rows off 16-byte alignment: a group at a time */
            lp_take_weights(A, S, nu, tag);
            symm__block_sync();
            if (i0 == 0)
                ll_stamp(A, LLS_CB_COPY);
            for (uint32_t q = tid; q < nu * h8; q += SYMM__MOE_THREADS) {
                const uint32_t j = q / h8, v = q % h8;
                const uint64_t m = S->smask[j];
                float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                if (m == 0)
                    continue;
                lp_sum_rows(S, y, j, K, (uint64_t)v * 8u * ysz, m, kind, acc);
                lp_put_group(A, S, j, v, m, acc, tag);
            }
        }
        symm__block_sync(); /* (plain units: their flags behind the whole block's stores) */
        for (uint32_t x = tid; x < nu * dp; x += SYMM__MOE_THREADS) {
            const uint32_t j = x / dp;
            const uint64_t m = S->smask[j];
            if (m != 0 && !S->spk[j])
                MOE_RELEASE_PUT(A, tb_, MOE_U64(A, ll_cflag) + S->st[j] * K + (uint32_t)__ffsll((long long)m) - 1u, e,
                                (int)(S->sg0[j] + x % dp), (uint64_t)A->hidden * 2u);
        }
    }
}

/* One output group (v) of token t (the chunk's j): its partial rows in PE order (packets polled
 * until they carry the tag, or plain rows behind their flags), summed in float32, stored. */
SYMM__DEVICE_INTERNAL void lp_recv_group(const symm__moe_kargs_t *A, const ll_part_t *S, uint64_t t, uint32_t j,
                                         uint32_t v, uint32_t tag) {
    const uint32_t K = A->topk, nh = S->snh[j], okind = A->out_kind;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const symm__v4_t none = {0, 0, 0, 0};
    for (uint32_t r0 = 0; r0 < nh; r0 += LP_GATHER) {
        symm__v4_t a[LP_GATHER], b[LP_GATHER];
#pragma unroll
        for (uint32_t i = 0; i < LP_GATHER; i++)
            if (r0 + i < nh) {
                const uint32_t k = S->sord[j * K + r0 + i];
                if (S->spk[j]) {
                    const char *pp = ll_pcslot(A, t, k) + 32u * v;
                    a[i] = symm__c_ld16_vol(pp);
                    b[i] = symm__c_ld16_vol(pp + 16);
                } else {
                    a[i] = symm__cld16(MOE_AT(A, ll_cbuf) + (t * K + k) * (uint64_t)A->hidden * 4u + 16u * v, 0);
                }
            }
#pragma unroll
        for (uint32_t i = 0; i < LP_GATHER; i++)
            if (r0 + i < nh) { /* (PE order) */
                const symm__v4_t d =
                    S->spk[j] ? ll_pkt_data(A, ll_pcslot(A, t, S->sord[j * K + r0 + i]) + 32u * v, tag, a[i], b[i])
                              : a[i];
                moe_fma8(okind, d, none, 1.0f, acc);
            }
    }
    moe_store8((char *)A->out + ((int64_t)t * A->out_stride + (int64_t)v * 8) * 2, okind, acc);
}

/* The receive half: the output groups of the tokens below the bound split evenly over the blocks,
 * contiguously, taken in chunks of tokens (a route per thread). Per chunk: the indices and the
 * tokens' forms, a barrier; each route's head-ness (the first slot of its expert's PE), a barrier;
 * each head's place in PE order, and a plain head's flag waited for, a barrier; then per group the
 * token's partial rows in PE order, summed in float32, stored. */
SYMM__DEVICE_INTERNAL void lp_recv(const symm__moe_kargs_t *A, ll_part_t *S, uint64_t e, uint64_t bound) {
    const uint32_t tid = symm__block_tid(), K = A->topk, L = A->local, E = A->experts, dp = (uint32_t)A->dp;
    const uint32_t h8 = A->hidden / 8u, okind = A->out_kind, tag = ll_tag(e), me = (uint32_t)A->me;
    const uint64_t P = bound * h8, B = gridDim.x;
    const uint64_t glo = P * blockIdx.x / B, ghi = P * (blockIdx.x + 1u) / B;
    uint32_t tc = SYMM__MOE_THREADS / K;
    if (tc > LL_BATCH)
        tc = LL_BATCH;
    for (uint64_t ta = glo / h8; ta * h8 < ghi; ta += tc) {
        const uint64_t left = (ghi - 1u) / h8 + 1u - ta;
        const uint32_t nt = left < tc ? (uint32_t)left : tc;
        const uint64_t gs = glo > ta * h8 ? glo : ta * h8, ge = ghi < (ta + nt) * h8 ? ghi : (ta + nt) * h8;
        symm__block_sync(); /* (the last chunk's state is read) */
        if (tid < nt * K) {
            const uint64_t t = ta + tid / K;
            S->six[tid] = symm__cld4((const uint32_t *)A->idx + t * K + tid % K, 0);
            if (tid % K == 0)
                S->spk[tid / K] =
                    (uint8_t)ll_cpkt(A, MOE_U32(A, ll_mode)[me / dp * dp + (uint32_t)(t % dp)], t);
        }
        symm__block_sync();
        if (tid < nt * K) { /* a head: a valid expert whose PE no earlier slot names */
            const uint32_t k = tid % K, *row = &S->six[tid - k], pe = row[k] / L;
            int head = row[k] < E;
            for (uint32_t i = 0; i < k && head; i++)
                head = !(row[i] < E && row[i] / L == pe);
            S->shead[tid] = (uint8_t)head;
        }
        symm__block_sync();
        if (tid < nt * K) {
            const uint32_t j = tid / K, k = tid % K, *row = &S->six[j * K], pe = row[k] / L;
            const uint64_t t = ta + j;
            if (S->shead[tid]) {
                uint32_t rank = 0;
                for (uint32_t i = 0; i < K; i++)
                    rank += S->shead[j * K + i] && row[i] / L < pe;
                S->sord[j * K + rank] = (uint8_t)k;
                if (!S->spk[j])
                    moe_wait(A, MOE_U64(A, ll_cflag) + t * K + k, e, (int)pe);
            }
            if (k == 0) {
                uint32_t nh = 0;
                for (uint32_t i = 0; i < K; i++)
                    nh += S->shead[j * K + i];
                S->snh[j] = nh;
            }
        }
        const int anypk = __syncthreads_or(tid < nt * K && tid % K == 0 && S->spk[tid / K]);
        if (ta == glo / h8)
            ll_stamp(A, LLS_C_SET);
        if (anypk) { /* a chunk with packet tokens: a group at a time */
            for (uint64_t q = gs + tid; q < ge; q += SYMM__MOE_THREADS)
                lp_recv_group(A, S, q / h8, (uint32_t)(q / h8 - ta), (uint32_t)(q % h8), tag);
            continue;
        }
        if (gs + tid < ge) { /* a window of two groups (a, b) sliding over the thread's groups */
            const uint64_t rowb = (uint64_t)A->hidden * 4u; /* (a slot's bytes) */
            const symm__v4_t none = {0, 0, 0, 0};
            uint64_t qa = gs + tid, t0 = qa / h8, t1 = (qa + SYMM__MOE_THREADS) / h8;
            uint32_t ja = (uint32_t)(t0 - ta), va = (uint32_t)(qa % h8), nha = S->snh[ja], ra = 0;
            int hb = qa + SYMM__MOE_THREADS < ge;
            uint32_t jb = hb ? (uint32_t)(t1 - ta) : ja, vb = (uint32_t)((qa + SYMM__MOE_THREADS) % h8);
            uint32_t nhb = hb ? S->snh[jb] : 0u, rb = 0;
            float acc0[8] = {0, 0, 0, 0, 0, 0, 0, 0}, acc1[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (;;) {
                symm__v4_t d[LP_RSLOTS]; /* a round: up to LP_RSLOTS partial rows' loads (a's, then b's) */
                uint32_t sel = 0, n = 0;
#pragma unroll
                for (uint32_t i = 0; i < LP_RSLOTS; i++) {
                    d[i] = none;
                    if (ra < nha || rb < nhb) {
                        const int b = ra >= nha;
                        const uint32_t k = b ? S->sord[jb * K + rb] : S->sord[ja * K + ra];
                        if (b)
                            rb++;
                        else
                            ra++;
                        d[i] = symm__cld16(MOE_AT(A, ll_cbuf) + ((b ? t1 : t0) * K + k) * rowb + 16u * (b ? vb : va), 0);
                        sel |= (uint32_t)b << i;
                        n = i + 1;
                    }
                }
#pragma unroll
                for (uint32_t i = 0; i < LP_RSLOTS; i++) /* (PE order within each group) */
                    if (i < n) {
                        if ((sel >> i) & 1u)
                            moe_fma8(okind, d[i], none, 1.0f, acc1);
                        else
                            moe_fma8(okind, d[i], none, 1.0f, acc0);
                    }
                if (ra == nha) { /* a summed (a round takes a's rows first): stored, b in its place */
                    moe_store8((char *)A->out + ((int64_t)t0 * A->out_stride + (int64_t)va * 8) * 2, okind, acc0);
                    qa += SYMM__MOE_THREADS;
                    if (qa >= ge)
                        break;
                    t0 = t1;
                    ja = jb;
                    va = vb;
                    nha = nhb;
                    ra = rb;
                    hb = qa + SYMM__MOE_THREADS < ge;
                    t1 = (qa + SYMM__MOE_THREADS) / h8;
                    jb = hb ? (uint32_t)(t1 - ta) : ja;
                    vb = (uint32_t)((qa + SYMM__MOE_THREADS) % h8);
                    nhb = hb ? S->snh[jb] : 0u;
                    rb = 0;
#pragma unroll
                    for (int i = 0; i < 8; i++) {
                        acc0[i] = acc1[i];
                        acc1[i] = 0.0f;
                    }
                }
            }
        }
    }
}

/* Every block posts its share of the weights first, then does its share of the units, then of the
 * tokens (the receive half). */
__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ll_combine_part(const __grid_constant__ symm__moe_kargs_t a) {
    const symm__moe_kargs_t *A = &a;
    __shared__ ll_part_t S;
    __shared__ uint32_t modes[SYMM__MOE_MAX_PES];
    extern __shared__ uint32_t pre[]; /* [L + 1]: the first flat row of each local expert (lp_rows_scan) */
    const int send = (A->flags & SYMM_MOE_SEND) != 0, recv = (A->flags & SYMM_MOE_RECV) != 0;
    const uint32_t tid = symm__block_tid();
    uint64_t e, braw = A->num_tokens;
    ll_stamps_begin(A);
    ll_pdl_begin(A);
    if (A->probe == SYMM__MOE_PROBE_EMPTY || A->probe == SYMM__MOE_PROBE_HOP) {
        e = moe_begin(A, 0);
        if (A->probe == SYMM__MOE_PROBE_HOP)
            ll_probe_hop(A, e, 1);
        return;
    }
    e = moe_begin(A, 0);
    if (recv && A->bound != NULL)
        braw = symm__cld4(A->bound, 0);
    if (send) {
        if (tid < (uint32_t)A->n)
            modes[tid] = MOE_U32(A, ll_mode)[tid];
        MOE_TRACE_HALF(A, SYMM_TRACE_COLL_MOE_COMBINE, lp_send(A, &S, e, modes, pre));
    }
    ll_stamp(A, LLS_C_SENT);
    if (recv)
        MOE_TRACE_HALF(A, SYMM_TRACE_COLL_MOE_COMBINE_RECV,
                       lp_recv(A, &S, e, ll_bound_use(A, braw, blockIdx.x == 0 && tid == 0)));
    ll_stamps_end(A, "combine-part", e, LLS_C_END);
}
