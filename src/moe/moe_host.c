/*
 * moe_host.c - the MoE token exchange of symm_moe.h: handles, the call
 * order, argument checks (moe_args.c), device-recorded errors, launches
 * (moe_launch.h; kernels in moe_k_ll_*.cu and moe_k_ht.cu).
 *
 * A handle owns one symmetric allocation laid out by symm__moe_geom
 * (moe_launch.h lists the regions). Its synchronisation words count
 * dispatches (the epoch, kept on the device), so nothing is reset between
 * calls and a captured graph replays.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symm/symm_moe.h"
#include "core/env.h"
#include "core/log.h"
#include "heap/heap.h"
#include "runtime/team.h"
#include "moe/moe.h"
#include "moe/moe_recv_copy.h"

struct symm_moe {
    symm_moe_config_t cfg;
    symm__moe_geom_t g;
    symm_team_t team;
    symm_ctx_t ctx;
    int me;
    char *base;            /* the symmetric region */
    symm__moe_err_t *err;  /* host-mapped */
    uint64_t err_dev;
    int step;              /* enum symm__moe_step */
    size_t ht_tokens;      /* num_tokens of the last high-throughput dispatch */
    void *ht_into_x;       /* its receive buffers (symm_moe_ht_dispatch_into; NULL: the handle's) */
    float *ht_into_s;
    size_t ht_wcols;       /* the side channel's cols of the last combine's send half (0: none) */
    int share;             /* SMs a waiting grid of this PE may fill */
    int sms;               /* the SM budget: most blocks of any kernel */
    int sms_set;           /* 0: sms is the default */
    int ht_sched;          /* SYMM_MOE_HT_COMBINE: enum symm__moe_ht_sched, or -1: by the grid (auto) */
    int ht_send_warps;     /* overlap: warps of a block that send */
    int ht_pull_stages;    /* pull: stages of each reducing warp (what fits the GPU of pull:S) */
    int ht_pull_lanes;     /* pull-lanes: each lane copies its own vectors (cp.async), not bulk copies */
    int ht_dwarps;         /* SYMM_MOE_HT_DISPATCH: 1 warps, 0 batches */
    int ll_probe;          /* SYMM_MOE_LL_PROBE (enum symm__moe_probe) */
    int pdl;               /* SYMM_MOE_PDL, where the device has it: the low-latency kernels' launches */
    int ll_small;          /* the small low-latency kernels: the geometry allows them, SYMM_MOE_LL_SMALL is on and
                              SYMM_MOE_LL_PROBE is not twice */
    int ll_part;           /* the low-latency combine sums on the experts' side (SYMM_MOE_LL_COMBINE, symm__moe_ll_part) */
    int no_launch;         /* SYMM_MOE_NO_LAUNCH: low-latency calls check and fill their arguments, launch nothing */
    symm__moe_kargs_t tmpl; /* the kernels' per-handle arguments, filled once at create (begin copies them) */
};

static void fill_template(symm_moe_t *h);

static uint64_t cdiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* Blocks for kernel k with `flags`: what its work can use, at most the
 * budget. Every grid fits the SMs the PE may fill, one block per SM, so all
 * of its blocks run at once: a block may wait for peers whose progress
 * depends on their grids having all started. */
static int grid(const symm_moe_t *h, symm__mk_t k, int flags) {
    const symm__moe_geom_t *g = &h->g;
    const uint64_t M = h->cfg.max_num_tokens, K = h->cfg.experts_per_token, E = h->cfg.num_experts;
    const uint64_t n = (uint64_t)g->n;
    uint64_t want = 1, rows_max;
    switch (k) {
    case SYMM__MK_LL_DISPATCH:
        /* a warp per expert's list, a block per token sent, a block per route received at most */
        rows_max = n * g->local;
        if (rows_max > (uint64_t)g->groups * M * K)
            rows_max = (uint64_t)g->groups * M * K;
        if (h->ll_small) {
            /* the small path: a block per route received, or per token sent besides the header's */
            want = rows_max > g->cap + 1u ? rows_max : g->cap + 1u;
            break;
        }
        want = cdiv(E, SYMM__MOE_WARPS);
        if (want < g->cap)
            want = g->cap;
        if (want < rows_max)
            want = rows_max;
        break;
    case SYMM__MK_LL_COMBINE:
        rows_max = (uint64_t)g->local * g->rows;
        if (rows_max > (uint64_t)g->groups * M * K)
            rows_max = (uint64_t)g->groups * M * K;
        want = rows_max > M ? rows_max : M;
        /* rows that may go back as packets are sent in slices by two blocks or more each */
        if (M <= g->pmt && want < 2 * rows_max)
            want = 2 * rows_max;
        break;
    case SYMM__MK_HT_LAYOUT: want = 1; break;
    case SYMM__MK_HT_DISPATCH: want = (flags & SYMM_MOE_SEND) ? cdiv(M, SYMM__MOE_HT_BLOCK_TOKENS) : 1; break;
    default: want = 2 * cdiv(M * n, SYMM__MOE_HT_CHUNK); break;
    }
    if (want < 1)
        want = 1;
    return want > (uint64_t)h->sms ? h->sms : (int)want;
}

/* The fields every PE must agree on, named for the mismatch message. */
#define CFG_FIELDS(X)                                                                                 \
    X(mode) X(max_num_tokens) X(num_experts) X(experts_per_token) X(hidden_dim) X(hidden_dim_bytes) \
    X(hidden_dim_scale_bytes) X(dp_size) X(max_recv_tokens)

typedef struct cfg_words {
#define W(f) uint64_t f;
    CFG_FIELDS(W)
#undef W
    uint64_t packets; /* SYMM_MOE_PACKETS: it sizes the packet regions, so the layout */
    uint64_t probe;   /* SYMM_MOE_LL_PROBE (+1; 0: a value it does not take): a PE's cut kernels hang the others */
    uint64_t small;   /* SYMM_MOE_LL_SMALL: the small kernels' protocol differs from the general one */
    uint64_t pull;    /* SYMM_MOE_HT_COMBINE is pull: the combine's protocol differs from the push schedules' */
    uint64_t llc;     /* SYMM_MOE_LL_COMBINE (+1; 0: a value it does not take): the partial combine's protocol differs */
} cfg_words_t;

static const char *probe_name(uint64_t w) {
    switch (w) {
    case SYMM__MOE_PROBE_NONE + 1: return "unset";
    case SYMM__MOE_PROBE_EMPTY + 1: return "empty";
    case SYMM__MOE_PROBE_HOP + 1: return "hop";
    case SYMM__MOE_PROBE_STAMPS + 1: return "stamps";
    case SYMM__MOE_PROBE_TWICE + 1: return "twice";
    default: return "not a probe";
    }
}

/* Is SYMM_MOE_HT_COMBINE the pull protocol: pull[:S] or pull-lanes[:S] (S checked
 * later)? Returns the length of the name before ":S", else 0. */
static int ht_combine_is_pull(void) {
    const char *v = symm__env()->moe_ht_combine;
    const int n = strncmp(v, "pull-lanes", 10) == 0 ? 10 : strncmp(v, "pull", 4) == 0 ? 4 : 0;
    return n && (v[n] == '\0' || v[n] == ':') ? n : 0;
}

static symm_status_t same_everywhere(const symm_moe_config_t *cfg, int packets, int probe, int llc) {
    cfg_words_t mine, *all;
    int n = symm_n_pes();
    symm_status_t st;
#define W(f) mine.f = (uint64_t)cfg->f;
    CFG_FIELDS(W)
#undef W
    mine.packets = (uint64_t)packets;
    mine.probe = (uint64_t)(probe + 1);
    mine.small = symm__env()->moe_ll_small ? 1u : 0u;
    mine.pull = ht_combine_is_pull() ? 1u : 0u;
    mine.llc = (uint64_t)(llc + 1);
    all = (cfg_words_t *)calloc((size_t)n, sizeof(*all));
    if (all == NULL)
        return symm__error(SYMM_ERR_NO_MEMORY, "symm_moe_create: out of host memory");
    if ((st = symm_host_allgather(&mine, all, sizeof(mine))) != SYMM_SUCCESS) {
        free(all);
        return st;
    }
    for (int p = 0; p < n; p++) {
#define W(f)                                                                                               \
        if (all[p].f != all[0].f) {                                                                        \
            st = symm__error(SYMM_ERR_MISMATCH, "symm_moe_create: " #f " is %llu on PE 0 but %llu on PE %d", \
                             (unsigned long long)all[0].f, (unsigned long long)all[p].f, p);               \
            break;                                                                                         \
        }
        CFG_FIELDS(W)
#undef W
        if (st == SYMM_SUCCESS && all[p].packets != all[0].packets)
            st = symm__error(SYMM_ERR_MISMATCH, "symm_moe_create: SYMM_MOE_PACKETS is %s on PE 0 but %s on PE %d "
                             "(it sizes the handle's memory: set it alike everywhere)",
                             symm__moe_packets_name((int)all[0].packets), symm__moe_packets_name((int)all[p].packets),
                             p);
        if (st == SYMM_SUCCESS && all[p].probe != all[0].probe)
            st = symm__error(SYMM_ERR_MISMATCH, "symm_moe_create: SYMM_MOE_LL_PROBE is %s on PE 0 but %s on PE %d "
                             "(set it alike everywhere)", probe_name(all[0].probe), probe_name(all[p].probe), p);
        if (st == SYMM_SUCCESS && all[p].small != all[0].small)
            st = symm__error(SYMM_ERR_MISMATCH, "symm_moe_create: SYMM_MOE_LL_SMALL is %llu on PE 0 but %llu on PE %d "
                             "(the small kernels speak another protocol: set it alike everywhere)",
                             (unsigned long long)all[0].small, (unsigned long long)all[p].small, p);
        if (st == SYMM_SUCCESS && all[p].pull != all[0].pull)
            st = symm__error(SYMM_ERR_MISMATCH, "symm_moe_create: SYMM_MOE_HT_COMBINE is %s on PE 0 but %s on PE %d "
                             "(pull speaks another protocol than the other schedules: set pull on every PE or on "
                             "none)", all[0].pull ? "pull" : "not pull", all[p].pull ? "pull" : "not pull", p);
        if (st == SYMM_SUCCESS && all[p].llc != all[0].llc)
            st = symm__error(SYMM_ERR_MISMATCH, "symm_moe_create: SYMM_MOE_LL_COMBINE is %s on PE 0 but %s on PE %d "
                             "(partial speaks another protocol than rows: set it alike everywhere)",
                             all[0].llc ? symm__moe_ll_combine_name((int)all[0].llc - 1) : "not a mode",
                             all[p].llc ? symm__moe_ll_combine_name((int)all[p].llc - 1) : "not a mode", p);
        if (st != SYMM_SUCCESS)
            break;
    }
    free(all);
    return st;
}

/* The sending warps of an overlap block (of 16): the fastest measured at 24 SMs,
 * 3 on 2 PEs (half the rows leave the GPU) and 6 on 4 (three quarters do; 6 also
 * wins with every SM there). 3 PEs and 5+ are unmeasured (docs/moe.md). */
static int ht_send_warps_for(int npes) {
    return npes <= 2 ? 3 : 6;
}

/* SYMM_MOE_HT_COMBINE: a PE's choice changes only how its own blocks share the
 * work, so PEs need not agree on it, pull excepted (same_everywhere checks it;
 * pull and pull-lanes speak the same protocol). ":S" after overlap sets the
 * sending warps of each block (1..SYMM__MOE_WARPS - 1; default
 * ht_send_warps_for); after pull, the stages of each reducing warp
 * (1..SYMM__MOE_HT_PULL_MAX_STAGES, default 4). */
static symm_status_t ht_combine_schedule(const char *call, int npes, int *sched, int *send_warps, int *stages,
                                         int *lanes) {
    const char *v = symm__env()->moe_ht_combine, *w;
    *send_warps = ht_send_warps_for(npes);
    *stages = 4;
    *lanes = 0;
    if (strcmp(v, "auto") == 0) {
        *sched = -1;
    } else if (strcmp(v, "split") == 0) {
        *sched = SYMM__MOE_HT_SPLIT;
    } else if (strcmp(v, "serial") == 0) {
        *sched = SYMM__MOE_HT_SERIAL;
    } else if (strcmp(v, "serial-warps") == 0) {
        *sched = SYMM__MOE_HT_SERIAL_WARPS;
    } else if (ht_combine_is_pull()) {
        const int k = ht_combine_is_pull();
        *sched = SYMM__MOE_HT_PULL;
        *lanes = k == 10;
        if (v[k] == ':') {
            char *end = NULL;
            long s = strtol(v + k + 1, &end, 10);
            if (end == v + k + 1 || *end != '\0' || s < 1 || s > SYMM__MOE_HT_PULL_MAX_STAGES)
                goto bad;
            *stages = (int)s;
        }
    } else if (strncmp(v, "overlap", 7) == 0) {
        w = v + 7;
        *sched = strncmp(w, "-async", 6) == 0  ? SYMM__MOE_HT_OVERLAP_ASYNC
                 : strncmp(w, "-ring", 5) == 0 ? SYMM__MOE_HT_OVERLAP_RING
                                               : SYMM__MOE_HT_OVERLAP;
        w += *sched == SYMM__MOE_HT_OVERLAP_ASYNC ? 6 : *sched == SYMM__MOE_HT_OVERLAP_RING ? 5 : 0;
        if (*w == ':') {
            char *end = NULL;
            long s = strtol(w + 1, &end, 10);
            if (end == w + 1 || *end != '\0' || s < 1 || s > SYMM__MOE_WARPS - 1)
                goto bad;
            *send_warps = (int)s;
        } else if (*w != '\0') {
            goto bad;
        }
    } else {
        goto bad;
    }
    return SYMM_SUCCESS;

bad:
    return symm__error(SYMM_ERR_INVALID_ARG, "%s: SYMM_MOE_HT_COMBINE is '%s'; it takes auto, split, serial, "
                       "serial-warps, overlap[:S], overlap-async[:S] or overlap-ring[:S] (S: the sending warps of a block, "
                       "1..%d), or pull[:S] or pull-lanes[:S] (S: the stages of a reducing warp, 1..%d)",
                       call, v, SYMM__MOE_WARPS - 1, SYMM__MOE_HT_PULL_MAX_STAGES);
}

/* SYMM_MOE_HT_DISPATCH: how a PE's own dispatch blocks send, so PEs need not agree on it. */
static symm_status_t ht_dispatch_form(const char *call, int *warps) {
    const char *v = symm__env()->moe_ht_dispatch;
    if (strcmp(v, "warps") != 0 && strcmp(v, "batches") != 0)
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: SYMM_MOE_HT_DISPATCH is '%s'; it takes warps or batches",
                           call, v);
    *warps = strcmp(v, "warps") == 0;
    return SYMM_SUCCESS;
}

/* SYMM_MOE_LL_PROBE: the low-latency kernels cut down or instrumented to time their parts. */
static symm_status_t ll_probe_mode(const char *call, int *probe) {
    const char *v = symm__env()->moe_ll_probe;
    if (v[0] != 0 && strcmp(v, "empty") != 0 && strcmp(v, "hop") != 0 && strcmp(v, "stamps") != 0 &&
        strcmp(v, "twice") != 0)
        return symm__error(SYMM_ERR_INVALID_ARG,
                           "%s: SYMM_MOE_LL_PROBE is '%s'; it takes empty, hop, stamps or twice (or unset)", call, v);
    *probe = !strcmp(v, "empty")    ? SYMM__MOE_PROBE_EMPTY
             : !strcmp(v, "hop")    ? SYMM__MOE_PROBE_HOP
             : !strcmp(v, "stamps") ? SYMM__MOE_PROBE_STAMPS
             : !strcmp(v, "twice")  ? SYMM__MOE_PROBE_TWICE
                                    : SYMM__MOE_PROBE_NONE;
    if (*probe != SYMM__MOE_PROBE_NONE)
        SYMM_LOG_WARN("%s: SYMM_MOE_LL_PROBE=%s: low-latency calls are instrumented or reduced for timing "
                      "(empty, hop: their results are wrong; twice: each dispatch kernel does its call twice)", call, v);
    return SYMM_SUCCESS;
}

/* auto: overlap (its sending warps by PE count, ht_send_warps_for), the fastest
 * schedule measured with 24 SMs and within 4% of the fastest with every SM
 * (2 H200s: 316 and 217 us against serial's 577 and split's 243; docs/moe.md). */
static int ht_sched_for(const symm_moe_t *h) {
    return h->ht_sched >= 0 ? h->ht_sched : SYMM__MOE_HT_OVERLAP;
}

symm_status_t symm_moe_create(const symm_moe_config_t *cfg, symm_team_t team, symm_moe_t **out) {
    const char *call = "symm_moe_create";
    symm_moe_t *h;
    symm_status_t st;
    void *base = NULL;
    int packets, llc = SYMM__MOE_LLC_ROWS;
    symm_status_t llc_st;
    symm__error_clear();
    if (!symm_initialized())
        return symm__error(SYMM_ERR_NOT_INITIALIZED, "%s: symm is not initialized", call);
    if (out == NULL)
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: the output handle pointer is NULL", call);
    if (team == NULL)
        team = symm_team_world();
    if (team != symm_team_world() && team != symm_team_node())
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: the team must be the world or the node team", call);
    if ((st = symm__moe_packets(call, &packets)) != SYMM_SUCCESS)
        return st;
    h = (symm_moe_t *)calloc(1, sizeof(*h));
    if (h == NULL)
        return symm__error(SYMM_ERR_NO_MEMORY, "%s: out of host memory", call);
    if ((st = symm__moe_geom(call, cfg, symm_team_n_pes(team), packets, &h->g)) != SYMM_SUCCESS)
        goto fail_handle;
    /* a bad SYMM_MOE_LL_PROBE is reported after the exchange, so no PE is left waiting in it */
    if (ll_probe_mode(call, &h->ll_probe) != SYMM_SUCCESS)
        h->ll_probe = -1;
    /* a bad SYMM_MOE_LL_COMBINE likewise */
    if ((llc_st = symm__moe_ll_combine_parse(call, symm__env()->moe_ll_combine, &llc)) != SYMM_SUCCESS)
        llc = -1;
    symm__error_clear();
    if ((st = same_everywhere(cfg, packets, h->ll_probe, llc)) != SYMM_SUCCESS)
        goto fail_handle;
    if (llc_st != SYMM_SUCCESS) {
        st = symm__moe_ll_combine_parse(call, symm__env()->moe_ll_combine, &llc);
        goto fail_handle;
    }
    if ((st = ht_combine_schedule(call, symm_team_n_pes(team), &h->ht_sched, &h->ht_send_warps,
                                   &h->ht_pull_stages, &h->ht_pull_lanes)) != SYMM_SUCCESS ||
        (st = ht_dispatch_form(call, &h->ht_dwarps)) != SYMM_SUCCESS)
        goto fail_handle;
    if (h->ll_probe < 0 && (st = ll_probe_mode(call, &h->ll_probe)) != SYMM_SUCCESS)
        goto fail_handle;
    if ((st = symm_team_ctx_copy(team, &h->ctx)) != SYMM_SUCCESS)
        goto fail_handle;
    if (!(symm__runtime_backend()->kernel_caps & SYMM__BE_KCAP_MOE)) {
        st = symm__error(SYMM_ERR_UNSUPPORTED, "%s: the MoE exchange needs the native backend (GPUs, every PE "
                         "by load/store); this is the %s backend", call, symm__runtime_backend()->name);
        goto fail_handle;
    }
    h->cfg = *cfg;
    h->team = team;
    h->me = symm_team_my_pe(team);
    /* zeroed on every PE before any returns: every epoch word starts at 0 */
    if ((st = symm_calloc(1, (size_t)h->g.lay.total, &base)) != SYMM_SUCCESS)
        goto fail_handle;
    h->base = (char *)base;
    if ((st = symm__moe_err_alloc(&h->err, &h->err_dev)) != SYMM_SUCCESS)
        goto fail_heap;
    if (symm_sm_share(&h->share) != SYMM_SUCCESS || h->share < 1) {
        symm__error_clear();
        h->share = symm__moe_sm_count();
    }
    h->sms = h->share;
    h->pdl = symm__env()->moe_pdl && symm__moe_pdl_supported();
    h->ll_small = h->g.ll_small && symm__env()->moe_ll_small && h->ll_probe != SYMM__MOE_PROBE_TWICE;
    h->ll_part = symm__moe_ll_part(cfg, &h->g, llc, h->ll_small);
    if ((h->ht_sched == SYMM__MOE_HT_OVERLAP_ASYNC || h->ht_sched == SYMM__MOE_HT_OVERLAP_RING) &&
        !symm__moe_ht_async_prepare(h->ht_sched, h->ht_send_warps)) {
        SYMM_LOG_INFO("%s: SYMM_MOE_HT_COMBINE=%s: its shared memory does not fit this GPU; overlap "
                      "instead", call, symm__env()->moe_ht_combine);
        h->ht_sched = SYMM__MOE_HT_OVERLAP;
    }
    if (h->ht_sched == SYMM__MOE_HT_PULL)
        h->ht_pull_stages = symm__moe_ht_pull_prepare(h->ht_pull_stages);
    h->no_launch = symm__env()->moe_no_launch;
    if (h->no_launch)
        SYMM_LOG_WARN("%s: SYMM_MOE_NO_LAUNCH=1: low-latency dispatch and combine enqueue no kernel (host-cost "
                      "timing only; their results are wrong)", call);
    fill_template(h);
    *out = h;
    return SYMM_SUCCESS;

fail_heap:
    symm_free(base);
fail_handle:
    free(h);
    return st;
}

symm_status_t symm_moe_destroy(symm_moe_t *h) {
    symm_status_t st = SYMM_SUCCESS;
    symm__error_clear();
    if (h == NULL)
        return SYMM_SUCCESS;
    if (symm_initialized())
        st = symm_free(h->base);
    symm__moe_err_free(h->err);
    free(h);
    return st;
}

size_t symm_moe_local_experts(const symm_moe_t *h) { return h ? h->g.local : 0; }

size_t symm_moe_first_expert(const symm_moe_t *h) { return h ? (size_t)h->g.local * (size_t)h->me : 0; }

/* ---- device-recorded errors ------------------------------------------------------------ */

/* Take the recorded error, if any: SYMM_ERR_INVALID_ARG with its message
 * (prefixed by `how`), and clear the record. */
static symm_status_t take_error(symm_moe_t *h, const char *how) {
    volatile symm__moe_err_t *e = h->err;
    symm__moe_err_t copy;
    char msg[512];
    if (e->code == 0)
        return SYMM_SUCCESS;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    copy = *(const symm__moe_err_t *)h->err;
    symm__moe_err_message(&copy, &h->cfg, msg, sizeof(msg));
    e->code = 0;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    e->claim = 0;
    return symm__error(SYMM_ERR_INVALID_ARG, "%s%s", how, msg);
}

symm_status_t symm_moe_check(symm_moe_t *h, symm_stream_t stream) {
    symm_status_t st;
    symm__error_clear();
    if (h == NULL)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_moe_check: the handle is NULL");
    if ((st = symm__moe_stream_sync(stream)) != SYMM_SUCCESS)
        return st;
    return take_error(h, "");
}

/* ---- the calls ------------------------------------------------------------------------- */

/* The arguments that depend only on the handle, so a call copies them in one
 * block instead of rebuilding them. */
static void fill_template(symm_moe_t *h) {
    symm__moe_kargs_t *a = &h->tmpl;
    memset(a, 0, sizeof(*a));
    a->ctx = h->ctx;
    a->base = (uint64_t)(uintptr_t)h->base;
    a->lay = h->g.lay;
    a->err = h->err_dev;
    a->me = h->me;
    a->n = h->g.n;
    a->dp = h->g.dp;
    a->experts = (uint32_t)h->cfg.num_experts;
    a->local = h->g.local;
    a->topk = (uint32_t)h->cfg.experts_per_token;
    a->hidden = (uint32_t)h->cfg.hidden_dim;
    a->max_tokens = (uint32_t)h->cfg.max_num_tokens;
    a->cap = h->g.cap;
    a->x_bytes = (uint32_t)h->cfg.hidden_dim_bytes;
    a->scale_cols = h->g.scale_cols;
    a->tok_stride = h->g.tok_stride;
    a->rows = h->g.rows;
    a->pcap = h->g.pcap;
    a->pmt = h->g.pmt;
    a->pkt = h->g.packets != SYMM__MOE_PKT_OFF;
    a->ll_small = (uint32_t)h->ll_small;
    a->ll_part = (uint32_t)h->ll_part;
    a->ht_send_warps = (uint32_t)h->ht_send_warps;
    a->ht_dwarps = (uint32_t)h->ht_dwarps;
    a->ht_pull_stages = (uint32_t)h->ht_pull_stages;
    a->ht_pull_lanes = (uint32_t)h->ht_pull_lanes;
}

static symm_status_t begin(const char *call, symm_moe_t *h, symm__moe_kargs_t *a) {
    symm__error_clear();
    if (h == NULL)
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: the handle is NULL", call);
    if (!symm_initialized())
        return symm__error(SYMM_ERR_NOT_INITIALIZED, "%s: symm is not initialized", call);
    memcpy(a, &h->tmpl, sizeof(*a));
    (void)symm_team_ctx_copy(h->team, &a->ctx); /* the live context: a device trace started since create */
    return SYMM_SUCCESS;
}

static symm_status_t launch(symm_moe_t *h, symm__moe_kargs_t *a, symm__mk_t k, int flags, symm_stream_t stream) {
    /* A combine's one-kernel schedules read this PE's own rows of y in place
     * with 16-byte loads; a y off that alignment (pointer or row stride) takes
     * the halves as two kernels, whose send half copies at any alignment. */
    if (k == SYMM__MK_HT_COMBINE && flags == SYMM_MOE_SEND_RECV && a->y_rows > 0 &&
        (((uintptr_t)a->y | (uintptr_t)(a->y_stride[1] * 2)) & 15u) != 0) {
        symm_status_t st = launch(h, a, k, SYMM_MOE_SEND, stream);
        return st != SYMM_SUCCESS ? st : launch(h, a, k, SYMM_MOE_RECV, stream);
    }
    a->kernel = (uint32_t)k;
    a->flags = (uint32_t)flags;
    a->nblocks = grid(h, k, flags);
    a->ht_sched = k == SYMM__MK_HT_COMBINE ? (uint32_t)ht_sched_for(h) : 0u;
    /* pull: the peers read this PE's y in place when it lies in the heap (else it pushes, as overlap) */
    a->ht_pull_y = a->ht_sched == SYMM__MOE_HT_PULL && flags == SYMM_MOE_SEND_RECV && a->y_rows > 0 &&
                   symm__heap_offset(a->y, (size_t)((a->y_rows - 1) * (uint64_t)a->y_stride[1] + a->hidden) * 2u,
                                     NULL);
    if (k == SYMM__MK_LL_DISPATCH || k == SYMM__MK_LL_COMBINE) {
        a->probe = (uint32_t)h->ll_probe;
        a->pdl = (uint32_t)h->pdl;
        symm__moe_ll_plan(a);
        if (h->no_launch)
            return SYMM_SUCCESS;
    }
    return symm__moe_launch(a, stream);
}

/* Launch kernel k for the call's halves (one kernel for both), then report
 * an error an earlier call left on the device. The launch comes first, so
 * every PE enqueues the same kernels and none waits for a PE that gave up. */
static symm_status_t run(const char *call, symm_moe_t *h, symm__moe_kargs_t *a, int flags, int next,
                         symm__mk_t k, symm_stream_t stream) {
    symm_status_t st;
    char how[96];
    if ((st = launch(h, a, k, flags, stream)) != SYMM_SUCCESS)
        return st;
    h->step = next;
    if (((volatile symm__moe_err_t *)h->err)->code == 0)
        return SYMM_SUCCESS; /* the common case: no message to format on every call */
    snprintf(how, sizeof(how), "%s (this call was enqueued; the error is an earlier call's): ", call);
    return take_error(h, how);
}

symm_status_t symm_moe_dispatch(symm_moe_t *h, const symm_moe_dispatch_args_t *args, int flags,
                                symm_stream_t stream) {
    const char *call = "symm_moe_dispatch";
    symm__moe_kargs_t a;
    symm_status_t st;
    int next;
    if ((st = begin(call, h, &a)) != SYMM_SUCCESS ||
        (st = symm__moe_check_order(call, h->step, 0, flags, &next)) != SYMM_SUCCESS ||
        (st = symm__moe_check_dispatch(&h->cfg, &h->g, args, &a)) != SYMM_SUCCESS)
        return st;
    return run(call, h, &a, flags, next, SYMM__MK_LL_DISPATCH, stream);
}

symm_status_t symm_moe_combine(symm_moe_t *h, const symm_moe_combine_args_t *args, int flags,
                               symm_stream_t stream) {
    const char *call = "symm_moe_combine";
    symm__moe_kargs_t a;
    symm_status_t st;
    int next;
    if ((st = begin(call, h, &a)) != SYMM_SUCCESS ||
        (st = symm__moe_check_order(call, h->step, 1, flags, &next)) != SYMM_SUCCESS ||
        (st = symm__moe_check_combine(&h->cfg, &h->g, args, &a)) != SYMM_SUCCESS)
        return st;
    return run(call, h, &a, flags, next, SYMM__MK_LL_COMBINE, stream);
}

symm_status_t symm_moe_ll_routes(const symm_moe_t *h, const uint64_t **routes, size_t *rows) {
    symm__error_clear();
    if (h == NULL || routes == NULL || rows == NULL)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_moe_ll_routes: NULL %s", h ? "output" : "handle");
    if (h->cfg.mode != SYMM_MOE_LOW_LATENCY)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_moe_ll_routes: the handle is in the high-throughput mode");
    *routes = (const uint64_t *)(const void *)(h->base + h->g.lay.ll_route);
    *rows = h->g.rows;
    return SYMM_SUCCESS;
}

symm_status_t symm_moe_ll_partial(const symm_moe_t *h, int *partial) {
    symm__error_clear();
    if (h == NULL || partial == NULL)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_moe_ll_partial: NULL %s", h ? "output" : "handle");
    if (h->cfg.mode != SYMM_MOE_LOW_LATENCY)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_moe_ll_partial: the handle is in the high-throughput mode");
    *partial = h->ll_part;
    return SYMM_SUCCESS;
}

symm_status_t symm_moe_ht_layout(symm_moe_t *h, const void *indices, symm_dtype_t indices_dtype,
                                 size_t num_tokens, int32_t *num_tokens_per_rank, int32_t *num_tokens_per_expert,
                                 uint8_t *is_token_in_rank, symm_stream_t stream) {
    const char *call = "symm_moe_ht_layout";
    symm__moe_kargs_t a;
    symm_status_t st;
    if ((st = begin(call, h, &a)) != SYMM_SUCCESS ||
        (st = symm__moe_check_ht_indices(call, &h->cfg, indices, indices_dtype, num_tokens, &a)) != SYMM_SUCCESS)
        return st;
    a.per_rank = num_tokens_per_rank;
    a.per_expert = num_tokens_per_expert;
    a.in_rank = is_token_in_rank;
    return launch(h, &a, SYMM__MK_HT_LAYOUT, 0, stream);
}

/* Non-zero when [p, p + n) lies inside one live block of this PE's symmetric heap. */
static int in_heap_block(const void *p, size_t n) {
    size_t off = 0, start = 0, size = 0;
    if (n == 0)
        return 1;
    if (!symm__heap_offset(p, n, &off) || !symm__alloc_lookup(symm__heap.alloc, off, &start, &size))
        return 0;
    return off + n <= start + size;
}

/* Where this PE's rows of x and scales land: the handle's buffers, or the
 * caller's (symmetric, checked by symm__moe_check_ht_into). The receive half
 * lays out nothing there, so it takes what its send half named. */
static symm_status_t ht_into(const char *call, symm_moe_t *h, void *recv_x, float *recv_x_scale, int flags,
                             symm__moe_kargs_t *a) {
    size_t xb = 0, sb = 0;
    symm__moe_ht_into_bytes(&h->cfg, &h->g, &xb, &sb);
    if (!(flags & SYMM_MOE_SEND)) {
        if ((recv_x != NULL && recv_x != h->ht_into_x) || (recv_x_scale != NULL && recv_x_scale != h->ht_into_s))
            return symm__error(SYMM_ERR_INVALID_ARG, "%s: the receive half got other receive buffers than its "
                               "send half (pass the same, or NULL)", call);
        return SYMM_SUCCESS;
    }
    return symm__moe_check_ht_into(call, &h->cfg, &h->g, (uintptr_t)h->base, recv_x, recv_x_scale,
                                   recv_x == NULL || in_heap_block(recv_x, xb),
                                   recv_x_scale == NULL || in_heap_block(recv_x_scale, sb), a);
}

static symm_status_t ht_dispatch(const char *call, symm_moe_t *h, const symm_moe_ht_dispatch_args_t *args,
                                 void *recv_x, float *recv_x_scale, int flags, symm_stream_t stream) {
    symm__moe_kargs_t a;
    symm_status_t st;
    int next;
    if ((st = begin(call, h, &a)) != SYMM_SUCCESS ||
        (st = symm__moe_check_order(call, h->step, 0, flags, &next)) != SYMM_SUCCESS ||
        (st = symm__moe_check_ht_dispatch(&h->cfg, &h->g, args, &a)) != SYMM_SUCCESS ||
        (st = ht_into(call, h, recv_x, recv_x_scale, flags, &a)) != SYMM_SUCCESS)
        return st;
    st = run(call, h, &a, flags, next, SYMM__MK_HT_DISPATCH, stream);
    if (h->step == next && (flags & SYMM_MOE_SEND)) { /* launched (st may be an earlier call's error) */
        h->ht_tokens = args->num_tokens;
        h->ht_into_x = recv_x;
        h->ht_into_s = recv_x_scale;
    }
    return st;
}

symm_status_t symm_moe_ht_dispatch(symm_moe_t *h, const symm_moe_ht_dispatch_args_t *args, int flags,
                                   symm_stream_t stream) {
    return ht_dispatch("symm_moe_ht_dispatch", h, args, NULL, NULL, flags, stream);
}

symm_status_t symm_moe_ht_dispatch_into(symm_moe_t *h, const symm_moe_ht_dispatch_args_t *args, void *recv_x,
                                        float *recv_x_scale, int flags, symm_stream_t stream) {
    return ht_dispatch("symm_moe_ht_dispatch_into", h, args, recv_x, recv_x_scale, flags, stream);
}

symm_status_t symm_moe_ht_recv_buffers(const symm_moe_t *h, symm_moe_ht_recv_t *r) {
    symm__error_clear();
    if (h == NULL || r == NULL)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_moe_ht_recv_buffers: NULL %s", h ? "output" : "handle");
    if (h->cfg.mode != SYMM_MOE_HIGH_THROUGHPUT)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_moe_ht_recv_buffers: the handle is in the low-latency mode");
    memset(r, 0, sizeof(*r));
    r->x = h->base + h->g.lay.ht_rx;
    r->x_scale = h->g.scale_cols ? (float *)(void *)(h->base + h->g.lay.ht_rscale) : NULL;
    r->indices = (int32_t *)(void *)(h->base + h->g.lay.ht_ridx);
    r->weights = (float *)(void *)(h->base + h->g.lay.ht_rw);
    r->src = (int32_t *)(void *)(h->base + h->g.lay.ht_rsrc);
    r->num_recv = (int32_t *)(void *)(h->base + h->g.lay.ht_rnum);
    r->num_recv_per_expert = (int32_t *)(void *)(h->base + h->g.lay.ht_rpe);
    r->capacity = h->g.cap;
    r->scale_cols = h->g.scale_cols;
    return SYMM_SUCCESS;
}

symm_status_t symm_moe_ht_recv_copy(const symm_moe_t *h, const symm_moe_ht_recv_copy_t *c, symm_stream_t stream) {
    const char *call = "symm_moe_ht_recv_copy";
    symm__moe_recv_copy_kargs_t a;
    symm__error_clear();
    if (h == NULL || c == NULL)
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: NULL %s", call, h ? "copy arguments" : "handle");
    if (h->cfg.mode != SYMM_MOE_HIGH_THROUGHPUT)
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: the handle is in the low-latency mode", call);
    if (c->rows > h->g.cap)
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: rows %zu is above the receive capacity %u", call, c->rows,
                           h->g.cap);
    if (c->indices != NULL && c->indices_dtype != SYMM_DTYPE_I32 && c->indices_dtype != SYMM_DTYPE_I64)
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: indices dtype %d: expected int32 (%d) or int64 (%d)", call,
                           (int)c->indices_dtype, SYMM_DTYPE_I32, SYMM_DTYPE_I64);
    if ((uintptr_t)c->src_token % 4 || (uintptr_t)c->weights % 4 || (uintptr_t)c->counts % 4 ||
        (uintptr_t)c->indices % (c->indices_dtype == SYMM_DTYPE_I64 ? 8 : 4))
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: an output is not aligned to its elements", call);
    memset(&a, 0, sizeof(a));
    a.src = (const int32_t *)(const void *)(h->base + h->g.lay.ht_rsrc);
    a.idx = (const int32_t *)(const void *)(h->base + h->g.lay.ht_ridx);
    a.w = (const float *)(const void *)(h->base + h->g.lay.ht_rw);
    a.num_recv = (const int32_t *)(const void *)(h->base + h->g.lay.ht_rnum);
    a.per_expert = (const int32_t *)(const void *)(h->base + h->g.lay.ht_rpe);
    a.o_src = c->src_token;
    a.o_idx = c->indices;
    a.o_w = c->weights;
    a.o_counts = c->counts;
    a.rows = c->rows;
    a.k = (uint32_t)h->cfg.experts_per_token;
    a.local = h->g.local;
    a.idx64 = c->indices_dtype == SYMM_DTYPE_I64;
    return symm__moe_recv_copy_launch(&a, stream);
}

static symm_status_t ht_combine(const char *call, symm_moe_t *h, const void *y, symm_dtype_t y_dtype,
                                int64_t y_stride, size_t y_rows, void *out, symm_dtype_t out_dtype,
                                int64_t out_stride, size_t out_rows, const symm_moe_ht_weights_t *w, int flags,
                                symm_stream_t stream) {
    symm__moe_kargs_t a;
    symm_status_t st;
    int next;
    const size_t cols = w != NULL ? w->cols : 0;
    if ((st = begin(call, h, &a)) != SYMM_SUCCESS ||
        (st = symm__moe_check_order(call, h->step, 1, flags, &next)) != SYMM_SUCCESS ||
        (st = symm__moe_check_ht_combine(&h->cfg, y, y_dtype, y_stride, y_rows, out, out_dtype, out_stride,
                                         out_rows, h->ht_tokens, &a)) != SYMM_SUCCESS ||
        (st = symm__moe_check_ht_weights(&h->cfg, w, flags, &a)) != SYMM_SUCCESS)
        return st;
    /* the receive half sums what its send half sent: the same number of values per row */
    if (flags == SYMM_MOE_RECV && cols != h->ht_wcols)
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: the receive half has %zu weight values per row, its send "
                           "half had %zu (pass the same)", call, cols, h->ht_wcols);
    st = run(call, h, &a, flags, next, SYMM__MK_HT_COMBINE, stream);
    if (h->step == next && (flags & SYMM_MOE_SEND)) /* launched */
        h->ht_wcols = cols;
    return st;
}

symm_status_t symm_moe_ht_combine(symm_moe_t *h, const void *y, symm_dtype_t y_dtype, int64_t y_stride,
                                  size_t y_rows, void *out, symm_dtype_t out_dtype, int64_t out_stride,
                                  size_t out_rows, int flags, symm_stream_t stream) {
    return ht_combine("symm_moe_ht_combine", h, y, y_dtype, y_stride, y_rows, out, out_dtype, out_stride, out_rows,
                      NULL, flags, stream);
}

symm_status_t symm_moe_ht_combine_weights(symm_moe_t *h, const void *y, symm_dtype_t y_dtype, int64_t y_stride,
                                          size_t y_rows, void *out, symm_dtype_t out_dtype, int64_t out_stride,
                                          size_t out_rows, const symm_moe_ht_weights_t *weights, int flags,
                                          symm_stream_t stream) {
    return ht_combine("symm_moe_ht_combine_weights", h, y, y_dtype, y_stride, y_rows, out, out_dtype, out_stride,
                      out_rows, weights, flags, stream);
}

/* ---- the SM budget ----------------------------------------------------------------------- */

symm_status_t symm_moe_set_num_sms(symm_moe_t *h, int num_sms) {
    symm__error_clear();
    if (h == NULL)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_moe_set_num_sms: the handle is NULL");
    if (num_sms < 0 || num_sms > h->share)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_moe_set_num_sms: num_sms %d is not in 0..%d (0: the "
                           "default; at most the SMs a waiting grid of this PE may fill, symm_sm_share)",
                           num_sms, h->share);
    h->sms = num_sms ? num_sms : h->share;
    h->sms_set = num_sms != 0;
    return SYMM_SUCCESS;
}

symm_status_t symm_moe_get_num_sms(const symm_moe_t *h, int *num_sms) {
    symm__error_clear();
    if (h == NULL || num_sms == NULL)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_moe_get_num_sms: NULL %s", h ? "output" : "handle");
    *num_sms = h->sms;
    return SYMM_SUCCESS;
}

symm_status_t symm_moe_launched_blocks(symm_moe_t *h, symm_stream_t stream, int *blocks) {
    symm_status_t st;
    uint32_t most = 0;
    symm__error_clear();
    if (h == NULL || blocks == NULL)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_moe_launched_blocks: NULL %s", h ? "output" : "handle");
    if ((st = symm__moe_stream_sync(stream)) != SYMM_SUCCESS)
        return st;
    if ((st = symm__moe_take_word(h->base + h->g.lay.state + offsetof(symm__moe_state_t, max_grid), &most)) !=
        SYMM_SUCCESS)
        return st;
    *blocks = (int)most;
    return SYMM_SUCCESS;
}
