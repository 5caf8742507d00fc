/*
 * test_env - the environment table: parsing of each type, defaults, bad
 * values, the listing, and the multicast gate.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/env.h"
#include "core/log.h"
#include "symm_test.h"

/* Every variable of the table, straight from the table. */
#define NAME_OF(field, name, type, def, help) #name,
static const char *k_names[] = {SYMM__ENV_TABLE(NAME_OF)};
#undef NAME_OF
#define DEF_OF(field, name, type, def, help) def,
static const char *k_defaults[] = {SYMM__ENV_TABLE(DEF_OF)};
#undef DEF_OF
#define HELP_OF(field, name, type, def, help) help,
static const char *k_helps[] = {SYMM__ENV_TABLE(HELP_OF)};
#undef HELP_OF
#define N_VARS (sizeof k_names / sizeof k_names[0])

static void clear_all(void) {
    for (size_t i = 0; i < N_VARS; i++)
        unsetenv(k_names[i]);
    unsetenv("NCCL_NVLS_ENABLE");
    unsetenv("NVSHMEM_DISABLE_NVLS");
    unsetenv("TORCH_SYMM_MEM_DISABLE_MULTICAST");
}

static void test_parse_size(void) {
    static const struct { const char *text; size_t value; } good[] = {
        {"0", 0},
        {"4096", 4096},
        {"4K", 4096},
        {"4k", 4096},
        {"1KiB", 1024},
        {"1KB", 1024},
        {"8B", 8},
        {"256M", 256ull << 20},
        {"1G", 1ull << 30},
        {"3g", 3ull << 30},
        {"2T", 2ull << 40},
        {" 16M ", 16ull << 20},
        {"18446744073709551615", 18446744073709551615ull},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        size_t v = 12345;
        TEST_ASSERT(symm__parse_size(good[i].text, &v) == 0, "\"%s\" should parse", good[i].text);
        TEST_ASSERT(v == good[i].value, "\"%s\" -> %zu, expected %zu", good[i].text, v, good[i].value);
    }
    static const char *bad[] = {"", "abc", "-1", "+1", "1X", "1.5G", "1 M", "M", "1MM", "1Ki",
                                "20000000T", "18446744073709551616", "99999999999999999999K"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t v = 12345;
        TEST_ASSERT(symm__parse_size(bad[i], &v) != 0, "\"%s\" should not parse", bad[i]);
        TEST_ASSERT(v == 12345, "output written on failure for \"%s\"", bad[i]);
    }
    size_t v;
    TEST_ASSERT(symm__parse_size(NULL, &v) != 0, "NULL text");
}

static void test_defaults(void) {
    const symm__env_t *e = symm__env();
    TEST_ASSERT(e != NULL, "symm__env never NULL");
    TEST_ASSERT(e->log_level == SYMM__LOG_WARN, "log_level default");
    TEST_ASSERT(strcmp(e->backend, "native") == 0, "backend default \"%s\"", e->backend);
    TEST_ASSERT(e->bootstrap_timeout == 120.0, "bootstrap_timeout default %g", e->bootstrap_timeout);
    TEST_ASSERT(e->peer_timeout == 5.0, "peer_timeout default %g", e->peer_timeout);
    TEST_ASSERT(strcmp(e->bootstrap_addr, "") == 0, "bootstrap_addr default");
    TEST_ASSERT(e->bootstrap_port == 0, "bootstrap_port default");
    TEST_ASSERT(e->heap_reserve == 0 && e->heap_limit == 0, "heap defaults");
    TEST_ASSERT(e->heap_chunk == (size_t)256 << 20, "heap_chunk default %zu", e->heap_chunk);
    TEST_ASSERT(e->enable_multicast == 0, "enable_multicast default");
    TEST_ASSERT(strcmp(e->bootstrap_secret, "") == 0, "bootstrap_secret default");
#ifdef SYMM_DEBUG
    TEST_ASSERT(e->wait_timeout == 60.0, "wait_timeout debug default");
#else
    TEST_ASSERT(e->wait_timeout == 600.0, "wait_timeout default %g (no wait lasts forever)", e->wait_timeout);
#endif
    /* Defaults hold before any load even when the environment says otherwise. */
    setenv("SYMM_HEAP_CHUNK", "1M", 1);
    TEST_ASSERT(symm__env()->heap_chunk == (size_t)256 << 20, "defaults before load");
    unsetenv("SYMM_HEAP_CHUNK");
    TEST_ASSERT(!symm__env_loaded(), "not loaded yet");
}

static symm__env_t load_ok(void) {
    symm__env_t e;
    symm_status_t s = symm__env_load(&e);
    if (s != SYMM_SUCCESS)
        TEST_FAIL("symm__env_load -> %s (%s)", symm_strerror(s), symm_last_error());
    return e;
}

static void test_values(void) {
    clear_all();
    setenv("SYMM_LOG_LEVEL", "debug", 1);
    setenv("SYMM_BACKEND", "host", 1);
    setenv("SYMM_WAIT_TIMEOUT", "2.5", 1);
    setenv("SYMM_BOOTSTRAP_TIMEOUT", "30s", 1);
    setenv("SYMM_PEER_TIMEOUT", "0.25", 1);
    setenv("SYMM_BOOTSTRAP_ADDR", "10.1.2.3", 1);
    setenv("SYMM_BOOTSTRAP_PORT", "29500", 1);
    setenv("SYMM_HEAP_RESERVE", "64G", 1);
    setenv("SYMM_HEAP_LIMIT", "1T", 1);
    setenv("SYMM_HEAP_CHUNK", "2M", 1);
    setenv("SYMM_ENABLE_MULTICAST", "yes", 1);
    setenv("SYMM_DEBUG_DENY_PEER", "0:1", 1);
    setenv("SYMM_COLL_ALGO", "oneshot", 1);
    symm__env_t e = load_ok();
    TEST_ASSERT(e.log_level == SYMM__LOG_DEBUG, "log_level");
    TEST_ASSERT(strcmp(e.backend, "host") == 0, "backend");
    TEST_ASSERT(e.wait_timeout == 2.5, "wait_timeout %g", e.wait_timeout);
    TEST_ASSERT(e.bootstrap_timeout == 30.0, "bootstrap_timeout %g", e.bootstrap_timeout);
    TEST_ASSERT(e.peer_timeout == 0.25, "peer_timeout %g", e.peer_timeout);
    TEST_ASSERT(strcmp(e.bootstrap_addr, "10.1.2.3") == 0, "bootstrap_addr");
    TEST_ASSERT(e.bootstrap_port == 29500, "bootstrap_port");
    TEST_ASSERT(e.heap_reserve == (size_t)64 << 30, "heap_reserve");
    TEST_ASSERT(e.heap_limit == (size_t)1 << 40, "heap_limit");
    TEST_ASSERT(e.heap_chunk == (size_t)2 << 20, "heap_chunk");
    TEST_ASSERT(e.enable_multicast == 1, "enable_multicast");
    TEST_ASSERT(strcmp(e.debug_deny_peer, "0:1") == 0, "debug_deny_peer");
    TEST_ASSERT(strcmp(e.coll_algo, "oneshot") == 0, "coll_algo");

    /* Strings are copies: changing the environment later does not change them. */
    setenv("SYMM_BACKEND", "native", 1);
    TEST_ASSERT(strcmp(e.backend, "host") == 0, "string copied");

    /* Loading does not install; set does. */
    TEST_ASSERT(symm__env()->log_level == SYMM__LOG_WARN, "load does not install");
    symm__env_set(&e);
    TEST_ASSERT(symm__env()->log_level == SYMM__LOG_DEBUG && symm__env_loaded(), "set installs");
    symm__env_t quiet = e;
    quiet.log_level = SYMM__LOG_ERROR;
    symm__env_set(&quiet);

    /* Booleans, all spellings. */
    static const struct { const char *text; int value; } bools[] = {
        {"1", 1}, {"0", 0}, {"true", 1}, {"FALSE", 0}, {"yes", 1}, {"No", 0},
        {"on", 1}, {"off", 0}, {"y", 1}, {"n", 0}};
    for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++) {
        setenv("SYMM_ENABLE_MULTICAST", bools[i].text, 1);
        TEST_ASSERT(load_ok().enable_multicast == bools[i].value, "bool \"%s\"", bools[i].text);
    }
    /* Log levels. */
    static const struct { const char *text; symm__log_level_t value; } levels[] = {
        {"error", SYMM__LOG_ERROR}, {"WARN", SYMM__LOG_WARN}, {"warning", SYMM__LOG_WARN},
        {"info", SYMM__LOG_INFO},   {"Debug", SYMM__LOG_DEBUG}, {"2", SYMM__LOG_INFO}};
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        setenv("SYMM_LOG_LEVEL", levels[i].text, 1);
        TEST_ASSERT(load_ok().log_level == levels[i].value, "level \"%s\"", levels[i].text);
    }
    /* Seconds. */
    static const struct { const char *text; double value; } secs[] = {
        {"0", 0}, {"1", 1}, {"0.5", 0.5}, {"10s", 10}, {"1e2", 100}};
    for (size_t i = 0; i < sizeof secs / sizeof secs[0]; i++) {
        setenv("SYMM_PEER_TIMEOUT", secs[i].text, 1);
        TEST_ASSERT(load_ok().peer_timeout == secs[i].value, "seconds \"%s\"", secs[i].text);
    }
    /* An empty value means the default. */
    clear_all();
    setenv("SYMM_HEAP_CHUNK", "", 1);
    setenv("SYMM_LOG_LEVEL", "", 1);
    e = load_ok();
    TEST_ASSERT(e.heap_chunk == (size_t)256 << 20 && e.log_level == SYMM__LOG_WARN, "empty = default");
    clear_all();
}

static void test_bad_values(void) {
    static const struct { const char *name, *value; } bad[] = {
        {"SYMM_LOG_LEVEL", "loud"},         {"SYMM_LOG_LEVEL", "7"},
        {"SYMM_ENABLE_MULTICAST", "maybe"}, {"SYMM_ENABLE_MULTICAST", "2"},
        {"SYMM_BOOTSTRAP_PORT", "29500x"},  {"SYMM_BOOTSTRAP_PORT", "port"},
        {"SYMM_BOOTSTRAP_PORT", "99999999999999999999999"},
        {"SYMM_HEAP_CHUNK", "1.5G"},        {"SYMM_HEAP_CHUNK", "-4M"},
        {"SYMM_HEAP_LIMIT", "lots"},        {"SYMM_PEER_TIMEOUT", "-1"},
        {"SYMM_PEER_TIMEOUT", "soon"},      {"SYMM_BOOTSTRAP_TIMEOUT", "5 min"},
        {"SYMM_WAIT_TIMEOUT", "inf"},       {"SYMM_WAIT_TIMEOUT", "nan"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        clear_all();
        setenv(bad[i].name, bad[i].value, 1);
        symm__env_t e;
        memset(&e, 0xab, sizeof e);
        symm__env_t before = e;
        symm_status_t s = symm__env_load(&e);
        TEST_ASSERT(s == SYMM_ERR_ENV, "%s=%s -> %s", bad[i].name, bad[i].value, symm_strerror(s));
        TEST_ASSERT(memcmp(&e, &before, sizeof e) == 0, "output untouched on failure (%s)", bad[i].name);
        const char *msg = symm_last_error();
        TEST_ASSERT(strstr(msg, bad[i].name) && strstr(msg, bad[i].value),
                    "message names the variable and the value: \"%s\"", msg);
    }
    clear_all();
}

static char *print_to_string(void) {
    FILE *f = tmpfile();
    TEST_ASSERT(f != NULL, "tmpfile");
    symm_print_env(f);
    long size = ftell(f);
    TEST_ASSERT(size > 0, "nothing printed");
    rewind(f);
    char *text = calloc(1, (size_t)size + 1);
    TEST_ASSERT(text && fread(text, 1, (size_t)size, f) == (size_t)size, "read back");
    fclose(f);
    return text;
}

static void test_print(void) {
    clear_all();
    setenv("SYMM_HEAP_CHUNK", "64M", 1);
    setenv("SYMM_PEER_TIMEOUT", "bogus", 1);
    char *out = print_to_string();
    for (size_t i = 0; i < N_VARS; i++) {
        char *at = strstr(out, k_names[i]);
        TEST_ASSERT(at != NULL, "%s not listed", k_names[i]);
        char *eol = strchr(at, '\n');
        TEST_ASSERT(eol != NULL, "line of %s", k_names[i]);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)(eol - at), at);
        char def[128];
        snprintf(def, sizeof def, "default \"%s\"", k_defaults[i]);
        TEST_ASSERT(strstr(line, def), "%s: no %s in \"%s\"", k_names[i], def, line);
        TEST_ASSERT(strstr(line, "current"), "%s: no current value in \"%s\"", k_names[i], line);
        TEST_ASSERT(strncmp(eol + 1, "      ", 6) == 0 && strstr(eol + 1, k_helps[i]) == eol + 7,
                    "%s: help text not under it", k_names[i]);
    }
    TEST_ASSERT(strstr(out, "SYMM_HEAP_CHUNK          SIZE     default \"256M\"  current \"64M\" = 67108864"),
                "current value of SYMM_HEAP_CHUNK shown: %s", out);
    TEST_ASSERT(strstr(out, "\"bogus\" (INVALID"), "invalid value flagged");
    TEST_ASSERT(strstr(out, "SYMM_LOG_LEVEL           LOGLEVEL default \"warn\"  current (unset)"),
                "unset shown");
    free(out);
    clear_all();
}

/* The gate after a load, with the given variables (NULL = unset). */
static int gate(const char *enable, const char *nccl, const char *nvshmem, const char *torch) {
    clear_all();
    if (enable) setenv("SYMM_ENABLE_MULTICAST", enable, 1);
    if (nccl) setenv("NCCL_NVLS_ENABLE", nccl, 1);
    if (nvshmem) setenv("NVSHMEM_DISABLE_NVLS", nvshmem, 1);
    if (torch) setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", torch, 1);
    symm__env_t e = load_ok();
    e.log_level = SYMM__LOG_ERROR;
    symm__env_set(&e);
    int allowed = symm_multicast_allowed();
    clear_all();
    return allowed;
}

static void test_multicast_gate(void) {
    /* Opt-in only. */
    TEST_ASSERT(!gate(NULL, NULL, NULL, NULL), "unset -> no");
    TEST_ASSERT(!gate("0", NULL, NULL, NULL), "0 -> no");
    TEST_ASSERT(gate("1", NULL, NULL, NULL), "1 -> yes");
    /* Each foreign variable alone disables it. */
    TEST_ASSERT(!gate("1", "0", NULL, NULL), "NCCL_NVLS_ENABLE=0 -> no");
    TEST_ASSERT(!gate("1", NULL, "1", NULL), "NVSHMEM_DISABLE_NVLS=1 -> no");
    TEST_ASSERT(!gate("1", NULL, NULL, "1"), "TORCH_SYMM_MEM_DISABLE_MULTICAST=1 -> no");
    TEST_ASSERT(!gate("1", "false", NULL, NULL), "NCCL_NVLS_ENABLE=false -> no");
    TEST_ASSERT(!gate("1", NULL, "true", NULL), "NVSHMEM_DISABLE_NVLS=true -> no");
    TEST_ASSERT(!gate("1", "0", "1", "1"), "all three -> no");
    /* Their "on" values do not disable it. */
    TEST_ASSERT(gate("1", "1", NULL, NULL), "NCCL_NVLS_ENABLE=1 -> yes");
    TEST_ASSERT(gate("1", NULL, "0", NULL), "NVSHMEM_DISABLE_NVLS=0 -> yes");
    TEST_ASSERT(gate("1", NULL, NULL, "0"), "TORCH_SYMM_MEM_DISABLE_MULTICAST=0 -> yes");
    TEST_ASSERT(gate("1", "1", "0", "0"), "all three permissive -> yes");
    /* The full truth table over {enable} x {each variable: unset/permissive/disabling}. */
    const char *en[] = {NULL, "0", "1"};
    const char *nc[] = {NULL, "1", "0"};
    const char *nv[] = {NULL, "0", "1"};
    const char *to[] = {NULL, "0", "1"};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 3; c++)
                for (int d = 0; d < 3; d++) {
                    int expect = a == 2 && b != 2 && c != 2 && d != 2;
                    TEST_ASSERT(gate(en[a], nc[b], nv[c], to[d]) == expect, "gate(%s,%s,%s,%s) != %d",
                                en[a] ? en[a] : "-", nc[b] ? nc[b] : "-", nv[c] ? nv[c] : "-",
                                to[d] ? to[d] : "-", expect);
                }
}

int main(void) {
    clear_all();
    test_parse_size();
    test_defaults();
    /* Before anything is loaded the gate parses the environment itself. */
    setenv("SYMM_ENABLE_MULTICAST", "1", 1);
    TEST_ASSERT(symm_multicast_allowed(), "gate before load reads SYMM_ENABLE_MULTICAST");
    setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
    TEST_ASSERT(!symm_multicast_allowed(), "gate before load honours NVSHMEM_DISABLE_NVLS");
    clear_all();
    TEST_ASSERT(!symm__env_loaded(), "the gate does not install an environment");
    test_values();
    test_bad_values();
    test_print();
    test_multicast_gate();
    printf("test_env: OK\n");
    return 0;
}
