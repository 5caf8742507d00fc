/*
 * init.c - symm_init / symm_init_with_uid / symm_get_unique_id /
 * symm_finalize, and the process-wide runtime state.
 *
 * Init order: environment -> bootstrap -> node discovery -> backend (device,
 * peer access) -> abort flag -> layout and collective settings agreed ->
 * common address space -> allocator -> teams
 * (their internal heap blocks map the first chunk) -> barrier. Any failure
 * unwinds everything in reverse (teardown), so a failed init leaves nothing
 * behind and a later init starts from scratch.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/runtime.h"
#include "bootstrap/agree.h"

symm__runtime_t symm__rt;

/* team.h's module hooks (the device trace's automatic start and dump). */
#define SYMM__RUNTIME_HOOKS 4
static struct {
    void (*after_init)(void);
    void (*before_finalize)(void);
} g_hooks[SYMM__RUNTIME_HOOKS];
static int g_n_hooks;

void symm__runtime_hooks_add(void (*after_init)(void), void (*before_finalize)(void)) {
    if (g_n_hooks < SYMM__RUNTIME_HOOKS) {
        g_hooks[g_n_hooks].after_init = after_init;
        g_hooks[g_n_hooks].before_finalize = before_finalize;
        g_n_hooks++;
    }
}

symm_status_t symm__agree(symm_status_t mine, symm_status_t prefer, const char *what) {
    return symm__bootstrap_agree(symm__rt.boot, mine, prefer, what);
}

symm_status_t symm__synchronize_or_report(const char *what) {
    symm__runtime_t *rt = &symm__rt;
    symm_status_t st = rt->be->ops->synchronize(rt->be);
    if (st == SYMM_ERR_CUDA) {
        char why[160];
        snprintf(why, sizeof why, "%s: %.140s", what, symm_last_error());
        symm__bootstrap_report_failure(rt->boot, why);
    }
    return st;
}

static int backend_health(void *arg, char *why, size_t size) {
    symm__backend_t *be = arg;
    return be->ops->health(be, why, size);
}

/* Node identity: PEs with the same host name and boot id share CPU memory
 * and (for the native backend) NVLink. */
static uint64_t node_hash(void) {
    char buf[512] = {0};
    if (gethostname(buf, 255) != 0)
        buf[0] = '\0';
    size_t len = strlen(buf);
    buf[len++] = '\n';
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        size_t got = fread(buf + len, 1, sizeof(buf) - len - 1, f);
        len += got;
        fclose(f);
    }
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)buf[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static symm_status_t find_node(const symm__backend_ops_t *ops) {
    symm__runtime_t *rt = &symm__rt;
    uint64_t mine = node_hash();
    uint64_t *all = calloc((size_t)rt->nranks, sizeof(uint64_t));
    rt->node_ranks = calloc((size_t)rt->nranks, sizeof(int));
    if (!all || !rt->node_ranks) {
        free(all);
        return symm__error(SYMM_ERR_NO_MEMORY, "init: out of host memory");
    }
    symm_status_t st = symm__bootstrap_allgather(rt->boot, &mine, all, sizeof(mine));
    if (st != SYMM_SUCCESS) {
        free(all);
        return st;
    }
    int n_nodes = 0;
    for (int r = 0; r < rt->nranks; r++) {
        int seen = 0;
        for (int q = 0; q < r && !seen; q++)
            seen = all[q] == all[r];
        n_nodes += !seen;
        if (all[r] == mine) {
            if (r == rt->rank)
                rt->node_me = rt->n_node;
            rt->node_ranks[rt->n_node++] = r;
        }
    }
    free(all);
    if (n_nodes > 1 && !ops->multi_node)
        return symm__error(SYMM_ERR_UNSUPPORTED,
                           "the %s backend needs every PE on one node, but the %d PEs are on %d "
                           "nodes; multi-node jobs need a scale-out backend (SYMM_BACKEND=nvshmem "
                           "or nccl, docs/multinode.md)",
                           ops->name, rt->nranks, n_nodes);
    return SYMM_SUCCESS;
}

/* The collectives' settings must match too: a PE that picks another
 * algorithm or block count than its peers waits forever in a handshake
 * nobody answers. Every PE sees every PE's values, so all fail alike, with
 * a message naming the variable and both values. */
static symm_status_t agree_coll_settings(void) {
    symm__runtime_t *rt = &symm__rt;
    const symm__env_t *env = symm__env();
    struct coll_settings {
        char algo[24];
        int64_t blocks;
        uint64_t ce_min;
        char tune[256];
    } mine, *all;
    const char *tune = env->coll_tune ? env->coll_tune : "";
    const char *a = env->coll_algo ? env->coll_algo : "";
    int known = a[0] == '\0';
    for (int i = 0; !known && i < SYMM_COLL_ALGO_COUNT; i++)
        known = strcmp(a, symm_coll_algo_name((symm_coll_algo_t)i)) == 0;
    /* a bad value here still takes part in the exchange (the others wait in it) */
    symm_status_t bad = SYMM_SUCCESS;
    if (!known)
        bad = symm__error(SYMM_ERR_ENV, "SYMM_COLL_ALGO=\"%.40s\" is not one of auto, packet, oneshot, twoshot, "
                          "multimem, push", a);
    else if (env->coll_blocks < 0 || env->coll_blocks >= SYMM_COLL_MAX_BLOCKS)
        bad = symm__error(SYMM_ERR_ENV, "SYMM_COLL_BLOCKS=%lld is not in 0..%d", env->coll_blocks,
                          SYMM_COLL_MAX_BLOCKS - 1);
    else if (strlen(tune) >= sizeof mine.tune)
        bad = symm__error(SYMM_ERR_ENV, "SYMM_COLL_TUNE is %zu characters long (at most %zu)", strlen(tune),
                          sizeof mine.tune - 1);
    memset(&mine, 0, sizeof mine);
    snprintf(mine.algo, sizeof mine.algo, "%s", a);
    mine.blocks = env->coll_blocks;
    mine.ce_min = env->coll_ce_min;
    snprintf(mine.tune, sizeof mine.tune, "%s", tune);
    all = calloc((size_t)rt->nranks, sizeof *all);
    symm_status_t st = symm__bootstrap_allgather(rt->boot, &mine, all, all ? sizeof mine : 0);
    if (st == SYMM_SUCCESS && !all)
        st = symm__error(SYMM_ERR_NO_MEMORY, "init: out of host memory");
    for (int r = 1; st == SYMM_SUCCESS && bad == SYMM_SUCCESS && r < rt->nranks; r++) {
        if (strcmp(all[r].algo, all[0].algo) != 0)
            st = symm__error(SYMM_ERR_ENV, "SYMM_COLL_ALGO differs between PEs: PE 0 has \"%s\", PE %d \"%s\"; "
                             "set it alike on every PE", all[0].algo, r, all[r].algo);
        else if (all[r].blocks != all[0].blocks)
            st = symm__error(SYMM_ERR_ENV, "SYMM_COLL_BLOCKS differs between PEs: PE 0 has %lld, PE %d %lld; set "
                             "it alike on every PE", (long long)all[0].blocks, r, (long long)all[r].blocks);
        else if (all[r].ce_min != all[0].ce_min)
            st = symm__error(SYMM_ERR_ENV, "SYMM_COLL_CE_MIN differs between PEs: PE 0 has %llu, PE %d %llu "
                             "bytes; set it alike on every PE", (unsigned long long)all[0].ce_min, r,
                             (unsigned long long)all[r].ce_min);
        else if (strcmp(all[r].tune, all[0].tune) != 0)
            st = symm__error(SYMM_ERR_ENV, "SYMM_COLL_TUNE differs between PEs: PE 0 has \"%s\", PE %d \"%s\"; "
                             "set it alike on every PE", all[0].tune, r, all[r].tune);
    }
    free(all);
    return bad != SYMM_SUCCESS ? bad : st;
}

/* Release everything, in reverse order of creation; safe on a partial init. */
static void teardown(void) {
    symm__runtime_t *rt = &symm__rt;
    symm__teams_destroy(); /* the modules' team state first: it may point into the heap */
    if (rt->heap_ready)
        symm__heap_teardown();
    if (rt->boot) {
        symm__bootstrap_set_abort_flag(rt->boot, NULL);
        symm__bootstrap_set_health(rt->boot, NULL, NULL);
    }
    if (rt->abort_host)
        rt->be->ops->flag_free(rt->be, rt->abort_host);
    if (rt->be)
        rt->be->ops->close(rt->be);
    symm__ipc_destroy(rt->ipc);
    symm__bootstrap_destroy(rt->boot);
    free(rt->node_ranks);
    memset(rt, 0, sizeof(*rt));
    symm__log_set_pe(-1);
}

static symm_status_t init_with(symm__bootstrap_t *boot, int launcher_local_rank) {
    symm__runtime_t *rt = &symm__rt;
    const symm__env_t *env = symm__env();
    symm__backend_t *be = NULL;
    symm_status_t st;
    memset(rt, 0, sizeof(*rt));
    rt->boot = boot;
    rt->rank = symm__bootstrap_rank(boot);
    rt->nranks = symm__bootstrap_nranks(boot);
    symm__log_set_pe(rt->rank);

    const symm__backend_ops_t *ops = symm__backend_find(env->backend);
    if (!ops) {
        /* the names of the list, ", native, host, ..." read past the first ", " */
#define SYMM__X(be, ...) ", " #be
        static const char names[] = SYMM__BACKEND_LIST(SYMM__X);
#undef SYMM__X
        st = symm__error(SYMM_ERR_ENV, "SYMM_BACKEND='%s' is not a backend (%s)", env->backend, names + 2);
        goto fail;
    }
    if ((st = find_node(ops)) != SYMM_SUCCESS)
        goto fail;
    if ((st = symm__ipc_create(boot, rt->node_ranks, rt->n_node, rt->node_me, &rt->ipc)) !=
        SYMM_SUCCESS)
        goto fail;

    const symm__backend_args_t args = {
        .boot = boot,
        .node_ranks = rt->node_ranks,
        .n_node = rt->n_node,
        .node_me = rt->node_me,
        .local_rank = launcher_local_rank >= 0 ? launcher_local_rank : rt->node_me,
        .heap_reserve = env->heap_reserve,
        .deny_peer = env->debug_deny_peer ? env->debug_deny_peer : "",
    };
    st = symm__backend_open(ops, &args, &be);
    if (st == SYMM_SUCCESS)
        rt->be = be;
    if ((st = symm__agree(st, SYMM_SUCCESS, "backend initialisation")) != SYMM_SUCCESS)
        goto fail;
    /* a device that fails from now on is reported to the others */
    if (rt->be->ops->health)
        symm__bootstrap_set_health(boot, backend_health, rt->be);

    st = rt->be->ops->flag_alloc(rt->be, &rt->abort_host, &rt->abort_dev);
    if ((st = symm__agree(st, SYMM_SUCCESS, "abort flag allocation")) != SYMM_SUCCESS)
        goto fail;
    symm__bootstrap_set_abort_flag(boot, rt->abort_host);
    /* once a PE is out, a process still in symm after the grace is ended */
    symm__bootstrap_set_abort_grace(boot, env->abort_grace);

    st = agree_coll_settings();
    if ((st = symm__agree(st, SYMM_ERR_ENV, "collective settings")) != SYMM_SUCCESS)
        goto fail;
    const symm__heap_job_t job = {
        .boot = boot,
        .ipc = rt->ipc,
        .be = rt->be,
        .n_node = rt->n_node,
        .node_me = rt->node_me,
        .limit = env->heap_limit,
        .chunk = env->heap_chunk,
    };
    if ((st = symm__heap_setup(&job)) != SYMM_SUCCESS)
        goto fail;
    rt->heap_ready = 1;
    symm__heap_set_on_grow(symm__teams_update_heap_size, NULL);
    if ((st = symm__teams_create()) != SYMM_SUCCESS)
        goto fail;
    if ((st = symm__bootstrap_barrier(boot)) != SYMM_SUCCESS)
        goto fail;
    rt->initialized = 1;
    symm__backend_modules_init();
    for (int i = 0; i < g_n_hooks; i++)
        if (g_hooks[i].after_init)
            g_hooks[i].after_init();
    SYMM_LOG_INFO("initialised: PE %d of %d, backend %s, device %d, heap at %#lx", rt->rank,
                  rt->nranks, ops->name, rt->be->device, (unsigned long)symm__heap_base());
    return SYMM_SUCCESS;
fail:
    if (!rt->be && be)
        rt->be = be;
    teardown();
    return st;
}

static symm_status_t load_env(void) {
    symm__env_t env;
    symm_status_t st = symm__env_load(&env);
    if (st != SYMM_SUCCESS)
        return st;
    symm__env_set(&env);
    return SYMM_SUCCESS;
}

symm_status_t symm_init(void) {
    symm__error_clear();
    if (symm__rt.initialized)
        return symm__error(SYMM_ERR_ALREADY_INITIALIZED, "symm_init: already initialized");
    symm_status_t st = load_env();
    if (st != SYMM_SUCCESS)
        return st;
    symm__launch_info_t info;
    if ((st = symm__launch_info_from_env(&info)) != SYMM_SUCCESS)
        return st;
    symm__bootstrap_t *boot = NULL;
    if ((st = symm__bootstrap_init_env(&info, &boot)) != SYMM_SUCCESS)
        return st;
    return init_with(boot, info.local_rank);
}

symm_status_t symm_get_unique_id(symm_unique_id_t *uid) {
    symm__error_clear();
    if (symm__rt.initialized)
        return symm__error(SYMM_ERR_ALREADY_INITIALIZED, "symm_get_unique_id: already initialized");
    if (!uid)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_get_unique_id: uid is NULL");
    symm_status_t st = load_env();
    if (st != SYMM_SUCCESS)
        return st;
    return symm__bootstrap_make_uid(uid);
}

symm_status_t symm_init_with_uid(const symm_unique_id_t *uid, int rank, int nranks) {
    symm__error_clear();
    if (symm__rt.initialized)
        return symm__error(SYMM_ERR_ALREADY_INITIALIZED, "symm_init_with_uid: already initialized");
    if (!uid || nranks < 1 || rank < 0 || rank >= nranks)
        return symm__error(SYMM_ERR_INVALID_ARG,
                           "symm_init_with_uid: rank %d of %d (uid %s) is not valid", rank, nranks,
                           uid ? "set" : "NULL");
    symm_status_t st = load_env();
    if (st != SYMM_SUCCESS)
        return st;
    symm__bootstrap_t *boot = NULL;
    if ((st = symm__bootstrap_init_uid(uid, rank, nranks, &boot)) != SYMM_SUCCESS)
        return st;
    return init_with(boot, -1);
}

symm_status_t symm_finalize(void) {
    SYMM__REQUIRE_INIT("symm_finalize");
    symm__runtime_t *rt = &symm__rt;
    for (int i = g_n_hooks - 1; i >= 0; i--)
        if (g_hooks[i].before_finalize)
            g_hooks[i].before_finalize();
    /* Nobody unmaps while a peer's kernels may still read this PE's heap:
     * drain this device, then meet every PE. A dead peer turns the barrier
     * into an error; local resources are released either way. */
    symm_status_t st = symm__synchronize_or_report("symm_finalize");
    symm_status_t st_bar = symm__bootstrap_barrier(rt->boot);
    rt->initialized = 0;
    teardown();
    return st != SYMM_SUCCESS ? st : st_bar;
}

int symm_initialized(void) { return symm__rt.initialized; }
int symm_my_pe(void) { return symm__rt.initialized ? symm__rt.rank : -1; }
int symm_n_pes(void) { return symm__rt.initialized ? symm__rt.nranks : -1; }
int symm_device(void) { return symm__rt.initialized ? symm__rt.be->device : -1; }

symm_status_t symm_gpu_pes(int *npes) {
    SYMM__REQUIRE_INIT("symm_gpu_pes");
    if (!npes)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_gpu_pes: npes is NULL");
    *npes = symm__rt.be->gpu_pes;
    return SYMM_SUCCESS;
}

symm_status_t symm_sm_share(int *sms) {
    SYMM__REQUIRE_INIT("symm_sm_share");
    if (!sms)
        return symm__error(SYMM_ERR_INVALID_ARG, "symm_sm_share: sms is NULL");
    if (symm__rt.be->sm_share < 1)
        return symm__error(SYMM_ERR_UNSUPPORTED, "symm_sm_share: the %s backend has no GPU",
                           symm__rt.be->ops->name);
    *sms = symm__rt.be->sm_share;
    return SYMM_SUCCESS;
}
