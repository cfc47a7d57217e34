/* types: the predefined C datatypes (MPI_Type_size against sizeof, the
 * pair types' sizes and extents, a sum over every arithmetic type and a
 * send of every other one) and derived datatypes: MPI_Type_contiguous,
 * MPI_Type_vector, MPI_Type_indexed, MPI_Type_create_struct with
 * MPI_Type_commit / MPI_Type_free / MPI_Type_size / MPI_Type_get_extent /
 * MPI_Type_get_name, sent from and received into non-contiguous memory and
 * matched against contiguous buffers of the same type signature. */
#include "mpitest.h"
#include <complex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <wchar.h>

static int rank, size;

/* the sum over ranks of (rank + 1 + i % 5), for each arithmetic type */
#define SUM_TYPE(ctype, mtype)                                       \
  do {                                                               \
    ctype a[7], b[7];                                                \
    int sz = -1;                                                     \
    MPI_Type_size(mtype, &sz);                                       \
    CHECK_EQ(sz, sizeof(ctype));                                     \
    for (int i = 0; i < 7; i++) a[i] = (ctype)(rank + 1 + i % 5);    \
    MPI_Allreduce(a, b, 7, mtype, MPI_SUM, MPI_COMM_WORLD);          \
    for (int i = 0; i < 7; i++)                                      \
      if (b[i] != (ctype)(size * (size + 1) / 2 + size * (i % 5))) { \
        fprintf(stderr, "%s: element %d wrong\n", #mtype, i);        \
        CHECK(0);                                                    \
      }                                                              \
  } while (0)

/* rank 0 sends 3 values of the type to every other rank, byte for byte */
#define SEND_TYPE(ctype, mtype)                \
  do {                                         \
    ctype a[3];                                \
    int sz = -1;                               \
    MPI_Type_size(mtype, &sz);                 \
    CHECK_EQ(sz, sizeof(ctype));               \
    memset(a, rank == 0 ? 0x5a : 0, sizeof a); \
    MPI_Bcast(a, 3, mtype, 0, MPI_COMM_WORLD); \
    for (size_t k = 0; k < sizeof a; k++)      \
      CHECK_EQ(((unsigned char *)a)[k], 0x5a); \
  } while (0)

static void predefined(void) {
  SUM_TYPE(char, MPI_CHAR);
  SUM_TYPE(signed char, MPI_SIGNED_CHAR);
  SUM_TYPE(unsigned char, MPI_UNSIGNED_CHAR);
  SUM_TYPE(short, MPI_SHORT);
  SUM_TYPE(unsigned short, MPI_UNSIGNED_SHORT);
  SUM_TYPE(int, MPI_INT);
  SUM_TYPE(unsigned, MPI_UNSIGNED);
  SUM_TYPE(long, MPI_LONG);
  SUM_TYPE(unsigned long, MPI_UNSIGNED_LONG);
  SUM_TYPE(long long, MPI_LONG_LONG_INT);
  SUM_TYPE(long long, MPI_LONG_LONG);
  SUM_TYPE(unsigned long long, MPI_UNSIGNED_LONG_LONG);
  SUM_TYPE(float, MPI_FLOAT);
  SUM_TYPE(double, MPI_DOUBLE);
  SUM_TYPE(long double, MPI_LONG_DOUBLE);
  SUM_TYPE(int8_t, MPI_INT8_T);
  SUM_TYPE(int16_t, MPI_INT16_T);
  SUM_TYPE(int32_t, MPI_INT32_T);
  SUM_TYPE(int64_t, MPI_INT64_T);
  SUM_TYPE(uint8_t, MPI_UINT8_T);
  SUM_TYPE(uint16_t, MPI_UINT16_T);
  SUM_TYPE(uint32_t, MPI_UINT32_T);
  SUM_TYPE(uint64_t, MPI_UINT64_T);
  SUM_TYPE(MPI_Aint, MPI_AINT);
  SUM_TYPE(MPI_Offset, MPI_OFFSET);
  SUM_TYPE(MPI_Count, MPI_COUNT);
  SUM_TYPE(float _Complex, MPI_C_FLOAT_COMPLEX);
  SUM_TYPE(double _Complex, MPI_C_DOUBLE_COMPLEX);
  SEND_TYPE(float _Complex, MPI_C_COMPLEX);
  SEND_TYPE(long double _Complex, MPI_C_LONG_DOUBLE_COMPLEX);
  SEND_TYPE(unsigned char, MPI_BYTE);
  SEND_TYPE(wchar_t, MPI_WCHAR);
  SEND_TYPE(bool, MPI_C_BOOL);

  /* logical and over MPI_C_BOOL */
  bool t = rank != 1, all = true;
  MPI_Allreduce(&t, &all, 1, MPI_C_BOOL, MPI_LAND, MPI_COMM_WORLD);
  CHECK_EQ(all, 0);

  /* the pair types: data size, and the extent of the C struct */
  struct {
    float v;
    int i;
  } fi;
  struct {
    double v;
    int i;
  } di;
  struct {
    long v;
    int i;
  } li;
  struct {
    short v;
    int i;
  } si;
  struct {
    long double v;
    int i;
  } ldi;
  struct {
    MPI_Datatype t;
    int size;
    MPI_Aint extent;
  } pairs[] = {
      {MPI_FLOAT_INT, sizeof(float) + sizeof(int), sizeof fi},
      {MPI_DOUBLE_INT, sizeof(double) + sizeof(int), sizeof di},
      {MPI_LONG_INT, sizeof(long) + sizeof(int), sizeof li},
      {MPI_2INT, 2 * sizeof(int), 2 * sizeof(int)},
      {MPI_SHORT_INT, sizeof(short) + sizeof(int), sizeof si},
      {MPI_LONG_DOUBLE_INT, sizeof(long double) + sizeof(int), sizeof ldi},
  };
  for (unsigned k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
    int sz;
    MPI_Aint lb, ext;
    MPI_Type_size(pairs[k].t, &sz);
    MPI_Type_get_extent(pairs[k].t, &lb, &ext);
    CHECK_EQ(sz, pairs[k].size);
    CHECK_EQ(lb, 0);
    CHECK_EQ(ext, pairs[k].extent);
  }

  char name[MPI_MAX_OBJECT_NAME];
  int len = -1;
  MPI_Type_get_name(MPI_INT, name, &len);
  CHECK(strcmp(name, "MPI_INT") == 0);
  CHECK_EQ(len, 7);
  MPI_Type_get_name(MPI_DOUBLE, name, &len);
  CHECK(strcmp(name, "MPI_DOUBLE") == 0);
}

struct particle {
  char kind;
  double pos[2];
  int id;
};

static void derived(void) {
  int peer = (rank + 1) % size, from = (rank + size - 1) % size, sz;
  MPI_Aint lb, ext;
  MPI_Status st;
  char name[MPI_MAX_OBJECT_NAME];
  int len = -1;

  /* contiguous: 3 ints; a message of 6 ints is 2 of them */
  MPI_Datatype tri;
  MPI_Type_contiguous(3, MPI_INT, &tri);
  MPI_Type_commit(&tri);
  MPI_Type_size(tri, &sz);
  MPI_Type_get_extent(tri, &lb, &ext);
  CHECK_EQ(sz, 12);
  CHECK_EQ(lb, 0);
  CHECK_EQ(ext, 12);
  MPI_Type_get_name(tri, name, &len);
  CHECK_EQ(len, 0); /* a new type has no name */
  int s6[6], r6[6] = {0};
  for (int i = 0; i < 6; i++) s6[i] = rank * 10 + i;
  MPI_Sendrecv(s6, 6, MPI_INT, peer, 1, r6, 2, tri, from, 1, MPI_COMM_WORLD,
               &st);
  int cnt = -1;
  MPI_Get_count(&st, tri, &cnt);
  CHECK_EQ(cnt, 2);
  for (int i = 0; i < 6; i++) CHECK_EQ(r6[i], from * 10 + i);
  MPI_Sendrecv(s6, 4, MPI_INT, peer, 2, r6, 2, tri, from, 2, MPI_COMM_WORLD,
               &st);
  MPI_Get_count(&st, tri, &cnt);
  CHECK_EQ(cnt, MPI_UNDEFINED); /* 4 ints: not a whole number of triples */

  /* vector: column 1 of a 4 x 5 matrix... as 2-wide blocks: 4 blocks of 2,
   * stride 5 */
  MPI_Datatype vec;
  MPI_Type_vector(4, 2, 5, MPI_INT, &vec);
  MPI_Type_commit(&vec);
  MPI_Type_size(vec, &sz);
  MPI_Type_get_extent(vec, &lb, &ext);
  CHECK_EQ(sz, 8 * 4);
  CHECK_EQ(ext, (3 * 5 + 2) * 4);
  int mat[20], flat[8];
  for (int i = 0; i < 20; i++) mat[i] = rank * 100 + i;
  MPI_Sendrecv(mat + 1, 1, vec, peer, 3, flat, 8, MPI_INT, from, 3,
               MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  for (int b = 0; b < 4; b++)
    for (int k = 0; k < 2; k++)
      CHECK_EQ(flat[2 * b + k], from * 100 + 1 + 5 * b + k);
  /* and back into a matrix through the vector type: the rest untouched */
  for (int i = 0; i < 20; i++) mat[i] = -1;
  for (int i = 0; i < 8; i++) flat[i] = rank * 1000 + i;
  MPI_Sendrecv(flat, 8, MPI_INT, peer, 4, mat, 1, vec, from, 4, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  for (int i = 0; i < 20; i++)
    CHECK_EQ(mat[i],
             i % 5 < 2 && i / 5 < 4 ? from * 1000 + (i / 5) * 2 + i % 5 : -1);
  /* a derived type in a collective */
  for (int i = 0; i < 20; i++) mat[i] = rank == 0 ? i : -1;
  MPI_Bcast(mat, 1, vec, 0, MPI_COMM_WORLD);
  for (int i = 0; i < 20; i++)
    CHECK_EQ(mat[i], rank == 0 || i % 5 < 2 ? i : -1);

  /* indexed: blocks of 1, 3, 2 at 0, 4, 9 */
  MPI_Datatype idx;
  int bl[3] = {1, 3, 2}, dp[3] = {0, 4, 9};
  MPI_Type_indexed(3, bl, dp, MPI_INT, &idx);
  MPI_Type_commit(&idx);
  MPI_Type_size(idx, &sz);
  MPI_Type_get_extent(idx, &lb, &ext);
  CHECK_EQ(sz, 6 * 4);
  CHECK_EQ(lb, 0);
  CHECK_EQ(ext, 11 * 4);
  int src[11], dst[11], picked[6] = {0, 4, 5, 6, 9, 10};
  for (int i = 0; i < 11; i++) {
    src[i] = rank * 50 + i;
    dst[i] = -1;
  }
  MPI_Sendrecv(src, 1, idx, peer, 5, dst, 1, idx, from, 5, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  for (int i = 0, k = 0; i < 11; i++) {
    int in = k < 6 && picked[k] == i;
    CHECK_EQ(dst[i], in ? from * 50 + i : -1);
    k += in;
  }
  /* struct: a C struct with padding, field by field */
  MPI_Datatype part;
  int sbl[3] = {1, 2, 1};
  MPI_Aint sdp[3] = {offsetof(struct particle, kind),
                     offsetof(struct particle, pos),
                     offsetof(struct particle, id)};
  MPI_Datatype sty[3] = {MPI_CHAR, MPI_DOUBLE, MPI_INT};
  MPI_Type_create_struct(3, sbl, sdp, sty, &part);
  MPI_Type_commit(&part);
  MPI_Type_size(part, &sz);
  MPI_Type_get_extent(part, &lb, &ext);
  CHECK_EQ(sz, 1 + 16 + 4);
  CHECK_EQ(lb, 0);
  CHECK_EQ(ext, sizeof(struct particle));
  struct particle p = {(char)('a' + rank),
                       {rank * 0.5, -rank * 0.25},
                       rank * 7},
                  q;
  memset(&q, 0, sizeof q);
  MPI_Sendrecv(&p, 1, part, peer, 6, &q, 1, part, from, 6, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  CHECK_EQ(q.kind, 'a' + from);
  CHECK(q.pos[0] == from * 0.5 && q.pos[1] == -from * 0.25);
  CHECK_EQ(q.id, from * 7);
  /* an array of them, gathered at rank 0 */
  struct particle all[128];
  MPI_Gather(&p, 1, part, all, 1, part, 0, MPI_COMM_WORLD);
  for (int r = 0; rank == 0 && r < size; r++) {
    CHECK_EQ(all[r].kind, 'a' + r);
    CHECK(all[r].pos[1] == -r * 0.25);
    CHECK_EQ(all[r].id, r * 7);
  }

  MPI_Datatype ts[4] = {tri, vec, idx, part};
  for (int k = 0; k < 4; k++) {
    MPI_Type_free(&ts[k]);
    CHECK(ts[k] == MPI_DATATYPE_NULL);
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(size <= 128);
  predefined();
  derived();
  mt_ok("types");
  MPI_Finalize();
  return 0;
}
