/*
 * device/impl_pkt.h - packet puts: the payload and its flag travel in the
 * same 16-byte stores ({4 data bytes, flag, 4 data bytes, flag}), so the
 * receiver sees both in one NVLink trip, with no fence on the sender.
 *
 * Why a separate call: symm_put_signal must make the data visible before a
 * signal word that may lie anywhere, and a store to one address can overtake
 * a store to another on its way to the peer (NVLink spreads them over its
 * paths by address), so the signal waits behind a release, which waits for
 * the data's acknowledgement: about a round trip more than a bare flag
 * (docs/tuning.md, "put_signal"). Here the reader checks the flag inside
 * each packet, so nothing has to wait; the price is a buffer of packets
 * (twice the payload) that only symm_pkt_wait reads.
 */
#ifndef SYMM_DEVICE_IMPL_PKT_H
#define SYMM_DEVICE_IMPL_PKT_H

#define SYMM__MSG_PKT "symm: PE %d: %s: %s (PE %d, flag %u)\n"
SYMM__NOINLINE void symm__pkt_fail(int pe, const char *call, const char *why, int to, uint32_t flag) {
#if defined(__CUDACC__)
    printf(SYMM__MSG_PKT, pe, call, why, to, flag);
#else
    struct { int pe; const char *call; const char *why; int to; uint32_t flag; } a = { pe, call, why, to, flag };
    symm__vprintf(SYMM__MSG_PKT, &a);
#endif
    symm__trap();
}

/* `nb` (1..8) bytes at p as a little-endian word, zero-extended; any
 * alignment and any memory (plain C: generic addresses, so a source in
 * local or shared memory works). Out of line, as is the store below: a
 * message's instructions are fetched on its critical path, and eight inlined
 * byte loops make a batch's code several times larger. */
SYMM__NOINLINE uint64_t symm__pkt_ldw_any(const char *p, uint32_t nb) {
    uint64_t w = 0;
    for (uint32_t i = 0; i < nb; i++)
        w |= (uint64_t)(unsigned char)p[i] << (8 * i);
    return w;
}

SYMM__NOINLINE void symm__pkt_stw_any(char *p, uint64_t w, uint32_t nb) {
    for (uint32_t i = 0; i < nb; i++)
        p[i] = (char)(unsigned char)(w >> (8 * i));
}

SYMM__DEVICE_INTERNAL uint64_t symm__pkt_ldw(const char *p, uint32_t nb) {
    if (nb == 8 && ((uintptr_t)p & 7u) == 0)
        return *(const uint64_t *)p;
    return symm__pkt_ldw_any(p, nb);
}

SYMM__DEVICE_INTERNAL void symm__pkt_stw(char *p, uint64_t w, uint32_t nb) {
    if (nb == 8 && ((uintptr_t)p & 7u) == 0)
        *(uint64_t *)p = w;
    else
        symm__pkt_stw_any(p, w, nb);
}

/* The poll's slow side, out of line: the deadline and abort checks, named
 * for the batch's first packet still missing (bit i of `pending`: packet
 * kb + i * nlanes). */
SYMM__NOINLINE uint64_t symm__pkt_wait_late(const symm_ctx_t *ctx, const char *pkt, size_t kb, uint32_t nlanes,
                                            uint32_t pending, uint32_t flag, uint64_t t0) {
    uint32_t i = 0;
    const char *p;
    symm__v4_t v;
    while (i < 31u && !(pending & (1u << i)))
        i++;
    p = pkt + 16 * (kb + (size_t)i * nlanes);
    v = symm__c_ld16_vol(p);
    return symm__wait_check(ctx, p, SYMM_CMP_EQ, flag, v.y == flag ? v.w : v.y, t0);
}

/* The packet of word w: {low half, flag, high half, flag}. */
SYMM__DEVICE_INTERNAL symm__v4_t symm__pkt_of(uint64_t w, uint32_t flag) {
    symm__v4_t v;
    v.x = (uint32_t)w;
    v.y = flag;
    v.z = (uint32_t)(w >> 32);
    v.w = flag;
    return v;
}

/* A lane handles its packets in batches of 8 (kb + i * nlanes, i = 0..7),
 * named one by one so that they stay in registers. */
#define SYMM__PKT_EACH(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define SYMM__PKT_BATCH 8u
#define SYMM__PKT_NB(k) (nbytes - 8 * (k) < 8 ? (uint32_t)(nbytes - 8 * (k)) : 8u)

/* Word k (8 bytes, the last may be short) of nbytes goes to packet k. A
 * lane loads its batch of words before it stores any packet: src may alias
 * the packets, so a load after a store could not start before it, and a
 * run of loads each behind a store costs a memory latency apiece. */
SYMM__DEVICE_INTERNAL void symm__put_pkt(const symm_ctx_t *ctx, void *pkt, const void *src, size_t nbytes,
                                         uint32_t flag, int pe, uint32_t lane, uint32_t nlanes, const char *call) {
    char *q = (char *)symm__addr(ctx, pkt, pe);
    size_t words = (nbytes + 7) / 8;
    if (lane == 0 && (flag == 0 || q == NULL || ((uintptr_t)pkt & 15u) != 0))
        symm__pkt_fail(ctx->world_pe, call,
                       flag == 0 ? "flag 0 (the value of a cleared buffer) cannot mark a packet"
                       : q == NULL ? "the PE is outside the load/store window (packets need direct stores)"
                                   : "the packet buffer is not 16-byte aligned",
                       pe, flag);
    const int al = (((uintptr_t)src | nbytes) & 7u) == 0; /* every word a whole aligned one */
    if (words <= nlanes) { /* a packet per lane at most: no batch to gather */
        if (lane < words) {
            uint64_t w = symm__pkt_ldw((const char *)src + 8 * lane, SYMM__PKT_NB(lane));
            symm__c_st16_vol(q + 16 * lane, symm__pkt_of(w, flag));
        }
        return;
    }
    if (nlanes == 1 && words <= SYMM__PKT_BATCH && al) { /* one thread, one batch: the shortest code */
        uint64_t w[SYMM__PKT_BATCH];
#pragma unroll
        for (uint32_t j = 0; j < SYMM__PKT_BATCH; j++)
            w[j] = j < words ? ((const uint64_t *)src)[j] : 0;
#pragma unroll
        for (uint32_t j = 0; j < SYMM__PKT_BATCH; j++)
            if (j < words)
                symm__c_st16_vol(q + 16 * j, symm__pkt_of(w[j], flag));
        return;
    }
    for (size_t kb = lane; kb < words; kb += (size_t)nlanes * SYMM__PKT_BATCH) {
#define SYMM__PKT_LOAD(i)                                                                          \
        size_t k##i = kb + (size_t)(i) * nlanes;                                                   \
        uint64_t w##i = k##i >= words ? 0                                                          \
                      : al ? ((const uint64_t *)src)[k##i]                                         \
                           : symm__pkt_ldw_any((const char *)src + 8 * k##i, SYMM__PKT_NB(k##i));
#define SYMM__PKT_STORE(i)                                                                         \
        if (k##i < words)                                                                          \
            symm__c_st16_vol(q + 16 * k##i, symm__pkt_of(w##i, flag));
        SYMM__PKT_EACH(SYMM__PKT_LOAD)
        SYMM__PKT_EACH(SYMM__PKT_STORE)
#undef SYMM__PKT_LOAD
#undef SYMM__PKT_STORE
    }
}

/* Poll the local packets until each carries `flag` in both halves, storing
 * each payload word into dest. A lane loads its whole batch before it looks
 * at any packet: one memory latency per poll of the batch, not per packet. */
SYMM__DEVICE_INTERNAL void symm__pkt_wait(const symm_ctx_t *ctx, const void *pkt, void *dest, size_t nbytes,
                                          uint32_t flag, uint32_t lane, uint32_t nlanes, const char *call) {
    size_t words = (nbytes + 7) / 8;
    const int al = (((uintptr_t)dest | nbytes) & 7u) == 0; /* every word a whole aligned one */
    if (lane == 0 && (flag == 0 || ((uintptr_t)pkt & 15u) != 0))
        symm__pkt_fail(ctx->world_pe, call,
                       flag == 0 ? "flag 0 (the value of a cleared buffer) cannot mark a packet"
                                 : "the packet buffer is not 16-byte aligned",
                       ctx->my_pe, flag);
    if (words <= nlanes) { /* a packet per lane at most */
        if (lane < words) {
            const char *p = (const char *)pkt + 16 * lane;
            uint32_t polls = 0;
            uint64_t t0 = 0;
            symm__v4_t v;
            for (;;) {
                v = symm__c_ld16_vol(p);
                if (v.y == flag && v.w == flag)
                    break;
                if (++polls % SYMM__WAIT_CHECK_EVERY == 0)
                    t0 = symm__wait_check(ctx, p, SYMM_CMP_EQ, flag, v.y == flag ? v.w : v.y, t0);
            }
            symm__pkt_stw((char *)dest + 8 * lane, ((uint64_t)v.z << 32) | v.x, SYMM__PKT_NB(lane));
        }
        return;
    }
    if (nlanes == 1 && words <= SYMM__PKT_BATCH && al) { /* one thread, one batch: the shortest code */
        uint32_t pending = (1u << words) - 1u, polls = 0;
        uint64_t t0 = 0;
        symm__v4_t v[SYMM__PKT_BATCH];
        for (;;) {
#pragma unroll
            for (uint32_t j = 0; j < SYMM__PKT_BATCH; j++)
                if (pending & (1u << j))
                    v[j] = symm__c_ld16_vol((const char *)pkt + 16 * j);
#pragma unroll
            for (uint32_t j = 0; j < SYMM__PKT_BATCH; j++)
                if ((pending & (1u << j)) && v[j].y == flag && v[j].w == flag)
                    pending &= ~(1u << j);
            if (!pending)
                break;
            if (++polls % SYMM__WAIT_CHECK_EVERY == 0)
                t0 = symm__pkt_wait_late(ctx, (const char *)pkt, 0, 1, pending, flag, t0);
        }
#pragma unroll
        for (uint32_t j = 0; j < SYMM__PKT_BATCH; j++)
            if (j < words)
                ((uint64_t *)dest)[j] = ((uint64_t)v[j].z << 32) | v[j].x;
        return;
    }
    for (size_t kb = lane; kb < words; kb += (size_t)nlanes * SYMM__PKT_BATCH) {
        uint32_t pending = 0, polls = 0;
        uint64_t t0 = 0;
#define SYMM__PKT_INIT(i)                                                                          \
        size_t k##i = kb + (size_t)(i) * nlanes;                                                   \
        symm__v4_t v##i = {0, 0, 0, 0};                                                            \
        pending |= (uint32_t)(k##i < words) << (i);
#define SYMM__PKT_POLL(i)                                                                          \
        if (pending & (1u << (i)))                                                                 \
            v##i = symm__c_ld16_vol((const char *)pkt + 16 * k##i);
#define SYMM__PKT_CHECK(i)                                                                         \
        if ((pending & (1u << (i))) && v##i.y == flag && v##i.w == flag)                           \
            pending &= ~(1u << (i));
#define SYMM__PKT_OUT(i)                                                                           \
        if (k##i < words) {                                                                        \
            uint64_t w##i = ((uint64_t)v##i.z << 32) | v##i.x;                                     \
            if (al)                                                                                \
                ((uint64_t *)dest)[k##i] = w##i;                                                   \
            else                                                                                   \
                symm__pkt_stw_any((char *)dest + 8 * k##i, w##i, SYMM__PKT_NB(k##i));              \
        }
        SYMM__PKT_EACH(SYMM__PKT_INIT)
        for (;;) {
            SYMM__PKT_EACH(SYMM__PKT_POLL)
            SYMM__PKT_EACH(SYMM__PKT_CHECK)
            if (!pending)
                break;
            if (++polls % SYMM__WAIT_CHECK_EVERY == 0)
                t0 = symm__pkt_wait_late(ctx, (const char *)pkt, kb, nlanes, pending, flag, t0);
        }
        SYMM__PKT_EACH(SYMM__PKT_OUT)
#undef SYMM__PKT_INIT
#undef SYMM__PKT_POLL
#undef SYMM__PKT_CHECK
#undef SYMM__PKT_OUT
    }
}
#undef SYMM__PKT_EACH
#undef SYMM__PKT_BATCH
#undef SYMM__PKT_NB

/* Traced like the puts and waits (docs/trace.md): a put event with the
 * packet buffer, the payload's bytes and the flag; a wait on the packet
 * buffer for the flag, whose PE the dump infers from the put_pkt that wrote
 * it. The group forms record after their closing barrier. */
SYMM_DEVICE_FN void symm_put_pkt(const symm_ctx_t *ctx, void *pkt, const void *src, size_t nbytes, uint32_t flag,
                                 int pe) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_THREAD);
    symm__put_pkt(ctx, pkt, src, nbytes, flag, pe, 0, 1, "symm_put_pkt");
    SYMM__TRACE_PUT_PKT(ctx, t_, SYMM__G_THREAD, pe, pkt, nbytes, flag);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_put_pkt_warp(const symm_ctx_t *ctx, void *pkt, const void *src,
                                                       size_t nbytes, uint32_t flag, int pe) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_WARP);
    symm__put_pkt(ctx, pkt, src, nbytes, flag, pe, symm__lane(), 32, "symm_put_pkt_warp");
    symm__warp_sync();
    SYMM__TRACE_PUT_PKT(ctx, t_, SYMM__G_WARP, pe, pkt, nbytes, flag);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_put_pkt_block(const symm_ctx_t *ctx, void *pkt, const void *src,
                                                        size_t nbytes, uint32_t flag, int pe) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_BLOCK);
    symm__put_pkt(ctx, pkt, src, nbytes, flag, pe, symm__block_tid(), symm__block_nthreads(), "symm_put_pkt_block");
    symm__block_sync();
    SYMM__TRACE_PUT_PKT(ctx, t_, SYMM__G_BLOCK, pe, pkt, nbytes, flag);
}

SYMM_DEVICE_FN void symm_pkt_wait(const symm_ctx_t *ctx, const void *pkt, void *dest, size_t nbytes, uint32_t flag) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_THREAD);
    symm__pkt_wait(ctx, pkt, dest, nbytes, flag, 0, 1, "symm_pkt_wait");
    SYMM__TRACE_WAIT(ctx, t_, SYMM_TRACE_WAIT_PKT, pkt, -1, SYMM_CMP_EQ, flag, flag);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_pkt_wait_warp(const symm_ctx_t *ctx, const void *pkt, void *dest,
                                                        size_t nbytes, uint32_t flag) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_WARP);
    symm__pkt_wait(ctx, pkt, dest, nbytes, flag, symm__lane(), 32, "symm_pkt_wait_warp");
    symm__warp_sync();
    SYMM__TRACE_WAIT_G(ctx, t_, SYMM__G_WARP, SYMM_TRACE_WAIT_PKT, pkt, -1, SYMM_CMP_EQ, flag, flag);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_pkt_wait_block(const symm_ctx_t *ctx, const void *pkt, void *dest,
                                                         size_t nbytes, uint32_t flag) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_BLOCK);
    symm__pkt_wait(ctx, pkt, dest, nbytes, flag, symm__block_tid(), symm__block_nthreads(), "symm_pkt_wait_block");
    symm__block_sync();
    SYMM__TRACE_WAIT_G(ctx, t_, SYMM__G_BLOCK, SYMM_TRACE_WAIT_PKT, pkt, -1, SYMM_CMP_EQ, flag, flag);
}

/* Register forms: one packet per thread (lane), the payload a value in a
 * register at both ends, so no memory load sits on the sender's critical
 * path and no store on the receiver's. */
SYMM__DEVICE_INTERNAL void symm__put_pkt_v64(const symm_ctx_t *ctx, void *pkt, uint64_t value, uint32_t flag, int pe,
                                             uint32_t k, const char *call) {
    char *q = (char *)symm__addr(ctx, pkt, pe);
    if (flag == 0 || q == NULL || ((uintptr_t)pkt & 15u) != 0)
        symm__pkt_fail(ctx->world_pe, call,
                       flag == 0 ? "flag 0 (the value of a cleared buffer) cannot mark a packet"
                       : q == NULL ? "the PE is outside the load/store window (packets need direct stores)"
                                   : "the packet buffer is not 16-byte aligned",
                       pe, flag);
    symm__c_st16_vol(q + 16 * k, symm__pkt_of(value, flag));
}

/* The poll reads only packet k; the deadline and abort checks run out of
 * line every SYMM__WAIT_CHECK_EVERY polls. */
SYMM__DEVICE_INTERNAL uint64_t symm__pkt_wait_v64(const symm_ctx_t *ctx, const void *pkt, uint32_t flag, uint32_t k,
                                                  const char *call) {
    const char *p = (const char *)pkt + 16 * k;
    uint32_t polls = 0;
    uint64_t t0 = 0;
    symm__v4_t v;
    if (flag == 0 || ((uintptr_t)pkt & 15u) != 0)
        symm__pkt_fail(ctx->world_pe, call,
                       flag == 0 ? "flag 0 (the value of a cleared buffer) cannot mark a packet"
                                 : "the packet buffer is not 16-byte aligned",
                       ctx->my_pe, flag);
    for (;;) {
        v = symm__c_ld16_vol(p);
        if (v.y == flag && v.w == flag)
            break;
        if (++polls % SYMM__WAIT_CHECK_EVERY == 0)
            t0 = symm__pkt_wait_late(ctx, p, 0, 1, 1u, flag, t0);
    }
    return ((uint64_t)v.z << 32) | v.x;
}

SYMM__DEVICE_INTERNAL void symm__pkt_nwords_fail(const symm_ctx_t *ctx, const char *call, uint32_t nwords,
                                                 uint32_t flag) {
    if (symm__lane() == 0 && (nwords == 0 || nwords > 32))
        symm__pkt_fail(ctx->world_pe, call, "nwords must be 1..32 (one packet per lane)", ctx->my_pe, flag);
}

SYMM_DEVICE_FN void symm_put_pkt_v64(const symm_ctx_t *ctx, void *pkt, uint64_t value, uint32_t flag, int pe) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_THREAD);
    symm__put_pkt_v64(ctx, pkt, value, flag, pe, 0, "symm_put_pkt_v64");
    SYMM__TRACE_PUT_PKT(ctx, t_, SYMM__G_THREAD, pe, pkt, 8, flag);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_put_pkt_v64_warp(const symm_ctx_t *ctx, void *pkt, uint64_t value,
                                                           uint32_t nwords, uint32_t flag, int pe) {
    uint32_t lane = symm__lane();
    SYMM__TRACE_START(ctx, t_, SYMM__G_WARP);
    symm__pkt_nwords_fail(ctx, "symm_put_pkt_v64_warp", nwords, flag);
    if (lane < nwords)
        symm__put_pkt_v64(ctx, pkt, value, flag, pe, lane, "symm_put_pkt_v64_warp");
    symm__warp_sync();
    SYMM__TRACE_PUT_PKT(ctx, t_, SYMM__G_WARP, pe, pkt, 8 * (size_t)nwords, flag);
}

SYMM_DEVICE_FN uint64_t symm_pkt_wait_v64(const symm_ctx_t *ctx, const void *pkt, uint32_t flag) {
    uint64_t v;
    SYMM__TRACE_START(ctx, t_, SYMM__G_THREAD);
    v = symm__pkt_wait_v64(ctx, pkt, flag, 0, "symm_pkt_wait_v64");
    SYMM__TRACE_WAIT(ctx, t_, SYMM_TRACE_WAIT_PKT, pkt, -1, SYMM_CMP_EQ, flag, flag);
    return v;
}

SYMM_DEVICE_FN SYMM__CONVERGENT uint64_t symm_pkt_wait_v64_warp(const symm_ctx_t *ctx, const void *pkt,
                                                               uint32_t nwords, uint32_t flag) {
    uint32_t lane = symm__lane();
    uint64_t v = 0;
    SYMM__TRACE_START(ctx, t_, SYMM__G_WARP);
    symm__pkt_nwords_fail(ctx, "symm_pkt_wait_v64_warp", nwords, flag);
    if (lane < nwords)
        v = symm__pkt_wait_v64(ctx, pkt, flag, lane, "symm_pkt_wait_v64_warp");
    symm__warp_sync();
    SYMM__TRACE_WAIT_G(ctx, t_, SYMM__G_WARP, SYMM_TRACE_WAIT_PKT, pkt, -1, SYMM_CMP_EQ, flag, flag);
    return v;
}

#endif /* SYMM_DEVICE_IMPL_PKT_H */
