#include "planner/portfolio.h"

#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/time/clock.h"
#include "planner/verifier.h"

namespace memplan::planner {
namespace {

// Runs one strategy and verifies its plan.
absl::StatusOr<PortfolioResult> RunOne(const Problem& problem,
                                       const std::string& name,
                                       const SolveContext& ctx) {
  absl::StatusOr<std::unique_ptr<OffsetStrategy>> strategy = MakeStrategy(name);
  if (!strategy.ok()) return strategy.status();
  absl::StatusOr<Solution> solution = (*strategy)->Solve(problem, ctx);
  if (!solution.ok()) return solution.status();
  absl::Time start = absl::Now();
  if (absl::Status s = Verify(problem, *solution); !s.ok()) {
    return absl::InternalError(absl::StrCat(
        "strategy ", name, " produced an invalid plan: ", s.message()));
  }
  return PortfolioResult{*std::move(solution), name,
                         absl::ToInt64Microseconds(absl::Now() - start)};
}

}  // namespace

absl::StatusOr<PortfolioResult> RunPortfolio(
    const Problem& problem, const std::vector<std::string>& strategies,
    const SolveContext& ctx, WorkerPool* pool) {
  std::vector<std::optional<absl::StatusOr<PortfolioResult>>> results(
      strategies.size());
  absl::BlockingCounter done(static_cast<int>(strategies.size()));
  for (size_t i = 0; i < strategies.size(); ++i) {
    auto task = [&, i] {
      results[i] = RunOne(problem, strategies[i], ctx);
      done.DecrementCount();
    };
    if (pool == nullptr || !pool->TrySchedule(task)) task();
  }
  done.Wait();

  int winner = -1;
  absl::Status first_error;
  for (size_t i = 0; i < results.size(); ++i) {
    const absl::StatusOr<PortfolioResult>& r = *results[i];
    if (!r.ok()) {
      if (first_error.ok() || absl::IsInternal(r.status())) {
        first_error = r.status();
      }
      continue;
    }
    if (winner < 0 ||
        r->solution.arena_size < (*results[winner])->solution.arena_size) {
      winner = static_cast<int>(i);
    }
  }
  if (winner < 0) {
    return first_error.ok() ? absl::InvalidArgumentError("no strategy given")
                            : first_error;
  }
  return *std::move(*results[winner]);
}

}  // namespace memplan::planner
