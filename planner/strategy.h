// Offset assignment strategies: each places every buffer of a Problem inside
// one arena. Strategies are swapped without changing their callers
// (tflite-micro's MicroMemoryPlanner idea); the portfolio (portfolio.h) runs
// several at once and keeps the smallest verified plan.
//
// The registry here is the one place strategy names live: one table (name,
// factory, fixed tie-break order), and the one interpretation of "auto",
// "exact" and optimize (ResolveStrategy).
//
//   if (absl::Status s = planner::CheckStrategyName(name); !s.ok()) return s;
//   auto strategy = planner::MakeStrategy("best_fit_size");
//   absl::StatusOr<planner::Solution> s = (*strategy)->Solve(problem, ctx);
#ifndef MEMPLAN_PLANNER_STRATEGY_H_
#define MEMPLAN_PLANNER_STRATEGY_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/cancel.h"
#include "base/parallel.h"
#include "planner/problem.h"

namespace memplan::planner {

class SizeOrderCache;  // greedy.h

// Heuristics whose plans may stop mattering before they end: the default
// plan's first heuristics beside the peak window (planner.cc). A plan
// "far" above the bound (arena > far_above) is one the plan beside them
// replaces once it is settled below that; a heuristic then gives up when
// its placement's top so far is already far above (its arena can only be
// larger). When every heuristic ends without a plan and one of them gave
// up, the plan beside them is the plan (the one-thread path would have had
// that heuristic's plan far above, and replaced it). Which plan wins never
// changes: only the time spent on plans that lose. Greedy heuristics report
// to it; others never give up. Thread-safe.
class HeuristicRace {
 public:
  // `heuristics` slots, one per heuristic of the portfolio.
  HeuristicRace(int heuristics, Bytes far_above)
      : far_above_(far_above), top_(heuristics) {
    for (auto& t : top_) t.store(0, std::memory_order_relaxed);
  }
  HeuristicRace(const HeuristicRace&) = delete;
  HeuristicRace& operator=(const HeuristicRace&) = delete;

  // The heuristic of `slot` has placed buffers up to `top` (never lower
  // than what it reported before).
  void Reached(int slot, Bytes top) {
    top_[slot].store(top, std::memory_order_relaxed);
  }
  // The plan beside them ended at or below far_above.
  void Settle() { settled_.store(true); }
  // Whether the heuristic of `slot` (still running) should give up; once
  // it is told so, gave_up() is true.
  bool GiveUp(int slot) {
    if (!settled_.load() ||
        top_[slot].load(std::memory_order_relaxed) <= far_above_) {
      return false;
    }
    gave_up_.store(true);
    return true;
  }
  // Whether a heuristic was told to give up: its plan would have ended far
  // above.
  bool gave_up() const { return gave_up_.load(); }
  // Whether a plan of `arena` bytes loses to the plan beside: that plan is
  // settled, and this one ends far above.
  bool Beaten(Bytes arena) const {
    return settled_.load() && arena > far_above_;
  }

 private:
  const Bytes far_above_;
  std::vector<std::atomic<Bytes>> top_;  // per slot: top so far
  std::atomic<bool> settled_{false};
  std::atomic<bool> gave_up_{false};
};

// What a strategy may read while it runs. All pointers may be null.
struct SolveContext {
  // Polled in every long loop; a cancelled strategy returns
  // DEADLINE_EXCEEDED (or CANCELLED), or its best plan so far if it has one.
  const base::CancelToken* cancel = nullptr;
  // The smallest arena any strategy of the portfolio has found so far; an
  // exact search prunes against it. Strategies may lower it (fetch-min).
  std::atomic<Bytes>* best_arena = nullptr;
  // A valid plan to start from (the best heuristic plan), if any.
  const Solution* seed = nullptr;
  // When > 0, the work a search strategy may do (PlanOptions::effort): the
  // hill climb's greedy work and the exact search's nodes are bounded by it
  // instead of by the clock, so the plan does not depend on the machine.
  // Default 0: the strategy's own defaults, cut by `cancel`.
  int64_t effort = 0;
  // When > 0, the work (base::WorkMeter units) a greedy heuristic may do before
  // it gives up with RESOURCE_EXHAUSTED: set for the first plan of a
  // request (FirstPlanWorkCap), whose fallback is the O(n log n)
  // "sweep_best_fit".
  int64_t work_cap = 0;
  // The problem's compressed time (CompressTime), when the caller computed
  // it for several stages; null: the strategy computes its own.
  const Sections* time = nullptr;
  // Workers a strategy may split its own work over (greedy placement by
  // time windows): the plan never depends on them. Default: none.
  base::Parallelism parallel;
  // Where a greedy heuristic reports its progress, as slot `race_slot`, and
  // learns to give up (DEADLINE_EXCEEDED) when its plan cannot matter.
  HeuristicRace* race = nullptr;
  int race_slot = 0;
  // The problem's size order, kept for the stages of one plan that read
  // it (greedy.h); null, or another problem's: the strategy sorts its own.
  SizeOrderCache* size_order = nullptr;
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
// a Plan RPC cheap; where they end above it, the exact search follows within
// TightSearchNodes (work_cap.h). "auto" with optimize runs them, the
// default plan's steps, the rest of HeuristicNames(), then the exact search,
// within the time budget (StrategyChoice).
const std::vector<std::string>& QuickHeuristicNames();

// Every strategy MakeStrategy knows: the heuristics, then "exact".
const std::vector<std::string>& StrategyNames();

// OK for "auto" (or empty, meaning "auto") and every name of
// StrategyNames(); else INVALID_ARGUMENT listing the valid names, echoing
// at most the first 64 bytes of `name` (escaped). Cheap: call it where a
// request enters, before any work.
[[nodiscard]] absl::Status CheckStrategyName(std::string_view name);

// When the exact search runs after a request's heuristics.
enum class SearchWhen {
  kNever,           // a single heuristic was asked for
  kCapacityMissed,  // only to meet a capacity the heuristics miss
  // "auto" without optimize: to meet a capacity the heuristics miss (within
  // the time budget), else when they end above the aligned lower bound,
  // within TightSearchNodes (work_cap.h) and no time budget, so the plan
  // is the same on any machine, under any load, with any worker count.
  kAboveBound,
  kAlways,  // asked for: "exact", or "auto" with optimize
};

// What a strategy name (with PlanOptions::optimize) asks for.
struct StrategyChoice {
  // Run by the portfolio, in tie-break order: QuickHeuristicNames() for
  // "auto" (with optimize too: the other heuristics are `later`) and
  // "exact" (the search's seeds); a heuristic: itself.
  std::vector<std::string> heuristics;
  // Of them, the ones that may be cut by the time budget (the rest give the
  // plan a request needs): with "auto" and optimize, all but the first.
  std::vector<bool> optional;
  // "auto" with optimize: the rest of HeuristicNames(), all cut by the time
  // budget, after the default plan's steps (`default_steps`) on a list the
  // search takes, else beside `heuristics`.
  std::vector<std::string> later;
  // When the exact search follows.
  SearchWhen search = SearchWhen::kNever;
  // Whether the heuristics a request needs run under FirstPlanWorkCap
  // (work_cap.h), with kFallbackStrategy's plan when all of them pass it:
  // "auto" and "exact". A heuristic asked for by name runs under
  // kNamedHeuristicWorkFactor times that cap (work_cap.h), then the same.
  bool capped = false;
  // Whether the default plan's steps above the bound (the skyline pass by
  // area, the search bounded by nodes, the skyline pass by size) follow
  // the heuristics on a list the search takes, within the time budget,
  // before `later` and the search: "exact" and "auto" with optimize, so
  // that a budget that allows them never ends above the default plan (the
  // optimize portfolio alone took 160 ms of MiniMalloc's C, 203 buffers,
  // and a 50 ms budget ended 29% above it).
  bool default_steps = false;
};

// The O(n log n) plan a request gets when its first heuristics pass their
// work cap (sweep.h).
inline constexpr std::string_view kFallbackStrategy = "sweep_best_fit";

// The one interpretation of "auto", "exact" and optimize. INVALID_ARGUMENT
// as CheckStrategyName.
[[nodiscard]] absl::StatusOr<StrategyChoice> ResolveStrategy(
    std::string_view name, bool optimize);

// Creates a strategy by name (a name of StrategyNames()); INVALID_ARGUMENT
// as CheckStrategyName otherwise ("auto" is not one strategy).
absl::StatusOr<std::unique_ptr<OffsetStrategy>> MakeStrategy(
    std::string_view name);

enum class GreedyOrder;  // greedy.h
enum class FitPolicy;    // greedy.h

// The registry's name of the greedy strategy with this order and fit (what
// GreedyStrategy::name() reports).
std::string_view GreedyStrategyName(GreedyOrder order, FitPolicy fit);

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_STRATEGY_H_
