/*
 * dlib.h - opening a communication library at run time (the scale-out
 * backends' dlopen), with one message that says everything a user needs
 * when it is not there.
 */
#ifndef SYMM_BACKEND_DLIB_H
#define SYMM_BACKEND_DLIB_H

#include <stddef.h>

#include "symm/symm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One entry point: its name and where its address goes. */
typedef struct symm__dlib_sym {
    const char *name;
    void **slot;
    int optional; /* 1: NULL when missing; 0: missing is an error */
} symm__dlib_sym_t;

/*
 * Open `soname` (e.g. "libnccl.so.2"), trying in order:
 *   1. `where` when non-empty: a file, or a folder holding `soname`
 *      (the backend's SYMM_*_LIB variable, named `where_var` in messages);
 *   2. a copy this process already loaded (RTLD_NOLOAD), so a program that
 *      links the library itself shares its one instance with symm;
 *   3. the loader's search path (LD_LIBRARY_PATH, rpath, ld.so.cache);
 *   4. `hint` when non-empty: the copy the build found.
 * When `where` is set, only 1 is tried. On success *dl is the handle and
 * `path` names what was opened. Errors: SYMM_ERR_UNSUPPORTED with every
 * attempt and its dlerror, and `install` (what to install) appended.
 */
symm_status_t symm__dlib_open(const char *soname, const char *where, const char *where_var,
                              const char *hint, const char *install, void **dl, char *path,
                              size_t path_len);

/* Resolve `n` entry points; SYMM_ERR_UNSUPPORTED naming the first missing
 * required one (the library is then too old or not the one expected). */
symm_status_t symm__dlib_resolve(void *dl, const char *path, const symm__dlib_sym_t *syms, int n);

#ifdef __cplusplus
}
#endif

#endif /* SYMM_BACKEND_DLIB_H */
