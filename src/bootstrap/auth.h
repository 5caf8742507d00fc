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
 *                           the user's private folder /tmp/symm-<uid>, the
 *                           others read it (same node, same user only), and
 *                           rank 0 removes it once the job formed
 *   unique id               32 random bytes inside the id
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

/* The job key and its public id (a hash of it: tells which key a root
 * uses, so a PE can tell a stale key file from the current one, and reveals
 * nothing of the key). */
typedef struct symm__job_key {
    unsigned char k[SYMM__KEY_BYTES];
    uint64_t id;
} symm__job_key_t;

void symm__key_set(symm__job_key_t *key, const unsigned char bytes[SYMM__KEY_BYTES]);
/* 32 bytes from the kernel's random source; -1 (errno) if it has none. */
int symm__random_bytes(void *out, size_t n);

/* How a PE of an env-path job gets the key: the launcher's secret, or the
 * key file of this job (root: writes it; others: read it). */
typedef struct symm__key_src {
    symm__job_key_t key;
    int have;         /* key is set (secret, uid, or the root's own file) */
    int owner;        /* the root that wrote the key file */
    char file[160];   /* the key file: the root removes it once the job formed */
} symm__key_src_t;

/* Root of an env-path job (addr:port, nranks name the job): the key from
 * SYMM_BOOTSTRAP_SECRET, else a fresh key written to the key file. */
symm_status_t symm__key_src_root(const char *addr, int port, int nranks, symm__key_src_t *src);
/* Other ranks: the secret's key now, else only where the file is (read
 * later by symm__key_get, when the root says which key it uses). */
symm_status_t symm__key_src_rank(const char *addr, int port, int nranks, symm__key_src_t *src);
/* The key whose id is `want`: the one held, or the key file as soon as it
 * holds that key (until `deadline`, monotonic seconds; 0 = none). */
symm_status_t symm__key_get(symm__key_src_t *src, uint64_t want, double deadline, symm__job_key_t *out);
/* Root, once the job formed or failed: remove the key file, wipe the key. */
void symm__key_src_done(symm__key_src_t *src);

#endif /* SYMM_BOOTSTRAP_AUTH_H */
