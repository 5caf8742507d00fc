/*
 * device/trace_record.h - how the device trace records an event (SYMM_TRACE
 * builds only; device/trace.h includes it).
 *
 * The recording thread of a call (every thread for thread-scope calls, lane
 * 0 for warp scope, thread 0 of the block for block and grid scope) takes
 * %globaltimer when the call begins and, when it returns, claims a slot of
 * its SM's sub-buffer with one relaxed atomic and stores the 64-byte event
 * (four 16-byte stores).
 * A claim past the sub-buffer's end is the drop: nothing is stored, the
 * counter keeps the number (symm_trace_types.h). Nothing here waits, and
 * nothing here is a call: no printf, no out-of-line function.
 *
 * Lanes of one warp that make the same thread-scope call together (the
 * same kind, address and peer: a Triton program's threads all waiting on
 * one flag) are one event, recorded by the lowest of them with their count.
 */
#ifndef SYMM_DEVICE_TRACE_RECORD_H
#define SYMM_DEVICE_TRACE_RECORD_H

#include "symm/symm_trace_types.h"

/* Start of a call by group g: the time, or 0 when this thread records
 * nothing (no trace, or not the group's recording thread). */
SYMM__DEVICE_INTERNAL uint64_t symm__trace_start(const symm_ctx_t *ctx, int g) {
    if (symm__ctx_trace(ctx) == 0)
        return 0;
    if ((g == SYMM_TRACE_GROUP_WARP && symm__lane() != 0) || (g == SYMM_TRACE_GROUP_BLOCK && symm__block_tid() != 0))
        return 0;
    return symm__globaltimer();
}

/* Inline, like everything on the trace's paths: a function call anywhere
 * in a kernel makes ptxas serialise all of its wgmma (C7510), so a traced
 * GEMM would lose its pipelining to the recorder. */
SYMM__DEVICE_INTERNAL void symm__trace_write(const symm_ctx_t *ctx, uint64_t t0, uint32_t kfg, int pe, uint64_t addr,
                                      uint64_t a, uint64_t b) {
    const symm_trace_ring_t *r = (const symm_trace_ring_t *)(uintptr_t)symm__ctx_trace(ctx);
    const uint64_t t1 = symm__globaltimer();
    const uint32_t group = kfg >> 16;
    uint32_t lanes = 1, nsub, cap, s;
    uint64_t i, *head;
    char *ev;
    if (r == NULL)
        return;
    if (group == SYMM_TRACE_GROUP_THREAD) {
        const uint32_t act = symm__activemask();
        if (act & (act - 1u)) {
            const uint32_t same = symm__match_any_b64(act, addr) &
                                  symm__match_any_b64(act, ((uint64_t)kfg << 32) | (uint32_t)pe);
            if (same & ((1u << symm__lane()) - 1u))
                return; /* a lower lane records this call */
            lanes = symm__popc(same);
        }
    }
    nsub = r->nsub;
    cap = r->sub_cap;
    s = symm__smid() & (nsub - 1u);
    head = (uint64_t *)(uintptr_t)((uintptr_t)r + sizeof(symm_trace_ring_t) + (uintptr_t)s * SYMM_TRACE_HEAD_STRIDE);
    i = symm__trace_claim(head);
    if (i >= cap)
        return; /* full: dropped, and counted by the claim */
    ev = (char *)(uintptr_t)r->events + ((uint64_t)s * cap + i) * sizeof(symm_trace_event_t);
    symm__trace_store16(ev, t0, t1);
    symm__trace_store16(ev + 16, addr, a);
    symm__trace_store16(ev + 32, b, (uint64_t)symm__grid_block() | (uint64_t)symm__grid_nblocks() << 32);
    symm__trace_store16(ev + 48,
                        (uint64_t)(uint16_t)(int16_t)pe | (uint64_t)(symm__block_tid() & 0xffffu) << 16 |
                            (uint64_t)(symm__smid() & 0xffffu) << 32 | (uint64_t)(kfg & 0xffffu) << 48,
                        (uint64_t)group | (uint64_t)lanes << 8 | (uint64_t)((uint32_t)ctx->n_pes & 0xffffu) << 16 |
                            (uint64_t)((uint32_t)ctx->my_pe & 0xffffu) << 32);
}

/* End of a call that began at t0 (symm__trace_start): record it. `flags`
 * are the kind's (symm_trace_types.h). */
SYMM__DEVICE_INTERNAL void symm__trace_rec(const symm_ctx_t *ctx, uint64_t t0, int kind, int g, uint32_t flags,
                                           int pe, uint64_t addr, uint64_t a, uint64_t b) {
    if (t0 != 0)
        symm__trace_write(ctx, t0, (uint32_t)kind | (flags & 0xffu) << 8 | (uint32_t)g << 16, pe, addr, a, b);
}

/* An instant event of the calling thread (region begin / end). */
SYMM__DEVICE_INTERNAL void symm__trace_mark(const symm_ctx_t *ctx, int kind, int name) {
    const uint64_t t = symm__trace_start(ctx, SYMM_TRACE_GROUP_THREAD);
    if (t != 0)
        symm__trace_write(ctx, t, (uint32_t)kind, -1, 0, (uint64_t)(uint32_t)name, 0);
}

#endif /* SYMM_DEVICE_TRACE_RECORD_H */
