/*
 * device/coll_auto.h - the sizes at which AUTO changes algorithm, for the
 * stream collectives (src/coll) and the device calls (coll_api.h): the one
 * place they are defined. Bytes per PE (per peer for all-to-all);
 * docs/tuning.md gives the measurements behind every limit. The stream
 * limits may be overridden at run time for measurements (symm__coll_tune*).
 */
#ifndef SYMM_DEVICE_COLL_AUTO_H
#define SYMM_DEVICE_COLL_AUTO_H

#include <stdint.h>

/* ---- stream collectives (src/coll/coll_host.c) ----------------------------------- */

/* Packets up to PACKET_MAX (they need no handshake, the direct kernels two:
 * about 4 us), one-shot up to ONESHOT_MAX, then the direct kernels. */
#define SYMM__COLL_PACKET_MAX  ((uint64_t)128 << 10)
#define SYMM__COLL_ONESHOT_MAX ((uint64_t)256 << 10)
/* All-reduce from 3 PEs: PACKET sends every word to every peer (one shot)
 * up to AR_PACKET2_MIN bytes and in two shots above it (to the owner of its
 * piece, which sends the result to all: symm__c_ar_packet2), and AUTO picks
 * PACKET up to AR_PACKET_MAX: two shots beat the two-shot direct kernel at
 * 384-512 KiB (8.63 against 9.68 us at 384 KiB, bench/results/latest/coll.md). */
#define SYMM__COLL_AR_PACKET2_MIN ((uint64_t)128 << 10)
#define SYMM__COLL_AR_PACKET_MAX  ((uint64_t)512 << 10)
/* All-reduce from 3 PEs: TWOSHOT up to AR_STORES_MAX bytes stores each
 * piece into its owner's plain-data region instead of the owner loading it
 * (symm__c_ar_twoshot_st), when a slot's share fits a region: local loads,
 * no round trip per load (2 MiB: 17.09 against 18.26 us). */
#define SYMM__COLL_AR_STORES_MAX  ((uint64_t)4 << 20)
/* Broadcast from 3 PEs: packets from the root to every non-root up to
 * HOP1_MAX bytes, then in two hops (root -> one non-root per part -> the
 * others) up to PACKET_MAX, then the direct kernel (symm__c_bcast_pieces).
 * Packets also need to fit the workspace's regions. */
#define SYMM__COLL_BCAST_HOP1_MAX   ((uint64_t)128 << 10)
#define SYMM__COLL_BCAST_PACKET_MAX ((uint64_t)256 << 10)
/* Sizes from which AUTO picks the push pipeline: all-reduce bytes (from
 * 16 MiB: 82.1 against 89.6 us two-shot, bench/results/latest/coll-push.md),
 * and reduce-scatter bytes per PE: never, its blocks' reductions leave their
 * stores idle (256 MiB: 751 against 726 us); SYMM_COLL_ALGO=push still
 * runs it (it stages nothing). */
#define SYMM__COLL_PUSH_AR_MIN ((uint64_t)16 << 20)
#define SYMM__COLL_PUSH_RS_MIN UINT64_MAX

/* ---- device calls (coll_api.h) ---------------------------------------------------- */

/* Packets up to DEV_PACKET_MAX (the stream limit: a handshake costs a device
 * call what it costs a stream kernel), one-shot up to DEV_ONESHOT_MAX, when
 * the scratch has room. A device call runs in its caller's grid, which the
 * stream measurements do not cover (docs/tuning.md). */
#define SYMM__COLL_DEV_PACKET_MAX  SYMM__COLL_PACKET_MAX
#define SYMM__COLL_DEV_ONESHOT_MAX ((uint64_t)256 << 10)

#endif /* SYMM_DEVICE_COLL_AUTO_H */
