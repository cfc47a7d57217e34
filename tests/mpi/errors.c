/* errors: bad arguments with MPI_ERRORS_RETURN give the right error
 * classes (MPI_Comm_set_errhandler / MPI_Comm_get_errhandler,
 * MPI_Error_class, MPI_Error_string): MPI_ERR_RANK, MPI_ERR_COUNT,
 * MPI_ERR_COMM, MPI_ERR_ROOT, MPI_ERR_TAG, MPI_ERR_TYPE, MPI_ERR_OP,
 * MPI_ERR_TRUNCATE (and MPI_ERR_IN_STATUS from MPI_Waitall with the
 * per-request MPI_ERROR), and the job still works afterwards.
 *
 *   errors [nexar]   the checks above; with "nexar" (or when
 *                    MPI_Get_library_version names nexar) also that an
 *                    unsupported call (MPI_Win_create) returns
 *                    MPI_ERR_UNSUPPORTED_OPERATION
 *   errors fatal     MPI_ERRORS_ARE_FATAL (the default): a send to a rank
 *                    that does not exist must end the job with a non-zero
 *                    status and a message naming MPI_Send; if the call
 *                    returns instead, this exits 0 after saying so, and the
 *                    driver counts that as a failure
 *   errors abort     the last rank calls MPI_Abort(MPI_COMM_WORLD, 3)
 *                    while the others wait in MPI_Recv: the job must end,
 *                    non-zero, at once */
#include "mpitest.h"

static int rank, size;

static void expect(int rc, int cls, const char *what) {
  int c = -1, len = -1;
  char msg[MPI_MAX_ERROR_STRING];
  CHECK(rc != MPI_SUCCESS);
  MPI_Error_class(rc, &c);
  if (c != cls) {
    MPI_Error_string(rc, msg, &len);
    fprintf(stderr, "rank %d: %s: class %d (%s), expected %d\n", rank, what, c,
            msg, cls);
  }
  CHECK_EQ(c, cls);
  memset(msg, 0, sizeof msg);
  MPI_Error_string(rc, msg, &len);
  CHECK(len > 0 && len < MPI_MAX_ERROR_STRING);
  CHECK_EQ(strlen(msg), len);
  if (rank == 0) printf("errors: %s -> %s\n", what, msg);
}

static void fatal(void) {
  int x = 1;
  if (rank == 0) {
    MPI_Send(&x, 1, MPI_INT, size + 5, 0, MPI_COMM_WORLD);
    printf("FAIL: MPI_Send to rank %d returned under MPI_ERRORS_ARE_FATAL\n",
           size + 5);
    fflush(stdout);
    exit(0);
  }
  MPI_Recv(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static void do_abort(void) {
  int x;
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == size - 1)
    MPI_Abort(MPI_COMM_WORLD, 3);
  else
    MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
  printf("FAIL: rank %d went on after MPI_Abort\n", rank);
  exit(0);
}

int main(int argc, char **argv) {
  int nexar = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "fatal") == 0) fatal();
    if (strcmp(argv[i], "abort") == 0) do_abort();
    nexar |= strcmp(argv[i], "nexar") == 0;
  }
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  int len;
  MPI_Get_library_version(lib, &len);
  nexar |= strstr(lib, "nexar") != NULL;

  MPI_Errhandler eh;
  MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh);
  CHECK(eh == MPI_ERRORS_ARE_FATAL);
  MPI_Errhandler_free(&eh);
  /* errors on MPI_COMM_NULL go to world's (MPI 3) or self's (MPI 4) */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh);
  CHECK(eh == MPI_ERRORS_RETURN);
  MPI_Errhandler_free(&eh);

  int c = -1, x[10] = {0}, y[10];
  MPI_Error_class(MPI_SUCCESS, &c);
  CHECK_EQ(c, MPI_SUCCESS);
  expect(MPI_Send(x, 1, MPI_INT, size, 0, MPI_COMM_WORLD), MPI_ERR_RANK,
         "MPI_Send to rank size");
  expect(MPI_Recv(y, 1, MPI_INT, -5, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
         MPI_ERR_RANK, "MPI_Recv from -5");
  expect(MPI_Send(x, -1, MPI_INT, 0, 0, MPI_COMM_WORLD), MPI_ERR_COUNT,
         "MPI_Send count -1");
  expect(MPI_Send(x, 1, MPI_INT, 0, 0, MPI_COMM_NULL), MPI_ERR_COMM,
         "MPI_Send on MPI_COMM_NULL");
  expect(MPI_Bcast(x, 1, MPI_INT, size, MPI_COMM_WORLD), MPI_ERR_ROOT,
         "MPI_Bcast root size");
  expect(MPI_Send(x, 1, MPI_INT, 0, -3, MPI_COMM_WORLD), MPI_ERR_TAG,
         "MPI_Send tag -3");
  expect(MPI_Send(x, 1, MPI_DATATYPE_NULL, 0, 0, MPI_COMM_WORLD), MPI_ERR_TYPE,
         "MPI_Send MPI_DATATYPE_NULL");
  expect(MPI_Allreduce(x, y, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD),
         MPI_ERR_OP, "MPI_Allreduce MPI_OP_NULL");

  /* truncation: 10 ints into a 5-int receive, alone and in a Waitall */
  if (rank == 0) {
    for (int i = 0; i < 10; i++) x[i] = i;
    CHECK_MPI(MPI_Send(x, 10, MPI_INT, 1, 50, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Send(x, 2, MPI_INT, 1, 51, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Send(x, 10, MPI_INT, 1, 52, MPI_COMM_WORLD));
  } else if (rank == 1) {
    MPI_Status st[2];
    MPI_Request rq[2];
    expect(MPI_Recv(y, 5, MPI_INT, 0, 50, MPI_COMM_WORLD, st), MPI_ERR_TRUNCATE,
           "MPI_Recv of 10 into 5");
    CHECK_MPI(MPI_Irecv(y, 2, MPI_INT, 0, 51, MPI_COMM_WORLD, &rq[0]));
    CHECK_MPI(MPI_Irecv(y + 2, 5, MPI_INT, 0, 52, MPI_COMM_WORLD, &rq[1]));
    int rc = MPI_Waitall(2, rq, st);
    CHECK_EQ(rc, MPI_ERR_IN_STATUS);
    CHECK_EQ(st[0].MPI_ERROR, MPI_SUCCESS);
    MPI_Error_class(st[1].MPI_ERROR, &c);
    CHECK_EQ(c, MPI_ERR_TRUNCATE);
    CHECK_EQ(y[0], 0);
    CHECK_EQ(y[1], 1);
  }

  /* the unsupported parts (nexar only: other MPIs have windows) */
  if (nexar) {
    MPI_Win win;
    char buf[64];
    expect(
        MPI_Win_create(buf, sizeof buf, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win),
        MPI_ERR_UNSUPPORTED_OPERATION, "MPI_Win_create");
  }

  /* everything still works */
  int one = 1, sum = 0;
  CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK_EQ(sum, size);
  if (rank == 0)
    printf("errors: unsupported-operation check %s\n",
           nexar ? "done" : "skipped (not nexar)");
  mt_ok("errors");
  MPI_Finalize();
  return 0;
}
