/*
 * test_allocator.c - unit tests of the offset allocator (src/heap/allocator.c):
 * alignment, coalescing, fragmentation, determinism, bad frees, exhaustion,
 * and a randomised run checked against a brute-force model.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symm_test.h"
#include "heap/allocator.h"

#define MiB ((size_t)1 << 20)

#define ALLOC_OK(a, size, align, off)                                                   \
    do {                                                                                \
        symm_status_t st__ = symm__alloc_alloc((a), (size), (align), (off));            \
        TEST_ASSERT(st__ == SYMM_SUCCESS, "alloc(%zu, %zu) -> %d", (size_t)(size),       \
                    (size_t)(align), (int)st__);                                        \
    } while (0)

static symm__allocator_t *make(size_t limit) {
    symm__allocator_t *a = NULL;
    TEST_ASSERT(symm__alloc_create(limit, &a) == SYMM_SUCCESS && a, "create(%zu)", limit);
    return a;
}

static void test_basic_and_alignment(void) {
    symm__allocator_t *a = make(64 * MiB);
    size_t o1, o2, o3;
    ALLOC_OK(a, 1, 0, &o1);
    TEST_ASSERT(o1 == 0, "first block at 0, got %zu", o1);
    ALLOC_OK(a, 1, 0, &o2);
    TEST_ASSERT(o2 == 256, "second 1-byte block rounds to 256, got %zu", o2);
    for (size_t al = 256; al <= 32 * MiB; al <<= 1) {
        size_t o;
        ALLOC_OK(a, 100, al, &o);
        TEST_ASSERT(o % al == 0, "offset %zu not aligned to %zu", o, al);
        size_t start, size;
        TEST_ASSERT(symm__alloc_lookup(a, o + 50, &start, &size) && start == o && size == 256,
                    "lookup inside block");
        TEST_ASSERT(symm__alloc_free(a, o, NULL) == SYMM_SUCCESS, "free aligned");
    }
    /* Below-minimum alignments mean 256; non powers of two are refused. */
    ALLOC_OK(a, 10, 8, &o3);
    TEST_ASSERT(o3 % 256 == 0, "min alignment");
    size_t bad = 12345;
    TEST_ASSERT(symm__alloc_alloc(a, 10, 768, &bad) == SYMM_ERR_INVALID_ARG && bad == 12345,
                "alignment 768 refused, output untouched");
    TEST_ASSERT(symm__alloc_alloc(a, 0, 0, &bad) == SYMM_ERR_INVALID_ARG, "size 0 refused");
    symm__alloc_destroy(a);
}

static void test_coalescing(void) {
    symm__allocator_t *a = make(16 * MiB);
    size_t o[8];
    for (int i = 0; i < 8; i++)
        ALLOC_OK(a, MiB, 0, &o[i]);
    for (int i = 0; i < 8; i++)
        TEST_ASSERT(o[i] == (size_t)i * MiB, "block %d at %zu", i, o[i]);
    /* Free in an order that exercises merge with prev, next and both. */
    int order[8] = {1, 3, 2, 6, 4, 5, 0, 7};
    for (int i = 0; i < 8; i++)
        TEST_ASSERT(symm__alloc_free(a, o[order[i]], NULL) == SYMM_SUCCESS, "free %d", order[i]);
    TEST_ASSERT(symm__alloc_free_ranges(a) == 1, "all coalesced into one range, have %zu",
                symm__alloc_free_ranges(a));
    TEST_ASSERT(symm__alloc_live_blocks(a) == 0 && symm__alloc_live_bytes(a) == 0, "empty");
    size_t big;
    ALLOC_OK(a, 16 * MiB, 0, &big);
    TEST_ASSERT(big == 0, "whole heap allocatable after coalescing");
    symm__alloc_destroy(a);
}

static void test_fragmentation(void) {
    symm__allocator_t *a = make(8 * MiB);
    size_t o[8];
    for (int i = 0; i < 8; i++)
        ALLOC_OK(a, MiB, 0, &o[i]);
    for (int i = 0; i < 8; i += 2)
        TEST_ASSERT(symm__alloc_free(a, o[i], NULL) == SYMM_SUCCESS, "free even");
    /* 4 MiB free in total but in 1 MiB holes: 2 MiB cannot fit. */
    size_t x = 777;
    TEST_ASSERT(symm__alloc_alloc(a, 2 * MiB, 0, &x) == SYMM_ERR_HEAP_EXHAUSTED && x == 777,
                "fragmented heap refuses 2 MiB");
    /* First fit fills the lowest hole. */
    ALLOC_OK(a, MiB / 2, 0, &x);
    TEST_ASSERT(x == 0, "first fit -> 0, got %zu", x);
    ALLOC_OK(a, MiB / 2, 0, &x);
    TEST_ASSERT(x == MiB / 2, "rest of the first hole, got %zu", x);
    ALLOC_OK(a, MiB, 0, &x);
    TEST_ASSERT(x == 2 * MiB, "second hole, got %zu", x);
    TEST_ASSERT(symm__alloc_free(a, o[1], NULL) == SYMM_SUCCESS, "free 1");
    TEST_ASSERT(symm__alloc_free(a, o[3], NULL) == SYMM_SUCCESS, "free 3");
    /* Holes at 1, 3 and 4 MiB: 3..5 MiB is now 2 MiB contiguous. */
    ALLOC_OK(a, 2 * MiB, 0, &x);
    TEST_ASSERT(x == 3 * MiB, "merged hole, got %zu", x);
    symm__alloc_destroy(a);
}

static void test_bad_frees(void) {
    symm__allocator_t *a = make(4 * MiB);
    size_t o1, o2;
    ALLOC_OK(a, 1000, 0, &o1);
    ALLOC_OK(a, 1000, 0, &o2);
    size_t sz = 0;
    TEST_ASSERT(symm__alloc_free(a, o1 + 256, NULL) == SYMM_ERR_INVALID_POINTER, "non-start free");
    TEST_ASSERT(symm__alloc_free(a, 3 * MiB, NULL) == SYMM_ERR_INVALID_POINTER, "never allocated");
    TEST_ASSERT(symm__alloc_free(a, o1, &sz) == SYMM_SUCCESS && sz == 1024, "free (size %zu)", sz);
    TEST_ASSERT(symm__alloc_free(a, o1, NULL) == SYMM_ERR_INVALID_POINTER, "double free");
    TEST_ASSERT(symm__alloc_live_blocks(a) == 1, "o2 still live");
    TEST_ASSERT(!symm__alloc_lookup(a, o1, NULL, NULL), "freed block not found");
    TEST_ASSERT(symm__alloc_commit(a, o2, 256) == SYMM_ERR_INVALID_ARG, "commit over a live block");
    symm__alloc_destroy(a);
}

static void test_exhaustion(void) {
    symm__allocator_t *a = make(4 * MiB + 100); /* rounded down to 4 MiB */
    TEST_ASSERT(symm__alloc_limit(a) == 4 * MiB, "limit rounded");
    size_t x;
    TEST_ASSERT(symm__alloc_alloc(a, 4 * MiB + 1, 0, &x) == SYMM_ERR_HEAP_EXHAUSTED, "too big");
    TEST_ASSERT(symm__alloc_alloc(a, SIZE_MAX, 0, &x) == SYMM_ERR_HEAP_EXHAUSTED, "SIZE_MAX");
    TEST_ASSERT(symm__alloc_alloc(a, 1, (size_t)1 << 62, &x) == SYMM_SUCCESS && x == 0,
                "huge alignment fits at offset 0");
    TEST_ASSERT(symm__alloc_alloc(a, 1, (size_t)1 << 62, &x) == SYMM_ERR_HEAP_EXHAUSTED,
                "no second offset aligned to 2^62");
    size_t y;
    ALLOC_OK(a, 4 * MiB - 256, 0, &y);
    TEST_ASSERT(symm__alloc_alloc(a, 1, 0, &x) == SYMM_ERR_HEAP_EXHAUSTED, "full");
    TEST_ASSERT(symm__alloc_high_water(a) == 4 * MiB, "high water %zu", symm__alloc_high_water(a));
    TEST_ASSERT(symm__alloc_free(a, y, NULL) == SYMM_SUCCESS, "free");
    TEST_ASSERT(symm__alloc_high_water(a) == 4 * MiB, "high water is a maximum");
    symm__allocator_t *z = NULL;
    TEST_ASSERT(symm__alloc_create(100, &z) == SYMM_ERR_INVALID_ARG && !z, "limit below unit");
    symm__alloc_destroy(a);
}

/* place() does not change anything; commit() of its answer equals alloc(). */
static void test_place_commit(void) {
    symm__allocator_t *a = make(8 * MiB);
    size_t p1, p2, o;
    TEST_ASSERT(symm__alloc_place(a, 3000, 4096, &p1) == SYMM_SUCCESS, "place");
    TEST_ASSERT(symm__alloc_place(a, 3000, 4096, &p2) == SYMM_SUCCESS && p1 == p2, "place is pure");
    TEST_ASSERT(symm__alloc_live_blocks(a) == 0 && symm__alloc_high_water(a) == 0, "nothing recorded");
    TEST_ASSERT(symm__alloc_commit(a, p1, 3000) == SYMM_SUCCESS, "commit");
    ALLOC_OK(a, 3000, 4096, &o);
    TEST_ASSERT(o != p1 && o % 4096 == 0, "next block elsewhere");
    symm__alloc_destroy(a);
}

/* Random alloc/free sequences: two instances fed the same sequence give the
 * same offsets, blocks never overlap and stay aligned (checked against a
 * byte map of owners), and everything coalesces back at the end. */
#define RLIMIT_BYTES (64 * MiB)
#define UNIT 256
static void test_random_determinism(uint64_t seed) {
    symm__allocator_t *a = make(RLIMIT_BYTES), *b = make(RLIMIT_BYTES);
    enum { SLOTS = 200 };
    size_t off[SLOTS], len[SLOTS];
    int live[SLOTS] = {0};
    int *owner = calloc(RLIMIT_BYTES / UNIT, sizeof(int)); /* 0 = free, else slot + 1 */
    TEST_ASSERT(owner, "calloc");
    uint64_t st = seed;
    for (int it = 0; it < 20000; it++) {
        int s = (int)(symm_test_rand(&st) % SLOTS);
        if (live[s]) {
            size_t sa = 0, sb = 0;
            TEST_ASSERT(symm__alloc_free(a, off[s], &sa) == SYMM_SUCCESS, "free a");
            TEST_ASSERT(symm__alloc_free(b, off[s], &sb) == SYMM_SUCCESS && sa == sb, "free b");
            for (size_t u = off[s] / UNIT; u < (off[s] + sa) / UNIT; u++) {
                TEST_ASSERT(owner[u] == s + 1, "owner map");
                owner[u] = 0;
            }
            live[s] = 0;
            continue;
        }
        uint64_t r = symm_test_rand(&st);
        size_t size = 1 + (size_t)(r % (2 * MiB));
        size_t align = (size_t)1 << (8 + (r >> 32) % 14); /* 256 B .. 2 MiB */
        size_t oa = 1, ob = 2;
        symm_status_t sa = symm__alloc_alloc(a, size, align, &oa);
        symm_status_t sb = symm__alloc_alloc(b, size, align, &ob);
        TEST_ASSERT(sa == sb, "same status on both instances");
        if (sa == SYMM_ERR_HEAP_EXHAUSTED)
            continue;
        TEST_ASSERT(sa == SYMM_SUCCESS, "alloc status %d", (int)sa);
        TEST_ASSERT(oa == ob, "determinism: %zu vs %zu at step %d", oa, ob, it);
        TEST_ASSERT(oa % align == 0, "alignment %zu of %zu", align, oa);
        TEST_ASSERT(oa + size <= RLIMIT_BYTES, "inside limit");
        for (size_t u = oa / UNIT; u < (oa + size + UNIT - 1) / UNIT; u++) {
            TEST_ASSERT(owner[u] == 0, "overlap at unit %zu (owner %d)", u, owner[u]);
            owner[u] = s + 1;
        }
        off[s] = oa;
        len[s] = size;
        live[s] = 1;
    }
    for (int s = 0; s < SLOTS; s++) {
        if (!live[s])
            continue;
        TEST_ASSERT(symm__alloc_lookup(a, off[s] + len[s] - 1, NULL, NULL), "last byte in block");
        TEST_ASSERT(symm__alloc_free(a, off[s], NULL) == SYMM_SUCCESS, "final free");
    }
    TEST_ASSERT(symm__alloc_free_ranges(a) == 1 && symm__alloc_live_bytes(a) == 0,
                "fully coalesced at the end (%zu ranges)", symm__alloc_free_ranges(a));
    free(owner);
    symm__alloc_destroy(a);
    symm__alloc_destroy(b);
}

int main(void) {
    test_basic_and_alignment();
    test_coalescing();
    test_fragmentation();
    test_bad_frees();
    test_exhaustion();
    test_place_commit();
    for (uint64_t seed = 1; seed <= 3; seed++)
        test_random_determinism(seed * 0x1234567ull);
    printf("allocator tests passed\n");
    return 0;
}
