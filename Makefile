# Thin wrapper over CMake for the README's commands.
BUILD ?= build
NP ?= 4
JOBS ?= $(shell nproc)

PREFIX ?= /usr/local

.PHONY: all deps build run run-ft test ft-campaign scale-campaign elastic-soak \
  rpc-soak asan fuzz relay-stress lint \
  clean install deb

all: build

deps:
	@bash scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DNEXAR_WERROR=ON >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

# README command 1: the main job, data-parallel training on 4 processes.
run: build
	$(BUILD)/tools/nexar-run -n $(NP) -t 300 -- $(BUILD)/examples/ddp_digits

# The fault-tolerance demo: rank 2 is killed in epoch 3, the others go on.
run-ft: build
	NEXAR_RECOVERY=automatic NEXAR_HEARTBEAT_MS=200 \
	  NEXAR_HEARTBEAT_TIMEOUT_MS=2000 $(BUILD)/tools/nexar-run -n $(NP) -t 300 \
	  --tolerate-kill -- $(BUILD)/examples/ddp_digits --kill-rank 2 \
	  --kill-epoch 3

# README command 2: every test, each in its own process under a hard timeout.
test: build
	cd $(BUILD) && ctest -j2 --output-on-failure --timeout 600

# The randomized fault campaign (docs/testing.md): 60 trials of SIGKILL,
# SIGSTOP/SIGCONT and route loss under every recovery policy, at most about
# 10 minutes; not part of `make test`. NEXAR_CAMPAIGN_TRIALS, _SEED, _ONLY.
ft-campaign: deps
	@cmake -S . -B $(BUILD) -DNEXAR_WERROR=ON >/dev/null
	@cmake --build $(BUILD) -j$(JOBS) --target ft_campaign
	$(BUILD)/tests/ft_campaign

# Repeated starts at scale (docs/testing.md): 20 starts of 64 ranks with
# the full topology (lazy from 64 ranks), 0 failures; 20 with the eager mesh
# (NEXAR_MESH_LAZY_MIN=0); then 5 eager over QUIC. A few minutes on a
# 2-core machine; not part of `make test`. SCALE_N, SCALE_STARTS.
SCALE_N ?= 64
SCALE_STARTS ?= 20
scale-campaign: build
	bash tests/test_scale.sh $(BUILD)/tools/nexar-run $(BUILD)/tools/nexar-perf \
	  $(SCALE_N) $(SCALE_STARTS)
	NEXAR_MESH_LAZY_MIN=0 bash tests/test_scale.sh $(BUILD)/tools/nexar-run \
	  $(BUILD)/tools/nexar-perf $(SCALE_N) $(SCALE_STARTS)
	NEXAR_MESH_LAZY_MIN=0 bash tests/test_scale.sh $(BUILD)/tools/nexar-run \
	  $(BUILD)/tools/nexar-perf $(SCALE_N) 5 quic

# The elastic soak (docs/testing.md): 1,000 join/leave cycles on a world of
# 4, a long-lived member's RSS asserted flat within 2 MiB after warm-up;
# 30 s to 1 min on a 2-core machine; not part of `make test`. NEXAR_SOAK_CYCLES.
elastic-soak: deps
	@cmake -S . -B $(BUILD) -DNEXAR_WERROR=ON >/dev/null
	@cmake --build $(BUILD) -j$(JOBS) --target elastic_soak
	$(BUILD)/tests/elastic_soak

# Installs the library, headers, pkg-config and CMake files, tools and man
# pages under PREFIX (docs/installing.md); DESTDIR is honoured.
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# A Debian package of the same files, in $(BUILD)/ (cpack -G DEB).
deb: build
	cd $(BUILD) && cpack -G DEB

# The RPC soak (docs/testing.md): about a million RPCs on 3 processes,
# retries on a revoked communicator included, every rank's RSS asserted
# flat; not part of `make test`. NEXAR_SOAK_CALLS sets the number.
rpc-soak: deps
	@cmake -S . -B $(BUILD) -DNEXAR_WERROR=ON >/dev/null
	@cmake --build $(BUILD) -j$(JOBS) --target rpc_soak
	$(BUILD)/tests/rpc_soak

# The AddressSanitizer/UndefinedBehaviorSanitizer build and test run.
asan: deps
	@cmake -S . -B build-asan -DNEXAR_WERROR=ON -DNEXAR_SANITIZE=ON \
	  -DNEXAR_TEST_TIMEOUT_MULTIPLIER=3 >/dev/null
	@cmake --build build-asan -j$(JOBS)
	cd build-asan && ctest -j2 --output-on-failure

# The relay stress (docs/topology.md section 10): random collective and
# point-to-point sequences over sparse topologies with minimal windows at
# 5 to 8 processes, every configuration for one seed (a hang fails with an
# op deadline naming it); `make test` runs the seeds that hung before the
# fixes. RELAY_SEED, RELAY_ROUNDS.
RELAY_SEED ?= 1
RELAY_ROUNDS ?= 12
relay-stress: deps
	@cmake -S . -B $(BUILD) -DNEXAR_WERROR=ON >/dev/null
	@cmake --build $(BUILD) -j$(JOBS) --target relay_stress
	$(BUILD)/tests/relay_stress $(RELAY_SEED) $(RELAY_ROUNDS)

# The fuzzing run (docs/testing.md, "Decoders and fuzzing"): every
# libFuzzer harness (tests/fuzz_*.c; needs clang) for FUZZ_SECONDS each,
# one at a time, on a copy of its corpus; what adds coverage is merged into
# tests/corpus/<name>/grown, which the corpus replay tests of `make test`
# run. About 40 minutes with the default; not part of `make test`.
FUZZ_SECONDS ?= 600
fuzz: deps
	@cmake -S . -B $(BUILD) -DNEXAR_WERROR=ON -DNEXAR_FUZZ=ON >/dev/null
	@cmake --build $(BUILD) -j$(JOBS) --target fuzzers
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash scripts/fuzz.sh $(BUILD)

# The lint (docs/testing.md, "Lint"): clang-format over every C/C++ file
# (also a test of `make test`, test_format) and clang-tidy with .clang-tidy
# over src/ and tools/ (about 3 minutes on 2 cores); not part of `make test`.
lint: deps
	bash scripts/lint.sh

clean:
	rm -rf $(BUILD) build-asan
