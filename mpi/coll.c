/*
 * Data-movement collectives (MPI_Barrier, Bcast, Gather(v), Scatter(v),
 * Allgather(v), Alltoall(v)) and their MPI_I* forms, each one nexar
 * collective on c->nc counted in bytes (NEXAR_BYTE), so that ranks passing
 * different but matching (count, datatype) pairs give nexar the same
 * fingerprint. Contiguous buffers go to nexar as they are; others through
 * packed images (coll_int.h).
 */
#include <stdint.h>

#include "coll_int.h"

/* The nexar start's result |rc| for request |r|. */
static int started(nxm_req_t *r, const char *fn, int rc) {
  return rc == NEXAR_OK ? MPI_SUCCESS : nxm_cs_fail(r, fn, rc);
}

/* A native state, or MPI_ERR_NO_MEM reported. */
static int new_state(nxm_comm_t *c, const char *fn, nxm_cs_t **s) {
  *s = nxm_cs_new(c, NULL);
  return *s ? MPI_SUCCESS : nxm_err(c, MPI_ERR_NO_MEM, fn, "out of memory");
}

/* MPI_ERR_TRUNCATE when the two sides of a transfer differ in bytes. */
static int same_bytes(nxm_comm_t *c, const char *fn, size_t a, size_t b) {
  if (a == b) return MPI_SUCCESS;
  return nxm_err(c, MPI_ERR_TRUNCATE, fn,
                 "send and receive sizes differ (%zu and %zu bytes)", a, b);
}

/* MPI_ERR_COUNT when |n| blocks of |block| bytes do not fit. */
static int fits(nxm_comm_t *c, const char *fn, size_t block, int n) {
  if (n <= 0 || block <= SIZE_MAX / 4 / (size_t)n) return MPI_SUCCESS;
  return nxm_err(c, MPI_ERR_COUNT, fn, "%d blocks of %zu bytes", n, block);
}

/* ---- Barrier */

static int barrier_start(nxm_comm_t *c, const char *fn, nxm_req_t **out) {
  nxm_cs_t *s;
  int cls = new_state(c, fn, &s);
  if (cls == MPI_SUCCESS) cls = nxm_cs_native(s, fn, out);
  if (cls != MPI_SUCCESS) return cls;
  return started(*out, fn, nexar_ibarrier(c->nc, &(*out)->sub[0]));
}

int MPI_Barrier(MPI_Comm comm) {
  nxm_comm_t *c = NULL;
  nxm_req_t *r = NULL;
  int cls = nxm_coll_begin(comm, "MPI_Barrier", &c);
  if (cls == MPI_SUCCESS) cls = barrier_start(c, "MPI_Barrier", &r);
  return nxm_coll_block(c, "MPI_Barrier", cls, r);
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request) {
  nxm_comm_t *c = NULL;
  nxm_req_t *r = NULL;
  int cls = nxm_coll_begin(comm, "MPI_Ibarrier", &c);
  if (cls == MPI_SUCCESS && !request)
    cls = nxm_err(c, MPI_ERR_ARG, "MPI_Ibarrier", "NULL request");
  if (cls == MPI_SUCCESS) cls = barrier_start(c, "MPI_Ibarrier", &r);
  return nxm_coll_post(cls, r, request);
}

/* ---- Bcast */

static int bcast_start(nxm_comm_t *c, const char *fn, void *buf, int count,
                       MPI_Datatype datatype, int root, nxm_req_t **out) {
  nxm_dtype_t *t;
  nxm_cs_t *s;
  int cls = nxm_check_root(c, fn, root);
  if (cls == MPI_SUCCESS) cls = nxm_coll_type(c, fn, buf, count, datatype, &t);
  if (cls == MPI_SUCCESS) cls = new_state(c, fn, &s);
  if (cls != MPI_SUCCESS) return cls;
  int me = c->rank == root;
  void *img = nxm_cs_image(s, buf, (size_t)count, t, me, !me);
  cls = nxm_cs_native(s, fn, out);
  if (cls != MPI_SUCCESS) return cls;
  return started(*out, fn,
                 nexar_ibcast(c->nc, img, (size_t)count * (size_t)t->size,
                              NEXAR_BYTE, root, &(*out)->sub[0]));
}

NXM_COLL_PAIR(Bcast, Ibcast, bcast_start,
              (void *buffer, int count, MPI_Datatype datatype, int root,
               MPI_Comm comm),
              (buffer, count, datatype, root))

/* ---- Gather(v), Scatter(v). A rooted call has a side every rank has
 * (the send side of a gather, the receive side of a scatter: |io|) and one
 * only the root has (|rt|), v-forms with per-rank counts there. */

typedef struct rooted {
  int scatter;
  const void *iobuf;
  int iocount;
  MPI_Datatype iotype;
  const void *rtbuf;
  int rtcount;       /* plain forms */
  const int *counts; /* v-forms: counts and displacements at the root */
  const int *displs;
  MPI_Datatype rttype;
  int root;
} rooted_t;

/* Checks the root's v-side and makes its image: *bc / *bd (c->size each)
 * get the byte counts and displacements. */
static int root_vside(nxm_comm_t *c, const char *fn, nxm_cs_t *s,
                      const void *buf, const int *counts, const int *displs,
                      const nxm_dtype_t *t, int in, int out, void **img,
                      size_t **bc, size_t **bd) {
  int n = c->size;
  *bc = nxm_cs_alloc(s, 2 * (size_t)n * sizeof(size_t));
  if (!*bc) return nxm_err(c, MPI_ERR_NO_MEM, fn, "out of memory");
  *bd = *bc + n;
  *img = nxm_cs_vimage(s, buf, n, counts, displs, t, in, out, *bc, *bd);
  if (!*img && !t->contig)
    return nxm_err(c, MPI_ERR_NO_MEM, fn, "out of memory");
  return MPI_SUCCESS;
}

/* The v-side's checks: counts and type; total size bounded. */
static int vside_check(nxm_comm_t *c, const char *fn, const void *buf,
                       const int *counts, const int *displs, MPI_Datatype h,
                       nxm_dtype_t **t) {
  int cls = nxm_coll_counts(c, fn, c->size, counts, displs);
  if (cls == MPI_SUCCESS) cls = nxm_coll_type(c, fn, buf, 0, h, t);
  size_t max = 0;
  for (int i = 0; cls == MPI_SUCCESS && i < c->size; i++)
    if ((size_t)counts[i] > max) max = (size_t)counts[i];
  if (cls == MPI_SUCCESS) cls = fits(c, fn, max * (size_t)(*t)->size, c->size);
  if (cls == MPI_SUCCESS && max) cls = nxm_coll_buf(c, fn, buf, (int)max, *t);
  return cls;
}

static int rooted_start(nxm_comm_t *c, const char *fn, const rooted_t *a,
                        nxm_req_t **out) {
  nxm_dtype_t *iot = NULL, *rtt = NULL;
  nxm_cs_t *s = NULL;
  int me = c->rank == a->root, ip = a->iobuf == MPI_IN_PLACE, sc = a->scatter;
  int v = a->rtcount < 0; /* v-forms pass rtcount -1 */
  int cls = nxm_check_root(c, fn, a->root);
  if (cls == MPI_SUCCESS && ip && !me)
    cls = nxm_err(c, MPI_ERR_BUFFER, fn, "MPI_IN_PLACE off the root");
  if (cls == MPI_SUCCESS && !ip)
    cls = nxm_coll_type(c, fn, a->iobuf, a->iocount, a->iotype, &iot);
  if (cls == MPI_SUCCESS && me && v)
    cls = vside_check(c, fn, a->rtbuf, a->counts, a->displs, a->rttype, &rtt);
  if (cls == MPI_SUCCESS && me && !v)
    cls = nxm_coll_type(c, fn, a->rtbuf, a->rtcount, a->rttype, &rtt);
  /* Bytes per block: the root's view, which every other rank's must
   * match (v-forms: its own block). */
  size_t block = 0, *bc = NULL, *bd = NULL;
  if (cls == MPI_SUCCESS && me) {
    block = (size_t)(v ? a->counts[c->rank] : a->rtcount) * (size_t)rtt->size;
    if (!v) cls = fits(c, fn, block, c->size);
  }
  if (cls == MPI_SUCCESS && !ip) {
    size_t b = (size_t)a->iocount * (size_t)iot->size;
    if (me) cls = same_bytes(c, fn, b, block);
    block = b;
  }
  if (cls == MPI_SUCCESS) cls = new_state(c, fn, &s);
  /* The root's side: a gather's receive buffer (its own block packed in
   * too when in place), a scatter's send buffer. */
  void *rtimg = NULL;
  int in = sc || ip;
  if (cls == MPI_SUCCESS && me && v)
    cls = root_vside(c, fn, s, a->rtbuf, a->counts, a->displs, rtt, in, !sc,
                     &rtimg, &bc, &bd);
  if (cls == MPI_SUCCESS && me && !v)
    rtimg = nxm_cs_image(s, a->rtbuf, (size_t)c->size * (size_t)a->rtcount, rtt,
                         in, !sc);
  if (cls != MPI_SUCCESS) {
    nxm_cs_free(s);
    return cls;
  }
  void *ioimg =
      ip ? NEXAR_IN_PLACE
         : nxm_cs_image(s, a->iobuf, (size_t)a->iocount, iot, !sc, sc);
  cls = nxm_cs_native(s, fn, out);
  if (cls != MPI_SUCCESS) return cls;
  nexar_comm_t *nc = c->nc;
  nexar_req_t **q = &(*out)->sub[0];
  int rc;
  if (v && sc)
    rc = nexar_iscatterv(nc, rtimg, bc, bd, ioimg, block, NEXAR_BYTE, a->root,
                         q);
  else if (v)
    rc =
        nexar_igatherv(nc, ioimg, block, rtimg, bc, bd, NEXAR_BYTE, a->root, q);
  else if (sc)
    rc = nexar_iscatter(nc, rtimg, ioimg, block, NEXAR_BYTE, a->root, q);
  else
    rc = nexar_igather(nc, ioimg, rtimg, block, NEXAR_BYTE, a->root, q);
  return started(*out, fn, rc);
}

static int gather_start(nxm_comm_t *c, const char *fn, const void *sendbuf,
                        int sendcount, MPI_Datatype sendtype, void *recvbuf,
                        int recvcount, MPI_Datatype recvtype, int root,
                        nxm_req_t **out) {
  rooted_t a = {0,         sendbuf, sendcount, sendtype, recvbuf,
                recvcount, NULL,    NULL,      recvtype, root};
  return rooted_start(c, fn, &a, out);
}

NXM_COLL_PAIR(Gather, Igather, gather_start,
              (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
               void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
               MPI_Comm comm),
              (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
               root))

static int scatter_start(nxm_comm_t *c, const char *fn, const void *sendbuf,
                         int sendcount, MPI_Datatype sendtype, void *recvbuf,
                         int recvcount, MPI_Datatype recvtype, int root,
                         nxm_req_t **out) {
  rooted_t a = {1,         recvbuf, recvcount, recvtype, sendbuf,
                sendcount, NULL,    NULL,      sendtype, root};
  return rooted_start(c, fn, &a, out);
}

NXM_COLL_PAIR(Scatter, Iscatter, scatter_start,
              (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
               void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
               MPI_Comm comm),
              (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
               root))

static int gatherv_start(nxm_comm_t *c, const char *fn, const void *sendbuf,
                         int sendcount, MPI_Datatype sendtype, void *recvbuf,
                         const int *recvcounts, const int *displs,
                         MPI_Datatype recvtype, int root, nxm_req_t **out) {
  rooted_t a = {0,  sendbuf,    sendcount, sendtype, recvbuf,
                -1, recvcounts, displs,    recvtype, root};
  return rooted_start(c, fn, &a, out);
}

NXM_COLL_PAIR(Gatherv, Igatherv, gatherv_start,
              (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
               void *recvbuf, const int recvcounts[], const int displs[],
               MPI_Datatype recvtype, int root, MPI_Comm comm),
              (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
               recvtype, root))

static int scatterv_start(nxm_comm_t *c, const char *fn, const void *sendbuf,
                          const int *sendcounts, const int *displs,
                          MPI_Datatype sendtype, void *recvbuf, int recvcount,
                          MPI_Datatype recvtype, int root, nxm_req_t **out) {
  rooted_t a = {1,  recvbuf,    recvcount, recvtype, sendbuf,
                -1, sendcounts, displs,    sendtype, root};
  return rooted_start(c, fn, &a, out);
}

NXM_COLL_PAIR(Scatterv, Iscatterv, scatterv_start,
              (const void *sendbuf, const int sendcounts[], const int displs[],
               MPI_Datatype sendtype, void *recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm),
              (sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount,
               recvtype, root))

/* ---- Allgather(v), Alltoall(v) */

/* The checks of the (send, recv) pair of an all-to-all style call whose
 * send side is one block of |nsend| x sendcount elements (not in place);
 * *block = the receive block's bytes. */
static int pair_check(nxm_comm_t *c, const char *fn, const void *sendbuf,
                      int sendcount, MPI_Datatype sendtype, void *recvbuf,
                      int recvcount, MPI_Datatype recvtype, nxm_dtype_t **st,
                      nxm_dtype_t **rt, size_t *block) {
  int ip = sendbuf == MPI_IN_PLACE;
  int cls = nxm_coll_type(c, fn, recvbuf, recvcount, recvtype, rt);
  if (cls == MPI_SUCCESS && !ip)
    cls = nxm_coll_type(c, fn, sendbuf, sendcount, sendtype, st);
  if (cls != MPI_SUCCESS) return cls;
  *block = (size_t)recvcount * (size_t)(*rt)->size;
  cls = fits(c, fn, *block, c->size);
  if (cls == MPI_SUCCESS && !ip)
    cls = same_bytes(c, fn, (size_t)sendcount * (size_t)(*st)->size, *block);
  return cls;
}

static int allgather_start(nxm_comm_t *c, const char *fn, const void *sendbuf,
                           int sendcount, MPI_Datatype sendtype, void *recvbuf,
                           int recvcount, MPI_Datatype recvtype,
                           nxm_req_t **out) {
  nxm_dtype_t *st = NULL, *rt = NULL;
  nxm_cs_t *s;
  size_t block = 0;
  int ip = sendbuf == MPI_IN_PLACE;
  int cls = pair_check(c, fn, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                       recvtype, &st, &rt, &block);
  if (cls == MPI_SUCCESS) cls = new_state(c, fn, &s);
  if (cls != MPI_SUCCESS) return cls;
  const void *simg = ip ? NEXAR_IN_PLACE
                        : nxm_cs_image(s, sendbuf, (size_t)sendcount, st, 1, 0);
  void *rimg =
      nxm_cs_image(s, recvbuf, (size_t)c->size * (size_t)recvcount, rt, ip, 1);
  cls = nxm_cs_native(s, fn, out);
  if (cls != MPI_SUCCESS) return cls;
  return started(
      *out, fn,
      nexar_iallgather(c->nc, simg, rimg, block, NEXAR_BYTE, &(*out)->sub[0]));
}

NXM_COLL_PAIR(Allgather, Iallgather, allgather_start,
              (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
               void *recvbuf, int recvcount, MPI_Datatype recvtype,
               MPI_Comm comm),
              (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype))

static int allgatherv_start(nxm_comm_t *c, const char *fn, const void *sendbuf,
                            int sendcount, MPI_Datatype sendtype, void *recvbuf,
                            const int *recvcounts, const int *displs,
                            MPI_Datatype recvtype, nxm_req_t **out) {
  nxm_dtype_t *st = NULL, *rt = NULL;
  nxm_cs_t *s = NULL;
  int ip = sendbuf == MPI_IN_PLACE;
  int cls = vside_check(c, fn, recvbuf, recvcounts, displs, recvtype, &rt);
  if (cls == MPI_SUCCESS && !ip)
    cls = nxm_coll_type(c, fn, sendbuf, sendcount, sendtype, &st);
  size_t sb = 0;
  if (cls == MPI_SUCCESS && !ip) sb = (size_t)sendcount * (size_t)st->size;
  if (cls == MPI_SUCCESS && !ip)
    cls = same_bytes(c, fn, sb, (size_t)recvcounts[c->rank] * (size_t)rt->size);
  if (cls == MPI_SUCCESS) cls = new_state(c, fn, &s);
  void *rimg = NULL;
  size_t *bc = NULL, *bd = NULL;
  if (cls == MPI_SUCCESS)
    cls = root_vside(c, fn, s, recvbuf, recvcounts, displs, rt, ip, 1, &rimg,
                     &bc, &bd);
  if (cls != MPI_SUCCESS) {
    nxm_cs_free(s);
    return cls;
  }
  if (ip) sb = bc[c->rank];
  const void *simg = ip ? NEXAR_IN_PLACE
                        : nxm_cs_image(s, sendbuf, (size_t)sendcount, st, 1, 0);
  cls = nxm_cs_native(s, fn, out);
  if (cls != MPI_SUCCESS) return cls;
  return started(*out, fn,
                 nexar_iallgatherv(c->nc, simg, sb, rimg, bc, bd, NEXAR_BYTE,
                                   &(*out)->sub[0]));
}

NXM_COLL_PAIR(Allgatherv, Iallgatherv, allgatherv_start,
              (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
               void *recvbuf, const int recvcounts[], const int displs[],
               MPI_Datatype recvtype, MPI_Comm comm),
              (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
               recvtype))

static int alltoall_start(nxm_comm_t *c, const char *fn, const void *sendbuf,
                          int sendcount, MPI_Datatype sendtype, void *recvbuf,
                          int recvcount, MPI_Datatype recvtype,
                          nxm_req_t **out) {
  nxm_dtype_t *st = NULL, *rt = NULL;
  nxm_cs_t *s;
  size_t block = 0, n = (size_t)c->size;
  int ip = sendbuf == MPI_IN_PLACE;
  int cls = pair_check(c, fn, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                       recvtype, &st, &rt, &block);
  if (cls == MPI_SUCCESS) cls = new_state(c, fn, &s);
  if (cls != MPI_SUCCESS) return cls;
  const void *simg =
      ip ? NEXAR_IN_PLACE
         : nxm_cs_image(s, sendbuf, n * (size_t)sendcount, st, 1, 0);
  void *rimg = nxm_cs_image(s, recvbuf, n * (size_t)recvcount, rt, ip, 1);
  cls = nxm_cs_native(s, fn, out);
  if (cls != MPI_SUCCESS) return cls;
  return started(
      *out, fn,
      nexar_ialltoall(c->nc, simg, rimg, block, NEXAR_BYTE, &(*out)->sub[0]));
}

NXM_COLL_PAIR(Alltoall, Ialltoall, alltoall_start,
              (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
               void *recvbuf, int recvcount, MPI_Datatype recvtype,
               MPI_Comm comm),
              (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype))

static int alltoallv_start(nxm_comm_t *c, const char *fn, const void *sendbuf,
                           const int *sendcounts, const int *sdispls,
                           MPI_Datatype sendtype, void *recvbuf,
                           const int *recvcounts, const int *rdispls,
                           MPI_Datatype recvtype, nxm_req_t **out) {
  nxm_dtype_t *st = NULL, *rt = NULL;
  nxm_cs_t *s = NULL;
  int ip = sendbuf == MPI_IN_PLACE;
  int cls = vside_check(c, fn, recvbuf, recvcounts, rdispls, recvtype, &rt);
  if (cls == MPI_SUCCESS && !ip)
    cls = vside_check(c, fn, sendbuf, sendcounts, sdispls, sendtype, &st);
  if (cls == MPI_SUCCESS) cls = new_state(c, fn, &s);
  void *rimg = NULL, *simg = NEXAR_IN_PLACE;
  size_t *rbc = NULL, *rbd = NULL, *sbc = NULL, *sbd = NULL;
  if (cls == MPI_SUCCESS)
    cls = root_vside(c, fn, s, recvbuf, recvcounts, rdispls, rt, ip, 1, &rimg,
                     &rbc, &rbd);
  if (cls == MPI_SUCCESS && !ip)
    cls = root_vside(c, fn, s, sendbuf, sendcounts, sdispls, st, 1, 0, &simg,
                     &sbc, &sbd);
  if (cls != MPI_SUCCESS) {
    nxm_cs_free(s);
    return cls;
  }
  cls = nxm_cs_native(s, fn, out);
  if (cls != MPI_SUCCESS) return cls;
  return started(*out, fn,
                 nexar_ialltoallv(c->nc, simg, sbc, sbd, rimg, rbc, rbd,
                                  NEXAR_BYTE, &(*out)->sub[0]));
}

NXM_COLL_PAIR(Alltoallv, Ialltoallv, alltoallv_start,
              (const void *sendbuf, const int sendcounts[], const int sdispls[],
               MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
               const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm),
              (sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
               rdispls, recvtype))
