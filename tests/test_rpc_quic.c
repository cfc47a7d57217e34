/*
 * RPC under load over QUIC (issue 21, finding 7): two ranks run 4 MiB
 * allreduces on a communicator of their own from a second thread while
 * the main threads call each other's echo handler back to back (8 B to
 * 1 KiB). Every echo and every allreduce must be bit-exact.
 *
 * The mechanisms that keep a call from waiting behind bulk data are checked
 * through the QUIC link's counters (src/transport/quic_test.h), not by
 * timing (speed is measured by `nexar-perf rpc`, docs/performance.md).
 * The calls travel on the link's RPC connection (src/transport/quic_rpc.c:
 * a second QUIC connection, each end on a UDP socket of its own, that the
 * receiver reads first): it is up at both ends, RPC frames went out on it,
 * and no RPC message opened a stream on the first connection once it was
 * up. Without it (before), every call rode the first connection, in the
 * same socket queue as the data, and this check fails. And while calls are
 * made, data packets are at most half of
 * NEXAR_DATA_INFLIGHT_RPC_BYTES and the bytes in flight right after one
 * stay below the bound plus one such packet (plus the calls' own small
 * packets); and a packet with RPC or control frames carries no data (it
 * stays a few KB at most). Before the bound, 64 KB packets went out until 2 x
 * the bandwidth-delay product or 256 KiB was in flight (195-455 KB measured),
 * and a call's packet waited in the receiver's socket behind all of it.
 * Before, the calls rode in 64 KB data packets. With
 * NEXAR_DATA_INFLIGHT_RPC_BYTES=0 (the bound off) this test fails.
 *
 * Second case: a failure of the RPC connection (cut through a test hook as
 * a protocol error on it would end it) fails the link at both ends, and
 * every later call between the two ranks fails within 5 s.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "load_thread.h"
#include "nexar.h"
#include "transport/quic_test.h"

#define FN_ECHO 7
#define BOUND 65536u          /* NEXAR_DATA_INFLIGHT_RPC_BYTES default */
#define LOAD_COUNT (1u << 20) /* floats: 4 MiB allreduces */
#define LOAD_ROUNDS 6
#define CALL_MAX 1024u
#define CALLS_SLACK (16u * CALL_MAX) /* calls' packets in flight meanwhile */
#define PRIO_MAX 4096u /* a request, a response and a barrier, no data */

static inline uint8_t pat(size_t i) {
  return (uint8_t)(i * 131u + (i >> 8) * 7u);
}

static int worker(int index, void *arg) {
  (void)index, (void)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r;
  NT_OK(nt_join_world(&ctx, &w, &r, NULL));
  nt_load_t l = {.count = LOAD_COUNT, .rounds = LOAD_ROUNDS};
  pthread_t th;
  if (nt_load_start(w, r, FN_ECHO, &l, &th)) return 1;
  static uint8_t req[CALL_MAX], resp[CALL_MAX];
  int calls = 0;
  while (!__atomic_load_n(&l.done, __ATOMIC_ACQUIRE)) {
    size_t n = calls % 4 ? 8 : 1 + ((size_t)calls * 7919u) % CALL_MAX;
    for (size_t k = 0; k < n; k++) req[k] = pat(k + (size_t)calls + (size_t)r);
    if (nt_echo_check(w, r, FN_ECHO, calls, req, resp, n)) return 1;
    calls++;
  }
  pthread_join(th, NULL);
  NT_CHECKF(l.rc == 0, "rank %d: allreduce under calls: %s", r,
            nexar_err_name(l.rc));
  nexar__quic_test_stats_t s;
  NT_OK(nexar__quic_test_stats(ctx, 1 - r, &s));
  printf(
      "rank %d: %d calls; %llu data packets while calls were made, the "
      "largest %llu B, at most %llu B in flight after one; the largest "
      "packet with RPC or control frames %llu B\n",
      r, calls, (unsigned long long)s.rpc_data_pkts,
      (unsigned long long)s.rpc_data_pkt_max,
      (unsigned long long)s.rpc_data_inflight_max,
      (unsigned long long)s.rpc_prio_pkt_max);
  printf(
      "rank %d: RPC connection %s, %llu packets with RPC frames on it, "
      "%llu RPC messages opened on the first connection meanwhile\n",
      r, s.rpc_conn_up ? "up" : "not up", (unsigned long long)s.rpc_conn_pkts,
      (unsigned long long)s.rpc_main_opened);
  NT_CHECKF(s.rpc_conn_up, "rank %d: no RPC connection to rank %d", r, 1 - r);
  NT_CHECKF(s.rpc_conn_pkts >= (uint64_t)calls / 2,
            "rank %d: %llu packets with RPC frames on the RPC connection for "
            "%d calls",
            r, (unsigned long long)s.rpc_conn_pkts, calls);
  NT_CHECKF(s.rpc_main_opened == 0,
            "rank %d: %llu RPC messages on the first connection while the "
            "RPC connection was up",
            r, (unsigned long long)s.rpc_main_opened);
  NT_CHECKF(s.rpc_data_pkts > 0, "rank %d: no data written during the calls",
            r);
  NT_CHECKF(s.rpc_data_pkt_max <= BOUND / 2,
            "rank %d: a data packet of %llu B during calls (bound %u / 2)", r,
            (unsigned long long)s.rpc_data_pkt_max, BOUND);
  NT_CHECKF(s.rpc_data_inflight_max <= BOUND + BOUND / 2 + CALLS_SLACK,
            "rank %d: %llu B in flight after a data packet during calls "
            "(bound %u + a packet)",
            r, (unsigned long long)s.rpc_data_inflight_max, BOUND);
  NT_CHECKF(s.rpc_prio_pkt_max <= PRIO_MAX,
            "rank %d: the largest packet with RPC or control frames during "
            "calls has %llu B (data rode in it?)",
            r, (unsigned long long)s.rpc_prio_pkt_max);
  NT_OKC(w, nexar_barrier(w));
  NT_OK(nexar_comm_free(&l.comm));
  NT_OK(nexar_finalize(ctx));
  return 0;
}

/* A failure of the RPC connection fails the link, at both ends: rank 0
 * ends its RPC connection to rank 1 as a protocol error on it would; every
 * later call between the two then fails, and promptly (not with the
 * call's 10 s deadline). Before, such a failure could go unnoticed. */
static int worker_cut(int index, void *arg) {
  (void)index, (void)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r;
  NT_OK(nt_join_world(&ctx, &w, &r, NULL));
  NT_OKC(w, nexar_rpc_register(w, FN_ECHO, nt_rpc_echo, NULL));
  NT_OKC(w, nexar_barrier(w));
  uint8_t req[8] = {1, 2, 3, 4, 5, 6, 7, 8}, resp[8];
  nexar__quic_test_stats_t s = {0};
  for (int i = 0; i < 200 && !s.rpc_conn_up; i++) {
    if (nt_echo_check(w, r, FN_ECHO, i, req, resp, sizeof(req))) return 1;
    NT_OK(nexar__quic_test_stats(ctx, 1 - r, &s));
  }
  NT_CHECKF(s.rpc_conn_up, "rank %d: no RPC connection after 200 calls", r);
  NT_OKC(w, nexar_barrier(w));
  if (r == 0) NT_OK(nexar__quic_test_rpc_cut(ctx, 1));
  double t0 = nt_now_ms();
  int rc = NEXAR_OK, i = 0;
  for (; i < 100000 && rc == NEXAR_OK && nt_now_ms() - t0 < 20000; i++) {
    size_t got = 0;
    rc = nexar_rpc_call(w, 1 - r, FN_ECHO, req, sizeof(req), resp, sizeof(resp),
                        &got, 10000);
  }
  double took = nt_now_ms() - t0;
  printf("rank %d: after the cut, call %d ended with %s after %llu ms\n", r, i,
         nexar_err_name(rc), (unsigned long long)took);
  NT_CHECKF(rc != NEXAR_OK && rc != NEXAR_ERR_TIMEOUT,
            "rank %d: calls after the RPC connection was cut: %s", r,
            nexar_err_name(rc));
  NT_CHECKF(took < 5000, "rank %d: the failure took %.0f ms to be seen", r,
            took);
  (void)nexar_finalize(ctx);
  return 0;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  nt_opts_t o = {
      .world_size = 2, .timeout_ms = 90000, .env = "NEXAR_TRANSPORT=quic"};
  int rc = nt_run(&o, worker, NULL);
  printf("%s rpc_quic_data_inflight_bound_during_allreduce world=2\n",
         rc ? "FAIL" : "ok");
  nt_opts_t c = {
      .world_size = 2, .timeout_ms = 60000, .env = "NEXAR_TRANSPORT=quic"};
  int rc2 = nt_run(&c, worker_cut, NULL);
  printf("%s rpc_quic_connection_cut_fails_link world=2\n",
         rc2 ? "FAIL" : "ok");
  return rc || rc2;
}
