/*
 * test_heap_host.c - the runtime (init, heap, teams, barriers) on the host
 * backend, run as N processes by mp_driver. argv[1] picks a scenario:
 *
 *   api       every call before init; init, double init; same pointers on
 *             every PE; writes through symm_ptr seen by the peer; growth over
 *             several chunks keeps data; calloc, align, bad frees, symm_ptr
 *             edge cases; teams and contexts; host exchange; stream barriers;
 *             finalize, then init again in the same process
 *   mismatch  differing malloc/align/free arguments -> SYMM_ERR_MISMATCH on
 *             every PE, naming each PE's size; the heap still works after
 *   exhaust   SYMM_HEAP_LIMIT -> SYMM_ERR_HEAP_EXHAUSTED on every PE, mapped
 *             size unchanged, a fitting malloc then works
 *   rollback  the last PE cannot create chunks (RLIMIT_FSIZE): growth fails
 *             on it only, every PE rolls back and reports HEAP_EXHAUSTED
 *   deny      SYMM_DEBUG_DENY_PEER=0:1 -> SYMM_ERR_NO_PEER_ACCESS naming the
 *             pair on every PE; after it a normal init works
 *   death     the last PE is killed while the others wait in symm_barrier_all:
 *             they get SYMM_ERR_PEER_DIED (mp_driver --killed N-1)
 *   collenv   SYMM_COLL_ALGO / _BLOCKS / _CE_MIN set on the last PE only:
 *             SYMM_ERR_ENV on every PE naming the variable and both values
 *   stuck     the last PE stays out of barriers, alive: the others' waits end
 *             (SYMM_WAIT_TIMEOUT=2) naming it, then every PE's, its own too
 *   uid       symm_get_unique_id on rank 0, passed to the others through a file,
 *             then symm_init_with_uid on every PE
 *   nodevice  native backend on a machine without GPU -> SYMM_ERR_NO_DEVICE
 *             with a hint to use SYMM_BACKEND=host (or success on a GPU box)
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "symm_test.h"

#define MiB ((size_t)1 << 20)

static int me, npes;

static void init_host(void) {
    SYMM_CHECK(symm_init());
    me = symm_my_pe();
    npes = symm_n_pes();
    TEST_ASSERT(me >= 0 && npes >= 1 && me < npes, "my_pe %d n_pes %d", me, npes);
}

static uint64_t seed_of(int writer, int reader, int salt) {
    return 0x5eed0000ull ^ ((uint64_t)writer << 32) ^ ((uint64_t)reader << 16) ^ (uint64_t)salt;
}

/* Every PE writes a distinct random pattern into each peer's copy of `p`
 * (slice `me` of nslice bytes each) through symm_ptr; after a barrier each PE
 * checks its own copy. */
static void exchange_check(unsigned char *p, size_t slice, int salt) {
    unsigned char *buf = malloc(slice);
    TEST_ASSERT(buf, "malloc");
    for (int peer = 0; peer < npes; peer++) {
        unsigned char *dst = symm_ptr(p, peer);
        TEST_ASSERT(dst, "symm_ptr(%p, %d) is NULL", (void *)p, peer);
        symm_test_fill(buf, slice, seed_of(me, peer, salt));
        memcpy(dst + (size_t)me * slice, buf, slice);
    }
    SYMM_CHECK(symm_barrier_all());
    for (int w = 0; w < npes; w++) {
        symm_test_fill(buf, slice, seed_of(w, me, salt));
        TEST_ASSERT(memcmp(p + (size_t)w * slice, buf, slice) == 0,
                    "data written by PE %d (salt %d) is wrong here", w, salt);
    }
    free(buf);
    SYMM_CHECK(symm_barrier_all()); /* nobody rewrites before all checked */
}

static void check_same_on_all(uint64_t v, const char *what) {
    uint64_t *all = calloc((size_t)npes, sizeof(uint64_t));
    TEST_ASSERT(all, "calloc");
    SYMM_CHECK(symm_host_allgather(&v, all, sizeof(v)));
    for (int r = 0; r < npes; r++)
        TEST_ASSERT(all[r] == v, "%s differs: PE %d has %#llx, PE %d %#llx", what, r,
                    (unsigned long long)all[r], me, (unsigned long long)v);
    free(all);
}

static void check_before_init(void) {
    void *p = (void *)&p;
    size_t a, b;
    const symm_ctx_t *dc;
    symm_ctx_t c;
    char buf[8] = {0};
    TEST_ASSERT(!symm_initialized(), "initialized before init");
    TEST_ASSERT(symm_my_pe() == -1 && symm_n_pes() == -1 && symm_device() == -1, "-1 before init");
    TEST_ASSERT(symm_team_world() == NULL && symm_team_node() == NULL, "teams NULL before init");
    TEST_ASSERT(symm_team_my_pe(NULL) == -1 && symm_team_n_pes(NULL) == -1, "NULL team");
    TEST_ASSERT(symm_team_translate_pe(NULL, 0, NULL) == -1, "translate NULL");
    TEST_ASSERT(symm_ptr(p, 0) == NULL, "symm_ptr before init");
    SYMM_EXPECT(symm_malloc(16, &p), SYMM_ERR_NOT_INITIALIZED);
    SYMM_EXPECT(symm_calloc(1, 16, &p), SYMM_ERR_NOT_INITIALIZED);
    SYMM_EXPECT(symm_align(512, 16, &p), SYMM_ERR_NOT_INITIALIZED);
    SYMM_EXPECT(symm_free(p), SYMM_ERR_NOT_INITIALIZED);
    SYMM_EXPECT(symm_heap_info(&a, &b), SYMM_ERR_NOT_INITIALIZED);
    SYMM_EXPECT(symm_barrier_all(), SYMM_ERR_NOT_INITIALIZED);
    SYMM_EXPECT(symm_barrier_all_on_stream(NULL), SYMM_ERR_NOT_INITIALIZED);
    SYMM_EXPECT(symm_team_barrier_on_stream(NULL, NULL), SYMM_ERR_NOT_INITIALIZED);
    SYMM_EXPECT(symm_ctx(&dc), SYMM_ERR_NOT_INITIALIZED);
    SYMM_EXPECT(symm_team_ctx(NULL, &dc), SYMM_ERR_NOT_INITIALIZED);
    SYMM_EXPECT(symm_team_ctx_copy(NULL, &c), SYMM_ERR_NOT_INITIALIZED);
    SYMM_EXPECT(symm_host_broadcast(buf, sizeof(buf), 0), SYMM_ERR_NOT_INITIALIZED);
    SYMM_EXPECT(symm_host_allgather(buf, buf, 1), SYMM_ERR_NOT_INITIALIZED);
    SYMM_EXPECT(symm_finalize(), SYMM_ERR_NOT_INITIALIZED);
    TEST_ASSERT(strstr(symm_last_error(), "not initialized") != NULL, "message: '%s'",
                symm_last_error());
}

static void check_teams(void) {
    symm_team_t w = symm_team_world(), n = symm_team_node();
    TEST_ASSERT(w && n && w != n, "teams");
    TEST_ASSERT(symm_team_my_pe(w) == me && symm_team_n_pes(w) == npes, "world team");
    TEST_ASSERT(symm_team_n_pes(n) == npes, "one node: node team has every PE");
    for (int pe = 0; pe < npes; pe++) {
        int np = symm_team_translate_pe(w, pe, n);
        TEST_ASSERT(np == pe, "translate world %d -> node %d", pe, np);
        TEST_ASSERT(symm_team_translate_pe(n, np, w) == pe, "translate back");
    }
    TEST_ASSERT(symm_team_translate_pe(w, npes, n) == -1 && symm_team_translate_pe(w, -1, n) == -1,
                "translate out of range");
    symm_team_t teams[2] = {w, n};
    for (int t = 0; t < 2; t++) {
        symm_ctx_t c;
        const symm_ctx_t *d = NULL;
        SYMM_CHECK(symm_team_ctx_copy(teams[t], &c));
        SYMM_CHECK(symm_team_ctx(teams[t], &d));
        TEST_ASSERT(d != NULL, "device context");
        TEST_ASSERT(c.magic == SYMM_CTX_MAGIC && c.version == SYMM_CTX_VERSION, "magic/version");
        TEST_ASSERT(c.my_pe == symm_team_my_pe(teams[t]) && c.n_pes == symm_team_n_pes(teams[t]),
                    "ctx my_pe/n_pes");
        TEST_ASSERT(c.world_pe == me && c.backend == SYMM_BACKEND_HOST, "world_pe/backend");
        size_t mapped, limit;
        SYMM_CHECK(symm_heap_info(&mapped, &limit));
        TEST_ASSERT(c.heap_size == mapped, "heap_size %llu vs mapped %zu",
                    (unsigned long long)c.heap_size, mapped);
        TEST_ASSERT(c.barrier >= c.heap_base && c.barrier < c.heap_base + c.heap_size, "barrier in heap");
        TEST_ASSERT(c.scratch >= c.heap_base && c.scratch + c.scratch_size <= c.heap_base + c.heap_size,
                    "scratch in heap");
        TEST_ASSERT(c.abort_flag != 0, "abort flag");
        /* Host backend: the "device" context is host memory and must match. */
        TEST_ASSERT(memcmp(d, &c, sizeof(c)) == 0, "device copy differs from ctx_copy");
        check_same_on_all((uint64_t)c.stride, "stride");
        check_same_on_all(c.heap_base, "heap_base");
        check_same_on_all((uint64_t)c.n_pes, "n_pes");
        void *p = (void *)(uintptr_t)c.heap_base;
        TEST_ASSERT(symm_ptr(p, 0) == (void *)(uintptr_t)(c.heap_base - (uint64_t)(c.my_pe * c.stride)),
                    "symm_ptr matches ctx arithmetic");
    }
    SYMM_EXPECT(symm_team_ctx(NULL, NULL), SYMM_ERR_INVALID_ARG);
    SYMM_EXPECT(symm_team_ctx_copy((symm_team_t)&teams, NULL), SYMM_ERR_INVALID_ARG);
}

/* Stream barriers (host backend: run by the caller) order data between PEs:
 * each round PE i writes round into PE i+1's slot, and after the barrier
 * reads what PE i-1 wrote. */
static void check_stream_barriers(void) {
    uint64_t *slot;
    SYMM_CHECK(symm_calloc(2, sizeof(uint64_t), (void **)&slot));
    int next = (me + 1) % npes, prev = (me + npes - 1) % npes;
    uint64_t *remote = symm_ptr(slot, next);
    for (uint64_t round = 1; round <= 300; round++) {
        remote[round & 1] = round * 1000 + (uint64_t)me;
        if (round % 2)
            SYMM_CHECK(symm_barrier_all_on_stream(NULL));
        else
            SYMM_CHECK(symm_team_barrier_on_stream(symm_team_node(), NULL));
        uint64_t got = *(volatile uint64_t *)&slot[round & 1];
        TEST_ASSERT(got == round * 1000 + (uint64_t)prev, "round %llu: got %llu",
                    (unsigned long long)round, (unsigned long long)got);
    }
    SYMM_CHECK(symm_barrier_all());
    SYMM_CHECK(symm_free(slot));
}

static void scenario_api(void) {
    check_before_init();
    setenv("SYMM_HEAP_CHUNK", "2M", 1);
    init_host();
    SYMM_EXPECT(symm_init(), SYMM_ERR_ALREADY_INITIALIZED);
    TEST_ASSERT(symm_initialized() && symm_device() == -1, "initialized, no device");

    /* Same pointers, real sharing. Slices of odd size. */
    const size_t slice = 4099;
    unsigned char *p;
    SYMM_CHECK(symm_malloc(slice * (size_t)npes, (void **)&p));
    TEST_ASSERT(p && (uintptr_t)p % 256 == 0, "malloc alignment %p", (void *)p);
    check_same_on_all((uint64_t)(uintptr_t)p, "symm_malloc pointer");
    TEST_ASSERT(symm_ptr(p, me) == p, "symm_ptr(p, me) == p");
    exchange_check(p, slice, 1);

    /* Growth over several chunks keeps data (old and new blocks). */
    size_t mapped0, limit;
    SYMM_CHECK(symm_heap_info(&mapped0, &limit));
    unsigned char *blocks[5];
    const size_t bslice = 3 * MiB / 4 + 13; /* 4 PEs -> ~3 MiB, bigger than a chunk */
    for (int k = 0; k < 5; k++) {
        SYMM_CHECK(symm_malloc(bslice * (size_t)npes, (void **)&blocks[k]));
        exchange_check(blocks[k], bslice, 10 + k);
        for (int j = 0; j < k; j++) { /* older blocks untouched by the growth */
            unsigned char *buf = malloc(bslice);
            TEST_ASSERT(buf, "malloc");
            for (int w = 0; w < npes; w++) {
                symm_test_fill(buf, bslice, seed_of(w, me, 10 + j));
                TEST_ASSERT(memcmp(blocks[j] + (size_t)w * bslice, buf, bslice) == 0,
                            "block %d lost data after growth %d", j, k);
            }
            free(buf);
        }
    }
    size_t mapped1;
    SYMM_CHECK(symm_heap_info(&mapped1, &limit));
    TEST_ASSERT(mapped1 > mapped0 && mapped1 <= limit, "heap grew: %zu -> %zu (limit %zu)", mapped0,
                mapped1, limit);
    exchange_check(p, slice, 2); /* the first block still works */

    /* calloc: zero, overflow; NULL for size 0. */
    unsigned char *z;
    SYMM_CHECK(symm_calloc(1000, 7, (void **)&z));
    for (size_t i = 0; i < 7000; i++)
        TEST_ASSERT(z[i] == 0, "calloc byte %zu = %d", i, z[i]);
    void *q = (void *)1;
    SYMM_EXPECT(symm_calloc(SIZE_MAX / 2, 4, &q), SYMM_ERR_INVALID_ARG);
    TEST_ASSERT(q == (void *)1, "output untouched on error");
    SYMM_CHECK(symm_malloc(0, &q));
    TEST_ASSERT(q == NULL, "malloc(0) -> NULL");
    SYMM_CHECK(symm_free(NULL));

    /* align */
    void *al;
    SYMM_CHECK(symm_align((size_t)1 << 20, 100, &al));
    TEST_ASSERT((uintptr_t)al % ((size_t)1 << 20) == 0, "1 MiB alignment");
    check_same_on_all((uint64_t)(uintptr_t)al, "symm_align pointer");
    SYMM_EXPECT(symm_align(3000, 100, &q), SYMM_ERR_INVALID_ARG);
    SYMM_EXPECT(symm_align(0, 100, &q), SYMM_ERR_INVALID_ARG);
    /* Alignments past the allocation granularity, up to 64 MiB: the pointer
     * (not only its heap offset) aligned, the same on every PE, and usable. */
    for (size_t a = (size_t)4 << 10; a <= (size_t)64 << 20; a <<= 2) {
        void *big;
        SYMM_CHECK(symm_align(a, 4096 + 8, &big));
        TEST_ASSERT((uintptr_t)big % a == 0, "symm_align(%zu) gave %p on PE %d", a, big, me);
        check_same_on_all((uint64_t)(uintptr_t)big, "symm_align pointer");
        unsigned char *next = symm_ptr(big, (me + 1) % npes);
        TEST_ASSERT(next != NULL, "symm_ptr of an aligned block");
        next[4096 + me % 8] = (unsigned char)(0x40 + me);
        SYMM_CHECK(symm_barrier_all());
        int prev = (me + npes - 1) % npes;
        TEST_ASSERT(((unsigned char *)big)[4096 + prev % 8] == (unsigned char)(0x40 + prev),
                    "aligned block (%zu): PE %d's store not seen", a, prev);
        SYMM_CHECK(symm_barrier_all());
        SYMM_CHECK(symm_free(big));
    }
    /* The heap's descriptors are not inherited by programs this PE starts,
     * however many chunks it grows by. */
    {
        int before = symm_test_inherited_fds();
        void *grow[3];
        for (int i = 0; i < 3; i++)
            SYMM_CHECK(symm_malloc(((size_t)256 << 20) + 4096, &grow[i]));
        int after = symm_test_inherited_fds();
        TEST_ASSERT(after == before, "a fork+exec child inherits %d descriptors after the heap grew, %d before",
                    after, before);
        for (int i = 2; i >= 0; i--)
            SYMM_CHECK(symm_free(grow[i]));
    }
    /* Past what the heap bases are aligned to: refused on every PE. */
    SYMM_EXPECT(symm_align((size_t)1 << 31, 100, &q), SYMM_ERR_INVALID_ARG);
    TEST_ASSERT(strstr(symm_last_error(), "heap base"), "says why: %s", symm_last_error());

    /* Bad frees, symm_ptr edge cases. */
    int local = 0;
    SYMM_EXPECT(symm_free(&local), SYMM_ERR_NOT_SYMMETRIC);
    SYMM_EXPECT(symm_free(p + 256), SYMM_ERR_INVALID_POINTER);
    TEST_ASSERT(strstr(symm_last_error(), "inside") != NULL, "message '%s'", symm_last_error());
    TEST_ASSERT(symm_ptr(&local, 0) == NULL, "symm_ptr outside heap");
    TEST_ASSERT(symm_ptr(p, npes) == NULL && symm_ptr(p, -1) == NULL, "symm_ptr invalid PE");
    SYMM_CHECK(symm_free(z));
    SYMM_EXPECT(symm_free(z), SYMM_ERR_INVALID_POINTER);
    TEST_ASSERT(strstr(symm_last_error(), "not a live allocation") != NULL, "message '%s'",
                symm_last_error());

    check_teams();
    check_stream_barriers();

    /* Host exchange. */
    uint64_t v = 0;
    if (me == npes - 1)
        v = 0xabcdef12345ull;
    SYMM_CHECK(symm_host_broadcast(&v, sizeof(v), npes - 1));
    TEST_ASSERT(v == 0xabcdef12345ull, "broadcast");
    SYMM_EXPECT(symm_host_broadcast(&v, sizeof(v), npes), SYMM_ERR_INVALID_PE);
    if (npes > 1)
        SYMM_EXPECT(symm_host_broadcast(&v, me == 0 ? 4 : 8, 0), SYMM_ERR_MISMATCH);

    for (int k = 0; k < 5; k++)
        SYMM_CHECK(symm_free(blocks[k]));
    SYMM_CHECK(symm_free(al));
    /* p stays live: finalize frees it. */
    SYMM_CHECK(symm_finalize());
    TEST_ASSERT(!symm_initialized() && symm_my_pe() == -1, "finalized");
    SYMM_EXPECT(symm_malloc(8, &q), SYMM_ERR_NOT_INITIALIZED);

    /* A second life in the same process. */
    init_host();
    SYMM_CHECK(symm_malloc(slice * (size_t)npes, (void **)&p));
    exchange_check(p, slice, 3);
    check_teams();
    SYMM_CHECK(symm_finalize());
}

static void scenario_mismatch(void) {
    init_host();
    void *p = (void *)1;
    if (npes > 1) {
        SYMM_EXPECT(symm_malloc(1000 + (size_t)me, &p), SYMM_ERR_MISMATCH);
        TEST_ASSERT(p == (void *)1, "output untouched");
        char want[64];
        for (int r = 0; r < npes; r++) {
            snprintf(want, sizeof(want), "PE %d: symm_malloc(size %d", r, 1000 + r);
            TEST_ASSERT(strstr(symm_last_error(), want), "message '%s' lacks '%s'",
                        symm_last_error(), want);
        }
        SYMM_EXPECT(symm_align(me == 0 ? 512 : 1024, 64, &p), SYMM_ERR_MISMATCH);
        if (me == 0)
            SYMM_EXPECT(symm_malloc(64, &p), SYMM_ERR_MISMATCH);
        else
            SYMM_EXPECT(symm_calloc(64, 1, &p), SYMM_ERR_MISMATCH);
    }
    /* Still usable, and nothing was allocated by the failed calls. */
    void *a, *b;
    SYMM_CHECK(symm_malloc(4096, &a));
    SYMM_CHECK(symm_malloc(4096, &b));
    if (npes > 1)
        SYMM_EXPECT(symm_free(me == 0 ? a : b), SYMM_ERR_MISMATCH);
    exchange_check(a, 4096 / (size_t)npes, 7);
    SYMM_CHECK(symm_free(a));
    SYMM_CHECK(symm_free(b));
    SYMM_CHECK(symm_finalize());
}

static void scenario_exhaust(void) {
    /* Room for the runtime's own blocks (team barriers and the collectives'
     * scratch, 32 MiB per team: ~65 MiB), `a` and about 9 MiB more. */
    setenv("SYMM_HEAP_LIMIT", "80M", 1);
    setenv("SYMM_HEAP_CHUNK", "2M", 1);
    init_host();
    size_t mapped0, limit;
    SYMM_CHECK(symm_heap_info(&mapped0, &limit));
    TEST_ASSERT(limit == 80 * MiB, "limit %zu", limit);
    void *a, *big = (void *)1;
    SYMM_CHECK(symm_malloc(6 * MiB, &a));
    size_t mapped1;
    SYMM_CHECK(symm_heap_info(&mapped1, &limit));
    SYMM_EXPECT(symm_malloc(20 * MiB, &big), SYMM_ERR_HEAP_EXHAUSTED);
    TEST_ASSERT(big == (void *)1, "output untouched");
    size_t mapped2;
    SYMM_CHECK(symm_heap_info(&mapped2, &limit));
    TEST_ASSERT(mapped2 == mapped1, "mapped size changed by a failed malloc: %zu -> %zu", mapped1,
                mapped2);
    /* What is left still fills up, 1 MiB at a time, to exactly the limit. */
    void *fill[32];
    int nfill = 0;
    symm_status_t st = SYMM_SUCCESS;
    while (nfill < 32 && (st = symm_malloc(MiB, &fill[nfill])) == SYMM_SUCCESS)
        nfill++;
    TEST_ASSERT(st == SYMM_ERR_HEAP_EXHAUSTED && nfill >= 1 && nfill < 18,
                "filling the rest: %d MiB blocks, then %s", nfill, symm_strerror(st));
    size_t mapped3;
    SYMM_CHECK(symm_heap_info(&mapped3, &limit));
    TEST_ASSERT(mapped3 == limit, "full heap maps the whole limit (%zu of %zu)", mapped3, limit);
    exchange_check(fill[nfill - 1], MiB / (size_t)npes, 5);
    SYMM_CHECK(symm_free(fill[0]));
    SYMM_CHECK(symm_malloc(MiB, &big));
    TEST_ASSERT(big == fill[0], "the freed block is reused");
    SYMM_CHECK(symm_finalize());
}

static void scenario_rollback(void) {
    setenv("SYMM_HEAP_CHUNK", "2M", 1);
    init_host();
    size_t mapped0, limit;
    SYMM_CHECK(symm_heap_info(&mapped0, &limit));
    if (me == npes - 1) {
        /* Chunks are memfds: past RLIMIT_FSIZE, ftruncate fails with EFBIG
         * (SIGXFSZ ignored), i.e. this PE alone runs out of memory. */
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {8 * MiB, 8 * MiB};
        TEST_ASSERT(setrlimit(RLIMIT_FSIZE, &rl) == 0, "setrlimit");
    }
    void *big = (void *)1;
    SYMM_EXPECT(symm_malloc(64 * MiB, &big), SYMM_ERR_HEAP_EXHAUSTED);
    TEST_ASSERT(big == (void *)1, "output untouched");
    size_t mapped1;
    SYMM_CHECK(symm_heap_info(&mapped1, &limit));
    TEST_ASSERT(mapped1 == mapped0, "growth not rolled back: %zu -> %zu", mapped0, mapped1);
    void *p;
    SYMM_CHECK(symm_malloc(4 * MiB, &p)); /* a 4 MiB chunk is under the limit */
    exchange_check(p, 4 * MiB / (size_t)npes, 9);
    SYMM_CHECK(symm_free(p));
    SYMM_CHECK(symm_finalize());
}

static void scenario_deny(void) {
    setenv("SYMM_DEBUG_DENY_PEER", "0:1", 1);
    SYMM_EXPECT(symm_init(), SYMM_ERR_NO_PEER_ACCESS);
    const char *msg = symm_last_error();
    TEST_ASSERT(strstr(msg, "PE 0") && strstr(msg, "PE 1"), "message '%s' names the pair", msg);
    TEST_ASSERT(!symm_initialized() && symm_my_pe() == -1, "failed init leaves nothing");
    unsetenv("SYMM_DEBUG_DENY_PEER");
    init_host();
    void *p;
    SYMM_CHECK(symm_malloc(4096, &p));
    exchange_check(p, 4096 / (size_t)npes, 4);
    SYMM_CHECK(symm_finalize());
}

static void scenario_death(void) {
    init_host();
    SYMM_CHECK(symm_barrier_all());
    if (me == npes - 1)
        raise(SIGKILL);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    SYMM_EXPECT(symm_barrier_all(), SYMM_ERR_PEER_DIED);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("PE %d: peer death reported after %.2f s: %s\n", me,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9,
           symm_last_error());
    symm_status_t st = symm_finalize(); /* releases local resources either way */
    TEST_ASSERT(st == SYMM_SUCCESS || st == SYMM_ERR_PEER_DIED, "finalize -> %s", symm_strerror(st));
    TEST_ASSERT(!symm_initialized(), "finalized");
}

static double secs_since(const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) * 1e-9;
}

/* The last PE is alive but stays out (busy for longer than
 * SYMM_WAIT_TIMEOUT=2): the team barrier on the CPU says which team PE it
 * waited for; symm_barrier_all declares it stuck on every PE (itself too,
 * once it comes back); finalize then returns instead of hanging. */
static void scenario_stuck(void) {
    struct timespec t0;
    char name[16];
    setenv("SYMM_WAIT_TIMEOUT", "2", 1);
    /* the stuck PE comes back about 3 s after it was declared out: no
     * abort grace, or the watcher would end it first */
    setenv("SYMM_ABORT_GRACE", "0", 1);
    init_host();
    SYMM_CHECK(symm_barrier_all());
    snprintf(name, sizeof name, "PE %d", npes - 1);
    if (me == npes - 1) {
        sleep(3);
        SYMM_CHECK(symm_barrier_all_on_stream(NULL)); /* the others announced theirs */
    } else {
        clock_gettime(CLOCK_MONOTONIC, &t0);
        SYMM_EXPECT(symm_barrier_all_on_stream(NULL), SYMM_ERR_TIMEOUT);
        TEST_ASSERT(strstr(symm_last_error(), "team PE"), "team barrier names whom it waited for: %s",
                    symm_last_error());
        printf("PE %d: team barrier gave up after %.2f s: %s\n", me, secs_since(&t0), symm_last_error());
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (me == npes - 1)
        sleep(4);
    SYMM_EXPECT(symm_barrier_all(), SYMM_ERR_PEER_DIED);
    TEST_ASSERT(strstr(symm_last_error(), name) && strstr(symm_last_error(), "stuck"),
                "names the stuck PE: %s", symm_last_error());
    printf("PE %d: symm_barrier_all failed after %.2f s: %s\n", me, secs_since(&t0), symm_last_error());
    symm_status_t st = symm_finalize();
    TEST_ASSERT(st == SYMM_ERR_PEER_DIED && !symm_initialized(), "finalize -> %s", symm_strerror(st));
}

/* The collectives' settings differ on the last PE: init fails on every PE
 * with SYMM_ERR_ENV naming the variable and both values (a bad value on
 * one PE fails everywhere too); with them alike, init works. */
static void scenario_collenv(void) {
    static const char *cases[][3] = {
        {"SYMM_COLL_BLOCKS", "8", "PE 0 has 0, PE %d 8"},
        {"SYMM_COLL_ALGO", "oneshot", "PE 0 has \"\", PE %d \"oneshot\""},
        {"SYMM_COLL_CE_MIN", "1M", "PE 0 has 67108864, PE %d 1048576"},
        {"SYMM_COLL_ALGO", "bogus", "is not one of"},
        {"SYMM_COLL_TUNE", "rs_ce_min=1M", "PE 0 has \"\", PE %d \"rs_ce_min=1M\""},
    };
    int rank = atoi(getenv("RANK")), n = atoi(getenv("WORLD_SIZE"));
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char want[96];
        if (rank == n - 1)
            setenv(cases[c][0], cases[c][1], 1);
        snprintf(want, sizeof want, cases[c][2], n - 1);
        SYMM_EXPECT(symm_init(), SYMM_ERR_ENV);
        TEST_ASSERT(strstr(symm_last_error(), cases[c][0]) &&
                        (strstr(symm_last_error(), want) || (c == 3 && rank != n - 1)),
                    "case %zu: the message names %s and both values (\"%s\"): %s", c, cases[c][0], want,
                    symm_last_error());
        TEST_ASSERT(!symm_initialized(), "a failed init leaves nothing");
        unsetenv(cases[c][0]);
    }
    init_host();
    SYMM_CHECK(symm_barrier_all());
    SYMM_CHECK(symm_finalize());
}

static void scenario_uid(void) {
    const char *port = getenv("SYMM_BOOTSTRAP_PORT"), *rank_s = getenv("RANK"),
               *size_s = getenv("WORLD_SIZE");
    TEST_ASSERT(port && rank_s && size_s, "run by mp_driver");
    int rank = atoi(rank_s), n = atoi(size_s);
    char path[128], tmp[160];
    snprintf(path, sizeof(path), "/tmp/symm_test_uid_%s", port);
    snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, rank);
    symm_unique_id_t uid;
    SYMM_EXPECT(symm_init_with_uid(&uid, n, n), SYMM_ERR_INVALID_ARG);
    SYMM_EXPECT(symm_init_with_uid(NULL, 0, n), SYMM_ERR_INVALID_ARG);
    if (rank == 0) {
        SYMM_CHECK(symm_get_unique_id(&uid));
        FILE *f = fopen(tmp, "wb");
        TEST_ASSERT(f && fwrite(&uid, sizeof(uid), 1, f) == 1 && fclose(f) == 0, "write uid");
        TEST_ASSERT(rename(tmp, path) == 0, "rename uid file");
    } else {
        FILE *f = NULL;
        for (int i = 0; i < 3000 && !f; i++) { /* up to 30 s */
            f = fopen(path, "rb");
            if (!f) {
                struct timespec ts = {0, 10 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
        }
        TEST_ASSERT(f && fread(&uid, sizeof(uid), 1, f) == 1, "read uid from %s", path);
        fclose(f);
    }
    SYMM_CHECK(symm_init_with_uid(&uid, rank, n));
    me = symm_my_pe();
    npes = symm_n_pes();
    TEST_ASSERT(me == rank && npes == n, "rank %d of %d, expected %d of %d", me, npes, rank, n);
    if (me == 0)
        unlink(path);
    SYMM_EXPECT(symm_get_unique_id(&uid), SYMM_ERR_ALREADY_INITIALIZED);
    void *p;
    SYMM_CHECK(symm_malloc(4096 * (size_t)npes, &p));
    check_same_on_all((uint64_t)(uintptr_t)p, "pointer");
    exchange_check(p, 4096, 8);
    SYMM_CHECK(symm_finalize());
}

static void scenario_nodevice(void) {
    setenv("SYMM_BACKEND", "native", 1);
    symm_status_t st = symm_init();
    if (st == SYMM_SUCCESS) {
        printf("native backend initialised on GPU %d (GPU machine)\n", symm_device());
        SYMM_CHECK(symm_finalize());
        return;
    }
    TEST_ASSERT(st == SYMM_ERR_NO_DEVICE, "native init without GPU -> %s (%s)", symm_strerror(st),
                symm_last_error());
    TEST_ASSERT(strstr(symm_last_error(), "SYMM_BACKEND=host"), "message '%s' gives the hint",
                symm_last_error());
    TEST_ASSERT(!symm_initialized(), "failed init leaves nothing");
    /* The host backend works in the same process afterwards. */
    setenv("SYMM_BACKEND", "host", 1);
    init_host();
    SYMM_CHECK(symm_finalize());
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s api|mismatch|exhaust|rollback|deny|death|uid|nodevice\n", argv[0]);
        return 2;
    }
    if (strcmp(argv[1], "--count-fds") == 0)
        return symm_test_count_fds();
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *s = argv[1];
    if (strcmp(s, "nodevice") != 0)
        setenv("SYMM_BACKEND", "host", 1);
    if (strcmp(s, "api") == 0)
        scenario_api();
    else if (strcmp(s, "mismatch") == 0)
        scenario_mismatch();
    else if (strcmp(s, "exhaust") == 0)
        scenario_exhaust();
    else if (strcmp(s, "rollback") == 0)
        scenario_rollback();
    else if (strcmp(s, "deny") == 0)
        scenario_deny();
    else if (strcmp(s, "death") == 0)
        scenario_death();
    else if (strcmp(s, "uid") == 0)
        scenario_uid();
    else if (strcmp(s, "stuck") == 0)
        scenario_stuck();
    else if (strcmp(s, "collenv") == 0)
        scenario_collenv();
    else if (strcmp(s, "nodevice") == 0)
        scenario_nodevice();
    else
        TEST_FAIL("unknown scenario %s", s);
    printf("PE %d: %s passed\n", me, s);
    return 0;
}
