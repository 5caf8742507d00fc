/*
 * bench_main.cu - symm-bench: options, the re-launch under symmrun, symm /
 * NCCL / NVSHMEM set-up in the same processes, the modes, the results file.
 *
 *   symm-bench [--mode NAME[,NAME...]] [--out FILE] [--quick] [--npes N]
 *              [--require-gpus N] [--require-no-gpu] [--timeout S]
 *              [--phase-timeout S] [--verbose] [--no-nvshmem] [--no-nccl] [--list]
 *              [--backend LIST]
 *
 * Started by hand (no launcher variables) it re-executes itself as
 * `symmrun -n <GPUs> symm-bench ARGS` so that every GPU gets one PE.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_modes.h"
#include "nvshmem/bench_nvshmem.h"
#include "symm/device/backend/list.h"

/* ---- mode registry ------------------------------------------------------------------ */

static bench_mode_t *g_modes;

void bench_register_mode(bench_mode_t *mode) {
    bench_mode_t **p = &g_modes;
    while (*p && (*p)->order <= mode->order)
        p = &(*p)->next;
    mode->next = *p;
    *p = mode;
}

bench_mode_t *bench_modes(void) { return g_modes; }

static bench_mode_t *find_mode(const char *name, size_t len) {
    for (bench_mode_t *m = g_modes; m; m = m->next)
        if (strlen(m->name) == len && strncmp(m->name, name, len) == 0)
            return m;
    return NULL;
}

/* ---- helpers shared by modes ----------------------------------------------------------- */

void bench_barrier(void) { BENCH_SYMM(symm_barrier_all()); }

int bench_bcast_int(int x) {
    BENCH_SYMM(symm_host_broadcast(&x, sizeof x, 0));
    return x;
}

int bench_all_true(int x) {
    int n = symm_n_pes(), ok = 1;
    int *all = (int *)calloc((size_t)n, sizeof(int));
    if (!all)
        bench_fatal(__FILE__, __LINE__, "calloc", "out of memory");
    x = x != 0;
    BENCH_SYMM(symm_host_allgather(&x, all, sizeof x));
    for (int i = 0; i < n; ++i)
        ok &= all[i];
    free(all);
    return ok;
}

/* ---- options ------------------------------------------------------------------------ */

typedef struct opts {
    const char *modes; /* comma list, or NULL = all */
    const char *out;
    int quick;
    int npes;          /* 0 = one per GPU */
    int require_gpus;  /* > 0: fewer GPUs -> SKIP, exit 77 */
    int require_no_gpu;/* a visible GPU -> SKIP, exit 77 (the CI test) */
    int timeout;       /* seconds symmrun allows the whole run; 0 = none; -1 = default */
    int phase_timeout; /* seconds one phase may take before the watchdog ends the PE; 0 = none */
    int verbose;
    int no_nvshmem, no_nccl; /* skip the library entirely, not even init */
    int list;
    const char *backends; /* --backend: comma list of backends of the list (":remote" each) */
} opts_t;

/* symmrun's whole-run limit when --timeout is not given (seconds): a full run
 * takes a few minutes; a quick one well under one. Both sit below the
 * ctest TIMEOUTs and the GPU runner's walls, so symmrun ends a hang first and
 * says so. */
#define BENCH_DEFAULT_TIMEOUT 600
#define BENCH_DEFAULT_TIMEOUT_QUICK 150
#define BENCH_DEFAULT_PHASE_TIMEOUT 120

static void usage(FILE *f) {
    fprintf(f,
            "usage: symm-bench [--mode NAME[,NAME...]] [--out FILE] [--quick] [--npes N]\n"
            "                  [--require-gpus N] [--require-no-gpu] [--timeout S] [--phase-timeout S]\n"
            "                  [--verbose] [--no-nvshmem] [--no-nccl] [--list]\n"
            "  --mode          modes to run (default: all, in order); --list shows them\n"
            "  --out FILE      also write the results as markdown (machine, command, date first)\n"
            "  --quick         a fast smoke run: fewer sizes, repeats and iterations\n"
            "  --npes N        PEs to launch when started by hand (default: one per GPU)\n"
            "  --require-gpus N  exit 77 with a SKIP line when fewer GPUs are present (for ctest)\n"
            "  --require-no-gpu  exit 77 with a SKIP line when a GPU is visible (for the CI test)\n"
            "  --timeout S     when started by hand: symmrun stops the run after S seconds\n"
            "                  (exit 124; default 600, 150 with --quick, 0 = never)\n"
            "  --phase-timeout S  a PE whose current phase (init, one size of one measurement...)\n"
            "                  runs longer than S seconds says which and exits 3 (default 120, 0 = never)\n"
            "  --verbose       progress to stderr: 'bench: pe N: <phase> start/done' for every step\n"
            "                  (also SYMM_BENCH_VERBOSE=1)\n"
            "  --no-nvshmem    leave NVSHMEM out entirely, not even its init (SYMM_BENCH_NO_NVSHMEM=1)\n"
            "  --no-nccl       leave NCCL out entirely, not even its init (SYMM_BENCH_NO_NCCL=1)\n"
            "  --backend LIST  run the modes once per symm backend of LIST (native, nvshmem, nccl; NAME:remote\n"
            "                  sets SYMM_DEBUG_FORCE_REMOTE=1: every call takes the library's path), then the\n"
            "                  backends mode's table side by side; default modes rma,coll,backends; the\n"
            "                  NCCL/NVSHMEM comparison columns are left out (symm runs on them)\n"
            "SYMM_WAIT_TIMEOUT defaults to 20 s inside symm-bench, so a lost symm signal stops\n"
            "its kernel with a message instead of hanging.\n"
            "Started without a launcher it re-runs itself under symmrun (found next to it in\n"
            "../tools/, or $SYMMRUN). NVSHMEM_REMOTE_TRANSPORT=none, NVSHMEM_DISABLE_NVLS=1 and\n"
            "NCCL_NVLS_ENABLE=0 are set: no multicast object is ever created.\n");
}

static int parse_int(const char *s, int *out) {
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < 0 || v > 1 << 20)
        return -1;
    *out = (int)v;
    return 0;
}

/* SYMM_BENCH_* switches: set and not "0". */
static int env_flag(const char *name) {
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

/* A --backend name: a backend of the list that kernels are compiled for (a bitcode stem). */
static int bench_backend_known(const char *p, size_t len) {
#define BENCH_BE_KNOWN(name, KIND, dev, bitcode, ...)                          \
    if (sizeof(bitcode) > 1 && len == sizeof(#name) - 1 && !strncmp(p, #name, len)) \
        return 1;
    SYMM__BACKEND_LIST(BENCH_BE_KNOWN)
#undef BENCH_BE_KNOWN
    return 0;
}

static int parse_opts(int argc, char **argv, opts_t *o) {
    memset(o, 0, sizeof *o);
    o->timeout = -1;
    o->phase_timeout = BENCH_DEFAULT_PHASE_TIMEOUT;
    o->verbose = env_flag("SYMM_BENCH_VERBOSE");
    o->no_nvshmem = env_flag("SYMM_BENCH_NO_NVSHMEM");
    o->no_nccl = env_flag("SYMM_BENCH_NO_NCCL");
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) {
            o->quick = 1;
        } else if (!strcmp(a, "--list")) {
            o->list = 1;
        } else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            o->verbose = 1;
        } else if (!strcmp(a, "--no-nvshmem")) {
            o->no_nvshmem = 1;
        } else if (!strcmp(a, "--no-nccl")) {
            o->no_nccl = 1;
        } else if (!strcmp(a, "--require-no-gpu")) {
            o->require_no_gpu = 1;
        } else if (!strcmp(a, "--phase-timeout") && val && parse_int(val, &o->phase_timeout) == 0) {
            ++i;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--mode") && val) {
            o->modes = strcmp(val, "all") ? val : NULL;
            ++i;
        } else if (!strcmp(a, "--out") && val) {
            o->out = val;
            ++i;
        } else if (!strcmp(a, "--npes") && val && parse_int(val, &o->npes) == 0 && o->npes > 0) {
            ++i;
        } else if (!strcmp(a, "--require-gpus") && val && parse_int(val, &o->require_gpus) == 0) {
            ++i;
        } else if (!strcmp(a, "--timeout") && val && parse_int(val, &o->timeout) == 0) {
            ++i;
        } else if (!strcmp(a, "--backend") && val) {
            o->backends = val;
            ++i;
        } else {
            fprintf(stderr, "symm-bench: bad argument '%s'\n", a);
            usage(stderr);
            return -1;
        }
    }
    /* Unknown modes fail here, before anything is launched. */
    for (const char *p = o->modes; p && *p;) {
        size_t len = strcspn(p, ",");
        if (!find_mode(p, len)) {
            fprintf(stderr, "symm-bench: unknown mode '%.*s'; modes:", (int)len, p);
            for (bench_mode_t *m = g_modes; m; m = m->next)
                fprintf(stderr, " %s", m->name);
            fprintf(stderr, "\n");
            return -1;
        }
        p += len + (p[len] == ',');
    }
    for (const char *p = o->backends; p && *p;) {
        size_t len = strcspn(p, ","), base = strcspn(p, ",:");
        if (!bench_backend_known(p, base) || (base < len && (len - base != 7 || strncmp(p + base, ":remote", 7)))) {
            fprintf(stderr, "symm-bench: --backend entry '%.*s' is not one of", (int)len, p);
#define BENCH_BE_NAME(name, KIND, dev, bitcode, ...) \
    if (sizeof(bitcode) > 1)                       \
        fprintf(stderr, " %s", #name);
            SYMM__BACKEND_LIST(BENCH_BE_NAME)
#undef BENCH_BE_NAME
            fprintf(stderr, " (optionally with :remote)\n");
            return -1;
        }
        p += len + (p[len] == ',');
    }
    if (o->backends) {
        o->no_nvshmem = o->no_nccl = 1;
        if (!o->modes)
            o->modes = "rma,coll,backends";
    }
    if (o->timeout < 0)
        o->timeout = o->quick ? BENCH_DEFAULT_TIMEOUT_QUICK : BENCH_DEFAULT_TIMEOUT;
    return 0;
}

static int mode_selected(const opts_t *o, const bench_mode_t *m) {
    if (!o->modes)
        return 1;
    for (const char *p = o->modes; *p;) {
        size_t len = strcspn(p, ",");
        if (strlen(m->name) == len && !strncmp(p, m->name, len))
            return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

/* ---- re-launch under symmrun ---------------------------------------------------------- */

static int under_launcher(void) {
    return getenv("RANK") || getenv("OMPI_COMM_WORLD_RANK") || (getenv("SLURM_STEP_ID") && getenv("SLURM_PROCID"));
}

static void relaunch(int argc, char **argv, int npes, int timeout) {
    char exe[PATH_MAX], dir[PATH_MAX], cand[PATH_MAX + 32];
    const char *symmrun = getenv("SYMMRUN");
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        fprintf(stderr, "symm-bench: readlink /proc/self/exe: %s\n", strerror(errno));
        exit(1);
    }
    exe[n] = '\0';
    memcpy(dir, exe, (size_t)n + 1);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    if (!symmrun || !*symmrun) {
        /* build tree: build/bench/symm-bench and build/tools/symmrun;
         * installed: bin/symm-bench next to bin/symmrun. */
        const char *rel[] = {"/../tools/symmrun", "/symmrun"};
        symmrun = NULL;
        for (int i = 0; i < 2 && !symmrun; ++i) {
            snprintf(cand, sizeof cand, "%s%s", dir, rel[i]);
            if (access(cand, X_OK) == 0)
                symmrun = cand;
        }
    }
    char np[16], to[16];
    snprintf(np, sizeof np, "%d", npes);
    snprintf(to, sizeof to, "%d", timeout);
    char **av = (char **)calloc((size_t)argc + 7, sizeof(char *));
    if (!av) {
        fprintf(stderr, "symm-bench: out of memory\n");
        exit(1);
    }
    av[0] = (char *)(symmrun ? symmrun : "symmrun");
    av[1] = (char *)"-n";
    av[2] = np;
    av[3] = (char *)"--timeout";
    av[4] = to;
    av[5] = (char *)"--";
    av[6] = exe;
    for (int i = 1; i < argc; ++i)
        av[6 + i] = argv[i];
    av[6 + argc] = NULL;
    fprintf(stderr, "symm-bench: running %d PEs: %s -n %d %s ...\n", npes, av[0], npes, exe);
    fflush(stderr);
    if (symmrun)
        execv(symmrun, av);
    else
        execvp("symmrun", av); /* last resort: PATH */
    fprintf(stderr, "symm-bench: cannot run symmrun (%s): %s; set SYMMRUN to its path or start symm-bench "
                    "under a launcher (symmrun, torchrun, mpirun)\n",
            av[0], strerror(errno));
    exit(1);
}

/* ---- NCCL and NVSHMEM, in the same processes as symm ---------------------------------- */

static int bcast0(void *buf, size_t n) { return symm_host_broadcast(buf, n, 0) == SYMM_SUCCESS ? 0 : -1; }

static char g_nccl_status[256], g_nv_status[640];

static void init_nccl(bench_env_t *env, int skip) {
    env->nccl_ok = 0;
    env->nccl_status = g_nccl_status;
    if (skip) {
        snprintf(g_nccl_status, sizeof g_nccl_status, "NCCL: skipped (--no-nccl / SYMM_BENCH_NO_NCCL)");
        return;
    }
#if SYMM_BENCH_HAVE_NCCL
    struct {
        int ok;
        ncclUniqueId id;
    } msg;
    int version = 0;
    memset(&msg, 0, sizeof msg);
    bench_phase_begin("nccl init: unique id");
    if (env->me == 0)
        msg.ok = ncclGetUniqueId(&msg.id) == ncclSuccess;
    BENCH_SYMM(symm_host_broadcast(&msg, sizeof msg, 0));
    bench_phase_end();
    if (!msg.ok) {
        snprintf(g_nccl_status, sizeof g_nccl_status, "NCCL: ncclGetUniqueId failed on rank 0");
        return;
    }
    /* A rank whose init fails while another waits inside NCCL's bootstrap
     * would leave that one waiting: the watchdog bounds it. */
    bench_phase_begin("nccl init: ncclCommInitRank (%d ranks)", env->npes);
    ncclResult_t r = ncclCommInitRank(&env->nccl, env->npes, msg.id, env->me);
    bench_phase_begin("nccl init: agree (local result: %s)", ncclGetErrorString(r));
    int ok = bench_all_true(r == ncclSuccess);
    bench_phase_end();
    if (!ok) {
        if (r == ncclSuccess)
            (void)ncclCommAbort(env->nccl);
        snprintf(g_nccl_status, sizeof g_nccl_status, "NCCL: ncclCommInitRank failed%s%s",
                 r != ncclSuccess ? ": " : " on another rank", r != ncclSuccess ? ncclGetErrorString(r) : "");
        return;
    }
    (void)ncclGetVersion(&version);
    snprintf(g_nccl_status, sizeof g_nccl_status, "NCCL %d.%d.%d", version / 10000, (version / 100) % 100,
             version % 100);
    env->nccl_ok = 1;
#else
    snprintf(g_nccl_status, sizeof g_nccl_status, "NCCL: not installed (built without NCCL: set SYMM_NCCL_HOME)");
#endif
}

static void init_nvshmem(bench_env_t *env, int skip) {
    char why[512] = "";
    env->nvshmem_ok = 0;
    env->nvshmem_status = g_nv_status;
    if (skip) {
        snprintf(g_nv_status, sizeof g_nv_status, "skipped (--no-nvshmem / SYMM_BENCH_NO_NVSHMEM)");
        return;
    }
    bench_phase_begin("nvshmem init (NVSHMEM exits the process if it fails: rerun with --no-nvshmem)");
    int r = bench_nv_init(env->me, env->npes, bcast0, why, sizeof why);
    bench_phase_begin("nvshmem init: agree (local result %d)", r);
    int ok = bench_all_true(r == 0);
    bench_phase_end();
    env->nvshmem_ok = ok;
    if (ok)
        snprintf(g_nv_status, sizeof g_nv_status, "%s", bench_nv_version());
    else if (r != 0)
        snprintf(g_nv_status, sizeof g_nv_status, "%s", why);
    else
        snprintf(g_nv_status, sizeof g_nv_status, "init failed on another PE");
    /* A PE whose init failed has the reason; rank 0 reports it. */
    if (!ok) {
        char all_why[512];
        int i_failed = r != 0;
        int first = -1;
        int *flags = (int *)calloc((size_t)env->npes, sizeof(int));
        if (!flags)
            bench_fatal(__FILE__, __LINE__, "calloc", "out of memory");
        BENCH_SYMM(symm_host_allgather(&i_failed, flags, sizeof i_failed));
        for (int p = 0; p < env->npes && first < 0; ++p)
            if (flags[p])
                first = p;
        free(flags);
        memcpy(all_why, g_nv_status, sizeof all_why - 1);
        all_why[sizeof all_why - 1] = '\0';
        if (first >= 0)
            BENCH_SYMM(symm_host_broadcast(all_why, sizeof all_why, first));
        snprintf(g_nv_status, sizeof g_nv_status, "%s (PE %d)", all_why, first);
    }
}

/* ---- header of the results ------------------------------------------------------------- */

static char *join_args(int argc, char **argv) {
    size_t len = 1;
    for (int i = 0; i < argc; ++i)
        len += strlen(argv[i]) + 3;
    char *s = (char *)calloc(len, 1);
    if (!s)
        bench_fatal(__FILE__, __LINE__, "calloc", "out of memory");
    for (int i = 0; i < argc; ++i) {
        if (i)
            strcat(s, " ");
        int quote = strpbrk(argv[i], " \t'\"$") != NULL;
        if (quote)
            strcat(s, "'");
        strcat(s, argv[i]);
        if (quote)
            strcat(s, "'");
    }
    return s;
}

static char *make_header(bench_env_t *env, int argc, char **argv) {
    /* Only rank 0 prints it: the others skip nvidia-smi and the device queries. */
    char date[64], *machine = env->me == 0 ? bench_machine_markdown() : strdup(""), *cmd = join_args(argc, argv);
    if (!machine)
        bench_fatal(__FILE__, __LINE__, "strdup", "out of memory");
    int *devs = (int *)calloc((size_t)env->npes, sizeof(int));
    if (!devs)
        bench_fatal(__FILE__, __LINE__, "calloc", "out of memory");
    BENCH_SYMM(symm_host_allgather(&env->device, devs, sizeof(int)));
    bench_date_utc(date, sizeof date);
    size_t cap = strlen(machine) + strlen(cmd) + 2048 + (size_t)env->npes * 16;
    char *h = (char *)malloc(cap);
    if (!h)
        bench_fatal(__FILE__, __LINE__, "malloc", "out of memory");
    int n = snprintf(h, cap,
                     "- date: %s\n- command: `%s` (%d PEs, one process per GPU)\n- PE -> GPU:",
                     date, cmd, env->npes);
    for (int p = 0; p < env->npes && (size_t)n < cap; ++p)
        n += snprintf(h + n, cap - (size_t)n, " %d->%d", p, devs[p]);
    if ((size_t)n < cap)
        n += snprintf(h + n, cap - (size_t)n,
                      "\n- symm %d.%d.%d; %s; %s%s\n"
                      "- set by symm-bench: NVSHMEM_REMOTE_TRANSPORT=none NVSHMEM_DISABLE_NVLS=1 "
                      "NVSHMEM_DISABLE_NCCL=1 NCCL_NVLS_ENABLE=0 (no multicast objects)%s\n%s",
                      SYMM_VERSION_MAJOR, SYMM_VERSION_MINOR, SYMM_VERSION_PATCH, env->nccl_status,
                      env->nvshmem_ok ? "" : "NVSHMEM: ", env->nvshmem_status,
                      env->quick ? "; --quick (smoke run: fewer sizes and repeats)" : "", machine);
    free(devs);
    free(cmd);
    free(machine);
    return h;
}

/* ---- main ------------------------------------------------------------------------------ */

int main(int argc, char **argv) {
    opts_t o;
    int ngpu = 0, rc = 0;
    if (parse_opts(argc, argv, &o) != 0)
        return 2;
    if (o.list) {
        for (bench_mode_t *m = g_modes; m; m = m->next)
            printf("%-8s %s\n", m->name, m->help);
        return 0;
    }
    /* Under a launcher the rank is known before symm says so. */
    const char *rank_env = getenv("RANK");
    bench_progress_init(rank_env && under_launcher() ? atoi(rank_env) : -1, o.verbose, o.phase_timeout);
    bench_phase_begin("cudaGetDeviceCount");
    if (cudaGetDeviceCount(&ngpu) != cudaSuccess) {
        (void)cudaGetLastError();
        ngpu = 0;
    }
    bench_phase_end();
    if (o.require_no_gpu && ngpu > 0) {
        printf("SKIP: symm-bench --require-no-gpu: %d GPU(s) visible; this test is for machines without one\n", ngpu);
        return 77;
    }
    if (o.require_gpus > 0 && ngpu < o.require_gpus) {
        printf("SKIP: symm-bench needs %d GPU%s, found %d\n", o.require_gpus, o.require_gpus == 1 ? "" : "s", ngpu);
        return 77;
    }
    if (ngpu == 0) {
        printf("symm-bench: no CUDA GPU found; nothing to measure\n");
        return 0;
    }
    /* One PE per GPU; on a one-GPU machine two PEs share it, so the peer
     * measurements still run (their tables say the GPU is shared). */
    if (!under_launcher())
        relaunch(argc, argv, o.npes > 0 ? o.npes : ngpu > 1 ? ngpu : 2, o.timeout);

    /* Before any library starts: one node, no network transport, no multicast. */
    setenv("NVSHMEM_REMOTE_TRANSPORT", "none", 1);
    setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    setenv("NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME", "lo", 0);
    setenv("NCCL_SOCKET_IFNAME", "lo", 0);
    /* Room for two 256 MiB buffers plus NVSHMEM's own use (default is 1 GiB);
     * bench_nv_init raises it to what the coll mode needs. */
    setenv("NVSHMEM_SYMMETRIC_SIZE", "2G", 0);
    /* A symm wait that never sees its value stops its kernel with a message
     * (PE, address, value) instead of spinning forever. */
    setenv("SYMM_WAIT_TIMEOUT", "20", 0);

    /* One run of the modes per --backend entry (symm_init ... symm_finalize
     * each), else one with the environment's backend. */
    char backend_list[256];
    snprintf(backend_list, sizeof backend_list, "%s", o.backends ? o.backends : "");
    char *next_backend = o.backends ? backend_list : NULL;
    char *header = NULL;
    bench_report_t *report = NULL;
    int npes = 0, rank0 = 0;
    do {
        char *label = next_backend;
        if (label) {
            next_backend = strchr(label, ',');
            if (next_backend)
                *next_backend++ = '\0';
            char base[16];
            snprintf(base, sizeof base, "%.*s", (int)strcspn(label, ":"), label);
            setenv("SYMM_BACKEND", base, 1);
            setenv("SYMM_DEBUG_FORCE_REMOTE", strchr(label, ':') ? "1" : "0", 1);
        }
        bench_env_t env;
        memset(&env, 0, sizeof env);
        env.quick = o.quick;
        env.backend_label = label;
        bench_phase_begin("symm init%s%s", label ? ": backend " : "", label ? label : "");
        symm_status_t init_st = symm_init();
        if (init_st != SYMM_SUCCESS && label) {
            /* symm_init agrees its status over the PEs: each leaves this entry
             * alike, its column says why, and the next entry still runs */
            fprintf(stderr, "symm-bench: backend %s: symm_init: %s\n", label, symm_strerror(init_st));
            bench_backends_failed(label, symm_strerror(init_st));
            rc = 1;
            bench_phase_end();
            continue;
        }
        BENCH_SYMM(init_st);
        env.me = symm_my_pe();
        rank0 = env.me == 0;
        env.npes = npes = symm_n_pes();
        env.device = symm_device();
        bench_progress_set_pe(env.me);
        bench_phase_begin("cuda set-up (device %d, stream)", env.device);
        /* NVSHMEM and NCCL take the device of the calling thread's current context. */
        BENCH_CUDA(cudaSetDevice(env.device));
        BENCH_CUDA(cudaStreamCreateWithFlags(&env.stream, cudaStreamNonBlocking));
        BENCH_SYMM(symm_ctx(&env.ctx));
        bench_phase_end();
        /* PEs sharing a GPU measure the library, not NVLink; NCCL refuses two
         * ranks on one GPU, and NVSHMEM turns off its on-stream collectives and
         * device barriers for them (its limited multi-PE-per-GPU mode). */
        int gpu_pes = 1;
        BENCH_SYMM(symm_gpu_pes(&gpu_pes));
        env.shared = !bench_all_true(gpu_pes == 1);
        if (env.shared) {
            if (!o.no_nccl)
                snprintf(g_nccl_status, sizeof g_nccl_status,
                         "NCCL: n/a (it refuses two ranks on one GPU, and PEs share one here)");
            if (!o.no_nvshmem && !env_flag("SYMM_BENCH_SHARED_NVSHMEM"))
                snprintf(g_nv_status, sizeof g_nv_status,
                         "n/a (PEs share a GPU: NVSHMEM's mode for that turns off its on-stream collectives and "
                         "device barriers; SYMM_BENCH_SHARED_NVSHMEM=1 tries it anyway)");
        }
        bench_table_label(label || env.shared
                              ? bench_fmt("%s%s%s", label ? "backend " : "", label ? label : "",
                                          env.shared ? (label ? "; PEs share one GPU: not a measure of NVLink"
                                                              : "PEs share one GPU: not a measure of NVLink")
                                                     : "")
                              : NULL);
        bench_note("%d PEs, GPU %d, NVSHMEM %s, NCCL %s", env.npes, env.device,
                   o.no_nvshmem ? "off" : (SYMM_BENCH_HAVE_NVSHMEM ? "on" : "not built"),
                   o.no_nccl ? "off" : (SYMM_BENCH_HAVE_NCCL ? "on" : "not built"));
        if (!report)
            report = bench_report_new(env.me == 0);
        env.report = report;

        env.nccl_status = g_nccl_status;
        env.nvshmem_status = g_nv_status;
        if (o.backends) {
            snprintf(g_nccl_status, sizeof g_nccl_status, "NCCL: left out (--backend)");
            snprintf(g_nv_status, sizeof g_nv_status, "left out (--backend)");
        } else {
            if (!env.shared || env_flag("SYMM_BENCH_SHARED_NVSHMEM"))
                init_nvshmem(&env, o.no_nvshmem);
            BENCH_CUDA(cudaSetDevice(env.device));
            if (!env.shared)
                init_nccl(&env, o.no_nccl);
            BENCH_CUDA(cudaSetDevice(env.device));
        }

        if (!header) {
            bench_phase_begin("header (machine description)");
            header = make_header(&env, argc, argv);
            if (env.me == 0) {
                printf("symm-bench\n%s\n", header);
                if (env.npes < 2)
                    printf("note: 1 GPU: the peer benchmarks need >= 2 GPUs; running what makes sense on one.\n");
                fflush(stdout);
            }
            bench_phase_end();
        }
        if (label)
            bench_report_section(report, bench_fmt("backend %s (symm_backend_name: %s)", label,
                                                   symm_backend_name()));

        for (bench_mode_t *m = g_modes; m; m = m->next) {
            if (!mode_selected(&o, m))
                continue;
            /* Device calls of the rma mode have no path without load/store
             * peers unless the backend has one: its kernels carry the native
             * backend only; the backends mode's kernels carry them all. */
            if (label && strchr(label, ':') && !strcmp(m->name, "rma")) {
                bench_report_text(report, "mode rma skipped for %s: its kernels are built for load/store "
                                          "peers only (the backends table has these calls)", label);
                continue;
            }
            /* Modes that name their steps (rma) are watched step by step; one
             * that does not is still bounded, at 10x the phase timeout. */
            bench_phase_begin_long(10.0, "mode %s", m->name);
            bench_report_section(report, bench_fmt("%s: %s", m->name, m->help));
            int r = m->run(&env);
            bench_phase_begin("mode %s: closing barrier", m->name);
            BENCH_CUDA(cudaSetDevice(env.device));
            bench_barrier();
            bench_phase_end();
            if (r != 0) {
                rc = 1;
                bench_report_text(report, "mode %s FAILED (see the messages above)", m->name);
            }
        }

#if SYMM_BENCH_HAVE_NCCL
        if (env.nccl_ok) {
            bench_phase_begin("nccl destroy");
            (void)ncclCommDestroy(env.nccl);
        }
#endif
        if (env.nvshmem_ok) {
            bench_phase_begin("nvshmem finalize");
            bench_nv_finalize();
        }
        bench_phase_begin("symm finalize");
        BENCH_CUDA(cudaStreamDestroy(env.stream));
        BENCH_SYMM(symm_finalize());
        bench_phase_end();
    } while (next_backend);

    bench_table_label(NULL);
    if (!report) { /* no --backend entry initialised: the messages above say why */
        bench_note("exit 1");
        fflush(stdout);
        fflush(stderr);
        _exit(1);
    }
    bench_backends_emit(report, npes);
    if (rank0 && o.out) {
        if (bench_report_write(report, o.out, "symm-bench results", header) != 0)
            rc = 1;
        else
            printf("\nresults written to %s\n", o.out);
    }
    free(header);
    bench_report_free(report);
    bench_note("exit %d", rc);
    /* The results are out; no exit handler (CUDA, NCCL, NVSHMEM teardown) gets
     * a chance to hang the end of a finished run. */
    fflush(stdout);
    fflush(stderr);
    _exit(rc);
}
