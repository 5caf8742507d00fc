/*
 * coll_kernels.cuh - shared by the coll_k_*.cu files: the device code of the
 * collectives and the launchers each file defines. The kernels are split
 * over several files only so they compile in parallel: every reducing kernel
 * holds all twelve reduction types behind a switch.
 */
#ifndef SYMM_COLL_KERNELS_CUH
#define SYMM_COLL_KERNELS_CUH

#include <cuda_runtime.h>

#include "symm/symm_device.h"

extern "C" {
#include "core/log.h"
#include "coll/coll_launch.h"
}

/* Check a launch: the error (if any) names the kernel. */
static inline symm_status_t symm__coll_launched(const char *what) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return symm__error(SYMM_ERR_CUDA, "launching %s: %s (%s)", what, cudaGetErrorName(e),
                           cudaGetErrorString(e));
    return SYMM_SUCCESS;
}

symm_status_t symm__coll_launch_packet(const symm__coll_launch_t *l, cudaStream_t s);
symm_status_t symm__coll_launch_oneshot(const symm__coll_launch_t *l, cudaStream_t s);
symm_status_t symm__coll_launch_twoshot(const symm__coll_launch_t *l, cudaStream_t s);
symm_status_t symm__coll_launch_direct(const symm__coll_launch_t *l, cudaStream_t s);
symm_status_t symm__coll_launch_push(const symm__coll_launch_t *l, cudaStream_t s);

#endif /* SYMM_COLL_KERNELS_CUH */
