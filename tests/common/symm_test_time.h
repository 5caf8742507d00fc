/*
 * symm_test_time.h - wall-clock helpers of the multi-process tests (bounds
 * on how fast a failure is noticed; never a benchmark). Needs POSIX
 * (clock_gettime, nanosleep): include after defining _GNU_SOURCE.
 */
#ifndef SYMM_TEST_TIME_H
#define SYMM_TEST_TIME_H

#include <time.h>

static inline double symm_test_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void symm_test_sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

#endif /* SYMM_TEST_TIME_H */
