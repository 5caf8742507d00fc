/*
 * test_launch - reading the launcher's variables (torchrun/symmrun, mpirun,
 * srun), the bootstrap port and address, and rejecting partial or
 * inconsistent sets.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "core/env.h"
#include "core/log.h"
#include "symm_test.h"

static const char *k_vars[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE",
    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID",
    "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE", "SLURM_NODEID",
    "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEPID",
    "SYMM_BOOTSTRAP_PORT", "SYMM_BOOTSTRAP_ADDR"};

/* Clear everything, then set NULL-terminated name/value pairs; load the
 * symm environment (SYMM_BOOTSTRAP_*) as init would. */
static void setup(const char *const *pairs) {
    for (size_t i = 0; i < sizeof k_vars / sizeof k_vars[0]; i++)
        unsetenv(k_vars[i]);
    for (size_t i = 0; pairs && pairs[i]; i += 2)
        setenv(pairs[i], pairs[i + 1], 1);
    symm__env_t e;
    symm_status_t s = symm__env_load(&e);
    TEST_ASSERT(s == SYMM_SUCCESS, "env load: %s", symm_last_error());
    e.log_level = SYMM__LOG_ERROR;
    symm__env_set(&e);
}

static symm__launch_info_t expect_ok(const char *what, const char *const *pairs) {
    setup(pairs);
    symm__launch_info_t li;
    symm_status_t s = symm__launch_info_from_env(&li);
    if (s != SYMM_SUCCESS)
        TEST_FAIL("%s: %s (%s)", what, symm_strerror(s), symm_last_error());
    return li;
}

/* Must fail with SYMM_ERR_ENV and a message holding each of `names`. */
static void expect_env_error(const char *what, const char *const *pairs, const char *name1,
                             const char *name2) {
    setup(pairs);
    symm__launch_info_t li;
    memset(&li, 0x5a, sizeof li);
    symm__launch_info_t before = li;
    symm_status_t s = symm__launch_info_from_env(&li);
    TEST_ASSERT(s == SYMM_ERR_ENV, "%s: got %s, expected SYMM_ERR_ENV", what, symm_strerror(s));
    TEST_ASSERT(memcmp(&li, &before, sizeof li) == 0, "%s: output written on failure", what);
    const char *m = symm_last_error();
    TEST_ASSERT(!name1 || strstr(m, name1), "%s: message does not name %s: \"%s\"", what, name1, m);
    TEST_ASSERT(!name2 || strstr(m, name2), "%s: message does not name %s: \"%s\"", what, name2, m);
}

#define P(...) ((const char *const[]){__VA_ARGS__, NULL})

static void check(const symm__launch_info_t *li, int rank, int n, int lr, int ln, const char *addr,
                  int port, const char *what) {
    TEST_ASSERT(li->rank == rank && li->nranks == n, "%s: rank %d/%d, expected %d/%d", what, li->rank,
                li->nranks, rank, n);
    TEST_ASSERT(li->local_rank == lr && li->local_nranks == ln, "%s: local %d/%d, expected %d/%d", what,
                li->local_rank, li->local_nranks, lr, ln);
    TEST_ASSERT(strcmp(li->root_addr, addr) == 0, "%s: addr %s, expected %s", what, li->root_addr, addr);
    if (port >= 0)
        TEST_ASSERT(li->root_port == port, "%s: port %d, expected %d", what, li->root_port, port);
}

int main(void) {
    symm__launch_info_t li;

    /* No launcher: one PE. */
    li = expect_ok("none", NULL);
    check(&li, 0, 1, 0, 1, "127.0.0.1", 0, "none");

    /* torchrun / symmrun. */
    li = expect_ok("torchrun", P("RANK", "3", "WORLD_SIZE", "8", "LOCAL_RANK", "1", "LOCAL_WORLD_SIZE", "4",
                                 "MASTER_ADDR", "node7", "MASTER_PORT", "29500"));
    check(&li, 3, 8, 1, 4, "node7", 29501, "torchrun");
    li = expect_ok("torchrun no local", P("RANK", "0", "WORLD_SIZE", "2", "MASTER_PORT", "1000"));
    check(&li, 0, 2, -1, -1, "127.0.0.1", 1001, "torchrun no local");
    li = expect_ok("SYMM_BOOTSTRAP_PORT wins", P("RANK", "1", "WORLD_SIZE", "2", "MASTER_PORT", "29500",
                                                 "SYMM_BOOTSTRAP_PORT", "40000", "SYMM_BOOTSTRAP_ADDR",
                                                 "10.0.0.9", "MASTER_ADDR", "10.0.0.1"));
    check(&li, 1, 2, -1, -1, "10.0.0.9", 40000, "SYMM_BOOTSTRAP_*");
    /* torchrun takes precedence over the others when several are set. */
    li = expect_ok("precedence", P("RANK", "1", "WORLD_SIZE", "2", "MASTER_PORT", "5000",
                                   "OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "4"));
    check(&li, 1, 2, -1, -1, "127.0.0.1", 5001, "precedence");

    /* mpirun (Open MPI), port from the job id. */
    const char *const *ompi = P("OMPI_COMM_WORLD_RANK", "5", "OMPI_COMM_WORLD_SIZE", "6",
                                "OMPI_COMM_WORLD_LOCAL_RANK", "1", "OMPI_COMM_WORLD_LOCAL_SIZE", "2",
                                "OMPI_MCA_ess_base_jobid", "123456789");
    li = expect_ok("ompi", ompi);
    check(&li, 5, 6, 1, 2, "127.0.0.1", -1, "ompi");
    int port_a = li.root_port;
    TEST_ASSERT(port_a >= 20000 && port_a < 60000, "derived port %d in [20000, 60000)", port_a);
    li = expect_ok("ompi again", ompi);
    TEST_ASSERT(li.root_port == port_a, "same job id -> same port");
    /* Every rank of the job derives the same port. */
    li = expect_ok("ompi rank 0", P("OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "6",
                                    "OMPI_MCA_ess_base_jobid", "123456789"));
    TEST_ASSERT(li.root_port == port_a && li.local_rank == -1, "rank 0 port");
    li = expect_ok("ompi other job", P("OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "6",
                                       "OMPI_MCA_ess_base_jobid", "123456790"));
    TEST_ASSERT(li.root_port >= 20000 && li.root_port < 60000, "range");
    li = expect_ok("pmix", P("OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2", "PMIX_NAMESPACE",
                             "prterun-host-1234@1"));
    TEST_ASSERT(li.root_port >= 20000 && li.root_port < 60000, "pmix range");

    /* srun (Slurm). */
    li = expect_ok("slurm", P("SLURM_PROCID", "2", "SLURM_NTASKS", "4", "SLURM_LOCALID", "0",
                              "SLURM_NTASKS_PER_NODE", "2", "SLURM_JOB_ID", "777", "SLURM_STEP_ID", "0",
                              "MASTER_ADDR", "n001"));
    check(&li, 2, 4, 0, 2, "n001", -1, "slurm");
    TEST_ASSERT(li.root_port >= 20000 && li.root_port < 60000, "slurm port");
    int slurm_port = li.root_port;
    li = expect_ok("slurm step 1", P("SLURM_PROCID", "2", "SLURM_NTASKS", "4", "SLURM_LOCALID", "0",
                                     "SLURM_JOB_ID", "777", "SLURM_STEP_ID", "1"));
    TEST_ASSERT(li.root_port != slurm_port, "another step, another port (%d)", li.root_port);
    li = expect_ok("slurm list", P("SLURM_PROCID", "6", "SLURM_STEP_NUM_TASKS", "7", "SLURM_LOCALID", "0",
                                   "SLURM_STEP_TASKS_PER_NODE", "3(x2),1", "SLURM_NODEID", "2",
                                   "SLURM_JOB_ID", "9", "SLURM_STEPID", "0"));
    check(&li, 6, 7, 0, 1, "127.0.0.1", -1, "slurm list");
    li = expect_ok("slurm list node 1", P("SLURM_PROCID", "4", "SLURM_NTASKS", "7", "SLURM_LOCALID", "1",
                                          "SLURM_TASKS_PER_NODE", "3(x2),1", "SLURM_NODEID", "1",
                                          "SLURM_JOB_ID", "9", "SLURM_STEP_ID", "0"));
    check(&li, 4, 7, 1, 3, "127.0.0.1", -1, "slurm list node 1");
    /* A batch script (no step): one process, not a task of a parallel step. */
    li = expect_ok("slurm batch", P("SLURM_PROCID", "0", "SLURM_NTASKS", "4", "SLURM_JOB_ID", "9"));
    check(&li, 0, 1, 0, 1, "127.0.0.1", -1, "slurm batch");

    /* Partial and inconsistent sets. */
    expect_env_error("RANK only", P("RANK", "0", "MASTER_PORT", "29500"), "RANK", "WORLD_SIZE");
    expect_env_error("WORLD_SIZE only", P("WORLD_SIZE", "2", "MASTER_PORT", "29500"), "RANK", "WORLD_SIZE");
    expect_env_error("RANK too big", P("RANK", "2", "WORLD_SIZE", "2", "MASTER_PORT", "1"), "RANK=2",
                     "WORLD_SIZE=2");
    expect_env_error("RANK negative", P("RANK", "-1", "WORLD_SIZE", "2", "MASTER_PORT", "1"), "RANK", "-1");
    expect_env_error("RANK text", P("RANK", "one", "WORLD_SIZE", "2", "MASTER_PORT", "1"), "RANK", "one");
    expect_env_error("WORLD_SIZE 0", P("RANK", "0", "WORLD_SIZE", "0", "MASTER_PORT", "1"), "WORLD_SIZE",
                     NULL);
    expect_env_error("LOCAL_RANK only", P("RANK", "0", "WORLD_SIZE", "2", "LOCAL_RANK", "0", "MASTER_PORT",
                                          "1"),
                     "LOCAL_RANK", "LOCAL_WORLD_SIZE");
    expect_env_error("LOCAL_RANK too big", P("RANK", "0", "WORLD_SIZE", "4", "LOCAL_RANK", "2",
                                             "LOCAL_WORLD_SIZE", "2", "MASTER_PORT", "1"),
                     "LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2");
    expect_env_error("LOCAL_WORLD_SIZE > WORLD_SIZE", P("RANK", "0", "WORLD_SIZE", "2", "LOCAL_RANK", "0",
                                                        "LOCAL_WORLD_SIZE", "4", "MASTER_PORT", "1"),
                     "LOCAL_WORLD_SIZE=4", "WORLD_SIZE=2");
    expect_env_error("no port", P("RANK", "0", "WORLD_SIZE", "2"), "SYMM_BOOTSTRAP_PORT", "MASTER_PORT");
    expect_env_error("bad MASTER_PORT", P("RANK", "0", "WORLD_SIZE", "2", "MASTER_PORT", "http"),
                     "MASTER_PORT", "http");
    expect_env_error("MASTER_PORT 65535", P("RANK", "0", "WORLD_SIZE", "2", "MASTER_PORT", "65535"),
                     "MASTER_PORT", "65535");
    expect_env_error("SYMM_BOOTSTRAP_PORT range", P("RANK", "0", "WORLD_SIZE", "2", "SYMM_BOOTSTRAP_PORT",
                                                    "70000"),
                     "SYMM_BOOTSTRAP_PORT", "70000");
    expect_env_error("OMPI partial", P("OMPI_COMM_WORLD_RANK", "0", "OMPI_MCA_ess_base_jobid", "1"),
                     "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
    expect_env_error("OMPI local partial", P("OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2",
                                             "OMPI_COMM_WORLD_LOCAL_SIZE", "2", "OMPI_MCA_ess_base_jobid",
                                             "1"),
                     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE");
    expect_env_error("slurm no size", P("SLURM_PROCID", "0", "SLURM_STEP_ID", "0", "SLURM_JOB_ID", "1"),
                     "SLURM_PROCID", "SLURM_NPROCS");
    expect_env_error("slurm localid", P("SLURM_PROCID", "0", "SLURM_NTASKS", "4", "SLURM_LOCALID", "3",
                                        "SLURM_NTASKS_PER_NODE", "2", "SLURM_STEP_ID", "0", "SLURM_JOB_ID",
                                        "1"),
                     "SLURM_LOCALID=3", NULL);
    char longaddr[100];
    memset(longaddr, 'a', sizeof longaddr - 1);
    longaddr[sizeof longaddr - 1] = '\0';
    expect_env_error("long address", P("RANK", "0", "WORLD_SIZE", "2", "MASTER_PORT", "1", "MASTER_ADDR",
                                       longaddr),
                     "MASTER_ADDR", NULL);

    /* A single PE needs no port at all. */
    li = expect_ok("single via torchrun", P("RANK", "0", "WORLD_SIZE", "1"));
    check(&li, 0, 1, -1, -1, "127.0.0.1", 0, "single via torchrun");

    printf("test_launch: OK\n");
    return 0;
}
