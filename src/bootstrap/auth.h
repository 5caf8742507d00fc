/*
 * auth.h - what authenticates the PEs of a job to each other: SHA-256 and
 * HMAC (sha256.c), and the job key (secret.c) that every PE holds and no
 * outsider can compute.
 *
 * Where the key comes from, per launch path (docs/reliability.md):
 *   SYMM_BOOTSTRAP_SECRET   any string of 16+ characters the launcher gives
 *                           every PE (symmrun makes a random one per job);
 *                           key = SHA-256 of it
 *   otherwise (env path)    rank 0 writes 32 random bytes to a 0600 file in
 *                           a folder it makes for the job (0700, random name,
 *                           under $XDG_RUNTIME_DIR or $TMPDIR or /tmp; see
 *                           secret.c), its CHALLENGE says where, the others
 *                           read it (same node, same user only), and rank 0
 *                           removes both once the job formed
 *   unique id               32 random bytes inside the id
 * Nothing derived from the key alone goes on the wire: each side proves the
 * key with an HMAC over fresh nonces (join.c).
 */
#ifndef SYMM_BOOTSTRAP_AUTH_H
#define SYMM_BOOTSTRAP_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "symm/symm.h"

#define SYMM__SHA256_BYTES 32
#define SYMM__KEY_BYTES    32

typedef struct symm__sha256 {
    uint32_t h[8];
    uint64_t len;
    size_t fill;
    unsigned char buf[64];
} symm__sha256_t;

void symm__sha256_init(symm__sha256_t *s);
void symm__sha256_update(symm__sha256_t *s, const void *data, size_t n);
void symm__sha256_final(symm__sha256_t *s, unsigned char out[SYMM__SHA256_BYTES]);
void symm__sha256(const void *data, size_t n, unsigned char out[SYMM__SHA256_BYTES]);
/* HMAC-SHA-256 of the concatenation of nparts parts. */
void symm__hmac_sha256(const void *key, size_t key_n, const void *const *parts, const size_t *lens, int nparts,
                       unsigned char out[SYMM__SHA256_BYTES]);
/* 1 if the n bytes are equal; time independent of where they differ. */
int symm__ct_equal(const void *a, const void *b, size_t n);

/* The job key, and an id (a hash of it) by which a process tells its own
 * keys apart (uid.c); the id never goes on the wire, where it would let
 * anyone test guesses of a human-chosen secret offline. */
typedef struct symm__job_key {
    unsigned char k[SYMM__KEY_BYTES];
    uint64_t id;
} symm__job_key_t;

void symm__key_set(symm__job_key_t *key, const unsigned char bytes[SYMM__KEY_BYTES]);
/* 32 bytes from the kernel's random source; -1 (errno) if it has none. */
int symm__random_bytes(void *out, size_t n);

/* Longest key file path the root's CHALLENGE carries, with its NUL. */
#define SYMM__KEY_PATH_BYTES 192

/* How a PE of an env-path job gets the key: the launcher's secret, or the
 * key file of this job (root: writes it; others: read it where the root's
 * CHALLENGE says). */
typedef struct symm__key_src {
    symm__job_key_t key;
    int have;         /* key is set (secret, uid, or the root's own file) */
    int secret;       /* a rank's key came from SYMM_BOOTSTRAP_SECRET */
    int owner;        /* the root that wrote the key file */
    /* root: the key file (removed with its folder once the job formed);
     * a rank without a secret: the file name its job's key file must have */
    char file[SYMM__KEY_PATH_BYTES];
} symm__key_src_t;

/* Root of an env-path job (addr:port, nranks name the job): the key from
 * SYMM_BOOTSTRAP_SECRET, else a fresh key written to a key file in a new
 * private folder. */
symm_status_t symm__key_src_root(const char *addr, int port, int nranks, symm__key_src_t *src);
/* Other ranks: the secret's key now, else the key file named later by the
 * root's CHALLENGE (symm__key_get). */
symm_status_t symm__key_src_rank(const char *addr, int port, int nranks, symm__key_src_t *src);
/* The key: the one held, or the one in `root_file` (the path the root's
 * CHALLENGE named, "" when it uses a secret or a unique id), read only if
 * the file and its folder are this user's and private and the file is the
 * one this job's address, port and size name. */
symm_status_t symm__key_get(symm__key_src_t *src, const char *root_file, symm__job_key_t *out);
/* Root, once the job formed or failed: remove the key file and its folder;
 * everyone: wipe the key. */
void symm__key_src_done(symm__key_src_t *src);

#endif /* SYMM_BOOTSTRAP_AUTH_H */
