/*
 * test_pkt.cu - packet puts (symm_put_pkt*, symm_pkt_wait*) at every scope.
 *
 * Each PE streams thousands of messages to its right neighbour as packets,
 * in two buffers used in turn; the neighbour waits for each message's flag
 * (a sequence number), checks every byte of it (fresh data each iteration,
 * lengths 1 B to 4 KiB + 1, source and destination at odd offsets and, every
 * third message, 8-byte aligned), and answers
 * with an 8-byte packet from a local variable, which the sender waits for
 * before it reuses that buffer. A flag seen before its payload shows up as a
 * wrong byte; a lost packet as the wait's deadline.
 *
 * Usage: test_device_pkt <npes>          (under symmrun)
 *        test_device_pkt <npes> flag0    a put with flag 0 stops with a message
 *        test_device_pkt <npes> nwords33 a register-form warp put of 33 words stops with a message
 */
#include <string.h>

#include "device_test.h"

enum { SC_THREAD, SC_WARP, SC_BLOCK, N_SCOPES };
static const char *scope_name[] = {"thread", "warp", "block"};

#define MSG_MAX (4097 + 64)
#define N_LENS 10
__device__ static const uint32_t pkt_len[N_LENS] = {8, 1, 13, 64, 256, 1000, 4097, 16, 24, 7};

__device__ static inline uint64_t ack_value(uint64_t salt, uint32_t i) { return dt_mix(salt + i); }

/* The stream of message i from PE `from`. */
__device__ static inline uint64_t msg_seed(uint64_t salt, uint32_t i, int from) {
    return dt_mix(salt ^ ((uint64_t)i << 20) ^ (uint64_t)(from + 1));
}

__device__ static void put_scoped(const symm_ctx_t *ctx, int scope, void *pkt, const void *src, size_t n,
                                  uint32_t flag, int pe) {
    switch (scope) {
    case SC_THREAD:
        if (threadIdx.x == 0)
            symm_put_pkt(ctx, pkt, src, n, flag, pe);
        __syncthreads();
        break;
    case SC_WARP:
        if (threadIdx.x < 32)
            symm_put_pkt_warp(ctx, pkt, src, n, flag, pe);
        __syncthreads();
        break;
    default: symm_put_pkt_block(ctx, pkt, src, n, flag, pe); break;
    }
}

__device__ static void wait_scoped(const symm_ctx_t *ctx, int scope, const void *pkt, void *dest, size_t n,
                                   uint32_t flag) {
    switch (scope) {
    case SC_THREAD:
        if (threadIdx.x == 0)
            symm_pkt_wait(ctx, pkt, dest, n, flag);
        __syncthreads();
        break;
    case SC_WARP:
        if (threadIdx.x < 32)
            symm_pkt_wait_warp(ctx, pkt, dest, n, flag);
        __syncthreads();
        break;
    default: symm_pkt_wait_block(ctx, pkt, dest, n, flag); break;
    }
}

/* inbox, ackbox: two packet buffers each (MSG_MAX and 8 bytes of payload).
 * err[0]: wrong bytes, err[1]: first bad iteration, err[2]: wrong answers. */
__global__ static void stream_kernel(const symm_ctx_t *ctx, int scope, uint32_t iters, uint64_t salt,
                                     uint8_t *outbuf, uint8_t *recvbuf, char *inbox, char *ackbox,
                                     unsigned long long *err) {
    int me = symm_ctx_my_pe(ctx), np = symm_ctx_n_pes(ctx);
    int right = (me + 1) % np, left = (me + np - 1) % np;
    unsigned tid = threadIdx.x, nthr = blockDim.x;
    const size_t ibytes = SYMM_PKT_BYTES(MSG_MAX), abytes = SYMM_PKT_BYTES(8);
    __shared__ uint64_t got_ack;
    for (uint32_t i = 1; i <= iters + 2; i++) {
        uint32_t b = i & 1u;
        /* the right neighbour has read message i - 2 from buffer b */
        if (i > 2) {
            wait_scoped(ctx, scope, ackbox + b * abytes, &got_ack, 8, i - 2);
            if (tid == 0 && got_ack != ack_value(salt ^ (uint64_t)right, i - 2))
                atomicAdd(&err[2], 1ull);
        }
        if (i > iters)
            continue; /* the last two answers only */
        uint32_t len = pkt_len[i % N_LENS];
        /* every third message 8-byte aligned at both ends (a thread's batch then loads and
         * stores whole words), the others at odd offsets */
        uint32_t soff = i % 3 == 0 ? 8 * (i % 2) : (i * 7) % 17, doff = i % 3 == 0 ? 8 * ((i / 3) % 2) : (i * 5) % 19;
        uint64_t seed = msg_seed(salt, i, me);
        for (uint32_t j = tid; j < len; j += nthr)
            outbuf[soff + j] = dt_byte(seed, j);
        for (uint32_t j = tid; j < len + 2; j += nthr)
            recvbuf[doff + j] = 0x5a; /* poison, and a guard byte either side */
        if (tid == 0 && doff)
            recvbuf[doff - 1] = 0xa5;
        __syncthreads();
        put_scoped(ctx, scope, inbox + b * ibytes, outbuf + soff, len, i, right);
        wait_scoped(ctx, scope, inbox + b * ibytes, recvbuf + doff, len, i);
        uint64_t lseed = msg_seed(salt, i, left);
        unsigned long long bad = 0;
        for (uint32_t j = tid; j < len; j += nthr)
            bad += recvbuf[doff + j] != dt_byte(lseed, j);
        if (tid == 0)
            bad += recvbuf[doff + len] != 0x5a || (doff && recvbuf[doff - 1] != 0xa5);
        if (bad) {
            atomicAdd(&err[0], bad);
            atomicCAS(&err[1], 0ull, (unsigned long long)i);
        }
        __syncthreads();
        {
            /* the answer comes from a local variable (local memory) */
            uint64_t ack = ack_value(salt ^ (uint64_t)me, i);
            if (tid == 0)
                symm_put_pkt(ctx, ackbox + b * abytes, &ack, 8, i, left);
            __syncthreads();
        }
    }
}

/* Register forms (symm_put_pkt_v64*, symm_pkt_wait_v64*), one warp. Message
 * i is n = 1 + i % 32 words (1 for the thread form), lane j's word a hash
 * of (salt, i, sender, j); the flags run through 0xffffffff and wrap to 1
 * (0 is never a flag); each buffer is reused only after the reader's answer
 * (a v64 packet too). V64_MIXED puts with the warp register form and reads
 * with symm_pkt_wait_warp into shared memory: the two share one format.
 * err[0]: wrong words, err[1]: first bad message, err[2]: wrong answers. */
enum { V64_THREAD, V64_WARP, V64_MIXED, N_V64 };
static const char *v64_name[] = {"v64 thread", "v64 warp", "v64 warp put, symm_pkt_wait_warp"};

__device__ static inline uint32_t wrap_flag(uint32_t base, uint32_t i) {
    return (uint32_t)(((uint64_t)base + i) % 0xffffffffull) + 1u; /* 1..0xffffffff, never 0 */
}

__device__ static inline uint64_t v64_word(uint64_t salt, uint32_t i, int from, uint32_t lane) {
    return dt_mix(msg_seed(salt, i, from) + lane);
}

__global__ static void v64_kernel(const symm_ctx_t *ctx, int form, uint32_t iters, uint32_t base, uint64_t salt,
                                  char *inbox, char *ackbox, unsigned long long *err) {
    int me = symm_ctx_my_pe(ctx), np = symm_ctx_n_pes(ctx);
    int right = (me + 1) % np, left = (me + np - 1) % np;
    uint32_t lane = threadIdx.x;
    const size_t ibytes = SYMM_PKT_BYTES(MSG_MAX), abytes = SYMM_PKT_BYTES(8);
    __shared__ uint64_t got[32];
    for (uint32_t i = 1; i <= iters + 2; i++) {
        uint32_t b = i & 1u;
        if (i > 2) { /* the right neighbour has read message i - 2 from buffer b */
            uint64_t a = 0;
            if (form == V64_THREAD) {
                if (lane == 0)
                    a = symm_pkt_wait_v64(ctx, ackbox + b * abytes, wrap_flag(base, i - 2));
            } else {
                a = symm_pkt_wait_v64_warp(ctx, ackbox + b * abytes, 1, wrap_flag(base, i - 2));
            }
            if (lane == 0 && a != ack_value(salt ^ (uint64_t)right, i - 2))
                atomicAdd(&err[2], 1ull);
            if (form != V64_THREAD && lane != 0 && a != 0)
                atomicAdd(&err[2], 1ull); /* lanes past nwords get 0 */
        }
        if (i > iters)
            continue;
        uint32_t n = form == V64_THREAD ? 1u : 1u + i % 32u, f = wrap_flag(base, i);
        char *box = inbox + b * ibytes;
        if (form == V64_THREAD) {
            if (lane == 0)
                symm_put_pkt_v64(ctx, box, v64_word(salt, i, me, 0), f, right);
        } else {
            symm_put_pkt_v64_warp(ctx, box, v64_word(salt, i, me, lane), n, f, right);
        }
        uint64_t v = 0;
        if (form == V64_THREAD) {
            if (lane == 0)
                v = symm_pkt_wait_v64(ctx, box, f);
        } else if (form == V64_WARP) {
            v = symm_pkt_wait_v64_warp(ctx, box, n, f);
        } else {
            got[lane] = 0;
            __syncwarp();
            symm_pkt_wait_warp(ctx, box, got, 8 * n, f);
            v = lane < n ? got[lane] : 0;
        }
        uint64_t want = lane < n ? v64_word(salt, i, left, lane) : 0;
        if ((form != V64_THREAD || lane == 0) && v != want) {
            atomicAdd(&err[0], 1ull);
            atomicCAS(&err[1], 0ull, (unsigned long long)i);
        }
        __syncwarp();
        uint64_t ack = ack_value(salt ^ (uint64_t)me, i);
        if (form == V64_THREAD) {
            if (lane == 0)
                symm_put_pkt_v64(ctx, ackbox + b * abytes, ack, f, left);
        } else {
            symm_put_pkt_v64_warp(ctx, ackbox + b * abytes, ack, 1, f, left);
        }
        __syncwarp();
    }
}

__global__ static void v64_nwords_kernel(const symm_ctx_t *ctx, char *pkt) {
    symm_put_pkt_v64_warp(ctx, pkt, 1, 33, 1u, (symm_ctx_my_pe(ctx) + 1) % symm_ctx_n_pes(ctx));
}

__global__ static void flag0_kernel(const symm_ctx_t *ctx, char *pkt, const uint8_t *src) {
    symm_put_pkt(ctx, pkt, src, 8, 0u, (symm_ctx_my_pe(ctx) + 1) % symm_ctx_n_pes(ctx));
}

/* The two packet buffers of each PE's inbox and of its answers. */
typedef struct boxes {
    char *inbox, *ackbox;
    size_t ibytes, abytes;
} boxes_t;

/* One form's round: boxes zeroed on every PE, the kernel that `launch` starts, then its error
 * words (err[0]: wrong `unit`s, err[1]: the first message with one, err[2]: wrong answers). */
template <class Launch>
static void check_round(dt_env_t *e, const boxes_t *b, const char *what, const char *unit, Launch launch) {
    CUDA_CHECK(cudaMemset(b->inbox, 0, 2 * b->ibytes));
    CUDA_CHECK(cudaMemset(b->ackbox, 0, 2 * b->abytes));
    CUDA_CHECK(cudaDeviceSynchronize());
    SYMM_CHECK(symm_barrier_all());
    dt_err_reset(e);
    launch();
    CUDA_CHECK_KERNEL();
    dt_err_read(e, 0);
    TEST_ASSERT(e->h_err[0] == 0 && e->h_err[2] == 0,
                "put_pkt (%s): %llu wrong %s (first in message %llu), %llu wrong answers", what, e->h_err[0], unit,
                e->h_err[1], e->h_err[2]);
    SYMM_CHECK(symm_barrier_all());
}

int main(int argc, char **argv) {
    dt_env_t e;
    const char *mode = argc > 2 ? argv[2] : "";
    dt_init(&e, argc > 1 ? atoi(argv[1]) : 1);
    const size_t ibytes = SYMM_PKT_BYTES(MSG_MAX), abytes = SYMM_PKT_BYTES(8);
    uint8_t *outbuf, *recvbuf;
    char *inbox, *ackbox;
    SYMM_CHECK(symm_malloc(MSG_MAX, (void **)&outbuf));
    CUDA_CHECK(cudaMalloc((void **)&recvbuf, MSG_MAX + 64));
    SYMM_CHECK(symm_calloc(2, ibytes, (void **)&inbox));
    SYMM_CHECK(symm_calloc(2, abytes, (void **)&ackbox));

    if (strcmp(mode, "flag0") == 0) {
        flag0_kernel<<<1, 1>>>(e.ctx, inbox, outbuf);
        (void)cudaDeviceSynchronize();
        fprintf(stderr, "test_device_pkt flag0: the put with flag 0 returned (%s)\n",
                cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    if (strcmp(mode, "nwords33") == 0) {
        v64_nwords_kernel<<<1, 32>>>(e.ctx, inbox);
        (void)cudaDeviceSynchronize();
        fprintf(stderr, "test_device_pkt nwords33: the put of 33 words returned (%s)\n",
                cudaGetErrorString(cudaGetLastError()));
        return 1;
    }

    const uint32_t iters = (uint32_t)dt_n(3000, 3 * N_LENS);
    const boxes_t boxes = {inbox, ackbox, ibytes, abytes};
    unsigned long long n_msgs = 0;
    for (int scope = 0; scope < N_SCOPES; scope++) {
        int nthr = scope == SC_THREAD ? 1 : scope == SC_WARP ? 32 : 128;
        char what[32];
        snprintf(what, sizeof what, "%s scope", scope_name[scope]);
        check_round(&e, &boxes, what, "bytes", [&] {
            stream_kernel<<<1, nthr>>>(e.ctx, scope, iters, dt_seed(8, (uint64_t)scope, 0), outbuf, recvbuf, inbox,
                                       ackbox, e.d_err);
        });
        n_msgs += iters;
    }

    /* the flags start 40 below the wrap, so every form crosses it */
    unsigned long long n_v64 = 0;
    for (int form = 0; form < N_V64; form++) {
        check_round(&e, &boxes, v64_name[form], "words", [&] {
            v64_kernel<<<1, 32>>>(e.ctx, form, iters, 0xffffffffu - 40u, dt_seed(9, (uint64_t)form, 0), inbox,
                                  ackbox, e.d_err);
        });
        n_v64 += iters;
    }

    SYMM_CHECK(symm_free(ackbox));
    SYMM_CHECK(symm_free(inbox));
    CUDA_CHECK(cudaFree(recvbuf));
    SYMM_CHECK(symm_free(outbuf));
    if (e.me == 0)
        printf("test_device_pkt: %d PEs: %llu packet messages (thread/warp/block, 1 B..4 KiB + 1, unaligned) "
               "checked byte by byte after their flag, each answered by a packet; %llu register-form messages "
               "(thread, warp 1..32 words, warp put read by symm_pkt_wait_warp; flags across the wrap): OK\n",
               e.npes, n_msgs, n_v64);
    dt_fini(&e);
    return 0;
}
