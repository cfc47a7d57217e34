/*
 * Cluster (private to cluster/ and the API): membership, bootstrap, failure
 * detection and agreement, elastic growth, topology, hosts, launchers.
 */
#ifndef NEXAR_CLUSTER_H
#define NEXAR_CLUSTER_H

#include "cluster/launcher.h"
#include "p2p/p2p.h"

/* ---------------- cluster/topology.c ---------------- */
/* Reads NEXAR_TOPOLOGY for a world of |n| ids (n 0: syntax only) into
 * |t|'s kind, k and name. Returns 0, or NEXAR_ERR_INVALID_ARG with |err|
 * naming the variable and the rule broken. */
int nexar__topo_parse(const char *spec, int n, nexar__topo_t *t, char *err,
                      size_t len);
/* Sets up ctx->topo for a world of |n| stable ids (after the roster): the
 * graph, routes, and each id's relay key from |certs| (may be NULL on a
 * full mesh). Returns 0, NEXAR_ERR_INVALID_ARG (err set), NEXAR_ERR_NOMEM,
 * NEXAR_ERR_AUTH / _PROTO (a certificate that is not its fingerprint's). */
int nexar__topo_init(nexar_ctx_t *ctx, int n, char *err, size_t len);
/* Elastic growth to |n| stable ids (engine): NEXAR_ERR_UNSUPPORTED on a
 * sparse topology, NEXAR_ERR_NOMEM. */
int nexar__topo_grow(nexar_ctx_t *ctx, int n);
/* Recomputes the routes after ctx->dead changed other than by a failure
 * (an elastic join or leave). */
void nexar__topo_refresh(nexar_ctx_t *ctx);
void nexar__topo_fini(nexar_ctx_t *ctx);
/* A process was declared failed or left (engine): routes are recomputed,
 * frames on dead links rerouted, processes no route reaches declared
 * failed, and running agreements re-sent to the members behind relays. */
void nexar__topo_on_failure(nexar_ctx_t *ctx);
/* For tests: mesh links of this process that are up, and the relay
 * counters (engine copies; thread-safe). */
int nexar__topo_links(nexar_ctx_t *ctx);
void nexar__topo_stats(nexar_ctx_t *ctx, nexar__topo_stats_t *out);
/* The route to stable id |dest| now: next hop and hop count (-1, -1 when
 * unreachable). Returns 0 or NEXAR_ERR_INVALID_ARG. */
int nexar__topo_route(nexar_ctx_t *ctx, int dest, int *hop, int *hops);
/* Test hook: relay frames this process originates from now on claim to
 * come from stable id |as| (-1: off), which their destinations must refuse. */
void nexar__topo_test_forge(nexar_ctx_t *ctx, int as);
/* Test hook: relay frames this process originates from now on carry hop
 * limit |limit| (0: the normal one), so that a relay must drop them. */
void nexar__topo_test_hops(nexar_ctx_t *ctx, int limit);

/* ---------------- cluster ---------------- */
enum nexar__recovery {
  NEXAR__RECOVERY_ABORT = 0,
  NEXAR__RECOVERY_MANUAL = 1,
  NEXAR__RECOVERY_AUTOMATIC = 2
};
/* failure.c. Setup (before the endpoint starts) and teardown. */
int nexar__ft_init(nexar_ctx_t *ctx, char *err, size_t errlen);
void nexar__ft_fini(nexar_ctx_t *ctx);
/* Engine: declares stable id |id| failed (idempotent): fails what needs it,
 * revokes every communicator that contains it (all of them under the abort
 * policy), closes its connection (fencing it), tells every live peer and
 * queues the application's notification. |reporter| is the id whose
 * detector saw it; |detail| says how. */
void nexar__declare_failed(nexar_ctx_t *ctx, int id, int reason, int reporter,
                           const char *detail);
/* Engine (ep ops peer_release): when the process of the ended mesh
 * connection |c| has left or failed, detaches |c| from ctx->peers and
 * frees that process's sequence state; returns whether |c| may be freed
 * (not while it holds a whole message still unreceived). Error texts and
 * nexar_failures keep its id and the roster's address. */
bool nexar__peer_release(nexar__link_t *c);
/* Engine: the |n| processes |ids| left at the checkpoint that made world
 * epoch |epoch|: every registered communicator (not the world) that
 * contains one of them is revoked (NEXAR_ERR_REVOKED), so that no member
 * waits on it. */
void nexar__comm_revoke_departed(nexar_ctx_t *ctx, const int *ids, int n,
                                 uint32_t epoch);
/* Engine: a mesh connection is gone (bootstrap.c on_closed). */
void nexar__ft_on_closed(nexar_ctx_t *ctx, nexar__link_t *c);
/* Engine: an ICMP port unreachable for |to| (after the mesh formed). */
void nexar__ft_on_unreachable(nexar_ctx_t *ctx,
                              const struct sockaddr_storage *to);
/* Engine: the process did not run for |idle_ns| and has read what was
 * queued since: fresh timeouts, and after a long pause the membership
 * check (failure.c). */
void nexar__ft_on_resume(nexar_ctx_t *ctx, uint64_t idle_ns);
/* The pass gap that counts as "this process did not run" (ep->pause_ns). */
uint64_t nexar__ft_pause_ns(const nexar_ctx_t *ctx);
/* Engine, every pass after formation: the heartbeat timeout check. */
void nexar__ft_tick(nexar_ctx_t *ctx, uint64_t now);
/* Engine: a process-level control message (kind FAILED or AGREE) with its
 * whole payload, from the authenticated stable id |from|. */
void nexar__ft_on_ctl(nexar_ctx_t *ctx, int from, const nexar__hdr_t *h,
                      const uint8_t *payload, size_t len);
/* Service thread: calls the failure handler for failures not yet reported;
 * returns whether there were any. */
void nexar__ft_dispatch(nexar_ctx_t *ctx, int *seen);
/* User thread, after an operation on |comm| ended with |rc|: under the
 * automatic policy rebuilds a revoked |comm| in place. Returns the code the
 * call should return. */
int nexar__ft_after(nexar_comm_t *comm, int rc);
/* agree.c. Engine: a member failed (re-evaluates running agreements); an
 * agreement message arrived. */
void nexar__agree_on_failure(nexar_ctx_t *ctx);
void nexar__agree_on_msg(nexar_ctx_t *ctx, int from, const nexar__hdr_t *h,
                         const uint8_t *payload, size_t len);
/* Engine, on a sparse topology after a route changed: re-sends every
 * message of the running agreements to the members reached through
 * relays (one may have been lost with a failed relay). */
void nexar__agree_resend(nexar_ctx_t *ctx);
/* Frees the agreement attached to |comm| (its id is retired). */
void nexar__agree_release(nexar_ctx_t *ctx, nexar_comm_t *comm);
/* Frees every agreement (context teardown). */
void nexar__agree_fini(nexar_ctx_t *ctx);
/* Whether a message for agreement id |id| may be dropped: no agreement is
 * kept under it and its communicator id is retired (a kept agreement takes
 * every message, even after its calls ended). */
bool nexar__agree_gone(nexar_ctx_t *ctx, uint64_t id);
/* User thread: agreement on the failed members of |comm|, then either a
 * rebuild in place (|out| NULL) or a new communicator in *out. |comm| has
 * one agreement, kept until its id is retired or it is freed: a call after
 * one that failed joins it again, and a decided one answers at once (no
 * majority in place: the same NEXAR_ERR_PEER_FAILED and text each time). */
int nexar__recover(nexar_comm_t *comm, nexar_comm_t **out);
/* membership.c (engine, emu held). Revokes |comm|: every pending and later
 * operation on it fails with |code| (the first reason sticks) and |why|
 * becomes its error text, until it is rebuilt. */
void nexar__comm_revoke(nexar_comm_t *comm, int code, const char *why);
/* Rebuilds |comm| in place: members |ids| (stable ids, in new rank order),
 * wire id |new_id| (never used before), epoch + 1; the old epoch's pending
 * operations fail and its messages are dropped. Returns 0,
 * NEXAR_ERR_EXCLUDED when this process is not in |ids|, NEXAR_ERR_NOMEM. */
int nexar__comm_rebuild(nexar_ctx_t *ctx, nexar_comm_t *comm, const int *ids,
                        int n, uint64_t new_id);
int nexar__bootstrap(nexar_ctx_t *ctx);
extern const nexar__ep_ops_t nexar__worker_ops;
/* elastic.c. Engine: grows roster, peers and dead to |n| stable ids (the new
 * ones: no connection, dead = 2 until they are made members). Returns 0,
 * NEXAR_ERR_INVALID_ARG above NEXAR__ELASTIC_MAX_IDS, NEXAR_ERR_NOMEM. */
int nexar__ctx_grow_ids(nexar_ctx_t *ctx, int n);
/* host.c: this process's host id: the key from |override| (NEXAR_HOST_KEY,
 * hex; NULL: from the boot id and network namespace), pid, a fresh nonce.
 * Returns 0, NEXAR_ERR_INVALID_ARG (bad override) or NEXAR_ERR_INTERNAL;
 * |err| says why. */
int nexar__host_id_init(nexar__host_id_t *h, const char *override, char *err,
                        size_t len);
/* host.c: how often a polling caller yields: every poll when this host
 * runs more of the job's ranks than this process has CPUs (they take
 * turns), else every few polls; and the descriptors a link to each rank
 * on this host needs (RLIMIT_NOFILE's soft limit raised up to the hard
 * one, a warning when that is too low). Called when the roster changes. */
void nexar__host_pace(nexar_ctx_t *ctx);
/* Engine: a joiner's JOIN from the seed: id, roster and world set up. */
int nexar__elastic_on_join(nexar_ctx_t *ctx, const uint8_t *body, size_t len);
/* Engine: bytes from, and the end of, the admission connection to the seed
 * (conn role_data set) of a checkpoint's leader. */
void nexar__elastic_seed_data(nexar__link_t *c, const uint8_t *d, size_t n);
void nexar__elastic_seed_closed(nexar__link_t *c);
/* User thread, end of a joiner's nexar_init: the first barrier of the new
 * world, which the members' checkpoint ends with. */
int nexar__elastic_joined(nexar_ctx_t *ctx);

#endif /* NEXAR_CLUSTER_H */
