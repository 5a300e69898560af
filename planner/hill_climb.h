// A seeded hill climb over the placement order (the idea of TVM USMP's
// hill_climb): start from the best best-fit heuristic's order, move a buffer
// that reaches the top of the arena ahead of a buffer placed before it that
// it overlaps in time (or swap the two), re-place everything with best fit,
// and keep the new order when the arena is no larger.
//
//   planner::HillClimbStrategy climb;
//   absl::StatusOr<planner::Solution> s = climb.Solve(problem, ctx);
//
// Deterministic: a fixed seed and a fixed number of iterations scaled to the
// problem size, so the same problem always gives the same plan; a cancelled
// climb returns its best plan so far. Never worse than its seed. Problems
// above kMaxHillClimbBuffers get the seed plan without climbing.
// Cost: iterations x one greedy placement.
#ifndef MEMPLAN_PLANNER_HILL_CLIMB_H_
#define MEMPLAN_PLANNER_HILL_CLIMB_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/greedy.h"
#include "planner/strategy.h"

namespace memplan::planner {

// Above this many buffers the climb is skipped (the seed plan is returned).
// Room for the trace S_1 of bench/data/traces (28,526 buffers, a best-fit
// placement about 0.1 s), which the default plan climbs (planner.cc).
inline constexpr int64_t kMaxHillClimbBuffers = 32'768;

// Settings of the climb. Defaults suit the portfolio; tests change them.
struct HillClimbOptions {
  // Seed of the move generator. Default 1.
  uint64_t seed = 1;
  // Iterations; 0 picks HillClimbIterations. Default 0.
  int64_t iterations = 0;
  // The greedy work HillClimbIterations spreads over the iterations; 0 is
  // kHillClimbWork. HillClimbStrategy sets it from SolveContext::effort
  // (kHillClimbWorkPerEffort per unit). Default 0.
  int64_t work = 0;
  // The climb ends once its arena is at most this (no move can then do
  // better than the bound the caller knows). <= 0: never. Default 0.
  Bytes stop_at = 0;
};

// Greedy work (a buffer placed, an overlapping buffer visited) of a climb
// by default, and per unit of SolveContext::effort (about as long as one
// exact search node).
inline constexpr int64_t kHillClimbWork = 8'000'000;
inline constexpr int64_t kHillClimbWorkPerEffort = 64;

// The iteration count when one placement costs `placement_work` units
// (PlacementWork): `work` units of greedy work in all (by default
// kHillClimbWork, about 0.05-0.5 s on one core), between 8 and 1000
// iterations. Deterministic: no clock is read.
int64_t HillClimbIterations(int64_t placement_work,
                            int64_t work = kHillClimbWork);

// What a climb did, for tests and benchmarks.
struct HillClimbResult {
  Solution solution;       // the best plan found (the seed or better)
  Bytes seed_arena = 0;    // the arena of the seed plan
  std::vector<int> order;  // the placement order that gives `solution`
  int64_t iterations = 0;  // iterations run (fewer when cancelled)
  int64_t accepted = 0;    // moves kept (arena no larger)
};

// Climbs from `seed_order` (every index once; placed with best fit).
// DEADLINE_EXCEEDED only when cancelled before the seed is placed.
[[nodiscard]] absl::StatusOr<HillClimbResult> HillClimb(
    const Problem& problem, std::vector<int> seed_order,
    const HillClimbOptions& options, const base::CancelToken* cancel);
// The same from the seed's plan already placed: `seed` is what best fit
// gives in `seed_order` (not placed again). Never fails.
HillClimbResult HillClimb(const Problem& problem, std::vector<int> seed_order,
                          Solution seed, const HillClimbOptions& options,
                          const base::CancelToken* cancel);

// The strategy "hill_climb": seeds with the best of the best-fit orders
// (size, area, conflicts, breadth, lifetime; ties to the first), then
// climbs. Thread-safe.
class HillClimbStrategy : public OffsetStrategy {
 public:
  HillClimbStrategy() = default;
  explicit HillClimbStrategy(HillClimbOptions options) : options_(options) {}
  std::string_view name() const override { return "hill_climb"; }
  absl::StatusOr<Solution> Solve(const Problem& problem,
                                 const SolveContext& ctx) const override;

 private:
  HillClimbOptions options_;  // used by every Solve call
};

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_HILL_CLIMB_H_
