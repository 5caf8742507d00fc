/*
 * nccl_clang_compat.h - what clang-19 in CUDA mode lacks to compile NCCL
 * 2.28's device headers; included before anything else. The build adds a
 * folder holding an empty texture_fetch_functions.h (CUDA 13 dropped the
 * header, clang-19's CUDA wrapper still includes it).
 */
#ifndef SYMM_NCCL_CLANG_COMPAT_H
#define SYMM_NCCL_CLANG_COMPAT_H

#if defined(__clang__) && defined(__CUDA__)
/* NCCL tests `#if __CUDACC__`; clang defines the macro empty (nvcc: 1). */
#  undef __CUDACC__
#  define __CUDACC__ 1

#  include <cuda_runtime.h>

/* The write-through store NCCL's GIN proxy uses for its request queue in
 * host memory; nvcc's headers have it, clang's do not. */
static __device__ __forceinline__ void __stwt(uint4 *p, uint4 v) {
    asm volatile("st.global.wt.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z),
                 "r"(v.w)
                 : "memory");
}
#endif

#endif /* SYMM_NCCL_CLANG_COMPAT_H */
