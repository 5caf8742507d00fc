/*
 * trace_k.cu - the device side of the trace's clock measurement: one thread
 * per PE plays ping-pong with PE 0 over NVLink (PE 0 with each peer in
 * turn), stamping every ping and pong with %globaltimer, and measures the
 * timer's step; plus the few CUDA calls the trace's host side needs.
 */
#include <cuda_runtime.h>

#include "symm/symm_device.h"

extern "C" {
#include "core/log.h"
#include "trace/trace.h"
}


/* One thread. PE 0 stores round r's value into peer k's ping word r and
 * waits for k's answer in its pong word (k, r); peer k waits for its ping
 * and answers. Values grow with every measurement (seq), so nothing is
 * reset; the waits keep symm's deadline. */
__global__ void symm__k_trace_clock(const __grid_constant__ symm__trace_clock_job_t j) {
    const symm_ctx_t *ctx = &j.ctx;
    const int me = ctx->my_pe, n = ctx->n_pes, R = j.rounds;
    uint64_t *ping = j.pingpong, *pong = j.pingpong + R;
    uint64_t t = symm__globaltimer(), step = ~0ull;
    /* the timer's step: the smallest change seen over a few changes */
    for (int changes = 0, spins = 0; changes < 8 && spins < 1000000; spins++) {
        uint64_t u = symm__globaltimer();
        if (u != t) {
            if (u - t < step)
                step = u - t;
            t = u;
            changes++;
        }
    }
    *j.res = step == ~0ull ? 0u : (uint32_t)(step > 0xffffffffull ? 0xffffffffull : step);
    for (int k = 1; k < n; k++) {
        if (me != 0 && me != k)
            continue;
        for (int r = 0; r < R; r++) {
            const uint64_t v = (j.seq - 1) * (uint64_t)R + (uint64_t)r + 1;
            uint64_t *out = j.samples + ((uint64_t)k * R + r) * 3;
            if (me == 0) {
                const uint64_t s = symm__globaltimer();
                symm__signal_set_release((uint64_t *)symm__peer(ctx, ping + r, k), v);
                symm__wait_u64(ctx, pong + (uint64_t)k * R + r, SYMM_CMP_GE, v);
                const uint64_t e = symm__globaltimer();
                out[0] = s;
                out[1] = e;
            } else {
                symm__wait_u64(ctx, ping + r, SYMM_CMP_GE, v);
                out[2] = symm__globaltimer();
                symm__signal_set_release((uint64_t *)symm__peer(ctx, pong + (uint64_t)k * R + r, 0), v);
            }
        }
    }
}

static symm_status_t cuda_status(const char *what, cudaError_t e) {
    return symm__error(SYMM_ERR_CUDA, "symm_trace: %s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

extern "C" symm_status_t symm__trace_clock_run(const symm__trace_clock_job_t *job, uint64_t *samples, uint32_t *res) {
    const size_t words = (size_t)job->ctx.n_pes * (size_t)job->rounds * 3;
    cudaError_t e = cudaMemset(job->samples, 0, words * sizeof(uint64_t));
    if (e != cudaSuccess)
        return cuda_status("clearing the clock samples", e);
    symm__k_trace_clock<<<1, 1>>>(*job);
    if ((e = cudaGetLastError()) != cudaSuccess)
        return cuda_status("launching the clock kernel", e);
    if ((e = cudaDeviceSynchronize()) != cudaSuccess)
        return cuda_status("the clock kernel", e);
    if (samples && (e = cudaMemcpy(samples, job->samples, words * sizeof(uint64_t), cudaMemcpyDeviceToHost)) !=
                       cudaSuccess)
        return cuda_status("reading the clock samples", e);
    if (res && (e = cudaMemcpy(res, job->res, sizeof *res, cudaMemcpyDeviceToHost)) != cudaSuccess)
        return cuda_status("reading the timer step", e);
    return SYMM_SUCCESS;
}

extern "C" symm_status_t symm__trace_dev_alloc(size_t nbytes, void **ptr) {
    cudaError_t e = cudaMalloc(ptr, nbytes);
    return e == cudaSuccess ? SYMM_SUCCESS : cuda_status("cudaMalloc", e);
}

extern "C" void symm__trace_dev_free(void *ptr) {
    if (ptr)
        (void)cudaFree(ptr);
}

extern "C" int symm__trace_device_sms(void) {
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) !=
                                                  cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return sms;
}

extern "C" symm_status_t symm__trace_dev_sync(void) {
    cudaError_t e = cudaDeviceSynchronize();
    return e == cudaSuccess ? SYMM_SUCCESS : cuda_status("cudaDeviceSynchronize", e);
}
