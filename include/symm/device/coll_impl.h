/*
 * device/coll_impl.h - the collectives' device code: handshakes, packets and
 * the algorithms, shared by the stream kernels (src/coll) and the public
 * device forms (symm_device_coll.h). Included by symm_device_coll.h when
 * device code is generated; never include it directly.
 *
 * Every algorithm is a function of (ctx, ws, buffers, ..., slot, nslots): the
 * calling block is `slot` of `nslots` blocks that together do one call and
 * split the data between them. A stream kernel passes blockIdx.x/gridDim.x, a
 * block-scope device call 0/1. Each block synchronises only with the blocks of
 * the same slot on the other PEs (its handshake words and data regions are
 * its own), so the blocks of one call need not wait for each other.
 *
 * Synchronisation state is in the workspace (coll_types.h): per slot a call
 * counter (epoch); the flag value of a call is never 0 and the data regions
 * alternate by call parity, so nothing is ever reset and calls captured in
 * CUDA graphs replay correctly. Every call of a slot waits for something
 * each peer sent in it (a packet call's slot with no words sits it out
 * uncounted), so no peer gets two calls ahead of a reader.
 *
 * Ordering (PTX memory model, system scope): data to a peer is stored with
 * plain stores; after a block barrier one thread per peer publishes a flag
 * with st.release.sys (cumulative through the barrier, so it covers every
 * thread's stores); the reader waits with ld.acquire.sys and a block barrier
 * before touching the data. Packets carry the flag inside each 8-byte half of
 * a 16-byte store, so the reader needs no separate flag.
 */
#ifndef SYMM_DEVICE_COLL_IMPL_H
#define SYMM_DEVICE_COLL_IMPL_H

#include "symm/device/coll_types.h"
#include "symm/device/coll_reduce.h"

/* ---- small PTX helpers ------------------------------------------------------- */

SYMM__DEVICE_INTERNAL symm__v4_t symm__c_ld16(const void *p) {
    symm__v4_t v;
    asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
    return v;
}

SYMM__DEVICE_INTERNAL void symm__c_st16(void *p, symm__v4_t v) {
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};"
                 ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

/* Packets: volatile so every poll reaches memory and the 16-byte store is not
 * split or merged by the compiler. Each 8-byte half is single-copy atomic. */
SYMM__DEVICE_INTERNAL symm__v4_t symm__c_ld16_vol(const void *p) {
    symm__v4_t v;
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
    return v;
}

SYMM__DEVICE_INTERNAL void symm__c_st16_vol(void *p, symm__v4_t v) {
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};"
                 ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

SYMM__DEVICE_INTERNAL uint64_t symm__c_ld8(const void *p) {
    uint64_t v;
    asm volatile("ld.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

SYMM__DEVICE_INTERNAL void symm__c_st8(void *p, uint64_t v) {
    asm volatile("st.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

SYMM__DEVICE_INTERNAL uint32_t symm__c_ld1(const void *p) {
    uint32_t v;
    asm volatile("ld.global.u8 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

SYMM__DEVICE_INTERNAL void symm__c_st1(void *p, uint32_t v) {
    asm volatile("st.global.u8 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

SYMM__DEVICE_INTERNAL uint32_t symm__c_ld4(const void *p) {
    uint32_t v;
    asm volatile("ld.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

SYMM__DEVICE_INTERNAL void symm__c_st4(void *p, uint32_t v) {
    asm volatile("st.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

SYMM__DEVICE_INTERNAL uint64_t symm__c_ld8_vol(const void *p) {
    uint64_t v;
    asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

SYMM__DEVICE_INTERNAL void symm__c_st8_vol(void *p, uint64_t v) {
    asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

SYMM__DEVICE_INTERNAL void symm__c_st4_release(void *p, uint32_t v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

SYMM__DEVICE_INTERNAL uint32_t symm__c_ld4_acquire(const void *p) {
    uint32_t v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* `nb` (1..8) bytes at p as a little-endian word, zero-extended. One 8-byte
 * load when it can; the unaligned or short case goes 4 or 1 bytes at a time. */
SYMM__DEVICE_INTERNAL uint64_t symm__c_ldw(const void *p, uint32_t nb) {
    const char *c = (const char *)p;
    uint64_t w = 0;
    uint32_t i = 0;
    if (nb == 8 && ((uintptr_t)p & 7u) == 0)
        return symm__c_ld8(p);
    if (((uintptr_t)p & 3u) == 0)
        for (; i + 4 <= nb; i += 4)
            w |= (uint64_t)symm__c_ld4(c + i) << (8 * i);
    for (; i < nb; i++)
        w |= (uint64_t)symm__c_ld1(c + i) << (8 * i);
    return w;
}

/* Bytes of word k (8 bytes each) of an nbytes buffer: 8, fewer for a short last one. */
SYMM__DEVICE_INTERNAL uint32_t symm__c_word_nb(uint64_t nbytes, uint64_t k) {
    return nbytes - 8 * k < 8 ? (uint32_t)(nbytes - 8 * k) : 8u;
}

SYMM__DEVICE_INTERNAL void symm__c_stw(void *p, uint64_t w, uint32_t nb) {
    char *c = (char *)p;
    uint32_t i = 0;
    if (nb == 8 && ((uintptr_t)p & 7u) == 0) {
        symm__c_st8(p, w);
        return;
    }
    if (((uintptr_t)p & 3u) == 0)
        for (; i + 4 <= nb; i += 4)
            symm__c_st4(c + i, (uint32_t)(w >> (8 * i)));
    for (; i < nb; i++)
        symm__c_st1(c + i, (uint32_t)(w >> (8 * i)) & 0xffu);
}

/* The 16-byte unit at p of which `rem` (>= 1) bytes exist, as two words: one
 * load when `wide` (p 16-byte aligned) and the unit whole, else word loads. */
SYMM__DEVICE_INTERNAL void symm__c_ld_unit(const char *p, uint64_t rem, int wide, uint64_t *w0, uint64_t *w1) {
    if (wide && rem >= 16) {
        symm__v4_t v = symm__c_ld16(p);
        *w0 = ((uint64_t)v.y << 32) | v.x;
        *w1 = ((uint64_t)v.w << 32) | v.z;
        return;
    }
    *w0 = symm__c_ldw(p, rem >= 8 ? 8u : (uint32_t)rem);
    *w1 = rem > 8 ? symm__c_ldw(p + 8, rem >= 16 ? 8u : (uint32_t)(rem - 8)) : 0;
}

/* Store the `rem` (>= 1) existing bytes of a unit; as symm__c_ld_unit. */
SYMM__DEVICE_INTERNAL void symm__c_st_unit(char *p, uint64_t rem, int wide, uint64_t w0, uint64_t w1) {
    if (wide && rem >= 16) {
        symm__v4_t v;
        v.x = (uint32_t)w0; v.y = (uint32_t)(w0 >> 32);
        v.z = (uint32_t)w1; v.w = (uint32_t)(w1 >> 32);
        symm__c_st16(p, v);
        return;
    }
    symm__c_stw(p, w0, rem >= 8 ? 8u : (uint32_t)rem);
    if (rem > 8)
        symm__c_stw(p + 8, w1, rem >= 16 ? 8u : (uint32_t)(rem - 8));
}

/* [lo, hi) of part `i` when `total` units are cut into `parts` near-equal
 * contiguous parts. */
SYMM__DEVICE_INTERNAL void symm__c_split(uint64_t total, uint32_t parts, uint32_t i, uint64_t *lo,
                                         uint64_t *hi) {
    uint64_t per = (total + parts - 1) / parts;
    uint64_t a = per * i;
    if (a > total) a = total;
    *lo = a;
    *hi = (a + per > total) ? total : a + per;
}

/*
 * Does slot `slot` of `nslots` get none of `units`? Such a slot takes no
 * part in a packet call and does not count it: a call that exchanges nothing
 * waits for nothing from the peers, so counting it would let a PE start the
 * next call of the same parity (and store into a peer's region of it) while
 * that peer still reads the previous one. The share depends only on
 * arguments every PE passes alike, so every PE skips the same slots and the
 * slot's count stays the same on all of them (coll_types.h).
 */
SYMM__DEVICE_INTERNAL int symm__c_slot_idle(uint64_t units, uint32_t nslots, uint32_t slot) {
    uint64_t lo, hi;
    symm__c_split(units, nslots, slot, &lo, &hi);
    return hi <= lo;
}

/*
 * The peer that block `slot` of PE `me` serves at step i of a loop over the
 * n PEs. Every block starts at a different PE, so at any moment this PE's
 * blocks write to all peers at once (its egress is spread over every link,
 * and the PEs' blocks do not all aim at the same destination), and the
 * local copy of some blocks overlaps the remote traffic of the others.
 * Only the order changes: each block still visits every PE once.
 */
SYMM__DEVICE_INTERNAL int symm__c_step_pe(int me, int i, uint32_t slot, int n) {
    return (int)(((uint32_t)me + (uint32_t)i + slot) % (uint32_t)n);
}

SYMM__DEVICE_INTERNAL char *symm__c_peer(const symm_ctx_t *ctx, const void *p, int pe) {
    return (char *)symm__peer(ctx, p, pe);
}

/* ---- workspace, epochs, handshakes ---------------------------------------------- */

typedef struct symm__c_ep {
    uint64_t count;  /* calls of this slot so far, this one included */
    uint32_t flag;   /* this call's flag value: never 0 */
    uint32_t par;    /* call parity: which half of the flags and regions */
} symm__c_ep_t;

SYMM__DEVICE_INTERNAL uint32_t *symm__c_flag(const symm__coll_ws_t *ws, uint32_t kind, uint32_t par,
                                             uint32_t slot, int src) {
    return (uint32_t *)(uintptr_t)(ws->base + SYMM__COLL_WS_FLAG_OFF) +
           (((kind * 2u + par) * SYMM_COLL_MAX_BLOCKS + slot) * SYMM_COLL_MAX_PES + (uint32_t)src);
}

/* The packet region of (parity, slot, source PE). */
SYMM__DEVICE_INTERNAL char *symm__c_region(const symm__coll_ws_t *ws, uint32_t par, uint32_t slot,
                                           int n, int src) {
    return (char *)(uintptr_t)ws->data +
           ((uint64_t)(par * ws->nbmax + slot) * (uint64_t)n + (uint64_t)src) * ws->region;
}

/* The plain-data region (ONESHOT) of (parity, slot, source PE): in the
 * second half of the data area, never under a packet region (coll_types.h). */
SYMM__DEVICE_INTERNAL char *symm__c_region_raw(const symm__coll_ws_t *ws, uint32_t par, uint32_t slot,
                                               int n, int src) {
    return symm__c_region(ws, par + 2u, slot, n, src);
}

SYMM__DEVICE_INTERNAL uint64_t *symm__c_epoch_word(const symm__coll_ws_t *ws, uint32_t slot) {
    return (uint64_t *)(uintptr_t)(ws->base + SYMM__COLL_WS_EPOCH_OFF) + slot;
}

/*
 * Start a call in `slot`: a block barrier (so the previous call's store of
 * the counter, by thread 0 after that call's last barrier, is seen), then
 * every thread reads the slot's counter. The load is not waited for here:
 * its first use is the first packet or flag, so its latency overlaps the
 * loads of the data. symm__c_epoch_end stores the new count after the
 * call's last block barrier, when no thread will read the old one again.
 */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT symm__c_ep_t symm__c_epoch_begin(const symm__coll_ws_t *ws,
                                                                        uint32_t slot) {
    symm__c_ep_t e;
    symm__block_sync();
    e.count = symm__c_ld8_vol(symm__c_epoch_word(ws, slot)) + 1;
    e.flag = (uint32_t)(e.count % 0xffffffffull) + 1u;
    e.par = (uint32_t)(e.count & 1u);
    return e;
}

/* After the call's last block barrier. */
SYMM__DEVICE_INTERNAL void symm__c_epoch_end(const symm__coll_ws_t *ws, uint32_t slot, symm__c_ep_t e) {
    if (symm__block_tid() == 0)
        symm__c_st8_vol(symm__c_epoch_word(ws, slot), e.count);
}

/* Wait until the local flag word equals `want` (acquire). Deadline and abort
 * flag as every symm wait (impl_wait.h). */
SYMM__DEVICE_INTERNAL void symm__c_wait_flag(const symm_ctx_t *ctx, const uint32_t *p, uint32_t want) {
    uint32_t polls = 0;
    uint64_t t0 = 0;
    for (;;) {
        uint32_t v = symm__c_ld4_acquire(p);
        if (v == want)
            return;
        if (++polls % SYMM__WAIT_CHECK_EVERY == 0)
            t0 = symm__wait_check(ctx, p, SYMM_CMP_EQ, want, v, t0);
    }
}

/* Poll a packet until both halves carry `flag`; return its 8 data bytes. */
SYMM__DEVICE_INTERNAL uint64_t symm__c_wait_pkt(const symm_ctx_t *ctx, const void *p, uint32_t flag) {
    uint32_t polls = 0;
    uint64_t t0 = 0;
    for (;;) {
        symm__v4_t v = symm__c_ld16_vol(p);
        if (v.y == flag && v.w == flag)
            return ((uint64_t)v.z << 32) | v.x;
        if (++polls % SYMM__WAIT_CHECK_EVERY == 0)
            t0 = symm__wait_check(ctx, p, SYMM_CMP_EQ, flag, v.y == flag ? v.w : v.y, t0);
    }
}

SYMM__DEVICE_INTERNAL symm__v4_t symm__c_pkt(uint64_t w, uint32_t flag) {
    symm__v4_t v;
    v.x = (uint32_t)w;
    v.y = flag;
    v.z = (uint32_t)(w >> 32);
    v.w = flag;
    return v;
}

/*
 * Handshake `kind` of this call among the blocks of `slot` on every PE: a
 * block barrier, then thread t (t < n, t != me) publishes the flag to PE t
 * with a release (covering the whole block's earlier stores) and waits for
 * PE t's flag to this PE (acquire), then a block barrier. On return every
 * store the slot's blocks made on any PE before the handshake is visible.
 */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_handshake(const symm_ctx_t *ctx,
                                                               const symm__coll_ws_t *ws,
                                                               uint32_t kind, symm__c_ep_t e,
                                                               uint32_t slot) {
    int me = ctx->my_pe, n = ctx->n_pes;
    int t = (int)symm__block_tid(), nt = (int)symm__block_nthreads();
    int p;
    symm__block_sync();
    for (p = t; p < n; p += nt)
        if (p != me)
            symm__c_st4_release(symm__c_peer(ctx, symm__c_flag(ws, kind, e.par, slot, me), p), e.flag);
    for (p = t; p < n; p += nt)
        if (p != me)
            symm__c_wait_flag(ctx, symm__c_flag(ws, kind, e.par, slot, p), e.flag);
    symm__block_sync();
}

/* Only the non-roots announce themselves to `root` (a broadcast's root must
 * know its readers have left the region it is about to reuse). */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_arrive_root(const symm_ctx_t *ctx,
                                                                 const symm__coll_ws_t *ws,
                                                                 symm__c_ep_t e, uint32_t slot, int root) {
    int me = ctx->my_pe, n = ctx->n_pes;
    int t = (int)symm__block_tid(), nt = (int)symm__block_nthreads();
    int p;
    if (me != root) {
        if (t == 0)
            symm__c_st4_release(symm__c_peer(ctx, symm__c_flag(ws, 0, e.par, slot, me), root), e.flag);
    } else {
        for (p = t; p < n; p += nt)
            if (p != me)
                symm__c_wait_flag(ctx, symm__c_flag(ws, 0, e.par, slot, p), e.flag);
    }
    symm__block_sync();
}

/* Workspace of the collectives: the team's internal scratch (the host side
 * computes the same, see SYMM__COLL_WS_REGION). */
SYMM__DEVICE_INTERNAL symm__coll_ws_t symm__c_ctx_ws(const symm_ctx_t *ctx) {
    symm__coll_ws_t ws;
    uint64_t region = SYMM__COLL_WS_REGION(ctx->scratch_size, ctx->n_pes);
    ws.base = ctx->scratch;
    ws.nbmax = SYMM__COLL_WS_NBMAX;
    ws.region = (uint32_t)region;
    ws.data = region ? ctx->scratch + SYMM__COLL_WS_SYNC_BYTES : 0;
    return ws;
}

/* ---- reporting -------------------------------------------------------------- */

#define SYMM__C_MSG_BAD "symm: PE %d: %s: %s (dtype %d, op %d, acc %d)\n"
SYMM__NOINLINE void symm__c_fail(int pe, const char *call, const char *why, int dtype, int op, int acc) {
#if defined(__CUDACC__)
    printf(SYMM__C_MSG_BAD, pe, call, why, dtype, op, acc);
#else
    struct { int pe; const char *call; const char *why; int dtype, op, acc; } a = { pe, call, why, dtype, op, acc };
    symm__vprintf(SYMM__C_MSG_BAD, &a);
#endif
    symm__trap();
}

#define SYMM__C_MSG_A2AV \
    "symm: PE %d: all_to_allv: sends %llu elements to PE %d, which expects %llu\n"
SYMM__NOINLINE void symm__c_fail_a2av(int pe, int to, unsigned long long count, unsigned long long want) {
#if defined(__CUDACC__)
    printf(SYMM__C_MSG_A2AV, pe, count, to, want);
#else
    struct { int pe; unsigned long long count; int to; unsigned long long want; } a = { pe, count, to, want };
    symm__vprintf(SYMM__C_MSG_A2AV, &a);
#endif
    symm__trap();
}

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
        symm__c_ep_t e;                                                                           \
        if (symm__c_slot_idle((nbytes + 7) / 8, nslots, slot))                                    \
            return;                                                                               \
        e = symm__c_epoch_begin(ws, slot);                                                        \
        symm__c_split((nbytes + 7) / 8, nslots, slot, &lo, &hi);                                  \
        for (k = lo + t; k < hi; k += nt) {                                                       \
            uint32_t nb = symm__c_word_nb(nbytes, k);                                             \
            uint64_t w0 = piece ? 0 : symm__c_ldw(src + 8 * k, nb);                               \
            for (int i = 1; i < n; i++) {                                                         \
                int p = me + i < n ? me + i : me + i - n;                                         \
                uint64_t w = piece ? symm__c_ldw(src + (uint64_t)p * piece + 8 * k, nb) : w0;     \
                symm__c_st16_vol(symm__c_peer(ctx, symm__c_region(ws, e.par, slot, n, me) +       \
                                                       (k - lo) * 16, p),                         \
                                 symm__c_pkt(w, e.flag));                                         \
            }                                                                                     \
        }                                                                                         \
        for (k = lo + t; k < hi; k += nt) {                                                       \
            uint32_t nb = symm__c_word_nb(nbytes, k);                                             \
            symm__c_acc_##S a;                                                                    \
            for (int p = 0; p < n; p++) {                                                         \
                uint64_t w = (p == me)                                                            \
                    ? symm__c_ldw(src + (uint64_t)me * piece + 8 * k, nb)                         \
                    : symm__c_wait_pkt(ctx, symm__c_region(ws, e.par, slot, n, p) + (k - lo) * 16, \
                                       e.flag);                                                   \
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
 * parity whatever the sizes of consecutive calls (coll_types.h).
 */
#define SYMM__C_DEFINE_AR_PACKET2(S)                                                              \
    SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_ar_packet2_##S(                           \
        const symm_ctx_t *ctx, const symm__coll_ws_t *ws, char *dst, const char *src,             \
        uint64_t nbytes, int op, uint32_t slot, uint32_t nslots) {                                \
        int me = ctx->my_pe, n = ctx->n_pes;                                                      \
        uint64_t t = symm__block_tid(), nt = symm__block_nthreads();                              \
        uint64_t words = (nbytes + 7) / 8, half = (uint64_t)(ws->region / 32u) * 16u;             \
        uint64_t lo, hi, k, ms, ml, ps, pl;                                                       \
        symm__c_ep_t e;                                                                           \
        char *out;                                                                                \
        if (symm__c_slot_idle((words + (uint64_t)n - 1) / (uint64_t)n, nslots, slot))             \
            return;                                                                               \
        e = symm__c_epoch_begin(ws, slot);                                                        \
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
                                     symm__c_pkt(symm__c_ldw(src + 8 * g, nb), e.flag));          \
                }                                                                                 \
            }                                                                                     \
        for (k = lo + t; k < hi && k < ml; k += nt) {                                             \
            uint64_t g = ms + k;                                                                  \
            uint32_t nb = symm__c_word_nb(nbytes, g);                                             \
            symm__c_acc_##S a;                                                                    \
            uint64_t r;                                                                           \
            for (int p = 0; p < n; p++) {                                                         \
                uint64_t w = (p == me) ? symm__c_ldw(src + 8 * g, nb)                             \
                                       : symm__c_wait_pkt(ctx, symm__c_region(ws, e.par, slot, n, p) + \
                                                                   (k - lo) * 16, e.flag);        \
                if (p == 0) symm__c_first_##S(&a, w);                                             \
                else symm__c_next_##S(&a, w, op);                                                 \
            }                                                                                     \
            r = symm__c_last_##S(&a);                                                             \
            symm__c_stw(dst + 8 * g, r, nb);                                                      \
            for (int i = 1; i < n; i++) {                                                         \
                int p = me + i < n ? me + i : me + i - n;                                         \
                symm__c_st16_vol(symm__c_peer(ctx, out + half + (k - lo) * 16, p),                \
                                 symm__c_pkt(r, e.flag));                                         \
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
                                symm__c_wait_pkt(ctx, symm__c_region(ws, e.par, slot, n, p) + half + \
                                                          (k - lo) * 16, e.flag), nb);            \
                }                                                                                 \
            }                                                                                     \
        symm__block_sync();                                                                       \
        symm__c_epoch_end(ws, slot, e);                                                           \
    }
SYMM__C_FOR_EACH_RED(SYMM__C_DEFINE_AR_PACKET2)
#undef SYMM__C_DEFINE_AR_PACKET2

/*
 * ONESHOT all-reduce: push this PE's slice into every peer's region, one
 * release flag per peer, then reduce the n copies locally. 16-byte units; the
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
        symm__c_handshake(ctx, ws, 0, e, slot);                                                   \
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

/* ---- direct algorithms: addresses published in the handshake --------------------- */

/*
 * The direct algorithms load from and store to the peers' buffers. Before
 * its start flag each PE's block b writes, into every peer's aux[b][me], the
 * heap OFFSETS (address - ctx->heap_base) of its own src and dst (and, for
 * all_to_allv, where and how much that peer may write). An offset, not the
 * address: in PE p's process its src is p's own heap, while the same number
 * in this process is this PE's own heap; PE p's copy is reached here at
 * peer(heap_base + offset, p). (The first GPU run published raw addresses:
 * every "peer" load read this PE's own buffer, so every direct algorithm was
 * wrong.) The common case, every PE passing the same symmetric pointers, is
 * detected during the handshake (`sym`) and then uses plain arithmetic
 * (DESIGN.md decision 2); otherwise (a PE that staged through scratch, or
 * different heap pointers per PE) the loops use the published offsets. A
 * buffer outside the heap is published as SYMM__C_NOT_HEAP; the caller says
 * which buffers the peers dereference, and when one of those is outside the
 * heap on any PE every PE stops with a message naming it (the host side
 * stages such buffers, so only a device call can meet this).
 */
typedef struct symm__c_xs {
    const symm_ctx_t *ctx;
    const uint64_t *aux; /* this PE's aux of the calling slot: [src PE][4] */
    int sym[2];          /* every PE's src [0] / dst [1] is the symmetric address */
} symm__c_xs_t;

SYMM__DEVICE_INTERNAL uint64_t *symm__c_aux(const symm__coll_ws_t *ws, uint32_t slot) {
    return (uint64_t *)(uintptr_t)(ws->base + SYMM__COLL_WS_AUX_OFF) + (uint64_t)slot * SYMM_COLL_MAX_PES * 4u;
}

/* The heap offset of a local pointer, or SYMM__C_NOT_HEAP when it lies
 * outside this PE's heap range (one stride from heap_base). */
#define SYMM__C_NOT_HEAP (~0ull)
SYMM__DEVICE_INTERNAL uint64_t symm__c_heap_off(const symm_ctx_t *ctx, const void *p) {
    uint64_t off = (uint64_t)(uintptr_t)p - ctx->heap_base;
    return off < (uint64_t)ctx->stride ? off : SYMM__C_NOT_HEAP;
}

/* Which of (src, dst) the peers dereference (symm__c_handshake_pub). */
#define SYMM__C_PEERS_SRC 1
#define SYMM__C_PEERS_DST 2

/* PE p's buffer `which` (0 src, 1 dst) whose local copy is `mine`. */
SYMM__DEVICE_INTERNAL char *symm__c_xaddr(const symm__c_xs_t *x, const void *mine, int p, int which) {
    if (x->sym[which] || p == x->ctx->my_pe)
        return symm__c_peer(x->ctx, mine, p);
    return symm__c_peer(x->ctx,
                        (const void *)(uintptr_t)(x->ctx->heap_base + symm__c_ld8_vol(x->aux + 4 * p + which)),
                        p);
}

#if defined(__CUDACC__)
#  define SYMM__C_SYNC_AND(x) __syncthreads_and(x)
#else
#  define SYMM__C_SYNC_AND(x) __nvvm_bar0_and(x)
#endif

#define SYMM__C_MSG_HEAP                                                                        \
    "symm: PE %d: device collective: the %s buffer of team PE %d is not in the symmetric heap, "  \
    "and the peers must reach it (allocate it with symm_malloc)\n"
SYMM__NOINLINE void symm__c_fail_heap(int pe, const char *which, int owner) {
#if defined(__CUDACC__)
    printf(SYMM__C_MSG_HEAP, pe, which, owner);
#else
    struct { int pe; const char *which; int owner; } a = { pe, which, owner };
    symm__vprintf(SYMM__C_MSG_HEAP, &a);
#endif
    symm__trap();
}

/* Stop if PE p's buffers that the peers dereference (`peers`, a mask of
 * SYMM__C_PEERS_*) have offsets (so, dof) outside the heap. */
SYMM__DEVICE_INTERNAL void symm__c_check_heap(const symm_ctx_t *ctx, int peers, int p, uint64_t so, uint64_t dof) {
    if ((peers & SYMM__C_PEERS_SRC) && so == SYMM__C_NOT_HEAP)
        symm__c_fail_heap(ctx->world_pe, "src", p);
    if ((peers & SYMM__C_PEERS_DST) && dof == SYMM__C_NOT_HEAP)
        symm__c_fail_heap(ctx->world_pe, "dest", p);
}

/*
 * Start handshake of a direct algorithm: publish the heap offsets of
 * (src, dst) [and xv[p], yv[p]]
 * into every peer's aux[me], release the flag, wait for every peer's flag,
 * and find out whether all addresses are the symmetric ones. `peers` says
 * which of src and dst the peers dereference: every PE checks them all
 * (its own and each peer's) after the flags, so all stop alike.
 */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT symm__c_xs_t symm__c_handshake_pub(
    const symm_ctx_t *ctx, const symm__coll_ws_t *ws, symm__c_ep_t e, uint32_t slot, const void *src,
    const void *dst, const uint64_t *xv, const uint64_t *yv, int peers) {
    int me = ctx->my_pe, n = ctx->n_pes;
    int t = (int)symm__block_tid(), nt = (int)symm__block_nthreads();
    uint64_t *aux = symm__c_aux(ws, slot);
    uint64_t so = symm__c_heap_off(ctx, src), dof = symm__c_heap_off(ctx, dst);
    int ok_src = so != SYMM__C_NOT_HEAP, ok_dst = dof != SYMM__C_NOT_HEAP, p;
    symm__c_xs_t x;
    symm__block_sync();
    for (p = t; p < n; p += nt) {
        if (p == me)
            continue;
        uint64_t *a = (uint64_t *)symm__c_peer(ctx, aux + 4 * me, p);
        symm__c_st8(a, so);
        symm__c_st8(a + 1, dof);
        if (xv) {
            symm__c_st8(a + 2, xv[p]);
            symm__c_st8(a + 3, yv[p]);
        }
        symm__c_st4_release(symm__c_peer(ctx, symm__c_flag(ws, 0, e.par, slot, me), p), e.flag);
    }
    for (p = t; p < n; p += nt) {
        if (p == me)
            continue;
        symm__c_wait_flag(ctx, symm__c_flag(ws, 0, e.par, slot, p), e.flag);
        {
            uint64_t ps = symm__c_ld8_vol(aux + 4 * p), pd = symm__c_ld8_vol(aux + 4 * p + 1);
            symm__c_check_heap(ctx, peers, p, ps, pd);
            ok_src &= ps == so;
            ok_dst &= pd == dof;
        }
    }
    if (t == 0 && n > 1) /* after the flags: the peers have this PE's offsets too */
        symm__c_check_heap(ctx, peers, me, so, dof);
    x.ctx = ctx;
    x.aux = aux;
    x.sym[0] = SYMM__C_SYNC_AND(ok_src);
    x.sym[1] = SYMM__C_SYNC_AND(ok_dst);
    return x;
}

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
        symm__c_xs_t x = symm__c_handshake_pub(ctx, ws, e, slot, src, dst, 0, 0,                  \
                                                SYMM__C_PEERS_SRC | SYMM__C_PEERS_DST);           \
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
        x = symm__c_handshake_pub(ctx, ws, e, slot, src, dst, 0, 0, SYMM__C_PEERS_DST);           \
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
            symm__c_handshake_pub(ctx, ws, e, slot, src, dst, 0, 0, SYMM__C_PEERS_SRC);           \
        symm__c_red_range_##S(&x, dst, 0, src, (uint64_t)ctx->my_pe * piece, nbytes, ctx->my_pe,  \
                              ctx->my_pe + 1, op, slot, nslots);                                  \
        symm__c_handshake(ctx, ws, 1, e, slot);                                                   \
        symm__c_epoch_end(ws, slot, e);                                                           \
    }
SYMM__C_FOR_EACH_RED(SYMM__C_DEFINE_RS_DIRECT)
#undef SYMM__C_DEFINE_RS_DIRECT

/* ---- data movement --------------------------------------------------------------- */

/*
 * PACKET all-gather / all-to-all / broadcast: this PE sends words of
 * src + piece * p to PE p (piece 0: the same data to all) as packets into
 * its region there and writes its own share locally, then polls every
 * sender's packets into dst + out_stride * p. root >= 0 (broadcast): only
 * the root sends, everything lands at dst, and the non-roots first tell the
 * root they have arrived (the root must not reuse a region still being read).
 */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_move_packet(
    const symm_ctx_t *ctx, const symm__coll_ws_t *ws, char *dst, const char *src, uint64_t nbytes,
    uint64_t piece, uint64_t out_stride, int root, uint32_t slot, uint32_t nslots) {
    int me = ctx->my_pe, n = ctx->n_pes;
    uint64_t t = symm__block_tid(), nt = symm__block_nthreads();
    uint64_t lo, hi, k;
    symm__c_ep_t e;
    int sends = (root < 0 || root == me);
    if (symm__c_slot_idle((nbytes + 7) / 8, nslots, slot))
        return;
    e = symm__c_epoch_begin(ws, slot);
    if (root >= 0)
        symm__c_arrive_root(ctx, ws, e, slot, root);
    symm__c_split((nbytes + 7) / 8, nslots, slot, &lo, &hi);
    if (sends) {
        for (k = lo + t; k < hi; k += nt) {
            uint32_t nb = symm__c_word_nb(nbytes, k);
            uint64_t w0 = piece ? 0 : symm__c_ldw(src + 8 * k, nb);
            for (int i = 1; i < n; i++) {
                int p = me + i < n ? me + i : me + i - n;
                uint64_t w = piece ? symm__c_ldw(src + (uint64_t)p * piece + 8 * k, nb) : w0;
                symm__c_st16_vol(symm__c_peer(ctx, symm__c_region(ws, e.par, slot, n, me) + (k - lo) * 16, p),
                                 symm__c_pkt(w, e.flag));
            }
            {
                const char *s = src + (uint64_t)me * piece + 8 * k;
                char *d = dst + (uint64_t)(root < 0 ? me : 0) * out_stride + 8 * k;
                if (s != d)
                    symm__c_stw(d, piece ? symm__c_ldw(s, nb) : w0, nb);
            }
        }
    }
    for (k = lo + t; k < hi; k += nt) {
        uint32_t nb = symm__c_word_nb(nbytes, k);
        for (int p = 0; p < n; p++) {
            if (p == me || (root >= 0 && p != root))
                continue;
            uint64_t w = symm__c_wait_pkt(ctx, symm__c_region(ws, e.par, slot, n, p) + (k - lo) * 16, e.flag);
            symm__c_stw(dst + (uint64_t)(root < 0 ? p : 0) * out_stride + 8 * k, w, nb);
        }
    }
    symm__block_sync();
    symm__c_epoch_end(ws, slot, e);
}

/*
 * Two-hop PACKET broadcast: the root's egress is its weak point (one hop
 * sends every word to all n - 1 others: 2 (n - 1) bytes of packets per data
 * byte). Here the slot's words are cut into m = n - 1 parts; the root sends
 * part j once, as packets, to non-root j, which forwards each packet as it
 * arrives to the other non-roots. The root sends 2 bytes per data byte, each
 * non-root receives 2 and sends 2 (m - 1) / m, for one more hop of latency.
 *
 * Packet slots in the regions are compacted per part: a word's position is
 * its index within its part, so each region needs only the largest part
 * (the host picks the block count so that it fits: bcast2_blocks). Region
 * reuse: as for the one-hop form, the non-roots first tell the root they
 * have arrived; a non-root forwards only what the root sent in this call,
 * so its writes into a peer's region also come after that peer arrived.
 */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_bcast_packet2(
    const symm_ctx_t *ctx, const symm__coll_ws_t *ws, char *dst, const char *src, uint64_t nbytes, int root,
    uint32_t slot, uint32_t nslots) {
    int me = ctx->my_pe, n = ctx->n_pes, m = n - 1;
    uint64_t t = symm__block_tid(), nt = symm__block_nthreads();
    uint64_t lo, hi, plo, phi, k;
    int j, mine = (me - root - 1 + n) % n; /* this non-root's part */
    symm__c_ep_t e;
    if (symm__c_slot_idle((nbytes + 7) / 8, nslots, slot))
        return;
    e = symm__c_epoch_begin(ws, slot);
    symm__c_arrive_root(ctx, ws, e, slot, root);
    symm__c_split((nbytes + 7) / 8, nslots, slot, &lo, &hi);
    if (me == root) {
        for (j = 0; j < m; j++) {
            int q = (root + 1 + j) % n;
            char *reg = symm__c_peer(ctx, symm__c_region(ws, e.par, slot, n, root), q);
            symm__c_split(hi - lo, (uint32_t)m, (uint32_t)j, &plo, &phi);
            for (k = plo + t; k < phi; k += nt) {
                uint64_t b = 8 * (lo + k);
                uint32_t nb = symm__c_word_nb(nbytes, lo + k);
                uint64_t w = symm__c_ldw(src + b, nb);
                symm__c_st16_vol(reg + (k - plo) * 16, symm__c_pkt(w, e.flag));
                if (dst != src)
                    symm__c_stw(dst + b, w, nb);
            }
        }
    } else {
        /* my part first: the others wait for what this PE forwards */
        symm__c_split(hi - lo, (uint32_t)m, (uint32_t)mine, &plo, &phi);
        for (k = plo + t; k < phi; k += nt) {
            uint64_t b = 8 * (lo + k);
            uint32_t nb = symm__c_word_nb(nbytes, lo + k);
            uint64_t w = symm__c_wait_pkt(ctx, symm__c_region(ws, e.par, slot, n, root) + (k - plo) * 16, e.flag);
            for (int i = 1; i < m; i++) {
                int q = (root + 1 + (mine + i) % m) % n;
                symm__c_st16_vol(symm__c_peer(ctx, symm__c_region(ws, e.par, slot, n, me) + (k - plo) * 16, q),
                                 symm__c_pkt(w, e.flag));
            }
            symm__c_stw(dst + b, w, nb);
        }
        for (int i = 1; i < m; i++) {
            j = (mine + i) % m;
            const char *reg = symm__c_region(ws, e.par, slot, n, (root + 1 + j) % n);
            symm__c_split(hi - lo, (uint32_t)m, (uint32_t)j, &plo, &phi);
            for (k = plo + t; k < phi; k += nt) {
                uint64_t b = 8 * (lo + k);
                uint32_t nb = symm__c_word_nb(nbytes, lo + k);
                symm__c_stw(dst + b, symm__c_wait_pkt(ctx, reg + (k - plo) * 16, e.flag), nb);
            }
        }
    }
    symm__block_sync();
    symm__c_epoch_end(ws, slot, e);
}

/*
 * Direct broadcast inside one slot: scatter, then all-gather, pipelined by
 * pieces, so the root sends about S (not (n - 1) S) and the non-roots share
 * the forwarding. The m = n - 1 non-roots are numbered
 * j = (pe - root - 1) mod n. The slot's share [lo, hi) is cut into at most
 * SYMM__C_BCAST_PIECES pieces of at least SYMM__C_BCAST_PIECE_MIN bytes,
 * and each piece into m parts (16-byte units). For every piece the root
 * stores part j into non-root j's dst only, then (after a block barrier)
 * releases flag[2][par][slot][piece] on every non-root and makes its own copy
 * of the piece (src to dst, unless in place) while the non-roots forward:
 * non-root j waits for the piece's flag and copies part j from its own dst
 * to the other m - 1 non-roots, while the root goes on with the next piece.
 * Every byte of every dst is written once, by one PE, so the result is that
 * of a plain copy. The caller's end handshake covers the forwarded stores;
 * its start handshake made every dst free. With n = 2 the one non-root gets
 * everything from the root and no flag is used.
 *
 * Flag words: kind 2 of a slot has SYMM_COLL_MAX_PES words per parity,
 * indexed by piece (written only by the root of the call, with the call's
 * flag value, which no earlier call of the slot used). The number of pieces
 * depends only on nbytes, n and the slot, so it is the same on every PE.
 *
 * 16 pieces of at least 16 KiB measured best on 4x H200: 8 tie, 4, 32 and
 * 64 lose (64 MiB: 244, 236, 239 against 217 us), each piece's release
 * costing more than the shorter pipeline ends save; and the root's own copy
 * is not the limit (in place, where it makes none, is no faster), so having
 * the non-roots fill its dst instead lost out of place (256 MiB 926 against
 * 867 us): bench/results/2026-11-21-h200-4gpu-coll-s6-bcast-pieces.md and
 * -s6-bcast.md.
 */
#ifndef SYMM__C_BCAST_PIECES
#  define SYMM__C_BCAST_PIECES 16u
#endif
#ifndef SYMM__C_BCAST_PIECE_MIN
#  define SYMM__C_BCAST_PIECE_MIN 16384u
#endif
#if SYMM__C_BCAST_PIECES < 1 || SYMM__C_BCAST_PIECES > SYMM_COLL_MAX_PES
#  error "SYMM__C_BCAST_PIECES must be 1..SYMM_COLL_MAX_PES (one kind-2 flag word per piece)"
#endif
#define SYMM__C_KIND_PIECE 2u

/* Part j of m of the 16-byte units of [plo, phi) (plo a multiple of 16). */
SYMM__DEVICE_INTERNAL void symm__c_part(uint64_t plo, uint64_t phi, int m, int j, uint64_t *clo, uint64_t *chi) {
    uint64_t a, b;
    symm__c_split((phi - plo + 15) / 16, (uint32_t)m, (uint32_t)j, &a, &b);
    *clo = plo + 16 * a;
    *chi = plo + 16 * b < phi ? plo + 16 * b : phi;
}

SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_bcast_pieces(
    const symm_ctx_t *ctx, const symm__coll_ws_t *ws, const symm__c_xs_t *x, char *dst, const char *src,
    uint64_t lo, uint64_t hi, int root, symm__c_ep_t e, uint32_t slot) {
    int me = ctx->my_pe, n = ctx->n_pes, m = n - 1;
    int mine = (me - root - 1 + n) % n; /* this non-root's part (unused on the root) */
    uint32_t t = symm__block_tid(), nt = symm__block_nthreads();
    uint64_t len = hi > lo ? hi - lo : 0, clo, chi;
    uint64_t per = ((len + SYMM__C_BCAST_PIECES - 1) / SYMM__C_BCAST_PIECES + 15) & ~(uint64_t)15;
    uint32_t np, k;
    if (per < SYMM__C_BCAST_PIECE_MIN)
        per = SYMM__C_BCAST_PIECE_MIN;
    np = (uint32_t)((len + per - 1) / per); /* <= SYMM__C_BCAST_PIECES */
    for (k = 0; k < np; k++) {
        uint64_t plo = lo + (uint64_t)k * per, phi = hi - plo > per ? plo + per : hi;
        if (me == root) {
            /* parts in a different order per slot and piece: the root's
             * blocks write to all non-roots at once */
            for (int i = 0; i < m; i++) {
                int j = (int)(((uint32_t)i + slot + k) % (uint32_t)m);
                symm__c_part(plo, phi, m, j, &clo, &chi);
                if (chi > clo)
                    symm__copy(symm__c_xaddr(x, dst, (root + 1 + j) % n, 1) + clo, src + clo, chi - clo, t,
                               nt, 1);
            }
            if (m > 1) {
                symm__block_sync(); /* the release below covers every thread's stores */
                for (int q = (int)t; q < n; q += (int)nt)
                    if (q != me)
                        symm__c_st4_release(
                            symm__c_peer(ctx, symm__c_flag(ws, SYMM__C_KIND_PIECE, e.par, slot, (int)k), q),
                            e.flag);
            }
            if (dst != src)
                symm__copy(dst + plo, src + plo, phi - plo, t, nt, 0);
        } else if (m > 1) {
            if (t == 0)
                symm__c_wait_flag(ctx, symm__c_flag(ws, SYMM__C_KIND_PIECE, e.par, slot, (int)k), e.flag);
            symm__block_sync();
            symm__c_part(plo, phi, m, mine, &clo, &chi);
            if (chi > clo)
                for (int i = 1; i < m; i++) {
                    int j = (mine + 1 + (int)(((uint32_t)i - 1u + slot + k) % (uint32_t)(m - 1))) % m;
                    symm__copy(symm__c_xaddr(x, dst, (root + 1 + j) % n, 1) + clo, dst + clo, chi - clo, t, nt,
                               1);
                }
        }
    }
}

/*
 * Direct movement into the peers' dst: start handshake, this PE copies its
 * slot's share of src + piece * p to PE p's dst + out_off for every p (skipping
 * the copy onto itself in place), end handshake. root >= 0 (broadcast,
 * out_off 0): symm__c_bcast_pieces.
 */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_move_direct(
    const symm_ctx_t *ctx, const symm__coll_ws_t *ws, char *dst, const char *src, uint64_t nbytes,
    uint64_t piece, uint64_t out_off, int root, uint32_t slot, uint32_t nslots) {
    int me = ctx->my_pe, n = ctx->n_pes;
    uint32_t t = symm__block_tid(), nt = symm__block_nthreads();
    uint64_t lo, hi;
    symm__c_ep_t e = symm__c_epoch_begin(ws, slot);
    symm__c_xs_t x = symm__c_handshake_pub(ctx, ws, e, slot, src, dst, 0, 0, SYMM__C_PEERS_DST);
    /* cut at 16-byte boundaries so every part keeps the buffers' alignment */
    symm__c_split((nbytes + 15) / 16, nslots, slot, &lo, &hi);
    lo *= 16;
    hi = hi * 16 > nbytes ? nbytes : hi * 16;
    if (root >= 0) {
        symm__c_bcast_pieces(ctx, ws, &x, dst, src, lo, hi, root, e, slot);
    } else if (hi > lo) {
        for (int i = 0; i < n; i++) {
            int p = symm__c_step_pe(me, i, slot, n);
            const char *s = src + (uint64_t)p * piece + lo;
            char *d = symm__c_xaddr(&x, dst, p, 1) + out_off + lo;
            if (d != s)
                symm__copy(d, s, hi - lo, t, nt, p != me);
        }
    }
    symm__c_handshake(ctx, ws, 1, e, slot);
    symm__c_epoch_end(ws, slot, e);
}

/*
 * Variable all-to-all, direct: every PE publishes, per peer, where (rdispl)
 * and how much (rcount) that peer may write into its dst; each PE then copies
 * its share of src[sdispl[p] .. + scount[p]) to p's dst + p's rdispl[me]. A
 * count that differs from what p expects stops the kernel with a message
 * before anything is written to p.
 */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_a2av_direct(
    const symm_ctx_t *ctx, const symm__coll_ws_t *ws, char *dst, const char *src,
    const uint64_t *scount, const uint64_t *sdispl, const uint64_t *rcount, const uint64_t *rdispl,
    uint32_t esz, uint32_t slot, uint32_t nslots) {
    int me = ctx->my_pe, n = ctx->n_pes;
    uint32_t t = symm__block_tid(), nt = symm__block_nthreads();
    symm__c_ep_t e = symm__c_epoch_begin(ws, slot);
    symm__c_xs_t x = symm__c_handshake_pub(ctx, ws, e, slot, src, dst, rdispl, rcount, SYMM__C_PEERS_DST);
    for (int i = 0; i < n; i++) {
        int p = symm__c_step_pe(me, i, slot, n);
        uint64_t nbytes = scount[p] * esz, lo, hi, off, want;
        if (p == me) {
            off = rdispl[me] * esz;
            want = rcount[me] * esz;
        } else {
            off = symm__c_ld8_vol(x.aux + 4 * p + 2) * esz;
            want = symm__c_ld8_vol(x.aux + 4 * p + 3) * esz;
        }
        if (want != nbytes) {
            if (t == 0)
                symm__c_fail_a2av(ctx->world_pe, p, (unsigned long long)scount[p],
                                  (unsigned long long)(want / (esz ? esz : 1)));
            symm__trap();
        }
        symm__c_split((nbytes + 15) / 16, nslots, slot, &lo, &hi);
        lo *= 16;
        hi = hi * 16 > nbytes ? nbytes : hi * 16;
        if (hi > lo) {
            const char *s = src + sdispl[p] * esz + lo;
            char *d = symm__c_xaddr(&x, dst, p, 1) + off + lo;
            if (d != s)
                symm__copy(d, s, hi - lo, t, nt, p != me);
        }
    }
    symm__c_handshake(ctx, ws, 1, e, slot);
    symm__c_epoch_end(ws, slot, e);
}

/* Barrier across the PEs for this slot's blocks (no data). */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_barrier(const symm_ctx_t *ctx, const symm__coll_ws_t *ws,
                                                            uint32_t slot) {
    symm__c_ep_t e = symm__c_epoch_begin(ws, slot);
    symm__c_handshake(ctx, ws, 0, e, slot);
    symm__c_epoch_end(ws, slot, e);
}

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

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#  define SYMM__C_MM_LDRED(OPTY, v, a)                                                      \
    asm volatile("multimem.ld_reduce.relaxed.sys.global." OPTY " {%0, %1, %2, %3}, [%4];"  \
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(a) : "memory")
#  define SYMM__C_MM_ST(TY, v, a)                                                           \
    asm volatile("multimem.st.relaxed.sys.global." TY " [%0], {%1, %2, %3, %4};"          \
                 ::"l"(a), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory")
#endif

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

#define SYMM__C_CASE_RS(S)                                                                  \
    case SYMM__C_RED_##S: symm__c_rs_direct_##S(ctx, ws, dst, src, nbytes, piece, op, slot, nslots); break;
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_rs_direct(
    const symm_ctx_t *ctx, const symm__coll_ws_t *ws, char *dst, const char *src, uint64_t nbytes,
    uint64_t piece, int kind, int op, uint32_t slot, uint32_t nslots) {
    switch (kind) { SYMM__C_FOR_EACH_RED(SYMM__C_CASE_RS) default: break; }
}
#undef SYMM__C_CASE_RS

#endif /* SYMM_DEVICE_COLL_IMPL_H */
