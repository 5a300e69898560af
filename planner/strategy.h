// Offset assignment strategies: each places every buffer of a Problem inside
// one arena. Strategies are swapped without changing their callers
// (tflite-micro's MicroMemoryPlanner idea); the portfolio (portfolio.h) runs
// several at once and keeps the smallest verified plan.
//
//   auto strategy = planner::MakeStrategy("best_fit_size");
//   absl::StatusOr<planner::Solution> s = (*strategy)->Solve(problem, ctx);
#ifndef MEMPLAN_PLANNER_STRATEGY_H_
#define MEMPLAN_PLANNER_STRATEGY_H_

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/cancel.h"
#include "planner/problem.h"

namespace memplan::planner {

// What a strategy may read while it runs. All pointers may be null.
struct SolveContext {
  // Polled in every long loop; a cancelled strategy returns
  // DEADLINE_EXCEEDED (or CANCELLED), or its best plan so far if it has one.
  const CancelToken* cancel = nullptr;
  // The smallest arena any strategy of the portfolio has found so far; an
  // exact search prunes against it. Strategies may lower it (fetch-min).
  std::atomic<Bytes>* best_arena = nullptr;
  // A valid plan to start from (the best heuristic plan), if any.
  const Solution* seed = nullptr;
};

// Lowers `best` to `value` if `value` is smaller (atomic fetch-min).
inline void UpdateBest(std::atomic<Bytes>* best, Bytes value) {
  if (best == nullptr) return;
  Bytes current = best->load(std::memory_order_relaxed);
  while (value < current && !best->compare_exchange_weak(
                                current, value, std::memory_order_relaxed)) {
  }
}

// Interface of an offset assignment strategy. Implementations are
// thread-safe: Solve is const and keeps its state on the stack.
class OffsetStrategy {
 public:
  virtual ~OffsetStrategy() = default;
  // A stable name, reported in responses and metrics (no spaces).
  virtual std::string_view name() const = 0;
  // Places every buffer; respects fixed offsets and alignment. Returns
  // INVALID_ARGUMENT for a problem it cannot take, DEADLINE_EXCEEDED when
  // cancelled before it has a plan.
  virtual absl::StatusOr<Solution> Solve(const Problem& problem,
                                         const SolveContext& ctx) const = 0;
};

// Names of the heuristics, in the fixed tie-break order the portfolio uses.
const std::vector<std::string>& HeuristicNames();

// What "auto" runs without optimize: greedy by size with best and first fit
// (TFLite's ArenaPlanner and tflite-micro's greedy planner), the first two
// of HeuristicNames(). They reach the lower bound on typical graphs and keep
// a Plan RPC cheap; "auto" with optimize runs all of HeuristicNames(), then
// the exact search.
const std::vector<std::string>& QuickHeuristicNames();

// Every strategy MakeStrategy knows: the heuristics, then "exact".
const std::vector<std::string>& StrategyNames();

// Creates a strategy by name; NOT_FOUND for an unknown name.
absl::StatusOr<std::unique_ptr<OffsetStrategy>> MakeStrategy(
    std::string_view name);

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_STRATEGY_H_
