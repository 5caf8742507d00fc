/*
 * test_trace_host.c - the device trace's host side over the host backend (no
 * GPU), as N processes (mp_driver):
 *
 *   test_trace_host calls OUT.json   the calls and their errors, then a dump
 *   test_trace_host auto             a run with SYMM_TRACE_FILE set: no trace
 *                                    call at all; finalize writes the file
 *
 * Nothing runs kernels here, so each PE writes into its trace buffer what a
 * kernel would (the layout of symm_trace_types.h, through the context's
 * trace word): the ring of tests/trace, filling the buffer exactly, plus
 * claims past its end (the drops).
 * check_trace_json.py then checks the file (ctest runs it after).
 */
#include <stdlib.h>
#include <string.h>

#include "symm_test.h"

#define BLOCKS 2
#define ITERS 3
#define EXTRA_CLAIMS 3 /* claims past the buffer's end: the drops */

static void expect_msg(const char *needle) {
    if (strstr(symm_last_error(), needle) == NULL)
        TEST_FAIL("message '%s' lacks '%s'", symm_last_error(), needle);
}

static symm_trace_event_t ev(int kind, int group, uint32_t flags, int peer, uint64_t addr, uint64_t a, uint64_t b,
                             uint64_t t0, uint64_t t1, uint32_t block) {
    symm_trace_event_t e;
    memset(&e, 0, sizeof e);
    e.t0 = t0;
    e.t1 = t1;
    e.addr = addr;
    e.a = a;
    e.b = b;
    e.block = block;
    e.nblocks = BLOCKS;
    e.peer = (int16_t)peer;
    e.kind = (uint8_t)kind;
    e.flags = (uint8_t)flags;
    e.group = (uint8_t)group;
    e.lanes = 1;
    e.team_n = (uint16_t)symm_n_pes();
    e.team_me = (uint16_t)symm_my_pe();
    return e;
}

/* What the ring kernel would record on this PE, written as a kernel would:
 * events from slot 0 of sub-buffer 0, the claim counter past them. */
static uint64_t record_ring(const uint64_t *sig) {
    const int me = symm_my_pe(), n = symm_n_pes();
    symm_ctx_t c;
    symm_trace_ring_t *r;
    symm_trace_event_t *evs;
    uint64_t k = 0, *head;
    SYMM_CHECK(symm_team_ctx_copy(symm_team_world(), &c));
    TEST_ASSERT(c.trace != 0, "the context points at the trace while it records");
    r = (symm_trace_ring_t *)(uintptr_t)c.trace;
    TEST_ASSERT(r->magic == SYMM_TRACE_MAGIC && r->version == SYMM_TRACE_VERSION, "ring header");
    TEST_ASSERT(r->nsub == 1, "no GPU: one sub-buffer (got %u)", r->nsub);
    evs = (symm_trace_event_t *)(uintptr_t)r->events;
    head = (uint64_t *)(void *)((char *)r + sizeof *r);
    TEST_ASSERT(*head == 0, "a new trace starts empty");
    TEST_ASSERT(r->sub_cap == BLOCKS * ITERS * 4, "the test fills the buffer exactly (capacity %u)", r->sub_cap);
    for (int b = 0; b < BLOCKS; b++)
        for (int i = 0; i < ITERS; i++) {
            /* one clock for all PEs (no GPU, no alignment): PE p's put ends
             * before PE p+1's wait does */
            uint64_t t = 1000000 + (uint64_t)i * 100000 + (uint64_t)b * 1000;
            uint64_t word = (uint64_t)(uintptr_t)&sig[b];
            evs[k++] = ev(SYMM_TRACE_REGION_BEGIN, 0, 0, -1, 0, 7, 0, t, t, (uint32_t)b);
            evs[k++] = ev(SYMM_TRACE_PUT_SIGNAL, SYMM_TRACE_GROUP_BLOCK, SYMM_TRACE_F_ADD, (me + 1) % n, word, 64, 1,
                          t + 100 + (uint64_t)me * 10, t + 200 + (uint64_t)me * 10, (uint32_t)b);
            evs[k++] = ev(SYMM_TRACE_WAIT, SYMM_TRACE_GROUP_THREAD,
                          SYMM_TRACE_WAIT_FLAGS(SYMM_CMP_GE, SYMM_TRACE_WAIT_SIGNAL), -1, word, (uint64_t)i + 1,
                          (uint64_t)i + 1, t + 300, t + 900, (uint32_t)b);
            evs[k++] = ev(SYMM_TRACE_REGION_END, 0, 0, -1, 0, 7, 0, t + 1000, t + 1000, (uint32_t)b);
        }
    *head = k + EXTRA_CLAIMS;
    return k;
}

static void run_calls(const char *out) {
    const int me = symm_my_pe(), n = symm_n_pes();
    uint64_t rec = 1, drop = 1, *sig = NULL;
    symm_ctx_t c;
    symm_trace_ring_t *r;

    /* nothing to stop, count or dump yet: every PE gets the error */
    SYMM_EXPECT(symm_trace_stop(), SYMM_ERR_INVALID_ARG);
    expect_msg("no trace is recording");
    SYMM_EXPECT(symm_trace_dump(out), SYMM_ERR_INVALID_ARG);
    expect_msg("no trace was started");
    SYMM_EXPECT(symm_trace_counts(&rec, &drop), SYMM_ERR_INVALID_ARG);
    TEST_ASSERT(rec == 1 && drop == 1, "outputs untouched on failure");
    TEST_ASSERT(!symm_trace_active(), "not recording");
    if (n > 1) {
        SYMM_EXPECT(symm_trace_start(me == 0 ? 100 : 200), SYMM_ERR_MISMATCH);
        expect_msg("capacities differ: PE 0 asked for 100 events, PE 1 for 200");
    }
    SYMM_EXPECT(symm_trace_start((size_t)1 << 40), SYMM_ERR_INVALID_ARG);
    expect_msg("is not in 1..");
    SYMM_EXPECT(symm_trace_name(-1, "x"), SYMM_ERR_INVALID_ARG);
    SYMM_EXPECT(symm_trace_name(1, "a name far longer than the sixty-three bytes a region name may have ...."),
                SYMM_ERR_INVALID_ARG);
    SYMM_CHECK(symm_trace_name(7, "not this"));
    SYMM_CHECK(symm_trace_name(7, "ring"));   /* replaced */
    SYMM_CHECK(symm_trace_name(8, "gone"));
    SYMM_CHECK(symm_trace_name(8, NULL));     /* removed */

    SYMM_CHECK(symm_malloc(BLOCKS * sizeof(uint64_t), (void **)&sig));
    SYMM_CHECK(symm_trace_start(BLOCKS * ITERS * 4));
    TEST_ASSERT(symm_trace_active(), "recording");
    SYMM_EXPECT(symm_trace_start(BLOCKS * ITERS * 4), SYMM_ERR_INVALID_ARG);
    expect_msg("already recording");
    TEST_ASSERT(symm_trace_active(), "still recording after the refused start");
    SYMM_CHECK(symm_team_ctx_copy(symm_team_world(), &c));
    r = (symm_trace_ring_t *)(uintptr_t)c.trace;
    TEST_ASSERT(r->sub_cap == BLOCKS * ITERS * 4, "sub_cap %u", r->sub_cap);
    {
        symm_ctx_t node;
        SYMM_CHECK(symm_team_ctx_copy(symm_team_node(), &node));
        TEST_ASSERT(node.trace == c.trace, "every team's context points at the PE's trace");
    }
    uint64_t k = record_ring(sig);
    SYMM_CHECK(symm_trace_counts(&rec, &drop));
    TEST_ASSERT(rec == k && drop == EXTRA_CLAIMS, "counts %llu/%llu, expected %llu/%d", (unsigned long long)rec,
                (unsigned long long)drop, (unsigned long long)k, EXTRA_CLAIMS);
    SYMM_CHECK(symm_trace_stop());
    TEST_ASSERT(!symm_trace_active(), "stopped");
    SYMM_CHECK(symm_team_ctx_copy(symm_team_world(), &c));
    TEST_ASSERT(c.trace == 0, "a stopped trace is off the context");
    TEST_ASSERT(r->sub_cap == 0, "a stopped ring drops whatever still records into it");
    SYMM_CHECK(symm_trace_counts(&rec, &drop));
    TEST_ASSERT(rec == k && drop == EXTRA_CLAIMS, "counts kept after the stop");
    SYMM_EXPECT(symm_trace_dump(me == 0 ? NULL : out), SYMM_ERR_INVALID_ARG);
    expect_msg(me == 0 ? "path is NULL on PE 0" : "symm_trace_dump failed on PE 0");
    SYMM_EXPECT(symm_trace_dump(me == 0 ? "/nonexistent-dir/x.json" : NULL), SYMM_ERR_INVALID_ARG);
    expect_msg(me == 0 ? "cannot write /nonexistent-dir/x.json" : "failed on PE 0");
    SYMM_CHECK(symm_trace_dump(me == 0 ? out : NULL));

    /* a second trace reuses the buffer, starts empty, and may be dumped while it records */
    SYMM_CHECK(symm_trace_start(0)); /* SYMM_TRACE_CAPACITY (64 in this test's environment) */
    SYMM_CHECK(symm_team_ctx_copy(symm_team_world(), &c));
    r = (symm_trace_ring_t *)(uintptr_t)c.trace;
    TEST_ASSERT(r->sub_cap == 64, "the capacity from SYMM_TRACE_CAPACITY, got %u", r->sub_cap);
    SYMM_CHECK(symm_trace_counts(&rec, &drop));
    TEST_ASSERT(rec == 0 && drop == 0, "the new trace is empty");
    SYMM_CHECK(symm_trace_dump(me == 0 ? "trace_host_empty.json" : NULL));
    TEST_ASSERT(symm_trace_active(), "a dump does not stop the trace");
    SYMM_CHECK(symm_free(sig));
    /* finalize with a trace recording: it goes with the runtime */
}

int main(int argc, char **argv) {
    if (argc != 3 && !(argc == 2 && !strcmp(argv[1], "auto"))) {
        fprintf(stderr, "usage: test_trace_host calls OUT.json | test_trace_host auto\n");
        return 2;
    }
    SYMM_EXPECT(symm_trace_start(10), SYMM_ERR_NOT_INITIALIZED);
    SYMM_CHECK(symm_init());
    TEST_ASSERT(!symm_trace_library_traced() || symm_trace_library_traced(), "a plain query");
    if (!strcmp(argv[1], "auto")) {
        uint64_t *sig = NULL;
        TEST_ASSERT(symm_trace_active(), "SYMM_TRACE_FILE starts the trace at init");
        SYMM_CHECK(symm_trace_name(7, "ring"));
        SYMM_CHECK(symm_malloc(BLOCKS * sizeof(uint64_t), (void **)&sig));
        record_ring(sig);
    } else {
        run_calls(argv[2]);
    }
    SYMM_CHECK(symm_finalize());
    SYMM_EXPECT(symm_trace_counts(NULL, NULL), SYMM_ERR_NOT_INITIALIZED);
    TEST_ASSERT(!symm_trace_active(), "no trace after finalize");
    printf("PE ok\n");
    return 0;
}
