#include "engine/benchmark.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "allocators/bfc_allocator.h"
#include "base/status.h"
#include "engine/trace_bridge.h"
#include "formats/model.h"
#include "planner/planner.h"
#include "proto/convert.h"

namespace memplan::engine {
namespace {

constexpr char kStatic[] = "static_plan";
constexpr int kDefaultWorkloadSize = 1000;
constexpr int kMaxRepetitions = 100;
constexpr int kMaxSeriesPoints = 4096;
constexpr int kLarsonSlots = 64;

// The allocators to run, checked against the known names; a name listed
// more than once runs once, where it first appears.
absl::StatusOr<std::vector<std::string>> ChooseAllocators(
    const v1::BenchmarkRequest& request) {
  const std::vector<std::string> known = BenchmarkAllocatorNames();
  if (request.allocators().empty()) return DefaultBenchmarkAllocators();
  std::vector<std::string> chosen;
  for (const std::string& name : request.allocators()) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return Invalid("unknown allocator '", api::Clip(name),
                     "'; known: ", absl::StrJoin(known, ", "));
    }
    if (std::find(chosen.begin(), chosen.end(), name) == chosen.end()) {
      chosen.push_back(name);
    }
  }
  return chosen;
}

// Checks the request's shape and small fields, before anything is built.
absl::Status CheckRequest(const v1::BenchmarkRequest& request) {
  const int sources = request.has_graph() + (request.buffers_size() > 0) +
                      request.has_model() + !request.workload().empty();
  if (sources != 1) {
    return Invalid(
        "a benchmark request needs exactly one of graph, buffers, model or "
        "workload");
  }
  if (request.repetitions() < 0 || request.repetitions() > kMaxRepetitions) {
    return Invalid("repetitions ", request.repetitions(), " is outside 0..",
                   kMaxRepetitions);
  }
  if (request.series_points() < 0 ||
      request.series_points() > kMaxSeriesPoints) {
    return Invalid("series_points ", request.series_points(), " is outside 0..",
                   kMaxSeriesPoints);
  }
  const std::vector<std::string> arenas = ArenaAllocatorNames();
  if (!request.arena_allocator().empty() &&
      std::find(arenas.begin(), arenas.end(), request.arena_allocator()) ==
          arenas.end()) {
    return Invalid("unknown arena_allocator '",
                   api::Clip(request.arena_allocator()),
                   "'; known: ", absl::StrJoin(arenas, ", "));
  }
  return absl::OkStatus();
}

// Events a synthetic workload of `size` allocations replays.
absl::StatusOr<int64_t> WorkloadEvents(const std::string& name, int64_t size) {
  if (name == "allocation" || name == "allocation_delayed") return 2 * size;
  if (name == "larson") return 2 * (size + kLarsonSlots);
  return Invalid("unknown workload '", api::Clip(name),
                 "'; known: allocation, allocation_delayed, larson");
}

// RESOURCE_EXHAUSTED when `events` per replay, over all replays, is over
// the event limit.
absl::Status CheckEvents(int64_t events, int64_t replays,
                         const BenchmarkLimits& limits) {
  if (events > limits.max_ops || events * replays > limits.max_ops) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the benchmark would replay ", events, " events ", replays,
                     " times; at most ", limits.max_ops,
                     " are replayed in all (max_benchmark_ops: a server's "
                     "--max_benchmark_ops)"));
  }
  return absl::OkStatus();
}

// RESOURCE_EXHAUSTED when a replay would hold more than the byte limit.
absl::Status CheckBytes(int64_t bytes, const char* what,
                        const BenchmarkLimits& limits) {
  if (bytes <= limits.max_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat(what, " is ", bytes, " bytes; at most ", limits.max_bytes,
                   " are held per replay (max_benchmark_bytes: a server's "
                   "--max_benchmark_bytes)"));
}

// DEADLINE_EXCEEDED once `cancel` has fired: `what` stopped for it.
absl::Status CheckCancel(const base::CancelToken& cancel,
                         absl::string_view what) {
  if (!cancel.Cancelled()) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat(what, " cancelled"));
}

// The workload's trace; DEADLINE_EXCEEDED when `cancel` fires first.
absl::StatusOr<allocators::Trace> SyntheticTrace(
    const std::string& name, int size, const base::CancelToken& cancel) {
  const std::function<bool()> stop = [&cancel] { return cancel.Cancelled(); };
  allocators::Trace trace =
      name == "allocation" ? allocators::AllocationWorkload(size, 1, stop)
      : name == "allocation_delayed"
          ? allocators::DelayedFreeWorkload(size, 100, stop)
          : allocators::LarsonWorkload(size, kLarsonSlots, 16, 64 << 10, 1,
                                       stop);
  if (auto s = CheckCancel(cancel, "making the workload"); !s.ok()) return s;
  return trace;
}

// The most bytes a trace holds at once (the lower bound of its problem:
// its buffers live from their allocation to their free), polling `cancel`
// every 4096 events; DEADLINE_EXCEEDED when it fires first.
absl::StatusOr<int64_t> TracePeakBytes(const allocators::Trace& trace,
                                       const base::CancelToken& cancel) {
  int64_t live = 0, peak = 0;
  for (size_t i = 0; i < trace.events.size(); ++i) {
    if (i % 4096 == 0) {
      if (auto s = CheckCancel(cancel, "the workload's peak"); !s.ok()) {
        return s;
      }
    }
    const allocators::TraceEvent& e = trace.events[i];
    live += e.kind == allocators::EventKind::kAlloc ? e.size : -e.size;
    peak = std::max(peak, live);
  }
  return peak;
}

// The trace and the static plan of a request.
struct Workload {
  allocators::Trace trace;
  planner::PlanResult plan;
};

// Plans a graph/buffers/model request through the Plan use case (limits
// and options as for a Plan call), after checking its event count.
absl::StatusOr<Workload> PlannedWorkload(const v1::BenchmarkRequest& request,
                                         int64_t replays,
                                         const BenchmarkLimits& limits,
                                         base::WorkerPool* workers,
                                         const base::CancelToken* cancel) {
  v1::PlanRequest plan_request;
  *plan_request.mutable_options() = request.options();
  plan_request.set_no_timings(true);
  int64_t items = 0;
  if (request.has_graph()) {
    *plan_request.mutable_graph() = request.graph();
    items = request.graph().tensors_size();
  } else if (request.buffers_size() > 0) {
    *plan_request.mutable_buffers() = request.buffers();
    items = request.buffers_size();
  } else {
    *plan_request.mutable_model() = request.model();
  }
  if (auto s = CheckEvents(2 * items, replays, limits); !s.ok()) return s;
  absl::StatusOr<PlanOutcome> outcome =
      Plan(plan_request, limits.plan, workers, cancel);
  if (!outcome.ok()) return outcome.status();
  Workload w;
  w.plan = std::move(outcome->result);
  w.trace = TraceFromProblem(w.plan.problem, cancel);
  if (auto s = CheckCancel(*cancel, "the benchmark's trace"); !s.ok()) {
    return s;
  }
  if (auto s = CheckEvents(static_cast<int64_t>(w.trace.events.size()), replays,
                           limits);
      !s.ok()) {
    return s;
  }
  return w;
}

// A synthetic workload: events checked from its size, bytes from its trace,
// both before it is planned.
absl::StatusOr<Workload> SyntheticWorkload(const v1::BenchmarkRequest& request,
                                           int64_t replays,
                                           const BenchmarkLimits& limits,
                                           base::WorkerPool* workers,
                                           const base::CancelToken* cancel) {
  if (request.workload_size() < 0) {
    return Invalid("workload_size ", request.workload_size(),
                   " is negative (0: the default, ", kDefaultWorkloadSize, ")");
  }
  const int size = request.workload_size() > 0 ? request.workload_size()
                                               : kDefaultWorkloadSize;
  absl::StatusOr<int64_t> events = WorkloadEvents(request.workload(), size);
  if (!events.ok()) return events.status();
  // Each allocation is a buffer of the static plan: the graph limit holds.
  if (size > limits.plan.max_tensors) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "workload_size is ", size, "; at most ", limits.plan.max_tensors,
        " buffers are planned (max_tensors: a server's "
        "--max_tensors)"));
  }
  if (auto s = CheckEvents(*events, replays, limits); !s.ok()) return s;
  absl::StatusOr<planner::PlanOptions> options =
      api::OptionsFromProto(request.options(), limits.plan.budgets);
  if (!options.ok()) return options.status();
  Workload w;
  absl::StatusOr<allocators::Trace> trace =
      SyntheticTrace(request.workload(), size, *cancel);
  if (!trace.ok()) return trace.status();
  w.trace = *std::move(trace);
  absl::StatusOr<int64_t> peak = TracePeakBytes(w.trace, *cancel);
  if (!peak.ok()) return peak.status();
  if (auto s = CheckBytes(*peak, "the workload's peak", limits); !s.ok()) {
    return s;
  }
  planner::Problem problem = ProblemFromTrace(w.trace, cancel);
  if (auto s = CheckCancel(*cancel, "the workload's problem"); !s.ok()) {
    return s;
  }
  absl::StatusOr<planner::PlanResult> plan =
      planner::PlanBuffers(std::move(problem), *options, workers, cancel);
  if (!plan.ok()) return plan.status();
  w.plan = *std::move(plan);
  return w;
}

// A fresh dynamic allocator by name; BFC limited to the byte limit.
absl::StatusOr<std::unique_ptr<allocators::Allocator>> NewAllocator(
    const std::string& name, const BenchmarkLimits& limits) {
  if (name == "bfc") {
    allocators::BfcAllocator::Options options;
    options.memory_limit = static_cast<size_t>(limits.max_bytes);
    return std::make_unique<allocators::BfcAllocator>(options);
  }
  return allocators::MakeAllocator(name);
}

// The allocator a call's static-plan arenas come from; it and all it took
// are gone when the call ends.
absl::StatusOr<std::unique_ptr<allocators::Allocator>> NewArenaSource(
    const std::string& name, const BenchmarkLimits& limits) {
  if (name.empty() || name == "bfc") return NewAllocator("bfc", limits);
  return allocators::MakeAllocator(name);
}

void AddSeries(const allocators::ReplayResult& r, v1::AllocatorFigures* row) {
  row->clear_series();
  for (const allocators::SeriesPoint& p : r.series) {
    v1::SeriesPoint* out = row->add_series();
    out->set_event(p.event);
    out->set_bytes_in_use(p.bytes_in_use);
    out->set_bytes_reserved(p.bytes_reserved);
  }
}

// Runs one dynamic allocator `runs` times on fresh instances.
absl::StatusOr<v1::AllocatorFigures> RunDynamic(
    const std::string& name, const allocators::Trace& trace, int runs,
    const BenchmarkLimits& limits, const allocators::ReplayOptions& replay,
    const ReplayObserver& observer) {
  v1::AllocatorFigures row;
  row.set_allocator(name);
  std::vector<int64_t> p50, p99;
  for (int run = 0; run < runs; ++run) {
    absl::StatusOr<std::unique_ptr<allocators::Allocator>> allocator =
        NewAllocator(name, limits);
    if (!allocator.ok()) return allocator.status();
    absl::StatusOr<allocators::ReplayResult> r =
        allocators::ReplayTrace(trace, **allocator, replay);
    if (!r.ok()) return r.status();
    p50.push_back(allocators::Quantile(r->op_ns, 0.50));
    p99.push_back(allocators::Quantile(r->op_ns, 0.99));
    row.set_peak_bytes_in_use(r->peak_bytes_in_use);
    row.set_peak_bytes_reserved(r->peak_bytes_reserved);
    row.set_fragmentation_at_peak(r->fragmentation_at_peak);
    row.set_allocations(r->allocations);
    row.set_failures(r->failures);
    AddSeries(*r, &row);
    if (observer) observer(name, *r);
  }
  row.set_p50_ns(allocators::Quantile(p50, 0.50));
  row.set_p99_ns(allocators::Quantile(p99, 0.50));
  return row;
}

// The buffers of each memory space (one group holding all without spaces).
std::vector<std::vector<int>> SpaceGroups(const planner::PlanResult& plan) {
  const size_t n = plan.problem.buffers.size();
  std::vector<std::vector<int>> groups(
      std::max<size_t>(1, plan.memory_spaces.size()));
  for (size_t i = 0; i < n; ++i) {
    const int k = plan.memory_space_of.empty() ? 0 : plan.memory_space_of[i];
    groups[k].push_back(static_cast<int>(i));
  }
  return groups;
}

// Replays the static plan: each memory space's buffers in an arena of its
// own from `arena_source`, every tensor's bytes checked.
absl::StatusOr<v1::AllocatorFigures> RunStatic(
    const Workload& w, allocators::Allocator* arena_source,
    const allocators::ReplayOptions& replay, const base::CancelToken& cancel,
    const ReplayObserver& observer) {
  const planner::PlanResult& plan = w.plan;
  const std::vector<std::vector<int>> groups = SpaceGroups(plan);
  allocators::StaticReplayOptions options;
  options.replay = replay;
  v1::AllocatorFigures row;
  row.set_allocator(kStatic);
  allocators::ReplayResult figures;  // the run as a whole, for the observer
  for (size_t k = 0; k < groups.size(); ++k) {
    const int64_t arena = plan.memory_spaces.empty()
                              ? plan.solution.arena_size
                              : plan.memory_spaces[k].arena_size;
    if (groups[k].empty()) continue;
    allocators::Trace trace =
        TraceFromProblem(plan.problem, groups[k], &cancel);
    if (auto s = CheckCancel(cancel, "the static plan's trace"); !s.ok()) {
      return s;
    }
    absl::StatusOr<allocators::ReplayResult> r = allocators::ReplayStaticPlan(
        trace, plan.solution.offsets, arena, *arena_source, options);
    if (!r.ok()) return r.status();
    row.set_allocations(row.allocations() + r->allocations);
    figures.allocations += r->allocations;
    figures.op_ns.insert(figures.op_ns.end(), r->op_ns.begin(), r->op_ns.end());
    if (groups.size() == 1) AddSeries(*r, &row);
  }
  row.set_peak_bytes_in_use(plan.lower_bound);
  row.set_peak_bytes_reserved(plan.solution.arena_size);
  row.set_fragmentation_at_peak(
      plan.solution.arena_size > 0
          ? 1.0 - static_cast<double>(plan.lower_bound) /
                      static_cast<double>(plan.solution.arena_size)
          : 0.0);
  // The metrics say what the row says (each replay's own figures are its
  // arena's size, and with memory pools one arena's alone).
  figures.peak_bytes_in_use = row.peak_bytes_in_use();
  figures.peak_bytes_reserved = row.peak_bytes_reserved();
  figures.fragmentation_at_peak = row.fragmentation_at_peak();
  if (observer) observer(kStatic, figures);
  return row;
}

}  // namespace

std::vector<std::string> BenchmarkAllocatorNames() {
  std::vector<std::string> names = allocators::AllocatorNames();
  names.push_back(kStatic);
  return names;
}

std::vector<std::string> DefaultBenchmarkAllocators() {
  std::vector<std::string> names = BenchmarkAllocatorNames();
  names.erase(std::remove(names.begin(), names.end(), "mmap"), names.end());
  return names;
}

std::vector<std::string> ArenaAllocatorNames() {
  std::vector<std::string> names = {"bfc"};
  for (const std::string& name : allocators::AllocatorNames()) {
    if (name == "mmap" || name == "recurse") names.push_back(name);
  }
  return names;
}

namespace {

absl::StatusOr<v1::BenchmarkResponse> RunBenchmarkUntil(
    const v1::BenchmarkRequest& request, const BenchmarkLimits& limits,
    base::WorkerPool* workers, const base::CancelToken& cancel,
    const ReplayObserver& observer) {
  absl::StatusOr<std::vector<std::string>> names = ChooseAllocators(request);
  if (!names.ok()) return names.status();
  const int runs = std::max(1, request.repetitions());
  const int64_t dynamic = static_cast<int64_t>(
      std::count_if(names->begin(), names->end(),
                    [](const std::string& n) { return n != kStatic; }));
  const int64_t replays =
      dynamic * runs + (dynamic < static_cast<int64_t>(names->size()));
  absl::StatusOr<Workload> w =
      request.workload().empty()
          ? PlannedWorkload(request, replays, limits, workers, &cancel)
          : SyntheticWorkload(request, replays, limits, workers, &cancel);
  if (!w.ok()) return w.status();
  if (auto s = CheckBytes(w->plan.solution.arena_size,
                          "the static plan's arena", limits);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::unique_ptr<allocators::Allocator>> arena_source =
      NewArenaSource(request.arena_allocator(), limits);
  if (!arena_source.ok()) return arena_source.status();
  allocators::ReplayOptions replay;
  replay.should_stop = [&cancel] { return cancel.Cancelled(); };
  replay.series_points = request.series_points();
  v1::BenchmarkResponse response;
  response.set_arena_size_bytes(w->plan.solution.arena_size);
  response.set_lower_bound_bytes(w->plan.lower_bound);
  response.set_unaligned_lower_bound_bytes(w->plan.unaligned_lower_bound);
  response.set_trace_events(static_cast<int64_t>(w->trace.events.size()));
  response.set_strategy(w->plan.strategy);
  response.set_arena_allocator(
      request.arena_allocator().empty() ? "bfc" : request.arena_allocator());
  for (const std::string& name : *names) {
    absl::StatusOr<v1::AllocatorFigures> row =
        name == kStatic
            ? RunStatic(*w, arena_source->get(), replay, cancel, observer)
            : RunDynamic(name, w->trace, runs, limits, replay, observer);
    if (!row.ok()) return row.status();
    *response.add_rows() = *std::move(row);
  }
  return response;
}

}  // namespace

absl::Status CheckBenchmarkFields(const v1::BenchmarkRequest& request) {
  if (auto s = CheckRequest(request); !s.ok()) return s;
  if (!request.workload().empty()) {
    if (auto events = WorkloadEvents(request.workload(), 0); !events.ok()) {
      return events.status();
    }
  }
  return ChooseAllocators(request).status();
}

absl::StatusOr<v1::BenchmarkResponse> RunBenchmark(
    const v1::BenchmarkRequest& request, const BenchmarkLimits& limits,
    base::WorkerPool* workers, const base::CancelToken* call,
    const ReplayObserver& observer) {
  if (auto s = CheckBenchmarkFields(request); !s.ok()) return s;
  const absl::Time limit = absl::Now() + limits.max_time;
  base::CancelToken cancel(call, limit);
  absl::StatusOr<v1::BenchmarkResponse> response =
      RunBenchmarkUntil(request, limits, workers, cancel, observer);
  // Stopped by the limit, not by the call: the same request would stop
  // again, so it is over a limit (not "retry").
  if (!response.ok() && absl::IsDeadlineExceeded(response.status()) &&
      (call == nullptr || !call->Cancelled()) && absl::Now() >= limit) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the Benchmark ran past its time limit of ",
        absl::FormatDuration(limits.max_time),
        " (memplan-server --max_benchmark_seconds): ask for a smaller "
        "workload_size, fewer repetitions or allocators (",
        response.status().message(), ")"));
  }
  return response;
}

}  // namespace memplan::engine
