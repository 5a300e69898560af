#include "planner/problem.h"

#include <algorithm>
#include <queue>
#include <tuple>
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

namespace {

// PaddedLowerBound at the steps whose smallest live alignment is `m`.
// `events` are (step, 0 for an end / 1 for a start, buffer), sorted.
Bytes PaddedBoundAt(const Problem& problem,
                    const std::vector<std::tuple<Step, int, int>>& events,
                    Bytes m) {
  const auto& b = problem.buffers;
  Bytes live = 0;                 // sum of AlignUp(size, m) of live buffers
  int64_t with_m = 0, below = 0;  // live buffers aligned to m, to less
  std::vector<bool> alive(b.size(), false);
  // Largest padding among live buffers: a heap with lazy deletion.
  std::priority_queue<std::pair<Bytes, int>> padding;
  Bytes best = 0;
  for (size_t k = 0; k < events.size(); ++k) {
    const auto [step, is_start, i] = events[k];
    const Bytes padded = AlignUp(b[i].size, m);
    const int sign = is_start ? 1 : -1;
    live += sign * padded;
    if (b[i].alignment == m) with_m += sign;
    if (b[i].alignment < m) below += sign;
    alive[i] = is_start;
    if (is_start) padding.push({padded - b[i].size, i});
    const bool last_at_step =
        k + 1 == events.size() || std::get<0>(events[k + 1]) != step;
    if (!last_at_step || with_m == 0 || below > 0) continue;
    while (!alive[padding.top().second]) padding.pop();
    best = std::max(best, live - padding.top().first);
  }
  return best;
}

}  // namespace

Bytes PaddedLowerBound(const Problem& problem) {
  std::vector<Bytes> alignments;
  for (const Buffer& b : problem.buffers) alignments.push_back(b.alignment);
  std::sort(alignments.begin(), alignments.end());
  alignments.erase(std::unique(alignments.begin(), alignments.end()),
                   alignments.end());
  if (alignments.empty() || (alignments.size() == 1 && alignments[0] == 1)) {
    return LowerBound(problem);
  }
  std::vector<std::tuple<Step, int, int>> events;
  events.reserve(2 * problem.buffers.size());
  for (int i = 0; i < static_cast<int>(problem.buffers.size()); ++i) {
    events.emplace_back(problem.buffers[i].start, 1, i);
    events.emplace_back(problem.buffers[i].end, 0, i);
  }
  std::sort(events.begin(), events.end());
  Bytes best = 0;
  for (Bytes m : alignments) {
    best = std::max(best, PaddedBoundAt(problem, events, m));
  }
  return best;
}

}  // namespace memplan::planner
