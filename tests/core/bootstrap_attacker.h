/*
 * bootstrap_attacker.h - attacks on a forming job (bootstrap_attacker.c),
 * for test_bootstrap's attack scenarios. Each returns 0 when the job gave
 * the attacker nothing.
 */
#ifndef SYMM_TEST_BOOTSTRAP_ATTACKER_H
#define SYMM_TEST_BOOTSTRAP_ATTACKER_H

#include <sys/types.h>

/* HELLOs without the key: the first protocol's computable nonce (main and
 * live), and this protocol's format with a made-up proof, claiming `rank`. */
int attack_old_nonce(int port, int nranks, int rank);
/* A HELLO signed for one connection's challenge (the key from
 * SYMM_BOOTSTRAP_SECRET) sent on another. */
int attack_replay(int port, int nranks, int rank);
/* Open `count` connections to the root that never say anything. */
int attack_silent_open(int port, int count, int *fds);
/* Become uid/gid 65534 (needs root); -1 if this process cannot. */
int attack_drop_privileges(void);
/* Try to read the job key files of user `victim`. */
int attack_key_file(uid_t victim);
/* Connect to (and squat names next to) the job's node sockets until stop_fd
 * is readable; the number of file descriptors received. */
int attack_node_sockets(int stop_fd, int nranks, int *seen);

#endif
