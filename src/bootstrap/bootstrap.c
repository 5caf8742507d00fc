/*
 * bootstrap.c - the bootstrap object and the collectives over the star
 * around rank 0 (join.c forms the job).
 *
 * Every rank opens two connections to the root: "main" carries collectives,
 * "live" carries heartbeats (liveness.c). A collective is a gather at the
 * root followed by a reply: each rank sends a header (op, sequence number,
 * size, root) and its payload; the root checks that every header matches
 * its own, and answers either the result or an error that every rank then
 * returns. A payload the root rejects is still read (and dropped), so the
 * streams stay in step and the next collective works.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/bootstrap_internal.h"
#include "core/env.h"
#include "core/log.h"

static const char *op_name(uint32_t op) {
    switch (op) {
    case SYMM__OP_ALLGATHER: return "allgather";
    case SYMM__OP_BCAST:     return "bcast";
    case SYMM__OP_BARRIER:   return "barrier";
    default:                 return "?";
    }
}

static void close_fd(int *fd) {
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

symm__bootstrap_t *symm__bs_alloc(int rank, int nranks) {
    symm__bootstrap_t *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->rank = rank;
    b->nranks = nranks;
    b->main_fd = b->live_fd = -1;
    b->wake_pipe[0] = b->wake_pipe[1] = -1;
    atomic_init(&b->dead_pe, -1);
    atomic_init(&b->root_left, 0);
    b->peer_timeout = symm__env()->peer_timeout;
    atomic_init(&b->relayed, 0);
    atomic_init(&b->grace_ms, 0);
    if (pthread_mutex_init(&b->lock, NULL) != 0) {
        free(b);
        return NULL;
    }
    if (pthread_mutex_init(&b->send_lock, NULL) != 0) {
        pthread_mutex_destroy(&b->lock);
        free(b);
        return NULL;
    }
    if (rank == 0) {
        b->peer_main = malloc(sizeof(int) * (size_t)nranks);
        b->peer_live = malloc(sizeof(int) * (size_t)nranks);
        b->peer_left = malloc(sizeof(atomic_int) * (size_t)nranks);
        if (!b->peer_main || !b->peer_live || !b->peer_left) {
            free(b->peer_main);
            free(b->peer_live);
            free(b->peer_left);
            pthread_mutex_destroy(&b->send_lock);
            pthread_mutex_destroy(&b->lock);
            free(b);
            return NULL;
        }
        for (int r = 0; r < nranks; r++) {
            b->peer_main[r] = b->peer_live[r] = -1;
            atomic_init(&b->peer_left[r], 0);
        }
    }
    return b;
}

void symm__bs_free(symm__bootstrap_t *b) {
    close_fd(&b->main_fd);
    close_fd(&b->live_fd);
    if (b->peer_main)
        for (int r = 0; r < b->nranks; r++) {
            close_fd(&b->peer_main[r]);
            close_fd(&b->peer_live[r]);
        }
    free(b->peer_main);
    free(b->peer_live);
    free(b->peer_left);
    pthread_mutex_destroy(&b->send_lock);
    pthread_mutex_destroy(&b->lock);
    free(b);
}

int symm__bootstrap_rank(const symm__bootstrap_t *b) { return b ? b->rank : -1; }
int symm__bootstrap_nranks(const symm__bootstrap_t *b) { return b ? b->nranks : -1; }

/* ---- collectives -------------------------------------------------------- */

/* Turn a failed socket operation during a collective into an error. `peer`
 * is the rank on the other end. */
static int peer_left(symm__bootstrap_t *b, int peer) {
    return peer == 0 ? atomic_load(&b->root_left) : (b->peer_left ? atomic_load(&b->peer_left[peer]) : 0);
}

/* How long a rank waits for the root's answer beyond SYMM_WAIT_TIMEOUT: the
 * root, waiting as long for a stuck PE, names it first. */
#define RANK_GRACE_S 5.0

static symm_status_t io_error(symm__bootstrap_t *b, enum symm__io io, int peer, const char *what) {
    if (io == SYMM__IO_DEAD)
        return symm__bs_check_dead(b, what);
    if (io == SYMM__IO_TIMEOUT) {
        /* Alive (its heartbeats come) but not in this collective: out of
         * the job, so every PE's calls fail naming it instead of waiting. */
        char why[160];
        snprintf(why, sizeof why, "did not reach %s #%llu within SYMM_WAIT_TIMEOUT=%g s%s", what,
                 (unsigned long long)b->seq, symm__env()->wait_timeout,
                 peer == 0 && b->rank != 0 ? " (+5 s, as the root)" : "; alive, but stuck or not calling it");
        symm__bs_mark_out(b, peer, SYMM__OUT_STUCK, why);
        return symm__bs_check_dead(b, what);
    }
    if (io == SYMM__IO_EOF) {
        /* The watcher reads the liveness channel, which says why the peer
         * went away ("PE k died" relayed just before the root closed, a
         * BYE, or its own EOF). Give it a moment to catch up, so every rank
         * reports the same cause. */
        double until = symm__now() + 1.0;
        while (atomic_load(&b->dead_pe) < 0 && !peer_left(b, peer) && b->watcher_started &&
               symm__now() < until)
            symm__sleep_ms(5);
        if (atomic_load(&b->dead_pe) >= 0)
            return symm__bs_check_dead(b, what);
        if (peer_left(b, peer))
            return symm__error(SYMM_ERR_PEER_DIED, "%s: PE %d has already finalized", what, peer);
        symm__bs_mark_dead(b, peer, "its bootstrap connection closed");
        return symm__bs_check_dead(b, what);
    }
    return symm__error(SYMM_ERR_BOOTSTRAP, "%s: socket error talking to PE %d: %s", what, peer,
                       strerror(errno));
}

/* What one rank asked for in a collective. */
typedef struct request {
    uint32_t op;
    uint64_t seq, nbytes;
    int32_t root, status;
} request_t;

static void describe(char *out, size_t size, int rank, const request_t *q) {
    if (q->op == SYMM__OP_BCAST)
        snprintf(out, size, "pe %d: %s #%llu of %llu bytes from root %d", rank, op_name(q->op),
                 (unsigned long long)q->seq, (unsigned long long)q->nbytes, q->root);
    else
        snprintf(out, size, "pe %d: %s #%llu of %llu bytes", rank, op_name(q->op),
                 (unsigned long long)q->seq, (unsigned long long)q->nbytes);
}

/*
 * One collective. `send`/`send_n`: this rank's payload (sent to the root).
 * At the root, `gather(r)` says where rank r's payload goes (NULL: the root
 * does not need it). `result`/`result_n`: what the root sends back to every
 * rank, and where a rank receives it.
 */
typedef struct coll {
    request_t me;
    const void *send;
    size_t send_n;
    void *result;
    size_t result_n;
    /* root only: destination of rank r's payload of n bytes */
    void *(*gather)(const struct coll *c, int r, size_t n);
    void *ctx;
    const char *what;
    double deadline; /* SYMM_WAIT_TIMEOUT from the call (0: none) */
} coll_t;

static symm_status_t rank_collective(symm__bootstrap_t *b, coll_t *c) {
    const double dl = c->deadline > 0 ? c->deadline + RANK_GRACE_S : 0;
    /* The header carries the size the caller asked for; a local error sends
     * no payload and the root answers everyone with it. */
    symm__bs_hdr_t h = {SYMM__BS_MAGIC, c->me.op, c->me.seq, c->me.nbytes, c->me.root, c->me.status};
    enum symm__io io = symm__send_all(b, b->main_fd, &h, sizeof h, dl);
    if (io == SYMM__IO_OK && !c->me.status && c->send_n)
        io = symm__send_all(b, b->main_fd, c->send, c->send_n, dl);
    if (io != SYMM__IO_OK)
        return io_error(b, io, 0, c->what);
    symm__bs_hdr_t r;
    io = symm__recv_all(b, b->main_fd, &r, sizeof r, dl);
    if (io != SYMM__IO_OK)
        return io_error(b, io, 0, c->what);
    if (r.magic != SYMM__BS_MAGIC || r.op != SYMM__OP_REPLY || r.seq != c->me.seq)
        return symm__error(SYMM_ERR_BOOTSTRAP, "%s: protocol error (reply op %u seq %llu, expected seq %llu)",
                           c->what, r.op, (unsigned long long)r.seq, (unsigned long long)c->me.seq);
    if (r.status != 0) {
        char text[1024];
        size_t n = r.nbytes < sizeof text ? (size_t)r.nbytes : sizeof text - 1;
        io = symm__recv_all(b, b->main_fd, text, n, dl);
        if (io == SYMM__IO_OK && r.nbytes > n)
            io = symm__recv_drop(b, b->main_fd, r.nbytes - n, dl);
        if (io != SYMM__IO_OK)
            return io_error(b, io, 0, c->what);
        text[n] = '\0';
        return symm__error((symm_status_t)r.status, "%s: %s", c->what, text);
    }
    if (r.nbytes != c->result_n)
        return symm__error(SYMM_ERR_BOOTSTRAP, "%s: protocol error (reply of %llu bytes, expected %zu)",
                           c->what, (unsigned long long)r.nbytes, c->result_n);
    if (c->result_n && (io = symm__recv_all(b, b->main_fd, c->result, c->result_n, dl)) != SYMM__IO_OK)
        return io_error(b, io, 0, c->what);
    return SYMM_SUCCESS;
}

static int same_request(const request_t *a, const request_t *b) {
    return a->op == b->op && a->seq == b->seq && a->nbytes == b->nbytes &&
           (a->op != SYMM__OP_BCAST || a->root == b->root);
}

static symm_status_t root_collective(symm__bootstrap_t *b, coll_t *c) {
    symm_status_t s = SYMM_SUCCESS;
    int n = b->nranks;
    request_t *reqs = calloc((size_t)n, sizeof *reqs);
    if (!reqs) {
        /* Cannot even track the others: the job is stuck, say so loudly. */
        return symm__error(SYMM_ERR_NO_MEMORY, "%s: out of memory at the root", c->what);
    }
    reqs[0] = c->me;
    int mismatch = 0, local_error_pe = c->me.status ? 0 : -1;
    for (int r = 1; r < n; r++) {
        int fd = b->peer_main[r];
        symm__bs_hdr_t h;
        enum symm__io io = symm__recv_all(b, fd, &h, sizeof h, c->deadline);
        if (io != SYMM__IO_OK) {
            s = io_error(b, io, r, c->what);
            goto out;
        }
        /* A size past the limit is fine with a local error (no payload follows). */
        if (h.magic != SYMM__BS_MAGIC || (!h.status && h.nbytes > SYMM__BS_MAX_PAYLOAD)) {
            /* The stream cannot be trusted any more; treating the sender as
             * dead tells every rank (through the liveness relay) instead of
             * leaving them waiting for a reply. */
            symm__bs_mark_dead(b, r, "it sent a corrupted bootstrap message");
            s = symm__bs_check_dead(b, c->what);
            goto out;
        }
        request_t q = {h.op, h.seq, h.nbytes, h.root, h.status};
        reqs[r] = q;
        if (q.status && local_error_pe < 0)
            local_error_pe = r;
        /* Which bytes follow is decided by the sender's own header. */
        uint64_t payload = 0;
        if (!q.status) {
            if (q.op == SYMM__OP_ALLGATHER)
                payload = q.nbytes;
            else if (q.op == SYMM__OP_BCAST && q.root == r)
                payload = q.nbytes;
        }
        void *dst = NULL;
        if (same_request(&q, &c->me) && !q.status && payload)
            dst = c->gather(c, r, (size_t)payload);
        else if (!same_request(&q, &c->me))
            mismatch = 1;
        io = dst ? symm__recv_all(b, fd, dst, (size_t)payload, c->deadline)
                 : symm__recv_drop(b, fd, payload, c->deadline);
        if (io != SYMM__IO_OK) {
            s = io_error(b, io, r, c->what);
            goto out;
        }
    }

    /* The verdict, the same for everyone. */
    char text[1024];
    symm_status_t verdict = SYMM_SUCCESS;
    if (mismatch) {
        verdict = SYMM_ERR_MISMATCH;
        size_t len = (size_t)snprintf(text, sizeof text, "PEs called different collectives or sizes: ");
        for (int r = 0; r < n && len < sizeof text - 80; r++) {
            char one[160];
            describe(one, sizeof one, r, &reqs[r]);
            len += (size_t)snprintf(text + len, sizeof text - len, "%s%s", r ? "; " : "", one);
            if (r == 15 && n > 16) {
                snprintf(text + len, sizeof text - len, "; ...");
                break;
            }
        }
    } else if (local_error_pe >= 0) {
        verdict = (symm_status_t)reqs[local_error_pe].status;
        snprintf(text, sizeof text, "PE %d passed invalid arguments (%s)", local_error_pe,
                 symm_strerror(verdict));
    } else if (c->me.op == SYMM__OP_BCAST && (c->me.root < 0 || c->me.root >= n)) {
        verdict = SYMM_ERR_INVALID_ARG;
        snprintf(text, sizeof text, "root %d is not a PE (0..%d)", c->me.root, n - 1);
    }

    for (int r = 1; r < n; r++) {
        symm__bs_hdr_t h = {SYMM__BS_MAGIC, SYMM__OP_REPLY, c->me.seq,
                            verdict ? strlen(text) + 1 : c->result_n, -1, verdict};
        enum symm__io io = symm__send_all(b, b->peer_main[r], &h, sizeof h, c->deadline);
        if (io == SYMM__IO_OK)
            io = verdict ? symm__send_all(b, b->peer_main[r], text, h.nbytes, c->deadline)
                         : (c->result_n ? symm__send_all(b, b->peer_main[r], c->result, c->result_n, c->deadline)
                                        : SYMM__IO_OK);
        if (io != SYMM__IO_OK) {
            s = io_error(b, io, r, c->what);
            goto out;
        }
    }
    if (verdict)
        s = symm__error(verdict, "%s: %s", c->what, text);
out:
    free(reqs);
    return s;
}

static symm_status_t collective(symm__bootstrap_t *b, coll_t *c) {
    symm_status_t s = symm__bs_check_dead(b, c->what);
    if (s)
        return s;
    c->deadline = symm__env()->wait_timeout > 0 ? symm__now() + symm__env()->wait_timeout : 0;
    if (b->nranks == 1) {
        if (c->me.status)
            return symm__error((symm_status_t)c->me.status, "%s: invalid arguments", c->what);
        return SYMM_SUCCESS;
    }
    return b->rank == 0 ? root_collective(b, c) : rank_collective(b, c);
}

static void *gather_allgather(const coll_t *c, int r, size_t n) {
    return (char *)c->result + (size_t)r * n;
}

symm_status_t symm__bootstrap_allgather(symm__bootstrap_t *b, const void *mine, void *all, size_t nbytes) {
    if (!b)
        return symm__error(SYMM_ERR_INVALID_ARG, "bootstrap allgather: NULL bootstrap");
    coll_t c;
    memset(&c, 0, sizeof c);
    c.what = "bootstrap allgather";
    c.me.op = SYMM__OP_ALLGATHER;
    c.me.seq = ++b->seq;
    c.me.nbytes = nbytes;
    c.me.root = -1;
    c.send = mine;
    c.send_n = nbytes;
    c.result = all;
    c.gather = gather_allgather;
    if (nbytes && (!mine || !all))
        c.me.status = SYMM_ERR_INVALID_ARG;
    else if (nbytes > SYMM__BS_MAX_PAYLOAD || (size_t)b->nranks > SIZE_MAX / (nbytes ? nbytes : 1))
        c.me.status = SYMM_ERR_INVALID_ARG;
    else
        c.result_n = nbytes * (size_t)b->nranks;
    if (!c.me.status && nbytes && b->rank == 0 && mine != all)
        memmove(all, mine, nbytes);
    if (!c.me.status && nbytes && b->nranks == 1)
        return SYMM_SUCCESS;
    /* Non-root ranks receive the whole array, their own slot included. */
    return collective(b, &c);
}

static void *gather_bcast(const coll_t *c, int r, size_t n) {
    (void)r;
    (void)n;
    return c->result;
}

symm_status_t symm__bootstrap_bcast(symm__bootstrap_t *b, void *buf, size_t nbytes, int root) {
    if (!b)
        return symm__error(SYMM_ERR_INVALID_ARG, "bootstrap bcast: NULL bootstrap");
    coll_t c;
    memset(&c, 0, sizeof c);
    c.what = "bootstrap bcast";
    c.me.op = SYMM__OP_BCAST;
    c.me.seq = ++b->seq;
    c.me.nbytes = nbytes;
    c.me.root = root;
    c.result = buf;
    c.result_n = nbytes;
    c.gather = gather_bcast;
    if ((nbytes && !buf) || nbytes > SYMM__BS_MAX_PAYLOAD)
        c.me.status = SYMM_ERR_INVALID_ARG;
    else if (root == b->rank) {
        c.send = buf;
        c.send_n = nbytes;
    }
    if (b->nranks == 1 && !c.me.status && root != 0)
        return symm__error(SYMM_ERR_INVALID_ARG, "bootstrap bcast: root %d is not a PE (0..0)", root);
    return collective(b, &c);
}

symm_status_t symm__bootstrap_barrier(symm__bootstrap_t *b) {
    if (!b)
        return symm__error(SYMM_ERR_INVALID_ARG, "bootstrap barrier: NULL bootstrap");
    coll_t c;
    memset(&c, 0, sizeof c);
    c.what = "bootstrap barrier";
    c.me.op = SYMM__OP_BARRIER;
    c.me.seq = ++b->seq;
    c.me.root = -1;
    return collective(b, &c);
}

int symm__bootstrap_dead_pe(const symm__bootstrap_t *b) {
    return b ? atomic_load(&((symm__bootstrap_t *)b)->dead_pe) : -1;
}

void symm__bootstrap_destroy(symm__bootstrap_t *b) {
    if (!b)
        return;
    symm__liveness_stop(b); /* says BYE on the live channels first */
    symm__bs_free(b);
}
