/*
 * coll_host.c - the stream collectives of symm_coll.h: argument checks,
 * algorithm choice, staging of non-symmetric buffers, and the launches
 * (coll_launch.h; the kernels are in coll_k_*.cu, the device code in
 * include/symm/device/coll_impl.h).
 *
 * Workspace: the team's internal scratch (symm_ctx_t.scratch, zeroed at
 * init) holds the synchronisation words and the packet/one-shot regions; the
 * host never writes it, the kernels keep it consistent, so every call
 * captures into CUDA graphs. Buffers outside the heap that a direct
 * algorithm must reach from the peers are staged through a per-team
 * symmetric staging area, in pieces of at most its size.
 */
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "symm/symm.h"
#include "symm/device/coll_reduce.h"
#include "core/env.h"
#include "core/log.h"
#include "heap/heap.h"
#include "runtime/team.h"
#include "coll/coll.h"
#include "coll/coll_launch.h"

/* A team's collective state, kept with the team (runtime/team.h): made by
 * the first collective on it, freed by the runtime when the team goes. */
typedef struct coll_team {
    symm_team_t team;
    symm_ctx_t ctx;        /* the team's context (fields the kernels use never change) */
    symm__coll_ws_t ws;
    char *stage;           /* SYMM__COLL_STAGE_BYTES of symmetric heap */
    char *push;            /* SYMM__COLL_PUSH_BYTES of zeroed symmetric heap (coll.h) */
    symm__coll_ce_t *ce;   /* side stream and events of the copy-engine path */
    int sm_cap;            /* most blocks of one launch: symm_sm_share (PEs sharing a GPU) */
    int far;               /* a PE of the team is outside the load/store window: the
                              backend's collectives run the calls (docs/backends.md) */
} coll_team_t;

static const char g_team_key; /* finds coll_team_t among a team's module state */
static int g_direct_blocks;
static uint64_t g_region_units = SYMM__COLL_REGION_UNITS;
static uint32_t g_nbmax;
static int g_push_blocks, g_push_slots;
static _Thread_local char t_last_algo[32] = "none";

/* The older hooks: a value of 0 drops the override. */
static void ovr(const char *name, uint64_t value) {
    (void)(value ? symm__coll_tune_set(name, value) : symm__coll_tune_clear(name));
}

void symm__coll_tune(int direct_blocks, uint64_t packet_max, uint64_t oneshot_max) {
    g_direct_blocks = direct_blocks > 0 && direct_blocks <= SYMM_COLL_MAX_BLOCKS - 1 ? direct_blocks : 0;
    ovr("packet_max", packet_max);
    ovr("oneshot_max", oneshot_max);
}

void symm__coll_tune_push(uint64_t ar_min, uint64_t rs_min, int blocks, int slots) {
    ovr("push_ar_min", ar_min);
    ovr("push_rs_min", rs_min);
    g_push_slots = slots > 0 && slots <= (int)SYMM__COLL_PUSH_SLOTS ? slots : 0;
    g_push_blocks = blocks > 0 && blocks <= (int)SYMM__COLL_PUSH_SLOTS ? blocks : 0;
}

static uint32_t push_slots(void) { return g_push_slots ? (uint32_t)g_push_slots : SYMM__COLL_PUSH_SLOTS; }

void symm__coll_tune_units(uint32_t units) { g_region_units = units ? units : SYMM__COLL_REGION_UNITS; }

void symm__coll_tune_ar_packet(uint64_t two_min, uint64_t packet_max) {
    ovr("ar_packet2_min", two_min);
    ovr("ar_packet_max", packet_max);
}

void symm__coll_tune_ar_stores(uint64_t max) { ovr("ar_stores_max", max); }

void symm__coll_tune_bcast(uint64_t hop1_max, uint64_t packet_max) {
    ovr("bcast_hop1_max", hop1_max);
    ovr("bcast_packet_max", packet_max);
}

const char *symm_coll_last_algo(void) { return t_last_algo; }

static void set_last(symm_coll_algo_t algo, const char *direct_name, int staged) {
    const char *name = algo == SYMM_COLL_ALGO_PACKET ? "packet"
                     : direct_name ? direct_name : symm_coll_algo_name(algo);
    snprintf(t_last_algo, sizeof(t_last_algo), "%s%s", name, staged ? "+staged" : "");
}

/* ---- teams and workspace ---------------------------------------------------------- */

/* The data regions of t's workspace: SYMM__COLL_WS_NBMAX block slots unless
 * symm__coll_tune_nbmax said otherwise. */
static void set_geometry(coll_team_t *t) {
    uint32_t nb = g_nbmax ? g_nbmax : SYMM__COLL_WS_NBMAX;
    t->ws.nbmax = nb;
    t->ws.region = (uint32_t)SYMM__COLL_WS_REGION_NB(t->ctx.scratch_size, t->ctx.n_pes, nb);
    t->ws.data = t->ws.region ? t->ctx.scratch + SYMM__COLL_WS_SYNC_BYTES : 0;
}

symm_status_t symm__coll_tune_nbmax(uint32_t nbmax) {
    symm_status_t st;
    g_nbmax = nbmax < SYMM_COLL_MAX_BLOCKS ? nbmax : 0;
    symm_team_t team;
    for (int i = 0; (team = symm__team_at(i)) != NULL; i++) {
        coll_team_t *t = symm__team_ext_get(team, &g_team_key);
        if (!t)
            continue;
        set_geometry(t);
        /* a stale packet of another slot, now under a region of this one,
         * could carry the flag this slot's next call uses: clear them all
         * (0 is never a flag) */
        if (t->ctx.scratch_size > SYMM__COLL_WS_SYNC_BYTES &&
            (st = symm__coll_zero(t->ctx.scratch + SYMM__COLL_WS_SYNC_BYTES,
                                  t->ctx.scratch_size - SYMM__COLL_WS_SYNC_BYTES)) != SYMM_SUCCESS)
            return st;
    }
    return SYMM_SUCCESS;
}

/* The runtime's teardown hook (symm__team_ext_set): the staging and push
 * buffers go with the heap. */
static void coll_team_fini(void *state) {
    coll_team_t *t = state;
    symm__coll_ce_destroy(t->ce);
    free(t);
}

static symm_status_t get_team(symm_team_t team, symm_stream_t stream, const char *call, coll_team_t **out) {
    coll_team_t *t = NULL;
    symm_status_t st;
    void *stage = NULL, *push = NULL;
    int sm_cap = 0;
    if (!symm_initialized())
        return symm__error(SYMM_ERR_NOT_INITIALIZED, "%s: symm is not initialized", call);
    if (symm__env()->coll_blocks < 0 || symm__env()->coll_blocks >= SYMM_COLL_MAX_BLOCKS)
        return symm__error(SYMM_ERR_ENV, "%s: SYMM_COLL_BLOCKS=%lld is not in 0..%d", call,
                           symm__env()->coll_blocks, SYMM_COLL_MAX_BLOCKS - 1);
    if ((team = symm__team_resolve(team)) == NULL)
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: not a team handle", call);
    if ((t = symm__team_ext_get(team, &g_team_key)) != NULL) {
        *out = t;
        return SYMM_SUCCESS;
    }
    /* First call on this team: every PE is here (the call is collective). */
    if (symm__coll_capturing(stream) != 0)
        return symm__error(SYMM_ERR_INVALID_ARG,
                           "%s: the first collective on a team allocates its staging area and must be "
                           "made outside CUDA graph capture", call);
    const symm_ctx_t *ctx = symm__team_host_ctx(team);
    const symm__backend_ops_t *be = symm__runtime_backend();
    if (!(be->kernel_caps & SYMM__BE_KCAP_COLL))
        return symm__error(SYMM_ERR_UNSUPPORTED, "%s: the %s backend has no GPU collectives", call, be->name);
    if (ctx->n_pes > SYMM_COLL_MAX_PES)
        return symm__error(SYMM_ERR_UNSUPPORTED, "%s: team of %d PEs (collectives support %d)", call,
                           ctx->n_pes, SYMM_COLL_MAX_PES);
    if (ctx->scratch == 0 || ctx->scratch_size < SYMM__COLL_WS_SYNC_BYTES)
        return symm__error(SYMM_ERR_INTERNAL, "%s: the team's scratch is missing or too small (%llu bytes)",
                           call, (unsigned long long)ctx->scratch_size);
    /* the kernels' blocks wait on the peers' blocks: with PEs sharing a GPU,
     * every PE's grid must fit on it at once */
    if ((st = symm_sm_share(&sm_cap)) != SYMM_SUCCESS)
        return st;
    /* From here every step's outcome is agreed, so that all PEs keep the
     * same heap blocks (the allocator must see the same calls everywhere). */
    t = calloc(1, sizeof(*t));
    st = t ? SYMM_SUCCESS : symm__error(SYMM_ERR_NO_MEMORY, "%s: out of host memory", call);
    if ((st = symm__agree(st, SYMM_SUCCESS, "setting up the collectives")) != SYMM_SUCCESS)
        goto fail;
    if ((st = symm__heap_malloc(SYMM__COLL_STAGE_BYTES, 0, &stage)) != SYMM_SUCCESS)
        goto fail;
    /* zeroed on every PE before any returns: the push counters start at 0 */
    if ((st = symm__heap_malloc(SYMM__COLL_PUSH_BYTES, 1, &push)) != SYMM_SUCCESS)
        goto fail_stage;
    st = symm__coll_ce_create(&t->ce);
    if ((st = symm__agree(st, SYMM_SUCCESS, "setting up the collectives' copy engines")) != SYMM_SUCCESS)
        goto fail_push;
    t->team = team;
    t->ctx = *ctx;
    t->ws.base = t->ctx.scratch;
    set_geometry(t);
    t->stage = stage;
    t->push = push;
    t->sm_cap = sm_cap;
    t->far = !(ctx->ldst_first == 0 && ctx->ldst_count == ctx->n_pes);
    if ((st = symm__team_ext_set(team, &g_team_key, t, coll_team_fini)) != SYMM_SUCCESS)
        goto fail_push;
    *out = t;
    return SYMM_SUCCESS;
fail_push:
    symm__coll_ce_destroy(t->ce);
    (void)symm__heap_release(push);
fail_stage:
    (void)symm__heap_release(stage);
fail:
    free(t);
    return st;
}

/* ---- argument checks -------------------------------------------------------------- */

/* Is [p, p + n) inside this PE's heap? */
static int in_heap(const void *p, uint64_t n) { return symm__heap_offset(p, (size_t)n, NULL); }

static int overlap(const void *a, uint64_t na, const void *b, uint64_t nb) {
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return na && nb && x < y + nb && y < x + na;
}

static symm_status_t check_buf(const char *call, const char *what, const void *p, uint64_t n) {
    if (p == NULL)
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: %s is NULL", call, what);
    if (!in_heap(p, n) && !symm__coll_device_accessible(p))
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: %s (%p) is not memory this GPU can access", call, what, p);
    return SYMM_SUCCESS;
}

/* count * esz * mult without overflow (and within what the kernels index). */
static symm_status_t bytes_of(const char *call, size_t count, uint32_t esz, uint64_t mult, uint64_t *out) {
    const uint64_t lim = (uint64_t)1 << 62;
    if ((uint64_t)count > lim / esz || (uint64_t)count * esz > lim / (mult ? mult : 1))
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: count %zu overflows (x %u bytes x %llu)", call, count, esz,
                           (unsigned long long)mult);
    *out = (uint64_t)count * esz;
    return SYMM_SUCCESS;
}

static symm_status_t check_dtype(const char *call, symm_dtype_t dtype, uint32_t *esz) {
    if ((int)dtype < 0 || (int)dtype >= SYMM_DTYPE_COUNT)
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: unknown dtype %d", call, (int)dtype);
    *esz = symm__c_dtype_size(dtype);
    return SYMM_SUCCESS;
}

static symm_status_t check_red(const char *call, symm_dtype_t dtype, symm_redop_t op, symm_dtype_t acc,
                               symm_coll_algo_t algo, uint32_t *esz, int *kind) {
    symm_status_t st = check_dtype(call, dtype, esz);
    if (st != SYMM_SUCCESS)
        return st;
    if ((int)op < 0 || (int)op >= SYMM_OP_COUNT)
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: unknown op %d", call, (int)op);
    if ((int)acc != SYMM_DTYPE_DEFAULT && ((int)acc < 0 || (int)acc >= SYMM_DTYPE_COUNT))
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: unknown accumulator dtype %d", call, (int)acc);
    if ((int)algo < 0 || (int)algo >= SYMM_COLL_ALGO_COUNT)
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: unknown algorithm %d", call, (int)algo);
    *kind = symm__c_red_kind(dtype, op, acc);
    if (*kind < 0)
        return symm__error(SYMM_ERR_UNSUPPORTED, "%s: dtype %d with op %d (accumulator %d) is not supported", call,
                           (int)dtype, (int)op, (int)acc);
    return SYMM_SUCCESS;
}

/* The algorithm asked for: the call's, else SYMM_COLL_ALGO, else AUTO. */
static symm_status_t requested(const char *call, symm_coll_algo_t algo, symm_coll_algo_t *out) {
    const char *e = symm__env()->coll_algo;
    if (algo != SYMM_COLL_ALGO_AUTO || e == NULL || e[0] == '\0') {
        *out = algo;
        return SYMM_SUCCESS;
    }
    for (int a = SYMM_COLL_ALGO_AUTO; a < SYMM_COLL_ALGO_COUNT; a++)
        if (strcmp(e, symm_coll_algo_name((symm_coll_algo_t)a)) == 0) {
            *out = (symm_coll_algo_t)a;
            return SYMM_SUCCESS;
        }
    return symm__error(SYMM_ERR_ENV, "%s: SYMM_COLL_ALGO=%s is not one of auto, packet, oneshot, twoshot, "
                                     "multimem", call, e);
}

/* ---- the common prologue ------------------------------------------------------------ */

/* A call's checked arguments. */
typedef struct coll_args {
    coll_team_t *t;
    uint32_t esz;
    int kind;        /* reductions: the reduction kind */
    uint64_t nbytes; /* count x esz */
    uint64_t total;  /* nbytes x n_pes */
    symm__coll_limits_t lim; /* AUTO's limits for the team's size */
} coll_args_t;

/*
 * The checks every collective but all_to_allv starts with, in this order:
 * clear the last error; the team (the first call on it sets it up); the
 * types (op != NULL: a reduction, whose op, accumulator and algorithm are
 * checked too); the root (root != NULL: broadcast); count x esz, and
 * (per_pe) that times n_pes, without overflow. A count of 0 succeeds with
 * nothing to do (the last algorithm is "none"): the caller returns then.
 */
static symm_status_t prologue(const char *call, symm_team_t team, symm_stream_t stream, symm_dtype_t dtype,
                              const symm_redop_t *op, symm_dtype_t acc, symm_coll_algo_t algo, const int *root,
                              size_t count, int per_pe, coll_args_t *a) {
    symm_status_t st;
    int n;
    memset(a, 0, sizeof(*a));
    symm__error_clear();
    if ((st = get_team(team, stream, call, &a->t)) != SYMM_SUCCESS)
        return st;
    st = op ? check_red(call, dtype, *op, acc, algo, &a->esz, &a->kind) : check_dtype(call, dtype, &a->esz);
    if (st != SYMM_SUCCESS)
        return st;
    n = a->t->ctx.n_pes;
    if ((st = symm__coll_limits(n, &a->lim)) != SYMM_SUCCESS)
        return st; /* SYMM_COLL_TUNE does not parse: its message names the entry */
    if (root && (*root < 0 || *root >= n))
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: root %d outside the team (%d PEs)", call, *root, n);
    if ((st = bytes_of(call, count, a->esz, per_pe ? (uint64_t)n : 1, &a->nbytes)) != SYMM_SUCCESS)
        return st;
    a->total = a->nbytes * (uint64_t)n;
    if (count == 0)
        set_last(SYMM_COLL_ALGO_AUTO, "none", 0);
    return SYMM_SUCCESS;
}

/* send (sbytes) and recv (rbytes) are memory this GPU can access, and they
 * overlap only if send is exactly at `at` (when at_ok: in place). */
static symm_status_t check_pair(const char *call, const void *send, uint64_t sbytes, const void *recv,
                                uint64_t rbytes, int at_ok, uintptr_t at, const char *why) {
    symm_status_t st;
    if ((st = check_buf(call, "send", send, sbytes)) != SYMM_SUCCESS ||
        (st = check_buf(call, "recv", recv, rbytes)) != SYMM_SUCCESS)
        return st;
    if (!(at_ok && (uintptr_t)send == at) && overlap(send, sbytes, recv, rbytes))
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: %s", call, why);
    return SYMM_SUCCESS;
}

/* ---- block counts ----------------------------------------------------------------- */

#define THREADS 512

static uint64_t cdiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* Blocks for `units` 16-byte region slots (one per packet word or one-shot
 * unit) when a block's region holds `per_block` of them: one per
 * SYMM__COLL_REGION_UNITS units (symm__coll_tune_units), so small calls
 * spread their remote stores over several SMs, and never more per block than
 * fit. 0 when even every slot's region is too small. */
static int region_blocks_of(const coll_team_t *t, uint64_t units, uint64_t per_block) {
    uint64_t nb, lim = t->ws.nbmax < (uint32_t)t->sm_cap ? t->ws.nbmax : (uint64_t)t->sm_cap;
    if (per_block == 0)
        return 0;
    nb = cdiv(units, g_region_units);
    if (nb < cdiv(units, per_block))
        nb = cdiv(units, per_block);
    if (nb < 1)
        nb = 1;
    if (nb > lim) {
        if (cdiv(units, per_block) > lim)
            return 0;
        nb = lim;
    }
    return (int)nb;
}

static int region_blocks(const coll_team_t *t, uint64_t units) {
    return region_blocks_of(t, units, t->ws.region / 16);
}

/* The two-hop packet broadcast cuts a slot's words into m parts and each
 * region holds the packets of one part (symm__c_bcast_packet2): a block
 * takes up to m regions' worth of words. */
static int bcast2_blocks(const coll_team_t *t, uint64_t words, int m) {
    return m < 2 ? 0 : region_blocks_of(t, words, (uint64_t)m * (t->ws.region / 16));
}

/* The two-shot packet all-reduce (symm__c_ar_packet2) puts a slot's share of
 * the longest piece (symm__c_split: ceil(longest / nb) words, the last slot
 * the rest) in each half of a region, and needs at least two words in every
 * slot, the last included, so that every piece reaches every slot. 0: it
 * cannot run. */
static int ar_packet2_blocks(const coll_team_t *t, uint64_t words) {
    uint64_t longest = cdiv(words, (uint64_t)t->ctx.n_pes), per_block = t->ws.region / 32;
    for (int nb = region_blocks_of(t, longest, per_block); nb > 0; nb--) {
        uint64_t per = cdiv(longest, (uint64_t)nb);
        if (per > per_block)
            return 0;
        if (longest >= (uint64_t)(nb - 1) * per + 2)
            return nb;
    }
    return 0;
}

/* Blocks of a direct kernel moving `bytes` per block slot row: one per
 * 16 KiB (a round of 2 vectors per thread), at most symm__coll_tune's value,
 * else SYMM_COLL_BLOCKS (checked by get_team), else SYMM__COLL_DIRECT_BLOCKS,
 * and never more than the team's share of SMs (symm_sm_share). It must come
 * out the same on every PE (block b handshakes with block b of the peers):
 * it depends only on the size and on settings every PE shares. */
static int direct_blocks_max(const coll_team_t *t, uint64_t bytes, int def_max) {
    uint64_t nb = cdiv(bytes, (uint64_t)THREADS * 32);
    long long env = symm__env()->coll_blocks;
    int max = g_direct_blocks                                   ? g_direct_blocks
            : env > 0 && env < (long long)SYMM_COLL_MAX_BLOCKS ? (int)env
                                                                : def_max;
    if (max > t->sm_cap)
        max = t->sm_cap;
    if (nb < 1)
        nb = 1;
    return nb > (uint64_t)max ? max : (int)nb;
}

static int direct_blocks(const coll_team_t *t, uint64_t bytes) {
    return direct_blocks_max(t, bytes, SYMM__COLL_DIRECT_BLOCKS);
}

/* Blocks of a push kernel whose chunks are `chunk` bytes: one per buffer
 * (a step) up to the slots, or symm__coll_tune_push's or SYMM_COLL_BLOCKS's
 * cap. The same on every PE (sizes and shared settings). */
static int push_blocks(const coll_team_t *t, uint64_t chunk) {
    uint64_t slots = push_slots(), nb = cdiv(chunk, SYMM__COLL_PUSH_BUF(slots, t->ctx.n_pes));
    long long env = symm__env()->coll_blocks;
    uint64_t max = g_push_blocks                       ? (uint64_t)g_push_blocks
                 : env > 0 && env < (long long)slots ? (uint64_t)env
                                                      : slots;
    if (max > slots)
        max = slots;
    if (max > (uint64_t)t->sm_cap)
        max = (uint64_t)t->sm_cap;
    if (nb < 1)
        nb = 1;
    return (int)(nb > max ? max : nb);
}

static void push_launch(symm__coll_launch_t *l, const coll_team_t *t) {
    l->push = (uint64_t)(uintptr_t)t->push;
    l->push_buf = SYMM__COLL_PUSH_BUF(push_slots(), t->ctx.n_pes);
}

static void base_launch(symm__coll_launch_t *l, const coll_team_t *t, symm__ck_t k, int nblocks) {
    memset(l, 0, sizeof(*l));
    l->kernel = k;
    l->nblocks = nblocks;
    l->nthreads = THREADS;
    l->ctx = t->ctx;
    l->ctx.trace = symm__team_host_ctx(t->team)->trace; /* a device trace started since set-up */
    l->ws = t->ws;
    l->root = -1;
}

/* Largest piece (a multiple of 16 bytes) of which `rows` fit the stage.
 * Large calls are cut into pieces of this size whether or not this PE
 * stages: the number of launches must be the same on every PE, and a peer
 * may stage when this PE does not (within a launch, the published addresses
 * make mixed buffer kinds work). */
static uint64_t stage_piece(uint64_t rows) { return ((uint64_t)SYMM__COLL_STAGE_BYTES / rows) & ~(uint64_t)15; }

/* ---- teams with PEs outside the load/store window ----------------------------------- */

/* The call through the backend's library (its own staging and algorithms):
 * symm's kernels need every peer's memory mapped. */
static symm_status_t far_coll(coll_team_t *t, const char *call, int kind, const void *send, void *recv,
                              size_t count, uint32_t esz, int dtype, int op, int acc, int root,
                              uint64_t send_bytes, uint64_t recv_bytes, symm_stream_t stream) {
    symm__be_coll_t c;
    symm_status_t st;
    memset(&c, 0, sizeof c);
    c.what = call;
    c.kind = kind;
    c.send = send;
    c.recv = recv;
    c.count = count;
    c.esize = esz;
    c.dtype = dtype;
    c.op = op;
    c.root = root;
    c.acc_default = acc == SYMM_DTYPE_DEFAULT || acc == dtype;
    c.send_in_heap = send == NULL || in_heap(send, send_bytes);
    c.recv_in_heap = in_heap(recv, recv_bytes);
    c.h_ctx = &t->ctx;
    if ((st = symm__team_backend_coll(t->team, &c, stream)) == SYMM_SUCCESS)
        snprintf(t_last_algo, sizeof(t_last_algo), "backend");
    return st;
}

/* ---- the copy-engine paths -------------------------------------------------------- */

/* Can this team take a copy-engine path at all? A team that is the whole
 * world (one node: world PE p is node PE p, which the peer addresses of the
 * copies rely on) with its copy-engine state. */
static int ce_ok(const coll_team_t *t) {
    return t->ce != NULL && t->ctx.n_pes == symm_n_pes() && t->ctx.n_pes <= SYMM_COLL_MAX_PES;
}

/*
 * May this call copy into the peers' recv on the copy engines? Only on a
 * team that can (ce_ok), and only when recv is in the symmetric heap at the
 * same offset on every PE: the copies write to the peer's copy of this PE's
 * address (symm_ptr), so a PE whose recv lies elsewhere would get its data
 * in the wrong place; and PEs may differ in which of their buffers are
 * symmetric, but a PE whose recv is not must not be left in a kernel's
 * handshake while its peers copy. Each PE's recv offset is exchanged through
 * the bootstrap (a host round trip between the PEs, only for calls this
 * large; under graph capture it happens once, at capture, which fixes the
 * buffers). The caller has checked the size against its limit.
 */
static symm_status_t want_ce(coll_team_t *t, const char *call, const void *recv, uint64_t recv_bytes, int *out) {
    uint64_t mine, all[SYMM_COLL_MAX_PES];
    int n = t->ctx.n_pes;
    symm_status_t st;
    *out = 0;
    if (!ce_ok(t))
        return SYMM_SUCCESS;
    /* recv's heap offset, or UINT64_MAX outside the heap */
    mine = in_heap(recv, recv_bytes) ? (uint64_t)(uintptr_t)recv - t->ctx.heap_base : UINT64_MAX;
    if ((st = symm_host_allgather(&mine, all, sizeof(mine))) != SYMM_SUCCESS)
        return symm__error(st, "%s: agreeing on the copy-engine path: %s", call, symm_strerror(st));
    for (int p = 0; p < n; p++)
        if (all[p] == UINT64_MAX || all[p] != all[0])
            return SYMM_SUCCESS;
    *out = 1;
    return SYMM_SUCCESS;
}

/* What the copy-engine pipelines need of the team, and what the call is
 * (its signature: call, bytes per PE, reduction kind, op, root). */
static void pipe_of(coll_team_t *t, const symm__coll_limits_t *lim, int call, uint64_t bytes, int kind, int op,
                    int root, symm__coll_pipe_t *pp) {
    memset(pp, 0, sizeof(*pp));
    pp->ce = t->ce;
    pp->team = t->team;
    pp->ctx = &t->ctx;
    pp->ws = &t->ws;
    pp->stage = t->stage;
    pp->chunk = lim->ce_chunk;
    /* the forwarding and reduction kernels wait for the peers' signal kernels:
     * with PEs sharing a GPU, leave room beside them for this PE's own */
    pp->blocks = direct_blocks_max(t, (uint64_t)1 << 30, SYMM__COLL_MOVE_BLOCKS);
    if (pp->blocks > t->sm_cap - 2)
        pp->blocks = t->sm_cap > 2 ? t->sm_cap - 2 : 1;
    pp->call = call;
    pp->sig_bytes = bytes;
    pp->kind = kind;
    pp->op = op;
    pp->root = root;
}

/* All-reduce through the copy engines (nbytes a multiple of 16 n, recv
 * symmetric everywhere: want_ce): the copy-engine reduce-scatter of send
 * into this PE's piece of recv, then the copy-engine all-gather of the
 * pieces in place. */
static symm_status_t ar_ce(coll_team_t *t, const coll_args_t *a, const void *send, void *recv, int op,
                           symm_stream_t stream) {
    symm__coll_pipe_t pp;
    int n = t->ctx.n_pes, me = t->ctx.my_pe;
    uint64_t piece = a->nbytes / (uint64_t)n;
    char *mine = (char *)recv + (uint64_t)me * piece;
    symm_status_t st;
    pipe_of(t, &a->lim, SYMM__PIPE_AR, a->nbytes, a->kind, op, -1, &pp);
    if ((st = symm__coll_ce_rs(&pp, send, mine, piece, piece, a->kind, op, stream)) != SYMM_SUCCESS ||
        (st = symm__coll_ce_move(t->ce, t->team, mine, recv, piece, 0, piece, stream)) != SYMM_SUCCESS)
        return st;
    snprintf(t_last_algo, sizeof(t_last_algo), "copy-engine");
    return SYMM_SUCCESS;
}

/* ---- all-reduce ------------------------------------------------------------------- */

symm_status_t symm_all_reduce_ex(const void *send, void *recv, size_t count, symm_dtype_t dtype, symm_redop_t op,
                                 symm_dtype_t acc, symm_coll_algo_t algo, symm_team_t team, symm_stream_t stream) {
    const char *call = "symm_all_reduce";
    coll_args_t a;
    coll_team_t *t;
    symm__coll_launch_t l;
    uint64_t nbytes;
    int kind, n, nb;
    symm_status_t st;
    if ((st = prologue(call, team, stream, dtype, &op, acc, algo, NULL, count, 0, &a)) != SYMM_SUCCESS || count == 0)
        return st;
    t = a.t;
    nbytes = a.nbytes;
    kind = a.kind;
    if ((st = check_pair(call, send, nbytes, recv, nbytes, 1, (uintptr_t)recv,
                         "send and recv overlap without being equal")) != SYMM_SUCCESS)
        return st;
    if (t->far)
        return far_coll(t, call, SYMM__BE_COLL_ALL_REDUCE, send, recv, count, a.esz, dtype, op, acc, -1, nbytes,
                        nbytes, stream);
    if ((st = requested(call, algo, &algo)) != SYMM_SUCCESS)
        return st;
    n = t->ctx.n_pes;
    if (algo == SYMM_COLL_ALGO_AUTO) {
        int ce = 0;
        algo = nbytes <= (n >= 3 ? a.lim.ar_packet_max : a.lim.packet_max) ? SYMM_COLL_ALGO_PACKET
             : nbytes <= a.lim.oneshot_max                                ? SYMM_COLL_ALGO_ONESHOT
             : nbytes >= a.lim.push_ar_min                                ? SYMM_COLL_ALGO_PUSH
                                                                          : SYMM_COLL_ALGO_TWOSHOT;
        /* the copy-engine halves: pieces of 16-byte multiples, recv symmetric everywhere */
        if (nbytes >= a.lim.ar_ce_min && n >= 2 && nbytes % (16 * (uint64_t)n) == 0 &&
            (st = want_ce(t, call, recv, nbytes, &ce)) != SYMM_SUCCESS)
            return st;
        if (ce)
            return ar_ce(t, &a, send, recv, (int)op, stream);
    }
    /* No multicast object exists (symm creates none yet): the unicast twin. */
    if (algo == SYMM_COLL_ALGO_MULTIMEM)
        algo = SYMM_COLL_ALGO_TWOSHOT;
    /* the kernels that need only their own buffers (scratch regions carry
     * the peers' data): one launch whatever the buffers */
    {
        symm__ck_t k = SYMM__CK_COUNT;
        const char *name = NULL;
        if (algo == SYMM_COLL_ALGO_PACKET && n >= 3 && nbytes > a.lim.ar_packet2_min &&
            (nb = ar_packet2_blocks(t, cdiv(nbytes, 8))) > 0) {
            k = SYMM__CK_AR_PACKET2;
            name = "packet-2shot";
        } else if (algo == SYMM_COLL_ALGO_PACKET && (nb = region_blocks(t, cdiv(nbytes, 8))) > 0) {
            k = SYMM__CK_RED_PACKET;
            name = "packet";
        } else if ((algo == SYMM_COLL_ALGO_PACKET || algo == SYMM_COLL_ALGO_ONESHOT) &&
                   (nb = region_blocks_of(t, cdiv(nbytes, 16), t->ws.region >= 32 ? t->ws.region / 16 - 1 : 0)) > 0) {
            /* (a region's last unit holds the call's signature: symm__c_handshake_sig) */
            k = SYMM__CK_AR_ONESHOT;
            name = "oneshot";
        }
        if (k != SYMM__CK_COUNT) {
            base_launch(&l, t, k, nb);
            l.dst = recv;
            l.src = send;
            l.nbytes = nbytes;
            l.kind = kind;
            l.op = (int)op;
            if ((st = symm__coll_launch(&l, stream)) == SYMM_SUCCESS)
                snprintf(t_last_algo, sizeof(t_last_algo), "%s", name);
            return st;
        }
    }
    /* TWOSHOT or PUSH between the buffers, or through the stage in pieces
     * (PUSH reads send only locally, so only a recv outside the heap is
     * staged). */
    {
        int push = algo == SYMM_COLL_ALGO_PUSH, stores = 0;
        int sym_s = push || in_heap(send, nbytes), sym_r = in_heap(recv, nbytes);
        uint64_t piece = stage_piece(1), off;
        for (off = 0; off < nbytes; off += piece) {
            uint64_t len = nbytes - off < piece ? nbytes - off : piece;
            const char *s = (const char *)send + off;
            char *d = (char *)recv + off;
            if (!sym_s) {
                if ((st = symm__coll_copy(t->stage, s, len, stream)) != SYMM_SUCCESS)
                    return st;
                s = t->stage;
            }
            if (!sym_r)
                d = t->stage;
            if (push) {
                base_launch(&l, t, SYMM__CK_AR_PUSH, push_blocks(t, cdiv(len, (uint64_t)n)));
                push_launch(&l, t);
            } else if (n >= 3 && len <= a.lim.ar_stores_max &&
                       (nb = region_blocks(t, cdiv(len, 16 * (uint64_t)n))) > 0) {
                /* each piece into its owner's region (a slot's share of the
                 * ceil(len / n)-byte pieces, in 16-byte units, must fit) */
                base_launch(&l, t, SYMM__CK_AR_TWOSHOT_ST, nb);
                stores = 1;
            } else {
                base_launch(&l, t, SYMM__CK_AR_TWOSHOT, direct_blocks(t, cdiv(len, (uint64_t)n)));
            }
            l.dst = d;
            l.src = s;
            l.nbytes = len;
            l.kind = kind;
            l.op = (int)op;
            if ((st = symm__coll_launch(&l, stream)) != SYMM_SUCCESS)
                return st;
            if (!sym_r && (st = symm__coll_copy((char *)recv + off, t->stage, len, stream)) != SYMM_SUCCESS)
                return st;
        }
        set_last(push ? SYMM_COLL_ALGO_PUSH : SYMM_COLL_ALGO_TWOSHOT, stores ? "twoshot-stores" : NULL,
                 !(sym_s && sym_r));
    }
    return SYMM_SUCCESS;
}

symm_status_t symm_all_reduce(const void *send, void *recv, size_t count, symm_dtype_t dtype, symm_redop_t op,
                              symm_team_t team, symm_stream_t stream) {
    return symm_all_reduce_ex(send, recv, count, dtype, op, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_AUTO, team, stream);
}

/* ---- reduce-scatter ------------------------------------------------------------------ */

symm_status_t symm_reduce_scatter_ex(const void *send, void *recv, size_t recv_count, symm_dtype_t dtype,
                                     symm_redop_t op, symm_dtype_t acc, symm_coll_algo_t algo, symm_team_t team,
                                     symm_stream_t stream) {
    const char *call = "symm_reduce_scatter";
    coll_args_t a;
    coll_team_t *t;
    symm__coll_launch_t l;
    uint64_t nbytes, total;
    int kind, n, nb;
    symm_status_t st;
    if ((st = prologue(call, team, stream, dtype, &op, acc, algo, NULL, recv_count, 1, &a)) != SYMM_SUCCESS ||
        recv_count == 0)
        return st;
    t = a.t;
    nbytes = a.nbytes;
    total = a.total;
    kind = a.kind;
    n = t->ctx.n_pes;
    /* in place: recv is this PE's piece of send */
    if ((st = check_pair(call, send, total, recv, nbytes, 1, (uintptr_t)recv - (uint64_t)t->ctx.my_pe * nbytes,
                         "recv overlaps send other than at send + my_pe * recv_count")) != SYMM_SUCCESS)
        return st;
    if (t->far)
        return far_coll(t, call, SYMM__BE_COLL_REDUCE_SCATTER, send, recv, recv_count, a.esz, dtype, op, acc, -1,
                        total, nbytes, stream);
    if ((st = requested(call, algo, &algo)) != SYMM_SUCCESS)
        return st;
    if (algo == SYMM_COLL_ALGO_AUTO) {
        algo = nbytes <= a.lim.rs_packet_max  ? SYMM_COLL_ALGO_PACKET
             : nbytes <= a.lim.rs_oneshot_max ? SYMM_COLL_ALGO_ONESHOT
             : nbytes >= a.lim.push_rs_min    ? SYMM_COLL_ALGO_PUSH
                                              : SYMM_COLL_ALGO_TWOSHOT;
        if (nbytes >= a.lim.rs_ce_min && ce_ok(t)) {
            symm__coll_pipe_t pp;
            pipe_of(t, &a.lim, SYMM__PIPE_RS, nbytes, kind, (int)op, -1, &pp);
            if ((st = symm__coll_ce_rs(&pp, send, recv, nbytes, nbytes, kind, (int)op, stream)) == SYMM_SUCCESS)
                snprintf(t_last_algo, sizeof(t_last_algo), "copy-engine");
            return st;
        }
    }
    /* ONESHOT: each piece into its owner's plain-data region, when a slot's
     * share fits (its last unit holds the signature: symm__c_handshake_sig) */
    if (algo == SYMM_COLL_ALGO_ONESHOT &&
        (nb = region_blocks_of(t, cdiv(nbytes, 16), t->ws.region >= 32 ? t->ws.region / 16 - 1 : 0)) > 0) {
        base_launch(&l, t, SYMM__CK_RS_ONESHOT, nb);
        l.dst = recv;
        l.src = send;
        l.nbytes = nbytes;
        l.piece = nbytes;
        l.kind = kind;
        l.op = (int)op;
        if ((st = symm__coll_launch(&l, stream)) == SYMM_SUCCESS)
            snprintf(t_last_algo, sizeof(t_last_algo), "oneshot");
        return st;
    }
    /* PUSH and PACKET: one launch whatever the buffers (the peers' data
     * reaches this PE through its scratch; every load is local) */
    if (algo == SYMM_COLL_ALGO_PUSH ||
        (algo == SYMM_COLL_ALGO_PACKET && (nb = region_blocks(t, cdiv(nbytes, 8))) > 0)) {
        if (algo == SYMM_COLL_ALGO_PUSH) {
            base_launch(&l, t, SYMM__CK_RS_PUSH, push_blocks(t, nbytes));
            push_launch(&l, t);
        } else {
            base_launch(&l, t, SYMM__CK_RED_PACKET, nb);
        }
        l.dst = recv;
        l.src = send;
        l.nbytes = nbytes;
        l.piece = nbytes;
        l.kind = kind;
        l.op = (int)op;
        if ((st = symm__coll_launch(&l, stream)) == SYMM_SUCCESS)
            set_last(algo, NULL, 0);
        return st;
    }
    {
        int sym_s = in_heap(send, total);
        uint64_t piece = stage_piece((uint64_t)n), off;
        for (off = 0; off < nbytes; off += piece) {
            uint64_t len = nbytes - off < piece ? nbytes - off : piece;
            base_launch(&l, t, SYMM__CK_RS_DIRECT, direct_blocks(t, len));
            l.dst = (char *)recv + off;
            l.src = (const char *)send + off;
            l.nbytes = len;
            l.piece = nbytes;
            if (!sym_s) {
                if ((st = symm__coll_copy2d(t->stage, len, (const char *)send + off, nbytes, len, (size_t)n,
                                            stream)) != SYMM_SUCCESS)
                    return st;
                l.src = t->stage;
                l.piece = len;
            }
            l.kind = kind;
            l.op = (int)op;
            if ((st = symm__coll_launch(&l, stream)) != SYMM_SUCCESS)
                return st;
        }
        set_last(SYMM_COLL_ALGO_TWOSHOT, "direct", !sym_s);
    }
    return SYMM_SUCCESS;
}

symm_status_t symm_reduce_scatter(const void *send, void *recv, size_t recv_count, symm_dtype_t dtype,
                                  symm_redop_t op, symm_team_t team, symm_stream_t stream) {
    return symm_reduce_scatter_ex(send, recv, recv_count, dtype, op, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_AUTO,
                                  team, stream);
}

/* ---- data movement: all-gather, all-to-all, broadcast ------------------------------- */

/*
 * One routine for the three: PE me sends `nbytes` from send + p * src_piece
 * to PE p, landing at p's recv + me * out_piece (broadcast, root >= 0: the
 * root sends send to everyone's recv). `rows`: how many pieces of recv the
 * stage must hold (n, or 1 for broadcast).
 */
static symm_status_t move(coll_team_t *t, const char *call, const void *send, void *recv, uint64_t nbytes,
                          uint64_t src_piece, uint64_t out_piece, int root, const symm__coll_limits_t *lim,
                          symm_stream_t stream) {
    uint64_t packet_max = root >= 0 ? lim->bcast_packet_max : lim->packet_max;
    symm__coll_launch_t l;
    symm_coll_algo_t algo = SYMM_COLL_ALGO_AUTO;
    symm_status_t st;
    int n = t->ctx.n_pes, me = t->ctx.my_pe, nb;
    uint64_t rows = root >= 0 ? 1 : (uint64_t)n;
    uint64_t recv_bytes = root >= 0 ? nbytes : nbytes * (uint64_t)n;
    if (t->far) /* bytes, whatever the type: these only move data */
        return far_coll(t, call,
                        root >= 0        ? SYMM__BE_COLL_BROADCAST
                        : src_piece == 0 ? SYMM__BE_COLL_ALL_GATHER
                                         : SYMM__BE_COLL_ALL_TO_ALL,
                        send, recv, nbytes, 1, SYMM_DTYPE_U8, 0, SYMM_DTYPE_DEFAULT, root,
                        root >= 0 || src_piece == 0 ? nbytes : recv_bytes, recv_bytes, stream);
    if ((st = requested(call, SYMM_COLL_ALGO_AUTO, &algo)) != SYMM_SUCCESS)
        return st;
    if (algo == SYMM_COLL_ALGO_AUTO && root < 0 && symm__env()->coll_ce_min != 0 &&
        nbytes >= (uint64_t)symm__env()->coll_ce_min) {
        int ce = 0;
        if ((st = want_ce(t, call, recv, recv_bytes, &ce)) != SYMM_SUCCESS)
            return st;
        if (ce) {
            if ((st = symm__coll_ce_move(t->ce, t->team, send, recv, nbytes, src_piece, out_piece, stream)) ==
                SYMM_SUCCESS)
                snprintf(t_last_algo, sizeof(t_last_algo), "copy-engine");
            return st;
        }
    }
    /* broadcast through the copy engines: the root's chunks on its copy
     * engine, the non-roots forwarding (recv symmetric everywhere) */
    if (algo == SYMM_COLL_ALGO_AUTO && root >= 0 && nbytes >= lim->bcast_ce_min && ce_ok(t)) {
        int ce = 0;
        if ((st = want_ce(t, call, recv, recv_bytes, &ce)) != SYMM_SUCCESS)
            return st;
        if (ce) {
            symm__coll_pipe_t pp;
            pipe_of(t, lim, SYMM__PIPE_BCAST, nbytes, -1, 0, root, &pp);
            if ((st = symm__coll_ce_bcast(&pp, send, recv, nbytes, root, stream)) == SYMM_SUCCESS)
                snprintf(t_last_algo, sizeof(t_last_algo), "copy-engine");
            return st;
        }
    }
    if (algo == SYMM_COLL_ALGO_AUTO)
        algo = nbytes <= packet_max ? SYMM_COLL_ALGO_PACKET : SYMM_COLL_ALGO_TWOSHOT;
    /* broadcast: past bcast_hop1_max the root's packets go to one
     * non-root each and are forwarded from there (n >= 3) */
    if (algo == SYMM_COLL_ALGO_PACKET && root >= 0 && n >= 3 && nbytes > lim->bcast_hop1_max &&
        (nb = bcast2_blocks(t, cdiv(nbytes, 8), n - 1)) > 0) {
        base_launch(&l, t, SYMM__CK_BCAST_PACKET2, nb);
        l.dst = recv;
        l.src = send;
        l.nbytes = nbytes;
        l.root = root;
        if ((st = symm__coll_launch(&l, stream)) == SYMM_SUCCESS)
            snprintf(t_last_algo, sizeof(t_last_algo), "packet-2hop");
        return st;
    }
    if (algo == SYMM_COLL_ALGO_PACKET && (nb = region_blocks(t, cdiv(nbytes, 8))) > 0) {
        base_launch(&l, t, SYMM__CK_MOVE_PACKET, nb);
        l.dst = recv;
        l.src = send;
        l.nbytes = nbytes;
        l.piece = src_piece;
        l.out = out_piece;
        l.root = root;
        if ((st = symm__coll_launch(&l, stream)) == SYMM_SUCCESS)
            set_last(SYMM_COLL_ALGO_PACKET, NULL, 0);
        return st;
    }
    {
        int sym_r = in_heap(recv, recv_bytes);
        uint64_t piece = stage_piece(rows), off;
        for (off = 0; off < nbytes; off += piece) {
            uint64_t len = nbytes - off < piece ? nbytes - off : piece;
            base_launch(&l, t, SYMM__CK_MOVE_DIRECT, direct_blocks_max(t, len, SYMM__COLL_MOVE_BLOCKS));
            l.src = send ? (const char *)send + off : NULL;
            l.nbytes = len;
            l.piece = src_piece;
            l.root = root;
            if (sym_r) {
                l.dst = (char *)recv + off;
                l.out = root >= 0 ? 0 : (uint64_t)me * out_piece;
            } else {
                l.dst = t->stage;
                l.out = root >= 0 ? 0 : (uint64_t)me * len;
            }
            if ((st = symm__coll_launch(&l, stream)) != SYMM_SUCCESS)
                return st;
            if (!sym_r && (st = symm__coll_copy2d((char *)recv + off, root >= 0 ? len : out_piece, t->stage, len,
                                                  len, (size_t)rows, stream)) != SYMM_SUCCESS)
                return st;
        }
        set_last(SYMM_COLL_ALGO_TWOSHOT, "direct", !sym_r);
    }
    return SYMM_SUCCESS;
}

symm_status_t symm_all_gather(const void *send, void *recv, size_t send_count, symm_dtype_t dtype,
                              symm_team_t team, symm_stream_t stream) {
    const char *call = "symm_all_gather";
    coll_args_t a;
    symm_status_t st;
    if ((st = prologue(call, team, stream, dtype, NULL, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_AUTO, NULL, send_count, 1,
                       &a)) != SYMM_SUCCESS ||
        send_count == 0)
        return st;
    /* in place: send is this PE's piece of recv */
    if ((st = check_pair(call, send, a.nbytes, recv, a.total, 1,
                         (uintptr_t)recv + (uint64_t)a.t->ctx.my_pe * a.nbytes,
                         "send overlaps recv other than at recv + my_pe * send_count")) != SYMM_SUCCESS)
        return st;
    return move(a.t, call, send, recv, a.nbytes, 0, a.nbytes, -1, &a.lim, stream);
}

symm_status_t symm_all_to_all(const void *send, void *recv, size_t count, symm_dtype_t dtype, symm_team_t team,
                              symm_stream_t stream) {
    const char *call = "symm_all_to_all";
    coll_args_t a;
    symm_status_t st;
    if ((st = prologue(call, team, stream, dtype, NULL, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_AUTO, NULL, count, 1,
                       &a)) != SYMM_SUCCESS ||
        count == 0)
        return st;
    if ((st = check_pair(call, send, a.total, recv, a.total, 0, 0,
                         "send and recv overlap (all-to-all is not in place)")) != SYMM_SUCCESS)
        return st;
    return move(a.t, call, send, recv, a.nbytes, a.nbytes, a.nbytes, -1, &a.lim, stream);
}

symm_status_t symm_broadcast(const void *send, void *recv, size_t count, symm_dtype_t dtype, int root,
                             symm_team_t team, symm_stream_t stream) {
    const char *call = "symm_broadcast";
    coll_args_t a;
    coll_team_t *t;
    uint64_t nbytes;
    symm_status_t st;
    if ((st = prologue(call, team, stream, dtype, NULL, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_AUTO, &root, count, 0,
                       &a)) != SYMM_SUCCESS ||
        count == 0)
        return st;
    t = a.t;
    nbytes = a.nbytes;
    /* send is read on the root only (checked there before recv, as before) */
    if (root == t->ctx.my_pe) {
        if ((st = check_buf(call, "send", send, nbytes)) != SYMM_SUCCESS)
            return st;
        if (send != recv && overlap(send, nbytes, recv, nbytes))
            return symm__error(SYMM_ERR_INVALID_ARG, "%s: send and recv overlap without being equal", call);
    } else {
        send = NULL; /* read on the root only */
    }
    if ((st = check_buf(call, "recv", recv, nbytes)) != SYMM_SUCCESS)
        return st;
    return move(t, call, send, recv, nbytes, 0, 0, root, &a.lim, stream);
}

/* ---- all_to_allv ------------------------------------------------------------------------ */

symm_status_t symm_all_to_allv(const void *send, const size_t *send_counts, const size_t *send_displs, void *recv,
                               const size_t *recv_counts, const size_t *recv_displs, symm_dtype_t dtype,
                               symm_team_t team, symm_stream_t stream) {
    const char *call = "symm_all_to_allv";
    coll_team_t *t = NULL;
    symm__coll_launch_t l;
    uint64_t words[4 * SYMM_COLL_MAX_PES];
    uint64_t sext = 0, rext = 0, b = 0;
    uint32_t esz = 0;
    int n, p, sym_r;
    symm_status_t st;
    symm__error_clear();
    if ((st = get_team(team, stream, call, &t)) != SYMM_SUCCESS)
        return st;
    if ((st = check_dtype(call, dtype, &esz)) != SYMM_SUCCESS)
        return st;
    if (t->far)
        return symm__error(SYMM_ERR_UNSUPPORTED, "%s: the team has PEs outside the load/store window, and "
                           "neither NVSHMEM nor NCCL has an all-to-allv", call);
    if (!send_counts || !send_displs || !recv_counts || !recv_displs)
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: a count or displacement array is NULL", call);
    n = t->ctx.n_pes;
    for (p = 0; p < n; p++) {
        uint64_t e = 0;
        if ((st = bytes_of(call, send_counts[p], esz, 2, &b)) != SYMM_SUCCESS ||
            (st = bytes_of(call, send_displs[p], esz, 2, &e)) != SYMM_SUCCESS)
            return st;
        if (b && e + b > sext)
            sext = e + b;
        if ((st = bytes_of(call, recv_counts[p], esz, 2, &b)) != SYMM_SUCCESS ||
            (st = bytes_of(call, recv_displs[p], esz, 2, &e)) != SYMM_SUCCESS)
            return st;
        if (b && e + b > rext)
            rext = e + b;
        words[p] = send_counts[p];
        words[n + p] = send_displs[p];
        words[2 * n + p] = recv_counts[p];
        words[3 * n + p] = recv_displs[p];
    }
    if (sext && (st = check_buf(call, "send", send, sext)) != SYMM_SUCCESS)
        return st;
    if (rext && (st = check_buf(call, "recv", recv, rext)) != SYMM_SUCCESS)
        return st;
    if (overlap(send, sext, recv, rext))
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: send and recv overlap", call);
    /* a PE that receives nothing still publishes a dst to the peers' heap
     * check: the stage stands in for it (nothing lands there) */
    sym_r = rext != 0 && in_heap(recv, rext);
    if (!sym_r && rext > SYMM__COLL_STAGE_BYTES)
        return symm__error(SYMM_ERR_INVALID_ARG,
                           "%s: recv is not symmetric and its extent (%llu bytes) exceeds the staging area "
                           "(%zu bytes): allocate it with symm_malloc", call, (unsigned long long)rext,
                           SYMM__COLL_STAGE_BYTES);
    /* The block count must be the same on every PE (block b handshakes only
     * with block b of the peers, and each slot counts its own calls), so it
     * cannot depend on this PE's counts: a PE sending less launched fewer
     * blocks, the others' extra blocks waited forever (the move-part hang of
     * GPU run 3) or desynchronised those slots' call counters. */
    base_launch(&l, t, SYMM__CK_A2AV_DIRECT, direct_blocks(t, SYMM__COLL_STAGE_BYTES));
    l.dst = sym_r ? recv : t->stage;
    l.src = send;
    l.esz = esz;
    l.a2av = words;
    if ((st = symm__coll_launch(&l, stream)) != SYMM_SUCCESS)
        return st;
    if (!sym_r)
        for (p = 0; p < n; p++)
            if (recv_counts[p] &&
                (st = symm__coll_copy((char *)recv + recv_displs[p] * esz, t->stage + recv_displs[p] * esz,
                                      recv_counts[p] * esz, stream)) != SYMM_SUCCESS)
                return st;
    set_last(SYMM_COLL_ALGO_TWOSHOT, "direct", !sym_r && rext != 0);
    return SYMM_SUCCESS;
}

/* ---- testing hook ------------------------------------------------------------------------- */

symm_status_t symm__coll_debug_set_epoch(symm_team_t team, uint64_t count) {
    coll_team_t *t = NULL;
    uint64_t words[SYMM_COLL_MAX_BLOCKS];
    symm_status_t st;
    if ((st = get_team(team, NULL, "symm__coll_debug_set_epoch", &t)) != SYMM_SUCCESS)
        return st;
    for (int i = 0; i < SYMM_COLL_MAX_BLOCKS; i++)
        words[i] = count;
    /* Old flag values and packets are cleared (0 is never a flag), so the
     * jump cannot make a stale value look current. */
    if ((st = symm__coll_zero(t->ctx.scratch + SYMM__COLL_WS_GRID_OFF,
                              t->ctx.scratch_size - SYMM__COLL_WS_GRID_OFF)) != SYMM_SUCCESS)
        return st;
    if ((st = symm__coll_write(t->ctx.scratch + SYMM__COLL_WS_EPOCH_OFF, words, sizeof(words))) != SYMM_SUCCESS)
        return st;
    /* The push pipeline as if `count` steps of every slot had been made:
     * its step counters, and every ready and freed word at their value. */
    {
        uint64_t base = (uint64_t)(uintptr_t)t->push;
        size_t nw = (size_t)SYMM_COLL_MAX_BLOCKS * SYMM_COLL_MAX_PES;
        uint32_t *w32 = (uint32_t *)malloc(nw * sizeof(uint32_t));
        if (w32 == NULL)
            return symm__error(SYMM_ERR_INTERNAL, "symm__coll_debug_set_epoch: out of host memory");
        for (size_t i = 0; i < nw; i++)
            w32[i] = (uint32_t)count;
        st = symm__coll_write(base + SYMM__COLL_PUSH_STEPS_OFF, words, sizeof(words));
        if (st == SYMM_SUCCESS)
            st = symm__coll_write(base + SYMM__COLL_PUSH_READY_OFF, w32, nw * sizeof(uint32_t));
        if (st == SYMM_SUCCESS)
            st = symm__coll_write(base + SYMM__COLL_PUSH_FREED_OFF, w32, nw * sizeof(uint32_t));
        free(w32);
        return st;
    }
}
