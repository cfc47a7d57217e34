/*
 * ddp_digits: data-parallel training of a small neural network on the UCI
 * handwritten-digits data set, the way a distributed data-parallel (DDP) job
 * does it: every rank holds a full replica of the model, computes gradients
 * on its share of each global minibatch, and one allreduce per step combines
 * them so that every rank applies the same update.
 *
 * Model: a multilayer perceptron 64 -> 32 (tanh) -> 10 (softmax), trained
 * with cross-entropy loss by minibatch SGD with momentum. Inputs are the 64
 * pixel counts of an 8x8 image divided by 16, so they lie in [0, 1].
 *
 * Determinism: weights are initialised from a fixed seed with splitmix64 and
 * the training order is shuffled from the same generator, so every rank
 * makes the same draws; rank 0's weights are still broadcast once, as a real
 * DDP job does to rule out any divergence. Rank r of a world of size n takes
 * the samples at positions p with p % n == r of each global batch. The
 * gradient is summed per rank in float32, reduced with a float32 SUM
 * allreduce and divided by the global batch size, so runs with different
 * world sizes produce the same weights up to the order of float summation.
 * That difference stays small because the training is stable: after 30 (and
 * also 100) epochs the weights of world sizes 1 to 8, summed in either rank
 * order, differ by under 5e-7 relative to the largest weight, well inside the
 * 1e-5 that test_ddp allows, so a float64 accumulator is not needed.
 *
 * Output (rank 0): per epoch, the mean loss and accuracy on the training
 * samples as seen during the epoch (before each step's update), the accuracy
 * on the held-out set after the epoch, and the time spent in nexar calls.
 *
 * Run under nexar-run, e.g.: nexar-run -n 4 ddp_digits --epochs 30
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zlib.h>

#include "nexar.h"

#ifndef NEXAR_DATA_DIR
#define NEXAR_DATA_DIR "data"
#endif

/* Shape of the data set and of the model. */
enum {
  N_IN = 64,
  N_HID = 32,
  N_OUT = 10,
  N_SAMPLES = 1797,
  N_FIELDS = N_IN + 1,
  PIXEL_MAX = 16
};

/*
 * Layout of the flat parameter vector, which is also the layout of the file
 * written by --weights-out (raw little-endian float32, N_PARAMS = 2410
 * values, 9640 bytes):
 *   W1[j][i]  hidden x input, row-major   (32 x 64 = 2048 values)
 *   b1[j]     hidden biases               (32 values)
 *   W2[k][j]  output x hidden, row-major  (10 x 32 = 320 values)
 *   b2[k]     output biases               (10 values)
 * The gradient buffer that is allreduced has the same layout followed by two
 * more values: the summed loss and the count of correct predictions of the
 * batch, so that one collective per step carries everything.
 */
enum {
  OFF_W1 = 0,
  OFF_B1 = OFF_W1 + N_HID * N_IN,
  OFF_W2 = OFF_B1 + N_HID,
  OFF_B2 = OFF_W2 + N_OUT * N_HID,
  N_PARAMS = OFF_B2 + N_OUT,
  G_LOSS = N_PARAMS,
  G_CORRECT = N_PARAMS + 1,
  G_LEN = N_PARAMS + 2
};

/* Fixed seed shared by all ranks ("nexar" in ASCII). */
#define SEED UINT64_C(0x6e65786172)
#define MOMENTUM 0.9f
#define DEFAULT_EPOCHS 30
#define DEFAULT_BATCH 64
#define DEFAULT_LR 0.1

typedef struct dataset {
  float x[N_SAMPLES][N_IN];
  int y[N_SAMPLES];
} dataset_t;

typedef struct options {
  const char *data_path;
  const char *weights_out;
  int epochs;
  int batch;
  double lr;
  int kill_rank;  /* fault demo: this rank SIGKILLs itself ... */
  int kill_epoch; /* ... half-way through this epoch (0: never) */
  int compress;   /* 0, or NEXAR_COMPRESS_TOPK / _RANDK (--compress) */
  double ratio;   /* its compression ratio */
  int buckets;    /* --buckets: bucketed allreduce overlapping backward */
} options_t;

/* splitmix64 (Steele, Lea & Flood 2014): tiny, and identical everywhere. */
static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* Uniform in [0, 1) from the top 24 bits, exactly representable in float. */
static float rand_unit(uint64_t *state) {
  return (float)(splitmix64(state) >> 40) * (1.0f / 16777216.0f);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Parses the unsigned decimal field at *p into *out, which must be at most
 * |hi|, and advances *p past it. Signs and blanks are rejected (strtol alone
 * would accept them). */
static int parse_field(char **p, long hi, long *out) {
  char *end;
  errno = 0;
  if (**p < '0' || **p > '9') return -1;
  long v = strtol(*p, &end, 10);
  if (errno != 0 || end == *p || v > hi) return -1;
  *out = v;
  *p = end;
  return 0;
}

/*
 * Loads the digits CSV (optionally gzip-compressed): exactly N_SAMPLES lines,
 * each N_IN pixel counts in [0, 16] and then a label in [0, 9]. Anything else
 * is rejected with the file, line and field named, because a silently
 * truncated or corrupted file would only show up as a worse accuracy.
 */
static int load_digits(const char *path, dataset_t *ds) {
  gzFile f = gzopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "ddp_digits: cannot open %s: %s\n", path,
            errno ? strerror(errno) : "out of memory");
    return -1;
  }
  char line[1024];
  int n = 0;
  int rc = -1;
  for (;;) {
    if (gzgets(f, line, (int)sizeof line) == NULL) {
      int zerr;
      const char *msg = gzerror(f, &zerr);
      if (zerr != Z_OK && zerr != Z_STREAM_END) {
        fprintf(stderr, "ddp_digits: %s: read error after line %d: %s\n", path,
                n, msg);
        goto out;
      }
      break;
    }
    size_t len = strlen(line);
    if (len == 0 || line[len - 1] != '\n') {
      /* No newline: the buffer was too short, the last line of the file has
       * none, or the stream broke off (a truncated gzip file), in which case
       * the partial line must not be parsed as if it were complete. */
      int zerr;
      const char *msg = gzerror(f, &zerr);
      if (zerr != Z_OK && zerr != Z_STREAM_END) {
        fprintf(stderr, "ddp_digits: %s:%d: read error: %s\n", path, n + 1,
                msg);
        goto out;
      }
      if (len == sizeof line - 1) {
        fprintf(stderr, "ddp_digits: %s:%d: line too long\n", path, n + 1);
        goto out;
      }
    }
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
      line[--len] = '\0';
    if (len == 0) {
      fprintf(stderr, "ddp_digits: %s:%d: empty line\n", path, n + 1);
      goto out;
    }
    if (n >= N_SAMPLES) {
      fprintf(stderr, "ddp_digits: %s: more than %d lines\n", path, N_SAMPLES);
      goto out;
    }
    char *p = line;
    for (int k = 0; k < N_FIELDS; k++) {
      int is_label = k == N_IN;
      int hi = is_label ? N_OUT - 1 : PIXEL_MAX;
      long v;
      if (parse_field(&p, hi, &v) != 0) {
        fprintf(stderr,
                "ddp_digits: %s:%d: field %d: expected an integer in "
                "[0, %d]\n",
                path, n + 1, k + 1, hi);
        goto out;
      }
      if (is_label && *p != '\0') {
        fprintf(stderr, "ddp_digits: %s:%d: junk after field %d\n", path, n + 1,
                N_FIELDS);
        goto out;
      }
      if (!is_label && *p != ',') {
        fprintf(stderr, "ddp_digits: %s:%d: field %d: %s\n", path, n + 1, k + 1,
                *p == '\0' ? "line ends early (65 fields expected)"
                           : "unexpected character after the value");
        goto out;
      }
      if (is_label) {
        ds->y[n] = (int)v;
      } else {
        ds->x[n][k] = (float)v / (float)PIXEL_MAX;
        p++;
      }
    }
    n++;
  }
  if (n != N_SAMPLES) {
    fprintf(stderr, "ddp_digits: %s: %d lines, expected %d\n", path, n,
            N_SAMPLES);
    goto out;
  }
  rc = 0;
out:
  gzclose(f);
  return rc;
}

/* Xavier/Glorot uniform initialisation, zero biases. */
static void init_params(float *w, uint64_t *rng) {
  float a1 = sqrtf(6.0f / (float)(N_IN + N_HID));
  float a2 = sqrtf(6.0f / (float)(N_HID + N_OUT));
  memset(w, 0, N_PARAMS * sizeof *w);
  for (int i = 0; i < N_HID * N_IN; i++)
    w[OFF_W1 + i] = (2.0f * rand_unit(rng) - 1.0f) * a1;
  for (int i = 0; i < N_OUT * N_HID; i++)
    w[OFF_W2 + i] = (2.0f * rand_unit(rng) - 1.0f) * a2;
}

/* Forward pass of one sample: hidden activations in h, logits in z. Returns
 * the predicted class. */
static int forward(const float *w, const float *x, float *h, float *z) {
  for (int j = 0; j < N_HID; j++) {
    const float *row = w + OFF_W1 + j * N_IN;
    float a = w[OFF_B1 + j];
    for (int i = 0; i < N_IN; i++) a += row[i] * x[i];
    h[j] = tanhf(a);
  }
  int best = 0;
  for (int k = 0; k < N_OUT; k++) {
    const float *row = w + OFF_W2 + k * N_HID;
    float a = w[OFF_B2 + k];
    for (int j = 0; j < N_HID; j++) a += row[j] * h[j];
    z[k] = a;
    if (a > z[best]) best = k;
  }
  return best;
}

/* The gradient's layers in the order the backward pass finishes them, as
 * the tensors of the bucketed allreduce (--buckets): the output layer's
 * weights and biases with the loss and correct count after them, then the
 * hidden biases, then the hidden weights. */
enum { T_OUT, T_B1, T_W1, N_TENSORS };
static const int t_off[N_TENSORS] = {OFF_W2, OFF_B1, OFF_W1};
static const int t_len[N_TENSORS] = {G_LEN - OFF_W2, N_HID, N_HID *N_IN};

/*
 * Adds to g the gradient of the cross-entropy loss, the loss and the count of
 * correct predictions over this rank's share of one global batch: positions
 * p of batch[0..n) with p % world == rank. g is not cleared here. The
 * backward pass goes layer by layer over the whole share (each element is
 * summed over the samples in the same order as sample by sample); with
 * |m| each layer's tensors are marked ready for the bucketed allreduce as
 * soon as they are final, so that their buckets travel while the layers
 * below are computed. Returns the first nexar_multi_ready error.
 */
static int local_gradient(const float *w, const dataset_t *ds, const int *batch,
                          int n, int rank, int world, float *g,
                          nexar_multi_t *m) {
  static float h[N_SAMPLES][N_HID], dz[N_SAMPLES][N_OUT], da[N_SAMPLES][N_HID];
  float z[N_OUT];
  int s = 0, rc = NEXAR_OK;
  for (int p = rank; p < n; p += world, s++) {
    int y = ds->y[batch[p]];
    int pred = forward(w, ds->x[batch[p]], h[s], z);
    /* Softmax and loss through log-sum-exp, shifted by the largest logit so
     * that exp cannot overflow. */
    float zmax = z[pred];
    float sum = 0.0f;
    for (int k = 0; k < N_OUT; k++) {
      dz[s][k] = expf(z[k] - zmax);
      sum += dz[s][k];
    }
    for (int k = 0; k < N_OUT; k++) dz[s][k] /= sum;
    g[G_LOSS] += logf(sum) + zmax - z[y];
    g[G_CORRECT] += pred == y ? 1.0f : 0.0f;
    dz[s][y] -= 1.0f;
  }
  for (int q = 0; q < s; q++)
    for (int k = 0; k < N_OUT; k++) {
      float *gw = g + OFF_W2 + k * N_HID;
      for (int j = 0; j < N_HID; j++) gw[j] += dz[q][k] * h[q][j];
      g[OFF_B2 + k] += dz[q][k];
    }
  if (m) rc = nexar_multi_ready(m, T_OUT);
  for (int q = 0; q < s; q++)
    for (int j = 0; j < N_HID; j++) {
      float dh = 0.0f;
      for (int k = 0; k < N_OUT; k++)
        dh += w[OFF_W2 + k * N_HID + j] * dz[q][k];
      da[q][j] = dh * (1.0f - h[q][j] * h[q][j]);
      g[OFF_B1 + j] += da[q][j];
    }
  int r2 = m ? nexar_multi_ready(m, T_B1) : NEXAR_OK;
  for (int p = rank, q = 0; q < s; p += world, q++) {
    const float *x = ds->x[batch[p]];
    for (int j = 0; j < N_HID; j++) {
      float *gw = g + OFF_W1 + j * N_IN;
      for (int i = 0; i < N_IN; i++) gw[i] += da[q][j] * x[i];
    }
  }
  int r3 = m ? nexar_multi_ready(m, T_W1) : NEXAR_OK;
  return rc < 0 ? rc : r2 < 0 ? r2 : r3;
}

/* Fisher-Yates shuffle. The modulo bias of splitmix64 % n is below 1e-16
 * for these sizes and, more to the point, the same on every rank. */
static void shuffle(int *a, int n, uint64_t *rng) {
  for (int i = n - 1; i > 0; i--) {
    int j = (int)(splitmix64(rng) % (uint64_t)(i + 1));
    int t = a[i];
    a[i] = a[j];
    a[j] = t;
  }
}

/* Writes the parameters as raw little-endian float32, byte by byte so that
 * the file is the same on a big-endian host. */
static int write_weights(const char *path, const float *w) {
  FILE *f = fopen(path, "wb");
  if (f == NULL) {
    fprintf(stderr, "ddp_digits: cannot create %s: %s\n", path,
            strerror(errno));
    return -1;
  }
  for (int i = 0; i < N_PARAMS; i++) {
    uint32_t u;
    unsigned char b[4];
    memcpy(&u, &w[i], sizeof u);
    for (int k = 0; k < 4; k++) b[k] = (unsigned char)(u >> (8 * k));
    if (fwrite(b, 1, sizeof b, f) != sizeof b) break;
  }
  if (ferror(f) | (fclose(f) != 0)) {
    fprintf(stderr, "ddp_digits: cannot write %s: %s\n", path, strerror(errno));
    return -1;
  }
  return 0;
}

static void usage(FILE *out) {
  fprintf(out,
          "usage: ddp_digits [options]\n"
          "Data-parallel training of a 64-32-10 MLP on the UCI digits data;\n"
          "run it under nexar-run (e.g. nexar-run -n 4 ddp_digits).\n"
          "  --data PATH         digits CSV, gzip or plain (default: $%s,\n"
          "                      else %s)\n"
          "  --epochs N          training epochs (default %d)\n"
          "  --batch N           global minibatch size (default %d)\n"
          "  --lr X              learning rate (default %g, momentum %g)\n"
          "  --weights-out FILE  rank 0 writes the final parameters as raw\n"
          "                      little-endian float32 (W1, b1, W2, b2)\n"
          "  --compress KIND:R   compressed gradient allreduce: topk:R or\n"
          "                      randk:R sends a fraction R of the gradient\n"
          "                      per rank and step, with error feedback\n"
          "  --buckets           allreduce the gradient in buckets\n"
          "                      (NEXAR_BUCKET_BYTES) as the backward pass\n"
          "                      finishes each layer, overlapping the\n"
          "                      communication with the layers below\n"
          "  --kill-rank R --kill-epoch E\n"
          "                      fault demo: rank R kills itself (SIGKILL)\n"
          "                      half-way through epoch E; with\n"
          "                      NEXAR_RECOVERY=automatic the others go on\n"
          "  -h, --help          show this help\n",
          "NEXAR_DIGITS", NEXAR_DATA_DIR "/digits.csv.gz", DEFAULT_EPOCHS,
          DEFAULT_BATCH, DEFAULT_LR, (double)MOMENTUM);
}

static int parse_int(const char *s, int lo, int hi, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

/* Returns 0 to go on, 1 to exit successfully (--help), 2 on a usage error. */
static int parse_options(int argc, char **argv, options_t *o) {
  static const struct option longopts[] = {
      {"data", required_argument, NULL, 'd'},
      {"epochs", required_argument, NULL, 'e'},
      {"batch", required_argument, NULL, 'b'},
      {"lr", required_argument, NULL, 'l'},
      {"weights-out", required_argument, NULL, 'w'},
      {"kill-rank", required_argument, NULL, 'K'},
      {"kill-epoch", required_argument, NULL, 'E'},
      {"compress", required_argument, NULL, 'C'},
      {"buckets", no_argument, NULL, 'B'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    char *end;
    switch (c) {
      case 'd':
        o->data_path = optarg;
        break;
      case 'e':
        if (parse_int(optarg, 1, 1000000, &o->epochs) != 0) {
          fprintf(stderr, "ddp_digits: bad --epochs '%s'\n", optarg);
          return 2;
        }
        break;
      case 'b':
        if (parse_int(optarg, 1, 1 << 20, &o->batch) != 0) {
          fprintf(stderr, "ddp_digits: bad --batch '%s'\n", optarg);
          return 2;
        }
        break;
      case 'l':
        errno = 0;
        o->lr = strtod(optarg, &end);
        if (errno != 0 || end == optarg || *end != '\0' || !(o->lr > 0.0) ||
            !isfinite(o->lr)) {
          fprintf(stderr, "ddp_digits: bad --lr '%s'\n", optarg);
          return 2;
        }
        break;
      case 'w':
        o->weights_out = optarg;
        break;
      case 'K':
      case 'E':
        if (parse_int(optarg, 0, 1 << 20,
                      c == 'K' ? &o->kill_rank : &o->kill_epoch) != 0) {
          fprintf(stderr, "ddp_digits: bad --%s '%s'\n",
                  c == 'K' ? "kill-rank" : "kill-epoch", optarg);
          return 2;
        }
        break;
      case 'C': {
        const char *r = strchr(optarg, ':');
        o->compress = !r                              ? 0
                      : !strncmp(optarg, "topk:", 5)  ? NEXAR_COMPRESS_TOPK
                      : !strncmp(optarg, "randk:", 6) ? NEXAR_COMPRESS_RANDK
                                                      : 0;
        o->ratio = r ? strtod(r + 1, &end) : 0.0;
        if (!o->compress || *end != '\0' ||
            !(o->ratio > 0.0 && o->ratio <= 1.0)) {
          fprintf(stderr, "ddp_digits: bad --compress '%s'\n", optarg);
          return 2;
        }
        break;
      }
      case 'B':
        o->buckets = 1;
        break;
      case 'h':
        usage(stdout);
        return 1;
      default:
        usage(stderr);
        return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "ddp_digits: unexpected argument '%s'\n", argv[optind]);
    usage(stderr);
    return 2;
  }
  if (o->compress && o->buckets) {
    fprintf(stderr,
            "ddp_digits: --compress and --buckets do not combine "
            "(the compressor takes the whole gradient at once)\n");
    return 2;
  }
  return 0;
}

/* Prints a failed nexar call with the library's message and context. */
static int nexar_fail(const char *what, int rank, int rc,
                      const nexar_comm_t *comm) {
  const char *detail =
      comm != NULL ? nexar_comm_last_error(comm) : nexar_last_error();
  char who[32] = "";
  if (rank >= 0) snprintf(who, sizeof who, "rank %d: ", rank);
  fprintf(stderr, "ddp_digits: %s%s failed: %s%s%s\n", who, what,
          nexar_strerror(rc), detail[0] != '\0' ? ": " : "", detail);
  return 1;
}

/*
 * Held-out accuracy: the held-out set is split across ranks like a batch and
 * the correct counts are allreduced, so every rank learns the result and the
 * evaluation costs 1/world of the compute. Counts up to 359 are exact in
 * float32, so the result does not depend on the world size.
 */
static int heldout_accuracy(nexar_comm_t *comm, const float *w,
                            const dataset_t *ds, const int *held, int n,
                            int rank, int world, double *comm_ms, double *acc) {
  float h[N_HID], z[N_OUT];
  float correct = 0.0f;
  for (int p = rank; p < n; p += world)
    if (forward(w, ds->x[held[p]], h, z) == ds->y[held[p]]) correct += 1.0f;
  double t0 = now_ms();
  int rc = nexar_allreduce(comm, NEXAR_IN_PLACE, &correct, 1, NEXAR_FLOAT32,
                           NEXAR_SUM);
  *comm_ms += now_ms() - t0;
  if (rc != NEXAR_OK) return rc;
  *acc = (double)correct / (double)n;
  return NEXAR_OK;
}

/* After a failed call: true when NEXAR_RECOVERY=automatic has rebuilt
 * |comm| without the failed ranks (its epoch advanced and it shrank); then
 * *rank and *world are the new ones. */
static bool rebuilt(nexar_comm_t *comm, int *rank, int *world, int rc) {
  uint32_t ep = 0;
  int old = *world;
  if ((rc != NEXAR_ERR_PEER_FAILED && rc != NEXAR_ERR_REVOKED) ||
      nexar_comm_epoch(comm, &ep) != NEXAR_OK || ep == 0)
    return false;
  nexar_comm_rank(comm, rank);
  nexar_comm_size(comm, world);
  return *world < old;
}

/* The training state at the start of an epoch: what a rollback restores. */
typedef struct snapshot {
  float w[N_PARAMS], vel[N_PARAMS];
  uint64_t rng;
  int order[N_SAMPLES];
} snapshot_t;

/* The gradient's compressor (--compress; freed by main). */
static nexar_compressor_t *cp;
/* One step's gradient with --buckets: the backward pass marks each layer
 * ready, its bucket's allreduce starts while the layers below are
 * computed, and the wait takes what is left. Adds the wait (the exposed
 * communication) to ov[0] and the buckets' whole time, from the first
 * start to the end of the wait, to ov[1] (ms). */
static int bucket_step(nexar_multi_t *mt, const float *w, const dataset_t *ds,
                       const int *batch, int n, int rank, int world, float *g,
                       double ov[2]) {
  int rr = local_gradient(w, ds, batch, n, rank, world, g, mt);
  int rc = nexar_multi_wait(mt);
  nexar_multi_info_t mi;
  nexar_multi_get_info(mt, &mi);
  ov[0] += (double)mi.wait_ns / 1e6;
  ov[1] += (double)mi.comm_ns / 1e6;
  return rc != NEXAR_OK ? rc : rr;
}

/* Runs the training on an initialised communicator. Returns the exit code. */
static int train(nexar_comm_t *comm, const options_t *o, const dataset_t *ds) {
  int rank, world, rc;
  if ((rc = nexar_comm_rank(comm, &rank)) != NEXAR_OK)
    return nexar_fail("nexar_comm_rank", -1, rc, comm);
  const int first_rank = rank;
  if ((rc = nexar_comm_size(comm, &world)) != NEXAR_OK)
    return nexar_fail("nexar_comm_size", rank, rc, comm);

  /* Fixed split: every fifth sample is held out. */
  static int train_idx[N_SAMPLES], held_idx[N_SAMPLES];
  int n_train = 0, n_held = 0;
  for (int i = 0; i < N_SAMPLES; i++) {
    if (i % 5 == 4)
      held_idx[n_held++] = i;
    else
      train_idx[n_train++] = i;
  }

  static float w[N_PARAMS], vel[N_PARAMS], g[G_LEN];
  uint64_t rng = SEED;
  init_params(w, &rng);
  nexar_multi_t *mt = NULL;
  if (o->buckets) {
    nexar_tensor_t t[N_TENSORS];
    for (int i = 0; i < N_TENSORS; i++)
      t[i] = (nexar_tensor_t){g + t_off[i], (size_t)t_len[i], NEXAR_FLOAT32};
    if ((rc = nexar_multi_create(comm, t, N_TENSORS, NEXAR_SUM, &mt)) != 0)
      return nexar_fail("nexar_multi_create", rank, rc, comm);
  }

  /* Start the clocks together; the barrier is not counted. */
  if ((rc = nexar_barrier(comm)) != NEXAR_OK)
    return nexar_fail("nexar_barrier", rank, rc, comm);
  double t_start = now_ms(), comm_total = 0.0, t0;

  t0 = now_ms();
  rc = nexar_bcast(comm, w, N_PARAMS, NEXAR_FLOAT32, 0);
  comm_total += now_ms() - t0;
  if (rc != NEXAR_OK) return nexar_fail("nexar_bcast", rank, rc, comm);

  if (o->compress &&
      (rc = nexar_compressor_create(comm, o->compress, NEXAR_FLOAT32, N_PARAMS,
                                    0, o->ratio, SEED, &cp)) != NEXAR_OK)
    return nexar_fail("nexar_compressor_create", rank, rc, comm);
  const float lr = (float)o->lr;
  int width = snprintf(NULL, 0, "%d", o->epochs);
  double acc = 0.0;
  /* Fault tolerance: a collective can succeed on some ranks and fail on
   * others (those still waiting for the failed rank), so after a failure
   * the survivors agree to restart the earliest epoch any of them is in,
   * from a snapshot taken at its start (ranks are at most one collective,
   * so at most one epoch, apart). */
  static snapshot_t snap[2];
  for (int epoch = 1; epoch <= o->epochs; epoch++) {
    snapshot_t *sp = &snap[epoch % 2];
    memcpy(sp->w, w, sizeof w);
    memcpy(sp->vel, vel, sizeof vel);
    memcpy(sp->order, train_idx, sizeof(int) * (size_t)n_train);
    sp->rng = rng;
  redo:;
    double comm_ms = 0.0, loss_sum = 0.0, correct = 0.0, ov[2] = {0, 0};
    shuffle(train_idx, n_train, &rng);
    for (int start = 0; start < n_train; start += o->batch) {
      int n = n_train - start < o->batch ? n_train - start : o->batch;
      if (epoch == o->kill_epoch && first_rank == o->kill_rank &&
          start >= n_train / 2) {
        printf("[ddp] rank %d: killing myself (SIGKILL) in epoch %d\n", rank,
               epoch);
        fflush(stdout);
        raise(SIGKILL);
      }
      memset(g, 0, sizeof g);
      if (mt) {
        double e = ov[0];
        rc = bucket_step(mt, w, ds, train_idx + start, n, rank, world, g, ov);
        comm_ms += ov[0] - e;
      } else {
        local_gradient(w, ds, train_idx + start, n, rank, world, g, NULL);
        t0 = now_ms();
        if (cp) /* the gradient compressed, the two statistics dense */
          rc = nexar_allreduce_compressed(comm, NEXAR_IN_PLACE, g, N_PARAMS,
                                          NEXAR_FLOAT32, NEXAR_SUM, cp);
        if (!cp || rc == NEXAR_OK)
          rc = nexar_allreduce(comm, NEXAR_IN_PLACE, g + (cp ? N_PARAMS : 0),
                               cp ? G_LEN - N_PARAMS : G_LEN, NEXAR_FLOAT32,
                               NEXAR_SUM);
        comm_ms += now_ms() - t0;
      }
      if (rc != NEXAR_OK) goto failed;
      loss_sum += g[G_LOSS];
      correct += g[G_CORRECT];
      /* Mean gradient over the global batch, then SGD with momentum. */
      float inv = 1.0f / (float)n;
      for (int i = 0; i < N_PARAMS; i++) {
        vel[i] = MOMENTUM * vel[i] + g[i] * inv;
        w[i] -= lr * vel[i];
      }
    }
    rc = heldout_accuracy(comm, w, ds, held_idx, n_held, rank, world, &comm_ms,
                          &acc);
    if (rc != NEXAR_OK) goto failed;
    comm_total += comm_ms;
    if (rank == 0) {
      printf(
          "epoch %*d/%d  loss %.4f  train_acc %.4f  heldout_acc %.4f  "
          "comm_ms %.1f",
          width, epoch, o->epochs, loss_sum / n_train, correct / n_train, acc,
          comm_ms);
      /* --buckets: the gradient's communication, whole and exposed (not
       * hidden behind the backward pass; comm_ms counts only this part). */
      if (mt) printf("  grad_comm_ms %.1f  exposed_ms %.1f", ov[1], ov[0]);
      printf("\n");
      fflush(stdout);
    }
    continue;
  failed:
    /* Rebuilt without the failed ranks: agree on the epoch to restart. */
    for (int tries = 0;; tries++) {
      int old_world = world;
      if (tries > world || !rebuilt(comm, &rank, &world, rc))
        return nexar_fail("nexar_allreduce", rank, rc, comm);
      int64_t at = epoch;
      rc =
          nexar_allreduce(comm, NEXAR_IN_PLACE, &at, 1, NEXAR_INT64, NEXAR_MIN);
      if (rc != NEXAR_OK) continue; /* another failure: rebuilt again */
      if (rank == 0) {
        uint32_t ep = 0;
        nexar_comm_epoch(comm, &ep);
        printf(
            "[ddp] epoch %d: %d rank(s) failed (%s); recovered, training "
            "goes on with %d ranks (communicator epoch %u) from the start "
            "of epoch %lld\n",
            epoch, old_world - world, nexar_comm_last_error(comm), world, ep,
            (long long)at);
        fflush(stdout);
      }
      sp = &snap[at % 2];
      memcpy(w, sp->w, sizeof w);
      memcpy(vel, sp->vel, sizeof vel);
      memcpy(train_idx, sp->order, sizeof(int) * (size_t)n_train);
      rng = sp->rng;
      epoch = (int)at;
      break;
    }
    goto redo;
  }
  nexar_multi_free(&mt);
  double total_ms = now_ms() - t_start;
  uint64_t sent = 0;
  nexar_comm_bytes_sent(comm, &sent);
  if (rank == 0) {
    printf(
        "final heldout_acc %.4f world %d epochs %d total_ms %.1f "
        "comm_ms %.1f bytes_sent %llu\n",
        acc, world, o->epochs, total_ms, comm_total, (unsigned long long)sent);
    fflush(stdout);
    if (o->weights_out != NULL && write_weights(o->weights_out, w) != 0)
      return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  options_t o = {
      NULL, NULL, DEFAULT_EPOCHS, DEFAULT_BATCH, DEFAULT_LR, -1, 0, 0, 0.0, 0};
  int prc = parse_options(argc, argv, &o);
  if (prc != 0) return prc == 1 ? 0 : 2;
  if (o.data_path == NULL) o.data_path = getenv("NEXAR_DIGITS");
  if (o.data_path == NULL || o.data_path[0] == '\0')
    o.data_path = NEXAR_DATA_DIR "/digits.csv.gz";

  /* Every rank reads the whole (small) file. Loading it before nexar_init
   * makes a bad file fail at once, before this rank joins the cluster; its
   * peers then fail the bootstrap with the missing rank named instead of
   * waiting in a collective. */
  static dataset_t ds;
  if (load_digits(o.data_path, &ds) != 0) return 1;

  nexar_ctx_t *ctx = NULL;
  int rc = nexar_init(NULL, &ctx);
  if (rc != NEXAR_OK) return nexar_fail("nexar_init", -1, rc, NULL);
  int status = train(nexar_comm_world(ctx), &o, &ds);
  nexar_compressor_free(&cp);
  rc = nexar_finalize(ctx);
  if (rc != NEXAR_OK && status == 0) {
    fprintf(stderr, "ddp_digits: nexar_finalize failed: %s\n",
            nexar_strerror(rc));
    status = 1;
  }
  return status;
}
