/*
 * device/coll_reduce.h - the reduction of 8-byte words, the arithmetic under
 * every reducing collective (element conversions: convert.h).
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
#include "symm/device/convert.h" /* bit casts and element conversions (SYMM__C_FN) */
#if SYMM_DEVICE_CODE
#  include "symm/device/impl_ptx.h" /* f16 arithmetic */
#endif
#include "symm/symm_coll_types.h"
#include "symm/contract/coll_kinds.h" /* SYMM__C_RED_*, symm__c_red_kind, symm__c_dtype_size */

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
