/*
 * driver.c - resolve the driver entry points of driver.h.
 */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>

#include "backend/native/driver.h"
#include "core/log.h"

/* The ABI version we ask for: every call used here has had its current
 * signature since CUDA 11. */
#define SYMM__CU_ABI 11040

static symm__cu_t g_cu;
static int g_loaded;

static symm_status_t resolve(const char *name, void **fn) {
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    cudaError_t e = cudaGetDriverEntryPointByVersion(name, fn, SYMM__CU_ABI, cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !*fn)
        return symm__error(SYMM_ERR_CUDA, "driver entry point %s not available: %s (query %d)",
                           name, cudaGetErrorString(e), (int)q);
    return SYMM_SUCCESS;
}

symm_status_t symm__cu_load(const symm__cu_t **out) {
    if (!g_loaded) {
        symm__cu_t cu;
        struct {
            const char *name;
            void **slot;
        } table[] = {
            {"cuGetErrorString", (void **)&cu.GetErrorString},
            {"cuMemGetAllocationGranularity", (void **)&cu.MemGetAllocationGranularity},
            {"cuMemAddressReserve", (void **)&cu.MemAddressReserve},
            {"cuMemAddressFree", (void **)&cu.MemAddressFree},
            {"cuMemCreate", (void **)&cu.MemCreate},
            {"cuMemRelease", (void **)&cu.MemRelease},
            {"cuMemExportToShareableHandle", (void **)&cu.MemExportToShareableHandle},
            {"cuMemImportFromShareableHandle", (void **)&cu.MemImportFromShareableHandle},
            {"cuMemMap", (void **)&cu.MemMap},
            {"cuMemUnmap", (void **)&cu.MemUnmap},
            {"cuMemSetAccess", (void **)&cu.MemSetAccess},
            {"cuFuncGetModule", (void **)&cu.FuncGetModule},
            {"cuModuleGetGlobal", (void **)&cu.ModuleGetGlobal},
        };
        for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
            *table[i].slot = NULL;
            symm_status_t st = resolve(table[i].name, table[i].slot);
            if (st != SYMM_SUCCESS)
                return st;
        }
        enum cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuCtxGetExecAffinity", (void **)&cu.CtxGetExecAffinity,
                                             SYMM__CU_ABI, cudaEnableDefault, &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess) {
            (void)cudaGetLastError();
            cu.CtxGetExecAffinity = NULL;
        }
        g_cu = cu;
        g_loaded = 1;
    }
    *out = &g_cu;
    return SYMM_SUCCESS;
}

int symm__native_gpu_count(const char **why) {
    static _Thread_local char buf[200];
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    (void)cudaGetLastError();
    if (e == cudaSuccess && n > 0) {
        *why = NULL;
        return n;
    }
    /* Without a driver the runtime says "driver version is insufficient",
     * which sends users after a driver upgrade on a machine with no GPU. */
    void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (cuda)
        dlclose(cuda);
    if (!cuda)
        *why = "no GPU found (no NVIDIA driver is installed)";
    else if (e == cudaSuccess || e == cudaErrorNoDevice)
        *why = "no GPU found (the NVIDIA driver sees no device)";
    else {
        snprintf(buf, sizeof(buf), "no usable GPU: %s", cudaGetErrorString(e));
        *why = buf;
    }
    return 0;
}

const char *symm__cu_errstr(CUresult r) {
    static _Thread_local char buf[160];
    const char *text = NULL;
    if (!g_loaded || !g_cu.GetErrorString || g_cu.GetErrorString(r, &text) != CUDA_SUCCESS || !text)
        text = "unknown";
    snprintf(buf, sizeof(buf), "CUresult %d (%s)", (int)r, text);
    return buf;
}
