/*
 * TEMPORARY until branch mpi-core lands: stand-ins for the public nexar
 * functions that section A of /work/notes/mpi-contract.md adds to
 * include/nexar.h, so that the MPI layer builds and its tests run before
 * then. The coordinator deletes this file at the merge. They are built
 * from the public API only and are weaker than the real ones:
 * - nexar_iprobe / nexar_probe: NEXAR_ERR_UNSUPPORTED;
 * - nexar_ssend / nexar_issend: a standard send (no synchronisation);
 * - nexar_cancel: NEXAR_OK without cancelling (allowed by MPI);
 * - nexar_waitany: a nexar_test loop;
 * - nexar_comm_create_group: only the whole communicator (a dup);
 *   anything else NEXAR_ERR_UNSUPPORTED.
 */
#include <sched.h>

#include "mpi_int.h"

int nexar_iprobe(nexar_comm_t *comm, int source, int tag, int *flag,
                 nexar_status_t *status) {
  (void)comm, (void)source, (void)tag, (void)status;
  if (flag) *flag = 0;
  return NEXAR_ERR_UNSUPPORTED;
}

int nexar_probe(nexar_comm_t *comm, int source, int tag,
                nexar_status_t *status) {
  (void)comm, (void)source, (void)tag, (void)status;
  return NEXAR_ERR_UNSUPPORTED;
}

int nexar_ssend(nexar_comm_t *comm, const void *buf, size_t count,
                nexar_dtype_t dtype, int dest, int tag) {
  return nexar_send(comm, buf, count, dtype, dest, tag);
}

int nexar_issend(nexar_comm_t *comm, const void *buf, size_t count,
                 nexar_dtype_t dtype, int dest, int tag, nexar_req_t **req) {
  return nexar_isend(comm, buf, count, dtype, dest, tag, req);
}

int nexar_cancel(nexar_req_t *req) {
  return req ? NEXAR_OK : NEXAR_ERR_INVALID_ARG;
}

int nexar_waitany(size_t n, nexar_req_t **reqs, size_t *index,
                  nexar_status_t *status) {
  *index = NEXAR_UNDEFINED_INDEX;
  for (;;) {
    int any = 0;
    for (size_t i = 0; i < n; i++) {
      if (!reqs[i]) continue;
      any = 1;
      int done = 0;
      int rc = nexar_test(&reqs[i], &done, status);
      if (done || rc != NEXAR_OK) {
        *index = i;
        return rc;
      }
    }
    if (!any) return NEXAR_OK;
    sched_yield();
  }
}

int nexar_comm_create_group(nexar_comm_t *comm, const int *ranks, int n,
                            int tag, nexar_comm_t **newcomm) {
  (void)tag;
  int size = 0;
  nexar_comm_size(comm, &size);
  if (n != size) return NEXAR_ERR_UNSUPPORTED;
  for (int i = 0; i < n; i++)
    if (ranks[i] != i) return NEXAR_ERR_UNSUPPORTED;
  return nexar_comm_dup(comm, newcomm);
}
