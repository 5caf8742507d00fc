/*
 * device/coll_sync.h - synchronisation: the workspace's words, call
 * counters (epochs), flags and packets' flag words, the handshakes (with
 * the buffer offsets the direct algorithms publish in them), the
 * collectives' barrier, and the messages that stop a kernel.
 * Part of the collectives' device code: included by coll_impl.h, in
 * order, after coll_layout.h and coll_reduce.h; never include it alone.
 */
#ifndef SYMM_DEVICE_COLL_SYNC_H
#define SYMM_DEVICE_COLL_SYNC_H

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
 * second half of the data area, never under a packet region (coll_layout.h). */
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

/* ---- call signatures ---------------------------------------------------------- */

/*
 * What a call is, so that PEs whose calls differ (another count, type, op,
 * root or collective) stop with a message instead of mixing the data of two
 * calls. Each algorithm carries it in what it already sends: the direct ones
 * in aux word 2 of the start handshake, ONESHOT in the last 16 bytes of its
 * region, packets in the second flag word of every packet (flag ^
 * symm__c_sig32), the push pipeline next to its counters; the reader
 * compares it with its own. Bits: [0, 40) bytes per PE, [40, 48) root + 1,
 * [48, 52) reduction kind (15: none), [52, 56) op, [56, 60) the call.
 */
#define SYMM__C_CALL_AR    1
#define SYMM__C_CALL_RS    2
#define SYMM__C_CALL_AG    3
#define SYMM__C_CALL_A2A   4
#define SYMM__C_CALL_BCAST 5
SYMM__DEVICE_INTERNAL uint64_t symm__c_sig(int call, uint64_t nbytes, int kind, int op, int root) {
    return (nbytes & 0xffffffffffull) | ((uint64_t)((uint32_t)(root + 1) & 0xffu) << 40) |
           ((uint64_t)((uint32_t)kind & 15u) << 48) | ((uint64_t)((uint32_t)op & 15u) << 52) |
           ((uint64_t)call << 56);
}

/* The packets' 32 bits of it: bytes modulo 4 MiB (packet calls are smaller),
 * kind, op and call (not the root: a root that differs leaves readers
 * waiting on another PE's region), through an invertible mix, so that a
 * stale second half of an earlier call of another signature is unlikely to
 * pass for this call's (the first half's flag alone proves a packet new). */
SYMM__DEVICE_INTERNAL uint32_t symm__c_sig32(uint64_t sig) {
    uint32_t x = (uint32_t)(sig & 0x3fffffu) | (uint32_t)((sig >> 48) & 15u) << 22 |
                 (uint32_t)((sig >> 52) & 7u) << 26 | (uint32_t)((sig >> 56) & 7u) << 29;
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    return x ^ (x >> 16);
}

SYMM__DEVICE_INTERNAL uint64_t symm__c_sig_of32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x43021123u;
    x ^= (x >> 15) ^ (x >> 30);
    x *= 0x1d69e2a5u;
    x ^= x >> 16;
    return (uint64_t)(x & 0x3fffffu) | (uint64_t)((x >> 22) & 15u) << 48 | (uint64_t)((x >> 26) & 7u) << 52 |
           (uint64_t)(x >> 29) << 56;
}

SYMM__DEVICE_INTERNAL const char *symm__c_call_name(uint64_t sig) {
    switch ((int)(sig >> 56)) {
    case SYMM__C_CALL_AR: return "all_reduce";
    case SYMM__C_CALL_RS: return "reduce_scatter";
    case SYMM__C_CALL_AG: return "all_gather";
    case SYMM__C_CALL_A2A: return "all_to_all";
    case SYMM__C_CALL_BCAST: return "broadcast";
    default: return "(unknown call)";
    }
}

#define SYMM__C_MSG_CALL                                                                          \
    "symm: PE %d: device collective: PE %d called %s with %llu bytes (kind %d, op %d, root %d), " \
    "this PE %s with %llu bytes (kind %d, op %d, root %d): every PE must make the same "          \
    "collective calls with the same arguments\n"
/* One line per PE (symm__report_claim), then trap. */
SYMM__NOINLINE void symm__c_fail_call(const symm_ctx_t *ctx, int peer, uint64_t theirs, uint64_t mine) {
    uint32_t others = symm__report_claim(ctx);
    struct {
        int pe, peer;
        const char *a;
        unsigned long long ab;
        int ak, ao, ar;
        const char *b;
        unsigned long long bb;
        int bk, bo, br;
    } m = { ctx->world_pe, peer,
            symm__c_call_name(theirs), (unsigned long long)(theirs & 0xffffffffffull),
            ((theirs >> 48) & 15u) == 15u ? -1 : (int)((theirs >> 48) & 15u), (int)((theirs >> 52) & 15u),
            (int)((theirs >> 40) & 0xffu) - 1,
            symm__c_call_name(mine), (unsigned long long)(mine & 0xffffffffffull),
            ((mine >> 48) & 15u) == 15u ? -1 : (int)((mine >> 48) & 15u), (int)((mine >> 52) & 15u),
            (int)((mine >> 40) & 0xffu) - 1 };
    if (others != 0xffffffffu) {
#if defined(__CUDACC__)
        printf(SYMM__C_MSG_CALL, m.pe, m.peer, m.a, m.ab, m.ak, m.ao, m.ar, m.b, m.bb, m.bk, m.bo, m.br);
#else
        symm__vprintf(SYMM__C_MSG_CALL, &m);
#endif
    }
    symm__trap();
}

/* A packet whose first half is this call's but whose second half carries
 * another signature, at two checks in a row (not a store still landing). */
SYMM__NOINLINE void symm__c_fail_pkt(const symm_ctx_t *ctx, int src, uint32_t flag, uint32_t fsig, uint32_t seen) {
    uint64_t theirs = symm__c_sig_of32(seen ^ flag), mine = symm__c_sig_of32(fsig ^ flag);
    symm__c_fail_call(ctx, src, theirs, mine);
}

/* Wait until the local flag word equals `want` (acquire), which PE `from`
 * stores (-1: not known here). Deadline and abort flag as every symm wait
 * (impl_wait.h). */
SYMM__DEVICE_INTERNAL void symm__c_wait_flag_from(const symm_ctx_t *ctx, const uint32_t *p, uint32_t want,
                                                  int from) {
    uint32_t polls = 0;
    uint64_t t0 = 0;
    SYMM__TRACE_START(ctx, t_, SYMM__G_THREAD);
    for (;;) {
        uint32_t v = symm__c_ld4_acquire(p);
        if (v == want)
            break;
        if (++polls % SYMM__WAIT_CHECK_EVERY == 0)
            t0 = symm__wait_check(ctx, p, SYMM_CMP_EQ, want, v, t0);
    }
    SYMM__TRACE_WAIT(ctx, t_, SYMM_TRACE_WAIT_COLL, p, from, SYMM_CMP_EQ, want, want);
    (void)from;
}

/* Wait until the local progress word *p (the chain's, coll_move.h: a call's
 * flag in the high half, a count in the low) holds `flag` and a count above
 * `done`, which PE `from` stores; return the count (acquire). Traced only
 * when the first poll missed (the waits that cost time). */
SYMM__DEVICE_INTERNAL uint32_t symm__c_wait_count_from(const symm_ctx_t *ctx, const uint64_t *p, uint32_t flag,
                                                      uint32_t done, int from) {
    uint32_t polls = 0;
    uint64_t t0 = 0, v, want = (uint64_t)flag << 32 | (uint64_t)(done + 1u);
    SYMM__TRACE_START(ctx, t_, SYMM__G_THREAD);
    for (;;) {
        v = symm__c_ld8_acquire(p);
        if ((uint32_t)(v >> 32) == flag && (uint32_t)v > done)
            break;
        if (++polls % SYMM__WAIT_CHECK_EVERY == 0)
            t0 = symm__wait_check(ctx, p, SYMM_CMP_GE, want, v, t0);
    }
    SYMM__TRACE_WAIT(ctx, polls ? t_ : 0, SYMM_TRACE_WAIT_COLL, p, from, SYMM_CMP_GE, want, v);
    (void)from;
    (void)want;
    return (uint32_t)v;
}


/* Poll PE src's packet until its first half carries `flag` and its second
 * `fsig` (flag ^ symm__c_sig32 of the call); return its 8 data bytes.
 * Traced as a wait on `reg` (src's region, so the lanes of a warp waiting
 * for one PE make one event) when the packet was not there at the first
 * poll: the waits that cost time, without an event per packet. */
SYMM__DEVICE_INTERNAL uint64_t symm__c_wait_pkt(const symm_ctx_t *ctx, const void *reg, const void *p, uint32_t flag,
                                               uint32_t fsig, int src) {
    uint32_t polls = 0, odd = fsig;
    uint64_t t0 = 0;
    SYMM__TRACE_START(ctx, t_, SYMM__G_THREAD);
    (void)reg;
    for (;;) {
        symm__v4_t v = symm__c_ld16_vol(p);
        if (v.y == flag && v.w == fsig) {
            SYMM__TRACE_WAIT(ctx, polls ? t_ : 0, SYMM_TRACE_WAIT_COLL_PKT, reg, src, SYMM_CMP_EQ, flag, flag);
            return ((uint64_t)v.z << 32) | v.x;
        }
        if (++polls % SYMM__WAIT_CHECK_EVERY == 0) {
            if (v.y == flag && v.w == odd)
                symm__c_fail_pkt(ctx, src, flag, fsig, v.w);
            odd = v.y == flag ? v.w : fsig;
            t0 = symm__wait_check(ctx, p, SYMM_CMP_EQ, flag, v.y == flag ? v.w : v.y, t0);
        }
    }
}

SYMM__DEVICE_INTERNAL symm__v4_t symm__c_pkt(uint64_t w, uint32_t flag, uint32_t fsig) {
    symm__v4_t v;
    v.x = (uint32_t)w;
    v.y = flag;
    v.z = (uint32_t)(w >> 32);
    v.w = fsig;
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
            symm__c_wait_flag_from(ctx, symm__c_flag(ws, kind, e.par, slot, p), e.flag, p);
    symm__block_sync();
}

/*
 * ONESHOT's handshake (kind 0): symm__c_handshake, with the call's signature
 * stored before each release into the last 16 bytes of this PE's plain-data
 * region on the peer (the data never reaches them: symm__c_fits), and each
 * peer's compared after its flag. The regions alternate by parity, so a
 * peer's next call cannot overwrite it before this PE has read it.
 */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_handshake_sig(const symm_ctx_t *ctx,
                                                                   const symm__coll_ws_t *ws, symm__c_ep_t e,
                                                                   uint32_t slot, uint64_t sig) {
    int me = ctx->my_pe, n = ctx->n_pes;
    int t = (int)symm__block_tid(), nt = (int)symm__block_nthreads();
    uint64_t tail = ws->region - 16u;
    int p;
    symm__block_sync();
    for (p = t; p < n; p += nt)
        if (p != me) {
            symm__c_st8(symm__c_peer(ctx, symm__c_region_raw(ws, e.par, slot, n, me) + tail, p), sig);
            symm__c_st4_release(symm__c_peer(ctx, symm__c_flag(ws, 0, e.par, slot, me), p), e.flag);
        }
    for (p = t; p < n; p += nt)
        if (p != me) {
            uint64_t theirs;
            symm__c_wait_flag_from(ctx, symm__c_flag(ws, 0, e.par, slot, p), e.flag, p);
            theirs = symm__c_ld8_vol(symm__c_region_raw(ws, e.par, slot, n, p) + tail);
            if (theirs != sig)
                symm__c_fail_call(ctx, p, theirs, sig);
        }
    symm__block_sync();
}

/*
 * The packet broadcasts' synchronisation, beside the data instead of before
 * it: the root sends at once, and every PE announces the call to every other
 * PE as it starts (kind-0 flag, release: it has left the regions of the call
 * two back) and waits for every PE's announcement before it leaves
 * (symm__c_await_all). So each call of a slot still waits for something
 * every peer sent in it (coll_layout.h), and a root may store into a
 * non-root's region of this parity at once: the end of the slot's previous
 * call told it that every peer had started that call. The block's last
 * threads post, so their release does not hold up the first words.
 */
SYMM__DEVICE_INTERNAL void symm__c_announce(const symm_ctx_t *ctx, const symm__coll_ws_t *ws, symm__c_ep_t e,
                                            uint32_t slot) {
    int me = ctx->my_pe, n = ctx->n_pes;
    int t = (int)symm__block_tid(), nt = (int)symm__block_nthreads();
    for (int p = nt - 1 - t; p < n; p += nt)
        if (p != me)
            symm__c_st4_release(symm__c_peer(ctx, symm__c_flag(ws, 0, e.par, slot, me), p), e.flag);
}

/* Wait for every peer's symm__c_announce of this call, then a block barrier. */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_await_all(const symm_ctx_t *ctx, const symm__coll_ws_t *ws,
                                                              symm__c_ep_t e, uint32_t slot) {
    int me = ctx->my_pe, n = ctx->n_pes;
    int t = (int)symm__block_tid(), nt = (int)symm__block_nthreads();
    for (int p = t; p < n; p += nt)
        if (p != me)
            symm__c_wait_flag_from(ctx, symm__c_flag(ws, 0, e.par, slot, p), e.flag, p);
    symm__block_sync();
}

/* The call a slot's counter already counts (a multi-kernel call whose first
 * kernel ran symm__c_epoch_begin and symm__c_epoch_end: src/coll/coll_k_ce.cu). */
SYMM__DEVICE_INTERNAL symm__c_ep_t symm__c_epoch_now(const symm__coll_ws_t *ws, uint32_t slot) {
    symm__c_ep_t e;
    e.count = symm__c_ld8_vol(symm__c_epoch_word(ws, slot));
    e.flag = (uint32_t)(e.count % 0xffffffffull) + 1u;
    e.par = (uint32_t)(e.count & 1u);
    return e;
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

/* ---- direct algorithms: addresses published in the handshake --------------------- */

/*
 * The direct algorithms load from and store to the peers' buffers. Before
 * its start flag each PE's block b writes, into every peer's aux[b][me], the
 * heap OFFSETS (address - ctx->heap_base) of its own src and dst (and, for
 * all_to_allv, where and how much that peer may write). An offset, not the
 * address: in PE p's process its src is p's own heap, while the same number
 * in this process is this PE's own heap; PE p's copy is reached here at
 * peer(heap_base + offset, p) (a raw address would name this PE's own
 * buffer here). The common case, every PE passing the same symmetric pointers, is
 * detected during the handshake (`sym`) and then uses plain arithmetic
 * (docs/design.md decision 2); otherwise (a PE that staged through scratch, or
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
 * (src, dst) and either xv[p], yv[p] (all_to_allv, which checks its counts
 * itself) or the call's signature `sig` (symm__c_sig)
 * into every peer's aux[me], release the flag, wait for every peer's flag,
 * and find out whether all addresses are the symmetric ones. `peers` says
 * which of src and dst the peers dereference: every PE checks them all
 * (its own and each peer's) after the flags, so all stop alike; a peer's
 * signature that differs from `sig` stops this PE (symm__c_fail_call).
 */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT symm__c_xs_t symm__c_handshake_pub(
    const symm_ctx_t *ctx, const symm__coll_ws_t *ws, symm__c_ep_t e, uint32_t slot, const void *src,
    const void *dst, const uint64_t *xv, const uint64_t *yv, uint64_t sig, int peers) {
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
        } else {
            symm__c_st8(a + 2, sig);
        }
        symm__c_st4_release(symm__c_peer(ctx, symm__c_flag(ws, 0, e.par, slot, me), p), e.flag);
    }
    for (p = t; p < n; p += nt) {
        if (p == me)
            continue;
        symm__c_wait_flag_from(ctx, symm__c_flag(ws, 0, e.par, slot, p), e.flag, p);
        {
            uint64_t ps = symm__c_ld8_vol(aux + 4 * p), pd = symm__c_ld8_vol(aux + 4 * p + 1);
            symm__c_check_heap(ctx, peers, p, ps, pd);
            if (!xv && symm__c_ld8_vol(aux + 4 * p + 2) != sig)
                symm__c_fail_call(ctx, p, symm__c_ld8_vol(aux + 4 * p + 2), sig);
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

/* Barrier across the PEs for this slot's blocks (no data). */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_barrier(const symm_ctx_t *ctx, const symm__coll_ws_t *ws,
                                                            uint32_t slot) {
    symm__c_ep_t e = symm__c_epoch_begin(ws, slot);
    symm__c_handshake(ctx, ws, 0, e, slot);
    symm__c_epoch_end(ws, slot, e);
}

#endif /* SYMM_DEVICE_COLL_SYNC_H */
