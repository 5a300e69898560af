#!/usr/bin/env bash
# memplan's one entry point for a newcomer and for CI.
#   scripts/dev.sh serve [server flags]  set up, build, run memplan-server
#                                        on 127.0.0.1:50051
#   scripts/dev.sh test                  set up, build, run every test
#   scripts/dev.sh build                 set up and build only
#   scripts/dev.sh bench                 set up, build, run the benchmarks
# Build tree: build/ (binaries in build/bin/). MEMPLAN_JOBS sets parallelism.
set -euo pipefail

cd "$(dirname "$0")/.."
JOBS="${MEMPLAN_JOBS:-$(nproc)}"

build() {
  scripts/setup.sh
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j "$JOBS"
}

case "${1:-}" in
  serve)
    shift
    build
    exec build/bin/memplan-server --address=127.0.0.1:50051 "$@"
    ;;
  test)
    build
    cd build
    exec ctest --output-on-failure -j "$JOBS"
    ;;
  build)
    build
    ;;
  bench)
    build
    exec scripts/run_benchmarks.sh
    ;;
  *)
    echo "usage: scripts/dev.sh serve|test|build|bench" >&2
    exit 64
    ;;
esac
