/*
 * launch_env.h - the launcher variables of local rank `rank` of an n-PE job
 * on this host: what symmrun sets in each process it starts, and what the
 * multi-process tests set in theirs; launch.c reads them; and the exit
 * status by which symmrun knows a rank that symm ended. Header-only, so
 * symmrun (which does not link libsymm) shares it. Needs POSIX setenv.
 */
#ifndef SYMM_BOOTSTRAP_LAUNCH_ENV_H
#define SYMM_BOOTSTRAP_LAUNCH_ENV_H

#include <stdio.h>
#include <stdlib.h>

/* The exit status of a process that symm ends itself: a peer died or
 * failed, and this process was still in symm SYMM_ABORT_GRACE seconds later
 * (liveness.c); symmrun names it when a rank exits with it. */
#define SYMM__ABORT_EXIT_STATUS 86

/* RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1,
 * SYMM_BOOTSTRAP_PORT, and MASTER_PORT when master_port > 0 (torch's store). */
static inline void symm__launch_env_set(int rank, int n, int master_port, int bootstrap_port) {
    char v[32];
    snprintf(v, sizeof v, "%d", rank);
    setenv("RANK", v, 1);
    setenv("LOCAL_RANK", v, 1);
    snprintf(v, sizeof v, "%d", n);
    setenv("WORLD_SIZE", v, 1);
    setenv("LOCAL_WORLD_SIZE", v, 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    if (master_port > 0) {
        snprintf(v, sizeof v, "%d", master_port);
        setenv("MASTER_PORT", v, 1);
    }
    snprintf(v, sizeof v, "%d", bootstrap_port);
    setenv("SYMM_BOOTSTRAP_PORT", v, 1);
}

#endif /* SYMM_BOOTSTRAP_LAUNCH_ENV_H */
