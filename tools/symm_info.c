/*
 * symm-info - what symm sees on this machine: its version, every environment
 * variable it reads (with defaults and current values), whether multicast is
 * allowed, and the GPUs with their peer-access matrix. With no GPU (or no
 * driver) it says so and exits 0: it is a diagnostic, not a test.
 */
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "symm/symm.h"
#include "backend/native/driver.h" /* symm__native_gpu_count, exported by libsymm */

static int print_devices(void) {
    const char *why = NULL;
    int n = symm__native_gpu_count(&why);
    cudaError_t e;
    if (n == 0) {
        printf("GPUs: %s\n", why);
        return 0;
    }
    printf("GPUs: %d\n", n);
    for (int d = 0; d < n; d++) {
        struct cudaDeviceProp p;
        char bus[32] = "?";
        if ((e = cudaGetDeviceProperties(&p, d)) != cudaSuccess) {
            printf("  GPU %d: cudaGetDeviceProperties failed: %s\n", d, cudaGetErrorString(e));
            continue;
        }
        if ((e = cudaDeviceGetPCIBusId(bus, (int)sizeof bus, d)) != cudaSuccess)
            snprintf(bus, sizeof bus, "? (%s)", cudaGetErrorString(e));
        printf("  GPU %d: %s, PCI %s, %.1f GiB, compute capability %d.%d, %d SMs\n", d, p.name, bus,
               (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), p.major, p.minor,
               p.multiProcessorCount);
    }
    printf("peer access (row reads/writes column): P = peer access, A = with native atomics, "
           "- = none, ? = query failed\n     ");
    for (int j = 0; j < n; j++)
        printf("%4d", j);
    printf("\n");
    for (int i = 0; i < n; i++) {
        printf("  %2d ", i);
        for (int j = 0; j < n; j++) {
            if (i == j) {
                printf("%4s", "x");
                continue;
            }
            int can = 0, atomics = 0;
            if (cudaDeviceCanAccessPeer(&can, i, j) != cudaSuccess) {
                printf("%4s", "?");
                continue;
            }
            if (can && cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, i, j) !=
                           cudaSuccess)
                atomics = 0;
            printf("%4s", !can ? "-" : atomics ? "A" : "P");
        }
        printf("\n");
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        printf("usage: symm-info\nPrints the symm version, its environment variables and the GPUs.\n");
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "usage: symm-info (no arguments)\n");
        return 2;
    }
    printf("symm %d.%d.%d\n\n", SYMM_VERSION_MAJOR, SYMM_VERSION_MINOR, SYMM_VERSION_PATCH);
    symm_print_env(stdout);
    printf("\nmulticast (NVLS) allowed: %s\n\n", symm_multicast_allowed() ? "yes" : "no");
    fflush(stdout);
    return print_devices();
}
