#!/usr/bin/env bash
# Installs what nexar needs to build and test, from Debian 12 packages, when
# it is missing. Safe to run repeatedly: it does nothing when all is there.
set -euo pipefail
pkgs=(gcc g++ make cmake pkg-config libc6-dev libngtcp2-dev libngtcp2-crypto-gnutls-dev
      libgnutls28-dev nettle-dev libcmocka-dev zlib1g-dev iproute2
      # The libFuzzer harnesses (docs/testing.md): their corpus replays run
      # in `make test` when clang links -fsanitize=fuzzer; `make fuzz`.
      clang libclang-rt-14-dev
      # The lint (docs/testing.md): the format check runs in `make test`.
      clang-format clang-tidy
      # Packaging (docs/installing.md): man pages, the .deb, static links.
      help2man dpkg-dev file libunistring-dev
      # Launchers (docs/launching.md): PMIx headers, Open MPI's mpirun, and a
      # single-node Slurm with munge for test_mpirun and test_slurm.
      libpmix-dev openmpi-bin slurm-wlm munge
      # The Python binding (docs/python.md): headers of Debian's python3,
      # numpy for its tests and examples.
      python3-dev python3-numpy
      # The torch.distributed backend (docs/torch.md): Debian's torch, its
      # C++ headers and pybind11 (the extension shares torch._C's types).
      python3-torch libtorch-dev pybind11-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
