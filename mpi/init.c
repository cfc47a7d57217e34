/*
 * The MPI environment: MPI_Init(_thread), MPI_Finalize, the inquiries and
 * timers. A process started by a launcher (nexar-run / nexar-mpiexec, or
 * any launcher nexar_init knows, docs/launching.md) joins that job; a
 * process started alone is a singleton: it runs a seed inside itself for a
 * world of one, with a random secret that never leaves the process.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mpi_int.h"

nxm_state_t nxm_g;

/* Recursive: attribute callbacks run under it and may call MPI. */
static pthread_mutex_t g_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_t g_main_thread;

void nxm_lock(void) {
  pthread_mutex_lock(&g_lock);
}

void nxm_unlock(void) {
  pthread_mutex_unlock(&g_lock);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int nxm_check_init(const char *fn) {
  if (atomic_load(&nxm_g.finalized))
    return nxm_err(NULL, MPI_ERR_OTHER, fn, "called after MPI_Finalize");
  if (!atomic_load(&nxm_g.initialized))
    return nxm_err(NULL, MPI_ERR_OTHER, fn, "called before MPI_Init");
  return MPI_SUCCESS;
}

/* 1 when some launcher gave this process its place in a job (the
 * variables nexar_init reads, docs/launching.md). */
static int launched(void) {
  static const char *const vars[] = {
      "NEXAR_SEED", "NEXAR_LAUNCHER",       "PMIX_NAMESPACE",
      "PMIX_RANK",  "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS",
      "WORLD_SIZE", "JOB_COMPLETION_INDEX",
  };
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v) return 1;
  }
  return 0;
}

/* 32 random bytes as 64 hex digits. */
static int random_secret(char *out, size_t cap) {
  unsigned char raw[32];
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, raw, sizeof raw);
  close(fd);
  if (n != (ssize_t)sizeof raw || cap < 2 * sizeof raw + 1) return -1;
  for (size_t i = 0; i < sizeof raw; i++)
    snprintf(out + 2 * i, 3, "%02x", raw[i]);
  return 0;
}

/* Joins a world of one through a seed inside this process. */
static int init_singleton(nexar_ctx_t **ctx) {
  char secret[80], addr[64];
  int rc = NEXAR_ERR_SYS;
  if (random_secret(secret, sizeof secret) != 0) goto out;
  nexar_seed_config_t scfg = NEXAR_SEED_CONFIG_INIT;
  scfg.listen_addr = "127.0.0.1:0";
  scfg.secret = secret;
  scfg.world_size = 1;
  rc = nexar_seed_start(&scfg, &nxm_g.seed);
  if (rc != NEXAR_OK) goto out;
  snprintf(addr, sizeof addr, "127.0.0.1:%d", nexar_seed_port(nxm_g.seed));
  nexar_config_t cfg = NEXAR_CONFIG_INIT;
  cfg.seed_addr = addr;
  cfg.secret = secret;
  cfg.world_size = 1;
  cfg.rank = 0;
  rc = nexar_init(&cfg, ctx);
  if (rc == NEXAR_OK) {
    nexar_seed_stop(nxm_g.seed);
    nxm_g.seed = NULL;
  }
out:
  memset(secret, 0, sizeof secret);
  if (rc != NEXAR_OK && nxm_g.seed) {
    nexar_seed_stop(nxm_g.seed);
    nxm_g.seed = NULL;
  }
  return rc;
}

/* Makes MPI_COMM_WORLD and MPI_COMM_SELF. */
static int make_world(void) {
  nexar_comm_t *self_nc = NULL, *wdup = NULL;
  nexar_comm_t *world_nc = nexar_comm_world(nxm_g.ctx);
  int rank = 0, rc;
  nexar_comm_rank(world_nc, &rank);
  nxm_g.world_rank = rank; /* for messages from here on */
  /* The world's nexar communicator belongs to the context; the MPI world
   * wraps a duplicate so that nxm_comm_wrap owns what it frees. */
  rc = nexar_comm_dup(world_nc, &wdup);
  if (rc != NEXAR_OK) return nxm_err_nexar(NULL, "MPI_Init", rc);
  int cls = nxm_comm_wrap(NULL, wdup, &nxm_g.world);
  if (cls != MPI_SUCCESS) return cls;
  rc = nexar_comm_split(world_nc, rank, 0, &self_nc);
  if (rc != NEXAR_OK) return nxm_err_nexar(NULL, "MPI_Init", rc);
  cls = nxm_comm_wrap(NULL, self_nc, &nxm_g.self);
  if (cls != MPI_SUCCESS) return cls;
  nxm_g.world->predefined = 1;
  nxm_g.self->predefined = 1;
  snprintf(nxm_g.world->name, sizeof nxm_g.world->name, "MPI_COMM_WORLD");
  snprintf(nxm_g.self->name, sizeof nxm_g.self->name, "MPI_COMM_SELF");
  nxm_g.world_rank = nxm_g.world->rank;
  nxm_g.world_size = nxm_g.world->size;
  return MPI_SUCCESS;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
  (void)argc;
  (void)argv;
  if (atomic_load(&nxm_g.initialized) || atomic_load(&nxm_g.finalized))
    return nxm_err(NULL, MPI_ERR_OTHER, "MPI_Init",
                   "MPI_Init was already called");
  nxm_g.wtime_origin = now_s();
  g_main_thread = pthread_self();
  int rc =
      launched() ? nexar_init(NULL, &nxm_g.ctx) : init_singleton(&nxm_g.ctx);
  if (rc != NEXAR_OK)
    return nxm_err(NULL, nxm_class_of_nexar(rc), "MPI_Init",
                   "nexar_init failed: %s (%s)", nexar_strerror(rc),
                   nexar_last_error());
  atomic_store(&nxm_g.initialized, 1);
  int cls = make_world();
  if (cls != MPI_SUCCESS) return cls;
  /* nexar is thread-safe (include/nexar.h) and the layer's shared state
   * is atomic or under nxm_lock: every level is provided as asked. */
  if (required < MPI_THREAD_SINGLE) required = MPI_THREAD_SINGLE;
  if (required > MPI_THREAD_MULTIPLE) required = MPI_THREAD_MULTIPLE;
  nxm_g.thread_level = required;
  if (provided) *provided = nxm_g.thread_level;
  return MPI_SUCCESS;
}

int MPI_Init(int *argc, char ***argv) {
  int provided;
  return MPI_Init_thread(argc, argv, MPI_THREAD_SINGLE, &provided);
}

/* MPI_Finalize's barrier over the world; schedules the program left
 * active keep moving meanwhile (see nxm_progress). */
static int world_barrier(void) {
  nexar_comm_t *w = nexar_comm_world(nxm_g.ctx);
  if (!nxm_progress_active()) return nexar_barrier(w);
  nexar_req_t *q = NULL;
  int rc = nexar_ibarrier(w, &q);
  return rc == NEXAR_OK ? nxm_wait_nexar(&q, NULL) : rc;
}

int MPI_Finalize(void) {
  int cls = nxm_check_init("MPI_Finalize");
  if (cls != MPI_SUCCESS) return cls;
  /* Buffered and freed requests finish first; then every rank must reach
   * MPI_Finalize before any leaves, so that messages in flight to a rank
   * are not cut off by its exit. */
  nxm_req_drain();
  int rc = world_barrier();
  nxm_comm_unref(nxm_g.self);
  nxm_comm_unref(nxm_g.world);
  nxm_g.self = nxm_g.world = NULL;
  int frc = nexar_finalize(nxm_g.ctx);
  nxm_g.ctx = NULL;
  atomic_store(&nxm_g.finalized, 1);
  atomic_store(&nxm_g.initialized, 0);
  if (rc == NEXAR_OK) rc = frc;
  if (rc != NEXAR_OK)
    return nxm_err(NULL, nxm_class_of_nexar(rc), "MPI_Finalize", "%s",
                   nexar_strerror(rc));
  return MPI_SUCCESS;
}

int MPI_Initialized(int *flag) {
  if (!flag) return nxm_err(NULL, MPI_ERR_ARG, "MPI_Initialized", "NULL flag");
  *flag = atomic_load(&nxm_g.initialized) || atomic_load(&nxm_g.finalized);
  return MPI_SUCCESS;
}

int MPI_Finalized(int *flag) {
  if (!flag) return nxm_err(NULL, MPI_ERR_ARG, "MPI_Finalized", "NULL flag");
  *flag = atomic_load(&nxm_g.finalized);
  return MPI_SUCCESS;
}

int MPI_Query_thread(int *provided) {
  int cls = nxm_check_init("MPI_Query_thread");
  if (cls != MPI_SUCCESS) return cls;
  if (!provided)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Query_thread", "NULL provided");
  *provided = nxm_g.thread_level;
  return MPI_SUCCESS;
}

int MPI_Is_thread_main(int *flag) {
  int cls = nxm_check_init("MPI_Is_thread_main");
  if (cls != MPI_SUCCESS) return cls;
  if (!flag)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Is_thread_main", "NULL flag");
  *flag = pthread_equal(pthread_self(), g_main_thread) != 0;
  return MPI_SUCCESS;
}

/* Ends the whole job: nexar_abort closes every connection with "rank R
 * aborted", so the other ranks fail at once (and nexar-run stops them);
 * then this process exits with |errorcode|, as MPI_Abort requires. */
int MPI_Abort(MPI_Comm comm, int errorcode) {
  (void)comm;
  fprintf(stderr, "nexar-mpi: MPI_Abort (rank %d): error code %d\n",
          nxm_g.world_rank, errorcode);
  fflush(stderr);
  if (nxm_g.ctx) nexar_abort(nxm_g.ctx);
  _exit(errorcode != 0 ? (errorcode & 0xff ? errorcode & 0xff : 1) : 0);
}

double MPI_Wtime(void) {
  return now_s() - nxm_g.wtime_origin;
}

double MPI_Wtick(void) {
  struct timespec res;
  if (clock_getres(CLOCK_MONOTONIC, &res) != 0) return 1e-9;
  return (double)res.tv_sec + (double)res.tv_nsec * 1e-9;
}

int MPI_Get_processor_name(char *name, int *resultlen) {
  if (!name || !resultlen)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Get_processor_name",
                   "NULL argument");
  if (gethostname(name, MPI_MAX_PROCESSOR_NAME) != 0)
    snprintf(name, MPI_MAX_PROCESSOR_NAME, "localhost");
  name[MPI_MAX_PROCESSOR_NAME - 1] = '\0';
  *resultlen = (int)strlen(name);
  return MPI_SUCCESS;
}

int MPI_Get_version(int *version, int *subversion) {
  if (!version || !subversion)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Get_version", "NULL argument");
  *version = MPI_VERSION;
  *subversion = MPI_SUBVERSION;
  return MPI_SUCCESS;
}

int MPI_Get_library_version(char *version, int *resultlen) {
  if (!version || !resultlen)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Get_library_version",
                   "NULL argument");
  int n = snprintf(version, MPI_MAX_LIBRARY_VERSION_STRING,
                   "nexar MPI %d.%d (libnexar %s)", MPI_VERSION, MPI_SUBVERSION,
                   nexar_version());
  *resultlen = n < MPI_MAX_LIBRARY_VERSION_STRING
                   ? n
                   : MPI_MAX_LIBRARY_VERSION_STRING - 1;
  return MPI_SUCCESS;
}

int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void *baseptr) {
  (void)info;
  if (size < 0 || !baseptr)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Alloc_mem", "size %ld", (long)size);
  void *p = malloc(size > 0 ? (size_t)size : 1);
  if (!p)
    return nxm_err(NULL, MPI_ERR_NO_MEM, "MPI_Alloc_mem", "%ld bytes",
                   (long)size);
  memcpy(baseptr, &p, sizeof p);
  return MPI_SUCCESS;
}

int MPI_Free_mem(void *base) {
  free(base);
  return MPI_SUCCESS;
}

/* Profiling control: the layer has no profiling levels to switch. */
int MPI_Pcontrol(const int level, ...) {
  (void)level;
  return MPI_SUCCESS;
}
