/*
 * test_coll_mismatch.cu - a collective whose count differs on one PE stops
 * every algorithm's kernel with a message naming both calls (no result
 * mixed from two calls).
 *
 *   test_coll_mismatch <npes> <case>
 *
 * The last PE passes more elements than the others (few enough that it takes
 * the same algorithm: an _ex call or SYMM_COLL_ALGO fixes it where the size
 * alone would not). The kernel must stop: the PEs print
 *   symm: PE a: device collective: PE b called <call> with N bytes ...
 * (ctest matches it), and this program exits 1 if a call completes. A run of
 * its own per case: the trap ends the CUDA context.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symm/symm.h"
#include "symm/symm_device.h"
#include "symm_test.h"
#include "symm_test_cuda.h"
#include "coll/coll.h" /* symm__coll_tune_set: the chain cases */

#define POOL ((size_t)16 << 20)

/* A block-scope device all-reduce with a given algorithm. */
__global__ void k_dev_ar(const symm_ctx_t *ctx, float *dst, const float *src, size_t n, int algo) {
    symm_all_reduce_ex_block(ctx, dst, src, n, SYMM_DTYPE_F32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT, algo);
}

typedef struct mcase {
    const char *name;
    int min_pes;   /* the algorithm needs this many PEs */
    size_t count;  /* elements (f32) per PE on the others; the last PE adds `extra` */
    size_t extra;
    int algo;      /* _ex algorithm (reductions), -1: the call's AUTO */
} mcase_t;

static const mcase_t cases[] = {
    {"ar_packet", 2, 1000, 100, SYMM_COLL_ALGO_AUTO},
    {"ar_packet2", 3, 70000, 1000, SYMM_COLL_ALGO_AUTO},        /* 280000 B: two-shot packets */
    {"ar_oneshot", 2, 16384, 256, SYMM_COLL_ALGO_ONESHOT},
    {"ar_stores", 3, 262144, 4096, SYMM_COLL_ALGO_TWOSHOT},     /* 1 MiB: two-shot by stores */
    {"ar_twoshot", 2, 1572864, 4096, SYMM_COLL_ALGO_TWOSHOT},   /* 6 MiB: the load form */
    {"ar_push", 2, 262144, 4096, SYMM_COLL_ALGO_PUSH},
    {"rs_packet", 2, 1000, 100, SYMM_COLL_ALGO_PACKET},
    {"rs_direct", 2, 65536, 1024, SYMM_COLL_ALGO_TWOSHOT},
    {"rs_push", 2, 65536, 1024, SYMM_COLL_ALGO_PUSH},
    {"rs_oneshot", 2, 16384, 256, SYMM_COLL_ALGO_ONESHOT},
    {"rs_ce", 2, 65536, 1024, SYMM_COLL_ALGO_AUTO},   /* SYMM_COLL_TUNE: the copy-engine pipelines (ctest) */
    {"ar_ce", 2, 65536, 1024, SYMM_COLL_ALGO_AUTO},   /* a multiple of 16 n bytes on every PE */
    {"ag_packet", 2, 1000, 100, -1},
    {"ag_direct", 2, 65536, 1024, -1},   /* SYMM_COLL_ALGO=twoshot (ctest) */
    {"a2a_packet", 2, 1000, 100, -1},
    {"a2a_direct", 2, 65536, 1024, -1},  /* SYMM_COLL_ALGO=twoshot */
    {"bcast_packet", 2, 1000, 100, -1},
    {"bcast_packet2", 3, 51200, 1024, -1}, /* 200 KiB: two hops */
    {"bcast_direct", 2, 65536, 1024, -1},  /* SYMM_COLL_ALGO=twoshot */
    {"bcast_ce", 2, 65536, 1024, -1},      /* SYMM_COLL_TUNE */
    {"bcast_chain", 2, 65536, 1024, -1},   /* the chain, forced here (symm__coll_tune_set) */
    {"bcast_chain_chunk", 2, 65536, 0, -1}, /* the same count, another chunk on the last PE */
    {"dev_ar_packet", 2, 1000, 100, SYMM_COLL_ALGO_PACKET},
    {"dev_ar_oneshot", 2, 4000, 100, SYMM_COLL_ALGO_ONESHOT},
    {"dev_ar_twoshot", 2, 4000, 100, SYMM_COLL_ALGO_TWOSHOT},
};

int main(int argc, char **argv) {
    int need = argc > 1 ? atoi(argv[1]) : 2, me, npes;
    const char *name = argc > 2 ? argv[2] : "";
    const mcase_t *c = NULL;
    const symm_ctx_t *ctx;
    float *a, *b;
    size_t n;
    int whole;
    symm_status_t st = SYMM_SUCCESS;
    cudaError_t err;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (strcmp(cases[i].name, name) == 0)
            c = &cases[i];
    TEST_ASSERT(c != NULL, "usage: %s <npes> <case>: unknown case '%s'", argv[0], name);
    symm_test_require_pes(need);
    SYMM_CHECK(symm_init());
    me = symm_my_pe();
    npes = symm_n_pes();
    if (npes < need || npes < c->min_pes) {
        symm_finalize();
        TEST_SKIP("needs %d PEs, run with %d", need > c->min_pes ? need : c->min_pes, npes);
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    SYMM_CHECK(symm_ctx(&ctx));
    SYMM_CHECK(symm_calloc(1, POOL, (void **)&a));
    SYMM_CHECK(symm_calloc(1, POOL, (void **)&b));
    n = c->count + (me == npes - 1 ? c->extra : 0);
    /* all-reduce and broadcast buffers hold n elements; the others n per PE */
    whole = strncmp(c->name, "ar_", 3) == 0 || strncmp(c->name, "bcast_", 6) == 0 || strncmp(c->name, "dev_", 4) == 0;
    TEST_ASSERT(n * 4 * (whole ? 1 : (size_t)npes) <= POOL, "case %s does not fit the buffers", c->name);
    if (strncmp(c->name, "bcast_chain", 11) == 0) {
        SYMM_CHECK(symm__coll_tune_set("bcast_chain_min", 1));
        if (strcmp(c->name, "bcast_chain_chunk") == 0)
            SYMM_CHECK(symm__coll_tune_set("bcast_chain_chunk", me == npes - 1 ? 8192 : 16384));
    }
    SYMM_CHECK(symm_barrier_all());
    if (strncmp(c->name, "ar_", 3) == 0)
        st = symm_all_reduce_ex(a, b, n, SYMM_DTYPE_F32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT, (symm_coll_algo_t)c->algo,
                                NULL, NULL);
    else if (strncmp(c->name, "rs_", 3) == 0)
        st = symm_reduce_scatter_ex(a, b, n, SYMM_DTYPE_F32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT,
                                    (symm_coll_algo_t)c->algo, NULL, NULL);
    else if (strncmp(c->name, "ag_", 3) == 0)
        st = symm_all_gather(a, b, n, SYMM_DTYPE_F32, NULL, NULL);
    else if (strncmp(c->name, "a2a_", 4) == 0)
        st = symm_all_to_all(a, b, n, SYMM_DTYPE_F32, NULL, NULL);
    else if (strncmp(c->name, "bcast_", 6) == 0)
        st = symm_broadcast(a, b, n, SYMM_DTYPE_F32, 0, NULL, NULL);
    else
        k_dev_ar<<<1, 256>>>(ctx, b, a, n, c->algo);
    TEST_ASSERT(st == SYMM_SUCCESS, "case %s: the call failed on the host: %s (%s)", c->name, symm_strerror(st),
                symm_last_error());
    printf("test_coll_mismatch %s: PE %d called with %zu elements (algorithm %s)\n", c->name, me, n,
           symm_coll_last_algo());
    err = cudaDeviceSynchronize();
    if (err == cudaSuccess) {
        printf("FAIL test_coll_mismatch %s: PE %d: the mismatched call completed without an error\n", c->name, me);
        fflush(stdout);
        _exit(1);
    }
    printf("test_coll_mismatch %s: PE %d: the kernel stopped with %s, as it should\n", c->name, me,
           cudaGetErrorName(err));
    fflush(stdout);
    _exit(0);
}
