/*
 * device/impl_sync.h - fence, quiet and the device barrier.
 *
 * Puts over NVLink are plain stores, so completion is a memory-model matter:
 * fence = fence.acq_rel.sys (later stores of the thread are not seen before
 * earlier ones, at any PE), quiet = fence.sc.sys (every earlier store is
 * visible to every PE). The group forms fence in every thread, then a
 * warp/block barrier, so all of the group's operations are covered on return.
 */
#ifndef SYMM_DEVICE_IMPL_SYNC_H
#define SYMM_DEVICE_IMPL_SYNC_H

/* A scale-out context adds its library's fence / quiet (backend/dispatch.h),
 * which covers what went through the library; nothing on native. */

SYMM_DEVICE_FN void symm_fence(const symm_ctx_t *ctx) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_THREAD);
    symm__fence_acq_rel_sys();
    symm__far_fence(ctx);
    SYMM__TRACE_SYNC(ctx, t_, SYMM_TRACE_FENCE, SYMM__G_THREAD, 0);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_fence_warp(const symm_ctx_t *ctx) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_WARP);
    symm__fence_acq_rel_sys();
    symm__far_fence(ctx);
    symm__warp_sync();
    SYMM__TRACE_SYNC(ctx, t_, SYMM_TRACE_FENCE, SYMM__G_WARP, 0);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_fence_block(const symm_ctx_t *ctx) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_BLOCK);
    symm__fence_acq_rel_sys();
    symm__far_fence(ctx);
    symm__block_sync();
    SYMM__TRACE_SYNC(ctx, t_, SYMM_TRACE_FENCE, SYMM__G_BLOCK, 0);
}

SYMM_DEVICE_FN void symm_quiet(const symm_ctx_t *ctx) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_THREAD);
    symm__fence_sc_sys();
    symm__far_quiet(ctx);
    SYMM__TRACE_SYNC(ctx, t_, SYMM_TRACE_QUIET, SYMM__G_THREAD, 0);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_quiet_warp(const symm_ctx_t *ctx) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_WARP);
    symm__fence_sc_sys();
    symm__far_quiet(ctx);
    symm__warp_sync();
    SYMM__TRACE_SYNC(ctx, t_, SYMM_TRACE_QUIET, SYMM__G_WARP, 0);
}

/* One fence for the block instead of one per warp: the first barrier orders
 * every thread's earlier stores before thread 0's fence.sc.sys (CTA-scope
 * synchronisation, and the fence is cumulative), the second orders the
 * fence before every thread's later operations. fence.sc.sys executed by
 * all 32 warps of a block is 32 system-scope MEMBARs on the SM. */
SYMM_DEVICE_FN SYMM__CONVERGENT void symm_quiet_block(const symm_ctx_t *ctx) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_BLOCK);
    symm__far_quiet(ctx); /* each thread its own calls through a library */
    symm__block_sync();
    if (symm__block_tid() == 0)
        symm__fence_sc_sys();
    symm__block_sync();
    SYMM__TRACE_SYNC(ctx, t_, SYMM_TRACE_QUIET, SYMM__G_BLOCK, 0);
}

/* ---- device barrier -------------------------------------------------------------- */

/*
 * State (ctx->barrier, in the heap, zeroed by the runtime at init), in 64-bit
 * words: [0] is this PE's epoch, written only by this PE; [1 + p] is the last
 * epoch PE p announced to this PE. Barrier number e: every PE stores e into
 * word [1 + me] of every PE (a release: its earlier stores, and through the
 * preceding warp/block barrier those of its group, are visible to whoever
 * sees e), then waits until its own [1 + p] >= e for every p. The epoch lives
 * in device memory, so the barrier continues across kernel launches and graph
 * replays; ">=" keeps it right when a fast peer has already announced e + 1.
 *
 * The participating threads split the PEs: thread t announces to and waits
 * for PEs t, t + nthreads, ... Word [0] is advanced by thread 0 only after the
 * closing group barrier, when every thread has read the old value.
 *
 * `quiet`: a full fence.sc.sys before the announcement (barrier); otherwise
 * fence.acq_rel.sys, the release half (sync).
 */
SYMM__DEVICE_INTERNAL uint64_t symm__barrier_part(const symm_ctx_t *ctx, uint32_t t, uint32_t nthreads,
                                                  int quiet) {
    uint64_t *state = (uint64_t *)(uintptr_t)ctx->barrier;
    int n_pes = ctx->n_pes;
    uint64_t e;
    int p;
    if (t >= (uint32_t)n_pes)
        return 0;
    /* Strong (L1-bypassing) at GPU scope: the previous barrier may have been
     * run by another block, on another SM, whose store a stale L1 line of
     * this SM would hide. */
    e = symm__ld_b64(state, SYMM_SEM_RELAXED, SYMM_SCOPE_GPU) + 1;
    /* One fence, then relaxed stores: together a release of each store. */
    if (quiet)
        symm__fence_sc_sys();
    else
        symm__fence_acq_rel_sys();
    for (p = (int)t; p < n_pes; p += (int)nthreads)
        symm__st_b64(symm__peer(ctx, state + 1 + ctx->my_pe, p), e, SYMM_SEM_RELAXED, SYMM_SCOPE_SYS);
    for (p = (int)t; p < n_pes; p += (int)nthreads) {
        SYMM__TRACE_START(ctx, t_, SYMM__G_THREAD);
        const uint64_t v_ = symm__wait_u64(ctx, state + 1 + p, SYMM_CMP_GE, e);
        SYMM__TRACE_WAIT(ctx, t_, SYMM_TRACE_WAIT_BARRIER, state + 1 + p, p, SYMM_CMP_GE, e, v_);
        (void)v_;
    }
    return e;
}

SYMM__DEVICE_INTERNAL void symm__barrier_advance(const symm_ctx_t *ctx, uint64_t e) {
    symm__st_b64((uint64_t *)(uintptr_t)ctx->barrier, e, SYMM_SEM_RELAXED, SYMM_SCOPE_GPU);
}

/* A team with a PE outside the load/store window takes its backend's
 * barrier (after symm's own fence, for what went by load/store). */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT int symm__barrier_far(const symm_ctx_t *ctx, int g, int quiet) {
    if (symm__ldst_all(ctx))
        return 0;
    if (quiet)
        symm__fence_sc_sys();
    else
        symm__fence_acq_rel_sys();
    symm__far_barrier(ctx, g, quiet);
    return 1;
}

SYMM_DEVICE_FN void symm_barrier(const symm_ctx_t *ctx) {
    SYMM__TRACE_START(ctx, t_, SYMM__G_THREAD);
    if (!symm__barrier_far(ctx, SYMM__G_THREAD, 1))
        symm__barrier_advance(ctx, symm__barrier_part(ctx, 0, 1, 1));
    SYMM__TRACE_SYNC(ctx, t_, SYMM_TRACE_BARRIER, SYMM__G_THREAD, 0);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_barrier_warp(const symm_ctx_t *ctx) {
    uint32_t lane = symm__lane();
    uint64_t e;
    SYMM__TRACE_START(ctx, t_, SYMM__G_WARP);
    if (!symm__barrier_far(ctx, SYMM__G_WARP, 1)) {
        symm__warp_sync();
        e = symm__barrier_part(ctx, lane, 32, 1);
        symm__warp_sync();
        if (lane == 0)
            symm__barrier_advance(ctx, e);
    }
    SYMM__TRACE_SYNC(ctx, t_, SYMM_TRACE_BARRIER, SYMM__G_WARP, 0);
}

SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__barrier_block(const symm_ctx_t *ctx, int quiet) {
    uint32_t t = symm__block_tid();
    uint64_t e;
    SYMM__TRACE_START(ctx, t_, SYMM__G_BLOCK);
    if (!symm__barrier_far(ctx, SYMM__G_BLOCK, quiet)) {
        symm__block_sync();
        e = symm__barrier_part(ctx, t, symm__block_nthreads(), quiet);
        symm__block_sync();
        if (t == 0)
            symm__barrier_advance(ctx, e);
    }
    SYMM__TRACE_SYNC(ctx, t_, SYMM_TRACE_BARRIER, SYMM__G_BLOCK, quiet ? 0u : SYMM_TRACE_F_SYNC);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_barrier_block(const symm_ctx_t *ctx) {
    symm__barrier_block(ctx, 1);
}

SYMM_DEVICE_FN SYMM__CONVERGENT void symm_sync_block(const symm_ctx_t *ctx) {
    symm__barrier_block(ctx, 0);
}

#endif /* SYMM_DEVICE_IMPL_SYNC_H */
