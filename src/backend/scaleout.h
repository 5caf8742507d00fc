/*
 * scaleout.h - what the scale-out backends (nvshmem, nccl) share: they sit on
 * the native backend for this PE's GPU (device choice, small device memory,
 * the abort flag, symm's own kernels on load/store peers) and add a library
 * for the heap and for the peers that load/store cannot reach.
 */
#ifndef SYMM_BACKEND_SCALEOUT_H
#define SYMM_BACKEND_SCALEOUT_H

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The head of every scale-out backend's state. */
typedef struct symm__scaleout {
    symm__backend_t base;
    symm__backend_t *native; /* args->native, owned from open on */
    symm__bootstrap_t *boot;
    int rank, nranks;
    int force_remote;        /* SYMM_DEBUG_FORCE_REMOTE */
} symm__scaleout_t;

/* Take over args->native and copy its device facts into so->base. */
void symm__scaleout_init(symm__scaleout_t *so, const symm__backend_ops_t *ops, const symm__backend_args_t *args);
/* Close the native backend under it (the caller frees its own state). */
void symm__scaleout_close(symm__scaleout_t *so);

/* The operations handed down to the native backend unchanged. */
symm_status_t symm__scaleout_dev_alloc(symm__backend_t *be, size_t size, void **dptr);
symm_status_t symm__scaleout_dev_write(symm__backend_t *be, void *dptr, const void *src, size_t size);
void symm__scaleout_dev_free(symm__backend_t *be, void *dptr);
symm_status_t symm__scaleout_flag_alloc(symm__backend_t *be, volatile uint32_t **host, uint64_t *dev);
void symm__scaleout_flag_free(symm__backend_t *be, volatile uint32_t *host);
symm_status_t symm__scaleout_memset_sync(symm__backend_t *be, void *ptr, int value, size_t size);
symm_status_t symm__scaleout_memcpy_sync(symm__backend_t *be, void *dst, const void *src, size_t size);
symm_status_t symm__scaleout_synchronize(symm__backend_t *be);
symm_status_t symm__scaleout_function_module(symm__backend_t *be, void *function, void **module);
symm_status_t symm__scaleout_module_has_global(symm__backend_t *be, void *module, const char *name, int *found);

/* Rank 0 makes a library's unique id with make(id, arg) (0: success) and
 * every rank receives it, with rank 0's verdict, over symm's bootstrap.
 * SYMM_ERR_UNSUPPORTED on every rank when rank 0 failed (`what` names it). */
symm_status_t symm__scaleout_share_id(symm__scaleout_t *so, void *id, size_t bytes,
                                      int (*make)(void *id, void *arg), void *arg, const char *what);

/* Set a library's environment variable `name` to `value` unless the user set
 * it (force == 0), or always (force != 0, logged when it overrides). */
void symm__scaleout_setenv(const char *name, const char *value, int force);

/* The load/store window of this PE among the world: base[r] is world PE r's
 * copy of this PE's heap base as this GPU addresses it (0: not reachable).
 * The largest run of consecutive PEs around `me` whose copies sit at
 * base[me] + (r - me) * stride for one stride: *first, *count (at least me
 * itself) and *stride (0 when the run is me alone). Local. */
void symm__scaleout_window(const uintptr_t *base, int n, int me, int *first, int *count, size_t *stride);

/* Make the windows agree (collective): every PE of each PE's window must
 * have that same window, since both ends of a device call and of a
 * collective take the path it says. Where they do not (a library that maps
 * a peer one way only), every PE keeps itself alone: *first = me, *count = 1,
 * *stride = 0. A count of 0 (SYMM_DEBUG_FORCE_REMOTE) is left as it is. */
symm_status_t symm__scaleout_agree_window(symm__scaleout_t *so, int *first, int *count, size_t *stride);

/* A team's window from the world's: the team PEs i around team PE `my`
 * with world_pe[i] - world_pe[my] == i - my that lie in the world window
 * [wfirst, wfirst + wcount). Local. */
void symm__scaleout_team_window(const int *world_pe, int n, int my, int wfirst, int wcount, int *first,
                                int *count);

/* team_open's last step: the team's device state at `state` and its window
 * from the world's [wfirst, wfirst + wcount) (none when wcount is 0). Local. */
void symm__scaleout_team_place(const symm__team_desc_t *team, uint64_t state, int wfirst, int wcount,
                               symm__team_backend_t *out);
/* team_close: free the team's device state. */
void symm__scaleout_team_close(symm__backend_t *be, symm__team_backend_t *tb);
/* 1 when every PE of the team is in its load/store window (symm's kernels serve it). */
int symm__scaleout_ldst_all(const symm_ctx_t *h);

#ifdef __cplusplus
}
#endif

#endif /* SYMM_BACKEND_SCALEOUT_H */
