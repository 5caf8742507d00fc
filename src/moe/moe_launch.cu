/*
 * moe_launch.cu - the CUDA calls the host side of the MoE exchange needs:
 * kernel dispatch, the host-mapped error record, device queries.
 */
#include "moe/moe_kernels.cuh"

extern "C" symm_status_t symm__moe_launch(const symm__moe_kargs_t *a, symm_stream_t stream) {
    cudaStream_t s = (cudaStream_t)stream;
    switch (a->kernel) {
    case SYMM__MK_LL_DISPATCH:
    case SYMM__MK_LL_COMBINE: return symm__moe_launch_ll(a, s);
    case SYMM__MK_HT_LAYOUT:
    case SYMM__MK_HT_DISPATCH:
    case SYMM__MK_HT_COMBINE: return symm__moe_launch_ht(a, s);
    default: return symm__error(SYMM_ERR_INTERNAL, "MoE: unknown kernel %u", a->kernel);
    }
}

extern "C" symm_status_t symm__moe_err_alloc(symm__moe_err_t **host, uint64_t *dev) {
    void *h = NULL, *d = NULL;
    cudaError_t e = cudaHostAlloc(&h, sizeof(symm__moe_err_t), cudaHostAllocMapped);
    if (e == cudaSuccess) {
        memset(h, 0, sizeof(symm__moe_err_t));
        e = cudaHostGetDevicePointer(&d, h, 0);
        if (e != cudaSuccess)
            cudaFreeHost(h);
    }
    if (e != cudaSuccess)
        return symm__error(SYMM_ERR_CUDA, "MoE: allocating the host-mapped error record: %s",
                           cudaGetErrorString(e));
    *host = (symm__moe_err_t *)h;
    *dev = (uint64_t)(uintptr_t)d;
    return SYMM_SUCCESS;
}

extern "C" void symm__moe_err_free(symm__moe_err_t *host) {
    if (host)
        cudaFreeHost(host);
}

extern "C" int symm__moe_sm_count(void) {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n < 1) {
        (void)cudaGetLastError();
        return 1;
    }
    return n;
}

extern "C" int symm__moe_pdl_supported(void) {
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return major >= 9;
}

extern "C" symm_status_t symm__moe_stream_sync(symm_stream_t stream) {
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)stream);
    if (e != cudaSuccess)
        return symm__error(SYMM_ERR_CUDA, "symm_moe_check: the stream failed: %s (%s)", cudaGetErrorName(e),
                           cudaGetErrorString(e));
    return SYMM_SUCCESS;
}

extern "C" symm_status_t symm__moe_take_word(void *dev, uint32_t *v) {
    uint32_t zero = 0;
    cudaError_t e = cudaMemcpy(v, dev, sizeof(*v), cudaMemcpyDeviceToHost);
    if (e == cudaSuccess)
        e = cudaMemcpy(dev, &zero, sizeof(zero), cudaMemcpyHostToDevice);
    if (e != cudaSuccess)
        return symm__error(SYMM_ERR_CUDA, "MoE: reading the handle's state: %s", cudaGetErrorString(e));
    return SYMM_SUCCESS;
}
