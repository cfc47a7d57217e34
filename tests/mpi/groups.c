/* groups: communicators built from groups, as libraries and solvers do:
 * even and odd halves (MPI_Group_incl/excl, MPI_Comm_create for all,
 * MPI_Comm_create_group for the members only), MPI_Group_translate_ranks,
 * MPI_Comm_split by colour with reversed keys and MPI_UNDEFINED,
 * MPI_Comm_dup (and that its traffic stays apart), MPI_Comm_compare, and
 * freeing everything. */
#include "mpitest.h"

/* the sum of world ranks over |comm|, which must be |expect| */
static void check_sum(MPI_Comm comm, int wrank, int expect) {
  int sum = -1;
  MPI_Allreduce(&wrank, &sum, 1, MPI_INT, MPI_SUM, comm);
  CHECK_EQ(sum, expect);
}

int main(int argc, char **argv) {
  int rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  MPI_Group world;
  int gsize, grank;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  MPI_Group_size(world, &gsize);
  MPI_Group_rank(world, &grank);
  CHECK_EQ(gsize, size);
  CHECK_EQ(grank, rank);

  /* even ranks by inclusion, odd ranks by excluding the even ones */
  int neven = (size + 1) / 2, nodd = size / 2, evens[64], sumeven = 0,
      sumodd = 0;
  CHECK(size <= 128);
  for (int i = 0; i < neven; i++) {
    evens[i] = 2 * i;
    sumeven += 2 * i;
  }
  sumodd = size * (size - 1) / 2 - sumeven;
  MPI_Group even, odd;
  MPI_Group_incl(world, neven, evens, &even);
  MPI_Group_excl(world, neven, evens, &odd);
  MPI_Group_size(even, &gsize);
  CHECK_EQ(gsize, neven);
  MPI_Group_size(odd, &gsize);
  CHECK_EQ(gsize, nodd);
  MPI_Group_rank(even, &grank);
  CHECK_EQ(grank, rank % 2 ? MPI_UNDEFINED : rank / 2);
  MPI_Group_rank(odd, &grank);
  CHECK_EQ(grank, rank % 2 ? rank / 2 : MPI_UNDEFINED);

  /* odd group ranks -> world ranks; world ranks -> even group ranks */
  int in[64], out[64];
  for (int i = 0; i < nodd; i++) in[i] = i;
  MPI_Group_translate_ranks(odd, nodd, in, world, out);
  for (int i = 0; i < nodd; i++) CHECK_EQ(out[i], 2 * i + 1);
  for (int i = 0; i < size; i++) in[i] = i;
  MPI_Group_translate_ranks(world, size, in, even, out);
  for (int i = 0; i < size; i++)
    CHECK_EQ(out[i], i % 2 ? MPI_UNDEFINED : i / 2);

  /* MPI_Comm_create: every rank calls; the odd ones get MPI_COMM_NULL */
  MPI_Comm ceven;
  MPI_Comm_create(MPI_COMM_WORLD, even, &ceven);
  if (rank % 2) {
    CHECK(ceven == MPI_COMM_NULL);
  } else {
    int r, s;
    CHECK(ceven != MPI_COMM_NULL);
    MPI_Comm_rank(ceven, &r);
    MPI_Comm_size(ceven, &s);
    CHECK_EQ(r, rank / 2);
    CHECK_EQ(s, neven);
    check_sum(ceven, rank, sumeven);
  }

  /* MPI_Comm_create_group: only the odd ranks call */
  MPI_Comm codd = MPI_COMM_NULL;
  if (rank % 2) {
    int r, s;
    MPI_Comm_create_group(MPI_COMM_WORLD, odd, 42, &codd);
    CHECK(codd != MPI_COMM_NULL);
    MPI_Comm_rank(codd, &r);
    MPI_Comm_size(codd, &s);
    CHECK_EQ(r, rank / 2);
    CHECK_EQ(s, nodd);
    check_sum(codd, rank, sumodd);
    /* a message inside the odd communicator: new rank 0 -> last */
    if (s > 1 && (r == 0 || r == s - 1)) {
      int v = rank * 11;
      if (r == 0)
        MPI_Send(&v, 1, MPI_INT, s - 1, 3, codd);
      else {
        MPI_Status st;
        MPI_Recv(&v, 1, MPI_INT, 0, 3, codd, &st);
        CHECK_EQ(v, 1 * 11);
        CHECK_EQ(st.MPI_SOURCE, 0);
      }
    }
  }

  /* MPI_Comm_split: colour rank % 3, key -rank (reverse order); the
   * ranks with rank % 3 == 2 ask for MPI_UNDEFINED */
  int color = rank % 3 == 2 ? MPI_UNDEFINED : rank % 3;
  MPI_Comm split;
  MPI_Comm_split(MPI_COMM_WORLD, color, -rank, &split);
  if (color == MPI_UNDEFINED) {
    CHECK(split == MPI_COMM_NULL);
  } else {
    int r, s, members = 0, above = 0, all[128];
    for (int i = 0; i < size; i++)
      if (i % 3 == rank % 3) {
        members++;
        above += i > rank;
      }
    MPI_Comm_rank(split, &r);
    MPI_Comm_size(split, &s);
    CHECK_EQ(s, members);
    CHECK_EQ(r, above);
    MPI_Allgather(&rank, 1, MPI_INT, all, 1, MPI_INT, split);
    for (int i = 0; i < s; i++) /* descending world ranks of my colour */
      CHECK_EQ(all[i], rank % 3 + 3 * (s - 1 - i));
  }

  /* MPI_Comm_dup and MPI_Comm_compare */
  MPI_Comm dup, same, rev;
  int res;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &res);
  CHECK_EQ(res, MPI_IDENT);
  MPI_Comm_compare(MPI_COMM_WORLD, dup, &res);
  CHECK_EQ(res, MPI_CONGRUENT);
  MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &same);
  MPI_Comm_compare(same, MPI_COMM_WORLD, &res);
  CHECK_EQ(res, MPI_CONGRUENT);
  MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &rev);
  MPI_Comm_compare(rev, MPI_COMM_WORLD, &res);
  CHECK_EQ(res, MPI_SIMILAR);
  MPI_Comm_compare(MPI_COMM_SELF, MPI_COMM_WORLD, &res);
  CHECK_EQ(res, MPI_UNEQUAL);
  if (ceven != MPI_COMM_NULL) {
    MPI_Comm_compare(ceven, MPI_COMM_WORLD, &res);
    CHECK_EQ(res, MPI_UNEQUAL);
  }
  check_sum(dup, rank, size * (size - 1) / 2);

  /* the same (source, tag) on world and on its duplicate stay apart:
   * rank 0 sends on dup first, then on world; rank 1 receives world first */
  if (rank == 0) {
    int a = 111, b = 222;
    MPI_Send(&a, 1, MPI_INT, 1, 9, dup);
    MPI_Send(&b, 1, MPI_INT, 1, 9, MPI_COMM_WORLD);
  } else if (rank == 1) {
    int a = 0, b = 0;
    MPI_Request rq;
    MPI_Irecv(&a, 1, MPI_INT, 0, 9, dup, &rq);
    MPI_Recv(&b, 1, MPI_INT, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    CHECK_EQ(a, 111);
    CHECK_EQ(b, 222);
  }

  /* freeing sets the handles to the null handles */
  MPI_Comm_free(&dup);
  CHECK(dup == MPI_COMM_NULL);
  MPI_Comm_free(&same);
  MPI_Comm_free(&rev);
  if (split != MPI_COMM_NULL) MPI_Comm_free(&split);
  if (ceven != MPI_COMM_NULL) MPI_Comm_free(&ceven);
  if (codd != MPI_COMM_NULL) MPI_Comm_free(&codd);
  MPI_Group_free(&even);
  CHECK(even == MPI_GROUP_NULL);
  MPI_Group_free(&odd);
  MPI_Group_free(&world);

  mt_ok("groups");
  MPI_Finalize();
  return 0;
}
