/* Errors with MPI_ERRORS_RETURN: each bad argument gives its class (bad
 * rank, count, communicator (null and garbage), tag, datatype, request,
 * group, op, root-less checks), a truncated receive gives MPI_ERR_TRUNCATE
 * (blocking and non-blocking), functions outside the layer give
 * MPI_ERR_UNSUPPORTED_OPERATION; a user error handler is called with the
 * class; MPI_Error_string / MPI_Error_class. Nothing crashes. 2+ ranks. */
#include <stdint.h>
#include <string.h>

#include "check.h"

static int handled = -1;

static void on_error(MPI_Comm *comm, int *code, ...) {
  (void)comm;
  handled = *code;
}

#define EXPECT(call, cls)                                                 \
  do {                                                                    \
    int e_ = (call);                                                      \
    CHECK(e_ == (cls), "%s gave %d, want %s (%d)", #call, e_, #cls, cls); \
  } while (0)

int main(int argc, char **argv) {
  OK(MPI_Init(&argc, &argv));
  int rank, size;
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(size >= 2, "needs 2 ranks");
  MPI_Comm w = MPI_COMM_WORLD;
  OK(MPI_Comm_set_errhandler(w, MPI_ERRORS_RETURN));
  MPI_Errhandler eh;
  OK(MPI_Comm_get_errhandler(w, &eh));
  CHECK(eh == MPI_ERRORS_RETURN, "get_errhandler");

  int buf[16] = {0};
  struct {
    unsigned magic;
    char junk[256];
  } garbage;
  memset(&garbage, 0x77, sizeof garbage);
  MPI_Comm bad = (MPI_Comm)&garbage;
  EXPECT(MPI_Send(buf, 1, MPI_INT, size, 0, w), MPI_ERR_RANK);
  EXPECT(MPI_Send(buf, 1, MPI_INT, -7, 0, w), MPI_ERR_RANK);
  EXPECT(MPI_Recv(buf, 1, MPI_INT, size + 3, 0, w, MPI_STATUS_IGNORE),
         MPI_ERR_RANK);
  EXPECT(MPI_Send(buf, -1, MPI_INT, 0, 0, w), MPI_ERR_COUNT);
  EXPECT(MPI_Send(buf, 1, MPI_INT, 0, 0, MPI_COMM_NULL), MPI_ERR_COMM);
  EXPECT(MPI_Send(buf, 1, MPI_INT, 0, 0, bad), MPI_ERR_COMM);
  int r;
  EXPECT(MPI_Comm_rank(bad, &r), MPI_ERR_COMM);
  /* Integers that are not handles: never dereferenced. */
  EXPECT(MPI_Comm_rank((MPI_Comm)(uintptr_t)0x12345, &r), MPI_ERR_COMM);
  EXPECT(MPI_Comm_rank((MPI_Comm)(uintptr_t)7, &r), MPI_ERR_COMM);
  EXPECT(MPI_Send(buf, 1, (MPI_Datatype)(uintptr_t)0xdead1, 0, 0, w),
         MPI_ERR_TYPE);
  /* Aligned addresses that were never handles (one unmapped), and
   * handles of objects already freed: looked up, never read. */
  MPI_Comm unmapped = (MPI_Comm)(uintptr_t)(1ull << 46);
  EXPECT(MPI_Comm_rank(unmapped, &r), MPI_ERR_COMM);
  EXPECT(MPI_Send(buf, 1, (MPI_Datatype)unmapped, 0, 0, w), MPI_ERR_TYPE);
  MPI_Comm dup, dup_copy;
  OK(MPI_Comm_dup(w, &dup));
  dup_copy = dup;
  OK(MPI_Comm_free(&dup));
  EXPECT(MPI_Comm_rank(dup_copy, &r), MPI_ERR_COMM);
  MPI_Datatype pair, pair_copy;
  OK(MPI_Type_contiguous(2, MPI_INT, &pair));
  pair_copy = pair;
  OK(MPI_Type_free(&pair));
  EXPECT(MPI_Type_size(pair_copy, &r), MPI_ERR_TYPE);
  EXPECT(MPI_Send(buf, 1, MPI_INT, 0, -5, w), MPI_ERR_TAG);
  EXPECT(MPI_Send(buf, 1, MPI_INT, 0, MPI_ANY_TAG, w), MPI_ERR_TAG);
  EXPECT(MPI_Send(buf, 1, MPI_DATATYPE_NULL, 0, 0, w), MPI_ERR_TYPE);
  EXPECT(MPI_Send(buf, 1, (MPI_Datatype)&garbage, 0, 0, w), MPI_ERR_TYPE);
  MPI_Datatype unc;
  OK(MPI_Type_contiguous(2, MPI_INT, &unc));
  EXPECT(MPI_Send(buf, 1, unc, 0, 0, w), MPI_ERR_TYPE);
  OK(MPI_Type_free(&unc));
  MPI_Request req = (MPI_Request)&garbage;
  EXPECT(MPI_Wait(&req, MPI_STATUS_IGNORE), MPI_ERR_REQUEST);
  EXPECT(MPI_Start(&req), MPI_ERR_REQUEST);
  MPI_Group g, ng;
  OK(MPI_Comm_group(w, &g));
  int out_of_range = size;
  EXPECT(MPI_Group_incl(g, 1, &out_of_range, &ng), MPI_ERR_RANK);
  EXPECT(MPI_Group_size((MPI_Group)&garbage, &r), MPI_ERR_GROUP);
  EXPECT(MPI_Reduce_local(buf, buf + 1, 1, MPI_INT, MPI_OP_NULL), MPI_ERR_OP);
  EXPECT(MPI_Reduce_local(buf, buf + 1, 1, MPI_DOUBLE, MPI_BXOR), MPI_ERR_OP);
  int ranks[2] = {0, 0};
  EXPECT(MPI_Group_incl(g, 2, ranks, &ng), MPI_ERR_RANK);
  OK(MPI_Group_free(&g));
  EXPECT(MPI_Comm_split(w, -3, 0, &bad), MPI_ERR_ARG);

  /* Truncation: 10 ints into room for 5, blocking and non-blocking. */
  if (rank == 0) {
    int ten[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    OK(MPI_Send(ten, 10, MPI_INT, 1, 11, w));
    OK(MPI_Send(ten, 10, MPI_INT, 1, 12, w));
  } else if (rank == 1) {
    int five[5];
    MPI_Status st;
    EXPECT(MPI_Recv(five, 5, MPI_INT, 0, 11, w, &st), MPI_ERR_TRUNCATE);
    CHECK(five[0] == 1 && five[4] == 5, "truncated data %d %d", five[0],
          five[4]);
    MPI_Request rq;
    OK(MPI_Irecv(five, 5, MPI_INT, 0, 12, w, &rq));
    EXPECT(MPI_Wait(&rq, &st), MPI_ERR_TRUNCATE);
    CHECK(rq == MPI_REQUEST_NULL, "failed request freed");
  }

  /* Outside the layer. */
  MPI_Win win;
  EXPECT(MPI_Win_create(buf, 64, 4, MPI_INFO_NULL, w, &win),
         MPI_ERR_UNSUPPORTED_OPERATION);
  MPI_File fh;
  EXPECT(MPI_File_open(w, "x", MPI_MODE_RDONLY, MPI_INFO_NULL, &fh),
         MPI_ERR_UNSUPPORTED_OPERATION);

  /* Strings and classes. */
  char text[MPI_MAX_ERROR_STRING];
  int len, cls;
  OK(MPI_Error_string(MPI_ERR_TRUNCATE, text, &len));
  CHECK(len > 0 && strstr(text, "trunc"), "error string '%s'", text);
  OK(MPI_Error_class(MPI_ERR_PROC_FAILED, &cls));
  CHECK(cls == MPI_ERR_PROC_FAILED, "class %d", cls);
  int mycls;
  OK(MPI_Add_error_class(&mycls));
  OK(MPI_Add_error_string(mycls, "my own error"));
  OK(MPI_Error_string(mycls, text, &len));
  CHECK(strcmp(text, "my own error") == 0, "added string '%s'", text);

  /* A user handler sees the class; the call returns it. */
  MPI_Errhandler mine;
  OK(MPI_Comm_create_errhandler(on_error, &mine));
  OK(MPI_Comm_set_errhandler(w, mine));
  EXPECT(MPI_Send(buf, 1, MPI_INT, size, 0, w), MPI_ERR_RANK);
  CHECK(handled == MPI_ERR_RANK, "handler saw %d", handled);
  OK(MPI_Errhandler_free(&mine));
  OK(MPI_Comm_set_errhandler(w, MPI_ERRORS_RETURN));

  OK(MPI_Finalize());
  if (rank == 0) printf("errors: OK (%d ranks)\n", size);
  return 0;
}
