/*
 * Groups: ordered lists of processes named by nexar's stable ids (the world
 * rank a process got when it joined), so that groups taken from different
 * communicators compare, translate and combine directly.
 */
#include <stdlib.h>
#include <string.h>

#include "mpi_int.h"

static nxm_group_t g_empty = {NXM_MAGIC_GROUP, 1, 0, MPI_UNDEFINED, NULL};

nxm_group_t *nxm_group_get(MPI_Group h) {
  if (h == MPI_GROUP_EMPTY) return &g_empty;
  return nxm_obj_is(h, NXM_MAGIC_GROUP) ? (nxm_group_t *)h : NULL;
}

static MPI_Group group_handle(nxm_group_t *g) {
  return g == &g_empty ? MPI_GROUP_EMPTY : (MPI_Group)g;
}

int nxm_group_rank_of(const nxm_group_t *g, int id) {
  for (int i = 0; i < g->size; i++)
    if (g->ids[i] == id) return i;
  return MPI_UNDEFINED;
}

/* The stable id of this process. */
static int my_id(void) {
  int id = -1;
  if (nxm_g.world) nexar_comm_id_of(nxm_g.world->nc, nxm_g.world->rank, &id);
  return id;
}

nxm_group_t *nxm_group_new(int n, const int *ids) {
  if (n == 0) {
    nxm_group_ref(&g_empty);
    return &g_empty;
  }
  if (n < 0 || n > NXM_MAX_ITEMS) return NULL;
  nxm_group_t *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  g->ids = malloc((size_t)n * sizeof *g->ids);
  if (!g->ids) {
    free(g);
    return NULL;
  }
  memcpy(g->ids, ids, (size_t)n * sizeof *ids);
  if (nxm_obj_open(g, NXM_MAGIC_GROUP) != MPI_SUCCESS) {
    free(g->ids);
    free(g);
    return NULL;
  }
  atomic_init(&g->refs, 1);
  g->size = n;
  g->rank = nxm_group_rank_of(g, my_id());
  return g;
}

void nxm_group_ref(nxm_group_t *g) {
  atomic_fetch_add(&g->refs, 1);
}

void nxm_group_unref(nxm_group_t *g) {
  if (!g || g == &g_empty) return;
  if (atomic_fetch_sub(&g->refs, 1) == 1) {
    nxm_obj_close(g);
    free(g->ids);
    free(g);
  }
}

/* Returns the new group as a handle, or reports MPI_ERR_NO_MEM. */
static int give(const char *fn, int n, const int *ids, MPI_Group *out) {
  nxm_group_t *g = nxm_group_new(n, ids);
  if (!g) return nxm_err(NULL, MPI_ERR_NO_MEM, fn, "group of %d", n);
  *out = group_handle(g);
  return MPI_SUCCESS;
}

#define GET_GROUP(var, h, fn)          \
  nxm_group_t *var = nxm_group_get(h); \
  if (!var) return nxm_err(NULL, MPI_ERR_GROUP, fn, "invalid group")

int MPI_Group_size(MPI_Group group, int *size) {
  GET_GROUP(g, group, "MPI_Group_size");
  if (!size) return nxm_err(NULL, MPI_ERR_ARG, "MPI_Group_size", "NULL");
  *size = g->size;
  return MPI_SUCCESS;
}

int MPI_Group_rank(MPI_Group group, int *rank) {
  GET_GROUP(g, group, "MPI_Group_rank");
  if (!rank) return nxm_err(NULL, MPI_ERR_ARG, "MPI_Group_rank", "NULL");
  *rank = g->rank;
  return MPI_SUCCESS;
}

int MPI_Group_free(MPI_Group *group) {
  if (!group) return nxm_err(NULL, MPI_ERR_ARG, "MPI_Group_free", "NULL");
  GET_GROUP(g, *group, "MPI_Group_free");
  nxm_group_unref(g);
  *group = MPI_GROUP_NULL;
  return MPI_SUCCESS;
}

int MPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[],
                              MPI_Group group2, int ranks2[]) {
  const char *fn = "MPI_Group_translate_ranks";
  GET_GROUP(g1, group1, fn);
  GET_GROUP(g2, group2, fn);
  if (n < 0 || (n > 0 && (!ranks1 || !ranks2)))
    return nxm_err(NULL, MPI_ERR_ARG, fn, "n %d", n);
  for (int i = 0; i < n; i++)
    if (ranks1[i] != MPI_PROC_NULL && (ranks1[i] < 0 || ranks1[i] >= g1->size))
      return nxm_err(NULL, MPI_ERR_RANK, fn, "rank %d not in group1",
                     ranks1[i]);
  for (int i = 0; i < n; i++)
    ranks2[i] = ranks1[i] == MPI_PROC_NULL
                    ? MPI_PROC_NULL
                    : nxm_group_rank_of(g2, g1->ids[ranks1[i]]);
  return MPI_SUCCESS;
}

int MPI_Group_compare(MPI_Group group1, MPI_Group group2, int *result) {
  GET_GROUP(g1, group1, "MPI_Group_compare");
  GET_GROUP(g2, group2, "MPI_Group_compare");
  if (!result) return nxm_err(NULL, MPI_ERR_ARG, "MPI_Group_compare", "NULL");
  if (g1->size != g2->size) {
    *result = MPI_UNEQUAL;
    return MPI_SUCCESS;
  }
  int ident = 1;
  for (int i = 0; i < g1->size; i++) {
    if (g1->ids[i] != g2->ids[i]) ident = 0;
    if (nxm_group_rank_of(g2, g1->ids[i]) == MPI_UNDEFINED) {
      *result = MPI_UNEQUAL;
      return MPI_SUCCESS;
    }
  }
  *result = ident ? MPI_IDENT : MPI_SIMILAR;
  return MPI_SUCCESS;
}

/* Union, intersection and difference: |op| 0, 1, 2. Order: group1's
 * members first (in its order), then for the union group2's others. */
static int set_op(MPI_Group group1, MPI_Group group2, int op, const char *fn,
                  MPI_Group *newgroup) {
  GET_GROUP(g1, group1, fn);
  GET_GROUP(g2, group2, fn);
  if (!newgroup) return nxm_err(NULL, MPI_ERR_ARG, fn, "NULL newgroup");
  int *ids = malloc(((size_t)g1->size + (size_t)g2->size + 1) * sizeof *ids);
  if (!ids) return nxm_err(NULL, MPI_ERR_NO_MEM, fn, "out of memory");
  int n = 0;
  for (int i = 0; i < g1->size; i++) {
    int in2 = nxm_group_rank_of(g2, g1->ids[i]) != MPI_UNDEFINED;
    if (op == 0 || (op == 1 && in2) || (op == 2 && !in2)) ids[n++] = g1->ids[i];
  }
  if (op == 0)
    for (int i = 0; i < g2->size; i++)
      if (nxm_group_rank_of(g1, g2->ids[i]) == MPI_UNDEFINED)
        ids[n++] = g2->ids[i];
  int rc = give(fn, n, ids, newgroup);
  free(ids);
  return rc;
}

int MPI_Group_union(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup) {
  return set_op(group1, group2, 0, "MPI_Group_union", newgroup);
}

int MPI_Group_intersection(MPI_Group group1, MPI_Group group2,
                           MPI_Group *newgroup) {
  return set_op(group1, group2, 1, "MPI_Group_intersection", newgroup);
}

int MPI_Group_difference(MPI_Group group1, MPI_Group group2,
                         MPI_Group *newgroup) {
  return set_op(group1, group2, 2, "MPI_Group_difference", newgroup);
}

/* Checks |n| distinct valid ranks of |g|; *mark (size g->size) gets 1 for
 * each. */
static int check_ranks(nxm_group_t *g, int n, const int ranks[], const char *fn,
                       char **mark) {
  if (n < 0 || n > g->size || (n > 0 && !ranks))
    return nxm_err(NULL, MPI_ERR_ARG, fn, "n %d for a group of %d", n, g->size);
  *mark = calloc((size_t)g->size + 1, 1);
  if (!*mark) return nxm_err(NULL, MPI_ERR_NO_MEM, fn, "out of memory");
  for (int i = 0; i < n; i++) {
    if (ranks[i] < 0 || ranks[i] >= g->size || (*mark)[ranks[i]]) {
      int r = ranks[i];
      free(*mark);
      *mark = NULL;
      return nxm_err(NULL, MPI_ERR_RANK, fn,
                     "rank %d is out of range or repeated", r);
    }
    (*mark)[ranks[i]] = 1;
  }
  return MPI_SUCCESS;
}

int MPI_Group_incl(MPI_Group group, int n, const int ranks[],
                   MPI_Group *newgroup) {
  const char *fn = "MPI_Group_incl";
  GET_GROUP(g, group, fn);
  char *mark = NULL;
  if (!newgroup) return nxm_err(NULL, MPI_ERR_ARG, fn, "NULL newgroup");
  int rc = check_ranks(g, n, ranks, fn, &mark);
  if (rc != MPI_SUCCESS) return rc;
  int *ids = malloc(((size_t)n + 1) * sizeof *ids);
  if (!ids) {
    rc = nxm_err(NULL, MPI_ERR_NO_MEM, fn, "out of memory");
    goto out;
  }
  for (int i = 0; i < n; i++) ids[i] = g->ids[ranks[i]];
  rc = give(fn, n, ids, newgroup);
out:
  free(ids);
  free(mark);
  return rc;
}

int MPI_Group_excl(MPI_Group group, int n, const int ranks[],
                   MPI_Group *newgroup) {
  const char *fn = "MPI_Group_excl";
  GET_GROUP(g, group, fn);
  char *mark = NULL;
  if (!newgroup) return nxm_err(NULL, MPI_ERR_ARG, fn, "NULL newgroup");
  int rc = check_ranks(g, n, ranks, fn, &mark);
  if (rc != MPI_SUCCESS) return rc;
  int *ids = malloc(((size_t)g->size + 1) * sizeof *ids);
  if (!ids) {
    rc = nxm_err(NULL, MPI_ERR_NO_MEM, fn, "out of memory");
    goto out;
  }
  int k = 0;
  for (int i = 0; i < g->size; i++)
    if (!mark[i]) ids[k++] = g->ids[i];
  rc = give(fn, k, ids, newgroup);
out:
  free(ids);
  free(mark);
  return rc;
}

/* Expands (first, last, stride) triplets into a rank list (at most the
 * group's size entries, else MPI_ERR_ARG). */
static int expand_ranges(nxm_group_t *g, int n, int ranges[][3], const char *fn,
                         int **out, int *nout) {
  if (n < 0 || (n > 0 && !ranges))
    return nxm_err(NULL, MPI_ERR_ARG, fn, "n %d", n);
  int *r = malloc(((size_t)g->size + 1) * sizeof *r);
  if (!r) return nxm_err(NULL, MPI_ERR_NO_MEM, fn, "out of memory");
  int k = 0;
  for (int i = 0; i < n; i++) {
    int first = ranges[i][0], last = ranges[i][1], stride = ranges[i][2];
    if (stride == 0 || (stride > 0 && first > last) ||
        (stride < 0 && first < last)) {
      free(r);
      return nxm_err(NULL, MPI_ERR_ARG, fn, "bad range %d,%d,%d", first, last,
                     stride);
    }
    for (long v = first; stride > 0 ? v <= last : v >= last; v += stride) {
      if (k >= g->size || v < 0 || v >= g->size) {
        free(r);
        return nxm_err(NULL, MPI_ERR_RANK, fn, "range %d,%d,%d", first, last,
                       stride);
      }
      r[k++] = (int)v;
    }
  }
  *out = r;
  *nout = k;
  return MPI_SUCCESS;
}

int MPI_Group_range_incl(MPI_Group group, int n, int ranges[][3],
                         MPI_Group *newgroup) {
  GET_GROUP(g, group, "MPI_Group_range_incl");
  int *r = NULL, k = 0;
  int rc = expand_ranges(g, n, ranges, "MPI_Group_range_incl", &r, &k);
  if (rc != MPI_SUCCESS) return rc;
  rc = MPI_Group_incl(group, k, r, newgroup);
  free(r);
  return rc;
}

int MPI_Group_range_excl(MPI_Group group, int n, int ranges[][3],
                         MPI_Group *newgroup) {
  GET_GROUP(g, group, "MPI_Group_range_excl");
  int *r = NULL, k = 0;
  int rc = expand_ranges(g, n, ranges, "MPI_Group_range_excl", &r, &k);
  if (rc != MPI_SUCCESS) return rc;
  rc = MPI_Group_excl(group, k, r, newgroup);
  free(r);
  return rc;
}
