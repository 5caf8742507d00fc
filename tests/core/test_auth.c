/*
 * test_auth - what authenticates a job (src/bootstrap/auth.h): SHA-256 and
 * HMAC-SHA-256 against the test vectors of FIPS 180-4 and RFC 4231, and the
 * key of an env-path job: the secret's key, the key file (written 0600 by
 * the root, read by the others only once it holds the root's key, removed
 * when the root is done), and a folder another user made refused.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bootstrap/auth.h"
#include "bootstrap/bootstrap_internal.h"
#include "core/env.h"
#include "symm_test.h"

static void hex(const unsigned char *d, size_t n, char *out) {
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

static void expect_sha(const void *msg, size_t n, const char *want) {
    unsigned char d[SYMM__SHA256_BYTES];
    char h[65];
    symm__sha256(msg, n, d);
    hex(d, sizeof d, h);
    TEST_ASSERT(strcmp(h, want) == 0, "sha256 of %zu bytes: %s, want %s", n, h, want);
}

static void expect_hmac(const void *key, size_t kn, const void *msg, size_t n, const char *want) {
    unsigned char d[SYMM__SHA256_BYTES];
    char h[65];
    const void *parts[2] = {msg, (const char *)msg + n / 2};
    size_t lens[2] = {n / 2, n - n / 2}; /* in two parts: the parts concatenate */
    symm__hmac_sha256(key, kn, parts, lens, 2, d);
    hex(d, sizeof d, h);
    TEST_ASSERT(strcmp(h, want) == 0, "hmac: %s, want %s", h, want);
}

static void load_env(void) {
    symm__env_t e;
    SYMM_CHECK(symm__env_load(&e));
    symm__env_set(&e);
}

int main(void) {
    expect_sha("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    expect_sha("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect_sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
               "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    {
        char *m = malloc(1000000);
        TEST_ASSERT(m, "malloc");
        memset(m, 'a', 1000000);
        expect_sha(m, 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
        free(m);
    }
    {
        unsigned char k1[20], k3[20], d3[50], k6[131];
        memset(k1, 0x0b, sizeof k1);
        expect_hmac(k1, sizeof k1, "Hi There", 8, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
        expect_hmac("Jefe", 4, "what do ya want for nothing?", 28,
                    "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        memset(k3, 0xaa, sizeof k3);
        memset(d3, 0xdd, sizeof d3);
        expect_hmac(k3, sizeof k3, d3, sizeof d3, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
        memset(k6, 0xaa, sizeof k6); /* a key longer than a block is hashed first */
        expect_hmac(k6, sizeof k6, "Test Using Larger Than Block-Size Key - Hash Key First", 54,
                    "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    }
    TEST_ASSERT(symm__ct_equal("abcd", "abcd", 4) && !symm__ct_equal("abcd", "abce", 4), "ct_equal");

    /* The launcher's secret: the same key on every PE, no file; too short is refused. */
    symm__key_src_t root, rank;
    symm__job_key_t k;
    setenv("SYMM_BOOTSTRAP_SECRET", "0123456789abcdef0123", 1);
    load_env();
    SYMM_CHECK(symm__key_src_root("127.0.0.1", 4242, 3, &root));
    SYMM_CHECK(symm__key_src_rank("127.0.0.1", 4242, 3, &rank));
    TEST_ASSERT(root.have && rank.have && root.file[0] == '\0', "secret: no key file");
    SYMM_CHECK(symm__key_get(&rank, root.key.id, 0, &k));
    TEST_ASSERT(memcmp(k.k, root.key.k, sizeof k.k) == 0, "secret: same key");
    SYMM_EXPECT(symm__key_get(&rank, root.key.id ^ 1, 0, &k), SYMM_ERR_BOOTSTRAP);
    symm__key_src_done(&root);
    symm__key_src_done(&rank);
    setenv("SYMM_BOOTSTRAP_SECRET", "short", 1);
    load_env();
    SYMM_EXPECT(symm__key_src_root("127.0.0.1", 4242, 3, &root), SYMM_ERR_ENV);
    unsetenv("SYMM_BOOTSTRAP_SECRET");
    load_env();

    /* The key file: 0600, read by id, removed by the root when done. */
    int port = 20000 + (int)(getpid() % 30000);
    SYMM_CHECK(symm__key_src_root("127.0.0.1", port, 3, &root));
    struct stat st;
    TEST_ASSERT(root.file[0] && stat(root.file, &st) == 0 && (st.st_mode & 0777) == 0600 && st.st_uid == getuid(),
                "key file %s mode %o", root.file, (unsigned)(st.st_mode & 0777));
    SYMM_CHECK(symm__key_src_rank("127.0.0.1", port, 3, &rank));
    TEST_ASSERT(!rank.have && strcmp(rank.file, root.file) == 0, "rank: reads the root's file");
    SYMM_CHECK(symm__key_get(&rank, root.key.id, 0, &k));
    TEST_ASSERT(memcmp(k.k, root.key.k, sizeof k.k) == 0, "file: same key");
    /* a key the file does not hold (a stale file of another job): waits, then says so */
    symm__key_src_t other;
    SYMM_CHECK(symm__key_src_rank("127.0.0.1", port, 3, &other));
    SYMM_EXPECT(symm__key_get(&other, root.key.id ^ 1, symm__now() + 0.2, &k), SYMM_ERR_BOOTSTRAP);
    TEST_ASSERT(strstr(symm_last_error(), "does not hold the root's key"), "says why: %s", symm_last_error());
    char path[sizeof root.file];
    snprintf(path, sizeof path, "%s", root.file);
    symm__key_src_done(&rank);
    TEST_ASSERT(access(path, F_OK) == 0, "a rank does not remove the root's file");
    symm__key_src_done(&root);
    TEST_ASSERT(access(path, F_OK) != 0, "the root removes its key file");

    /* Another user made this user's folder first: refused, not used. As
     * root, a child becomes uid 65534 and meets a folder root made. */
    if (getuid() == 0) {
        const char *dir = "/tmp/symm-65534";
        int made = mkdir(dir, 0700) == 0;
        TEST_ASSERT(made || errno == EEXIST, "mkdir %s", dir);
        pid_t pid = fork();
        TEST_ASSERT(pid >= 0, "fork");
        if (pid == 0) {
            if (setgid(65534) != 0 || setuid(65534) != 0)
                _exit(77);
            symm_status_t s = symm__key_src_root("127.0.0.1", port, 3, &root);
            _exit(s == SYMM_ERR_BOOTSTRAP && strstr(symm_last_error(), "not a folder private") ? 0 : 1);
        }
        int stt;
        TEST_ASSERT(waitpid(pid, &stt, 0) == pid, "waitpid");
        if (made)
            rmdir(dir);
        if (WIFEXITED(stt) && WEXITSTATUS(stt) == 77)
            printf("SKIP: a foreign key folder: cannot switch to uid 65534\n");
        else
            TEST_ASSERT(WIFEXITED(stt) && WEXITSTATUS(stt) == 0, "a folder owned by another user was used");
    } else {
        printf("SKIP: a foreign key folder: needs root to switch users\n");
    }
    printf("test_auth: OK\n");
    return 0;
}
