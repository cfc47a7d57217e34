/* ct.h: what the collective-path tests share (plain MPI C, any MPI).
 *
 * CT_EQ(actual, expected): on a wrong value, print rank, line and both
 * values and end the job with MPI_Abort (exit status 1). CT_MPI(call): the
 * call must return MPI_SUCCESS. CT_RUN(blocking, nonblocking): the blocking
 * call when ct_nb is 0, else the non-blocking one (which fills ct_rq),
 * then MPI_Wait. ct_ok(name): rank 0 prints "NAME OK np N", which the
 * driver (run.sh) looks for. */
#ifndef CT_H
#define CT_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 1 under nexar's MPI: checks of behaviour other MPIs lack (each use says
 * which) run only there, so that the tests themselves can be checked
 * against Open MPI and MPICH. */
#ifdef NEXAR_MPI
#define CT_NEXAR 1
#else
#define CT_NEXAR 0
#endif

static int ct_rank, ct_size, ct_nb;
static MPI_Request ct_rq;

static inline void ct_fail(int line, const char *what, long long a,
                           long long b) {
  fprintf(stderr, "rank %d: line %d: %s: got %lld, expected %lld\n", ct_rank,
          line, what, a, b);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  exit(1);
}

#define CT_EQ(a, b)                                        \
  do {                                                     \
    long long a_ = (long long)(a), b_ = (long long)(b);    \
    if (a_ != b_) ct_fail(__LINE__, #a " == " #b, a_, b_); \
  } while (0)
#define CT_MPI(call) CT_EQ((call), MPI_SUCCESS)
#define CT_RUN(blocking, nonblocking)              \
  do {                                             \
    if (ct_nb) {                                   \
      ct_rq = MPI_REQUEST_NULL;                    \
      CT_MPI(nonblocking);                         \
      CT_MPI(MPI_Wait(&ct_rq, MPI_STATUS_IGNORE)); \
    } else {                                       \
      CT_MPI(blocking);                            \
    }                                              \
  } while (0)

/* MPI_Init_thread asking for |level| (the job ends when less is
 * provided); ct_init asks for MPI_THREAD_SINGLE. */
static inline void ct_init_thread(int *argc, char ***argv, int level) {
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(argc, argv, level, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &ct_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ct_size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (provided < level) ct_fail(__LINE__, "thread level", provided, level);
}

static inline void ct_init(int *argc, char ***argv) {
  ct_init_thread(argc, argv, MPI_THREAD_SINGLE);
}

static inline void ct_ok(const char *name) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (ct_rank == 0) printf("%s OK np %d\n", name, ct_size);
  fflush(stdout);
}

#endif
