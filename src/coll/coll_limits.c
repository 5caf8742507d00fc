/*
 * coll_limits.c - AUTO's limits in force: the table of
 * include/symm/contract/coll_auto.h (SYMM__COLL_LIMITS, a column per team
 * size), SYMM_COLL_TUNE over it, and the bench's and tests' overrides
 * (symm__coll_tune_set) over both. Not thread-safe (as the other tuning
 * hooks): the overrides are process-wide settings every PE sets alike.
 */
#include <stdint.h>
#include <string.h>

#include "symm/symm.h"
#include "core/env.h"
#include "core/log.h"
#include "coll/coll.h"

enum {
#define LIM_ENUM(f, n2, n4, n8, help) LIM_##f,
    SYMM__COLL_LIMITS(LIM_ENUM)
#undef LIM_ENUM
    LIM_COUNT
};
static const char *const g_lim_name[LIM_COUNT] = {
#define LIM_NAME(f, n2, n4, n8, help) #f,
    SYMM__COLL_LIMITS(LIM_NAME)
#undef LIM_NAME
};
/* columns: 2 PEs, 3-4 PEs, 5 PEs and more */
static const uint64_t g_lim_table[3][LIM_COUNT] = {
#define LIM_N2(f, n2, n4, n8, help) n2,
#define LIM_N4(f, n2, n4, n8, help) n4,
#define LIM_N8(f, n2, n4, n8, help) n8,
    {SYMM__COLL_LIMITS(LIM_N2)},
    {SYMM__COLL_LIMITS(LIM_N4)},
    {SYMM__COLL_LIMITS(LIM_N8)},
#undef LIM_N2
#undef LIM_N4
#undef LIM_N8
};
static uint64_t g_env_val[LIM_COUNT], g_ovr_val[LIM_COUNT];
static unsigned char g_env_set[LIM_COUNT], g_ovr_set[LIM_COUNT];
static const char *g_env_parsed; /* the SYMM_COLL_TUNE text parsed into g_env_* */

static int lim_index(const char *name, size_t len) {
    for (int i = 0; i < LIM_COUNT; i++)
        if (strlen(g_lim_name[i]) == len && strncmp(g_lim_name[i], name, len) == 0)
            return i;
    return -1;
}

/* SYMM_COLL_TUNE: "name=value,name=value" (value: bytes with K/M/G, or never). */
static symm_status_t parse_tune(void) {
    const char *text = symm__env()->coll_tune ? symm__env()->coll_tune : "";
    uint64_t val[LIM_COUNT];
    unsigned char set[LIM_COUNT];
    if (g_env_parsed == text)
        return SYMM_SUCCESS;
    memset(set, 0, sizeof set);
    for (const char *p = text; *p;) {
        const char *end = strchr(p, ','), *eq;
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char value[64];
        size_t v = 0;
        int i;
        eq = memchr(p, '=', len);
        if (len == 0) {
            p = end ? end + 1 : p + len;
            continue;
        }
        if (!eq || (i = lim_index(p, (size_t)(eq - p))) < 0 || len - (size_t)(eq - p) - 1 >= sizeof value)
            return symm__error(SYMM_ERR_ENV, "SYMM_COLL_TUNE: \"%.*s\" is not name=bytes with a name of "
                               "include/symm/contract/coll_auto.h (SYMM__COLL_LIMITS)", (int)len, p);
        memcpy(value, eq + 1, len - (size_t)(eq - p) - 1);
        value[len - (size_t)(eq - p) - 1] = '\0';
        if (strcmp(value, "never") == 0)
            val[i] = UINT64_MAX;
        else if (symm__parse_size(value, &v) == 0)
            val[i] = (uint64_t)v;
        else
            return symm__error(SYMM_ERR_ENV, "SYMM_COLL_TUNE: %s=%s is not a size (bytes with K/M/G) or never",
                               g_lim_name[i], value);
        set[i] = 1;
        p = end ? end + 1 : p + len;
    }
    memcpy(g_env_val, val, sizeof val);
    memcpy(g_env_set, set, sizeof set);
    g_env_parsed = text;
    return SYMM_SUCCESS;
}

symm_status_t symm__coll_limits(int n, symm__coll_limits_t *out) {
    int col = n <= 2 ? 0 : n <= 4 ? 1 : 2;
    uint64_t v[LIM_COUNT];
    symm_status_t st = parse_tune();
    if (st != SYMM_SUCCESS)
        return st;
    for (int i = 0; i < LIM_COUNT; i++)
        v[i] = g_ovr_set[i] ? g_ovr_val[i] : g_env_set[i] ? g_env_val[i] : g_lim_table[col][i];
#define LIM_OUT(f, n2, n4, n8, help) out->f = v[LIM_##f];
    SYMM__COLL_LIMITS(LIM_OUT)
#undef LIM_OUT
    return SYMM_SUCCESS;
}

symm_status_t symm__coll_tune_set(const char *name, uint64_t value) {
    int i = name ? lim_index(name, strlen(name)) : -1;
    if (i < 0)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm__coll_tune_set: no limit named %s", name ? name : "(null)");
    g_ovr_val[i] = value;
    g_ovr_set[i] = 1;
    return SYMM_SUCCESS;
}

symm_status_t symm__coll_tune_clear(const char *name) {
    int i = name ? lim_index(name, strlen(name)) : -1;
    if (i < 0)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm__coll_tune_clear: no limit named %s", name ? name : "(null)");
    g_ovr_set[i] = 0;
    return SYMM_SUCCESS;
}

void symm__coll_tune_reset(void) { memset(g_ovr_set, 0, sizeof g_ovr_set); }
