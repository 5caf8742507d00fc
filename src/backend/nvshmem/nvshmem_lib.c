/*
 * nvshmem_lib.c - see nvshmem_lib.h.
 */
#include <dlfcn.h>
#include <string.h>

#include "backend/dlib.h"
#include "backend/nvshmem/nvshmem_lib.h"
#include "core/log.h"

#ifndef SYMM_NVSHMEM_LIB_HINT
#  define SYMM_NVSHMEM_LIB_HINT ""
#endif

/* Opened once per process and never closed: NVSHMEM keeps threads, plugins
 * and exit handlers that must outlive any one symm_init. */
static symm__nvshmem_lib_t g_lib;

symm_status_t symm__nvshmem_lib_open(const char *where, symm__nvshmem_lib_t *out) {
    if (g_lib.dl) {
        *out = g_lib;
        return SYMM_SUCCESS;
    }
    symm__nvshmem_lib_t lib;
    memset(&lib, 0, sizeof lib);
    symm_status_t st = symm__dlib_open(SYMM__NVSHMEM_SONAME, where, "SYMM_NVSHMEM_LIB",
                                       SYMM_NVSHMEM_LIB_HINT,
                                       "install NVSHMEM 3 (pip install nvidia-nvshmem-cu13)", &lib.dl,
                                       lib.path, sizeof lib.path);
    if (st != SYMM_SUCCESS)
        return st;
#define S(name, field) {#name, (void **)&lib.field, 0}
    const symm__dlib_sym_t syms[] = {
        S(nvshmemx_get_uniqueid, get_uniqueid),
        S(nvshmemx_set_attr_uniqueid_args, set_attr_uniqueid_args),
        S(nvshmemx_hostlib_init_attr, hostlib_init_attr),
        S(nvshmemx_hostlib_finalize, hostlib_finalize),
        S(nvshmemx_init_status, init_status),
        S(nvshmemx_vendor_get_version_info, vendor_get_version_info),
        S(nvshmem_my_pe, my_pe),
        S(nvshmem_n_pes, n_pes),
        S(nvshmem_align, align),
        S(nvshmem_free, free),
        S(nvshmem_ptr, ptr),
        S(nvshmem_barrier_all, barrier_all),
        S(nvshmemx_barrier_all_on_stream, barrier_all_on_stream),
        S(nvshmemx_barrier_on_stream, barrier_on_stream),
        S(nvshmemx_quiet_on_stream, quiet_on_stream),
        S(nvshmemx_cumodule_init, cumodule_init),
        S(nvshmemx_fcollectmem_on_stream, fcollectmem_on_stream),
        S(nvshmemx_alltoallmem_on_stream, alltoallmem_on_stream),
        S(nvshmemx_broadcastmem_on_stream, broadcastmem_on_stream),
    };
#undef S
    st = symm__dlib_resolve(lib.dl, lib.path, syms, (int)(sizeof syms / sizeof syms[0]));
    if (st != SYMM_SUCCESS) {
        dlclose(lib.dl);
        return st;
    }
    lib.vendor_get_version_info(&lib.major, &lib.minor, &lib.patch);
    if (lib.major != SYMM__NVSHMEM_ABI_MAJOR) {
        st = symm__error(SYMM_ERR_UNSUPPORTED, "%s is NVSHMEM %d.%d.%d; symm's nvshmem backend needs "
                         "NVSHMEM %d.x", lib.path, lib.major, lib.minor, lib.patch,
                         SYMM__NVSHMEM_ABI_MAJOR);
        dlclose(lib.dl);
        return st;
    }
    g_lib = lib;
    *out = lib;
    return SYMM_SUCCESS;
}

void *symm__nvshmem_lib_sym(const symm__nvshmem_lib_t *lib, const char *name) {
    return lib && lib->dl ? dlsym(lib->dl, name) : NULL;
}

