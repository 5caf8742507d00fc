/*
 * secret.c - the job key of an env-path job (auth.h): from the launcher's
 * SYMM_BOOTSTRAP_SECRET, else through a key file that only this user can
 * read, in a folder made fresh for the job that only this user can enter.
 *
 * Where the key file goes: $XDG_RUNTIME_DIR when it is a folder of this
 * user that nobody else may enter, else $TMPDIR, else /tmp, the first that
 * is a folder where nobody can move another's entries (sticky, or writable
 * by its owner only). In it the root makes a folder with a random name
 * (mkdtemp: 0700, this user's, and made by this call, so nobody could have
 * made it first) and the file inside; the root's CHALLENGE tells the ranks
 * where it is. A rank reads it only if the folder is this user's and
 * private, the file is this user's, 0600 and holds one key, and the file
 * name is the one this job's address, port and size give.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
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

/* A folder of this user that nobody else may enter or change. */
static int private_folder(const struct stat *st) {
    return S_ISDIR(st->st_mode) && st->st_uid == getuid() && (st->st_mode & 077) == 0;
}

/* A folder where another user cannot move or remove what this user makes
 * in it: writable by its owner (this user or root) only, or sticky. */
static int safe_parent(const struct stat *st) {
    if (!S_ISDIR(st->st_mode))
        return 0;
    if (st->st_uid != getuid() && st->st_uid != 0)
        return 0;
    return (st->st_mode & 022) == 0 || (st->st_mode & S_ISVTX) != 0;
}

/* Make the job's private folder: under $XDG_RUNTIME_DIR when that is ours
 * and private, else under $TMPDIR or /tmp. */
static symm_status_t make_job_folder(char *dir, size_t size) {
    struct stat st;
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    const char *tmp = getenv("TMPDIR");
    const char *bases[3] = {NULL, NULL, NULL};
    char why[2][200];
    int nb = 0;
    why[0][0] = why[1][0] = '\0';
    if (xdg && xdg[0] == '/') {
        if (lstat(xdg, &st) != 0)
            snprintf(why[0], sizeof why[0], "XDG_RUNTIME_DIR=%.80s: %s", xdg, strerror(errno));
        else if (!private_folder(&st))
            snprintf(why[0], sizeof why[0],
                     "XDG_RUNTIME_DIR=%.80s is not a folder of this user closed to others (owner %u, mode %03o)",
                     xdg, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
        else
            bases[nb++] = xdg;
    }
    if (tmp && tmp[0] == '/' && strcmp(tmp, "/tmp") != 0)
        bases[nb++] = tmp;
    bases[nb++] = "/tmp";
    for (int i = 0; i < nb; i++) {
        const char *base = bases[i];
        if (base != xdg && lstat(base, &st) != 0) {
            snprintf(why[1], sizeof why[1], "%.80s: %s", base, strerror(errno));
            continue;
        }
        if (base != xdg && !safe_parent(&st)) {
            snprintf(why[1], sizeof why[1],
                     "%.80s is not a folder where other users cannot move this user's files (owner %u, "
                     "mode %03o, not sticky)",
                     base, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
            continue;
        }
        if (snprintf(dir, size, "%s/symm-%u-XXXXXX", base, (unsigned)getuid()) >= (int)size) {
            snprintf(why[1], sizeof why[1], "%.80s: the path is too long", base);
            continue;
        }
        if (!mkdtemp(dir)) {
            snprintf(why[1], sizeof why[1], "mkdtemp in %.80s: %s", base, strerror(errno));
            continue;
        }
        /* made by this call with mode 0700; checked anyway (an odd umask,
         * a file system that ignores modes) */
        if (lstat(dir, &st) != 0 || !private_folder(&st)) {
            snprintf(why[1], sizeof why[1], "%.80s is not private after mkdtemp (owner %u, mode %03o)", dir,
                     (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
            rmdir(dir);
            continue;
        }
        if (why[0][0] || why[1][0])
            SYMM_LOG_WARN("bootstrap: %s%s%s: the job key goes to %s instead", why[0],
                          why[0][0] && why[1][0] ? "; " : "", why[1], dir);
        return SYMM_SUCCESS;
    }
    return symm__error(SYMM_ERR_BOOTSTRAP,
                       "bootstrap: no private place for the job key file (%s%s%s): give every PE the same "
                       "SYMM_BOOTSTRAP_SECRET (16+ random characters; symmrun makes one), or point TMPDIR or "
                       "XDG_RUNTIME_DIR to a folder of this user closed to others",
                       why[0], why[0][0] && why[1][0] ? "; " : "", why[1]);
}

/* The key file's name in the job folder: from the job's address, port and
 * size, so a rank reads only a key file made for its own job. */
static void key_name(const char *addr, int port, int nranks, char *out, size_t size) {
    uint64_t h = symm__hash64(addr, strlen(addr), (uint64_t)port * 1000003u + (uint64_t)nranks);
    snprintf(out, size, "bootstrap-%016llx.key", (unsigned long long)h);
}

symm_status_t symm__key_src_root(const char *addr, int port, int nranks, symm__key_src_t *src) {
    unsigned char k[SYMM__KEY_BYTES];
    char dir[sizeof src->file], name[64];
    int fd, have;
    symm_status_t s;
    memset(src, 0, sizeof *src);
    if ((s = from_secret(&src->key, &have)) || have) {
        src->have = have;
        return s;
    }
    key_name(addr, port, nranks, name, sizeof name);
    if ((s = make_job_folder(dir, sizeof dir - sizeof name - 1)))
        return s;
    if (snprintf(src->file, sizeof src->file, "%s/%s", dir, name) >= (int)sizeof src->file) {
        rmdir(dir); /* (cannot happen: make_job_folder left room for the name) */
        src->file[0] = '\0';
        return symm__error(SYMM_ERR_BOOTSTRAP, "bootstrap: the job key file's path is too long");
    }
    if (symm__random_bytes(k, sizeof k) != 0) {
        rmdir(dir);
        src->file[0] = '\0';
        return symm__error(SYMM_ERR_BOOTSTRAP, "bootstrap: no random bytes for the job key: %s", strerror(errno));
    }
    fd = open(src->file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, k, sizeof k) != (ssize_t)sizeof k || close(fd) != 0) {
        int e = errno;
        unlink(src->file);
        rmdir(dir);
        memset(k, 0, sizeof k);
        s = symm__error(SYMM_ERR_BOOTSTRAP, "bootstrap: cannot write the job key file %s: %s", src->file,
                        strerror(e));
        src->file[0] = '\0';
        return s;
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
        src->secret = have;
        return s;
    }
    key_name(addr, port, nranks, src->file, sizeof src->file);
    return SYMM_SUCCESS;
}

/* The key in `path`, checked as the file comment says; a reason otherwise. */
static int read_key_file(const char *path, const char *want_name, symm__job_key_t *key, char *why, size_t size) {
    unsigned char k[SYMM__KEY_BYTES];
    char dir[SYMM__KEY_PATH_BYTES];
    struct stat st;
    const char *slash = strrchr(path, '/');
    int ok, fd;
    if (path[0] != '/' || !slash || slash == path || strcmp(slash + 1, want_name) != 0 ||
        (size_t)(slash - path) >= sizeof dir) {
        snprintf(why, size, "the root's key file %.160s is not this job's (expected a file named %.40s)", path,
                 want_name);
        return 0;
    }
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = '\0';
    if (lstat(dir, &st) != 0) {
        snprintf(why, size, "the folder of the root's key file, %.160s: %s", dir, strerror(errno));
        return 0;
    }
    if (!private_folder(&st)) {
        snprintf(why, size,
                 "the folder of the root's key file, %.160s, is not this user's private folder (owner %u, mode "
                 "%03o)",
                 dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
        return 0;
    }
    fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, size, "cannot open the root's key file %.160s: %s (does rank 0 run on this node as this "
                 "user?)", path, strerror(errno));
        return 0;
    }
    ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == getuid() && (st.st_mode & 077) == 0 &&
         st.st_size == (off_t)sizeof k && read(fd, k, sizeof k) == (ssize_t)sizeof k;
    close(fd);
    if (ok)
        symm__key_set(key, k);
    else
        snprintf(why, size, "%.160s is not a key file of this user (a 0600 file of %zu bytes)", path, sizeof k);
    memset(k, 0, sizeof k);
    return ok;
}

symm_status_t symm__key_get(symm__key_src_t *src, const char *root_file, symm__job_key_t *out) {
    char why[400];
    if (src->have) {
        if (src->secret && root_file[0])
            return symm__error(SYMM_ERR_BOOTSTRAP,
                               "bootstrap: this PE has SYMM_BOOTSTRAP_SECRET but the root (PE 0) has none (it "
                               "uses a key file): set it on every PE or on none");
        *out = src->key;
        return SYMM_SUCCESS;
    }
    if (!root_file[0])
        return symm__error(SYMM_ERR_BOOTSTRAP,
                           "bootstrap: the root (PE 0) authenticates with SYMM_BOOTSTRAP_SECRET but this PE has "
                           "none: set it on every PE (or is that port another job's?)");
    if (!read_key_file(root_file, src->file, &src->key, why, sizeof why))
        return symm__error(SYMM_ERR_BOOTSTRAP,
                           "bootstrap: no job key: SYMM_BOOTSTRAP_SECRET is not set on this PE and %s; give "
                           "every PE the same SYMM_BOOTSTRAP_SECRET",
                           why);
    src->have = 1;
    *out = src->key;
    return SYMM_SUCCESS;
}

void symm__key_src_done(symm__key_src_t *src) {
    if (src->file[0] && src->owner) {
        char *slash = strrchr(src->file, '/');
        unlink(src->file);
        if (slash) {
            *slash = '\0';
            rmdir(src->file);
        }
    }
    memset(src, 0, sizeof *src);
}
