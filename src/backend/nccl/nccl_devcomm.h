/*
 * nccl_devcomm.h - the nccl backend's device communicator, behind C types
 * (nccl_devcomm.cu holds the C++ side).
 */
#ifndef SYMM_BACKEND_NCCL_DEVCOMM_H
#define SYMM_BACKEND_NCCL_DEVCOMM_H

#include <stddef.h>
#include <stdint.h>

#include "backend/nccl/nccl_lib.h"

typedef struct symm__nccl_devcomm {
    void *devcomm;      /* struct ncclDevComm, host copy */
    size_t bytes;       /* sizeof(struct ncclDevComm) */
    int rank, n_ranks;
    int lsa_rank, lsa_size;
    int gin_contexts;   /* 0: no GIN (every rank in the LSA team) */
} symm__nccl_devcomm_t;

/* Bytes of symm__nccl_state_t plus the ncclDevComm after it. */
size_t symm__nccl_state_bytes(void);

/* Collective over the communicator: ncclDevCommCreate with two barriers (one
 * for the world team, one for the LSA team) and one GIN context when NCCL
 * needs GIN (ranks on several nodes) or force_gin. Errors:
 * SYMM_ERR_UNSUPPORTED with NCCL's reason (e.g. GIN not supported: no
 * GIN-capable network). */
symm_status_t symm__nccl_devcomm_create(const symm__nccl_lib_t *lib, symm__nccl_comm_t comm, int force_gin,
                                        symm__nccl_devcomm_t **out);

/* Where the heap window puts this PE's memory in NCCL's flat mapping of the
 * LSA team (*self), and the distance between two LSA ranks' copies (*stride):
 * symm uses *self as this PE's heap, so its own load/store arithmetic holds
 * for the whole LSA team. Local (reads the window's device struct). */
symm_status_t symm__nccl_window_layout(symm__nccl_window_t win, uintptr_t *self, size_t *stride);

/* Collective. NULL is a no-op. */
void symm__nccl_devcomm_destroy(const symm__nccl_lib_t *lib, symm__nccl_comm_t comm, symm__nccl_devcomm_t *h);

#endif /* SYMM_BACKEND_NCCL_DEVCOMM_H */
