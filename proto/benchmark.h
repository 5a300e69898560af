// The Benchmark RPC's work: turn a graph (or a synthetic workload) into an
// allocation trace, replay it on each dynamic allocator and on the static
// plan (one arena from the server's BFC allocator, with every tensor's bytes
// checked by pattern), and report what each one needed.
//
//   absl::StatusOr<v1::BenchmarkResponse> r =
//       api::RunBenchmark(request, limits, &arena_bfc, &pool, &cancel);
#ifndef MEMPLAN_PROTO_BENCHMARK_H_
#define MEMPLAN_PROTO_BENCHMARK_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "allocators/allocator.h"
#include "allocators/trace.h"
#include "memplan/v1/memplan.pb.h"
#include "planner/cancel.h"
#include "planner/worker_pool.h"
#include "proto/convert.h"

namespace memplan::api {

struct BenchmarkLimits {
  Limits plan;  // limits of the static plan's request
  // The most bytes one replay may hold at once (the trace's naive sum);
  // also the BFC allocators' memory limit. Default 1 GiB.
  int64_t max_bytes = int64_t{1} << 30;
  // The most trace events (allocations + frees) a request may replay, over
  // all allocators and repetitions. Default 10,000,000.
  int64_t max_ops = 10'000'000;
  // Wall time for the whole request. Default 30 s.
  absl::Duration max_time = absl::Seconds(30);
};

// Called after each allocator's run with its name and figures (metrics).
using ReplayObserver =
    std::function<void(const std::string&, const allocators::ReplayResult&)>;

// INVALID_ARGUMENT for a bad graph, workload or allocator name;
// RESOURCE_EXHAUSTED (before any memory is taken) over `limits`;
// DEADLINE_EXCEEDED past the time limit or the call's deadline; DATA_LOSS if
// the static plan's pattern check fails (an overlap the verifier missed).
[[nodiscard]] absl::StatusOr<v1::BenchmarkResponse> RunBenchmark(
    const v1::BenchmarkRequest& request, const BenchmarkLimits& limits,
    allocators::Allocator* arena_source, planner::WorkerPool* pool,
    const planner::CancelToken* cancel, const ReplayObserver& observer);

}  // namespace memplan::api

#endif  // MEMPLAN_PROTO_BENCHMARK_H_
