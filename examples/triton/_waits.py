"""Flag waits written inline in the fused GEMM kernels, and the kernel that
reports one that gave up.

ptxas serialises every wgmma of a kernel that contains a function call (its
note C7510), and symm's device waits print through one when they give up
(symm__report_timeout -> vprintf): a GEMM kernel calling
symm.triton.signal_wait_until loses its wgmma pipelining. wait_flag_inline
waits with the same deadline and abort flag (read from the context) in plain
Triton, no call: a wait that gives up writes a record (REC_WORDS words: 1,
the flag's address, the value seen, the ns waited; where several give up at
once, the words may come from different ones) and returns, as does every
later wait that sees the record, so the kernel ends; wait_report_kernel,
launched after it, prints the record through symm's own wait (its message,
then a trap)."""
import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import globaltimer
from triton.language.target_info import cuda_capability_geq

import symm.triton as st

# symm_ctx_t's timeout_ns and abort_flag as 64-bit words (include/symm/symm_types.h)
CTX_TIMEOUT_WORD = tl.constexpr(6)
CTX_ABORT_WORD = tl.constexpr(7)
REC_WORDS = 4


# the abort flag lives in host memory: a sys-scope read of it on every poll of
# every waiting program keeps the GPU's host interface busy, which starves the
# copy engines and stream waits that set these very flags (issue #29's 4-PE
# collapse); so the loop polls the flag alone, reads the clock and the record
# every WAIT_CHECK_EVERY polls, and the abort flag only after ABORT_CHECK_NS
WAIT_CHECK_EVERY = tl.constexpr(64)
ABORT_CHECK_NS = tl.constexpr(1000000)


@triton.jit
def wait_flag_inline(ctx, flag, value, rec):
    """Wait until the int64 word *flag >= value, then acquire (system scope,
    the flag's writer may be a peer's copy engine), with symm's deadline and
    abort flag; every thread of the program returns after the wait. The
    loop polls the flag alone; every WAIT_CHECK_EVERY polls it reads the
    clock and the record, and after ABORT_CHECK_NS of waiting the abort flag."""
    v = tl.load(flag, volatile=True)
    if v < value:
        words = ctx.to(tl.pointer_type(tl.int64))
        timeout = tl.load(words + CTX_TIMEOUT_WORD)
        abort_addr = tl.load(words + CTX_ABORT_WORD)
        stop = tl.load(rec, volatile=True)
        t0 = globaltimer()
        polls = 0
        while (v < value) & (stop == 0):
            polls += 1
            if polls % WAIT_CHECK_EVERY == 0:
                waited = globaltimer() - t0
                stop = tl.load(rec, volatile=True)
                aborted = 0
                if (abort_addr != 0) & (waited >= ABORT_CHECK_NS):
                    aborted = tl.load(abort_addr.to(tl.pointer_type(tl.int32)), volatile=True)
                if (stop == 0) & ((aborted != 0) | ((timeout != 0) & (waited > timeout))):
                    # plain stores, no atomic whose result Triton would
                    # broadcast through shared memory with a barrier: the
                    # threads of a program leave this loop at different
                    # iterations (each loads the flag itself), so no barrier
                    # may sit inside it
                    stop = stop + 1            # stop is 0 here: now 1, as int64
                    tl.store(rec + 1, flag.to(tl.int64))
                    tl.store(rec + 2, v)
                    tl.store(rec + 3, waited)
                    tl.store(rec, stop)
            if stop == 0:
                v = tl.load(flag, volatile=True)
    # one acquire for the program (a compare-and-swap that never matches: the
    # flags are >= 0, and Triton drops an atomic add of 0 whose result is
    # unused); the barrier orders every thread's later loads after it
    tl.atomic_cas(flag, v * 0 - 1, v * 0 - 1, sem="acquire", scope="sys")
    tl.debug_barrier()


@triton.jit
def fence_proxy_async():
    """After a wait, before TMA loads (tensor descriptors) of what it
    guarded: orders this thread's generic accesses so far, the wait's
    acquire included, before its later async-proxy reads (fence.proxy.async;
    sm_90 and later: before Hopper, descriptor loads are plain loads)."""
    if cuda_capability_geq(9, 0):
        tl.inline_asm_elementwise("fence.proxy.async.global;\n\tmov.u32 $0, 0;", "=r", [], dtype=tl.int32,
                                  is_pure=False, pack=1)


@triton.jit
def wait_report_kernel(ctx, rec):
    """After a kernel that waits with wait_flag_inline: if a wait gave up,
    stop through symm's own wait on the record (it prints PE, address and
    values, then traps)."""
    if tl.load(rec) != 0:
        if st.tid() == 0:
            tl.device_print("symm fused GEMM: a flag wait gave up (deadline or abort): flag address, "
                            "value seen, ns waited", tl.load(rec + 1), tl.load(rec + 2), tl.load(rec + 3))
        st.signal_wait_until(ctx, rec, st.CMP_EQ, 0)


def new_record(device):
    return torch.zeros(REC_WORDS, dtype=torch.int64, device=device)


@triton.jit
def finish_kernel(ctx, rec, flags, NFLAGS, BLOCK: tl.constexpr):
    """After a fused GEMM: zero its NFLAGS receive flags (every one was
    waited for by some tile of it; the next call's senders set them again)
    and report a wait that gave up (wait_report_kernel): one launch for both."""
    offs = tl.arange(0, BLOCK)
    for i in range(0, NFLAGS, BLOCK):
        tl.store(flags + i + offs, tl.zeros([BLOCK], dtype=tl.int64), mask=i + offs < NFLAGS)
    if tl.load(rec) != 0:
        if st.tid() == 0:
            tl.device_print("symm fused GEMM: a flag wait gave up (deadline or abort): flag address, "
                            "value seen, ns waited", tl.load(rec + 1), tl.load(rec + 2), tl.load(rec + 3))
        st.signal_wait_until(ctx, rec, st.CMP_EQ, 0)
