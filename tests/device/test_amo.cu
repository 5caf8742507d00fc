/*
 * test_amo.cu - every atomic of every type (i32, i64, u32, u64) under
 * contention: all PEs, many blocks and threads, each thread aiming at every
 * PE in turn. Checks exact final values (add/inc, compare_swap loops,
 * and/or/xor bit patterns), that every fetch_inc / fetch_add result is
 * unique (each one marked on the target PE and counted), that every value
 * swap returns appears exactly once, and set/fetch round trips.
 *
 * Usage: test_device_amo <npes>   (under symmrun)
 */
#include "device_test.h"

#define G 8        /* blocks per PE */
#define B 128      /* threads per block */
#define ITERS 8    /* operations per thread per test (a multiple of 1, 2, 4) */
#define NT (G * B) /* threads per PE */

/* Wrappers that give the C API's per-type functions one name per operation. */
#define AMO_TRAITS(S, T)                                                                                      \
    struct amo_##S {                                                                                          \
        typedef T type;                                                                                       \
        static const char *name() { return #S; }                                                              \
        __device__ static T fetch(const symm_ctx_t *c, const T *p, int pe) { return symm_atomic_fetch_##S(c, p, pe); } \
        __device__ static void set(const symm_ctx_t *c, T *p, T v, int pe) { symm_atomic_set_##S(c, p, v, pe); } \
        __device__ static T swap(const symm_ctx_t *c, T *p, T v, int pe) { return symm_atomic_swap_##S(c, p, v, pe); } \
        __device__ static T cswap(const symm_ctx_t *c, T *p, T cond, T v, int pe) {                          \
            return symm_atomic_compare_swap_##S(c, p, cond, v, pe);                                          \
        }                                                                                                     \
        __device__ static void inc(const symm_ctx_t *c, T *p, int pe) { symm_atomic_inc_##S(c, p, pe); }     \
        __device__ static T finc(const symm_ctx_t *c, T *p, int pe) { return symm_atomic_fetch_inc_##S(c, p, pe); } \
        __device__ static void add(const symm_ctx_t *c, T *p, T v, int pe) { symm_atomic_add_##S(c, p, v, pe); } \
        __device__ static T fadd(const symm_ctx_t *c, T *p, T v, int pe) { return symm_atomic_fetch_add_##S(c, p, v, pe); } \
        __device__ static void and_(const symm_ctx_t *c, T *p, T v, int pe) { symm_atomic_and_##S(c, p, v, pe); } \
        __device__ static T fand(const symm_ctx_t *c, T *p, T v, int pe) { return symm_atomic_fetch_and_##S(c, p, v, pe); } \
        __device__ static void or_(const symm_ctx_t *c, T *p, T v, int pe) { symm_atomic_or_##S(c, p, v, pe); } \
        __device__ static T for_(const symm_ctx_t *c, T *p, T v, int pe) { return symm_atomic_fetch_or_##S(c, p, v, pe); } \
        __device__ static void xor_(const symm_ctx_t *c, T *p, T v, int pe) { symm_atomic_xor_##S(c, p, v, pe); } \
        __device__ static T fxor(const symm_ctx_t *c, T *p, T v, int pe) { return symm_atomic_fetch_xor_##S(c, p, v, pe); } \
    };
SYMM_FOR_EACH_AMO_TYPE(AMO_TRAITS)

/* Layout of the symmetric area (in T words), per PE:
 *   [0] add/inc counter      [1] fetch_inc/fetch_add counter   [2] compare_swap counter
 *   [3] swap word            [4] set/fetch scratch (unused)
 *   BITS..: or words, and words, xor words (one bit per (source PE, thread))
 *   SEEN..: uint32 marks, one per fetched counter value / swapped value
 */
#define W_ADD 0
#define W_FINC 1
#define W_CAS 2
#define W_SWAP 3
#define W_BITS 8

template <class A> struct layout {
    typedef typename A::type T;
    static const int bits = 8 * sizeof(T);
    __host__ __device__ static size_t nbitwords(int np) { return ((size_t)np * NT + bits - 1) / bits; }
    __host__ __device__ static size_t or_at(int) { return W_BITS; }
    __host__ __device__ static size_t and_at(int np) { return W_BITS + nbitwords(np); }
    __host__ __device__ static size_t xor_at(int np) { return W_BITS + 2 * nbitwords(np); }
    __host__ __device__ static size_t set_at(int np) { return W_BITS + 3 * nbitwords(np); }
    __host__ __device__ static size_t words(int np) { return set_at(np) + (size_t)np * NT; }
};

/* Each thread, iteration k, aims at PE (me + k) % np; over ITERS iterations
 * (a multiple of np for np in 1, 2, 4, and otherwise still counted exactly by
 * the host) every PE receives a known number of operations. */
__host__ __device__ static inline int target_of(int me, int np, int k) { return (me + k) % np; }

template <class A>
__global__ void amo_contend(const symm_ctx_t *ctx, typename A::type *w, uint32_t *seen_finc, uint32_t *seen_swap,
                            unsigned long long *err) {
    typedef typename A::type T;
    typedef layout<A> L;
    int me = symm_ctx_my_pe(ctx), np = symm_ctx_n_pes(ctx);
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned gid = (unsigned)me * NT + t; /* unique across PEs */
    T bit = (T)((T)1 << (gid % L::bits));
    size_t bw = gid / L::bits;
    for (int k = 0; k < ITERS; k++) {
        int pe = target_of(me, np, k);
        /* add / inc: +3 and +1 */
        A::add(ctx, &w[W_ADD], (T)3, pe);
        A::inc(ctx, &w[W_ADD], pe);
        /* fetch_inc / fetch_add(1): every result unique */
        T v = (k & 1) ? A::fadd(ctx, &w[W_FINC], (T)1, pe) : A::finc(ctx, &w[W_FINC], pe);
        if ((unsigned long long)v >= (unsigned long long)np * NT * ITERS)
            atomicAdd(&err[0], 1ull);
        else
            symm_atomic_inc_u32(ctx, &seen_finc[(size_t)v], pe);
        /* swap: each thread swaps in a value no one else uses */
        T mine = (T)(1 + (unsigned long long)gid * ITERS + k);
        T old = A::swap(ctx, &w[W_SWAP], mine, pe);
        if ((unsigned long long)old > (unsigned long long)np * NT * ITERS)
            atomicAdd(&err[1], 1ull);
        else
            symm_atomic_inc_u32(ctx, &seen_swap[(size_t)old], pe);
    }
    /* Bits: every thread owns one bit of every PE's or/and/xor words. */
    for (int k = 0; k < np; k++) {
        int pe = target_of(me, np, k);
        if (k & 1) {
            A::or_(ctx, &w[L::or_at(np) + bw], bit, pe);
            A::and_(ctx, &w[L::and_at(np) + bw], (T)~bit, pe);
            A::xor_(ctx, &w[L::xor_at(np) + bw], bit, pe);
        } else {
            if (A::for_(ctx, &w[L::or_at(np) + bw], bit, pe) & bit)
                atomicAdd(&err[2], 1ull);
            if (!(A::fand(ctx, &w[L::and_at(np) + bw], (T)~bit, pe) & bit))
                atomicAdd(&err[2], 1ull);
            if (A::fxor(ctx, &w[L::xor_at(np) + bw], bit, pe) & bit)
                atomicAdd(&err[2], 1ull);
        }
    }
    /* compare_swap increments, few of them: contended CAS loops are slow */
    if (t % 16 == 0) {
        int pe = target_of(me, np, (int)(t / 16));
        T cur = A::fetch(ctx, &w[W_CAS], pe);
        for (;;) {
            T prev = A::cswap(ctx, &w[W_CAS], cur, (T)(cur + 1), pe);
            if (prev == cur)
                break;
            cur = prev;
        }
    }
    /* set, then (after the kernel and a barrier) fetch back */
    A::set(ctx, &w[L::set_at(np) + gid], (T)(gid * 7 + 1), (me + 1) % np);
}

/* Run on each PE after the contention kernel and a barrier: checks the local
 * words. err[3]: counters, err[4]: fetch_inc marks, err[5]: swap marks,
 * err[6]: bits, err[7]: set/fetch. */
template <class A>
__global__ void amo_check(const symm_ctx_t *ctx, typename A::type *w, const uint32_t *seen_finc,
                          const uint32_t *seen_swap, unsigned long long n_recv, unsigned long long n_cas,
                          unsigned long long *err) {
    typedef typename A::type T;
    typedef layout<A> L;
    int me = symm_ctx_my_pe(ctx), np = symm_ctx_n_pes(ctx);
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x, nthr = gridDim.x * blockDim.x;
    if (t == 0) {
        if ((unsigned long long)w[W_ADD] != 4 * n_recv) atomicAdd(&err[3], 1ull);
        if ((unsigned long long)w[W_FINC] != n_recv) atomicAdd(&err[3], 1ull);
        if ((unsigned long long)w[W_CAS] != n_cas) atomicAdd(&err[3], 1ull);
    }
    for (size_t v = t; v < n_recv; v += nthr)
        if (seen_finc[v] != 1) atomicAdd(&err[4], 1ull);
    /* Values 0 (initial) and the ones swapped in here: each seen once, except
     * the one still in the word. Values of other PEs' threads never. */
    unsigned long long final_v = (unsigned long long)w[W_SWAP];
    for (size_t v = t; v <= (unsigned long long)np * NT * ITERS; v += nthr) {
        uint32_t want;
        if (v == final_v) want = 0;
        else if (v == 0) want = 1;
        else {
            unsigned long long g = (v - 1) / ITERS, k = (v - 1) % ITERS;
            want = target_of((int)(g / NT), np, (int)k) == me ? 1 : 0;
        }
        if (seen_swap[v] != want) atomicAdd(&err[5], 1ull);
    }
    size_t nbw = L::nbitwords(np);
    for (size_t i = t; i < nbw; i += nthr) {
        size_t nbits = (size_t)np * NT - i * L::bits;
        T all = nbits >= (size_t)L::bits ? (T)~(T)0 : (T)(((T)1 << nbits) - 1);
        if (w[L::or_at(np) + i] != all) atomicAdd(&err[6], 1ull);
        if (w[L::and_at(np) + i] != (T)~all) atomicAdd(&err[6], 1ull);
        if (w[L::xor_at(np) + i] != all) atomicAdd(&err[6], 1ull);
    }
    /* set: slots of the left PE's threads hold their values; fetch them from
     * the right PE, where this PE's threads wrote. */
    int left = (me + np - 1) % np, right = (me + 1) % np;
    for (size_t i = t; i < NT; i += nthr) {
        unsigned lg = (unsigned)left * NT + (unsigned)i, mg = (unsigned)me * NT + (unsigned)i;
        if (w[L::set_at(np) + lg] != (T)(lg * 7 + 1)) atomicAdd(&err[7], 1ull);
        if (A::fetch(ctx, &w[L::set_at(np) + mg], right) != (T)(mg * 7 + 1)) atomicAdd(&err[7], 1ull);
    }
}

template <class A> static void run_type(dt_env_t *e, void *area, uint32_t *seen_finc, uint32_t *seen_swap) {
    typedef typename A::type T;
    typedef layout<A> L;
    int np = e->npes, me = e->me;
    T *w = (T *)area;
    size_t nw = L::words(np);
    size_t nseen = (size_t)np * NT * ITERS + 1;
    /* Initial state: and words all ones, the rest zero. */
    CUDA_CHECK(cudaMemset(w, 0, nw * sizeof(T)));
    CUDA_CHECK(cudaMemset(w + L::and_at(np), 0xff, L::nbitwords(np) * sizeof(T)));
    CUDA_CHECK(cudaMemset(seen_finc, 0, nseen * sizeof(uint32_t)));
    CUDA_CHECK(cudaMemset(seen_swap, 0, nseen * sizeof(uint32_t)));
    dt_err_reset(e);
    SYMM_CHECK(symm_barrier_all());
    amo_contend<A><<<G, B>>>(e->ctx, w, seen_finc, seen_swap, e->d_err);
    CUDA_CHECK_KERNEL();
    SYMM_CHECK(symm_barrier_all());
    /* Operations this PE received: from each PE p, every thread's iterations
     * k with target_of(p, np, k) == me; CAS: threads t % 16 == 0 aiming here. */
    unsigned long long n_recv = 0, n_cas = 0;
    for (int p = 0; p < np; p++) {
        for (int k = 0; k < ITERS; k++)
            n_recv += target_of(p, np, k) == me ? NT : 0;
        for (int t = 0; t < NT; t += 16)
            n_cas += target_of(p, np, t / 16) == me;
    }
    amo_check<A><<<4, 256>>>(e->ctx, w, seen_finc, seen_swap, n_recv, n_cas, e->d_err);
    CUDA_CHECK_KERNEL();
    dt_err_read(e, 0);
    static const char *what[8] = {"fetch_inc result out of range", "swap result out of range",
                                  "fetch_or/and/xor returned a wrong own bit", "final add/inc, fetch_inc or compare_swap counter",
                                  "fetch_inc/fetch_add results not unique", "swap results not each seen once",
                                  "final or/and/xor words", "set/fetch"};
    for (int i = 0; i < 8; i++)
        TEST_ASSERT(e->h_err[i] == 0, "atomics %s: %s: %llu errors", A::name(), what[i], e->h_err[i]);
    SYMM_CHECK(symm_barrier_all());
}

int main(int argc, char **argv) {
    dt_env_t e;
    dt_init(&e, argc > 1 ? atoi(argv[1]) : 1);
    size_t area_bytes = layout<amo_u64>::words(e.npes) * 8;
    size_t nseen = (size_t)e.npes * NT * ITERS + 1;
    void *area;
    uint32_t *seen_finc, *seen_swap;
    SYMM_CHECK(symm_malloc(area_bytes, &area));
    SYMM_CHECK(symm_malloc(nseen * sizeof(uint32_t), (void **)&seen_finc));
    SYMM_CHECK(symm_malloc(nseen * sizeof(uint32_t), (void **)&seen_swap));
    const int rounds = (int)dt_n(5, 1);
    for (int r = 0; r < rounds; r++) {
        run_type<amo_i32>(&e, area, seen_finc, seen_swap);
        run_type<amo_i64>(&e, area, seen_finc, seen_swap);
        run_type<amo_u32>(&e, area, seen_finc, seen_swap);
        run_type<amo_u64>(&e, area, seen_finc, seen_swap);
    }
    SYMM_CHECK(symm_free(seen_swap));
    SYMM_CHECK(symm_free(seen_finc));
    SYMM_CHECK(symm_free(area));
    if (e.me == 0)
        printf("test_device_amo: %d PEs x %d threads: fetch/set/swap/compare_swap/inc/fetch_inc/add/fetch_add/"
               "and/fetch_and/or/fetch_or/xor/fetch_xor on i32/i64/u32/u64 under contention, %d rounds: exact "
               "totals, unique fetch results, swap chains, bit patterns: OK\n",
               e.npes, NT, rounds);
    dt_fini(&e);
    return 0;
}
