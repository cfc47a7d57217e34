/*
 * Multi-process parts of test_shm_ring: each sp_*_run forks its child
 * processes, runs the parent's side, reaps the children under a hard
 * deadline (killing them past it) and returns 0 on success or 1 after
 * printing what failed ("[-1] file:line: check failed: ..." from the harness).
 */
#ifndef NEXAR_TEST_SHM_PROCS_H
#define NEXAR_TEST_SHM_PROCS_H

#include <stdint.h>

#include "transport/shm_ring.h"

/* splitmix64: deterministic, so a failing trial can be replayed. */
uint64_t sp_rng(uint64_t *s);

/* One to three random corruptions of the ring |w| produces into: its head
 * counter (random, unaligned, past the ring, behind the tail), record
 * headers at the consumer's tail or anywhere (lengths small, huge, at the
 * ring's end; type 0 pads), or the data. */
void sp_corrupt(nexar__shm_ring_t *w, uint64_t *s);

/* A child scribbles (sp_corrupt) into ring 0 while this process consumes
 * it through fresh attachments (each from position 0), re-attaching after
 * each NEXAR_ERR_PROTO, for at least |ms| and until 100 refusals were seen
 * (30 s more at most); every record returned must lie inside the ring. */
int sp_hostile_run(int ms, long *protos, long *recs);

/* |bytes| each way at once between this process and a child, over a
 * segment passed on an abstract socket (credentials checked both ways),
 * records of mixed sizes (0, 1, 63, 64, 65, ... the largest) checked
 * bit-exactly, eventfd wakeups, consumers sleeping in epoll. Prints the
 * throughput. */
int sp_stream_run(uint64_t bytes, int timeout_ms);

/* 8-byte ping-pong between two busy-polling processes for at most |ms|
 * (at most |rounds| round trips); prints the round-trip time. */
int sp_pingpong_run(int rounds, int ms);

/* process_vm_readv of 1 MiB in a child, checked bit-exactly (skipped with
 * a message where not permitted); an unmapped address; a process gone;
 * as root, a child that dropped to uid 65534 is refused (EPERM). */
int sp_cma_run(void);

/* A child streaming records is SIGKILLed mid-record: its pidfd wakes the
 * consumer's epoll, every record it published arrives intact, the
 * half-written one never appears. */
int sp_death_run(void);

/* A consumer that sleeps (epoll on its eventfd, 3 s at most) whenever its
 * ring is empty, against a producer in a child writing |records| 8-byte
 * records one by one after random pauses: every sleep must be woken by a
 * kick, every record arrives in order. |*sleeps| gets the sleeps. */
int sp_wake_run(int records, int *sleeps);

#endif
