#!/usr/bin/env bash
# memplan as a library: installs the build tree into a temporary prefix,
# builds examples/cpp_package against it with find_package(memplan CONFIG)
# and the same program with pkg-config, and runs both: the paper's eight
# buffers must plan to 124 bytes, the lower bound.
#   tests/install/install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$1"
source="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -f "$tmp/prefix/lib/cmake/memplan/memplanConfig.cmake"
test -f "$tmp/prefix/include/memplan/planner/planner.h"
test -f "$tmp/prefix/include/memplan/planner/exact/exact_solver.h"
test -f "$tmp/prefix/include/memplan/base/cancel.h"
test -f "$tmp/prefix/lib/pkgconfig/memplan.pc"

cmake -S "$source/examples/cpp_package" -B "$tmp/app" -G Ninja \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/app" >/dev/null
out="$("$tmp/app/plan_buffers")"
echo "$out"
grep -qx "arena 124 lower bound 124" <<<"$out"

# The same program built by hand with pkg-config.
flags="$(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs memplan)"
# shellcheck disable=SC2086
g++ -o "$tmp/by_pkg_config" "$source/examples/cpp_package/main.cc" $flags
"$tmp/by_pkg_config" | grep -qx "arena 124 lower bound 124"
echo "install: CMake package and pkg-config both build and plan"
