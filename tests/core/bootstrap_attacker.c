/*
 * bootstrap_attacker.c - what test_bootstrap's attack scenarios do to a job
 * that is forming (its last rank not started yet) and then exchanging
 * memory handles: each function returns 0 when the job gave the attacker
 * nothing (no ACCEPT, no WELCOME, no file descriptor) and prints what it
 * got otherwise.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap_internal.h"
#include "core/env.h"
#include "bootstrap_attacker.h"

/* The HELLO of the first bootstrap protocol, whose nonce anyone could
 * compute from the port and the job size. */
typedef struct old_hello {
    uint32_t version, kind;
    uint64_t nonce;
    int32_t rank, nranks;
} old_hello_t;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int connect_root(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)port);
    for (int i = 0; i < 500 && fd >= 0; i++) {
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
            return fd;
        usleep(10000);
    }
    if (fd >= 0)
        close(fd);
    return -1;
}

static int recv_n(int fd, void *buf, size_t n, double seconds) {
    char *p = buf;
    double until = now_s() + seconds;
    while (n > 0) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int ms = (int)((until - now_s()) * 1000);
        if (ms <= 0 || poll(&pf, 1, ms) <= 0)
            return -1;
        ssize_t r = recv(fd, p, n, 0);
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* The root's answer to what we sent: 0 if it turned us away (or closed),
 * and then `reason` holds its message; 1 if it accepted or welcomed us. */
static int verdict(int fd, char *reason, size_t size) {
    symm__bs_hdr_t h;
    reason[0] = '\0';
    for (;;) {
        symm__bs_challenge_t c;
        if (recv_n(fd, &h, sizeof h, 10.0) != 0)
            return 0;
        if (h.op != SYMM__OP_CHALLENGE || h.nbytes != sizeof c)
            break;
        if (recv_n(fd, &c, sizeof c, 2.0) != 0) /* a challenge we do not answer */
            return 0;
    }
    if (h.op == SYMM__OP_REJECT) {
        size_t k = h.nbytes < size ? (size_t)h.nbytes : size - 1;
        if (recv_n(fd, reason, k, 2.0) != 0)
            k = 0;
        reason[k] = '\0';
        return 0;
    }
    snprintf(reason, size, "the root answered op %u", h.op);
    return h.op == SYMM__OP_ACCEPT || h.op == SYMM__OP_WELCOME;
}

/* Read the root's challenge (what a new connection gets first). */
static int read_challenge(int fd, symm__bs_challenge_t *c) {
    symm__bs_hdr_t h;
    if (recv_n(fd, &h, sizeof h, 10.0) != 0 || h.op != SYMM__OP_CHALLENGE || h.nbytes != sizeof *c)
        return -1;
    return recv_n(fd, c, sizeof *c, 2.0);
}

static int expect_turned_away(const char *what, int fd, const char *must_say) {
    char reason[640];
    int got = verdict(fd, reason, sizeof reason);
    close(fd);
    if (got) {
        fprintf(stderr, "FAIL attacker: %s: the root let us in (%s)\n", what, reason);
        return 1;
    }
    if (must_say && !strstr(reason, must_say)) {
        fprintf(stderr, "FAIL attacker: %s: turned away, but the reason \"%s\" lacks \"%s\"\n", what, reason,
                must_say);
        return 1;
    }
    printf("attacker: %s: turned away (%s)\n", what, reason[0] ? reason : "connection closed");
    return 0;
}

int attack_old_nonce(int port, int nranks, int rank) {
    int bad = 0, fds[2];
    /* both connections of the missing rank first: the first protocol's root
     * welcomed a rank once it had both */
    for (uint32_t kind = SYMM__CONN_MAIN; kind <= SYMM__CONN_LIVE; kind++) {
        uint64_t key[2] = {(uint64_t)port, (uint64_t)nranks};
        old_hello_t h = {1, kind, symm__hash64(key, sizeof key, 0), rank, nranks};
        symm__bs_hdr_t hdr = {SYMM__BS_MAGIC, SYMM__OP_HELLO, 0, sizeof h, -1, 0};
        int fd = fds[kind - 1] = connect_root(port);
        if (fd < 0) {
            fprintf(stderr, "FAIL attacker: cannot reach the root at port %d\n", port);
            return 1;
        }
        if (send(fd, &hdr, sizeof hdr, MSG_NOSIGNAL) != (ssize_t)sizeof hdr ||
            send(fd, &h, sizeof h, MSG_NOSIGNAL) != (ssize_t)sizeof h) {
            /* closed on us: nothing gained */
        }
    }
    for (int k = 0; k < 2; k++)
        bad |= expect_turned_away(k ? "HELLO (live) with the nonce computed from port and size"
                                    : "HELLO (main) with the nonce computed from port and size",
                                  fds[k], NULL);
    /* this protocol's HELLO, with a made-up proof */
    {
        int fd = connect_root(port);
        symm__bs_challenge_t c;
        symm__bs_hello_t h;
        symm__bs_hdr_t hdr = {SYMM__BS_MAGIC, SYMM__OP_HELLO, 0, sizeof h, -1, 0};
        if (fd < 0 || read_challenge(fd, &c) != 0) {
            fprintf(stderr, "FAIL attacker: no challenge from the root\n");
            return 1;
        }
        memset(&h, 0, sizeof h);
        h.version = SYMM__BS_VERSION;
        h.kind = SYMM__CONN_MAIN;
        h.rank = rank;
        h.nranks = nranks;
        h.pid = getpid();
        memset(h.mac, 0x5a, sizeof h.mac);
        if (send(fd, &hdr, sizeof hdr, MSG_NOSIGNAL) == (ssize_t)sizeof hdr &&
            send(fd, &h, sizeof h, MSG_NOSIGNAL) == (ssize_t)sizeof h)
            bad |= expect_turned_away("HELLO without the key", fd, "authentication failed");
        else
            close(fd);
    }
    return bad;
}

/* A HELLO that is valid for one connection's challenge, as a real rank
 * sends it (the attacker holds the key only to make one), replayed on
 * another connection. */
static void sign(const symm__job_key_t *key, const unsigned char *challenge, symm__bs_hello_t *h) {
    static const char tag[] = "symm hello";
    const void *parts[3] = {tag, challenge, h};
    size_t lens[3] = {sizeof tag, SYMM__NONCE_BYTES, offsetof(symm__bs_hello_t, mac)};
    symm__hmac_sha256(key->k, sizeof key->k, parts, lens, 3, h->mac);
}

int attack_replay(int port, int nranks, int rank) {
    symm__key_src_t ks;
    symm__job_key_t key;
    symm__bs_challenge_t ca, cb;
    symm__bs_hello_t h;
    symm__bs_hdr_t hdr = {SYMM__BS_MAGIC, SYMM__OP_HELLO, 0, sizeof h, -1, 0};
    int bad = 0, fa, fb;
    (void)rank;
    if (symm__key_src_rank("127.0.0.1", port, nranks, &ks) != SYMM_SUCCESS || !ks.have) {
        fprintf(stderr, "FAIL attacker: the replay scenario needs SYMM_BOOTSTRAP_SECRET\n");
        return 1;
    }
    fa = connect_root(port);
    fb = connect_root(port);
    if (fa < 0 || fb < 0 || read_challenge(fa, &ca) != 0 || read_challenge(fb, &cb) != 0 ||
        symm__key_get(&ks, ca.key_file, &key) != SYMM_SUCCESS) {
        fprintf(stderr, "FAIL attacker: no challenge from the root (or another key)\n");
        return 1;
    }
    memset(&h, 0, sizeof h);
    h.version = SYMM__BS_VERSION;
    h.kind = SYMM__CONN_MAIN;
    h.rank = nranks + 5; /* out of range: the root judges it, and says so, only if the proof holds */
    h.nranks = nranks;
    h.pid = getpid();
    memset(h.nonce, 0x11, sizeof h.nonce);
    sign(&key, ca.nonce, &h);
    /* on its own connection the proof holds (the root names the bad rank) */
    if (send(fa, &hdr, sizeof hdr, MSG_NOSIGNAL) != (ssize_t)sizeof hdr ||
        send(fa, &h, sizeof h, MSG_NOSIGNAL) != (ssize_t)sizeof h)
        return 1;
    bad |= expect_turned_away("signed HELLO for an out-of-range rank (the proof holds)", fa, "out of range");
    /* the same bytes on the other connection: worthless */
    if (send(fb, &hdr, sizeof hdr, MSG_NOSIGNAL) != (ssize_t)sizeof hdr ||
        send(fb, &h, sizeof h, MSG_NOSIGNAL) != (ssize_t)sizeof h)
        return 1;
    bad |= expect_turned_away("the same HELLO replayed on another connection", fb, "authentication failed");
    symm__key_src_done(&ks);
    return bad;
}

int attack_silent_open(int port, int count, int *fds) {
    for (int i = 0; i < count; i++)
        if ((fds[i] = connect_root(port)) < 0) {
            fprintf(stderr, "FAIL attacker: silent connection %d: cannot connect\n", i);
            return 1;
        }
    printf("attacker: %d connections open, saying nothing\n", count);
    return 0;
}

int attack_drop_privileges(void) {
    const uid_t nobody = 65534;
    if (getuid() != 0)
        return -1;
    if (setgroups(0, NULL) != 0 || setgid(nobody) != 0 || setuid(nobody) != 0 || getuid() != nobody)
        return -1;
    return 0;
}

/* Every key folder of user `victim` under /tmp (symm-<uid>-XXXXXX, and the
 * fixed symm-<uid> of the first scheme): listing one, or opening a file in
 * one, is a failure. */
int attack_key_file(uid_t victim) {
    char prefix[32];
    int bad = 0, found = 0;
    DIR *tmp = opendir("/tmp");
    if (!tmp) {
        fprintf(stderr, "FAIL attacker: cannot list /tmp\n");
        return 1;
    }
    snprintf(prefix, sizeof prefix, "symm-%u", (unsigned)victim);
    for (struct dirent *t; (t = readdir(tmp));) {
        if (strncmp(t->d_name, prefix, strlen(prefix)) != 0 ||
            (t->d_name[strlen(prefix)] != '\0' && t->d_name[strlen(prefix)] != '-'))
            continue;
        char dir[300];
        snprintf(dir, sizeof dir, "/tmp/%s", t->d_name);
        found++;
        DIR *d = opendir(dir);
        if (!d) {
            printf("attacker: cannot open %s (%s)\n", dir, strerror(errno));
            continue;
        }
        struct dirent *e;
        while ((e = readdir(d))) {
            char path[600];
            if (e->d_name[0] == '.')
                continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd >= 0) {
                fprintf(stderr, "FAIL attacker: read the job's key file %s as uid %u\n", path, (unsigned)getuid());
                close(fd);
            }
        }
        closedir(d);
        fprintf(stderr, "FAIL attacker: listed %s as uid %u\n", dir, (unsigned)getuid());
        bad = 1;
    }
    closedir(tmp);
    printf("attacker: %d key folder(s) of uid %u found, none readable\n", found, (unsigned)victim);
    return bad;
}

/* Receive any descriptor waiting on fd; count it. */
static int take_fds(int fd) {
    char buf[256];
    union {
        char c[CMSG_SPACE(16 * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {buf, sizeof buf};
    struct msghdr mh;
    int n = 0;
    for (;;) {
        memset(&mh, 0, sizeof mh);
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = ctl.c;
        mh.msg_controllen = sizeof ctl.c;
        if (recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) <= 0)
            return n;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k; i++) {
                    int f;
                    memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
                    close(f);
                    n++;
                }
            }
    }
}

#define MAX_NAMES 64
#define MAX_PER_NAME 16

/* Connect to the abstract socket `name`; -1 if it does not take it now. */
static int connect_name(const char *name) {
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    int l = snprintf(sa.sun_path + 1, sizeof sa.sun_path - 1, "%.99s", name);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)l);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, len) == 0)
        return fd;
    if (fd >= 0)
        close(fd);
    return -1;
}

/* A connection the other end closed (or never accepted before closing). */
static int closed_on_us(int fd) {
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    return poll(&pf, 1, 0) > 0 && (pf.revents & (POLLHUP | POLLERR));
}

/*
 * Until `stop_fd` is readable or closed: every abstract "@symm-" socket that
 * shows up in /proc/net/unix gets `per_socket` connections that never say
 * anything, and each one the job closes is made again at once, so the
 * socket's backlog stays as full as this process can keep it; every
 * connection is read for descriptors. For names of the first fd-exchange
 * scheme (symm-<job>-<instance>-<index>), the names of the indices not bound
 * yet are taken and read from. Returns the number of descriptors received;
 * *connects: connections made in all.
 */
int attack_node_sockets(int stop_fd, int nranks, int per_socket, int *seen_out, long *connects) {
    static int conns[MAX_NAMES][MAX_PER_NAME];
    static char names[MAX_NAMES][100];
    int squat[MAX_NAMES * 8], nsquat = 0, nnames = 0, got = 0;
    if (per_socket > MAX_PER_NAME)
        per_socket = MAX_PER_NAME;
    *connects = 0;
    for (;;) {
        struct pollfd pf = {.fd = stop_fd, .events = POLLIN};
        int stop = poll(&pf, 1, 2) > 0;
        FILE *f = fopen("/proc/net/unix", "r");
        char line[512];
        while (f && fgets(line, sizeof line, f)) {
            char *at = strstr(line, " @symm-");
            if (!at)
                continue;
            char name[100];
            snprintf(name, sizeof name, "%.99s", at + 2);
            name[strcspn(name, "\n ")] = '\0';
            int known = 0;
            for (int i = 0; i < nnames; i++)
                known |= strcmp(names[i], name) == 0;
            if (known || nnames == MAX_NAMES)
                continue;
            snprintf(names[nnames], sizeof names[0], "%s", name);
            for (int k = 0; k < MAX_PER_NAME; k++)
                conns[nnames][k] = -1;
            nnames++;
            /* symm-<16 hex>-<instance>-<index>: squat the other indices */
            unsigned long long job;
            unsigned inst;
            int idx;
            if (sscanf(name, "symm-%16llx-%u-%d", &job, &inst, &idx) == 3)
                for (int i = 0; i < nranks && nsquat < (int)(sizeof squat / sizeof squat[0]); i++) {
                    int d = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                    struct sockaddr_un sq;
                    memset(&sq, 0, sizeof sq);
                    sq.sun_family = AF_UNIX;
                    int l = snprintf(sq.sun_path + 1, sizeof sq.sun_path - 1, "symm-%016llx-%u-%d", job, inst, i);
                    if (d >= 0 &&
                        bind(d, (struct sockaddr *)&sq, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)l)) == 0)
                        squat[nsquat++] = d;
                    else if (d >= 0)
                        close(d);
                }
        }
        if (f)
            fclose(f);
        /* keep per_socket connections on every name, reading each */
        for (int i = 0; i < nnames; i++)
            for (int k = 0; k < per_socket; k++) {
                int *c = &conns[i][k];
                if (*c >= 0) {
                    got += take_fds(*c);
                    if (!closed_on_us(*c))
                        continue;
                    close(*c);
                    *c = -1;
                }
                if ((*c = connect_name(names[i])) >= 0)
                    (*connects)++;
            }
        for (int i = 0; i < nsquat; i++)
            got += take_fds(squat[i]);
        if (stop)
            break;
    }
    for (int i = 0; i < nnames; i++)
        for (int k = 0; k < per_socket; k++)
            if (conns[i][k] >= 0)
                close(conns[i][k]);
    for (int i = 0; i < nsquat; i++)
        close(squat[i]);
    *seen_out = nnames;
    return got;
}
