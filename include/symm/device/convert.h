/*
 * device/convert.h - bit casts and element conversions between the narrow
 * formats (f16, bf16, fp8 e4m3/e5m2) and f32/f64, correctly rounded (round
 * to nearest even; fp8 saturating). Used by the collectives' reductions
 * (coll_reduce.h) and the MoE kernels (src/moe).
 *
 * Plain C: nvcc, clang-nvptx and (for the conversion unit test) a host C
 * compiler all take it; the device picks PTX conversions where PTX has a
 * correctly rounded one, the host the software form that gives the same bits.
 */
#ifndef SYMM_DEVICE_CONVERT_H
#define SYMM_DEVICE_CONVERT_H

#include <stdint.h>
#include "symm/device/defs.h"
#if SYMM_DEVICE_CODE
#  include "symm/device/impl_ptx.h" /* the conversions */
#endif

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

#endif /* SYMM_DEVICE_CONVERT_H */
