/*
 * bench_util.cu - shared pieces of symm-bench (see bench_util.h).
 */
#include "bench_util.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- progress and the watchdog ------------------------------------------------- */

static struct {
    pthread_mutex_t mu;
    int pe;
    int verbose;
    double timeout_s;     /* <= 0: no watchdog */
    double limit_s;       /* of the current phase: timeout_s, or longer for an umbrella phase */
    int active;           /* a phase (or the gap after one) is being timed */
    int open;             /* begin seen, end not yet: "done" is due */
    double start;         /* of the phase or the gap */
    double t0;            /* of the process, for the time stamps */
    char phase[256];      /* read unlocked by the signal handler: always NUL-terminated */
} g_prog = {PTHREAD_MUTEX_INITIALIZER, -1, 0, 0.0, 0.0, 0, 0, 0.0, 0.0, "start-up"};

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Async-signal-safe: a decimal number into p, returns the end. */
static char *put_int(char *p, long v) {
    char tmp[24];
    int n = 0;
    if (v < 0) {
        *p++ = '-';
        v = -v;
    }
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v && n < (int)sizeof tmp);
    while (n)
        *p++ = tmp[--n];
    return p;
}

static char *put_str(char *p, const char *end, const char *s) {
    while (*s && p < end)
        *p++ = *s++;
    return p;
}

/* SIGTERM/SIGINT (symmrun's --timeout, ctest's timeout, ^C): say which phase
 * was running, then die of the signal as before. Only async-signal-safe calls. */
static void on_stop_signal(int sig) {
    char buf[512], *p = buf, *end = buf + sizeof buf - 2;
    p = put_str(p, end, "bench: pe ");
    p = put_int(p, g_prog.pe);
    p = put_str(p, end, ": stopped by signal ");
    p = put_int(p, sig);
    p = put_str(p, end, " during phase '");
    p = put_str(p, end, g_prog.phase);
    p = put_str(p, end, "' (");
    p = put_int(p, (long)(mono_s() - g_prog.start));
    p = put_str(p, end, " s into it)\n");
    if (write(2, buf, (size_t)(p - buf)) < 0) {
        /* nothing left to report to */
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void *watchdog_main(void *arg) {
    (void)arg;
    for (;;) {
        struct timespec ts = {0, 250000000L};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&g_prog.mu);
        double took = mono_s() - g_prog.start;
        if (g_prog.active && took > g_prog.limit_s) {
            char phase[sizeof g_prog.phase];
            memcpy(phase, g_prog.phase, sizeof phase);
            int pe = g_prog.pe;
            pthread_mutex_unlock(&g_prog.mu);
            double limit = g_prog.limit_s;
            fprintf(stderr,
                    "bench: pe %d: STUCK: phase '%s' has run %.0f s (limit %g s, --phase-timeout); exiting "
                    "with code 3 so that symmrun stops the other PEs\n",
                    pe, phase, took, limit);
            fflush(stderr);
            fflush(stdout);
            _exit(3);
        }
        pthread_mutex_unlock(&g_prog.mu);
    }
    return NULL;
}

void bench_progress_init(int pe, int verbose, double phase_timeout_s) {
    struct sigaction sa;
    pthread_t th;
    pthread_mutex_lock(&g_prog.mu);
    g_prog.pe = pe;
    g_prog.verbose = verbose;
    g_prog.timeout_s = g_prog.limit_s = phase_timeout_s;
    g_prog.t0 = g_prog.start = mono_s();
    g_prog.active = phase_timeout_s > 0;
    pthread_mutex_unlock(&g_prog.mu);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0)
        bench_fatal(__FILE__, __LINE__, "sigaction", strerror(errno));
    if (phase_timeout_s > 0) {
        int e = pthread_create(&th, NULL, watchdog_main, NULL);
        if (e != 0)
            bench_fatal(__FILE__, __LINE__, "pthread_create (watchdog)", strerror(e));
        pthread_detach(th);
    }
}

void bench_progress_set_pe(int pe) {
    pthread_mutex_lock(&g_prog.mu);
    g_prog.pe = pe;
    pthread_mutex_unlock(&g_prog.mu);
}

int bench_verbose(void) { return g_prog.verbose; }

/* Called with g_prog.mu held. */
static void phase_close_locked(double now) {
    if (!g_prog.open)
        return;
    if (g_prog.verbose) {
        fprintf(stderr, "bench: pe %d: %s done (%.2f s) [t=%.1f s]\n", g_prog.pe, g_prog.phase, now - g_prog.start,
                now - g_prog.t0);
        fflush(stderr);
    }
    /* The gap until the next phase is watched too. */
    static const char prefix[] = "after ";
    size_t keep = strlen(g_prog.phase);
    if (keep > sizeof g_prog.phase - sizeof prefix)
        keep = sizeof g_prog.phase - sizeof prefix;
    g_prog.phase[keep] = '\0';
    memmove(g_prog.phase + sizeof prefix - 1, g_prog.phase, keep + 1);
    memcpy(g_prog.phase, prefix, sizeof prefix - 1);
    g_prog.open = 0;
    g_prog.start = now;
    g_prog.limit_s = g_prog.timeout_s;
}

static void phase_begin(double factor, const char *fmt, va_list ap) {
    char name[sizeof g_prog.phase];
    vsnprintf(name, sizeof name, fmt, ap);
    pthread_mutex_lock(&g_prog.mu);
    double now = mono_s();
    phase_close_locked(now);
    memcpy(g_prog.phase, name, sizeof name);
    g_prog.open = 1;
    g_prog.start = now;
    g_prog.limit_s = g_prog.timeout_s * factor;
    if (g_prog.verbose) {
        fprintf(stderr, "bench: pe %d: %s start [t=%.1f s]\n", g_prog.pe, name, now - g_prog.t0);
        fflush(stderr);
    }
    pthread_mutex_unlock(&g_prog.mu);
}

void bench_phase_begin(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    phase_begin(1.0, fmt, ap);
    va_end(ap);
}

void bench_phase_begin_long(double factor, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    phase_begin(factor > 1.0 ? factor : 1.0, fmt, ap);
    va_end(ap);
}

void bench_phase_end(void) {
    pthread_mutex_lock(&g_prog.mu);
    phase_close_locked(mono_s());
    pthread_mutex_unlock(&g_prog.mu);
}

void bench_note(const char *fmt, ...) {
    char buf[512];
    va_list ap;
    if (!g_prog.verbose)
        return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "bench: pe %d: %s\n", g_prog.pe, buf);
    fflush(stderr);
}

/* ---- errors ------------------------------------------------------------------- */

void bench_fatal(const char *file, int line, const char *what, const char *why) {
    fprintf(stderr, "symm-bench [pe %d]: FATAL %s:%d: %s: %s (phase '%s')\n", symm_my_pe(), file, line, what, why,
            g_prog.phase);
    fflush(stderr);
    fflush(stdout);
    _exit(1);
}

/* ---- timing ------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(const double *v, int n) {
    if (n <= 0)
        return 0.0;
    double *c = (double *)malloc((size_t)n * sizeof(double));
    if (!c)
        bench_fatal(__FILE__, __LINE__, "malloc", "out of memory");
    memcpy(c, v, (size_t)n * sizeof(double));
    qsort(c, (size_t)n, sizeof(double), cmp_double);
    double m = (n % 2) ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
    free(c);
    return m;
}

#define BENCH_MAX_REPEATS 64

double bench_time_stream(bench_enqueue_fn fn, void *arg, cudaStream_t stream,
                         int warmup, int iters, int repeats) {
    double ms[BENCH_MAX_REPEATS];
    cudaEvent_t e0, e1;
    if (repeats > BENCH_MAX_REPEATS)
        repeats = BENCH_MAX_REPEATS;
    if (repeats < 1)
        repeats = 1;
    if (iters < 1)
        iters = 1;
    BENCH_CUDA(cudaEventCreate(&e0));
    BENCH_CUDA(cudaEventCreate(&e1));
    for (int i = 0; i < warmup; ++i)
        fn(arg, stream);
    BENCH_CUDA(cudaGetLastError());
    BENCH_CUDA(cudaStreamSynchronize(stream));
    for (int r = 0; r < repeats; ++r) {
        float t = 0.0f;
        BENCH_CUDA(cudaEventRecord(e0, stream));
        for (int i = 0; i < iters; ++i)
            fn(arg, stream);
        BENCH_CUDA(cudaEventRecord(e1, stream));
        BENCH_CUDA(cudaGetLastError());
        BENCH_CUDA(cudaEventSynchronize(e1));
        BENCH_CUDA(cudaEventElapsedTime(&t, e0, e1));
        ms[r] = (double)t / iters;
    }
    BENCH_CUDA(cudaEventDestroy(e1));
    BENCH_CUDA(cudaEventDestroy(e0));
    return bench_median(ms, repeats);
}

double bench_time_graph(bench_enqueue_fn fn, void *arg, cudaStream_t stream,
                        int calls_per_graph, int warmup, int iters, int repeats) {
    double ms[BENCH_MAX_REPEATS];
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaEvent_t e0, e1;
    if (repeats > BENCH_MAX_REPEATS)
        repeats = BENCH_MAX_REPEATS;
    if (repeats < 1)
        repeats = 1;
    if (iters < 1)
        iters = 1;
    if (calls_per_graph < 1)
        calls_per_graph = 1;
    /* Capture needs a non-legacy stream; the caller's stream is used as is. */
    BENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < calls_per_graph; ++i)
        fn(arg, stream);
    BENCH_CUDA(cudaStreamEndCapture(stream, &graph));
    BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    BENCH_CUDA(cudaEventCreate(&e0));
    BENCH_CUDA(cudaEventCreate(&e1));
    for (int i = 0; i < warmup; ++i)
        BENCH_CUDA(cudaGraphLaunch(exec, stream));
    BENCH_CUDA(cudaStreamSynchronize(stream));
    for (int r = 0; r < repeats; ++r) {
        float t = 0.0f;
        BENCH_CUDA(cudaEventRecord(e0, stream));
        for (int i = 0; i < iters; ++i)
            BENCH_CUDA(cudaGraphLaunch(exec, stream));
        BENCH_CUDA(cudaEventRecord(e1, stream));
        BENCH_CUDA(cudaEventSynchronize(e1));
        BENCH_CUDA(cudaEventElapsedTime(&t, e0, e1));
        ms[r] = (double)t / ((double)iters * calls_per_graph);
    }
    BENCH_CUDA(cudaEventDestroy(e1));
    BENCH_CUDA(cudaEventDestroy(e0));
    BENCH_CUDA(cudaGraphExecDestroy(exec));
    BENCH_CUDA(cudaGraphDestroy(graph));
    return bench_median(ms, repeats);
}

/* ---- data check --------------------------------------------------------------- */

__device__ static unsigned char pattern_byte(uint32_t seed, size_t i) {
    /* Mixes the index so a shifted or repeated block does not match. */
    uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull + seed;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    return (unsigned char)x;
}

__global__ static void fill_pattern_kernel(unsigned char *dst, size_t n, uint32_t seed, int invert) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned char b = pattern_byte(seed, i);
        dst[i] = invert ? (unsigned char)~b : b;
    }
}

__global__ static void count_mismatch_kernel(const unsigned char *buf, size_t n, uint32_t seed,
                                             unsigned long long *bad) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    unsigned long long mine = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        mine += buf[i] != pattern_byte(seed, i);
    if (mine)
        atomicAdd(bad, mine);
}

static unsigned grid_for(size_t n) {
    size_t g = (n + 255) / 256;
    return (unsigned)(g > 4096 ? 4096 : (g ? g : 1));
}

void bench_fill_pattern(void *dst, size_t n, uint32_t seed, int invert, cudaStream_t stream) {
    if (n == 0)
        return;
    fill_pattern_kernel<<<grid_for(n), 256, 0, stream>>>((unsigned char *)dst, n, seed, invert);
    BENCH_CUDA(cudaGetLastError());
}

unsigned long long bench_count_mismatch(const void *buf, size_t n, uint32_t seed, cudaStream_t stream) {
    unsigned long long *d_bad = NULL, bad = 0;
    if (n == 0)
        return 0;
    BENCH_CUDA(cudaMalloc((void **)&d_bad, sizeof *d_bad));
    BENCH_CUDA(cudaMemsetAsync(d_bad, 0, sizeof *d_bad, stream));
    count_mismatch_kernel<<<grid_for(n), 256, 0, stream>>>((const unsigned char *)buf, n, seed, d_bad);
    BENCH_CUDA(cudaGetLastError());
    BENCH_CUDA(cudaMemcpyAsync(&bad, d_bad, sizeof bad, cudaMemcpyDeviceToHost, stream));
    BENCH_CUDA(cudaStreamSynchronize(stream));
    BENCH_CUDA(cudaFree(d_bad));
    return bad;
}

/* ---- formatting --------------------------------------------------------------- */

const char *bench_fmt(const char *fmt, ...) {
    static char ring[32][512];
    static unsigned next;
    char *b = ring[next++ % 32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof ring[0], fmt, ap);
    va_end(ap);
    return b;
}

const char *bench_fmt_bytes(size_t n) {
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    size_t whole = n;
    while (u < 4 && whole >= 1024 && whole % 1024 == 0) {
        whole /= 1024;
        ++u;
    }
    if (u > 0 || n < 1024)
        return bench_fmt("%zu %s", whole, unit[u]);
    /* Odd sizes: the nearest unit below plus the remainder, exact. */
    size_t mib = n >> 20, kib = n >> 10;
    if (mib)
        return bench_fmt("%zu MiB+%zu B", mib, n - (mib << 20));
    return bench_fmt("%zu KiB+%zu B", kib, n - (kib << 10));
}

const char *bench_fmt_ratio(double num, double den) {
    if (!(num > 0.0) || !(den > 0.0))
        return "-";
    return bench_fmt("%.2fx", num / den);
}

/* ---- report ------------------------------------------------------------------- */

struct bench_report {
    int print;
    char *md;
    size_t len, cap;
};

#define BENCH_TABLE_MAX_COLS 16

struct bench_table {
    char *title;
    int ncols, nrows, cap;
    char *headers[BENCH_TABLE_MAX_COLS];
    char **cells; /* nrows * ncols */
    char *notes;
};

static char *xstrdup(const char *s) {
    char *d = strdup(s ? s : "");
    if (!d)
        bench_fatal(__FILE__, __LINE__, "strdup", "out of memory");
    return d;
}

bench_report_t *bench_report_new(int print) {
    bench_report_t *r = (bench_report_t *)calloc(1, sizeof *r);
    if (!r)
        bench_fatal(__FILE__, __LINE__, "calloc", "out of memory");
    r->print = print;
    return r;
}

void bench_report_free(bench_report_t *r) {
    if (!r)
        return;
    free(r->md);
    free(r);
}

static void md_append(bench_report_t *r, const char *s) {
    size_t n = strlen(s);
    if (!r->print)
        return;
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n + 1)
            cap *= 2;
        char *m = (char *)realloc(r->md, cap);
        if (!m)
            bench_fatal(__FILE__, __LINE__, "realloc", "out of memory");
        r->md = m;
        r->cap = cap;
    }
    memcpy(r->md + r->len, s, n + 1);
    r->len += n;
}

void bench_report_text(bench_report_t *r, const char *fmt, ...) {
    char buf[4096];
    va_list ap;
    if (!r->print)
        return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    printf("%s\n", buf);
    fflush(stdout);
    md_append(r, buf);
    md_append(r, "\n\n");
}

void bench_report_section(bench_report_t *r, const char *title) {
    if (!r->print)
        return;
    size_t n = strlen(title);
    printf("\n%s\n", title);
    for (size_t i = 0; i < n; ++i)
        putchar('=');
    printf("\n");
    fflush(stdout);
    md_append(r, "## ");
    md_append(r, title);
    md_append(r, "\n\n");
}

static const char *g_table_label;

void bench_table_label(const char *label) { g_table_label = label; }

bench_table_t *bench_table_new(const char *title, int ncols, const char *const *headers) {
    bench_table_t *t = (bench_table_t *)calloc(1, sizeof *t);
    if (!t)
        bench_fatal(__FILE__, __LINE__, "calloc", "out of memory");
    if (ncols > BENCH_TABLE_MAX_COLS)
        bench_fatal(__FILE__, __LINE__, "bench_table_new", "too many columns");
    t->title = xstrdup(g_table_label ? bench_fmt("%s: %s", g_table_label, title) : title);
    t->ncols = ncols;
    for (int c = 0; c < ncols; ++c)
        t->headers[c] = xstrdup(headers[c]);
    return t;
}

void bench_table_row(bench_table_t *t, const char *const *cells) {
    if (t->nrows == t->cap) {
        int cap = t->cap ? 2 * t->cap : 16;
        char **c = (char **)realloc(t->cells, (size_t)cap * t->ncols * sizeof(char *));
        if (!c)
            bench_fatal(__FILE__, __LINE__, "realloc", "out of memory");
        t->cells = c;
        t->cap = cap;
    }
    for (int c = 0; c < t->ncols; ++c)
        t->cells[(size_t)t->nrows * t->ncols + c] = xstrdup(cells[c]);
    t->nrows++;
}

void bench_table_note(bench_table_t *t, const char *note) {
    size_t old = t->notes ? strlen(t->notes) : 0, n = strlen(note);
    char *s = (char *)realloc(t->notes, old + n + 2);
    if (!s)
        bench_fatal(__FILE__, __LINE__, "realloc", "out of memory");
    memcpy(s + old, note, n);
    s[old + n] = '\n';
    s[old + n + 1] = '\0';
    t->notes = s;
}

static void table_free(bench_table_t *t) {
    for (int i = 0; i < t->nrows * t->ncols; ++i)
        free(t->cells[i]);
    for (int c = 0; c < t->ncols; ++c)
        free(t->headers[c]);
    free(t->cells);
    free(t->notes);
    free(t->title);
    free(t);
}

void bench_table_emit(bench_report_t *r, bench_table_t *t) {
    size_t w[BENCH_TABLE_MAX_COLS];
    if (!r->print) {
        table_free(t);
        return;
    }
    for (int c = 0; c < t->ncols; ++c) {
        w[c] = strlen(t->headers[c]);
        for (int i = 0; i < t->nrows; ++i) {
            size_t n = strlen(t->cells[(size_t)i * t->ncols + c]);
            if (n > w[c])
                w[c] = n;
        }
    }
    /* stdout: first column left-aligned, numbers right-aligned. */
    printf("\n%s\n", t->title);
    for (int c = 0; c < t->ncols; ++c)
        printf(c ? "  %*s" : "%-*s", (int)w[c], t->headers[c]);
    printf("\n");
    for (int i = 0; i < t->nrows; ++i) {
        for (int c = 0; c < t->ncols; ++c)
            printf(c ? "  %*s" : "%-*s", (int)w[c], t->cells[(size_t)i * t->ncols + c]);
        printf("\n");
    }
    if (t->notes)
        printf("%s", t->notes);
    fflush(stdout);

    md_append(r, "### ");
    md_append(r, t->title);
    md_append(r, "\n\n|");
    for (int c = 0; c < t->ncols; ++c) {
        md_append(r, " ");
        md_append(r, t->headers[c]);
        md_append(r, " |");
    }
    md_append(r, "\n|");
    for (int c = 0; c < t->ncols; ++c)
        md_append(r, c ? " ---: |" : " :--- |");
    md_append(r, "\n");
    for (int i = 0; i < t->nrows; ++i) {
        md_append(r, "|");
        for (int c = 0; c < t->ncols; ++c) {
            md_append(r, " ");
            md_append(r, t->cells[(size_t)i * t->ncols + c]);
            md_append(r, " |");
        }
        md_append(r, "\n");
    }
    md_append(r, "\n");
    if (t->notes) {
        md_append(r, t->notes);
        md_append(r, "\n");
    }
    table_free(t);
}

int bench_report_write(const bench_report_t *r, const char *path, const char *title,
                       const char *header_md) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "symm-bench: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f, "# %s\n\n%s\n", title, header_md ? header_md : "");
    if (r->md)
        fputs(r->md, f);
    if (fclose(f) != 0) {
        fprintf(stderr, "symm-bench: writing %s failed: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- machine description ------------------------------------------------------- */

typedef struct strbuf {
    char *s;
    size_t len, cap;
} strbuf_t;

static void sb_printf(strbuf_t *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void sb_printf(strbuf_t *b, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        size_t room = b->cap - b->len;
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if ((size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 1024;
        while (cap < b->len + (size_t)n + 1)
            cap *= 2;
        char *s = (char *)realloc(b->s, cap);
        if (!s)
            bench_fatal(__FILE__, __LINE__, "realloc", "out of memory");
        b->s = s;
        b->cap = cap;
    }
}

void bench_date_utc(char *buf, size_t len) {
    time_t now = time(NULL);
    struct tm tm;
    if (!gmtime_r(&now, &tm) || strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
        snprintf(buf, len, "(unknown date)");
}

/* nvidia-smi's `topo -m` shows the NVLink picture (NV18 ...) that the CUDA
 * runtime does not expose; optional, and bounded (a wedged driver can make
 * nvidia-smi hang). */
static void append_nvidia_smi_topo(strbuf_t *b) {
    FILE *p = popen("timeout -k 2 20 nvidia-smi topo -m 2>/dev/null </dev/null", "r");
    char line[512];
    int any = 0;
    if (!p)
        return;
    while (fgets(line, sizeof line, p)) {
        if (!any)
            sb_printf(b, "\n`nvidia-smi topo -m`:\n\n```\n");
        any = 1;
        sb_printf(b, "%s", line);
    }
    if (any)
        sb_printf(b, "```\n");
    pclose(p);
}

char *bench_machine_markdown(void) {
    strbuf_t b = {NULL, 0, 0};
    char host[256] = "?";
    int ndev = 0, drv = 0, rt = 0;
    if (gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "?");
    host[sizeof host - 1] = '\0';
    sb_printf(&b, "- host: `%s`\n", host);
    if (cudaGetDeviceCount(&ndev) != cudaSuccess)
        ndev = 0;
    (void)cudaDriverGetVersion(&drv);
    (void)cudaRuntimeGetVersion(&rt);
    sb_printf(&b, "- CUDA driver %d.%d, runtime %d.%d (symm-bench built with %d.%d)\n",
              drv / 1000, (drv % 1000) / 10, rt / 1000, (rt % 1000) / 10,
              CUDART_VERSION / 1000, (CUDART_VERSION % 1000) / 10);
    sb_printf(&b, "- GPUs: %d\n", ndev);
    for (int d = 0; d < ndev; ++d) {
        cudaDeviceProp p;
        char bus[32] = "?";
        if (cudaGetDeviceProperties(&p, d) != cudaSuccess)
            continue;
        (void)cudaDeviceGetPCIBusId(bus, sizeof bus, d);
        sb_printf(&b, "  - GPU %d: %s, sm_%d%d, %d SMs, %.1f GiB, PCI %s\n", d, p.name, p.major,
                  p.minor, p.multiProcessorCount, (double)p.totalGlobalMem / (1u << 30), bus);
    }
    if (ndev > 1) {
        /* P = peer access, A = native atomics over the link, rank = the
         * driver's relative performance rank of the link (0 best). */
        sb_printf(&b, "- peer access (P), native peer atomics (A), link rank:\n\n| from\\to |");
        for (int j = 0; j < ndev; ++j)
            sb_printf(&b, " %d |", j);
        sb_printf(&b, "\n| --- |");
        for (int j = 0; j < ndev; ++j)
            sb_printf(&b, " --- |");
        sb_printf(&b, "\n");
        for (int i = 0; i < ndev; ++i) {
            sb_printf(&b, "| %d |", i);
            for (int j = 0; j < ndev; ++j) {
                int acc = 0, atom = 0, rank = -1;
                if (i == j) {
                    sb_printf(&b, " - |");
                    continue;
                }
                (void)cudaDeviceCanAccessPeer(&acc, i, j);
                (void)cudaDeviceGetP2PAttribute(&atom, cudaDevP2PAttrNativeAtomicSupported, i, j);
                (void)cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, i, j);
                sb_printf(&b, " %s%s r%d |", acc ? "P" : "-", atom ? "A" : "-", rank);
            }
            sb_printf(&b, "\n");
        }
    }
    append_nvidia_smi_topo(&b);
    if (!b.s)
        sb_printf(&b, "%s", "");
    return b.s;
}
