# memplan-server image. Two stages: a debian:bookworm builder that installs
# the build packages with scripts/setup.sh, builds Release and runs the unit
# tests; a debian:bookworm-slim runtime with only the shared libraries the
# two binaries load, running as uid 10001.
#
#   docker build -t memplan .
#
# tests/container/run.sh --prebuilt builds the runtime stage alone (from
# "FROM debian:bookworm-slim" on) with the binaries CI built on Debian 12,
# each `COPY --from=build /out/X` read as `COPY prebuilt/X`: keep those
# two COPY lines in that form.
#   docker run -p 127.0.0.1:50051:50051 -p 127.0.0.1:9464:9464 memplan
#   memplan health --server 127.0.0.1:50051
#
# Extra arguments go to memplan-server: `docker run memplan --max_in_flight=32`.
# Without a Docker engine: tests/container/run.sh builds and runs this file
# with podman (see deploy/README.md).

FROM debian:bookworm AS build
# Build parallelism; empty means one job per core.
ARG MEMPLAN_JOBS=
# The source's git commit (the context has no .git): the version the
# binaries print and the plan cache keys by, so that replicas of two images
# never share entries. `--build-arg MEMPLAN_GIT_COMMIT=$(git rev-parse
# --short=12 HEAD)`; without it the version says "unknown".
ARG MEMPLAN_GIT_COMMIT=
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /src
COPY scripts/setup.sh scripts/setup.sh
RUN scripts/setup.sh --build-only && rm -rf /var/lib/apt/lists/*
COPY . .
RUN JOBS="${MEMPLAN_JOBS:-$(nproc)}" \
 && cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DMEMPLAN_BUILD_BENCH=OFF -DMEMPLAN_GIT_COMMIT="$MEMPLAN_GIT_COMMIT" \
 && cmake --build /build -j "$JOBS"
# The unit tests: the libraries' own folders (tests/ holds the end-to-end
# tests, which need the deploy tools and run in CI instead).
RUN JOBS="${MEMPLAN_JOBS:-$(nproc)}" \
 && for d in base planner allocators proto server client; do \
      [ ! -d "/build/$d" ] || \
        ctest --test-dir "/build/$d" --output-on-failure -j "$JOBS" || exit 1; \
    done
# The Debian packages owning every shared library the binaries load; a
# library no package owns fails the build.
RUN set -e; mkdir -p /out \
 && cp /build/bin/memplan-server /build/bin/memplan /out/ \
 && strip /out/memplan-server /out/memplan \
 && scripts/runtime_packages.sh /out/memplan-server /out/memplan \
      > /out/runtime-packages \
 && cat /out/runtime-packages

FROM debian:bookworm-slim
ENV DEBIAN_FRONTEND=noninteractive
COPY --from=build /out/runtime-packages /tmp/runtime-packages
RUN apt-get update -qq \
 && xargs -a /tmp/runtime-packages \
      apt-get install -y -qq --no-install-recommends \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /tmp/runtime-packages \
 && groupadd --system --gid 10001 memplan \
 && useradd --system --uid 10001 --gid 10001 --no-create-home \
      --home-dir /nonexistent --shell /usr/sbin/nologin memplan
COPY --from=build /out/memplan-server /out/memplan /usr/local/bin/
# Large plans touch hundreds of MB of fresh arrays: malloc backs its large
# blocks with transparent huge pages; whether that helps depends on the host
# (BENCHMARKS.md, "Placement cost and scale"). Ignored where THP is off.
ENV GLIBC_TUNABLES=glibc.malloc.hugetlb=1
# Numeric, so Kubernetes' runAsNonRoot can verify it.
USER 10001:10001
# gRPC (Plan, Benchmark, grpc.health.v1, reflection) and Prometheus /metrics.
EXPOSE 50051 9464
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/memplan", "health", "--server", "127.0.0.1:50051"]
# SIGTERM (docker stop, Kubernetes): NOT_SERVING, drain for --drain_seconds,
# calls in progress end within --grace_seconds, exit 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/memplan-server", "--address=0.0.0.0:50051", \
            "--metrics_address=0.0.0.0:9464"]
