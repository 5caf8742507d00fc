/*
 * coll_launch.h - what the host side of the collectives (coll_calls.c, C11)
 * asks the kernel side (coll_k_*.cu) to launch. Plain C, no CUDA headers.
 */
#ifndef SYMM_COLL_LAUNCH_H
#define SYMM_COLL_LAUNCH_H

#include <stdint.h>
#include "symm/symm.h"

/* Threads per block of every stream-collective kernel (the host sizes the
 * grids with it, the kernels' launch bounds use it). */
#define SYMM__COLL_THREADS 512

#ifdef __cplusplus
extern "C" {
#endif

/* Kernels (each runs one algorithm of coll_impl.h, block b = slot b). */
typedef enum symm__ck {
    SYMM__CK_RED_PACKET = 0, /* all-reduce (piece 0) / reduce-scatter (piece = nbytes) */
    SYMM__CK_AR_PACKET2,     /* all-reduce, two shots of packets */
    SYMM__CK_AR_ONESHOT,
    SYMM__CK_AR_TWOSHOT_ST,  /* two-shot all-reduce, stores only */
    SYMM__CK_AR_TWOSHOT,
    SYMM__CK_AR_MULTIMEM,
    SYMM__CK_RS_DIRECT,
    SYMM__CK_RS_ONESHOT,     /* reduce-scatter: pieces into the owners' regions, one handshake */
    SYMM__CK_MOVE_PACKET,    /* all-gather, all-to-all, broadcast */
    SYMM__CK_BCAST_PACKET2,  /* broadcast, two hops */
    SYMM__CK_MOVE_DIRECT,
    SYMM__CK_A2AV_DIRECT,
    SYMM__CK_AR_PUSH,        /* coll_k_push.cu */
    SYMM__CK_RS_PUSH,
    SYMM__CK_COUNT
} symm__ck_t;

typedef struct symm__coll_launch {
    symm__ck_t kernel;
    int nblocks, nthreads;
    symm_ctx_t ctx;
    symm__coll_ws_t ws;
    void *dst;
    const void *src;
    uint64_t nbytes;     /* bytes per PE (per piece) */
    uint64_t piece;      /* distance between source pieces */
    uint64_t out;        /* move_packet: out_stride; move_direct: out_off */
    uint64_t chain;      /* move_direct broadcast: bytes per chunk of the chain; 0: the scatter + forward */
    int kind, op, root;
    uint32_t esz;
    uint64_t mc_dst, mc_src;   /* multimem: multicast addresses */
    const uint64_t *a2av;      /* all_to_allv: 4 * n_pes host words (scount, sdispl, rcount, rdispl) */
    uint64_t push;             /* push pipeline: heap address of the team's push area */
    uint64_t push_buf;         /* push pipeline: bytes per buffer */
} symm__coll_launch_t;

/* Enqueue one kernel. Errors: SYMM_ERR_CUDA. */
symm_status_t symm__coll_launch(const symm__coll_launch_t *l, symm_stream_t stream);

/* Local async copies on `stream` (cudaMemcpyAsync / cudaMemcpy2DAsync,
 * device to device). Errors: SYMM_ERR_CUDA. */
symm_status_t symm__coll_copy(void *dst, const void *src, size_t nbytes, symm_stream_t stream);
symm_status_t symm__coll_copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                size_t height, symm_stream_t stream);

/* Synchronous host -> device copy of a few words (testing hooks).
 * Errors: SYMM_ERR_CUDA. */
symm_status_t symm__coll_write(uint64_t dst, const void *src, size_t nbytes);
symm_status_t symm__coll_zero(uint64_t dst, size_t nbytes);

/* Non-zero when the GPU can access [p, p + nbytes) (device or managed
 * memory, or host memory mapped for it). */
int symm__coll_device_accessible(const void *p);

/* Non-zero while `stream` (or, for the legacy stream, the device) is being
 * captured into a graph; -1 when the query failed. */
int symm__coll_capturing(symm_stream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* SYMM_COLL_LAUNCH_H */
