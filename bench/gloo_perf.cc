/*
 * gloo_perf: the Gloo baseline of bench/compare (Debian's libgloo-dev,
 * git 2022-05-18). Same operations, sizes, method, columns and JSON as
 * tools/nexar-perf (see perf_common.h), over Gloo's TCP transport on
 * 127.0.0.1 with a FileStore rendezvous in a fresh temporary directory.
 *
 *   g++ -O2 -std=c++17 -o gloo_perf bench/gloo_perf.cc -lgloo -lpthread
 *   gloo_perf --np 4 allreduce -b 8 -e 64M -f 4
 *
 * Gloo has no launcher: with --np N the program forks N ranks itself
 * (GLOO_RANK, GLOO_SIZE and GLOO_STORE in the environment start a single
 * rank instead, for an external launcher). When one rank fails the others
 * are killed.
 *
 * latency: UnboundBuffer send/recv ping-pong between ranks 0 and 1.
 * bw:      WINDOW (64) sends in flight, each on its own UnboundBuffer and slot
 * over the same memory (Gloo allows one pending operation per buffer), then a
 * 4-byte acknowledgement; bibw: both directions at once. allreduce, bcast,
 * reduce, allgather, alltoall, gather, scatter, barrier: Gloo's option-struct
 * collectives (gloo::allreduce etc.) with the default algorithm, out of place;
 * a fresh tag for every call. reduce_scatter:
 * gloo::ReduceScatterHalvingDoubling (Gloo's only reduce-scatter), built once
 * per size; it works in place on the whole input and leaves this rank's block
 * at its front, so each iteration runs on the previous result and copies that
 * block to the output buffer afterwards. Not in Gloo: iallreduce (no
 * non-blocking collectives) and scan.
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>

#include "perf_common.h"

namespace {

using RedFn = void (*)(void *, const void *, const void *, size_t);

/* Slots for p2p, far above the ones collectives derive from their tags
 * (prefix << 56 | tag) and the small ones of context->nextSlot(). */
constexpr uint64_t kP2pSlot = 1ull << 40;

struct GlooBe {
  perf_backend be;
  std::shared_ptr<gloo::Context> ctx;
  uint32_t tag = 0;
};

GlooBe *G(perf_backend *be) {
  return reinterpret_cast<GlooBe *>(be);
}

/* Per-case state. */
struct CaseState {
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> snd, rcv;
  std::unique_ptr<gloo::transport::UnboundBuffer> ack;
  int ackval = 0;
  std::shared_ptr<gloo::Algorithm> rs; /* ReduceScatterHalvingDoubling */
};

template <typename T>
RedFn red_fn(int ro) {
  switch (ro) {
    case RO_SUM:
      return static_cast<RedFn>(&gloo::sum<T>);
    case RO_PROD:
      return static_cast<RedFn>(&gloo::product<T>);
    case RO_MAX:
      return static_cast<RedFn>(&gloo::max<T>);
    default:
      return static_cast<RedFn>(&gloo::min<T>);
  }
}

template <typename T>
const gloo::ReductionFunction<T> *red_obj(int ro) {
  switch (ro) {
    case RO_SUM:
      return gloo::ReductionFunction<T>::sum;
    case RO_PROD:
      return gloo::ReductionFunction<T>::product;
    case RO_MAX:
      return gloo::ReductionFunction<T>::max;
    default:
      return gloo::ReductionFunction<T>::min;
  }
}

void be_barrier(perf_backend *be) {
  gloo::BarrierOptions o(G(be)->ctx);
  o.setTag(G(be)->tag++);
  gloo::barrier(o);
}

void be_allreduce_d(perf_backend *be, double *v, int n, int red) {
  std::vector<double> in(v, v + n);
  gloo::AllreduceOptions o(G(be)->ctx);
  o.setInput(in.data(), (size_t)n);
  o.setOutput(v, (size_t)n);
  o.setReduceFunction(red == PERF_DSUM   ? red_fn<double>(RO_SUM)
                      : red == PERF_DMAX ? red_fn<double>(RO_MAX)
                                         : red_fn<double>(RO_MIN));
  o.setTag(G(be)->tag++);
  gloo::allreduce(o);
}

int be_supports(perf_backend *, const perf_case *c) {
  if (c->op == OP_IALLREDUCE || c->op == OP_SCAN) return -1;
  if (c->op == OP_REDUCE_SCATTER && c->bytes / c->ts > 0x7fffffff) return -1;
  /* Gloo's collectives divide by the element count: no empty calls. */
  if (c->count == 0 && c->op != OP_BARRIER) return 1;
  return 0;
}

template <typename T>
int prepare_t(GlooBe *g, perf_case *c) {
  auto *st = new CaseState;
  c->be = st;
  auto &ctx = g->ctx;
  if (c->op == OP_BW || c->op == OP_BIBW) {
    for (int i = 0; i < c->window; i++) {
      st->snd.push_back(
          ctx->createUnboundBuffer(c->sbuf, c->count * sizeof(T)));
      st->rcv.push_back(
          ctx->createUnboundBuffer(c->rbuf, c->count * sizeof(T)));
    }
    st->ack = ctx->createUnboundBuffer(&st->ackval, sizeof st->ackval);
  } else if (c->op == OP_LATENCY) {
    st->snd.push_back(ctx->createUnboundBuffer(c->sbuf, c->count * sizeof(T)));
    st->rcv.push_back(ctx->createUnboundBuffer(c->rbuf, c->count * sizeof(T)));
  } else if (c->op == OP_REDUCE_SCATTER) {
    std::vector<T *> ptrs(1, (T *)c->sbuf);
    std::vector<int> recv((size_t)c->nranks, (int)c->blk);
    st->rs = std::make_shared<gloo::ReduceScatterHalvingDoubling<T>>(
        ctx, ptrs, (int)(c->blk * (size_t)c->nranks), recv,
        red_obj<T>(c->redop));
  }
  return 0;
}

template <typename T>
int run_t(GlooBe *g, perf_case *c) {
  auto &ctx = g->ctx;
  auto *st = static_cast<CaseState *>(c->be);
  int r = c->rank, n = c->nranks;
  /* flat ops: cnt elements; split ops: n blocks of blk elements */
  size_t blk = c->blk, cnt = c->bytes / sizeof(T);
  T *s = (T *)c->sbuf, *d = (T *)c->rbuf;
  switch (c->op) {
    case OP_LATENCY:
      if (r == 0) {
        st->snd[0]->send(1, kP2pSlot);
        st->snd[0]->waitSend();
        st->rcv[0]->recv(1, kP2pSlot + 1);
        st->rcv[0]->waitRecv();
      } else if (r == 1) {
        st->rcv[0]->recv(0, kP2pSlot);
        st->rcv[0]->waitRecv();
        /* echo what arrived */
        auto echo = ctx->createUnboundBuffer(c->rbuf, cnt * sizeof(T));
        echo->send(0, kP2pSlot + 1);
        echo->waitSend();
      }
      return 0;
    case OP_BW:
      if (r == 0) {
        for (int i = 0; i < c->window; i++)
          st->snd[i]->send(1, kP2pSlot + 2 + i);
        for (int i = 0; i < c->window; i++) st->snd[i]->waitSend();
        st->ack->recv(1, kP2pSlot + 1);
        st->ack->waitRecv();
      } else if (r == 1) {
        for (int i = 0; i < c->window; i++)
          st->rcv[i]->recv(0, kP2pSlot + 2 + i);
        for (int i = 0; i < c->window; i++) st->rcv[i]->waitRecv();
        st->ack->send(0, kP2pSlot + 1);
        st->ack->waitSend();
      }
      return 0;
    case OP_BIBW:
      if (r <= 1) {
        for (int i = 0; i < c->window; i++)
          st->rcv[i]->recv(1 - r, kP2pSlot + 2 + i);
        for (int i = 0; i < c->window; i++)
          st->snd[i]->send(1 - r, kP2pSlot + 2 + i);
        for (int i = 0; i < c->window; i++) st->snd[i]->waitSend();
        for (int i = 0; i < c->window; i++) st->rcv[i]->waitRecv();
      }
      return 0;
    case OP_ALLREDUCE: {
      gloo::AllreduceOptions o(ctx);
      o.setInput(s, cnt);
      o.setOutput(d, cnt);
      o.setReduceFunction(red_fn<T>(c->redop));
      o.setTag(g->tag++);
      gloo::allreduce(o);
      return 0;
    }
    case OP_BCAST: {
      gloo::BroadcastOptions o(ctx);
      o.setOutput(s, cnt);
      o.setRoot(c->root);
      o.setTag(g->tag++);
      gloo::broadcast(o);
      return 0;
    }
    case OP_REDUCE: {
      gloo::ReduceOptions o(ctx);
      o.setInput(s, cnt);
      o.setOutput(d, cnt); /* Gloo wants an output on every rank */
      o.setRoot(c->root);
      o.setReduceFunction(red_fn<T>(c->redop));
      o.setTag(g->tag++);
      gloo::reduce(o);
      return 0;
    }
    case OP_ALLGATHER: {
      gloo::AllgatherOptions o(ctx);
      o.setInput(s, blk);
      o.setOutput(d, cnt);
      o.setTag(g->tag++);
      gloo::allgather(o);
      return 0;
    }
    case OP_ALLTOALL: {
      gloo::AlltoallOptions o(ctx);
      o.setInput(s, cnt);
      o.setOutput(d, cnt);
      o.setTag(g->tag++);
      gloo::alltoall(o);
      return 0;
    }
    case OP_GATHER: {
      gloo::GatherOptions o(ctx);
      o.setInput(s, blk);
      if (r == c->root) o.setOutput(d, cnt);
      o.setRoot(c->root);
      o.setTag(g->tag++);
      gloo::gather(o);
      return 0;
    }
    case OP_SCATTER: {
      gloo::ScatterOptions o(ctx);
      if (r == c->root) {
        std::vector<T *> ptrs;
        for (int j = 0; j < n; j++) ptrs.push_back(s + (size_t)j * blk);
        o.setInputs(ptrs, blk);
      }
      o.setOutput(d, blk);
      o.setRoot(c->root);
      o.setTag(g->tag++);
      gloo::scatter(o);
      return 0;
    }
    case OP_REDUCE_SCATTER:
      st->rs->run();
      memcpy(d, s, blk * sizeof(T)); /* its result lands at the front */
      return 0;
    case OP_BARRIER:
      be_barrier(&g->be);
      return 0;
  }
  return -1;
}

#define DISPATCH(fn, g, c)       \
  switch ((c)->dtype) {          \
    case DT_INT8:                \
      return fn<int8_t>(g, c);   \
    case DT_UINT8:               \
      return fn<uint8_t>(g, c);  \
    case DT_INT32:               \
      return fn<int32_t>(g, c);  \
    case DT_UINT32:              \
      return fn<uint32_t>(g, c); \
    case DT_INT64:               \
      return fn<int64_t>(g, c);  \
    case DT_UINT64:              \
      return fn<uint64_t>(g, c); \
    case DT_FLOAT32:             \
      return fn<float>(g, c);    \
    default:                     \
      return fn<double>(g, c);   \
  }

int be_prepare(perf_backend *be, perf_case *c) {
  try {
    DISPATCH(prepare_t, G(be), c);
  } catch (const std::exception &e) {
    fprintf(stderr, "gloo_perf: rank %d: %s\n", be->rank, e.what());
    return -1;
  }
}

int be_run(perf_backend *be, perf_case *c) {
  try {
    DISPATCH(run_t, G(be), c);
  } catch (const std::exception &e) {
    fprintf(stderr, "gloo_perf: rank %d: %s\n", be->rank, e.what());
    return -1;
  }
}

void be_release(perf_backend *, perf_case *c) {
  delete static_cast<CaseState *>(c->be);
  c->be = nullptr;
}

int run_rank(int rank, int size, const std::string &store_dir,
             const perf_opts &o) {
  GlooBe g;
  memset(&g.be, 0, sizeof g.be);
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    attr.ai_family = AF_INET;
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(store_dir);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    ctx->setTimeout(std::chrono::seconds(600));
    ctx->connectFullMesh(store, dev);
    g.ctx = ctx;
  } catch (const std::exception &e) {
    fprintf(stderr, "gloo_perf: rank %d: rendezvous: %s\n", rank, e.what());
    return 1;
  }
  g.be.impl = "gloo";
  g.be.impl_version = "(Debian libgloo 0.0~git20220518, TCP)";
  g.be.rank = rank;
  g.be.size = size;
  g.be.barrier = be_barrier;
  g.be.allreduce_d = be_allreduce_d;
  g.be.supports = be_supports;
  g.be.prepare = be_prepare;
  g.be.run = be_run;
  g.be.release = be_release;
  try {
    return perf_main(&g.be, &o);
  } catch (const std::exception &e) {
    fprintf(stderr, "gloo_perf: rank %d: %s\n", rank, e.what());
    return 1;
  }
}

std::vector<pid_t> g_pids;
volatile sig_atomic_t g_stop;

void on_signal(int sig) {
  g_stop = sig;
  for (pid_t q : g_pids) kill(q, SIGKILL); /* our own children only */
}

}  // namespace

int main(int argc, char **argv) {
  int np = 0;
  std::vector<char *> args;
  for (int i = 0; i < argc; i++) {
    if ((!strcmp(argv[i], "--np") || !strcmp(argv[i], "-np")) && i + 1 < argc)
      np = atoi(argv[++i]);
    else
      args.push_back(argv[i]);
  }
  perf_opts o;
  if (perf_parse((int)args.size(), args.data(), &o)) {
    perf_usage(argv[0]);
    fprintf(stderr, "  plus --np N: fork N ranks (Gloo has no launcher)\n");
    return 2;
  }
  const char *er = getenv("GLOO_RANK"), *es = getenv("GLOO_SIZE"),
             *ed = getenv("GLOO_STORE");
  if (!np && er && es && ed) return run_rank(atoi(er), atoi(es), ed, o);
  if (np < 1) {
    fprintf(stderr,
            "gloo_perf: give --np N (or GLOO_RANK, GLOO_SIZE, "
            "GLOO_STORE)\n");
    return 2;
  }
  char dir[] = "/tmp/gloo_perf.XXXXXX";
  if (!mkdtemp(dir)) {
    perror("gloo_perf: mkdtemp");
    return 1;
  }
  fflush(stdout);
  /* A launcher stopped by a signal (timeout(1), Ctrl-C) stops its ranks. */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  std::vector<pid_t> &pids = g_pids;
  for (int r = 0; r < np; r++) {
    pid_t p = fork();
    if (p < 0) {
      perror("gloo_perf: fork");
      for (pid_t q : pids) kill(q, SIGKILL);
      return 1;
    }
    if (p == 0) {
      signal(SIGTERM, SIG_DFL);
      signal(SIGINT, SIG_DFL);
      signal(SIGHUP, SIG_DFL);
      int rc = run_rank(r, np, dir, o);
      fflush(stdout);
      _exit(rc);
    }
    pids.push_back(p);
  }
  int rc = 0, left = np;
  while (left > 0) {
    int st;
    pid_t p = wait(&st);
    if (p < 0) {
      if (errno == EINTR) continue;
      break;
    }
    left--;
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (code && !rc) {
      rc = code;
      for (pid_t q : pids)
        if (q != p) kill(q, SIGKILL); /* our own children only */
    }
  }
  /* Remove the store's files (flat directory of key files). */
  if (DIR *d = opendir(dir)) {
    while (struct dirent *e = readdir(d))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
        unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
  }
  rmdir(dir);
  return g_stop ? 128 + g_stop : rc;
}
