// How the ranks of a torch process group find one another (docs/torch.md,
// "Rendezvous and trust"). Under nexar-run (NEXAR_SEED set) the first group
// uses that seed; otherwise rank 0 starts nexar's embedded seed and
// publishes its address, and if no NEXAR_SECRET/_FILE is set a secret it
// generated, through the c10d store torch hands the backend.
#include "process_group.hpp"

#include <c10/util/Exception.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <sys/random.h>

namespace nexar_torch {

namespace {

const char kSeedKey[] = "nexar/seed";
const char kSecretKey[] = "nexar/secret";

std::atomic<bool> g_env_seed_taken{false};

std::string env(const char *name) {
  const char *v = std::getenv(name);
  return v ? v : "";
}

std::string fromBytes(const std::vector<uint8_t> &v) {
  return std::string(v.begin(), v.end());
}

std::vector<uint8_t> toBytes(const std::string &s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

// 32 bytes from the kernel's generator, as 64 hex digits.
std::string newSecret(int rank) {
  unsigned char raw[32];
  size_t got = 0;
  for (int tries = 0; got < sizeof raw && tries < 16; tries++) {
    ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  TORCH_CHECK(got == sizeof raw, "nexar backend: rank ", rank,
              ": rendezvous: getrandom failed to give a secret");
  std::string hex;
  char two[3];
  for (unsigned char c : raw) {
    std::snprintf(two, sizeof two, "%02x", c);
    hex += two;
  }
  return hex;
}

bool isLoopback(const std::string &host) {
  return host.empty() || host == "localhost" || host == "::1" ||
         host.rfind("127.", 0) == 0;
}

}  // namespace

nexar_ctx_t *rendezvous(c10d::Store &store, int rank, int size,
                        std::chrono::milliseconds timeout) {
  std::string at = "nexar backend: rank " + std::to_string(rank) +
                   ": rendezvous of " + std::to_string(size) + " ranks";
  nexar_config_t cfg = NEXAR_CONFIG_INIT;
  cfg.rank = rank;
  cfg.world_size = size;
  nexar_seed_t *seed = nullptr;
  std::string seed_addr, secret;

  std::string env_size = env("NEXAR_WORLD_SIZE");
  bool env_seed = !env("NEXAR_SEED").empty() &&
                  (env_size.empty() || env_size == std::to_string(size)) &&
                  !g_env_seed_taken.exchange(true);
  if (!env_seed) {
    bool have_secret =
        !env("NEXAR_SECRET").empty() || !env("NEXAR_SECRET_FILE").empty();
    if (!have_secret) {
      if (rank == 0) store.set(kSecretKey, toBytes(newSecret(rank)));
      store.wait({kSecretKey}, timeout);
      secret = fromBytes(store.get(kSecretKey));
      cfg.secret = secret.c_str();
    }
    if (rank == 0) {
      // The seed listens where the other ranks can reach it: MASTER_ADDR
      // (torchrun's rendezvous host, where rank 0 runs) or loopback.
      std::string host = env("MASTER_ADDR");
      bool local = isLoopback(host);
      nexar_seed_config_t scfg = NEXAR_SEED_CONFIG_INIT;
      scfg.listen_addr = local ? "127.0.0.1:0" : "0.0.0.0:0";
      scfg.world_size = size;
      scfg.secret = cfg.secret;
      int rc = nexar_seed_start(&scfg, &seed);
      TORCH_CHECK(rc == NEXAR_OK, at,
                  ": nexar_seed_start failed: ", nexar_strerror(rc), " (",
                  nexar_err_name(rc), ")");
      std::string addr = (local ? std::string("127.0.0.1") : host) + ":" +
                         std::to_string(nexar_seed_port(seed));
      store.set(kSeedKey, toBytes(addr));
    }
    store.wait({kSeedKey}, timeout);
    seed_addr = fromBytes(store.get(kSeedKey));
    cfg.seed_addr = seed_addr.c_str();
  }

  nexar_ctx_t *ctx = nullptr;
  int rc = nexar_init(&cfg, &ctx);
  std::string init_error = rc == NEXAR_OK ? "" : nexar_last_error();
  if (seed) {
    if (rc == NEXAR_OK)
      nexar_seed_wait(seed, -1);  // every rank has its welcome
    nexar_seed_stop(seed);
  }
  TORCH_CHECK(rc == NEXAR_OK, at, ": nexar_init failed: ", init_error, " (",
              nexar_err_name(rc), ")");
  int got_rank = -1, got_size = -1;
  nexar_comm_rank(nexar_comm_world(ctx), &got_rank);
  nexar_comm_size(nexar_comm_world(ctx), &got_size);
  if (got_rank != rank || got_size != size) {
    nexar_finalize(ctx);
    TORCH_CHECK(false, at, ": nexar gave rank ", got_rank, " of ", got_size,
                " (NEXAR_RANK / NEXAR_WORLD_SIZE disagree with torch's)");
  }
  return ctx;
}

}  // namespace nexar_torch
