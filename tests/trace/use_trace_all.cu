/*
 * use_trace_all.cu - every device call (use_all.cu's), the device
 * collectives and the trace regions, for check_ptx_off.cmake: not a test to
 * run, a source to compile to PTX with and without the trace.
 */
#include "../device/use_all.cu"

USE_FN symm_use_trace(const symm_ctx_t *ctx, int id) {
    symm_trace_begin(ctx, id);
    symm_trace_end(ctx, id);
}

/* One constant type and operation: the reduction's switch folds to one
 * case, which keeps this compile short; every hook of the collectives is
 * still in it. */
USE_FN symm_use_coll(const symm_ctx_t *ctx, void *d, const void *s, size_t n, int b, int nb, const uint64_t *c) {
    const int dtype = SYMM_DTYPE_F32, op = SYMM_OP_SUM;
    symm_all_reduce_block(ctx, d, s, n, dtype, op);
    symm_all_reduce_ex_grid(ctx, d, s, n, dtype, op, 0, 0, b, nb);
    symm_reduce_scatter_block(ctx, d, s, n, dtype, op);
    symm_reduce_scatter_ex_grid(ctx, d, s, n, dtype, op, 0, 0, b, nb);
    symm_all_gather_grid(ctx, d, s, n, dtype, b, nb);
    symm_all_to_all_block(ctx, d, s, n, dtype);
    symm_all_to_allv_grid(ctx, d, s, c, c, c, c, dtype, b, nb);
    symm_broadcast_grid(ctx, d, s, n, dtype, 0, b, nb);
    symm_coll_barrier_block(ctx);
    symm_coll_barrier_grid(ctx, b, nb);
}
