/*
 * bench_modes.h - how a benchmark mode plugs into symm-bench.
 *
 * A mode is a function that every PE runs (all PEs take part; rank 0 prints
 * through env->report). To add one, drop a .cu file into bench/ (the build
 * globs the .cu files of bench/) containing:
 *
 *     #include "bench_modes.h"
 *     static int run_coll(bench_env_t *env) { ...; return 0; }
 *     BENCH_MODE(coll, 20, "stream collectives vs NCCL", run_coll)
 *
 * `symm-bench --mode coll` runs it; with no --mode every registered mode runs
 * in `order`. A mode returns 0, or non-zero after printing why (symm-bench
 * then exits 1, after the other modes and the results file).
 */
#ifndef SYMM_BENCH_MODES_H
#define SYMM_BENCH_MODES_H

#include <cuda_runtime.h>

#include "symm/symm.h"
#include "bench_util.h"

#if SYMM_BENCH_HAVE_NCCL
#  include <nccl.h>
#endif

/* The moe mode's tables (--moe-rows). */
#define BENCH_MOE_LL 1
#define BENCH_MOE_HT 2

/* What symm-bench set up before the modes run; shared by all of them. */
typedef struct bench_env {
    int me, npes;              /* symm world PE and size */
    int device;                /* CUDA device of this PE */
    int quick;                 /* --quick: fewer sizes, repeats and iterations */
    int moe_rows;              /* --moe-rows: the moe mode's tables (BENCH_MOE_LL | BENCH_MOE_HT) */
    int shared;                /* some PEs share a GPU: not a measure of NVLink */
    bench_report_t *report;    /* prints on rank 0 only; the --out file */
    const symm_ctx_t *ctx;     /* world team device context */
    cudaStream_t stream;       /* a non-blocking stream on `device` */
    int nccl_ok;               /* an NCCL communicator over all PEs exists */
#if SYMM_BENCH_HAVE_NCCL
    ncclComm_t nccl;
#endif
    const char *nccl_status;   /* "NCCL 2.28.9" or why it is unavailable */
    int nvshmem_ok;            /* NVSHMEM is initialised over all PEs */
    const char *nvshmem_status;/* "NVSHMEM 3.4.5" or why it is unavailable */
    const char *backend_label; /* --backend: this run's entry ("nvshmem:remote"), else NULL */
} bench_env_t;

typedef int (*bench_mode_run_fn)(bench_env_t *env);

typedef struct bench_mode {
    const char *name;
    int order;                 /* default run order, ascending */
    const char *help;
    bench_mode_run_fn run;
    struct bench_mode *next;
} bench_mode_t;

/* Called by BENCH_MODE before main; the list is kept sorted by order. */
void bench_register_mode(bench_mode_t *mode);

/* The registered modes, sorted by order (NULL-terminated list). */
bench_mode_t *bench_modes(void);

#define BENCH_MODE(ident, order, help, fn)                                     \
    static bench_mode_t bench_mode__##ident = {#ident, order, help, fn, NULL}; \
    namespace {                                                                \
    struct bench_mode_registrar__##ident {                                     \
        bench_mode_registrar__##ident() { bench_register_mode(&bench_mode__##ident); } \
    } bench_mode_registrar_instance__##ident;                                  \
    }

/* ---- helpers that more than one mode needs ----------------------------------- */

/* Host barrier over all PEs (device work of this PE is finished first). */
void bench_barrier(void);

/* Rank 0's value of x on every PE (for decisions all PEs must share). */
int bench_bcast_int(int x);

/* Logical AND over all PEs. */
int bench_all_true(int x);

/* The "backends" mode's side-by-side table (backends_bench.cu), after every
 * backend of --backend ran; nothing when the mode did not run. */
void bench_backends_emit(bench_report_t *report, int npes);
/* A --backend entry whose symm_init failed: its column reads `why`. */
void bench_backends_failed(const char *label, const char *why);

#endif /* SYMM_BENCH_MODES_H */
