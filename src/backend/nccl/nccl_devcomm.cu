/*
 * nccl_devcomm.cu - the device communicator of the nccl backend.
 *
 * ncclDevCommCreate and its requirements are C++ types of NCCL's device API
 * (nccl_device/), which the backend's C code cannot spell; this host-only
 * file is the one place that needs them. nvcc compiles it like the other
 * .cu files of libsymm (it needs NCCL's headers, not its library: the entry
 * points come from nccl_lib.c's dlopen).
 */
#include <stdlib.h>
#include <string.h>

/* NCCL's headers are not -Wextra clean (unused parameters) in the host pass. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <nccl.h>
#include <nccl_device.h>
#pragma GCC diagnostic pop

#include "symm/device/backend/state.h"

extern "C" {
#include "backend/nccl/nccl_devcomm.h"
#include "core/log.h"
}

static_assert(SYMM__NCCL_DEVCOMM_OFFSET % alignof(ncclDevComm) == 0, "ncclDevComm is aligned in the state");
static_assert(sizeof(ncclUniqueId) == sizeof(symm__nccl_uid_t), "ncclUniqueId is 128 bytes");

typedef ncclResult_t (*devcomm_create_fn)(ncclComm_t, ncclDevCommRequirements_t const *, ncclDevComm_t *);
typedef ncclResult_t (*devcomm_destroy_fn)(ncclComm_t, ncclDevComm_t const *);

extern "C" size_t symm__nccl_state_bytes(void) { return SYMM__NCCL_DEVCOMM_OFFSET + sizeof(ncclDevComm); }

extern "C" symm_status_t symm__nccl_devcomm_create(const symm__nccl_lib_t *lib, symm__nccl_comm_t comm,
                                                   int force_gin, symm__nccl_wait_t wait, void *wait_arg,
                                                   symm__nccl_devcomm_t **out) {
    ncclDevCommRequirements_t reqs;
    memset(&reqs, 0, sizeof reqs);
    /* Barrier 0 serves the world team, barrier 1 a team that is the LSA team. */
    reqs.barrierCount = 2;
    reqs.lsaBarrierCount = 2;
    reqs.ginForceEnable = force_gin != 0;
    reqs.ginContextCount = 1;
    ncclDevComm *dc = (ncclDevComm *)calloc(1, sizeof(ncclDevComm));
    symm__nccl_devcomm_t *h = (symm__nccl_devcomm_t *)calloc(1, sizeof(*h));
    if (!dc || !h) {
        free(dc);
        free(h);
        return symm__error(SYMM_ERR_NO_MEMORY, "nccl backend: out of host memory");
    }
    /* The call only queues the work (ncclSuccess while NCCL's group thread
     * fills *dc): dc is read, or freed, once wait says NCCL is done. */
    ncclResult_t r = ((devcomm_create_fn)lib->dev_comm_create)((ncclComm_t)comm, &reqs, dc);
    symm_status_t st = wait(wait_arg, (int)r, force_gin ? "ncclDevCommCreate (barriers, GIN required)"
                                                        : "ncclDevCommCreate (barriers, GIN where NCCL needs it)");
    if (st != SYMM_SUCCESS) {
        if (st != SYMM_ERR_TIMEOUT && st != SYMM_ERR_PEER_DIED) { /* else NCCL may still write *dc */
            free(dc);
            free(h);
        }
        return st;
    }
    h->devcomm = dc;
    h->bytes = sizeof(ncclDevComm);
    h->rank = dc->rank;
    h->n_ranks = dc->nRanks;
    h->lsa_rank = dc->lsaRank;
    h->lsa_size = dc->lsaSize;
    h->gin_contexts = dc->ginContextCount;
    *out = h;
    return SYMM_SUCCESS;
}

extern "C" symm_status_t symm__nccl_window_layout(symm__nccl_window_t win, uintptr_t *self, size_t *stride) {
    ncclWindow_vidmem w;
    cudaError_t e = cudaMemcpy(&w, (const void *)win, sizeof w, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess)
        return symm__error(SYMM_ERR_CUDA, "reading the heap window's layout: %s", cudaGetErrorString(e));
    /* NCCL's own arithmetic (ncclGetLocalPointer): rank i of the LSA team at
     * lsaFlatBase + i * stride4G * 4 GiB. */
    const uint64_t step = (uint64_t)w.stride4G << 32;
    *self = (uintptr_t)w.lsaFlatBase + (uintptr_t)((uint64_t)(uint32_t)w.lsaRank * step);
    *stride = (size_t)step;
    return SYMM_SUCCESS;
}

extern "C" void symm__nccl_devcomm_destroy(const symm__nccl_lib_t *lib, symm__nccl_comm_t comm,
                                           symm__nccl_devcomm_t *h) {
    if (!h)
        return;
    ncclResult_t r = ((devcomm_destroy_fn)lib->dev_comm_destroy)((ncclComm_t)comm, (const ncclDevComm *)h->devcomm);
    if (r != ncclSuccess)
        SYMM_LOG_WARN("ncclDevCommDestroy: %s", symm__nccl_errstr(lib, comm, (int)r));
    free(h->devcomm);
    free(h);
}
