#include "planner/problem.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "planner/sections.h"

namespace memplan::planner {

namespace {

// The peak over sections of the sum of size_of(buffer) for live buffers.
template <typename SizeFn>
Bytes PeakLive(const Problem& problem, const Sections& sections,
               SizeFn size_of) {
  const std::vector<Bytes> live = SectionTotals(
      sections, [&](int i) { return size_of(problem.buffers[i]); });
  return live.empty() ? 0 : *std::max_element(live.begin(), live.end());
}

}  // namespace

Bytes LowerBound(const Problem& problem) {
  return LowerBound(problem, SweepSections(problem));
}

Bytes LowerBound(const Problem& problem, const Sections& sections) {
  return PeakLive(problem, sections, [](const Buffer& b) { return b.size; });
}

Bytes AlignedLowerBound(const Problem& problem) {
  return PeakLive(problem, SweepSections(problem),
                  [](const Buffer& b) { return AlignUp(b.size, b.alignment); });
}

std::pair<Step, Step> ScheduleSpan(const Problem& problem) {
  if (problem.buffers.empty()) return {0, 0};
  Step first = problem.buffers[0].start, last = problem.buffers[0].end;
  for (const Buffer& b : problem.buffers) {
    first = std::min(first, b.start);
    last = std::max(last, b.end);
  }
  return {first, last};
}

Bytes NaiveBytes(const Problem& problem) {
  Bytes total = 0;
  for (const Buffer& b : problem.buffers) total += b.size;
  return total;
}

Bytes ArenaOf(const Problem& problem, const std::vector<Offset>& offsets) {
  Bytes arena = 0;
  for (size_t i = 0; i < offsets.size(); ++i) {
    arena = std::max(arena, offsets[i] + problem.buffers[i].size);
  }
  return arena;
}

namespace {

// PaddedLowerBound at the sections whose smallest live alignment is `m`:
// the live sizes rounded up to m, less the largest rounding.
Bytes PaddedBoundAt(const Problem& problem, const Sections& sections, Bytes m) {
  const auto& b = problem.buffers;
  const std::vector<Bytes> padded =
      SectionTotals(sections, [&](int i) { return AlignUp(b[i].size, m); });
  const std::vector<Bytes> with_m = SectionTotals(
      sections, [&](int i) { return Bytes{b[i].alignment == m}; });
  const std::vector<Bytes> below =
      SectionTotals(sections, [&](int i) { return Bytes{b[i].alignment < m}; });
  const std::vector<Bytes> rounding = SectionMaxima(
      sections, [&](int i) { return AlignUp(b[i].size, m) - b[i].size; });
  Bytes best = 0;
  for (int k = 0; k < sections.size(); ++k) {
    if (with_m[k] == 0 || below[k] > 0) continue;
    best = std::max(best, padded[k] - rounding[k]);
  }
  return best;
}

// The distinct alignments in order of first use: powers of two, so at
// most 64.
std::vector<Bytes> DistinctAlignments(const Problem& problem) {
  std::vector<Bytes> alignments;
  uint64_t seen = 0;
  for (const Buffer& b : problem.buffers) {
    const int bit = __builtin_ctzll(static_cast<uint64_t>(b.alignment));
    if ((seen >> bit) & 1) continue;
    seen |= uint64_t{1} << bit;
    alignments.push_back(b.alignment);
  }
  return alignments;
}

// Padding adds nothing to the bound when every buffer has alignment 1.
bool AllUnaligned(const std::vector<Bytes>& alignments) {
  return alignments.empty() || (alignments.size() == 1 && alignments[0] == 1);
}

// The padded bound on `sections` over the problem's distinct alignments.
Bytes PaddedBoundOver(const Problem& problem, const Sections& sections,
                      const std::vector<Bytes>& alignments) {
  Bytes best = 0;
  for (Bytes m : alignments) {
    best = std::max(best, PaddedBoundAt(problem, sections, m));
  }
  return best;
}

}  // namespace

Bytes PaddedLowerBound(const Problem& problem) {
  return PaddedLowerBound(problem, SweepSections(problem));
}

LowerBounds BoundsFromCompressedTime(const Problem& problem,
                                     const Sections& maximal) {
  const std::vector<Bytes> alignments = DistinctAlignments(problem);
  LowerBounds bounds;
  bounds.unaligned = LowerBound(problem, maximal);
  if (AllUnaligned(alignments)) {
    bounds.padded = bounds.unaligned;
  } else if (alignments.size() == 1) {
    bounds.padded = PaddedBoundOver(problem, maximal, alignments);
  } else {  // mixed alignments need every section, not the maximal ones
    bounds.padded =
        PaddedBoundOver(problem, SweepSections(problem), alignments);
  }
  return bounds;
}

Bytes PaddedLowerBound(const Problem& problem, const Sections& sections) {
  const std::vector<Bytes> alignments = DistinctAlignments(problem);
  if (AllUnaligned(alignments)) return LowerBound(problem, sections);
  return PaddedBoundOver(problem, sections, alignments);
}

}  // namespace memplan::planner
