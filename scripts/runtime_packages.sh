#!/usr/bin/env bash
# Prints the Debian packages that own every shared library the given
# binaries load, one per line, sorted: what the runtime image installs.
# A library no package owns is an error (exit 1), so that the image never
# lacks one silently. Used by the Dockerfile's builder stage and by
# tests/container/run.sh for binaries built on the host.
#   scripts/runtime_packages.sh BINARY...
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 BINARY..." >&2; exit 64; }
libs=$(ldd "$@" | awk '$3 ~ /^\// {print $3}' | sort -u)
[ -n "$libs" ] || { echo "no shared libraries found in $*" >&2; exit 1; }
for lib in $libs; do
  owner=$(dpkg -S "$lib" 2>/dev/null || dpkg -S "/usr$lib" 2>/dev/null ||
          dpkg -S "${lib#/usr}" 2>/dev/null ||
          dpkg -S "$(readlink -f "$lib")" 2>/dev/null) ||
    { echo "no Debian package owns $lib" >&2; exit 1; }
  echo "${owner%%:*}"
done | sort -u
