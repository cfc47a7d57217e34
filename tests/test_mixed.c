/*
 * Mixed transports in one job (docs/architecture.md): 4 ranks on this host
 * where NEXAR_HOST_KEY puts stable ids 0, 1 on host A and 2, 3 (and the
 * joiner, id 4) on host B, so 0-1 and 2-3 talk over shared memory and
 * everything across over QUIC; each process checks that every link it
 * holds runs on the transport its peer's key calls for. Then, with
 * NEXAR_RECOVERY=automatic:
 *   - p2p between every pair (1 B and 300 KB), allreduce (int64 and a
 *     200000-element f64 one), bcast from every root and allgather,
 *     bit-exact (two-level algorithms, chosen automatically);
 *   - SIGKILL of rank 3 (shared memory to 2, QUIC to 0 and 1): the
 *     survivors' allreduce fails (PEER_FAILED or REVOKED) and rebuilds the
 *     world in place; the same checks on 3;
 *   - a process with key B joins at a checkpoint (id 4: shared memory to 2,
 *     QUIC to 0 and 1), the links are checked and the checks run on 4;
 *   - rank 1 leaves at a checkpoint; the checks run on the 3 left.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "nexar.h"
#include "cluster/cluster.h"
#include "transport/transport.h"

#define MEMBERS 4
#define JOINER 4 /* worker index (and stable id) of the joiner */
#define VICTIM 3
#define LEAVER 1
#define MAXID 5

static int go_join[2];
static pid_t *victim_pid; /* shared mapping */
static int *passed;       /* same mapping: members out of the barrier */

/* A barrier can end at one rank before its last message has left
 * another: the victim dies only once every other member is out of it. */
static void wait_barrier_passed(void) {
  struct timespec ts = {0, 1000000};
  for (int i = 0;
       i < 10000 && __atomic_load_n(passed, __ATOMIC_ACQUIRE) < MEMBERS - 1;
       i++)
    nanosleep(&ts, NULL);
}

static bool host_a(int id) {
  return id < 2;
}

/* An allreduce SUM of |cnt| elements of |dt| (int64 or f64) on |w|, whose
 * element i on rank k is nt_dval(k, i) (exact in any summation order). */
static int sum_check(nexar_comm_t *w, nexar_dtype_t dt, size_t cnt) {
  int r, n;
  NT_OK(nexar_comm_rank(w, &r));
  NT_OK(nexar_comm_size(w, &n));
  double *in = malloc(cnt * 8), *sum = malloc(cnt * 8);
  NT_CHECK(in && sum);
  for (size_t i = 0; i < cnt; i++) {
    if (dt == NEXAR_INT64)
      ((int64_t *)in)[i] = (int64_t)(4 * nt_dval(r, i));
    else
      in[i] = nt_dval(r, i);
  }
  NT_OKC(w, nexar_allreduce(w, in, sum, cnt, dt, NEXAR_SUM));
  for (size_t i = 0; i < cnt; i++) {
    double want = 0;
    for (int k = 0; k < n; k++) want += nt_dval(k, i);
    double got = dt == NEXAR_INT64 ? (double)((int64_t *)sum)[i] / 4 : sum[i];
    NT_CHECKF(memcmp(&want, &got, sizeof want) == 0,
              "allreduce of %zu [%zu]: %.17g, want %.17g", cnt, i, got, want);
  }
  free(in);
  free(sum);
  return 0;
}

/* Collectives and p2p on |w|, all checked bit for bit. */
static int check_world(nexar_comm_t *w) {
  int r, n;
  NT_OK(nexar_comm_rank(w, &r));
  NT_OK(nexar_comm_size(w, &n));
  if (sum_check(w, NEXAR_INT64, 16) || sum_check(w, NEXAR_FLOAT64, 200000))
    return 1;
  int64_t b[1000];
  for (int root = 0; root < n; root++) {
    for (int i = 0; i < 1000; i++) b[i] = r == root ? nt_ival(root, i) : -1;
    NT_OKC(w, nexar_bcast(w, b, 1000, NEXAR_INT64, root));
    for (int i = 0; i < 1000; i++)
      NT_CHECKF(b[i] == nt_ival(root, i), "bcast from %d [%d] %lld", root, i,
                (long long)b[i]);
  }
  /* allgather: slot k holds rank k's values */
  if (nt_check_allgather(w, r, n)) return 1;
  /* p2p: 1 B and 300 KB (past the eager limit) between every pair. */
  enum { BIG = 300000 };
  uint8_t *out = malloc(BIG), *in = malloc((size_t)BIG * MAXID);
  NT_CHECK(out && in);
  for (int len = 1; len <= BIG; len += BIG - 1) {
    nexar_req_t *rq[2 * MAXID];
    int nr = 0;
    for (size_t i = 0; i < (size_t)len; i++) out[i] = (uint8_t)(r * 31 + i);
    memset(in, 0, (size_t)BIG * MAXID);
    for (int k = 0; k < n; k++) {
      if (k == r) continue;
      NT_OKC(w, nexar_irecv(w, in + (size_t)k * BIG, (size_t)len, NEXAR_UINT8,
                            k, 40, &rq[nr++]));
      NT_OKC(w,
             nexar_isend(w, out, (size_t)len, NEXAR_UINT8, k, 40, &rq[nr++]));
    }
    NT_OKC(w, nexar_waitall((size_t)nr, rq, NULL));
    for (int k = 0; k < n; k++)
      for (size_t i = 0; k != r && i < (size_t)len; i++)
        NT_CHECKF(in[(size_t)k * BIG + i] == (uint8_t)(k * 31 + i),
                  "%d B from %d: byte %zu", len, k, i);
  }
  free(out);
  free(in);
  return 0;
}

/* The transport of each link this process holds, read on the progress
 * thread. */
typedef struct tps {
  nexar_ctx_t *ctx;
  const char *name[MAXID];
} tps_t;

static int tps_fn(nexar__req_t *q) {
  tps_t *t = q->cb_arg;
  for (int id = 0; id < t->ctx->world && id < MAXID; id++) {
    nexar__link_t *l = t->ctx->peers[id];
    t->name[id] = l && l->state == NEXAR__CS_READY ? l->tp->name : NULL;
  }
  return 0;
}

/* Every member of |w| but this process: a ready link over shared memory
 * when its host key is ours, over QUIC otherwise. */
static int check_links(nexar_ctx_t *ctx, nexar_comm_t *w) {
  int me = ctx->rank, n;
  tps_t t = {.ctx = ctx};
  nexar__ep_call(&ctx->ep, tps_fn, &t, UINT64_MAX);
  NT_OK(nexar_comm_size(w, &n));
  for (int k = 0; k < n; k++) {
    int id = -1;
    NT_OKC(w, nexar_comm_id_of(w, k, &id));
    if (id == me) continue;
    const char *want = host_a(id) == host_a(me) ? "shm" : "quic";
    NT_CHECKF(t.name[id] && strcmp(t.name[id], want) == 0,
              "process %d's link to process %d: %s, want %s", me, id,
              t.name[id] ? t.name[id] : "none ready", want);
  }
  return 0;
}

/* Checkpoints until the world has |want| members (bounded). */
static int grow_to(nexar_ctx_t *ctx, nexar_comm_t *w, int want) {
  int n = 0;
  NT_OK(nexar_comm_size(w, &n));
  for (int tries = 0; n < want; tries++) {
    NT_CHECKF(tries < 400, "world still %d after %d checkpoints", n, tries);
    nexar_membership_t m;
    NT_OKC(w, nexar_elastic_checkpoint(ctx, 0, &m));
    NT_OK(nexar_comm_size(w, &n));
    if (n < want) {
      struct timespec ts = {0, 20000000};
      nanosleep(&ts, NULL);
    }
  }
  return 0;
}

static int worker(int index, void *arg) {
  (void)arg;
  setenv("NEXAR_HOST_KEY", host_a(index) ? "a1" : "b2", 1);
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  if (index == JOINER) {
    struct pollfd p = {.fd = go_join[0], .events = POLLIN};
    char c;
    NT_CHECK(poll(&p, 1, 30000) == 1 && read(go_join[0], &c, 1) == 1);
    unsetenv("NEXAR_RANK");
    setenv("NEXAR_JOIN", "1", 1);
    NT_OK(nt_join(&ctx));
    w = nexar_comm_world(ctx);
  } else {
    NT_OK(nt_join_world(&ctx, &w, &r, &n));
    if (check_world(w) || check_links(ctx, w)) return 1;
    if (index == VICTIM) *victim_pid = getpid();
    NT_OKC(w, nexar_barrier(w));
    if (index != VICTIM) __atomic_add_fetch(passed, 1, __ATOMIC_RELEASE);
    if (index == VICTIM || index == 0) wait_barrier_passed();
    if (index == VICTIM) raise(SIGKILL);
    if (index == 0) kill(*victim_pid, SIGKILL);
    int64_t v = 1, s = 0;
    int rc = nexar_allreduce(w, &v, &s, 1, NEXAR_INT64, NEXAR_SUM);
    NT_CHECKF(rc == NEXAR_ERR_PEER_FAILED || rc == NEXAR_ERR_REVOKED,
              "allreduce after the kill: %s: %s", nexar_err_name(rc),
              nexar_comm_last_error(w));
    NT_OK(nexar_comm_size(w, &n));
    NT_CHECKF(n == MEMBERS - 1, "rebuilt world of %d", n);
    NT_OKC(w, nexar_allreduce(w, &v, &s, 1, NEXAR_INT64, NEXAR_SUM));
    NT_CHECKF(s == 3, "allreduce on the survivors: %lld", (long long)s);
    if (check_world(w)) return 1;
    if (index == 0) NT_CHECK(write(go_join[1], "g", 1) == 1);
  }
  if (grow_to(ctx, w, MEMBERS)) return 1;
  if (check_world(w) || check_links(ctx, w)) return 1;
  nexar_membership_t m;
  NT_OKC(w, nexar_elastic_checkpoint(ctx, index == LEAVER, &m));
  NT_CHECKF(m.left == 1 && m.new_size == MEMBERS - 1, "leave: left %d size %d",
            m.left, m.new_size);
  if (index != LEAVER && check_world(w)) return 1;
  NT_OK(nexar_finalize(ctx));
  return 0;
}

int main(void) {
  victim_pid = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (victim_pid == MAP_FAILED || pipe(go_join) < 0) return 1;
  passed = (int *)((char *)victim_pid + 64);
  nt_opts_t o = {.world_size = MEMBERS,
                 .nprocs = MEMBERS + 1,
                 .timeout_ms = 40000,
                 .tolerate_kill = 1,
                 .env =
                     "NEXAR_RECOVERY=automatic\nNEXAR_HEARTBEAT_MS=100\n"
                     "NEXAR_HEARTBEAT_TIMEOUT_MS=1000\n"
                     "NEXAR_OP_TIMEOUT_MS=20000\n"
                     "NEXAR_MAX_WORLD_SIZE=5\n"};
  double t0 = nt_now_ms();
  int rc = nt_run(&o, worker, NULL);
  printf("mixed transports, kill, join, leave: %s (%.1f s)\n",
         rc ? "FAILED" : "ok", (nt_now_ms() - t0) / 1000);
  return rc;
}
