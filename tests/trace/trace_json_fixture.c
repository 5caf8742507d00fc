/*
 * trace_json_fixture.c - the JSON writer (src/trace/trace_json.c) on events
 * made up here, as two PEs whose clocks disagree would record them:
 *
 *   trace_json_fixture OUT.json [pkt]
 *
 * The events are the ring kernel of tests/trace (per block: a region "ring
 * step", a put_signal to the next PE, a wait for the previous PE's signal)
 * laid out on one reference clock, then written in each PE's own clock:
 * PE 1's runs 5 ms ahead of PE 0's and drifts 100 ns over the trace. After
 * the writer's alignment the waits must end after the puts that released
 * them (check_trace_json.py --ring checks it; without the alignment they
 * would end 5 ms before). Also: a region whose end was not recorded, an end
 * without a begin, one of each other kind, two warps' waits on one word
 * (one slice) on a labelled word, a packet put and the wait it released
 * (named for its PE), a packet collective's wait, drop counts, and checks
 * here of the names the writer gives. With "pkt" the ring is made of packets
 * (a put_pkt with flag i+1 into the next PE's slot, a packet wait on this
 * PE's slot, named for the previous PE by the put_pkt that filled it).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symm_test.h"
#include "trace/trace.h"

#define BLOCKS 2
#define ITERS 3
#define BASE0 0x7f0000000000ull
#define BASE1 0x7f0000000000ull
#define REF0 1000000000ull /* reference time of the first measurement */

static symm__trace_clock_t clk_a[2], clk_b[2];

/* Local time on `pe` of reference time t (the inverse of the alignment). */
static uint64_t local(int pe, uint64_t t) {
    if (pe == 0)
        return t;
    /* offset 5 ms at REF0, 5 ms + 100 ns at REF0 + 1 ms: linear between */
    double f = (double)(int64_t)(t - REF0) / 1e6;
    return t + 5000000ull + (uint64_t)(int64_t)(100.0 * f);
}

static symm_trace_event_t ev(int pe, int kind, int group, uint32_t flags, int peer, uint64_t addr, uint64_t a,
                             uint64_t b, uint64_t t0, uint64_t t1, uint32_t block) {
    symm_trace_event_t e;
    memset(&e, 0, sizeof e);
    e.t0 = local(pe, t0);
    e.t1 = local(pe, t1);
    e.addr = addr;
    e.a = a;
    e.b = b;
    e.block = block;
    e.nblocks = 8;
    e.peer = (int16_t)peer;
    e.thread = 0;
    e.sm = (uint16_t)(block * 3);
    e.kind = (uint8_t)kind;
    e.flags = (uint8_t)flags;
    e.group = (uint8_t)group;
    e.lanes = 1;
    e.team_n = 2;
    e.team_me = (uint16_t)pe;
    return e;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "r");
    long n;
    char *s;
    TEST_ASSERT(f != NULL, "open %s", path);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    s = calloc(1, (size_t)n + 1);
    TEST_ASSERT(s && fread(s, 1, (size_t)n, f) == (size_t)n, "read %s", path);
    fclose(f);
    return s;
}

int main(int argc, char **argv) {
    symm_trace_event_t evs[2][64];
    size_t nev[2] = {0, 0};
    symm__trace_pe_data_t pes[2];
    const int name_ids[] = {7};
    const char *names[] = {"ring step"};
    int node_world[] = {0, 1};
    FILE *f;
    char *text;
    const int pkt = argc == 3 && strcmp(argv[2], "pkt") == 0;
    if (argc != 2 && !pkt) {
        fprintf(stderr, "usage: trace_json_fixture OUT.json [pkt]\n");
        return 2;
    }
    /* the clocks as measure() would have found them */
    clk_a[0] = (symm__trace_clock_t){1, 0, 0, REF0};
    clk_b[0] = (symm__trace_clock_t){1, 0, 0, REF0 + 1000000};
    clk_a[1] = (symm__trace_clock_t){1, 5000000, 800, REF0};
    clk_b[1] = (symm__trace_clock_t){1, 5000100, 900, REF0 + 1000000};

    for (int p = 0; p < 2; p++) {
        const uint64_t base = p ? BASE1 : BASE0;
        for (int b = 0; b < BLOCKS; b++)
            for (int i = 0; i < ITERS; i++) {
                uint64_t t = REF0 + 1000 + (uint64_t)i * 10000 + (uint64_t)b * 100;
                uint64_t sig = base + 0x1000 + (uint64_t)b * 8;
                evs[p][nev[p]++] = ev(p, SYMM_TRACE_REGION_BEGIN, 0, 0, -1, 0, 7, 0, t, t, (uint32_t)b);
                /* packets: into the next PE's slot (b, i), waited on here in this PE's */
                uint64_t slot = base + 0x8000 + ((uint64_t)b * ITERS + (uint64_t)i) * 0x1000;
                if (pkt) {
                    evs[p][nev[p]++] = ev(p, SYMM_TRACE_PUT, SYMM_TRACE_GROUP_BLOCK, SYMM_TRACE_F_PKT, (p + 1) % 2,
                                          slot, 4096, (uint64_t)i + 1, t + 100, t + 600 + (uint64_t)p * 50,
                                          (uint32_t)b);
                    evs[p][nev[p]++] = ev(p, SYMM_TRACE_WAIT, SYMM_TRACE_GROUP_BLOCK,
                                          SYMM_TRACE_WAIT_FLAGS(SYMM_CMP_EQ, SYMM_TRACE_WAIT_PKT), -1, slot,
                                          (uint64_t)i + 1, (uint64_t)i + 1, t + 700, t + 1500, (uint32_t)b);
                    evs[p][nev[p]++] = ev(p, SYMM_TRACE_REGION_END, 0, 0, -1, 0, 7, 0, t + 1600, t + 1600,
                                          (uint32_t)b);
                    continue;
                }
                /* into the next PE's word b (symmetric: the same offset) */
                evs[p][nev[p]++] = ev(p, SYMM_TRACE_PUT_SIGNAL, SYMM_TRACE_GROUP_BLOCK, SYMM_TRACE_F_ADD, (p + 1) % 2,
                                      sig, 4096, 1, t + 100, t + 600 + (uint64_t)p * 50, (uint32_t)b);
                /* released by the previous PE's put_signal, which ended at t + 600 (+50 on PE 1) */
                evs[p][nev[p]++] = ev(p, SYMM_TRACE_WAIT, SYMM_TRACE_GROUP_THREAD,
                                      SYMM_TRACE_WAIT_FLAGS(SYMM_CMP_GE, SYMM_TRACE_WAIT_SIGNAL), -1, sig,
                                      (uint64_t)i + 1, (uint64_t)i + 1, t + 700, t + 1500, (uint32_t)b);
                evs[p][nev[p]++] = ev(p, SYMM_TRACE_REGION_END, 0, 0, -1, 0, 7, 0, t + 1600, t + 1600, (uint32_t)b);
            }
    }
    /* PE 0, block 5: one of every other kind, and a region never closed */
    {
        uint64_t t = REF0 + 50000;
        evs[0][nev[0]++] = ev(0, SYMM_TRACE_PUT, SYMM_TRACE_GROUP_WARP, SYMM_TRACE_F_NBI, 1, BASE0 + 0x2000, 100, 0,
                              t, t + 10, 5);
        evs[0][nev[0]++] = ev(0, SYMM_TRACE_GET, SYMM_TRACE_GROUP_THREAD, 0, 1, BASE0 + 0x3000, 3 << 20, 0, t + 20,
                              t + 30, 5);
        evs[0][nev[0]++] = ev(0, SYMM_TRACE_SIGNAL, SYMM_TRACE_GROUP_THREAD, 0, 1, BASE0 + 0x1100, 42, 0, t + 40,
                              t + 41, 5);
        evs[0][nev[0]++] = ev(0, SYMM_TRACE_FENCE, SYMM_TRACE_GROUP_THREAD, 0, -1, 0, 0, 0, t + 50, t + 51, 5);
        evs[0][nev[0]++] = ev(0, SYMM_TRACE_QUIET, SYMM_TRACE_GROUP_BLOCK, 0, -1, 0, 0, 0, t + 60, t + 70, 5);
        evs[0][nev[0]++] = ev(0, SYMM_TRACE_REGION_BEGIN, 0, 0, -1, 0, 9, 0, t + 80, t + 80, 5);
        evs[0][nev[0]++] = ev(0, SYMM_TRACE_WAIT, SYMM_TRACE_GROUP_THREAD,
                              SYMM_TRACE_WAIT_FLAGS(SYMM_CMP_GE, SYMM_TRACE_WAIT_BARRIER), 1, BASE0 + 0x10, 4, 4,
                              t + 90, t + 190, 5);
        evs[0][nev[0]++] = ev(0, SYMM_TRACE_BARRIER, SYMM_TRACE_GROUP_BLOCK, 0, -1, 0, 0, 0, t + 85, t + 200, 5);
        evs[0][nev[0]++] = ev(0, SYMM_TRACE_COLL, SYMM_TRACE_GROUP_BLOCK, SYMM_TRACE_F_STREAM | (1u << 4), -1, 0,
                              1 << 20, SYMM_TRACE_COLL_ALL_REDUCE, t + 300, t + 400, 5);
        /* two warps of block 5 wait on one word for one value at once: one slice */
        for (int wp = 1; wp <= 2; wp++) {
            symm_trace_event_t w = ev(0, SYMM_TRACE_WAIT, SYMM_TRACE_GROUP_THREAD,
                                      SYMM_TRACE_WAIT_FLAGS(SYMM_CMP_GE, SYMM_TRACE_WAIT_SIGNAL), -1, BASE0 + 0x4000, 9,
                                      9, t + 500 + (uint64_t)wp, t + 600 + (uint64_t)wp, 5);
            w.thread = (uint16_t)(32 * wp);
            w.lanes = 32;
            evs[0][nev[0]++] = w;
        }
    }
    /* packets: PE 1 block 7 put_pkts into PE 0's packet buffer, whose wait
     * names PE 1 (inferred from the put_pkt); a packet collective's wait
     * knows its PE */
    evs[1][nev[1]++] = ev(1, SYMM_TRACE_PUT, SYMM_TRACE_GROUP_BLOCK, SYMM_TRACE_F_PKT, 0, BASE1 + 0x5000, 2048, 3,
                          REF0 + 70000, REF0 + 70400, 7);
    evs[0][nev[0]++] = ev(0, SYMM_TRACE_WAIT, SYMM_TRACE_GROUP_WARP,
                          SYMM_TRACE_WAIT_FLAGS(SYMM_CMP_EQ, SYMM_TRACE_WAIT_PKT), -1, BASE0 + 0x5000, 3, 3,
                          REF0 + 69000, REF0 + 71000, 7);
    evs[0][nev[0]++] = ev(0, SYMM_TRACE_WAIT, SYMM_TRACE_GROUP_THREAD,
                          SYMM_TRACE_WAIT_FLAGS(SYMM_CMP_EQ, SYMM_TRACE_WAIT_COLL_PKT), 1, BASE0 + 0x6000, 5, 5,
                          REF0 + 72000, REF0 + 72500, 7);
    /* PE 1, block 6: an end whose begin was dropped */
    evs[1][nev[1]++] = ev(1, SYMM_TRACE_REGION_END, 0, 0, -1, 0, 7, 0, REF0 + 60000, REF0 + 60000, 6);

    memset(pes, 0, sizeof pes);
    for (int p = 0; p < 2; p++) {
        pes[p].pe = p;
        pes[p].recorded = nev[p];
        pes[p].dropped = p ? 5 : 0;
        pes[p].nsub = 1;
        pes[p].sub_cap = 64;
        pes[p].clk_a = clk_a[p];
        pes[p].clk_b = clk_b[p];
        pes[p].timer_res_ns = 32;
        pes[p].heap_base = p ? BASE1 : BASE0;
        pes[p].heap_size = 1 << 30;
        pes[p].device = p;
        pes[p].sms = 132;
        snprintf(pes[p].host, sizeof pes[p].host, "node\"%d", p); /* a quote the writer must escape */
        pes[p].ev = evs[p];
        pes[p].nev = nev[p];
    }
    /* PE 0 labels the word its two warps wait on: a flag PE 1's copy engine writes */
    symm__trace_label_t labels[2] = {{BASE0 + 0x4000, 64, 7, "not this one"}, {BASE0 + 0x4000, 8, 1, "flags[1]"}};
    pes[0].labels = labels;
    pes[0].nlabels = 2;
    symm__trace_doc_t doc = {2, pes, node_world, 2, name_ids, names, 1, "fixture \\ clocks", 0};
    f = fopen(argv[1], "w");
    TEST_ASSERT(f != NULL, "open %s", argv[1]);
    SYMM_CHECK(symm__trace_write_json(f, &doc));
    TEST_ASSERT(fclose(f) == 0, "close");

    /* the names a reader sees */
    text = slurp(argv[1]);
    const char *want[] = {
        "\"name\":\"ring step\"",
        pkt ? "\"name\":\"put_pkt 4 KiB -> PE 1, flag 1\"" : "\"name\":\"put_signal 4 KiB -> PE 1, sig += 1\"",
        pkt ? "\"name\":\"wait pkt@0x7f0000008000 from PE 1 == 1\"" : "\"name\":\"wait sig@0x7f0000001000 from PE 1 >= 1\"",
        "\"from\":\"inferred\"",
        "\"name\":\"put 100 B -> PE 1 (nbi)\"",
        "\"name\":\"get 3 MiB <- PE 1\"",
        "\"name\":\"signal -> PE 1, sig = 42\"",
        "\"name\":\"wait barrier from PE 1 >= 4\"",
        "\"name\":\"all_reduce 1 MiB\"",
        "\"algo\":\"packet\",\"stream\":1",
        "\"name\":\"region 9 (end not recorded)\",\"cat\":\"region\"",
        "\"name\":\"ring step (end; begin not recorded)\"",
        "\"name\":\"PE 1 (node\\\"1, GPU 1) - 5 events dropped\"",
        "\"clock\":\"fixture \\\\ clocks\"",
        "\"names\":{\"7\":\"ring step\"}",
        "\"name\":\"wait flags[1]@0x7f0000004000 from PE 1 >= 9\",\"cat\":\"wait\",\"dur\":0.101",
        "\"thread\":32,\"sm\":15,\"group\":\"thread\",\"lanes\":64,\"warps\":2,\"peer\":1,\"from\":\"label\"",
        "\"label\":\"flags[1]\"",
        "\"name\":\"put_pkt 2 KiB -> PE 0, flag 3\"",
        "\"pkt\":1,\"flag\":3",
        "\"name\":\"wait pkt@0x7f0000005000 from PE 1 == 3\"",
        "\"group\":\"warp\",\"peer\":1,\"from\":\"inferred\"",
        "\"signal_value\":3,\"signal_op\":\"put_pkt\"",
        "\"name\":\"wait coll packets from PE 1 == 5\"",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(text, want[i]))
            TEST_FAIL("the JSON lacks %s", want[i]);
    free(text);
    printf("wrote %s: %zu + %zu events\n", argv[1], nev[0], nev[1]);
    return 0;
}
