/*
 * coll_launch.cu - the CUDA calls the host side of the collectives needs:
 * kernel dispatch, local copies, pointer and capture queries.
 */
#include "coll/coll_kernels.cuh"

extern "C" symm_status_t symm__coll_launch(const symm__coll_launch_t *l, symm_stream_t stream) {
    cudaStream_t s = (cudaStream_t)stream;
    switch (l->kernel) {
    case SYMM__CK_RED_PACKET:
    case SYMM__CK_AR_PACKET2:
    case SYMM__CK_MOVE_PACKET:
    case SYMM__CK_BCAST_PACKET2: return symm__coll_launch_packet(l, s);
    case SYMM__CK_AR_ONESHOT:
    case SYMM__CK_RS_ONESHOT: return symm__coll_launch_oneshot(l, s);
    case SYMM__CK_AR_TWOSHOT:
    case SYMM__CK_AR_TWOSHOT_ST:
    case SYMM__CK_AR_MULTIMEM: return symm__coll_launch_twoshot(l, s);
    case SYMM__CK_RS_DIRECT:
    case SYMM__CK_MOVE_DIRECT:
    case SYMM__CK_A2AV_DIRECT: return symm__coll_launch_direct(l, s);
    case SYMM__CK_AR_PUSH:
    case SYMM__CK_RS_PUSH: return symm__coll_launch_push(l, s);
    default: return symm__error(SYMM_ERR_INTERNAL, "collectives: unknown kernel %d", (int)l->kernel);
    }
}

extern "C" symm_status_t symm__coll_copy(void *dst, const void *src, size_t nbytes, symm_stream_t stream) {
    if (nbytes == 0 || dst == src)
        return SYMM_SUCCESS;
    cudaError_t e = cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, (cudaStream_t)stream);
    if (e != cudaSuccess)
        return symm__error(SYMM_ERR_CUDA, "collectives: staging copy of %zu bytes: %s", nbytes,
                           cudaGetErrorString(e));
    return SYMM_SUCCESS;
}

extern "C" symm_status_t symm__coll_copy2d(void *dst, size_t dpitch, const void *src, size_t spitch,
                                           size_t width, size_t height, symm_stream_t stream) {
    if (width == 0 || height == 0)
        return SYMM_SUCCESS;
    cudaError_t e = cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyDeviceToDevice,
                                      (cudaStream_t)stream);
    if (e != cudaSuccess)
        return symm__error(SYMM_ERR_CUDA, "collectives: staging copy (%zu x %zu bytes): %s", height, width,
                           cudaGetErrorString(e));
    return SYMM_SUCCESS;
}

extern "C" int symm__coll_device_accessible(const void *p) {
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the non-sticky error */
        return 0;
    }
    switch (a.type) {
    case cudaMemoryTypeDevice:
    case cudaMemoryTypeManaged: return 1;
    case cudaMemoryTypeHost: return a.devicePointer != NULL;
    default: return 0;
    }
}

extern "C" int symm__coll_capturing(symm_stream_t stream) {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing((cudaStream_t)stream, &st) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return st != cudaStreamCaptureStatusNone;
}

extern "C" symm_status_t symm__coll_write(uint64_t dst, const void *src, size_t nbytes) {
    /* A cudaMemcpy from pageable memory may return before its DMA lands;
     * the device sync makes the words visible before the caller's barrier. */
    cudaError_t e = cudaMemcpy((void *)(uintptr_t)dst, src, nbytes, cudaMemcpyHostToDevice);
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
        return symm__error(SYMM_ERR_CUDA, "collectives: writing %zu bytes of state: %s", nbytes,
                           cudaGetErrorString(e));
    return SYMM_SUCCESS;
}

extern "C" symm_status_t symm__coll_zero(uint64_t dst, size_t nbytes) {
    cudaError_t e = cudaMemset((void *)(uintptr_t)dst, 0, nbytes);
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
        return symm__error(SYMM_ERR_CUDA, "collectives: clearing %zu bytes of state: %s", nbytes,
                           cudaGetErrorString(e));
    return SYMM_SUCCESS;
}
