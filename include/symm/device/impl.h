/*
 * device/impl.h - the inline implementation of symm_device.h.
 *
 * Included by symm_device.h whenever the compiler generates device code
 * (nvcc, or clang for nvptx64); never include it directly. Split by family:
 *   impl_arch.h  indices, warp/block barriers, timer, fences, printing, trap
 *   impl_ptx.h   loads/stores by width, ordering and scope; atomics; signals
 *   impl_wait.h  the spin-wait with deadline and abort flag
 *   impl_copy.h  the put/get copy engine (SM loads/stores) and its variants
 *   backend/dispatch.h  where a call to a peer outside the load/store window goes
 *                (the scale-out backends' device files, backend_*.h)
 *   impl_rma.h   context queries, p/g, put/get, put_signal, signals
 *   impl_pkt.h   packet puts: payload and flag in the same stores
 *   impl_ldst.h  remote load/store with ordering and scope
 *   impl_amo.h   atomics
 *   impl_sync.h  fence, quiet, device barrier
 *   trace.h      the device trace's hooks (nothing without SYMM_TRACE)
 *   impl_trace.h symm_trace_begin / symm_trace_end
 * Every function is plain C that nvcc also accepts as CUDA C++: the bitcode
 * (clang -x c, SYMM_BITCODE) and the CUDA header are the same code.
 */
#ifndef SYMM_DEVICE_IMPL_H
#define SYMM_DEVICE_IMPL_H

#ifndef SYMM_DEVICE_H
#  error "include symm/symm_device.h, not symm/device/impl.h"
#endif

#include "symm/device/impl_ptx.h" /* every PTX instruction: first, the others call it */
#include "symm/device/impl_arch.h"
#include "symm/device/trace.h"     /* the hooks the families below call */
#include "symm/device/impl_wait.h"
#include "symm/device/impl_copy.h"
#include "symm/device/backend/dispatch.h"
#include "symm/device/impl_rma.h"
#include "symm/device/impl_pkt.h"
#include "symm/device/impl_ldst.h"
#include "symm/device/impl_amo.h"
#include "symm/device/impl_sync.h"
#include "symm/device/impl_trace.h"

#endif /* SYMM_DEVICE_IMPL_H */
