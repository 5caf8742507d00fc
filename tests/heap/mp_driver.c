/*
 * mp_driver.c - run N copies of a test program as the PEs of one job, the
 * way torchrun would: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
 * MASTER_ADDR, MASTER_PORT and a fresh SYMM_BOOTSTRAP_PORT (bind to port 0)
 * set for each. Used by the CI tests, which must not depend on symmrun.
 *
 *   mp_driver -n N [--timeout S] [--killed R] -- program args...
 *
 * Exit: 0 when every PE exited 0 (PE R of --killed must instead die of
 * SIGKILL), 77 when every PE skipped, 1 otherwise. A PE that fails or a
 * job past its timeout gets the remaining PEs killed, so nothing hangs.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof(a);
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void set_int(const char *name, int v) {
    char buf[32];
    snprintf(buf, sizeof(buf), "%d", v);
    if (setenv(name, buf, 1) != 0) {
        perror("setenv");
        _exit(1);
    }
}

int main(int argc, char **argv) {
    int n = 0, killed = -1;
    double timeout = 120;
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            n = atoi(argv[++i]);
        else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc)
            timeout = atof(argv[++i]);
        else if (strcmp(argv[i], "--killed") == 0 && i + 1 < argc)
            killed = atoi(argv[++i]);
        else
            break;
    }
    if (n < 1 || i >= argc - 1 || strcmp(argv[i], "--") != 0) {
        fprintf(stderr, "usage: %s -n N [--timeout S] [--killed R] -- program args...\n", argv[0]);
        return 2;
    }
    char **prog = argv + i + 1;
    int port = free_port(), mport = free_port();
    if (port < 0 || mport < 0) {
        fprintf(stderr, "mp_driver: no free port: %s\n", strerror(errno));
        return 1;
    }
    pid_t *pids = calloc((size_t)n, sizeof(pid_t));
    int *status = calloc((size_t)n, sizeof(int));
    int *done = calloc((size_t)n, sizeof(int));
    if (!pids || !status || !done)
        return 1;
    for (int r = 0; r < n; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            for (int q = 0; q < r; q++)
                kill(pids[q], SIGKILL);
            return 1;
        }
        if (pid == 0) {
            set_int("RANK", r);
            set_int("WORLD_SIZE", n);
            set_int("LOCAL_RANK", r);
            set_int("LOCAL_WORLD_SIZE", n);
            set_int("MASTER_PORT", mport);
            set_int("SYMM_BOOTSTRAP_PORT", port);
            setenv("MASTER_ADDR", "127.0.0.1", 1);
            execv(prog[0], prog);
            fprintf(stderr, "mp_driver: exec %s: %s\n", prog[0], strerror(errno));
            _exit(127);
        }
        pids[r] = pid;
    }
    const double start = now_s();
    double kill_at = start + timeout;
    int left = n, failed = 0, skipped = 0;
    while (left > 0) {
        int st = 0;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid < 0 && errno != EINTR)
            break;
        if (pid <= 0) {
            if (now_s() > kill_at) {
                fprintf(stderr, "mp_driver: %s; killing the %d PEs left\n",
                        failed ? "PEs still running after a failure" : "timeout", left);
                for (int r = 0; r < n; r++)
                    if (!done[r])
                        kill(pids[r], SIGKILL);
                failed = 1;
                kill_at = now_s() + 1e9;
            }
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        int r = 0;
        while (r < n && pids[r] != pid)
            r++;
        if (r == n)
            continue;
        done[r] = 1;
        status[r] = st;
        left--;
        int ok;
        if (r == killed)
            ok = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
        else
            ok = WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 77);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
            skipped++;
        if (!ok) {
            if (WIFSIGNALED(st))
                fprintf(stderr, "mp_driver: PE %d died of signal %d\n", r, WTERMSIG(st));
            else
                fprintf(stderr, "mp_driver: PE %d exited with %d\n", r, WEXITSTATUS(st));
            if (!failed) /* give the others a moment to report, then stop them */
                kill_at = now_s() + 30 < kill_at ? now_s() + 30 : kill_at;
            failed = 1;
        }
    }
    printf("mp_driver: %d PEs finished in %.2f s%s\n", n, now_s() - start,
           failed ? " (FAILED)" : "");
    free(pids);
    free(status);
    free(done);
    if (failed)
        return 1;
    if (skipped == n)
        return 77;
    return skipped ? 1 : 0;
}
