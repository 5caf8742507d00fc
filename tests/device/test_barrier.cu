/*
 * test_barrier.cu - the device barrier (symm_barrier, _warp, _block,
 * symm_sync_block) 10^4 times back to back per form, mixed forms, across
 * many kernel launches and CUDA graph replays; and fence / quiet at every
 * scope ordering a put before a flag.
 *
 * No PE may pass a barrier early: before barrier R every PE writes R into its
 * slot on every PE (with p); after the barrier every slot a PE holds must be
 * R (or R + 1, from a peer already in the next round), never R - 1.
 *
 * Usage: test_device_barrier <npes>   (under symmrun)
 */
#include "device_test.h"

enum { F_THREAD, F_WARP, F_BLOCK, F_SYNC_BLOCK, F_MIXED, N_FORMS };
static const char *form_name[N_FORMS] = {"barrier", "barrier_warp", "barrier_block", "sync_block", "mixed"};

#define NTHREADS 96 /* three warps: forms by one thread/warp leave the rest idle */

/* Participants of a round: thread 0, warp 0 or the whole block; within
 * them, thread t writes to / checks the slots of PEs t, t + n, ... */
__device__ static void barrier_round(const symm_ctx_t *ctx, int form, uint64_t R, uint64_t *slots,
                                     unsigned long long *err) {
    int me = symm_ctx_my_pe(ctx), np = symm_ctx_n_pes(ctx);
    unsigned t = threadIdx.x;
    unsigned n = form == F_THREAD ? 1 : form == F_WARP ? 32 : blockDim.x;
    bool in = t < n;
    if (in)
        for (int p = (int)t; p < np; p += (int)n)
            symm_p_u64(ctx, &slots[me], R, p);
    switch (form) {
    case F_THREAD: if (t == 0) symm_barrier(ctx); break;
    case F_WARP: if (t < 32) symm_barrier_warp(ctx); break;
    case F_BLOCK: symm_barrier_block(ctx); break;
    default: symm_sync_block(ctx); break;
    }
    if (in)
        for (int q = (int)t; q < np; q += (int)n) {
            uint64_t v = slots[q]; /* a plain load: the barrier promises visibility */
            if (v < R || v > R + 1) {
                atomicAdd(&err[0], 1ull);
                atomicCAS(&err[1], 0ull, (unsigned long long)R);
            }
        }
    __syncthreads();
}

/* `rounds` barriers; the round number continues from *base (device memory,
 * advanced at the end), so launches and graph replays keep counting. */
__global__ static void barrier_kernel(const symm_ctx_t *ctx, int form, int rounds, uint64_t *base, uint64_t *slots,
                                      unsigned long long *err) {
    uint64_t b = *base;
    for (int r = 1; r <= rounds; r++) {
        uint64_t R = b + (uint64_t)r;
        barrier_round(ctx, form == F_MIXED ? (int)(R % 4) : form, R, slots, err);
    }
    if (threadIdx.x == 0)
        *base = b + (uint64_t)rounds;
}

/* Barriers run by a different block (on a different SM) each round: block
 * R % gridDim.x takes round R once the previous block handed over through a
 * local turn word (release/acquire at GPU scope). The barrier state must not
 * be hidden from the next block by a stale cache. All blocks are resident
 * (a small grid), so the hand-over cannot deadlock. */
__global__ static void rotate_kernel(const symm_ctx_t *ctx, int rounds, uint64_t *base, uint64_t *slots,
                                     uint64_t *turn, unsigned long long *err) {
    int me = symm_ctx_my_pe(ctx);
    uint64_t b = *base;
    for (int r = (int)blockIdx.x + 1; r <= rounds; r += (int)gridDim.x) {
        if (threadIdx.x == 0)
            symm_wait_until_u64(ctx, turn, SYMM_CMP_EQ, (uint64_t)(r - 1));
        __syncthreads();
        barrier_round(ctx, r % 2 ? F_BLOCK : F_THREAD, b + (uint64_t)r, slots, err);
        if (threadIdx.x == 0)
            symm_st_u64(ctx, turn, (uint64_t)r, me, SYMM_SEM_RELEASE, SYMM_SCOPE_GPU);
    }
}

/* ---- fence / quiet ordering a put before a flag -------------------------------------- */

enum { O_FENCE, O_FENCE_WARP, O_FENCE_BLOCK, O_QUIET, O_QUIET_WARP, O_QUIET_BLOCK, N_ORD };
static const char *ord_name[N_ORD] = {"fence", "fence_warp", "fence_block", "quiet", "quiet_warp", "quiet_block"};
#define MSG 1000

__global__ static void order_kernel(const symm_ctx_t *ctx, int v, uint32_t iters, uint8_t *out, uint8_t *inbox,
                                    uint64_t *flag, uint64_t *ack, unsigned long long *err) {
    int me = symm_ctx_my_pe(ctx), np = symm_ctx_n_pes(ctx);
    int right = (me + 1) % np, left = (me + np - 1) % np;
    int scope = v % 3; /* 0 thread, 1 warp, 2 block */
    unsigned t = threadIdx.x, n = scope == 0 ? 1 : scope == 1 ? 32 : blockDim.x;
    bool in = t < n;
    for (uint32_t i = 1; i <= iters; i++) {
        uint64_t seed = dt_mix(((uint64_t)i << 16) ^ (uint64_t)me ^ ((uint64_t)v << 40));
        for (unsigned j = t; j < MSG; j += blockDim.x)
            out[j] = dt_byte(seed, j);
        __syncthreads();
        if (in) {
            if (scope == 0) symm_put_nbi(ctx, inbox, out, MSG, right);
            else if (scope == 1) symm_put_warp_nbi(ctx, inbox, out, MSG, right);
            else symm_put_block_nbi(ctx, inbox, out, MSG, right);
            switch (v) {
            case O_FENCE: symm_fence(ctx); break;
            case O_FENCE_WARP: symm_fence_warp(ctx); break;
            case O_FENCE_BLOCK: symm_fence_block(ctx); break;
            case O_QUIET: symm_quiet(ctx); break;
            case O_QUIET_WARP: symm_quiet_warp(ctx); break;
            case O_QUIET_BLOCK: symm_quiet_block(ctx); break;
            }
            /* The flag is a relaxed p: only the fence/quiet orders it after the data. */
            if (t == 0)
                symm_p_u64(ctx, flag, i, right);
        }
        if (t == 0)
            symm_wait_until_u64(ctx, flag, SYMM_CMP_GE, i);
        __syncthreads();
        uint64_t lseed = dt_mix(((uint64_t)i << 16) ^ (uint64_t)left ^ ((uint64_t)v << 40));
        for (unsigned j = t; j < MSG; j += blockDim.x)
            if (inbox[j] != dt_byte(lseed, j)) {
                atomicAdd(&err[0], 1ull);
                atomicCAS(&err[1], 0ull, (unsigned long long)i);
            }
        __syncthreads();
        if (t == 0) {
            symm_signal_op(ctx, ack, i, SYMM_SIGNAL_SET, left);
            symm_signal_wait_until(ctx, ack, SYMM_CMP_GE, i);
        }
        __syncthreads();
    }
}

int main(int argc, char **argv) {
    dt_env_t e;
    dt_init(&e, argc > 1 ? atoi(argv[1]) : 1);
    uint64_t *slots, *base;
    SYMM_CHECK(symm_malloc((size_t)e.npes * sizeof(uint64_t), (void **)&slots));
    CUDA_CHECK(cudaMemset(slots, 0, (size_t)e.npes * sizeof(uint64_t)));
    CUDA_CHECK(cudaMalloc(&base, sizeof(uint64_t)));
    CUDA_CHECK(cudaMemset(base, 0, sizeof(uint64_t)));
    dt_err_reset(&e);
    SYMM_CHECK(symm_barrier_all());

    /* small (sanitizer runs): every form and launch pattern, 1/100 of the rounds */
    const int rounds = (int)dt_n(10000, 100);
    const int launches = (int)dt_n(200, 20), per_launch = (int)dt_n(50, 5);
    const int rot_rounds = (int)dt_n(2000, 40), replays = (int)dt_n(500, 5);
    const uint32_t iters = (uint32_t)dt_n(2000, 20);
    unsigned long long total = 0;
    /* `rounds` back to back in one launch, per form. */
    for (int f = 0; f < N_FORMS; f++) {
        barrier_kernel<<<1, NTHREADS>>>(e.ctx, f, rounds, base, slots, e.d_err);
        CUDA_CHECK_KERNEL();
        total += rounds;
        TEST_ASSERT(dt_err_read(&e, 0) == 0, "%s: %llu slots behind after a barrier (first in round %llu)",
                    form_name[f], e.h_err[0], e.h_err[1]);
    }
    /* Many launches, queued back to back with no host synchronisation. */
    for (int l = 0; l < launches; l++)
        barrier_kernel<<<1, NTHREADS>>>(e.ctx, F_MIXED, per_launch, base, slots, e.d_err);
    CUDA_CHECK_KERNEL();
    total += (unsigned long long)launches * per_launch;
    TEST_ASSERT(dt_err_read(&e, 0) == 0, "barriers across launches: %llu slots behind (first in round %llu)",
                e.h_err[0], e.h_err[1]);

    /* Each round on another block/SM. */
    {
        uint64_t *turn;
        CUDA_CHECK(cudaMalloc(&turn, sizeof(uint64_t)));
        CUDA_CHECK(cudaMemset(turn, 0, sizeof(uint64_t)));
        rotate_kernel<<<8, NTHREADS>>>(e.ctx, rot_rounds, base, slots, turn, e.d_err);
        CUDA_CHECK_KERNEL();
        /* rotate_kernel reads *base but does not advance it */
        uint64_t hb;
        CUDA_CHECK(cudaMemcpy(&hb, base, sizeof hb, cudaMemcpyDeviceToHost));
        hb += rot_rounds;
        CUDA_CHECK(cudaMemcpy(base, &hb, sizeof hb, cudaMemcpyHostToDevice));
        total += rot_rounds;
        CUDA_CHECK(cudaFree(turn));
        TEST_ASSERT(dt_err_read(&e, 0) == 0, "barriers rotating over blocks: %llu slots behind (first in round %llu)",
                    e.h_err[0], e.h_err[1]);
    }

    /* A CUDA graph of barrier kernels, replayed many times. */
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int k = 0; k < 4; k++)
        barrier_kernel<<<1, NTHREADS, 0, s>>>(e.ctx, k == 3 ? F_MIXED : k + 1, 10, base, slots, e.d_err);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaStreamEndCapture(s, &g));
    CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
    for (int r = 0; r < replays; r++)
        CUDA_CHECK(cudaGraphLaunch(ge, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    total += (unsigned long long)replays * 40;
    TEST_ASSERT(dt_err_read(&e, 0) == 0, "graph-replayed barriers: %llu slots behind (first in round %llu)",
                e.h_err[0], e.h_err[1]);
    uint64_t hbase;
    CUDA_CHECK(cudaMemcpy(&hbase, base, sizeof hbase, cudaMemcpyDeviceToHost));
    TEST_ASSERT(hbase == total, "round counter %llu, expected %llu", (unsigned long long)hbase, total);
    CUDA_CHECK(cudaGraphExecDestroy(ge));
    CUDA_CHECK(cudaGraphDestroy(g));
    CUDA_CHECK(cudaStreamDestroy(s));
    SYMM_CHECK(symm_barrier_all());

    /* fence / quiet */
    uint8_t *out, *inbox;
    uint64_t *flags;
    SYMM_CHECK(symm_malloc(MSG, (void **)&out));
    SYMM_CHECK(symm_malloc(MSG, (void **)&inbox));
    SYMM_CHECK(symm_malloc(2 * sizeof(uint64_t), (void **)&flags));
    for (int v = 0; v < N_ORD; v++) {
        CUDA_CHECK(cudaMemset(flags, 0, 2 * sizeof(uint64_t)));
        SYMM_CHECK(symm_barrier_all());
        dt_err_reset(&e);
        order_kernel<<<1, 128>>>(e.ctx, v, iters, out, inbox, flags, flags + 1, e.d_err);
        CUDA_CHECK_KERNEL();
        TEST_ASSERT(dt_err_read(&e, 0) == 0, "%s: %llu bytes not visible after the flag (first in message %llu)",
                    ord_name[v], e.h_err[0], e.h_err[1]);
        SYMM_CHECK(symm_barrier_all());
    }

    SYMM_CHECK(symm_free(flags));
    SYMM_CHECK(symm_free(inbox));
    SYMM_CHECK(symm_free(out));
    CUDA_CHECK(cudaFree(base));
    SYMM_CHECK(symm_free(slots));
    if (e.me == 0)
        printf("test_device_barrier: %d PEs: %llu device barriers (thread/warp/block/sync_block/mixed; %d back to "
               "back per form, %d launches, rotating over 8 blocks, %d graph replays) with no PE passing early; "
               "fence/quiet at 3 scopes x %u messages: OK\n",
               e.npes, total, rounds, launches, replays, iters);
    dt_fini(&e);
    return 0;
}
