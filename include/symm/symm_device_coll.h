/*
 * symm_device_coll.h - collectives callable inside kernels. Included by
 * symm_device.h.
 *
 * Every call takes the team's context and plain pointers into the symmetric
 * heap (the same pointer on every PE: `dest` and `src` must be symmetric),
 * and needs no host help: this is what a fused kernel calls, e.g. an
 * all-reduce in a GEMM epilogue. Types, operations and algorithms are the
 * enums of symm_coll_types.h, passed as int. Counts are in elements.
 * Every PE of the team must make the same calls, in the same order, with the
 * same counts, types, operations and (grid forms) block counts.
 *
 * Two scopes:
 *   _block  one block per PE makes the call (every thread of the block, with
 *           the same arguments); like symm_barrier_block, at most one block
 *           per PE runs a block-scope collective of a team at a time.
 *   _grid   `nblocks` blocks per PE make the call together, block `block`
 *           (0 <= block < nblocks <= SYMM_COLL_MAX_BLOCKS) doing a share of
 *           the data. Each block synchronises only with the blocks of the
 *           same index on the other PEs, so the blocks need not be
 *           co-resident on their own GPU; but the blocks of the same index
 *           on all PEs must all make progress, so launch no more blocks than
 *           the GPU holds at once when other kernels may occupy it, and do
 *           not use a grid form from a kernel whose blocks wait on each
 *           other. symm_coll_barrier_grid is the exception: it synchronises
 *           the whole grid of every PE and needs every block of the grid
 *           co-resident (a grid no larger than one wave).
 * On return of a _block or _grid call the result is in `dest` of this PE for
 * the calling block's share (for the whole result, after the kernel or a
 * grid-wide synchronisation); `src` may be reused.
 *
 * State lives in the team's internal scratch (symm_ctx_t.scratch): per block
 * index a call counter and handshake words that are never reset, so these
 * calls work across launches and CUDA graph replays. Small sizes use packets
 * in the scratch (no handshake round trip); larger ones go directly between
 * the symmetric buffers.
 *
 * Invalid arguments (an unsupported dtype/op pair, too many blocks) stop the
 * kernel with a message naming the PE and the call.
 *
 * Registers: a call site keeps many loads in flight and, left alone, the
 * compiler gives the kernel 150-210 registers per thread (measured with
 * nvcc 13, sm_90), which fits 256 threads per block but not 512 ("too many
 * resources requested for launch"). A kernel launched with more threads
 * declares them, e.g. __launch_bounds__(512), and the compiler fits it.
 */
#ifndef SYMM_DEVICE_COLL_H
#define SYMM_DEVICE_COLL_H

/* The device API first (its implementation is what this one builds on);
 * the include guards make either include order work. */
#include "symm/symm_device.h"
#include "symm/symm_coll_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* all-reduce: dest[i] = op over PEs of src[i], i < count, on every PE.
 * In place (dest == src) allowed. _ex: choose the accumulator (fp8:
 * SYMM_DTYPE_F32 or SYMM_DTYPE_F16; SYMM_DTYPE_DEFAULT otherwise) and the
 * algorithm (SYMM_COLL_ALGO_AUTO, or one that falls back when it cannot run
 * here: PACKET/ONESHOT need the data to fit the scratch, MULTIMEM a
 * multicast object). */
SYMM_DEVICE_FN void symm_all_reduce_block(const symm_ctx_t *ctx, void *dest, const void *src,
                                          size_t count, int dtype, int op);
SYMM_DEVICE_FN void symm_all_reduce_grid(const symm_ctx_t *ctx, void *dest, const void *src,
                                         size_t count, int dtype, int op, int block, int nblocks);
SYMM_DEVICE_FN void symm_all_reduce_ex_block(const symm_ctx_t *ctx, void *dest, const void *src,
                                             size_t count, int dtype, int op, int acc, int algo);
SYMM_DEVICE_FN void symm_all_reduce_ex_grid(const symm_ctx_t *ctx, void *dest, const void *src,
                                            size_t count, int dtype, int op, int acc, int algo,
                                            int block, int nblocks);

/* reduce-scatter: src holds n_pes pieces of `count` elements; PE r gets in
 * dest (count elements) the reduction over PEs of piece r. dest must not
 * overlap src except dest == src + r * count (in place). */
SYMM_DEVICE_FN void symm_reduce_scatter_block(const symm_ctx_t *ctx, void *dest, const void *src,
                                              size_t count, int dtype, int op);
SYMM_DEVICE_FN void symm_reduce_scatter_grid(const symm_ctx_t *ctx, void *dest, const void *src,
                                             size_t count, int dtype, int op, int block, int nblocks);
SYMM_DEVICE_FN void symm_reduce_scatter_ex_block(const symm_ctx_t *ctx, void *dest, const void *src,
                                                 size_t count, int dtype, int op, int acc, int algo);
SYMM_DEVICE_FN void symm_reduce_scatter_ex_grid(const symm_ctx_t *ctx, void *dest, const void *src,
                                                size_t count, int dtype, int op, int acc, int algo,
                                                int block, int nblocks);

/* all-gather: dest (n_pes * count elements) gets PE p's src at p * count.
 * In place: src == dest + my_pe * count. */
SYMM_DEVICE_FN void symm_all_gather_block(const symm_ctx_t *ctx, void *dest, const void *src,
                                          size_t count, int dtype);
SYMM_DEVICE_FN void symm_all_gather_grid(const symm_ctx_t *ctx, void *dest, const void *src,
                                         size_t count, int dtype, int block, int nblocks);

/* all-to-all: src and dest hold n_pes blocks of `count` elements; block p
 * of src goes to PE p, landing at block my_pe of its dest. Not in place. */
SYMM_DEVICE_FN void symm_all_to_all_block(const symm_ctx_t *ctx, void *dest, const void *src,
                                          size_t count, int dtype);
SYMM_DEVICE_FN void symm_all_to_all_grid(const symm_ctx_t *ctx, void *dest, const void *src,
                                         size_t count, int dtype, int block, int nblocks);

/* all-to-all with counts: send_counts[p] elements from src + send_displs[p]
 * go to PE p, landing at its dest + its recv_displs[my_pe]; recv_counts[p]
 * must equal what PE p sends here (else the kernel stops with a message).
 * The four arrays (n_pes entries, in elements) may be anywhere the GPU can
 * read (device memory, or kernel parameters): they are read on the device. */
SYMM_DEVICE_FN void symm_all_to_allv_block(const symm_ctx_t *ctx, void *dest, const void *src,
                                           const uint64_t *send_counts, const uint64_t *send_displs,
                                           const uint64_t *recv_counts, const uint64_t *recv_displs,
                                           int dtype);
SYMM_DEVICE_FN void symm_all_to_allv_grid(const symm_ctx_t *ctx, void *dest, const void *src,
                                          const uint64_t *send_counts, const uint64_t *send_displs,
                                          const uint64_t *recv_counts, const uint64_t *recv_displs,
                                          int dtype, int block, int nblocks);

/* broadcast: dest of every PE gets `count` elements of root's src (src is
 * read on the root only; dest == src on the root is allowed). */
SYMM_DEVICE_FN void symm_broadcast_block(const symm_ctx_t *ctx, void *dest, const void *src,
                                         size_t count, int dtype, int root);
SYMM_DEVICE_FN void symm_broadcast_grid(const symm_ctx_t *ctx, void *dest, const void *src,
                                        size_t count, int dtype, int root, int block, int nblocks);

/* Barriers of the collectives' own state (independent of symm_barrier*):
 * _block: the calling block waits for the calling block of every PE;
 * _grid: every block of the grid on every PE waits for all of them (needs
 * the grid co-resident, nblocks < SYMM_COLL_MAX_BLOCKS). Both order memory
 * like symm_barrier: every store before it, by any participant, is visible
 * to every participant after it. */
SYMM_DEVICE_FN void symm_coll_barrier_block(const symm_ctx_t *ctx);
SYMM_DEVICE_FN void symm_coll_barrier_grid(const symm_ctx_t *ctx, int block, int nblocks);

#ifdef __cplusplus
}
#endif

#if SYMM_DEVICE_CODE
#  include "symm/device/coll_impl.h"
#  include "symm/device/coll_api.h"
#endif

#endif /* SYMM_DEVICE_COLL_H */
