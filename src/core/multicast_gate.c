/*
 * multicast_gate.c - whether this process may create multicast (NVLS)
 * objects (docs/design.md decision 7): opt-in with SYMM_ENABLE_MULTICAST=1, and
 * off whenever another library in the process was told to keep NVLS off,
 * because NVLS resources are shared by the node and a user who disabled them
 * for NCCL, NVSHMEM or torch means "no multicast on this job".
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/env.h"

/* Foreign variables are read with getenv here: they are not ours to list in
 * env_table.h. Their owners parse them as integers (NCCL) or booleans
 * (NVSHMEM, torch); we accept both spellings so no way of saying "off" is
 * missed. */
static int foreign_truth(const char *name, int *value) {
    const char *v = getenv(name);
    if (!v || !*v)
        return 0; /* unset */
    static const char *yes[] = {"true", "yes", "on", "y", "t"};
    static const char *no[] = {"false", "no", "off", "n", "f"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcasecmp(v, yes[i]) == 0) { *value = 1; return 1; }
        if (strcasecmp(v, no[i]) == 0) { *value = 0; return 1; }
    }
    char *end = NULL;
    long n = strtol(v, &end, 10);
    if (end == v)
        return 0; /* not a number: the owner would not understand it either */
    while (isspace((unsigned char)*end))
        end++;
    if (*end)
        return 0;
    *value = n != 0;
    return 1;
}

int symm_multicast_allowed(void) {
    int enabled;
    if (symm__env_loaded()) {
        enabled = symm__env()->enable_multicast;
    } else {
        /* Before symm_init: parse now rather than answer from the defaults. A
         * bad environment means no (the error is logged by the parser). */
        symm__env_t env;
        if (symm__env_load(&env) != SYMM_SUCCESS)
            return 0;
        enabled = env.enable_multicast;
    }
    if (!enabled)
        return 0;
    int v;
    if (foreign_truth("NCCL_NVLS_ENABLE", &v) && v == 0)
        return 0;
    if (foreign_truth("NVSHMEM_DISABLE_NVLS", &v) && v == 1)
        return 0;
    if (foreign_truth("TORCH_SYMM_MEM_DISABLE_MULTICAST", &v) && v == 1)
        return 0;
    return 1;
}
