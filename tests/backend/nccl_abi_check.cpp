/*
 * nccl_abi_check.cpp - symm's C declarations of NCCL's host ABI
 * (src/backend/nccl/nccl_abi.h, nccl_lib.h) against nccl.h: the build of
 * this file is the test (static_asserts); running it prints the version it
 * was checked against. Built where NCCL's headers are found.
 */
#include <cstddef>
#include <cstdio>
#include <type_traits>

#include <nccl.h>
#include <nccl_device/core.h>

#include "backend/nccl/nccl_abi.h"

#define SAME_LAYOUT(ours, theirs)                                                            \
    static_assert(sizeof(ours) == sizeof(theirs), #ours " has the size of " #theirs);       \
    static_assert(alignof(ours) == alignof(theirs), #ours " has the alignment of " #theirs)
#define SAME_FIELD(f)                                                                        \
    static_assert(offsetof(symm__nccl_config_t, f) == offsetof(ncclConfig_t, f), "ncclConfig_t." #f)

SAME_LAYOUT(symm__nccl_uid_t, ncclUniqueId);
SAME_LAYOUT(symm__nccl_config_t, ncclConfig_t);
SAME_LAYOUT(symm__nccl_team_t, ncclTeam_t);
SAME_FIELD(magic);
SAME_FIELD(version);
SAME_FIELD(blocking);
SAME_FIELD(netName);
SAME_FIELD(commName);
SAME_FIELD(nvlinkCentricSched);
static_assert(sizeof(ncclResult_t) == sizeof(int) && sizeof(ncclDataType_t) == sizeof(int) &&
                  sizeof(ncclRedOp_t) == sizeof(int), "NCCL's enums travel as int");

#define SAME_VALUE(ours, theirs) static_assert((int)(ours) == (int)(theirs), #ours " is " #theirs)
SAME_VALUE(SYMM__NCCL_SUCCESS, ncclSuccess);
SAME_VALUE(SYMM__NCCL_IN_PROGRESS, ncclInProgress);
SAME_VALUE(SYMM__NCCL_INT8, ncclInt8);
SAME_VALUE(SYMM__NCCL_UINT8, ncclUint8);
SAME_VALUE(SYMM__NCCL_INT32, ncclInt32);
SAME_VALUE(SYMM__NCCL_UINT32, ncclUint32);
SAME_VALUE(SYMM__NCCL_INT64, ncclInt64);
SAME_VALUE(SYMM__NCCL_UINT64, ncclUint64);
SAME_VALUE(SYMM__NCCL_FLOAT16, ncclFloat16);
SAME_VALUE(SYMM__NCCL_FLOAT32, ncclFloat32);
SAME_VALUE(SYMM__NCCL_FLOAT64, ncclFloat64);
SAME_VALUE(SYMM__NCCL_BFLOAT16, ncclBfloat16);
SAME_VALUE(SYMM__NCCL_SUM, ncclSum);
SAME_VALUE(SYMM__NCCL_PROD, ncclProd);
SAME_VALUE(SYMM__NCCL_MAX, ncclMax);
SAME_VALUE(SYMM__NCCL_MIN, ncclMin);
static_assert(SYMM__NCCL_WIN_COLL_SYMMETRIC == NCCL_WIN_COLL_SYMMETRIC, "window flag");
static_assert(SYMM__NCCL_WIN_ALIGNMENT == NCCL_WIN_REQUIRED_ALIGNMENT, "window alignment");
static_assert(SYMM__NCCL_UNDEF_INT == NCCL_CONFIG_UNDEF_INT, "undefined config value");
static_assert(SYMM__NCCL_MIN_VERSION <= NCCL_VERSION_CODE, "these headers are at least the version symm needs");

#define SAME_SIGNATURE(fn, type) static_assert(std::is_same<decltype(&fn), type>::value, #fn "'s signature")
SAME_SIGNATURE(ncclCommInitRankConfig, ncclResult_t (*)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *));
SAME_SIGNATURE(ncclCommGetAsyncError, ncclResult_t (*)(ncclComm_t, ncclResult_t *));
/* ncclTeamLsa is overloaded (a device form takes the device communicator):
 * the cast compiles only if the host form has this signature. */
static_assert(sizeof(decltype(static_cast<ncclTeam_t (*)(ncclComm_t)>(&ncclTeamLsa))) == sizeof(void *),
              "ncclTeamLsa(ncclComm_t)'s signature");
SAME_SIGNATURE(ncclMemAlloc, ncclResult_t (*)(void **, size_t));
SAME_SIGNATURE(ncclCommWindowRegister, ncclResult_t (*)(ncclComm_t, void *, size_t, ncclWindow_t *, int));
SAME_SIGNATURE(ncclCommWindowDeregister, ncclResult_t (*)(ncclComm_t, ncclWindow_t));
SAME_SIGNATURE(ncclAllReduce, ncclResult_t (*)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                                               ncclComm_t, cudaStream_t));
SAME_SIGNATURE(ncclReduceScatter, ncclResult_t (*)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                                                   ncclComm_t, cudaStream_t));
SAME_SIGNATURE(ncclAllGather, ncclResult_t (*)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
                                               cudaStream_t));
SAME_SIGNATURE(ncclAlltoAll, ncclResult_t (*)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
                                              cudaStream_t));
SAME_SIGNATURE(ncclBroadcast, ncclResult_t (*)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,
                                               cudaStream_t));

int main() {
    std::printf("symm's NCCL declarations match NCCL %d.%d.%d's nccl.h\n", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
    return 0;
}
