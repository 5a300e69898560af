#!/usr/bin/env bash
# run_or_skip.sh TOOL [ARGS...]: runs TOOL, or exits 77 (CTest's skip code
# for the deploy tests) with a message when TOOL is not installed.
if ! command -v "$1" >/dev/null 2>&1; then
  echo "SKIPPED: $1 is not installed (scripts/setup.sh installs it from Debian)"
  exit 77
fi
exec "$@"
