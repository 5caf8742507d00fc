/*
 * device/coll_reduce.h - element conversions and the reduction of 8-byte
 * words, the arithmetic under every reducing collective.
 *
 * A collective moves 8-byte words (a packet carries one, a 16-byte vector
 * two) and reduces them lane by lane. For each reduction type S there is an
 * accumulator type symm__c_acc_S and three steps:
 *   symm__c_first_S(&a, w)     a = the lanes of word w, widened
 *   symm__c_next_S(&a, w, op)  a = a op (lanes of w)
 *   symm__c_last_S(&a)         the word holding a, narrowed (rounded once)
 * S is a storage type plus, for fp8, its accumulator: f32 f64 f16 bf16 i32
 * u32 i64 u64 e4m3 e5m2 (fp8 accumulating in f32) e4m3h e5m2h (in f16).
 * f16/bf16 accumulate in f32 and round once at the end, so the result does
 * not depend on the team size beyond the order of the sums (always PE 0, 1,
 * ..., n-1, so every PE computes the same bits). fp8 in f16: each step rounds
 * to f16 exactly once (the sum of two f16 values is exact in double).
 *
 * Plain C: nvcc, clang-nvptx and (for the conversion unit test) a host C
 * compiler all take it; the device picks PTX conversions where PTX has a
 * correctly rounded one, the host the software form that gives the same bits.
 */
#ifndef SYMM_DEVICE_COLL_REDUCE_H
#define SYMM_DEVICE_COLL_REDUCE_H

#include <stdint.h>
#include "symm/device/defs.h"
#if SYMM_DEVICE_CODE
#  include "symm/device/impl_ptx.h" /* the conversions and f16 arithmetic */
#endif
#include "symm/symm_coll_types.h"
#include "symm/contract/coll_kinds.h" /* SYMM__C_RED_*, symm__c_red_kind, symm__c_dtype_size */

#if SYMM_DEVICE_CODE
#  define SYMM__C_FN SYMM__DEVICE_INTERNAL
#else
#  define SYMM__C_FN static inline
#endif

/* ---- bit casts ------------------------------------------------------------ */

#if defined(__CUDACC__)
#  define SYMM__C_F2U(x) ((uint32_t)__float_as_uint(x))
#  define SYMM__C_U2F(x) __uint_as_float(x)
#  define SYMM__C_D2U(x) ((uint64_t)__double_as_longlong(x))
#  define SYMM__C_U2D(x) __longlong_as_double((long long)(x))
#  define SYMM__C_FMINF(a, b) fminf(a, b)
#  define SYMM__C_FMAXF(a, b) fmaxf(a, b)
#  define SYMM__C_FMIN(a, b) fmin(a, b)
#  define SYMM__C_FMAX(a, b) fmax(a, b)
#else
SYMM__C_FN uint32_t symm__c_f2u(float f) { union { float f; uint32_t u; } x; x.f = f; return x.u; }
SYMM__C_FN float symm__c_u2f(uint32_t u) { union { float f; uint32_t u; } x; x.u = u; return x.f; }
SYMM__C_FN uint64_t symm__c_d2u(double f) { union { double f; uint64_t u; } x; x.f = f; return x.u; }
SYMM__C_FN double symm__c_u2d(uint64_t u) { union { double f; uint64_t u; } x; x.u = u; return x.f; }
#  define SYMM__C_F2U(x) symm__c_f2u(x)
#  define SYMM__C_U2F(x) symm__c_u2f(x)
#  define SYMM__C_D2U(x) symm__c_d2u(x)
#  define SYMM__C_U2D(x) symm__c_u2d(x)
#  define SYMM__C_FMINF(a, b) __builtin_fminf(a, b)
#  define SYMM__C_FMAXF(a, b) __builtin_fmaxf(a, b)
#  define SYMM__C_FMIN(a, b) __builtin_fmin(a, b)
#  define SYMM__C_FMAX(a, b) __builtin_fmax(a, b)
#endif

/* ---- narrow formats -> wider (all exact) ------------------------------------- */

SYMM__C_FN float symm__c_bf16_to_f32(uint32_t h) { return SYMM__C_U2F((h & 0xffffu) << 16); }

/* Decode a small binary float (sign, `eb` exponent bits, `mb` mantissa bits,
 * IEEE-style subnormals) into a double. `nan_all_ones`: e4m3 has no
 * infinities, only S.1111.111 is NaN; otherwise the top exponent is inf/NaN. */
SYMM__C_FN double symm__c_small_to_f64(uint32_t v, int eb, int mb, int nan_all_ones) {
    uint32_t sign = (v >> (eb + mb)) & 1u;
    uint32_t e = (v >> mb) & ((1u << eb) - 1u);
    uint32_t m = v & ((1u << mb) - 1u);
    int bias = (1 << (eb - 1)) - 1;
    uint64_t bits;
    if (nan_all_ones ? (e == (1u << eb) - 1u && m == (1u << mb) - 1u) : (e == (1u << eb) - 1u)) {
        bits = (m != 0 || nan_all_ones) ? 0x7ff8000000000000ull : 0x7ff0000000000000ull;
    } else if (e == 0) {
        if (m == 0) {
            bits = 0;
        } else { /* subnormal: normalise */
            int shift = 0;
            while (!(m & (1u << mb))) { m <<= 1; shift++; }
            m &= (1u << mb) - 1u;
            bits = ((uint64_t)(1023 - bias + 1 - shift) << 52) | ((uint64_t)m << (52 - mb));
        }
    } else {
        bits = ((uint64_t)((int)e - bias + 1023) << 52) | ((uint64_t)m << (52 - mb));
    }
    return SYMM__C_U2D(bits | ((uint64_t)sign << 63));
}

SYMM__C_FN float symm__c_f16_to_f32(uint32_t h) {
#if SYMM_DEVICE_CODE
    return symm__cvt_f32_f16((unsigned short)h);
#else
    return (float)symm__c_small_to_f64(h & 0xffffu, 5, 10, 0);
#endif
}


/* ---- wider -> narrow, round to nearest even --------------------------------- */

/*
 * Round a double to a small binary float (eb exponent bits, mb mantissa bits)
 * with round-to-nearest-even, once. `satfinite`: overflow and infinities give
 * the largest finite value (PTX cvt .satfinite, the fp8 conversions);
 * otherwise overflow gives infinity. `nan_all_ones`: the e4m3 encoding (no
 * infinities; NaN = S.1111.111, largest finite S.1111.110).
 */
SYMM__C_FN uint32_t symm__c_f64_to_small(double x, int eb, int mb, int satfinite, int nan_all_ones) {
    uint64_t bits = SYMM__C_D2U(x);
    uint32_t sign = (uint32_t)(bits >> 63) << (eb + mb);
    int e = (int)((bits >> 52) & 0x7ff);
    uint64_t m = bits & ((1ull << 52) - 1);
    int bias = (1 << (eb - 1)) - 1;
    uint32_t emax_field = nan_all_ones ? (1u << eb) - 1u : (1u << eb) - 2u; /* top finite exponent */
    uint32_t maxfin = nan_all_ones ? ((emax_field << mb) | ((1u << mb) - 2u))
                                   : ((emax_field << mb) | ((1u << mb) - 1u));
    uint32_t nan = nan_all_ones ? ((1u << (eb + mb)) - 1u) : (((1u << eb) - 1u) << mb) | (1u << (mb - 1));
    uint32_t inf = (((1u << eb) - 1u) << mb);
    if (e == 0x7ff) {
        if (m != 0)
            return sign | nan;
        return sign | ((satfinite || nan_all_ones) ? maxfin : inf);
    }
    if (e == 0 && m == 0)
        return sign;
    /* value = 1.m * 2^(e-1023) (doubles' subnormals are far below any target) */
    int te = e - 1023 + bias; /* target biased exponent if normal */
    uint64_t sig = m | (1ull << 52);
    int shift = 52 - mb;
    if (te < 1) { /* subnormal in the target (or underflow) */
        shift += 1 - te;
        te = 0;
    }
    if (shift > 53) /* below half the smallest subnormal: rounds to zero */
        return sign;
    uint64_t q = sig >> shift;
    uint64_t rem = sig & ((1ull << shift) - 1);
    uint64_t half = 1ull << (shift - 1);
    if (rem > half || (rem == half && (q & 1)))
        q++;
    /* q is the significand with the hidden bit at position mb (normal) or
     * the subnormal mantissa; a carry out of it bumps the exponent (for a
     * subnormal, q == 1 << mb already encodes the smallest normal). */
    uint32_t out;
    if (te == 0) {
        out = (uint32_t)q;
    } else {
        if (q >> (mb + 1)) { q >>= 1; te++; }
        out = ((uint32_t)te << mb) | ((uint32_t)q & ((1u << mb) - 1u));
    }
    if (out > maxfin) /* encodings of positive values are ordered like the values */
        return sign | ((satfinite || nan_all_ones) ? maxfin : inf);
    return sign | out;
}

SYMM__C_FN uint32_t symm__c_f32_to_bf16(float f) {
    uint32_t u = SYMM__C_F2U(f);
    /* NaN test on u << 1 (the sign shifted out): clang turns the masked form
     * into llvm.fabs, which libNVVM (CuTe DSL's backend) rejects in bitcode */
    if ((u << 1) > 0xff000000u)
        return ((u >> 16) | 0x40u) & 0xffffu; /* quiet NaN, sign kept */
    u += 0x7fffu + ((u >> 16) & 1u);
    return u >> 16;
}

SYMM__C_FN uint32_t symm__c_f32_to_f16(float f) {
#if SYMM_DEVICE_CODE
    return symm__cvt_f16_f32(f);
#else
    return symm__c_f64_to_small((double)f, 5, 10, 0, 0);
#endif
}

SYMM__C_FN uint32_t symm__c_f64_to_f16(double d) { return symm__c_f64_to_small(d, 5, 10, 0, 0); }

/* ---- fp8 ---------------------------------------------------------------------- */

/* sm_89+ converts fp8 in hardware (same rounding: RN, satfinite). The value
 * goes into both halves of the pair so the result does not depend on which
 * half PTX maps to which byte. Elsewhere (sm_80, the host test) the software
 * forms above, kept out of line on the device so kernels stay small. */
#if SYMM_DEVICE_CODE && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#  define SYMM__C_HW_FP8 1
SYMM__C_FN uint32_t symm__c_e4m3_to_f16(uint32_t v) {
    return symm__cvt_f16x2_e4m3x2((unsigned short)((v & 0xffu) * 0x101u)) & 0xffffu;
}
SYMM__C_FN uint32_t symm__c_f32_to_e4m3(float f) {
    return symm__cvt_e4m3x2_f32(f) & 0xffu;
}
SYMM__C_FN uint32_t symm__c_f32_to_e5m2(float f) {
    return symm__cvt_e5m2x2_f32(f) & 0xffu;
}
#else
#  define SYMM__C_HW_FP8 0
#  if SYMM_DEVICE_CODE
#    define SYMM__C_SLOW_FN SYMM__NOINLINE
#  else
#    define SYMM__C_SLOW_FN static inline
#  endif
SYMM__C_SLOW_FN uint32_t symm__c_e4m3_to_f16(uint32_t v) {
    return symm__c_f64_to_small(symm__c_small_to_f64(v & 0xffu, 4, 3, 1), 5, 10, 0, 0);
}
SYMM__C_SLOW_FN uint32_t symm__c_f32_to_e4m3(float f) { return symm__c_f64_to_small((double)f, 4, 3, 1, 1); }
SYMM__C_SLOW_FN uint32_t symm__c_f32_to_e5m2(float f) { return symm__c_f64_to_small((double)f, 5, 2, 1, 0); }
#endif
/* e5m2 is the top byte of a binary16: widening is a shift. */
SYMM__C_FN uint32_t symm__c_e5m2_to_f16(uint32_t v) { return (v & 0xffu) << 8; }
SYMM__C_FN float symm__c_e4m3_to_f32(uint32_t v) { return symm__c_f16_to_f32(symm__c_e4m3_to_f16(v)); }
SYMM__C_FN float symm__c_e5m2_to_f32(uint32_t v) { return symm__c_f16_to_f32(symm__c_e5m2_to_f16(v)); }

/* ---- lane-wise operations ---------------------------------------------------- */

SYMM__C_FN float symm__c_opf(float a, float b, int op) {
    switch (op) {
    case SYMM_OP_MIN: return SYMM__C_FMINF(a, b);
    case SYMM_OP_MAX: return SYMM__C_FMAXF(a, b);
    default: return a + b;
    }
}

SYMM__C_FN double symm__c_opd(double a, double b, int op) {
    switch (op) {
    case SYMM_OP_MIN: return SYMM__C_FMIN(a, b);
    case SYMM_OP_MAX: return SYMM__C_FMAX(a, b);
    default: return a + b;
    }
}

/* Integers: sums wrap (done unsigned), min/max compare in the signed or
 * unsigned type, bitwise ops are the same for both. */
#define SYMM__C_DEFINE_IOP(S, T, UT)                                                        \
    SYMM__C_FN UT symm__c_op_##S(UT a, UT b, int op) {                                      \
        switch (op) {                                                                       \
        case SYMM_OP_MIN: return ((T)a < (T)b) ? a : b;                                     \
        case SYMM_OP_MAX: return ((T)a > (T)b) ? a : b;                                     \
        case SYMM_OP_BAND: return a & b;                                                    \
        case SYMM_OP_BOR: return a | b;                                                     \
        case SYMM_OP_BXOR: return a ^ b;                                                    \
        default: return (UT)(a + b);                                                        \
        }                                                                                   \
    }
SYMM__C_DEFINE_IOP(i32, int32_t, uint32_t)
SYMM__C_DEFINE_IOP(u32, uint32_t, uint32_t)
SYMM__C_DEFINE_IOP(i64, int64_t, uint64_t)
SYMM__C_DEFINE_IOP(u64, uint64_t, uint64_t)
#undef SYMM__C_DEFINE_IOP

/* ---- accumulators per reduction type ------------------------------------------ */

/* Word types that reduce in themselves: the accumulator is the word. */
typedef struct { uint64_t w; } symm__c_acc_w;
typedef symm__c_acc_w symm__c_acc_i32;
typedef symm__c_acc_w symm__c_acc_u32;
typedef symm__c_acc_w symm__c_acc_i64;
typedef symm__c_acc_w symm__c_acc_u64;
typedef struct { double v; } symm__c_acc_f64;
typedef struct { float v[2]; } symm__c_acc_f32;
typedef struct { float v[4]; } symm__c_acc_f16;
typedef symm__c_acc_f16 symm__c_acc_bf16;
typedef struct { float v[8]; } symm__c_acc_e4m3;
typedef symm__c_acc_e4m3 symm__c_acc_e5m2;

#define SYMM__C_DEFINE_ACC_I2(S)                                                            \
    SYMM__C_FN void symm__c_first_##S(symm__c_acc_##S *a, uint64_t w) { a->w = w; }         \
    SYMM__C_FN void symm__c_next_##S(symm__c_acc_##S *a, uint64_t w, int op) {              \
        uint32_t lo = symm__c_op_##S((uint32_t)a->w, (uint32_t)w, op);                      \
        uint32_t hi = symm__c_op_##S((uint32_t)(a->w >> 32), (uint32_t)(w >> 32), op);      \
        a->w = ((uint64_t)hi << 32) | lo;                                                   \
    }                                                                                       \
    SYMM__C_FN uint64_t symm__c_last_##S(const symm__c_acc_##S *a) { return a->w; }
SYMM__C_DEFINE_ACC_I2(i32)
SYMM__C_DEFINE_ACC_I2(u32)
#undef SYMM__C_DEFINE_ACC_I2

#define SYMM__C_DEFINE_ACC_I1(S)                                                            \
    SYMM__C_FN void symm__c_first_##S(symm__c_acc_##S *a, uint64_t w) { a->w = w; }         \
    SYMM__C_FN void symm__c_next_##S(symm__c_acc_##S *a, uint64_t w, int op) {              \
        a->w = symm__c_op_##S(a->w, w, op);                                                 \
    }                                                                                       \
    SYMM__C_FN uint64_t symm__c_last_##S(const symm__c_acc_##S *a) { return a->w; }
SYMM__C_DEFINE_ACC_I1(i64)
SYMM__C_DEFINE_ACC_I1(u64)
#undef SYMM__C_DEFINE_ACC_I1

SYMM__C_FN void symm__c_first_f64(symm__c_acc_f64 *a, uint64_t w) { a->v = SYMM__C_U2D(w); }
SYMM__C_FN void symm__c_next_f64(symm__c_acc_f64 *a, uint64_t w, int op) {
    a->v = symm__c_opd(a->v, SYMM__C_U2D(w), op);
}
SYMM__C_FN uint64_t symm__c_last_f64(const symm__c_acc_f64 *a) { return SYMM__C_D2U(a->v); }

SYMM__C_FN void symm__c_first_f32(symm__c_acc_f32 *a, uint64_t w) {
    a->v[0] = SYMM__C_U2F((uint32_t)w);
    a->v[1] = SYMM__C_U2F((uint32_t)(w >> 32));
}
SYMM__C_FN void symm__c_next_f32(symm__c_acc_f32 *a, uint64_t w, int op) {
    a->v[0] = symm__c_opf(a->v[0], SYMM__C_U2F((uint32_t)w), op);
    a->v[1] = symm__c_opf(a->v[1], SYMM__C_U2F((uint32_t)(w >> 32)), op);
}
SYMM__C_FN uint64_t symm__c_last_f32(const symm__c_acc_f32 *a) {
    return ((uint64_t)SYMM__C_F2U(a->v[1]) << 32) | SYMM__C_F2U(a->v[0]);
}

/* 4 lanes of 16 bits, widened to f32 by `TOF`, narrowed by `FROMF`. */
#define SYMM__C_DEFINE_ACC_H4(S, TOF, FROMF)                                                \
    SYMM__C_FN void symm__c_first_##S(symm__c_acc_##S *a, uint64_t w) {                     \
        for (int i = 0; i < 4; i++) a->v[i] = TOF((uint32_t)(w >> (16 * i)) & 0xffffu);     \
    }                                                                                       \
    SYMM__C_FN void symm__c_next_##S(symm__c_acc_##S *a, uint64_t w, int op) {              \
        for (int i = 0; i < 4; i++)                                                         \
            a->v[i] = symm__c_opf(a->v[i], TOF((uint32_t)(w >> (16 * i)) & 0xffffu), op);   \
    }                                                                                       \
    SYMM__C_FN uint64_t symm__c_last_##S(const symm__c_acc_##S *a) {                        \
        uint64_t w = 0;                                                                     \
        for (int i = 0; i < 4; i++) w |= (uint64_t)(FROMF(a->v[i]) & 0xffffu) << (16 * i);  \
        return w;                                                                           \
    }
SYMM__C_DEFINE_ACC_H4(f16, symm__c_f16_to_f32, symm__c_f32_to_f16)
SYMM__C_DEFINE_ACC_H4(bf16, symm__c_bf16_to_f32, symm__c_f32_to_bf16)
#undef SYMM__C_DEFINE_ACC_H4

/* 8 lanes of fp8, accumulated in f32. */
#define SYMM__C_DEFINE_ACC_Q8(S, TOF, FROMF)                                                \
    SYMM__C_FN void symm__c_first_##S(symm__c_acc_##S *a, uint64_t w) {                     \
        for (int i = 0; i < 8; i++) a->v[i] = TOF((uint32_t)(w >> (8 * i)) & 0xffu);        \
    }                                                                                       \
    SYMM__C_FN void symm__c_next_##S(symm__c_acc_##S *a, uint64_t w, int op) {              \
        for (int i = 0; i < 8; i++)                                                         \
            a->v[i] = symm__c_opf(a->v[i], TOF((uint32_t)(w >> (8 * i)) & 0xffu), op);      \
    }                                                                                       \
    SYMM__C_FN uint64_t symm__c_last_##S(const symm__c_acc_##S *a) {                        \
        uint64_t w = 0;                                                                     \
        for (int i = 0; i < 8; i++) w |= (uint64_t)(FROMF(a->v[i]) & 0xffu) << (8 * i);     \
        return w;                                                                           \
    }
SYMM__C_DEFINE_ACC_Q8(e4m3, symm__c_e4m3_to_f32, symm__c_f32_to_e4m3)
SYMM__C_DEFINE_ACC_Q8(e5m2, symm__c_e5m2_to_f32, symm__c_f32_to_e5m2)
#undef SYMM__C_DEFINE_ACC_Q8

/* 8 lanes of fp8, accumulated in f16 (lanes held as f16 bits). Each step is
 * one correctly rounded f16 operation: PTX f16 arithmetic on the device; on
 * the host the operation in double (exact for two f16 values), rounded once. */
SYMM__C_FN uint32_t symm__c_oph(uint32_t a, uint32_t b, int op) {
#if SYMM_DEVICE_CODE
    unsigned short x = (unsigned short)a, y = (unsigned short)b, r;
    switch (op) {
    case SYMM_OP_MIN: r = symm__min_f16(x, y); break;
    case SYMM_OP_MAX: r = symm__max_f16(x, y); break;
    default: r = symm__add_f16(x, y); break;
    }
    return r;
#else
    double x = symm__c_small_to_f64(a, 5, 10, 0), y = symm__c_small_to_f64(b, 5, 10, 0);
    return symm__c_f64_to_small(symm__c_opd(x, y, op), 5, 10, 0, 0);
#endif
}
typedef struct { uint32_t h[8]; } symm__c_acc_e4m3h;
typedef symm__c_acc_e4m3h symm__c_acc_e5m2h;
#define SYMM__C_DEFINE_ACC_Q8H(S, TOH, FROMF)                                               \
    SYMM__C_FN void symm__c_first_##S(symm__c_acc_##S *a, uint64_t w) {                     \
        for (int i = 0; i < 8; i++) a->h[i] = TOH((uint32_t)(w >> (8 * i)) & 0xffu);        \
    }                                                                                       \
    SYMM__C_FN void symm__c_next_##S(symm__c_acc_##S *a, uint64_t w, int op) {              \
        for (int i = 0; i < 8; i++)                                                         \
            a->h[i] = symm__c_oph(a->h[i], TOH((uint32_t)(w >> (8 * i)) & 0xffu), op);      \
    }                                                                                       \
    SYMM__C_FN uint64_t symm__c_last_##S(const symm__c_acc_##S *a) {                        \
        uint64_t w = 0;                                                                     \
        for (int i = 0; i < 8; i++)                                                         \
            w |= (uint64_t)(FROMF(symm__c_f16_to_f32(a->h[i])) & 0xffu) << (8 * i);         \
        return w;                                                                           \
    }
SYMM__C_DEFINE_ACC_Q8H(e4m3h, symm__c_e4m3_to_f16, symm__c_f32_to_e4m3)
SYMM__C_DEFINE_ACC_Q8H(e5m2h, symm__c_e5m2_to_f16, symm__c_f32_to_e5m2)
#undef SYMM__C_DEFINE_ACC_Q8H

/* Every reduction type: X(suffix). The dispatchers below map (dtype, acc) to
 * one of these. */
#define SYMM__C_FOR_EACH_RED(X)                                                             \
    X(f32) X(f64) X(f16) X(bf16) X(i32) X(u32) X(i64) X(u64) X(e4m3) X(e5m2) X(e4m3h) X(e5m2h)
/* The same with one more argument: X(suffix, A). */
#define SYMM__C_FOR_EACH_RED_WITH(X, A)                                                     \
    X(f32, A) X(f64, A) X(f16, A) X(bf16, A) X(i32, A) X(u32, A) X(i64, A) X(u64, A)         \
    X(e4m3, A) X(e5m2, A) X(e4m3h, A) X(e5m2h, A)

#endif /* SYMM_DEVICE_COLL_REDUCE_H */
