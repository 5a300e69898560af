// Taken memory over time, for placements whose buffers overlap many others:
// "which address ranges are taken at some point of sections [lo, hi)?",
// answered merged, so greedy placement and shared-object coloring pay for
// the ranges of the union they read, not for every placed buffer a new one
// overlaps (a TimeIndex scan costs the latter: quadratic when thousands of
// buffers share their lifetimes).
//
// A segment tree over compressed time (sections.h). A range taken during
// [lo, hi) is stored at the O(log T) nodes that tile [lo, hi) ("own" sets)
// and merged into the "subtree" set of each of those nodes and of their
// ancestors (stopping where it is already covered). A query reads the
// subtree sets of the nodes tiling its range and the own sets of their
// ancestors: every range placed during the query's time is in one of them.
// Each set keeps disjoint ranges, neighbours merged, so ranges stacked one
// on another collapse into one.
//
// Gaps no later request can use (narrower than the smallest size still to
// come, at the smallest alignment still to come) are filled as they appear:
// they can never be chosen, and filling them keeps the sets short
// (alignment padding between stacked buffers would otherwise leave one gap
// per buffer). Queries see the same usable gaps and the same top.
//
//   planner::GapIndex index(time.size());
//   index.Insert(lo, hi, {offset, offset + size});
//   absl::Span<const TakenRange> taken = index.Taken(lo2, hi2);
//   Offset at = planner::FindGap(taken, size2, alignment2, fit, base);
//
// Cost: O(log^2 T) amortized per insertion; a query O(log T) plus the
// merged ranges it reads, times a log for sorting them. Memory: at most
// O(log T) ranges per insertion, fewer once merged. Thread-compatible.
#ifndef MEMPLAN_PLANNER_GAP_INDEX_H_
#define MEMPLAN_PLANNER_GAP_INDEX_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/types/span.h"
#include "planner/gap.h"
#include "planner/problem.h"

namespace memplan::planner {

class GapIndex {
 public:
  // An empty index over sections [0, sections).
  explicit GapIndex(int sections);

  // From now on every request asks for at least `size` bytes at an
  // alignment of at least `alignment` (a power of two): gaps narrower than
  // that are filled when they appear. Defaults 1 and 1: nothing is filled.
  // REQUIRES the values never decrease between calls.
  void SetSmallestRequest(Bytes size, Bytes alignment) {
    min_size_ = size;
    min_alignment_ = alignment;
  }

  // Marks `range` taken during sections [lo, hi). REQUIRES lo < hi.
  void Insert(int lo, int hi, TakenRange range);

  // The ranges taken at some point of sections [lo, hi), disjoint and
  // sorted by offset; gaps between them are those usable by a request at
  // least as large as the smallest request (and possibly some narrower).
  // Valid until the next call. REQUIRES lo < hi.
  absl::Span<const TakenRange> Taken(int lo, int hi);

  // Where first fit puts a request of `size` (> 0) bytes at `alignment`
  // above `base` during sections [lo, hi): FindGap(Taken(lo, hi), size,
  // alignment, FitPolicy::kFirstFit, base), and the same ranges_read(),
  // but each set is read only up to the gap found (on S_1's trace first
  // fit stops within the first 3% of the union).
  Offset FirstFit(int lo, int hi, Bytes size, Bytes alignment, Offset base);

  // Ranges held in all sets (memory use, for tests and benchmarks).
  int64_t stored_ranges() const;
  // Ranges read by all queries so far, before merging (their work).
  int64_t ranges_read() const { return ranges_read_; }

 private:
  // Disjoint ranges, offset -> top, no two touching.
  class RangeSet {
   public:
    bool empty() const { return size() == 0; }
    size_t size() const { return large_ ? large_->size() : small_.size(); }
    // Whether its ranges are in a tree (Ranges() then copies them).
    bool tree() const { return large_ != nullptr; }
    // Adds `r`, merging it with touching ranges and filling a dead gap on
    // either side (see `dead`); returns the range it became part of. Sets
    // *covered to whether one range already held it whole (the set is
    // then unchanged).
    template <typename DeadFn>
    TakenRange Add(TakenRange r, DeadFn dead, bool* covered);
    // Its ranges in order, in place (a tree's copied into `copy` first).
    absl::Span<const TakenRange> Ranges(std::vector<TakenRange>* copy) const;

   private:
    // Past this many ranges a set moves from the vector to the tree (an
    // insertion into the vector moves up to that many).
    static constexpr size_t kMaxSmall = 256;
    // Sets are small (S_1's trace: 60,304 sets, 3.6 ranges on average, 157
    // at most): a sorted vector reads and inserts in a few cache lines
    // where an ordered tree chases a node per set (placements 10-15%
    // faster); pinned buffers can make one large, hence the tree then.
    std::vector<TakenRange> small_;  // by offset, while no tree
    std::unique_ptr<absl::btree_set<TakenRange>> large_;
  };

  // True when no request can use the gap [from, to).
  bool Dead(Offset from, Offset to) const {
    return AlignUp(from, min_alignment_) + min_size_ > to;
  }
  RangeSet& SetAt(std::vector<int>* slots, int node);
  // Stores `r` at tiling node `node` and merges it into the subtree sets.
  void AddAt(int node, TakenRange r);
  // Adds the set at `slots[node]`, if any, to the sets a query reads.
  void Read(const std::vector<int>& slots, int node);
  // Makes reading_ the sets a query of [lo, hi) reads; adds their sizes to
  // ranges_read_ and returns whether one of them is a tree.
  bool Gather(int lo, int hi);
  // The union of the sets in reading_, in taken_.
  absl::Span<const TakenRange> Union();
  // Makes taken_'s first runs_.back() ranges, sorted runs of disjoint
  // ranges ending at runs_, their union: sorted, disjoint, no two
  // touching; returns its length.
  size_t MergeRuns();

  int leaves_ = 1;        // a power of two >= the number of sections
  std::vector<int> own_;  // per node: index in sets_ of its own set, or -1
  std::vector<int> sub_;  // per node: index of its subtree set, or -1
  std::vector<RangeSet> sets_;
  Bytes min_size_ = 1;       // every later request is at least this large
  Bytes min_alignment_ = 1;  // and at least this aligned
  std::vector<const RangeSet*> reading_;  // scratch of Taken
  // The answer of Taken, at its front. It and scratch_ only grow: their
  // ranges are written before they are read, never cleared.
  std::vector<TakenRange> taken_;
  std::vector<size_t> runs_;               // scratch: where each set ends
  std::vector<TakenRange> scratch_;        // scratch of MergeRuns
  std::vector<size_t> merged_runs_;        // scratch of MergeRuns
  std::vector<TakenRange> large_copy_[2];  // scratch: tree sets read
  // Scratch of FirstFit: per set read, the ranges not yet passed.
  std::vector<absl::Span<const TakenRange>> unread_;
  int64_t ranges_read_ = 0;  // see ranges_read()
};

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_GAP_INDEX_H_
