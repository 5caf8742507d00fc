/*
 * backend.h - the operations a heap backend provides.
 *
 * The runtime (src/runtime) owns everything collective: it agrees the layout
 * with the other PEs, passes chunk descriptors between them over
 * symm__ipc_allgather_fd, and rolls back on every PE when one fails. A
 * backend only does local work: pick a device, reserve address space, create
 * this PE's piece of a chunk, map every node PE's piece at its slot, and a
 * few device-memory helpers. A new backend fills one symm__backend_ops_t and
 * gets a line in symm/device/backend/list.h; docs/backends.md.
 *
 * Scale-out backends (nvshmem, nccl) sit on the native backend of this PE's
 * GPU (on_native: the registry opens it first and hands it over in
 * args->native) and own the heap whole (heap_open), the peers outside the
 * load/store window (team_open's device state, peer_ptr) and the collectives
 * over them (coll).
 *
 * Layout (docs/design.md decision 2): one reservation per process; node PE i's
 * heap lives at slot0 + i * stride, so a peer address is arithmetic.
 */
#ifndef SYMM_BACKEND_H
#define SYMM_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "symm/symm.h"
#include "symm/device/backend/list.h"
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
    uint32_t caps;       /* enum symm_backend_cap: what this backend does here */
} symm__backend_t;

/* What open() needs to know about the job. */
typedef struct symm__backend_args {
    symm__bootstrap_t *boot;   /* world bootstrap, for open()'s own exchange */
    const int *node_ranks;     /* world rank of node PE i */
    int n_node, node_me;       /* node size and this PE's index in it */
    int local_rank;            /* launcher's LOCAL_RANK, else node_me: picks the GPU */
    size_t heap_reserve;       /* SYMM_HEAP_RESERVE (0: backend default) */
    const char *deny_peer;     /* SYMM_DEBUG_DENY_PEER ("" for none) */
    symm__backend_t *native;   /* for on_native backends: the native backend of this PE's
                                  GPU, opened by the registry; theirs from open() on */
} symm__backend_args_t;

/* Where a heap_open backend put the heap: this PE's copy at `base`, `size`
 * bytes (mapped whole, never grown), and the world PEs [ldst_first,
 * ldst_first + ldst_count) whose copies sit at base + (pe - me) * stride. */
typedef struct symm__heap_place {
    uintptr_t base;
    size_t size;
    size_t stride;
    int ldst_first, ldst_count;
} symm__heap_place_t;

/* A team as team_open sees it: team PE i is world PE world_pe[i]. */
typedef struct symm__team_desc {
    int n_pes, my_pe;
    const int *world_pe;
    int is_world;
} symm__team_desc_t;

/* What team_open makes: the device address of the team's backend state
 * (symm_ctx_t.backend_state) and the team's load/store window. */
typedef struct symm__team_backend {
    uint64_t state;
    int32_t ldst_first, ldst_count;
} symm__team_backend_t;

/* A stream collective handed to the backend (its team has a PE outside the
 * load/store window). Arguments are checked; count is per the public call. */
enum {
    SYMM__BE_COLL_ALL_REDUCE = 0,
    SYMM__BE_COLL_REDUCE_SCATTER,
    SYMM__BE_COLL_ALL_GATHER,
    SYMM__BE_COLL_ALL_TO_ALL,
    SYMM__BE_COLL_BROADCAST
};
typedef struct symm__be_coll {
    const char *what;        /* the public call, for messages */
    int kind;                /* SYMM__BE_COLL_* */
    const void *send;
    void *recv;
    size_t count;            /* elements, as the public call counts them */
    size_t esize;            /* bytes per element */
    int dtype, op, root;     /* symm_dtype_t, symm_redop_t; root for broadcast */
    int acc_default;         /* the accumulator is the type's default */
    int send_in_heap, recv_in_heap;
    const symm_ctx_t *h_ctx; /* the team */
} symm__be_coll_t;

/* Which of libsymm's own GPU kernels may run over a backend's heap: fixed
 * per backend (ops->kernel_caps), asked by the modules above the runtime
 * instead of the backend's name. The public enum symm_backend_cap says what
 * the user's device calls and the library's collectives do in one run (the
 * nvshmem backend drops SYMM_CAP_COLL when PEs share a GPU without MPS, while
 * symm's collective kernels still run there), so it is not this. */
enum symm__be_kernel_cap {
    SYMM__BE_KCAP_COLL  = 0x1u, /* stream collectives: symm's kernels on teams inside the load/store
                                   window, the backend's coll for the others */
    SYMM__BE_KCAP_MOE   = 0x2u, /* MoE exchange: its kernels store to every team PE at the heap's
                                   stride (the whole team in one load/store window) */
    SYMM__BE_KCAP_TRACE = 0x4u  /* device trace: a GPU whose clocks the trace reads and aligns */
};

struct symm__backend_ops {
    const char *name;
    uint32_t kind;        /* enum symm_backend_kind */
    int on_native;        /* opened on top of the native backend (args->native) */
    int multi_node;       /* may span several nodes */
    uint32_t kernel_caps; /* enum symm__be_kernel_cap */

    /* Optional: open the backend's library before anything else, so that a
     * machine without it says so (and not "no GPU" first). Local. */
    symm_status_t (*load)(void);

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

    /* The module of a CUDA function (a CUfunction), for module set-up
     * (symm_backend_module_source). Native: cuFuncGetModule. */
    symm_status_t (*function_module)(symm__backend_t *be, void *function, void **module);
    /* *found = whether a loaded module defines the global `name`. */
    symm_status_t (*module_has_global)(symm__backend_t *be, void *module, const char *name, int *found);

    /* ---- optional: NULL for the native and host backends ---- */

    /* Map a heap of `size` bytes (0: the backend's default) on every PE at
     * once, and say where (replaces reserve/chunk_*). Collective, the same
     * status on every PE. heap_close forgets it (local; close releases). */
    symm_status_t (*heap_open)(symm__backend_t *be, size_t size, symm__heap_place_t *out);
    void (*heap_close)(symm__backend_t *be);
    /* World PE pe's copy of the heap object at p as this GPU may load and
     * store it, for a PE outside the window, or NULL (symm_ptr). Local. */
    void *(*peer_ptr)(symm__backend_t *be, const void *p, int world_pe);
    /* A team's device state and load/store window. Local (collective
     * library state is made at open/heap_open). */
    symm_status_t (*team_open)(symm__backend_t *be, const symm__team_desc_t *team, symm__team_backend_t *out);
    void (*team_close)(symm__backend_t *be, symm__team_backend_t *tb);
    /* A stream collective through the library. Collective. */
    symm_status_t (*coll)(symm__backend_t *be, const symm__be_coll_t *c, symm_stream_t stream);
    /* Make a loaded module able to use the backend's device library. */
    symm_status_t (*module_init)(symm__backend_t *be, void *module);
};

/* Open the backend `ops` (after the native one for on_native backends).
 * Collective, like ops->open. */
symm_status_t symm__backend_open(const symm__backend_ops_t *ops, const symm__backend_args_t *args,
                                 symm__backend_t **out);

/* The backend called `name` (a name of symm/device/backend/list.h), or NULL. */
const symm__backend_ops_t *symm__backend_find(const char *name);

/* The backends of symm/device/backend/list.h: symm__backend_<name>_ops,
 * defined in src/backend/<name>/. */
#define SYMM__X(name, ...) extern const symm__backend_ops_t symm__backend_##name##_ops;
SYMM__BACKEND_LIST(SYMM__X)
#undef SYMM__X

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
