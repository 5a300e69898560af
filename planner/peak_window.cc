#include "planner/peak_window.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <functional>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
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
constexpr int kWindowOrderCount = static_cast<int>(std::size(kWindowOrders));

// The climbs from the orders are independent: on the threads `parallel`
// gives they run at once (those after one ending at the bound cancelled),
// and the plan is then picked as one thread taking them in order would,
// so it is the same on any thread count. (S_1's window: 12 ms on one
// thread for three climbs; pangu_2.6B's: 20 ms for four.)
absl::StatusOr<Solution> PlanWindow(const Problem& cut,
                                    const base::CancelToken* cancel,
                                    const base::Parallelism& parallel) {
  const int64_t share = kHillClimbWork / kWindowOrderCount;
  HillClimbOptions climb;
  climb.stop_at = AlignedLowerBound(cut);
  climb.iterations = std::min(
      share / std::max<int64_t>(PlacementWork(cut), 1) - 1, kMaxWindowMoves);
  std::deque<base::CancelToken> tokens;  // per order (a token does not move)
  for (int k = 0; k < kWindowOrderCount; ++k) {
    tokens.emplace_back(cancel, absl::InfiniteFuture());
  }
  std::vector<absl::StatusOr<Solution>> plans(
      kWindowOrderCount, absl::CancelledError("not needed"));
  std::atomic<int> next{0};
  // The first order whose plan ends at the bound: those after it are not
  // needed.
  std::atomic<int> at_bound{kWindowOrderCount};
  base::RunTogether(
      parallel,
      [&](int thread) {
        while (!base::ShouldYield(parallel, thread)) {
          const int k = next.fetch_add(1);
          if (k >= kWindowOrderCount) return;
          if (k > at_bound.load()) continue;
          std::vector<int> order = GreedyPlacementOrder(cut, kWindowOrders[k]);
          absl::StatusOr<Solution> placed =
              PlaceInOrder(cut, order, FitPolicy::kBestFit, &tokens[k]);
          if (placed.ok() && climb.iterations > 0) {
            placed = HillClimb(cut, std::move(order), *std::move(placed), climb,
                               &tokens[k])
                         .solution;
          }
          if (placed.ok() && placed->arena_size <= climb.stop_at) {
            int seen = at_bound.load();
            while (k < seen && !at_bound.compare_exchange_weak(seen, k)) {
            }
            for (int later = k + 1; later < kWindowOrderCount; ++later) {
              tokens[later].Cancel();
            }
          }
          plans[k] = std::move(placed);
        }
      },
      base::Recruit::kAsPlacesFree);
  std::optional<Solution> best;
  for (absl::StatusOr<Solution>& s : plans) {
    if (!s.ok()) return s.status();
    if (!best || s->arena_size < best->arena_size) best = *std::move(s);
    if (best->arena_size <= climb.stop_at) break;
  }
  return *std::move(best);
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

namespace {

// One variant's plan in three steps, so that its two sides can be placed on
// two threads, and other variants meanwhile: Begin (the window stacked and
// planned, the sides' problems built), PlaceSide for each side (on any
// thread, the two at once), End (the whole plan).
class VariantPlan {
 public:
  // FAILED_PRECONDITION where the variant does not apply (pinned buffers,
  // more than kMaxPeakWindowBuffers in part of the window); ABORTED when
  // the window alone reaches `below` (> 0); DEADLINE_EXCEEDED once `cancel`
  // (may be null) fires. OK: the sides are to be placed, if has_sides().
  // The window's climbs run on the threads `parallel` gives.
  absl::Status Begin(const Problem& problem, PeakWindowVariant variant,
                     const base::CancelToken* cancel, Bytes below,
                     const base::Parallelism& parallel);
  // False for a problem without buffers: its plan is empty.
  bool has_sides() const { return has_sides_; }
  // The buffers on side k (0: before the window, 1: after it).
  size_t side_size(int k) const { return sides_[k].problem.buffers.size(); }
  // Places side k with best fit by conflicts around the window's buffers.
  void PlaceSide(int k, const base::CancelToken* cancel);
  // The whole plan once both sides are placed (their status if one
  // failed); ABORTED when it reaches `below`.
  absl::StatusOr<Solution> End(const Problem& problem);

 private:
  Bytes below_ = 0;
  bool has_sides_ = false;
  Solution solution_;  // the window's buffers placed, -1 for the others
  Side sides_[2];
};

absl::Status VariantPlan::Begin(const Problem& problem,
                                PeakWindowVariant variant,
                                const base::CancelToken* cancel, Bytes below,
                                const base::Parallelism& parallel) {
  below_ = below;
  const auto& b = problem.buffers;
  if (std::any_of(b.begin(), b.end(),
                  [](const Buffer& x) { return x.fixed_offset.has_value(); })) {
    return absl::FailedPreconditionError(
        "pinned buffers: the window's buffers cannot be stacked");
  }
  std::optional<PeakWindow> window = FindPeakWindow(problem, variant, cancel);
  if (cancel != nullptr && cancel->Cancelled()) return Cancelled();
  if (!window) return absl::OkStatus();  // no buffers
  if (window->inside.size() > kMaxPeakWindowBuffers) {
    return absl::FailedPreconditionError(absl::StrCat(
        window->inside.size(), " buffers live in part of the window (at most ",
        kMaxPeakWindowBuffers, ")"));
  }
  // The window's buffers: the stack, then the window's own plan above it
  // at the largest alignment of its buffers, so that each keeps its own.
  solution_.offsets.assign(b.size(), -1);
  Offset top = 0;
  for (int i : window->stacked) {
    solution_.offsets[i] = AlignUp(top, b[i].alignment);
    top = solution_.offsets[i] + b[i].size;
  }
  const Problem cut = WindowProblem(problem, *window);
  absl::StatusOr<Solution> inside =
      cut.buffers.empty() ? Solution{} : PlanWindow(cut, cancel, parallel);
  if (!inside.ok()) return inside.status();
  // (A climb the token cut short must not pass for a window too high.)
  if (cancel != nullptr && cancel->Cancelled()) return Cancelled();
  Bytes alignment = 1;
  for (const Buffer& x : cut.buffers) {
    alignment = std::max(alignment, x.alignment);
  }
  const Offset base = AlignUp(top, alignment);
  for (size_t k = 0; k < window->inside.size(); ++k) {
    solution_.offsets[window->inside[k]] = base + inside->offsets[k];
  }
  if (below > 0) {
    Offset window_top = top;
    for (int i : window->inside) {
      window_top = std::max(window_top, solution_.offsets[i] + b[i].size);
    }
    if (window_top >= below) {
      return absl::AbortedError(absl::StrCat(
          "the window alone ends at ", window_top, ", not below ", below));
    }
  }
  // The other buffers, with best fit by conflicts around those pinned. The
  // buffers before the window and those after it never live at once, so
  // each side is placed apart, with the pins alone: each buffer sees what
  // it would in one pass over both (its conflicts, so its place in the
  // order, are on its side), so the plan is that pass's.
  for (int i = 0; i < static_cast<int>(b.size()); ++i) {
    const bool in_window = solution_.offsets[i] >= 0;
    for (int k = 0; k < 2; ++k) {
      const bool on_side =
          k == 0 ? b[i].end <= window->begin : window->end <= b[i].start;
      if (!in_window && !on_side) continue;
      Buffer c = Unnamed(b[i]);
      if (in_window) c.fixed_offset = solution_.offsets[i];
      sides_[k].problem.buffers.push_back(std::move(c));
      sides_[k].index.push_back(i);
    }
  }
  if (cancel != nullptr && cancel->Cancelled()) return Cancelled();
  has_sides_ = true;
  return absl::OkStatus();
}

void VariantPlan::PlaceSide(int k, const base::CancelToken* cancel) {
  Side& side = sides_[k];
  absl::StatusOr<std::vector<int>> order =
      GreedyPlacementOrder(side.problem, GreedyOrder::kConflicts, cancel);
  if (!order.ok()) {
    side.placed = order.status();
    return;
  }
  side.placed = below_ > 0 ? PlaceInOrderWithin(side.problem, *order,
                                                below_ - 1, nullptr, cancel)
                           : PlaceInOrder(side.problem, *order,
                                          FitPolicy::kBestFit, cancel);
}

absl::StatusOr<Solution> VariantPlan::End(const Problem& problem) {
  if (!has_sides_) return Solution{};
  const auto& b = problem.buffers;
  Solution solution = std::move(solution_);
  Side sides[2] = {std::move(sides_[0]), std::move(sides_[1])};  // freed here
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
  if (below_ > 0 && solution.arena_size >= below_) {
    return absl::AbortedError(absl::StrCat(
        "the plan ends at ", solution.arena_size, ", not below ", below_));
  }
  return solution;
}

// Variants placed at once on the threads a Parallelism gives, each with the
// plan it gets when the variants are placed one after another on one
// thread (PlanPeakWindow's order), whatever the threads. The pieces are
// taken lowest variant first: a variant's window, then its sides, the
// larger first; a thread whose next piece would be a later variant's waits
// while an earlier one is still planning its window (its sides come
// first). A piece of a variant while an earlier one has not ended (so
// possibly wasted) is taken only with three threads or more: then the
// first variant's sides are placed at once and the second variant while
// they are; on two, the variants one after another, each's sides at once.
//
// Each variant is placed below `below` (> 0; 0: none) and below the
// smallest plan of the variants before it that have ended, a limit no
// tighter than one after another gives: a plan it lets through is not
// below an earlier one, so not kept either way. A variant ending at or
// below `stop_at` cancels those after it (one after another, they would
// not run).
class VariantRuns {
 public:
  VariantRuns(const Problem& problem, absl::Span<const PeakWindowVariant> tried,
              Bytes stop_at, Bytes below, const base::CancelToken* cancel)
      : problem_(problem),
        stop_at_(stop_at),
        below_(below),
        stop_after_(static_cast<int>(tried.size()) - 1) {
    for (const PeakWindowVariant& v : tried) variants_.emplace_back(v, cancel);
  }

  // The first variant's window is planned on the calling thread before
  // any helper is asked for (one would only wait for it): then the pieces
  // left on the threads `parallel` gives.
  void Run(const base::Parallelism& parallel) {
    mu_.Lock();
    Step(parallel, 0);
    mu_.Unlock();
    base::RunTogether(parallel, [&](int thread) {
      mu_.Lock();
      while (Step(parallel, thread)) {
      }
      mu_.Unlock();
    });
  }

  // The last variant needed: the first ending at or below `stop_at`, else
  // the last. Valid after Run.
  int stop_after() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return stop_after_;  // (RunTogether has joined every thread)
  }
  // Variant v's plan or status (v <= stop_after()), moved out.
  absl::StatusOr<Solution> Take(int v) {
    return std::move(variants_[v].result);
  }

 private:
  enum class State { kWaiting, kBeginning, kSides, kEnded };
  struct Variant {
    Variant(PeakWindowVariant v, const base::CancelToken* parent)
        : variant(v), cancel(parent, absl::InfiniteFuture()) {}
    const PeakWindowVariant variant;
    base::CancelToken cancel;  // the caller's, or cancelled when not needed
    State state = State::kWaiting;
    int sides_taken = 0;
    int sides_placed = 0;
    VariantPlan plan;
    absl::StatusOr<Solution> result = Solution{};
  };

  // Takes the next piece for `thread` and does it, or waits a moment for
  // one; false when none is left for it (or a helper should yield to other
  // calls' tasks waiting in the pool).
  bool Step(const base::Parallelism& parallel, int thread)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (base::ShouldYield(parallel, thread)) return false;
    int v = 0;
    for (; v <= stop_after_; ++v) {
      const Variant& x = variants_[v];
      if (x.state == State::kWaiting || x.state == State::kBeginning ||
          (x.state == State::kSides && x.sides_taken < 2)) {
        break;
      }
    }
    if (v > stop_after_) return false;  // every piece taken
    Variant& x = variants_[v];
    // A variant before it not ended yet: this piece may be wasted (that
    // one may reach `stop_at`). Taken only with a third thread: two
    // memory-bound placements at once slow each other (on 2 vCPUs the first
    // variant's side took a third longer beside a second variant's).
    const bool speculative =
        std::any_of(variants_.begin(), variants_.begin() + v,
                    [](const Variant& u) { return u.state != State::kEnded; });
    if (x.state == State::kBeginning ||
        (speculative && parallel.helpers() < 2)) {
      // Its sides, or the earlier variant's end, come first. (A helper
      // asks again whether to yield.)
      changed_.WaitWithTimeout(&mu_, absl::Milliseconds(2));
      return true;
    }
    if (x.state == State::kWaiting) {
      x.state = State::kBeginning;
      const Bytes limit = LimitFor(v);
      mu_.Unlock();
      // The window's climbs at once too, where pieces may be speculative
      // (three threads or more): a variant's window is what its sides
      // wait for.
      const absl::Status begun = x.plan.Begin(
          problem_, x.variant, &x.cancel, limit,
          parallel.helpers() >= 2
              ? base::Parallelism{parallel.workers, kWindowOrderCount}
              : base::Parallelism{});
      mu_.Lock();
      if (!begun.ok() || !x.plan.has_sides()) {
        Ended(v, begun.ok() ? absl::StatusOr<Solution>(Solution{}) : begun);
      } else {
        x.state = State::kSides;
      }
      changed_.SignalAll();
      return true;
    }
    const int larger = x.plan.side_size(1) > x.plan.side_size(0) ? 1 : 0;
    const int side = x.sides_taken++ == 0 ? larger : 1 - larger;
    mu_.Unlock();
    x.plan.PlaceSide(side, &x.cancel);
    mu_.Lock();
    if (++x.sides_placed < 2) return true;
    mu_.Unlock();
    absl::StatusOr<Solution> whole = x.plan.End(problem_);
    mu_.Lock();
    Ended(v, std::move(whole));
    changed_.SignalAll();
    return true;
  }

  // The limit variant v is placed below: `below` or the smallest plan of
  // the variants before it that have ended.
  Bytes LimitFor(int v) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Bytes limit = below_;
    for (int u = 0; u < v; ++u) {
      const Variant& x = variants_[u];
      if (x.state == State::kEnded && x.result.ok() &&
          (limit == 0 || x.result->arena_size < limit)) {
        limit = x.result->arena_size;
      }
    }
    return limit;
  }

  void Ended(int v, absl::StatusOr<Solution> result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Variant& x = variants_[v];
    x.state = State::kEnded;
    x.result = std::move(result);
    if (x.result.ok() && x.result->arena_size <= stop_at_ && v < stop_after_) {
      stop_after_ = v;
      for (size_t w = v + 1; w < variants_.size(); ++w) {
        variants_[w].cancel.Cancel();
      }
    }
  }

  const Problem& problem_;
  const Bytes stop_at_;
  const Bytes below_;
  std::deque<Variant> variants_;  // (a CancelToken does not move)
  absl::Mutex mu_;
  absl::CondVar changed_;
  int stop_after_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<Solution> PeakWindowOffsets(const Problem& problem,
                                           PeakWindowVariant variant,
                                           const base::CancelToken* cancel,
                                           const base::Parallelism& parallel,
                                           Bytes below) {
  VariantRuns runs(problem, absl::MakeConstSpan(&variant, 1), /*stop_at=*/0,
                   below, cancel);
  runs.Run({parallel.workers, std::min(parallel.max_threads, 2)});
  return runs.Take(0);
}

absl::StatusOr<PeakWindowPlan> PlanPeakWindow(const Problem& problem,
                                              int variants, Bytes stop_at,
                                              const base::CancelToken* cancel,
                                              const base::Parallelism& parallel,
                                              Bytes below) {
  PeakWindowPlan plan;
  // (Fewer than none: all of them, as the loop one after another ran.)
  const int count = variants < 0 ? kPeakWindowVariantCount
                                 : std::min(variants, kPeakWindowVariantCount);
  if (count == 0) return plan;
  VariantRuns runs(problem, absl::MakeConstSpan(kPeakWindowVariants, count),
                   stop_at, below, cancel);
  runs.Run(parallel);
  for (int v = 0; v <= runs.stop_after(); ++v) {
    ++plan.variants_run;
    absl::StatusOr<Solution> s = runs.Take(v);
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
