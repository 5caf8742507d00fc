/*
 * nvshmem_abi.h - the part of NVSHMEM's host ABI the nvshmem backend calls,
 * declared here in C.
 *
 * NVSHMEM's own headers are C++ (and pull in the CUDA runtime headers), while
 * libsymm's host code is C11 and must build where NVSHMEM is not installed:
 * the library is opened with dlopen at symm_init. So the few types crossing
 * the boundary are spelled out below. Each of them is versioned by NVSHMEM
 * with its size, which NVSHMEM checks on entry; tests/backend/nvshmem_abi_check.cpp
 * compiles these declarations next to NVSHMEM's headers and fails on any
 * difference of size, offset or value.
 */
#ifndef SYMM_BACKEND_NVSHMEM_ABI_H
#define SYMM_BACKEND_NVSHMEM_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The major version whose ABI this file describes; the loader refuses others. */
#define SYMM__NVSHMEM_ABI_MAJOR 3

/* nvshmemx_uniqueid_t (version 1): 128 bytes, the first int its version. */
#define SYMM__NVSHMEM_UID_BYTES 128
typedef struct symm__nvshmem_uid {
    int version;
    char internal[SYMM__NVSHMEM_UID_BYTES - sizeof(int)];
} symm__nvshmem_uid_t;

/* nvshmemx_uniqueid_args_t (version 1): 24 bytes. */
typedef struct symm__nvshmem_uid_args {
    int version;
    symm__nvshmem_uid_t *id;
    int myrank;
    int nranks;
} symm__nvshmem_uid_args_t;

/* nvshmemx_init_args_t (version 1): 128 bytes. */
typedef struct symm__nvshmem_init_args {
    int version;
    symm__nvshmem_uid_args_t uid_args;
    char content[128 - sizeof(int) - sizeof(symm__nvshmem_uid_args_t) - 4];
} symm__nvshmem_init_args_t;

/* nvshmemx_init_attr_t (version 1): 144 bytes. */
typedef struct symm__nvshmem_init_attr {
    int version;
    void *mpi_comm;
    symm__nvshmem_init_args_t args;
} symm__nvshmem_init_attr_t;

#ifdef __cplusplus
#  define SYMM__NVSHMEM_STATIC_ASSERT static_assert
#else
#  define SYMM__NVSHMEM_STATIC_ASSERT _Static_assert
#endif
SYMM__NVSHMEM_STATIC_ASSERT(sizeof(symm__nvshmem_uid_t) == 128, "nvshmemx_uniqueid_t is 128 bytes");
SYMM__NVSHMEM_STATIC_ASSERT(sizeof(symm__nvshmem_uid_args_t) == 24, "nvshmemx_uniqueid_args_t is 24 bytes");
SYMM__NVSHMEM_STATIC_ASSERT(sizeof(symm__nvshmem_init_args_t) == 128, "nvshmemx_init_args_t is 128 bytes");
SYMM__NVSHMEM_STATIC_ASSERT(sizeof(symm__nvshmem_init_attr_t) == 144, "nvshmemx_init_attr_t is 144 bytes");

/* NVSHMEM writes (1 << 16) + sizeof(struct) into each version field. */
#define SYMM__NVSHMEM_VERSION_OF(type) ((1 << 16) + (int)sizeof(type))

/* nvshmemx_init_attr flags, nvshmem_team_t values, init status, thread levels. */
#define SYMM__NVSHMEM_INIT_WITH_UNIQUEID (1u << 3)
#define SYMM__NVSHMEM_TEAM_WORLD 0
#define SYMM__NVSHMEM_TEAM_NODE  2
#define SYMM__NVSHMEM_STATUS_NOT_INITIALIZED 0
#define SYMM__NVSHMEM_STATUS_IS_INITIALIZED  2
#define SYMM__NVSHMEM_STATUS_LIMITED_MPG     3
#define SYMM__NVSHMEM_STATUS_FULL_MPG        4

typedef int32_t symm__nvshmem_team_t;
typedef struct CUstream_st *symm__nvshmem_stream_t;
typedef struct CUmod_st *symm__nvshmem_module_t;

#ifdef __cplusplus
}
#endif

#endif /* SYMM_BACKEND_NVSHMEM_ABI_H */
