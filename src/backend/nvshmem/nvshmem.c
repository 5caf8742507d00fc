/*
 * nvshmem.c - the nvshmem backend (SYMM_BACKEND=nvshmem, docs/backends.md).
 *
 * NVSHMEM is started from symm's bootstrap with its unique-id path: PE 0 makes
 * the id, symm broadcasts it, every PE calls nvshmemx_hostlib_init_attr as
 * rank `rank` of `nranks` (the host library alone: symm's own kernels do not
 * use NVSHMEM's device library; a module that does is set up by
 * module_init). The heap is one nvshmem_align block of the heap limit,
 * mapped by NVSHMEM on every PE at init. Peers NVSHMEM maps into this GPU at
 * a constant distance form the load/store window, where symm's native code
 * runs; the others are NVSHMEM's (device calls in backend/nvshmem.h, on-stream
 * collectives and barriers here).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/nvshmem/nvshmem_lib.h"
#include "backend/scaleout.h"
#include "bootstrap/agree.h"
#include "core/env.h"
#include "core/log.h"
#include "symm/device/backend/state.h"

typedef struct symm__nvshmem_backend {
    symm__scaleout_t so;
    symm__nvshmem_lib_t lib;
    int up;              /* hostlib initialised (finalize owed) */
    void *heap;          /* nvshmem_align block */
    size_t heap_size;
    int wfirst, wcount;  /* the world load/store window */
    int limited_mpg;     /* PEs share a GPU without MPS: NVSHMEM has no on-stream collectives
                            then (it exits the process when one is called) */
} symm__nvshmem_backend_t;

static symm__nvshmem_backend_t *nvs(symm__backend_t *be) { return (symm__nvshmem_backend_t *)be; }

static int make_uid(void *id, void *arg) {
    symm__nvshmem_lib_t *lib = arg;
    symm__nvshmem_uid_t *uid = id;
    memset(uid, 0, sizeof *uid);
    uid->version = SYMM__NVSHMEM_VERSION_OF(symm__nvshmem_uid_t);
    return lib->get_uniqueid(uid);
}

/* NVSHMEM's options, set before it reads them: no multicast unless symm's
 * gate allows it (decision 7), and a symmetric reservation that holds symm's
 * heap with room for NVSHMEM's own buffers, unless the user chose one. */
static void set_library_env(size_t heap_bytes) {
    if (!symm_multicast_allowed())
        symm__scaleout_setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
    char size[32];
    snprintf(size, sizeof size, "%zuM", (heap_bytes >> 20) + 1024);
    symm__scaleout_setenv("NVSHMEM_SYMMETRIC_SIZE", size, 0);
}

/* The heap symm maps on this backend: SYMM_HEAP_LIMIT, else 1 GiB. */
static size_t heap_bytes_of(const symm__backend_t *be) {
    size_t want = symm__env()->heap_limit ? symm__env()->heap_limit : (size_t)1 << 30;
    size_t g = be->granularity ? be->granularity : 1;
    return (want + g - 1) / g * g;
}

static symm_status_t nvshmem_load(void) {
    symm__nvshmem_lib_t lib;
    return symm__nvshmem_lib_open(symm__env()->nvshmem_lib, &lib);
}

static symm_status_t nvshmem_open(const symm__backend_args_t *args, symm__backend_t **out) {
    symm__nvshmem_backend_t *b = calloc(1, sizeof(*b));
    if (!b)
        return symm__error(SYMM_ERR_NO_MEMORY, "nvshmem backend: out of host memory");
    symm__scaleout_init(&b->so, &symm__backend_nvshmem_ops, args);
    /* Every PE learns whether every PE found the library before anyone starts it. */
    symm_status_t st = symm__nvshmem_lib_open(symm__env()->nvshmem_lib, &b->lib);
    if ((st = symm__bootstrap_agree(b->so.boot, st, SYMM_SUCCESS, "opening NVSHMEM")) != SYMM_SUCCESS)
        goto fail;
    set_library_env(heap_bytes_of(&b->so.base));
    symm__nvshmem_uid_t uid;
    if ((st = symm__scaleout_share_id(&b->so, &uid, sizeof uid, make_uid, &b->lib,
                                      "nvshmemx_get_uniqueid")) != SYMM_SUCCESS)
        goto fail;
    symm__nvshmem_init_attr_t attr;
    memset(&attr, 0, sizeof attr);
    attr.version = SYMM__NVSHMEM_VERSION_OF(symm__nvshmem_init_attr_t);
    attr.args.version = SYMM__NVSHMEM_VERSION_OF(symm__nvshmem_init_args_t);
    attr.args.uid_args.version = SYMM__NVSHMEM_VERSION_OF(symm__nvshmem_uid_args_t);
    int r = b->lib.set_attr_uniqueid_args(b->so.rank, b->so.nranks, &uid, &attr);
    if (r == 0)
        r = b->lib.hostlib_init_attr(SYMM__NVSHMEM_INIT_WITH_UNIQUEID, &attr);
    int status = r == 0 ? b->lib.init_status() : -1;
    b->up = r == 0;
    if (r != 0)
        st = symm__error(SYMM_ERR_UNSUPPORTED, "NVSHMEM (%s) initialisation with the unique id failed "
                         "(status %d; NVSHMEM_DEBUG=INFO says why)", b->lib.path, r);
    else if (status < SYMM__NVSHMEM_STATUS_IS_INITIALIZED)
        st = symm__error(SYMM_ERR_UNSUPPORTED, "NVSHMEM bootstrapped but did not initialise on GPU %d "
                         "(init status %d; NVSHMEM_DEBUG=INFO says why)", b->so.base.device, status);
    else if (b->lib.my_pe() != b->so.rank || b->lib.n_pes() != b->so.nranks)
        st = symm__error(SYMM_ERR_INTERNAL, "NVSHMEM numbers this PE %d of %d, symm %d of %d",
                         b->lib.my_pe(), b->lib.n_pes(), b->so.rank, b->so.nranks);
    if ((st = symm__bootstrap_agree(b->so.boot, st, SYMM_SUCCESS, "NVSHMEM initialisation")) != SYMM_SUCCESS)
        goto fail;
    SYMM_LOG_INFO("nvshmem backend: %s (NVSHMEM %d.%d.%d), init status %d%s", b->lib.path, b->lib.major,
                  b->lib.minor, b->lib.patch, status,
                  status == SYMM__NVSHMEM_STATUS_LIMITED_MPG
                      ? " (PEs share a GPU without MPS: NVSHMEM limits its collectives)"
                      : status == SYMM__NVSHMEM_STATUS_FULL_MPG ? " (PEs share a GPU under MPS)" : "");
    b->limited_mpg = status == SYMM__NVSHMEM_STATUS_LIMITED_MPG;
    b->so.base.caps = SYMM_CAP_PEER_LDST | SYMM_CAP_REMOTE_PUT | SYMM_CAP_REMOTE_GET | SYMM_CAP_REMOTE_SIGNAL |
                      SYMM_CAP_REMOTE_AMO | SYMM_CAP_REMOTE_QUIET | SYMM_CAP_MULTI_NODE |
                      (b->limited_mpg ? 0u : SYMM_CAP_COLL);
    *out = &b->so.base;
    return SYMM_SUCCESS;
fail:
    if (b->up)
        b->lib.hostlib_finalize();
    symm__scaleout_close(&b->so);
    free(b);
    return st;
}

static void nvshmem_close(symm__backend_t *be) {
    symm__nvshmem_backend_t *b = nvs(be);
    /* NVSHMEM's finalize is collective (a barrier over its own bootstrap):
     * with a PE gone it would wait for ever, so then the process leaves
     * NVSHMEM as it is. */
    if (b->up && symm__bootstrap_dead_pe(b->so.boot) < 0)
        b->lib.hostlib_finalize();
    symm__scaleout_close(&b->so);
    free(b);
}

static symm_status_t nvshmem_heap_open(symm__backend_t *be, size_t size, symm__heap_place_t *out) {
    symm__nvshmem_backend_t *b = nvs(be);
    if (size == 0)
        size = heap_bytes_of(be);
    /* nvshmem_align is collective; every PE calls it with the same size. */
    void *p = b->lib.align(be->granularity, size);
    symm_status_t st = p ? SYMM_SUCCESS
                         : symm__error(SYMM_ERR_HEAP_EXHAUSTED, "nvshmem_align(%zu bytes) failed: the heap "
                                       "(SYMM_HEAP_LIMIT) must fit in NVSHMEM_SYMMETRIC_SIZE=%s",
                                       size, getenv("NVSHMEM_SYMMETRIC_SIZE") ? getenv("NVSHMEM_SYMMETRIC_SIZE")
                                                                            : "(NVSHMEM's default)");
    st = symm__bootstrap_agree(b->so.boot, st, SYMM_ERR_HEAP_EXHAUSTED, "NVSHMEM heap");
    if (st != SYMM_SUCCESS) {
        if (p)
            b->lib.free(p);
        return st;
    }
    uintptr_t *base = calloc((size_t)b->so.nranks, sizeof(uintptr_t));
    if (!base) {
        b->lib.free(p);
        return symm__error(SYMM_ERR_NO_MEMORY, "nvshmem backend: out of host memory");
    }
    for (int r = 0; r < b->so.nranks; r++)
        base[r] = (uintptr_t)b->lib.ptr(p, r);
    base[b->so.rank] = (uintptr_t)p;
    size_t stride = 0;
    symm__scaleout_window(base, b->so.nranks, b->so.rank, &b->wfirst, &b->wcount, &stride);
    free(base);
    if (b->so.force_remote)
        b->wfirst = b->so.rank, b->wcount = 0;
    if ((st = symm__scaleout_agree_window(&b->so, &b->wfirst, &b->wcount, &stride)) != SYMM_SUCCESS) {
        b->lib.free(p);
        return st;
    }
    b->heap = p;
    b->heap_size = size;
    out->base = (uintptr_t)p;
    out->size = size;
    out->stride = stride;
    out->ldst_first = b->wfirst;
    out->ldst_count = b->wcount;
    SYMM_LOG_INFO("nvshmem backend: heap of %zu bytes at %p; world PEs %d..%d by load/store (stride %zu)%s",
                  size, p, b->wfirst, b->wfirst + b->wcount - 1, stride,
                  b->so.force_remote ? ", none: SYMM_DEBUG_FORCE_REMOTE" : "");
    return SYMM_SUCCESS;
}

/* nvshmem_free is collective and may wait on PEs that a failed init left
 * behind; NVSHMEM's finalize (close) releases the block with its heap. */
static void nvshmem_heap_close(symm__backend_t *be) { nvs(be)->heap = NULL; }

static void *nvshmem_peer_ptr(symm__backend_t *be, const void *p, int world_pe) {
    symm__nvshmem_backend_t *b = nvs(be);
    /* outside the agreed window a peer is not load/store, whatever NVSHMEM maps */
    if (world_pe < b->wfirst || world_pe >= b->wfirst + b->wcount)
        return NULL;
    return b->lib.ptr(p, world_pe);
}

static symm_status_t nvshmem_team_open(symm__backend_t *be, const symm__team_desc_t *team,
                                       symm__team_backend_t *out) {
    symm__nvshmem_backend_t *b = nvs(be);
    symm__nvshmem_state_t st;
    memset(&st, 0, sizeof st);
    st.magic = SYMM__NVSHMEM_STATE_MAGIC;
    st.n_pes = team->n_pes;
    st.team = team->is_world ? SYMM__NVSHMEM_TEAM_WORLD : SYMM__NVSHMEM_TEAM_NODE;
    st.flags = (team->is_world ? SYMM__BE_IDENTITY : 0) | (b->so.force_remote ? SYMM__BE_NO_PTR : 0);
    size_t map_bytes = team->is_world ? 0 : (size_t)team->n_pes * sizeof(int32_t);
    void *d = NULL;
    symm_status_t s = be->ops->dev_alloc(be, sizeof st + map_bytes, &d);
    if (s != SYMM_SUCCESS)
        return s;
    if (map_bytes) {
        int32_t *map = malloc(map_bytes);
        if (!map) {
            be->ops->dev_free(be, d);
            return symm__error(SYMM_ERR_NO_MEMORY, "nvshmem backend: out of host memory");
        }
        for (int i = 0; i < team->n_pes; i++)
            map[i] = team->world_pe[i];
        st.pe_map = (uint64_t)(uintptr_t)d + sizeof st;
        s = be->ops->dev_write(be, (char *)d + sizeof st, map, map_bytes);
        free(map);
    }
    if (s == SYMM_SUCCESS)
        s = be->ops->dev_write(be, d, &st, sizeof st);
    if (s != SYMM_SUCCESS) {
        be->ops->dev_free(be, d);
        return s;
    }
    symm__scaleout_team_place(team, (uint64_t)(uintptr_t)d, b->wfirst, b->wcount, out);
    return SYMM_SUCCESS;
}

static symm_status_t nvshmem_barrier_on_stream(symm__backend_t *be, const symm_ctx_t *d_ctx,
                                               const symm_ctx_t *h_ctx, symm_stream_t stream) {
    symm__nvshmem_backend_t *b = nvs(be);
    if (symm__scaleout_ldst_all(h_ctx))
        return b->so.native->ops->barrier_on_stream(b->so.native, d_ctx, h_ctx, stream);
    if (b->limited_mpg)
        return symm__error(SYMM_ERR_UNSUPPORTED, "%s on the nvshmem backend: PEs share a GPU without an MPS "
                           "daemon, where NVSHMEM has no on-stream collectives (start one: README, 'Develop "
                           "on one GPU')", "symm_barrier_all_on_stream");
    if (h_ctx->n_pes == b->so.nranks) {
        b->lib.barrier_all_on_stream(stream);
        return SYMM_SUCCESS;
    }
    int r = b->lib.barrier_on_stream(SYMM__NVSHMEM_TEAM_NODE, stream);
    return r == 0 ? SYMM_SUCCESS : symm__error(SYMM_ERR_UNSUPPORTED, "nvshmemx_barrier_on_stream: %d", r);
}

/* NVSHMEM's type name for a symm dtype, or NULL. */
static const char *type_name(int dtype) {
    switch (dtype) {
    case SYMM_DTYPE_F32: return "float";
    case SYMM_DTYPE_F16: return "half";
    case SYMM_DTYPE_BF16: return "bfloat16";
    case SYMM_DTYPE_F64: return "double";
    case SYMM_DTYPE_I32: return "int32";
    case SYMM_DTYPE_U32: return "uint32";
    case SYMM_DTYPE_I64: return "int64";
    case SYMM_DTYPE_U64: return "uint64";
    default: return NULL;
    }
}

static const char *op_name(int op) {
    switch (op) {
    case SYMM_OP_SUM: return "sum";
    case SYMM_OP_MIN: return "min";
    case SYMM_OP_MAX: return "max";
    case SYMM_OP_BAND: return "and";
    case SYMM_OP_BOR: return "or";
    case SYMM_OP_BXOR: return "xor";
    default: return NULL;
    }
}

typedef int (*reduce_fn)(symm__nvshmem_team_t team, void *dest, const void *src, size_t n,
                         symm__nvshmem_stream_t stream);

static symm_status_t nvshmem_coll(symm__backend_t *be, const symm__be_coll_t *c, symm_stream_t stream) {
    symm__nvshmem_backend_t *b = nvs(be);
    const symm__nvshmem_team_t team =
        c->h_ctx->n_pes == b->so.nranks ? SYMM__NVSHMEM_TEAM_WORLD : SYMM__NVSHMEM_TEAM_NODE;
    const size_t bytes = c->count * c->esize;
    int r;
    if (b->limited_mpg)
        return symm__error(SYMM_ERR_UNSUPPORTED, "%s on the nvshmem backend: PEs share a GPU without an MPS "
                           "daemon, where NVSHMEM has no on-stream collectives (start one: README, 'Develop "
                           "on one GPU')", c->what);
    if (!c->send_in_heap || !c->recv_in_heap)
        return symm__error(SYMM_ERR_UNSUPPORTED, "%s on the nvshmem backend: NVSHMEM's collectives need "
                           "send and recv in the symmetric heap (symm_malloc)", c->what);
    switch (c->kind) {
    case SYMM__BE_COLL_ALL_REDUCE:
    case SYMM__BE_COLL_REDUCE_SCATTER: {
        const char *t = type_name(c->dtype), *o = op_name(c->op);
        char name[96];
        if (!t || !o || c->acc_default == 0)
            return symm__error(SYMM_ERR_UNSUPPORTED, "%s on the nvshmem backend: NVSHMEM has no %s reduction "
                               "of this type with this accumulator", c->what, o ? o : "such");
        snprintf(name, sizeof name, "nvshmemx_%s_%s_%s_on_stream", t, o,
                 c->kind == SYMM__BE_COLL_ALL_REDUCE ? "reduce" : "reducescatter");
        reduce_fn f = (reduce_fn)symm__nvshmem_lib_sym(&b->lib, name);
        if (!f)
            return symm__error(SYMM_ERR_UNSUPPORTED, "%s on the nvshmem backend: %s has no %s", c->what,
                               b->lib.path, name);
        r = f(team, c->recv, c->send, c->count, stream);
        break;
    }
    case SYMM__BE_COLL_ALL_GATHER: r = b->lib.fcollectmem_on_stream(team, c->recv, c->send, bytes, stream); break;
    case SYMM__BE_COLL_ALL_TO_ALL: r = b->lib.alltoallmem_on_stream(team, c->recv, c->send, bytes, stream); break;
    case SYMM__BE_COLL_BROADCAST:
        r = b->lib.broadcastmem_on_stream(team, c->recv, c->send, bytes, c->root, stream);
        break;
    default: return symm__error(SYMM_ERR_INTERNAL, "nvshmem backend: collective kind %d", c->kind);
    }
    return r == 0 ? SYMM_SUCCESS : symm__error(SYMM_ERR_CUDA, "%s through NVSHMEM returned %d", c->what, r);
}

/* Modules that do not link NVSHMEM's device library (most of a Triton
 * program's) have nothing to set up. */
static symm_status_t nvshmem_module_init(symm__backend_t *be, void *module) {
    int found = 0;
    symm_status_t st = be->ops->module_has_global(be, module, "nvshmemi_device_state_d", &found);
    if (st != SYMM_SUCCESS || !found)
        return st;
    int r = nvs(be)->lib.cumodule_init((symm__nvshmem_module_t)module);
    return r == 0 ? SYMM_SUCCESS
                  : symm__error(SYMM_ERR_UNSUPPORTED, "nvshmemx_cumodule_init: %d (does the module link "
                                "NVSHMEM's device library, libnvshmem_device.bc / .a?)", r);
}

const symm__backend_ops_t symm__backend_nvshmem_ops = {
    .name = "nvshmem",
    .kind = SYMM_BACKEND_NVSHMEM,
    .on_native = 1,
    .multi_node = 1,
    /* no MoE: its kernels need every team PE at the heap's stride */
    .kernel_caps = SYMM__BE_KCAP_COLL | SYMM__BE_KCAP_TRACE,
    .load = nvshmem_load,
    .open = nvshmem_open,
    .close = nvshmem_close,
    .heap_open = nvshmem_heap_open,
    .heap_close = nvshmem_heap_close,
    .peer_ptr = nvshmem_peer_ptr,
    .team_open = nvshmem_team_open,
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
    .barrier_on_stream = nvshmem_barrier_on_stream,
    .coll = nvshmem_coll,
    .module_init = nvshmem_module_init,
};
