/*
 * env.c - parsing of the environment table (env_table.h) and its listing.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/env.h"
#include "core/log.h"

enum env_type { T_BOOL, T_INT, T_SIZE, T_SECONDS, T_STRING, T_SECRET, T_LOGLEVEL };

typedef struct env_row {
    const char *name;
    const char *type_name;
    enum env_type type;
    const char *def;
    const char *help;
    size_t offset;
} env_row_t;

#define SYMM__ENV_ROW(field, name, type, def, help) \
    {#name, #type, T_##type, def, help, offsetof(symm__env_t, field)},
static const env_row_t g_rows[] = {SYMM__ENV_TABLE(SYMM__ENV_ROW)};
#undef SYMM__ENV_ROW
#define N_ROWS (sizeof g_rows / sizeof g_rows[0])

static symm__env_t g_env;
static int g_env_loaded;
static pthread_once_t g_defaults_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_intern_lock = PTHREAD_MUTEX_INITIALIZER;

/* Strings taken from the environment are copied once and kept for the life
 * of the process, so a parsed symm__env_t stays valid when the caller later
 * changes its environment, and copies of the struct need no ownership. */
typedef struct interned {
    struct interned *next;
    char text[];
} interned_t;
static interned_t *g_interned;

static const char *intern(const char *text) {
    const char *out = NULL;
    pthread_mutex_lock(&g_intern_lock);
    for (interned_t *it = g_interned; it; it = it->next)
        if (strcmp(it->text, text) == 0) {
            out = it->text;
            break;
        }
    if (!out) {
        size_t len = strlen(text);
        interned_t *it = malloc(sizeof *it + len + 1);
        if (it) {
            memcpy(it->text, text, len + 1);
            it->next = g_interned;
            g_interned = it;
            out = it->text;
        }
    }
    pthread_mutex_unlock(&g_intern_lock);
    return out;
}

int symm__parse_size(const char *text, size_t *out) {
    if (!text || !out)
        return -1;
    while (isspace((unsigned char)*text))
        text++;
    if (!isdigit((unsigned char)*text))
        return -1; /* also rejects a sign */
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno == ERANGE)
        return -1;
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    case 'T': shift = 40; end++; break;
    default: break;
    }
    /* Accept "K", "KB", "KiB" (all binary) and a bare "B". */
    if (shift && (end[0] == 'i' || end[0] == 'I') && (end[1] == 'B' || end[1] == 'b'))
        end += 2;
    else if (end[0] == 'B' || end[0] == 'b')
        end++;
    while (isspace((unsigned char)*end))
        end++;
    if (*end != '\0')
        return -1;
    if (shift && v > (SIZE_MAX >> shift))
        return -1;
    if (v > SIZE_MAX)
        return -1;
    *out = (size_t)(v << shift);
    return 0;
}

static int parse_bool(const char *text, int *out) {
    static const char *yes[] = {"1", "true", "yes", "on", "y"};
    static const char *no[] = {"0", "false", "no", "off", "n"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcasecmp(text, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcasecmp(text, no[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    return -1;
}

static int parse_int(const char *text, long long *out) {
    errno = 0;
    char *end = NULL;
    long long v = strtoll(text, &end, 10);
    if (errno == ERANGE || end == text)
        return -1;
    while (isspace((unsigned char)*end))
        end++;
    if (*end != '\0')
        return -1;
    *out = v;
    return 0;
}

/* Seconds as a non-negative finite number, optionally followed by "s". */
static int parse_seconds(const char *text, double *out) {
    errno = 0;
    char *end = NULL;
    double v = strtod(text, &end);
    if (errno == ERANGE || end == text || !isfinite(v) || v < 0)
        return -1;
    if (*end == 's' || *end == 'S')
        end++;
    while (isspace((unsigned char)*end))
        end++;
    if (*end != '\0')
        return -1;
    *out = v;
    return 0;
}

static int parse_loglevel(const char *text, symm__log_level_t *out) {
    static const struct { const char *name; symm__log_level_t level; } names[] = {
        {"error", SYMM__LOG_ERROR}, {"warn", SYMM__LOG_WARN}, {"warning", SYMM__LOG_WARN},
        {"info", SYMM__LOG_INFO},   {"debug", SYMM__LOG_DEBUG}, {"0", SYMM__LOG_ERROR},
        {"1", SYMM__LOG_WARN},      {"2", SYMM__LOG_INFO},      {"3", SYMM__LOG_DEBUG}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(text, names[i].name) == 0) {
            *out = names[i].level;
            return 0;
        }
    return -1;
}

static const char *expected(enum env_type type) {
    switch (type) {
    case T_BOOL:     return "expected 1/0, true/false, yes/no or on/off";
    case T_INT:      return "expected an integer";
    case T_SIZE:     return "expected a byte count with optional K/M/G/T suffix, e.g. 256M";
    case T_SECONDS:  return "expected a non-negative number of seconds";
    case T_STRING:   return "expected a string";
    case T_SECRET:   return "expected a string";
    case T_LOGLEVEL: return "expected error, warn, info or debug";
    }
    return "?";
}

/* Parse `text` as row `row` into the matching field of *env; 0 on success.
 * Strings are stored as given: the caller interns environment values. */
static int parse_row(const env_row_t *row, const char *text, symm__env_t *env) {
    char *field = (char *)env + row->offset;
    switch (row->type) {
    case T_BOOL: {
        int v;
        if (parse_bool(text, &v))
            return -1;
        memcpy(field, &v, sizeof v);
        return 0;
    }
    case T_INT: {
        long long v;
        if (parse_int(text, &v))
            return -1;
        memcpy(field, &v, sizeof v);
        return 0;
    }
    case T_SIZE: {
        size_t v;
        if (symm__parse_size(text, &v))
            return -1;
        memcpy(field, &v, sizeof v);
        return 0;
    }
    case T_SECONDS: {
        double v;
        if (parse_seconds(text, &v))
            return -1;
        memcpy(field, &v, sizeof v);
        return 0;
    }
    case T_STRING:
    case T_SECRET:
        memcpy(field, &text, sizeof text);
        return 0;
    case T_LOGLEVEL: {
        symm__log_level_t v;
        if (parse_loglevel(text, &v))
            return -1;
        memcpy(field, &v, sizeof v);
        return 0;
    }
    }
    return -1;
}

static void fill_defaults(symm__env_t *env) {
    memset(env, 0, sizeof *env);
    for (size_t i = 0; i < N_ROWS; i++)
        if (parse_row(&g_rows[i], g_rows[i].def, env)) {
            /* A default that does not parse is a bug in env_table.h. */
            fprintf(stderr, "symm: bad default \"%s\" for %s in env_table.h\n", g_rows[i].def,
                    g_rows[i].name);
            abort();
        }
}

static void init_defaults(void) { fill_defaults(&g_env); }

const symm__env_t *symm__env(void) {
    pthread_once(&g_defaults_once, init_defaults);
    return &g_env;
}

void symm__env_set(const symm__env_t *env) {
    pthread_once(&g_defaults_once, init_defaults);
    if (env) {
        g_env = *env;
        g_env_loaded = 1;
    }
}

int symm__env_loaded(void) { return g_env_loaded; }

/* The value a variable is set to, or NULL if unset or empty (empty means
 * "use the default", as most launchers export empty variables freely). */
static const char *env_value(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

symm_status_t symm__env_load(symm__env_t *out) {
    if (!out)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm__env_load: NULL output");
    symm__env_t tmp;
    fill_defaults(&tmp);
    for (size_t i = 0; i < N_ROWS; i++) {
        const env_row_t *row = &g_rows[i];
        const char *v = env_value(row->name);
        if (!v)
            continue;
        if (row->type == T_STRING || row->type == T_SECRET) {
            v = intern(v);
            if (!v)
                return symm__error(SYMM_ERR_NO_MEMORY, "environment: cannot copy %s", row->name);
        }
        if (parse_row(row, v, &tmp))
            return symm__error(SYMM_ERR_ENV, "environment: %s=\"%.80s\" is not valid (%s)",
                               row->name, v, expected(row->type));
    }
    *out = tmp;
    return SYMM_SUCCESS;
}

static void print_value(FILE *f, const env_row_t *row, const symm__env_t *env) {
    const char *field = (const char *)env + row->offset;
    switch (row->type) {
    case T_BOOL: { int v; memcpy(&v, field, sizeof v); fprintf(f, "%d", v); break; }
    case T_INT: { long long v; memcpy(&v, field, sizeof v); fprintf(f, "%lld", v); break; }
    case T_SIZE: { size_t v; memcpy(&v, field, sizeof v); fprintf(f, "%zu", v); break; }
    case T_SECONDS: { double v; memcpy(&v, field, sizeof v); fprintf(f, "%g", v); break; }
    case T_STRING: { const char *v; memcpy(&v, field, sizeof v); fprintf(f, "\"%s\"", v); break; }
    case T_SECRET: fprintf(f, "(set, not shown)"); break;
    case T_LOGLEVEL: {
        symm__log_level_t v;
        memcpy(&v, field, sizeof v);
        static const char *names[] = {"error", "warn", "info", "debug"};
        fprintf(f, "%s", (unsigned)v < 4 ? names[v] : "?");
        break;
    }
    }
}

void symm__env_print(FILE *stream) {
    FILE *f = stream ? stream : stdout;
    fprintf(f, "symm environment variables (name, type, default, current value):\n");
    for (size_t i = 0; i < N_ROWS; i++) {
        const env_row_t *row = &g_rows[i];
        const char *v = env_value(row->name);
        fprintf(f, "  %-24s %-8s default \"%s\"  current ", row->name, row->type_name, row->def);
        if (!v) {
            fprintf(f, "(unset)");
        } else {
            /* Show what the value parses to, or that it would be rejected. */
            symm__env_t tmp;
            fill_defaults(&tmp);
            if (row->type == T_SECRET)
                fprintf(f, "(set, %zu characters, not shown)", strlen(v));
            else if (parse_row(row, v, &tmp))
                fprintf(f, "\"%.80s\" (INVALID: %s)", v, expected(row->type));
            else if (row->type == T_STRING)
                fprintf(f, "\"%.200s\"", v);
            else {
                fprintf(f, "\"%.80s\" = ", v);
                print_value(f, row, &tmp);
            }
        }
        fprintf(f, "\n      %s\n", row->help);
    }
}

void symm_print_env(void *stream) { symm__env_print((FILE *)stream); }
