/*
 * moe_ll.cuh - the low-latency (pplx-layout) MoE kernels' protocol, its
 * constants and the device helpers their kernels share. The kernels: the
 * generic dispatch (moe_k_ll_dispatch.cu), the small dispatch
 * (moe_k_ll_dispatch_small.cu), the combine (moe_k_ll_combine.cu); their
 * launch: moe_ll_launch.cu. One kernel per dispatch and one per combine
 * (or one per half when the flags split a call).
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
 *         source's count per expert; those counters cleared by that warp itself as its first
 *         loads travel, as no other warp touches them before the barrier), so after it each
 *         thread reads its routes' rows (rank plus the earlier sources' counts) and stores the
 *         one vector it polled, and the block with the pair's first slice notes its routes for
 *         combine (by row, and in a flat list whose entries carry their source's mode).
 *         Otherwise each block places every route in shared memory (a barrier) and block 0 notes
 *         them all. Each block counts its share of the experts' rows (in a decode step as sums
 *         of the sources' counts, no barrier, right after its copy, then the kernel's end).
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
 *         most routes a PE may receive names before the length is known);
 *         a row at 16 bytes goes through a loop of plain 16-byte loads.
 *         Calls of LL_POST_ROUTES routes and more (tokens x top-k) take
 *         symm__k_ll_combine_big: block b of B sends the rows b, b + B, ...
 *         (an even split that gives each block a mix of destinations), up to
 *         LL_BATCH at a time, each batch's plain flags released together as
 *         above. In a call of both halves in one kernel with y's rows 16-byte
 *         aligned (ll_cbig_inplace), a plain row from an expert of this PE to
 *         a token of this PE is not copied: the slot's first word gets the
 *         row's offset in y, and the route's flag is released behind it with
 *         the batch's; sender and receiver are then the same kernel, which
 *         applies the rule alike in both halves, and y is the call's until it
 *         ends.
 *   recv  Per token (its hidden dimension split over several blocks when
 *         tokens are fewer than blocks): the valid routes' rows, polled as
 *         packets or waited for by flag, summed weight x row in float32 in
 *         slot order, stored. The big kernel splits the output groups (8
 *         elements) of all the tokens evenly over the blocks, contiguously,
 *         and takes a block's share in chunks of tokens: a thread per route
 *         checks it and waits for its flag (and, for a row left in y, reads
 *         its offset), a barrier, then each thread sums its groups; the first
 *         chunk's indices, weights and modes are loaded as the kernel starts
 *         and stored to shared memory before the send half's first barrier.
 *         In the small handles' kernel a packet token's
 *         routes are polled by one thread each (one round of loads), their
 *         products summed in slot order from shared memory, an element per
 *         thread. Its inputs (bound, routes, weights) are asked for as the
 *         kernel starts, so the send half hides their loads; a decode step's
 *         first unit (one round) is worked out before the send half too, each
 *         thread with its own route's index row (ll_combine_fast).
 * Partial combine (a->ll_part: SYMM_MOE_LL_COMBINE=partial, handles of the general kernels; its
 * kernel symm__k_ll_combine_part, every call of the handle on every PE), same epoch:
 *   send  First, before anything waits, every PE posts its tokens' weights: route (t, k) of
 *         expert x goes to PE x / L as ll_cw[me][t / dp][k] = tag << 32 | the float's bits,
 *         one relaxed 8-byte store (single-copy atomic: the tag stands for the data, no
 *         fence). Then each block scans the rows each local expert received (ll_rcnt) and
 *         takes the units (source s, token slot tl), u = tl n + s, u = b, b + B, ...,
 *         a chunk at a time: every received row whose route (ll_route: source, slot, token)
 *         falls in the chunk notes its place in y and its slot, a barrier; each thread loads
 *         the first round of its two groups' rows, then a thread per route polls its weight
 *         (the rows' loads ride with the crossing), a barrier; per output group, w x row over
 *         the unit's routes in slot order in float32,
 *         rounded once to the output type, stored to every PE of the token's DP group as the
 *         rows mode stores a route's row, but at slot k0, the unit's first slot: packets into
 *         ll_pcbuf[t][k0], or into ll_cbuf[t][k0] with ll_cflag[t][k0] = e released behind
 *         the block's stores (a barrier). A unit of this PE's own token is stored locally.
 *   recv  Per token, the heads: slots k whose expert is valid and whose PE no earlier slot
 *         names (k0 of that PE's unit: the lowest valid slot there, as the dispatch's
 *         validity rule and the sender's agree), ordered by PE; a plain head's flag waited
 *         for; the heads' rows summed in PE order in float32, stored.
 *   Why no PE waits for ever: every wait of the send half is for a weight, and every PE's
 *   send half posts all of its weights before its first wait (every block its share first,
 *   and the grid fits the PE's SMs); the receive half waits for rows whose senders then have
 *   everything they wait for. With do_send / do_recv in two kernels the same holds: a send
 *   half waits only for the peers' send halves, which post before they wait. Reuse: PE s
 *   writes r's ll_cw in combine e + 1 only after its dispatch e + 1 receive half, which
 *   waited for r's counts of e + 1, posted after r's combine e had read them (the chain of
 *   ll_cbuf below); tags differ between e and e + 1. ll_route and ll_rcnt are local, next
 *   written by this PE's next dispatch's receive half, after this combine on its stream.
 *
 * No warp waits for a load before the kernel's first loads are all out: a
 * value needed late (the bound, the epoch, the block count) is loaded by one
 * thread into shared memory, or waited for where nothing else is pending.
 * With PDL the small kernels work out those loads' addresses before they wait
 * for the kernel before them, so the loads go out as the wait ends; what those
 * addresses take that the call alone decides (the splits, the tokens a PE
 * sends, each divisor's reciprocal) the host works out as it launches them
 * (symm__moe_llplan_t), so a block's prologue is a few multiplies of its index,
 * not a chain of divisions.
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
 * s's counts of e + 1, posted after s's combine e receive half had read them
 * (a row left in y: r = s, one stream, combine e + 1 after combine e).
 * Tags and flags differ between consecutive uses of a buffer (e against
 * e - 2, or e - 1), and a packet region is never written plainly, so nothing
 * stale passes for new.
 */
#ifndef SYMM_MOE_LL_CUH
#define SYMM_MOE_LL_CUH

#include "moe/moe_kernels.cuh"

#define LL_UNROLL 4
#define LL_BATCH 32   /* most tokens (or rows) a block handles in one step */
#define LL_KREG 8     /* most top-k whose token indices a combine thread holds in registers */
#define LL_CROUNDS 4  /* most rounds (two barriers each) of a token's slice in ll_combine_fast */
#define LL_RROWS 128  /* most rows whose entries (and plain flags) a dispatch block takes at once */
#define LL_POST_ROUTES SYMM__MOE_LL_POST_ROUTES /* fewest routes (a PE's tokens x top-k) whose lists ll_post_lists posts */
#define LL_CB_UNROLL 8 /* vectors a big-combine thread loads at once before storing them */
#define LL_RUNROLL 4  /* vectors a dispatch thread loads at once when it copies plain rows alone
                       * (6 or 8 spill at the 128 registers of 512 threads) */

/* A count word: epoch << 32 | mode << 30 | LL_CNT_EREL | routes. A flat route's position
 * (ll_flat): expert << 32 | its source's mode << 30 | row. */
#define LL_FLAT_ROW 0x3fffffffu
#define LL_ROUTES 0x1fffffffu
#define LL_CNT_EREL (1u << 29) /* the source's plain rows have no flag: each entry is released behind its row */
#define LL_SM_EREL 4u          /* the same in a receiver's smode (beside the mode bits) */
#define LL_MODE_DPKT SYMM__MOE_LL_MODE_DPKT /* the source's dispatch rows are packets */
#define LL_MODE_CPKT SYMM__MOE_LL_MODE_CPKT /* its tokens' combine rows come back as packets */

/* x / d by the host's m of d (symm__moe_llplan_t): a multiply's high word where a division is a
 * chain of some twenty instructions. */
SYMM__DEVICE_INTERNAL uint32_t ll_fdiv(uint32_t x, uint32_t m) { return m ? __umulhi(x, m) : x; }

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

/* Does my group's token t come back as packets: its source's mode says so
 * (and t has a packet slot, which a source that asked for packets ensures;
 * sender and receiver apply the same rule either way). */
SYMM__DEVICE_INTERNAL int ll_cpkt(const symm__moe_kargs_t *A, uint32_t mode, uint64_t t) {
    return (mode & LL_MODE_CPKT) != 0 && t < A->pmt;
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

#define LL_NSTAMP 28
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
/* the big combine's own (its end: LLS_C_END) */
#define LLS_CB_COPY 7 /* thread 0's stores of the first batch issued */
#define LLS_CB_REL 8  /* the first batch's flags released */
#define LLS_CB_SUM 9  /* thread 0's groups of the first chunk summed */
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
#define LLS_DS_VALID 19 /* header block: thread 0's route checked (ll_valid, its PE) */
#define LLS_DS_RECV 24  /* receive half: thread 0's first loads issued and shared counters cleared */
#define LLS_DS_NOTE 25  /* the routes' count and the sources' modes noted for the combine */
#define LLS_DS_XCNT 26  /* the block's share of the experts' row counts stored */
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
 * d <stage - t0, ns, -1: not reached> x 27"; scripts/moe_ll_stamps.py sums them up
 * (its STAGES name the stamps of each kernel). */
SYMM__NOINLINE void ll_stamps_print(const symm__moe_kargs_t *A, const char *kernel, uint32_t nst) {
    const uint64_t *s = ll_stamps();
    long long d[LL_NSTAMP];
    for (uint32_t i = 0; i < LL_NSTAMP; i++)
        d[i] = i < nst && s[i] ? (long long)(s[i] - s[0]) : -1;
    printf("llstamp %s E %u M %u pe %d block %u t0 %llu d %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld "
           "%lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld\n",
           kernel, A->experts, A->max_tokens, A->me, blockIdx.x, (unsigned long long)s[0], d[1], d[2], d[3], d[4],
           d[5], d[6], d[7], d[8], d[9], d[10], d[11], d[12], d[13], d[14], d[15], d[16], d[17], d[18], d[19], d[20],
           d[21], d[22], d[23], d[24], d[25], d[26], d[27]);
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

/* The last i < n with pre[i] <= x (pre ascending, pre[0] <= x): the expert (or item) a flat
 * row (or route) x falls in, by bisection. */
SYMM__DEVICE_INTERNAL uint32_t ll_bisect(const uint32_t *pre, uint32_t n, uint32_t x) {
    uint32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        const uint32_t mid = (lo + hi + 1) / 2;
        if (pre[mid] <= x)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* pre[x]: the first flat row of local expert x, a block scan of the counts (c: this thread's
 * first, from ll_rcnt_load), and pre[L] their total, returned; ends with a barrier. */
SYMM__DEVICE_INTERNAL uint32_t ll_rcnt_scan(const symm__moe_kargs_t *A, uint32_t c, uint32_t *pre) {
    const uint32_t tid = symm__block_tid(), L = A->local;
    uint32_t run = 0;
    for (uint32_t b0 = 0; b0 < L; b0 += SYMM__MOE_THREADS) {
        const uint32_t x = b0 + tid, cx = b0 == 0 ? c : (x < L ? MOE_U32(A, ll_rcnt)[x] : 0);
        uint32_t sum, ex = moe_block_scan(cx, &sum);
        if (x < L)
            pre[x] = run + ex;
        run += sum;
    }
    if (tid == 0)
        pre[L] = run;
    symm__block_sync();
    return pre[L];
}

/* The block's count (the dispatch kernel's epoch rule), by the first thread of its last warp
 * while the receive half's first waits run (warps 0 .. poll): the atomic's round trip, which
 * that warp waits for, overlaps them. Once per kernel (*ticket != 0 after). */
SYMM__DEVICE_INTERNAL void ll_count_late(const symm__moe_kargs_t *A, uint32_t *ticket) {
    if (ticket != NULL && symm__block_tid() == SYMM__MOE_THREADS - 32 && *ticket == 0)
        *ticket = ll_count_block(A, SYMM__MK_LL_DISPATCH);
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

/* The kernels (each defined in its file above, launched by moe_ll_launch.cu). */
__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ll_dispatch(const __grid_constant__ symm__moe_kargs_t a);
__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ll_dispatch_big(const __grid_constant__ symm__moe_kargs_t a);
__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ll_dispatch_small(const __grid_constant__ symm__moe_kargs_t a);
__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ll_combine(const __grid_constant__ symm__moe_kargs_t a);
__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ll_combine_big(const __grid_constant__ symm__moe_kargs_t a);
__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ll_combine_small(const __grid_constant__ symm__moe_kargs_t a);
__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ll_combine_part(const __grid_constant__ symm__moe_kargs_t a);

#endif /* SYMM_MOE_LL_CUH */
