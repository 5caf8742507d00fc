/*
 * device/impl_tma.h - the bulk-copy (TMA) engine for block-scope puts, an
 * opt-in alternative to the SM loads/stores of impl_copy.h
 * (-DSYMM_PUT_BLOCK_TMA=1; sm_90 and later, else the SM path is used).
 *
 * Thread 0 of the block streams the 16-byte-aligned body through a ring of
 * SYMM_TMA_STAGES shared-memory buffers of SYMM_TMA_CHUNK bytes:
 *   cp.async.bulk global -> shared   (completion counted on an mbarrier)
 *   cp.async.bulk shared -> peer global (a bulk async-group)
 * keeping SYMM_TMA_STAGES - 1 loads ahead of the stores and two stores in
 * flight. Another thread copies the unaligned head and tail bytes. It starts
 * with a proxy fence and a block barrier, so bytes the block stored to the
 * source earlier in the kernel are what the bulk loads read. Before
 * returning, thread 0 waits for every bulk store to complete and orders them
 * with the generic proxy (fence.proxy.async), so fence/quiet/signals after
 * the put cover them exactly as they cover SM stores; the nbi forms therefore
 * complete too.
 *
 * Costs and limits: a static SYMM_TMA_STAGES * SYMM_TMA_CHUNK bytes (32 KiB
 * by default) of shared memory in every kernel that calls a block-scope put;
 * sources outside global memory (e.g. shared), sources and destinations that
 * do not share 16-byte alignment, and transfers below SYMM_TMA_MIN_BYTES take
 * the SM path.
 */
#ifndef SYMM_DEVICE_IMPL_TMA_H
#define SYMM_DEVICE_IMPL_TMA_H

#if defined(SYMM_PUT_BLOCK_TMA) && SYMM_PUT_BLOCK_TMA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#  define SYMM__HAVE_TMA 1
#else
#  define SYMM__HAVE_TMA 0
#endif

#if SYMM__HAVE_TMA

#ifndef SYMM_TMA_CHUNK
#  define SYMM_TMA_CHUNK 8192
#endif
#ifndef SYMM_TMA_STAGES
#  define SYMM_TMA_STAGES 4
#endif
#ifndef SYMM_TMA_MIN_BYTES
#  define SYMM_TMA_MIN_BYTES 32768
#endif
#if SYMM_TMA_CHUNK % 16 != 0 || SYMM_TMA_STAGES < 2
#  error "SYMM_TMA_CHUNK must be a multiple of 16 and SYMM_TMA_STAGES at least 2"
#endif

/* Body of the pipeline, run by one thread: n is a multiple of 16, d and s
 * are 16-byte aligned. */
SYMM__DEVICE_INTERNAL void symm__tma_stream(char *d, const char *s, size_t n, unsigned char *buf, uint64_t *bars) {
    const size_t nchunks = (n + SYMM_TMA_CHUNK - 1) / SYMM_TMA_CHUNK;
    uint32_t sbuf = symm__smem_addr(buf), sbar = symm__smem_addr(bars);
    size_t c;
    int k;
    symm__fence_proxy_async_global();
    for (k = 0; k < SYMM_TMA_STAGES; k++)
        symm__mbar_init(sbar + 8u * (uint32_t)k);
    /* Make the initialised barriers visible to the bulk-copy (async) proxy. */
    symm__fence_mbar_init();
    for (c = 0; c < nchunks && c < SYMM_TMA_STAGES; c++) {
        size_t off = c * SYMM_TMA_CHUNK, len = n - off < SYMM_TMA_CHUNK ? n - off : SYMM_TMA_CHUNK;
        symm__tma_load(sbuf + (uint32_t)(c * SYMM_TMA_CHUNK), s + off, (uint32_t)len, sbar + 8u * (uint32_t)c);
    }
    for (c = 0; c < nchunks; c++) {
        uint32_t stage = (uint32_t)(c % SYMM_TMA_STAGES);
        size_t off = c * SYMM_TMA_CHUNK, len = n - off < SYMM_TMA_CHUNK ? n - off : SYMM_TMA_CHUNK;
        symm__mbar_wait(sbar + 8u * stage, (uint32_t)((c / SYMM_TMA_STAGES) & 1));
        symm__tma_store(d + off, sbuf + stage * SYMM_TMA_CHUNK, (uint32_t)len);
        /* Refill the stage of the previous chunk once its store has read it
         * (all but the newest store group done reading). */
        if (c >= 1 && c - 1 + SYMM_TMA_STAGES < nchunks) {
            size_t next = c - 1 + SYMM_TMA_STAGES, noff = next * SYMM_TMA_CHUNK;
            size_t nlen = n - noff < SYMM_TMA_CHUNK ? n - noff : SYMM_TMA_CHUNK;
            uint32_t nstage = (uint32_t)((c - 1) % SYMM_TMA_STAGES);
            symm__bulk_wait_read_all_but_1();
            symm__tma_load(sbuf + nstage * SYMM_TMA_CHUNK, s + noff, (uint32_t)nlen, sbar + 8u * nstage);
        }
    }
    /* Every store complete (not only read), then ordered with later generic
     * accesses of this thread: fence/quiet/signal after the put cover it. */
    symm__bulk_wait_all();
    for (k = 0; k < SYMM_TMA_STAGES; k++)
        symm__mbar_inval(sbar + 8u * (uint32_t)k);
}

/* The staging ring: one per kernel (a static shared variable). */
#if defined(__CUDACC__)
#  define SYMM__TMA_SHARED(decl) __shared__ decl
#else
#  define SYMM__TMA_SHARED(decl) static __attribute__((address_space(3))) decl
#endif

SYMM__DEVICE_INTERNAL SYMM__CONVERGENT void symm__tma_put_block(void *dst, const void *src, size_t n) {
    SYMM__TMA_SHARED(unsigned char symm__tma_buf[SYMM_TMA_STAGES * SYMM_TMA_CHUNK] __attribute__((aligned(128))));
    SYMM__TMA_SHARED(uint64_t symm__tma_bars[SYMM_TMA_STAGES] __attribute__((aligned(8))));
    uint32_t tid = symm__block_tid(), nthr = symm__block_nthreads();
    char *d = (char *)dst;
    const char *s = (const char *)src;
    size_t head, body;
    if ((((uintptr_t)d ^ (uintptr_t)s) & 15) != 0 || n < SYMM_TMA_MIN_BYTES || !symm__is_global(s)) {
        symm__copy(dst, src, n, tid, nthr, 1);
        return;
    }
    /* The bulk loads read src through the async proxy: each thread's earlier
     * generic stores to it are ordered before them by its own proxy fence,
     * gathered by the barrier for thread 0 (which fences again for what it
     * acquired from elsewhere). */
    symm__fence_proxy_async_global();
    symm__block_sync();
    head = (size_t)(-(uintptr_t)d) & 15;
    body = (n - head) & ~(size_t)15;
    /* Head and tail by the last thread, so thread 0 starts the stream at once. */
    if (tid == nthr - 1) {
        symm__copy_small(d, s, head, 1);
        symm__copy_small(d + head + body, s + head + body, n - head - body, 1);
    }
    if (tid == 0)
        symm__tma_stream(d + head, s + head, body, (unsigned char *)symm__tma_buf, (uint64_t *)symm__tma_bars);
}

#endif /* SYMM__HAVE_TMA */

#endif /* SYMM_DEVICE_IMPL_TMA_H */
