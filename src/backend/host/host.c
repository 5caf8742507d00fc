/*
 * host.c - the host backend: the native backend's layout in CPU memory.
 *
 * Each chunk is a memfd (shared by its descriptor like a CUDA VMM handle)
 * mapped MAP_SHARED|MAP_FIXED into every PE's slot of a PROT_NONE
 * reservation, so the runtime above (allocation, growth, rollback, teams,
 * pointer arithmetic) runs unchanged in CI, where there is no GPU.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/log.h"

/* Default stride when SYMM_HEAP_RESERVE is 0: address space only. */
#define SYMM__HOST_DEFAULT_STRIDE ((size_t)16 << 30)

typedef struct symm__host_backend {
    symm__backend_t base;
} symm__host_backend_t;

struct symm__chunk {
    int fd;
    size_t size;
    int n_mapped;
    uintptr_t *mapped; /* addresses mapped so far */
};

static symm_status_t host_open(const symm__backend_args_t *args, symm__backend_t **out) {
    int di, dj;
    if (symm__parse_deny_peer(args->deny_peer, &di, &dj) < 0)
        return symm__error(SYMM_ERR_ENV, "SYMM_DEBUG_DENY_PEER='%s' is not 'i:j'", args->deny_peer);
    /* CPU memory is shared by every process of the node, so the only way
     * two PEs lack access is the test hook; honouring it here lets CI check
     * the error path the native backend takes. */
    if (symm__parse_deny_peer(args->deny_peer, &di, &dj) > 0 && di != dj && di < args->n_node &&
        dj < args->n_node)
        return symm__error(SYMM_ERR_NO_PEER_ACCESS,
                           "PE %d and PE %d cannot access each other's memory "
                           "(host backend, denied by SYMM_DEBUG_DENY_PEER=%s)",
                           args->node_ranks[di], args->node_ranks[dj], args->deny_peer);
    symm__host_backend_t *hb = calloc(1, sizeof(*hb));
    if (!hb)
        return symm__error(SYMM_ERR_NO_MEMORY, "host backend: out of host memory");
    long page = sysconf(_SC_PAGESIZE);
    hb->base.ops = &symm__backend_host_ops;
    hb->base.device = -1;
    hb->base.granularity = page > 0 ? (size_t)page : 4096;
    hb->base.stride_hint = args->heap_reserve ? args->heap_reserve : SYMM__HOST_DEFAULT_STRIDE;
    hb->base.gpu_pes = 1;
    hb->base.sm_share = 0; /* no GPU */
    *out = &hb->base;
    return SYMM_SUCCESS;
}

static void host_close(symm__backend_t *be) { free(be); }

static symm_status_t host_reserve(symm__backend_t *be, size_t size, uintptr_t hint, size_t align,
                                  uintptr_t *addr) {
    (void)be;
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    if (hint)
        flags |= MAP_FIXED_NOREPLACE;
    else if (align > 1 && size <= SIZE_MAX - align) {
        /* anywhere, aligned: reserve `align` more, give back both ends */
        void *q = mmap(NULL, size + align, PROT_NONE, flags, -1, 0);
        if (q == MAP_FAILED)
            return symm__error(SYMM_ERR_NO_MEMORY, "reserving %zu bytes of address space: %s", size + align,
                               strerror(errno));
        uintptr_t a = ((uintptr_t)q + align - 1) & ~(uintptr_t)(align - 1);
        if (a > (uintptr_t)q)
            munmap(q, a - (uintptr_t)q);
        if ((uintptr_t)q + size + align > a + size)
            munmap((void *)(a + size), (uintptr_t)q + size + align - (a + size));
        *addr = a;
        return SYMM_SUCCESS;
    }
    void *p = mmap((void *)hint, size, PROT_NONE, flags, -1, 0);
    /* A taken hint is an expected answer while the runtime looks for a
     * common address, so it is not logged as an error. */
    if (p == MAP_FAILED && hint)
        return SYMM_ERR_NO_MEMORY;
    if (p == MAP_FAILED)
        return symm__error(SYMM_ERR_NO_MEMORY, "reserving %zu bytes of address space: %s", size,
                           strerror(errno));
    if (hint && (uintptr_t)p != hint) { /* a kernel without MAP_FIXED_NOREPLACE */
        munmap(p, size);
        return SYMM_ERR_NO_MEMORY;
    }
    *addr = (uintptr_t)p;
    return SYMM_SUCCESS;
}

static void host_unreserve(symm__backend_t *be, uintptr_t addr, size_t size) {
    (void)be;
    if (munmap((void *)addr, size) != 0)
        SYMM_LOG_WARN("munmap of the heap reservation failed: %s", strerror(errno));
}

static symm_status_t host_chunk_create(symm__backend_t *be, size_t size, symm__chunk_t **out) {
    (void)be;
    symm__chunk_t *c = calloc(1, sizeof(*c));
    if (!c)
        return symm__error(SYMM_ERR_NO_MEMORY, "host chunk: out of host memory");
    c->fd = memfd_create("symm-heap", MFD_CLOEXEC);
    if (c->fd < 0) {
        int e = errno;
        free(c);
        return symm__error(SYMM_ERR_HEAP_EXHAUSTED, "memfd_create: %s", strerror(e));
    }
    /* EFBIG (RLIMIT_FSIZE), ENOSPC, ENOMEM: memory is what is short. */
    if (ftruncate(c->fd, (off_t)size) != 0) {
        int e = errno;
        close(c->fd);
        free(c);
        return symm__error(SYMM_ERR_HEAP_EXHAUSTED, "growing a %zu-byte heap chunk: %s", size,
                           strerror(e));
    }
    c->size = size;
    *out = c;
    return SYMM_SUCCESS;
}

static int host_chunk_fd(const symm__chunk_t *c) { return c->fd; }

static symm_status_t host_chunk_map(symm__backend_t *be, symm__chunk_t *c, const uintptr_t *addrs,
                                    const int *fds, int n, int me) {
    (void)be;
    c->mapped = calloc((size_t)n, sizeof(uintptr_t));
    if (!c->mapped)
        return symm__error(SYMM_ERR_NO_MEMORY, "host chunk: out of host memory");
    for (int i = 0; i < n; i++) {
        void *p = mmap((void *)addrs[i], c->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                       i == me ? c->fd : fds[i], 0);
        if (p == MAP_FAILED)
            return symm__error(SYMM_ERR_HEAP_EXHAUSTED, "mapping node PE %d's heap chunk: %s", i,
                               strerror(errno));
        c->mapped[c->n_mapped++] = addrs[i];
    }
    /* The peers have their copies and the mappings keep the memory: the
     * descriptor would only be one more handle on this PE's heap. */
    close(c->fd);
    c->fd = -1;
    return SYMM_SUCCESS;
}

static void host_chunk_destroy(symm__backend_t *be, symm__chunk_t *c) {
    (void)be;
    if (!c)
        return;
    for (int i = 0; i < c->n_mapped; i++) {
        /* Put the reservation back rather than leaving a hole someone else
         * could map into. */
        void *p = mmap((void *)c->mapped[i], c->size, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        if (p == MAP_FAILED)
            SYMM_LOG_WARN("unmapping a heap chunk: %s", strerror(errno));
    }
    free(c->mapped);
    if (c->fd >= 0)
        close(c->fd);
    free(c);
}

static symm_status_t host_dev_alloc(symm__backend_t *be, size_t size, void **dptr) {
    (void)be;
    void *p = calloc(1, size);
    if (!p)
        return symm__error(SYMM_ERR_NO_MEMORY, "out of host memory (%zu bytes)", size);
    *dptr = p;
    return SYMM_SUCCESS;
}

static symm_status_t host_dev_write(symm__backend_t *be, void *dptr, const void *src, size_t size) {
    (void)be;
    memcpy(dptr, src, size);
    return SYMM_SUCCESS;
}

static void host_dev_free(symm__backend_t *be, void *dptr) {
    (void)be;
    free(dptr);
}

static symm_status_t host_flag_alloc(symm__backend_t *be, volatile uint32_t **host, uint64_t *dev) {
    (void)be;
    uint32_t *f = calloc(1, sizeof(uint32_t));
    if (!f)
        return symm__error(SYMM_ERR_NO_MEMORY, "out of host memory");
    *host = f;
    *dev = (uint64_t)(uintptr_t)f;
    return SYMM_SUCCESS;
}

static void host_flag_free(symm__backend_t *be, volatile uint32_t *host) {
    (void)be;
    free((void *)(uintptr_t)host);
}

static symm_status_t host_memset_sync(symm__backend_t *be, void *ptr, int value, size_t size) {
    (void)be;
    memset(ptr, value, size);
    return SYMM_SUCCESS;
}

static symm_status_t host_memcpy_sync(symm__backend_t *be, void *dst, const void *src, size_t size) {
    (void)be;
    memmove(dst, src, size);
    return SYMM_SUCCESS;
}

static symm_status_t host_synchronize(symm__backend_t *be) {
    (void)be;
    return SYMM_SUCCESS;
}

/* No device: the "stream" is the calling thread, so the barrier runs here. */
static symm_status_t host_barrier_on_stream(symm__backend_t *be, const symm_ctx_t *d_ctx,
                                            const symm_ctx_t *h_ctx, symm_stream_t stream) {
    (void)be;
    (void)h_ctx;
    (void)stream;
    return symm__host_team_barrier(d_ctx);
}

const symm__backend_ops_t symm__backend_host_ops = {
    .name = "host",
    .kind = SYMM_BACKEND_HOST,
    .kernel_caps = 0, /* no GPU: libsymm's kernels have nowhere to run */
    .open = host_open,
    .close = host_close,
    .reserve = host_reserve,
    .unreserve = host_unreserve,
    .chunk_create = host_chunk_create,
    .chunk_fd = host_chunk_fd,
    .chunk_map = host_chunk_map,
    .chunk_destroy = host_chunk_destroy,
    .dev_alloc = host_dev_alloc,
    .dev_write = host_dev_write,
    .dev_free = host_dev_free,
    .flag_alloc = host_flag_alloc,
    .flag_free = host_flag_free,
    .memset_sync = host_memset_sync,
    .memcpy_sync = host_memcpy_sync,
    .synchronize = host_synchronize,
    .barrier_on_stream = host_barrier_on_stream,
};
