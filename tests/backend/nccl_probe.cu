/*
 * nccl_probe.cu - NCCL alone on one rank (no symm): the calls the nccl backend
 * makes, in its order, each call's result printed, so that a failure tells
 * NCCL on this machine apart from symm's use of it.
 *
 *   nccl_probe [--gin]     (--gin: ncclDevCommCreate with ginForceEnable)
 *
 * Three sequences: a blocking communicator; a non-blocking one polled with
 * ncclCommGetAsyncError after every call (what the backend does); and a
 * non-blocking one whose ncclDevCommCreate follows ncclCommWindowRegister
 * without that poll (diagnostic: NCCL 2.28 answers ncclInvalidArgument, as
 * the window's registration still runs on its group thread). Each sequence:
 * ncclGetUniqueId, ncclCommInitRankConfig, ncclMemAlloc,
 * ncclCommWindowRegister (symmetric), ncclDevCommCreate (2 barriers),
 * the window's flat-mapping layout, a one-int ncclAllReduce, and the
 * teardown. Exit 0 when the first two pass.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>
/* NCCL's headers are not -Wextra clean (unused parameters) in the host pass. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <nccl.h>
#include <nccl_device.h>
#pragma GCC diagnostic pop

static const double k_timeout_s = 30.0;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static const char *async_of(ncclComm_t comm) {
    ncclResult_t a = ncclSuccess;
    if (!comm)
        return "-";
    if (ncclCommGetAsyncError(comm, &a) != ncclSuccess)
        return "(ncclCommGetAsyncError failed)";
    return ncclGetErrorString(a);
}

/* Prints what `call` returned and the communicator's state right after. */
static void said(const char *seq, const char *call, ncclResult_t r, ncclComm_t comm, double t0) {
    printf("probe %-10s %-40s -> %s (%d), async now: %s [%.1f ms]\n", seq, call, ncclGetErrorString(r), (int)r,
           async_of(comm), 1e3 * (now_s() - t0));
    if (r != ncclSuccess && r != ncclInProgress) {
        const char *last = ncclGetLastError(comm);
        if (last && *last)
            printf("probe %-10s   last error: %s\n", seq, last);
    }
}

/* Polls ncclCommGetAsyncError until NCCL is done with the last call. */
static ncclResult_t settle(const char *seq, const char *call, ncclComm_t comm) {
    const double t0 = now_s();
    ncclResult_t a = ncclInProgress;
    while (now_s() - t0 < k_timeout_s) {
        if (ncclCommGetAsyncError(comm, &a) != ncclSuccess || a != ncclInProgress)
            break;
        struct timespec nap = {0, 200000};
        nanosleep(&nap, NULL);
    }
    printf("probe %-10s   %-38s settled: %s (%d) after %.1f ms\n", seq, call, ncclGetErrorString(a), (int)a,
           1e3 * (now_s() - t0));
    if (a != ncclSuccess) {
        const char *last = ncclGetLastError(comm);
        if (last && *last)
            printf("probe %-10s   last error: %s\n", seq, last);
    }
    return a;
}

/* One sequence; returns 0 when every call ended in ncclSuccess. */
static int sequence(const char *seq, int blocking, int poll, int gin) {
    const size_t bytes = (size_t)64 << 20;
    int bad = 0, ok;
    double t0;
    ncclComm_t comm = NULL;
    void *mem = NULL;
    ncclWindow_t win = NULL;
    ncclDevComm dc;
    int have_dc = 0;
    cudaStream_t stream = NULL;
    ncclResult_t r;
    memset(&dc, 0, sizeof dc);

    ncclUniqueId id;
    t0 = now_s();
    r = ncclGetUniqueId(&id);
    said(seq, "ncclGetUniqueId", r, NULL, t0);
    if (r != ncclSuccess)
        return 1;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = blocking;
    cfg.commName = "nccl_probe";
    t0 = now_s();
    r = ncclCommInitRankConfig(&comm, 1, id, 0, &cfg);
    said(seq, blocking ? "ncclCommInitRankConfig (blocking)" : "ncclCommInitRankConfig (non-blocking)", r, comm,
         t0);
    if (comm && !blocking)
        r = settle(seq, "ncclCommInitRankConfig", comm);
    if (r != ncclSuccess || !comm) {
        if (comm)
            ncclCommAbort(comm);
        return 1;
    }

    t0 = now_s();
    r = ncclMemAlloc(&mem, bytes);
    said(seq, "ncclMemAlloc (64 MiB)", r, comm, t0);
    if (r != ncclSuccess || !mem) {
        bad = 1;
        goto out;
    }
    t0 = now_s();
    r = ncclCommWindowRegister(comm, mem, bytes, &win, NCCL_WIN_COLL_SYMMETRIC);
    said(seq, "ncclCommWindowRegister (symmetric)", r, comm, t0);
    if (!blocking && poll)
        r = settle(seq, "ncclCommWindowRegister", comm);
    if (r != ncclSuccess) {
        bad = 1;
        goto out;
    }

    {
        ncclDevCommRequirements_t reqs;
        memset(&reqs, 0, sizeof reqs);
        reqs.barrierCount = 2;
        reqs.lsaBarrierCount = 2;
        reqs.ginForceEnable = gin != 0;
        reqs.ginContextCount = 1;
        t0 = now_s();
        r = ncclDevCommCreate(comm, &reqs, &dc);
        said(seq, gin ? "ncclDevCommCreate (2 barriers, GIN forced)" : "ncclDevCommCreate (2 barriers)", r, comm,
             t0);
        if (!blocking && r == ncclSuccess)
            r = settle(seq, "ncclDevCommCreate", comm);
        if (!blocking && !poll) {
            /* the window's registration may still run: wait for it before anything else */
            ncclResult_t w = settle(seq, "(the window, late)", comm);
            printf("probe %-10s   without the poll ncclDevCommCreate %s\n", seq,
                   r == ncclInvalidArgument ? "was refused (invalid argument): the poll is needed" : "was accepted");
            have_dc = r == ncclSuccess;
            if (w != ncclSuccess) {
                bad = 1;
                goto out;
            }
        } else if (r != ncclSuccess) {
            bad = 1;
            goto out;
        } else {
            have_dc = 1;
            printf("probe %-10s   devcomm: rank %d of %d, LSA rank %d of %d, %d GIN contexts\n", seq, dc.rank,
                   dc.nRanks, dc.lsaRank, dc.lsaSize, dc.ginContextCount);
        }
    }

    if (win) {
        ncclWindow_vidmem w;
        cudaError_t e = cudaMemcpy(&w, (const void *)win, sizeof w, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) {
            printf("probe %-10s   reading the window: %s\n", seq, cudaGetErrorString(e));
            bad = 1;
        } else {
            printf("probe %-10s   window: user %p, flat base %p, LSA rank %d, stride %u x 4 GiB\n", seq, mem,
                   w.lsaFlatBase, (int)w.lsaRank, (unsigned)w.stride4G);
        }
    }

    /* a one-int all-reduce over the window's memory */
    ok = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess;
    if (ok) {
        int v = 7, got = 0;
        ok = cudaMemcpy(mem, &v, sizeof v, cudaMemcpyHostToDevice) == cudaSuccess;
        t0 = now_s();
        r = ncclAllReduce(mem, (char *)mem + 256, 1, ncclInt32, ncclSum, comm, stream);
        said(seq, "ncclAllReduce (1 int)", r, comm, t0);
        if (!blocking && (r == ncclSuccess || r == ncclInProgress))
            r = settle(seq, "ncclAllReduce", comm);
        ok = ok && r == ncclSuccess && cudaStreamSynchronize(stream) == cudaSuccess &&
             cudaMemcpy(&got, (char *)mem + 256, sizeof got, cudaMemcpyDeviceToHost) == cudaSuccess && got == v;
        printf("probe %-10s   all-reduce result %d (want %d)\n", seq, got, v);
    }
    bad |= !ok;

out:
    if (have_dc) {
        t0 = now_s();
        r = ncclDevCommDestroy(comm, &dc);
        said(seq, "ncclDevCommDestroy", r, comm, t0);
        bad |= r != ncclSuccess;
    }
    if (win) {
        t0 = now_s();
        r = ncclCommWindowDeregister(comm, win);
        said(seq, "ncclCommWindowDeregister", r, comm, t0);
        bad |= r != ncclSuccess;
    }
    if (mem) {
        r = ncclMemFree(mem);
        bad |= r != ncclSuccess;
    }
    if (stream)
        cudaStreamDestroy(stream);
    t0 = now_s();
    r = ncclCommFinalize(comm);
    said(seq, "ncclCommFinalize", r, comm, t0);
    if (!blocking && (r == ncclSuccess || r == ncclInProgress))
        r = settle(seq, "ncclCommFinalize", comm);
    if (r == ncclSuccess)
        ncclCommDestroy(comm);
    else
        ncclCommAbort(comm);
    bad |= r != ncclSuccess;
    printf("probe %-10s %s\n", seq, bad ? "FAIL" : "PASS");
    return bad;
}

int main(int argc, char **argv) {
    int gin = argc > 1 && strcmp(argv[1], "--gin") == 0;
    if (argc > 1 && !gin) {
        fprintf(stderr, "usage: nccl_probe [--gin]\n");
        return 2;
    }
    int n = 0, version = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("SKIP: nccl_probe: no CUDA GPU\n");
        return 77;
    }
    if (cudaSetDevice(0) != cudaSuccess || cudaFree(NULL) != cudaSuccess) {
        printf("nccl_probe: FAIL: cannot create a CUDA context on GPU 0\n");
        return 1;
    }
    ncclGetVersion(&version);
    printf("nccl_probe: NCCL version code %d (headers %d), %d GPU(s)\n", version, NCCL_VERSION_CODE, n);
    int bad = sequence("blocking", 1, 1, gin);
    bad |= sequence("nb-polled", 0, 1, gin);
    (void)sequence("nb-nopoll", 0, 0, gin); /* diagnostic: its verdict is not the probe's */
    printf("nccl_probe: %s\n", bad ? "FAIL" : "PASS");
    return bad ? 1 : 0;
}
