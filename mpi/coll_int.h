/*
 * Private header of the MPI layer's collectives (mpi/coll*.c).
 *
 * Every collective is started once, by a start function that checks the
 * arguments (reporting through nxm_err) and returns a request:
 *  - native path: the operation maps to one nexar collective on c->nc (a
 *    reduction nexar computes, or data movement counted in bytes, so ranks
 *    with different but matching (count, datatype) pairs agree on nexar's
 *    fingerprint); contiguous buffers go to nexar as they are, others
 *    through packed temporaries unpacked when the request completes;
 *  - layer-built path: a schedule of rounds of point-to-point messages on
 *    c->cc (tag from nxm_coll_tag) and local steps (reduce, copy) that the
 *    request's progress hook advances (user ops, MPI_MINLOC / MAXLOC,
 *    logical ops, types nexar cannot reduce, alltoallw, neighbourhood
 *    collectives).
 * The blocking form waits for that request (nxm_coll_block); the MPI_I*
 * form returns it (nxm_coll_post). nexar advances the messages already
 * posted on its own; a layer-built schedule's later rounds are posted by
 * its progress hook, so MPI's progress rule needs the layer: from its
 * start until it finishes, the request is on the list of active schedules
 * (mpi/progress.c), and every MPI call that waits (the wait family,
 * blocking sends, receives and probes, blocking collectives of both
 * paths, MPI_Finalize) steps each active schedule while it waits, as do
 * the MPI_Test family and MPI_Iprobe. A step is non-blocking and never
 * runs on two threads at once (the request's busy flag).
 */
#ifndef NEXAR_MPI_COLL_INT_H
#define NEXAR_MPI_COLL_INT_H

#include "mpi_int.h"

/* The state of one collective: its schedule, its temporaries and the
 * datatype references it holds until it completes. */
typedef struct nxm_cs nxm_cs_t;

/* A new state for a collective on |c| reducing with |op| (NULL: none;
 * a user op is referenced until the state is freed). NULL when out of
 * memory. */
nxm_cs_t *nxm_cs_new(nxm_comm_t *c, const nxm_op_t *op);
void nxm_cs_free(nxm_cs_t *s);
/* A temporary of |bytes| freed with the state; NULL when out of memory. */
void *nxm_cs_alloc(nxm_cs_t *s, size_t bytes);
/* A temporary holding |count| elements of |t| in |t|'s own layout: the
 * returned pointer is where element 0 starts (may lie outside the block
 * for a positive lower bound). NULL when out of memory or too large. */
void *nxm_cs_tbuf(nxm_cs_t *s, size_t count, const nxm_dtype_t *t);
/* Holds a reference on derived type |t| until the state is freed (images
 * that unpack take theirs). MPI_SUCCESS or MPI_ERR_NO_MEM. */
int nxm_cs_ref(nxm_cs_t *s, const nxm_dtype_t *t);

/* Contiguous images of user buffers for nexar. nxm_cs_image: |count|
 * elements of |t| at |buf|: |buf| itself when |t| is contiguous, else a
 * temporary, packed now when |in|, unpacked into |buf| when the
 * collective completes when |out|. NULL when out of memory (or count 0
 * with a NULL buffer, which nexar accepts). */
void *nxm_cs_image(nxm_cs_t *s, const void *buf, size_t count,
                   const nxm_dtype_t *t, int in, int out);
/* The same for |n| blocks (counts[i] elements of |t| at buf + displs[i] x
 * extent): fills bcounts / bdispls (|n| each) in bytes from the returned
 * base. */
void *nxm_cs_vimage(nxm_cs_t *s, const void *buf, int n, const int *counts,
                    const int *displs, const nxm_dtype_t *t, int in, int out,
                    size_t *bcounts, size_t *bdispls);

/* Schedule steps (layer-built path), executed in order; the messages of
 * one round are all posted together, and a fence waits for them. */
void nxm_cs_send(nxm_cs_t *s, const void *buf, size_t count,
                 const nxm_dtype_t *t, int peer, int tag);
void nxm_cs_recv(nxm_cs_t *s, void *buf, size_t count, const nxm_dtype_t *t,
                 int peer, int tag);
/* inout = in op inout (|in| is the left operand): nxm_op_apply on |count|
 * elements of |t| (in nxm_coll_work's layout). */
void nxm_cs_apply(nxm_cs_t *s, const void *in, void *inout, size_t count,
                  const nxm_dtype_t *t);
/* Copies |scount| elements of |st| at |src| to |dcount| elements of |dt|
 * at |dst| (same type signature, only data bytes are written). */
void nxm_cs_copy(nxm_cs_t *s, const void *src, size_t scount,
                 const nxm_dtype_t *st, void *dst, size_t dcount,
                 const nxm_dtype_t *dt);
void nxm_cs_fence(nxm_cs_t *s);
/* The same copy, done now. MPI_SUCCESS or MPI_ERR_NO_MEM. */
int nxm_copy(const void *src, size_t scount, const nxm_dtype_t *st, void *dst,
             size_t dcount, const nxm_dtype_t *dt);

/* A request for the layer-built schedule of |s| (taking |s|), its first
 * round posted. On error |s| is freed and the class reported. */
int nxm_cs_start(nxm_cs_t *s, const char *fn, nxm_req_t **out);
/* A request for the native path (taking |s|): the caller starts the nexar
 * collective into (*out)->sub[0]; the state's copies run when it
 * completes. */
int nxm_cs_native(nxm_cs_t *s, const char *fn, nxm_req_t **out);
/* After a failed nexar start into r->sub[0]: frees |r| and reports. */
int nxm_cs_fail(nxm_req_t *r, const char *fn, int rc);
/* Whether the state failed to allocate something (then MPI_ERR_NO_MEM). */
int nxm_cs_nomem(const nxm_cs_t *s);

/* The communicator of a collective call, or the error reported. */
int nxm_coll_begin(MPI_Comm comm, const char *fn, nxm_comm_t **c);
/* Blocking form: waits for |r| (|cls| the start's result) and frees it. */
int nxm_coll_block(nxm_comm_t *c, const char *fn, int cls, nxm_req_t *r);
/* Non-blocking form: hands |r| to the user. */
int nxm_coll_post(int cls, nxm_req_t *r, MPI_Request *request);

/* Argument checks, reported through c's error handler: a (buffer,
 * count, type) triple (also nxm_coll_buf); |n| counts (MPI_ERR_COUNT) with
 * their displacements (MPI_ERR_ARG when NULL) and |n| more types when |types|
 * is set. */
int nxm_coll_type(nxm_comm_t *c, const char *fn, const void *buf, int count,
                  MPI_Datatype h, nxm_dtype_t **t);
/* MPI_ERR_BUFFER for a NULL buffer that must hold data (|count| > 0
 * elements of a contiguous type; MPI_BOTTOM serves derived types). */
int nxm_coll_buf(nxm_comm_t *c, const char *fn, const void *buf, int count,
                 const nxm_dtype_t *t);
int nxm_coll_counts(nxm_comm_t *c, const char *fn, int n, const int *counts,
                    const void *displs);
/* The reduction |op| for |t|: MPI_ERR_OP when invalid or not defined for
 * the type. */
int nxm_coll_op(nxm_comm_t *c, const char *fn, MPI_Op h, const nxm_dtype_t *t,
                nxm_op_t **op);

/* The work layout of a layer-built reduction on |t| with |op|: what its
 * buffers hold, |scale| elements of *wt per element of |t|. User ops work
 * in |t|'s own layout (wt = t, scale 1), predefined ops on packed data
 * (bytes, scale = t->size), as nxm_op_apply takes them; either way the op
 * is applied to (count, t). */
void nxm_coll_work(const nxm_op_t *op, const nxm_dtype_t *t,
                   const nxm_dtype_t **wt, size_t *scale);

/* The byte type (MPI_BYTE). */
const nxm_dtype_t *nxm_byte(void);

/* What the blocking form puts in *out before it calls the start function:
 * a start function that sees it may run the operation to completion in the
 * call itself (no request, no state: the blocking native fast path) and
 * then sets *out = NULL; any other start function overwrites it. */
#define NXM_REQ_BLOCKING ((nxm_req_t *)(uintptr_t)1)

/* Defines MPI_<Name> and MPI_<IName> (its non-blocking form) from a start
 * function start(c, fn, args..., nxm_req_t **out). |P| is the
 * parenthesised parameter list ending with |comm|, |A| the arguments passed
 * on. */
#define NXM_UNPAREN(...) __VA_ARGS__
#define NXM_COLL_PAIR(Name, IName, start, P, A)                    \
  int MPI_##Name(NXM_UNPAREN P) {                                  \
    const char *fn = "MPI_" #Name;                                 \
    nxm_comm_t *c = NULL;                                          \
    nxm_req_t *r = NXM_REQ_BLOCKING;                               \
    int cls = nxm_coll_begin(comm, fn, &c);                        \
    if (cls == MPI_SUCCESS) cls = start(c, fn, NXM_UNPAREN A, &r); \
    return nxm_coll_block(c, fn, cls, r);                          \
  }                                                                \
  int MPI_##IName(NXM_UNPAREN P, MPI_Request *request) {           \
    const char *fn = "MPI_" #IName;                                \
    nxm_comm_t *c = NULL;                                          \
    nxm_req_t *r = NULL;                                           \
    int cls = nxm_coll_begin(comm, fn, &c);                        \
    if (cls == MPI_SUCCESS && !request)                            \
      cls = nxm_err(c, MPI_ERR_ARG, fn, "NULL request");           \
    if (cls == MPI_SUCCESS) cls = start(c, fn, NXM_UNPAREN A, &r); \
    return nxm_coll_post(cls, r, request);                         \
  }

#endif /* NEXAR_MPI_COLL_INT_H */
