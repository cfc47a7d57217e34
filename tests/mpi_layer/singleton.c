/* A program started without mpiexec is a singleton: world size 1, rank 0,
 * messages to itself, MPI_COMM_SELF, and the environment inquiries
 * (thread level, version strings, processor name, Wtime / Wtick,
 * Initialized / Finalized). */
#include <string.h>
#include <unistd.h>

#include "check.h"

int main(int argc, char **argv) {
  int flag;
  OK(MPI_Initialized(&flag));
  CHECK(!flag, "initialized before MPI_Init");
  int provided;
  OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
  CHECK(provided == MPI_THREAD_MULTIPLE, "provided %d", provided);
  OK(MPI_Query_thread(&flag));
  CHECK(flag == provided, "query_thread %d", flag);
  OK(MPI_Is_thread_main(&flag));
  CHECK(flag, "is_thread_main");
  OK(MPI_Initialized(&flag));
  CHECK(flag, "not initialized");
  int rank, size;
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(rank == 0 && size == 1, "rank %d size %d", rank, size);
  OK(MPI_Comm_size(MPI_COMM_SELF, &size));
  CHECK(size == 1, "self size %d", size);

  double v[4] = {1, 2, 3, 4}, w[4] = {0};
  MPI_Request rq;
  OK(MPI_Isend(v, 4, MPI_DOUBLE, 0, 5, MPI_COMM_SELF, &rq));
  MPI_Status st;
  OK(MPI_Recv(w, 4, MPI_DOUBLE, 0, 5, MPI_COMM_SELF, &st));
  OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
  CHECK(memcmp(v, w, sizeof v) == 0 && st.MPI_SOURCE == 0, "self message");

  int ver, sub, len;
  OK(MPI_Get_version(&ver, &sub));
  CHECK(ver == 3 && sub == 1, "version %d.%d", ver, sub);
  char lib[MPI_MAX_LIBRARY_VERSION_STRING], host[MPI_MAX_PROCESSOR_NAME];
  OK(MPI_Get_library_version(lib, &len));
  CHECK(strstr(lib, "nexar") && len == (int)strlen(lib), "library '%s'", lib);
  OK(MPI_Get_processor_name(host, &len));
  CHECK(len > 0 && len == (int)strlen(host), "processor name");
  double t0 = MPI_Wtime();
  usleep(20000);
  double t1 = MPI_Wtime();
  CHECK(t1 - t0 >= 0.019 && t1 - t0 < 5, "Wtime %g", t1 - t0);
  CHECK(MPI_Wtick() > 0 && MPI_Wtick() < 0.01, "Wtick %g", MPI_Wtick());
  OK(MPI_Finalize());
  OK(MPI_Finalized(&flag));
  CHECK(flag, "not finalized");
  printf("singleton: OK\n");
  return 0;
}
