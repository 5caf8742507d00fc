/*
 * symm_types.h - types shared by the host API, the device API and the bitcode.
 *
 * This header is included by host C, CUDA C and by clang compiling plain C for
 * the nvptx64 target, so it holds only fixed-width types and constants: the
 * layout of symm_ctx_t must be the same in all three.
 */
#ifndef SYMM_TYPES_H
#define SYMM_TYPES_H

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Status                                                                    */
/* ------------------------------------------------------------------------ */

/* 0 is success, every error is negative. symm_strerror() names each one and
 * symm_last_error() gives the detailed message of the last failure. */
typedef enum symm_status {
    SYMM_SUCCESS                 = 0,
    SYMM_ERR_INVALID_ARG         = -1,  /* a NULL, negative or out-of-range argument */
    SYMM_ERR_NOT_INITIALIZED     = -2,  /* called before symm_init or after symm_finalize */
    SYMM_ERR_ALREADY_INITIALIZED = -3,  /* symm_init called twice without symm_finalize */
    SYMM_ERR_NO_MEMORY           = -4,  /* host memory allocation failed */
    SYMM_ERR_HEAP_EXHAUSTED      = -5,  /* the symmetric heap (or device memory) is full */
    SYMM_ERR_MISMATCH            = -6,  /* a collective call got different arguments on different PEs */
    SYMM_ERR_INVALID_PE          = -7,  /* PE index outside [0, n_pes) */
    SYMM_ERR_NOT_SYMMETRIC       = -8,  /* pointer does not lie in the symmetric heap */
    SYMM_ERR_INVALID_POINTER     = -9,  /* pointer in the heap but not a live allocation (e.g. double free) */
    SYMM_ERR_BOOTSTRAP           = -10, /* bootstrap network failure (connect, protocol) */
    SYMM_ERR_PEER_DIED           = -11, /* another PE exited or stopped answering */
    SYMM_ERR_TIMEOUT             = -12, /* a wait passed its deadline */
    SYMM_ERR_CUDA                = -13, /* a CUDA call failed; the message names it */
    SYMM_ERR_NO_DEVICE           = -14, /* no usable GPU for this PE */
    SYMM_ERR_NO_PEER_ACCESS      = -15, /* two PEs of the node cannot load/store each other */
    SYMM_ERR_UNSUPPORTED         = -16, /* valid request this build/backend/GPU cannot do */
    SYMM_ERR_ENV                 = -17, /* an environment variable has a bad value */
    SYMM_ERR_INTERNAL            = -18  /* a bug in symm */
} symm_status_t;

/* ------------------------------------------------------------------------ */
/* Device-call parameters (passed as int so the bitcode ABI is plain)         */
/* ------------------------------------------------------------------------ */

/* Comparison for symm_signal_wait_until / symm_wait_until_*: wait until
 * (*ivar CMP value) holds. */
enum symm_cmp {
    SYMM_CMP_EQ = 0,
    SYMM_CMP_NE = 1,
    SYMM_CMP_GT = 2,
    SYMM_CMP_GE = 3,
    SYMM_CMP_LT = 4,
    SYMM_CMP_LE = 5
};

/* How put_signal / signal_op update the remote signal word. */
enum symm_signal_op {
    SYMM_SIGNAL_SET = 0, /* *sig = value */
    SYMM_SIGNAL_ADD = 1  /* *sig += value */
};

/* Memory-model scope of a remote load/store (PTX .cta/.gpu/.sys). Peers over
 * NVLink need SYMM_SCOPE_SYS for the ordering to reach them. */
enum symm_scope {
    SYMM_SCOPE_CTA = 0,
    SYMM_SCOPE_GPU = 1,
    SYMM_SCOPE_SYS = 2
};

/* Ordering of a remote load/store (PTX .relaxed/.acquire/.release/.volatile).
 * Loads take RELAXED, ACQUIRE or VOLATILE; stores RELAXED, RELEASE or VOLATILE.
 * WEAK is a plain (non-atomic, cacheable) access. */
enum symm_sem {
    SYMM_SEM_WEAK     = 0,
    SYMM_SEM_RELAXED  = 1,
    SYMM_SEM_ACQUIRE  = 2,
    SYMM_SEM_RELEASE  = 3,
    SYMM_SEM_VOLATILE = 4
};

/* Which engine a context's device calls go to. The native backend is load/store
 * over NVLink; the others are scale-out engines (docs/design.md decision 8). */
enum symm_backend_kind {
    SYMM_BACKEND_NATIVE  = 0,
    SYMM_BACKEND_HOST    = 1, /* CPU shared memory: CI and tests without a GPU */
    SYMM_BACKEND_NVSHMEM = 2,
    SYMM_BACKEND_NCCL    = 3
};

/* What a backend does (symm_backend_caps; docs/backends.md). "Other peers"
 * are the PEs a kernel cannot reach by load/store (other nodes). */
enum symm_backend_cap {
    SYMM_CAP_PEER_LDST     = 0x01u, /* peers reached by load/store (NVLink, the node) */
    SYMM_CAP_REMOTE_PUT    = 0x02u, /* put, put_nbi, p to other peers */
    SYMM_CAP_REMOTE_GET    = 0x04u, /* get, g, ld from other peers */
    SYMM_CAP_REMOTE_SIGNAL = 0x08u, /* put_signal, signal_op to other peers */
    SYMM_CAP_REMOTE_AMO    = 0x10u, /* atomics on other peers */
    SYMM_CAP_REMOTE_QUIET  = 0x20u, /* quiet makes puts to other peers visible */
    SYMM_CAP_COLL          = 0x40u, /* stream collectives */
    SYMM_CAP_MULTI_NODE    = 0x80u  /* PEs on several nodes */
};

/* ------------------------------------------------------------------------ */
/* Device context                                                             */
/* ------------------------------------------------------------------------ */

#define SYMM_CTX_MAGIC   0x73796d6du /* "symm" */
#define SYMM_CTX_VERSION 2u

/* Words of a team's device-barrier state (in the symmetric heap): word 0 is
 * this PE's epoch (only this PE writes it), word 1 + p is the last epoch PE p
 * announced to this PE. */
#define SYMM_BARRIER_WORDS(n_pes) (1u + (uint32_t)(n_pes))

/*
 * symm_ctx_t - everything a device call needs, for one team.
 *
 * The host fills it (symm_team_ctx) and device functions read it through a
 * pointer; CUDA C users may copy it by value into kernel parameters. There is
 * no other device state: no __constant__ symbol, nothing a module loader must
 * initialise. Peer addresses are arithmetic (docs/design.md decision 2):
 *     peer(p, pe) = p + (pe - my_pe) * stride
 * for team PEs in [ldst_first, ldst_first + ldst_count); the other PEs are
 * reached through the backend's device calls (docs/backends.md). Fields are
 * fixed-width so the layout is identical for nvcc, clang-nvptx and the host
 * compiler; reserved words keep it stable as fields are added. A field taken
 * from `reserved` whose 0 means "as before" (wait_report, trace) keeps
 * SYMM_CTX_VERSION: older code never reads it and older hosts leave it 0;
 * the version changes when a field's meaning or the layout does.
 */
typedef struct symm_ctx {
    uint32_t magic;        /* SYMM_CTX_MAGIC */
    uint32_t version;      /* SYMM_CTX_VERSION */
    int32_t  my_pe;        /* this PE's index in the team */
    int32_t  n_pes;        /* number of PEs in the team */
    int32_t  world_pe;     /* this PE's index in the world team */
    uint32_t backend;      /* enum symm_backend_kind */
    uint64_t heap_base;    /* this PE's heap base, in this process */
    uint64_t heap_size;    /* bytes currently mapped at heap_base (grows) */
    int64_t  stride;       /* bytes from team PE i's heap to team PE i+1's */
    uint64_t timeout_ns;   /* deadline for every device spin-wait; 0 = none */
    uint64_t abort_flag;   /* device address of a host-mapped uint32: non-zero once
                              a peer died or the run was aborted; waits poll it */
    uint64_t barrier;      /* device address of this team's barrier words */
    uint64_t scratch;      /* internal symmetric scratch for collectives (heap address) */
    uint64_t scratch_size;
    uint64_t backend_state;/* device address of backend-specific state (scale-out) */
    int32_t  ldst_first;   /* the team PEs reached by load/store at the arithmetic */
    int32_t  ldst_count;   /*   above: [ldst_first, ldst_first + ldst_count) */
    uint64_t wait_report;  /* device address of this PE's uint32 count of waits that gave
                              up (deadline or abort): the first prints, with the count */
    uint64_t trace;        /* device address of this PE's symm_trace_ring_t while a device
                              trace records (symm_trace_start), else 0: code built with
                              SYMM_TRACE then skips recording (docs/trace.md) */
    uint64_t reserved[3];
} symm_ctx_t;

#ifdef __cplusplus
}
#endif

#endif /* SYMM_TYPES_H */
