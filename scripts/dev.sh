#!/usr/bin/env bash
# memplan's one entry point for a newcomer and for CI.
#   scripts/dev.sh serve [server flags]  set up, build, run memplan-server
#                                        on 127.0.0.1:50051
#   scripts/dev.sh test                  set up, build, run every test, check
#                                        the container image built from those
#                                        binaries; then the sanitizer build
#                                        (ASan + UBSan)
#                                        runs the unit and end-to-end tests
#                                        again and the fuzzers for a minute
#   scripts/dev.sh build                 set up and build only
#   scripts/dev.sh sanitize              set up, sanitizer build and tests
#   scripts/dev.sh bench                 set up, build, run the benchmarks
# Build trees: build/ (binaries in build/bin/) and build-sanitize/.
# MEMPLAN_JOBS sets parallelism; ccache is used when installed.
set -euo pipefail

cd "$(dirname "$0")/.."
JOBS="${MEMPLAN_JOBS:-$(nproc)}"
LAUNCHER=()
if command -v ccache >/dev/null 2>&1; then
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
fi
# Tests left out of the sanitizer run: they exercise no code of their own
# under the sanitizers (headless browser pictures, deploy files, the
# installed package, a real Prometheus) or need the Release-only parts
# (bench programs, the Python module).
SANITIZE_EXCLUDE='^(pictures|deploy|install|python)\.|Prometheus'

build() {
  scripts/setup.sh
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${LAUNCHER[@]}" \
    >/dev/null
  cmake --build build -j "$JOBS"
}

# clang with AddressSanitizer and UndefinedBehaviorSanitizer everywhere, and
# libFuzzer's coverage instrumentation, so the same tree runs the tests and
# the fuzzers (scripts/fuzz.sh).
sanitize() {
  CC=clang CXX=clang++ cmake -S . -B build-sanitize -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMPLAN_SANITIZE=address,undefined \
    -DMEMPLAN_FUZZ=ON -DMEMPLAN_BUILD_BENCH=OFF -DMEMPLAN_BUILD_PYTHON=OFF \
    "${LAUNCHER[@]}" >/dev/null
  cmake --build build-sanitize -j "$JOBS"
  (cd build-sanitize &&
    ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --output-on-failure -j "$JOBS" -E "$SANITIZE_EXCLUDE")
  MEMPLAN_FUZZ_BUILD=build-sanitize scripts/fuzz.sh 60
}

case "${1:-}" in
  serve)
    shift
    build
    # Large plans: malloc on transparent huge pages (docs/server.md, "Memory").
    export GLIBC_TUNABLES="${GLIBC_TUNABLES:-glibc.malloc.hugetlb=1}"
    exec build/bin/memplan-server --address=127.0.0.1:50051 "$@"
    ;;
  test)
    build
    (cd build && ctest --output-on-failure -j "$JOBS")
    # The image as deploy/ runs it, from the binaries just built.
    tests/container/run.sh --prebuilt
    sanitize
    ;;
  build)
    build
    ;;
  sanitize)
    scripts/setup.sh
    sanitize
    ;;
  bench)
    build
    exec scripts/run_benchmarks.sh
    ;;
  *)
    echo "usage: scripts/dev.sh serve|test|build|sanitize|bench" >&2
    exit 64
    ;;
esac
