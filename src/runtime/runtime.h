/*
 * runtime.h - the process-wide state of an initialised symm, shared by the
 * files of src/runtime (init, teams, malloc, barriers). Modules above the
 * runtime use src/runtime/team.h instead.
 */
#ifndef SYMM_RUNTIME_H
#define SYMM_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "symm/symm.h"
#include "backend/backend.h"
#include "bootstrap/bootstrap.h"
#include "core/env.h"
#include "core/log.h"
#include "heap/heap.h"
#include "runtime/team.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Internal symmetric scratch per team, for the stream collectives. */
#define SYMM__TEAM_SCRATCH_BYTES ((size_t)32 << 20)
/* Barrier words are 64-bit (epochs never wrap). */
#define SYMM__BARRIER_WORD_BYTES 8u

struct symm_team {
    int my_pe, n_pes;
    int *world_pe;            /* world PE of each team PE (ascending) */
    size_t barrier_off;       /* heap offsets of the internal blocks */
    size_t scratch_off;
    symm_ctx_t host_ctx;      /* what d_ctx holds */
    symm_ctx_t *d_ctx;        /* device-visible copy (backend dev_alloc) */
    symm__team_backend_t be;  /* the backend's state of the team (team_open) */
    int be_open;
    struct {                  /* state of the modules above (team.h) */
        const void *key;
        void *state;
        void (*fini)(void *state);
    } ext[SYMM__TEAM_EXT_MAX];
    int n_ext;
};

typedef struct symm__runtime {
    int initialized;
    symm__bootstrap_t *boot;
    symm__ipc_t *ipc;
    int rank, nranks;
    int n_node, node_me;
    int *node_ranks;          /* world rank of node PE i */

    symm__backend_t *be;
    volatile uint32_t *abort_host;
    uint64_t abort_dev;
    size_t wait_report_off;   /* heap offset of the word behind symm_ctx_t.wait_report */

    int heap_ready;           /* symm__heap_setup succeeded (src/heap holds the heap) */
    struct symm_team world, node;
} symm__runtime_t;

extern symm__runtime_t symm__rt;

/* symm__agree (team.h): symm__bootstrap_agree over the world. */

/* Wait for this PE's device work; a CUDA failure there (a trapped kernel)
 * is reported to every PE before it is returned (`what` names the call). */
symm_status_t symm__synchronize_or_report(const char *what);

/* Teams: build the world and node teams and their device contexts, free
 * them (each module's team state first, team.h). symm__teams_update_heap_size
 * refreshes the contexts after growth (the heap's on_grow hook). */
symm_status_t symm__teams_create(void);
/* Set up the modules registered with symm_backend_module_source (init, and
 * each registration after it). */
void symm__backend_modules_init(void);
symm_status_t symm__teams_update_heap_size(void *unused);
void symm__teams_destroy(void);

/* Guard of every public call that needs an initialised runtime. */
#define SYMM__REQUIRE_INIT(what)                                                         \
    do {                                                                                 \
        symm__error_clear();                                                             \
        if (!symm__rt.initialized)                                                       \
            return symm__error(SYMM_ERR_NOT_INITIALIZED, "%s: symm is not initialized",  \
                               what);                                                    \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif /* SYMM_RUNTIME_H */
