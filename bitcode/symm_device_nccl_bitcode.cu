/*
 * symm_device_nccl_bitcode.cu - the source of libsymm_device_nccl_sm*.bc: the
 * device API fixed to the nccl backend (SYMM_DEVICE_BACKEND=nccl), for DSLs.
 *
 * NCCL ships its device API as C++ headers and no bitcode, so this file is
 * compiled by clang-19 in CUDA mode (-x cuda --cuda-device-only, see
 * bitcode/CMakeLists.txt): NCCL's templates are instantiated inside symm's
 * backend file (include/symm/device/backend/nccl.h), and with SYMM_BITCODE
 * every public symm_* function is exported with its plain C name, exactly as
 * in the plain-C libsymm_device_sm*.bc. A DSL links this one file; nothing of
 * NCCL needs linking besides (the ncclDevComm travels in the context). What
 * clang needs beyond nvcc to read NCCL's headers is in backend/nccl.h, and an
 * empty texture_fetch_functions.h the build puts on the include path (CUDA 13
 * dropped it; clang-19's CUDA wrapper still includes it).
 */
#if !defined(SYMM_BITCODE) || !defined(__CUDA__)
#  error "compile with clang -x cuda --cuda-device-only -DSYMM_BITCODE (bitcode/CMakeLists.txt)"
#endif

#include "symm/symm_device.h"
