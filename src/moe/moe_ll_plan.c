/*
 * moe_ll_plan.c - the small low-latency kernels' plan of a call (symm__moe_llplan_t), worked
 * out on the host as the call is launched: the same arithmetic the kernels' prologues did in
 * every block before their first loads (src/moe/moe_k_ll_dispatch_small.cu, ll_small_unit and
 * ll_small_dispatch; src/moe/moe_k_ll_combine.cu, ll_combine_pro), so that each block is left
 * with a few multiplies of its index. Pure C, no CUDA: tests/moe/test_moe_args.c checks it.
 */
#include <string.h>

#include "moe/moe.h"

static uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }

/* ceil(log2(x)) for x >= 1 (the decode form's group: the power of two at or above x). */
static uint32_t log2_up(uint32_t x) {
    uint32_t lg = 0;
    while ((1u << lg) < x)
        lg++;
    return lg;
}

static void plan_dispatch(const symm__moe_kargs_t *a, symm__moe_llplan_t *p) {
    const uint32_t n = (uint32_t)a->n, dp = (uint32_t)a->dp, me = (uint32_t)a->me, K = a->topk, L = a->local;
    const uint32_t B = (uint32_t)a->nblocks, RB = B > 1 ? B - 1 : 1, cap = a->cap;
    const uint64_t m = a->num_tokens;
    const uint32_t pairs = n * cap;
    uint32_t nvm;
    p->dpr = me % dp;
    p->all = m > p->dpr ? (uint32_t)((m - p->dpr + dp - 1) / dp) : 0u;
    p->nv = a->x_bytes / 16u + (a->scale_cols + 3u) / 4u;
    p->kl = min_u32(K, L);
    p->hmax = cap * p->kl;
    p->dmode = SYMM__MOE_LL_MODE_DPKT | (a->pkt && m <= a->pmt ? SYMM__MOE_LL_MODE_CPKT : 0u);
    p->h32 = 32u / K;
    /* the send half: the last block posts the headers, the others (row blocks) a token's row
     * each, in slices when the tokens are fewer */
    p->dsl = p->all > 0 && p->all < RB ? RB / p->all : 1u;
    p->dunits = p->all * p->dsl;
    /* the receive half: (source, token slot) pairs, each in slices when they are fewer than blocks */
    p->rsl = pairs < B ? B / pairs : 1u;
    p->runits = pairs * p->rsl;
    nvm = (p->nv + p->rsl - 1u) / p->rsl;
    p->rlg = log2_up(nvm > 0 ? nvm : 1u);
    p->rfast = p->runits <= B && p->nv >= p->rsl && p->kl <= 32u && nvm <= SYMM__MOE_THREADS &&
               (p->kl << p->rlg) <= SYMM__MOE_THREADS * SYMM__MOE_SMALL_FAST_ROUNDS &&
               n * L <= SYMM__MOE_SMALL_SHIST;
    p->mk = symm__moe_magic(K);
    p->mdsl = symm__moe_magic(p->dsl);
    p->mrsl = symm__moe_magic(p->rsl);
    p->mcap = symm__moe_magic(cap);
    p->ml = symm__moe_magic(L);
}

static void plan_combine(const symm__moe_kargs_t *a, symm__moe_llplan_t *p) {
    const uint32_t n = (uint32_t)a->n, dp = (uint32_t)a->dp, me = (uint32_t)a->me, K = a->topk, L = a->local;
    const uint32_t B = (uint32_t)a->nblocks, h8 = a->hidden / 8u;
    const uint64_t m = a->num_tokens; /* <= max_num_tokens */
    const uint32_t b32 = (uint32_t)m;
    /* the send half's split by the most routes a PE may receive (ll_csend_sl) */
    p->kl = min_u32(K, L);
    p->rmax = n * a->cap * p->kl;
    p->csl = p->rmax > 0 && p->rmax < B ? B / p->rmax : 1u;
    /* the receive half's plan of bound = num_tokens (ll_combine_plan) */
    p->psl = 1;
    p->ptb = 1;
    if (b32 < B) {
        p->psl = b32 ? B / b32 : 1u;
        if (p->psl > h8)
            p->psl = h8;
    } else {
        p->ptb = h8 ? 1024u / h8 : 1u;
        p->ptb = p->ptb < 1 ? 1 : (p->ptb > 32u ? 32u : p->ptb); /* (LL_BATCH) */
        if (p->ptb * K > SYMM__MOE_THREADS)
            p->ptb = SYMM__MOE_THREADS / K;
        if ((uint64_t)p->ptb * B > m)
            p->ptb = (b32 + B - 1) / B;
    }
    p->punits = p->psl > 1 ? b32 * p->psl : (b32 + p->ptb - 1) / p->ptb;
    p->per = SYMM__MOE_THREADS / K;
    p->g0 = me / dp * dp;
    p->mk = symm__moe_magic(K);
    p->mcsl = symm__moe_magic(p->csl);
    p->mpsl = symm__moe_magic(p->psl ? p->psl : 1u);
    p->mper = symm__moe_magic(p->per);
    p->mh8 = symm__moe_magic(h8 ? h8 : 1u);
}

void symm__moe_ll_plan(symm__moe_kargs_t *a) {
    if (!a->ll_small || a->topk == 0 || a->cap == 0 || a->nblocks < 1)
        return;
    memset(&a->llp, 0, sizeof(a->llp));
    if (a->kernel == SYMM__MK_LL_DISPATCH)
        plan_dispatch(a, &a->llp);
    else if (a->kernel == SYMM__MK_LL_COMBINE)
        plan_combine(a, &a->llp);
}
