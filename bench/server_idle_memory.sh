#!/usr/bin/env bash
# What a memplan-server holds resident once idle after large plans, with and
# without --return_memory_when_idle, in the same run. For each setting: a
# server on 127.0.0.1:0 (metrics off), three plans of the scale benchmark's
# 1,000,000 random buffers through `memplan plan --server`, and the
# server's VmRSS at the end of each call, 1 s later and 6 s later; then the
# server is stopped by its PID.
#   bench/server_idle_memory.sh [BIN_DIR]   (default build/bin)
set -euo pipefail
BIN=${1:-build/bin}
WORK=$(mktemp -d)
SERVER_PID=
cleanup() {
  if [[ -n "$SERVER_PID" ]]; then kill "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

"$BIN"/plan_bench csv --generator=RandomProblem 1000000 >"$WORK/1m.csv"
echo "| --return_memory_when_idle | plan | client seconds | RSS at the end of the call (MB) | 1 s later (MB) | 6 s later (MB) |"
echo "|---|---|---|---|---|---|"
for setting in true false; do
  "$BIN"/memplan-server --address=127.0.0.1:0 --metrics_address= \
    --return_memory_when_idle="$setting" >"$WORK/out" 2>"$WORK/err" &
  SERVER_PID=$!
  for _ in $(seq 100); do
    grep -q listening "$WORK/out" && break
    sleep 0.1
  done
  port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/out")
  [[ -n "$port" ]] || { cat "$WORK/err"; exit 1; }
  for k in 1 2 3; do
    start=$(date +%s.%N)
    timeout 120 "$BIN"/memplan plan --server="127.0.0.1:$port" --format=csv \
      "$WORK/1m.csv" >/dev/null
    end=$(date +%s.%N)
    at_end=$(rss_kb "$SERVER_PID")
    sleep 1
    later=$(rss_kb "$SERVER_PID")
    sleep 5
    much_later=$(rss_kb "$SERVER_PID")
    printf '| %s | %d | %.2f | %d | %d | %d |\n' "$setting" "$k" \
      "$(echo "$end - $start" | bc)" $((at_end / 1024)) $((later / 1024)) \
      $((much_later / 1024))
  done
  kill "$SERVER_PID"
  wait "$SERVER_PID" || true
  SERVER_PID=
done
