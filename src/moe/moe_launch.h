/*
 * moe_launch.h - what the host side of the MoE exchange (moe_host.c, C11)
 * asks the kernel side (moe_k_*.cu) to launch, and the CUDA calls it needs.
 * Plain C, no CUDA headers.
 */
#ifndef SYMM_MOE_LAUNCH_H
#define SYMM_MOE_LAUNCH_H

#include <stdint.h>
#include "symm/symm.h"
#include "symm/symm_moe.h" /* SYMM_MOE_PACKET_BYTES */

#ifdef __cplusplus
extern "C" {
#endif

/* Threads per block of every MoE kernel. */
#define SYMM__MOE_THREADS 512
#define SYMM__MOE_WARPS (SYMM__MOE_THREADS / 32)

/* Most PEs of a handle's team (masks of 64 bits). */
#define SYMM__MOE_MAX_PES 64

/* The mode bits of a low-latency source (in its counts and headers): its dispatch rows are packets;
 * its tokens' combine rows come back as packets. */
#define SYMM__MOE_LL_MODE_DPKT 1u
#define SYMM__MOE_LL_MODE_CPKT 2u

/* Fewest routes (tokens x top-k) of a low-latency call that takes the big kernels (lists posted
 * block by block, the big combine), and of a handle's largest call for SYMM_MOE_LL_COMBINE=partial. */
#define SYMM__MOE_LL_POST_ROUTES 256

/* Top-k indices a low-latency dispatch stages in shared memory at a time. */
#define SYMM__MOE_IDX_CHUNK 2048

/* The small low-latency dispatch (moe_k_ll_dispatch_small.cu): a handle takes it when every call's rows go as
 * packets and a PE's routes fit one block (cap x top-k, one thread each) and the routes a PE may
 * receive fit the receivers' shared memory (n x cap x min(top-k, local experts)). */
#define SYMM__MOE_SMALL_SEND SYMM__MOE_THREADS
#define SYMM__MOE_SMALL_RECV 1024
/* Its receive half's decode form: the most routes a thread stores its vector for, and the most
 * (source, local expert) counts it keeps. */
#define SYMM__MOE_SMALL_FAST_ROUNDS 4
#define SYMM__MOE_SMALL_SHIST (4 * SYMM__MOE_THREADS)

/* Tokens per block of a high-throughput dispatch at least (its grid is at
 * most max_num_tokens / this, rounded up; ht_bcnt is sized for that many). */
#define SYMM__MOE_HT_BLOCK_TOKENS 32

/* Rows of a high-throughput combine covered by one completion flag. */
#define SYMM__MOE_HT_CHUNK 32

/* How a high-throughput combine with both halves in one kernel uses its
 * blocks (SYMM_MOE_HT_COMBINE): half the blocks send and half reduce; every
 * block sends its share, then reduces (by batches of tokens, or each warp by
 * tokens of its own); or every block's first warps send while its other
 * warps reduce. */
enum symm__moe_ht_sched {
    SYMM__MOE_HT_SPLIT = 0,
    SYMM__MOE_HT_SERIAL = 1,
    SYMM__MOE_HT_OVERLAP = 2,
    SYMM__MOE_HT_SERIAL_WARPS = 3,
    SYMM__MOE_HT_OVERLAP_ASYNC = 4, /* overlap, the reducing warps' loads through shared memory (cp.async) */
    SYMM__MOE_HT_OVERLAP_RING = 5,  /* overlap, the sending warps' loads through shared memory (cp.async) */
    SYMM__MOE_HT_PULL = 6           /* each PE loads its tokens' rows from the PEs that hold them (every PE alike) */
};

/* Pull combine: 16-byte vectors of a stage (a slice of one row from one
 * source, copied in one bulk copy), and the most stages a reducing warp may
 * keep (pull:S). */
#define SYMM__MOE_HT_PULL_SLICE 128
#define SYMM__MOE_HT_PULL_MAX_STAGES 6

/* Kernels: one per call (or per half when flags split it), and the layout. */
typedef enum symm__mk {
    SYMM__MK_LL_DISPATCH = 0,
    SYMM__MK_LL_COMBINE,
    SYMM__MK_HT_LAYOUT,   /* symm_moe_ht_layout: the user's layout outputs */
    SYMM__MK_HT_DISPATCH,
    SYMM__MK_HT_COMBINE,
    SYMM__MK_COUNT
} symm__mk_t;

/* SYMM_MOE_LL_PROBE: the low-latency kernels reduced (results wrong) or instrumented for timing. */
enum symm__moe_probe {
    SYMM__MOE_PROBE_NONE = 0,
    SYMM__MOE_PROBE_EMPTY = 1, /* start, open or close the epoch, end */
    SYMM__MOE_PROBE_HOP = 2,   /* one flag to and from every PE, by block 0 */
    SYMM__MOE_PROBE_STAMPS = 3, /* the real exchange, each block's stage times printed for dispatch 30 */
    SYMM__MOE_PROBE_TWICE = 4   /* the dispatch kernel does its call twice (epochs e and e + 1) */
};

/* Errors the device records (symm__moe_err_t.code). */
enum symm__moe_err_code {
    SYMM__MOE_ERR_NONE = 0,
    SYMM__MOE_ERR_EXPERT_RANGE = 1, /* a: token, b: slot k, c: value */
    SYMM__MOE_ERR_EXPERT_DUP = 2,   /* a: token, b: slot k, c: value */
    SYMM__MOE_ERR_BOUND = 3,        /* a: *bound_m, b: num_tokens */
    SYMM__MOE_ERR_CAPACITY = 4,     /* a: rows needed, b: capacity */
    SYMM__MOE_ERR_Y_ROWS = 5        /* a: rows received, b: rows of y */
};

/* The first error the device saw; host-mapped, written once per report
 * (claim, then the fields, then code), cleared by the host. */
typedef struct symm__moe_err {
    uint32_t claim;
    uint32_t code;
    uint32_t call;  /* which kernel (symm__mk_t) */
    uint32_t pad;
    int64_t a, b, c;
} symm__moe_err_t;

/*
 * Offsets (bytes from the handle's symmetric base) of its regions; 0 for the
 * regions a mode does not use. Every PE has the same layout. "[2]" regions
 * alternate by the parity of the dispatch's epoch (moe_ll.cuh and
 * moe_k_ht.cu say why two suffice).
 *   state       symm__moe_state_t: the epoch (dispatches so far), done counters, error lock
 * Low latency (pplx layout):
 *   ll_cnt      uint64 [2][n][L]: epoch << 32 | source's mode << 30 | routes source PE s
 *               sends my local expert l
 *   ll_list     uint64 [2][n][L][cap]: those routes, each tagged: (uint32)epoch << 32 |
 *               (token / dp) << 8 | slot k
 *   ll_dbuf     [2][n][cap][tok_stride]: token t / dp of source s: x, scales (16-byte
 *               padded), then its arrival flag (uint64: epoch), 16-byte padded
 *   ll_pbuf     [2][n][pcap][2 * (tok_stride - 16)]: the same rows as packets (16 bytes
 *               per 8 bytes of x and scales, each with the epoch's tag)
 *   ll_mode     uint32 [n]: source s's mode bits of the current epoch (local)
 *   ll_rcnt     uint32 [L]: rows each local expert received (local)
 *   ll_route    uint64 [L][rows]: source PE | slot k << 16 | token << 32 (local)
 *   ll_cflag    uint64 [M][k]: epoch of the expert row in ll_cbuf[t][k]
 *   ll_cbuf     [M][k][hidden * 4 bytes]: expert outputs for my tokens
 *   ll_pcbuf    [pmt][k][hidden * 8 bytes]: the same as packets (tokens < pmt)
 *   ll_hdr      [2][n][1 + cap * min(k, L)] packets (small dispatch only): source s's header,
 *               packet 0 its routes here and its mode, then each route in token
 *               order (data: local expert | slot k << 24, then token / dp)
 *   ll_flat     uint64 [1 + n * cap * min(k, L)][2] (small dispatch only): the routes the last
 *               dispatch received, [0][0] their number, then each one's ll_route word and its
 *               expert << 32 | row (local)
 *   ll_cw       uint64 [n][cap][k]: source s's weight of its token slot tl's route k, for the
 *               partial combine: (uint32)epoch's tag << 32 | the float32's bits
 * High throughput (DeepEP's normal layout):
 *   ht_mat      uint64 [2][n][n]: (epoch << 32 | tokens) PE s sends PE r
 *   ht_emat     uint64 [2][n][L]: (epoch << 32 | tokens) PE s sends my local expert l
 *   ht_rcv      uint64 [n]: rows PE s has delivered here over all dispatches (its blocks add)
 *   ht_exp      uint64 [n]: rows of PE s accounted for by completed dispatches (local)
 *   ht_roff     uint32 [2][n]: first row and rows of source s in this dispatch (local)
 *   ht_mask     uint64 [M]: bit r: token t goes to PE r (local)
 *   ht_pos      uint32 [M][n]: position of token t among my tokens going to r (local)
 *   ht_cflag    uint64 [n][M / HT_CHUNK rounded up]: epoch of PE r's combine rows of chunk c
 *   ht_dst      uint64 [2][n][4]: where PE r takes this dispatch's rows: its x and scale
 *               buffers as byte offsets from its handle base, then epoch << 32 | 1
 *   ht_rx .. ht_rpe: the receive buffers (symm_moe_ht_recv_t)
 *   ht_cbuf     [n][M][hidden * 2 bytes]: rows PE r returns, at my tokens' positions
 *   ht_bcnt     uint32 [M / 32 rounded up][n + experts]: dispatch block b's tokens per PE
 *               and per expert (local; warps form)
 *   ht_bflag    uint64 [M / 32 rounded up]: epoch of block b's counts there (local)
 *   ht_phdr     uint64 [n][4] (pull combine): where PE r's y holds my tokens' rows, as the
 *               byte offset from its handle base of my first row, the row stride, the rows
 *               there, then epoch << 32 | 1 (read them there) or 2 (they come to ht_cbuf)
 *   ht_pdone    uint64 [n] (pull combine): epoch of PE s's last combine that is done
 *               reading my y
 *   ht_cwbuf    float32 [n][M][cols <= k]: the side channel's values PE r returns with
 *               its rows of ht_cbuf (symm_moe_ht_combine_weights), behind the same flags
 */
typedef struct symm__moe_layout {
    uint64_t state, ll_cnt, ll_list, ll_dbuf, ll_pbuf, ll_mode, ll_rcnt, ll_route, ll_cflag, ll_cbuf, ll_pcbuf, ll_hdr, ll_flat,
        ll_cw;
    uint64_t ht_mat, ht_emat, ht_rcv, ht_exp, ht_roff, ht_mask, ht_pos, ht_cflag, ht_dst;
    uint64_t ht_rx, ht_rscale, ht_ridx, ht_rw, ht_rsrc, ht_rnum, ht_rpe, ht_cbuf, ht_bcnt, ht_bflag, ht_phdr, ht_pdone, ht_cwbuf;
    uint64_t total;
} symm__moe_layout_t;

/* The state words at `state`. */
typedef struct symm__moe_state {
    uint64_t epoch;
    uint32_t done[SYMM__MK_COUNT]; /* blocks finished, per kernel (the last resets it) */
    uint32_t err_lock;             /* serialises writers of the error record */
    uint32_t max_grid;             /* most blocks a kernel of the handle ran with (symm_moe_launched_blocks) */
} symm__moe_state_t;

/*
 * The small low-latency kernels' plan of one call (symm__moe_ll_plan: the host works it out as
 * it launches them, from the handle, the call's tokens and the grid): what their prologues would
 * otherwise compute in every block, a chain of divisions before the first loads. A division by
 * one of the call's divisors d is the high word of x * m with m = ceil(2^32 / d), and x itself
 * where d is 1 (m 0; symm__moe_magic; the m fields), exact for x * d <= 2^32, which the kernels'
 * values are far below.
 */
typedef struct symm__moe_llplan {
    uint32_t mk;   /* m of top-k */
    uint32_t mdsl; /* dispatch: m of dsl */
    uint32_t mrsl; /* dispatch: m of rsl */
    uint32_t mcap; /* dispatch: m of cap */
    uint32_t ml;   /* dispatch: m of the local experts */
    uint32_t mcsl; /* combine: m of csl */
    uint32_t mpsl; /* combine: m of psl */
    uint32_t mper; /* combine: m of per */
    uint32_t mh8;  /* combine: m of hidden / 8 */
    /* dispatch */
    uint32_t dpr;    /* me mod dp: the first of this PE's tokens (t = dpr, dpr + dp, ...) */
    uint32_t all;    /* those tokens below num_tokens */
    uint32_t nv;     /* 16-byte vectors of a row as it travels (x, then its scales in quads) */
    uint32_t kl;     /* min(top-k, local experts): a token's routes into one PE at most */
    uint32_t hmax;   /* cap x kl: routes one source may send one PE */
    uint32_t dmode;  /* the mode bits this PE's headers carry */
    uint32_t h32;    /* 32 / top-k: the token of thread 32's route */
    uint32_t dsl;    /* slices of a sent row (row blocks per token when tokens are fewer) */
    uint32_t dunits; /* all x dsl: the row blocks' units */
    uint32_t rsl;    /* slices of a received (source, token slot) pair */
    uint32_t runits; /* n x cap x rsl: the receive half's units */
    uint32_t rlg;    /* the decode form's groups: 2^rlg threads (the longest slice at most) */
    uint32_t rfast;  /* the receive half's decode form (ll_small_unit) */
    /* combine */
    uint32_t csl;    /* the send half's slices of a route (by the most routes a PE may receive) */
    uint32_t rmax;   /* those routes: n x cap x kl */
    uint32_t psl;    /* the receive half's plan of num_tokens: slices of a token (1: none) */
    uint32_t ptb;    /* and tokens a unit */
    uint32_t punits; /* and units */
    uint32_t per;    /* SYMM__MOE_THREADS / top-k: output groups in a round of a route per thread */
    uint32_t g0;     /* the first PE of my DP group */
} symm__moe_llplan_t;

/*
 * One kernel's arguments: the handle's geometry, then the call's buffers.
 * Sizes in bytes unless said; strides in elements.
 */
typedef struct symm__moe_kargs {
    symm_ctx_t ctx;
    uint64_t base;           /* the handle's symmetric region on this PE */
    symm__moe_layout_t lay;
    uint64_t err;            /* device address of the symm__moe_err_t */
    int32_t me, n, dp;       /* team PE, team size, dp_size */
    uint32_t experts, local, topk, hidden;
    uint32_t max_tokens;     /* M */
    uint32_t cap;            /* low latency: tokens a PE sends per call; high throughput: receive rows */
    uint32_t x_bytes;        /* hidden_dim_bytes */
    uint32_t scale_cols;     /* float32 scales per token */
    uint32_t tok_stride;     /* low latency: bytes per slot of ll_dbuf */
    uint32_t rows;           /* low latency: rows per expert kept (M * groups) */
    uint32_t pcap;           /* low latency: tokens a PE may send as packets (slots of ll_pbuf) */
    uint32_t pmt;            /* low latency: tokens whose combine rows may come back as packets */
    uint32_t pkt;            /* low latency: packets on (SYMM_MOE_PACKETS is not 0) */
    uint32_t kernel;         /* symm__mk_t */
    uint32_t flags;          /* SYMM_MOE_SEND and/or SYMM_MOE_RECV */
    uint32_t ht_sched;       /* HT combine with both halves: enum symm__moe_ht_sched */
    uint32_t ht_send_warps;  /* SYMM__MOE_HT_OVERLAP: warps of each block that send (1..SYMM__MOE_WARPS - 1) */
    uint32_t ht_pull_y;      /* SYMM__MOE_HT_PULL, both halves: 1 y is in the heap, the peers read it there */
    uint32_t ht_pull_stages; /* SYMM__MOE_HT_PULL: stages of each reducing warp (1..SYMM__MOE_HT_PULL_MAX_STAGES) */
    uint32_t ht_pull_lanes;  /* SYMM__MOE_HT_PULL: 1 each lane copies its vectors (cp.async; pull-lanes), 0 bulk copies */
    uint32_t ht_dwarps;      /* HT dispatch: 1 each warp sends whole tokens (SYMM_MOE_HT_DISPATCH=warps), 0 batches */
    uint32_t probe;          /* low latency: SYMM_MOE_LL_PROBE (symm__moe_probe), 0 for the real exchange */
    uint32_t pdl;            /* low latency: launched with programmatic dependent launch (SYMM_MOE_PDL) */
    uint32_t ll_small;       /* low latency: the small dispatch (geometry's ll_small; not with the twice probe) */
    uint32_t ll_part;        /* low latency: the combine sums on the experts' side (SYMM_MOE_LL_COMBINE) */
    uint64_t num_tokens;     /* m */
    const uint32_t *bound;   /* device, or NULL */
    /* dispatch */
    const void *x;
    int64_t x_stride;
    uint32_t x_esz;
    const float *x_scale;
    int64_t xs_stride[2];
    const void *idx;
    uint32_t idx_kind;       /* 0: uint32, 1: int32, 2: int64 */
    const float *weights;
    int64_t ht_rx_at;        /* HT dispatch: this PE's receive buffer of x (ht_rx or the caller's), from base */
    int64_t ht_rs_at;        /* HT dispatch: and of the scales (ht_rscale or the caller's) */
    int32_t *out_num;        /* LL out_expert_num_tokens */
    void *out_x;
    int64_t ox_stride[2];
    uint64_t out_rows;
    float *out_scale;
    int64_t os_stride[3];
    /* HT layout outputs (user), any may be NULL */
    int32_t *per_rank, *per_expert;
    uint8_t *in_rank;
    /* combine */
    const void *y;
    int64_t y_stride[2];
    uint64_t y_rows;
    uint32_t y_kind;         /* symm_dtype_t: F32, BF16, F16 */
    void *out;
    int64_t out_stride;
    uint32_t out_kind;       /* BF16, F16 */
    /* HT combine's side channel (symm_moe_ht_combine_weights); w_cols 0: none */
    const float *w;
    int64_t w_stride;
    uint64_t w_rows;
    float *out_w;
    int64_t ow_stride;
    uint32_t w_cols;
    int nblocks;
    /* low latency, ll_small: the call's plan (symm__moe_ll_plan); last, so the other kernels'
     * arguments keep their places */
    symm__moe_llplan_t llp;
} symm__moe_kargs_t;

/* m = ceil(2^32 / d) for d >= 2 (0 for d = 1), so that x / d is the high word of x * m (x where
 * m is 0) where x * d <= 2^32. */
static inline uint32_t symm__moe_magic(uint32_t d) { return d > 1 ? (uint32_t)(((1ull << 32) + d - 1u) / d) : 0u; }

/* Fill a->llp for a small low-latency kernel (a->ll_small) from the handle's part of a, the call's
 * num_tokens and flags and a->nblocks; for any other kernel it leaves llp alone. */
void symm__moe_ll_plan(symm__moe_kargs_t *a);

/* Enqueue a kernel. Errors: SYMM_ERR_CUDA. */
symm_status_t symm__moe_launch(const symm__moe_kargs_t *a, symm_stream_t stream);

/* Host-mapped error record: allocate (zeroed), free, device address.
 * Errors: SYMM_ERR_CUDA. */
symm_status_t symm__moe_err_alloc(symm__moe_err_t **host, uint64_t *dev);
void symm__moe_err_free(symm__moe_err_t *host);

/* Let the overlap-async combine kernel take its shared memory (a ring per
 * reducing warp, with send_warps of SYMM__MOE_WARPS sending): 1 when the
 * current device has that much, else 0 (the handle then runs overlap). Once
 * per handle, at creation: no attribute calls at launch, which may be inside
 * a graph capture. */
int symm__moe_ht_async_prepare(int sched, int send_warps);

/* Let the pull combine kernel take the shared memory of `stages` stages per
 * warp: the most stages up to that many that the current device has room
 * for (at least 1). Once per handle, at creation, like the above. */
int symm__moe_ht_pull_prepare(int stages);

/* Multiprocessors of the current device (1 when unknown). */
int symm__moe_sm_count(void);

/* Can the current device launch kernels with programmatic dependent launch
 * (compute capability 9.0 or newer): 1, else 0. */
int symm__moe_pdl_supported(void);

/* Read the device word at `dev` into *v and zero it (the stream is idle).
 * Errors: SYMM_ERR_CUDA. */
symm_status_t symm__moe_take_word(void *dev, uint32_t *v);

/* Wait for `stream`. Errors: SYMM_ERR_CUDA. */
symm_status_t symm__moe_stream_sync(symm_stream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* SYMM_MOE_LAUNCH_H */
