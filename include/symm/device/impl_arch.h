/*
 * device/impl_arch.h - the hardware underneath the device API: thread and
 * warp indices, block/warp barriers, the global timer, fences, reporting.
 *
 * One source for nvcc (CUDA C++) and clang (plain C, nvptx64): no threadIdx,
 * no templates, no C++ casts. Where the two compilers differ (special
 * registers, barriers, printf) the difference is confined to this file.
 * Block barriers go through the compiler's own barrier (__syncthreads, or
 * clang's __nvvm_barrier_sync) rather than inline "bar.sync", because the
 * compiler must know the call is convergent and never move it into
 * divergent code; clang gives inline asm that guarantee only in CUDA mode.
 */
#ifndef SYMM_DEVICE_IMPL_ARCH_H
#define SYMM_DEVICE_IMPL_ARCH_H

/* Marks functions whose every thread (warp/block) must reach them together.
 * nvcc treats every device function so; clang in plain C mode needs it said. */
#if defined(__clang__) && !defined(__CUDA__)
#  define SYMM__CONVERGENT __attribute__((convergent))
#else
#  define SYMM__CONVERGENT
#endif

#define SYMM__FULL_MASK 0xffffffffu

/* ---- thread / warp / block indices --------------------------------------- */

#if defined(__CUDACC__)
#  define SYMM__TID_X() ((uint32_t)threadIdx.x)
#  define SYMM__TID_Y() ((uint32_t)threadIdx.y)
#  define SYMM__TID_Z() ((uint32_t)threadIdx.z)
#  define SYMM__NTID_X() ((uint32_t)blockDim.x)
#  define SYMM__NTID_Y() ((uint32_t)blockDim.y)
#  define SYMM__NTID_Z() ((uint32_t)blockDim.z)
#  define SYMM__CTAID_X() ((uint32_t)blockIdx.x)
#  define SYMM__CTAID_Y() ((uint32_t)blockIdx.y)
#  define SYMM__CTAID_Z() ((uint32_t)blockIdx.z)
#  define SYMM__NCTAID_X() ((uint32_t)gridDim.x)
#  define SYMM__NCTAID_Y() ((uint32_t)gridDim.y)
#  define SYMM__NCTAID_Z() ((uint32_t)gridDim.z)
#else
#  define SYMM__TID_X() ((uint32_t)__nvvm_read_ptx_sreg_tid_x())
#  define SYMM__TID_Y() ((uint32_t)__nvvm_read_ptx_sreg_tid_y())
#  define SYMM__TID_Z() ((uint32_t)__nvvm_read_ptx_sreg_tid_z())
#  define SYMM__NTID_X() ((uint32_t)__nvvm_read_ptx_sreg_ntid_x())
#  define SYMM__NTID_Y() ((uint32_t)__nvvm_read_ptx_sreg_ntid_y())
#  define SYMM__NTID_Z() ((uint32_t)__nvvm_read_ptx_sreg_ntid_z())
#  define SYMM__CTAID_X() ((uint32_t)__nvvm_read_ptx_sreg_ctaid_x())
#  define SYMM__CTAID_Y() ((uint32_t)__nvvm_read_ptx_sreg_ctaid_y())
#  define SYMM__CTAID_Z() ((uint32_t)__nvvm_read_ptx_sreg_ctaid_z())
#  define SYMM__NCTAID_X() ((uint32_t)__nvvm_read_ptx_sreg_nctaid_x())
#  define SYMM__NCTAID_Y() ((uint32_t)__nvvm_read_ptx_sreg_nctaid_y())
#  define SYMM__NCTAID_Z() ((uint32_t)__nvvm_read_ptx_sreg_nctaid_z())
#endif

/* Linear index of the calling thread in its (1-, 2- or 3-D) block, and the
 * number of threads of the block: block-scope calls spread work over these. */
SYMM__DEVICE_INTERNAL uint32_t symm__block_tid(void) {
    return SYMM__TID_X() + SYMM__NTID_X() * (SYMM__TID_Y() + SYMM__NTID_Y() * SYMM__TID_Z());
}

SYMM__DEVICE_INTERNAL uint32_t symm__block_nthreads(void) {
    return SYMM__NTID_X() * SYMM__NTID_Y() * SYMM__NTID_Z();
}

/* Linear index of the calling block in its grid, and the grid's block count. */
SYMM__DEVICE_INTERNAL uint32_t symm__grid_block(void) {
    return SYMM__CTAID_X() + SYMM__NCTAID_X() * (SYMM__CTAID_Y() + SYMM__NCTAID_Y() * SYMM__CTAID_Z());
}

SYMM__DEVICE_INTERNAL uint32_t symm__grid_nblocks(void) {
    return SYMM__NCTAID_X() * SYMM__NCTAID_Y() * SYMM__NCTAID_Z();
}

/* ---- barriers within a block ---------------------------------------------- */

/* bar.sync 0 over the whole block; it also orders the memory accesses of the
 * participating threads (CTA scope), which the release/acquire operations
 * that follow extend to other PEs. */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__block_sync(void) {
#if defined(__CUDACC__)
    __syncthreads();
#else
    __nvvm_barrier_sync(0);
#endif
}

/* A barrier over the first or a later group of warps of a block: `id` 1..15
 * names the group, n (a multiple of 32) is its threads; memory ordering as
 * symm__block_sync among them. Every thread of the group calls it. */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__group_sync(uint32_t id, uint32_t n) {
#if defined(__CUDACC__)
    symm__ptx_bar_sync_n(id, n);
#else
    __nvvm_barrier_sync_cnt(id, n);
#endif
}

/* bar.warp.sync over all 32 lanes, with the same memory ordering among them. */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__warp_sync(void) {
#if defined(__CUDACC__)
    __syncwarp(SYMM__FULL_MASK);
#else
    __nvvm_bar_warp_sync(SYMM__FULL_MASK);
#endif
}

/* Lane 0's v, to every lane of the warp (all 32 call it together). */
SYMM__DEVICE_INTERNAL SYMM__CONVERGENT uint32_t symm__warp_bcast0(uint32_t v) {
#if defined(__CUDACC__)
    return __shfl_sync(SYMM__FULL_MASK, v, 0);
#else
    return (uint32_t)__nvvm_shfl_sync_idx_i32(SYMM__FULL_MASK, (int)v, 0, 0x1f);
#endif
}

/* ---- reporting and stopping ------------------------------------------------- */

/* Device printf takes the format and a buffer holding the arguments, each at
 * its natural alignment, i.e. laid out as a C struct of them. CUDA C has
 * printf itself; in plain C the PTX system call vprintf is declared under a
 * private name (so a stdio.h in the same file does not clash) that binds to
 * the PTX symbol. CUDA's device printf only needs stdio's declaration. */
#if defined(__CUDACC__)
#  include <stdio.h>
#else
extern int symm__vprintf(const char *format, void *args) __asm__("vprintf");
#endif


#endif /* SYMM_DEVICE_IMPL_ARCH_H */
