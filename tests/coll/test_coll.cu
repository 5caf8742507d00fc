/*
 * test_coll.cu - the stream collectives (symm_coll.h) on 2 to 8 PEs (one GPU
 * each, or sharing GPUs).
 *
 *   test_coll <npes> [part]     part: all (default), matrix, move, big, b2b,
 *                                     every, graph, wrap, errors
 *
 * matrix  all-reduce and reduce-scatter: every type x op (x fp8 accumulator)
 *         x algorithm x {in place, out of place} x {symmetric, cudaMalloc}
 *         buffers, counts 1 .. 70001 with odd counts and unaligned offsets,
 *         on the world and the node team; bytes outside the result are
 *         checked untouched.
 * move    all-gather, all-to-all, all_to_allv, broadcast, the same way.
 * big     all-reduce of 256 MiB (f32, in place) once, all-gather 64 MiB per PE,
 *         broadcast 64 MiB in place.
 * b2b     10^4 all-reduces back to back (no host sync between them), with
 *         fresh data, sizes (so algorithms and grid sizes) changing every call.
 * every   10^3 iterations of every collective back to back, fresh data each
 *         iteration, symmetric and cudaMalloc buffers, checked bit for bit.
 * graph   a captured sequence (fill, all-reduces of every algorithm,
 *         all-gather, broadcasts, reduce-scatter, on-device check) replayed
 *         1000 times, each replay with a new seed.
 * wrap    the call counters set just below the 2^32 wrap of the flag values,
 *         then every algorithm again.
 * errors  bad input returns a clear status and enqueues nothing (every PE
 *         the same), then a correct call still works.
 * ce      the copy-engine path of all-gather / all-to-all, lowered to 1 KiB
 *         pieces (SYMM_COLL_CE_MIN, set before init): move cases checked
 *         like `move`, the path taken checked per call (symmetric recv on
 *         every PE: copy engines; recv symmetric on some PEs only: not),
 *         then the graph part with it.
 * pipe    the copy-engine pipelines (reduce-scatter, all-reduce, broadcast)
 *         and the ONESHOT reduce-scatter, forced through AUTO's limits, with
 *         chunks down to 16 bytes, across the flag wrap, then the graph part
 *         with them.
 */
#include <stdlib.h>
#include <time.h>

#include "coll_test.h"
#include "coll/coll.h"

static int me, npes;
static cudaStream_t st;
static uint64_t g_seed = 1000;
static long long g_checks;
static long long g_packet2; /* all-reduces that ran as two-shot packets */
static long long g_stores;  /* ... as the stores-only two-shot kernel */

#define POOL (size_t)(24u << 20)
#define GUARD 256
static char *symm_a, *symm_b, *dev_a, *dev_b; /* POOL bytes each */
static char *h_in, *h_out, *h_ref;              /* host staging */

static uint64_t next_seed(void) { return ++g_seed * 7919u + 17u; }

/*
 * Every copy and fill of test data goes on the collectives' stream `st`, and
 * the host waits for it. `st` is non-blocking: work on the legacy stream is
 * not ordered with it, and a synchronous cudaMemcpy from pageable memory
 * returns once the data is staged, before its last DMA has landed (GPU run 3:
 * collectives read the tail of a send buffer still holding the 0xa5 poison
 * or the previous call's data, and a cudaMemset poison of recv landed after
 * the peers had written their results into it).
 */
static void to_dev(void *p, const void *h, size_t bytes) {
    CUDA_CHECK(cudaMemcpyAsync(p, h, bytes, cudaMemcpyHostToDevice, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
}
static void from_dev(void *h, const void *p, size_t bytes) {
    CUDA_CHECK(cudaMemcpyAsync(h, p, bytes, cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
}

/* Fill [p - GUARD, p + bytes + GUARD) with the guard byte. */
static void guard_fill(char *p, size_t bytes) {
    CUDA_CHECK(cudaMemsetAsync(p - GUARD, 0xa5, bytes + 2 * GUARD, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
}

static void guard_check(const char *p, size_t bytes, const char *what) {
    unsigned char g[2 * GUARD];
    from_dev(g, p - GUARD, GUARD);
    from_dev(g + GUARD, p + bytes, GUARD);
    for (int i = 0; i < 2 * GUARD; i++)
        if (g[i] != 0xa5) {
            g_ct_failures++;
            fprintf(stderr, "FAIL [pe %d] %s (%s, %zu bytes): byte %d %s the result was overwritten (0x%02x)\n", me,
                    what, symm_coll_last_algo(), bytes, i < GUARD ? GUARD - i : i - GUARD + 1,
                    i < GUARD ? "before" : "after", g[i]);
            return;
        }
}

static symm_team_t team_of(int k) { return k ? symm_team_node() : symm_team_world(); }

/* ---- all-reduce / reduce-scatter ------------------------------------------------- */

static void check_all_reduce(symm_dtype_t t, symm_redop_t op, symm_dtype_t acc, symm_coll_algo_t algo, size_t count,
                             int symm_buf, int inplace, size_t off, int tk) {
    uint32_t esz = ct_esz(t);
    size_t bytes = count * esz;
    uint64_t seed = next_seed();
    char *base_s = symm_buf ? symm_a : dev_a, *base_r = symm_buf ? symm_b : dev_b;
    char *send = base_s + GUARD + off * esz, *recv = inplace ? send : base_r + GUARD + off * esz;
    ct_fill(t, seed, me, 0, count, h_in);
    guard_fill(send, bytes);
    if (!inplace)
        guard_fill(recv, bytes);
    to_dev(send, h_in, bytes);
    symm_status_t s = symm_all_reduce_ex(send, recv, count, t, op, acc, algo, team_of(tk), st);
    if (s != SYMM_SUCCESS)
        TEST_FAIL("all_reduce %s op %d count %zu: %s (%s)", ct_type_name(t), op, count, symm_strerror(s),
                  symm_last_error());
    g_packet2 += strcmp(symm_coll_last_algo(), "packet-2shot") == 0;
    g_stores += strncmp(symm_coll_last_algo(), "twoshot-stores", 14) == 0;
    CUDA_CHECK(cudaStreamSynchronize(st));
    from_dev(h_out, recv, bytes);
    for (size_t i = 0; i < count; i++)
        ct_reduce(t, op, seed, npes, i, h_ref + i * esz);
    {
        char what[256];
        snprintf(what, sizeof(what), "all_reduce %s op %d acc %d algo %s (%s) count %zu %s %s off %zu team %d npes %d",
                 ct_type_name(t), op, acc, symm_coll_algo_name(algo), symm_coll_last_algo(), count,
                 symm_buf ? "symm" : "cudaMalloc", inplace ? "in-place" : "out-of-place", off, tk, npes);
        ct_check(what, t, h_out, h_ref, count);
    }
    guard_check(recv, bytes, "all_reduce");
    if (!inplace) {
        from_dev(h_out, send, bytes);
        TEST_ASSERT(memcmp(h_out, h_in, bytes) == 0, "all_reduce modified its input");
    }
    g_checks++;
}

static void check_reduce_scatter(symm_dtype_t t, symm_redop_t op, symm_coll_algo_t algo, size_t count, int symm_buf,
                                 int inplace, size_t off, int tk) {
    uint32_t esz = ct_esz(t);
    size_t bytes = count * esz, total = bytes * npes;
    uint64_t seed = next_seed();
    char *base_s = symm_buf ? symm_a : dev_a, *base_r = symm_buf ? symm_b : dev_b;
    char *send = base_s + GUARD + off * esz, *recv = inplace ? send + (size_t)me * bytes : base_r + GUARD + off * esz;
    /* every PE's input: element (piece j, i) is element j * count + i of the stream */
    ct_fill(t, seed, me, 0, (uint64_t)count * npes, h_in);
    guard_fill(send, total);
    if (!inplace)
        guard_fill(recv, bytes);
    to_dev(send, h_in, total);
    symm_status_t s = symm_reduce_scatter_ex(send, recv, count, t, op, SYMM_DTYPE_DEFAULT, algo, team_of(tk), st);
    if (s != SYMM_SUCCESS)
        TEST_FAIL("reduce_scatter: %s (%s)", symm_strerror(s), symm_last_error());
    CUDA_CHECK(cudaStreamSynchronize(st));
    from_dev(h_out, recv, bytes);
    for (size_t i = 0; i < count; i++)
        ct_reduce(t, op, seed, npes, (uint64_t)me * count + i, h_ref + i * esz);
    {
        char what[256];
        snprintf(what, sizeof(what), "reduce_scatter %s op %d algo %s (%s) count %zu %s %s off %zu team %d npes %d",
                 ct_type_name(t), op, symm_coll_algo_name(algo), symm_coll_last_algo(), count,
                 symm_buf ? "symm" : "cudaMalloc", inplace ? "in-place" : "out-of-place", off, tk, npes);
        ct_check(what, t, h_out, h_ref, count);
    }
    guard_check(inplace ? send : recv, inplace ? total : bytes, "reduce_scatter");
    g_checks++;
}

static const size_t COUNTS[] = {1, 2, 3, 7, 17, 255, 1000, 4097, 33333, 70001};
#define N_COUNTS (sizeof(COUNTS) / sizeof(COUNTS[0]))
static const symm_coll_algo_t ALGOS[] = {SYMM_COLL_ALGO_AUTO,    SYMM_COLL_ALGO_PACKET,   SYMM_COLL_ALGO_ONESHOT,
                                         SYMM_COLL_ALGO_TWOSHOT, SYMM_COLL_ALGO_MULTIMEM, SYMM_COLL_ALGO_PUSH};
#define N_ALGOS (sizeof(ALGOS) / sizeof(ALGOS[0]))

/* All-reduce `algo` at every count of COUNTS (plus v) for four (type, op)
 * pairs v, the fp8 one (v = 3) accumulating in fp8_acc; buffer kind, place
 * and team vary with v, one element of offset when c % 3 == off_phase. */
static void check_all_reduce_counts(symm_coll_algo_t algo, const symm_dtype_t types[4], const symm_redop_t ops[4],
                                    symm_dtype_t fp8_acc, size_t off_phase) {
    for (size_t c = 0; c < N_COUNTS; c++)
        for (int v = 0; v < 4; v++)
            check_all_reduce(types[v], ops[v], v == 3 ? fp8_acc : SYMM_DTYPE_DEFAULT, algo, COUNTS[c] + (size_t)v,
                             (int)(c + (size_t)v) & 1, v >> 1, (c % 3 == off_phase) ? 1 : 0, v & 1);
}

/* A kernel that runs from 3 PEs only ran `ran` times: some with 3 or more
 * PEs, none with 2. */
static void expect_from_3(const char *what, long long ran) {
    if (npes >= 3 ? ran == 0 : ran != 0)
        TEST_FAIL("%s ran %lld times on %d PEs (it runs from 3 PEs only)", what, ran, npes);
}

static void part_matrix(void) {
    int combo = 0;
    for (int ti = 0; ti < CT_N_RED_TYPES; ti++) {
        symm_dtype_t t = CT_RED_TYPES[ti];
        int fp8 = (t == SYMM_DTYPE_FP8_E4M3 || t == SYMM_DTYPE_FP8_E5M2);
        for (int acc_i = 0; acc_i < (fp8 ? 2 : 1); acc_i++) {
            symm_dtype_t acc = acc_i ? SYMM_DTYPE_F16 : SYMM_DTYPE_DEFAULT;
            for (int op = 0; op < ct_nops(t); op++)
                for (int a = 0; a < (int)N_ALGOS; a++)
                    for (size_t c = 0; c < N_COUNTS; c++) {
                        /* vary the remaining dimensions over the combinations */
                        combo++;
                        int symm_buf = (combo >> 1) & 1, inplace = combo & 1, tk = (combo >> 2) & 1;
                        size_t off = (combo % 3 == 0) ? 1 : 0;
                        check_all_reduce(t, (symm_redop_t)op, acc, ALGOS[a], COUNTS[c], symm_buf, inplace, off, tk);
                        if (a != 4)
                            check_reduce_scatter(t, (symm_redop_t)op, ALGOS[a], COUNTS[c] / 2 + 1, symm_buf,
                                                 (combo >> 3) & 1, off, tk);
                    }
        }
    }
    /* PUSH with PEs whose buffers differ in kind (a cudaMalloc recv is
     * staged, and each PE publishes where its result goes), with one block
     * (each call makes several steps and reuses its buffers), and with 3
     * block slots (other buffer places and sizes; changed with every PE idle) */
    for (int v = 0; v < 6; v++) {
        if (v == 4) {
            CUDA_CHECK(cudaDeviceSynchronize());
            SYMM_CHECK(symm_barrier_all());
        }
        symm__coll_tune_push(0, 0, v == 2 || v == 3 ? 1 : 0, v >= 4 ? 3 : 0);
        if (v == 4)
            SYMM_CHECK(symm_barrier_all());
        check_all_reduce(SYMM_DTYPE_F32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_PUSH, 300001, (me + v) & 1,
                         0, v == 3, v & 1);
        check_all_reduce(SYMM_DTYPE_BF16, SYMM_OP_MAX, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_PUSH, 100003,
                         (me + v) & 1, v & 1, 0, 0);
        check_reduce_scatter(SYMM_DTYPE_F32, SYMM_OP_SUM, SYMM_COLL_ALGO_PUSH, 40001, (me + v) & 1, v & 1, v == 2, 0);
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    SYMM_CHECK(symm_barrier_all());
    symm__coll_tune_push(0, 0, 0, 0);
    SYMM_CHECK(symm_barrier_all());
    /* two-shot packets at every count (from 3 PEs; the smallest, with fewer
     * than two words per PE, fall back to one shot), several types and ops */
    {
        static const symm_dtype_t types[4] = {SYMM_DTYPE_F32, SYMM_DTYPE_BF16, SYMM_DTYPE_I64, SYMM_DTYPE_FP8_E4M3};
        static const symm_redop_t ops[4] = {SYMM_OP_SUM, SYMM_OP_MAX, SYMM_OP_MIN, SYMM_OP_SUM};
        symm__coll_tune_ar_packet(1, 0);
        check_all_reduce_counts(SYMM_COLL_ALGO_PACKET, types, ops, SYMM_DTYPE_F16, 1);
        symm__coll_tune_ar_packet(0, 0);
        expect_from_3("the two-shot packet all-reduce", g_packet2);
    }
    /* TWOSHOT took the stores-only kernel above (from 3 PEs); here the one
     * that loads from the peers, at every count */
    {
        static const symm_dtype_t types[4] = {SYMM_DTYPE_F32, SYMM_DTYPE_F16, SYMM_DTYPE_U32, SYMM_DTYPE_FP8_E5M2};
        static const symm_redop_t ops[4] = {SYMM_OP_SUM, SYMM_OP_MIN, SYMM_OP_MAX, SYMM_OP_SUM};
        symm__coll_tune_ar_stores(1);
        check_all_reduce_counts(SYMM_COLL_ALGO_TWOSHOT, types, ops, SYMM_DTYPE_F32, 2);
        symm__coll_tune_ar_stores(0);
        expect_from_3("the stores-only two-shot all-reduce", g_stores);
    }
    if (me == 0)
        printf("matrix: %lld checked calls (%lld two-shot packet, %lld stores-only two-shot all-reduces)\n", g_checks,
               g_packet2, g_stores);
}

/* ---- data movement ---------------------------------------------------------------- */

enum { MV_AG, MV_A2A, MV_BCAST, MV_A2AV };

static void check_move(int kind, symm_dtype_t t, size_t count, int symm_buf, int inplace, size_t off, int tk,
                       int root) {
    uint32_t esz = ct_esz(t);
    size_t bytes = count * esz, total = bytes * npes;
    uint64_t seed = next_seed();
    char *base_s = symm_buf ? symm_a : dev_a, *base_r = symm_buf ? symm_b : dev_b;
    char *recv = base_r + GUARD + off * esz, *send = base_s + GUARD + off * esz;
    size_t recv_bytes = kind == MV_BCAST ? bytes : total;
    symm_status_t s;
    if (kind == MV_AG && inplace)
        send = recv + (size_t)me * bytes;
    if (kind == MV_BCAST && inplace)
        send = recv;
    /* inputs: AG: my count elements; A2A: piece p (to PE p) = elements [p*count ..) of
     * stream (seed, me) ; BCAST: root's */
    size_t in_count = kind == MV_A2A ? count * npes : count;
    ct_fill(t, seed, me, 0, in_count, h_in);
    guard_fill(recv, recv_bytes);
    if (!(kind == MV_AG && inplace) && !(kind == MV_BCAST && inplace))
        guard_fill(send, in_count * esz);
    to_dev(send, h_in, in_count * esz);
    switch (kind) {
    case MV_AG: s = symm_all_gather(send, recv, count, t, team_of(tk), st); break;
    case MV_A2A: s = symm_all_to_all(send, recv, count, t, team_of(tk), st); break;
    default: s = symm_broadcast(send, recv, count, t, root, team_of(tk), st); break;
    }
    if (s != SYMM_SUCCESS)
        TEST_FAIL("move %d: %s (%s)", kind, symm_strerror(s), symm_last_error());
    CUDA_CHECK(cudaStreamSynchronize(st));
    from_dev(h_out, recv, recv_bytes);
    if (kind == MV_AG)
        for (int p = 0; p < npes; p++) ct_fill(t, seed, p, 0, count, h_ref + (size_t)p * bytes);
    else if (kind == MV_A2A)
        for (int p = 0; p < npes; p++) ct_fill(t, seed, p, (uint64_t)me * count, count, h_ref + (size_t)p * bytes);
    else
        ct_fill(t, seed, root, 0, count, h_ref);
    {
        char what[256];
        snprintf(what, sizeof(what), "%s %s (%s) count %zu %s %s off %zu team %d root %d npes %d",
                 kind == MV_AG ? "all_gather" : kind == MV_A2A ? "all_to_all" : "broadcast", ct_type_name(t),
                 symm_coll_last_algo(), count, symm_buf ? "symm" : "cudaMalloc", inplace ? "in-place" : "out-of-place",
                 off, tk, root, npes);
        ct_check(what, t, h_out, h_ref, recv_bytes / esz);
    }
    guard_check(recv, recv_bytes, "move");
    g_checks++;
}

/* all_to_allv with counts that differ per pair (some zero) and gaps in recv. */
static void check_a2av(symm_dtype_t t, size_t scale, int symm_buf, int tk) {
    uint32_t esz = ct_esz(t);
    uint64_t seed = next_seed();
    size_t sc[SYMM_COLL_MAX_PES], sd[SYMM_COLL_MAX_PES], rc[SYMM_COLL_MAX_PES], rd[SYMM_COLL_MAX_PES];
    size_t spos = 0, rpos = 0;
    /* PE a sends cnt(a, b) elements to PE b */
#define CNT(a, b) ((size_t)(((a) * 7 + (b) * 3 + seed) % 5) * scale + (((a) + (b)) % 3 == 0 ? 0 : 1))
    for (int p = 0; p < npes; p++) {
        sc[p] = CNT(me, p);
        sd[p] = spos;
        spos += sc[p] + 1; /* a gap */
        rc[p] = CNT(p, me);
        rd[p] = rpos;
        rpos += rc[p] + 2;
    }
    char *send = (symm_buf ? symm_a : dev_a) + GUARD, *recv = (symm_buf ? symm_b : dev_b) + GUARD;
    ct_fill(t, seed, me, 0, spos, h_in);
    to_dev(send, h_in, spos * esz);
    guard_fill(recv, rpos * esz);
    symm_status_t s = symm_all_to_allv(send, sc, sd, recv, rc, rd, t, team_of(tk), st);
    if (s != SYMM_SUCCESS)
        TEST_FAIL("all_to_allv: %s (%s)", symm_strerror(s), symm_last_error());
    CUDA_CHECK(cudaStreamSynchronize(st));
    from_dev(h_out, recv, rpos * esz);
    memset(h_ref, 0xa5, rpos * esz);
    for (int p = 0; p < npes; p++) {
        /* PE p's displacement for me: recompute p's layout */
        size_t pd = 0;
        for (int q = 0; q < me; q++) pd += CNT(p, q) + 1;
        ct_fill(t, seed, p, pd, rc[p], h_ref + rd[p] * esz);
    }
#undef CNT
    {
        char what[256];
        snprintf(what, sizeof(what), "all_to_allv %s scale %zu %s (%s) team %d npes %d", ct_type_name(t), scale,
                 symm_buf ? "symm" : "cudaMalloc", symm_coll_last_algo(), tk, npes);
        ct_check(what, t, h_out, h_ref, rpos);
    }
    guard_check(recv, rpos * esz, "all_to_allv");
    g_checks++;
}

static void part_move(void) {
    static const symm_dtype_t types[] = {SYMM_DTYPE_U8, SYMM_DTYPE_BF16, SYMM_DTYPE_F32, SYMM_DTYPE_F64};
    static const size_t counts[] = {1, 3, 100, 1001, 4099, 40000, 300001};
    int combo = 0;
    for (int ti = 0; ti < 4; ti++)
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
            for (int v = 0; v < 4; v++) {
                combo++;
                int symm_buf = v & 1, inplace = (v >> 1) & 1, tk = combo & 1;
                size_t off = (combo % 3 == 0) ? 1 : 0;
                size_t n = counts[c];
                if (n * ct_esz(types[ti]) * npes * 2 + 4 * GUARD > POOL)
                    n = (POOL / 2 - 4 * GUARD) / (ct_esz(types[ti]) * npes);
                check_move(MV_AG, types[ti], n, symm_buf, inplace, off, tk, 0);
                check_move(MV_A2A, types[ti], n, symm_buf, 0, off, tk, 0);
                check_move(MV_BCAST, types[ti], n, symm_buf, inplace, off, tk, combo % npes);
                check_a2av(types[ti], n / 4 + 1, symm_buf, tk);
            }
    if (me == 0)
        printf("move: %lld checked calls\n", g_checks);
}

/* ---- ce ---------------------------------------------------------------------------------- */

static void part_graph(int replays);

static void expect_ce(const char *what, size_t bytes, int want) {
    int got = strcmp(symm_coll_last_algo(), "copy-engine") == 0;
    if (got != want) {
        g_ct_failures++;
        fprintf(stderr, "[pe %d] ce: %s of %zu bytes per peer ran %s, expected %s\n", me, what, bytes,
                symm_coll_last_algo(), want ? "copy-engine" : "another algorithm");
    }
}

static void part_ce(void) {
    static const symm_dtype_t types[] = {SYMM_DTYPE_U8, SYMM_DTYPE_F32};
    static const size_t counts[] = {1000, 4099, 300001};
    int combo = 0;
    for (int ti = 0; ti < 2; ti++)
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
            for (int v = 0; v < 4; v++) {
                int symm_buf = v & 1, inplace = (v >> 1) & 1, tk = ++combo & 1;
                size_t off = combo % 3 == 0 ? 1 : 0, n = counts[c], bytes;
                if (n * ct_esz(types[ti]) * npes * 2 + 4 * GUARD > POOL)
                    n = (POOL / 2 - 4 * GUARD) / (ct_esz(types[ti]) * npes);
                bytes = n * ct_esz(types[ti]);
                check_move(MV_AG, types[ti], n, symm_buf, inplace, off, tk, 0);
                expect_ce("all_gather", bytes, symm_buf && bytes >= 1024);
                check_move(MV_A2A, types[ti], n, symm_buf, 0, off, tk, 0);
                expect_ce("all_to_all", bytes, symm_buf && bytes >= 1024);
            }
    /* recv symmetric on the odd PEs only: every PE must leave the copy engines */
    check_move(MV_AG, SYMM_DTYPE_F32, 40000, me & 1, 0, 0, 0, 0);
    expect_ce("all_gather, mixed buffers", 160000, 0);
    check_move(MV_A2A, SYMM_DTYPE_F32, 40000, me & 1, 0, 0, 0, 0);
    expect_ce("all_to_all, mixed buffers", 160000, 0);
    /* recv symmetric everywhere but one element further on the odd PEs: the
     * copies would write to this PE's offset in the peer, so no copy engines */
    check_move(MV_AG, SYMM_DTYPE_F32, 40000, 1, 0, (size_t)(me & 1), 0, 0);
    expect_ce("all_gather, recv at different heap offsets", 160000, 0);
    check_move(MV_A2A, SYMM_DTYPE_F32, 40000, 1, 0, (size_t)(me & 1), 0, 0);
    expect_ce("all_to_all, recv at different heap offsets", 160000, 0);
    if (me == 0)
        printf("ce: %lld checked calls\n", g_checks);
    part_graph(100);
}

/* ---- pipe --------------------------------------------------------------------------------- */

/* The copy-engine pipelines (reduce-scatter, all-reduce, broadcast) and the
 * ONESHOT reduce-scatter, forced by AUTO's limits (symm__coll_tune_set, every
 * PE alike), with small chunks so that a call has many (a buffer of the
 * reduce-scatter's ring is reused many times per call). */
static void tune(const char *name, uint64_t v) { SYMM_CHECK(symm__coll_tune_set(name, v)); }

/* Whether this PE may fill fewer SMs than its GPU has (PEs share the GPU). */
static int sm_shared(void) {
    int share = 0, dev = 0, sms = 0;
    if (symm_sm_share(&share) != SYMM_SUCCESS || cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
        return 0;
    return share < sms;
}

static void expect_algo(const char *what, const char *want) {
    if (strcmp(symm_coll_last_algo(), want) != 0) {
        g_ct_failures++;
        fprintf(stderr, "[pe %d] pipe: %s ran %s, expected %s\n", me, what, symm_coll_last_algo(), want);
    }
}

/* Seconds each kind of call took in a round (PE 0's wall clock, printed: the
 * pipelines' cost per chunk differs much between machine shapes). */
static double pipe_s[4];
static double pipe_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void pipe_calls(int round) {
    static const symm_dtype_t types[4] = {SYMM_DTYPE_F32, SYMM_DTYPE_BF16, SYMM_DTYPE_I64, SYMM_DTYPE_FP8_E4M3};
    static const symm_redop_t ops[4] = {SYMM_OP_SUM, SYMM_OP_MAX, SYMM_OP_BXOR, SYMM_OP_SUM};
    static const size_t counts[] = {1, 7, 1000, 4097, 70001, 300001};
    const size_t nc = sizeof(counts) / sizeof(counts[0]);
    for (size_t c = 0; c < nc; c++)
        for (int v = 0; v < 4; v++) {
            int k = (int)c * 4 + v + round;
            size_t n = counts[c] + (size_t)v;
            if (n * ct_esz(types[v]) * npes + 4 * GUARD > POOL)
                n = (POOL - 4 * GUARD) / (ct_esz(types[v]) * npes);
            double t = pipe_now();
            /* reduce-scatter through the copy engines: any buffers */
            check_reduce_scatter(types[v], ops[v], SYMM_COLL_ALGO_AUTO, n, k & 1, (k >> 1) & 1, c % 3 == 1, k & 1);
            expect_algo("reduce_scatter", "copy-engine");
            pipe_s[0] += pipe_now() - t;
            t = pipe_now();
            /* all-reduce: a multiple of 16 n bytes into a symmetric recv */
            {
                size_t per = 16 * (size_t)npes / ct_esz(types[v]), m = (n + per - 1) / per * per;
                if (m * ct_esz(types[v]) + 4 * GUARD > POOL / 2)
                    m = (POOL / 2 - 4 * GUARD) / ct_esz(types[v]) / per * per;
                check_all_reduce(types[v], ops[v], SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_AUTO, m, 1, (k >> 1) & 1, 0,
                                 k & 1);
                expect_algo("all_reduce", "copy-engine");
            }
            pipe_s[1] += pipe_now() - t;
            t = pipe_now();
            /* broadcast through the copy engines: symmetric recv, every root */
            check_move(MV_BCAST, types[v], n, 1, (k >> 1) & 1, c % 3 == 2, k & 1, k % npes);
            expect_algo("broadcast", "copy-engine");
            pipe_s[2] += pipe_now() - t;
            t = pipe_now();
            /* ONESHOT reduce-scatter (AUTO's limit raised; the pieces fit the regions) */
            if (n * ct_esz(types[v]) <= ((size_t)256 << 10)) {
                check_reduce_scatter(types[v], ops[v], SYMM_COLL_ALGO_ONESHOT, n, (k >> 1) & 1, k & 1, c % 3 == 0,
                                     k & 1);
                /* a PE with a share of a GPU may launch too few blocks for the pieces to fit its
                 * regions: ONESHOT then falls back to the direct kernel, by design */
                if (!sm_shared() || strcmp(symm_coll_last_algo(), "oneshot") == 0 ||
                    strncmp(symm_coll_last_algo(), "direct", 6) != 0)
                    expect_algo("reduce_scatter ONESHOT", "oneshot");
            }
            pipe_s[3] += pipe_now() - t;
        }
    if (me == 0)
        printf("pipe: round %d: reduce-scatter %.1f s, all-reduce %.1f s, broadcast %.1f s, one-shot %.1f s\n", round,
               pipe_s[0], pipe_s[1], pipe_s[2], pipe_s[3]);
    fflush(stdout);
    memset(pipe_s, 0, sizeof(pipe_s));
}

static void part_pipe(void) {
    const uint64_t M = 0xffffffffull;
    tune("rs_ce_min", 1);
    tune("ar_ce_min", 1);
    tune("bcast_ce_min", 1);
    tune("ce_chunk", 16); /* as many chunks as the flags allow */
    pipe_calls(0);
    tune("ce_chunk", 64 << 10);
    pipe_calls(1);
    /* the same across the 2^32 wrap of the flag values */
    CUDA_CHECK(cudaDeviceSynchronize());
    SYMM_CHECK(symm_barrier_all());
    SYMM_CHECK(symm__coll_debug_set_epoch(symm_team_world(), 3 * M - 5));
    SYMM_CHECK(symm_barrier_all());
    tune("ce_chunk", 4096);
    double t = pipe_now();
    for (int i = 0; i < 6; i++) {
        check_reduce_scatter(SYMM_DTYPE_F32, SYMM_OP_SUM, SYMM_COLL_ALGO_AUTO, 30001, i & 1, 0, 0, 0);
        check_move(MV_BCAST, SYMM_DTYPE_U8, 100003, 1, i & 1, 0, 0, i % npes);
        check_all_reduce(SYMM_DTYPE_F32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_AUTO, 4 * (size_t)npes * 999,
                         1, i & 1, 0, 0);
    }
    if (me == 0)
        printf("pipe: across the flags' wrap: %.1f s\npipe: %lld checked calls (copy-engine reduce-scatter, "
               "all-reduce, broadcast; one-shot reduce-scatter)\n", pipe_now() - t, g_checks);
    fflush(stdout);
    /* and captured into a graph with the packet and direct forms, in chunks of 64 KiB and
     * replayed 20 times: a graph node per copy, and PEs sharing several GPUs under MPS
     * replay copy nodes slowly */
    tune("ce_chunk", 64 << 10);
    t = pipe_now();
    part_graph(20);
    if (me == 0)
        printf("pipe: graphs %.1f s\n", pipe_now() - t);
    symm__coll_tune_reset();
}

/* ---- big --------------------------------------------------------------------------------- */

static void part_big(void) {
    const size_t count = (size_t)64 << 20; /* 256 MiB of f32 */
    size_t bytes = count * 4;
    float *buf;
    uint64_t seed = next_seed();
    char *h = (char *)malloc(bytes), *r = (char *)malloc(bytes);
    TEST_ASSERT(h && r, "host memory");
    SYMM_CHECK(symm_malloc(bytes, (void **)&buf));
    ct_fill(SYMM_DTYPE_F32, seed, me, 0, count, h);
    to_dev(buf, h, bytes);
    SYMM_CHECK(symm_all_reduce(buf, buf, count, SYMM_DTYPE_F32, SYMM_OP_SUM, NULL, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
    from_dev(h, buf, bytes);
    for (size_t i = 0; i < count; i++)
        ct_reduce(SYMM_DTYPE_F32, SYMM_OP_SUM, seed, npes, i, r + i * 4);
    uint64_t bad = ct_check("big all_reduce 256 MiB f32 in place", SYMM_DTYPE_F32, h, r, count);
    if (me == 0)
        printf("big: all_reduce 256 MiB f32 (%s) %s\n", symm_coll_last_algo(), bad ? "WRONG" : "ok");
    /* reduce-scatter of the same 256 MiB, in place, by the push pipeline
     * (AUTO takes the direct kernel; push makes many steps per block here) */
    {
        size_t c = count / npes;
        seed = next_seed();
        ct_fill(SYMM_DTYPE_F32, seed, me, 0, count, h);
        to_dev(buf, h, bytes);
        SYMM_CHECK(symm_reduce_scatter_ex(buf, buf + (size_t)me * c, c, SYMM_DTYPE_F32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT,
                                          SYMM_COLL_ALGO_PUSH, NULL, st));
        CUDA_CHECK(cudaStreamSynchronize(st));
        from_dev(h, buf + (size_t)me * c, c * 4);
        for (size_t i = 0; i < c; i++)
            ct_reduce(SYMM_DTYPE_F32, SYMM_OP_SUM, seed, npes, (uint64_t)me * c + i, r + i * 4);
        bad = ct_check("big reduce_scatter 256 MiB f32 in place", SYMM_DTYPE_F32, h, r, c);
        if (me == 0)
            printf("big: reduce_scatter 256 MiB f32 (%s) %s\n", symm_coll_last_algo(), bad ? "WRONG" : "ok");
    }
    /* all-gather, 64 MiB per PE, cudaMalloc'd destination (staged in pieces) */
    {
        size_t per = bytes / 4 / npes, c = per / 4;
        char *d;
        CUDA_CHECK(cudaMalloc((void **)&d, per * npes));
        seed = next_seed();
        ct_fill(SYMM_DTYPE_F32, seed, me, 0, c, h);
        to_dev(buf, h, per);
        SYMM_CHECK(symm_all_gather(buf, d, c, SYMM_DTYPE_F32, NULL, st));
        CUDA_CHECK(cudaStreamSynchronize(st));
        from_dev(h, d, per * npes);
        for (int p = 0; p < npes; p++) ct_fill(SYMM_DTYPE_F32, seed, p, 0, c, r + (size_t)p * per);
        bad = ct_check("big all_gather f32, cudaMalloc recv", SYMM_DTYPE_F32, h, r, c * npes);
        if (me == 0)
            printf("big: all_gather %zu MiB per PE (%s) %s\n", per >> 20, symm_coll_last_algo(), bad ? "WRONG" : "ok");
        CUDA_CHECK(cudaFree(d));
    }
    /* broadcast of 64 MiB from the last PE, in place: every block of the
     * direct form forwards several pieces */
    {
        size_t c = count / 4;
        int root = npes - 1;
        seed = next_seed();
        ct_fill(SYMM_DTYPE_F32, seed, me, 0, c, h);
        to_dev(buf, h, c * 4);
        SYMM_CHECK(symm_broadcast(buf, buf, c, SYMM_DTYPE_F32, root, NULL, st));
        CUDA_CHECK(cudaStreamSynchronize(st));
        from_dev(h, buf, c * 4);
        ct_fill(SYMM_DTYPE_F32, seed, root, 0, c, r);
        bad = ct_check("big broadcast 64 MiB f32 in place", SYMM_DTYPE_F32, h, r, c);
        if (me == 0)
            printf("big: broadcast 64 MiB from PE %d (%s) %s\n", root, symm_coll_last_algo(), bad ? "WRONG" : "ok");
    }
    SYMM_CHECK(symm_free(buf));
    free(h);
    free(r);
}

/* ---- back to back ---------------------------------------------------------------------- */

static void part_b2b(int total) {
    static const size_t counts[] = {1, 100, 3001, 20000, 5, 70000};
    const int batch = 80; /* 80 slots of 70000 floats fit the 24 MiB pools (100 did not) */
    size_t slot = 70000 * 4 + 64;
    TEST_ASSERT(slot * batch <= POOL, "pool too small");
    for (int b0 = 0; b0 < total; b0 += batch) {
        uint64_t seeds[100];
        size_t cnt[100];
        for (int k = 0; k < batch; k++) {
            seeds[k] = next_seed();
            cnt[k] = counts[(b0 / batch + k) % 6];
            ct_fill(SYMM_DTYPE_F32, seeds[k], me, 0, cnt[k], h_in + k * slot);
        }
        to_dev(symm_a, h_in, slot * batch);
        for (int k = 0; k < batch; k++) {
            char *s = symm_a + k * slot;
            char *d = (k % 3 == 0) ? s : (k % 3 == 1 ? symm_b : dev_b) + k * slot; /* in place, symm, cudaMalloc */
            SYMM_CHECK(symm_all_reduce_ex(s, d, cnt[k], SYMM_DTYPE_F32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT,
                                          k % 5 == 4 ? SYMM_COLL_ALGO_PUSH : SYMM_COLL_ALGO_AUTO,
                                          (k & 4) ? symm_team_node() : NULL, st));
        }
        CUDA_CHECK(cudaStreamSynchronize(st));
        for (int k = 0; k < batch; k++) {
            char *d = (k % 3 == 0) ? symm_a + k * slot : (k % 3 == 1 ? symm_b : dev_b) + k * slot;
            from_dev(h_out, d, cnt[k] * 4);
            for (size_t i = 0; i < cnt[k]; i++) ct_reduce(SYMM_DTYPE_F32, SYMM_OP_SUM, seeds[k], npes, i, h_ref + i * 4);
            char what[160];
            snprintf(what, sizeof(what), "back-to-back call %d (count %zu, %s, team %s, %s)", b0 + k, cnt[k],
                     k % 3 == 0 ? "in place" : k % 3 == 1 ? "symm recv" : "cudaMalloc recv", (k & 4) ? "node" : "world",
                     k % 5 == 4 ? "push" : "auto");
            ct_check(what, SYMM_DTYPE_F32, h_out, h_ref, cnt[k]);
            g_checks++;
        }
    }
    if (me == 0)
        printf("b2b: %d back-to-back all-reduces %s\n", total, g_ct_failures ? "WRONG" : "ok");
}

/*
 * every: `iters` iterations of all six collectives (all-reduce,
 * reduce-scatter, all-gather, all-to-all, all_to_allv, broadcast), f32 with
 * fresh data every iteration, enqueued back to back in batches with no host
 * sync inside a batch; counts cycle so AUTO takes packets, one-shot and the
 * direct kernels; even iterations use symmetric buffers, odd ones cudaMalloc
 * buffers (staged). Every result is checked bit for bit.
 */
enum { EV_AR, EV_RS, EV_AG, EV_A2A, EV_A2AV, EV_BC, EV_N };

/* Where collective e's send (in the send slot) and recv (in the recv slot)
 * start, in floats, for count c: room for the larger of the two. */
static void every_layout(size_t c, size_t off[EV_N + 1]) {
    const size_t n = (size_t)npes, room[EV_N] = {c, c * n, c * n, c * n, c * n, c};
    off[0] = 0;
    for (int e = 0; e < EV_N; e++)
        off[e + 1] = off[e] + ((room[e] + 3) & ~(size_t)3);
}

static void part_every(int iters) {
    static const size_t counts[] = {1, 3, 257, 5001, 70001};
    static const char *names[EV_N] = {"all_reduce", "reduce_scatter", "all_gather", "all_to_all",
                                      "all_to_allv", "broadcast"};
    const size_t n = (size_t)npes, cmax = 70001;
    /* an iteration's sends and its recvs each take, per collective, the larger of the two:
     * c (AR), c*n (RS, AG, A2A, A2AV: at most c per peer), c (broadcast), rounded up to 16 bytes */
    const size_t slot = (2 * cmax + 4 * cmax * n + 6 * 4) * 4;
    const int batch = (int)(POOL / slot) < 1 ? 1 : (int)(POOL / slot);
    TEST_ASSERT(slot <= POOL, "pool too small for %zu PEs", n);
    size_t sc[SYMM_COLL_MAX_PES], sd[SYMM_COLL_MAX_PES], rc[SYMM_COLL_MAX_PES], rd[SYMM_COLL_MAX_PES];
    for (int i0 = 0; i0 < iters; i0 += batch) {
        int nb = iters - i0 < batch ? iters - i0 : batch;
        uint64_t seeds[64];
        TEST_ASSERT(nb <= 64, "batch of %d", nb);
        for (int k = 0; k < nb; k++) {
            int it = i0 + k, sym = !(it & 1);
            size_t c = counts[it % 5], off[EV_N + 1];
            float *hs = (float *)(h_in + (size_t)k * slot);
            char *sb = (sym ? symm_a : dev_a) + (size_t)k * slot, *rb = (sym ? symm_b : dev_b) + (size_t)k * slot;
            size_t in_n[EV_N] = {c, c * n, c, c * n, c * n, c};
            uint64_t seed = seeds[k] = next_seed();
            every_layout(c, off);
            for (int e = 0; e < EV_N; e++)
                ct_fill(SYMM_DTYPE_F32, seed + (uint64_t)e, me, 0, in_n[e], hs + off[e]);
            CUDA_CHECK(cudaMemcpyAsync(sb, hs, off[EV_N] * 4, cudaMemcpyHostToDevice, st));
            /* all_to_allv: PE a sends (a + b + it) % 3 * c / 2 elements to PE b, packed */
            size_t spos = 0, rpos = 0;
            for (size_t p = 0; p < n; p++) {
                sc[p] = ((size_t)me + p + (size_t)it) % 3 * c / 2;
                sd[p] = spos;
                spos += sc[p];
                rc[p] = (p + (size_t)me + (size_t)it) % 3 * c / 2;
                rd[p] = rpos;
                rpos += rc[p];
            }
#define EV_S(e) ((const float *)sb + off[e])
#define EV_R(e) ((float *)rb + off[e])
            SYMM_CHECK(symm_all_reduce(EV_S(EV_AR), EV_R(EV_AR), c, SYMM_DTYPE_F32, SYMM_OP_SUM, NULL, st));
            SYMM_CHECK(symm_reduce_scatter(EV_S(EV_RS), EV_R(EV_RS), c, SYMM_DTYPE_F32, SYMM_OP_SUM, NULL, st));
            SYMM_CHECK(symm_all_gather(EV_S(EV_AG), EV_R(EV_AG), c, SYMM_DTYPE_F32, NULL, st));
            SYMM_CHECK(symm_all_to_all(EV_S(EV_A2A), EV_R(EV_A2A), c, SYMM_DTYPE_F32, NULL, st));
            SYMM_CHECK(symm_all_to_allv(EV_S(EV_A2AV), sc, sd, EV_R(EV_A2AV), rc, rd, SYMM_DTYPE_F32, NULL, st));
            SYMM_CHECK(symm_broadcast(EV_S(EV_BC), EV_R(EV_BC), c, SYMM_DTYPE_F32, it % npes, NULL, st));
#undef EV_S
#undef EV_R
        }
        CUDA_CHECK(cudaStreamSynchronize(st));
        for (int k = 0; k < nb; k++) {
            int it = i0 + k, sym = !(it & 1);
            size_t c = counts[it % 5], off[EV_N + 1], want_n[EV_N] = {c, c, c * n, c * n, 0, c};
            float *ref = (float *)h_ref, *got = (float *)h_out;
            every_layout(c, off);
            from_dev(got, (sym ? symm_b : dev_b) + (size_t)k * slot, off[EV_N] * 4);
            for (size_t i = 0; i < c; i++) {
                ct_reduce(SYMM_DTYPE_F32, SYMM_OP_SUM, seeds[k] + EV_AR, npes, i, ref + off[EV_AR] + i);
                ct_reduce(SYMM_DTYPE_F32, SYMM_OP_SUM, seeds[k] + EV_RS, npes, (uint64_t)me * c + i,
                          ref + off[EV_RS] + i);
            }
            for (size_t p = 0; p < n; p++) {
                ct_fill(SYMM_DTYPE_F32, seeds[k] + EV_AG, (int)p, 0, c, ref + off[EV_AG] + p * c);
                ct_fill(SYMM_DTYPE_F32, seeds[k] + EV_A2A, (int)p, (uint64_t)me * c, c, ref + off[EV_A2A] + p * c);
            }
            /* all_to_allv: PE p's elements for me start after what it sends to PEs < me */
            size_t rpos = 0;
            for (size_t p = 0; p < n; p++) {
                size_t cnt = (p + (size_t)me + (size_t)it) % 3 * c / 2, pd = 0;
                for (size_t q = 0; q < (size_t)me; q++)
                    pd += (p + q + (size_t)it) % 3 * c / 2;
                ct_fill(SYMM_DTYPE_F32, seeds[k] + EV_A2AV, (int)p, pd, cnt, ref + off[EV_A2AV] + rpos);
                rpos += cnt;
            }
            want_n[EV_A2AV] = rpos;
            ct_fill(SYMM_DTYPE_F32, seeds[k] + EV_BC, it % npes, 0, c, ref + off[EV_BC]);
            for (int e = 0; e < EV_N; e++) {
                char what[160];
                snprintf(what, sizeof(what), "iteration %d: %s count %zu (%s buffers, npes %d)", it, names[e], c,
                         sym ? "symmetric" : "cudaMalloc", npes);
                ct_check(what, SYMM_DTYPE_F32, got + off[e], ref + off[e], want_n[e]);
                g_checks++;
            }
        }
    }
    if (me == 0)
        printf("every: %d iterations of the six collectives back to back %s\n", iters,
               g_ct_failures ? "WRONG" : "ok");
}

/* ---- graphs ------------------------------------------------------------------------------ */

__global__ void g_fill(float *a, size_t n, const unsigned long long *seedp, int pe) {
    uint64_t seed = *seedp;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        a[i] = (float)ct_fval(SYMM_DTYPE_F32, seed, pe, i);
}

/* Count elements of the all-reduce result r (n) and the all-gather result g
 * (npes * m, element j of PE p at p * m + j) that differ from the reference. */
__global__ void g_check(const float *r, size_t n, const float *g, size_t m, int npes,
                        const unsigned long long *seedp, unsigned long long *bad, int which) {
    uint64_t seed = *seedp;
    /* bad[0]: count; bad[1..4]: the first one seen (which, index, want, got) */
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        double s = 0;
        for (int p = 0; p < npes; p++) s += ct_fval(SYMM_DTYPE_F32, seed, p, i);
        if (r[i] != (float)s && atomicAdd(bad, 1ull) == 0) {
            bad[1] = (unsigned long long)which; bad[2] = i;
            bad[3] = __float_as_uint((float)s); bad[4] = __float_as_uint(r[i]);
        }
    }
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < m * npes; i += (size_t)gridDim.x * blockDim.x) {
        float want = (float)ct_fval(SYMM_DTYPE_F32, seed, (int)(i / m), i % m);
        if (g[i] != want && atomicAdd(bad, 1ull) == 0) {
            bad[1] = 3; bad[2] = i; bad[3] = __float_as_uint(want); bad[4] = __float_as_uint(g[i]);
        }
    }
}

/* Count elements of the broadcast result b (n) that differ from the root's input. */
__global__ void g_check_bcast(const float *b, size_t n, int root, const unsigned long long *seedp,
                              unsigned long long *bad, int which) {
    uint64_t seed = *seedp;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float want = (float)ct_fval(SYMM_DTYPE_F32, seed, root, i);
        if (b[i] != want && atomicAdd(bad, 1ull) == 0) {
            bad[1] = which; bad[2] = i; bad[3] = __float_as_uint(want); bad[4] = __float_as_uint(b[i]);
        }
    }
}

/* Count elements of the reduce-scatter result r (this PE's piece of m
 * elements) that differ from the sum over the PEs of the fill. */
__global__ void g_check_rs(const float *r, size_t m, int npes, int me, const unsigned long long *seedp,
                           unsigned long long *bad, int which) {
    uint64_t seed = *seedp;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < m; i += (size_t)gridDim.x * blockDim.x) {
        double s = 0;
        for (int p = 0; p < npes; p++) s += ct_fval(SYMM_DTYPE_F32, seed, p, (uint64_t)me * m + i);
        if (r[i] != (float)s && atomicAdd(bad, 1ull) == 0) {
            bad[1] = which; bad[2] = i; bad[3] = __float_as_uint((float)s); bad[4] = __float_as_uint(r[i]);
        }
    }
}

__global__ void g_next(unsigned long long *seedp) { *seedp = *seedp * 6364136223846793005ull + 1442695040888963407ull; }

static void part_graph(int replays) {
    /* three sizes so the three all-reduce algorithms run in one graph; a
     * broadcast big enough for the direct form with several pieces per block
     * (out of place: the root's own copy on the copy engine, a side stream
     * forked and joined inside the capture), one for the packet forms (two
     * hops from 3 PEs) */
    const size_t n1 = 1000, n2 = 30000, n3 = 300000, n5 = 50001, m = 5000, mb = 600001, mp = 50001;
    const int root = npes - 1;
    float *a1 = (float *)(symm_a), *a2 = a1 + n1 + 64, *a3 = a2 + n2 + 64, *a5 = a3 + n3 + 64;
    float *r3 = (float *)symm_b;
    float *gsrc = (float *)(dev_a), *gdst = (float *)(symm_b) + n3 + 64;
    float *bsrc = (float *)(symm_a) + ((size_t)1 << 20), *bdst = (float *)(symm_b) + ((size_t)1 << 20);
    float *psrc = (float *)(symm_a) + ((size_t)2 << 20), *pdst = (float *)(dev_b) + ((size_t)2 << 20);
    float *r4 = (float *)(dev_b) + ((size_t)3 << 20); /* push all-reduce of a3, staged */
    float *r7 = (float *)(symm_b) + ((size_t)3 << 20); /* two-shot all-reduce of a3, the other kernel */
    float *rs = (float *)(dev_b) + ((size_t)4 << 20);   /* reduce-scatter of a3's n3 / npes per PE */
    const size_t mrs = n3 / (size_t)npes;
    unsigned long long *d, h[6];
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaMalloc((void **)&d, sizeof(h)));
    memset(h, 0, sizeof(h));
    h[0] = 12345 + 0x1000ull * (uint64_t)1; /* same seed on every PE */
    to_dev(d, h, sizeof(h));
    /* the first call on a team allocates, so it must not be inside a capture */
    SYMM_CHECK(symm_all_reduce(a1, a1, 1, SYMM_DTYPE_F32, SYMM_OP_SUM, NULL, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    g_next<<<1, 1, 0, st>>>(d);
    g_fill<<<64, 256, 0, st>>>(a1, n1, d, me);
    g_fill<<<64, 256, 0, st>>>(a2, n2, d, me);
    g_fill<<<64, 256, 0, st>>>(a3, n3, d, me);
    g_fill<<<64, 256, 0, st>>>(a5, n5, d, me);
    g_fill<<<64, 256, 0, st>>>(gsrc, m, d, me);
    g_fill<<<64, 256, 0, st>>>(bsrc, mb, d, me);
    g_fill<<<64, 256, 0, st>>>(psrc, mp, d, me);
    SYMM_CHECK(symm_all_reduce(a1, a1, n1, SYMM_DTYPE_F32, SYMM_OP_SUM, NULL, st));
    SYMM_CHECK(symm_all_reduce_ex(a2, a2, n2, SYMM_DTYPE_F32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_ONESHOT,
                                  NULL, st));
    /* AUTO: two-shot packets from 3 PEs, one-shot with 2 */
    SYMM_CHECK(symm_all_reduce(a5, a5, n5, SYMM_DTYPE_F32, SYMM_OP_SUM, NULL, st));
    /* two-shot: the stores-only kernel (from 3 PEs), then the one that loads */
    SYMM_CHECK(symm_all_reduce_ex(a3, r7, n3, SYMM_DTYPE_F32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_TWOSHOT,
                                  NULL, st));
    symm__coll_tune_ar_stores(1);
    SYMM_CHECK(symm_all_reduce_ex(a3, r3, n3, SYMM_DTYPE_F32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_TWOSHOT,
                                  NULL, st));
    symm__coll_tune_ar_stores(0);
    SYMM_CHECK(symm_all_gather(gsrc, gdst, m, SYMM_DTYPE_F32, NULL, st));
    SYMM_CHECK(symm_broadcast(bsrc, bdst, mb, SYMM_DTYPE_F32, root, NULL, st));
    SYMM_CHECK(symm_broadcast(psrc, pdst, mp, SYMM_DTYPE_F32, 0, NULL, st));
    /* reduce-scatter (AUTO: the direct kernel; the copy-engine pipeline in the pipe part) */
    SYMM_CHECK(symm_reduce_scatter(a3, rs, mrs, SYMM_DTYPE_F32, SYMM_OP_SUM, NULL, st));
    symm__coll_tune_push(0, 0, 2, 0); /* several steps per block in every replay */
    SYMM_CHECK(symm_all_reduce_ex(a3, r4, n3, SYMM_DTYPE_F32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_PUSH,
                                  NULL, st));
    symm__coll_tune_push(0, 0, 0, 0);
    g_check<<<64, 256, 0, st>>>(r4, n3, gdst, 0, npes, d, d + 1, 6);
    g_check<<<64, 256, 0, st>>>(a1, n1, gdst, m, npes, d, d + 1, 0);
    g_check<<<64, 256, 0, st>>>(a2, n2, gdst, 0, npes, d, d + 1, 1);
    g_check<<<64, 256, 0, st>>>(r3, n3, gdst, 0, npes, d, d + 1, 2);
    g_check<<<64, 256, 0, st>>>(a5, n5, gdst, 0, npes, d, d + 1, 7);
    g_check<<<64, 256, 0, st>>>(r7, n3, gdst, 0, npes, d, d + 1, 8);
    g_check_bcast<<<64, 256, 0, st>>>(bdst, mb, root, d, d + 1, 4);
    g_check_bcast<<<64, 256, 0, st>>>(pdst, mp, 0, d, d + 1, 5);
    g_check_rs<<<64, 256, 0, st>>>(rs, mrs, npes, me, d, d + 1, 9);
    CUDA_CHECK(cudaStreamEndCapture(st, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int i = 0; i < replays; i++)
        CUDA_CHECK(cudaGraphLaunch(exec, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
    from_dev(h, d, sizeof(h));
    if (h[1] != 0) {
        static const char *names[] = {"packet all-reduce (1000)", "oneshot all-reduce (30000)",
                                      "twoshot all-reduce (300000, out of place)", "all-gather (5000)",
                                      "direct broadcast (600001, root npes - 1)",
                                      "packet broadcast (50001, root 0, into cudaMalloc memory)",
                                      "push all-reduce (300000, out of place into cudaMalloc memory)",
                                      "auto all-reduce (50001; two-shot packets from 3 PEs)",
                                      "twoshot all-reduce (300000, out of place; stores only from 3 PEs)",
                                      "reduce-scatter (300000 / npes per PE, into cudaMalloc memory)"};
        float fw, fg;
        uint32_t bw = (uint32_t)h[4], bg = (uint32_t)h[5];
        memcpy(&fw, &bw, 4);
        memcpy(&fg, &bg, 4);
        g_ct_failures++;
        fprintf(stderr, "FAIL [pe %d] graph: %llu wrong elements over %d replays; first seen: %s element %llu want %g "
                        "got %g\n", me, h[1], replays, names[h[2] < 10 ? h[2] : 0], h[3], fw, fg);
    }
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaFree(d));
    if (me == 0)
        printf("graph: %d replays of packet/packet-2shot/oneshot/twoshot/push all-reduce + all-gather + broadcast %s\n",
               replays, h[1] ? "WRONG" : "ok");
}

/* ---- chain -------------------------------------------------------------------------------- */

/* The chained broadcast (symm__c_bcast_chain), forced by its AUTO limit
 * (bcast_chain_min, every PE alike): every root, odd sizes, in place and out
 * of place, symmetric and cudaMalloc buffers (staged), unaligned offsets,
 * batches from one 16-byte unit a warp to an eighth of a block's share;
 * then across the flags' 2^32 wrap, a buffer larger than the staging area
 * into cudaMalloc memory, and captured into graphs. */
static void expect_chain(size_t bytes) {
    if (strncmp(symm_coll_last_algo(), "chain", 5) != 0) {
        g_ct_failures++;
        fprintf(stderr, "[pe %d] chain: broadcast of %zu bytes ran %s, expected chain\n", me, bytes,
                symm_coll_last_algo());
    }
}

static void chain_big(void) {
    /* 70 MiB: two staging pieces into cudaMalloc memory, one launch into the heap */
    const size_t n = (size_t)70 << 18;
    float *src, *dst, *sdst;
    unsigned long long *d, h[6];
    CUDA_CHECK(cudaMalloc((void **)&src, n * 4));
    CUDA_CHECK(cudaMalloc((void **)&dst, n * 4));
    SYMM_CHECK(symm_malloc(n * 4, (void **)&sdst));
    CUDA_CHECK(cudaMalloc((void **)&d, sizeof(h)));
    for (int i = 0; i < 2; i++) {
        int root = (i + 1) % npes;
        float *out = i ? sdst : dst;
        memset(h, 0, sizeof(h));
        h[0] = next_seed() | 1; /* the same on every PE (next_seed is) */
        to_dev(d, h, sizeof(h));
        CUDA_CHECK(cudaMemsetAsync(out, 0xff, n * 4, st));
        g_fill<<<256, 256, 0, st>>>(src, n, d, me);
        SYMM_CHECK(symm_broadcast(src, out, n, SYMM_DTYPE_F32, root, NULL, st));
        expect_chain(n * 4);
        g_check_bcast<<<256, 256, 0, st>>>(out, n, root, d, d + 1, i);
        CUDA_CHECK(cudaStreamSynchronize(st));
        from_dev(h, d, sizeof(h));
        g_checks++;
        if (h[1]) {
            g_ct_failures++;
            fprintf(stderr, "FAIL [pe %d] chain: %s broadcast of %zu f32 from root %d: %llu wrong, first at %llu\n", me,
                    i ? "symmetric" : "cudaMalloc", n, root, h[1], h[3]);
        }
    }
    SYMM_CHECK(symm_free(sdst));
    CUDA_CHECK(cudaFree(d));
    CUDA_CHECK(cudaFree(dst));
    CUDA_CHECK(cudaFree(src));
}

static void part_chain(void) {
    static const symm_dtype_t types[] = {SYMM_DTYPE_U8, SYMM_DTYPE_BF16, SYMM_DTYPE_F32, SYMM_DTYPE_F64};
    static const size_t counts[] = {1, 3, 100, 1001, 4099, 40000, 300001, 1000003};
    static const uint64_t chunks[] = {16, 4096, 32 << 10, 1 << 20};
    const uint64_t M = 0xffffffffull;
    int combo = 0;
    SYMM_CHECK(symm__coll_tune_set("bcast_chain_min", 1));
    for (size_t ci = 0; ci < sizeof(chunks) / sizeof(chunks[0]); ci++) {
        SYMM_CHECK(symm__coll_tune_set("bcast_chain_chunk", chunks[ci]));
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
            for (int v = 0; v < 4; v++) {
                symm_dtype_t t = types[(c + (size_t)v + ci) % 4];
                int symm_buf = v & 1, inplace = (v >> 1) & 1, tk = ++combo & 1;
                size_t off = combo % 3 == 0 ? 1 : 0, n = counts[c];
                if (n * ct_esz(t) * 2 + 4 * GUARD > POOL)
                    n = (POOL / 2 - 4 * GUARD) / ct_esz(t);
                /* every root, over the combinations */
                check_move(MV_BCAST, t, n, symm_buf, inplace, off, tk, (combo + (int)ci) % npes);
                expect_chain(n * ct_esz(t));
            }
    }
    if (me == 0)
        printf("chain: %lld checked calls\n", g_checks);
    SYMM_CHECK(symm__coll_tune_set("bcast_chain_chunk", 8192));
    for (int root = 0; root < npes; root++) /* every root on both teams, each buffer kind */
        for (int v = 0; v < 4; v++) {
            check_move(MV_BCAST, SYMM_DTYPE_F32, 250007, v & 1, (v >> 1) & 1, (size_t)(v == 3), v & 1, root);
            expect_chain(250007 * 4);
        }
    chain_big();
    /* across the 2^32 wrap of the flag values */
    CUDA_CHECK(cudaDeviceSynchronize());
    SYMM_CHECK(symm_barrier_all());
    SYMM_CHECK(symm__coll_debug_set_epoch(symm_team_world(), 3 * M - 5));
    SYMM_CHECK(symm_barrier_all());
    for (int i = 0; i < 8; i++) {
        check_move(MV_BCAST, SYMM_DTYPE_U8, 100003 + (size_t)i, i & 1, (i >> 1) & 1, 0, 0, i % npes);
        expect_chain(100003 + (size_t)i);
    }
    if (me == 0)
        printf("chain: %lld checked calls with the wrap and 70 MiB\n", g_checks);
    fflush(stdout);
    /* captured: the graph part's two broadcasts (symmetric, root npes - 1; into
     * cudaMalloc memory, root 0) take the chain */
    SYMM_CHECK(symm__coll_tune_set("bcast_chain_chunk", 16384));
    part_graph(200);
    symm__coll_tune_reset();
}

/* ---- epoch wrap ------------------------------------------------------------------------------ */

static void part_wrap(void) {
    const uint64_t M = 0xffffffffull;
    for (int tk = 0; tk < 2; tk++) {
        CUDA_CHECK(cudaDeviceSynchronize());
        SYMM_CHECK(symm_barrier_all());
        SYMM_CHECK(symm__coll_debug_set_epoch(team_of(tk), 3 * M - 6));
        SYMM_CHECK(symm_barrier_all());
        for (int i = 0; i < 12; i++) {
            check_all_reduce(SYMM_DTYPE_F32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_PACKET, 999, 1, 0, 0, tk);
            check_all_reduce(SYMM_DTYPE_F32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_PACKET, 50001, i & 1, 0, 1,
                             tk); /* two-shot packets from 3 PEs */
            check_all_reduce(SYMM_DTYPE_BF16, SYMM_OP_MAX, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_ONESHOT, 5000, 0, 1, 0, tk);
            check_all_reduce(SYMM_DTYPE_F32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_TWOSHOT, 70001, 1, i & 1, 0, tk);
            symm__coll_tune_ar_stores(1); /* the two-shot kernel that loads */
            check_all_reduce(SYMM_DTYPE_F32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_TWOSHOT, 70001, 0, i & 1, 1, tk);
            symm__coll_tune_ar_stores(0);
            check_reduce_scatter(SYMM_DTYPE_I32, SYMM_OP_SUM, SYMM_COLL_ALGO_TWOSHOT, 3000, 1, 0, 0, tk);
            check_all_reduce(SYMM_DTYPE_F32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_PUSH, 70001, 1, i & 1, 0, tk);
            symm__coll_tune_push(0, 0, 1, 0); /* several steps per call */
            check_all_reduce(SYMM_DTYPE_BF16, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_PUSH, 100003, i & 1, 0,
                             i % 3 == 0, tk);
            check_reduce_scatter(SYMM_DTYPE_I32, SYMM_OP_SUM, SYMM_COLL_ALGO_PUSH, 30001, 1, i & 1, 0, tk);
            symm__coll_tune_push(0, 0, 0, 0);
            check_move(MV_AG, SYMM_DTYPE_F32, 100, 1, 0, 0, tk, 0);
            check_move(MV_AG, SYMM_DTYPE_F32, 30000, 1, 0, 0, tk, 0);
            check_move(MV_BCAST, SYMM_DTYPE_U8, 77, 0, 0, 0, tk, i % npes);
            check_move(MV_BCAST, SYMM_DTYPE_BF16, 100001, i & 1, 0, 1, tk, (i + 2) % npes); /* 2-hop packets */
            check_move(MV_BCAST, SYMM_DTYPE_F32, 300001, 1, i & 1, 0, tk, (i + 1) % npes);
            check_a2av(SYMM_DTYPE_F32, 100, 1, tk);
        }
    }
    if (me == 0)
        printf("wrap: every algorithm across the flag wrap ok\n");
}

/* ---- errors -------------------------------------------------------------------------------- */

static void part_errors(void) {
    char *s = symm_a + GUARD, *d = symm_b + GUARD;
    float *host = (float *)malloc(4096);
    size_t cnt[SYMM_COLL_MAX_PES] = {0}, dsp[SYMM_COLL_MAX_PES] = {0};
    SYMM_EXPECT(symm_all_reduce(s, d, 10, SYMM_DTYPE_F32, SYMM_OP_BAND, NULL, st), SYMM_ERR_UNSUPPORTED);
    SYMM_EXPECT(symm_all_reduce(s, d, 10, SYMM_DTYPE_U8, SYMM_OP_SUM, NULL, st), SYMM_ERR_UNSUPPORTED);
    SYMM_EXPECT(symm_all_reduce_ex(s, d, 10, SYMM_DTYPE_BF16, SYMM_OP_SUM, SYMM_DTYPE_F16, SYMM_COLL_ALGO_AUTO, NULL, st),
                SYMM_ERR_UNSUPPORTED);
    SYMM_EXPECT(symm_all_reduce(s, d, 10, (symm_dtype_t)99, SYMM_OP_SUM, NULL, st), SYMM_ERR_INVALID_ARG);
    SYMM_EXPECT(symm_all_reduce(s, d, 10, SYMM_DTYPE_F32, (symm_redop_t)42, NULL, st), SYMM_ERR_INVALID_ARG);
    SYMM_EXPECT(symm_all_reduce(s, d, (size_t)1 << 62, SYMM_DTYPE_F32, SYMM_OP_SUM, NULL, st), SYMM_ERR_INVALID_ARG);
    SYMM_EXPECT(symm_all_gather(s, d, ((size_t)1 << 61) / (size_t)npes + 1, SYMM_DTYPE_F64, NULL, st),
                SYMM_ERR_INVALID_ARG);
    SYMM_EXPECT(symm_all_reduce(NULL, d, 10, SYMM_DTYPE_F32, SYMM_OP_SUM, NULL, st), SYMM_ERR_INVALID_ARG);
    SYMM_EXPECT(symm_all_reduce(s, s + 4, 10, SYMM_DTYPE_F32, SYMM_OP_SUM, NULL, st), SYMM_ERR_INVALID_ARG);
    SYMM_EXPECT(symm_all_reduce(host, d, 10, SYMM_DTYPE_F32, SYMM_OP_SUM, NULL, st), SYMM_ERR_INVALID_ARG);
    SYMM_EXPECT(symm_all_to_all(s, s + 8, 100, SYMM_DTYPE_F32, NULL, st), SYMM_ERR_INVALID_ARG);
    SYMM_EXPECT(symm_all_gather(d + 4, d, 100, SYMM_DTYPE_F32, NULL, st), SYMM_ERR_INVALID_ARG);
    SYMM_EXPECT(symm_reduce_scatter(s, s + 4, 100, SYMM_DTYPE_F32, SYMM_OP_SUM, NULL, st), SYMM_ERR_INVALID_ARG);
    SYMM_EXPECT(symm_broadcast(s, d, 10, SYMM_DTYPE_F32, npes, NULL, st), SYMM_ERR_INVALID_ARG);
    SYMM_EXPECT(symm_broadcast(s, d, 10, SYMM_DTYPE_F32, -1, NULL, st), SYMM_ERR_INVALID_ARG);
    SYMM_EXPECT(symm_all_reduce_ex(s, d, 10, SYMM_DTYPE_F32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT, (symm_coll_algo_t)9, NULL,
                                   st), SYMM_ERR_INVALID_ARG);
    SYMM_EXPECT(symm_all_to_allv(s, NULL, dsp, d, cnt, dsp, SYMM_DTYPE_F32, NULL, st), SYMM_ERR_INVALID_ARG);
    /* a cudaMalloc'd recv larger than the staging area */
    {
        size_t rc[SYMM_COLL_MAX_PES] = {0}, rd[SYMM_COLL_MAX_PES] = {0};
        rc[0] = ((size_t)65 << 20);
        SYMM_EXPECT(symm_all_to_allv(s, rc + 1, rd, dev_b, rc, rd, SYMM_DTYPE_U8, NULL, st), SYMM_ERR_INVALID_ARG);
    }
    SYMM_EXPECT(symm_all_reduce(s, d, 10, SYMM_DTYPE_F32, SYMM_OP_SUM, (symm_team_t)host, st), SYMM_ERR_INVALID_ARG);
    /* count 0 is a no-op */
    SYMM_CHECK(symm_all_reduce(NULL, NULL, 0, SYMM_DTYPE_F32, SYMM_OP_SUM, NULL, st));
    /* nothing was enqueued by the failures; a correct call still works */
    check_all_reduce(SYMM_DTYPE_F32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_AUTO, 1000, 1, 0, 0, 0);
    free(host);
    if (me == 0)
        printf("errors: ok\n");
}

int main(int argc, char **argv) {
    int need = argc > 1 ? atoi(argv[1]) : 2;
    const char *part = argc > 2 ? argv[2] : "all";
    int all = strcmp(part, "all") == 0;
    symm_test_require_pes(need);
    if (!strcmp(part, "ce") && setenv("SYMM_COLL_CE_MIN", "1024", 1) != 0)
        TEST_FAIL("setenv SYMM_COLL_CE_MIN");
    SYMM_CHECK(symm_init());
    me = symm_my_pe();
    npes = symm_n_pes();
    if (npes < need) {
        symm_finalize();
        TEST_SKIP("needs %d PEs, run with %d", need, npes);
    }
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    SYMM_CHECK(symm_malloc(POOL, (void **)&symm_a));
    SYMM_CHECK(symm_malloc(POOL, (void **)&symm_b));
    CUDA_CHECK(cudaMalloc((void **)&dev_a, POOL));
    CUDA_CHECK(cudaMalloc((void **)&dev_b, POOL));
    h_in = (char *)malloc(POOL);
    h_out = (char *)malloc(POOL);
    h_ref = (char *)malloc(POOL);
    TEST_ASSERT(h_in && h_out && h_ref, "host memory");

    if (all || !strcmp(part, "errors")) part_errors();
    if (all || !strcmp(part, "matrix")) part_matrix();
    if (all || !strcmp(part, "move")) part_move();
    if (all || !strcmp(part, "wrap")) part_wrap();
    if (all || !strcmp(part, "graph")) part_graph(1000);
    if (all || !strcmp(part, "b2b")) part_b2b(10000);
    if (all || !strcmp(part, "big")) part_big();
    if (all || !strcmp(part, "every")) part_every(1000);
    if (!strcmp(part, "ce")) part_ce();
    if (!strcmp(part, "pipe")) part_pipe();
    if (!strcmp(part, "chain")) part_chain();

    CUDA_CHECK(cudaDeviceSynchronize());
    SYMM_CHECK(symm_free(symm_b));
    SYMM_CHECK(symm_free(symm_a));
    CUDA_CHECK(cudaFree(dev_a));
    CUDA_CHECK(cudaFree(dev_b));
    CUDA_CHECK(cudaStreamDestroy(st));
    SYMM_CHECK(symm_finalize());
    if (g_ct_failures) {
        fprintf(stderr, "FAIL [pe %d] test_coll %s: %lld failed checks on %d PEs (%lld checked calls)\n", me, part,
                g_ct_failures, npes, g_checks);
        return 1;
    }
    if (me == 0)
        printf("test_coll %s: PASS on %d PEs (%lld checked calls)\n", part, npes, g_checks);
    return 0;
}
