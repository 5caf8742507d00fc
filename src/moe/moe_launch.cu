/*
 * moe_launch.cu - the CUDA calls the host side of the MoE exchange needs:
 * kernel dispatch, the host-mapped error record, device queries.
 */
#include <cuda.h> /* the driver's launch types; the entry point comes through the runtime */
#include <pthread.h>

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

/* ---- launches with programmatic dependent launch --------------------------------------------
 * Through the driver's cuLaunchKernelEx on the kernel's CUfunction, looked up once per kernel and
 * device: the runtime's cudaLaunchKernelEx resolves the kernel on every call and costs more host
 * time (bench/probes/launch_probe.cu: 2.60 against 2.38 us per launch on an H200). The runtime's
 * call remains where the driver's entry point or the lookup is missing, and while the stream is
 * being captured (no lookup, which may load a module, inside a capture). */

typedef CUresult (*launch_ex_fn)(const CUlaunchConfig *, CUfunction, void **, void **);

enum { FN_SLOTS = 32 }; /* kernels x devices of one process: the low-latency pair has four kernels */

static struct {
    const void *kernel;
    int dev;
    CUfunction fn;
} g_fns[FN_SLOTS];
static int g_nfns; /* slots published (release after the slot is written) */
static pthread_mutex_t g_fns_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_launch_once = PTHREAD_ONCE_INIT;
static launch_ex_fn g_launch_ex; /* NULL: the runtime's launch only */

static void resolve_launch_ex(void) {
    void *fn = NULL;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuLaunchKernelEx", &fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess && fn != NULL)
        g_launch_ex = (launch_ex_fn)fn;
    else
        (void)cudaGetLastError();
}

/* The kernel's function on device `dev`, looked up on first use; NULL where it cannot be now. */
static CUfunction kernel_fn(const void *kernel, int dev, cudaStream_t s) {
    int n = __atomic_load_n(&g_nfns, __ATOMIC_ACQUIRE), i;
    CUfunction fn = NULL;
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    for (i = 0; i < n; i++)
        if (g_fns[i].kernel == kernel && g_fns[i].dev == dev)
            return g_fns[i].fn;
    if (cudaStreamIsCapturing(s, &cap) != cudaSuccess || cap != cudaStreamCaptureStatusNone) {
        (void)cudaGetLastError();
        return NULL;
    }
    pthread_mutex_lock(&g_fns_lock);
    n = g_nfns;
    for (i = 0; i < n && fn == NULL; i++)
        if (g_fns[i].kernel == kernel && g_fns[i].dev == dev)
            fn = g_fns[i].fn;
    if (fn == NULL && n < FN_SLOTS) {
        cudaFunction_t f = NULL;
        if (cudaGetFuncBySymbol(&f, kernel) == cudaSuccess && f != NULL) {
            fn = (CUfunction)f;
            g_fns[n].kernel = kernel;
            g_fns[n].dev = dev;
            g_fns[n].fn = fn;
            __atomic_store_n(&g_nfns, n + 1, __ATOMIC_RELEASE);
        } else {
            (void)cudaGetLastError();
        }
    }
    pthread_mutex_unlock(&g_fns_lock);
    return fn;
}

symm_status_t symm__moe_launch_pdl(const void *kernel, const symm__moe_kargs_t *a, size_t smem, cudaStream_t s,
                                   const char *what) {
    int dev = 0;
    CUfunction fn = NULL;
    (void)pthread_once(&g_launch_once, resolve_launch_ex);
    if (g_launch_ex != NULL && cudaGetDevice(&dev) == cudaSuccess)
        fn = kernel_fn(kernel, dev, s);
    if (fn != NULL) {
        CUlaunchAttribute at = {};
        CUlaunchConfig cfg = {};
        void *args[1] = {(void *)a};
        CUresult r;
        at.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        at.value.programmaticStreamSerializationAllowed = 1;
        cfg.gridDimX = (unsigned)a->nblocks;
        cfg.gridDimY = cfg.gridDimZ = 1;
        cfg.blockDimX = SYMM__MOE_THREADS;
        cfg.blockDimY = cfg.blockDimZ = 1;
        cfg.sharedMemBytes = (unsigned)smem;
        cfg.hStream = (CUstream)s;
        cfg.attrs = &at;
        cfg.numAttrs = 1;
        r = g_launch_ex(&cfg, fn, args, NULL);
        if (r != CUDA_SUCCESS)
            return symm__error(SYMM_ERR_CUDA, "launching the MoE %s kernel (SYMM_MOE_PDL=1): CUDA driver error %d",
                               what, (int)r);
        return SYMM_SUCCESS;
    }
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1] = {};
    void *args[1] = {(void *)a};
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = dim3((unsigned)a->nblocks);
    cfg.blockDim = dim3(SYMM__MOE_THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    cudaError_t e = cudaLaunchKernelExC(&cfg, kernel, args);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return symm__error(SYMM_ERR_CUDA, "launching the MoE %s kernel (SYMM_MOE_PDL=1): %s (%s)", what,
                           cudaGetErrorName(e), cudaGetErrorString(e));
    }
    return SYMM_SUCCESS;
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
