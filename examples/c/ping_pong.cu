/*
 * ping_pong: PEs pair up (0-1, 2-3, ...) and bounce a message back and forth
 * with put_signal: each round carries a payload word and raises the peer's
 * signal, and the peer waits for that signal before it answers. Prints the
 * one-way latency; with an odd number of PEs the last one sits out.
 *   symmrun -n 2 ping_pong [rounds]     (default 1000)
 */
#include <symm/symm_device.h>

#include "example.h"

/* One thread per PE. `sig` counts the rounds received; `box` holds the last
 * payload. The even PE serves first. Counts payloads that were not what the
 * peer should have sent. */
__global__ void ping_pong(const symm_ctx_t *ctx, uint64_t *box, uint64_t *sig, uint64_t *out, int peer,
                          int serve, uint64_t base, int rounds, unsigned long long *bad) {
    int me = symm_ctx_my_pe(ctx);
    for (uint64_t r = 1; r <= (uint64_t)rounds; r++) {
        uint64_t round = base + r;
        if (!serve) {
            symm_signal_wait_until(ctx, sig, SYMM_CMP_GE, round);
            if (*box != (uint64_t)peer * 1000000007u + round) /* the acquire wait made it visible */
                atomicAdd(bad, 1ull);
        }
        *out = (uint64_t)me * 1000000007u + round;
        symm_put_signal(ctx, box, out, sizeof(*out), sig, round, SYMM_SIGNAL_SET, peer);
        if (serve) {
            symm_signal_wait_until(ctx, sig, SYMM_CMP_GE, round);
            if (*box != (uint64_t)peer * 1000000007u + round)
                atomicAdd(bad, 1ull);
        }
    }
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 1000;
    if (rounds < 1) {
        fprintf(stderr, "usage: ping_pong [rounds >= 1]\n");
        return 2;
    }
    SYMM_CHECK(symm_init());
    int me = symm_my_pe(), npes = symm_n_pes();
    int peer = me ^ 1;
    const symm_ctx_t *ctx;
    uint64_t *words; /* box, sig, out */
    unsigned long long *bad;
    SYMM_CHECK(symm_ctx(&ctx));
    SYMM_CHECK(symm_calloc(3, sizeof(uint64_t), (void **)&words));
    CUDA_CHECK(cudaMalloc(&bad, sizeof(*bad)));
    CUDA_CHECK(cudaMemset(bad, 0, sizeof(*bad)));

    long wrong = 0;
    if (npes < 2 && me == 0)
        printf("ping_pong: needs 2 PEs or more (symmrun -n 2 ...); nothing to do\n");
    if (peer < npes) {
        cudaEvent_t t0, t1;
        CUDA_CHECK(cudaEventCreate(&t0));
        CUDA_CHECK(cudaEventCreate(&t1));
        /* a first run warms up; the second is timed (signals keep counting) */
        for (int run = 0; run < 2; run++) {
            CUDA_CHECK(cudaEventRecord(t0));
            ping_pong<<<1, 1>>>(ctx, &words[0], &words[1], &words[2], peer, me % 2 == 0,
                                (uint64_t)run * (uint64_t)rounds, rounds, bad);
            CUDA_CHECK(cudaEventRecord(t1));
            CUDA_CHECK_KERNEL();
        }
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
        unsigned long long h_bad = 0;
        CUDA_CHECK(cudaMemcpy(&h_bad, bad, sizeof(h_bad), cudaMemcpyDeviceToHost));
        wrong = (long)h_bad;
        if (me % 2 == 0)
            printf("ping_pong: PE %d <-> PE %d: %d round trips, %.2f us one way\n", me, peer, rounds,
                   ms * 1000.0f / (2.0f * (float)rounds));
        CUDA_CHECK(cudaEventDestroy(t0));
        CUDA_CHECK(cudaEventDestroy(t1));
    }
    int rc = example_report("ping_pong", wrong, "payloads checked");
    CUDA_CHECK(cudaFree(bad));
    SYMM_CHECK(symm_free(words));
    SYMM_CHECK(symm_finalize());
    return rc;
}
