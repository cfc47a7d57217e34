/* Datatypes: sizes, extents and names; bit-exact pack / unpack of vector,
 * indexed, struct, resized and subarray types (locally and through
 * messages); MPI_Pack / MPI_Unpack; local reductions (MPI_Reduce_local)
 * on types nexar does not reduce itself (short, bool, MINLOC pairs, user
 * ops). Any number of ranks (pairs exchange; a lone rank sends to itself). */
#include <stddef.h>
#include <string.h>

#include "check.h"

struct particle {
  double pos[3];
  int id;
  char tag;
};

static void user_max_abs(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  int *a = in, *b = inout;
  for (int i = 0; i < *len; i++) {
    int x = a[i] < 0 ? -a[i] : a[i], y = b[i] < 0 ? -b[i] : b[i];
    b[i] = x > y ? x : y;
  }
}

int main(int argc, char **argv) {
  OK(MPI_Init(&argc, &argv));
  int rank, size;
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  int peer = size == 1 ? 0 : rank ^ 1;
  if (peer >= size) peer = MPI_PROC_NULL;

  /* Predefined sizes and names. */
  int s;
  MPI_Aint lb, ext;
  OK(MPI_Type_size(MPI_DOUBLE_INT, &s));
  CHECK(s == 12, "MPI_DOUBLE_INT size %d", s);
  OK(MPI_Type_get_extent(MPI_DOUBLE_INT, &lb, &ext));
  CHECK(lb == 0 && ext == 16, "lb %ld extent %ld", (long)lb, (long)ext);
  char name[MPI_MAX_OBJECT_NAME];
  int len;
  OK(MPI_Type_get_name(MPI_CHAR, name, &len));
  CHECK(strcmp(name, "MPI_CHAR") == 0 && len == 8, "name %s", name);

  /* Vector: 4 blocks of 2 ints, stride 3: ints 0,1, 3,4, 6,7, 9,10. */
  MPI_Datatype vec;
  OK(MPI_Type_vector(4, 2, 3, MPI_INT, &vec));
  OK(MPI_Type_commit(&vec));
  OK(MPI_Type_size(vec, &s));
  OK(MPI_Type_get_extent(vec, &lb, &ext));
  CHECK(s == 32 && lb == 0 && ext == 11 * 4, "vector size %d extent %ld", s,
        (long)ext);
  int src[24], dst[24];
  for (int i = 0; i < 24; i++) src[i] = 1000 * rank + i, dst[i] = -1;
  /* Two vectors in a row (the second starts at one extent: int 11). */
  OK(MPI_Sendrecv(src, 2, vec, peer, 1, dst, 2, vec, peer, 1, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE));
  int prank = peer == MPI_PROC_NULL ? -1 : peer;
  for (int e = 0; e < 2 && prank >= 0; e++)
    for (int b = 0; b < 4; b++)
      for (int k = 0; k < 2; k++) {
        int i = 11 * e + 3 * b + k;
        CHECK(dst[i] == 1000 * prank + i, "vector int %d = %d", i, dst[i]);
      }
  for (int i = 0; i < 24 && prank >= 0; i++)
    if ((i % 11) % 3 == 2 || i == 22 || i == 23)
      CHECK(dst[i] == -1, "gap %d written: %d", i, dst[i]);

  /* Indexed, received as contiguous ints: the typemap order. */
  int bl[3] = {1, 3, 2}, disp[3] = {5, 0, 10};
  MPI_Datatype idx;
  OK(MPI_Type_indexed(3, bl, disp, MPI_INT, &idx));
  OK(MPI_Type_commit(&idx));
  int flat[6] = {0};
  MPI_Status st;
  OK(MPI_Sendrecv(src, 1, idx, peer, 2, flat, 6, MPI_INT, peer, 2,
                  MPI_COMM_WORLD, &st));
  int want_idx[6] = {5, 0, 1, 2, 10, 11};
  int count;
  OK(MPI_Get_count(&st, MPI_INT, &count));
  CHECK(prank < 0 || count == 6, "count %d", count);
  for (int i = 0; i < 6 && prank >= 0; i++)
    CHECK(flat[i] == 1000 * prank + want_idx[i], "indexed %d = %d", i, flat[i]);

  /* Struct with padding, resized to the C struct's size. */
  struct particle ps[3], pr[3];
  memset(pr, 0x5a, sizeof pr);
  for (int i = 0; i < 3; i++) {
    memset(&ps[i], 0, sizeof ps[i]);
    for (int k = 0; k < 3; k++) ps[i].pos[k] = rank + i * 0.5 + k * 0.25;
    ps[i].id = 100 * rank + i;
    ps[i].tag = (char)('a' + i);
  }
  int sbl[3] = {3, 1, 1};
  MPI_Aint sdisp[3] = {offsetof(struct particle, pos),
                       offsetof(struct particle, id),
                       offsetof(struct particle, tag)};
  MPI_Datatype stypes[3] = {MPI_DOUBLE, MPI_INT, MPI_CHAR}, pt0, pt;
  OK(MPI_Type_create_struct(3, sbl, sdisp, stypes, &pt0));
  OK(MPI_Type_create_resized(pt0, 0, sizeof(struct particle), &pt));
  OK(MPI_Type_commit(&pt));
  OK(MPI_Type_size(pt, &s));
  CHECK(s == 3 * 8 + 4 + 1, "struct size %d", s);
  OK(MPI_Type_get_extent(pt, &lb, &ext));
  CHECK(ext == (MPI_Aint)sizeof(struct particle), "extent %ld", (long)ext);
  OK(MPI_Sendrecv(ps, 3, pt, peer, 3, pr, 3, pt, peer, 3, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE));
  for (int i = 0; i < 3 && prank >= 0; i++) {
    for (int k = 0; k < 3; k++)
      CHECK(pr[i].pos[k] == prank + i * 0.5 + k * 0.25, "pos");
    CHECK(pr[i].id == 100 * prank + i && pr[i].tag == 'a' + i, "id/tag");
  }

  /* MPI_Pack / MPI_Unpack round trip through a byte buffer. */
  char packed[256];
  int pos = 0, psize;
  OK(MPI_Pack_size(3, pt, MPI_COMM_WORLD, &psize));
  CHECK(psize == 3 * 29, "pack size %d", psize);
  OK(MPI_Pack(ps, 3, pt, packed, sizeof packed, &pos, MPI_COMM_WORLD));
  CHECK(pos == psize, "position %d", pos);
  struct particle back[3];
  memset(back, 0, sizeof back);
  pos = 0;
  OK(MPI_Unpack(packed, sizeof packed, &pos, back, 3, pt, MPI_COMM_WORLD));
  for (int i = 0; i < 3; i++)
    CHECK(memcmp(&back[i], &ps[i], offsetof(struct particle, tag) + 1) == 0,
          "unpacked particle %d differs", i);

  /* Subarray: the 2x3 block at (1,2) of a 4x6 C array. */
  int sizes[2] = {4, 6}, subs[2] = {2, 3}, starts[2] = {1, 2};
  MPI_Datatype sub;
  OK(MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_INT,
                              &sub));
  OK(MPI_Type_commit(&sub));
  int grid[24], got[6];
  for (int i = 0; i < 24; i++) grid[i] = i;
  pos = 0;
  OK(MPI_Pack(grid, 1, sub, got, sizeof got, &pos, MPI_COMM_WORLD));
  int want_sub[6] = {8, 9, 10, 14, 15, 16};
  for (int i = 0; i < 6; i++)
    CHECK(got[i] == want_sub[i], "subarray %d = %d", i, got[i]);

  /* Contents of a vector. */
  int ni, na, nd, comb, ints[3];
  OK(MPI_Type_get_envelope(vec, &ni, &na, &nd, &comb));
  CHECK(comb == MPI_COMBINER_VECTOR && ni == 3 && na == 0 && nd == 1,
        "envelope %d %d %d %d", ni, na, nd, comb);
  MPI_Datatype inner;
  OK(MPI_Type_get_contents(vec, 3, 0, 1, ints, NULL, &inner));
  CHECK(ints[0] == 4 && ints[1] == 2 && ints[2] == 3 && inner == MPI_INT,
        "contents");

  /* Local reductions on what nexar does not reduce itself. */
  short sa[3] = {1, -2, 300}, sb[3] = {10, 20, 30};
  OK(MPI_Reduce_local(sa, sb, 3, MPI_SHORT, MPI_SUM));
  CHECK(sb[0] == 11 && sb[1] == 18 && sb[2] == 330, "short sum");
  _Bool ba[2] = {1, 0}, bb[2] = {1, 1};
  OK(MPI_Reduce_local(ba, bb, 2, MPI_C_BOOL, MPI_LAND));
  CHECK(bb[0] == 1 && bb[1] == 0, "bool land");
  struct {
    double v;
    int k;
  } la[2] = {{1.5, 3}, {2.0, 1}}, lb2[2] = {{1.5, 2}, {1.0, 0}};
  OK(MPI_Reduce_local(la, lb2, 2, MPI_DOUBLE_INT, MPI_MINLOC));
  CHECK(lb2[0].v == 1.5 && lb2[0].k == 2 && lb2[1].v == 1.0 && lb2[1].k == 0,
        "minloc");
  OK(MPI_Reduce_local(la, lb2, 2, MPI_DOUBLE_INT, MPI_MAXLOC));
  CHECK(lb2[0].k == 2 && lb2[1].v == 2.0 && lb2[1].k == 1, "maxloc");
  MPI_Op absmax;
  OK(MPI_Op_create(user_max_abs, 1, &absmax));
  int ua[3] = {-7, 2, 0}, ub[3] = {3, -9, 0};
  OK(MPI_Reduce_local(ua, ub, 3, MPI_INT, absmax));
  CHECK(ub[0] == 7 && ub[1] == 9 && ub[2] == 0, "user op");
  OK(MPI_Op_free(&absmax));
  signed char ca[2] = {100, -100}, cb[2] = {27, -28};
  OK(MPI_Reduce_local(ca, cb, 2, MPI_CHAR, MPI_SUM));
  CHECK(cb[0] == 127 && cb[1] == -128, "char sum as int8");

  OK(MPI_Type_free(&vec));
  OK(MPI_Type_free(&idx));
  OK(MPI_Type_free(&pt0));
  OK(MPI_Type_free(&pt));
  OK(MPI_Type_free(&sub));
  CHECK(vec == MPI_DATATYPE_NULL, "freed handle not reset");
  OK(MPI_Finalize());
  if (rank == 0) printf("dtype: OK (%d ranks)\n", size);
  return 0;
}
