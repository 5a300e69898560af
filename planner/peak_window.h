// The peak window: a placement for problems whose live bytes peak in one
// short stretch of the schedule, as in traces of a training step (the
// activations of the forward pass live until the backward pass reads them).
// A greedy order places the buffers of the peak among the others and
// leaves holes there a few percent wide; the arena then ends above the
// bound by what the peak's last buffers could not fit into. This pass
// plans the peak first:
//
// 1. The window: the steps from the first to the last one whose live bytes
//    are within a few per mille of the peak.
// 2. The buffers live over the whole window are stacked from offset 0,
//    each aligned, as a runtime's allocator would push them: by first step
//    (before the window, those live at a step are the bottom of the stack,
//    without a hole) or by last step, the last to end at the bottom (after
//    the window, the same).
// 3. The buffers live in only part of the window (at most
//    kMaxPeakWindowBuffers) form a small problem of their own, their
//    lifetimes cut to the window, planned by a hill climb (hill_climb.h)
//    from four best-fit orders (at once with three threads or more, the
//    plan picked as one thread would), placed above the stack.
// 4. With those offsets pinned, every other buffer is placed with best fit
//    by conflicts: those before the window apart from those after it (they
//    never live at once), the two sides at once on two threads, and on a
//    third the next variant beside them (PlanPeakWindow).
//
// kPeakWindowVariants are the window widths and stack orders tried, in
// order, until one reaches the bound. On the traces of bench/data/traces
// S_1 (28,526 buffers) reaches its bound with the first (0.5%, by first
// step), where every greedy order and the hill climb end 0.12-1.6% above
// it, and pangu_2.6B (18,692) with the second (2%, by last step), where
// best fit ends 0.76-36% above it. Where a variant does not apply (pinned
// buffers, too many buffers in part of the window) it is skipped; with
// none applying, the strategy's plan is best fit by conflicts.
//
//   absl::StatusOr<planner::PeakWindowPlan> p =
//       planner::PlanPeakWindow(problem, planner::kPeakWindowVariantCount,
//                               stop_at, cancel);
//
// Deterministic (work, not time, bounds the climbs; the same plan on any
// number of threads). Cost of a variant: two sorts, one greedy placement of
// every buffer (PlacementWork) and the window's climb (PeakWindowWork).
// Thread-safe.
#ifndef MEMPLAN_PLANNER_PEAK_WINDOW_H_
#define MEMPLAN_PLANNER_PEAK_WINDOW_H_

#include <cstdint>
#include <iterator>
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

// How the buffers over the window are stacked from offset 0.
enum class StackBy {
  kFirstStep,  // the first to start at the bottom (then by index)
  kLastStep,   // the last to end at the bottom (then by index)
};

// A window width (steps whose live bytes are at least the peak less
// `per_mille` of it) and a stack order.
struct PeakWindowVariant {
  int64_t per_mille;
  StackBy stack;
};

// The variants tried, in order. 0.5% takes in S_1's 50 buffers that start
// or end near its peak (2% takes in 557, which the climb packs less
// tightly: 1.0011), and by first step it reaches S_1's bound; pangu's
// window at 0.5% is one step, without a buffer in part of it, and no stack
// order of it reaches the bound; at 2% (170 steps, 158 buffers), by last
// step, it does. The other two are tried with --optimize.
inline constexpr PeakWindowVariant kPeakWindowVariants[] = {
    {5, StackBy::kFirstStep},
    {20, StackBy::kLastStep},
    {5, StackBy::kLastStep},
    {20, StackBy::kFirstStep}};
inline constexpr int kPeakWindowVariantCount =
    static_cast<int>(std::size(kPeakWindowVariants));
// The variants the default plan may try (planner.cc): each costs about a
// placement of every buffer, and where none reaches the bound the climb
// after them has that much less time (on 6,000 buffers of
// MixedLongProblem, where nothing closes the gap, two take 0.18 s).
inline constexpr int kDefaultPeakWindowVariants = 2;

// Over this many buffers live in part of the window, a variant does not
// apply (a climb over more buffers stops far from tight within its work).
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
  std::vector<int> stacked;  // live over all of it, in stack order
  std::vector<int> inside;   // live in part of it, by index
};

// The window of `problem` under `variant`, or nullopt for a problem
// without buffers or once `cancel` (may be null) fires during its sort.
// O(n log n).
std::optional<PeakWindow> FindPeakWindow(
    const Problem& problem, PeakWindowVariant variant,
    const base::CancelToken* cancel = nullptr);

// The plan of one variant, the buffers before and after the window placed
// at once on the threads `parallel` gives (the same plan on any).
// FAILED_PRECONDITION where the variant does not apply (pinned buffers,
// more than kMaxPeakWindowBuffers in part of the window); with `below` >
// 0, ABORTED once the plan would reach `below` (the window's own plan, or
// a buffer placed around it: a plan no smaller than one at hand is given
// up as soon as that shows); DEADLINE_EXCEEDED when cancelled.
[[nodiscard]] absl::StatusOr<Solution> PeakWindowOffsets(
    const Problem& problem, PeakWindowVariant variant,
    const base::CancelToken* cancel, const base::Parallelism& parallel = {},
    Bytes below = 0);

// The smallest plan of the first `variants` of kPeakWindowVariants (the
// first of equals), ending after the first whose arena is at most
// `stop_at`: each variant placed only while below `below` (> 0; 0: none)
// and below the best plan of the variants before it. No plan when none
// applies or gets below. On the threads `parallel` gives, each variant's
// two sides are placed at once, and with three threads or more the
// variants too (pieces of the earliest first; those after one meeting
// `stop_at` cancelled): the plan and the counts of one thread, whatever
// the threads.
struct PeakWindowPlan {
  std::optional<Solution> solution;
  int variants_run = 0;     // tried, applying or not
  int variants_placed = 0;  // those that applied (placed, given up or not)
};
[[nodiscard]] absl::StatusOr<PeakWindowPlan> PlanPeakWindow(
    const Problem& problem, int variants, Bytes stop_at,
    const base::CancelToken* cancel, const base::Parallelism& parallel = {},
    Bytes below = 0);

class PeakWindowStrategy : public OffsetStrategy {
 public:
  std::string_view name() const override { return "peak_window"; }
  absl::StatusOr<Solution> Solve(const Problem& problem,
                                 const SolveContext& ctx) const override;
};

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_PEAK_WINDOW_H_
