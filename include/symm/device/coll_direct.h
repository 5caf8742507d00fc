/*
 * device/coll_direct.h - the direct reductions, between the PEs' own
 * buffers (two-shot, its stores-only form, the reduce-scatter), their
 * multimem (NVLS) twin, and the dispatch of every reduction by element kind.
 * Part of the collectives' device code: included by coll_impl.h, in
 * order, after coll_layout.h and coll_reduce.h; never include it alone.
 */
#ifndef SYMM_DEVICE_COLL_DIRECT_H
#define SYMM_DEVICE_COLL_DIRECT_H

/*
 * Direct reduction: for the 16-byte units [u0, u1), load the unit at
 * src_off of every PE's src, reduce in PE order, store at dst_off of the dst
 * of every PE in [d0, d1) (all-reduce: every PE; reduce-scatter: this PE).
 *
 * Each thread issues the loads of PGROUP PEs x UNITS units (64 registers of
 * data) before it uses any, so that many NVLink round trips are in flight at
 * once. Every loop over the group is unrolled so that v[][] is indexed only
 * by constants and stays in registers: when the consuming loop was not
 * unrolled, nvcc put v[][] in local memory and every remote load was
 * followed by a local store that waited for its data, leaving one load in
 * flight per thread. PGROUP 4 fills the group at n = 4 (8 PEs x 2 units left
 * half of it unused there) and n = 8 takes two rounds of 4. The fp8 kinds
 * accumulate in 8 floats per word, so they keep 2 units (the accumulators of
 * 4 would not fit next to the loads). The order of the reduction is PE 0,
 * 1, ..., n - 1 whatever the grouping, so results do not depend on it.
 */
#define SYMM__C_PGROUP 4
#define SYMM__C_UNITS_f32 4
#define SYMM__C_UNITS_f64 3
#define SYMM__C_UNITS_f16 3
#define SYMM__C_UNITS_bf16 3
#define SYMM__C_UNITS_i32 4
#define SYMM__C_UNITS_u32 4
#define SYMM__C_UNITS_i64 3
#define SYMM__C_UNITS_u64 3
#define SYMM__C_UNITS_e4m3 2
#define SYMM__C_UNITS_e5m2 2
#define SYMM__C_UNITS_e4m3h 2
#define SYMM__C_UNITS_e5m2h 2
#define SYMM__C_UNROLL _Pragma("unroll")
#define SYMM__C_DEFINE_RED_DIRECT(S)                                                              \
    SYMM__DEVICE_INTERNAL void symm__c_red_units_##S(                                             \
        const symm__c_xs_t *x, char *dst, uint64_t dst_off, const char *src, uint64_t src_off,    \
        uint64_t u0, uint64_t u1, int d0, int d1, int op) {                                       \
        enum { UNITS = SYMM__C_UNITS_##S };                                                       \
        int n = x->ctx->n_pes, me = x->ctx->my_pe;                                                \
        uint64_t t = symm__block_tid(), nt = symm__block_nthreads();                              \
        uint64_t u;                                                                               \
        for (u = u0 + t; u < u1; u += nt * UNITS) {                                               \
            symm__c_acc_##S a[UNITS][2];                                                          \
            for (int p0 = 0; p0 < n; p0 += SYMM__C_PGROUP) {                                      \
                symm__v4_t v[SYMM__C_PGROUP][UNITS];                                              \
                SYMM__C_UNROLL                                                                    \
                for (int j = 0; j < SYMM__C_PGROUP; j++) {                                        \
                    if (p0 + j < n) {                                                             \
                        const char *ps = symm__c_xaddr(x, src, p0 + j, 0) + src_off;              \
                        SYMM__C_UNROLL                                                            \
                        for (int k = 0; k < UNITS; k++)                                           \
                            if (u + (uint64_t)k * nt < u1)                                        \
                                v[j][k] = symm__c_ld16(ps + 16 * (u + (uint64_t)k * nt));         \
                    }                                                                             \
                }                                                                                 \
                SYMM__C_UNROLL                                                                    \
                for (int j = 0; j < SYMM__C_PGROUP; j++) {                                        \
                    if (p0 + j < n) {                                                             \
                        SYMM__C_UNROLL                                                            \
                        for (int k = 0; k < UNITS; k++)                                           \
                            if (u + (uint64_t)k * nt < u1) {                                      \
                                uint64_t w0 = ((uint64_t)v[j][k].y << 32) | v[j][k].x;            \
                                uint64_t w1 = ((uint64_t)v[j][k].w << 32) | v[j][k].z;            \
                                if (p0 + j == 0) {                                                \
                                    symm__c_first_##S(&a[k][0], w0);                              \
                                    symm__c_first_##S(&a[k][1], w1);                              \
                                } else {                                                          \
                                    symm__c_next_##S(&a[k][0], w0, op);                           \
                                    symm__c_next_##S(&a[k][1], w1, op);                           \
                                }                                                                 \
                            }                                                                     \
                    }                                                                             \
                }                                                                                 \
            }                                                                                     \
            SYMM__C_UNROLL                                                                        \
            for (int k = 0; k < UNITS; k++) {                                                     \
                if (u + (uint64_t)k * nt < u1) {                                                  \
                    uint64_t r0 = symm__c_last_##S(&a[k][0]), r1 = symm__c_last_##S(&a[k][1]);    \
                    symm__v4_t r;                                                                 \
                    r.x = (uint32_t)r0; r.y = (uint32_t)(r0 >> 32);                               \
                    r.z = (uint32_t)r1; r.w = (uint32_t)(r1 >> 32);                               \
                    for (int i = 0; i < d1 - d0; i++) {                                           \
                        int p = d0 + (me - d0 + i) % (d1 - d0);                                   \
                        symm__c_st16(symm__c_xaddr(x, dst, p, 1) + dst_off + 16 * (u + (uint64_t)k * nt), r); \
                    }                                                                             \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
    }                                                                                             \
    /* Word path: unaligned buffers and the short tail. Words [k0, k1) of nbytes. */              \
    SYMM__DEVICE_INTERNAL void symm__c_red_words_##S(                                             \
        const symm__c_xs_t *x, char *dst, uint64_t dst_off, const char *src, uint64_t src_off,    \
        uint64_t nbytes, uint64_t k0, uint64_t k1, int d0, int d1, int op, uint64_t t,            \
        uint64_t nt) {                                                                            \
        int n = x->ctx->n_pes;                                                                    \
        for (uint64_t k = k0 + t; k < k1; k += nt) {                                              \
            uint32_t nb = symm__c_word_nb(nbytes, k);                                             \
            symm__c_acc_##S a;                                                                    \
            for (int p = 0; p < n; p++) {                                                         \
                uint64_t w = symm__c_ldw(symm__c_xaddr(x, src, p, 0) + src_off + 8 * k, nb);      \
                if (p == 0) symm__c_first_##S(&a, w);                                             \
                else symm__c_next_##S(&a, w, op);                                                 \
            }                                                                                     \
            for (int p = d0; p < d1; p++)                                                         \
                symm__c_stw(symm__c_xaddr(x, dst, p, 1) + dst_off + 8 * k, symm__c_last_##S(&a), nb); \
        }                                                                                         \
    }                                                                                             \
    /* This block's share (part `part` of `parts`) of nbytes at src_off -> dst_off. */            \
    SYMM__DEVICE_INTERNAL void symm__c_red_range_##S(                                             \
        const symm__c_xs_t *x, char *dst, uint64_t dst_off, const char *src, uint64_t src_off,    \
        uint64_t nbytes, int d0, int d1, int op, uint32_t part, uint32_t parts) {                 \
        uint64_t lo, hi;                                                                          \
        /* published addresses keep the local alignment only if symmetric (a dst */              \
        /* written on this PE alone is always the local one) */                                  \
        int dst_ok = x->sym[1] || (d1 - d0 == 1 && d0 == x->ctx->my_pe);                          \
        int aligned = x->sym[0] && dst_ok &&                                                      \
                      ((((uintptr_t)src + src_off) | ((uintptr_t)dst + dst_off)) & 15u) == 0;     \
        if (aligned) {                                                                            \
            symm__c_split(nbytes / 16, parts, part, &lo, &hi);                                    \
            symm__c_red_units_##S(x, dst, dst_off, src, src_off, lo, hi, d0, d1, op);             \
            if (part == parts - 1 && (nbytes & 15u))                                              \
                symm__c_red_words_##S(x, dst, dst_off, src, src_off, nbytes, (nbytes / 16) * 2,   \
                                      (nbytes + 7) / 8, d0, d1, op, symm__block_tid(),            \
                                      symm__block_nthreads());                                    \
        } else {                                                                                  \
            symm__c_split((nbytes + 7) / 8, parts, part, &lo, &hi);                               \
            symm__c_red_words_##S(x, dst, dst_off, src, src_off, nbytes, lo, hi, d0, d1, op,      \
                                  symm__block_tid(), symm__block_nthreads());                     \
        }                                                                                         \
    }
SYMM__C_FOR_EACH_RED(SYMM__C_DEFINE_RED_DIRECT)
#undef SYMM__C_DEFINE_RED_DIRECT

/*
 * TWOSHOT all-reduce: start handshake (every PE's input is ready and its
 * output free), PE r reduces chunk r (its slot's part) from every PE's src
 * and stores it into every PE's dst, end handshake (all of this PE's output
 * has arrived and nobody reads its input any more). In place is safe: chunk
 * r is read and written only by PE r, each unit by one thread, loads first.
 */
#define SYMM__C_DEFINE_AR_TWOSHOT(S)                                                              \
    SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_ar_twoshot_##S(                           \
        const symm_ctx_t *ctx, const symm__coll_ws_t *ws, char *dst, const char *src,             \
        uint64_t nbytes, int op, uint32_t slot, uint32_t nslots) {                                \
        symm__c_ep_t e = symm__c_epoch_begin(ws, slot);                                           \
        symm__c_xs_t x = symm__c_handshake_pub(                                                   \
            ctx, ws, e, slot, src, dst, 0, 0,                                                     \
            symm__c_sig(SYMM__C_CALL_AR, nbytes, SYMM__C_RED_##S, op, -1),                        \
            SYMM__C_PEERS_SRC | SYMM__C_PEERS_DST);                                               \
        symm__c_red_range_##S(&x, dst, 0, src, 0, nbytes, 0, ctx->n_pes, op,                      \
                              (uint32_t)ctx->my_pe * nslots + slot, (uint32_t)ctx->n_pes * nslots); \
        symm__c_handshake(ctx, ws, 1, e, slot);                                                   \
        symm__c_epoch_end(ws, slot, e);                                                           \
    }
SYMM__C_FOR_EACH_RED(SYMM__C_DEFINE_AR_TWOSHOT)
#undef SYMM__C_DEFINE_AR_TWOSHOT

/*
 * TWOSHOT with stores only: pieces of ceil(nbytes / n) rounded up to 16
 * bytes, PE r owning piece r. This PE stores its copy of piece p into its
 * plain-data region on PE p (as ONESHOT does with all of it), then the start
 * handshake (which publishes dst, and whose release covers those stores),
 * then it reduces its piece from its regions and src in PE order and stores
 * the result into every PE's dst; the end handshake. The first half's loads
 * are local: the two-shot kernel's remote loads each wait a round trip.
 * Block `slot` takes relative units [lo, hi) of every piece (the host makes
 * them fit a region). In place is safe: a peer stores into this PE's dst
 * only after the start handshake, which this PE releases after its loads of
 * src for the peers; its own piece it reads and writes unit by unit.
 */
#define SYMM__C_DEFINE_AR_TWOSHOT_ST(S)                                                           \
    SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_ar_twoshot_st_##S(                        \
        const symm_ctx_t *ctx, const symm__coll_ws_t *ws, char *dst, const char *src,             \
        uint64_t nbytes, int op, uint32_t slot, uint32_t nslots) {                                \
        int me = ctx->my_pe, n = ctx->n_pes;                                                      \
        uint64_t t = symm__block_tid(), nt = symm__block_nthreads();                              \
        uint64_t piece = ((nbytes + (uint64_t)n - 1) / (uint64_t)n + 15) & ~(uint64_t)15;         \
        uint64_t lo, hi, u, w0, w1;                                                               \
        int fast = (((uintptr_t)src | (uintptr_t)dst) & 15u) == 0, wide;                          \
        symm__c_ep_t e = symm__c_epoch_begin(ws, slot);                                           \
        char *mine = symm__c_region_raw(ws, e.par, slot, n, me);                                  \
        symm__c_xs_t x;                                                                           \
        symm__c_split(piece / 16, nslots, slot, &lo, &hi);                                        \
        for (u = lo + t; u < hi; u += nt)                                                         \
            for (int i = 1; i < n; i++) {                                                         \
                int p = me + i < n ? me + i : me + i - n;                                         \
                uint64_t g = (uint64_t)p * piece + 16 * u;                                        \
                if (g < nbytes) {                                                                 \
                    symm__c_ld_unit(src + g, nbytes - g, fast, &w0, &w1);                         \
                    symm__c_st_unit(symm__c_peer(ctx, mine + (u - lo) * 16, p), 16, 1, w0, w1);   \
                }                                                                                 \
            }                                                                                     \
        x = symm__c_handshake_pub(ctx, ws, e, slot, src, dst, 0, 0,                               \
                                  symm__c_sig(SYMM__C_CALL_AR, nbytes, SYMM__C_RED_##S, op, -1),  \
                                  SYMM__C_PEERS_DST);                                             \
        wide = fast && x.sym[1]; /* every PE's dst aligned as this one */                         \
        for (u = lo + t; u < hi && (uint64_t)me * piece + 16 * u < nbytes; u += nt) {             \
            uint64_t g = (uint64_t)me * piece + 16 * u, rem = nbytes - g;                         \
            symm__c_acc_##S a0, a1;                                                               \
            for (int p = 0; p < n; p++) {                                                         \
                if (p == me)                                                                      \
                    symm__c_ld_unit(src + g, rem, fast, &w0, &w1);                                \
                else                                                                              \
                    symm__c_ld_unit(symm__c_region_raw(ws, e.par, slot, n, p) + (u - lo) * 16, 16, 1, \
                                    &w0, &w1);                                                    \
                if (p == 0) { symm__c_first_##S(&a0, w0); symm__c_first_##S(&a1, w1); }           \
                else { symm__c_next_##S(&a0, w0, op); symm__c_next_##S(&a1, w1, op); }            \
            }                                                                                     \
            w0 = symm__c_last_##S(&a0);                                                           \
            w1 = symm__c_last_##S(&a1);                                                           \
            for (int i = 0; i < n; i++) {                                                         \
                int q = symm__c_step_pe(me, i, slot, n);                                          \
                symm__c_st_unit(symm__c_xaddr(&x, dst, q, 1) + g, rem, q == me ? fast : wide, w0, w1); \
            }                                                                                     \
        }                                                                                         \
        symm__c_handshake(ctx, ws, 1, e, slot);                                                   \
        symm__c_epoch_end(ws, slot, e);                                                           \
    }
SYMM__C_FOR_EACH_RED(SYMM__C_DEFINE_AR_TWOSHOT_ST)
#undef SYMM__C_DEFINE_AR_TWOSHOT_ST

/*
 * Direct reduce-scatter: PE r reduces piece r (nbytes at r * piece of every
 * PE's src) into its own dst.
 */
#define SYMM__C_DEFINE_RS_DIRECT(S)                                                               \
    SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_rs_direct_##S(                            \
        const symm_ctx_t *ctx, const symm__coll_ws_t *ws, char *dst, const char *src,             \
        uint64_t nbytes, uint64_t piece, int op, uint32_t slot, uint32_t nslots) {                \
        symm__c_ep_t e = symm__c_epoch_begin(ws, slot);                                           \
        symm__c_xs_t x =                                                                          \
            symm__c_handshake_pub(ctx, ws, e, slot, src, dst, 0, 0,                               \
                                  symm__c_sig(SYMM__C_CALL_RS, nbytes, SYMM__C_RED_##S, op, -1),  \
                                  SYMM__C_PEERS_SRC);                                             \
        symm__c_red_range_##S(&x, dst, 0, src, (uint64_t)ctx->my_pe * piece, nbytes, ctx->my_pe,  \
                              ctx->my_pe + 1, op, slot, nslots);                                  \
        symm__c_handshake(ctx, ws, 1, e, slot);                                                   \
        symm__c_epoch_end(ws, slot, e);                                                           \
    }
SYMM__C_FOR_EACH_RED(SYMM__C_DEFINE_RS_DIRECT)
#undef SYMM__C_DEFINE_RS_DIRECT

/* ---- multimem (NVLS) twins ---------------------------------------------------------- */

/*
 * All-reduce through a multicast address: mc_src / mc_dst are the multicast
 * addresses of the symmetric src / dst. PE r reduces its chunk with
 * multimem.ld_reduce (the switch sums every PE's copy) and stores the result
 * to every PE with one multimem.st. Only f32 sum and f16/bf16 sum (acc::f32),
 * min and max; the callers use it only when a multicast object exists (never,
 * yet) and fall back to twoshot, whose results are identical, otherwise.
 * Returns 0 when this (type, op) has no multimem form.
 */
SYMM__DEVICE_INTERNAL int symm__c_mm_supported(int kind, int op) {
    if (kind == SYMM__C_RED_f32)
        return op == SYMM_OP_SUM; /* PTX has no f32 min/max ld_reduce */
    return (kind == SYMM__C_RED_f16 || kind == SYMM__C_RED_bf16) &&
           (op == SYMM_OP_SUM || op == SYMM_OP_MIN || op == SYMM_OP_MAX);
}

SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_ar_multimem(
    const symm_ctx_t *ctx, const symm__coll_ws_t *ws, uint64_t mc_dst, uint64_t mc_src,
    uint64_t nbytes, int kind, int op, uint32_t slot, uint32_t nslots) {
    symm__c_ep_t e = symm__c_epoch_begin(ws, slot);
    uint64_t lo, hi, u;
    uint64_t t = symm__block_tid(), nt = symm__block_nthreads();
    if (!symm__c_mm_supported(kind, op) && t == 0)
        symm__c_fail(ctx->world_pe, "all_reduce", "no multimem form for this type/op", -1, op, kind);
    symm__c_handshake(ctx, ws, 0, e, slot);
    symm__c_split(nbytes / 16, (uint32_t)ctx->n_pes * nslots, (uint32_t)ctx->my_pe * nslots + slot, &lo, &hi);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    for (u = lo + t; u < hi; u += nt) {
        symm__v4_t v;
        const void *a = (const void *)(uintptr_t)(mc_src + 16 * u);
        void *d = (void *)(uintptr_t)(mc_dst + 16 * u);
        switch (kind * 8 + op) {
        case SYMM__C_RED_f32 * 8 + SYMM_OP_SUM: SYMM__C_MM_LDRED("add.v4.f32", v, a); break;
        case SYMM__C_RED_f16 * 8 + SYMM_OP_SUM: SYMM__C_MM_LDRED("add.acc::f32.v4.f16x2", v, a); break;
        case SYMM__C_RED_f16 * 8 + SYMM_OP_MIN: SYMM__C_MM_LDRED("min.v4.f16x2", v, a); break;
        case SYMM__C_RED_f16 * 8 + SYMM_OP_MAX: SYMM__C_MM_LDRED("max.v4.f16x2", v, a); break;
        case SYMM__C_RED_bf16 * 8 + SYMM_OP_SUM: SYMM__C_MM_LDRED("add.acc::f32.v4.bf16x2", v, a); break;
        case SYMM__C_RED_bf16 * 8 + SYMM_OP_MIN: SYMM__C_MM_LDRED("min.v4.bf16x2", v, a); break;
        default: SYMM__C_MM_LDRED("max.v4.bf16x2", v, a); break;
        }
        if (kind == SYMM__C_RED_f32) SYMM__C_MM_ST("v4.f32", v, d);
        else if (kind == SYMM__C_RED_f16) SYMM__C_MM_ST("v4.f16x2", v, d);
        else SYMM__C_MM_ST("v4.bf16x2", v, d);
    }
#else
    (void)mc_dst; (void)mc_src; (void)kind; (void)op; (void)u; (void)t; (void)nt;
    if (hi > lo && symm__block_tid() == 0)
        symm__c_fail(ctx->world_pe, "all_reduce", "multimem needs sm_90", -1, op, -1);
#endif
    /* The tail (< 16 bytes) has no multimem form: the unicast word path. */
    (void)nbytes;
    symm__c_handshake(ctx, ws, 1, e, slot);
    symm__c_epoch_end(ws, slot, e);
}

/* ---- dispatch by reduction kind -------------------------------------------------------- */

#define SYMM__C_CASE_PACKET(S)                                                              \
    case SYMM__C_RED_##S: symm__c_red_packet_##S(ctx, ws, dst, src, nbytes, piece, op, slot, nslots); break;
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_red_packet(
    const symm_ctx_t *ctx, const symm__coll_ws_t *ws, char *dst, const char *src, uint64_t nbytes,
    uint64_t piece, int kind, int op, uint32_t slot, uint32_t nslots) {
    switch (kind) { SYMM__C_FOR_EACH_RED(SYMM__C_CASE_PACKET) default: break; }
}
#undef SYMM__C_CASE_PACKET

/* symm__c_NAME(ctx, ws, dst, src, nbytes, kind, op, slot, nslots): the form
 * of the all-reduce NAME for reduction kind `kind`. */
#define SYMM__C_CASE_AR(S, NAME)                                                            \
    case SYMM__C_RED_##S: symm__c_##NAME##_##S(ctx, ws, dst, src, nbytes, op, slot, nslots); break;
#define SYMM__C_DEFINE_AR_DISPATCH(NAME)                                                    \
    SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_##NAME(                             \
        const symm_ctx_t *ctx, const symm__coll_ws_t *ws, char *dst, const char *src, uint64_t nbytes, \
        int kind, int op, uint32_t slot, uint32_t nslots) {                                 \
        switch (kind) { SYMM__C_FOR_EACH_RED_WITH(SYMM__C_CASE_AR, NAME) default: break; }  \
    }
SYMM__C_DEFINE_AR_DISPATCH(ar_packet2)
SYMM__C_DEFINE_AR_DISPATCH(ar_oneshot)
SYMM__C_DEFINE_AR_DISPATCH(ar_twoshot)
SYMM__C_DEFINE_AR_DISPATCH(ar_twoshot_st)
#undef SYMM__C_DEFINE_AR_DISPATCH
#undef SYMM__C_CASE_AR

#define SYMM__C_CASE_RS_ONESHOT(S)                                                          \
    case SYMM__C_RED_##S: symm__c_rs_oneshot_##S(ctx, ws, dst, src, nbytes, piece, op, slot, nslots); break;
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_rs_oneshot(
    const symm_ctx_t *ctx, const symm__coll_ws_t *ws, char *dst, const char *src, uint64_t nbytes,
    uint64_t piece, int kind, int op, uint32_t slot, uint32_t nslots) {
    switch (kind) { SYMM__C_FOR_EACH_RED(SYMM__C_CASE_RS_ONESHOT) default: break; }
}
#undef SYMM__C_CASE_RS_ONESHOT

#define SYMM__C_CASE_RS(S)                                                                  \
    case SYMM__C_RED_##S: symm__c_rs_direct_##S(ctx, ws, dst, src, nbytes, piece, op, slot, nslots); break;
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_rs_direct(
    const symm_ctx_t *ctx, const symm__coll_ws_t *ws, char *dst, const char *src, uint64_t nbytes,
    uint64_t piece, int kind, int op, uint32_t slot, uint32_t nslots) {
    switch (kind) { SYMM__C_FOR_EACH_RED(SYMM__C_CASE_RS) default: break; }
}
#undef SYMM__C_CASE_RS

#endif /* SYMM_DEVICE_COLL_DIRECT_H */
