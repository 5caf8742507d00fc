/*
 * barrier.c - host-side synchronisation: symm_barrier_all, the stream
 * barriers (dispatched to the backend), and the small host exchanges over
 * the bootstrap.
 */
#include <stdlib.h>

#include "runtime/runtime.h"

symm_status_t symm_barrier_all(void) {
    SYMM__REQUIRE_INIT("symm_barrier_all");
    symm_status_t st = symm__synchronize_or_report("symm_barrier_all");
    /* A failed device was reported to the others (they stop waiting for this
     * PE), and the barrier then fails at once; report the device error first. */
    symm_status_t st_bar = symm__bootstrap_barrier(symm__rt.boot);
    return st != SYMM_SUCCESS ? st : st_bar;
}

symm_status_t symm_team_barrier_on_stream(symm_team_t team, symm_stream_t stream) {
    SYMM__REQUIRE_INIT("symm_team_barrier_on_stream");
    if (team != &symm__rt.world && team != &symm__rt.node)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_team_barrier_on_stream: not a team handle");
    return symm__rt.be->ops->barrier_on_stream(symm__rt.be, team->d_ctx, &team->host_ctx, stream);
}

symm_status_t symm_barrier_all_on_stream(symm_stream_t stream) {
    SYMM__REQUIRE_INIT("symm_barrier_all_on_stream");
    return symm_team_barrier_on_stream(&symm__rt.world, stream);
}

/* Both exchanges first gather every PE's nbytes, so a size mismatch is an
 * error on every PE rather than a protocol failure. */
static symm_status_t check_nbytes(size_t nbytes, const char *what) {
    symm__runtime_t *rt = &symm__rt;
    uint64_t mine = nbytes;
    uint64_t *all = calloc((size_t)rt->nranks, sizeof(uint64_t));
    if (!all)
        return symm__error(SYMM_ERR_NO_MEMORY, "%s: out of host memory", what);
    symm_status_t st = symm__bootstrap_allgather(rt->boot, &mine, all, sizeof(mine));
    for (int r = 1; st == SYMM_SUCCESS && r < rt->nranks; r++)
        if (all[r] != all[0])
            st = symm__error(SYMM_ERR_MISMATCH, "%s: nbytes differ across PEs (PE 0: %llu, PE %d: "
                             "%llu)", what, (unsigned long long)all[0], r,
                             (unsigned long long)all[r]);
    free(all);
    return st;
}

symm_status_t symm_host_broadcast(void *buf, size_t nbytes, int root) {
    SYMM__REQUIRE_INIT("symm_host_broadcast");
    if (root < 0 || root >= symm__rt.nranks)
        return symm__error(SYMM_ERR_INVALID_PE, "symm_host_broadcast: root %d not in [0, %d)", root,
                           symm__rt.nranks);
    if (!buf && nbytes)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_host_broadcast: buf is NULL");
    symm_status_t st = check_nbytes(nbytes, "symm_host_broadcast");
    if (st != SYMM_SUCCESS || nbytes == 0)
        return st;
    return symm__bootstrap_bcast(symm__rt.boot, buf, nbytes, root);
}

symm_status_t symm_host_allgather(const void *mine, void *all, size_t nbytes) {
    SYMM__REQUIRE_INIT("symm_host_allgather");
    if ((!mine || !all) && nbytes)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_host_allgather: NULL buffer");
    symm_status_t st = check_nbytes(nbytes, "symm_host_allgather");
    if (st != SYMM_SUCCESS || nbytes == 0)
        return st;
    return symm__bootstrap_allgather(symm__rt.boot, mine, all, nbytes);
}
