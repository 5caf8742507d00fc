/*
 * ipc.c - passing file descriptors between the PEs of a node (docs/design.md
 * decision 3) over Unix sockets with SCM_RIGHTS.
 *
 * Who gets a descriptor matters: it maps this PE's GPU memory read/write.
 * Each PE listens on a Unix socket in the abstract namespace under a random
 * name, and the PEs learn each other's names and pids over the
 * authenticated bootstrap. Each PE then connects to every other's socket
 * and sends only after SO_PEERCRED on that connection shows the same user
 * and the pid that joined as that PE: a process that took the name first
 * (abstract names carry no permissions) gets nothing. Each PE accepts
 * connections only from those pids, so nothing foreign is ever read.
 *
 * Anyone may connect to an abstract socket, and the names are public in
 * /proc/net/unix, so the setup must not be held up by strangers: one loop
 * both accepts (closing every connection whose credentials are not a node
 * PE's at once, unread: a stranger never holds a slot) and connects (a
 * peer whose backlog is full for a moment is tried again on the next
 * turn), with a backlog of SOMAXCONN that is drained as fast as it fills.
 * Nobody waits for a peer that is itself waiting to connect. Once every
 * peer is in, the listening socket is closed.
 *
 * Connections are made once, at creation; a round sends this PE's
 * descriptor on each and reads one from each. A peer that is ahead sends
 * the next round early; those wait in a list keyed by tag. Sends and
 * receives are interleaved, and every wait checks the bootstrap's dead
 * state, so a dead peer ends the call with SYMM_ERR_PEER_DIED.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "bootstrap/bootstrap_internal.h"
#include "core/env.h"
#include "core/log.h"

#define SYMM__IPC_MAGIC 0x73796d49u /* "symI" */
#define NAME_HEX 32                 /* 128 random bits */
/* Refused connections logged one by one before only counting them. */
#define STRANGERS_LOGGED 3
/* Connections accepted per turn of the linking loop. */
#define ACCEPT_TURN 1024

typedef struct ipc_msg {
    uint32_t magic;
    int32_t sender; /* node index */
    uint64_t tag;
} ipc_msg_t;

/* What each PE tells the others over the bootstrap. */
typedef struct ipc_card {
    uint32_t magic;
    uint32_t uid;
    int64_t pid;
    char name[NAME_HEX + 1];
} ipc_card_t;

typedef struct pending {
    uint64_t tag;
    int sender;
    int fd;
} pending_t;

struct symm__ipc {
    symm__bootstrap_t *b;
    int n, me;
    int listen_fd;
    int *out;     /* out[i]: connected to node PE i's socket (checked), -1 for me */
    int *in;      /* in[i]: node PE i's connection to this socket (checked), -1 for me */
    int64_t *pid; /* node PE i's pid */
    int *world;   /* node PE i's world rank */
    pending_t *pending;
    size_t n_pending, cap_pending;
};

static socklen_t make_addr(const char *name, struct sockaddr_un *sa) {
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    /* sun_path[0] == 0: abstract namespace, nothing to unlink, gone with the socket. */
    int len = snprintf(sa->sun_path + 1, sizeof sa->sun_path - 1, "symm-%s", name);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)len);
}

static int peer_cred(int fd, struct ucred *cr) {
    socklen_t len = sizeof *cr;
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cr, &len) == 0 && len == sizeof *cr ? 0 : -1;
}

static void close_all(int *fds, int n) {
    if (!fds)
        return;
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

void symm__ipc_destroy(symm__ipc_t *ipc) {
    if (!ipc)
        return;
    for (size_t i = 0; i < ipc->n_pending; i++)
        close(ipc->pending[i].fd);
    free(ipc->pending);
    close_all(ipc->out, ipc->n);
    close_all(ipc->in, ipc->n);
    free(ipc->out);
    free(ipc->in);
    free(ipc->pid);
    free(ipc->world);
    if (ipc->listen_fd >= 0)
        close(ipc->listen_fd);
    free(ipc);
}

/* Bind a listening socket under a fresh random name. */
static symm_status_t listen_random(symm__ipc_t *ipc, char name[NAME_HEX + 1]) {
    unsigned char r[NAME_HEX / 2];
    struct sockaddr_un sa;
    socklen_t len;
    ipc->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (ipc->listen_fd < 0)
        return symm__error(SYMM_ERR_BOOTSTRAP, "ipc: socket: %s", strerror(errno));
    if (symm__random_bytes(r, sizeof r) != 0)
        return symm__error(SYMM_ERR_BOOTSTRAP, "ipc: no random bytes: %s", strerror(errno));
    for (size_t i = 0; i < sizeof r; i++)
        snprintf(name + 2 * i, 3, "%02x", r[i]);
    len = make_addr(name, &sa);
    if (bind(ipc->listen_fd, (struct sockaddr *)&sa, len) != 0 || listen(ipc->listen_fd, SOMAXCONN) != 0)
        return symm__error(SYMM_ERR_BOOTSTRAP, "ipc: bind/listen @symm-%s: %s", name, strerror(errno));
    return SYMM_SUCCESS;
}

/* One attempt to connect to node PE i's socket, checking who holds it:
 * *done 1 connected, 0 its backlog is full (try again); or an error. */
static symm_status_t connect_peer(symm__ipc_t *ipc, int i, const ipc_card_t *card, int *done) {
    struct sockaddr_un sa;
    socklen_t len = make_addr(card->name, &sa);
    struct ucred cr;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    *done = 0;
    memset(&cr, 0, sizeof cr);
    if (fd < 0)
        return symm__error(SYMM_ERR_BOOTSTRAP, "ipc: socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&sa, len) != 0) {
        int e = errno;
        close(fd);
        if (e == EAGAIN || e == EINTR)
            return SYMM_SUCCESS; /* a full backlog: strangers, or peers ahead of us */
        symm_status_t d = symm__bs_check_dead(ipc->b, "ipc setup"); /* its socket is gone with it */
        if (d)
            return d;
        return symm__error(SYMM_ERR_BOOTSTRAP, "ipc: connect to node PE %d (@symm-%s): %s", i, card->name,
                           strerror(e));
    }
    if (peer_cred(fd, &cr) != 0 || cr.uid != getuid() || (int64_t)cr.pid != card->pid) {
        close(fd);
        return symm__error(SYMM_ERR_BOOTSTRAP,
                           "ipc: the socket of node PE %d (@symm-%s) is held by pid %ld uid %u, not by that PE "
                           "(pid %lld uid %u): no memory handle is sent to it",
                           i, card->name, (long)cr.pid, (unsigned)cr.uid, (long long)card->pid, (unsigned)getuid());
    }
    ipc->out[i] = fd;
    *done = 1;
    return SYMM_SUCCESS;
}

/* Accept what is waiting (at most ACCEPT_TURN, so connections that come
 * faster than they are closed cannot keep this PE from its own connects and
 * its deadline): node PEs' connections are kept, anything else is closed
 * unread. *got: PEs that came in; *strangers: connections closed. */
static symm_status_t accept_waiting(symm__ipc_t *ipc, int *got, unsigned long *strangers) {
    for (int turn = 0; turn < ACCEPT_TURN; turn++) {
        struct ucred cr;
        memset(&cr, 0, sizeof cr);
        int fd = accept4(ipc->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return SYMM_SUCCESS;
            return symm__error(SYMM_ERR_BOOTSTRAP, "ipc: accept: %s", strerror(errno));
        }
        int who = -1, known = peer_cred(fd, &cr) == 0;
        if (known && cr.uid == getuid())
            for (int i = 0; i < ipc->n; i++)
                if (i != ipc->me && ipc->in[i] < 0 && ipc->pid[i] == (int64_t)cr.pid)
                    who = i;
        if (who < 0) {
            if ((*strangers)++ < STRANGERS_LOGGED)
                SYMM_LOG_WARN("ipc: closed a connection to this PE's socket from pid %ld uid %u (not a PE of this "
                              "node)", known ? (long)cr.pid : -1L, known ? (unsigned)cr.uid : 0u);
            close(fd);
            continue;
        }
        ipc->in[who] = fd;
        (*got)++;
    }
    return SYMM_SUCCESS;
}

/* Connect to every other node PE and accept each of theirs, in one loop. */
static symm_status_t link_peers(symm__ipc_t *ipc, const ipc_card_t *const *cards, double deadline) {
    int need_in = ipc->n - 1, need_out = ipc->n - 1;
    unsigned long strangers = 0;
    symm_status_t s = SYMM_SUCCESS;
    while (need_in > 0 || need_out > 0) {
        int got = 0;
        if ((s = accept_waiting(ipc, &got, &strangers)))
            goto out;
        need_in -= got;
        for (int k = 1; k < ipc->n && need_out > 0; k++) {
            int i = (ipc->me + k) % ipc->n, done;
            if (ipc->out[i] >= 0)
                continue;
            if ((s = connect_peer(ipc, i, cards[i], &done)))
                goto out;
            need_out -= done;
        }
        if (need_in == 0 && need_out == 0)
            break;
        if ((s = symm__bs_check_dead(ipc->b, "ipc setup")))
            goto out;
        if (deadline > 0 && symm__now() > deadline) {
            char who[160] = "";
            size_t len = 0;
            for (int i = 0; i < ipc->n && len + 24 < sizeof who; i++)
                if (i != ipc->me && (ipc->in[i] < 0 || ipc->out[i] < 0))
                    len += (size_t)snprintf(who + len, sizeof who - len, " %d (%s)", i,
                                            ipc->out[i] < 0 ? "its socket did not take the connection"
                                                            : "did not connect");
            s = symm__error(SYMM_ERR_TIMEOUT, "ipc: not linked with node PE(s)%s within SYMM_BOOTSTRAP_TIMEOUT "
                            "(%lu connection(s) from other processes refused)", who, strangers);
            goto out;
        }
        /* A full backlog of a peer is retried soon; otherwise sleep until
         * someone connects. */
        struct pollfd p = {.fd = ipc->listen_fd, .events = POLLIN};
        (void)poll(&p, 1, need_out > 0 ? 2 : SYMM__BS_SLICE_MS);
    }
    /* nobody else may connect now */
    close(ipc->listen_fd);
    ipc->listen_fd = -1;
out:
    if (strangers > STRANGERS_LOGGED)
        SYMM_LOG_WARN("ipc: closed %lu connection(s) in all to this PE's socket from processes that are not PEs of "
                      "this node", strangers);
    return s;
}

symm_status_t symm__ipc_create(symm__bootstrap_t *b, const int *local_ranks, int n_local, int me,
                               symm__ipc_t **out) {
    if (!b || !local_ranks || !out || n_local < 1 || me < 0 || me >= n_local)
        return symm__error(SYMM_ERR_INVALID_ARG, "ipc: bad arguments (n_local %d, me %d)", n_local, me);
    if (local_ranks[me] != b->rank)
        return symm__error(SYMM_ERR_INVALID_ARG, "ipc: local_ranks[%d]=%d but this is PE %d", me,
                           local_ranks[me], b->rank);
    int nw = b->nranks;
    symm_status_t s;
    ipc_card_t mine, *all = NULL;
    symm__ipc_t *ipc = calloc(1, sizeof *ipc);
    if (!ipc)
        return symm__error(SYMM_ERR_NO_MEMORY, "ipc: out of memory");
    ipc->b = b;
    ipc->n = n_local;
    ipc->me = me;
    ipc->listen_fd = -1;
    ipc->out = malloc(sizeof(int) * (size_t)n_local);
    ipc->in = malloc(sizeof(int) * (size_t)n_local);
    ipc->pid = calloc((size_t)n_local, sizeof *ipc->pid);
    ipc->world = malloc(sizeof(int) * (size_t)n_local);
    all = calloc((size_t)nw, sizeof *all);
    if (!ipc->out || !ipc->in || !ipc->pid || !ipc->world || !all) {
        s = symm__error(SYMM_ERR_NO_MEMORY, "ipc: out of memory");
        goto fail;
    }
    for (int i = 0; i < n_local; i++) {
        ipc->out[i] = ipc->in[i] = -1;
        ipc->world[i] = local_ranks[i];
    }
    memset(&mine, 0, sizeof mine);
    mine.magic = SYMM__IPC_MAGIC;
    mine.uid = (uint32_t)getuid();
    mine.pid = (int64_t)getpid();
    /* every PE makes the exchange below, even one that failed here */
    s = listen_random(ipc, mine.name);
    if (s)
        mine.magic = 0;
    {
        symm_status_t sa = symm__bootstrap_allgather(b, &mine, all, sizeof mine);
        if (!s)
            s = sa;
    }
    if (s)
        goto fail;
    for (int i = 0; i < n_local; i++) {
        const ipc_card_t *c = &all[local_ranks[i]];
        if (local_ranks[i] < 0 || local_ranks[i] >= nw || c->magic != SYMM__IPC_MAGIC ||
            memchr(c->name, '\0', sizeof c->name) == NULL) {
            s = symm__error(SYMM_ERR_BOOTSTRAP, "ipc: node PE %d (world PE %d) has no socket", i, local_ranks[i]);
            goto fail;
        }
        ipc->pid[i] = c->pid;
    }
    {
        double timeout = symm__env()->bootstrap_timeout;
        double deadline = timeout > 0 ? symm__now() + timeout : 0;
        const ipc_card_t **cards = malloc(sizeof *cards * (size_t)n_local);
        if (!cards) {
            s = symm__error(SYMM_ERR_NO_MEMORY, "ipc: out of memory");
            goto fail;
        }
        for (int i = 0; i < n_local; i++)
            cards[i] = &all[local_ranks[i]];
        s = link_peers(ipc, cards, deadline);
        free(cards);
        if (s)
            goto fail;
    }
    free(all);
    *out = ipc;
    return SYMM_SUCCESS;
fail:
    free(all);
    symm__ipc_destroy(ipc);
    return s;
}

static int add_pending(symm__ipc_t *ipc, uint64_t tag, int sender, int fd) {
    if (ipc->n_pending == ipc->cap_pending) {
        size_t cap = ipc->cap_pending ? 2 * ipc->cap_pending : 8;
        pending_t *p = realloc(ipc->pending, cap * sizeof *p);
        if (!p)
            return -1;
        ipc->pending = p;
        ipc->cap_pending = cap;
    }
    ipc->pending[ipc->n_pending++] = (pending_t){tag, sender, fd};
    return 0;
}

/* Send my fd to node PE `to`: 1 sent, 0 try again later, <0 error (errno). */
static int try_send(symm__ipc_t *ipc, int to, int my_fd, uint64_t tag) {
    ipc_msg_t m = {SYMM__IPC_MAGIC, ipc->me, tag};
    struct iovec iov = {&m, sizeof m};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = ctl.buf;
    mh.msg_controllen = sizeof ctl.buf;
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &my_fd, sizeof(int));
    if (sendmsg(ipc->out[to], &mh, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof m)
        return 1;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ENOBUFS)
        return 0;
    return -1;
}

/* Receive one message from node PE `from`: 1 got one (*tag, *fd set), 0
 * none yet, -1 the connection closed, -2 a malformed message. */
static int try_recv(symm__ipc_t *ipc, int from, uint64_t *tag, int *fd) {
    ipc_msg_t m;
    struct iovec iov = {&m, sizeof m};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = ctl.buf;
    mh.msg_controllen = sizeof ctl.buf;
    ssize_t r = recvmsg(ipc->in[from], &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (r < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
    if (r == 0)
        return -1;
    int got_fd = -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        /* Close any descriptor beyond the first: we asked for one. */
        size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < nfd; i++) {
            int f;
            memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
            if (got_fd < 0)
                got_fd = f;
            else
                close(f);
        }
    }
    if (r != (ssize_t)sizeof m || m.magic != SYMM__IPC_MAGIC || m.sender != from || got_fd < 0 ||
        (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
        if (got_fd >= 0)
            close(got_fd);
        return -2;
    }
    *tag = m.tag;
    *fd = got_fd;
    return 1;
}

/* Node PE i's connection ended (or broke the protocol) mid-round: the same
 * error as the bootstrap gives for a death. The watcher usually knows the
 * cause first ("PE k died" relayed by the root); give it a moment. */
static symm_status_t peer_gone(symm__ipc_t *ipc, int i, const char *why) {
    double until = symm__now() + 1.0;
    while (symm__bootstrap_dead_pe(ipc->b) < 0 && ipc->b->watcher_started && symm__now() < until)
        symm__sleep_ms(5);
    if (symm__bootstrap_dead_pe(ipc->b) < 0)
        symm__bs_mark_dead(ipc->b, ipc->world[i], why);
    return symm__bs_check_dead(ipc->b, "ipc allgather");
}

symm_status_t symm__ipc_allgather_fd(symm__ipc_t *ipc, int my_fd, uint64_t tag, int *fds) {
    if (!ipc || !fds || my_fd < 0)
        return symm__error(SYMM_ERR_INVALID_ARG, "ipc allgather: bad arguments");
    symm_status_t s = SYMM_SUCCESS;
    int n = ipc->n;
    int *got = malloc(sizeof(int) * (size_t)n);
    char *sent = calloc((size_t)n, 1);
    struct pollfd *pfds = calloc((size_t)n, sizeof *pfds);
    if (!got || !sent || !pfds) {
        free(got);
        free(sent);
        free(pfds);
        return symm__error(SYMM_ERR_NO_MEMORY, "ipc allgather: out of memory");
    }
    for (int i = 0; i < n; i++)
        got[i] = -1;
    got[ipc->me] = fcntl(my_fd, F_DUPFD_CLOEXEC, 0);
    if (got[ipc->me] < 0) {
        s = symm__error(SYMM_ERR_BOOTSTRAP, "ipc allgather: dup: %s", strerror(errno));
        goto out;
    }
    sent[ipc->me] = 1;
    int n_got = 1, n_sent = 1;
    /* Messages of this round that arrived during an earlier one. */
    for (size_t i = 0; i < ipc->n_pending;) {
        pending_t *p = &ipc->pending[i];
        if (p->tag == tag && got[p->sender] < 0) {
            got[p->sender] = p->fd;
            n_got++;
            ipc->pending[i] = ipc->pending[--ipc->n_pending];
        } else {
            i++;
        }
    }
    double timeout = symm__env()->bootstrap_timeout;
    double deadline = timeout > 0 ? symm__now() + timeout : 0;
    while (n_got < n || n_sent < n) {
        int progress = 0;
        for (int i = 0; i < n; i++) {
            if (sent[i])
                continue;
            int r = try_send(ipc, i, my_fd, tag);
            if (r < 0) {
                if ((s = symm__bs_check_dead(ipc->b, "ipc allgather")))
                    goto out;
                if (errno == EPIPE || errno == ECONNRESET)
                    s = peer_gone(ipc, i, "its node socket closed");
                else
                    s = symm__error(SYMM_ERR_BOOTSTRAP, "ipc allgather: send to node PE %d: %s", i,
                                    strerror(errno));
                goto out;
            }
            if (r) {
                sent[i] = 1;
                n_sent++;
                progress = 1;
            }
        }
        /* Read from a peer only while this round needs it: a peer that
         * finished may have closed its end, and its next round waits in
         * the socket (a peer is at most one round ahead). */
        for (int i = 0; i < n; i++) {
            while (got[i] < 0) {
                uint64_t t;
                int fd, r = try_recv(ipc, i, &t, &fd);
                if (r == 0)
                    break;
                if (r < 0) {
                    s = peer_gone(ipc, i, r == -1 ? "its node socket closed" : "it sent a malformed message");
                    goto out;
                }
                progress = 1;
                if (t == tag) {
                    got[i] = fd;
                    n_got++;
                } else if (t < tag) {
                    close(fd); /* left over from a round that failed */
                } else if (add_pending(ipc, t, i, fd) != 0) {
                    close(fd);
                    s = symm__error(SYMM_ERR_NO_MEMORY, "ipc allgather: out of memory");
                    goto out;
                }
            }
        }
        if (n_got == n && n_sent == n)
            break;
        if ((s = symm__bs_check_dead(ipc->b, "ipc allgather")))
            goto out;
        if (deadline > 0 && symm__now() > deadline) {
            char who[128] = "";
            size_t len = 0;
            for (int i = 0; i < n && len < sizeof who - 16; i++)
                if (got[i] < 0 || !sent[i])
                    len += (size_t)snprintf(who + len, sizeof who - len, " %d", i);
            s = symm__error(SYMM_ERR_TIMEOUT,
                            "ipc allgather: tag %llu not completed with node PE(s)%s within %g s",
                            (unsigned long long)tag, who, timeout);
            goto out;
        }
        if (!progress) {
            /* Wake for incoming messages; blocked sends are retried each slice. */
            int k = 0;
            for (int i = 0; i < n; i++)
                if (got[i] < 0)
                    pfds[k++] = (struct pollfd){.fd = ipc->in[i], .events = POLLIN};
            (void)poll(pfds, (nfds_t)k, n_sent < n ? 5 : SYMM__BS_SLICE_MS);
        }
    }
    memcpy(fds, got, sizeof(int) * (size_t)n);
out:
    if (s)
        for (int i = 0; i < n; i++)
            if (got[i] >= 0)
                close(got[i]);
    free(got);
    free(sent);
    free(pfds);
    return s;
}
