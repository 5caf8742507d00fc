/*
 * host_barrier.c - the team barrier run by the CPU on heap words (host
 * backend), with the layout the device barrier uses (symm_types.h): word 0 is
 * this PE's epoch, word 1 + p the last epoch PE p announced here. Words are
 * 64-bit so epochs never wrap.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "backend/backend.h"
#include "core/log.h"

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static _Atomic uint64_t *word(uint64_t base, int64_t shift, uint32_t i) {
    return (_Atomic uint64_t *)(uintptr_t)(base + (uint64_t)shift) + i;
}

symm_status_t symm__host_team_barrier(const symm_ctx_t *ctx) {
    const int me = ctx->my_pe, n = ctx->n_pes;
    const volatile uint32_t *abort_flag = (const volatile uint32_t *)(uintptr_t)ctx->abort_flag;
    uint64_t epoch = atomic_load_explicit(word(ctx->barrier, 0, 0), memory_order_relaxed) + 1;
    atomic_store_explicit(word(ctx->barrier, 0, 0), epoch, memory_order_relaxed);
    /* Announce: release, so our earlier stores are seen with the epoch. */
    for (int p = 0; p < n; p++)
        atomic_store_explicit(word(ctx->barrier, (int64_t)(p - me) * ctx->stride, 1u + (uint32_t)me),
                              epoch, memory_order_release);
    const uint64_t start = now_ns();
    for (int p = 0; p < n; p++) {
        unsigned spins = 0;
        while (atomic_load_explicit(word(ctx->barrier, 0, 1u + (uint32_t)p), memory_order_acquire) <
               epoch) {
            if (abort_flag && *abort_flag)
                return symm__error(SYMM_ERR_PEER_DIED,
                                   "team barrier: PE %d died (abort flag raised) while PE %d waited",
                                   (int)*abort_flag - 1, me);
            if (ctx->timeout_ns && now_ns() - start > ctx->timeout_ns)
                return symm__error(SYMM_ERR_TIMEOUT,
                                   "team barrier: PE %d waited %.1f s for team PE %d (epoch %llu)",
                                   me, (double)ctx->timeout_ns * 1e-9, p, (unsigned long long)epoch);
            /* Many PEs may share few cores: yield, then sleep briefly. */
            if (++spins < 1000) {
                sched_yield();
            } else {
                struct timespec ts = {0, 50000};
                nanosleep(&ts, NULL);
            }
        }
    }
    return SYMM_SUCCESS;
}
