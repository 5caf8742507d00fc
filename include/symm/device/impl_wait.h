/*
 * device/impl_wait.h - the spin-wait behind signal_wait_until, wait_until_*
 * and the device barrier, with its deadline and the abort flag
 * (docs/design.md decision 6: no hangs).
 *
 * The hot loop is one ld.acquire.sys, a compare and a counter. Every
 * SYMM__WAIT_CHECK_EVERY polls it calls an out-of-line check that reads
 * %globaltimer and, once the wait has passed 1 ms, the host-mapped abort flag;
 * the printing and trapping stay in that function, so the loop that user
 * kernels inline stays small.
 */
#ifndef SYMM_DEVICE_IMPL_WAIT_H
#define SYMM_DEVICE_IMPL_WAIT_H

/* Polls between deadline/abort checks. A poll of a local word costs a few
 * hundred ns, so this checks every few tens of microseconds. */
#ifndef SYMM__WAIT_CHECK_EVERY
#  define SYMM__WAIT_CHECK_EVERY 64u
#endif

/* How long a wait runs before it starts reading the abort flag. */
#ifndef SYMM__ABORT_CHECK_NS
#  define SYMM__ABORT_CHECK_NS 1000000ull
#endif

SYMM__DEVICE_INTERNAL const char *symm__cmp_name(int cmp) {
    switch (cmp) {
    case SYMM_CMP_EQ: return "==";
    case SYMM_CMP_NE: return "!=";
    case SYMM_CMP_GT: return ">";
    case SYMM_CMP_GE: return ">=";
    case SYMM_CMP_LT: return "<";
    case SYMM_CMP_LE: return "<=";
    default: return "(bad cmp)";
    }
}

/* How long the first wait of a PE to give up waits for the others to
 * count themselves before it prints (with their number) and traps. */
#ifndef SYMM__REPORT_GRACE_NS
#  define SYMM__REPORT_GRACE_NS 20000000ull
#endif

#define SYMM__MSG_TIMEOUT                                                                       \
    "symm: PE %d: wait timed out after %.1f s at %p: waiting for %s %llu, last seen %llu "      \
    "(%u other waiting threads of this PE stopped with it)\n"
#define SYMM__MSG_ABORT                                                                         \
    "symm: PE %d: aborting wait at %p: PE %d died or failed (flag %u; %u other waiting "       \
    "threads of this PE stopped with it)\n"
#define SYMM__MSG_BADCMP "symm: PE %d: wait at %p: invalid comparison %d\n"

/*
 * One message per PE, not one per waiting thread: every wait that gives up
 * counts itself in the PE's report word (symm_ctx_t.wait_report); the first
 * one waits SYMM__REPORT_GRACE_NS for the others, then returns their number
 * and traps after printing; the others stay in symm__report_claim until
 * that trap ends the kernel (bounded, in case it never comes) and return
 * 0xffffffff. Without a report word every wait reports.
 */
SYMM__DEVICE_INTERNAL uint32_t symm__report_claim(const symm_ctx_t *ctx) {
    uint32_t *word = (uint32_t *)(uintptr_t)ctx->wait_report;
    uint64_t t0 = symm__globaltimer();
    if (word == 0)
        return 0;
    if (symm__atom_add_b32(word, 1u) != 0) {
        while (symm__globaltimer() - t0 < 50 * SYMM__REPORT_GRACE_NS)
            symm__nanosleep(100000u);
        return 0xffffffffu;
    }
    while (symm__globaltimer() - t0 < SYMM__REPORT_GRACE_NS)
        symm__nanosleep(10000u);
    return symm__ld_b32(word, SYMM_SEM_RELAXED, SYMM_SCOPE_GPU) - 1u;
}

SYMM__NOINLINE void symm__report_timeout(const symm_ctx_t *ctx, double secs, const void *addr, const char *cmp,
                                         unsigned long long expected, unsigned long long seen) {
    uint32_t others = symm__report_claim(ctx);
    int pe = ctx->world_pe;
    if (others != 0xffffffffu) {
#if defined(__CUDACC__)
        printf(SYMM__MSG_TIMEOUT, pe, secs, addr, cmp, expected, seen, others);
#else
        struct { int pe; double secs; const void *addr; const char *cmp;
                 unsigned long long expected, seen; uint32_t others; } a = { pe, secs, addr, cmp, expected, seen,
                                                                             others };
        symm__vprintf(SYMM__MSG_TIMEOUT, &a);
#endif
    }
    symm__trap();
}

SYMM__NOINLINE void symm__report_abort(const symm_ctx_t *ctx, const void *addr, uint32_t flag) {
    uint32_t others = symm__report_claim(ctx);
    int pe = ctx->world_pe, dead = (int)flag - 1;
    if (others != 0xffffffffu) {
#if defined(__CUDACC__)
        printf(SYMM__MSG_ABORT, pe, addr, dead, flag, others);
#else
        struct { int pe; const void *addr; int dead; uint32_t flag; uint32_t others; } a = { pe, addr, dead, flag,
                                                                                            others };
        symm__vprintf(SYMM__MSG_ABORT, &a);
#endif
    }
    symm__trap();
}

/* A comparison code outside enum symm_cmp is a bug in the caller: say so
 * instead of spinning until the deadline (or forever). */
SYMM__NOINLINE void symm__report_bad_cmp(int pe, const void *addr, int cmp) {
#if defined(__CUDACC__)
    printf(SYMM__MSG_BADCMP, pe, addr, cmp);
#else
    struct { int pe; const void *addr; int cmp; } a = { pe, addr, cmp };
    symm__vprintf(SYMM__MSG_BADCMP, &a);
#endif
    symm__trap();
}

/*
 * The slow path of every wait. `t0` is the time of this wait's first check
 * (0 before it): the deadline counts from there, SYMM__WAIT_CHECK_EVERY polls
 * after the wait began. Returns the (possibly just taken) t0; does not return
 * when the deadline passed or the abort flag is up.
 */
SYMM__NOINLINE uint64_t symm__wait_check(const symm_ctx_t *ctx, const void *addr, int cmp,
                                         uint64_t expected, uint64_t seen, uint64_t t0) {
    uint64_t now = symm__globaltimer();
    if (t0 == 0)
        t0 = now;
    /* The abort flag is host memory: each read crosses PCIe, and reads from
     * many waiting warps queue behind each other (docs/tuning.md). Only waits
     * that already lasted SYMM__ABORT_CHECK_NS read it; a dead peer is still
     * reported within milliseconds. */
    if (ctx->abort_flag != 0 && now - t0 >= SYMM__ABORT_CHECK_NS) {
        /* Host-mapped memory written by the host's watcher thread: a strong
         * system-scope load, so no stale cached copy hides the update. */
        uint32_t flag = symm__ld_b32((const void *)(uintptr_t)ctx->abort_flag, SYMM_SEM_RELAXED,
                                     SYMM_SCOPE_SYS);
        if (flag != 0)
            symm__report_abort(ctx, addr, flag);
    }
    if (ctx->timeout_ns != 0 && now - t0 >= ctx->timeout_ns)
        symm__report_timeout(ctx, (double)(now - t0) * 1e-9, addr, symm__cmp_name(cmp),
                             (unsigned long long)expected, (unsigned long long)seen);
    return t0;
}

/*
 * symm__wait_<S>(ctx, ivar, cmp, value): poll the local word *ivar with
 * ld.acquire.sys until (*ivar cmp value); return the value that satisfied it.
 * Comparisons are in the word's own type (signed for i32/i64).
 */
#define SYMM__DEFINE_WAIT(S, T, W)                                                          \
    SYMM__DEVICE_INTERNAL int symm__cmp_ok_##S(const symm_ctx_t *ctx, const T *ivar, T v,   \
                                               int cmp, T value) {                          \
        switch (cmp) {                                                                      \
        case SYMM_CMP_EQ: return v == value;                                                \
        case SYMM_CMP_NE: return v != value;                                                \
        case SYMM_CMP_GT: return v > value;                                                 \
        case SYMM_CMP_GE: return v >= value;                                                \
        case SYMM_CMP_LT: return v < value;                                                 \
        case SYMM_CMP_LE: return v <= value;                                                \
        default: symm__report_bad_cmp(ctx->world_pe, ivar, cmp); return 1;                  \
        }                                                                                   \
    }                                                                                       \
    SYMM__DEVICE_INTERNAL T symm__wait_##S(const symm_ctx_t *ctx, const T *ivar, int cmp,   \
                                           T value) {                                       \
        uint64_t t0 = 0;                                                                    \
        uint32_t polls = 0;                                                                 \
        for (;;) {                                                                          \
            T v = (T)symm__ld_b##W(ivar, SYMM_SEM_ACQUIRE, SYMM_SCOPE_SYS);                 \
            if (symm__cmp_ok_##S(ctx, ivar, v, cmp, value))                                 \
                return v;                                                                   \
            if (++polls % SYMM__WAIT_CHECK_EVERY == 0)                                      \
                t0 = symm__wait_check(ctx, ivar, cmp, (uint64_t)value, (uint64_t)v, t0);    \
        }                                                                                   \
    }

SYMM__DEFINE_WAIT(i32, int32_t, 32)
SYMM__DEFINE_WAIT(u32, uint32_t, 32)
SYMM__DEFINE_WAIT(i64, int64_t, 64)
SYMM__DEFINE_WAIT(u64, uint64_t, 64)

#undef SYMM__DEFINE_WAIT

#endif /* SYMM_DEVICE_IMPL_WAIT_H */
