/*
 * moe_k_ll.cu - the low-latency (pplx-layout) MoE kernels.
 *
 * Dispatch, epoch e (the handle's dispatch count, kept on the device):
 *   send  Each warp takes one route (token t, slot k) of this PE's tokens
 *         (t = dp_rank, dp_rank + dp, ... below the bound), takes the next
 *         slot of the expert's counter and stores the token (x, scales,
 *         t and k) into the expert's PE, in ll_dbuf[me][local expert][slot].
 *         The grid's last block then posts every expert's count to its PE
 *         as (e << 32 | count), with release. Before writing into PE p it
 *         waits for p's ack of dispatch e - 1 (p finished reading ll_dbuf).
 *   recv  One block per (local expert, source PE): waits for the counts of
 *         every source for that expert (their prefix is its first row),
 *         copies its tokens to out_expert_x / out_expert_x_scale and notes
 *         each row's route (source, t, k). The last block acks to every PE.
 * Combine, same epoch:
 *   send  Each warp takes one received row and stores it, with a flag set to
 *         e (release), into ll_cbuf[t][k] of every PE of the source's DP group.
 *   recv  One block per token: waits for the flags of its valid routes and
 *         sums weight x row in float32.
 * A PE writes a peer's ll_dbuf only after that peer's ack, and a peer's
 * ll_cbuf only after a dispatch whose receive half waited for every PE's
 * counts (so every PE has finished reading its ll_cbuf of the call before).
 */
#include "moe/moe_kernels.cuh"

/* Is route k of token t valid: an expert in range that no earlier slot of
 * the token names? Warp-wide (every lane gets the answer); records the
 * error when `report`. */
SYMM__DEVICE_INTERNAL int ll_route_ok(const symm__moe_kargs_t *A, uint64_t t, uint32_t k, uint32_t ex,
                                      int report) {
    const uint32_t *row = (const uint32_t *)A->idx + t * A->topk;
    const uint32_t lane = symm__lane();
    int dup;
    if (ex >= A->experts) {
        if (report && lane == 0)
            moe_error(A, SYMM__MOE_ERR_EXPERT_RANGE, (int64_t)t, (int64_t)k, (int64_t)ex);
        return 0;
    }
    dup = __any_sync(MOE_FULL, lane < k && row[lane] == ex);
    if (k > 32)
        dup |= __any_sync(MOE_FULL, lane + 32 < k && row[lane + 32] == ex);
    if (dup && report && lane == 0)
        moe_error(A, SYMM__MOE_ERR_EXPERT_DUP, (int64_t)t, (int64_t)k, (int64_t)ex);
    return !dup;
}

/* Bytes from a slot's start to its scales and to its (t, k) words. */
SYMM__DEVICE_INTERNAL uint64_t ll_meta_off(const symm__moe_kargs_t *A) {
    return A->x_bytes + (((uint64_t)A->scale_cols * 4u + 15u) & ~(uint64_t)15u);
}

__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ll_dispatch_send(const __grid_constant__ symm__moe_kargs_t a) {
    const symm__moe_kargs_t *A = &a;
    SYMM__TRACE_START(&A->ctx, tk_, SYMM__G_BLOCK);
    symm__moe_state_t *st = moe_state(A);
    const uint64_t e = st->epoch + 1;
    const uint32_t tid = symm__block_tid(), lane = tid & 31u, warp = tid >> 5;
    const uint32_t K = A->topk, L = A->local, dpr = (uint32_t)(A->me % A->dp);
    uint32_t *slots = MOE_U32(A, ll_slot);
    uint64_t bound, mine, routes;
    /* PE p has read what this PE wrote into it last time */
    if (tid < (uint32_t)A->n)
        moe_wait(A, MOE_U64(A, ll_ack) + tid, e - 1);
    symm__block_sync();
    bound = moe_bound(A, blockIdx.x == 0 && tid == 0);
    mine = bound > dpr ? (bound - dpr + (uint64_t)A->dp - 1) / (uint64_t)A->dp : 0;
    routes = mine * K;
    for (uint64_t r = (uint64_t)blockIdx.x * SYMM__MOE_WARPS + warp; r < routes;
         r += (uint64_t)gridDim.x * SYMM__MOE_WARPS) {
        const uint64_t t = dpr + (r / K) * (uint64_t)A->dp;
        const uint32_t k = (uint32_t)(r % K);
        const uint32_t ex = ((const uint32_t *)A->idx)[t * K + k];
        uint32_t pe, le, slot = 0;
        char *dst;
        if (!ll_route_ok(A, t, k, ex, 1))
            continue;
        pe = ex / L;
        le = ex % L;
        if (lane == 0)
            slot = atomicAdd(&slots[ex], 1u);
        slot = __shfl_sync(MOE_FULL, slot, 0);
        if (slot >= A->cap) {
            if (lane == 0)
                moe_error(A, SYMM__MOE_ERR_SLOTS, (int64_t)ex, (int64_t)A->cap, 0);
            continue;
        }
        dst = (char *)moe_peer(A, MOE_AT(A, ll_dbuf) + (((uint64_t)A->me * L + le) * A->cap + slot) * A->tok_stride,
                               (int)pe);
        SYMM__TRACE_START(&A->ctx, tr_, SYMM__G_WARP);
        symm__copy(dst, (const char *)A->x + t * (uint64_t)A->x_stride * A->x_esz, A->x_bytes, lane, 32, 1);
        for (uint32_t b = lane; b < A->scale_cols; b += 32)
            moe_put32(dst + A->x_bytes + 4u * b,
                      symm__f32_bits(A->x_scale[(int64_t)t * A->xs_stride[0] + (int64_t)b * A->xs_stride[1]]));
        if (lane == 0) {
            moe_put32(dst + ll_meta_off(A), (uint32_t)t);
            moe_put32(dst + ll_meta_off(A) + 4, k);
        }
        SYMM__TRACE_RMA(&A->ctx, tr_, SYMM_TRACE_PUT, SYMM__G_WARP, 1, (int)pe, dst, A->x_bytes);
    }
    if (moe_last_block(&st->done[SYMM__MK_LL_DISPATCH_SEND])) {
        uint64_t *cnt = MOE_U64(A, ll_cnt);
        for (uint32_t x = tid; x < A->experts; x += SYMM__MOE_THREADS) {
            uint32_t c = atomicExch(&slots[x], 0u);
            moe_signal(A, cnt + (uint64_t)A->me * L + x % L, (e << 32) | c, (int)(x / L));
        }
        if (tid == 0)
            st->epoch = e;
    }
    SYMM__TRACE_COLL(&A->ctx, tk_, SYMM_TRACE_COLL_MOE_DISPATCH, SYMM_COLL_ALGO_AUTO, SYMM_TRACE_F_STREAM, 0);
}

__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ll_dispatch_recv(const __grid_constant__ symm__moe_kargs_t a) {
    const symm__moe_kargs_t *A = &a;
    SYMM__TRACE_START(&A->ctx, tk_, SYMM__G_BLOCK);
    symm__moe_state_t *st = moe_state(A);
    const uint64_t e = st->epoch;
    const uint32_t tid = symm__block_tid(), lane = tid & 31u, warp = tid >> 5;
    const uint32_t n = (uint32_t)A->n, L = A->local;
    const uint64_t meta = ll_meta_off(A);
    __shared__ uint32_t cnt[64];
    for (uint32_t item = blockIdx.x; item < n * L; item += gridDim.x) {
        const uint32_t le = item / n, src = item % n;
        uint32_t off = 0, total = 0;
        if (tid < n)
            cnt[tid] = (uint32_t)moe_wait(A, MOE_U64(A, ll_cnt) + (uint64_t)tid * L + le, e << 32);
        symm__block_sync();
        for (uint32_t s = 0; s < n; s++) {
            off += s < src ? cnt[s] : 0;
            total += cnt[s];
        }
        if (src == 0 && tid == 0) {
            A->out_num[le] = (int32_t)total;
            MOE_U32(A, ll_rcnt)[le] = total;
        }
        for (uint32_t j = warp; j < cnt[src]; j += SYMM__MOE_WARPS) {
            const uint64_t row = (uint64_t)off + j;
            const char *slot = MOE_AT(A, ll_dbuf) + (((uint64_t)src * L + le) * A->cap + j) * A->tok_stride;
            char *dx = (char *)A->out_x + ((int64_t)le * A->ox_stride[0] + (int64_t)row * A->ox_stride[1]) * A->x_esz;
            symm__copy(dx, slot, A->x_bytes, lane, 32, 1);
            for (uint32_t b = lane; b < A->scale_cols; b += 32)
                A->out_scale[(int64_t)le * A->os_stride[0] + (int64_t)row * A->os_stride[1] +
                             (int64_t)b * A->os_stride[2]] = ((const float *)(const void *)(slot + A->x_bytes))[b];
            if (lane == 0) {
                const uint32_t *tk = (const uint32_t *)(const void *)(slot + meta);
                MOE_U64(A, ll_route)[(uint64_t)le * A->rows + row] =
                    (uint64_t)src | ((uint64_t)tk[1] << 16) | ((uint64_t)tk[0] << 32);
            }
        }
        symm__block_sync();
    }
    /* every block is done reading ll_dbuf: the senders may reuse it */
    if (moe_last_block(&st->done[SYMM__MK_LL_DISPATCH_RECV]) && tid < n)
        moe_signal(A, MOE_U64(A, ll_ack) + A->me, e, (int)tid);
    SYMM__TRACE_COLL(&A->ctx, tk_, SYMM_TRACE_COLL_MOE_DISPATCH_RECV, SYMM_COLL_ALGO_AUTO, SYMM_TRACE_F_STREAM, 0);
}

__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ll_combine_send(const __grid_constant__ symm__moe_kargs_t a) {
    const symm__moe_kargs_t *A = &a;
    SYMM__TRACE_START(&A->ctx, tk_, SYMM__G_BLOCK);
    const uint64_t e = moe_state(A)->epoch;
    const uint32_t tid = symm__block_tid(), warp = tid >> 5, L = A->local, K = A->topk;
    const uint32_t ysz = moe_kind_size(A->y_kind);
    const uint64_t slot_bytes = (uint64_t)A->hidden * 4u, nbytes = (uint64_t)A->hidden * ysz;
    extern __shared__ uint32_t pre[]; /* [L + 1]: first flat row of each local expert */
    uint32_t total, run;
    /* prefix of the rows per expert, in chunks of the block */
    run = 0;
    for (uint32_t base = 0; base < L; base += SYMM__MOE_THREADS) {
        uint32_t x = base + tid, c = x < L ? MOE_U32(A, ll_rcnt)[x] : 0, sum;
        uint32_t ex = moe_block_scan(c, &sum);
        if (x < L)
            pre[x] = run + ex;
        run += sum;
    }
    if (tid == 0)
        pre[L] = run;
    symm__block_sync();
    total = pre[L];
    for (uint32_t r = blockIdx.x * SYMM__MOE_WARPS + warp; r < total; r += gridDim.x * SYMM__MOE_WARPS) {
        uint32_t lo = 0, hi = L - 1; /* the last expert whose first row is <= r */
        while (lo < hi) {
            uint32_t mid = (lo + hi + 1) / 2;
            if (pre[mid] <= r)
                lo = mid;
            else
                hi = mid - 1;
        }
        {
            const uint32_t le = lo, j = r - pre[lo];
            const uint64_t route = MOE_U64(A, ll_route)[(uint64_t)le * A->rows + j];
            const uint32_t src = (uint32_t)(route & 0xffffu), k = (uint32_t)((route >> 16) & 0xffffu);
            const uint64_t t = route >> 32;
            const char *y = (const char *)A->y + ((int64_t)le * A->y_stride[0] + (int64_t)j * A->y_stride[1]) * ysz;
            char *slot = MOE_AT(A, ll_cbuf) + (t * K + k) * slot_bytes;
            uint64_t *flag = MOE_U64(A, ll_cflag) + t * K + k;
            const int g0 = (int)(src / (uint32_t)A->dp) * A->dp;
            for (int d = 0; d < A->dp; d++)
                symm_put_signal_warp(&A->ctx, slot, y, nbytes, flag, e, SYMM_SIGNAL_SET, g0 + d);
        }
    }
    SYMM__TRACE_COLL(&A->ctx, tk_, SYMM_TRACE_COLL_MOE_COMBINE, SYMM_COLL_ALGO_AUTO, SYMM_TRACE_F_STREAM, 0);
}

__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ll_combine_recv(const __grid_constant__ symm__moe_kargs_t a) {
    const symm__moe_kargs_t *A = &a;
    SYMM__TRACE_START(&A->ctx, tk_, SYMM__G_BLOCK);
    const uint64_t e = moe_state(A)->epoch;
    const uint32_t tid = symm__block_tid(), lane = tid & 31u, warp = tid >> 5, K = A->topk;
    const uint64_t slot_bytes = (uint64_t)A->hidden * 4u;
    const uint32_t ysz = moe_kind_size(A->y_kind), h8 = A->hidden / 8u;
    const uint64_t bound = moe_bound(A, blockIdx.x == 0 && tid == 0);
    __shared__ float w[64];
    __shared__ int ok[64];
    for (uint64_t t = blockIdx.x; t < bound; t += gridDim.x) {
        /* warp 0 checks the routes (the same rule as the sender's) and waits */
        if (warp == 0) {
            for (uint32_t k = 0; k < K; k++) {
                uint32_t ex = ((const uint32_t *)A->idx)[t * K + k];
                int good = ll_route_ok(A, t, k, ex, 0);
                if (lane == 0) {
                    ok[k] = good;
                    w[k] = A->weights[t * K + k];
                    if (good)
                        moe_wait(A, MOE_U64(A, ll_cflag) + t * K + k, e);
                }
            }
        }
        symm__block_sync();
        for (uint32_t v = tid; v < h8; v += SYMM__MOE_THREADS) {
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, x[8];
            for (uint32_t k = 0; k < K; k++) {
                if (!ok[k])
                    continue;
                moe_load8(MOE_AT(A, ll_cbuf) + (t * K + k) * slot_bytes + (uint64_t)v * 8u * ysz, A->y_kind, x);
                for (int i = 0; i < 8; i++)
                    acc[i] += w[k] * x[i];
            }
            moe_store8((char *)A->out + ((int64_t)t * A->out_stride + (int64_t)v * 8) * 2, A->out_kind, acc);
        }
        symm__block_sync();
    }
    SYMM__TRACE_COLL(&A->ctx, tk_, SYMM_TRACE_COLL_MOE_COMBINE_RECV, SYMM_COLL_ALGO_AUTO, SYMM_TRACE_F_STREAM, 0);
}

symm_status_t symm__moe_launch_ll(const symm__moe_kargs_t *a, cudaStream_t s) {
    switch (a->kernel) {
    case SYMM__MK_LL_DISPATCH_SEND:
        symm__k_ll_dispatch_send<<<a->nblocks, SYMM__MOE_THREADS, 0, s>>>(*a);
        return symm__moe_launched("the MoE dispatch send kernel");
    case SYMM__MK_LL_DISPATCH_RECV:
        symm__k_ll_dispatch_recv<<<a->nblocks, SYMM__MOE_THREADS, 0, s>>>(*a);
        return symm__moe_launched("the MoE dispatch receive kernel");
    case SYMM__MK_LL_COMBINE_SEND:
        symm__k_ll_combine_send<<<a->nblocks, SYMM__MOE_THREADS, (a->local + 1) * sizeof(uint32_t), s>>>(*a);
        return symm__moe_launched("the MoE combine send kernel");
    default:
        symm__k_ll_combine_recv<<<a->nblocks, SYMM__MOE_THREADS, 0, s>>>(*a);
        return symm__moe_launched("the MoE combine receive kernel");
    }
}
