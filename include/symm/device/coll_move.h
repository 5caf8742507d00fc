/*
 * device/coll_move.h - data movement: all-gather, all-to-all(v) and
 * broadcast, as packets and directly.
 * Part of the collectives' device code: included by coll_impl.h, in
 * order, after coll_layout.h and coll_reduce.h; never include it alone.
 */
#ifndef SYMM_DEVICE_COLL_MOVE_H
#define SYMM_DEVICE_COLL_MOVE_H

/* ---- data movement --------------------------------------------------------------- */

/* The signature of a move: broadcast (root >= 0), all-to-all (a piece per
 * peer) or all-gather. */
SYMM__DEVICE_INTERNAL uint64_t symm__c_move_sig(uint64_t nbytes, uint64_t piece, int root) {
    int call = root >= 0 ? SYMM__C_CALL_BCAST : piece ? SYMM__C_CALL_A2A : SYMM__C_CALL_AG;
    return symm__c_sig(call, nbytes, -1, 0, root);
}

/*
 * PACKET all-gather / all-to-all / broadcast: this PE sends words of
 * src + piece * p to PE p (piece 0: the same data to all) as packets into
 * its region there and writes its own share locally, then polls every
 * sender's packets into dst + out_stride * p. root >= 0 (broadcast): only
 * the root sends, everything lands at dst, in one NVLink trip; every PE
 * announces the call as it starts and waits for the others' announcements
 * before it leaves (symm__c_announce), which keeps the regions safe without
 * a handshake ahead of the data.
 */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_move_packet(
    const symm_ctx_t *ctx, const symm__coll_ws_t *ws, char *dst, const char *src, uint64_t nbytes,
    uint64_t piece, uint64_t out_stride, int root, uint32_t slot, uint32_t nslots) {
    int me = ctx->my_pe, n = ctx->n_pes;
    uint64_t t = symm__block_tid(), nt = symm__block_nthreads();
    uint64_t lo, hi, k;
    symm__c_ep_t e;
    int sends = (root < 0 || root == me);
    uint32_t fs;
    if (symm__c_slot_idle((nbytes + 7) / 8, nslots, slot))
        return;
    e = symm__c_epoch_begin(ws, slot);
    fs = e.flag ^ symm__c_sig32(symm__c_move_sig(nbytes, piece, root));
    if (root >= 0)
        symm__c_announce(ctx, ws, e, slot);
    symm__c_split((nbytes + 7) / 8, nslots, slot, &lo, &hi);
    if (sends) {
        for (k = lo + t; k < hi; k += nt) {
            uint32_t nb = symm__c_word_nb(nbytes, k);
            uint64_t w0 = piece ? 0 : symm__c_ldw(src + 8 * k, nb);
            for (int i = 1; i < n; i++) {
                int p = me + i < n ? me + i : me + i - n;
                uint64_t w = piece ? symm__c_ldw(src + (uint64_t)p * piece + 8 * k, nb) : w0;
                symm__c_st16_vol(symm__c_peer(ctx, symm__c_region(ws, e.par, slot, n, me) + (k - lo) * 16, p),
                                 symm__c_pkt(w, e.flag, fs));
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
            const char *reg = symm__c_region(ws, e.par, slot, n, p);
            uint64_t w = symm__c_wait_pkt(ctx, reg, reg + (k - lo) * 16, e.flag, fs, p);
            symm__c_stw(dst + (uint64_t)(root < 0 ? p : 0) * out_stride + 8 * k, w, nb);
        }
    }
    if (root >= 0)
        symm__c_await_all(ctx, ws, e, slot);
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
 * reuse: as for the one-hop form (symm__c_announce at the start, every
 * peer's announcement awaited at the end); a non-root stores into the other
 * non-roots' regions of this parity, which the end of the slot's previous
 * call made safe the same way.
 */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_bcast_packet2(
    const symm_ctx_t *ctx, const symm__coll_ws_t *ws, char *dst, const char *src, uint64_t nbytes, int root,
    uint32_t slot, uint32_t nslots) {
    int me = ctx->my_pe, n = ctx->n_pes, m = n - 1;
    uint64_t t = symm__block_tid(), nt = symm__block_nthreads();
    uint64_t lo, hi, plo, phi, k;
    int j, mine = (me - root - 1 + n) % n; /* this non-root's part */
    uint32_t fs;
    symm__c_ep_t e;
    if (symm__c_slot_idle((nbytes + 7) / 8, nslots, slot))
        return;
    e = symm__c_epoch_begin(ws, slot);
    fs = e.flag ^ symm__c_sig32(symm__c_move_sig(nbytes, 0, root));
    symm__c_announce(ctx, ws, e, slot);
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
                symm__c_st16_vol(reg + (k - plo) * 16, symm__c_pkt(w, e.flag, fs));
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
            const char *reg = symm__c_region(ws, e.par, slot, n, root);
            uint64_t w = symm__c_wait_pkt(ctx, reg, reg + (k - plo) * 16, e.flag, fs, root);
            for (int i = 1; i < m; i++) {
                int q = (root + 1 + (mine + i) % m) % n;
                symm__c_st16_vol(symm__c_peer(ctx, symm__c_region(ws, e.par, slot, n, me) + (k - plo) * 16, q),
                                 symm__c_pkt(w, e.flag, fs));
            }
            symm__c_stw(dst + b, w, nb);
        }
        for (int i = 1; i < m; i++) {
            j = (mine + i) % m;
            int from = (root + 1 + j) % n;
            const char *reg = symm__c_region(ws, e.par, slot, n, from);
            symm__c_split(hi - lo, (uint32_t)m, (uint32_t)j, &plo, &phi);
            for (k = plo + t; k < phi; k += nt) {
                uint64_t b = 8 * (lo + k);
                uint32_t nb = symm__c_word_nb(nbytes, lo + k);
                symm__c_stw(dst + b, symm__c_wait_pkt(ctx, reg, reg + (k - plo) * 16, e.flag, fs, from), nb);
            }
        }
    }
    symm__c_await_all(ctx, ws, e, slot);
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
 * 16 pieces of at least 16 KiB: fewer or more lose (64 MiB: 217 us against
 * 244 with 4 and 239 with 64), each piece's release costing more than the
 * shorter pipeline ends save (docs/tuning.md).
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
                symm__c_wait_flag_from(ctx, symm__c_flag(ws, SYMM__C_KIND_PIECE, e.par, slot, (int)k), e.flag,
                                       (int)k);
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
 * Chained broadcast inside one slot: the PEs form a chain from the root,
 * root -> root + 1 -> ... -> root - 1 (mod n). Each warp of the block owns a
 * contiguous part of the slot's share [lo, hi) (16-byte units) and copies
 * it with eight 16-byte loads a lane in flight (symm__c_chain_copy). Where
 * the next PE forwards (n >= 3), the block moves in batches: batch k is
 * every warp's k-th piece of its part; each warp waits for the batch itself
 * (no barrier), copies its piece into the next PE's dst (the root from src,
 * storing each vector into its own dst too unless in place; a middle PE from
 * its own dst), and after a block barrier thread 0 releases the batch there
 * while the other warps go on with the next one. The PE before the last
 * releases nothing: each warp copies whatever has landed of its part; with
 * 2 PEs the root's warps copy their parts in one go. The last PE only
 * receives (the caller's end handshake covers what landed in it). Every dst
 * byte is written once, by one PE.
 *
 * Batches: a batch costs a fixed time (the release is a system-scope fence,
 * then the next PE's poll) besides its bytes, and a byte waits at each hop
 * until its batch is complete while every block moves a batch at once, so
 * the fill and drain cost n - 2 times (blocks x batch) bytes. A block passes
 * on `chunk` bytes per release, but takes at least SYMM__C_CHAIN_MIN_BATCHES
 * batches (so small calls do not turn into store and forward): 64 MiB over
 * 128 blocks gives 64 KiB batches from 128 KiB, 8 MiB a hop of fill and
 * drain. With 3 and 4 PEs sharing one H200 (a few blocks a PE), 128 KiB
 * batches beat 32 and 16 KiB at every size from 2 MiB; releases per 512
 * bytes a warp had made the chain 8 times slower than per 6 KiB a warp.
 *
 * Progress word: kind-2 words 0 and 1 of the slot and parity, one 8-byte
 * word: the call's flag in the high half, the 16-byte units of each warp's
 * part released so far in the low half, stored with st.release.sys by
 * thread 0 after the block barrier (cumulative: it covers every warp's
 * stores), polled with ld.acquire.sys by lane 0 of each warp, then a warp
 * barrier (so every lane's loads come after the acquire) and a shuffle that
 * hands the count to the lanes. A larger count covers every earlier batch;
 * an earlier call's word carries another flag. One writer (the
 * predecessor's thread 0) per word in a call.
 *
 * Why: per data byte every GPU moves at most 1 byte out and 1 in, as in the
 * direct form, but each GPU stores to one peer only and is stored into by
 * one peer only (the pattern of NCCL's ring broadcast, 351 GB/s busbw at 256
 * MiB on 4x H200, and of one SM copy into one peer, 368 GB/s), where the
 * direct form's root spreads every piece over n - 1 targets and each
 * non-root is written by up to n - 1 senders at once (308.5 GB/s).
 */
#define SYMM__C_CHAIN_DEPTH 8            /* 16-byte loads in flight per lane */
#define SYMM__C_CHAIN_MIN_BATCHES 8u    /* a block's batches, at least (where it has the units) */

/* One warp copies nb bytes from s to d (the next PE's dst) and, with two,
 * to d2 too (the root's own dst, local). All addresses 16-byte aligned: each
 * lane loads SYMM__C_CHAIN_DEPTH vectors before it stores them (4 KiB a
 * warp per round); otherwise symm__copy's general path. Not inlined: its 32
 * data registers inlined into the chain made the kernel spill. */
SYMM__NOINLINE void symm__c_chain_copy(char *d, char *d2, const char *s, uint64_t nb, uint32_t lane, int two) {
    uint64_t nv = nb >> 4, i = lane;
    symm__v4_t v[SYMM__C_CHAIN_DEPTH];
    if ((((uintptr_t)d | (uintptr_t)s | (two ? (uintptr_t)d2 : 0u)) & 15u) != 0) {
        symm__copy(d, s, nb, lane, 32, 1);
        if (two)
            symm__copy(d2, s, nb, lane, 32, 0);
        return;
    }
    for (; i + 32u * (SYMM__C_CHAIN_DEPTH - 1) < nv; i += 32u * SYMM__C_CHAIN_DEPTH) {
        _Pragma("unroll") for (int k = 0; k < SYMM__C_CHAIN_DEPTH; k++)
            v[k] = symm__cld16(s + (i + 32u * (uint32_t)k) * 16, 0);
        _Pragma("unroll") for (int k = 0; k < SYMM__C_CHAIN_DEPTH; k++) {
            symm__cst16(d + (i + 32u * (uint32_t)k) * 16, v[k], 1);
            if (two)
                symm__cst16(d2 + (i + 32u * (uint32_t)k) * 16, v[k], 0);
        }
    }
    if (i < nv) { /* the last, partial round: its loads in flight together too */
        _Pragma("unroll") for (int k = 0; k < SYMM__C_CHAIN_DEPTH; k++) {
            v[k].x = v[k].y = v[k].z = v[k].w = 0;
            if (i + 32u * (uint32_t)k < nv)
                v[k] = symm__cld16(s + (i + 32u * (uint32_t)k) * 16, 0);
        }
        _Pragma("unroll") for (int k = 0; k < SYMM__C_CHAIN_DEPTH; k++)
            if (i + 32u * (uint32_t)k < nv) {
                symm__cst16(d + (i + 32u * (uint32_t)k) * 16, v[k], 1);
                if (two)
                    symm__cst16(d2 + (i + 32u * (uint32_t)k) * 16, v[k], 0);
            }
    }
    if ((nb & 15u) != 0 && lane == 31) {
        symm__copy_small(d + nv * 16, s + nv * 16, nb & 15u, 1);
        if (two)
            symm__copy_small(d2 + nv * 16, s + nv * 16, nb & 15u, 0);
    }
}

/* Lane 0 waits until the chain's progress word counts more than `done`
 * units (acquire); every lane gets the count. */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT uint32_t symm__c_chain_wait(const symm_ctx_t *ctx, const uint64_t *w,
                                                                   uint32_t flag, uint32_t done, int from,
                                                                   uint32_t lane) {
    uint32_t got = 0;
    if (lane == 0)
        got = symm__c_wait_count_from(ctx, w, flag, done, from);
    symm__warp_sync(); /* orders every lane's loads after lane 0's acquire */
    return symm__warp_bcast0(got);
}

/* The chain over [lo, hi) of one slot, batches of `chunk` bytes a block
 * (rounded to whole units a warp). Blocks of whole warps (the stream kernel's 512 threads). The batch
 * depends only on the sizes, n and chunk, the same on every PE. */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_bcast_chain(
    const symm_ctx_t *ctx, const symm__coll_ws_t *ws, const symm__c_xs_t *x, char *dst, const char *src,
    uint64_t lo, uint64_t hi, int root, uint64_t chunk, symm__c_ep_t e, uint32_t slot) {
    int me = ctx->my_pe, n = ctx->n_pes;
    int pos = (me - root + n) % n; /* 0: the root; n - 1: the last */
    int next = me + 1 < n ? me + 1 : 0, prev = me > 0 ? me - 1 : n - 1;
    int two = pos == 0 && dst != src;
    uint32_t t = symm__block_tid(), lane = t & 31u, w = t >> 5, nw = symm__block_nthreads() >> 5;
    uint64_t units = hi > lo ? (hi - lo + 15) / 16 : 0, a, b, wlo, whi;
    uint32_t wu, per, batch, done = 0, upto;
    const char *from = pos == 0 ? src : dst;
    char *out;
    uint64_t *inw;
    if ((n > 1 && pos == n - 1) || nw == 0)
        return;
    symm__c_split(units, nw, w < nw ? w : nw, &a, &b); /* a partial last warp: nothing */
    /* counts in 16-byte units: a launch moves at most one staging piece,
     * far below 2^32 units a warp */
    wu = (uint32_t)(b - a);
    per = (uint32_t)((units + nw - 1) / nw); /* the largest part */
    wlo = lo + 16 * a;
    whi = lo + 16 * b < hi ? lo + 16 * b : hi;
    out = n > 1 ? symm__c_xaddr(x, dst, next, 1) : NULL; /* one PE: only the root's own copy */
    inw = (uint64_t *)symm__c_flag(ws, SYMM__C_KIND_PIECE, e.par, slot, 0);
    if (out == NULL) {
        if (dst != src && hi > lo)
            symm__copy(dst + lo, src + lo, hi - lo, t, symm__block_nthreads(), 0);
        return;
    }
    if (pos < n - 2) {
        /* released batch by batch: the block's batch in units a warp */
        uint64_t bw = chunk < 16 * (uint64_t)nw ? 1 : chunk / (16 * (uint64_t)nw);
        uint64_t most = per / SYMM__C_CHAIN_MIN_BATCHES;
        uint64_t *outw = (uint64_t *)symm__c_peer(ctx, inw, next);
        if (bw > most)
            bw = most > 0 ? most : 1;
        batch = (uint32_t)bw;
        for (upto = batch < per ? batch : per; done < per; upto = per - upto > batch ? upto + batch : per) {
            uint32_t mlo = done < wu ? done : wu, mhi = upto < wu ? upto : wu;
            if (pos > 0 && w < nw)
                symm__c_chain_wait(ctx, inw, e.flag, upto - 1, prev, lane);
            if (mhi > mlo) {
                uint64_t blo = wlo + 16 * (uint64_t)mlo, bhi = wlo + 16 * (uint64_t)mhi;
                if (bhi > whi)
                    bhi = whi;
                if (two)
                    symm__c_chain_copy(out + blo, dst + blo, from + blo, bhi - blo, lane, 1);
                else
                    symm__c_chain_copy(out + blo, NULL, from + blo, bhi - blo, lane, 0);
            }
            symm__block_sync(); /* the release below covers every warp's stores */
            if (t == 0)
                symm__c_st8_release(outw, (uint64_t)e.flag << 32 | upto);
            done = upto;
        }
        return;
    }
    if (w >= nw)
        return;
    while (done < wu) { /* 2 PEs, or the PE before the last: nothing to release */
        uint64_t blo, bhi;
        if (pos == 0) {
            upto = wu;
        } else {
            upto = symm__c_chain_wait(ctx, inw, e.flag, done, prev, lane);
            if (upto > wu)
                upto = wu;
        }
        blo = wlo + 16 * (uint64_t)done;
        bhi = wlo + 16 * (uint64_t)upto < whi ? wlo + 16 * (uint64_t)upto : whi;
        if (two)
            symm__c_chain_copy(out + blo, dst + blo, from + blo, bhi - blo, lane, 1);
        else
            symm__c_chain_copy(out + blo, NULL, from + blo, bhi - blo, lane, 0);
        done = upto;
    }
}

/*
 * Direct movement into the peers' dst: start handshake, this PE copies its
 * slot's share of src + piece * p to PE p's dst + out_off for every p (skipping
 * the copy onto itself in place), end handshake. root >= 0 (broadcast,
 * out_off 0): symm__c_bcast_pieces, or with chain > 0 symm__c_bcast_chain
 * in batches of `chain` bytes a block.
 */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_move_direct(
    const symm_ctx_t *ctx, const symm__coll_ws_t *ws, char *dst, const char *src, uint64_t nbytes,
    uint64_t piece, uint64_t out_off, int root, uint64_t chain, uint32_t slot, uint32_t nslots) {
    int me = ctx->my_pe, n = ctx->n_pes;
    uint32_t t = symm__block_tid(), nt = symm__block_nthreads();
    uint64_t lo, hi;
    symm__c_ep_t e = symm__c_epoch_begin(ws, slot);
    /* the chain's chunk in the signature's op bits (modulo 15): PEs that cut
     * the chain differently stop with a message instead of waiting */
    uint64_t sig = symm__c_move_sig(nbytes, piece, root) ^
                   ((uint64_t)(chain ? 1u + (uint32_t)((chain >> 4) % 15u) : 0u) << 52);
    symm__c_xs_t x = symm__c_handshake_pub(ctx, ws, e, slot, src, dst, 0, 0, sig, SYMM__C_PEERS_DST);
    /* cut at 16-byte boundaries so every part keeps the buffers' alignment */
    symm__c_split((nbytes + 15) / 16, nslots, slot, &lo, &hi);
    lo *= 16;
    hi = hi * 16 > nbytes ? nbytes : hi * 16;
    if (root >= 0 && chain > 0) {
        symm__c_bcast_chain(ctx, ws, &x, dst, src, lo, hi, root, chain, e, slot);
    } else if (root >= 0) {
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
    symm__c_xs_t x = symm__c_handshake_pub(ctx, ws, e, slot, src, dst, rdispl, rcount, 0, SYMM__C_PEERS_DST);
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

#endif /* SYMM_DEVICE_COLL_MOVE_H */
