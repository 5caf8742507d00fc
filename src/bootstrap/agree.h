/*
 * agree.h - every PE learns the outcome of a step every PE took: the runtime,
 * the heap and the modules above them use it so that a failure on one PE is
 * a failure on all, with the same status.
 */
#ifndef SYMM_BOOTSTRAP_AGREE_H
#define SYMM_BOOTSTRAP_AGREE_H

#include "bootstrap/bootstrap.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every PE passes its own status; the result is the same on every PE: success
 * when all succeeded, else the failing PE's status (its own message on that
 * PE, "<what> failed on PE k" elsewhere). If any PE reports `prefer`, that is
 * what everyone returns. Collective over `b`. */
symm_status_t symm__bootstrap_agree(symm__bootstrap_t *b, symm_status_t mine, symm_status_t prefer,
                                    const char *what);

/* Every PE says whether `mine` holds; *all_ok is 1 on every PE if all do.
 * Collective over `b`. */
symm_status_t symm__bootstrap_all_true(symm__bootstrap_t *b, int mine, int *all_ok);

#ifdef __cplusplus
}
#endif

#endif /* SYMM_BOOTSTRAP_AGREE_H */
