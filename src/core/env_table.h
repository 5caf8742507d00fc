/*
 * env_table.h - the one table of environment variables symm reads.
 *
 * X(field, NAME, type, default, help). The parser (env.c) and the symm-info
 * listing are generated from it; add a variable by adding a row here and
 * reading symm__env()->field. Types: BOOL, INT, SIZE (bytes, with K/M/G/T
 * suffixes), SECONDS (a double), STRING, SECRET (a string symm-info does not
 * show), LOGLEVEL.
 */
#define SYMM__ENV_TABLE(X)                                                                   \
    X(log_level,          SYMM_LOG_LEVEL,          LOGLEVEL, "warn",                         \
      "log verbosity: error, warn, info or debug")                                          \
    X(backend,            SYMM_BACKEND,            STRING,   "native",                       \
      "backend: native (CUDA VMM + NVLink, one node), nvshmem or nccl (across nodes, "           \
      "docs/backends.md), host (CPU shared memory, for tests without a GPU)")                  \
    X(nvshmem_lib,        SYMM_NVSHMEM_LIB,        STRING,   "",                             \
      "nvshmem backend: libnvshmem_host.so.3 or its folder (default: the loader's path, then " \
      "the copy the build found)")                                                           \
    X(nccl_lib,           SYMM_NCCL_LIB,           STRING,   "",                             \
      "nccl backend: libnccl.so.2 or its folder (default: the loader's path, then the copy "  \
      "the build found)")                                                                    \
    X(wait_timeout,       SYMM_WAIT_TIMEOUT,       SECONDS,  SYMM__DEFAULT_WAIT_TIMEOUT,     \
      "deadline in seconds of every wait for another PE: device spin-waits stop the kernel with " \
      "a message, host collectives name the PE that did not arrive; 0 = none (default 600, " \
      "debug builds 60)")                                                                    \
    X(bootstrap_timeout,  SYMM_BOOTSTRAP_TIMEOUT,  SECONDS,  "120",                          \
      "how long init waits for all PEs to connect, in seconds")                              \
    X(peer_timeout,       SYMM_PEER_TIMEOUT,       SECONDS,  "5",                            \
      "a PE whose liveness connection is silent this long is declared dead, in seconds")     \
    X(abort_grace,        SYMM_ABORT_GRACE,        SECONDS,  "3",                            \
      "once a PE died, failed or is stuck, seconds this process gets to leave symm by itself "  \
      "(return the error, finalize or exit); then symm says so, naming the PE, and ends it "   \
      "with exit status 86 (a kernel answered by a stopped PE's GPU never returns); 0 = never") \
    X(bootstrap_addr,     SYMM_BOOTSTRAP_ADDR,     STRING,   "",                             \
      "address of the bootstrap root (default MASTER_ADDR, else 127.0.0.1)")                 \
    X(bootstrap_port,     SYMM_BOOTSTRAP_PORT,     INT,      "0",                            \
      "port of the bootstrap root (default MASTER_PORT + 1, else derived from the job id)") \
    X(bootstrap_secret,   SYMM_BOOTSTRAP_SECRET,   SECRET,   "",                             \
      "the job secret (16+ characters, the same on every PE; symmrun sets a random one): only " \
      "processes that hold it may join; unset: a key file in a private folder made for the " \
      "job under XDG_RUNTIME_DIR or TMPDIR or /tmp (one node)")                               \
    X(heap_reserve,       SYMM_HEAP_RESERVE,       SIZE,     "0",                            \
      "virtual bytes reserved per PE for the heap; 0 = the GPU's memory size, rounded up")  \
    X(heap_limit,         SYMM_HEAP_LIMIT,         SIZE,     "0",                            \
      "most bytes the heap may map per PE; 0 = the reservation (nvshmem and nccl map the "   \
      "heap whole at init: 0 = 1 GiB there)")                                                \
    X(heap_chunk,         SYMM_HEAP_CHUNK,         SIZE,     "256M",                         \
      "the heap grows in multiples of this many bytes")                                      \
    X(enable_multicast,   SYMM_ENABLE_MULTICAST,   BOOL,     "0",                            \
      "allow multicast (NVLS) objects; also needs NCCL_NVLS_ENABLE, NVSHMEM_DISABLE_NVLS and " \
      "TORCH_SYMM_MEM_DISABLE_MULTICAST not to disable them")                               \
    X(debug_force_remote, SYMM_DEBUG_FORCE_REMOTE, BOOL,     "0",                            \
      "testing: nvshmem/nccl backends treat no PE, this one included, as reachable by "      \
      "load/store (symm_ptr is NULL for all), so every device call and collective takes the " \
      "library's path")                                                                      \
    X(debug_nccl_gin,     SYMM_DEBUG_NCCL_GIN,     BOOL,     "0",                            \
      "testing: the nccl backend asks NCCL for GIN even when every rank is on one node")     \
    X(debug_deny_peer,    SYMM_DEBUG_DENY_PEER,    STRING,   "",                             \
      "testing: 'i:j' makes init treat node PEs i and j as having no peer access")           \
    X(coll_algo,          SYMM_COLL_ALGO,          STRING,   "",                             \
      "force a collective algorithm: oneshot, twoshot, packet, multimem, push (default: by size); " \
      "the same on every PE (init checks)") \
    X(coll_blocks,        SYMM_COLL_BLOCKS,        INT,      "0",                            \
      "most blocks of a direct stream collective (two-shot all-reduce, reduce-scatter, "    \
      "all-gather, all-to-all, broadcast, all_to_allv), 1..255, one per 16 KiB moved; 0 = "  \
      "built-in default (64; 128 for all-gather, all-to-all, broadcast). The same on every PE (init checks)") \
    X(coll_ce_min,        SYMM_COLL_CE_MIN,        SIZE,     "64M",                          \
      "pieces (bytes per peer) from which all-gather and all-to-all into symmetric buffers use " \
      "the copy engines; 0 = never. The same on every PE (init checks)")                     \
    X(coll_tune,          SYMM_COLL_TUNE,          STRING,   "",                             \
      "AUTO's limits of the stream collectives for every team size, 'name=bytes,...' (names: " \
      "SYMM__COLL_LIMITS in include/symm/contract/coll_auto.h; K/M/G suffixes; never), e.g. "  \
      "rs_ce_min=32M,bcast_ce_min=never; default: the table. The same on every PE (init checks)")\
    X(moe_ht_combine,     SYMM_MOE_HT_COMBINE,     STRING,   "auto",                         \
      "how a high-throughput MoE combine that sends and receives in one kernel uses its blocks: " \
      "serial (every block sends its share, then reduces), split (half send, half reduce as " \
      "rows arrive), serial-warps (serial, each warp reducing tokens of its own), overlap or " \
      "overlap:S (in every block S warps of 16 send, default 3 on 2 PEs and 6 on more, while the others reduce), "  \
      "overlap-async or overlap-async:S (overlap, the reducing warps loading through shared " \
      "memory), overlap-ring or overlap-ring:S (overlap, the sending warps loading through "  \
      "shared memory), pull or pull:S (each PE loads its tokens' rows from the PEs that hold " \
      "them, by bulk copies, S stages of 2 KiB per warp, default 4; y must be in the symmetric " \
      "heap to be read in place, else that PE pushes its rows; set alike on every PE), "    \
      "pull-lanes or pull-lanes:S (pull, each lane copying its own vectors by cp.async) or auto " \
      "(overlap); symm_moe_create refuses other values")                                    \
    X(moe_ht_dispatch,    SYMM_MOE_HT_DISPATCH,    STRING,   "warps",                        \
      "how a high-throughput MoE dispatch's blocks send their tokens: warps (each warp sends " \
      "whole tokens on its own, every block counting only its own tokens) or batches (the "   \
      "whole block sends 32 tokens at a time between barriers); symm_moe_create refuses "    \
      "other values")                                                                        \
    X(trace,              SYMM_TRACE,              BOOL,     "0",                            \
      "device trace: the Python front ends compile kernels with the traced device code (the "   \
      "*_trace.bc bitcode for Triton and CuTe DSL, -DSYMM_TRACE for TileLang); docs/trace.md") \
    X(trace_file,         SYMM_TRACE_FILE,         STRING,   "",                             \
      "record a device trace from symm_init and write it to this file (Chrome/Perfetto JSON) at " \
      "symm_finalize (\"-\": record, write nothing); records what code built with SYMM_TRACE does " \
      "(docs/trace.md)")                                                                       \
    X(trace_capacity,     SYMM_TRACE_CAPACITY,     INT,      "1048576",                      \
      "events the device trace keeps per PE (64 bytes each) when the call gives none; later "  \
      "events are dropped and counted")                                                       \
    X(moe_packets,        SYMM_MOE_PACKETS,        STRING,   "auto",                         \
      "low-latency MoE dispatch/combine: auto = a call's rows as packets (data and flag "     \
      "together: no fence, twice the bytes) while one PE's fit in SYMM_MOE_PACKET_BYTES, "    \
      "plainly (rows, then a released flag) above; 1 = always packets (more memory); 0 = "   \
      "never. Read at symm_moe_create; the same on every PE (create checks)")                \
    X(moe_ll_probe,       SYMM_MOE_LL_PROBE,       STRING,   "",                             \
      "diagnostic timing of the low-latency MoE kernels: empty (each kernel starts and ends, " \
      "nothing else) or hop (one flag exchange with every PE per kernel), both with wrong "    \
      "results; stamps (the real exchange; each block prints its stage times for the 30th "   \
      "call); twice (each dispatch kernel does its call twice); unset: the real exchange. "  \
      "Read at symm_moe_create; the same on every PE (create checks)")                     \
    X(moe_ll_combine,     SYMM_MOE_LL_COMBINE,     STRING,   "rows",                         \
      "low-latency MoE combine: rows = each route's expert row goes back to its token's PE; "  \
      "partial = the expert's PE sums a token's routes (weighted, in float32, rounded once to " \
      "the output type) and sends one row per (token, PE), on handles whose calls take the "  \
      "general kernels and max_num_tokens x top-k >= 256; partial-all = the same on every "   \
      "handle of the general kernels. Read at symm_moe_create; the same on every PE (create " \
      "checks)")                                                                              \
    X(moe_ll_small,       SYMM_MOE_LL_SMALL,       BOOL,     "1",                            \
      "low-latency MoE: handles small enough (every call's rows as packets, a PE's routes one "  \
      "block's threads) take the small dispatch and combine kernels (one header of routes per " \
      "PE pair, no per-expert lists); 0 = the general kernels always. Read at symm_moe_create; " \
      "the same on every PE (create checks)")                                                 \
    X(moe_pdl,            SYMM_MOE_PDL,            BOOL,     "1",                            \
      "low-latency MoE kernels launched with programmatic dependent launch (sm_90 and "      \
      "newer): each kernel's blocks may start while the kernel before it on the stream ends, " \
      "and wait on the device (griddepcontrol) for its memory; 0 = launched plainly. Read at " \
      "symm_moe_create")                                                                    \
    X(moe_no_launch,      SYMM_MOE_NO_LAUNCH,      BOOL,     "0",                            \
      "host-cost timing only: low-latency MoE dispatch and combine do every check and build " \
      "their kernel's arguments, then enqueue nothing (results wrong; what the checks cost " \
      "without the launch; bench/moe/host_cost.py). Read at symm_moe_create")

/* 600 s in release builds: no wait lasts forever (the README's promise),
 * and as long as torch.distributed's default collective timeout, so a peer
 * busy for minutes (checkpointing, compiling) is not taken for a hang. A PE
 * that dies or fails is reported within seconds by other means (liveness). */
#ifdef SYMM_DEBUG
#  define SYMM__DEFAULT_WAIT_TIMEOUT "60"
#else
#  define SYMM__DEFAULT_WAIT_TIMEOUT "600"
#endif
