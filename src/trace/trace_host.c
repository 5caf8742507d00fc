/*
 * trace_host.c - symm_trace_start / _stop / _dump / _name / _counts
 * (symm_trace.h): the trace state of this PE, its buffer in the symmetric
 * heap, the clock measurements and the gathering of every PE's events over
 * the bootstrap; and the automatic trace of a whole run (SYMM_TRACE_FILE).
 *
 * Heap blocks: the ring (header and counters) and the ping-pong words are
 * made at the first start and kept until finalize, so that a context copied
 * into a CUDA graph while a trace recorded never points at freed memory (a
 * stopped ring drops everything: sub_cap 0). The event array is made anew
 * when a start asks for more events than it holds. Every allocation is the
 * same on every PE (the starts are collective and their capacities agreed).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/env.h"
#include "core/log.h"
#include "heap/heap.h"
#include "runtime/team.h"
#include "trace/trace.h"

/* Most events per PE (64 GiB of buffer): a bound that catches a unit mistake. */
#define SYMM__TRACE_MAX_EVENTS ((uint64_t)1 << 30)
/* Events per PE per gathering round. */
#define SYMM__TRACE_CHUNK 8192u
#define SYMM__TRACE_MAX_NAMES 256
#define SYMM__TRACE_NAME_BYTES 64

static struct {
    int started, active, auto_mode;
    symm_trace_ring_t *ring;        /* heap */
    symm_trace_event_t *events;     /* heap */
    uint64_t events_cap;            /* events the array holds */
    uint64_t *pingpong;             /* heap */
    uint64_t *d_samples;            /* device scratch of the clock kernel */
    uint32_t *d_res;
    uint32_t nsub, sub_cap;
    uint64_t heads[SYMM_TRACE_MAX_SUB]; /* at stop */
    uint64_t seq;                   /* clock measurements so far */
    symm__trace_clock_t *clk_a, *clk_b; /* every PE's, at start and at stop/dump */
    uint32_t res;                   /* this PE's timer step */
    int measured;                   /* 1: ping-pong; 0: no GPU or one PE */
    char method[128];
} g;

#define SYMM__TRACE_MAX_LABELS 128
static struct {
    symm__trace_label_t l[SYMM__TRACE_MAX_LABELS];
    int n;
} g_labels;

static struct {
    int id[SYMM__TRACE_MAX_NAMES];
    char name[SYMM__TRACE_MAX_NAMES][SYMM__TRACE_NAME_BYTES];
    int n;
} g_names;

/* The world's context as the host keeps it (no public call: those clear
 * the thread's error message, which a failing step must keep). */
static const symm_ctx_t *world_ctx(void) {
    symm_team_t w = symm__team_resolve(NULL);
    return w ? symm__team_host_ctx(w) : NULL;
}

/* Does the backend give the trace a GPU (its kernels, its clocks)? */
static int backend_has_gpu(void) {
    const symm__backend_ops_t *be = symm__runtime_backend();
    return be && (be->kernel_caps & SYMM__BE_KCAP_TRACE);
}

/* Release what the state holds (heap blocks go with the heap at finalize). */
static void reset_state(void) {
    symm__trace_dev_free(g.d_samples);
    symm__trace_dev_free(g.d_res);
    free(g.clk_a);
    free(g.clk_b);
    memset(&g, 0, sizeof g);
}

/* ---- clocks ------------------------------------------------------------------------ */

/* Measure every PE's clock against PE 0's (collective): the ping-pong
 * kernel on every PE, then the samples gathered. out: n_pes clocks. */
static symm_status_t measure(symm__trace_clock_t *out) {
    const int n = symm_n_pes(), me = symm_my_pe(), R = SYMM__TRACE_CLOCK_ROUNDS;
    const size_t words = (size_t)n * R * 3;
    const symm_ctx_t *w = world_ctx();
    symm_ctx_t ctx;
    symm_status_t st = SYMM_SUCCESS;
    uint64_t *mine = NULL, *all = NULL;
    uint32_t res = 0;
    int gpu;
    memset(out, 0, (size_t)n * sizeof *out);
    out[0].valid = 1;
    if (!w)
        return symm__error(SYMM_ERR_NOT_INITIALIZED, "symm_trace: symm is not initialized");
    ctx = *w;
    gpu = backend_has_gpu();
    if (!gpu || n == 1 || !(ctx.ldst_first == 0 && ctx.ldst_count == n)) {
        g.measured = 0;
        if (!gpu)
            snprintf(g.method, sizeof g.method, "none: no GPU (%s backend)", symm__runtime_backend()->name);
        else
            snprintf(g.method, sizeof g.method, "%s",
                     n == 1 ? "one PE" : "none: PEs outside the load/store window; offsets taken as 0");
        if (gpu && n == 1) {
            /* still measure the timer's step */
            st = symm__trace_clock_run(&(symm__trace_clock_job_t){ctx, g.pingpong, g.d_samples, g.d_res, R, g.seq + 1},
                                       NULL, &res);
            g.seq++;
            g.res = res;
        }
        return st;
    }
    mine = calloc(words, sizeof *mine);
    all = calloc(words * (size_t)n, sizeof *all);
    if (!mine || !all) {
        st = symm__error(SYMM_ERR_NO_MEMORY, "symm_trace: out of host memory");
    } else {
        ctx.trace = 0; /* the measurement itself is not recorded */
        symm__trace_clock_job_t job = {ctx, g.pingpong, g.d_samples, g.d_res, R, ++g.seq};
        st = symm__trace_clock_run(&job, mine, &res);
    }
    /* every PE takes part in the exchange, so that a failure is seen by all */
    st = symm__agree(st, SYMM_ERR_CUDA, "the trace's clock measurement");
    if (st == SYMM_SUCCESS)
        st = symm_host_allgather(mine, all, words * sizeof *mine);
    if (st == SYMM_SUCCESS) {
        const uint64_t *root = all; /* PE 0's samples: its send and receive times per peer */
        for (int k = 1; k < n; k++) {
            uint64_t s[SYMM__TRACE_CLOCK_ROUNDS], e[SYMM__TRACE_CLOCK_ROUNDS], p[SYMM__TRACE_CLOCK_ROUNDS];
            const uint64_t *peer = all + (size_t)k * words;
            for (int r = 0; r < R; r++) {
                s[r] = root[((size_t)k * R + r) * 3 + 0];
                e[r] = root[((size_t)k * R + r) * 3 + 1];
                p[r] = peer[((size_t)k * R + r) * 3 + 2];
            }
            if (symm__trace_clock_fit(s, e, p, R, &out[k]) != 0)
                SYMM_LOG_WARN("symm_trace: no usable clock round with PE %d; its offset is taken as 0", k);
        }
        out[0].at = out[n > 1 ? 1 : 0].at;
        g.res = res;
        g.measured = 1;
        snprintf(g.method, sizeof g.method, "ping-pong with PE 0 over NVLink, shortest of %d round trips, "
                 "interpolated between start and stop", R);
    }
    (void)me;
    free(mine);
    free(all);
    return st;
}

/* ---- start / stop ---------------------------------------------------------------- */

static uint32_t pick_nsub(uint64_t cap) {
    int sms = backend_has_gpu() ? symm__trace_device_sms() : 0;
    uint32_t n = 1;
    /* one sub-buffer per SM where there are enough events for each */
    while (n * 2 <= (uint32_t)(sms > 0 ? sms : 1) && n * 2 <= SYMM_TRACE_MAX_SUB && cap / (n * 2) >= 256)
        n *= 2;
    return n;
}

/* Write the ring header with sub_cap `cap`, and clear its counters when
 * `clear` (a start; a stop leaves them for the dump). */
static symm_status_t write_ring(uint32_t cap, int clear) {
    unsigned char *img = calloc(1, SYMM_TRACE_RING_BYTES);
    symm_trace_ring_t *r = (symm_trace_ring_t *)(void *)img;
    symm_status_t st;
    if (!img)
        return symm__error(SYMM_ERR_NO_MEMORY, "symm_trace: out of host memory");
    r->events = (uint64_t)(uintptr_t)g.events;
    r->nsub = g.nsub;
    r->sub_cap = cap;
    r->magic = SYMM_TRACE_MAGIC;
    r->version = SYMM_TRACE_VERSION;
    st = symm__dev_copy(g.ring, img, clear ? SYMM_TRACE_RING_BYTES : sizeof(symm_trace_ring_t));
    free(img);
    return st;
}

/* Read the claim counters of the sub-buffers in use. */
static symm_status_t read_heads(uint64_t *heads) {
    unsigned char *buf = malloc((size_t)g.nsub * SYMM_TRACE_HEAD_STRIDE);
    symm_status_t st;
    if (!buf)
        return symm__error(SYMM_ERR_NO_MEMORY, "symm_trace: out of host memory");
    st = symm__dev_copy(buf, (char *)g.ring + sizeof(symm_trace_ring_t), (size_t)g.nsub * SYMM_TRACE_HEAD_STRIDE);
    for (uint32_t s = 0; st == SYMM_SUCCESS && s < g.nsub; s++)
        memcpy(&heads[s], buf + (size_t)s * SYMM_TRACE_HEAD_STRIDE, sizeof(uint64_t));
    free(buf);
    return st;
}

/* Heap blocks and device scratch of a trace of `cap` events (collective). */
static symm_status_t allocate(uint64_t cap) {
    const int n = symm_n_pes();
    symm_status_t st = SYMM_SUCCESS;
    void *p;
    if (!g.ring) {
        st = symm__heap_malloc(SYMM_TRACE_RING_BYTES, 1, &p);
        if ((st = symm__agree(st, SYMM_ERR_HEAP_EXHAUSTED, "the trace's ring")) != SYMM_SUCCESS)
            return st;
        g.ring = p;
        st = symm__heap_malloc((size_t)(1 + n) * SYMM__TRACE_CLOCK_ROUNDS * sizeof(uint64_t), 1, &p);
        if ((st = symm__agree(st, SYMM_ERR_HEAP_EXHAUSTED, "the trace's clock words")) != SYMM_SUCCESS)
            return st;
        g.pingpong = p;
    }
    if (cap > g.events_cap) {
        if (g.events)
            (void)symm__heap_release(g.events);
        g.events = NULL;
        g.events_cap = 0;
        st = symm__heap_malloc((size_t)cap * sizeof(symm_trace_event_t), 0, &p);
        if ((st = symm__agree(st, SYMM_ERR_HEAP_EXHAUSTED, "the trace buffer")) != SYMM_SUCCESS)
            return symm__error(st, "symm_trace_start: no room in the symmetric heap for %" PRIu64 " events "
                               "(%" PRIu64 " MiB per PE): %s", cap, cap * sizeof(symm_trace_event_t) >> 20,
                               symm_last_error());
        g.events = p;
        g.events_cap = cap;
    }
    if (!g.clk_a)
        g.clk_a = calloc((size_t)n, sizeof *g.clk_a);
    if (!g.clk_b)
        g.clk_b = calloc((size_t)n, sizeof *g.clk_b);
    st = g.clk_a && g.clk_b ? SYMM_SUCCESS : symm__error(SYMM_ERR_NO_MEMORY, "symm_trace: out of host memory");
    if (st == SYMM_SUCCESS && backend_has_gpu() && !g.d_samples) {
        st = symm__trace_dev_alloc((size_t)n * SYMM__TRACE_CLOCK_ROUNDS * 3 * sizeof(uint64_t), &p);
        if (st == SYMM_SUCCESS) {
            g.d_samples = p;
            st = symm__trace_dev_alloc(sizeof(uint32_t), &p);
        }
        if (st == SYMM_SUCCESS)
            g.d_res = p;
    }
    return symm__agree(st, SYMM_ERR_CUDA, "the trace's device memory");
}

symm_status_t symm_trace_start(size_t capacity) {
    const int n = symm_n_pes();
    uint64_t cap = capacity ? (uint64_t)capacity : (uint64_t)symm__env()->trace_capacity, *all = NULL;
    symm_status_t st = SYMM_SUCCESS, bad = SYMM_SUCCESS;
    symm__error_clear();
    if (!symm_initialized())
        return symm__error(SYMM_ERR_NOT_INITIALIZED, "symm_trace_start: symm is not initialized");
    /* every PE sees every PE's capacity, so all fail alike */
    all = calloc((size_t)n, sizeof *all);
    st = symm_host_allgather(&cap, all, all ? sizeof cap : 0);
    if (st == SYMM_SUCCESS && !all)
        st = symm__error(SYMM_ERR_NO_MEMORY, "symm_trace_start: out of host memory");
    if (g.active)
        bad = symm__error(SYMM_ERR_INVALID_ARG, "symm_trace_start: a trace is already recording (symm_trace_stop "
                          "first)");
    else if (cap < 1 || cap > SYMM__TRACE_MAX_EVENTS)
        bad = symm__error(SYMM_ERR_INVALID_ARG, "symm_trace_start: capacity %" PRIu64 " events is not in 1..%" PRIu64,
                          cap, SYMM__TRACE_MAX_EVENTS);
    for (int p = 1; st == SYMM_SUCCESS && bad == SYMM_SUCCESS && p < n; p++)
        if (all[p] != all[0])
            st = symm__error(SYMM_ERR_MISMATCH, "symm_trace_start: capacities differ: PE 0 asked for %" PRIu64
                             " events, PE %d for %" PRIu64, all[0], p, all[p]);
    free(all);
    st = bad != SYMM_SUCCESS ? bad : st;
    if ((st = symm__agree(st, SYMM_ERR_INVALID_ARG, "symm_trace_start")) != SYMM_SUCCESS)
        return st;
    if ((st = symm_barrier_all()) != SYMM_SUCCESS)
        return st;
    if ((st = allocate(cap)) != SYMM_SUCCESS)
        return st;
    g.nsub = pick_nsub(cap);
    g.sub_cap = (uint32_t)(cap / g.nsub);
    memset(g.heads, 0, sizeof g.heads);
    st = write_ring(g.sub_cap, 1);
    if ((st = symm__agree(st, SYMM_ERR_CUDA, "symm_trace_start")) != SYMM_SUCCESS)
        return st;
    if ((st = measure(g.clk_a)) != SYMM_SUCCESS)
        return st;
    memset(g.clk_b, 0, (size_t)n * sizeof *g.clk_b);
    st = symm__teams_set_trace((uint64_t)(uintptr_t)g.ring);
    if ((st = symm__agree(st, SYMM_ERR_CUDA, "symm_trace_start")) != SYMM_SUCCESS) {
        (void)symm__teams_set_trace(0);
        return st;
    }
    g.started = g.active = 1;
    SYMM_LOG_INFO("device trace recording: %" PRIu64 " events per PE in %u sub-buffers", cap, g.nsub);
    return SYMM_SUCCESS;
}

/* Freeze the end of a trace: counters and the closing clock measurement. */
static symm_status_t close_window(void) {
    symm_status_t st = read_heads(g.heads);
    st = symm__agree(st, SYMM_ERR_CUDA, "reading the trace counters");
    if (st == SYMM_SUCCESS)
        st = measure(g.clk_b);
    return st;
}

symm_status_t symm_trace_stop(void) {
    symm_status_t st;
    symm__error_clear();
    if (!symm_initialized())
        return symm__error(SYMM_ERR_NOT_INITIALIZED, "symm_trace_stop: symm is not initialized");
    st = g.active ? SYMM_SUCCESS : symm__error(SYMM_ERR_INVALID_ARG, "symm_trace_stop: no trace is recording");
    if ((st = symm__agree(st, SYMM_ERR_INVALID_ARG, "symm_trace_stop")) != SYMM_SUCCESS)
        return st;
    if ((st = symm_barrier_all()) != SYMM_SUCCESS)
        return st;
    st = symm__teams_set_trace(0);
    st = symm__agree(st, SYMM_ERR_CUDA, "symm_trace_stop");
    g.active = 0;
    if (st == SYMM_SUCCESS)
        st = close_window();
    /* a context copied while recording (a captured graph) now drops */
    if (st == SYMM_SUCCESS)
        st = symm__agree(write_ring(0, 0), SYMM_ERR_CUDA, "symm_trace_stop");
    return st;
}

/* ---- counts and names ------------------------------------------------------------- */

static void counts_of(const uint64_t *heads, uint64_t *recorded, uint64_t *dropped) {
    uint64_t r = 0, d = 0;
    for (uint32_t s = 0; s < g.nsub; s++) {
        r += heads[s] < g.sub_cap ? heads[s] : g.sub_cap;
        d += heads[s] > g.sub_cap ? heads[s] - g.sub_cap : 0;
    }
    *recorded = r;
    *dropped = d;
}

symm_status_t symm_trace_counts(uint64_t *recorded, uint64_t *dropped) {
    uint64_t heads[SYMM_TRACE_MAX_SUB];
    symm_status_t st;
    symm__error_clear();
    if (!symm_initialized())
        return symm__error(SYMM_ERR_NOT_INITIALIZED, "symm_trace_counts: symm is not initialized");
    if (!g.started || !recorded || !dropped)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_trace_counts: %s",
                           !g.started ? "no trace was started" : "NULL output");
    if (!g.active) {
        counts_of(g.heads, recorded, dropped);
        return SYMM_SUCCESS;
    }
    if ((backend_has_gpu() && (st = symm__trace_dev_sync()) != SYMM_SUCCESS) ||
        (st = read_heads(heads)) != SYMM_SUCCESS)
        return st;
    counts_of(heads, recorded, dropped);
    return SYMM_SUCCESS;
}

symm_status_t symm_trace_name(int name_id, const char *name) {
    int i;
    symm__error_clear();
    if (name_id < 0 || (name && strlen(name) >= SYMM__TRACE_NAME_BYTES))
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_trace_name: %s",
                           name_id < 0 ? "name_id is negative" : "name longer than 63 bytes");
    for (i = 0; i < g_names.n && g_names.id[i] != name_id; i++)
        ;
    if (!name) {
        if (i < g_names.n) {
            g_names.n--;
            g_names.id[i] = g_names.id[g_names.n];
            memcpy(g_names.name[i], g_names.name[g_names.n], SYMM__TRACE_NAME_BYTES);
        }
        return SYMM_SUCCESS;
    }
    if (i == g_names.n) {
        if (g_names.n == SYMM__TRACE_MAX_NAMES)
            return symm__error(SYMM_ERR_INVALID_ARG, "symm_trace_name: more than %d names", SYMM__TRACE_MAX_NAMES);
        g_names.n++;
    }
    g_names.id[i] = name_id;
    snprintf(g_names.name[i], SYMM__TRACE_NAME_BYTES, "%s", name);
    return SYMM_SUCCESS;
}

symm_status_t symm_trace_label(const void *addr, size_t nbytes, int pe, const char *name) {
    int i, n = symm_n_pes();
    symm__error_clear();
    if (!addr)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_trace_label: addr is NULL");
    for (i = g_labels.n - 1; i >= 0 && g_labels.l[i].addr != (uint64_t)(uintptr_t)addr; i--)
        ;
    if (!name) {
        if (i >= 0) {
            memmove(&g_labels.l[i], &g_labels.l[i + 1], (size_t)(g_labels.n - i - 1) * sizeof g_labels.l[0]);
            g_labels.n--;
        }
        return SYMM_SUCCESS;
    }
    if (nbytes == 0 || pe < -1 || (n > 0 && pe >= n) || strlen(name) >= SYMM__TRACE_LABEL_NAME)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_trace_label: %s",
                           nbytes == 0 ? "nbytes is 0" : strlen(name) >= SYMM__TRACE_LABEL_NAME
                               ? "name longer than 43 bytes" : "pe is not -1 or a PE of the world");
    if (i < 0) {
        if (g_labels.n == SYMM__TRACE_MAX_LABELS)
            return symm__error(SYMM_ERR_INVALID_ARG, "symm_trace_label: more than %d labels", SYMM__TRACE_MAX_LABELS);
        i = g_labels.n++;
    }
    g_labels.l[i].addr = (uint64_t)(uintptr_t)addr;
    g_labels.l[i].nbytes = nbytes;
    g_labels.l[i].pe = pe;
    memset(g_labels.l[i].name, 0, sizeof g_labels.l[i].name);
    snprintf(g_labels.l[i].name, sizeof g_labels.l[i].name, "%s", name);
    return SYMM_SUCCESS;
}

int symm_trace_active(void) { return g.active; }

int symm_trace_library_traced(void) {
#if defined(SYMM_TRACE) && (SYMM_TRACE + 0)
    return 1;
#else
    return 0;
#endif
}

/* ---- dump ------------------------------------------------------------------------- */

/* What each PE sends PE 0 before its events (fixed size, for the allgather). */
typedef struct pe_info {
    uint64_t recorded, dropped, heap_base, heap_size;
    uint32_t nsub, sub_cap, res;
    int32_t device, sms, nlabels;
    char host[64];
    symm__trace_label_t labels[SYMM__TRACE_MAX_LABELS];
} pe_info_t;

/* This PE's recorded events, sub-buffer after sub-buffer, into *out. */
static symm_status_t read_events(const uint64_t *heads, symm_trace_event_t **out, uint64_t *count) {
    uint64_t recorded, dropped, k = 0;
    symm_trace_event_t *ev;
    symm_status_t st = SYMM_SUCCESS;
    counts_of(heads, &recorded, &dropped);
    ev = malloc((size_t)(recorded ? recorded : 1) * sizeof *ev);
    if (!ev)
        return symm__error(SYMM_ERR_NO_MEMORY, "symm_trace_dump: out of host memory for %" PRIu64 " events",
                           recorded);
    for (uint32_t s = 0; st == SYMM_SUCCESS && s < g.nsub; s++) {
        uint64_t m = heads[s] < g.sub_cap ? heads[s] : g.sub_cap;
        st = symm__dev_copy(ev + k, g.events + (size_t)s * g.sub_cap, (size_t)m * sizeof *ev);
        k += m;
    }
    if (st != SYMM_SUCCESS) {
        free(ev);
        return st;
    }
    *out = ev;
    *count = k;
    return SYMM_SUCCESS;
}

/* Every PE's events to every PE, CHUNK events per PE per round (the
 * bootstrap's allgather takes the same size from all). PE 0 keeps them. */
static symm_status_t gather_events(const symm_trace_event_t *mine, uint64_t nmine, const pe_info_t *info,
                                   symm_trace_event_t **per_pe) {
    const int n = symm_n_pes(), me = symm_my_pe();
    uint64_t most = 0;
    symm_trace_event_t *send = NULL, *recv = NULL;
    symm_status_t st = SYMM_SUCCESS;
    for (int p = 0; p < n; p++) {
        if (info[p].recorded > most)
            most = info[p].recorded;
        if (me == 0) {
            per_pe[p] = malloc((size_t)(info[p].recorded ? info[p].recorded : 1) * sizeof(symm_trace_event_t));
            if (!per_pe[p])
                st = symm__error(SYMM_ERR_NO_MEMORY, "symm_trace_dump: out of host memory");
        }
    }
    send = calloc(SYMM__TRACE_CHUNK, sizeof *send);
    recv = calloc((size_t)SYMM__TRACE_CHUNK * (size_t)n, sizeof *recv);
    if (!send || !recv)
        st = symm__error(SYMM_ERR_NO_MEMORY, "symm_trace_dump: out of host memory");
    if ((st = symm__agree(st, SYMM_ERR_NO_MEMORY, "symm_trace_dump")) != SYMM_SUCCESS)
        goto out;
    for (uint64_t base = 0; base < most && st == SYMM_SUCCESS; base += SYMM__TRACE_CHUNK) {
        uint64_t m = nmine > base ? nmine - base : 0;
        if (m > SYMM__TRACE_CHUNK)
            m = SYMM__TRACE_CHUNK;
        memset(send, 0, SYMM__TRACE_CHUNK * sizeof *send);
        if (m)
            memcpy(send, mine + base, (size_t)m * sizeof *send);
        st = symm_host_allgather(send, recv, SYMM__TRACE_CHUNK * sizeof *send);
        for (int p = 0; st == SYMM_SUCCESS && me == 0 && p < n; p++) {
            uint64_t have = info[p].recorded > base ? info[p].recorded - base : 0;
            if (have > SYMM__TRACE_CHUNK)
                have = SYMM__TRACE_CHUNK;
            memcpy(per_pe[p] + base, recv + (size_t)p * SYMM__TRACE_CHUNK, (size_t)have * sizeof *recv);
        }
    }
out:
    free(send);
    free(recv);
    return st;
}

symm_status_t symm_trace_dump(const char *path) {
    const int n = symm_n_pes(), me = symm_my_pe();
    uint64_t heads[SYMM_TRACE_MAX_SUB], nmine = 0;
    symm_trace_event_t *mine = NULL, **per_pe = NULL;
    pe_info_t info, *all = NULL;
    symm__trace_pe_data_t *pes = NULL;
    int *node_world = NULL, n_node = 0;
    const symm_ctx_t *w;
    symm_status_t st;
    symm__error_clear();
    if (!symm_initialized())
        return symm__error(SYMM_ERR_NOT_INITIALIZED, "symm_trace_dump: symm is not initialized");
    st = !g.started ? symm__error(SYMM_ERR_INVALID_ARG, "symm_trace_dump: no trace was started (symm_trace_start)")
         : me == 0 && !path ? symm__error(SYMM_ERR_INVALID_ARG, "symm_trace_dump: path is NULL on PE 0")
         : SYMM_SUCCESS;
    if ((st = symm__agree(st, SYMM_ERR_INVALID_ARG, "symm_trace_dump")) != SYMM_SUCCESS)
        return st;
    if ((st = symm_barrier_all()) != SYMM_SUCCESS)
        return st;
    if (g.active) {
        if ((st = close_window()) != SYMM_SUCCESS)
            return st;
    }
    memcpy(heads, g.heads, sizeof heads);
    memset(&info, 0, sizeof info);
    if ((w = world_ctx()) != NULL) {
        info.heap_base = w->heap_base;
        info.heap_size = w->heap_size;
    }
    st = read_events(heads, &mine, &nmine);
    counts_of(heads, &info.recorded, &info.dropped);
    info.recorded = nmine;
    info.nsub = g.nsub;
    info.sub_cap = g.sub_cap;
    info.nlabels = g_labels.n;
    memcpy(info.labels, g_labels.l, (size_t)g_labels.n * sizeof g_labels.l[0]);
    info.res = g.res;
    info.device = symm_device();
    info.sms = backend_has_gpu() ? symm__trace_device_sms() : 0;
    if (gethostname(info.host, sizeof info.host - 1) != 0)
        info.host[0] = '\0';
    all = calloc((size_t)n, sizeof *all);
    per_pe = calloc((size_t)n, sizeof *per_pe);
    if (st == SYMM_SUCCESS && (!all || !per_pe))
        st = symm__error(SYMM_ERR_NO_MEMORY, "symm_trace_dump: out of host memory");
    if ((st = symm__agree(st, SYMM_ERR_CUDA, "symm_trace_dump")) != SYMM_SUCCESS)
        goto out;
    if ((st = symm_host_allgather(&info, all, sizeof info)) != SYMM_SUCCESS)
        goto out;
    if ((st = gather_events(mine, nmine, all, per_pe)) != SYMM_SUCCESS)
        goto out;
    if (me == 0) {
        symm_team_t node = symm_team_node();
        const char *names[SYMM__TRACE_MAX_NAMES];
        FILE *f;
        pes = calloc((size_t)n, sizeof *pes);
        n_node = symm_team_n_pes(node);
        node_world = calloc((size_t)(n_node > 0 ? n_node : 1), sizeof *node_world);
        if (!pes || !node_world) {
            st = symm__error(SYMM_ERR_NO_MEMORY, "symm_trace_dump: out of host memory");
            goto agree;
        }
        for (int i = 0; i < n_node; i++)
            node_world[i] = symm_team_translate_pe(node, i, symm_team_world());
        for (int p = 0; p < n; p++) {
            symm__trace_pe_data_t *d = &pes[p];
            d->pe = p;
            d->recorded = all[p].recorded;
            d->dropped = all[p].dropped;
            d->nsub = all[p].nsub;
            d->sub_cap = all[p].sub_cap;
            d->clk_a = g.clk_a[p];
            d->clk_b = g.clk_b[p];
            d->timer_res_ns = all[p].res;
            d->heap_base = all[p].heap_base;
            d->heap_size = all[p].heap_size;
            d->device = all[p].device;
            d->sms = all[p].sms;
            memcpy(d->host, all[p].host, sizeof d->host);
            d->host[sizeof d->host - 1] = '\0';
            d->ev = per_pe[p];
            d->nev = (size_t)all[p].recorded;
            d->labels = all[p].labels;
            d->nlabels = all[p].nlabels;
        }
        for (int i = 0; i < g_names.n; i++)
            names[i] = g_names.name[i];
        symm__trace_doc_t doc = {n, pes, node_world, n_node, g_names.id, names, g_names.n, g.method,
                                 symm_trace_library_traced()};
        f = fopen(path, "w");
        if (!f) {
            st = symm__error(SYMM_ERR_INVALID_ARG, "symm_trace_dump: cannot write %s: %s", path, strerror(errno));
            goto agree;
        }
        st = symm__trace_write_json(f, &doc);
        if (fclose(f) != 0 && st == SYMM_SUCCESS)
            st = symm__error(SYMM_ERR_INVALID_ARG, "symm_trace_dump: writing %s failed: %s", path, strerror(errno));
        if (st == SYMM_SUCCESS)
            SYMM_LOG_INFO("device trace: wrote %s", path);
    }
agree:
    st = symm__agree(st, SYMM_ERR_INVALID_ARG, "symm_trace_dump (PE 0 writes the file)");
out:
    for (int p = 0; per_pe && p < n; p++)
        free(per_pe[p]);
    free(per_pe);
    free(all);
    free(mine);
    free(pes);
    free(node_world);
    return st;
}

/* ---- SYMM_TRACE_FILE: the whole run --------------------------------------------------- */

static void after_init(void) {
    const char *file = symm__env()->trace_file;
    if (!file || !file[0])
        return;
    if (symm_trace_start(0) == SYMM_SUCCESS)
        g.auto_mode = 1;
    else
        SYMM_LOG_WARN("SYMM_TRACE_FILE=%s: the trace did not start: %s", file, symm_last_error());
}

static void before_finalize(void) {
    if (g.auto_mode && strcmp(symm__env()->trace_file, "-") == 0) {
        /* record only: what recording costs a run, without the writing */
        uint64_t kept = 0, dropped = 0;
        if (symm_trace_counts(&kept, &dropped) == SYMM_SUCCESS)
            SYMM_LOG_INFO("SYMM_TRACE_FILE=-: the device trace kept %" PRIu64 " events of this PE, dropped %" PRIu64
                          " (nothing written)", kept, dropped);
    } else if (g.auto_mode) {
        const char *file = symm__env()->trace_file;
        if (symm_trace_dump(file) != SYMM_SUCCESS)
            SYMM_LOG_WARN("SYMM_TRACE_FILE=%s: the trace was not written: %s", file, symm_last_error());
        else if (symm_my_pe() == 0)
            SYMM_LOG_INFO("device trace of the run written to %s", file);
    }
    if (g.active)
        (void)symm__teams_set_trace(0);
    reset_state();
    g_labels.n = 0; /* they name memory that goes with the runtime */
}

__attribute__((constructor)) static void register_hooks(void) {
    symm__runtime_hooks_add(after_init, before_finalize);
}
