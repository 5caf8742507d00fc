/*
 * device/coll_impl.h - the collectives' device code: handshakes, packets and
 * the algorithms, shared by the stream kernels (src/coll) and the public
 * device forms (symm_device_coll.h). Included by symm_device_coll.h when
 * device code is generated; never include it directly.
 *
 * Every algorithm is a function of (ctx, ws, buffers, ..., slot, nslots): the
 * calling block is `slot` of `nslots` blocks that together do one call and
 * split the data between them. A stream kernel passes blockIdx.x/gridDim.x, a
 * block-scope device call 0/1. Each block synchronises only with the blocks of
 * the same slot on the other PEs (its handshake words and data regions are
 * its own), so the blocks of one call need not wait for each other.
 *
 * Synchronisation state is in the workspace (coll_layout.h): per slot a call
 * counter (epoch); the flag value of a call is never 0 and the data regions
 * alternate by call parity, so nothing is ever reset and calls captured in
 * CUDA graphs replay correctly. Every call of a slot waits for something
 * each peer sent in it (a packet call's slot with no words sits it out
 * uncounted), so no peer gets two calls ahead of a reader.
 *
 * Ordering (PTX memory model, system scope): data to a peer is stored with
 * plain stores; after a block barrier one thread per peer publishes a flag
 * with st.release.sys (cumulative through the barrier, so it covers every
 * thread's stores); the reader waits with ld.acquire.sys and a block barrier
 * before touching the data. Packets carry the flag inside each 8-byte half of
 * a 16-byte store, so the reader needs no separate flag.
 */
#ifndef SYMM_DEVICE_COLL_IMPL_H
#define SYMM_DEVICE_COLL_IMPL_H

/* In dependency order; the memory instructions they use are impl_ptx.h's. */
#include "symm/contract/coll_layout.h"
#include "symm/device/coll_reduce.h"
#include "symm/device/coll_units.h"  /* words and units, splits, peers */
#include "symm/device/coll_sync.h"   /* epochs, flags, handshakes, barrier, messages */
#include "symm/device/coll_packet.h" /* PACKET and ONESHOT reductions */
#include "symm/device/coll_direct.h" /* direct and multimem reductions, dispatch */
#include "symm/device/coll_move.h"   /* all-gather, all-to-all(v), broadcast */

#endif /* SYMM_DEVICE_COLL_IMPL_H */
