/*
 * The parameter table: every NEXAR_* setting declared once, with its type,
 * default, range and help text. It drives validation (an invalid value is an
 * error naming the variable), the INFO dump of the effective configuration
 * and docs/configuration.md. Precedence: config struct > environment >
 * default.
 */
#ifndef NEXAR_PARAM_H
#define NEXAR_PARAM_H

#include <stddef.h>
#include <stdint.h>

/* X(type, field, env, default, min, max, help); type INT or STR. Integer
 * times are milliseconds, sizes bytes. */
#define NEXAR__PARAM_TABLE(X)                                                  \
  X(STR, seed_addr, "NEXAR_SEED", NULL, 0, 0,                                  \
    "host:port of the seed (required to join a cluster)")                      \
  X(STR, secret, "NEXAR_SECRET", NULL, 0, 0,                                   \
    "cluster secret shared by the seed and every worker (never logged)")       \
  X(STR, secret_file, "NEXAR_SECRET_FILE", NULL, 0, 0,                         \
    "file whose contents are the cluster secret")                              \
  X(INT, world_size, "NEXAR_WORLD_SIZE", 0, 1, 1 << 20,                        \
    "number of ranks in the job")                                              \
  X(INT, rank, "NEXAR_RANK", -1, -1, (1 << 20) - 1,                            \
    "requested rank (-1: assigned in arrival order)")                          \
  X(STR, bind_addr, "NEXAR_BIND_ADDR", "127.0.0.1", 0, 0,                      \
    "local host[:port] of the process's UDP socket")                           \
  X(STR, advertise_addr, "NEXAR_ADVERTISE_ADDR", NULL, 0, 0,                   \
    "host[:port] peers dial (default: the address the seed observed)")         \
  X(INT, bootstrap_timeout_ms, "NEXAR_BOOTSTRAP_TIMEOUT_MS", 60000, 100,       \
    86400000, "deadline of the whole bootstrap (seed, hello, mesh)")           \
  X(INT, op_timeout_ms, "NEXAR_OP_TIMEOUT_MS", 300000, 1, 86400000,            \
    "deadline of each blocking call and collective")                           \
  X(INT, flight_recorder, "NEXAR_FLIGHT_RECORDER", 512, 0, 1 << 16,            \
    "operations the flight recorder keeps, rounded up to a power of two (0: "  \
    "off; docs/debugging.md)")                                                 \
  X(INT, coll_probe_ms, "NEXAR_COLL_PROBE_MS", 1000, 0, 86400000,              \
    "a collective waiting this long sends its fingerprint to all (0: off)")    \
  X(STR, algo_allreduce, "NEXAR_ALGO_ALLREDUCE", "auto", 0, 0,                 \
    "allreduce algorithm: auto, ring, rd, rabenseifner, direct or hier")       \
  X(STR, algo_bcast, "NEXAR_ALGO_BCAST", "auto", 0, 0,                         \
    "bcast algorithm: auto, binomial, scatter_allgather or hier")              \
  X(STR, algo_reduce, "NEXAR_ALGO_REDUCE", "auto", 0, 0,                       \
    "reduce algorithm: auto, binomial, rs_gather or hier")                     \
  X(STR, algo_allgather, "NEXAR_ALGO_ALLGATHER", "auto", 0, 0,                 \
    "allgather algorithm: auto, ring, rd or hier")                             \
  X(STR, algo_barrier, "NEXAR_ALGO_BARRIER", "auto", 0, 0,                     \
    "barrier algorithm: auto, two_phase, dissemination or hier")               \
  X(INT, allreduce_rd_max_bytes, "NEXAR_ALLREDUCE_RD_MAX_BYTES", 16384, 0,     \
    1 << 30, "auto: recursive-doubling allreduce up to this size")             \
  X(INT, allreduce_direct_max_bytes, "NEXAR_ALLREDUCE_DIRECT_MAX_BYTES", 4096, \
    0, 1 << 20,                                                                \
    "auto: one-round (direct) allreduce up to this size on one host, 3-16 "    \
    "ranks; 0: never")                                                         \
  X(INT, allreduce_ring_min_bytes, "NEXAR_ALLREDUCE_RING_MIN_BYTES", 1048576,  \
    0, 1 << 30, "auto: ring allreduce from this size (Rabenseifner below)")    \
  X(INT, bcast_large_bytes, "NEXAR_BCAST_LARGE_BYTES", 524288, 0, 1 << 30,     \
    "auto: scatter + allgather bcast from this size")                          \
  X(INT, reduce_large_bytes, "NEXAR_REDUCE_LARGE_BYTES", 524288, 0, 1 << 30,   \
    "reduce-scatter + gather reduce from this size")                           \
  X(INT, allgather_rd_max_bytes, "NEXAR_ALLGATHER_RD_MAX_BYTES", 65536, 0,     \
    1 << 30, "recursive-doubling allgather up to this total size")             \
  X(INT, gather_direct_min_bytes, "NEXAR_GATHER_DIRECT_MIN_BYTES", 65536, 0,   \
    1 << 30, "direct gather/scatter from this block size (binomial below)")    \
  X(INT, seg_bytes, "NEXAR_SEG_BYTES", 1048576, 4096, 1 << 30,                 \
    "pipeline segment of the ring collectives")                                \
  X(INT, bucket_bytes, "NEXAR_BUCKET_BYTES", 26214400, 1, 1 << 30,             \
    "multi-tensor allreduce: bytes per bucket (a larger tensor goes alone)")   \
  X(INT, eager_bytes, "NEXAR_EAGER_BYTES", 131072, 1024, 16777216,             \
    "stream window before a receive is matched (unexpected-message bound)")    \
  X(INT, max_streams, "NEXAR_MAX_STREAMS", 128, 4, 4096,                       \
    "undelivered messages a peer may have towards this process, per stream "   \
    "type")                                                                    \
  X(INT, max_message_mb, "NEXAR_MAX_MESSAGE_MB", 1 << 20, 1, 1 << 30,          \
    "largest message accepted from a peer, MiB")                               \
  X(INT, rpc_max_bytes, "NEXAR_RPC_MAX_BYTES", 1048576, 0, 1 << 30,            \
    "largest RPC request or response payload")                                 \
  X(INT, rpc_queue, "NEXAR_RPC_QUEUE", 1024, 1, 1 << 20,                       \
    "RPC requests received, waiting or running before callers get busy")       \
  X(INT, rpc_threads, "NEXAR_RPC_THREADS", 4, 1, 256,                          \
    "RPC handlers run at once (not counting those waiting in a nested call)")  \
  X(INT, heartbeat_ms, "NEXAR_HEARTBEAT_MS", 1000, 10, 3600000,                \
    "heartbeat interval: a connection idle this long sends a PING")            \
  X(INT, heartbeat_timeout_ms, "NEXAR_HEARTBEAT_TIMEOUT_MS", 5000, 20,         \
    86400000, "a peer nothing is received from for this long has failed")      \
  X(STR, transport, "NEXAR_TRANSPORT", "auto", 0, 0,                           \
    "transport to peers on this host: auto (shared memory where it can be "    \
    "set up, else QUIC), quic, or shm (shared memory or an error)")            \
  X(INT, shm_cma_bytes, "NEXAR_SHM_CMA_BYTES", 0, 0, 1 << 30,                  \
    "same host: payloads at least this long are read by the receiver from "    \
    "the sender's buffer (process_vm_readv, one copy); 0: always copied "      \
    "through the ring")                                                        \
  X(INT, shm_ring_kib, "NEXAR_SHM_RING_KIB", 4096, 64, 1048576,                \
    "KiB of each direction's ring to a same-host peer (a power of two)")       \
  X(INT, shm_park_us, "NEXAR_SHM_PARK_US", 0, 0, 1000000,                      \
    "same host: a link idle this long (us) is parked, not polled, until its "  \
    "peer's kick; 0: every link is polled")                                    \
  X(INT, icmp_detect, "NEXAR_ICMP_DETECT", 1, 0, 1,                            \
    "1: an ICMP port unreachable from a peer declares it failed at once")      \
  X(STR, recovery, "NEXAR_RECOVERY", "abort", 0, 0,                            \
    "after a failure: abort, manual (nexar_comm_shrink) or automatic")         \
  X(INT, min_world_size, "NEXAR_MIN_WORLD_SIZE", 1, 1, 1 << 20,                \
    "shrink or leave below this many ranks is refused")                        \
  X(INT, max_world_size, "NEXAR_MAX_WORLD_SIZE", 0, 0, 1 << 20,                \
    "elastic checkpoints admit joiners up to this size (0: no limit)")         \
  X(INT, join, "NEXAR_JOIN", 0, 0, 1,                                          \
    "1: join a running elastic job at its next nexar_elastic_checkpoint")      \
  X(STR, topology, "NEXAR_TOPOLOGY", "full", 0, 0,                             \
    "connection graph: full, kregular:K or hypercube (docs/topology.md)")      \
  X(INT, mesh_dials, "NEXAR_MESH_DIALS", 8, 1, 1 << 20,                        \
    "connections this process dials at once while the mesh forms "             \
    "(handshakes in flight); the others wait their turn")                      \
  X(INT, mesh_lazy_min, "NEXAR_MESH_LAZY_MIN", 64, 0, 1 << 20,                 \
    "world size from which a full topology forms lazily: the hypercube's "     \
    "links at formation, the others when first needed (0: never)")             \
  X(INT, relay_window_bytes, "NEXAR_RELAY_WINDOW_BYTES", 1048576, 1024,        \
    1 << 30,                                                                   \
    "bytes of one relayed message a relay holds in transit (at least the "     \
    "eager size)")                                                             \
  X(INT, relay_credit_bytes, "NEXAR_RELAY_CREDIT_BYTES", 262144, 1024,         \
    1 << 30,                                                                   \
    "relayed bytes in flight per destination and lane (end-to-end credit), "   \
    "and the largest relayed message that relays store and forward")           \
  X(INT, unexpected_bytes, "NEXAR_UNEXPECTED_BYTES", 268435456, 0, 1ll << 40,  \
    "bytes of whole unexpected messages taken off their streams beyond the "   \
    "per-origin bounds, all origins together (past it: NEXAR_ERR_NOMEM)")      \
  X(INT, idle_timeout_ms, "NEXAR_IDLE_TIMEOUT_MS", 60000, 0, 86400000,         \
    "QUIC idle timeout (0: off; else at least NEXAR_HEARTBEAT_TIMEOUT_MS)")    \
  X(INT, sockbuf_bytes, "NEXAR_SOCKBUF_BYTES", 8388608, 65536, 268435456,      \
    "UDP socket send and receive buffer size")                                 \
  X(INT, udp_payload, "NEXAR_UDP_PAYLOAD", 0, 0, 65507,                        \
    "QUIC packet size: 0 (65000 on loopback, 1452 otherwise) or 1200 .. "      \
    "65507 (QUIC's minimum is 1200)")                                          \
  X(INT, gso, "NEXAR_GSO", 1, 0, 1, "use UDP GSO/GRO batching")                \
  X(INT, gro, "NEXAR_GRO", -1, -1, 1, "UDP GRO on receive (-1: as NEXAR_GSO)") \
  X(INT, rx_batch, "NEXAR_RX_BATCH", 32, 1, 32,                                \
    "datagrams per recvmmsg call (1: one per call)")                           \
  X(INT, data_inflight_bytes, "NEXAR_DATA_INFLIGHT_BYTES", 262144, 0, 1 << 30, \
    "data-lane bytes in flight per connection before more data waits, or "     \
    "twice the path's bandwidth-delay product if larger (0: off); RPC "        \
    "messages wait only above twice that")                                     \
  X(INT, data_inflight_rpc_bytes, "NEXAR_DATA_INFLIGHT_RPC_BYTES", 65536, 0,   \
    1 << 30,                                                                   \
    "the same bound, without the bandwidth-delay term, for 50 ms after RPC "   \
    "traffic (see NEXAR_PASS_SLICE_RPC_BYTES), with data packets cut to "      \
    "half of it (at least 1200 bytes); 0: off")                                \
  X(INT, pass_slice_bytes, "NEXAR_PASS_SLICE_BYTES", 262144, 4096, 1 << 30,    \
    "payload bytes one progress pass reads, and the data a shared-memory "     \
    "ring holds unread, per link, so that control and RPC messages wait "      \
    "behind at most about that much bulk data")                                \
  X(INT, pass_slice_rpc_bytes, "NEXAR_PASS_SLICE_RPC_BYTES", 65536, 4096,      \
    1 << 30,                                                                   \
    "the same bound for 50 ms after RPC traffic (a call posted, a request or " \
    "a response received; at most NEXAR_PASS_SLICE_BYTES)")                    \
  X(INT, progress_linger_us, "NEXAR_PROGRESS_LINGER_US", 1000, 0, 1000000,     \
    "after a caller stops driving progress, the progress thread stays off "    \
    "the socket this long (0: it always polls)")                               \
  X(INT, spin_us, "NEXAR_SPIN_US", 300, 0, 1000000,                            \
    "a waiting caller polls without sleeping this long after its wait began "  \
    "or (shared memory) bytes last arrived, then it blocks")                   \
  X(STR, device, "NEXAR_DEVICE", "cpu", 0, 0,                                  \
    "device adapter installed at nexar_init: cpu, cuda or auto (cuda when "    \
    "the CUDA runtime loads and reports a device, else cpu)")                  \
  X(INT, device_stage_cache_bytes, "NEXAR_DEVICE_STAGE_CACHE_BYTES", 67108864, \
    0, 1ll << 40, "host bounce buffers kept for reuse by device staging")      \
  X(STR, launcher, "NEXAR_LAUNCHER", "auto", 0, 0,                             \
    "where rank, world size and rendezvous come from: auto, pmix, slurm, "     \
    "torchrun, ompi, k8s or none (docs/launching.md)")                         \
  X(INT, port, "NEXAR_PORT", 0, 0, 65535,                                      \
    "UDP port of the embedded seed under a launcher (0: the launcher's or "    \
    "one derived from the job)")                                               \
  X(INT, local_rank, "NEXAR_LOCAL_RANK", -1, -1, (1 << 20) - 1,                \
    "rank among the processes on this host (-1: from the launcher or the "     \
    "roster)")                                                                 \
  X(INT, local_size, "NEXAR_LOCAL_SIZE", 0, 0, 1 << 20,                        \
    "processes of the job on this host (0: from the launcher or the roster)")  \
  X(STR, k8s_service, "NEXAR_K8S_SERVICE", NULL, 0, 0,                         \
    "Kubernetes Indexed Job: the headless Service naming the pods (the seed "  \
    "is pod 0)")                                                               \
  X(STR, host_key, "NEXAR_HOST_KEY", NULL, 0, 0,                               \
    "this process's host key, 1 to 16 hex digits (tests; containers that "     \
    "share a boot id): ranks with one key share a host")

/*
 * The documented NEXAR_* variables that are not settings of the table: read
 * by the library outside it (logging, test hooks), by nexar's programs and
 * examples, by the test programs and scripts. X(name, who reads it).
 * Together with the table this is the whole list of names nexar reads;
 * scripts/check-env-names.py (ctest test_env_names) fails when the source
 * tree reads a NEXAR_* name listed in neither, or one here is read nowhere.
 */
#define NEXAR__ENV_OTHER(X)                                               \
  X("NEXAR_DEBUG", "log level (base/log.c)")                              \
  X("NEXAR_DEBUG_FILE", "log file (base/log.c)")                          \
  X("NEXAR_DEBUG_SUBSYS", "logged subsystems (base/log.c)")               \
  X("NEXAR_REDUCE_ISA", "reduction kernel family (coll/reduce.c)")        \
  X("NEXAR_QUIC_LOG", "ngtcp2's packet log (transport/quic.c)")           \
  X("NEXAR_TEST_LOSS", "test only: datagram loss (transport/udp_loss.c)") \
  X("NEXAR_DIGITS", "examples/ddp_digits: the data set")                  \
  X("NEXAR_TEST_FILTER", "tests: cases to run")                           \
  X("NEXAR_TEST_LIST", "tests: list the cases")                           \
  X("NEXAR_TEST_LONG", "tests: the long variants")                        \
  X("NEXAR_TEST_ONLY", "tests: one case")                                 \
  X("NEXAR_TEST_MPI_REF", "tests/mpi: reference MPI (configure time)")    \
  X("NEXAR_TEST_PY_ENV", "tests: environment of the Python checks")       \
  X("NEXAR_FT_ONLY", "test_ft, test_ft_net: one case")                    \
  X("NEXAR_FT_SEED", "test_ft: random seed")                              \
  X("NEXAR_FT_TRIALS", "test_ft: trials")                                 \
  X("NEXAR_CONF_ONLY", "transport_conformance: one case")                 \
  X("NEXAR_CAMPAIGN_FAULT", "ft_campaign: one fault kind")                \
  X("NEXAR_CAMPAIGN_KEEP_LOGS", "ft_campaign: keep every log")            \
  X("NEXAR_CAMPAIGN_LOGDIR", "ft_campaign: log folder")                   \
  X("NEXAR_CAMPAIGN_ONLY", "ft_campaign: one trial")                      \
  X("NEXAR_CAMPAIGN_POLICY", "ft_campaign: one recovery policy")          \
  X("NEXAR_CAMPAIGN_SEED", "ft_campaign: random seed")                    \
  X("NEXAR_CAMPAIGN_TRIALS", "ft_campaign: trials")                       \
  X("NEXAR_CAMPAIGN_WORLD", "ft_campaign: world size")                    \
  X("NEXAR_SOAK_CALLS", "rpc_soak: calls")                                \
  X("NEXAR_SOAK_CYCLES", "elastic_soak: cycles")                          \
  X("NEXAR_MPI_APPS_DIR", "tests/mpi/run-apps.sh: build folder")          \
  X("NEXAR_MPI_APPS_NEXAR", "tests/mpi/run-apps.sh: unsupported calls")   \
  X("NEXAR_MPI_APPS_NP", "tests/mpi/run-apps.sh: process counts")         \
  X("NEXAR_MPI_APPS_TIMEOUT", "tests/mpi/run-apps.sh: seconds per run")   \
  X("NEXAR_OSU_NP", "tests/mpi/osu.sh: process count")                    \
  X("NEXAR_OSU_ONLY", "tests/mpi/osu.sh: one benchmark")                  \
  X("NEXAR_OSU_TARBALL", "tests/mpi/osu.sh: the OSU tarball")             \
  X("NEXAR_OSU_TIMEOUT", "tests/mpi/osu.sh: seconds per run")

/* 1 when the |n| bytes at |name| are a setting of the table or a name of
 * NEXAR__ENV_OTHER (exact, case-sensitive). */
int nexar__env_known(const char *name, size_t n);
/*
 * Checks one environment entry "NAME=value": when NAME starts with NEXAR_
 * (any case) and is not known, writes to |msg| the warning for it, which
 * names the closest known name when one is close (Damerau-Levenshtein
 * distance, optimal string alignment, of the upper-cased names after
 * NEXAR_: at most 3 edits and at most a third of the known suffix), and
 * returns 1; else returns 0. The value is never quoted (it may be a
 * secret). Pure; thread-safe.
 */
int nexar__env_unknown(const char *entry, char *msg, size_t len);
/* Logs the warning of nexar__env_unknown at WARN (subsystem ENV) for every
 * unknown NEXAR_* variable of the environment, the first time it is called
 * in the process (nexar__params_load calls it); later calls do nothing. */
void nexar__env_warn_unknown(void);

typedef struct nexar__params {
#define NEXAR__PARAM_FIELD_INT(f) int64_t f;
#define NEXAR__PARAM_FIELD_STR(f) const char *f;
#define NEXAR__PARAM_FIELD(type, f, env, def, lo, hi, help) \
  NEXAR__PARAM_FIELD_##type(f)
  NEXAR__PARAM_TABLE(NEXAR__PARAM_FIELD)
#undef NEXAR__PARAM_FIELD
  char strbuf[4096]; /* copies of string values */
  size_t strused;
} nexar__params_t;

/*
 * The settings every member of a job must share, X(field, env), in the
 * order of the job section's values (wire.h nexar__job_t;
 * docs/configuration.md, "Settings the job shares"): both ends of a
 * transfer cut and number it by them (collective steps, clear-to-send,
 * rendezvous and RPC parts, pipeline segments) and a destination bounds
 * what its origins send by its own (docs/topology.md section 10); every
 * member forms the same mesh, eager or lazy (NEXAR_MESH_LAZY_MIN). Rank
 * 0's values travel in the roster; every member adopts them.
 */
#define NEXAR__PARAM_JOB(X)                         \
  X(eager_bytes, "NEXAR_EAGER_BYTES")               \
  X(relay_credit_bytes, "NEXAR_RELAY_CREDIT_BYTES") \
  X(seg_bytes, "NEXAR_SEG_BYTES")                   \
  X(mesh_lazy_min, "NEXAR_MESH_LAZY_MIN")

struct nexar__job;
/* |p|'s values of the settings the job shares, into |job| (n set). */
void nexar__params_job_get(const nexar__params_t *p, struct nexar__job *job);
/*
 * Adopts the job's values |job| (as decoded: count and wire bounds
 * checked; n 0 changes nothing), those of rank |from|, on this process of
 * rank |rank|: every setting of NEXAR__PARAM_JOB whose value differs is
 * replaced and logged at INFO, naming the setting, both values and both
 * ranks. Returns NEXAR_OK; NEXAR_ERR_PROTO with |err| naming the setting
 * when a value is outside its range (nothing is changed then); or
 * NEXAR_ERR_INVALID_ARG when nexar__params_check refuses the result (|err|
 * says which value came from the job). Not thread-safe: called once, at
 * formation, before any link to a peer.
 */
int nexar__params_job_adopt(nexar__params_t *p, const struct nexar__job *job,
                            int rank, int from, char *err, size_t errlen);

/* Smallest NEXAR_UDP_PAYLOAD other than 0: QUIC's minimum datagram size. */
#define NEXAR__UDP_PAYLOAD_MIN 1200

/*
 * Parses |s| as a whole decimal integer in [lo, hi] into *out: an optional
 * sign and the digits 0-9, nothing else (no spaces, no 0x, no trailing
 * text). A leading zero ("010") is refused: settings were once read with
 * strtoll base 0, which took "010" for 8. Every NEXAR_* integer and every
 * numeric option of the programs is parsed with this. Returns 0, or one of
 * the negative NEXAR__DEC_* codes (*out unchanged).
 */
enum {
  NEXAR__DEC_SYNTAX = -1, /* empty, not decimal, or trailing text */
  NEXAR__DEC_ZERO = -2,   /* a leading zero, as in "010" */
  NEXAR__DEC_RANGE = -3   /* outside [lo, hi] (or int64) */
};
int nexar__parse_dec(const char *s, int64_t lo, int64_t hi, int64_t *out);
/*
 * Writes to |err| why nexar__parse_dec refused |s| (result |rc|) for the
 * setting or option |name|, e.g. "NEXAR_WORLD_SIZE='0x10' is not a decimal
 * integer ...". At most 64 bytes of |s| are quoted.
 */
void nexar__parse_dec_error(int rc, const char *name, const char *s, int64_t lo,
                            int64_t hi, char *err, size_t errlen);

struct nexar_config;
/*
 * Fills |p| from the defaults, then the environment, then |cfg| (may be
 * NULL). Checks each setting on its own: integers are strictly decimal and
 * in range (NEXAR_UDP_PAYLOAD: 0 or 1200 .. 65507), a variable set to the
 * empty string is refused, and a secret given twice (NEXAR_SECRET and
 * NEXAR_SECRET_FILE, or the config fields secret and secret_file, in any
 * mix) is refused. Returns 0, or NEXAR_ERR_INVALID_ARG with |err| naming
 * the variable and what it accepts.
 */
int nexar__params_load(nexar__params_t *p, const struct nexar_config *cfg,
                       char *err, size_t errlen);
/*
 * The checks of a worker's configuration that look past one integer, run
 * once by nexar_init after nexar__params_load and before any socket or
 * thread exists: the rules between settings (heartbeat timeout above the
 * interval, idle timeout 0 or at least the heartbeat timeout, relay window
 * at least the eager size, min world size at most a non-zero max), the
 * syntax of NEXAR_SEED, NEXAR_BIND_ADDR and NEXAR_ADVERTISE_ADDR, the
 * K of NEXAR_TOPOLOGY=kregular:K, the words of NEXAR_REDUCE_ISA and
 * NEXAR_QUIC_LOG, and the logging variables (nexar__log_check). Returns 0,
 * or NEXAR_ERR_INVALID_ARG with |err| naming the variable(s).
 */
int nexar__params_check(const nexar__params_t *p, char *err, size_t errlen);
/* Logs the effective configuration at INFO (secrets shown as "(set)"). */
void nexar__params_dump(const nexar__params_t *p);
/* Prints the table as help text (for --help of the programs). */
void nexar__params_help(void *file);

#endif /* NEXAR_PARAM_H */
