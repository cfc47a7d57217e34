/* Private to the RPC part (rpc.c: calls and messages; service.c: handler
 * threads and the handler table). */
#ifndef NEXAR_RPC_INT_H
#define NEXAR_RPC_INT_H

#include "p2p/p2p.h"

struct nexar__rpc_fn {
  uint16_t fn_id;
  nexar_rpc_handler_t handler;
  void *user_data;
};
/* Handler threads beyond NEXAR_RPC_THREADS, one for each handler waiting
 * in a nested call (docs/rpc.md). */
#define NEXAR__RPC_LEND_MAX 64
/* One handler thread. */
struct nexar__rpc_worker {
  nexar_ctx_t *ctx;
  pthread_t th;
  int fn;            /* function id whose handler runs, or -1 (mu) */
  bool lent;         /* its handler waits in a nested call (mu) */
  uint64_t deadline; /* the running request's caller's deadline (ns) */
  uint8_t *resp;     /* response buffer, zero at each handler's start */
};

/* ---------------- rpc/rpc.c ---------------- */
/* Sets up the RPC state of |ctx| (before the endpoint starts). */
int nexar__rpc_init(nexar_ctx_t *ctx);
/* Starts the handler threads (NEXAR_RPC_THREADS). */
int nexar__rpc_start_service(nexar_ctx_t *ctx);
/* Stops and joins the handler threads (idempotent). */
void nexar__rpc_stop(nexar_ctx_t *ctx);
/* nexar_wait on an RPC call: when the caller is a handler thread of |ctx|,
 * its place goes to other requests while it waits (true: call
 * nexar__rpc_unlend after the wait). */
bool nexar__rpc_lend(nexar_ctx_t *ctx);
void nexar__rpc_unlend(nexar_ctx_t *ctx);
/* A failure was queued: the service thread, which reports failures,
 * wakes. */
void nexar__rpc_wake(nexar_ctx_t *ctx);
/* Frees the RPC state (after the endpoint is gone). */
void nexar__rpc_fini(nexar_ctx_t *ctx);
/* Engine: starts an RPC call request. */
void nexar__rpc_start(nexar__req_t *req);
/* Engine: a header of kind RPC from |m|'s connection is next in order. */
void nexar__rpc_on_header(nexar_ctx_t *ctx, nexar_comm_t *comm,
                          nexar__imsg_t *m);
/* Engine: ends call |req| with |rc| (timeout), dropping a late response. */
void nexar__rpc_cancel(nexar__req_t *req, int rc);
/* Engine: call |req| got no response before its deadline (error text,
 * then cancelled with NEXAR_ERR_TIMEOUT). */
void nexar__rpc_expire(nexar__req_t *req);
/* Engine: fails every call waiting on world rank |peer|. */
void nexar__rpc_fail_peer(nexar_ctx_t *ctx, int peer, int err, const char *why);

/* A request to serve: received (or a call to self), queued, run. */
struct nexar__rpc_item {
  nexar__rpc_item_t *next;
  nexar__req_t rx; /* receives the payload (remote requests) */
  nexar_comm_t *comm;
  int caller;       /* comm rank of the caller */
  int caller_world; /* world rank of the caller */
  uint16_t fn_id;
  uint64_t call_id;
  uint64_t deadline; /* the caller's, on this host's clock (ns) */
  uint8_t *data;
  size_t len;
};

void nexar__rpc_item_free(nexar__rpc_item_t *it);

/* Posts the response to |it| (status, the handler's code, |len| bytes at
 * |data|, taken) to the engine, which sends it or delivers it to a call of
 * this process. Any thread. */
void nexar__rpc_answer(nexar_ctx_t *ctx, const nexar__rpc_item_t *it,
                       int status, int code, uint8_t *data, size_t len);

/* The deadline (ns) of the request whose handler the calling thread runs
 * for |ctx|; UINT64_MAX when it runs none. */
uint64_t nexar__rpc_handler_deadline(const nexar_ctx_t *ctx);

#endif
