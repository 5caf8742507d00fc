/*
 * test_auth - what authenticates a job (src/bootstrap/auth.h): SHA-256 and
 * HMAC-SHA-256 against the test vectors of FIPS 180-4 and RFC 4231, and the
 * key of an env-path job: the secret's key, the key file (written 0600 by
 * the root in a fresh 0700 folder, under XDG_RUNTIME_DIR only when that is
 * private; read by the others only where the root says, when folder and
 * file are private and the file is their job's; removed with its folder
 * when the root is done), folders another user made first (no harm done),
 * and the root's first message, which must not depend on the secret alone.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

/* The folder part of a path. */
static void folder_of(const char *path, char *dir, size_t size) {
    snprintf(dir, size, "%s", path);
    char *slash = strrchr(dir, '/');
    TEST_ASSERT(slash && slash != dir, "no folder in %s", path);
    *slash = '\0';
}

/* A folder of this user, mode 0700, whose path starts with `prefix`. */
static void expect_private_folder(const char *dir, const char *prefix) {
    struct stat st;
    TEST_ASSERT(strncmp(dir, prefix, strlen(prefix)) == 0, "key folder %s is not under %s", dir, prefix);
    TEST_ASSERT(lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid() && (st.st_mode & 0777) == 0700,
                "key folder %s: owner %u mode %o", dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
}

#define WIRE_BYTES (sizeof(symm__bs_hdr_t) + sizeof(symm__bs_challenge_t))

/* Start the root of a 2-PE job with `secret` in a child, connect to it as
 * an outsider and keep what it sends first; the bytes read. */
static size_t capture_challenge(const char *secret, unsigned char *out) {
    int probe = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    TEST_ASSERT(probe >= 0 && bind(probe, (struct sockaddr *)&sa, sizeof sa) == 0 &&
                    getsockname(probe, (struct sockaddr *)&sa, &len) == 0,
                "a free port");
    close(probe);
    int port = ntohs(sa.sin_port);
    pid_t pid = fork();
    TEST_ASSERT(pid >= 0, "fork");
    if (pid == 0) {
        symm__launch_info_t info;
        symm__bootstrap_t *b = NULL;
        setenv("SYMM_BOOTSTRAP_SECRET", secret, 1);
        setenv("SYMM_BOOTSTRAP_TIMEOUT", "10", 1);
        setenv("SYMM_LOG_LEVEL", "error", 1);
        load_env();
        memset(&info, 0, sizeof info);
        info.rank = 0;
        info.nranks = 2;
        info.local_rank = info.local_nranks = -1;
        snprintf(info.root_addr, sizeof info.root_addr, "127.0.0.1");
        info.root_port = port;
        (void)symm__bootstrap_init_env(&info, &b);
        _exit(0);
    }
    int fd = -1;
    for (int i = 0; i < 500 && fd < 0; i++) {
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
            close(fd);
            fd = -1;
            usleep(10000);
        }
    }
    TEST_ASSERT(fd >= 0, "cannot reach the root on port %d", port);
    size_t got = 0;
    while (got < WIRE_BYTES) {
        ssize_t r = recv(fd, out + got, WIRE_BYTES - got, 0);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    kill(pid, SIGKILL);
    TEST_ASSERT(waitpid(pid, NULL, 0) == pid, "waitpid");
    return got;
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
    unsetenv("XDG_RUNTIME_DIR");
    unsetenv("TMPDIR");
    setenv("SYMM_BOOTSTRAP_SECRET", "0123456789abcdef0123", 1);
    load_env();
    SYMM_CHECK(symm__key_src_root("127.0.0.1", 4242, 3, &root));
    SYMM_CHECK(symm__key_src_rank("127.0.0.1", 4242, 3, &rank));
    TEST_ASSERT(root.have && rank.have && root.file[0] == '\0', "secret: no key file");
    SYMM_CHECK(symm__key_get(&rank, "", &k));
    TEST_ASSERT(memcmp(k.k, root.key.k, sizeof k.k) == 0, "secret: same key");
    /* a root that uses a key file while this PE has a secret: said so */
    SYMM_EXPECT(symm__key_get(&rank, "/tmp/symm-0-x/bootstrap-0.key", &k), SYMM_ERR_BOOTSTRAP);
    TEST_ASSERT(strstr(symm_last_error(), "on every PE or on none"), "says why: %s", symm_last_error());
    symm__key_src_done(&root);
    symm__key_src_done(&rank);
    setenv("SYMM_BOOTSTRAP_SECRET", "short", 1);
    load_env();
    SYMM_EXPECT(symm__key_src_root("127.0.0.1", 4242, 3, &root), SYMM_ERR_ENV);
    unsetenv("SYMM_BOOTSTRAP_SECRET");
    load_env();

    /* The key file: 0600 in a fresh 0700 folder of this user, read where
     * the root says, removed with its folder when the root is done. */
    int port = 20000 + (int)(getpid() % 30000);
    SYMM_CHECK(symm__key_src_root("127.0.0.1", port, 3, &root));
    char dir[sizeof root.file];
    struct stat st;
    TEST_ASSERT(root.file[0] && stat(root.file, &st) == 0 && (st.st_mode & 0777) == 0600 && st.st_uid == getuid(),
                "key file %s mode %o", root.file, (unsigned)(st.st_mode & 0777));
    folder_of(root.file, dir, sizeof dir);
    expect_private_folder(dir, "/tmp/");
    SYMM_CHECK(symm__key_src_rank("127.0.0.1", port, 3, &rank));
    TEST_ASSERT(!rank.have, "rank: no key before the root says where");
    SYMM_CHECK(symm__key_get(&rank, root.file, &k));
    TEST_ASSERT(memcmp(k.k, root.key.k, sizeof k.k) == 0, "file: same key");
    /* a root that sends no file while this PE has no secret */
    symm__key_src_t other;
    SYMM_CHECK(symm__key_src_rank("127.0.0.1", port, 3, &other));
    SYMM_EXPECT(symm__key_get(&other, "", &k), SYMM_ERR_BOOTSTRAP);
    TEST_ASSERT(strstr(symm_last_error(), "has none"), "says why: %s", symm_last_error());
    symm__key_src_done(&other);
    /* another job's key file (another port): not read */
    SYMM_CHECK(symm__key_src_rank("127.0.0.1", port + 1, 3, &other));
    SYMM_EXPECT(symm__key_get(&other, root.file, &k), SYMM_ERR_BOOTSTRAP);
    TEST_ASSERT(strstr(symm_last_error(), "is not this job's"), "says why: %s", symm_last_error());
    /* a folder others may enter, a file others may read: refused */
    TEST_ASSERT(chmod(dir, 0755) == 0, "chmod");
    SYMM_EXPECT(symm__key_get(&other, root.file, &k), SYMM_ERR_BOOTSTRAP);
    symm__key_src_done(&other);
    SYMM_CHECK(symm__key_src_rank("127.0.0.1", port, 3, &other));
    SYMM_EXPECT(symm__key_get(&other, root.file, &k), SYMM_ERR_BOOTSTRAP);
    TEST_ASSERT(strstr(symm_last_error(), "not this user's private folder"), "says why: %s", symm_last_error());
    TEST_ASSERT(chmod(dir, 0700) == 0 && chmod(root.file, 0644) == 0, "chmod");
    SYMM_EXPECT(symm__key_get(&other, root.file, &k), SYMM_ERR_BOOTSTRAP);
    TEST_ASSERT(strstr(symm_last_error(), "is not a key file of this user"), "says why: %s", symm_last_error());
    TEST_ASSERT(chmod(root.file, 0600) == 0, "chmod");
    symm__key_src_done(&other);
    /* the same job started again: a new folder */
    SYMM_CHECK(symm__key_src_root("127.0.0.1", port, 3, &other));
    TEST_ASSERT(strcmp(other.file, root.file) != 0, "a second job reuses %s", root.file);
    symm__key_src_done(&other);
    char path[sizeof root.file];
    snprintf(path, sizeof path, "%s", root.file);
    symm__key_src_done(&rank);
    TEST_ASSERT(access(path, F_OK) == 0, "a rank does not remove the root's file");
    symm__key_src_done(&root);
    TEST_ASSERT(access(path, F_OK) != 0 && access(dir, F_OK) != 0, "the root removes its key file and folder");

    /* $XDG_RUNTIME_DIR: used when it is this user's and private, not otherwise. */
    {
        char xdg[] = "/tmp/symm_test_auth_xdg_XXXXXX";
        TEST_ASSERT(mkdtemp(xdg), "mkdtemp");
        setenv("XDG_RUNTIME_DIR", xdg, 1);
        SYMM_CHECK(symm__key_src_root("127.0.0.1", port, 3, &root));
        TEST_ASSERT(strncmp(root.file, xdg, strlen(xdg)) == 0, "the key is not under XDG_RUNTIME_DIR: %s", root.file);
        folder_of(root.file, dir, sizeof dir);
        expect_private_folder(dir, xdg);
        symm__key_src_done(&root);
        TEST_ASSERT(chmod(xdg, 0755) == 0, "chmod");
        SYMM_CHECK(symm__key_src_root("127.0.0.1", port, 3, &root));
        TEST_ASSERT(strncmp(root.file, "/tmp/symm-", 10) == 0, "a shared XDG_RUNTIME_DIR was used: %s", root.file);
        symm__key_src_done(&root);
        /* a TMPDIR anyone may change: not used (the key goes to /tmp) */
        TEST_ASSERT(chmod(xdg, 0777) == 0, "chmod");
        unsetenv("XDG_RUNTIME_DIR");
        setenv("TMPDIR", xdg, 1);
        SYMM_CHECK(symm__key_src_root("127.0.0.1", port, 3, &root));
        TEST_ASSERT(strncmp(root.file, "/tmp/symm-", 10) == 0, "a TMPDIR writable by all was used: %s", root.file);
        symm__key_src_done(&root);
        unsetenv("TMPDIR");
        rmdir(xdg);
    }

    /* Another user made the folders this user's key could go to first (the
     * first scheme's fixed /tmp/symm-<uid>, and a XDG_RUNTIME_DIR that is
     * not this user's): the key goes to a fresh folder of its own anyway.
     * As root, a child becomes uid 65534 and meets folders root made. */
    if (getuid() == 0) {
        const char *squat = "/tmp/symm-65534";
        char xdg[] = "/tmp/symm_test_auth_root_XXXXXX";
        int made = mkdir(squat, 0700) == 0;
        TEST_ASSERT(made || errno == EEXIST, "mkdir %s", squat);
        TEST_ASSERT(mkdtemp(xdg) && chmod(xdg, 0700) == 0, "mkdtemp");
        pid_t pid = fork();
        TEST_ASSERT(pid >= 0, "fork");
        if (pid == 0) {
            if (setgid(65534) != 0 || setuid(65534) != 0)
                _exit(77);
            setenv("XDG_RUNTIME_DIR", xdg, 1);
            symm__key_src_t r, q;
            symm__job_key_t kk;
            char d[sizeof r.file];
            if (symm__key_src_root("127.0.0.1", port, 3, &r) != SYMM_SUCCESS) {
                fprintf(stderr, "FAIL: as uid 65534: %s\n", symm_last_error());
                _exit(1);
            }
            folder_of(r.file, d, sizeof d);
            expect_private_folder(d, "/tmp/symm-65534-");
            if (symm__key_src_rank("127.0.0.1", port, 3, &q) != SYMM_SUCCESS ||
                symm__key_get(&q, r.file, &kk) != SYMM_SUCCESS || memcmp(kk.k, r.key.k, sizeof kk.k) != 0) {
                fprintf(stderr, "FAIL: as uid 65534, a rank cannot read the key: %s\n", symm_last_error());
                _exit(1);
            }
            symm__key_src_done(&q);
            symm__key_src_done(&r);
            _exit(access(d, F_OK) != 0 ? 0 : 1);
        }
        int stt;
        TEST_ASSERT(waitpid(pid, &stt, 0) == pid, "waitpid");
        if (made)
            rmdir(squat);
        rmdir(xdg);
        if (WIFEXITED(stt) && WEXITSTATUS(stt) == 77)
            printf("SKIP: another user's folders: cannot switch to uid 65534\n");
        else
            TEST_ASSERT(WIFEXITED(stt) && WEXITSTATUS(stt) == 0,
                        "with folders another user made first, uid 65534 had no key (status %#x)", stt);
    } else {
        printf("SKIP: another user's folders: needs root to switch users\n");
    }

    /* Nothing on the wire before authentication is a function of the secret
     * alone: what the root of a job sends a connection first, for two jobs
     * with the same secret and one with another. An 8-byte run that the two
     * same-secret jobs share must be the protocol's own (the third job sends
     * it too), not something derived from the secret (a key id). */
    {
        unsigned char a[WIRE_BYTES], b[WIRE_BYTES], c[WIRE_BYTES];
        size_t na = capture_challenge("same-secret-0123456789", a), nb = capture_challenge("same-secret-0123456789", b),
               nc = capture_challenge("another-secret-0123456789", c);
        TEST_ASSERT(na == nb && nb == nc && na > 32, "challenge sizes %zu %zu %zu", na, nb, nc);
        int shared = 0;
        for (size_t i = 0; i + 8 <= na; i++)
            if (memcmp(a + i, b + i, 8) == 0) {
                shared++;
                TEST_ASSERT(memcmp(a + i, c + i, 8) == 0,
                            "bytes %zu..%zu of the challenge are the same for two jobs with one secret and "
                            "differ for another secret: derived from the secret", i, i + 7);
            }
        TEST_ASSERT(memcmp(a, b, na) != 0, "two jobs with one secret sent the same challenge");
        printf("test_auth: %zu challenge bytes; %d shared 8-byte runs, all protocol constants\n", na, shared);
    }
    printf("test_auth: OK\n");
    return 0;
}
