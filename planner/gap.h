// The gap search every placement shares: given the memory ranges taken by
// the buffers a new buffer meets, sorted by offset, find where it goes
// (best fit: the smallest gap that holds it; first fit: the lowest).
// TFLite's ArenaPlanner and tflite-micro's greedy planner search the same
// way, so the plans of best/first fit by size reproduce their figures.
//
//   std::vector<planner::TakenRange> taken = ...;  // sorted by offset
//   planner::Offset at = planner::FindGap(taken, size, alignment,
//                                         planner::FitPolicy::kBestFit, 0);
//
// Pure functions; thread-safe.
#ifndef MEMPLAN_PLANNER_GAP_H_
#define MEMPLAN_PLANNER_GAP_H_

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/types/span.h"
#include "planner/problem.h"

namespace memplan::planner {

// Which gap a buffer goes into.
enum class FitPolicy {
  kBestFit,   // the smallest gap that holds it
  kFirstFit,  // the lowest gap that holds it
};

// A memory range [offset, top) some buffer takes.
struct TakenRange {
  Offset offset = 0;  // where it starts
  Offset top = 0;     // one past its last byte
  bool operator<(const TakenRange& o) const {
    return offset != o.offset ? offset < o.offset : top < o.top;
  }
};

// The offset for a buffer of `size` at `alignment` above `base` among
// `taken` (sorted by offset; ranges may overlap each other). A gap runs from
// the highest top so far to the next range's offset; its size, for best
// fit, is measured from that top (before alignment), ties to the lowest.
// When no gap holds the buffer it goes above everything. O(taken).
inline Offset FindGap(absl::Span<const TakenRange> taken, Bytes size,
                      Bytes alignment, FitPolicy fit, Offset base) {
  Offset best = -1;
  Bytes best_gap = std::numeric_limits<Bytes>::max();
  Offset cursor = base;
  for (const TakenRange& t : taken) {
    const Offset candidate = AlignUp(cursor, alignment);
    if (candidate + size <= t.offset) {
      if (fit == FitPolicy::kFirstFit) return candidate;
      if (t.offset - cursor < best_gap) {
        best_gap = t.offset - cursor;
        best = candidate;
      }
    }
    cursor = std::max(cursor, t.top);
  }
  return best >= 0 ? best : AlignUp(cursor, alignment);
}

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_GAP_H_
