/*
 * team.h - what the modules above the runtime (src/coll, src/moe...) use of
 * a team: its context, per-team state that the runtime tears down with the
 * team, and agreement among the PEs. They allocate their buffers from the
 * heap (heap/heap.h), not through the public symm_malloc.
 */
#ifndef SYMM_RUNTIME_TEAM_H
#define SYMM_RUNTIME_TEAM_H

#include "symm/symm.h"
#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Modules that may keep state on one team. */
#define SYMM__TEAM_EXT_MAX 8

/* The team a call names (NULL: the world team), or NULL when symm is not
 * initialised or `team` is not a team handle. */
symm_team_t symm__team_resolve(symm_team_t team);

/* Teams by index (world, node, ...), for a module that visits its state on
 * every team; NULL past the last or before init. */
symm_team_t symm__team_at(int i);

/* The team's context as the host keeps it (heap_size follows the heap's
 * growth; the other fields never change) and the device copy kernels read. */
const symm_ctx_t *symm__team_host_ctx(symm_team_t team);
const symm_ctx_t *symm__team_dev_ctx(symm_team_t team);

/* A module's state on `team`, found by `key` (the address of a static object
 * of the module). The runtime calls fini(state) when the team goes away
 * (symm_finalize, a failed init), modules in reverse order of registration,
 * before the heap is unmapped: fini releases host resources (streams,
 * events, memory), the heap blocks go with the heap.
 * Errors: SYMM_ERR_INVALID_ARG (no such team, key already set),
 * SYMM_ERR_INTERNAL (more than SYMM__TEAM_EXT_MAX modules). */
symm_status_t symm__team_ext_set(symm_team_t team, const void *key, void *state, void (*fini)(void *state));
void *symm__team_ext_get(symm_team_t team, const void *key);

/* A stream collective of `team` through the backend's library (the team has
 * PEs outside its load/store window). Collective. Errors: the backend's, or
 * SYMM_ERR_UNSUPPORTED when it has no collectives. */
symm_status_t symm__team_backend_coll(symm_team_t team, const symm__be_coll_t *c, symm_stream_t stream);

/* The backend's operations, for what a module asks of it (name,
 * kernel_caps); NULL when symm is not initialised. */
const symm__backend_ops_t *symm__runtime_backend(void);

/* The device trace (src/trace): point every team's context at this PE's
 * trace state (`ring`, a device address; 0: no trace), host copy and device
 * copy. Local; the caller makes sure no kernel runs meanwhile. */
symm_status_t symm__teams_set_trace(uint64_t ring);

/* Copy between host and this PE's device (or heap) memory and wait for it:
 * the backend's synchronous copy (host memory on the host backend). */
symm_status_t symm__dev_copy(void *dst, const void *src, size_t nbytes);

/* Hooks of a module above the runtime: after_init runs at the end of every
 * successful init (collective: on every PE, symm initialised), before_finalize
 * at the start of symm_finalize (still initialised, before the device is
 * drained). Registered once per process (a constructor of the module). */
void symm__runtime_hooks_add(void (*after_init)(void), void (*before_finalize)(void));

/* symm__bootstrap_agree over the world: every PE gets the same status. */
symm_status_t symm__agree(symm_status_t mine, symm_status_t prefer, const char *what);

#ifdef __cplusplus
}
#endif

#endif /* SYMM_RUNTIME_TEAM_H */
