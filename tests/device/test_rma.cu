/*
 * test_rma.cu - put/get at thread, warp and block scope (blocking and nbi),
 * p/g of every type, and the context queries, across the PEs of a ring.
 *
 * Every case moves a fresh random stream (seeded by case and PE) into a
 * destination poisoned with its complement, between guard bytes, and checks
 * every byte and the guards on the GPU. Sizes run from 1 byte to 256 MiB with
 * odd sizes and source/destination offsets that share 16, 8, 4, 2 or 1 byte
 * alignment. With SYMM_TEST_SMALL (compute-sanitizer runs) every size below
 * 1 MiB runs with one offset pair each, the pairs rotating so that every
 * (operation, scope) still meets all of them, and the large sizes stop at
 * 1 MiB + 13. Blocking forms are also checked for their promise: after a
 * blocking put the group overwrites its source (the destination must still
 * get the original), after a blocking get the group reads back every byte in
 * a different thread assignment than the copy used. A block put of a source
 * the block wrote in the same kernel must carry the new bytes.
 *
 * Usage: test_device_rma <npes>   (under symmrun)
 */
#include "device_test.h"

enum { OP_PUT, OP_PUT_NBI, OP_GET, OP_GET_NBI, N_OPS };
enum { SC_THREAD, SC_WARP, SC_BLOCK, N_SCOPES };
static const char *op_name[] = {"put", "put_nbi", "get", "get_nbi"};
static const char *scope_name[] = {"thread", "warp", "block"};

#define GUARD 32
#define GUARD_BYTE 0x5a
#define MAX_SIZE ((size_t)256 << 20)

/* A group (thread, warp or block) copies slice k of [0, n); slices are cut at
 * n*k/nslices so their sizes and offsets vary. */
__device__ static void do_op(const symm_ctx_t *ctx, int op, int scope, uint8_t *d, uint8_t *s, size_t len,
                             int pe) {
    switch (scope * N_OPS + op) {
    case SC_THREAD * N_OPS + OP_PUT: symm_put(ctx, d, s, len, pe); break;
    case SC_THREAD * N_OPS + OP_PUT_NBI: symm_put_nbi(ctx, d, s, len, pe); break;
    case SC_THREAD * N_OPS + OP_GET: symm_get(ctx, d, s, len, pe); break;
    case SC_THREAD * N_OPS + OP_GET_NBI: symm_get_nbi(ctx, d, s, len, pe); break;
    case SC_WARP * N_OPS + OP_PUT: symm_put_warp(ctx, d, s, len, pe); break;
    case SC_WARP * N_OPS + OP_PUT_NBI: symm_put_warp_nbi(ctx, d, s, len, pe); break;
    case SC_WARP * N_OPS + OP_GET: symm_get_warp(ctx, d, s, len, pe); break;
    case SC_WARP * N_OPS + OP_GET_NBI: symm_get_warp_nbi(ctx, d, s, len, pe); break;
    case SC_BLOCK * N_OPS + OP_PUT: symm_put_block(ctx, d, s, len, pe); break;
    case SC_BLOCK * N_OPS + OP_PUT_NBI: symm_put_block_nbi(ctx, d, s, len, pe); break;
    case SC_BLOCK * N_OPS + OP_GET: symm_get_block(ctx, d, s, len, pe); break;
    case SC_BLOCK * N_OPS + OP_GET_NBI: symm_get_block_nbi(ctx, d, s, len, pe); break;
    }
}

__global__ static void rma_kernel(const symm_ctx_t *ctx, int op, int scope, uint8_t *dst, uint8_t *src,
                                  uint8_t *readback, size_t n, int pe, int nslices) {
    unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned nthr = blockDim.x * blockDim.y * blockDim.z;
    unsigned gid = blockIdx.x * nthr + tid;
    unsigned unit, nunits, lane, nlanes;
    if (scope == SC_THREAD) {
        unit = gid; nunits = gridDim.x * nthr; lane = 0; nlanes = 1;
    } else if (scope == SC_WARP) {
        unit = gid / 32; nunits = gridDim.x * nthr / 32; lane = tid % 32; nlanes = 32;
    } else {
        unit = blockIdx.x; nunits = gridDim.x; lane = tid; nlanes = nthr;
    }
    for (unsigned k = unit; k < (unsigned)nslices; k += nunits) {
        size_t lo = n * k / nslices, hi = n * (k + 1) / nslices, len = hi - lo;
        do_op(ctx, op, scope, dst + lo, src + lo, len, pe);
        /* Reversed assignment: each thread touches bytes another one copied. */
        if (op == OP_PUT) {
            for (size_t i = nlanes - 1 - lane; i < len; i += nlanes)
                src[lo + i] = (uint8_t)~src[lo + i];
        } else if (op == OP_GET) {
            for (size_t i = nlanes - 1 - lane; i < len; i += nlanes)
                readback[lo + i] = dst[lo + i];
        }
        /* The next slice of this group reuses nothing, but keep the group in
         * step so a warp/block never splits across loop iterations. */
    }
    if (op == OP_PUT_NBI || op == OP_GET_NBI) {
        if (scope == SC_THREAD) symm_quiet(ctx);
        else if (scope == SC_WARP) symm_quiet_warp(ctx);
        else symm_quiet_block(ctx);
    }
}

typedef struct bufs {
    uint8_t *sbuf, *dbuf; /* symmetric */
    uint8_t *readback;    /* local */
} bufs_t;

static unsigned long long n_cases, n_bytes;

/* One case: every PE does `op` with its right neighbour. */
static void run_case(dt_env_t *e, bufs_t *b, int op, int scope, size_t n, size_t soff, size_t doff, int many,
                     dim3 block, uint64_t iter) {
    int me = e->me, np = e->npes;
    int right = (me + 1) % np, left = (me + np - 1) % np;
    int is_put = op == OP_PUT || op == OP_PUT_NBI;
    /* put: I write my stream into right's dbuf, left's stream lands in mine.
     * get: I read right's stream from its sbuf into my dbuf. */
    uint64_t my_seed = dt_seed(1, iter, me);
    uint64_t want_seed = dt_seed(1, iter, is_put ? left : right);
    uint8_t *s = b->sbuf + soff, *d = b->dbuf + doff;

    dt_fill(s, n, my_seed, 0);
    dt_fill_byte(b->dbuf, doff + n + GUARD, GUARD_BYTE);
    dt_fill(d, n, want_seed, 1);
    if (op == OP_GET)
        dt_fill(b->readback, n, want_seed, 1);
    CUDA_CHECK(cudaDeviceSynchronize());
    SYMM_CHECK(symm_barrier_all());

    int grid = 1, nslices = 1;
    if (many) {
        grid = scope == SC_BLOCK ? 66 : 33;
        unsigned nthr = block.x * block.y * block.z;
        nslices = scope == SC_THREAD ? grid * nthr * 2 + 7 : scope == SC_WARP ? grid * nthr / 32 * 2 + 3 : grid * 2 + 1;
        if ((size_t)nslices > n)
            nslices = (int)(n ? n : 1);
    }
    rma_kernel<<<grid, block>>>(e->ctx, op, scope, d, s, b->readback, n, right, nslices);
    CUDA_CHECK_KERNEL();
    SYMM_CHECK(symm_barrier_all());

    char what[160];
    snprintf(what, sizeof what, "%s_%s n=%zu soff=%zu doff=%zu %s block=(%u,%u,%u) from pe %d", op_name[op],
             scope_name[scope], n, soff, doff, many ? "many-groups" : "one-group", block.x, block.y, block.z,
             is_put ? left : right);
    dt_check(e, d, n, want_seed, 0, 0, what);
    dt_check(e, b->dbuf, doff, 0, 1, GUARD_BYTE, "guard before destination");
    dt_check(e, d + n, GUARD, 0, 1, GUARD_BYTE, "guard after destination");
    if (op == OP_GET)
        dt_check(e, b->readback, n, want_seed, 0, 0, "read-back after blocking get");
    /* Nobody refills its source before everyone has checked. */
    SYMM_CHECK(symm_barrier_all());
    n_cases++;
    n_bytes += n;
}

/* ---- the local side in shared memory ---------------------------------------------- */

/* put: the group stages its source in shared memory, then puts from there;
 * get: the group gets into shared memory, then copies it out. The local side
 * of put/get may be any memory the thread can address. */
#define SMEM_MAX 4096
__global__ static void smem_kernel(const symm_ctx_t *ctx, int is_put, int scope, uint8_t *dst, const uint8_t *src,
                                   size_t n, size_t soff, size_t doff, int pe) {
    __shared__ __align__(16) uint8_t buf[SMEM_MAX + 32];
    unsigned t = threadIdx.x, nt = blockDim.x;
    bool in = scope == SC_BLOCK || (scope == SC_WARP ? t < 32 : t == 0);
    if (is_put) {
        for (size_t i = t; i < n; i += nt)
            buf[soff + i] = src[i];
        __syncthreads();
        if (in) {
            if (scope == SC_THREAD) symm_put(ctx, dst, buf + soff, n, pe);
            else if (scope == SC_WARP) symm_put_warp(ctx, dst, buf + soff, n, pe);
            else symm_put_block(ctx, dst, buf + soff, n, pe);
        }
    } else {
        if (in) {
            if (scope == SC_THREAD) symm_get(ctx, buf + doff, src, n, pe);
            else if (scope == SC_WARP) symm_get_warp(ctx, buf + doff, src, n, pe);
            else symm_get_block(ctx, buf + doff, src, n, pe);
        }
        __syncthreads();
        for (size_t i = t; i < n; i += nt)
            dst[i] = buf[doff + i];
    }
}

static void run_smem_case(dt_env_t *e, bufs_t *b, int is_put, int scope, size_t n, size_t soff, size_t doff,
                          uint64_t iter) {
    int me = e->me, np = e->npes, right = (me + 1) % np, left = (me + np - 1) % np;
    uint64_t my_seed = dt_seed(3, iter, me), want_seed = dt_seed(3, iter, is_put ? left : right);
    /* put: source staged from sbuf into shared (at soff), lands at dbuf + doff
     * of the right PE; get: right's sbuf + soff into shared (at doff), then
     * copied to my dbuf + doff. */
    uint8_t *s = b->sbuf + soff, *d = b->dbuf + doff;
    dt_fill(s, n, my_seed, 0);
    dt_fill_byte(b->dbuf, doff + n + GUARD, GUARD_BYTE);
    dt_fill(d, n, want_seed, 1);
    CUDA_CHECK(cudaDeviceSynchronize());
    SYMM_CHECK(symm_barrier_all());
    smem_kernel<<<1, 128>>>(e->ctx, is_put, scope, d, s, n, soff, doff, right);
    CUDA_CHECK_KERNEL();
    SYMM_CHECK(symm_barrier_all());
    char what[128];
    snprintf(what, sizeof what, "%s_%s with the local side in shared memory, n=%zu soff=%zu doff=%zu",
             is_put ? "put" : "get", scope_name[scope], n, soff, doff);
    dt_check(e, d, n, want_seed, 0, 0, what);
    dt_check(e, d + n, GUARD, 0, 1, GUARD_BYTE, "guard after destination");
    SYMM_CHECK(symm_barrier_all());
    n_cases++;
    n_bytes += n;
}

/* ---- p / g of every type ------------------------------------------------------- */

#define PG_THREADS 64

__host__ __device__ static inline uint64_t pg_bits(int from, int at, int t, int salt) {
    return dt_mix(((uint64_t)from << 32) ^ ((uint64_t)at << 16) ^ (uint64_t)t ^ ((uint64_t)salt << 48));
}
/* Values exactly representable in every type (floats get small integers / 4). */
#define PG_VAL_INT(T) (T)pg_bits(from, at, t, salt)
#define PG_VAL_FLT(T) (T)((double)(int)(pg_bits(from, at, t, salt) & 0xffffff) / 4.0 - 1000.5)

#define PG_TYPES(X)                                                                      \
    X(i8, int8_t, PG_VAL_INT) X(i16, int16_t, PG_VAL_INT) X(i32, int32_t, PG_VAL_INT)   \
    X(i64, int64_t, PG_VAL_INT) X(u8, uint8_t, PG_VAL_INT) X(u16, uint16_t, PG_VAL_INT) \
    X(u32, uint32_t, PG_VAL_INT) X(u64, uint64_t, PG_VAL_INT) X(f32, float, PG_VAL_FLT) \
    X(f64, double, PG_VAL_FLT)

/* arr holds PG_THREADS slots per PE; slot [q][t] on PE `at` receives the
 * value VAL(from = q, at, t). pg_put: thread t of PE me stores, with p, its
 * value into slot [me][t] of every PE. pg_check (after a barrier): the local
 * slots [q][t] must hold VAL(q, me, t), and g of slot [me][t] on PE `at` must
 * return VAL(me, at, t). */
#define PG_KERNELS(S, T, VAL)                                                                \
    __global__ static void pg_put_##S(const symm_ctx_t *ctx, T *arr, int salt) {            \
        int me = symm_ctx_my_pe(ctx), np = symm_ctx_n_pes(ctx), t = threadIdx.x, from = me; \
        for (int at = 0; at < np; at++)                                                     \
            symm_p_##S(ctx, &arr[me * PG_THREADS + t], VAL(T), at);                         \
        symm_quiet(ctx);                                                                    \
    }                                                                                       \
    __global__ static void pg_check_##S(const symm_ctx_t *ctx, T *arr, int salt,           \
                                        unsigned long long *err) {                          \
        int me = symm_ctx_my_pe(ctx), np = symm_ctx_n_pes(ctx), t = threadIdx.x;            \
        for (int q = 0; q < np; q++) {                                                      \
            int from = q, at = me;                                                          \
            if (arr[q * PG_THREADS + t] != VAL(T))                                          \
                atomicAdd(&err[0], 1ull);                                                   \
        }                                                                                   \
        for (int at = 0; at < np; at++) {                                                   \
            int from = me;                                                                  \
            if (symm_g_##S(ctx, &arr[me * PG_THREADS + t], at) != VAL(T))                   \
                atomicAdd(&err[1], 1ull);                                                   \
        }                                                                                   \
    }
PG_TYPES(PG_KERNELS)

static void test_pg(dt_env_t *e, void *arr_raw) {
    const int salts = (int)dt_n(3, 1);
    for (int salt = 1; salt <= salts; salt++) {
#define PG_RUN(S, T, VAL)                                                                   \
        {                                                                                   \
            T *arr = (T *)arr_raw;                                                          \
            CUDA_CHECK(cudaMemset(arr, 0xee, sizeof(T) * PG_THREADS * e->npes));            \
            SYMM_CHECK(symm_barrier_all());                                                 \
            pg_put_##S<<<1, PG_THREADS>>>(e->ctx, arr, salt);                               \
            CUDA_CHECK_KERNEL();                                                            \
            SYMM_CHECK(symm_barrier_all());                                                 \
            dt_err_reset(e);                                                                \
            pg_check_##S<<<1, PG_THREADS>>>(e->ctx, arr, salt, e->d_err);                   \
            CUDA_CHECK_KERNEL();                                                            \
            TEST_ASSERT(dt_err_read(e, 0) == 0, "p_" #S ": %llu slots wrong", e->h_err[0]); \
            TEST_ASSERT(e->h_err[1] == 0, "g_" #S ": %llu loads wrong", e->h_err[1]);       \
            SYMM_CHECK(symm_barrier_all());                                                 \
        }
        PG_TYPES(PG_RUN)
#undef PG_RUN
    }
}

/* ---- context queries ---------------------------------------------------------------- */

__global__ static void ctx_kernel(const symm_ctx_t *ctx, const uint8_t *heap_obj, const uint8_t *outside,
                                  unsigned long long *out) {
    int np = symm_ctx_n_pes(ctx);
    out[0] = (unsigned long long)symm_ctx_my_pe(ctx);
    out[1] = (unsigned long long)np;
    for (int pe = 0; pe < np && pe < 8; pe++)
        out[2 + pe] = (unsigned long long)(uintptr_t)symm_ctx_ptr(ctx, heap_obj, pe);
    out[10] = (unsigned long long)(uintptr_t)symm_ctx_ptr(ctx, heap_obj, -1);
    out[11] = (unsigned long long)(uintptr_t)symm_ctx_ptr(ctx, heap_obj, np);
    out[12] = (unsigned long long)(uintptr_t)symm_ctx_ptr(ctx, outside, 0);
}

static void test_ctx(dt_env_t *e, uint8_t *heap_obj) {
    uint8_t *outside;
    CUDA_CHECK(cudaMalloc(&outside, 16));
    dt_err_reset(e);
    ctx_kernel<<<1, 1>>>(e->ctx, heap_obj + 5, outside, e->d_err);
    CUDA_CHECK_KERNEL();
    dt_err_read(e, 0);
    TEST_ASSERT(e->h_err[0] == (unsigned long long)e->me, "symm_ctx_my_pe %llu", e->h_err[0]);
    TEST_ASSERT(e->h_err[1] == (unsigned long long)e->npes, "symm_ctx_n_pes %llu", e->h_err[1]);
    for (int pe = 0; pe < e->npes && pe < 8; pe++) {
        void *want = symm_ptr(heap_obj + 5, pe);
        /* SYMM_DEBUG_FORCE_REMOTE: no PE, this one included, is reached by load/store */
        TEST_ASSERT(want != NULL || getenv("SYMM_DEBUG_FORCE_REMOTE"), "symm_ptr(.., %d) is NULL", pe);
        TEST_ASSERT(e->h_err[2 + pe] == (unsigned long long)(uintptr_t)want,
                    "symm_ctx_ptr(pe %d) = 0x%llx, host symm_ptr = %p", pe, e->h_err[2 + pe], want);
    }
    /* symm_ptr(p, me) == p, except that SYMM_DEBUG_FORCE_REMOTE reaches no PE by load/store */
    const int no_ldst = getenv("SYMM_DEBUG_FORCE_REMOTE") && atoi(getenv("SYMM_DEBUG_FORCE_REMOTE"));
    TEST_ASSERT(e->h_err[2 + e->me] == (no_ldst ? 0ull : (unsigned long long)(uintptr_t)(heap_obj + 5)),
                "own pointer 0x%llx, want %s", e->h_err[2 + e->me],
                no_ldst ? "NULL (SYMM_DEBUG_FORCE_REMOTE)" : "itself");
    TEST_ASSERT(e->h_err[10] == 0 && e->h_err[11] == 0, "symm_ctx_ptr accepts PE -1 or n_pes");
    TEST_ASSERT(e->h_err[12] == 0, "symm_ctx_ptr accepts a pointer outside the heap");
    CUDA_CHECK(cudaFree(outside));
}

/* The block writes src, then puts it (64 KiB), `rounds` times in one kernel
 * (16; 4 sanitizer-sized), each round a new stream into its own slice of dst
 * on the next PE: what arrives must be what the block stored just before,
 * never what src held earlier. */
#define FRESH_N ((size_t)64 << 10)
#define FRESH_ROUNDS 16
__global__ static void fresh_src_kernel(const symm_ctx_t *ctx, uint8_t *dst, uint8_t *src, uint64_t seed, int pe,
                                        int rounds) {
    for (int r = 0; r < rounds; r++) {
        for (size_t i = threadIdx.x; i < FRESH_N; i += blockDim.x)
            src[i] = dt_byte(seed + (uint64_t)r, i);
        __syncthreads();
        symm_put_block(ctx, dst + (size_t)r * FRESH_N, src, FRESH_N, pe);
    }
}

static void test_fresh_src(dt_env_t *e, bufs_t *b) {
    const int rounds = (int)dt_n(FRESH_ROUNDS, 4);
    uint64_t seed = dt_seed(77, 0, e->me), peer_seed = dt_seed(77, 0, (e->me + e->npes - 1) % e->npes);
    dt_fill(b->dbuf, FRESH_N * FRESH_ROUNDS, 0, 0);
    dt_fill_byte(b->sbuf, FRESH_N, 0xee);
    CUDA_CHECK(cudaDeviceSynchronize());
    SYMM_CHECK(symm_barrier_all());
    fresh_src_kernel<<<1, 256>>>(e->ctx, b->dbuf, b->sbuf, seed, (e->me + 1) % e->npes, rounds);
    CUDA_CHECK_KERNEL();
    SYMM_CHECK(symm_barrier_all());
    for (int r = 0; r < rounds; r++) {
        char what[128];
        snprintf(what, sizeof what, "block put of a source written in the same kernel, round %d", r);
        dt_check(e, b->dbuf + (size_t)r * FRESH_N, FRESH_N, peer_seed + (uint64_t)r, 0, 0, what);
    }
    n_cases += (unsigned long long)rounds;
    n_bytes += FRESH_N * (unsigned long long)rounds;
}

int main(int argc, char **argv) {
    dt_env_t e;
    dt_init(&e, argc > 1 ? atoi(argv[1]) : 1);
    const int small_run = symm_test_small();

    static const size_t small[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128,
                                   129, 255, 256, 257, 1000, 1023, 1024, 1025, 4095, 4096, 4097, 65535, 65536,
                                   65537, 262147};
    static const size_t big[] = {(size_t)1 << 20, ((size_t)1 << 20) + 13, ((size_t)16 << 20) + 7, MAX_SIZE};
    const size_t n_big = small_run ? 2 : sizeof big / sizeof big[0];
    const size_t max_size = big[n_big - 1];
    /* (src, dst) offsets sharing 16, 16, 16, 8, 4, 2, 1, 1, 2, 16 bytes of alignment. */
    static const size_t offs[][2] = {{0, 0}, {1, 1}, {5, 21}, {0, 8}, {4, 8}, {2, 4}, {1, 0}, {3, 10}, {15, 1}, {7, 39}};
    const int n_offs = sizeof offs / sizeof offs[0];
    dim3 shapes[N_SCOPES][2] = {{dim3(1), dim3(128)}, {dim3(32), dim3(16, 4)}, {dim3(256), dim3(8, 4, 3)}};
    uint64_t iter = 0;

    bufs_t b;
    SYMM_CHECK(symm_malloc(max_size + 64 + GUARD, (void **)&b.sbuf));
    SYMM_CHECK(symm_malloc(max_size + 64 + GUARD, (void **)&b.dbuf));
    CUDA_CHECK(cudaMalloc(&b.readback, max_size + 64));

    test_ctx(&e, b.sbuf);
    test_pg(&e, b.dbuf);
    test_fresh_src(&e, &b);
    dt_progress(&e, "context queries, p/g, block put of a fresh source");

    for (int op = 0; op < N_OPS; op++)
        for (int sc = 0; sc < N_SCOPES; sc++)
            for (size_t si = 0; si < sizeof small / sizeof small[0]; si++)
                for (int oi = 0; oi < n_offs; oi++) {
                    size_t n = small[si];
                    if (!small_run) {
                        run_case(&e, &b, op, sc, n, offs[oi][0], offs[oi][1], 0, shapes[sc][0], ++iter);
                        /* Many groups, alternate block shapes (2-D/3-D blocks). */
                        if (n >= 64 && oi % 3 == 0)
                            run_case(&e, &b, op, sc, n, offs[oi][0], offs[oi][1], 1, shapes[sc][oi % 2], ++iter);
                        continue;
                    }
                    /* small: one pair per size, the next size takes the next pair; many
                     * groups on every other size from 64 on, again through all pairs */
                    size_t rot = (size_t)op * N_SCOPES + (size_t)sc;
                    if (oi == (int)((si + rot) % (size_t)n_offs))
                        run_case(&e, &b, op, sc, n, offs[oi][0], offs[oi][1], 0, shapes[sc][0], ++iter);
                    if (n >= 64 && si % 2 == 0 && oi == (int)((si / 2 + rot) % (size_t)n_offs))
                        run_case(&e, &b, op, sc, n, offs[oi][0], offs[oi][1], 1, shapes[sc][(si / 2) % 2], ++iter);
                }
    dt_progress(&e, "put/get up to 256 KiB");
    static const size_t smem_sizes[] = {1, 8, 15, 16, 33, 255, 1000, 4096 - 16, 4096};
    int n_smem_offs = 0, smem_offs[sizeof offs / sizeof offs[0]];
    for (int oi = 0; oi < n_offs; oi++)
        if (offs[oi][0] <= 16 && offs[oi][1] <= 16)
            smem_offs[n_smem_offs++] = oi;
    for (int is_put = 0; is_put < 2; is_put++)
        for (int sc = 0; sc < N_SCOPES; sc++)
            for (size_t si = 0; si < sizeof smem_sizes / sizeof smem_sizes[0]; si++)
                for (int k = 0; k < n_smem_offs; k++) {
                    int pick = (int)((si + (size_t)is_put * N_SCOPES + (size_t)sc) % (size_t)n_smem_offs);
                    if (small_run && k != pick)
                        continue;
                    int oi = smem_offs[k];
                    run_smem_case(&e, &b, is_put, sc, smem_sizes[si], offs[oi][0], offs[oi][1], ++iter);
                }
    dt_progress(&e, "put/get with the local side in shared memory");

    for (int op = 0; op < N_OPS; op++)
        for (int sc = 0; sc < N_SCOPES; sc++)
            for (size_t si = 0; si < n_big; si++) {
                size_t n = big[si];
                int oi = si % 2 ? 2 : 7; /* 16-byte co-aligned and byte-misaligned */
                run_case(&e, &b, op, sc, n, offs[oi][0], offs[oi][1], 1, shapes[sc][1], ++iter);
                /* One block alone on a large transfer (the single-group loop). */
                if (sc == SC_BLOCK && n <= ((size_t)16 << 20) + 7)
                    run_case(&e, &b, op, sc, n, offs[0][0], offs[0][1], 0, shapes[sc][0], ++iter);
                if (sc == SC_WARP && n <= ((size_t)1 << 20) + 13)
                    run_case(&e, &b, op, sc, n, offs[1][0], offs[1][1], 0, shapes[sc][0], ++iter);
            }

    SYMM_CHECK(symm_free(b.sbuf));
    SYMM_CHECK(symm_free(b.dbuf));
    CUDA_CHECK(cudaFree(b.readback));
    if (e.me == 0)
        printf("test_device_rma: %d PEs: %llu put/get cases (thread/warp/block, blocking+nbi, 1 B..%.1f MiB, "
               "10 alignment pairs, local side in global or shared memory, %.1f MiB per PE checked byte by byte), "
               "p/g of 10 types, ctx queries: OK\n",
               e.npes, n_cases, (double)max_size / (1 << 20), (double)n_bytes / (1 << 20));
    dt_fini(&e);
    return 0;
}
