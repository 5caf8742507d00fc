/*
 * native.c - the native backend: CUDA VMM chunks shared by POSIX file
 * descriptors and mapped into every node PE's slot (docs/design.md decisions 2-3).
 *
 * Each chunk: cuMemCreate on this PE's GPU -> cuMemExportToShareableHandle
 * (an fd; the runtime passes it around) -> on every PE cuMemImport of each
 * node PE's fd -> cuMemMap at slot0 + i * stride + offset -> cuMemSetAccess
 * read/write for this PE's GPU. No multicast object is ever created here.
 */
#include <cuda_runtime.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/native/driver.h"
#include "backend/native/stream_barrier.h"
#include "core/log.h"

typedef struct symm__native_backend {
    symm__backend_t base;
    const symm__cu_t *cu;
    cudaStream_t probe; /* an idle stream: querying it reports a sticky error */
} symm__native_backend_t;

struct symm__chunk {
    CUmemGenericAllocationHandle own; /* this PE's memory */
    int fd;
    size_t size;
    int n;                               /* node PEs */
    CUmemGenericAllocationHandle *handles; /* imported (or own) handle per node PE */
    unsigned char *imported;             /* handles[i] must be released */
    unsigned char *mapped;               /* mapped at addrs[i] */
    uintptr_t *addrs;
};

#define BUSID_LEN 32

static const symm__cu_t *cu_of(symm__backend_t *be) { return ((symm__native_backend_t *)be)->cu; }

static symm_status_t cuda_err(const char *what, cudaError_t e) {
    return symm__error(SYMM_ERR_CUDA, "%s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

/* PEs sharing one GPU (docs/design.md decision 9): how many node PEs have this
 * PE's bus id, and which is the first of them (it logs the mode once). */
typedef struct gpu_sharing {
    int pes;   /* node PEs on this GPU, this one included */
    int first; /* world rank of the lowest of them */
    int last;  /* world rank of the highest of them */
} gpu_sharing_t;

/* Check every pair of node PEs whose GPUs this process can see, and the
 * SYMM_DEBUG_DENY_PEER hook. Every PE computes the same answer from the
 * gathered bus ids and its own view; the verdicts are then gathered so the
 * error (naming the pair) is raised on every PE. Two PEs on the same GPU
 * reach each other's memory like any process reaches its own. Also counts
 * the node PEs that share this PE's GPU (*share). */
static symm_status_t check_peers(const symm__backend_args_t *a, int dev, gpu_sharing_t *share) {
    const int n = a->n_node;
    char mine[BUSID_LEN] = {0};
    cudaError_t e = cudaDeviceGetPCIBusId(mine, BUSID_LEN, dev);
    if (e != cudaSuccess)
        return cuda_err("cudaDeviceGetPCIBusId", e);
    int world = symm__bootstrap_nranks(a->boot);
    char *all = calloc((size_t)world, BUSID_LEN);
    int32_t *verdicts = calloc((size_t)world * 2, sizeof(int32_t));
    int *ord = calloc((size_t)n, sizeof(int));
    symm_status_t st = SYMM_SUCCESS;
    if (!all || !verdicts || !ord) {
        st = symm__error(SYMM_ERR_NO_MEMORY, "peer check: out of host memory");
        goto out;
    }
    st = symm__bootstrap_allgather(a->boot, mine, all, BUSID_LEN);
    if (st != SYMM_SUCCESS)
        goto out;
    share->pes = 0;
    share->first = share->last = -1;
    for (int i = 0; i < n; i++) {
        int r = a->node_ranks[i];
        if (strncmp(all + (size_t)r * BUSID_LEN, mine, BUSID_LEN) != 0)
            continue;
        share->pes++;
        if (share->first < 0)
            share->first = r;
        share->last = r;
    }
    int di = -1, dj = -1;
    int deny = symm__parse_deny_peer(a->deny_peer, &di, &dj);
    /* My verdict: the first pair (i, j) found without access, or (-1, -1). */
    int32_t bad[2] = {-1, -1};
    for (int i = 0; i < n; i++) {
        const char *bus = all + (size_t)a->node_ranks[i] * BUSID_LEN;
        if (cudaDeviceGetByPCIBusId(&ord[i], bus) != cudaSuccess)
            ord[i] = -1; /* not visible here (CUDA_VISIBLE_DEVICES) */
        (void)cudaGetLastError();
    }
    for (int i = 0; i < n && bad[0] < 0; i++) {
        for (int j = i + 1; j < n && bad[0] < 0; j++) {
            int denied = deny > 0 && ((di == i && dj == j) || (di == j && dj == i));
            int ok = 1;
            if (ord[i] >= 0 && ord[j] >= 0 && ord[i] != ord[j]) {
                int ij = 0, ji = 0;
                if (cudaDeviceCanAccessPeer(&ij, ord[i], ord[j]) != cudaSuccess ||
                    cudaDeviceCanAccessPeer(&ji, ord[j], ord[i]) != cudaSuccess) {
                    (void)cudaGetLastError();
                    ij = ji = 0;
                }
                ok = ij && ji;
            }
            if (denied || !ok) {
                bad[0] = i;
                bad[1] = j;
            }
        }
    }
    st = symm__bootstrap_allgather(a->boot, bad, verdicts, sizeof(bad));
    if (st != SYMM_SUCCESS)
        goto out;
    for (int r = 0; r < world; r++) {
        int i = verdicts[2 * r], j = verdicts[2 * r + 1];
        if (i < 0 || i >= n || j < 0 || j >= n)
            continue;
        int pi = a->node_ranks[i], pj = a->node_ranks[j];
        st = symm__error(SYMM_ERR_NO_PEER_ACCESS,
                         "PE %d (GPU %s) and PE %d (GPU %s) cannot access each other's memory "
                         "(no CUDA peer access%s, seen by PE %d); symm needs load/store access "
                         "between all GPUs of a node (NVLink or PCIe P2P)",
                         pi, all + (size_t)pi * BUSID_LEN, pj, all + (size_t)pj * BUSID_LEN,
                         deny > 0 ? " or denied by SYMM_DEBUG_DENY_PEER" : "", r);
        break;
    }
out:
    free(ord);
    free(verdicts);
    free(all);
    return st;
}

/* Is an MPS control daemon there for this process to join? The driver looks
 * for its pipe in CUDA_MPS_PIPE_DIRECTORY, by default /tmp/nvidia-mps. Only
 * for the advice in the log: nothing depends on the answer. */
static int mps_daemon_found(void) {
    const char *dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
    char path[4096];
    snprintf(path, sizeof path, "%s/control", dir && dir[0] ? dir : "/tmp/nvidia-mps");
    return access(path, F_OK) == 0;
}

/* The SMs a grid of this PE that waits on peers may fill, so that the
 * waiting grids of every PE on the GPU are resident at once (a grid whose
 * blocks cannot all be resident waits, under MPS, for SMs that the peers'
 * waiting grids never give back): the SMs this context may use (fewer
 * under MPS with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE), and at most the GPU's
 * SMs divided among the PEs on it. An MPS client sees its limit as the GPU's
 * SM count too (66 of an H200's 132 at 50 %), so under symmrun's percentages
 * the share is the limit divided again: with the whole limit as each PE's
 * share, test_moe's ll and ht parts on 2 PEs stopped at the wait deadline. */
static symm_status_t sm_share_of(const symm__cu_t *cu, int dev, int gpu_pes, int *sms_gpu, int *sms_ctx,
                                 int *share) {
    int total = 0;
    cudaError_t e = cudaDeviceGetAttribute(&total, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess)
        return cuda_err("cudaDeviceGetAttribute(multiProcessorCount)", e);
    int ctx = total;
    CUexecAffinityParam aff;
    memset(&aff, 0, sizeof aff);
    if (cu->CtxGetExecAffinity && cu->CtxGetExecAffinity(&aff, CU_EXEC_AFFINITY_TYPE_SM_COUNT) == CUDA_SUCCESS &&
        aff.param.smCount.val > 0 && (int)aff.param.smCount.val < ctx)
        ctx = (int)aff.param.smCount.val;
    int s = total / (gpu_pes > 0 ? gpu_pes : 1);
    if (ctx < s)
        s = ctx;
    *sms_gpu = total;
    *sms_ctx = ctx;
    *share = s > 0 ? s : 1;
    return SYMM_SUCCESS;
}

/* The least share over every PE, so grid sizes derived from it are the same
 * everywhere (a collective's block b meets block b of every peer). */
static symm_status_t agree_share(symm__bootstrap_t *boot, int mine, int *least) {
    int world = symm__bootstrap_nranks(boot);
    int32_t m = mine, *all = calloc((size_t)world, sizeof(int32_t));
    if (!all)
        return symm__error(SYMM_ERR_NO_MEMORY, "out of host memory");
    symm_status_t st = symm__bootstrap_allgather(boot, &m, all, sizeof(m));
    if (st == SYMM_SUCCESS) {
        for (int r = 0; r < world; r++)
            if (all[r] < m)
                m = all[r];
        *least = m;
    }
    free(all);
    return st;
}

static size_t pow2_at_least(size_t x) {
    size_t p = 1;
    while (p < x)
        p <<= 1;
    return p;
}

static symm_status_t native_open(const symm__backend_args_t *args, symm__backend_t **out) {
    int di, dj;
    if (symm__parse_deny_peer(args->deny_peer, &di, &dj) < 0)
        return symm__error(SYMM_ERR_ENV, "SYMM_DEBUG_DENY_PEER='%s' is not 'i:j'", args->deny_peer);
    /* Every PE learns whether every other found a device, so a node where
     * only some PEs fail does not hang the others in the next exchange. */
    const char *why = NULL;
    int count = symm__native_gpu_count(&why);
    int32_t ok = count > 0;
    cudaError_t e;
    int world = symm__bootstrap_nranks(args->boot);
    int32_t *oks = calloc((size_t)world, sizeof(int32_t));
    if (!oks)
        return symm__error(SYMM_ERR_NO_MEMORY, "out of host memory");
    symm_status_t st = symm__bootstrap_allgather(args->boot, &ok, oks, sizeof(ok));
    int first_bad = -1;
    for (int r = 0; st == SYMM_SUCCESS && r < world; r++)
        if (!oks[r] && first_bad < 0)
            first_bad = r;
    free(oks);
    if (st != SYMM_SUCCESS)
        return st;
    if (!ok)
        return symm__error(SYMM_ERR_NO_DEVICE, "%s; run on a GPU machine (SYMM_BACKEND=host runs only programs "
                           "that launch no kernels: the host API over CPU shared memory, for tests)", why);
    if (first_bad >= 0)
        return symm__error(SYMM_ERR_NO_DEVICE, "PE %d found no usable GPU", first_bad);

    int dev = args->local_rank % count;
    if ((e = cudaSetDevice(dev)) != cudaSuccess)
        return cuda_err("cudaSetDevice", e);
    if ((e = cudaFree(NULL)) != cudaSuccess) /* create the primary context now */
        return cuda_err("creating the CUDA context", e);

    const symm__cu_t *cu = NULL;
    st = symm__cu_load(&cu);
    if (st != SYMM_SUCCESS)
        return st;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t gran = 0;
    CUresult r = cu->MemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
    if (r != CUDA_SUCCESS || gran == 0)
        return symm__error(SYMM_ERR_CUDA, "cuMemGetAllocationGranularity: %s", symm__cu_errstr(r));
    size_t free_b = 0, total_b = 0;
    if ((e = cudaMemGetInfo(&free_b, &total_b)) != cudaSuccess)
        return cuda_err("cudaMemGetInfo", e);

    gpu_sharing_t share = {1, -1, -1};
    st = check_peers(args, dev, &share);
    if (st != SYMM_SUCCESS)
        return st;
    int sms_gpu = 0, sms_ctx = 0, sm_mine = 0, sm_share = 0;
    st = sm_share_of(cu, dev, share.pes, &sms_gpu, &sms_ctx, &sm_mine);
    /* every PE joins the exchange, a failed one with 0, so none waits alone */
    symm_status_t st_agree = agree_share(args->boot, st == SYMM_SUCCESS ? sm_mine : 0, &sm_share);
    if (st != SYMM_SUCCESS)
        return st;
    if (st_agree != SYMM_SUCCESS)
        return st_agree;
    if (sm_share < 1)
        return symm__error(SYMM_ERR_CUDA, "another PE could not read its GPU's SM count");
    if (share.pes > 1 && symm__bootstrap_rank(args->boot) == share.first) {
        int mps = mps_daemon_found();
        SYMM_LOG_INFO("PEs %d-%d share GPU %d (%d PEs on one GPU, %s): each PE's waiting grids use at "
                      "most %d of its %d SMs (this process may use %d)",
                      share.first, share.last, dev, share.pes,
                      mps ? "an MPS daemon is running" : "no MPS daemon: the PEs take turns on the GPU",
                      sm_share, sms_gpu, sms_ctx);
        if (!mps && share.pes > 2)
            SYMM_LOG_WARN("%d PEs share GPU %d without MPS: every wait on a peer costs a time slice of "
                          "the GPU (milliseconds); start an MPS daemon (README, 'Develop on one GPU')",
                          share.pes, dev);
    }

    symm__native_backend_t *nb = calloc(1, sizeof(*nb));
    if (!nb)
        return symm__error(SYMM_ERR_NO_MEMORY, "out of host memory");
    if ((e = cudaStreamCreateWithFlags(&nb->probe, cudaStreamNonBlocking)) != cudaSuccess) {
        free(nb);
        return cuda_err("cudaStreamCreateWithFlags (health probe)", e);
    }
    nb->base.ops = &symm__backend_native_ops;
    nb->cu = cu;
    nb->base.device = dev;
    nb->base.granularity = gran;
    /* Room for the whole GPU: the heap can never need more. */
    nb->base.stride_hint = args->heap_reserve ? args->heap_reserve : pow2_at_least(total_b);
    nb->base.gpu_pes = share.pes;
    nb->base.sm_share = sm_share;
    nb->base.caps = SYMM_CAP_PEER_LDST | SYMM_CAP_COLL;
    SYMM_LOG_INFO("native backend: GPU %d, granularity %zu, %zu bytes of device memory", dev, gran,
                  total_b);
    *out = &nb->base;
    return SYMM_SUCCESS;
}

static void native_close(symm__backend_t *be) {
    symm__native_backend_t *nb = (symm__native_backend_t *)be;
    (void)cudaStreamDestroy(nb->probe); /* fails after a sticky error: nothing to do then */
    (void)cudaGetLastError();
    free(be);
}

/* A kernel that trapped (a symm deadline, a failed check, a fault) leaves
 * the context with a sticky error that every later call returns, this idle
 * stream's query included; the query itself never blocks. The query runs in
 * relaxed capture mode: in the default mode a stream query while any thread
 * captures a graph in global mode is refused and breaks that capture. */
static int native_health(symm__backend_t *be, char *why, size_t size) {
    symm__native_backend_t *nb = (symm__native_backend_t *)be;
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaError_t e = cudaSetDevice(be->device); /* this thread's current device */
    if (e == cudaSuccess && (e = cudaThreadExchangeStreamCaptureMode(&mode)) == cudaSuccess) {
        e = cudaStreamQuery(nb->probe);
        (void)cudaThreadExchangeStreamCaptureMode(&mode);
    }
    if (e == cudaSuccess || e == cudaErrorNotReady)
        return 0;
    snprintf(why, size, "its GPU %d reports %s (%s): a kernel trapped or faulted there (see its message)",
             be->device, cudaGetErrorName(e), cudaGetErrorString(e));
    return 1;
}

static symm_status_t native_reserve(symm__backend_t *be, size_t size, uintptr_t hint, size_t align,
                                    uintptr_t *addr) {
    CUdeviceptr p = 0;
    CUresult r = cu_of(be)->MemAddressReserve(&p, size, align > be->granularity ? align : be->granularity,
                                              (CUdeviceptr)hint, 0);
    if (r != CUDA_SUCCESS && hint)
        return SYMM_ERR_NO_MEMORY; /* an expected answer while looking for a common address */
    if (r != CUDA_SUCCESS)
        return symm__error(SYMM_ERR_NO_MEMORY, "cuMemAddressReserve(%zu bytes): %s", size,
                           symm__cu_errstr(r));
    if (hint && (uintptr_t)p != hint) { /* the hint is only a hint */
        (void)cu_of(be)->MemAddressFree(p, size);
        return SYMM_ERR_NO_MEMORY;
    }
    *addr = (uintptr_t)p;
    return SYMM_SUCCESS;
}

static void native_unreserve(symm__backend_t *be, uintptr_t addr, size_t size) {
    CUresult r = cu_of(be)->MemAddressFree((CUdeviceptr)addr, size);
    if (r != CUDA_SUCCESS)
        SYMM_LOG_WARN("cuMemAddressFree: %s", symm__cu_errstr(r));
}

static symm_status_t native_chunk_create(symm__backend_t *be, size_t size, symm__chunk_t **out) {
    const symm__cu_t *cu = cu_of(be);
    symm__chunk_t *c = calloc(1, sizeof(*c));
    if (!c)
        return symm__error(SYMM_ERR_NO_MEMORY, "out of host memory");
    c->fd = -1;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = be->device;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CUresult r = cu->MemCreate(&c->own, size, &prop, 0);
    if (r != CUDA_SUCCESS) {
        free(c);
        return symm__error(r == CUDA_ERROR_OUT_OF_MEMORY ? SYMM_ERR_HEAP_EXHAUSTED : SYMM_ERR_CUDA,
                           "cuMemCreate(%zu bytes) on GPU %d: %s", size, be->device,
                           symm__cu_errstr(r));
    }
    int fd = -1;
    r = cu->MemExportToShareableHandle(&fd, c->own, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (r != CUDA_SUCCESS || fd < 0) {
        (void)cu->MemRelease(c->own);
        free(c);
        return symm__error(SYMM_ERR_CUDA, "cuMemExportToShareableHandle: %s", symm__cu_errstr(r));
    }
    /* Until the exchange is over it is a handle on this PE's GPU memory: no
     * program this process starts may inherit it. */
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
        int e = errno;
        close(fd);
        (void)cu->MemRelease(c->own);
        free(c);
        return symm__error(SYMM_ERR_CUDA, "marking the heap chunk's descriptor close-on-exec: %s", strerror(e));
    }
    c->fd = fd;
    c->size = size;
    *out = c;
    return SYMM_SUCCESS;
}

static int native_chunk_fd(const symm__chunk_t *c) { return c->fd; }

static symm_status_t native_chunk_map(symm__backend_t *be, symm__chunk_t *c, const uintptr_t *addrs,
                                      const int *fds, int n, int me) {
    const symm__cu_t *cu = cu_of(be);
    c->handles = calloc((size_t)n, sizeof(*c->handles));
    c->imported = calloc((size_t)n, 1);
    c->mapped = calloc((size_t)n, 1);
    c->addrs = calloc((size_t)n, sizeof(*c->addrs));
    if (!c->handles || !c->imported || !c->mapped || !c->addrs)
        return symm__error(SYMM_ERR_NO_MEMORY, "out of host memory");
    c->n = n;
    CUmemAccessDesc access;
    memset(&access, 0, sizeof(access));
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = be->device;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    for (int i = 0; i < n; i++) {
        c->addrs[i] = addrs[i];
        CUresult r;
        if (i == me) {
            c->handles[i] = c->own;
        } else {
            r = cu->MemImportFromShareableHandle(&c->handles[i], (void *)(uintptr_t)fds[i],
                                                 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
            if (r != CUDA_SUCCESS)
                return symm__error(SYMM_ERR_CUDA, "importing node PE %d's heap chunk: %s", i,
                                   symm__cu_errstr(r));
            c->imported[i] = 1;
        }
        r = cu->MemMap((CUdeviceptr)addrs[i], c->size, 0, c->handles[i], 0);
        if (r != CUDA_SUCCESS)
            return symm__error(r == CUDA_ERROR_OUT_OF_MEMORY ? SYMM_ERR_HEAP_EXHAUSTED : SYMM_ERR_CUDA,
                               "cuMemMap of node PE %d's heap chunk: %s", i, symm__cu_errstr(r));
        c->mapped[i] = 1;
        r = cu->MemSetAccess((CUdeviceptr)addrs[i], c->size, &access, 1);
        if (r != CUDA_SUCCESS)
            return symm__error(SYMM_ERR_CUDA,
                               "cuMemSetAccess for GPU %d on node PE %d's heap chunk: %s",
                               be->device, i, symm__cu_errstr(r));
    }
    /* The peers imported their copies; the handle keeps the memory. */
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
    return SYMM_SUCCESS;
}

static void native_chunk_destroy(symm__backend_t *be, symm__chunk_t *c) {
    if (!c)
        return;
    const symm__cu_t *cu = cu_of(be);
    for (int i = 0; i < c->n; i++) {
        CUresult r;
        if (c->mapped && c->mapped[i] &&
            (r = cu->MemUnmap((CUdeviceptr)c->addrs[i], c->size)) != CUDA_SUCCESS)
            SYMM_LOG_WARN("cuMemUnmap: %s", symm__cu_errstr(r));
        if (c->imported && c->imported[i] && (r = cu->MemRelease(c->handles[i])) != CUDA_SUCCESS)
            SYMM_LOG_WARN("cuMemRelease (imported): %s", symm__cu_errstr(r));
    }
    CUresult r = cu->MemRelease(c->own);
    if (r != CUDA_SUCCESS)
        SYMM_LOG_WARN("cuMemRelease: %s", symm__cu_errstr(r));
    if (c->fd >= 0)
        close(c->fd);
    free(c->handles);
    free(c->imported);
    free(c->mapped);
    free(c->addrs);
    free(c);
}

static symm_status_t native_dev_alloc(symm__backend_t *be, size_t size, void **dptr) {
    (void)be;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, size);
    if (e != cudaSuccess)
        return cuda_err("cudaMalloc (context)", e);
    if ((e = cudaMemset(p, 0, size)) != cudaSuccess || (e = cudaDeviceSynchronize()) != cudaSuccess) {
        (void)cudaFree(p);
        return cuda_err("cudaMemset (context)", e);
    }
    *dptr = p;
    return SYMM_SUCCESS;
}

static symm_status_t native_dev_write(symm__backend_t *be, void *dptr, const void *src, size_t size) {
    (void)be;
    cudaError_t e = cudaMemcpy(dptr, src, size, cudaMemcpyHostToDevice);
    return e == cudaSuccess ? SYMM_SUCCESS : cuda_err("cudaMemcpy (context)", e);
}

static void native_dev_free(symm__backend_t *be, void *dptr) {
    (void)be;
    cudaError_t e = cudaFree(dptr);
    if (e != cudaSuccess)
        SYMM_LOG_WARN("cudaFree (context): %s", cudaGetErrorString(e));
}

static symm_status_t native_flag_alloc(symm__backend_t *be, volatile uint32_t **host, uint64_t *dev) {
    (void)be;
    void *h = NULL, *d = NULL;
    cudaError_t e = cudaHostAlloc(&h, sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable);
    if (e != cudaSuccess)
        return cuda_err("cudaHostAlloc (abort flag)", e);
    *(volatile uint32_t *)h = 0;
    if ((e = cudaHostGetDevicePointer(&d, h, 0)) != cudaSuccess) {
        (void)cudaFreeHost(h);
        return cuda_err("cudaHostGetDevicePointer (abort flag)", e);
    }
    *host = (volatile uint32_t *)h;
    *dev = (uint64_t)(uintptr_t)d;
    return SYMM_SUCCESS;
}

static void native_flag_free(symm__backend_t *be, volatile uint32_t *host) {
    (void)be;
    cudaError_t e = cudaFreeHost((void *)(uintptr_t)host);
    if (e != cudaSuccess)
        SYMM_LOG_WARN("cudaFreeHost (abort flag): %s", cudaGetErrorString(e));
}

static symm_status_t native_memset_sync(symm__backend_t *be, void *ptr, int value, size_t size) {
    (void)be;
    cudaError_t e = cudaMemset(ptr, value, size);
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    return e == cudaSuccess ? SYMM_SUCCESS : cuda_err("cudaMemset (heap)", e);
}

static symm_status_t native_memcpy_sync(symm__backend_t *be, void *dst, const void *src, size_t size) {
    (void)be;
    cudaError_t e = cudaMemcpy(dst, src, size, cudaMemcpyDefault);
    return e == cudaSuccess ? SYMM_SUCCESS : cuda_err("cudaMemcpy (heap)", e);
}

static symm_status_t native_synchronize(symm__backend_t *be) {
    (void)be;
    cudaError_t e = cudaDeviceSynchronize();
    return e == cudaSuccess ? SYMM_SUCCESS : cuda_err("cudaDeviceSynchronize", e);
}

static symm_status_t native_barrier_on_stream(symm__backend_t *be, const symm_ctx_t *d_ctx,
                                              const symm_ctx_t *h_ctx, symm_stream_t stream) {
    (void)be;
    (void)h_ctx;
    return symm__launch_stream_barrier(d_ctx, stream);
}

static symm_status_t native_function_module(symm__backend_t *be, void *function, void **module) {
    CUmodule m = NULL;
    CUresult r = cu_of(be)->FuncGetModule(&m, (CUfunction)function);
    if (r != CUDA_SUCCESS)
        return symm__error(SYMM_ERR_CUDA, "cuFuncGetModule: %s", symm__cu_errstr(r));
    *module = m;
    return SYMM_SUCCESS;
}

static symm_status_t native_module_has_global(symm__backend_t *be, void *module, const char *name, int *found) {
    CUdeviceptr p = 0;
    size_t bytes = 0;
    CUresult r = cu_of(be)->ModuleGetGlobal(&p, &bytes, (CUmodule)module, name);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_FOUND)
        return symm__error(SYMM_ERR_CUDA, "cuModuleGetGlobal(%s): %s", name, symm__cu_errstr(r));
    *found = r == CUDA_SUCCESS;
    return SYMM_SUCCESS;
}

const symm__backend_ops_t symm__backend_native_ops = {
    .name = "native",
    .kind = SYMM_BACKEND_NATIVE,
    .kernel_caps = SYMM__BE_KCAP_COLL | SYMM__BE_KCAP_MOE | SYMM__BE_KCAP_TRACE,
    .open = native_open,
    .close = native_close,
    .reserve = native_reserve,
    .unreserve = native_unreserve,
    .chunk_create = native_chunk_create,
    .chunk_fd = native_chunk_fd,
    .chunk_map = native_chunk_map,
    .chunk_destroy = native_chunk_destroy,
    .dev_alloc = native_dev_alloc,
    .dev_write = native_dev_write,
    .dev_free = native_dev_free,
    .flag_alloc = native_flag_alloc,
    .flag_free = native_flag_free,
    .memset_sync = native_memset_sync,
    .memcpy_sync = native_memcpy_sync,
    .synchronize = native_synchronize,
    .health = native_health,
    .barrier_on_stream = native_barrier_on_stream,
    .function_module = native_function_module,
    .module_has_global = native_module_has_global,
};
