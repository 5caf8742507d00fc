/*
 * coll.h - internal interface of the stream collectives (src/coll).
 */
#ifndef SYMM_COLL_H_INTERNAL
#define SYMM_COLL_H_INTERNAL

#include <stddef.h>
#include <stdint.h>
#include "symm/symm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of symmetric heap each team's staging area takes (allocated by the
 * first collective on the team). */
#define SYMM__COLL_STAGE_BYTES ((size_t)64 << 20)

/* Sizes (bytes per PE; per peer for all-to-all) up to which AUTO picks each
 * algorithm. Packets win over the direct kernels up to 128 KiB for every
 * collective on 4x H200 (forced-packet run in
 * bench/results/2026-11-21-h200-4gpu-coll-packet.md): the direct kernels
 * pay two handshakes (about 4 us) that packets do not. */
#define SYMM__COLL_PACKET_MAX  ((uint64_t)128 << 10)
#define SYMM__COLL_ONESHOT_MAX ((uint64_t)256 << 10)
/* Broadcast from 3 PEs: packets from the root to every non-root up to
 * HOP1_MAX bytes, then in two hops (root -> one non-root per part -> the
 * others) up to PACKET_MAX, then the direct kernel (symm__c_bcast_pieces).
 * On 4x H200 (graph us, bench/results/2026-11-21-h200-4gpu-coll-s4-bcast.md)
 * one hop wins to 128 KiB (6.76 vs 8.30 two-hop), two hops at 256 KiB (9.37
 * vs 9.74 one-hop, 11.33 direct), the direct kernel from 512 KiB (12.08 vs
 * 12.93 two-hop). Packets also need to fit the workspace's regions. */
#define SYMM__COLL_BCAST_HOP1_MAX   ((uint64_t)128 << 10)
#define SYMM__COLL_BCAST_PACKET_MAX ((uint64_t)256 << 10)
/* Region units per block of the packet and one-shot kernels (up to the
 * workspace's SYMM__COLL_WS_NBMAX blocks): 128 spreads an 8 KiB all-reduce
 * over 8 blocks, 3.76 us against 4.00 with 512 units per block
 * (bench/results/2026-11-21-h200-4gpu-coll-sweep-s3.md). */
#define SYMM__COLL_REGION_UNITS 128u
/* Most blocks a direct kernel (two-shot all-reduce, direct reduce-scatter,
 * all-gather, all-to-all, broadcast, all_to_allv) uses unless
 * SYMM_COLL_BLOCKS or symm__coll_tune says otherwise; each call takes one
 * block per 16 KiB up to this many. */
#define SYMM__COLL_DIRECT_BLOCKS 64
/* The same for the data-movement kernels (all-gather, all-to-all,
 * broadcast), which keep more stores in flight with more blocks: 335 vs 312
 * GB/s for a 64 MiB-per-rank all-gather with 128 vs 64 blocks
 * (bench/results/2026-11-21-h200-4gpu-coll-s3-r1.md, blocks table). */
#define SYMM__COLL_MOVE_BLOCKS 128

/* Copy-engine data movement (coll_ce.cu): a side stream and two events per
 * team, made when the team's first collective sets it up. */
typedef struct symm__coll_ce symm__coll_ce_t;
symm_status_t symm__coll_ce_create(symm__coll_ce_t **out);
void symm__coll_ce_destroy(symm__coll_ce_t *ce);
/* PE me copies send + p * src_piece (nbytes) to PE p's recv + me * out_piece
 * for every p of `team`, between two stream barriers of the team. recv must
 * be in the symmetric heap on every PE. Errors: SYMM_ERR_CUDA,
 * SYMM_ERR_INTERNAL. */
symm_status_t symm__coll_ce_move(symm__coll_ce_t *ce, symm_team_t team, const void *send, void *recv,
                                 uint64_t nbytes, uint64_t src_piece, uint64_t out_piece, symm_stream_t stream);

/* Forget every team's collective state (its memory belongs to the heap,
 * which finalize releases). To be called by symm_finalize before the heap
 * is unmapped; also safe to call when nothing was set up. */
void symm__coll_finalize(void);

/* Testing: set the call counters of every block slot of `team`'s workspace
 * to `count` and clear its flags and regions (on this PE; every PE must do
 * the same, between collectives, with every PE's device idle), so the next
 * calls run near the 2^32 wrap of the flag values. */
symm_status_t symm__coll_debug_set_epoch(symm_team_t team, uint64_t count);

/* Tuning (bench): override the most blocks of a direct kernel (1 ..
 * SYMM_COLL_MAX_BLOCKS - 1; 0 = SYMM_COLL_BLOCKS, else the default; it takes
 * precedence over SYMM_COLL_BLOCKS) and the AUTO thresholds (0 = default).
 * Not thread-safe; every PE must set the same values. */
void symm__coll_tune(int direct_blocks, uint64_t packet_max, uint64_t oneshot_max);
/* Tuning (bench): block slots of the packet / one-shot data regions of the
 * stream collectives (1 .. SYMM_COLL_MAX_BLOCKS - 1; 0 = SYMM__COLL_WS_NBMAX;
 * the regions shrink as the slots grow). Changes where the regions lie:
 * only with every PE's collectives idle (stream synchronised, then a
 * barrier, then a barrier after this call before the next collective),
 * every PE alike; it clears the regions. Errors: SYMM_ERR_CUDA. */
symm_status_t symm__coll_tune_nbmax(uint32_t nbmax);
/* Tuning (bench): the broadcast's one-hop and packet limits in bytes (0 =
 * the defaults above). */
void symm__coll_tune_bcast(uint64_t hop1_max, uint64_t packet_max);
/* Tuning (bench): region units (packet words, one-shot 16-byte units) per
 * block of the packet and one-shot kernels (0 = SYMM__COLL_REGION_UNITS). */
void symm__coll_tune_units(uint32_t units);

#ifdef __cplusplus
}
#endif

#endif /* SYMM_COLL_H_INTERNAL */
