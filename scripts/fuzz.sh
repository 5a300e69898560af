#!/usr/bin/env bash
# Builds memplan's libFuzzer targets (clang, ASan + UBSan, in build-fuzz/)
# and runs them all for SECONDS in total (default 60), each on a copy of its
# seed corpus (tests/fuzz/corpus/TARGET). Fails on any crash, leak, timeout
# or invalid plan; the input that did it is saved in
# build-fuzz/artifacts/ and should become a regression input in
# tests/fuzz/regressions/TARGET/ (replayed by every CTest run).
#   scripts/fuzz.sh [SECONDS]
# MEMPLAN_JOBS sets the build's parallelism; MEMPLAN_FUZZ_BUILD the tree.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_TOTAL="${1:-60}"
BUILD="${MEMPLAN_FUZZ_BUILD:-build-fuzz}"
JOBS="${MEMPLAN_JOBS:-$(nproc)}"
TARGETS=(plan_request_fuzz request_json_fuzz minimalloc_csv_fuzz
         onnx_import_fuzz tflite_import_fuzz names_fuzz)

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMPLAN_FUZZ=ON \
    -DMEMPLAN_SANITIZE=address,undefined >/dev/null
fi
cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}"

per_target=$(( SECONDS_TOTAL / ${#TARGETS[@]} ))
[ "$per_target" -ge 1 ] || per_target=1
mkdir -p "$BUILD/artifacts"
failed=()
for target in "${TARGETS[@]}"; do
  work="$BUILD/corpus/$target"
  mkdir -p "$work"
  cp -n tests/fuzz/corpus/"$target"/* "$work"/ 2>/dev/null || true
  regressions=()
  if [ -d "tests/fuzz/regressions/$target" ]; then
    regressions=("tests/fuzz/regressions/$target")
  fi
  echo "fuzz: $target for ${per_target}s"
  # libFuzzer's own -timeout can deadlock when its alarm interrupts the
  # allocator (its report allocates): `timeout` ends a target that overruns
  # its time by a minute, and that counts as a finding (a slow input).
  if ! ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
       UBSAN_OPTIONS=print_stacktrace=1 \
       timeout --kill-after=5 $(( per_target + 60 )) \
       "$BUILD/fuzz/$target" -max_total_time="$per_target" -timeout=10 \
         -rss_limit_mb=3072 -max_len=65536 -print_final_stats=1 \
         -artifact_prefix="$BUILD/artifacts/$target-" "$work" \
         "${regressions[@]}" \
         >"$BUILD/artifacts/$target.log" 2>&1; then
    failed+=("$target")
    tail -n 40 "$BUILD/artifacts/$target.log" >&2
  else
    grep -E "^stat::number_of_executed_runs|^#[0-9]+.*DONE" \
      "$BUILD/artifacts/$target.log" | tail -n 1 || true
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (inputs in $BUILD/artifacts/)" >&2
  exit 1
fi
echo "fuzz: all ${#TARGETS[@]} targets ran ${per_target}s without a finding"
