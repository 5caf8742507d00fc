/*
 * trace.h - the device trace's host side, shared by the files of src/trace:
 * the clock alignment (trace_clock.c), the JSON writer (trace_json.c), the
 * collective calls (trace_host.c) and the clock kernel (trace_k.cu).
 * trace_clock.c and trace_json.c are pure functions of their inputs (the
 * CPU tests in tests/trace call them directly).
 */
#ifndef SYMM_TRACE_INTERNAL_H
#define SYMM_TRACE_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "symm/symm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Ping-pong rounds per peer and clock measurement. */
#define SYMM__TRACE_CLOCK_ROUNDS 16

/* One PE's clock against PE 0's at one measurement. */
typedef struct symm__trace_clock {
    int valid;
    int64_t offset; /* this PE's %globaltimer minus PE 0's, ns */
    uint64_t rtt;   /* round trip of the round the estimate comes from, ns (0 for PE 0) */
    uint64_t at;    /* PE 0's time of that round's midpoint */
} symm__trace_clock_t;

/* The estimate from `rounds` ping-pongs between PE 0 and a peer: PE 0 sent
 * round r at s[r] and saw the answer at e[r] (PE 0's clock); the peer saw
 * the ping at p[r] (its clock). The round with the shortest round trip
 * wins; the offset is p - (s + e) / 2, off by at most half that round trip.
 * Rounds with e < s are ignored. Returns 0, or -1 when no round is usable. */
int symm__trace_clock_fit(const uint64_t *s, const uint64_t *e, const uint64_t *p, int rounds,
                          symm__trace_clock_t *out);

/* PE 0's time of local time t on a PE measured at a and (when valid) b:
 * the offset is interpolated linearly between the two measurements (and
 * extrapolated beyond them), which follows a constant drift of the clocks. */
int64_t symm__trace_clock_offset_at(uint64_t t, const symm__trace_clock_t *a, const symm__trace_clock_t *b);
uint64_t symm__trace_to_ref(uint64_t t, const symm__trace_clock_t *a, const symm__trace_clock_t *b);

/* Drift between two measurements in parts per million (0 when b is not valid). */
double symm__trace_clock_drift_ppm(const symm__trace_clock_t *a, const symm__trace_clock_t *b);

/* A name for words of one PE's memory (symm_trace_label): 64 bytes. */
#define SYMM__TRACE_LABEL_NAME 44
typedef struct symm__trace_label {
    uint64_t addr, nbytes;
    int32_t pe; /* the PE that writes them, -1: not said */
    char name[SYMM__TRACE_LABEL_NAME];
} symm__trace_label_t;

/* Everything one PE contributes to a dump. */
typedef struct symm__trace_pe_data {
    int pe;                      /* world PE */
    uint64_t recorded, dropped;
    uint32_t nsub, sub_cap;
    symm__trace_clock_t clk_a;   /* at start */
    symm__trace_clock_t clk_b;   /* at stop or dump */
    uint32_t timer_res_ns;       /* smallest %globaltimer step seen (0: not measured) */
    uint64_t heap_base, heap_size;
    int device, sms;
    char host[64];
    const symm_trace_event_t *ev;
    size_t nev;
    const symm__trace_label_t *labels; /* the later of two overlapping ones wins */
    int nlabels;
} symm__trace_pe_data_t;

typedef struct symm__trace_doc {
    int n_pes;
    const symm__trace_pe_data_t *pes; /* n_pes, in world order */
    const int *node_world;            /* node team PE i is world PE node_world[i] */
    int n_node;
    const int *name_ids;              /* user region names */
    const char *const *names;
    int n_names;
    const char *clock_method;
    int library_traced;
} symm__trace_doc_t;

/* Write the Chrome-trace JSON of `doc` to f. Errors: SYMM_ERR_NO_MEMORY,
 * SYMM_ERR_INVALID_ARG (a write failed: the message says so). */
symm_status_t symm__trace_write_json(FILE *f, const symm__trace_doc_t *doc);

/* What the clock kernel (trace_k.cu) measures on one PE: per peer k and
 * round r, samples[(k * rounds + r) * 3 + {0, 1, 2}] = PE 0's send time,
 * PE 0's receive time (both on PE 0), the peer's time (on PE k); and the
 * smallest %globaltimer step this PE saw. */
typedef struct symm__trace_clock_job {
    symm_ctx_t ctx;     /* the world's context, trace word cleared */
    uint64_t *pingpong; /* heap words: [rounds] pings, then [n_pes][rounds] pongs */
    uint64_t *samples;  /* device memory, n_pes * rounds * 3 words */
    uint32_t *res;      /* device memory, one word */
    int rounds;
    uint64_t seq;       /* measurement number: values increase across measurements */
} symm__trace_clock_job_t;

/* Run the clock kernel on this PE's device and wait for it; copies the
 * samples (n_pes * rounds * 3 words) and the step to the host. Every PE
 * calls it at the same time (the kernels answer each other). Errors:
 * SYMM_ERR_CUDA. */
symm_status_t symm__trace_clock_run(const symm__trace_clock_job_t *job, uint64_t *samples, uint32_t *res);
/* Device scratch of the clock kernel (samples and step) and its release. */
symm_status_t symm__trace_dev_alloc(size_t nbytes, void **ptr);
void symm__trace_dev_free(void *ptr);
/* The SMs of this PE's device, or 0 when it cannot tell. */
int symm__trace_device_sms(void);
/* Wait for this PE's device. Errors: SYMM_ERR_CUDA. */
symm_status_t symm__trace_dev_sync(void);

#ifdef __cplusplus
}
#endif

#endif /* SYMM_TRACE_INTERNAL_H */
