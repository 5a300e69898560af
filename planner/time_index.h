// An index of placed lifetimes that answers "which placed buffers overlap
// [start, end)?" in time proportional to the answer plus a small constant:
// the timeline is cut into blocks about one mean lifetime long; each block
// lists the items that cover it (for "live at start") and the items that
// start in it (for "starts inside the range"). The lists of all blocks live
// in two flat arrays sized up front from the problem, so a query streams
// through contiguous memory and inserting never allocates.
//
//   planner::TimeIndex<Offset> index(problem);
//   index.Insert(b.start, b.end, offset);  // b is one of problem's buffers
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
  // Room for every buffer of `problem`, each inserted at most once.
  explicit TimeIndex(const Problem& problem)
      : block_(ChooseBlockLength(problem)) {
    const auto [first, last] = ScheduleSpan(problem);
    first_ = first;
    const size_t blocks = static_cast<size_t>((last - first_) / block_ + 1);
    std::vector<size_t> covering(blocks + 1, 0), starting(blocks + 1, 0);
    for (const Buffer& b : problem.buffers) {
      ++starting[Block(b.start) + 1];
      for (size_t k = Block(b.start); k <= Block(b.end - 1); ++k) {
        ++covering[k + 1];
      }
    }
    Prefix(covering, &covering_begin_);
    Prefix(starting, &starting_begin_);
    covering_end_.assign(covering_begin_.begin(), covering_begin_.end() - 1);
    starting_end_.assign(starting_begin_.begin(), starting_begin_.end() - 1);
    covering_.resize(covering_begin_.back());
    starting_.resize(starting_begin_.back());
  }

  // REQUIRES: [start, end) is the lifetime of a buffer of the problem that
  // was not inserted before.
  void Insert(Step start, Step end, const Payload& payload) {
    const Item item{start, end, payload};
    const size_t first = Block(start), last = Block(end - 1);
    starting_[starting_end_[first]++] = item;
    for (size_t b = first; b <= last; ++b) {
      covering_[covering_end_[b]++] = item;
    }
  }

  // Calls fn(payload) once for every item overlapping [start, end).
  template <typename Fn>
  void ForEachOverlapping(Step start, Step end, Fn&& fn) const {
    const size_t first = Block(start), last = Block(end - 1);
    for (size_t i = covering_begin_[first]; i < covering_end_[first]; ++i) {
      const Item& item = covering_[i];
      if (item.start <= start && start < item.end) fn(item.payload);
    }
    for (size_t b = first; b <= last; ++b) {
      for (size_t i = starting_begin_[b]; i < starting_end_[b]; ++i) {
        const Item& item = starting_[i];
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

  // Running sums of per-block counts: each block's first slot.
  static void Prefix(const std::vector<size_t>& counts,
                     std::vector<size_t>* begin) {
    begin->resize(counts.size());
    size_t sum = 0;
    for (size_t k = 0; k < counts.size(); ++k) {
      sum += counts[k];
      (*begin)[k] = sum;
    }
  }

  Step block_;
  Step first_ = 0;
  std::vector<Item> covering_;  // per block: items overlapping it
  std::vector<Item> starting_;  // per block: items starting in it
  std::vector<size_t> covering_begin_, covering_end_;  // slots per block
  std::vector<size_t> starting_begin_, starting_end_;
};

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_TIME_INDEX_H_
