// TFLite Micro's own memory planner (GreedyMemoryPlanner in tflite-micro's
// memory_planner/greedy_memory_planner.cc), reproduced so that a plan for
// a TFLite model can be compared with the arena TFLM would plan itself:
// buffers with an offline offset are placed first, at that offset, in the
// order added; the others by decreasing size (equal sizes: the last added
// first, as TFLM's stable sort of its reversed list leaves them), each at
// the first gap, in offset order, between buffers live at the same time
// that is large enough; the arena is the largest offset + size.
//
//   planner::TflmGreedyPlanner tflm;
//   tflm.AddBuffer(/*size=*/1024, /*first=*/0, /*last=*/2);
//   tflm.AddBuffer(512, 1, 3, /*offline_offset=*/2048);
//   planner::TflmPlan plan = tflm.Plan();  // plan.arena_size, plan.offsets
//
// Sizes are taken as given: TFLM's allocator rounds every tensor up to
// kTflmAlignment before adding it (FromProblem does the same).
#ifndef MEMPLAN_PLANNER_TFLM_GREEDY_H_
#define MEMPLAN_PLANNER_TFLM_GREEDY_H_

#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "base/cancel.h"
#include "planner/problem.h"

namespace memplan::planner {

// TFLM's MicroArenaBufferAlignment(): every arena buffer starts and ends on
// a multiple of it.
inline constexpr Bytes kTflmAlignment = 16;

// One buffer as TFLM's planner is asked for it.
struct TflmBuffer {
  Bytes size = 0;  // bytes (TFLM's allocator has aligned them up)
  Step first = 0;  // first allocation scope it is live (TFLM's time step)
  Step last = 0;   // last scope it is live, inclusive
  // A fixed place from an offline plan; -1 (TFLM's kOnlinePlannedBuffer):
  // placed by the planner.
  Offset offline_offset = -1;
};

// Where TFLM's planner put each buffer.
struct TflmPlan {
  std::vector<Offset> offsets;  // per buffer, in the order added
  Bytes arena_size = 0;         // largest offset + size (0 for none)
};

// The planner. Thread-compatible. Planning takes time quadratic in the
// number of buffers, as TFLM's does.
class TflmGreedyPlanner {
 public:
  TflmGreedyPlanner() = default;
  explicit TflmGreedyPlanner(std::vector<TflmBuffer> buffers)
      : buffers_(std::move(buffers)) {}

  // Adds a buffer; REQUIRES size >= 0, offline_offset >= -1.
  void AddBuffer(Bytes size, Step first, Step last, Offset offline_offset = -1);
  // Adds every buffer of `problem`: size rounded up to its alignment, live
  // over [start, end - 1], a fixed offset as an offline offset.
  static TflmGreedyPlanner FromProblem(const Problem& problem);

  int buffer_count() const { return static_cast<int>(buffers_.size()); }
  const std::vector<TflmBuffer>& buffers() const { return buffers_; }

  // Places every buffer as TFLM does.
  TflmPlan Plan() const;
  // The same, polling `cancel` (may be null) every few hundred buffers:
  // DEADLINE_EXCEEDED once it fires.
  absl::StatusOr<TflmPlan> Plan(const base::CancelToken* cancel) const;

 private:
  std::vector<TflmBuffer> buffers_;
};

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_TFLM_GREEDY_H_
