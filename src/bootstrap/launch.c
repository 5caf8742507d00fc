/*
 * launch.c - where the launcher put this process: the one file that reads
 * launcher variables (torchrun/symmrun, mpirun, srun).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap_internal.h"
#include "core/env.h"
#include "core/log.h"

/* Set and non-empty, else NULL. */
static const char *var(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static int to_int(const char *text, long lo, long hi, int *out) {
    errno = 0;
    char *end = NULL;
    long v = strtol(text, &end, 10);
    if (errno || end == text)
        return -1;
    while (isspace((unsigned char)*end))
        end++;
    if (*end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static symm_status_t int_var(const char *name, long lo, long hi, int *out) {
    const char *v = var(name);
    if (to_int(v, lo, hi, out))
        return symm__error(SYMM_ERR_ENV, "launcher variable %s=\"%.40s\" is not an integer in [%ld, %ld]",
                           name, v, lo, hi);
    return SYMM_SUCCESS;
}

/* The variables one launcher sets. */
typedef struct launcher {
    const char *who;
    const char *rank, *size, *local_rank, *local_size;
} launcher_t;

/* Read rank/size (both required once either is set) and the local pair
 * (optional, but both or neither), and check they fit together. */
static symm_status_t read_pairs(const launcher_t *l, symm__launch_info_t *li) {
    symm_status_t s;
    if (!var(l->rank) || !var(l->size))
        return symm__error(SYMM_ERR_ENV, "%s variables are incomplete: %s is %s but %s is %s", l->who,
                           l->rank, var(l->rank) ? "set" : "missing", l->size,
                           var(l->size) ? "set" : "missing");
    if ((s = int_var(l->size, 1, 1 << 24, &li->nranks)) || (s = int_var(l->rank, 0, 1 << 24, &li->rank)))
        return s;
    if (li->rank >= li->nranks)
        return symm__error(SYMM_ERR_ENV, "%s variables are inconsistent: %s=%d is not below %s=%d",
                           l->who, l->rank, li->rank, l->size, li->nranks);
    li->local_rank = li->local_nranks = -1;
    if (!l->local_rank)
        return SYMM_SUCCESS;
    int have_lr = var(l->local_rank) != NULL;
    int have_ls = l->local_size && var(l->local_size) != NULL;
    if (!have_lr && !have_ls)
        return SYMM_SUCCESS;
    if (l->local_size && have_lr != have_ls)
        return symm__error(SYMM_ERR_ENV, "%s variables are incomplete: %s is %s but %s is %s", l->who,
                           l->local_rank, have_lr ? "set" : "missing", l->local_size,
                           have_ls ? "set" : "missing");
    if (have_lr && (s = int_var(l->local_rank, 0, 1 << 24, &li->local_rank)))
        return s;
    if (have_ls && (s = int_var(l->local_size, 1, 1 << 24, &li->local_nranks)))
        return s;
    if (li->local_nranks > 0 && li->local_rank >= li->local_nranks)
        return symm__error(SYMM_ERR_ENV, "%s variables are inconsistent: %s=%d is not below %s=%d",
                           l->who, l->local_rank, li->local_rank, l->local_size, li->local_nranks);
    if (li->local_nranks > li->nranks)
        return symm__error(SYMM_ERR_ENV, "%s variables are inconsistent: %s=%d exceeds %s=%d", l->who,
                           l->local_size, li->local_nranks, l->size, li->nranks);
    return SYMM_SUCCESS;
}

/* Tasks on this node from Slurm's compressed list "4(x2),3" and SLURM_NODEID;
 * -1 if it cannot be told. */
static int slurm_tasks_on_node(const char *list, int node) {
    const char *p = list;
    int index = 0;
    while (p && *p) {
        char *end;
        long count = strtol(p, &end, 10);
        if (end == p || count < 0)
            return -1;
        long repeat = 1;
        if (end[0] == '(' && end[1] == 'x') {
            repeat = strtol(end + 2, &end, 10);
            if (*end != ')' || repeat < 1)
                return -1;
            end++;
        }
        if (node < index + repeat)
            return (int)count;
        index += (int)repeat;
        if (*end == ',')
            end++;
        else if (*end)
            return -1;
        p = end;
    }
    return -1;
}

static symm_status_t from_slurm(symm__launch_info_t *li) {
    /* Size of this step; SLURM_NTASKS (job allocation) when the step size is
     * not given. */
    launcher_t l = {"srun (Slurm)", "SLURM_PROCID",
                    var("SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS"
                    : var("SLURM_NTASKS")       ? "SLURM_NTASKS"
                                                : "SLURM_NPROCS",
                    "SLURM_LOCALID", NULL};
    symm_status_t s = read_pairs(&l, li);
    if (s)
        return s;
    int n;
    const char *per_node = var("SLURM_NTASKS_PER_NODE");
    if (per_node && to_int(per_node, 1, 1 << 24, &n) == 0) {
        li->local_nranks = n;
    } else {
        const char *list = var("SLURM_STEP_TASKS_PER_NODE") ? var("SLURM_STEP_TASKS_PER_NODE")
                                                             : var("SLURM_TASKS_PER_NODE");
        int node;
        if (list && var("SLURM_NODEID") && to_int(var("SLURM_NODEID"), 0, 1 << 24, &node) == 0)
            li->local_nranks = slurm_tasks_on_node(list, node);
    }
    if (li->local_nranks > 0 && li->local_rank >= li->local_nranks)
        return symm__error(SYMM_ERR_ENV, "srun (Slurm) variables are inconsistent: SLURM_LOCALID=%d "
                           "but %d tasks on this node", li->local_rank, li->local_nranks);
    return SYMM_SUCCESS;
}

/* A port in [20000, 60000) that every process of one job computes alike. */
static int port_from_job_id(const char **which) {
    char id[512];
    const char *v;
    if ((v = var("OMPI_MCA_ess_base_jobid"))) {
        *which = "OMPI_MCA_ess_base_jobid";
        snprintf(id, sizeof id, "ompi:%s", v);
    } else if ((v = var("PMIX_NAMESPACE"))) {
        *which = "PMIX_NAMESPACE";
        snprintf(id, sizeof id, "pmix:%s", v);
    } else if ((v = var("SLURM_JOB_ID"))) {
        const char *step = var("SLURM_STEP_ID") ? var("SLURM_STEP_ID") : var("SLURM_STEPID");
        *which = "SLURM_JOB_ID/SLURM_STEP_ID";
        snprintf(id, sizeof id, "slurm:%s.%s", v, step ? step : "");
    } else {
        return 0;
    }
    return 20000 + (int)(symm__hash64(id, strlen(id), 0) % 40000u);
}

symm_status_t symm__launch_info_from_env(symm__launch_info_t *info) {
    if (!info)
        return symm__error(SYMM_ERR_INVALID_ARG, "launch info: NULL output");
    symm__launch_info_t li;
    memset(&li, 0, sizeof li);
    li.nranks = 1;
    li.local_rank = 0;
    li.local_nranks = 1;
    symm_status_t s = SYMM_SUCCESS;
    const char *who = "no launcher (single PE)";

    static const launcher_t torchrun = {"torchrun/symmrun", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                                        "LOCAL_WORLD_SIZE"};
    static const launcher_t ompi = {"mpirun (Open MPI)", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"};
    if (var("RANK") || var("WORLD_SIZE")) {
        who = torchrun.who;
        s = read_pairs(&torchrun, &li);
    } else if (var("OMPI_COMM_WORLD_RANK") || var("OMPI_COMM_WORLD_SIZE")) {
        who = ompi.who;
        s = read_pairs(&ompi, &li);
    } else if (var("SLURM_PROCID") && (var("SLURM_STEP_ID") || var("SLURM_STEPID"))) {
        /* Only inside an srun step: a batch script also sees SLURM_PROCID and
         * SLURM_NTASKS but is one process, not a task of a parallel step. */
        who = "srun (Slurm)";
        s = from_slurm(&li);
    }
    if (s)
        return s;

    /* Root address. */
    const char *addr = symm__env()->bootstrap_addr;
    const char *addr_from = "SYMM_BOOTSTRAP_ADDR";
    if (!addr || !*addr) {
        addr = var("MASTER_ADDR");
        addr_from = "MASTER_ADDR";
    }
    if (!addr) {
        addr = "127.0.0.1";
        addr_from = "default";
    }
    if (strlen(addr) >= sizeof li.root_addr)
        return symm__error(SYMM_ERR_ENV, "%s=\"%.40s...\" is too long for a host name", addr_from, addr);
    snprintf(li.root_addr, sizeof li.root_addr, "%s", addr);

    /* Root port: ours, else torch's store port + 1, else from the job id. */
    long long p = symm__env()->bootstrap_port;
    if (p < 0 || p > 65535)
        return symm__error(SYMM_ERR_ENV, "SYMM_BOOTSTRAP_PORT=%lld is not a port (1..65535)", p);
    if (p > 0) {
        li.root_port = (int)p;
    } else if (var("MASTER_PORT")) {
        int mp;
        if (to_int(var("MASTER_PORT"), 1, 65534, &mp))
            return symm__error(SYMM_ERR_ENV,
                               "MASTER_PORT=\"%.40s\" is not a port in [1, 65534] (symm listens on "
                               "MASTER_PORT + 1)",
                               var("MASTER_PORT"));
        li.root_port = mp + 1;
    } else {
        const char *which = NULL;
        li.root_port = port_from_job_id(&which);
        if (li.root_port == 0 && li.nranks > 1)
            return symm__error(SYMM_ERR_ENV,
                               "%s: PE %d of %d but no bootstrap port: set SYMM_BOOTSTRAP_PORT or "
                               "MASTER_PORT (no job id in OMPI_MCA_ess_base_jobid, PMIX_NAMESPACE or "
                               "SLURM_JOB_ID to derive one from)",
                               who, li.rank, li.nranks);
    }
    SYMM_LOG_DEBUG("launch: %s: PE %d of %d, local %d of %d, root %s:%d", who, li.rank, li.nranks,
                   li.local_rank, li.local_nranks, li.root_addr, li.root_port);
    *info = li;
    return SYMM_SUCCESS;
}
