/*
 * symm_device.h - the device API of symm: what kernels call.
 *
 * Every function takes the context of a team (const symm_ctx_t *, from
 * symm_team_ctx / symm_ctx on the host) and a PE index within that team.
 * Pointers passed as `dest`/`src` on the remote side are symmetric: addresses
 * in this PE's own heap, which the call translates to PE `pe`'s copy.
 * There is no module-level state; linking this header (CUDA C) or
 * libsymm_device.bc (DSLs) is all a kernel needs.
 *
 * Scope of a call, in its name:
 *   (none)  thread scope: any thread may call it, alone.
 *   _warp   all 32 lanes of a warp call it together, with the same arguments.
 *   _block  every thread of the block calls it together, with the same
 *           arguments (it contains __syncthreads-like barriers).
 *
 * Memory semantics (OpenSHMEM's, over NVLink load/store; docs/design.md 5):
 *   put / p       Blocking: on return the source may be reused. Delivery to the
 *                 target is not yet guaranteed visible: use fence (ordering
 *                 between puts to one PE), quiet (all prior puts visible), a
 *                 signal, or a barrier.
 *   put_nbi       The source must not change until the next quiet.
 *   get / g       Blocking: on return the data is in dest (for _block forms,
 *                 visible to every thread of the block).
 *   get_nbi       dest is valid after the next quiet.
 *   put_signal    The signal is updated after the data, with release semantics
 *                 at system scope: a PE that observes the signal with an
 *                 acquire wait (signal_wait_until) sees the data.
 *   fence         All puts/p/atomics of the caller to a given PE issued before
 *                 the fence are delivered before those issued after it.
 *   quiet         All puts/p/atomics/nbi operations of the caller issued before
 *                 it are complete and visible to all PEs.
 *   atomics       Relaxed, system scope, performed at the target; order them
 *                 with fence/quiet.
 *   wait_until    Acquire at system scope: stores that happened before the
 *                 store that satisfied the condition are visible after it.
 *   barrier       Includes quiet: all prior puts of every PE are visible to
 *                 every PE when it returns.
 *
 * No hangs (docs/design.md 6): every spin-wait checks ctx->timeout_ns (set from
 * SYMM_WAIT_TIMEOUT: 600 s by default, 60 in a debug build) and the
 * context's abort flag (raised by the host when a peer dies or reports a
 * failure). On expiry it prints
 *   symm: PE <pe>: wait timed out after <s> s at <addr>: waiting for
 *   <cmp> <expected>, last seen <value>
 * and traps, which fails the kernel (cudaErrorLaunchFailure on the host).
 */
#ifndef SYMM_DEVICE_H
#define SYMM_DEVICE_H

#include "symm/symm_types.h"
#include "symm/device/defs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Type lists: (suffix, C type). The bitcode symbol check reads these too.    */
/* ------------------------------------------------------------------------ */

#define SYMM_FOR_EACH_RMA_TYPE(X)                                            \
    X(i8, int8_t) X(i16, int16_t) X(i32, int32_t) X(i64, int64_t)            \
    X(u8, uint8_t) X(u16, uint16_t) X(u32, uint32_t) X(u64, uint64_t)        \
    X(f32, float) X(f64, double)

#define SYMM_FOR_EACH_LDST_TYPE(X)                                           \
    X(i32, int32_t) X(i64, int64_t) X(u32, uint32_t) X(u64, uint64_t)        \
    X(f32, float) X(f64, double)

#define SYMM_FOR_EACH_AMO_TYPE(X)                                            \
    X(i32, int32_t) X(i64, int64_t) X(u32, uint32_t) X(u64, uint64_t)

/* ------------------------------------------------------------------------ */
/* Context queries and pointer translation                                    */
/* ------------------------------------------------------------------------ */

/* This PE's index in the context's team, and the team's size. */
SYMM_DEVICE_FN int symm_ctx_my_pe(const symm_ctx_t *ctx);
SYMM_DEVICE_FN int symm_ctx_n_pes(const symm_ctx_t *ctx);

/* PE `pe`'s copy of the symmetric object at `ptr` (an address in this PE's
 * heap), directly loadable/storable by this GPU; NULL if `pe` is outside the
 * team or `ptr` is outside the heap. ptr itself when pe == my_pe. */
SYMM_DEVICE_FN void *symm_ctx_ptr(const symm_ctx_t *ctx, const void *ptr, int pe);

/* ------------------------------------------------------------------------ */
/* Single-element put (p) and get (g)                                          */
/* ------------------------------------------------------------------------ */

/* symm_p_<T>: store `value` into PE pe's copy of *dest. Thread scope.
 * symm_g_<T>: load PE pe's copy of *src. Thread scope. */
#define SYMM__DECL_PG(S, T)                                                  \
    SYMM_DEVICE_FN void symm_p_##S(const symm_ctx_t *ctx, T *dest, T value, int pe); \
    SYMM_DEVICE_FN T symm_g_##S(const symm_ctx_t *ctx, const T *src, int pe);
SYMM_FOR_EACH_RMA_TYPE(SYMM__DECL_PG)
#undef SYMM__DECL_PG

/* ------------------------------------------------------------------------ */
/* Bulk put and get of bytes                                                  */
/* ------------------------------------------------------------------------ */

/* Copy nbytes from local `src` to PE pe's copy of `dest` (put), or from PE
 * pe's copy of `src` to local `dest` (get). Any size and alignment; wider
 * accesses are used when dest and src share alignment. */
SYMM_DEVICE_FN void symm_put(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes, int pe);
SYMM_DEVICE_FN void symm_put_nbi(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes, int pe);
SYMM_DEVICE_FN void symm_put_warp(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes, int pe);
SYMM_DEVICE_FN void symm_put_warp_nbi(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes, int pe);
SYMM_DEVICE_FN void symm_put_block(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes, int pe);
SYMM_DEVICE_FN void symm_put_block_nbi(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes, int pe);

SYMM_DEVICE_FN void symm_get(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes, int pe);
SYMM_DEVICE_FN void symm_get_nbi(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes, int pe);
SYMM_DEVICE_FN void symm_get_warp(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes, int pe);
SYMM_DEVICE_FN void symm_get_warp_nbi(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes, int pe);
SYMM_DEVICE_FN void symm_get_block(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes, int pe);
SYMM_DEVICE_FN void symm_get_block_nbi(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes, int pe);

/* ------------------------------------------------------------------------ */
/* Put with signal, and signals                                               */
/* ------------------------------------------------------------------------ */

/* Put nbytes, then update PE pe's copy of the 64-bit signal word `sig` with
 * `signal` by `sig_op` (SYMM_SIGNAL_SET / SYMM_SIGNAL_ADD), with release
 * semantics after the data. The nbi forms may return before the data is
 * delivered; the signal still follows the data. */
SYMM_DEVICE_FN void symm_put_signal(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes,
                                    uint64_t *sig, uint64_t signal, int sig_op, int pe);
SYMM_DEVICE_FN void symm_put_signal_nbi(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes,
                                        uint64_t *sig, uint64_t signal, int sig_op, int pe);
SYMM_DEVICE_FN void symm_put_signal_warp(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes,
                                         uint64_t *sig, uint64_t signal, int sig_op, int pe);
SYMM_DEVICE_FN void symm_put_signal_warp_nbi(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes,
                                             uint64_t *sig, uint64_t signal, int sig_op, int pe);
SYMM_DEVICE_FN void symm_put_signal_block(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes,
                                          uint64_t *sig, uint64_t signal, int sig_op, int pe);
SYMM_DEVICE_FN void symm_put_signal_block_nbi(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes,
                                              uint64_t *sig, uint64_t signal, int sig_op, int pe);

/* Update PE pe's copy of `sig` (SET or ADD), with release semantics: the
 * caller's earlier stores are visible to whoever observes the new value. */
SYMM_DEVICE_FN void symm_signal_op(const symm_ctx_t *ctx, uint64_t *sig, uint64_t value, int sig_op, int pe);

/* Read the local signal word with acquire semantics. */
SYMM_DEVICE_FN uint64_t symm_signal_fetch(const symm_ctx_t *ctx, const uint64_t *sig);

/* Wait until (*sig cmp value) on the local signal word (acquire); returns the
 * value that satisfied it. Honours the deadline and the abort flag. */
SYMM_DEVICE_FN uint64_t symm_signal_wait_until(const symm_ctx_t *ctx, const uint64_t *sig, int cmp, uint64_t value);

/* Same for local 32/64-bit words of other types (OpenSHMEM wait_until). */
#define SYMM__DECL_WAIT(S, T)                                                \
    SYMM_DEVICE_FN T symm_wait_until_##S(const symm_ctx_t *ctx, const T *ivar, int cmp, T value);
SYMM_FOR_EACH_AMO_TYPE(SYMM__DECL_WAIT)
#undef SYMM__DECL_WAIT

/* ------------------------------------------------------------------------ */
/* Packet puts: the payload and its flag in the same stores                   */
/* ------------------------------------------------------------------------ */

/*
 * A packet buffer holds a payload of nbytes as SYMM_PKT_BYTES(nbytes) bytes
 * of symmetric memory (16-byte aligned; cleared to 0 when allocated): each
 * 8-byte word of the payload travels in a 16-byte packet with the flag in
 * each half. symm_put_pkt stores src's nbytes into PE pe's copy of `pkt`,
 * every packet marked with `flag` (not 0); no fence, so the receiver can
 * have it one NVLink trip later. symm_pkt_wait waits until every packet of
 * the local `pkt` carries `flag`, copying the payload into `dest` (any
 * local memory) as it arrives, and honours the deadline and the abort flag.
 *
 * The flag is the signal: it says this payload has arrived, and nothing
 * else (unlike symm_put_signal, it orders none of the caller's other
 * stores). The sender must not put into a buffer again before its reader
 * has waited for the previous flag (a reply, or two buffers used in turn),
 * and each put into a buffer uses a flag the buffer does not already hold
 * (a sequence number; 0 is never one). PE pe must be in the load/store
 * window. Thread scope; the _warp and _block forms share the packets among
 * the lanes and end with a warp or block barrier.
 */
#define SYMM_PKT_BYTES(nbytes) ((((size_t)(nbytes) + 7u) / 8u) * 16u)
SYMM_DEVICE_FN void symm_put_pkt(const symm_ctx_t *ctx, void *pkt, const void *src, size_t nbytes, uint32_t flag,
                                 int pe);
SYMM_DEVICE_FN void symm_put_pkt_warp(const symm_ctx_t *ctx, void *pkt, const void *src, size_t nbytes,
                                      uint32_t flag, int pe);
SYMM_DEVICE_FN void symm_put_pkt_block(const symm_ctx_t *ctx, void *pkt, const void *src, size_t nbytes,
                                       uint32_t flag, int pe);
SYMM_DEVICE_FN void symm_pkt_wait(const symm_ctx_t *ctx, const void *pkt, void *dest, size_t nbytes, uint32_t flag);
SYMM_DEVICE_FN void symm_pkt_wait_warp(const symm_ctx_t *ctx, const void *pkt, void *dest, size_t nbytes,
                                       uint32_t flag);
SYMM_DEVICE_FN void symm_pkt_wait_block(const symm_ctx_t *ctx, const void *pkt, void *dest, size_t nbytes,
                                        uint32_t flag);

/*
 * Register forms, for the smallest messages (the one-way latency of a bare
 * flag): the payload is a uint64_t in a register at both ends, one packet
 * (16 bytes of the buffer) per word, so neither end touches memory for it.
 * symm_put_pkt_v64 stores `value` as the one packet of `pkt` (a buffer of
 * SYMM_PKT_BYTES(8)); symm_pkt_wait_v64 waits for it to carry `flag` and
 * returns its value. The _warp forms move nwords (1..32) words at once:
 * lane i < nwords puts its own `value` as packet i (all in flight
 * together; a buffer of SYMM_PKT_BYTES(8 * nwords)), and the wait returns
 * packet i's word to lane i (0 to lanes >= nwords); every lane of the warp
 * calls them with the same pkt, nwords, flag and pe, and they end with a
 * warp barrier. Same contract as above: the flag says only that this
 * payload has arrived, the buffer takes a new put only after its reader has
 * waited for the previous flag, each put a flag the buffer does not hold
 * (not 0), `pkt` 16-byte aligned, PE pe in the load/store window. They
 * share the buffer format with symm_put_pkt/symm_pkt_wait: word k of a
 * payload is packet k, so a v64 put can be read by symm_pkt_wait and back.
 */
SYMM_DEVICE_FN void symm_put_pkt_v64(const symm_ctx_t *ctx, void *pkt, uint64_t value, uint32_t flag, int pe);
SYMM_DEVICE_FN void symm_put_pkt_v64_warp(const symm_ctx_t *ctx, void *pkt, uint64_t value, uint32_t nwords,
                                          uint32_t flag, int pe);
SYMM_DEVICE_FN uint64_t symm_pkt_wait_v64(const symm_ctx_t *ctx, const void *pkt, uint32_t flag);
SYMM_DEVICE_FN uint64_t symm_pkt_wait_v64_warp(const symm_ctx_t *ctx, const void *pkt, uint32_t nwords,
                                               uint32_t flag);

/* ------------------------------------------------------------------------ */
/* Remote load/store with scope and ordering                                  */
/* ------------------------------------------------------------------------ */

/* symm_ld_<T>: load PE pe's copy of *ptr with ordering `sem` (WEAK, RELAXED,
 * ACQUIRE, VOLATILE) at `scope` (CTA, GPU, SYS). symm_st_<T>: store with
 * `sem` (WEAK, RELAXED, RELEASE, VOLATILE). Other sems are treated as the
 * nearest stronger one (RELEASE on a load -> ACQUIRE; ACQUIRE on a store ->
 * RELEASE). Thread scope. With constant sem/scope the switch folds away. */
#define SYMM__DECL_LDST(S, T)                                                \
    SYMM_DEVICE_FN T symm_ld_##S(const symm_ctx_t *ctx, const T *ptr, int pe, int sem, int scope); \
    SYMM_DEVICE_FN void symm_st_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe, int sem, int scope);
SYMM_FOR_EACH_LDST_TYPE(SYMM__DECL_LDST)
#undef SYMM__DECL_LDST

/* ------------------------------------------------------------------------ */
/* Atomics on PE pe's copy of *ptr (relaxed, system scope)                    */
/* ------------------------------------------------------------------------ */

#define SYMM__DECL_AMO(S, T)                                                                     \
    SYMM_DEVICE_FN T    symm_atomic_fetch_##S(const symm_ctx_t *ctx, const T *ptr, int pe);      \
    SYMM_DEVICE_FN void symm_atomic_set_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe);     \
    SYMM_DEVICE_FN T    symm_atomic_swap_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe);    \
    SYMM_DEVICE_FN T    symm_atomic_compare_swap_##S(const symm_ctx_t *ctx, T *ptr, T cond, T value, int pe); \
    SYMM_DEVICE_FN void symm_atomic_inc_##S(const symm_ctx_t *ctx, T *ptr, int pe);              \
    SYMM_DEVICE_FN T    symm_atomic_fetch_inc_##S(const symm_ctx_t *ctx, T *ptr, int pe);        \
    SYMM_DEVICE_FN void symm_atomic_add_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe);     \
    SYMM_DEVICE_FN T    symm_atomic_fetch_add_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe); \
    SYMM_DEVICE_FN void symm_atomic_and_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe);     \
    SYMM_DEVICE_FN T    symm_atomic_fetch_and_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe); \
    SYMM_DEVICE_FN void symm_atomic_or_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe);      \
    SYMM_DEVICE_FN T    symm_atomic_fetch_or_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe);  \
    SYMM_DEVICE_FN void symm_atomic_xor_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe);     \
    SYMM_DEVICE_FN T    symm_atomic_fetch_xor_##S(const symm_ctx_t *ctx, T *ptr, T value, int pe);
SYMM_FOR_EACH_AMO_TYPE(SYMM__DECL_AMO)
#undef SYMM__DECL_AMO

/* ------------------------------------------------------------------------ */
/* Ordering and completion                                                    */
/* ------------------------------------------------------------------------ */

SYMM_DEVICE_FN void symm_fence(const symm_ctx_t *ctx);
SYMM_DEVICE_FN void symm_fence_warp(const symm_ctx_t *ctx);
SYMM_DEVICE_FN void symm_fence_block(const symm_ctx_t *ctx);
SYMM_DEVICE_FN void symm_quiet(const symm_ctx_t *ctx);
SYMM_DEVICE_FN void symm_quiet_warp(const symm_ctx_t *ctx);
SYMM_DEVICE_FN void symm_quiet_block(const symm_ctx_t *ctx);

/* ------------------------------------------------------------------------ */
/* Device barrier across the PEs of the context's team                        */
/* ------------------------------------------------------------------------ */

/* Quiet, then wait until every PE of the team has reached the barrier. One
 * block (or warp, or thread, for the other scopes) per PE calls it at a time
 * per team; no cooperative launch is needed. The state lives in the heap, so
 * barriers work across kernel launches and CUDA graph replays.
 * symm_sync* are the same without the quiet (they still order the caller's
 * stores before the arrival). */
SYMM_DEVICE_FN void symm_barrier(const symm_ctx_t *ctx);
SYMM_DEVICE_FN void symm_barrier_warp(const symm_ctx_t *ctx);
SYMM_DEVICE_FN void symm_barrier_block(const symm_ctx_t *ctx);
SYMM_DEVICE_FN void symm_sync_block(const symm_ctx_t *ctx);

/* ------------------------------------------------------------------------ */
/* Device trace: a kernel's own regions                                       */
/* ------------------------------------------------------------------------ */

/* Mark the start and the end of a region of the calling thread's work on
 * the device trace (docs/trace.md), named on the host by name_id
 * (symm_trace_name). Thread scope: the thread that calls begin calls end
 * with the same id; regions nest. They cost nothing unless the code is
 * built with SYMM_TRACE (the traced bitcode for the DSLs) and a trace is
 * recording (symm_trace_start). */
SYMM_DEVICE_FN void symm_trace_begin(const symm_ctx_t *ctx, int name_id);
SYMM_DEVICE_FN void symm_trace_end(const symm_ctx_t *ctx, int name_id);

#ifdef __cplusplus
}
#endif

#if SYMM_DEVICE_CODE
#  include "symm/device/impl.h"
#endif

#include "symm/symm_device_coll.h"

#endif /* SYMM_DEVICE_H */
