/* Shared by the MPI layer's test programs: CHECK(cond, fmt...) prints the
 * failed condition with the rank and aborts the job; OK(call) checks that
 * an MPI call returned MPI_SUCCESS. */
#ifndef MPI_LAYER_CHECK_H
#define MPI_LAYER_CHECK_H
#include <mpi.h>
#include <stdio.h>

static int check_rank(void) {
  int r = -1, init = 0;
  MPI_Initialized(&init);
  if (init) MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

#define CHECK(cond, ...)                                                  \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "FAIL rank %d %s:%d: %s: ", check_rank(), __FILE__, \
              __LINE__, #cond);                                           \
      fprintf(stderr, __VA_ARGS__);                                       \
      fprintf(stderr, "\n");                                              \
      MPI_Abort(MPI_COMM_WORLD, 1);                                       \
    }                                                                     \
  } while (0)

#define OK(call)                                                   \
  do {                                                             \
    int ok_rc_ = (call);                                           \
    CHECK(ok_rc_ == MPI_SUCCESS, "%s returned %d", #call, ok_rc_); \
  } while (0)

#endif
