/*
 * uid.c - the unique-id path: the future rank 0 opens a listening socket and
 * describes it (address, port) in an opaque id that the caller hands to the
 * other processes by its own means, with the job key: whoever holds the id
 * may join, nobody else (keep it as private as the job's data).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/bootstrap_internal.h"
#include "core/env.h"
#include "core/log.h"

/* What the opaque id holds (the rest of its 128 bytes is zero). */
typedef struct uid_body {
    uint32_t magic;
    uint32_t version;
    uint32_t addr_be; /* IPv4 address the other ranks connect to */
    uint32_t port;
    unsigned char key[SYMM__KEY_BYTES]; /* random: the job key (auth.h) */
    uint64_t check;   /* hash of the fields above: catches a mangled copy */
} uid_body_t;

_Static_assert(sizeof(uid_body_t) <= SYMM_UNIQUE_ID_BYTES, "uid body too large");

/* The listening socket lives here between make_uid and rank 0's init. */
static pthread_mutex_t g_uid_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_uid_fd = -1;
static uint64_t g_uid_key_id;

static uint64_t body_check(const uid_body_t *u) {
    return symm__hash64(u, offsetof(uid_body_t, check), 0);
}

/* An address the other ranks can reach: SYMM_BOOTSTRAP_ADDR, else the first
 * non-loopback IPv4 interface that is up, else loopback (one-node jobs). */
static symm_status_t reachable_addr(uint32_t *addr_be) {
    const char *want = symm__env()->bootstrap_addr;
    if (want && *want) {
        if (symm__resolve_ipv4(want, addr_be) != 0)
            return symm__error(SYMM_ERR_ENV, "SYMM_BOOTSTRAP_ADDR=\"%s\" is not a resolvable IPv4 address",
                               want);
        return SYMM_SUCCESS;
    }
    *addr_be = htonl(INADDR_LOOPBACK);
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0)
        return SYMM_SUCCESS;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        if (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK))
            continue;
        *addr_be = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
        break;
    }
    freeifaddrs(ifs);
    return SYMM_SUCCESS;
}

symm_status_t symm__bootstrap_make_uid(symm_unique_id_t *uid) {
    if (!uid)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_get_unique_id: NULL uid");
    uid_body_t u;
    memset(&u, 0, sizeof u);
    symm_status_t s = reachable_addr(&u.addr_be);
    if (s)
        return s;
    int fd, port;
    symm__job_key_t key;
    /* Only on the advertised address: the others are told to use it. */
    if ((s = symm__tcp_listen(u.addr_be, 0, &fd, &port)))
        return s;
    if (symm__random_bytes(u.key, sizeof u.key) != 0) {
        close(fd);
        return symm__error(SYMM_ERR_BOOTSTRAP, "symm_get_unique_id: no random bytes for the job key: %s",
                           strerror(errno));
    }
    symm__key_set(&key, u.key);
    u.magic = SYMM__UID_MAGIC;
    u.version = SYMM__BS_VERSION;
    u.port = (uint32_t)port;
    u.check = body_check(&u);

    pthread_mutex_lock(&g_uid_lock);
    if (g_uid_fd >= 0) {
        /* An id made earlier and never used: only the newest one is live. */
        SYMM_LOG_INFO("symm_get_unique_id: replacing an unused unique id");
        close(g_uid_fd);
    }
    g_uid_fd = fd;
    g_uid_key_id = key.id;
    pthread_mutex_unlock(&g_uid_lock);

    memset(uid, 0, sizeof *uid);
    memcpy(uid->internal, &u, sizeof u);
    memset(&u, 0, sizeof u);
    memset(&key, 0, sizeof key);
    char a[INET_ADDRSTRLEN];
    SYMM_LOG_DEBUG("bootstrap root listens on %s:%d",
                   inet_ntop(AF_INET, &u.addr_be, a, sizeof a) ? a : "?", port);
    return SYMM_SUCCESS;
}

symm_status_t symm__uid_adopt_listener(uint64_t key_id, int *fd) {
    symm_status_t s = SYMM_SUCCESS;
    pthread_mutex_lock(&g_uid_lock);
    if (g_uid_fd < 0 || g_uid_key_id != key_id) {
        s = symm__error(SYMM_ERR_BOOTSTRAP,
                        "rank 0 must call symm_init_with_uid in the process that called "
                        "symm_get_unique_id for this id (and use each id once)");
    } else {
        *fd = g_uid_fd;
        g_uid_fd = -1;
    }
    pthread_mutex_unlock(&g_uid_lock);
    return s;
}

symm_status_t symm__bootstrap_init_uid(const symm_unique_id_t *uid, int rank, int nranks,
                                       symm__bootstrap_t **out) {
    if (!uid || !out)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_init_with_uid: NULL argument");
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_init_with_uid: rank %d of %d is out of range",
                           rank, nranks);
    uid_body_t u;
    symm__key_src_t ks;
    memcpy(&u, uid->internal, sizeof u);
    if (u.magic != SYMM__UID_MAGIC || u.version != SYMM__BS_VERSION || u.check != body_check(&u) ||
        u.port == 0 || u.port > 65535)
        return symm__error(SYMM_ERR_INVALID_ARG,
                           "symm_init_with_uid: not a unique id from symm_get_unique_id (corrupted "
                           "copy or another symm version)");
    memset(&ks, 0, sizeof ks);
    symm__key_set(&ks.key, u.key);
    ks.have = 1;
    memset(u.key, 0, sizeof u.key);
    int listen_fd = -1;
    if (rank == 0) {
        symm_status_t s = symm__uid_adopt_listener(ks.key.id, &listen_fd);
        if (s) {
            symm__key_src_done(&ks);
            return s;
        }
    }
    char addr[INET_ADDRSTRLEN];
    if (!inet_ntop(AF_INET, &u.addr_be, addr, sizeof addr)) {
        if (listen_fd >= 0)
            close(listen_fd);
        symm__key_src_done(&ks);
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_init_with_uid: bad address in the unique id");
    }
    return symm__bootstrap_connect(rank, nranks, &ks, listen_fd, addr, (int)u.port, out);
}
