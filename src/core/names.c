/*
 * names.c - the names of the public enums besides the status codes
 * (status.c): here, below every layer that prints or parses them (the
 * runtime checks SYMM_COLL_ALGO at init, the collectives report what ran).
 */
#include "symm/symm.h"

const char *symm_coll_algo_name(symm_coll_algo_t algo) {
    switch (algo) {
    case SYMM_COLL_ALGO_AUTO: return "auto";
    case SYMM_COLL_ALGO_PACKET: return "packet";
    case SYMM_COLL_ALGO_ONESHOT: return "oneshot";
    case SYMM_COLL_ALGO_TWOSHOT: return "twoshot";
    case SYMM_COLL_ALGO_MULTIMEM: return "multimem";
    case SYMM_COLL_ALGO_PUSH: return "push";
    default: return "unknown";
    }
}
