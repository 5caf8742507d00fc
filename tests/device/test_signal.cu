/*
 * test_signal.cu - put_signal at every scope (blocking and nbi, SET and ADD),
 * signal_op / signal_fetch / signal_wait_until, and wait_until_<T> with every
 * comparison.
 *
 * Ordering: each PE streams thousands of messages to its right neighbour with
 * put_signal; the neighbour waits for the signal, then checks every byte of
 * the message (fresh data each iteration, varying sizes and alignments), and
 * acknowledges with signal_op so the sender may reuse the buffer. A signal
 * seen before its data shows up as a wrong byte.
 *
 * Usage: test_device_signal <npes>   (under symmrun)
 */
#include "device_test.h"

enum { SC_THREAD, SC_WARP, SC_BLOCK, N_SCOPES };
static const char *scope_name[] = {"thread", "warp", "block"};

#define MSG_MAX (65536 + 64)
#define N_LENS 9
__device__ static const uint32_t msg_len[N_LENS] = {8, 1, 13, 64, 256, 1000, 4097, 16, 65536 + 5};

__device__ static inline uint64_t msg_seed(uint64_t salt, uint32_t i, int from) {
    return dt_mix(salt ^ ((uint64_t)i << 20) ^ (uint64_t)(from + 1));
}

/* Blocks of 1 thread (thread scope), 32 (warp) or 128 (block). One block
 * per PE. err[0]: wrong bytes, err[1]: first bad iteration + 1, err[2]: wrong
 * signal values. */
__global__ static void stream_kernel(const symm_ctx_t *ctx, int scope, int nbi, int sig_op, uint32_t iters,
                                     uint64_t salt, uint8_t *outbuf, uint8_t *inbox, uint64_t *sig_data,
                                     uint64_t *sig_ack, unsigned long long *err) {
    int me = symm_ctx_my_pe(ctx), np = symm_ctx_n_pes(ctx);
    int right = (me + 1) % np, left = (me + np - 1) % np;
    unsigned tid = threadIdx.x, nthr = blockDim.x;
    for (uint32_t i = 1; i <= iters; i++) {
        uint32_t len = msg_len[i % N_LENS];
        if (scope == SC_THREAD && len > 4097)
            len = 4097; /* one thread copies slowly; keep the run short */
        uint32_t soff = (i * 7) % 17, doff = (i * 5) % 19;
        uint64_t seed = msg_seed(salt, i, me);
        for (uint32_t j = tid; j < len; j += nthr)
            outbuf[soff + j] = dt_byte(seed, j);
        __syncthreads();
        uint64_t sigval = sig_op == SYMM_SIGNAL_SET ? i : 1;
        switch (scope * 2 + nbi) {
        case SC_THREAD * 2: symm_put_signal(ctx, inbox + doff, outbuf + soff, len, sig_data, sigval, sig_op, right); break;
        case SC_THREAD * 2 + 1: symm_put_signal_nbi(ctx, inbox + doff, outbuf + soff, len, sig_data, sigval, sig_op, right); break;
        case SC_WARP * 2: symm_put_signal_warp(ctx, inbox + doff, outbuf + soff, len, sig_data, sigval, sig_op, right); break;
        case SC_WARP * 2 + 1: symm_put_signal_warp_nbi(ctx, inbox + doff, outbuf + soff, len, sig_data, sigval, sig_op, right); break;
        case SC_BLOCK * 2: symm_put_signal_block(ctx, inbox + doff, outbuf + soff, len, sig_data, sigval, sig_op, right); break;
        case SC_BLOCK * 2 + 1: symm_put_signal_block_nbi(ctx, inbox + doff, outbuf + soff, len, sig_data, sigval, sig_op, right); break;
        }
        /* The nbi forms promise the source only after a quiet. */
        if (nbi)
            symm_quiet(ctx);
        __syncthreads();
        /* Receive message i from the left. */
        if (tid == 0) {
            uint64_t v = symm_signal_wait_until(ctx, sig_data, SYMM_CMP_GE, i);
            if (v != i)
                atomicAdd(&err[2], 1ull);
        }
        __syncthreads();
        uint64_t lseed = msg_seed(salt, i, left);
        unsigned long long bad = 0;
        for (uint32_t j = tid; j < len; j += nthr)
            bad += inbox[doff + j] != dt_byte(lseed, j);
        if (bad) {
            atomicAdd(&err[0], bad);
            atomicCAS(&err[1], 0ull, (unsigned long long)i);
        }
        __syncthreads();
        /* Tell the left its buffer in me is free; wait for the right to say so. */
        if (tid == 0) {
            symm_signal_op(ctx, sig_ack, i, SYMM_SIGNAL_SET, left);
            symm_signal_wait_until(ctx, sig_ack, SYMM_CMP_GE, i);
        }
        __syncthreads();
    }
}

/* Every PE adds (me + 1) * k to the counter of every PE, then waits until its
 * own counter holds exactly the total, with no barrier in between. */
__global__ static void add_kernel(const symm_ctx_t *ctx, uint64_t *ctr, uint64_t k, unsigned long long *err) {
    int me = symm_ctx_my_pe(ctx), np = symm_ctx_n_pes(ctx);
    uint64_t total = 0;
    for (int p = 0; p < np; p++)
        total += (uint64_t)(p + 1) * k;
    for (int p = 0; p < np; p++)
        symm_signal_op(ctx, ctr, (uint64_t)(me + 1) * k, SYMM_SIGNAL_ADD, (me + p) % np);
    if (symm_signal_wait_until(ctx, ctr, SYMM_CMP_EQ, total) != total)
        atomicAdd(&err[0], 1ull);
    if (symm_signal_fetch(ctx, ctr) != total)
        atomicAdd(&err[1], 1ull);
}

/* ---- wait_until_<T> with every comparison ------------------------------------------- */

/* Word c of the array starts at init[c]; PE left writes set[c] after a short
 * delay; waiter c waits for (word cmp=c value[c]) and must return set[c]. */
#define WAIT_TYPES(X)                                                                            \
    X(i32, int32_t, symm_wait_until_i32, symm_p_i32)                                             \
    X(i64, int64_t, symm_wait_until_i64, symm_p_i64)                                             \
    X(u32, uint32_t, symm_wait_until_u32, symm_p_u32)                                            \
    X(u64, uint64_t, symm_wait_until_u64, symm_p_u64)                                            \
    X(sig, uint64_t, symm_signal_wait_until, sig_set)

__device__ static inline void sig_set(const symm_ctx_t *ctx, uint64_t *p, uint64_t v, int pe) {
    symm_signal_op(ctx, p, v, SYMM_SIGNAL_SET, pe);
}

/* init, value waited for, value written: per comparison EQ NE GT GE LT LE. */
static const long long w_init[6] = {0, 7, 0, 0, 10, 10};
static const long long w_value[6] = {5, 7, 9, 9, 5, 4};
static const long long w_set[6] = {5, 8, 10, 9, 3, 4};
/* Signed types also cross zero: LT waits for < -1, the writer stores -3. */
static const long long w_value_signed[6] = {-5, 7, 9, 9, -1, 4};
static const long long w_set_signed[6] = {-5, 8, 10, 9, -3, 4};

#define WAIT_KERNEL(S, T, WAITFN, SETFN)                                                          \
    __global__ static void wait_kernel_##S(const symm_ctx_t *ctx, T *words, const T *value,     \
                                           const T *set, unsigned long long *err) {             \
        int me = symm_ctx_my_pe(ctx), np = symm_ctx_n_pes(ctx);                                 \
        unsigned t = threadIdx.x;                                                               \
        if (t < 6) {                                                                            \
            T got = WAITFN(ctx, &words[t], (int)t, value[t]);                                   \
            if (got != set[t])                                                                  \
                atomicAdd(&err[0], 1ull);                                                       \
        } else if (t >= 32 && t < 38) {                                                         \
            uint64_t t0 = symm_test_gtime();                                                    \
            while (symm_test_gtime() - t0 < 20000) { }                                          \
            SETFN(ctx, &words[t - 32], set[t - 32], (me + 1) % np);                             \
        }                                                                                       \
    }

__device__ static inline uint64_t symm_test_gtime(void) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

WAIT_TYPES(WAIT_KERNEL)

static void test_wait(dt_env_t *e, void *words_raw, int is_signed_round) {
#define WAIT_RUN(S, T, WAITFN, SETFN)                                                            \
    {                                                                                            \
        int sgn = is_signed_round && ((T)-1 < (T)0);                                             \
        T init[6], value[6], set[6], *d_tab;                                                     \
        for (int c = 0; c < 6; c++) {                                                            \
            init[c] = (T)w_init[c];                                                              \
            value[c] = (T)(sgn ? w_value_signed[c] : w_value[c]);                                \
            set[c] = (T)(sgn ? w_set_signed[c] : w_set[c]);                                      \
        }                                                                                        \
        if (sgn) { init[0] = 0; init[4] = 0; }                                                   \
        CUDA_CHECK(cudaMalloc(&d_tab, sizeof value + sizeof set));                               \
        CUDA_CHECK(cudaMemcpy(d_tab, value, sizeof value, cudaMemcpyHostToDevice));              \
        CUDA_CHECK(cudaMemcpy(d_tab + 6, set, sizeof set, cudaMemcpyHostToDevice));              \
        CUDA_CHECK(cudaMemcpy(words_raw, init, sizeof init, cudaMemcpyHostToDevice));            \
        SYMM_CHECK(symm_barrier_all());                                                          \
        dt_err_reset(e);                                                                         \
        wait_kernel_##S<<<1, 64>>>(e->ctx, (T *)words_raw, d_tab, d_tab + 6, e->d_err);          \
        CUDA_CHECK_KERNEL();                                                                     \
        TEST_ASSERT(dt_err_read(e, 0) == 0, "wait_until " #S " (%s): %llu waits returned a wrong value", \
                    sgn ? "signed" : "unsigned", e->h_err[0]);                                   \
        SYMM_CHECK(symm_barrier_all());                                                          \
        CUDA_CHECK(cudaFree(d_tab));                                                             \
    }
    WAIT_TYPES(WAIT_RUN)
#undef WAIT_RUN
}

int main(int argc, char **argv) {
    dt_env_t e;
    dt_init(&e, argc > 1 ? atoi(argv[1]) : 1);

    uint8_t *outbuf, *inbox;
    uint64_t *sigs; /* [0] data signal, [1] ack signal, [2] counter, [8..] wait words */
    SYMM_CHECK(symm_malloc(MSG_MAX, (void **)&outbuf));
    SYMM_CHECK(symm_malloc(MSG_MAX, (void **)&inbox));
    SYMM_CHECK(symm_malloc(64 * sizeof(uint64_t), (void **)&sigs));

    /* small: still every message length (msg_len cycles over N_LENS) three times */
    const uint32_t iters = (uint32_t)dt_n(3000, 3 * N_LENS);
    unsigned long long n_msgs = 0;
    for (int scope = 0; scope < N_SCOPES; scope++)
        for (int nbi = 0; nbi < 2; nbi++)
            for (int op = 0; op < 2; op++) {
                int sig_op = op ? SYMM_SIGNAL_ADD : SYMM_SIGNAL_SET;
                CUDA_CHECK(cudaMemset(sigs, 0, 2 * sizeof(uint64_t)));
                CUDA_CHECK(cudaMemset(inbox, 0, MSG_MAX));
                SYMM_CHECK(symm_barrier_all());
                dt_err_reset(&e);
                int nthr = scope == SC_THREAD ? 1 : scope == SC_WARP ? 32 : 128;
                stream_kernel<<<1, nthr>>>(e.ctx, scope, nbi, sig_op, iters,
                                           dt_seed(2, (uint64_t)(scope * 4 + nbi * 2 + op), 0), outbuf, inbox,
                                           sigs, sigs + 1, e.d_err);
                CUDA_CHECK_KERNEL();
                dt_err_read(&e, 0);
                TEST_ASSERT(e.h_err[0] == 0 && e.h_err[2] == 0,
                            "put_signal (%s scope, %s) %s: %llu wrong bytes (first in message %llu), %llu wrong signals",
                            scope_name[scope], nbi ? "nbi" : "blocking",
                            op ? "ADD" : "SET", e.h_err[0], e.h_err[1], e.h_err[2]);
                n_msgs += iters;
                SYMM_CHECK(symm_barrier_all());
            }

    const uint64_t add_rounds = (uint64_t)dt_n(3, 1);
    for (uint64_t k = 1; k <= add_rounds; k++) {
        CUDA_CHECK(cudaMemset(sigs + 2, 0, sizeof(uint64_t)));
        SYMM_CHECK(symm_barrier_all());
        dt_err_reset(&e);
        add_kernel<<<1, 1>>>(e.ctx, sigs + 2, k * 1000003ull, e.d_err);
        CUDA_CHECK_KERNEL();
        dt_err_read(&e, 0);
        TEST_ASSERT(e.h_err[0] == 0 && e.h_err[1] == 0, "signal_op ADD from all PEs: wait %llu, fetch %llu wrong",
                    e.h_err[0], e.h_err[1]);
        SYMM_CHECK(symm_barrier_all());
    }

    test_wait(&e, sigs + 8, 0);
    test_wait(&e, sigs + 8, 1);

    SYMM_CHECK(symm_free(sigs));
    SYMM_CHECK(symm_free(inbox));
    SYMM_CHECK(symm_free(outbuf));
    if (e.me == 0)
        printf("test_device_signal: %d PEs: %llu put_signal messages (thread/warp/block, blocking+nbi, SET+ADD, "
               "1 B..64 KiB) checked byte by byte after the signal; signal_op ADD from all PEs + fetch; "
               "wait_until i32/i64/u32/u64/signal x 6 comparisons: OK\n",
               e.npes, n_msgs);
    dt_fini(&e);
    return 0;
}
