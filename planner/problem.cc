#include "planner/problem.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "planner/sections.h"

namespace memplan::planner {

namespace {

// The peak over sections of the sum of size_of(buffer) for live buffers.
template <typename SizeFn>
Bytes PeakLive(const Problem& problem, SizeFn size_of) {
  const Sections sections = SweepSections(problem);
  const std::vector<Bytes> live = SectionTotals(
      sections, [&](int i) { return size_of(problem.buffers[i]); });
  return live.empty() ? 0 : *std::max_element(live.begin(), live.end());
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
