/*
 * test_coll_device.cu - the device-callable collectives (symm_device_coll.h)
 * from inside user kernels, on 2 and 4 GPUs:
 *   - a fused kernel: fill, grid barrier, grid-scope all-reduce, grid barrier,
 *     on-device check, with grid sizes and algorithms changing every launch;
 *   - block-scope and grid-scope all-reduce (f32, bf16), reduce-scatter,
 *     all-gather, all-to-all, all_to_allv (counts in device memory),
 *     broadcast, checked on the host;
 *   - two collectives and a block barrier in one launch;
 *   - a packet call after a one-shot call of the same slot and parity, whose
 *     plain data carried the packet call's flag value (stale_scratch);
 *   - one-shot calls alternating with calls that give a slot nothing to
 *     exchange (count 0, more blocks than words), no barrier between them,
 *     the last PE much slower than the others (ahead);
 *   - a direct call whose dest lies outside the heap on the last PE must
 *     stop every PE with a message naming it (notheap, a run of its own:
 *     the CUDA context is gone after the trap).
 *   test_coll_device <npes> [ahead|notheap]
 */
#include <stdlib.h>
#include <unistd.h>

#include "symm/symm_device.h"
#include "coll_test.h"
#include "coll/coll.h"

static int me, npes;
static const symm_ctx_t *ctx;
static uint64_t g_seed = 77;

enum { C_AR, C_RS, C_AG, C_A2A, C_A2AV, C_BCAST };

__global__ void __launch_bounds__(512) k_fused(const symm_ctx_t *c, float *buf, float *out, size_t n, uint64_t seed, int me, int npes,
                        int algo, int it, unsigned long long *bad) {
    size_t t0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x, nt = (size_t)gridDim.x * blockDim.x;
    for (size_t i = t0; i < n; i += nt)
        buf[i] = (float)ct_fval(SYMM_DTYPE_F32, seed, me, i);
    symm_coll_barrier_grid(c, blockIdx.x, gridDim.x);
    symm_all_reduce_ex_grid(c, out, buf, n, SYMM_DTYPE_F32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT, algo, blockIdx.x,
                            gridDim.x);
    symm_coll_barrier_grid(c, blockIdx.x, gridDim.x);
    for (size_t i = t0; i < n; i += nt) {
        double s = 0;
        for (int p = 0; p < npes; p++) s += ct_fval(SYMM_DTYPE_F32, seed, p, i);
        /* bad[0]: count; bad[1 + 4k ..]: the first 8 seen (launch, index, want, got) */
        if (out[i] != (float)s) {
            unsigned long long k = atomicAdd(bad, 1ull);
            if (k < 8) {
                bad[1 + 4 * k] = (unsigned long long)it; bad[2 + 4 * k] = i;
                bad[3 + 4 * k] = __float_as_uint((float)s); bad[4 + 4 * k] = __float_as_uint(out[i]);
            }
        }
    }
}

/* One collective; grid != 0: grid scope over all blocks, else block scope by
 * block 0 only. */
__global__ void k_coll(const symm_ctx_t *c, int which, int grid, void *dst, const void *src, size_t n, int dtype,
                       int op, int root, const uint64_t *v) {
    int b = grid ? (int)blockIdx.x : 0, nb = grid ? (int)gridDim.x : 1;
    if (!grid && blockIdx.x != 0)
        return;
    switch (which) {
    case C_AR: symm_all_reduce_grid(c, dst, src, n, dtype, op, b, nb); break;
    case C_RS: symm_reduce_scatter_grid(c, dst, src, n, dtype, op, b, nb); break;
    case C_AG: symm_all_gather_grid(c, dst, src, n, dtype, b, nb); break;
    case C_A2A: symm_all_to_all_grid(c, dst, src, n, dtype, b, nb); break;
    case C_A2AV:
        symm_all_to_allv_grid(c, dst, src, v, v + SYMM_COLL_MAX_PES, v + 2 * SYMM_COLL_MAX_PES,
                              v + 3 * SYMM_COLL_MAX_PES, dtype, b, nb);
        break;
    default: symm_broadcast_grid(c, dst, src, n, dtype, root, b, nb); break;
    }
}

/* A two-shot all-reduce of int32, block scope. */
__global__ void k_coll_ex(const symm_ctx_t *c, void *dst, const void *src, size_t n) {
    symm_all_reduce_ex_block(c, dst, src, n, SYMM_DTYPE_I32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_TWOSHOT);
}

/* Two all-reduces and a block barrier in one launch (block scope). */
__global__ void k_two(const symm_ctx_t *c, float *a, float *b, size_t n) {
    symm_all_reduce_block(c, a, a, n, SYMM_DTYPE_F32, SYMM_OP_SUM);
    symm_coll_barrier_block(c);
    symm_all_reduce_block(c, b, b, n, SYMM_DTYPE_F32, SYMM_OP_MAX);
}

/*
 * Three block-scope all-reduces of int32 on slot 0: ONESHOT of `a` (whose
 * 16-byte units are {x, F, y, F}, F the flag value of the third call), a
 * PACKET call of the other parity, then a PACKET call of `b` for which PE 0
 * first waits 20 ms. The third call's readers poll the packet region of the
 * first call's parity while PE 0's packets are late: plain data of the
 * first call there would pass for PE 0's packets ({x, F, y, F} reads as the
 * word y:x with flag F in both halves).
 */
__global__ void k_stale(const symm_ctx_t *c, const int32_t *a, const int32_t *b, int32_t *r1, int32_t *r2,
                        int32_t *r3, size_t n1, size_t n3) {
    symm_all_reduce_ex_grid(c, r1, a, n1, SYMM_DTYPE_I32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_ONESHOT,
                            0, 1);
    symm_all_reduce_ex_grid(c, r2, b, 2, SYMM_DTYPE_I32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_PACKET, 0,
                            1);
    if (c->my_pe == 0) {
        uint64_t t0;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        for (;;) {
            uint64_t t;
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
            if (t - t0 > 20000000ull)
                break;
        }
    }
    __syncthreads();
    symm_all_reduce_ex_grid(c, r3, b, n3, SYMM_DTYPE_I32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_PACKET, 0,
                            1);
}

/*
 * `iters` one-shot all-reduces of int32 (n elements, input and result of
 * call i at i * n), each followed by a call that leaves slots empty: count 0
 * (block scope), or 3 elements over the grid's 8 blocks (packet all-reduce,
 * all-gather, broadcast in turn: one or two words, so blocks 2..7 have none).
 * No barrier between the calls. The last PE runs this with 32 threads, the
 * others with 512, so they finish each one-shot call long before it does:
 * had the empty call counted, their next one-shot call would store into the
 * region the slow PE is still reducing from.
 */
__global__ void __launch_bounds__(512) k_ahead(const symm_ctx_t *c, int32_t *r, const int32_t *a, int32_t *small, size_t n, int iters,
                        int grid) {
    int b = grid ? (int)blockIdx.x : 0, nb = grid ? (int)gridDim.x : 1;
    for (int i = 0; i < iters; i++) {
        symm_all_reduce_ex_grid(c, r + (size_t)i * n, a + (size_t)i * n, n, SYMM_DTYPE_I32, SYMM_OP_SUM,
                                SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_ONESHOT, b, nb);
        if (!grid)
            symm_all_reduce_block(c, small, a, 0, SYMM_DTYPE_I32, SYMM_OP_SUM);
        else if (i % 3 == 0)
            symm_all_reduce_grid(c, small, a, 3, SYMM_DTYPE_I32, SYMM_OP_SUM, b, nb);
        else if (i % 3 == 1)
            symm_all_gather_grid(c, small, a, 1, SYMM_DTYPE_I32, b, nb);
        else
            symm_broadcast_grid(c, small, a, 3, SYMM_DTYPE_I32, 0, b, nb);
    }
}

static int32_t ahead_val(int pe, int i, size_t k) { return (int32_t)((uint32_t)(pe + 1) * 1000003u + (uint32_t)i * 7919u + (uint32_t)k); }

static char *sa, *sb, *h_in, *h_out, *h_ref;

static void part_ahead(void) {
    int32_t *a = (int32_t *)h_in, *out = (int32_t *)h_out;
    int32_t *da = (int32_t *)sa, *dr = (int32_t *)sb;
    for (int grid = 0; grid < 2; grid++) {
        /* 24 KiB per block slot: one-shot fits a region on up to 8 PEs */
        const size_t n = grid ? 8 * 6144 : 6144;
        const int iters = grid ? 30 : 40;
        int32_t *small = dr + (size_t)iters * n;
        long long bad = 0;
        for (int i = 0; i < iters; i++)
            for (size_t k = 0; k < n; k++)
                a[(size_t)i * n + k] = ahead_val(me, i, k);
        CUDA_CHECK(cudaMemcpy(da, a, (size_t)iters * n * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemset(dr, 0x5a, (size_t)iters * n * 4));
        CUDA_CHECK(cudaDeviceSynchronize());
        SYMM_CHECK(symm_barrier_all());
        k_ahead<<<grid ? 8 : 1, me == npes - 1 ? 32 : 512>>>(ctx, dr, da, small, n, iters, grid);
        CUDA_CHECK_KERNEL();
        CUDA_CHECK(cudaMemcpy(out, dr, (size_t)iters * n * 4, cudaMemcpyDeviceToHost));
        for (int i = 0; i < iters; i++)
            for (size_t k = 0; k < n; k++) {
                uint32_t want = 0;
                for (int p = 0; p < npes; p++) want += (uint32_t)ahead_val(p, i, k);
                if (out[(size_t)i * n + k] != (int32_t)want && bad++ < 4)
                    fprintf(stderr, "FAIL [pe %d] ahead (%s): call %d element %zu is %d, want %d\n", me,
                            grid ? "grid of 8, 3 elements between" : "block, count 0 between", i, k,
                            out[(size_t)i * n + k], (int32_t)want);
            }
        if (bad) {
            g_ct_failures++;
            fprintf(stderr, "FAIL [pe %d] ahead: %lld wrong elements (npes %d)\n", me, bad, npes);
        }
        if (me == 0)
            printf("one-shot calls around calls that leave slots empty (%s): %s\n",
                   grid ? "grid, more blocks than words" : "block, count 0", bad ? "WRONG" : "ok");
    }
}

/* PE npes - 1 passes a dest outside the heap to a direct all-reduce; every
 * PE's kernel must stop with the message (ctest matches it). */
static int part_notheap(void) {
    const size_t n = 100000;
    int32_t *dst = (int32_t *)sb;
    cudaError_t err;
    if (me == npes - 1)
        CUDA_CHECK(cudaMalloc((void **)&dst, n * 4));
    CUDA_CHECK(cudaMemset(sa, 0, n * 4));
    CUDA_CHECK(cudaDeviceSynchronize());
    SYMM_CHECK(symm_barrier_all());
    k_coll_ex<<<1, 256>>>(ctx, dst, sa, n);
    CUDA_CHECK(cudaGetLastError());
    err = cudaDeviceSynchronize();
    TEST_ASSERT(err != cudaSuccess, "a direct all-reduce with dest outside the heap on PE %d returned", npes - 1);
    printf("test_coll_device notheap: PE %d: the kernel stopped with %s, as it should\n", me,
           cudaGetErrorName(err));
    fflush(stdout);
    _exit(0);
}

/* k_stale with the slot's call counter set so that the third call's flag is
 * known; checks the third result (and the first). */
static void part_stale_scratch(void) {
    const size_t n1 = 256, n3 = 128;
    const uint64_t c0 = 1000; /* calls so far: the calls get counts 1001..1003, flags 1002..1004 */
    const int32_t F = (int32_t)((c0 + 3) % 0xffffffffull + 1);
    int32_t *a = (int32_t *)h_in, *b = a + n1, *out = (int32_t *)h_out;
    int32_t *da = (int32_t *)sa, *db = da + n1, *r1 = (int32_t *)sb, *r2 = r1 + n1, *r3 = r2 + 64;
    int bad1 = 0, bad3 = 0;
    for (size_t i = 0; i < n1; i++)
        a[i] = (i & 1) ? F : (int32_t)(i * 3 + (size_t)me);
    for (size_t i = 0; i < n3; i++)
        b[i] = (int32_t)(100000 + i * 7 + (size_t)me * 11);
    CUDA_CHECK(cudaMemcpy(da, a, (n1 + n3) * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());
    SYMM_CHECK(symm_barrier_all());
    SYMM_CHECK(symm__coll_debug_set_epoch(NULL, c0));
    SYMM_CHECK(symm_barrier_all());
    k_stale<<<1, 256>>>(ctx, da, db, r1, r2, r3, n1, n3);
    CUDA_CHECK_KERNEL();
    CUDA_CHECK(cudaMemcpy(out, r1, n1 * 4, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n1; i++) {
        int64_t want = 0;
        for (int p = 0; p < npes; p++) want += (i & 1) ? F : (int64_t)(i * 3 + (size_t)p);
        bad1 += out[i] != (int32_t)want;
    }
    CUDA_CHECK(cudaMemcpy(out, r3, n3 * 4, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n3; i++) {
        int64_t want = 0;
        for (int p = 0; p < npes; p++) want += 100000 + (int64_t)i * 7 + p * 11;
        if (out[i] != (int32_t)want && bad3++ < 4)
            fprintf(stderr, "FAIL [pe %d] stale scratch: packet all-reduce element %zu is %d, want %d\n", me, i,
                    out[i], (int32_t)want);
    }
    if (bad1 || bad3) {
        g_ct_failures++;
        fprintf(stderr, "FAIL [pe %d] stale scratch: %d wrong one-shot and %d wrong packet elements (npes %d)\n", me,
                bad1, bad3, npes);
    }
    if (me == 0)
        printf("stale scratch: packet call after a one-shot call holding its flag %s\n",
               bad1 || bad3 ? "WRONG" : "ok");
}
#define POOL ((size_t)16 << 20)

static void run(int which, int grid, int nblocks, symm_dtype_t t, symm_redop_t op, size_t n, int root) {
    uint32_t esz = ct_esz(t);
    uint64_t seed = ++g_seed;
    size_t in_n = (which == C_RS || which == C_A2A) ? n * npes : n;
    size_t out_n = (which == C_AG || which == C_A2A) ? n * npes : n;
    ct_fill(t, seed, me, 0, in_n, h_in);
    CUDA_CHECK(cudaMemcpy(sa, h_in, in_n * esz, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(sb, 0x5a, out_n * esz));
    CUDA_CHECK(cudaDeviceSynchronize());
    k_coll<<<nblocks, 256>>>(ctx, which, grid, sb, sa, n, (int)t, (int)op, root, NULL);
    CUDA_CHECK_KERNEL();
    CUDA_CHECK(cudaMemcpy(h_out, sb, out_n * esz, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < out_n; i++) {
        switch (which) {
        case C_AR: ct_reduce(t, op, seed, npes, i, h_ref + i * esz); break;
        case C_RS: ct_reduce(t, op, seed, npes, (uint64_t)me * n + i, h_ref + i * esz); break;
        case C_AG: ct_elem(t, seed, (int)(i / n), i % n, h_ref + i * esz); break;
        case C_A2A: ct_elem(t, seed, (int)(i / n), (uint64_t)me * n + i % n, h_ref + i * esz); break;
        default: ct_elem(t, seed, root, i, h_ref + i * esz); break;
        }
    }
    {
        static const char *names[] = {"all_reduce", "reduce_scatter", "all_gather", "all_to_all", "all_to_allv",
                                      "broadcast"};
        char what[200];
        snprintf(what, sizeof(what), "device %s (%s scope, %d blocks) %s op %d n %zu root %d npes %d", names[which],
                 grid ? "grid" : "block", nblocks, ct_type_name(t), op, n, root, npes);
        ct_check(what, t, h_out, h_ref, out_n);
    }
}

static void run_a2av(int grid, int nblocks, size_t scale) {
    uint64_t seed = ++g_seed, v[4 * SYMM_COLL_MAX_PES] = {0}, *dv;
    size_t spos = 0, rpos = 0;
#define CNT(a, b) ((uint64_t)(((a) * 5 + (b) * 3 + seed) % 4) * scale + 1)
    for (int p = 0; p < npes; p++) {
        v[p] = CNT(me, p);
        v[SYMM_COLL_MAX_PES + p] = spos;
        spos += v[p];
        v[2 * SYMM_COLL_MAX_PES + p] = CNT(p, me);
        v[3 * SYMM_COLL_MAX_PES + p] = rpos;
        rpos += CNT(p, me);
    }
    ct_fill(SYMM_DTYPE_F32, seed, me, 0, spos, h_in);
    CUDA_CHECK(cudaMalloc((void **)&dv, sizeof(v)));
    CUDA_CHECK(cudaMemcpy(dv, v, sizeof(v), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(sa, h_in, spos * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());
    k_coll<<<nblocks, 256>>>(ctx, C_A2AV, grid, sb, sa, 0, SYMM_DTYPE_F32, 0, 0, dv);
    CUDA_CHECK_KERNEL();
    CUDA_CHECK(cudaMemcpy(h_out, sb, rpos * 4, cudaMemcpyDeviceToHost));
    for (int p = 0; p < npes; p++) {
        uint64_t pd = 0;
        for (int q = 0; q < me; q++) pd += CNT(p, q);
        ct_fill(SYMM_DTYPE_F32, seed, p, pd, CNT(p, me), h_ref + v[3 * SYMM_COLL_MAX_PES + p] * 4);
    }
#undef CNT
    {
        char what[160];
        snprintf(what, sizeof(what), "device all_to_allv (%s scope, %d blocks, scale %zu) npes %d",
                 grid ? "grid" : "block", nblocks, scale, npes);
        ct_check(what, SYMM_DTYPE_F32, h_out, h_ref, rpos);
    }
    CUDA_CHECK(cudaFree(dv));
}

int main(int argc, char **argv) {
    int need = argc > 1 ? atoi(argv[1]) : 2;
    const char *only = argc > 2 ? argv[2] : "";
    unsigned long long *bad, hbad[33];
    float *buf, *out;
    symm_test_require_pes(need);
    SYMM_CHECK(symm_init());
    me = symm_my_pe();
    npes = symm_n_pes();
    if (npes < need) {
        symm_finalize();
        TEST_SKIP("needs %d PEs, run with %d", need, npes);
    }
    SYMM_CHECK(symm_ctx(&ctx));
    SYMM_CHECK(symm_malloc(POOL, (void **)&sa));
    SYMM_CHECK(symm_malloc(POOL, (void **)&sb));
    h_in = (char *)malloc(POOL);
    h_out = (char *)malloc(POOL);
    h_ref = (char *)malloc(POOL);
    TEST_ASSERT(h_in && h_out && h_ref, "host memory");
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(only, "notheap") == 0)
        return part_notheap();
    if (strcmp(only, "ahead") == 0) {
        part_ahead();
        goto done;
    }

    /* fused kernel, grid size and algorithm changing each launch */
    {
        static const int grids[] = {1, 3, 8, 2, 16, 5, 32, 7};
        static const size_t sizes[] = {1, 999, 30001, 200000, 64, 100003};
        buf = (float *)sa;
        out = (float *)sb;
        CUDA_CHECK(cudaMalloc((void **)&bad, sizeof(hbad)));
        CUDA_CHECK(cudaMemset(bad, 0, sizeof(hbad)));
        for (int it = 0; it < 96; it++) {
            /* the grid barrier needs every block resident, next to the peers' grids */
            int g = symm_test_waiting_grid(grids[it % 8]), algo = it % 4; /* auto, packet, oneshot, twoshot */
            size_t n = sizes[(it / 2) % 6];
            k_fused<<<g, 512>>>(ctx, buf, out, n, ++g_seed, me, npes, algo, it, bad);
            CUDA_CHECK(cudaGetLastError());
        }
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(hbad, bad, sizeof(hbad), cudaMemcpyDeviceToHost));
        if (hbad[0]) {
            static const char *an[] = {"auto", "packet", "oneshot", "twoshot"};
            g_ct_failures++;
            fprintf(stderr, "FAIL [pe %d] fused kernel: %llu wrong elements over 96 launches (npes %d)\n", me,
                    hbad[0], npes);
            for (int k = 0; k < 8 && (unsigned long long)k < hbad[0]; k++) {
                int it = (int)hbad[1 + 4 * k];
                uint32_t bw = (uint32_t)hbad[3 + 4 * k], bg = (uint32_t)hbad[4 + 4 * k];
                float fw, fg;
                memcpy(&fw, &bw, 4);
                memcpy(&fg, &bg, 4);
                fprintf(stderr, "FAIL [pe %d]   launch %d (grid %d, algo %s, n %zu): element %llu want %g got %g\n",
                        me, it, symm_test_waiting_grid(grids[it % 8]), an[it % 4], sizes[(it / 2) % 6],
                        hbad[2 + 4 * k], fw, fg);
            }
        }
        CUDA_CHECK(cudaFree(bad));
        if (me == 0)
            printf("fused grid-scope all-reduce: 96 launches %s\n", hbad[0] ? "WRONG" : "ok");
    }
    /* every collective, block and grid scope */
    {
        static const size_t sizes[] = {1, 7, 1000, 5001, 40000, 250001};
        for (int grid = 0; grid < 2; grid++)
            for (size_t s = 0; s < 6; s++) {
                int nb = grid ? symm_test_waiting_grid((int)(1 + (s * 5) % 17)) : 1;
                size_t n = sizes[s];
                run(C_AR, grid, nb, SYMM_DTYPE_F32, SYMM_OP_SUM, n, 0);
                run(C_AR, grid, nb, SYMM_DTYPE_BF16, SYMM_OP_MAX, n, 0);
                run(C_RS, grid, nb, SYMM_DTYPE_F32, SYMM_OP_SUM, n / npes + 1, 0);
                run(C_AG, grid, nb, SYMM_DTYPE_BF16, SYMM_OP_SUM, n / npes + 1, 0);
                run(C_A2A, grid, nb, SYMM_DTYPE_F32, SYMM_OP_SUM, n / npes + 1, 0);
                run(C_BCAST, grid, nb, SYMM_DTYPE_F32, SYMM_OP_SUM, n, (int)(s % npes));
                run_a2av(grid, nb, n / (4 * npes) + 1);
            }
        if (me == 0)
            printf("block and grid scope collectives done (%lld failed checks so far)\n", g_ct_failures);
    }
    part_stale_scratch();
    part_ahead();
    /* two collectives and a barrier in one launch */
    {
        size_t n = 3000;
        uint64_t seed = ++g_seed;
        ct_fill(SYMM_DTYPE_F32, seed, me, 0, n, h_in);
        CUDA_CHECK(cudaMemcpy(sa, h_in, n * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(sb, h_in, n * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaDeviceSynchronize());
        for (int i = 0; i < 2; i++) /* twice: the second reduces already reduced data */
            k_two<<<1, 128>>>(ctx, (float *)sa, (float *)sb, n);
        CUDA_CHECK_KERNEL();
        CUDA_CHECK(cudaMemcpy(h_out, sa, n * 4, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n; i++) {
            double s = 0;
            for (int p = 0; p < npes; p++) s += ct_fval(SYMM_DTYPE_F32, seed, p, i);
            s *= npes;
            float f;
            memcpy(&f, h_out + i * 4, 4);
            if (f != (float)s) {
                g_ct_failures++;
                fprintf(stderr, "FAIL [pe %d] two-call kernel: element %zu is %g, want %g\n", me, i, f, s);
                break;
            }
        }
        CUDA_CHECK(cudaMemcpy(h_out, sb, n * 4, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n; i++) {
            ct_reduce(SYMM_DTYPE_F32, SYMM_OP_MAX, seed, npes, i, h_ref + i * 4);
        }
        ct_check("two-call kernel: max all-reduce (block scope, 3000 f32)", SYMM_DTYPE_F32, h_out, h_ref, n);
    }
done:
    CUDA_CHECK(cudaDeviceSynchronize());
    SYMM_CHECK(symm_free(sb));
    SYMM_CHECK(symm_free(sa));
    SYMM_CHECK(symm_finalize());
    if (g_ct_failures) {
        fprintf(stderr, "FAIL [pe %d] test_coll_device: %lld failed checks on %d PEs\n", me, g_ct_failures, npes);
        return 1;
    }
    if (me == 0)
        printf("test_coll_device: PASS on %d PEs\n", npes);
    return 0;
}
