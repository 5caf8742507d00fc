/*
 * test_bootstrap - the bootstrap network over loopback, with real processes.
 *
 *   test_bootstrap run <scenario> <env|uid> <N>
 *
 * is the driver: it starts N copies of itself ("child" mode) as the PEs of
 * one job, either through launcher variables (env) or through a unique id
 * that rank 0 makes and the driver hands to the others (uid), and checks how
 * each exits. Scenarios:
 *   basic       allgather/bcast/barrier with random data over many rounds,
 *               mismatched sizes (SYMM_ERR_MISMATCH on every rank, then the
 *               next call works), fd exchange over Unix sockets, destroy and
 *               init again in the same process, no leaked fds or threads
 *   death_last  PE N-1 kills itself (SIGKILL) mid-run: every other PE gets
 *               SYMM_ERR_PEER_DIED naming it within 10 s, abort flag raised
 *   death_root  the same with PE 0 (whose death every rank sees directly)
 *   death_ipc   a PE dies while the others wait in the fd exchange
 *   stop        PE N-1 stops (SIGSTOP): declared dead after SYMM_PEER_TIMEOUT
 *   bad_nranks  PE N-1 claims another job size: a clear error on every PE
 *   dup_rank    two processes claim the same rank: a clear error, no hang
 *   missing     only rank 1 of 2 starts: SYMM_ERR_TIMEOUT, no hang
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "core/env.h"
#include "bootstrap/launch_env.h"
#include "core/log.h"
#include "symm_test.h"
#include "symm_test_time.h"

extern int symm_core_test_pe;

#define DEATH_BOUND_S 10.0 /* correctness bound from the issue, not a benchmark */

/* ======================================================================= */
/* child side                                                               */
/* ======================================================================= */

typedef struct child {
    const char *scenario, *mode;
    int rank, n;
    uint64_t seed;
    symm__launch_info_t info;
} child_t;

static void load_env(void) {
    symm__env_t e;
    SYMM_CHECK(symm__env_load(&e));
    symm__env_set(&e);
}

static int count_dir(const char *path) {
    DIR *d = opendir(path);
    TEST_ASSERT(d != NULL, "opendir %s", path);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory's own fd (for /proc/self/fd) */
}

static void uid_to_hex(const symm_unique_id_t *u, char *hex) {
    for (int i = 0; i < SYMM_UNIQUE_ID_BYTES; i++)
        sprintf(hex + 2 * i, "%02x", (unsigned char)u->internal[i]);
}

static void hex_to_uid(const char *hex, symm_unique_id_t *u) {
    TEST_ASSERT(strlen(hex) == 2 * SYMM_UNIQUE_ID_BYTES, "uid hex length %zu", strlen(hex));
    for (int i = 0; i < SYMM_UNIQUE_ID_BYTES; i++) {
        unsigned v;
        TEST_ASSERT(sscanf(hex + 2 * i, "%2x", &v) == 1, "uid hex");
        u->internal[i] = (char)v;
    }
}

/* First init: env from the launcher variables, uid from the driver (rank 0
 * makes it and writes it to the fd in TB_UID_FD). */
static symm_status_t first_init(child_t *c, int nranks_claim, symm__bootstrap_t **b) {
    if (strcmp(c->mode, "env") == 0)
        return symm__bootstrap_init_env(&c->info, b);
    symm_unique_id_t uid;
    if (c->rank == 0) {
        SYMM_CHECK(symm__bootstrap_make_uid(&uid));
        char hex[2 * SYMM_UNIQUE_ID_BYTES + 2];
        uid_to_hex(&uid, hex);
        strcat(hex, "\n");
        int fd = atoi(getenv("TB_UID_FD"));
        TEST_ASSERT(write(fd, hex, strlen(hex)) == (ssize_t)strlen(hex), "write uid");
        close(fd);
    } else {
        hex_to_uid(getenv("TB_UID"), &uid);
    }
    return symm__bootstrap_init_uid(&uid, c->rank, nranks_claim, b);
}

static size_t pick_size(uint64_t *st) {
    uint64_t r = symm_test_rand(st);
    switch (r % 8) {
    case 0: return 0;
    case 1: return 1 + (size_t)(r >> 8) % 7;
    case 7: return 65536 + (size_t)(r >> 8) % 4099; /* several socket buffers */
    default: return 1 + (size_t)(r >> 8) % 1500;
    }
}

/* Random rounds of the three collectives, every byte checked. */
static void rounds(symm__bootstrap_t *b, uint64_t seed, int count) {
    int n = symm__bootstrap_nranks(b), me = symm__bootstrap_rank(b);
    uint64_t st = seed; /* same stream on every rank: same sizes and roots */
    for (int round = 0; round < count; round++) {
        size_t sz = pick_size(&st);
        unsigned char *mine = malloc(sz + 1), *all = malloc(sz * (size_t)n + 1), *want = malloc(sz + 1);
        TEST_ASSERT(mine && all && want, "malloc");
        symm_test_fill(mine, sz, seed ^ ((uint64_t)round << 20) ^ (uint64_t)me);
        memset(all, 0xee, sz * (size_t)n);
        SYMM_CHECK(symm__bootstrap_allgather(b, mine, all, sz));
        for (int r = 0; r < n; r++) {
            symm_test_fill(want, sz, seed ^ ((uint64_t)round << 20) ^ (uint64_t)r);
            TEST_ASSERT(memcmp(all + (size_t)r * sz, want, sz) == 0, "round %d: allgather slot %d (%zu bytes)",
                        round, r, sz);
        }
        /* In place: mine is the slot of `all` (MPI_IN_PLACE style). */
        symm_test_fill(all + (size_t)me * sz, sz, seed ^ 0x1234 ^ (uint64_t)me);
        SYMM_CHECK(symm__bootstrap_allgather(b, all + (size_t)me * sz, all, sz));
        for (int r = 0; r < n; r++) {
            symm_test_fill(want, sz, seed ^ 0x1234 ^ (uint64_t)r);
            TEST_ASSERT(memcmp(all + (size_t)r * sz, want, sz) == 0, "round %d: in-place slot %d", round, r);
        }

        size_t bsz = pick_size(&st);
        int root = (int)(symm_test_rand(&st) % (uint64_t)n);
        unsigned char *buf = malloc(bsz + 1), *bwant = malloc(bsz + 1);
        TEST_ASSERT(buf && bwant, "malloc");
        symm_test_fill(bwant, bsz, seed ^ 0xbcbc ^ (uint64_t)round);
        if (me == root)
            memcpy(buf, bwant, bsz);
        else
            memset(buf, 0x11, bsz);
        SYMM_CHECK(symm__bootstrap_bcast(b, buf, bsz, root));
        TEST_ASSERT(memcmp(buf, bwant, bsz) == 0, "round %d: bcast of %zu bytes from %d", round, bsz, root);
        SYMM_CHECK(symm__bootstrap_barrier(b));
        free(mine);
        free(all);
        free(want);
        free(buf);
        free(bwant);
    }
}

/* Arguments that differ across PEs: an error on every PE, then back in step. */
static void mismatches(symm__bootstrap_t *b) {
    int n = symm__bootstrap_nranks(b), me = symm__bootstrap_rank(b);
    if (n < 2)
        return;
    char mine[64], all[64 * 8 + 64];
    memset(mine, me, sizeof mine);
    size_t sz = me == n - 1 ? 17 : 16;
    SYMM_EXPECT(symm__bootstrap_allgather(b, mine, all, sz), SYMM_ERR_MISMATCH);
    TEST_ASSERT(strstr(symm_last_error(), "allgather") && strstr(symm_last_error(), "17"),
                "mismatch message names the call and the sizes: %s", symm_last_error());
    /* Different bcast roots. */
    SYMM_EXPECT(symm__bootstrap_bcast(b, mine, 8, me == 0 ? 0 : 1), SYMM_ERR_MISMATCH);
    /* Different collectives. */
    if (me == 1)
        SYMM_EXPECT(symm__bootstrap_barrier(b), SYMM_ERR_MISMATCH);
    else
        SYMM_EXPECT(symm__bootstrap_allgather(b, mine, all, 8), SYMM_ERR_MISMATCH);
    /* The same invalid root everywhere: invalid argument everywhere. */
    SYMM_EXPECT(symm__bootstrap_bcast(b, mine, 8, n), SYMM_ERR_INVALID_ARG);
    /* One PE passes a NULL buffer: every PE hears of it. */
    SYMM_EXPECT(symm__bootstrap_allgather(b, me == n - 1 ? NULL : mine, all, 8), SYMM_ERR_INVALID_ARG);
    /* Still in step: a normal allgather works. */
    SYMM_CHECK(symm__bootstrap_allgather(b, mine, all, sizeof mine));
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < sizeof mine; i++)
            TEST_ASSERT(all[(size_t)r * sizeof mine + i] == (char)r, "after mismatch: slot %d", r);
}

/* Every PE shares a memfd holding its rank and tag; every PE reads them all. */
static void ipc_rounds(symm__bootstrap_t *b, uint64_t seed, int count) {
    int n = symm__bootstrap_nranks(b), me = symm__bootstrap_rank(b);
    int *ranks = malloc(sizeof(int) * (size_t)n), *fds = malloc(sizeof(int) * (size_t)n);
    TEST_ASSERT(ranks && fds, "malloc");
    for (int i = 0; i < n; i++)
        ranks[i] = i;
    symm__ipc_t *ipc;
    SYMM_CHECK(symm__ipc_create(b, ranks, n, me, &ipc));
    uint64_t st = seed ^ (uint64_t)me;
    for (int round = 0; round < count; round++) {
        uint64_t tag = 1000 + (uint64_t)round;
        int fd = memfd_create("symm-test", MFD_CLOEXEC);
        TEST_ASSERT(fd >= 0, "memfd_create: %s", strerror(errno));
        char text[64];
        int len = snprintf(text, sizeof text, "rank %d tag %llu", me, (unsigned long long)tag);
        TEST_ASSERT(write(fd, text, (size_t)len) == len, "write memfd");
        /* Uneven pace, so fast PEs send the next round early. */
        if (symm_test_rand(&st) % 3 == 0)
            symm_test_sleep_ms((int)(symm_test_rand(&st) % 4));
        SYMM_CHECK(symm__ipc_allgather_fd(ipc, fd, tag, fds));
        close(fd); /* the exchanged copies keep the memory alive */
        for (int r = 0; r < n; r++) {
            char got[64] = "", want[64];
            int wl = snprintf(want, sizeof want, "rank %d tag %llu", r, (unsigned long long)tag);
            TEST_ASSERT(fds[r] >= 0, "fd of %d", r);
            TEST_ASSERT(pread(fds[r], got, sizeof got, 0) == wl && memcmp(got, want, (size_t)wl) == 0,
                        "round %d: fd of PE %d holds \"%s\", expected \"%s\"", round, r, got, want);
            close(fds[r]);
        }
    }
    symm__ipc_destroy(ipc);
    free(ranks);
    free(fds);
}

static void scenario_basic(child_t *c) {
    /* uid rank 0 closes the pipe it published its id on during init. */
    int fds_before = count_dir("/proc/self/fd") - (strcmp(c->mode, "uid") == 0 && c->rank == 0);
    int n_rounds = c->n >= 8 ? 200 : 500;
    symm__bootstrap_t *b = NULL;
    SYMM_CHECK(first_init(c, c->n, &b));
    TEST_ASSERT(symm__bootstrap_rank(b) == c->rank && symm__bootstrap_nranks(b) == c->n, "rank/nranks");
    TEST_ASSERT(symm__bootstrap_dead_pe(b) == -1, "nobody dead");
    rounds(b, c->seed, n_rounds);
    mismatches(b);
    ipc_rounds(b, c->seed, 20);

    /* init -> destroy -> init in one process. uid: the next id travels over
     * the current bootstrap, as a real program would pass it around. */
    symm_unique_id_t uid2;
    memset(&uid2, 0, sizeof uid2);
    if (strcmp(c->mode, "uid") == 0) {
        if (c->rank == 0)
            SYMM_CHECK(symm__bootstrap_make_uid(&uid2));
        SYMM_CHECK(symm__bootstrap_bcast(b, &uid2, sizeof uid2, 0));
    }
    SYMM_CHECK(symm__bootstrap_barrier(b));
    symm__bootstrap_destroy(b);
    b = NULL;
    if (strcmp(c->mode, "uid") == 0)
        SYMM_CHECK(symm__bootstrap_init_uid(&uid2, c->rank, c->n, &b));
    else
        SYMM_CHECK(symm__bootstrap_init_env(&c->info, &b));
    rounds(b, c->seed ^ 0x5555, 10);
    ipc_rounds(b, c->seed ^ 0x5555, 5);
    SYMM_CHECK(symm__bootstrap_barrier(b));
    symm__bootstrap_destroy(b);

    /* Everything released: no sockets, no watcher thread. */
    int fds_after = count_dir("/proc/self/fd");
    TEST_ASSERT(fds_after == fds_before, "fds: %d before, %d after", fds_before, fds_after);
    int tasks = count_dir("/proc/self/task") + 1;
    TEST_ASSERT(tasks == 1, "%d threads left", tasks);
}

/* A PE dies (or stops); the others must learn it, by name, in bounded time. */
static void scenario_death(child_t *c, int victim, int in_ipc, int stop) {
    symm__bootstrap_t *b = NULL;
    SYMM_CHECK(first_init(c, c->n, &b));
    volatile uint32_t flag = 0;
    symm__bootstrap_set_abort_flag(b, &flag);
    rounds(b, c->seed, 5);
    symm__ipc_t *ipc = NULL;
    int *ranks = malloc(sizeof(int) * (size_t)c->n), *fds = malloc(sizeof(int) * (size_t)c->n);
    TEST_ASSERT(ranks && fds, "malloc");
    for (int i = 0; i < c->n; i++)
        ranks[i] = i;
    if (in_ipc)
        SYMM_CHECK(symm__ipc_create(b, ranks, c->n, c->rank, &ipc));
    SYMM_CHECK(symm__bootstrap_barrier(b));
    if (c->rank == victim) {
        symm_test_sleep_ms(200); /* let the others block first */
        raise(stop ? SIGSTOP : SIGKILL);
        /* SIGSTOP: the driver kills us once the others are done. */
        for (;;)
            pause();
    }
    double t0 = symm_test_now_s();
    symm_status_t s;
    if (in_ipc) {
        int fd = memfd_create("symm-test", MFD_CLOEXEC);
        TEST_ASSERT(fd >= 0, "memfd_create");
        s = symm__ipc_allgather_fd(ipc, fd, 1, fds);
        close(fd);
    } else {
        /* Keep calling collectives: some may still complete before the death. */
        do {
            s = symm__bootstrap_barrier(b);
        } while (s == SYMM_SUCCESS && symm_test_now_s() - t0 < 60);
    }
    double waited = symm_test_now_s() - t0;
    TEST_ASSERT(s == SYMM_ERR_PEER_DIED, "got %s (%s), expected SYMM_ERR_PEER_DIED", symm_strerror(s),
                symm_last_error());
    TEST_ASSERT(waited < DEATH_BOUND_S, "took %.2f s to notice the death (bound %g s)", waited, DEATH_BOUND_S);
    char name[32];
    snprintf(name, sizeof name, "PE %d", victim);
    TEST_ASSERT(strstr(symm_last_error(), name), "message names %s: %s", name, symm_last_error());
    if (stop)
        TEST_ASSERT(strstr(symm_last_error(), "silent"), "message says why: %s", symm_last_error());
    TEST_ASSERT(symm__bootstrap_dead_pe(b) == victim, "dead_pe %d", symm__bootstrap_dead_pe(b));
    TEST_ASSERT(flag == (uint32_t)victim + 1, "abort flag %u, expected %d", flag, victim + 1);
    /* Every later call fails the same way, at once. */
    char x[8] = {0}, all[8 * 64];
    SYMM_EXPECT(symm__bootstrap_allgather(b, x, all, sizeof x), SYMM_ERR_PEER_DIED);
    SYMM_EXPECT(symm__bootstrap_bcast(b, x, sizeof x, 0), SYMM_ERR_PEER_DIED);
    SYMM_EXPECT(symm__bootstrap_barrier(b), SYMM_ERR_PEER_DIED);
    /* A flag pointed at later is raised at once. */
    volatile uint32_t flag2 = 0;
    symm__bootstrap_set_abort_flag(b, &flag2);
    TEST_ASSERT(flag2 == (uint32_t)victim + 1, "late abort flag %u", flag2);
    symm__bootstrap_set_abort_flag(b, NULL);
    symm__ipc_destroy(ipc);
    symm__bootstrap_destroy(b);
    free(ranks);
    free(fds);
    printf("PE %d noticed PE %d's %s after %.3f s\n", c->rank, victim, stop ? "stop" : "death", waited);
}

/* Setup errors: every PE fails clearly (never hangs). */
static void scenario_setup_error(child_t *c) {
    symm__bootstrap_t *b = NULL;
    int claim = c->n;
    if (strcmp(c->scenario, "bad_nranks") == 0 && c->rank == c->n - 1)
        claim = c->n + 1;
    double t0 = symm_test_now_s();
    symm_status_t s = first_init(c, claim, &b);
    const char *msg = symm_last_error();
    printf("PE %d: %s: %s (%.2f s)\n", c->rank, symm_strerror(s), msg, symm_test_now_s() - t0);
    TEST_ASSERT(s != SYMM_SUCCESS && b == NULL, "init should fail");
    if (strcmp(c->scenario, "missing") == 0) {
        TEST_ASSERT(s == SYMM_ERR_TIMEOUT, "missing root: %s", symm_strerror(s));
        return;
    }
    /* The root saw the problem and says what it is; a PE that had connected
     * is told the same. A PE that came too late finds no root: it times out
     * reaching it, or (connection torn down half-way) is told to look at
     * PE 0's error. */
    const char *what = strcmp(c->scenario, "bad_nranks") == 0 ? "started with" : "claim rank";
    if (c->rank == 0)
        TEST_ASSERT(s == SYMM_ERR_BOOTSTRAP && strstr(msg, what), "PE 0: expected \"%s\" in: %s", what, msg);
    else if (s == SYMM_ERR_BOOTSTRAP)
        TEST_ASSERT(strstr(msg, what) || strstr(msg, "see PE 0's error"), "PE %d: expected \"%s\" in: %s",
                    c->rank, what, msg);
    else
        TEST_ASSERT(s == SYMM_ERR_TIMEOUT, "PE %d: %s", c->rank, symm_strerror(s));
}

static int child_main(const char *scenario, const char *mode) {
    child_t c;
    memset(&c, 0, sizeof c);
    c.scenario = scenario;
    c.mode = mode;
    c.rank = atoi(getenv("TB_RANK"));
    c.n = atoi(getenv("TB_N"));
    c.seed = strtoull(getenv("TB_SEED"), NULL, 10);
    symm_core_test_pe = c.rank;
    symm__log_set_pe(c.rank);
    load_env();
    if (strcmp(mode, "env") == 0) {
        SYMM_CHECK(symm__launch_info_from_env(&c.info));
        TEST_ASSERT(c.info.rank == c.rank || strcmp(scenario, "dup_rank") == 0, "launch rank");
    }
    if (strcmp(scenario, "basic") == 0)
        scenario_basic(&c);
    else if (strcmp(scenario, "death_last") == 0)
        scenario_death(&c, c.n - 1, 0, 0);
    else if (strcmp(scenario, "death_root") == 0)
        scenario_death(&c, 0, 0, 0);
    else if (strcmp(scenario, "death_ipc") == 0)
        scenario_death(&c, c.n / 2, 1, 0);
    else if (strcmp(scenario, "stop") == 0)
        scenario_death(&c, c.n - 1, 0, 1);
    else if (strcmp(scenario, "bad_nranks") == 0 || strcmp(scenario, "dup_rank") == 0 ||
             strcmp(scenario, "missing") == 0)
        scenario_setup_error(&c);
    else
        TEST_FAIL("unknown scenario %s", scenario);
    fflush(stdout);
    return 0;
}

/* ======================================================================= */
/* driver side                                                              */
/* ======================================================================= */

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    TEST_ASSERT(fd >= 0, "socket");
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    TEST_ASSERT(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
                    getsockname(fd, (struct sockaddr *)&sa, &len) == 0,
                "bind port 0");
    close(fd);
    return ntohs(sa.sin_port);
}

static pid_t start_child(const char *self, const char *scenario, const char *mode, int rank, int env_rank,
                         int n, int port, uint64_t seed, const char *uid_hex, int uid_fd) {
    pid_t pid = fork();
    TEST_ASSERT(pid >= 0, "fork");
    if (pid)
        return pid;
    char v[64];
    snprintf(v, sizeof v, "%d", rank);
    setenv("TB_RANK", v, 1);
    snprintf(v, sizeof v, "%d", n);
    setenv("TB_N", v, 1);
    snprintf(v, sizeof v, "%llu", (unsigned long long)seed);
    setenv("TB_SEED", v, 1);
    /* No stray launcher variables from the environment ctest runs in. */
    const char *clear[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                           "MASTER_PORT", "SYMM_BOOTSTRAP_PORT", "SYMM_BOOTSTRAP_ADDR",
                           "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof clear / sizeof clear[0]; i++)
        unsetenv(clear[i]);
    if (strcmp(mode, "env") == 0)
        symm__launch_env_set(env_rank, n, 0, port);
    if (uid_hex)
        setenv("TB_UID", uid_hex, 1);
    if (uid_fd >= 0) {
        snprintf(v, sizeof v, "%d", uid_fd);
        setenv("TB_UID_FD", v, 1);
    }
    execl(self, self, "child", scenario, mode, (char *)NULL);
    fprintf(stderr, "exec %s: %s\n", self, strerror(errno));
    _exit(127);
}

static int driver(const char *self, const char *scenario, const char *mode, int n) {
    uint64_t seed = (uint64_t)time(NULL) * 1000003u ^ (uint64_t)getpid();
    if (getenv("TB_SEED"))
        seed = strtoull(getenv("TB_SEED"), NULL, 10);
    printf("test_bootstrap %s %s %d: seed %llu (rerun with TB_SEED=%llu)\n", scenario, mode, n,
           (unsigned long long)seed, (unsigned long long)seed);
    fflush(stdout);

    /* Scenario knobs, passed through the environment the children inherit. */
    setenv("SYMM_LOG_LEVEL", "error", 1);
    if (strcmp(scenario, "stop") == 0)
        setenv("SYMM_PEER_TIMEOUT", "1", 1);
    if (strcmp(scenario, "bad_nranks") == 0 || strcmp(scenario, "dup_rank") == 0 ||
        strcmp(scenario, "missing") == 0)
        setenv("SYMM_BOOTSTRAP_TIMEOUT", "3", 1);
    else
        setenv("SYMM_BOOTSTRAP_TIMEOUT", "60", 1);

    int port = free_port();
    pid_t *pids = calloc((size_t)n, sizeof *pids);
    TEST_ASSERT(pids, "calloc");
    int victim = -1, stop = 0;
    if (strcmp(scenario, "death_last") == 0)
        victim = n - 1;
    else if (strcmp(scenario, "death_root") == 0)
        victim = 0;
    else if (strcmp(scenario, "death_ipc") == 0)
        victim = n / 2;
    else if (strcmp(scenario, "stop") == 0)
        victim = n - 1, stop = 1;

    int first = 0;
    if (strcmp(scenario, "missing") == 0)
        first = 1; /* rank 0 never starts */
    char uid_hex[2 * SYMM_UNIQUE_ID_BYTES + 2] = "";
    if (strcmp(mode, "uid") == 0) {
        int p[2];
        TEST_ASSERT(pipe(p) == 0, "pipe");
        pids[0] = start_child(self, scenario, mode, 0, 0, n, port, seed, NULL, p[1]);
        close(p[1]);
        size_t got = 0;
        while (got < 2 * SYMM_UNIQUE_ID_BYTES) {
            ssize_t r = read(p[0], uid_hex + got, 2 * SYMM_UNIQUE_ID_BYTES - got);
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        close(p[0]);
        uid_hex[got] = '\0';
        TEST_ASSERT(got == 2 * SYMM_UNIQUE_ID_BYTES, "rank 0 did not publish its unique id");
        first = 1;
    }
    for (int r = first; r < n; r++) {
        int env_rank = strcmp(scenario, "dup_rank") == 0 && r == n - 1 ? 1 : r;
        pids[r] = start_child(self, scenario, mode, r, env_rank, n, port, seed, uid_hex[0] ? uid_hex : NULL,
                              -1);
    }

    /* Collect. A PE that hangs fails the test (after a generous bound). */
    double deadline = symm_test_now_s() + 240;
    int failed = 0, left = 0;
    for (int r = 0; r < n; r++)
        left += pids[r] > 0;
    int *status = calloc((size_t)n, sizeof *status);
    int *done = calloc((size_t)n, sizeof *done);
    TEST_ASSERT(status && done, "calloc");
    while (left > 0) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            for (int r = 0; r < n; r++)
                if (pids[r] == p) {
                    status[r] = st;
                    done[r] = 1;
                    left--;
                }
            continue;
        }
        /* A stopped victim stays until every other PE has finished. */
        if (stop && left == 1 && !done[victim]) {
            kill(pids[victim], SIGKILL);
        }
        if (symm_test_now_s() > deadline) {
            fprintf(stderr, "FAIL: PEs still running after 240 s: killing them\n");
            for (int r = 0; r < n; r++)
                if (pids[r] > 0 && !done[r])
                    kill(pids[r], SIGKILL);
            failed = 1;
            deadline = symm_test_now_s() + 3600;
        }
        symm_test_sleep_ms(10);
    }
    for (int r = 0; r < n; r++) {
        if (pids[r] <= 0)
            continue;
        int st = status[r];
        if (r == victim) {
            if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)) {
                fprintf(stderr, "FAIL: victim PE %d should have died of SIGKILL (status 0x%x)\n", r, st);
                failed = 1;
            }
        } else if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
            fprintf(stderr, "FAIL: PE %d %s %d\n", r, WIFEXITED(st) ? "exited with" : "died of signal",
                    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            failed = 1;
        }
    }
    free(pids);
    free(status);
    free(done);
    printf("test_bootstrap %s %s %d: %s\n", scenario, mode, n, failed ? "FAILED" : "OK");
    return failed ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "child") == 0)
        return child_main(argv[2], argv[3]);
    if (argc == 5 && strcmp(argv[1], "run") == 0) {
        int n = atoi(argv[4]);
        TEST_ASSERT(n >= 1 && n <= 64, "N");
        TEST_ASSERT(strcmp(argv[3], "env") == 0 || strcmp(argv[3], "uid") == 0, "mode env|uid");
        return driver("/proc/self/exe", argv[2], argv[3], n);
    }
    fprintf(stderr, "usage: %s run <scenario> <env|uid> <N>\n", argv[0]);
    return 2;
}
