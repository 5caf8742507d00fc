/*
 * env.h - parsed environment (see env_table.h for the variables).
 */
#ifndef SYMM_CORE_ENV_H
#define SYMM_CORE_ENV_H

#include <stdio.h>
#include "symm/symm.h"
#include "core/env_table.h"

typedef enum symm__log_level {
    SYMM__LOG_ERROR = 0,
    SYMM__LOG_WARN  = 1,
    SYMM__LOG_INFO  = 2,
    SYMM__LOG_DEBUG = 3
} symm__log_level_t;

typedef struct symm__env {
#define SYMM__ENV_FIELD_BOOL     int
#define SYMM__ENV_FIELD_INT      long long
#define SYMM__ENV_FIELD_SIZE     size_t
#define SYMM__ENV_FIELD_SECONDS  double
#define SYMM__ENV_FIELD_STRING   const char *
#define SYMM__ENV_FIELD_SECRET   const char *
#define SYMM__ENV_FIELD_LOGLEVEL symm__log_level_t
#define SYMM__ENV_DECLARE(field, name, type, def, help) SYMM__ENV_FIELD_##type field;
    SYMM__ENV_TABLE(SYMM__ENV_DECLARE)
#undef SYMM__ENV_DECLARE
} symm__env_t;

/* Parse every variable of the table from the process environment into *out.
 * A value that does not parse is an error naming the variable and the value
 * (SYMM_ERR_ENV); *out is untouched then. */
symm_status_t symm__env_load(symm__env_t *out);

/* The environment as parsed by the last successful symm__env_load (init calls
 * it); before that, the table's defaults. Never NULL. */
const symm__env_t *symm__env(void);

/* Replace the current parsed environment (init does this after loading). */
void symm__env_set(const symm__env_t *env);

/* Non-zero once symm__env_set has been called (symm__env() no longer holds
 * just the defaults). */
int symm__env_loaded(void);

/* Parse a size with optional K/M/G/T (binary) suffix; 0 on success. */
int symm__parse_size(const char *text, size_t *out);

/* Print the table (name, type, default, current value, help). */
void symm__env_print(FILE *stream);

#endif /* SYMM_CORE_ENV_H */
