/*
 * heap.h - the symmetric heap: its address space, the chunks mapped into it,
 * and the offset allocator, for the runtime (which builds the public
 * symm_malloc family on it) and the modules above (collectives, MoE), which
 * allocate their internal buffers here.
 *
 * Layout (docs/design.md decisions 2-3): node PE i's heap starts at
 * slot0 + i * stride in every process; offsets come from one deterministic
 * allocator per PE, so the same calls give the same offsets everywhere.
 * A scale-out backend maps the heap whole instead (backend heap_open,
 * docs/backends.md); the offsets and the allocator stay the same.
 * Calls marked "collective" must be made by every PE with the same
 * arguments; they do not check that (the public calls do, in src/runtime).
 */
#ifndef SYMM_HEAP_H
#define SYMM_HEAP_H

#include <stddef.h>
#include <stdint.h>

#include "symm/symm_types.h"
#include "backend/backend.h"
#include "bootstrap/bootstrap.h"
#include "heap/allocator.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the heap needs from the job; the pointers stay the caller's. */
typedef struct symm__heap_job {
    symm__bootstrap_t *boot; /* the world */
    symm__ipc_t *ipc;        /* descriptor exchange among the node's PEs */
    symm__backend_t *be;
    int n_node, node_me;     /* node size and this PE's index in it */
    size_t limit;            /* SYMM_HEAP_LIMIT (0: the reservation) */
    size_t chunk;            /* SYMM_HEAP_CHUNK (0: the granularity) */
} symm__heap_job_t;

/* One mapped piece of the heap: [off, off + size) on every node PE. */
typedef struct symm__heap_chunk {
    size_t off, size;
    symm__chunk_t *chunk;
} symm__heap_chunk_t;

typedef struct symm__heap {
    symm__heap_job_t job;
    /* [va_base, va_base + va_size) is reserved; node PE i's heap starts at
     * slot0 + i * stride. */
    uintptr_t va_base, slot0;
    size_t va_size, stride;
    size_t limit;             /* most bytes the heap may map (same on every PE) */
    size_t heap_align;        /* every PE's heap base is a multiple of it (a power of two) */
    size_t chunk_bytes;       /* growth step (same on every PE) */
    size_t mapped;            /* bytes mapped per PE, from offset 0 */
    symm__heap_chunk_t *chunks;
    int n_chunks, cap_chunks;
    uint64_t ipc_tag;
    symm__allocator_t *alloc;
    /* this PE's heap, and the world PEs whose copies sit at
     * base + (pe - me) * stride: [ldst_first, ldst_first + ldst_count) */
    uintptr_t base;
    int me, ldst_first, ldst_count;
    int whole;                /* the backend mapped the heap whole (heap_open) */
    /* called on every PE after the mapping grew (the runtime refreshes its
     * device contexts); a failure fails the allocation that grew it */
    symm_status_t (*on_grow)(void *arg);
    void *on_grow_arg;
} symm__heap_t;

extern symm__heap_t symm__heap;

/* The largest alignment symm_align guarantees (heap bases are aligned to
 * it when the stride allows). */
#define SYMM__HEAP_ALIGN_MAX ((size_t)1 << 30)

/* Agree with every PE on stride, granularity, limit and growth step, reserve
 * the address space and create the allocator; nothing is mapped yet.
 * Collective. On failure nothing is left (symm__heap_teardown is a no-op). */
symm_status_t symm__heap_setup(const symm__heap_job_t *job);
/* Unmap every chunk, release the address space and the allocator. Local;
 * safe after a failed or partial setup. */
void symm__heap_teardown(void);

/* This PE's heap base. */
static inline uintptr_t symm__heap_base(void) { return symm__heap.base; }

/* Non-zero when [p, p + n) (n >= 1) lies in this PE's mapped heap; *off
 * (may be NULL) then gets p's offset. */
int symm__heap_offset(const void *p, size_t n, size_t *off);

/* World PE pe's copy of the object at p (in this PE's heap) as this GPU
 * loads and stores it, or NULL when p is outside the heap or pe is not
 * reachable by load/store: the arithmetic inside the window, else the
 * backend's own answer (scale-out backends). */
void *symm__heap_peer(const void *p, int pe);

/* Place `size` bytes aligned to `alignment` (a power of two), grow the
 * mapping if needed, record the block and zero it when asked (every PE's
 * copy is zeroed before any PE returns). Collective. Errors:
 * SYMM_ERR_HEAP_EXHAUSTED, SYMM_ERR_INVALID_ARG, SYMM_ERR_PEER_DIED,
 * SYMM_ERR_CUDA. */
symm_status_t symm__heap_alloc(size_t size, size_t alignment, int zero, size_t *offset);
/* The same as a pointer into this PE's heap (256-byte aligned). */
symm_status_t symm__heap_malloc(size_t size, int zero, void **ptr);
/* Release the block that starts at `p` (symm__heap_malloc's pointer).
 * Collective by convention (every PE frees the same blocks, in the same
 * order) but local: no synchronisation, so no kernel may still use the
 * block. Errors: SYMM_ERR_NOT_SYMMETRIC, SYMM_ERR_INVALID_POINTER. */
symm_status_t symm__heap_release(void *p);

/* Called after every growth (see symm__heap_t.on_grow). */
void symm__heap_set_on_grow(symm_status_t (*fn)(void *arg), void *arg);

/* ---- internal to src/heap -------------------------------------------------------- */

/* Grow the mapping of every node PE to `new_mapped` bytes (collective,
 * all-or-nothing: on failure every PE unmaps what this call mapped). */
symm_status_t symm__heap_grow(size_t new_mapped);
/* Unmap every chunk. Local. */
void symm__heap_unmap_all(void);
/* Agree on a common address for this PE's heap (same pointers on every PE)
 * and reserve the address space. Collective. */
symm_status_t symm__va_setup(void);
void symm__va_release(void);

#ifdef __cplusplus
}
#endif

#endif /* SYMM_HEAP_H */
