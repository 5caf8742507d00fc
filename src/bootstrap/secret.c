/*
 * secret.c - the job key of an env-path job (auth.h): from the launcher's
 * SYMM_BOOTSTRAP_SECRET, else through a key file that only this user can
 * read, in a folder that only this user can enter.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bootstrap/auth.h"
#include "bootstrap/bootstrap_internal.h"
#include "core/env.h"
#include "core/log.h"

#define SECRET_MIN_CHARS 16

void symm__key_set(symm__job_key_t *key, const unsigned char bytes[SYMM__KEY_BYTES]) {
    static const char tag[] = "symm key id";
    unsigned char h[SYMM__SHA256_BYTES];
    const void *parts[2] = {tag, bytes};
    size_t lens[2] = {sizeof tag, SYMM__KEY_BYTES};
    memcpy(key->k, bytes, SYMM__KEY_BYTES);
    symm__hmac_sha256(tag, sizeof tag, parts, lens, 2, h);
    memcpy(&key->id, h, sizeof key->id);
}

int symm__random_bytes(void *out, size_t n) {
    unsigned char *p = out;
    while (n > 0) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* The launcher's secret, if it set one. 1: *key set; 0: none; error. */
static symm_status_t from_secret(symm__job_key_t *key, int *have) {
    static const char tag[] = "symm job secret:";
    const char *s = symm__env()->bootstrap_secret;
    unsigned char k[SYMM__KEY_BYTES];
    symm__sha256_t h;
    *have = 0;
    if (!s || !*s)
        return SYMM_SUCCESS;
    if (strlen(s) < SECRET_MIN_CHARS)
        return symm__error(SYMM_ERR_ENV,
                           "SYMM_BOOTSTRAP_SECRET has %zu characters; a job secret needs at least %d (e.g. "
                           "64 hex digits from /dev/urandom)",
                           strlen(s), SECRET_MIN_CHARS);
    symm__sha256_init(&h);
    symm__sha256_update(&h, tag, sizeof tag - 1);
    symm__sha256_update(&h, s, strlen(s));
    symm__sha256_final(&h, k);
    symm__key_set(key, k);
    memset(k, 0, sizeof k);
    *have = 1;
    return SYMM_SUCCESS;
}

/* /tmp/symm-<uid>, made if missing; refused unless it is a folder of this
 * user that nobody else may enter (another user could otherwise read the
 * key, or swap the file). */
static symm_status_t private_dir(char *dir, size_t size) {
    struct stat st;
    uid_t uid = getuid();
    snprintf(dir, size, "/tmp/symm-%u", (unsigned)uid);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return symm__error(SYMM_ERR_BOOTSTRAP,
                           "bootstrap: cannot make %s for the job key: %s (or give every PE a "
                           "SYMM_BOOTSTRAP_SECRET)",
                           dir, strerror(errno));
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != uid || (st.st_mode & 077) != 0)
        return symm__error(SYMM_ERR_BOOTSTRAP,
                           "bootstrap: %s is not a folder private to this user (owner %u, mode %03o): "
                           "remove it, or give every PE a SYMM_BOOTSTRAP_SECRET",
                           dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
    return SYMM_SUCCESS;
}

static symm_status_t key_file(const char *addr, int port, int nranks, char *out, size_t size) {
    char dir[64];
    uint64_t h = symm__hash64(addr, strlen(addr), (uint64_t)port * 1000003u + (uint64_t)nranks);
    symm_status_t s = private_dir(dir, sizeof dir);
    if (s)
        return s;
    snprintf(out, size, "%s/bootstrap-%016llx.key", dir, (unsigned long long)h);
    return SYMM_SUCCESS;
}

symm_status_t symm__key_src_root(const char *addr, int port, int nranks, symm__key_src_t *src) {
    unsigned char k[SYMM__KEY_BYTES];
    char tmp[sizeof src->file + 32];
    int fd, have;
    symm_status_t s;
    memset(src, 0, sizeof *src);
    if ((s = from_secret(&src->key, &have)) || have) {
        src->have = have;
        return s;
    }
    if ((s = key_file(addr, port, nranks, src->file, sizeof src->file)))
        return s;
    if (symm__random_bytes(k, sizeof k) != 0)
        return symm__error(SYMM_ERR_BOOTSTRAP, "bootstrap: no random bytes for the job key: %s", strerror(errno));
    /* written aside, then renamed: a reader sees the old key or the new one */
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", src->file, (long)getpid());
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, k, sizeof k) != (ssize_t)sizeof k || close(fd) != 0 || rename(tmp, src->file) != 0) {
        int e = errno;
        if (fd >= 0)
            unlink(tmp);
        src->file[0] = '\0';
        return symm__error(SYMM_ERR_BOOTSTRAP, "bootstrap: cannot write the job key file %s: %s", tmp,
                           strerror(e));
    }
    symm__key_set(&src->key, k);
    memset(k, 0, sizeof k);
    src->have = 1;
    src->owner = 1;
    return SYMM_SUCCESS;
}

symm_status_t symm__key_src_rank(const char *addr, int port, int nranks, symm__key_src_t *src) {
    int have;
    symm_status_t s;
    memset(src, 0, sizeof *src);
    if ((s = from_secret(&src->key, &have)) || have) {
        src->have = have;
        return s;
    }
    return key_file(addr, port, nranks, src->file, sizeof src->file);
}

/* The key in the file, if it is a plain 0600 file of this user holding one. */
static int read_key_file(const char *path, symm__job_key_t *key) {
    unsigned char k[SYMM__KEY_BYTES];
    struct stat st;
    int ok, fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == getuid() && (st.st_mode & 077) == 0 &&
         st.st_size == (off_t)sizeof k && read(fd, k, sizeof k) == (ssize_t)sizeof k;
    close(fd);
    if (ok)
        symm__key_set(key, k);
    memset(k, 0, sizeof k);
    return ok;
}

symm_status_t symm__key_get(symm__key_src_t *src, uint64_t want, double deadline, symm__job_key_t *out) {
    if (src->have) {
        if (src->key.id != want)
            return symm__error(SYMM_ERR_BOOTSTRAP,
                               "bootstrap: the root uses another job secret than this PE (is "
                               "SYMM_BOOTSTRAP_SECRET the same on every PE, and is that port this job's?)");
        *out = src->key;
        return SYMM_SUCCESS;
    }
    /* The root writes its key before it listens; a file left by an earlier
     * job on the same port may still be there for a moment. */
    for (;;) {
        if (read_key_file(src->file, &src->key) && src->key.id == want) {
            src->have = 1;
            *out = src->key;
            return SYMM_SUCCESS;
        }
        if (deadline > 0 && symm__now() >= deadline)
            return symm__error(SYMM_ERR_BOOTSTRAP,
                               "bootstrap: no job secret: SYMM_BOOTSTRAP_SECRET is not set on this PE and %s "
                               "does not hold the root's key (does rank 0 run on this node as this user, or "
                               "is SYMM_BOOTSTRAP_SECRET set on some PEs only?)",
                               src->file);
        symm__sleep_ms(10);
    }
}

void symm__key_src_done(symm__key_src_t *src) {
    if (src->file[0] && src->owner) {
        symm__job_key_t k;
        /* only our own key: a later job on this port may have replaced it */
        if (read_key_file(src->file, &k) && k.id == src->key.id)
            unlink(src->file);
        memset(&k, 0, sizeof k);
    }
    memset(src, 0, sizeof *src);
}
