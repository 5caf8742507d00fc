/*
 * moe_args.c - the MoE exchange's checks and buffer layout: pure functions of
 * the configuration and the call's arguments (no runtime, no CUDA; the one
 * environment read is SYMM_MOE_PACKETS, which sizes the layout), so every
 * rule is unit-tested without a GPU (tests/moe/test_moe_args.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/env.h"
#include "core/log.h"
#include "moe/moe.h"

#define BYTES_LIMIT ((uint64_t)1 << 46) /* 64 TiB: beyond any GPU, far from overflow */

uint32_t symm__moe_dtype_size(symm_dtype_t dtype) {
    switch (dtype) {
    case SYMM_DTYPE_F64:
    case SYMM_DTYPE_I64:
    case SYMM_DTYPE_U64: return 8;
    case SYMM_DTYPE_F32:
    case SYMM_DTYPE_I32:
    case SYMM_DTYPE_U32: return 4;
    case SYMM_DTYPE_F16:
    case SYMM_DTYPE_BF16: return 2;
    case SYMM_DTYPE_FP8_E4M3:
    case SYMM_DTYPE_FP8_E5M2:
    case SYMM_DTYPE_U8: return 1;
    default: return 0;
    }
}

static uint64_t up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* Append a region of `bytes` (256-byte aligned) to the layout. */
static uint64_t region(uint64_t *at, uint64_t bytes) {
    uint64_t off = *at;
    *at = up(off + (bytes ? bytes : 1), 256);
    return off;
}

/* Most blocks of a high-throughput dispatch for M tokens (moe_host.c's grid). */
static uint64_t cdiv_blocks(uint64_t M) { return (M + SYMM__MOE_HT_BLOCK_TOKENS - 1) / SYMM__MOE_HT_BLOCK_TOKENS; }

static void layout(const symm_moe_config_t *cfg, symm__moe_geom_t *g) {
    symm__moe_layout_t *l = &g->lay;
    const uint64_t n = (uint64_t)g->n, L = g->local, K = cfg->experts_per_token;
    const uint64_t M = cfg->max_num_tokens, H = cfg->hidden_dim, cap = g->cap;
    uint64_t at = 0;
    memset(l, 0, sizeof(*l));
    l->state = region(&at, sizeof(symm__moe_state_t));
    if (cfg->mode == SYMM_MOE_LOW_LATENCY) {
        l->ll_cnt = region(&at, 2 * n * L * 8);
        l->ll_list = region(&at, 2 * n * L * cap * 8);
        l->ll_dbuf = region(&at, 2 * n * cap * g->tok_stride);
        l->ll_pbuf = region(&at, 2 * n * (uint64_t)g->pcap * 2 * (g->tok_stride - 16));
        l->ll_mode = region(&at, n * 4);
        l->ll_rcnt = region(&at, L * 4);
        l->ll_route = region(&at, L * g->rows * 8);
        l->ll_cflag = region(&at, M * K * 8);
        l->ll_cbuf = region(&at, M * K * H * 4);
        l->ll_pcbuf = region(&at, (uint64_t)g->pmt * K * H * 8);
        l->ll_hdr = region(&at, g->ll_small ? 2 * n * (1 + cap * (K < L ? K : L)) * 16 : 0);
        l->ll_flat = region(&at, g->ll_small ? (1 + n * cap * (K < L ? K : L)) * 16 : 0);
        l->ll_cw = region(&at, n * cap * K * 8);
    } else {
        l->ht_mat = region(&at, 2 * n * n * 8);
        l->ht_emat = region(&at, 2 * n * L * 8);
        l->ht_rcv = region(&at, n * 8);
        l->ht_exp = region(&at, n * 8);
        l->ht_roff = region(&at, 2 * n * 4);
        l->ht_mask = region(&at, M * 8);
        l->ht_pos = region(&at, M * n * 4);
        l->ht_cflag = region(&at, n * ((M + SYMM__MOE_HT_CHUNK - 1) / SYMM__MOE_HT_CHUNK) * 8);
        l->ht_dst = region(&at, 2 * n * 4 * 8);
        l->ht_rx = region(&at, cap * cfg->hidden_dim_bytes);
        l->ht_rscale = region(&at, cap * g->scale_cols * 4);
        l->ht_ridx = region(&at, cap * K * 4);
        l->ht_rw = region(&at, cap * K * 4);
        l->ht_rsrc = region(&at, cap * 8);
        l->ht_rnum = region(&at, 16);
        l->ht_rpe = region(&at, L * 4);
        l->ht_cbuf = region(&at, n * M * H * 2);
        l->ht_bcnt = region(&at, cdiv_blocks(M) * (n + cfg->num_experts) * 4);
        l->ht_bflag = region(&at, cdiv_blocks(M) * 8);
        l->ht_phdr = region(&at, n * 4 * 8);
        l->ht_pdone = region(&at, n * 8);
        l->ht_cwbuf = region(&at, n * M * K * 4);
    }
    l->total = at;
}

#define BAD(...) symm__error(SYMM_ERR_INVALID_ARG, __VA_ARGS__)

symm_status_t symm__moe_packets_parse(const char *call, const char *text, int *mode) {
    if (text == NULL || text[0] == '\0' || strcmp(text, "auto") == 0)
        *mode = SYMM__MOE_PKT_AUTO;
    else if (strcmp(text, "1") == 0)
        *mode = SYMM__MOE_PKT_ON;
    else if (strcmp(text, "0") == 0)
        *mode = SYMM__MOE_PKT_OFF;
    else
        return BAD("%s: SYMM_MOE_PACKETS=\"%s\": expected auto (packets for small calls), 1 (always) or 0 "
                   "(never)", call, text);
    return SYMM_SUCCESS;
}

const char *symm__moe_packets_name(int mode) {
    return mode == SYMM__MOE_PKT_OFF ? "0" : mode == SYMM__MOE_PKT_ON ? "1" : "auto";
}

symm_status_t symm__moe_packets(const char *call, int *mode) {
    symm__env_t env;
    symm_status_t st;
    if (symm__env_loaded())
        return symm__moe_packets_parse(call, symm__env()->moe_packets, mode);
    /* before init (symm_moe_heap_bytes sizing a heap): the environment as init will read it */
    if ((st = symm__env_load(&env)) != SYMM_SUCCESS)
        return st;
    return symm__moe_packets_parse(call, env.moe_packets, mode);
}

symm_status_t symm__moe_geom(const char *call, const symm_moe_config_t *cfg, int n, int packets,
                             symm__moe_geom_t *g) {
    symm__moe_geom_t r;
    uint64_t x_esz, scale_cols;
    memset(&r, 0, sizeof(r));
    if (cfg == NULL)
        return BAD("%s: config is NULL", call);
    if (cfg->mode != SYMM_MOE_LOW_LATENCY && cfg->mode != SYMM_MOE_HIGH_THROUGHPUT)
        return BAD("%s: mode %d is neither SYMM_MOE_LOW_LATENCY (0) nor SYMM_MOE_HIGH_THROUGHPUT (1)", call,
                   cfg->mode);
    if (n < 1 || n > SYMM__MOE_MAX_PES)
        return BAD("%s: a team of %d PEs (the MoE exchange supports 1..%d)", call, n, SYMM__MOE_MAX_PES);
    if (cfg->max_num_tokens < 1 || cfg->max_num_tokens > SYMM__MOE_MAX_TOKENS)
        return BAD("%s: max_num_tokens %zu is not in 1..%zu", call, cfg->max_num_tokens, SYMM__MOE_MAX_TOKENS);
    if (cfg->num_experts < 1 || cfg->num_experts > SYMM__MOE_MAX_EXPERTS)
        return BAD("%s: num_experts %zu is not in 1..%d", call, cfg->num_experts, SYMM__MOE_MAX_EXPERTS);
    if (cfg->num_experts % (size_t)n)
        return BAD("%s: num_experts %zu is not a multiple of the team size %d (each PE holds an equal share)",
                   call, cfg->num_experts, n);
    if (cfg->experts_per_token < 1 || cfg->experts_per_token > SYMM__MOE_MAX_TOPK ||
        cfg->experts_per_token > cfg->num_experts)
        return BAD("%s: experts_per_token %zu is not in 1..min(%d, num_experts %zu)", call,
                   cfg->experts_per_token, SYMM__MOE_MAX_TOPK, cfg->num_experts);
    if (cfg->hidden_dim < 8 || cfg->hidden_dim > SYMM__MOE_MAX_HIDDEN || cfg->hidden_dim % 8)
        return BAD("%s: hidden_dim %zu is not a multiple of 8 in 8..%zu", call, cfg->hidden_dim,
                   SYMM__MOE_MAX_HIDDEN);
    x_esz = cfg->hidden_dim_bytes / cfg->hidden_dim;
    if (cfg->hidden_dim_bytes % cfg->hidden_dim || (x_esz != 1 && x_esz != 2 && x_esz != 4))
        return BAD("%s: hidden_dim_bytes %zu is not hidden_dim %zu times an element size of 1, 2 or 4 bytes",
                   call, cfg->hidden_dim_bytes, cfg->hidden_dim);
    if (cfg->hidden_dim_bytes % 16)
        return BAD("%s: hidden_dim_bytes %zu is not a multiple of 16", call, cfg->hidden_dim_bytes);
    scale_cols = (cfg->hidden_dim + SYMM_MOE_SCALE_BLOCK - 1) / SYMM_MOE_SCALE_BLOCK;
    if (cfg->hidden_dim_scale_bytes != 0 && cfg->hidden_dim_scale_bytes != scale_cols * 4)
        return BAD("%s: hidden_dim_scale_bytes %zu: expected 0 (no scales) or %" PRIu64
                   " (one float32 per %d elements of hidden_dim %zu)",
                   call, cfg->hidden_dim_scale_bytes, scale_cols * 4, SYMM_MOE_SCALE_BLOCK, cfg->hidden_dim);
    r.n = n;
    r.local = (uint32_t)(cfg->num_experts / (size_t)n);
    r.x_esz = (uint32_t)x_esz;
    r.scale_cols = cfg->hidden_dim_scale_bytes ? (uint32_t)scale_cols : 0;
    if (cfg->mode == SYMM_MOE_LOW_LATENCY) {
        if (cfg->dp_size < 1 || n % cfg->dp_size)
            return BAD("%s: world_size %d is not a multiple of dp_size %d", call, n, cfg->dp_size);
        if (cfg->max_recv_tokens != 0)
            return BAD("%s: max_recv_tokens %zu: the low-latency mode takes 0 (its rows are max_num_tokens x "
                       "DP groups)", call, cfg->max_recv_tokens);
        r.dp = cfg->dp_size;
        r.groups = n / cfg->dp_size;
        r.cap = (uint32_t)((cfg->max_num_tokens + (size_t)r.dp - 1) / (size_t)r.dp);
        r.rows = (uint32_t)(cfg->max_num_tokens * (size_t)r.groups);
        r.tok_stride = (uint32_t)(cfg->hidden_dim_bytes + up(cfg->hidden_dim_scale_bytes, 16) + 16);
        if (packets != SYMM__MOE_PKT_OFF && packets != SYMM__MOE_PKT_AUTO && packets != SYMM__MOE_PKT_ON)
            return BAD("%s: packet mode %d", call, packets);
        /* packet slots: a PE's dispatch rows (x and scales) as packets while they fit in
         * SYMM_MOE_PACKET_BYTES, and a DP group's combine rows (k per token, 2-byte outputs) likewise;
         * every call fits with packets always on, none with them off */
        r.packets = packets;
        if (packets == SYMM__MOE_PKT_ON) {
            r.pcap = r.cap;
            r.pmt = (uint32_t)cfg->max_num_tokens;
        } else if (packets == SYMM__MOE_PKT_AUTO) {
            r.pcap = (uint32_t)(SYMM_MOE_PACKET_BYTES / (r.tok_stride - 16));
            if (r.pcap > r.cap)
                r.pcap = r.cap;
            r.pmt = (uint32_t)(SYMM_MOE_PACKET_BYTES / (cfg->experts_per_token * cfg->hidden_dim * 2));
            if (r.pmt > cfg->max_num_tokens)
                r.pmt = (uint32_t)cfg->max_num_tokens;
        }
        {
            /* every call's rows as packets, a PE's routes one block's threads, its receipts the shared memory */
            const uint64_t kl = cfg->experts_per_token < r.local ? cfg->experts_per_token : r.local;
            r.ll_small = packets != SYMM__MOE_PKT_OFF && r.pcap >= r.cap &&
                         (uint64_t)r.cap * cfg->experts_per_token <= SYMM__MOE_SMALL_SEND &&
                         (uint64_t)n * r.cap * kl <= SYMM__MOE_SMALL_RECV && r.cap <= 0xffffu;
        }
    } else {
        if (cfg->dp_size != 1)
            return BAD("%s: dp_size %d: the high-throughput mode takes 1 (every PE sends its own tokens)", call,
                       cfg->dp_size);
        if (cfg->max_recv_tokens > cfg->max_num_tokens * (size_t)n)
            return BAD("%s: max_recv_tokens %zu is above max_num_tokens x n_pes = %zu (the most a PE can receive)",
                       call, cfg->max_recv_tokens, cfg->max_num_tokens * (size_t)n);
        r.dp = 1;
        r.groups = n;
        r.cap = (uint32_t)(cfg->max_recv_tokens ? cfg->max_recv_tokens : cfg->max_num_tokens * (size_t)n);
        r.rows = r.cap;
    }
    layout(cfg, &r);
    if (r.lay.total > BYTES_LIMIT)
        return BAD("%s: the configuration needs %" PRIu64 " bytes of symmetric memory per PE", call, r.lay.total);
    *g = r;
    return SYMM_SUCCESS;
}

symm_status_t symm__moe_ll_combine_parse(const char *call, const char *text, int *mode) {
    if (text == NULL || text[0] == '\0' || strcmp(text, "rows") == 0)
        *mode = SYMM__MOE_LLC_ROWS;
    else if (strcmp(text, "partial") == 0)
        *mode = SYMM__MOE_LLC_PARTIAL;
    else if (strcmp(text, "partial-all") == 0)
        *mode = SYMM__MOE_LLC_PARTIAL_ALL;
    else
        return BAD("%s: SYMM_MOE_LL_COMBINE=\"%s\": expected rows (a row per route), partial (a row per token "
                   "and PE, on handles of %d routes and more) or partial-all (on every handle of the general "
                   "kernels)", call, text, SYMM__MOE_LL_POST_ROUTES);
    return SYMM_SUCCESS;
}

const char *symm__moe_ll_combine_name(int mode) {
    return mode == SYMM__MOE_LLC_PARTIAL ? "partial" : mode == SYMM__MOE_LLC_PARTIAL_ALL ? "partial-all" : "rows";
}

int symm__moe_ll_part(const symm_moe_config_t *cfg, const symm__moe_geom_t *g, int mode, int ll_small) {
    if (cfg->mode != SYMM_MOE_LOW_LATENCY || ll_small || g->n < 1)
        return 0;
    if (mode == SYMM__MOE_LLC_PARTIAL_ALL)
        return 1;
    return mode == SYMM__MOE_LLC_PARTIAL &&
           (uint64_t)cfg->max_num_tokens * cfg->experts_per_token >= SYMM__MOE_LL_POST_ROUTES;
}

size_t symm_moe_heap_bytes(const symm_moe_config_t *cfg, int n_pes) {
    symm__moe_geom_t g;
    int packets = 0; /* set on success; gcc -O3 cannot see it and warns (an error with SYMM_WERROR) */
    if (cfg == NULL || n_pes < 1 || n_pes > SYMM__MOE_MAX_PES)
        return 0;
    if (symm__moe_packets("symm_moe_heap_bytes", &packets) != SYMM_SUCCESS ||
        symm__moe_geom("symm_moe_heap_bytes", cfg, n_pes, packets, &g) != SYMM_SUCCESS) {
        symm__error_clear();
        return 0;
    }
    return (size_t)g.lay.total;
}

symm_status_t symm__moe_check_flags(const char *call, int flags) {
    if (flags != SYMM_MOE_SEND && flags != SYMM_MOE_RECV && flags != SYMM_MOE_SEND_RECV)
        return BAD("%s: flags %d: expected SYMM_MOE_SEND (1), SYMM_MOE_RECV (2) or both (3); "
                   "do_send and do_recv cannot both be false", call, flags);
    return SYMM_SUCCESS;
}

static const char *step_name(int at) {
    switch (at) {
    case SYMM__MOE_AT_DISPATCH_SEND: return "a dispatch (its send half)";
    case SYMM__MOE_AT_DISPATCH_RECV: return "the receive half of the dispatch";
    case SYMM__MOE_AT_COMBINE_SEND: return "a combine (its send half)";
    default: return "the receive half of the combine";
    }
}

symm_status_t symm__moe_check_order(const char *call, int at, int combine, int flags, int *next) {
    int first = combine ? SYMM__MOE_AT_COMBINE_SEND : SYMM__MOE_AT_DISPATCH_SEND;
    int want = (flags & SYMM_MOE_SEND) ? first : first + 1;
    /* a dispatch may skip the combine of the one before: no buffer a dispatch
     * reuses waits on a combine (moe_ll.cuh, moe_k_ht.cu) */
    int skips = !combine && (flags & SYMM_MOE_SEND) && at == SYMM__MOE_AT_COMBINE_SEND;
    symm_status_t st = symm__moe_check_flags(call, flags);
    if (st != SYMM_SUCCESS)
        return st;
    if (at != want && !skips)
        return BAD("%s: out of order: the handle expects %s next (calls go dispatch send, dispatch recv, "
                   "combine send, combine recv, dispatch ...; a dispatch may follow a dispatch whose combine "
                   "is skipped)", call, step_name(at));
    *next = (flags & SYMM_MOE_RECV) ? (first + 2) % 4 : first + 1;
    return SYMM_SUCCESS;
}

/* ---- per-call checks ---------------------------------------------------------------- */

static symm_status_t check_row(const char *call, const char *what, int64_t stride, size_t hidden) {
    if (stride < (int64_t)hidden)
        return BAD("%s: %s row stride %" PRId64 " is below hidden_dim %zu (rows would overlap; the hidden "
                   "dimension must be contiguous)", call, what, stride, hidden);
    return SYMM_SUCCESS;
}

static symm_status_t check_x_dtype(const char *call, const char *what, const symm_moe_config_t *cfg,
                                   symm_dtype_t dtype, uint32_t *esz) {
    uint32_t s = symm__moe_dtype_size(dtype);
    if (s == 0)
        return BAD("%s: %s dtype %d is not a symm_dtype_t", call, what, (int)dtype);
    if ((size_t)s * cfg->hidden_dim != cfg->hidden_dim_bytes)
        return BAD("%s: %s has %u-byte elements: hidden_dim %zu x %u = %zu bytes, but the handle was made for "
                   "hidden_dim_bytes %zu", call, what, s, cfg->hidden_dim, s, (size_t)s * cfg->hidden_dim,
                   cfg->hidden_dim_bytes);
    *esz = s;
    return SYMM_SUCCESS;
}

/* `in` is read only for `tokens` rows: with none it may be NULL (an empty
 * tensor's data pointer often is). */
static symm_status_t check_scales(const char *call, const symm_moe_config_t *cfg, const void *in,
                                  const char *in_name, size_t tokens, const void *out, const char *out_name) {
    int want = cfg->hidden_dim_scale_bytes > 0;
    if (want && ((in == NULL && tokens > 0) || (out_name && out == NULL)))
        return BAD("%s: the handle has scales (hidden_dim_scale_bytes %zu): %s%s%s must be given", call,
                   cfg->hidden_dim_scale_bytes, in_name, out_name ? " and " : "", out_name ? out_name : "");
    if (!want && (in != NULL || out != NULL))
        return BAD("%s: the handle has no scales (hidden_dim_scale_bytes 0): %s%s%s must be NULL", call, in_name,
                   out_name ? " and " : "", out_name ? out_name : "");
    return SYMM_SUCCESS;
}

static int negative(const int64_t *s, int n) {
    for (int i = 0; i < n; i++)
        if (s[i] < 0)
            return 1;
    return 0;
}

symm_status_t symm__moe_check_dispatch(const symm_moe_config_t *cfg, const symm__moe_geom_t *g,
                                       const symm_moe_dispatch_args_t *x, symm__moe_kargs_t *a) {
    const char *call = "symm_moe_dispatch";
    symm_status_t st;
    uint32_t esz = 0; /* set by check_x_dtype; the zero keeps gcc -O3 -Werror quiet */
    if (x == NULL)
        return BAD("%s: args is NULL", call);
    if (cfg->mode != SYMM_MOE_LOW_LATENCY)
        return BAD("%s: the handle is in the high-throughput mode (use symm_moe_ht_dispatch)", call);
    if (x->num_tokens > cfg->max_num_tokens)
        return BAD("%s: num_tokens %zu is above max_num_tokens %zu", call, x->num_tokens, cfg->max_num_tokens);
    if ((st = check_x_dtype(call, "dp_x", cfg, x->x_dtype, &esz)) != SYMM_SUCCESS)
        return st;
    if (x->out_expert_num_tokens == NULL || x->out_expert_x == NULL)
        return BAD("%s: out_expert_num_tokens and out_expert_x must be given", call);
    if (x->out_expert_rows < g->rows)
        return BAD("%s: out_expert_x has %zu rows per expert; it needs max_num_tokens x DP groups = %u", call,
                   x->out_expert_rows, g->rows);
    if ((st = check_row(call, "out_expert_x", x->out_expert_x_stride[1], cfg->hidden_dim)) != SYMM_SUCCESS)
        return st;
    if (x->out_expert_x_stride[0] < (int64_t)(x->out_expert_rows - 1) * x->out_expert_x_stride[1] +
                                        (int64_t)cfg->hidden_dim)
        return BAD("%s: out_expert_x expert stride %" PRId64 " is too small for %zu rows of stride %" PRId64, call,
                   x->out_expert_x_stride[0], x->out_expert_rows, x->out_expert_x_stride[1]);
    if ((st = check_scales(call, cfg, x->dp_x_scale, "dp_x_scale", x->num_tokens, x->out_expert_x_scale,
                           "out_expert_x_scale")) != SYMM_SUCCESS)
        return st;
    if (negative(x->out_expert_x_scale_stride, 3) || negative(x->dp_x_scale_stride, 2))
        return BAD("%s: a scale stride is negative", call);
    if (x->num_tokens > 0 && (x->dp_x == NULL || x->indices == NULL))
        return BAD("%s: dp_x and indices must be given for %zu tokens", call, x->num_tokens);
    if (x->num_tokens > 0 && (st = check_row(call, "dp_x", x->dp_x_stride, cfg->hidden_dim)) != SYMM_SUCCESS)
        return st;
    a->num_tokens = x->num_tokens;
    a->bound = x->bound_m;
    a->x = x->dp_x;
    a->x_stride = x->dp_x_stride;
    a->x_esz = esz;
    a->x_scale = x->dp_x_scale;
    a->xs_stride[0] = x->dp_x_scale_stride[0];
    a->xs_stride[1] = x->dp_x_scale_stride[1];
    a->idx = x->indices;
    a->idx_kind = 0;
    a->out_num = x->out_expert_num_tokens;
    a->out_x = x->out_expert_x;
    a->ox_stride[0] = x->out_expert_x_stride[0];
    a->ox_stride[1] = x->out_expert_x_stride[1];
    a->out_rows = x->out_expert_rows;
    a->out_scale = x->out_expert_x_scale;
    memcpy(a->os_stride, x->out_expert_x_scale_stride, sizeof(a->os_stride));
    return SYMM_SUCCESS;
}

static symm_status_t check_out_kind(const char *call, const char *what, symm_dtype_t d) {
    if (d != SYMM_DTYPE_BF16 && d != SYMM_DTYPE_F16)
        return BAD("%s: %s dtype %d: expected bf16 (%d) or f16 (%d)", call, what, (int)d, SYMM_DTYPE_BF16,
                   SYMM_DTYPE_F16);
    return SYMM_SUCCESS;
}

symm_status_t symm__moe_check_combine(const symm_moe_config_t *cfg, const symm__moe_geom_t *g,
                                      const symm_moe_combine_args_t *x, symm__moe_kargs_t *a) {
    const char *call = "symm_moe_combine";
    symm_status_t st;
    if (x == NULL)
        return BAD("%s: args is NULL", call);
    if (cfg->mode != SYMM_MOE_LOW_LATENCY)
        return BAD("%s: the handle is in the high-throughput mode (use symm_moe_ht_combine)", call);
    if (x->num_tokens > cfg->max_num_tokens)
        return BAD("%s: num_tokens %zu is above max_num_tokens %zu", call, x->num_tokens, cfg->max_num_tokens);
    if ((st = check_out_kind(call, "out_tokens", x->out_dtype)) != SYMM_SUCCESS)
        return st;
    if (x->y_dtype != SYMM_DTYPE_F32 && x->y_dtype != SYMM_DTYPE_BF16 && x->y_dtype != SYMM_DTYPE_F16)
        return BAD("%s: expert_y dtype %d: expected f32 (%d), bf16 (%d) or f16 (%d)", call, (int)x->y_dtype,
                   SYMM_DTYPE_F32, SYMM_DTYPE_BF16, SYMM_DTYPE_F16);
    if (x->expert_y == NULL)
        return BAD("%s: expert_y must be given", call);
    if (x->expert_y_rows < g->rows)
        return BAD("%s: expert_y has %zu rows per expert; it needs max_num_tokens x DP groups = %u", call,
                   x->expert_y_rows, g->rows);
    if ((st = check_row(call, "expert_y", x->expert_y_stride[1], cfg->hidden_dim)) != SYMM_SUCCESS)
        return st;
    if (x->expert_y_stride[0] < (int64_t)(x->expert_y_rows - 1) * x->expert_y_stride[1] + (int64_t)cfg->hidden_dim)
        return BAD("%s: expert_y expert stride %" PRId64 " is too small for %zu rows of stride %" PRId64, call,
                   x->expert_y_stride[0], x->expert_y_rows, x->expert_y_stride[1]);
    if (x->num_tokens > 0) {
        if (x->out_tokens == NULL || x->indices == NULL || x->weights == NULL)
            return BAD("%s: out_tokens, indices and weights must be given for %zu tokens", call, x->num_tokens);
        if (x->out_rows < x->num_tokens)
            return BAD("%s: out_tokens has %zu rows, below num_tokens %zu", call, x->out_rows, x->num_tokens);
        if ((st = check_row(call, "out_tokens", x->out_stride, cfg->hidden_dim)) != SYMM_SUCCESS)
            return st;
    }
    a->num_tokens = x->num_tokens;
    a->bound = x->bound_m;
    a->idx = x->indices;
    a->idx_kind = 0;
    a->weights = x->weights;
    a->y = x->expert_y;
    a->y_stride[0] = x->expert_y_stride[0];
    a->y_stride[1] = x->expert_y_stride[1];
    a->y_rows = x->expert_y_rows;
    a->y_kind = (uint32_t)x->y_dtype;
    a->out = x->out_tokens;
    a->out_stride = x->out_stride;
    a->out_kind = (uint32_t)x->out_dtype;
    return SYMM_SUCCESS;
}

symm_status_t symm__moe_check_ht_indices(const char *call, const symm_moe_config_t *cfg, const void *indices,
                                         symm_dtype_t dtype, size_t num_tokens, symm__moe_kargs_t *a) {
    if (cfg->mode != SYMM_MOE_HIGH_THROUGHPUT)
        return BAD("%s: the handle is in the low-latency mode (use symm_moe_dispatch / symm_moe_combine)", call);
    if (num_tokens > cfg->max_num_tokens)
        return BAD("%s: num_tokens %zu is above max_num_tokens %zu", call, num_tokens, cfg->max_num_tokens);
    switch (dtype) {
    case SYMM_DTYPE_U32: a->idx_kind = 0; break;
    case SYMM_DTYPE_I32: a->idx_kind = 1; break;
    case SYMM_DTYPE_I64: a->idx_kind = 2; break;
    default:
        return BAD("%s: indices dtype %d: expected int32 (%d), uint32 (%d) or int64 (%d)", call, (int)dtype,
                   SYMM_DTYPE_I32, SYMM_DTYPE_U32, SYMM_DTYPE_I64);
    }
    if (num_tokens > 0 && indices == NULL)
        return BAD("%s: indices must be given for %zu tokens", call, num_tokens);
    a->idx = indices;
    a->num_tokens = num_tokens;
    return SYMM_SUCCESS;
}

symm_status_t symm__moe_check_ht_dispatch(const symm_moe_config_t *cfg, const symm__moe_geom_t *g,
                                          const symm_moe_ht_dispatch_args_t *x, symm__moe_kargs_t *a) {
    const char *call = "symm_moe_ht_dispatch";
    symm_status_t st;
    uint32_t esz = 0;
    (void)g;
    if (x == NULL)
        return BAD("%s: args is NULL", call);
    if ((st = symm__moe_check_ht_indices(call, cfg, x->indices, x->indices_dtype, x->num_tokens, a)) !=
        SYMM_SUCCESS)
        return st;
    if ((st = check_x_dtype(call, "x", cfg, x->x_dtype, &esz)) != SYMM_SUCCESS)
        return st;
    if ((st = check_scales(call, cfg, x->x_scale, "x_scale", x->num_tokens, NULL, NULL)) != SYMM_SUCCESS)
        return st;
    if (negative(x->x_scale_stride, 2))
        return BAD("%s: a scale stride is negative", call);
    if (x->num_tokens > 0) {
        if (x->x == NULL)
            return BAD("%s: x must be given for %zu tokens", call, x->num_tokens);
        if ((st = check_row(call, "x", x->x_stride, cfg->hidden_dim)) != SYMM_SUCCESS)
            return st;
    }
    a->x = x->x;
    a->x_stride = x->x_stride;
    a->x_esz = esz;
    a->x_scale = x->x_scale;
    a->xs_stride[0] = x->x_scale_stride[0];
    a->xs_stride[1] = x->x_scale_stride[1];
    a->weights = x->weights;
    return SYMM_SUCCESS;
}

void symm__moe_ht_into_bytes(const symm_moe_config_t *cfg, const symm__moe_geom_t *g, size_t *x_bytes,
                             size_t *scale_bytes) {
    *x_bytes = (size_t)g->cap * cfg->hidden_dim_bytes;
    *scale_bytes = (size_t)g->cap * g->scale_cols * 4u;
}

/* [a, a + an) and [b, b + bn) share a byte. */
static int overlap(uintptr_t a, size_t an, uintptr_t b, size_t bn) { return an && bn && a < b + bn && b < a + an; }

symm_status_t symm__moe_check_ht_into(const char *call, const symm_moe_config_t *cfg, const symm__moe_geom_t *g,
                                      uintptr_t base, const void *recv_x, const void *recv_x_scale, int x_in_heap,
                                      int s_in_heap, symm__moe_kargs_t *a) {
    const uintptr_t x = (uintptr_t)recv_x, s = (uintptr_t)recv_x_scale;
    const uintptr_t own_x = base + g->lay.ht_rx, own_s = base + g->lay.ht_rscale;
    size_t xb, sb;
    symm__moe_ht_into_bytes(cfg, g, &xb, &sb);
    if (recv_x != NULL) {
        if (x % 16u)
            return BAD("%s: recv_x %p is not 16-byte aligned", call, recv_x);
        if (!x_in_heap)
            return BAD("%s: recv_x %p is not %zu bytes inside one block of the symmetric heap (capacity %u rows "
                       "x %zu bytes; allocate it with symm_malloc: the peers store into it)", call, recv_x, xb, g->cap,
                       cfg->hidden_dim_bytes);
        if (x != own_x && overlap(x, xb, base, (size_t)g->lay.total))
            return BAD("%s: recv_x %p overlaps the handle's own buffers", call, recv_x);
    }
    if (recv_x_scale != NULL) {
        if (g->scale_cols == 0)
            return BAD("%s: recv_x_scale is given but the handle carries no scales (hidden_dim_scale_bytes 0)",
                       call);
        if (s % 16u)
            return BAD("%s: recv_x_scale %p is not 16-byte aligned", call, recv_x_scale);
        if (!s_in_heap)
            return BAD("%s: recv_x_scale %p is not %zu bytes inside one block of the symmetric heap (capacity %u "
                       "rows x %u float32 scales; allocate it with symm_malloc)", call, recv_x_scale, sb, g->cap,
                       g->scale_cols);
        if (s != own_s && overlap(s, sb, base, (size_t)g->lay.total))
            return BAD("%s: recv_x_scale %p overlaps the handle's own buffers", call, recv_x_scale);
    }
    if (overlap(recv_x ? x : own_x, xb, recv_x_scale ? s : own_s, sb))
        return BAD("%s: recv_x and recv_x_scale overlap", call);
    a->ht_rx_at = (int64_t)((recv_x ? x : own_x) - base);
    a->ht_rs_at = (int64_t)((recv_x_scale ? s : own_s) - base);
    return SYMM_SUCCESS;
}

symm_status_t symm__moe_check_ht_combine(const symm_moe_config_t *cfg, const void *y, symm_dtype_t y_dtype,
                                         int64_t y_stride, size_t y_rows, void *out, symm_dtype_t out_dtype,
                                         int64_t out_stride, size_t out_rows, size_t num_tokens,
                                         symm__moe_kargs_t *a) {
    const char *call = "symm_moe_ht_combine";
    symm_status_t st;
    if (cfg->mode != SYMM_MOE_HIGH_THROUGHPUT)
        return BAD("%s: the handle is in the low-latency mode (use symm_moe_combine)", call);
    if ((st = check_out_kind(call, "y", y_dtype)) != SYMM_SUCCESS ||
        (st = check_out_kind(call, "out", out_dtype)) != SYMM_SUCCESS)
        return st;
    if (y == NULL && y_rows > 0)
        return BAD("%s: y is NULL with %zu rows", call, y_rows);
    if (y_rows > 0 && (st = check_row(call, "y", y_stride, cfg->hidden_dim)) != SYMM_SUCCESS)
        return st;
    if (num_tokens > 0) {
        if (out == NULL)
            return BAD("%s: out must be given for the %zu tokens of the dispatch", call, num_tokens);
        if (out_rows < num_tokens)
            return BAD("%s: out has %zu rows, below the dispatch's num_tokens %zu", call, out_rows, num_tokens);
        if ((st = check_row(call, "out", out_stride, cfg->hidden_dim)) != SYMM_SUCCESS)
            return st;
    }
    a->num_tokens = num_tokens;
    a->y = y;
    a->y_stride[0] = 0;
    a->y_stride[1] = y_stride;
    a->y_rows = y_rows;
    a->y_kind = (uint32_t)y_dtype;
    a->out = out;
    a->out_stride = out_stride;
    a->out_kind = (uint32_t)out_dtype;
    return SYMM_SUCCESS;
}

/* One float32 matrix of the combine's side channel: given, 4-byte aligned, rows of `cols` apart. */
static symm_status_t check_fmat(const char *call, const char *what, const void *p, int64_t stride, size_t cols,
                                size_t rows) {
    if (p == NULL)
        return BAD("%s: %s is NULL with %zu values per row", call, what, cols);
    if ((uintptr_t)p % 4u)
        return BAD("%s: %s %p is not 4-byte aligned (float32)", call, what, p);
    if (stride < (int64_t)cols || (uint64_t)stride * rows * 4u > BYTES_LIMIT)
        return BAD("%s: %s row stride %" PRId64 " is below its %zu values per row (rows would overlap) or past "
                   "any buffer", call, what, stride, cols);
    return SYMM_SUCCESS;
}

symm_status_t symm__moe_check_ht_weights(const symm_moe_config_t *cfg, const symm_moe_ht_weights_t *w, int flags,
                                         symm__moe_kargs_t *a) {
    const char *call = "symm_moe_ht_combine_weights";
    symm_status_t st;
    a->w_cols = 0;
    if (w == NULL || w->cols == 0)
        return SYMM_SUCCESS;
    if (w->cols > cfg->experts_per_token)
        return BAD("%s: weights.cols %zu is above experts_per_token %zu (the handle keeps that many values per "
                   "row)", call, w->cols, cfg->experts_per_token);
    if ((flags & SYMM_MOE_SEND) && a->y_rows > 0) {
        if (w->w_rows < a->y_rows)
            return BAD("%s: weights.w has %zu rows, below y's %" PRIu64 " (row i goes back with y[i])", call,
                       w->w_rows, a->y_rows);
        if ((st = check_fmat(call, "weights.w", w->w, w->w_stride, w->cols, w->w_rows)) != SYMM_SUCCESS)
            return st;
    }
    if ((flags & SYMM_MOE_RECV) && a->num_tokens > 0) {
        if (w->out_w_rows < a->num_tokens)
            return BAD("%s: weights.out_w has %zu rows, below the dispatch's num_tokens %" PRIu64, call,
                       w->out_w_rows, a->num_tokens);
        if ((st = check_fmat(call, "weights.out_w", w->out_w, w->out_w_stride, w->cols, w->out_w_rows)) !=
            SYMM_SUCCESS)
            return st;
    }
    a->w = w->w;
    a->w_stride = w->w_stride;
    a->w_rows = a->y_rows > 0 ? w->w_rows : 0; /* no y, no rows of w to read (w may be NULL) */
    a->out_w = w->out_w;
    a->ow_stride = w->out_w_stride;
    a->w_cols = (uint32_t)w->cols;
    return SYMM_SUCCESS;
}

/* ---- device-recorded errors ------------------------------------------------------------ */

static const char *kernel_name(uint32_t k) {
    switch (k) {
    case SYMM__MK_LL_DISPATCH: return "symm_moe_dispatch";
    case SYMM__MK_LL_COMBINE: return "symm_moe_combine";
    case SYMM__MK_HT_LAYOUT: return "symm_moe_ht_layout";
    case SYMM__MK_HT_DISPATCH: return "symm_moe_ht_dispatch";
    default: return "symm_moe_ht_combine";
    }
}

void symm__moe_err_message(const symm__moe_err_t *e, const symm_moe_config_t *cfg, char *buf, size_t len) {
    const char *k = kernel_name(e->call);
    switch (e->code) {
    case SYMM__MOE_ERR_EXPERT_RANGE:
        snprintf(buf, len, "%s: indices[%" PRId64 "][%" PRId64 "] = %" PRId64 " is outside [0, num_experts %zu)%s; "
                 "the route was skipped (found on the device)", k, e->a, e->b, e->c, cfg->num_experts,
                 cfg->mode == SYMM_MOE_HIGH_THROUGHPUT ? " and is not -1" : "");
        break;
    case SYMM__MOE_ERR_EXPERT_DUP:
        snprintf(buf, len, "%s: indices[%" PRId64 "][%" PRId64 "] = %" PRId64 " repeats an earlier expert of the "
                 "same token; the repeat was skipped (found on the device)", k, e->a, e->b, e->c);
        break;
    case SYMM__MOE_ERR_BOUND:
        snprintf(buf, len, "%s: bound_m = %" PRId64 " is above num_tokens %" PRId64 " (num_tokens was used; found "
                 "on the device)", k, e->a, e->b);
        break;
    case SYMM__MOE_ERR_CAPACITY:
        snprintf(buf, len, "%s: %" PRId64 " rows to receive, above max_recv_tokens %" PRId64 "; the rows past it "
                 "were dropped (found on the device)", k, e->a, e->b);
        break;
    case SYMM__MOE_ERR_Y_ROWS:
        snprintf(buf, len, "%s: %" PRId64 " rows were received, but y has %" PRId64 "; the rows past it were "
                 "not sent (found on the device)", k, e->a, e->b);
        break;
    default:
        snprintf(buf, len, "%s: the device recorded error code %u", k, e->code);
        break;
    }
}
