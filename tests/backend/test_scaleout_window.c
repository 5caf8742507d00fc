/*
 * test_scaleout_window.c - the load/store window of the scale-out backends
 * (src/backend/scaleout.c): which PEs a kernel reaches by the heap's
 * arithmetic, from the addresses the library maps them at, for the world
 * and for a team. Pure host code.
 */
#include <stdint.h>
#include <stdio.h>

#include "backend/scaleout.h"
#include "symm_test.h"

static void window(const uintptr_t *base, int n, int me, int want_first, int want_count, size_t want_stride) {
    int first = -1, count = -1;
    size_t stride = 1;
    symm__scaleout_window(base, n, me, &first, &count, &stride);
    TEST_ASSERT(first == want_first && count == want_count && stride == want_stride,
                "PE %d of %d: window [%d, +%d) stride %zu, expected [%d, +%d) stride %zu", me, n, first, count,
                stride, want_first, want_count, want_stride);
}

static void team(const int *world_pe, int n, int my, int wfirst, int wcount, int want_first, int want_count) {
    int first = -1, count = -1;
    symm__scaleout_team_window(world_pe, n, my, wfirst, wcount, &first, &count);
    TEST_ASSERT(first == want_first && count == want_count, "team PE %d: [%d, +%d), expected [%d, +%d)", my,
                first, count, want_first, want_count);
}

int main(void) {
    const uintptr_t G = (uintptr_t)1 << 32;
    /* one node of four at a constant stride: everyone */
    const uintptr_t node4[] = {10 * G, 11 * G, 12 * G, 13 * G};
    for (int me = 0; me < 4; me++)
        window(node4, 4, me, 0, 4, G);
    /* two nodes of two: PEs 2 and 3 are not mapped from PEs 0 and 1 */
    const uintptr_t two_nodes_pe1[] = {10 * G, 11 * G, 0, 0};
    window(two_nodes_pe1, 4, 1, 0, 2, G);
    const uintptr_t two_nodes_pe2[] = {0, 0, 20 * G, 21 * G};
    window(two_nodes_pe2, 4, 2, 2, 2, G);
    /* mapped, but not at one distance: only the run that keeps it */
    const uintptr_t uneven[] = {10 * G, 11 * G, 12 * G, 15 * G};
    window(uneven, 4, 0, 0, 3, G);
    window(uneven, 4, 3, 2, 2, 3 * G);
    /* alone */
    const uintptr_t alone[] = {7 * G};
    window(alone, 1, 0, 0, 1, 0);
    /* below: copies at decreasing addresses are not a window (stride > 0) */
    const uintptr_t down[] = {13 * G, 12 * G};
    window(down, 2, 0, 0, 1, 0);

    /* teams: the world window [4, 8) (the second node of eight PEs) */
    const int node_team[] = {4, 5, 6, 7};
    team(node_team, 4, 2, 4, 4, 0, 4);
    /* a team that skips a PE breaks the run there */
    const int gap[] = {4, 6, 7};
    team(gap, 3, 1, 4, 4, 1, 2);
    team(gap, 3, 0, 4, 4, 0, 1);
    /* a team reaching past the window */
    const int wide[] = {2, 3, 4, 5};
    team(wide, 4, 3, 4, 4, 2, 2);
    printf("ok: scale-out windows\n");
    return 0;
}
