/*
 * test_runtime_gpu.cu - the runtime on real GPUs (native backend), run by
 * symmrun as 1, 2 or 4 PEs. argv[1] picks the scenario, argv[2] is the number
 * of GPUs it needs (it skips, on every PE, when they are not there).
 *
 *   basic    init; same pointers; each PE cudaMemcpy's random data into every
 *            peer's copy (symm_ptr) and a kernel stores through the device
 *            context (symm_ctx_ptr); each PE checks its own copy; symm_align
 *            up to 64 MiB; no heap descriptor inherited by a fork+exec child
 *   growth   allocations over several chunks keep their data, and the device
 *            context's heap_size follows the growth
 *   exhaust  SYMM_HEAP_LIMIT -> SYMM_ERR_HEAP_EXHAUSTED on every PE, mapped
 *            size unchanged, a fitting malloc works
 *   deny     SYMM_DEBUG_DENY_PEER=0:1 -> SYMM_ERR_NO_PEER_ACCESS naming the
 *            pair on every PE; then a normal init works in the same process
 *   graph    a CUDA graph of (store to next PE, stream barrier, check, stream
 *            barrier) replayed 1000 times; the same captured in global mode
 *            across the watcher's health checks, replayed 10 times
 *   abort    the last PE exits while the others run a kernel waiting for its
 *            signal: the abort flag stops the kernel and the host sees an error
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "symm_test.h"
#include "symm_test_cuda.h"
#include "symm/symm_device.h"

#define MiB ((size_t)1 << 20)

static int me, npes;

static void init_gpu(void) {
    SYMM_CHECK(symm_init());
    me = symm_my_pe();
    npes = symm_n_pes();
    int dev = -1;
    CUDA_CHECK(cudaGetDevice(&dev));
    TEST_ASSERT(symm_device() == dev, "symm_device %d, current %d", symm_device(), dev);
}

static uint64_t seed_of(int writer, int reader, int salt) {
    return 0xc0ffee00ull ^ ((uint64_t)writer << 32) ^ ((uint64_t)reader << 16) ^ (uint64_t)salt;
}

static void check_same_on_all(uint64_t v, const char *what) {
    uint64_t *all = (uint64_t *)calloc((size_t)npes, sizeof(uint64_t));
    TEST_ASSERT(all, "calloc");
    SYMM_CHECK(symm_host_allgather(&v, all, sizeof(v)));
    for (int r = 0; r < npes; r++)
        TEST_ASSERT(all[r] == v, "%s differs: PE %d has %#llx, PE %d %#llx", what, r,
                    (unsigned long long)all[r], me, (unsigned long long)v);
    free(all);
}

/* Copy a random slice into every peer's copy of p (slice me), barrier, check
 * the own copy holds every writer's slice. */
static void exchange_memcpy(unsigned char *p, size_t slice, int salt) {
    unsigned char *buf = (unsigned char *)malloc(slice);
    TEST_ASSERT(buf, "malloc");
    for (int peer = 0; peer < npes; peer++) {
        unsigned char *dst = (unsigned char *)symm_ptr(p, peer);
        TEST_ASSERT(dst, "symm_ptr(p, %d) NULL", peer);
        symm_test_fill(buf, slice, seed_of(me, peer, salt));
        CUDA_CHECK(cudaMemcpy(dst + (size_t)me * slice, buf, slice, cudaMemcpyHostToDevice));
    }
    CUDA_CHECK(cudaDeviceSynchronize()); /* a pageable copy can return before its DMA lands */
    SYMM_CHECK(symm_barrier_all());
    unsigned char *got = (unsigned char *)malloc(slice);
    TEST_ASSERT(got, "malloc");
    for (int w = 0; w < npes; w++) {
        symm_test_fill(buf, slice, seed_of(w, me, salt));
        CUDA_CHECK(cudaMemcpy(got, p + (size_t)w * slice, slice, cudaMemcpyDeviceToHost));
        TEST_ASSERT(memcmp(got, buf, slice) == 0, "slice from PE %d (salt %d) is wrong", w, salt);
    }
    free(got);
    free(buf);
    SYMM_CHECK(symm_barrier_all());
}

/* Each thread stores words into PE pe's copy, addressed through the device
 * context: a test of the context the runtime built (base, stride, size). */
__global__ void store_through_ctx(const symm_ctx_t *ctx, uint32_t *p, size_t n, int writer, int pe,
                                  int *bad) {
    uint32_t *dst = (uint32_t *)symm_ctx_ptr(ctx, p, pe);
    if (!dst) {
        *bad = 1;
        return;
    }
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[(size_t)writer * n + i] = (uint32_t)(i * 2654435761u) ^ (uint32_t)(writer << 24) ^ (uint32_t)pe;
}

/* symm_gpu_pes counts the PEs whose GPU has this PE's bus id; symm_sm_share
 * is positive, the same on every PE, at most the GPU's SMs divided among its
 * PEs (and the SMs this process may use). */
static void check_gpu_sharing(void) {
    char bus[32] = {0};
    int dev = symm_device(), gpu_pes = 0, share = 0, sms = 0;
    CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, dev));
    char *all = (char *)calloc((size_t)npes, sizeof bus);
    TEST_ASSERT(all, "calloc");
    SYMM_CHECK(symm_host_allgather(bus, all, sizeof bus));
    int want = 0;
    for (int r = 0; r < npes; r++)
        want += strncmp(all + (size_t)r * sizeof bus, bus, sizeof bus) == 0;
    free(all);
    SYMM_CHECK(symm_gpu_pes(&gpu_pes));
    TEST_ASSERT(gpu_pes == want, "symm_gpu_pes %d, but %d PEs have GPU %s", gpu_pes, want, bus);
    SYMM_CHECK(symm_sm_share(&share));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    TEST_ASSERT(share >= 1 && share <= sms / gpu_pes, "symm_sm_share %d with %d SMs for %d PEs", share, sms,
                gpu_pes);
    check_same_on_all((uint64_t)share, "symm_sm_share");
    SYMM_EXPECT(symm_gpu_pes(NULL), SYMM_ERR_INVALID_ARG);
    SYMM_EXPECT(symm_sm_share(NULL), SYMM_ERR_INVALID_ARG);
}

static void scenario_basic(void) {
    init_gpu();
    check_gpu_sharing();
    const size_t slice = 1000003; /* not a multiple of 16 */
    unsigned char *p;
    SYMM_CHECK(symm_malloc(slice * (size_t)npes, (void **)&p));
    check_same_on_all((uint64_t)(uintptr_t)p, "symm_malloc pointer");
    TEST_ASSERT(symm_ptr(p, me) == p && symm_ptr(p, npes) == NULL, "symm_ptr");
    for (int it = 0; it < 3; it++)
        exchange_memcpy(p, slice, it);

    const size_t n = 65537;
    uint32_t *q;
    int *bad;
    SYMM_CHECK(symm_calloc(n * (size_t)npes, sizeof(uint32_t), (void **)&q));
    CUDA_CHECK(cudaMalloc(&bad, sizeof(int)));
    CUDA_CHECK(cudaMemset(bad, 0, sizeof(int)));
    const symm_ctx_t *ctx;
    SYMM_CHECK(symm_ctx(&ctx));
    for (int peer = 0; peer < npes; peer++)
        store_through_ctx<<<64, 256>>>(ctx, q, n, me, peer, bad);
    CUDA_CHECK_KERNEL();
    SYMM_CHECK(symm_barrier_all());
    int hbad = 0;
    CUDA_CHECK(cudaMemcpy(&hbad, bad, sizeof(int), cudaMemcpyDeviceToHost));
    TEST_ASSERT(hbad == 0, "symm_ctx_ptr returned NULL");
    uint32_t *h = (uint32_t *)malloc(n * (size_t)npes * sizeof(uint32_t));
    TEST_ASSERT(h, "malloc");
    CUDA_CHECK(cudaMemcpy(h, q, n * (size_t)npes * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    for (int w = 0; w < npes; w++)
        for (size_t i = 0; i < n; i++) {
            uint32_t want = (uint32_t)(i * 2654435761u) ^ (uint32_t)(w << 24) ^ (uint32_t)me;
            TEST_ASSERT(h[(size_t)w * n + i] == want, "word %zu from PE %d", i, w);
        }
    free(h);
    CUDA_CHECK(cudaFree(bad));
    SYMM_CHECK(symm_free(q));
    SYMM_CHECK(symm_free(p));

    /* symm_align past the 2 MiB granularity, up to 64 MiB: the pointer is
     * aligned on every PE, the same everywhere, and reaches the peers. */
    for (size_t a = 64 << 10; a <= 64 * MiB; a <<= 1) {
        unsigned char *al;
        SYMM_CHECK(symm_align(a, 4096, (void **)&al));
        TEST_ASSERT((uintptr_t)al % a == 0, "symm_align(%zu) gave %p on PE %d", a, (void *)al, me);
        check_same_on_all((uint64_t)(uintptr_t)al, "symm_align pointer");
        exchange_memcpy(al, 4096 / (size_t)npes, (int)(a >> 16));
        SYMM_CHECK(symm_free(al));
    }
    /* The heap's descriptors are not inherited by programs this PE starts,
     * however many chunks it grows by. */
    {
        int before = symm_test_inherited_fds();
        void *grow[3];
        for (int i = 0; i < 3; i++)
            SYMM_CHECK(symm_malloc(300 * MiB, &grow[i]));
        int after = symm_test_inherited_fds();
        TEST_ASSERT(after == before, "a fork+exec child inherits %d descriptors after the heap grew, %d before",
                    after, before);
        for (int i = 2; i >= 0; i--)
            SYMM_CHECK(symm_free(grow[i]));
    }
    SYMM_CHECK(symm_finalize());
    /* And again in the same process. */
    init_gpu();
    SYMM_CHECK(symm_malloc(slice * (size_t)npes, (void **)&p));
    exchange_memcpy(p, slice, 9);
    SYMM_CHECK(symm_finalize());
}

static void check_device_ctx(void) {
    symm_team_t teams[2] = {symm_team_world(), symm_team_node()};
    for (int t = 0; t < 2; t++) {
        symm_ctx_t c, d;
        const symm_ctx_t *dp;
        SYMM_CHECK(symm_team_ctx_copy(teams[t], &c));
        SYMM_CHECK(symm_team_ctx(teams[t], &dp));
        CUDA_CHECK(cudaMemcpy(&d, dp, sizeof(d), cudaMemcpyDeviceToHost));
        TEST_ASSERT(memcmp(&c, &d, sizeof(c)) == 0, "device context differs from ctx_copy");
        size_t mapped, limit;
        SYMM_CHECK(symm_heap_info(&mapped, &limit));
        TEST_ASSERT(d.heap_size == mapped, "heap_size %llu, mapped %zu",
                    (unsigned long long)d.heap_size, mapped);
        TEST_ASSERT(d.backend == SYMM_BACKEND_NATIVE && d.my_pe == me, "backend/my_pe");
        check_same_on_all(d.heap_base, "heap_base");
        check_same_on_all((uint64_t)d.stride, "stride");
    }
}

static void scenario_growth(void) {
    setenv("SYMM_HEAP_CHUNK", "2M", 1);
    init_gpu();
    size_t mapped0, mapped1, limit;
    SYMM_CHECK(symm_heap_info(&mapped0, &limit));
    check_device_ctx();
    enum { K = 6 };
    unsigned char *blk[K];
    const size_t slice = 3 * MiB / 2 + 7;
    for (int k = 0; k < K; k++) {
        SYMM_CHECK(symm_malloc(slice * (size_t)npes, (void **)&blk[k]));
        exchange_memcpy(blk[k], slice, 20 + k);
        check_device_ctx();
    }
    SYMM_CHECK(symm_heap_info(&mapped1, &limit));
    TEST_ASSERT(mapped1 > mapped0 && mapped1 >= (size_t)K * slice * (size_t)npes &&
                    mapped1 <= limit,
                "grew %zu -> %zu (limit %zu)", mapped0, mapped1, limit);
    /* Old blocks kept their data. */
    unsigned char *buf = (unsigned char *)malloc(slice), *got = (unsigned char *)malloc(slice);
    TEST_ASSERT(buf && got, "malloc");
    for (int k = 0; k < K; k++)
        for (int w = 0; w < npes; w++) {
            symm_test_fill(buf, slice, seed_of(w, me, 20 + k));
            CUDA_CHECK(cudaMemcpy(got, blk[k] + (size_t)w * slice, slice, cudaMemcpyDeviceToHost));
            TEST_ASSERT(memcmp(got, buf, slice) == 0, "block %d lost PE %d's data", k, w);
        }
    free(buf);
    free(got);
    SYMM_CHECK(symm_finalize());
}

static void scenario_exhaust(void) {
    /* The limit leaves room for the runtime's own blocks (team barriers and
     * the collectives' scratch, ~65 MiB) plus `a` and `fit`, not for `big`. */
    setenv("SYMM_HEAP_LIMIT", "128M", 1);
    setenv("SYMM_HEAP_CHUNK", "2M", 1);
    init_gpu();
    size_t m0, m1, limit;
    void *a, *big = (void *)1;
    SYMM_CHECK(symm_malloc(16 * MiB, &a));
    SYMM_CHECK(symm_heap_info(&m0, &limit));
    TEST_ASSERT(limit == 128 * MiB, "limit %zu", limit);
    SYMM_EXPECT(symm_malloc(120 * MiB, &big), SYMM_ERR_HEAP_EXHAUSTED);
    TEST_ASSERT(big == (void *)1, "output untouched");
    SYMM_CHECK(symm_heap_info(&m1, &limit));
    TEST_ASSERT(m1 == m0, "mapped changed %zu -> %zu", m0, m1);
    void *fit;
    SYMM_CHECK(symm_malloc(16 * MiB, &fit));
    exchange_memcpy((unsigned char *)fit, 16 * MiB / (size_t)npes, 3);
    SYMM_CHECK(symm_finalize());
}

static void scenario_deny(void) {
    setenv("SYMM_DEBUG_DENY_PEER", "0:1", 1);
    symm_status_t st = symm_init();
    TEST_ASSERT(st == SYMM_ERR_NO_PEER_ACCESS, "init -> %s (%s)", symm_strerror(st), symm_last_error());
    const char *msg = symm_last_error();
    TEST_ASSERT(strstr(msg, "PE 0 (GPU ") && strstr(msg, "PE 1 (GPU "), "message '%s'", msg);
    printf("deny message: %s\n", msg);
    unsetenv("SYMM_DEBUG_DENY_PEER");
    init_gpu();
    void *p;
    SYMM_CHECK(symm_malloc(MiB, &p));
    exchange_memcpy((unsigned char *)p, MiB / (size_t)npes, 4);
    SYMM_CHECK(symm_finalize());
}

__global__ void graph_put(uint64_t *counter, uint64_t *remote, int me_) {
    uint64_t r = ++*counter;
    *(volatile uint64_t *)remote = r * 1000 + (uint64_t)me_;
    __threadfence_system();
}

__global__ void graph_check(const uint64_t *counter, const uint64_t *slot, int prev,
                            unsigned long long *errors) {
    uint64_t want = *counter * 1000 + (uint64_t)prev;
    if (*(volatile const uint64_t *)slot != want)
        atomicAdd(errors, 1ull);
}

static void scenario_graph(void) {
    init_gpu();
    uint64_t *slot, *counter;
    unsigned long long *errors;
    SYMM_CHECK(symm_calloc(1, sizeof(uint64_t), (void **)&slot));
    CUDA_CHECK(cudaMalloc(&counter, sizeof(uint64_t)));
    CUDA_CHECK(cudaMalloc(&errors, sizeof(*errors)));
    CUDA_CHECK(cudaMemset(counter, 0, sizeof(uint64_t)));
    CUDA_CHECK(cudaMemset(errors, 0, sizeof(*errors)));
    int next = (me + 1) % npes, prev = (me + npes - 1) % npes;
    uint64_t *remote = (uint64_t *)symm_ptr(slot, next);
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    SYMM_CHECK(symm_barrier_all());
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    graph_put<<<1, 1, 0, s>>>(counter, remote, me);
    SYMM_CHECK(symm_barrier_all_on_stream((symm_stream_t)s));
    graph_check<<<1, 1, 0, s>>>(counter, slot, prev, errors);
    SYMM_CHECK(symm_team_barrier_on_stream(symm_team_node(), (symm_stream_t)s));
    CUDA_CHECK(cudaStreamEndCapture(s, &g));
    CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < 1000; i++)
        CUDA_CHECK(cudaGraphLaunch(ge, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    uint64_t hc = 0;
    unsigned long long he = 0;
    CUDA_CHECK(cudaMemcpy(&hc, counter, sizeof(hc), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&he, errors, sizeof(he), cudaMemcpyDeviceToHost));
    TEST_ASSERT(hc == 1000 && he == 0, "after 1000 replays: counter %llu, %llu wrong values",
                (unsigned long long)hc, he);
    CUDA_CHECK(cudaGraphExecDestroy(ge));
    CUDA_CHECK(cudaGraphDestroy(g));

    /* The same captured in global mode (torch.cuda.graph's default) and left open across
     * two of the watcher thread's health checks (one a second): they must neither break
     * the capture nor take it for a failed GPU. */
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    graph_put<<<1, 1, 0, s>>>(counter, remote, me);
    SYMM_CHECK(symm_barrier_all_on_stream((symm_stream_t)s));
    graph_check<<<1, 1, 0, s>>>(counter, slot, prev, errors);
    SYMM_CHECK(symm_team_barrier_on_stream(symm_team_node(), (symm_stream_t)s));
    {
        struct timespec ts = {2, 500000000L};
        nanosleep(&ts, NULL);
    }
    CUDA_CHECK(cudaStreamEndCapture(s, &g));
    CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < 10; i++)
        CUDA_CHECK(cudaGraphLaunch(ge, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    CUDA_CHECK(cudaMemcpy(&hc, counter, sizeof(hc), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&he, errors, sizeof(he), cudaMemcpyDeviceToHost));
    TEST_ASSERT(hc == 1010 && he == 0, "after 10 replays of the graph captured in global mode: counter %llu, "
                "%llu wrong values", (unsigned long long)hc, he);
    SYMM_CHECK(symm_barrier_all());
    CUDA_CHECK(cudaGraphExecDestroy(ge));
    CUDA_CHECK(cudaGraphDestroy(g));
    CUDA_CHECK(cudaStreamDestroy(s));
    CUDA_CHECK(cudaFree(counter));
    CUDA_CHECK(cudaFree(errors));
    SYMM_CHECK(symm_free(slot));
    SYMM_CHECK(symm_finalize());
}

__global__ void wait_forever(const symm_ctx_t *ctx, const uint64_t *sig) {
    symm_signal_wait_until(ctx, sig, SYMM_CMP_GE, 1);
}

static void scenario_abort(void) {
    init_gpu();
    TEST_ASSERT(npes >= 2, "abort needs a peer");
    uint64_t *sig;
    SYMM_CHECK(symm_calloc(1, sizeof(uint64_t), (void **)&sig));
    SYMM_CHECK(symm_barrier_all());
    if (me == npes - 1) {
        /* Leave without signalling (and without finalize): the others'
         * kernels wait for a signal that never comes. */
        printf("PE %d: exiting without sending the signal\n", me);
        fflush(stdout);
        _exit(0);
    }
    const symm_ctx_t *ctx;
    SYMM_CHECK(symm_ctx(&ctx));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    wait_forever<<<1, 1>>>(ctx, sig);
    CUDA_CHECK(cudaGetLastError());
    cudaError_t e = cudaDeviceSynchronize();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    TEST_ASSERT(e != cudaSuccess, "the waiting kernel finished normally after %.2f s", secs);
    printf("PE %d: waiting kernel stopped after %.2f s with %s\n", me, secs, cudaGetErrorName(e));
    /* The context is unusable after the trap, so no finalize. */
    printf("PE %d: abort passed\n", me);
    fflush(stdout);
    _exit(0);
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--count-fds") == 0)
        return symm_test_count_fds();
    if (argc < 3) {
        fprintf(stderr, "usage: %s basic|growth|exhaust|deny|graph|abort NGPUS\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    symm_test_require_pes(atoi(argv[2]));
    const char *s = argv[1];
    if (strcmp(s, "basic") == 0)
        scenario_basic();
    else if (strcmp(s, "growth") == 0)
        scenario_growth();
    else if (strcmp(s, "exhaust") == 0)
        scenario_exhaust();
    else if (strcmp(s, "deny") == 0)
        scenario_deny();
    else if (strcmp(s, "graph") == 0)
        scenario_graph();
    else if (strcmp(s, "abort") == 0)
        scenario_abort();
    else
        TEST_FAIL("unknown scenario %s", s);
    printf("PE %d: %s passed\n", me, s);
    return 0;
}
