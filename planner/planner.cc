#include "planner/planner.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "planner/exact_solver.h"
#include "planner/interference.h"
#include "planner/liveness.h"
#include "planner/portfolio.h"
#include "planner/strategy.h"
#include "planner/verifier.h"

namespace memplan::planner {
namespace {

// Times a stage into `stages`.
class StageTimer {
 public:
  StageTimer(const char* stage, std::vector<StageTime>* stages)
      : stage_(stage), stages_(stages), start_(absl::Now()) {}
  StageTimer(const char* stage, PlanResult* result)
      : StageTimer(stage, &result->stages) {}
  ~StageTimer() {
    stages_->push_back(
        {stage_, absl::ToInt64Microseconds(absl::Now() - start_)});
  }

 private:
  const char* stage_;
  std::vector<StageTime>* stages_;
  absl::Time start_;
};

// Adds `elapsed` to the stage named `stage` (appended at its first use), so
// a stage entered several times (verify) is one entry.
void AddStageTime(const char* stage, absl::Duration elapsed,
                  PlanResult* result) {
  const int64_t micros = absl::ToInt64Microseconds(elapsed);
  for (StageTime& s : result->stages) {
    if (s.stage == stage) {
      s.micros += micros;
      return;
    }
  }
  result->stages.push_back({stage, micros});
}

// Problems this large color pools on a worker while offsets are assigned.
constexpr size_t kParallelStagesFrom = 50000;

// Whether to run the exact search after the heuristics: asked for, or
// needed (a capacity the heuristics miss), and able to improve (small
// enough, not within alignment padding of the bound).
bool WorthSearching(const PlanOptions& options, SearchWhen when,
                    const PlanResult& result, const CancelToken* budget) {
  const bool missed_capacity = options.capacity.has_value() &&
                               result.solution.arena_size > *options.capacity;
  const bool asked = when == SearchWhen::kAlways ||
                     (when == SearchWhen::kCapacityMissed && missed_capacity);
  if (!asked || (budget != nullptr && budget->Cancelled())) return false;
  if (static_cast<int64_t>(result.problem.buffers.size()) >
      ExactOptions().max_buffers) {
    return false;
  }
  return result.solution.arena_size > AlignedLowerBound(result.problem);
}

// Runs the exact solver seeded with the heuristics' plan, until the budget
// token (or the effort) stops it, and keeps its plan when it is smaller
// (and verified). Times "search" and its share of "verify".
absl::Status SearchExact(const PlanOptions& options, const CancelToken* budget,
                         std::atomic<Bytes>* best, PlanResult* result) {
  ExactOptions exact;
  if (options.capacity.has_value() &&
      result->solution.arena_size > *options.capacity) {
    exact.mode = ExactMode::kCapacity;
    exact.capacity = options.capacity;
  }
  exact.max_nodes = options.effort;
  SolveContext ctx{budget, best, &result->solution, options.effort};
  absl::StatusOr<ExactResult> found = [&] {
    StageTimer timer("search", result);
    return SolveExact(result->problem, exact, ctx);
  }();
  if (!found.ok()) return found.status();
  result->proven_optimal = result->proven_optimal || found->proven_optimal;
  result->proven_infeasible =
      found->capacity_status == CapacityStatus::kInfeasible;
  if (found->solution.arena_size >= result->solution.arena_size) {
    return absl::OkStatus();
  }
  const absl::Time start = absl::Now();
  absl::Status verified = Verify(result->problem, found->solution);
  AddStageTime("verify", absl::Now() - start, result);
  if (!verified.ok()) {
    return absl::InternalError(absl::StrCat(
        "the exact solver produced an invalid plan: ", verified.message()));
  }
  result->solution = std::move(found->solution);
  result->strategy = "exact";
  return absl::OkStatus();
}

// Pools from the interference graph, or from a time index when the graph
// would be over its edge limit.
absl::Status ComputePools(const Problem& problem, const PlanOptions& options,
                          const CancelToken* cancel, Pools* pools,
                          std::vector<StageTime>* stages) {
  absl::StatusOr<InterferenceGraph> graph = [&] {
    StageTimer timer("interference", stages);
    return BuildInterferenceGraph(problem, options.max_interference_edges,
                                  cancel);
  }();
  if (!graph.ok() && !absl::IsResourceExhausted(graph.status())) {
    return graph.status();
  }
  StageTimer timer("pools", stages);
  *pools = graph.ok() ? ColorPools(problem, *graph) : ColorPools(problem);
  return absl::OkStatus();
}

// Pool coloring as a task on `pool` (for large problems, while the caller
// assigns offsets), or at once. Wait() returns its status.
class PoolsStage {
 public:
  PoolsStage(const PlanOptions& options, WorkerPool* pool,
             const CancelToken* cancel, PlanResult* result)
      : result_(result) {
    auto task = [this, &options, cancel] {
      status_ =
          ComputePools(result_->problem, options, cancel, &pools_, &stages_);
      done_.Notify();
    };
    if (pool == nullptr ||
        result->problem.buffers.size() < kParallelStagesFrom ||
        !pool->TrySchedule(task)) {
      task();
    }
  }
  // Waits for the task and moves its pools and stage times into the result.
  absl::Status Wait() {
    done_.WaitForNotification();
    result_->pools = std::move(pools_);
    result_->stages.insert(result_->stages.end(), stages_.begin(),
                           stages_.end());
    return status_;
  }

 private:
  PlanResult* result_;
  Pools pools_;
  std::vector<StageTime> stages_;
  absl::Status status_;
  absl::Notification done_;
};

// Offset assignment and verification: the portfolio of heuristics, then
// the exact search when worth it. The heuristics a request needs run under
// `cancel`; the optional ones and the search under `budget` (PlanOptions::
// time_budget from the start of planning, within `cancel`).
absl::Status AssignOffsets(const PlanOptions& options, WorkerPool* pool,
                           const CancelToken* cancel, const CancelToken* budget,
                           PlanResult* result) {
  absl::StatusOr<StrategyChoice> choice =
      ResolveStrategy(options.strategy, options.optimize);
  if (!choice.ok()) return choice.status();
  std::atomic<Bytes> best{std::numeric_limits<Bytes>::max()};
  const SolveContext needed{cancel, &best, nullptr, options.effort};
  const SolveContext optional{budget, &best, nullptr, options.effort};
  std::vector<const SolveContext*> contexts;
  for (bool o : choice->optional) contexts.push_back(o ? &optional : &needed);
  const absl::Time start = absl::Now();
  absl::StatusOr<PortfolioResult> won =
      RunPortfolio(result->problem, choice->heuristics, contexts, pool);
  const absl::Duration elapsed = absl::Now() - start;
  if (!won.ok()) return won.status();
  AddStageTime("offsets", elapsed - absl::Microseconds(won->verify_micros),
               result);
  AddStageTime("verify", absl::Microseconds(won->verify_micros), result);
  result->solution = std::move(won->solution);
  result->strategy = std::move(won->strategy);
  result->proven_optimal = result->solution.arena_size == result->lower_bound;
  if (!WorthSearching(options, choice->search, *result, budget)) {
    return absl::OkStatus();
  }
  return SearchExact(options, budget, &best, result);
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
  if (result.proven_infeasible) {
    return absl::FailedPreconditionError(absl::StrCat(
        "infeasible: the exact search proved no plan fits the capacity ",
        *options.capacity, " bytes (lower bound ", result.lower_bound, ")"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("no plan found within the capacity ", *options.capacity,
                   " bytes: the best arena is ", result.solution.arena_size,
                   " bytes (lower bound ", result.lower_bound, ")"));
}

// Merges in-place outputs into their inputs' buffers (when any op is
// in_place and any output qualifies): `result` then plans the merged
// buffers and lists the aliases. Returns the merge, kept for verification.
std::optional<InPlaceMerge> MergeIfInPlace(const Graph& graph,
                                           PlanResult* result) {
  if (std::none_of(graph.ops.begin(), graph.ops.end(),
                   [](const Op& op) { return op.in_place; })) {
    return std::nullopt;
  }
  InPlaceMerge merge = MergeInPlace(graph, result->problem);
  if (merge.aliases.empty()) return std::nullopt;
  for (const InPlaceTensor& a : merge.aliases) {
    const Buffer& t = result->problem.buffers[a.tensor];
    result->in_place.push_back({t.name, result->problem.buffers[a.input].name,
                                a.buffer, a.tensor, t.start, t.end, t.size});
  }
  std::sort(
      result->in_place.begin(), result->in_place.end(),
      [](const auto& x, const auto& y) { return x.position < y.position; });
  std::swap(result->problem, merge.problem);  // merge keeps the tensors
  return merge;
}

// Proves the plan per tensor, in each memory pool apart (one arena when
// there are none): every tensor at its buffer's offset, and no two tensors
// live together sharing memory except in-place hand-overs.
absl::Status VerifyTensors(const InPlaceMerge& merge, PlanResult* result) {
  const absl::Time start = absl::Now();
  const size_t pools = std::max<size_t>(1, result->memory_pools.size());
  const auto pool_of = [&](int tensor) {
    return result->memory_pool_of.empty()
               ? 0
               : result->memory_pool_of[merge.buffer_of[tensor]];
  };
  absl::Status s;
  for (size_t k = 0; k < pools && s.ok(); ++k) {
    std::vector<int> tensors, local(merge.buffer_of.size(), -1);
    for (int t = 0; t < static_cast<int>(merge.buffer_of.size()); ++t) {
      if (pool_of(t) != static_cast<int>(k)) continue;
      local[t] = static_cast<int>(tensors.size());
      tensors.push_back(t);
    }
    Solution per_tensor;
    per_tensor.arena_size = result->memory_pools.empty()
                                ? result->solution.arena_size
                                : result->memory_pools[k].arena_size;
    for (int t : tensors) {
      per_tensor.offsets.push_back(
          result->solution.offsets[merge.buffer_of[t]]);
    }
    std::vector<InPlacePair> pairs;
    for (const InPlaceTensor& a : merge.aliases) {
      if (local[a.tensor] >= 0)
        pairs.push_back({local[a.tensor], local[a.input]});
    }
    s = VerifyInPlace(SubProblem(merge.problem, tensors), per_tensor, pairs);
  }
  for (StageTime& stage : result->stages) {  // part of "verify"
    if (stage.stage == "verify") {
      stage.micros += absl::ToInt64Microseconds(absl::Now() - start);
    }
  }
  if (!s.ok()) {
    return absl::InternalError(
        absl::StrCat("the in-place plan failed verification: ", s.message()));
  }
  return absl::OkStatus();
}

// Plans one memory pool's share with the request's strategies (without a
// capacity, so no search is forced), and keeps the share's own claiming
// plan when theirs does not fit or is larger. Either plan is verified.
absl::StatusOr<MemoryPoolPlan> PlanShare(
    const PlanOptions& options, const MemoryPool& memory,
    const Problem& problem, WorkerPool* pool, const CancelToken* cancel,
    const CancelToken* budget, PoolShare* share) {
  MemoryPoolPlan plan{memory.name,
                      memory.capacity,
                      0,
                      0,
                      static_cast<int>(share->buffers.size()),
                      ""};
  if (share->buffers.empty()) return plan;
  PlanResult sub;
  sub.problem = SubProblem(problem, share->buffers);
  sub.lower_bound = LowerBound(sub.problem);
  plan.lower_bound = sub.lower_bound;
  if (auto s = AssignOffsets(options, pool, cancel, budget, &sub); !s.ok()) {
    return s;
  }
  const bool fits =
      memory.capacity == 0 || sub.solution.arena_size <= memory.capacity;
  if (fits && sub.solution.arena_size <= share->plan.arena_size) {
    share->plan = std::move(sub.solution);
    plan.strategy = sub.strategy;
  } else {
    if (absl::Status s = Verify(sub.problem, share->plan); !s.ok()) {
      return absl::InternalError(absl::StrCat(
          "memory pool '", memory.name, "': invalid plan: ", s.message()));
    }
    plan.strategy = "pool_claim";  // the best-fit pass that filled the pool
  }
  plan.arena_size = share->plan.arena_size;
  return plan;
}

// Splits the buffers over the memory pools and plans each pool on its own.
absl::Status AssignMemoryPools(const PlanOptions& options, WorkerPool* pool,
                               const CancelToken* cancel,
                               const CancelToken* budget, PlanResult* result) {
  if (options.capacity.has_value()) {
    return absl::InvalidArgumentError(
        "capacity and memory_pools cannot be combined: give each pool its "
        "capacity");
  }
  StageTimer timer("offsets", result);
  absl::StatusOr<std::vector<PoolShare>> shares =
      SplitOverPools(result->problem, options.memory_pools, cancel);
  if (!shares.ok()) return shares.status();
  const size_t n = result->problem.buffers.size();
  result->solution.offsets.assign(n, -1);
  result->solution.arena_size = 0;
  result->memory_pool_of.assign(n, -1);
  PlanOptions per_pool = options;
  per_pool.memory_pools.clear();
  for (size_t k = 0; k < shares->size(); ++k) {
    PoolShare& share = (*shares)[k];
    absl::StatusOr<MemoryPoolPlan> plan =
        PlanShare(per_pool, options.memory_pools[k], result->problem, pool,
                  cancel, budget, &share);
    if (!plan.ok()) return plan.status();
    for (size_t j = 0; j < share.buffers.size(); ++j) {
      result->solution.offsets[share.buffers[j]] = share.plan.offsets[j];
      result->memory_pool_of[share.buffers[j]] = static_cast<int>(k);
    }
    result->solution.arena_size += plan->arena_size;
    result->memory_pools.push_back(*std::move(plan));
  }
  // One fixed name (each pool's winner is in memory_pools): metrics label
  // by it, and a client must not be able to mint label values.
  result->strategy = "memory_pools";
  return absl::OkStatus();
}

// Everything after liveness. `budget` ends the optional work (time_budget
// from the start of planning).
absl::StatusOr<PlanResult> PlanProblem(PlanResult result,
                                       const PlanOptions& options,
                                       WorkerPool* pool,
                                       const CancelToken* cancel,
                                       const CancelToken* budget) {
  result.lower_bound = LowerBound(result.problem);
  result.naive_bytes = NaiveBytes(result.problem);
  PoolsStage pools_stage(options, pool, cancel, &result);
  // The offsets below never read result.pools: the two stages are
  // independent, and on large problems they run at the same time.
  absl::Status offsets =
      options.memory_pools.empty()
          ? AssignOffsets(options, pool, cancel, budget, &result)
          : AssignMemoryPools(options, pool, cancel, budget, &result);
  if (absl::Status s = pools_stage.Wait(); !s.ok()) return s;
  if (!offsets.ok()) return offsets;
  if (options.memory_pools.empty()) {
    if (auto s = CheckCapacity(options, result); !s.ok()) return s;
  }
  return result;
}

}  // namespace

absl::StatusOr<PlanResult> PlanGraph(const Graph& graph,
                                     const PlanOptions& options,
                                     WorkerPool* pool,
                                     const CancelToken* cancel) {
  if (absl::Status s = CheckStrategyName(options.strategy); !s.ok()) return s;
  const CancelToken budget(cancel, absl::Now() + options.time_budget);
  PlanResult result;
  std::optional<InPlaceMerge> merge;
  {
    StageTimer timer("liveness", &result);
    absl::StatusOr<Problem> problem = AnalyzeLiveness(graph, options.alignment);
    if (!problem.ok()) return problem.status();
    result.problem = *std::move(problem);
    merge = MergeIfInPlace(graph, &result);
  }
  result.problem.capacity = options.capacity;
  absl::StatusOr<PlanResult> planned =
      PlanProblem(std::move(result), options, pool, cancel, &budget);
  if (!planned.ok() || !merge.has_value()) return planned;
  if (absl::Status s = VerifyTensors(*merge, &*planned); !s.ok()) return s;
  return planned;
}

absl::StatusOr<PlanResult> PlanBuffers(Problem problem,
                                       const PlanOptions& options,
                                       WorkerPool* pool,
                                       const CancelToken* cancel) {
  if (absl::Status s = CheckStrategyName(options.strategy); !s.ok()) return s;
  const CancelToken budget(cancel, absl::Now() + options.time_budget);
  if (absl::Status s = ValidateProblem(problem); !s.ok()) return s;
  PlanResult result;
  result.problem = std::move(problem);
  result.problem.capacity = options.capacity;
  return PlanProblem(std::move(result), options, pool, cancel, &budget);
}

}  // namespace memplan::planner
