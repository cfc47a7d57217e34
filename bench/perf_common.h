/*
 * perf_common.h: the measuring driver shared by the baseline programs
 * (mpi_perf.c over the MPI C API, gloo_perf.cc over Gloo). Header-only, C11
 * and C++ alike, so that every baseline times, checks and prints exactly the
 * same way. It follows the specification of tools/nexar-perf:
 *
 *   PROG OP [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] [-n ITERS] [-w WARMUP]
 *           [-c CHECK] [-d DTYPE] [-o REDOP] [-r ROOT] [-W WINDOW]
 *           [-P] [--json FILE]
 *
 *   OP: latency bw bibw allreduce iallreduce bcast reduce allgather
 *       reduce_scatter alltoall gather scatter scan barrier
 *
 * Method, per size: allocate and fill the buffers, run WARMUP iterations,
 * barrier, read the clock, run ITERS iterations back to back, read the clock;
 * each rank's time is its elapsed time / ITERS (for latency: / 2 more, the
 * one-way time of a round trip; for bw and bibw: / WINDOW more, the time per
 * message). time_us avg/min/max are over the ranks taking part (all ranks for
 * collectives, ranks 0 and 1 for latency, bw and bibw). algbw = size / time
 * (bibw: 2 x size), busbw = algbw x the nccl-tests factor of the op. Then
 * CHECK more iterations run on freshly filled buffers and every output
 * element is compared bit for bit with the exact expected value; #wrong is
 * the sum over ranks (null in the JSON with -c 0). Ranks that sit a
 * point-to-point op out skip the check and wait in the statistics'
 * allreduce, so nothing of theirs runs during the timed window.
 *
 * With -P (--percentiles) rank 0 also times each timed iteration on its own
 * and prints, after the row, "#   per iteration on rank 0 (us): p10 ..
 * p50 .. p90 .. p99 .. max ..", scaled as the row's time (as nexar-perf -P:
 * the value at index floor((ITERS - 1) q) of the sorted times).
 *
 * Sizes follow nccl-tests: size is the larger of the op's send and receive
 * buffers (allgather and gather: the gathered output; reduce_scatter,
 * scatter and alltoall: the whole input); count is the call's count argument
 * (the per-rank block for those five), rounded down, possibly 0.
 *
 * Defaults, flags, columns, JSON keys and exit status (0; 1 when a call
 * failed or #wrong > 0; 2 on bad arguments) are those of tools/nexar-perf.
 */
#ifndef BENCH_PERF_COMMON_H
#define BENCH_PERF_COMMON_H

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Most messages in flight in the bw and bibw tests (-W, default 64 as
 * osu_bw). */
#define PERF_MAX_WINDOW 4096

enum perf_op {
  OP_LATENCY,
  OP_BW,
  OP_BIBW,
  OP_ALLREDUCE,
  OP_IALLREDUCE,
  OP_BCAST,
  OP_REDUCE,
  OP_ALLGATHER,
  OP_REDUCE_SCATTER,
  OP_ALLTOALL,
  OP_GATHER,
  OP_SCATTER,
  OP_SCAN,
  OP_BARRIER,
  OP_COUNT
};

static const char *const perf_op_names[OP_COUNT] = {
    "latency", "bw",      "bibw",      "allreduce",      "iallreduce",
    "bcast",   "reduce",  "allgather", "reduce_scatter", "alltoall",
    "gather",  "scatter", "scan",      "barrier"};

/* Data types (NCCL numbering names); half types are not offered because
 * the MPI baselines have no standard type for them. */
enum perf_dtype {
  DT_INT8,
  DT_UINT8,
  DT_INT32,
  DT_UINT32,
  DT_INT64,
  DT_UINT64,
  DT_FLOAT32,
  DT_FLOAT64,
  DT_COUNT
};
static const char *const perf_dtype_names[DT_COUNT] = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64", "float", "double"};
static const char *const perf_dtype_alias[DT_COUNT] = {
    "int8",  "uint8",  "int32",   "uint32",
    "int64", "uint64", "float32", "float64"};
static const size_t perf_dtype_size[DT_COUNT] = {1, 1, 4, 4, 8, 8, 4, 8};

enum perf_redop { RO_SUM, RO_PROD, RO_MAX, RO_MIN, RO_COUNT };
static const char *const perf_redop_names[RO_COUNT] = {"sum", "prod", "max",
                                                       "min"};

/* Reductions the driver needs for its own bookkeeping. */
enum perf_dred { PERF_DSUM, PERF_DMAX, PERF_DMIN };

/* One measurement: what the backend gets for each size. */
typedef struct perf_case {
  int op, dtype, redop, root, nranks, rank, window;
  size_t bytes; /* reported size */
  size_t count; /* the call's count argument (reported) */
  size_t blk;   /* same as count: elements per rank block / message */
  size_t ts;    /* type size */
  void *sbuf;   /* send buffer (or the only buffer: bcast, p2p) */
  void *rbuf;   /* receive buffer */
  size_t sbytes, rbytes;
  void *be; /* backend's state for this case */
} perf_case;

typedef struct perf_backend {
  const char *impl; /* e.g. "openmpi", "mpich", "gloo" */
  const char *impl_version;
  int rank, size;
  int failed; /* set by perf_main when a call failed (not for #wrong) */
  void (*barrier)(struct perf_backend *be);
  /* In place over all ranks. */
  void (*allreduce_d)(struct perf_backend *be, double *v, int n, int red);
  /* 0 when the op, type and reduction are supported for this case; < 0
   * when not at all; > 0 to skip this size only (a row is not printed). */
  int (*supports)(struct perf_backend *be, const perf_case *c);
  /* Optional: set up per-case state after the buffers exist. */
  int (*prepare)(struct perf_backend *be, perf_case *c);
  /* One iteration of the op; 0 on success. */
  int (*run)(struct perf_backend *be, perf_case *c);
  void (*release)(struct perf_backend *be, perf_case *c);
} perf_backend;

typedef struct perf_opts {
  int op;
  size_t minb, maxb;
  size_t factor;
  int iters, warmup, check, window;
  int dtype, redop, root;
  int pct; /* -P */
  const char *json;
} perf_opts;

static double perf_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int perf_parse_size(const char *s, size_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  unsigned long long mul = 1;
  if (end == s || errno) return -1;
  if (*end == 'k' || *end == 'K')
    mul = 1ull << 10, end++;
  else if (*end == 'm' || *end == 'M')
    mul = 1ull << 20, end++;
  else if (*end == 'g' || *end == 'G')
    mul = 1ull << 30, end++;
  if (*end != '\0') return -1;
  *out = (size_t)(v * mul);
  return 0;
}

static int perf_lookup(const char *s, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (!strcmp(s, names[i])) return i;
  return -1;
}

static void perf_usage(const char *prog) {
  fprintf(stderr,
          "usage: %s OP [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] [-n ITERS] "
          "[-w WARMUP]\n"
          "          [-c CHECK] [-d DTYPE] [-o REDOP] [-r ROOT] [-W WINDOW]\n"
          "          [-P] [--json FILE]\n"
          "  OP: latency bw bibw allreduce iallreduce bcast reduce allgather\n"
          "      reduce_scatter alltoall gather scatter scan barrier\n"
          "  sizes accept K, M, G suffixes; DTYPE int8 uint8 int32 uint32 "
          "int64 uint64\n"
          "  float (float32) double (float64); REDOP sum prod max min.\n"
          "  Defaults as nexar-perf: -b 8 -e MINBYTES -f 2 -n 20 -w 5 (latency "
          "-n 1000\n"
          "  -w 100) -c 1 -d float -o sum -r 0 -W 64.\n",
          prog);
}

/* Parses argv[1..]; unknown arguments are errors. Returns 0, or 2 on a
 * usage error. Arguments the backend consumed must already be removed. */
static int perf_parse(int argc, char **argv, perf_opts *o) {
  memset(o, 0, sizeof *o);
  o->minb = 8;
  o->maxb = 0;
  o->factor = 2;
  o->iters = -1;
  o->warmup = -1;
  o->check = 1;
  o->window = 64;
  o->dtype = DT_FLOAT32;
  o->redop = RO_SUM;
  o->root = 0;
  if (argc < 2) return 2;
  o->op = perf_lookup(argv[1], perf_op_names, OP_COUNT);
  if (o->op < 0) {
    fprintf(stderr, "%s: unknown op '%s'\n", argv[0], argv[1]);
    return 2;
  }
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-P") || !strcmp(a, "--percentiles")) {
      o->pct = 1;
      continue;
    }
    if (!v) {
      fprintf(stderr, "%s: %s needs a value\n", argv[0], a);
      return 2;
    }
    i++;
    if (!strcmp(a, "-b")) {
      if (perf_parse_size(v, &o->minb)) return 2;
    } else if (!strcmp(a, "-e")) {
      if (perf_parse_size(v, &o->maxb)) return 2;
    } else if (!strcmp(a, "-f")) {
      o->factor = (size_t)atol(v);
    } else if (!strcmp(a, "-W")) {
      o->window = atoi(v);
    } else if (!strcmp(a, "-n")) {
      o->iters = atoi(v);
    } else if (!strcmp(a, "-w")) {
      o->warmup = atoi(v);
    } else if (!strcmp(a, "-c")) {
      o->check = atoi(v);
    } else if (!strcmp(a, "-d")) {
      o->dtype = perf_lookup(v, perf_dtype_names, DT_COUNT);
      if (o->dtype < 0) o->dtype = perf_lookup(v, perf_dtype_alias, DT_COUNT);
      if (o->dtype < 0) {
        fprintf(stderr, "%s: unsupported dtype '%s'\n", argv[0], v);
        return 2;
      }
    } else if (!strcmp(a, "-o")) {
      o->redop = perf_lookup(v, perf_redop_names, RO_COUNT);
      if (o->redop < 0) {
        fprintf(stderr, "%s: unsupported redop '%s'\n", argv[0], v);
        return 2;
      }
    } else if (!strcmp(a, "-r")) {
      o->root = atoi(v);
    } else if (!strcmp(a, "--json") || !strcmp(a, "-J")) {
      o->json = v;
    } else {
      fprintf(stderr, "%s: unknown argument '%s'\n", argv[0], a);
      return 2;
    }
  }
  if (o->maxb < o->minb) o->maxb = o->minb;
  if (o->factor < 2) o->factor = 2;
  if (o->iters < 0) o->iters = o->op == OP_LATENCY ? 1000 : 20;
  if (o->warmup < 0) o->warmup = o->op == OP_LATENCY ? 100 : 5;
  if (o->iters < 1) o->iters = 1;
  if (o->check < 0) o->check = 0;
  if (o->window < 1 || o->window > PERF_MAX_WINDOW) {
    fprintf(stderr, "%s: -W wants 1..%d\n", argv[0], PERF_MAX_WINDOW);
    return 2;
  }
  return 0;
}

/* ---- data pattern, exactly representable in every type ---------------- */

/* Value of element k of rank r's input (small integers, so every sum,
 * product, max and min over up to 12 ranks is exact in float32). */
static double perf_val(int r, size_t k) {
  return (double)(((size_t)r + k) % 4 + 1);
}

static double perf_red(int redop, double a, double b) {
  switch (redop) {
    case RO_SUM:
      return a + b;
    case RO_PROD:
      return a * b;
    case RO_MAX:
      return a > b ? a : b;
    default:
      return a < b ? a : b;
  }
}

static void perf_store(int dt, void *p, size_t i, double v) {
  int64_t iv = (int64_t)v; /* integer types wrap as the reduction does */
  switch (dt) {
    case DT_INT8:
      ((int8_t *)p)[i] = (int8_t)iv;
      break;
    case DT_UINT8:
      ((uint8_t *)p)[i] = (uint8_t)iv;
      break;
    case DT_INT32:
      ((int32_t *)p)[i] = (int32_t)iv;
      break;
    case DT_UINT32:
      ((uint32_t *)p)[i] = (uint32_t)iv;
      break;
    case DT_INT64:
      ((int64_t *)p)[i] = iv;
      break;
    case DT_UINT64:
      ((uint64_t *)p)[i] = (uint64_t)iv;
      break;
    case DT_FLOAT32:
      ((float *)p)[i] = (float)v;
      break;
    default:
      ((double *)p)[i] = v;
      break;
  }
}

/* Element i of p equals v converted to the type, bit for bit. */
static int perf_equal(int dt, const void *p, size_t i, double v) {
  union {
    int8_t i8;
    uint8_t u8;
    int32_t i32;
    uint32_t u32;
    int64_t i64;
    uint64_t u64;
    float f;
    double d;
  } x;
  size_t ts = perf_dtype_size[dt];
  perf_store(dt, &x, 0, v);
  return memcmp((const char *)p + i * ts, &x, ts) == 0;
}

/* Reduction over ranks 0..last of perf_val(r, k). */
static double perf_expect_red(int redop, int last, size_t k) {
  double acc = perf_val(0, k);
  for (int r = 1; r <= last; r++) acc = perf_red(redop, acc, perf_val(r, k));
  return acc;
}

/* ---- sizes and buffers -------------------------------------------------- */

/* Fills in the case for a requested size; 0, or -1 when out of memory. */
static int perf_case_init(perf_case *c, const perf_opts *o, int rank, int n,
                          size_t req) {
  memset(c, 0, sizeof *c);
  c->op = o->op;
  c->dtype = o->dtype;
  c->redop = o->redop;
  c->root = o->root;
  c->rank = rank;
  c->nranks = n;
  c->window = o->window;
  c->ts = perf_dtype_size[o->dtype];
  size_t ts = c->ts;
  switch (o->op) {
    case OP_ALLGATHER:
    case OP_REDUCE_SCATTER:
    case OP_ALLTOALL:
    case OP_GATHER:
    case OP_SCATTER:
      c->blk = c->count = req / ts / (size_t)n;
      c->bytes = c->blk * (size_t)n * ts;
      break;
    case OP_BARRIER:
      c->blk = c->count = c->bytes = 0;
      break;
    default:
      c->blk = c->count = req / ts;
      c->bytes = c->count * ts;
  }
  size_t all = c->bytes, one = c->blk * ts;
  switch (o->op) {
    case OP_ALLGATHER:
      c->sbytes = one, c->rbytes = all;
      break;
    case OP_GATHER:
      c->sbytes = one, c->rbytes = rank == c->root ? all : 0;
      break;
    case OP_REDUCE_SCATTER:
      c->sbytes = all, c->rbytes = one;
      break;
    case OP_SCATTER:
      c->sbytes = rank == c->root ? all : 0, c->rbytes = one;
      break;
    case OP_ALLTOALL:
      c->sbytes = c->rbytes = all;
      break;
    case OP_BCAST:
      c->sbytes = all, c->rbytes = 0;
      break;
    case OP_REDUCE: /* an output everywhere: Gloo wants one off the root */
      c->sbytes = c->rbytes = all;
      break;
    case OP_BARRIER:
      break;
    default:
      c->sbytes = c->rbytes = all;
  }
  /* Every page is written by the fill below, so no fault is timed. */
  c->sbuf = malloc(c->sbytes ? c->sbytes : 64);
  c->rbuf = malloc(c->rbytes ? c->rbytes : 64);
  if (!c->sbuf || !c->rbuf) return -1;
  return 0;
}

static void perf_case_free(perf_case *c) {
  free(c->sbuf);
  free(c->rbuf);
  c->sbuf = c->rbuf = NULL;
}

/* Fills the inputs with the pattern and the outputs with a sentinel. */
static void perf_fill(perf_case *c) {
  int dt = c->dtype, r = c->rank;
  size_t se = c->sbytes / c->ts;
  int src = r;
  if (c->op == OP_BCAST || c->op == OP_SCATTER) src = c->root;
  if ((c->op == OP_BCAST) && r != c->root)
    memset(c->sbuf, 0xa5, c->sbytes);
  else if (c->op == OP_LATENCY || c->op == OP_BW)
    for (size_t i = 0; i < se; i++) perf_store(dt, c->sbuf, i, perf_val(0, i));
  else
    for (size_t i = 0; i < se; i++)
      perf_store(dt, c->sbuf, i, perf_val(src, i));
  if (c->rbytes) memset(c->rbuf, 0xa5, c->rbytes);
}

/* Counts the wrong elements of this rank's output after one iteration on
 * freshly filled buffers. */
static size_t perf_verify(const perf_case *c) {
  int dt = c->dtype, r = c->rank, n = c->nranks, red = c->redop;
  size_t bad = 0, b = c->blk;
  switch (c->op) {
    case OP_LATENCY:
      if (r <= 1)
        for (size_t i = 0; i < c->count; i++)
          bad += !perf_equal(dt, c->rbuf, i, perf_val(0, i));
      break;
    case OP_BW:
      if (r == 1)
        for (size_t i = 0; i < c->count; i++)
          bad += !perf_equal(dt, c->rbuf, i, perf_val(0, i));
      break;
    case OP_BIBW:
      if (r <= 1)
        for (size_t i = 0; i < c->count; i++)
          bad += !perf_equal(dt, c->rbuf, i, perf_val(1 - r, i));
      break;
    case OP_ALLREDUCE:
    case OP_IALLREDUCE:
      for (size_t i = 0; i < c->count; i++)
        bad += !perf_equal(dt, c->rbuf, i, perf_expect_red(red, n - 1, i));
      break;
    case OP_REDUCE:
      if (r == c->root)
        for (size_t i = 0; i < c->count; i++)
          bad += !perf_equal(dt, c->rbuf, i, perf_expect_red(red, n - 1, i));
      break;
    case OP_SCAN:
      for (size_t i = 0; i < c->count; i++)
        bad += !perf_equal(dt, c->rbuf, i, perf_expect_red(red, r, i));
      break;
    case OP_BCAST:
      for (size_t i = 0; i < c->count; i++)
        bad += !perf_equal(dt, c->sbuf, i, perf_val(c->root, i));
      break;
    case OP_ALLGATHER:
      for (int j = 0; j < n; j++)
        for (size_t i = 0; i < b; i++)
          bad += !perf_equal(dt, c->rbuf, (size_t)j * b + i, perf_val(j, i));
      break;
    case OP_GATHER:
      if (r == c->root)
        for (int j = 0; j < n; j++)
          for (size_t i = 0; i < b; i++)
            bad += !perf_equal(dt, c->rbuf, (size_t)j * b + i, perf_val(j, i));
      break;
    case OP_SCATTER:
      for (size_t i = 0; i < b; i++)
        bad +=
            !perf_equal(dt, c->rbuf, i, perf_val(c->root, (size_t)r * b + i));
      break;
    case OP_REDUCE_SCATTER:
      for (size_t i = 0; i < b; i++)
        bad += !perf_equal(dt, c->rbuf, i,
                           perf_expect_red(red, n - 1, (size_t)r * b + i));
      break;
    case OP_ALLTOALL:
      /* Block j of rank r's output is block r of rank j's input. */
      for (int j = 0; j < n; j++)
        for (size_t i = 0; i < b; i++)
          bad += !perf_equal(dt, c->rbuf, (size_t)j * b + i,
                             perf_val(j, (size_t)r * b + i));
      break;
    default:
      break;
  }
  return bad;
}

static double perf_busbw_factor(int op, int n) {
  switch (op) {
    case OP_ALLREDUCE:
    case OP_IALLREDUCE:
      return 2.0 * (n - 1) / n;
    case OP_ALLGATHER:
    case OP_REDUCE_SCATTER:
    case OP_ALLTOALL:
    case OP_GATHER:
    case OP_SCATTER:
      return (double)(n - 1) / n;
    default:
      return 1.0;
  }
}

static int perf_is_p2p(int op) {
  return op == OP_LATENCY || op == OP_BW || op == OP_BIBW;
}
static int perf_is_reduction(int op) {
  return op == OP_ALLREDUCE || op == OP_IALLREDUCE || op == OP_REDUCE ||
         op == OP_REDUCE_SCATTER || op == OP_SCAN;
}
static int perf_is_rooted(int op) {
  return op == OP_BCAST || op == OP_REDUCE || op == OP_GATHER ||
         op == OP_SCATTER;
}

/* ---- output ------------------------------------------------------------- */

typedef struct perf_row {
  size_t size, count;
  int root;
  double avg, min, max, algbw, busbw;
  double wrong;  /* -1: not checked */
  int has_pct;   /* -P on rank 0: pct holds p10, p50, p90, p99, max */
  double pct[5]; /* us, scaled as avg */
} perf_row;

static const char *perf_redop_col(const perf_opts *o) {
  return perf_is_reduction(o->op) ? perf_redop_names[o->redop] : "none";
}

/* A JSON number, or null for a non-finite value. */
static void perf_json_num(FILE *f, const char *key, double v) {
  if (isfinite(v))
    fprintf(f, ", \"%s\": %.6g", key, v);
  else
    fprintf(f, ", \"%s\": null", key);
}

/* The rows as nexar-perf writes them (same keys), plus "impl". */
static int perf_write_json(const perf_opts *o, const perf_backend *be,
                           const perf_row *rows, int nrows) {
  FILE *f = fopen(o->json, "w");
  if (!f) {
    fprintf(stderr, "perf: cannot write %s: %s\n", o->json, strerror(errno));
    return 1;
  }
  fprintf(f, "[");
  for (int i = 0; i < nrows; i++) {
    const perf_row *w = &rows[i];
    fprintf(f,
            "%s\n  {\"impl\": \"%s\", \"op\": \"%s\", \"nranks\": %d, "
            "\"size\": %zu, \"count\": %zu, \"type\": \"%s\", "
            "\"redop\": \"%s\", \"root\": %d, \"iters\": %d, \"warmup\": %d",
            i ? "," : "", be->impl, perf_op_names[o->op], be->size, w->size,
            w->count, perf_dtype_names[o->dtype], perf_redop_col(o), w->root,
            o->iters, o->warmup);
    if (o->op == OP_BW || o->op == OP_BIBW)
      fprintf(f, ", \"window\": %d", o->window);
    perf_json_num(f, "time_us", w->avg);
    perf_json_num(f, "time_min_us", w->min);
    perf_json_num(f, "time_max_us", w->max);
    perf_json_num(f, "algbw_GBps", w->algbw);
    perf_json_num(f, "busbw_GBps", w->busbw);
    if (w->wrong < 0)
      fprintf(f, ", \"wrong\": null}");
    else
      fprintf(f, ", \"wrong\": %.0f}", w->wrong);
  }
  fprintf(f, "\n]\n");
  if (fclose(f)) {
    fprintf(stderr, "perf: cannot write %s: %s\n", o->json, strerror(errno));
    return 1;
  }
  return 0;
}

#define PERF_COLS "%12s  %12s  %8s  %6s  %6s  %9s  %9s  %9s  %7s  %7s  %6s\n"

static void perf_print_header(const perf_opts *o, const perf_backend *be) {
  printf("# %s %s: %s, %d ranks\n", be->impl,
         be->impl_version ? be->impl_version : "", perf_op_names[o->op],
         be->size);
  printf("# -b %zu -e %zu -f %zu -n %d -w %d -c %d -d %s -o %s -r %d", o->minb,
         o->maxb, o->factor, o->iters, o->warmup, o->check,
         perf_dtype_names[o->dtype], perf_redop_names[o->redop], o->root);
  if (o->op == OP_BW || o->op == OP_BIBW) printf(" -W %d", o->window);
  printf("\n# busbw = algbw x %.4f", perf_busbw_factor(o->op, be->size));
  if (o->op == OP_LATENCY) printf("; time is one way (half RTT)");
  if (o->op == OP_BW || o->op == OP_BIBW)
    printf("; time is per message (window %d)", o->window);
  if (o->op == OP_BIBW) printf("; algbw counts both directions");
  printf("\n");
  printf(PERF_COLS, "#       size", "count", "type", "redop", "root", "time",
         "min", "max", "algbw", "busbw", "#wrong");
  printf(PERF_COLS, "#        (B)", "(elements)", "", "", "", "(us)", "(us)",
         "(us)", "(GB/s)", "(GB/s)", "");
  fflush(stdout);
}

static void perf_print_row(const perf_opts *o, const perf_row *row) {
  char w[32];
  if (row->wrong < 0)
    snprintf(w, sizeof w, "N/A");
  else
    snprintf(w, sizeof w, "%.0f", row->wrong);
  printf(
      "%12zu  %12zu  %8s  %6s  %6d  %9.2f  %9.2f  %9.2f  %7.3f  %7.3f  "
      "%6s\n",
      row->size, row->count, perf_dtype_names[o->dtype], perf_redop_col(o),
      row->root, row->avg, row->min, row->max, row->algbw, row->busbw, w);
  if (row->has_pct)
    printf(
        "#   per iteration on rank 0 (us): p10 %.2f  p50 %.2f  p90 %.2f  "
        "p99 %.2f  max %.2f\n",
        row->pct[0], row->pct[1], row->pct[2], row->pct[3], row->pct[4]);
  fflush(stdout);
}

static int perf_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* ---- the driver -------------------------------------------------------- */

/* Times one size; fills the row (valid on every rank). */
static int perf_measure(perf_backend *be, const perf_opts *o, perf_case *c,
                        perf_row *row) {
  int rank = be->rank, n = be->size;
  int part = perf_is_p2p(o->op) ? rank <= 1 : 1;
  perf_fill(c);
  if (be->prepare && be->prepare(be, c)) return -1;
  for (int i = 0; i < o->warmup; i++)
    if (be->run(be, c)) return -1;
  /* -P: rank 0's iterations one by one (allocated before the clock). */
  double *each = NULL;
  if (o->pct && rank == 0) {
    each = (double *)malloc((size_t)o->iters * sizeof *each);
    if (!each) return -1;
  }
  be->barrier(be);
  double t0 = perf_now_us(), ti = t0;
  for (int i = 0; i < o->iters; i++) {
    if (be->run(be, c)) {
      free(each);
      return -1;
    }
    if (each) {
      double t1 = perf_now_us();
      each[i] = t1 - ti;
      ti = t1;
    }
  }
  double t = (perf_now_us() - t0) / o->iters;
  double scale = 1;
  if (o->op == OP_LATENCY) scale = 2;
  if (o->op == OP_BW || o->op == OP_BIBW) scale = o->window;
  t /= scale;
  row->has_pct = each != NULL;
  if (each) {
    static const double at[4] = {0.10, 0.50, 0.90, 0.99};
    int n_it = o->iters;
    qsort(each, (size_t)n_it, sizeof *each, perf_cmp_double);
    for (int k = 0; k < 4; k++)
      row->pct[k] = each[(int)((double)(n_it - 1) * at[k])] / scale;
    row->pct[4] = each[n_it - 1] / scale;
    free(each);
  }
  /* Ranks that sit a point-to-point op out have no output: they do not
   * refill their buffers while ranks 0 and 1 are still timing. */
  double wrong = 0;
  for (int i = 0; part && i < o->check; i++) {
    perf_fill(c);
    if (be->run(be, c)) return -1;
    wrong += (double)perf_verify(c);
  }
  if (be->release) be->release(be, c);
  /* sums: time, participants, wrong; maxima: time, -time (the minimum) */
  double s[3] = {part ? t : 0, (double)part, wrong};
  double mx[2] = {part ? t : -1e300, part ? -t : -1e300};
  be->allreduce_d(be, s, 3, PERF_DSUM);
  be->allreduce_d(be, mx, 2, PERF_DMAX);
  row->size = c->bytes;
  row->count = c->count;
  row->root = perf_is_rooted(o->op) ? c->root : -1;
  row->avg = s[0] / s[1];
  row->max = mx[0];
  row->min = -mx[1];
  row->wrong = o->check ? s[2] : -1;
  double bytes = (double)c->bytes;
  if (o->op == OP_BIBW) bytes *= 2;
  row->algbw = row->avg > 0 ? bytes / row->avg / 1e3 : 0;
  row->busbw = row->algbw * perf_busbw_factor(o->op, n);
  return 0;
}

/* Runs the whole sweep (rank 0 prints); returns the exit status. */
static int perf_main(perf_backend *be, const perf_opts *o) {
  int rank = be->rank, n = be->size;
  if (perf_is_p2p(o->op) && n < 2) {
    if (!rank)
      fprintf(stderr, "perf: %s needs at least 2 ranks\n",
              perf_op_names[o->op]);
    return 2;
  }
  if (o->root < 0 || o->root >= n) {
    if (!rank) fprintf(stderr, "perf: -r %d is not a rank of %d\n", o->root, n);
    return 2;
  }
  {
    perf_case c0;
    memset(&c0, 0, sizeof c0);
    c0.op = o->op, c0.dtype = o->dtype, c0.redop = o->redop;
    c0.count = c0.blk = 1, c0.nranks = n, c0.rank = rank;
    c0.ts = perf_dtype_size[o->dtype], c0.bytes = c0.ts * (size_t)n;
    if (be->supports(be, &c0) < 0) {
      if (!rank)
        fprintf(stderr, "perf: %s has no %s (%s, %s)\n", be->impl,
                perf_op_names[o->op], perf_dtype_names[o->dtype],
                perf_redop_names[o->redop]);
      return 3;
    }
  }
  perf_row *rows = NULL;
  int nrows = 0, cap = 0, rc = 0;
  double wrong = 0, busbw_sum = 0;
  if (!rank) perf_print_header(o, be);
  for (size_t sz = o->minb;;) {
    perf_case c;
    if (perf_case_init(&c, o, rank, n, sz)) {
      fprintf(stderr, "perf: rank %d: out of memory at %zu B\n", rank, sz);
      be->failed = 1;
      free(rows);
      return 1;
    }
    perf_row row;
    int sup = be->supports(be, &c);
    if (sup > 0) {
      if (!rank)
        printf("# %zu B (count %zu) skipped: %s cannot run it\n", c.bytes,
               c.count, be->impl);
      perf_case_free(&c);
    } else {
      if (sup < 0 || perf_measure(be, o, &c, &row)) {
        fprintf(stderr, "perf: rank %d: %s failed at %zu B\n", rank,
                perf_op_names[o->op], c.bytes);
        be->failed = 1;
        perf_case_free(&c);
        free(rows);
        return 1;
      }
      perf_case_free(&c);
      if (row.wrong > 0) wrong += row.wrong;
      busbw_sum += row.busbw;
      if (!rank) {
        perf_print_row(o, &row);
        if (nrows == cap) {
          cap = cap ? 2 * cap : 16;
          perf_row *nr = (perf_row *)realloc(rows, (size_t)cap * sizeof *rows);
          if (!nr) {
            free(rows);
            return 1;
          }
          rows = nr;
        }
        rows[nrows++] = row;
        /* rewritten after every row, so a run cut short keeps its rows */
        if (o->json && perf_write_json(o, be, rows, nrows)) rc = 1;
      }
    }
    if (o->op == OP_BARRIER || sz >= o->maxb) break;
    size_t next = sz ? sz * o->factor : 1;
    if (next / o->factor != sz || next > o->maxb) break;
    sz = next;
  }
  if (!rank) {
    printf("# #wrong total: %.0f %s\n", wrong,
           !o->check ? "(not checked)"
           : wrong   ? "FAILED"
                     : "OK");
    if (o->op != OP_BARRIER)
      printf("# Avg bus bandwidth: %.3f GB/s\n",
             nrows ? busbw_sum / nrows : 0.0);
    fflush(stdout);
  }
  free(rows);
  return wrong > 0 ? 1 : rc;
}

#endif
