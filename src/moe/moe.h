/*
 * moe.h - internal interface of the MoE token exchange (src/moe).
 *
 * moe_args.c holds the pure checks and the buffer layout (no runtime, no
 * CUDA: unit-tested on their own); moe_host.c the handle and the calls;
 * moe_launch.cu and moe_k_*.cu the CUDA side.
 */
#ifndef SYMM_MOE_INTERNAL_H
#define SYMM_MOE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "symm/symm_moe.h"
#include "moe/moe_launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Limits of the kernels (masks of 64 PEs, shared arrays of top-k). */
#define SYMM__MOE_MAX_TOPK 64
#define SYMM__MOE_MAX_EXPERTS 8192
#define SYMM__MOE_MAX_TOKENS ((size_t)1 << 20)
#define SYMM__MOE_MAX_HIDDEN ((size_t)1 << 16)

/* Geometry derived from a configuration and the team size. */
typedef struct symm__moe_geom {
    int n, dp, groups;
    uint32_t local, cap, scale_cols, tok_stride, rows, x_esz;
    int packets;        /* low latency: SYMM__MOE_PKT_OFF, _AUTO or _ON */
    uint32_t pcap, pmt; /* low latency: packet slots per source, tokens with combine packets */
    int ll_small;       /* low latency: dispatches take the small path (SYMM__MOE_SMALL_*) */
    symm__moe_layout_t lay;
} symm__moe_geom_t;

/* Low latency: when rows travel as packets (SYMM_MOE_PACKETS). AUTO: a
 * call's rows from one PE as packets while they fit in SYMM_MOE_PACKET_BYTES
 * (small batches), plainly above; ON: always (the packet regions sized for
 * max_num_tokens); OFF: never (no packet regions). */
enum symm__moe_pkt { SYMM__MOE_PKT_OFF = 0, SYMM__MOE_PKT_AUTO = 1, SYMM__MOE_PKT_ON = 2 };

/* SYMM_MOE_PACKETS's text (NULL or empty: auto) as a symm__moe_pkt.
 * Errors: SYMM_ERR_INVALID_ARG naming the variable and what it takes. */
symm_status_t symm__moe_packets_parse(const char *call, const char *text, int *mode);
/* The mode's name for messages: "0", "auto" or "1". */
const char *symm__moe_packets_name(int mode);
/* The process's SYMM_MOE_PACKETS, parsed (as init read it, or as it will). */
symm_status_t symm__moe_packets(const char *call, int *mode);

/* Low latency: how the combine returns a token's routes (SYMM_MOE_LL_COMBINE). ROWS: each route's
 * expert row to the token's PE, which sums them; PARTIAL: the expert's PE sums the token's routes
 * it holds and sends one row (moe_k_ll_combine_part.cu), on handles whose largest call has
 * SYMM__MOE_LL_POST_ROUTES routes or more; PARTIAL_ALL: on every handle it can serve. */
enum symm__moe_llc { SYMM__MOE_LLC_ROWS = 0, SYMM__MOE_LLC_PARTIAL = 1, SYMM__MOE_LLC_PARTIAL_ALL = 2 };

/* SYMM_MOE_LL_COMBINE's text (NULL or empty: rows) as a symm__moe_llc. Errors: SYMM_ERR_INVALID_ARG
 * naming the variable and what it takes. */
symm_status_t symm__moe_ll_combine_parse(const char *call, const char *text, int *mode);
/* The mode's name for messages. */
const char *symm__moe_ll_combine_name(int mode);
/* 1 when a handle of `cfg` (geometry g; ll_small: it takes the small kernels) runs the partial
 * combine under `mode`: a low-latency handle of the general kernels, and for PARTIAL
 * max_num_tokens x top-k of at least SYMM__MOE_LL_POST_ROUTES. Every PE decides alike (create checks the inputs agree). */
int symm__moe_ll_part(const symm_moe_config_t *cfg, const symm__moe_geom_t *g, int mode, int ll_small);

/* Check `cfg` for a team of n PEs (low latency: with packet mode `packets`)
 * and derive the geometry; every error names the field and its value
 * (prefixed with `call`). Errors: SYMM_ERR_INVALID_ARG. */
symm_status_t symm__moe_geom(const char *call, const symm_moe_config_t *cfg, int n, int packets,
                             symm__moe_geom_t *g);

/* Bytes of an element of `dtype`, 0 for an unknown one. */
uint32_t symm__moe_dtype_size(symm_dtype_t dtype);

/* Argument checks of each call against the handle's configuration, before
 * anything is launched; they fill the call's part of `a`. Errors:
 * SYMM_ERR_INVALID_ARG with the argument's name and what was expected. */
symm_status_t symm__moe_check_dispatch(const symm_moe_config_t *cfg, const symm__moe_geom_t *g,
                                       const symm_moe_dispatch_args_t *args, symm__moe_kargs_t *a);
symm_status_t symm__moe_check_combine(const symm_moe_config_t *cfg, const symm__moe_geom_t *g,
                                      const symm_moe_combine_args_t *args, symm__moe_kargs_t *a);
symm_status_t symm__moe_check_ht_indices(const char *call, const symm_moe_config_t *cfg, const void *indices,
                                         symm_dtype_t dtype, size_t num_tokens, symm__moe_kargs_t *a);
symm_status_t symm__moe_check_ht_dispatch(const symm_moe_config_t *cfg, const symm__moe_geom_t *g,
                                          const symm_moe_ht_dispatch_args_t *args, symm__moe_kargs_t *a);
symm_status_t symm__moe_check_ht_combine(const symm_moe_config_t *cfg, const void *y, symm_dtype_t y_dtype,
                                         int64_t y_stride, size_t y_rows, void *out, symm_dtype_t out_dtype,
                                         int64_t out_stride, size_t out_rows, size_t num_tokens,
                                         symm__moe_kargs_t *a);
/* The combine's side channel (NULL or cols 0: none), after symm__moe_check_ht_combine filled
 * a's y_rows and num_tokens: what the halves in `flags` read (w) and write (out_w). */
symm_status_t symm__moe_check_ht_weights(const symm_moe_config_t *cfg, const symm_moe_ht_weights_t *w, int flags,
                                         symm__moe_kargs_t *a);
/* Bytes a caller's receive buffers of symm_moe_ht_dispatch_into take: x
 * (capacity x hidden_dim_bytes) and scales (capacity x scale columns x 4, 0
 * without scales). */
void symm__moe_ht_into_bytes(const symm_moe_config_t *cfg, const symm__moe_geom_t *g, size_t *x_bytes,
                             size_t *scale_bytes);
/* Check a dispatch's receive buffers (NULL: the handle's own, at `base`)
 * and set a->ht_rx_at / ht_rs_at. x_in_heap / s_in_heap: the caller's
 * answer whether each lies in the symmetric heap with the bytes above.
 * Errors: SYMM_ERR_INVALID_ARG naming the buffer and the rule. */
symm_status_t symm__moe_check_ht_into(const char *call, const symm_moe_config_t *cfg, const symm__moe_geom_t *g,
                                      uintptr_t base, const void *recv_x, const void *recv_x_scale, int x_in_heap,
                                      int s_in_heap, symm__moe_kargs_t *a);
/* flags is SYMM_MOE_SEND, SYMM_MOE_RECV or both. */
symm_status_t symm__moe_check_flags(const char *call, int flags);

/* The call order of a handle: the next step each call may take. */
enum symm__moe_step {
    SYMM__MOE_AT_DISPATCH_SEND = 0,
    SYMM__MOE_AT_DISPATCH_RECV,
    SYMM__MOE_AT_COMBINE_SEND,
    SYMM__MOE_AT_COMBINE_RECV
};

/* Check that a dispatch (combine = 0) or combine (1) with `flags` may come
 * at step *at, and return the step after it in *next. Errors:
 * SYMM_ERR_INVALID_ARG naming what was expected. */
symm_status_t symm__moe_check_order(const char *call, int at, int combine, int flags, int *next);

/* The message of a device-recorded error (for SYMM_ERR_INVALID_ARG). */
void symm__moe_err_message(const symm__moe_err_t *e, const symm_moe_config_t *cfg, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* SYMM_MOE_INTERNAL_H */
