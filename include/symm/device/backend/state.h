/*
 * device/backend/state.h - what ctx->backend_state points at, per backend.
 *
 * Written by the host (src/backend/<name>/) into device memory once per team,
 * read by the backend's device file. Plain C with fixed-width fields, so the
 * host C code, nvcc, and clang (C for nvptx, and CUDA mode for the nccl
 * bitcode) agree on the layout. Internal: not part of the public API.
 */
#ifndef SYMM_DEVICE_BACKEND_STATE_H
#define SYMM_DEVICE_BACKEND_STATE_H

#include <stdint.h>

/* Flags of both states. */
#define SYMM__BE_IDENTITY 1u /* team PE i is library PE i (the world team): no map */
#define SYMM__BE_NO_PTR   2u /* SYMM_DEBUG_FORCE_REMOTE: never load/store through the
                                library's addresses, so every call takes the library's path */
#define SYMM__BE_NO_DEVCOMM 4u /* nccl: no device communicator (ranks on several nodes
                                  without GIN): nothing of NCCL's device API is usable */

/* ---- nvshmem ------------------------------------------------------------------ */

#define SYMM__NVSHMEM_STATE_MAGIC 0x6e767368u /* "nvsh" */

typedef struct symm__nvshmem_state {
    uint32_t magic;
    uint32_t flags;
    int32_t team;     /* nvshmem_team_t of the barriers: NVSHMEM_TEAM_WORLD or NVSHMEMX_TEAM_NODE */
    int32_t n_pes;
    uint64_t pe_map;  /* device address of int32_t[n_pes]: NVSHMEM PE of team PE i (0 with IDENTITY) */
} symm__nvshmem_state_t;

/* ---- nccl --------------------------------------------------------------------- */

#define SYMM__NCCL_STATE_MAGIC 0x6e63636cu /* "nccl" */
/* The ncclDevComm (a C++ type of NCCL's device API) lives at this offset of
 * the state; nccl_devcomm.cu checks that it fits and is aligned. */
#define SYMM__NCCL_DEVCOMM_OFFSET 64u

typedef struct symm__nccl_state {
    uint32_t magic;
    uint32_t flags;
    int32_t n_pes;
    int32_t gin;        /* 1: the communicator has GIN contexts (some rank is on another node) */
    uint64_t pe_map;    /* device address of int32_t[n_pes]: NCCL rank of team PE i (0 with IDENTITY) */
    uint64_t window;    /* ncclWindow_t of the heap (a device pointer) */
    uint64_t heap_base; /* this PE's heap: window offset = address - heap_base */
    uint64_t heap_size;
    uint64_t reserved[2];
    /* at SYMM__NCCL_DEVCOMM_OFFSET: struct ncclDevComm */
} symm__nccl_state_t;

#if defined(__cplusplus)
static_assert(sizeof(symm__nccl_state_t) <= SYMM__NCCL_DEVCOMM_OFFSET, "nccl state header fits");
#else
_Static_assert(sizeof(symm__nccl_state_t) <= SYMM__NCCL_DEVCOMM_OFFSET, "nccl state header fits");
#endif

#endif /* SYMM_DEVICE_BACKEND_STATE_H */
