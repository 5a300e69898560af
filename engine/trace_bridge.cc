#include "engine/trace_bridge.h"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace memplan::engine {
namespace {

constexpr size_t kPollEvery = size_t{1} << 16;

bool Stop(const base::CancelToken* cancel) {
  return cancel != nullptr && cancel->Cancelled();
}

// std::sort of `v`, as a bottom-up merge sort of sorted runs so that
// `cancel` is polled between pieces of about a millisecond; false (`v`
// unsorted) when it fired.
template <typename T>
bool SortPolling(std::vector<T>* v, const base::CancelToken* cancel) {
  const size_t n = v->size();
  for (size_t i = 0; i < n; i += kPollEvery) {
    if (Stop(cancel)) return false;
    std::sort(v->begin() + i, v->begin() + std::min(n, i + kPollEvery));
  }
  for (size_t width = kPollEvery; width < n; width *= 2) {
    for (size_t i = 0; i + width < n; i += 2 * width) {
      if (Stop(cancel)) return false;
      std::inplace_merge(v->begin() + i, v->begin() + i + width,
                         v->begin() + std::min(n, i + 2 * width));
    }
  }
  return true;
}

}  // namespace

allocators::Trace TraceFromProblem(const planner::Problem& problem,
                                   const base::CancelToken* cancel) {
  std::vector<int> all(problem.buffers.size());
  std::iota(all.begin(), all.end(), 0);
  return TraceFromProblem(problem, all, cancel);
}

allocators::Trace TraceFromProblem(const planner::Problem& problem,
                                   const std::vector<int>& subset,
                                   const base::CancelToken* cancel) {
  const auto& b = problem.buffers;
  // (step, 0 = alloc / 1 = free, id): births at a step come before the
  // deaths after it; the free of buffer i happens at its last step end-1.
  std::vector<std::tuple<planner::Step, int, int>> order;
  order.reserve(2 * subset.size());
  for (int i : subset) {
    order.emplace_back(b[i].start, 0, i);
    order.emplace_back(b[i].end - 1, 1, i);
  }
  allocators::Trace trace;
  if (!SortPolling(&order, cancel)) return trace;
  trace.names.reserve(b.size());
  for (size_t k = 0; k < b.size(); ++k) {
    if (k % kPollEvery == 0 && Stop(cancel)) return trace;
    trace.names.push_back(b[k].name);
  }
  trace.events.reserve(order.size());
  for (const auto& [step, kind, i] : order) {
    if (trace.events.size() % kPollEvery == 0 && Stop(cancel)) return trace;
    trace.events.push_back({kind == 0 ? allocators::EventKind::kAlloc
                                      : allocators::EventKind::kFree,
                            i, b[i].size, b[i].alignment});
  }
  return trace;
}

planner::Problem ProblemFromTrace(const allocators::Trace& trace,
                                  const base::CancelToken* cancel) {
  planner::Problem problem;
  // A million buffers take tens of milliseconds to construct: made in
  // pieces, so that a cancel is seen between them.
  const size_t ids = static_cast<size_t>(trace.NumIds());
  problem.buffers.reserve(ids);
  while (problem.buffers.size() < ids) {
    if (Stop(cancel)) return problem;
    problem.buffers.resize(std::min(ids, problem.buffers.size() + kPollEvery));
  }
  const int64_t end = static_cast<int64_t>(trace.events.size());
  for (int64_t i = 0; i < end; ++i) {
    if (i % 4096 == 0 && Stop(cancel)) break;
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
