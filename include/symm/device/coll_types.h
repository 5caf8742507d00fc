/*
 * device/coll_types.h - element types, reduction operations and algorithm
 * names of the collectives, shared by the host API (symm_coll.h), the device
 * API (symm_device_coll.h) and the bitcode. Plain C, fixed values: the device
 * calls take them as int so the bitcode ABI stays plain.
 */
#ifndef SYMM_DEVICE_COLL_TYPES_H
#define SYMM_DEVICE_COLL_TYPES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element type of a collective's buffers. Data-movement collectives
 * (all-gather, all-to-all, broadcast) accept every type; reductions accept
 * the pairs listed at symm_redop_t. */
typedef enum symm_dtype {
    SYMM_DTYPE_F32      = 0,
    SYMM_DTYPE_F16      = 1,  /* IEEE binary16 */
    SYMM_DTYPE_BF16     = 2,
    SYMM_DTYPE_F64      = 3,
    SYMM_DTYPE_I32      = 4,
    SYMM_DTYPE_U32      = 5,
    SYMM_DTYPE_I64      = 6,
    SYMM_DTYPE_U64      = 7,
    SYMM_DTYPE_FP8_E4M3 = 8,  /* OCP fp8 e4m3 (no infinities, NaN = S.1111.111) */
    SYMM_DTYPE_FP8_E5M2 = 9,  /* OCP fp8 e5m2 (the top byte of a binary16) */
    SYMM_DTYPE_U8       = 10, /* bytes: data movement only */
    SYMM_DTYPE_COUNT    = 11,
    /* Accumulator choice for symm_all_reduce_ex / symm_reduce_scatter_ex:
     * the type's own default (f32 for f16, bf16 and fp8; the type itself
     * otherwise). */
    SYMM_DTYPE_DEFAULT  = -1
} symm_dtype_t;

/*
 * Reduction operation. Supported pairs:
 *   SUM, MIN, MAX    every type but U8. f16 and bf16 accumulate in f32; fp8
 *                    accumulates in f32 (default) or f16 (acc = SYMM_DTYPE_F16),
 *                    the choices of multimem's .acc::f32 / .acc::f16. Other
 *                    types accumulate in themselves (integer sums wrap).
 *                    MIN/MAX of floats follow PTX min/max: a NaN operand
 *                    yields the other operand.
 *   BAND, BOR, BXOR  the integer types I32, U32, I64, U64 only.
 * Any other pair is SYMM_ERR_UNSUPPORTED.
 */
typedef enum symm_redop {
    SYMM_OP_SUM   = 0,
    SYMM_OP_MIN   = 1,
    SYMM_OP_MAX   = 2,
    SYMM_OP_BAND  = 3,
    SYMM_OP_BOR   = 4,
    SYMM_OP_BXOR  = 5,
    SYMM_OP_COUNT = 6
} symm_redop_t;

/*
 * Algorithms (SYMM_COLL_ALGO forces one by name; the device "_ex" calls take
 * the value). AUTO picks by size, team size and whether the buffers are
 * symmetric.
 *   PACKET    one-shot with the flag in the data: 16-byte {data, flag, data,
 *             flag} stores into each peer's scratch, polled by the reader; no
 *             separate signal, no barrier. Smallest sizes.
 *   ONESHOT   each PE pushes its data into every peer's scratch, signals once
 *             per peer, and reduces locally.
 *   TWOSHOT   reduce-scatter then all-gather straight between the symmetric
 *             buffers, with a start and an end handshake (other buffers are
 *             staged through symmetric scratch). Large sizes.
 *   MULTIMEM  NVLS multimem.ld_reduce / multimem.st through a multicast
 *             address; only when one exists (never yet: it falls back to
 *             TWOSHOT, its unicast twin, with identical results).
 *   PUSH      (stream all-reduce and reduce-scatter) two-shot in which every
 *             byte crosses NVLink as a store: each PE stores the peers'
 *             pieces into their scratch in pipelined steps, the owner
 *             reduces, and the all-reduce stores the result into every
 *             peer's recv. Largest sizes. Device calls fall back to TWOSHOT.
 * For the data-movement collectives PACKET is the flag-in-data form and
 * every other choice means the direct form.
 */
typedef enum symm_coll_algo {
    SYMM_COLL_ALGO_AUTO     = 0,
    SYMM_COLL_ALGO_PACKET   = 1,
    SYMM_COLL_ALGO_ONESHOT  = 2,
    SYMM_COLL_ALGO_TWOSHOT  = 3,
    SYMM_COLL_ALGO_MULTIMEM = 4,
    SYMM_COLL_ALGO_PUSH     = 5,
    SYMM_COLL_ALGO_COUNT    = 6
} symm_coll_algo_t;

/* Limits of the collectives: PEs in a team, and blocks of one grid-scope
 * call (each block has its own handshake slots). 256 leaves room for one
 * block per SM of any current GPU (132 on H100/H200) in the stream kernels,
 * which may use up to SYMM_COLL_MAX_BLOCKS - 1 (the last slot is the grid
 * barrier's). */
#define SYMM_COLL_MAX_PES    64
#define SYMM_COLL_MAX_BLOCKS 256

/* ------------------------------------------------------------------------ */
/* Workspace layout (internal, but shared by host and device code)           */
/* ------------------------------------------------------------------------ */

/*
 * A collective workspace is a symmetric allocation, zeroed when made:
 *   [0, 2 KiB)        uint64 epoch[MAX_BLOCKS]   calls made so far by block
 *                                                slot b (local; never read
 *                                                by peers)
 *   [2 KiB, +16)      uint64 grid[2]             grid barrier: arrivals, release
 *                                                generation (local)
 *   [4 KiB, +384 KiB) uint32 flag[3][2][MAX_BLOCKS][MAX_PES]
 *                                                handshake words: [kind]
 *                                                [call parity][block][source PE];
 *                                                kind 2 (broadcast: piece arrived)
 *                                                is indexed by piece, not PE
 *   [.., +512 KiB)    uint64 aux[MAX_BLOCKS][MAX_PES][4]
 *                                                written by block b of PE p into
 *                                                aux[b][p] before its start flag:
 *                                                the heap offsets of its src and dst (and
 *                                                for all_to_allv where and how
 *                                                much this PE may write there)
 *   [SYNC_BYTES, ..)  data regions [2 form][2 parity][nbmax][n_pes][region bytes]
 *                                                form 0: PACKET's packets; form 1:
 *                                                ONESHOT's plain data. Apart,
 *                                                because a packet reader polls its
 *                                                region: plain data left there by
 *                                                an earlier call could hold the
 *                                                flag value of a later packet in
 *                                                both halves of a 16-byte unit
 *                                                and pass for a packet
 * Slot b is used only by block b of a call (nothing is shared between slots
 * but the grid-barrier words), so calls whose grid sizes differ may follow
 * each other, and the blocks of a grid-scope device call need not wait for
 * each other between calls. Flags are compared for equality with a value that
 * is never 0 and repeats only every 2^32-1 calls of a slot, and the data
 * regions alternate by call parity: a peer can never be two calls ahead of a
 * reader, because each call waits for something every peer sent in it. A
 * slot that gets no data of a packet call would wait for nothing, so it sits
 * the call out without counting it, on every PE alike (symm__c_slot_idle).
 */
#define SYMM__COLL_WS_EPOCH_OFF 0u
#define SYMM__COLL_WS_GRID_OFF  (SYMM_COLL_MAX_BLOCKS * 8u)
#define SYMM__COLL_WS_FLAG_OFF  4096u
#if SYMM_COLL_MAX_BLOCKS * 8 + 16 > 4096
#  error "the epoch words and the grid barrier must fit below SYMM__COLL_WS_FLAG_OFF"
#endif
#define SYMM__COLL_WS_FLAG_KINDS 3u
#define SYMM__COLL_WS_FLAG_BYTES                                                          \
    (SYMM__COLL_WS_FLAG_KINDS * 2u * SYMM_COLL_MAX_BLOCKS * SYMM_COLL_MAX_PES * 4u)
#define SYMM__COLL_WS_AUX_OFF   (SYMM__COLL_WS_FLAG_OFF + SYMM__COLL_WS_FLAG_BYTES)
#define SYMM__COLL_WS_AUX_BYTES (SYMM_COLL_MAX_BLOCKS * SYMM_COLL_MAX_PES * 4u * 8u)
#define SYMM__COLL_WS_SYNC_BYTES                                                          \
    ((SYMM__COLL_WS_AUX_OFF + SYMM__COLL_WS_AUX_BYTES + 4095u) & ~4095u)

/* Data-region geometry of a workspace of `size` bytes for a team of n PEs:
 * NBMAX block slots, each region a multiple of 256 bytes, at most 1 GiB;
 * 0 when there is no room. The packet regions fill the first half of the
 * workspace after the sync words (the places they had in a 16 MiB workspace
 * before the one-shot regions moved out of them: the 128-256 KiB
 * all-reduces were 0.2-0.3 us slower with the regions packed closer,
 * bench/results/2026-11-21-h200-4gpu-coll-s5-run3.md against -s5-final.md),
 * the one-shot regions follow. Host and device compute it alike, so both
 * agree on every PE (same scratch size, same team). */
#define SYMM__COLL_WS_NBMAX 32u
#define SYMM__COLL_WS_REGION(size, n) SYMM__COLL_WS_REGION_NB(size, n, SYMM__COLL_WS_NBMAX)
/* The same for `nb` block slots (the stream collectives' tuning hook may
 * use another count than NBMAX; the device forms always use NBMAX). */
#define SYMM__COLL_WS_REGION_NB(size, n, nb)                                               \
    (((uint64_t)(size) / 2 <= SYMM__COLL_WS_SYNC_BYTES || (n) <= 0) ? 0ull                 \
     : ((((uint64_t)(size) / 2 - SYMM__COLL_WS_SYNC_BYTES) /                               \
         (2ull * (uint64_t)(nb) * (uint64_t)(n))) & ~255ull) > (1ull << 30)                 \
         ? (1ull << 30)                                                                    \
         : ((((uint64_t)(size) / 2 - SYMM__COLL_WS_SYNC_BYTES) /                           \
             (2ull * (uint64_t)(nb) * (uint64_t)(n))) & ~255ull))

/* What a kernel needs to find its workspace: the sync area, the data regions
 * and their geometry (the same on every PE). */
typedef struct symm__coll_ws {
    uint64_t base;    /* heap address of the sync area (this PE's copy) */
    uint64_t data;    /* heap address of the data regions; 0 = none */
    uint32_t nbmax;   /* block slots with a data region per parity */
    uint32_t region;  /* bytes of one region (a multiple of 16) */
} symm__coll_ws_t;

#ifdef __cplusplus
}
#endif

#endif /* SYMM_DEVICE_COLL_TYPES_H */
