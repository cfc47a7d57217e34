/*
 * Shared pieces of nexar-perf: the datatype and reduction-op tables, the
 * deterministic input values and the result checks (perf_data.c), and the
 * table of benchmarked operations (perf_ops.c). nexar-perf.c holds the
 * command line, the timing loops and the report.
 */
#ifndef NEXAR_PERF_H
#define NEXAR_PERF_H

#include <stddef.h>
#include <stdint.h>

#include "nexar.h"

/* ---- Datatypes. */

typedef enum perf_kind {
  PERF_SINT,  /* two's-complement integer */
  PERF_UINT,  /* unsigned integer */
  PERF_FLOAT, /* IEEE binary32 or binary64 */
  PERF_HALF,  /* IEEE binary16 */
  PERF_BF16   /* bfloat16 */
} perf_kind_t;

typedef struct perf_type {
  const char *name;  /* printed name (nccl-tests spelling) */
  const char *alias; /* second accepted spelling, or NULL */
  nexar_dtype_t dtype;
  size_t size; /* bytes per element */
  perf_kind_t kind;
  int64_t limit; /* every integer 0..limit is exactly representable */
  int max_exp2;  /* 2^max_exp2 is representable (capped at 62) */
} perf_type_t;

/* The entry named |name| (or its alias), or NULL. */
const perf_type_t *perf_type_find(const char *name);

/* ---- Reduction ops. */

/* The op named |name| ("sum", "prod", ...): 0 and *op set, or -1. */
int perf_redop_find(const char *name, nexar_op_t *op);
const char *perf_redop_name(nexar_op_t op);

/* ---- One benchmark run: the world, the arguments and the buffers. */

typedef struct perf {
  nexar_comm_t *comm;
  int rank, n;
  const perf_type_t *type;
  nexar_op_t redop;
  int root;
  int window; /* messages per iteration of bw and bibw */

  /* Set per size by the op's layout (see perf_op_t). */
  size_t count;      /* the "count" column: the call's count argument */
  size_t size;       /* the "size" column in bytes */
  size_t send_elems; /* elements of sendbuf the call reads */
  size_t recv_elems; /* elements of recvbuf the call writes */
  size_t out_elems;  /* elements of recvbuf this rank checks */
  int active;        /* 1 when this rank takes part (p2p: ranks 0 and 1) */
  int peer;          /* p2p: the other rank */

  void *sendbuf, *recvbuf;
  nexar_req_t **reqs; /* room for 2 x window requests */
  /* Compressed allreduce ops (PERF_F_COMPRESS): the compression ratio
   * (-R) and the compressor, made for the current count by prepare. */
  double ratio;
  nexar_compressor_t *cp;
  size_t cp_count;
  const char *opname; /* for error messages */
} perf_t;

/* Prints "nexar-perf: rank R: WHAT: NEXAR_ERR_X: <last error>" to stderr
 * and returns rc. */
int perf_fail(const perf_t *p, const char *what, int rc);

/* Calls |x| (a nexar call returning a result code) and returns its code
 * from the enclosing function when it fails. */
#define PERF_CALL(p, what, x)                                \
  do {                                                       \
    int rc_ = (x);                                           \
    if (rc_ != NEXAR_OK) return perf_fail((p), (what), rc_); \
  } while (0)

/* ---- Input values and expected results (perf_data.c).
 *
 * Every element of every input is a small integer chosen from (rank,
 * element index, dtype, redop, world size) so that every partial result of
 * the reduction is exactly representable in the dtype: then the result is
 * the same whatever order the library combines the inputs in, and the check
 * can compare bit for bit, float16 and bfloat16 included. */

/* The input rank |k| contributes at element |i| (an integer, also for float
 * types). |reducing| selects values suited to p->redop; otherwise values
 * for copying collectives. */
int64_t perf_input(const perf_t *p, int reducing, int k, size_t i);
/* The reduction of perf_input(p, 1, k, i) over ranks k = 0..last, with the
 * AVG division by last + 1 applied. */
int64_t perf_reduced(const perf_t *p, int last, size_t i);

/* Writes |v| as element |i| of |buf| in p->type. */
void perf_store(const perf_t *p, void *buf, size_t i, int64_t v);
/* 1 when element |i| of |buf| holds exactly the encoding of |v|. */
int perf_equal(const perf_t *p, const void *buf, size_t i, int64_t v);

/* Sorts the |n| times |t| (n >= 1) in place; perf_quantile then reads the
 * |q| quantile (0 <= q <= 1) of sorted |t|: t[(n - 1) x q], rounded down. */
void perf_sort_times(double *t, int n);
double perf_quantile(const double *t, int n, double q);

/* ---- The operations (perf_ops.c). */

/* How the size given on the command line maps to the call's arguments,
 * as in nccl-tests: with c = size / (dtype size) elements, */
typedef enum perf_layout {
  PERF_FLAT,    /* count = c; send and receive c elements */
  PERF_GATHER,  /* count = c / n per rank; the output holds n x count */
  PERF_SCATTER, /* count = c / n per rank; the input holds n x count */
  PERF_ALL2ALL, /* count = c / n per peer; input and output n x count */
  PERF_NONE     /* no data (barrier); one row whatever the sizes */
} perf_layout_t;

enum {
  PERF_F_REDOP = 1u << 0,     /* takes -o (prints the redop column) */
  PERF_F_ROOT = 1u << 1,      /* takes -r (prints the root column) */
  PERF_F_P2P = 1u << 2,       /* ranks 0 and 1 only; needs 2 ranks */
  PERF_F_HALF_RTT = 1u << 3,  /* one iteration is a round trip: time / 2 */
  PERF_F_WINDOWED = 1u << 4,  /* one iteration is |window| messages */
  PERF_F_ROOT_OUT = 1u << 5,  /* only the root has output (gather, reduce) */
  PERF_F_BOTH_WAYS = 1u << 6, /* data flows both ways: algbw counts 2 x size */
  PERF_F_ONE_WAY = 1u << 7,   /* p2p data flows from rank 0 to rank 1 only */
  PERF_F_COMPRESS = 1u << 8,  /* compressed allreduce: ratio, wire columns */
};

typedef struct perf_op {
  const char *name;
  perf_layout_t layout;
  unsigned flags;
  /* busbw = algbw x busbw_factor(n) (nccl-tests doc/PERFORMANCE.md). */
  double (*busbw_factor)(int n);
  /* Optional: adjusts the buffers after the generic fill (the generic fill
   * puts perf_input values in sendbuf and poison in recvbuf). */
  void (*prepare)(perf_t *p);
  /* One timed iteration (blocking). */
  int (*run)(perf_t *p);
  /* Optional: starts the operation without waiting (non-blocking ops);
   * nexar-perf then also measures the overlap with computation. */
  int (*post)(perf_t *p, nexar_req_t **req);
  /* The value element |i| of this rank's recvbuf must hold after run(). */
  int64_t (*expect)(const perf_t *p, size_t i);
} perf_op_t;

/* The op named |name|, or NULL. */
const perf_op_t *perf_op_find(const char *name);
/* Sets p->count, size, send_elems, recv_elems, out_elems, active and peer
 * for |bytes| (the size given on the command line). */
void perf_layout(perf_t *p, const perf_op_t *op, size_t bytes);

/* ---- The rpc benchmark (perf_rpc.c). */

/* Rank 0 calls an echo handler on rank 1 with |bytes|-byte requests:
 * |warmup| untimed then |iters| timed calls one at a time, then calls/s
 * with |window| in flight, and |iters| barriers; once idle, once while
 * every rank runs |load|-byte allreduces on a communicator of its own.
 * Rank 0 prints both and their ratio. Returns 0, or 1 when a call failed
 * (the error printed). */
int perf_rpc(perf_t *p, size_t bytes, size_t load, int iters, int warmup,
             int window);

#endif /* NEXAR_PERF_H */
