/*
 * nexar: a distributed communication runtime over QUIC.
 *
 * This is the one public header. Every function returns a nexar_result_t
 * (0 on success, a negative NEXAR_ERR_* code on failure) unless its comment
 * says otherwise. Counts are in elements of the given datatype; sizes whose
 * name ends in "bytes" are in bytes; times are in milliseconds.
 *
 * Thread-safety: every function may be called from any thread at any time
 * on a live context, unless its comment says otherwise. Calls on one
 * communicator from several threads are allowed; collectives must still be
 * called in the same order on every rank of a communicator (as in MPI).
 */
#ifndef NEXAR_H
#define NEXAR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define NEXAR_EXTERN __attribute__((visibility("default")))
#else
#define NEXAR_EXTERN
#endif

/* NEXAR_VERSION_MAJOR, _MINOR, _PATCH, _STRING and _NUMBER: the version
 * this header belongs to (generated from the build's project version). */
#include "nexar_version.h"
/* Version of the wire protocol spoken on every connection. */
#define NEXAR_PROTOCOL_VERSION 1

/* Result codes. Negative values are errors. */
typedef enum nexar_result {
  NEXAR_OK = 0,
  NEXAR_INPROGRESS = 1,           /* non-blocking operation not finished */
  NEXAR_ERR_INVALID_ARG = -1,     /* bad argument; the call had no effect */
  NEXAR_ERR_INVALID_USAGE = -2,   /* wrong call order or state */
  NEXAR_ERR_NOMEM = -3,           /* allocation failed or memory bound hit */
  NEXAR_ERR_TIMEOUT = -4,         /* deadline passed */
  NEXAR_ERR_PEER_FAILED = -5,     /* a peer is dead or unreachable */
  NEXAR_ERR_REVOKED = -6,         /* communicator revoked by another member */
  NEXAR_ERR_MISMATCH = -7,        /* ranks called different collectives */
  NEXAR_ERR_AUTH = -8,            /* authentication or certificate failure */
  NEXAR_ERR_PROTO = -9,           /* malformed frame, version mismatch */
  NEXAR_ERR_TRANSPORT = -10,      /* QUIC, TLS or socket error */
  NEXAR_ERR_CLOSED = -11,         /* object already finalized or aborted */
  NEXAR_ERR_UNSUPPORTED = -12,    /* unsupported dtype x op or feature */
  NEXAR_ERR_SYS = -13,            /* operating-system error */
  NEXAR_ERR_TRUNCATE = -14,       /* message longer than the receive buffer */
  NEXAR_ERR_DEVICE = -15,         /* a device adapter operation failed */
  NEXAR_ERR_RPC_UNKNOWN_FN = -16, /* no RPC handler for the function id */
  NEXAR_ERR_RPC_HANDLER = -17,    /* the RPC handler returned an error */
  NEXAR_ERR_RPC_BUSY = -18,       /* the callee's RPC queue was full */
  NEXAR_ERR_ABORTED = -19,        /* nexar_abort ran: only finalize works */
  NEXAR_ERR_EXCLUDED = -20,       /* this rank was declared failed (fenced) */
  NEXAR_ERR_CANCELLED = -21,      /* the request was cancelled (nexar_cancel) */
  NEXAR_ERR_INTERNAL = -100       /* bug in the library */
} nexar_result_t;

/* Static text for a result code; never NULL. Thread-safe. */
NEXAR_EXTERN const char *nexar_strerror(int code);
/* The identifier of a result code as a string ("NEXAR_ERR_TIMEOUT"). */
NEXAR_EXTERN const char *nexar_err_name(int code);
/* 1 when the communicator must be considered unusable after |code|. */
NEXAR_EXTERN int nexar_err_is_fatal(int code);

/* Datatypes, numbered as NCCL numbers them (values 10 and 11 are reserved
 * for fp8 and rejected with NEXAR_ERR_UNSUPPORTED). */
typedef enum nexar_dtype {
  NEXAR_INT8 = 0,
  NEXAR_UINT8 = 1,
  NEXAR_INT32 = 2,
  NEXAR_UINT32 = 3,
  NEXAR_INT64 = 4,
  NEXAR_UINT64 = 5,
  NEXAR_FLOAT16 = 6,
  NEXAR_FLOAT32 = 7,
  NEXAR_FLOAT64 = 8,
  NEXAR_BFLOAT16 = 9,
  NEXAR_FLOAT8_E4M3 = 10, /* reserved */
  NEXAR_FLOAT8_E5M2 = 11, /* reserved */
  NEXAR_NUM_DTYPES = 12,
  NEXAR_BYTE = NEXAR_UINT8
} nexar_dtype_t;

/* Size in bytes of one element of |dtype|, or 0 for an invalid or reserved
 * type. */
NEXAR_EXTERN size_t nexar_dtype_size(nexar_dtype_t dtype);

/* Reduction ops, NCCL order for the first five. Bitwise ops apply to integer
 * types only. AVG on integer types is the sum divided by the world size,
 * truncated toward zero. */
typedef enum nexar_op {
  NEXAR_SUM = 0,
  NEXAR_PROD = 1,
  NEXAR_MAX = 2,
  NEXAR_MIN = 3,
  NEXAR_AVG = 4,
  NEXAR_BAND = 8,
  NEXAR_BOR = 9,
  NEXAR_BXOR = 10,
  NEXAR_NUM_OPS = 11
} nexar_op_t;

/* Pass as the send buffer of a collective to operate in place (the data is
 * taken from, and the result written to, the receive buffer). A send buffer
 * equal to the receive buffer means the same. */
#define NEXAR_IN_PLACE ((void *)1)

#define NEXAR_ANY_SOURCE (-1)
#define NEXAR_ANY_TAG (-1)
/* Largest user tag. Tags are 0..NEXAR_TAG_MAX. */
#define NEXAR_TAG_MAX 0x7fffffff
/* Color of nexar_comm_split for a rank that joins no new communicator. */
#define NEXAR_UNDEFINED (-32766)
/* "Not set" for integer config fields. */
#define NEXAR_UNSET (-2147483647 - 1)

typedef struct nexar_ctx nexar_ctx_t;
typedef struct nexar_comm nexar_comm_t;
typedef struct nexar_req nexar_req_t;

/* Completion status of a receive (and of any request). */
typedef struct nexar_status {
  int source;   /* rank of the sender in the communicator */
  int tag;      /* tag of the message */
  int error;    /* result code of this request */
  size_t bytes; /* bytes received (or sent) */
  int rpc_code; /* RPC: the handler's return value (negative with
                   NEXAR_ERR_RPC_HANDLER); 0 for every other request */
} nexar_status_t;

/*
 * Configuration. Initialise with NEXAR_CONFIG_INIT, then set the fields you
 * want; every field left unset is taken from the environment (NEXAR_*
 * variables, see docs/configuration.md) or from the built-in default.
 * Precedence: this struct > environment > default.
 */
#define NEXAR_CONFIG_VERSION 1
typedef struct nexar_config {
  size_t size;             /* sizeof(nexar_config_t), set by the initializer */
  uint32_t version;        /* NEXAR_CONFIG_VERSION */
  const char *seed_addr;   /* "host:port" of the seed (NEXAR_SEED) */
  const char *secret;      /* cluster secret (NEXAR_SECRET); never logged */
  const char *secret_file; /* file holding the secret (NEXAR_SECRET_FILE) */
  int world_size;          /* expected world size (NEXAR_WORLD_SIZE) */
  int rank;                /* requested rank, or NEXAR_UNSET (NEXAR_RANK) */
  const char *bind_addr;   /* "ip" or "ip:port" to bind (NEXAR_BIND_ADDR) */
  const char
      *advertise_addr; /* "ip[:port]" given to peers (NEXAR_ADVERTISE_ADDR) */
  int bootstrap_timeout_ms; /* whole bootstrap deadline
                               (NEXAR_BOOTSTRAP_TIMEOUT_MS) */
  int op_timeout_ms; /* deadline of each blocking call (NEXAR_OP_TIMEOUT_MS) */
  /* Connection graph (NEXAR_TOPOLOGY): "full", "kregular:K" or "hypercube"
   * (docs/topology.md). Last field: read only when |size| covers it, so
   * callers built against an older header keep working. */
  const char *topology;
} nexar_config_t;

#define NEXAR_CONFIG_INIT                                                    \
  {                                                                          \
    sizeof(nexar_config_t), NEXAR_CONFIG_VERSION, NULL, NULL, NULL,          \
        NEXAR_UNSET, NEXAR_UNSET, NULL, NULL, NEXAR_UNSET, NEXAR_UNSET, NULL \
  }

/*
 * Joins the cluster: connects to the seed, authenticates with the cluster
 * secret, receives a rank and the peer list, then forms a mutually
 * authenticated QUIC connection to every peer. Blocks until the mesh is up or
 * the bootstrap deadline passes. |cfg| may be NULL (environment only).
 * On success *ctx is a new context owned by the caller (free it with
 * nexar_finalize).
 *
 * Returns NEXAR_OK; NEXAR_ERR_INVALID_ARG for a bad or missing setting (the
 * message names the variable); NEXAR_ERR_AUTH when the seed refuses the
 * secret or fails to prove it knows it; NEXAR_ERR_TIMEOUT when a bootstrap
 * phase misses the deadline (the message says how many ranks arrived and
 * which are missing); NEXAR_ERR_TRANSPORT, NEXAR_ERR_SYS, NEXAR_ERR_NOMEM.
 * Details of a failure: nexar_last_error().
 */
NEXAR_EXTERN int nexar_init(const nexar_config_t *cfg, nexar_ctx_t **ctx);

/*
 * Flushes pending sends (bounded by the op timeout), closes every connection
 * with the reason "rank R finalized", stops the progress thread and frees
 * the context and its communicators. Requests still pending fail with
 * NEXAR_ERR_CLOSED. Not to be called concurrently with other calls on |ctx|.
 * Returns NEXAR_OK, or NEXAR_ERR_TIMEOUT when the flush did not finish (the
 * context is freed all the same).
 */
NEXAR_EXTERN int nexar_finalize(nexar_ctx_t *ctx);

/*
 * Writes the flight recorder of |ctx| to the file |path| (created or
 * replaced; written whole under |path|.tmp, then renamed): JSON lines, one
 * header ({"nexar_flight":1, "rank", "world", "host", "pid", "time" in Unix
 * seconds, "capacity", "entries"}) and one line per recent operation,
 * oldest first: communicator id, epoch, this process's rank in it and its
 * size, op, collective sequence number, algorithm, dtype, count (elements;
 * bytes for send/recv), root or peer, tag, post and end times, state
 * (posted, waiting, done, failed), the error of a failed operation and the
 * ranks it waits (or waited) for. docs/debugging.md gives the format and
 * the nexar-trace tool that merges the dumps of all ranks. A dump never
 * holds message payloads or the secret.
 *
 * The recorder keeps the last NEXAR_FLIGHT_RECORDER operations (default
 * 512; 0: off, the dump then holds the header only), recorded by the
 * progress engine with a few stores per operation. It also dumps by itself
 * to "nexar-flight.RANK.HOST.PID.jsonl" in the folder of NEXAR_DEBUG_FILE
 * (when that is set): when an operation fails with NEXAR_ERR_TIMEOUT (its
 * deadline), NEXAR_ERR_PEER_FAILED or NEXAR_ERR_REVOKED (at most once a
 * second), and on SIGUSR1 (the handler is installed at nexar_init only if
 * the application has none for that signal; it sets a flag the engine
 * looks at on its next pass).
 *
 * |path| NULL: that automatic file. Returns NEXAR_OK; NEXAR_ERR_INVALID_ARG
 * when |ctx| is NULL, |path| is empty, or |path| is NULL and
 * NEXAR_DEBUG_FILE is unset; NEXAR_ERR_SYS when the file cannot be written;
 * NEXAR_ERR_NOMEM. Thread-safe (runs in the engine), also while other
 * threads wait in hung operations.
 */
NEXAR_EXTERN int nexar_flight_dump(nexar_ctx_t *ctx, const char *path);

/* The world communicator of |ctx|; owned by the context. */
NEXAR_EXTERN nexar_comm_t *nexar_comm_world(nexar_ctx_t *ctx);
/* This process's rank in |comm|. NEXAR_ERR_INVALID_ARG on NULL arguments. */
NEXAR_EXTERN int nexar_comm_rank(const nexar_comm_t *comm, int *rank);
/* Number of ranks in |comm|. NEXAR_ERR_INVALID_ARG on NULL arguments. */
NEXAR_EXTERN int nexar_comm_size(const nexar_comm_t *comm, int *size);
/*
 * The processes of this job on this host: *local_rank (0 .. *local_size - 1)
 * is this process's place among them in world-rank order, *local_size how
 * many there are. Taken from NEXAR_LOCAL_RANK / NEXAR_LOCAL_SIZE (nexar-run
 * sets them), else from the launcher (PMIx, SLURM_LOCALID, LOCAL_RANK and
 * LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_*), else counted from the roster:
 * the ranks whose address is this process's (docs/launching.md). Use it to
 * pick a device per process. Either pointer may be NULL. Returns NEXAR_OK,
 * or NEXAR_ERR_INVALID_ARG when |ctx| is NULL. Thread-safe (the values are
 * fixed at nexar_init).
 */
NEXAR_EXTERN int nexar_local_rank(const nexar_ctx_t *ctx, int *local_rank,
                                  int *local_size);

/* ---- Failures, recovery and elastic membership (docs/fault-tolerance.md).
 *
 * Contract: no call that communicates blocks past its deadline. The first
 * rank to see a peer fail (heartbeat timeout or lost connection) fails the
 * operations that need it with NEXAR_ERR_PEER_FAILED naming the peer, and
 * tells every other live process; their operations on every communicator
 * that contains the failed rank fail with NEXAR_ERR_REVOKED within
 * milliseconds of the notice (within two heartbeat timeouts at worst). After
 * an error the contents of the failed operation's receive buffers are
 * unspecified. What happens next is NEXAR_RECOVERY:
 *   abort     every operation on every communicator fails (NEXAR_ERR_REVOKED)
 *             and the process can only call nexar_finalize (the default);
 *   manual    the application calls nexar_comm_shrink on the communicator;
 *   automatic every call that returns NEXAR_ERR_PEER_FAILED or
 *             NEXAR_ERR_REVOKED on a communicator has already rebuilt it in
 *             place: the survivors agreed on the failed set, the ranks are
 *             contiguous in the old order and the epoch advanced (ask
 *             nexar_comm_rank, nexar_comm_size, nexar_comm_epoch). A call on
 *             a communicator revoked while this process was elsewhere
 *             rebuilds it and returns NEXAR_ERR_REVOKED without running.
 * A process declared failed by another (say after SIGSTOP) is fenced: once
 * it runs again its operations fail with NEXAR_ERR_EXCLUDED. */

/* Why a process was declared failed. */
typedef enum nexar_failure_reason {
  NEXAR_FAIL_HEARTBEAT =
      1, /* nothing received for NEXAR_HEARTBEAT_TIMEOUT_MS */
  NEXAR_FAIL_CONNECTION = 2, /* its connection closed or broke */
  NEXAR_FAIL_REPORTED = 3,   /* another member declared it failed */
  NEXAR_FAIL_UNREACHABLE = 4 /* no route to it: every send failed for
                                NEXAR_HEARTBEAT_TIMEOUT_MS */
} nexar_failure_reason_t;

/* One failed process, as this process learnt of it. */
typedef struct nexar_failure {
  int id;           /* stable process id: its world rank when it joined */
  int reporter;     /* id of the process whose detector declared it */
  int reason;       /* nexar_failure_reason_t */
  uint64_t when_ns; /* CLOCK_MONOTONIC time this process learnt it (ns) */
  char addr[64];    /* its UDP address, "ip:port" */
} nexar_failure_t;

/* Called once per failed process, on a library-owned thread (one of the RPC
 * handler threads; one failure at a time, in the order they were learnt),
 * off the progress engine: it may call any nexar function, nexar_abort
 * included. */
typedef void (*nexar_failure_fn)(nexar_ctx_t *ctx, const nexar_failure_t *f,
                                 void *user_data);

/*
 * Installs |fn| (NULL removes it). Failures known before the call are not
 * replayed (read them with nexar_failures). Returns NEXAR_OK or
 * NEXAR_ERR_INVALID_ARG. Thread-safe.
 */
NEXAR_EXTERN int nexar_set_failure_handler(nexar_ctx_t *ctx,
                                           nexar_failure_fn fn,
                                           void *user_data);
/*
 * The failures this process knows of, in the order it learnt them: copies
 * up to |max| into |out| (may be NULL when max is 0) and sets *count to the
 * total. Returns NEXAR_OK or NEXAR_ERR_INVALID_ARG. Thread-safe.
 */
NEXAR_EXTERN int nexar_failures(nexar_ctx_t *ctx, nexar_failure_t *out, int max,
                                int *count);
/*
 * Stable id of rank |rank| (0 .. size-1) of |comm|: the world rank its
 * process got when it joined; ids are never reused. Returns NEXAR_OK, or
 * NEXAR_ERR_INVALID_ARG for NULL arguments or a rank out of range. Reads the
 * communicator's current membership: call it between operations on |comm|
 * (an automatic rebuild inside a failing call changes it).
 */
NEXAR_EXTERN int nexar_comm_id_of(const nexar_comm_t *comm, int rank, int *id);
/*
 * Epoch of |comm|: 0 at creation, +1 at each rebuild (automatic recovery,
 * elastic checkpoint; nexar_comm_shrink gives a new communicator one epoch
 * above the old). Returns NEXAR_OK or NEXAR_ERR_INVALID_ARG (NULL argument).
 * Same thread rule as nexar_comm_id_of.
 */
NEXAR_EXTERN int nexar_comm_epoch(const nexar_comm_t *comm, uint32_t *epoch);

/*
 * Builds a new communicator of the live members of |comm| (which may be
 * revoked), ranked in their old order (ULFM's MPIX_Comm_shrink). Collective
 * over the live members. The members first agree on the failed set with a
 * flooding consensus that tolerates further failures during the round
 * (Guerraoui & Rodrigues, "Introduction to Reliable and Secure Distributed
 * Programming", 2011, alg. 5.1, over the heartbeat detector made perfect by
 * fencing), then on the new communicator id, then check that every member
 * has it. A failure during the call restarts the agreement without the
 * failed process. |comm| stays revoked; free it with nexar_comm_free.
 *
 * |comm| has one agreement: a shrink after NEXAR_RECOVERY=automatic stopped
 * for want of a majority (every call on |comm| then fails at once with
 * NEXAR_ERR_PEER_FAILED and the same "no majority" text) builds the
 * survivors' communicator from that decision, in milliseconds; a shrink
 * after one that timed out joins the same agreement again.
 *
 * Partitions: a shrink that would leave half of |comm| or less is refused
 * (NEXAR_ERR_PEER_FAILED, "may be cut off") when some of the others were
 * declared failed only because they went silent or out of reach, not
 * because their processes are known gone (port closed, connection ended):
 * this process may be the one a network partition cut off, and the others
 * may go on without it (docs/fault-tolerance.md section 9).
 *
 * Returns NEXAR_OK; NEXAR_ERR_EXCLUDED when the others declared this process
 * failed; NEXAR_ERR_PEER_FAILED for such a minority; NEXAR_ERR_TIMEOUT past
 * NEXAR_OP_TIMEOUT_MS; NEXAR_ERR_INVALID_ARG for NULL arguments or when fewer
 * than NEXAR_MIN_WORLD_SIZE ranks would remain (for the world);
 * NEXAR_ERR_INVALID_USAGE under NEXAR_RECOVERY=abort or when |comm| was already
 * shrunk; NEXAR_ERR_ABORTED; NEXAR_ERR_NOMEM. Not thread-safe with other calls
 * on |comm|.
 */
NEXAR_EXTERN int nexar_comm_shrink(nexar_comm_t *comm, nexar_comm_t **newcomm);

/*
 * Ends every operation of this process at once: pending and later calls fail
 * with NEXAR_ERR_ABORTED, connections are closed with the reason "rank R
 * aborted" (peers see the failure at once, not after a timeout). Local: never
 * waits for a peer; returns within 1 s; idempotent; callable from any thread,
 * also while other threads are inside nexar calls. Only nexar_finalize may
 * follow. Returns NEXAR_OK or NEXAR_ERR_INVALID_ARG.
 */
NEXAR_EXTERN int nexar_abort(nexar_ctx_t *ctx);

/* Result of an elastic membership change, from one process's view. */
typedef struct nexar_membership {
  uint32_t epoch;         /* epoch of the world communicator after the change */
  int old_rank, old_size; /* -1 / 0 on a process that just joined */
  int new_rank, new_size; /* new_rank is -1 on a process that left */
  int joined, left;       /* processes admitted, processes that left */
} nexar_membership_t;

/*
 * Elastic checkpoint: collective over the world communicator, at a point the
 * application chooses. Each member says whether it leaves (|leave| != 0);
 * processes waiting at the seed to join (nexar_init with NEXAR_JOIN=1 against
 * a seed started with an elastic maximum) are admitted up to
 * NEXAR_MAX_WORLD_SIZE. The world is rebuilt in place: the staying members
 * keep their order, the newcomers follow in arrival order, the epoch
 * advances, and every collective, p2p call and barrier works on it when the
 * call returns (newcomers return from nexar_init at the same point). With no
 * joiner and no leaver it is a barrier; when no seed is to be asked (known
 * not elastic or gone, or NEXAR_MAX_WORLD_SIZE reached) it costs one
 * allgather of 24 bytes per member. The leader (lowest staying rank) waits
 * for the seed at most min(NEXAR_BOOTSTRAP_TIMEOUT_MS, NEXAR_OP_TIMEOUT_MS /
 * 2), less when its port is closed. Child communicators that contain a
 * leaver are revoked (NEXAR_ERR_REVOKED on the staying members: free them);
 * on a leaver every communicator is. A process that left may only call
 * nexar_finalize. |out| may be NULL. Thread-safety: a collective on the
 * world, called in the same order as its other collectives on every member;
 * no other operation on the world may be in flight during it.
 *
 * Returns NEXAR_OK; NEXAR_ERR_INVALID_ARG when fewer than
 * NEXAR_MIN_WORLD_SIZE would remain (nobody leaves then); NEXAR_ERR_TIMEOUT
 * (e.g. a joiner could not be connected: every member then abandons the
 * change and the world is unchanged); NEXAR_ERR_PEER_FAILED /
 * NEXAR_ERR_REVOKED (see the recovery policy); NEXAR_ERR_INVALID_USAGE on a
 * process that already left. A seed that is not elastic, gone or silent
 * admits nobody, which is not an error, and no later checkpoint asks it
 * (docs/elastic.md).
 */
NEXAR_EXTERN int nexar_elastic_checkpoint(nexar_ctx_t *ctx, int leave,
                                          nexar_membership_t *out);

/*
 * Splits |comm| into disjoint communicators, one per |color| (>= 0): the
 * ranks of |comm| that pass the same color form one new communicator,
 * ranked by |key| (ascending), ties broken by their rank in |comm|. A rank
 * passing NEXAR_UNDEFINED joins none and gets *newcomm = NULL. Collective
 * on |comm|: every rank of it must call, in the same collective order.
 * Cost: one allgather of three int64 per rank and one barrier on |comm|.
 * The new communicator supports everything the world does (p2p, every
 * collective, barrier, RPC) and is independent of |comm|: messages and
 * collectives on one never match the other. Free it with nexar_comm_free.
 *
 * Ids: every communicator has an id carried in each message (the world:
 * 0). Each process keeps the next id it may propose (starting at 1); a
 * split gathers the proposals of every rank of |comm| and takes the
 * largest, after which every rank of |comm| proposes only larger ids. A
 * process therefore never holds two communicators with one id, and two
 * processes that share a communicator agree on its id (the children of
 * one split share an id but have no member in common). Ids are never
 * reused, so a late message of a freed communicator is recognised and
 * dropped.
 *
 * Returns NEXAR_OK; NEXAR_ERR_INVALID_ARG (NULL arguments, color < 0 other
 * than NEXAR_UNDEFINED); NEXAR_ERR_NOMEM; or the error of the allgather or
 * barrier on |comm| (then *newcomm is NULL).
 * Thread safety: any thread; collective calls on |comm| (this one
 * included) must be ordered by the application, as for any collective.
 */
NEXAR_EXTERN int nexar_comm_split(nexar_comm_t *comm, int color, int key,
                                  nexar_comm_t **newcomm);
/* Same as nexar_comm_split(comm, 0, rank of this process, newcomm): a new
 * communicator with the same ranks in the same order. */
NEXAR_EXTERN int nexar_comm_dup(nexar_comm_t *comm, nexar_comm_t **newcomm);
/*
 * Creates a communicator of the |n| ranks of |comm| listed in |ranks|
 * (MPI_Comm_create_group): new rank i is ranks[i] of |comm|, so the list's
 * order numbers the new ranks (it need not be sorted). Collective over the
 * listed ranks only: each of them calls with the same |ranks| and |tag|;
 * the other ranks of |comm| do not call and may do anything meanwhile
 * (p2p and RPC on |comm| too, but no collective on |comm| that a member
 * would have to join while it is inside this call). |tag| (0..
 * NEXAR_TAG_MAX) keeps creations apart that run at the same time on
 * |comm| with overlapping members (as in MPI); its messages travel apart
 * from the application's and never match a nexar_recv, whatever its tag.
 *
 * The members agree on the new communicator's id as nexar_comm_split does
 * (the largest of their proposals; docs/communicators.md), through the
 * first listed rank: two rounds of one small message to it and one back
 * per member, the second making sure every member has registered the new
 * communicator before anyone uses it. The result supports everything a
 * communicator of nexar_comm_split does; free it with nexar_comm_free
 * (collective over its members).
 *
 * Returns NEXAR_OK; NEXAR_ERR_INVALID_ARG, before anything is allocated or
 * sent, for NULL arguments, |n| < 1 or above the size of |comm|, a rank
 * out of range or listed twice, a bad tag, or a calling rank that is not
 * in the list (the message, nexar_comm_last_error(comm), says which);
 * NEXAR_ERR_NOMEM; NEXAR_ERR_TIMEOUT (a listed rank did not take part
 * within the op timeout), NEXAR_ERR_PEER_FAILED, NEXAR_ERR_REVOKED: then
 * *newcomm is NULL on every member that returns, and each member fails
 * (none is left with a communicator the others lack).
 * Thread safety: any thread; a process takes part in one communicator
 * creation (split, dup, create_group) at a time: ids are proposed from
 * one counter per process.
 */
NEXAR_EXTERN int nexar_comm_create_group(nexar_comm_t *comm, const int *ranks,
                                         int n, int tag,
                                         nexar_comm_t **newcomm);
/*
 * Frees *comm (made by nexar_comm_split, nexar_comm_dup or
 * nexar_comm_create_group) and sets *comm
 * to NULL. Collective on *comm: a barrier on it, so that no member still
 * sends on it; every request on it must have completed. Messages that were
 * never received are dropped. Communicators left at nexar_finalize are
 * freed by it. Returns NEXAR_OK; NEXAR_ERR_INVALID_ARG (NULL, or the world,
 * which belongs to the context); or the barrier's error (*comm is freed
 * all the same).
 */
NEXAR_EXTERN int nexar_comm_free(nexar_comm_t **comm);

/*
 * The last error message recorded on |comm|, with context (local rank, peer
 * rank and address, communicator, operation, sequence number), or "" when
 * none. The text is copied into a thread-local buffer that stays valid until
 * this thread's next call. |comm| NULL gives the last error of this thread's
 * last failed nexar_init.
 */
NEXAR_EXTERN const char *nexar_comm_last_error(const nexar_comm_t *comm);
/* Same as nexar_comm_last_error(NULL). */
NEXAR_EXTERN const char *nexar_last_error(void);

/* ------------------------------------------------------------------ */
/* Point-to-point. Messages are matched MPI-style on (source, tag) within a
 * communicator, FIFO per (source, tag, communicator). Buffers may be in
 * device memory (see "Device memory" below); the calls then also return
 * the device adapter's errors. */

/*
 * Sends |count| elements of |dtype| from |buf| to rank |dest| with |tag|
 * (0..NEXAR_TAG_MAX). Returns when |buf| may be reused: small messages are
 * copied, large ones are sent from |buf| and complete once acknowledged.
 * Returns NEXAR_OK, NEXAR_ERR_INVALID_ARG (bad rank, tag, dtype), and the
 * transport errors NEXAR_ERR_PEER_FAILED, NEXAR_ERR_TIMEOUT (op timeout),
 * NEXAR_ERR_CLOSED.
 */
NEXAR_EXTERN int nexar_send(nexar_comm_t *comm, const void *buf, size_t count,
                            nexar_dtype_t dtype, int dest, int tag);

/*
 * Receives into |buf| (room for |count| elements) a message from |source|
 * (or NEXAR_ANY_SOURCE) with |tag| (or NEXAR_ANY_TAG). |status| may be NULL.
 * Returns NEXAR_OK; NEXAR_ERR_TRUNCATE when the message is longer than the
 * buffer (the first count elements are stored, status->bytes holds the
 * message length); NEXAR_ERR_INVALID_ARG; NEXAR_ERR_TIMEOUT;
 * NEXAR_ERR_PEER_FAILED; NEXAR_ERR_CLOSED; NEXAR_ERR_NOMEM when, on a sparse
 * topology, this process's unexpected messages beyond the per-origin bounds
 * reached NEXAR_UNEXPECTED_BYTES while it waited (any receive, probe or
 * collective waiting then ends so; docs/topology.md section 10, rule 3).
 */
NEXAR_EXTERN int nexar_recv(nexar_comm_t *comm, void *buf, size_t count,
                            nexar_dtype_t dtype, int source, int tag,
                            nexar_status_t *status);

/*
 * Synchronous-mode send (MPI_Ssend): as nexar_send, but returns only once
 * the receiver has matched the message to a receive (not merely once the
 * data has left or been buffered), and |buf| may be reused. The receiver
 * acknowledges the match with a small control message (wire protocol,
 * P2P mode SYNC; docs/wire-protocol.md section 2), over either transport.
 * Returns as nexar_send; NEXAR_ERR_PEER_FAILED when |dest| fails before
 * it acknowledged; NEXAR_ERR_TIMEOUT when no receive matched within the op
 * timeout (the message may still be delivered to a receive posted later).
 */
NEXAR_EXTERN int nexar_ssend(nexar_comm_t *comm, const void *buf, size_t count,
                             nexar_dtype_t dtype, int dest, int tag);
/* Non-blocking synchronous send (MPI_Issend): starts nexar_ssend and
 * returns its request in *req; nexar_test reports it finished only once
 * the receiver matched the message. Arguments, buffer rules and results
 * as nexar_isend and nexar_ssend. */
NEXAR_EXTERN int nexar_issend(nexar_comm_t *comm, const void *buf, size_t count,
                              nexar_dtype_t dtype, int dest, int tag,
                              nexar_req_t **req);

/* Non-blocking forms: start the operation and return a request in *req that
 * must be completed with nexar_wait/nexar_test/nexar_waitall/nexar_waitany.
 * The buffer must stay valid and untouched until then (a send buffer in
 * device memory is copied during the call and may be reused at once).
 * Return NEXAR_OK or NEXAR_ERR_INVALID_ARG / NEXAR_ERR_NOMEM /
 * NEXAR_ERR_CLOSED, or a device adapter error (NEXAR_ERR_DEVICE). */
NEXAR_EXTERN int nexar_isend(nexar_comm_t *comm, const void *buf, size_t count,
                             nexar_dtype_t dtype, int dest, int tag,
                             nexar_req_t **req);
NEXAR_EXTERN int nexar_irecv(nexar_comm_t *comm, void *buf, size_t count,
                             nexar_dtype_t dtype, int source, int tag,
                             nexar_req_t **req);

/*
 * Vectored point-to-point (MPI has no direct equivalent; readv/writev's
 * gather/scatter): a message's payload is the concatenation of a list of
 * host buffers, sent from and received into the caller's memory.
 *
 * nexar_iov_t: one entry, |bytes| bytes at |base| (base may be NULL when
 * bytes is 0; zero-length entries are skipped). A list has at most
 * NEXAR_IOV_MAX entries and is read during the call only (it may be freed
 * at once; the buffers it names must stay valid and untouched until the
 * request completes, as for nexar_isend / nexar_irecv).
 *
 * A vectored message is an ordinary byte message (dtype NEXAR_BYTE): it
 * matches like one and either side may be contiguous, so nexar_sendv pairs
 * with nexar_recv and nexar_send with nexar_recvv, however the two sides
 * split the bytes. Matching, ordering, status and timeouts as nexar_send /
 * nexar_recv (docs/p2p.md).
 *
 * Send path: the transport gathers the entries straight from the caller's
 * buffers (QUIC: stream vectors; shared memory: one descriptor per long
 * entry, short entries copied into the ring as every small send is). The
 * payload is packed into one buffer (a copy) only where a contiguous send
 * copies too (at most NEXAR_EAGER_BYTES, eager), to the process itself, and
 * for a message relayed through another process (sparse topologies: the
 * relay digest covers one buffer). Receive path: the payload is scattered
 * into the entries in order; a message longer than the list's total fails
 * with NEXAR_ERR_TRUNCATE (the first total bytes are stored,
 * status->bytes is the message's length, and nexar_comm_last_error names
 * both sizes). Entries of one receive list must not overlap.
 *
 * Returns as nexar_send / nexar_recv (blocking) and nexar_isend /
 * nexar_irecv (non-blocking), and NEXAR_ERR_INVALID_ARG, before anything
 * is allocated or sent, for a NULL list with |n| > 0, more than
 * NEXAR_IOV_MAX entries, an entry with bytes > 0 and a NULL base, or a
 * total that overflows 64 bits; NEXAR_ERR_UNSUPPORTED for an entry in
 * device memory (vectored calls take host memory only).
 * Thread safety: as nexar_send / nexar_recv.
 */
typedef struct nexar_iov {
  void *base;
  size_t bytes;
} nexar_iov_t;
/* Most entries of one vectored call's list (POSIX IOV_MAX's value). */
#define NEXAR_IOV_MAX 1024
NEXAR_EXTERN int nexar_sendv(nexar_comm_t *comm, const nexar_iov_t *iov,
                             size_t n, int dest, int tag);
NEXAR_EXTERN int nexar_recvv(nexar_comm_t *comm, const nexar_iov_t *iov,
                             size_t n, int source, int tag,
                             nexar_status_t *status);
NEXAR_EXTERN int nexar_isendv(nexar_comm_t *comm, const nexar_iov_t *iov,
                              size_t n, int dest, int tag, nexar_req_t **req);
NEXAR_EXTERN int nexar_irecvv(nexar_comm_t *comm, const nexar_iov_t *iov,
                              size_t n, int source, int tag, nexar_req_t **req);

/*
 * Waits for *req to finish (at most the op timeout), frees it and sets
 * *req = NULL. A NULL *req returns NEXAR_OK at once. |status| may be NULL.
 * Receive buffers in device memory get their data before it returns (on
 * this thread, through the device adapter). Returns the request's result;
 * NEXAR_ERR_TIMEOUT when the op timeout passes first (the request is then
 * cancelled and freed; a receive buffer's contents are unspecified); the
 * device adapter's error (NEXAR_ERR_DEVICE) when copying the result to
 * device memory fails.
 */
NEXAR_EXTERN int nexar_wait(nexar_req_t **req, nexar_status_t *status);

/*
 * Tests *req without blocking. Sets *done to 1 and behaves as nexar_wait
 * when it has finished; otherwise sets *done to 0 and returns NEXAR_OK.
 */
NEXAR_EXTERN int nexar_test(nexar_req_t **req, int *done,
                            nexar_status_t *status);

/*
 * Waits for all |n| requests (NULL entries are skipped). |statuses| may be
 * NULL or hold |n| entries. Returns NEXAR_OK when all succeeded, otherwise
 * the first error (each status->error holds its own result).
 */
NEXAR_EXTERN int nexar_waitall(size_t n, nexar_req_t **reqs,
                               nexar_status_t *statuses);

/* Index that nexar_waitany reports when every request is NULL. */
#define NEXAR_UNDEFINED_INDEX ((size_t)-1)

/*
 * Waits until one of the |n| requests in |reqs| (NULL entries are skipped)
 * has finished, then completes it as nexar_wait does: frees it, sets
 * reqs[*index] = NULL and fills |status| (may be NULL). When several have
 * finished, the lowest index is taken. The wait sleeps in the progress
 * engine as nexar_wait does (no busy loop of its own) and ends at the
 * earliest op-timeout deadline among the requests: that request is then
 * cancelled and completed with NEXAR_ERR_TIMEOUT, and its index reported.
 * Every request must belong to one context. All entries NULL (or n = 0):
 * *index = NEXAR_UNDEFINED_INDEX, |status| empty (source NEXAR_ANY_SOURCE,
 * tag NEXAR_ANY_TAG, error NEXAR_OK) and NEXAR_OK at once.
 * Returns the completed request's result (as nexar_wait); or
 * NEXAR_ERR_INVALID_ARG, with nothing completed, for a NULL |index|, a
 * NULL |reqs| with n > 0, or requests of different contexts.
 * Thread-safety: as nexar_wait; a request must not be waited for by two
 * threads at once.
 */
NEXAR_EXTERN int nexar_waitany(size_t n, nexar_req_t **reqs, size_t *index,
                               nexar_status_t *status);

/*
 * Asks to cancel the pending request |req| (MPI_Cancel). A receive that no
 * message has been matched to yet is removed from the posted receives and
 * finishes with NEXAR_ERR_CANCELLED: its nexar_wait / nexar_test returns
 * NEXAR_ERR_CANCELLED (status->error too), its buffer is untouched, and
 * the message it would have matched goes to the next matching receive. A
 * receive already matched, a send, a collective or an RPC call is not
 * affected and completes as usual. Either way the request must still be
 * completed with nexar_wait / nexar_test / nexar_waitall / nexar_waitany.
 * Returns NEXAR_OK, or NEXAR_ERR_INVALID_ARG for a NULL |req|.
 * Thread-safe: may be called while another thread waits for |req|.
 */
NEXAR_EXTERN int nexar_cancel(nexar_req_t *req);

/*
 * Non-blocking probe (MPI_Iprobe): looks whether a message from |source|
 * (a rank of |comm|, or NEXAR_ANY_SOURCE) with |tag| (0..NEXAR_TAG_MAX, or
 * NEXAR_ANY_TAG) can be received now. If so, *flag = 1 and |status| (may
 * be NULL) gets its source, tag and length in bytes (status->bytes: the
 * whole message, however much of it has arrived); else *flag = 0. The
 * message stays queued: it is the one a receive with the same source and
 * tag posted next by this thread gets (MPI matching order: messages in
 * arrival order, FIFO per source, tag and communicator; a receive posted
 * earlier and still pending takes a message before the probe sees it).
 * Each call makes one progress pass when the engine is free, so a loop of
 * nexar_iprobe sees new messages arrive.
 * Returns NEXAR_OK (with *flag 0 or 1); NEXAR_ERR_INVALID_ARG (NULL
 * |comm| or |flag|, a bad rank or tag); NEXAR_ERR_REVOKED (or the code
 * the communicator was revoked with) as for any operation on a revoked
 * communicator. Thread-safe.
 */
NEXAR_EXTERN int nexar_iprobe(nexar_comm_t *comm, int source, int tag,
                              int *flag, nexar_status_t *status);

/*
 * Blocking probe (MPI_Probe): waits until a message as nexar_iprobe
 * describes can be received, and reports it in |status| (may be NULL)
 * without receiving it. Waits at most the op timeout (NEXAR_OP_TIMEOUT_MS)
 * in the progress engine. Returns NEXAR_OK; NEXAR_ERR_INVALID_ARG (as
 * nexar_iprobe); NEXAR_ERR_TIMEOUT; NEXAR_ERR_PEER_FAILED when the named
 * source (or, for NEXAR_ANY_SOURCE, any member of |comm|) failed;
 * NEXAR_ERR_REVOKED; NEXAR_ERR_NOMEM. Thread-safe; with several threads
 * receiving on |comm|, another thread may receive the probed message
 * first.
 */
NEXAR_EXTERN int nexar_probe(nexar_comm_t *comm, int source, int tag,
                             nexar_status_t *status);

/* ------------------------------------------------------------------ */
/* Collectives.
 *
 * Every rank of |comm| must call the same collectives in the same order
 * with matching arguments (the fingerprint: collective, dtype, op, count,
 * root, algorithm). Counts and displacements are in elements of |dtype|.
 * Each collective is compiled into a schedule of send / receive / reduce /
 * copy steps that the progress engine advances; many collectives and p2p
 * messages may be in flight on one communicator at once, kept apart by a
 * per-communicator collective sequence number.
 *
 * The blocking form is the non-blocking form followed by nexar_wait. The
 * non-blocking form (nexar_i*) returns a request in *req; the buffers must
 * stay untouched until it completes. Count and displacement arrays are
 * read during the call only.
 *
 * In place: where a function says so, pass NEXAR_IN_PLACE (or a send buffer
 * equal to the receive buffer) as described there.
 *
 * Results: every rank of an allreduce (any algorithm) gets bit-identical
 * results, because each element is combined in one order. float16 and
 * bfloat16 are widened to float32 inside each reduction step and rounded to
 * nearest even after it; NaN semantics are those of the reduction kernels
 * (any NaN operand gives the canonical quiet NaN for MIN/MAX, IEEE
 * otherwise), identical on every code path. AVG on integers truncates.
 *
 * Result codes of every collective: NEXAR_OK; NEXAR_ERR_INVALID_ARG (bad
 * pointer, root, count or dtype); NEXAR_ERR_UNSUPPORTED (the (dtype, op)
 * pair, e.g. a bitwise op on floats, or a reserved fp8 type);
 * NEXAR_ERR_MISMATCH when ranks called different collectives or arguments
 * for the same collective number (every involved rank fails; the message,
 * nexar_comm_last_error(), names both sides, e.g. "rank 3 called
 * allreduce(f32 x 1024, sum) as collective #17 of comm 0; rank 0 called
 * bcast(f32 x 1024, root 0)"; later collectives on |comm| then fail with the
 * same error because the ranks no longer agree on the sequence);
 * NEXAR_ERR_TIMEOUT when the call does not finish within
 * NEXAR_OP_TIMEOUT_MS (the message lists the ranks that have not
 * contributed); NEXAR_ERR_PEER_FAILED, NEXAR_ERR_CLOSED, NEXAR_ERR_NOMEM.
 * After an error the receive buffers' contents are unspecified.
 *
 * Thread safety: any thread may call; calls on one communicator must be
 * made in the same order on every rank (as in MPI), so concurrent callers
 * on one communicator must order their calls themselves.
 *
 * Device memory: every buffer may be in device memory, on any subset of
 * ranks, through the context's device adapter (see "Device memory" below);
 * a call then also returns the adapter's errors (NEXAR_ERR_DEVICE).
 */

/*
 * Combines |count| elements from every rank with |op|; every rank gets the
 * result in |recvbuf|. In place: sendbuf = NEXAR_IN_PLACE (input taken
 * from recvbuf). Algorithms (NEXAR_ALGO_ALLREDUCE=ring|rd|rabenseifner|
 * direct|hier forces one; thresholds NEXAR_ALLREDUCE_DIRECT_MAX_BYTES,
 * NEXAR_ALLREDUCE_RD_MAX_BYTES and NEXAR_ALLREDUCE_RING_MIN_BYTES):
 * - direct (one round: the "one-shot" allreduce of GPU libraries' small
 *   messages, e.g. TensorRT-LLM's ONESHOT strategy) for vectors of at most
 *   4 KiB on 3 to 16 ranks that share one host over shared memory: each
 *   rank sends its vector to every other and combines all n in rank order;
 * - recursive doubling for small messages (Thakur, Rabenseifner & Gropp
 *   2005, "Optimization of collective communication operations in MPICH");
 * - Rabenseifner's algorithm for medium ones: reduce-scatter by recursive
 *   halving, allgather by recursive doubling (Rabenseifner 2004);
 * - ring reduce-scatter + ring allgather for large ones (Patarasuk & Yuan
 *   2009), cut into NEXAR_SEG_BYTES segments on element boundaries that
 *   pipeline through the ring.
 * Non-powers of two: the first 2(n - 2^k) ranks fold pairwise into 2^k
 * (Rabenseifner & Traeff 2004), the ring needs no fold.
 * Sparse topologies (docs/topology.md): above the recursive-doubling size,
 * Rabenseifner where every r, r ^ 2^k pair is a link, else the ring where
 * every r, r + 1 pair is, so that nothing is relayed.
 * Where the ranks span several hosts and some host holds more than one
 * (host keys from the roster), two-level instead (NEXAR_ALGO_ALLREDUCE=hier,
 * also the auto choice then): reduce to a leader per host, allreduce among
 * the leaders, bcast on each host (Zhu et al. 2009; docs/communicators.md).
 */
NEXAR_EXTERN int nexar_allreduce(nexar_comm_t *comm, const void *sendbuf,
                                 void *recvbuf, size_t count,
                                 nexar_dtype_t dtype, nexar_op_t op);
NEXAR_EXTERN int nexar_iallreduce(nexar_comm_t *comm, const void *sendbuf,
                                  void *recvbuf, size_t count,
                                  nexar_dtype_t dtype, nexar_op_t op,
                                  nexar_req_t **req);

/*
 * Bucketed allreduce of many tensors (gradient bucketing: Li et al. 2020,
 * "PyTorch Distributed: Experiences on Accelerating Data Parallel
 * Training", VLDB 13(12), section 3.2; docs/collectives.md).
 *
 * A list of |n| tensors (nexar_tensor_t: |count| elements of |dtype| at
 * |buf|, reduced in place; one dtype for the whole list, sizes may differ,
 * count 0 allowed) is cut into buckets in list order: consecutive tensors
 * while their bytes fit NEXAR_BUCKET_BYTES (default 25 MiB, as DDP), a
 * larger tensor alone. Every rank must pass the same counts and dtype in
 * the same order, so every rank cuts the same buckets. Each bucket is one
 * nexar_iallreduce (algorithm chosen by its size, as for any allreduce): a
 * bucket of one tensor is reduced in that tensor's buffer; a bucket of
 * several is packed into a buffer the object owns when it starts (one copy
 * in) and copied back when it is waited for (one copy out).
 *
 * Readiness: nexar_multi_ready(m, i) says tensor i holds its final input
 * for this step. A bucket's allreduce starts, inside that call, as soon as
 * all its tensors are ready and every bucket before it has started, so
 * buckets start in bucket order on every rank whatever order each rank
 * marks its tensors in, and communication overlaps whatever the caller
 * computes next. List the tensors in the order they usually become ready
 * (for a backward pass: from the last layer to the first) so that buckets
 * fill and start early. nexar_multi_wait ends the step (results in the
 * buffers) and the object is ready for the next step with the same
 * buffers (persistent, as DDP's reducer).
 *
 * The object's allreduces are collectives on |comm|: other collectives the
 * application calls on |comm| while a step is open must be called in the
 * same order relative to the buckets' starts on every rank (simplest: give
 * the object a communicator of its own, nexar_comm_dup).
 *
 * nexar_multi_create returns NEXAR_OK; NEXAR_ERR_INVALID_ARG, before
 * anything is allocated, for NULL arguments, n = 0 or above
 * NEXAR_MULTI_MAX, a tensor whose dtype differs from the first's, a NULL
 * buffer with count > 0, or two tensors whose buffers overlap (the
 * message, nexar_comm_last_error, names the tensors);
 * NEXAR_ERR_UNSUPPORTED for the (dtype, op) pair or a tensor in device
 * memory (host memory only); NEXAR_ERR_NOMEM.
 * nexar_multi_ready: NEXAR_OK; NEXAR_ERR_INVALID_ARG (index out of range);
 * NEXAR_ERR_INVALID_USAGE (marked twice in one step); the error of a
 * bucket's start (then reported by the wait too).
 * nexar_multi_wait: waits for every bucket (each at most the op timeout)
 * and returns NEXAR_OK or the first bucket's error (results of the buckets
 * that failed are unspecified, the others are in place); or
 * NEXAR_ERR_INVALID_USAGE, with nothing waited for, when a tensor is not
 * marked ready this step. nexar_multi_test: as the wait when every bucket
 * has finished (*done = 1), else *done = 0 and NEXAR_OK.
 * nexar_multi_free waits for buckets still running and frees the object
 * (NULL or *m NULL: nothing).
 * Thread safety: one thread at a time per object; the object's
 * collectives follow the ordering rule above.
 */
typedef struct nexar_tensor {
  void *buf;
  size_t count;
  nexar_dtype_t dtype;
} nexar_tensor_t;
/* Most tensors in one list. */
#define NEXAR_MULTI_MAX (1u << 20)
typedef struct nexar_multi nexar_multi_t;
/* What an object does, and what its last step cost (times in ns,
 * CLOCK_MONOTONIC). comm_ns runs from the step's first bucket start to the
 * end of its wait; wait_ns is the time spent in the wait: the part of
 * comm_ns not hidden behind the caller's work. */
typedef struct nexar_multi_info {
  size_t buckets;        /* buckets the list is cut into */
  size_t packed;         /* of them packed (several tensors) */
  uint64_t bytes;        /* bytes of all tensors */
  uint64_t packed_bytes; /* bytes copied in (and out) per step */
  uint64_t steps;        /* steps finished */
  uint64_t comm_ns;      /* last step: first start to end of wait */
  uint64_t wait_ns;      /* last step: time in the wait (exposed) */
} nexar_multi_info_t;
NEXAR_EXTERN int nexar_multi_create(nexar_comm_t *comm,
                                    const nexar_tensor_t *tensors, size_t n,
                                    nexar_op_t op, nexar_multi_t **m);
NEXAR_EXTERN int nexar_multi_ready(nexar_multi_t *m, size_t i);
NEXAR_EXTERN int nexar_multi_wait(nexar_multi_t *m);
NEXAR_EXTERN int nexar_multi_test(nexar_multi_t *m, int *done);
NEXAR_EXTERN int nexar_multi_get_info(const nexar_multi_t *m,
                                      nexar_multi_info_t *info);
NEXAR_EXTERN int nexar_multi_free(nexar_multi_t **m);
/* Non-blocking form: nexar_multi_create, then every tensor marked ready
 * (buckets start at once); complete with nexar_multi_wait or
 * nexar_multi_test, then nexar_multi_free. On error nothing is left
 * (*m NULL). */
NEXAR_EXTERN int nexar_iallreduce_multi(nexar_comm_t *comm,
                                        const nexar_tensor_t *tensors, size_t n,
                                        nexar_op_t op, nexar_multi_t **m);
/* Blocking form: the non-blocking form, its wait and free. Results as
 * nexar_multi_create and nexar_multi_wait. */
NEXAR_EXTERN int nexar_allreduce_multi(nexar_comm_t *comm,
                                       const nexar_tensor_t *tensors, size_t n,
                                       nexar_op_t op);

/*
 * Copies |count| elements from |buf| on |root| into |buf| on every rank.
 * Algorithms (NEXAR_ALGO_BCAST=binomial|scatter_allgather|hier forces one;
 * threshold NEXAR_BCAST_LARGE_BYTES): binomial tree for small messages
 * (Thakur, Rabenseifner & Gropp 2005); scatter + ring allgather for large
 * ones (van de Geijn et al. 1997, Barnett et al. 1994). Ranks sharing
 * hosts: two-level (among one leader per host, the root leading its own,
 * then on each host), as for nexar_allreduce.
 */
NEXAR_EXTERN int nexar_bcast(nexar_comm_t *comm, void *buf, size_t count,
                             nexar_dtype_t dtype, int root);
NEXAR_EXTERN int nexar_ibcast(nexar_comm_t *comm, void *buf, size_t count,
                              nexar_dtype_t dtype, int root, nexar_req_t **req);

/*
 * Combines |count| elements from every rank with |op| into |recvbuf| on
 * |root| (recvbuf is ignored elsewhere and may be NULL). In place at the
 * root: sendbuf = NEXAR_IN_PLACE. Algorithms (NEXAR_ALGO_REDUCE=
 * binomial|rs_gather|hier forces one): binomial tree (small);
 * reduce-scatter (ring) + gather to the root for messages of at least
 * NEXAR_REDUCE_LARGE_BYTES (Rabenseifner 2004). Ranks sharing hosts:
 * two-level (to a leader per host, the root leading its own, then among
 * the leaders to the root), as for nexar_allreduce.
 */
NEXAR_EXTERN int nexar_reduce(nexar_comm_t *comm, const void *sendbuf,
                              void *recvbuf, size_t count, nexar_dtype_t dtype,
                              nexar_op_t op, int root);
NEXAR_EXTERN int nexar_ireduce(nexar_comm_t *comm, const void *sendbuf,
                               void *recvbuf, size_t count, nexar_dtype_t dtype,
                               nexar_op_t op, int root, nexar_req_t **req);

/*
 * Every rank contributes |count| elements; recvbuf (size x count elements)
 * gets rank r's block at offset r x count on every rank. In place: sendbuf
 * = NEXAR_IN_PLACE (own block already at recvbuf + rank x count).
 * Algorithms (NEXAR_ALGO_ALLGATHER=ring|rd|hier forces one): recursive
 * doubling when the world size is a power of two and the whole result is
 * at most NEXAR_ALLGATHER_RD_MAX_BYTES (Thakur, Rabenseifner & Gropp 2005);
 * ring otherwise (Barnett et al. 1994). Ranks sharing hosts: two-level
 * (gather to a leader per host, allgatherv among the leaders, bcast on
 * each host), as for nexar_allreduce.
 */
NEXAR_EXTERN int nexar_allgather(nexar_comm_t *comm, const void *sendbuf,
                                 void *recvbuf, size_t count,
                                 nexar_dtype_t dtype);
NEXAR_EXTERN int nexar_iallgather(nexar_comm_t *comm, const void *sendbuf,
                                  void *recvbuf, size_t count,
                                  nexar_dtype_t dtype, nexar_req_t **req);
/*
 * As allgather with per-rank sizes: rank r contributes |sendcount| (which
 * must equal recvcounts[r]) elements that land at recvbuf + displs[r].
 * recvcounts and displs have size entries and must be equal on all ranks.
 * In place: sendbuf = NEXAR_IN_PLACE. Algorithm: ring.
 */
NEXAR_EXTERN int nexar_allgatherv(nexar_comm_t *comm, const void *sendbuf,
                                  size_t sendcount, void *recvbuf,
                                  const size_t *recvcounts,
                                  const size_t *displs, nexar_dtype_t dtype);
NEXAR_EXTERN int nexar_iallgatherv(nexar_comm_t *comm, const void *sendbuf,
                                   size_t sendcount, void *recvbuf,
                                   const size_t *recvcounts,
                                   const size_t *displs, nexar_dtype_t dtype,
                                   nexar_req_t **req);

/*
 * Reduces sendbuf (sum of recvcounts elements, blocks in rank order) over
 * all ranks with |op|; rank r receives block r (recvcounts[r] elements) in
 * recvbuf. recvcounts must be equal on all ranks. In place: sendbuf =
 * NEXAR_IN_PLACE (the input is in recvbuf, the result goes to its start).
 * Algorithm: ring reduce-scatter (Patarasuk & Yuan 2009), pipelined in
 * NEXAR_SEG_BYTES segments.
 */
NEXAR_EXTERN int nexar_reduce_scatter(nexar_comm_t *comm, const void *sendbuf,
                                      void *recvbuf, const size_t *recvcounts,
                                      nexar_dtype_t dtype, nexar_op_t op);
NEXAR_EXTERN int nexar_ireduce_scatter(nexar_comm_t *comm, const void *sendbuf,
                                       void *recvbuf, const size_t *recvcounts,
                                       nexar_dtype_t dtype, nexar_op_t op,
                                       nexar_req_t **req);
/* reduce_scatter with |recvcount| elements for every rank (sendbuf holds
 * size x recvcount). */
NEXAR_EXTERN int nexar_reduce_scatter_block(nexar_comm_t *comm,
                                            const void *sendbuf, void *recvbuf,
                                            size_t recvcount,
                                            nexar_dtype_t dtype, nexar_op_t op);
NEXAR_EXTERN int nexar_ireduce_scatter_block(nexar_comm_t *comm,
                                             const void *sendbuf, void *recvbuf,
                                             size_t recvcount,
                                             nexar_dtype_t dtype, nexar_op_t op,
                                             nexar_req_t **req);

/*
 * Block j (|count| elements at sendbuf + j x count) goes to rank j, which
 * stores it at recvbuf + rank x count. In place: sendbuf = NEXAR_IN_PLACE
 * (recvbuf is both). Algorithm: pairwise exchange (Thakur, Rabenseifner &
 * Gropp 2005): in step k rank r sends to r + k and receives from r - k,
 * with up to 8 steps in flight.
 */
NEXAR_EXTERN int nexar_alltoall(nexar_comm_t *comm, const void *sendbuf,
                                void *recvbuf, size_t count,
                                nexar_dtype_t dtype);
NEXAR_EXTERN int nexar_ialltoall(nexar_comm_t *comm, const void *sendbuf,
                                 void *recvbuf, size_t count,
                                 nexar_dtype_t dtype, nexar_req_t **req);
/*
 * As alltoall with per-peer sizes: sendcounts[j] elements at sendbuf +
 * sdispls[j] go to rank j, which receives them as recvcounts[r] elements at
 * recvbuf + rdispls[r]. Each pair's counts must agree. In place: sendbuf =
 * NEXAR_IN_PLACE (sendcounts/sdispls are then ignored; recvcounts and
 * rdispls describe both directions). Algorithm: pairwise exchange.
 */
NEXAR_EXTERN int nexar_alltoallv(nexar_comm_t *comm, const void *sendbuf,
                                 const size_t *sendcounts,
                                 const size_t *sdispls, void *recvbuf,
                                 const size_t *recvcounts,
                                 const size_t *rdispls, nexar_dtype_t dtype);
NEXAR_EXTERN int nexar_ialltoallv(nexar_comm_t *comm, const void *sendbuf,
                                  const size_t *sendcounts,
                                  const size_t *sdispls, void *recvbuf,
                                  const size_t *recvcounts,
                                  const size_t *rdispls, nexar_dtype_t dtype,
                                  nexar_req_t **req);

/*
 * Every rank sends |count| elements; |root| stores rank r's block at
 * recvbuf + r x count (recvbuf is ignored elsewhere). In place at the root:
 * sendbuf = NEXAR_IN_PLACE. Algorithms: binomial tree while a block is
 * smaller than NEXAR_GATHER_DIRECT_MIN_BYTES (Barnett et al. 1994), direct
 * messages to the root otherwise.
 */
NEXAR_EXTERN int nexar_gather(nexar_comm_t *comm, const void *sendbuf,
                              void *recvbuf, size_t count, nexar_dtype_t dtype,
                              int root);
NEXAR_EXTERN int nexar_igather(nexar_comm_t *comm, const void *sendbuf,
                               void *recvbuf, size_t count, nexar_dtype_t dtype,
                               int root, nexar_req_t **req);
/* As gather with per-rank sizes: rank r sends |sendcount| elements, which
 * must equal recvcounts[r] at the root; they land at recvbuf + displs[r].
 * recvcounts and displs matter at the root only (NULL elsewhere is fine).
 * Algorithm: direct. */
NEXAR_EXTERN int nexar_gatherv(nexar_comm_t *comm, const void *sendbuf,
                               size_t sendcount, void *recvbuf,
                               const size_t *recvcounts, const size_t *displs,
                               nexar_dtype_t dtype, int root);
NEXAR_EXTERN int nexar_igatherv(nexar_comm_t *comm, const void *sendbuf,
                                size_t sendcount, void *recvbuf,
                                const size_t *recvcounts, const size_t *displs,
                                nexar_dtype_t dtype, int root,
                                nexar_req_t **req);

/*
 * |root| sends block r (|count| elements at sendbuf + r x count) to rank
 * r's recvbuf (sendbuf is ignored elsewhere). In place at the root: recvbuf
 * = NEXAR_IN_PLACE (the root's block stays in sendbuf). Algorithms as
 * gather (binomial tree / direct).
 */
NEXAR_EXTERN int nexar_scatter(nexar_comm_t *comm, const void *sendbuf,
                               void *recvbuf, size_t count, nexar_dtype_t dtype,
                               int root);
NEXAR_EXTERN int nexar_iscatter(nexar_comm_t *comm, const void *sendbuf,
                                void *recvbuf, size_t count,
                                nexar_dtype_t dtype, int root,
                                nexar_req_t **req);
/* As scatter with per-rank sizes: sendcounts[r] elements at sendbuf +
 * displs[r] go to rank r, whose |recvcount| must equal them. Algorithm:
 * direct. */
NEXAR_EXTERN int nexar_scatterv(nexar_comm_t *comm, const void *sendbuf,
                                const size_t *sendcounts, const size_t *displs,
                                void *recvbuf, size_t recvcount,
                                nexar_dtype_t dtype, int root);
NEXAR_EXTERN int nexar_iscatterv(nexar_comm_t *comm, const void *sendbuf,
                                 const size_t *sendcounts, const size_t *displs,
                                 void *recvbuf, size_t recvcount,
                                 nexar_dtype_t dtype, int root,
                                 nexar_req_t **req);

/*
 * Inclusive prefix reduction: rank r gets sendbuf(0) op ... op sendbuf(r).
 * In place: sendbuf = NEXAR_IN_PLACE. Algorithm: recursive doubling
 * (Hillis & Steele 1986, as in MPICH). AVG divides the prefix by r + 1.
 */
NEXAR_EXTERN int nexar_scan(nexar_comm_t *comm, const void *sendbuf,
                            void *recvbuf, size_t count, nexar_dtype_t dtype,
                            nexar_op_t op);
NEXAR_EXTERN int nexar_iscan(nexar_comm_t *comm, const void *sendbuf,
                             void *recvbuf, size_t count, nexar_dtype_t dtype,
                             nexar_op_t op, nexar_req_t **req);
/*
 * Exclusive prefix reduction: rank r > 0 gets sendbuf(0) op ... op
 * sendbuf(r - 1). Rank 0's recvbuf is left unchanged (MPI leaves it
 * undefined). AVG is rejected (NEXAR_ERR_UNSUPPORTED). Algorithm:
 * recursive doubling, as scan.
 */
NEXAR_EXTERN int nexar_exscan(nexar_comm_t *comm, const void *sendbuf,
                              void *recvbuf, size_t count, nexar_dtype_t dtype,
                              nexar_op_t op);
NEXAR_EXTERN int nexar_iexscan(nexar_comm_t *comm, const void *sendbuf,
                               void *recvbuf, size_t count, nexar_dtype_t dtype,
                               nexar_op_t op, nexar_req_t **req);

/*
 * Returns once every rank of |comm| has entered the barrier. Runs on the
 * control lane, so bulk data in flight does not delay it. Algorithms:
 * below 5 ranks two-phase (every rank signals rank 0, which then releases
 * all); otherwise dissemination (Hensgen, Finkel & Manber 1988), ceil(log2
 * n) rounds. On a sparse topology whose links include every r, r ^ 2^k
 * pair of |comm| (a power-of-two hypercube), recursive doubling over those
 * links (docs/topology.md). NEXAR_ALGO_BARRIER=two_phase|dissemination|hier
 * forces one; ranks sharing hosts: two-level (fan-in to a leader per host,
 * a barrier among the leaders, fan-out), as for nexar_allreduce.
 */
NEXAR_EXTERN int nexar_barrier(nexar_comm_t *comm);
NEXAR_EXTERN int nexar_ibarrier(nexar_comm_t *comm, nexar_req_t **req);

/* ------------------------------------------------------------------ */
/* Compressed allreduce (docs/compression.md).
 *
 * Gradient sparsification with error feedback, for data-parallel training
 * on slow links, in the place of a DDP communication hook: each rank sends
 * only k of the |count| elements of its tensor each step and keeps what it
 * did not send in a residual that it adds to the next step's tensor, so
 * nothing is lost, only delayed (Seide et al. 2014, "1-bit stochastic
 * gradient descent and its application to data-parallel distributed
 * training of speech DNNs"; Stich, Cordonnier & Jaggi 2018, "Sparsified SGD
 * with memory"; Lin et al. 2018, "Deep Gradient Compression").
 *
 * A compressor holds that state for one tensor: its communicator, dtype,
 * element count, kind, k, the residual (|count| float32) and, for random-k,
 * the step number. Create one per tensor (per gradient bucket) and call
 * nexar_allreduce_compressed with it once per step on every rank of the
 * communicator, in the same collective order as the communicator's other
 * collectives.
 *
 * Each call, on each rank r: acc = input + residual (in float32);
 * - TOPK: the k elements of acc with the largest magnitude |acc| (ties to
 *   the lower index; NaN counts as largest) are selected; rank r sends
 *   them as k (uint32 index, value in |dtype|) pairs to every rank through
 *   one nexar_allgather of k x (4 + dtype size) bytes per rank; every rank
 *   adds the pairs, in float32, in rank order 0..n-1, into a zero tensor.
 *   Every rank computes the same bit-identical result, which has at most
 *   n x k non-zero elements. Bytes each rank sends per call (ring or
 *   recursive doubling): (n - 1) x k x (4 + dtype size).
 * - RANDK: every rank selects the same k indices, drawn without
 *   replacement from (seed, step) by Knuth's selection sampling (TAOCP
 *   vol. 2, 3.4.2, algorithm S) over splitmix64 (Steele, Lea & Flood 2014)
 *   seeded with seed ^ (step x 0x9e3779b97f4a7c15); the k float32 values
 *   acc[index] are summed by one nexar_allreduce (float32, SUM) and
 *   scattered back into a zero tensor. Bytes per rank: those of a float32
 *   allreduce of k elements (ring: 2 (n - 1) / n x 4k).
 * The residual becomes acc minus what was sent (for float16 and bfloat16
 * the value sent is acc rounded to |dtype|, so the rounding error stays in
 * the residual too). The sum is formed in float32 and, for NEXAR_AVG,
 * divided by n; it is rounded to |dtype| once, when it is stored.
 * Over steps, sum of every rank's input == sum of the results (with SUM)
 * + sum of every rank's final residual, up to float32 rounding.
 */

typedef struct nexar_compressor nexar_compressor_t;

/* What a compressor sends. */
typedef enum nexar_compress_kind {
  NEXAR_COMPRESS_TOPK = 1, /* the k largest magnitudes, sparse exchange */
  NEXAR_COMPRESS_RANDK = 2 /* k shared random indices, dense exchange */
} nexar_compress_kind_t;

/*
 * Creates in *out a compressor for tensors of |count| elements (1 ..
 * UINT32_MAX) of |dtype| (NEXAR_FLOAT32, NEXAR_FLOAT16 or
 * NEXAR_BFLOAT16) reduced over |comm|, sending |k| elements per rank and
 * call (1 .. count), or, when |k| is 0, k = ceil(|ratio| x count) with
 * |ratio| in (0, 1] (the compression ratio: 0.01 sends 1%). |seed| picks
 * random-k's indices and must be equal on every rank (TOPK ignores it).
 * The residual starts at zero and the step at 0. Local: nothing is sent.
 * Memory: count x 4 bytes of residual and 8 x k bytes of indices and
 * saved values; TOPK adds 256 KiB of selection scratch, n x k x (4 +
 * dtype size) bytes of exchange buffer and, for float16 and bfloat16,
 * count x 4 bytes of float32 sum; RANDK adds 4 x k bytes.
 * Returns NEXAR_OK; NEXAR_ERR_INVALID_ARG (NULL comm or out, a bad kind,
 * count 0 or above UINT32_MAX, k above count, k 0 with a ratio outside
 * (0, 1], buffers whose size would overflow); NEXAR_ERR_UNSUPPORTED (a
 * dtype other than the three); NEXAR_ERR_NOMEM. Limits are checked before
 * anything is allocated; on error *out is NULL and the message is in
 * nexar_comm_last_error(comm). Thread-safe.
 */
NEXAR_EXTERN int nexar_compressor_create(nexar_comm_t *comm,
                                         nexar_compress_kind_t kind,
                                         nexar_dtype_t dtype, size_t count,
                                         size_t k, double ratio, uint64_t seed,
                                         nexar_compressor_t **out);

/* Frees *c (may be NULL or hold NULL) and sets *c to NULL. Local. Returns
 * NEXAR_OK. Not while a call uses it. */
NEXAR_EXTERN int nexar_compressor_free(nexar_compressor_t **c);

/*
 * The compressor's k (elements each rank sends per call) in *k, and the
 * calls it has completed in *steps; either may be NULL. Returns NEXAR_OK
 * or NEXAR_ERR_INVALID_ARG (NULL c).
 */
NEXAR_EXTERN int nexar_compressor_info(const nexar_compressor_t *c, size_t *k,
                                       uint64_t *steps);

/*
 * Copies the residual (|count| float32: what this rank has not sent yet)
 * to |out| when it is not NULL, for checkpoints and checks; |count| must
 * be the compressor's. Returns NEXAR_OK or NEXAR_ERR_INVALID_ARG. Not
 * while a call uses the compressor.
 */
NEXAR_EXTERN int nexar_compressor_residual(const nexar_compressor_t *c,
                                           float *out, size_t count);

/*
 * Compressed allreduce of |count| elements of |dtype| over |comm| with
 * compressor |c| (algorithms above); every rank gets the result in
 * |recvbuf| (a dense tensor, zero where no rank sent anything). In place:
 * sendbuf = NEXAR_IN_PLACE or sendbuf == recvbuf. |op| is NEXAR_SUM or
 * NEXAR_AVG (the sum divided by the world size). |comm|, |count| and
 * |dtype| must be those |c| was created with; the communicator's size may
 * have changed since (a rebuild): the exchange buffer then grows. Buffers
 * are host memory (the selection runs on the calling thread).
 * Returns NEXAR_OK; at once, with neither the buffers nor |c| changed:
 * NEXAR_ERR_INVALID_ARG (NULL pointers; |comm|, |count| or |dtype| other
 * than the compressor's), NEXAR_ERR_UNSUPPORTED (|op| not SUM or AVG, a
 * buffer in device memory), NEXAR_ERR_NOMEM; after the exchange started:
 * the error of the allgather or allreduce (as any collective), or
 * NEXAR_ERR_PROTO when a peer sent an index out of range. On any error
 * the residual gets back what this call took from it to send, so it holds
 * the old residual plus this call's input, and the step does not advance;
 * |recvbuf| is then unspecified. The message (nexar_comm_last_error)
 * names the rank, the communicator and the operation (the exchange's
 * errors: the collective and its number, as any collective's).
 * Thread-safety: a collective on |comm| (same order on every rank); one
 * call at a time per compressor.
 */
NEXAR_EXTERN int nexar_allreduce_compressed(nexar_comm_t *comm,
                                            const void *sendbuf, void *recvbuf,
                                            size_t count, nexar_dtype_t dtype,
                                            nexar_op_t op,
                                            nexar_compressor_t *c);

/*
 * Payload bytes this process has sent on |comm| to other processes since
 * it was created, in *bytes: the data of every point-to-point message and
 * collective step it started (not headers, acknowledgements, control
 * messages or retransmissions; a relayed message counts once, at its
 * origin). Returns NEXAR_OK or NEXAR_ERR_INVALID_ARG. Thread-safe.
 */
NEXAR_EXTERN int nexar_comm_bytes_sent(const nexar_comm_t *comm,
                                       uint64_t *bytes);

/* ------------------------------------------------------------------ */
/* Remote procedure calls by function id (docs/rpc.md).
 *
 * A process registers handlers by 16-bit function id; any rank of a
 * communicator can then call one on any rank (itself included) with an
 * opaque request payload and get an opaque response payload back. Requests
 * are served by the library: each context owns a pool of handler threads
 * that runs up to NEXAR_RPC_THREADS handlers at once, taking requests in
 * the order they arrived (never on the progress thread, never under the
 * engine lock). A handler waiting for an RPC call of its own (nested call)
 * does not count against NEXAR_RPC_THREADS and a thread is added for it
 * (at most 64 more), so call cycles through busy processes (A->B->A)
 * complete. A request carries the time left to its caller's deadline; one
 * whose deadline has passed before a thread takes it is dropped without
 * running or answering. Requests that arrive while NEXAR_RPC_QUEUE requests
 * are already being received, waiting or running are answered at once with
 * NEXAR_ERR_RPC_BUSY. Payloads (request and response) are bounded by
 * NEXAR_RPC_MAX_BYTES. Buffers are host memory (the device adapter is not
 * used).
 */

/*
 * An RPC handler. Runs on one of the context's RPC handler threads, maybe
 * at the same time as other handlers (of the same function too), so it
 * must be thread-safe. Gets the |req_bytes| request bytes at |req| (valid
 * during the call only) and writes at most |resp_cap| (=
 * NEXAR_RPC_MAX_BYTES) response bytes to |resp|, setting *resp_bytes (0 on
 * entry). |resp| is all zeros on entry: bytes claimed in *resp_bytes but
 * not written are sent as zeros, never another caller's data. |caller| is
 * the caller's rank in the communicator the call was made on. Returns >= 0
 * for success (the response is sent), or a negative code: the caller then
 * gets NEXAR_ERR_RPC_HANDLER with this code in its status's rpc_code, and
 * no response bytes. nexar_rpc_time_left_ms gives the time left to the
 * caller's deadline. A handler may call nexar functions (RPCs to any rank,
 * its own included: see nested calls above; their deadline is at most the
 * one of the call it serves) except nexar_finalize.
 */
typedef int (*nexar_rpc_handler_t)(void *user_data, int caller, uint16_t fn_id,
                                   const void *req, size_t req_bytes,
                                   void *resp, size_t resp_cap,
                                   size_t *resp_bytes);

/*
 * Registers |handler| with |user_data| for |fn_id| on the context of
 * |comm| (handlers are per process: one table for every communicator).
 * Returns NEXAR_OK; NEXAR_ERR_INVALID_ARG (NULL comm or handler);
 * NEXAR_ERR_INVALID_USAGE when |fn_id| already has a handler (unregister
 * it first); NEXAR_ERR_NOMEM. Thread-safe.
 */
NEXAR_EXTERN int nexar_rpc_register(nexar_comm_t *comm, uint16_t fn_id,
                                    nexar_rpc_handler_t handler,
                                    void *user_data);

/*
 * Removes the handler of |fn_id|. When it returns, the handler is not
 * running and will not run again (unless called from that handler itself);
 * later calls of |fn_id| get NEXAR_ERR_RPC_UNKNOWN_FN. Returns NEXAR_OK,
 * NEXAR_ERR_INVALID_ARG (NULL comm, or no handler for |fn_id|).
 * Thread-safe.
 */
NEXAR_EXTERN int nexar_rpc_unregister(nexar_comm_t *comm, uint16_t fn_id);

/*
 * Starts a call of |fn_id| on rank |rank| of |comm| (may be this rank)
 * with the |req_bytes| bytes at |req_buf| (copied during the call: the
 * buffer may be reused at once). The response goes to |resp_buf| (room for
 * |resp_cap| bytes, untouched until the request completes). |timeout_ms|
 * > 0 is the call's deadline from now; <= 0 means NEXAR_OP_TIMEOUT_MS;
 * called from a handler, the deadline is at most that of the call the
 * handler serves. The request carries the time left to the deadline, and
 * the callee drops it unanswered if that has passed before it runs.
 * Complete *req with nexar_wait / nexar_test: status.bytes is the
 * response length, status.source the callee, status.tag |fn_id|,
 * status.rpc_code the handler's return value. Their result: NEXAR_OK;
 * NEXAR_ERR_RPC_UNKNOWN_FN (no handler for |fn_id| on |rank|);
 * NEXAR_ERR_RPC_HANDLER (the handler returned status.rpc_code < 0);
 * NEXAR_ERR_RPC_BUSY (the callee's queue was full: try again later);
 * NEXAR_ERR_TIMEOUT (no response by the deadline; a late response is
 * dropped); NEXAR_ERR_TRUNCATE (the response is longer than |resp_cap|:
 * the first resp_cap bytes are stored, status.bytes is the full length);
 * NEXAR_ERR_INVALID_ARG (the request exceeded the callee's
 * NEXAR_RPC_MAX_BYTES); NEXAR_ERR_PEER_FAILED, NEXAR_ERR_CLOSED (the callee
 * failed or its connection closed while the call waited: a killed callee
 * is found by the next heartbeat, up to NEXAR_HEARTBEAT_MS after the kill,
 * or NEXAR_HEARTBEAT_TIMEOUT_MS where ICMP is dropped); NEXAR_ERR_REVOKED
 * (|comm| was revoked because any member failed, the callee or not: the
 * call is not sent; under NEXAR_RECOVERY=abort, the default, every later
 * call on |comm| fails so); NEXAR_ERR_EXCLUDED, NEXAR_ERR_ABORTED. A
 * failed call frees everything it allocated. The message
 * (nexar_comm_last_error) names the local rank, the peer rank, the
 * function id and the call id (a revoked communicator: why it was
 * revoked).
 * Returns NEXAR_OK, or at once NEXAR_ERR_INVALID_ARG (NULL comm or req,
 * bad rank, NULL buffer with a non-zero size, |req_bytes| above
 * NEXAR_RPC_MAX_BYTES: refused before anything is allocated or sent),
 * NEXAR_ERR_NOMEM.
 */
NEXAR_EXTERN int nexar_rpc_icall(nexar_comm_t *comm, int rank, uint16_t fn_id,
                                 const void *req_buf, size_t req_bytes,
                                 void *resp_buf, size_t resp_cap,
                                 int timeout_ms, nexar_req_t **req);

/*
 * Blocking form of nexar_rpc_icall: returns the call's result, and the
 * response length in *resp_bytes (may be NULL; set also with
 * NEXAR_ERR_TRUNCATE). The handler's code of a NEXAR_ERR_RPC_HANDLER is
 * in the message (use nexar_rpc_icall + nexar_wait to get it as a value).
 * |timeout_ms| in milliseconds (<= 0: NEXAR_OP_TIMEOUT_MS). Thread safety
 * as nexar_rpc_icall.
 */
NEXAR_EXTERN int nexar_rpc_call(nexar_comm_t *comm, int rank, uint16_t fn_id,
                                const void *req_buf, size_t req_bytes,
                                void *resp_buf, size_t resp_cap,
                                size_t *resp_bytes, int timeout_ms);

/*
 * In an RPC handler: the milliseconds left until the deadline of the call
 * it serves (the caller's timeout, carried by the request as a time budget
 * and counted from its arrival, so it ends no earlier than the caller's),
 * 0 once it has passed: the caller has stopped waiting and the response
 * will be dropped. -1 when the calling thread is not running a handler.
 * Thread-safe (it reads the calling thread's own handler state).
 */
NEXAR_EXTERN int64_t nexar_rpc_time_left_ms(void);

/* ------------------------------------------------------------------ */
/* Device memory (docs/device-adapters.md).
 *
 * Every point-to-point and collective call accepts buffers in device memory
 * (a GPU's memory, or any memory the CPU must not touch directly). Each
 * context has one device adapter, a table of operations that tells device
 * memory from host memory and copies between the two. The default is the
 * CPU adapter: every buffer is host memory and no adapter operation is
 * called at all. With another adapter, each buffer a call uses on this rank
 * is classified once; a device buffer is staged through a host bounce
 * buffer as large as the byte range the call touches:
 * - at the call (nexar_i* or the blocking form), on the calling thread:
 *   the bytes the call reads (a send buffer; a receive buffer in place or
 *   at a bcast root) are copied to the bounce buffer with copy_to_host;
 * - at completion (nexar_wait, nexar_test, nexar_waitall or the blocking
 *   form, before it returns), on the thread that completes the request:
 *   the bytes the call defines in a receive buffer are copied back with
 *   copy_from_host, then synchronize is called once. Bytes a call must
 *   leave alone (gaps between v-form blocks, exscan's rank 0, a receive
 *   longer than the message) are not written. After an error other than
 *   NEXAR_ERR_TRUNCATE nothing is copied back (receive buffers are then
 *   unspecified, as for host memory).
 * Only the calling thread ever runs adapter operations; the progress
 * thread works on host memory only. The data of a device send buffer is
 * therefore captured when the call is made: the buffer may be reused as
 * soon as a non-blocking call returns. Device work that produces a send
 * buffer must be finished (or ordered before the adapter's copies) when
 * the call is made, as with CUDA-aware MPI.
 *
 * Adapter operations return NEXAR_OK or a negative NEXAR_ERR_* code; the
 * call that ran them returns that code (an unknown negative value becomes
 * NEXAR_ERR_DEVICE), and nexar_comm_last_error() names the rank, the
 * operation, the adapter and the byte count. A failure while staging in
 * leaves the call without effect on this rank (a collective then cannot
 * complete on the others); a failure while staging out is returned by the
 * nexar_wait / nexar_test that completes the request.
 */

/* What an adapter's classify operation reports for a buffer. */
typedef enum nexar_mem_kind {
  NEXAR_MEM_HOST = 0,  /* host memory: the engine uses it directly */
  NEXAR_MEM_DEVICE = 1 /* device memory: staged through host memory */
} nexar_mem_kind_t;

#define NEXAR_DEVICE_OPS_VERSION 1

/*
 * A device adapter. |user_data| is the pointer given to
 * nexar_device_adapter_set, passed to every operation. Sizes are in bytes,
 * |count| in elements of |dtype|. Operations are called from the
 * application's threads that call nexar functions, possibly from several
 * at once, never from the progress thread; they must be thread-safe and
 * must not call nexar functions on the same context.
 */
typedef struct nexar_device_ops {
  size_t size;      /* sizeof(nexar_device_ops_t) */
  uint32_t version; /* NEXAR_DEVICE_OPS_VERSION */
  const char *name; /* for messages ("cuda"); may be NULL; must stay
                       valid while the adapter is installed */
  /* Required. NEXAR_MEM_DEVICE when [ptr, ptr + bytes) is device memory,
   * NEXAR_MEM_HOST when it is host memory, or a negative NEXAR_ERR_* code
   * (for instance NEXAR_ERR_INVALID_ARG for a range that straddles the end
   * of an allocation), which the call returns. Called once per non-empty
   * buffer of a call, before anything else. */
  int (*classify)(void *user_data, const void *ptr, size_t bytes);
  /* Optional (both or neither). Host memory for bounce buffers, for
   * instance pinned memory that makes copies faster. alloc_host returns
   * NULL when it cannot allocate (the engine then uses aligned_alloc);
   * free_host receives the size that was allocated. Bounce buffers are
   * kept for reuse up to NEXAR_DEVICE_STAGE_CACHE_BYTES per context. */
  void *(*alloc_host)(void *user_data, size_t bytes);
  void (*free_host)(void *user_data, void *ptr, size_t bytes);
  /* Required. Copies |bytes| from device memory to host memory; the
   * copy must be complete when it returns. */
  int (*copy_to_host)(void *user_data, void *dst_host, const void *src_dev,
                      size_t bytes);
  /* Required. Copies |bytes| from host memory to device memory. It may
   * return before the copy is complete: |src_host| stays untouched until
   * synchronize has returned. */
  int (*copy_from_host)(void *user_data, void *dst_dev, const void *src_host,
                        size_t bytes);
  /* Optional. Completes every copy_from_host this thread issued, so that
   * the data is visible to later device work. Called once per completed
   * request that copied data back, after its last copy_from_host. */
  int (*synchronize)(void *user_data);
  /* Optional. dst[i] = dst[i] op src[i] for |count| elements, both in
   * device memory, with the semantics of nexar's host kernels; used by
   * nexar_reduce_local. NEXAR_ERR_UNSUPPORTED declines a (dtype, op) pair,
   * which is then staged and reduced on the host. Collectives stage their
   * device buffers and always reduce on the host, so that every rank and
   * algorithm combines elements in the same order with the same
   * arithmetic (bit-identical results). */
  int (*reduce)(void *user_data, void *dst_dev, const void *src_dev,
                size_t count, nexar_dtype_t dtype, nexar_op_t op);
} nexar_device_ops_t;

/*
 * Makes |ops| (copied; |ops| need not outlive the call) with |user_data|
 * the device adapter of |ctx|. |ops| NULL restores the CPU adapter.
 * Requests already started finish with the adapter they started with; the
 * cache of bounce buffers is emptied. Not to be called concurrently with
 * other calls on |ctx| (set it right after nexar_init). NEXAR_DEVICE
 * (docs/configuration.md) picks an adapter at nexar_init instead.
 * Returns NEXAR_OK, or NEXAR_ERR_INVALID_ARG (NULL ctx, a table whose size
 * or version is too small, a missing required operation, alloc_host
 * without free_host or the reverse); then nothing changed.
 */
NEXAR_EXTERN int nexar_device_adapter_set(nexar_ctx_t *ctx,
                                          const nexar_device_ops_t *ops,
                                          void *user_data);

/*
 * Copies the active adapter of |ctx| to *ops and its user data to
 * *user_data (either may be NULL). Same thread rule as
 * nexar_device_adapter_set. Returns NEXAR_OK or NEXAR_ERR_INVALID_ARG.
 */
NEXAR_EXTERN int nexar_device_adapter_get(nexar_ctx_t *ctx,
                                          nexar_device_ops_t *ops,
                                          void **user_data);

/* The CPU adapter (the default): every buffer is host memory; copies are
 * memcpy. Static, never NULL. Thread-safe. */
NEXAR_EXTERN const nexar_device_ops_t *nexar_device_adapter_cpu(void);

/*
 * The CUDA adapter, in *ops (static). It loads the CUDA runtime
 * (libcudart) with dlopen on first use, so a program built with it runs
 * where CUDA is absent. classify uses cudaPointerGetAttributes (device and
 * managed memory are device memory, everything else host memory); copies
 * use cudaMemcpy / cudaMemcpyAsync on the default stream, and
 * synchronize cudaStreamSynchronize; bounce buffers are pinned
 * (cudaHostAlloc). It has no reduce operation. Thread-safe.
 * Returns NEXAR_OK; NEXAR_ERR_UNSUPPORTED (*ops = NULL) when libnexar was
 * built without it (NEXAR_CUDA=OFF), the runtime cannot be loaded or
 * reports no device; the reason is in nexar_last_error(); NEXAR_ERR_INVALID_ARG
 * for NULL |ops|.
 */
NEXAR_EXTERN int nexar_device_adapter_cuda(const nexar_device_ops_t **ops);

/*
 * dst[i] = dst[i] op src[i] for |count| elements on this process, without
 * communication (as MPI_Reduce_local), with the device adapter of |ctx|:
 * when both buffers are device memory and the adapter has a reduce
 * operation that accepts the pair, on the device; otherwise device
 * operands are staged through host memory and reduced by nexar's host
 * kernels (dst copied back, then synchronize). |src| == |dst| is allowed.
 * On the calling thread; thread-safe. Returns NEXAR_OK;
 * NEXAR_ERR_INVALID_ARG (NULL ctx or buffer, bad dtype);
 * NEXAR_ERR_UNSUPPORTED (the (dtype, op) pair, or NEXAR_AVG, which needs a
 * divisor); NEXAR_ERR_NOMEM; an adapter error (message in
 * nexar_comm_last_error(nexar_comm_world(ctx))).
 */
NEXAR_EXTERN int nexar_reduce_local(nexar_ctx_t *ctx, const void *src,
                                    void *dst, size_t count,
                                    nexar_dtype_t dtype, nexar_op_t op);

/* ------------------------------------------------------------------ */
/* Seed: discovery and admission only; never on the data path. */

typedef struct nexar_seed nexar_seed_t;

typedef struct nexar_seed_config {
  size_t size;             /* sizeof(nexar_seed_config_t) */
  const char *listen_addr; /* "ip:port" (port 0 = any); default 127.0.0.1:0 */
  const char *secret;      /* cluster secret (else NEXAR_SECRET / _FILE) */
  const char *secret_file;
  int world_size; /* ranks to admit, 1..2^20 (else NEXAR_WORLD_SIZE) */
  int timeout_ms; /* formation deadline (else bootstrap timeout) */
  /* Elastic mode when above world_size: after formation the seed stays up
   * and admits joiners (NEXAR_JOIN=1) at the members' elastic checkpoints
   * up to this many members (else NEXAR_MAX_WORLD_SIZE; docs/elastic.md). */
  int max_world_size;
} nexar_seed_config_t;

#define NEXAR_SEED_CONFIG_INIT                                               \
  {                                                                          \
    sizeof(nexar_seed_config_t), NULL, NULL, NULL, NEXAR_UNSET, NEXAR_UNSET, \
        NEXAR_UNSET                                                          \
  }

/*
 * Starts a seed in a background thread of this process. It accepts workers,
 * checks the secret (HMAC bound to the TLS session, compared in constant
 * time), assigns ranks (NEXAR_RANK requests first, then arrival order) and,
 * once |world_size| workers have joined, sends each its rank and the roster.
 * Its work is O(1) per worker apart from formation, O(world_size) once (the
 * roster, encoded once and shared by every worker's WELCOME; each worker
 * still receives the whole roster, about 80 bytes per rank).
 * Returns NEXAR_OK, NEXAR_ERR_INVALID_ARG (world size outside 1..2^20, a
 * bad address, secret or max world size), NEXAR_ERR_SYS (bind failed),
 * NEXAR_ERR_NOMEM.
 */
NEXAR_EXTERN int nexar_seed_start(const nexar_seed_config_t *cfg,
                                  nexar_seed_t **seed);
/* The UDP port the seed listens on (useful with port 0). */
NEXAR_EXTERN int nexar_seed_port(const nexar_seed_t *seed);
/* The max world size of an elastic seed (ranks), or 0 when it is not
 * elastic (or |seed| is NULL). Thread-safe. */
NEXAR_EXTERN int nexar_seed_max_world_size(const nexar_seed_t *seed);
/*
 * Waits until the cluster is formed (every welcome delivered) or |timeout_ms|
 * passes (negative: wait for the formation deadline). An elastic seed goes on
 * admitting joiners after this returns, until nexar_seed_stop; every seed
 * goes on answering live inspection (nexar-inspect, docs/debugging.md)
 * until then. Returns
 * NEXAR_OK, NEXAR_ERR_TIMEOUT (the message says who is missing), or the
 * formation's error. Details: nexar_seed_last_error().
 */
NEXAR_EXTERN int nexar_seed_wait(nexar_seed_t *seed, int timeout_ms);
/* Text of the seed's last error, or "". */
NEXAR_EXTERN const char *nexar_seed_last_error(const nexar_seed_t *seed);
/* Stops the seed thread and frees it. Always returns NEXAR_OK. */
NEXAR_EXTERN int nexar_seed_stop(nexar_seed_t *seed);

/*
 * The version of the library actually loaded, "MAJOR.MINOR.PATCH" (static
 * text, never NULL); compare it with NEXAR_VERSION_STRING, the version of
 * the header the caller was compiled with. Needs no context; never fails.
 * Thread-safe.
 */
NEXAR_EXTERN const char *nexar_version(void);

#ifdef __cplusplus
}
#endif
#endif /* NEXAR_H */
