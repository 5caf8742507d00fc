/*
 * symm_coll.h - stream collectives (host API). Included by symm.h.
 *
 * Each call enqueues the collective on `stream` and returns; nothing waits
 * on the host, and the work captures into CUDA graphs (the synchronisation
 * state lives in device memory and is never reset by the host). Collective:
 * every PE of `team` (NULL = the world team) makes the same calls in the same
 * order with the same count, type, operation, algorithm and root. As with
 * NCCL communicators, the collectives of one team run one at a time: do not
 * have two in flight on different streams at once, nor alongside a device
 * collective (symm_device_coll.h) of the same team.
 *
 * Buffers: any device memory this GPU can access. Buffers in the symmetric
 * heap (symm_malloc) take the fast path, where peers load and store them
 * directly; other buffers are staged through internal symmetric scratch
 * (extra local copies). Large calls run as several launches of at most the
 * staging size (64 MiB, divided by the team size for the calls whose result
 * has one piece per PE), on every PE alike, so PEs may differ in which of
 * their buffers are symmetric. Pointers need only
 * be aligned to their element type; 16-byte-aligned buffers are fastest.
 *
 * Algorithms (symm_coll_algo_t, symm_coll_types.h) are picked by size and
 * team size; SYMM_COLL_ALGO=packet|oneshot|twoshot|multimem|push overrides the
 * choice (an algorithm that cannot run a given call falls back to one that
 * can, with the same results; multimem always falls back while symm has no
 * multicast object). From 3 PEs a "packet" all-reduce above 128 KiB goes
 * in two shots ("packet-2shot": each PE sends each piece to its owner, which
 * sends the reduced piece to all), and AUTO picks it up to 512 KiB; a
 * "twoshot" all-reduce up to 4 MiB stores each piece into its owner's
 * scratch instead of the owner loading it ("twoshot-stores").
 * symm_coll_last_algo names what the last call used.
 * SYMM_COLL_BLOCKS=N (1..255, default 64; 128 for all-gather, all-to-all
 * and broadcast) caps the blocks of the direct kernels; set it alike on
 * every PE. All-gather and all-to-all with pieces of at least
 * SYMM_COLL_CE_MIN bytes (default 64 MiB per peer) into a recv that is
 * symmetric, at the same heap offset, on every PE go through the copy
 * engines instead (between two stream barriers; no SMs taken); the PEs
 * agree on that over the bootstrap, a host round trip, so such calls do not
 * return before every PE made them. Large reduce-scatters (any buffers),
 * broadcasts and all-reduces (into a recv symmetric at the same heap offset
 * on every PE, agreed the same way) go through copy-engine pipelines
 * ("copy-engine": the data on the copy engines chunk by chunk, small
 * kernels signalling the chunks). SYMM_COLL_TUNE="name=bytes,..." moves
 * AUTO's limits (the table in symm/contract/coll_auto.h); set it alike on
 * every PE.
 *
 * Errors (nothing is enqueued): SYMM_ERR_NOT_INITIALIZED; SYMM_ERR_ENV (a bad
 * SYMM_COLL_ALGO, SYMM_COLL_BLOCKS or SYMM_COLL_TUNE); SYMM_ERR_INVALID_ARG
 * (NULL buffer with count > 0, a count whose byte size overflows, a bad enum,
 * root outside the team, buffers that overlap other than as allowed, a
 * pointer the GPU cannot access); SYMM_ERR_UNSUPPORTED (a dtype/op/accumulator
 * pair outside the list in symm_coll_types.h, or a backend without GPU
 * collectives); SYMM_ERR_HEAP_EXHAUSTED (the first call on a team allocates
 * the staging area and the push buffers, 96.5 MiB of symmetric heap);
 * SYMM_ERR_CUDA (a launch or copy
 * failed). Arguments that differ between PEs are not detected by the host;
 * the device side then stops with a message (count mismatch in
 * all_to_allv) or waits until SYMM_WAIT_TIMEOUT.
 *
 * The first collective on a team allocates its staging area and push
 * buffers (collective, through the symmetric heap): make it outside CUDA
 * graph capture (a call during capture that would allocate fails with
 * SYMM_ERR_INVALID_ARG).
 */
#ifndef SYMM_COLL_H
#define SYMM_COLL_H

#include <stddef.h>
#include "symm/symm.h" /* symm_status_t, symm_team_t, symm_stream_t (guarded both ways) */
#include "symm/symm_coll_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* recv[i] = op over PEs of send[i], i < count, on every PE. In place
 * (send == recv) allowed; otherwise the buffers must not overlap. */
symm_status_t symm_all_reduce(const void *send, void *recv, size_t count, symm_dtype_t dtype,
                              symm_redop_t op, symm_team_t team, symm_stream_t stream);

/* As symm_all_reduce with an accumulator (SYMM_DTYPE_DEFAULT, or for fp8
 * SYMM_DTYPE_F32 / SYMM_DTYPE_F16) and an algorithm (SYMM_COLL_ALGO_AUTO to
 * let symm choose; SYMM_COLL_ALGO overrides AUTO only). */
symm_status_t symm_all_reduce_ex(const void *send, void *recv, size_t count, symm_dtype_t dtype,
                                 symm_redop_t op, symm_dtype_t acc, symm_coll_algo_t algo,
                                 symm_team_t team, symm_stream_t stream);

/* send holds n_pes pieces of recv_count elements; PE r's recv gets the
 * reduction over PEs of piece r. In place: recv == send + r * recv_count. */
symm_status_t symm_reduce_scatter(const void *send, void *recv, size_t recv_count,
                                  symm_dtype_t dtype, symm_redop_t op, symm_team_t team,
                                  symm_stream_t stream);
symm_status_t symm_reduce_scatter_ex(const void *send, void *recv, size_t recv_count,
                                     symm_dtype_t dtype, symm_redop_t op, symm_dtype_t acc,
                                     symm_coll_algo_t algo, symm_team_t team, symm_stream_t stream);

/* recv (n_pes * send_count elements) gets PE p's send at p * send_count.
 * In place: send == recv + my_pe * send_count. */
symm_status_t symm_all_gather(const void *send, void *recv, size_t send_count, symm_dtype_t dtype,
                              symm_team_t team, symm_stream_t stream);

/* send and recv hold n_pes blocks of `count` elements; block p of send goes
 * to PE p, landing at block my_pe of its recv. Buffers must not overlap. */
symm_status_t symm_all_to_all(const void *send, void *recv, size_t count, symm_dtype_t dtype,
                              symm_team_t team, symm_stream_t stream);

/* send_counts[p] elements from send + send_displs[p] go to PE p, landing at
 * its recv + its recv_displs[my_pe]; recv_counts[p] must equal what PE p
 * sends here (checked on the device: a mismatch stops the kernel with a
 * message). The four host arrays have n_pes entries, in elements, and are
 * copied at the call. recv must be symmetric unless its extent fits the
 * staging area (64 MiB); send and recv must not overlap. */
symm_status_t symm_all_to_allv(const void *send, const size_t *send_counts, const size_t *send_displs,
                               void *recv, const size_t *recv_counts, const size_t *recv_displs,
                               symm_dtype_t dtype, symm_team_t team, symm_stream_t stream);

/* recv of every PE gets `count` elements of root's send (send is read on
 * the root only; send == recv on the root is allowed). Algorithms: "packet"
 * sends the root's data as packets to every PE up to 128 KiB, and from 3
 * PEs up to 256 KiB in two hops ("packet-2hop": each non-root gets one part
 * from the root and forwards it to the others); "twoshot" is the direct
 * kernel ("direct"), which scatters pieces that the non-roots forward. */
symm_status_t symm_broadcast(const void *send, void *recv, size_t count, symm_dtype_t dtype, int root,
                             symm_team_t team, symm_stream_t stream);

/* The name of an algorithm ("auto", "packet", "oneshot", "twoshot",
 * "multimem"), and of the algorithm the calling thread's last successful
 * collective used (with "+staged" when it went through scratch). */
const char *symm_coll_algo_name(symm_coll_algo_t algo);
const char *symm_coll_last_algo(void);

#ifdef __cplusplus
}
#endif

#endif /* SYMM_COLL_H */
