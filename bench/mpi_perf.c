/*
 * mpi_perf: the MPI baseline of bench/compare. Same operations, sizes,
 * method, columns and JSON as tools/nexar-perf (see perf_common.h), written
 * against the MPI C API only, so it builds unchanged with Open MPI's and
 * MPICH's compiler wrappers:
 *
 *   mpicc.openmpi -O2 -o mpi_perf-openmpi bench/mpi_perf.c
 *   mpicc.mpich   -O2 -o mpi_perf-mpich   bench/mpi_perf.c
 *   mpirun.openmpi -n 2 ./mpi_perf-openmpi allreduce -b 8 -e 64M -f 4
 *
 * latency: MPI_Send/MPI_Recv ping-pong between ranks 0 and 1 (osu_latency).
 * bw:      rank 0 posts WINDOW (64) MPI_Isend, rank 1 as many MPI_Irecv into
 *          one buffer, both MPI_Waitall, then rank 1 sends a 4-byte
 *          acknowledgement (osu_bw).
 * bibw:    both directions at once, WINDOW each way (osu_bibw).
 * Collectives: the MPI call of the same name, out of place; iallreduce is
 * MPI_Iallreduce followed by MPI_Wait.
 */
#include <mpi.h>

#include "perf_common.h"

static MPI_Datatype mpi_type(int dt) {
  switch (dt) {
    case DT_INT8:
      return MPI_INT8_T;
    case DT_UINT8:
      return MPI_UINT8_T;
    case DT_INT32:
      return MPI_INT32_T;
    case DT_UINT32:
      return MPI_UINT32_T;
    case DT_INT64:
      return MPI_INT64_T;
    case DT_UINT64:
      return MPI_UINT64_T;
    case DT_FLOAT32:
      return MPI_FLOAT;
    default:
      return MPI_DOUBLE;
  }
}

static MPI_Op mpi_op(int ro) {
  switch (ro) {
    case RO_SUM:
      return MPI_SUM;
    case RO_PROD:
      return MPI_PROD;
    case RO_MAX:
      return MPI_MAX;
    default:
      return MPI_MIN;
  }
}

static void be_barrier(perf_backend *be) {
  (void)be;
  MPI_Barrier(MPI_COMM_WORLD);
}

static void be_allreduce_d(perf_backend *be, double *v, int n, int red) {
  (void)be;
  MPI_Op op = red == PERF_DSUM ? MPI_SUM : red == PERF_DMAX ? MPI_MAX : MPI_MIN;
  MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, op, MPI_COMM_WORLD);
}

static int be_supports(perf_backend *be, const perf_case *c) {
  (void)be;
  /* Counts are int in MPI-3. */
  return c->count > (size_t)0x7fffffff ? -1 : 0;
}

static int be_run(perf_backend *be, perf_case *c) {
  MPI_Comm w = MPI_COMM_WORLD;
  MPI_Datatype t = mpi_type(c->dtype);
  MPI_Op op = mpi_op(c->redop);
  int r = be->rank, cnt = (int)c->count, blk = (int)c->blk, rc = MPI_SUCCESS;
  static MPI_Request req[2 * PERF_MAX_WINDOW];
  int win = c->window;
  int ack = 0;
  switch (c->op) {
    case OP_LATENCY:
      if (r == 0) {
        rc = MPI_Send(c->sbuf, cnt, t, 1, 1, w);
        if (!rc) rc = MPI_Recv(c->rbuf, cnt, t, 1, 1, w, MPI_STATUS_IGNORE);
      } else if (r == 1) {
        rc = MPI_Recv(c->rbuf, cnt, t, 0, 1, w, MPI_STATUS_IGNORE);
        if (!rc) rc = MPI_Send(c->rbuf, cnt, t, 0, 1, w);
      }
      break;
    case OP_BW:
      if (r == 0) {
        for (int i = 0; i < win; i++)
          MPI_Isend(c->sbuf, cnt, t, 1, 2, w, &req[i]);
        rc = MPI_Waitall(win, req, MPI_STATUSES_IGNORE);
        if (!rc) rc = MPI_Recv(&ack, 1, MPI_INT, 1, 3, w, MPI_STATUS_IGNORE);
      } else if (r == 1) {
        for (int i = 0; i < win; i++)
          MPI_Irecv(c->rbuf, cnt, t, 0, 2, w, &req[i]);
        rc = MPI_Waitall(win, req, MPI_STATUSES_IGNORE);
        if (!rc) rc = MPI_Send(&ack, 1, MPI_INT, 0, 3, w);
      }
      break;
    case OP_BIBW:
      if (r <= 1) {
        int peer = 1 - r;
        for (int i = 0; i < win; i++)
          MPI_Irecv(c->rbuf, cnt, t, peer, 2, w, &req[i]);
        for (int i = 0; i < win; i++)
          MPI_Isend(c->sbuf, cnt, t, peer, 2, w, &req[win + i]);
        rc = MPI_Waitall(2 * win, req, MPI_STATUSES_IGNORE);
      }
      break;
    case OP_ALLREDUCE:
      rc = MPI_Allreduce(c->sbuf, c->rbuf, cnt, t, op, w);
      break;
    case OP_IALLREDUCE:
      rc = MPI_Iallreduce(c->sbuf, c->rbuf, cnt, t, op, w, &req[0]);
      if (!rc) rc = MPI_Wait(&req[0], MPI_STATUS_IGNORE);
      break;
    case OP_BCAST:
      rc = MPI_Bcast(c->sbuf, cnt, t, c->root, w);
      break;
    case OP_REDUCE:
      rc = MPI_Reduce(c->sbuf, c->rbuf, cnt, t, op, c->root, w);
      break;
    case OP_ALLGATHER:
      rc = MPI_Allgather(c->sbuf, blk, t, c->rbuf, blk, t, w);
      break;
    case OP_REDUCE_SCATTER:
      rc = MPI_Reduce_scatter_block(c->sbuf, c->rbuf, blk, t, op, w);
      break;
    case OP_ALLTOALL:
      rc = MPI_Alltoall(c->sbuf, blk, t, c->rbuf, blk, t, w);
      break;
    case OP_GATHER:
      rc = MPI_Gather(c->sbuf, blk, t, c->rbuf, blk, t, c->root, w);
      break;
    case OP_SCATTER:
      rc = MPI_Scatter(c->sbuf, blk, t, c->rbuf, blk, t, c->root, w);
      break;
    case OP_SCAN:
      rc = MPI_Scan(c->sbuf, c->rbuf, cnt, t, op, w);
      break;
    case OP_BARRIER:
      rc = MPI_Barrier(w);
      break;
  }
  return rc == MPI_SUCCESS ? 0 : -1;
}

int main(int argc, char **argv) {
  perf_opts o;
  int prc = perf_parse(argc, argv, &o);
  MPI_Init(&argc, &argv);
  perf_backend be;
  memset(&be, 0, sizeof be);
  MPI_Comm_rank(MPI_COMM_WORLD, &be.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &be.size);
  if (prc) {
    if (!be.rank) perf_usage(argv[0]);
    MPI_Finalize();
    return prc;
  }
  static char ver[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(ver, &len);
  for (int i = 0; ver[i]; i++) /* first line, no trailing punctuation */
    if (ver[i] == '\n' || ver[i] == ',') {
      ver[i] = '\0';
      break;
    }
#if defined(OPEN_MPI)
  be.impl = "openmpi";
#elif defined(MPICH)
  be.impl = "mpich";
#else
  be.impl = "mpi";
#endif
  be.impl_version = ver;
  be.barrier = be_barrier;
  be.allreduce_d = be_allreduce_d;
  be.supports = be_supports;
  be.run = be_run;
  int rc = perf_main(&be, &o);
  if (be.failed) MPI_Abort(MPI_COMM_WORLD, 1); /* the others may wait */
  MPI_Finalize();
  return rc;
}
