/*
 * moe_k_ll_combine.cu - the low-latency combine: its send half (the
 * experts' rows back to their tokens' PEs), its receive half (the weighted
 * sums in slot order) and its kernels, symm__k_ll_combine and
 * symm__k_ll_combine_small. The protocol: moe_ll.cuh.
 */
#include "moe/moe_ll.cuh"


/* Fewer received rows than half the blocks: row r in sl slices, block b sending slice b % sl of
 * row b / sl, so no block issues a whole row. A plain row (its flag released behind all of its
 * bytes) goes whole from its slice 0. Every thread finds the row itself (no barrier before the
 * first load). */
SYMM__DEVICE_INTERNAL void ll_combine_send_slices(const symm__moe_kargs_t *A, uint64_t e, const uint32_t *pre,
                                                  const uint32_t *modes, uint32_t total) {
    const uint32_t tid = symm__block_tid(), L = A->local, K = A->topk, dp = (uint32_t)A->dp, tag = ll_tag(e);
    const uint32_t ysz = moe_kind_size(A->y_kind), nvy = A->hidden * ysz / 16u;
    const uint32_t sl = gridDim.x / total, r = blockIdx.x / sl, z = blockIdx.x % sl;
    const uint32_t vlo = nvy * z / sl, vhi = nvy * (z + 1) / sl;
    uint32_t lo; /* the expert of row r */
    uint64_t yoff, route, t;
    uint32_t src, k, g0;
    symm__v4_t v0 = {0, 0, 0, 0};
    MOE_TRACE_T0(tb_, A);
    if (r >= total)
        return;
    lo = ll_bisect(pre, L, r);
    yoff = (uint64_t)((int64_t)lo * A->y_stride[0] + (int64_t)(r - pre[lo]) * A->y_stride[1]) * ysz;
    if (vlo + tid < vhi)
        v0 = ll_ld16((const char *)A->y + yoff + 16u * (vlo + tid));
    ll_stamp(A, LLS_C_SLOT);
    route = MOE_U64(A, ll_route)[(uint64_t)lo * A->rows + (r - pre[lo])];
    src = (uint32_t)(route & 0xffffu);
    k = (uint32_t)((route >> 16) & 0xffffu);
    g0 = src / dp * dp;
    t = route >> 32;
    if (ll_cpkt(A, modes[src], t)) {
        char *dst = ll_pcslot(A, t, k);
        for (uint32_t q = vlo + tid; q < vhi; q += SYMM__MOE_THREADS) {
            const symm__v4_t v = q == vlo + tid ? v0 : ll_ld16((const char *)A->y + yoff + 16u * q);
            for (uint32_t d = 0; d < dp; d++)
                ll_put_pkt2(moe_peer(A, dst + 32u * q, (int)(g0 + d)), v, tag);
        }
    } else if (z == 0) {
        const uint64_t slot_bytes = (uint64_t)A->hidden * 4u;
        char *dst = MOE_AT(A, ll_cbuf) + (t * K + k) * slot_bytes;
        for (uint32_t q = tid; q < nvy; q += SYMM__MOE_THREADS) {
            const symm__v4_t v = ll_ld16((const char *)A->y + yoff + 16u * q);
            for (uint32_t d = 0; d < dp; d++)
                symm__cst16(moe_peer(A, dst + 16u * q, (int)(g0 + d)), v, 1);
        }
        symm__block_sync(); /* (every thread of the block took this branch: one row, one route) */
        if (tid < dp)
            MOE_RELEASE_PUT(A, tb_, MOE_U64(A, ll_cflag) + t * K + k, e, (int)(g0 + tid),
                            (uint64_t)A->hidden * ysz);
    }
}

/* Vectors q of a y row (at ysrc, 16-byte aligned where al is 1, a constant where this is inlined:
 * plain 16-byte loads, no alignment branches in the loop) with qlo <= q < qhi, a thread's every
 * SYMM__MOE_THREADS-th, to dst on the dp PEs from g0: as packets (pkt: 32 bytes a vector), or
 * plainly. The loads of LL_UNROLL vectors go out before their stores. */
SYMM__DEVICE_INTERNAL void ll_csend_vecs(const symm__moe_kargs_t *A, const char *ysrc, char *dst, uint32_t qlo,
                                         uint32_t qhi, uint32_t g0, uint32_t dp, uint32_t tag, int pkt, int al) {
    for (uint32_t q0 = qlo + symm__block_tid(); q0 < qhi; q0 += SYMM__MOE_THREADS * LL_UNROLL) {
        symm__v4_t v[LL_UNROLL];
#pragma unroll
        for (int x = 0; x < LL_UNROLL; x++) {
            const uint32_t q = q0 + (uint32_t)x * SYMM__MOE_THREADS;
            if (q < qhi)
                v[x] = al ? symm__cld16(ysrc + 16u * q, 0) : ll_ld16(ysrc + 16u * q);
        }
#pragma unroll
        for (int x = 0; x < LL_UNROLL; x++) {
            const uint32_t q = q0 + (uint32_t)x * SYMM__MOE_THREADS;
            if (q < qhi)
#pragma unroll 1
                for (uint32_t d = 0; d < dp; d++) {
                    if (pkt)
                        ll_put_pkt2(moe_peer(A, dst + 32u * q, (int)(g0 + d)), v[x], tag);
                    else
                        symm__cst16(moe_peer(A, dst + 16u * q, (int)(g0 + d)), v[x], 1);
                }
        }
    }
}

/* The same for a row off 16-byte alignment (y's rows are not, as a rule): out of line, so its
 * byte-wise loads are no code that the common form jumps over. */
SYMM__NOINLINE void ll_csend_vecs_any(const symm__moe_kargs_t *A, const char *ysrc, char *dst, uint32_t qlo,
                                      uint32_t qhi, uint32_t g0, uint32_t dp, uint32_t tag, int pkt) {
    ll_csend_vecs(A, ysrc, dst, qlo, qhi, g0, dp, tag, pkt, 0);
}

/* The send half of the small handles' combine: the dispatch left its routes as a flat list
 * (ll_flat), each entry with its row's position and its source's mode, so a route's stores need
 * one round of loads before its row's: its entry, with their number and the epoch (fR, fe, and
 * the block's first entry f0, f1: loaded by the caller as the kernel starts, before anything
 * else). No barrier before the first store: unit u = route u / sl, slice u % sl (sl: the plan's csl,
 * divided by its m; a plain row whole, from its slice 0, its flag released behind the block's
 * stores). A row at 16 bytes (as y's rows are) takes the loop with plain 16-byte loads, whose code
 * has no alignment branches. Thread 0 leaves the epoch in *se. */
SYMM__DEVICE_INTERNAL void ll_combine_send_small(const symm__moe_kargs_t *A, uint64_t *se, uint32_t fR, uint64_t fe,
                                                 uint32_t sl, uint64_t f0, uint64_t f1) {
    const uint32_t tid = symm__block_tid(), K = A->topk, dp = (uint32_t)A->dp, B = gridDim.x;
    const uint32_t ysz = moe_kind_size(A->y_kind), nvy = A->hidden * ysz / 16u;
    const uint32_t msl = A->llp.mcsl; /* (sl's m: the call's plan) */
    const uint64_t *flat = MOE_U64(A, ll_flat);
    const uint32_t R = fR;
    const uint64_t e = fe;
    const uint32_t tag = ll_tag(e);
    MOE_TRACE_T0(tb_, A);
    if (tid == 0)
        *se = e;
    ll_stamp(A, LLS_C_SCAN);
    for (uint32_t u = blockIdx.x; u < R * sl; u += B) {
        const uint32_t P = ll_fdiv(u, msl), z = u - P * sl;
        const uint64_t route = u == blockIdx.x ? f0 : symm__cld8(flat + 2u + 2u * P, 0);
        const uint64_t pos = u == blockIdx.x ? f1 : symm__cld8(flat + 3u + 2u * P, 0);
        const uint32_t src = (uint32_t)(route & 0xffffu), k = (uint32_t)((route >> 16) & 0xffffu);
        const uint32_t g0 = dp == 1 ? src : src / dp * dp;
        const uint64_t t = route >> 32;
        const char *ysrc = (const char *)A->y + (uint64_t)((int64_t)(pos >> 32) * A->y_stride[0] +
                                                           (int64_t)((uint32_t)pos & LL_FLAT_ROW) * A->y_stride[1]) *
                                                    ysz;
        const uint32_t mode = (uint32_t)pos >> 30;
        const int al = ((uintptr_t)ysrc & 15u) == 0; /* (16u x q keeps a row's alignment) */
        if (u == blockIdx.x)
            ll_stamp(A, LLS_C_SLOT);
        if (ll_cpkt(A, mode, t)) {
            const uint32_t qlo = ll_fdiv(nvy * z, msl), qhi = ll_fdiv(nvy * (z + 1), msl);
            if (al)
                ll_csend_vecs(A, ysrc, ll_pcslot(A, t, k), qlo, qhi, g0, dp, tag, 1, 1);
            else
                ll_csend_vecs_any(A, ysrc, ll_pcslot(A, t, k), qlo, qhi, g0, dp, tag, 1);
        } else if (z == 0) {
            char *dst = MOE_AT(A, ll_cbuf) + (t * K + k) * (uint64_t)A->hidden * 4u;
            if (al)
                ll_csend_vecs(A, ysrc, dst, 0, nvy, g0, dp, tag, 0, 1);
            else
                ll_csend_vecs_any(A, ysrc, dst, 0, nvy, g0, dp, tag, 0);
            symm__block_sync(); /* (the block's unit: one route, one form) */
            if (tid < dp)
                MOE_RELEASE_PUT(A, tb_, MOE_U64(A, ll_cflag) + t * K + k, e, (int)(g0 + tid),
                                (uint64_t)A->hidden * ysz);
        }
    }
}

/* The send half's first loads, all in flight before any is used: thread x < L's local expert's
 * received rows (returned; 0 past L), source x's mode into modes[x], the epoch into *se by
 * thread 0 (read by every thread after ll_rcnt_scan's barrier). */
SYMM__DEVICE_INTERNAL uint32_t ll_rcnt_load(const symm__moe_kargs_t *A, uint32_t *modes, uint64_t *se) {
    const uint32_t tid = symm__block_tid(), L = A->local;
    const uint32_t c = tid < L ? MOE_U32(A, ll_rcnt)[tid] : 0, md = tid < (uint32_t)A->n ? MOE_U32(A, ll_mode)[tid] : 0;
    const uint64_t ev = tid == 0 ? *(volatile uint64_t *)&moe_state(A)->epoch : 0;
    if (tid < (uint32_t)A->n)
        modes[tid] = md;
    if (tid == 0)
        *se = ev;
    return c;
}

/* The send half; thread 0 loads the epoch into *se (read by every thread after the scan's
 * barriers), with the first loads of the counts and modes: no warp waits for one of these
 * before all are in flight. */
SYMM__DEVICE_INTERNAL void ll_combine_send(const symm__moe_kargs_t *A, uint64_t *se) {
    const uint32_t tid = symm__block_tid(), L = A->local, K = A->topk, dp = (uint32_t)A->dp;
    const uint32_t ysz = moe_kind_size(A->y_kind), nvy = A->hidden * ysz / 16u;
    const uint64_t slot_bytes = (uint64_t)A->hidden * 4u;
    const uint64_t *routes = MOE_U64(A, ll_route);
    extern __shared__ uint32_t pre[]; /* [L + 1]: first flat row of each local expert */
    __shared__ uint64_t sridx[LL_BATCH], syoff[LL_BATCH];
    __shared__ uint32_t modes[SYMM__MOE_MAX_PES]; /* each source's mode: a row's form without a second load */
    uint32_t total, rb, tag;
    uint64_t e;
    total = ll_rcnt_scan(A, ll_rcnt_load(A, modes, se), pre);
    ll_stamp(A, LLS_C_SCAN);
    e = *se;
    tag = ll_tag(e);
    if (total > 0 && 2u * total <= gridDim.x) {
        ll_combine_send_slices(A, e, pre, modes, total);
        return;
    }
    /* few rows: one per block, so they all leave at once; else a block's share in one batch (up
     * to LL_BATCH rows), so its plain rows wait for one release, not one per few rows */
    rb = LL_BATCH;
    if (rb > (total + gridDim.x - 1) / gridDim.x)
        rb = (total + gridDim.x - 1) / gridDim.x;
    if (rb < 1)
        rb = 1;
    for (uint32_t r0 = blockIdx.x * rb; r0 < total; r0 += gridDim.x * rb) {
        const uint32_t nb = total - r0 < rb ? total - r0 : rb;
        int plain = 0;
        symm__block_sync();
        MOE_TRACE_T0(tb_, A);
        if (tid < nb) {
            const uint32_t r = r0 + tid;
            const uint32_t lo = ll_bisect(pre, L, r); /* row r's expert */
            sridx[tid] = (uint64_t)lo * A->rows + (r - pre[lo]);
            syoff[tid] = (uint64_t)((int64_t)lo * A->y_stride[0] + (int64_t)(r - pre[lo]) * A->y_stride[1]) * ysz;
        }
        symm__block_sync();
        if (r0 == blockIdx.x * rb)
            ll_stamp(A, LLS_C_SLOT);
        /* the routes are read after the rows' loads are issued, so both are in flight together */
        {
            const uint32_t tv = nb * nvy;
            for (uint32_t q0 = tid; q0 < tv; q0 += SYMM__MOE_THREADS * LL_UNROLL) {
                symm__v4_t v[LL_UNROLL];
#pragma unroll
                for (int u = 0; u < LL_UNROLL; u++) {
                    const uint32_t q = q0 + (uint32_t)u * SYMM__MOE_THREADS;
                    if (q < tv)
                        v[u] = ll_ld16((const char *)A->y + syoff[q / nvy] + 16u * (q % nvy));
                }
#pragma unroll
                for (int u = 0; u < LL_UNROLL; u++) {
                    const uint32_t q = q0 + (uint32_t)u * SYMM__MOE_THREADS;
                    if (q < tv) {
                        const uint64_t route = routes[sridx[q / nvy]];
                        const uint32_t src = (uint32_t)(route & 0xffffu), k = (uint32_t)((route >> 16) & 0xffffu);
                        const uint32_t g0 = src / dp * dp;
                        if (ll_cpkt(A, modes[src], route >> 32)) {
                            char *dst = ll_pcslot(A, route >> 32, k) + 32u * (q % nvy);
                            for (uint32_t d = 0; d < dp; d++)
                                ll_put_pkt2(moe_peer(A, dst, (int)(g0 + d)), v[u], tag);
                        } else {
                            char *dst = MOE_AT(A, ll_cbuf) + ((route >> 32) * K + k) * slot_bytes + 16u * (q % nvy);
                            for (uint32_t d = 0; d < dp; d++)
                                symm__cst16(moe_peer(A, dst, (int)(g0 + d)), v[u], 1);
                        }
                    }
                }
            }
        }
        /* plain rows: their flags, released behind the whole block's stores */
        for (uint32_t j = 0; j < nb; j++) {
            const uint64_t route = routes[sridx[j]];
            plain |= !ll_cpkt(A, modes[route & 0xffffu], route >> 32);
        }
        if (plain) {
            symm__block_sync();
            for (uint32_t x = tid; x < nb * dp; x += SYMM__MOE_THREADS) {
                const uint64_t route = routes[sridx[x / dp]];
                const uint32_t src = (uint32_t)(route & 0xffffu), k = (uint32_t)((route >> 16) & 0xffffu);
                if (!ll_cpkt(A, modes[src], route >> 32))
                    MOE_RELEASE_PUT(A, tb_, MOE_U64(A, ll_cflag) + (route >> 32) * K + k, e,
                                    (int)(src / dp * dp + x % dp), (uint64_t)A->hidden * ysz);
            }
        }
    }
}

/* acc[...] += w x the 16 data bytes d of pass h: 8 elements of bf16 / f16
 * (one pass), or f32 elements 4h .. 4h + 3 (two passes). */
SYMM__DEVICE_INTERNAL void ll_acc16(uint32_t kind, symm__v4_t d, uint32_t h, float w, float *acc) {
    if (kind == SYMM_DTYPE_F32) {
        acc[4 * h] += w * symm__bits_f32(d.x);
        acc[4 * h + 1] += w * symm__bits_f32(d.y);
        acc[4 * h + 2] += w * symm__bits_f32(d.z);
        acc[4 * h + 3] += w * symm__bits_f32(d.w);
    } else {
        const symm__v4_t none = {0, 0, 0, 0};
        moe_fma8(kind, d, none, w, acc);
    }
}

#define LL_CGATHER 4 /* routes whose packets a combine thread loads at once in ll_combine_group_pkt */

/* Pass h of one output group (8 elements) of token t whose rows came back as packets (16 data
 * bytes of each route: the group's 8 elements of a 2-byte row, or half of them of an f32 row):
 * LL_CGATHER routes at a time, their packets loaded at once, those without the tag yet loaded
 * again together until none is missing, then summed in slot order. Kept small and in registers
 * (a wider gather spills, and a spilled load is waited for at once: the loads then go one round
 * trip after another). h is a constant where it is inlined, so acc stays in registers. */
SYMM__DEVICE_INTERNAL void ll_combine_group_pkt(const symm__moe_kargs_t *A, uint32_t tag, uint64_t t, uint32_t v,
                                                uint32_t h, const uint8_t *ok, const float *w, float *acc) {
    const uint32_t K = A->topk, kind = A->y_kind;
    const uint64_t stride = (uint64_t)A->hidden * 8u; /* one route's packet slot */
    const char *base = ll_pcslot(A, t, 0) + (uint64_t)v * 16u * moe_kind_size(kind) + 32u * h;
    for (uint32_t k0 = 0; k0 < K; k0 += LL_CGATHER) {
        symm__v4_t pa[LL_CGATHER], pb[LL_CGATHER];
        uint32_t need = 0, polls = 0;
        uint64_t t0 = 0;
#pragma unroll
        for (uint32_t i = 0; i < LL_CGATHER; i++)
            if (k0 + i < K && ok[k0 + i]) {
                need |= 1u << i;
                pa[i] = symm__c_ld16_vol(base + (k0 + i) * stride);
                pb[i] = symm__c_ld16_vol(base + (k0 + i) * stride + 16);
            }
        for (;;) {
            uint32_t miss = 0, seen = 0, at = 0;
#pragma unroll
            for (uint32_t i = 0; i < LL_CGATHER; i++)
                if (((need >> i) & 1u) && !(ll_pkt_ok(pa[i], tag) && ll_pkt_ok(pb[i], tag)))
                    miss |= 1u << i;
            if (miss == 0)
                break;
            if (++polls % SYMM__WAIT_CHECK_EVERY == 0) { /* (constant indices only: pa, pb stay in registers) */
#pragma unroll
                for (uint32_t i = LL_CGATHER; i-- > 0;)
                    if ((miss >> i) & 1u) {
                        const symm__v4_t x = ll_pkt_ok(pa[i], tag) ? pb[i] : pa[i];
                        seen = x.y == tag ? x.w : x.y;
                        at = k0 + i;
                    }
                t0 = ll_wait_due(A, base + at * stride, SYMM_CMP_EQ, tag, seen, t0);
            }
#pragma unroll
            for (uint32_t i = 0; i < LL_CGATHER; i++)
                if ((miss >> i) & 1u) {
                    pa[i] = symm__c_ld16_vol(base + (k0 + i) * stride);
                    pb[i] = symm__c_ld16_vol(base + (k0 + i) * stride + 16);
                }
        }
#pragma unroll
        for (uint32_t i = 0; i < LL_CGATHER; i++)
            if ((need >> i) & 1u) { /* slot order, as the reference sums */
                symm__v4_t d;
                d.x = pa[i].x;
                d.y = pa[i].z;
                d.z = pb[i].x;
                d.w = pb[i].z;
                if (kind == SYMM_DTYPE_BF16) {
                    const uint32_t u[4] = {d.x, d.y, d.z, d.w};
#pragma unroll
                    for (int q = 0; q < 4; q++) {
                        acc[2 * q] += w[k0 + i] * symm__bits_f32(u[q] << 16);
                        acc[2 * q + 1] += w[k0 + i] * symm__bits_f32(u[q] & 0xffff0000u);
                    }
                } else {
                    ll_acc16(kind, d, h, w[k0 + i], acc);
                }
            }
    }
}

/* ll_combine_pkt_rp's first round of loads for 2-byte outputs (this thread's route's two packets),
 * issued before the unit's setup says which routes are valid and which tokens come back as
 * packets: a slot that turns out unused is not looked at, so these loads ride with the setup's.
 * 1 when it loaded them (f32 rows, four packets a route, load theirs in ll_combine_pkt_rp). */
SYMM__DEVICE_INTERNAL int ll_combine_rp_preload(const symm__moe_kargs_t *A, uint64_t t0, uint32_t nb, uint32_t glo,
                                                uint32_t gn, symm__v4_t *pk) {
    const uint32_t tid = symm__block_tid(), K = A->topk, per = SYMM__MOE_THREADS / K, x = tid / K, k = tid % K;
    if (A->y_kind == SYMM_DTYPE_F32)
        return 0;
    if (tid < per * K && x < nb * gn) {
        const char *q = ll_pcslot(A, t0 + x / gn, k) + (uint64_t)(glo + x % gn) * 32u;
        pk[0] = symm__c_ld16_vol(q);
        pk[1] = symm__c_ld16_vol(q + 16u);
    }
    return 1;
}

/* weight x row of a round's routes, [element][thread] with rows one word longer than the block,
 * so the K threads of a group that read one element each (ll_cprod_sum) hit K different banks */
#define LL_CPROD_ROW (SYMM__MOE_THREADS + 1)

SYMM__DEVICE_INTERNAL float *ll_cprod(void) {
    __shared__ float s[8 * LL_CPROD_ROW];
    return s;
}

/* Poll a route's np packets at q (first loads in pk) until they carry the tag; w x its 8
 * elements into pr (zeros before). */
SYMM__DEVICE_INTERNAL void ll_route_prod(const symm__moe_kargs_t *A, const char *q, uint32_t tag, uint32_t np,
                                         symm__v4_t *pk, float w, float *pr) {
    symm__v4_t d;
    uint32_t polls = 0;
    uint64_t tw = 0;
    for (;;) {
        uint32_t miss = 0;
#pragma unroll
        for (uint32_t i = 0; i < 4; i++)
            if (i < np && !ll_pkt_ok(pk[i], tag))
                miss |= 1u << i;
        if (miss == 0)
            break;
        if (++polls % SYMM__WAIT_CHECK_EVERY == 0) {
            const uint32_t i = (uint32_t)__ffs((int)miss) - 1u;
            const symm__v4_t y = i == 0 ? pk[0] : i == 1 ? pk[1] : i == 2 ? pk[2] : pk[3];
            tw = ll_wait_due(A, q + 16u * i, SYMM_CMP_EQ, tag, y.y == tag ? y.w : y.y, tw);
        }
#pragma unroll
        for (uint32_t i = 0; i < 4; i++)
            if ((miss >> i) & 1u)
                pk[i] = symm__c_ld16_vol(q + 16u * i);
    }
    d.x = pk[0].x;
    d.y = pk[0].z;
    d.z = pk[1].x;
    d.w = pk[1].z;
    ll_acc16(A->y_kind, d, 0, w, pr);
    if (np == 4) {
        d.x = pk[2].x;
        d.y = pk[2].z;
        d.z = pk[3].x;
        d.w = pk[3].z;
        ll_acc16(A->y_kind, d, 1, w, pr);
    }
}

/* Thread (x, k) of a round (tid = x K + k), after the barrier that shares ll_cprod: elements k,
 * k + K, ... of output group x summed over the group's K routes in slot order (one element per
 * thread where the group's first thread summed all eight), stored at o, the group's first element. */
SYMM__DEVICE_INTERNAL void ll_cprod_sum(const symm__moe_kargs_t *A, uint32_t k, char *o) {
    const uint32_t K = A->topk, g = symm__block_tid() - k;
    const float *sp = ll_cprod();
#pragma unroll 1
    for (uint32_t i = k; i < 8; i += K) {
        float acc = 0.0f;
        if (K <= LL_KREG) { /* the loads first, all in flight, then the sum in slot order */
            float p[LL_KREG];
#pragma unroll
            for (uint32_t kk = 0; kk < LL_KREG; kk++)
                p[kk] = kk < K ? sp[i * LL_CPROD_ROW + g + kk] : 0.0f;
#pragma unroll
            for (uint32_t kk = 0; kk < LL_KREG; kk++)
                if (kk < K)
                    acc += p[kk];
        } else {
            for (uint32_t kk = 0; kk < K; kk++)
                acc += sp[i * LL_CPROD_ROW + g + kk];
        }
        symm__cst2(o + 2u * i, A->out_kind == SYMM_DTYPE_BF16 ? symm__c_f32_to_bf16(acc) : symm__c_f32_to_f16(acc),
                   0);
    }
}

/* The packet tokens' output groups of a unit, a route per thread: thread (pair, k) polls route k's
 * packets of one group (one round of loads for every route, where a thread that sums all of a
 * group's routes itself takes several), leaves weight x row in shared memory, and the pair's
 * threads sum the products in slot order, an element each. Every thread calls it. */
SYMM__DEVICE_INTERNAL void ll_combine_pkt_rp(const symm__moe_kargs_t *A, uint32_t tag, uint64_t t0, uint32_t nb,
                                             uint32_t glo, uint32_t gn, const uint8_t *sok, const float *sw,
                                             const uint8_t *spk, const symm__v4_t *pre, int have) {
    const uint32_t tid = symm__block_tid(), K = A->topk, kind = A->y_kind, per = SYMM__MOE_THREADS / K;
    const uint32_t np = kind == SYMM_DTYPE_F32 ? 4u : 2u; /* packets of one route's group */
    float *sprod = ll_cprod();
    for (uint32_t x0 = 0; x0 < nb * gn; x0 += per) {
        float pr[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (tid < per * K && x0 + tid / K < nb * gn) {
            const uint32_t x = x0 + tid / K, k = tid % K, j = x / gn, v = glo + x % gn;
            if (spk[j] && sok[j * K + k]) {
                const char *q = ll_pcslot(A, t0 + j, k) + (uint64_t)v * 16u * moe_kind_size(kind);
                symm__v4_t pk[4];
#pragma unroll
                for (uint32_t i = 0; i < 4; i++)
                    if (i < np)
                        pk[i] = have && x0 == 0 && i < 2 ? pre[i & 1u] : symm__c_ld16_vol(q + 16u * i);
                ll_route_prod(A, q, tag, np, pk, sw[j * K + k], pr);
                if (x0 == 0)
                    ll_stamp(A, LLS_CS_POLL);
            }
        }
#pragma unroll
        for (uint32_t i = 0; i < 8; i++)
            sprod[i * LL_CPROD_ROW + tid] = pr[i];
        symm__block_sync();
        if (x0 == 0)
            LL_FSTAMP(A, LLS_CS_PROD);
        if (tid < per * K && x0 + tid / K < nb * gn) { /* (j, v again: kept, they would be live across the polls) */
            const uint32_t x = x0 + tid / K, k = tid % K, j = x / gn, v = glo + x % gn;
            if (spk[j])
                ll_cprod_sum(A, k, (char *)A->out + ((int64_t)(t0 + j) * A->out_stride + (int64_t)v * 8) * 2);
        }
        if (x0 == 0)
            ll_stamp(A, LLS_CS_SUM);
        symm__block_sync();
    }
}

/* A token's plain rows for output group v summed into acc in slot order (f32 rows in two passes):
 * route k's row starts at row_at(k); the loads of MOE_GATHER routes in flight before any is used,
 * and the passes unrolled so acc is indexed by constants and stays in registers. */
template <typename RowAt>
SYMM__DEVICE_INTERNAL void ll_sum_plain_rows(uint32_t kind, uint32_t K, uint32_t v, const uint8_t *sok,
                                             const float *sw, RowAt row_at, float *acc) {
    const uint32_t ysz = moe_kind_size(kind), passes = ysz / 2u;
#pragma unroll
    for (uint32_t h = 0; h < 2; h++)
        for (uint32_t k0 = 0; h < passes && k0 < K; k0 += MOE_GATHER) {
            symm__v4_t r[MOE_GATHER];
#pragma unroll
            for (uint32_t i = 0; i < MOE_GATHER; i++)
                if (k0 + i < K && sok[k0 + i])
                    r[i] = symm__cld16(row_at(k0 + i) + (uint64_t)v * 8u * ysz + 16u * h, 0);
#pragma unroll
            for (uint32_t i = 0; i < MOE_GATHER; i++)
                if (k0 + i < K && sok[k0 + i])
                    ll_acc16(kind, r[i], h, sw[k0 + i], acc);
        }
}

/* Output groups [glo, glo + gn) (8 elements each) of tokens t0 .. t0 + nb - 1:
 * each thread sums a group's routes in slot order, 16 data bytes per route
 * and pass (f32 rows take two passes), with the loads of several routes in
 * flight: packets polled until they carry the tag, or plain rows whose flags
 * were waited for. */
SYMM__DEVICE_INTERNAL void ll_combine_rows(const symm__moe_kargs_t *A, uint32_t tag, uint64_t t0, uint32_t nb,
                                           uint32_t glo, uint32_t gn, const uint8_t *sok, const float *sw,
                                           const uint8_t *spk, int rp, const symm__v4_t *pre, int have) {
    const uint32_t tid = symm__block_tid(), K = A->topk, kind = A->y_kind, ysz = moe_kind_size(kind);
    const uint32_t passes = ysz / 2u;
    const uint64_t slot_bytes = (uint64_t)A->hidden * 4u;
    /* rp (the small kernel): packet tokens a route per thread (1), or none in the unit (2); the
     * other kernel, which may take many rounds of it, sums each group's routes in one thread */
    if (rp == 1)
        ll_combine_pkt_rp(A, tag, t0, nb, glo, gn, sok, sw, spk, pre, have);
    for (uint32_t q = tid; q < nb * gn; q += SYMM__MOE_THREADS) {
        const uint32_t j = q / gn, v = glo + q % gn;
        const uint64_t t = t0 + j;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (rp && spk[j])
            continue;
        /* the passes unrolled: acc is indexed by constants, so it stays in registers */
        if (spk[j]) {
            ll_combine_group_pkt(A, tag, t, v, 0, &sok[j * K], &sw[j * K], acc);
            if (passes == 2)
                ll_combine_group_pkt(A, tag, t, v, 1, &sok[j * K], &sw[j * K], acc);
        } else {
            const char *rows = MOE_AT(A, ll_cbuf) + t * K * slot_bytes;
            ll_sum_plain_rows(kind, K, v, &sok[j * K], &sw[j * K],
                              [=](uint32_t k) { return rows + k * slot_bytes; }, acc);
        }
        moe_store8((char *)A->out + ((int64_t)t * A->out_stride + (int64_t)v * 8) * 2, A->out_kind, acc);
    }
}

/* How the receive half splits its tokens (below `bound`) over the blocks: tb tokens a unit, or
 * (fewer tokens than blocks) each token's hidden dimension in sl slices; units in all. */
typedef struct ll_cplan {
    uint64_t bound, units;
    uint32_t tb, sl;
} ll_cplan_t;

SYMM__DEVICE_INTERNAL ll_cplan_t ll_combine_plan(const symm__moe_kargs_t *A, uint64_t bound) {
    const uint32_t K = A->topk, B = gridDim.x, h8 = A->hidden / 8u, b32 = (uint32_t)bound; /* <= max_num_tokens */
    ll_cplan_t c;
    c.bound = bound;
    c.tb = 1;
    c.sl = 1;
    if (b32 < B) { /* fewer tokens than blocks: each split over the blocks (whatever the batch) */
        c.sl = b32 ? B / b32 : 1;
        if (c.sl > h8)
            c.sl = h8;
    } else {
        c.tb = 1024u / h8;
        c.tb = c.tb < 1 ? 1 : (c.tb > LL_BATCH ? LL_BATCH : c.tb);
        if (c.tb * K > SYMM__MOE_THREADS)
            c.tb = SYMM__MOE_THREADS / K;
        if ((uint64_t)c.tb * B > c.bound) /* few tokens: spread them over the blocks */
            c.tb = (b32 + B - 1) / B;
    }
    c.units = c.sl > 1 ? c.bound * c.sl : (b32 + c.tb - 1) / c.tb;
    return c;
}

/* Unit w's first token and tokens. */
SYMM__DEVICE_INTERNAL uint64_t ll_unit_t0(const ll_cplan_t *c, uint64_t w) {
    return c->sl > 1 ? (uint32_t)w / c->sl : w * c->tb; /* (units < 2^32: tokens x slices <= blocks there) */
}

SYMM__DEVICE_INTERNAL uint32_t ll_unit_nb(const ll_cplan_t *c, uint64_t t0) {
    return c->sl > 1 ? 1u : (c->bound - t0 < c->tb ? (uint32_t)(c->bound - t0) : c->tb);
}

/* The receive half's shared state of one unit: each route's expert, validity and weight, and
 * each token's form. */
typedef struct ll_cunit {
    uint32_t six[SYMM__MOE_THREADS];
    float sw[SYMM__MOE_THREADS];
    uint8_t sok[SYMM__MOE_THREADS];
    uint8_t spk[LL_BATCH];
} ll_cunit_t;

/* The lines unit w's setup will load, into L1 at the kernel's start, by the block's last warp
 * (the send half's first loads are the first warps'): the send half hides their latency. The
 * unit is the one of *bound_m = num_tokens (the bound is not waited for here); with another
 * bound the setup loads what it needs itself. */
SYMM__DEVICE_INTERNAL void ll_combine_prefetch(const symm__moe_kargs_t *A, uint64_t w) {
    const uint32_t tid = symm__block_tid(), K = A->topk, dp = (uint32_t)A->dp;
    if (tid >= SYMM__MOE_THREADS - 32) {
        const uint32_t lane = tid - (SYMM__MOE_THREADS - 32);
        const ll_cplan_t c = ll_combine_plan(A, A->num_tokens);
        if (w < c.units) {
            const uint64_t t0 = ll_unit_t0(&c, w);
            const uint32_t nb = ll_unit_nb(&c, t0);
            for (uint32_t q = lane; q < nb * K; q += 32) {
                symm__prefetch_l1((const uint32_t *)A->idx + t0 * K + q);
                symm__prefetch_l1(A->weights + t0 * K + q);
            }
            for (uint32_t j = lane; j < nb && j < dp; j += 32)
                symm__prefetch_l1(MOE_U32(A, ll_mode) + (uint32_t)A->me / dp * dp + (uint32_t)((t0 + j) % dp));
        }
    }
}

/* A thread's part of its block's first unit (the plan of *bound_m = num_tokens), worked out before
 * the PDL wait and loaded as the small handles' combine starts, so the send half hides the loads.
 * One struct for both forms of the unit (what it holds across the send half is where the kernel
 * is tightest for registers):
 *   in rounds (bits & LL_CF_ON; ll_combine_fast): t the thread's token, nb its (first) output
 *     group, ix its slot, w its weight (0: the route is not valid), bits its LL_CF_* flags;
 *   otherwise: the unit's tokens t .. t + nb - 1 and the thread's route of them (thread tid: slot
 *     tid % K of token t + tid / K), ix its expert, mode its token's mode word, w its weight;
 *     have: they are that unit's (set when the bound turns out to give the same unit). */
typedef struct ll_cin {
    uint64_t t;
    uint32_t nb, ix, mode, bits, have;
    float w;
    uint32_t r[LL_KREG]; /* in rounds: the token's index row as loaded (ll_cin_settle) */
} ll_cin_t;

/* A block's first unit in rounds of a route per thread (top-k at most LL_KREG; a decode step's
 * unit: one token's slice, or tokens whose nb x gn output groups fit one round): thread (x, k)
 * takes slot k of output group x (one token: x, x + per, ...), and loads that token's index row,
 * weight and form itself as the kernel starts, so neither its route's validity nor its token's
 * form waits for a barrier or another thread. */
#define LL_CF_ON 1u  /* the block's first unit goes in rounds */
#define LL_CF_MY 2u  /* the thread has a route */
#define LL_CF_PKT 4u /* its token comes back as packets (else plainly, behind a flag per route) */
#define LL_CF_OK 8u  /* its route is valid: its row is waited for */

/* The block-uniform part of the small combine's prologue (before the PDL wait), from the call's
 * plan (symm__moe_ll_plan: no division on the device, a few multiplies of the block's index),
 * worked out by every thread itself (no barrier, no shared copy). The send split (csl: unit u = route
 * u / csl, slice u % csl, with csl from the most routes a PE may receive, n x cap x min(top-k, L),
 * not from how many the dispatch received, so a block knows its first route's entry before it
 * loads their number) and the block's first route entry (~0: none); the
 * block's first unit of the plan of *bound_m = num_tokens (has: there is one; units in that plan):
 * tokens t0 .. t0 + nb - 1, output groups glo .. glo + gn - 1; one: ll_combine_fast takes it, in
 * rounds of per groups (one token: as many as it takes; more tokens: one round); g0 the first PE
 * of my DP group. */
typedef struct ll_cpro {
    uint64_t t0, units;
    uint32_t csl, cP, has, nb, glo, gn, one, per, rounds, g0;
} ll_cpro_t;

SYMM__DEVICE_INTERNAL void ll_combine_pro(const symm__moe_kargs_t *A, int send, int recv, ll_cpro_t *p) {
    const symm__moe_llplan_t *P = &A->llp;
    const uint32_t K = A->topk, b = blockIdx.x;
    uint64_t t0 = 0;
    uint32_t has = 0, nb = 0, glo = 0, gn = 0, rounds = 0, one = 0, cP = ~0u;
    if (recv && b < P->punits) { /* the unit of ll_combine_plan(num_tokens), ll_unit_t0, ll_unit_nb */
        const uint32_t h8 = A->hidden / 8u, sl = P->psl;
        uint32_t z = 0;
        has = 1;
        if (sl > 1) {
            t0 = ll_fdiv(b, P->mpsl);
            z = b - (uint32_t)t0 * sl;
            nb = 1;
        } else {
            t0 = (uint64_t)b * P->ptb;
            nb = A->num_tokens - t0 < P->ptb ? (uint32_t)(A->num_tokens - t0) : P->ptb;
        }
        glo = ll_fdiv(h8 * z, P->mpsl);
        gn = ll_fdiv(h8 * (z + 1), P->mpsl) - glo;
        /* (rounds of per = THREADS / K groups) */
        rounds = nb > 1 || gn * K <= SYMM__MOE_THREADS ? 1u : ll_fdiv(gn + P->per - 1u, P->mper);
        one = K <= LL_KREG && (nb == 1 ? rounds <= LL_CROUNDS : nb * gn * K <= SYMM__MOE_THREADS);
    }
    if (send && ll_fdiv(b, P->mcsl) < P->rmax)
        cP = ll_fdiv(b, P->mcsl);
    p->t0 = t0;
    p->units = recv ? P->punits : 0u;
    p->has = has;
    p->nb = nb;
    p->glo = glo;
    p->gn = gn;
    p->rounds = rounds;
    p->one = one;
    p->csl = send ? P->csl : 1u;
    p->cP = cP;
    p->per = P->per;
    p->g0 = P->g0;
}

/* The addresses of ll_combine_inputs' loads, from the prologue p, arithmetic only (done before the
 * PDL wait): *ro the route's index in idx and weights, *mi its token's mode word in ll_mode (~0:
 * none). */
SYMM__DEVICE_INTERNAL void ll_combine_inputs_at(const symm__moe_kargs_t *A, const ll_cpro_t *p, ll_cin_t *in,
                                                uint32_t *ro, uint32_t *mi) {
    const uint32_t tid = symm__block_tid(), K = A->topk, dp = (uint32_t)A->dp;
    in->t = 0;
    in->nb = 0;
    in->ix = 0;
    in->mode = 0;
    in->bits = 0;
    in->have = 0;
    in->w = 0.0f;
    *ro = ~0u;
    *mi = ~0u;
    if (!p->has)
        return;
    if (p->one) {
        const uint32_t x = ll_fdiv(tid, A->llp.mk), nb = p->nb, gn = p->gn;
        in->bits = LL_CF_ON;
        if (x < p->per && x < nb * gn) { /* (its first group; one token: then every per-th) */
            /* (one token: a decode step's; more: the plan has no slices, so gn is hidden / 8) */
            const uint32_t j = nb == 1 ? 0u : ll_fdiv(x, A->llp.mh8);
            in->bits |= LL_CF_MY;
            in->t = p->t0 + j;
            in->nb = p->glo + x - j * gn;
            in->ix = tid - x * K;
            *mi = p->g0 + (dp == 1 ? 0u : (uint32_t)in->t % dp); /* (tokens < 2^32) */
        }
        return;
    }
    in->t = p->t0;
    in->nb = p->nb;
    if (tid < p->nb * K) { /* (a unit's routes: below the block's threads, from token t0) */
        *ro = tid;
        if (tid % K == 0)
            *mi = p->g0 + (dp == 1 ? 0u : (uint32_t)(p->t0 + tid / K) % dp);
    }
}

/* (asm loads: issued here, where the send half hides them, not moved to their use; the one
 * round's validity and form are worked out after the send half, ll_cin_settle: these loads may
 * come back later than the send half's own) */
SYMM__DEVICE_INTERNAL void ll_combine_inputs(const symm__moe_kargs_t *A, ll_cin_t *in, uint32_t ro, uint32_t mi) {
    const uint32_t K = A->topk;
    if (ro != ~0u) {
        const uint64_t q = in->t * K + ro;
        in->ix = symm__cld4((const uint32_t *)A->idx + q, 0);
        in->w = symm__bits_f32(symm__cld4(A->weights + q, 0));
    }
    if (mi != ~0u)
        in->mode = symm__cld4(MOE_U32(A, ll_mode) + mi, 0);
    if (in->bits & LL_CF_MY) {
        const uint32_t *row = (const uint32_t *)A->idx + in->t * K;
#pragma unroll
        for (uint32_t i = 0; i < LL_KREG; i++)
            in->r[i] = i < K ? symm__cld4(row + i, 0) : 0u;
        in->w = symm__bits_f32(symm__cld4(A->weights + in->t * K + in->ix, 0));
    }
}

/* The route of a unit in rounds, from its loads: valid (ll_valid on registers, constant indices only),
 * its weight (0 where not) and its token's form. */
SYMM__DEVICE_INTERNAL void ll_cin_settle(const symm__moe_kargs_t *A, ll_cin_t *in) {
    const uint32_t k = in->ix;
    uint32_t ex = 0;
    int ok;
#pragma unroll
    for (uint32_t i = 0; i < LL_KREG; i++)
        if (i == k)
            ex = in->r[i];
    ok = ex < A->experts;
#pragma unroll
    for (uint32_t i = 0; i < LL_KREG; i++)
        if (i < k && in->r[i] == ex)
            ok = 0;
    in->bits |= (ll_cpkt(A, in->mode, in->t) ? LL_CF_PKT : 0u) | (ok ? LL_CF_OK : 0u);
    if (!ok)
        in->w = 0.0f;
}

/* A block's first unit in rounds of a route per thread (in, from the prologue p; every thread):
 * each valid route's row waited for by its thread (packets polled, their first loads out at once;
 * or the route's flag, in the first round, then its row), weight x row into ll_cprod, a barrier,
 * each output element summed by one thread of its group. A token's later rounds take the same
 * routes' next groups. */
SYMM__DEVICE_INTERNAL void ll_combine_fast(const symm__moe_kargs_t *A, uint64_t e, ll_cin_t *in, const ll_cpro_t *p) {
    const uint32_t tid = symm__block_tid(), kind = A->y_kind, ysz = moe_kind_size(kind);
    const uint32_t rounds = p->rounds, per = p->per, vend = p->glo + p->gn;
    float *sprod = ll_cprod();
    if (in->bits & LL_CF_MY)
        ll_cin_settle(A, in);
    for (uint32_t r = 0; r < rounds; r++) {
        const uint32_t v = in->nb + r * per;
        const int ok = (in->bits & (LL_CF_MY | LL_CF_OK)) == (LL_CF_MY | LL_CF_OK) && v < vend;
        float pr[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (ok && (in->bits & LL_CF_PKT)) {
            const uint32_t np = kind == SYMM_DTYPE_F32 ? 4u : 2u;
            const char *q = ll_pcslot(A, in->t, in->ix) + (uint64_t)v * 16u * ysz;
            symm__v4_t pk[4];
#pragma unroll
            for (uint32_t i = 0; i < 4; i++)
                if (i < np)
                    pk[i] = symm__c_ld16_vol(q + 16u * i);
            if (r == 0)
                LL_FSTAMP(A, LLS_CS_PRE);
            ll_route_prod(A, q, ll_tag(e), np, pk, in->w, pr);
            if (r == 0)
                ll_stamp(A, LLS_CS_POLL);
        } else if (ok) { /* (the flag from the route's PE, released behind its row) */
            const char *row = MOE_AT(A, ll_cbuf) + (in->t * A->topk + in->ix) * (uint64_t)A->hidden * 4u +
                              (uint64_t)v * 8u * ysz;
            if (r == 0) {
                const uint64_t *fl = MOE_U64(A, ll_cflag) + in->t * A->topk + in->ix;
                uint64_t f = symm__ld_b64(fl, SYMM_SEM_ACQUIRE, SYMM_SCOPE_SYS), tw = 0;
                uint32_t polls = 0;
                while (f < e) {
                    if (++polls % SYMM__WAIT_CHECK_EVERY == 0)
                        tw = ll_wait_due(A, fl, SYMM_CMP_GE, e, f, tw);
                    f = symm__ld_b64(fl, SYMM_SEM_ACQUIRE, SYMM_SCOPE_SYS);
                }
            }
            ll_acc16(kind, symm__cld16(row, 0), 0, in->w, pr);
            if (kind == SYMM_DTYPE_F32)
                ll_acc16(kind, symm__cld16(row + 16, 0), 1, in->w, pr);
        }
#pragma unroll
        for (uint32_t i = 0; i < 8; i++)
            sprod[i * LL_CPROD_ROW + tid] = pr[i];
        symm__block_sync();
        if (r == 0)
            LL_FSTAMP(A, LLS_CS_PROD);
        if ((in->bits & LL_CF_MY) && v < vend)
            ll_cprod_sum(A, in->ix, (char *)A->out + ((int64_t)in->t * A->out_stride + (int64_t)v * 8) * 2);
        if (r == 0)
            ll_stamp(A, LLS_CS_SUM);
        if (r + 1 < rounds)
            symm__block_sync(); /* (the next round's products overwrite these) */
    }
}

/* Unit tokens t0 .. t0 + nb - 1 (threads below nb x K: one route each): every route's index,
 * weight and the token's form loaded at once, then each route's validity from shared memory.
 * Every thread calls it; a barrier must pass before u is read. */
SYMM__DEVICE_INTERNAL void ll_combine_setup(const symm__moe_kargs_t *A, uint64_t t0, uint32_t nb, ll_cunit_t *u,
                                            const ll_cin_t *in) {
    const uint32_t tid = symm__block_tid(), K = A->topk, dp = (uint32_t)A->dp;
    const uint32_t g0 = (uint32_t)A->me / dp * dp;
    float w = 0.0f;
    uint32_t mode = 0;
    if (in != NULL && in->have) { /* loaded as the kernel started */
        if (tid < nb * K) {
            u->six[tid] = in->ix;
            w = in->w;
            mode = in->mode;
        }
    } else if (tid < nb * K) {
        const uint64_t t = t0 + tid / K;
        u->six[tid] = ((const uint32_t *)A->idx)[t * K + tid % K];
        w = A->weights[t * K + tid % K];
        if (tid % K == 0)
            mode = MOE_U32(A, ll_mode)[g0 + (uint32_t)(t % dp)];
    }
    symm__block_sync();
    LL_FSTAMP(A, LLS_CS_SET1);
    if (tid < nb * K) {
        const uint64_t t = t0 + tid / K;
        const uint32_t k = tid % K;
        const int ok = ll_valid(&u->six[tid - k], k, A->experts);
        u->sok[tid] = (uint8_t)ok;
        u->sw[tid] = ok ? w : 0.0f;
        if (k == 0)
            u->spk[tid / K] = (uint8_t)ll_cpkt(A, mode, t);
    }
}

/* The receive half (*se: the epoch, in shared memory, written before a barrier this half passes;
 * braw: *bound_m as loaded; in: the small kernel's first unit, with fe, the epoch every thread
 * loaded, and pro, the prologue's plan). A first unit of ll_combine_fast's goes first, before
 * the plan (the bound as the pre-wait arithmetic assumed, so the same unit), and with no unit
 * after it the plan is not worked out at all. It ends the kernel (the stamps). */
SYMM__DEVICE_INTERNAL void ll_combine_recv(const symm__moe_kargs_t *A, const uint64_t *se, uint64_t braw,
                                           ll_cunit_t *u, int small, ll_cin_t *in, uint64_t fe, const ll_cpro_t *pro) {
    const uint32_t tid = symm__block_tid(), K = A->topk, B = gridDim.x, h8 = A->hidden / 8u;
    int first = 0; /* the block's first unit summed by ll_combine_fast */
    if (in != NULL && braw == A->num_tokens && (in->bits & LL_CF_ON)) {
        ll_stamp(A, LLS_C_SET);
        ll_combine_fast(A, fe, in, pro);
        if ((uint64_t)blockIdx.x + B >= pro->units) { /* (the kernel's end here, by the code of the sums) */
            ll_stamps_end(A, "combine-small", *se, LLS_CS_END);
            return;
        }
        first = 1;
    }
    ll_cplan_t c = ll_combine_plan(A, ll_bound_use(A, braw, blockIdx.x == 0 && tid == 0));
    LL_FPIN64(c.units);
    LL_FSTAMP(A, LLS_CS_PLAN);
    const uint32_t sl = c.sl;
    for (uint64_t w = blockIdx.x; w < c.units; w += B) {
        uint64_t t0, e;
        uint32_t nb, z, glo, gn;
        int plain = 0, pkts = 0, have = 0;
        symm__v4_t pre[2];
        if (w == blockIdx.x && first)
            continue;
        t0 = ll_unit_t0(&c, w);
        nb = ll_unit_nb(&c, t0);
        z = sl > 1 ? (uint32_t)w % sl : 0u;
        glo = h8 * z / sl;
        gn = h8 * (z + 1) / sl - glo;
        if (small && w == blockIdx.x) { /* the first unit's packets ride with its setup's loads */
            have = ll_combine_rp_preload(A, t0, nb, glo, gn, pre);
            LL_FSTAMP(A, LLS_CS_PRE);
        }
        if (w != blockIdx.x) /* (the first unit's setup touches nothing the send half reads) */
            symm__block_sync();
        if (in != NULL)
            in->have = w == blockIdx.x && !(in->bits & LL_CF_ON) && in->t == t0 && in->nb == nb;
        ll_combine_setup(A, t0, nb, u, in);
        if (w == blockIdx.x)
            LL_FSTAMP(A, LLS_CS_SET2);
        symm__block_sync();
        e = *se;
        if (w == blockIdx.x) {
            LL_FPIN64(e);
            LL_FSTAMP(A, LLS_CS_SET3);
        }
        for (uint32_t j = 0; j < nb; j++) {
            plain |= !u->spk[j];
            pkts |= u->spk[j];
        }
        if (plain) { /* plain rows: their flags waited for before any thread reads them */
            if (tid < nb * K) {
                const uint32_t k = tid % K;
                if (u->sok[tid] && !u->spk[tid / K]) /* from the PE of the route's expert */
                    moe_wait(A, MOE_U64(A, ll_cflag) + (t0 + tid / K) * K + k, e, (int)(u->six[tid] / A->local));
            }
            symm__block_sync();
        }
        if (w == blockIdx.x)
            ll_stamp(A, LLS_C_SET);
        /* (no packet token left: none of ll_combine_pkt_rp's rounds and barriers) */
        ll_combine_rows(A, ll_tag(e), t0, nb, glo, gn, u->sok, u->sw, u->spk, small ? (pkts ? 1 : 2) : 0, pre, have);
    }
    ll_stamps_end(A, small ? "combine-small" : "combine", *se, small ? LLS_CS_END : LLS_C_END);
}

/* ---- the big combine (calls of LL_POST_ROUTES routes and more: symm__k_ll_combine_big) ------- */

/* The big combine's shared state: the send half's batch of rows (each row's y offset, its slot as
 * a byte offset from the handle's base, its flag's index, its token's first PE | LL_CB_PKT |
 * LL_CB_SELF), and the receive half's chunk of tokens (a route per thread: its expert, weight,
 * validity, where its row is read, and whether its token comes back as packets). */
#define LL_CB_PKT 0x80000000u
#define LL_CB_SELF 0x40000000u /* the row's copy for this PE stays in y (ll_cbig_inplace) */
#define LL_CB_PE 0x3fffffffu
typedef struct ll_cbig {
    uint64_t syoff[LL_BATCH], sdst[LL_BATCH], sfi[LL_BATCH];
    uint32_t sg0[LL_BATCH], snc; /* snc: the batch's rows to copy (the first ones) */
    uint32_t six[SYMM__MOE_THREADS];
    float sw[SYMM__MOE_THREADS];
    const char *sadr[SYMM__MOE_THREADS]; /* a plain route's row: its ll_cbuf slot, or in y */
    uint8_t sok[SYMM__MOE_THREADS], spr[SYMM__MOE_THREADS];
} ll_cbig_t;

static_assert(LL_BATCH <= 32, "the big combine's send batch: a lane of warp 0 per row");

/* A call of both halves in one kernel, with y's rows 16-byte aligned: a plain row from an expert
 * of this PE to a token of this PE is not copied. The send half leaves the row's place in y (bytes
 * from y) in the first word of the route's ll_cbuf slot and releases the route's flag behind it
 * with its batch's; the receive half, after the flag, reads that word and the row in y. Both
 * halves apply this rule to the call's own arguments, so they agree; y is the call's for the whole
 * kernel (a call in two halves copies every row). */
SYMM__DEVICE_INTERNAL int ll_cbig_inplace(const symm__moe_kargs_t *A) {
    const uint64_t ysz = moe_kind_size(A->y_kind);
    return A->flags == SYMM_MOE_SEND_RECV && moe_al16((uint64_t)(uintptr_t)A->y) &&
           moe_al16((uint64_t)A->y_stride[0] * ysz) && moe_al16((uint64_t)A->y_stride[1] * ysz);
}

/* A chunk's inputs, a route per thread (thread x < nt K: slot x % K of token ta + x / K): its
 * expert, its weight and its token's mode word, loaded (ll_cbig_load: asm loads, issued where
 * they are called) apart from their stores into S (ll_cbig_put: the expert into six, where every
 * route's validity reads its token's earlier slots after a barrier; the token's form into spr). */
typedef struct ll_cbin {
    uint32_t ix, mode;
    float w;
} ll_cbin_t;

SYMM__DEVICE_INTERNAL ll_cbin_t ll_cbig_load(const symm__moe_kargs_t *A, uint64_t ta, uint32_t nt) {
    const uint32_t tid = symm__block_tid(), K = A->topk, dp = (uint32_t)A->dp;
    ll_cbin_t in = {0, 0, 0.0f};
    if (tid < nt * K) {
        const uint64_t t = ta + tid / K;
        in.ix = symm__cld4((const uint32_t *)A->idx + t * K + tid % K, 0);
        in.w = symm__bits_f32(symm__cld4(A->weights + t * K + tid % K, 0));
        in.mode = symm__cld4(MOE_U32(A, ll_mode) + (uint32_t)A->me / dp * dp + (uint32_t)(t % dp), 0);
    }
    return in;
}

SYMM__DEVICE_INTERNAL void ll_cbig_put(const symm__moe_kargs_t *A, ll_cbig_t *S, uint64_t ta, uint32_t nt,
                                       const ll_cbin_t *in) {
    const uint32_t tid = symm__block_tid(), K = A->topk;
    if (tid < nt * K) {
        S->six[tid] = in->ix;
        S->sw[tid] = in->w;
        S->spr[tid] = (uint8_t)ll_cpkt(A, in->mode, ta + tid / K);
    }
}

/* The send half of the big combine. After the counts' scan, block b sends the rows b, b + B,
 * b + 2B, ... (B blocks): an even split (shares differ by one row at most) that gives every
 * block a mix of experts, so of sources, so of destination PEs, and no block's share all local
 * or all remote. Up to LL_BATCH rows at a time: a lane of warp 0 per row locates it (its expert's
 * first row, its route, its slot; a row left in y gets its offset there, and goes after the rows
 * to copy), a barrier, then every vector of the rows to copy, LL_CB_UNROLL loads in flight per
 * thread before their stores, then the batch's plain rows' flags released together behind one
 * barrier. Thread 0 leaves the epoch in *se. */
SYMM__DEVICE_INTERNAL void ll_cbig_send(const symm__moe_kargs_t *A, ll_cbig_t *S, uint64_t *se, const ll_cbin_t *in0,
                                        uint64_t ta0, uint32_t nt0) {
    const uint32_t tid = symm__block_tid(), L = A->local, K = A->topk, dp = (uint32_t)A->dp, B = gridDim.x;
    const uint32_t ysz = moe_kind_size(A->y_kind), nvy = A->hidden * ysz / 16u;
    const uint64_t *routes = MOE_U64(A, ll_route);
    const char *y = (const char *)A->y;
    char *base = (char *)(uintptr_t)A->base; /* (slots as offsets from the handle's base) */
    extern __shared__ uint32_t pre[]; /* [L + 1]: first flat row of each local expert */
    __shared__ uint32_t modes[SYMM__MOE_MAX_PES];
    uint32_t total, tag, mine;
    uint64_t e;
    /* rows of y 16-byte aligned: the unrolled copy takes whole vectors (else ll_ld16's pieces) */
    const int al = moe_al16((uint64_t)(uintptr_t)y) && moe_al16((uint64_t)A->y_stride[0] * ysz) &&
                   moe_al16((uint64_t)A->y_stride[1] * ysz);
    const int inp = ll_cbig_inplace(A);
    const uint32_t me = (uint32_t)A->me;
    {
        const uint32_t c = ll_rcnt_load(A, modes, se);
        ll_cbig_put(A, S, ta0, nt0, in0); /* (the receive half's, published by the scan's barriers) */
        total = ll_rcnt_scan(A, c, pre);
    }
    ll_stamp(A, LLS_C_SCAN);
    e = *se;
    tag = ll_tag(e);
    if (total > 0 && 2u * total <= B && !inp) { /* (the slices copy every row) */
        ll_combine_send_slices(A, e, pre, modes, total);
        return;
    }
    mine = total > blockIdx.x ? (total - blockIdx.x + B - 1) / B : 0u;
    for (uint32_t i0 = 0; i0 < mine; i0 += LL_BATCH) {
        const uint32_t nb = mine - i0 < LL_BATCH ? mine - i0 : LL_BATCH;
        uint32_t tv;
        int plain = 0;
        if (i0 > 0)
            symm__block_sync(); /* (the last batch's rows are read) */
        MOE_TRACE_T0(tb_, A);
        if (tid < 32) { /* warp 0, a lane per row (nb <= LL_BATCH <= 32); the rows to copy packed first */
            int copy = 0;
            uint64_t yoff = 0, dst = 0, fi = 0;
            uint32_t g = 0;
            if (tid < nb) {
                const uint32_t r = blockIdx.x + (i0 + tid) * B;
                const uint32_t lo = ll_bisect(pre, L, r); /* row r's expert */
                const uint64_t route = routes[(uint64_t)lo * A->rows + (r - pre[lo])];
                const uint32_t src = (uint32_t)(route & 0xffffu), k = (uint32_t)((route >> 16) & 0xffffu);
                const uint64_t t = route >> 32;
                const uint32_t g0 = src / dp * dp;
                const int pk = ll_cpkt(A, modes[src], t), self = !pk && inp && (uint32_t)A->me - g0 < dp;
                yoff = (uint64_t)((int64_t)lo * A->y_stride[0] + (int64_t)(r - pre[lo]) * A->y_stride[1]) * ysz;
                dst = pk ? (uint64_t)(ll_pcslot(A, t, k) - base)
                         : A->lay.ll_cbuf + (t * K + k) * (uint64_t)A->hidden * 4u;
                fi = t * K + k;
                g = g0 | (pk ? LL_CB_PKT : 0u) | (self ? LL_CB_SELF : 0u);
                if (self) /* (released with the batch's flags) */
                    symm__cst8(base + dst, yoff, 0);
                copy = !(self && dp == 1);
                plain = !pk;
            }
            { /* (every lane of warp 0 takes the ballots) */
                const uint32_t mc = __ballot_sync(MOE_FULL, copy), ms = __ballot_sync(MOE_FULL, tid < nb && !copy);
                const uint32_t below = (1u << tid) - 1u;
                const uint32_t at = copy ? __popc(mc & below) : __popc(mc) + __popc(ms & below);
                if (tid < nb) {
                    S->syoff[at] = yoff;
                    S->sdst[at] = dst;
                    S->sfi[at] = fi;
                    S->sg0[at] = g;
                }
                if (tid == 0)
                    S->snc = __popc(mc);
            }
        }
        plain = __syncthreads_or(plain);
        tv = S->snc * nvy; /* (the rows to copy; those left in y alone after them, for their flags) */
        if (i0 == 0)
            ll_stamp(A, LLS_C_SLOT);
        if (al) {
            for (uint32_t q0 = tid; q0 < tv; q0 += SYMM__MOE_THREADS * LL_CB_UNROLL) {
                symm__v4_t v[LL_CB_UNROLL];
#pragma unroll
                for (uint32_t u = 0; u < LL_CB_UNROLL; u++) {
                    const uint32_t q = q0 + u * SYMM__MOE_THREADS;
                    if (q < tv)
                        v[u] = symm__cld16(y + S->syoff[q / nvy] + 16u * (q % nvy), 0);
                }
#pragma unroll
                for (uint32_t u = 0; u < LL_CB_UNROLL; u++) {
                    const uint32_t q = q0 + u * SYMM__MOE_THREADS;
                    if (q < tv) {
                        const uint32_t j = q / nvy, c = q % nvy, g = S->sg0[j], g0 = g & LL_CB_PE;
                        if (g & LL_CB_PKT) {
                            for (uint32_t d = 0; d < dp; d++)
                                ll_put_pkt2(moe_peer(A, base + S->sdst[j] + 32u * c, (int)(g0 + d)), v[u], tag);
                        } else {
                            for (uint32_t d = 0; d < dp; d++)
                                if (!(g & LL_CB_SELF) || g0 + d != me)
                                    symm__cst16(moe_peer(A, base + S->sdst[j] + 16u * c, (int)(g0 + d)), v[u], 1);
                        }
                    }
                }
            }
        } else {
            for (uint32_t q = tid; q < tv; q += SYMM__MOE_THREADS) { /* (unaligned y: nothing stays in it) */
                const uint32_t j = q / nvy, c = q % nvy, g = S->sg0[j], g0 = g & LL_CB_PE;
                const symm__v4_t v = ll_ld16(y + S->syoff[j] + 16u * c);
                for (uint32_t d = 0; d < dp; d++) {
                    if (g & LL_CB_PKT)
                        ll_put_pkt2(moe_peer(A, base + S->sdst[j] + 32u * c, (int)(g0 + d)), v, tag);
                    else
                        symm__cst16(moe_peer(A, base + S->sdst[j] + 16u * c, (int)(g0 + d)), v, 1);
                }
            }
        }
        if (i0 == 0)
            ll_stamp(A, LLS_CB_COPY);
        if (plain) { /* plain rows: their flags, released behind the whole block's stores */
            symm__block_sync();
            for (uint32_t x = tid; x < nb * dp; x += SYMM__MOE_THREADS) {
                const uint32_t j = x / dp, g = S->sg0[j];
                if (!(g & LL_CB_PKT))
                    MOE_RELEASE_PUT(A, tb_, MOE_U64(A, ll_cflag) + S->sfi[j], e, (int)((g & LL_CB_PE) + x % dp),
                                    (uint64_t)A->hidden * ysz);
            }
        }
        if (i0 == 0)
            ll_stamp(A, LLS_CB_REL);
    }
}

/* The big combine's receive split: the output groups (8 elements) of the tokens below the bound,
 * token by token, in equal contiguous ranges [glo, ghi), one per block (every block busy, none
 * with a whole token more than another), taken in chunks of at most tc tokens (a route per
 * thread). */
typedef struct ll_cbplan {
    uint64_t glo, ghi;
    uint32_t tc;
} ll_cbplan_t;

SYMM__DEVICE_INTERNAL ll_cbplan_t ll_cbig_plan(const symm__moe_kargs_t *A, uint64_t bound) {
    const uint64_t P = bound * (A->hidden / 8u), B = gridDim.x;
    ll_cbplan_t c;
    c.glo = P * blockIdx.x / B;
    c.ghi = P * (blockIdx.x + 1u) / B;
    c.tc = SYMM__MOE_THREADS / A->topk; /* (top-k <= SYMM__MOE_MAX_TOPK: 8 tokens at least) */
    if (c.tc > LL_BATCH)
        c.tc = LL_BATCH;
    return c;
}

/* Tokens of the chunk from token ta (the range's tokens from ta, at most tc). */
SYMM__DEVICE_INTERNAL uint32_t ll_cbig_nt(const ll_cbplan_t *c, uint64_t ta, uint32_t h8) {
    const uint64_t left = (c->ghi - 1u) / h8 + 1u - ta;
    return left < c->tc ? (uint32_t)left : c->tc;
}

/* After the barrier that publishes six: each route's validity (its weight 0 where not), and, where
 * it comes plainly, the wait for its flag (from the PE of its expert) and where to read its row
 * (its slot, or in y: ll_cbig_inplace). Every route waits in its own thread; a barrier after it
 * must pass before any thread reads the rows. */
SYMM__DEVICE_INTERNAL void ll_cbig_check(const symm__moe_kargs_t *A, ll_cbig_t *S, uint64_t ta, uint32_t nt, uint64_t e) {
    const uint32_t tid = symm__block_tid(), K = A->topk;
    if (tid < nt * K) {
        const uint32_t k = tid % K, from = S->six[tid] / A->local;
        const int ok = ll_valid(&S->six[tid - k], k, A->experts);
        S->sok[tid] = (uint8_t)ok;
        if (!ok) {
            S->sw[tid] = 0.0f;
        } else if (!S->spr[tid]) {
            const char *slot = MOE_AT(A, ll_cbuf) + ((ta + tid / K) * K + k) * (uint64_t)A->hidden * 4u;
            moe_wait(A, MOE_U64(A, ll_cflag) + (ta + tid / K) * K + k, e, (int)from);
            S->sadr[tid] = from == (uint32_t)A->me && ll_cbig_inplace(A)
                               ? (const char *)A->y + symm__cld8(slot, 0) /* (after the acquire) */
                               : slot;
        }
    }
}

/* One output group (8 elements, v) of token t (the chunk's j): its valid routes' rows, packets
 * polled or plain rows (flags waited for), summed in slot order and stored. */
SYMM__DEVICE_INTERNAL void ll_cbig_group(const symm__moe_kargs_t *A, const ll_cbig_t *S, uint32_t tag, uint64_t t,
                                         uint32_t j, uint32_t v) {
    const uint32_t K = A->topk, kind = A->y_kind, ysz = moe_kind_size(kind), passes = ysz / 2u;
    const uint8_t *sok = &S->sok[j * K];
    const float *sw = &S->sw[j * K];
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (S->spr[j * K]) {
        ll_combine_group_pkt(A, tag, t, v, 0, sok, sw, acc);
        if (passes == 2)
            ll_combine_group_pkt(A, tag, t, v, 1, sok, sw, acc);
    } else {
        const char *const *adr = &S->sadr[j * K];
        ll_sum_plain_rows(kind, K, v, sok, sw, [=](uint32_t k) { return adr[k]; }, acc);
    }
    moe_store8((char *)A->out + ((int64_t)t * A->out_stride + (int64_t)v * 8) * 2, A->out_kind, acc);
}

/* Groups gs .. ge - 1 of the chunk from token ta (counted from its first group: 32 bits), a group
 * per thread at a time (ll_cbig_group). */
SYMM__DEVICE_INTERNAL void ll_cbig_rows(const symm__moe_kargs_t *A, const ll_cbig_t *S, uint32_t tag, uint64_t ta,
                                        uint32_t gs, uint32_t ge) {
    const uint32_t h8 = A->hidden / 8u;
    for (uint32_t q = gs + symm__block_tid(); q < ge; q += SYMM__MOE_THREADS)
        ll_cbig_group(A, S, tag, ta + q / h8, q / h8, q % h8);
}

/* The receive half of the big combine (e: the epoch; braw: *bound_m as loaded; have0: the first
 * chunk's inputs are in S already, loaded as the kernel started for the plan of *bound_m =
 * num_tokens, so used only when the bound is that). Per chunk: the inputs, a barrier, each
 * route's validity and flag, a barrier, the rows. */
SYMM__DEVICE_INTERNAL void ll_cbig_recv(const symm__moe_kargs_t *A, ll_cbig_t *S, uint64_t e, uint64_t braw, int have0) {
    const uint32_t tid = symm__block_tid(), h8 = A->hidden / 8u, tag = ll_tag(e);
    const ll_cbplan_t c = ll_cbig_plan(A, ll_bound_use(A, braw, blockIdx.x == 0 && tid == 0));
    if (c.glo >= c.ghi)
        return;
    have0 = have0 && braw == A->num_tokens;
    for (uint64_t ta = c.glo / h8; ta * h8 < c.ghi; ta += c.tc) {
        const uint32_t nt = ll_cbig_nt(&c, ta, h8);
        const uint32_t gs = (uint32_t)((c.glo > ta * h8 ? c.glo : ta * h8) - ta * h8); /* (from the chunk's first group) */
        const uint32_t ge = (uint32_t)((c.ghi < (ta + nt) * h8 ? c.ghi : (ta + nt) * h8) - ta * h8);
        if (!(have0 && ta == c.glo / h8)) {
            const ll_cbin_t in = ll_cbig_load(A, ta, nt);
            symm__block_sync(); /* (the last chunk's state is read) */
            ll_cbig_put(A, S, ta, nt, &in);
            symm__block_sync();
        }
        ll_cbig_check(A, S, ta, nt, e);
        symm__block_sync();
        if (ta == c.glo / h8)
            ll_stamp(A, LLS_C_SET);
        ll_cbig_rows(A, S, tag, ta, gs, ge);
        if (ta == c.glo / h8)
            ll_stamp(A, LLS_CB_SUM);
    }
}

/* The big combine: the first chunk's inputs are loaded as it starts, with the send half's first
 * loads, and published by the send half's barriers; the receive half then starts at the routes'
 * validity and flags. */
SYMM__DEVICE_INTERNAL void ll_combine_big_kernel(const symm__moe_kargs_t *A) {
    __shared__ ll_cbig_t S;
    __shared__ uint64_t se;    /* the epoch (dispatches so far: the combine works on the last one) */
    __shared__ uint64_t sbraw; /* *bound_m as loaded by the last warp (no other warp waits for it) */
    const int send = (A->flags & SYMM_MOE_SEND) != 0, recv = (A->flags & SYMM_MOE_RECV) != 0;
    const uint32_t h8 = A->hidden / 8u;
    ll_cbin_t in0 = {0, 0, 0.0f};
    uint64_t ta0 = 0;
    uint32_t nt0 = 0; /* the first chunk's tokens (0: none, or no receive half) */
    ll_stamps_begin(A);
    ll_pdl_begin(A);
    if (A->probe == SYMM__MOE_PROBE_EMPTY || A->probe == SYMM__MOE_PROBE_HOP) {
        const uint64_t e = moe_begin(A, 0);
        if (A->probe == SYMM__MOE_PROBE_HOP)
            ll_probe_hop(A, e, 1);
        return;
    }
    if (recv) {
        const ll_cbplan_t c = ll_cbig_plan(A, A->num_tokens);
        if (c.glo < c.ghi) {
            ta0 = c.glo / h8;
            nt0 = ll_cbig_nt(&c, ta0, h8);
            in0 = ll_cbig_load(A, ta0, nt0);
        }
        if (symm__block_tid() == SYMM__MOE_THREADS - 32) /* (this warp alone waits for it) */
            sbraw = ll_bound_load(A);
    }
    if (blockIdx.x == 0 && symm__block_tid() == 0)
        atomicMax(&moe_state(A)->max_grid, gridDim.x);
    if (recv)
        ll_stamp(A, LLS_C_PRE);
    if (send) {
        MOE_TRACE_HALF(A, SYMM_TRACE_COLL_MOE_COMBINE, ll_cbig_send(A, &S, &se, &in0, ta0, nt0));
    } else {
        if (symm__block_tid() == 0)
            se = *(volatile uint64_t *)&moe_state(A)->epoch;
        ll_cbig_put(A, &S, ta0, nt0, &in0);
    }
    ll_stamp(A, LLS_C_SENT);
    if (recv) {
        if (!send)
            symm__block_sync(); /* (se, sbraw, the first chunk's inputs: else the scan's barriers publish them) */
        MOE_TRACE_HALF(A, SYMM_TRACE_COLL_MOE_COMBINE_RECV, ll_cbig_recv(A, &S, se, sbraw, nt0 > 0));
    }
    ll_stamps_end(A, "combine-big", se, LLS_C_END);
}

/* The receive half's inputs (bound, routes, weights, forms) are the call's or the dispatch's:
 * their loads go out at the start, and the send half hides them. */
SYMM__DEVICE_INTERNAL void ll_combine_kernel(const symm__moe_kargs_t *A, int small) {
    __shared__ ll_cunit_t u;
    __shared__ uint64_t se;    /* the epoch (dispatches so far: the combine works on the last one) */
    __shared__ uint64_t sbraw; /* *bound_m as loaded by the last warp (no other warp waits for it) */
    ll_cpro_t pro; /* (each thread's own: no barrier before the PDL wait) */
    ll_cin_t in;
    uint32_t ro = ~0u, mi = ~0u, csl = 1, cP = ~0u;
    ll_stamps_begin(A);
    if (small) { /* addresses before the wait for the kernel before (PDL) */
        ll_combine_pro(A, (A->flags & SYMM_MOE_SEND) != 0, (A->flags & SYMM_MOE_RECV) != 0, &pro);
        csl = pro.csl;
        cP = pro.cP;
        symm__pin_u32(&csl);
        symm__pin_u32(&cP);
    }
    if (small && (A->flags & SYMM_MOE_RECV)) {
        ll_combine_inputs_at(A, &pro, &in, &ro, &mi);
        symm__pin_u32(&ro);
        symm__pin_u32(&mi);
        symm__pin_u32(&in.bits);
        symm__pin_u64(&in.t);
        symm__pin_u32(&in.nb);
        symm__pin_u32(&in.ix);
    }
    if (small)
        LL_FSTAMP(A, LLS_CS_ADDR);
    ll_pdl_begin(A);
    if (small)
        ll_stamp(A, LLS_DEP);
    if (A->probe == SYMM__MOE_PROBE_EMPTY || A->probe == SYMM__MOE_PROBE_HOP) {
        const uint64_t e = moe_begin(A, 0);
        if (A->probe == SYMM__MOE_PROBE_HOP)
            ll_probe_hop(A, e, 1);
        return;
    }
    /* The first loads, all out before any instruction waits for one: a load's value is used (even
     * copied to another register, or picked by a select) only after the last load is issued, and
     * the epoch, which the compiler copies as it comes back, is loaded last. */
    uint64_t fe = 0, f0 = 0, f1 = 0;
    uint32_t fR = 0, bv = 0;
    if (small && (A->flags & SYMM_MOE_SEND)) { /* the send half's first round of loads, first of all */
        fR = symm__cld4(MOE_U64(A, ll_flat), 0); /* (the low word: routes < 2^32) */
        if (cP != ~0u) { /* (an entry past the routes received is a stale one, never used) */
            f0 = symm__cld8(MOE_U64(A, ll_flat) + 2u + 2u * cP, 0);
            f1 = symm__cld8(MOE_U64(A, ll_flat) + 3u + 2u * cP, 0);
        }
    }
    if (A->flags & SYMM_MOE_RECV) {
        if (small) { /* every thread its own bound (no bound: num_tokens, chosen where it is used) and its
                      * first unit's route, in registers */
            if (A->bound != NULL)
                bv = symm__cld4(A->bound, 0);
            ll_combine_inputs(A, &in, ro, mi);
        } else {
            if (symm__block_tid() == SYMM__MOE_THREADS - 32)
                sbraw = ll_bound_load(A);
            ll_combine_prefetch(A, blockIdx.x);
        }
    }
    if (small) /* (every thread: the receive half's first round needs no barrier for it) */
        fe = symm__ld_b64(&moe_state(A)->epoch, SYMM_SEM_VOLATILE, SYMM_SCOPE_SYS);
    if (blockIdx.x == 0 && symm__block_tid() == 0)
        atomicMax(&moe_state(A)->max_grid, gridDim.x);
    if (A->flags & SYMM_MOE_RECV)
        ll_stamp(A, LLS_C_PRE);
    if (A->flags & SYMM_MOE_SEND)
        MOE_TRACE_HALF(A, SYMM_TRACE_COLL_MOE_COMBINE,
                       small ? ll_combine_send_small(A, &se, fR, fe, csl, f0, f1) : ll_combine_send(A, &se));
    else if (symm__block_tid() == 0)
        se = small ? fe : *(volatile uint64_t *)&moe_state(A)->epoch;
    ll_stamp(A, LLS_C_SENT);
    if (A->flags & SYMM_MOE_RECV) {
        if (!(A->flags & SYMM_MOE_SEND) && !small)
            symm__block_sync(); /* (the send half's barriers publish sbraw otherwise) */
        MOE_TRACE_HALF(A, SYMM_TRACE_COLL_MOE_COMBINE_RECV,
                       ll_combine_recv(A, &se, small ? (A->bound != NULL ? (uint64_t)bv : A->num_tokens) : sbraw, &u,
                                       small, small ? &in : NULL, fe, &pro));
        return; /* (the receive half ends with the stamps: nothing after it, so its returns can end the kernel
                 * where they are, not after a jump to code of their own) */
    }
    ll_stamps_end(A, small ? "combine-small" : "combine", se, small ? LLS_CS_END : LLS_C_END);
}

__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ll_combine(const __grid_constant__ symm__moe_kargs_t a) {
    ll_combine_kernel(&a, 0);
}

/* The combine of a call of LL_POST_ROUTES routes or more (tokens x top-k) on a handle without the
 * small dispatch: its own kernel, so the smaller calls' kernel keeps its registers. */
__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ll_combine_big(const __grid_constant__ symm__moe_kargs_t a) {
    ll_combine_big_kernel(&a);
}

/* The combine of a handle with the small dispatch: the same kernel without the per-thread packet
 * sums (ll_combine_pkt_rp takes every packet token), so fewer registers. */
__global__ void __launch_bounds__(SYMM__MOE_THREADS)
    symm__k_ll_combine_small(const __grid_constant__ symm__moe_kargs_t a) {
    ll_combine_kernel(&a, 1);
}
