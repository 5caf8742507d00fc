/*
 * device/coll_api.h - the public device collectives (symm_device_coll.h) on
 * top of the algorithms of coll_impl.h, with the team's internal scratch as
 * workspace. Included by symm_device_coll.h in device code only.
 */
#ifndef SYMM_DEVICE_COLL_API_H
#define SYMM_DEVICE_COLL_API_H

#include "symm/contract/coll_auto.h" /* SYMM__COLL_DEV_PACKET_MAX, SYMM__COLL_DEV_ONESHOT_MAX */

/* Check the shared preconditions; returns the element size or stops. */
SYMM__DEVICE_INTERNAL uint32_t symm__c_dev_check(const symm_ctx_t *ctx, const char *call, int dtype, int op,
                                                 int acc, int block, int nblocks, int reducing) {
    uint32_t esz = symm__c_dtype_size(dtype);
    if (esz == 0)
        symm__c_fail(ctx->world_pe, call, "unknown dtype", dtype, op, acc);
    if (reducing && symm__c_red_kind(dtype, op, acc) < 0)
        symm__c_fail(ctx->world_pe, call, "unsupported dtype/op/accumulator", dtype, op, acc);
    if (nblocks < 1 || nblocks > (int)SYMM_COLL_MAX_BLOCKS || block < 0 || block >= nblocks)
        symm__c_fail(ctx->world_pe, call, "block/nblocks out of range (see SYMM_COLL_MAX_BLOCKS)", block,
                     nblocks, -1);
    if (!symm__ldst_all(ctx))
        symm__c_fail(ctx->world_pe, call, "device collectives need every PE of the team in the context's "
                     "load/store window (the stream collectives reach the others through the backend)",
                     dtype, op, acc);
    if (ctx->scratch == 0 || ctx->scratch_size < SYMM__COLL_WS_SYNC_BYTES || ctx->n_pes > SYMM_COLL_MAX_PES)
        symm__c_fail(ctx->world_pe, call, "team has no collective scratch (or too many PEs)", dtype, op, acc);
    return esz;
}

/* Does a PACKET (pkt != 0) or ONESHOT call of nbytes per PE fit the regions
 * when cut among nblocks blocks? (ONESHOT keeps a region's last 16 bytes for
 * the call's signature: symm__c_handshake_sig.) */
SYMM__DEVICE_INTERNAL int symm__c_fits(const symm__coll_ws_t *ws, uint64_t nbytes, int nblocks, int pkt) {
    uint64_t units = pkt ? (nbytes + 7) / 8 : (nbytes + 15) / 16;
    uint64_t per = (units + (uint64_t)nblocks - 1) / (uint64_t)nblocks;
    return ws->data != 0 && (uint32_t)nblocks <= ws->nbmax && per * 16 + (pkt ? 0u : 16u) <= ws->region;
}

SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_dev_all_reduce(const symm_ctx_t *ctx, void *dest,
                                                                    const void *src, size_t count, int dtype,
                                                                    int op, int acc, int algo, int block,
                                                                    int nblocks) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_BLOCK);
    uint32_t esz = symm__c_dev_check(ctx, "symm_all_reduce", dtype, op, acc, block, nblocks, 1);
    symm__coll_ws_t ws = symm__c_ctx_ws(ctx);
    uint64_t nbytes = (uint64_t)count * esz;
    int kind = symm__c_red_kind(dtype, op, acc);
    if (algo == SYMM_COLL_ALGO_AUTO)
        algo = nbytes <= SYMM__COLL_DEV_PACKET_MAX ? SYMM_COLL_ALGO_PACKET
             : nbytes <= SYMM__COLL_DEV_ONESHOT_MAX ? SYMM_COLL_ALGO_ONESHOT : SYMM_COLL_ALGO_TWOSHOT;
    if (algo == SYMM_COLL_ALGO_PACKET && !symm__c_fits(&ws, nbytes, nblocks, 1))
        algo = SYMM_COLL_ALGO_ONESHOT;
    if (algo == SYMM_COLL_ALGO_ONESHOT && !symm__c_fits(&ws, nbytes, nblocks, 0))
        algo = SYMM_COLL_ALGO_TWOSHOT;
    switch (algo) {
    case SYMM_COLL_ALGO_PACKET:
        symm__c_red_packet(ctx, &ws, (char *)dest, (const char *)src, nbytes, 0, kind, op, (uint32_t)block,
                           (uint32_t)nblocks);
        break;
    case SYMM_COLL_ALGO_ONESHOT:
        symm__c_ar_oneshot(ctx, &ws, (char *)dest, (const char *)src, nbytes, kind, op, (uint32_t)block,
                           (uint32_t)nblocks);
        break;
    default: /* TWOSHOT, and MULTIMEM: device calls have no multicast address */
        symm__c_ar_twoshot(ctx, &ws, (char *)dest, (const char *)src, nbytes, kind, op, (uint32_t)block,
                           (uint32_t)nblocks);
        break;
    }
    SYMM__TRACE_COLL(ctx, t_, SYMM_TRACE_COLL_ALL_REDUCE, algo, 0u, nbytes);
}

SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_dev_reduce_scatter(const symm_ctx_t *ctx, void *dest,
                                                                        const void *src, size_t count,
                                                                        int dtype, int op, int acc, int algo,
                                                                        int block, int nblocks) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_BLOCK);
    uint32_t esz = symm__c_dev_check(ctx, "symm_reduce_scatter", dtype, op, acc, block, nblocks, 1);
    symm__coll_ws_t ws = symm__c_ctx_ws(ctx);
    uint64_t nbytes = (uint64_t)count * esz;
    int kind = symm__c_red_kind(dtype, op, acc);
    if (algo == SYMM_COLL_ALGO_AUTO)
        algo = nbytes <= SYMM__COLL_DEV_PACKET_MAX ? SYMM_COLL_ALGO_PACKET : SYMM_COLL_ALGO_TWOSHOT;
    if (algo == SYMM_COLL_ALGO_PACKET && symm__c_fits(&ws, nbytes, nblocks, 1))
        symm__c_red_packet(ctx, &ws, (char *)dest, (const char *)src, nbytes, nbytes, kind, op,
                           (uint32_t)block, (uint32_t)nblocks);
    else
        symm__c_rs_direct(ctx, &ws, (char *)dest, (const char *)src, nbytes, nbytes, kind, op, (uint32_t)block,
                          (uint32_t)nblocks);
    SYMM__TRACE_COLL(ctx, t_, SYMM_TRACE_COLL_REDUCE_SCATTER, algo, 0u, nbytes);
}

/* all-gather (a2a = 0) and all-to-all (a2a = 1). */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_dev_move(const symm_ctx_t *ctx, const char *call, void *dest,
                                                              const void *src, size_t count, int dtype, int a2a,
                                                              int block, int nblocks) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_BLOCK);
    uint32_t esz = symm__c_dev_check(ctx, call, dtype, 0, -1, block, nblocks, 0);
    symm__coll_ws_t ws = symm__c_ctx_ws(ctx);
    uint64_t nbytes = (uint64_t)count * esz;
    const int pkt = nbytes <= SYMM__COLL_DEV_PACKET_MAX && symm__c_fits(&ws, nbytes, nblocks, 1);
    if (pkt)
        symm__c_move_packet(ctx, &ws, (char *)dest, (const char *)src, nbytes, a2a ? nbytes : 0, nbytes, -1,
                            (uint32_t)block, (uint32_t)nblocks);
    else
        symm__c_move_direct(ctx, &ws, (char *)dest, (const char *)src, nbytes, a2a ? nbytes : 0,
                            (uint64_t)ctx->my_pe * nbytes, -1, 0, (uint32_t)block, (uint32_t)nblocks);
    SYMM__TRACE_COLL(ctx, t_, a2a ? SYMM_TRACE_COLL_ALL_TO_ALL : SYMM_TRACE_COLL_ALL_GATHER,
                     pkt ? SYMM_COLL_ALGO_PACKET : SYMM_COLL_ALGO_TWOSHOT, 0u, nbytes);
    (void)pkt;
}

SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__c_dev_broadcast(const symm_ctx_t *ctx, void *dest,
                                                                   const void *src, size_t count, int dtype,
                                                                   int root, int block, int nblocks) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_BLOCK);
    uint32_t esz = symm__c_dev_check(ctx, "symm_broadcast", dtype, 0, -1, block, nblocks, 0);
    symm__coll_ws_t ws = symm__c_ctx_ws(ctx);
    uint64_t nbytes = (uint64_t)count * esz;
    if (root < 0 || root >= ctx->n_pes)
        symm__c_fail(ctx->world_pe, "symm_broadcast", "root outside the team", dtype, root, -1);
    const int pkt = nbytes <= SYMM__COLL_DEV_PACKET_MAX && symm__c_fits(&ws, nbytes, nblocks, 1);
    if (pkt)
        symm__c_move_packet(ctx, &ws, (char *)dest, (const char *)src, nbytes, 0, 0, root, (uint32_t)block,
                            (uint32_t)nblocks);
    else
        symm__c_move_direct(ctx, &ws, (char *)dest, (const char *)src, nbytes, 0, 0, root, 0, (uint32_t)block,
                            (uint32_t)nblocks);
    SYMM__TRACE_COLL(ctx, t_, SYMM_TRACE_COLL_BROADCAST, pkt ? SYMM_COLL_ALGO_PACKET : SYMM_COLL_ALGO_TWOSHOT, 0u,
                     nbytes);
    (void)pkt;
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_all_reduce_block(const symm_ctx_t *ctx, void *dest, const void *src,
                                                           size_t count, int dtype, int op) {
    symm__c_dev_all_reduce(ctx, dest, src, count, dtype, op, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_AUTO, 0, 1);
}
SYMM_DEVICE_FN SYMM__CONVERGENT void symm_all_reduce_grid(const symm_ctx_t *ctx, void *dest, const void *src,
                                                          size_t count, int dtype, int op, int block,
                                                          int nblocks) {
    symm__c_dev_all_reduce(ctx, dest, src, count, dtype, op, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_AUTO, block,
                           nblocks);
}
SYMM_DEVICE_FN SYMM__CONVERGENT void symm_all_reduce_ex_block(const symm_ctx_t *ctx, void *dest,
                                                              const void *src, size_t count, int dtype,
                                                              int op, int acc, int algo) {
    symm__c_dev_all_reduce(ctx, dest, src, count, dtype, op, acc, algo, 0, 1);
}
SYMM_DEVICE_FN SYMM__CONVERGENT void symm_all_reduce_ex_grid(const symm_ctx_t *ctx, void *dest,
                                                             const void *src, size_t count, int dtype,
                                                             int op, int acc, int algo, int block,
                                                             int nblocks) {
    symm__c_dev_all_reduce(ctx, dest, src, count, dtype, op, acc, algo, block, nblocks);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_reduce_scatter_block(const symm_ctx_t *ctx, void *dest,
                                                               const void *src, size_t count, int dtype,
                                                               int op) {
    symm__c_dev_reduce_scatter(ctx, dest, src, count, dtype, op, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_AUTO, 0, 1);
}
SYMM_DEVICE_FN SYMM__CONVERGENT void symm_reduce_scatter_grid(const symm_ctx_t *ctx, void *dest,
                                                              const void *src, size_t count, int dtype,
                                                              int op, int block, int nblocks) {
    symm__c_dev_reduce_scatter(ctx, dest, src, count, dtype, op, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_AUTO,
                               block, nblocks);
}
SYMM_DEVICE_FN SYMM__CONVERGENT void symm_reduce_scatter_ex_block(const symm_ctx_t *ctx, void *dest,
                                                                  const void *src, size_t count, int dtype,
                                                                  int op, int acc, int algo) {
    symm__c_dev_reduce_scatter(ctx, dest, src, count, dtype, op, acc, algo, 0, 1);
}
SYMM_DEVICE_FN SYMM__CONVERGENT void symm_reduce_scatter_ex_grid(const symm_ctx_t *ctx, void *dest,
                                                                 const void *src, size_t count, int dtype,
                                                                 int op, int acc, int algo, int block,
                                                                 int nblocks) {
    symm__c_dev_reduce_scatter(ctx, dest, src, count, dtype, op, acc, algo, block, nblocks);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_all_gather_block(const symm_ctx_t *ctx, void *dest, const void *src,
                                                           size_t count, int dtype) {
    symm__c_dev_move(ctx, "symm_all_gather", dest, src, count, dtype, 0, 0, 1);
}
SYMM_DEVICE_FN SYMM__CONVERGENT void symm_all_gather_grid(const symm_ctx_t *ctx, void *dest, const void *src,
                                                          size_t count, int dtype, int block, int nblocks) {
    symm__c_dev_move(ctx, "symm_all_gather", dest, src, count, dtype, 0, block, nblocks);
}
SYMM_DEVICE_FN SYMM__CONVERGENT void symm_all_to_all_block(const symm_ctx_t *ctx, void *dest, const void *src,
                                                           size_t count, int dtype) {
    symm__c_dev_move(ctx, "symm_all_to_all", dest, src, count, dtype, 1, 0, 1);
}
SYMM_DEVICE_FN SYMM__CONVERGENT void symm_all_to_all_grid(const symm_ctx_t *ctx, void *dest, const void *src,
                                                          size_t count, int dtype, int block, int nblocks) {
    symm__c_dev_move(ctx, "symm_all_to_all", dest, src, count, dtype, 1, block, nblocks);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_all_to_allv_block(const symm_ctx_t *ctx, void *dest, const void *src,
                                                            const uint64_t *send_counts,
                                                            const uint64_t *send_displs,
                                                            const uint64_t *recv_counts,
                                                            const uint64_t *recv_displs, int dtype) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_BLOCK);
    uint32_t esz = symm__c_dev_check(ctx, "symm_all_to_allv", dtype, 0, -1, 0, 1, 0);
    symm__coll_ws_t ws = symm__c_ctx_ws(ctx);
    symm__c_a2av_direct(ctx, &ws, (char *)dest, (const char *)src, send_counts, send_displs, recv_counts,
                        recv_displs, esz, 0, 1);
    SYMM__TRACE_COLL(ctx, t_, SYMM_TRACE_COLL_ALL_TO_ALLV, SYMM_COLL_ALGO_TWOSHOT, 0u, 0);
}
SYMM_DEVICE_FN SYMM__CONVERGENT void symm_all_to_allv_grid(const symm_ctx_t *ctx, void *dest, const void *src,
                                                           const uint64_t *send_counts,
                                                           const uint64_t *send_displs,
                                                           const uint64_t *recv_counts,
                                                           const uint64_t *recv_displs, int dtype, int block,
                                                           int nblocks) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_BLOCK);
    uint32_t esz = symm__c_dev_check(ctx, "symm_all_to_allv", dtype, 0, -1, block, nblocks, 0);
    symm__coll_ws_t ws = symm__c_ctx_ws(ctx);
    symm__c_a2av_direct(ctx, &ws, (char *)dest, (const char *)src, send_counts, send_displs, recv_counts,
                        recv_displs, esz, (uint32_t)block, (uint32_t)nblocks);
    SYMM__TRACE_COLL(ctx, t_, SYMM_TRACE_COLL_ALL_TO_ALLV, SYMM_COLL_ALGO_TWOSHOT, 0u, 0);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_broadcast_block(const symm_ctx_t *ctx, void *dest, const void *src,
                                                          size_t count, int dtype, int root) {
    symm__c_dev_broadcast(ctx, dest, src, count, dtype, root, 0, 1);
}
SYMM_DEVICE_FN SYMM__CONVERGENT void symm_broadcast_grid(const symm_ctx_t *ctx, void *dest, const void *src,
                                                         size_t count, int dtype, int root, int block,
                                                         int nblocks) {
    symm__c_dev_broadcast(ctx, dest, src, count, dtype, root, block, nblocks);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_coll_barrier_block(const symm_ctx_t *ctx) {
    symm__coll_ws_t ws;
    SYMM__TRACE_START(ctx, t_, SYMM__G_BLOCK);
    symm__c_dev_check(ctx, "symm_coll_barrier_block", SYMM_DTYPE_U8, 0, -1, 0, 1, 0);
    ws = symm__c_ctx_ws(ctx);
    symm__c_barrier(ctx, &ws, 0);
    SYMM__TRACE_COLL(ctx, t_, SYMM_TRACE_COLL_BARRIER, SYMM_COLL_ALGO_AUTO, 0u, 0);
}

/*
 * Grid barrier: thread 0 of each block arrives on a local counter; the last
 * to arrive resets it, runs the barrier with the other PEs (one thread, slot
 * SYMM_COLL_MAX_BLOCKS - 1, which grid calls never use as a block index) and
 * bumps the release generation the other blocks spin on. Release/acquire at
 * GPU scope between the blocks, at system scope between the PEs; the chain is
 * cumulative, so every participant's earlier stores are covered.
 */
SYMM_DEVICE_FN SYMM__CONVERGENT void symm_coll_barrier_grid(const symm_ctx_t *ctx, int block, int nblocks) {
    symm__coll_ws_t ws;
    SYMM__TRACE_START(ctx, t_, SYMM__G_BLOCK);
    symm__c_dev_check(ctx, "symm_coll_barrier_grid", SYMM_DTYPE_U8, 0, -1, block, nblocks, 0);
    if (nblocks >= (int)SYMM_COLL_MAX_BLOCKS)
        symm__c_fail(ctx->world_pe, "symm_coll_barrier_grid", "nblocks must be < SYMM_COLL_MAX_BLOCKS",
                     block, nblocks, -1);
    ws = symm__c_ctx_ws(ctx);
    symm__block_sync();
    if (symm__block_tid() == 0) {
        uint64_t *grid = (uint64_t *)(uintptr_t)(ws.base + SYMM__COLL_WS_GRID_OFF);
        uint64_t gen, old;
        gen = symm__grid_ld_acquire(grid + 1);
        old = symm__grid_arrive(grid);
        if (old == (uint64_t)nblocks - 1) {
            const uint32_t slot = SYMM_COLL_MAX_BLOCKS - 1;
            uint64_t *ep = (uint64_t *)(uintptr_t)(ws.base + SYMM__COLL_WS_EPOCH_OFF) + slot;
            uint64_t c = symm__c_ld8_vol(ep) + 1;
            symm__c_ep_t e;
            int me = ctx->my_pe, n = ctx->n_pes;
            e.flag = (uint32_t)(c % 0xffffffffull) + 1u;
            e.par = (uint32_t)(c & 1u);
            symm__c_st8_vol(ep, c);
            symm__grid_st_relaxed(grid, (uint64_t)0);
            for (int p = 0; p < n; p++)
                if (p != me)
                    symm__c_st4_release(symm__c_peer(ctx, symm__c_flag(&ws, 0, e.par, slot, me), p), e.flag);
            for (int p = 0; p < n; p++)
                if (p != me)
                    symm__c_wait_flag_from(ctx, symm__c_flag(&ws, 0, e.par, slot, p), e.flag, p);
            symm__grid_st_release(grid + 1, gen + 1);
        } else {
            uint32_t polls = 0;
            uint64_t t0 = 0, v;
            for (;;) {
                v = symm__grid_ld_acquire(grid + 1);
                if (v != gen)
                    break;
                if (++polls % SYMM__WAIT_CHECK_EVERY == 0)
                    t0 = symm__wait_check(ctx, grid + 1, SYMM_CMP_NE, gen, v, t0);
            }
        }
    }
    symm__block_sync();
    SYMM__TRACE_COLL(ctx, t_, SYMM_TRACE_COLL_BARRIER, SYMM_COLL_ALGO_AUTO, 0u, 0);
}

#endif /* SYMM_DEVICE_COLL_API_H */
