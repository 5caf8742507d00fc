/*
 * coll_choose.c - the stream collectives' choices: AUTO's algorithm, the
 * block counts of each kernel, whether a call takes the copy engines, and
 * the tuning hooks (bench, tests) that move them.
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

static int g_direct_blocks;
static uint64_t g_region_units = SYMM__COLL_REGION_UNITS;
static int g_push_blocks, g_push_slots;

/* The older hooks: a value of 0 drops the override. */
static void ovr(const char *name, uint64_t value) {
    (void)(value ? symm__coll_tune_set(name, value) : symm__coll_tune_clear(name));
}

void symm__coll_tune(int direct_blocks, uint64_t packet_max, uint64_t oneshot_max) {
    g_direct_blocks = direct_blocks > 0 && direct_blocks <= SYMM_COLL_MAX_BLOCKS - 1 ? direct_blocks : 0;
    ovr("packet_max", packet_max);
    ovr("oneshot_max", oneshot_max);
}

void symm__coll_tune_push(uint64_t ar_min, uint64_t rs_min, int blocks, int slots) {
    ovr("push_ar_min", ar_min);
    ovr("push_rs_min", rs_min);
    g_push_slots = slots > 0 && slots <= (int)SYMM__COLL_PUSH_SLOTS ? slots : 0;
    g_push_blocks = blocks > 0 && blocks <= (int)SYMM__COLL_PUSH_SLOTS ? blocks : 0;
}

uint32_t symm__coll_push_slots(void) { return g_push_slots ? (uint32_t)g_push_slots : SYMM__COLL_PUSH_SLOTS; }

void symm__coll_tune_units(uint32_t units) { g_region_units = units ? units : SYMM__COLL_REGION_UNITS; }

void symm__coll_tune_ar_packet(uint64_t two_min, uint64_t packet_max) {
    ovr("ar_packet2_min", two_min);
    ovr("ar_packet_max", packet_max);
}

void symm__coll_tune_ar_stores(uint64_t max) { ovr("ar_stores_max", max); }

void symm__coll_tune_bcast(uint64_t hop1_max, uint64_t packet_max) {
    ovr("bcast_hop1_max", hop1_max);
    ovr("bcast_packet_max", packet_max);
}

/* ---- AUTO's algorithm ------------------------------------------------------------- */

symm_coll_algo_t symm__coll_auto_ar(const symm__coll_args_t *a, int n) {
    const uint64_t nbytes = a->nbytes;
    return nbytes <= (n >= 3 ? a->lim.ar_packet_max : a->lim.packet_max) ? SYMM_COLL_ALGO_PACKET
         : nbytes <= a->lim.oneshot_max                                  ? SYMM_COLL_ALGO_ONESHOT
         : nbytes >= a->lim.push_ar_min                                  ? SYMM_COLL_ALGO_PUSH
                                                                         : SYMM_COLL_ALGO_TWOSHOT;
}

symm_coll_algo_t symm__coll_auto_rs(const symm__coll_args_t *a) {
    const uint64_t nbytes = a->nbytes;
    return nbytes <= a->lim.rs_packet_max  ? SYMM_COLL_ALGO_PACKET
         : nbytes <= a->lim.rs_oneshot_max ? SYMM_COLL_ALGO_ONESHOT
         : nbytes >= a->lim.push_rs_min    ? SYMM_COLL_ALGO_PUSH
                                           : SYMM_COLL_ALGO_TWOSHOT;
}

symm_coll_algo_t symm__coll_auto_move(uint64_t nbytes, uint64_t packet_max) {
    return nbytes <= packet_max ? SYMM_COLL_ALGO_PACKET : SYMM_COLL_ALGO_TWOSHOT;
}

/* ---- block counts ----------------------------------------------------------------- */

/* Blocks for `units` 16-byte region slots (one per packet word or one-shot
 * unit) when a block's region holds `per_block` of them: one per
 * SYMM__COLL_REGION_UNITS units (symm__coll_tune_units), so small calls
 * spread their remote stores over several SMs, and never more per block than
 * fit. 0 when even every slot's region is too small. */
int symm__coll_region_blocks_of(const symm__coll_team_t *t, uint64_t units, uint64_t per_block) {
    uint64_t nb, lim = t->ws.nbmax < (uint32_t)t->sm_cap ? t->ws.nbmax : (uint64_t)t->sm_cap;
    if (per_block == 0)
        return 0;
    nb = symm__coll_cdiv(units, g_region_units);
    if (nb < symm__coll_cdiv(units, per_block))
        nb = symm__coll_cdiv(units, per_block);
    if (nb < 1)
        nb = 1;
    if (nb > lim) {
        if (symm__coll_cdiv(units, per_block) > lim)
            return 0;
        nb = lim;
    }
    return (int)nb;
}

int symm__coll_region_blocks(const symm__coll_team_t *t, uint64_t units) {
    return symm__coll_region_blocks_of(t, units, t->ws.region / 16);
}

/* The two-hop packet broadcast cuts a slot's words into m parts and each
 * region holds the packets of one part (symm__c_bcast_packet2): a block
 * takes up to m regions' worth of words. */
int symm__coll_bcast2_blocks(const symm__coll_team_t *t, uint64_t words, int m) {
    return m < 2 ? 0 : symm__coll_region_blocks_of(t, words, (uint64_t)m * (t->ws.region / 16));
}

/* The two-shot packet all-reduce (symm__c_ar_packet2) puts a slot's share of
 * the longest piece (symm__c_split: ceil(longest / nb) words, the last slot
 * the rest) in each half of a region, and needs at least two words in every
 * slot, the last included, so that every piece reaches every slot. 0: it
 * cannot run. */
int symm__coll_ar_packet2_blocks(const symm__coll_team_t *t, uint64_t words) {
    uint64_t longest = symm__coll_cdiv(words, (uint64_t)t->ctx.n_pes), per_block = t->ws.region / 32;
    for (int nb = symm__coll_region_blocks_of(t, longest, per_block); nb > 0; nb--) {
        uint64_t per = symm__coll_cdiv(longest, (uint64_t)nb);
        if (per > per_block)
            return 0;
        if (longest >= (uint64_t)(nb - 1) * per + 2)
            return nb;
    }
    return 0;
}

/* Blocks of a direct kernel moving `bytes` per block slot row: one per
 * 16 KiB (a round of 2 vectors per thread), at most symm__coll_tune's value,
 * else SYMM_COLL_BLOCKS (checked by symm__coll_team_get), else SYMM__COLL_DIRECT_BLOCKS,
 * and never more than the team's share of SMs (symm_sm_share). It must come
 * out the same on every PE (block b handshakes with block b of the peers):
 * it depends only on the size and on settings every PE shares. */
int symm__coll_direct_blocks_max(const symm__coll_team_t *t, uint64_t bytes, int def_max) {
    uint64_t nb = symm__coll_cdiv(bytes, (uint64_t)SYMM__COLL_THREADS * 32);
    long long env = symm__env()->coll_blocks;
    int max = g_direct_blocks                                   ? g_direct_blocks
            : env > 0 && env < (long long)SYMM_COLL_MAX_BLOCKS ? (int)env
                                                                : def_max;
    if (max > t->sm_cap)
        max = t->sm_cap;
    if (nb < 1)
        nb = 1;
    return nb > (uint64_t)max ? max : (int)nb;
}

int symm__coll_direct_blocks(const symm__coll_team_t *t, uint64_t bytes) {
    return symm__coll_direct_blocks_max(t, bytes, SYMM__COLL_DIRECT_BLOCKS);
}

/* Blocks of a push kernel whose chunks are `chunk` bytes: one per buffer
 * (a step) up to the slots, or symm__coll_tune_push's or SYMM_COLL_BLOCKS's
 * cap. The same on every PE (sizes and shared settings). */
int symm__coll_push_blocks(const symm__coll_team_t *t, uint64_t chunk) {
    uint64_t slots = symm__coll_push_slots(), nb = symm__coll_cdiv(chunk, SYMM__COLL_PUSH_BUF(slots, t->ctx.n_pes));
    long long env = symm__env()->coll_blocks;
    uint64_t max = g_push_blocks                       ? (uint64_t)g_push_blocks
                 : env > 0 && env < (long long)slots ? (uint64_t)env
                                                      : slots;
    if (max > slots)
        max = slots;
    if (max > (uint64_t)t->sm_cap)
        max = (uint64_t)t->sm_cap;
    if (nb < 1)
        nb = 1;
    return (int)(nb > max ? max : nb);
}

/* Largest piece (a multiple of 16 bytes) of which `rows` fit the stage.
 * Large calls are cut into pieces of this size whether or not this PE
 * stages: the number of launches must be the same on every PE, and a peer
 * may stage when this PE does not (within a launch, the published addresses
 * make mixed buffer kinds work). */
uint64_t symm__coll_stage_piece(uint64_t rows) { return ((uint64_t)SYMM__COLL_STAGE_BYTES / rows) & ~(uint64_t)15; }


/* ---- the copy-engine paths -------------------------------------------------------- */

/* Can this team take a copy-engine path at all? A team that is the whole
 * world (one node: world PE p is node PE p, which the peer addresses of the
 * copies rely on) with its copy-engine state. */
int symm__coll_ce_ok(const symm__coll_team_t *t) {
    return t->ce != NULL && t->ctx.n_pes == symm_n_pes() && t->ctx.n_pes <= SYMM_COLL_MAX_PES;
}

/*
 * May this call copy into the peers' recv on the copy engines? Only on a
 * team that can (symm__coll_ce_ok), and only when recv is in the symmetric heap at the
 * same offset on every PE: the copies write to the peer's copy of this PE's
 * address (symm_ptr), so a PE whose recv lies elsewhere would get its data
 * in the wrong place; and PEs may differ in which of their buffers are
 * symmetric, but a PE whose recv is not must not be left in a kernel's
 * handshake while its peers copy. Each PE's recv offset is exchanged through
 * the bootstrap (a host round trip between the PEs, only for calls this
 * large; under graph capture it happens once, at capture, which fixes the
 * buffers). The caller has checked the size against its limit.
 */
symm_status_t symm__coll_want_ce(symm__coll_team_t *t, const char *call, const void *recv, uint64_t recv_bytes,
                                 int *out) {
    uint64_t mine, all[SYMM_COLL_MAX_PES];
    int n = t->ctx.n_pes;
    symm_status_t st;
    *out = 0;
    if (!symm__coll_ce_ok(t))
        return SYMM_SUCCESS;
    /* recv's heap offset, or UINT64_MAX outside the heap */
    mine = symm__coll_in_heap(recv, recv_bytes) ? (uint64_t)(uintptr_t)recv - t->ctx.heap_base : UINT64_MAX;
    if ((st = symm_host_allgather(&mine, all, sizeof(mine))) != SYMM_SUCCESS)
        return symm__error(st, "%s: agreeing on the copy-engine path: %s", call, symm_strerror(st));
    for (int p = 0; p < n; p++)
        if (all[p] == UINT64_MAX || all[p] != all[0])
            return SYMM_SUCCESS;
    *out = 1;
    return SYMM_SUCCESS;
}

