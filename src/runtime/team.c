/*
 * team.c - the world and node teams and their device contexts.
 *
 * Each team owns, in the symmetric heap, its barrier words and a scratch
 * area, and a symm_ctx_t in device-visible memory that kernels read. Teams
 * are laid out contiguously (team PE i+1's heap one stride after team PE
 * i's), which is what the context's pointer arithmetic needs; with one node
 * world and node have the same members, but separate state.
 */
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

/* The team's window and the backend's state of it: the whole team for
 * backends without team_open (native, host). */
static symm_status_t team_backend(struct symm_team *t, symm_ctx_t *c) {
    symm__backend_t *be = symm__rt.be;
    if (!be->ops->team_open) {
        c->ldst_first = 0;
        c->ldst_count = t->n_pes;
        return SYMM_SUCCESS;
    }
    const symm__team_desc_t desc = {t->n_pes, t->my_pe, t->world_pe, t == &symm__rt.world};
    symm_status_t st = be->ops->team_open(be, &desc, &t->be);
    if (st != SYMM_SUCCESS)
        return st;
    t->be_open = 1;
    c->backend_state = t->be.state;
    c->ldst_first = t->be.ldst_first;
    c->ldst_count = t->be.ldst_count;
    return SYMM_SUCCESS;
}

static symm_status_t team_create(struct symm_team *t, int n, const int *world_pe, int my_pe) {
    symm__runtime_t *rt = &symm__rt;
    t->n_pes = n;
    t->my_pe = my_pe;
    t->world_pe = malloc((size_t)n * sizeof(int));
    symm_status_t st = t->world_pe ? SYMM_SUCCESS
                                   : symm__error(SYMM_ERR_NO_MEMORY, "team: out of host memory");
    if ((st = symm__agree(st, SYMM_SUCCESS, "team creation")) != SYMM_SUCCESS)
        return st;
    memcpy(t->world_pe, world_pe, (size_t)n * sizeof(int));
    if ((st = symm__heap_alloc(SYMM_BARRIER_WORDS(n) * SYMM__BARRIER_WORD_BYTES, 0, 1,
                               &t->barrier_off)) != SYMM_SUCCESS)
        return st;
    if ((st = symm__heap_alloc(SYMM__TEAM_SCRATCH_BYTES, 0, 1, &t->scratch_off)) != SYMM_SUCCESS)
        return st;
    const uintptr_t base = symm__heap_base();
    symm_ctx_t *c = &t->host_ctx;
    memset(c, 0, sizeof(*c));
    c->magic = SYMM_CTX_MAGIC;
    c->version = SYMM_CTX_VERSION;
    c->my_pe = my_pe;
    c->n_pes = n;
    c->world_pe = rt->rank;
    c->backend = rt->be->ops->kind;
    c->heap_base = base;
    c->heap_size = symm__heap.mapped;
    c->stride = (int64_t)symm__heap.stride;
    double timeout = symm__env()->wait_timeout;
    c->timeout_ns = timeout > 0 ? (uint64_t)(timeout * 1e9) : 0;
    c->abort_flag = rt->abort_dev;
    c->wait_report = base + rt->wait_report_off;
    c->barrier = base + t->barrier_off;
    c->scratch = base + t->scratch_off;
    c->scratch_size = SYMM__TEAM_SCRATCH_BYTES;
    if ((st = symm__agree(team_backend(t, c), SYMM_SUCCESS, "the team's backend state")) != SYMM_SUCCESS)
        return st;
    void *d = NULL;
    st = rt->be->ops->dev_alloc(rt->be, sizeof(*c), &d);
    if (st == SYMM_SUCCESS) {
        t->d_ctx = d;
        st = rt->be->ops->dev_write(rt->be, d, c, sizeof(*c));
    }
    return symm__agree(st, SYMM_SUCCESS, "team context creation");
}

symm_status_t symm__teams_create(void) {
    symm__runtime_t *rt = &symm__rt;
    /* one word per PE, shared by its teams: a PE's stuck waits print one line */
    symm_status_t st = symm__heap_alloc(sizeof(uint64_t), 0, 1, &rt->wait_report_off);
    if ((st = symm__agree(st, SYMM_SUCCESS, "wait report word")) != SYMM_SUCCESS)
        return st;
    /* the world's PEs are all the ranks, on one node or several */
    int *all = malloc((size_t)rt->nranks * sizeof(int));
    if (!all)
        return symm__agree(symm__error(SYMM_ERR_NO_MEMORY, "team: out of host memory"), SYMM_SUCCESS,
                           "team creation");
    for (int r = 0; r < rt->nranks; r++)
        all[r] = r;
    st = team_create(&rt->world, rt->nranks, all, rt->rank);
    free(all);
    if (st == SYMM_SUCCESS)
        st = team_create(&rt->node, rt->n_node, rt->node_ranks, rt->node_me);
    return st;
}

static void team_destroy(struct symm_team *t) {
    for (int i = t->n_ext - 1; i >= 0; i--)
        if (t->ext[i].fini)
            t->ext[i].fini(t->ext[i].state);
    if (t->d_ctx)
        symm__rt.be->ops->dev_free(symm__rt.be, t->d_ctx);
    if (t->be_open)
        symm__rt.be->ops->team_close(symm__rt.be, &t->be);
    free(t->world_pe);
    memset(t, 0, sizeof(*t));
}

void symm__teams_destroy(void) {
    team_destroy(&symm__rt.node);
    team_destroy(&symm__rt.world);
}

/* The pointer form of the context must see the grown heap (symm_ctx_ptr
 * bounds-checks against heap_size). */
symm_status_t symm__teams_update_heap_size(void *unused) {
    (void)unused;
    struct symm_team *teams[2] = {&symm__rt.world, &symm__rt.node};
    for (int i = 0; i < 2; i++) {
        struct symm_team *t = teams[i];
        t->host_ctx.heap_size = symm__heap.mapped;
        if (!t->d_ctx)
            continue;
        symm_status_t st = symm__rt.be->ops->dev_write(symm__rt.be, t->d_ctx, &t->host_ctx,
                                                       sizeof(t->host_ctx));
        if (st != SYMM_SUCCESS)
            return st;
    }
    return SYMM_SUCCESS;
}

symm_status_t symm__teams_set_trace(uint64_t ring) {
    struct symm_team *teams[2] = {&symm__rt.world, &symm__rt.node};
    for (int i = 0; i < 2; i++) {
        struct symm_team *t = teams[i];
        t->host_ctx.trace = ring;
        if (!t->d_ctx)
            continue;
        symm_status_t st = symm__rt.be->ops->dev_write(symm__rt.be, t->d_ctx, &t->host_ctx, sizeof(t->host_ctx));
        if (st != SYMM_SUCCESS)
            return st;
    }
    return SYMM_SUCCESS;
}

symm_status_t symm__dev_copy(void *dst, const void *src, size_t nbytes) {
    if (!symm__rt.initialized)
        return symm__error(SYMM_ERR_NOT_INITIALIZED, "device copy: symm is not initialized");
    return nbytes ? symm__rt.be->ops->memcpy_sync(symm__rt.be, dst, src, nbytes) : SYMM_SUCCESS;
}

/* A team handle this runtime handed out, or NULL. */
static struct symm_team *valid_team(symm_team_t team) {
    if (!symm__rt.initialized || !team)
        return NULL;
    return team == &symm__rt.world || team == &symm__rt.node ? team : NULL;
}

/* ---- team.h: for the modules above the runtime ------------------------------------ */

symm_team_t symm__team_resolve(symm_team_t team) { return valid_team(team ? team : &symm__rt.world); }

symm_team_t symm__team_at(int i) {
    if (!symm__rt.initialized)
        return NULL;
    return i == 0 ? &symm__rt.world : i == 1 ? &symm__rt.node : NULL;
}

const symm_ctx_t *symm__team_host_ctx(symm_team_t team) { return &team->host_ctx; }
const symm_ctx_t *symm__team_dev_ctx(symm_team_t team) { return team->d_ctx; }

symm_status_t symm__team_ext_set(symm_team_t team, const void *key, void *state, void (*fini)(void *state)) {
    struct symm_team *t = valid_team(team);
    if (!t || !key || symm__team_ext_get(team, key))
        return symm__error(SYMM_ERR_INVALID_ARG, "team state: %s",
                           !t ? "not a team handle" : !key ? "NULL key" : "key already set");
    if (t->n_ext == SYMM__TEAM_EXT_MAX)
        return symm__error(SYMM_ERR_INTERNAL, "team state: more than %d modules", SYMM__TEAM_EXT_MAX);
    t->ext[t->n_ext].key = key;
    t->ext[t->n_ext].state = state;
    t->ext[t->n_ext].fini = fini;
    t->n_ext++;
    return SYMM_SUCCESS;
}

void *symm__team_ext_get(symm_team_t team, const void *key) {
    struct symm_team *t = valid_team(team);
    for (int i = 0; t && i < t->n_ext; i++)
        if (t->ext[i].key == key)
            return t->ext[i].state;
    return NULL;
}

/* ---- the public team calls --------------------------------------------------------- */

symm_team_t symm_team_world(void) { return symm__rt.initialized ? &symm__rt.world : NULL; }
symm_team_t symm_team_node(void) { return symm__rt.initialized ? &symm__rt.node : NULL; }

int symm_team_my_pe(symm_team_t team) {
    const struct symm_team *t = valid_team(team);
    return t ? t->my_pe : -1;
}

int symm_team_n_pes(symm_team_t team) {
    const struct symm_team *t = valid_team(team);
    return t ? t->n_pes : -1;
}

int symm_team_translate_pe(symm_team_t src, int pe, symm_team_t dst) {
    const struct symm_team *s = valid_team(src), *d = valid_team(dst);
    if (!s || !d || pe < 0 || pe >= s->n_pes)
        return -1;
    int w = s->world_pe[pe];
    for (int i = 0; i < d->n_pes; i++)
        if (d->world_pe[i] == w)
            return i;
    return -1;
}

symm_status_t symm_team_ctx(symm_team_t team, const symm_ctx_t **d_ctx) {
    SYMM__REQUIRE_INIT("symm_team_ctx");
    const struct symm_team *t = valid_team(team);
    if (!t || !d_ctx)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_team_ctx: %s",
                           t ? "d_ctx is NULL" : "not a team handle");
    *d_ctx = t->d_ctx;
    return SYMM_SUCCESS;
}

symm_status_t symm_team_ctx_copy(symm_team_t team, symm_ctx_t *ctx) {
    SYMM__REQUIRE_INIT("symm_team_ctx_copy");
    const struct symm_team *t = valid_team(team);
    if (!t || !ctx)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_team_ctx_copy: %s",
                           t ? "ctx is NULL" : "not a team handle");
    *ctx = t->host_ctx;
    return SYMM_SUCCESS;
}

symm_status_t symm_ctx(const symm_ctx_t **d_ctx) { return symm_team_ctx(&symm__rt.world, d_ctx); }

const symm__backend_ops_t *symm__runtime_backend(void) { return symm__rt.initialized ? symm__rt.be->ops : NULL; }

symm_status_t symm__team_backend_coll(symm_team_t team, const symm__be_coll_t *c, symm_stream_t stream) {
    symm__backend_t *be = symm__rt.be;
    (void)team;
    if (!be->ops->coll)
        return symm__error(SYMM_ERR_UNSUPPORTED, "%s: the %s backend has no collectives for PEs outside the "
                           "load/store window", c->what, be->ops->name);
    return be->ops->coll(be, c, stream);
}
