/*
 * symm_device_bitcode.c - the device API compiled as a library: the source of
 * libsymm_device*.bc, which Triton and other DSL compilers link into their
 * kernels.
 *
 * Built by clang in plain C for nvptx64-nvidia-cuda with SYMM_BITCODE defined
 * (see bitcode/CMakeLists.txt), which turns every SYMM_DEVICE_FN of the public
 * headers into an external definition with its plain C name, while the
 * internal helpers (SYMM__DEVICE_INTERNAL, SYMM__NOINLINE) stay static. The
 * result defines exactly the functions that symm_device.h and
 * symm_device_coll.h declare, and no global state: the DSL's linker pulls in
 * what a kernel calls, internalises it and inlines it.
 */
#if !defined(SYMM_BITCODE) || !defined(__NVPTX__)
#  error "compile with clang --target=nvptx64-nvidia-cuda -DSYMM_BITCODE (bitcode/CMakeLists.txt)"
#endif

#include "symm/symm_device.h"
