/*
 * allocator.c - first-fit offset allocator with coalescing (see allocator.h).
 *
 * Two arrays of ranges sorted by offset: the free ranges and the live blocks.
 * Heaps hold tens to thousands of blocks, so O(n) inserts are cheap, and
 * plain arrays keep the behaviour obviously deterministic.
 */
#include "heap/allocator.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct symm__range {
    size_t off, len;
} symm__range_t;

typedef struct symm__range_vec {
    symm__range_t *v;
    size_t n, cap;
} symm__range_vec_t;

struct symm__allocator {
    size_t limit;
    symm__range_vec_t free_list; /* disjoint, sorted, never adjacent (coalesced) */
    symm__range_vec_t live;      /* sorted by offset */
    size_t live_bytes;
    size_t high_water;
};

static int is_pow2(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

/* Round up to a multiple of `a` (a power of two); 0 on overflow. */
static size_t round_up(size_t x, size_t a) {
    if (x > SIZE_MAX - (a - 1))
        return 0;
    return (x + a - 1) & ~(a - 1);
}

static int vec_reserve(symm__range_vec_t *vec, size_t need) {
    if (need <= vec->cap)
        return 0;
    size_t cap = vec->cap ? vec->cap * 2 : 16;
    while (cap < need)
        cap *= 2;
    symm__range_t *nv = realloc(vec->v, cap * sizeof(*nv));
    if (!nv)
        return -1;
    vec->v = nv;
    vec->cap = cap;
    return 0;
}

static void vec_remove(symm__range_vec_t *vec, size_t i) {
    memmove(&vec->v[i], &vec->v[i + 1], (vec->n - i - 1) * sizeof(vec->v[0]));
    vec->n--;
}

/* Insert at index i; the caller reserved room. */
static void vec_insert(symm__range_vec_t *vec, size_t i, symm__range_t r) {
    memmove(&vec->v[i + 1], &vec->v[i], (vec->n - i) * sizeof(vec->v[0]));
    vec->v[i] = r;
    vec->n++;
}

/* Index of the first range whose offset is > off (upper bound). */
static size_t upper_bound(const symm__range_vec_t *vec, size_t off) {
    size_t lo = 0, hi = vec->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (vec->v[mid].off <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

symm_status_t symm__alloc_create(size_t limit, symm__allocator_t **out) {
    if (!out)
        return SYMM_ERR_INVALID_ARG;
    limit &= ~(SYMM__ALLOC_MIN_ALIGN - 1);
    if (limit == 0)
        return SYMM_ERR_INVALID_ARG;
    symm__allocator_t *a = calloc(1, sizeof(*a));
    if (!a)
        return SYMM_ERR_NO_MEMORY;
    if (vec_reserve(&a->free_list, 1) != 0) {
        free(a);
        return SYMM_ERR_NO_MEMORY;
    }
    a->limit = limit;
    a->free_list.v[0] = (symm__range_t){0, limit};
    a->free_list.n = 1;
    *out = a;
    return SYMM_SUCCESS;
}

void symm__alloc_destroy(symm__allocator_t *a) {
    if (!a)
        return;
    free(a->free_list.v);
    free(a->live.v);
    free(a);
}

symm_status_t symm__alloc_place(const symm__allocator_t *a, size_t size, size_t alignment,
                                size_t *offset) {
    if (!a || !offset || size == 0)
        return SYMM_ERR_INVALID_ARG;
    if (alignment < SYMM__ALLOC_MIN_ALIGN)
        alignment = SYMM__ALLOC_MIN_ALIGN;
    if (!is_pow2(alignment))
        return SYMM_ERR_INVALID_ARG;
    size_t len = round_up(size, SYMM__ALLOC_MIN_ALIGN);
    if (len == 0 || len > a->limit)
        return SYMM_ERR_HEAP_EXHAUSTED;
    for (size_t i = 0; i < a->free_list.n; i++) {
        const symm__range_t *r = &a->free_list.v[i];
        size_t start = round_up(r->off, alignment);
        if (start == 0 && r->off != 0)
            continue; /* alignment overflowed */
        size_t end = r->off + r->len;
        if (start < end && end - start >= len) {
            *offset = start;
            return SYMM_SUCCESS;
        }
    }
    return SYMM_ERR_HEAP_EXHAUSTED;
}

symm_status_t symm__alloc_commit(symm__allocator_t *a, size_t offset, size_t size) {
    if (!a || size == 0 || (offset & (SYMM__ALLOC_MIN_ALIGN - 1)) != 0)
        return SYMM_ERR_INVALID_ARG;
    size_t len = round_up(size, SYMM__ALLOC_MIN_ALIGN);
    if (len == 0)
        return SYMM_ERR_INVALID_ARG;
    /* The free range that holds [offset, offset + len). */
    size_t i = upper_bound(&a->free_list, offset);
    if (i == 0)
        return SYMM_ERR_INVALID_ARG;
    i--;
    symm__range_t r = a->free_list.v[i];
    if (offset < r.off || offset - r.off > r.len || r.len - (offset - r.off) < len)
        return SYMM_ERR_INVALID_ARG;
    /* Room for the worst case before touching anything: one more free range
     * (split in the middle) and one more live block. */
    if (vec_reserve(&a->free_list, a->free_list.n + 1) != 0 ||
        vec_reserve(&a->live, a->live.n + 1) != 0)
        return SYMM_ERR_NO_MEMORY;
    symm__range_t left = {r.off, offset - r.off};
    symm__range_t right = {offset + len, r.off + r.len - (offset + len)};
    vec_remove(&a->free_list, i);
    if (right.len)
        vec_insert(&a->free_list, i, right);
    if (left.len)
        vec_insert(&a->free_list, i, left);
    vec_insert(&a->live, upper_bound(&a->live, offset), (symm__range_t){offset, len});
    a->live_bytes += len;
    if (offset + len > a->high_water)
        a->high_water = offset + len;
    return SYMM_SUCCESS;
}

symm_status_t symm__alloc_alloc(symm__allocator_t *a, size_t size, size_t alignment, size_t *offset) {
    size_t off;
    symm_status_t st = symm__alloc_place(a, size, alignment, &off);
    if (st != SYMM_SUCCESS)
        return st;
    st = symm__alloc_commit(a, off, size);
    if (st != SYMM_SUCCESS)
        return st;
    *offset = off;
    return SYMM_SUCCESS;
}

symm_status_t symm__alloc_free(symm__allocator_t *a, size_t offset, size_t *size) {
    if (!a)
        return SYMM_ERR_INVALID_ARG;
    size_t i = upper_bound(&a->live, offset);
    if (i == 0 || a->live.v[i - 1].off != offset)
        return SYMM_ERR_INVALID_POINTER;
    symm__range_t blk = a->live.v[i - 1];
    /* Coalesce with the free neighbours; at most one range is added. */
    if (vec_reserve(&a->free_list, a->free_list.n + 1) != 0)
        return SYMM_ERR_NO_MEMORY;
    vec_remove(&a->live, i - 1);
    a->live_bytes -= blk.len;
    size_t j = upper_bound(&a->free_list, blk.off); /* first free range after blk */
    int merge_prev = j > 0 && a->free_list.v[j - 1].off + a->free_list.v[j - 1].len == blk.off;
    int merge_next = j < a->free_list.n && blk.off + blk.len == a->free_list.v[j].off;
    if (merge_prev && merge_next) {
        a->free_list.v[j - 1].len += blk.len + a->free_list.v[j].len;
        vec_remove(&a->free_list, j);
    } else if (merge_prev) {
        a->free_list.v[j - 1].len += blk.len;
    } else if (merge_next) {
        a->free_list.v[j].off = blk.off;
        a->free_list.v[j].len += blk.len;
    } else {
        vec_insert(&a->free_list, j, blk);
    }
    if (size)
        *size = blk.len;
    return SYMM_SUCCESS;
}

int symm__alloc_lookup(const symm__allocator_t *a, size_t offset, size_t *start, size_t *size) {
    if (!a)
        return 0;
    size_t i = upper_bound(&a->live, offset);
    if (i == 0)
        return 0;
    const symm__range_t *b = &a->live.v[i - 1];
    if (offset - b->off >= b->len)
        return 0;
    if (start)
        *start = b->off;
    if (size)
        *size = b->len;
    return 1;
}

size_t symm__alloc_limit(const symm__allocator_t *a) { return a ? a->limit : 0; }
size_t symm__alloc_live_blocks(const symm__allocator_t *a) { return a ? a->live.n : 0; }
size_t symm__alloc_live_bytes(const symm__allocator_t *a) { return a ? a->live_bytes : 0; }
size_t symm__alloc_high_water(const symm__allocator_t *a) { return a ? a->high_water : 0; }
size_t symm__alloc_free_ranges(const symm__allocator_t *a) { return a ? a->free_list.n : 0; }
