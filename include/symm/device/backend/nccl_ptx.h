/*
 * device/backend/nccl_ptx.h - the PTX of the nccl backend's device file
 * (nccl.h), kept with its backend; symm's own PTX is in impl_ptx.h.
 */
#ifndef SYMM_DEVICE_BACKEND_NCCL_PTX_H
#define SYMM_DEVICE_BACKEND_NCCL_PTX_H

#include <stdint.h>
#include "symm/device/defs.h"

/* The write-through 16-byte store NCCL's GIN proxy queue uses (CUDA's __stwt
 * for uint4), for clang's CUDA mode, whose headers lack it. */
SYMM__DEVICE_INTERNAL void symm__st_wt_v4(void *p, uint32_t x, uint32_t y, uint32_t z, uint32_t w) {
    asm volatile("st.global.wt.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(x), "r"(y), "r"(z), "r"(w)
                 : "memory");
}

#endif /* SYMM_DEVICE_BACKEND_NCCL_PTX_H */
