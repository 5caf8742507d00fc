/*
 * nvshmem_lib.h - libnvshmem_host.so.3, opened at run time.
 *
 * libsymm does not link NVSHMEM: the nvshmem backend opens the library when
 * symm_init selects it (SYMM_BACKEND=nvshmem), so libsymm loads and runs its
 * other backends on machines without NVSHMEM, and a missing library is one
 * clear error instead of a loader failure at start-up.
 */
#ifndef SYMM_BACKEND_NVSHMEM_LIB_H
#define SYMM_BACKEND_NVSHMEM_LIB_H

#include "symm/symm.h"
#include "backend/nvshmem/nvshmem_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The file the loader asks for when nothing else is said. */
#define SYMM__NVSHMEM_SONAME "libnvshmem_host.so.3"

typedef struct symm__nvshmem_lib {
    void *dl;
    char path[512];       /* what was opened, for messages */
    int major, minor, patch;

    int (*get_uniqueid)(symm__nvshmem_uid_t *uid);
    int (*set_attr_uniqueid_args)(int rank, int nranks, const symm__nvshmem_uid_t *uid,
                                  symm__nvshmem_init_attr_t *attr);
    int (*hostlib_init_attr)(unsigned int flags, symm__nvshmem_init_attr_t *attr);
    void (*hostlib_finalize)(void);
    int (*init_status)(void);
    void (*vendor_get_version_info)(int *major, int *minor, int *patch);
    int (*my_pe)(void);
    int (*n_pes)(void);
    void *(*align)(size_t alignment, size_t size);
    void (*free)(void *ptr);
    void *(*ptr)(const void *ptr, int pe);
    void (*barrier_all)(void);
    void (*barrier_all_on_stream)(symm__nvshmem_stream_t stream);
    int (*barrier_on_stream)(symm__nvshmem_team_t team, symm__nvshmem_stream_t stream);
    void (*quiet_on_stream)(symm__nvshmem_stream_t stream);
    int (*cumodule_init)(symm__nvshmem_module_t module);
    /* Byte-wise collectives (all types); the typed reductions are looked up
     * by name (symm__nvshmem_lib_sym). */
    int (*fcollectmem_on_stream)(symm__nvshmem_team_t team, void *dest, const void *src, size_t nelem,
                                 symm__nvshmem_stream_t stream);
    int (*alltoallmem_on_stream)(symm__nvshmem_team_t team, void *dest, const void *src, size_t nelem,
                                 symm__nvshmem_stream_t stream);
    int (*broadcastmem_on_stream)(symm__nvshmem_team_t team, void *dest, const void *src, size_t nelem,
                                  int root, symm__nvshmem_stream_t stream);
} symm__nvshmem_lib_t;

/*
 * Open NVSHMEM's host library: `where` (SYMM_NVSHMEM_LIB: a file, or a folder
 * holding libnvshmem_host.so.3) when set, else the copy this process already
 * loaded (a CUDA C program that links NVSHMEM itself: symm must use that one,
 * not a second instance), else the loader's search path, else the copy the
 * build found (SYMM_NVSHMEM_LIB_HINT). Resolves every entry point above and
 * refuses a major version other than SYMM__NVSHMEM_ABI_MAJOR. The library
 * stays loaded for the life of the process (its threads and exit handlers
 * outlive symm_finalize); a later call returns the same one. Errors:
 * SYMM_ERR_UNSUPPORTED naming each place tried and what to install. Local.
 */
symm_status_t symm__nvshmem_lib_open(const char *where, symm__nvshmem_lib_t *out);

/* An entry point by name, or NULL (for the typed collectives). */
void *symm__nvshmem_lib_sym(const symm__nvshmem_lib_t *lib, const char *name);


#ifdef __cplusplus
}
#endif

#endif /* SYMM_BACKEND_NVSHMEM_LIB_H */
