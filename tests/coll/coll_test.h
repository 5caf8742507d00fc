/*
 * coll_test.h - data and references for the collectives' GPU tests.
 *
 * Values are chosen so every reduction is exact in any order: floats are
 * small integers times 1/2 (f32, f64), or small integers (f16, bf16, fp8:
 * |sum| stays within the integers the format holds exactly for up to 8 PEs);
 * integers are full-width random words (sums wrap, which is exact too). So a
 * result is right only if it matches the reference bit for bit. Element i of
 * PE p under seed s is a hash of (s, p, i); the seed changes on every call,
 * so a result left over from an earlier call fails.
 */
#ifndef SYMM_COLL_TEST_H
#define SYMM_COLL_TEST_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <math.h>
#include <string.h>

#include "symm/symm.h"
#include "symm_test.h"
#include "symm_test_cuda.h"

__host__ __device__ static inline uint64_t ct_hash(uint64_t seed, int pe, uint64_t i) {
    uint64_t z = seed * 0x9e3779b97f4a7c15ull + (uint64_t)(pe + 1) * 0xbf58476d1ce4e5b9ull + i * 0x94d049bb133111ebull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint32_t ct_esz(symm_dtype_t t) {
    switch (t) {
    case SYMM_DTYPE_F32: case SYMM_DTYPE_I32: case SYMM_DTYPE_U32: return 4;
    case SYMM_DTYPE_F16: case SYMM_DTYPE_BF16: return 2;
    case SYMM_DTYPE_F64: case SYMM_DTYPE_I64: case SYMM_DTYPE_U64: return 8;
    default: return 1;
    }
}

static inline int ct_is_float(symm_dtype_t t) {
    return t == SYMM_DTYPE_F32 || t == SYMM_DTYPE_F64 || t == SYMM_DTYPE_F16 || t == SYMM_DTYPE_BF16 ||
           t == SYMM_DTYPE_FP8_E4M3 || t == SYMM_DTYPE_FP8_E5M2;
}

/* The value (as a double for floats) of element i of PE pe. */
__host__ __device__ static inline double ct_fval(symm_dtype_t t, uint64_t seed, int pe, uint64_t i) {
    uint64_t h = ct_hash(seed, pe, i);
    switch (t) {
    case SYMM_DTYPE_F32: case SYMM_DTYPE_F64: return (double)((int)(h % 129) - 64) * 0.5;
    case SYMM_DTYPE_F16: case SYMM_DTYPE_BF16: return (double)((int)(h % 33) - 16);
    case SYMM_DTYPE_FP8_E4M3: return (double)((int)(h % 5) - 2);
    default: return (double)((int)(h % 3) - 1); /* e5m2 */
    }
}

/* Encode a float value (exactly representable) into the element bytes. */
static inline void ct_put_float(symm_dtype_t t, double v, void *out) {
    switch (t) {
    case SYMM_DTYPE_F32: { float f = (float)v; memcpy(out, &f, 4); break; }
    case SYMM_DTYPE_F64: memcpy(out, &v, 8); break;
    case SYMM_DTYPE_F16: { __half h = __double2half(v); memcpy(out, &h, 2); break; }
    case SYMM_DTYPE_BF16: { __nv_bfloat16 h = __double2bfloat16(v); memcpy(out, &h, 2); break; }
    case SYMM_DTYPE_FP8_E4M3: { __nv_fp8_e4m3 q((float)v); memcpy(out, &q, 1); break; }
    default: { __nv_fp8_e5m2 q((float)v); memcpy(out, &q, 1); break; }
    }
}

/* Element i of PE pe, as bytes. */
static inline void ct_elem(symm_dtype_t t, uint64_t seed, int pe, uint64_t i, void *out) {
    if (ct_is_float(t)) {
        ct_put_float(t, ct_fval(t, seed, pe, i), out);
    } else {
        uint64_t h = ct_hash(seed, pe, i);
        memcpy(out, &h, ct_esz(t)); /* little endian: the low bytes */
    }
}

static inline void ct_fill(symm_dtype_t t, uint64_t seed, int pe, uint64_t first, uint64_t count, void *out) {
    uint32_t esz = ct_esz(t);
    for (uint64_t i = 0; i < count; i++)
        ct_elem(t, seed, pe, first + i, (char *)out + i * esz);
}

/* Reference reduction over PEs 0..npes-1 of element i (piece `piece` of
 * the PEs' inputs for a reduce-scatter: element piece * count + i). */
static inline void ct_reduce(symm_dtype_t t, symm_redop_t op, uint64_t seed, int npes, uint64_t i, void *out) {
    if (ct_is_float(t)) {
        double a = ct_fval(t, seed, 0, i);
        for (int p = 1; p < npes; p++) {
            double b = ct_fval(t, seed, p, i);
            a = op == SYMM_OP_SUM ? a + b : op == SYMM_OP_MIN ? (b < a ? b : a) : (b > a ? b : a);
        }
        ct_put_float(t, a, out);
        return;
    }
    uint32_t esz = ct_esz(t);
    int sgn = (t == SYMM_DTYPE_I32 || t == SYMM_DTYPE_I64);
    uint64_t mask = esz == 8 ? ~0ull : ((1ull << (8 * esz)) - 1);
    uint64_t a = ct_hash(seed, 0, i) & mask;
    for (int p = 1; p < npes; p++) {
        uint64_t b = ct_hash(seed, p, i) & mask;
        int64_t sa = esz == 8 ? (int64_t)a : (int64_t)(int32_t)(uint32_t)a;
        int64_t sb = esz == 8 ? (int64_t)b : (int64_t)(int32_t)(uint32_t)b;
        int less = sgn ? sb < sa : b < a;
        switch (op) {
        case SYMM_OP_SUM: a = (a + b) & mask; break;
        case SYMM_OP_MIN: a = less ? b : a; break;
        case SYMM_OP_MAX: a = (!less && a != b) ? b : a; break;
        case SYMM_OP_BAND: a &= b; break;
        case SYMM_OP_BOR: a |= b; break;
        default: a ^= b; break;
        }
    }
    memcpy(out, &a, esz);
}

/* The reduction ops valid for a type. */
static inline int ct_nops(symm_dtype_t t) { return ct_is_float(t) ? 3 : 6; }

static const symm_dtype_t CT_RED_TYPES[] = {
    SYMM_DTYPE_F32, SYMM_DTYPE_F16, SYMM_DTYPE_BF16, SYMM_DTYPE_F64, SYMM_DTYPE_I32,
    SYMM_DTYPE_U32, SYMM_DTYPE_I64, SYMM_DTYPE_U64, SYMM_DTYPE_FP8_E4M3, SYMM_DTYPE_FP8_E5M2};
#define CT_N_RED_TYPES ((int)(sizeof(CT_RED_TYPES) / sizeof(CT_RED_TYPES[0])))

static inline const char *ct_type_name(symm_dtype_t t) {
    static const char *names[] = {"f32", "f16", "bf16", "f64", "i32", "u32", "i64", "u64", "e4m3", "e5m2", "u8"};
    return (int)t >= 0 && (int)t < 11 ? names[t] : "?";
}

/* First differing element of two byte arrays, or -1. */
static inline long long ct_first_diff(const void *a, const void *b, uint64_t count, uint32_t esz) {
    if (memcmp(a, b, count * esz) == 0)
        return -1;
    for (uint64_t i = 0; i < count; i++)
        if (memcmp((const char *)a + i * esz, (const char *)b + i * esz, esz) != 0)
            return (long long)i;
    return -1;
}

/* Failed result checks so far (a failed check is reported and the test goes
 * on, so one bad case does not hide the others; main exits 1 at the end). */
static long long g_ct_failures;

static inline void ct_print_elem(FILE *f, symm_dtype_t t, const void *p) {
    uint64_t w = 0;
    memcpy(&w, p, ct_esz(t));
    fprintf(f, "0x%0*llx", (int)ct_esz(t) * 2, (unsigned long long)w);
    if (t == SYMM_DTYPE_F32) { float v; memcpy(&v, p, 4); fprintf(f, " (%g)", v); }
    else if (t == SYMM_DTYPE_F64) { double v; memcpy(&v, p, 8); fprintf(f, " (%g)", v); }
}

/*
 * Compare `count` elements of got against want. On a mismatch: count it in
 * g_ct_failures and print (for the first 40 failed checks of the run) the
 * parameters `what`, how many elements are wrong, and the first 4 of them
 * with index, expected and got values. Returns the number of wrong elements.
 */
static inline uint64_t ct_check(const char *what, symm_dtype_t t, const void *got, const void *want,
                                uint64_t count) {
    uint32_t esz = ct_esz(t);
    uint64_t bad = 0;
    int shown = 0;
    if (memcmp(got, want, count * esz) == 0)
        return 0;
    for (uint64_t i = 0; i < count; i++)
        if (memcmp((const char *)got + i * esz, (const char *)want + i * esz, esz) != 0)
            bad++;
    g_ct_failures++;
    if (g_ct_failures > 40)
        return bad;
    fprintf(stderr, "FAIL [pe %d] %s: %llu of %llu elements wrong\n", symm_my_pe(), what, (unsigned long long)bad,
            (unsigned long long)count);
    for (uint64_t i = 0; i < count && shown < 4; i++)
        if (memcmp((const char *)got + i * esz, (const char *)want + i * esz, esz) != 0) {
            fprintf(stderr, "FAIL [pe %d]   element %llu: want ", symm_my_pe(), (unsigned long long)i);
            ct_print_elem(stderr, t, (const char *)want + i * esz);
            fprintf(stderr, " got ");
            ct_print_elem(stderr, t, (const char *)got + i * esz);
            fprintf(stderr, "\n");
            shown++;
        }
    fflush(stderr);
    return bad;
}

#endif /* SYMM_COLL_TEST_H */
