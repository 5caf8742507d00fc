/*
 * test_bench_util.cu - the host-side pieces of bench_util (no GPU needed):
 * medians, size and ratio formatting, tables into the report, the results
 * file with its header, the machine description on a machine without
 * GPUs, and the progress watchdog (a stuck phase ends the process with code
 * 3 naming the phase; SIGTERM names it too). Exits 0 when every check passed.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

static int g_fail;

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                 \
            fprintf(stderr, "\n");                                        \
            g_fail = 1;                                                   \
        }                                                                 \
    } while (0)

static void check_str(const char *got, const char *want) {
    CHECK(strcmp(got, want) == 0, "got '%s', want '%s'", got, want);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "r");
    static char buf[1 << 16];
    size_t n;
    if (!f)
        return NULL;
    n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Fork a child that starts the watchdog (1 s) and sits in one phase; with
 * `term` the parent sends SIGTERM after 300 ms instead. Returns the wait
 * status; the child's stderr goes to errpath. */
static int run_stuck_child(int term, const char *errpath, double *seconds) {
    double t0 = now_s();
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (!freopen(errpath, "w", stderr))
            _exit(98);
        bench_progress_init(7, 1, term ? 30.0 : 1.0);
        bench_phase_begin("warm-up");
        bench_phase_end();
        bench_phase_begin("stuck %s", "here");
        sleep(20);
        _exit(0); /* the watchdog or the signal never came */
    }
    int st = 0;
    if (term) {
        struct timespec ts = {0, 300000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGTERM);
    }
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    *seconds = now_s() - t0;
    return st;
}

static void check_watchdog(const char *path) {
    char errpath[4096];
    double secs = 0;
    snprintf(errpath, sizeof errpath, "%s.stderr", path);

    int st = run_stuck_child(0, errpath, &secs);
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 3, "stuck phase: wait status %#x, want exit 3", st);
    CHECK(secs < 15.0, "the watchdog took %.1f s for a 1 s phase limit", secs);
    char *e = slurp(errpath);
    CHECK(e && strstr(e, "bench: pe 7: warm-up start") && strstr(e, "bench: pe 7: warm-up done"),
          "verbose start/done lines: %s", e ? e : "(none)");
    CHECK(e && strstr(e, "bench: pe 7: STUCK: phase 'stuck here'"), "watchdog names the phase: %s", e ? e : "(none)");

    st = run_stuck_child(1, errpath, &secs);
    CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM, "SIGTERM: wait status %#x, want death by SIGTERM",
          st);
    e = slurp(errpath);
    CHECK(e && strstr(e, "bench: pe 7: stopped by signal 15 during phase 'stuck here'"), "SIGTERM names the phase: %s",
          e ? e : "(none)");
    unlink(errpath);
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "test_bench_util.md";

    double odd[] = {5, 1, 4, 2, 3}, even[] = {4, 1, 3, 2};
    CHECK(bench_median(odd, 5) == 3.0, "%g", bench_median(odd, 5));
    CHECK(bench_median(even, 4) == 2.5, "%g", bench_median(even, 4));
    CHECK(odd[0] == 5 && odd[4] == 3, "median must not reorder its input");
    CHECK(bench_median(odd, 0) == 0.0, "empty");

    check_str(bench_fmt_bytes(8), "8 B");
    check_str(bench_fmt_bytes(1000), "1000 B");
    check_str(bench_fmt_bytes(4096), "4 KiB");
    check_str(bench_fmt_bytes((size_t)256 << 20), "256 MiB");
    check_str(bench_fmt_bytes(((size_t)1 << 20) + 3), "1 MiB+3 B");
    check_str(bench_fmt_bytes(1536), "1 KiB+512 B");
    check_str(bench_fmt_ratio(98.0, 100.0), "0.98x");
    /* Notes are long sentences: they must survive whole. */
    char longs[400];
    memset(longs, 'x', sizeof longs - 1);
    longs[sizeof longs - 1] = '\0';
    check_str(bench_fmt("%s", longs), longs);
    check_str(bench_fmt_ratio(1.0, 0.0), "-");
    check_str(bench_fmt_ratio(-2.0, 1.0), "-");

    /* Rank 0 report: text, a section and a table land in the file. */
    bench_report_t *r = bench_report_new(1);
    bench_report_section(r, "rma: test");
    bench_report_text(r, "pair: PE %d -> PE %d", 0, 1);
    const char *hdr[] = {"size", "symm GB/s", "ratio"};
    bench_table_t *t = bench_table_new("Put bandwidth", 3, hdr);
    const char *row1[] = {"8 B", "0.1", bench_fmt_ratio(0.1, 0.2)};
    const char *row2[] = {"256 MiB", "380.5", bench_fmt_ratio(380.5, 390.0)};
    bench_table_row(t, row1);
    bench_table_row(t, row2);
    bench_table_note(t, "a note");
    bench_table_emit(r, t);
    CHECK(bench_report_write(r, path, "symm-bench results", "- date: today\n") == 0, "write %s", path);
    char *md = slurp(path);
    CHECK(md != NULL, "cannot read %s back", path);
    if (md) {
        CHECK(strncmp(md, "# symm-bench results\n\n- date: today\n", 36) == 0, "header: %.60s", md);
        CHECK(strstr(md, "## rma: test") != NULL, "section missing");
        CHECK(strstr(md, "pair: PE 0 -> PE 1") != NULL, "text missing");
        CHECK(strstr(md, "| size | symm GB/s | ratio |") != NULL, "table header missing");
        CHECK(strstr(md, "| :--- | ---: | ---: |") != NULL, "alignment row missing");
        CHECK(strstr(md, "| 256 MiB | 380.5 | 0.98x |") != NULL, "row missing");
        CHECK(strstr(md, "a note") != NULL, "note missing");
    }
    bench_report_free(r);

    /* Other ranks collect and print nothing. */
    bench_report_t *quiet = bench_report_new(0);
    bench_report_text(quiet, "never shown");
    CHECK(bench_report_write(quiet, path, "t", "") == 0, "write empty");
    md = slurp(path);
    CHECK(md && strstr(md, "never shown") == NULL, "rank != 0 text leaked");
    bench_report_free(quiet);

    /* The description works with or without GPUs. */
    char *m = bench_machine_markdown();
    CHECK(m && strstr(m, "- host: `") && strstr(m, "- GPUs: "), "machine: %s", m ? m : "(null)");
    free(m);
    char date[64];
    bench_date_utc(date, sizeof date);
    CHECK(strstr(date, " UTC") != NULL, "%s", date);

    check_watchdog(path);

    printf(g_fail ? "test_bench_util: FAILED\n" : "test_bench_util: all checks passed\n");
    return g_fail;
}
