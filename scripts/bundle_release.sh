#!/bin/bash
# Copies release binaries and every shared library they load into one
# folder, so they run on a machine without this project's packages:
#
#   scripts/bundle_release.sh OUT_DIR build/bin/plan_bench build/bin/rps_bench
#   OUT_DIR/run plan_bench scale 1000000     # on the other machine
#
# OUT_DIR/bin holds the binaries, OUT_DIR/lib the libraries and the dynamic
# loader; OUT_DIR/run starts a binary through that loader.
set -euo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: $0 OUT_DIR BINARY..." >&2
  exit 64
fi
out=$1
shift
mkdir -p "$out/bin" "$out/lib"
for bin in "$@"; do
  cp -f "$bin" "$out/bin/"
  ldd "$bin" | awk '/=> \//{print $3} /^\s*\/lib64/{print $1}' |
    while read -r lib; do cp -fL "$lib" "$out/lib/"; done
done
cp -fL /lib64/ld-linux-x86-64.so.2 "$out/lib/"
cat >"$out/run" <<'RUN'
#!/bin/bash
# Runs bin/$1 through the bundled loader and libraries.
here=$(cd "$(dirname "$0")" && pwd)
bin=$1
shift
exec "$here/lib/ld-linux-x86-64.so.2" --library-path "$here/lib" \
  "$here/bin/$bin" "$@"
RUN
chmod +x "$out/run"
du -sh "$out"
