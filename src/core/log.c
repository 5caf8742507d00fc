/*
 * log.c - leveled logging to stderr and the per-thread last-error message.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"

#define SYMM__MSG_MAX 1024

static atomic_int g_log_pe = -1;
/* Per thread, so a liveness watcher thread never overwrites the message a
 * caller is about to read. */
static _Thread_local char t_last_error[SYMM__MSG_MAX + 32];

void symm__log_set_pe(int pe) { atomic_store(&g_log_pe, pe); }

static const char *level_name(symm__log_level_t level) {
    switch (level) {
    case SYMM__LOG_ERROR: return "ERROR";
    case SYMM__LOG_WARN:  return "WARN";
    case SYMM__LOG_INFO:  return "INFO";
    case SYMM__LOG_DEBUG: return "DEBUG";
    }
    return "?";
}

static void vlog(symm__log_level_t level, const char *fmt, va_list ap) {
    if ((int)level > (int)symm__env()->log_level)
        return;
    /* One buffer, one fwrite: lines of concurrent threads/processes do not
     * interleave (stderr is unbuffered, so this is one write()). */
    char line[SYMM__MSG_MAX + 64];
    int pe = atomic_load(&g_log_pe);
    int n = pe >= 0 ? snprintf(line, sizeof line, "[symm pe %d] %s: ", pe, level_name(level))
                    : snprintf(line, sizeof line, "[symm pe ?] %s: ", level_name(level));
    if (n < 0)
        return;
    size_t room = sizeof line - (size_t)n - 1; /* keep one byte for '\n' */
    int m = vsnprintf(line + n, room + 1, fmt, ap);
    if (m < 0)
        return;
    size_t len = (size_t)n + ((size_t)m < room ? (size_t)m : room);
    if ((size_t)m >= room)
        memcpy(line + len - 3, "...", 3);
    line[len++] = '\n';
    fwrite(line, 1, len, stderr);
}

void symm__log(symm__log_level_t level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vlog(level, fmt, ap);
    va_end(ap);
}

symm_status_t symm__error(symm_status_t status, const char *fmt, ...) {
    /* Format into a local first: the arguments may point into t_last_error
     * (re-raising symm_last_error() with more context). */
    char msg[SYMM__MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (m < 0)
        snprintf(msg, sizeof msg, "(unformattable message)");
    else if ((size_t)m >= sizeof msg)
        memcpy(msg + sizeof msg - 4, "...", 4);
    int pe = atomic_load(&g_log_pe);
    if (pe >= 0)
        snprintf(t_last_error, sizeof t_last_error, "pe %d: %s", pe, msg);
    else
        snprintf(t_last_error, sizeof t_last_error, "pe ?: %s", msg);
    /* The caller gets the message (symm_last_error, the Python exception):
     * printing it too would show it twice. SYMM_LOG_LEVEL=debug traces it. */
    symm__log(SYMM__LOG_DEBUG, "%s", msg);
    return status;
}

void symm__error_clear(void) { t_last_error[0] = '\0'; }

const char *symm_last_error(void) { return t_last_error; }
