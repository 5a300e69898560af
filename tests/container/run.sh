#!/usr/bin/env bash
# Builds the top-level Dockerfile and runs the image for real, without a
# Docker engine: rootful podman with chroot isolation, on debian:bookworm and
# debian:bookworm-slim base images made here with debootstrap (cached).
#
#   tests/container/run.sh               set up, build, run, check, clean up
#   tests/container/run.sh --prebuilt    the same with the runtime stage only,
#                                        from the host's build/bin binaries
#                                        (what CI runs: minutes, not 30+)
#   tests/container/run.sh --bases-only  only make (or reuse) the base images
#   tests/container/run.sh --run-only    run and check the image built last
#
# Checks, through ports published on 127.0.0.1 only and the host's CLI:
# `memplan health`, a `memplan plan --server` of examples/resnet50.json
# whose JSON (without timings) must equal the in-process plan's, byte for
# byte, /metrics on the metrics port, the image's
# HEALTHCHECK, that memplan-server runs as a non-root uid, and a clean exit 0
# on SIGTERM (`podman stop`). It runs as deploy/k8s and docker-compose.yml
# run it: read-only root filesystem, every capability dropped, no new
# privileges. The container is removed on every exit path.
#
# Environment:
#   MEMPLAN_CONTAINER_CACHE  base-image tarballs (default
#                            /var/cache/memplan-container)
#   MEMPLAN_JOBS             build parallelism inside the image (default 1)
#   MEMPLAN_CLI              host CLI (default build/bin/memplan; built with
#                            scripts/dev.sh build if missing)
#   MEMPLAN_CONTEXT          "head" (default): build `git archive HEAD`, what
#                            a clone has; "worktree": the work tree as it is
#   MEMPLAN_DEBIAN_MIRROR    debootstrap mirror (default deb.debian.org)
# The whole multi-stage build takes 30+ minutes on 2 cores (BENCHMARKS.md,
# "Container image"); --prebuilt takes a few and runs in CI after the tests
# (scripts/dev.sh test).
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
CACHE=${MEMPLAN_CONTAINER_CACHE:-/var/cache/memplan-container}
JOBS=${MEMPLAN_JOBS:-1}
CLI=${MEMPLAN_CLI:-$ROOT/build/bin/memplan}
CONTEXT_MODE=${MEMPLAN_CONTEXT:-head}
MIRROR=${MEMPLAN_DEBIAN_MIRROR:-http://deb.debian.org/debian}
IMAGE=localhost/memplan:test
NAME=memplan-run-$$
WORK=$(mktemp -d /tmp/memplan-container.XXXXXX)

log() { echo "run.sh [$(date +%T) +${SECONDS}s] $*" >&2; }
fail() { log "FAIL: $*"; exit 1; }

if [ "$(id -u)" -ne 0 ]; then
  # Rootful podman: rootless would need subuid ranges and fuse-overlayfs.
  exec sudo -E "$0" "$@"
fi

# podman settings for this machine: no systemd, cgroup v1, no journald.
# podman's default nproc limit (this shell's hard limit) is above what
# conmon and runc get (podman caps its own at pid_max), and without
# CAP_SYS_RESOURCE runc cannot raise it: "error setting rlimit type 6".
# Use the smaller of the two.
NPROC=$(ulimit -Hu)
PID_MAX=$(cat /proc/sys/kernel/pid_max)
if [ "$NPROC" = unlimited ] || [ "$NPROC" -gt "$PID_MAX" ]; then NPROC=$PID_MAX; fi
cat >"$WORK/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=$NPROC:$NPROC"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
export CONTAINERS_CONF=$WORK/containers.conf

cleanup() {
  local rc=$?
  if podman container exists "$NAME" 2>/dev/null; then
    log "removing container $NAME"
    podman rm -f -t 5 "$NAME" >/dev/null 2>&1 || true
  fi
  rm -rf "$WORK"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

install_tools() {
  local missing=()
  for p in podman buildah debootstrap runc containernetworking-plugins \
      uidmap git python3; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

# debian:bookworm as Docker's official image is made: debootstrap
# --variant=minbase. debian:bookworm-slim: the same, plus the dpkg excludes
# and deletions Docker's slim variant applies (docs, man pages, locales).
make_bases() {
  local full=docker.io/library/debian:bookworm
  local slim=docker.io/library/debian:bookworm-slim
  mkdir -p "$CACHE"
  if [ ! -f "$CACHE/bookworm.tar" ] || [ ! -f "$CACHE/bookworm-slim.tar" ]; then
    local rootfs=$CACHE/rootfs
    rm -rf "$rootfs"
    log "debootstrap --variant=minbase bookworm from $MIRROR"
    debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" \
      >"$CACHE/debootstrap.log" 2>&1 ||
      { tail -20 "$CACHE/debootstrap.log" >&2; fail "debootstrap"; }
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin
    : >"$rootfs/etc/resolv.conf"
    tar -C "$rootfs" --numeric-owner -cf "$CACHE/bookworm.tar.tmp" .
    mv "$CACHE/bookworm.tar.tmp" "$CACHE/bookworm.tar"
    cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
EOF
    find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright \
      -not -type d -delete
    rm -rf "$rootfs"/usr/share/{groff,info,linda,lintian,locale,man}/*
    tar -C "$rootfs" --numeric-owner -cf "$CACHE/bookworm-slim.tar.tmp" .
    mv "$CACHE/bookworm-slim.tar.tmp" "$CACHE/bookworm-slim.tar"
    rm -rf "$rootfs"
    podman rmi -f "$full" "$slim" >/dev/null 2>&1 || true
  fi
  if ! podman image exists "$full"; then
    podman import --change 'CMD ["bash"]' "$CACHE/bookworm.tar" "$full" >/dev/null
  fi
  if ! podman image exists "$slim"; then
    podman import --change 'CMD ["bash"]' "$CACHE/bookworm-slim.tar" "$slim" >/dev/null
  fi
  log "base images: $(podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}' |
    grep debian | tr '\n' ' ')"
}

# The context of --prebuilt: the Dockerfile's runtime stage and prebuilt/
# (the host's stripped binaries and their packages), nothing else.
prebuilt_context() {
  local ctx=$WORK/prebuilt-context
  mkdir -p "$ctx/prebuilt"
  # The Dockerfile's runtime stage, its binaries read from prebuilt/.
  sed -n '/^FROM debian:bookworm-slim/,$p' "$ROOT/Dockerfile" |
    sed 's#^COPY --from=build /out/\([^ ]*\) /out/\([^ ]*\) #COPY prebuilt/\1 prebuilt/\2 #; s#^COPY --from=build /out/#COPY prebuilt/#' \
    >"$ctx/Dockerfile"
  grep -q '^FROM debian:bookworm-slim' "$ctx/Dockerfile" &&
    ! grep -q -- '--from=' "$ctx/Dockerfile" ||
    fail "the Dockerfile's runtime stage no longer has the form --prebuilt reads"
  cp "$(dirname "$CLI")/memplan-server" "$CLI" "$ctx/prebuilt/"
  strip "$ctx/prebuilt/memplan-server" "$ctx/prebuilt/memplan"
  "$ROOT/scripts/runtime_packages.sh" "$ctx/prebuilt/memplan-server" \
    "$ctx/prebuilt/memplan" >"$ctx/prebuilt/runtime-packages"
  echo "$ctx"
}

# The build context: the committed tree (default) or the work tree.
context_dir() {
  if [ "$CONTEXT_MODE" = worktree ]; then
    echo "$ROOT"
  else
    mkdir -p "$WORK/context"
    git -C "$ROOT" archive HEAD | tar -x -C "$WORK/context"
    echo "$WORK/context"
  fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Retries `memplan health` until it succeeds or 60 s pass.
wait_healthy() {
  local target=$1
  for _ in $(seq 120); do
    "$CLI" health --server "$target" >/dev/null 2>&1 && return 0
    podman container exists "$NAME" && [ "$(podman inspect -f '{{.State.Running}}' "$NAME")" = true ] ||
      { podman logs "$NAME" >&2 || true; fail "container exited"; }
    sleep 0.5
  done
  podman logs "$NAME" >&2 || true
  fail "server in the container never became healthy at $target"
}

run_and_check() {
  local gport mport target out local_out uid status exit_code
  gport=$(free_port)
  mport=$(free_port)
  target=127.0.0.1:$gport
  log "running $IMAGE as $NAME: gRPC on $target, metrics on 127.0.0.1:$mport"
  # No systemd here to run the HEALTHCHECK on a timer: the check runs once
  # below with `podman healthcheck run`.
  podman run -d --name "$NAME" --health-interval=disable \
    --read-only --cap-drop=ALL --security-opt=no-new-privileges \
    -p "127.0.0.1:$gport:50051" -p "127.0.0.1:$mport:9464" \
    "$IMAGE" >/dev/null
  wait_healthy "$target"
  log "ok: memplan health --server $target: $("$CLI" health --server "$target")"

  # The contract: a plan through the server is the in-process plan.
  out=$("$CLI" plan --server "$target" --format json --no_timings \
    examples/resnet50.json) || fail "memplan plan --server $target failed"
  local_out=$("$CLI" plan --format json --no_timings examples/resnet50.json) ||
    fail "in-process memplan plan failed"
  [ "$out" = "$local_out" ] ||
    fail "remote plan differs from in-process plan: $(diff <(echo "$out") \
      <(echo "$local_out") | head -5)"
  python3 -c 'import json,sys; p=json.load(sys.stdin); assert int(p["arena_size_bytes"]) > 0 and p["assignments"], list(p)' <<<"$out" ||
    fail "the plan has no arena or no assignments: $(head -c 300 <<<"$out")"
  log "ok: plan through the published port equals the in-process plan" \
    "($(wc -c <<<"$out") bytes of JSON)"

  curl -fsS "http://127.0.0.1:$mport/metrics" >"$WORK/metrics" ||
    fail "no /metrics on 127.0.0.1:$mport"
  grep -q '^grpc_server_handled_total{.*grpc_method="Plan"' "$WORK/metrics" ||
    fail "/metrics lacks grpc_server_handled_total for Plan"
  log "ok: /metrics through the published port ($(wc -l <"$WORK/metrics") lines)"

  podman healthcheck run "$NAME" >/dev/null ||
    fail "the image's HEALTHCHECK failed"
  log "ok: HEALTHCHECK ($(podman inspect -f '{{.Config.Healthcheck.Test}}' "$NAME"))"

  # The server is PID 1 in the container; its real and effective uid.
  # Mounted read-only (a non-root user could not write to / anyway, so
  # the mount options are what tells), and no capability left.
  local root_opts caps
  root_opts=$(podman exec "$NAME" awk '$2 == "/" {print $4}' /proc/1/mounts)
  [[ "$root_opts" == ro,* ]] || fail "root filesystem mounted '$root_opts'"
  caps=$(podman exec "$NAME" awk '/^Cap(Prm|Eff|Bnd):/ {print $2}' /proc/1/status | sort -u)
  [ "$caps" = 0000000000000000 ] || fail "memplan-server has capabilities: $caps"
  log "ok: root filesystem ${root_opts%%,*}, no capabilities (permitted, effective, bounding)"
  uid=$(podman exec "$NAME" sh -c 'grep ^Uid: /proc/1/status' | awk '{print $2, $3}')
  [ -n "$uid" ] && [ "${uid%% *}" != 0 ] && [ "${uid##* }" != 0 ] ||
    fail "memplan-server runs as uid '$uid'"
  log "ok: memplan-server runs as uid ${uid%% *} (user $(podman exec "$NAME" id -un 2>/dev/null || echo '?'))"

  podman stop -t 15 "$NAME" >/dev/null
  status=$(podman inspect -f '{{.State.Status}}' "$NAME")
  exit_code=$(podman inspect -f '{{.State.ExitCode}}' "$NAME")
  [ "$exit_code" = 0 ] || fail "exit code $exit_code after SIGTERM ($status)"
  log "ok: SIGTERM: $status, exit code 0"
  podman rm "$NAME" >/dev/null
  if pgrep -f "conmon.*$NAME" >/dev/null; then fail "conmon still running"; fi
  log "ok: container removed, no process left"
}

main() {
  local t0=$SECONDS t_bases t_build
  install_tools
  make_bases
  t_bases=$((SECONDS - t0))
  if [ "${1:-}" = --bases-only ]; then exit 0; fi
  if [ ! -x "$CLI" ]; then
    log "building the host CLI"
    MEMPLAN_JOBS=$JOBS nice -n 10 scripts/dev.sh build
  fi
  if [ "${1:-}" = --run-only ]; then
    podman image exists "$IMAGE" || fail "no $IMAGE: run without --run-only"
    run_and_check
    log "PASS (run only): $((SECONDS - t0))s"
    exit 0
  fi
  local ctx
  if [ "${1:-}" = --prebuilt ]; then
    [ -x "$(dirname "$CLI")/memplan-server" ] || fail "no memplan-server beside $CLI"
    ctx=$(prebuilt_context)
    log "podman build --isolation chroot (runtime stage, prebuilt binaries" \
      "of $(dirname "$CLI"))"
  else
    ctx=$(context_dir)
    log "podman build --isolation chroot (context: $CONTEXT_MODE, jobs $JOBS)"
  fi
  nice -n 10 podman build --isolation chroot --pull=never --format docker \
    --build-arg "MEMPLAN_JOBS=$JOBS" \
    --build-arg "MEMPLAN_GIT_COMMIT=$(git -C "$ROOT" rev-parse --short=12 HEAD)" \
    -t "$IMAGE" -f "$ctx/Dockerfile" "$ctx" \
    >"$WORK/build.log" 2>&1 || { tail -40 "$WORK/build.log" >&2; fail "podman build"; }
  cp "$WORK/build.log" "${TMPDIR:-/tmp}/memplan-container-build.log"
  t_build=$((SECONDS - t0 - t_bases))
  log "built $IMAGE: $(podman image inspect -f '{{.Size}}' "$IMAGE") bytes"
  run_and_check
  log "PASS: bases ${t_bases}s, build ${t_build}s, run $((SECONDS - t0 - t_bases - t_build))s, total $((SECONDS - t0))s"
}

main "$@"
