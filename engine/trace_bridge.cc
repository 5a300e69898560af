#include "engine/trace_bridge.h"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace memplan::engine {

allocators::Trace TraceFromProblem(const planner::Problem& problem) {
  std::vector<int> all(problem.buffers.size());
  std::iota(all.begin(), all.end(), 0);
  return TraceFromProblem(problem, all);
}

allocators::Trace TraceFromProblem(const planner::Problem& problem,
                                   const std::vector<int>& subset) {
  const auto& b = problem.buffers;
  // (step, 0 = alloc / 1 = free, id): births at a step come before the
  // deaths after it; the free of buffer i happens at its last step end-1.
  std::vector<std::tuple<planner::Step, int, int>> order;
  order.reserve(2 * subset.size());
  for (int i : subset) {
    order.emplace_back(b[i].start, 0, i);
    order.emplace_back(b[i].end - 1, 1, i);
  }
  std::sort(order.begin(), order.end());
  allocators::Trace trace;
  trace.names.reserve(b.size());
  for (const planner::Buffer& x : b) trace.names.push_back(x.name);
  trace.events.reserve(order.size());
  for (const auto& [step, kind, i] : order) {
    trace.events.push_back({kind == 0 ? allocators::EventKind::kAlloc
                                      : allocators::EventKind::kFree,
                            i, b[i].size, b[i].alignment});
  }
  return trace;
}

planner::Problem ProblemFromTrace(const allocators::Trace& trace) {
  planner::Problem problem;
  problem.buffers.resize(static_cast<size_t>(trace.NumIds()));
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

}  // namespace memplan::engine
