// Places buffers lowest first, as the exact search's first dive does
// (MiniMalloc's canonical order, without backtracking): a buffer's floor is
// the highest top of the placed buffers whose lifetimes overlap its own
// (the skyline over its lifetime), lifted over pinned buffers and aligned;
// the buffer with the lowest floor goes there next, the largest area (size
// x lifetime) or the largest size first among equal floors, then the
// lowest index. Where a best-fit pass leaves a gap no later buffer fills,
// this order tends to fill the bottom first: on the 193-tensor graph of
// bench/rps_bench, by area, it reaches the lower bound that greedy by size
// misses by 8%; on Silero VAD's 16k_op15 export, by size, the bound that
// by area misses by 0.9%.
//
//   planner::SkylineOptions options;
//   options.ties = planner::SkylineTies::kSize;
//   absl::StatusOr<planner::Solution> s =
//       planner::SkylineOffsets(problem, cancel, options);
//
// Cost: O(n log n) for the order and a segment tree over compressed time
// (sections.h's CompressTime, the planner's own when given),
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
#include "planner/sections.h"
#include "planner/strategy.h"

namespace memplan::planner {

// Which buffer goes first among those with the lowest floor.
enum class SkylineTies {
  kArea,  // the largest size x lifetime ("skyline_area")
  kSize,  // the largest size ("skyline_size")
};

// How the skyline is read and raised.
enum class SkylineIndex {
  kAuto,  // kFlat when lifetimes span few intervals on average, else kTree
  kFlat,  // an array of intervals: each read and raise costs its span
  kTree,  // a segment tree: O(log n) each
};

// Settings of SkylineOffsets.
struct SkylineOptions {
  // The order among equal floors. Default kArea.
  SkylineTies ties = SkylineTies::kArea;
  // The work (base::WorkMeter units: 8 per buffer taken from the queue, a
  // unit per pinned buffer a lift passes) after which it stops with
  // RESOURCE_EXHAUSTED. Default 0: none.
  int64_t work_cap = 0;
  // Tests and benchmarks: every choice gives the same plan. Default kAuto.
  SkylineIndex index = SkylineIndex::kAuto;
  // The problem's compressed time (CompressTime) when the caller has it;
  // null: computed. Default null.
  const Sections* time = nullptr;
};

// The plan described above. Pinned buffers keep their offsets.
// DEADLINE_EXCEEDED when `cancel` (may be null) fires; RESOURCE_EXHAUSTED
// past the work cap; INVALID_ARGUMENT when the arena would pass 2^63 bytes.
[[nodiscard]] absl::StatusOr<Solution> SkylineOffsets(
    const Problem& problem, const base::CancelToken* cancel,
    const SkylineOptions& options);

// SkylineOffsets as a strategy ("skyline_area", "skyline_size"), under
// SolveContext's cancel and work_cap.
class SkylineStrategy : public OffsetStrategy {
 public:
  explicit SkylineStrategy(SkylineTies ties) : ties_(ties) {}
  std::string_view name() const override;
  absl::StatusOr<Solution> Solve(const Problem& problem,
                                 const SolveContext& ctx) const override;

 private:
  SkylineTies ties_;
};

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_SKYLINE_H_
