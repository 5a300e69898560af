// Places buffers lowest first, as the exact search's first dive does
// (MiniMalloc's canonical order, without backtracking): a buffer's floor is
// the highest top of the placed buffers whose lifetimes overlap its own
// (the skyline over its lifetime), lifted over pinned buffers and aligned;
// the buffer with the lowest floor goes there next, the largest area (size
// x lifetime) first among equal floors, then the lowest index. Where a
// best-fit pass leaves a gap no later buffer fills, this order tends to
// fill the bottom first: on the 193-tensor graph of bench/rps_bench it
// reaches the lower bound that greedy by size misses by 8%.
//
//   absl::StatusOr<planner::Solution> s =
//       planner::SkylineOffsets(problem, cancel, /*work_cap=*/0);
//
// Cost: O(n log n) for the order and a segment tree over compressed time,
// plus O(log n) each time a queued buffer's floor has risen (it is queued
// again at its new floor), plus, per lift, the pinned buffers below its
// top. Thread-safe: the state lives on the stack.
#ifndef MEMPLAN_PLANNER_SKYLINE_H_
#define MEMPLAN_PLANNER_SKYLINE_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "base/cancel.h"
#include "planner/problem.h"
#include "planner/strategy.h"

namespace memplan::planner {

// The plan described above. Pinned buffers keep their offsets.
// DEADLINE_EXCEEDED when `cancel` (may be null) fires; RESOURCE_EXHAUSTED
// once the work (base::WorkMeter units: a unit per buffer taken from the
// queue and per pinned buffer a lift passes) passes `work_cap` (> 0; 0:
// none); INVALID_ARGUMENT when the arena would pass 2^62 bytes.
[[nodiscard]] absl::StatusOr<Solution> SkylineOffsets(
    const Problem& problem, const base::CancelToken* cancel, int64_t work_cap);

// How the skyline is read and raised.
enum class SkylineIndex {
  kAuto,  // kFlat when lifetimes span few intervals on average, else kTree
  kFlat,  // an array of intervals: each read and raise costs its span
  kTree,  // a segment tree: O(log n) each
};

// SkylineOffsets with the index chosen (tests and benchmarks): every choice
// gives the same plan.
[[nodiscard]] absl::StatusOr<Solution> SkylineOffsets(
    const Problem& problem, const base::CancelToken* cancel, int64_t work_cap,
    SkylineIndex index);

// SkylineOffsets as a strategy ("skyline_area"), under SolveContext's
// cancel and work_cap.
class SkylineStrategy : public OffsetStrategy {
 public:
  std::string_view name() const override { return "skyline_area"; }
  absl::StatusOr<Solution> Solve(const Problem& problem,
                                 const SolveContext& ctx) const override;
};

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_SKYLINE_H_
