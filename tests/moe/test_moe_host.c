/*
 * test_moe_host.c - symm_moe_create's collective checks over the host
 * backend (no GPU), run as N processes by mp_driver:
 *   - before init: SYMM_ERR_NOT_INITIALIZED;
 *   - a bad configuration: SYMM_ERR_INVALID_ARG naming the field, on every PE;
 *   - configurations that differ between PEs: SYMM_ERR_MISMATCH on every PE,
 *     naming the field and both values;
 *   - a good configuration: SYMM_ERR_UNSUPPORTED (the host backend has no GPU
 *     kernels), and the runtime still works after all of them; with
 *     SYMM_MOE_HT_COMBINE=sideways (moe_host_schedule_N), or overlap:S,
 *     overlap-async:S or overlap-ring:S with S not a number in 1..15, or
 *     pull:S or pull-lanes:S with S not a number in 1..6, or
 *     SYMM_MOE_HT_DISPATCH=rows, or SYMM_MOE_LL_PROBE=sometimes (moe_host_probe_2),
 *     SYMM_ERR_INVALID_ARG naming the variable and its value instead;
 *   - calls on a NULL handle fail cleanly (the SM budget's and the routes' too); destroy(NULL)
 *     is a no-op.
 * With argv[1] "packets-mismatch": SYMM_MOE_PACKETS=0 on the last PE only
 * (SYMM_ERR_MISMATCH on every PE, naming both values); "packets-bad": a value
 * that is no mode (SYMM_ERR_INVALID_ARG on every PE, naming the variable);
 * "probe-mismatch": SYMM_MOE_LL_PROBE=hop on the last PE only (SYMM_ERR_MISMATCH
 * on every PE, naming both values); "small-mismatch": SYMM_MOE_LL_SMALL=0 on the last PE
 * only (likewise); "pull-mismatch": SYMM_MOE_HT_COMBINE=pull on the last PE only
 * (likewise: pull speaks another protocol than the other schedules); "llc-mismatch":
 * SYMM_MOE_LL_COMBINE=partial on the last PE only (likewise); "llc-bad": a value that is no
 * mode (SYMM_ERR_INVALID_ARG on every PE, after the exchange).
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdlib.h>
#include <string.h>

#include "symm_test.h"
#include "symm/symm_moe.h"

static symm_moe_config_t good(void) {
    symm_moe_config_t c;
    memset(&c, 0, sizeof(c));
    c.mode = SYMM_MOE_LOW_LATENCY;
    c.max_num_tokens = 16;
    c.num_experts = 8;
    c.experts_per_token = 2;
    c.hidden_dim = 256;
    c.hidden_dim_bytes = 512;
    c.dp_size = 1;
    return c;
}

static void expect_msg(const char *needle) {
    if (strstr(symm_last_error(), needle) == NULL)
        TEST_FAIL("message '%s' lacks '%s'", symm_last_error(), needle);
}

/* SYMM_MOE_PACKETS set per PE before init (init reads the environment). */
static int packets_case(const char *how) {
    const char *rank = getenv("RANK"), *world = getenv("WORLD_SIZE");
    const int mismatch = strcmp(how, "packets-mismatch") == 0, probe = strcmp(how, "probe-mismatch") == 0;
    const int small = strcmp(how, "small-mismatch") == 0, pull = strcmp(how, "pull-mismatch") == 0;
    const int llc = strcmp(how, "llc-mismatch") == 0, llc_bad = strcmp(how, "llc-bad") == 0;
    symm_moe_config_t c = good();
    symm_moe_t *h = NULL;
    int n;
    TEST_ASSERT(rank && world, "run under mp_driver (RANK, WORLD_SIZE)");
    TEST_ASSERT(mismatch || probe || small || pull || llc || llc_bad || strcmp(how, "packets-bad") == 0,
                "unknown case %s", how);
    if (llc)
        setenv("SYMM_MOE_LL_COMBINE", atoi(rank) == atoi(world) - 1 ? "partial" : "rows", 1);
    else if (llc_bad)
        setenv("SYMM_MOE_LL_COMBINE", "halves", 1);
    else if (pull)
        setenv("SYMM_MOE_HT_COMBINE", atoi(rank) == atoi(world) - 1 ? "pull" : "overlap", 1);
    else if (small)
        setenv("SYMM_MOE_LL_SMALL", atoi(rank) == atoi(world) - 1 ? "0" : "1", 1);
    else if (probe)
        setenv("SYMM_MOE_LL_PROBE", atoi(rank) == atoi(world) - 1 ? "hop" : "", 1);
    else if (mismatch)
        setenv("SYMM_MOE_PACKETS", atoi(rank) == atoi(world) - 1 ? "0" : "auto", 1);
    else
        setenv("SYMM_MOE_PACKETS", "sometimes", 1);
    SYMM_CHECK(symm_init());
    n = symm_n_pes();
    c.num_experts = (size_t)8 * (size_t)n;
    if (llc && n > 1) {
        char want[96];
        SYMM_EXPECT(symm_moe_create(&c, NULL, &h), SYMM_ERR_MISMATCH);
        snprintf(want, sizeof want, "SYMM_MOE_LL_COMBINE is rows on PE 0 but partial on PE %d", n - 1);
        expect_msg(want);
    } else if (llc_bad) { /* on every PE, after the exchange (no PE left waiting in it) */
        SYMM_EXPECT(symm_moe_create(&c, NULL, &h), SYMM_ERR_INVALID_ARG);
        expect_msg("SYMM_MOE_LL_COMBINE=\"halves\": expected rows");
    } else if (pull && n > 1) {
        char want[96];
        SYMM_EXPECT(symm_moe_create(&c, NULL, &h), SYMM_ERR_MISMATCH);
        snprintf(want, sizeof want, "SYMM_MOE_HT_COMBINE is not pull on PE 0 but pull on PE %d", n - 1);
        expect_msg(want);
    } else if (small && n > 1) {
        char want[96];
        SYMM_EXPECT(symm_moe_create(&c, NULL, &h), SYMM_ERR_MISMATCH);
        snprintf(want, sizeof want, "SYMM_MOE_LL_SMALL is 1 on PE 0 but 0 on PE %d", n - 1);
        expect_msg(want);
    } else if (probe && n > 1) {
        char want[96];
        SYMM_EXPECT(symm_moe_create(&c, NULL, &h), SYMM_ERR_MISMATCH);
        snprintf(want, sizeof want, "SYMM_MOE_LL_PROBE is unset on PE 0 but hop on PE %d", n - 1);
        expect_msg(want);
    } else if (mismatch && n > 1) {
        char want[96];
        SYMM_EXPECT(symm_moe_create(&c, NULL, &h), SYMM_ERR_MISMATCH);
        snprintf(want, sizeof want, "SYMM_MOE_PACKETS is auto on PE 0 but 0 on PE %d", n - 1);
        expect_msg(want);
    } else if (mismatch || probe || small || pull || llc) {
        SYMM_EXPECT(symm_moe_create(&c, NULL, &h), SYMM_ERR_UNSUPPORTED); /* one PE: nothing to differ */
    } else {
        SYMM_EXPECT(symm_moe_create(&c, NULL, &h), SYMM_ERR_INVALID_ARG);
        expect_msg("SYMM_MOE_PACKETS=\"sometimes\": expected auto");
        TEST_ASSERT(symm_moe_heap_bytes(&c, n) == 0, "heap_bytes refuses the bad value too");
    }
    TEST_ASSERT(h == NULL, "no handle on failure");
    SYMM_CHECK(symm_finalize());
    printf("moe host %s: pe %s of %d passed\n", how, rank, n);
    return 0;
}

int main(int argc, char **argv) {
    symm_moe_t *h = NULL;
    symm_moe_config_t c = good();
    int me, n;
    void *p = NULL;
    const char *sched = getenv("SYMM_MOE_HT_COMBINE");
    const int bad_schedule = sched != NULL && strcmp(sched, "sideways") == 0;
    const char *warps = sched == NULL                                ? NULL
                        : strncmp(sched, "overlap:", 8) == 0       ? sched + 8
                        : strncmp(sched, "overlap-async:", 14) == 0 ? sched + 14
                        : strncmp(sched, "overlap-ring:", 13) == 0 ? sched + 13
                                                                    : NULL;
    const char *stages = sched == NULL                             ? NULL
                         : strncmp(sched, "pull:", 5) == 0       ? sched + 5
                         : strncmp(sched, "pull-lanes:", 11) == 0 ? sched + 11
                                                                 : NULL;
    const int bad_warps = (warps != NULL && (warps[0] == '\0' || warps[strspn(warps, "0123456789")] != '\0' ||
                                             atoi(warps) < 1 || atoi(warps) > 15)) ||
                          (stages != NULL && (stages[0] == '\0' || stages[strspn(stages, "0123456789")] != '\0' ||
                                              atoi(stages) < 1 || atoi(stages) > 6)) ||
                          (sched != NULL && strncmp(sched, "pull", 4) == 0 && sched[4] != '\0' && sched[4] != ':' &&
                           strcmp(sched, "pull-lanes") != 0 && strncmp(sched, "pull-lanes:", 11) != 0);
    const char *dform = getenv("SYMM_MOE_HT_DISPATCH");
    const int bad_dform = dform != NULL && strcmp(dform, "warps") != 0 && strcmp(dform, "batches") != 0;
    const char *probe = getenv("SYMM_MOE_LL_PROBE");
    const int bad_probe = probe != NULL && strcmp(probe, "sometimes") == 0;
    if (argc > 1)
        return packets_case(argv[1]);
    SYMM_EXPECT(symm_moe_create(&c, NULL, &h), SYMM_ERR_NOT_INITIALIZED);
    SYMM_CHECK(symm_init());
    me = symm_my_pe();
    n = symm_n_pes();

    c.hidden_dim_scale_bytes = 12;
    SYMM_EXPECT(symm_moe_create(&c, NULL, &h), SYMM_ERR_INVALID_ARG);
    expect_msg("hidden_dim_scale_bytes 12");
    TEST_ASSERT(h == NULL, "no handle on failure");
    if (n > 1) {
        c = good();
        c.num_experts = (size_t)(2 * n + 1);
        SYMM_EXPECT(symm_moe_create(&c, NULL, &h), SYMM_ERR_INVALID_ARG);
        expect_msg("num_experts");
    }

    c = good();
    c.num_experts = (size_t)8 * (size_t)n;
    c.dp_size = n + 1;
    SYMM_EXPECT(symm_moe_create(&c, NULL, &h), SYMM_ERR_INVALID_ARG);
    expect_msg("is not a multiple of dp_size");

    if (n > 1) {
        c = good();
        c.num_experts = (size_t)8 * (size_t)n;
        c.max_num_tokens = me == n - 1 ? 32 : 16;
        SYMM_EXPECT(symm_moe_create(&c, NULL, &h), SYMM_ERR_MISMATCH);
        expect_msg("max_num_tokens is 16 on PE 0 but 32");
    }

    c = good();
    c.num_experts = (size_t)8 * (size_t)n;
    if (bad_schedule || bad_warps) { /* checked before the backend: the same on a GPU */
        SYMM_EXPECT(symm_moe_create(&c, NULL, &h), SYMM_ERR_INVALID_ARG);
        expect_msg("it takes auto, split, serial, serial-warps, overlap[:S], overlap-async[:S] or overlap-ring[:S] "
                   "(S: the sending warps of a block, 1..15), or pull[:S] or pull-lanes[:S] (S: the stages of a reducing "
                   "warp, 1..6)");
        expect_msg(bad_schedule ? "SYMM_MOE_HT_COMBINE is 'sideways'" : sched);
        TEST_ASSERT(h == NULL, "no handle on failure");
    } else if (bad_dform) {
        SYMM_EXPECT(symm_moe_create(&c, NULL, &h), SYMM_ERR_INVALID_ARG);
        expect_msg("it takes warps or batches");
        expect_msg(dform);
        TEST_ASSERT(h == NULL, "no handle on failure");
    } else if (bad_probe) {
        SYMM_EXPECT(symm_moe_create(&c, NULL, &h), SYMM_ERR_INVALID_ARG);
        expect_msg("SYMM_MOE_LL_PROBE is 'sometimes'; it takes empty, hop, stamps or twice (or unset)");
        TEST_ASSERT(h == NULL, "no handle on failure");
    } else {
        SYMM_EXPECT(symm_moe_create(&c, NULL, &h), SYMM_ERR_UNSUPPORTED);
        expect_msg("native backend");
    }
    TEST_ASSERT(symm_moe_heap_bytes(&c, n) > 0, "heap_bytes of a good configuration");
    SYMM_EXPECT(symm_moe_create(&c, symm_team_node(), NULL), SYMM_ERR_INVALID_ARG);

    SYMM_EXPECT(symm_moe_dispatch(NULL, NULL, SYMM_MOE_SEND_RECV, NULL), SYMM_ERR_INVALID_ARG);
    SYMM_EXPECT(symm_moe_combine(NULL, NULL, SYMM_MOE_SEND_RECV, NULL), SYMM_ERR_INVALID_ARG);
    SYMM_EXPECT(symm_moe_ht_dispatch(NULL, NULL, SYMM_MOE_SEND_RECV, NULL), SYMM_ERR_INVALID_ARG);
    SYMM_EXPECT(symm_moe_check(NULL, NULL), SYMM_ERR_INVALID_ARG);
    {
        int v = -7;
        SYMM_EXPECT(symm_moe_set_num_sms(NULL, 8), SYMM_ERR_INVALID_ARG);
        SYMM_EXPECT(symm_moe_get_num_sms(NULL, &v), SYMM_ERR_INVALID_ARG);
        SYMM_EXPECT(symm_moe_launched_blocks(NULL, NULL, &v), SYMM_ERR_INVALID_ARG);
        TEST_ASSERT(v == -7, "outputs are set only on success");
    }
    {
        const uint64_t *routes = (const uint64_t *)&c;
        size_t rows = 7;
        SYMM_EXPECT(symm_moe_ll_routes(NULL, &routes, &rows), SYMM_ERR_INVALID_ARG);
        expect_msg("symm_moe_ll_routes: NULL handle");
        TEST_ASSERT(routes == (const uint64_t *)&c && rows == 7, "routes: outputs are set only on success");
    }
    {
        int partial = 7;
        SYMM_EXPECT(symm_moe_ll_partial(NULL, &partial), SYMM_ERR_INVALID_ARG);
        expect_msg("symm_moe_ll_partial: NULL handle");
        TEST_ASSERT(partial == 7, "partial: the output is set only on success");
    }
    SYMM_CHECK(symm_moe_destroy(NULL));
    TEST_ASSERT(symm_moe_local_experts(NULL) == 0, "local experts of NULL");

    /* the failed creations left the runtime usable and nothing allocated */
    SYMM_CHECK(symm_malloc(4096, &p));
    SYMM_CHECK(symm_free(p));
    SYMM_CHECK(symm_finalize());
    printf("moe host: pe %d of %d passed\n", me, n);
    return 0;
}
