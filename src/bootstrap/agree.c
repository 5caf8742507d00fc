/*
 * agree.c - agreement on the outcome of a collective step (agree.h).
 */
#include <stdlib.h>

#include "bootstrap/agree.h"
#include "core/log.h"

symm_status_t symm__bootstrap_agree(symm__bootstrap_t *b, symm_status_t mine, symm_status_t prefer,
                                    const char *what) {
    int nranks = symm__bootstrap_nranks(b);
    int32_t m = (int32_t)mine;
    int32_t *all = calloc((size_t)nranks, sizeof(int32_t));
    if (!all)
        return symm__error(SYMM_ERR_NO_MEMORY, "%s: out of host memory", what);
    symm_status_t st = symm__bootstrap_allgather(b, &m, all, sizeof(m));
    if (st != SYMM_SUCCESS) {
        free(all);
        return st;
    }
    int first = -1, pref = -1;
    for (int r = 0; r < nranks; r++) {
        if (all[r] == SYMM_SUCCESS)
            continue;
        if (first < 0)
            first = r;
        if (prefer != SYMM_SUCCESS && all[r] == (int32_t)prefer && pref < 0)
            pref = r;
    }
    int pick = pref >= 0 ? pref : first;
    symm_status_t res = pick >= 0 ? (symm_status_t)all[pick] : SYMM_SUCCESS;
    free(all);
    if (res == SYMM_SUCCESS || mine == res)
        return res; /* success, or this PE's own message stands */
    return symm__error(res, "%s failed on PE %d: %s", what, pick, symm_strerror(res));
}

symm_status_t symm__bootstrap_all_true(symm__bootstrap_t *b, int mine, int *all_ok) {
    int nranks = symm__bootstrap_nranks(b);
    int32_t m = mine != 0;
    int32_t *all = calloc((size_t)nranks, sizeof(int32_t));
    if (!all)
        return symm__error(SYMM_ERR_NO_MEMORY, "out of host memory");
    symm_status_t st = symm__bootstrap_allgather(b, &m, all, sizeof(m));
    int ok = 1;
    for (int r = 0; st == SYMM_SUCCESS && r < nranks; r++)
        ok &= all[r] != 0;
    free(all);
    if (st == SYMM_SUCCESS)
        *all_ok = ok;
    return st;
}
