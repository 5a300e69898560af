#include "proto/benchmark.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "allocators/bfc_allocator.h"
#include "planner/planner.h"

namespace memplan::api {
namespace {

constexpr char kStatic[] = "static_plan";
constexpr int kDefaultWorkloadSize = 1000;
constexpr int kMaxRepetitions = 100;

// The allocation trace of a planned problem: at each step, allocate what is
// born there, then free what dies after it (persistent buffers live to the
// end).
allocators::Trace TraceFromProblem(const planner::Problem& problem) {
  allocators::Trace trace;
  const auto& b = problem.buffers;
  const auto [first, last] = planner::ScheduleSpan(problem);
  std::vector<std::vector<int>> born(last - first + 1), dead(last - first + 1);
  for (int i = 0; i < static_cast<int>(b.size()); ++i) {
    born[b[i].start - first].push_back(i);
    dead[b[i].end - 1 - first].push_back(i);
    trace.names.push_back(b[i].name);
  }
  for (size_t step = 0; step < born.size(); ++step) {
    for (int i : born[step]) {
      trace.events.push_back(
          {allocators::EventKind::kAlloc, i, b[i].size, b[i].alignment});
    }
    for (int i : dead[step]) {
      trace.events.push_back(
          {allocators::EventKind::kFree, i, b[i].size, b[i].alignment});
    }
  }
  return trace;
}

// The problem a trace describes: each id lives from its allocation event to
// its free event (event indices as steps).
planner::Problem ProblemFromTrace(const allocators::Trace& trace) {
  planner::Problem problem;
  problem.buffers.resize(trace.NumIds());
  const int64_t end = static_cast<int64_t>(trace.events.size());
  for (int64_t i = 0; i < end; ++i) {
    const allocators::TraceEvent& e = trace.events[i];
    planner::Buffer& b = problem.buffers[e.id];
    if (e.kind == allocators::EventKind::kAlloc) {
      b = {trace.TensorName(e.id), i, end, e.size, e.alignment};
    } else {
      b.end = i;
    }
  }
  return problem;
}

absl::StatusOr<allocators::Trace> SyntheticTrace(const std::string& name,
                                                 int size) {
  if (name == "allocation") return allocators::AllocationWorkload(size);
  if (name == "allocation_delayed") {
    return allocators::DelayedFreeWorkload(size, 100);
  }
  if (name == "larson") {
    return allocators::LarsonWorkload(size, 64, 16, 64 << 10);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown workload '", name,
                   "'; known: allocation, allocation_delayed, larson"));
}

// The allocators to run, checked against the known names.
absl::StatusOr<std::vector<std::string>> ChooseAllocators(
    const v1::BenchmarkRequest& request) {
  std::vector<std::string> known = allocators::AllocatorNames();
  known.push_back(kStatic);
  if (request.allocators().empty()) return known;
  std::vector<std::string> chosen;
  for (const std::string& name : request.allocators()) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown allocator '", name,
                       "'; known: ", absl::StrJoin(known, ", ")));
    }
    chosen.push_back(name);
  }
  return chosen;
}

// The largest sum of sizes held at once and the number of events, checked
// against the limits before anything is replayed.
absl::Status CheckLimits(const allocators::Trace& trace, int runs,
                         const BenchmarkLimits& limits) {
  int64_t naive = 0;
  for (const auto& e : trace.events) {
    if (e.kind == allocators::EventKind::kAlloc) naive += e.size;
  }
  if (naive > limits.max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the replay could hold ", naive,
                     " bytes; this server allows ", limits.max_bytes));
  }
  const int64_t ops = static_cast<int64_t>(trace.events.size()) * runs;
  if (ops > limits.max_ops) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the benchmark would replay ", ops,
                     " events; this server allows ", limits.max_ops));
  }
  return absl::OkStatus();
}

// A fresh allocator by name; BFC limited to the byte limit.
absl::StatusOr<std::unique_ptr<allocators::Allocator>> NewAllocator(
    const std::string& name, const BenchmarkLimits& limits) {
  if (name == "bfc") {
    allocators::BfcAllocator::Options options;
    options.memory_limit = static_cast<size_t>(limits.max_bytes);
    return std::make_unique<allocators::BfcAllocator>(options);
  }
  return allocators::MakeAllocator(name);
}

int64_t Median(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Runs one dynamic allocator `runs` times on fresh instances.
absl::StatusOr<v1::AllocatorFigures> RunDynamic(
    const std::string& name, const allocators::Trace& trace, int runs,
    const BenchmarkLimits& limits, const planner::CancelToken* cancel,
    const ReplayObserver& observer) {
  v1::AllocatorFigures row;
  row.set_allocator(name);
  std::vector<int64_t> p50, p99;
  for (int run = 0; run < runs; ++run) {
    if (cancel->Cancelled()) {
      return absl::DeadlineExceededError("benchmark time limit reached");
    }
    absl::StatusOr<std::unique_ptr<allocators::Allocator>> allocator =
        NewAllocator(name, limits);
    if (!allocator.ok()) return allocator.status();
    absl::StatusOr<allocators::ReplayResult> r =
        allocators::ReplayTrace(trace, **allocator);
    if (!r.ok()) return r.status();
    std::vector<int64_t> ops = r->op_ns;
    p50.push_back(Median(ops));
    std::sort(ops.begin(), ops.end());
    p99.push_back(ops.empty() ? 0 : ops[ops.size() * 99 / 100]);
    row.set_peak_bytes_in_use(r->peak_bytes_in_use);
    row.set_peak_bytes_reserved(r->peak_bytes_reserved);
    row.set_fragmentation_at_peak(r->fragmentation_at_peak);
    row.set_allocations(r->allocations);
    row.set_failures(r->failures);
    if (observer) observer(name, *r);
  }
  row.set_p50_ns(Median(p50));
  row.set_p99_ns(Median(p99));
  return row;
}

// Replays the static plan in one arena from `arena_source`, checking every
// tensor's bytes.
absl::StatusOr<v1::AllocatorFigures> RunStatic(
    const allocators::Trace& trace, const planner::PlanResult& plan,
    allocators::Allocator* arena_source, const ReplayObserver& observer) {
  absl::StatusOr<allocators::ReplayResult> r = allocators::ReplayStaticPlan(
      trace, plan.solution.offsets, plan.solution.arena_size, *arena_source);
  if (!r.ok()) return r.status();
  v1::AllocatorFigures row;
  row.set_allocator(kStatic);
  row.set_peak_bytes_in_use(plan.lower_bound);
  row.set_peak_bytes_reserved(plan.solution.arena_size);
  row.set_fragmentation_at_peak(
      plan.solution.arena_size > 0
          ? 1.0 - static_cast<double>(plan.lower_bound) /
                      static_cast<double>(plan.solution.arena_size)
          : 0.0);
  row.set_allocations(r->allocations);
  if (observer) observer(kStatic, *r);
  return row;
}

// The trace and the static plan of a request.
struct Workload {
  allocators::Trace trace;
  planner::PlanResult plan;
};

absl::StatusOr<Workload> MakeWorkload(const v1::BenchmarkRequest& request,
                                      const BenchmarkLimits& limits,
                                      planner::WorkerPool* pool,
                                      const planner::CancelToken* cancel) {
  if (request.has_graph() == !request.workload().empty()) {
    return absl::InvalidArgumentError(
        "a benchmark request needs exactly one of graph or workload");
  }
  v1::PlanRequest plan_request;
  *plan_request.mutable_options() = request.options();
  Workload w;
  if (request.has_graph()) {
    *plan_request.mutable_graph() = request.graph();
    absl::StatusOr<PlanInput> input = FromProto(plan_request, limits.plan);
    if (!input.ok()) return input.status();
    absl::StatusOr<planner::PlanResult> plan =
        planner::PlanGraph(*input->graph, input->options, pool, cancel);
    if (!plan.ok()) return plan.status();
    w.plan = *std::move(plan);
    w.trace = TraceFromProblem(w.plan.problem);
    return w;
  }
  const int size = request.workload_size() > 0 ? request.workload_size()
                                               : kDefaultWorkloadSize;
  if (size > limits.max_ops) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "workload_size ", size, " is over this server's ", limits.max_ops));
  }
  absl::StatusOr<allocators::Trace> trace =
      SyntheticTrace(request.workload(), size);
  if (!trace.ok()) return trace.status();
  w.trace = *std::move(trace);
  absl::StatusOr<planner::PlanOptions> options =
      OptionsFromProto(request.options(), limits.plan);
  if (!options.ok()) return options.status();
  absl::StatusOr<planner::PlanResult> plan =
      planner::PlanBuffers(ProblemFromTrace(w.trace), *options, pool, cancel);
  if (!plan.ok()) return plan.status();
  w.plan = *std::move(plan);
  return w;
}

}  // namespace

absl::StatusOr<v1::BenchmarkResponse> RunBenchmark(
    const v1::BenchmarkRequest& request, const BenchmarkLimits& limits,
    allocators::Allocator* arena_source, planner::WorkerPool* pool,
    const planner::CancelToken* call, const ReplayObserver& observer) {
  planner::CancelToken cancel(call, absl::Now() + limits.max_time);
  if (request.repetitions() < 0 || request.repetitions() > kMaxRepetitions) {
    return absl::InvalidArgumentError(
        absl::StrCat("repetitions ", request.repetitions(), " is outside 0..",
                     kMaxRepetitions));
  }
  const int runs = std::max(1, request.repetitions());
  absl::StatusOr<std::vector<std::string>> names = ChooseAllocators(request);
  if (!names.ok()) return names.status();
  absl::StatusOr<Workload> w = MakeWorkload(request, limits, pool, &cancel);
  if (!w.ok()) return w.status();
  if (auto s =
          CheckLimits(w->trace, runs * static_cast<int>(names->size()), limits);
      !s.ok()) {
    return s;
  }
  v1::BenchmarkResponse response;
  response.set_arena_size_bytes(w->plan.solution.arena_size);
  response.set_lower_bound_bytes(w->plan.lower_bound);
  response.set_trace_events(static_cast<int64_t>(w->trace.events.size()));
  response.set_strategy(w->plan.strategy);
  for (const std::string& name : *names) {
    absl::StatusOr<v1::AllocatorFigures> row =
        name == kStatic
            ? RunStatic(w->trace, w->plan, arena_source, observer)
            : RunDynamic(name, w->trace, runs, limits, &cancel, observer);
    if (!row.ok()) return row.status();
    *response.add_rows() = *std::move(row);
  }
  return response;
}

}  // namespace memplan::api
