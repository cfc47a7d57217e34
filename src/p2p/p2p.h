/*
 * Point-to-point (private to the parts from p2p up): incoming messages,
 * matching and ordering (match.c), relays (relay.c). What p2p hands to the
 * parts above (RPC headers, collective screening, control messages) goes
 * through the handlers they register (ctx->hooks, core/core.h).
 */
#ifndef NEXAR_P2P_H
#define NEXAR_P2P_H

#include "core/core.h"

/* Per (comm, lane) sequence numbers of one peer. */
typedef struct nexar__seqs {
  uint64_t comm_id;
  uint64_t next_tx[NEXAR__LANE_COUNT];
  uint64_t next_rx[NEXAR__LANE_COUNT];
} nexar__seqs_t;

/* End-to-end state of this process with one other process (by stable id),
 * whichever links its messages take: sequence numbers are assigned by the
 * origin and checked by the destination, so the order per (sender,
 * receiver, comm, lane) holds across relays and reroutes. */
typedef struct nexar__peer {
  nexar__seqs_t *seqs; /* one per live communicator shared with it */
  int nseqs, cap_seqs;
  nexar__imsg_t *reorder; /* headers waiting for an earlier seq */
} nexar__peer_t;

/* ---------------- p2p/send.c: pooled buffers ---------------- */
/* A buffer for |len| bytes (an eager copy, an unexpected prefix): from
 * |ctx|'s pool, of eager bytes, with *pooled set, when |len| is from
 * NEXAR__POOL_MIN to the eager size, else malloc'd; NULL when out of
 * memory. Either kind may be given to free(). Engine only. */
uint8_t *nexar__p2p_buf_get(nexar_ctx_t *ctx, uint64_t len, bool *pooled);
/* Gives |buf| back: to the pool when it came from it and the pool has
 * room, else freed. */
void nexar__p2p_buf_put(nexar_ctx_t *ctx, uint8_t *buf, bool pooled);
/* Frees the pool (teardown). */
void nexar__p2p_pool_fini(nexar_ctx_t *ctx);

/* ---------------- p2p/match.c ---------------- */
/* Starts a send or receive on the progress thread. */
void nexar__p2p_start(nexar__req_t *req);
/* Data arrived on a remote mesh stream. */
void nexar__p2p_on_stream_data(nexar__link_t *c, int64_t sid, nexar__imsg_t *m,
                               const uint8_t *d, size_t n, bool fin);
/* Frees every incoming message of a connection being torn down. */
void nexar__p2p_conn_teardown(nexar__link_t *c);
/* Delivers a message a rank sends to itself. */
int nexar__p2p_self_send(nexar_ctx_t *ctx, nexar__req_t *req);
void nexar__p2p_on_stream_close(nexar__link_t *c, nexar__imsg_t *m);
/* Fails every request that depends on world rank |peer|. */
void nexar__p2p_fail_peer(nexar_ctx_t *ctx, int peer, int err, const char *why);
/* Checks the unexpected collective messages of the call |mine| (its
 * header template) against its fingerprint, as the call starts. */
void nexar__p2p_screen_early(nexar_comm_t *comm, const nexar__hdr_t *mine);
/* Cancels a pending request (progress thread). */
void nexar__p2p_cancel(nexar__req_t *req, int rc);
/* A send or receive ran past NEXAR_OP_TIMEOUT_MS (error text, then
 * cancelled with NEXAR_ERR_TIMEOUT). */
void nexar__p2p_expire(nexar__req_t *req);
void nexar__omsg_acked(nexar__link_t *c, nexar__omsg_t *m);
/* Transport upcalls (nexar__ep_ops_t): acknowledged bytes of |m|; the
 * stream of |m| closed. */
void nexar__p2p_on_acked(nexar__link_t *c, nexar__omsg_t *m, uint64_t n);
void nexar__p2p_on_out_closed(nexar__link_t *c, nexar__omsg_t *m);
uint8_t *nexar__p2p_sink(nexar__link_t *c, nexar__imsg_t *m, size_t n);
/* The frame handlers every endpoint's ops table installs (a worker's
 * also on_teardown = nexar__p2p_conn_teardown). */
#define NEXAR__P2P_FRAME_OPS                                                  \
  .on_stream_data = nexar__p2p_on_stream_data,                                \
  .on_stream_close = nexar__p2p_on_stream_close,                              \
  .on_acked = nexar__p2p_on_acked, .on_out_closed = nexar__p2p_on_out_closed, \
  .frame_vecs = nexar__omsg_vecs, .frame_more = nexar__omsg_more,             \
  .frame_free = nexar__omsg_free, .frame_sink = nexar__p2p_sink,              \
  .on_whole = nexar__p2p_on_whole, .on_whole_hdr = nexar__p2p_on_whole_hdr
/* Ends the send waiting on |m|, if any, with |err|; |why| becomes its
 * communicator's error text. */
void nexar__omsg_fail(nexar__omsg_t *m, int err, const char *why);
void nexar__omsg_free(nexar__omsg_t *m);
/* Sequence state of (this process, stable id |peer|, comm |comm_id|), made
 * on first use (the table grows); NULL when out of memory. */
nexar__seqs_t *nexar__peer_seqs(nexar_ctx_t *ctx, int peer, uint64_t comm_id);
/* Drops the sequence state of |id| with |peer| (a finished agreement). */
void nexar__peer_forget_seqs(nexar_ctx_t *ctx, int peer, uint64_t id);
/* Whether stable id |peer| can no longer be reached: known failed or gone,
 * or a neighbour whose link is down. */
bool nexar__peer_gone(nexar_ctx_t *ctx, int peer);
/* Continues an incoming stream after its first header (relay.c hands a
 * relayed message back here once it is authenticated): source checks,
 * ordering, matching. */
void nexar__p2p_admit(nexar_ctx_t *ctx, nexar__link_t *c, nexar__imsg_t *m);
/* Refuses message |m| from link |c|: a direct message is a protocol error
 * (the link closes); a relayed one is dropped and logged, since the link's
 * peer may only have passed it on. */
void nexar__p2p_refuse(nexar_ctx_t *ctx, nexar__link_t *c, nexar__imsg_t *m,
                       const char *why);
/* Communicator registry (engine, emu held): add, remove (the comm's
 * unexpected messages, waiting headers and per-connection sequence state are
 * dropped). */
int nexar__comm_register(nexar_ctx_t *ctx, nexar_comm_t *comm);
nexar_comm_t *nexar__find_comm(nexar_ctx_t *ctx, uint64_t id);
void nexar__comm_unregister(nexar_ctx_t *ctx, nexar_comm_t *comm);
/* Fails every p2p request of |comm| (posted, matched, queued) with |err|. */
void nexar__p2p_fail_comm(nexar_ctx_t *ctx, nexar_comm_t *comm, int err);
/* Builds and enqueues a message to world rank |peer| for |req| (a send). */
int nexar__p2p_post_send(nexar_ctx_t *ctx, nexar__req_t *req);

/* Binds message |m| to receive request |r| (its payload flows into r's
 * buffer; r completes when it has all arrived). */
void nexar__p2p_bind(nexar__imsg_t *m, nexar__req_t *r);
/* Lets the rest of |m| arrive and drops it. */
void nexar__p2p_discard(nexar_ctx_t *ctx, nexar__imsg_t *m);
/* Takes |m| off its link (conn set): out of the link's list, and its
 * stream's credit back to the peer, which may open another stream. */
void nexar__p2p_link_release(nexar__imsg_t *m);
/* Opens |m|'s stream window to the whole message (once). */
void nexar__p2p_open_window(nexar_ctx_t *ctx, nexar__imsg_t *m);
/* Rule 3 of docs/topology.md section 10 (p2p/detach.c). Unexpected |m|,
 * whole: leaves its stream within its origin's bounds, else within the
 * process-wide NEXAR_UNEXPECTED_BYTES, else is counted as refused and the
 * operations waiting end with NEXAR_ERR_NOMEM. */
void nexar__p2p_detach(nexar_ctx_t *ctx, nexar__imsg_t *m);
/* |m| is no longer counted as refused (matched, dropped, freed). */
void nexar__p2p_unrefuse(nexar__imsg_t *m);
/* Room came back for |origin|: its refused messages detach where they fit. */
void nexar__p2p_redetach(nexar_ctx_t *ctx, int origin);
/* Unexpected |m| above the eager size is let in whole within its origin's
 * byte bound or the process-wide one (its window opens; it detaches once
 * whole); else refused as by nexar__p2p_detach. */
void nexar__p2p_take_whole(nexar_ctx_t *ctx, nexar__imsg_t *m);
/* |m| needs nothing more: freed once its stream has ended (credit is
 * returned to the peer then). */
void nexar__imsg_release(nexar__imsg_t *m);
/* Sends neighbour |to| an empty process-level HEARTBEAT message on the
 * control lane; |req| (internal, comm = the world) completes when the peer's
 * transport acknowledges it, or fails with the link. */
int nexar__ctl_probe(nexar_ctx_t *ctx, int to, nexar__req_t *req);
/* Engine: sends a control-lane message with a copy of |payload| to stable
 * id |to| (header fields other than seq, lane and length come from |h|). */
int nexar__ctl_send(nexar_ctx_t *ctx, int to, const nexar__hdr_t *h,
                    const void *payload, size_t len);

/* ---------------- p2p/relay.c ---------------- */
/* Turns |m| (hdr = the message's own header, pre NULL) into a relay frame
 * for stable id |dest| with hop limit |limit| (|credited|: its origin holds
 * end-to-end credit for it, p2p/credit.c): the envelope (payload digest
 * and the pair-key tag) and inner header go to m->pre, the outer header to
 * m->hdr. |payload| is the |m->len| bytes to digest. Returns 0,
 * NEXAR_ERR_AUTH (no usable key for |dest|), NEXAR_ERR_NOMEM. */
int nexar__relay_wrap(nexar_ctx_t *ctx, int dest, int limit, nexar__omsg_t *m,
                      const uint8_t *payload, bool credited);
/* A relay frame's envelope and inner header are in m->rbuf (m->hdr is the
 * outer header): forwards it, or delivers it here after checking its tag,
 * or drops it. */
void nexar__relay_on_prefix(nexar_ctx_t *ctx, nexar__link_t *c,
                            nexar__imsg_t *m);
/* Bytes of a frame being forwarded; returns false when |c| failed. */
bool nexar__relay_fwd_data(nexar__link_t *c, nexar__imsg_t *m, const uint8_t *d,
                           size_t n, bool fin);
/* A relayed message's payload bytes in stream order (digest). */
void nexar__relay_digest(nexar__imsg_t *m, const uint8_t *d, size_t n);
/* Stream bytes of |m| from m->sent on, up to what is available: at most
 * |max| vectors; *fin when they reach the end of the stream. */
size_t nexar__omsg_vecs(const nexar__omsg_t *m, struct iovec *v, size_t max,
                        bool *fin);
/* Whether |m| has stream bytes available beyond m->sent. */
bool nexar__omsg_more(const nexar__omsg_t *m);
/* The downstream link acknowledged more of forwarded frame |m|. */
void nexar__relay_acked(nexar__omsg_t *m);
/* Cut the links between a forwarded frame and its streams as either side
 * goes away (omsg freed, imsg freed). */
void nexar__relay_out_gone(nexar__omsg_t *m);
void nexar__relay_in_gone(nexar__imsg_t *m);
/* Frames queued on failed links that the failed neighbour never
 * acknowledged go out again along the new routes; the others are lost
 * (their sends fail). */
void nexar__relay_reroute(nexar_ctx_t *ctx);
/* The link to neighbour |id| is up: frames parked for it are queued. */
void nexar__relay_unpark(nexar_ctx_t *ctx, int id);
/* Frees what is still parked (context teardown, before the endpoint). */
void nexar__relay_fini(nexar_ctx_t *ctx);

/* ---- lazy.c: the lazy mesh's links (docs/topology.md section 2). */
/* Dials stable id |id| at its roster address, pinning its certificate;
 * sets ctx->peers[id]. Returns 0 or the transport's NEXAR_ERR_*. */
int nexar__dial_peer(nexar_ctx_t *ctx, int id);
/* A frame needs a link to |id| and there is none: on a lazy mesh, dials it
 * and returns the new link (frames queue on it until it is up); else, or
 * when the dial cannot start, NULL with |why| saying so (it names the
 * address). */
nexar__link_t *nexar__lazy_dial(nexar_ctx_t *ctx, int id, const char **why);
/* Accepted link |c| from rank c->peer is up while ctx->peers holds this
 * process's own dial to it: on a lazy mesh, the lower rank's connection
 * wins (peer table, queued frames; the loser is retired) and true is
 * returned; false otherwise (a duplicate). */
bool nexar__lazy_cross(nexar_ctx_t *ctx, nexar__link_t *c);
/* Finalize: whether what was sent on the retired links is acknowledged
 * (or their peer cannot acknowledge it any more); closes them. */
bool nexar__lazy_idle(nexar_ctx_t *ctx);
void nexar__lazy_close(nexar_ctx_t *ctx);
/* Link |c| ended (its close was reported). */
void nexar__lazy_gone(nexar_ctx_t *ctx, nexar__link_t *c);

/* The error text of a request failed by a peer's end: a revoked
 * communicator keeps the revocation's text (which names the failure and
 * says the buffers are unspecified), whatever ends its requests later. */
#define FAIL_TEXT(comm, ...)                      \
  do {                                            \
    if (!atomic_load(&(comm)->revoked))           \
      nexar__comm_set_error((comm), __VA_ARGS__); \
  } while (0)

/* match.c internals shared with fail.c. */
void nexar__p2p_unexp_remove(nexar_comm_t *comm, nexar__imsg_t *m);
void nexar__p2p_posted_remove(nexar_comm_t *comm, nexar__req_t *r);
void nexar__p2p_reorder_remove(nexar_ctx_t *ctx, nexar__imsg_t *m);
/* Whether |r| is a control-message receive (it ends with its link). */
bool nexar__p2p_is_ctl(const nexar__req_t *r);

/* send.c: queues one message to stable id |dest| (header |h|, payload
 * |data| of |len| bytes, copied when |copy|; |req| completes when it is
 * acknowledged; |comm| gets the error text), or writes it at once through
 * the link's tp->send_now when it is eager and the transport can. */
int nexar__p2p_emit(nexar_ctx_t *ctx, int dest, nexar__hdr_t *h, int lane,
                    const uint8_t *data, uint64_t len, bool copy,
                    nexar__req_t *req, nexar_comm_t *comm);
/* send.c: queues frame |m| (waiting for credit until now) on the first
 * link of its route, or fails its send when there is none and frees it. */
void nexar__p2p_launch(nexar_ctx_t *ctx, nexar__omsg_t *m);
/* send.c: what an operation needing the peer of the dead link |c| fails
 * with (NEXAR_ERR_EXCLUDED when that peer fenced this process, else
 * NEXAR_ERR_PEER_FAILED). */
int nexar__p2p_gone_code(const nexar__link_t *c);
/* match.c: copies |n| payload bytes at payload offset |off| of the list
 * |s| (|ns| entries) out to |buf| (|to|), or from |buf| into the list. */
void nexar__seg_copy(const nexar__seg_t *s, uint32_t ns, uint64_t off,
                     uint8_t *buf, size_t n, bool to);
/* match.c: whether receive (or probe) |r| matches message |m| (of header
 * |h|). */
bool nexar__p2p_matches(const nexar__req_t *r, const nexar__imsg_t *m);
bool nexar__p2p_hdr_matches(const nexar__req_t *r, const nexar__hdr_t *h);
/* match.c: receive |r| got the whole message of header |h| (its payload is
 * in r's buffer): its status is set and it completes, with
 * NEXAR_ERR_TRUNCATE (and the communicator's error text) when the payload
 * was longer than the receive. */
void nexar__p2p_recv_end(nexar__req_t *r, const nexar__hdr_t *h);

/* ---------------- p2p/whole.c ---------------- */
/* Transport upcall (nexar__ep_ops_t.on_whole): a message that came whole
 * in one piece (|n| bytes at |d|: header and payload; a record that opened
 * and ended its stream) is matched against the posted receives and copied
 * straight into the one it matches, with no incoming-message object.
 * Returns false, having changed nothing, when the general path
 * (on_stream_data) must take it: anything but a plain p2p or collective
 * message, a header the general path would refuse or hold back, no posted
 * receive, a probe first in line, a collective mismatch. */
bool nexar__p2p_on_whole(nexar__link_t *c, const uint8_t *d, size_t n);
/* The same for a header already decoded (nexar__ep_ops_t.on_whole_hdr). */
bool nexar__p2p_on_whole_hdr(nexar__link_t *c, const nexar__hdr_t *h,
                             const uint8_t *payload);

/* Engine (emu held): |bytes| more data sent on |comm|
 * (nexar_comm_bytes_sent). Written under the engine lock only, so a load
 * and a store, not an atomic addition; readers load it. */
static inline void nexar__comm_count_tx(nexar_comm_t *comm, uint64_t bytes) {
  atomic_store_explicit(
      &comm->tx_bytes,
      atomic_load_explicit(&comm->tx_bytes, memory_order_relaxed) + bytes,
      memory_order_relaxed);
}

/* Eager copies in flight per peer (send.c): a larger total waits. */
#define NEXAR__EAGER_COPY_CAP (16u << 20)

/* ---- express.c: the express path of blocking small messages between
 * ranks of one host (checked arguments, host memory, |peer| a rank of
 * |comm|). Each returns false, having done nothing, when the general
 * path must take the call. */
/* nexar_send of |bytes| at |buf| (elements of |dtype|) to |peer| with
 * |tag|: written into the link at once when the engine is free, nothing is
 * queued, the peer is a ready neighbour whose transport writes whole
 * messages at once (tp->send_now) and its lane has nothing waiting.
 * True: sent (NEXAR_OK). */
bool nexar__p2p_express_send(nexar_comm_t *comm, const void *buf,
                             uint64_t bytes, nexar_dtype_t dtype, int peer,
                             int tag);
/* nexar_recv of up to |cap| bytes into |buf| from |peer| (not a wildcard)
 * with |tag| (ANY_TAG allowed): a receive in the caller's frame, started
 * under the engine lock when the engine is free and nothing is queued (the
 * general matching: unexpected list first, then posted in order), waited
 * for by reading the peer's link only (nexar__ep_wait_link), then the
 * general wait. True with the call's result in *rc and |status| filled
 * (when given). */
bool nexar__p2p_express_recv(nexar_comm_t *comm, void *buf, uint64_t cap,
                             int peer, int tag, nexar_status_t *status,
                             int *rc);

/* ---------------- p2p/credit.c ---------------- */
/* The payload one credited relay frame carries (NEXAR_RELAY_CREDIT_BYTES
 * less the relay envelope and inner header); 0 on a full mesh, which
 * relays nothing. Collectives cut their relayed steps to it
 * (coll/sched.c), rendezvous sends their later parts (p2p/rdv.c). */
uint64_t nexar__credit_frame(const nexar_ctx_t *ctx);
/* Whether a relayed message of |len| payload bytes on |lane| travels under
 * end-to-end credit (stored and forwarded by relays). */
bool nexar__credit_wants(nexar_ctx_t *ctx, int lane, uint64_t len);
/* Relay frame |m| (wrapped, m->dest set) is to leave: true when it may go
 * now (credit taken, or none needed and nothing waits before it); false
 * when it waits for credit (queued here, on no link: cwait). */
bool nexar__credit_admit(nexar_ctx_t *ctx, nexar__omsg_t *m);
/* Stable id |from| gave back |n| bytes of credit on |lane|: waiting frames
 * to it go out; |n| 0: it asks for the credit this process owes it. */
void nexar__credit_returned(nexar_ctx_t *ctx, int from, int lane, uint64_t n);
/* Destination: relayed message |m| leaves its link: the credit its origin
 * holds for it (m->e2e) goes back, batched (p2p/credit.c). */
void nexar__credit_give_back(nexar_ctx_t *ctx, nexar__imsg_t *m);
/* Takes waiting frame |m| out of its queue (its send ends). */
void nexar__credit_unwait(nexar_ctx_t *ctx, nexar__omsg_t *m);
/* Ends the waiting frames to stable id |peer| (-1: any) with |err|: those
 * whose requests belong to |comm| are cancelled; without |comm|, each
 * send fails with |why| as its error text. The frames are freed. */
void nexar__credit_fail(nexar_ctx_t *ctx, int peer, nexar_comm_t *comm, int err,
                        const char *why);
/* A process failed or left: frames may have been lost with it, so the
 * credit in flight is forgiven (the bound then holds per failure). */
void nexar__credit_reset(nexar_ctx_t *ctx);
/* Whether no frame waits for credit (finalize flushes them first). */
bool nexar__credit_idle(nexar_ctx_t *ctx);
/* Frees what waits (context teardown). */
void nexar__credit_fini(nexar_ctx_t *ctx);

/* ---------------- p2p/rdv.c ---------------- */
/* Whether send |req| (|relayed|: its next hop is not its destination)
 * goes by rendezvous: a relayed data-lane point-to-point message,
 * contiguous or vectored, above one credited frame's payload. */
bool nexar__rdv_wants(nexar_ctx_t *ctx, const nexar__req_t *req, bool relayed);
/* Origin: sends the first part of |req| and links it to wait for the
 * clear-to-send; 0 or what nexar__p2p_emit returns. */
int nexar__rdv_send(nexar_ctx_t *ctx, nexar__req_t *req);
/* Whether RPC message |req| (|relayed|) goes in parts: a relayed RPC
 * message above one credited frame's payload (docs/topology.md section
 * 10, rule 7). */
bool nexar__rdv_rpc_wants(nexar_ctx_t *ctx, const nexar__req_t *req,
                          bool relayed);
/* Origin: sends RPC message |req| as a credited first part and its later
 * parts at once (copied); |req| completes. 0, or what nexar__p2p_emit
 * returns for the first part (then |req| is untouched). */
int nexar__rdv_rpc_send(nexar_ctx_t *ctx, nexar__req_t *req);
/* Origin: the clear-to-send for |r| came: its later parts are copied out
 * (credited frames) and it completes. */
void nexar__rdv_rest(nexar__req_t *r);
/* Destination: receive |r| matched first part |m| (a P2P RDV, or an RPC
 * message bound to its request or call): it waits in its communicator's
 * rdv list for the later parts. */
void nexar__rdv_bound(nexar__imsg_t *m, nexar__req_t *r);
/* Destination: |r| leaves the rdv list (if in it). */
void nexar__rdv_unlink(nexar__req_t *r);
/* Destination: the first part of |r| is all in; false when |r| is no
 * rendezvous receive (it ends as usual), else it ends once the rest is in. */
bool nexar__rdv_first_in(nexar__req_t *r);
/* Destination: the header of later part |m| was admitted (in order): its
 * bytes go to the receive waiting for them, or are dropped. */
void nexar__rdv_on_part(nexar_ctx_t *ctx, nexar__imsg_t *m);
/* Destination: |n| bytes at offset |off| of later part |m|'s payload. */
void nexar__rdv_data(nexar_ctx_t *ctx, nexar__imsg_t *m, uint64_t off,
                     const uint8_t *d, size_t n);
/* Destination: later part |m| lost its stream before its last byte: the
 * receive or RPC message waiting for it ends with |err|. */
void nexar__rdv_cut(nexar_ctx_t *ctx, nexar__imsg_t *m, int err);
/* Destination: ends the receives waiting for the later parts of messages
 * from stable id |peer| with |err| (|why| their communicator's text). */
void nexar__rdv_fail_peer(nexar_ctx_t *ctx, int peer, int err, const char *why);

/* ---------------- p2p/modes.c ---------------- */
/* Bits of nexar__req_t.sync: a synchronous send (WAIT) completes once its
 * bytes are out (SENT: copied or acknowledged by the transport) and the
 * receiver has acknowledged the match (MATCHED); until then it is LINKED
 * in its communicator's ssend list, found by (peer, hdr.seq). */
#define NEXAR__SYNC_WAIT 1u
#define NEXAR__SYNC_SENT 2u
#define NEXAR__SYNC_MATCHED 4u
#define NEXAR__SYNC_LINKED 8u
/* A relayed send above the end-to-end credit (rendezvous, p2p/rdv.c): its
 * first part is out (SENT); the receiver's MATCHED is the clear-to-send. */
#define NEXAR__SYNC_RDV 16u
/* A synchronous send starts: linked until its acknowledgement comes. */
void nexar__p2p_sync_link(nexar__req_t *r);
/* Unlinks |r| if it is linked. */
void nexar__p2p_sync_unlink(nexar__req_t *r);
/* Ends p2p request |r| with |rc|; a synchronous send that succeeded waits
 * for its match acknowledgement as well. */
void nexar__p2p_complete(nexar__req_t *r, int rc);
/* Receive side: synchronous message |m| was matched on |comm|: sends the
 * acknowledgement to its origin (at once for a message to self). */
void nexar__p2p_ack_match(nexar_ctx_t *ctx, nexar_comm_t *comm,
                          const nexar__imsg_t *m);
/* Send side: stable id |from| acknowledged the match of the synchronous
 * message |seq| it got on |comm|. */
void nexar__p2p_on_matched(nexar_comm_t *comm, int from, uint64_t seq);
/* Fails the synchronous sends to stable id |peer| on every communicator. */
void nexar__p2p_sync_fail_peer(nexar_ctx_t *ctx, int peer, int err,
                               const char *why);
/* Probe |r| matched message |m|: completes with its status. */
void nexar__p2p_probed(nexar__req_t *r, const nexar__imsg_t *m);
/* Whether an unexpected message of |comm| matches (|source| comm rank or
 * NEXAR_ANY_SOURCE, |tag| or NEXAR_ANY_TAG): the first such, the one the
 * next receive would get, gives *st (source, tag, bytes). */
bool nexar__p2p_peek(nexar_comm_t *comm, int source, int tag,
                     nexar_status_t *st);
/* Cancels receive |r| if no message is matched to it yet: it leaves the
 * posted list and completes with NEXAR_ERR_CANCELLED. Returns whether it
 * did. */
bool nexar__p2p_cancel_recv(nexar__req_t *r);

/* ctl.c: a control message and a mismatch notice whose header was read. */
void nexar__p2p_ctl_recv(nexar_ctx_t *ctx, nexar__imsg_t *m);
void nexar__p2p_on_notice(nexar_ctx_t *ctx, nexar_comm_t *comm,
                          nexar__imsg_t *m);

#endif /* NEXAR_P2P_H */
