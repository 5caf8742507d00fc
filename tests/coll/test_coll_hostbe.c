/*
 * test_coll_hostbe.c - the stream collectives over the host backend (no GPU),
 * run as N processes by mp_driver: the backend carries no GPU collectives
 * (its ops table lacks SYMM__BE_KCAP_COLL), so every collective fails with
 * SYMM_ERR_UNSUPPORTED and a message that names the call and the backend,
 * before it touches its buffers, on every PE; nothing runs, and the runtime
 * still works after them.
 */
#include <string.h>

#include "symm_test.h"
#include "symm/symm_coll.h"

static void expect_unsupported(symm_status_t st, const char *call) {
    char want[128];
    if (st != SYMM_ERR_UNSUPPORTED)
        TEST_FAIL("%s: got %d (%s: %s), expected SYMM_ERR_UNSUPPORTED\n", call, (int)st, symm_strerror(st),
                  symm_last_error());
    snprintf(want, sizeof want, "%s: the host backend has no GPU collectives", call);
    if (strstr(symm_last_error(), want) == NULL)
        TEST_FAIL("message '%s' lacks '%s'\n", symm_last_error(), want);
}

int main(void) {
    size_t counts[8] = {0}, displs[8] = {0};
    void *a = NULL, *b = NULL;
    int me, n;
    SYMM_CHECK(symm_init());
    me = symm_my_pe();
    n = symm_n_pes();
    TEST_ASSERT(n <= 8, "at most 8 PEs");
    SYMM_CHECK(symm_malloc(4096, &a));
    SYMM_CHECK(symm_malloc(4096, &b));

    /* buffers in the heap and out of it (NULL): the backend is refused first */
    expect_unsupported(symm_all_reduce(a, b, 16, SYMM_DTYPE_F32, SYMM_OP_SUM, NULL, NULL), "symm_all_reduce");
    expect_unsupported(symm_all_reduce_ex(NULL, NULL, 16, SYMM_DTYPE_F32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT,
                                          SYMM_COLL_ALGO_AUTO, NULL, NULL), "symm_all_reduce");
    expect_unsupported(symm_reduce_scatter(a, b, 4, SYMM_DTYPE_F32, SYMM_OP_SUM, NULL, NULL), "symm_reduce_scatter");
    expect_unsupported(symm_all_gather(a, b, 4, SYMM_DTYPE_F32, NULL, NULL), "symm_all_gather");
    expect_unsupported(symm_all_to_all(a, b, 4, SYMM_DTYPE_F32, NULL, NULL), "symm_all_to_all");
    expect_unsupported(symm_broadcast(a, b, 4, SYMM_DTYPE_F32, 0, NULL, NULL), "symm_broadcast");
    expect_unsupported(symm_all_to_allv(a, counts, displs, b, counts, displs, SYMM_DTYPE_F32, NULL, NULL),
                       "symm_all_to_allv");
    /* on the node team too */
    expect_unsupported(symm_all_gather(a, b, 4, SYMM_DTYPE_F32, symm_team_node(), NULL), "symm_all_gather");

    /* nothing ran, and the runtime works */
    TEST_ASSERT(strcmp(symm_coll_last_algo(), "none") == 0, "last algorithm '%s' after refused calls",
                symm_coll_last_algo());
    SYMM_CHECK(symm_barrier_all());
    SYMM_CHECK(symm_free(b));
    SYMM_CHECK(symm_free(a));
    SYMM_CHECK(symm_finalize());
    printf("coll host backend: pe %d of %d passed\n", me, n);
    return 0;
}
