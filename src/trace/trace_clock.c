/*
 * trace_clock.c - aligning the PEs' %globaltimer clocks: the estimate from
 * ping-pong rounds with PE 0, and the interpolation between the
 * measurements taken when a trace starts and when it stops.
 */
#include "trace/trace.h"

int symm__trace_clock_fit(const uint64_t *s, const uint64_t *e, const uint64_t *p, int rounds,
                          symm__trace_clock_t *out) {
    int best = -1;
    uint64_t best_rtt = 0;
    for (int r = 0; r < rounds; r++) {
        if (e[r] < s[r] || s[r] == 0)
            continue;
        uint64_t rtt = e[r] - s[r];
        if (best < 0 || rtt < best_rtt) {
            best = r;
            best_rtt = rtt;
        }
    }
    if (best < 0)
        return -1;
    /* the midpoint of PE 0's send and receive, without overflowing */
    uint64_t mid = s[best] + best_rtt / 2;
    out->valid = 1;
    out->offset = (int64_t)(p[best] - mid);
    out->rtt = best_rtt;
    out->at = mid;
    return 0;
}

int64_t symm__trace_clock_offset_at(uint64_t t, const symm__trace_clock_t *a, const symm__trace_clock_t *b) {
    if (!a->valid)
        return 0;
    if (!b || !b->valid || b->at == a->at)
        return a->offset;
    /* where t falls between the two measurements, on PE 0's clock */
    double ref = (double)(int64_t)(t - (uint64_t)a->offset - a->at);
    double span = (double)(int64_t)(b->at - a->at);
    double slope = (double)(b->offset - a->offset) / span;
    return a->offset + (int64_t)(slope * ref);
}

uint64_t symm__trace_to_ref(uint64_t t, const symm__trace_clock_t *a, const symm__trace_clock_t *b) {
    return t - (uint64_t)symm__trace_clock_offset_at(t, a, b);
}

double symm__trace_clock_drift_ppm(const symm__trace_clock_t *a, const symm__trace_clock_t *b) {
    if (!a->valid || !b || !b->valid || b->at == a->at)
        return 0.0;
    return (double)(b->offset - a->offset) * 1e6 / (double)(int64_t)(b->at - a->at);
}
