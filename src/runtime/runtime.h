/*
 * runtime.h - the process-wide state of an initialised symm, shared by the
 * files of src/runtime (init, teams, heap, barriers).
 */
#ifndef SYMM_RUNTIME_H
#define SYMM_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "symm/symm.h"
#include "backend/backend.h"
#include "bootstrap/bootstrap.h"
#include "core/env.h"
#include "core/log.h"
#include "heap/allocator.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Internal symmetric scratch per team, for the stream collectives. */
#define SYMM__TEAM_SCRATCH_BYTES ((size_t)32 << 20)
/* Barrier words are 64-bit (epochs never wrap). */
#define SYMM__BARRIER_WORD_BYTES 8u

struct symm_team {
    int my_pe, n_pes;
    int *world_pe;            /* world PE of each team PE (ascending) */
    size_t barrier_off;       /* heap offsets of the internal blocks */
    size_t scratch_off;
    symm_ctx_t host_ctx;      /* what d_ctx holds */
    symm_ctx_t *d_ctx;        /* device-visible copy (backend dev_alloc) */
};

/* One mapped piece of the heap: [off, off + size) on every node PE. */
typedef struct symm__heap_chunk {
    size_t off, size;
    symm__chunk_t *chunk;
} symm__heap_chunk_t;

typedef struct symm__runtime {
    int initialized;
    symm__bootstrap_t *boot;
    symm__ipc_t *ipc;
    int rank, nranks;
    int n_node, node_me;
    int *node_ranks;          /* world rank of node PE i */

    symm__backend_t *be;
    volatile uint32_t *abort_host;
    uint64_t abort_dev;

    /* Address space: [va_base, va_base + va_size) is reserved; node PE i's
     * heap starts at slot0 + i * stride. */
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
    struct symm_team world, node;
} symm__runtime_t;

extern symm__runtime_t symm__rt;

/* The largest alignment symm_align guarantees (heap bases are aligned to
 * it when the stride allows). */
#define SYMM__HEAP_ALIGN_MAX ((size_t)1 << 30)

/* This PE's heap base. */
static inline uintptr_t symm__heap_base(void) {
    return symm__rt.slot0 + (uintptr_t)symm__rt.node_me * symm__rt.stride;
}

/* Every PE passes its own status; the result is the same on every PE: success
 * when all succeeded, else the failing PE's status (its own message on that
 * PE, "<what> failed on PE k" elsewhere). If any PE reports `prefer`, that
 * is what everyone returns. */
symm_status_t symm__agree(symm_status_t mine, symm_status_t prefer, const char *what);

/* Wait for this PE's device work; a CUDA failure there (a trapped kernel)
 * is reported to every PE before it is returned (`what` names the call). */
symm_status_t symm__synchronize_or_report(const char *what);

/* Grow the mapping of every node PE to `new_mapped` bytes (collective,
 * all-or-nothing: on failure every PE unmaps what this call mapped). */
symm_status_t symm__heap_grow(size_t new_mapped);
/* Unmap every chunk (finalize, failed init). Local. */
void symm__heap_unmap_all(void);
/* Collective allocation of internal or user blocks: place, grow if needed,
 * commit, zero if asked. Every PE must pass the same arguments. */
symm_status_t symm__heap_alloc(size_t size, size_t alignment, int zero, size_t *offset);

/* Agree on a common address for this PE's heap (same pointers on every PE)
 * and reserve the address space. Collective. */
symm_status_t symm__va_setup(void);
void symm__va_release(void);

/* Teams: build the world and node teams and their device contexts, refresh
 * the contexts after growth, free them. */
symm_status_t symm__teams_create(void);
symm_status_t symm__teams_update_heap_size(void);
void symm__teams_destroy(void);

/* Guard of every public call that needs an initialised runtime. */
#define SYMM__REQUIRE_INIT(what)                                                         \
    do {                                                                                 \
        symm__error_clear();                                                             \
        if (!symm__rt.initialized)                                                       \
            return symm__error(SYMM_ERR_NOT_INITIALIZED, "%s: symm is not initialized",  \
                               what);                                                    \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif /* SYMM_RUNTIME_H */
