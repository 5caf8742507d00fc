/*
 * moe_layout.c - symm_moe_layout (symm_moe.h): DeepEP's dispatch layout
 * without a handle. Every argument is checked here, before the one launch
 * (moe_k_layout.cu).
 */
#include <stdint.h>
#include <string.h>

#include "symm/symm_moe.h"
#include "core/log.h"
#include "moe/moe_launch.h" /* SYMM__MOE_MAX_PES */
#include "moe/moe_layout.h"

#define BAD(...) symm__error(SYMM_ERR_INVALID_ARG, __VA_ARGS__)

symm_status_t symm__moe_layout_check(const void *indices, symm_dtype_t indices_dtype, size_t num_tokens,
                                     size_t experts_per_token, size_t num_experts, int num_ranks,
                                     int32_t *num_tokens_per_rank, int32_t *num_tokens_per_expert,
                                     uint8_t *is_token_in_rank, symm__moe_layout_kargs_t *a) {
    const char *call = "symm_moe_layout";
    size_t esz;
    uint32_t kind;
    switch (indices_dtype) {
    case SYMM_DTYPE_U32: kind = 0; esz = 4; break;
    case SYMM_DTYPE_I32: kind = 1; esz = 4; break;
    case SYMM_DTYPE_I64: kind = 2; esz = 8; break;
    default:
        return BAD("%s: indices dtype %d: expected int32 (%d), uint32 (%d) or int64 (%d)", call, (int)indices_dtype,
                   SYMM_DTYPE_I32, SYMM_DTYPE_U32, SYMM_DTYPE_I64);
    }
    if (num_ranks < 1 || num_ranks > SYMM__MOE_MAX_PES)
        return BAD("%s: num_ranks %d is outside 1..%d", call, num_ranks, SYMM__MOE_MAX_PES);
    if (num_experts < 1 || num_experts % (size_t)num_ranks)
        return BAD("%s: num_experts %zu is not a positive multiple of num_ranks %d", call, num_experts, num_ranks);
    if (num_experts > INT32_MAX)
        return BAD("%s: num_experts %zu is above %d", call, num_experts, INT32_MAX);
    /* a count is at most num_tokens (per rank) or num_tokens x experts_per_token (per expert) */
    if (num_tokens > INT32_MAX || experts_per_token > INT32_MAX ||
        (experts_per_token > 0 && num_tokens > (size_t)INT32_MAX / experts_per_token))
        return BAD("%s: %zu tokens of %zu experts each: the counts would not fit int32", call, num_tokens,
                   experts_per_token);
    if (num_tokens_per_rank == NULL || num_tokens_per_expert == NULL)
        return BAD("%s: num_tokens_per_%s is NULL", call, num_tokens_per_rank == NULL ? "rank" : "expert");
    if (num_tokens > 0 && is_token_in_rank == NULL)
        return BAD("%s: is_token_in_rank is NULL for %zu tokens", call, num_tokens);
    if (num_tokens > 0 && experts_per_token > 0) {
        if (indices == NULL)
            return BAD("%s: indices is NULL for %zu tokens", call, num_tokens);
        if ((uintptr_t)indices % esz)
            return BAD("%s: indices %p is not aligned to its %zu-byte elements", call, indices, esz);
    }
    memset(a, 0, sizeof(*a));
    a->idx = indices;
    a->tokens = num_tokens;
    a->per_rank = num_tokens_per_rank;
    a->per_expert = num_tokens_per_expert;
    a->in_rank = is_token_in_rank;
    a->kind = kind;
    a->topk = (uint32_t)experts_per_token;
    a->experts = (uint32_t)num_experts;
    a->n = (uint32_t)num_ranks;
    a->local = (uint32_t)(num_experts / (size_t)num_ranks);
    a->count_blocks = (uint32_t)((num_experts + SYMM__MOE_LAYOUT_CHUNK - 1) / SYMM__MOE_LAYOUT_CHUNK);
    a->chunk = (uint32_t)((num_experts + a->count_blocks - 1) / a->count_blocks);
    return SYMM_SUCCESS;
}

symm_status_t symm_moe_layout(const void *indices, symm_dtype_t indices_dtype, size_t num_tokens,
                              size_t experts_per_token, size_t num_experts, int num_ranks,
                              int32_t *num_tokens_per_rank, int32_t *num_tokens_per_expert,
                              uint8_t *is_token_in_rank, symm_stream_t stream) {
    symm__moe_layout_kargs_t a;
    symm_status_t st = symm__moe_layout_check(indices, indices_dtype, num_tokens, experts_per_token, num_experts,
                                              num_ranks, num_tokens_per_rank, num_tokens_per_expert,
                                              is_token_in_rank, &a);
    if (st != SYMM_SUCCESS)
        return st;
    return symm__moe_layout_launch(&a, stream);
}
