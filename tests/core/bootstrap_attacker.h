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
/* Try to list and read the key folders of user `victim` under /tmp. */
int attack_key_file(uid_t victim);
/* Until stop_fd is readable: keep `per_socket` silent connections open on
 * every node socket of the job (made again as soon as the job closes them),
 * and squat names next to them; the number of file descriptors received
 * (*seen: socket names found; *connects: connections made). */
int attack_node_sockets(int stop_fd, int nranks, int per_socket, int *seen, long *connects);

#endif
