/* mpitest.h: what the MPI test programs share (plain MPI C, any MPI).
 *
 * CHECK(cond) and CHECK_EQ(actual, expected): on a wrong value, print the
 * rank, file, line and values and end the whole job with MPI_Abort (exit
 * status 1). CHECK_MPI(call): the call must return MPI_SUCCESS (only
 * meaningful under MPI_ERRORS_RETURN; MPI_ERRORS_ARE_FATAL ends the job
 * first). mt_ok(name): rank 0 prints "NAME OK np N", which the driver
 * (run-apps.sh) looks for, so a launcher that runs nothing cannot pass.
 * mt_deadline(): 30 s from the first call; polling loops (MPI_Test*,
 * MPI_Iprobe) check it so that a lost message fails instead of hanging. */
#ifndef MPITEST_H
#define MPITEST_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline void mt_fail(const char *file, int line, const char *what,
                           long long a, long long b) {
  int init = 0, fin = 0, rank = -1;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  fprintf(stderr, "FAIL rank %d %s:%d: %s (got %lld, expected %lld)\n", rank,
          file, line, what, a, b);
  fflush(stderr);
  if (init && !fin) MPI_Abort(MPI_COMM_WORLD, 1);
  exit(1);
}

#define CHECK(c)                                     \
  do {                                               \
    if (!(c)) mt_fail(__FILE__, __LINE__, #c, 0, 1); \
  } while (0)
#define CHECK_EQ(a, b)                                               \
  do {                                                               \
    long long a_ = (long long)(a), b_ = (long long)(b);              \
    if (a_ != b_) mt_fail(__FILE__, __LINE__, #a " == " #b, a_, b_); \
  } while (0)
#define CHECK_MPI(call)                                     \
  do {                                                      \
    int rc_ = (call);                                       \
    if (rc_ != MPI_SUCCESS)                                 \
      mt_fail(__FILE__, __LINE__, #call, rc_, MPI_SUCCESS); \
  } while (0)

static inline double mt_deadline(void) {
  static double end = 0;
  if (end == 0) end = MPI_Wtime() + 30.0;
  return end;
}
#define CHECK_TIME() CHECK(MPI_Wtime() < mt_deadline())

static inline void mt_ok(const char *name) {
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == 0) {
    printf("%s OK np %d\n", name, size);
    fflush(stdout);
  }
}

#endif
