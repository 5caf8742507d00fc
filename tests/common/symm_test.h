/*
 * symm_test.h - what every symm test shares: checks that fail loudly with the
 * PE and line, the skip convention, and seeded random data.
 *
 * A test exits 0 when it passed, 77 when it could not run here (it prints
 * "SKIP: <why>" first, so a skip is never silent), anything else on failure.
 */
#ifndef SYMM_TEST_H
#define SYMM_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symm/symm.h"

#define SYMM_TEST_SKIP 77

#define TEST_FAIL(...)                                                            \
    do {                                                                          \
        fprintf(stderr, "FAIL [pe %d] %s:%d: ", symm_my_pe(), __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                                             \
        fprintf(stderr, "\n");                                                    \
        fflush(stderr);                                                           \
        exit(1);                                                                  \
    } while (0)

#define TEST_ASSERT(cond, ...)                                                    \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "assertion `%s` ", #cond);                            \
            TEST_FAIL(__VA_ARGS__);                                               \
        }                                                                         \
    } while (0)

/* A symm call that must succeed. */
#define SYMM_CHECK(call)                                                          \
    do {                                                                          \
        symm_status_t s__ = (call);                                               \
        if (s__ != SYMM_SUCCESS)                                                  \
            TEST_FAIL("%s -> %s (%s)", #call, symm_strerror(s__), symm_last_error()); \
    } while (0)

/* A symm call that must fail with `expect`. */
#define SYMM_EXPECT(call, expect)                                                 \
    do {                                                                          \
        symm_status_t s__ = (call);                                               \
        if (s__ != (expect))                                                      \
            TEST_FAIL("%s -> %s, expected %s", #call, symm_strerror(s__),         \
                      symm_strerror(expect));                                     \
    } while (0)

#define TEST_SKIP(...)                                                            \
    do {                                                                          \
        printf("SKIP: ");                                                         \
        printf(__VA_ARGS__);                                                      \
        printf("\n");                                                             \
        fflush(stdout);                                                           \
        exit(SYMM_TEST_SKIP);                                                     \
    } while (0)

/* SYMM_TEST_SMALL=1 (set by scripts/gpu_sanitize.sh): a test that knows it
 * keeps every kind of case but runs fewer repetitions and smaller sizes, so
 * that it fits under compute-sanitizer; unset or 0: the full run. */
static inline int symm_test_small(void) {
    const char *s = getenv("SYMM_TEST_SMALL");
    return s && s[0] && strcmp(s, "0") != 0;
}

/* splitmix64: a fresh, reproducible stream per (seed, pe, iteration). */
static inline uint64_t symm_test_rand(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline void symm_test_fill(void *buf, size_t n, uint64_t seed) {
    uint64_t st = seed;
    unsigned char *p = (unsigned char *)buf;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t r = symm_test_rand(&st);
        memcpy(p + i, &r, 8);
    }
    if (i < n) {
        uint64_t r = symm_test_rand(&st);
        memcpy(p + i, &r, n - i);
    }
}

/* Descriptors a program this process starts would inherit: a child forks
 * and execs this binary with "--count-fds", whose main answers with
 * symm_test_count_fds() (its open descriptors, as its exit status). */
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

static inline int symm_test_count_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    struct dirent *e;
    if (!d)
        return 255;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory's own */
}

static inline int symm_test_inherited_fds(void) {
    int st;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    TEST_ASSERT(pid >= 0, "fork");
    if (pid == 0) {
        execl("/proc/self/exe", "symm-test-count-fds", "--count-fds", (char *)NULL);
        _exit(254);
    }
    TEST_ASSERT(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) < 254, "fd-count child");
    return WEXITSTATUS(st);
}

#endif /* SYMM_TEST_H */
