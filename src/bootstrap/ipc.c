/*
 * ipc.c - passing file descriptors between the PEs of a node (docs/design.md
 * decision 3): each PE binds a Unix datagram socket in the abstract
 * namespace, named after the job id the bootstrap agreed on, and sends its
 * descriptor to every other PE with SCM_RIGHTS.
 *
 * Datagrams need no connection set-up and keep message boundaries; a peer
 * that is ahead sends the next round early, and those messages wait in a
 * list keyed by tag. Sends and receives are interleaved (the kernel queues
 * only a few datagrams per socket), and every wait checks the bootstrap's
 * dead state, so a dead peer ends the call with SYMM_ERR_PEER_DIED.
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

typedef struct ipc_msg {
    uint32_t magic;
    int32_t sender; /* node index */
    uint64_t tag;
} ipc_msg_t;

typedef struct pending {
    uint64_t tag;
    int sender;
    int fd;
} pending_t;

struct symm__ipc {
    symm__bootstrap_t *b;
    int n, me;
    int fd;
    uint64_t job_id;
    uint32_t instance;
    pending_t *pending;
    size_t n_pending, cap_pending;
};

static socklen_t make_addr(const symm__ipc_t *ipc, int index, struct sockaddr_un *sa) {
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    /* sun_path[0] == 0: abstract namespace, nothing to unlink, gone with the socket. */
    int len = snprintf(sa->sun_path + 1, sizeof sa->sun_path - 1, "symm-%016llx-%u-%d",
                       (unsigned long long)ipc->job_id, ipc->instance, index);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)len);
}

symm_status_t symm__ipc_create(symm__bootstrap_t *b, const int *local_ranks, int n_local, int me,
                               symm__ipc_t **out) {
    if (!b || !local_ranks || !out || n_local < 1 || me < 0 || me >= n_local)
        return symm__error(SYMM_ERR_INVALID_ARG, "ipc: bad arguments (n_local %d, me %d)", n_local, me);
    if (local_ranks[me] != b->rank)
        return symm__error(SYMM_ERR_INVALID_ARG, "ipc: local_ranks[%d]=%d but this is PE %d", me,
                           local_ranks[me], b->rank);
    symm__ipc_t *ipc = calloc(1, sizeof *ipc);
    if (!ipc)
        return symm__error(SYMM_ERR_NO_MEMORY, "ipc: out of memory");
    ipc->b = b;
    ipc->n = n_local;
    ipc->me = me;
    /* The job id is the same on every PE; the instance count advances alike
     * on every node PE as long as they create their ipc objects in the same
     * order, so a second ipc in the same job gets fresh names. The world
     * ranks of the node enter too, in case two node teams share a job id. */
    ipc->job_id = symm__hash64(local_ranks, sizeof(int) * (size_t)n_local, b->job_id);
    ipc->instance = b->ipc_count++;
    ipc->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (ipc->fd < 0) {
        int e = errno;
        free(ipc);
        return symm__error(SYMM_ERR_BOOTSTRAP, "ipc: socket: %s", strerror(e));
    }
    int one = 1;
    /* Credentials with every message: only our own user may hand us memory. */
    if (setsockopt(ipc->fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one) != 0) {
        int e = errno;
        close(ipc->fd);
        free(ipc);
        return symm__error(SYMM_ERR_BOOTSTRAP, "ipc: SO_PASSCRED: %s", strerror(e));
    }
    struct sockaddr_un sa;
    socklen_t len = make_addr(ipc, me, &sa);
    if (bind(ipc->fd, (struct sockaddr *)&sa, len) != 0) {
        int e = errno;
        close(ipc->fd);
        free(ipc);
        return symm__error(SYMM_ERR_BOOTSTRAP, "ipc: bind @%s: %s", sa.sun_path + 1, strerror(e));
    }
    *out = ipc;
    return SYMM_SUCCESS;
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
    struct sockaddr_un sa;
    mh.msg_name = &sa;
    mh.msg_namelen = make_addr(ipc, to, &sa);
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = ctl.buf;
    mh.msg_controllen = sizeof ctl.buf;
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &my_fd, sizeof(int));
    if (sendmsg(ipc->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof m)
        return 1;
    /* Not bound yet (peer still creating its socket), or its queue is full. */
    if (errno == ECONNREFUSED || errno == ENOENT || errno == EAGAIN || errno == EWOULDBLOCK ||
        errno == EINTR || errno == ENOBUFS)
        return 0;
    return -1;
}

/* Receive one datagram: 1 got one (*sender, *tag, *fd set), 0 none, <0 error. */
static int try_recv(symm__ipc_t *ipc, int *sender, uint64_t *tag, int *fd) {
    ipc_msg_t m;
    struct iovec iov = {&m, sizeof m};
    union {
        char buf[CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(struct ucred))];
        struct cmsghdr align;
    } ctl;
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = ctl.buf;
    mh.msg_controllen = sizeof ctl.buf;
    ssize_t r = recvmsg(ipc->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (r < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
    int got_fd = -1, uid_ok = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET)
            continue;
        if (c->cmsg_type == SCM_RIGHTS && c->cmsg_len >= CMSG_LEN(sizeof(int))) {
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
        } else if (c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
            struct ucred cr;
            memcpy(&cr, CMSG_DATA(c), sizeof cr);
            uid_ok = cr.uid == getuid();
        }
    }
    if (r != (ssize_t)sizeof m || m.magic != SYMM__IPC_MAGIC || m.sender < 0 || m.sender >= ipc->n ||
        m.sender == ipc->me || got_fd < 0 || !uid_ok || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
        SYMM_LOG_WARN("ipc: dropping a malformed or foreign message on the node socket");
        if (got_fd >= 0)
            close(got_fd);
        return 0; /* not ours: ignore, keep waiting for the real ones */
    }
    *sender = m.sender;
    *tag = m.tag;
    *fd = got_fd;
    return 1;
}

symm_status_t symm__ipc_allgather_fd(symm__ipc_t *ipc, int my_fd, uint64_t tag, int *fds) {
    if (!ipc || !fds || my_fd < 0)
        return symm__error(SYMM_ERR_INVALID_ARG, "ipc allgather: bad arguments");
    symm_status_t s = SYMM_SUCCESS;
    int n = ipc->n;
    int *got = malloc(sizeof(int) * (size_t)n);
    char *sent = calloc((size_t)n, 1);
    if (!got || !sent) {
        free(got);
        free(sent);
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
        for (;;) {
            int sender, fd;
            uint64_t t;
            int r = try_recv(ipc, &sender, &t, &fd);
            if (r < 0) {
                s = symm__error(SYMM_ERR_BOOTSTRAP, "ipc allgather: receive: %s", strerror(errno));
                goto out;
            }
            if (r == 0)
                break;
            progress = 1;
            if (t == tag && got[sender] < 0) {
                got[sender] = fd;
                n_got++;
            } else if (add_pending(ipc, t, sender, fd) != 0) {
                close(fd);
                s = symm__error(SYMM_ERR_NO_MEMORY, "ipc allgather: out of memory");
                goto out;
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
            /* Wake for incoming messages; sends are retried each slice. */
            struct pollfd p = {.fd = ipc->fd, .events = POLLIN};
            (void)poll(&p, 1, n_sent < n ? 5 : SYMM__BS_SLICE_MS);
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
    return s;
}

void symm__ipc_destroy(symm__ipc_t *ipc) {
    if (!ipc)
        return;
    for (size_t i = 0; i < ipc->n_pending; i++)
        close(ipc->pending[i].fd);
    free(ipc->pending);
    if (ipc->fd >= 0)
        close(ipc->fd);
    free(ipc);
}
