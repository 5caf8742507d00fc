/*
 * test_status - status strings, the last-error message and log lines.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/env.h"
#include "core/log.h"
#include "symm_test.h"

static const struct { symm_status_t code; const char *name; } k_codes[] = {
    {SYMM_SUCCESS, "SYMM_SUCCESS"},
    {SYMM_ERR_INVALID_ARG, "SYMM_ERR_INVALID_ARG"},
    {SYMM_ERR_NOT_INITIALIZED, "SYMM_ERR_NOT_INITIALIZED"},
    {SYMM_ERR_ALREADY_INITIALIZED, "SYMM_ERR_ALREADY_INITIALIZED"},
    {SYMM_ERR_NO_MEMORY, "SYMM_ERR_NO_MEMORY"},
    {SYMM_ERR_HEAP_EXHAUSTED, "SYMM_ERR_HEAP_EXHAUSTED"},
    {SYMM_ERR_MISMATCH, "SYMM_ERR_MISMATCH"},
    {SYMM_ERR_INVALID_PE, "SYMM_ERR_INVALID_PE"},
    {SYMM_ERR_NOT_SYMMETRIC, "SYMM_ERR_NOT_SYMMETRIC"},
    {SYMM_ERR_INVALID_POINTER, "SYMM_ERR_INVALID_POINTER"},
    {SYMM_ERR_BOOTSTRAP, "SYMM_ERR_BOOTSTRAP"},
    {SYMM_ERR_PEER_DIED, "SYMM_ERR_PEER_DIED"},
    {SYMM_ERR_TIMEOUT, "SYMM_ERR_TIMEOUT"},
    {SYMM_ERR_CUDA, "SYMM_ERR_CUDA"},
    {SYMM_ERR_NO_DEVICE, "SYMM_ERR_NO_DEVICE"},
    {SYMM_ERR_NO_PEER_ACCESS, "SYMM_ERR_NO_PEER_ACCESS"},
    {SYMM_ERR_UNSUPPORTED, "SYMM_ERR_UNSUPPORTED"},
    {SYMM_ERR_ENV, "SYMM_ERR_ENV"},
    {SYMM_ERR_INTERNAL, "SYMM_ERR_INTERNAL"},
};
#define N_CODES (int)(sizeof k_codes / sizeof k_codes[0])

static void test_strerror(void) {
    /* The table above must cover the enum: its codes are 0..-18, contiguous. */
    TEST_ASSERT(N_CODES == 1 - (int)SYMM_ERR_INTERNAL, "test table is out of date");
    for (int i = 0; i < N_CODES; i++) {
        const char *s = symm_strerror(k_codes[i].code);
        TEST_ASSERT(s != NULL, "code %d", k_codes[i].code);
        size_t len = strlen(k_codes[i].name);
        /* Starts with the code's own name, followed by a description. */
        TEST_ASSERT(strncmp(s, k_codes[i].name, len) == 0 && s[len] == ':' && strlen(s) > len + 5,
                    "symm_strerror(%d) = \"%s\"", k_codes[i].code, s);
        TEST_ASSERT(strcmp(s, "unknown symm status") != 0, "code %d is unknown", k_codes[i].code);
        for (int j = 0; j < i; j++)
            TEST_ASSERT(strcmp(s, symm_strerror(k_codes[j].code)) != 0, "codes %d and %d share \"%s\"",
                        k_codes[i].code, k_codes[j].code, s);
    }
    int unknown[] = {1, 42, (int)SYMM_ERR_INTERNAL - 1, -1000, 0x7fffffff};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
        TEST_ASSERT(strcmp(symm_strerror((symm_status_t)unknown[i]), "unknown symm status") == 0,
                    "symm_strerror(%d) = \"%s\"", unknown[i], symm_strerror((symm_status_t)unknown[i]));
}

/* Run fn with stderr going to a temporary file; return what it wrote. */
static char *capture_stderr(void (*fn)(void)) {
    char path[] = "/tmp/symm_test_status_XXXXXX";
    int fd = mkstemp(path);
    TEST_ASSERT(fd >= 0, "mkstemp");
    unlink(path);
    fflush(stderr);
    int saved = dup(2);
    TEST_ASSERT(saved >= 0 && dup2(fd, 2) == 2, "dup2");
    fn();
    fflush(stderr);
    TEST_ASSERT(dup2(saved, 2) == 2, "dup2 back");
    close(saved);
    off_t size = lseek(fd, 0, SEEK_END);
    char *buf = calloc(1, (size_t)size + 1);
    TEST_ASSERT(buf && pread(fd, buf, (size_t)size, 0) == size, "read back");
    close(fd);
    return buf;
}

static void log_all_levels(void) {
    SYMM_LOG_ERROR("e-%d", 1);
    SYMM_LOG_WARN("w-%d", 2);
    SYMM_LOG_INFO("i-%d", 3);
    SYMM_LOG_DEBUG("d-%d", 4);
}

static void raise_error(void) {
    symm_status_t s = symm__error(SYMM_ERR_MISMATCH, "sizes differ: %d vs %d", 8, 9);
    TEST_ASSERT(s == SYMM_ERR_MISMATCH, "symm__error returns its status");
}

static void log_long(void) {
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    SYMM_LOG_ERROR("%s", big);
}

static void test_log(void) {
    symm__env_t env = *symm__env();
    TEST_ASSERT(env.log_level == SYMM__LOG_WARN, "default level is warn");

    /* Default (warn): error and warn only, PE unknown. */
    symm__log_set_pe(-1);
    char *out = capture_stderr(log_all_levels);
    TEST_ASSERT(strcmp(out, "[symm pe ?] ERROR: e-1\n[symm pe ?] WARN: w-2\n") == 0, "got \"%s\"", out);
    free(out);

    /* Debug level, PE known. */
    env.log_level = SYMM__LOG_DEBUG;
    symm__env_set(&env);
    symm__log_set_pe(3);
    out = capture_stderr(log_all_levels);
    TEST_ASSERT(strcmp(out, "[symm pe 3] ERROR: e-1\n[symm pe 3] WARN: w-2\n[symm pe 3] INFO: i-3\n"
                            "[symm pe 3] DEBUG: d-4\n") == 0,
                "got \"%s\"", out);
    free(out);

    /* Error level only. */
    env.log_level = SYMM__LOG_ERROR;
    symm__env_set(&env);
    out = capture_stderr(log_all_levels);
    TEST_ASSERT(strcmp(out, "[symm pe 3] ERROR: e-1\n") == 0, "got \"%s\"", out);
    free(out);

    /* A very long message is cut, still one line ending in '\n'. */
    out = capture_stderr(log_long);
    TEST_ASSERT(strncmp(out, "[symm pe 3] ERROR: xxx", 22) == 0, "got \"%.40s\"", out);
    TEST_ASSERT(strchr(out, '\n') == out + strlen(out) - 1, "one line");
    TEST_ASSERT(strstr(out, "...\n") != NULL, "cut marked");
    free(out);

    /* symm__error: last error set; printed only at debug level (the caller
     * reports it: once). */
    symm__error_clear();
    TEST_ASSERT(strcmp(symm_last_error(), "") == 0, "cleared");
    out = capture_stderr(raise_error);
    TEST_ASSERT(strcmp(out, "") == 0, "printed at error level: \"%s\"", out);
    free(out);
    env.log_level = SYMM__LOG_DEBUG;
    symm__env_set(&env);
    out = capture_stderr(raise_error);
    TEST_ASSERT(strcmp(out, "[symm pe 3] DEBUG: sizes differ: 8 vs 9\n") == 0, "got \"%s\"", out);
    free(out);
    TEST_ASSERT(strcmp(symm_last_error(), "pe 3: sizes differ: 8 vs 9") == 0, "last error \"%s\"",
                symm_last_error());
    /* Re-raising the last error with context does not corrupt it. */
    env.log_level = SYMM__LOG_ERROR;
    symm__env_set(&env);
    fflush(stderr);
    (void)symm__error(SYMM_ERR_BOOTSTRAP, "outer: %s", symm_last_error());
    TEST_ASSERT(strcmp(symm_last_error(), "pe 3: outer: pe 3: sizes differ: 8 vs 9") == 0,
                "last error \"%s\"", symm_last_error());
    symm__error_clear();
    TEST_ASSERT(strcmp(symm_last_error(), "") == 0, "cleared again");
}

static void *other_thread(void *arg) {
    (void)arg;
    TEST_ASSERT(strcmp(symm_last_error(), "") == 0, "a new thread starts with no last error");
    (void)symm__error(SYMM_ERR_TIMEOUT, "from another thread");
    TEST_ASSERT(strstr(symm_last_error(), "from another thread"), "own message");
    return NULL;
}

/* The last error belongs to the thread that raised it (a liveness watcher
 * must not overwrite the message the caller is about to read). */
static void test_thread_local(void) {
    (void)symm__error(SYMM_ERR_MISMATCH, "main thread error");
    pthread_t t;
    TEST_ASSERT(pthread_create(&t, NULL, other_thread, NULL) == 0, "pthread_create");
    TEST_ASSERT(pthread_join(t, NULL) == 0, "pthread_join");
    TEST_ASSERT(strstr(symm_last_error(), "main thread error"), "main thread's message kept: %s",
                symm_last_error());
    symm__error_clear();
}

int main(void) {
    test_strerror();
    test_log();
    test_thread_local();
    printf("test_status: OK\n");
    return 0;
}
