/*
 * bootstrap_internal.h - what the bootstrap files share: the bootstrap
 * object, the wire format and the socket helpers (tcp.c).
 */
#ifndef SYMM_BOOTSTRAP_INTERNAL_H
#define SYMM_BOOTSTRAP_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "bootstrap/auth.h"
#include "bootstrap/bootstrap.h"

#define SYMM__BS_MAGIC   0x73796d42u /* "symB" */
#define SYMM__BS_VERSION 3u          /* 3: no key id on the wire; the key file's path in the CHALLENGE */
#define SYMM__UID_MAGIC  0x73796d55u /* "symU" */

/* Waits on sockets are cut into slices this long so a dead peer (noticed by
 * the watcher thread) is seen quickly by any blocked call. */
#define SYMM__BS_SLICE_MS 50

/* Largest payload a header may announce: the bootstrap is for setup data,
 * and a bigger number means a corrupted stream. */
#define SYMM__BS_MAX_PAYLOAD ((uint64_t)1 << 32)

enum symm__bs_op {
    SYMM__OP_HELLO = 1,   /* first message on a new connection (root <- rank) */
    SYMM__OP_WELCOME,     /* root -> rank: the job is formed (payload: job id) */
    SYMM__OP_REJECT,      /* root -> rank: the job cannot form (payload: message) */
    SYMM__OP_ALLGATHER,
    SYMM__OP_BCAST,
    SYMM__OP_BARRIER,
    SYMM__OP_REPLY,       /* root -> rank: result of a collective */
    SYMM__OP_HEARTBEAT,   /* liveness channel */
    SYMM__OP_DIED,        /* liveness, root -> rank: PE `root` died */
    SYMM__OP_BYE,         /* liveness: orderly shutdown, the EOF that follows is not a death */
    SYMM__OP_CHALLENGE,   /* root -> new connection, first: a fresh nonce (and where the key file is) */
    SYMM__OP_ACCEPT       /* root -> rank: this connection is the rank's (HELLO verified) */
};

/* Every message starts with this header (host byte order: the ranks of one
 * job run the same build on the same architecture). */
typedef struct symm__bs_hdr {
    uint32_t magic;
    uint32_t op;
    uint64_t seq;    /* collective sequence number (both sides count calls) */
    uint64_t nbytes; /* payload bytes that follow */
    int32_t  root;   /* bcast root; DIED: the dead PE */
    int32_t  status; /* REPLY/REJECT: the outcome; from a rank: a local argument error */
} symm__bs_hdr_t;

/*
 * Joining (join.c): the root sends every new connection a CHALLENGE (a
 * fresh nonce, and for a key-file job the file's path; nothing derived from
 * the key); the rank answers with a HELLO whose mac proves it holds the job
 * key (auth.h) for this very challenge, so a HELLO seen once is worth
 * nothing on another connection; the root answers ACCEPT or REJECT. A
 * rank's live connection names its main connection's nonce, so both are
 * one process. Once all have joined, WELCOME carries the job id and the
 * root's proof over both nonces.
 */
#define SYMM__NONCE_BYTES 32
typedef struct symm__bs_challenge {
    uint32_t version;
    uint32_t reserved;
    unsigned char nonce[SYMM__NONCE_BYTES];    /* fresh per connection */
    char key_file[SYMM__KEY_PATH_BYTES];       /* the job's key file; "" with a secret or a unique id */
} symm__bs_challenge_t;

enum symm__bs_conn_kind { SYMM__CONN_MAIN = 1, SYMM__CONN_LIVE = 2 };
typedef struct symm__bs_hello {
    uint32_t version;
    uint32_t kind;
    int32_t  rank;
    int32_t  nranks;
    int64_t  pid;
    unsigned char nonce[SYMM__NONCE_BYTES];      /* the rank's, fresh per connection */
    unsigned char main_nonce[SYMM__NONCE_BYTES]; /* LIVE: the nonce of its MAIN connection */
    unsigned char mac[SYMM__SHA256_BYTES];       /* HMAC(key, "hello", challenge nonce, all above) */
} symm__bs_hello_t;

typedef struct symm__bs_welcome {
    uint64_t job_id;
    unsigned char mac[SYMM__SHA256_BYTES];       /* HMAC(key, "welcome", both main nonces, job_id) */
} symm__bs_welcome_t;

struct symm__bootstrap {
    int rank, nranks;
    uint64_t job_id;  /* random, chosen by the root, same on every rank */
    uint64_t seq;     /* collectives made so far */
    uint32_t ipc_count;

    /* Non-root: connections to the root. Root: per-rank connections (index = rank). */
    int main_fd, live_fd;
    int *peer_main, *peer_live;

    double peer_timeout;

    /* Liveness. dead_pe is written once (first death wins). */
    atomic_int dead_pe;
    atomic_int root_left;  /* non-root: the root said BYE */
    atomic_int *peer_left; /* root: rank r said BYE */
    pthread_mutex_t lock;  /* guards abort_flag, dead_reason and health */
    volatile uint32_t *abort_flag;
    char dead_reason[160];
    int dead_kind;         /* enum symm__out_kind of dead_pe */
    atomic_int report;     /* this PE failed: the watcher tells the others */
    symm__health_fn health;
    void *health_arg;

    pthread_t watcher;
    int watcher_started;
    int wake_pipe[2]; /* written by destroy to stop the watcher */

    /* Sends on the live sockets come from the watcher and, for news that
     * must leave before the caller can exit, from the caller's thread. */
    pthread_mutex_t send_lock;
    atomic_int relayed;     /* root: the death in dead_pe went out to every rank */
    double dead_at;         /* when this process learnt of dead_pe (guarded by lock) */
    atomic_llong grace_ms;  /* end the process this long after a death (0: never) */
};

/* ---- liveness.c --------------------------------------------------------- */
symm_status_t symm__liveness_start(symm__bootstrap_t *b);
void symm__liveness_stop(symm__bootstrap_t *b);
/* How a PE left the job (the DIED message carries it in its status). */
enum symm__out_kind {
    SYMM__OUT_DIED = 0,   /* exited, killed, or silent past SYMM_PEER_TIMEOUT */
    SYMM__OUT_FAILED = 1, /* reported its own failure (CUDA error, trapped kernel) */
    SYMM__OUT_STUCK = 2   /* alive, but did not reach a collective within SYMM_WAIT_TIMEOUT */
};
/* Record that `pe` left the job (first call wins), raise the abort flag,
 * log it; symm__bs_mark_dead is the DIED kind. */
void symm__bs_mark_out(symm__bootstrap_t *b, int pe, int kind, const char *why);
void symm__bs_mark_dead(symm__bootstrap_t *b, int pe, const char *why);
/* SYMM_ERR_PEER_DIED (raised with a message naming the PE) if a PE died,
 * else SYMM_SUCCESS. `what` names the call. */
symm_status_t symm__bs_check_dead(symm__bootstrap_t *b, const char *what);

/* ---- uid.c --------------------------------------------------------------- */
/* Rank 0 of a uid job: take over the listening socket symm__bootstrap_make_uid
 * left behind (checked against the uid's key id). */
symm_status_t symm__uid_adopt_listener(uint64_t key_id, int *fd);

/* ---- bootstrap.c --------------------------------------------------------- */
/* A bootstrap object with no connections (NULL: out of memory), and its
 * release (closes every socket; the watcher must be stopped). */
symm__bootstrap_t *symm__bs_alloc(int rank, int nranks);
void symm__bs_free(symm__bootstrap_t *b);

/* ---- join.c -------------------------------------------------------------- */
/* Form the job. Root: `listen_fd` is its listening socket (taken over: closed
 * on return). Others: connect to addr:port. `key` says where the job key
 * comes from; it is wiped (and the root's key file removed) on return. */
symm_status_t symm__bootstrap_connect(int rank, int nranks, symm__key_src_t *key, int listen_fd,
                                      const char *addr, int port, symm__bootstrap_t **out);

/* ---- tcp.c --------------------------------------------------------------- */
enum symm__io {
    SYMM__IO_OK = 0,
    SYMM__IO_EOF,     /* the peer closed the connection (or reset it) */
    SYMM__IO_ERR,     /* a socket error; errno holds it */
    SYMM__IO_TIMEOUT, /* the deadline passed */
    SYMM__IO_DEAD     /* a PE died (b's dead state) */
};

double symm__now(void); /* monotonic seconds */
void symm__sleep_ms(int ms);
/* Wait until `fd` has `events`; b (may be NULL) is checked for a dead PE
 * between slices; deadline 0 means none. */
enum symm__io symm__wait_fd(symm__bootstrap_t *b, int fd, short events, double deadline);
enum symm__io symm__send_all(symm__bootstrap_t *b, int fd, const void *buf, size_t n, double deadline);
enum symm__io symm__recv_all(symm__bootstrap_t *b, int fd, void *buf, size_t n, double deadline);
/* Read and drop n bytes (to keep a stream in step after a rejected payload). */
enum symm__io symm__recv_drop(symm__bootstrap_t *b, int fd, uint64_t n, double deadline);

/* A non-blocking, close-on-exec TCP socket listening on addr_be:port (port 0:
 * ephemeral); *port_out gets the port. Errors carry a message. */
symm_status_t symm__tcp_listen(uint32_t addr_be, int port, int *fd, int *port_out);
/* Connect to host:port, retrying refused connections until `deadline`; stop
 * early if `watch_fd` (>= 0) becomes readable (the root already answered on
 * another connection, e.g. with a rejection). */
symm_status_t symm__tcp_connect(const char *host, int port, double deadline, int watch_fd, int *fd);
/* Resolve an IPv4 host name or literal; 0 on success. */
int symm__resolve_ipv4(const char *host, uint32_t *addr_be);
void symm__tcp_tune(int fd);

uint64_t symm__random64(void);
uint64_t symm__hash64(const void *data, size_t n, uint64_t h);

#endif /* SYMM_BOOTSTRAP_INTERNAL_H */
