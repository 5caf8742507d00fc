/*
 * contract/coll_layout.h - the layout of a collective workspace: internal, but
 * shared by the host side of the collectives (src/coll) and the device code
 * (coll_impl.h), which must agree on it on every PE.
 */
#ifndef SYMM_CONTRACT_COLL_LAYOUT_H
#define SYMM_CONTRACT_COLL_LAYOUT_H

#include <stdint.h>
#include "symm/symm_coll_types.h"

#ifdef __cplusplus
extern "C" {
#endif

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
 *   [4 KiB, +640 KiB) uint32 flag[5][2][MAX_BLOCKS][MAX_PES]
 *                                                handshake words: [kind]
 *                                                [call parity][block][source PE];
 *                                                kind 2 (broadcast: piece arrived)
 *                                                is indexed by piece, not PE;
 *                                                kinds 3 and 4 (the copy-engine
 *                                                pipelines, src/coll/coll_k_ce.cu:
 *                                                chunk landed, buffer freed) by
 *                                                chunk instead of block
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
#define SYMM__COLL_WS_FLAG_KINDS 5u
#define SYMM__COLL_WS_FLAG_BYTES                                                          \
    (SYMM__COLL_WS_FLAG_KINDS * 2u * SYMM_COLL_MAX_BLOCKS * SYMM_COLL_MAX_PES * 4u)
#define SYMM__COLL_WS_AUX_OFF   (SYMM__COLL_WS_FLAG_OFF + SYMM__COLL_WS_FLAG_BYTES)
#define SYMM__COLL_WS_AUX_BYTES (SYMM_COLL_MAX_BLOCKS * SYMM_COLL_MAX_PES * 4u * 8u)
#define SYMM__COLL_WS_SYNC_BYTES                                                          \
    ((SYMM__COLL_WS_AUX_OFF + SYMM__COLL_WS_AUX_BYTES + 4095u) & ~4095u)

/* Data-region geometry of a workspace of `size` bytes for a team of n PEs:
 * NBMAX block slots, each region a multiple of 256 bytes, at most 1 GiB;
 * 0 when there is no room. The packet regions fill the first half of the
 * workspace after the sync words, the one-shot regions follow (packed
 * closer, the 128-256 KiB all-reduces were 0.2-0.3 us slower: docs/tuning.md). Host and device compute it alike, so both
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

#endif /* SYMM_CONTRACT_COLL_LAYOUT_H */
