#!/bin/bash
# The scaling table of BENCHMARKS.md ("One large plan on many cores"):
# 1,000,000 random buffers through the whole pipeline on 0 (one core, no
# workers), 1, 2, 4, 8 and 16 workers, median of 3 runs each, one process
# per worker count (so each peak RSS is its own); a random graph of 300,000
# ops planned from the graph on one core, 2, 4 and 16 workers (liveness
# splits its hash and atomic passes from 4 threads); every trace of
# a folder on 16 workers (and both again with one and two malloc arenas,
# and the 1M plan on 4 KiB pages on one core, 2 and 16 workers); the peak
# window's variants alone on 1, 2 and 3 threads; the shared objects alone
# on 1 and 16 threads; a plan whose thread budget (--max_threads) is 4 of
# 16 workers; and the Plan RPC against an empty RPC with 2 and 16 workers.
# Prints Markdown. About 2-3 minutes on 16 cores.
#
#   bench/scaling.sh DIR [TRACES_DIR]
#
# DIR holds release binaries plan_bench and rps_bench, in DIR or DIR/bin;
# when DIR/lib/ld-linux-x86-64.so.2 exists (scripts/bundle_release.sh), they
# run through it: lib/ld-linux-x86-64.so.2 --library-path lib BIN.
# TRACES_DIR defaults to bench/data/traces next to this script.
set -euo pipefail
if [[ $# -lt 1 ]]; then
  echo "usage: $0 DIR [TRACES_DIR]" >&2
  exit 64
fi
dir=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
traces=${2:-$here/data/traces}
bin=$dir
[[ -x $dir/bin/plan_bench ]] && bin=$dir/bin

# Runs binary $1 with the remaining arguments.
run() {
  local b=$bin/$1
  shift
  if [[ -x $dir/lib/ld-linux-x86-64.so.2 ]]; then
    "$dir/lib/ld-linux-x86-64.so.2" --library-path "$dir/lib" "$b" "$@"
  else
    "$b" "$@"
  fi
}

cores=$(nproc)
echo "## Scaling: $(date -u +%Y-%m-%d), $cores cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "1,000,000 random buffers (plan_bench scale, best_fit_size), median of 3 runs:"
echo
echo "| workers | wall s | CPU s | speedup | peak RSS MB | RSS vs one core | stages (ms) |"
echo "|---|---|---|---|---|---|---|"
base_wall=""
base_rss=""
for t in 0 1 2 4 8 16; do
  # | buffers | workers | wall | CPU | RSS | ratio | - | - | stages |
  row=$(run plan_bench scale --runs=3 --threads="$t" 1000000 | tail -1)
  wall=$(echo "$row" | cut -d'|' -f4 | tr -d ' ')
  cpu=$(echo "$row" | cut -d'|' -f5 | tr -d ' ')
  rss=$(echo "$row" | cut -d'|' -f6 | tr -d ' ')
  stages=$(echo "$row" | cut -d'|' -f10 | sed 's/^ *//;s/ *$//;s/ ms//g')
  [[ -z $base_wall ]] && base_wall=$wall && base_rss=$rss
  speedup=$(awk -v a="$base_wall" -v b="$wall" 'BEGIN{printf "%.2fx", a/b}')
  growth=$(awk -v a="$base_rss" -v b="$rss" 'BEGIN{printf "%+.0f%%", 100*(b-a)/a}')
  label=$t
  [[ $t == 0 ]] && label="0 (one core)"
  echo "| $label | $wall | $cpu | $speedup | $rss | $growth | $stages |"
done
echo
echo "A random graph of 300,000 ops planned from the graph (plan_bench graph, liveness included), median of 3:"
echo
echo '```'
for t in 0 2 4 16; do
  run plan_bench graph --runs=3 --threads="$t" 300000 | tail -1
done
echo '```'
echo
echo "Traces ($traces) planned by default on 16 workers and on one core, median of 3:"
echo
echo '```'
run plan_bench traces --threads=16 "$traces"/*.csv
run plan_bench traces --threads=0 "$traces"/*.csv
echo '```'
echo
echo "The same on 16 workers with one and two malloc arenas (the default on 16 workers is eight: base::KeptMemoryArenas, one for every two workers):"
echo
echo '```'
for a in 1 2; do
  echo "arenas $a:"
  run plan_bench scale --runs=3 --threads=16 --malloc_arenas=$a 1000000 | tail -1
  run plan_bench traces --threads=16 --malloc_arenas=$a "$traces"/*.csv | tail -n +3
done
echo '```'
echo
echo "The 1M plan with the kept heap on 4 KiB pages (--huge_pages=0; the default asks for transparent huge pages as memplan plan does, $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo 'no THP')):"
echo
echo '```'
for t in 0 2 16; do
  run plan_bench scale --runs=3 --threads=$t --huge_pages=0 1000000 | tail -1
done
echo '```'
echo
echo "The peak window's default variants alone, as placed beside the heuristics (plan_bench peak), on 1, 2 and 3 threads:"
echo
echo '```'
for t in 1 2 3; do
  run plan_bench peak --threads=$t "$traces"/S_1.csv "$traces"/pangu_2.6B.csv
done
echo '```'
echo
echo "The shared objects alone (plan_bench pools: each overlap search) on 1 and 16 threads:"
echo
echo '```'
for t in 1 16; do
  run plan_bench pools --threads=$t "$traces"/*.csv
done
echo '```'
echo
echo "A plan whose thread budget is 4 of 16 workers (--max_threads=4, PlanOptions::max_threads; handed work waits for one of its places):"
echo
echo '```'
run plan_bench scale --runs=3 --threads=16 --max_threads=4 1000000 | tail -1
run plan_bench traces --threads=16 --max_threads=4 "$traces"/*.csv | tail -n +3
echo '```'
echo
echo "Plan RPC against an empty RPC (rps_bench, 193-tensor graph, auto, 2 client threads per worker):"
echo
echo '```'
for w in 2 16; do
  echo "workers $w:"
  run rps_bench 2 $((2 * w)) 3 auto "$w" | tail -2
done
echo '```'
