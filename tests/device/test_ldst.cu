/*
 * test_ldst.cu - symm_ld_<T> / symm_st_<T> with every ordering (WEAK,
 * RELAXED, ACQUIRE, RELEASE, VOLATILE) at every scope (CTA, GPU, SYS), for
 * every type, to and from the neighbouring PEs; then message passing with
 * them: data stored WEAK, a flag stored RELEASE at SYS, the receiver polls
 * the flag with ACQUIRE loads and must then see the data.
 *
 * Usage: test_device_ldst <npes>   (under symmrun)
 */
#include "device_test.h"

#define N_SEM 5
#define N_SCOPE 3
#define N_COMBO (N_SEM * N_SCOPE)
static const char *sem_name[N_SEM] = {"WEAK", "RELAXED", "ACQUIRE", "RELEASE", "VOLATILE"};
static const char *scope_name[N_SCOPE] = {"CTA", "GPU", "SYS"};

__host__ __device__ static inline double ldst_val(int combo, int from, int salt) {
    return (double)((combo * 131 + from * 17 + salt * 7) % 4093) - 2000.25;
}

#define LDST_TYPES(X) X(i32, int32_t) X(i64, int64_t) X(u32, uint32_t) X(u64, uint64_t) X(f32, float) X(f64, double)

/* arr[combo][pe]: thread `combo` (sem = combo / 3, scope = combo % 3) stores
 * its value into slot [combo][me] of the right PE; err[0] counts load-back
 * mismatches (second kernel), err[1] local slot mismatches. */
#define LDST_KERNELS(S, T)                                                                        \
    __global__ static void st_kernel_##S(const symm_ctx_t *ctx, T *arr, int salt) {              \
        int me = symm_ctx_my_pe(ctx), np = symm_ctx_n_pes(ctx), c = threadIdx.x;                  \
        T v = (T)ldst_val(c, me, salt);                                                           \
        symm_st_##S(ctx, &arr[c * np + me], v, (me + 1) % np, c / N_SCOPE, c % N_SCOPE);         \
        symm_quiet(ctx);                                                                          \
    }                                                                                             \
    __global__ static void ld_kernel_##S(const symm_ctx_t *ctx, T *arr, int salt,                \
                                         unsigned long long *err) {                               \
        int me = symm_ctx_my_pe(ctx), np = symm_ctx_n_pes(ctx), c = threadIdx.x;                  \
        int left = (me + np - 1) % np;                                                            \
        if (arr[c * np + left] != (T)ldst_val(c, left, salt))                                     \
            atomicAdd(&err[1], 1ull);                                                             \
        if (symm_ld_##S(ctx, &arr[c * np + me], (me + 1) % np, c / N_SCOPE, c % N_SCOPE) !=       \
            (T)ldst_val(c, me, salt))                                                             \
            atomicAdd(&err[0], 1ull);                                                             \
    }
LDST_TYPES(LDST_KERNELS)

/* Message passing: PE me sends to the right, receives from the left.
 * Per iteration: 16 data words (WEAK stores), then flag = i (RELEASE, SYS);
 * receive: poll own flag with ACQUIRE SYS loads until i, check the data with
 * WEAK loads, acknowledge to the left (RELEASE), poll own ack (ACQUIRE). */
#define MP_WORDS 16
__global__ static void mp_kernel(const symm_ctx_t *ctx, uint64_t *data, uint64_t *flag, uint64_t *ack,
                                 uint32_t iters, unsigned long long *err) {
    int me = symm_ctx_my_pe(ctx), np = symm_ctx_n_pes(ctx);
    int right = (me + 1) % np, left = (me + np - 1) % np;
    for (uint32_t i = 1; i <= iters; i++) {
        for (int w = 0; w < MP_WORDS; w++)
            symm_st_u64(ctx, &data[w], dt_mix(((uint64_t)i << 8) ^ (uint64_t)(me * MP_WORDS + w)), right,
                        SYMM_SEM_WEAK, SYMM_SCOPE_SYS);
        symm_st_u64(ctx, flag, i, right, SYMM_SEM_RELEASE, SYMM_SCOPE_SYS);
        unsigned long long spins = 0;
        while (symm_ld_u64(ctx, flag, me, SYMM_SEM_ACQUIRE, SYMM_SCOPE_SYS) < i)
            if (++spins > 400000000ull) { atomicAdd(&err[3], 1ull); return; }
        for (int w = 0; w < MP_WORDS; w++)
            if (symm_ld_u64(ctx, &data[w], me, SYMM_SEM_WEAK, SYMM_SCOPE_SYS) !=
                dt_mix(((uint64_t)i << 8) ^ (uint64_t)(left * MP_WORDS + w)))
                atomicAdd(&err[2], 1ull);
        symm_st_u64(ctx, ack, i, left, SYMM_SEM_RELEASE, SYMM_SCOPE_SYS);
        spins = 0;
        while (symm_ld_u64(ctx, ack, me, SYMM_SEM_ACQUIRE, SYMM_SCOPE_SYS) < i)
            if (++spins > 400000000ull) { atomicAdd(&err[3], 1ull); return; }
    }
}

int main(int argc, char **argv) {
    dt_env_t e;
    dt_init(&e, argc > 1 ? atoi(argv[1]) : 1);
    void *arr;
    uint64_t *mp; /* [0..15] data, [16] flag, [17] ack */
    SYMM_CHECK(symm_malloc((size_t)N_COMBO * e.npes * 8, &arr));
    SYMM_CHECK(symm_malloc(32 * sizeof(uint64_t), (void **)&mp));

    const int salts = (int)dt_n(4, 1);
    for (int salt = 1; salt <= salts; salt++) {
#define LDST_RUN(S, T)                                                                               \
        {                                                                                            \
            CUDA_CHECK(cudaMemset(arr, 0x77, (size_t)N_COMBO * e.npes * sizeof(T)));                 \
            SYMM_CHECK(symm_barrier_all());                                                          \
            st_kernel_##S<<<1, N_COMBO>>>(e.ctx, (T *)arr, salt);                                    \
            CUDA_CHECK_KERNEL();                                                                     \
            SYMM_CHECK(symm_barrier_all());                                                          \
            dt_err_reset(&e);                                                                        \
            ld_kernel_##S<<<1, N_COMBO>>>(e.ctx, (T *)arr, salt, e.d_err);                           \
            CUDA_CHECK_KERNEL();                                                                     \
            if (dt_err_read(&e, 0) || e.h_err[1]) {                                                  \
                /* Name the failing combinations. */                                                 \
                for (int c = 0; c < N_COMBO; c++) {                                                  \
                    T got;                                                                           \
                    int left = (e.me + e.npes - 1) % e.npes;                                         \
                    CUDA_CHECK(cudaMemcpy(&got, (T *)arr + c * e.npes + left, sizeof(T),             \
                                          cudaMemcpyDeviceToHost));                                  \
                    if (got != (T)ldst_val(c, left, salt))                                           \
                        fprintf(stderr, "st_" #S " sem %s scope %s: slot wrong\n", sem_name[c / N_SCOPE], \
                                scope_name[c % N_SCOPE]);                                            \
                }                                                                                    \
                TEST_FAIL("ld/st " #S ": %llu loads and %llu stored slots wrong", e.h_err[0], e.h_err[1]); \
            }                                                                                        \
            SYMM_CHECK(symm_barrier_all());                                                          \
        }
        LDST_TYPES(LDST_RUN)
#undef LDST_RUN
    }

    const uint32_t iters = (uint32_t)dt_n(5000, 50);
    CUDA_CHECK(cudaMemset(mp, 0, 32 * sizeof(uint64_t)));
    SYMM_CHECK(symm_barrier_all());
    dt_err_reset(&e);
    mp_kernel<<<1, 1>>>(e.ctx, mp, mp + 16, mp + 17, iters, e.d_err);
    CUDA_CHECK_KERNEL();
    dt_err_read(&e, 0);
    TEST_ASSERT(e.h_err[3] == 0, "message passing with ld/st: a poll never saw its flag");
    TEST_ASSERT(e.h_err[2] == 0, "message passing with ld/st: %llu data words not visible after the flag",
                e.h_err[2]);
    SYMM_CHECK(symm_barrier_all());

    SYMM_CHECK(symm_free(mp));
    SYMM_CHECK(symm_free(arr));
    if (e.me == 0)
        printf("test_device_ldst: %d PEs: ld/st of i32/i64/u32/u64/f32/f64 x 5 orderings x 3 scopes to/from "
               "peers (%d values each); %u release/acquire messages with weak data: OK\n",
               e.npes, salts, iters);
    dt_fini(&e);
    return 0;
}
