/*
 * Private header of nexar's MPI layer (libnexar-mpi): how MPI handles map
 * to objects over the public nexar API (include/nexar.h). Not installed.
 *
 * Handles (mpi.h): predefined handles are constants below NXM_PREDEF_MAX
 * (the MPI 5.0 ABI values) resolved through static tables; every other
 * handle is a pointer to one of the structs below, whose first field is a
 * magic number checked by the nxm_*_get lookups (a freed object has its
 * magic cleared). A lookup never dereferences a predefined constant or a
 * NULL, so an invalid handle gives an MPI error class, never a crash.
 *
 * Every MPI function follows one pattern:
 *
 *   int MPI_Foo(..., MPI_Comm comm)
 *   {
 *     nxm_comm_t *c = nxm_comm_get(comm);
 *     if (!c) return nxm_err(NULL, MPI_ERR_COMM, "MPI_Foo", "invalid comm");
 *     ... nexar call rc ...
 *     if (rc != NEXAR_OK) return nxm_err_nexar(c, "MPI_Foo", rc);
 *     return MPI_SUCCESS;
 *   }
 *
 * nxm_err applies the communicator's error handler (MPI_ERRORS_ARE_FATAL
 * prints "nexar-mpi: MPI_Foo (rank R): text" and aborts the job), else
 * returns the class.
 *
 * Thread-safety: the layer grants MPI_THREAD_MULTIPLE (nexar is
 * thread-safe); reference counts are atomic and the few global tables
 * (keyvals, the attached buffer) are under nxm_lock; the list of active
 * schedules has its own lock, and a request is stepped by one thread at a
 * time (its busy flag, mpi/progress.c).
 */
#ifndef NEXAR_MPI_INT_H
#define NEXAR_MPI_INT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "mpi.h"
#include "nexar.h"

/* Handles below this are predefined constants (never dereferenced). */
#define NXM_PREDEF_MAX 0x1000u
#define NXM_IS_PREDEF(h) ((uintptr_t)(h) < NXM_PREDEF_MAX)

/* The live-handle table (mpi/handle.c). Every object the layer hands out
 * begins with its uint32_t magic. nxm_obj_open sets |magic| and enters
 * |obj| (MPI_SUCCESS, or MPI_ERR_NO_MEM: not entered); nxm_obj_close takes
 * it out and sets NXM_MAGIC_DEAD, before the object is freed. nxm_obj_is:
 * whether |h| is a live object with |magic|; it reads the object only once
 * the table holds it, so a freed, forged or stray handle is never
 * dereferenced. Thread-safe. */
int nxm_obj_open(void *obj, uint32_t magic);
void nxm_obj_close(void *obj);
int nxm_obj_is(const void *h, uint32_t magic);

#define NXM_MAGIC_COMM 0x4e4d434du  /* "NMCM" */
#define NXM_MAGIC_GROUP 0x4e4d4750u /* "NMGP" */
#define NXM_MAGIC_DTYPE 0x4e4d4454u /* "NMDT" */
#define NXM_MAGIC_REQ 0x4e4d5251u   /* "NMRQ" */
#define NXM_MAGIC_OP 0x4e4d4f50u    /* "NMOP" */
#define NXM_MAGIC_ERRH 0x4e4d4548u  /* "NMEH" */
#define NXM_MAGIC_INFO 0x4e4d494eu  /* "NMIN" */
#define NXM_MAGIC_DEAD 0xdeadbeefu  /* set when an object is freed */

/* "No nexar datatype / op": the layer handles it itself. */
#define NXM_DT_NONE (-1)
#define NXM_OP_NONE (-1)

/* Largest count, block count, group size or array length accepted before
 * anything is allocated from it. */
#define NXM_MAX_ITEMS (1 << 28)

/* ---------------------------------------------------------------- */
/* Global state (mpi/init.c). */

typedef struct nxm_comm nxm_comm_t;

typedef struct nxm_state {
  atomic_int initialized; /* MPI_Init ran */
  atomic_int finalized;   /* MPI_Finalize ran */
  int thread_level;       /* provided level */
  nexar_ctx_t *ctx;
  nexar_seed_t *seed;  /* singleton: the in-process seed, else NULL */
  nxm_comm_t *world;   /* MPI_COMM_WORLD */
  nxm_comm_t *self;    /* MPI_COMM_SELF */
  int world_rank;      /* rank in MPI_COMM_WORLD */
  int world_size;      /* size of MPI_COMM_WORLD */
  double wtime_origin; /* MPI_Wtime's zero (CLOCK_MONOTONIC seconds) */
} nxm_state_t;

extern nxm_state_t nxm_g;

/* Global lock of the layer's own tables (keyvals, attached buffer). */
void nxm_lock(void);
void nxm_unlock(void);

/* MPI_ERR_OTHER (with message) when MPI_Init has not run or MPI_Finalize
 * has: every function that needs nexar checks it first. */
int nxm_check_init(const char *fn);

/* ---------------------------------------------------------------- */
/* Groups (mpi/group.c): ordered lists of processes named by their nexar
 * stable id (nexar_comm_id_of: the world rank at join), so groups of
 * different communicators compare and translate directly. */

typedef struct nxm_group {
  uint32_t magic; /* NXM_MAGIC_GROUP */
  atomic_int refs;
  int size;
  int rank; /* this process's rank in the group, or MPI_UNDEFINED */
  int *ids; /* |size| stable ids, ids[i] = process of group rank i */
} nxm_group_t;

/* The group behind |h| (MPI_GROUP_EMPTY included), or NULL. */
nxm_group_t *nxm_group_get(MPI_Group h);
/* New group of |n| ids (copied); refs = 1. NULL when out of memory. */
nxm_group_t *nxm_group_new(int n, const int *ids);
void nxm_group_ref(nxm_group_t *g);
void nxm_group_unref(nxm_group_t *g);
/* Rank of stable id |id| in |g|, or MPI_UNDEFINED. */
int nxm_group_rank_of(const nxm_group_t *g, int id);

/* ---------------------------------------------------------------- */
/* Error handlers (mpi/errors.c). */

typedef struct nxm_errh {
  uint32_t magic; /* NXM_MAGIC_ERRH */
  atomic_int refs;
  int kind; /* NXM_ERRH_FATAL, _RETURN, _USER */
  MPI_Comm_errhandler_function *fn;
} nxm_errh_t;

enum { NXM_ERRH_FATAL = 1, NXM_ERRH_RETURN = 2, NXM_ERRH_USER = 3 };

/* The error handler behind |h| (predefined included), or NULL. */
nxm_errh_t *nxm_errh_get(MPI_Errhandler h);
void nxm_errh_ref(nxm_errh_t *e);
void nxm_errh_unref(nxm_errh_t *e);

/* ---------------------------------------------------------------- */
/* Communicators (mpi/comm.c, mpi/topo.c). Intra-communicators only. */

typedef struct nxm_attr {
  int keyval;
  void *value;
  struct nxm_attr *next;
} nxm_attr_t;

/* Virtual topology of a communicator (MPI_Cart_create,
 * MPI_Dist_graph_create(_adjacent), MPI_Graph_create). */
typedef struct nxm_topo {
  int kind; /* MPI_CART, MPI_DIST_GRAPH or MPI_GRAPH */
  /* MPI_CART */
  int ndims;
  int *dims;    /* |ndims| */
  int *periods; /* |ndims| */
  /* MPI_DIST_GRAPH (and MPI_GRAPH, stored as its neighbour lists):
   * ranks in this communicator this process receives from (|indegree|)
   * and sends to (|outdegree|), in the order the neighbourhood
   * collectives use; weights NULL when unweighted. */
  int indegree, outdegree;
  int *sources, *sourceweights;
  int *destinations, *destweights;
  int weighted;
  /* MPI_GRAPH: the whole graph as given to MPI_Graph_create. */
  int nnodes, nedges;
  int *index, *edges;
} nxm_topo_t;

struct nxm_comm {
  uint32_t magic; /* NXM_MAGIC_COMM */
  atomic_int refs;
  /* User traffic: MPI p2p and the collectives nexar implements. */
  nexar_comm_t *nc;
  /* A duplicate of |nc| for the layer's own p2p traffic (collectives the
   * layer builds from point-to-point messages: user ops, alltoallw,
   * neighbourhood collectives...), so that a user MPI_ANY_TAG receive on
   * |nc| never takes one of them. Made with |nc|; any tag may be used on
   * it, but calls on it must follow the collective order of the MPI
   * communicator (every rank issues the same sequence). */
  nexar_comm_t *cc;
  /* Next tag for a layer-built collective on |cc|: every rank takes the
   * same value for the same collective (they run in the same order). */
  atomic_uint coll_seq;
  int rank, size;
  nxm_group_t *group; /* the members, in rank order */
  nxm_errh_t *errh;   /* never NULL */
  nxm_topo_t *topo;   /* NULL when no topology */
  nxm_attr_t *attrs;  /* cached attributes (MPI_Comm_set_attr) */
  int predefined;     /* MPI_COMM_WORLD or MPI_COMM_SELF: never freed */
  char name[MPI_MAX_OBJECT_NAME];
};

/* The communicator behind |h| (MPI_COMM_WORLD / _SELF included), or NULL
 * for MPI_COMM_NULL, a freed or invalid handle, or before MPI_Init. */
nxm_comm_t *nxm_comm_get(MPI_Comm h);
/* The handle of |c| (the predefined constant for world and self). */
MPI_Comm nxm_comm_handle(nxm_comm_t *c);
/* Wraps the nexar communicator |nc| (taking ownership; NULL: this process
 * is not a member, *out = NULL and MPI_SUCCESS) into a new MPI
 * communicator that inherits |parent|'s error handler: makes |cc| (a
 * collective over |nc|'s members), the group and the rank/size. Returns
 * MPI_SUCCESS or an error class (then |nc| is freed). */
int nxm_comm_wrap(nxm_comm_t *parent, nexar_comm_t *nc, nxm_comm_t **out);
/* Drops one reference; the last frees nc, cc, group, topology, attrs. */
void nxm_comm_unref(nxm_comm_t *c);
/* A fresh tag for one layer-built collective on |c->cc|. */
int nxm_coll_tag(nxm_comm_t *c);
/* Frees a topology (NULL: nothing). */
void nxm_topo_free(nxm_topo_t *t);
/* Copies |from|'s topology to |to| (MPI_Comm_dup). MPI_SUCCESS or
 * MPI_ERR_NO_MEM. */
int nxm_topo_copy(const nxm_comm_t *from, nxm_comm_t *to);
/* Attributes (mpi/attr.c): run the delete callbacks and drop every
 * attribute; copy the attributes whose keyval copies (MPI_Comm_dup). */
void nxm_attr_delete_all(nxm_comm_t *c);
int nxm_attr_copy_all(nxm_comm_t *from, nxm_comm_t *to);

/* ---------------------------------------------------------------- */
/* Datatypes (mpi/dtype.c, mpi/dtype_pack.c).
 *
 * Every datatype, predefined or derived, is flattened at creation into a
 * typemap: byte blocks (displacement from the buffer, length) in typemap
 * order, adjacent blocks merged. One element of the type occupies
 * [lb, lb + extent) for the purpose of arrays (element i starts at
 * buf + i * extent); |size| is the number of data bytes in it. */

typedef struct nxm_block {
  MPI_Aint disp; /* bytes from the element's start (may be negative) */
  MPI_Aint len;  /* bytes */
} nxm_block_t;

/* C types of the predefined datatypes (the element kinds nxm_op_apply
 * knows). */
enum {
  NXM_TC_INT8,
  NXM_TC_UINT8,
  NXM_TC_INT16,
  NXM_TC_UINT16,
  NXM_TC_INT32,
  NXM_TC_UINT32,
  NXM_TC_INT64,
  NXM_TC_UINT64,
  NXM_TC_FLOAT16,
  NXM_TC_FLOAT,
  NXM_TC_DOUBLE,
  NXM_TC_LDOUBLE,
  NXM_TC_CFLOAT,
  NXM_TC_CDOUBLE,
  NXM_TC_CLDOUBLE,
  NXM_TC_BOOL,
  NXM_TC_BYTE,
  NXM_TC_FLOAT_INT,
  NXM_TC_DOUBLE_INT,
  NXM_TC_LONG_INT,
  NXM_TC_2INT,
  NXM_TC_SHORT_INT,
  NXM_TC_LDOUBLE_INT,
  NXM_TC_COUNT
};

enum {
  NXM_DT_PREDEF = 1, /* a predefined type (static, never freed) */
  NXM_DT_DERIVED = 2
};

typedef struct nxm_dtype {
  uint32_t magic; /* NXM_MAGIC_DTYPE */
  atomic_int refs;
  int kind;      /* NXM_DT_PREDEF or NXM_DT_DERIVED */
  int committed; /* MPI_Type_commit ran (predefined: 1) */
  int tc;        /* predefined: its C type (NXM_TC_*, for nxm_op_apply);
                    derived: -1 */
  /* The nexar datatype one element is, for a predefined type nexar
   * reduces natively (MPI_CHAR, MPI_SIGNED_CHAR, MPI_INT8_T: NEXAR_INT8;
   * MPI_INT: NEXAR_INT32; MPI_DOUBLE: NEXAR_FLOAT64...), else
   * NXM_DT_NONE (short, long double, complex, pair types, derived). */
  int ndt;
  /* The predefined type every data byte belongs to, when the whole
   * typemap is made of one predefined type (a vector of doubles: MPI_DOUBLE;
   * a contiguous of MPI_2INT: MPI_2INT, a pair type), with |nbasic|
   * elements of it per element of this type; else NULL / 0. A predefined
   * type is its own basic type. Collectives reduce a derived type as
   * count * nbasic packed elements of its basic type. */
  const struct nxm_dtype *basic;
  MPI_Aint nbasic;
  MPI_Aint size; /* data bytes per element */
  /* Alignment of the strictest basic type in it (bytes): a struct's
   * extent is rounded up to it, as a C compiler pads the struct. */
  MPI_Aint align;
  MPI_Aint lb;      /* lower bound */
  MPI_Aint extent;  /* ub - lb */
  MPI_Aint true_lb; /* lowest data byte */
  MPI_Aint true_extent;
  /* 1 when an element is |size| data bytes at offset 0 with extent ==
   * size: count elements are one contiguous run of count * size bytes
   * and go to nexar with no copy. */
  int contig;
  size_t nblocks;
  nxm_block_t *blocks; /* |nblocks| (predefined: one block) */
  /* Decoding (MPI_Type_get_envelope / _contents). */
  int combiner; /* MPI_COMBINER_* */
  int nints, naddrs, ntypes;
  int *ints;
  MPI_Aint *addrs;
  MPI_Datatype *types; /* referenced (refs held) */
  nxm_attr_t *attrs;
  char name[MPI_MAX_OBJECT_NAME];
} nxm_dtype_t;

/* The datatype behind |h| (predefined or derived), or NULL for
 * MPI_DATATYPE_NULL / invalid. Uncommitted derived types are returned;
 * communication calls must also check ->committed (MPI_ERR_TYPE). */
nxm_dtype_t *nxm_dtype_get(MPI_Datatype h);
MPI_Datatype nxm_dtype_handle(const nxm_dtype_t *t);
void nxm_dtype_ref(nxm_dtype_t *t);
void nxm_dtype_unref(nxm_dtype_t *t);
void nxm_dtype_attr_delete_all(nxm_dtype_t *t);

/* Checks a (count, datatype) argument pair of a communication call:
 * MPI_SUCCESS, MPI_ERR_COUNT (count < 0), MPI_ERR_TYPE (invalid or not
 * committed), MPI_ERR_BUFFER (|bytes| overflow). *out = the type, *bytes =
 * count * size (data bytes). */
int nxm_dtype_check(MPI_Datatype h, int count, nxm_dtype_t **out,
                    size_t *bytes);

/* Packs |count| elements of |t| from |buf| into the contiguous |out|
 * (count * t->size bytes). */
void nxm_pack(const void *buf, size_t count, const nxm_dtype_t *t, void *out);
/* Unpacks |bytes| bytes of |in| (at most count * t->size; a partial last
 * element stops at its last whole block byte) into |count| elements of |t|
 * at |buf|. */
void nxm_unpack(const void *in, size_t bytes, size_t count,
                const nxm_dtype_t *t, void *buf);

/* A contiguous view of a buffer for nexar. For contig types |ptr| is the
 * user's buffer (no copy); else |ptr| is a temporary (|tmp|, freed by
 * nxm_view_free) packed from the user buffer when |pack| is set.
 * Returns MPI_SUCCESS or MPI_ERR_NO_MEM. */
typedef struct nxm_view {
  void *ptr;
  size_t bytes;
  void *tmp;
} nxm_view_t;
int nxm_view_make(const void *buf, size_t count, const nxm_dtype_t *t, int pack,
                  nxm_view_t *v);
void nxm_view_free(nxm_view_t *v);

/* ---------------------------------------------------------------- */
/* Reduction operations (mpi/op.c). */

typedef struct nxm_op {
  uint32_t magic; /* NXM_MAGIC_OP */
  atomic_int refs;
  int predefined; /* 1 for MPI_SUM ... MPI_NO_OP */
  MPI_Op handle;  /* predefined: its constant */
  int nop;        /* nexar op (NEXAR_SUM...) or NXM_OP_NONE: MPI_LAND,
                     MPI_LOR, MPI_LXOR, MPI_MINLOC, MPI_MAXLOC, MPI_REPLACE,
                     MPI_NO_OP and user ops */
  int commute;
  MPI_User_function *user_fn; /* user ops */
} nxm_op_t;

nxm_op_t *nxm_op_get(MPI_Op h);
/* References on a user op (predefined ops: no effect): a collective holds
 * one while it runs, so MPI_Op_free may come first. */
void nxm_op_ref(const nxm_op_t *op);
void nxm_op_unref(const nxm_op_t *op);

/* Whether nexar reduces (|op|, |t|) itself: op->nop != NXM_OP_NONE and
 * t->ndt != NXM_DT_NONE and nexar accepts the pair (no bitwise op on a
 * float). Then *nop / *ndt are the nexar values. A derived type of one
 * basic nexar type counts with its basic type and count * nbasic
 * elements (*scale = nbasic); else *scale = 1. */
int nxm_op_native(const nxm_op_t *op, const nxm_dtype_t *t, nexar_op_t *nop,
                  nexar_dtype_t *ndt, MPI_Aint *scale);

/* inout[i] = in[i] op inout[i] for |count| elements of |t| on this
 * process (MPI_Reduce_local semantics, "in" is the left operand), for every
 * predefined op on every predefined type it applies to (MPI_MINLOC /
 * MAXLOC on the pair types) and for user ops. Predefined ops work on
 * PACKED data (nxm_pack: count * t->nbasic elements of t->basic, no
 * padding, so MPI_DOUBLE_INT elements are 12 bytes); user ops get the
 * buffers as they are, in |t|'s layout (the user function is called with
 * the type's handle). Returns MPI_SUCCESS or MPI_ERR_OP (op not defined
 * for the type). */
int nxm_op_apply(const nxm_op_t *op, const void *in, void *inout, size_t count,
                 const nxm_dtype_t *t);

/* ---------------------------------------------------------------- */
/* Requests (mpi/req.c). An MPI request wraps zero or more nexar requests
 * and, for multi-step operations, a progress function; a completion hook
 * runs once when it finishes (unpack a derived-type receive, free
 * temporaries, fill the status). */

typedef struct nxm_req nxm_req_t;

enum {
  NXM_REQ_SEND = 1,
  NXM_REQ_RECV = 2,
  NXM_REQ_COLL = 3, /* collectives (mpi/coll*.c) */
  NXM_REQ_GREQ = 4, /* generalized requests */
  NXM_REQ_DONE = 5  /* completed at creation (MPI_PROC_NULL...) */
};

/* Advances a multi-step request without blocking. Sets *done = 1 once
 * everything is finished. Returns MPI_SUCCESS or an error class (the
 * request then counts as finished with that error). */
typedef int (*nxm_req_progress_fn)(nxm_req_t *r, int *done);
/* Runs once when the request has finished (also after an error: |rc| is
 * the request's error class so far, MPI_SUCCESS when none); may set
 * r->status and return a new error class. Frees what |state| holds. */
typedef int (*nxm_req_finish_fn)(nxm_req_t *r, int rc);

#define NXM_REQ_INLINE 2

/* One transfer of a request, beside its nexar request: a receive into a
 * non-contiguous type lands in |view.tmp| and is unpacked into |ubuf|
 * (|ucount| elements of |utype|) when that nexar request completes; a
 * send's packed copy is freed then. Zeroed when unused. */
typedef struct nxm_xfer {
  nxm_view_t view;
  void *ubuf;
  size_t ucount;
  nxm_dtype_t *utype; /* referenced while set */
} nxm_xfer_t;

struct nxm_req {
  uint32_t magic;   /* NXM_MAGIC_REQ */
  int kind;         /* NXM_REQ_* */
  nxm_comm_t *comm; /* referenced while the request lives */
  /* The nexar requests still pending (finished ones are NULL: a progress
   * function may reuse a NULL slot for its next step), with their
   * transfers; both point at the inline arrays when nsub <=
   * NXM_REQ_INLINE. */
  size_t nsub;
  nexar_req_t **sub;
  nxm_xfer_t *xfer;
  nexar_req_t *sub_inline[NXM_REQ_INLINE];
  nxm_xfer_t xfer_inline[NXM_REQ_INLINE];
  nxm_req_progress_fn progress; /* NULL: done when every sub finished */
  nxm_req_finish_fn finish;     /* NULL: nothing to do */
  void *state;                  /* for progress / finish */
  /* Completion. */
  int done;          /* finished and finish ran */
  int error;         /* MPI error class of the request */
  MPI_Status status; /* receives: source, tag, bytes; cancelled flag */
  /* Persistent requests (MPI_Send_init / MPI_Recv_init): the operation to
   * restart on MPI_Start. */
  int persistent;
  int active; /* started and not yet completed */
  int pmode;  /* NXM_SEND_STANDARD ... (sends) */
  void *pbuf;
  int pcount;
  MPI_Datatype ptype;
  int ppeer, ptag;
  int freed; /* MPI_Request_free ran while active: free at completion */
  /* Progress (mpi/progress.c): held (1) by the thread stepping the
   * request (nxm_req_poll's try-lock), so that its progress hook never
   * runs on two threads at once; the links of the active schedules'
   * list (under the list's lock); |sched| set once it was listed. */
  atomic_int busy;
  int sched, listed;
  nxm_req_t *prev, *next;
};

enum {
  NXM_SEND_STANDARD = 0,
  NXM_SEND_SYNC = 1,
  NXM_SEND_BUFFERED = 2,
  NXM_SEND_READY = 3
};

/* The request behind |h|, or NULL (MPI_REQUEST_NULL or invalid). */
nxm_req_t *nxm_req_get(MPI_Request h);
/* A new request of |kind| on |c| (referenced) with room for |nsub| nexar
 * requests, all NULL. NULL when out of memory or nsub > NXM_MAX_ITEMS. */
nxm_req_t *nxm_req_new(int kind, nxm_comm_t *c, size_t nsub);
/* Frees a request (finish must have run) and drops its references. */
void nxm_req_free(nxm_req_t *r);
/* Advances |r| without blocking: tests each pending sub-request (a
 * finished one is unpacked / its temporary freed, its slot set NULL; a
 * receive's nexar status goes to r->status), then calls r->progress.
 * Sets *done once everything finished and finish ran. Returns
 * r->error's class once done, MPI_SUCCESS before. While another thread
 * steps |r| (r->busy held) it does nothing: *done 0, MPI_SUCCESS. */
int nxm_req_poll(nxm_req_t *r, int *done);
/* nxm_req_poll for a caller that holds r->busy (mpi/progress.c). */
int nxm_req_step(nxm_req_t *r, int *done);
/* Blocks until |r| completes, keeping the active schedules moving
 * (nxm_spin) while any exists; bounded by the op timeout (then
 * MPI_ERR_OTHER). */
int nxm_req_wait(nxm_req_t *r);
/* Waits for every request MPI_Request_free left active (buffered sends
 * included): MPI_Buffer_detach, MPI_Finalize. */
void nxm_req_drain(void);
/* Completes *h as MPI_Wait / MPI_Test do once |r| is done: copies the
 * status, frees a non-persistent request (*h = MPI_REQUEST_NULL) or marks
 * a persistent one inactive. Returns the request's error class. */
int nxm_req_complete(MPI_Request *h, MPI_Status *status);

/* ---------------------------------------------------------------- */
/* Progress (mpi/progress.c). MPI's progress rule: a pending operation
 * advances while its process is inside any MPI call. nexar advances its
 * own requests by itself; a request with a progress hook (a layer-built
 * collective schedule) posts its later rounds only when stepped. Such a
 * request is listed as active from its start until it finishes or is
 * freed, and while any is listed every MPI call that waits does so in a
 * loop of non-blocking checks of its own target, one step of each active
 * schedule (nxm_progress) and a bounded backoff, within the op timeout;
 * with none listed it blocks in nexar as before (no cost for native
 * operations). The MPI_Test family and MPI_Iprobe step them too. */

/* Lists |r| (its progress hook set, not finished) as active. */
void nxm_progress_add(nxm_req_t *r);
/* Unlists |r| if listed and waits until no other thread steps it:
 * nxm_req_free calls it before the memory goes. */
void nxm_progress_remove(nxm_req_t *r);
/* Whether any schedule is active (one atomic load). */
int nxm_progress_active(void);
/* One non-blocking step of each active schedule but |skip| (NULL: none),
 * a bounded batch of them per call in round-robin order; skips those
 * another thread is stepping, and does nothing inside a step (a user op
 * calling MPI) or while another thread runs this. Unlists the finished. */
void nxm_progress(const nxm_req_t *skip);

/* A wait loop's state: its deadline (the op timeout from its start,
 * NEXAR_OP_TIMEOUT_MS) and its turn count (the backoff). */
typedef struct nxm_spin {
  double deadline_ms;
  unsigned turns;
} nxm_spin_t;

void nxm_spin_init(nxm_spin_t *sp);
/* One idle turn of a wait loop: nxm_progress(skip), then sched_yield for
 * the first turns and short sleeps growing to 50 us after them. Returns 1
 * while the deadline is ahead, 0 once it passed. */
int nxm_spin(nxm_spin_t *sp, const nxm_req_t *skip);
/* nexar_wait (same results and status) that keeps the active schedules
 * moving while it waits; plain nexar_wait when none is active. */
int nxm_wait_nexar(nexar_req_t **q, nexar_status_t *st);
/* nexar_probe the same way: NEXAR_ERR_TIMEOUT after the op timeout. */
int nxm_probe_nexar(nexar_comm_t *nc, int source, int tag, nexar_status_t *st);

/* ---------------------------------------------------------------- */
/* Status. The byte count is kept in mpi_private[0..1] (64 bits), the
 * cancelled flag in mpi_private[2]. */

void nxm_status_set(MPI_Status *st, int source, int tag, int error,
                    size_t bytes);
size_t nxm_status_bytes(const MPI_Status *st);
void nxm_status_empty(MPI_Status *st); /* MPI's empty status */

/* ---------------------------------------------------------------- */
/* Errors (mpi/errors.c). */

/* The MPI error class of a nexar result code: INVALID_ARG -> MPI_ERR_ARG,
 * TRUNCATE -> MPI_ERR_TRUNCATE, NOMEM -> MPI_ERR_NO_MEM, PEER_FAILED and
 * EXCLUDED -> MPI_ERR_PROC_FAILED, REVOKED -> MPI_ERR_REVOKED, CANCELLED
 * -> MPI_SUCCESS with the status cancelled, UNSUPPORTED ->
 * MPI_ERR_UNSUPPORTED_OPERATION, MISMATCH -> MPI_ERR_OTHER ...). */
int nxm_class_of_nexar(int rc);

/* Reports error class |cls| of |fn| on |c| (NULL: MPI_COMM_WORLD's
 * handler, or fatal before MPI_Init): records "fn (rank R): message" as
 * this thread's last error text, then applies c's error handler:
 * MPI_ERRORS_ARE_FATAL prints it to stderr and aborts the job
 * (nexar_abort, exit); MPI_ERRORS_RETURN returns |cls|; a user handler is
 * called, then |cls| is returned. printf-style |fmt|. */
int nxm_err(nxm_comm_t *c, int cls, const char *fn, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* nxm_err for a nexar result code: the class from nxm_class_of_nexar and
 * the text from nexar_comm_last_error(c->nc). */
int nxm_err_nexar(nxm_comm_t *c, const char *fn, int rc);
/* For functions outside the layer's scope: MPI_ERR_UNSUPPORTED_OPERATION
 * through MPI_COMM_WORLD's handler, message naming |fn|. */
int nxm_unsupported(const char *fn);

/* Argument checks shared by p2p and collectives: each returns MPI_SUCCESS
 * or reports the class (MPI_ERR_RANK, MPI_ERR_TAG, MPI_ERR_ROOT) through
 * nxm_err. |any| allows MPI_ANY_SOURCE / MPI_ANY_TAG; MPI_PROC_NULL is
 * always a valid rank. */
int nxm_check_rank(nxm_comm_t *c, const char *fn, int rank, int any);
int nxm_check_tag(nxm_comm_t *c, const char *fn, int tag, int any);
int nxm_check_root(nxm_comm_t *c, const char *fn, int root);

/* ---------------------------------------------------------------- */
/* Point-to-point helpers for the collectives (mpi/p2p.c): start a send or
 * receive of |count| elements of |t| on nexar communicator |nc| (c->nc or
 * c->cc) as sub-request |i| of |r| (slot i must be NULL), packing a
 * non-contiguous send into a temporary now and unpacking a
 * non-contiguous receive when it completes (r->xfer[i]). MPI_PROC_NULL
 * peers start nothing. Returns MPI_SUCCESS or an error class (nothing
 * started then); no error handler is applied. */
int nxm_p2p_isend(nxm_req_t *r, size_t i, nexar_comm_t *nc, const void *buf,
                  size_t count, const nxm_dtype_t *t, int dest, int tag);
int nxm_p2p_irecv(nxm_req_t *r, size_t i, nexar_comm_t *nc, void *buf,
                  size_t count, const nxm_dtype_t *t, int source, int tag);
/* nxm_p2p_isend in send mode |mode| (NXM_SEND_SYNC: nexar_issend). */
int nxm_p2p_isend_mode(nxm_req_t *r, size_t i, nexar_comm_t *nc,
                       const void *buf, size_t count, const nxm_dtype_t *t,
                       int dest, int tag, int mode);
/* Starts the operation recorded in a p2p request's p* fields (MPI_Start,
 * and every MPI_I* send / receive). Reports errors through nxm_err. */
int nxm_p2p_start(nxm_req_t *r);

#endif /* NEXAR_MPI_INT_H */
