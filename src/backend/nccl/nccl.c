/*
 * nccl.c - the nccl backend (SYMM_BACKEND=nccl, docs/backends.md).
 *
 * A communicator over the world from symm's bootstrap (PE 0's ncclUniqueId,
 * broadcast by symm), non-blocking so that no call waits inside NCCL for a PE
 * that is gone: every call is polled to completion against
 * SYMM_BOOTSTRAP_TIMEOUT and symm's liveness. The heap is one ncclMemAlloc
 * block registered as a symmetric window; symm addresses it through NCCL's
 * flat mapping of the LSA team, so its native code reaches every LSA peer at
 * base + (pe - me) * stride. The device communicator (two barriers, GIN when
 * ranks are on several nodes) travels in each team's state. Collectives over
 * ranks outside the LSA team are NCCL's.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/nccl/nccl_devcomm.h"
#include "backend/nccl/nccl_lib.h"
#include "backend/scaleout.h"
#include "bootstrap/agree.h"
#include "core/env.h"
#include "core/log.h"
#include "symm/device/backend/state.h"

#if !defined(SYMM_HAVE_NCCL_DEVICE)
/* This libsymm was built without NCCL's device headers (cmake/backend/nccl.cmake). */
size_t symm__nccl_state_bytes(void) { return SYMM__NCCL_DEVCOMM_OFFSET; }

symm_status_t symm__nccl_devcomm_create(const symm__nccl_lib_t *lib, symm__nccl_comm_t comm, int force_gin,
                                        symm__nccl_wait_t wait, void *wait_arg, symm__nccl_devcomm_t **out) {
    (void)lib, (void)comm, (void)force_gin, (void)wait, (void)wait_arg, (void)out;
    return symm__error(SYMM_ERR_UNSUPPORTED, "this libsymm was built without NCCL's device headers "
                       "(nccl_device.h): rebuild with NCCL 2.28+ found (SYMM_NCCL_HOME, or pip install "
                       "nvidia-nccl-cu13)");
}

symm_status_t symm__nccl_window_layout(symm__nccl_window_t win, uintptr_t *self, size_t *stride) {
    (void)win, (void)self, (void)stride;
    return symm__error(SYMM_ERR_INTERNAL, "nccl backend: no window layout without NCCL's headers");
}

void symm__nccl_devcomm_destroy(const symm__nccl_lib_t *lib, symm__nccl_comm_t comm, symm__nccl_devcomm_t *h) {
    (void)lib, (void)comm, (void)h;
}
#endif

typedef struct symm__nccl_backend {
    symm__scaleout_t so;
    symm__nccl_lib_t lib;
    symm__nccl_comm_t comm;
    symm__nccl_devcomm_t *dc;
    void *mem;              /* ncclMemAlloc block */
    symm__nccl_window_t win;
    uintptr_t heap_base;    /* this PE's copy in NCCL's flat mapping */
    size_t heap_size;
    int wfirst, wcount;     /* the load/store window (the LSA team), in world PEs */
    int lsa_rank, lsa_size; /* this rank's LSA team (ncclTeamLsa) */
    int32_t *one;           /* device int for the stream barrier's all-reduce */
} symm__nccl_backend_t;

static symm__nccl_backend_t *ncb(symm__backend_t *be) { return (symm__nccl_backend_t *)be; }

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* How polling a call of the non-blocking communicator ended. */
enum { POLL_DONE, POLL_PEER_DIED, POLL_TIMEOUT };

/* Poll a call of the non-blocking communicator until NCCL is done with it
 * (or cannot say), a peer died (*dead) or SYMM_BOOTSTRAP_TIMEOUT passed;
 * the call's last result in *r. A call that returned ncclSuccess is polled
 * too: ncclCommWindowRegister and ncclDevCommCreate queue their work on
 * NCCL's group thread and return ncclSuccess while it runs, and only
 * ncclCommGetAsyncError says when it is done (and how it ended). Sets no
 * error. */
static int poll_call(symm__nccl_backend_t *b, symm__nccl_result_t *r, int *dead) {
    const double deadline = now_s() + symm__env()->bootstrap_timeout;
    while (*r == SYMM__NCCL_SUCCESS || *r == SYMM__NCCL_IN_PROGRESS) {
        symm__nccl_result_t async = SYMM__NCCL_SUCCESS;
        if (b->lib.comm_get_async_error(b->comm, &async) != SYMM__NCCL_SUCCESS)
            break;
        *r = async;
        if (*r != SYMM__NCCL_IN_PROGRESS)
            break;
        if ((*dead = symm__bootstrap_dead_pe(b->so.boot)) >= 0)
            return POLL_PEER_DIED;
        if (now_s() > deadline)
            return POLL_TIMEOUT;
        struct timespec nap = {0, 100000};
        nanosleep(&nap, NULL);
    }
    return POLL_DONE;
}

/* Whether NCCL's group thread still runs a call of the communicator: what
 * that call was given (the heap block, the device communicator's host copy)
 * must outlive it. */
static int comm_busy(const symm__nccl_backend_t *b) {
    symm__nccl_result_t async = SYMM__NCCL_SUCCESS;
    return b->comm && b->lib.comm_get_async_error(b->comm, &async) == SYMM__NCCL_SUCCESS &&
           async == SYMM__NCCL_IN_PROGRESS;
}

/* Finish a call of the non-blocking communicator: poll_call, and an error
 * naming `what` unless NCCL finished it with success. */
static symm_status_t finish(symm__nccl_backend_t *b, symm__nccl_result_t r, const char *what) {
    int dead = -1;
    switch (poll_call(b, &r, &dead)) {
    case POLL_PEER_DIED: return symm__error(SYMM_ERR_PEER_DIED, "%s: PE %d died", what, dead);
    case POLL_TIMEOUT:
        return symm__error(SYMM_ERR_TIMEOUT, "%s: NCCL did not finish within SYMM_BOOTSTRAP_TIMEOUT (%.0f s)", what,
                           symm__env()->bootstrap_timeout);
    default: break;
    }
    if (r != SYMM__NCCL_SUCCESS)
        return symm__error(SYMM_ERR_UNSUPPORTED, "%s: %s", what, symm__nccl_errstr(&b->lib, b->comm, r));
    return SYMM_SUCCESS;
}

/* finish() for nccl_devcomm.cu, which issues ncclDevCommCreate. */
static symm_status_t finish_cb(void *arg, symm__nccl_result_t r, const char *what) {
    return finish(arg, r, what);
}

static int make_uid(void *id, void *arg) {
    symm__nccl_lib_t *lib = arg;
    return lib->get_unique_id((symm__nccl_uid_t *)id) == SYMM__NCCL_SUCCESS ? 0 : 1;
}

static size_t heap_bytes_of(const symm__backend_t *be) {
    size_t want = symm__env()->heap_limit ? symm__env()->heap_limit : (size_t)1 << 30;
    size_t g = be->granularity > SYMM__NCCL_WIN_ALIGNMENT ? be->granularity : SYMM__NCCL_WIN_ALIGNMENT;
    return (want + g - 1) / g * g;
}

/* abort: end it by ncclCommAbort even when it is healthy. */
static void drop_comm(symm__nccl_backend_t *b, int abort) {
    if (!b->comm)
        return;
    /* Finalize is collective; with a PE gone, or a communicator that is in
     * error (a failed init), only abort ends it. A failed finalize is logged:
     * the error a failed init reports stays the one that made it fail. */
    symm__nccl_result_t async = SYMM__NCCL_SUCCESS;
    int finalize = !abort && symm__bootstrap_dead_pe(b->so.boot) < 0 &&
                   b->lib.comm_get_async_error(b->comm, &async) == SYMM__NCCL_SUCCESS && async == SYMM__NCCL_SUCCESS;
    if (finalize) {
        symm__nccl_result_t r = b->lib.comm_finalize(b->comm);
        int dead = -1;
        (void)poll_call(b, &r, &dead); /* a peer gone or the deadline: r is still in progress */
        if (r != SYMM__NCCL_SUCCESS) {
            SYMM_LOG_WARN("ncclCommFinalize: %s; aborting the communicator", symm__nccl_errstr(&b->lib, b->comm, r));
            finalize = 0;
        }
    } else if (async != SYMM__NCCL_SUCCESS) {
        SYMM_LOG_INFO("NCCL communicator in error (%s): aborting it", symm__nccl_errstr(&b->lib, b->comm, async));
    }
    if (finalize)
        (void)b->lib.comm_destroy(b->comm);
    else
        (void)b->lib.comm_abort(b->comm);
    b->comm = NULL;
}

static symm_status_t nccl_load(void) {
    symm__nccl_lib_t lib;
    return symm__nccl_lib_open(symm__env()->nccl_lib, &lib);
}

/* The communicator over the world, from PE 0's unique id: non-blocking, so
 * that no call waits inside NCCL for a PE that is gone. Collective. */
static symm_status_t open_comm(symm__nccl_backend_t *b) {
    symm__nccl_uid_t uid;
    symm_status_t st = symm__scaleout_share_id(&b->so, &uid, sizeof uid, make_uid, &b->lib, "ncclGetUniqueId");
    if (st != SYMM_SUCCESS)
        return st;
    symm__nccl_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.size = sizeof cfg;
    cfg.magic = SYMM__NCCL_CONFIG_MAGIC;
    cfg.version = SYMM__NCCL_MIN_VERSION;
    cfg.blocking = 0;
    cfg.cgaClusterSize = cfg.minCTAs = cfg.maxCTAs = cfg.splitShare = cfg.trafficClass = SYMM__NCCL_UNDEF_INT;
    cfg.collnetEnable = cfg.CTAPolicy = cfg.shrinkShare = cfg.nvlsCTAs = SYMM__NCCL_UNDEF_INT;
    cfg.nChannelsPerNetPeer = cfg.nvlinkCentricSched = SYMM__NCCL_UNDEF_INT;
    cfg.commName = "symm";
    symm__nccl_result_t r = b->lib.comm_init_rank_config(&b->comm, b->so.nranks, uid, b->so.rank, &cfg);
    st = b->comm ? finish(b, r, "ncclCommInitRankConfig")
                 : symm__error(SYMM_ERR_UNSUPPORTED, "ncclCommInitRankConfig: %s",
                               symm__nccl_errstr(&b->lib, NULL, r));
    return symm__bootstrap_agree(b->so.boot, st, SYMM_SUCCESS, "NCCL communicator");
}

static symm_status_t nccl_open(const symm__backend_args_t *args, symm__backend_t **out) {
    symm__nccl_backend_t *b = calloc(1, sizeof(*b));
    if (!b)
        return symm__error(SYMM_ERR_NO_MEMORY, "nccl backend: out of host memory");
    symm__scaleout_init(&b->so, &symm__backend_nccl_ops, args);
    symm_status_t st = symm__nccl_lib_open(symm__env()->nccl_lib, &b->lib);
    if ((st = symm__bootstrap_agree(b->so.boot, st, SYMM_SUCCESS, "opening NCCL")) != SYMM_SUCCESS)
        goto fail;
    if (!symm_multicast_allowed())
        symm__scaleout_setenv("NCCL_NVLS_ENABLE", "0", 1);
    if ((st = open_comm(b)) != SYMM_SUCCESS)
        goto fail;
    if ((st = b->so.native->ops->dev_alloc(b->so.native, sizeof(int32_t), (void **)&b->one)) != SYMM_SUCCESS)
        goto fail;
    SYMM_LOG_INFO("nccl backend: %s (version %d), communicator of %d ranks", b->lib.path, b->lib.version,
                  b->so.nranks);
    /* SYMM_CAP_REMOTE_PUT joins when the device communicator has GIN. */
    b->so.base.caps = SYMM_CAP_PEER_LDST | SYMM_CAP_COLL | SYMM_CAP_MULTI_NODE;
    *out = &b->so.base;
    return SYMM_SUCCESS;
fail:
    if (b->one)
        b->so.native->ops->dev_free(b->so.native, b->one);
    drop_comm(b, 0);
    symm__scaleout_close(&b->so);
    free(b);
    return st;
}

static void nccl_close(symm__backend_t *be) {
    symm__nccl_backend_t *b = ncb(be);
    if (b->one)
        b->so.native->ops->dev_free(b->so.native, b->one);
    drop_comm(b, 0);
    symm__scaleout_close(&b->so);
    free(b);
}

/* The heap block as a symmetric window of the communicator. Collective. */
static symm_status_t register_heap(symm__nccl_backend_t *b, size_t size) {
    symm_status_t st = finish(b, b->lib.window_register(b->comm, b->mem, size, &b->win,
                                                        SYMM__NCCL_WIN_COLL_SYMMETRIC),
                              "ncclCommWindowRegister (symmetric)");
    if (st == SYMM_SUCCESS && !b->win)
        st = symm__error(SYMM_ERR_UNSUPPORTED, "ncclCommWindowRegister gave no window: this communicator has no "
                         "symmetric memory support (NCCL_CUMEM_ENABLE=0, or registration disabled)");
    return symm__bootstrap_agree(b->so.boot, st, SYMM_SUCCESS, "NCCL heap window");
}

/* This rank's LSA team (the ranks NCCL maps for load/store). Local. */
static symm_status_t read_lsa_team(symm__nccl_backend_t *b) {
    symm__nccl_team_t lsa = b->lib.team_lsa(b->comm);
    b->lsa_rank = lsa.rank;
    b->lsa_size = lsa.nRanks;
    if (b->lsa_size < 1 || b->lsa_size > b->so.nranks)
        return symm__error(SYMM_ERR_INTERNAL, "ncclTeamLsa: a team of %d ranks", b->lsa_size);
    return SYMM_SUCCESS;
}

static symm_status_t nccl_heap_open(symm__backend_t *be, size_t size, symm__heap_place_t *out) {
    symm__nccl_backend_t *b = ncb(be);
    if (size == 0)
        size = heap_bytes_of(be);
    symm__nccl_result_t r = b->lib.mem_alloc(&b->mem, size);
    symm_status_t st = r == SYMM__NCCL_SUCCESS && b->mem
                           ? SYMM_SUCCESS
                           : symm__error(SYMM_ERR_HEAP_EXHAUSTED, "ncclMemAlloc(%zu bytes): %s", size,
                                         symm__nccl_errstr(&b->lib, b->comm, r));
    if ((st = symm__bootstrap_agree(b->so.boot, st, SYMM_ERR_HEAP_EXHAUSTED, "NCCL heap")) != SYMM_SUCCESS)
        goto fail;
    if ((st = register_heap(b, size)) != SYMM_SUCCESS)
        goto fail;
    if ((st = read_lsa_team(b)) != SYMM_SUCCESS)
        goto fail;
    st = symm__nccl_devcomm_create(&b->lib, b->comm, symm__env()->debug_nccl_gin, finish_cb, b, &b->dc);
    if (b->lsa_size < b->so.nranks && !symm__env()->debug_nccl_gin && st != SYMM_ERR_TIMEOUT &&
        st != SYMM_ERR_PEER_DIED) {
        int all_ok = 0;
        symm_status_t st2 = symm__bootstrap_all_true(b->so.boot, st == SYMM_SUCCESS, &all_ok);
        if (st2 != SYMM_SUCCESS) {
            st = st2;
            goto fail;
        }
        if (!all_ok) {
            /* Ranks on several nodes and no GIN. A device communicator that
             * NCCL failed to create leaves the communicator in error, so it
             * is rebuilt without one: kernels still reach their LSA team by
             * load/store and the collectives run through NCCL; a device call
             * to another node stops with the no-GIN message. */
            SYMM_LOG_WARN("nccl backend: no device communicator across nodes (%s); kernels reach only their "
                          "LSA team (%d ranks), the stream collectives work", st != SYMM_SUCCESS ?
                          symm_last_error() : "it failed on another PE", b->lsa_size);
            symm__error_clear();
            if (b->dc) { /* the abort below releases what NCCL holds for it */
                free(b->dc->devcomm);
                free(b->dc);
                b->dc = NULL;
            }
            b->win = NULL; /* likewise */
            drop_comm(b, 1);
            if ((st = open_comm(b)) != SYMM_SUCCESS || (st = register_heap(b, size)) != SYMM_SUCCESS ||
                (st = read_lsa_team(b)) != SYMM_SUCCESS)
                goto fail;
        }
    }
    if ((st = symm__bootstrap_agree(b->so.boot, st, SYMM_SUCCESS, "NCCL device communicator")) != SYMM_SUCCESS)
        goto fail;
    size_t stride = 0;
    if ((st = symm__nccl_window_layout(b->win, &b->heap_base, &stride)) != SYMM_SUCCESS)
        goto fail;
    b->heap_size = size;
    b->wfirst = b->so.force_remote ? b->so.rank : b->so.rank - b->lsa_rank;
    b->wcount = b->so.force_remote ? 0 : b->lsa_size;
    out->base = b->heap_base;
    out->size = size;
    out->stride = b->lsa_size > 1 ? stride : 0;
    out->ldst_first = b->wfirst;
    out->ldst_count = b->wcount;
    if (b->dc && b->dc->gin_contexts > 0)
        b->so.base.caps |= SYMM_CAP_REMOTE_PUT;
    SYMM_LOG_INFO("nccl backend: heap of %zu bytes, window at %#lx in NCCL's flat mapping; LSA team world "
                  "PEs %d..%d (stride %zu); %s%s", size, (unsigned long)b->heap_base, b->so.rank - b->lsa_rank,
                  b->so.rank - b->lsa_rank + b->lsa_size - 1, stride,
                  !b->dc ? "no device communicator" : b->dc->gin_contexts ? "GIN" : "no GIN (one LSA team)",
                  b->so.force_remote ? "; SYMM_DEBUG_FORCE_REMOTE" : "");
    return SYMM_SUCCESS;
fail:
    if (comm_busy(b)) {
        /* NCCL's group thread may still use the block and the device
         * communicator's host copy: freeing them under it is worse than
         * leaving them. */
        SYMM_LOG_WARN("nccl backend: NCCL still works on the heap's window; its block (%zu bytes) is not freed",
                      size);
        b->dc = NULL;
        b->win = NULL;
        b->mem = NULL;
        return st;
    }
    if (b->dc)
        symm__nccl_devcomm_destroy(&b->lib, b->comm, b->dc);
    b->dc = NULL;
    if (b->win && b->comm) { /* polled without an error of its own: the caller's names the cause */
        symm__nccl_result_t r = b->lib.window_deregister(b->comm, b->win);
        int dead = -1;
        (void)poll_call(b, &r, &dead);
    }
    b->win = NULL;
    if (b->mem)
        (void)b->lib.mem_free(b->mem);
    b->mem = NULL;
    return st;
}

static void nccl_heap_close(symm__backend_t *be) {
    symm__nccl_backend_t *b = ncb(be);
    int alive = symm__bootstrap_dead_pe(b->so.boot) < 0;
    /* The devcomm and the window go collectively, or not at all when a PE is
     * gone (the communicator's abort then releases them). */
    if (alive && b->dc) {
        symm__nccl_devcomm_destroy(&b->lib, b->comm, b->dc);
    } else if (b->dc) {
        free(b->dc->devcomm);
        free(b->dc);
    }
    b->dc = NULL;
    if (alive && b->win)
        (void)finish(b, b->lib.window_deregister(b->comm, b->win), "ncclCommWindowDeregister");
    b->win = NULL;
    if (alive && b->mem)
        (void)b->lib.mem_free(b->mem);
    b->mem = NULL;
}

static void *nccl_peer_ptr(symm__backend_t *be, const void *p, int world_pe) {
    (void)be;
    (void)p;
    (void)world_pe;
    return NULL; /* every load/store peer is in the window */
}

static symm_status_t nccl_team_open(symm__backend_t *be, const symm__team_desc_t *team,
                                    symm__team_backend_t *out) {
    symm__nccl_backend_t *b = ncb(be);
    const size_t bytes = symm__nccl_state_bytes();
    const size_t map_bytes = team->is_world ? 0 : (size_t)team->n_pes * sizeof(int32_t);
    char *host = calloc(1, bytes + map_bytes);
    if (!host)
        return symm__error(SYMM_ERR_NO_MEMORY, "nccl backend: out of host memory");
    void *d = NULL;
    symm_status_t st = be->ops->dev_alloc(be, bytes + map_bytes, &d);
    if (st != SYMM_SUCCESS) {
        free(host);
        return st;
    }
    symm__nccl_state_t *hs = (symm__nccl_state_t *)host;
    hs->magic = SYMM__NCCL_STATE_MAGIC;
    hs->flags = (team->is_world ? SYMM__BE_IDENTITY : 0) | (b->so.force_remote ? SYMM__BE_NO_PTR : 0);
    hs->n_pes = team->n_pes;
    hs->gin = b->dc && b->dc->gin_contexts > 0;
    hs->window = (uint64_t)(uintptr_t)b->win;
    hs->heap_base = b->heap_base;
    hs->heap_size = b->heap_size;
    if (b->dc)
        memcpy(host + SYMM__NCCL_DEVCOMM_OFFSET, b->dc->devcomm, b->dc->bytes);
    else
        hs->flags |= SYMM__BE_NO_DEVCOMM;
    if (map_bytes) {
        int32_t *map = (int32_t *)(host + bytes);
        for (int i = 0; i < team->n_pes; i++)
            map[i] = team->world_pe[i];
        hs->pe_map = (uint64_t)(uintptr_t)d + bytes;
    }
    st = be->ops->dev_write(be, d, host, bytes + map_bytes);
    free(host);
    if (st != SYMM_SUCCESS) {
        be->ops->dev_free(be, d);
        return st;
    }
    symm__scaleout_team_place(team, (uint64_t)(uintptr_t)d, b->wfirst, b->wcount, out);
    return SYMM_SUCCESS;
}

/* Only the world team is NCCL's communicator; the node team is served when
 * it is all in the load/store window. */
static symm_status_t world_only(const symm__nccl_backend_t *b, const symm_ctx_t *h, const char *what) {
    if (h->n_pes == b->so.nranks)
        return SYMM_SUCCESS;
    return symm__error(SYMM_ERR_UNSUPPORTED, "%s on the nccl backend: the team's PEs are not all in one LSA "
                       "team, and NCCL's communicator is the world", what);
}

static symm_status_t nccl_barrier_on_stream(symm__backend_t *be, const symm_ctx_t *d_ctx,
                                            const symm_ctx_t *h_ctx, symm_stream_t stream) {
    symm__nccl_backend_t *b = ncb(be);
    if (symm__scaleout_ldst_all(h_ctx))
        return b->so.native->ops->barrier_on_stream(b->so.native, d_ctx, h_ctx, stream);
    symm_status_t st = world_only(b, h_ctx, "symm_barrier_all_on_stream");
    if (st != SYMM_SUCCESS)
        return st;
    /* A one-word all-reduce: on the stream, after the work before it on
     * every rank, and before the work after it. */
    return finish(b, b->lib.all_reduce(b->one, b->one, 1, SYMM__NCCL_INT32, SYMM__NCCL_SUM, b->comm,
                                       stream), "the stream barrier's ncclAllReduce");
}

static int nccl_dtype(int dtype) {
    switch (dtype) {
    case SYMM_DTYPE_F32: return SYMM__NCCL_FLOAT32;
    case SYMM_DTYPE_F16: return SYMM__NCCL_FLOAT16;
    case SYMM_DTYPE_BF16: return SYMM__NCCL_BFLOAT16;
    case SYMM_DTYPE_F64: return SYMM__NCCL_FLOAT64;
    case SYMM_DTYPE_I32: return SYMM__NCCL_INT32;
    case SYMM_DTYPE_U32: return SYMM__NCCL_UINT32;
    case SYMM_DTYPE_I64: return SYMM__NCCL_INT64;
    case SYMM_DTYPE_U64: return SYMM__NCCL_UINT64;
    case SYMM_DTYPE_U8: return SYMM__NCCL_UINT8;
    default: return -1;
    }
}

static int nccl_op(int op) {
    switch (op) {
    case SYMM_OP_SUM: return SYMM__NCCL_SUM;
    case SYMM_OP_MIN: return SYMM__NCCL_MIN;
    case SYMM_OP_MAX: return SYMM__NCCL_MAX;
    default: return -1; /* NCCL has no bitwise reductions */
    }
}

static symm_status_t nccl_coll(symm__backend_t *be, const symm__be_coll_t *c, symm_stream_t stream) {
    symm__nccl_backend_t *b = ncb(be);
    symm_status_t st = world_only(b, c->h_ctx, c->what);
    if (st != SYMM_SUCCESS)
        return st;
    const int t = nccl_dtype(c->dtype);
    const int reduce = c->kind == SYMM__BE_COLL_ALL_REDUCE || c->kind == SYMM__BE_COLL_REDUCE_SCATTER;
    const int o = reduce ? nccl_op(c->op) : 0;
    if (t < 0 || o < 0 || (reduce && (t == SYMM__NCCL_UINT8 || !c->acc_default)))
        return symm__error(SYMM_ERR_UNSUPPORTED, "%s on the nccl backend: NCCL has no %s of this type%s",
                           c->what, reduce ? "such reduction" : "collective",
                           reduce && !c->acc_default ? " with this accumulator" : "");
    symm__nccl_result_t r;
    switch (c->kind) {
    case SYMM__BE_COLL_ALL_REDUCE: r = b->lib.all_reduce(c->send, c->recv, c->count, t, o, b->comm, stream); break;
    case SYMM__BE_COLL_REDUCE_SCATTER:
        r = b->lib.reduce_scatter(c->send, c->recv, c->count, t, o, b->comm, stream);
        break;
    case SYMM__BE_COLL_ALL_GATHER: r = b->lib.all_gather(c->send, c->recv, c->count, t, b->comm, stream); break;
    case SYMM__BE_COLL_ALL_TO_ALL: r = b->lib.all_to_all(c->send, c->recv, c->count, t, b->comm, stream); break;
    case SYMM__BE_COLL_BROADCAST:
        r = b->lib.broadcast(c->send, c->recv, c->count, t, c->root, b->comm, stream);
        break;
    default: return symm__error(SYMM_ERR_INTERNAL, "nccl backend: collective kind %d", c->kind);
    }
    return finish(b, r, c->what);
}

const symm__backend_ops_t symm__backend_nccl_ops = {
    .name = "nccl",
    .kind = SYMM_BACKEND_NCCL,
    .on_native = 1,
    .multi_node = 1,
    /* no MoE: its kernels need every team PE at the heap's stride */
    .kernel_caps = SYMM__BE_KCAP_COLL | SYMM__BE_KCAP_TRACE,
    .load = nccl_load,
    .open = nccl_open,
    .close = nccl_close,
    .heap_open = nccl_heap_open,
    .heap_close = nccl_heap_close,
    .peer_ptr = nccl_peer_ptr,
    .team_open = nccl_team_open,
    .team_close = symm__scaleout_team_close,
    .dev_alloc = symm__scaleout_dev_alloc,
    .dev_write = symm__scaleout_dev_write,
    .dev_free = symm__scaleout_dev_free,
    .flag_alloc = symm__scaleout_flag_alloc,
    .flag_free = symm__scaleout_flag_free,
    .memset_sync = symm__scaleout_memset_sync,
    .memcpy_sync = symm__scaleout_memcpy_sync,
    .synchronize = symm__scaleout_synchronize,
    .function_module = symm__scaleout_function_module,
    .module_has_global = symm__scaleout_module_has_global,
    .barrier_on_stream = nccl_barrier_on_stream,
    .coll = nccl_coll,
};
