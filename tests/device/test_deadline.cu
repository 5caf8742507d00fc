/*
 * test_deadline.cu - device waits that can never complete must stop the
 * kernel with a message instead of hanging (docs/design.md decision 6).
 *
 *   timeout  every PE waits on a local word nobody writes, with a comparison
 *            that depends on the PE (==, !=, >, >=, <, <=, signal and
 *            wait_until_i64); run with SYMM_WAIT_TIMEOUT=1. ctest matches
 *            the "wait timed out" line the device prints.
 *   abort    the last PE exits while the others wait for it (no deadline);
 *            the abort flag the runtime raises must stop the waits with the
 *            "aborting wait ... PE <n> died" line.
 * In both, the kernel must fail (the host sees an error) and the process
 * exits 0 without finalize (the CUDA context is gone after the trap).
 *
 * Usage: test_device_deadline timeout|abort <npes>   (under symmrun)
 */
#include <unistd.h>
#include "device_test.h"

__global__ static void wait_kernel(const symm_ctx_t *ctx, uint64_t *sig, int64_t *word, int which) {
    switch (which) {
    case 0: symm_signal_wait_until(ctx, sig, SYMM_CMP_EQ, 12345); break;
    /* *word is 10; none of these can hold */
    case 1: symm_wait_until_i64(ctx, word, SYMM_CMP_NE, 10); break;
    case 2: symm_wait_until_i64(ctx, word, SYMM_CMP_GT, 10); break;
    case 3: symm_wait_until_i64(ctx, word, SYMM_CMP_GE, 11); break;
    case 4: symm_wait_until_i64(ctx, word, SYMM_CMP_LT, 10); break;
    default: symm_wait_until_i64(ctx, word, SYMM_CMP_LE, 9); break;
    }
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "timeout") != 0 && strcmp(argv[1], "abort") != 0)) {
        fprintf(stderr, "usage: %s timeout|abort [npes]\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    int is_abort = strcmp(argv[1], "abort") == 0;
    dt_env_t e;
    dt_init(&e, argc > 2 ? atoi(argv[2]) : 1);
    if (is_abort) {
        TEST_ASSERT(e.npes >= 2, "abort needs a peer");
        TEST_ASSERT(e.hctx.abort_flag != 0, "the context has no abort flag");
    } else {
        /* Without a deadline this test would hang: refuse to run. */
        TEST_ASSERT(e.hctx.timeout_ns != 0, "SYMM_WAIT_TIMEOUT is not set (the context has no deadline)");
    }
    uint64_t *sig;
    int64_t *word;
    SYMM_CHECK(symm_calloc(1, sizeof(uint64_t), (void **)&sig));
    SYMM_CHECK(symm_malloc(sizeof(int64_t), (void **)&word));
    int64_t ten = 10;
    CUDA_CHECK(cudaMemcpy(word, &ten, sizeof ten, cudaMemcpyHostToDevice));
    SYMM_CHECK(symm_barrier_all());
    if (is_abort && e.me == e.npes - 1) {
        printf("PE %d: exiting while the others wait for it\n", e.me);
        fflush(stdout);
        _exit(0);
    }
    wait_kernel<<<1, 1>>>(e.ctx, sig, word, is_abort ? 0 : e.me % 6);
    CUDA_CHECK(cudaGetLastError());
    cudaError_t err = cudaDeviceSynchronize();
    TEST_ASSERT(err != cudaSuccess, "a wait that cannot complete returned");
    printf("test_device_deadline %s: PE %d: the waiting kernel stopped with %s, as it should\n", argv[1], e.me,
           cudaGetErrorName(err));
    fflush(stdout);
    _exit(0);
}
