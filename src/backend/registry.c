/*
 * registry.c - the backends SYMM_BACKEND can name (expanded from
 * symm/device/backend/list.h), and helpers shared by them.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "bootstrap/agree.h"
#include "core/log.h"

const symm__backend_ops_t *symm__backend_find(const char *name) {
    static const struct {
        const char *name;
        uint32_t kind;
        const symm__backend_ops_t *ops;
    } all[] = {
#define SYMM__X(be, KIND, ...) {#be, SYMM_BACKEND_##KIND, &symm__backend_##be##_ops},
        SYMM__BACKEND_LIST(SYMM__X)
#undef SYMM__X
    };
    if (!name || !*name)
        name = "native";
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        if (strcmp(all[i].name, name) != 0)
            continue;
        /* the list line and the backend's own table must agree (a bug otherwise) */
        if (strcmp(all[i].ops->name, all[i].name) != 0 || all[i].ops->kind != all[i].kind) {
            SYMM_LOG_ERROR("backend %s: its ops table says name %s, kind %u; its line in "
                           "symm/device/backend/list.h kind %u",
                           all[i].name, all[i].ops->name, (unsigned)all[i].ops->kind, (unsigned)all[i].kind);
            return NULL;
        }
        return all[i].ops;
    }
    return NULL;
}

symm_status_t symm__backend_open(const symm__backend_ops_t *ops, const symm__backend_args_t *args,
                                 symm__backend_t **out) {
    symm_status_t st = ops->load ? ops->load() : SYMM_SUCCESS;
    if ((st = symm__bootstrap_agree(args->boot, st, SYMM_SUCCESS, "loading the backend's library")) !=
        SYMM_SUCCESS)
        return st;
    if (!ops->on_native)
        return ops->open(args, out);
    symm__backend_args_t a = *args;
    /* native open's status is the same on every PE */
    st = symm__backend_native_ops.open(args, &a.native);
    if (st != SYMM_SUCCESS)
        return st;
    return ops->open(&a, out); /* owns a.native from here, also on failure */
}

int symm__parse_deny_peer(const char *text, int *i, int *j) {
    if (!text || !*text)
        return 0;
    char *end = NULL;
    long a = strtol(text, &end, 10);
    if (end == text || *end != ':' || a < 0 || a > 1 << 20)
        return -1;
    const char *second = end + 1;
    long b = strtol(second, &end, 10);
    if (end == second || *end != '\0' || b < 0 || b > 1 << 20)
        return -1;
    *i = (int)a;
    *j = (int)b;
    return 1;
}
