/*
 * Two-level (hierarchical) collectives: barrier, bcast, reduce, allreduce
 * and allgather for communicators whose ranks share hosts, as in MPICH's
 * SMP-aware collectives (Zhu, Goodell, Gropp et al., "Hierarchical
 * collectives in MPICH2", EuroPVM/MPI 2009) and Open MPI's han component:
 * a same-host phase towards one leader per host, the flat algorithm among
 * the leaders, and a same-host phase back.
 *
 * Hosts are the ranks' host keys from the roster (docs/wire-protocol.md
 * section 6.9), which every member knows alike, so every member builds the
 * same groups: hosts ordered by their lowest comm rank, ranks ascending
 * within a host. A host's leader is its lowest rank, except that the root
 * of a rooted call leads its own host, so that its data never takes an
 * extra hop. Each phase runs a flat builder over a group (s->gsize,
 * s->grank, s->gmap) with the algorithm auto would pick for that group's
 * size; all of them go into one schedule, whose ranges order the phases
 * (a leader's cross-host sends read what its same-host phase wrote).
 */
#include <stdlib.h>
#include <string.h>

#include "coll/algos.h"

#define W NEXAR__BUF_WORK
#define T NEXAR__BUF_TMP

/* The comm's ranks by host. */
struct nexar__hosts {
  uint32_t epoch; /* computed for this epoch and size */
  int size;
  int nhosts;
  bool multi;   /* nhosts > 1 and some host holds two ranks or more */
  int *host_of; /* [size]: comm rank -> host index */
  int *first;   /* [nhosts + 1]: host h is members[first[h] .. first[h+1]) */
  int *members; /* [size]: comm ranks, grouped by host */
  int data[];
};

typedef struct {
  uint64_t key;
  int rank;
} key_rank_t;

static int key_rank_cmp(const void *pa, const void *pb) {
  const key_rank_t *a = pa, *b = pb;
  if (a->key != b->key) return a->key < b->key ? -1 : 1;
  return (a->rank > b->rank) - (a->rank < b->rank);
}

/* Groups the comm's ranks by host key; a rank whose key is unknown (0) is
 * a host of its own. */
static struct nexar__hosts *hosts_compute(const nexar_comm_t *comm) {
  const nexar_ctx_t *ctx = comm->ctx;
  int n = comm->size;
  struct nexar__hosts *h =
      malloc(sizeof(*h) + (3 * (size_t)n + 1) * sizeof(int));
  key_rank_t *kr = malloc((size_t)n * sizeof(*kr));
  if (!h || !kr) {
    free(h);
    free(kr);
    return NULL;
  }
  h->epoch = comm->epoch;
  h->size = n;
  h->host_of = h->data;
  h->members = h->data + n;
  h->first = h->data + 2 * n;
  for (int r = 0; r < n; r++) {
    int id = comm->world_ranks[r];
    kr[r].key = id >= 0 && id < ctx->world ? ctx->roster[id].host.key : 0;
    kr[r].rank = r;
  }
  qsort(kr, (size_t)n, sizeof(*kr), key_rank_cmp);
  /* host_of first holds each rank's host leader (its lowest rank), then,
   * in rank order, the host's index, numbered as leaders appear. */
  for (int i = 0; i < n; i++)
    h->host_of[kr[i].rank] = i > 0 && kr[i].key && kr[i].key == kr[i - 1].key
                                 ? h->host_of[kr[i - 1].rank]
                                 : kr[i].rank;
  int nh = 0;
  for (int r = 0; r < n; r++) {
    int lead = h->host_of[r];
    if (lead == r) h->members[r] = nh++; /* scratch: leader -> index */
    h->host_of[r] = h->members[lead];
  }
  h->nhosts = nh;
  /* Counting sort by host, ranks ascending within each. */
  memset(h->first, 0, ((size_t)nh + 1) * sizeof(int));
  for (int r = 0; r < n; r++) h->first[h->host_of[r] + 1]++;
  for (int k = 0; k < nh; k++) h->first[k + 1] += h->first[k];
  int *at = (int *)kr; /* n ints fit in n key_rank_t */
  memcpy(at, h->first, (size_t)nh * sizeof(int));
  for (int r = 0; r < n; r++) h->members[at[h->host_of[r]]++] = r;
  h->multi = nh > 1 && nh < n;
  free(kr);
  return h;
}

/* The comm's host groups, computed when its membership changed. Runs on
 * the calling thread, as the schedule's build does. */
static const struct nexar__hosts *hosts_of(nexar_comm_t *comm) {
  struct nexar__hosts *h = comm->hosts;
  if (h && h->epoch == comm->epoch && h->size == comm->size) return h;
  free(h);
  comm->hosts = hosts_compute(comm);
  return comm->hosts;
}

bool nexar__comm_multi_host(nexar_comm_t *comm) {
  const struct nexar__hosts *h = hosts_of(comm);
  return h && h->multi;
}

bool nexar__comm_one_host(nexar_comm_t *comm) {
  const struct nexar__hosts *h = hosts_of(comm);
  return h && h->nhosts == 1;
}

/* ---- Phases. */

/* Runs the flat builder of a.coll over the |n| comm ranks |ranks|, this
 * rank at index |me|, with the algorithm auto picks for a group of |n|. */
static void phase(nexar__sched_t *s, nexar__coll_args_t a, const int *ranks,
                  int n, int me) {
  nexar__coll_args_t keep = s->a;
  s->a = a;
  s->a.algo = nexar__coll_flat_algo(s, &s->comm->ctx->prm, n);
  s->gsize = n;
  s->grank = me;
  s->gmap = ranks;
  int rc = nexar__build_flat(s);
  if (rc < 0 && s->build_rc == 0) s->build_rc = rc;
  s->a = keep;
  s->gsize = s->comm->size;
  s->grank = s->comm->rank;
  s->gmap = NULL;
}

/* Steps naming WORK name |buf| at |off| instead (W, 0: WORK again). */
static void work_at(nexar__sched_t *s, int buf, uint64_t off) {
  s->alias[W] = (uint8_t)buf;
  s->alias_off[W] = off;
}

/* A call's groups: this rank's host |local| (|k| ranks, this one at index
 * |me|, its leader at |li|) and the leaders of all hosts (|lead|, one per
 * host in host order; this host's at index |host|). */
typedef struct {
  const struct nexar__hosts *h;
  const int *local;
  int k, me, li, host;
  int *lead;
  bool leader;
} groups_t;

static int index_of(const int *v, int n, int x) {
  for (int i = 0; i < n; i++)
    if (v[i] == x) return i;
  return -1;
}

static int groups_make(nexar__sched_t *s, groups_t *g) {
  const struct nexar__hosts *h = s->comm->hosts;
  int r = s->comm->rank, root = s->a.root;
  if (!h || !h->multi || h->size != s->comm->size) return NEXAR_ERR_INTERNAL;
  g->h = h;
  g->host = h->host_of[r];
  g->local = h->members + h->first[g->host];
  g->k = h->first[g->host + 1] - h->first[g->host];
  g->lead = malloc((size_t)h->nhosts * sizeof(int));
  if (!g->lead) return NEXAR_ERR_NOMEM;
  for (int x = 0; x < h->nhosts; x++)
    g->lead[x] =
        root >= 0 && h->host_of[root] == x ? root : h->members[h->first[x]];
  g->me = index_of(g->local, g->k, r);
  g->li = index_of(g->local, g->k, g->lead[g->host]);
  g->leader = g->lead[g->host] == r;
  return 0;
}

/* Fan-in to the host leader, a barrier among the leaders, fan-out. */
static void hier_barrier(nexar__sched_t *s, const groups_t *g) {
  int L = g->local[g->li];
  if (!g->leader) {
    nexar__sched_send(s, W, 0, 0, L);
    nexar__sched_fence(s);
    nexar__sched_recv(s, W, 0, 0, L);
    return;
  }
  for (int i = 0; i < g->k; i++)
    if (i != g->li) nexar__sched_recv(s, W, 0, 0, g->local[i]);
  nexar__sched_fence(s);
  phase(s, s->a, g->lead, g->h->nhosts, g->host);
  nexar__sched_fence(s);
  for (int i = 0; i < g->k; i++)
    if (i != g->li) nexar__sched_send(s, W, 0, 0, g->local[i]);
}

/* Among the leaders from the root, then on each host from its leader. */
static void hier_bcast(nexar__sched_t *s, const groups_t *g) {
  nexar__coll_args_t a = s->a;
  if (g->leader) {
    a.root = g->h->host_of[s->a.root];
    phase(s, a, g->lead, g->h->nhosts, g->host);
  }
  a.root = g->li;
  phase(s, a, g->local, g->k, g->me);
}

/* Reduce on each host to its leader (into scratch on leaders other than
 * the root, unfinalized), then among the leaders to the root. */
static void hier_reduce(nexar__sched_t *s, const groups_t *g) {
  nexar__coll_args_t a = s->a;
  if (g->leader && s->comm->rank != s->a.root)
    work_at(s, T, nexar__sched_tmp(s, s->a.count * s->a.es));
  s->hold_final = true;
  a.root = g->li;
  phase(s, a, g->local, g->k, g->me);
  s->hold_final = false;
  if (g->leader) {
    a.root = g->h->host_of[s->a.root];
    a.in_place = true;
    phase(s, a, g->lead, g->h->nhosts, g->host);
  }
  work_at(s, W, 0);
}

/* Reduce on each host to its leader (unfinalized), allreduce among the
 * leaders, bcast on each host. */
static void hier_allreduce(nexar__sched_t *s, const groups_t *g) {
  nexar__coll_args_t a = s->a;
  a.coll = NEXAR__COLL_REDUCE;
  a.root = g->li;
  s->hold_final = true;
  phase(s, a, g->local, g->k, g->me);
  s->hold_final = false;
  if (g->leader) {
    a = s->a;
    a.in_place = true;
    phase(s, a, g->lead, g->h->nhosts, g->host);
  }
  a = s->a;
  a.coll = NEXAR__COLL_BCAST;
  a.root = g->li;
  phase(s, a, g->local, g->k, g->me);
}

/*
 * Gather on each host to its leader, allgatherv of the hosts' blocks among
 * the leaders, bcast of the whole result on each host. The leaders work on
 * the blocks in host order (members[]): in recvbuf itself when that is
 * rank order (ranks placed host by host), else in scratch, copied to
 * recvbuf once complete.
 */
static void hier_allgather(nexar__sched_t *s, const groups_t *g) {
  const struct nexar__hosts *h = g->h;
  int n = s->comm->size, r = s->comm->rank, nh = h->nhosts;
  uint64_t bytes = s->a.count * s->a.es;
  int L = g->local[g->li];
  int in_buf = s->a.in_place ? W : NEXAR__BUF_SEND;
  uint64_t in_off = s->a.in_place ? (uint64_t)r * bytes : 0;
  if (!g->leader) {
    nexar__sched_send(s, in_buf, in_off, bytes, L);
  } else {
    bool ordered = true;
    for (int i = 0; i < n; i++) ordered = ordered && h->members[i] == i;
    int buf = ordered ? W : T;
    uint64_t base = ordered ? 0 : nexar__sched_tmp(s, (uint64_t)n * bytes);
    size_t *cnt = malloc(2 * (size_t)nh * sizeof(size_t));
    if (!cnt) {
      if (s->build_rc == 0) s->build_rc = NEXAR_ERR_NOMEM;
      return;
    }
    for (int x = 0; x < nh; x++) {
      cnt[x] = (size_t)(h->first[x + 1] - h->first[x]) * s->a.count;
      cnt[nh + x] = (size_t)h->first[x] * s->a.count;
    }
    uint64_t at = base + (uint64_t)h->first[g->host] * bytes;
    for (int i = 0; i < g->k; i++) {
      if (i == g->li)
        nexar__sched_copy(s, buf, at + (uint64_t)i * bytes, in_buf, in_off,
                          bytes);
      else
        nexar__sched_recv(s, buf, at + (uint64_t)i * bytes, bytes, g->local[i]);
    }
    nexar__coll_args_t a = s->a;
    a.coll = NEXAR__COLL_ALLGATHERV;
    a.in_place = true;
    a.counts = cnt;
    a.displs = cnt + nh;
    work_at(s, buf, base);
    phase(s, a, g->lead, nh, g->host);
    work_at(s, W, 0);
    free(cnt);
    for (int i = 0; !ordered && i < n; i++)
      nexar__sched_copy(s, W, (uint64_t)h->members[i] * bytes, T,
                        base + (uint64_t)i * bytes, bytes);
  }
  nexar__coll_args_t a = s->a;
  a.coll = NEXAR__COLL_BCAST;
  a.count = (uint64_t)n * s->a.count;
  a.root = g->li;
  phase(s, a, g->local, g->k, g->me);
}

int nexar__build_hier(nexar__sched_t *s) {
  groups_t g;
  int rc = groups_make(s, &g);
  if (rc < 0) return rc;
  switch (s->a.coll) {
    case NEXAR__COLL_BARRIER:
      hier_barrier(s, &g);
      break;
    case NEXAR__COLL_BCAST:
      hier_bcast(s, &g);
      break;
    case NEXAR__COLL_REDUCE:
      hier_reduce(s, &g);
      break;
    case NEXAR__COLL_ALLREDUCE:
      hier_allreduce(s, &g);
      break;
    case NEXAR__COLL_ALLGATHER:
      hier_allgather(s, &g);
      break;
    default:
      rc = NEXAR_ERR_INTERNAL;
  }
  free(g.lead);
  return rc < 0 ? rc : s->build_rc;
}
