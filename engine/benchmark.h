// The Benchmark use case: a graph, a buffer list, a model file or a
// synthetic workload becomes an allocation trace (trace_bridge.h), replayed
// on each dynamic allocator and on the static plan (one arena per call, per
// memory pool, with every tensor's bytes checked by pattern), and the
// figures are compared. Every limit (bytes, events, seconds) is judged from
// the request before any work and enforced during every replay; what a
// call takes is given back when it ends.
//
//   absl::StatusOr<v1::BenchmarkResponse> r = engine::RunBenchmark(
//       request, engine::BenchmarkLimits{}, &workers, &cancel, nullptr);
#ifndef MEMPLAN_ENGINE_BENCHMARK_H_
#define MEMPLAN_ENGINE_BENCHMARK_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "allocators/trace.h"
#include "base/cancel.h"
#include "base/worker_pool.h"
#include "engine/plan.h"
#include "memplan/v1/memplan.pb.h"

namespace memplan::engine {

struct BenchmarkLimits {
  Limits plan;  // limits of the static plan's request
  // The most bytes one replay may hold at once (the trace's peak of live
  // bytes, and the static plan's arena); also the memory limit of the BFC
  // allocators. Default 1 GiB.
  int64_t max_bytes = int64_t{1} << 30;
  // The most trace events (allocations + frees) a request may replay, over
  // all allocators and repetitions. Default 10,000,000.
  int64_t max_ops = 10'000'000;
  // Wall time for the whole request, replays included. Default 30 s.
  absl::Duration max_time = absl::Seconds(30);
};

// What one replay measured (allocators/trace.h), for callers that only
// include the engine.
using ReplayFigures = allocators::ReplayResult;

// Called after each allocator's run with its name and figures (metrics).
using ReplayObserver =
    std::function<void(const std::string&, const ReplayFigures&)>;

// The allocators a request may name: the dynamic ones, then "static_plan".
std::vector<std::string> BenchmarkAllocatorNames();

// What a request naming no allocators gets: all of them but "mmap" (one
// file per block: milliseconds per allocation on a disk; ask for it).
std::vector<std::string> DefaultBenchmarkAllocators();

// Where a static plan's arena may come from: "bfc", "mmap", "recurse".
std::vector<std::string> ArenaAllocatorNames();

// The request's small fields, checked as RunBenchmark checks them, before
// any input is read or built: exactly one source, the workload's name (when
// it has one), repetitions and series points in range, the allocators' and
// the arena allocator's names. INVALID_ARGUMENT naming the field.
[[nodiscard]] absl::Status CheckBenchmarkFields(
    const v1::BenchmarkRequest& request);

// INVALID_ARGUMENT for a bad graph, workload, allocator or arena name;
// RESOURCE_EXHAUSTED, naming the limit, before any replay memory is taken
// when the request is over `limits` (a workload_size over
// limits.plan.max_tensors included, checked before the workload is made);
// an allocator listed more than once runs once (one row, where it first
// appears), so repeats add no work; RESOURCE_EXHAUSTED past
// limits.max_time (naming it: the same request would stop again) and
// DEADLINE_EXCEEDED past the call's deadline (replays stop within 1024
// events or 10 ms); DATA_LOSS if
// the static plan's pattern check fails (an overlap the verifier missed).
// `workers` and `observer` may be null.
[[nodiscard]] absl::StatusOr<v1::BenchmarkResponse> RunBenchmark(
    const v1::BenchmarkRequest& request, const BenchmarkLimits& limits,
    base::WorkerPool* workers, const base::CancelToken* cancel,
    const ReplayObserver& observer);

}  // namespace memplan::engine

#endif  // MEMPLAN_ENGINE_BENCHMARK_H_
