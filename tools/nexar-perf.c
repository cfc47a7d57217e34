/*
 * nexar-perf: benchmarks nexar's point-to-point calls and collectives the
 * way nccl-tests and the OSU micro-benchmarks do (see usage() below and
 * docs/benchmarking.md).
 *
 * For each size of the sweep every rank runs WARMUP untimed iterations,
 * enters a barrier, then times ITERS back-to-back iterations and divides
 * (nccl-tests). Each rank's mean is combined over the ranks that take part
 * (mean, min, max); algbw = size / mean time, busbw = algbw x the op's
 * factor. Then CHECK runs on freshly filled buffers count the output
 * elements that differ from the expected values (#wrong, summed over
 * ranks). Rank 0 prints one row per size.
 *
 * The ops themselves are the table in perf_ops.c; the inputs and the
 * expected results are in perf_data.c.
 */
#include <errno.h>
#include <float.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "perf.h"

#define MAX_WINDOW 4096

typedef struct opts {
  const perf_op_t *op;
  size_t minb, maxb;
  size_t factor;
  int iters, warmup, check, window;
  const perf_type_t *type;
  nexar_op_t redop;
  int root;
  const char *json;
  int rpc;      /* the rpc benchmark (perf_rpc.c) instead of an op */
  size_t load;  /* rpc: allreduce bytes of the load */
  double ratio; /* compressed ops: the compression ratio (-R) */
  int pct;      /* -P: rank 0's time per iteration, percentiles */
} opts_t;

/* One printed row. Times in microseconds, bandwidths in GB/s. */
typedef struct row {
  size_t size, count;
  double t_avg, t_min, t_max, algbw, busbw;
  long long wrong; /* -1: not checked */
  /* Non-blocking ops only (has_overlap): OSU's overlap figures. */
  int has_overlap;
  double t_ovl, t_comp, overlap;
  /* Compressed ops: payload bytes each rank sent per call (mean over the
   * ranks and the timed iterations; nexar_comm_bytes_sent). */
  double wire;
  /* -P: rank 0's timed iterations one by one, scaled as t_avg (has_pct):
   * p10, p50, p90, p99 and the slowest. */
  int has_pct;
  double pct[5];
} row_t;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int perf_fail(const perf_t *p, const char *what, int rc) {
  const char *msg = nexar_comm_last_error(p->comm);
  fprintf(stderr, "nexar-perf: rank %d: %s %s (size %zu): %s: %s\n", p->rank,
          p->opname, what, p->size, nexar_err_name(rc),
          msg && *msg ? msg : nexar_strerror(rc));
  return rc;
}

/* ---- Command line. */

static void usage(FILE *f) {
  fprintf(f,
          "Usage: nexar-perf OP [OPTION]...\n"
          "\n"
          "Benchmarks one nexar operation over a sweep of sizes, with "
          "nccl-tests' columns.\n"
          "Run it under nexar-run (or with the NEXAR_* environment of a "
          "hand-started\n"
          "seed); rank 0 prints the rows.\n"
          "\n"
          "OP: latency bw bibw (point to point, ranks 0 and 1), allreduce "
          "iallreduce\n"
          "    bcast reduce allgather reduce_scatter alltoall gather scatter "
          "scan barrier,\n"
          "    allreduce_multi (64 tensors of mixed sizes, bucketed),\n"
          "    rpc (round trip and calls/s, rank 0 to rank 1, idle and under "
          "allreduces)\n"
          "\n"
          "  -b, --minbytes N    first size in bytes; K, M, G suffixes "
          "(default 8;\n"
          "                      rpc: the request and response size)\n"
          "  -e, --maxbytes N    last size (default: MINBYTES)\n"
          "  -f, --stepfactor F  size multiplier between rows (default 2)\n"
          "  -n, --iters N       timed iterations per size (default 20; "
          "latency 1000;\n"
          "                      rpc 500 calls and barriers per phase)\n"
          "  -w, --warmup N      untimed iterations first (default 5; latency "
          "100,\n"
          "                      rpc 100)\n"
          "  -c, --check N       checked runs per size, 0 = none (default 1)\n"
          "  -d, --datatype T    int8 uint8 int32 uint32 int64 uint64 "
          "half|float16\n"
          "                      float|float32 double|float64 bfloat16|bf16 "
          "(default float)\n"
          "  -o, --op R          sum prod max min avg band bor bxor (default "
          "sum)\n"
          "  -r, --root R        root of bcast, reduce, gather, scatter "
          "(default 0)\n"
          "  -W, --window N      messages per iteration of bw and bibw "
          "(default 64;\n"
          "                      rpc: calls in flight for calls/s)\n"
          "  -L, --load N        rpc: bytes of the allreduces of the load "
          "(default 16M)\n"
          "  -R, --ratio R       allreduce_topk, allreduce_randk: fraction of "
          "the\n"
          "                      elements each rank sends, in (0, 1] "
          "(default 0.01)\n"
          "  -J, --json FILE     rank 0 also writes the rows to FILE (a JSON "
          "array;\n"
          "                      not rpc)\n"
          "  -P, --percentiles   time each iteration on its own too; rank 0 "
          "prints\n"
          "                      a line of its p10 p50 p90 p99 and max "
          "after each row\n"
          "                      (not rpc)\n"
          "  -h, --help          print this help\n"
          "      --version       print the version\n"
          "\n"
          "Sizes are per-rank buffer bytes as nccl-tests defines them: "
          "allgather and\n"
          "gather the whole output, reduce_scatter and scatter the whole "
          "input, alltoall\n"
          "the whole buffer; p2p ops one message. time: mean over ranks of "
          "each rank's\n"
          "mean per iteration (latency: one way; bw, bibw: per message), min "
          "and max over\n"
          "ranks. Exit status: 0; 1 when a call failed or #wrong > 0; 2 on "
          "bad arguments.\n");
}

/* A byte count with an optional K, M or G suffix (powers of 1024). */
static int parse_size(const char *s, size_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *s < '0' || *s > '9') return -1;
  unsigned shift = 0;
  switch (*end) {
    case 'k':
    case 'K':
      shift = 10;
      end++;
      break;
    case 'm':
    case 'M':
      shift = 20;
      end++;
      break;
    case 'g':
    case 'G':
      shift = 30;
      end++;
      break;
    default:
      break;
  }
  if (*end || v > (SIZE_MAX >> shift)) return -1;
  *out = (size_t)v << shift;
  return 0;
}

/* Returns 0 to run, 1 after --help, 2 on a usage error (message printed). */
static int parse_args(int argc, char **argv, opts_t *o) {
  static const struct option longopts[] = {
      {"minbytes", required_argument, NULL, 'b'},
      {"maxbytes", required_argument, NULL, 'e'},
      {"stepfactor", required_argument, NULL, 'f'},
      {"iters", required_argument, NULL, 'n'},
      {"warmup", required_argument, NULL, 'w'},
      {"check", required_argument, NULL, 'c'},
      {"datatype", required_argument, NULL, 'd'},
      {"op", required_argument, NULL, 'o'},
      {"root", required_argument, NULL, 'r'},
      {"window", required_argument, NULL, 'W'},
      {"json", required_argument, NULL, 'J'},
      {"load", required_argument, NULL, 'L'},
      {"ratio", required_argument, NULL, 'R'},
      {"percentiles", no_argument, NULL, 'P'},
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},
      {NULL, 0, NULL, 0},
  };
  memset(o, 0, sizeof *o);
  o->minb = 8;
  o->factor = 2;
  o->iters = o->warmup = -1;
  o->check = 1;
  o->window = 64;
  o->load = (size_t)16 << 20;
  o->type = perf_type_find("float");
  o->redop = NEXAR_SUM;
  o->ratio = 0.01;
  int have_max = 0, c, factor = 2;
  const char *bad = NULL;
  while (!bad && (c = getopt_long(argc, argv, "b:e:f:n:w:c:d:o:r:W:J:L:R:Ph",
                                  longopts, NULL)) != -1) {
    switch (c) {
      case 'b':
        if (parse_size(optarg, &o->minb)) bad = "-b wants a byte count";
        break;
      case 'e':
        if (parse_size(optarg, &o->maxb)) bad = "-e wants a byte count";
        have_max = 1;
        break;
      case 'f':
        if (cli_parse_int(optarg, 2, 1 << 20, &factor))
          bad = "-f wants a factor >= 2";
        o->factor = (size_t)factor;
        break;
      case 'n':
        if (cli_parse_int(optarg, 1, INT_MAX, &o->iters))
          bad = "-n wants a number >= 1";
        break;
      case 'w':
        if (cli_parse_int(optarg, 0, INT_MAX, &o->warmup))
          bad = "-w wants a number >= 0";
        break;
      case 'c':
        if (cli_parse_int(optarg, 0, INT_MAX, &o->check))
          bad = "-c wants a number >= 0";
        break;
      case 'd':
        if (!(o->type = perf_type_find(optarg))) bad = "unknown -d type";
        break;
      case 'o':
        if (perf_redop_find(optarg, &o->redop)) bad = "unknown -o op";
        break;
      case 'r':
        if (cli_parse_int(optarg, 0, INT_MAX, &o->root))
          bad = "-r wants a rank >= 0";
        break;
      case 'W':
        if (cli_parse_int(optarg, 1, MAX_WINDOW, &o->window))
          bad = "-W wants a number from 1 to 4096";
        break;
      case 'J':
        o->json = optarg;
        break;
      case 'L':
        if (parse_size(optarg, &o->load) || o->load < sizeof(float))
          bad = "-L wants a byte count >= 4";
        break;
      case 'R': {
        char *end;
        errno = 0;
        o->ratio = strtod(optarg, &end);
        if (errno || end == optarg || *end || !(o->ratio > 0 && o->ratio <= 1))
          bad = "-R wants a ratio in (0, 1]";
        break;
      }
      case 'P':
        o->pct = 1;
        break;
      case 'h':
        usage(stdout);
        return 1;
      case 'V':
        cli_print_version("nexar-perf");
        return 1;
      default: /* getopt has said what was wrong */
        usage(stderr);
        return 2;
    }
  }
  if (bad) {
    fprintf(stderr, "nexar-perf: %s, not '%s'\n", bad, optarg);
    usage(stderr);
    return 2;
  }
  if (optind != argc - 1) {
    fprintf(stderr, "nexar-perf: %s\n",
            optind >= argc ? "no OP given" : "more than one OP given");
    usage(stderr);
    return 2;
  }
  o->rpc = !strcmp(argv[optind], "rpc");
  if (!o->rpc && !(o->op = perf_op_find(argv[optind]))) {
    fprintf(stderr, "nexar-perf: unknown OP '%s'\n", argv[optind]);
    usage(stderr);
    return 2;
  }
  if (!have_max) o->maxb = o->minb;
  if (o->maxb < o->minb) {
    fprintf(stderr, "nexar-perf: -e %zu is smaller than -b %zu\n", o->maxb,
            o->minb);
    return 2;
  }
  int latency = o->rpc || (o->op->flags & PERF_F_HALF_RTT) != 0;
  if (o->iters < 0) o->iters = o->rpc ? 500 : latency ? 1000 : 20;
  if (o->warmup < 0) o->warmup = latency ? 100 : 5;
  if (o->rpc && o->json) {
    fprintf(stderr, "nexar-perf: rpc writes no JSON (--json)\n");
    return 2;
  }
  if (o->rpc && o->pct) {
    fprintf(stderr, "nexar-perf: rpc prints no percentiles (-P)\n");
    return 2;
  }
  return 0;
}

/* ---- Measuring one size. */

/* Inputs from perf_input, outputs poisoned with 0xff bytes (NaN or all ones,
 * never an expected value), then the op's own adjustments. */
static void fill(perf_t *p, const perf_op_t *op) {
  int reducing = (op->flags & PERF_F_REDOP) != 0;
  for (size_t j = 0; j < p->send_elems; j++)
    perf_store(p, p->sendbuf, j, perf_input(p, reducing, p->rank, j));
  memset(p->recvbuf, 0xff, p->recv_elems * p->type->size);
  if (op->prepare) op->prepare(p);
}

static long long count_wrong(const perf_t *p, const perf_op_t *op) {
  long long wrong = 0;
  if (!op->expect) return 0;
  for (size_t i = 0; i < p->out_elems; i++)
    if (!perf_equal(p, p->recvbuf, i, op->expect(p, i))) wrong++;
  return wrong;
}

/* Barrier, then |iters| back-to-back iterations: *us = mean per iteration.
 * With |each| (iters entries), each iteration's own time too. */
static int time_loop(perf_t *p, const perf_op_t *op, int iters, double *us,
                     double *each) {
  PERF_CALL(p, "nexar_barrier", nexar_barrier(p->comm));
  double t0 = now_us(), t = t0;
  for (int i = 0; i < iters; i++) {
    int rc = op->run(p);
    if (rc) return rc;
    if (each) {
      double t1 = now_us();
      each[i] = t1 - t;
      t = t1;
    }
  }
  *us = (now_us() - t0) / iters;
  return 0;
}

/* row->pct from the |n| iteration times |each| (sorted here), each
 * divided by |scale| as the row's time is. */
static void set_pct(row_t *row, double *each, int n, double scale) {
  static const double at[4] = {0.10, 0.50, 0.90, 0.99};
  perf_sort_times(each, n);
  for (int k = 0; k < 4; k++)
    row->pct[k] = perf_quantile(each, n, at[k]) / scale;
  row->pct[4] = each[n - 1] / scale;
  row->has_pct = 1;
}

/* Written by the dummy computation so that the compiler keeps it. */
static volatile double spin_sink;

/* OSU's overlap test for non-blocking collectives: post, compute for about
 * |t_pure| us, wait. *ovl = mean time of the whole, *comp = mean compute
 * time. */
static int overlap_loop(perf_t *p, const perf_op_t *op, int iters,
                        double t_pure, double *ovl, double *comp) {
  double busy = 0;
  PERF_CALL(p, "nexar_barrier", nexar_barrier(p->comm));
  double t0 = now_us();
  for (int i = 0; i < iters; i++) {
    nexar_req_t *req = NULL;
    int rc = op->post(p, &req);
    if (rc) return rc;
    /* The dummy computation: spin on the clock. */
    double c0 = now_us(), c1;
    while ((c1 = now_us()) - c0 < t_pure) spin_sink += 1.0;
    busy += c1 - c0;
    PERF_CALL(p, "nexar_wait", nexar_wait(&req, NULL));
  }
  *ovl = (now_us() - t0) / iters;
  *comp = busy / iters;
  return 0;
}

static int measure(const opts_t *o, perf_t *p, size_t bytes, row_t *row) {
  const perf_op_t *op = o->op;
  perf_layout(p, op, bytes);
  memset(row, 0, sizeof *row);
  row->size = p->size;
  row->count = p->count;

  fill(p, op);
  for (int i = 0; i < o->warmup; i++) {
    int rc = op->run(p);
    if (rc) return rc;
  }
  double t_iter = 0, t_ovl = 0, t_comp = 0;
  uint64_t b0 = 0, b1 = 0;
  double *each = NULL;
  if (o->pct && p->rank == 0 &&
      !(each = malloc((size_t)o->iters * sizeof *each))) {
    fprintf(stderr, "nexar-perf: rank 0: cannot allocate %d times for -P\n",
            o->iters);
    return 1;
  }
  nexar_comm_bytes_sent(p->comm, &b0);
  int rc = time_loop(p, op, o->iters, &t_iter, each);
  if (rc) {
    free(each);
    return rc;
  }
  nexar_comm_bytes_sent(p->comm, &b1);
  double wire = (double)(b1 - b0) / o->iters;
  double t = t_iter, scale = 1;
  if (op->flags & PERF_F_HALF_RTT) scale *= 2;
  if (op->flags & PERF_F_WINDOWED) scale *= p->window;
  t /= scale;
  if (each) set_pct(row, each, o->iters, scale);
  free(each);
  if (op->post) {
    rc = overlap_loop(p, op, o->iters, t_iter, &t_ovl, &t_comp);
    if (rc) return rc;
  }

  /* A rank that sits a point-to-point op out has no output to check and
   * must not fill 2 x size of buffers while ranks 0 and 1 are still in
   * their timed loop: at np 4 on 2 CPUs the fills of ranks 2 and 3 took the
   * CPUs from them, and bw 64 MiB read 4.9-7.6 GB/s instead of 13. */
  long long wrong = 0;
  for (int i = 0; p->active && i < o->check; i++) {
    fill(p, op);
    if ((rc = op->run(p))) return rc;
    wrong += count_wrong(p, op);
  }

  /* Combine over the ranks that take part (p2p: ranks 0 and 1). */
  int a = p->active;
  double sums[6] = {a ? t : 0,      a,           (double)wrong, a ? t_ovl : 0,
                    a ? t_comp : 0, a ? wire : 0};
  double maxs[2] = {a ? t : -DBL_MAX, a ? -t : -DBL_MAX};
  PERF_CALL(p, "nexar_allreduce (statistics)",
            nexar_allreduce(p->comm, NEXAR_IN_PLACE, sums, 6, NEXAR_FLOAT64,
                            NEXAR_SUM));
  PERF_CALL(p, "nexar_allreduce (statistics)",
            nexar_allreduce(p->comm, NEXAR_IN_PLACE, maxs, 2, NEXAR_FLOAT64,
                            NEXAR_MAX));
  row->t_avg = sums[0] / sums[1];
  row->t_max = maxs[0];
  row->t_min = -maxs[1];
  row->wrong = o->check ? (long long)sums[2] : -1;
  row->wire = sums[5] / sums[1];
  double moved = (double)row->size;
  if (op->flags & PERF_F_BOTH_WAYS) moved *= 2;
  row->algbw = row->t_avg > 0 ? moved / row->t_avg / 1e3 : 0;
  row->busbw = row->algbw * op->busbw_factor(p->n);
  if (op->post) {
    row->has_overlap = 1;
    row->t_ovl = sums[3] / sums[1];
    row->t_comp = sums[4] / sums[1];
    double ov = row->t_avg > 0
                    ? 100.0 * (1.0 - (row->t_ovl - row->t_comp) / row->t_avg)
                    : 0;
    row->overlap = ov > 0 ? ov : 0;
  }
  return 0;
}

/* ---- Report. */

#define COLS "%12s  %12s  %8s  %6s  %6s  %9s  %9s  %9s  %7s  %7s  %6s"

static void print_header(const opts_t *o, const perf_t *p) {
  const perf_op_t *op = o->op;
  printf("# nexar-perf %s: %d ranks, nexar %s\n", op->name, p->n,
         nexar_version());
  printf("# -b %zu -e %zu -f %zu -n %d -w %d -c %d -d %s -o %s -r %d", o->minb,
         o->maxb, o->factor, o->iters, o->warmup, o->check, o->type->name,
         perf_redop_name(o->redop), o->root);
  if (op->flags & PERF_F_WINDOWED) printf(" -W %d", o->window);
  printf("\n# busbw = algbw x %.4f", op->busbw_factor(p->n));
  if (op->flags & PERF_F_HALF_RTT) printf("; time is one way (half RTT)");
  if (op->flags & PERF_F_WINDOWED)
    printf("; time is per message (window %d)", o->window);
  if (op->flags & PERF_F_BOTH_WAYS) printf("; algbw counts both directions");
  printf("\n");
  printf(COLS, "#       size", "count", "type", "redop", "root", "time", "min",
         "max", "algbw", "busbw", "#wrong");
  if (op->post) printf("  %9s  %9s  %8s", "ovl_time", "compute", "overlap");
  if (op->flags & PERF_F_COMPRESS) printf("  %6s  %10s", "ratio", "wire");
  printf("\n");
  printf(COLS, "#        (B)", "(elements)", "", "", "", "(us)", "(us)", "(us)",
         "(GB/s)", "(GB/s)", "");
  if (op->post) printf("  %9s  %9s  %8s", "(us)", "(us)", "(%)");
  if (op->flags & PERF_F_COMPRESS) printf("  %6s  %10s", "", "(B/rank)");
  printf("\n");
  fflush(stdout);
}

static const char *redop_col(const opts_t *o) {
  return (o->op->flags & PERF_F_REDOP) ? perf_redop_name(o->redop) : "none";
}

static int root_col(const opts_t *o) {
  return (o->op->flags & PERF_F_ROOT) ? o->root : -1;
}

static void print_row(const opts_t *o, const row_t *r) {
  char wrong[32];
  if (r->wrong < 0)
    snprintf(wrong, sizeof wrong, "N/A");
  else
    snprintf(wrong, sizeof wrong, "%lld", r->wrong);
  printf("%12zu  %12zu  %8s  %6s  %6d  %9.2f  %9.2f  %9.2f  %7.3f  %7.3f  %6s",
         r->size, r->count, o->type->name, redop_col(o), root_col(o), r->t_avg,
         r->t_min, r->t_max, r->algbw, r->busbw, wrong);
  if (r->has_overlap)
    printf("  %9.2f  %9.2f  %8.1f", r->t_ovl, r->t_comp, r->overlap);
  if (o->op->flags & PERF_F_COMPRESS)
    printf("  %6.4f  %10.0f", o->ratio, r->wire);
  printf("\n");
  if (r->has_pct)
    printf(
        "#   per iteration on rank 0 (us): p10 %.2f  p50 %.2f  p90 %.2f  "
        "p99 %.2f  max %.2f\n",
        r->pct[0], r->pct[1], r->pct[2], r->pct[3], r->pct[4]);
  fflush(stdout);
}

/* A JSON number, or null for a non-finite value. */
static void json_num(FILE *f, const char *key, double v) {
  if (isfinite(v))
    fprintf(f, ", \"%s\": %.6g", key, v);
  else
    fprintf(f, ", \"%s\": null", key);
}

static int write_json(const opts_t *o, const perf_t *p, const row_t *rows,
                      int nrows) {
  FILE *f = fopen(o->json, "w");
  if (!f) {
    fprintf(stderr, "nexar-perf: cannot write %s: %s\n", o->json,
            strerror(errno));
    return 1;
  }
  fprintf(f, "[");
  for (int i = 0; i < nrows; i++) {
    const row_t *r = &rows[i];
    fprintf(f,
            "%s\n  {\"op\": \"%s\", \"nranks\": %d, \"size\": %zu, "
            "\"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", "
            "\"root\": %d, \"iters\": %d, \"warmup\": %d",
            i ? "," : "", o->op->name, p->n, r->size, r->count, o->type->name,
            redop_col(o), root_col(o), o->iters, o->warmup);
    if (o->op->flags & PERF_F_WINDOWED)
      fprintf(f, ", \"window\": %d", o->window);
    json_num(f, "time_us", r->t_avg);
    json_num(f, "time_min_us", r->t_min);
    json_num(f, "time_max_us", r->t_max);
    json_num(f, "algbw_GBps", r->algbw);
    json_num(f, "busbw_GBps", r->busbw);
    if (r->wrong < 0)
      fprintf(f, ", \"wrong\": null");
    else
      fprintf(f, ", \"wrong\": %lld", r->wrong);
    if (r->has_overlap) {
      json_num(f, "ovl_time_us", r->t_ovl);
      json_num(f, "compute_us", r->t_comp);
      json_num(f, "overlap_pct", r->overlap);
    }
    if (o->op->flags & PERF_F_COMPRESS) {
      json_num(f, "ratio", o->ratio);
      json_num(f, "wire_bytes_per_rank", r->wire);
    }
    fprintf(f, "}");
  }
  fprintf(f, "\n]\n");
  if (fclose(f)) {
    fprintf(stderr, "nexar-perf: cannot write %s: %s\n", o->json,
            strerror(errno));
    return 1;
  }
  return 0;
}

/* ---- The sweep. */

/* The sizes of the sweep: minb, minb x f, ... up to maxb (one size for ops
 * without data). Returns how many; fills |out| when not NULL. */
static int sweep(const opts_t *o, size_t *out) {
  int k = 0;
  size_t s = o->minb;
  for (;;) {
    if (out) out[k] = s;
    k++;
    if (o->op->layout == PERF_NONE || s >= o->maxb) break;
    size_t next = s ? s * o->factor : 1;
    if (next / o->factor != s && s) break; /* overflow */
    if (next > o->maxb) break;
    s = next;
  }
  return k;
}

static int run_sweep(const opts_t *o, perf_t *p) {
  int nsizes = sweep(o, NULL);
  size_t *sizes = calloc((size_t)nsizes, sizeof *sizes);
  row_t *rows = calloc((size_t)nsizes, sizeof *rows);
  /* The buffers for the largest size serve every row. */
  perf_layout(p, o->op, o->maxb);
  size_t es = p->type->size;
  p->sendbuf = malloc(p->send_elems * es + 64);
  p->recvbuf = malloc(p->recv_elems * es + 64);
  p->reqs = calloc(2 * (size_t)o->window, sizeof *p->reqs);
  if (!sizes || !rows || !p->sendbuf || !p->recvbuf || !p->reqs) {
    fprintf(stderr,
            "nexar-perf: rank %d: cannot allocate buffers for %zu "
            "bytes\n",
            p->rank, o->maxb);
    free(p->reqs);
    free(p->recvbuf);
    free(p->sendbuf);
    free(rows);
    free(sizes);
    return 1;
  }
  sweep(o, sizes);

  if (p->rank == 0) print_header(o, p);
  int status = 0, done = 0;
  long long wrong = 0;
  double busbw_sum = 0;
  for (; done < nsizes; done++) {
    if (measure(o, p, sizes[done], &rows[done])) {
      status = 1;
      break;
    }
    if (rows[done].wrong > 0) wrong += rows[done].wrong;
    busbw_sum += rows[done].busbw;
    if (p->rank == 0) print_row(o, &rows[done]);
  }
  if (wrong > 0) status = 1;
  if (p->rank == 0) {
    if (done == nsizes) {
      if (o->check)
        printf("# #wrong total: %lld %s\n", wrong, wrong ? "FAILED" : "OK");
      else
        printf("# #wrong total: N/A (not checked)\n");
      if (o->op->layout != PERF_NONE)
        printf("# Avg bus bandwidth: %.3f GB/s\n", busbw_sum / nsizes);
      fflush(stdout);
    }
    if (o->json && write_json(o, p, rows, done)) status = 1;
  }
  /* Keep the other ranks until rank 0 has reported: under nexar-run a rank
   * that exits 1 (for #wrong) gets the others stopped at once. */
  if (done == nsizes && nexar_barrier(p->comm) != NEXAR_OK) status = 1;
  nexar_compressor_free(&p->cp);
  free(p->reqs);
  free(p->recvbuf);
  free(p->sendbuf);
  free(rows);
  free(sizes);
  return status;
}

int main(int argc, char **argv) {
  opts_t o;
  int rc = parse_args(argc, argv, &o);
  if (rc) return rc == 1 ? 0 : 2;

  nexar_ctx_t *ctx;
  if ((rc = nexar_init(NULL, &ctx))) {
    fprintf(stderr, "nexar-perf: nexar_init: %s: %s\n", nexar_err_name(rc),
            nexar_last_error());
    return 1;
  }
  perf_t p;
  memset(&p, 0, sizeof p);
  p.comm = nexar_comm_world(ctx);
  nexar_comm_rank(p.comm, &p.rank);
  nexar_comm_size(p.comm, &p.n);
  p.type = o.type;
  p.redop = o.redop;
  p.root = o.root;
  p.window = o.window;
  p.ratio = o.ratio;
  p.opname = o.rpc ? "rpc" : o.op->name;

  int status = 0;
  if (o.root >= p.n) {
    if (p.rank == 0)
      fprintf(stderr, "nexar-perf: -r %d is not a rank of %d\n", o.root, p.n);
    status = 2;
  } else if ((o.rpc || (o.op->flags & PERF_F_P2P)) && p.n < 2) {
    if (p.rank == 0)
      fprintf(stderr, "nexar-perf: %s needs at least 2 ranks\n", p.opname);
    status = 2;
  } else if (o.rpc) {
    status = perf_rpc(&p, o.minb, o.load, o.iters, o.warmup, o.window);
  } else {
    status = run_sweep(&o, &p);
  }
  rc = nexar_finalize(ctx);
  if (rc && !status) {
    fprintf(stderr, "nexar-perf: rank %d: nexar_finalize: %s\n", p.rank,
            nexar_err_name(rc));
    status = 1;
  }
  return status;
}
