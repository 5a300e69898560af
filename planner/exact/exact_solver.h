// memplan planner: an exact solver for offset assignment (dynamic storage
// allocation), after the ideas of MiniMalloc (ASPLOS 2023).
//
// A depth-first branch and bound places buffers in canonical order (each at
// the lowest offset its already placed neighbours allow, offsets never
// decreasing along a path), prunes with cross-section bounds (the floor of
// every section plus the sizes still to fit there must stay within the
// target), skips dominated choices (a choice that leaves a gap some unplaced
// buffer fits in), and splits the timeline into independent parts whenever
// no unplaced buffer crosses a cut. It answers either "the smallest arena"
// (kMinimize) or "any plan within a capacity" (kCapacity), under the
// base::CancelToken's deadline, always returning its best plan so far.
//
//   planner::ExactOptions options;
//   options.mode = planner::ExactMode::kCapacity;
//   options.capacity = 1 << 20;
//   absl::StatusOr<planner::ExactResult> result =
//       planner::SolveExact(problem, options, planner::SolveContext{});
//   if (result.ok() && result->feasible) Use(result->solution);
//
// Thread-compatible: every call keeps its state on its own stack; with
// ExactOptions::threads > 1 it runs on that many threads and returns once
// none of them searches for it any more.
#ifndef MEMPLAN_PLANNER_EXACT_EXACT_SOLVER_H_
#define MEMPLAN_PLANNER_EXACT_EXACT_SOLVER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "base/worker_pool.h"
#include "planner/problem.h"
#include "planner/strategy.h"

namespace memplan::planner {

// What the exact solver is asked for.
enum class ExactMode {
  kMinimize,  // the smallest arena; proven optimal when the search ends
  kCapacity,  // any plan with arena <= capacity, or a proof there is none
};

// The answer to "is there a plan within the capacity?".
enum class CapacityStatus {
  kFeasible,    // a plan within the capacity was found
  kInfeasible,  // proven: no plan fits
  kUnknown,     // ran out of time (or no capacity was asked for)
};

// Settings of SolveExact. Defaults suit the service; tests change them.
// docs/research/exact-search.md says how each device was measured.
struct ExactOptions {
  // What is asked for: the smallest arena, or any plan within a capacity.
  // Default kMinimize.
  ExactMode mode = ExactMode::kMinimize;
  // The limit for kCapacity; when unset, problem.capacity is used. It is
  // searched rounded down to the sizes' grain (every arena of a pushed-down
  // plan is a whole number of grains: the same plans fit). Default unset.
  // REQUIRES (kCapacity) one of the two set. kMinimize ignores it.
  std::optional<Bytes> capacity;
  // Problems with more buffers are not searched: the seed (or the built-in
  // greedy plan) is returned as is. The search's memory and set-up grow
  // with the buffers. Default 4096.
  int64_t max_buffers = 4096;
  // Nor are problems with more pairs of buffers live at the same time: the
  // search keeps every buffer's overlapping buffers, 8 bytes a pair (32 MiB
  // at the default), and finds them at set-up. Default 2^22.
  int64_t max_overlaps = int64_t{1} << 22;
  // Static buffer orderings tried round robin with doubling node limits
  // (MiniMalloc's "preordering heuristics"); letters, each descending:
  // W lifetime width, A area (size x width), T largest section total,
  // Z size; ties by buffer index. A trailing 'h' adds hole branching: at
  // each level the search branches only on the buffers that can cover the
  // tight section with the fewest of them, those whose top meets the floor
  // just before or after their lifetime first, then in the ordering's
  // order (without it, only forced holes, with zero or one candidate, are
  // narrowed), and checks the zero-slack bounds at every node. Cost: every
  // ordering gets the round's node limit; 'h' makes each node dearer.
  // Default {"WAT", "TAW", "TWA"}. REQUIRES non-empty, letters from
  // "WATZ", optional 'h'.
  std::vector<std::string> orderings = {"WAT", "TAW", "TWA"};
  // The orderings used instead when the capacity searched leaves zero
  // slack: every section's live bytes are 0 or exactly the capacity (a
  // capacity x time rectangle cut into buffers). Cost as `orderings`.
  // Default {"Zh", "TZh"}: largest first, with hole branching. REQUIRES as
  // `orderings`. (Whatever the orderings, at zero slack the search also
  // keeps the buffers of each hole group, planner/exact/hole_groups.h,
  // within its span.)
  std::vector<std::string> zero_slack_orderings = {"Zh", "TZh"};
  // At zero slack (the capacity searched equals every section's live
  // bytes), remember the search states that failed and prune them when
  // another order of placements reaches them again, also across the
  // restarts and orderings of the round robin. The verdict is the same,
  // reached in at most as many nodes. Cost: a hash-set lookup per node and
  // at most about 36 MB per capacity searched (kMinimize: per probe).
  // Default true.
  bool remember_failures = true;
  // At zero slack, run the PQ-tree sweep (planner/exact/pq_sweep.h) before
  // the orderings in every round of the round robin: it keeps every memory
  // order still possible instead of placing buffers one by one. Where there
  // is slack, at the lower bound (kMinimize's first probe, or a capacity
  // within one grain of the bound) it searches the plans with one free run
  // per step (PqSweepOptions::fill_slack): finding one proves the bound.
  // Cost: per round, up to 4 times the round's node limit at zero slack and
  // once the limit at the bound, taken from max_nodes like the orderings'.
  // Default true.
  bool pq_sweep = true;
  // Above the lower bound, every round of the round robin also dives: short
  // runs of the first ordering with each buffer's keys scaled by a factor
  // in [1, 1.1) drawn from a seed (the seeds follow from the capacity and
  // the round: the dives add no randomness of their own), each at the first
  // round's node limit. They try other starts where one ordering's run
  // would stay stuck. Cost: per round, twice the nodes the orderings had.
  // Default true.
  bool dives = true;
  // Search threads, the calling thread included. Every capacity searched
  // (kCapacity's, each probe of kMinimize) is one fixed sequence of runs:
  // round after round with doubling node limits, the PQ-tree sweep's step,
  // every ordering, and the dives; the threads run its runs at once (the
  // later ones on speculation that the earlier find nothing) and share the
  // incumbent (each probe starts below the best arena found) and the
  // failure memo (at zero slack the orderings' runs keep one, in sequence
  // order, beside the sweep). With max_nodes, or without a
  // base::CancelToken, the runs' answers are taken in sequence order, each
  // with the nodes it has in that order: the result is the same on any
  // number of threads (and under any load). With a deadline and no
  // max_nodes the first answer any run gives is taken. SolveContext::
  // parallel (the planner's request workers) raises it to its threads.
  // Cost: up to this many cores, and per thread a search state of
  // O(buffers + sections). Default 1. REQUIRES >= 1.
  int threads = 1;
  // Where the threads beyond the caller run: up to threads - 1 tasks on
  // this pool (those it refuses, when full, are not run: the caller and
  // the others do their share; one it starts after the call ended does
  // nothing; one leaves between runs once other tasks wait in the pool's
  // queue). Null: SolveContext::parallel's pool, else threads of the
  // call's own. Default null.
  base::WorkerPool* workers = nullptr;
  // kMinimize probes arenas in rounds: the lower bound, then a binary search
  // up to the incumbent over multiples of the sizes' common grain (every
  // arena of a pushed-down plan is one), each probe stopped after about
  // this many nodes per ordering (above the bound the dives add twice
  // that); the budget doubles every round. Larger: fewer, longer probes.
  // Default 16384. REQUIRES > 0.
  int64_t probe_nodes = 16384;
  // The round robin's node limit per ordering in its first round, doubled
  // every round, and every dive's limit; 0 picks max(1024, 2 x buffers).
  // Tests set it small to reach the later rounds and the dives on small
  // problems. Default 0.
  int64_t first_round_nodes = 0;
  // When > 0, the search stops after this many nodes in all, as if
  // cancelled: the answer then depends on the input and options only,
  // never on the machine's speed or load or the number of threads (the
  // nodes counted are those of the runs taken in; runs dropped after an
  // answer are not). Default 0: no limit but the base::CancelToken.
  int64_t max_nodes = 0;
};

// What SolveExact found.
struct ExactResult {
  // The best plan found; always complete and valid (it may be the seed).
  Solution solution;
  // True when no plan can have a smaller arena (search finished, or the
  // arena equals the lower bound).
  bool proven_optimal = false;
  // kCapacity: the plan fits the capacity. kMinimize: a plan exists (true).
  bool feasible = false;
  // kCapacity: the verdict. kMinimize: kUnknown.
  CapacityStatus capacity_status = CapacityStatus::kUnknown;
  // Search nodes (placements tried), over all probes and orderings.
  int64_t nodes = 0;
  // The lower bound used: max(PaddedLowerBound, fixed tops, largest buffer).
  Bytes lower_bound = 0;
};

// Runs the exact search. `ctx.cancel` bounds the time (the best plan so far
// is returned, not an error); `ctx.seed` (a valid plan) starts the incumbent,
// else a best-fit-by-size greedy does; `ctx.best_arena` is lowered to every
// improvement and, in kMinimize, caps the arenas worth probing.
// INVALID_ARGUMENT for a malformed problem (size <= 0, alignment not a power
// of two, start >= end, misaligned or negative fixed offset), or kCapacity
// without a capacity.
[[nodiscard]] absl::StatusOr<ExactResult> SolveExact(
    const Problem& problem, const ExactOptions& options,
    const SolveContext& ctx);

// The exact solver as a portfolio strategy ("exact"): SolveExact with the
// options given at construction (kMinimize by default), returning its plan.
// Thread-safe.
class ExactSolver : public OffsetStrategy {
 public:
  ExactSolver() = default;
  explicit ExactSolver(ExactOptions options) : options_(std::move(options)) {}

  std::string_view name() const override { return "exact"; }
  absl::StatusOr<Solution> Solve(const Problem& problem,
                                 const SolveContext& ctx) const override;

 private:
  ExactOptions options_;  // used by every Solve call
};

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_EXACT_EXACT_SOLVER_H_
