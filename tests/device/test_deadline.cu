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
 *   crowd    2048 threads per PE wait (SYMM_WAIT_TIMEOUT=1): the PE prints
 *            one line, counting the other threads, not one per thread (the
 *            test reads its own stdout back).
 * In both, the kernel must fail (the host sees an error) and the process
 * exits 0 without finalize (the CUDA context is gone after the trap).
 *
 * Usage: test_device_deadline timeout|abort|crowd <npes>   (under symmrun)
 */
#include <errno.h>
#include <fcntl.h>
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

/* Every PE's waits start together (a device barrier, then a local go flag
 * for the other blocks), so each PE's own deadline, not a peer's earlier
 * trap (which under MPS can end every client's kernel), stops them. */
__global__ static void crowd_kernel(const symm_ctx_t *ctx, int64_t *word, volatile int *go) {
    if (blockIdx.x == 0) {
        symm_barrier_block(ctx);
        if (threadIdx.x == 0)
            *go = 1;
    }
    while (*go == 0)
        ;
    symm_wait_until_i64(ctx, word, SYMM_CMP_EQ, 11); /* *word is 10 */
}

enum { CROWD_BLOCKS = 8, CROWD_THREADS = 256 };

/* Runs the crowd with this process's stdout (where the device's printf goes)
 * in a file, then checks what was printed there. */
static void crowd(const dt_env_t *e, int64_t *word) {
    char path[] = "/tmp/symm_deadline_XXXXXX", text[8192];
    int fd = mkstemp(path), saved, *go;
    TEST_ASSERT(fd >= 0, "mkstemp: %s", strerror(errno));
    CUDA_CHECK(cudaMalloc(&go, sizeof(int)));
    CUDA_CHECK(cudaMemset(go, 0, sizeof(int)));
    fflush(stdout);
    saved = dup(1);
    TEST_ASSERT(saved >= 0 && dup2(fd, 1) == 1, "redirecting stdout: %s", strerror(errno));
    crowd_kernel<<<CROWD_BLOCKS, CROWD_THREADS>>>(e->ctx, word, go);
    cudaError_t launch = cudaGetLastError(), err = cudaDeviceSynchronize();
    fflush(stdout);
    TEST_ASSERT(dup2(saved, 1) == 1, "restoring stdout: %s", strerror(errno));
    close(saved);
    ssize_t len = pread(fd, text, sizeof(text) - 1, 0);
    close(fd);
    unlink(path);
    TEST_ASSERT(launch == cudaSuccess, "launch: %s", cudaGetErrorString(launch));
    TEST_ASSERT(err != cudaSuccess, "a wait that cannot complete returned");
    TEST_ASSERT(len >= 0, "reading the captured output: %s", strerror(errno));
    text[len] = 0;
    int lines = 0;
    unsigned others = 0;
    const char *first = NULL;
    for (const char *q = strstr(text, "wait timed out"); q; q = strstr(q + 1, "wait timed out"))
        if (lines++ == 0)
            first = q;
    TEST_ASSERT(lines == 1, "PE %d printed %d deadline lines for %d waiting threads (want 1):\n%s", e->me, lines,
                CROWD_BLOCKS * CROWD_THREADS, text);
    const char *o = strchr(first, '(');
    TEST_ASSERT(o && sscanf(o, "(%u other", &others) == 1, "no count of the others in: %s", first);
    /* all 2048 start together, so nearly all give up within the grace time */
    TEST_ASSERT(others >= 1 && others < CROWD_BLOCKS * CROWD_THREADS, "count of the others %u", others);
    printf("test_device_deadline crowd: PE %d: one line for %d waiting threads (%u counted): %s", e->me,
           CROWD_BLOCKS * CROWD_THREADS, others + 1, first);
    fflush(stdout);
    _exit(0);
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "timeout") != 0 && strcmp(argv[1], "abort") != 0 &&
                     strcmp(argv[1], "crowd") != 0)) {
        fprintf(stderr, "usage: %s timeout|abort|crowd [npes]\n", argv[0]);
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
    if (strcmp(argv[1], "crowd") == 0)
        crowd(&e, word);
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
