// The peak window: a placement for problems whose live bytes peak in one
// short stretch of the schedule, as in traces of a training step (the
// activations of the forward pass live until the backward pass reads them).
// A greedy order places the buffers of the peak among the others and
// leaves holes there a few percent wide; the arena then ends above the
// bound by what the peak's last buffers could not fit into. This pass
// plans the peak first:
//
// 1. The window: the steps from the first to the last one whose live bytes
//    are within kPeakWindowPerMille per mille of the peak.
// 2. The buffers live over the whole window are stacked from offset 0 in
//    order of their first step (a stack, as a runtime's allocator would
//    push them: before the window, those live at a step are the bottom of
//    the stack, with no hole), each aligned.
// 3. The buffers live in only part of the window (at most
//    kMaxPeakWindowBuffers) form a small problem of their own, their
//    lifetimes cut to the window: best fit in four orders, then a hill
//    climb (hill_climb.h) within kHillClimbWork, placed above the stack.
// 4. With those offsets pinned, every other buffer is placed with best fit
//    by conflicts: those before the window apart from those after it (they
//    never live at once), the two sides at once on two threads.
//
// On the trace S_1 of bench/data/traces (28,526 buffers) it reaches the
// bound, where every greedy order and the hill climb end 0.12-1.6% above
// it. Where it does not apply (pinned buffers, no buffer over the
// window, too many buffers in part of it), or where it does worse, the
// plan is best fit by conflicts: it is one heuristic among the others.
//
//   absl::StatusOr<planner::Solution> s =
//       planner::PeakWindowOffsets(problem, cancel);
//
// Deterministic (work, not time, bounds the climb; the same plan on any
// number of threads). Cost: two sorts, one greedy placement of every
// buffer (PlacementWork) and the window's climb.
// Thread-safe.
#ifndef MEMPLAN_PLANNER_PEAK_WINDOW_H_
#define MEMPLAN_PLANNER_PEAK_WINDOW_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "base/cancel.h"
#include "base/parallel.h"
#include "planner/hill_climb.h"
#include "planner/problem.h"
#include "planner/strategy.h"

namespace memplan::planner {

// Steps whose live bytes are at least the peak less this many per mille of
// it are the window's: 0.5% takes in S_1's 50 buffers that start or end
// near its peak (2% takes in 557, which the climb packs less tightly).
inline constexpr int64_t kPeakWindowPerMille = 5;
// Over this many buffers live in part of the window, the pass does not
// plan the window (a climb over more buffers stops far from tight within
// its work).
inline constexpr size_t kMaxPeakWindowBuffers = 1024;

// The work the default plan (planner.cc) counts for this pass after its
// climb (work_cap.h's kTightClimbWork): one placement of every buffer
// (`placement_work`) and its window's climb (at most kHillClimbWork). S_1 (86.5
// million units a placement, no climb move within kTightClimbWork) gets it;
// pangu_2.6B, whose climb takes the rest of the work, does not (its climb ends
// at the bound).
inline int64_t PeakWindowWork(int64_t placement_work) {
  return placement_work + kHillClimbWork;
}

// The window of `problem` and its buffers.
struct PeakWindow {
  Step begin = 0;            // its first step
  Step end = 0;              // one past its last step
  std::vector<int> stacked;  // live over all of it, by first step, index
  std::vector<int> inside;   // live in part of it, by index
};

// The peak window of `problem` (steps within `per_mille` of the peak), or
// nullopt for a problem without buffers or once `cancel` (may be null)
// fires during its sort. O(n log n).
std::optional<PeakWindow> FindPeakWindow(
    const Problem& problem, int64_t per_mille,
    const base::CancelToken* cancel = nullptr);

// The plan described above, the buffers before and after the window
// placed at once on the threads `parallel` gives (the same plan on any).
// DEADLINE_EXCEEDED when cancelled.
[[nodiscard]] absl::StatusOr<Solution> PeakWindowOffsets(
    const Problem& problem, const base::CancelToken* cancel,
    const base::Parallelism& parallel = {});

class PeakWindowStrategy : public OffsetStrategy {
 public:
  std::string_view name() const override { return "peak_window"; }
  absl::StatusOr<Solution> Solve(const Problem& problem,
                                 const SolveContext& ctx) const override;
};

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_PEAK_WINDOW_H_
