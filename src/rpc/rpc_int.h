/* Private to the RPC part (rpc.c: calls and messages; service.c: handler
 * threads and the handler table). */
#ifndef NEXAR_RPC_INT_H
#define NEXAR_RPC_INT_H

#include "nexar_int.h"

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
