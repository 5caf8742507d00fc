/*
 * test_symmrun - the launcher: rank prefixes, the variables each rank sees,
 * exit codes, stopping the other ranks (and their children, and ranks
 * stopped by SIGSTOP) when one fails, a rank left stopped after the others,
 * the timeout, signal forwarding, skips and usage errors, and that a killed
 * symmrun leaves no rank behind holding its output pipe (what ctest waits on).
 *
 *   test_symmrun <path to symmrun>
 *
 * The ranks are this same program in "child <mode>" form.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "symm_test.h"
#include "symm_test_time.h"

/* Correctness bounds (the children would otherwise sleep 60 s): a launcher
 * that does not stop them fails, one that does passes with a wide margin. */
#define STOP_BOUND_S 30.0

/* ---- children ------------------------------------------------------------ */

static int child(const char *mode) {
    int rank = atoi(getenv("RANK") ? getenv("RANK") : "-1");
    if (strcmp(mode, "env") == 0) {
        const char *names[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                               "MASTER_PORT", "SYMM_BOOTSTRAP_PORT", "SYMM_BOOTSTRAP_SECRET"};
        printf("env");
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            printf(" %s=%s", names[i], getenv(names[i]) ? getenv(names[i]) : "(unset)");
        printf("\n");
        fflush(stdout);
        /* A line written in pieces, while the other ranks write theirs. */
        for (int i = 0; i < 5; i++) {
            printf("piece%d-of-rank%d ", i, rank);
            fflush(stdout);
            symm_test_sleep_ms(10);
        }
        printf("end\n");
        fprintf(stderr, "to stderr from %d\n", rank);
        printf("no newline at the end from %d", rank);
        fflush(stdout);
        return 0;
    }
    if (strcmp(mode, "fail") == 0) { /* rank 1 fails, the others would sleep */
        printf("started\n");
        fflush(stdout);
        if (rank == 1) {
            symm_test_sleep_ms(200);
            return 3;
        }
        sleep(60);
        printf("finished\n");
        return 0;
    }
    if (strcmp(mode, "burst") == 0) { /* rank 1 writes a burst to stderr and fails at once */
        if (rank == 1) {
            for (int i = 0; i < 300; i++)
                fprintf(stderr, "burst line %d of rank 1\n", i);
            fprintf(stderr, "last words of rank 1, without a newline");
            fflush(stderr);
            /* a child that keeps the output pipe open: no end of stream
             * tells symmrun the line is complete */
            if (fork() == 0) {
                sleep(5);
                _exit(0);
            }
            symm_test_sleep_ms(100);
            return 3;
        }
        sleep(60);
        return 0;
    }
    if (strcmp(mode, "stubborn") == 0) { /* rank 0 fails; rank 1 ignores SIGTERM */
        if (rank == 1) {
            signal(SIGTERM, SIG_IGN);
            printf("ignoring SIGTERM\n");
            fflush(stdout);
            sleep(60);
            printf("finished\n");
            return 0;
        }
        symm_test_sleep_ms(300);
        return 5;
    }
    if (strcmp(mode, "killed") == 0) { /* rank 2 dies of SIGKILL */
        if (rank == 2) {
            symm_test_sleep_ms(200);
            raise(SIGKILL);
        }
        sleep(60);
        printf("finished\n");
        return 0;
    }
    if (strcmp(mode, "grandchild") == 0) { /* rank 0 leaves a child behind and fails */
        if (rank == 0) {
            pid_t g = fork();
            if (g == 0) {
                sleep(60);
                printf("grandchild finished\n");
                _exit(0);
            }
            printf("grandchild %d\n", (int)g);
            fflush(stdout);
            symm_test_sleep_ms(300);
            return 4;
        }
        sleep(60);
        return 0;
    }
    if (strcmp(mode, "stopfail") == 0) { /* rank 1 stops itself, rank 0 fails */
        if (rank == 1) {
            printf("stopping\n");
            fflush(stdout);
            raise(SIGSTOP);
            printf("continued\n");
            fflush(stdout);
            sleep(60);
            return 0;
        }
        symm_test_sleep_ms(500);
        return 86;
    }
    if (strcmp(mode, "stopalone") == 0) { /* rank 1 stops itself, the others pass */
        if (rank == 1) {
            raise(SIGSTOP);
            sleep(60);
            return 0;
        }
        return 0;
    }
    if (strcmp(mode, "hang") == 0) {
        printf("hanging\n");
        fflush(stdout);
        sleep(60);
        printf("finished\n");
        return 0;
    }
    if (strcmp(mode, "ready") == 0) { /* wait for a signal */
        printf("pid %d\n", (int)getpid());
        printf("ready\n");
        fflush(stdout);
        sleep(60);
        return 0;
    }
    if (strcmp(mode, "skip") == 0) {
        printf("SKIP: testing\n");
        return 77;
    }
    if (strcmp(mode, "halfskip") == 0)
        return rank == 0 ? 77 : 0;
    if (strcmp(mode, "skipwait") == 0) { /* rank 0 skips, the others wait for it */
        if (rank == 0)
            return 77;
        sleep(60);
        return 0;
    }
    if (strcmp(mode, "pass") == 0)
        return 0;
    fprintf(stderr, "unknown child mode %s\n", mode);
    return 99;
}

/* ---- driver --------------------------------------------------------------- */

typedef struct result {
    int code;
    double seconds;
    char *out, *err;
} result_t;

static char *slurp(int fd) {
    off_t size = lseek(fd, 0, SEEK_END);
    char *buf = calloc(1, (size_t)size + 1);
    TEST_ASSERT(buf && pread(fd, buf, (size_t)size, 0) == size, "read back output");
    return buf;
}

static int temp_fd(void) {
    char path[] = "/tmp/symm_test_symmrun_XXXXXX";
    int fd = mkstemp(path);
    TEST_ASSERT(fd >= 0, "mkstemp");
    unlink(path);
    return fd;
}

static const char *g_symmrun;
static char g_self[4096];

/* Count lines of `text` that equal `line` exactly. */
static int count_lines(const char *text, const char *line) {
    int n = 0;
    size_t len = strlen(line);
    for (const char *p = text; p && *p;) {
        const char *eol = strchr(p, '\n');
        size_t l = eol ? (size_t)(eol - p) : strlen(p);
        if (l == len && memcmp(p, line, len) == 0)
            n++;
        p = eol ? eol + 1 : NULL;
    }
    return n;
}

/* Run symmrun with args (NULL-terminated); `signal_after_ready` > 0 sends
 * that signal to symmrun once `ready_lines` lines "... ready" appeared. */
static result_t run(const char *const *args, int sig, int ready_lines) {
    int out = temp_fd(), err = temp_fd();
    const char *argv[32];
    int k = 0;
    argv[k++] = g_symmrun;
    for (int i = 0; args[i]; i++)
        argv[k++] = strcmp(args[i], "SELF") == 0 ? g_self : args[i];
    argv[k] = NULL;
    double t0 = symm_test_now_s();
    pid_t pid = fork();
    TEST_ASSERT(pid >= 0, "fork");
    if (pid == 0) {
        dup2(out, 1);
        dup2(err, 2);
        execv(g_symmrun, (char *const *)argv);
        _exit(126);
    }
    if (sig) {
        double until = symm_test_now_s() + 20;
        for (;;) {
            char *o = slurp(out);
            int ready = 0;
            for (char *p = o; (p = strstr(p, "] ready\n")); p++)
                ready++;
            free(o);
            if (ready >= ready_lines)
                break;
            TEST_ASSERT(symm_test_now_s() < until, "children never got ready");
            symm_test_sleep_ms(20);
        }
        kill(pid, sig);
    }
    int st;
    TEST_ASSERT(waitpid(pid, &st, 0) == pid, "waitpid");
    result_t r;
    r.seconds = symm_test_now_s() - t0;
    if (sig == SIGKILL) {
        TEST_ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "symmrun should have been killed");
        r.code = 128 + SIGKILL;
    } else {
        TEST_ASSERT(WIFEXITED(st), "symmrun died of signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : -1);
        r.code = WEXITSTATUS(st);
    }
    r.out = slurp(out);
    r.err = slurp(err);
    close(out);
    close(err);
    return r;
}

static void done(result_t *r) {
    free(r->out);
    free(r->err);
}

#define A(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_env_and_prefixes(void) {
    static char first_secret[80];
    result_t r = run(A("-n", "3", "SELF", "child", "env"), 0, 0);
    TEST_ASSERT(r.code == 0, "exit %d, stderr:\n%s", r.code, r.err);
    int master = -1, bport = -1;
    char secret0[80] = "";
    for (int rank = 0; rank < 3; rank++) {
        char prefix[16], *p;
        snprintf(prefix, sizeof prefix, "[%d] env ", rank);
        TEST_ASSERT((p = strstr(r.out, prefix)) != NULL, "no env line of rank %d in:\n%s", rank, r.out);
        int vr, ws, lr, lws, mp, bp;
        char addr[64], secret[80];
        TEST_ASSERT(sscanf(p + strlen(prefix),
                           "RANK=%d WORLD_SIZE=%d LOCAL_RANK=%d LOCAL_WORLD_SIZE=%d MASTER_ADDR=%63s "
                           "MASTER_PORT=%d SYMM_BOOTSTRAP_PORT=%d SYMM_BOOTSTRAP_SECRET=%79s",
                           &vr, &ws, &lr, &lws, addr, &mp, &bp, secret) == 8,
                    "env line of rank %d: %.200s", rank, p);
        /* a job secret: 256 random bits, the same on every rank of the job */
        TEST_ASSERT(strlen(secret) == 64 && strspn(secret, "0123456789abcdef") == 64, "secret \"%s\"", secret);
        if (!secret0[0])
            snprintf(secret0, sizeof secret0, "%s", secret);
        TEST_ASSERT(strcmp(secret, secret0) == 0, "rank %d has another secret", rank);
        TEST_ASSERT(vr == rank && ws == 3 && lr == rank && lws == 3, "rank %d sees %d/%d %d/%d", rank, vr, ws,
                    lr, lws);
        TEST_ASSERT(strcmp(addr, "127.0.0.1") == 0, "MASTER_ADDR %s", addr);
        TEST_ASSERT(mp > 0 && mp < 65536 && bp > 0 && bp < 65536 && mp != bp, "ports %d %d", mp, bp);
        if (master < 0)
            master = mp, bport = bp;
        TEST_ASSERT(mp == master && bp == bport, "every rank gets the same ports");

        char line[256];
        snprintf(line, sizeof line,
                 "[%d] piece0-of-rank%d piece1-of-rank%d piece2-of-rank%d piece3-of-rank%d "
                 "piece4-of-rank%d end",
                 rank, rank, rank, rank, rank, rank);
        TEST_ASSERT(count_lines(r.out, line) == 1, "line written in pieces not whole: want \"%s\" in:\n%s",
                    line, r.out);
        snprintf(line, sizeof line, "[%d] no newline at the end from %d", rank, rank);
        TEST_ASSERT(count_lines(r.out, line) == 1, "unterminated last line of rank %d", rank);
        snprintf(line, sizeof line, "[%d] to stderr from %d", rank, rank);
        TEST_ASSERT(count_lines(r.err, line) == 1, "stderr line of rank %d missing in:\n%s", rank, r.err);
    }
    /* A new job, a new secret. */
    if (first_secret[0])
        TEST_ASSERT(strcmp(first_secret, secret0) != 0, "two jobs got the same secret");
    else
        snprintf(first_secret, sizeof first_secret, "%s", secret0);
    /* Every output line carries a prefix. */
    for (const char *p = r.out; *p;) {
        TEST_ASSERT(p[0] == '[' && (p[1] >= '0' && p[1] <= '2') && p[2] == ']' && p[3] == ' ',
                    "unprefixed line: %.80s", p);
        const char *eol = strchr(p, '\n');
        TEST_ASSERT(eol, "output ends with a newline");
        p = eol + 1;
    }
    done(&r);
}

static void expect_gone(pid_t pid, const char *what);

static void test_failures(void) {
    /* The first failure's code; the others are stopped. */
    result_t r = run(A("-n", "3", "SELF", "child", "fail"), 0, 0);
    TEST_ASSERT(r.code == 3, "exit %d, expected 3; stderr:\n%s", r.code, r.err);
    TEST_ASSERT(!strstr(r.out, "finished"), "a rank ran to the end:\n%s", r.out);
    TEST_ASSERT(r.seconds < STOP_BOUND_S, "took %.1f s: the others were not stopped", r.seconds);
    TEST_ASSERT(strstr(r.err, "rank 1 exited with code 3"), "says who failed:\n%s", r.err);
    done(&r);

    /* A rank that ignores SIGTERM gets SIGKILL after the grace period; the
     * exit code stays the first failure's. */
    r = run(A("-n", "2", "--grace", "1", "SELF", "child", "stubborn"), 0, 0);
    TEST_ASSERT(r.code == 5, "exit %d, expected 5; stderr:\n%s", r.code, r.err);
    TEST_ASSERT(!strstr(r.out, "finished"), "stubborn rank ran to the end");
    TEST_ASSERT(r.seconds < STOP_BOUND_S, "took %.1f s: SIGKILL never came", r.seconds);
    done(&r);

    /* A signal death counts as 128 + signal, and is named. */
    r = run(A("-n", "3", "SELF", "child", "killed"), 0, 0);
    TEST_ASSERT(r.code == 128 + SIGKILL, "exit %d, expected %d", r.code, 128 + SIGKILL);
    TEST_ASSERT(!strstr(r.out, "finished") && r.seconds < STOP_BOUND_S, "others stopped");
    TEST_ASSERT(strstr(r.err, "rank 2 was killed by SIGKILL"), "names the signal:\n%s", r.err);
    done(&r);

    /* A stopped rank is stopped with the others at once (SIGCONT after the
     * SIGTERM), not after the grace period; symm's exit status is named. */
    r = run(A("-n", "3", "--grace", "100", "--timeout", "200", "SELF", "child", "stopfail"), 0, 0);
    TEST_ASSERT(r.code == 86, "exit %d, expected 86; stderr:\n%s", r.code, r.err);
    TEST_ASSERT(r.seconds < STOP_BOUND_S, "took %.1f s: the stopped rank waited for the 100 s grace", r.seconds);
    TEST_ASSERT(strstr(r.err, "exited with code 86 (symm ended it") && strstr(r.err, "rank 1 is stopped"),
                "names the failure and the stopped rank:\n%s", r.err);
    TEST_ASSERT(!strstr(r.out, "[1] continued"), "the stopped rank ran on before it ended:\n%s", r.out);
    done(&r);

    /* A rank left stopped when the others ended: stopped as a failure. */
    r = run(A("-n", "3", "--timeout", "60", "SELF", "child", "stopalone"), 0, 0);
    TEST_ASSERT(r.code == 128 + SIGSTOP, "exit %d, expected %d; stderr:\n%s", r.code, 128 + SIGSTOP, r.err);
    TEST_ASSERT(r.seconds < STOP_BOUND_S, "took %.1f s", r.seconds);
    TEST_ASSERT(strstr(r.err, "rank 1 was stopped (SIGSTOP)"), "names the stopped rank:\n%s", r.err);
    done(&r);

    /* What a rank wrote comes before symmrun's line about its end. */
    r = run(A("-n", "2", "SELF", "child", "burst"), 0, 0);
    TEST_ASSERT(r.code == 3, "exit %d, expected 3", r.code);
    {
        const char *last = strstr(r.err, "[1] last words of rank 1, without a newline\n");
        const char *ended = strstr(r.err, "rank 1 exited with code 3");
        TEST_ASSERT(last && ended && last < ended, "rank 1's output before its exit line:\n%s", r.err);
    }
    done(&r);

    /* The failing rank's own children are stopped too (its process group). */
    r = run(A("-n", "2", "SELF", "child", "grandchild"), 0, 0);
    TEST_ASSERT(r.code == 4, "exit %d, expected 4", r.code);
    TEST_ASSERT(r.seconds < STOP_BOUND_S, "took %.1f s", r.seconds);
    const char *g = strstr(r.out, "[0] grandchild ");
    TEST_ASSERT(g, "no grandchild line:\n%s", r.out);
    pid_t gpid = (pid_t)atoi(g + strlen("[0] grandchild "));
    TEST_ASSERT(gpid > 0, "grandchild pid");
    expect_gone(gpid, "grandchild");
    TEST_ASSERT(!strstr(r.out, "grandchild finished"), "grandchild ran to the end");
    done(&r);

    /* Exec failure: 127 when not found, without a stray signal line (the
     * SIGTERM that stops the other ranks must not come back to symmrun). */
    for (int i = 0; i < 5; i++) {
        r = run(A("-n", "8", "/nonexistent/program"), 0, 0);
        TEST_ASSERT(r.code == 127, "exit %d, expected 127", r.code);
        TEST_ASSERT(strstr(r.err, "cannot run '/nonexistent/program'"), "says why:\n%s", r.err);
        TEST_ASSERT(!strstr(r.err, "symmrun: got "), "a signal symmrun never got:\n%s", r.err);
        done(&r);
    }
    /* 126 when found but not executable. */
    {
        char path[] = "/tmp/symm_test_noexec_XXXXXX";
        int fd = mkstemp(path);
        TEST_ASSERT(fd >= 0 && write(fd, "#!/bin/sh\n", 10) == 10 && fchmod(fd, 0644) == 0, "temp file");
        close(fd);
        r = run(A("-n", "2", path), 0, 0);
        unlink(path);
        TEST_ASSERT(r.code == 126, "a file that cannot be executed: exit %d, expected 126\n%s", r.code, r.err);
        done(&r);
    }
}

static void test_timeout_and_signals(void) {
    result_t r = run(A("-n", "2", "--timeout", "1", "SELF", "child", "hang"), 0, 0);
    TEST_ASSERT(r.code == 124, "exit %d, expected 124", r.code);
    TEST_ASSERT(strstr(r.err, "timeout"), "says it timed out:\n%s", r.err);
    TEST_ASSERT(!strstr(r.out, "finished") && r.seconds < STOP_BOUND_S, "hanging ranks stopped (%.1f s)",
                r.seconds);
    TEST_ASSERT(count_lines(r.out, "[0] hanging") == 1 && count_lines(r.out, "[1] hanging") == 1,
                "output before the timeout kept:\n%s", r.out);
    done(&r);

    /* SIGTERM and SIGINT to symmrun reach the ranks. */
    int sigs[] = {SIGTERM, SIGINT};
    for (int i = 0; i < 2; i++) {
        r = run(A("-n", "2", "SELF", "child", "ready"), sigs[i], 2);
        TEST_ASSERT(r.code == 128 + sigs[i], "exit %d after signal %d", r.code, sigs[i]);
        TEST_ASSERT(strstr(r.err, i ? "got SIGINT" : "got SIGTERM"), "names the signal:\n%s", r.err);
        TEST_ASSERT(r.seconds < STOP_BOUND_S, "took %.1f s", r.seconds);
        done(&r);
    }
}

/* Gone, or a zombie waiting for its reaper, within 10 s. */
static void expect_gone(pid_t pid, const char *what) {
    double until = symm_test_now_s() + 10;
    for (;;) {
        char path[64], stat[256] = "";
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "r");
        if (!f)
            return;
        char *ok = fgets(stat, sizeof stat, f);
        fclose(f);
        char *close_paren = ok ? strrchr(stat, ')') : NULL;
        if (close_paren && close_paren[1] == ' ' && close_paren[2] == 'Z')
            return;
        TEST_ASSERT(symm_test_now_s() < until, "%s %d still running: %s", what, (int)pid, stat);
        symm_test_sleep_ms(50);
    }
}

static void test_launcher_killed(void) {
    /* SIGKILL cannot be forwarded: the ranks must die with symmrun anyway. */
    result_t r = run(A("-n", "2", "SELF", "child", "ready"), SIGKILL, 2);
    for (int rank = 0; rank < 2; rank++) {
        char key[32];
        snprintf(key, sizeof key, "[%d] pid ", rank);
        const char *p = strstr(r.out, key);
        TEST_ASSERT(p, "no pid line of rank %d:\n%s", rank, r.out);
        expect_gone((pid_t)atoi(p + strlen(key)), "rank of a killed symmrun");
    }
    done(&r);
}

/* What ctest sees: symmrun's stdout and stderr are one pipe, and when ctest
 * gives up it kills symmrun and reads that pipe to its end. The end must
 * come within seconds (no rank or rank child may hold the pipe), and the
 * hanging ranks must be gone, whether symmrun got SIGKILL or SIGTERM. */
static void test_killed_launcher_closes_pipe(int sig) {
    int fds[2];
    TEST_ASSERT(pipe(fds) == 0, "pipe");
    const char *argv[] = {g_symmrun, "-n", "2", "--grace", "1", g_self, "child", "ready", NULL};
    pid_t pid = fork();
    TEST_ASSERT(pid >= 0, "fork");
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[1]);
        execv(g_symmrun, (char *const *)argv);
        _exit(126);
    }
    close(fds[1]);
    TEST_ASSERT(fcntl(fds[0], F_SETFL, O_NONBLOCK) == 0, "O_NONBLOCK");
    size_t cap = 1 << 16, len = 0;
    char *buf = calloc(1, cap);
    TEST_ASSERT(buf, "calloc");
    int killed = 0, eof = 0;
    double until = symm_test_now_s() + 20, eof_by = 0;
    while (!eof) {
        ssize_t r = read(fds[0], buf + len, cap - 1 - len);
        if (r > 0) {
            len += (size_t)r;
            buf[len] = '\0';
            TEST_ASSERT(len < cap - 1, "too much output");
        } else if (r == 0) {
            eof = 1;
            break;
        } else {
            TEST_ASSERT(errno == EAGAIN || errno == EINTR, "read: %s", strerror(errno));
            symm_test_sleep_ms(20);
        }
        if (!killed) {
            int ready = 0;
            for (char *q = buf; (q = strstr(q, "] ready\n")); q++)
                ready++;
            if (ready >= 2) {
                kill(pid, sig);
                killed = 1;
                eof_by = symm_test_now_s() + 10;
            }
            TEST_ASSERT(symm_test_now_s() < until, "children never got ready:\n%s", buf);
        } else {
            TEST_ASSERT(symm_test_now_s() < eof_by, "signal %d: symmrun's output pipe still open 10 s after the signal "
                        "(a rank holds it):\n%s", sig, buf);
        }
    }
    close(fds[0]);
    int st;
    TEST_ASSERT(waitpid(pid, &st, 0) == pid, "waitpid");
    if (sig == SIGKILL)
        TEST_ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "symmrun should have been killed");
    else
        TEST_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 128 + sig, "symmrun after signal %d: status %#x", sig, st);
    for (int rank = 0; rank < 2; rank++) {
        char key[32];
        snprintf(key, sizeof key, "[%d] pid ", rank);
        const char *p = strstr(buf, key);
        TEST_ASSERT(p, "no pid line of rank %d:\n%s", rank, buf);
        expect_gone((pid_t)atoi(p + strlen(key)), sig == SIGKILL ? "rank of a SIGKILLed symmrun"
                                                                 : "rank of a SIGTERMed symmrun");
    }
    free(buf);
}

static void test_skip_and_pass(void) {
    result_t r = run(A("-n", "3", "SELF", "child", "skip"), 0, 0);
    TEST_ASSERT(r.code == 77, "all skipped: exit %d", r.code);
    TEST_ASSERT(count_lines(r.out, "[2] SKIP: testing") == 1, "skip line forwarded");
    done(&r);
    r = run(A("-n", "2", "SELF", "child", "halfskip"), 0, 0);
    TEST_ASSERT(r.code != 0 && r.code != 77, "half skipped: exit %d", r.code);
    done(&r);
    /* a lone skip does not leave the others hanging until the timeout */
    r = run(A("-n", "3", "--timeout", "100", "SELF", "child", "skipwait"), 0, 0);
    TEST_ASSERT(r.code == 1, "one rank skipped, the others waited: exit %d\n%s", r.code, r.err);
    TEST_ASSERT(r.seconds < STOP_BOUND_S, "the waiting ranks were stopped after %.1f s", r.seconds);
    TEST_ASSERT(strstr(r.err, "rank 0 skipped (exit 77) and 2 ranks are still running"), "no line "
                "naming the lone skip:\n%s", r.err);
    done(&r);
    r = run(A("-n", "4", "--", "SELF", "child", "pass"), 0, 0);
    TEST_ASSERT(r.code == 0, "all passed: exit %d", r.code);
    done(&r);
    r = run(A("-n1", "--timeout=30", "SELF", "child", "pass"), 0, 0);
    TEST_ASSERT(r.code == 0, "-n1 --timeout=30: exit %d\n%s", r.code, r.err);
    done(&r);
}

static void test_usage(void) {
    const char *const *bad[] = {
        A("-n"), A("-n", "0", "SELF"), A("-n", "abc", "SELF"), A("-n", "2"), A("--bogus", "SELF"),
        A("SELF"), A("-n", "2", "--timeout", "soon", "SELF"), A("-n", "-3", "SELF"),
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        result_t r = run(bad[i], 0, 0);
        TEST_ASSERT(r.code == 2, "usage case %zu: exit %d", i, r.code);
        TEST_ASSERT(strstr(r.err, "usage: symmrun"), "usage case %zu prints usage:\n%s", i, r.err);
        done(&r);
    }
    const char *noargs[] = {NULL};
    result_t r = run(noargs, 0, 0);
    TEST_ASSERT(r.code == 2 && strstr(r.err, "usage"), "no arguments: exit %d", r.code);
    done(&r);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "child") == 0)
        return child(argv[2]);
    if (argc != 2) {
        fprintf(stderr, "usage: test_symmrun <path to symmrun>\n");
        return 2;
    }
    g_symmrun = argv[1];
    ssize_t n = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
    TEST_ASSERT(n > 0, "readlink");
    g_self[n] = '\0';
    unsetenv("SYMM_BOOTSTRAP_SECRET"); /* symmrun makes one per job */
    test_usage();
    test_env_and_prefixes();
    test_env_and_prefixes();
    test_skip_and_pass();
    test_failures();
    test_timeout_and_signals();
    test_launcher_killed();
    test_killed_launcher_closes_pipe(SIGKILL);
    test_killed_launcher_closes_pipe(SIGTERM);
    printf("test_symmrun: OK\n");
    return 0;
}
