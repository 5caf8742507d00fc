/*
 * moe_k_ll.cu - the low-latency (pplx-layout) MoE kernels: one kernel per
 * dispatch and one per combine (or one per half when the flags split a call).
 * Nothing runs on the host between calls and no kernel waits for another
 * block of its own grid before it has done all of its sending, so a grid no
 * larger than the SMs the PE may fill (the handle's SM budget) cannot stall
 * a peer.
 *
 * Two forms of a row on the wire. Plain: the row's bytes, then a flag
 * released behind them (the release waits for the bytes' acknowledgements,
 * about a microsecond over NVLink, and the receiver reads the flag, then the
 * bytes). Packets: every 8 bytes of the row travel in a 16-byte packet with
 * the call's tag in each 8-byte half (single-copy atomic), so there is no
 * fence and the receiver polls the data itself, at twice the bytes. A PE
 * sends a call's rows as packets while they fit its packet slots (pcap
 * tokens; SYMM_MOE_PACKETS=auto sizes them for SYMM_MOE_PACKET_BYTES:
 * decode sizes, where latency is all) and says so in the mode bits of every
 * count it posts, so each receiver knows each source's form (PEs' token
 * counts differ, and so may their forms in one call).
 *
 * Dispatch, epoch e (dispatches so far, kept on the device; p = e & 1; the
 * tag is ll_tag(e), never 0, the value of memory no call has written). The
 * send half opens it: each block reads the last epoch with its first
 * indices and counts itself later (as its receive half's first waits run,
 * which hide the atomic); the block counted last stores e as it ends (every
 * block had read the old value before it was counted), so no block waits
 * for that count at its end.
 *   (Two kernels run this generic form: symm__k_ll_dispatch_big for calls
 *   of LL_POST_ROUTES routes and more, with the block-by-block lists, the
 *   entries released behind plain rows and the even row split below, and
 *   symm__k_ll_dispatch for smaller calls, without them. Each takes rows
 *   from sources that used the other: the counts say which form came.)
 *   send  Every block stages the top-k indices of this PE's tokens (t =
 *         dp_rank, dp_rank + dp, ... below the bound) in shared memory; the
 *         x and scales of its first batch of tokens are loaded with them,
 *         not after them.
 *         Expert lists: each route (t / dp, k), tagged, goes into the
 *         expert's PE at ll_list[p][me][l][j], j its place in token order, and
 *         every expert's count (e << 32 | mode | routes) to ll_cnt[p][me][l]:
 *         relaxed stores, no fence (the entries carry their own tag, and the
 *         receiver polls them). Tokens in one index chunk, at least
 *         LL_POST_ROUTES routes (ll_post_lists): j is the number of earlier
 *         tokens naming the expert, which any block reads off the staged
 *         indices, so block b stores its own tokens' routes and the counts of
 *         experts B - 1 - b, 2B - 1 - b, ... before its rows, a warp per
 *         query, with no block (or warp) waiting for another. Otherwise warp w
 *         of the grid owns experts w, w + warps, ... and scans the routes in
 *         token order (ballots, so every route gets the same slot whichever
 *         block looks), chunk by chunk.
 *         Token rows: block b owns tokens b, b + blocks, ...; it stores each
 *         token once into every PE that holds one of its experts (not once
 *         per expert): as packets into ll_pbuf[p][me][t / dp], or plainly
 *         into ll_dbuf[p][me][t / dp] with the row's flag (e) released
 *         behind it; with ll_post_lists, plain rows have no flag: their
 *         routes' entries are stored after the rows, released (the block's
 *         barrier and a release at system scope cover all its threads'
 *         stores), and the counts carry LL_CNT_EREL. Packet rows of fewer
 *         tokens than half the blocks go in slices instead, block b sending
 *         slice b % sl of token b / sl, so that no block issues a whole
 *         row's stores alone. A token's PEs: a warp per token, a lane per
 *         route (its expert's first slot in the token: a match over the warp).
 *   recv  With at most SYMM__MOE_THREADS (local expert l, source s) items
 *         (and the big kernel), every block waits for all their counts at
 *         once (a thread each) and takes an equal, contiguous share of all
 *         the routes (items in order); else block b takes the items b,
 *         b + blocks, ... and waits for their counts (a thread per item and
 *         source). Either way the prefix over sources of l's counts is s's
 *         first row, as pplx orders rows by source, and each source's mode
 *         is noted. The block's routes then go as one stream, up to LL_RROWS
 *         at a time (the small-call kernel: ll_batch rows): a thread per
 *         route polls its list entry (the first of each item is loaded
 *         with its count, as the sender stores it first) and, for a plain
 *         row, its flag (or, from a source whose counts carry LL_CNT_EREL,
 *         polls the entry with acquire loads, which then stands for the
 *         flag), and notes the route for combine; then the rows are
 *         copied (packets polled until they carry the tag; the first scales'
 *         loads go out with the rows') to out_expert_x[l][row] and its scales.
 * Small dispatch (a->ll_small: a handle whose every call goes as packets, a PE's routes at most
 * one block's threads and the routes a PE may receive within the receivers' shared memory;
 * its own kernel, symm__k_ll_dispatch_small). No per-expert lists: the routes travel in one
 * header per (source, destination PE), so a receiver polls n words' worth of packets instead of
 * n x L counts, and places every route itself.
 *   send  The last block (of two or more) stages the indices, a route per thread, and posts every
 *         PE its header at ll_hdr[p][me]: packet 0 (routes, mode), then each route in token order
 *         (local expert | k << 24, t / dp), each packet tagged; a route's place in its PE's list
 *         is the match over its warp plus the earlier warps' counts (one barrier; none when
 *         warp 0 holds every route, as at a decode step, which then posts alone). The other
 *         blocks send the rows as in the generic path (packets into ll_pbuf[p][me][t / dp], once
 *         per PE, in slices when tokens are fewer than blocks), each warp that holds a vector
 *         finding its token's PEs from its own loads of the slots (shuffles, no barrier).
 *   recv  Block b takes the (source, token slot) pairs b, b + blocks, ... (slices of a row when
 *         pairs are fewer than blocks), known before any header, so its first pair's packets are
 *         loaded with the headers and again in every poll round of packet 0, until a warp's
 *         header is in, then while any warp still waits for one (a tagged packet is this call's
 *         whether or not a route names it: tags differ between the calls that share a buffer).
 *         Every block polls every source's header (packet 0 and the first entries loaded
 *         together in every round; the routes up to the count until they carry the tag) into
 *         shared memory, one barrier: the routes in source order, then token order, are pplx's
 *         rows, so a route's row is the number of routes before it with the same expert. A pair
 *         some route here names is polled until its packets carry the tag and copied to each of
 *         those routes' rows. A decode step's (every block one pair's slice at most, its (route,
 *         vector) pairs at most four a thread) takes no other barrier: the warp that polls a
 *         source's header places its entries before the barrier (a match per 32: each entry's
 *         rank among its source's entries of its expert, each token's first entry and count, the
 *         source's count per expert), so after it each thread reads its routes' rows (rank plus
 *         the earlier sources' counts) and stores the one vector it polled, and the block with the
 *         pair's first slice notes its routes for combine (by row, and in a flat list whose
 *         entries carry their source's mode). Otherwise each block places every route in shared
 *         memory (a barrier) and block 0 notes them all. Each block counts its share of the
 *         experts' rows (in a decode step as sums of the sources' counts, no barrier).
 *   The same parity argument holds with headers in place of counts: every PE posts every PE a
 *   header in every dispatch (no routes included).
 * Combine, same epoch:
 *   send  Each received row goes back, weighted by nothing, to every PE of
 *         its token's DP group: as packets into ll_pcbuf[t][k] when the
 *         token's source asked for them (its mode, kept in ll_mode), else
 *         into ll_cbuf[t][k] with a release of ll_cflag[t][k] = e behind it.
 *         Rows fewer than half the blocks go in slices (packets; a plain
 *         row whole, from its first slice's block); more, each block's
 *         contiguous share (up to LL_BATCH rows) in one batch, its plain
 *         rows' flags released together behind it. The small handles'
 *         kernel sends from the flat list, whose entries carry the source's
 *         mode: a block's first route's row loads wait for one round (the
 *         list's length, the epoch and the entry, which the split by the
 *         most routes a PE may receive names before the length is known).
 *   recv  Per token (its hidden dimension split over several blocks when
 *         tokens are fewer than blocks): the valid routes' rows, polled as
 *         packets or waited for by flag, summed weight x row in float32 in
 *         slot order, stored. In the small handles' kernel a packet token's
 *         routes are polled by one thread each (one round of loads), their
 *         products summed in slot order from shared memory, an element per
 *         thread. Its inputs (bound, routes, weights) are asked for as the
 *         kernel starts, so the send half hides their loads; a decode step's
 *         first unit (one round) is worked out before the send half too, each
 *         thread with its own route's index row (ll_combine_fast).
 *
 * No warp waits for a load before the kernel's first loads are all out: a
 * value needed late (the bound, the epoch, the block count) is loaded by one
 * thread into shared memory, or waited for where nothing else is pending.
 * With PDL the small kernels work out those loads' addresses before they wait
 * for the kernel before them, so the loads go out as the wait ends.
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
 * Tags and flags differ between consecutive uses of a buffer (e against
 * e - 2, or e - 1), and a packet region is never written plainly, so nothing
 * stale passes for new.
 */
#include "moe/moe_kernels.cuh"

#define LL_UNROLL 4
#define LL_BATCH 32   /* most tokens (or rows) a block handles in one step */
#define LL_KREG 8     /* most top-k whose token indices a combine thread holds in registers */
#define LL_CROUNDS 4  /* most rounds (two barriers each) of a token's slice in ll_combine_fast */
#define LL_RROWS 128  /* most rows whose entries (and plain flags) a dispatch block takes at once */
#define LL_POST_ROUTES 256 /* fewest routes (a PE's tokens x top-k) whose lists ll_post_lists posts */
#define LL_RUNROLL 4  /* vectors a dispatch thread loads at once when it copies plain rows alone
                       * (6 or 8 spill at the 128 registers of 512 threads) */

/* A count word: epoch << 32 | mode << 30 | LL_CNT_EREL | routes. A flat route's position
 * (ll_flat): expert << 32 | its source's mode << 30 | row. */
#define LL_FLAT_ROW 0x3fffffffu
#define LL_ROUTES 0x1fffffffu
#define LL_CNT_EREL (1u << 29) /* the source's plain rows have no flag: each entry is released behind its row */
#define LL_SM_EREL 4u          /* the same in a receiver's smode (beside the mode bits) */
#define LL_MODE_DPKT 1u /* the source's dispatch rows are packets */
#define LL_MODE_CPKT 2u /* its tokens' combine rows come back as packets */

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

/* Data bytes of a row slot (x, then its scales 16-byte padded); the flag of
 * a plain slot follows them. */
SYMM__DEVICE_INTERNAL uint64_t ll_sdata(const symm__moe_kargs_t *A) {
    return A->x_bytes + (((uint64_t)A->scale_cols * 4u + 15u) & ~(uint64_t)15u);
}

/* Slot of token tl (t / dp) from source s, parity p, in ll_dbuf (plain) and
 * ll_pbuf (packets: two bytes per data byte). */
SYMM__DEVICE_INTERNAL char *ll_slot(const symm__moe_kargs_t *A, uint32_t p, uint32_t s, uint32_t tl) {
    return MOE_AT(A, ll_dbuf) + (((uint64_t)p * (uint32_t)A->n + s) * A->cap + tl) * A->tok_stride;
}

SYMM__DEVICE_INTERNAL char *ll_pslot(const symm__moe_kargs_t *A, uint32_t p, uint32_t s, uint32_t tl) {
    return MOE_AT(A, ll_pbuf) + (((uint64_t)p * (uint32_t)A->n + s) * A->pcap + tl) * 2u * ll_sdata(A);
}

/* Combine packet slot of my token t's route k (room for f32 rows). */
SYMM__DEVICE_INTERNAL char *ll_pcslot(const symm__moe_kargs_t *A, uint64_t t, uint32_t k) {
    return MOE_AT(A, ll_pcbuf) + (t * A->topk + k) * (uint64_t)A->hidden * 8u;
}

/* The 32-bit tag of epoch e in packets and list entries: 1 .. 2^32 - 1, so
 * never the zeroes of a slot no call has written yet, and different for the
 * epochs that reuse a buffer (e - 1, e - 2). A slot is misread only if it was
 * last written exactly a multiple of 2^32 - 1 calls ago. */
SYMM__DEVICE_INTERNAL uint32_t ll_tag(uint64_t e) { return (uint32_t)(e % 0xffffffffull) + 1u; }

/* Tokens of a batch so that each thread has a few vectors to move. */
SYMM__DEVICE_INTERNAL uint32_t ll_batch(uint32_t units) {
    uint32_t b = 4096u / (units ? units : 1u);
    return b < 1 ? 1 : (b > LL_BATCH ? LL_BATCH : b);
}

/* ---- 16 bytes at any alignment (user buffers), packets ----------------------------------- */

SYMM__DEVICE_INTERNAL symm__v4_t ll_ld16(const char *p) {
    symm__v4_t v;
    const uintptr_t a = (uintptr_t)p;
    if ((a & 15u) == 0)
        return symm__cld16(p, 0);
    if ((a & 3u) == 0) {
        v.x = symm__cld4(p, 0);
        v.y = symm__cld4(p + 4, 0);
        v.z = symm__cld4(p + 8, 0);
        v.w = symm__cld4(p + 12, 0);
        return v;
    }
    {
        uint32_t w[4] = {0, 0, 0, 0};
        for (int i = 0; i < 16; i++)
            w[i / 4] |= symm__cld1(p + i, 0) << (8 * (i % 4));
        v.x = w[0];
        v.y = w[1];
        v.z = w[2];
        v.w = w[3];
    }
    return v;
}

SYMM__DEVICE_INTERNAL void ll_st16(char *p, symm__v4_t v) {
    const uintptr_t a = (uintptr_t)p;
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    if ((a & 15u) == 0) {
        symm__cst16(p, v, 0);
    } else if ((a & 3u) == 0) {
        for (int i = 0; i < 4; i++)
            symm__cst4(p + 4 * i, w[i], 0);
    } else {
        for (int i = 0; i < 16; i++)
            symm__cst1(p + i, (w[i / 4] >> (8 * (i % 4))) & 0xffu, 0);
    }
}

/* 16 data bytes as two packets at dst (32 bytes). */
SYMM__DEVICE_INTERNAL void ll_put_pkt2(void *dst, symm__v4_t v, uint32_t tag) {
    symm__v4_t a, b;
    a.x = v.x;
    a.y = tag;
    a.z = v.y;
    a.w = tag;
    b.x = v.z;
    b.y = tag;
    b.z = v.w;
    b.w = tag;
    symm__c_st16_vol(dst, a);
    symm__c_st16_vol((char *)dst + 16, b);
}

SYMM__DEVICE_INTERNAL int ll_pkt_ok(symm__v4_t v, uint32_t tag) { return v.y == tag && v.w == tag; }

/* The end of a wait that ll_wait_due found over: symm__wait_check reports it and stops the kernel. */
SYMM__NOINLINE __attribute__((noreturn)) void ll_wait_fail(const symm__moe_kargs_t *A, const void *addr, int cmp,
                                                            uint64_t want, uint64_t seen, uint64_t t0) {
    symm__wait_check(&A->ctx, addr, cmp, want, seen, t0);
    symm__trap();
    __builtin_unreachable();
}

/* symm__wait_check's test inline (t0: the wait's first check, 0 before it): the call goes out only
 * for a wait past its deadline, or long enough to read the abort flag and finding it up, and does
 * not return. A call that returns, inside a poll loop, keeps every value of the caller live
 * through it: in both combine kernels that spilled (the small one's receive inputs, loaded as it
 * starts, were stored to local memory as they came back, holding up the loads behind them). */
SYMM__DEVICE_INTERNAL uint64_t ll_wait_due(const symm__moe_kargs_t *A, const void *addr, int cmp, uint64_t want,
                                           uint64_t seen, uint64_t t0) {
    const symm_ctx_t *ctx = &A->ctx;
    const uint64_t now = symm__globaltimer();
    if (t0 == 0)
        return now;
    if ((ctx->timeout_ns != 0 && now - t0 >= ctx->timeout_ns) ||
        (ctx->abort_flag != 0 && now - t0 >= SYMM__ABORT_CHECK_NS &&
         symm__ld_b32((const void *)(uintptr_t)ctx->abort_flag, SYMM_SEM_RELAXED, SYMM_SCOPE_SYS) != 0))
        ll_wait_fail(A, addr, cmp, want, seen, t0);
    return t0;
}

/* Poll the packet at p (last seen v) until both halves carry the tag. */
SYMM__DEVICE_INTERNAL symm__v4_t ll_pkt_wait(const symm__moe_kargs_t *A, const char *p, uint32_t tag, symm__v4_t v) {
    uint32_t polls = 0;
    uint64_t t0 = 0;
    while (!ll_pkt_ok(v, tag)) {
        if (++polls % SYMM__WAIT_CHECK_EVERY == 0)
            t0 = symm__wait_check(&A->ctx, p, SYMM_CMP_EQ, tag, v.y == tag ? v.w : v.y, t0);
        v = symm__c_ld16_vol(p);
    }
    return v;
}

/* The 16 data bytes of two packets loaded as a and b (waiting for those that
 * do not carry the tag yet). */
SYMM__DEVICE_INTERNAL symm__v4_t ll_pkt_data(const symm__moe_kargs_t *A, const char *p, uint32_t tag, symm__v4_t a,
                                            symm__v4_t b) {
    symm__v4_t r;
    if (!ll_pkt_ok(a, tag))
        a = ll_pkt_wait(A, p, tag, a);
    if (!ll_pkt_ok(b, tag))
        b = ll_pkt_wait(A, p + 16, tag, b);
    r.x = a.x;
    r.y = a.z;
    r.z = b.x;
    r.w = b.z;
    return r;
}

/* Poll a tagged list entry until it carries the tag; the route it holds. acq: every poll an
 * acquire load (an entry released behind its row: the row is then visible). */
SYMM__DEVICE_INTERNAL uint32_t ll_take_entry(const symm__moe_kargs_t *A, const uint64_t *p, uint32_t tag, int acq) {
    uint64_t v = acq ? symm__ld_b64(p, SYMM_SEM_ACQUIRE, SYMM_SCOPE_SYS) : symm__ld_b64(p, SYMM_SEM_VOLATILE, SYMM_SCOPE_SYS);
    uint32_t polls = 0;
    uint64_t t0 = 0;
    while ((uint32_t)(v >> 32) != tag) {
        if (++polls % SYMM__WAIT_CHECK_EVERY == 0)
            t0 = symm__wait_check(&A->ctx, p, SYMM_CMP_EQ, tag, v >> 32, t0);
        v = acq ? symm__ld_b64(p, SYMM_SEM_ACQUIRE, SYMM_SCOPE_SYS) : symm__ld_b64(p, SYMM_SEM_VOLATILE, SYMM_SCOPE_SYS);
    }
    return (uint32_t)v;
}

/* Poll a count word until it holds epoch e (>= e << 32), loading the list entry at `ent`
 * (or nothing: NULL) in the same round: the sender stores its entries before the count, so
 * the entry mostly comes with it, one dependent poll less. *seen: the last entry loaded
 * (checked by its tag). Relaxed polls suffice: the entries carry their tags, a plain row its
 * own released flag, and buffer reuse is ordered by the kernels of each stream. */
SYMM__DEVICE_INTERNAL uint64_t ll_wait_count(const symm__moe_kargs_t *A, const uint64_t *cw, uint64_t e,
                                             const uint64_t *ent, uint64_t *seen, int from) {
    SYMM__TRACE_START(&A->ctx, t_, SYMM__G_THREAD);
    uint64_t v = symm__ld_b64(cw, SYMM_SEM_VOLATILE, SYMM_SCOPE_SYS);
    uint64_t x = ent ? symm__ld_b64(ent, SYMM_SEM_VOLATILE, SYMM_SCOPE_SYS) : 0;
    uint32_t polls = 0;
    uint64_t t0 = 0;
    while (v < (e << 32)) {
        if (++polls % SYMM__WAIT_CHECK_EVERY == 0)
            t0 = symm__wait_check(&A->ctx, cw, SYMM_CMP_GE, e << 32, v, t0);
        v = symm__ld_b64(cw, SYMM_SEM_VOLATILE, SYMM_SCOPE_SYS);
        if (ent)
            x = symm__ld_b64(ent, SYMM_SEM_VOLATILE, SYMM_SCOPE_SYS);
    }
    SYMM__TRACE_WAIT(&A->ctx, t_, SYMM_TRACE_WAIT_MOE, cw, from, SYMM_CMP_GE, e << 32, v);
    (void)from;
    *seen = x;
    return v;
}

/* ---- SYMM_MOE_LL_PROBE=stamps: each block's stage times ------------------------------------ */

#define LL_NSTAMP 24
/* dispatch stamps (scripts/moe_ll_stamps.py names them alike) */
#define LLS_D_PRO 1   /* the first loads issued */
#define LLS_D_IDX 2   /* indices staged, epoch read */
#define LLS_D_LIST 3  /* thread 0's expert lists and counts posted */
#define LLS_D_MASK 4  /* the first row batch's destinations known */
#define LLS_D_XST 5   /* thread 0's first x stores issued */
#define LLS_D_SENT 6  /* the send half done */
#define LLS_D_CNT 7   /* the first round's counts seen */
#define LLS_D_SCAN 8  /* its routes' offsets scanned */
#define LLS_D_ENT 9   /* the first batch's list entries (and plain flags) seen */
#define LLS_D_COPY 10 /* rows copied */
#define LLS_D_END 11
/* combine stamps */
#define LLS_C_PRE 1   /* the receive half's inputs asked for (L1 prefetches) */
#define LLS_C_SCAN 2  /* received rows' counts scanned */
#define LLS_C_SLOT 3  /* the first batch's rows located */
#define LLS_C_SENT 4  /* rows sent */
#define LLS_C_SET 5   /* the first unit's routes set up and plain flags waited for */
#define LLS_C_END 6
/* the small kernels' own (their end is stamped after these) */
#define LLS_DS_HSYNC 12 /* the header block's routes counted (its second barrier passed) */
#define LLS_DS_END 13
#define LLS_CS_POLL 7   /* thread 0's route's packets seen (ll_combine_pkt_rp, first round) */
#define LLS_CS_SUM 8    /* its group summed and stored */
#define LLS_CS_END 9
#define LLS_DEP 14 /* the wait for the kernel before it (PDL) over, in the small kernels */
/* finer stamps of the small kernels, compiled in with -DSYMM_MOE_LL_FINE_STAMPS=1 only (each pins
 * the value its stage ends with, so the stamp is not taken before that value exists) */
#define LLS_DS_HPOLL 15 /* thread 0's first header loads issued (receive half) */
#define LLS_DS_H0 16    /* thread 0's warp saw its first source's header packet 0 */
#define LLS_DS_HENT 17  /* thread 0's warp placed its sources' header entries */
#define LLS_DS_RD 18    /* copy: thread 0's first (route, vector) pair begun (its row known, decode form) */
#define LLS_DS_ST1 20   /* copy: its store issued */
#define LLS_DS_HADDR 21 /* header block: thread 0's header entry address computed */
#define LLS_DS_PRE 22   /* the prologue's addresses computed (before the PDL wait) */
#define LLS_DS_UNIT 23  /* copy: the block's first unit located (its routes counted; found, decode form) */
#define LLS_CS_PLAN 10  /* the receive half's plan computed */
#define LLS_CS_PRE 11   /* the first unit's packets asked for (ll_combine_rp_preload) */
#define LLS_CS_SET1 12  /* setup: its first barrier passed (the block's last unit) */
#define LLS_CS_SET2 13  /* setup: routes checked (ll_valid, forms) */
#define LLS_CS_SET3 15  /* the receive half's barrier after the setup passed */
#define LLS_CS_PROD 16  /* the first round's products shared (the barrier before their sums passed) */
#define LLS_CS_ADDR 17  /* the prologue's arithmetic done (before the PDL wait) */
/* finer stamps of the generic dispatch (same build flag) */
#define LLS_DG_PL0 12 /* ll_post_lists entered */
#define LLS_DG_PL1 13 /* its warp 0's first query summed */
#define LLS_DG_RB 14  /* the first row batch's first barrier passed */
#define LLS_DG_MK 15  /* thread 0's token mask worked out (before the barrier) */
#define LLS_DG_PV 16  /* thread 0's prefetched x vector in (pinned after the mask stamp) */
#define LLS_DG_CW 17  /* receive half: the count waits begin (thread 0) */
#define LLS_DG_E1 18  /* thread 0's first list entry taken */
#define LLS_DG_F1 19  /* thread 0's first plain flag seen */
#define LLS_DG_C1 20  /* copy: thread 0's first loads back */
#define LLS_DG_C2 21  /* copy: thread 0's x done (before the scales) */
#if defined(SYMM_MOE_LL_FINE_STAMPS) && SYMM_MOE_LL_FINE_STAMPS
#define LL_FSTAMP(A, i) ll_stamp(A, i)
#define LL_FPIN32(x) symm__pin_u32(&(x))
#define LL_FPIN64(x) symm__pin_u64(&(x))
#else
#define LL_FSTAMP(A, i) ((void)0)
#define LL_FPIN32(x) ((void)0)
#define LL_FPIN64(x) ((void)0)
#endif
#define LL_STAMP_CALL 30 /* the epoch whose stage times are printed: a timed call of symm-bench */

/* The block's stamps (%globaltimer, ns), written by thread 0. */
SYMM__DEVICE_INTERNAL uint64_t *ll_stamps(void) {
    __shared__ uint64_t s[LL_NSTAMP];
    return s;
}

/* Stamp stage i (thread 0, which passes every barrier the stage ends with). */
SYMM__DEVICE_INTERNAL void ll_stamp(const symm__moe_kargs_t *A, uint32_t i) {
    if (A->probe == SYMM__MOE_PROBE_STAMPS && symm__block_tid() == 0)
        ll_stamps()[i] = symm__globaltimer();
}

/* One line per block: "llstamp <kernel> E <experts> M <max tokens> pe <me> block <b> t0 <ns>
 * d <stage - t0, ns, -1: not reached> x 23"; scripts/moe_ll_stamps.py sums them up
 * (its STAGES name the stamps of each kernel). */
SYMM__NOINLINE void ll_stamps_print(const symm__moe_kargs_t *A, const char *kernel, uint32_t nst) {
    const uint64_t *s = ll_stamps();
    long long d[LL_NSTAMP];
    for (uint32_t i = 0; i < LL_NSTAMP; i++)
        d[i] = i < nst && s[i] ? (long long)(s[i] - s[0]) : -1;
    printf("llstamp %s E %u M %u pe %d block %u t0 %llu d %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld "
           "%lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld\n",
           kernel, A->experts, A->max_tokens, A->me, blockIdx.x, (unsigned long long)s[0], d[1], d[2], d[3], d[4],
           d[5], d[6], d[7], d[8], d[9], d[10], d[11], d[12], d[13], d[14], d[15], d[16], d[17], d[18], d[19], d[20],
           d[21], d[22], d[23]);
}

SYMM__DEVICE_INTERNAL void ll_stamps_begin(const symm__moe_kargs_t *A) {
    if (A->probe == SYMM__MOE_PROBE_STAMPS && symm__block_tid() == 0) {
        for (uint32_t i = 0; i < LL_NSTAMP; i++)
            ll_stamps()[i] = 0;
        ll_stamps()[0] = symm__globaltimer();
    }
}

SYMM__DEVICE_INTERNAL void ll_stamps_end(const symm__moe_kargs_t *A, const char *kernel, uint64_t e, uint32_t last) {
    if (A->probe == SYMM__MOE_PROBE_STAMPS && symm__block_tid() == 0) {
        ll_stamps()[last] = symm__globaltimer();
        if (e == LL_STAMP_CALL)
            ll_stamps_print(A, kernel, LL_NSTAMP);
    }
}

/* ---- programmatic dependent launch (SYMM_MOE_PDL) ------------------------------------------ */

/* A kernel launched with it starts with this, before its first load or store of global memory:
 * it waits for the kernel before it on the stream (its memory, the epoch included, is then
 * visible, and every order the protocol takes from the stream holds as without it), then lets
 * the next one's blocks start. No block of this grid waits for that one. */
SYMM__DEVICE_INTERNAL void ll_pdl_begin(const symm__moe_kargs_t *A) {
    if (A->pdl) {
        symm__griddep_wait();
        symm__griddep_launch();
    }
}

/* ---- dispatch --------------------------------------------------------------------------- */

/* *bound_m as loaded (without a bound: num_tokens), apart from its use (ll_bound_use). The
 * kernels have one thread of their last warp load it into shared memory as they start: that
 * warp alone waits for it, while the others issue their own first loads. */
SYMM__DEVICE_INTERNAL uint64_t ll_bound_load(const symm__moe_kargs_t *A) {
    uint32_t b = 0;
    if (A->bound != NULL)
        b = *A->bound;
    return A->bound != NULL ? b : A->num_tokens;
}

/* The bound a loaded *bound_m gives (moe_bound's rule): reported and num_tokens when above it. */
SYMM__DEVICE_INTERNAL uint64_t ll_bound_use(const symm__moe_kargs_t *A, uint64_t b, int report) {
    if (b <= A->num_tokens)
        return b;
    if (report)
        moe_error(A, SYMM__MOE_ERR_BOUND, (int64_t)b, (int64_t)A->num_tokens, 0);
    return A->num_tokens;
}

/* Count the block in the kernel's done word: its ticket, 1 .. blocks (the warp waits for the
 * atomic's round trip: the compiler aggregates it over the warp). */
SYMM__DEVICE_INTERNAL uint32_t ll_count_block(const symm__moe_kargs_t *A, uint32_t kernel) {
    return symm__atom_add_b32(&moe_state(A)->done[kernel], 1u) + 1u;
}

/* Scales s0 .. s0 + 3 (those below scale_cols) of token t, as bits into w. */
SYMM__DEVICE_INTERNAL void ll_ld_scales(const symm__moe_kargs_t *A, int64_t t, uint32_t s0, uint32_t *w) {
    const uint32_t cnt = A->scale_cols - s0 < 4 ? A->scale_cols - s0 : 4;
    for (uint32_t i = 0; i < cnt; i++)
        w[i] = symm__f32_bits(A->x_scale[t * A->xs_stride[0] + (int64_t)(s0 + i) * A->xs_stride[1]]);
}

/* Vector v of token t's row as it travels: 16 bytes of x (v < nvx), else a quad of its scales. */
SYMM__DEVICE_INTERNAL symm__v4_t ll_row_vec(const symm__moe_kargs_t *A, uint64_t t, uint32_t v) {
    const uint32_t nvx = A->x_bytes / 16u;
    uint32_t w[4] = {0, 0, 0, 0};
    symm__v4_t d;
    if (v < nvx)
        return ll_ld16((const char *)A->x + t * ((uint64_t)A->x_stride * A->x_esz) + 16u * v);
    ll_ld_scales(A, (int64_t)t, 4u * (v - nvx), w);
    d.x = w[0];
    d.y = w[1];
    d.z = w[2];
    d.w = w[3];
    return d;
}

/* Vectors lo .. hi - 1 of token t's row as packets into slot on every PE of mask, a thread a
 * vector at a time; pre (or NULL): this thread's first vector, loaded ahead. */
SYMM__DEVICE_INTERNAL void ll_put_slice(const symm__moe_kargs_t *A, char *slot, uint64_t t, uint32_t lo, uint32_t hi,
                                        uint64_t mask, uint32_t tag, const symm__v4_t *pre) {
    const uint32_t tid = symm__block_tid();
    for (uint32_t v = lo + tid; v < hi; v += SYMM__MOE_THREADS) {
        const symm__v4_t d = pre != NULL && v == lo + tid ? *pre : ll_row_vec(A, t, v);
        for (uint64_t m = mask; m; m &= m - 1)
            ll_put_pkt2(moe_peer(A, slot + 32u * v, __ffsll((long long)m) - 1), d, tag);
    }
}

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

/* The block's count (the dispatch kernel's epoch rule), by the first thread of its last warp
 * while the receive half's first waits run (warps 0 .. poll): the atomic's round trip, which
 * that warp waits for, overlaps them. Once per kernel (*ticket != 0 after). */
SYMM__DEVICE_INTERNAL void ll_count_late(const symm__moe_kargs_t *A, uint32_t *ticket) {
    if (ticket != NULL && symm__block_tid() == SYMM__MOE_THREADS - 32 && *ticket == 0)
        *ticket = ll_count_block(A, SYMM__MK_LL_DISPATCH);
}

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
                uint32_t lo = 0, hi = ni - 1; /* the last item whose first route is <= j */
                while (lo < hi) {
                    const uint32_t mid = (lo + hi + 1) / 2;
                    if (ipre[mid] <= j)
                        lo = mid;
                    else
                        hi = mid - 1;
                }
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

/* SYMM_MOE_LL_PROBE=hop: block 0's thread x < n posts a word to PE x (send
 * half) and waits for PE x's (receive half): one crossing of the links and
 * the wait, without the exchange. Dispatch e uses the count word of expert 0
 * at parity e & 1 (e << 32), combine e the other parity's (e << 32 | 1):
 * each value is above the word's last one, which the same thread wrote in an
 * earlier kernel of the stream. */
SYMM__DEVICE_INTERNAL void ll_probe_hop(const symm__moe_kargs_t *A, uint64_t e, int combine) {
    const uint32_t tid = symm__block_tid(), n = (uint32_t)A->n, L = A->local, me = (uint32_t)A->me;
    const uint32_t p = (uint32_t)(e & 1u) ^ (combine ? 1u : 0u);
    const uint64_t v = (e << 32) | (combine ? 1u : 0u);
    if (blockIdx.x != 0 || tid >= n)
        return;
    if (A->flags & SYMM_MOE_SEND)
        symm__st_b64(moe_peer(A, MOE_U64(A, ll_cnt) + ((uint64_t)p * n + me) * L, (int)tid), v, SYMM_SEM_RELAXED,
                     SYMM_SCOPE_SYS);
    if (A->flags & SYMM_MOE_RECV)
        moe_wait(A, MOE_U64(A, ll_cnt) + ((uint64_t)p * n + tid) * L, v, (int)tid);
}

/* ---- the small dispatch (a->ll_small) --------------------------------------------------- */

/* a / b (b > 0) with a shift when b is a power of two, as the usual expert, slot, block and
 * slice counts are: an integer division is a chain of some twenty instructions, and the small
 * kernels' prologue and send half take several in a row. */
SYMM__DEVICE_INTERNAL uint32_t ll_udiv(uint32_t a, uint32_t b) {
    if ((b & (b - 1u)) == 0)
        return a >> (__ffs((int)b) - 1);
    return a / b;
}

/* Routes one source may send one PE in a small dispatch: each of its tokens names at most
 * min(K, L) of that PE's experts. */
SYMM__DEVICE_INTERNAL uint32_t ll_hmax(const symm__moe_kargs_t *A) {
    return A->cap * (A->topk < A->local ? A->topk : A->local);
}

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

/* The PEs that token t's valid routes go to, found by one warp without shared memory or a
 * barrier: lane k holds slot k (and k + 32), a shuffle per slot finds repeats (ll_valid's rule). */
SYMM__DEVICE_INTERNAL uint64_t ll_warp_mask(const symm__moe_kargs_t *A, uint32_t a, uint32_t b) {
    const uint32_t lane = symm__block_tid() & 31u, K = A->topk, E = A->experts, L = A->local;
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
    m = (oka ? 1ull << ll_udiv(a, L) : 0ull) | (okb ? 1ull << ll_udiv(b, L) : 0ull);
    return ((uint64_t)__reduce_or_sync(MOE_FULL, (uint32_t)(m >> 32)) << 32) | __reduce_or_sync(MOE_FULL, (uint32_t)m);
}

/* The send half's first unit, worked out before the PDL wait (ll_small_dispatch): the header
 * block's route (token index hi, slot hk; what & 1; h32 = 32 / K) and a row block's token (index ri, id rt) and
 * vectors rlo .. rhi - 1 of its row (what & 4; what & 2: this thread has one). */
typedef struct ll_sunit {
    uint32_t hi, hk, h32, ri, rlo, rhi, what;
    uint64_t rt;
} ll_sunit_t;

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
    const uint32_t me = (uint32_t)A->me, dpr = me - ll_udiv(me, dp) * dp, B = gridDim.x, p = (uint32_t)(e & 1u);
    const uint32_t all = (uint32_t)A->num_tokens > dpr ? ll_udiv((uint32_t)A->num_tokens - dpr + dp - 1, dp) : 0;
    const uint32_t tag = ll_tag(e);
    const uint32_t RB = B > 1 ? B - 1 : 1, nv = A->x_bytes / 16u + (A->scale_cols + 3) / 4;
    const uint32_t mode = LL_MODE_DPKT | (A->pkt && A->num_tokens <= A->pmt ? LL_MODE_CPKT : 0u);
    if (blockIdx.x == B - 1) {
        /* the header: route q = i * K + k of token i (below the bound) */
        const uint32_t q = tid, i = su->hi, k = su->hk;
        const uint64_t t = dpr + (uint64_t)i * dp;
        int ok = 0, one;
        uint32_t r = 0xffffffffu, mm, pos = 0, nw;
        if ((su->what & 1u) && t < bound) {
            ok = ll_valid(&sidx[q - k], k, E);
            if (ix >= E) {
                if (ix != SYMM_MOE_NO_EXPERT)
                    moe_error(A, SYMM__MOE_ERR_EXPERT_RANGE, (int64_t)t, (int64_t)k, (int64_t)ix);
            } else if (!ok) {
                moe_error(A, SYMM__MOE_ERR_EXPERT_DUP, (int64_t)t, (int64_t)k, (int64_t)ix);
            }
            if (ok)
                r = ll_udiv(ix, L);
        }
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
    for (uint32_t u = blockIdx.x + RB; u < all; u += RB) {
        const uint64_t t = dpr + (uint64_t)u * dp;
        if (t >= bound)
            break; /* (tokens go in order: the later ones are at or above the bound too) */
        xa = lane < K ? ((const uint32_t *)A->idx)[t * K + lane] : E;
        xb = lane + 32u < K ? ((const uint32_t *)A->idx)[t * K + lane + 32u] : E;
        ll_put_slice(A, ll_pslot(A, p, me, u), t, 0, nv, ll_warp_mask(A, xa, xb), tag, NULL);
    }
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

#define LL_FAST_ROUNDS 4 /* most routes a thread of the decode form stores its vector for */
#define LL_SHIST (4 * SYMM__MOE_THREADS) /* most (source, local expert) counts the decode form keeps */

SYMM__DEVICE_INTERNAL ll_runit_t ll_small_unit(const symm__moe_kargs_t *A) {
    const uint32_t cap = A->cap, pairs = (uint32_t)A->n * cap, B = gridDim.x, u = blockIdx.x;
    const uint32_t nv = A->x_bytes / 16u + (A->scale_cols + 3) / 4, kl = A->topk < A->local ? A->topk : A->local;
    const uint32_t tid = symm__block_tid();
    uint32_t nvm, q, z;
    ll_runit_t r;
    r.sl = pairs < B ? ll_udiv(B, pairs) : 1u;
    r.units = pairs * r.sl;
    q = ll_udiv(u, r.sl);
    z = u - q * r.sl;
    r.s = ll_udiv(q, cap);
    r.tl = q - r.s * cap;
    r.lo = ll_udiv(nv * z, r.sl);
    r.hi = ll_udiv(nv * (z + 1), r.sl);
    nvm = ll_udiv(nv + r.sl - 1, r.sl);
    r.lg = 32u - (uint32_t)__clz((int)(nvm - 1u)); /* (nvm >= 1 where fast) */
    /* (grid-uniform: the blocks that own a pair's first slice note its routes for the combine) */
    r.fast = r.units <= B && nv >= r.sl && kl <= 32u && nvm <= SYMM__MOE_THREADS &&
             (kl << r.lg) <= SYMM__MOE_THREADS * LL_FAST_ROUNDS && (uint32_t)A->n * A->local <= LL_SHIST;
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
    for (uint32_t x = blockIdx.x + symm__block_tid() * gridDim.x; x < L; x += SYMM__MOE_THREADS * gridDim.x) {
        uint32_t c = 0;
        for (uint32_t s = 0; s < n; s++)
            c += shist[s * L + x];
        A->out_num[x] = (int32_t)c;
        MOE_U32(A, ll_rcnt)[x] = c;
    }
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
    const uint32_t p = (uint32_t)(e & 1u), tag = ll_tag(e), nvx = A->x_bytes / 16u, cols = A->scale_cols;
    const uint32_t nv = nvx + (cols + 3) / 4, cap = A->cap, pairs = n * cap;
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
    for (uint32_t x = tid; x < pairs; x += SYMM__MOE_THREADS)
        pcnt[x] = 0;
    if (ru->fast) /* (sdat's room: the decode form copies no slice through it) */
        for (uint32_t x = tid; x < n * L; x += SYMM__MOE_THREADS)
            shist[x] = 0;
    hist[tid] = 0; /* (published by the barrier after the headers) */
    ll_count_late(A, ticket); /* (after this thread's loads: its warp waits for the atomic) */
    for (uint32_t s = warp; s < n; s += SYMM__MOE_WARPS) {
        const char *h = ll_hslot(A, p, s);
        symm__v4_t h0 = symm__c_ld16_vol(h), ev[LL_HPOLL];
        uint32_t cnt, mode, polls = 0;
        uint64_t t0 = 0;
#pragma unroll
        for (uint32_t j = 0; j < LL_HPOLL; j++)
            if (lane + 32u * j < hmax)
                ev[j] = symm__c_ld16_vol(h + 16u * (1u + lane + 32u * j));
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
        for (uint32_t s = 0; s < n; s++)
            R += scnt[s];
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
    if (ru->fast) {
        ll_small_count_fast(A, shist);
        return;
    }
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
}

/* A small dispatch: the halves the flags name, on the epoch it returns. Before the wait for the
 * kernel before it (PDL: while that one still runs) it works out every address of its first
 * loads and clears its shared counters; after it, the prologue issues every first load before
 * anything waits for one: the epoch (thread 0), *bound_m (the last warp), the header block's
 * indices (a route per thread), each row block's first vector and its warps' view of the first
 * token's slots; one barrier publishes them, and no block waits for another of its grid before
 * its sending is done. */
SYMM__DEVICE_INTERNAL uint64_t ll_small_dispatch(const symm__moe_kargs_t *A, uint32_t *ticket) {
    const uint32_t tid = symm__block_tid(), lane = tid & 31u, K = A->topk, E = A->experts, n = (uint32_t)A->n;
    const uint32_t dp = (uint32_t)A->dp, dpr = (uint32_t)A->me - ll_udiv((uint32_t)A->me, dp) * dp;
    const uint32_t B = gridDim.x, RB = B > 1 ? B - 1 : 1;
    const int send = (A->flags & SYMM_MOE_SEND) != 0, recv = (A->flags & SYMM_MOE_RECV) != 0;
    const uint32_t all = (uint32_t)A->num_tokens > dpr ? ll_udiv((uint32_t)A->num_tokens - dpr + dp - 1, dp) : 0;
    const uint32_t nvx = A->x_bytes / 16u, nv = nvx + (A->scale_cols + 3) / 4;
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
        for (uint32_t x = tid; x < SYMM__MOE_WARPS * n; x += SYMM__MOE_THREADS)
            wcnt[x] = 0;
        su.h32 = ll_udiv(32u, K);
        if (tid < all * K) {
            su.hi = ll_udiv(tid, K);
            su.hk = tid - su.hi * K;
            ixo = (dpr + (uint64_t)su.hi * dp) * K + su.hk;
            su.what = 1;
        }
    }
    if (send && (B == 1 || blockIdx.x < RB)) {
        const uint32_t sl = all > 0 && all < RB ? ll_udiv(RB, all) : 1u, u = blockIdx.x;
        if (u < all * sl) {
            su.ri = ll_udiv(u, sl);
            su.rt = dpr + (uint64_t)su.ri * dp;
            su.rlo = ll_udiv(nv * (u - su.ri * sl), sl);
            su.rhi = ll_udiv(nv * (u - su.ri * sl + 1), sl);
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
    if (recv)
        ll_small_recv(A, e, send ? ticket : NULL, &hleft, &ru);
    else if (send)
        ll_count_late(A, ticket);
    return e;
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

/* The small dispatch (a->ll_small, the real exchange or its stamps): its own kernel, so its
 * registers, shared memory and code are its own. Epoch as in symm__k_ll_dispatch. */
__global__ void __launch_bounds__(SYMM__MOE_THREADS)
    symm__k_ll_dispatch_small(const __grid_constant__ symm__moe_kargs_t a) {
    const symm__moe_kargs_t *A = &a;
    uint32_t ticket = 0;
    uint64_t e;
    ll_stamps_begin(A);
    e = ll_small_dispatch(A, &ticket); /* (its prologue waits for the kernel before it: PDL) */
    if (blockIdx.x == 0 && symm__block_tid() == 0)
        atomicMax(&moe_state(A)->max_grid, gridDim.x);
    if (ticket == gridDim.x) { /* the thread that counted the block counted last */
        atomicExch(&moe_state(A)->done[SYMM__MK_LL_DISPATCH], 0u);
        *(volatile uint64_t *)&moe_state(A)->epoch = e;
    }
    ll_stamps_end(A, "dispatch-small", e, LLS_DS_END);
}

/* ---- combine ---------------------------------------------------------------------------- */

/* Does my group's token t come back as packets: its source's mode says so
 * (and t has a packet slot, which a source that asked for packets ensures;
 * sender and receiver apply the same rule either way). */
SYMM__DEVICE_INTERNAL int ll_cpkt(const symm__moe_kargs_t *A, uint32_t mode, uint64_t t) {
    return (mode & LL_MODE_CPKT) != 0 && t < A->pmt;
}

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
    uint32_t lo = 0, hi = L - 1; /* the last expert whose first row is <= r */
    uint64_t yoff, route, t;
    uint32_t src, k, g0;
    symm__v4_t v0 = {0, 0, 0, 0};
    MOE_TRACE_T0(tb_, A);
    if (r >= total)
        return;
    while (lo < hi) {
        const uint32_t mid = (lo + hi + 1) / 2;
        if (pre[mid] <= r)
            lo = mid;
        else
            hi = mid - 1;
    }
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

/* The small combine's send split, arithmetic on the arguments alone (worked out before the PDL
 * wait): unit u = route u / sl, slice u % sl, with sl from the most routes a PE may receive
 * (n x cap x min(top-k, L): fewer than blocks, slices), not from how many the dispatch received,
 * so a block knows its first route's entry before it loads their number. */
SYMM__DEVICE_INTERNAL uint32_t ll_csend_sl(const symm__moe_kargs_t *A) {
    const uint32_t K = A->topk, L = A->local, rmax = (uint32_t)A->n * A->cap * (K < L ? K : L), B = gridDim.x;
    return rmax > 0 && rmax < B ? B / rmax : 1u;
}

/* The send half of the small handles' combine: the dispatch left its routes as a flat list
 * (ll_flat), each entry with its row's position and its source's mode, so a route's stores need
 * one round of loads before its row's: its entry, with their number and the epoch (fR, fe, and
 * the block's first entry f0, f1: loaded by the caller as the kernel starts, before anything
 * else). No barrier before the first store: unit u = route u / sl, slice u % sl (ll_csend_sl;
 * a plain row whole, from its slice 0, its flag released behind the block's stores). Thread 0
 * leaves the epoch in *se. */
SYMM__DEVICE_INTERNAL void ll_combine_send_small(const symm__moe_kargs_t *A, uint64_t *se, uint32_t fR, uint64_t fe,
                                                 uint32_t sl, uint64_t f0, uint64_t f1) {
    const uint32_t tid = symm__block_tid(), K = A->topk, dp = (uint32_t)A->dp, B = gridDim.x;
    const uint32_t ysz = moe_kind_size(A->y_kind), nvy = A->hidden * ysz / 16u;
    const uint64_t *flat = MOE_U64(A, ll_flat);
    const uint32_t R = fR;
    const uint64_t e = fe;
    const uint32_t tag = ll_tag(e);
    MOE_TRACE_T0(tb_, A);
    if (tid == 0)
        *se = e;
    ll_stamp(A, LLS_C_SCAN);
    for (uint32_t u = blockIdx.x; u < R * sl; u += B) {
        const uint32_t P = u / sl, z = u % sl;
        const uint64_t route = u == blockIdx.x ? f0 : symm__cld8(flat + 2u + 2u * P, 0);
        const uint64_t pos = u == blockIdx.x ? f1 : symm__cld8(flat + 3u + 2u * P, 0);
        const uint32_t src = (uint32_t)(route & 0xffffu), k = (uint32_t)((route >> 16) & 0xffffu), g0 = src / dp * dp;
        const uint64_t t = route >> 32;
        const uint64_t yoff = (uint64_t)((int64_t)(pos >> 32) * A->y_stride[0] +
                                         (int64_t)((uint32_t)pos & LL_FLAT_ROW) * A->y_stride[1]) * ysz;
        const uint32_t mode = (uint32_t)pos >> 30;
        if (u == blockIdx.x)
            ll_stamp(A, LLS_C_SLOT);
        if (ll_cpkt(A, mode, t)) {
            char *dst = ll_pcslot(A, t, k);
            for (uint32_t q0 = nvy * z / sl + tid; q0 < nvy * (z + 1) / sl; q0 += SYMM__MOE_THREADS * LL_UNROLL) {
                symm__v4_t v[LL_UNROLL];
#pragma unroll
                for (int x = 0; x < LL_UNROLL; x++) {
                    const uint32_t q = q0 + (uint32_t)x * SYMM__MOE_THREADS;
                    if (q < nvy * (z + 1) / sl)
                        v[x] = ll_ld16((const char *)A->y + yoff + 16u * q);
                }
#pragma unroll
                for (int x = 0; x < LL_UNROLL; x++) {
                    const uint32_t q = q0 + (uint32_t)x * SYMM__MOE_THREADS;
                    if (q < nvy * (z + 1) / sl)
                        for (uint32_t d = 0; d < dp; d++)
                            ll_put_pkt2(moe_peer(A, dst + 32u * q, (int)(g0 + d)), v[x], tag);
                }
            }
        } else if (z == 0) {
            char *dst = MOE_AT(A, ll_cbuf) + (t * K + k) * (uint64_t)A->hidden * 4u;
            for (uint32_t q0 = tid; q0 < nvy; q0 += SYMM__MOE_THREADS * LL_UNROLL) {
                symm__v4_t v[LL_UNROLL];
#pragma unroll
                for (int x = 0; x < LL_UNROLL; x++) {
                    const uint32_t q = q0 + (uint32_t)x * SYMM__MOE_THREADS;
                    if (q < nvy)
                        v[x] = ll_ld16((const char *)A->y + yoff + 16u * q);
                }
#pragma unroll
                for (int x = 0; x < LL_UNROLL; x++) {
                    const uint32_t q = q0 + (uint32_t)x * SYMM__MOE_THREADS;
                    if (q < nvy)
                        for (uint32_t d = 0; d < dp; d++)
                            symm__cst16(moe_peer(A, dst + 16u * q, (int)(g0 + d)), v[x], 1);
                }
            }
            symm__block_sync(); /* (the block's unit: one route, one form) */
            if (tid < dp)
                MOE_RELEASE_PUT(A, tb_, MOE_U64(A, ll_cflag) + t * K + k, e, (int)(g0 + tid),
                                (uint64_t)A->hidden * ysz);
        }
    }
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
    uint32_t total, run = 0, rb, tag;
    uint64_t e;
    {
        const uint32_t c = tid < L ? MOE_U32(A, ll_rcnt)[tid] : 0, md = tid < (uint32_t)A->n ? MOE_U32(A, ll_mode)[tid] : 0;
        const uint64_t ev = tid == 0 ? *(volatile uint64_t *)&moe_state(A)->epoch : 0;
        if (tid < (uint32_t)A->n)
            modes[tid] = md;
        if (tid == 0)
            *se = ev;
        for (uint32_t b0 = 0; b0 < L; b0 += SYMM__MOE_THREADS) {
            const uint32_t x = b0 + tid, cx = b0 == 0 ? c : (x < L ? MOE_U32(A, ll_rcnt)[x] : 0);
            uint32_t sum, ex = moe_block_scan(cx, &sum);
            if (x < L)
                pre[x] = run + ex;
            run += sum;
        }
    }
    if (tid == 0)
        pre[L] = run;
    symm__block_sync();
    ll_stamp(A, LLS_C_SCAN);
    e = *se;
    tag = ll_tag(e);
    total = pre[L];
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
#pragma unroll
            for (uint32_t h = 0; h < 2; h++)
                for (uint32_t k0 = 0; h < passes && k0 < K; k0 += MOE_GATHER) {
                    symm__v4_t r[MOE_GATHER];
#pragma unroll
                    for (uint32_t i = 0; i < MOE_GATHER; i++)
                        if (k0 + i < K && sok[j * K + k0 + i])
                            r[i] = symm__cld16(MOE_AT(A, ll_cbuf) + (t * K + k0 + i) * slot_bytes +
                                                   (uint64_t)v * 8u * ysz + 16u * h, 0);
#pragma unroll
                    for (uint32_t i = 0; i < MOE_GATHER; i++)
                        if (k0 + i < K && sok[j * K + k0 + i])
                            ll_acc16(kind, r[i], h, sw[j * K + k0 + i], acc);
                }
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

/* The block-uniform part of the small combine's prologue, arithmetic on the arguments alone (before
 * the PDL wait), worked out by warp 0 alone and shared through one barrier: sixteen warps each
 * doing the same divisions share the SM's issue slots, and the prologue then outlasted the kernel
 * before it. The send split (ll_csend_sl) and the block's first route entry (~0: none); the
 * block's first unit of the plan of *bound_m = num_tokens (has: there is one; units in that plan):
 * tokens t0 .. t0 + nb - 1, output groups glo .. glo + gn - 1; one: ll_combine_fast takes it, in
 * rounds of per groups (one token: as many as it takes; more tokens: one round); g0 the first PE
 * of my DP group. */
typedef struct ll_cpro {
    uint64_t t0, units;
    uint32_t csl, cP, has, nb, glo, gn, one, per, rounds, g0;
} ll_cpro_t;

/* Warp 0 the receive half's plan and first unit, warp 1 the rest, in parallel (each a chain of
 * divisions); every lane of the warp computes the same, lane 0 stores it. */
SYMM__DEVICE_INTERNAL void ll_combine_pro(const symm__moe_kargs_t *A, int send, int recv, ll_cpro_t *p) {
    const uint32_t K = A->topk, L = A->local, dp = (uint32_t)A->dp, lane = symm__block_tid() % 32u;
    if (symm__block_tid() < 32) {
        uint64_t t0 = 0, units = 0;
        uint32_t has = 0, nb = 0, glo = 0, gn = 0, rounds = 0, one = 0;
        if (recv) {
            const ll_cplan_t c = ll_combine_plan(A, A->num_tokens);
            units = c.units;
            if (blockIdx.x < c.units) {
                const uint32_t h8 = A->hidden / 8u, sl = c.sl, z = sl > 1 ? blockIdx.x % sl : 0u;
                has = 1;
                t0 = ll_unit_t0(&c, blockIdx.x);
                nb = ll_unit_nb(&c, t0);
                glo = h8 * z / sl;
                gn = h8 * (z + 1) / sl - glo;
                if (nb > 1 || gn * K <= SYMM__MOE_THREADS) { /* (rounds of THREADS / K groups) */
                    rounds = 1;
                } else {
                    const uint32_t per = SYMM__MOE_THREADS / K;
                    rounds = (gn + per - 1) / per;
                }
                one = K <= LL_KREG && (nb == 1 ? rounds <= LL_CROUNDS : nb * gn * K <= SYMM__MOE_THREADS);
            }
        }
        if (lane == 0) {
            p->t0 = t0;
            p->units = units;
            p->has = has;
            p->nb = nb;
            p->glo = glo;
            p->gn = gn;
            p->rounds = rounds;
            p->one = one;
        }
    } else if (symm__block_tid() < 64) {
        uint32_t csl = 1, cP = ~0u;
        const uint32_t per = SYMM__MOE_THREADS / (K ? K : 1u);
        const uint32_t g0 = dp == 1 ? (uint32_t)A->me : (uint32_t)A->me / dp * dp;
        if (send) {
            csl = ll_csend_sl(A);
            if (blockIdx.x / csl < (uint32_t)A->n * A->cap * (K < L ? K : L))
                cP = blockIdx.x / csl;
        }
        if (lane == 0) {
            p->csl = csl;
            p->cP = cP;
            p->per = per;
            p->g0 = g0;
        }
    }
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
        const uint32_t x = tid / K, nb = p->nb, gn = p->gn;
        in->bits = LL_CF_ON;
        if (x < p->per && x < nb * gn) { /* (its first group; one token: then every per-th) */
            const uint32_t j = nb == 1 ? 0u : x / gn; /* (one token: a decode step's) */
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
 * after it the plan is not worked out at all. */
SYMM__DEVICE_INTERNAL void ll_combine_recv(const symm__moe_kargs_t *A, const uint64_t *se, uint64_t braw,
                                           ll_cunit_t *u, int small, ll_cin_t *in, uint64_t fe, const ll_cpro_t *pro) {
    const uint32_t tid = symm__block_tid(), K = A->topk, B = gridDim.x, h8 = A->hidden / 8u;
    int first = 0; /* the block's first unit summed by ll_combine_fast */
    if (in != NULL && braw == A->num_tokens && (in->bits & LL_CF_ON)) {
        ll_stamp(A, LLS_C_SET);
        ll_combine_fast(A, fe, in, pro);
        if ((uint64_t)blockIdx.x + B >= pro->units)
            return;
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
}

/* The receive half's inputs (bound, routes, weights, forms) are the call's or the dispatch's:
 * their loads go out at the start, and the send half hides them. */
SYMM__DEVICE_INTERNAL void ll_combine_kernel(const symm__moe_kargs_t *A, int small) {
    __shared__ ll_cunit_t u;
    __shared__ uint64_t se;    /* the epoch (dispatches so far: the combine works on the last one) */
    __shared__ uint64_t sbraw; /* *bound_m as loaded by the last warp (no other warp waits for it) */
    __shared__ ll_cpro_t spro;
    ll_cin_t in;
    uint32_t ro = ~0u, mi = ~0u, csl = 1, cP = ~0u;
    ll_stamps_begin(A);
    if (small) { /* addresses before the wait for the kernel before (PDL) */
        ll_combine_pro(A, (A->flags & SYMM_MOE_SEND) != 0, (A->flags & SYMM_MOE_RECV) != 0, &spro);
        symm__block_sync();
        csl = spro.csl;
        cP = spro.cP;
        symm__pin_u32(&csl);
        symm__pin_u32(&cP);
    }
    if (small && (A->flags & SYMM_MOE_RECV)) {
        ll_combine_inputs_at(A, &spro, &in, &ro, &mi);
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
                                       small, small ? &in : NULL, fe, &spro));
    }
    ll_stamps_end(A, small ? "combine-small" : "combine", se, small ? LLS_CS_END : LLS_C_END);
}

__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ll_combine(const __grid_constant__ symm__moe_kargs_t a) {
    ll_combine_kernel(&a, 0);
}

/* The combine of a handle with the small dispatch: the same kernel without the per-thread packet
 * sums (ll_combine_pkt_rp takes every packet token), so fewer registers. */
__global__ void __launch_bounds__(SYMM__MOE_THREADS)
    symm__k_ll_combine_small(const __grid_constant__ symm__moe_kargs_t a) {
    ll_combine_kernel(&a, 1);
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
    const int dispatch = a->kernel == SYMM__MK_LL_DISPATCH;
    const int small = dispatch && a->ll_small && (a->probe == SYMM__MOE_PROBE_NONE || a->probe == SYMM__MOE_PROBE_STAMPS);
    const int big = (uint64_t)a->num_tokens * a->topk >= LL_POST_ROUTES;
    void (*const kd)(symm__moe_kargs_t) =
        small ? symm__k_ll_dispatch_small : big ? symm__k_ll_dispatch_big : symm__k_ll_dispatch;
    void (*const kc)(symm__moe_kargs_t) = a->ll_small ? symm__k_ll_combine_small : symm__k_ll_combine;
    const size_t smem = small ? 0 : dispatch || (a->flags & SYMM_MOE_SEND) ? symm__moe_ll_smem(a, a->nblocks) : 0;
    if (a->pdl)
        return symm__moe_launch_pdl(dispatch ? (const void *)kd : (const void *)kc, a, smem, s,
                                    dispatch ? "dispatch" : "combine");
    if (dispatch) {
        kd<<<a->nblocks, SYMM__MOE_THREADS, smem, s>>>(*a);
    } else {
        kc<<<a->nblocks, SYMM__MOE_THREADS, smem, s>>>(*a);
    }
    return symm__moe_launched(dispatch ? "the MoE dispatch kernel" : "the MoE combine kernel");
}
