/*
 * backend.h - the operations a heap backend provides.
 *
 * The runtime (src/runtime) owns everything collective: it agrees the layout
 * with the other PEs, passes chunk descriptors between them over
 * symm__ipc_allgather_fd, and rolls back on every PE when one fails. A
 * backend only does local work: pick a device, reserve address space, create
 * this PE's piece of a chunk, map every node PE's piece at its slot, and a
 * few device-memory helpers. A new backend fills one symm__backend_ops_t and
 * adds itself to symm__backend_find (registry.c).
 *
 * Layout (docs/design.md decision 2): one reservation per process; node PE i's
 * heap lives at slot0 + i * stride, so a peer address is arithmetic.
 */
#ifndef SYMM_BACKEND_H
#define SYMM_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "symm/symm.h"
#include "bootstrap/bootstrap.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct symm__backend_ops symm__backend_ops_t;
typedef struct symm__chunk symm__chunk_t; /* defined by each backend */

/* Every backend's state starts with this header. */
typedef struct symm__backend {
    const symm__backend_ops_t *ops;
    int device;          /* CUDA ordinal, -1 for none */
    size_t granularity;  /* chunk sizes and offsets are multiples of it */
    size_t stride_hint;  /* this PE's preferred stride (the runtime takes the max) */
    int gpu_pes;         /* node PEs on this PE's GPU, itself included (1: a GPU of its own) */
    int sm_share;        /* SMs a grid of one PE that waits on peers may fill; the same on
                            every PE (the least over them); 0 without a GPU */
} symm__backend_t;

/* What open() needs to know about the job. */
typedef struct symm__backend_args {
    symm__bootstrap_t *boot;   /* world bootstrap, for open()'s own exchange */
    const int *node_ranks;     /* world rank of node PE i */
    int n_node, node_me;       /* node size and this PE's index in it */
    int local_rank;            /* launcher's LOCAL_RANK, else node_me: picks the GPU */
    size_t heap_reserve;       /* SYMM_HEAP_RESERVE (0: backend default) */
    const char *deny_peer;     /* SYMM_DEBUG_DENY_PEER ("" for none) */
} symm__backend_args_t;

struct symm__backend_ops {
    const char *name;
    uint32_t kind; /* enum symm_backend_kind */

    /* Choose and set up this PE's device and check that every pair of node
     * PEs can reach each other's memory. Collective over the world (it may
     * exchange over args->boot), and its status is the same on every PE. */
    symm_status_t (*open)(const symm__backend_args_t *args, symm__backend_t **out);
    /* Release what open() made; chunks and reservations are gone already. */
    void (*close)(symm__backend_t *be);

    /* Reserve `size` bytes of address space, at `hint` when it is non-zero
     * and free (else anywhere aligned to `align`, a power of two at least the
     * granularity; *addr then says where). Local. */
    symm_status_t (*reserve)(symm__backend_t *be, size_t size, uintptr_t hint, size_t align, uintptr_t *addr);
    void (*unreserve)(symm__backend_t *be, uintptr_t addr, size_t size);

    /* Create this PE's piece of a new chunk (`size` bytes of memory) and a
     * close-on-exec file descriptor that shares it. Out of memory is
     * SYMM_ERR_HEAP_EXHAUSTED. Local. */
    symm_status_t (*chunk_create)(symm__backend_t *be, size_t size, symm__chunk_t **out);
    int (*chunk_fd)(const symm__chunk_t *c);
    /* Map node PE i's piece (from fds[i]; for i == me the chunk's own
     * memory, fds[me] unused) at addrs[i] and make it readable and writable
     * here, for i in [0, n).
     * Local; on failure the pieces mapped so far stay recorded in the chunk,
     * for chunk_destroy. The caller keeps ownership of fds. On success the
     * chunk's own descriptor (chunk_fd) is closed: the exchange is over. */
    symm_status_t (*chunk_map)(symm__backend_t *be, symm__chunk_t *c, const uintptr_t *addrs,
                               const int *fds, int n, int me);
    /* Unmap every mapped piece (the address space stays reserved), release
     * the memory and close the chunk's descriptor. NULL is a no-op. */
    void (*chunk_destroy)(symm__backend_t *be, symm__chunk_t *c);

    /* Small memory the device reads (team contexts): allocate zeroed, write
     * from the host, free. */
    symm_status_t (*dev_alloc)(symm__backend_t *be, size_t size, void **dptr);
    symm_status_t (*dev_write)(symm__backend_t *be, void *dptr, const void *src, size_t size);
    void (*dev_free)(symm__backend_t *be, void *dptr);

    /* A host-mapped uint32 the host raises and device waits poll: *host is
     * the host address, *dev the address kernels use. */
    symm_status_t (*flag_alloc)(symm__backend_t *be, volatile uint32_t **host, uint64_t *dev);
    void (*flag_free)(symm__backend_t *be, volatile uint32_t *host);

    /* Fill / copy heap memory (this PE's addresses) and wait for it. */
    symm_status_t (*memset_sync)(symm__backend_t *be, void *ptr, int value, size_t size);
    symm_status_t (*memcpy_sync)(symm__backend_t *be, void *dst, const void *src, size_t size);
    /* Wait for all of this PE's device work. */
    symm_status_t (*synchronize)(symm__backend_t *be);
    /* Has this PE's device failed for good (a sticky CUDA error: a kernel
     * trapped or faulted)? Non-zero with a reason; never blocks; called from
     * the bootstrap's watcher thread. NULL: a backend that cannot fail so. */
    int (*health)(symm__backend_t *be, char *why, size_t size);

    /* A barrier over the team of `h_ctx` ordered on `stream` (see
     * symm_team_barrier_on_stream); d_ctx is the same context as kernels see it. */
    symm_status_t (*barrier_on_stream)(symm__backend_t *be, const symm_ctx_t *d_ctx,
                                       const symm_ctx_t *h_ctx, symm_stream_t stream);
};

/* The backend called `name` ("native", "host"), or NULL. */
const symm__backend_ops_t *symm__backend_find(const char *name);

/* The backends, for registry.c. */
extern const symm__backend_ops_t symm__backend_native_ops;
extern const symm__backend_ops_t symm__backend_host_ops;

/* Parse SYMM_DEBUG_DENY_PEER ("i:j"): 1 and *i, *j when set and valid, 0 when
 * empty, -1 when malformed. */
int symm__parse_deny_peer(const char *text, int *i, int *j);

/* Host-side barrier over a team's barrier words in CPU-visible shared memory
 * (host backend). Honours ctx->timeout_ns and the abort flag. */
symm_status_t symm__host_team_barrier(const symm_ctx_t *ctx);

#ifdef __cplusplus
}
#endif

#endif /* SYMM_BACKEND_H */
