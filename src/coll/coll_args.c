/*
 * coll_args.c - the argument checks of the stream collectives: buffers,
 * types, sizes, the root, the symm__coll_requested algorithm, and the symm__coll_prologue every
 * collective but all_to_allv starts with.
 */
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "symm/symm.h"
#include "symm/contract/coll_kinds.h"
#include "core/env.h"
#include "core/log.h"
#include "heap/heap.h"
#include "runtime/team.h"
#include "coll/coll.h"
#include "coll/coll_launch.h"
#include "coll/coll_host.h"

/* Is [p, p + n) inside this PE's heap? */
int symm__coll_in_heap(const void *p, uint64_t n) { return symm__heap_offset(p, (size_t)n, NULL); }

int symm__coll_overlap(const void *a, uint64_t na, const void *b, uint64_t nb) {
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return na && nb && x < y + nb && y < x + na;
}

symm_status_t symm__coll_check_buf(const char *call, const char *what, const void *p, uint64_t n) {
    if (p == NULL)
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: %s is NULL", call, what);
    if (!symm__coll_in_heap(p, n) && !symm__coll_device_accessible(p))
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: %s (%p) is not memory this GPU can access", call, what, p);
    return SYMM_SUCCESS;
}

/* count * esz * mult without overflow (and within what the kernels index). */
symm_status_t symm__coll_bytes_of(const char *call, size_t count, uint32_t esz, uint64_t mult, uint64_t *out) {
    const uint64_t lim = (uint64_t)1 << 62;
    if ((uint64_t)count > lim / esz || (uint64_t)count * esz > lim / (mult ? mult : 1))
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: count %zu overflows (x %u bytes x %llu)", call, count, esz,
                           (unsigned long long)mult);
    *out = (uint64_t)count * esz;
    return SYMM_SUCCESS;
}

symm_status_t symm__coll_check_dtype(const char *call, symm_dtype_t dtype, uint32_t *esz) {
    if ((int)dtype < 0 || (int)dtype >= SYMM_DTYPE_COUNT)
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: unknown dtype %d", call, (int)dtype);
    *esz = symm__c_dtype_size(dtype);
    return SYMM_SUCCESS;
}

static symm_status_t check_red(const char *call, symm_dtype_t dtype, symm_redop_t op, symm_dtype_t acc,
                               symm_coll_algo_t algo, uint32_t *esz, int *kind) {
    symm_status_t st = symm__coll_check_dtype(call, dtype, esz);
    if (st != SYMM_SUCCESS)
        return st;
    if ((int)op < 0 || (int)op >= SYMM_OP_COUNT)
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: unknown op %d", call, (int)op);
    if ((int)acc != SYMM_DTYPE_DEFAULT && ((int)acc < 0 || (int)acc >= SYMM_DTYPE_COUNT))
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: unknown accumulator dtype %d", call, (int)acc);
    if ((int)algo < 0 || (int)algo >= SYMM_COLL_ALGO_COUNT)
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: unknown algorithm %d", call, (int)algo);
    *kind = symm__c_red_kind(dtype, op, acc);
    if (*kind < 0)
        return symm__error(SYMM_ERR_UNSUPPORTED, "%s: dtype %d with op %d (accumulator %d) is not supported", call,
                           (int)dtype, (int)op, (int)acc);
    return SYMM_SUCCESS;
}

/* The algorithm asked for: the call's, else SYMM_COLL_ALGO, else AUTO. */
symm_status_t symm__coll_requested(const char *call, symm_coll_algo_t algo, symm_coll_algo_t *out) {
    const char *e = symm__env()->coll_algo;
    if (algo != SYMM_COLL_ALGO_AUTO || e == NULL || e[0] == '\0') {
        *out = algo;
        return SYMM_SUCCESS;
    }
    for (int a = SYMM_COLL_ALGO_AUTO; a < SYMM_COLL_ALGO_COUNT; a++)
        if (strcmp(e, symm_coll_algo_name((symm_coll_algo_t)a)) == 0) {
            *out = (symm_coll_algo_t)a;
            return SYMM_SUCCESS;
        }
    return symm__error(SYMM_ERR_ENV, "%s: SYMM_COLL_ALGO=%s is not one of auto, packet, oneshot, twoshot, "
                                     "multimem", call, e);
}


symm_status_t symm__coll_prologue(const char *call, symm_team_t team, symm_stream_t stream, symm_dtype_t dtype,
                              const symm_redop_t *op, symm_dtype_t acc, symm_coll_algo_t algo, const int *root,
                              size_t count, int per_pe, symm__coll_args_t *a) {
    symm_status_t st;
    int n;
    memset(a, 0, sizeof(*a));
    symm__error_clear();
    if ((st = symm__coll_team_get(team, stream, call, &a->t)) != SYMM_SUCCESS)
        return st;
    st = op ? check_red(call, dtype, *op, acc, algo, &a->esz, &a->kind) : symm__coll_check_dtype(call, dtype, &a->esz);
    if (st != SYMM_SUCCESS)
        return st;
    n = a->t->ctx.n_pes;
    if ((st = symm__coll_limits(n, &a->lim)) != SYMM_SUCCESS)
        return st; /* SYMM_COLL_TUNE does not parse: its message names the entry */
    if (root && (*root < 0 || *root >= n))
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: root %d outside the team (%d PEs)", call, *root, n);
    if ((st = symm__coll_bytes_of(call, count, a->esz, per_pe ? (uint64_t)n : 1, &a->nbytes)) != SYMM_SUCCESS)
        return st;
    a->total = a->nbytes * (uint64_t)n;
    if (count == 0)
        symm__coll_set_last(SYMM_COLL_ALGO_AUTO, "none", 0);
    return SYMM_SUCCESS;
}

/* send (sbytes) and recv (rbytes) are memory this GPU can access, and they
 * symm__coll_overlap only if send is exactly at `at` (when at_ok: in place). */
symm_status_t symm__coll_check_pair(const char *call, const void *send, uint64_t sbytes, const void *recv,
                                uint64_t rbytes, int at_ok, uintptr_t at, const char *why) {
    symm_status_t st;
    if ((st = symm__coll_check_buf(call, "send", send, sbytes)) != SYMM_SUCCESS ||
        (st = symm__coll_check_buf(call, "recv", recv, rbytes)) != SYMM_SUCCESS)
        return st;
    if (!(at_ok && (uintptr_t)send == at) && symm__coll_overlap(send, sbytes, recv, rbytes))
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: %s", call, why);
    return SYMM_SUCCESS;
}

