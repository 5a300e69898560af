// An index of placed lifetimes that answers "which placed buffers overlap
// buffer q's lifetime?" in time proportional to the answer plus a small
// constant. It works in compressed time: a buffer's lifetime is its range
// of maximal sections (sections.h), so memory and time depend on the number
// of buffers only, never on how many steps the schedule spans. The
// sections are cut into blocks about one mean lifetime long; each block
// lists the items that started before it and reach into it, and the items
// that start in it. A query reads the first list of q's first block (live
// at q's start), the second list of that block (starting before or after
// q's start) and the second lists of q's later blocks (starting inside q).
// An item is listed once per block it touches, never twice in one block.
// The lists of all blocks live in two flat arrays sized up front (fewer
// than 3n entries for n buffers, as blocks are a mean lifetime long), so a
// query streams through contiguous memory and inserting never allocates.
//
//   planner::Sections time = planner::CompressTime(problem);
//   planner::TimeIndex<Offset> index(time);
//   index.Insert(i, offset);  // i indexes problem.buffers
//   index.ForEachOverlapping(q, [](const Offset& o) { ... });
//
// Used by greedy placement, pool coloring and the hill climb.
// Thread-compatible.
#ifndef MEMPLAN_PLANNER_TIME_INDEX_H_
#define MEMPLAN_PLANNER_TIME_INDEX_H_

#include <algorithm>
#include <cstddef>
#include <vector>

#include "planner/sections.h"

namespace memplan::planner {

// The block length for `time`: the mean lifetime in sections, at least 1.
int ChooseBlockLength(const Sections& time);

template <typename Payload>
class TimeIndex {
 public:
  // Room for every buffer of `time`, each inserted at most once. `time`
  // must outlive the index.
  explicit TimeIndex(const Sections& time)
      : time_(time), block_(ChooseBlockLength(time)) {
    const size_t blocks = static_cast<size_t>(time.size() / block_ + 1);
    std::vector<size_t> covering(blocks + 1, 0), starting(blocks + 1, 0);
    for (size_t i = 0; i < time.first.size(); ++i) {
      ++starting[Block(time.first[i]) + 1];
      for (size_t k = Block(time.first[i]) + 1; k <= Block(time.last[i] - 1);
           ++k) {
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

  // REQUIRES: buffer i (a position of `time`) was not inserted before.
  void Insert(int i, const Payload& payload) {
    Insert(time_.first[i], time_.last[i], payload);
  }

  // The same with buffer i's sections given: [lo, hi) = [first[i], last[i]).
  // REQUIRES: exactly some buffer i's range, not inserted before (the
  // blocks' slots were counted from those ranges).
  void Insert(int lo, int hi, const Payload& payload) {
    const Item item{lo, hi, payload};
    const size_t first = Block(item.lo), last = Block(item.hi - 1);
    starting_[starting_end_[first]++] = item;
    for (size_t b = first + 1; b <= last; ++b) {
      covering_[covering_end_[b]++] = item;
    }
  }

  // Calls fn(payload) once for every inserted item whose lifetime overlaps
  // buffer q's.
  template <typename Fn>
  void ForEachOverlapping(int q, Fn&& fn) const {
    ForEachOverlapping(time_.first[q], time_.last[q], fn);
  }

  // The same for sections [lo, hi). REQUIRES lo < hi <= time.size().
  template <typename Fn>
  void ForEachOverlapping(int lo, int hi, Fn&& fn) const {
    const size_t first = Block(lo), last = Block(hi - 1);
    // Started before lo's block: overlaps when it is still live at lo.
    for (size_t i = covering_begin_[first]; i < covering_end_[first]; ++i) {
      const Item& item = covering_[i];
      if (lo < item.hi) fn(item.payload);
    }
    // Started in lo's block: before or after lo.
    for (size_t i = starting_begin_[first]; i < starting_end_[first]; ++i) {
      const Item& item = starting_[i];
      if (lo < item.hi && item.lo < hi) fn(item.payload);
    }
    // Started in a later block: after lo.
    for (size_t b = first + 1; b <= last; ++b) {
      for (size_t i = starting_begin_[b]; i < starting_end_[b]; ++i) {
        const Item& item = starting_[i];
        if (item.lo < hi) fn(item.payload);
      }
    }
  }

  // List entries allocated: fewer than 3 per buffer on average (memory is
  // O(buffers)).
  size_t slots() const { return covering_.size() + starting_.size(); }

 private:
  struct Item {
    int lo;  // first section
    int hi;  // one past the last section
    Payload payload;
  };

  size_t Block(int section) const {
    return static_cast<size_t>(section / block_);
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

  const Sections& time_;
  int block_;
  std::vector<Item> covering_;  // per block: items reaching in from before
  std::vector<Item> starting_;  // per block: items starting in it
  std::vector<size_t> covering_begin_, covering_end_;  // slots per block
  std::vector<size_t> starting_begin_, starting_end_;
};

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_TIME_INDEX_H_
