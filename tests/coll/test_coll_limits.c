/*
 * test_coll_limits.c - AUTO's limits (src/coll/coll_limits.c): the table's
 * column for each team size, SYMM_COLL_TUNE over it (sizes, "never", bad
 * names and values refused with a message), and the tuning overrides over
 * both. CPU only: the file is built with the core sources.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "core/log.h"
#include "coll/coll.h"
#include "symm_test.h"

/* The table's column c (0: 2 PEs, 1: 3-4 PEs, 2: 5+), straight from the macro. */
static void column(int c, symm__coll_limits_t *out) {
#define COL(f, n2, n4, n8, help) out->f = c == 0 ? (uint64_t)(n2) : c == 1 ? (uint64_t)(n4) : (uint64_t)(n8);
    SYMM__COLL_LIMITS(COL)
#undef COL
}

static void load_env(const char *tune) {
    symm__env_t env;
    if (tune)
        setenv("SYMM_COLL_TUNE", tune, 1);
    else
        unsetenv("SYMM_COLL_TUNE");
    TEST_ASSERT(symm__env_load(&env) == SYMM_SUCCESS, "env load: %s", symm_last_error());
    symm__env_set(&env);
}

static void expect_lim(int n, const symm__coll_limits_t *want, const char *what) {
    symm__coll_limits_t got;
    TEST_ASSERT(symm__coll_limits(n, &got) == SYMM_SUCCESS, "%s: limits for %d PEs: %s", what, n, symm_last_error());
#define CMP(f, n2, n4, n8, help)                                                                    \
    TEST_ASSERT(got.f == want->f, "%s, %d PEs: " #f " is %llu, want %llu", what, n, (unsigned long long)got.f, \
                (unsigned long long)want->f);
    SYMM__COLL_LIMITS(CMP)
#undef CMP
}

static void expect_env_error(const char *tune, const char *needle) {
    symm__coll_limits_t got;
    load_env(tune);
    TEST_ASSERT(symm__coll_limits(4, &got) == SYMM_ERR_ENV, "SYMM_COLL_TUNE=\"%s\" was accepted", tune);
    TEST_ASSERT(strstr(symm_last_error(), "SYMM_COLL_TUNE") && strstr(symm_last_error(), needle),
                "SYMM_COLL_TUNE=\"%s\": the message names the entry (%s): %s", tune, needle, symm_last_error());
}

int main(void) {
    symm__coll_limits_t want;
    static const int sizes[][2] = {{1, 0}, {2, 0}, {3, 1}, {4, 1}, {5, 2}, {8, 2}, {64, 2}};
    load_env(NULL);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        column(sizes[i][1], &want);
        expect_lim(sizes[i][0], &want, "the table");
    }
    /* the columns differ where the table says they do */
    {
        symm__coll_limits_t a, b;
        column(1, &a);
        column(2, &b);
        TEST_ASSERT(a.rs_oneshot_max != b.rs_oneshot_max && a.bcast_hop1_max != b.bcast_hop1_max,
                    "the 5+ column keeps its own one-shot reduce-scatter and one-hop broadcast limits");
    }

    /* the chained broadcast stays out of AUTO until 4 and 8 GPUs measure it
     * (docs/tuning.md); SYMM_COLL_TUNE turns it on with its chunk */
    for (int c = 0; c < 3; c++) {
        column(c, &want);
        TEST_ASSERT(want.bcast_chain_min == UINT64_MAX && want.bcast_chain_chunk >= 16,
                    "column %d: bcast_chain_min never, a chunk of at least 16 bytes", c);
    }
    load_env("bcast_chain_min=4M,bcast_chain_chunk=8K");
    column(2, &want);
    want.bcast_chain_min = (uint64_t)4 << 20;
    want.bcast_chain_chunk = 8192;
    expect_lim(8, &want, "SYMM_COLL_TUNE, the chain");

    /* a space is not part of a name */
    expect_env_error("rs_ce_min=32M, bcast_ce_min=never", " bcast_ce_min");
    load_env("rs_ce_min=32M,bcast_ce_min=never,,packet_max=4096,ce_chunk=2MiB");
    for (int c = 0; c < 3; c++) {
        column(c, &want);
        want.rs_ce_min = (uint64_t)32 << 20;
        want.bcast_ce_min = UINT64_MAX;
        want.packet_max = 4096;
        want.ce_chunk = (uint64_t)2 << 20;
        expect_lim(c == 0 ? 2 : c == 1 ? 4 : 8, &want, "SYMM_COLL_TUNE");
    }
    /* overrides over SYMM_COLL_TUNE, dropped one by one and all at once */
    TEST_ASSERT(symm__coll_tune_set("rs_ce_min", 1) == SYMM_SUCCESS, "tune_set");
    TEST_ASSERT(symm__coll_tune_set("oneshot_max", 77) == SYMM_SUCCESS, "tune_set");
    column(1, &want);
    want.rs_ce_min = 1;
    want.bcast_ce_min = UINT64_MAX;
    want.packet_max = 4096;
    want.ce_chunk = (uint64_t)2 << 20;
    want.oneshot_max = 77;
    expect_lim(4, &want, "overrides");
    TEST_ASSERT(symm__coll_tune_clear("rs_ce_min") == SYMM_SUCCESS, "tune_clear");
    want.rs_ce_min = (uint64_t)32 << 20;
    expect_lim(3, &want, "one override dropped");
    symm__coll_tune_reset();
    column(1, &want);
    want.rs_ce_min = (uint64_t)32 << 20;
    want.bcast_ce_min = UINT64_MAX;
    want.packet_max = 4096;
    want.ce_chunk = (uint64_t)2 << 20;
    expect_lim(4, &want, "overrides reset");
    TEST_ASSERT(symm__coll_tune_set("no_such_limit", 1) == SYMM_ERR_INVALID_ARG &&
                    strstr(symm_last_error(), "no_such_limit"),
                "an unknown name is refused: %s", symm_last_error());
    TEST_ASSERT(symm__coll_tune_clear(NULL) == SYMM_ERR_INVALID_ARG, "clear(NULL) is refused");

    /* bad entries: each refused, naming what is wrong */
    expect_env_error("bogus=1", "bogus");
    expect_env_error("rs_ce_min=12Q", "rs_ce_min=12Q");
    expect_env_error("rs_ce_min", "rs_ce_min");
    expect_env_error("rs_ce_min=-1", "rs_ce_min=-1");
    expect_env_error("=5", "=5");
    /* and a good value after a bad one takes effect */
    load_env("bcast_hop1_max=1K");
    column(1, &want);
    want.bcast_hop1_max = 1024;
    expect_lim(4, &want, "after a bad SYMM_COLL_TUNE");
    load_env(NULL);
    printf("test_coll_limits: OK\n");
    return 0;
}
