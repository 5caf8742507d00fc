/*
 * test_coll_convert.c - CI test (no GPU) of the collectives' arithmetic
 * (include/symm/device/coll_reduce.h, host build): the narrow-format
 * conversions against independent references, the accumulator steps, and the
 * table of supported dtype/op/accumulator triples.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "symm/device/coll_reduce.h"

static int failures;
#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);           \
            fprintf(stderr, __VA_ARGS__);                                  \
            fprintf(stderr, "\n");                                         \
            if (++failures > 20) return 1;                                 \
        }                                                                  \
    } while (0)

/* Reference decode of a small float by its definition (value = m * 2^e). */
static double ref_decode(uint32_t v, int eb, int mb, int nan_all_ones) {
    int sign = (v >> (eb + mb)) & 1, e = (v >> mb) & ((1 << eb) - 1), m = v & ((1 << mb) - 1);
    int bias = (1 << (eb - 1)) - 1;
    double x;
    if (nan_all_ones ? (e == (1 << eb) - 1 && m == (1 << mb) - 1) : e == (1 << eb) - 1)
        return (m || nan_all_ones) ? NAN : (sign ? -INFINITY : INFINITY);
    x = e == 0 ? ldexp((double)m, 1 - bias - mb) : ldexp((double)((1 << mb) + m), e - bias - mb);
    return sign ? -x : x;
}

/* Check decode and round-to-nearest-even encode of every code of a format:
 * each finite value encodes to itself, the midpoint to the next code rounds
 * to the even one, and just above/below it to the nearer. */
static int check_format(const char *name, int eb, int mb, int nan_all_ones, int satfinite) {
    uint32_t ncodes = 1u << (1 + eb + mb), maxpos = 0;
    double maxfin = 0;
    for (uint32_t c = 0; c < ncodes / 2; c++) {
        double v = ref_decode(c, eb, mb, nan_all_ones);
        if (isfinite(v) && v > maxfin) {
            maxfin = v;
            maxpos = c;
        }
    }
    for (uint32_t c = 0; c < ncodes; c++) {
        double v = ref_decode(c, eb, mb, nan_all_ones), got = symm__c_small_to_f64(c, eb, mb, nan_all_ones);
        if (isnan(v)) {
            CHECK(isnan(got), "%s decode 0x%x: want NaN, got %g", name, c, got);
            CHECK(isnan(symm__c_small_to_f64(symm__c_f64_to_small(v, eb, mb, satfinite, nan_all_ones), eb, mb,
                                             nan_all_ones)), "%s: NaN does not encode to NaN", name);
            continue;
        }
        CHECK(got == v && signbit(got) == signbit(v), "%s decode 0x%x: want %g, got %g", name, c, v, got);
        if (!isfinite(v)) {
            uint32_t enc = symm__c_f64_to_small(v, eb, mb, satfinite, nan_all_ones);
            uint32_t want = satfinite ? (maxpos | (c & (ncodes / 2))) : c;
            CHECK(enc == want, "%s encode %g: want 0x%x got 0x%x", name, v, want, enc);
            continue;
        }
        CHECK(symm__c_f64_to_small(v, eb, mb, satfinite, nan_all_ones) == c || (v == 0 && (c & ~(ncodes / 2)) == 0),
              "%s encode %g: want 0x%x, got 0x%x", name, v, c, symm__c_f64_to_small(v, eb, mb, satfinite, nan_all_ones));
        /* midpoint to the next larger magnitude */
        if ((c & (ncodes / 2)) == 0 && c < maxpos) {
            double next = ref_decode(c + 1, eb, mb, nan_all_ones), mid = (v + next) / 2;
            uint32_t even = (c & 1) ? c + 1 : c;
            CHECK(symm__c_f64_to_small(mid, eb, mb, satfinite, nan_all_ones) == even,
                  "%s: midpoint %g of 0x%x..0x%x rounds to 0x%x, want 0x%x", name, mid, c, c + 1,
                  symm__c_f64_to_small(mid, eb, mb, satfinite, nan_all_ones), even);
            CHECK(symm__c_f64_to_small(nextafter(mid, 0), eb, mb, satfinite, nan_all_ones) == c, "%s: below mid", name);
            CHECK(symm__c_f64_to_small(nextafter(mid, INFINITY), eb, mb, satfinite, nan_all_ones) == c + 1,
                  "%s: above mid", name);
        }
    }
    /* overflow */
    {
        uint32_t enc = symm__c_f64_to_small(maxfin * 4, eb, mb, satfinite, nan_all_ones);
        uint32_t want = (satfinite || nan_all_ones) ? maxpos : (((1u << eb) - 1u) << mb);
        CHECK(enc == want, "%s: overflow of %g gives 0x%x, want 0x%x", name, maxfin * 4, enc, want);
    }
    return 0;
}

static float bf16_ref(float f) { /* by definition: nearest bf16, ties to even, via double */
    double d = f;
    uint32_t c = symm__c_f64_to_small(d, 8, 7, 0, 0);
    return (float)symm__c_small_to_f64(c, 8, 7, 0);
}

int main(void) {
    if (check_format("f16", 5, 10, 0, 0) || check_format("bf16", 8, 7, 0, 0) ||
        check_format("e4m3", 4, 3, 1, 1) || check_format("e5m2", 5, 2, 0, 1))
        return 1;

    /* bf16 fast path = the generic rounding, over a spread of floats */
    for (uint32_t i = 0; i < 2000000u; i++) {
        uint32_t u = i * 2654435761u;
        float f;
        memcpy(&f, &u, 4);
        if (isnan(f)) continue;
        float got = symm__c_bf16_to_f32(symm__c_f32_to_bf16(f)), want = bf16_ref(f);
        CHECK(got == want || (isinf(want) && got == want), "bf16(%a) = %a, want %a", (double)f, (double)got,
              (double)want);
    }

    /* accumulators: bf16 x 4 lanes summed in f32 and rounded once */
    {
        uint64_t w1 = 0, w2 = 0;
        float a[4] = {1.0f, 256.0f, -3.5f, 1e-3f}, b[4] = {1.0f / 512, 1.0f, 3.5f, 2e-3f};
        symm__c_acc_bf16 acc;
        for (int i = 0; i < 4; i++) {
            w1 |= (uint64_t)symm__c_f32_to_bf16(a[i]) << (16 * i);
            w2 |= (uint64_t)symm__c_f32_to_bf16(b[i]) << (16 * i);
        }
        symm__c_first_bf16(&acc, w1);
        symm__c_next_bf16(&acc, w2, SYMM_OP_SUM);
        uint64_t r = symm__c_last_bf16(&acc);
        for (int i = 0; i < 4; i++) {
            float want = bf16_ref(symm__c_bf16_to_f32((uint32_t)(w1 >> (16 * i)) & 0xffff) +
                                  symm__c_bf16_to_f32((uint32_t)(w2 >> (16 * i)) & 0xffff));
            CHECK(symm__c_bf16_to_f32((uint32_t)(r >> (16 * i)) & 0xffff) == want, "bf16 lane %d", i);
        }
    }
    /* integer lanes: wrap, signed/unsigned min, bitwise */
    {
        symm__c_acc_i32 a;
        symm__c_acc_u32 u;
        uint64_t x = ((uint64_t)0x7fffffffu << 32) | 0xffffffffu, y = ((uint64_t)1u << 32) | 1u;
        symm__c_first_i32(&a, x);
        symm__c_next_i32(&a, y, SYMM_OP_SUM);
        CHECK(symm__c_last_i32(&a) == ((uint64_t)0x80000000u << 32), "i32 wrap sum %llx",
              (unsigned long long)symm__c_last_i32(&a));
        symm__c_first_i32(&a, x);
        symm__c_next_i32(&a, y, SYMM_OP_MIN);
        CHECK(symm__c_last_i32(&a) == ((uint64_t)1u << 32 | 0xffffffffu), "i32 min");
        symm__c_first_u32(&u, x);
        symm__c_next_u32(&u, y, SYMM_OP_MIN);
        CHECK(symm__c_last_u32(&u) == y, "u32 min");
        symm__c_first_u32(&u, x);
        symm__c_next_u32(&u, y, SYMM_OP_BXOR);
        CHECK(symm__c_last_u32(&u) == (x ^ y), "u32 xor");
    }
    /* fp8 summed in f16: every step rounds to f16 */
    {
        symm__c_acc_e4m3h h;
        uint64_t w = 0x38; /* 1.0 in e4m3 */
        symm__c_first_e4m3h(&h, w);
        for (int i = 0; i < 15; i++) symm__c_next_e4m3h(&h, w, SYMM_OP_SUM);
        CHECK((symm__c_last_e4m3h(&h) & 0xff) == 0x58, "16 x 1.0 in e4m3 = 0x%llx",
              (unsigned long long)(symm__c_last_e4m3h(&h) & 0xff));
    }
    /* supported triples */
    CHECK(symm__c_red_kind(SYMM_DTYPE_F32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT) == SYMM__C_RED_f32, "f32 sum");
    CHECK(symm__c_red_kind(SYMM_DTYPE_F32, SYMM_OP_BAND, SYMM_DTYPE_DEFAULT) < 0, "f32 band unsupported");
    CHECK(symm__c_red_kind(SYMM_DTYPE_BF16, SYMM_OP_MAX, SYMM_DTYPE_F16) < 0, "bf16 with f16 acc unsupported");
    CHECK(symm__c_red_kind(SYMM_DTYPE_FP8_E4M3, SYMM_OP_SUM, SYMM_DTYPE_F16) == SYMM__C_RED_e4m3h, "e4m3 acc f16");
    CHECK(symm__c_red_kind(SYMM_DTYPE_FP8_E5M2, SYMM_OP_MIN, SYMM_DTYPE_DEFAULT) == SYMM__C_RED_e5m2, "e5m2");
    CHECK(symm__c_red_kind(SYMM_DTYPE_U8, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT) < 0, "u8 sum unsupported");
    CHECK(symm__c_red_kind(SYMM_DTYPE_I64, SYMM_OP_BOR, SYMM_DTYPE_DEFAULT) == SYMM__C_RED_i64, "i64 bor");
    CHECK(symm__c_red_kind(SYMM_DTYPE_I32, SYMM_OP_COUNT, SYMM_DTYPE_DEFAULT) < 0, "bad op");
    CHECK(symm__c_dtype_size(SYMM_DTYPE_COUNT) == 0 && symm__c_dtype_size(SYMM_DTYPE_BF16) == 2, "sizes");
    if (failures)
        return 1;
    printf("coll conversions: ok\n");
    return 0;
}
