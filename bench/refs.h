/*
 * refs: what bench/refs.c, refs_allreduce.c and refs_pauses.c share.
 */
#ifndef NEXAR_BENCH_REFS_H
#define NEXAR_BENCH_REFS_H

#include <gnutls/crypto.h>
#include <stddef.h>

/* A sealed datagram of refs sealed, sealed-ring and sealed-allreduce: an
 * 8-byte sequence number (the AAD, and the nonce's last 8 bytes), the
 * plaintext sealed with AES-128-GCM, the 16-byte tag last. */
#define REFS_SEAL_HDR 8
#define REFS_SEAL_TAG 16
/* The AES-128-GCM key of sender |who| (each sender has its own). Returns 0,
 * or -1 when GnuTLS has no such cipher. */
int refs_key_init(gnutls_aead_cipher_hd_t *h, unsigned char who);
/* The 12-byte nonce of the datagram whose header is at |hdr|. */
void refs_seal_nonce(unsigned char nonce[12], const unsigned char *hdr);

/* CLOCK_MONOTONIC in seconds. */
double refs_now_s(void);
/* 8 MiB send and receive buffers on socket |fd| (forced where root). */
void refs_big_buffers(int fd);
/* out[i] = a[i] + b[i] for |n| floats, vectorized; |out| may be |a|. */
void refs_sum_f32(float *out, const float *a, const float *b, size_t n);
/* Process r of a group: |sync| for refs_group_sync, |out| for its
 * results; returns its exit status. */
typedef int (*refs_proc_fn)(int r, void *arg, const int sync[2], int out);
/* Forks |n| processes running |fn| (r = 0 .. n - 1, |arg| shared) and
 * returns once each has said it is set up and all have the same start
 * time: the descriptor their results come through (-1: no pipe). */
int refs_group_start(int n, refs_proc_fn fn, void *arg);
/* In a process of the group: says it is set up and waits for the start
 * time (CLOCK_MONOTONIC seconds) in *t0. Returns 0, or -1. */
int refs_group_sync(const int sync[2], double *t0);
/* Closes |results| and waits for the |n| processes: 0 when |got| == n
 * and all exited with 0, else 1 with a message naming |what|. */
int refs_group_end(int n, int got, int results, const char *what);
/* refs sealed-allreduce N SIZE [ITERS] (refs_allreduce.c). */
int refs_sealed_allreduce(int argc, char **argv);
/* refs pauses [SECONDS] (refs_pauses.c). */
int refs_pauses(int argc, char **argv);

#endif
