/*
 * symm_trace.h - the device trace, host side (docs/trace.md). Included by
 * symm.h.
 *
 * Code compiled with SYMM_TRACE (CUDA C with -DSYMM_TRACE, the DSLs through
 * the traced bitcode, libsymm's own kernels in a build configured with
 * -DSYMM_TRACE=ON) records every put, get, signal, wait, barrier, fence,
 * quiet, device collective and user region (symm_trace_begin/_end) of each
 * block, with %globaltimer stamps, into a buffer of this PE while a trace
 * records. symm_trace_dump gathers every PE's events, aligns the PEs' clocks
 * and writes one Chrome-trace JSON file (Perfetto, chrome://tracing; the
 * symm-trace command plots and summarises it).
 *
 * Start, stop and dump are collective over the world (every PE calls them,
 * in the same order) and synchronise this PE's device first: kernels still
 * running when a trace starts or stops record partly. Kernels read the
 * trace through the team context (symm_ctx_t.trace), so a kernel captured
 * into a CUDA graph records while a trace records when it reads the context
 * through the device pointer (symm_ctx, symm_team_ctx); the stream
 * collectives and MoE calls copy the context into their launches, so their
 * graphs record only if captured while a trace recorded.
 *
 * SYMM_TRACE_FILE=path records from symm_init to symm_finalize and writes
 * `path` at finalize, with no code change ("-": records and writes nothing,
 * logging this PE's kept and dropped events at level info: the cost of
 * recording a run).
 */
#ifndef SYMM_TRACE_H
#define SYMM_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "symm/symm_types.h"
#include "symm/symm_trace_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Start recording, into a buffer of `capacity` events per PE (64 bytes
 * each, in the symmetric heap; 0: SYMM_TRACE_CAPACITY, default 1048576).
 * Events of an earlier trace are discarded. The PEs' clocks are measured
 * now and again at the stop or dump. Collective; every PE passes the same
 * capacity. Errors: SYMM_ERR_INVALID_ARG (already recording, capacity too
 * large), SYMM_ERR_MISMATCH (capacities differ), SYMM_ERR_HEAP_EXHAUSTED,
 * SYMM_ERR_CUDA. */
symm_status_t symm_trace_start(size_t capacity);

/* Stop recording; the events stay for symm_trace_dump until the next start.
 * Collective. Errors: SYMM_ERR_INVALID_ARG (not recording), SYMM_ERR_CUDA. */
symm_status_t symm_trace_stop(void);

/* Write the events of every PE to `path` (PE 0 writes it; the other PEs'
 * `path` is not used and may be NULL) as Chrome-trace JSON: one process per
 * PE, one track per block (and per recording thread of a block), waits as
 * slices named by what they waited for, clocks aligned to PE 0's. Recording
 * goes on if it was on. Collective. Errors: SYMM_ERR_INVALID_ARG (no trace
 * started, or PE 0's path is NULL or cannot be written: every PE gets the
 * error), SYMM_ERR_CUDA, SYMM_ERR_NO_MEMORY. */
symm_status_t symm_trace_dump(const char *path);

/* Name the user regions with this id (symm_trace_begin/_end) in dumps
 * ("region <id>" otherwise). Local: PE 0's names are written. name NULL
 * removes it. Errors: SYMM_ERR_INVALID_ARG (id < 0, name over 63 bytes). */
symm_status_t symm_trace_name(int name_id, const char *name);

/* Name the words [addr, addr + nbytes) of this PE's memory in dumps: a wait
 * on them is named `name` and, when pe >= 0, "from PE pe". For flags that no
 * traced call writes (a copy engine, the host, code built without the
 * trace), whose waits the dump cannot otherwise attribute. Local; kept until
 * finalize; a later label wins where two overlap; name NULL removes the
 * label at addr. Errors: SYMM_ERR_INVALID_ARG (NULL addr, nbytes 0, pe
 * outside the world, name over 43 bytes, more than 128 labels). */
symm_status_t symm_trace_label(const void *addr, size_t nbytes, int pe, const char *name);

/* This PE's events of the current (or last) trace: kept, and dropped because
 * the buffer was full. Local; synchronises the device. Errors:
 * SYMM_ERR_INVALID_ARG (no trace started, NULL output), SYMM_ERR_CUDA. */
symm_status_t symm_trace_counts(uint64_t *recorded, uint64_t *dropped);

/* Non-zero while a trace records. */
int symm_trace_active(void);

/* Non-zero when libsymm's own kernels (stream collectives, MoE, the stream
 * barrier) were built with SYMM_TRACE (a build configured -DSYMM_TRACE=ON). */
int symm_trace_library_traced(void);

#ifdef __cplusplus
}
#endif

#endif /* SYMM_TRACE_H */
