/*
 * device/defs.h - how device functions are declared in each compilation mode.
 *
 * One source serves three compilers:
 *   nvcc (CUDA C/C++)          -> static __device__ inline functions (header-only)
 *   clang -x cuda, SYMM_BITCODE -> exported definitions: the nccl bitcode
 *   clang -x c nvptx64, with SYMM_BITCODE defined
 *                              -> external definitions: libsymm_device.bc
 *   any host C/C++ compiler    -> declarations only (types and prototypes), so
 *                                 host code can include the header
 */
#ifndef SYMM_DEVICE_DEFS_H
#define SYMM_DEVICE_DEFS_H

#if defined(__CUDACC__) && defined(SYMM_BITCODE)
   /* clang -x cuda for the nccl bitcode (bitcode/symm_device_nccl_bitcode.cu):
    * the same exports with plain C names as the C bitcode. */
#  define SYMM_DEVICE_CODE 1
#  define SYMM_DEVICE_FN extern "C" __device__ __attribute__((visibility("default")))
#  define SYMM__DEVICE_INTERNAL static __device__ __forceinline__
#  define SYMM__NOINLINE static __device__ __noinline__
#elif defined(__CUDACC__)
#  define SYMM_DEVICE_CODE 1
#  define SYMM_DEVICE_FN static __device__ __forceinline__
#  define SYMM__DEVICE_INTERNAL static __device__ __forceinline__
#  define SYMM__NOINLINE static __device__ __noinline__
#elif defined(__NVPTX__)
#  define SYMM_DEVICE_CODE 1
#  if defined(SYMM_BITCODE)
     /* Exported with plain C names; the DSL's linker internalises and inlines. */
#    define SYMM_DEVICE_FN __attribute__((visibility("default")))
#  else
#    define SYMM_DEVICE_FN static inline __attribute__((always_inline))
#  endif
#  define SYMM__DEVICE_INTERNAL static inline __attribute__((always_inline))
#  define SYMM__NOINLINE static __attribute__((noinline))
#else
#  define SYMM_DEVICE_CODE 0
#  define SYMM_DEVICE_FN extern
#endif

/* The acquire/release PTX and the 16-byte vector paths need sm_80; say so
 * here rather than let ptxas reject an instruction deep in the headers. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#  error "symm's device API needs sm_80 or newer: compile with -arch=sm_80 (or sm_90) or above"
#endif

/* restrict spelled for C and C++ */
#if defined(__cplusplus)
#  define SYMM_RESTRICT __restrict__
#else
#  define SYMM_RESTRICT restrict
#endif

#endif /* SYMM_DEVICE_DEFS_H */
