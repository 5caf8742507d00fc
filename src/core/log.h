/*
 * log.h - leveled logging and the per-thread last-error message.
 *
 * Each line goes to stderr as "[symm pe N] LEVEL: message" ("pe ?" before the
 * bootstrap knows the rank). SYMM_LOG_LEVEL chooses the verbosity.
 */
#ifndef SYMM_CORE_LOG_H
#define SYMM_CORE_LOG_H

#include "symm/symm.h"
#include "core/env.h"

#if defined(__GNUC__)
#  define SYMM__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#  define SYMM__PRINTF(a, b)
#endif

/* The PE used as prefix; -1 for unknown. */
void symm__log_set_pe(int pe);

void symm__log(symm__log_level_t level, const char *fmt, ...) SYMM__PRINTF(2, 3);

#define SYMM_LOG_ERROR(...) symm__log(SYMM__LOG_ERROR, __VA_ARGS__)
#define SYMM_LOG_WARN(...)  symm__log(SYMM__LOG_WARN, __VA_ARGS__)
#define SYMM_LOG_INFO(...)  symm__log(SYMM__LOG_INFO, __VA_ARGS__)
#define SYMM_LOG_DEBUG(...) symm__log(SYMM__LOG_DEBUG, __VA_ARGS__)

/* Record `status` with a formatted message as the calling thread's last error
 * (symm_last_error) and return `status`, so a failure reads:
 *     return symm__error(SYMM_ERR_X, "what: %s", why);
 * The message reaches the user through the status, once: it is logged only at
 * debug level. What no caller receives (a watcher thread's finding) goes
 * through SYMM_LOG_ERROR instead. */
symm_status_t symm__error(symm_status_t status, const char *fmt, ...) SYMM__PRINTF(2, 3);

/* Clear the last-error message (each public entry point calls it). */
void symm__error_clear(void);

#endif /* SYMM_CORE_LOG_H */
