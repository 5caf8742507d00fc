/*
 * test_moe_args.c - the MoE exchange's host-side rules without a GPU or a
 * runtime (src/moe/moe_args.c): configuration checks and geometry, the
 * buffer layout, per-call argument checks, the call order, and the messages
 * of device-recorded errors. Each wrong input must fail with
 * SYMM_ERR_INVALID_ARG and a message naming what is wrong.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdlib.h>
#include <string.h>

#include "symm_test.h"
#include "moe/moe.h"

static int failures;

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);          \
            fprintf(stderr, __VA_ARGS__);                                 \
            fprintf(stderr, "\n");                                        \
            failures++;                                                   \
        }                                                                 \
    } while (0)

/* st must be INVALID_ARG and the last error must contain `needle`. */
#define EXPECT_BAD(st, needle)                                                                          \
    do {                                                                                                \
        symm_status_t s__ = (st);                                                                       \
        CHECK(s__ == SYMM_ERR_INVALID_ARG, "%s -> %d, expected SYMM_ERR_INVALID_ARG", #st, (int)s__);   \
        CHECK(strstr(symm_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'", #st,            \
              symm_last_error(), needle);                                                               \
    } while (0)

static symm_moe_config_t pplx_small(void) {
    symm_moe_config_t c;
    memset(&c, 0, sizeof(c));
    c.mode = SYMM_MOE_LOW_LATENCY;
    c.max_num_tokens = 10;
    c.num_experts = 8;
    c.experts_per_token = 3;
    c.hidden_dim = 512;
    c.hidden_dim_bytes = 512;     /* fp8 */
    c.hidden_dim_scale_bytes = 16; /* 4 blocks of 128 */
    c.dp_size = 2;
    return c;
}

static void test_config(void) {
    symm_moe_config_t c = pplx_small(), b;
    symm__moe_geom_t g;
    CHECK(symm__moe_geom("t", &c, 4, SYMM__MOE_PKT_AUTO, &g) == SYMM_SUCCESS, "small config: %s", symm_last_error());
    CHECK(g.local == 2 && g.dp == 2 && g.groups == 2 && g.cap == 5 && g.rows == 20 && g.scale_cols == 4,
          "geometry local %u dp %d groups %d cap %u rows %u cols %u", g.local, g.dp, g.groups, g.cap, g.rows,
          g.scale_cols);
    CHECK(g.tok_stride == 512 + 16 + 16 && g.tok_stride % 16 == 0, "tok_stride %u", g.tok_stride);
    CHECK(g.lay.ll_dbuf > 0 && g.lay.total >= g.lay.ll_dbuf + 4ull * 2 * 5 * g.tok_stride, "layout total");
    CHECK(g.lay.ht_rx == 0, "the low-latency layout has no high-throughput regions");
    CHECK(symm_moe_heap_bytes(&c, 4) == g.lay.total, "heap_bytes agrees with the layout");
    CHECK(symm_moe_heap_bytes(&c, 3) == 0, "8 experts on 3 PEs is rejected");

    b = c; b.dp_size = 3;
    EXPECT_BAD(symm__moe_geom("t", &b, 4, SYMM__MOE_PKT_AUTO, &g), "world_size 4 is not a multiple of dp_size 3");
    b = c; b.dp_size = 0;
    EXPECT_BAD(symm__moe_geom("t", &b, 4, SYMM__MOE_PKT_AUTO, &g), "dp_size 0");
    EXPECT_BAD(symm__moe_geom("t", &c, 3, SYMM__MOE_PKT_AUTO, &g), "not a multiple of the team size 3");
    b = c; b.experts_per_token = 9;
    EXPECT_BAD(symm__moe_geom("t", &b, 4, SYMM__MOE_PKT_AUTO, &g), "experts_per_token 9");
    b = c; b.hidden_dim = 500; b.hidden_dim_bytes = 500;
    EXPECT_BAD(symm__moe_geom("t", &b, 4, SYMM__MOE_PKT_AUTO, &g), "hidden_dim 500");
    b = c; b.hidden_dim_bytes = 1536;
    EXPECT_BAD(symm__moe_geom("t", &b, 4, SYMM__MOE_PKT_AUTO, &g), "element size of 1, 2 or 4");
    b = c; b.hidden_dim = 8; b.hidden_dim_bytes = 8; b.hidden_dim_scale_bytes = 4;
    EXPECT_BAD(symm__moe_geom("t", &b, 4, SYMM__MOE_PKT_AUTO, &g), "not a multiple of 16");
    b = c; b.hidden_dim_scale_bytes = 12;
    EXPECT_BAD(symm__moe_geom("t", &b, 4, SYMM__MOE_PKT_AUTO, &g), "expected 0 (no scales) or 16");
    b = c; b.max_num_tokens = 0;
    EXPECT_BAD(symm__moe_geom("t", &b, 4, SYMM__MOE_PKT_AUTO, &g), "max_num_tokens 0");
    b = c; b.max_recv_tokens = 5;
    EXPECT_BAD(symm__moe_geom("t", &b, 4, SYMM__MOE_PKT_AUTO, &g), "low-latency mode takes 0");
    b = c; b.mode = 7;
    EXPECT_BAD(symm__moe_geom("t", &b, 4, SYMM__MOE_PKT_AUTO, &g), "mode 7");
    EXPECT_BAD(symm__moe_geom("t", NULL, 4, SYMM__MOE_PKT_AUTO, &g), "config is NULL");
    EXPECT_BAD(symm__moe_geom("t", &c, 65, SYMM__MOE_PKT_AUTO, &g), "team of 65 PEs");

    /* high throughput */
    b = c; b.mode = SYMM_MOE_HIGH_THROUGHPUT; b.dp_size = 1; b.max_num_tokens = 4096;
    CHECK(symm__moe_geom("t", &b, 4, SYMM__MOE_PKT_AUTO, &g) == SYMM_SUCCESS, "ht config: %s", symm_last_error());
    CHECK(g.cap == 4096 * 4 && g.lay.ht_cbuf > 0 && g.lay.ll_dbuf == 0, "ht geometry cap %u", g.cap);
    b.dp_size = 2;
    EXPECT_BAD(symm__moe_geom("t", &b, 4, SYMM__MOE_PKT_AUTO, &g), "high-throughput mode takes 1");
    b.dp_size = 1; b.max_recv_tokens = 4096 * 4 + 1;
    EXPECT_BAD(symm__moe_geom("t", &b, 4, SYMM__MOE_PKT_AUTO, &g), "above max_num_tokens x n_pes");
    b.max_recv_tokens = 1000;
    CHECK(symm__moe_geom("t", &b, 4, SYMM__MOE_PKT_AUTO, &g) == SYMM_SUCCESS && g.cap == 1000,
          "max_recv_tokens sets the capacity");
}

/* SYMM_MOE_PACKETS and the packet regions it sizes. */
static void test_packets(void) {
    symm_moe_config_t c = pplx_small();
    symm__moe_geom_t g, off, on;
    int m = -1;
    CHECK(symm__moe_packets_parse("t", NULL, &m) == SYMM_SUCCESS && m == SYMM__MOE_PKT_AUTO, "unset is auto");
    CHECK(symm__moe_packets_parse("t", "auto", &m) == SYMM_SUCCESS && m == SYMM__MOE_PKT_AUTO, "auto");
    CHECK(symm__moe_packets_parse("t", "1", &m) == SYMM_SUCCESS && m == SYMM__MOE_PKT_ON, "1 is on");
    CHECK(symm__moe_packets_parse("t", "0", &m) == SYMM_SUCCESS && m == SYMM__MOE_PKT_OFF, "0 is off");
    EXPECT_BAD(symm__moe_packets_parse("t", "yes", &m), "SYMM_MOE_PACKETS=\"yes\": expected auto");
    CHECK(strcmp(symm__moe_packets_name(SYMM__MOE_PKT_ON), "1") == 0 &&
              strcmp(symm__moe_packets_name(SYMM__MOE_PKT_AUTO), "auto") == 0,
          "mode names");
    EXPECT_BAD(symm__moe_geom("t", &c, 4, 7, &g), "packet mode 7");
    CHECK(symm__moe_geom("t", &c, 4, SYMM__MOE_PKT_OFF, &off) == SYMM_SUCCESS && off.pcap == 0 && off.pmt == 0,
          "off: no packet slots");
    CHECK(symm__moe_geom("t", &c, 4, SYMM__MOE_PKT_ON, &on) == SYMM_SUCCESS && on.pcap == on.cap &&
              on.pmt == c.max_num_tokens,
          "on: packet slots for every token");
    CHECK(on.lay.total > off.lay.total, "packet regions take memory");
    /* symm_moe_heap_bytes before init: the environment as init will read it */
    setenv("SYMM_MOE_PACKETS", "1", 1);
    CHECK(symm_moe_heap_bytes(&c, 4) == on.lay.total, "heap_bytes with SYMM_MOE_PACKETS=1");
    setenv("SYMM_MOE_PACKETS", "0", 1);
    CHECK(symm_moe_heap_bytes(&c, 4) == off.lay.total, "heap_bytes with SYMM_MOE_PACKETS=0");
    setenv("SYMM_MOE_PACKETS", "often", 1);
    CHECK(symm_moe_heap_bytes(&c, 4) == 0, "heap_bytes refuses a bad SYMM_MOE_PACKETS");
    unsetenv("SYMM_MOE_PACKETS");
    CHECK(symm_moe_heap_bytes(&c, 4) > off.lay.total, "heap_bytes with packets auto");
    /* auto: slots while the rows fit in SYMM_MOE_PACKET_BYTES (7168 fp8 + 56 scales: 35 dispatch tokens;
     * combine 256 KiB / (8 x 7168 x 2) = 2 tokens) */
    c.max_num_tokens = 128;
    c.num_experts = 256;
    c.experts_per_token = 8;
    c.hidden_dim = 7168;
    c.hidden_dim_bytes = 7168;
    c.hidden_dim_scale_bytes = 56 * 4;
    CHECK(symm__moe_geom("t", &c, 4, SYMM__MOE_PKT_AUTO, &g) == SYMM_SUCCESS, "deepseek shape: %s",
          symm_last_error());
    CHECK(g.pcap == 35 && g.pmt == 2, "auto slots: pcap %u pmt %u", g.pcap, g.pmt);
    CHECK(g.lay.ll_pbuf + 2ull * 4 * 35 * 2 * (7168 + 224) <= g.lay.ll_mode, "ll_pbuf holds its slots");
    CHECK(g.lay.ll_pcbuf + 2ull * 8 * 7168 * 8 <= g.lay.total, "ll_pcbuf holds its slots");
}

/* SYMM_MOE_LL_COMBINE and where the partial combine applies. */
static void test_ll_combine(void) {
    symm_moe_config_t c = pplx_small();
    symm__moe_geom_t g;
    int m = -1;
    CHECK(symm__moe_ll_combine_parse("t", NULL, &m) == SYMM_SUCCESS && m == SYMM__MOE_LLC_ROWS, "unset is rows");
    CHECK(symm__moe_ll_combine_parse("t", "", &m) == SYMM_SUCCESS && m == SYMM__MOE_LLC_ROWS, "empty is rows");
    CHECK(symm__moe_ll_combine_parse("t", "rows", &m) == SYMM_SUCCESS && m == SYMM__MOE_LLC_ROWS, "rows");
    CHECK(symm__moe_ll_combine_parse("t", "partial", &m) == SYMM_SUCCESS && m == SYMM__MOE_LLC_PARTIAL, "partial");
    CHECK(symm__moe_ll_combine_parse("t", "partial-all", &m) == SYMM_SUCCESS && m == SYMM__MOE_LLC_PARTIAL_ALL,
          "partial-all");
    EXPECT_BAD(symm__moe_ll_combine_parse("t", "partials", &m), "SYMM_MOE_LL_COMBINE=\"partials\": expected rows");
    EXPECT_BAD(symm__moe_ll_combine_parse("t", "1", &m), "SYMM_MOE_LL_COMBINE=\"1\"");
    CHECK(strcmp(symm__moe_ll_combine_name(SYMM__MOE_LLC_PARTIAL), "partial") == 0 &&
              strcmp(symm__moe_ll_combine_name(SYMM__MOE_LLC_PARTIAL_ALL), "partial-all") == 0 &&
              strcmp(symm__moe_ll_combine_name(SYMM__MOE_LLC_ROWS), "rows") == 0,
          "mode names");
    /* 10 tokens x top-3: 30 routes, below SYMM__MOE_LL_POST_ROUTES: partial leaves it, partial-all takes it */
    CHECK(symm__moe_geom("t", &c, 4, SYMM__MOE_PKT_AUTO, &g) == SYMM_SUCCESS, "geometry");
    CHECK(g.lay.ll_cw > 0 && g.lay.ll_cw + 4ull * g.cap * 3 * 8 <= g.lay.total, "ll_cw holds n x cap x k words");
    CHECK(!symm__moe_ll_part(&c, &g, SYMM__MOE_LLC_ROWS, 0), "rows: never");
    CHECK(!symm__moe_ll_part(&c, &g, SYMM__MOE_LLC_PARTIAL, 0), "partial: not below 256 routes");
    CHECK(symm__moe_ll_part(&c, &g, SYMM__MOE_LLC_PARTIAL_ALL, 0), "partial-all: at any size");
    CHECK(!symm__moe_ll_part(&c, &g, SYMM__MOE_LLC_PARTIAL_ALL, 1), "never with the small kernels");
    c.max_num_tokens = 86; /* 258 routes */
    CHECK(symm__moe_geom("t", &c, 4, SYMM__MOE_PKT_AUTO, &g) == SYMM_SUCCESS, "geometry");
    CHECK(symm__moe_ll_part(&c, &g, SYMM__MOE_LLC_PARTIAL, 0), "partial: from 256 routes");
    c.max_num_tokens = 85; /* 255 */
    CHECK(symm__moe_geom("t", &c, 4, SYMM__MOE_PKT_AUTO, &g) == SYMM_SUCCESS, "geometry");
    CHECK(!symm__moe_ll_part(&c, &g, SYMM__MOE_LLC_PARTIAL, 0), "partial: 255 routes stay rows");
    c.max_num_tokens = 128;
    c.num_experts = 8192;
    CHECK(symm__moe_geom("t", &c, 4, SYMM__MOE_PKT_AUTO, &g) == SYMM_SUCCESS, "geometry");
    CHECK(symm__moe_ll_part(&c, &g, SYMM__MOE_LLC_PARTIAL, 0), "the most experts");
    c.mode = SYMM_MOE_HIGH_THROUGHPUT;
    c.dp_size = 1;
    CHECK(symm__moe_geom("t", &c, 4, SYMM__MOE_PKT_AUTO, &g) == SYMM_SUCCESS, "geometry");
    CHECK(!symm__moe_ll_part(&c, &g, SYMM__MOE_LLC_PARTIAL_ALL, 0), "not in the high-throughput mode");
}

static void test_dispatch_args(void) {
    symm_moe_config_t c = pplx_small();
    symm__moe_geom_t g;
    symm_moe_dispatch_args_t a, b;
    symm__moe_kargs_t k;
    static char buf[64];
    CHECK(symm__moe_geom("t", &c, 4, SYMM__MOE_PKT_AUTO, &g) == SYMM_SUCCESS, "geom");
    memset(&a, 0, sizeof(a));
    a.out_expert_num_tokens = (int32_t *)(void *)buf;
    a.out_expert_x = buf;
    a.out_expert_rows = 20;
    a.out_expert_x_stride[1] = 512;
    a.out_expert_x_stride[0] = 20 * 512;
    a.out_expert_x_scale = (float *)(void *)buf;
    a.dp_x = buf;
    a.dp_x_stride = 512;
    a.dp_x_scale = (float *)(void *)buf;
    a.indices = (const uint32_t *)(const void *)buf;
    a.num_tokens = 7;
    a.x_dtype = SYMM_DTYPE_FP8_E4M3;
    memset(&k, 0, sizeof(k));
    CHECK(symm__moe_check_dispatch(&c, &g, &a, &k) == SYMM_SUCCESS, "good dispatch: %s", symm_last_error());
    CHECK(k.num_tokens == 7 && k.x_esz == 1 && k.out_rows == 20, "kargs filled");

    b = a; b.num_tokens = 11;
    EXPECT_BAD(symm__moe_check_dispatch(&c, &g, &b, &k), "num_tokens 11 is above max_num_tokens 10");
    b = a; b.x_dtype = SYMM_DTYPE_BF16;
    EXPECT_BAD(symm__moe_check_dispatch(&c, &g, &b, &k), "hidden_dim_bytes 512");
    b = a; b.x_dtype = (symm_dtype_t)42;
    EXPECT_BAD(symm__moe_check_dispatch(&c, &g, &b, &k), "dtype 42");
    b = a; b.out_expert_rows = 19; b.out_expert_x_stride[0] = 19 * 512;
    EXPECT_BAD(symm__moe_check_dispatch(&c, &g, &b, &k), "it needs max_num_tokens x DP groups = 20");
    b = a; b.out_expert_x_stride[1] = 256;
    EXPECT_BAD(symm__moe_check_dispatch(&c, &g, &b, &k), "row stride 256");
    b = a; b.out_expert_x_stride[0] = 512;
    EXPECT_BAD(symm__moe_check_dispatch(&c, &g, &b, &k), "expert stride 512 is too small");
    b = a; b.dp_x_scale = NULL;
    EXPECT_BAD(symm__moe_check_dispatch(&c, &g, &b, &k), "dp_x_scale and out_expert_x_scale must be given");
    b = a; b.out_expert_x_scale_stride[2] = -1;
    EXPECT_BAD(symm__moe_check_dispatch(&c, &g, &b, &k), "negative");
    b = a; b.indices = NULL;
    EXPECT_BAD(symm__moe_check_dispatch(&c, &g, &b, &k), "dp_x and indices must be given");
    b = a; b.out_expert_num_tokens = NULL;
    EXPECT_BAD(symm__moe_check_dispatch(&c, &g, &b, &k), "out_expert_num_tokens and out_expert_x");
    EXPECT_BAD(symm__moe_check_dispatch(&c, &g, NULL, &k), "args is NULL");
    b = a; b.num_tokens = 0; b.dp_x = NULL; b.indices = NULL; b.dp_x_scale = NULL;
    CHECK(symm__moe_check_dispatch(&c, &g, &b, &k) == SYMM_SUCCESS, "zero tokens need no input buffers: %s",
          symm_last_error());
    b.out_expert_x_scale = NULL; /* the output's scales are written whatever this PE sends */
    EXPECT_BAD(symm__moe_check_dispatch(&c, &g, &b, &k), "dp_x_scale and out_expert_x_scale must be given");

    c.hidden_dim_scale_bytes = 0;
    CHECK(symm__moe_geom("t", &c, 4, SYMM__MOE_PKT_AUTO, &g) == SYMM_SUCCESS, "geom without scales");
    EXPECT_BAD(symm__moe_check_dispatch(&c, &g, &a, &k), "must be NULL");
    c.mode = SYMM_MOE_HIGH_THROUGHPUT;
    EXPECT_BAD(symm__moe_check_dispatch(&c, &g, &a, &k), "high-throughput mode");
}

static void test_combine_args(void) {
    symm_moe_config_t c = pplx_small();
    symm__moe_geom_t g;
    symm_moe_combine_args_t a, b;
    symm__moe_kargs_t k;
    static char buf[64];
    CHECK(symm__moe_geom("t", &c, 4, SYMM__MOE_PKT_AUTO, &g) == SYMM_SUCCESS, "geom");
    memset(&a, 0, sizeof(a));
    a.out_tokens = buf;
    a.out_stride = 512;
    a.out_rows = 10;
    a.out_dtype = SYMM_DTYPE_BF16;
    a.indices = (const uint32_t *)(const void *)buf;
    a.weights = (const float *)(const void *)buf;
    a.num_tokens = 9;
    a.expert_y = buf;
    a.expert_y_stride[1] = 512;
    a.expert_y_stride[0] = 20 * 512;
    a.expert_y_rows = 20;
    a.y_dtype = SYMM_DTYPE_F16;
    CHECK(symm__moe_check_combine(&c, &g, &a, &k) == SYMM_SUCCESS, "good combine: %s", symm_last_error());
    b = a; b.out_dtype = SYMM_DTYPE_F32;
    EXPECT_BAD(symm__moe_check_combine(&c, &g, &b, &k), "out_tokens dtype 0: expected bf16");
    b = a; b.y_dtype = SYMM_DTYPE_FP8_E4M3;
    EXPECT_BAD(symm__moe_check_combine(&c, &g, &b, &k), "expert_y dtype 8");
    b = a; b.out_rows = 8;
    EXPECT_BAD(symm__moe_check_combine(&c, &g, &b, &k), "out_tokens has 8 rows, below num_tokens 9");
    b = a; b.num_tokens = 12;
    EXPECT_BAD(symm__moe_check_combine(&c, &g, &b, &k), "num_tokens 12 is above max_num_tokens 10");
    b = a; b.weights = NULL;
    EXPECT_BAD(symm__moe_check_combine(&c, &g, &b, &k), "weights must be given");
    b = a; b.expert_y_rows = 3;
    EXPECT_BAD(symm__moe_check_combine(&c, &g, &b, &k), "expert_y has 3 rows");
}

static void test_ht_args(void) {
    symm_moe_config_t c = pplx_small();
    symm__moe_geom_t g;
    symm_moe_ht_dispatch_args_t a, b;
    symm__moe_kargs_t k;
    static char buf[64];
    c.mode = SYMM_MOE_HIGH_THROUGHPUT;
    c.dp_size = 1;
    c.max_num_tokens = 4096;
    CHECK(symm__moe_geom("t", &c, 4, SYMM__MOE_PKT_AUTO, &g) == SYMM_SUCCESS, "geom");
    memset(&a, 0, sizeof(a));
    a.x = buf;
    a.x_stride = 512;
    a.x_dtype = SYMM_DTYPE_FP8_E4M3;
    a.x_scale = (const float *)(const void *)buf;
    a.indices = buf;
    a.indices_dtype = SYMM_DTYPE_I64;
    a.num_tokens = 4096;
    CHECK(symm__moe_check_ht_dispatch(&c, &g, &a, &k) == SYMM_SUCCESS && k.idx_kind == 2, "good ht dispatch: %s",
          symm_last_error());
    b = a; b.indices_dtype = SYMM_DTYPE_F32;
    EXPECT_BAD(symm__moe_check_ht_dispatch(&c, &g, &b, &k), "expected int32");
    b = a; b.num_tokens = 4097;
    EXPECT_BAD(symm__moe_check_ht_dispatch(&c, &g, &b, &k), "num_tokens 4097");
    b = a; b.x_scale = NULL;
    EXPECT_BAD(symm__moe_check_ht_dispatch(&c, &g, &b, &k), "x_scale must be given");
    b.num_tokens = 0; b.x = NULL;
    CHECK(symm__moe_check_ht_dispatch(&c, &g, &b, &k) == SYMM_SUCCESS, "zero tokens need no x or x_scale: %s",
          symm_last_error());
    b = a; b.x_stride = 100;
    EXPECT_BAD(symm__moe_check_ht_dispatch(&c, &g, &b, &k), "x row stride 100");
    CHECK(symm__moe_check_ht_combine(&c, buf, SYMM_DTYPE_BF16, 512, 100, buf, SYMM_DTYPE_BF16, 512, 4096, 4096,
                                     &k) == SYMM_SUCCESS, "good ht combine: %s", symm_last_error());
    EXPECT_BAD(symm__moe_check_ht_combine(&c, buf, SYMM_DTYPE_F32, 512, 100, buf, SYMM_DTYPE_BF16, 512, 4096, 4096,
                                          &k), "y dtype 0");
    EXPECT_BAD(symm__moe_check_ht_combine(&c, buf, SYMM_DTYPE_BF16, 512, 100, buf, SYMM_DTYPE_BF16, 512, 10, 4096,
                                          &k), "out has 10 rows");
    c.mode = SYMM_MOE_LOW_LATENCY;
    EXPECT_BAD(symm__moe_check_ht_dispatch(&c, &g, &a, &k), "low-latency mode");
}

/* The combine's side channel (symm_moe_ht_combine_weights): none is no check;
 * with cols > 0, w and out_w given, 4-byte aligned, strides of at least cols,
 * rows for y's rows and the dispatch's tokens, cols up to the top-k; the send
 * half alone needs no out_w, the receive half alone no w; the layout keeps
 * room for k values per row from every PE. */
static void test_ht_weights(void) {
    symm_moe_config_t c = pplx_small();
    symm__moe_geom_t g;
    symm__moe_kargs_t k;
    symm_moe_ht_weights_t w, b;
    static float wbuf[64], obuf[64];
    c.mode = SYMM_MOE_HIGH_THROUGHPUT;
    c.dp_size = 1;
    c.max_num_tokens = 4096;
    CHECK(symm__moe_geom("t", &c, 4, SYMM__MOE_PKT_AUTO, &g) == SYMM_SUCCESS, "geom");
    CHECK(g.lay.ht_cwbuf > 0 && g.lay.ht_cwbuf + 4ull * 4096 * 3 * 4 <= g.lay.total, "ht_cwbuf holds n x M x k floats");
    memset(&k, 0, sizeof(k));
    CHECK(symm__moe_check_ht_combine(&c, wbuf, SYMM_DTYPE_BF16, 512, 100, obuf, SYMM_DTYPE_BF16, 512, 4096, 50,
                                     &k) == SYMM_SUCCESS, "combine: %s", symm_last_error());
    CHECK(symm__moe_check_ht_weights(&c, NULL, SYMM_MOE_SEND_RECV, &k) == SYMM_SUCCESS && k.w_cols == 0, "none");
    memset(&w, 0, sizeof(w));
    w.w = wbuf;
    w.w_stride = 3;
    w.w_rows = 100;
    w.out_w = obuf;
    w.out_w_stride = 4;
    w.out_w_rows = 50;
    w.cols = 3;
    CHECK(symm__moe_check_ht_weights(&c, &w, SYMM_MOE_SEND_RECV, &k) == SYMM_SUCCESS && k.w_cols == 3 &&
          k.w == wbuf && k.out_w == obuf && k.ow_stride == 4 && k.w_rows == 100, "good weights: %s",
          symm_last_error());
    b = w; b.cols = 0; b.w = NULL;
    CHECK(symm__moe_check_ht_weights(&c, &b, SYMM_MOE_SEND_RECV, &k) == SYMM_SUCCESS && k.w_cols == 0,
          "cols 0 is none");
    b = w; b.cols = 4;
    EXPECT_BAD(symm__moe_check_ht_weights(&c, &b, SYMM_MOE_SEND_RECV, &k), "above experts_per_token 3");
    b = w; b.w = NULL;
    EXPECT_BAD(symm__moe_check_ht_weights(&c, &b, SYMM_MOE_SEND_RECV, &k), "weights.w is NULL");
    CHECK(symm__moe_check_ht_weights(&c, &b, SYMM_MOE_RECV, &k) == SYMM_SUCCESS, "a receive half reads no w");
    b = w; b.out_w = NULL;
    EXPECT_BAD(symm__moe_check_ht_weights(&c, &b, SYMM_MOE_RECV, &k), "weights.out_w is NULL");
    CHECK(symm__moe_check_ht_weights(&c, &b, SYMM_MOE_SEND, &k) == SYMM_SUCCESS, "a send half writes no out_w");
    b = w; b.w = (const float *)(const void *)((const char *)wbuf + 2);
    EXPECT_BAD(symm__moe_check_ht_weights(&c, &b, SYMM_MOE_SEND_RECV, &k), "4-byte aligned");
    b = w; b.w_stride = 2;
    EXPECT_BAD(symm__moe_check_ht_weights(&c, &b, SYMM_MOE_SEND_RECV, &k), "weights.w row stride 2");
    b = w; b.out_w_stride = -4;
    EXPECT_BAD(symm__moe_check_ht_weights(&c, &b, SYMM_MOE_SEND_RECV, &k), "weights.out_w row stride -4");
    b = w; b.w_stride = (int64_t)1 << 50;
    EXPECT_BAD(symm__moe_check_ht_weights(&c, &b, SYMM_MOE_SEND_RECV, &k), "past any buffer");
    b = w; b.w_rows = 99;
    EXPECT_BAD(symm__moe_check_ht_weights(&c, &b, SYMM_MOE_SEND_RECV, &k), "below y's 100");
    b = w; b.out_w_rows = 49;
    EXPECT_BAD(symm__moe_check_ht_weights(&c, &b, SYMM_MOE_SEND_RECV, &k), "below the dispatch's num_tokens 50");
    /* no rows of y: w is not read (and may be NULL); no tokens: out_w is not written */
    CHECK(symm__moe_check_ht_combine(&c, NULL, SYMM_DTYPE_BF16, 512, 0, NULL, SYMM_DTYPE_BF16, 512, 0, 0, &k) ==
          SYMM_SUCCESS, "empty combine: %s", symm_last_error());
    b = w; b.w = NULL; b.out_w = NULL; b.w_rows = 0; b.out_w_rows = 0;
    CHECK(symm__moe_check_ht_weights(&c, &b, SYMM_MOE_SEND_RECV, &k) == SYMM_SUCCESS && k.w_rows == 0,
          "an empty combine needs no buffers: %s", symm_last_error());
}

/* symm_moe_ht_dispatch_into's receive buffers: NULL is the handle's own; a
 * caller's must be in the heap, 16-byte aligned, clear of the handle's region
 * and of each other; scales only with a handle that has them. */
static void test_ht_into(void) {
    symm_moe_config_t c = pplx_small();
    symm__moe_geom_t g;
    symm__moe_kargs_t k;
    size_t xb, sb;
    const uintptr_t base = (uintptr_t)1 << 32, past = base + ((uintptr_t)1 << 30);
    c.mode = SYMM_MOE_HIGH_THROUGHPUT;
    c.dp_size = 1;
    c.max_num_tokens = 100;
    CHECK(symm__moe_geom("t", &c, 4, SYMM__MOE_PKT_AUTO, &g) == SYMM_SUCCESS, "geom");
    CHECK(g.lay.ht_dst > 0 && g.lay.ht_dst % 256 == 0 && g.lay.ht_rx >= g.lay.ht_dst + 2 * 4 * 4 * 8,
          "ht_dst: [2][n][4] words before the receive buffers");
    symm__moe_ht_into_bytes(&c, &g, &xb, &sb);
    CHECK(xb == 400u * 512u && sb == 400u * 4u * 4u, "into bytes %zu %zu", xb, sb);
    memset(&k, 0, sizeof(k));
    CHECK(symm__moe_check_ht_into("t", &c, &g, base, NULL, NULL, 1, 1, &k) == SYMM_SUCCESS &&
          k.ht_rx_at == (int64_t)g.lay.ht_rx && k.ht_rs_at == (int64_t)g.lay.ht_rscale, "the handle's own");
    CHECK(symm__moe_check_ht_into("t", &c, &g, base, (void *)past, (void *)(past + xb), 1, 1, &k) == SYMM_SUCCESS &&
          k.ht_rx_at == (int64_t)(past - base) && k.ht_rs_at == (int64_t)(past + xb - base), "the caller's: %s",
          symm_last_error());
    CHECK(symm__moe_check_ht_into("t", &c, &g, base, (void *)(base - xb - 256), NULL, 1, 1, &k) == SYMM_SUCCESS &&
          k.ht_rx_at == -(int64_t)(xb + 256), "below the handle: a negative offset");
    CHECK(symm__moe_check_ht_into("t", &c, &g, base, (void *)(base + g.lay.ht_rx), NULL, 1, 1, &k) == SYMM_SUCCESS,
          "the handle's own buffer, named");
    EXPECT_BAD(symm__moe_check_ht_into("t", &c, &g, base, (void *)(past + 8), NULL, 1, 1, &k), "not 16-byte aligned");
    EXPECT_BAD(symm__moe_check_ht_into("t", &c, &g, base, (void *)past, NULL, 0, 1, &k), "symmetric heap");
    EXPECT_BAD(symm__moe_check_ht_into("t", &c, &g, base, (void *)(base + 256), NULL, 1, 1, &k), "overlaps the handle");
    EXPECT_BAD(symm__moe_check_ht_into("t", &c, &g, base, NULL, (void *)past, 1, 0, &k), "recv_x_scale");
    EXPECT_BAD(symm__moe_check_ht_into("t", &c, &g, base, NULL, (void *)(past + 4), 1, 1, &k), "not 16-byte");
    EXPECT_BAD(symm__moe_check_ht_into("t", &c, &g, base, (void *)past, (void *)(past + xb - 16), 1, 1, &k),
               "overlap");
    c.hidden_dim_scale_bytes = 0;
    CHECK(symm__moe_geom("t", &c, 4, SYMM__MOE_PKT_AUTO, &g) == SYMM_SUCCESS, "geom without scales");
    EXPECT_BAD(symm__moe_check_ht_into("t", &c, &g, base, NULL, (void *)past, 1, 1, &k), "carries no scales");
    CHECK(symm__moe_check_ht_into("t", &c, &g, base, (void *)past, NULL, 1, 1, &k) == SYMM_SUCCESS,
          "no scales, recv_x only: %s", symm_last_error());
}

static void test_order(void) {
    int at = SYMM__MOE_AT_DISPATCH_SEND, next = -1;
    CHECK(symm__moe_check_order("t", at, 0, SYMM_MOE_SEND, &next) == SYMM_SUCCESS &&
          next == SYMM__MOE_AT_DISPATCH_RECV, "dispatch send");
    EXPECT_BAD(symm__moe_check_order("t", next, 1, SYMM_MOE_SEND_RECV, &at), "receive half of the dispatch");
    CHECK(symm__moe_check_order("t", next, 0, SYMM_MOE_RECV, &at) == SYMM_SUCCESS &&
          at == SYMM__MOE_AT_COMBINE_SEND, "dispatch recv");
    EXPECT_BAD(symm__moe_check_order("t", at, 0, SYMM_MOE_RECV, &next), "expects a combine");
    CHECK(symm__moe_check_order("t", at, 0, SYMM_MOE_SEND_RECV, &next) == SYMM_SUCCESS &&
          next == SYMM__MOE_AT_COMBINE_SEND, "a dispatch that skips the combine of the one before");
    CHECK(symm__moe_check_order("t", at, 0, SYMM_MOE_SEND, &next) == SYMM_SUCCESS &&
          next == SYMM__MOE_AT_DISPATCH_RECV, "its send half alone");
    EXPECT_BAD(symm__moe_check_order("t", next, 0, SYMM_MOE_SEND, &at), "receive half of the dispatch");
    at = SYMM__MOE_AT_COMBINE_SEND;
    CHECK(symm__moe_check_order("t", at, 1, SYMM_MOE_SEND_RECV, &next) == SYMM_SUCCESS &&
          next == SYMM__MOE_AT_DISPATCH_SEND, "combine both halves");
    EXPECT_BAD(symm__moe_check_order("t", next, 0, SYMM_MOE_RECV, &at), "expects a dispatch");
    EXPECT_BAD(symm__moe_check_order("t", next, 0, 0, &at), "do_send and do_recv cannot both be false");
    EXPECT_BAD(symm__moe_check_order("t", next, 0, 4, &at), "flags 4");
}

static void test_messages(void) {
    symm_moe_config_t c = pplx_small();
    symm__moe_err_t e;
    char msg[512];
    memset(&e, 0, sizeof(e));
    e.code = SYMM__MOE_ERR_EXPERT_RANGE;
    e.call = SYMM__MK_LL_DISPATCH;
    e.a = 3;
    e.b = 1;
    e.c = 99;
    symm__moe_err_message(&e, &c, msg, sizeof(msg));
    CHECK(strstr(msg, "indices[3][1] = 99 is outside [0, num_experts 8)") != NULL, "range message: %s", msg);
    e.code = SYMM__MOE_ERR_EXPERT_DUP;
    symm__moe_err_message(&e, &c, msg, sizeof(msg));
    CHECK(strstr(msg, "repeats an earlier expert") != NULL, "dup message: %s", msg);
    e.code = SYMM__MOE_ERR_BOUND;
    e.a = 12;
    e.b = 7;
    symm__moe_err_message(&e, &c, msg, sizeof(msg));
    CHECK(strstr(msg, "bound_m = 12 is above num_tokens 7") != NULL, "bound message: %s", msg);
    e.code = SYMM__MOE_ERR_CAPACITY;
    e.call = SYMM__MK_HT_DISPATCH;
    symm__moe_err_message(&e, &c, msg, sizeof(msg));
    CHECK(strstr(msg, "symm_moe_ht_dispatch") && strstr(msg, "max_recv_tokens 7"), "capacity message: %s", msg);
}

/* x / d as the kernels take it from the plan (ll_fdiv). */
static uint32_t fdiv(uint32_t x, uint32_t m) { return m ? (uint32_t)(((uint64_t)x * m) >> 32) : x; }

/* The small kernels' plan (symm__moe_ll_plan) against the plain divisions the kernels made
 * before it, for every block of every grid up to 160 blocks and every token count, at the
 * bench's shapes and odd ones: each magic division exact, each block's first units alike. */
static void check_plan_dispatch(const symm__moe_kargs_t *a, const char *what) {
    const symm__moe_llplan_t *p = &a->llp;
    const uint32_t n = (uint32_t)a->n, dp = (uint32_t)a->dp, K = a->topk, L = a->local, B = (uint32_t)a->nblocks;
    const uint32_t RB = B > 1 ? B - 1 : 1, nv = a->x_bytes / 16u + (a->scale_cols + 3u) / 4u, cap = a->cap;
    const uint32_t dpr = (uint32_t)a->me % dp;
    const uint32_t all = a->num_tokens > dpr ? (uint32_t)((a->num_tokens - dpr + dp - 1) / dp) : 0u;
    const uint32_t sl = all > 0 && all < RB ? RB / all : 1u, pairs = n * cap, rsl = pairs < B ? B / pairs : 1u;
    int bad = 0;
    CHECK(p->dpr == dpr && p->all == all && p->nv == nv && p->dsl == sl && p->dunits == all * sl && p->rsl == rsl &&
              p->runits == pairs * rsl && p->h32 == 32u / K && p->hmax == cap * (K < L ? K : L),
          "%s: dispatch plan fields", what);
    for (uint32_t t = 0; t < SYMM__MOE_THREADS; t++)
        bad |= fdiv(t, p->mk) != t / K;
    for (uint32_t x = 0; x < a->experts; x++)
        bad |= fdiv(x, p->ml) != x / L;
    for (uint32_t u = 0; u < B; u++) {
        const uint32_t ri = u / sl, q = u / rsl, z = u % rsl;
        bad |= fdiv(u, p->mdsl) != ri;
        bad |= fdiv(nv * (u - ri * sl), p->mdsl) != nv * (u - ri * sl) / sl;
        bad |= fdiv(nv * (u - ri * sl + 1), p->mdsl) != nv * (u - ri * sl + 1) / sl;
        bad |= fdiv(u, p->mrsl) != q || fdiv(q, p->mcap) != q / cap;
        bad |= fdiv(nv * z, p->mrsl) != nv * z / rsl || fdiv(nv * (z + 1), p->mrsl) != nv * (z + 1) / rsl;
    }
    CHECK(!bad, "%s: a dispatch block's unit differs from the plain divisions'", what);
}

static void check_plan_combine(const symm__moe_kargs_t *a, const char *what) {
    const symm__moe_llplan_t *p = &a->llp;
    const uint32_t K = a->topk, L = a->local, B = (uint32_t)a->nblocks, h8 = a->hidden / 8u, b32 = (uint32_t)a->num_tokens;
    const uint32_t rmax = (uint32_t)a->n * a->cap * (K < L ? K : L), csl = rmax > 0 && rmax < B ? B / rmax : 1u;
    const uint32_t per = SYMM__MOE_THREADS / K;
    uint32_t sl = 1, tb = 1, units;
    int bad = 0;
    if (b32 < B) {
        sl = b32 ? B / b32 : 1;
        if (sl > h8)
            sl = h8;
    } else {
        tb = 1024u / h8;
        tb = tb < 1 ? 1 : (tb > 32 ? 32 : tb);
        if (tb * K > SYMM__MOE_THREADS)
            tb = SYMM__MOE_THREADS / K;
        if ((uint64_t)tb * B > b32)
            tb = (b32 + B - 1) / B;
    }
    units = sl > 1 ? b32 * sl : (b32 + tb - 1) / tb;
    CHECK(p->csl == csl && p->rmax == rmax && p->psl == sl && p->ptb == tb && p->punits == units && p->per == per &&
              p->g0 == (uint32_t)a->me / (uint32_t)a->dp * (uint32_t)a->dp,
          "%s: combine plan fields (psl %u/%u ptb %u/%u units %u/%u)", what, p->psl, sl, p->ptb, tb, p->punits, units);
    for (uint32_t t = 0; t < SYMM__MOE_THREADS; t++)
        bad |= fdiv(t, p->mk) != t / K || fdiv(t, p->mh8) != t / h8;
    for (uint32_t u = 0; u < B; u++) {
        const uint32_t z = sl > 1 ? u % sl : 0u;
        bad |= fdiv(u, p->mcsl) != u / csl;
        if (sl > 1)
            bad |= fdiv(u, p->mpsl) != u / sl;
        bad |= fdiv(h8 * z, p->mpsl) != h8 * z / sl || fdiv(h8 * (z + 1), p->mpsl) != h8 * (z + 1) / sl;
    }
    for (uint32_t g = 0; g <= h8; g++)
        bad |= fdiv(g + per - 1, p->mper) != (g + per - 1) / per;
    CHECK(!bad, "%s: a combine block's unit differs from the plain divisions'", what);
}

static void test_ll_plan(void) {
    static const struct {
        int n, dp;
        size_t M, E, K, H, hb, sb;
    } shapes[] = {
        {1, 1, 1, 256, 8, 7168, 7168, 224}, {4, 1, 1, 256, 8, 7168, 7168, 224}, {4, 1, 8, 256, 8, 7168, 7168, 224},
        {1, 1, 8, 64, 6, 2048, 4096, 0},    {4, 1, 1, 64, 6, 2048, 4096, 0},    {2, 2, 5, 8, 3, 512, 512, 16},
        {8, 1, 16, 256, 8, 7168, 7168, 224}, {3, 1, 7, 9, 5, 56, 112, 4},       {4, 4, 3, 8, 8, 16, 32, 0},
    };
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        symm_moe_config_t c = pplx_small();
        symm__moe_geom_t g;
        c.max_num_tokens = shapes[i].M;
        c.num_experts = shapes[i].E;
        c.experts_per_token = shapes[i].K;
        c.hidden_dim = shapes[i].H;
        c.hidden_dim_bytes = shapes[i].hb;
        c.hidden_dim_scale_bytes = shapes[i].sb;
        c.dp_size = shapes[i].dp;
        if (symm__moe_geom("t", &c, shapes[i].n, SYMM__MOE_PKT_ON, &g) != SYMM_SUCCESS || !g.ll_small) {
            CHECK(0, "plan shape %zu: %s (small %d)", i, symm_last_error(), g.ll_small);
            continue;
        }
        for (int me = 0; me < shapes[i].n; me++)
            for (uint64_t m = 0; m <= shapes[i].M; m++)
                for (int B = 1; B <= 160; B++) {
                    symm__moe_kargs_t a;
                    char what[96];
                    memset(&a, 0, sizeof(a));
                    a.me = me;
                    a.n = g.n;
                    a.dp = g.dp;
                    a.experts = (uint32_t)c.num_experts;
                    a.local = g.local;
                    a.topk = (uint32_t)c.experts_per_token;
                    a.hidden = (uint32_t)c.hidden_dim;
                    a.max_tokens = (uint32_t)c.max_num_tokens;
                    a.cap = g.cap;
                    a.x_bytes = (uint32_t)c.hidden_dim_bytes;
                    a.scale_cols = g.scale_cols;
                    a.pcap = g.pcap;
                    a.pmt = g.pmt;
                    a.pkt = 1;
                    a.ll_small = 1;
                    a.num_tokens = m;
                    a.nblocks = B;
                    snprintf(what, sizeof(what), "shape %zu pe %d tokens %u blocks %d", i, me, (unsigned)m, B);
                    a.kernel = SYMM__MK_LL_DISPATCH;
                    symm__moe_ll_plan(&a);
                    check_plan_dispatch(&a, what);
                    a.kernel = SYMM__MK_LL_COMBINE;
                    symm__moe_ll_plan(&a);
                    check_plan_combine(&a, what);
                    if (failures > 20)
                        return;
                }
    }
}

int main(void) {
    test_config();
    test_ll_plan();
    test_packets();
    test_ll_combine();
    test_dispatch_args();
    test_combine_args();
    test_ht_args();
    test_ht_weights();
    test_ht_into();
    test_order();
    test_messages();
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("moe args: all checks passed\n");
    return 0;
}
