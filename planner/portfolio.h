// Stage 4, offset assignment: runs several strategies at once as tasks on the
// worker pool and keeps the smallest verified plan. Ties go to the strategy
// listed first, so the same input and options always give the same plan
// whatever the thread timing.
//
//   absl::StatusOr<planner::PortfolioResult> r = planner::RunPortfolio(
//       problem, {"best_fit_size", "first_fit_size"}, ctx, &pool);
#ifndef MEMPLAN_PLANNER_PORTFOLIO_H_
#define MEMPLAN_PLANNER_PORTFOLIO_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/worker_pool.h"
#include "planner/strategy.h"

namespace memplan::planner {

struct PortfolioResult {
  Solution solution;          // the winner's plan, verified (below)
  std::string strategy;       // the winner's name
  int64_t verify_micros = 0;  // time the verifier took on the winner
  // False when the winner was not verified because the plan raced beside
  // the heuristics beat it (HeuristicRace::Beaten, the first context's
  // race): the caller takes that plan instead, or verifies this one.
  bool verified = true;
  // Strategies not run because one listed before them reached the lower
  // bound.
  int skipped = 0;
};

// Runs `strategies` (names for MakeStrategy) on `pool` (or inline where the
// pool is null or full, or the problem is small) and waits for all of them.
// The smallest plan that passes the verifier wins; plans are verified from
// the smallest up, so a broken plan is never returned. DEADLINE_EXCEEDED when
// cancelled before any plan; INTERNAL when every plan failed verification.
[[nodiscard]] absl::StatusOr<PortfolioResult> RunPortfolio(
    const Problem& problem, const std::vector<std::string>& strategies,
    const SolveContext& ctx, base::WorkerPool* pool);

// The same with a context per strategy (contexts[i] for strategies[i], not
// null): e.g. the heuristics a request needs under the caller's token, the
// optional ones under the time budget. With `lower_bound` (> 0: no plan is
// smaller), a strategy is skipped once one listed before it has reached
// the bound: it could at best tie, and ties go to the earlier one, so the
// winner is the same as if all had run. The winner is verified under
// `verify`'s token (and on its time windows), by default contexts[0]'s:
// give the call's own where every strategy runs under the time budget, or
// a plan the budget cut (the hill climb's best so far) is lost with it.
// REQUIRES equal sizes.
[[nodiscard]] absl::StatusOr<PortfolioResult> RunPortfolio(
    const Problem& problem, const std::vector<std::string>& strategies,
    const std::vector<const SolveContext*>& contexts, base::WorkerPool* pool,
    Bytes lower_bound = 0, const SolveContext* verify = nullptr);

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_PORTFOLIO_H_
