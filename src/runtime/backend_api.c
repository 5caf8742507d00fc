/*
 * backend_api.c - symm_backend_name / _caps / _module_init / _module_source
 * (symm.h, "Backends"): what a program learns of the backend, and the
 * per-module set-up a scale-out backend's device library needs, done by
 * symm so that users have no init step of their own.
 */
#include <pthread.h>

#include "runtime/runtime.h"

const char *symm_backend_name(void) { return symm__rt.initialized ? symm__rt.be->ops->name : NULL; }

symm_status_t symm_backend_caps(uint32_t *caps) {
    SYMM__REQUIRE_INIT("symm_backend_caps");
    if (!caps)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_backend_caps: caps is NULL");
    *caps = symm__rt.be->caps;
    return SYMM_SUCCESS;
}

symm_status_t symm_backend_module_init(void *cumodule) {
    SYMM__REQUIRE_INIT("symm_backend_module_init");
    if (!cumodule)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_backend_module_init: module is NULL");
    symm__backend_t *be = symm__rt.be;
    return be->ops->module_init ? be->ops->module_init(be, cumodule) : SYMM_SUCCESS;
}

/* Registered module sources: constructors of CUDA C files register them
 * before main, libraries loaded later at any time. */
#define SYMM__MODULE_SOURCES 64
static void *(*g_sources[SYMM__MODULE_SOURCES])(void);
static int g_n_sources;
static pthread_mutex_t g_sources_lock = PTHREAD_MUTEX_INITIALIZER;

/* Modules set up in this run: the files of one program share their module,
 * and each registers it. */
static void *g_done[SYMM__MODULE_SOURCES];
static int g_n_done;

/* Set up one source's module, once per module and run. */
static void init_source(void *(*find)(void)) {
    symm__backend_t *be = symm__rt.be;
    void *fn = find(), *module = NULL;
    if (!fn) {
        SYMM_LOG_WARN("a module registered for backend set-up could not be found (cudaGetFuncBySymbol failed)");
        return;
    }
    symm_status_t st = be->ops->function_module(be, fn, &module);
    for (int i = 0; st == SYMM_SUCCESS && i < g_n_done; i++)
        if (g_done[i] == module)
            return;
    if (st == SYMM_SUCCESS && (st = be->ops->module_init(be, module)) == SYMM_SUCCESS &&
        g_n_done < SYMM__MODULE_SOURCES)
        g_done[g_n_done++] = module;
    if (st != SYMM_SUCCESS)
        SYMM_LOG_WARN("setting up a module for the %s backend failed: %s", be->ops->name, symm_last_error());
}

void symm__backend_modules_init(void) {
    if (!symm__rt.be->ops->module_init)
        return;
    pthread_mutex_lock(&g_sources_lock);
    g_n_done = 0; /* a new run: every module is set up again */
    for (int i = 0; i < g_n_sources; i++)
        init_source(g_sources[i]);
    pthread_mutex_unlock(&g_sources_lock);
}

void symm_backend_module_source(void *(*find)(void)) {
    if (!find)
        return;
    pthread_mutex_lock(&g_sources_lock);
    if (g_n_sources < SYMM__MODULE_SOURCES)
        g_sources[g_n_sources++] = find;
    else
        SYMM_LOG_WARN("more than %d modules registered for backend set-up; the rest are not set up",
                      SYMM__MODULE_SOURCES);
    if (symm__rt.initialized && symm__rt.be->ops->module_init)
        init_source(find);
    pthread_mutex_unlock(&g_sources_lock);
}
