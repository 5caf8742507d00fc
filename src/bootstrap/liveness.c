/*
 * liveness.c - noticing that a PE died.
 *
 * Each rank keeps a second connection to the root and one watcher thread per
 * process exchanges heartbeats over it. A connection that reaches EOF without
 * a BYE (the process exited or was killed: the kernel closes its sockets), or
 * stays silent longer than SYMM_PEER_TIMEOUT (the process hangs or is
 * stopped), marks that PE dead; so does a PE's own report that it failed
 * (a CUDA error, a kernel that trapped: symm__bootstrap_report_failure, or
 * the health check the watcher runs). The root relays "PE k died/failed"
 * to every other rank, so all of them learn it within a heartbeat. Marking a PE dead raises
 * the abort flag (device waits poll it) and turns every blocked or later
 * bootstrap call into SYMM_ERR_PEER_DIED (socket waits check it between
 * short slices, see tcp.c).
 *
 * News that a PE left goes out in the thread that learns it: the root
 * relays a death it finds in a caller's collective before that call
 * returns, and a rank sends its own failure before report_failure returns,
 * so a program that exits on the error still names the right PE to the
 * others. Once a PE is out, a process that is still in symm the abort grace
 * later (its kernel answered by a stopped PE's GPU, a loop that never calls
 * symm) is ended by the watcher, with a message naming the PE.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/bootstrap_internal.h"
#include "bootstrap/launch_env.h"
#include "core/log.h"

static const char *out_verb(int kind) {
    return kind == SYMM__OUT_FAILED ? "failed" : kind == SYMM__OUT_STUCK ? "is stuck" : "died";
}

static void relay_now(symm__bootstrap_t *b);

void symm__bs_mark_out(symm__bootstrap_t *b, int pe, int kind, const char *why) {
    int expect = -1;
    pthread_mutex_lock(&b->lock);
    if (!atomic_compare_exchange_strong(&b->dead_pe, &expect, pe)) {
        pthread_mutex_unlock(&b->lock);
        return; /* the first one out is the one reported */
    }
    snprintf(b->dead_reason, sizeof b->dead_reason, "%s", why);
    b->dead_kind = kind;
    b->dead_at = symm__now();
    if (b->abort_flag) {
        atomic_thread_fence(memory_order_seq_cst);
        *b->abort_flag = (uint32_t)pe + 1u;
        atomic_thread_fence(memory_order_seq_cst);
    }
    pthread_mutex_unlock(&b->lock);
    SYMM_LOG_ERROR("PE %d %s (%s)", pe, out_verb(kind), why);
    /* the others hear it now, not at the watcher's next turn: the caller
     * may exit as soon as it has the error */
    if (b->rank == 0)
        relay_now(b);
}

void symm__bs_mark_dead(symm__bootstrap_t *b, int pe, const char *why) {
    symm__bs_mark_out(b, pe, SYMM__OUT_DIED, why);
}

symm_status_t symm__bs_check_dead(symm__bootstrap_t *b, const char *what) {
    int pe = atomic_load(&b->dead_pe);
    if (pe < 0)
        return SYMM_SUCCESS;
    char why[sizeof b->dead_reason];
    int kind;
    pthread_mutex_lock(&b->lock);
    memcpy(why, b->dead_reason, sizeof why);
    kind = b->dead_kind;
    pthread_mutex_unlock(&b->lock);
    return symm__error(SYMM_ERR_PEER_DIED, "%s: PE %d %s (%s)", what, pe, out_verb(kind), why);
}

static void send_failure(symm__bootstrap_t *b);

void symm__bootstrap_report_failure(symm__bootstrap_t *b, const char *why) {
    if (!b)
        return;
    symm__bs_mark_out(b, b->rank, SYMM__OUT_FAILED, why);
    if (atomic_load(&b->dead_pe) == b->rank && b->nranks > 1 && b->rank != 0) {
        atomic_store(&b->report, 1);
        send_failure(b); /* before the caller can exit on the error */
    }
}

void symm__bootstrap_set_abort_grace(symm__bootstrap_t *b, double seconds) {
    if (!b)
        return;
    atomic_store(&b->grace_ms, seconds > 0 ? (long long)(seconds * 1000.0 + 0.5) : 0);
}

void symm__bootstrap_set_health(symm__bootstrap_t *b, symm__health_fn fn, void *arg) {
    if (!b)
        return;
    pthread_mutex_lock(&b->lock);
    b->health = fn;
    b->health_arg = arg;
    pthread_mutex_unlock(&b->lock);
}

void symm__bootstrap_set_abort_flag(symm__bootstrap_t *b, volatile uint32_t *flag) {
    if (!b)
        return;
    pthread_mutex_lock(&b->lock);
    b->abort_flag = flag;
    int pe = atomic_load(&b->dead_pe);
    if (flag && pe >= 0) {
        *flag = (uint32_t)pe + 1u;
        atomic_thread_fence(memory_order_seq_cst);
    }
    pthread_mutex_unlock(&b->lock);
}

#define REASON_MAX 160

/* One watched connection: the root watches one per rank, a rank one (the root). */
typedef struct watched {
    int fd;
    int pe;
    int gone;      /* EOF seen, or BYE: no longer watched */
    double last;   /* when we last heard from it */
    size_t have;   /* bytes of the current message received so far */
    symm__bs_hdr_t hdr;
    char reason[REASON_MAX]; /* payload of a DIED message */
} watched_t;

/* A liveness message: a header and, for DIED, the reason as text (and in
 * the status how the PE left). */
static void send_small(int fd, uint32_t op, int32_t pe, int32_t status, const char *text) {
    struct {
        symm__bs_hdr_t h;
        char text[REASON_MAX];
    } m;
    size_t len = text ? strlen(text) + 1 : 0;
    if (len > REASON_MAX)
        len = REASON_MAX;
    m.h = (symm__bs_hdr_t){SYMM__BS_MAGIC, op, 0, len, pe, status};
    if (len) {
        memcpy(m.text, text, len);
        m.text[len - 1] = '\0';
    }
    /* Never block: a small message fits any socket buffer, and if it does
     * not the peer is not reading, which silence detection on its side or
     * EOF on ours will settle. */
    (void)send(fd, &m, sizeof m.h + len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* The same, whole, between the messages of other threads on that socket. */
static void send_live(symm__bootstrap_t *b, int fd, uint32_t op, int32_t pe, int32_t status, const char *text) {
    pthread_mutex_lock(&b->send_lock);
    send_small(fd, op, pe, status, text);
    pthread_mutex_unlock(&b->send_lock);
}

/* The root tells the others, once, that the PE in dead_pe left the job,
 * how and why (the PE itself too: a stuck PE that comes back learns it was
 * declared out). A rank whose connection is gone fails the send harmlessly. */
static void relay_now(symm__bootstrap_t *b) {
    int dead = atomic_load(&b->dead_pe);
    if (dead < 0 || !b->peer_live || atomic_exchange(&b->relayed, 1))
        return;
    char why[sizeof b->dead_reason];
    int kind;
    pthread_mutex_lock(&b->lock);
    memcpy(why, b->dead_reason, sizeof why);
    kind = b->dead_kind;
    pthread_mutex_unlock(&b->lock);
    char text[REASON_MAX];
    snprintf(text, sizeof text, "%.120s%s", why, strstr(why, "; reported by PE") ? "" : "; reported by PE 0");
    for (int r = 1; r < b->nranks; r++)
        if (b->peer_live[r] >= 0)
            send_live(b, b->peer_live[r], SYMM__OP_DIED, dead, kind, text);
}

/* A rank tells the root about its own failure (the root relays it), once. */
static void send_failure(symm__bootstrap_t *b) {
    if (b->rank == 0 || b->live_fd < 0 || !atomic_exchange(&b->report, 0))
        return;
    char why[sizeof b->dead_reason];
    pthread_mutex_lock(&b->lock);
    memcpy(why, b->dead_reason, sizeof why);
    pthread_mutex_unlock(&b->lock);
    send_live(b, b->live_fd, SYMM__OP_DIED, b->rank, SYMM__OUT_FAILED, why);
}

/* The abort grace passed with the bootstrap still up: say why, and end the
 * process (its output flushed when no other thread holds stdout). */
static void end_process(symm__bootstrap_t *b, double since) {
    char why[sizeof b->dead_reason];
    int pe = atomic_load(&b->dead_pe), kind;
    pthread_mutex_lock(&b->lock);
    memcpy(why, b->dead_reason, sizeof why);
    kind = b->dead_kind;
    pthread_mutex_unlock(&b->lock);
    SYMM_LOG_ERROR("PE %d %s (%s) %.1f s ago and this process is still in symm (SYMM_ABORT_GRACE=%g s): "
                   "ending it with exit status %d",
                   pe, out_verb(kind), why, since, (double)atomic_load(&b->grace_ms) / 1000.0,
                   SYMM__ABORT_EXIT_STATUS);
    if (ftrylockfile(stdout) == 0) {
        fflush_unlocked(stdout);
        funlockfile(stdout);
    }
    _exit(SYMM__ABORT_EXIT_STATUS);
}

static double heartbeat_interval(const symm__bootstrap_t *b) {
    double t = b->peer_timeout > 0 ? b->peer_timeout / 5.0 : 1.0;
    if (t > 1.0)
        t = 1.0;
    if (t < 0.02)
        t = 0.02;
    return t;
}

/* Read what arrived on w; mark deaths. A message is a header and, when
 * hdr.nbytes > 0, that many bytes of text; `have` counts the bytes of the
 * current message received so far, so it may arrive in pieces. */
static void drain(symm__bootstrap_t *b, watched_t *w, double now) {
    for (;;) {
        size_t hs = sizeof w->hdr;
        char *dst;
        size_t want;
        if (w->have < hs) {
            dst = (char *)&w->hdr + w->have;
            want = hs - w->have;
        } else {
            dst = w->reason + (w->have - hs);
            want = (size_t)w->hdr.nbytes - (w->have - hs);
        }
        ssize_t r = recv(w->fd, dst, want, MSG_DONTWAIT);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (r <= 0) {
            w->gone = 1;
            int left = b->rank == 0 ? atomic_load(&b->peer_left[w->pe]) : atomic_load(&b->root_left);
            if (!left)
                symm__bs_mark_dead(b, w->pe, r == 0 ? "its process exited or was killed: connection closed"
                                                    : "its liveness connection failed");
            return;
        }
        w->last = now;
        w->have += (size_t)r;
        if (w->have < hs)
            continue;
        if (w->have == hs && (w->hdr.magic != SYMM__BS_MAGIC || w->hdr.nbytes > REASON_MAX)) {
            w->gone = 1;
            symm__bs_mark_dead(b, w->pe, "corrupted liveness stream");
            return;
        }
        if (w->have < hs + (size_t)w->hdr.nbytes)
            continue; /* the text follows */
        if (w->hdr.nbytes)
            w->reason[w->hdr.nbytes - 1] = '\0';
        else
            w->reason[0] = '\0';
        w->have = 0;
        switch (w->hdr.op) {
        case SYMM__OP_HEARTBEAT:
            break;
        case SYMM__OP_BYE:
            if (b->rank == 0)
                atomic_store(&b->peer_left[w->pe], 1);
            else
                atomic_store(&b->root_left, 1);
            break;
        case SYMM__OP_DIED: /* relayed by the root, or (at the root) a rank's own failure */
            if (w->hdr.root >= 0 && w->hdr.root < b->nranks)
                symm__bs_mark_out(b, w->hdr.root,
                                  w->hdr.status == SYMM__OUT_FAILED || w->hdr.status == SYMM__OUT_STUCK
                                      ? w->hdr.status
                                      : SYMM__OUT_DIED,
                                  w->reason[0] ? w->reason : "reported by PE 0");
            break;
        default:
            break;
        }
    }
}

static void *watcher_main(void *arg) {
    symm__bootstrap_t *b = arg;
    int n = b->rank == 0 ? b->nranks - 1 : 1;
    watched_t *ws = calloc((size_t)n, sizeof *ws);
    struct pollfd *pfds = calloc((size_t)n + 1, sizeof *pfds);
    if (!ws || !pfds) {
        SYMM_LOG_ERROR("liveness watcher: out of memory; dead PEs will not be noticed");
        free(ws);
        free(pfds);
        return NULL;
    }
    double now = symm__now();
    for (int i = 0; i < n; i++) {
        ws[i].fd = b->rank == 0 ? b->peer_live[i + 1] : b->live_fd;
        ws[i].pe = b->rank == 0 ? i + 1 : 0;
        ws[i].last = now;
    }
    double interval = heartbeat_interval(b), next_beat = now, next_health = now + 1.0;
    for (;;) {
        int k = 0;
        pfds[k++] = (struct pollfd){.fd = b->wake_pipe[0], .events = POLLIN};
        for (int i = 0; i < n; i++)
            pfds[k++] = (struct pollfd){.fd = ws[i].gone ? -1 : ws[i].fd, .events = POLLIN};
        int wait_ms = (int)((next_beat - symm__now()) * 1000.0) + 1;
        if (wait_ms > SYMM__BS_SLICE_MS)
            wait_ms = SYMM__BS_SLICE_MS;
        if (wait_ms < 0)
            wait_ms = 0;
        int r = poll(pfds, (nfds_t)k, wait_ms);
        if (r < 0 && errno != EINTR) {
            SYMM_LOG_ERROR("liveness watcher: poll: %s", strerror(errno));
            symm__sleep_ms(SYMM__BS_SLICE_MS);
        }
        if (pfds[0].revents)
            break; /* destroy */
        now = symm__now();
        for (int i = 0; i < n; i++)
            if (!ws[i].gone && pfds[i + 1].revents)
                drain(b, &ws[i], now);
        for (int i = 0; i < n; i++) {
            if (ws[i].gone || b->peer_timeout <= 0 || now - ws[i].last <= b->peer_timeout)
                continue;
            char why[96];
            snprintf(why, sizeof why, "silent for more than SYMM_PEER_TIMEOUT=%g s (hung or stopped?)",
                     b->peer_timeout);
            symm__bs_mark_dead(b, ws[i].pe, why);
            ws[i].gone = 1;
        }
        /* This process failed (its device, say): check about once a second. */
        if (now >= next_health && atomic_load(&b->dead_pe) < 0) {
            char why[REASON_MAX];
            int failed = 0;
            pthread_mutex_lock(&b->lock);
            if (b->health)
                failed = b->health(b->health_arg, why, sizeof why);
            pthread_mutex_unlock(&b->lock);
            if (failed)
                symm__bootstrap_report_failure(b, why);
            next_health = now + 1.0;
        }
        /* News the thread that learnt it could not send (normally sent already). */
        send_failure(b);
        if (b->rank == 0)
            relay_now(b);
        if (now >= next_beat) {
            for (int i = 0; i < n; i++)
                if (!ws[i].gone)
                    send_live(b, ws[i].fd, SYMM__OP_HEARTBEAT, b->rank, 0, NULL);
            next_beat = now + interval;
        }
        /* Out of the job, and still in symm past the grace: end it. */
        long long grace = atomic_load(&b->grace_ms);
        if (grace > 0 && atomic_load(&b->dead_pe) >= 0) {
            double at;
            pthread_mutex_lock(&b->lock);
            at = b->dead_at;
            pthread_mutex_unlock(&b->lock);
            if (now - at >= (double)grace / 1000.0)
                end_process(b, now - at);
        }
    }
    free(ws);
    free(pfds);
    return NULL;
}

symm_status_t symm__liveness_start(symm__bootstrap_t *b) {
    if (pipe2(b->wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
        return symm__error(SYMM_ERR_BOOTSTRAP, "liveness: pipe: %s", strerror(errno));
    int e = pthread_create(&b->watcher, NULL, watcher_main, b);
    if (e != 0) {
        close(b->wake_pipe[0]);
        close(b->wake_pipe[1]);
        b->wake_pipe[0] = b->wake_pipe[1] = -1;
        return symm__error(SYMM_ERR_BOOTSTRAP, "liveness: cannot start the watcher thread: %s",
                           strerror(e));
    }
    b->watcher_started = 1;
    return SYMM_SUCCESS;
}

void symm__liveness_stop(symm__bootstrap_t *b) {
    if (b->watcher_started) {
        char c = 1;
        while (write(b->wake_pipe[1], &c, 1) < 0 && errno == EINTR) {
        }
        pthread_join(b->watcher, NULL);
        b->watcher_started = 0;
    }
    /* With the watcher gone this thread owns the live sockets: say BYE, so
     * the EOF that follows our close is not taken for a death. */
    if (b->rank == 0 && b->peer_live) {
        /* A death not relayed yet goes out first: the others must hear
         * "PE k died", not just that the root left. */
        relay_now(b);
        for (int r = 1; r < b->nranks; r++)
            if (b->peer_live[r] >= 0)
                send_live(b, b->peer_live[r], SYMM__OP_BYE, 0, 0, NULL);
    } else if (b->live_fd >= 0) {
        /* a failure not sent yet goes out first */
        send_failure(b);
        send_live(b, b->live_fd, SYMM__OP_BYE, b->rank, 0, NULL);
    }
    for (int i = 0; i < 2; i++)
        if (b->wake_pipe[i] >= 0) {
            close(b->wake_pipe[i]);
            b->wake_pipe[i] = -1;
        }
}
