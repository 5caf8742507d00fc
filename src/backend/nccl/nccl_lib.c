/*
 * nccl_lib.c - see nccl_lib.h.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "backend/dlib.h"
#include "backend/nccl/nccl_lib.h"
#include "core/log.h"

#ifndef SYMM_NCCL_LIB_HINT
#  define SYMM_NCCL_LIB_HINT ""
#endif

/* Opened once per process and never closed: NCCL keeps proxy threads and
 * CUDA callbacks that must outlive any one symm_init. */
static symm__nccl_lib_t g_lib;

symm_status_t symm__nccl_lib_open(const char *where, symm__nccl_lib_t *out) {
    if (g_lib.dl) {
        *out = g_lib;
        return SYMM_SUCCESS;
    }
    symm__nccl_lib_t lib;
    memset(&lib, 0, sizeof lib);
    symm_status_t st = symm__dlib_open(SYMM__NCCL_SONAME, where, "SYMM_NCCL_LIB", SYMM_NCCL_LIB_HINT,
                                       "install NCCL 2.28 or newer (pip install nvidia-nccl-cu13)",
                                       &lib.dl, lib.path, sizeof lib.path);
    if (st != SYMM_SUCCESS)
        return st;
#define S(name, field) {#name, (void **)&lib.field, 0}
    const symm__dlib_sym_t syms[] = {
        S(ncclGetVersion, get_version),
        S(ncclGetErrorString, get_error_string),
        S(ncclGetLastError, get_last_error),
        S(ncclGetUniqueId, get_unique_id),
        S(ncclCommInitRankConfig, comm_init_rank_config),
        S(ncclCommFinalize, comm_finalize),
        S(ncclCommDestroy, comm_destroy),
        S(ncclCommAbort, comm_abort),
        S(ncclCommGetAsyncError, comm_get_async_error),
        S(ncclMemAlloc, mem_alloc),
        S(ncclMemFree, mem_free),
        S(ncclCommWindowRegister, window_register),
        S(ncclCommWindowDeregister, window_deregister),
        S(ncclTeamLsa, team_lsa),
        S(ncclDevCommCreate, dev_comm_create),
        S(ncclDevCommDestroy, dev_comm_destroy),
        S(ncclGroupStart, group_start),
        S(ncclGroupEnd, group_end),
        S(ncclAllReduce, all_reduce),
        S(ncclReduceScatter, reduce_scatter),
        S(ncclAllGather, all_gather),
        S(ncclAlltoAll, all_to_all),
        S(ncclBroadcast, broadcast),
    };
#undef S
    st = symm__dlib_resolve(lib.dl, lib.path, syms, (int)(sizeof syms / sizeof syms[0]));
    if (st == SYMM_SUCCESS && (lib.get_version(&lib.version) != SYMM__NCCL_SUCCESS ||
                               lib.version < SYMM__NCCL_MIN_VERSION))
        st = symm__error(SYMM_ERR_UNSUPPORTED, "%s is NCCL version code %d; symm's nccl backend needs "
                         "NCCL 2.28 or newer (device API with symmetric windows)", lib.path, lib.version);
    if (st != SYMM_SUCCESS) {
        dlclose(lib.dl);
        return st;
    }
    g_lib = lib;
    *out = lib;
    return SYMM_SUCCESS;
}

const char *symm__nccl_errstr(const symm__nccl_lib_t *lib, symm__nccl_comm_t comm, symm__nccl_result_t r) {
    static _Thread_local char buf[512];
    const char *name = lib && lib->get_error_string ? lib->get_error_string(r) : NULL;
    const char *last = lib && lib->get_last_error ? lib->get_last_error(comm) : NULL;
    snprintf(buf, sizeof buf, "%s (%d)%s%s", name ? name : "NCCL error", r, last && *last ? ": " : "",
             last && *last ? last : "");
    return buf;
}
