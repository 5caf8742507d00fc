/*
 * nccl_lib.h - libnccl.so.2, opened at run time (see nvshmem_lib.h for why).
 */
#ifndef SYMM_BACKEND_NCCL_LIB_H
#define SYMM_BACKEND_NCCL_LIB_H

#include "symm/symm.h"
#include "backend/nccl/nccl_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SYMM__NCCL_SONAME "libnccl.so.2"

typedef int symm__nccl_result_t;

typedef struct symm__nccl_lib {
    void *dl;
    char path[512];
    int version; /* NCCL_VERSION_CODE of the library: 22809 for 2.28.9 */

    symm__nccl_result_t (*get_version)(int *version);
    const char *(*get_error_string)(symm__nccl_result_t result);
    const char *(*get_last_error)(symm__nccl_comm_t comm);
    symm__nccl_result_t (*get_unique_id)(symm__nccl_uid_t *uid);
    symm__nccl_result_t (*comm_init_rank_config)(symm__nccl_comm_t *comm, int nranks, symm__nccl_uid_t uid,
                                                 int rank, symm__nccl_config_t *config);
    symm__nccl_result_t (*comm_finalize)(symm__nccl_comm_t comm);
    symm__nccl_result_t (*comm_destroy)(symm__nccl_comm_t comm);
    symm__nccl_result_t (*comm_abort)(symm__nccl_comm_t comm);
    symm__nccl_result_t (*comm_get_async_error)(symm__nccl_comm_t comm, symm__nccl_result_t *err);
    symm__nccl_result_t (*mem_alloc)(void **ptr, size_t size);
    symm__nccl_result_t (*mem_free)(void *ptr);
    symm__nccl_result_t (*window_register)(symm__nccl_comm_t comm, void *buf, size_t size,
                                           symm__nccl_window_t *win, int flags);
    symm__nccl_result_t (*window_deregister)(symm__nccl_comm_t comm, symm__nccl_window_t win);
    symm__nccl_team_t (*team_lsa)(symm__nccl_comm_t comm);
    /* ncclDevCommCreate / ncclDevCommDestroy: their struct arguments are C++
     * types, handled in nccl_devcomm.cu. */
    void *dev_comm_create;
    void *dev_comm_destroy;
    symm__nccl_result_t (*group_start)(void);
    symm__nccl_result_t (*group_end)(void);
    symm__nccl_result_t (*all_reduce)(const void *send, void *recv, size_t count, int dtype, int op,
                                      symm__nccl_comm_t comm, symm__nccl_stream_t stream);
    symm__nccl_result_t (*reduce_scatter)(const void *send, void *recv, size_t recv_count, int dtype,
                                          int op, symm__nccl_comm_t comm, symm__nccl_stream_t stream);
    symm__nccl_result_t (*all_gather)(const void *send, void *recv, size_t send_count, int dtype,
                                      symm__nccl_comm_t comm, symm__nccl_stream_t stream);
    symm__nccl_result_t (*all_to_all)(const void *send, void *recv, size_t count, int dtype,
                                      symm__nccl_comm_t comm, symm__nccl_stream_t stream);
    symm__nccl_result_t (*broadcast)(const void *send, void *recv, size_t count, int dtype, int root,
                                     symm__nccl_comm_t comm, symm__nccl_stream_t stream);
} symm__nccl_lib_t;

/* Open NCCL: `where` (SYMM_NCCL_LIB) when set, else the copy this process
 * already loaded (torch's), else the loader's path, else the copy the build
 * found (SYMM_NCCL_LIB_HINT). Refuses a version below SYMM__NCCL_MIN_VERSION.
 * Kept loaded for the life of the process. Errors: SYMM_ERR_UNSUPPORTED. */
symm_status_t symm__nccl_lib_open(const char *where, symm__nccl_lib_t *out);

/* "ncclInvalidUsage: <last error of comm>" for messages; never NULL. */
const char *symm__nccl_errstr(const symm__nccl_lib_t *lib, symm__nccl_comm_t comm, symm__nccl_result_t r);

#ifdef __cplusplus
}
#endif

#endif /* SYMM_BACKEND_NCCL_LIB_H */
