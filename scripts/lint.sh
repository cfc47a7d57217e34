#!/usr/bin/env bash
# The tree's lint (docs/testing.md, "Lint"): clang-format over every C and
# C++ file (the .clang-format style; any change it would make is an error),
# then, unless --format-only, clang-tidy over src/ and tools/ with the
# checks of .clang-tidy (every finding an error), from the compile commands
# of a configured build folder (default build-lint, configured here).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
dirs="bench bindings examples include mpi src tests tools"
# shellcheck disable=SC2086
files=$(find $dirs \( -name '*.c' -o -name '*.h' -o -name '*.cc' -o -name '*.cpp' \) | sort)
# shellcheck disable=SC2086
clang-format --dry-run --Werror $files
echo "lint: clang-format: $(echo "$files" | wc -l) files clean"
[ "$mode" = "--format-only" ] && exit 0
build=${LINT_BUILD:-build-lint}
cmake -S . -B "$build" -DNEXAR_PYTHON=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
srcs=$(find src tools -name '*.c' | sort)
# shellcheck disable=SC2086
printf '%s\n' $srcs | xargs -P "$(nproc)" -n 4 clang-tidy -p "$build" --quiet
echo "lint: clang-tidy: $(echo "$srcs" | wc -l) files clean"
