#include "planner/planner.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "planner/interference.h"
#include "planner/liveness.h"
#include "planner/portfolio.h"
#include "planner/strategy.h"

namespace memplan::planner {
namespace {

// Times a stage into `result`.
class StageTimer {
 public:
  StageTimer(const char* stage, PlanResult* result)
      : stage_(stage), result_(result), start_(absl::Now()) {}
  ~StageTimer() {
    result_->stages.push_back(
        {stage_, absl::ToInt64Microseconds(absl::Now() - start_)});
  }

 private:
  const char* stage_;
  PlanResult* result_;
  absl::Time start_;
};

// The strategies a request asks for, or INVALID_ARGUMENT.
absl::StatusOr<std::vector<std::string>> ChooseStrategies(
    const std::string& name) {
  if (name.empty() || name == "auto") return StrategyNames();
  for (const std::string& known : StrategyNames()) {
    if (known == name) return std::vector<std::string>{name};
  }
  return absl::InvalidArgumentError(
      MakeStrategy(name).status().message());  // lists the known names
}

// Pools from the interference graph, or from a time index when the graph
// would be over its edge limit.
absl::Status ComputePools(const PlanOptions& options, const CancelToken* cancel,
                          PlanResult* result) {
  absl::StatusOr<InterferenceGraph> graph = [&] {
    StageTimer timer("interference", result);
    return BuildInterferenceGraph(result->problem,
                                  options.max_interference_edges, cancel);
  }();
  if (!graph.ok() && !absl::IsResourceExhausted(graph.status())) {
    return graph.status();
  }
  StageTimer timer("pools", result);
  result->pools = graph.ok() ? ColorPools(result->problem, *graph)
                             : ColorPools(result->problem);
  return absl::OkStatus();
}

// Offset assignment and verification (inside the portfolio).
absl::Status AssignOffsets(const PlanOptions& options, WorkerPool* pool,
                           const CancelToken* cancel, PlanResult* result) {
  absl::StatusOr<std::vector<std::string>> strategies =
      ChooseStrategies(options.strategy);
  if (!strategies.ok()) return strategies.status();
  std::atomic<Bytes> best{std::numeric_limits<Bytes>::max()};
  SolveContext ctx{cancel, &best, nullptr};
  absl::StatusOr<PortfolioResult> won = [&] {
    StageTimer timer("offsets", result);
    return RunPortfolio(result->problem, *strategies, ctx, pool);
  }();
  if (!won.ok()) return won.status();
  result->solution = std::move(won->solution);
  result->strategy = std::move(won->strategy);
  result->stages.push_back({"verify", won->verify_micros});
  result->proven_optimal = result->solution.arena_size == result->lower_bound;
  return absl::OkStatus();
}

absl::Status CheckCapacity(const PlanOptions& options,
                           const PlanResult& result) {
  if (!options.capacity.has_value() ||
      result.solution.arena_size <= *options.capacity) {
    return absl::OkStatus();
  }
  if (result.lower_bound > *options.capacity) {
    return absl::FailedPreconditionError(absl::StrCat(
        "infeasible: the lower bound ", result.lower_bound,
        " bytes exceeds the capacity ", *options.capacity, " bytes"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("no plan found within the capacity ", *options.capacity,
                   " bytes: the best arena is ", result.solution.arena_size,
                   " bytes (lower bound ", result.lower_bound, ")"));
}

// Everything after liveness.
absl::StatusOr<PlanResult> PlanProblem(PlanResult result,
                                       const PlanOptions& options,
                                       WorkerPool* pool,
                                       const CancelToken* cancel) {
  result.lower_bound = LowerBound(result.problem);
  result.naive_bytes = NaiveBytes(result.problem);
  if (auto s = ComputePools(options, cancel, &result); !s.ok()) return s;
  if (auto s = AssignOffsets(options, pool, cancel, &result); !s.ok()) return s;
  if (auto s = CheckCapacity(options, result); !s.ok()) return s;
  return result;
}

}  // namespace

absl::StatusOr<PlanResult> PlanGraph(const Graph& graph,
                                     const PlanOptions& options,
                                     WorkerPool* pool,
                                     const CancelToken* cancel) {
  PlanResult result;
  {
    StageTimer timer("liveness", &result);
    absl::StatusOr<Problem> problem = AnalyzeLiveness(graph, options.alignment);
    if (!problem.ok()) return problem.status();
    result.problem = *std::move(problem);
  }
  result.problem.capacity = options.capacity;
  return PlanProblem(std::move(result), options, pool, cancel);
}

absl::StatusOr<PlanResult> PlanBuffers(Problem problem,
                                       const PlanOptions& options,
                                       WorkerPool* pool,
                                       const CancelToken* cancel) {
  if (absl::Status s = ValidateProblem(problem); !s.ok()) return s;
  PlanResult result;
  result.problem = std::move(problem);
  result.problem.capacity = options.capacity;
  return PlanProblem(std::move(result), options, pool, cancel);
}

}  // namespace memplan::planner
