/*
 * Starting under a scheduler (docs/launching.md): rank, world size, local
 * rank and the rendezvous address taken from PMIx or from the variables of
 * Slurm, torchrun, Open MPI or a Kubernetes Indexed Job; the process of
 * rank 0 then runs the seed inside itself (the embedded seed) and the
 * others dial it.
 */
#ifndef NEXAR_LAUNCHER_H
#define NEXAR_LAUNCHER_H

#include <stdbool.h>
#include <stddef.h>

#include "base/param.h"

struct nexar_config;
struct nexar_seed;

/* What the launcher said, kept in the context for its lifetime. */
typedef struct nexar__launch {
  const char *name; /* "pmix", "slurm", "torchrun", "ompi", "k8s", "none" */
  char why[320];    /* the variables it was chosen by (INFO; no secret) */
  int rank, size;   /* -1, 0: not given */
  int local_rank, local_size; /* -1, 0: not given (then from the roster) */
  bool one_host;              /* every rank is on this host */
  bool embedded;              /* this process runs the seed */
  int port;                   /* the embedded seed's port (0: any) */
  char seed[96];              /* numeric rendezvous "ip:port" / "[ip6]:port" */
  char secret[65];            /* PMIx: the job's generated secret (hex) */
  struct nexar_seed *seed_run;
  void *pmix; /* PMIx session (pmix.c), open until the exchange is done */
} nexar__launch_t;

/*
 * Finds the launcher (NEXAR_LAUNCHER, else the first of PMIx, Open MPI,
 * torchrun, Slurm and Kubernetes whose variables are set) and fills the
 * settings of |p| that were not given explicitly: rank, world size,
 * NEXAR_SEED (the rendezvous, resolved to a numeric address), and the bind
 * address (0.0.0.0 when the job spans hosts). No traffic but name
 * resolution and, under PMIx, the local PMIx server. Returns 0, or
 * NEXAR_ERR_INVALID_ARG with |err| naming the variables and their values
 * (a half-set launcher, a rank not below the world size, two launchers
 * disagreeing, a malformed Slurm node list, a host that does not resolve,
 * no secret outside PMIx); never the secret.
 */
int nexar__launch_detect(nexar__params_t *p, const struct nexar_config *cfg,
                         nexar__launch_t *l, char *err, size_t errlen);
/*
 * Starts the embedded seed when this process is rank 0 of a launcher's job
 * and, under PMIx, shares its address and the secret through the PMIx
 * key-value store and a fence. Returns 0 or a result code with |err|.
 */
int nexar__launch_start(nexar__launch_t *l, nexar__params_t *p, char *err,
                        size_t errlen);
/* Stops the embedded seed and closes PMIx (idempotent). */
void nexar__launch_stop(nexar__launch_t *l);

/*
 * Writes the first host of a Slurm node list ("node[01-04,7],gpu1" ->
 * "node01") to |host|. Returns 0, or NEXAR_ERR_INVALID_ARG with |err| saying
 * what is malformed (unbalanced brackets, an empty name, a range that is not
 * N-M with N <= M).
 */
int nexar__slurm_first_host(const char *list, char *host, size_t hostlen,
                            char *err, size_t errlen);

/* pmix.c: 1 when a PMIx server answered (rank, size, local rank and size
 * filled), 0 when there is none or libpmix cannot be loaded, or a negative
 * result code with |err|. */
int nexar__pmix_open(nexar__launch_t *l, char *err, size_t errlen);
/* Rank 0 publishes l->seed and l->secret; everyone fences; the others read
 * them. Closes PMIx. Returns 0 or a result code with |err|. */
int nexar__pmix_exchange(nexar__launch_t *l, int timeout_ms, char *err,
                         size_t errlen);
void nexar__pmix_close(nexar__launch_t *l);

#endif /* NEXAR_LAUNCHER_H */
