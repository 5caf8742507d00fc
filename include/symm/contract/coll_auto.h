/*
 * contract/coll_auto.h - the sizes at which AUTO changes algorithm, for the
 * stream collectives (src/coll) and the device calls (coll_api.h): the one
 * place they are defined. Bytes per PE (per peer for all-to-all);
 * docs/tuning.md gives the measurements behind every limit. The stream
 * limits may be overridden at run time for measurements (symm__coll_tune*).
 */
#ifndef SYMM_CONTRACT_COLL_AUTO_H
#define SYMM_CONTRACT_COLL_AUTO_H

#include <stdint.h>

/* ---- stream collectives (src/coll/coll_choose.c) --------------------------------- */

/*
 * AUTO's table: every limit of the stream collectives for three team sizes
 * (2 PEs; 3-4 PEs; 5 PEs and more), in bytes per PE (reduce-scatter: what
 * each PE receives; all-to-all: per peer; broadcast: the buffer).
 * X(field, 2 PEs, 3-4 PEs, 5+ PEs, help); SYMM__NEVER turns a form off.
 * SYMM_COLL_TUNE="field=value,..." overrides fields for every team size
 * (K/M/G suffixes, "never"), and symm-bench's forms tables set them cell by
 * cell (symm__coll_tune_set). docs/tuning.md gives the measurement behind
 * every entry, and says which are not measured yet: the whole 5+ column
 * (no machine with more than 4 GPUs ran the bench; it repeats the 4-PE
 * choices except where the regions, half as large with twice the PEs, or
 * the root's seven copies of a one-hop broadcast make a smaller limit
 * safer).
 *
 *   packet_max        packets need no handshake, the direct kernels two (about 4 us)
 *   oneshot_max       between the packets and the direct kernels (all-reduce)
 *   ar_packet*_       all-reduce from 3 PEs: one shot of packets to ar_packet2_min,
 *                     two shots (to the piece's owner, then from it) to ar_packet_max
 *   ar_stores_max     two-shot storing each piece into its owner's region (no remote loads)
 *   push_*_min        the push pipeline (coll_k_push.cu)
 *   *_ce_min, ce_chunk  the copy-engine pipelines (coll_ce_pipe.cu): all-reduce as a
 *                     copy-engine reduce-scatter then all-gather, and the broadcast, need
 *                     a recv symmetric at the same offset on every PE
 *   rs_oneshot_max    reduce-scatter storing each piece into its owner's region, one handshake
 *   bcast_*           one-hop packets from the root, then two hops (root -> one non-root
 *                     per part -> the others), then the direct kernel
 *   bcast_chain_*     the chain (symm__c_bcast_chain): off in AUTO until a run on 4 and 8
 *                     GPUs measures its crossover (docs/tuning.md); SYMM_COLL_TUNE turns it on
 */
#define SYMM__NEVER UINT64_MAX
#define SYMM__KIB(x) ((uint64_t)(x) << 10)
#define SYMM__MIB(x) ((uint64_t)(x) << 20)
#define SYMM__COLL_LIMITS(X)                                                                      \
    X(packet_max, SYMM__KIB(128), SYMM__KIB(128), SYMM__KIB(128),                                 \
      "packets up to this (all-gather, all-to-all; all-reduce of 2 PEs)")                       \
    X(oneshot_max, SYMM__KIB(512), SYMM__KIB(256), SYMM__KIB(256),                                \
      "all-reduce: ONESHOT up to this, above the packets")                                       \
    X(ar_packet_max, SYMM__KIB(128), SYMM__KIB(512), SYMM__KIB(512),                              \
      "all-reduce from 3 PEs: packets up to this")                                               \
    X(ar_packet2_min, SYMM__KIB(128), SYMM__KIB(128), SYMM__KIB(128),                             \
      "all-reduce from 3 PEs: packets in two shots above this")                                  \
    X(ar_stores_max, SYMM__MIB(4), SYMM__MIB(4), SYMM__MIB(4),                                    \
      "all-reduce from 3 PEs: the stores-only two-shot kernel up to this")                       \
    X(push_ar_min, SYMM__MIB(16), SYMM__MIB(8), SYMM__MIB(8),                                   \
      "all-reduce: the push pipeline from this")                                                 \
    X(ar_ce_min, SYMM__NEVER, SYMM__NEVER, SYMM__NEVER,                                  \
      "all-reduce: copy-engine reduce-scatter + all-gather from this (symmetric recv)")          \
    X(rs_packet_max, SYMM__KIB(256), SYMM__KIB(128), SYMM__KIB(128),                              \
      "reduce-scatter: packets up to this")                                                      \
    X(rs_oneshot_max, SYMM__MIB(1), SYMM__MIB(1), SYMM__KIB(512),                                 \
      "reduce-scatter: ONESHOT (stores into the owner's region, one handshake) up to this")      \
    X(push_rs_min, SYMM__NEVER, SYMM__NEVER, SYMM__NEVER,                                         \
      "reduce-scatter: the push pipeline from this")                                             \
    X(rs_ce_min, SYMM__NEVER, SYMM__NEVER, SYMM__NEVER,                                     \
      "reduce-scatter: the copy-engine pipeline from this")                                      \
    X(bcast_hop1_max, SYMM__KIB(512), SYMM__KIB(128), SYMM__KIB(64),                              \
      "broadcast: one-hop packets up to this (two hops above it need 3 PEs)")                    \
    X(bcast_packet_max, SYMM__KIB(512), SYMM__MIB(2), SYMM__KIB(256),                           \
      "broadcast: packets up to this")                                                           \
    X(bcast_ce_min, SYMM__MIB(64), SYMM__NEVER, SYMM__NEVER,                                  \
      "broadcast: the copy-engine pipeline from this (symmetric recv)")                          \
    X(bcast_chain_min, SYMM__NEVER, SYMM__NEVER, SYMM__NEVER,                                      \
      "broadcast: the chain (root -> next -> ... SM stores, batch by batch) from this")          \
    X(bcast_chain_chunk, SYMM__KIB(128), SYMM__KIB(128), SYMM__KIB(32),                            \
      "broadcast chain: bytes a block passes on per release (from 3 PEs)")                      \
    X(ce_chunk, SYMM__MIB(8), SYMM__MIB(8), SYMM__MIB(8),                                         \
      "copy-engine pipelines: bytes per chunk (of each piece for the reduce-scatter)")

/* The device calls' packet limit follows the stream collectives' (4 PEs). */
#define SYMM__COLL_PACKET_MAX SYMM__KIB(128)

/* ---- device calls (coll_api.h) ---------------------------------------------------- */

/* Packets up to DEV_PACKET_MAX (the stream limit: a handshake costs a device
 * call what it costs a stream kernel), one-shot up to DEV_ONESHOT_MAX, when
 * the scratch has room. A device call runs in its caller's grid, which the
 * stream measurements do not cover (docs/tuning.md). */
#define SYMM__COLL_DEV_PACKET_MAX  SYMM__COLL_PACKET_MAX
#define SYMM__COLL_DEV_ONESHOT_MAX ((uint64_t)256 << 10)

#endif /* SYMM_CONTRACT_COLL_AUTO_H */
