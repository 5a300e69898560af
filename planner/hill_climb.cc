#include "planner/hill_climb.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/status/status.h"
#include "planner/time_index.h"

namespace memplan::planner {
namespace {

constexpr int64_t kMaxEffort = int64_t{1} << 50;  // effort x work fits
constexpr int64_t kMinIterations = 8;
constexpr int64_t kMaxIterations = 1000;

// The orders tried as seeds, in tie-break order.
constexpr GreedyOrder kSeedOrders[] = {
    GreedyOrder::kSize, GreedyOrder::kArea, GreedyOrder::kConflicts,
    GreedyOrder::kBreadth, GreedyOrder::kLifetime};

// The climb's state: the current order, its inverse, and the plan it gives.
class Climber {
 public:
  Climber(const Problem& problem, std::vector<int> order, Solution solution,
          uint64_t seed)
      : problem_(problem),
        order_(std::move(order)),
        pos_(order_.size()),
        solution_(std::move(solution)),
        time_(*CompressTime(problem)),
        index_(time_),
        rng_(seed) {
    for (size_t k = 0; k < order_.size(); ++k) pos_[order_[k]] = k;
    for (int i = 0; i < static_cast<int>(problem_.buffers.size()); ++i) {
      index_.Insert(i, i);
    }
  }

  // One move: perturb, re-place, keep when no larger. Returns false when
  // cancelled during the placement.
  bool Step(const base::CancelToken* cancel, bool* accepted) {
    const std::vector<int> saved = order_;
    Perturb();
    // A placement that passes the best arena is given up: it would not be
    // kept.
    absl::StatusOr<Solution> next = PlaceInOrderWithin(
        problem_, order_, solution_.arena_size, &time_, cancel);
    if (!next.ok() && !absl::IsAborted(next.status())) return false;
    *accepted = next.ok() && next->arena_size <= solution_.arena_size;
    if (*accepted) {
      solution_ = *std::move(next);
    } else {
      order_ = saved;
      for (size_t k = 0; k < order_.size(); ++k) pos_[order_[k]] = k;
    }
    return true;
  }

  const Solution& solution() const { return solution_; }
  const std::vector<int>& order() const { return order_; }

 private:
  uint64_t Pick(uint64_t n) {
    return rng_() % n;
  }  // portable, unlike
     // std distributions

  // Moves a buffer at the arena's top ahead of (or swaps it with) an
  // earlier-placed buffer it overlaps in time: only a change at the top can
  // lower the arena. Falls back to swapping two random positions.
  void Perturb() {
    const std::vector<int> tops = TopBuffers();
    std::vector<int> earlier;
    int top = -1;
    if (!tops.empty()) {
      top = tops[Pick(tops.size())];
      index_.ForEachOverlapping(top, [&](int c) {
        if (pos_[c] < pos_[top] && !problem_.buffers[c].fixed_offset) {
          earlier.push_back(c);
        }
      });
    }
    if (earlier.empty()) {
      SwapPositions(Pick(order_.size()), Pick(order_.size()));
      return;
    }
    std::sort(earlier.begin(), earlier.end());  // visit order is not fixed
    const int other = earlier[Pick(earlier.size())];
    if (Pick(2) == 0) {
      SwapPositions(pos_[top], pos_[other]);
    } else {
      MoveBefore(pos_[top], pos_[other]);
    }
  }

  // Unpinned buffers whose end is the arena's size, by index.
  std::vector<int> TopBuffers() const {
    std::vector<int> tops;
    const auto& b = problem_.buffers;
    for (int i = 0; i < static_cast<int>(b.size()); ++i) {
      if (!b[i].fixed_offset &&
          solution_.offsets[i] + b[i].size == solution_.arena_size) {
        tops.push_back(i);
      }
    }
    return tops;
  }

  void SwapPositions(size_t a, size_t b) {
    std::swap(order_[a], order_[b]);
    pos_[order_[a]] = a;
    pos_[order_[b]] = b;
  }

  // Moves the entry at `from` to `to` (to < from), shifting the rest up.
  void MoveBefore(size_t from, size_t to) {
    std::rotate(order_.begin() + to, order_.begin() + from,
                order_.begin() + from + 1);
    for (size_t k = to; k <= from; ++k) pos_[order_[k]] = k;
  }

  const Problem& problem_;
  std::vector<int> order_;   // the current placement order
  std::vector<size_t> pos_;  // pos_[buffer] = its place in order_
  Solution solution_;        // the plan order_ gives (best so far)
  Sections time_;            // compressed lifetimes
  TimeIndex<int> index_;     // every buffer, by lifetime
  std::mt19937_64 rng_;      // the move generator
};

// The best best-fit plan over kSeedOrders, and its order.
absl::StatusOr<std::pair<std::vector<int>, Solution>> BestSeed(
    const Problem& problem, const base::CancelToken* cancel) {
  std::pair<std::vector<int>, Solution> best;
  bool have = false;
  for (GreedyOrder o : kSeedOrders) {
    std::vector<int> order = GreedyPlacementOrder(problem, o);
    absl::StatusOr<Solution> s =
        PlaceInOrder(problem, order, FitPolicy::kBestFit, cancel);
    if (!s.ok()) return s.status();
    if (!have || s->arena_size < best.second.arena_size) {
      best = {std::move(order), *std::move(s)};
      have = true;
    }
  }
  return best;
}

}  // namespace

int64_t HillClimbIterations(int64_t placement_work, int64_t work) {
  return std::clamp(work / std::max<int64_t>(placement_work, 1), kMinIterations,
                    kMaxIterations);
}

absl::StatusOr<HillClimbResult> HillClimb(const Problem& problem,
                                          std::vector<int> seed_order,
                                          const HillClimbOptions& options,
                                          const base::CancelToken* cancel) {
  absl::StatusOr<Solution> seed =
      PlaceInOrder(problem, seed_order, FitPolicy::kBestFit, cancel);
  if (!seed.ok()) return seed.status();
  return HillClimb(problem, std::move(seed_order), *std::move(seed), options,
                   cancel);
}

HillClimbResult HillClimb(const Problem& problem, std::vector<int> seed_order,
                          Solution seed, const HillClimbOptions& options,
                          const base::CancelToken* cancel) {
  HillClimbResult result;
  result.seed_arena = seed.arena_size;
  const int64_t n = static_cast<int64_t>(problem.buffers.size());
  const auto done = [&options](const Solution& s) {
    return options.stop_at > 0 && s.arena_size <= options.stop_at;
  };
  if (n < 2 || n > kMaxHillClimbBuffers || done(seed)) {
    result.solution = std::move(seed);
    result.order = std::move(seed_order);
    return result;
  }
  int64_t iterations = options.iterations;
  if (iterations <= 0) {
    iterations =
        HillClimbIterations(PlacementWork(problem),
                            options.work > 0 ? options.work : kHillClimbWork);
  }
  Climber climber(problem, std::move(seed_order), std::move(seed),
                  options.seed);
  for (; result.iterations < iterations; ++result.iterations) {
    if (done(climber.solution())) break;
    if (cancel != nullptr && cancel->Cancelled()) break;
    bool accepted = false;
    if (!climber.Step(cancel, &accepted)) break;
    result.accepted += accepted ? 1 : 0;
  }
  result.solution = climber.solution();
  result.order = climber.order();
  return result;
}

absl::StatusOr<Solution> HillClimbStrategy::Solve(
    const Problem& problem, const SolveContext& ctx) const {
  absl::StatusOr<std::pair<std::vector<int>, Solution>> seed =
      BestSeed(problem, ctx.cancel);
  if (!seed.ok()) return seed.status();
  HillClimbOptions options = options_;
  if (options.work <= 0 && ctx.effort > 0) {
    options.work = ctx.effort > kMaxEffort
                       ? kMaxEffort * kHillClimbWorkPerEffort
                       : ctx.effort * kHillClimbWorkPerEffort;
  }
  absl::StatusOr<HillClimbResult> climbed =
      HillClimb(problem, std::move(seed->first), options, ctx.cancel);
  // Cancelled while re-placing the seed: the seed is still a plan.
  Solution best =
      climbed.ok() ? std::move(climbed->solution) : std::move(seed->second);
  UpdateBest(ctx.best_arena, best.arena_size);
  return best;
}

}  // namespace memplan::planner
