// memplan planner, exact search internals: splitting the exact search's
// timeline into independent parts.
//
// Once no unplaced buffer is live on both sides of a boundary between two
// sections, what is placed left of it cannot change what fits right of it:
// the two sides are searched one after the other, each from scratch, and a
// failure of either ends both (MiniMalloc's decomposition). Cuts counts, per
// boundary, the unplaced buffers crossing it, and splits a part at the
// boundaries none crosses. The Search class of exact_solver.cc owns one and
// updates it at every placement.
//
//   Cuts cuts;
//   cuts.Reset(sec_lo, sec_hi, sections);  // nothing placed
//   placed[b] = 1;
//   if (cuts.Remove(sec_lo[b], sec_hi[b])) {  // b freed a boundary
//     for (const Part& p : cuts.Split(part, placed, sec_lo)) Solve(p);
//   }
//   cuts.Restore(sec_lo[b], sec_hi[b]);  // b unplaced again
//
// Internal to planner/exact/: not part of memplan's interface.
#ifndef MEMPLAN_PLANNER_EXACT_PARTS_H_
#define MEMPLAN_PLANNER_EXACT_PARTS_H_

#include <cstddef>
#include <vector>

namespace memplan::planner::exact_internal {

// One part of the timeline searched on its own: the unplaced buffers whose
// lifetimes fall in sections [lo, hi), which no other unplaced buffer meets.
struct Part {
  std::vector<int> buffers;  // buffer indices of the search
  int lo = 0;                // first section
  int hi = 0;                // one past the last section
};

// Per boundary s|s+1 between sections, the unplaced buffers live on both
// sides. Thread-compatible: one search thread owns it.
class Cuts {
 public:
  // Nothing placed: buffer b lives in sections [sec_lo[b], sec_hi[b]) of
  // `sections`.
  void Reset(const std::vector<int>& sec_lo, const std::vector<int>& sec_hi,
             int sections);

  // A buffer of sections [lo, hi) was placed: its boundaries lose it.
  // Returns whether one of them has no crossing buffer left.
  bool Remove(int lo, int hi) {
    bool freed = false;
    for (int s = lo; s + 1 < hi; ++s) freed = (--crossing_[s] == 0) || freed;
    return freed;
  }
  // Reverses Remove(lo, hi).
  void Restore(int lo, int hi) {
    for (int s = lo; s + 1 < hi; ++s) ++crossing_[s];
  }

  // The pieces of `part` between the boundaries no unplaced buffer crosses,
  // in time order, each with its unplaced buffers (placed[b] == 0; b in
  // sections from sec_lo[b]); pieces without any are left out.
  std::vector<Part> Split(const Part& part, const std::vector<char>& placed,
                          const std::vector<int>& sec_lo) const;
  // The same pieces in (*out)[0, count), count returned; *out keeps the
  // pieces (and their buffer lists) beyond it, so a search that reuses one
  // vector per level of nesting allocates nothing once they have grown.
  // REQUIRES out != nullptr, not part.buffers' vector.
  size_t SplitInto(const Part& part, const std::vector<char>& placed,
                   const std::vector<int>& sec_lo,
                   std::vector<Part>* out) const;

 private:
  std::vector<int> crossing_;  // per boundary s|s+1
};

}  // namespace memplan::planner::exact_internal

#endif  // MEMPLAN_PLANNER_EXACT_PARTS_H_
