// memplan planner: the problem and solution types every stage shares.
//
// A Problem is a set of buffers, each live during a half-open interval of
// schedule steps and needing `size` bytes at an `alignment`. A Solution gives
// every buffer an offset inside one arena such that no two buffers whose
// lifetimes overlap share a byte (the dynamic storage allocation problem).
//
//   planner::Problem problem;
//   problem.buffers.push_back({.name = "a", .start = 0, .end = 2, .size = 32});
//   problem.buffers.push_back({.name = "b", .start = 1, .end = 3, .size = 28});
//   int64_t bound = planner::LowerBound(problem);  // 60
//
// Thread-compatible plain data.
#ifndef MEMPLAN_PLANNER_PROBLEM_H_
#define MEMPLAN_PLANNER_PROBLEM_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/cancel.h"
#include "base/parallel.h"

namespace memplan::planner {

using Offset = int64_t;  // bytes from the arena's base
using Bytes = int64_t;   // a size in bytes
using Step = int64_t;    // a position in the schedule (op index)

// One block of memory to place.
struct Buffer {
  std::string name;     // tensor name or buffer id; unique within a problem
  Step start = 0;       // first step the buffer is live (inclusive)
  Step end = 0;         // one past the last live step; REQUIRES start < end
  Bytes size = 0;       // REQUIRES size > 0
  Bytes alignment = 1;  // REQUIRES a power of two; offsets are multiples
  std::optional<Offset> fixed_offset;  // pinned by an offline plan
  // Not an activation (graph input/output, weight, variable): no op writes
  // over it in place. Its lifetime is start..end all the same.
  bool persistent = false;
};

// Two half-open lifetimes overlap when each starts before the other ends.
inline bool LifetimesOverlap(const Buffer& a, const Buffer& b) {
  return a.start < b.end && b.start < a.end;
}

// The input of offset assignment.
struct Problem {
  std::vector<Buffer> buffers;
  // When set, a plan must keep every offset + size <= capacity.
  std::optional<Bytes> capacity;
};

// The output of offset assignment: offsets[i] belongs to buffers[i].
struct Solution {
  std::vector<Offset> offsets;
  Bytes arena_size = 0;  // max(offset + size), 0 for an empty problem
};

// The largest sum of sizes live at one step: no plan can be smaller.
// O(n log n) sweep.
Bytes LowerBound(const Problem& problem);

// The same with every size rounded up to its alignment: a plan within this
// bound is within one alignment unit of the best possible at its peak.
Bytes AlignedLowerBound(const Problem& problem);

// A bound no plan can beat that counts the padding alignment forces: at a
// step where m is the smallest alignment live, every live buffer starts at
// a multiple of m, so each one but the topmost is followed by at least its
// size rounded up to m; the bound is the sum of those rounded sizes less the
// largest rounding. Equals LowerBound when every alignment is 1; an optimal
// plan of two live 4-byte buffers aligned to 64 (arena 68) meets it.
// O(n log n) per distinct alignment.
Bytes PaddedLowerBound(const Problem& problem);

struct Sections;  // sections.h

// LowerBound and PaddedLowerBound from the problem's sections already swept
// (SweepSections, kind kAll). The maximal sections (CompressTime) give the
// same LowerBound (every step's live set lies within a maximal section's),
// and the same PaddedLowerBound when every buffer has one alignment.
Bytes LowerBound(const Problem& problem, const Sections& sections);
Bytes PaddedLowerBound(const Problem& problem, const Sections& sections);
// AlignedLowerBound from swept or maximal sections (the same bound either
// way: every step's live set lies within a maximal section's). O(n).
Bytes AlignedLowerBound(const Problem& problem, const Sections& sections);

// Both bounds from the problem's compressed time (CompressTime); the
// padded one sweeps all sections itself only when alignments differ.
struct LowerBounds {
  Bytes unaligned = 0;  // LowerBound
  Bytes padded = 0;     // PaddedLowerBound
  // The sizes rounded up to their alignments, summed: every buffer its
  // own memory (counted in the same pass as the alignments).
  Bytes padded_sum = 0;
};
LowerBounds BoundsFromCompressedTime(const Problem& problem,
                                     const Sections& maximal);
// The same with its sweeps on the threads `parallel` gives. Once `cancel`
// (may be null) fires the sweeps stop early, and the bounds mean nothing:
// a cancelled call drops them.
LowerBounds BoundsFromCompressedTime(const Problem& problem,
                                     const Sections& maximal,
                                     const base::Parallelism& parallel,
                                     const base::CancelToken* cancel = nullptr);

// The sum of all sizes: what a plan without any reuse would take.
Bytes NaiveBytes(const Problem& problem);

// The arena of a plan: the largest offset + size (0 when empty).
// REQUIRES offsets.size() == problem.buffers.size().
Bytes ArenaOf(const Problem& problem, const std::vector<Offset>& offsets);

// The steps a problem spans: [min start, max end); {0, 0} when empty.
std::pair<Step, Step> ScheduleSpan(const Problem& problem);

// True for a buffer live over the whole span: it interferes with every
// other buffer, so it can never share memory (graph inputs, outputs,
// weights). Stages handle such buffers apart, which keeps them linear.
inline bool SpansAll(const Buffer& b, std::pair<Step, Step> span) {
  return b.start <= span.first && b.end >= span.second;
}

// Per buffer, 1 when it spans the whole schedule (SpansAll), else 0, and
// in `*count` (may be null) how many do: two passes over the list in
// chunks, on the threads `parallel` gives.
std::vector<uint8_t> SpanningBuffers(const Problem& problem,
                                     const base::Parallelism& parallel,
                                     int64_t* count = nullptr);

// Rounds `value` up to a multiple of `alignment` (a power of two).
inline Bytes AlignUp(Bytes value, Bytes alignment) {
  return (value + alignment - 1) & ~(alignment - 1);
}

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_PROBLEM_H_
