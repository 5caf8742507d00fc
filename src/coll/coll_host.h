/*
 * coll_host.h - what the host side of the stream collectives shares among
 * its files: a team's collective state (coll_team.c), the checked arguments
 * of a call (coll_args.c), the block counts and AUTO's picks
 * (coll_choose.c); the public calls that launch the kernels are coll_calls.c.
 */
#ifndef SYMM_COLL_HOST_H
#define SYMM_COLL_HOST_H

#include <stdint.h>

#include "symm/symm.h"
#include "coll/coll.h"
#include "coll/coll_launch.h"

#ifdef __cplusplus
extern "C" {
#endif

static inline uint64_t symm__coll_cdiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* A team's collective state, kept with the team (runtime/team.h): made by
 * the first collective on it, freed by the runtime when the team goes. */
typedef struct symm__coll_team {
    symm_team_t team;
    symm_ctx_t ctx;        /* the team's context (fields the kernels use never change) */
    symm__coll_ws_t ws;
    char *stage;           /* SYMM__COLL_STAGE_BYTES of symmetric heap */
    char *push;            /* SYMM__COLL_PUSH_BYTES of zeroed symmetric heap (coll.h) */
    symm__coll_ce_t *ce;   /* side stream and events of the copy-engine path */
    int sm_cap;            /* most blocks of one launch: symm_sm_share (PEs sharing a GPU) */
    int far;               /* a PE of the team is outside the load/store window: the
                              backend's collectives run the calls (docs/backends.md) */
} symm__coll_team_t;

/* The team's collective state, made by the first collective on it (every
 * PE is there: the call is collective); checks SYMM_COLL_BLOCKS and that
 * the backend runs symm's collective kernels. */
symm_status_t symm__coll_team_get(symm_team_t team, symm_stream_t stream, const char *call,
                                  symm__coll_team_t **out);

/* The last algorithm of this thread (symm_coll_last_algo): a named
 * algorithm (direct_name instead of its name when not NULL; "+staged" when
 * staged), or any name. */
void symm__coll_set_last(symm_coll_algo_t algo, const char *direct_name, int staged);
void symm__coll_set_last_name(const char *name);

/* ---- argument checks (coll_args.c) ---- */

/* A call's checked arguments. */
typedef struct symm__coll_args {
    symm__coll_team_t *t;
    uint32_t esz;
    int kind;        /* reductions: the reduction kind */
    uint64_t nbytes; /* count x esz */
    uint64_t total;  /* nbytes x n_pes */
    symm__coll_limits_t lim; /* AUTO's limits for the team's size */
} symm__coll_args_t;

/*
 * The checks every collective but all_to_allv starts with, in this order:
 * clear the last error; the team (the first call on it sets it up); the
 * types (op != NULL: a reduction, whose op, accumulator and algorithm are
 * checked too); the root (root != NULL: broadcast); count x esz, and
 * (per_pe) that times n_pes, without overflow. A count of 0 succeeds with
 * nothing to do (the last algorithm is "none"): the caller returns then.
 */
symm_status_t symm__coll_prologue(const char *call, symm_team_t team, symm_stream_t stream, symm_dtype_t dtype,
                                  const symm_redop_t *op, symm_dtype_t acc, symm_coll_algo_t algo, const int *root,
                                  size_t count, int per_pe, symm__coll_args_t *a);

/* Is [p, p + n) inside this PE's heap? */
int symm__coll_in_heap(const void *p, uint64_t n);
/* Do [a, a + na) and [b, b + nb) overlap? */
int symm__coll_overlap(const void *a, uint64_t na, const void *b, uint64_t nb);
/* p is not NULL and is memory this GPU can access ("what" names it). */
symm_status_t symm__coll_check_buf(const char *call, const char *what, const void *p, uint64_t n);
/* send (sbytes) and recv (rbytes) are memory this GPU can access, and they
 * overlap only if send is exactly at `at` (when at_ok: in place). */
symm_status_t symm__coll_check_pair(const char *call, const void *send, uint64_t sbytes, const void *recv,
                                    uint64_t rbytes, int at_ok, uintptr_t at, const char *why);
/* count * esz * mult without overflow (and within what the kernels index). */
symm_status_t symm__coll_bytes_of(const char *call, size_t count, uint32_t esz, uint64_t mult, uint64_t *out);
/* A known dtype, and its size. */
symm_status_t symm__coll_check_dtype(const char *call, symm_dtype_t dtype, uint32_t *esz);
/* The algorithm asked for: the call's, else SYMM_COLL_ALGO, else AUTO. */
symm_status_t symm__coll_requested(const char *call, symm_coll_algo_t algo, symm_coll_algo_t *out);

/* ---- algorithm choice and block counts (coll_choose.c) ---- */

/* What AUTO picks for an all-reduce / reduce-scatter of a->nbytes (per PE)
 * on a team of n PEs, and for the data movement of nbytes (packet_max: the
 * call's PACKET limit); the copy-engine paths are asked for apart
 * (symm__coll_want_ce). */
symm_coll_algo_t symm__coll_auto_ar(const symm__coll_args_t *a, int n);
symm_coll_algo_t symm__coll_auto_rs(const symm__coll_args_t *a);
symm_coll_algo_t symm__coll_auto_move(uint64_t nbytes, uint64_t packet_max);

/* Block counts, the same on every PE (block b handshakes with block b of
 * the peers): they depend only on sizes and settings every PE shares; 0
 * where the kernel cannot run. */
int symm__coll_region_blocks_of(const symm__coll_team_t *t, uint64_t units, uint64_t per_block);
int symm__coll_region_blocks(const symm__coll_team_t *t, uint64_t units);
int symm__coll_bcast2_blocks(const symm__coll_team_t *t, uint64_t words, int m);
int symm__coll_ar_packet2_blocks(const symm__coll_team_t *t, uint64_t words);
int symm__coll_direct_blocks_max(const symm__coll_team_t *t, uint64_t bytes, int def_max);
int symm__coll_direct_blocks(const symm__coll_team_t *t, uint64_t bytes);
int symm__coll_push_blocks(const symm__coll_team_t *t, uint64_t chunk);
/* The push pipeline's block slots (symm__coll_tune_push). */
uint32_t symm__coll_push_slots(void);
/* Largest staged piece of which `rows` fit the stage. */
uint64_t symm__coll_stage_piece(uint64_t rows);

/* May the team take a copy-engine path at all; may this call (recv
 * symmetric at one offset on every PE; a host exchange among the PEs). */
int symm__coll_ce_ok(const symm__coll_team_t *t);
symm_status_t symm__coll_want_ce(symm__coll_team_t *t, const char *call, const void *recv, uint64_t recv_bytes,
                                 int *out);

#ifdef __cplusplus
}
#endif

#endif /* SYMM_COLL_HOST_H */
