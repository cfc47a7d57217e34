/*
 * Communicators: each MPI communicator wraps a nexar communicator (nc, the
 * user's traffic) and a duplicate of it (cc, the layer's own point-to-point
 * traffic inside collectives), with its group, error handler, topology and
 * attributes. Intra-communicators only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi_int.h"

nxm_comm_t *nxm_comm_get(MPI_Comm h) {
  if (h == MPI_COMM_WORLD) return nxm_g.world;
  if (h == MPI_COMM_SELF) return nxm_g.self;
  if (!nxm_obj_is(h, NXM_MAGIC_COMM)) return NULL;
  nxm_comm_t *c = (nxm_comm_t *)h;
  return c->nc ? c : NULL;
}

MPI_Comm nxm_comm_handle(nxm_comm_t *c) {
  if (!c) return MPI_COMM_NULL;
  if (c == nxm_g.world) return MPI_COMM_WORLD;
  if (c == nxm_g.self) return MPI_COMM_SELF;
  return (MPI_Comm)c;
}

int nxm_coll_tag(nxm_comm_t *c) {
  return (int)(atomic_fetch_add(&c->coll_seq, 1) & NEXAR_TAG_MAX);
}

/* Frees the nexar communicators of |c| (collective over its members). */
static int release_nexar(nxm_comm_t *c) {
  int rc = NEXAR_OK, rc2 = NEXAR_OK;
  if (c->cc) rc = nexar_comm_free(&c->cc);
  if (c->nc) rc2 = nexar_comm_free(&c->nc);
  c->cc = c->nc = NULL;
  return rc != NEXAR_OK ? rc : rc2;
}

void nxm_topo_free(nxm_topo_t *t) {
  if (!t) return;
  free(t->dims);
  free(t->periods);
  free(t->sources);
  free(t->sourceweights);
  free(t->destinations);
  free(t->destweights);
  free(t->index);
  free(t->edges);
  free(t);
}

void nxm_comm_unref(nxm_comm_t *c) {
  if (!c || atomic_fetch_sub(&c->refs, 1) != 1) return;
  nxm_attr_delete_all(c);
  release_nexar(c);
  nxm_obj_close(c);
  nxm_group_unref(c->group);
  nxm_errh_unref(c->errh);
  nxm_topo_free(c->topo);
  free(c);
}

int nxm_comm_wrap(nxm_comm_t *parent, nexar_comm_t *nc, nxm_comm_t **out) {
  *out = NULL;
  if (!nc) return MPI_SUCCESS;
  int cls = MPI_ERR_NO_MEM, rc;
  int *ids = NULL;
  nxm_comm_t *c = calloc(1, sizeof *c);
  if (!c) goto fail;
  atomic_init(&c->refs, 1);
  c->nc = nc;
  if (nxm_obj_open(c, NXM_MAGIC_COMM) != MPI_SUCCESS) goto fail;
  nexar_comm_rank(nc, &c->rank);
  nexar_comm_size(nc, &c->size);
  c->errh = parent ? parent->errh : nxm_errh_get(MPI_ERRORS_ARE_FATAL);
  nxm_errh_ref(c->errh);
  rc = nexar_comm_dup(nc, &c->cc);
  if (rc != NEXAR_OK) {
    cls = nxm_err_nexar(parent, "communicator creation", rc);
    goto fail;
  }
  ids = malloc((size_t)c->size * sizeof *ids);
  if (!ids) goto fail;
  for (int i = 0; i < c->size; i++) nexar_comm_id_of(nc, i, &ids[i]);
  c->group = nxm_group_new(c->size, ids);
  if (!c->group) goto fail;
  c->group->rank = c->rank; /* also while MPI_COMM_WORLD is being made */
  free(ids);
  *out = c;
  return MPI_SUCCESS;
fail:
  free(ids);
  if (c) {
    nxm_comm_unref(c);
  } else {
    nexar_comm_free(&nc);
  }
  if (cls == MPI_ERR_NO_MEM)
    cls = nxm_err(parent, cls, "communicator creation", "out of memory");
  return cls;
}

#define GET_COMM(var, h, fn)                                \
  nxm_comm_t *var = nxm_comm_get(h);                        \
  if (!var) {                                               \
    int ic_ = nxm_check_init(fn);                           \
    if (ic_ != MPI_SUCCESS) return ic_;                     \
    return nxm_err(NULL, MPI_ERR_COMM, fn, "invalid comm"); \
  }

int MPI_Comm_size(MPI_Comm comm, int *size) {
  GET_COMM(c, comm, "MPI_Comm_size");
  if (!size) return nxm_err(c, MPI_ERR_ARG, "MPI_Comm_size", "NULL size");
  *size = c->size;
  return MPI_SUCCESS;
}

int MPI_Comm_rank(MPI_Comm comm, int *rank) {
  GET_COMM(c, comm, "MPI_Comm_rank");
  if (!rank) return nxm_err(c, MPI_ERR_ARG, "MPI_Comm_rank", "NULL rank");
  *rank = c->rank;
  return MPI_SUCCESS;
}

int MPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int *result) {
  GET_COMM(c1, comm1, "MPI_Comm_compare");
  GET_COMM(c2, comm2, "MPI_Comm_compare");
  if (!result) return nxm_err(c1, MPI_ERR_ARG, "MPI_Comm_compare", "NULL");
  if (c1 == c2) {
    *result = MPI_IDENT;
    return MPI_SUCCESS;
  }
  int g = MPI_UNEQUAL;
  MPI_Group_compare((MPI_Group)c1->group, (MPI_Group)c2->group, &g);
  *result = g == MPI_IDENT ? MPI_CONGRUENT : g;
  return MPI_SUCCESS;
}

/* Gives the new communicator's handle (MPI_COMM_NULL when not a member). */
static int give(nxm_comm_t *parent, nexar_comm_t *nc, MPI_Comm *newcomm) {
  nxm_comm_t *c = NULL;
  int cls = nxm_comm_wrap(parent, nc, &c);
  *newcomm = nxm_comm_handle(c);
  return cls;
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm) {
  GET_COMM(c, comm, "MPI_Comm_dup");
  if (!newcomm) return nxm_err(c, MPI_ERR_ARG, "MPI_Comm_dup", "NULL");
  nexar_comm_t *nc = NULL;
  int rc = nexar_comm_dup(c->nc, &nc);
  if (rc != NEXAR_OK) return nxm_err_nexar(c, "MPI_Comm_dup", rc);
  int cls = give(c, nc, newcomm);
  if (cls != MPI_SUCCESS) return cls;
  nxm_comm_t *n = nxm_comm_get(*newcomm);
  cls = nxm_topo_copy(c, n);
  if (cls == MPI_SUCCESS) cls = nxm_attr_copy_all(c, n);
  if (cls != MPI_SUCCESS) {
    MPI_Comm_free(newcomm);
    return nxm_err(c, cls, "MPI_Comm_dup", "copying topology/attributes");
  }
  return MPI_SUCCESS;
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm) {
  (void)info;
  return MPI_Comm_dup(comm, newcomm);
}

/* The duplicate is made during the call (a collective over |comm|), so
 * the request is complete at once. */
int MPI_Comm_idup(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request) {
  GET_COMM(c, comm, "MPI_Comm_idup");
  if (!request) return nxm_err(c, MPI_ERR_ARG, "MPI_Comm_idup", "NULL");
  int cls = MPI_Comm_dup(comm, newcomm);
  if (cls != MPI_SUCCESS) return cls;
  nxm_req_t *r = nxm_req_new(NXM_REQ_DONE, c, 0);
  if (!r) return nxm_err(c, MPI_ERR_NO_MEM, "MPI_Comm_idup", "out of memory");
  *request = (MPI_Request)r;
  return MPI_SUCCESS;
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
  GET_COMM(c, comm, "MPI_Comm_split");
  if (!newcomm) return nxm_err(c, MPI_ERR_ARG, "MPI_Comm_split", "NULL");
  if (color < 0 && color != MPI_UNDEFINED)
    return nxm_err(c, MPI_ERR_ARG, "MPI_Comm_split", "color %d", color);
  nexar_comm_t *nc = NULL;
  int rc = nexar_comm_split(
      c->nc, color == MPI_UNDEFINED ? NEXAR_UNDEFINED : color, key, &nc);
  if (rc != NEXAR_OK) return nxm_err_nexar(c, "MPI_Comm_split", rc);
  return give(c, nc, newcomm);
}

/* MPI_COMM_TYPE_SHARED: the ranks on this host (same host name). */
int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info,
                        MPI_Comm *newcomm) {
  (void)info;
  const char *fn = "MPI_Comm_split_type";
  GET_COMM(c, comm, fn);
  if (!newcomm) return nxm_err(c, MPI_ERR_ARG, fn, "NULL newcomm");
  if (split_type != MPI_COMM_TYPE_SHARED && split_type != MPI_UNDEFINED)
    return nxm_err(c, MPI_ERR_ARG, fn, "split_type %d", split_type);
  enum { HOST = 64 };
  char *names = calloc((size_t)c->size + 1, HOST);
  if (!names) return nxm_err(c, MPI_ERR_NO_MEM, fn, "out of memory");
  char me[HOST] = "";
  gethostname(me, HOST - 1);
  int rc = nexar_allgather(c->cc, me, names, HOST, NEXAR_BYTE);
  int color = MPI_UNDEFINED;
  for (int i = 0; rc == NEXAR_OK && i < c->size; i++)
    if (memcmp(names + (size_t)i * HOST, me, HOST) == 0) {
      color = i;
      break;
    }
  free(names);
  if (rc != NEXAR_OK) return nxm_err_nexar(c, fn, rc);
  if (split_type == MPI_UNDEFINED) color = MPI_UNDEFINED;
  return MPI_Comm_split(comm, color, key, newcomm);
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm) {
  const char *fn = "MPI_Comm_create";
  GET_COMM(c, comm, fn);
  nxm_group_t *g = nxm_group_get(group);
  if (!g) return nxm_err(c, MPI_ERR_GROUP, fn, "invalid group");
  if (!newcomm) return nxm_err(c, MPI_ERR_ARG, fn, "NULL newcomm");
  for (int i = 0; i < g->size; i++)
    if (nxm_group_rank_of(c->group, g->ids[i]) == MPI_UNDEFINED)
      return nxm_err(c, MPI_ERR_GROUP, fn,
                     "group member %d is not in the communicator", i);
  int color = g->rank == MPI_UNDEFINED ? NEXAR_UNDEFINED : 0;
  nexar_comm_t *nc = NULL;
  int rc = nexar_comm_split(c->nc, color, g->rank, &nc);
  if (rc != NEXAR_OK) return nxm_err_nexar(c, fn, rc);
  return give(c, nc, newcomm);
}

int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag,
                          MPI_Comm *newcomm) {
  const char *fn = "MPI_Comm_create_group";
  GET_COMM(c, comm, fn);
  nxm_group_t *g = nxm_group_get(group);
  if (!g) return nxm_err(c, MPI_ERR_GROUP, fn, "invalid group");
  if (!newcomm) return nxm_err(c, MPI_ERR_ARG, fn, "NULL newcomm");
  int cls = nxm_check_tag(c, fn, tag, 0);
  if (cls != MPI_SUCCESS) return cls;
  if (g->rank == MPI_UNDEFINED) {
    *newcomm = MPI_COMM_NULL;
    return MPI_SUCCESS;
  }
  int *ranks = malloc(((size_t)g->size + 1) * sizeof *ranks);
  if (!ranks) return nxm_err(c, MPI_ERR_NO_MEM, fn, "out of memory");
  for (int i = 0; i < g->size; i++) {
    ranks[i] = nxm_group_rank_of(c->group, g->ids[i]);
    if (ranks[i] == MPI_UNDEFINED) {
      free(ranks);
      return nxm_err(c, MPI_ERR_GROUP, fn,
                     "group member %d is not in the communicator", i);
    }
  }
  nexar_comm_t *nc = NULL;
  int rc = nexar_comm_create_group(c->nc, ranks, g->size, tag, &nc);
  free(ranks);
  if (rc != NEXAR_OK) return nxm_err_nexar(c, fn, rc);
  return give(c, nc, newcomm);
}

int MPI_Comm_free(MPI_Comm *comm) {
  if (!comm) return nxm_err(NULL, MPI_ERR_ARG, "MPI_Comm_free", "NULL");
  GET_COMM(c, *comm, "MPI_Comm_free");
  if (c->predefined)
    return nxm_err(c, MPI_ERR_COMM, "MPI_Comm_free",
                   "MPI_COMM_WORLD and MPI_COMM_SELF cannot be freed");
  nxm_attr_delete_all(c);
  int rc = release_nexar(c);
  *comm = MPI_COMM_NULL;
  nxm_comm_unref(c);
  if (rc != NEXAR_OK)
    return nxm_err(NULL, nxm_class_of_nexar(rc), "MPI_Comm_free", "%s",
                   nexar_strerror(rc));
  return MPI_SUCCESS;
}

int MPI_Comm_disconnect(MPI_Comm *comm) {
  return MPI_Comm_free(comm);
}

int MPI_Comm_group(MPI_Comm comm, MPI_Group *group) {
  GET_COMM(c, comm, "MPI_Comm_group");
  if (!group) return nxm_err(c, MPI_ERR_ARG, "MPI_Comm_group", "NULL");
  nxm_group_ref(c->group);
  *group = c->group->size ? (MPI_Group)c->group : MPI_GROUP_EMPTY;
  return MPI_SUCCESS;
}

int MPI_Comm_test_inter(MPI_Comm comm, int *flag) {
  GET_COMM(c, comm, "MPI_Comm_test_inter");
  if (!flag) return nxm_err(c, MPI_ERR_ARG, "MPI_Comm_test_inter", "NULL");
  *flag = 0;
  return MPI_SUCCESS;
}

int MPI_Comm_remote_size(MPI_Comm comm, int *size) {
  GET_COMM(c, comm, "MPI_Comm_remote_size");
  (void)size;
  return nxm_err(c, MPI_ERR_COMM, "MPI_Comm_remote_size",
                 "not an inter-communicator");
}

int MPI_Comm_remote_group(MPI_Comm comm, MPI_Group *group) {
  GET_COMM(c, comm, "MPI_Comm_remote_group");
  (void)group;
  return nxm_err(c, MPI_ERR_COMM, "MPI_Comm_remote_group",
                 "not an inter-communicator");
}

int MPI_Comm_set_info(MPI_Comm comm, MPI_Info info) {
  GET_COMM(c, comm, "MPI_Comm_set_info");
  (void)c;
  (void)info; /* no hints are used: ignoring them is allowed */
  return MPI_SUCCESS;
}

int MPI_Comm_get_info(MPI_Comm comm, MPI_Info *info_used) {
  GET_COMM(c, comm, "MPI_Comm_get_info");
  (void)c;
  return MPI_Info_create(info_used);
}

int MPI_Comm_set_name(MPI_Comm comm, const char *comm_name) {
  GET_COMM(c, comm, "MPI_Comm_set_name");
  if (!comm_name) return nxm_err(c, MPI_ERR_ARG, "MPI_Comm_set_name", "NULL");
  snprintf(c->name, sizeof c->name, "%s", comm_name);
  return MPI_SUCCESS;
}

int MPI_Comm_get_name(MPI_Comm comm, char *comm_name, int *resultlen) {
  GET_COMM(c, comm, "MPI_Comm_get_name");
  if (!comm_name || !resultlen)
    return nxm_err(c, MPI_ERR_ARG, "MPI_Comm_get_name", "NULL");
  *resultlen = snprintf(comm_name, MPI_MAX_OBJECT_NAME, "%s", c->name);
  return MPI_SUCCESS;
}

/* ---- ULFM (MPIX_) on nexar's failure handling. */

int MPIX_Comm_shrink(MPI_Comm comm, MPI_Comm *newcomm) {
  GET_COMM(c, comm, "MPIX_Comm_shrink");
  if (!newcomm) return nxm_err(c, MPI_ERR_ARG, "MPIX_Comm_shrink", "NULL");
  nexar_comm_t *nc = NULL;
  int rc = nexar_comm_shrink(c->nc, &nc);
  if (rc != NEXAR_OK) return nxm_err_nexar(c, "MPIX_Comm_shrink", rc);
  return give(c, nc, newcomm);
}

int MPIX_Comm_revoke(MPI_Comm comm) {
  GET_COMM(c, comm, "MPIX_Comm_revoke");
  return nxm_err(c, MPI_ERR_UNSUPPORTED_OPERATION, "MPIX_Comm_revoke",
                 "nexar revokes communicators itself on a failure");
}

int MPIX_Comm_agree(MPI_Comm comm, int *flag) {
  GET_COMM(c, comm, "MPIX_Comm_agree");
  if (!flag) return nxm_err(c, MPI_ERR_ARG, "MPIX_Comm_agree", "NULL");
  int in = *flag, out = 0;
  int rc = nexar_allreduce(c->cc, &in, &out, 1, NEXAR_INT32, NEXAR_BAND);
  if (rc != NEXAR_OK) return nxm_err_nexar(c, "MPIX_Comm_agree", rc);
  *flag = out;
  return MPI_SUCCESS;
}

int MPIX_Comm_failure_ack(MPI_Comm comm) {
  GET_COMM(c, comm, "MPIX_Comm_failure_ack");
  (void)c;
  return MPI_SUCCESS;
}

/* The processes of |comm| this process knows to have failed. */
int MPIX_Comm_failure_get_acked(MPI_Comm comm, MPI_Group *failedgrp) {
  const char *fn = "MPIX_Comm_failure_get_acked";
  GET_COMM(c, comm, fn);
  if (!failedgrp) return nxm_err(c, MPI_ERR_ARG, fn, "NULL");
  int count = 0;
  nexar_failures(nxm_g.ctx, NULL, 0, &count);
  if (count < 0 || count > NXM_MAX_ITEMS) count = 0;
  nexar_failure_t *f = calloc((size_t)count + 1, sizeof *f);
  int *ids = calloc((size_t)count + 1, sizeof *ids);
  int n = 0, cls = MPI_SUCCESS;
  if (!f || !ids) {
    cls = nxm_err(c, MPI_ERR_NO_MEM, fn, "out of memory");
    goto out;
  }
  nexar_failures(nxm_g.ctx, f, count, &count);
  for (int i = 0; i < count; i++)
    if (nxm_group_rank_of(c->group, f[i].id) != MPI_UNDEFINED)
      ids[n++] = f[i].id;
  nxm_group_t *g = nxm_group_new(n, ids);
  if (!g) {
    cls = nxm_err(c, MPI_ERR_NO_MEM, fn, "out of memory");
    goto out;
  }
  *failedgrp = n ? (MPI_Group)g : MPI_GROUP_EMPTY;
out:
  free(f);
  free(ids);
  return cls;
}
