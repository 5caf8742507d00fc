/*
 * moe_layout.h - symm_moe_layout (symm_moe.h): its checks (moe_layout.c,
 * plain C, no CUDA) and its kernel (moe_k_layout.cu).
 */
#ifndef SYMM_MOE_LAYOUT_H
#define SYMM_MOE_LAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include "symm/symm_moe.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Threads of a layout block, and the most experts one block counts (shared int32 counters). */
#define SYMM__MOE_LAYOUT_THREADS 512
#define SYMM__MOE_LAYOUT_CHUNK 4096

/*
 * The kernel's arguments. Block b < count_blocks counts the experts
 * [b * chunk, (b + 1) * chunk) over every token; block 0 also forms every
 * token's ranks: it writes is_token_in_rank and counts the tokens per rank.
 */
typedef struct symm__moe_layout_kargs {
    const void *idx;
    uint64_t tokens;
    int32_t *per_rank, *per_expert;
    uint8_t *in_rank;
    uint32_t kind; /* 0: uint32, 1: int32, 2: int64 */
    uint32_t topk, experts, local, n;
    uint32_t chunk, count_blocks;
} symm__moe_layout_kargs_t;

/* symm_moe_layout's arguments checked (every error names the argument and
 * its value) and turned into a kernel's. Errors: SYMM_ERR_INVALID_ARG. */
symm_status_t symm__moe_layout_check(const void *indices, symm_dtype_t indices_dtype, size_t num_tokens,
                                     size_t experts_per_token, size_t num_experts, int num_ranks,
                                     int32_t *num_tokens_per_rank, int32_t *num_tokens_per_expert,
                                     uint8_t *is_token_in_rank, symm__moe_layout_kargs_t *a);

/* Enqueue the layout kernel on `stream`. Errors: SYMM_ERR_CUDA. */
symm_status_t symm__moe_layout_launch(const symm__moe_layout_kargs_t *a, symm_stream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* SYMM_MOE_LAYOUT_H */
