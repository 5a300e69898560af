#include "planner/planner.h"

#include <algorithm>
#include <atomic>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/parallel.h"
#include "planner/exact/exact_solver.h"
#include "planner/greedy.h"
#include "planner/hill_climb.h"
#include "planner/in_place.h"
#include "planner/liveness.h"
#include "planner/memory_spaces.h"
#include "planner/peak_window.h"
#include "planner/portfolio.h"
#include "planner/sections.h"
#include "planner/skyline.h"
#include "planner/strategy.h"
#include "planner/verifier.h"
#include "planner/windows.h"
#include "planner/work_cap.h"

namespace memplan::planner {
namespace {

// Adds `micros` to the stage named `stage` of `stages` (appended at its
// first use), so a stage entered several times (verify; search, the
// default plan's bounded one and then a missed capacity's) is one entry.
void AddStageMicros(const char* stage, int64_t micros,
                    std::vector<StageTime>* stages) {
  for (StageTime& s : *stages) {
    if (s.stage == stage) {
      s.micros += micros;
      return;
    }
  }
  stages->push_back({stage, micros});
}

// Times a stage into `stages` (AddStageMicros).
class StageTimer {
 public:
  StageTimer(const char* stage, std::vector<StageTime>* stages)
      : stage_(stage), stages_(stages), start_(absl::Now()) {}
  StageTimer(const char* stage, PlanResult* result)
      : StageTimer(stage, &result->stages) {}
  ~StageTimer() {
    AddStageMicros(stage_, absl::ToInt64Microseconds(absl::Now() - start_),
                   stages_);
  }

 private:
  const char* stage_;
  std::vector<StageTime>* stages_;
  absl::Time start_;
};

// AddStageMicros into the result's stages.
void AddStageTime(const char* stage, absl::Duration elapsed,
                  PlanResult* result) {
  AddStageMicros(stage, absl::ToInt64Microseconds(elapsed), &result->stages);
}

// A portfolio's wall time `elapsed`: its verification (`verify_micros`)
// to "verify", the rest to "offsets".
void AddPortfolioTime(absl::Duration elapsed, int64_t verify_micros,
                      PlanResult* result) {
  AddStageTime("offsets", elapsed - absl::Microseconds(verify_micros), result);
  AddStageTime("verify", absl::Microseconds(verify_micros), result);
}

// Problems this large, up to those cut into time windows (which split
// each stage instead), color shared objects on a worker while offsets are
// assigned.
constexpr size_t kParallelStagesFrom = 8192;

// The threads one request of `n` buffers may use: the workers, up to
// PlanOptions::max_threads (the caller included), once the problem is
// large enough to be cut into time windows; below that the caller alone
// (waking workers would cost a small request more than it saves).
base::Parallelism ParallelismOf(const PlanOptions& options,
                                base::WorkerPool* workers, size_t n) {
  if (n < 2 * static_cast<size_t>(kBuffersPerWindow)) return {};
  return {workers, RequestThreads(options)};
}

// Whether the heuristics' plan misses the capacity asked for.
bool MissedCapacity(const PlanOptions& options, const PlanResult& result) {
  return options.capacity.has_value() &&
         result.solution.arena_size > *options.capacity;
}

// AlignedLowerBound of the plan's problem, from its compressed time `time`
// when at hand (O(n); may be null: swept, O(n log n)).
// When a search must end for the call to answer before `cancel`'s
// earliest deadline: a tenth of the time left from `start`, at least
// 50 ms, before it (never, without one).
absl::Time DeadlineReserveEnd(const base::CancelToken* cancel,
                              absl::Time start) {
  // (A parent's deadline too: a Benchmark's token is a child of the call's.)
  const absl::Time deadline =
      cancel == nullptr ? absl::InfiniteFuture() : cancel->EarliestDeadline();
  if (deadline == absl::InfiniteFuture()) return deadline;
  const absl::Duration left = deadline - start;
  return start + left - std::max(left / 10, absl::Milliseconds(50));
}

Bytes AlignedBound(const PlanResult& result, const Sections* time) {
  return time != nullptr ? AlignedLowerBound(result.problem, *time)
                         : AlignedLowerBound(result.problem);
}

// Whether to run the exact search after the heuristics: asked for, or
// needed (a capacity the heuristics miss; the default plan above the
// bound), and able to improve (small enough, above the lower bound). The
// default plan stops within alignment padding of the bound (at or below
// AlignedLowerBound); a search asked for, or a capacity missed, only at
// the bound itself: AlignedLowerBound rounds every size up to its
// alignment, which a plan need not (a 10-byte buffer aligned to 64 on top
// of the arena takes 10), so it can lie above the best plan.
bool WorthSearching(const PlanOptions& options, SearchWhen when,
                    const PlanResult& result, const Sections* time) {
  const bool missed = MissedCapacity(options, result);
  const bool asked = when == SearchWhen::kAlways ||
                     when == SearchWhen::kAboveBound ||
                     (when == SearchWhen::kCapacityMissed && missed);
  if (!asked) return false;
  if (static_cast<int64_t>(result.problem.buffers.size()) >
      ExactOptions().max_buffers) {
    return false;
  }
  if (when == SearchWhen::kAboveBound && !missed) {
    return result.solution.arena_size > AlignedBound(result, time);
  }
  return result.solution.arena_size > result.lower_bound;
}

// The search of the default plan (SearchWhen::kAboveBound, no capacity
// missed): the smallest arena within TightSearchNodes, on one thread, so
// that the plan depends on the input only; without the PQ-tree sweep, whose
// set-up costs more than the heuristics on a few hundred buffers and which
// closed no gap on the models of BENCHMARKS.md that the orderings' first
// dives did not.
ExactOptions TightSearch(const Problem& problem) {
  ExactOptions exact;
  exact.max_nodes =
      TightSearchNodes(static_cast<int64_t>(problem.buffers.size()));
  exact.threads = 1;
  exact.pq_sweep = false;
  return exact;
}

// Takes `plan`, verified, as `strategy`'s: proven optimal at the bound.
void Adopt(Solution plan, std::string strategy, PlanResult* result) {
  result->solution = std::move(plan);
  result->strategy = std::move(strategy);
  result->proven_optimal = result->proven_optimal ||
                           result->solution.arena_size == result->lower_bound;
}

// The error for a plan of `strategy` the verifier rejected with `verified`.
absl::Status InvalidPlan(const std::string& strategy,
                         const absl::Status& verified) {
  return absl::InternalError(absl::StrCat("the ", strategy,
                                          " strategy produced an invalid "
                                          "plan: ",
                                          verified.message()));
}

// Verifies `plan`, `strategy`'s, under `cancel` and takes it (Adopt).
// INTERNAL when the verifier rejects it; DEADLINE_EXCEEDED, the result
// unchanged, when the call ended first. Adds the verifier's time to
// "verify".
absl::Status VerifyAndAdopt(Solution plan, std::string strategy,
                            const base::CancelToken* cancel,
                            PlanResult* result) {
  const absl::Time start = absl::Now();
  absl::Status verified = Verify(result->problem, plan, cancel);
  AddStageTime("verify", absl::Now() - start, result);
  if (absl::IsDeadlineExceeded(verified)) return verified;
  if (!verified.ok()) return InvalidPlan(strategy, verified);
  Adopt(std::move(plan), std::move(strategy), result);
  return absl::OkStatus();
}

// Keeps `plan`, `strategy`'s, in place of the result's when smaller and
// the verifier passes it (VerifyAndAdopt); a call that ended before the
// verifier did keeps the verified plan it has.
absl::Status KeepIfSmaller(Solution plan, std::string strategy,
                           const base::CancelToken* cancel,
                           PlanResult* result) {
  if (plan.arena_size >= result->solution.arena_size) {
    return absl::OkStatus();
  }
  absl::Status kept =
      VerifyAndAdopt(std::move(plan), std::move(strategy), cancel, result);
  return absl::IsDeadlineExceeded(kept) ? absl::OkStatus() : kept;
}

// Runs the exact solver seeded with the heuristics' plan, until `budget`
// (or the effort) stops it, and keeps its plan when it is smaller (and
// verified under `cancel`, the call's own token: a search the budget ended
// still hands over the best plan it found). `tight`: the default plan's
// search (TightSearch), under `cancel` alone. `parallel`: the threads the
// other searches run on. Times "search" and its share of "verify".
absl::Status SearchExact(const PlanOptions& options, bool tight,
                         const base::Parallelism& parallel,
                         const base::CancelToken* cancel,
                         const base::CancelToken* budget,
                         std::atomic<Bytes>* best, PlanResult* result) {
  ExactOptions exact;
  if (tight) {
    exact = TightSearch(result->problem);
  } else if (MissedCapacity(options, *result)) {
    exact.mode = ExactMode::kCapacity;
    exact.capacity = options.capacity;
  }
  if (!tight) exact.max_nodes = options.effort;
  SolveContext ctx{budget, best, &result->solution, exact.max_nodes};
  // The search's threads (ExactOptions::threads): the same plan on any
  // count under an effort. The default plan's search stays on one.
  if (!tight) ctx.parallel = parallel;
  absl::StatusOr<ExactResult> found = [&] {
    StageTimer timer("search", result);
    return SolveExact(result->problem, exact, ctx);
  }();
  if (!found.ok()) return found.status();
  result->proven_optimal = result->proven_optimal || found->proven_optimal;
  result->proven_infeasible =
      found->capacity_status == CapacityStatus::kInfeasible;
  return KeepIfSmaller(std::move(found->solution), "exact", cancel, result);
}

// One skyline pass of the default plan (skyline.h) with `ties`, within
// SkylineWorkCap, on the problem's compressed time `time` (may be null),
// until `token` fires: keeps its plan when smaller (KeepIfSmaller, its
// verification under `cancel`, the call's own token). A pass cut by its
// cap or `token` leaves the plan as it was. Adds its time to "offsets".
absl::Status PlaceOnSkyline(SkylineTies ties, const Sections* time,
                            const base::CancelToken* token,
                            const base::CancelToken* cancel,
                            PlanResult* result) {
  SkylineOptions options;
  options.ties = ties;
  options.work_cap = SkylineWorkCap(result->problem.buffers.size());
  options.time = time;
  const absl::Time start = absl::Now();
  absl::StatusOr<Solution> placed =
      SkylineOffsets(result->problem, token, options);
  AddStageTime("offsets", absl::Now() - start, result);
  if (!placed.ok()) {
    // The plan stays: past its work cap, out of time, or (INVALID_ARGUMENT)
    // its arena would pass 2^63 where the heuristics' fits (buffers pinned
    // near 2^62).
    return absl::IsResourceExhausted(placed.status()) ||
                   absl::IsDeadlineExceeded(placed.status()) ||
                   absl::IsInvalidArgument(placed.status())
               ? absl::OkStatus()
               : placed.status();
  }
  return KeepIfSmaller(*std::move(placed),
                       std::string(SkylineStrategy(ties).name()), cancel,
                       result);
}

// From this many workers a request may use (Parallelism::helpers), the
// default plan places the peak window beside the heuristics (AssignOffsets):
// the heuristics (two placements at once), the shared objects and the
// window's two sides then have a thread each.
constexpr int kPeakWindowBesideFromHelpers = 4;

// ClimbAboveBound runs on plans more than 1/kClimbAbovePerMille above the
// aligned bound.
constexpr Bytes kClimbAbovePerMille = 1000;

// Best fit in the two orders the default heuristics do not try (conflicts,
// breadth) under `ctx` (the heuristics' work cap, the call's token), then
// `moves` moves of a hill climb (hill_climb.h) from the smaller of the two,
// ending at the bound. Keeps a smaller plan; a cap or the call's deadline
// reached leaves the plan it has. Adds its time to "offsets" and "verify".
absl::Status ClimbFromSeeds(const SolveContext& ctx, base::WorkerPool* workers,
                            const base::CancelToken* cancel, int64_t moves,
                            PlanResult* result) {
  struct Seed {
    GreedyOrder order;
    const char* strategy;
  };
  static constexpr Seed kSeeds[] = {
      {GreedyOrder::kConflicts, "best_fit_conflicts"},
      {GreedyOrder::kBreadth, "best_fit_breadth"}};
  const Problem& problem = result->problem;
  const absl::Time start = absl::Now();
  std::vector<std::string> names;
  for (const Seed& seed : kSeeds) names.emplace_back(seed.strategy);
  absl::StatusOr<PortfolioResult> seeded =
      RunPortfolio(problem, names, ctx, workers);
  if (!seeded.ok()) {
    AddStageTime("offsets", absl::Now() - start, result);
    return absl::IsResourceExhausted(seeded.status()) ||
                   absl::IsDeadlineExceeded(seeded.status())
               ? absl::OkStatus()
               : seeded.status();
  }
  AddStageTime("verify", absl::Microseconds(seeded->verify_micros), result);
  HillClimbOptions climb;
  climb.iterations = moves;
  climb.stop_at = AlignedBound(*result, ctx.time);
  GreedyOrder order = kSeeds[0].order;
  for (const Seed& seed : kSeeds) {
    if (seeded->strategy == seed.strategy) order = seed.order;
  }
  HillClimbResult climbed =
      HillClimb(problem, GreedyPlacementOrder(problem, order), seeded->solution,
                climb, cancel);
  AddStageTime("offsets",
               absl::Now() - start - absl::Microseconds(seeded->verify_micros),
               result);
  if (climbed.solution.arena_size < seeded->solution.arena_size) {
    return KeepIfSmaller(std::move(climbed.solution), "hill_climb", cancel,
                         result);
  }
  if (seeded->solution.arena_size < result->solution.arena_size) {
    // Verified by the portfolio already.
    Adopt(std::move(seeded->solution), std::move(seeded->strategy), result);
  }
  return absl::OkStatus();
}

// Whether the plan is more than 1/kClimbAbovePerMille above the aligned
// bound.
bool FarAboveBound(const PlanResult& result, const Sections* time) {
  const Bytes bound = AlignedBound(result, time);
  return result.solution.arena_size - bound > bound / kClimbAbovePerMille;
}

// The peak window variants ClimbAboveBound tries on a problem whose greedy
// placement costs `placement` (PlacementWork): with `optimize` all of them,
// else the first kDefaultPeakWindowVariants that fit in kTightClimbWork.
int PeakWindowVariantsToTry(int64_t placement, bool optimize) {
  if (optimize) return kPeakWindowVariantCount;
  return static_cast<int>(std::min<int64_t>(
      kTightClimbWork / PeakWindowWork(placement), kDefaultPeakWindowVariants));
}

// The default plan more than 0.1% above the aligned bound on a problem too
// large for the search (over ExactOptions::max_buffers, up to
// kMaxHillClimbBuffers; closer, each step's 0.05-0.1 s of placement would
// buy at most that 0.1%: bert_base's trace is 0.001% above): the peak
// window's first kDefaultPeakWindowVariants variants (peak_window.h) until
// one reaches the bound, then, still above, best fit in two more orders
// and a hill climb (ClimbFromSeeds), all within kTightClimbWork (work_cap.h):
// as many variants as fit (PeakWindowWork each), then the climb's orders and as
// many moves as fit in what they left; or, with `optimize`, every variant
// and kTightClimbMoves moves whatever the work (its portfolio runs the
// peak window too, but its time budget may cut it first: on S_1 the
// default 1 s does). Work, not time: the plan depends on the input only.
// Keeps a smaller plan; a cap or the call's deadline reached leaves the
// plan it has. Adds its time to "offsets" and "verify".
//
// `beside` (may be null): the peak window's variants already placed, whole
// (PlanPeakWindow without `below`), beside the heuristics; they count and
// keep what a run below the plan at hand would (the same plan).
absl::Status ClimbAboveBound(const SolveContext& ctx, base::WorkerPool* workers,
                             const base::CancelToken* cancel, bool optimize,
                             absl::StatusOr<PeakWindowPlan>* beside,
                             PlanResult* result) {
  constexpr int64_t kSeedOrders = 2;  // ClimbFromSeeds' orders
  const int64_t placement = PlacementWork(result->problem);
  const int variants = PeakWindowVariantsToTry(placement, optimize);
  int64_t spent = 0;
  if (variants > 0) {
    absl::StatusOr<PeakWindowPlan> peak;
    if (beside != nullptr) {
      peak = *std::move(beside);
      // Given up below the plan at hand, as PlanPeakWindow's `below` would.
      if (peak.ok() && peak->solution &&
          peak->solution->arena_size >= result->solution.arena_size) {
        peak->solution.reset();
      }
    } else {
      const absl::Time start = absl::Now();
      peak = PlanPeakWindow(result->problem, variants,
                            AlignedBound(*result, ctx.time), cancel,
                            {workers, 2}, result->solution.arena_size);
      AddStageTime("offsets", absl::Now() - start, result);
    }
    if (!peak.ok()) {
      return absl::IsDeadlineExceeded(peak.status()) ? absl::OkStatus()
                                                     : peak.status();
    }
    // Not those not applying.
    spent = peak->variants_placed * PeakWindowWork(placement);
    if (peak->solution) {
      absl::Status kept = KeepIfSmaller(*std::move(peak->solution),
                                        "peak_window", cancel, result);
      if (!kept.ok()) return kept;
    }
  }
  if (!FarAboveBound(*result, ctx.time)) return absl::OkStatus();
  const int64_t moves = optimize
                            ? kTightClimbMoves
                            : TightClimbMoves(placement, kSeedOrders, spent);
  if (moves == 0) return absl::OkStatus();
  return ClimbFromSeeds(ctx, workers, cancel, moves, result);
}

// The plan of the peak window placed beside the heuristics, settled at or
// below ClimbAboveBound's line (HeuristicRace), when every heuristic ended
// without a plan and one gave up the race: verified and taken
// (VerifyAndAdopt), as ClimbAboveBound would have taken it over that
// heuristic's plan far above (after which no climb follows).
absl::Status AdoptSettledWindow(
    std::optional<absl::StatusOr<PeakWindowPlan>> peak,
    const base::CancelToken* cancel, PlanResult* result) {
  if (!peak.has_value() || !peak->ok() || !(*peak)->solution.has_value()) {
    return absl::InternalError("the race was settled without a window plan");
  }
  return VerifyAndAdopt(*std::move((*peak)->solution), "peak_window", cancel,
                        result);
}

// Shared objects colored from a time index of the colored lifetimes
// (shared_objects.h): the objects a coloring of the materialized
// interference graph gives, without building it. Building it cost more
// than the coloring itself on every input measured (a 193-tensor graph:
// about twice the instructions; 75,000- and 300,000-buffer graph-like
// lists: 25 and 107 ms of a 91 and 414 ms plan on one core, the coloring
// no slower without it; BENCHMARKS.md, session 16); dense and large lists
// went without it already. (Past the coloring's work cap, far above what
// a list of sparse lifetimes can reach, the objects come from the sweep.)
absl::Status ComputeSharedObjects(const Problem& problem,
                                  const base::Parallelism& parallel,
                                  const Sections* time,
                                  const base::CancelToken* cancel,
                                  SizeOrderCache* size_order,
                                  SharedObjects* objects,
                                  std::vector<StageTime>* stages) {
  StageTimer timer("pools", stages);
  absl::StatusOr<SharedObjects> colored =
      ColorSharedObjects(problem, cancel, time, parallel, size_order);
  if (!colored.ok()) return colored.status();
  *objects = *std::move(colored);
  return absl::OkStatus();
}

// Shared-object coloring as a task for the workers (for large problems,
// while the caller assigns offsets), or at once. Wait() returns its status.
class SharedObjectsStage {
 public:
  SharedObjectsStage(const PlanOptions& options, base::WorkerPool* workers,
                     const Sections* time, const base::CancelToken* cancel,
                     SizeOrderCache* size_order, PlanResult* result)
      : result_(result) {
    const size_t n = result->problem.buffers.size();
    // Problems cut into time windows (windows.h) split each stage over the
    // workers instead: one stage at a time keeps the peak memory near one
    // core's (two stages at once hold both stages' memory).
    const bool beside = workers != nullptr && n >= kParallelStagesFrom &&
                        n < 2 * static_cast<size_t>(kBuffersPerWindow);
    task_.emplace(beside ? workers : nullptr,
                  [this, &options, workers, n, time, cancel, size_order] {
                    status_ = ComputeSharedObjects(
                        result_->problem, ParallelismOf(options, workers, n),
                        time, cancel, size_order, &objects_, &stages_);
                  });
    if (!beside) task_->Join();
  }
  // Waits for the task (runs it here if no worker has started it: the
  // workers busy with other calls) and moves its objects and stage times
  // into the result.
  absl::Status Wait() {
    task_->Join();
    result_->shared_objects = std::move(objects_);
    result_->stages.insert(result_->stages.end(), stages_.begin(),
                           stages_.end());
    return status_;
  }

 private:
  PlanResult* result_;
  SharedObjects objects_;
  std::vector<StageTime> stages_;
  absl::Status status_;
  // Last: destroyed first, waiting for a worker still writing the above.
  std::optional<base::HandedTask> task_;
};

// Whether tasks wait in `workers` (may be null) for a thread.
bool TasksWaiting(const base::WorkerPool* workers) {
  return workers != nullptr && workers->queue_depth() > 0;
}

// Offset assignment and verification: the portfolio of heuristics, then
// the exact search when worth it. The heuristics a request needs run under
// `cancel`; the optional ones and the search under `budget` (PlanOptions::
// time_budget from the start of planning, within `cancel`).
// `others_waiting`: other calls' tasks wait for the workers (sampled before
// this call queued its own). `size_order` (may be null): the problem's size
// order, shared with the coloring.
absl::Status AssignOffsets(const PlanOptions& options,
                           base::WorkerPool* workers,
                           const base::CancelToken* cancel,
                           const base::CancelToken* budget,
                           const Sections* time, bool others_waiting,
                           SizeOrderCache* size_order, PlanResult* result) {
  absl::StatusOr<StrategyChoice> choice =
      ResolveStrategy(options.strategy, options.optimize);
  if (!choice.ok()) return choice.status();
  const Problem& problem = result->problem;
  const int64_t n = static_cast<int64_t>(problem.buffers.size());
  if (n > ExactOptions().max_buffers) {
    // No default steps on a list larger than the search takes: --optimize's
    // other heuristics run beside the quick ones.
    for (std::string& name : choice->later) {
      choice->heuristics.push_back(std::move(name));
      choice->optional.push_back(true);
    }
    choice->later.clear();
  }
  std::atomic<Bytes> best{std::numeric_limits<Bytes>::max()};
  // The needed heuristics share the cap: together they stop within it.
  const int64_t needed_count =
      std::count(choice->optional.begin(), choice->optional.end(), false);
  // A heuristic named by the request is its whole plan: a larger cap.
  const int64_t first_cap = FirstPlanWorkCap(result->problem.buffers.size());
  const int64_t cap = choice->capped ? first_cap / needed_count
                      : choice->search == SearchWhen::kNever
                          ? kNamedHeuristicWorkFactor * first_cap
                          : 0;
  const base::Parallelism parallel =
      ParallelismOf(options, workers, result->problem.buffers.size());
  SolveContext needed{cancel, &best, nullptr, options.effort,
                      cap,    time,  parallel};
  SolveContext optional{budget, &best, nullptr, options.effort,
                        0,      time,  parallel};
  needed.size_order = optional.size_order = size_order;
  std::vector<const SolveContext*> contexts;
  for (bool o : choice->optional) contexts.push_back(o ? &optional : &needed);
  // Polled once the budgeted work has ended (a token, once cancelled, stays
  // so): a budget reached just after the work counts too, never the reverse.
  const auto budget_reached = [budget] {
    return budget != nullptr && budget->Cancelled();
  };
  const bool optional_ran =
      std::find(choice->optional.begin(), choice->optional.end(), true) !=
      choice->optional.end();
  // Over the search's size, the default plan climbs (bounded by moves);
  // so do --optimize, whose budget may have cut its own hill climb, and
  // "exact", which has no search there (neither may end above the default
  // plan).
  const bool climbs =
      choice->search == SearchWhen::kAboveBound || choice->default_steps;
  const bool may_climb =
      climbs && n > ExactOptions().max_buffers && n <= kMaxHillClimbBuffers;
  // The heuristics' plan when RunPortfolio left it unverified (the window
  // raced beside beat it: ClimbAboveBound takes the window's instead), its
  // strategy and arena: verified before it is returned, if it still is the
  // plan (the call's deadline cut the window's verification: so this one
  // runs without the call's token, which has fired; it is bounded, a few
  // ms on the lists that race, up to kMaxHillClimbBuffers, and the plan
  // then answers time_limited, as before the window's plans went
  // unverified).
  std::optional<std::pair<std::string, Bytes>> unverified;
  const auto verified = [&](absl::Status status) -> absl::Status {
    if (!unverified.has_value() || result->strategy != unverified->first ||
        result->solution.arena_size != unverified->second) {
      return status;
    }
    unverified.reset();
    const absl::Time start = absl::Now();
    absl::Status checked = Verify(problem, result->solution, nullptr);
    AddStageTime("verify", absl::Now() - start, result);
    if (absl::IsDeadlineExceeded(checked)) return checked;
    if (!checked.ok()) return InvalidPlan(result->strategy, checked);
    return status;
  };
  // The heuristics' plan, racing the window placed beside them (below)
  // when `raced` is given.
  const auto heuristics =
      [&](const std::vector<const SolveContext*>* raced) -> absl::Status {
    const absl::Time start = absl::Now();
    absl::StatusOr<PortfolioResult> won = RunPortfolio(
        problem, choice->heuristics, raced != nullptr ? *raced : contexts,
        workers, result->lower_bound);
    if (!won.ok() && absl::IsInternal(won.status()) && raced != nullptr) {
      // A plan failed verification (a bug somewhere) after others gave up
      // the race: all of them run to their end.
      won = RunPortfolio(problem, choice->heuristics, contexts, workers,
                         result->lower_bound);
    }
    if (!won.ok() && raced != nullptr && (*raced)[0]->race->gave_up() &&
        !(cancel != nullptr && cancel->Cancelled())) {
      // No plan, and one heuristic gave up the race: its plan would have
      // ended far above, and the plan beside replaces it (below).
      AddStageTime("offsets", absl::Now() - start, result);
      return absl::AbortedError("every heuristic gave up the race");
    }
    if (!won.ok() && absl::IsResourceExhausted(won.status()) && cap > 0) {
      // Every heuristic the request needs passed its work cap (a dense
      // problem): the O(n log n) sweep gives the plan instead.
      SolveContext fallback{cancel, &best, nullptr, options.effort,
                            0,      time,  parallel};
      fallback.size_order = size_order;
      won = RunPortfolio(problem, {std::string(kFallbackStrategy)}, fallback,
                         workers);
    }
    const absl::Duration elapsed = absl::Now() - start;
    if (!won.ok()) return won.status();
    AddPortfolioTime(elapsed, won->verify_micros, result);
    if (!won->verified) {
      unverified.emplace(won->strategy, won->solution.arena_size);
    }
    result->solution = std::move(won->solution);
    result->strategy = std::move(won->strategy);
    result->proven_optimal = result->solution.arena_size == result->lower_bound;
    // The call's own deadline can cut a heuristic the request needs that
    // keeps its best plan so far (the hill climb asked for by name).
    result->time_limited = (optional_ran && budget_reached()) ||
                           (cancel != nullptr && cancel->Cancelled());
    return absl::OkStatus();
  };
  // Whether ClimbAboveBound applies to the heuristics' plan, and runs: a
  // missed capacity too (no search can follow on a problem this large; the
  // climb lowered pangu_2.6B's plan to the bound where its heuristics
  // missed a capacity at the bound).
  const auto climb_applies = [&] {
    return may_climb && result->strategy != kFallbackStrategy;
  };
  const auto climb_follows = [&] {
    return climb_applies() && FarAboveBound(*result, time);
  };
  // With threads to spare (and no other call's task waiting), the default
  // plan places the peak window's variants beside the heuristics on a
  // worker (ClimbAboveBound's first step, whole), dropped as soon as the
  // heuristics' plan shows no climb follows: the wall time of the two
  // instead of their sum, and the same plan (a worker that never starts
  // leaves the step to ClimbAboveBound; which threads ran it never changes
  // what is kept).
  const bool beside =
      may_climb && !options.optimize &&
      base::Parallelism{workers, RequestThreads(options)}.helpers() >=
          kPeakWindowBesideFromHelpers &&
      !others_waiting;  // not while other calls' tasks wait
  absl::Status planned;
  std::optional<absl::StatusOr<PeakWindowPlan>> peak;  // placed beside
  if (beside) {
    // A heuristic whose plan ends far above the bound loses to a window
    // settled below that (ClimbAboveBound keeps the smaller plan and stops
    // there): once the window is, such heuristics give up (HeuristicRace);
    // when none is left with a plan, the window's is the plan. Not with a
    // capacity, which the plan given up on might have met.
    const Bytes bound = AlignedBound(*result, time);
    const Bytes far_above = bound + bound / kClimbAbovePerMille;
    HeuristicRace race(static_cast<int>(contexts.size()), far_above);
    std::vector<SolveContext> raced(contexts.size());
    std::vector<const SolveContext*> raced_contexts;
    for (size_t i = 0; i < contexts.size(); ++i) {
      raced[i] = *contexts[i];
      raced[i].race = &race;
      raced[i].race_slot = static_cast<int>(i);
      raced_contexts.push_back(&raced[i]);
    }
    const bool racing = !options.capacity.has_value();
    base::CancelToken peak_cancel(cancel, absl::InfiniteFuture());
    absl::Time heuristics_end;
    base::RunTogether({workers, 2}, [&](int thread) {
      if (thread == 0) {
        planned = heuristics(racing ? &raced_contexts : nullptr);
        if (!planned.ok() || !climb_follows()) peak_cancel.Cancel();
        heuristics_end = absl::Now();
        return;
      }
      if (peak_cancel.Cancelled()) return;
      const int variants = PeakWindowVariantsToTry(PlacementWork(problem),
                                                   /*optimize=*/false);
      if (variants == 0) return;  // ClimbAboveBound runs none either
      // Three threads: the first variant's two sides at once and the next
      // variant beside them (peak_window.h).
      peak =
          PlanPeakWindow(problem, variants, bound, &peak_cancel, {workers, 3});
      if (peak->ok() && (*peak)->solution &&
          (*peak)->solution->arena_size <= far_above) {
        race.Settle();
      }
    });
    // The wait for the worker (once dropped, until it sees its token).
    AddStageTime("offsets", absl::Now() - heuristics_end, result);
    if (absl::IsAborted(planned) && race.gave_up()) {
      planned = AdoptSettledWindow(std::move(peak), cancel, result);
      peak.reset();  // taken
      result->time_limited = (optional_ran && budget_reached()) ||
                             (cancel != nullptr && cancel->Cancelled());
    }
  } else {
    planned = heuristics(nullptr);
  }
  if (!planned.ok()) return planned;
  if (climb_applies()) {
    if (!FarAboveBound(*result, time)) return verified(absl::OkStatus());
    absl::Status status =
        ClimbAboveBound(needed, workers, cancel, options.optimize,
                        peak.has_value() ? &*peak : nullptr, result);
    result->time_limited =
        result->time_limited || (cancel != nullptr && cancel->Cancelled());
    return verified(status);
  }
  if (!WorthSearching(options, choice->search, *result, time)) {
    return verified(absl::OkStatus());
  }
  // The default plan above the bound: the skyline pass by area (the
  // search's first dive, without the search's set-up), then, still above,
  // a search bounded by nodes, then, still above, the skyline pass by size.
  // (The search runs before it: on four Silero exports its nodes reach the
  // bound from the heuristics' plan, not from the skyline by size's.) Each
  // step is bounded by work and stops with `token`, never the budget: the
  // call's own for the default plan, so the plan is the same under any
  // load; for "exact" and --optimize, the call's deadline less what the
  // budget keeps for after the search, so that no budget leaves them above
  // the default plan and a deadline that comes first still leaves time to
  // answer with the plan so far. Their plans are verified under the call's
  // own token.
  const auto default_steps =
      [&](const base::CancelToken* token) -> absl::Status {
    absl::Status status =
        PlaceOnSkyline(SkylineTies::kArea, time, token, cancel, result);
    if (status.ok() &&
        WorthSearching(options, SearchWhen::kAboveBound, *result, time)) {
      status = SearchExact(options, /*tight=*/true, parallel, cancel, token,
                           &best, result);
    }
    if (status.ok() &&
        result->solution.arena_size > AlignedBound(*result, time)) {
      status = PlaceOnSkyline(SkylineTies::kSize, time, token, cancel, result);
    }
    return status;
  };
  // With a capacity the heuristics missed, the same steps, then (still
  // missed) the search for the capacity, within the budget.
  if (choice->search == SearchWhen::kAboveBound) {
    absl::Status status = default_steps(cancel);
    result->time_limited =
        result->time_limited || (cancel != nullptr && cancel->Cancelled());
    if (!status.ok() || !MissedCapacity(options, *result)) {
      return verified(status);
    }
  }
  if (choice->default_steps) {
    // "exact" and --optimize: the default plan's steps, bounded by work
    // and not cut by the budget, so that neither ends above the default
    // plan (cut by a 5 ms budget, --optimize left MiniMalloc's K 24% above
    // it), only by the deadline's reserve (DeadlineReserveEnd, which
    // also caps the budget), then --optimize's other heuristics within
    // what is left of the budget, the smallest plan kept: the search starts
    // from the smallest of them all.
    const base::CancelToken steps(cancel,
                                  DeadlineReserveEnd(cancel, absl::Now()));
    absl::Status status =
        result->solution.arena_size > AlignedBound(*result, time)
            ? default_steps(&steps)
            : absl::OkStatus();
    // (A plan the bounded search proved optimal above the bound, where
    // alignment keeps it there, ends here.)
    const auto done = [&] {
      return result->proven_optimal ||
             !WorthSearching(options, choice->search, *result, time);
    };
    if (status.ok() && !choice->later.empty() && !budget_reached() && !done()) {
      const absl::Time start = absl::Now();
      absl::StatusOr<PortfolioResult> won = RunPortfolio(
          problem, choice->later,
          std::vector<const SolveContext*>(choice->later.size(), &optional),
          workers, result->lower_bound, /*verify=*/&needed);
      AddPortfolioTime(absl::Now() - start, won.ok() ? won->verify_micros : 0,
                       result);
      if (won.ok() && won->solution.arena_size < result->solution.arena_size) {
        Adopt(std::move(won->solution), std::move(won->strategy), result);
      } else if (!won.ok() && absl::IsInternal(won.status())) {
        status = won.status();  // a plan the verifier rejected
      }  // else none smaller, or the budget cut them all: the plan stays
    }
    if (!status.ok() || done()) return verified(status);
  }
  if (budget_reached()) {  // no time left: the search was cut before it began
    result->time_limited = true;
    return verified(absl::OkStatus());
  }
  absl::Status searched = SearchExact(options, /*tight=*/false, parallel,
                                      cancel, budget, &best, result);
  result->time_limited = result->time_limited || budget_reached();
  return verified(searched);
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
  return absl::FailedPreconditionError(absl::StrCat(
      "no plan found within the capacity ", *options.capacity,
      " bytes: the best arena is ", result.solution.arena_size,
      " bytes (lower bound ", result.lower_bound, ")",
      result.time_limited ? "; the time budget stopped the search (a larger "
                            "budget may find one; an effort bounds it by "
                            "work)"
                          : ""));
}

// Whether a tensor of `kind` gets memory in the arena under `options`.
bool Planned(TensorKind kind, const PlanOptions& options) {
  switch (kind) {
    case TensorKind::kActivation:
    case TensorKind::kVariable:
    case TensorKind::kScratch:
      return true;
    case TensorKind::kWeight:
      return options.weights_in_arena;
    case TensorKind::kInput:
    case TensorKind::kOutput:
      return options.io != IoPolicy::kExclude;
  }
  return true;
}

// The buffers to plan: one per planned tensor, with in-place outputs merged
// into their inputs' buffers. Fills result->problem, result->tensors (own
// lifetimes, kinds, buffer indices) and result->weights_bytes. Returns the
// in-place aliases (graph tensor indices), empty when there are none. The
// planned buffers are moved out of `tensors` (or of the merge) once the
// tensor table has their names: one copy of each name less (without
// in-place ops `tensors`' own list, compacted in place). The table, and
// the buffers moved out of a merge, are filled in chunks on the threads
// `parallel` gives.
std::vector<InPlaceTensor> SelectBuffers(const Graph& graph, Problem tensors,
                                         const std::vector<TensorKind>& kinds,
                                         const PlanOptions& options,
                                         const base::Parallelism& parallel,
                                         PlanResult* result) {
  const bool in_place = std::any_of(graph.ops.begin(), graph.ops.end(),
                                    [](const Op& op) { return op.in_place; });
  InPlaceMerge merge;
  if (in_place) merge = MergeInPlace(graph, tensors);
  Problem& merged = in_place ? merge.problem : tensors;
  const size_t n = tensors.buffers.size();
  constexpr size_t kChunk = size_t{1} << 14;
  const auto planned_tensor = [&](size_t t) {
    return Planned(kinds[t], options);
  };
  // The weights the arena leaves out, summed in chunks.
  std::vector<Bytes> weights(base::ChunkCount(n, kChunk), 0);
  base::ParallelForRange(
      parallel, n, kChunk, [&](int chunk, size_t first, size_t last) {
        for (size_t t = first; t < last; ++t) {
          if (!planned_tensor(t) && kinds[t] == TensorKind::kWeight &&
              !graph.tensors[t].folded) {
            weights[chunk] += tensors.buffers[t].size;
          }
        }
      });
  for (Bytes w : weights) result->weights_bytes += w;
  // Which planned buffer holds each tensor (-1: none), the planned buffers
  // numbered in order of their first tensor: without in-place outputs, the
  // planned tensors in order, found in chunks.
  std::vector<int> buffer_of(n, -1);
  std::vector<int> planned;  // planned -> merged
  if (!in_place) {
    planned = base::KeptInOrder(parallel, n, planned_tensor);
    base::ParallelForRange(parallel, planned.size(), kChunk,
                           [&](int, size_t first, size_t last) {
                             for (size_t k = first; k < last; ++k) {
                               buffer_of[planned[k]] = static_cast<int>(k);
                             }
                           });
  } else {
    std::vector<int> kept(merged.buffers.size(), -1);  // merged -> planned
    planned.reserve(merged.buffers.size());
    for (size_t t = 0; t < n; ++t) {
      if (!planned_tensor(t)) continue;
      const int m = merge.buffer_of[t];
      if (kept[m] < 0) {
        kept[m] = static_cast<int>(planned.size());
        planned.push_back(m);
      }
      buffer_of[t] = kept[m];
    }
  }
  result->tensors.resize(n);
  base::ParallelForRange(
      parallel, n, kChunk, [&](int, size_t first, size_t last) {
        for (size_t t = first; t < last; ++t) {
          const Buffer& b = tensors.buffers[t];
          result->tensors[t] = {b.name, kinds[t],     b.size, b.start,
                                b.end,  buffer_of[t], ""};
        }
      });
  if (!in_place) {
    // The planned buffers are the tensors' own, in order: moved down over
    // the others in place (planned[k] >= k) and the list taken whole, one
    // pass and no second list (a new list, default-constructed and then
    // filled, cost two passes).
    std::vector<Buffer>& list = tensors.buffers;
    for (size_t k = 0; k < planned.size(); ++k) {
      if (static_cast<size_t>(planned[k]) != k) {
        list[k] = std::move(list[planned[k]]);
      }
    }
    list.resize(planned.size());
    result->problem.buffers = std::move(list);
  } else {
    result->problem.buffers.resize(planned.size());
    base::ParallelForRange(
        parallel, planned.size(), kChunk, [&](int, size_t first, size_t last) {
          for (size_t k = first; k < last; ++k) {
            result->problem.buffers[k] = std::move(merged.buffers[planned[k]]);
          }
        });
  }
  for (const InPlaceTensor& a : merge.aliases) {
    result->tensors[a.tensor].in_place_of = result->tensors[a.input].name;
  }
  return std::move(merge.aliases);
}

// Proves the plan per tensor, in each memory space apart (one arena when
// there are none): every planned tensor at its buffer's offset, with its own
// lifetime, and no two tensors live together sharing memory except in-place
// hand-overs.
absl::Status VerifyTensors(const std::vector<InPlaceTensor>& aliases,
                           const base::CancelToken* cancel,
                           PlanResult* result) {
  const absl::Time start = absl::Now();
  const size_t spaces = std::max<size_t>(1, result->memory_spaces.size());
  const auto space_of = [&](int buffer) {
    return result->memory_space_of.empty() ? 0
                                           : result->memory_space_of[buffer];
  };
  absl::Status s;
  for (size_t k = 0; k < spaces && s.ok(); ++k) {
    Problem per_tensor;
    Solution plan;
    plan.arena_size = result->memory_spaces.empty()
                          ? result->solution.arena_size
                          : result->memory_spaces[k].arena_size;
    std::vector<int> local(result->tensors.size(), -1);
    for (size_t t = 0; t < result->tensors.size(); ++t) {
      const TensorPlacement& p = result->tensors[t];
      if (p.buffer < 0 || space_of(p.buffer) != static_cast<int>(k)) continue;
      Buffer b = result->problem.buffers[p.buffer];
      b.name = p.name;
      b.start = p.start;
      b.end = p.end;
      b.size = p.size;
      local[t] = static_cast<int>(per_tensor.buffers.size());
      per_tensor.buffers.push_back(std::move(b));
      plan.offsets.push_back(result->solution.offsets[p.buffer]);
    }
    std::vector<InPlacePair> pairs;
    for (const InPlaceTensor& a : aliases) {
      if (local[a.tensor] >= 0) {
        pairs.push_back({local[a.tensor], local[a.input]});
      }
    }
    s = VerifyInPlace(per_tensor, plan, pairs, cancel);
  }
  for (StageTime& stage : result->stages) {  // part of "verify"
    if (stage.stage == "verify") {
      stage.micros += absl::ToInt64Microseconds(absl::Now() - start);
    }
  }
  if (!s.ok() && !absl::IsDeadlineExceeded(s)) {
    return absl::InternalError(
        absl::StrCat("the in-place plan failed verification: ", s.message()));
  }
  if (!s.ok()) return s;
  return absl::OkStatus();
}

// Plans one memory space's share with the request's strategies (without a
// capacity, so no search is forced), and keeps the share's own claiming
// plan when theirs does not fit or is larger. Either plan is verified.
absl::StatusOr<MemorySpacePlan> PlanShare(
    const PlanOptions& options, const MemorySpace& memory,
    const Problem& problem, base::WorkerPool* workers,
    const base::CancelToken* cancel, const base::CancelToken* budget,
    SpaceShare* share, bool* time_limited) {
  MemorySpacePlan plan{memory.name,
                       memory.capacity,
                       0,
                       0,
                       static_cast<int>(share->buffers.size()),
                       ""};
  if (share->buffers.empty()) return plan;
  PlanResult sub;
  sub.problem = SubProblem(problem, share->buffers);
  sub.lower_bound = PaddedLowerBound(sub.problem);
  plan.lower_bound = sub.lower_bound;
  if (auto s = AssignOffsets(options, workers, cancel, budget, nullptr,
                             TasksWaiting(workers), nullptr, &sub);
      !s.ok()) {
    return s;
  }
  *time_limited = *time_limited || sub.time_limited;
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
    plan.strategy = "pool_claim";  // the best-fit pass that filled the space
  }
  plan.arena_size = share->plan.arena_size;
  return plan;
}

// Splits the buffers over the memory spaces and plans each on its own.
absl::Status AssignMemorySpaces(const PlanOptions& options,
                                base::WorkerPool* workers,
                                const base::CancelToken* cancel,
                                const base::CancelToken* budget,
                                PlanResult* result) {
  if (options.capacity.has_value()) {
    return absl::InvalidArgumentError(
        "capacity and memory_pools cannot be combined: give each pool its "
        "capacity");
  }
  StageTimer timer("offsets", result);
  absl::StatusOr<std::vector<SpaceShare>> shares =
      SplitOverSpaces(result->problem, options.memory_spaces, cancel);
  if (!shares.ok()) return shares.status();
  const size_t n = result->problem.buffers.size();
  result->solution.offsets.assign(n, -1);
  result->solution.arena_size = 0;
  result->memory_space_of.assign(n, -1);
  PlanOptions per_space = options;
  per_space.memory_spaces.clear();
  for (size_t k = 0; k < shares->size(); ++k) {
    SpaceShare& share = (*shares)[k];
    absl::StatusOr<MemorySpacePlan> plan =
        PlanShare(per_space, options.memory_spaces[k], result->problem, workers,
                  cancel, budget, &share, &result->time_limited);
    if (!plan.ok()) return plan.status();
    for (size_t j = 0; j < share.buffers.size(); ++j) {
      result->solution.offsets[share.buffers[j]] = share.plan.offsets[j];
      result->memory_space_of[share.buffers[j]] = static_cast<int>(k);
    }
    result->solution.arena_size += plan->arena_size;
    result->memory_spaces.push_back(*std::move(plan));
  }
  // One fixed name (each space's winner is in memory_spaces): metrics
  // label by it, and a client must not be able to mint label values.
  result->strategy = "memory_pools";
  // The rule of every plan (and of an adopted one): at the bound, optimal.
  result->proven_optimal = result->solution.arena_size == result->lower_bound;
  return absl::OkStatus();
}

// The figures every plan reports: bounds and the naive sum, on the sizes
// and alignments the plan uses. Cut short once `cancel` (may be null) fires:
// the figures then mean nothing, and the call must fail.
void SetBounds(const Sections& time, PlanResult* result,
               const base::Parallelism& parallel,
               const base::CancelToken* cancel) {
  const LowerBounds bounds =
      BoundsFromCompressedTime(result->problem, time, parallel, cancel);
  result->lower_bound = bounds.padded;
  result->unaligned_lower_bound = bounds.unaligned;
  result->naive_bytes = bounds.padded_sum;
}

// PlanProblem's `beside` by default: nothing.
void NothingBeside() {}

// Everything after liveness, into `result`. `budget` ends the optional
// work (time_budget from the start of planning). Reads result->problem,
// never writes it, nor result->tensors. `beside` (never writing what the
// plan reads) runs beside the coloring of a problem whose stages run in
// turn, on a thread of the request's, and not at all otherwise: the
// caller runs it then.
absl::Status PlanProblem(const PlanOptions& options, base::WorkerPool* workers,
                         const base::CancelToken* cancel,
                         const base::CancelToken* budget, PlanResult* result,
                         absl::FunctionRef<void()> beside = NothingBeside) {
  const absl::Time start = absl::Now();
  // Compressed time, swept once for the bounds and the stages.
  const base::Parallelism parallel =
      ParallelismOf(options, workers, result->problem.buffers.size());
  absl::StatusOr<Sections> time =
      CompressTime(result->problem, cancel, parallel);
  const absl::Duration compressed = absl::Now() - start;
  if (!time.ok()) {
    AddStageTime("prepare", compressed, result);
    return time.status();
  }
  const auto bounds = [&] {
    const absl::Time begin = absl::Now();
    SetBounds(*time, result, parallel, cancel);
    AddStageTime("prepare", compressed + (absl::Now() - begin), result);
  };
  if (result->problem.buffers.empty()) {  // e.g. a graph of weights alone
    bounds();
    result->proven_optimal = true;
    return absl::OkStatus();
  }
  // Before this call's own task below joins the queue.
  const bool others_waiting = TasksWaiting(workers);
  // Sorted once for the coloring and the size-ordered heuristics.
  SizeOrderCache size_order(&result->problem);
  std::optional<SharedObjectsStage> objects_stage;
  const auto color = [&] {
    objects_stage.emplace(options, workers, &*time, cancel, &size_order,
                          result);
  };
  if (parallel.helpers() > 0) {
    // The stages run in turn, each split over the request's threads (the
    // problem is cut into time windows). The bounds (sweeps that split
    // poorly: 50-65 ms of one core for a million random buffers, about as
    // long beside the coloring) and `beside` run on one of the threads
    // while the coloring takes the others, and all of them once they end:
    // the coloring's splits recruit a thread as it comes free.
    std::atomic<bool> side_taken{false};
    const auto side = [&] {
      if (side_taken.exchange(true)) return;
      bounds();
      beside();
    };
    base::RunTogether({parallel.workers, 2}, [&](int thread) {
      if (thread > 0) return side();
      color();
      side();
    });
  } else {
    bounds();
    color();
  }
  if (cancel != nullptr && cancel->Cancelled()) {  // the bounds were cut short
    return absl::DeadlineExceededError("planning cancelled");
  }
  // The offsets below never read result->shared_objects: the two stages are
  // independent, and on large problems they run at the same time.
  absl::Status offsets =
      options.memory_spaces.empty()
          ? AssignOffsets(options, workers, cancel, budget, &*time,
                          others_waiting, &size_order, result)
          : AssignMemorySpaces(options, workers, cancel, budget, result);
  if (absl::Status s = objects_stage->Wait(); !s.ok()) return s;
  if (!offsets.ok()) return offsets;
  if (options.memory_spaces.empty()) {
    if (auto s = CheckCapacity(options, *result); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// The buffers of a graph, before any offset: liveness, kinds and in-place
// merging into result->problem and result->tensors (timed as "liveness"),
// the liveness on the request's threads (`workers`, may be null) when the
// graph is large. The in-place aliases go to *aliases. INVALID_ARGUMENT as
// AnalyzeLiveness; DEADLINE_EXCEEDED once `cancel` (may be null) fires.
absl::Status GraphBuffers(const Graph& graph, const PlanOptions& options,
                          base::WorkerPool* workers,
                          const base::CancelToken* cancel, PlanResult* result,
                          std::vector<InPlaceTensor>* aliases) {
  StageTimer timer("liveness", result);
  const base::Parallelism parallel =
      ParallelismOf(options, workers, graph.tensors.size());
  std::vector<TensorKind> kinds;
  absl::StatusOr<Problem> tensors = AnalyzeLiveness(
      graph, options.alignment, &kinds, options.io, cancel, parallel);
  if (!tensors.ok()) return tensors.status();
  result->io = options.io;
  *aliases = SelectBuffers(graph, *std::move(tensors), kinds, options, parallel,
                           result);
  result->problem.capacity = options.capacity;
  if (cancel != nullptr && cancel->Cancelled()) {
    return absl::DeadlineExceededError("graph buffers cancelled");
  }
  return absl::OkStatus();
}

// A buffer list, validated, as result->problem (timed as "prepare").
// INVALID_ARGUMENT as ValidateProblem; DEADLINE_EXCEEDED once `cancel` (may
// be null) fires.
absl::Status ListBuffers(Problem problem, const PlanOptions& options,
                         const base::CancelToken* cancel, PlanResult* result,
                         const base::Parallelism& parallel = {}) {
  const absl::Time start = absl::Now();
  problem.capacity = options.capacity;  // pins are checked against it
  if (absl::Status s = ValidateProblem(problem, parallel, cancel); !s.ok()) {
    return s;
  }
  if (cancel != nullptr && cancel->Cancelled()) {
    return absl::DeadlineExceededError("buffer list cancelled");
  }
  result->problem = std::move(problem);
  AddStageTime("prepare", absl::Now() - start, result);
  return absl::OkStatus();
}

// Fills result->tensors, the tensor table of a buffer list: one activation
// per buffer, in list order; with threads from `parallel`, in chunks
// (beside the coloring, the chunks take threads as the coloring frees
// them), else in one pass without filling the table twice.
// DEADLINE_EXCEEDED once `cancel` (may be null) fires.
absl::Status ListTensors(const base::CancelToken* cancel, PlanResult* result,
                         const base::Parallelism& parallel = {}) {
  const std::vector<Buffer>& buffers = result->problem.buffers;
  std::vector<TensorPlacement>& tensors = result->tensors;
  const auto entry = [&buffers](size_t i) -> TensorPlacement {
    const Buffer& b = buffers[i];
    return {b.name, TensorKind::kActivation, b.size, b.start,
            b.end,  static_cast<int>(i),     ""};
  };
  const auto cancelled = [] {
    return absl::DeadlineExceededError("buffer list cancelled");
  };
  if (parallel.helpers() == 0) {
    tensors.reserve(buffers.size());
    for (size_t i = 0; i < buffers.size(); ++i) {
      if (base::CancelledAt(cancel, i)) return cancelled();
      tensors.push_back(entry(i));
    }
    return absl::OkStatus();
  }
  // Making the entries touches all of the table's memory (about 100 bytes
  // a buffer: 0.1-0.2 s for 500,000 here, page faults mostly), so it goes
  // in steps, each after a look at the token: a call cancelled meanwhile
  // stops within one step, not at the end of the whole table.
  tensors.reserve(buffers.size());
  while (tensors.size() < buffers.size()) {
    if (cancel != nullptr && cancel->Cancelled()) return cancelled();
    tensors.resize(
        std::min(buffers.size(), tensors.size() + (size_t{1} << 14)));
  }
  std::atomic<bool> stopped{false};
  base::ParallelForRange(parallel, buffers.size(), size_t{1} << 14,
                         [&](int, size_t first, size_t last) {
                           if (cancel != nullptr && cancel->Cancelled()) {
                             stopped = true;
                             return;
                           }
                           for (size_t i = first; i < last; ++i) {
                             tensors[i] = entry(i);
                           }
                         });
  return stopped ? cancelled() : absl::OkStatus();
}

}  // namespace

int RequestThreads(const PlanOptions& options) {
  if (options.max_threads > 0) return options.max_threads;
  return std::min(kDefaultMaxThreads, base::UsableCores());
}

namespace {

// The workers a request may use: none where it has one thread (asked for,
// or one usable core), so that no stage, portfolio member or side task
// goes to them; else `workers`.
base::WorkerPool* RequestWorkers(const PlanOptions& options,
                                 base::WorkerPool* workers) {
  return RequestThreads(options) <= 1 ? nullptr : workers;
}

}  // namespace

absl::Time TimeBudgetEnd(const PlanOptions& options,
                         const base::CancelToken* cancel, absl::Time start) {
  return std::min(start + options.time_budget,
                  DeadlineReserveEnd(cancel, start));
}

absl::StatusOr<PlanResult> PlanGraph(const Graph& graph,
                                     const PlanOptions& options,
                                     base::WorkerPool* workers,
                                     const base::CancelToken* cancel) {
  if (absl::Status s = CheckStrategyName(options.strategy); !s.ok()) return s;
  workers = RequestWorkers(options, workers);
  // Every split of this request, side tasks included, shares its threads.
  const base::ThreadBudget threads({workers, RequestThreads(options)});
  const base::CancelToken budget(cancel,
                                 TimeBudgetEnd(options, cancel, absl::Now()));
  PlanResult result;
  std::vector<InPlaceTensor> aliases;
  if (absl::Status s =
          GraphBuffers(graph, options, workers, cancel, &result, &aliases);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = PlanProblem(options, workers, cancel, &budget, &result);
      !s.ok()) {
    return s;
  }
  if (aliases.empty()) return result;
  if (absl::Status s = VerifyTensors(aliases, cancel, &result); !s.ok()) {
    return s;
  }
  return result;
}

absl::StatusOr<PlanResult> PlanBuffers(Problem problem,
                                       const PlanOptions& options,
                                       base::WorkerPool* workers,
                                       const base::CancelToken* cancel) {
  if (absl::Status s = CheckStrategyName(options.strategy); !s.ok()) return s;
  workers = RequestWorkers(options, workers);
  // Every split of this request, side tasks included, shares its threads.
  const base::ThreadBudget threads({workers, RequestThreads(options)});
  const base::CancelToken budget(cancel,
                                 TimeBudgetEnd(options, cancel, absl::Now()));
  PlanResult result;
  const base::Parallelism parallel =
      ParallelismOf(options, workers, problem.buffers.size());
  if (absl::Status s =
          ListBuffers(std::move(problem), options, cancel, &result, parallel);
      !s.ok()) {
    return s;
  }
  // The tensor table is a copy of the list that planning never reads: on
  // lists large enough for the workers, it is built beside the coloring
  // (a copy of every name, about a tenth of the one-core prepare stage of
  // a million buffers), else after the plan.
  // Its memory is taken first, where it was when the table was built
  // before the plan (with one heap, later would raise the peak).
  result.tensors.reserve(result.problem.buffers.size());
  absl::Status listed;
  bool table_built = false;
  const auto table = [&] {
    listed = ListTensors(cancel, &result, parallel);
    table_built = true;
  };
  absl::Status planned =
      PlanProblem(options, workers, cancel, &budget, &result, table);
  if (!planned.ok()) return planned;
  if (!table_built) table();
  if (!listed.ok()) return listed;
  return result;
}

namespace {

// The largest arena a cached plan may claim: far above any real plan, low
// enough that offset + size never overflows.
constexpr Bytes kMaxAdoptedArena = Bytes{1} << 60;

template <typename... Parts>
absl::Status Unfit(const Parts&... parts) {
  return absl::DataLossError(absl::StrCat("the cached plan ", parts...));
}

// A name a plan may carry in PlanResult::strategy (or, with `space`, in a
// MemorySpacePlan): metrics label by it, so it must be one of the known.
bool KnownStrategy(std::string_view name, bool space) {
  if (name == (space ? "pool_claim" : "memory_pools")) return true;
  if (name == kFallbackStrategy) return true;
  const std::vector<std::string>& names = StrategyNames();
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Every offset in [0, arena - size] of its space, and each space's arena
// (and the whole) exactly the end of its highest buffer: what the verifier
// then reads cannot overflow, and the sizes reported are the plan's.
absl::Status CheckRanges(const PlanResult& result) {
  const size_t spaces = std::max<size_t>(1, result.memory_spaces.size());
  std::vector<Bytes> arena(spaces), top(spaces, 0);
  for (size_t k = 0; k < spaces; ++k) {
    arena[k] = result.memory_spaces.empty()
                   ? result.solution.arena_size
                   : result.memory_spaces[k].arena_size;
    if (arena[k] < 0 || arena[k] > kMaxAdoptedArena) {
      return Unfit("has an arena of ", arena[k], " bytes");
    }
  }
  const std::vector<Buffer>& b = result.problem.buffers;
  for (size_t i = 0; i < b.size(); ++i) {
    const size_t k = result.memory_space_of.empty()
                         ? 0
                         : static_cast<size_t>(result.memory_space_of[i]);
    const Offset offset = result.solution.offsets[i];
    if (offset < 0 || b[i].size > arena[k] || offset > arena[k] - b[i].size) {
      return Unfit("puts '", b[i].name, "' at ", offset, ", outside its arena");
    }
    top[k] = std::max(top[k], offset + b[i].size);
  }
  Bytes total = 0;
  for (size_t k = 0; k < spaces; ++k) {
    if (top[k] != arena[k]) {
      return Unfit("claims an arena of ", arena[k], " bytes for one of ",
                   top[k]);
    }
    total += arena[k];
  }
  if (total != result.solution.arena_size) {
    return Unfit("claims an arena of ", result.solution.arena_size,
                 " bytes for memory pools of ", total);
  }
  return absl::OkStatus();
}

// The memory spaces of the choices against the options: the same spaces in
// the same order, every buffer in one, capacities kept, and each space's
// buffer count and lower bound as the problem gives them.
absl::Status CheckSpaces(const PlanOptions& options, PlanResult* result) {
  const size_t n = result->problem.buffers.size();
  const size_t count = options.memory_spaces.size();
  if (result->memory_spaces.size() != count ||
      result->memory_space_of.size() != (count == 0 ? 0 : n)) {
    return Unfit("does not have the memory pools asked for");
  }
  if (count == 0) return absl::OkStatus();
  std::vector<std::vector<int>> members(count);
  for (size_t i = 0; i < n; ++i) {
    const int k = result->memory_space_of[i];
    if (k < 0 || static_cast<size_t>(k) >= count) {
      return Unfit("puts a buffer in memory pool ", k);
    }
    members[k].push_back(static_cast<int>(i));
  }
  for (size_t k = 0; k < count; ++k) {
    MemorySpacePlan& plan = result->memory_spaces[k];
    const MemorySpace& asked = options.memory_spaces[k];
    if (plan.name != asked.name || plan.capacity != asked.capacity ||
        plan.buffers != static_cast<int>(members[k].size()) ||
        (asked.capacity > 0 && plan.arena_size > asked.capacity) ||
        (!members[k].empty() && !KnownStrategy(plan.strategy, true))) {
      return Unfit("does not fit memory pool '", asked.name, "'");
    }
    plan.lower_bound =
        PaddedLowerBound(SubProblem(result->problem, members[k]));
  }
  return absl::OkStatus();
}

// Takes the choices into a result whose buffers and tensors come from the
// request, and proves them as planning does.
absl::Status AdoptChoices(const PlanOptions& options, PlanChoices choices,
                          const std::vector<InPlaceTensor>& aliases,
                          const base::CancelToken* cancel,
                          const base::Parallelism& parallel,
                          PlanResult* result) {
  const absl::Time start = absl::Now();
  absl::StatusOr<Sections> time =
      CompressTime(result->problem, cancel, parallel);
  if (!time.ok()) return time.status();
  SetBounds(*time, result, parallel, cancel);
  if (cancel != nullptr && cancel->Cancelled()) {
    return absl::DeadlineExceededError("planning cancelled");
  }
  AddStageTime("prepare", absl::Now() - start, result);
  const size_t n = result->problem.buffers.size();
  if (choices.solution.offsets.size() != n) {
    return Unfit("has ", choices.solution.offsets.size(), " offsets for ", n,
                 " buffers");
  }
  if (n == 0) {  // nothing planned, as PlanProblem answers it
    if (choices.solution.arena_size != 0) return Unfit("has a phantom arena");
    result->proven_optimal = true;
    return absl::OkStatus();
  }
  if (!KnownStrategy(choices.strategy, false)) {
    return Unfit("names an unknown strategy");
  }
  result->solution = std::move(choices.solution);
  result->strategy = std::move(choices.strategy);
  result->proven_optimal = choices.proven_optimal ||
                           result->solution.arena_size == result->lower_bound;
  result->shared_objects = std::move(choices.shared_objects);
  result->memory_spaces = std::move(choices.memory_spaces);
  result->memory_space_of = std::move(choices.memory_space_of);
  if (absl::Status s = CheckSpaces(options, result); !s.ok()) return s;
  if (absl::Status s = CheckRanges(*result); !s.ok()) return s;
  if (options.capacity.has_value() &&
      result->solution.arena_size > *options.capacity) {
    return Unfit("does not fit the capacity");
  }
  const absl::Time verify = absl::Now();
  absl::Status s =
      VerifySharedObjects(result->problem, result->shared_objects, cancel);
  // Per tensor where tensors share buffers (in place) or memory pools
  // split the arena; otherwise tensors and buffers are one to one.
  if (s.ok()) {
    s = aliases.empty() && result->memory_spaces.empty()
            ? Verify(result->problem, result->solution, cancel, *time, parallel)
            : VerifyTensors(aliases, cancel, result);
  }
  AddStageTime("verify", absl::Now() - verify, result);
  if (!s.ok() && !absl::IsDeadlineExceeded(s)) {
    return Unfit("failed verification: ", s.message());
  }
  return s;
}

}  // namespace

PlanChoices ChoicesOf(const PlanResult& result) {
  return {result.solution,       result.strategy,      result.proven_optimal,
          result.shared_objects, result.memory_spaces, result.memory_space_of};
}

absl::StatusOr<PlanResult> AdoptGraphPlan(const Graph& graph,
                                          const PlanOptions& options,
                                          PlanChoices choices,
                                          const base::CancelToken* cancel,
                                          base::WorkerPool* workers) {
  if (absl::Status s = CheckStrategyName(options.strategy); !s.ok()) return s;
  workers = RequestWorkers(options, workers);
  // Every split of this request, side tasks included, shares its threads.
  const base::ThreadBudget threads({workers, RequestThreads(options)});
  PlanResult result;
  std::vector<InPlaceTensor> aliases;
  if (absl::Status s =
          GraphBuffers(graph, options, workers, cancel, &result, &aliases);
      !s.ok()) {
    return s;
  }
  const base::Parallelism parallel =
      ParallelismOf(options, workers, result.problem.buffers.size());
  if (absl::Status s = AdoptChoices(options, std::move(choices), aliases,
                                    cancel, parallel, &result);
      !s.ok()) {
    return s;
  }
  return result;
}

absl::StatusOr<PlanResult> AdoptBuffersPlan(Problem problem,
                                            const PlanOptions& options,
                                            PlanChoices choices,
                                            const base::CancelToken* cancel,
                                            base::WorkerPool* workers) {
  if (absl::Status s = CheckStrategyName(options.strategy); !s.ok()) return s;
  workers = RequestWorkers(options, workers);
  // Every split of this request, side tasks included, shares its threads.
  const base::ThreadBudget threads({workers, RequestThreads(options)});
  PlanResult result;
  const base::Parallelism parallel =
      ParallelismOf(options, workers, problem.buffers.size());
  if (absl::Status s =
          ListBuffers(std::move(problem), options, cancel, &result, parallel);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ListTensors(cancel, &result); !s.ok()) return s;
  if (absl::Status s = AdoptChoices(options, std::move(choices), {}, cancel,
                                    parallel, &result);
      !s.ok()) {
    return s;
  }
  return result;
}

absl::StatusOr<PlanResult> PreviewGraph(const Graph& graph,
                                        const PlanOptions& options,
                                        const base::CancelToken* cancel) {
  PlanResult result;
  std::vector<InPlaceTensor> aliases;
  if (absl::Status s =
          GraphBuffers(graph, options, nullptr, cancel, &result, &aliases);
      !s.ok()) {
    return s;
  }
  result.lower_bound = PaddedLowerBound(result.problem);
  result.unaligned_lower_bound = LowerBound(result.problem);
  return result;
}

absl::StatusOr<PlanResult> PreviewBuffers(Problem problem,
                                          const PlanOptions& options,
                                          const base::CancelToken* cancel) {
  PlanResult result;
  if (absl::Status s =
          ListBuffers(std::move(problem), options, cancel, &result);
      !s.ok()) {
    return s;
  }
  result.lower_bound = PaddedLowerBound(result.problem);
  result.unaligned_lower_bound = LowerBound(result.problem);
  return result;
}

}  // namespace memplan::planner
