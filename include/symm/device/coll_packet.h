/*
 * device/coll_packet.h - the reductions through the workspace's data
 * regions: PACKET (flag in the data; one shot, or two through each piece's
 * owner) and ONESHOT (plain data, one flag per peer).
 * Part of the collectives' device code: included by coll_impl.h, in
 * order, after coll_layout.h and coll_reduce.h; never include it alone.
 */
#ifndef SYMM_DEVICE_COLL_PACKET_H
#define SYMM_DEVICE_COLL_PACKET_H

/* ---- reductions: packet all-reduce / reduce-scatter ---------------------------- */

/*
 * PACKET: this PE's words (8 bytes each; the last may be short) go as
 * packets into every peer's region (src = me); then every word is reduced in
 * PE order 0..n-1 from the polled packets and the local input. For a
 * reduce-scatter, word k of piece j goes to PE j; `piece` is the byte
 * distance between pieces of src (0 for an all-reduce: one piece for all).
 */
#define SYMM__C_DEFINE_RED_PACKET(S)                                                              \
    SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_red_packet_##S(                           \
        const symm_ctx_t *ctx, const symm__coll_ws_t *ws, char *dst, const char *src,             \
        uint64_t nbytes, uint64_t piece, int op, uint32_t slot, uint32_t nslots) {                \
        int me = ctx->my_pe, n = ctx->n_pes;                                                      \
        uint64_t t = symm__block_tid(), nt = symm__block_nthreads();                              \
        uint64_t lo, hi, k;                                                                       \
        uint32_t fs;                                                                              \
        symm__c_ep_t e;                                                                           \
        if (symm__c_slot_idle((nbytes + 7) / 8, nslots, slot))                                    \
            return;                                                                               \
        e = symm__c_epoch_begin(ws, slot);                                                        \
        fs = e.flag ^ symm__c_sig32(symm__c_sig(piece ? SYMM__C_CALL_RS : SYMM__C_CALL_AR, nbytes,  \
                                                SYMM__C_RED_##S, op, -1));                        \
        symm__c_split((nbytes + 7) / 8, nslots, slot, &lo, &hi);                                  \
        for (k = lo + t; k < hi; k += nt) {                                                       \
            uint32_t nb = symm__c_word_nb(nbytes, k);                                             \
            uint64_t w0 = piece ? 0 : symm__c_ldw(src + 8 * k, nb);                               \
            for (int i = 1; i < n; i++) {                                                         \
                int p = me + i < n ? me + i : me + i - n;                                         \
                uint64_t w = piece ? symm__c_ldw(src + (uint64_t)p * piece + 8 * k, nb) : w0;     \
                symm__c_st16_vol(symm__c_peer(ctx, symm__c_region(ws, e.par, slot, n, me) +       \
                                                       (k - lo) * 16, p),                         \
                                 symm__c_pkt(w, e.flag, fs));                                     \
            }                                                                                     \
        }                                                                                         \
        for (k = lo + t; k < hi; k += nt) {                                                       \
            uint32_t nb = symm__c_word_nb(nbytes, k);                                             \
            symm__c_acc_##S a;                                                                    \
            for (int p = 0; p < n; p++) {                                                         \
                uint64_t w = (p == me)                                                            \
                    ? symm__c_ldw(src + (uint64_t)me * piece + 8 * k, nb)                         \
                    : symm__c_wait_pkt(ctx, symm__c_region(ws, e.par, slot, n, p),                \
                                       symm__c_region(ws, e.par, slot, n, p) + (k - lo) * 16,     \
                                       e.flag, fs, p);                                            \
                if (p == 0) symm__c_first_##S(&a, w);                                             \
                else symm__c_next_##S(&a, w, op);                                                 \
            }                                                                                     \
            symm__c_stw(dst + 8 * k, symm__c_last_##S(&a), nb);                                   \
        }                                                                                         \
        symm__block_sync();                                                                       \
        symm__c_epoch_end(ws, slot, e);                                                           \
    }
SYMM__C_FOR_EACH_RED(SYMM__C_DEFINE_RED_PACKET)
#undef SYMM__C_DEFINE_RED_PACKET

/* Piece p of `words` cut into n pieces whose lengths differ by at most one
 * (the longest first): its first word and its length. */
SYMM__DEVICE_INTERNAL void symm__c_piece(uint64_t words, int n, int p, uint64_t *start, uint64_t *len) {
    uint64_t q = words / (uint64_t)n, r = words % (uint64_t)n;
    *start = (uint64_t)p * q + ((uint64_t)p < r ? (uint64_t)p : r);
    *len = q + ((uint64_t)p < r ? 1u : 0u);
}

/*
 * Two-shot PACKET all-reduce (3 PEs or more). The words are cut into n
 * pieces (symm__c_piece) and PE r owns piece r. Word k of piece p goes as a
 * packet to PE p (the first half of this PE's region there); the owner
 * reduces its piece from the packets in PE order, stores it and sends every
 * result word as a packet to all peers (the second half), which copy it out.
 * Each PE sends 2 (n - 1) / n packets per data word instead of the one-shot
 * form's n - 1 (for n = 4: 1.5 against 3), for one more hop of latency, and
 * like it needs no fence and no handshake.
 *
 * Block `slot` takes relative words [lo, hi) of every piece, so each half
 * region holds hi - lo packets. The host makes the slot's share at least two
 * words, so every piece (the shortest lacks only the last word of the
 * longest) has a word in every slot: each block then waits for a packet from
 * every peer in every call, which is what lets the regions alternate by
 * parity whatever the sizes of consecutive calls (coll_layout.h).
 */
#define SYMM__C_DEFINE_AR_PACKET2(S)                                                              \
    SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_ar_packet2_##S(                           \
        const symm_ctx_t *ctx, const symm__coll_ws_t *ws, char *dst, const char *src,             \
        uint64_t nbytes, int op, uint32_t slot, uint32_t nslots) {                                \
        int me = ctx->my_pe, n = ctx->n_pes;                                                      \
        uint64_t t = symm__block_tid(), nt = symm__block_nthreads();                              \
        uint64_t words = (nbytes + 7) / 8, half = (uint64_t)(ws->region / 32u) * 16u;             \
        uint64_t lo, hi, k, ms, ml, ps, pl;                                                       \
        uint32_t fs;                                                                              \
        symm__c_ep_t e;                                                                           \
        char *out;                                                                                \
        if (symm__c_slot_idle((words + (uint64_t)n - 1) / (uint64_t)n, nslots, slot))             \
            return;                                                                               \
        e = symm__c_epoch_begin(ws, slot);                                                        \
        fs = e.flag ^ symm__c_sig32(symm__c_sig(SYMM__C_CALL_AR, nbytes, SYMM__C_RED_##S, op, -1)); \
        out = symm__c_region(ws, e.par, slot, n, me); /* mine, on the peers */                    \
        symm__c_piece(words, n, me, &ms, &ml);                                                    \
        symm__c_split((words + (uint64_t)n - 1) / (uint64_t)n, nslots, slot, &lo, &hi);           \
        for (k = lo + t; k < hi; k += nt)                                                         \
            for (int i = 1; i < n; i++) {                                                         \
                int p = me + i < n ? me + i : me + i - n;                                         \
                symm__c_piece(words, n, p, &ps, &pl);                                             \
                if (k < pl) {                                                                     \
                    uint64_t g = ps + k;                                                          \
                    uint32_t nb = symm__c_word_nb(nbytes, g);                                     \
                    symm__c_st16_vol(symm__c_peer(ctx, out + (k - lo) * 16, p),                   \
                                     symm__c_pkt(symm__c_ldw(src + 8 * g, nb), e.flag, fs));      \
                }                                                                                 \
            }                                                                                     \
        for (k = lo + t; k < hi && k < ml; k += nt) {                                             \
            uint64_t g = ms + k;                                                                  \
            uint32_t nb = symm__c_word_nb(nbytes, g);                                             \
            symm__c_acc_##S a;                                                                    \
            uint64_t r;                                                                           \
            for (int p = 0; p < n; p++) {                                                         \
                uint64_t w = (p == me) ? symm__c_ldw(src + 8 * g, nb)                             \
                                       : symm__c_wait_pkt(ctx, symm__c_region(ws, e.par, slot, n, p), \
                                                          symm__c_region(ws, e.par, slot, n, p) + \
                                                              (k - lo) * 16, e.flag, fs, p);      \
                if (p == 0) symm__c_first_##S(&a, w);                                             \
                else symm__c_next_##S(&a, w, op);                                                 \
            }                                                                                     \
            r = symm__c_last_##S(&a);                                                             \
            symm__c_stw(dst + 8 * g, r, nb);                                                      \
            for (int i = 1; i < n; i++) {                                                         \
                int p = me + i < n ? me + i : me + i - n;                                         \
                symm__c_st16_vol(symm__c_peer(ctx, out + half + (k - lo) * 16, p),                \
                                 symm__c_pkt(r, e.flag, fs));                                     \
            }                                                                                     \
        }                                                                                         \
        for (k = lo + t; k < hi; k += nt)                                                         \
            for (int i = 1; i < n; i++) {                                                         \
                int p = me + i < n ? me + i : me + i - n;                                         \
                symm__c_piece(words, n, p, &ps, &pl);                                             \
                if (k < pl) {                                                                     \
                    uint64_t g = ps + k;                                                          \
                    uint32_t nb = symm__c_word_nb(nbytes, g);                                     \
                    symm__c_stw(dst + 8 * g,                                                      \
                                symm__c_wait_pkt(ctx, symm__c_region(ws, e.par, slot, n, p) + half, \
                                                 symm__c_region(ws, e.par, slot, n, p) + half +   \
                                                     (k - lo) * 16, e.flag, fs, p), nb);          \
                }                                                                                 \
            }                                                                                     \
        symm__block_sync();                                                                       \
        symm__c_epoch_end(ws, slot, e);                                                           \
    }
SYMM__C_FOR_EACH_RED(SYMM__C_DEFINE_AR_PACKET2)
#undef SYMM__C_DEFINE_AR_PACKET2

/*
 * ONESHOT all-reduce: push this PE's slice into every peer's region, one
 * release flag per peer (after the call's signature: symm__c_handshake_sig),
 * then reduce the n copies locally. 16-byte units; the
 * last may be short and the input may be unaligned (word path).
 */
#define SYMM__C_DEFINE_AR_ONESHOT(S)                                                              \
    SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_ar_oneshot_##S(                           \
        const symm_ctx_t *ctx, const symm__coll_ws_t *ws, char *dst, const char *src,             \
        uint64_t nbytes, int op, uint32_t slot, uint32_t nslots) {                                \
        int me = ctx->my_pe, n = ctx->n_pes;                                                      \
        uint64_t t = symm__block_tid(), nt = symm__block_nthreads();                              \
        uint64_t lo, hi, u, w0, w1;                                                               \
        int fast = (((uintptr_t)src | (uintptr_t)dst) & 15u) == 0;                                \
        symm__c_ep_t e = symm__c_epoch_begin(ws, slot);                                           \
        char *mine = symm__c_region_raw(ws, e.par, slot, n, me);                                  \
        symm__c_split((nbytes + 15) / 16, nslots, slot, &lo, &hi);                                \
        for (u = lo + t; u < hi; u += nt) {                                                       \
            symm__c_ld_unit(src + 16 * u, nbytes - 16 * u, fast, &w0, &w1);                       \
            for (int i = 1; i < n; i++) {                                                         \
                int p = me + i < n ? me + i : me + i - n;                                         \
                symm__c_st_unit(symm__c_peer(ctx, mine + (u - lo) * 16, p), 16, 1, w0, w1);       \
            }                                                                                     \
        }                                                                                         \
        symm__c_handshake_sig(ctx, ws, e, slot,                                                   \
                              symm__c_sig(SYMM__C_CALL_AR, nbytes, SYMM__C_RED_##S, op, -1));     \
        for (u = lo + t; u < hi; u += nt) {                                                       \
            uint64_t rem = nbytes - 16 * u;                                                       \
            symm__c_acc_##S a0, a1;                                                               \
            for (int p = 0; p < n; p++) {                                                         \
                if (p == me)                                                                      \
                    symm__c_ld_unit(src + 16 * u, rem, fast, &w0, &w1);                           \
                else                                                                              \
                    symm__c_ld_unit(symm__c_region_raw(ws, e.par, slot, n, p) + (u - lo) * 16, 16, 1, \
                                    &w0, &w1);                                                    \
                if (p == 0) { symm__c_first_##S(&a0, w0); symm__c_first_##S(&a1, w1); }           \
                else { symm__c_next_##S(&a0, w0, op); symm__c_next_##S(&a1, w1, op); }            \
            }                                                                                     \
            symm__c_st_unit(dst + 16 * u, rem, fast, symm__c_last_##S(&a0), symm__c_last_##S(&a1)); \
        }                                                                                         \
        symm__block_sync();                                                                       \
        symm__c_epoch_end(ws, slot, e);                                                           \
    }
SYMM__C_FOR_EACH_RED(SYMM__C_DEFINE_AR_ONESHOT)
#undef SYMM__C_DEFINE_AR_ONESHOT

/*
 * ONESHOT reduce-scatter: this PE stores its copy of piece p (its slot's
 * share of the 16-byte units) into its plain-data region on PE p, then one
 * release flag per peer after the call's signature (symm__c_handshake_sig),
 * then reduces its own piece in PE order from its regions and src into dst.
 * Every byte crosses NVLink once, as a store, and the reduction loads are
 * local; one handshake, as the ONESHOT all-reduce (a peer's next call of
 * this parity waits for this PE first). `piece`: bytes between src's
 * pieces. In place (dst = src + me * piece) is safe: only this PE reads its
 * own piece, each unit by the thread that then writes it.
 */
#define SYMM__C_DEFINE_RS_ONESHOT(S)                                                              \
    SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_rs_oneshot_##S(                           \
        const symm_ctx_t *ctx, const symm__coll_ws_t *ws, char *dst, const char *src,             \
        uint64_t nbytes, uint64_t piece, int op, uint32_t slot, uint32_t nslots) {                \
        int me = ctx->my_pe, n = ctx->n_pes;                                                      \
        uint64_t t = symm__block_tid(), nt = symm__block_nthreads();                              \
        uint64_t lo, hi, u, w0, w1;                                                               \
        int fast = (((uintptr_t)src | (uintptr_t)dst | (uintptr_t)piece) & 15u) == 0;             \
        symm__c_ep_t e = symm__c_epoch_begin(ws, slot);                                           \
        char *mine = symm__c_region_raw(ws, e.par, slot, n, me);                                  \
        symm__c_split((nbytes + 15) / 16, nslots, slot, &lo, &hi);                                \
        for (u = lo + t; u < hi; u += nt)                                                         \
            for (int i = 1; i < n; i++) {                                                         \
                int p = me + i < n ? me + i : me + i - n;                                         \
                symm__c_ld_unit(src + (uint64_t)p * piece + 16 * u, nbytes - 16 * u, fast, &w0, &w1); \
                symm__c_st_unit(symm__c_peer(ctx, mine + (u - lo) * 16, p), 16, 1, w0, w1);       \
            }                                                                                     \
        symm__c_handshake_sig(ctx, ws, e, slot,                                                   \
                              symm__c_sig(SYMM__C_CALL_RS, nbytes, SYMM__C_RED_##S, op, -1));     \
        for (u = lo + t; u < hi; u += nt) {                                                       \
            uint64_t rem = nbytes - 16 * u;                                                       \
            symm__c_acc_##S a0, a1;                                                               \
            for (int p = 0; p < n; p++) {                                                         \
                if (p == me)                                                                      \
                    symm__c_ld_unit(src + (uint64_t)me * piece + 16 * u, rem, fast, &w0, &w1);    \
                else                                                                              \
                    symm__c_ld_unit(symm__c_region_raw(ws, e.par, slot, n, p) + (u - lo) * 16, 16, 1, \
                                    &w0, &w1);                                                    \
                if (p == 0) { symm__c_first_##S(&a0, w0); symm__c_first_##S(&a1, w1); }           \
                else { symm__c_next_##S(&a0, w0, op); symm__c_next_##S(&a1, w1, op); }            \
            }                                                                                     \
            symm__c_st_unit(dst + 16 * u, rem, fast, symm__c_last_##S(&a0), symm__c_last_##S(&a1)); \
        }                                                                                         \
        symm__block_sync();                                                                       \
        symm__c_epoch_end(ws, slot, e);                                                           \
    }
SYMM__C_FOR_EACH_RED(SYMM__C_DEFINE_RS_ONESHOT)
#undef SYMM__C_DEFINE_RS_ONESHOT

#endif /* SYMM_DEVICE_COLL_PACKET_H */
