/*
 * Live inspection: the table nexar-inspect and nexar-run print from the
 * ranks' STATE answers (docs/debugging.md "Live inspection" shows one).
 * Waits name communicator ranks; on the world (communicator 0) those are
 * world ranks, and the lines under the table say which ranks the others
 * wait for and what those ranks are doing.
 */
#include <stdlib.h>
#include <string.h>

#include "cluster/inspect_int.h"

enum { COLS = 7 };
static const char *const head[COLS] = {
    "RANK", "HOST", "PID", "STATE", "WAITS FOR", "IN FLIGHT", "HEARTBEAT AGE"};

/* The operation the rank has waited in longest (the oldest posted). */
static const nexar__insp_op_t *oldest(const insp_rank_t *k) {
  return k->got && k->st.nops ? &k->st.ops[k->st.nops - 1] : NULL;
}

static void op_name(const nexar__insp_op_t *o, char *out, size_t n) {
  size_t k = (size_t)snprintf(out, n, "%s", o->op);
  if (o->seq != UINT64_MAX && k < n)
    k += (size_t)snprintf(out + k, n - k, " #%llu", (unsigned long long)o->seq);
  if (o->comm != 0 && k < n)
    snprintf(out + k, n - k, " on comm %llu", (unsigned long long)o->comm);
}

static void state_of(const insp_rank_t *k, char *out, size_t n) {
  const nexar__insp_op_t *o = oldest(k);
  char name[96];
  if (!k->got) {
    snprintf(out, n, "no answer: %s", k->failed ? k->why : "none in time");
  } else if (!o) {
    snprintf(out, n, "idle (in no nexar operation)");
  } else {
    op_name(o, name, sizeof name);
    snprintf(out, n, "%s %s for %.1f s%s", o->waits[0] ? "waiting in" : "in",
             name, (double)o->waited_us / 1e6,
             k->st.nops > 1 ? " (+ newer)" : "");
  }
}

static void waits_of(const insp_rank_t *k, char *out, size_t n) {
  const nexar__insp_op_t *o = oldest(k);
  if (!o || !o->waits[0]) {
    snprintf(out, n, "-");
    return;
  }
  bool many = strchr(o->waits, ',') != NULL;
  snprintf(out, n, "%s%s %s", o->comm ? "comm " : "", many ? "ranks" : "rank",
           o->waits);
}

static void bytes_str(uint64_t b, char *out, size_t n) {
  if (b < 10240)
    snprintf(out, n, "%lluB", (unsigned long long)b);
  else if (b < 10485760)
    snprintf(out, n, "%lluK", (unsigned long long)(b >> 10));
  else
    snprintf(out, n, "%lluM", (unsigned long long)(b >> 20));
}

static void flight_of(const insp_rank_t *k, char *out, size_t n) {
  size_t o = 0;
  int shown = 0, more = 0;
  out[0] = 0;
  for (uint32_t i = 0; k->got && i < k->st.npeers; i++) {
    nexar__insp_peer_t p;
    nexar__insp_peer_at(&k->st, i, &p);
    if (!p.inflight) continue;
    if (shown == 4) {
      more++;
      continue;
    }
    char b[24];
    bytes_str(p.inflight, b, sizeof b);
    o += (size_t)snprintf(out + o, n - o, "%s%u:%s", shown ? " " : "", p.rank,
                          b);
    if (o >= n) o = n - 1;
    shown++;
  }
  if (more) snprintf(out + o, n - o, " +%d", more);
  if (!out[0]) snprintf(out, n, "%s", k->got ? "-" : "");
}

static void heartbeat_of(const insp_rank_t *k, char *out, size_t n) {
  nexar__insp_peer_t p, worst = {0, 0, 0};
  for (uint32_t i = 0; k->got && i < k->st.npeers; i++) {
    nexar__insp_peer_at(&k->st, i, &p);
    if (i == 0 || p.hb_age_ms > worst.hb_age_ms) worst = p;
  }
  if (!k->got || !k->st.npeers)
    snprintf(out, n, "%s", k->got ? "no links" : "");
  else
    snprintf(out, n, "max %u ms (rank %u; %u links)", worst.hb_age_ms,
             worst.rank, k->st.npeers);
}

/* Whether rank |k| is in world collective |seq| named |op|. */
static bool in_op(const insp_rank_t *k, const char *op, uint64_t seq) {
  for (uint32_t i = 0; k->got && i < k->st.nops; i++)
    if (k->st.ops[i].comm == 0 && k->st.ops[i].seq == seq &&
        !strcmp(k->st.ops[i].op, op))
      return true;
  return false;
}

/* Appends rank |r| to the list |out| (|*o| bytes used of |n|). */
static void list_add(char *out, size_t n, size_t *o, int r) {
  if (*o < n)
    *o += (size_t)snprintf(out + *o, n - *o, "%s%d", *o ? ", " : "", r);
}

/* Under the table: for each collective on the world that some ranks wait
 * in, which ranks are not in it and what they do instead (the ones the
 * others wait for, directly or through the algorithm's steps). */
static void summary(const insp_t *s, FILE *out) {
  for (int r = 0; r < s->world; r++) {
    const nexar__insp_op_t *op = oldest(&s->rk[r]);
    if (!op || op->comm != 0 || op->seq == UINT64_MAX) continue;
    bool seen = false; /* told already by a lower rank */
    for (int q = 0; q < r && !seen; q++) {
      const nexar__insp_op_t *o2 = oldest(&s->rk[q]);
      seen =
          o2 && o2->comm == 0 && o2->seq == op->seq && !strcmp(o2->op, op->op);
    }
    if (seen) continue;
    char in[256] = "", name[96];
    size_t ni = 0;
    int nin = 0;
    for (int q = 0; q < s->world; q++)
      if (in_op(&s->rk[q], op->op, op->seq)) {
        list_add(in, sizeof in, &ni, q);
        nin++;
      }
    op_name(op, name, sizeof name);
    fprintf(out, "%s: rank%s %s in it", name, nin > 1 ? "s" : "", in);
    int nout = 0;
    for (int q = 0; q < s->world; q++) {
      if (in_op(&s->rk[q], op->op, op->seq)) continue;
      char st[256];
      state_of(&s->rk[q], st, sizeof st);
      fprintf(out, "%s rank %d (%s)", nout++ ? "," : "; not in it:", q, st);
    }
    fprintf(out, "\n");
  }
}

void nexar__inspect_table(const insp_t *s, FILE *out) {
  enum { CELL = 256 };
  char(*cell)[COLS][CELL] = calloc((size_t)s->world, sizeof(*cell));
  if (!cell) return;
  size_t width[COLS];
  for (int c = 0; c < COLS; c++) width[c] = strlen(head[c]);
  for (int r = 0; r < s->world; r++) {
    const insp_rank_t *k = &s->rk[r];
    snprintf(cell[r][0], CELL, "%d", r);
    snprintf(cell[r][1], CELL, "%s", k->got ? k->st.host : "?");
    snprintf(cell[r][2], CELL, "%u", k->got ? k->st.pid : k->e.host.pid);
    state_of(k, cell[r][3], CELL);
    waits_of(k, cell[r][4], CELL);
    flight_of(k, cell[r][5], CELL);
    heartbeat_of(k, cell[r][6], CELL);
    for (int c = 0; c < COLS; c++)
      if (strlen(cell[r][c]) > width[c]) width[c] = strlen(cell[r][c]);
  }
  for (int c = 0; c < COLS; c++)
    fprintf(out, "%-*s%s", (int)width[c], head[c], c + 1 < COLS ? "  " : "\n");
  for (int r = 0; r < s->world; r++)
    for (int c = 0; c < COLS; c++)
      fprintf(out, "%-*s%s", c + 1 < COLS ? (int)width[c] : 0, cell[r][c],
              c + 1 < COLS ? "  " : "\n");
  summary(s, out);
  free(cell);
}
