/*
 * test_trace_clock.c - the clock alignment of the device trace
 * (src/trace/trace_clock.c): the minimum-round-trip estimate from
 * ping-pong samples, the interpolation between two measurements, and the
 * drift figure.
 */
#include <math.h>
#include <stdio.h>

#include "symm_test.h"
#include "trace/trace.h"

/* Rounds against a peer whose clock reads `offset` ns more than PE 0's; each
 * round's one-way trips out and back are given (ns), so the true offset and
 * the error of each round's estimate are known. */
static void rounds(int64_t offset, const uint64_t *out_ns, const uint64_t *back_ns, int n, uint64_t *s, uint64_t *e,
                   uint64_t *p) {
    uint64_t t = 1000000000ull;
    for (int r = 0; r < n; r++) {
        s[r] = t;
        p[r] = t + out_ns[r] + (uint64_t)offset;
        e[r] = t + out_ns[r] + back_ns[r];
        t = e[r] + 1000;
    }
}

int main(void) {
    uint64_t s[8], e[8], p[8];
    symm__trace_clock_t c, a, b;

    /* symmetric trips: the estimate is exact, whichever round wins */
    {
        const uint64_t out[4] = {900, 700, 650, 800}, back[4] = {900, 700, 650, 800};
        rounds(123456, out, back, 4, s, e, p);
        TEST_ASSERT(symm__trace_clock_fit(s, e, p, 4, &c) == 0, "fit");
        TEST_ASSERT(c.valid && c.offset == 123456, "offset %lld", (long long)c.offset);
        TEST_ASSERT(c.rtt == 1300, "the shortest round trip (2 x 650), got %llu", (unsigned long long)c.rtt);
        TEST_ASSERT(c.at == s[2] + 650, "measured at the midpoint of round 2");
    }
    /* asymmetric trips: the shortest round wins, and its error is half the
     * difference of its trips, within half its round trip */
    {
        const uint64_t out[3] = {3000, 400, 2000}, back[3] = {500, 600, 100};
        rounds(-5000000, out, back, 3, s, e, p);
        TEST_ASSERT(symm__trace_clock_fit(s, e, p, 3, &c) == 0, "fit");
        TEST_ASSERT(c.rtt == 1000, "round 1 has the shortest trip, got rtt %llu", (unsigned long long)c.rtt);
        /* estimate = true + (out - back) / 2 = -5000000 - 100 */
        TEST_ASSERT(c.offset == -5000100, "offset %lld", (long long)c.offset);
        TEST_ASSERT(llabs(c.offset - (-5000000)) <= (long long)c.rtt / 2, "error within rtt/2");
    }
    /* unusable rounds (never sent, or answered before sent) are skipped */
    {
        uint64_t s2[3] = {0, 2000, 3000}, e2[3] = {0, 1000, 3500}, p2[3] = {7, 7, 3250 + 42};
        TEST_ASSERT(symm__trace_clock_fit(s2, e2, p2, 3, &c) == 0 && c.rtt == 500 && c.offset == 42,
                    "only round 2 counts (offset %lld, rtt %llu)", (long long)c.offset, (unsigned long long)c.rtt);
        TEST_ASSERT(symm__trace_clock_fit(s2, e2, p2, 2, &c) == -1, "no usable round");
    }
    /* interpolation: 1000 ns of drift over 1 s of PE 0's time */
    a = (symm__trace_clock_t){1, 5000000, 800, 2000000000ull};
    b = (symm__trace_clock_t){1, 5001000, 800, 3000000000ull};
    TEST_ASSERT(symm__trace_clock_offset_at(2000000000ull + 5000000, &a, &b) == 5000000, "at a");
    TEST_ASSERT(symm__trace_clock_offset_at(3000000000ull + 5001000, &a, &b) == 5001000, "at b");
    {
        int64_t mid = symm__trace_clock_offset_at(2500000000ull + 5000500, &a, &b);
        TEST_ASSERT(mid >= 5000499 && mid <= 5000501, "halfway: %lld", (long long)mid);
        int64_t after = symm__trace_clock_offset_at(4000000000ull + 5002000, &a, &b);
        TEST_ASSERT(after >= 5001999 && after <= 5002001, "extrapolated: %lld", (long long)after);
        uint64_t ref = symm__trace_to_ref(2500000000ull + 5000500, &a, &b);
        TEST_ASSERT(ref >= 2499999999ull && ref <= 2500000001ull, "back on PE 0's clock: %llu",
                    (unsigned long long)ref);
    }
    TEST_ASSERT(fabs(symm__trace_clock_drift_ppm(&a, &b) - 1.0) < 1e-9, "1 ppm");
    /* one measurement: a constant offset; none: no change */
    TEST_ASSERT(symm__trace_clock_offset_at(123, &a, NULL) == 5000000, "constant");
    b.valid = 0;
    TEST_ASSERT(symm__trace_clock_offset_at(123, &a, &b) == 5000000 && symm__trace_clock_drift_ppm(&a, &b) == 0.0,
                "b invalid");
    a.valid = 0;
    TEST_ASSERT(symm__trace_to_ref(777, &a, &b) == 777, "no measurement: unchanged");
    printf("trace clock: all checks passed\n");
    return 0;
}
