/*
 * contract/coll_kinds.h - which (dtype, op, accumulator) triples reduce and
 * the size of an element: internal, shared by the host side of the
 * collectives (src/coll validates with it) and the device code
 * (device/coll_reduce.h, coll_api.h), which must agree.
 */
#ifndef SYMM_CONTRACT_COLL_KINDS_H
#define SYMM_CONTRACT_COLL_KINDS_H

#include <stdint.h>
#include "symm/device/defs.h"
#include "symm/symm_coll_types.h"

#if SYMM_DEVICE_CODE
#  define SYMM__K_FN SYMM__DEVICE_INTERNAL
#else
#  define SYMM__K_FN static inline
#endif

/* Reduction kinds, in the order of coll_reduce.h's SYMM__C_FOR_EACH_RED; -1 = unsupported. */
enum {
    SYMM__C_RED_f32 = 0, SYMM__C_RED_f64, SYMM__C_RED_f16, SYMM__C_RED_bf16,
    SYMM__C_RED_i32, SYMM__C_RED_u32, SYMM__C_RED_i64, SYMM__C_RED_u64,
    SYMM__C_RED_e4m3, SYMM__C_RED_e5m2, SYMM__C_RED_e4m3h, SYMM__C_RED_e5m2h
};

/* The reduction kind for (dtype, op, acc), or -1 if the triple is not
 * supported. Host and device agree on it (the host validates with it). */
SYMM__K_FN int symm__c_red_kind(int dtype, int op, int acc) {
    int bitwise = (op == SYMM_OP_BAND || op == SYMM_OP_BOR || op == SYMM_OP_BXOR);
    if (op < 0 || op >= SYMM_OP_COUNT)
        return -1;
    switch (dtype) {
    case SYMM_DTYPE_F32:
        return (bitwise || (acc != SYMM_DTYPE_DEFAULT && acc != SYMM_DTYPE_F32)) ? -1 : SYMM__C_RED_f32;
    case SYMM_DTYPE_F64:
        return (bitwise || (acc != SYMM_DTYPE_DEFAULT && acc != SYMM_DTYPE_F64)) ? -1 : SYMM__C_RED_f64;
    case SYMM_DTYPE_F16:
        return (bitwise || (acc != SYMM_DTYPE_DEFAULT && acc != SYMM_DTYPE_F32)) ? -1 : SYMM__C_RED_f16;
    case SYMM_DTYPE_BF16:
        return (bitwise || (acc != SYMM_DTYPE_DEFAULT && acc != SYMM_DTYPE_F32)) ? -1 : SYMM__C_RED_bf16;
    case SYMM_DTYPE_I32: return (acc != SYMM_DTYPE_DEFAULT && acc != dtype) ? -1 : SYMM__C_RED_i32;
    case SYMM_DTYPE_U32: return (acc != SYMM_DTYPE_DEFAULT && acc != dtype) ? -1 : SYMM__C_RED_u32;
    case SYMM_DTYPE_I64: return (acc != SYMM_DTYPE_DEFAULT && acc != dtype) ? -1 : SYMM__C_RED_i64;
    case SYMM_DTYPE_U64: return (acc != SYMM_DTYPE_DEFAULT && acc != dtype) ? -1 : SYMM__C_RED_u64;
    case SYMM_DTYPE_FP8_E4M3:
        if (bitwise) return -1;
        if (acc == SYMM_DTYPE_DEFAULT || acc == SYMM_DTYPE_F32) return SYMM__C_RED_e4m3;
        return acc == SYMM_DTYPE_F16 ? SYMM__C_RED_e4m3h : -1;
    case SYMM_DTYPE_FP8_E5M2:
        if (bitwise) return -1;
        if (acc == SYMM_DTYPE_DEFAULT || acc == SYMM_DTYPE_F32) return SYMM__C_RED_e5m2;
        return acc == SYMM_DTYPE_F16 ? SYMM__C_RED_e5m2h : -1;
    default: return -1;
    }
}

/* Bytes of one element of `dtype`; 0 for an unknown type. */
SYMM__K_FN uint32_t symm__c_dtype_size(int dtype) {
    switch (dtype) {
    case SYMM_DTYPE_F32: case SYMM_DTYPE_I32: case SYMM_DTYPE_U32: return 4;
    case SYMM_DTYPE_F16: case SYMM_DTYPE_BF16: return 2;
    case SYMM_DTYPE_F64: case SYMM_DTYPE_I64: case SYMM_DTYPE_U64: return 8;
    case SYMM_DTYPE_FP8_E4M3: case SYMM_DTYPE_FP8_E5M2: case SYMM_DTYPE_U8: return 1;
    default: return 0;
    }
}

#endif /* SYMM_CONTRACT_COLL_KINDS_H */
