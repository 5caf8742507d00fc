/*
 * bootstrap.h - the out-of-band network between the PEs of a job.
 *
 * Plain TCP in a star around rank 0 (docs/design.md decision 4): small host-side
 * collectives for setup (allgather, broadcast, barrier), plus a liveness
 * channel watched by a thread in every process, so a PE that dies turns every
 * other PE's next bootstrap call (and device waits, through the abort flag)
 * into SYMM_ERR_PEER_DIED within SYMM_PEER_TIMEOUT seconds.
 */
#ifndef SYMM_BOOTSTRAP_H
#define SYMM_BOOTSTRAP_H

#include <stdint.h>
#include "symm/symm.h"

typedef struct symm__bootstrap symm__bootstrap_t;

/* Where a job's launcher put this PE. */
typedef struct symm__launch_info {
    int rank, nranks;            /* world */
    int local_rank, local_nranks;/* on this node; -1 if the launcher did not say */
    char root_addr[64];          /* host name or address of rank 0's bootstrap root */
    int root_port;
} symm__launch_info_t;

/* Fill *info from the environment (torchrun/symmrun, mpirun, srun; none: one
 * PE). Errors: SYMM_ERR_ENV naming the incomplete or bad variables. */
symm_status_t symm__launch_info_from_env(symm__launch_info_t *info);

/* Create the root's listening socket and describe it in *uid (rank 0 only). */
symm_status_t symm__bootstrap_make_uid(symm_unique_id_t *uid);

/* Connect the job: every rank calls one of these. Blocks until all nranks
 * ranks have joined or SYMM_BOOTSTRAP_TIMEOUT passes (SYMM_ERR_TIMEOUT).
 * Only processes that hold the job key join (auth.h says where it comes
 * from); rank 0 listens only on the root address (env) or the address in
 * the unique id. */
symm_status_t symm__bootstrap_init_env(const symm__launch_info_t *info, symm__bootstrap_t **out);
symm_status_t symm__bootstrap_init_uid(const symm_unique_id_t *uid, int rank, int nranks,
                                       symm__bootstrap_t **out);

int symm__bootstrap_rank(const symm__bootstrap_t *b);
int symm__bootstrap_nranks(const symm__bootstrap_t *b);

/* Collectives over the star. Every rank calls them in the same order.
 * allgather: all[r * nbytes ...] receives rank r's `mine`; nbytes must be the
 * same everywhere (a mismatch is SYMM_ERR_MISMATCH on every rank). `mine` may
 * be the rank's own slot of `all`. Arguments that differ across ranks (size,
 * bcast root, which collective) or are invalid on one rank (NULL buffer) give
 * the same error on every rank, and the next collective works. On failure
 * the contents of `all` / `buf` are unspecified. A blocked call returns
 * SYMM_ERR_PEER_DIED soon after any PE dies or reports a failure; and when a
 * PE does not arrive within SYMM_WAIT_TIMEOUT (alive but stuck), the root
 * declares it dead, so every PE gets SYMM_ERR_PEER_DIED naming it. */
symm_status_t symm__bootstrap_allgather(symm__bootstrap_t *b, const void *mine, void *all, size_t nbytes);
symm_status_t symm__bootstrap_bcast(symm__bootstrap_t *b, void *buf, size_t nbytes, int root);
symm_status_t symm__bootstrap_barrier(symm__bootstrap_t *b);

/* Point the liveness watcher at a flag to raise (set to dead_pe + 1) when a
 * peer dies, so running kernels see it. May be called any time; NULL stops. */
void symm__bootstrap_set_abort_flag(symm__bootstrap_t *b, volatile uint32_t *flag);

/* Once a PE died or failed, give this process `seconds` to leave symm (to
 * return the error and finalize, or exit); if the bootstrap is still up
 * then (a kernel that keeps being answered by a stopped PE's GPU, a host
 * loop that never calls symm), the watcher thread says so, naming the PE,
 * and ends the process with SYMM__ABORT_EXIT_STATUS (launch_env.h).
 * 0: never (the default of a bootstrap; the runtime sets SYMM_ABORT_GRACE). */
void symm__bootstrap_set_abort_grace(symm__bootstrap_t *b, double seconds);

/* The first PE found dead, or -1. */
int symm__bootstrap_dead_pe(const symm__bootstrap_t *b);

/* This PE has failed (a CUDA error, a kernel that trapped): every PE learns
 * it through the liveness channel as it would a death, within a slice, and
 * this PE's own later bootstrap calls fail too (nobody waits for it). The
 * first death or failure is the one reported. */
void symm__bootstrap_report_failure(symm__bootstrap_t *b, const char *why);

/* A check the watcher thread runs about once a second: non-zero (with a
 * reason in `why`) once this process has failed, which it then reports.
 * Called with the bootstrap's lock held; NULL stops it. */
typedef int (*symm__health_fn)(void *arg, char *why, size_t size);
void symm__bootstrap_set_health(symm__bootstrap_t *b, symm__health_fn fn, void *arg);

/* Close sockets and stop the watcher thread. Not collective (finalize puts a
 * barrier before it). NULL is a no-op. */
void symm__bootstrap_destroy(symm__bootstrap_t *b);

/* ---- node-local descriptor exchange (Unix sockets, SCM_RIGHTS) ---------- */

typedef struct symm__ipc symm__ipc_t;

/* Connect this PE to the other PEs of its node over Unix sockets, checking
 * each peer's credentials (same user, the pid that joined the bootstrap as
 * that PE). `local_ranks[i]` is the world rank of node PE i, `me` this PE's
 * index among them. Collective over the world (every PE calls it; the
 * socket names and pids travel over the bootstrap). */
symm_status_t symm__ipc_create(symm__bootstrap_t *b, const int *local_ranks, int n_local, int me,
                               symm__ipc_t **out);

/* Every node PE contributes `my_fd`; fds[i] receives a descriptor of node PE
 * i's (fds[me] is a dup of my_fd). The caller closes them. Collective over
 * the node's PEs, in the same order. `tag` guards against crossed rounds. */
symm_status_t symm__ipc_allgather_fd(symm__ipc_t *ipc, int my_fd, uint64_t tag, int *fds);

void symm__ipc_destroy(symm__ipc_t *ipc);

#endif /* SYMM_BOOTSTRAP_H */
