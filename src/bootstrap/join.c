/*
 * join.c - forming the job: the root accepts a connection only from a
 * process that proves it holds the job key (auth.h), answering a challenge
 * fresh for that connection (bootstrap_internal.h has the messages).
 *
 * The root serves every new connection at once, each with its own short
 * deadline, so connections that say nothing (a port scanner, an attacker)
 * hold nobody up; past JOIN_PENDING_MAX waiting at once the oldest is
 * dropped, and how many were is said once. Nothing the root sends before a
 * connection proved the key depends on the key (a fresh nonce, and where
 * the key file is), so a connection learns nothing to test guesses of a
 * secret against. Whatever is turned away - no key, a bad or replayed
 * HELLO, a rank already taken, a rank out of range, another job size - is
 * told why and closed; the job goes on forming, and if it cannot before
 * SYMM_BOOTSTRAP_TIMEOUT the timeout message says what was turned away.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/bootstrap_internal.h"
#include "core/env.h"
#include "core/log.h"

/* A new connection must send its HELLO within this long. */
#define JOIN_HELLO_WAIT_S 5.0
/* Connections served at once before their HELLO; past this the oldest goes
 * (a genuine PE answers its challenge at once), unless every one is younger
 * than JOIN_PROTECT_S: then the new one goes. So a flood of connections
 * cannot push a PE's connection out before it had time to answer, and a PE
 * whose connection was dropped connects again (rank_join). */
#define JOIN_PENDING_MAX 64
#define JOIN_PROTECT_S 0.25
/* Connections accepted per turn of the root's loop. */
#define JOIN_ACCEPT_TURN 256
/* Turned-away connections logged one by one before only counting them. */
#define JOIN_LOG_MAX 3

static double deadline_from(double seconds) { return seconds > 0 ? symm__now() + seconds : 0; }

static void hello_mac(const symm__job_key_t *key, const unsigned char *challenge, const symm__bs_hello_t *h,
                      unsigned char out[SYMM__SHA256_BYTES]) {
    static const char tag[] = "symm hello";
    const void *parts[3] = {tag, challenge, h};
    size_t lens[3] = {sizeof tag, SYMM__NONCE_BYTES, offsetof(symm__bs_hello_t, mac)};
    symm__hmac_sha256(key->k, sizeof key->k, parts, lens, 3, out);
}

static void welcome_mac(const symm__job_key_t *key, const unsigned char *challenge, const unsigned char *nonce,
                        uint64_t job_id, unsigned char out[SYMM__SHA256_BYTES]) {
    static const char tag[] = "symm welcome";
    const void *parts[4] = {tag, challenge, nonce, &job_id};
    size_t lens[4] = {sizeof tag, SYMM__NONCE_BYTES, SYMM__NONCE_BYTES, sizeof job_id};
    symm__hmac_sha256(key->k, sizeof key->k, parts, lens, 4, out);
}

/* A header and a small payload in one non-blocking send: the root never
 * waits on a peer that does not read (a fresh socket's buffer holds it). */
static int send_nb(int fd, uint32_t op, int32_t status, const void *payload, size_t n) {
    struct {
        symm__bs_hdr_t h;
        unsigned char p[600];
    } m;
    if (n > sizeof m.p)
        n = sizeof m.p;
    memset(&m.h, 0, sizeof m.h);
    m.h = (symm__bs_hdr_t){SYMM__BS_MAGIC, op, 0, n, -1, status};
    if (n)
        memcpy(m.p, payload, n);
    return send(fd, &m, sizeof m.h + n, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)(sizeof m.h + n) ? 0 : -1;
}

static void send_reject(int fd, symm_status_t status, const char *msg) {
    (void)send_nb(fd, SYMM__OP_REJECT, status, msg, strlen(msg) + 1);
}

/* ======================================================================= */
/* root                                                                     */
/* ======================================================================= */

typedef struct pending {
    int fd;
    double since, until;
    size_t have;
    unsigned char challenge[SYMM__NONCE_BYTES];
    unsigned char in[sizeof(symm__bs_hdr_t) + sizeof(symm__bs_hello_t)];
} pending_t;

typedef struct joining {
    symm__bootstrap_t *b;
    const symm__job_key_t *key;
    const char *key_file;     /* where the ranks read the key ("" with a secret or a uid) */
    pending_t pend[JOIN_PENDING_MAX];
    int npend;
    int have, want;
    /* per rank: its main connection's challenge and nonce, and its pid */
    unsigned char (*main_challenge)[SYMM__NONCE_BYTES];
    unsigned char (*main_nonce)[SYMM__NONCE_BYTES];
    int64_t *pid;
    unsigned long no_key;     /* connections that did not prove the key */
    unsigned long capped;     /* of those, dropped unanswered at JOIN_PENDING_MAX */
    unsigned long logged;
    char last_reject[320];    /* why the last process that had the key was turned away */
} joining_t;

static void drop_pending(joining_t *j, int i) {
    close(j->pend[i].fd);
    j->pend[i] = j->pend[--j->npend];
}

static void turn_away(joining_t *j, int i, int had_key, const char *why) {
    if (had_key) {
        snprintf(j->last_reject, sizeof j->last_reject, "%s", why);
        SYMM_LOG_WARN("bootstrap: turned away a process of this job: %s", why);
    } else {
        j->no_key++;
        if (j->logged++ < JOIN_LOG_MAX)
            SYMM_LOG_WARN("bootstrap: turned away a connection: %s", why);
    }
    send_reject(j->pend[i].fd, SYMM_ERR_BOOTSTRAP, why);
    drop_pending(j, i);
}

/* A complete HELLO on pending connection i: accept it into its rank's slot
 * or turn it away. */
static void judge(joining_t *j, int i) {
    symm__bootstrap_t *b = j->b;
    pending_t *p = &j->pend[i];
    symm__bs_hello_t h;
    unsigned char mac[SYMM__SHA256_BYTES];
    char why[320];
    memcpy(&h, p->in + sizeof(symm__bs_hdr_t), sizeof h);
    if (h.version != SYMM__BS_VERSION) {
        snprintf(why, sizeof why, "bootstrap protocol %u, but this root speaks %u (another symm version)",
                 h.version, SYMM__BS_VERSION);
        turn_away(j, i, 0, why);
        return;
    }
    hello_mac(j->key, p->challenge, &h, mac);
    if (!symm__ct_equal(mac, h.mac, sizeof mac)) {
        turn_away(j, i, 0,
                  "authentication failed: this process does not hold the job's key (is SYMM_BOOTSTRAP_SECRET "
                  "the same on every PE?), or it answered another connection's challenge");
        return;
    }
    if (h.nranks != b->nranks) {
        snprintf(why, sizeof why,
                 "PE %d was started with %d PEs but the root (PE 0) with %d: every PE must be given the same "
                 "number of PEs",
                 h.rank, h.nranks, b->nranks);
        turn_away(j, i, 1, why);
        return;
    }
    if (h.rank <= 0 || h.rank >= b->nranks || (h.kind != SYMM__CONN_MAIN && h.kind != SYMM__CONN_LIVE)) {
        snprintf(why, sizeof why, "a process (pid %lld) claims rank %d, %s (valid ranks 1..%d join the root)",
                 (long long)h.pid, h.rank, h.rank == 0 ? "which is the root's" : "out of range", b->nranks - 1);
        turn_away(j, i, 1, why);
        return;
    }
    int r = h.rank;
    int *slot = h.kind == SYMM__CONN_MAIN ? &b->peer_main[r] : &b->peer_live[r];
    if (*slot >= 0) {
        snprintf(why, sizeof why,
                 "two processes claim rank %d (pids %lld and %lld): duplicate rank (check RANK / the rank passed "
                 "to symm_init_with_uid)",
                 r, (long long)j->pid[r], (long long)h.pid);
        turn_away(j, i, 1, why);
        return;
    }
    if (h.kind == SYMM__CONN_LIVE &&
        (b->peer_main[r] < 0 || !symm__ct_equal(h.main_nonce, j->main_nonce[r], SYMM__NONCE_BYTES))) {
        snprintf(why, sizeof why, "a liveness connection for rank %d (pid %lld) that is not that rank's process",
                 r, (long long)h.pid);
        turn_away(j, i, 1, why);
        return;
    }
    if (send_nb(p->fd, SYMM__OP_ACCEPT, 0, NULL, 0) != 0) {
        drop_pending(j, i);
        return;
    }
    if (h.kind == SYMM__CONN_MAIN) {
        memcpy(j->main_challenge[r], p->challenge, SYMM__NONCE_BYTES);
        memcpy(j->main_nonce[r], h.nonce, SYMM__NONCE_BYTES);
        j->pid[r] = h.pid;
    }
    *slot = p->fd;
    j->have++;
    j->pend[i] = j->pend[--j->npend]; /* the fd lives on in the slot */
}

/* Read what pending connection i sent; judge it once complete. */
static void read_pending(joining_t *j, int i) {
    pending_t *p = &j->pend[i];
    const size_t hs = sizeof(symm__bs_hdr_t), full = sizeof p->in;
    for (;;) {
        size_t want = p->have < hs ? hs - p->have : full - p->have;
        ssize_t r = recv(p->fd, p->in + p->have, want, MSG_DONTWAIT);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (r <= 0) {
            drop_pending(j, i);
            return;
        }
        p->have += (size_t)r;
        if (p->have == hs) {
            symm__bs_hdr_t h;
            memcpy(&h, p->in, hs);
            if (h.magic != SYMM__BS_MAGIC || h.op != SYMM__OP_HELLO || h.nbytes != sizeof(symm__bs_hello_t)) {
                turn_away(j, i, 0, "not a HELLO of this bootstrap protocol (another symm version, or not symm)");
                return;
            }
        }
        if (p->have == full) {
            judge(j, i);
            return;
        }
    }
}

/* Accept what waits on the listening socket (at most JOIN_ACCEPT_TURN, so a
 * flood of connections cannot keep the root from reading the HELLOs that
 * came meanwhile, or from its deadlines); send each a challenge. */
static void accept_new(joining_t *j, int listen_fd) {
    for (int turn = 0; turn < JOIN_ACCEPT_TURN; turn++) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return; /* EAGAIN, or a connection that went away meanwhile */
        symm__tcp_tune(fd);
        double now = symm__now();
        if (j->npend == JOIN_PENDING_MAX) {
            int oldest = 0;
            for (int i = 1; i < j->npend; i++)
                if (j->pend[i].since < j->pend[oldest].since)
                    oldest = i;
            j->no_key++;
            j->capped++;
            if (now - j->pend[oldest].since < JOIN_PROTECT_S) {
                close(fd); /* every waiting one is still within its time to answer */
                continue;
            }
            drop_pending(j, oldest);
        }
        pending_t *p = &j->pend[j->npend];
        symm__bs_challenge_t c;
        memset(p, 0, sizeof *p);
        memset(&c, 0, sizeof c);
        p->fd = fd;
        p->since = now;
        p->until = now + JOIN_HELLO_WAIT_S;
        c.version = SYMM__BS_VERSION;
        snprintf(c.key_file, sizeof c.key_file, "%s", j->key_file);
        if (symm__random_bytes(p->challenge, sizeof p->challenge) != 0 ||
            (memcpy(c.nonce, p->challenge, sizeof c.nonce),
             send_nb(fd, SYMM__OP_CHALLENGE, 0, &c, sizeof c) != 0)) {
            close(fd);
            continue;
        }
        j->npend++;
    }
}

static void missing_ranks(const symm__bootstrap_t *b, char *out, size_t size) {
    size_t len = 0;
    int shown = 0;
    out[0] = '\0';
    for (int r = 1; r < b->nranks && len + 16 < size; r++)
        if (b->peer_main[r] < 0 || b->peer_live[r] < 0) {
            if (shown == 16) {
                len += (size_t)snprintf(out + len, size - len, ", ...");
                break;
            }
            len += (size_t)snprintf(out + len, size - len, "%s%d", shown ? ", " : "", r);
            shown++;
        }
}

/* The job cannot form: tell every rank that joined, every connection still
 * pending, and those waiting in the listen queue, why. */
static symm_status_t root_fail(joining_t *j, int listen_fd, symm_status_t status, const char *msg) {
    symm__bootstrap_t *b = j->b;
    for (int r = 1; r < b->nranks; r++)
        if (b->peer_main[r] >= 0)
            send_reject(b->peer_main[r], status, msg);
    while (j->npend > 0) {
        send_reject(j->pend[0].fd, status, msg);
        drop_pending(j, 0);
    }
    for (int fd; (fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0;) {
        send_reject(fd, status, msg);
        close(fd);
    }
    return symm__error(status, "%s", msg);
}

/* Connections dropped at the cap: said once, when the job formed or failed. */
static void say_capped(const joining_t *j) {
    if (j->capped)
        SYMM_LOG_WARN("bootstrap: dropped %lu connection(s) unanswered: %d were already waiting for their "
                      "HELLO (a flood of connections to the root's port?)",
                      j->capped, JOIN_PENDING_MAX);
}

static symm_status_t root_timeout(joining_t *j, int listen_fd) {
    char miss[256], msg[1024];
    size_t len;
    missing_ranks(j->b, miss, sizeof miss);
    len = (size_t)snprintf(msg, sizeof msg,
                           "bootstrap: timed out after SYMM_BOOTSTRAP_TIMEOUT=%g s waiting for PE(s) %s (of %d) "
                           "to join",
                           symm__env()->bootstrap_timeout, miss, j->b->nranks);
    if (j->last_reject[0] && len < sizeof msg)
        len += (size_t)snprintf(msg + len, sizeof msg - len, "; turned away: %s", j->last_reject);
    if (j->no_key && len < sizeof msg)
        len += (size_t)snprintf(msg + len, sizeof msg - len, "; turned away %lu connection(s) without the job "
                                "secret", j->no_key);
    if (j->capped && len < sizeof msg)
        snprintf(msg + len, sizeof msg - len, " (%lu of them dropped unanswered, %d already waiting)", j->capped,
                 JOIN_PENDING_MAX);
    say_capped(j);
    return root_fail(j, listen_fd, SYMM_ERR_TIMEOUT, msg);
}

static symm_status_t root_serve(joining_t *j, int listen_fd, double deadline) {
    struct pollfd pfds[1 + JOIN_PENDING_MAX];
    while (j->have < j->want) {
        double now = symm__now(), next = now + SYMM__BS_SLICE_MS * 1e-3;
        if (deadline > 0 && now >= deadline)
            return root_timeout(j, listen_fd);
        for (int i = j->npend - 1; i >= 0; i--)
            if (now >= j->pend[i].until) {
                if (j->logged++ < JOIN_LOG_MAX)
                    SYMM_LOG_WARN("bootstrap: closed a connection that said nothing for %g s", JOIN_HELLO_WAIT_S);
                j->no_key++;
                drop_pending(j, i);
            }
        pfds[0] = (struct pollfd){.fd = listen_fd, .events = POLLIN};
        for (int i = 0; i < j->npend; i++) {
            pfds[1 + i] = (struct pollfd){.fd = j->pend[i].fd, .events = POLLIN};
            if (j->pend[i].until < next)
                next = j->pend[i].until;
        }
        if (deadline > 0 && deadline < next)
            next = deadline;
        int ms = (int)((next - now) * 1000.0) + 1;
        int np = j->npend;
        if (poll(pfds, (nfds_t)(1 + np), ms < 0 ? 0 : ms) < 0 && errno != EINTR) {
            char msg[160];
            snprintf(msg, sizeof msg, "bootstrap: poll on the root socket: %s", strerror(errno));
            return root_fail(j, listen_fd, SYMM_ERR_BOOTSTRAP, msg);
        }
        /* from the back: judging entry i moves the last one into its place */
        for (int i = np - 1; i >= 0; i--)
            if (pfds[1 + i].revents)
                read_pending(j, i);
        if (pfds[0].revents)
            accept_new(j, listen_fd);
    }
    if (j->no_key)
        SYMM_LOG_WARN("bootstrap: the job formed; %lu connection(s) without the job secret were turned away",
                      j->no_key);
    say_capped(j);
    while (j->npend > 0)
        drop_pending(j, 0);
    for (int r = 1; r < j->b->nranks; r++) {
        symm__bs_welcome_t w;
        memset(&w, 0, sizeof w);
        w.job_id = j->b->job_id;
        welcome_mac(j->key, j->main_challenge[r], j->main_nonce[r], w.job_id, w.mac);
        if (symm__send_all(NULL, j->b->peer_main[r], &(symm__bs_hdr_t){SYMM__BS_MAGIC, SYMM__OP_WELCOME, 0,
                                                                         sizeof w, -1, 0},
                           sizeof(symm__bs_hdr_t), deadline) != SYMM__IO_OK ||
            symm__send_all(NULL, j->b->peer_main[r], &w, sizeof w, deadline) != SYMM__IO_OK) {
            char msg[128];
            snprintf(msg, sizeof msg, "bootstrap: PE %d left while the job was forming", r);
            return root_fail(j, listen_fd, SYMM_ERR_BOOTSTRAP, msg);
        }
    }
    return SYMM_SUCCESS;
}

static symm_status_t root_accept(symm__bootstrap_t *b, const symm__key_src_t *ks, int listen_fd, double deadline) {
    joining_t *j = calloc(1, sizeof *j);
    symm_status_t s;
    if (j) {
        j->main_challenge = calloc((size_t)b->nranks, sizeof *j->main_challenge);
        j->main_nonce = calloc((size_t)b->nranks, sizeof *j->main_nonce);
        j->pid = calloc((size_t)b->nranks, sizeof *j->pid);
    }
    if (!j || !j->main_challenge || !j->main_nonce || !j->pid) {
        s = symm__error(SYMM_ERR_NO_MEMORY, "bootstrap: out of memory at the root");
        goto out;
    }
    j->b = b;
    j->key = &ks->key;
    j->key_file = ks->owner ? ks->file : "";
    j->want = 2 * (b->nranks - 1);
    s = root_serve(j, listen_fd, deadline);
out:
    if (j) {
        while (j->npend > 0)
            drop_pending(j, 0);
        free(j->main_challenge);
        free(j->main_nonce);
        free(j->pid);
        memset(j, 0, sizeof *j);
        free(j);
    }
    return s;
}

/* ======================================================================= */
/* other ranks                                                              */
/* ======================================================================= */

#define ROOT_CLOSED "bootstrap: the root closed the connection before the job formed (see PE 0's error)"

/* The root's next message on fd: `want_op` with exactly n payload bytes,
 * or a REJECT, whose reason becomes the error. *closed (if given) is set
 * when the connection ended without a word. */
static symm_status_t recv_from_root(symm__bootstrap_t *b, int fd, uint32_t want_op, void *payload, size_t n,
                                    double deadline, int *closed) {
    symm__bs_hdr_t h;
    enum symm__io io = symm__recv_all(NULL, fd, &h, sizeof h, deadline);
    if (io == SYMM__IO_TIMEOUT)
        return symm__error(SYMM_ERR_TIMEOUT,
                           "bootstrap: PE %d reached the root but the job did not form within "
                           "SYMM_BOOTSTRAP_TIMEOUT=%g s (other PEs missing?)",
                           b->rank, symm__env()->bootstrap_timeout);
    if (io != SYMM__IO_OK) {
        if (closed)
            *closed = 1;
        return symm__error(SYMM_ERR_BOOTSTRAP, ROOT_CLOSED);
    }
    if (h.magic == SYMM__BS_MAGIC && h.op == SYMM__OP_REJECT) {
        char text[620] = "";
        size_t k = h.nbytes < sizeof text ? (size_t)h.nbytes : sizeof text - 1;
        if (symm__recv_all(NULL, fd, text, k, symm__now() + 1.0) != SYMM__IO_OK)
            snprintf(text, sizeof text, "(no reason given)");
        text[sizeof text - 1] = '\0';
        return symm__error(h.status ? h.status : SYMM_ERR_BOOTSTRAP, "root refused PE %d: %s", b->rank, text);
    }
    if (h.magic != SYMM__BS_MAGIC || h.op != want_op || h.nbytes != n ||
        (n && symm__recv_all(NULL, fd, payload, n, deadline) != SYMM__IO_OK))
        return symm__error(SYMM_ERR_BOOTSTRAP,
                           "bootstrap: the process at the root's address does not speak this symm bootstrap "
                           "protocol (op %u; another symm version, or another program on that port)",
                           h.op);
    return SYMM_SUCCESS;
}

/* Answer the challenge on a new connection to the root. *dropped: the root
 * closed it before it accepted or refused it (pushed out by other
 * connections, or the root is gone). */
static symm_status_t join_conn(symm__bootstrap_t *b, symm__key_src_t *ks, symm__job_key_t *key, int fd,
                               uint32_t kind, const unsigned char *main_nonce, double deadline,
                               unsigned char challenge[SYMM__NONCE_BYTES], unsigned char nonce[SYMM__NONCE_BYTES],
                               int *dropped) {
    symm__bs_challenge_t c;
    symm__bs_hello_t h;
    symm_status_t s;
    if ((s = recv_from_root(b, fd, SYMM__OP_CHALLENGE, &c, sizeof c, deadline, dropped)))
        return s;
    if (c.version != SYMM__BS_VERSION)
        return symm__error(SYMM_ERR_BOOTSTRAP, "bootstrap: the root speaks protocol %u, this PE %u (another symm "
                           "version?)", c.version, SYMM__BS_VERSION);
    c.key_file[sizeof c.key_file - 1] = '\0';
    if ((s = symm__key_get(ks, c.key_file, key)))
        return s;
    memset(&h, 0, sizeof h);
    h.version = SYMM__BS_VERSION;
    h.kind = kind;
    h.rank = b->rank;
    h.nranks = b->nranks;
    h.pid = (int64_t)getpid();
    if (symm__random_bytes(h.nonce, sizeof h.nonce) != 0)
        return symm__error(SYMM_ERR_BOOTSTRAP, "bootstrap: no random bytes: %s", strerror(errno));
    if (main_nonce)
        memcpy(h.main_nonce, main_nonce, sizeof h.main_nonce);
    hello_mac(key, c.nonce, &h, h.mac);
    symm__bs_hdr_t hdr = {SYMM__BS_MAGIC, SYMM__OP_HELLO, 0, sizeof h, -1, 0};
    enum symm__io io = symm__send_all(NULL, fd, &hdr, sizeof hdr, deadline);
    if (io == SYMM__IO_OK)
        io = symm__send_all(NULL, fd, &h, sizeof h, deadline);
    if (io != SYMM__IO_OK) {
        *dropped = io == SYMM__IO_EOF;
        return symm__error(SYMM_ERR_BOOTSTRAP, "bootstrap: PE %d could not introduce itself to the root", b->rank);
    }
    memcpy(challenge, c.nonce, SYMM__NONCE_BYTES);
    memcpy(nonce, h.nonce, SYMM__NONCE_BYTES);
    return recv_from_root(b, fd, SYMM__OP_ACCEPT, NULL, 0, deadline, dropped);
}

/* Connect and join as `kind`; a connection the root drops unanswered (a
 * flood of others at the root) is made again until the deadline. A root
 * that is gone refuses the new connection: then the first error stands. */
static symm_status_t join_one(symm__bootstrap_t *b, symm__key_src_t *ks, symm__job_key_t *key, const char *addr,
                              int port, uint32_t kind, int watch_fd, const unsigned char *main_nonce,
                              double deadline, int *fd, unsigned char challenge[SYMM__NONCE_BYTES],
                              unsigned char nonce[SYMM__NONCE_BYTES]) {
    symm_status_t s = symm__tcp_connect(addr, port, deadline, watch_fd, fd);
    for (int tries = 1; s == SYMM_SUCCESS; tries++) {
        int dropped = 0;
        s = join_conn(b, ks, key, *fd, kind, main_nonce, deadline, challenge, nonce, &dropped);
        if (s == SYMM_SUCCESS || !dropped || (deadline > 0 && symm__now() >= deadline))
            break;
        close(*fd);
        *fd = -1;
        if (tries == 1)
            SYMM_LOG_WARN("bootstrap: the root closed PE %d's %s connection before answering it (many connections "
                          "waiting at the root?): connecting again", b->rank, kind == SYMM__CONN_MAIN ? "main" : "live");
        symm__sleep_ms(5 + (int)(symm__random64() % 50u));
        double again = symm__now() + 2.0; /* a root that is gone refuses at once */
        if (symm__tcp_connect(addr, port, deadline > 0 && deadline < again ? deadline : again, watch_fd, fd) !=
            SYMM_SUCCESS)
            return symm__error(SYMM_ERR_BOOTSTRAP, ROOT_CLOSED);
        s = SYMM_SUCCESS;
    }
    return s;
}

/* Non-root: join on both connections, then wait for WELCOME. */
static symm_status_t rank_join(symm__bootstrap_t *b, symm__key_src_t *ks, const char *addr, int port,
                               double deadline) {
    unsigned char main_challenge[SYMM__NONCE_BYTES], main_nonce[SYMM__NONCE_BYTES];
    unsigned char live_challenge[SYMM__NONCE_BYTES], live_nonce[SYMM__NONCE_BYTES];
    unsigned char mac[SYMM__SHA256_BYTES];
    symm__job_key_t key;
    symm__bs_welcome_t w;
    symm_status_t s;
    memset(&key, 0, sizeof key);
    if ((s = join_one(b, ks, &key, addr, port, SYMM__CONN_MAIN, -1, NULL, deadline, &b->main_fd, main_challenge,
                      main_nonce)) ||
        (s = join_one(b, ks, &key, addr, port, SYMM__CONN_LIVE, b->main_fd, main_nonce, deadline, &b->live_fd,
                      live_challenge, live_nonce)) ||
        (s = recv_from_root(b, b->main_fd, SYMM__OP_WELCOME, &w, sizeof w, deadline, NULL)))
        goto out;
    welcome_mac(&key, main_challenge, main_nonce, w.job_id, mac);
    if (!symm__ct_equal(mac, w.mac, sizeof mac)) {
        s = symm__error(SYMM_ERR_BOOTSTRAP, "bootstrap: the root's WELCOME does not prove the job key (not this "
                        "job's root?)");
        goto out;
    }
    b->job_id = w.job_id;
out:
    memset(&key, 0, sizeof key);
    return s;
}

symm_status_t symm__bootstrap_connect(int rank, int nranks, symm__key_src_t *ks, int listen_fd, const char *addr,
                                      int port, symm__bootstrap_t **out) {
    symm_status_t s;
    symm__bootstrap_t *b = symm__bs_alloc(rank, nranks);
    if (!b) {
        if (listen_fd >= 0)
            close(listen_fd);
        symm__key_src_done(ks);
        return symm__error(SYMM_ERR_NO_MEMORY, "bootstrap: out of memory");
    }
    double deadline = deadline_from(symm__env()->bootstrap_timeout);
    if (rank == 0) {
        b->job_id = symm__random64();
        s = nranks > 1 ? root_accept(b, ks, listen_fd, deadline) : SYMM_SUCCESS;
        /* Nobody else may join now. */
        if (listen_fd >= 0)
            close(listen_fd);
    } else {
        s = rank_join(b, ks, addr, port, deadline);
    }
    symm__key_src_done(ks);
    if (s)
        goto fail;
    if (nranks > 1 && (s = symm__liveness_start(b)))
        goto fail;
    SYMM_LOG_DEBUG("bootstrap: PE %d of %d joined job %016llx", rank, nranks, (unsigned long long)b->job_id);
    *out = b;
    return SYMM_SUCCESS;
fail:
    symm__bs_free(b);
    return s;
}

/* Rank 0's listening socket on the address the others were told to use
 * (loopback stays loopback); on every interface only when that address is
 * not one of this host's (a name for a forwarding address, say). */
static symm_status_t listen_on(const char *addr, int port, int *fd) {
    uint32_t a;
    int got;
    if (symm__resolve_ipv4(addr, &a) != 0)
        return symm__error(SYMM_ERR_BOOTSTRAP, "bootstrap: cannot resolve the root address \"%s\"", addr);
    int probe = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe >= 0) {
        struct sockaddr_in sa;
        memset(&sa, 0, sizeof sa);
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = a;
        int local = bind(probe, (struct sockaddr *)&sa, sizeof sa) == 0 || errno != EADDRNOTAVAIL;
        close(probe);
        if (!local) {
            char text[INET_ADDRSTRLEN];
            SYMM_LOG_INFO("bootstrap: %s (%s) is not an address of this host: listening on every interface",
                          addr, inet_ntop(AF_INET, &a, text, sizeof text) ? text : "?");
            a = htonl(INADDR_ANY);
        }
    }
    return symm__tcp_listen(a, port, fd, &got);
}

symm_status_t symm__bootstrap_init_env(const symm__launch_info_t *info, symm__bootstrap_t **out) {
    symm__key_src_t ks;
    symm_status_t s;
    int listen_fd = -1;
    if (!info || !out)
        return symm__error(SYMM_ERR_INVALID_ARG, "bootstrap: NULL argument");
    if (info->nranks < 1 || info->rank < 0 || info->rank >= info->nranks)
        return symm__error(SYMM_ERR_INVALID_ARG, "bootstrap: rank %d of %d is out of range",
                           info->rank, info->nranks);
    if (info->nranks == 1) {
        memset(&ks, 0, sizeof ks);
        return symm__bootstrap_connect(0, 1, &ks, -1, info->root_addr, info->root_port, out);
    }
    if (info->root_port <= 0 || info->root_port > 65535)
        return symm__error(SYMM_ERR_INVALID_ARG, "bootstrap: no valid root port (%d)", info->root_port);
    if (info->rank == 0) {
        /* the key file exists before anyone can connect */
        if ((s = symm__key_src_root(info->root_addr, info->root_port, info->nranks, &ks)))
            return s;
        if ((s = listen_on(info->root_addr, info->root_port, &listen_fd))) {
            symm__key_src_done(&ks);
            return s;
        }
    } else if ((s = symm__key_src_rank(info->root_addr, info->root_port, info->nranks, &ks))) {
        return s;
    }
    return symm__bootstrap_connect(info->rank, info->nranks, &ks, listen_fd, info->root_addr, info->root_port,
                                   out);
}
