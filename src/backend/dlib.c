/*
 * dlib.c - see dlib.h.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/dlib.h"
#include "core/log.h"

/* Append the loader's reason (it names the file) to the attempts so far. */
static void note(char *log, size_t cap, const char *what) {
    const char *why = dlerror();
    size_t len = strlen(log);
    if (len + 8 < cap)
        snprintf(log + len, cap - len, "%s%s", len ? "; " : "", why ? why : what);
}

static void *try_open(const char *file, int flags, char *log, size_t cap) {
    (void)dlerror();
    void *dl = dlopen(file, flags);
    if (!dl)
        note(log, cap, file);
    return dl;
}

symm_status_t symm__dlib_open(const char *soname, const char *where, const char *where_var,
                              const char *hint, const char *install, void **dl, char *path,
                              size_t path_len) {
    char log[1536] = "";
    char file[1024];
    void *h = NULL;
    if (where && *where) {
        struct stat sb;
        if (stat(where, &sb) == 0 && S_ISDIR(sb.st_mode))
            snprintf(file, sizeof file, "%s/%s", where, soname);
        else
            snprintf(file, sizeof file, "%s", where);
        h = try_open(file, RTLD_NOW | RTLD_LOCAL, log, sizeof log);
        if (!h)
            return symm__error(SYMM_ERR_UNSUPPORTED, "%s=%s: cannot open it (%s); %s, or point %s at "
                               "the library or its folder", where_var, where, log, install, where_var);
    }
    if (!h) {
        snprintf(file, sizeof file, "%s", soname);
        (void)dlerror();
        h = dlopen(soname, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD); /* already in this process */
    }
    if (!h)
        h = try_open(soname, RTLD_NOW | RTLD_LOCAL, log, sizeof log);
    if (!h && hint && *hint) {
        snprintf(file, sizeof file, "%s", hint);
        h = try_open(hint, RTLD_NOW | RTLD_LOCAL, log, sizeof log);
    }
    if (!h)
        return symm__error(SYMM_ERR_UNSUPPORTED, "%s not found (%s); %s, or set %s to the library or "
                           "its folder", soname, log, install, where_var);
    /* The file actually mapped, when the loader can say. */
    struct link_map *lm = NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0])
        snprintf(path, path_len, "%s", lm->l_name);
    else
        snprintf(path, path_len, "%s", file);
    *dl = h;
    return SYMM_SUCCESS;
}

symm_status_t symm__dlib_resolve(void *dl, const char *path, const symm__dlib_sym_t *syms, int n) {
    for (int i = 0; i < n; i++) {
        (void)dlerror();
        void *p = dlsym(dl, syms[i].name);
        if (!p && !syms[i].optional)
            return symm__error(SYMM_ERR_UNSUPPORTED, "%s has no %s: not the library version symm "
                               "was written for", path, syms[i].name);
        *syms[i].slot = p;
    }
    return SYMM_SUCCESS;
}
