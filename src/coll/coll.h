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

/* Sizes (bytes per PE) up to which AUTO picks each algorithm. */
#define SYMM__COLL_PACKET_MAX  ((uint64_t)32 << 10)
#define SYMM__COLL_ONESHOT_MAX ((uint64_t)256 << 10)
#define SYMM__COLL_A2A_PACKET_MAX ((uint64_t)16 << 10)
/* Most blocks a direct kernel (two-shot all-reduce, direct reduce-scatter,
 * all-gather, all-to-all, broadcast, all_to_allv) uses unless
 * SYMM_COLL_BLOCKS or symm__coll_tune says otherwise; each call takes one
 * block per 16 KiB up to this many. */
#define SYMM__COLL_DIRECT_BLOCKS 64

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

#ifdef __cplusplus
}
#endif

#endif /* SYMM_COLL_H_INTERNAL */
