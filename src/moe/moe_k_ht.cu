/*
 * moe_k_ht.cu - the high-throughput (DeepEP "normal" layout) MoE kernels.
 *
 * Layout (one block, local): for every token the set of PEs it goes to, its
 * position among the tokens going to each PE (an exclusive scan per PE), the
 * tokens per PE and per expert.
 * Dispatch, epoch e:
 *   send  Block 0 posts this PE's row of the count matrix (tokens for every
 *         PE) and, to each PE, the tokens for each of its experts, tagged
 *         (e << 32 | count). Every block then waits for the rows of the PEs
 *         before it (the rows that PE r receives from them come first in its
 *         buffers), and each warp stores one (token, PE) pair straight into
 *         its final row at that PE: x, scales, the top-k mapped to the PE's
 *         local experts (-1 elsewhere), weights and (source, token). The last
 *         block flags every PE (ddone = e).
 *   recv  Waits for every PE's flag and publishes the counts (num_recv, per
 *         expert). Run by the send kernel's last block when both halves are
 *         asked for, else by a one-block kernel.
 * Combine, same epoch:
 *   send  Each warp returns one received row to its token's PE, into
 *         ht_cbuf[token][me]; the last block flags every PE (cdone = e).
 *   recv  After every PE's flag, one block per token sums its rows.
 * Reuse: a PE's dispatch writes into PE r only after its own combine waited
 * for r's combine send, which follows everything r did with the previous
 * receive buffers; a combine writes ht_cbuf only after a dispatch whose
 * counts every PE posted after its previous combine.
 */
#include "moe/moe_kernels.cuh"

#define TAG(e, c) (((uint64_t)(e) << 32) | (uint64_t)(uint32_t)(c))

/* The PEs token t goes to (bit r), counting its experts into ecnt when given;
 * -1 in a signed index type is no expert, other values outside the experts
 * are errors (recorded when `report`). */
SYMM__DEVICE_INTERNAL uint64_t ht_token_mask(const symm__moe_kargs_t *A, uint64_t t, uint32_t *ecnt, int report) {
    uint64_t mask = 0;
    for (uint32_t k = 0; k < A->topk; k++) {
        int64_t ex = moe_index(A, t * A->topk + k);
        if (ex == -1 && A->idx_kind != 0)
            continue;
        if (ex < 0 || ex >= (int64_t)A->experts) {
            if (report)
                moe_error(A, SYMM__MOE_ERR_EXPERT_RANGE, (int64_t)t, (int64_t)k, ex);
            continue;
        }
        if (ecnt)
            atomicAdd(&ecnt[ex], 1u);
        mask |= 1ull << (uint32_t)(ex / A->local);
    }
    return mask;
}

__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ht_layout(const __grid_constant__ symm__moe_kargs_t a) {
    const symm__moe_kargs_t *A = &a;
    const uint32_t tid = symm__block_tid(), n = (uint32_t)A->n;
    const uint64_t m = A->num_tokens, chunk = (m + SYMM__MOE_THREADS - 1) / SYMM__MOE_THREADS;
    const uint64_t t0 = tid * chunk < m ? tid * chunk : m, t1 = t0 + chunk < m ? t0 + chunk : m;
    uint64_t *mask = MOE_U64(A, ht_mask);
    extern __shared__ uint32_t ecnt[]; /* [experts] */
    for (uint32_t x = tid; x < A->experts; x += SYMM__MOE_THREADS)
        ecnt[x] = 0;
    symm__block_sync();
    for (uint64_t t = t0; t < t1; t++) {
        uint64_t mk = ht_token_mask(A, t, ecnt, 1);
        if (A->write_state)
            mask[t] = mk;
    }
    symm__block_sync();
    for (uint32_t r = 0; r < n; r++) {
        uint32_t c = 0, total, pos;
        for (uint64_t t = t0; t < t1; t++)
            c += (uint32_t)(((A->write_state ? mask[t] : ht_token_mask(A, t, NULL, 0)) >> r) & 1u);
        pos = moe_block_scan(c, &total);
        for (uint64_t t = t0; t < t1; t++) {
            int in = (int)(((A->write_state ? mask[t] : ht_token_mask(A, t, NULL, 0)) >> r) & 1u);
            if (A->write_state)
                MOE_I32(A, ht_pos)[t * n + r] = in ? (int32_t)pos : -1;
            if (A->in_rank)
                A->in_rank[t * n + r] = (uint8_t)in;
            pos += (uint32_t)in;
        }
        if (tid == 0) {
            if (A->write_state)
                MOE_U32(A, ht_cnt)[r] = total;
            if (A->per_rank)
                A->per_rank[r] = (int32_t)total;
        }
    }
    for (uint32_t x = tid; x < A->experts; x += SYMM__MOE_THREADS) {
        if (A->write_state)
            MOE_U32(A, ht_ecnt)[x] = ecnt[x];
        if (A->per_expert)
            A->per_expert[x] = (int32_t)ecnt[x];
    }
}

/* The receive half of epoch e (one block): every PE's rows are in, publish
 * the counts. */
SYMM__DEVICE_INTERNAL void ht_dispatch_recv(const symm__moe_kargs_t *A, uint64_t e) {
    const uint32_t tid = symm__block_tid(), n = (uint32_t)A->n, L = A->local;
    __shared__ uint32_t from[64];
    if (tid < n) {
        moe_wait(A, MOE_U64(A, ht_ddone) + tid, e);
        from[tid] = (uint32_t)moe_wait(A, MOE_U64(A, ht_mat) + (uint64_t)tid * n + (uint32_t)A->me, TAG(e, 0));
    }
    for (uint32_t le = tid; le < L; le += SYMM__MOE_THREADS) {
        uint32_t c = 0;
        for (uint32_t s = 0; s < n; s++)
            c += (uint32_t)moe_wait(A, MOE_U64(A, ht_emat) + (uint64_t)s * L + le, TAG(e, 0));
        MOE_I32(A, ht_rpe)[le] = (int32_t)c;
    }
    symm__block_sync();
    if (tid == 0) {
        uint64_t total = 0;
        for (uint32_t s = 0; s < n; s++)
            total += from[s];
        if (total > A->cap)
            moe_error(A, SYMM__MOE_ERR_CAPACITY, (int64_t)total, (int64_t)A->cap, 0);
        MOE_I32(A, ht_rnum)[0] = (int32_t)(total < A->cap ? total : A->cap);
    }
}

__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ht_dispatch_send(const __grid_constant__ symm__moe_kargs_t a) {
    const symm__moe_kargs_t *A = &a;
    symm__moe_state_t *st = moe_state(A);
    const uint64_t e = st->epoch + 1;
    const uint32_t tid = symm__block_tid(), lane = tid & 31u, warp = tid >> 5;
    const uint32_t n = (uint32_t)A->n, L = A->local, K = A->topk, me = (uint32_t)A->me;
    const uint64_t m = A->num_tokens;
    __shared__ uint32_t off[64];
    if (tid < n)
        off[tid] = 0;
    if (blockIdx.x == 0) {
        for (uint32_t x = tid; x < n * n; x += SYMM__MOE_THREADS)
            moe_signal(A, MOE_U64(A, ht_mat) + (uint64_t)me * n + x % n, TAG(e, MOE_U32(A, ht_cnt)[x % n]),
                       (int)(x / n));
        for (uint32_t x = tid; x < n * L; x += SYMM__MOE_THREADS)
            moe_signal(A, MOE_U64(A, ht_emat) + (uint64_t)me * L + x % L, TAG(e, MOE_U32(A, ht_ecnt)[x]),
                       (int)(x / L));
    }
    symm__block_sync();
    /* my first row at PE r: what the PEs before me send r */
    for (uint32_t x = tid; x < me * n; x += SYMM__MOE_THREADS)
        atomicAdd(&off[x % n], (uint32_t)moe_wait(A, MOE_U64(A, ht_mat) + x, TAG(e, 0)));
    symm__block_sync();
    for (uint64_t pr = (uint64_t)blockIdx.x * SYMM__MOE_WARPS + warp; pr < m * n;
         pr += (uint64_t)gridDim.x * SYMM__MOE_WARPS) {
        const uint64_t t = pr / n;
        const uint32_t r = (uint32_t)(pr % n);
        const int32_t pos = MOE_I32(A, ht_pos)[t * n + r];
        uint64_t row;
        if (pos < 0)
            continue;
        row = (uint64_t)off[r] + (uint32_t)pos;
        if (row >= A->cap) /* the receiver reports it */
            continue;
        symm__copy(moe_peer(A, MOE_AT(A, ht_rx) + row * A->x_bytes, (int)r),
                   (const char *)A->x + t * (uint64_t)A->x_stride * A->x_esz, A->x_bytes, lane, 32, 1);
        for (uint32_t b = lane; b < A->scale_cols; b += 32)
            moe_put32(moe_peer(A, MOE_AT(A, ht_rscale) + (row * A->scale_cols + b) * 4u, (int)r),
                      symm__f32_bits(A->x_scale[(int64_t)t * A->xs_stride[0] + (int64_t)b * A->xs_stride[1]]));
        for (uint32_t k = lane; k < K; k += 32) {
            int64_t ex = moe_index(A, t * K + k);
            int32_t le = ex >= 0 && ex < (int64_t)A->experts && (uint32_t)(ex / L) == r ? (int32_t)(ex % L) : -1;
            moe_put32(moe_peer(A, MOE_AT(A, ht_ridx) + (row * K + k) * 4u, (int)r), (uint32_t)le);
            moe_put32(moe_peer(A, MOE_AT(A, ht_rw) + (row * K + k) * 4u, (int)r),
                      A->weights ? symm__f32_bits(A->weights[t * K + k]) : 0u);
        }
        if (lane == 0) {
            moe_put32(moe_peer(A, MOE_AT(A, ht_rsrc) + row * 8u, (int)r), me);
            moe_put32(moe_peer(A, MOE_AT(A, ht_rsrc) + row * 8u + 4u, (int)r), (uint32_t)t);
        }
    }
    if (moe_last_block(&st->done[SYMM__MK_HT_DISPATCH_SEND])) {
        if (tid < n)
            moe_signal(A, MOE_U64(A, ht_ddone) + me, e, (int)tid);
        if (tid == 0)
            st->epoch = e;
        if (A->recv_tail)
            ht_dispatch_recv(A, e);
    }
}

__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ht_dispatch_recv(const __grid_constant__ symm__moe_kargs_t a) {
    ht_dispatch_recv(&a, moe_state(&a)->epoch);
}

__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ht_combine_send(const __grid_constant__ symm__moe_kargs_t a) {
    const symm__moe_kargs_t *A = &a;
    symm__moe_state_t *st = moe_state(A);
    const uint64_t e = st->epoch;
    const uint32_t tid = symm__block_tid(), lane = tid & 31u, warp = tid >> 5, n = (uint32_t)A->n;
    const uint64_t row_bytes = (uint64_t)A->hidden * 2u;
    uint64_t got = (uint64_t)MOE_I32(A, ht_rnum)[0], rows = got;
    if (rows > A->y_rows) {
        if (blockIdx.x == 0 && tid == 0)
            moe_error(A, SYMM__MOE_ERR_Y_ROWS, (int64_t)got, (int64_t)A->y_rows, 0);
        rows = A->y_rows;
    }
    for (uint64_t j = (uint64_t)blockIdx.x * SYMM__MOE_WARPS + warp; j < rows;
         j += (uint64_t)gridDim.x * SYMM__MOE_WARPS) {
        const int32_t *src = MOE_I32(A, ht_rsrc) + 2 * j;
        const uint32_t pe = (uint32_t)src[0];
        const uint64_t t = (uint32_t)src[1];
        symm__copy(moe_peer(A, MOE_AT(A, ht_cbuf) + (t * n + (uint32_t)A->me) * row_bytes, (int)pe),
                   (const char *)A->y + j * (uint64_t)A->y_stride[1] * 2u, row_bytes, lane, 32, 1);
    }
    if (moe_last_block(&st->done[SYMM__MK_HT_COMBINE_SEND]) && tid < n)
        moe_signal(A, MOE_U64(A, ht_cdone) + A->me, e, (int)tid);
}

__global__ void __launch_bounds__(SYMM__MOE_THREADS) symm__k_ht_combine_recv(const __grid_constant__ symm__moe_kargs_t a) {
    const symm__moe_kargs_t *A = &a;
    const uint64_t e = moe_state(A)->epoch;
    const uint32_t tid = symm__block_tid(), n = (uint32_t)A->n, h8 = A->hidden / 8u;
    const uint64_t row_bytes = (uint64_t)A->hidden * 2u;
    __shared__ int in[64];
    if (tid < n)
        moe_wait(A, MOE_U64(A, ht_cdone) + tid, e);
    symm__block_sync();
    for (uint64_t t = blockIdx.x; t < A->num_tokens; t += gridDim.x) {
        if (tid < n)
            in[tid] = MOE_I32(A, ht_pos)[t * n + tid] >= 0;
        symm__block_sync();
        for (uint32_t v = tid; v < h8; v += SYMM__MOE_THREADS) {
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, x[8];
            for (uint32_t r = 0; r < n; r++) {
                if (!in[r])
                    continue;
                moe_load8(MOE_AT(A, ht_cbuf) + (t * n + r) * row_bytes + (uint64_t)v * 16u, A->y_kind, x);
                for (int i = 0; i < 8; i++)
                    acc[i] += x[i];
            }
            moe_store8((char *)A->out + ((int64_t)t * A->out_stride + (int64_t)v * 8) * 2, A->out_kind, acc);
        }
        symm__block_sync();
    }
}

symm_status_t symm__moe_launch_ht(const symm__moe_kargs_t *a, cudaStream_t s) {
    switch (a->kernel) {
    case SYMM__MK_HT_LAYOUT:
        symm__k_ht_layout<<<1, SYMM__MOE_THREADS, a->experts * sizeof(uint32_t), s>>>(*a);
        return symm__moe_launched("the MoE layout kernel");
    case SYMM__MK_HT_DISPATCH_SEND:
        symm__k_ht_dispatch_send<<<a->nblocks, SYMM__MOE_THREADS, 0, s>>>(*a);
        return symm__moe_launched("the MoE high-throughput dispatch kernel");
    case SYMM__MK_HT_DISPATCH_RECV:
        symm__k_ht_dispatch_recv<<<1, SYMM__MOE_THREADS, 0, s>>>(*a);
        return symm__moe_launched("the MoE high-throughput dispatch receive kernel");
    case SYMM__MK_HT_COMBINE_SEND:
        symm__k_ht_combine_send<<<a->nblocks, SYMM__MOE_THREADS, 0, s>>>(*a);
        return symm__moe_launched("the MoE high-throughput combine send kernel");
    default:
        symm__k_ht_combine_recv<<<a->nblocks, SYMM__MOE_THREADS, 0, s>>>(*a);
        return symm__moe_launched("the MoE high-throughput combine receive kernel");
    }
}
