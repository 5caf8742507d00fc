/*
 * nvshmem_abi_check.cpp - symm's C declarations of NVSHMEM's host ABI
 * (src/backend/nvshmem/nvshmem_abi.h) against NVSHMEM's own headers: the
 * build of this file is the test (every check is a static_assert); running
 * it prints the version it was checked against. Built where NVSHMEM's
 * headers are found (tests/backend/CMakeLists.txt).
 */
#include <cstddef>
#include <cstdio>
#include <type_traits>

#include <nvshmem.h>
#include <nvshmemx.h>

#include "backend/nvshmem/nvshmem_abi.h"

#define SAME_LAYOUT(ours, theirs)                                                            \
    static_assert(sizeof(ours) == sizeof(theirs), #ours " has the size of " #theirs);       \
    static_assert(alignof(ours) == alignof(theirs), #ours " has the alignment of " #theirs)
#define SAME_FIELD(ours, theirs, fo, ft)                                                     \
    static_assert(offsetof(ours, fo) == offsetof(theirs, ft), #ours "." #fo " is at " #theirs "." #ft)

SAME_LAYOUT(symm__nvshmem_uid_t, nvshmemx_uniqueid_t);
SAME_FIELD(symm__nvshmem_uid_t, nvshmemx_uniqueid_t, version, version);
SAME_LAYOUT(symm__nvshmem_uid_args_t, nvshmemx_uniqueid_args_t);
SAME_FIELD(symm__nvshmem_uid_args_t, nvshmemx_uniqueid_args_t, id, id);
SAME_FIELD(symm__nvshmem_uid_args_t, nvshmemx_uniqueid_args_t, myrank, myrank);
SAME_FIELD(symm__nvshmem_uid_args_t, nvshmemx_uniqueid_args_t, nranks, nranks);
SAME_LAYOUT(symm__nvshmem_init_args_t, nvshmemx_init_args_t);
SAME_FIELD(symm__nvshmem_init_args_t, nvshmemx_init_args_t, uid_args, uid_args);
SAME_LAYOUT(symm__nvshmem_init_attr_t, nvshmemx_init_attr_t);
SAME_FIELD(symm__nvshmem_init_attr_t, nvshmemx_init_attr_t, mpi_comm, mpi_comm);
SAME_FIELD(symm__nvshmem_init_attr_t, nvshmemx_init_attr_t, args, args);

static_assert(SYMM__NVSHMEM_ABI_MAJOR == NVSHMEM_VENDOR_MAJOR_VERSION, "the major version symm declares");
static_assert(SYMM__NVSHMEM_INIT_WITH_UNIQUEID == NVSHMEMX_INIT_WITH_UNIQUEID, "init flag");
static_assert(SYMM__NVSHMEM_TEAM_WORLD == NVSHMEM_TEAM_WORLD, "world team");
static_assert(SYMM__NVSHMEM_TEAM_NODE == NVSHMEMX_TEAM_NODE, "node team");
static_assert(SYMM__NVSHMEM_STATUS_IS_INITIALIZED == NVSHMEM_STATUS_IS_INITIALIZED, "init status");
static_assert(SYMM__NVSHMEM_STATUS_LIMITED_MPG == NVSHMEM_STATUS_LIMITED_MPG, "init status");
static_assert(SYMM__NVSHMEM_STATUS_FULL_MPG == NVSHMEM_STATUS_FULL_MPG, "init status");
static_assert(sizeof(symm__nvshmem_team_t) == sizeof(nvshmem_team_t), "team handle");

/* The versions NVSHMEM writes into the structs' version fields. */
static_assert(SYMM__NVSHMEM_VERSION_OF(symm__nvshmem_init_attr_t) == (1 << 16) + (int)sizeof(nvshmemx_init_attr_t),
              "attr version");

/* The entry points symm resolves keep the signatures it calls them with. */
#define SAME_SIGNATURE(fn, type) static_assert(std::is_same<decltype(&fn), type>::value, #fn "'s signature")
SAME_SIGNATURE(nvshmemx_get_uniqueid, int (*)(nvshmemx_uniqueid_t *));
SAME_SIGNATURE(nvshmemx_set_attr_uniqueid_args,
               int (*)(const int, const int, const nvshmemx_uniqueid_t *, nvshmemx_init_attr_t *));
SAME_SIGNATURE(nvshmemx_hostlib_init_attr, int (*)(unsigned int, nvshmemx_init_attr_t *));
SAME_SIGNATURE(nvshmemx_hostlib_finalize, void (*)());
SAME_SIGNATURE(nvshmemx_init_status, int (*)());
SAME_SIGNATURE(nvshmem_align, void *(*)(size_t, size_t));
SAME_SIGNATURE(nvshmem_ptr, void *(*)(const void *, int));
SAME_SIGNATURE(nvshmemx_barrier_all_on_stream, void (*)(cudaStream_t));
SAME_SIGNATURE(nvshmemx_barrier_on_stream, int (*)(nvshmem_team_t, cudaStream_t));
SAME_SIGNATURE(nvshmemx_cumodule_init, int (*)(CUmodule));
SAME_SIGNATURE(nvshmemx_fcollectmem_on_stream, int (*)(nvshmem_team_t, void *, const void *, size_t, cudaStream_t));
SAME_SIGNATURE(nvshmemx_alltoallmem_on_stream, int (*)(nvshmem_team_t, void *, const void *, size_t, cudaStream_t));
SAME_SIGNATURE(nvshmemx_broadcastmem_on_stream,
               int (*)(nvshmem_team_t, void *, const void *, size_t, int, cudaStream_t));
SAME_SIGNATURE(nvshmemx_float_sum_reduce_on_stream,
               int (*)(nvshmem_team_t, float *, const float *, size_t, cudaStream_t));

int main() {
    std::printf("symm's NVSHMEM declarations match NVSHMEM %d.%d.%d's headers\n", NVSHMEM_VENDOR_MAJOR_VERSION,
                NVSHMEM_VENDOR_MINOR_VERSION, NVSHMEM_VENDOR_PATCH_VERSION);
    return 0;
}
