/*
 * symmrun - start N processes of one symm job on this machine.
 *
 *   symmrun -n N [--timeout S] [--grace S] [--] prog [args...]
 *
 * Each process gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
 * MASTER_ADDR=127.0.0.1, MASTER_PORT and SYMM_BOOTSTRAP_PORT (two ports free
 * at start-up), SYMM_BOOTSTRAP_SECRET (256 random bits for this job, unless
 * the caller set one: only processes holding it can join the job) and runs
 * in its own process group. With more processes than GPUs, each also gets
 * CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = 100 / (processes on its GPU) unless
 * that is set already (it matters only under MPS). Its stdout and stderr are
 * forwarded line by line with a "[rank] " prefix, each line in one write so
 * lines of different ranks never mix. The first rank to fail decides the
 * exit code (a signal death counts as 128 + signal, and is named: "rank 1
 * was killed by SIGSEGV"; a program that cannot be run: 127 if not found,
 * 126 otherwise; 86 is a rank that symm ended because a peer died or
 * failed) and the others are stopped: SIGTERM to their process groups, then
 * SIGCONT (a stopped rank takes SIGTERM only once continued), SIGKILL after
 * the grace period. A rank that is stopped (SIGSTOP) while every other rank
 * has ended would wait forever: it is stopped the same way, as a failure
 * (128 + SIGSTOP). A rank's output comes before the line saying it ended.
 * --timeout stops everything and exits 124. SIGINT/SIGTERM are forwarded.
 * Exit: 0 all passed; 77 all skipped (exit 77); 2 usage error.
 *
 * This tool does not link libsymm: it must work when the library does not.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/launch_env.h" /* header-only: symmrun links no libsymm */

#define LINE_MAX_BYTES 65536
#define EXIT_SKIP 77
#define SKIP_AGREE_S 5.0 /* how long the other ranks get to skip after the first did */
#define EXIT_TIMEOUT 124
#define EXIT_USAGE 2
/* A rank stopped (SIGSTOP) this long with every other rank gone is stopped. */
#define STOPPED_ALONE_S 2.0

typedef struct stream {
    int fd;       /* read end of the pipe, -1 once closed */
    int out;      /* 1 or 2: where its lines go */
    size_t len;
    char buf[LINE_MAX_BYTES];
} stream_t;

typedef struct rank {
    pid_t pid;     /* also its process group id */
    int running;
    int code;      /* exit code, 128 + signal for a signal death */
    char how[64];  /* "exited with code 3", "was killed by SIGSEGV (exit 139)" */
    stream_t s[2];
} rank_t;

static int g_sig_pipe[2] = {-1, -1};

static void usage(FILE *f) {
    fprintf(f,
            "usage: symmrun -n N [--timeout SECONDS] [--grace SECONDS] [--] program [args...]\n"
            "  -n, --np N         number of processes (ranks) to start, 1..4096\n"
            "  --timeout SECONDS  stop every rank and exit 124 after this long (0: never)\n"
            "  --grace SECONDS    after SIGTERM, wait this long before SIGKILL (default 3)\n"
            "Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,\n"
            "MASTER_PORT, SYMM_BOOTSTRAP_PORT and SYMM_BOOTSTRAP_SECRET (random per job unless\n"
            "set); with more ranks than GPUs, also CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (its\n"
            "share of the GPU under MPS). Output lines are prefixed with \"[rank] \".\n"
            "Exit code: the first failing rank's (128+signal for a signal; 86: symm ended the rank\n"
            "because a peer died or failed), 0 if all passed, 77 if all exited 77 (skipped), 124 on\n"
            "timeout, 2 on a usage error. Stopped ranks are continued to take the stop; a rank left\n"
            "stopped (SIGSTOP) after the others ended is stopped as a failure (147).\n");
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void on_signal(int sig) {
    unsigned char c = (unsigned char)sig;
    int saved = errno;
    if (write(g_sig_pipe[1], &c, 1) < 0) {
        /* full pipe: a signal is already pending, nothing to add */
    }
    errno = saved;
}

static void write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* our own output is gone (closed pipe): drop */
        p += w;
        n -= (size_t)w;
    }
}

/* Write "[rank] " + line + "\n" with one write. */
static void emit(int rank, int out, const char *line, size_t n) {
    static char tmp[LINE_MAX_BYTES + 32];
    int k = snprintf(tmp, sizeof tmp, "[%d] ", rank);
    if (n > sizeof tmp - (size_t)k - 1)
        n = sizeof tmp - (size_t)k - 1;
    memcpy(tmp + k, line, n);
    tmp[(size_t)k + n] = '\n';
    write_all(out, tmp, (size_t)k + n + 1);
}

/* Read what is available; forward complete lines. Returns 0 at EOF. */
static int pump(int rank, stream_t *s) {
    for (;;) {
        ssize_t r = read(s->fd, s->buf + s->len, sizeof s->buf - s->len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 1;
        if (r <= 0) {
            if (s->len)
                emit(rank, s->out, s->buf, s->len); /* last line without '\n' */
            s->len = 0;
            close(s->fd);
            s->fd = -1;
            return 0;
        }
        s->len += (size_t)r;
        size_t start = 0;
        for (size_t i = s->len - (size_t)r; i < s->len; i++)
            if (s->buf[i] == '\n') {
                emit(rank, s->out, s->buf + start, i - start);
                start = i + 1;
            }
        if (start == 0 && s->len == sizeof s->buf) {
            /* A line longer than the buffer: forward it in pieces. */
            emit(rank, s->out, s->buf, s->len);
            s->len = 0;
        } else if (start) {
            memmove(s->buf, s->buf + start, s->len - start);
            s->len -= start;
        }
    }
}

/* A TCP port that is free right now (bound, read back, released). Two
 * calls give two different ports as long as `keep` holds the first. */
static int free_port(int *keep) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        close(fd);
        return -1;
    }
    *keep = fd;
    return ntohs(sa.sin_port);
}

static int parse_seconds(const char *text, double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !(v >= 0) || v > 1e9)
        return -1;
    *out = v;
    return 0;
}

static void signal_groups(rank_t *ranks, int n, int sig) {
    for (int r = 0; r < n; r++)
        if (ranks[r].pid > 0)
            (void)kill(-ranks[r].pid, sig); /* the whole group; ESRCH if it is gone */
}

/* SIGTERM, then SIGCONT: a stopped process keeps a SIGTERM pending until it
 * is continued (SIGKILL, later, reaches it either way). */
static void stop_groups(rank_t *ranks, int n, int sig) {
    signal_groups(ranks, n, sig);
    signal_groups(ranks, n, SIGCONT);
}

/* Is this running rank stopped by a signal (state T in /proc)? A debugger's
 * stop (t) is not. */
static int rank_stopped(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t k = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[k] = '\0';
    const char *paren = strrchr(buf, ')');
    return paren && paren[1] == ' ' && paren[2] == 'T';
}

/* " (rank 1 is stopped (SIGSTOP); rank 3 is stopped (SIGSTOP))" for the
 * running ranks that are stopped, "" if none. */
static void describe_stopped(rank_t *ranks, int n, char *out, size_t size) {
    size_t len = 0;
    int k = 0;
    out[0] = '\0';
    for (int r = 0; r < n && len + 48 < size; r++)
        if (ranks[r].running && rank_stopped(ranks[r].pid))
            len += (size_t)snprintf(out + len, size - len, "%srank %d is stopped (SIGSTOP)", k++ ? "; " : " (",
                                    r);
    if (k)
        snprintf(out + len, size - len, ")");
}

static int rank_of(rank_t *ranks, int n, pid_t pid) {
    for (int r = 0; r < n; r++)
        if (ranks[r].pid == pid)
            return r;
    return -1;
}

/* "SIGSEGV" for the usual signals, else "signal N". */
static const char *sig_name(int sig, char *buf, size_t size) {
    static const struct { int sig; const char *name; } names[] = {
        {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
        {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
        {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
        {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGXCPU, "SIGXCPU"},
        {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].sig == sig)
            return names[i].name;
    snprintf(buf, size, "signal %d", sig);
    return buf;
}

/* GPUs the ranks will see: CUDA_VISIBLE_DEVICES' entries when it is set,
 * else the driver's list; 0 when neither says (no GPU, or unknown). Read
 * without CUDA, which this tool does not load. */
static int visible_gpus(void) {
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    int n = 0;
    if (v) {
        for (const char *p = v; *p && *p != '-';) { /* "-1" or "" hides every GPU */
            const char *c = strchr(p, ',');
            size_t len = c ? (size_t)(c - p) : strlen(p);
            n += len > 0;
            if (!c)
                break;
            p = c + 1;
        }
        return n;
    }
    DIR *d = opendir("/proc/driver/nvidia/gpus");
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* With more ranks than GPUs, rank r shares GPU r % gpus with the others of
 * that GPU (symm's LOCAL_RANK % device_count). Under MPS each gets that
 * share of the SMs (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE), so kernels that wait
 * on peers cannot take the SMs the peers need; without MPS it has no effect.
 * 0: leave the environment as it is (enough GPUs, or the user chose). */
static int mps_percentage(int rank, int n, int gpus) {
    if (gpus <= 0 || n <= gpus || getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"))
        return 0;
    int on_gpu = n / gpus + (rank % gpus < n % gpus);
    return 100 / on_gpu;
}

static pid_t spawn(int rank, int n, int port, int bport, char **argv, rank_t *rk) {
    int out[2], err[2];
    pid_t parent = getpid();
    sigset_t stop_sigs, old;
    if (pipe2(out, O_CLOEXEC) != 0)
        return -1;
    if (pipe2(err, O_CLOEXEC) != 0) {
        close(out[0]);
        close(out[1]);
        return -1;
    }
    /* Until the child has dropped our handler, a signal sent to it would run
     * that handler there and reach our signal pipe as if sent to us. */
    sigemptyset(&stop_sigs);
    sigaddset(&stop_sigs, SIGINT);
    sigaddset(&stop_sigs, SIGTERM);
    sigprocmask(SIG_BLOCK, &stop_sigs, &old);
    pid_t pid = fork();
    if (pid < 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        close(out[0]); close(out[1]); close(err[0]); close(err[1]);
        return -1;
    }
    if (pid == 0) {
        close(g_sig_pipe[0]);
        close(g_sig_pipe[1]);
        /* Own process group, so a stop reaches the rank's children too. */
        setpgid(0, 0);
        /* If symmrun itself is killed (SIGKILL cannot be forwarded), the
         * ranks must not live on: they are in their own groups, out of reach
         * of the terminal. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(128 + SIGKILL); /* symmrun died before prctl took effect */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGPIPE, &sa, NULL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        dup2(out[1], 1);
        dup2(err[1], 2);
        if (rank != 0) {
            /* Only rank 0 reads the terminal. */
            int null = open("/dev/null", O_RDONLY);
            if (null >= 0) {
                dup2(null, 0);
                close(null);
            }
        }
        char v[32];
        symm__launch_env_set(rank, n, port, bport);
        int pct = mps_percentage(rank, n, visible_gpus());
        if (pct > 0) {
            snprintf(v, sizeof v, "%d", pct);
            setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", v, 1);
        }
        execvp(argv[0], argv);
        int e = errno;
        fprintf(stderr, "symmrun: cannot run '%s': %s\n", argv[0], strerror(e));
        /* the shells' codes: found but not executable 126, not found 127 */
        _exit(e == ENOENT || e == ENOTDIR ? 127 : 126);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    setpgid(pid, pid); /* also here: no race with the signals we may send */
    close(out[1]);
    close(err[1]);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    rk->s[0].fd = out[0];
    rk->s[0].out = 1;
    rk->s[1].fd = err[0];
    rk->s[1].out = 2;
    return pid;
}

int main(int argc, char **argv) {
    int n = -1;
    double timeout = 0, grace = 3.0;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-')
            break;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        int is_n = strcmp(a, "-n") == 0 || strcmp(a, "--np") == 0;
        int is_t = strcmp(a, "--timeout") == 0;
        int is_g = strcmp(a, "--grace") == 0;
        if (is_n || is_t || is_g) {
            if (i + 1 >= argc) {
                fprintf(stderr, "symmrun: %s needs a value\n", a);
                usage(stderr);
                return EXIT_USAGE;
            }
            val = argv[++i];
        } else if (strncmp(a, "-n", 2) == 0 && a[2]) {
            is_n = 1, val = a + 2;
        } else if (strncmp(a, "--np=", 5) == 0) {
            is_n = 1, val = a + 5;
        } else if (strncmp(a, "--timeout=", 10) == 0) {
            is_t = 1, val = a + 10;
        } else if (strncmp(a, "--grace=", 8) == 0) {
            is_g = 1, val = a + 8;
        } else {
            fprintf(stderr, "symmrun: unknown option '%s'\n", a);
            usage(stderr);
            return EXIT_USAGE;
        }
        if (is_n) {
            char *end = NULL;
            errno = 0;
            long v = strtol(val, &end, 10);
            if (errno || end == val || *end || v < 1 || v > 4096) {
                fprintf(stderr, "symmrun: -n wants a number of processes in 1..4096, not '%s'\n", val);
                usage(stderr);
                return EXIT_USAGE;
            }
            n = (int)v;
        } else if (parse_seconds(val, is_t ? &timeout : &grace)) {
            fprintf(stderr, "symmrun: %s wants a number of seconds, not '%s'\n", a, val);
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (n < 0 || i >= argc) {
        fprintf(stderr, n < 0 ? "symmrun: -n is required\n" : "symmrun: no program given\n");
        usage(stderr);
        return EXIT_USAGE;
    }
    char **prog = argv + i;

    if (pipe2(g_sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        perror("symmrun: pipe");
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);

    /* The job secret, inherited by every rank (their environment is
     * readable by this user only). */
    const char *given = getenv("SYMM_BOOTSTRAP_SECRET");
    if (!given || !*given) {
        unsigned char r[32];
        char hex[2 * sizeof r + 1];
        size_t got = 0;
        while (got < sizeof r) {
            ssize_t k = getrandom(r + got, sizeof r - got, 0);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0) {
                fprintf(stderr, "symmrun: no random bytes for the job secret: %s\n", strerror(errno));
                return 1;
            }
            got += (size_t)k;
        }
        for (size_t k = 0; k < sizeof r; k++)
            snprintf(hex + 2 * k, 3, "%02x", r[k]);
        setenv("SYMM_BOOTSTRAP_SECRET", hex, 1);
        memset(r, 0, sizeof r);
        memset(hex, 0, sizeof hex);
    }

    int keep1 = -1, keep2 = -1;
    int port = free_port(&keep1), bport = free_port(&keep2);
    if (keep1 >= 0)
        close(keep1);
    if (keep2 >= 0)
        close(keep2);
    if (port < 0 || bport < 0) {
        fprintf(stderr, "symmrun: cannot find a free TCP port: %s\n", strerror(errno));
        return 1;
    }

    rank_t *ranks = calloc((size_t)n, sizeof *ranks);
    if (!ranks) {
        fprintf(stderr, "symmrun: out of memory\n");
        return 1;
    }
    for (int r = 0; r < n; r++)
        ranks[r].s[0].fd = ranks[r].s[1].fd = -1;

    int gpus = visible_gpus();
    if (mps_percentage(0, n, gpus) > 0)
        fprintf(stderr, "symmrun: %d ranks share %d GPU%s: each gets CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%d "
                        "(its share of the SMs under MPS)\n",
                n, gpus, gpus == 1 ? "" : "s", mps_percentage(0, n, gpus));

    double start = now_s();
    double deadline = timeout > 0 ? start + timeout : 0;
    double kill_at = 0; /* SIGKILL everyone at this time (0: not stopping) */
    int stopping = 0, timed_out = 0, first_fail = 0, first_fail_rank = -1, running = 0;
    /* A rank that skips while others run leaves them waiting for it (in the
     * bootstrap, say): the others get SKIP_AGREE_S to skip as well. */
    int first_skip_rank = -1;
    double skip_deadline = 0;
    double stopped_since = 0; /* since when every running rank is stopped (0: not so) */

    for (int r = 0; r < n; r++) {
        pid_t pid = spawn(r, n, port, bport, prog, &ranks[r]);
        if (pid < 0) {
            fprintf(stderr, "symmrun: cannot start rank %d: %s\n", r, strerror(errno));
            first_fail = 1;
            first_fail_rank = r;
            stopping = 1;
            kill_at = now_s() + grace;
            stop_groups(ranks, r, SIGTERM);
            break;
        }
        ranks[r].pid = pid;
        ranks[r].running = 1;
        running++;
    }

    struct pollfd *pfds = calloc((size_t)(2 * n + 1), sizeof *pfds);
    int *owner = calloc((size_t)(2 * n + 1), sizeof *owner);
    if (!pfds || !owner) {
        fprintf(stderr, "symmrun: out of memory\n");
        signal_groups(ranks, n, SIGKILL);
        return 1;
    }
    double drain_until = 0; /* after the last rank exits, read leftovers this long */
    char sigbuf[32];
    for (;;) {
        /* Reap. */
        int status;
        pid_t pid;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
            int r = rank_of(ranks, n, pid);
            if (r < 0 || !ranks[r].running)
                continue;
            ranks[r].running = 0;
            running--;
            ranks[r].code = WIFEXITED(status) ? WEXITSTATUS(status)
                            : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                                  : 1;
            int code = ranks[r].code;
            /* what the rank wrote before it ended comes before our line about
             * it, an unfinished last line too (a child of the rank may hold
             * the pipe, so its end may not come now) */
            for (int j = 0; j < 2; j++)
                if (ranks[r].s[j].fd >= 0) {
                    pump(r, &ranks[r].s[j]);
                    if (ranks[r].s[j].len) {
                        emit(r, ranks[r].s[j].out, ranks[r].s[j].buf, ranks[r].s[j].len);
                        ranks[r].s[j].len = 0;
                    }
                }
            if (WIFSIGNALED(status))
                snprintf(ranks[r].how, sizeof ranks[r].how, "was killed by %s (exit %d)",
                         sig_name(WTERMSIG(status), sigbuf, sizeof sigbuf), code);
            else if (code == SYMM__ABORT_EXIT_STATUS)
                snprintf(ranks[r].how, sizeof ranks[r].how,
                         "exited with code %d (symm ended it: a peer died or failed)", code);
            else
                snprintf(ranks[r].how, sizeof ranks[r].how, "exited with code %d", code);
            if (code == EXIT_SKIP && first_skip_rank < 0 && running > 0) {
                first_skip_rank = r;
                skip_deadline = now_s() + SKIP_AGREE_S;
            }
            if (code != 0 && code != EXIT_SKIP && first_fail_rank < 0) {
                first_fail = code;
                first_fail_rank = r;
                if (!stopping && running > 0) {
                    char stopped[256];
                    describe_stopped(ranks, n, stopped, sizeof stopped);
                    fprintf(stderr, "symmrun: rank %d %s; stopping the other ranks%s\n", r, ranks[r].how, stopped);
                }
                if (!stopping) {
                    stopping = 1;
                    kill_at = now_s() + grace;
                    stop_groups(ranks, n, SIGTERM);
                }
            }
        }
        double t = now_s();
        if (running == 0) {
            if (drain_until == 0) {
                /* Leftover processes of a stopped job keep our pipes open. */
                if (stopping)
                    signal_groups(ranks, n, SIGKILL);
                drain_until = t + 1.0;
            }
        }
        /* Ranks stopped by a signal with every other rank gone: nobody
         * will continue them. */
        int alone = running > 0 && running < n && !stopping;
        for (int r = 0; alone && r < n; r++)
            if (ranks[r].running && !rank_stopped(ranks[r].pid))
                alone = 0;
        if (!alone)
            stopped_since = 0;
        else if (stopped_since == 0)
            stopped_since = t;
        else if (t - stopped_since >= STOPPED_ALONE_S && first_fail_rank < 0) {
            for (int r = 0; r < n; r++)
                if (ranks[r].running && first_fail_rank < 0) {
                    first_fail_rank = r;
                    first_fail = 128 + SIGSTOP;
                    snprintf(ranks[r].how, sizeof ranks[r].how, "was stopped (SIGSTOP) after the others ended");
                }
            fprintf(stderr, "symmrun: rank %d %s; nothing will continue it: stopping it\n", first_fail_rank,
                    ranks[first_fail_rank].how);
            stopping = 1;
            kill_at = t + grace;
            stop_groups(ranks, n, SIGTERM);
        }
        if (skip_deadline > 0 && t >= skip_deadline && running > 0 && !stopping && first_fail_rank < 0) {
            fprintf(stderr,
                    "symmrun: rank %d skipped (exit %d) and %d rank%s still running %g s later: ranks "
                    "must skip together; stopping them\n",
                    first_skip_rank, EXIT_SKIP, running, running == 1 ? " is" : "s are", SKIP_AGREE_S);
            first_fail = 1;
            first_fail_rank = first_skip_rank;
            stopping = 1;
            kill_at = t + grace;
            stop_groups(ranks, n, SIGTERM);
        }
        if (deadline > 0 && t >= deadline && !timed_out && running > 0) {
            timed_out = 1;
            fprintf(stderr, "symmrun: timeout: ranks still running after %g s; stopping them (exit %d)\n",
                    timeout, EXIT_TIMEOUT);
            if (!stopping) {
                stopping = 1;
                kill_at = t + grace;
                stop_groups(ranks, n, SIGTERM);
            }
        }
        if (stopping && kill_at > 0 && t >= kill_at) {
            signal_groups(ranks, n, SIGKILL);
            kill_at = 0;
        }
        /* Poll pipes and the signal pipe. */
        int k = 0;
        pfds[k] = (struct pollfd){.fd = g_sig_pipe[0], .events = POLLIN};
        owner[k++] = -1;
        int open_streams = 0;
        for (int r = 0; r < n; r++)
            for (int j = 0; j < 2; j++)
                if (ranks[r].s[j].fd >= 0) {
                    pfds[k] = (struct pollfd){.fd = ranks[r].s[j].fd, .events = POLLIN};
                    owner[k++] = 2 * r + j;
                    open_streams++;
                }
        if (running == 0 && (open_streams == 0 || t >= drain_until))
            break;
        /* Short polls: children are reaped by polling waitpid. */
        int r = poll(pfds, (nfds_t)k, 50);
        if (r < 0 && errno != EINTR) {
            perror("symmrun: poll");
            break;
        }
        for (int x = 1; x < k; x++)
            if (pfds[x].revents) {
                int rr = owner[x] / 2, j = owner[x] % 2;
                pump(rr, &ranks[rr].s[j]);
            }
        if (pfds[0].revents) {
            unsigned char sigs[16];
            ssize_t got = read(g_sig_pipe[0], sigs, sizeof sigs);
            for (ssize_t q = 0; q < got; q++) {
                fprintf(stderr, "symmrun: got %s; forwarding it to the ranks\n",
                        sig_name(sigs[q], sigbuf, sizeof sigbuf));
                stop_groups(ranks, n, sigs[q]);
                if (!stopping) {
                    stopping = 1;
                    kill_at = now_s() + grace;
                }
            }
        }
    }
    for (int r = 0; r < n; r++)
        for (int j = 0; j < 2; j++)
            if (ranks[r].s[j].fd >= 0) {
                if (ranks[r].s[j].len)
                    emit(r, ranks[r].s[j].out, ranks[r].s[j].buf, ranks[r].s[j].len);
                close(ranks[r].s[j].fd);
            }

    int result;
    if (timed_out) {
        result = EXIT_TIMEOUT;
    } else if (first_fail_rank >= 0) {
        result = first_fail;
    } else {
        int skipped = 0;
        for (int r = 0; r < n; r++)
            skipped += ranks[r].code == EXIT_SKIP;
        if (skipped == n) {
            result = EXIT_SKIP;
        } else if (skipped > 0) {
            /* Ranks must agree on skipping; half a skipped test is a failure. */
            fprintf(stderr, "symmrun: %d of %d ranks skipped (exit 77) and the others passed\n", skipped,
                    n);
            result = 1;
        } else {
            result = 0;
        }
    }
    if (result != 0 && result != EXIT_SKIP && !timed_out && first_fail_rank >= 0)
        fprintf(stderr, "symmrun: exit %d (first failure: rank %d %s)\n", result, first_fail_rank,
                ranks[first_fail_rank].how[0] ? ranks[first_fail_rank].how : "could not start");
    free(pfds);
    free(owner);
    free(ranks);
    return result;
}
