/*
 * moe_ll_launch.cu - which low-latency kernel a call runs, with what shared
 * memory, launched plainly or with programmatic dependent launch.
 */
#include "moe/moe_ll.cuh"

/* Dynamic shared memory of each kernel for a grid of `blocks`. */
extern "C" size_t symm__moe_ll_smem(const symm__moe_kargs_t *a, int blocks) {
    if (a->kernel == SYMM__MK_LL_DISPATCH) {
        const uint64_t gw = (uint64_t)(blocks > 0 ? blocks : 1) * SYMM__MOE_WARPS;
        return (size_t)(SYMM__MOE_WARPS * ((a->experts + gw - 1) / gw) * sizeof(uint32_t));
    }
    return (size_t)(a->local + 1) * sizeof(uint32_t);
}

symm_status_t symm__moe_launch_ll(const symm__moe_kargs_t *a, cudaStream_t s) {
    const int dispatch = a->kernel == SYMM__MK_LL_DISPATCH;
    const int small = dispatch && a->ll_small && (a->probe == SYMM__MOE_PROBE_NONE || a->probe == SYMM__MOE_PROBE_STAMPS);
    const int big = (uint64_t)a->num_tokens * a->topk >= LL_POST_ROUTES;
    void (*const kd)(symm__moe_kargs_t) =
        small ? symm__k_ll_dispatch_small : big ? symm__k_ll_dispatch_big : symm__k_ll_dispatch;
    void (*const kc)(symm__moe_kargs_t) =
        a->ll_part    ? symm__k_ll_combine_part
        : a->ll_small ? symm__k_ll_combine_small
        : big         ? symm__k_ll_combine_big
                      : symm__k_ll_combine;
    const size_t smem = small ? 0 : dispatch || (a->flags & SYMM_MOE_SEND) ? symm__moe_ll_smem(a, a->nblocks) : 0;
    if (a->pdl)
        return symm__moe_launch_pdl(dispatch ? (const void *)kd : (const void *)kc, a, smem, s,
                                    dispatch ? "dispatch" : "combine");
    if (dispatch) {
        kd<<<a->nblocks, SYMM__MOE_THREADS, smem, s>>>(*a);
    } else {
        kc<<<a->nblocks, SYMM__MOE_THREADS, smem, s>>>(*a);
    }
    return symm__moe_launched(dispatch ? "the MoE dispatch kernel" : "the MoE combine kernel");
}
