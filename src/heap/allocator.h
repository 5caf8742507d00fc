/*
 * allocator.h - the deterministic offset allocator behind the symmetric heap.
 *
 * It hands out offsets in [0, limit) and knows nothing about memory: the
 * runtime maps whatever the offsets need. Every PE runs the same sequence of
 * calls on its own instance, so the same sequence gives the same offsets on
 * every PE (docs/design.md decision 3): the allocator depends on nothing but its
 * call history. Pure C, no CUDA, no logging: it returns a status and the
 * caller words the message.
 *
 * First fit over a free list kept sorted by offset (lowest offset wins, so
 * the heap stays compact and grows only when it must); freed blocks coalesce
 * with their neighbours. Live blocks are recorded, so freeing an offset that
 * is not the start of a live block is detected.
 */
#ifndef SYMM_HEAP_ALLOCATOR_H
#define SYMM_HEAP_ALLOCATOR_H

#include <stddef.h>
#include "symm/symm_types.h"

/* Smallest alignment and size unit: every block starts and ends on it. */
#define SYMM__ALLOC_MIN_ALIGN ((size_t)256)

typedef struct symm__allocator symm__allocator_t;

/* A new allocator over [0, limit) (limit rounded down to the unit).
 * Errors: SYMM_ERR_INVALID_ARG (limit below one unit), SYMM_ERR_NO_MEMORY. */
symm_status_t symm__alloc_create(size_t limit, symm__allocator_t **out);
void symm__alloc_destroy(symm__allocator_t *a);

/* Where symm__alloc_commit would put a block of `size` bytes aligned to
 * `alignment` (a power of two; below the unit means the unit), without
 * changing anything. This lets the runtime map memory first and commit
 * only once every PE succeeded.
 * Errors: SYMM_ERR_INVALID_ARG (size 0, bad alignment), SYMM_ERR_HEAP_EXHAUSTED. */
symm_status_t symm__alloc_place(const symm__allocator_t *a, size_t size, size_t alignment,
                                size_t *offset);

/* Record the block that symm__alloc_place just returned for these arguments.
 * Errors: SYMM_ERR_INVALID_ARG (not a free, unit-aligned range),
 * SYMM_ERR_NO_MEMORY. */
symm_status_t symm__alloc_commit(symm__allocator_t *a, size_t offset, size_t size);

/* place + commit. */
symm_status_t symm__alloc_alloc(symm__allocator_t *a, size_t size, size_t alignment, size_t *offset);

/* Release the block starting at `offset`; *size (may be NULL) gets its
 * rounded size. Errors: SYMM_ERR_INVALID_POINTER when `offset` is not the
 * start of a live block (never allocated, already freed, or inside one). */
symm_status_t symm__alloc_free(symm__allocator_t *a, size_t offset, size_t *size);

/* Non-zero when a live block contains `offset`; its start and size then go to
 * *start / *size (each may be NULL). */
int symm__alloc_lookup(const symm__allocator_t *a, size_t offset, size_t *start, size_t *size);

size_t symm__alloc_limit(const symm__allocator_t *a);
size_t symm__alloc_live_blocks(const symm__allocator_t *a);
size_t symm__alloc_live_bytes(const symm__allocator_t *a);
/* Highest end offset a live block has ever had. */
size_t symm__alloc_high_water(const symm__allocator_t *a);
/* Number of free ranges (1 for an empty heap: shows coalescing). */
size_t symm__alloc_free_ranges(const symm__allocator_t *a);

#endif /* SYMM_HEAP_ALLOCATOR_H */
