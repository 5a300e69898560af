#include "planner/problem.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
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
  return AlignedLowerBound(problem, SweepSections(problem));
}

Bytes AlignedLowerBound(const Problem& problem, const Sections& sections) {
  return PeakLive(problem, sections,
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

std::vector<uint8_t> SpanningBuffers(const Problem& problem,
                                     const base::Parallelism& parallel,
                                     int64_t* count) {
  constexpr size_t kChunk = size_t{1} << 16;
  const std::vector<Buffer>& b = problem.buffers;
  const size_t n = b.size();
  const int chunks = base::ChunkCount(n, kChunk);
  std::vector<std::pair<Step, Step>> spans(chunks);
  std::vector<int64_t> counts(chunks, 0);
  base::ParallelForRange(
      parallel, n, kChunk, [&](int c, size_t begin, size_t end) {
        spans[c] = {b[begin].start, b[begin].end};
        for (size_t i = begin; i < end; ++i) {
          spans[c].first = std::min(spans[c].first, b[i].start);
          spans[c].second = std::max(spans[c].second, b[i].end);
        }
      });
  std::pair<Step, Step> span = chunks > 0 ? spans[0] : std::pair<Step, Step>{};
  for (const auto& [first, last] : spans) {
    span = {std::min(span.first, first), std::max(span.second, last)};
  }
  std::vector<uint8_t> spanning(n, 0);
  base::ParallelForRange(parallel, n, kChunk,
                         [&](int c, size_t begin, size_t end) {
                           for (size_t i = begin; i < end; ++i) {
                             spanning[i] = SpansAll(b[i], span) ? 1 : 0;
                             counts[c] += spanning[i];
                           }
                         });
  if (count != nullptr) {
    *count = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  }
  return spanning;
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
// Its four sweeps are independent: on the threads `parallel` gives.
Bytes PaddedBoundAt(const Problem& problem, const Sections& sections, Bytes m,
                    const base::Parallelism& parallel,
                    const base::CancelToken* cancel) {
  const auto& b = problem.buffers;
  std::vector<Bytes> padded, with_m, below, rounding;
  base::ParallelFor(parallel, 4, [&](int k) {
    switch (k) {
      case 0:
        padded = SectionTotals(
            sections, [&](int i) { return AlignUp(b[i].size, m); }, cancel);
        break;
      case 1:
        with_m = SectionTotals(
            sections, [&](int i) { return Bytes{b[i].alignment == m}; },
            cancel);
        break;
      case 2:
        below = SectionTotals(
            sections, [&](int i) { return Bytes{b[i].alignment < m}; }, cancel);
        break;
      default:
        rounding = SectionMaxima(
            sections, [&](int i) { return AlignUp(b[i].size, m) - b[i].size; },
            0, static_cast<int>(sections.first.size()), cancel);
    }
  });
  Bytes best = 0;
  for (int k = 0; k < sections.size(); ++k) {
    if (with_m[k] == 0 || below[k] > 0) continue;
    best = std::max(best, padded[k] - rounding[k]);
  }
  return best;
}

// The distinct alignments in order of first use: powers of two, so at
// most 64. Chunk by chunk on the threads `parallel` gives, the chunks'
// alignments then merged in chunk order (the same order). Also sums the
// sizes rounded up to their alignments into *padded_sum (in the same pass:
// a pass over a million buffers costs about 10 ms of one core).
std::vector<Bytes> DistinctAlignments(const Problem& problem,
                                      const base::Parallelism& parallel = {},
                                      Bytes* padded_sum = nullptr) {
  constexpr size_t kChunk = size_t{1} << 16;
  const std::vector<Buffer>& b = problem.buffers;
  const int chunks = base::ChunkCount(b.size(), kChunk);
  std::vector<std::vector<Bytes>> firsts(chunks);
  std::vector<Bytes> sums(chunks, 0);
  base::ParallelForRange(
      parallel, b.size(), kChunk, [&](int c, size_t begin, size_t end) {
        uint64_t seen = 0;
        for (size_t i = begin; i < end; ++i) {
          sums[c] += AlignUp(b[i].size, b[i].alignment);
          const int bit =
              __builtin_ctzll(static_cast<uint64_t>(b[i].alignment));
          if ((seen >> bit) & 1) continue;
          seen |= uint64_t{1} << bit;
          firsts[c].push_back(b[i].alignment);
        }
      });
  std::vector<Bytes> alignments;
  uint64_t seen = 0;
  for (const std::vector<Bytes>& chunk : firsts) {
    for (Bytes alignment : chunk) {
      const int bit = __builtin_ctzll(static_cast<uint64_t>(alignment));
      if ((seen >> bit) & 1) continue;
      seen |= uint64_t{1} << bit;
      alignments.push_back(alignment);
    }
  }
  if (padded_sum != nullptr) {
    *padded_sum = std::accumulate(sums.begin(), sums.end(), Bytes{0});
  }
  return alignments;
}

// Padding adds nothing to the bound when every buffer has alignment 1.
bool AllUnaligned(const std::vector<Bytes>& alignments) {
  return alignments.empty() || (alignments.size() == 1 && alignments[0] == 1);
}

// The padded bound on `sections` over the problem's distinct alignments.
Bytes PaddedBoundOver(const Problem& problem, const Sections& sections,
                      const std::vector<Bytes>& alignments,
                      const base::Parallelism& parallel = {},
                      const base::CancelToken* cancel = nullptr) {
  Bytes best = 0;
  for (Bytes m : alignments) {
    if (cancel != nullptr && cancel->Cancelled()) break;
    best =
        std::max(best, PaddedBoundAt(problem, sections, m, parallel, cancel));
  }
  return best;
}

// The live bytes of a section: the sizes rounded up to the one alignment,
// and as they are (summed in one sweep).
struct LiveBytes {
  Bytes padded = 0;
  Bytes size = 0;
  LiveBytes& operator+=(const LiveBytes& other) {
    padded += other.padded;
    size += other.size;
    return *this;
  }
  LiveBytes& operator-=(const LiveBytes& other) {
    padded -= other.padded;
    size -= other.size;
    return *this;
  }
};

// At most this many peak sections (OneAlignmentBounds) have their largest
// rounding found by a pass over the buffers; more take SectionMaxima.
constexpr size_t kMostPeakSections = 32;

// Per section of `peaks` (ascending), the largest rounding up to `m` of a
// buffer live in it: one pass over the buffers, in BufferParts parts on
// the threads `parallel` gives, each buffer raising the peaks it covers
// (at most kMostPeakSections).
std::vector<Bytes> PeakRoundings(const Problem& problem,
                                 const Sections& sections,
                                 const std::vector<int>& peaks, Bytes m,
                                 const base::Parallelism& parallel,
                                 const base::CancelToken* cancel) {
  const auto& b = problem.buffers;
  const int n = static_cast<int>(sections.first.size());
  const int parts = BufferParts(n);
  const int part = (n + parts - 1) / parts;
  std::vector<std::vector<Bytes>> maxima(parts,
                                         std::vector<Bytes>(peaks.size(), 0));
  base::ParallelFor(parallel, parts, [&](int p) {
    std::vector<Bytes>& max = maxima[p];
    for (int i = p * part; i < std::min(n, (p + 1) * part); ++i) {
      if (base::CancelledAt(cancel, i)) return;
      // The buffer itself (far larger than its sections) only where it
      // covers a peak.
      size_t c =
          std::lower_bound(peaks.begin(), peaks.end(), sections.first[i]) -
          peaks.begin();
      if (c == peaks.size() || peaks[c] >= sections.last[i]) continue;
      const Bytes rounding = AlignUp(b[i].size, m) - b[i].size;
      for (; c < peaks.size() && peaks[c] < sections.last[i]; ++c) {
        max[c] = std::max(max[c], rounding);
      }
    }
  });
  for (int p = 1; p < parts; ++p) {
    for (size_t c = 0; c < peaks.size(); ++c) {
      maxima[0][c] = std::max(maxima[0][c], maxima[p][c]);
    }
  }
  return std::move(maxima[0]);
}

// BoundsFromCompressedTime where every buffer has alignment m > 1. At
// each section the padded bound is the live padded sizes less the largest
// rounding (PaddedBoundAt without its counts). The padded sizes are
// multiples of m and the roundings below m, so the bound is at a section
// of the largest padded sizes (a peak section): one sweep sums both kinds
// of live bytes, and the roundings are found for the peak sections alone
// where they are few (the section maxima of every buffer, a sort and a
// paint, took 40-50 ms of one core on a million random buffers, against 5
// for the pass).
LowerBounds OneAlignmentBounds(const Problem& problem, const Sections& maximal,
                               Bytes m, const base::Parallelism& parallel,
                               const base::CancelToken* cancel) {
  const std::vector<Buffer>& b = problem.buffers;
  const std::vector<LiveBytes> live = SectionTotals(
      maximal,
      [&](int i) {
        return LiveBytes{AlignUp(b[i].size, m), b[i].size};
      },
      parallel, cancel);
  LowerBounds bounds;
  Bytes top = 0;
  for (const LiveBytes& section : live) {
    top = std::max(top, section.padded);
    bounds.unaligned = std::max(bounds.unaligned, section.size);
  }
  std::vector<int> peaks;
  for (int k = 0; k < maximal.size() && peaks.size() <= kMostPeakSections;
       ++k) {
    if (live[k].padded == top) peaks.push_back(k);
  }
  if (peaks.size() > kMostPeakSections) {
    const std::vector<Bytes> rounding = SectionMaxima(
        maximal, [&](int i) { return AlignUp(b[i].size, m) - b[i].size; },
        parallel, cancel);
    for (int k = 0; k < maximal.size(); ++k) {
      bounds.padded = std::max(bounds.padded, live[k].padded - rounding[k]);
    }
    return bounds;
  }
  const std::vector<Bytes> rounding =
      PeakRoundings(problem, maximal, peaks, m, parallel, cancel);
  for (size_t c = 0; c < peaks.size(); ++c) {
    bounds.padded =
        std::max(bounds.padded, live[peaks[c]].padded - rounding[c]);
  }
  return bounds;
}

}  // namespace

Bytes PaddedLowerBound(const Problem& problem) {
  return PaddedLowerBound(problem, SweepSections(problem));
}

LowerBounds BoundsFromCompressedTime(const Problem& problem,
                                     const Sections& maximal) {
  return BoundsFromCompressedTime(problem, maximal, {});
}

LowerBounds BoundsFromCompressedTime(const Problem& problem,
                                     const Sections& maximal,
                                     const base::Parallelism& parallel,
                                     const base::CancelToken* cancel) {
  Bytes padded_sum = 0;
  const std::vector<Bytes> alignments =
      DistinctAlignments(problem, parallel, &padded_sum);
  if (alignments.size() == 1 && alignments[0] > 1) {
    LowerBounds bounds =
        OneAlignmentBounds(problem, maximal, alignments[0], parallel, cancel);
    bounds.padded_sum = padded_sum;
    return bounds;
  }
  LowerBounds bounds;
  bounds.padded_sum = padded_sum;
  base::ParallelFor(parallel, 2, [&](int k) {
    if (k == 0) {
      bounds.unaligned = LowerBound(problem, maximal);
    } else if (AllUnaligned(alignments)) {
      bounds.padded = -1;  // the unaligned one, once known
    } else if (alignments.size() == 1) {
      bounds.padded =
          PaddedBoundOver(problem, maximal, alignments, parallel, cancel);
    } else {  // mixed alignments need every section, not the maximal ones
      bounds.padded = PaddedBoundOver(problem, SweepSections(problem),
                                      alignments, parallel, cancel);
    }
  });
  if (bounds.padded < 0) bounds.padded = bounds.unaligned;
  return bounds;
}

Bytes PaddedLowerBound(const Problem& problem, const Sections& sections) {
  const std::vector<Bytes> alignments = DistinctAlignments(problem);
  if (AllUnaligned(alignments)) return LowerBound(problem, sections);
  return PaddedBoundOver(problem, sections, alignments);
}

}  // namespace memplan::planner
