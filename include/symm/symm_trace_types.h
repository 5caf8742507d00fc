/*
 * symm_trace_types.h - the device trace's record format, shared by the
 * device code that writes it (include/symm/device/trace*.h), the host code
 * that reads it (src/trace) and anyone who decodes a buffer themselves.
 *
 * Plain fixed-width C, like symm_types.h: host C, CUDA C and clang for
 * nvptx64 see the same layout. docs/trace.md says what each event means.
 */
#ifndef SYMM_TRACE_TYPES_H
#define SYMM_TRACE_TYPES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What an event records (symm_trace_event_t.kind). */
enum symm_trace_kind {
    SYMM_TRACE_PUT          = 1,  /* put / put_nbi: a = bytes, addr = dest (caller's view); with
                                     SYMM_TRACE_F_PKT a packet put: addr = the packet buffer, b = flag */
    SYMM_TRACE_GET          = 2,  /* get / get_nbi: a = bytes, addr = dest (local) */
    SYMM_TRACE_PUT_SIGNAL   = 3,  /* put_signal*: a = bytes, addr = signal word, b = signal value */
    SYMM_TRACE_SIGNAL       = 4,  /* signal_op: addr = signal word, a = value */
    SYMM_TRACE_WAIT         = 5,  /* a spin-wait: addr = word, a = expected, b = value seen */
    SYMM_TRACE_BARRIER      = 6,  /* barrier* (flags: SYMM_TRACE_F_SYNC for sync_block) */
    SYMM_TRACE_FENCE        = 7,
    SYMM_TRACE_QUIET        = 8,
    SYMM_TRACE_COLL         = 9,  /* a collective's share of one block: a = bytes per PE, b = enum
                                     symm_trace_coll, flags: SYMM_TRACE_F_STREAM and the algorithm
                                     (enum symm_coll_algo) in bits 4-6 */
    SYMM_TRACE_REGION_BEGIN = 10, /* symm_trace_begin: a = name id */
    SYMM_TRACE_REGION_END   = 11, /* symm_trace_end: a = name id */
    SYMM_TRACE_KIND_COUNT
};

/* Who made a call together (symm_trace_event_t.group): one event per call. */
enum symm_trace_group {
    SYMM_TRACE_GROUP_THREAD = 0, /* one thread (lanes of a warp making the same call are merged) */
    SYMM_TRACE_GROUP_WARP   = 1, /* a warp-scope call, recorded by lane 0 */
    SYMM_TRACE_GROUP_BLOCK  = 2  /* a block- or grid-scope call, recorded by thread 0 of the block */
};

/* What a wait was for (the high bits of a WAIT's flags; the low 3 bits are
 * the comparison, enum symm_cmp). */
enum symm_trace_wait_for {
    SYMM_TRACE_WAIT_WORD    = 0, /* symm_wait_until_<T> */
    SYMM_TRACE_WAIT_SIGNAL  = 1, /* symm_signal_wait_until */
    SYMM_TRACE_WAIT_BARRIER = 2, /* a device barrier's wait for one PE */
    SYMM_TRACE_WAIT_COLL    = 3, /* a collective's handshake flag */
    SYMM_TRACE_WAIT_MOE     = 4, /* an MoE dispatch/combine count or flag */
    SYMM_TRACE_WAIT_PKT     = 5, /* symm_pkt_wait*: addr = the packet buffer, a = b = the flag */
    SYMM_TRACE_WAIT_COLL_PKT = 6 /* a packet collective's packets from one PE (addr = its region) */
};
#define SYMM_TRACE_WAIT_FLAGS(cmp, what) ((uint8_t)(((unsigned)(cmp) & 7u) | ((unsigned)(what) << 3)))
#define SYMM_TRACE_WAIT_CMP(flags) ((int)((flags) & 7u))
#define SYMM_TRACE_WAIT_WHAT(flags) ((int)((flags) >> 3))

/* Flags of the other kinds. */
#define SYMM_TRACE_F_NBI  0x01u /* put/get/put_signal: the _nbi form */
#define SYMM_TRACE_F_ADD  0x02u /* put_signal / signal: SYMM_SIGNAL_ADD (else SET) */
#define SYMM_TRACE_F_SYNC 0x04u /* barrier: symm_sync_block (no quiet) */
#define SYMM_TRACE_F_STREAM 0x08u /* coll: a stream collective's kernel (else a device call) */
#define SYMM_TRACE_F_PKT  0x10u /* put: symm_put_pkt* (data and flag in the same stores) */

/* The collective of a COLL event (its b word). */
enum symm_trace_coll {
    SYMM_TRACE_COLL_ALL_REDUCE       = 1,
    SYMM_TRACE_COLL_REDUCE_SCATTER   = 2,
    SYMM_TRACE_COLL_ALL_GATHER       = 3,
    SYMM_TRACE_COLL_ALL_TO_ALL       = 4,
    SYMM_TRACE_COLL_ALL_TO_ALLV      = 5,
    SYMM_TRACE_COLL_BROADCAST        = 6,
    SYMM_TRACE_COLL_BARRIER          = 7,  /* symm_coll_barrier_block / _grid */
    SYMM_TRACE_COLL_MOE_DISPATCH     = 8,  /* MoE low-latency dispatch, send half */
    SYMM_TRACE_COLL_MOE_DISPATCH_RECV = 9,
    SYMM_TRACE_COLL_MOE_COMBINE      = 10, /* MoE low-latency combine, send half */
    SYMM_TRACE_COLL_MOE_COMBINE_RECV = 11,
    SYMM_TRACE_COLL_MOE_HT_DISPATCH  = 12, /* MoE high-throughput dispatch, send half */
    SYMM_TRACE_COLL_MOE_HT_DISPATCH_RECV = 13,
    SYMM_TRACE_COLL_MOE_HT_COMBINE   = 14, /* MoE high-throughput combine, send half */
    SYMM_TRACE_COLL_MOE_HT_COMBINE_RECV = 15,
    SYMM_TRACE_COLL_COUNT
};

/*
 * One event: 64 bytes, written whole by the thread that records it after
 * the call returned (t0 is when the call began). Times are this GPU's
 * %globaltimer in nanoseconds; the host aligns the PEs' clocks at dump.
 * `peer` is a PE index of the call's team (team_n PEs, this PE team_me):
 * the world team's indices are world PEs. -1: no peer or not known.
 */
typedef struct symm_trace_event {
    uint64_t t0;
    uint64_t t1;
    uint64_t addr;
    uint64_t a;
    uint64_t b;
    uint32_t block;   /* linear index of the block in its grid */
    uint32_t nblocks; /* blocks in the grid */
    int16_t  peer;
    uint16_t thread;  /* linear index of the recording thread in its block */
    uint16_t sm;      /* %smid of the block */
    uint8_t  kind;    /* enum symm_trace_kind */
    uint8_t  flags;
    uint8_t  group;   /* enum symm_trace_group */
    uint8_t  lanes;   /* lanes of the warp that made this call together (merged) */
    uint16_t team_n;
    uint16_t team_me;
    uint16_t reserved;
} symm_trace_event_t;

/* Sub-buffers: events go to sub-buffer (%smid mod nsub), each with its own
 * counter, so that blocks on different SMs do not contend for one atomic.
 * SYMM_TRACE_MAX_SUB bounds nsub (a power of two); counters sit
 * SYMM_TRACE_HEAD_STRIDE bytes apart (one L2 line each). */
#define SYMM_TRACE_MAX_SUB 256u
#define SYMM_TRACE_HEAD_STRIDE 128u

/*
 * The per-PE trace state in device memory (symm_ctx_t.trace points at it).
 * Sub-buffer s holds events[s * sub_cap ...]; its counter heads[s] counts
 * every claim, so the events it dropped are heads[s] - sub_cap when that is
 * positive: a full buffer drops (and counts), it never blocks or wraps.
 * sub_cap 0: recording is stopped (every event is dropped).
 */
typedef struct symm_trace_ring {
    uint64_t events;   /* device address of nsub * sub_cap events */
    uint32_t nsub;     /* a power of two, <= SYMM_TRACE_MAX_SUB */
    uint32_t sub_cap;
    uint32_t magic;    /* SYMM_TRACE_MAGIC */
    uint32_t version;  /* SYMM_TRACE_VERSION */
    uint64_t reserved[5];
    /* then SYMM_TRACE_MAX_SUB counters, SYMM_TRACE_HEAD_STRIDE bytes apart */
} symm_trace_ring_t;

#define SYMM_TRACE_MAGIC   0x72747973u /* "sytr" */
#define SYMM_TRACE_VERSION 1u
#define SYMM_TRACE_RING_BYTES (sizeof(symm_trace_ring_t) + (size_t)SYMM_TRACE_MAX_SUB * SYMM_TRACE_HEAD_STRIDE)

#ifdef __cplusplus
}
#endif

#endif /* SYMM_TRACE_TYPES_H */
