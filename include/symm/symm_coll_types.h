/*
 * symm_coll_types.h - the element types, reduction operations and algorithms
 * of the collectives, and their limits: what the host API (symm_coll.h), the
 * device API (symm_device_coll.h), the bitcode and the Python package
 * (python/symm/_consts.py, generated from this header) share. Plain C, fixed
 * values: the device calls take them as int so the bitcode ABI stays plain.
 */
#ifndef SYMM_COLL_TYPES_H
#define SYMM_COLL_TYPES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element type of a collective's buffers. Data-movement collectives
 * (all-gather, all-to-all, broadcast) accept every type; reductions accept
 * the pairs listed at symm_redop_t. */
typedef enum symm_dtype {
    SYMM_DTYPE_F32      = 0,
    SYMM_DTYPE_F16      = 1,  /* IEEE binary16 */
    SYMM_DTYPE_BF16     = 2,
    SYMM_DTYPE_F64      = 3,
    SYMM_DTYPE_I32      = 4,
    SYMM_DTYPE_U32      = 5,
    SYMM_DTYPE_I64      = 6,
    SYMM_DTYPE_U64      = 7,
    SYMM_DTYPE_FP8_E4M3 = 8,  /* OCP fp8 e4m3 (no infinities, NaN = S.1111.111) */
    SYMM_DTYPE_FP8_E5M2 = 9,  /* OCP fp8 e5m2 (the top byte of a binary16) */
    SYMM_DTYPE_U8       = 10, /* bytes: data movement only */
    SYMM_DTYPE_COUNT    = 11,
    /* Accumulator choice for symm_all_reduce_ex / symm_reduce_scatter_ex:
     * the type's own default (f32 for f16, bf16 and fp8; the type itself
     * otherwise). */
    SYMM_DTYPE_DEFAULT  = -1
} symm_dtype_t;

/*
 * Reduction operation. Supported pairs:
 *   SUM, MIN, MAX    every type but U8. f16 and bf16 accumulate in f32; fp8
 *                    accumulates in f32 (default) or f16 (acc = SYMM_DTYPE_F16),
 *                    the choices of multimem's .acc::f32 / .acc::f16. Other
 *                    types accumulate in themselves (integer sums wrap).
 *                    MIN/MAX of floats follow PTX min/max: a NaN operand
 *                    yields the other operand.
 *   BAND, BOR, BXOR  the integer types I32, U32, I64, U64 only.
 * Any other pair is SYMM_ERR_UNSUPPORTED.
 */
typedef enum symm_redop {
    SYMM_OP_SUM   = 0,
    SYMM_OP_MIN   = 1,
    SYMM_OP_MAX   = 2,
    SYMM_OP_BAND  = 3,
    SYMM_OP_BOR   = 4,
    SYMM_OP_BXOR  = 5,
    SYMM_OP_COUNT = 6
} symm_redop_t;

/*
 * Algorithms (SYMM_COLL_ALGO forces one by name; the device "_ex" calls take
 * the value). AUTO picks by size, team size and whether the buffers are
 * symmetric.
 *   PACKET    one-shot with the flag in the data: 16-byte {data, flag, data,
 *             flag} stores into each peer's scratch, polled by the reader; no
 *             separate signal, no barrier. Smallest sizes.
 *   ONESHOT   each PE pushes its data into every peer's scratch, signals once
 *             per peer, and reduces locally.
 *   TWOSHOT   reduce-scatter then all-gather straight between the symmetric
 *             buffers, with a start and an end handshake (other buffers are
 *             staged through symmetric scratch). Large sizes.
 *   MULTIMEM  NVLS multimem.ld_reduce / multimem.st through a multicast
 *             address; only when one exists (never yet: it falls back to
 *             TWOSHOT, its unicast twin, with identical results).
 *   PUSH      (stream all-reduce and reduce-scatter) two-shot in which every
 *             byte crosses NVLink as a store: each PE stores the peers'
 *             pieces into their scratch in pipelined steps, the owner
 *             reduces, and the all-reduce stores the result into every
 *             peer's recv. Largest sizes. Device calls fall back to TWOSHOT.
 * For the data-movement collectives PACKET is the flag-in-data form and
 * every other choice means the direct form.
 */
typedef enum symm_coll_algo {
    SYMM_COLL_ALGO_AUTO     = 0,
    SYMM_COLL_ALGO_PACKET   = 1,
    SYMM_COLL_ALGO_ONESHOT  = 2,
    SYMM_COLL_ALGO_TWOSHOT  = 3,
    SYMM_COLL_ALGO_MULTIMEM = 4,
    SYMM_COLL_ALGO_PUSH     = 5,
    SYMM_COLL_ALGO_COUNT    = 6
} symm_coll_algo_t;

/* Limits of the collectives: PEs in a team, and blocks of one grid-scope
 * call (each block has its own handshake slots). 256 leaves room for one
 * block per SM of any current GPU (132 on H100/H200) in the stream kernels,
 * which may use up to SYMM_COLL_MAX_BLOCKS - 1 (the last slot is the grid
 * barrier's). */
#define SYMM_COLL_MAX_PES    64
#define SYMM_COLL_MAX_BLOCKS 256

#ifdef __cplusplus
}
#endif

#endif /* SYMM_COLL_TYPES_H */
