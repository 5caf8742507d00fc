/*
 * status.c - names and one-line meanings of the status codes (symm_types.h).
 */
#include "symm/symm.h"

const char *symm_strerror(symm_status_t status) {
    switch (status) {
    case SYMM_SUCCESS:                 return "SYMM_SUCCESS: no error";
    case SYMM_ERR_INVALID_ARG:         return "SYMM_ERR_INVALID_ARG: invalid argument (NULL, negative or out of range)";
    case SYMM_ERR_NOT_INITIALIZED:     return "SYMM_ERR_NOT_INITIALIZED: symm is not initialized";
    case SYMM_ERR_ALREADY_INITIALIZED: return "SYMM_ERR_ALREADY_INITIALIZED: symm is already initialized";
    case SYMM_ERR_NO_MEMORY:           return "SYMM_ERR_NO_MEMORY: out of host memory";
    case SYMM_ERR_HEAP_EXHAUSTED:      return "SYMM_ERR_HEAP_EXHAUSTED: the symmetric heap or device memory is full";
    case SYMM_ERR_MISMATCH:            return "SYMM_ERR_MISMATCH: arguments differ across PEs";
    case SYMM_ERR_INVALID_PE:          return "SYMM_ERR_INVALID_PE: PE index out of range";
    case SYMM_ERR_NOT_SYMMETRIC:       return "SYMM_ERR_NOT_SYMMETRIC: pointer is not in the symmetric heap";
    case SYMM_ERR_INVALID_POINTER:     return "SYMM_ERR_INVALID_POINTER: pointer is not a live symmetric allocation";
    case SYMM_ERR_BOOTSTRAP:           return "SYMM_ERR_BOOTSTRAP: bootstrap network failure";
    case SYMM_ERR_PEER_DIED:           return "SYMM_ERR_PEER_DIED: another PE died or stopped answering";
    case SYMM_ERR_TIMEOUT:             return "SYMM_ERR_TIMEOUT: a wait passed its deadline";
    case SYMM_ERR_CUDA:                return "SYMM_ERR_CUDA: a CUDA call failed";
    case SYMM_ERR_NO_DEVICE:           return "SYMM_ERR_NO_DEVICE: no usable GPU for this PE";
    case SYMM_ERR_NO_PEER_ACCESS:      return "SYMM_ERR_NO_PEER_ACCESS: two PEs of the node cannot access each other's memory";
    case SYMM_ERR_UNSUPPORTED:         return "SYMM_ERR_UNSUPPORTED: not supported by this build, backend or GPU";
    case SYMM_ERR_ENV:                 return "SYMM_ERR_ENV: bad environment variable";
    case SYMM_ERR_INTERNAL:            return "SYMM_ERR_INTERNAL: internal error (a bug in symm)";
    }
    return "unknown symm status";
}
