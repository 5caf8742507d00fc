/*
 * tcp.c - socket helpers of the bootstrap: every wait is cut into short
 * slices so a dead PE (see liveness.c) ends it, and every send avoids
 * SIGPIPE.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap_internal.h"
#include "core/log.h"

double symm__now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void symm__sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

uint64_t symm__hash64(const void *data, size_t n, uint64_t h) {
    /* FNV-1a, then a final mix so close inputs spread. */
    const unsigned char *p = data;
    if (h == 0)
        h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

uint64_t symm__random64(void) {
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v)
        return v;
    /* No entropy yet (early boot): time and pid still separate two jobs. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t mix[3] = {(uint64_t)ts.tv_sec, (uint64_t)ts.tv_nsec, (uint64_t)getpid()};
    return symm__hash64(mix, sizeof mix, 0);
}

static int dead(symm__bootstrap_t *b) { return b && atomic_load(&b->dead_pe) >= 0; }

enum symm__io symm__wait_fd(symm__bootstrap_t *b, int fd, short events, double deadline) {
    for (;;) {
        if (dead(b))
            return SYMM__IO_DEAD;
        int slice = SYMM__BS_SLICE_MS;
        if (deadline > 0) {
            double left = deadline - symm__now();
            if (left <= 0)
                return SYMM__IO_TIMEOUT;
            if (left * 1000.0 < slice)
                slice = (int)(left * 1000.0) + 1;
        }
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, slice);
        if (r < 0 && errno != EINTR)
            return SYMM__IO_ERR;
        if (r > 0)
            return SYMM__IO_OK; /* readable, writable, or an error/hangup the next call reports */
    }
}

enum symm__io symm__send_all(symm__bootstrap_t *b, int fd, const void *buf, size_t n, double deadline) {
    const char *p = buf;
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && (errno == EINTR))
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            enum symm__io io = symm__wait_fd(b, fd, POLLOUT, deadline);
            if (io != SYMM__IO_OK)
                return io;
            continue;
        }
        if (w < 0 && (errno == EPIPE || errno == ECONNRESET))
            return SYMM__IO_EOF;
        return SYMM__IO_ERR;
    }
    return SYMM__IO_OK;
}

enum symm__io symm__recv_all(symm__bootstrap_t *b, int fd, void *buf, size_t n, double deadline) {
    char *p = buf;
    while (n > 0) {
        ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
            continue;
        }
        if (r == 0)
            return SYMM__IO_EOF;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            enum symm__io io = symm__wait_fd(b, fd, POLLIN, deadline);
            if (io != SYMM__IO_OK)
                return io;
            continue;
        }
        if (errno == ECONNRESET)
            return SYMM__IO_EOF;
        return SYMM__IO_ERR;
    }
    return SYMM__IO_OK;
}

enum symm__io symm__recv_drop(symm__bootstrap_t *b, int fd, uint64_t n, double deadline) {
    char sink[4096];
    while (n > 0) {
        size_t k = n < sizeof sink ? (size_t)n : sizeof sink;
        enum symm__io io = symm__recv_all(b, fd, sink, k, deadline);
        if (io != SYMM__IO_OK)
            return io;
        n -= k;
    }
    return SYMM__IO_OK;
}

void symm__tcp_tune(int fd) {
    int one = 1;
    /* Small request/reply messages: do not wait to coalesce them. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

symm_status_t symm__tcp_listen(uint32_t addr_be, int port, int *fd_out, int *port_out) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return symm__error(SYMM_ERR_BOOTSTRAP, "bootstrap: socket: %s", strerror(errno));
    int one = 1;
    /* A fixed port (env init) must be reusable right after the previous job
     * on it finished (init -> finalize -> init, back-to-back tests). */
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
        int e = errno;
        close(fd);
        return symm__error(SYMM_ERR_BOOTSTRAP, "bootstrap: SO_REUSEADDR: %s", strerror(e));
    }
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = addr_be;
    sa.sin_port = htons((uint16_t)port);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        int e = errno;
        close(fd);
        return symm__error(SYMM_ERR_BOOTSTRAP, "bootstrap: cannot listen on port %d: %s%s", port,
                           strerror(e),
                           e == EADDRINUSE ? " (another job uses it: set SYMM_BOOTSTRAP_PORT)" : "");
    }
    if (listen(fd, SOMAXCONN) != 0) {
        int e = errno;
        close(fd);
        return symm__error(SYMM_ERR_BOOTSTRAP, "bootstrap: listen: %s", strerror(e));
    }
    socklen_t len = sizeof sa;
    if (getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        int e = errno;
        close(fd);
        return symm__error(SYMM_ERR_BOOTSTRAP, "bootstrap: getsockname: %s", strerror(e));
    }
    *port_out = ntohs(sa.sin_port);
    *fd_out = fd;
    return SYMM_SUCCESS;
}

int symm__resolve_ipv4(const char *host, uint32_t *addr_be) {
    struct in_addr a;
    if (inet_pton(AF_INET, host, &a) == 1) {
        *addr_be = a.s_addr;
        return 0;
    }
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res)
        return -1;
    *addr_be = ((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr;
    freeaddrinfo(res);
    return 0;
}

/* One non-blocking connect attempt; 0 connected, 1 refused/unreachable (try
 * again), -1 other error (errno). */
static int try_connect(uint32_t addr_be, int port, double deadline, int *fd_out) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = addr_be;
    sa.sin_port = htons((uint16_t)port);
    int r = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    if (r != 0 && errno == EINPROGRESS) {
        /* Bound the attempt so a dropped SYN does not outlive the deadline. */
        double d = symm__now() + 2.0;
        if (deadline > 0 && deadline < d)
            d = deadline;
        enum symm__io io = symm__wait_fd(NULL, fd, POLLOUT, d);
        if (io != SYMM__IO_OK) {
            close(fd);
            return 1;
        }
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
            err = errno;
        r = err ? -1 : 0;
        errno = err;
    }
    if (r == 0) {
        symm__tcp_tune(fd);
        *fd_out = fd;
        return 0;
    }
    int e = errno;
    close(fd);
    errno = e;
    if (e == ECONNREFUSED || e == ETIMEDOUT || e == EHOSTUNREACH || e == ENETUNREACH ||
        e == ECONNRESET || e == EAGAIN || e == EINTR)
        return 1;
    return -1;
}

/* Has the root already said something (or closed) on `fd`? */
static int readable_now(int fd) {
    if (fd < 0)
        return 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

symm_status_t symm__tcp_connect(const char *host, int port, double deadline, int watch_fd, int *fd) {
    uint32_t addr;
    if (symm__resolve_ipv4(host, &addr) != 0)
        return symm__error(SYMM_ERR_BOOTSTRAP, "bootstrap: cannot resolve root address \"%s\"", host);
    int wait_ms = 10;
    for (;;) {
        int r = try_connect(addr, port, deadline, fd);
        if (r == 0)
            return SYMM_SUCCESS;
        if (r < 0)
            return symm__error(SYMM_ERR_BOOTSTRAP, "bootstrap: connect to %s:%d: %s", host, port,
                               strerror(errno));
        if (readable_now(watch_fd))
            return symm__error(SYMM_ERR_BOOTSTRAP, "bootstrap: the root answered before %s:%d accepted "
                               "the connection", host, port);
        if (deadline > 0 && symm__now() >= deadline)
            return symm__error(SYMM_ERR_TIMEOUT,
                               "bootstrap: could not reach the root at %s:%d before "
                               "SYMM_BOOTSTRAP_TIMEOUT (is rank 0 running?)",
                               host, port);
        symm__sleep_ms(wait_ms);
        if (wait_ms < 200)
            wait_ms *= 2;
    }
}
