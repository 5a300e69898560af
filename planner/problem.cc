#include "planner/problem.h"

#include <algorithm>
#include <utility>

namespace memplan::planner {

namespace {

// The peak over steps of the sum of size_of(buffer) for live buffers.
template <typename SizeFn>
Bytes PeakLive(const Problem& problem, SizeFn size_of) {
  // Events (step, delta): frees sort before allocations at the same step
  // because lifetimes are half-open.
  std::vector<std::pair<Step, Bytes>> events;
  events.reserve(problem.buffers.size() * 2);
  for (const Buffer& b : problem.buffers) {
    events.emplace_back(b.start, size_of(b));
    events.emplace_back(b.end, -size_of(b));
  }
  std::sort(events.begin(), events.end());
  Bytes live = 0;
  Bytes peak = 0;
  for (const auto& [step, delta] : events) {
    live += delta;
    peak = std::max(peak, live);
  }
  return peak;
}

}  // namespace

Bytes LowerBound(const Problem& problem) {
  return PeakLive(problem, [](const Buffer& b) { return b.size; });
}

Bytes AlignedLowerBound(const Problem& problem) {
  return PeakLive(problem,
                  [](const Buffer& b) { return AlignUp(b.size, b.alignment); });
}

std::pair<Step, Step> ScheduleSpan(const Problem& problem) {
  if (problem.buffers.empty()) return {0, 0};
  Step first = problem.buffers[0].start, last = problem.buffers[0].end;
  for (const Buffer& b : problem.buffers) {
    first = std::min(first, b.start);
    last = std::max(last, b.end);
  }
  return {first, last};
}

Bytes NaiveBytes(const Problem& problem) {
  Bytes total = 0;
  for (const Buffer& b : problem.buffers) total += b.size;
  return total;
}

}  // namespace memplan::planner
