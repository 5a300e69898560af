// Plans in one pass over time, as an allocator would serve the schedule:
// at each section the buffers that ended give their memory back, then the
// buffers that start take some, largest first. Each step costs O(log n)
// whatever the overlap, so the whole pass is O(n log n): the fallback when
// a first-fit or best-fit pass over placed buffers (greedy.h,
// shared_objects.h) passes its work cap on a dense problem, and a
// heuristic of its own ("sweep_best_fit").
//
//   absl::StatusOr<planner::Solution> s = planner::SweepOffsets(problem, {});
//   absl::StatusOr<planner::SharedObjects> o =
//       planner::SweepSharedObjects(problem, nullptr);
//
// Thread-safe: the state lives on the stack.
#ifndef MEMPLAN_PLANNER_SWEEP_H_
#define MEMPLAN_PLANNER_SWEEP_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "base/cancel.h"
#include "planner/problem.h"
#include "planner/shared_objects.h"
#include "planner/strategy.h"

namespace memplan::planner {

// Offsets from a best-fit free list replayed over time (TensorFlow's BFC
// and glibc serve requests online the same way; here the order within a
// step is largest first). Free ranges are coalesced; a request no free
// range holds goes at the top. Pinned buffers keep their offsets and their
// ranges for the whole schedule (the room between and below them is
// free); buffers spanning the schedule are stacked at the base (as
// greedy.h does). DEADLINE_EXCEEDED when `cancel` (may be null) fires;
// INVALID_ARGUMENT when the arena would pass 2^63 bytes.
// `time`: the problem's compressed time if at hand (else computed).
[[nodiscard]] absl::StatusOr<Solution> SweepOffsets(
    const Problem& problem, const base::CancelToken* cancel,
    const Sections* time = nullptr);

// Shared objects in time order (TFLite GPU's "greedy in order"): a
// starting buffer takes the smallest free object at least its size, else
// the largest free object (which grows to its size), else a new one;
// an object is free again when its buffer ends. Buffers spanning the
// schedule get objects of their own. DEADLINE_EXCEEDED when cancelled.
[[nodiscard]] absl::StatusOr<SharedObjects> SweepSharedObjects(
    const Problem& problem, const base::CancelToken* cancel,
    const Sections* time = nullptr);

class SweepStrategy : public OffsetStrategy {
 public:
  std::string_view name() const override { return "sweep_best_fit"; }
  absl::StatusOr<Solution> Solve(const Problem& problem,
                                 const SolveContext& ctx) const override;
};

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_SWEEP_H_
