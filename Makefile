# Thin wrapper over CMake for the README's commands.
BUILD ?= build
NP ?= 4
JOBS ?= $(shell nproc)

.PHONY: all deps build run run-ft test ft-campaign rpc-soak asan clean

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

clean:
	rm -rf $(BUILD) build-asan
