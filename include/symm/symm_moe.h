/*
 * symm_moe.h - mixture-of-experts token exchange (dispatch and combine) on
 * one node's PEs.
 *
 * Dispatch moves every token to the PEs that hold its top-k experts; combine
 * brings the experts' outputs back to the token's PE and sums them. Two
 * modes, chosen when the handle is made:
 *
 *   SYMM_MOE_LOW_LATENCY   decode-sized batches, pplx-kernels' layout: each
 *       local expert gets its own rows, out_expert_x[expert][row][hidden],
 *       filled to out_expert_num_tokens[expert]; a token is sent once per
 *       expert; combine weights each expert's row by the token's router
 *       weight and sums them. Tokens are owned by data-parallel groups of
 *       dp_size PEs that hold the same tokens (tensor-parallel replicas):
 *       each token is sent once per group (by PE group * dp_size + token %
 *       dp_size) and its combined output reaches every PE of the group.
 *   SYMM_MOE_HIGH_THROUGHPUT   prefill-sized batches (thousands of tokens),
 *       DeepEP's "normal" layout: a layout step says how many tokens go to
 *       each PE and each expert and which tokens go where; a token is sent
 *       once per destination PE (not per expert) with its top-k indices
 *       mapped to that PE's local experts (-1 elsewhere) and its weights;
 *       the receive side is a list of rows ordered by source PE, then token.
 *       Combine sums, per token, the rows the PEs send back (the caller
 *       applies the weights in its expert computation).
 *
 * Every call is collective over the handle's team (the same calls, in the
 * same order, on every PE), enqueues one kernel on `stream` (one per half
 * when `flags` splits it, see below) and returns without waiting: nothing
 * synchronises the host, and every call captures into a CUDA graph and
 * replays (the synchronisation state lives in device memory and is never
 * reset by the host). Each kernel launches at most the handle's SM budget of
 * blocks (symm_moe_set_num_sms). The calls of one handle follow the cycle
 * dispatch, combine, dispatch, ... (SYMM_ERR_INVALID_ARG otherwise), except
 * that a dispatch may follow a dispatch whose combine is skipped (no buffer a
 * dispatch reuses waits on a combine); a combine always works on the last
 * dispatch, once.
 *
 * Send and receive halves: `flags` of a dispatch or combine is SYMM_MOE_SEND,
 * SYMM_MOE_RECV or both (SYMM_MOE_SEND_RECV). The send half pushes this PE's
 * data and returns; the receive half waits for the peers' data and lays it
 * out. Between the two the stream may run other work (that is what they are
 * for: overlap compute with the transfer); the halves of one call must come
 * in that order on the same stream, with nothing of this handle between.
 *
 * Inputs the host cannot see (token indices, bound_m) are checked on the
 * device: a route to an expert outside [0, num_experts) (or, in the
 * low-latency mode, an expert listed twice for one token) is skipped, and
 * the first such error is recorded in host-mapped memory. The next call on
 * the handle reports it (SYMM_ERR_INVALID_ARG, with the token, slot and
 * value), without synchronising; symm_moe_check synchronises the stream and
 * reports it at once. Everything the host can see is checked before any
 * launch: sizes against the handle's configuration, dtypes, strides, NULL
 * pointers, the call order.
 *
 * Buffers are device memory of this PE's GPU (anywhere; they need not be in
 * the symmetric heap, except the receive buffers a caller gives
 * symm_moe_ht_dispatch_into). The handle's own buffers are symmetric
 * allocations, made by symm_moe_create (collective; outside graph capture).
 *
 * Make handles after symm_init and destroy them before symm_finalize.
 */
#ifndef SYMM_MOE_H
#define SYMM_MOE_H

#include <stddef.h>
#include <stdint.h>
#include "symm/symm.h" /* symm_status_t, symm_team_t, symm_stream_t, symm_dtype_t */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct symm_moe symm_moe_t;

enum symm_moe_mode {
    SYMM_MOE_LOW_LATENCY     = 0,
    SYMM_MOE_HIGH_THROUGHPUT = 1
};

/* `flags` of dispatch and combine. */
#define SYMM_MOE_SEND      1
#define SYMM_MOE_RECV      2
#define SYMM_MOE_SEND_RECV 3

/* Width of a scale block: one float32 scale per 128 elements of hidden. */
#define SYMM_MOE_SCALE_BLOCK 128

/* A low-latency top-k slot with no expert (-1 as int32): skipped, no error. */
#define SYMM_MOE_NO_EXPERT 0xffffffffu

/*
 * Low latency, on the wire: rows travel as packets (every 8 bytes beside a
 * per-call flag: no fence, the receiver polls the data itself, at twice the
 * bytes) or plainly (the rows, then a flag released behind them). By
 * default (SYMM_MOE_PACKETS=auto) a call's rows from one PE go as packets
 * while they fit in SYMM_MOE_PACKET_BYTES (dispatch: its tokens x
 * (hidden_dim_bytes + the scales, 16-byte padded); combine: the DP group's
 * tokens x experts_per_token x hidden_dim x 2), which is decode-sized calls,
 * and plainly above. SYMM_MOE_PACKETS=1 sends every call as packets (the
 * handle then holds packet room for max_num_tokens: about twice the
 * receive buffers more), 0 none. Read at symm_moe_create; every PE must set
 * it alike (SYMM_ERR_MISMATCH otherwise).
 */
#define SYMM_MOE_PACKET_BYTES (256u * 1024u)

/*
 * symm_moe_config_t - what a handle is made for (pplx-kernels' names).
 *   mode                    enum symm_moe_mode.
 *   max_num_tokens          low latency: most tokens of one DP group per call;
 *                           high throughput: most tokens of one PE per call.
 *   num_experts             experts in all; a multiple of the team size, each
 *                           PE holding num_experts / n_pes consecutive ones
 *                           (expert e lives on PE e / local_experts).
 *   experts_per_token       top-k (1..64).
 *   hidden_dim              elements per token; a multiple of 8.
 *   hidden_dim_bytes        bytes per token of x: hidden_dim * element size
 *                           (1, 2 or 4 bytes); a multiple of 16.
 *   hidden_dim_scale_bytes  bytes of float32 scales per token, 0 for none;
 *                           else 4 * ceil(hidden_dim / 128).
 *   dp_size                 low latency: PEs per data-parallel group (the team
 *                           size a multiple of it); high throughput: 1.
 *   max_recv_tokens         high throughput: rows of the receive buffers; 0 =
 *                           max_num_tokens * n_pes, which always suffices (a
 *                           smaller one saves memory; a dispatch that would
 *                           overflow it drops the rows past it and reports
 *                           the error). Low latency: 0.
 */
typedef struct symm_moe_config {
    int mode;
    size_t max_num_tokens;
    size_t num_experts;
    size_t experts_per_token;
    size_t hidden_dim;
    size_t hidden_dim_bytes;
    size_t hidden_dim_scale_bytes;
    int dp_size;
    size_t max_recv_tokens;
} symm_moe_config_t;

/*
 * symm_moe_create - make a handle over `team` (NULL = world; it must be a
 * team whose PEs share one node, i.e. world or node). Collective: every PE
 * passes the same configuration (else SYMM_ERR_MISMATCH on every PE).
 * Allocates the handle's symmetric buffers (see symm_moe_heap_bytes).
 * Errors: SYMM_ERR_NOT_INITIALIZED; SYMM_ERR_INVALID_ARG (a field out of
 * range, with its name and value); SYMM_ERR_MISMATCH; SYMM_ERR_UNSUPPORTED
 * (a backend without GPU kernels, e.g. SYMM_BACKEND=host);
 * SYMM_ERR_HEAP_EXHAUSTED; SYMM_ERR_NO_MEMORY; SYMM_ERR_CUDA.
 */
symm_status_t symm_moe_create(const symm_moe_config_t *cfg, symm_team_t team, symm_moe_t **moe);

/* Collective: release the handle's buffers (after the device is done with
 * them). NULL is a no-op. Errors: as symm_free. */
symm_status_t symm_moe_destroy(symm_moe_t *moe);

/* Bytes of symmetric heap a handle with this configuration takes on each PE
 * of a team of n_pes (low latency: with SYMM_MOE_PACKETS as set); 0 for a
 * configuration symm_moe_create rejects. */
size_t symm_moe_heap_bytes(const symm_moe_config_t *cfg, int n_pes);

/* The handle's local experts (num_experts / n_pes), and this PE's first. */
size_t symm_moe_local_experts(const symm_moe_t *moe);
size_t symm_moe_first_expert(const symm_moe_t *moe);

/*
 * symm_moe_check - wait for `stream`, then report an error the device
 * recorded for this handle (see above) as SYMM_ERR_INVALID_ARG with its
 * message, and clear it. SYMM_SUCCESS when there is none. Not collective.
 * Errors also: SYMM_ERR_CUDA (the stream failed).
 */
symm_status_t symm_moe_check(symm_moe_t *moe, symm_stream_t stream);

/*
 * The SM budget (DeepEP's Buffer.set_num_sms): every kernel of the handle
 * launches at most num_sms blocks, one per SM, leaving the other SMs to the
 * work that runs beside it (the expert GEMMs). 0 restores the default: all
 * the SMs a grid of this PE that waits on peers may fill (symm_sm_share; the
 * whole GPU unless PEs share it). A budget is per handle and per PE (PEs may
 * differ) and applies from the next call on (a captured graph keeps the
 * grids it captured). Any budget is correct, 1 included; fewer SMs move
 * data more slowly. Not collective.
 * Errors: SYMM_ERR_INVALID_ARG (NULL handle, num_sms < 0 or above
 * symm_sm_share, which would let a grid wait for blocks that cannot start).
 */
symm_status_t symm_moe_set_num_sms(symm_moe_t *moe, int num_sms);

/* The budget in effect (the default resolved to its number). Errors:
 * SYMM_ERR_INVALID_ARG (NULL). */
symm_status_t symm_moe_get_num_sms(const symm_moe_t *moe, int *num_sms);

/*
 * symm_moe_launched_blocks - for tests and tuning: wait for `stream`, then
 * *blocks = the most blocks any kernel of the handle ran with since the
 * handle was made or this was last called (each kernel records its own grid
 * size on the device), and start counting afresh. Not collective.
 * Errors: SYMM_ERR_INVALID_ARG (NULL), SYMM_ERR_CUDA.
 */
symm_status_t symm_moe_launched_blocks(symm_moe_t *moe, symm_stream_t stream, int *blocks);

/* ======================================================================== */
/* Low-latency mode (pplx-kernels' AllToAll)                                 */
/* ======================================================================== */

/*
 * Strides are in elements, as torch gives them; the last dimension of x,
 * expert_x, expert_y, out_tokens, indices and weights is contiguous, the
 * scales may have any strides (e.g. column-major for a GEMM's TMA).
 * L = local experts, G = n_pes / dp_size DP groups, M = max_num_tokens.
 *
 *   out_expert_num_tokens  int32 [L]: tokens each local expert got.
 *   out_expert_x           [L][rows][hidden] of x_dtype, rows >= M * G
 *                          (strides out_expert_x_stride[0], [1]). Expert l's
 *                          tokens fill rows 0 .. out_expert_num_tokens[l]-1,
 *                          ordered by source PE (then in no fixed order).
 *   out_expert_x_scale     float32 [L][rows][hidden_dim_scale_bytes / 4], or
 *                          NULL without scales.
 *   dp_x                   [num_tokens][hidden] of x_dtype, row stride dp_x_stride.
 *   dp_x_scale             float32 [num_tokens][scale cols], or NULL.
 *   indices                uint32 [num_tokens][experts_per_token], contiguous;
 *                          SYMM_MOE_NO_EXPERT (-1 as int32) marks an empty slot.
 *   num_tokens             tokens of this DP group, <= max_num_tokens.
 *   bound_m                NULL, or a device uint32: only tokens < *bound_m
 *                          are sent (it must be <= num_tokens; a larger value
 *                          is an error, treated as num_tokens).
 * x_dtype is any 1-, 2- or 4-byte type of symm_dtype_t with hidden_dim *
 * size == hidden_dim_bytes (the bytes are moved as they are).
 */
typedef struct symm_moe_dispatch_args {
    int32_t *out_expert_num_tokens;
    void *out_expert_x;
    int64_t out_expert_x_stride[2];
    size_t out_expert_rows;
    float *out_expert_x_scale;
    int64_t out_expert_x_scale_stride[3];
    const void *dp_x;
    int64_t dp_x_stride;
    const float *dp_x_scale;
    int64_t dp_x_scale_stride[2];
    const uint32_t *indices;
    size_t num_tokens;
    const uint32_t *bound_m;
    symm_dtype_t x_dtype;
} symm_moe_dispatch_args_t;

/*
 * Combine: out_tokens[t] = sum over k of weights[t][k] * expert_y[e][r], e =
 * indices[t][k] and r the row dispatch gave that route, for tokens t <
 * bound_m (or num_tokens), accumulated in float32, on every PE of the DP
 * group. Rows of out_tokens past the bound are not written.
 *   out_tokens   [out_rows >= num_tokens][hidden] bf16 or f16, row stride out_stride.
 *   indices      uint32 [num_tokens][k] and weights float32 [num_tokens][k]:
 *                the same indices as the dispatch, contiguous.
 *   expert_y     [L][rows >= M * G][hidden] of f32, bf16 or f16 (strides
 *                expert_y_stride[0], [1]): the experts' outputs, row for row
 *                as dispatch filled out_expert_x.
 *   bound_m      as for dispatch (the same value).
 *
 * Where the sums are formed (SYMM_MOE_LL_COMBINE, read at symm_moe_create, alike on every PE or
 * SYMM_ERR_MISMATCH): "rows" (the default) sends each route's expert row to the token's PE,
 * which sums the weighted rows in slot order and rounds once to out_dtype. "partial" has the
 * PE of the experts sum them: each PE that holds some of a token's experts forms
 * sum of weights[t][k] * expert_y over its own routes of the token, in slot order, in float32,
 * rounds it once to out_dtype and sends that one row; the token's PE sums its partial rows (one
 * per such PE, at most n) in PE order in float32 and rounds again. So a value rounds twice
 * (each partial once, as DeepEP's normal combine takes rows already summed per rank, then the
 * sum), and with one PE holding all of a token's experts the result equals "rows" (the second
 * rounding is of a value already in out_dtype). It moves one row per (token, PE) instead of one
 * per route: about 2.2x fewer bytes at top-8 on 4 PEs. It applies to handles of the general
 * low-latency kernels (not the small ones, SYMM_MOE_LL_SMALL) with max_num_tokens x
 * experts_per_token >= 256 ("partial-all": any max_num_tokens), to
 * every call of such a handle; symm_moe_ll_partial says whether it applies. The weights travel
 * as the combine starts (each token's PE posts them to its experts' PEs), so the combine's
 * indices and weights must cover every token the dispatch sent.
 */
typedef struct symm_moe_combine_args {
    void *out_tokens;
    int64_t out_stride;
    size_t out_rows;
    symm_dtype_t out_dtype;
    const uint32_t *indices;
    const float *weights;
    size_t num_tokens;
    const void *expert_y;
    int64_t expert_y_stride[2];
    size_t expert_y_rows;
    symm_dtype_t y_dtype;
    const uint32_t *bound_m;
} symm_moe_combine_args_t;

symm_status_t symm_moe_dispatch(symm_moe_t *moe, const symm_moe_dispatch_args_t *args, int flags,
                                symm_stream_t stream);
symm_status_t symm_moe_combine(symm_moe_t *moe, const symm_moe_combine_args_t *args, int flags,
                               symm_stream_t stream);

/*
 * symm_moe_ll_routes - where the last low-latency dispatch's rows came from:
 * *routes is device memory of the handle, uint64 [L][*rows] (rows = max_num_tokens
 * x DP groups), rewritten by the receive half of the next dispatch. Entry
 * [l][r], for r < out_expert_num_tokens[l], describes row r of out_expert_x[l]:
 * bits 0-15 the source PE, 16-31 the top-k slot, 32-63 the token's index on
 * the source PE (its DP group's token). The same on every call. Errors:
 * SYMM_ERR_INVALID_ARG (NULL, or a high-throughput handle).
 */
symm_status_t symm_moe_ll_routes(const symm_moe_t *moe, const uint64_t **routes, size_t *rows);

/*
 * symm_moe_ll_partial - *partial = 1 when the handle's combine sums on the experts' side
 * (SYMM_MOE_LL_COMBINE, above symm_moe_combine_args_t), else 0; the same on every PE. Errors:
 * SYMM_ERR_INVALID_ARG (NULL, or a high-throughput handle).
 */
symm_status_t symm_moe_ll_partial(const symm_moe_t *moe, int *partial);

/* ======================================================================== */
/* High-throughput mode (DeepEP's normal kernels, intranode)                  */
/* ======================================================================== */

/*
 * symm_moe_ht_layout - the layout of a batch, on `stream`, from the token
 * indices alone (local; no communication): how many tokens go to each PE
 * (num_tokens_per_rank, int32 [n_pes]) and to each expert
 * (num_tokens_per_expert, int32 [num_experts]), and which go where
 * (is_token_in_rank, uint8 [num_tokens][n_pes], 0/1). Any output may be NULL.
 * indices: [num_tokens][experts_per_token], contiguous, of SYMM_DTYPE_I32,
 * U32 or I64; -1 (in a signed type) means "no expert" and is skipped.
 * Dispatch computes the same layout itself; this call is for callers that
 * want it (e.g. to plan their expert GEMMs).
 */
symm_status_t symm_moe_ht_layout(symm_moe_t *moe, const void *indices, symm_dtype_t indices_dtype,
                                 size_t num_tokens, int32_t *num_tokens_per_rank,
                                 int32_t *num_tokens_per_expert, uint8_t *is_token_in_rank,
                                 symm_stream_t stream);

/*
 * symm_moe_layout - symm_moe_ht_layout without a handle (DeepEP's
 * get_dispatch_layout): the same three outputs for num_ranks PEs holding
 * num_experts / num_ranks consecutive experts each, in one kernel on
 * `stream`, from the indices alone (local; no runtime state, so it needs no
 * symm_init and captures into a CUDA graph).
 *   indices            [num_tokens][experts_per_token], contiguous, of
 *                      SYMM_DTYPE_I32, U32 or I64 (aligned to its size).
 *                      A value outside [0, num_experts) (-1 among them)
 *                      counts nowhere, and is no error.
 *   num_tokens_per_rank    int32 [num_ranks]: tokens with an expert there
 *                          (a token once per rank).
 *   num_tokens_per_expert  int32 [num_experts]: slots naming each expert.
 *   is_token_in_rank       uint8 [num_tokens][num_ranks], 0/1.
 * num_tokens may be 0 (the counts are zeroed). Errors, before anything
 * runs: SYMM_ERR_INVALID_ARG (a NULL pointer where data is due, an
 * unsupported dtype or misaligned indices, num_ranks outside 1..64,
 * num_experts not a positive multiple of num_ranks, counts that would not
 * fit int32); SYMM_ERR_CUDA (the launch).
 */
symm_status_t symm_moe_layout(const void *indices, symm_dtype_t indices_dtype, size_t num_tokens,
                              size_t experts_per_token, size_t num_experts, int num_ranks,
                              int32_t *num_tokens_per_rank, int32_t *num_tokens_per_expert,
                              uint8_t *is_token_in_rank, symm_stream_t stream);

/*
 *   x             [num_tokens][hidden] of x_dtype (row stride x_stride).
 *   x_scale       float32 [num_tokens][scale cols] (strides), or NULL.
 *   indices       as for symm_moe_ht_layout.
 *   weights       float32 [num_tokens][k] contiguous, or NULL (received as 0).
 *   num_tokens    <= max_num_tokens.
 */
typedef struct symm_moe_ht_dispatch_args {
    const void *x;
    int64_t x_stride;
    symm_dtype_t x_dtype;
    const float *x_scale;
    int64_t x_scale_stride[2];
    const void *indices;
    symm_dtype_t indices_dtype;
    const float *weights;
    size_t num_tokens;
} symm_moe_ht_dispatch_args_t;

/*
 * What a high-throughput dispatch receives: device buffers owned by the
 * handle (symmetric), rewritten by the next dispatch. Rows 0 .. *num_recv - 1
 * are valid, ordered by source PE, then by token index.
 *   x                   [capacity][hidden] of the dispatch's x_dtype.
 *   x_scale             float32 [capacity][scale cols], NULL without scales.
 *   indices             int32 [capacity][k]: the token's experts as local
 *                       expert numbers of this PE (0 .. L-1), -1 for experts
 *                       elsewhere.
 *   weights             float32 [capacity][k], the token's router weights.
 *   src                 int32 [capacity][2]: source PE, token index there.
 *   num_recv            int32 [1]: rows received.
 *   num_recv_per_expert int32 [L]: tokens per local expert.
 */
typedef struct symm_moe_ht_recv {
    void *x;
    float *x_scale;
    int32_t *indices;
    float *weights;
    int32_t *src;
    int32_t *num_recv;
    int32_t *num_recv_per_expert;
    size_t capacity;
    size_t scale_cols;
} symm_moe_ht_recv_t;

symm_status_t symm_moe_ht_dispatch(symm_moe_t *moe, const symm_moe_ht_dispatch_args_t *args, int flags,
                                   symm_stream_t stream);

/*
 * symm_moe_ht_dispatch_into - symm_moe_ht_dispatch, with this PE's received
 * rows of x and their scales stored straight into the caller's buffers
 * instead of the handle's (no copy afterwards): rows 0 .. num_recv - 1 of
 *   recv_x        [capacity][hidden_dim_bytes], 16-byte aligned, and
 *   recv_x_scale  float32 [capacity][scale_cols], 16-byte aligned,
 * laid out as symm_moe_ht_recv_t's x and x_scale. The peers store into them,
 * so both must lie in the symmetric heap (symm_malloc; any block of it with
 * those bytes, not overlapping the handle's or each other). NULL takes the
 * handle's buffer for that one (symm_moe_ht_dispatch is both NULL). Each PE
 * chooses its own, per call, with no agreement between PEs: the send half
 * publishes the choice to the peers on the device. The top-k indices,
 * weights, sources and counts stay in the handle's buffers. The buffers are
 * rewritten from the moment the send half's kernel starts, so work enqueued
 * before the call on `stream` may still read them, later work must not
 * until the receive half is done; a receive half takes what its send half
 * named (NULL, or the same pointers). A captured graph keeps the pointers
 * it captured.
 * Errors: as symm_moe_ht_dispatch; SYMM_ERR_INVALID_ARG also for a buffer
 * outside the heap, short, misaligned or overlapping, and for recv_x_scale
 * on a handle without scales.
 */
symm_status_t symm_moe_ht_dispatch_into(symm_moe_t *moe, const symm_moe_ht_dispatch_args_t *args, void *recv_x,
                                        float *recv_x_scale, int flags, symm_stream_t stream);

/* The receive buffers (the same on every call). Errors: SYMM_ERR_INVALID_ARG. */
symm_status_t symm_moe_ht_recv_buffers(const symm_moe_t *moe, symm_moe_ht_recv_t *recv);

/*
 * symm_moe_ht_recv_copy - what the last dispatch received beside the rows of
 * x, copied out of the handle's buffers (which the next dispatch rewrites)
 * into the caller's, in the forms DeepEP returns them, in one kernel on
 * `stream` (after the dispatch's receive half there). Rows 0 .. rows - 1 are
 * written; a row at or past num_recv (read on the device: rows may exceed
 * it, e.g. a worst-case row count) gets source -1, indices -1 and weights 0.
 * Any output may be NULL (not written). Not collective; no host wait.
 *   src_token      int32 [rows]: the row's token index on its source PE.
 *   indices        [rows][experts_per_token] of indices_dtype (SYMM_DTYPE_I32
 *                  or I64): the local experts, -1 elsewhere.
 *   weights        float32 [rows][experts_per_token]: the router weights, 0
 *                  where the index is -1.
 *   counts         int32 [1 + local experts]: num_recv, then num_recv_per_expert.
 * Errors: SYMM_ERR_INVALID_ARG (NULL handle or args, a low-latency handle,
 * rows above the receive capacity, another indices dtype, an output not
 * aligned to its elements); SYMM_ERR_CUDA.
 */
typedef struct symm_moe_ht_recv_copy {
    size_t rows;
    int32_t *src_token;
    void *indices;
    symm_dtype_t indices_dtype;
    float *weights;
    int32_t *counts;
} symm_moe_ht_recv_copy_t;

symm_status_t symm_moe_ht_recv_copy(const symm_moe_t *moe, const symm_moe_ht_recv_copy_t *copy,
                                    symm_stream_t stream);

/*
 * Combine: out[t] = sum over the PEs p that token t went to of y_p[row],
 * row being where p received t, in float32, for t < the last dispatch's
 * num_tokens (every one of them is written; a token sent nowhere gets 0).
 *   y     [y_rows][hidden] of bf16 or f16 (row stride y_stride): row i is the
 *         output for received row i. y_rows below the rows received is an
 *         error found on the device (the rows past it are not returned).
 *   out   [>= num_tokens][hidden] of bf16 or f16 (row stride out_stride).
 */
symm_status_t symm_moe_ht_combine(symm_moe_t *moe, const void *y, symm_dtype_t y_dtype, int64_t y_stride,
                                  size_t y_rows, void *out, symm_dtype_t out_dtype, int64_t out_stride,
                                  size_t out_rows, int flags, symm_stream_t stream);

/*
 * The float32 side channel of a high-throughput combine (DeepEP's
 * combined_topk_weights): each received row i returns, beside y[i], the cols
 * values w[i][0 .. cols-1], and out_w[t][c] = the sum of the values the PEs
 * return for token t, PE by PE in PE order, each added in float32 to the sum
 * so far (from 0; a token sent nowhere gets 0). The values travel with the
 * rows of y, behind the same completion flags: no exchange of their own.
 *   w            float32 [w_rows >= y_rows][cols], row stride w_stride (in
 *                elements, >= cols), 4-byte aligned.
 *   out_w        float32 [out_w_rows >= the dispatch's num_tokens][cols], row
 *                stride out_w_stride (>= cols), 4-byte aligned.
 *   cols         1 .. experts_per_token (the handle keeps room for that many
 *                per row); 0: no channel.
 * Every PE passes the same cols, as every size of a collective call (not
 * checked: a PE that sends none while its peers expect them reads stale
 * values). With the halves apart, the send half reads w and the receive half
 * writes out_w; both name the same cols (checked).
 */
typedef struct symm_moe_ht_weights {
    const float *w;
    int64_t w_stride;
    size_t w_rows;
    float *out_w;
    int64_t out_w_stride;
    size_t out_w_rows;
    size_t cols;
} symm_moe_ht_weights_t;

/*
 * symm_moe_ht_combine_weights - symm_moe_ht_combine with the side channel
 * above (`weights` NULL, or cols 0: the plain combine). A function of its
 * own, the channel's fields in one struct, so that the plain combine keeps
 * its arguments and a caller without weights names none of them. Every
 * schedule of SYMM_MOE_HT_COMBINE carries them (under pull, rows read in
 * place have their values pushed, behind their chunk flags).
 * Errors: as symm_moe_ht_combine; SYMM_ERR_INVALID_ARG also for w or out_w
 * NULL or misaligned, cols above experts_per_token, a stride below cols,
 * w_rows below y_rows, out_w_rows below num_tokens, and a receive half whose
 * cols differ from its send half's.
 */
symm_status_t symm_moe_ht_combine_weights(symm_moe_t *moe, const void *y, symm_dtype_t y_dtype, int64_t y_stride,
                                          size_t y_rows, void *out, symm_dtype_t out_dtype, int64_t out_stride,
                                          size_t out_rows, const symm_moe_ht_weights_t *weights, int flags,
                                          symm_stream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* SYMM_MOE_H */
