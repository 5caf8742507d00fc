/*
 * scaleout.c - see scaleout.h.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "backend/scaleout.h"
#include "bootstrap/bootstrap.h"
#include "core/env.h"
#include "core/log.h"

static symm__backend_t *native_of(symm__backend_t *be) { return ((symm__scaleout_t *)be)->native; }

void symm__scaleout_init(symm__scaleout_t *so, const symm__backend_ops_t *ops, const symm__backend_args_t *args) {
    symm__backend_t *nb = args->native;
    so->native = nb;
    so->boot = args->boot;
    so->rank = symm__bootstrap_rank(args->boot);
    so->nranks = symm__bootstrap_nranks(args->boot);
    so->force_remote = symm__env()->debug_force_remote;
    so->base.ops = ops;
    so->base.device = nb->device;
    so->base.granularity = nb->granularity;
    so->base.stride_hint = 0;
    so->base.gpu_pes = nb->gpu_pes;
    so->base.sm_share = nb->sm_share;
}

void symm__scaleout_close(symm__scaleout_t *so) {
    if (so->native)
        so->native->ops->close(so->native);
    so->native = NULL;
}

symm_status_t symm__scaleout_dev_alloc(symm__backend_t *be, size_t size, void **dptr) {
    return native_of(be)->ops->dev_alloc(native_of(be), size, dptr);
}

symm_status_t symm__scaleout_dev_write(symm__backend_t *be, void *dptr, const void *src, size_t size) {
    return native_of(be)->ops->dev_write(native_of(be), dptr, src, size);
}

void symm__scaleout_dev_free(symm__backend_t *be, void *dptr) { native_of(be)->ops->dev_free(native_of(be), dptr); }

symm_status_t symm__scaleout_flag_alloc(symm__backend_t *be, volatile uint32_t **host, uint64_t *dev) {
    return native_of(be)->ops->flag_alloc(native_of(be), host, dev);
}

void symm__scaleout_flag_free(symm__backend_t *be, volatile uint32_t *host) {
    native_of(be)->ops->flag_free(native_of(be), host);
}

symm_status_t symm__scaleout_memset_sync(symm__backend_t *be, void *ptr, int value, size_t size) {
    return native_of(be)->ops->memset_sync(native_of(be), ptr, value, size);
}

symm_status_t symm__scaleout_memcpy_sync(symm__backend_t *be, void *dst, const void *src, size_t size) {
    return native_of(be)->ops->memcpy_sync(native_of(be), dst, src, size);
}

symm_status_t symm__scaleout_synchronize(symm__backend_t *be) {
    return native_of(be)->ops->synchronize(native_of(be));
}

symm_status_t symm__scaleout_function_module(symm__backend_t *be, void *function, void **module) {
    return native_of(be)->ops->function_module(native_of(be), function, module);
}

symm_status_t symm__scaleout_module_has_global(symm__backend_t *be, void *module, const char *name, int *found) {
    return native_of(be)->ops->module_has_global(native_of(be), module, name, found);
}

symm_status_t symm__scaleout_share_id(symm__scaleout_t *so, void *id, size_t bytes,
                                      int (*make)(void *id, void *arg), void *arg, const char *what) {
    /* One message: rank 0's verdict travels with the id, so every rank gives
     * up together instead of some waiting inside the library for it. */
    size_t len = sizeof(int32_t) + bytes;
    unsigned char *msg = calloc(1, len);
    if (!msg)
        return symm__error(SYMM_ERR_NO_MEMORY, "%s: out of host memory", what);
    int32_t ok = 1;
    if (so->rank == 0) {
        ok = make(id, arg) == 0;
        memcpy(msg + sizeof ok, id, bytes);
    }
    memcpy(msg, &ok, sizeof ok);
    symm_status_t st = symm__bootstrap_bcast(so->boot, msg, len, 0);
    if (st == SYMM_SUCCESS) {
        memcpy(&ok, msg, sizeof ok);
        memcpy(id, msg + sizeof ok, bytes);
        if (!ok)
            st = so->rank == 0 ? symm__error(SYMM_ERR_UNSUPPORTED, "%s failed", what)
                               : symm__error(SYMM_ERR_UNSUPPORTED, "%s failed on PE 0", what);
    }
    free(msg);
    return st;
}

void symm__scaleout_setenv(const char *name, const char *value, int force) {
    const char *cur = getenv(name);
    if (cur && !force)
        return;
    if (cur && strcmp(cur, value) != 0)
        SYMM_LOG_WARN("%s=%s overridden with %s (symm's multicast gate, decision 7)", name, cur, value);
    if (setenv(name, value, 1) != 0)
        SYMM_LOG_WARN("could not set %s=%s", name, value);
}

void symm__scaleout_window(const uintptr_t *base, int n, int me, int *first, int *count, size_t *stride) {
    int lo = me, hi = me + 1;
    intptr_t s = 0;
    if (me + 1 < n && base[me + 1])
        s = (intptr_t)(base[me + 1] - base[me]);
    else if (me > 0 && base[me - 1])
        s = (intptr_t)(base[me] - base[me - 1]);
    if (s > 0) {
        while (lo > 0 && base[lo - 1] && (intptr_t)(base[me] - base[lo - 1]) == (intptr_t)(me - lo + 1) * s)
            lo--;
        while (hi < n && base[hi] && (intptr_t)(base[hi] - base[me]) == (intptr_t)(hi - me) * s)
            hi++;
    }
    *first = lo;
    *count = hi - lo;
    *stride = hi - lo > 1 ? (size_t)s : 0;
}

symm_status_t symm__scaleout_agree_window(symm__scaleout_t *so, int *first, int *count, size_t *stride) {
    int n = so->nranks, mine[2] = {*first, *count}, ok = 1;
    int *all = malloc(2 * (size_t)n * sizeof(int));
    if (!all)
        return symm__error(SYMM_ERR_NO_MEMORY, "load/store window: out of host memory");
    symm_status_t st = symm__bootstrap_allgather(so->boot, mine, all, sizeof mine);
    for (int p = 0; st == SYMM_SUCCESS && p < n && ok; p++)
        for (int q = all[2 * p]; all[2 * p + 1] > 0 && q < all[2 * p] + all[2 * p + 1]; q++)
            if (q < 0 || q >= n || all[2 * q] != all[2 * p] || all[2 * q + 1] != all[2 * p + 1])
                ok = 0;
    if (st == SYMM_SUCCESS && !ok && *count > 0) {
        if (so->rank == 0)
            SYMM_LOG_INFO("load/store windows differ between PEs (the library maps some peers one way "
                          "only): every PE reaches only itself by load/store");
        *first = so->rank;
        *count = 1;
        *stride = 0;
    }
    free(all);
    return st;
}

void symm__scaleout_team_window(const int *world_pe, int n, int my, int wfirst, int wcount, int *first,
                                int *count) {
    int lo = my, hi = my + 1;
#define IN_RUN(i) (world_pe[i] - world_pe[my] == (i) - my && world_pe[i] >= wfirst && \
                   world_pe[i] < wfirst + wcount)
    while (lo > 0 && IN_RUN(lo - 1))
        lo--;
    while (hi < n && IN_RUN(hi))
        hi++;
#undef IN_RUN
    *first = lo;
    *count = hi - lo;
}

void symm__scaleout_team_place(const symm__team_desc_t *team, uint64_t state, int wfirst, int wcount,
                               symm__team_backend_t *out) {
    out->state = state;
    if (wcount == 0)
        out->ldst_first = team->my_pe, out->ldst_count = 0;
    else
        symm__scaleout_team_window(team->world_pe, team->n_pes, team->my_pe, wfirst, wcount, &out->ldst_first,
                                   &out->ldst_count);
}

void symm__scaleout_team_close(symm__backend_t *be, symm__team_backend_t *tb) {
    if (tb->state)
        be->ops->dev_free(be, (void *)(uintptr_t)tb->state);
    tb->state = 0;
}

int symm__scaleout_ldst_all(const symm_ctx_t *h) { return h->ldst_first == 0 && h->ldst_count == h->n_pes; }
