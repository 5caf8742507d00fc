/*
 * coll_team.c - a team's collective state (the staging and push areas, the
 * copy-engine streams, the workspace geometry), made by the first
 * collective on the team and freed with it; the last algorithm; the testing
 * hook that moves the call counters near their wrap.
 */
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "symm/symm.h"
#include "core/env.h"
#include "core/log.h"
#include "heap/heap.h"
#include "runtime/team.h"
#include "coll/coll.h"
#include "coll/coll_launch.h"
#include "coll/coll_host.h"

static const char g_team_key; /* finds symm__coll_team_t among a team's module state */
static uint32_t g_nbmax;
static _Thread_local char t_last_algo[32] = "none";

const char *symm_coll_last_algo(void) { return t_last_algo; }

void symm__coll_set_last(symm_coll_algo_t algo, const char *direct_name, int staged) {
    const char *name = algo == SYMM_COLL_ALGO_PACKET ? "packet"
                     : direct_name ? direct_name : symm_coll_algo_name(algo);
    snprintf(t_last_algo, sizeof(t_last_algo), "%s%s", name, staged ? "+staged" : "");
}

void symm__coll_set_last_name(const char *name) { snprintf(t_last_algo, sizeof(t_last_algo), "%s", name); }

/* The data regions of t's workspace: SYMM__COLL_WS_NBMAX block slots unless
 * symm__coll_tune_nbmax said otherwise. */
static void set_geometry(symm__coll_team_t *t) {
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
        symm__coll_team_t *t = symm__team_ext_get(team, &g_team_key);
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
    symm__coll_team_t *t = state;
    symm__coll_ce_destroy(t->ce);
    free(t);
}

symm_status_t symm__coll_team_get(symm_team_t team, symm_stream_t stream, const char *call, symm__coll_team_t **out) {
    symm__coll_team_t *t = NULL;
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
    /* First call on this team: every PE is here (the call is collective).
     * A backend without GPU collectives is named before the capture check,
     * which cannot ask CUDA where there is no GPU. */
    const symm__backend_ops_t *be = symm__runtime_backend();
    if (!(be->kernel_caps & SYMM__BE_KCAP_COLL))
        return symm__error(SYMM_ERR_UNSUPPORTED, "%s: the %s backend has no GPU collectives", call, be->name);
    if (symm__coll_capturing(stream) != 0)
        return symm__error(SYMM_ERR_INVALID_ARG,
                           "%s: the first collective on a team allocates its staging area and must be "
                           "made outside CUDA graph capture", call);
    const symm_ctx_t *ctx = symm__team_host_ctx(team);
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


/* ---- testing hook ------------------------------------------------------------------------- */

symm_status_t symm__coll_debug_set_epoch(symm_team_t team, uint64_t count) {
    symm__coll_team_t *t = NULL;
    uint64_t words[SYMM_COLL_MAX_BLOCKS];
    symm_status_t st;
    if ((st = symm__coll_team_get(team, NULL, "symm__coll_debug_set_epoch", &t)) != SYMM_SUCCESS)
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

