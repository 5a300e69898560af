#include "planner/peak_window.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "planner/greedy.h"
#include "planner/hill_climb.h"

namespace memplan::planner {
namespace {

// The orders the window's own problem is placed in before its climb, in
// tie-break order.
constexpr GreedyOrder kWindowOrders[] = {
    GreedyOrder::kSize, GreedyOrder::kConflicts, GreedyOrder::kArea,
    GreedyOrder::kBreadth};

// The buffers of `inside`, their lifetimes cut to [begin, end), as a
// problem of their own (without names: placement does not read them).
Problem WindowProblem(const Problem& problem, const PeakWindow& window) {
  Problem cut;
  cut.buffers.reserve(window.inside.size());
  for (int i : window.inside) {
    const Buffer& b = problem.buffers[i];
    Buffer c;
    c.start = std::max(b.start, window.begin);
    c.end = std::min(b.end, window.end);
    c.size = b.size;
    c.alignment = b.alignment;
    cut.buffers.push_back(std::move(c));
  }
  return cut;
}

// A tight plan of the window's own problem: a hill climb from each of
// kWindowOrders (placed with best fit), each within a quarter of
// kHillClimbWork, until one ends at the problem's bound; the smallest plan,
// the first of equals. (On S_1's window only the climb from the order by
// area reaches its bound: 69 moves; those from size and conflicts stop
// 7% above it after 1,000.)
absl::StatusOr<Solution> PlanWindow(const Problem& cut,
                                    const base::CancelToken* cancel) {
  Solution best;
  bool have = false;
  HillClimbOptions climb;
  climb.stop_at = AlignedLowerBound(cut);
  climb.work = kHillClimbWork / std::size(kWindowOrders);
  for (GreedyOrder o : kWindowOrders) {
    absl::StatusOr<HillClimbResult> climbed =
        HillClimb(cut, GreedyPlacementOrder(cut, o), climb, cancel);
    if (!climbed.ok()) return climbed.status();
    if (!have || climbed->solution.arena_size < best.arena_size) {
      best = std::move(climbed->solution);
      have = true;
    }
    if (best.arena_size <= climb.stop_at) break;
  }
  return best;
}

}  // namespace

std::optional<PeakWindow> FindPeakWindow(const Problem& problem,
                                         int64_t per_mille) {
  const auto& b = problem.buffers;
  if (b.empty()) return std::nullopt;
  // Live bytes step by step: +size at each start, -size at each end.
  std::vector<std::pair<Step, Bytes>> events;
  events.reserve(2 * b.size());
  for (const Buffer& x : b) {
    events.push_back({x.start, x.size});
    events.push_back({x.end, -x.size});
  }
  std::sort(events.begin(), events.end());
  // (step, live bytes from that step to the next event's step)
  std::vector<std::pair<Step, Bytes>> live;
  Bytes now = 0, peak = 0;
  for (size_t k = 0; k < events.size();) {
    const Step t = events[k].first;
    for (; k < events.size() && events[k].first == t; ++k) {
      now += events[k].second;
    }
    live.push_back({t, now});
    peak = std::max(peak, now);
  }
  const Bytes threshold = peak - peak / 1000 * per_mille;
  PeakWindow window;
  bool found = false;
  for (size_t k = 0; k + 1 < live.size(); ++k) {
    if (live[k].second < threshold) continue;
    if (!found) window.begin = live[k].first;
    window.end = live[k + 1].first;
    found = true;
  }
  for (int i = 0; i < static_cast<int>(b.size()); ++i) {
    if (b[i].end <= window.begin || window.end <= b[i].start) continue;
    if (b[i].start <= window.begin && window.end <= b[i].end) {
      window.stacked.push_back(i);
    } else {
      window.inside.push_back(i);
    }
  }
  std::stable_sort(window.stacked.begin(), window.stacked.end(),
                   [&b](int x, int y) { return b[x].start < b[y].start; });
  return window;
}

absl::StatusOr<Solution> PeakWindowOffsets(const Problem& problem,
                                           const base::CancelToken* cancel) {
  const auto& b = problem.buffers;
  const bool pinned = std::any_of(b.begin(), b.end(), [](const Buffer& x) {
    return x.fixed_offset.has_value();
  });
  std::optional<PeakWindow> window;
  if (!pinned) window = FindPeakWindow(problem, kPeakWindowPerMille);
  if (!window || window->inside.size() > kMaxPeakWindowBuffers) {
    return PlaceInOrder(problem,
                        GreedyPlacementOrder(problem, GreedyOrder::kConflicts),
                        FitPolicy::kBestFit, cancel);
  }
  // The pinned copy: the window's buffers at their offsets.
  Problem planned;
  planned.buffers.reserve(b.size());
  for (const Buffer& x : b) {
    Buffer c;
    c.start = x.start;
    c.end = x.end;
    c.size = x.size;
    c.alignment = x.alignment;
    planned.buffers.push_back(std::move(c));
  }
  Offset top = 0;
  for (int i : window->stacked) {
    const Offset at = AlignUp(top, b[i].alignment);
    planned.buffers[i].fixed_offset = at;
    top = at + b[i].size;
  }
  const Problem cut = WindowProblem(problem, *window);
  absl::StatusOr<Solution> inside =
      cut.buffers.empty() ? Solution{} : PlanWindow(cut, cancel);
  if (!inside.ok()) return inside.status();
  // Above the stack at the largest alignment of the window's own buffers,
  // so that each keeps its own.
  Bytes alignment = 1;
  for (const Buffer& x : cut.buffers)
    alignment = std::max(alignment, x.alignment);
  const Offset base = AlignUp(top, alignment);
  for (size_t k = 0; k < window->inside.size(); ++k) {
    planned.buffers[window->inside[k]].fixed_offset = base + inside->offsets[k];
  }
  return PlaceInOrder(planned,
                      GreedyPlacementOrder(planned, GreedyOrder::kConflicts),
                      FitPolicy::kBestFit, cancel);
}

absl::StatusOr<Solution> PeakWindowStrategy::Solve(
    const Problem& problem, const SolveContext& ctx) const {
  absl::StatusOr<Solution> s = PeakWindowOffsets(problem, ctx.cancel);
  if (s.ok()) UpdateBest(ctx.best_arena, s->arena_size);
  return s;
}

}  // namespace memplan::planner
