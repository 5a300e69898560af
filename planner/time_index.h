// An index of placed lifetimes that answers "which placed buffers overlap
// [start, end)?" in time proportional to the answer plus a small constant:
// the timeline is cut into blocks about one mean lifetime long; each block
// lists the items that cover it (for "live at start") and the items that
// start in it (for "starts inside the range"). Both lists are contiguous, so
// a query streams through memory instead of chasing tree nodes.
//
//   planner::TimeIndex<Offset> index(problem);
//   index.Insert(b.start, b.end, offset);
//   index.ForEachOverlapping(q.start, q.end, [](const Offset& o) { ... });
//
// Used by greedy placement and by pool coloring. Thread-compatible.
#ifndef MEMPLAN_PLANNER_TIME_INDEX_H_
#define MEMPLAN_PLANNER_TIME_INDEX_H_

#include <algorithm>
#include <vector>

#include "planner/problem.h"

namespace memplan::planner {

// The block length for `problem`: its mean lifetime, at least 1.
Step ChooseBlockLength(const Problem& problem);

template <typename Payload>
class TimeIndex {
 public:
  // Items must lie within the problem's ScheduleSpan.
  explicit TimeIndex(const Problem& problem)
      : block_(ChooseBlockLength(problem)) {
    const auto [first, last] = ScheduleSpan(problem);
    first_ = first;
    const size_t blocks = static_cast<size_t>((last - first_) / block_ + 1);
    covering_.resize(blocks);
    starting_.resize(blocks);
  }

  void Insert(Step start, Step end, const Payload& payload) {
    const Item item{start, end, payload};
    const size_t first = Block(start), last = Block(end - 1);
    starting_[first].push_back(item);
    for (size_t b = first; b <= last; ++b) covering_[b].push_back(item);
  }

  // Calls fn(payload) once for every item overlapping [start, end).
  template <typename Fn>
  void ForEachOverlapping(Step start, Step end, Fn&& fn) const {
    const size_t first = Block(start), last = Block(end - 1);
    for (const Item& item : covering_[first]) {
      if (item.start <= start && start < item.end) fn(item.payload);
    }
    for (size_t b = first; b <= last; ++b) {
      for (const Item& item : starting_[b]) {
        if (start < item.start && item.start < end) fn(item.payload);
      }
    }
  }

 private:
  struct Item {
    Step start;
    Step end;
    Payload payload;
  };

  size_t Block(Step step) const {
    return static_cast<size_t>((step - first_) / block_);
  }

  Step block_;
  Step first_;
  std::vector<std::vector<Item>> covering_;  // items overlapping each block
  std::vector<std::vector<Item>> starting_;  // items starting in each block
};

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_TIME_INDEX_H_
