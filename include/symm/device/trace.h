/*
 * device/trace.h - the hooks of the device trace (docs/trace.md).
 *
 * Every traced call site in the device headers (and in libsymm's own
 * kernels) uses only these macros. Without SYMM_TRACE (or with
 * SYMM_TRACE=0) each expands to nothing, so a build without the trace is
 * the code it was before the hooks existed (tests/trace/check_ptx_off.cmake
 * compares the PTX with this file replaced by empty macros). With
 * SYMM_TRACE they record into the trace buffer the context points at
 * (symm_ctx_t.trace), and do nothing but a register test while it is 0.
 *
 *   SYMM__TRACE_START(ctx, t, g)   declares `t`, the start time of a call made
 *                                  by group g (SYMM_TRACE_GROUP_*): 0 when
 *                                  nothing is recorded (no trace, or not the
 *                                  group's recording thread)
 *   SYMM__TRACE_RMA(ctx, t, kind, g, nbi, pe, addr, nbytes)     put / get
 *   SYMM__TRACE_PUT_SIGNAL(ctx, t, g, nbi, pe, sig, nbytes, value, op)
 *   SYMM__TRACE_SIGNAL(ctx, t, pe, sig, value, op)
 *   SYMM__TRACE_PUT_PKT(ctx, t, g, pe, pkt, nbytes, flag)        symm_put_pkt*
 *   SYMM__TRACE_WAIT(ctx, t, what, addr, pe, cmp, expected, seen)
 *   SYMM__TRACE_WAIT_G(ctx, t, g, what, addr, pe, cmp, expected, seen)  a wait
 *                                  made by group g (warp / block scope)
 *   SYMM__TRACE_SYNC(ctx, t, kind, g, flags)   barrier / fence / quiet
 *   SYMM__TRACE_COLL(ctx, t, coll, algo, flags, nbytes)  a block's collective
 *   SYMM__TRACE_REGION(ctx, kind, name)        symm_trace_begin / _end
 */
#ifndef SYMM_DEVICE_TRACE_H
#define SYMM_DEVICE_TRACE_H

#if defined(SYMM_TRACE) && (SYMM_TRACE + 0)
#  define SYMM__TRACE_ON 1
#  include "symm/device/trace_record.h"
#  define SYMM__TRACE_START(ctx, t, g) const uint64_t t = symm__trace_start((ctx), (g))
#  define SYMM__TRACE_RMA(ctx, t, kind, g, nbi, pe, addr, nbytes)                                   \
    symm__trace_rec((ctx), (t), (kind), (g), (nbi) ? SYMM_TRACE_F_NBI : 0u, (pe),                     \
                    (uint64_t)(uintptr_t)(addr), (uint64_t)(nbytes), 0)
#  define SYMM__TRACE_PUT_SIGNAL(ctx, t, g, nbi, pe, sig, nbytes, value, op)                        \
    symm__trace_rec((ctx), (t), SYMM_TRACE_PUT_SIGNAL, (g),                                          \
                    ((nbi) ? SYMM_TRACE_F_NBI : 0u) | ((op) == SYMM_SIGNAL_ADD ? SYMM_TRACE_F_ADD : 0u), \
                    (pe), (uint64_t)(uintptr_t)(sig), (uint64_t)(nbytes), (uint64_t)(value))
#  define SYMM__TRACE_PUT_PKT(ctx, t, g, pe, pkt, nbytes, flag)                                     \
    symm__trace_rec((ctx), (t), SYMM_TRACE_PUT, (g), SYMM_TRACE_F_PKT, (pe), (uint64_t)(uintptr_t)(pkt),  \
                    (uint64_t)(nbytes), (uint64_t)(flag))
#  define SYMM__TRACE_SIGNAL(ctx, t, pe, sig, value, op)                                            \
    symm__trace_rec((ctx), (t), SYMM_TRACE_SIGNAL, SYMM_TRACE_GROUP_THREAD,                          \
                    (op) == SYMM_SIGNAL_ADD ? SYMM_TRACE_F_ADD : 0u, (pe), (uint64_t)(uintptr_t)(sig),   \
                    (uint64_t)(value), 0)
#  define SYMM__TRACE_WAIT(ctx, t, what, addr, pe, cmp, expected, seen)                             \
    symm__trace_rec((ctx), (t), SYMM_TRACE_WAIT, SYMM_TRACE_GROUP_THREAD,                            \
                    SYMM_TRACE_WAIT_FLAGS((cmp), (what)), (pe), (uint64_t)(uintptr_t)(addr),             \
                    (uint64_t)(expected), (uint64_t)(seen))
#  define SYMM__TRACE_WAIT_G(ctx, t, g, what, addr, pe, cmp, expected, seen)                       \
    symm__trace_rec((ctx), (t), SYMM_TRACE_WAIT, (g), SYMM_TRACE_WAIT_FLAGS((cmp), (what)), (pe),         \
                    (uint64_t)(uintptr_t)(addr), (uint64_t)(expected), (uint64_t)(seen))
#  define SYMM__TRACE_SYNC(ctx, t, kind, g, flags)                                                  \
    symm__trace_rec((ctx), (t), (kind), (g), (flags), -1, 0, 0, 0)
#  define SYMM__TRACE_COLL(ctx, t, coll, algo, flags, nbytes)                                       \
    symm__trace_rec((ctx), (t), SYMM_TRACE_COLL, SYMM_TRACE_GROUP_BLOCK,                             \
                    ((uint32_t)(algo) & 7u) << 4 | (flags), -1, 0, (uint64_t)(nbytes), (uint64_t)(coll))
#  define SYMM__TRACE_REGION(ctx, kind, name) symm__trace_mark((ctx), (kind), (name))
#else
#  define SYMM__TRACE_ON 0
#  define SYMM__TRACE_START(...)
#  define SYMM__TRACE_RMA(...)
#  define SYMM__TRACE_PUT_SIGNAL(...)
#  define SYMM__TRACE_PUT_PKT(...)
#  define SYMM__TRACE_SIGNAL(...)
#  define SYMM__TRACE_WAIT(...)
#  define SYMM__TRACE_WAIT_G(...)
#  define SYMM__TRACE_SYNC(...)
#  define SYMM__TRACE_COLL(...)
#  define SYMM__TRACE_REGION(...)
#endif

#endif /* SYMM_DEVICE_TRACE_H */
