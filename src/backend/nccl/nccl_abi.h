/*
 * nccl_abi.h - the part of NCCL's host ABI the nccl backend calls, declared
 * here in C.
 *
 * nccl.h pulls in the CUDA runtime headers, which libsymm's host C code does
 * not include (it must build and load without CUDA's development files and
 * without NCCL), and the library itself is opened with dlopen at symm_init.
 * The handful of types and values below are NCCL's stable C ABI;
 * tests/backend/nccl_abi_check.cpp compiles them next to nccl.h and fails on
 * any difference.
 */
#ifndef SYMM_BACKEND_NCCL_ABI_H
#define SYMM_BACKEND_NCCL_ABI_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The release whose device API symm's device file and bitcode are built
 * against; the loader refuses an older library, and a newer minor version
 * only with a warning (ncclDevComm's layout is NCCL's, per release). */
#define SYMM__NCCL_MIN_VERSION 22800 /* 2.28.0 */

typedef struct symm__nccl_comm *symm__nccl_comm_t;     /* ncclComm_t */
typedef struct symm__nccl_window *symm__nccl_window_t; /* ncclWindow_t (a device pointer) */
typedef struct CUstream_st *symm__nccl_stream_t;       /* cudaStream_t */

#define SYMM__NCCL_UNIQUE_ID_BYTES 128
typedef struct symm__nccl_uid {
    char internal[SYMM__NCCL_UNIQUE_ID_BYTES];
} symm__nccl_uid_t;

/* ncclResult_t */
enum {
    SYMM__NCCL_SUCCESS = 0,
    SYMM__NCCL_IN_PROGRESS = 7
};

/* ncclDataType_t */
enum {
    SYMM__NCCL_INT8 = 0,
    SYMM__NCCL_UINT8 = 1,
    SYMM__NCCL_INT32 = 2,
    SYMM__NCCL_UINT32 = 3,
    SYMM__NCCL_INT64 = 4,
    SYMM__NCCL_UINT64 = 5,
    SYMM__NCCL_FLOAT16 = 6,
    SYMM__NCCL_FLOAT32 = 7,
    SYMM__NCCL_FLOAT64 = 8,
    SYMM__NCCL_BFLOAT16 = 9
};

/* ncclRedOp_t */
enum {
    SYMM__NCCL_SUM = 0,
    SYMM__NCCL_PROD = 1,
    SYMM__NCCL_MAX = 2,
    SYMM__NCCL_MIN = 3
};

/* ncclConfig_t as of NCCL 2.28 (versioned by its size, magic and version,
 * which NCCL checks): symm sets `blocking` = 0 so that no call waits in NCCL
 * for a PE that is gone; every other field stays "undefined". */
#define SYMM__NCCL_CONFIG_MAGIC 0xcafebeefu
#define SYMM__NCCL_UNDEF_INT (-2147483647 - 1)
typedef struct symm__nccl_config {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
    int cgaClusterSize;
    int minCTAs;
    int maxCTAs;
    const char *netName;
    int splitShare;
    int trafficClass;
    const char *commName;
    int collnetEnable;
    int CTAPolicy;
    int shrinkShare;
    int nvlsCTAs;
    int nChannelsPerNetPeer;
    int nvlinkCentricSched;
} symm__nccl_config_t;

/* ncclTeam_t: a team of ranks (ncclTeamLsa: the ranks this one reaches by
 * load/store). */
typedef struct symm__nccl_team {
    int nRanks, rank, stride;
} symm__nccl_team_t;

/* ncclCommWindowRegister flags and the alignment a window needs. */
#define SYMM__NCCL_WIN_COLL_SYMMETRIC 0x01
#define SYMM__NCCL_WIN_ALIGNMENT 4096

#ifdef __cplusplus
}
#endif

#endif /* SYMM_BACKEND_NCCL_ABI_H */
