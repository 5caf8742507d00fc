/*
 * moe_recv_copy.h - symm_moe_ht_recv_copy (symm_moe.h): the kernel's
 * arguments (filled and checked by moe_host.c) and its launch
 * (moe_k_recv_copy.cu).
 */
#ifndef SYMM_MOE_RECV_COPY_H
#define SYMM_MOE_RECV_COPY_H

#include <stdint.h>
#include "symm/symm_moe.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct symm__moe_recv_copy_kargs {
    const int32_t *src;        /* the handle's [cap][2]: source PE, token */
    const int32_t *idx;        /* [cap][k] */
    const float *w;            /* [cap][k] */
    const int32_t *num_recv;   /* [1] */
    const int32_t *per_expert; /* [L] */
    int32_t *o_src;
    void *o_idx;
    float *o_w;
    int32_t *o_counts;
    uint64_t rows;
    uint32_t k, local, idx64;
} symm__moe_recv_copy_kargs_t;

/* Enqueue the copy kernel on `stream`. Errors: SYMM_ERR_CUDA. */
symm_status_t symm__moe_recv_copy_launch(const symm__moe_recv_copy_kargs_t *a, symm_stream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* SYMM_MOE_RECV_COPY_H */
