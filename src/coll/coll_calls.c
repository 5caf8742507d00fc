/*
 * coll_calls.c - the stream collectives of symm_coll.h: each call checks its
 * arguments (coll_args.c), picks its path (coll_choose.c) and launches the
 * kernels (coll_launch.h; the kernels are in coll_k_*.cu, the device code in
 * include/symm/device/coll_impl.h), staging non-symmetric buffers.
 *
 * Workspace: the team's internal scratch (symm_ctx_t.scratch, zeroed at
 * init) holds the synchronisation words and the packet/one-shot regions; the
 * host never writes it, the kernels keep it consistent, so every call
 * captures into CUDA graphs. Buffers outside the heap that a direct
 * algorithm must reach from the peers are staged through a per-team
 * symmetric staging area, in pieces of at most its size.
 */
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "symm/symm.h"
#include "core/env.h"
#include "core/log.h"
#include "heap/heap.h"
#include "runtime/team.h"
#include "coll/coll.h"
#include "coll/coll_launch.h"
#include "coll/coll_host.h"

/* ---- launches ---------------------------------------------------------------------- */

static void push_launch(symm__coll_launch_t *l, const symm__coll_team_t *t) {
    l->push = (uint64_t)(uintptr_t)t->push;
    l->push_buf = SYMM__COLL_PUSH_BUF(symm__coll_push_slots(), t->ctx.n_pes);
}

static void base_launch(symm__coll_launch_t *l, const symm__coll_team_t *t, symm__ck_t k, int nblocks) {
    memset(l, 0, sizeof(*l));
    l->kernel = k;
    l->nblocks = nblocks;
    l->nthreads = SYMM__COLL_THREADS;
    l->ctx = t->ctx;
    l->ctx.trace = symm__team_host_ctx(t->team)->trace; /* a device trace started since set-up */
    l->ws = t->ws;
    l->root = -1;
}


/* ---- teams with PEs outside the load/store window ----------------------------------- */

/* The call through the backend's library (its own staging and algorithms):
 * symm's kernels need every peer's memory mapped. */
static symm_status_t far_coll(symm__coll_team_t *t, const char *call, int kind, const void *send, void *recv,
                              size_t count, uint32_t esz, int dtype, int op, int acc, int root,
                              uint64_t send_bytes, uint64_t recv_bytes, symm_stream_t stream) {
    symm__be_coll_t c;
    symm_status_t st;
    memset(&c, 0, sizeof c);
    c.what = call;
    c.kind = kind;
    c.send = send;
    c.recv = recv;
    c.count = count;
    c.esize = esz;
    c.dtype = dtype;
    c.op = op;
    c.root = root;
    c.acc_default = acc == SYMM_DTYPE_DEFAULT || acc == dtype;
    c.send_in_heap = send == NULL || symm__coll_in_heap(send, send_bytes);
    c.recv_in_heap = symm__coll_in_heap(recv, recv_bytes);
    c.h_ctx = &t->ctx;
    if ((st = symm__team_backend_coll(t->team, &c, stream)) == SYMM_SUCCESS)
        symm__coll_set_last_name("backend");
    return st;
}


/* ---- the copy-engine paths -------------------------------------------------------- */

/* What the copy-engine pipelines need of the team, and what the call is
 * (its signature: call, bytes per PE, reduction kind, op, root). */
static void pipe_of(symm__coll_team_t *t, const symm__coll_limits_t *lim, int call, uint64_t bytes, int kind, int op,
                    int root, symm__coll_pipe_t *pp) {
    memset(pp, 0, sizeof(*pp));
    pp->ce = t->ce;
    pp->team = t->team;
    pp->ctx = &t->ctx;
    pp->ws = &t->ws;
    pp->stage = t->stage;
    pp->chunk = lim->ce_chunk;
    /* the forwarding and reduction kernels wait for the peers' signal kernels:
     * with PEs sharing a GPU, leave room beside them for this PE's own */
    pp->blocks = symm__coll_direct_blocks_max(t, (uint64_t)1 << 30, SYMM__COLL_MOVE_BLOCKS);
    if (pp->blocks > t->sm_cap - 2)
        pp->blocks = t->sm_cap > 2 ? t->sm_cap - 2 : 1;
    pp->call = call;
    pp->sig_bytes = bytes;
    pp->kind = kind;
    pp->op = op;
    pp->root = root;
}

/* All-reduce through the copy engines (nbytes a multiple of 16 n, recv
 * symmetric everywhere: symm__coll_want_ce): the copy-engine reduce-scatter of send
 * into this PE's piece of recv, then the copy-engine all-gather of the
 * pieces in place. */
static symm_status_t ar_ce(symm__coll_team_t *t, const symm__coll_args_t *a, const void *send, void *recv, int op,
                           symm_stream_t stream) {
    symm__coll_pipe_t pp;
    int n = t->ctx.n_pes, me = t->ctx.my_pe;
    uint64_t piece = a->nbytes / (uint64_t)n;
    char *mine = (char *)recv + (uint64_t)me * piece;
    symm_status_t st;
    pipe_of(t, &a->lim, SYMM__PIPE_AR, a->nbytes, a->kind, op, -1, &pp);
    if ((st = symm__coll_ce_rs(&pp, send, mine, piece, piece, a->kind, op, stream)) != SYMM_SUCCESS ||
        (st = symm__coll_ce_move(t->ce, t->team, mine, recv, piece, 0, piece, stream)) != SYMM_SUCCESS)
        return st;
    symm__coll_set_last_name("copy-engine");
    return SYMM_SUCCESS;
}

/* ---- all-reduce ------------------------------------------------------------------- */

symm_status_t symm_all_reduce_ex(const void *send, void *recv, size_t count, symm_dtype_t dtype, symm_redop_t op,
                                 symm_dtype_t acc, symm_coll_algo_t algo, symm_team_t team, symm_stream_t stream) {
    const char *call = "symm_all_reduce";
    symm__coll_args_t a;
    symm__coll_team_t *t;
    symm__coll_launch_t l;
    uint64_t nbytes;
    int kind, n, nb;
    symm_status_t st;
    if ((st = symm__coll_prologue(call, team, stream, dtype, &op, acc, algo, NULL, count, 0, &a)) != SYMM_SUCCESS ||
        count == 0)
        return st;
    t = a.t;
    nbytes = a.nbytes;
    kind = a.kind;
    if ((st = symm__coll_check_pair(call, send, nbytes, recv, nbytes, 1, (uintptr_t)recv,
                         "send and recv overlap without being equal")) != SYMM_SUCCESS)
        return st;
    if (t->far)
        return far_coll(t, call, SYMM__BE_COLL_ALL_REDUCE, send, recv, count, a.esz, dtype, op, acc, -1, nbytes,
                        nbytes, stream);
    if ((st = symm__coll_requested(call, algo, &algo)) != SYMM_SUCCESS)
        return st;
    n = t->ctx.n_pes;
    if (algo == SYMM_COLL_ALGO_AUTO) {
        int ce = 0;
        algo = symm__coll_auto_ar(&a, n);
        /* the copy-engine halves: pieces of 16-byte multiples, recv symmetric everywhere */
        if (nbytes >= a.lim.ar_ce_min && n >= 2 && nbytes % (16 * (uint64_t)n) == 0 &&
            (st = symm__coll_want_ce(t, call, recv, nbytes, &ce)) != SYMM_SUCCESS)
            return st;
        if (ce)
            return ar_ce(t, &a, send, recv, (int)op, stream);
    }
    /* No multicast object exists (symm creates none yet): the unicast twin. */
    if (algo == SYMM_COLL_ALGO_MULTIMEM)
        algo = SYMM_COLL_ALGO_TWOSHOT;
    /* the kernels that need only their own buffers (scratch regions carry
     * the peers' data): one launch whatever the buffers */
    {
        symm__ck_t k = SYMM__CK_COUNT;
        const char *name = NULL;
        if (algo == SYMM_COLL_ALGO_PACKET && n >= 3 && nbytes > a.lim.ar_packet2_min &&
            (nb = symm__coll_ar_packet2_blocks(t, symm__coll_cdiv(nbytes, 8))) > 0) {
            k = SYMM__CK_AR_PACKET2;
            name = "packet-2shot";
        } else if (algo == SYMM_COLL_ALGO_PACKET &&
                   (nb = symm__coll_region_blocks(t, symm__coll_cdiv(nbytes, 8))) > 0) {
            k = SYMM__CK_RED_PACKET;
            name = "packet";
        } else if ((algo == SYMM_COLL_ALGO_PACKET || algo == SYMM_COLL_ALGO_ONESHOT) &&
                   (nb = symm__coll_region_blocks_of(t, symm__coll_cdiv(nbytes, 16),
                                                     t->ws.region >= 32 ? t->ws.region / 16 - 1 : 0)) > 0) {
            /* (a region's last unit holds the call's signature: symm__c_handshake_sig) */
            k = SYMM__CK_AR_ONESHOT;
            name = "oneshot";
        }
        if (k != SYMM__CK_COUNT) {
            base_launch(&l, t, k, nb);
            l.dst = recv;
            l.src = send;
            l.nbytes = nbytes;
            l.kind = kind;
            l.op = (int)op;
            if ((st = symm__coll_launch(&l, stream)) == SYMM_SUCCESS)
                symm__coll_set_last_name(name);
            return st;
        }
    }
    /* TWOSHOT or PUSH between the buffers, or through the stage in pieces
     * (PUSH reads send only locally, so only a recv outside the heap is
     * staged). */
    {
        int push = algo == SYMM_COLL_ALGO_PUSH, stores = 0;
        int sym_s = push || symm__coll_in_heap(send, nbytes), sym_r = symm__coll_in_heap(recv, nbytes);
        uint64_t piece = symm__coll_stage_piece(1), off;
        for (off = 0; off < nbytes; off += piece) {
            uint64_t len = nbytes - off < piece ? nbytes - off : piece;
            const char *s = (const char *)send + off;
            char *d = (char *)recv + off;
            if (!sym_s) {
                if ((st = symm__coll_copy(t->stage, s, len, stream)) != SYMM_SUCCESS)
                    return st;
                s = t->stage;
            }
            if (!sym_r)
                d = t->stage;
            if (push) {
                base_launch(&l, t, SYMM__CK_AR_PUSH, symm__coll_push_blocks(t, symm__coll_cdiv(len, (uint64_t)n)));
                push_launch(&l, t);
            } else if (n >= 3 && len <= a.lim.ar_stores_max &&
                       (nb = symm__coll_region_blocks(t, symm__coll_cdiv(len, 16 * (uint64_t)n))) > 0) {
                /* each piece into its owner's region (a slot's share of the
                 * ceil(len / n)-byte pieces, in 16-byte units, must fit) */
                base_launch(&l, t, SYMM__CK_AR_TWOSHOT_ST, nb);
                stores = 1;
            } else {
                base_launch(&l, t, SYMM__CK_AR_TWOSHOT, symm__coll_direct_blocks(t, symm__coll_cdiv(len, (uint64_t)n)));
            }
            l.dst = d;
            l.src = s;
            l.nbytes = len;
            l.kind = kind;
            l.op = (int)op;
            if ((st = symm__coll_launch(&l, stream)) != SYMM_SUCCESS)
                return st;
            if (!sym_r && (st = symm__coll_copy((char *)recv + off, t->stage, len, stream)) != SYMM_SUCCESS)
                return st;
        }
        symm__coll_set_last(push ? SYMM_COLL_ALGO_PUSH : SYMM_COLL_ALGO_TWOSHOT, stores ? "twoshot-stores" : NULL,
                 !(sym_s && sym_r));
    }
    return SYMM_SUCCESS;
}

symm_status_t symm_all_reduce(const void *send, void *recv, size_t count, symm_dtype_t dtype, symm_redop_t op,
                              symm_team_t team, symm_stream_t stream) {
    return symm_all_reduce_ex(send, recv, count, dtype, op, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_AUTO, team, stream);
}

/* ---- reduce-scatter ------------------------------------------------------------------ */

symm_status_t symm_reduce_scatter_ex(const void *send, void *recv, size_t recv_count, symm_dtype_t dtype,
                                     symm_redop_t op, symm_dtype_t acc, symm_coll_algo_t algo, symm_team_t team,
                                     symm_stream_t stream) {
    const char *call = "symm_reduce_scatter";
    symm__coll_args_t a;
    symm__coll_team_t *t;
    symm__coll_launch_t l;
    uint64_t nbytes, total;
    int kind, n, nb;
    symm_status_t st;
    if ((st = symm__coll_prologue(call, team, stream, dtype, &op, acc, algo, NULL, recv_count, 1, &a)) !=
            SYMM_SUCCESS ||
        recv_count == 0)
        return st;
    t = a.t;
    nbytes = a.nbytes;
    total = a.total;
    kind = a.kind;
    n = t->ctx.n_pes;
    /* in place: recv is this PE's piece of send */
    if ((st = symm__coll_check_pair(call, send, total, recv, nbytes, 1,
                                    (uintptr_t)recv - (uint64_t)t->ctx.my_pe * nbytes,
                         "recv overlaps send other than at send + my_pe * recv_count")) != SYMM_SUCCESS)
        return st;
    if (t->far)
        return far_coll(t, call, SYMM__BE_COLL_REDUCE_SCATTER, send, recv, recv_count, a.esz, dtype, op, acc, -1,
                        total, nbytes, stream);
    if ((st = symm__coll_requested(call, algo, &algo)) != SYMM_SUCCESS)
        return st;
    if (algo == SYMM_COLL_ALGO_AUTO) {
        algo = symm__coll_auto_rs(&a);
        if (nbytes >= a.lim.rs_ce_min && symm__coll_ce_ok(t)) {
            symm__coll_pipe_t pp;
            pipe_of(t, &a.lim, SYMM__PIPE_RS, nbytes, kind, (int)op, -1, &pp);
            if ((st = symm__coll_ce_rs(&pp, send, recv, nbytes, nbytes, kind, (int)op, stream)) == SYMM_SUCCESS)
                symm__coll_set_last_name("copy-engine");
            return st;
        }
    }
    /* ONESHOT: each piece into its owner's plain-data region, when a slot's
     * share fits (its last unit holds the signature: symm__c_handshake_sig) */
    if (algo == SYMM_COLL_ALGO_ONESHOT &&
        (nb = symm__coll_region_blocks_of(t, symm__coll_cdiv(nbytes, 16),
                                          t->ws.region >= 32 ? t->ws.region / 16 - 1 : 0)) > 0) {
        base_launch(&l, t, SYMM__CK_RS_ONESHOT, nb);
        l.dst = recv;
        l.src = send;
        l.nbytes = nbytes;
        l.piece = nbytes;
        l.kind = kind;
        l.op = (int)op;
        if ((st = symm__coll_launch(&l, stream)) == SYMM_SUCCESS)
            symm__coll_set_last_name("oneshot");
        return st;
    }
    /* PUSH and PACKET: one launch whatever the buffers (the peers' data
     * reaches this PE through its scratch; every load is local) */
    if (algo == SYMM_COLL_ALGO_PUSH ||
        (algo == SYMM_COLL_ALGO_PACKET && (nb = symm__coll_region_blocks(t, symm__coll_cdiv(nbytes, 8))) > 0)) {
        if (algo == SYMM_COLL_ALGO_PUSH) {
            base_launch(&l, t, SYMM__CK_RS_PUSH, symm__coll_push_blocks(t, nbytes));
            push_launch(&l, t);
        } else {
            base_launch(&l, t, SYMM__CK_RED_PACKET, nb);
        }
        l.dst = recv;
        l.src = send;
        l.nbytes = nbytes;
        l.piece = nbytes;
        l.kind = kind;
        l.op = (int)op;
        if ((st = symm__coll_launch(&l, stream)) == SYMM_SUCCESS)
            symm__coll_set_last(algo, NULL, 0);
        return st;
    }
    {
        int sym_s = symm__coll_in_heap(send, total);
        uint64_t piece = symm__coll_stage_piece((uint64_t)n), off;
        for (off = 0; off < nbytes; off += piece) {
            uint64_t len = nbytes - off < piece ? nbytes - off : piece;
            base_launch(&l, t, SYMM__CK_RS_DIRECT, symm__coll_direct_blocks(t, len));
            l.dst = (char *)recv + off;
            l.src = (const char *)send + off;
            l.nbytes = len;
            l.piece = nbytes;
            if (!sym_s) {
                if ((st = symm__coll_copy2d(t->stage, len, (const char *)send + off, nbytes, len, (size_t)n,
                                            stream)) != SYMM_SUCCESS)
                    return st;
                l.src = t->stage;
                l.piece = len;
            }
            l.kind = kind;
            l.op = (int)op;
            if ((st = symm__coll_launch(&l, stream)) != SYMM_SUCCESS)
                return st;
        }
        symm__coll_set_last(SYMM_COLL_ALGO_TWOSHOT, "direct", !sym_s);
    }
    return SYMM_SUCCESS;
}

symm_status_t symm_reduce_scatter(const void *send, void *recv, size_t recv_count, symm_dtype_t dtype,
                                  symm_redop_t op, symm_team_t team, symm_stream_t stream) {
    return symm_reduce_scatter_ex(send, recv, recv_count, dtype, op, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_AUTO,
                                  team, stream);
}

/* ---- data movement: all-gather, all-to-all, broadcast ------------------------------- */

/*
 * Broadcast along the chain (symm__c_bcast_chain), a launch per staging
 * piece whether recv is symmetric or staged through the team's stage: every
 * PE must cut the buffer alike, and one PE's recv may be symmetric where
 * another's is not.
 */
static symm_status_t bcast_chain(symm__coll_team_t *t, const void *send, void *recv, uint64_t nbytes, int root,
                                 uint64_t chunk, symm_stream_t stream) {
    int sym_r = symm__coll_in_heap(recv, nbytes);
    uint64_t piece = symm__coll_stage_piece(1), off;
    symm__coll_launch_t l;
    symm_status_t st;
    for (off = 0; off < nbytes; off += piece) {
        uint64_t len = nbytes - off < piece ? nbytes - off : piece;
        base_launch(&l, t, SYMM__CK_MOVE_DIRECT, symm__coll_direct_blocks_max(t, len, SYMM__COLL_MOVE_BLOCKS));
        l.src = send ? (const char *)send + off : NULL;
        l.dst = sym_r ? (char *)recv + off : t->stage;
        l.nbytes = len;
        l.root = root;
        l.chain = chunk ? chunk : 16;
        if ((st = symm__coll_launch(&l, stream)) != SYMM_SUCCESS)
            return st;
        if (!sym_r && (st = symm__coll_copy((char *)recv + off, t->stage, len, stream)) != SYMM_SUCCESS)
            return st;
    }
    symm__coll_set_last(SYMM_COLL_ALGO_TWOSHOT, "chain", !sym_r);
    return SYMM_SUCCESS;
}

/*
 * One routine for the three: PE me sends `nbytes` from send + p * src_piece
 * to PE p, landing at p's recv + me * out_piece (broadcast, root >= 0: the
 * root sends send to everyone's recv). `rows`: how many pieces of recv the
 * stage must hold (n, or 1 for broadcast).
 */
static symm_status_t move(symm__coll_team_t *t, const char *call, const void *send, void *recv, uint64_t nbytes,
                          uint64_t src_piece, uint64_t out_piece, int root, const symm__coll_limits_t *lim,
                          symm_stream_t stream) {
    uint64_t packet_max = root >= 0 ? lim->bcast_packet_max : lim->packet_max;
    symm__coll_launch_t l;
    symm_coll_algo_t algo = SYMM_COLL_ALGO_AUTO;
    symm_status_t st;
    int n = t->ctx.n_pes, me = t->ctx.my_pe, nb;
    uint64_t rows = root >= 0 ? 1 : (uint64_t)n;
    uint64_t recv_bytes = root >= 0 ? nbytes : nbytes * (uint64_t)n;
    if (t->far) /* bytes, whatever the type: these only move data */
        return far_coll(t, call,
                        root >= 0        ? SYMM__BE_COLL_BROADCAST
                        : src_piece == 0 ? SYMM__BE_COLL_ALL_GATHER
                                         : SYMM__BE_COLL_ALL_TO_ALL,
                        send, recv, nbytes, 1, SYMM_DTYPE_U8, 0, SYMM_DTYPE_DEFAULT, root,
                        root >= 0 || src_piece == 0 ? nbytes : recv_bytes, recv_bytes, stream);
    if ((st = symm__coll_requested(call, SYMM_COLL_ALGO_AUTO, &algo)) != SYMM_SUCCESS)
        return st;
    if (algo == SYMM_COLL_ALGO_AUTO && root < 0 && symm__env()->coll_ce_min != 0 &&
        nbytes >= (uint64_t)symm__env()->coll_ce_min) {
        int ce = 0;
        if ((st = symm__coll_want_ce(t, call, recv, recv_bytes, &ce)) != SYMM_SUCCESS)
            return st;
        if (ce) {
            if ((st = symm__coll_ce_move(t->ce, t->team, send, recv, nbytes, src_piece, out_piece, stream)) ==
                SYMM_SUCCESS)
                symm__coll_set_last_name("copy-engine");
            return st;
        }
    }
    /* broadcast along the chain of SM stores (off unless tuned: bcast_chain_min) */
    if (algo == SYMM_COLL_ALGO_AUTO && root >= 0 && nbytes >= lim->bcast_chain_min)
        return bcast_chain(t, send, recv, nbytes, root, lim->bcast_chain_chunk, stream);
    /* broadcast through the copy engines: the root's chunks on its copy
     * engine, the non-roots forwarding (recv symmetric everywhere) */
    if (algo == SYMM_COLL_ALGO_AUTO && root >= 0 && nbytes >= lim->bcast_ce_min && symm__coll_ce_ok(t)) {
        int ce = 0;
        if ((st = symm__coll_want_ce(t, call, recv, recv_bytes, &ce)) != SYMM_SUCCESS)
            return st;
        if (ce) {
            symm__coll_pipe_t pp;
            pipe_of(t, lim, SYMM__PIPE_BCAST, nbytes, -1, 0, root, &pp);
            if ((st = symm__coll_ce_bcast(&pp, send, recv, nbytes, root, stream)) == SYMM_SUCCESS)
                symm__coll_set_last_name("copy-engine");
            return st;
        }
    }
    if (algo == SYMM_COLL_ALGO_AUTO)
        algo = symm__coll_auto_move(nbytes, packet_max);
    /* broadcast: past bcast_hop1_max the root's packets go to one
     * non-root each and are forwarded from there (n >= 3) */
    if (algo == SYMM_COLL_ALGO_PACKET && root >= 0 && n >= 3 && nbytes > lim->bcast_hop1_max &&
        (nb = symm__coll_bcast2_blocks(t, symm__coll_cdiv(nbytes, 8), n - 1)) > 0) {
        base_launch(&l, t, SYMM__CK_BCAST_PACKET2, nb);
        l.dst = recv;
        l.src = send;
        l.nbytes = nbytes;
        l.root = root;
        if ((st = symm__coll_launch(&l, stream)) == SYMM_SUCCESS)
            symm__coll_set_last_name("packet-2hop");
        return st;
    }
    if (algo == SYMM_COLL_ALGO_PACKET && (nb = symm__coll_region_blocks(t, symm__coll_cdiv(nbytes, 8))) > 0) {
        base_launch(&l, t, SYMM__CK_MOVE_PACKET, nb);
        l.dst = recv;
        l.src = send;
        l.nbytes = nbytes;
        l.piece = src_piece;
        l.out = out_piece;
        l.root = root;
        if ((st = symm__coll_launch(&l, stream)) == SYMM_SUCCESS)
            symm__coll_set_last(SYMM_COLL_ALGO_PACKET, NULL, 0);
        return st;
    }
    {
        int sym_r = symm__coll_in_heap(recv, recv_bytes);
        uint64_t piece = symm__coll_stage_piece(rows), off;
        for (off = 0; off < nbytes; off += piece) {
            uint64_t len = nbytes - off < piece ? nbytes - off : piece;
            base_launch(&l, t, SYMM__CK_MOVE_DIRECT, symm__coll_direct_blocks_max(t, len, SYMM__COLL_MOVE_BLOCKS));
            l.src = send ? (const char *)send + off : NULL;
            l.nbytes = len;
            l.piece = src_piece;
            l.root = root;
            if (sym_r) {
                l.dst = (char *)recv + off;
                l.out = root >= 0 ? 0 : (uint64_t)me * out_piece;
            } else {
                l.dst = t->stage;
                l.out = root >= 0 ? 0 : (uint64_t)me * len;
            }
            if ((st = symm__coll_launch(&l, stream)) != SYMM_SUCCESS)
                return st;
            if (!sym_r && (st = symm__coll_copy2d((char *)recv + off, root >= 0 ? len : out_piece, t->stage, len,
                                                  len, (size_t)rows, stream)) != SYMM_SUCCESS)
                return st;
        }
        symm__coll_set_last(SYMM_COLL_ALGO_TWOSHOT, "direct", !sym_r);
    }
    return SYMM_SUCCESS;
}

symm_status_t symm_all_gather(const void *send, void *recv, size_t send_count, symm_dtype_t dtype,
                              symm_team_t team, symm_stream_t stream) {
    const char *call = "symm_all_gather";
    symm__coll_args_t a;
    symm_status_t st;
    if ((st = symm__coll_prologue(call, team, stream, dtype, NULL, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_AUTO,
                                  NULL, send_count, 1, &a)) != SYMM_SUCCESS ||
        send_count == 0)
        return st;
    /* in place: send is this PE's piece of recv */
    if ((st = symm__coll_check_pair(call, send, a.nbytes, recv, a.total, 1,
                         (uintptr_t)recv + (uint64_t)a.t->ctx.my_pe * a.nbytes,
                         "send overlaps recv other than at recv + my_pe * send_count")) != SYMM_SUCCESS)
        return st;
    return move(a.t, call, send, recv, a.nbytes, 0, a.nbytes, -1, &a.lim, stream);
}

symm_status_t symm_all_to_all(const void *send, void *recv, size_t count, symm_dtype_t dtype, symm_team_t team,
                              symm_stream_t stream) {
    const char *call = "symm_all_to_all";
    symm__coll_args_t a;
    symm_status_t st;
    if ((st = symm__coll_prologue(call, team, stream, dtype, NULL, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_AUTO,
                                  NULL, count, 1, &a)) != SYMM_SUCCESS ||
        count == 0)
        return st;
    if ((st = symm__coll_check_pair(call, send, a.total, recv, a.total, 0, 0,
                         "send and recv overlap (all-to-all is not in place)")) != SYMM_SUCCESS)
        return st;
    return move(a.t, call, send, recv, a.nbytes, a.nbytes, a.nbytes, -1, &a.lim, stream);
}

symm_status_t symm_broadcast(const void *send, void *recv, size_t count, symm_dtype_t dtype, int root,
                             symm_team_t team, symm_stream_t stream) {
    const char *call = "symm_broadcast";
    symm__coll_args_t a;
    symm__coll_team_t *t;
    uint64_t nbytes;
    symm_status_t st;
    if ((st = symm__coll_prologue(call, team, stream, dtype, NULL, SYMM_DTYPE_DEFAULT, SYMM_COLL_ALGO_AUTO,
                                  &root, count, 0, &a)) != SYMM_SUCCESS ||
        count == 0)
        return st;
    t = a.t;
    nbytes = a.nbytes;
    /* send is read on the root only (checked there before recv, as before) */
    if (root == t->ctx.my_pe) {
        if ((st = symm__coll_check_buf(call, "send", send, nbytes)) != SYMM_SUCCESS)
            return st;
        if (send != recv && symm__coll_overlap(send, nbytes, recv, nbytes))
            return symm__error(SYMM_ERR_INVALID_ARG, "%s: send and recv overlap without being equal", call);
    } else {
        send = NULL; /* read on the root only */
    }
    if ((st = symm__coll_check_buf(call, "recv", recv, nbytes)) != SYMM_SUCCESS)
        return st;
    return move(t, call, send, recv, nbytes, 0, 0, root, &a.lim, stream);
}

/* ---- all_to_allv ------------------------------------------------------------------------ */

symm_status_t symm_all_to_allv(const void *send, const size_t *send_counts, const size_t *send_displs, void *recv,
                               const size_t *recv_counts, const size_t *recv_displs, symm_dtype_t dtype,
                               symm_team_t team, symm_stream_t stream) {
    const char *call = "symm_all_to_allv";
    symm__coll_team_t *t = NULL;
    symm__coll_launch_t l;
    uint64_t words[4 * SYMM_COLL_MAX_PES];
    uint64_t sext = 0, rext = 0, b = 0;
    uint32_t esz = 0;
    int n, p, sym_r;
    symm_status_t st;
    symm__error_clear();
    if ((st = symm__coll_team_get(team, stream, call, &t)) != SYMM_SUCCESS)
        return st;
    if ((st = symm__coll_check_dtype(call, dtype, &esz)) != SYMM_SUCCESS)
        return st;
    if (t->far)
        return symm__error(SYMM_ERR_UNSUPPORTED, "%s: the team has PEs outside the load/store window, and "
                           "neither NVSHMEM nor NCCL has an all-to-allv", call);
    if (!send_counts || !send_displs || !recv_counts || !recv_displs)
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: a count or displacement array is NULL", call);
    n = t->ctx.n_pes;
    for (p = 0; p < n; p++) {
        uint64_t e = 0;
        if ((st = symm__coll_bytes_of(call, send_counts[p], esz, 2, &b)) != SYMM_SUCCESS ||
            (st = symm__coll_bytes_of(call, send_displs[p], esz, 2, &e)) != SYMM_SUCCESS)
            return st;
        if (b && e + b > sext)
            sext = e + b;
        if ((st = symm__coll_bytes_of(call, recv_counts[p], esz, 2, &b)) != SYMM_SUCCESS ||
            (st = symm__coll_bytes_of(call, recv_displs[p], esz, 2, &e)) != SYMM_SUCCESS)
            return st;
        if (b && e + b > rext)
            rext = e + b;
        words[p] = send_counts[p];
        words[n + p] = send_displs[p];
        words[2 * n + p] = recv_counts[p];
        words[3 * n + p] = recv_displs[p];
    }
    if (sext && (st = symm__coll_check_buf(call, "send", send, sext)) != SYMM_SUCCESS)
        return st;
    if (rext && (st = symm__coll_check_buf(call, "recv", recv, rext)) != SYMM_SUCCESS)
        return st;
    if (symm__coll_overlap(send, sext, recv, rext))
        return symm__error(SYMM_ERR_INVALID_ARG, "%s: send and recv overlap", call);
    /* a PE that receives nothing still publishes a dst to the peers' heap
     * check: the stage stands in for it (nothing lands there) */
    sym_r = rext != 0 && symm__coll_in_heap(recv, rext);
    if (!sym_r && rext > SYMM__COLL_STAGE_BYTES)
        return symm__error(SYMM_ERR_INVALID_ARG,
                           "%s: recv is not symmetric and its extent (%llu bytes) exceeds the staging area "
                           "(%zu bytes): allocate it with symm_malloc", call, (unsigned long long)rext,
                           SYMM__COLL_STAGE_BYTES);
    /* The block count must be the same on every PE (block b handshakes only
     * with block b of the peers, and each slot counts its own calls), so it
     * cannot depend on this PE's counts: a PE sending less launched fewer
     * blocks, the others' extra blocks waited forever (the move-part hang of
     * GPU run 3) or desynchronised those slots' call counters. */
    base_launch(&l, t, SYMM__CK_A2AV_DIRECT, symm__coll_direct_blocks(t, SYMM__COLL_STAGE_BYTES));
    l.dst = sym_r ? recv : t->stage;
    l.src = send;
    l.esz = esz;
    l.a2av = words;
    if ((st = symm__coll_launch(&l, stream)) != SYMM_SUCCESS)
        return st;
    if (!sym_r)
        for (p = 0; p < n; p++)
            if (recv_counts[p] &&
                (st = symm__coll_copy((char *)recv + recv_displs[p] * esz, t->stage + recv_displs[p] * esz,
                                      recv_counts[p] * esz, stream)) != SYMM_SUCCESS)
                return st;
    symm__coll_set_last(SYMM_COLL_ALGO_TWOSHOT, "direct", !sym_r && rext != 0);
    return SYMM_SUCCESS;
}

