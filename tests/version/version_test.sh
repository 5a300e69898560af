#!/usr/bin/env bash
# cmake/version.cmake, which names the build (memplan --version) and keys
# the plan cache by it, on throwaway git trees: a clean checkout gives its
# commit, local changes to tracked files add "-dirty" (memplan-server
# then warns that other builds of the commit share its cache entries),
# untracked files do not, and a tree without git takes the commit the
# builder named, else "unknown".
#   tests/version/version_test.sh SOURCE_DIR [CMAKE]
set -euo pipefail
source="$1"
cmake="${2:-cmake}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# The tree without git must not find one above it (a TMPDIR in a checkout),
# and git here is plain git: no repository, hooks or signing of the
# caller's (a git hook running the tests, a developer's global config).
export GIT_CEILING_DIRECTORIES="$tmp"
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_COMMON_DIR
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1

# The commit line version.cmake writes for the tree $1 (and COMMIT $2).
commit_of() {
  rm -f "$tmp/version.h"
  "$cmake" -DSOURCE_DIR="$1" -DOUTPUT="$tmp/version.h" -DVERSION=1.2.3 \
    -DBUILD_TYPE=Release -DCOMMIT="${2:-}" -P "$source/cmake/version.cmake"
  grep '^#define MEMPLAN_GIT_COMMIT ' "$tmp/version.h" | cut -d'"' -f2
}

expect() {  # expect WHAT GOT WANT
  if [[ "$2" != "$3" ]]; then
    echo "FAIL: $1: got '$2', want '$3'" >&2
    exit 1
  fi
  echo "ok: $1: $2"
}

tree="$tmp/tree"
mkdir "$tree"
git -C "$tree" init -q
echo one >"$tree/file.txt"
git -C "$tree" add file.txt
git -C "$tree" -c user.name=test -c user.email=test@example.invalid \
  commit -q -m one
head="$(git -C "$tree" rev-parse --short=12 HEAD)"

expect "a clean checkout" "$(commit_of "$tree")" "$head"
echo untracked >"$tree/other.txt"
expect "an untracked file" "$(commit_of "$tree")" "$head"
echo two >"$tree/file.txt"
expect "a changed tracked file" "$(commit_of "$tree")" "$head-dirty"
expect "a named commit does not hide git's" \
  "$(commit_of "$tree" 0123456789ab)" "$head-dirty"

plain="$tmp/plain"
mkdir "$plain"
expect "no git, a named commit" "$(commit_of "$plain" 0123456789ab)" \
  0123456789ab
expect "no git, none named" "$(commit_of "$plain")" unknown

grep -qx '#define MEMPLAN_VERSION "1.2.3"' "$tmp/version.h"
grep -qx '#define MEMPLAN_BUILD_TYPE "Release"' "$tmp/version.h"
echo "ok: version and build type"
