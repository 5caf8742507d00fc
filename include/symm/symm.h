/*
 * symm.h - the host API of symm.
 *
 * symm gives every GPU of a job (a "PE") the same symmetric heap: an
 * allocation made collectively lands at the same offset on every PE, and
 * kernels read, write, signal and reduce into the copies of the other PEs
 * directly (see symm_device.h). This header is the whole host-side surface.
 *
 * Conventions: every call returns symm_status_t (0 success, negative error;
 * symm_strerror() names it, symm_last_error() gives the detailed message);
 * output arguments come last and are written only on success. "Collective"
 * means every PE of the world must make the call, in the same order, with
 * the same arguments unless the call says otherwise; a PE whose arguments
 * differ is reported on every PE (SYMM_ERR_MISMATCH) and nothing is done.
 *
 * Thread safety: the host API is meant to be driven by one thread per process;
 * calls from several threads at once must be serialised by the caller.
 */
#ifndef SYMM_H
#define SYMM_H

#include <stddef.h>
#include <stdint.h>

#include "symm/symm_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A CUDA stream, declared here so this header needs no CUDA header:
 * cudaStream_t and CUstream are both `struct CUstream_st *`. NULL is the
 * legacy default stream. */
struct CUstream_st;
typedef struct CUstream_st *symm_stream_t;

#define SYMM_VERSION_MAJOR 0
#define SYMM_VERSION_MINOR 1
#define SYMM_VERSION_PATCH 0

/* ======================================================================== */
/* Errors and logging                                                        */
/* ======================================================================== */

/* Name of a status code, e.g. "SYMM_ERR_MISMATCH: arguments differ across
 * PEs". Never NULL; unknown codes give "unknown symm status". Any thread, any
 * time. */
const char *symm_strerror(symm_status_t status);

/* The message of the last error raised on the calling thread (names the PE,
 * the call and the reason), or "" if none. Valid until the next symm call on
 * this thread. Any thread, any time. */
const char *symm_last_error(void);

/* ======================================================================== */
/* Initialisation                                                            */
/* ======================================================================== */

#define SYMM_UNIQUE_ID_BYTES 128

/* An opaque token naming one job's bootstrap root; copy it by value. */
typedef struct symm_unique_id {
    char internal[SYMM_UNIQUE_ID_BYTES];
} symm_unique_id_t;

/*
 * symm_init - join the job described by the environment.
 * Every PE calls it once. Reads, in order of preference:
 *   RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE/MASTER_ADDR/MASTER_PORT
 *     (torchrun, symmrun),
 *   OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK/_LOCAL_SIZE (mpirun),
 *   SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID (srun);
 * with no launcher variables it runs as a single PE. The bootstrap root
 * listens on SYMM_BOOTSTRAP_PORT, else MASTER_PORT + 1 (MASTER_PORT itself
 * is torch's store), else a port derived from the job id, on MASTER_ADDR
 * (default 127.0.0.1). Each PE uses GPU LOCAL_RANK % device_count.
 * Errors: SYMM_ERR_ALREADY_INITIALIZED, SYMM_ERR_ENV (bad or incomplete
 * variables), SYMM_ERR_BOOTSTRAP, SYMM_ERR_TIMEOUT (peers did not arrive
 * within SYMM_BOOTSTRAP_TIMEOUT), SYMM_ERR_NO_DEVICE, SYMM_ERR_NO_PEER_ACCESS
 * (names the pair), SYMM_ERR_CUDA.
 */
symm_status_t symm_init(void);

/*
 * symm_get_unique_id - create a bootstrap root and return its id.
 * Called by exactly one process (the future rank 0) before symm_init_with_uid;
 * the caller distributes the id to the others (e.g. a torch.distributed
 * broadcast). The root socket listens from this call until init completes.
 * Errors: SYMM_ERR_ALREADY_INITIALIZED, SYMM_ERR_BOOTSTRAP.
 */
symm_status_t symm_get_unique_id(symm_unique_id_t *uid);

/*
 * symm_init_with_uid - join the job whose root made `uid`, as PE `rank` of
 * `nranks`. Every PE calls it (rank 0 in the process that made the id).
 * Errors: as symm_init, plus SYMM_ERR_INVALID_ARG (rank outside [0,nranks)).
 */
symm_status_t symm_init_with_uid(const symm_unique_id_t *uid, int rank, int nranks);

/*
 * symm_finalize - release everything symm holds: heap mappings, device
 * memory, contexts, sockets, threads. Collective (it ends with a barrier so
 * no PE unmaps memory a peer still reads). Allocations still live are freed.
 * After it, symm_init may be called again. Errors: SYMM_ERR_NOT_INITIALIZED;
 * SYMM_ERR_PEER_DIED if a peer is gone (local resources are released anyway).
 */
symm_status_t symm_finalize(void);

/* Non-zero between a successful init and finalize. Any thread. */
int symm_initialized(void);

/* This PE's index in the world, and the number of PEs; -1 before init. */
int symm_my_pe(void);
int symm_n_pes(void);

/* The CUDA device ordinal this PE uses; -1 before init or without a GPU. */
int symm_device(void);

/*
 * PEs sharing one GPU. Several PEs (processes) may run on one GPU: it is how
 * kernels are developed on one GPU (README, "Develop on one GPU"). Two PEs
 * take turns on a GPU without MPS (correct, slow); more need an MPS daemon.
 * Under MPS the PEs' kernels run side by side, so a grid that waits on
 * peers must leave room for the waiting grids of the other PEs on its GPU,
 * or it holds SMs that a peer's grid needs to make the progress it waits for.
 *
 * symm_gpu_pes: *npes = the PEs of this node on this PE's GPU, this one
 * included (1: it has the GPU to itself).
 * symm_sm_share: *sms = the SMs a grid of this PE that waits on peers may
 * fill: this process's SMs (fewer under MPS with
 * CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) and at most the GPU's SMs divided
 * among the PEs on it; the least such value over all PEs, so it is the same
 * on every PE. Size such grids (device barriers, grid-scope collectives,
 * anything spinning on a signal) at most one block per shared SM; symm's
 * own collectives do. Equal to the SM count when the GPU is not shared.
 * Errors: SYMM_ERR_NOT_INITIALIZED, SYMM_ERR_INVALID_ARG (NULL),
 * SYMM_ERR_UNSUPPORTED (symm_sm_share with a backend that has no GPU).
 */
symm_status_t symm_gpu_pes(int *npes);
symm_status_t symm_sm_share(int *sms);

/* ======================================================================== */
/* Backends (docs/backends.md)                                               */
/* ======================================================================== */

/* The backend this run uses ("native", "nvshmem", "nccl", "host"; chosen with
 * SYMM_BACKEND), or NULL before init. */
const char *symm_backend_name(void);

/* *caps = what the backend does in this run (enum symm_backend_cap bits).
 * Errors: SYMM_ERR_NOT_INITIALIZED, SYMM_ERR_INVALID_ARG (NULL). */
symm_status_t symm_backend_caps(uint32_t *caps);

/*
 * symm_backend_module_init - make a loaded GPU module (a CUmodule) whose
 * kernels call the backend's device library ready for them: NVSHMEM keeps
 * its device state in every such module (nvshmemx_cumodule_init); nothing
 * to do on the other backends, nor for a module that does not link the
 * library. symm.triton calls it for every module Triton loads; CUDA C
 * programs need not (symm_backend_module_source). Local.
 * Errors: SYMM_ERR_NOT_INITIALIZED, SYMM_ERR_INVALID_ARG (NULL),
 * SYMM_ERR_UNSUPPORTED (the library refused the module).
 */
symm_status_t symm_backend_module_init(void *cumodule);

/* Register a function that returns a CUDA function (a CUfunction) of a
 * module to set up as above, at init or at once when symm is up; the
 * device header does this for CUDA C programs built with the nvshmem
 * backend (include/symm/device/backend/nvshmem.h). Any thread, any time. */
void symm_backend_module_source(void *(*find)(void));

/* ======================================================================== */
/* Teams                                                                     */
/* ======================================================================== */

/* A team is an ordered set of PEs with its own device context. World holds
 * every PE; node holds the PEs that can load/store each other's heaps (the
 * PEs of this node). Handles stay valid until symm_finalize. */
typedef struct symm_team *symm_team_t;

symm_team_t symm_team_world(void); /* NULL before init */
symm_team_t symm_team_node(void);  /* NULL before init */

/* This PE's index in `team`, and the team's size; -1 for a NULL team. */
int symm_team_my_pe(symm_team_t team);
int symm_team_n_pes(symm_team_t team);

/* The index in `dst` of PE `pe` of `src`, or -1 if it is not a member or an
 * argument is invalid. */
int symm_team_translate_pe(symm_team_t src, int pe, symm_team_t dst);

/*
 * symm_team_ctx - the device context of `team` (a device pointer, valid until
 * finalize) to pass to kernels. Not collective.
 * Errors: SYMM_ERR_NOT_INITIALIZED, SYMM_ERR_INVALID_ARG.
 */
symm_status_t symm_team_ctx(symm_team_t team, const symm_ctx_t **d_ctx);

/* The same context by value, for kernels that take it as a parameter. The
 * copy goes stale when the heap grows (heap_size); the pointer form does not. */
symm_status_t symm_team_ctx_copy(symm_team_t team, symm_ctx_t *ctx);

/* Shorthand for the world team's device context. */
symm_status_t symm_ctx(const symm_ctx_t **d_ctx);

/* ======================================================================== */
/* Symmetric memory                                                          */
/* ======================================================================== */

/*
 * symm_malloc - allocate `size` bytes of the symmetric heap on every PE.
 * Collective: every PE passes the same size and receives the same offset in
 * its heap (so the same pointer). The heap grows on demand: there is no heap
 * size to choose, only SYMM_HEAP_LIMIT to cap it. Memory is 256-byte aligned
 * and uninitialised. size 0 returns NULL with success.
 * Errors: SYMM_ERR_NOT_INITIALIZED; SYMM_ERR_MISMATCH (sizes differ; every PE
 * gets it, with each PE's size in the message); SYMM_ERR_HEAP_EXHAUSTED (the
 * heap or device memory is full on some PE; nothing is leaked, on any PE);
 * SYMM_ERR_PEER_DIED; SYMM_ERR_CUDA.
 */
symm_status_t symm_malloc(size_t size, void **ptr);

/* As symm_malloc for count * size bytes, zeroed on every PE before return.
 * Errors: as symm_malloc, plus SYMM_ERR_INVALID_ARG if count * size overflows. */
symm_status_t symm_calloc(size_t count, size_t size, void **ptr);

/* As symm_malloc with `alignment` (a power of two) instead of 256.
 * Errors: as symm_malloc, plus SYMM_ERR_INVALID_ARG for a bad alignment;
 * SYMM_ERR_MISMATCH also covers the alignment. */
symm_status_t symm_align(size_t alignment, size_t size, void **ptr);

/*
 * symm_free - release an allocation on every PE. Collective, with the same
 * pointer on every PE; it synchronises this PE's device and ends with a
 * barrier, so no PE still touches the block when it is reused. NULL is a
 * no-op (still collective).
 * Errors: SYMM_ERR_NOT_SYMMETRIC (outside the heap), SYMM_ERR_INVALID_POINTER
 * (not the start of a live allocation: double free), SYMM_ERR_MISMATCH.
 */
symm_status_t symm_free(void *ptr);

/*
 * symm_ptr - the address, usable by this PE's GPU, of PE `pe`'s copy of the
 * symmetric object at `ptr`; NULL when `ptr` is not in the heap, `pe` is not a
 * valid world PE, or that PE's memory cannot be loaded/stored from here.
 * symm_ptr(p, symm_my_pe()) == p. Not collective; any thread after init.
 */
void *symm_ptr(const void *ptr, int pe);

/* Bytes of heap currently mapped on each PE, and the most it may grow to. */
symm_status_t symm_heap_info(size_t *mapped, size_t *limit);

/* ======================================================================== */
/* Synchronisation                                                           */
/* ======================================================================== */

/*
 * symm_barrier_all - wait for all of this PE's device work to finish
 * (cudaDeviceSynchronize), then until every PE has reached the barrier.
 * On return every store any PE's kernels made before its barrier is visible
 * to every PE. Collective. Errors: SYMM_ERR_PEER_DIED, SYMM_ERR_CUDA.
 */
symm_status_t symm_barrier_all(void);

/*
 * symm_barrier_all_on_stream - a barrier across all PEs, ordered on `stream`:
 * work queued on `stream` before it completes (and its stores become visible
 * to every PE) before work queued after it starts, on every PE. No host
 * synchronisation; captures into CUDA graphs. Collective.
 * Errors: SYMM_ERR_NOT_INITIALIZED, SYMM_ERR_CUDA.
 */
symm_status_t symm_barrier_all_on_stream(symm_stream_t stream);

/* As symm_barrier_all_on_stream for the members of `team` only. */
symm_status_t symm_team_barrier_on_stream(symm_team_t team, symm_stream_t stream);

/* ======================================================================== */
/* Host-side exchange over the bootstrap network                             */
/* ======================================================================== */

/* Small host-side collectives for exchanging setup data between PEs (for
 * example an NCCL or NVSHMEM unique id). Collective; `nbytes` must be equal on
 * every PE (else SYMM_ERR_MISMATCH). Not for bulk data. */
symm_status_t symm_host_broadcast(void *buf, size_t nbytes, int root);
symm_status_t symm_host_allgather(const void *mine, void *all, size_t nbytes);

/* ======================================================================== */
/* Environment                                                               */
/* ======================================================================== */

/* Print every environment variable symm reads (name, type, default, current
 * value, help) to `stream` (a FILE *); what the symm-info tool shows. */
void symm_print_env(void *stream);

/* Non-zero when this process may create a multicast (NVLS) object: only if
 * SYMM_ENABLE_MULTICAST=1 and none of NCCL_NVLS_ENABLE=0,
 * NVSHMEM_DISABLE_NVLS=1, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 is set
 * (docs/design.md decision 7). Every multimem path checks it. */
int symm_multicast_allowed(void);

#ifdef __cplusplus
}
#endif

#include "symm/symm_coll.h"
#include "symm/symm_trace.h"

#endif /* SYMM_H */
