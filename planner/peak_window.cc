#include "planner/peak_window.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/parallel.h"
#include "base/sort.h"
#include "planner/greedy.h"
#include "planner/hill_climb.h"

namespace memplan::planner {
namespace {

// The orders the window's own problem is placed in before its climb, in
// tie-break order.
constexpr GreedyOrder kWindowOrders[] = {
    GreedyOrder::kSize, GreedyOrder::kConflicts, GreedyOrder::kArea,
    GreedyOrder::kBreadth};

// `b` without its name (placement does not read names: the copies of the
// pass's own problems stay small).
Buffer Unnamed(const Buffer& b) {
  Buffer c;
  c.start = b.start;
  c.end = b.end;
  c.size = b.size;
  c.alignment = b.alignment;
  return c;
}

// The buffers of `inside`, their lifetimes cut to [begin, end), as a
// problem of their own.
Problem WindowProblem(const Problem& problem, const PeakWindow& window) {
  Problem cut;
  cut.buffers.reserve(window.inside.size());
  for (int i : window.inside) {
    Buffer c = Unnamed(problem.buffers[i]);
    c.start = std::max(c.start, window.begin);
    c.end = std::min(c.end, window.end);
    cut.buffers.push_back(std::move(c));
  }
  return cut;
}

// A tight plan of the window's own problem: a hill climb from each of
// kWindowOrders (placed with best fit), each within a quarter of
// kHillClimbWork (its first placement included; at most kMaxWindowMoves
// moves; none where one placement takes the quarter), until one ends at
// the problem's bound; the smallest plan, the first of equals. (On S_1's
// window only the climb from the order by area reaches its bound: 69
// moves; those from size and conflicts stop 7% above it after 1,000.)
constexpr int64_t kMaxWindowMoves = 1000;
absl::StatusOr<Solution> PlanWindow(const Problem& cut,
                                    const base::CancelToken* cancel) {
  Solution best;
  bool have = false;
  const int64_t share =
      kHillClimbWork / static_cast<int64_t>(std::size(kWindowOrders));
  HillClimbOptions climb;
  climb.stop_at = AlignedLowerBound(cut);
  climb.iterations = std::min(
      share / std::max<int64_t>(PlacementWork(cut), 1) - 1, kMaxWindowMoves);
  for (GreedyOrder o : kWindowOrders) {
    std::vector<int> order = GreedyPlacementOrder(cut, o);
    absl::StatusOr<Solution> placed =
        PlaceInOrder(cut, order, FitPolicy::kBestFit, cancel);
    if (!placed.ok()) return placed.status();
    Solution s = *std::move(placed);
    if (climb.iterations > 0) {
      s = HillClimb(cut, std::move(order), std::move(s), climb, cancel)
              .solution;
    }
    if (!have || s.arena_size < best.arena_size) {
      best = std::move(s);
      have = true;
    }
    if (best.arena_size <= climb.stop_at) break;
  }
  return best;
}

absl::Status Cancelled() {
  return absl::DeadlineExceededError(
      "cancelled while planning the peak window");
}

// One side of the window: its buffers and the window's, pinned, as a
// problem of their own; where each is in the whole problem; its plan.
struct Side {
  Problem problem;
  std::vector<int> index;
  absl::StatusOr<Solution> placed = Solution{};
};

}  // namespace

std::optional<PeakWindow> FindPeakWindow(const Problem& problem,
                                         PeakWindowVariant variant,
                                         const base::CancelToken* cancel) {
  const auto& b = problem.buffers;
  if (b.empty()) return std::nullopt;
  // Live bytes step by step: +size at each start, -size at each end.
  std::vector<std::pair<Step, Bytes>> events;
  events.reserve(2 * b.size());
  for (const Buffer& x : b) {
    events.push_back({x.start, x.size});
    events.push_back({x.end, -x.size});
  }
  if (!base::SortOrCancel(events.begin(), events.end(), std::less<>(),
                          cancel)) {
    return std::nullopt;
  }
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
  const Bytes threshold = peak - peak / 1000 * variant.per_mille;
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
  if (variant.stack == StackBy::kFirstStep) {
    std::stable_sort(window.stacked.begin(), window.stacked.end(),
                     [&b](int x, int y) { return b[x].start < b[y].start; });
  } else {
    std::stable_sort(window.stacked.begin(), window.stacked.end(),
                     [&b](int x, int y) { return b[x].end > b[y].end; });
  }
  return window;
}

absl::StatusOr<Solution> PeakWindowOffsets(const Problem& problem,
                                           PeakWindowVariant variant,
                                           const base::CancelToken* cancel,
                                           const base::Parallelism& parallel,
                                           Bytes below) {
  const auto& b = problem.buffers;
  if (std::any_of(b.begin(), b.end(),
                  [](const Buffer& x) { return x.fixed_offset.has_value(); })) {
    return absl::FailedPreconditionError(
        "pinned buffers: the window's buffers cannot be stacked");
  }
  std::optional<PeakWindow> window = FindPeakWindow(problem, variant, cancel);
  if (cancel != nullptr && cancel->Cancelled()) return Cancelled();
  if (!window) return Solution{};  // no buffers
  if (window->inside.size() > kMaxPeakWindowBuffers) {
    return absl::FailedPreconditionError(absl::StrCat(
        window->inside.size(), " buffers live in part of the window (at most ",
        kMaxPeakWindowBuffers, ")"));
  }
  // The window's buffers: the stack, then the window's own plan above it
  // at the largest alignment of its buffers, so that each keeps its own.
  Solution solution;
  solution.offsets.assign(b.size(), -1);
  Offset top = 0;
  for (int i : window->stacked) {
    solution.offsets[i] = AlignUp(top, b[i].alignment);
    top = solution.offsets[i] + b[i].size;
  }
  const Problem cut = WindowProblem(problem, *window);
  absl::StatusOr<Solution> inside =
      cut.buffers.empty() ? Solution{} : PlanWindow(cut, cancel);
  if (!inside.ok()) return inside.status();
  // (A climb the token cut short must not pass for a window too high.)
  if (cancel != nullptr && cancel->Cancelled()) return Cancelled();
  Bytes alignment = 1;
  for (const Buffer& x : cut.buffers) {
    alignment = std::max(alignment, x.alignment);
  }
  const Offset base = AlignUp(top, alignment);
  for (size_t k = 0; k < window->inside.size(); ++k) {
    solution.offsets[window->inside[k]] = base + inside->offsets[k];
  }
  if (below > 0) {
    Offset window_top = top;
    for (int i : window->inside) {
      window_top = std::max(window_top, solution.offsets[i] + b[i].size);
    }
    if (window_top >= below) {
      return absl::AbortedError(absl::StrCat(
          "the window alone ends at ", window_top, ", not below ", below));
    }
  }
  // The other buffers, with best fit by conflicts around those pinned. The
  // buffers before the window and those after it never live at once, so
  // each side is placed apart, with the pins alone (the two at once on
  // `parallel`): each buffer sees what it would in one pass over both
  // (its conflicts, so its place in the order, are on its side), so the
  // plan is that pass's. The sides are built here, on the calling thread.
  Side sides[2];
  for (int i = 0; i < static_cast<int>(b.size()); ++i) {
    const bool in_window = solution.offsets[i] >= 0;
    for (int k = 0; k < 2; ++k) {
      const bool on_side =
          k == 0 ? b[i].end <= window->begin : window->end <= b[i].start;
      if (!in_window && !on_side) continue;
      Buffer c = Unnamed(b[i]);
      if (in_window) c.fixed_offset = solution.offsets[i];
      sides[k].problem.buffers.push_back(std::move(c));
      sides[k].index.push_back(i);
    }
  }
  if (cancel != nullptr && cancel->Cancelled()) return Cancelled();
  std::atomic<int> next{0};
  base::RunTogether(
      {parallel.workers, std::min(parallel.max_threads, 2)}, [&](int) {
        for (int k; (k = next.fetch_add(1)) < 2;) {
          Side& side = sides[k];
          absl::StatusOr<std::vector<int>> order = GreedyPlacementOrder(
              side.problem, GreedyOrder::kConflicts, cancel);
          if (!order.ok()) {
            side.placed = order.status();
            continue;
          }
          side.placed = below > 0
                            ? PlaceInOrderWithin(side.problem, *order,
                                                 below - 1, nullptr, cancel)
                            : PlaceInOrder(side.problem, *order,
                                           FitPolicy::kBestFit, cancel);
        }
      });
  for (const Side& side : sides) {
    if (!side.placed.ok()) return side.placed.status();
    for (size_t k = 0; k < side.index.size(); ++k) {
      solution.offsets[side.index[k]] = side.placed->offsets[k];
    }
  }
  for (size_t i = 0; i < b.size(); ++i) {
    solution.arena_size =
        std::max(solution.arena_size, solution.offsets[i] + b[i].size);
  }
  // A side cut into time windows places every buffer, without giving up.
  if (below > 0 && solution.arena_size >= below) {
    return absl::AbortedError(absl::StrCat(
        "the plan ends at ", solution.arena_size, ", not below ", below));
  }
  return solution;
}

absl::StatusOr<PeakWindowPlan> PlanPeakWindow(const Problem& problem,
                                              int variants, Bytes stop_at,
                                              const base::CancelToken* cancel,
                                              const base::Parallelism& parallel,
                                              Bytes below) {
  PeakWindowPlan plan;
  for (const PeakWindowVariant& v : kPeakWindowVariants) {
    if (plan.variants_run == variants) break;
    ++plan.variants_run;
    const Bytes limit =
        plan.solution ? plan.solution->arena_size : below;  // 0: none
    absl::StatusOr<Solution> s =
        PeakWindowOffsets(problem, v, cancel, parallel, limit);
    if (absl::IsFailedPrecondition(s.status())) continue;
    ++plan.variants_placed;
    if (absl::IsAborted(s.status())) {
      if (cancel != nullptr && cancel->Cancelled()) return Cancelled();
      continue;
    }
    if (!s.ok()) return s.status();
    if (!plan.solution || s->arena_size < plan.solution->arena_size) {
      plan.solution = *std::move(s);
    }
    if (plan.solution->arena_size <= stop_at) break;
  }
  return plan;
}

absl::StatusOr<Solution> PeakWindowStrategy::Solve(
    const Problem& problem, const SolveContext& ctx) const {
  absl::StatusOr<PeakWindowPlan> p =
      PlanPeakWindow(problem, kPeakWindowVariantCount,
                     AlignedLowerBound(problem), ctx.cancel, ctx.parallel);
  if (!p.ok()) return p.status();
  Solution best;
  if (p->solution) {
    best = *std::move(p->solution);
  } else {  // no variant applies
    absl::StatusOr<Solution> s = PlaceInOrder(
        problem, GreedyPlacementOrder(problem, GreedyOrder::kConflicts),
        FitPolicy::kBestFit, ctx.cancel);
    if (!s.ok()) return s.status();
    best = *std::move(s);
  }
  UpdateBest(ctx.best_arena, best.arena_size);
  return best;
}

}  // namespace memplan::planner
