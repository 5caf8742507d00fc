/*
 * coll.h - internal interface of the stream collectives (src/coll).
 */
#ifndef SYMM_COLL_H_INTERNAL
#define SYMM_COLL_H_INTERNAL

#include <stddef.h>
#include <stdint.h>
#include "symm/symm.h"
#include "symm/contract/coll_auto.h"
#include "symm/contract/coll_layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of symmetric heap each team's staging area takes (allocated by the
 * first collective on the team). */
#define SYMM__COLL_STAGE_BYTES ((size_t)64 << 20)

/* Region units per block of the packet and one-shot kernels (up to the
 * workspace's SYMM__COLL_WS_NBMAX blocks): small calls spread over several
 * blocks (8 KiB over 8: 3.76 us against 4.00 with 512 units per block). */
#define SYMM__COLL_REGION_UNITS 128u
/* Most blocks a direct kernel (two-shot all-reduce, direct reduce-scatter,
 * all-gather, all-to-all, broadcast, all_to_allv) uses unless
 * SYMM_COLL_BLOCKS or symm__coll_tune says otherwise; each call takes one
 * block per 16 KiB up to this many. */
#define SYMM__COLL_DIRECT_BLOCKS 64
/* The same for the data-movement kernels (all-gather, all-to-all,
 * broadcast), which keep more stores in flight with more blocks (all-gather
 * 64 MiB per rank: 335 against 312 GB/s with 64 blocks). */
#define SYMM__COLL_MOVE_BLOCKS 128

/* Push pipeline (coll_k_push.cu): the reduce-scatter and two-shot
 * all-reduce whose only NVLink traffic is stores, which move more than the
 * two-shot kernel's loads from peers (335 against 277 GB/s per GPU). Each PE
 * stores every peer's piece into that peer's buffers (a ring of
 * SYMM__COLL_PUSH_K buffers per block slot and source PE), the owner reduces
 * from its buffers, and the all-reduce stores the result into every peer's
 * recv. Its area is a symmetric allocation of its own, made with the staging area,
 * so it never shares memory with the packet regions:
 *   [0, 2 KiB)          uint64 steps[MAX_BLOCKS]         steps made so far by slot b
 *   [2 KiB, +64 KiB)    uint32 ready[MAX_BLOCKS][MAX_PES] steps of PE p in my buffers
 *   [66 KiB, +64 KiB)   uint32 freed[MAX_BLOCKS][MAX_PES] my steps PE p has consumed
 *   [130 KiB, +128 KiB) uint64 aux[MAX_BLOCKS][MAX_PES]   PE p's recv (heap offset)
 *   [258 KiB, +128 KiB) uint64 sig[PUSH_SLOTS][MAX_PES][K] PE p's call signature
 *                       (symm__c_sig), stored with its first step of a call
 *                       into buffer k
 *   [PUSH_SYNC, ..)     buffers [slots][n][K] of SYMM__COLL_PUSH_BUF(slots, n) bytes,
 *                       slots = SYMM__COLL_PUSH_SLOTS unless tuned
 * The counters count steps, not calls, so they never reset and graphs
 * replay; a wait compares them modulo 2^32. */
#define SYMM__COLL_PUSH_K         2u
#define SYMM__COLL_PUSH_SLOTS     128u
#define SYMM__COLL_PUSH_STEPS_OFF 0u
#define SYMM__COLL_PUSH_READY_OFF (SYMM_COLL_MAX_BLOCKS * 8u)
#define SYMM__COLL_PUSH_FREED_OFF (SYMM__COLL_PUSH_READY_OFF + SYMM_COLL_MAX_BLOCKS * SYMM_COLL_MAX_PES * 4u)
#define SYMM__COLL_PUSH_AUX_OFF   (SYMM__COLL_PUSH_FREED_OFF + SYMM_COLL_MAX_BLOCKS * SYMM_COLL_MAX_PES * 4u)
#define SYMM__COLL_PUSH_SIG_OFF   (SYMM__COLL_PUSH_AUX_OFF + SYMM_COLL_MAX_BLOCKS * SYMM_COLL_MAX_PES * 8u)
#define SYMM__COLL_PUSH_SYNC      (512u * 1024u)
#define SYMM__COLL_PUSH_DATA      (32u * 1024u * 1024u)
#define SYMM__COLL_PUSH_BYTES     ((uint64_t)SYMM__COLL_PUSH_SYNC + SYMM__COLL_PUSH_DATA)
/* Bytes of one buffer with `slots` block slots for a team of n PEs (a
 * multiple of 256; 32 KiB at n = 4 with SYMM__COLL_PUSH_SLOTS). */
#define SYMM__COLL_PUSH_BUF(slots, n) \
    ((SYMM__COLL_PUSH_DATA / ((uint64_t)(slots) * (uint64_t)(n) * SYMM__COLL_PUSH_K)) & ~(uint64_t)255)
#if SYMM__COLL_PUSH_SIG_OFF + SYMM__COLL_PUSH_SLOTS * SYMM_COLL_MAX_PES * SYMM__COLL_PUSH_K * 8u > SYMM__COLL_PUSH_SYNC
#  error "the push pipeline's sync words must fit below SYMM__COLL_PUSH_SYNC"
#endif

/* AUTO's limits in force for one team size: SYMM__COLL_LIMITS's column,
 * then SYMM_COLL_TUNE, then symm__coll_tune_set's overrides. */
typedef struct symm__coll_limits {
#define SYMM__COLL_LIMIT_FIELD(f, n2, n4, n8, help) uint64_t f;
    SYMM__COLL_LIMITS(SYMM__COLL_LIMIT_FIELD)
#undef SYMM__COLL_LIMIT_FIELD
} symm__coll_limits_t;

/* The limits for a team of n PEs. SYMM_ERR_ENV when SYMM_COLL_TUNE does not
 * parse (a message names the bad entry). */
symm_status_t symm__coll_limits(int n, symm__coll_limits_t *out);
/* Tuning (bench, tests): set limit `name` (a field of SYMM__COLL_LIMITS) to
 * `value` for every team size, over SYMM_COLL_TUNE. Every PE must set the
 * same. Errors: SYMM_ERR_INVALID_ARG (unknown name). */
symm_status_t symm__coll_tune_set(const char *name, uint64_t value);
/* Drop the override of limit `name`. Errors: SYMM_ERR_INVALID_ARG. */
symm_status_t symm__coll_tune_clear(const char *name);
/* Drop every symm__coll_tune_set override. */
void symm__coll_tune_reset(void);

/* Copy-engine data movement (coll_ce.cu, coll_ce_pipe.cu): side streams and
 * events per team, made when the team's first collective sets it up. */
typedef struct symm__coll_ce symm__coll_ce_t;
symm_status_t symm__coll_ce_create(symm__coll_ce_t **out);
void symm__coll_ce_destroy(symm__coll_ce_t *ce);
/* PE me copies send + p * src_piece (nbytes) to PE p's recv + me * out_piece
 * for every p of `team`, between two stream barriers of the team. recv must
 * be in the symmetric heap on every PE. Errors: SYMM_ERR_CUDA,
 * SYMM_ERR_INTERNAL. */
symm_status_t symm__coll_ce_move(symm__coll_ce_t *ce, symm_team_t team, const void *send, void *recv,
                                 uint64_t nbytes, uint64_t src_piece, uint64_t out_piece, symm_stream_t stream);

/* The copy-engine pipelines (coll_ce_pipe.cu). Each runs in slot 0 of the
 * team's workspace: a first kernel starts the call there (its counter and
 * a handshake with every PE, which carries the call's signature), the
 * chunks are signalled with kind-3 flags (and their buffers freed with kind-4
 * ones) indexed by chunk, and later kernels take the call's flag value from
 * slot 0's counter. `blocks`: the SM kernels' grid. */
typedef struct symm__coll_pipe {
    symm__coll_ce_t *ce;
    symm_team_t team;
    const symm_ctx_t *ctx;      /* the team's context (host copy) */
    const symm__coll_ws_t *ws;
    char *stage;                /* SYMM__COLL_STAGE_BYTES of symmetric heap (reduce-scatter) */
    uint64_t chunk;             /* bytes per chunk (rounded up to 16; fewer than 256 chunks) */
    int blocks;
    /* the call's signature (symm__c_sig): call, bytes per PE, reduction kind, op, root */
    int call;                   /* SYMM__PIPE_* */
    uint64_t sig_bytes;
    int kind, op, root;
} symm__coll_pipe_t;
#define SYMM__PIPE_AR    1
#define SYMM__PIPE_RS    2
#define SYMM__PIPE_BCAST 5
/* Broadcast: the root copies part j of each chunk into non-root j's recv
 * on the copy engine and signals the chunk; each non-root forwards its part
 * of every signalled chunk to the other non-roots with SM stores; an end
 * handshake. recv must be symmetric at the same heap offset on every PE.
 * Errors: SYMM_ERR_CUDA, SYMM_ERR_INTERNAL. */
symm_status_t symm__coll_ce_bcast(const symm__coll_pipe_t *pp, const void *send, void *recv, uint64_t nbytes,
                                  int root, symm_stream_t stream);
/* Reduce-scatter: each PE copies piece q of its send (chunk by chunk) into
 * PE q's staging area on the copy engine and signals it; PE q reduces each
 * chunk from its stage and its own piece into recv on a side stream and
 * frees the buffer. send and recv may be any memory the GPU can access.
 * `piece`: bytes between send's pieces. Errors: SYMM_ERR_CUDA. */
symm_status_t symm__coll_ce_rs(const symm__coll_pipe_t *pp, const void *send, void *recv, uint64_t nbytes,
                               uint64_t piece, int kind, int op, symm_stream_t stream);

/* Testing: set the call counters of every block slot of `team`'s workspace
 * to `count` and clear its flags and regions, and set the push pipeline's
 * step counters (and its ready/freed words) to `count` (on this PE; every
 * PE must do the same, between collectives, with every PE's device idle),
 * so the next calls run near the 2^32 wrap of the flag values. */
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
/* Tuning (bench): the all-reduce's PACKET limits in bytes: two shots above
 * two_min (UINT64_MAX: never), AUTO picks PACKET up to packet_max (0 = the
 * defaults above). */
void symm__coll_tune_ar_packet(uint64_t two_min, uint64_t packet_max);
/* Tuning (bench, tests): the stores-only TWOSHOT up to `max` bytes (0 = the
 * default above, 1 = never). */
void symm__coll_tune_ar_stores(uint64_t max);
/* Tuning (bench): the broadcast's one-hop and packet limits in bytes (0 =
 * the defaults above). */
void symm__coll_tune_bcast(uint64_t hop1_max, uint64_t packet_max);
/* Tuning (bench): region units (packet words, one-shot 16-byte units) per
 * block of the packet and one-shot kernels (0 = SYMM__COLL_REGION_UNITS). */
void symm__coll_tune_units(uint32_t units);
/* Tuning (bench): the push pipeline's AUTO limits (all-reduce bytes,
 * reduce-scatter bytes per PE; 0 = the defaults, UINT64_MAX = never), its
 * most blocks (0 = as many as slots) and its block slots (0 =
 * SYMM__COLL_PUSH_SLOTS; fewer slots, larger buffers). A change of slots
 * moves the buffers: only with every PE's collectives idle, every PE alike. */
void symm__coll_tune_push(uint64_t ar_min, uint64_t rs_min, int blocks, int slots);

#ifdef __cplusplus
}
#endif

#endif /* SYMM_COLL_H_INTERNAL */
