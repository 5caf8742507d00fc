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
 *   failed      PE N-1 reports a failure of its own (a CUDA error, say) and
 *               stays alive: every PE learns it, naming it and why, within
 *               10 s; the failed PE's own calls fail at once (failed_root:
 *               PE 0 fails)
 *   health      the same through the health check the watcher runs
 *   stuck       PE N-1 is alive but stays out of a barrier past
 *               SYMM_WAIT_TIMEOUT=2: declared stuck, every PE (itself too,
 *               when it comes back) gets SYMM_ERR_PEER_DIED naming it
 *               (stuck_root: PE 0, named by each rank's own deadline)
 *   stuck_exit  the same, but the root exits (_exit) the moment its barrier
 *               returns the error: the others must still name PE N-1, not
 *               take the root's exit for its death
 *   stop_grace  PE N-1 stops (SIGSTOP) with an abort grace of 1 s set: PE 0
 *               gets the error and leaves; the others never call symm again
 *               (a loop the stopped PE's GPU would keep answering): the
 *               watcher ends each with exit status 86 and a message naming
 *               PE N-1
 *   key_squat   (as root) every PE runs as uid 65534 without a secret, with
 *               /tmp/symm-65534 and XDG_RUNTIME_DIR made by root first: the
 *               job forms anyway (its key folder is its own); "SKIP:" when
 *               the test cannot switch users
 *   bad_nranks  PE N-1 claims another job size: turned away with the reason,
 *               which the root's timeout names on every PE
 *   dup_rank    two processes claim the same rank: the second is turned away,
 *               the timeout names it; no hang
 *   missing     only rank 1 of 2 starts: SYMM_ERR_TIMEOUT, no hang
 * Attacks on a job whose last rank starts only after the attack
 * (bootstrap_attacker.c); each time the job must form and pass its rounds
 * and fd exchange, and the attacker must get nothing:
 *   attack_outsider  HELLOs without the key (the old computable nonce, a
 *                    made-up proof)
 *   attack_replay    a HELLO signed for one connection's challenge, sent
 *                    on another (SYMM_BOOTSTRAP_SECRET given to the job)
 *   attack_silent    40 connections that never say anything (served one
 *                    after another at 5 s each, the job could not form
 *                    within its 20 s SYMM_BOOTSTRAP_TIMEOUT)
 *   attack_user      as uid 65534: the key folder, HELLOs without the key,
 *                    and every node socket of the job kept full with 8
 *                    silent connections each (made again as soon as the job
 *                    closes them) before and while the PEs link up and
 *                    exchange memory handles; "SKIP:" where the test cannot
 *                    switch users
 *   attack_ipc       the same node-socket attack by a process of the job's
 *                    own user (without the job's secret)
 *   attack_flood     100 silent connections, more than the root serves at
 *                    once: the oldest are dropped, and the root says how
 *                    many in one warning
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap_attacker.h"
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

/* How the victim of scenario_death leaves the job. */
enum { V_KILL, V_STOP, V_REPORT, V_HEALTH, V_STUCK, V_STUCK_EXIT, V_STOP_GRACE };

static atomic_int g_health_calls;
static int failing_health(void *arg, char *why, size_t size) {
    (void)arg;
    if (atomic_fetch_add(&g_health_calls, 1) < 1)
        return 0; /* healthy at first */
    snprintf(why, size, "test: the health check says this device failed");
    return 1;
}

/* A PE dies, stops, reports a failure (directly or through its health
 * check) or gets stuck (alive, not calling collectives); the others must
 * learn it, by name, in bounded time. */
static void scenario_death(child_t *c, int victim, int in_ipc, int how) {
    int stop = how == V_STOP || how == V_STOP_GRACE;
    int exit_at_once = how == V_STUCK_EXIT;
    if (how == V_STUCK_EXIT)
        how = V_STUCK;
    symm__bootstrap_t *b = NULL;
    SYMM_CHECK(first_init(c, c->n, &b));
    volatile uint32_t flag = 0;
    symm__bootstrap_set_abort_flag(b, &flag);
    if (how == V_STOP_GRACE)
        symm__bootstrap_set_abort_grace(b, 1.0);
    rounds(b, c->seed, 5);
    symm__ipc_t *ipc = NULL;
    int *ranks = malloc(sizeof(int) * (size_t)c->n), *fds = malloc(sizeof(int) * (size_t)c->n);
    TEST_ASSERT(ranks && fds, "malloc");
    for (int i = 0; i < c->n; i++)
        ranks[i] = i;
    if (in_ipc)
        SYMM_CHECK(symm__ipc_create(b, ranks, c->n, c->rank, &ipc));
    SYMM_CHECK(symm__bootstrap_barrier(b));
    if (c->rank == victim && (how == V_KILL || stop)) {
        symm_test_sleep_ms(200); /* let the others block first */
        raise(stop ? SIGSTOP : SIGKILL);
        /* SIGSTOP: the driver kills us once the others are done. */
        for (;;)
            pause();
    }
    if (c->rank == victim) {
        /* alive throughout: its watcher keeps sending heartbeats */
        double t0 = symm_test_now_s();
        symm_test_sleep_ms(200);
        if (how == V_REPORT)
            symm__bootstrap_report_failure(b, "test: this PE's device failed");
        else if (how == V_HEALTH)
            symm__bootstrap_set_health(b, failing_health, NULL);
        else /* stuck past SYMM_WAIT_TIMEOUT while the others wait in a barrier (the root past
              * the ranks' SYMM_WAIT_TIMEOUT + 5 s) */
            symm_test_sleep_ms(victim == 0 ? 9000 : 4000);
        /* failed: its own calls fail at once, nobody waits for it; stuck:
         * once back, it hears it was declared out */
        symm_status_t s = SYMM_SUCCESS;
        while (s == SYMM_SUCCESS && symm_test_now_s() - t0 < 60)
            s = symm__bootstrap_barrier(b);
        TEST_ASSERT(s == SYMM_ERR_PEER_DIED, "the victim itself: %s (%s)", symm_strerror(s), symm_last_error());
        /* (a stuck root hears nothing: the ranks named it by their own deadline and left) */
        TEST_ASSERT(symm__bootstrap_dead_pe(b) == victim || (how == V_STUCK && victim == 0),
                    "the victim's dead_pe %d", symm__bootstrap_dead_pe(b));
        symm__bootstrap_set_health(b, NULL, NULL);
        symm__bootstrap_set_abort_flag(b, NULL);
        symm__bootstrap_destroy(b);
        free(ranks);
        free(fds);
        printf("PE %d (the victim) was told after %.3f s: %s\n", c->rank, symm_test_now_s() - t0, symm_last_error());
        return;
    }
    double t0 = symm_test_now_s();
    symm_status_t s;
    if (how == V_STOP_GRACE && c->rank != 0) {
        /* Never back in symm: what a host waiting on a kernel that the
         * stopped PE's GPU keeps answering looks like. The watcher must end
         * this process once the grace passed. */
        while (symm_test_now_s() - t0 < 60)
            symm_test_sleep_ms(10);
        TEST_FAIL("PE %d: still running 60 s after PE %d stopped: the abort grace did not end it", c->rank, victim);
    }
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
    if (exit_at_once && c->rank == 0) {
        /* a program that exits on the error: no destroy, no BYE */
        printf("PE 0: %s; exiting at once\n", symm_last_error());
        fflush(stdout);
        _exit(0);
    }
    TEST_ASSERT(s == SYMM_ERR_PEER_DIED, "got %s (%s), expected SYMM_ERR_PEER_DIED", symm_strerror(s),
                symm_last_error());
    TEST_ASSERT(waited < DEATH_BOUND_S, "took %.2f s to notice the death (bound %g s)", waited, DEATH_BOUND_S);
    char name[32];
    snprintf(name, sizeof name, "PE %d", victim);
    TEST_ASSERT(strstr(symm_last_error(), name), "message names %s: %s", name, symm_last_error());
    if (stop)
        TEST_ASSERT(strstr(symm_last_error(), "silent"), "message says why: %s", symm_last_error());
    if (how == V_REPORT || how == V_HEALTH)
        TEST_ASSERT(strstr(symm_last_error(), "failed") && strstr(symm_last_error(), "test: "),
                    "message says it failed, and why: %s", symm_last_error());
    if (how == V_STUCK)
        TEST_ASSERT(strstr(symm_last_error(), "is stuck") && strstr(symm_last_error(), "SYMM_WAIT_TIMEOUT"),
                    "message says it is stuck: %s", symm_last_error());
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
    static const char *names[] = {"death", "stop", "failure report", "failed health check", "stuck state",
                                  "stuck state", "stop"};
    printf("PE %d noticed PE %d's %s after %.3f s\n", c->rank, victim, names[how], waited);
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
    /* The root turns the offending process away, telling it why, and keeps
     * waiting for the rank it lacks; when the job cannot form by the
     * deadline its timeout message (which every PE that joined gets too)
     * says what it turned away. A PE that came too late finds no root: it
     * times out reaching it, or is told to look at PE 0's error. */
    const char *what = strcmp(c->scenario, "bad_nranks") == 0 ? "started with" : "claim rank";
    if (c->rank == 0)
        TEST_ASSERT(s == SYMM_ERR_TIMEOUT && strstr(msg, what), "PE 0: expected \"%s\" in: %s", what, msg);
    else if (s == SYMM_ERR_BOOTSTRAP)
        TEST_ASSERT(strstr(msg, what) || strstr(msg, "see PE 0's error"), "PE %d: expected \"%s\" in: %s",
                    c->rank, what, msg);
    else
        TEST_ASSERT(s == SYMM_ERR_TIMEOUT, "PE %d: %s", c->rank, symm_strerror(s));
}

/* Lines of `path` that contain every one of the strings (NULL-terminated). */
static int count_log_lines(const char *path, const char *const *all, char *first, size_t size) {
    FILE *f = fopen(path, "r");
    char line[2048];
    int n = 0;
    TEST_ASSERT(f, "open %s", path);
    while (fgets(line, sizeof line, f)) {
        int hit = 1;
        for (int i = 0; all[i]; i++)
            hit &= strstr(line, all[i]) != NULL;
        if (hit && n++ == 0)
            snprintf(first, size, "%s", line);
    }
    fclose(f);
    return n;
}

/* The job under attack: it must form and work as if nothing happened. */
static void scenario_attacked(child_t *c) {
    const char *log = c->rank == 0 ? getenv("TB_ROOT_LOG") : NULL;
    if (log) {
        /* the root's warnings, to read back below */
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        TEST_ASSERT(fd >= 0 && dup2(fd, 2) == 2, "redirect stderr to %s", log);
        close(fd);
    }
    int fds_before = count_dir("/proc/self/fd");
    symm__bootstrap_t *b = NULL;
    SYMM_CHECK(first_init(c, c->n, &b));
    rounds(b, c->seed, 20);
    if (c->rank == c->n - 1 && getenv("TB_IPC_DELAY_MS"))
        symm_test_sleep_ms(atoi(getenv("TB_IPC_DELAY_MS"))); /* the others' node sockets wait, in view */
    ipc_rounds(b, c->seed, 5);
    SYMM_CHECK(symm__bootstrap_barrier(b));
    symm__bootstrap_destroy(b);
    int fds_after = count_dir("/proc/self/fd");
    TEST_ASSERT(fds_after == fds_before, "fds: %d before, %d after", fds_before, fds_after);
    if (log) {
        /* the connections dropped at the cap: counted, and said once */
        static const char *const dropped[] = {"WARN", "dropped", "unanswered", NULL};
        char line[2048] = "";
        int n = count_log_lines(log, dropped, line, sizeof line);
        const char *at = strstr(line, "dropped ");
        unsigned long count = at ? strtoul(at + 8, NULL, 10) : 0;
        TEST_ASSERT(n == 1, "the root said %d times that it dropped connections (once expected)", n);
        TEST_ASSERT(count >= 36, "the root counted %lu dropped connections, expected at least 36 of the 100: %s",
                    count, line);
        printf("PE 0: %s", line);
    }
}

/* Every PE as uid 65534 with the places a key folder could go made by
 * root first: the job forms (the driver switches the user before exec). */
static void scenario_key_squat(child_t *c) {
    TEST_ASSERT(getuid() == 65534, "PE %d runs as uid %u", c->rank, (unsigned)getuid());
    symm__bootstrap_t *b = NULL;
    SYMM_CHECK(first_init(c, c->n, &b));
    rounds(b, c->seed, 5);
    ipc_rounds(b, c->seed, 3);
    SYMM_CHECK(symm__bootstrap_barrier(b));
    symm__bootstrap_destroy(b);
    printf("PE %d: the job formed as uid %u\n", c->rank, (unsigned)getuid());
}

static int child_main(const char *scenario, const char *mode) {
    child_t c;
    memset(&c, 0, sizeof c);
    c.scenario = scenario;
    c.mode = mode;
    c.rank = atoi(getenv("TB_RANK"));
    c.n = atoi(getenv("TB_N"));
    c.seed = strtoull(getenv("TB_SEED"), NULL, 10);
    if (getenv("TB_ERR_DIR")) {
        /* this PE's stderr, for the driver to read */
        char path[600];
        snprintf(path, sizeof path, "%s/pe%d.err", getenv("TB_ERR_DIR"), c.rank);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        TEST_ASSERT(fd >= 0 && dup2(fd, 2) == 2, "redirect stderr to %s", path);
        close(fd);
    }
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
        scenario_death(&c, c.n - 1, 0, V_KILL);
    else if (strcmp(scenario, "death_root") == 0)
        scenario_death(&c, 0, 0, V_KILL);
    else if (strcmp(scenario, "death_ipc") == 0)
        scenario_death(&c, c.n / 2, 1, V_KILL);
    else if (strcmp(scenario, "stop") == 0)
        scenario_death(&c, c.n - 1, 0, V_STOP);
    else if (strcmp(scenario, "failed") == 0)
        scenario_death(&c, c.n - 1, 0, V_REPORT);
    else if (strcmp(scenario, "failed_root") == 0)
        scenario_death(&c, 0, 0, V_REPORT);
    else if (strcmp(scenario, "health") == 0)
        scenario_death(&c, c.n - 1, 0, V_HEALTH);
    else if (strcmp(scenario, "stuck") == 0)
        scenario_death(&c, c.n - 1, 0, V_STUCK);
    else if (strcmp(scenario, "stuck_root") == 0)
        scenario_death(&c, 0, 0, V_STUCK);
    else if (strcmp(scenario, "stuck_exit") == 0)
        scenario_death(&c, c.n - 1, 0, V_STUCK_EXIT);
    else if (strcmp(scenario, "stop_grace") == 0)
        scenario_death(&c, c.n - 1, 0, V_STOP_GRACE);
    else if (strcmp(scenario, "key_squat") == 0)
        scenario_key_squat(&c);
    else if (strcmp(scenario, "bad_nranks") == 0 || strcmp(scenario, "dup_rank") == 0 ||
             strcmp(scenario, "missing") == 0)
        scenario_setup_error(&c);
    else if (strncmp(scenario, "attack_", 7) == 0)
        scenario_attacked(&c);
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
    if (strcmp(scenario, "key_squat") == 0 &&
        (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)) {
        fprintf(stderr, "key_squat: cannot become uid 65534: %s\n", strerror(errno));
        _exit(126);
    }
    execl(self, self, "child", scenario, mode, (char *)NULL);
    fprintf(stderr, "exec %s: %s\n", self, strerror(errno));
    _exit(127);
}

/* The attacker of an attack scenario, in a child of the driver: it attacks
 * the bootstrap, writes a byte to `ready` (the driver then starts the last
 * rank), and for the node-socket part keeps going until `stop` closes.
 * Exit 0: the job gave it nothing; 77: it cannot run here. */
static int attacker_main(const char *scenario, int port, int n, int ready, int stop) {
    int rc = 0, silent[100], seen = 0;
    int on_sockets = strcmp(scenario, "attack_user") == 0 || strcmp(scenario, "attack_ipc") == 0;
    uid_t victim = getuid();
    char go = 1;
    load_env();
    if (strcmp(scenario, "attack_user") == 0) {
        if (attack_drop_privileges() != 0) {
            if (write(ready, &go, 1) < 0) { /* the driver sees the exit either way */ }
            return 77;
        }
        printf("attacker: now uid %u\n", (unsigned)getuid());
        rc |= attack_key_file(victim);
    }
    if (strcmp(scenario, "attack_silent") == 0)
        rc |= attack_silent_open(port, 40, silent);
    else if (strcmp(scenario, "attack_flood") == 0)
        rc |= attack_silent_open(port, 100, silent);
    else if (strcmp(scenario, "attack_replay") == 0)
        rc |= attack_replay(port, n, n - 1);
    else
        rc |= attack_old_nonce(port, n, n - 1);
    fflush(stdout);
    if (write(ready, &go, 1) != 1)
        return 1;
    if (on_sockets) {
        long connects = 0;
        int got = attack_node_sockets(stop, n, 8, &seen, &connects);
        printf("attacker (uid %u): saw %d node socket name(s), made %ld connection(s), received %d descriptor(s)\n",
               (unsigned)getuid(), seen, connects, got);
        if (got) {
            fprintf(stderr, "FAIL attacker: received %d file descriptor(s) of the job's memory\n", got);
            rc = 1;
        }
    } else {
        char x;
        while (read(stop, &x, 1) > 0) {
        }
    }
    fflush(stdout);
    return rc;
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
    if (strncmp(scenario, "stuck", 5) == 0)
        setenv("SYMM_WAIT_TIMEOUT", "2", 1);
    else
        unsetenv("SYMM_WAIT_TIMEOUT");
    if (strcmp(scenario, "bad_nranks") == 0 || strcmp(scenario, "dup_rank") == 0 ||
        strcmp(scenario, "missing") == 0)
        setenv("SYMM_BOOTSTRAP_TIMEOUT", "3", 1);
    else if (strncmp(scenario, "attack_", 7) == 0)
        setenv("SYMM_BOOTSTRAP_TIMEOUT", "20", 1);
    else
        setenv("SYMM_BOOTSTRAP_TIMEOUT", "60", 1);
    int attack = strncmp(scenario, "attack_", 7) == 0;
    if (strcmp(scenario, "attack_replay") == 0) {
        char secret[65];
        uint64_t st = seed ^ 0xa5a5;
        for (int i = 0; i < 64; i++)
            secret[i] = "0123456789abcdef"[symm_test_rand(&st) & 15];
        secret[64] = '\0';
        setenv("SYMM_BOOTSTRAP_SECRET", secret, 1);
    }
    if (strcmp(scenario, "attack_user") == 0 || strcmp(scenario, "attack_ipc") == 0)
        setenv("TB_IPC_DELAY_MS", "1500", 1);
    if (strcmp(scenario, "stop_grace") == 0)
        setenv("SYMM_PEER_TIMEOUT", "1", 1);
    char tmpdir[] = "/tmp/symm_test_bootstrap_XXXXXX";
    char root_log[sizeof tmpdir + 16] = "", xdg[sizeof tmpdir + 16] = "";
    int made_squat = 0, have_tmp = 0;
    if (strcmp(scenario, "attack_flood") == 0 || strcmp(scenario, "stop_grace") == 0 ||
        strcmp(scenario, "key_squat") == 0) {
        TEST_ASSERT(mkdtemp(tmpdir), "mkdtemp");
        have_tmp = 1;
        if (strcmp(scenario, "stop_grace") == 0)
            setenv("TB_ERR_DIR", tmpdir, 1);
    }
    if (strcmp(scenario, "attack_flood") == 0) {
        snprintf(root_log, sizeof root_log, "%s/root.log", tmpdir);
        setenv("TB_ROOT_LOG", root_log, 1);
        setenv("SYMM_LOG_LEVEL", "warn", 1);
    }
    if (strcmp(scenario, "key_squat") == 0) {
        if (getuid() != 0) {
            printf("SKIP: key_squat: needs root to run the PEs as another user\n");
            rmdir(tmpdir);
            return 77;
        }
        /* what another user could make first: the first scheme's fixed
         * folder, and a runtime folder that is not the PEs' own */
        made_squat = mkdir("/tmp/symm-65534", 0700) == 0;
        TEST_ASSERT(made_squat || errno == EEXIST, "mkdir /tmp/symm-65534");
        snprintf(xdg, sizeof xdg, "%s/xdg", tmpdir);
        TEST_ASSERT(mkdir(xdg, 0700) == 0, "mkdir %s", xdg);
        setenv("XDG_RUNTIME_DIR", xdg, 1);
        unsetenv("SYMM_BOOTSTRAP_SECRET");
        /* the PEs (uid 65534) can see that root owns it */
        TEST_ASSERT(chmod(tmpdir, 0755) == 0, "chmod %s", tmpdir);
    }

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
    else if (strcmp(scenario, "stop") == 0 || strcmp(scenario, "stop_grace") == 0)
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
    pid_t attacker = -1;
    int stop_pipe[2] = {-1, -1}, attacker_status = 0, attacker_done = 0;
    for (int r = first; r < n; r++) {
        int env_rank = strcmp(scenario, "dup_rank") == 0 && r == n - 1 ? 1 : r;
        if (attack && r == n - 1) {
            /* the job is forming without its last rank: attack it now */
            int ready[2];
            char x;
            TEST_ASSERT(pipe(ready) == 0 && pipe(stop_pipe) == 0, "pipe");
            fflush(stdout);
            attacker = fork();
            TEST_ASSERT(attacker >= 0, "fork");
            if (attacker == 0) {
                close(ready[0]);
                close(stop_pipe[1]);
                _exit(attacker_main(scenario, port, n, ready[1], stop_pipe[0]));
            }
            close(ready[1]);
            close(stop_pipe[0]);
            TEST_ASSERT(read(ready[0], &x, 1) == 1, "the attacker did not finish its bootstrap part");
            close(ready[0]);
        }
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
        if (p > 0 && p == attacker) {
            attacker_status = st;
            attacker_done = 1;
            continue;
        }
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
    int skipped = 0;
    if (attacker > 0) {
        close(stop_pipe[1]); /* the job is done: the attacker stops */
        if (!attacker_done)
            TEST_ASSERT(waitpid(attacker, &attacker_status, 0) == attacker, "waitpid attacker");
        if (WIFEXITED(attacker_status) && WEXITSTATUS(attacker_status) == 77) {
            printf("SKIP: %s: this process cannot switch to another user (needs root)\n", scenario);
            skipped = 1;
        } else if (!(WIFEXITED(attacker_status) && WEXITSTATUS(attacker_status) == 0)) {
            fprintf(stderr, "FAIL: the attacker got something from the job (status 0x%x)\n", attacker_status);
            failed = 1;
        }
    }
    for (int r = 0; r < n; r++) {
        if (pids[r] <= 0)
            continue;
        int st = status[r];
        if (strcmp(scenario, "stop_grace") == 0 && r != 0 && r != victim) {
            /* ended by its watcher, which said why */
            char path[600], text[4096] = "", want[32];
            snprintf(path, sizeof path, "%s/pe%d.err", tmpdir, r);
            FILE *f = fopen(path, "r");
            size_t k = f ? fread(text, 1, sizeof text - 1, f) : 0;
            text[k] = '\0';
            if (f)
                fclose(f);
            snprintf(want, sizeof want, "PE %d died", victim);
            if (!(WIFEXITED(st) && WEXITSTATUS(st) == 86) || !strstr(text, want) ||
                !strstr(text, "ending it with exit status 86")) {
                fprintf(stderr, "FAIL: PE %d should have been ended by symm (exit 86, naming PE %d): status 0x%x, "
                        "stderr:\n%s\n", r, victim, st, text);
                failed = 1;
            } else {
                printf("PE %d was ended by symm: %s", r, strstr(text, "[symm") ? strstr(text, "[symm") : text);
            }
            continue;
        }
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
    if (root_log[0] && failed) {
        /* the root's stderr went there: show it */
        FILE *f = fopen(root_log, "r");
        char line[2048];
        fprintf(stderr, "PE 0's stderr:\n");
        while (f && fgets(line, sizeof line, f))
            fputs(line, stderr);
        if (f)
            fclose(f);
    }
    if (have_tmp) {
        char path[600];
        for (int r = 0; r < n; r++) {
            snprintf(path, sizeof path, "%s/pe%d.err", tmpdir, r);
            unlink(path);
        }
        if (root_log[0])
            unlink(root_log);
        if (xdg[0])
            rmdir(xdg);
        rmdir(tmpdir);
    }
    if (made_squat)
        rmdir("/tmp/symm-65534");
    printf("test_bootstrap %s %s %d: %s\n", scenario, mode, n, failed ? "FAILED" : skipped ? "SKIPPED" : "OK");
    return failed ? 1 : skipped ? 77 : 0;
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
