/*
 * stream_barrier.h - the native backend's barrier_on_stream: a kernel that
 * runs the device barrier of a team's context (stream_barrier.cu).
 */
#ifndef SYMM_BACKEND_NATIVE_STREAM_BARRIER_H
#define SYMM_BACKEND_NATIVE_STREAM_BARRIER_H

#include "symm/symm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueue the barrier of d_ctx's team on `stream`. Errors: SYMM_ERR_CUDA. */
symm_status_t symm__launch_stream_barrier(const symm_ctx_t *d_ctx, symm_stream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* SYMM_BACKEND_NATIVE_STREAM_BARRIER_H */
