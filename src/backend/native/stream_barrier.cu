/*
 * stream_barrier.cu - the kernel behind symm_barrier_all_on_stream and
 * symm_team_barrier_on_stream (native backend): one block that runs the
 * device barrier of the team's context. Its state lives in the heap, so the
 * launch is graph-capturable and replays keep counting epochs.
 */
#include <cuda_runtime.h>

#include "symm/symm_device.h"

extern "C" {
#include "core/log.h"
#include "backend/native/stream_barrier.h"
}

/* One warp is enough: the barrier's peer loop is spread over the block's
 * threads, and 32 covers the PEs of a node. */
#define SYMM__STREAM_BARRIER_THREADS 32

__global__ void symm__stream_barrier_kernel(const symm_ctx_t *ctx) { symm_barrier_block(ctx); }

extern "C" symm_status_t symm__launch_stream_barrier(const symm_ctx_t *d_ctx, symm_stream_t stream) {
    symm__stream_barrier_kernel<<<1, SYMM__STREAM_BARRIER_THREADS, 0, (cudaStream_t)stream>>>(d_ctx);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return symm__error(SYMM_ERR_CUDA, "launching the stream barrier: %s (%s)",
                           cudaGetErrorName(e), cudaGetErrorString(e));
    return SYMM_SUCCESS;
}
