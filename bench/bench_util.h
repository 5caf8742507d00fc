/*
 * bench_util.h - what every symm-bench mode shares: fatal error checks, CUDA
 * event timing (medians over repeats), CUDA-graph timing, result tables with
 * ratio columns, the report (stdout + markdown file) and the machine
 * description that heads it, and a byte pattern to check that data arrived.
 *
 * Compiled as CUDA C++ (bench_util.cu); the header needs cuda_runtime.h.
 */
#ifndef SYMM_BENCH_UTIL_H
#define SYMM_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime.h>

#include "symm/symm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors: a benchmark cannot go on after a failed CUDA or symm call ---- */

/* Print "symm-bench [pe N]: FATAL file:line: what: why" (and the phase) and
 * _exit(1): no exit handlers run, since NVSHMEM's or NCCL's could wait for
 * peers that will never come; symmrun then stops the other PEs. */
void bench_fatal(const char *file, int line, const char *what, const char *why);

#define BENCH_CUDA(call)                                                        \
    do {                                                                        \
        cudaError_t e__ = (call);                                               \
        if (e__ != cudaSuccess)                                                 \
            bench_fatal(__FILE__, __LINE__, #call, cudaGetErrorString(e__));    \
    } while (0)

#define BENCH_SYMM(call)                                                        \
    do {                                                                        \
        symm_status_t s__ = (call);                                             \
        if (s__ != SYMM_SUCCESS)                                                \
            bench_fatal(__FILE__, __LINE__, #call, symm_last_error()[0] ?       \
                        symm_last_error() : symm_strerror(s__));                \
    } while (0)

/* Checks the launch, then (synchronously) the kernel. */
#define BENCH_KERNEL_CHECK()                                                    \
    do {                                                                        \
        BENCH_CUDA(cudaGetLastError());                                         \
        BENCH_CUDA(cudaDeviceSynchronize());                                    \
    } while (0)

/* ---- progress and the watchdog ----------------------------------------------
 * Every step of a run is a named phase. With --verbose each phase prints
 * "bench: pe N: <phase> start" and "... done (S s)" to stderr (flushed;
 * symmrun adds the rank prefix). A watchdog thread ends the process with
 * exit code 3 (symmrun then stops the other PEs) when one phase, or the gap
 * after it, lasts longer than the phase timeout, naming the phase; SIGTERM /
 * SIGINT (symmrun's timeout, ctest) also print the phase before the process
 * dies. So a hung run always says where it stopped. */

/* Start the watchdog (phase_timeout_s <= 0: none) and the signal report.
 * Call once, early; pe may be -1 until bench_progress_set_pe. */
void bench_progress_init(int pe, int verbose, double phase_timeout_s);
void bench_progress_set_pe(int pe);
int bench_verbose(void);

/* A new phase begins (the previous one, if any, is closed first). */
void bench_phase_begin(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* An umbrella phase (a whole mode) whose limit is `factor` times the phase
 * timeout: the steps inside it that name their own phases get the normal
 * limit, one that names none is still bounded. */
void bench_phase_begin_long(double factor, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* The current phase is done; the time until the next begin is still watched
 * (as "after <phase>"). */
void bench_phase_end(void);

/* A verbose-only progress line "bench: pe N: ..." (no phase change). */
void bench_note(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* ---- timing ---------------------------------------------------------------- */

/* One unit of work to time: enqueue it on `stream` (no host synchronisation). */
typedef void (*bench_enqueue_fn)(void *arg, cudaStream_t stream);

/* Median of v[0..n) (v is not modified). n == 0 gives 0. */
double bench_median(const double *v, int n);

/*
 * bench_time_stream - enqueue `warmup` untimed calls of fn, then `repeats`
 * times: an event, `iters` calls, an event, wait. Returns the median over the
 * repeats of the milliseconds per call. Every PE that takes part in the
 * timed work (e.g. both sides of ncclSend/ncclRecv) calls it with the same
 * counts.
 */
double bench_time_stream(bench_enqueue_fn fn, void *arg, cudaStream_t stream,
                         int warmup, int iters, int repeats);

/*
 * bench_time_graph - capture `calls_per_graph` calls of fn into a CUDA graph,
 * launch it `warmup` times untimed, then `repeats` times time `iters` graph
 * launches. Returns the median milliseconds per call (graph time divided by
 * calls_per_graph): launch overhead as a graph replay sees it.
 */
double bench_time_graph(bench_enqueue_fn fn, void *arg, cudaStream_t stream,
                        int calls_per_graph, int warmup, int iters, int repeats);

/* ---- data check ---------------------------------------------------------------- */

/* Fill n bytes at device `dst` with the pattern of `seed` (byte i is a hash of
 * (seed, i)); with `invert` set, every byte differs from the pattern instead,
 * so a destination prefilled that way fails the check until the data lands. */
void bench_fill_pattern(void *dst, size_t n, uint32_t seed, int invert, cudaStream_t stream);

/* Count the bytes of device `buf` that differ from the pattern of `seed`
 * (synchronises `stream`). */
unsigned long long bench_count_mismatch(const void *buf, size_t n, uint32_t seed, cudaStream_t stream);

/* ---- formatting ---------------------------------------------------------------- */

/* printf into one of 32 rotating static buffers (512 bytes): for table cells,
 * which the table copies. Not thread-safe. */
const char *bench_fmt(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* "8 B", "1000 B", "4 KiB", "256 MiB", "1 MiB+3 B" (exact). */
const char *bench_fmt_bytes(size_t n);

/* "0.98x", or "-" when either side is missing (<= 0). */
const char *bench_fmt_ratio(double num, double den);

/* ---- report: tables and text to stdout (rank 0) and to the markdown file ------ */

typedef struct bench_report bench_report_t;
typedef struct bench_table bench_table_t;

/* `print` non-zero: this process prints (rank 0); others collect nothing. */
bench_report_t *bench_report_new(int print);
void bench_report_free(bench_report_t *r);

/* A paragraph (one line or more), printed and kept for the file. */
void bench_report_text(bench_report_t *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* A heading ("## title" in the file, underlined on stdout). */
void bench_report_section(bench_report_t *r, const char *title);

/* Tables: up to 16 columns; cells are copied. bench_table_emit prints the
 * table (aligned) and appends it to the report as markdown, then frees it. */
bench_table_t *bench_table_new(const char *title, int ncols, const char *const *headers);
/* Put `label` before the title of every table made from now on (NULL: none):
 * what holds for every table of the run, such as PEs sharing one GPU. */
void bench_table_label(const char *label);
void bench_table_row(bench_table_t *t, const char *const *cells);
void bench_table_note(bench_table_t *t, const char *note); /* printed under the table */
void bench_table_emit(bench_report_t *r, bench_table_t *t);

/* Write "# title", the header lines (machine, command, date) and everything
 * reported so far to `path`. Returns 0, or -1 with errno-style message printed. */
int bench_report_write(const bench_report_t *r, const char *path, const char *title,
                       const char *header_md);

/* ---- machine description ---------------------------------------------------- */

/* Markdown lines describing the machine: hostname, GPUs (names, count, memory,
 * SMs, PCI ids), driver and runtime versions, the peer-access / native-atomics
 * matrix and, if nvidia-smi is present, its `topo -m` (NVLink) picture.
 * Returns a malloc'd string (caller frees). */
char *bench_machine_markdown(void);

/* UTC date "2026-11-21 15:04:05 UTC" into buf. */
void bench_date_utc(char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* SYMM_BENCH_UTIL_H */
