/*
 * test_trace_gpu.cu - the device trace on GPUs (compiled with SYMM_TRACE):
 *
 *   test_trace_gpu NPES OUT_PREFIX [pkt]
 *
 * ring: BLOCKS blocks per PE, ITERS times each: thread 0 opens region 7,
 * the block put_signals a slot to PE me+1 (ADD 1 into word b there),
 * thread 0 waits for its own word b >= i+1 (PE me-1's signal) and closes
 * the region. Then two warps wait on one satisfied word with all their
 * lanes (one event per warp, 32 lanes merged). Read back raw from the
 * buffer (symm_trace_types.h) while recording: exactly those events, each
 * attributed to this PE (team_me), its block, thread 0 (or the warp's lane
 * 0), in program order per block, with the right peer, values and one SM
 * per block. Written to OUT_PREFIX_ring.json for check_trace_json.py.
 *
 * overflow: the same ring into a buffer of 16 events: exactly 16 kept (well
 * formed), the rest counted as dropped; then, after the stop, the kernel
 * again records nothing. OUT_PREFIX_overflow.json.
 *
 * pkt: the same ring with packets: each iteration, symm_put_pkt of PKT_BYTES
 * (not a multiple of 8) to PE me+1 with flag i+1, then symm_pkt_wait on
 * this block's own packet slot for i+1 (PE me-1's); block b uses the
 * thread form (b % 3 == 0, thread 0), the warp form (1, warp 0) or the
 * block form (2). The payloads arrive intact; read back raw: exactly a
 * region, a put (flagged a packet put: peer, bytes, flag) and a wait (the
 * slot, the flag) per iteration and block, recorded by thread 0 with the
 * form's group, in program order. OUT_PREFIX_pkt.json for
 * check_trace_json.py --pkt. With a third argument "pkt" only this part runs.
 *
 * stream: with a libsymm built -DSYMM_TRACE=ON, a stream all-reduce records
 * its blocks' collective slices, and 20 forced packet all-reduces theirs,
 * their waits for packets (if any spun) naming a peer (else a line says it
 * was left out).
 */
#include <string.h>

#include <vector>

#include "../device/device_test.h"

#define BLOCKS 4
#define ITERS 5
#define NBYTES 4096
#define REGION 7
#define PER_ITER 4 /* region begin, put_signal, wait, region end */

__global__ void ring_kernel(const symm_ctx_t *ctx, char *buf, uint64_t *sig, int iters) {
    const int me = symm_ctx_my_pe(ctx), n = symm_ctx_n_pes(ctx), b = (int)blockIdx.x;
    for (int i = 0; i < iters; i++) {
        char *slot = buf + ((size_t)b * iters + i) * NBYTES;
        if (threadIdx.x == 0)
            symm_trace_begin(ctx, REGION);
        symm_put_signal_block(ctx, slot, slot, NBYTES, &sig[b], 1, SYMM_SIGNAL_ADD, (me + 1) % n);
        if (threadIdx.x == 0)
            symm_signal_wait_until(ctx, &sig[b], SYMM_CMP_GE, (uint64_t)i + 1);
        __syncthreads();
        if (threadIdx.x == 0)
            symm_trace_end(ctx, REGION);
    }
}

#define PKT_BYTES 1000                      /* 125 packets, the last one short */
#define PKT_SLOT (2 * ((PKT_BYTES + 7) / 8 * 8)) /* 16 bytes per 8 of payload */

static __host__ __device__ unsigned char pkt_byte(int pe, int b, int i, int j) {
    return (unsigned char)(pe * 31 + b * 7 + i * 3 + j);
}

/* The thread, warp or block form by block (b % 3). */
__global__ void pkt_ring_kernel(const symm_ctx_t *ctx, char *pkts, const char *src, char *dst, int iters) {
    const int me = symm_ctx_my_pe(ctx), n = symm_ctx_n_pes(ctx), b = (int)blockIdx.x, form = b % 3;
    for (int i = 0; i < iters; i++) {
        const size_t at = (size_t)b * iters + i;
        char *slot = pkts + at * PKT_SLOT;
        const char *s = src + at * PKT_BYTES;
        char *d = dst + at * PKT_BYTES;
        const uint32_t flag = (uint32_t)i + 1;
        if (threadIdx.x == 0)
            symm_trace_begin(ctx, REGION);
        if (form == 0 && threadIdx.x == 0) {
            symm_put_pkt(ctx, slot, s, PKT_BYTES, flag, (me + 1) % n);
            symm_pkt_wait(ctx, slot, d, PKT_BYTES, flag);
        } else if (form == 1 && threadIdx.x < 32) {
            symm_put_pkt_warp(ctx, slot, s, PKT_BYTES, flag, (me + 1) % n);
            symm_pkt_wait_warp(ctx, slot, d, PKT_BYTES, flag);
        } else if (form == 2) {
            symm_put_pkt_block(ctx, slot, s, PKT_BYTES, flag, (me + 1) % n);
            symm_pkt_wait_block(ctx, slot, d, PKT_BYTES, flag);
        }
        __syncthreads();
        if (threadIdx.x == 0)
            symm_trace_end(ctx, REGION);
    }
}

/* Every lane of each warp waits on the same (satisfied) word. */
__global__ void lanes_kernel(const symm_ctx_t *ctx, const uint64_t *word) {
    (void)symm_signal_wait_until(ctx, word, SYMM_CMP_GE, 0);
}

typedef struct raw {
    std::vector<symm_trace_event_t> ev; /* sub-buffer after sub-buffer */
    uint64_t claims;                    /* all counters together */
    uint32_t nsub, sub_cap;
} raw_t;

/* The buffer as a decoder reads it (symm_trace_types.h), while recording. */
static raw_t read_raw(const symm_ctx_t *hctx) {
    raw_t r;
    symm_trace_ring_t hdr;
    TEST_ASSERT(hctx->trace != 0, "the context points at the trace");
    CUDA_CHECK(cudaMemcpy(&hdr, (const void *)(uintptr_t)hctx->trace, sizeof hdr, cudaMemcpyDeviceToHost));
    TEST_ASSERT(hdr.magic == SYMM_TRACE_MAGIC && hdr.version == SYMM_TRACE_VERSION, "ring header");
    TEST_ASSERT(hdr.nsub >= 1 && hdr.nsub <= SYMM_TRACE_MAX_SUB && (hdr.nsub & (hdr.nsub - 1)) == 0, "nsub %u",
                hdr.nsub);
    r.nsub = hdr.nsub;
    r.sub_cap = hdr.sub_cap;
    r.claims = 0;
    for (uint32_t s = 0; s < hdr.nsub; s++) {
        uint64_t head;
        CUDA_CHECK(cudaMemcpy(&head, (const char *)(uintptr_t)hctx->trace + sizeof hdr + (size_t)s *
                              SYMM_TRACE_HEAD_STRIDE, sizeof head, cudaMemcpyDeviceToHost));
        r.claims += head;
        uint64_t m = head < hdr.sub_cap ? head : hdr.sub_cap;
        size_t at = r.ev.size();
        r.ev.resize(at + m);
        if (m)
            CUDA_CHECK(cudaMemcpy(&r.ev[at], (const symm_trace_event_t *)(uintptr_t)hdr.events + (size_t)s *
                                  hdr.sub_cap, m * sizeof(symm_trace_event_t), cudaMemcpyDeviceToHost));
    }
    return r;
}

/* One event of the ring as this PE must have recorded it. */
static void check_event(const dt_env_t *e, const symm_trace_event_t &v, int blocks) {
    TEST_ASSERT(v.team_me == e->me && v.team_n == e->npes, "event of PE %u/%u on PE %d", v.team_me, v.team_n,
                e->me);
    TEST_ASSERT(v.block < (uint32_t)blocks && v.nblocks == (uint32_t)blocks, "block %u of %u", v.block, v.nblocks);
    TEST_ASSERT(v.t1 >= v.t0 && v.t0 != 0, "times %llu..%llu", (unsigned long long)v.t0, (unsigned long long)v.t1);
    switch (v.kind) {
    case SYMM_TRACE_REGION_BEGIN:
    case SYMM_TRACE_REGION_END:
        TEST_ASSERT(v.a == REGION && v.thread == 0 && v.group == SYMM_TRACE_GROUP_THREAD, "region event");
        break;
    case SYMM_TRACE_PUT_SIGNAL:
        TEST_ASSERT(v.peer == (e->me + 1) % e->npes && v.a == NBYTES && v.b == 1 && (v.flags & SYMM_TRACE_F_ADD) &&
                        v.group == SYMM_TRACE_GROUP_BLOCK && v.thread == 0,
                    "put_signal: peer %d bytes %llu value %llu flags %u group %u thread %u", v.peer,
                    (unsigned long long)v.a, (unsigned long long)v.b, v.flags, v.group, v.thread);
        break;
    case SYMM_TRACE_WAIT:
        TEST_ASSERT(SYMM_TRACE_WAIT_CMP(v.flags) == SYMM_CMP_GE &&
                        SYMM_TRACE_WAIT_WHAT(v.flags) == SYMM_TRACE_WAIT_SIGNAL && v.b >= v.a && v.peer == -1,
                    "wait: flags %u expected %llu seen %llu", v.flags, (unsigned long long)v.a,
                    (unsigned long long)v.b);
        break;
    default:
        TEST_FAIL("unexpected event kind %u", v.kind);
    }
}

/* Every event of the ring, complete and in program order per block. */
static void check_ring(const dt_env_t *e, const raw_t &r, const uint64_t *sig_dev) {
    std::vector<std::vector<symm_trace_event_t>> per(BLOCKS);
    for (const auto &v : r.ev) {
        if (v.kind == SYMM_TRACE_WAIT && v.addr == (uint64_t)(uintptr_t)(sig_dev + BLOCKS))
            continue; /* the lanes kernel's */
        check_event(e, v, BLOCKS);
        per[v.block].push_back(v);
    }
    for (int b = 0; b < BLOCKS; b++) {
        const auto &p = per[b];
        TEST_ASSERT(p.size() == (size_t)ITERS * PER_ITER, "block %d: %zu events, expected %d", b, p.size(),
                    ITERS * PER_ITER);
        for (size_t k = 0; k < p.size(); k++) {
            static const int order[PER_ITER] = {SYMM_TRACE_REGION_BEGIN, SYMM_TRACE_PUT_SIGNAL, SYMM_TRACE_WAIT,
                                                SYMM_TRACE_REGION_END};
            TEST_ASSERT(p[k].kind == order[k % PER_ITER], "block %d event %zu: kind %u, expected %d", b, k, p[k].kind,
                        order[k % PER_ITER]);
            TEST_ASSERT(k == 0 || p[k].t0 >= p[k - 1].t1 || p[k].kind == SYMM_TRACE_REGION_END,
                        "block %d event %zu starts before the one before ended", b, k);
            TEST_ASSERT(k == 0 || p[k].t1 >= p[k - 1].t1, "block %d event %zu out of order", b, k);
            TEST_ASSERT(p[k].sm == p[0].sm, "block %d moved SMs (%u, %u)", b, p[0].sm, p[k].sm);
            if (p[k].kind == SYMM_TRACE_WAIT) {
                TEST_ASSERT(p[k].a == k / PER_ITER + 1, "block %d wait %zu for %llu", b, k / PER_ITER,
                            (unsigned long long)p[k].a);
                TEST_ASSERT(p[k].addr == (uint64_t)(uintptr_t)(sig_dev + b), "block %d waits on its own word", b);
            }
        }
    }
}

/* The packet ring's events: complete, in order, attributed, per block. */
static void check_pkt_ring(const dt_env_t *e, const raw_t &r, const char *pkts) {
    std::vector<std::vector<symm_trace_event_t>> per(BLOCKS);
    for (const auto &v : r.ev) {
        TEST_ASSERT(v.team_me == e->me && v.team_n == e->npes, "event of PE %u/%u on PE %d", v.team_me, v.team_n,
                    e->me);
        TEST_ASSERT(v.block < BLOCKS && v.nblocks == BLOCKS, "block %u of %u", v.block, v.nblocks);
        TEST_ASSERT(v.t1 >= v.t0 && v.t0 != 0 && v.thread == 0, "times %llu..%llu, thread %u",
                    (unsigned long long)v.t0, (unsigned long long)v.t1, v.thread);
        per[v.block].push_back(v);
    }
    for (int b = 0; b < BLOCKS; b++) {
        const auto &p = per[b];
        const int g = b % 3 == 0 ? SYMM_TRACE_GROUP_THREAD : b % 3 == 1 ? SYMM_TRACE_GROUP_WARP : SYMM_TRACE_GROUP_BLOCK;
        TEST_ASSERT(p.size() == (size_t)ITERS * PER_ITER, "packet ring block %d: %zu events, expected %d", b, p.size(),
                    ITERS * PER_ITER);
        for (size_t k = 0; k < p.size(); k++) {
            static const int order[PER_ITER] = {SYMM_TRACE_REGION_BEGIN, SYMM_TRACE_PUT, SYMM_TRACE_WAIT,
                                                SYMM_TRACE_REGION_END};
            const symm_trace_event_t &v = p[k];
            const uint64_t i = k / PER_ITER;
            TEST_ASSERT(v.kind == order[k % PER_ITER], "packet ring block %d event %zu: kind %u, expected %d", b, k,
                        v.kind, order[k % PER_ITER]);
            TEST_ASSERT(k == 0 || v.t0 >= p[k - 1].t1 || v.kind == SYMM_TRACE_REGION_END,
                        "packet ring block %d event %zu starts before the one before ended", b, k);
            TEST_ASSERT(v.sm == p[0].sm, "block %d moved SMs", b);
            const uint64_t slot = (uint64_t)(uintptr_t)(pkts + ((size_t)b * ITERS + i) * PKT_SLOT);
            if (v.kind == SYMM_TRACE_PUT)
                TEST_ASSERT(v.flags == SYMM_TRACE_F_PKT && v.peer == (e->me + 1) % e->npes && v.a == PKT_BYTES &&
                                v.b == i + 1 && v.addr == slot && v.group == g && v.lanes == 1,
                            "block %d put_pkt %llu: flags %u peer %d bytes %llu flag %llu group %u (expected %d) "
                            "lanes %u", b, (unsigned long long)i, v.flags, v.peer, (unsigned long long)v.a,
                            (unsigned long long)v.b, v.group, g, v.lanes);
            if (v.kind == SYMM_TRACE_WAIT)
                TEST_ASSERT(SYMM_TRACE_WAIT_WHAT(v.flags) == SYMM_TRACE_WAIT_PKT &&
                                SYMM_TRACE_WAIT_CMP(v.flags) == SYMM_CMP_EQ && v.peer == -1 && v.a == i + 1 &&
                                v.b == i + 1 && v.addr == slot && v.group == g && v.lanes == 1,
                            "block %d pkt_wait %llu: flags %u peer %d flag %llu/%llu group %u (expected %d)", b,
                            (unsigned long long)i, v.flags, v.peer, (unsigned long long)v.a, (unsigned long long)v.b,
                            v.group, g);
        }
    }
}

/* The packet ring, recorded whole, its payloads checked, its JSON written. */
static void run_pkt_ring(dt_env_t *e, const char *prefix) {
    const size_t slots = (size_t)BLOCKS * ITERS;
    char *pkts = NULL, *src = NULL, *dst = NULL, path[1024];
    std::vector<unsigned char> h(slots * PKT_BYTES);
    symm_ctx_t hc;
    uint64_t rec, drop;
    SYMM_CHECK(symm_malloc(slots * PKT_SLOT, (void **)&pkts));
    CUDA_CHECK(cudaMalloc((void **)&src, slots * PKT_BYTES)); /* any memory is a packet's source */
    CUDA_CHECK(cudaMalloc((void **)&dst, slots * PKT_BYTES));
    for (int b = 0; b < BLOCKS; b++)
        for (int i = 0; i < ITERS; i++)
            for (int j = 0; j < PKT_BYTES; j++)
                h[((size_t)b * ITERS + i) * PKT_BYTES + j] = pkt_byte(e->me, b, i, j);
    CUDA_CHECK(cudaMemcpy(src, h.data(), h.size(), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(dst, 0, slots * PKT_BYTES));
    CUDA_CHECK(cudaMemset(pkts, 0, slots * PKT_SLOT)); /* no flag of an earlier run */
    CUDA_CHECK(cudaDeviceSynchronize());
    SYMM_CHECK(symm_trace_start(1 << 16));
    SYMM_CHECK(symm_barrier_all());
    pkt_ring_kernel<<<BLOCKS, 128>>>(e->ctx, pkts, src, dst, ITERS);
    CUDA_CHECK_KERNEL();
    SYMM_CHECK(symm_team_ctx_copy(symm_team_world(), &hc));
    {
        raw_t r = read_raw(&hc);
        TEST_ASSERT(r.claims == r.ev.size() && r.ev.size() == (size_t)BLOCKS * ITERS * PER_ITER,
                    "packet ring: %zu events kept of %llu claims, expected %d", r.ev.size(),
                    (unsigned long long)r.claims, BLOCKS * ITERS * PER_ITER);
        check_pkt_ring(e, r, pkts);
        SYMM_CHECK(symm_trace_counts(&rec, &drop));
        TEST_ASSERT(rec == r.ev.size() && drop == 0, "counts %llu/%llu", (unsigned long long)rec,
                    (unsigned long long)drop);
    }
    SYMM_CHECK(symm_trace_stop());
    CUDA_CHECK(cudaMemcpy(h.data(), dst, h.size(), cudaMemcpyDeviceToHost));
    {
        const int from = (e->me - 1 + e->npes) % e->npes;
        for (int b = 0; b < BLOCKS; b++)
            for (int i = 0; i < ITERS; i++)
                for (int j = 0; j < PKT_BYTES; j++) {
                    unsigned char got = h[((size_t)b * ITERS + i) * PKT_BYTES + j];
                    TEST_ASSERT(got == pkt_byte(from, b, i, j), "packet ring block %d iteration %d byte %d: %u, "
                                "expected %u (PE %d's)", b, i, j, got, pkt_byte(from, b, i, j), from);
                }
    }
    snprintf(path, sizeof path, "%s_pkt.json", prefix);
    SYMM_CHECK(symm_trace_dump(path));
    SYMM_CHECK(symm_barrier_all());
    CUDA_CHECK(cudaFree(dst));
    CUDA_CHECK(cudaFree(src));
    SYMM_CHECK(symm_free(pkts));
    if (e->me == 0)
        printf("packet ring: %d blocks x %d iterations (thread, warp and block forms) recorded and checked\n",
               BLOCKS, ITERS);
}

static void run_ring(dt_env_t *e, char *buf, uint64_t *sig) {
    CUDA_CHECK(cudaMemset(sig, 0, BLOCKS * sizeof(uint64_t)));
    SYMM_CHECK(symm_barrier_all());
    ring_kernel<<<BLOCKS, 128>>>(e->ctx, buf, sig, ITERS);
    CUDA_CHECK_KERNEL();
    SYMM_CHECK(symm_barrier_all());
}

int main(int argc, char **argv) {
    dt_env_t e;
    char *buf = NULL;
    uint64_t *sig = NULL, rec, drop;
    symm_ctx_t h;
    char path[1024];
    int need = argc > 1 ? atoi(argv[1]) : 1;
    const char *prefix = argc > 2 ? argv[2] : "trace_gpu";
    const int only_pkt = argc > 3 && strcmp(argv[3], "pkt") == 0;
    if (argc > 3 && !only_pkt) {
        fprintf(stderr, "usage: test_trace_gpu NPES OUT_PREFIX [pkt]\n");
        return 2;
    }
    snprintf(path, sizeof path, "%s_ring.json", prefix);
    remove(path); /* a skipped run leaves no file of an earlier one */
    snprintf(path, sizeof path, "%s_overflow.json", prefix);
    remove(path);
    snprintf(path, sizeof path, "%s_pkt.json", prefix);
    remove(path);
    dt_init(&e, need);
    SYMM_CHECK(symm_trace_name(REGION, "ring"));
    run_pkt_ring(&e, prefix);
    if (only_pkt) {
        if (e.me == 0)
            printf("trace gpu: %d PEs: packet ring checked; JSON in %s_pkt.json\n", e.npes, prefix);
        dt_fini(&e);
        return 0;
    }
    SYMM_CHECK(symm_malloc((size_t)BLOCKS * ITERS * NBYTES, (void **)&buf));
    SYMM_CHECK(symm_calloc(BLOCKS + 1, sizeof(uint64_t), (void **)&sig));

    /* ---- ring, recorded whole -------------------------------------------------- */
    SYMM_CHECK(symm_trace_start(1 << 16));
    run_ring(&e, buf, sig);
    lanes_kernel<<<1, 64>>>(e.ctx, sig + BLOCKS);
    CUDA_CHECK_KERNEL();
    SYMM_CHECK(symm_team_ctx_copy(symm_team_world(), &h));
    {
        raw_t r = read_raw(&h);
        size_t merged = 0, lanes = 0;
        for (const auto &v : r.ev)
            if (v.kind == SYMM_TRACE_WAIT && v.addr == (uint64_t)(uintptr_t)(sig + BLOCKS)) {
                TEST_ASSERT(v.block == 0 && v.lanes >= 1 && v.thread % 32 + v.lanes <= 32,
                            "a warp's wait: %u lanes from thread %u", v.lanes, v.thread);
                merged++;
                lanes += v.lanes;
            }
        /* every lane counted once; lanes that waited together are one event */
        TEST_ASSERT(lanes == 64 && merged >= 2 && merged < 64, "%zu lanes in %zu events, expected 64 in 2 to 63",
                    lanes, merged);
        if (e.me == 0)
            printf("lanes: 64 waiting lanes recorded as %zu events\n", merged);
        TEST_ASSERT(r.claims == r.ev.size() && r.ev.size() == (size_t)BLOCKS * ITERS * PER_ITER + merged,
                    "%zu events kept of %llu claims, expected %zu", r.ev.size(), (unsigned long long)r.claims,
                    (size_t)BLOCKS * ITERS * PER_ITER + merged);
        check_ring(&e, r, sig);
        SYMM_CHECK(symm_trace_counts(&rec, &drop));
        TEST_ASSERT(rec == r.ev.size() && drop == 0, "counts %llu/%llu", (unsigned long long)rec,
                    (unsigned long long)drop);
    }
    SYMM_CHECK(symm_trace_stop());
    snprintf(path, sizeof path, "%s_ring.json", prefix);
    SYMM_CHECK(symm_trace_dump(path));

    /* ---- a buffer of 16 events: the rest dropped and counted ---------------------- */
    SYMM_CHECK(symm_trace_start(16));
    run_ring(&e, buf, sig);
    SYMM_CHECK(symm_team_ctx_copy(symm_team_world(), &h));
    {
        raw_t r = read_raw(&h);
        const uint64_t made = (uint64_t)BLOCKS * ITERS * PER_ITER;
        TEST_ASSERT(r.nsub == 1 && r.sub_cap == 16, "16 events: one sub-buffer of 16 (%u x %u)", r.nsub, r.sub_cap);
        TEST_ASSERT(r.claims == made && r.ev.size() == 16, "%llu claims, %zu kept; expected %llu and 16",
                    (unsigned long long)r.claims, r.ev.size(), (unsigned long long)made);
        for (const auto &v : r.ev)
            check_event(&e, v, BLOCKS);
        SYMM_CHECK(symm_trace_counts(&rec, &drop));
        TEST_ASSERT(rec == 16 && drop == made - 16, "counts %llu/%llu, expected 16/%llu", (unsigned long long)rec,
                    (unsigned long long)drop, (unsigned long long)(made - 16));
    }
    SYMM_CHECK(symm_trace_stop());
    run_ring(&e, buf, sig); /* not recording: nothing changes */
    SYMM_CHECK(symm_trace_counts(&rec, &drop));
    TEST_ASSERT(rec == 16 && drop == (uint64_t)BLOCKS * ITERS * PER_ITER - 16, "a stopped trace records nothing");
    snprintf(path, sizeof path, "%s_overflow.json", prefix);
    SYMM_CHECK(symm_trace_dump(path));

    /* ---- libsymm's own kernels ----------------------------------------------------- */
    if (symm_trace_library_traced()) {
        float *x = NULL;
        SYMM_CHECK(symm_calloc(1 << 18, sizeof(float), (void **)&x));
        SYMM_CHECK(symm_trace_start(1 << 16));
        SYMM_CHECK(symm_all_reduce(x, x, 1 << 18, SYMM_DTYPE_F32, SYMM_OP_SUM, NULL, NULL));
        CUDA_CHECK(cudaDeviceSynchronize());
        SYMM_CHECK(symm_team_ctx_copy(symm_team_world(), &h));
        raw_t r = read_raw(&h);
        size_t colls = 0;
        for (const auto &v : r.ev)
            colls += v.kind == SYMM_TRACE_COLL && (v.flags & SYMM_TRACE_F_STREAM) && v.b == SYMM_TRACE_COLL_ALL_REDUCE;
        TEST_ASSERT(colls >= 1, "a traced libsymm's all-reduce records its blocks (%zu events)", r.ev.size());
        SYMM_CHECK(symm_trace_stop());
        snprintf(path, sizeof path, "%s_allreduce.json", prefix);
        SYMM_CHECK(symm_trace_dump(path));
        /* a packet all-reduce: its slices say so; the waits for packets that
         * were not there at the first poll name a peer (how many depends on
         * the PEs' skew) */
        SYMM_CHECK(symm_trace_start(1 << 16));
        for (int it = 0; it < 20; it++)
            SYMM_CHECK(symm_all_reduce_ex(x, x, 1024, SYMM_DTYPE_F32, SYMM_OP_SUM, SYMM_DTYPE_DEFAULT,
                                          SYMM_COLL_ALGO_PACKET, NULL, NULL));
        CUDA_CHECK(cudaDeviceSynchronize());
        SYMM_CHECK(symm_team_ctx_copy(symm_team_world(), &h));
        r = read_raw(&h);
        size_t pcolls = 0, pwaits = 0;
        for (const auto &v : r.ev) {
            pcolls += v.kind == SYMM_TRACE_COLL && v.b == SYMM_TRACE_COLL_ALL_REDUCE &&
                      ((v.flags >> 4) & 7u) == SYMM_COLL_ALGO_PACKET;
            if (v.kind == SYMM_TRACE_WAIT && SYMM_TRACE_WAIT_WHAT(v.flags) == SYMM_TRACE_WAIT_COLL_PKT) {
                TEST_ASSERT(v.peer >= 0 && v.peer < e.npes && v.peer != e.me && v.a == v.b &&
                                SYMM_TRACE_WAIT_CMP(v.flags) == SYMM_CMP_EQ && v.t1 >= v.t0 && v.lanes >= 1,
                            "a packet collective's wait: peer %d of %d (me %d), flag %llu/%llu", v.peer, e.npes,
                            e.me, (unsigned long long)v.a, (unsigned long long)v.b);
                pwaits++;
            }
        }
        const int took_packet = strncmp(symm_coll_last_algo(), "packet", 6) == 0;
        TEST_ASSERT(took_packet || e.npes == 1, "a forced packet all-reduce ran %s", symm_coll_last_algo());
        TEST_ASSERT(!took_packet || pcolls >= 20, "20 packet all-reduces: %zu packet slices", pcolls);
        TEST_ASSERT(e.npes > 1 || pwaits == 0, "one PE has no peer to wait for (%zu waits)", pwaits);
        SYMM_CHECK(symm_trace_stop());
        SYMM_CHECK(symm_free(x));
        if (e.me == 0)
            printf("stream all-reduce: %zu collective slices on PE 0; packet all-reduce: %zu slices, %zu waits for "
                   "packets\n", colls, pcolls, pwaits);
    } else if (e.me == 0) {
        printf("NOTE: libsymm was built without -DSYMM_TRACE=ON: the stream-collective part is left out\n");
    }
    SYMM_CHECK(symm_free(sig));
    SYMM_CHECK(symm_free(buf));
    if (e.me == 0)
        printf("trace gpu: %d PEs: packet ring, ring, lanes, overflow checked; JSON in %s_*.json\n", e.npes, prefix);
    dt_fini(&e);
    return 0;
}
