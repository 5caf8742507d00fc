/*
 * device/impl_trace.h - symm_trace_begin / symm_trace_end: a kernel's own
 * regions on the device trace's timeline (docs/trace.md). Without
 * SYMM_TRACE they do nothing.
 */
#ifndef SYMM_DEVICE_IMPL_TRACE_H
#define SYMM_DEVICE_IMPL_TRACE_H

#include "symm/symm_trace_types.h"

/* The trace's groups are the backend calls' groups (backend/dispatch.h), so a
 * call site passes its own. */
typedef char symm__trace_group_matches[((int)SYMM_TRACE_GROUP_THREAD == (int)SYMM__G_THREAD &&
                                        (int)SYMM_TRACE_GROUP_WARP == (int)SYMM__G_WARP &&
                                        (int)SYMM_TRACE_GROUP_BLOCK == (int)SYMM__G_BLOCK) ? 1 : -1];

SYMM_DEVICE_FN void symm_trace_begin(const symm_ctx_t *ctx, int name_id) {
    (void)ctx;
    (void)name_id;
    SYMM__TRACE_REGION(ctx, SYMM_TRACE_REGION_BEGIN, name_id);
}

SYMM_DEVICE_FN void symm_trace_end(const symm_ctx_t *ctx, int name_id) {
    (void)ctx;
    (void)name_id;
    SYMM__TRACE_REGION(ctx, SYMM_TRACE_REGION_END, name_id);
}

#endif /* SYMM_DEVICE_IMPL_TRACE_H */
