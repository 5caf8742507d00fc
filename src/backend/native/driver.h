/*
 * driver.h - the CUDA driver calls the native backend makes, reached through
 * cudaGetDriverEntryPointByVersion: libsymm links cudart statically and never
 * libcuda, so it loads (and the host backend runs) on machines with no driver.
 */
#ifndef SYMM_BACKEND_NATIVE_DRIVER_H
#define SYMM_BACKEND_NATIVE_DRIVER_H

#include <cuda.h>
#include "symm/symm.h"

typedef struct symm__cu {
    CUresult (*GetErrorString)(CUresult, const char **);
    CUresult (*MemGetAllocationGranularity)(size_t *, const CUmemAllocationProp *,
                                            CUmemAllocationGranularity_flags);
    CUresult (*MemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*MemAddressFree)(CUdeviceptr, size_t);
    CUresult (*MemCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                          unsigned long long);
    CUresult (*MemRelease)(CUmemGenericAllocationHandle);
    CUresult (*MemExportToShareableHandle)(void *, CUmemGenericAllocationHandle,
                                           CUmemAllocationHandleType, unsigned long long);
    CUresult (*MemImportFromShareableHandle)(CUmemGenericAllocationHandle *, void *,
                                             CUmemAllocationHandleType);
    CUresult (*MemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*MemUnmap)(CUdeviceptr, size_t);
    CUresult (*MemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*FuncGetModule)(CUmodule *, CUfunction);
    CUresult (*ModuleGetGlobal)(CUdeviceptr *, size_t *, CUmodule, const char *);
    /* Optional (NULL when the driver lacks it): the SMs the current context
     * may use, which MPS limits with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE. */
    CUresult (*CtxGetExecAffinity)(CUexecAffinityParam *, CUexecAffinityType);
} symm__cu_t;

/* Resolve every entry point once; SYMM_ERR_CUDA naming the missing one. */
symm_status_t symm__cu_load(const symm__cu_t **out);

/* The GPUs this process can use; with none, *why says so in words a user
 * acts on ("no GPU found (no NVIDIA driver is installed)"), else NULL. */
int symm__native_gpu_count(const char **why);

/* "CUDA_ERROR_X (text)" for messages; never NULL. */
const char *symm__cu_errstr(CUresult r);

#endif /* SYMM_BACKEND_NATIVE_DRIVER_H */
