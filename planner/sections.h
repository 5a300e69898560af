// Sections: the step ranges over which the set of live buffers does not
// change, found by one sweep over the lifetimes (MiniMalloc's sweeper).
// Every stage that asks "what is live together?" without looking at each
// step uses them: the lower bound, greedy by breadth, the exact search, and
// every index that works on compressed time (a section is a compressed
// time point: there are at most 2n of them, whatever the span of steps).
//
//   planner::Sections s = planner::SweepSections(problem);
//   // buffer i is live in sections [s.first[i], s.last[i]);
//   // section k is the steps [s.begin[k], s.end[k]).
//   std::vector<planner::Bytes> live = planner::SectionTotals(
//       s, [&](int i) { return problem.buffers[i].size; });
//
// Thread-compatible plain data; the functions are pure.
#ifndef MEMPLAN_PLANNER_SECTIONS_H_
#define MEMPLAN_PLANNER_SECTIONS_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "base/cancel.h"
#include "base/parallel.h"
#include "base/sort.h"
#include "planner/problem.h"

namespace memplan::planner {

// Which sections a sweep keeps.
enum class SectionKind {
  // Every maximal step range with one live set: section k ends where
  // section k + 1 begins, and together they cover the event points from
  // the first start to the last end (sections where nothing is live
  // included).
  kAll,
  // Only the sections whose live set is not contained in a neighbour's:
  // a buffer starts where it begins and one ends where it ends (the
  // maximal cliques of the interval graph, MiniMalloc's sections). Every
  // buffer lives in at least one.
  kMaximal,
};

// Settings of SweepSections. The defaults suit the lower bound.
struct SectionOptions {
  // Default kAll.
  SectionKind kind = SectionKind::kAll;
  // Also list each section's live buffers (costs the sum of the lists,
  // up to n^2 on dense problems: for small problems only). Default false.
  bool list_live = false;
  // The buffers swept, as indices into problem.buffers; null: all of them.
  // Results are indexed by position in this list. Default null.
  const std::vector<int>* subset = nullptr;
};

// The sections of a set of lifetimes.
struct Sections {
  std::vector<Step> begin;  // per section, its first step
  std::vector<Step> end;    // per section, one past its last step
  // Per swept buffer: the first section it is live in and one past its
  // last (sections are numbered in time order).
  std::vector<int> first;
  std::vector<int> last;
  // With list_live: per section, its live buffers ordered by (start,
  // position). Empty otherwise.
  std::vector<std::vector<int>> live;
  // OverlapTotal, counted by the sweep that made these sections (a plan
  // asks for it two or three times); -1 where they were made otherwise
  // (cut from others, say), and OverlapTotal counts it.
  int64_t overlap_total = -1;
  // The first section of each time window but the first, as CutTime cuts
  // them by default (windows.h), found by the sweep that made these
  // sections from its starts in time order (a plan cuts time three or four
  // times: about 5 ms each at a million buffers when counted); unset where
  // they were made otherwise, and CutTime counts them.
  std::optional<std::vector<int>> window_cuts;

  int size() const { return static_cast<int>(begin.size()); }
};

// Sweeps the lifetimes once: O(n log n) (plus the lists when asked for).
// Only compares steps, never subtracts them, so any int64 steps are fine.
// REQUIRES start < end for every swept buffer.
Sections SweepSections(const Problem& problem,
                       const SectionOptions& options = {});

// The same, polling `cancel` (may be null) in its sorts and loops:
// DEADLINE_EXCEEDED when cancelled.
[[nodiscard]] absl::StatusOr<Sections> SweepSectionsOrCancel(
    const Problem& problem, const SectionOptions& options,
    const base::CancelToken* cancel);

// Compressed time: the maximal sections of `problem`. Two buffers' lifetimes
// overlap exactly when their section ranges [first, last) do (two
// overlapping lifetimes are both live in the first maximal section at or
// after the later start), so every stage that only asks "do these overlap?"
// works on these small integers: at most n of them whatever the steps.
// DEADLINE_EXCEEDED when `cancel` (may be null) is cancelled first.
[[nodiscard]] absl::StatusOr<Sections> CompressTime(
    const Problem& problem, const base::CancelToken* cancel = nullptr);

// The same, sorting the starts and the ends at once on the threads
// `parallel` gives (the same sections).
[[nodiscard]] absl::StatusOr<Sections> CompressTime(
    const Problem& problem, const base::CancelToken* cancel,
    const base::Parallelism& parallel);

// `given` (the problem's compressed time, computed once by the caller for
// several stages) when not null, else CompressTime into `*own`.
[[nodiscard]] inline absl::StatusOr<const Sections*> CompressedTime(
    const Problem& problem, const Sections* given, Sections* own,
    const base::CancelToken* cancel) {
  if (given != nullptr) return given;
  absl::StatusOr<Sections> time = CompressTime(problem, cancel);
  if (!time.ok()) return time.status();
  *own = *std::move(time);
  return own;
}

// Per buffer, how many other buffers overlap it: those starting before it
// ends, less those ended by its start, less itself. O(n + sections), no
// sort.
std::vector<int64_t> OverlapCounts(const Sections& sections);

// The sum of OverlapCounts: every overlapping pair, counted from both
// ends. O(n + sections), without a vector per buffer.
int64_t OverlapTotal(const Sections& sections);
// The same counted on the threads `parallel` gives (the same total).
int64_t OverlapTotal(const Sections& sections,
                     const base::Parallelism& parallel);

// Above this many overlapping buffers per buffer on average, placement and
// coloring read merged ranges from a GapIndex instead of scanning the
// buffers each new one overlaps. Both give the same gaps; the scan is the
// faster below a few hundred (a 300,000-buffer trace of short lifetimes,
// 150 overlaps a buffer: offsets 2.98 s with the GapIndex, 0.91 s with the
// scan; the G_1 trace, 244: 5 -> 3 ms), the GapIndex far above (the S_1
// trace, 3,030, and the long-lifetime generators, tens of thousands).
inline constexpr int64_t kDenseOverlaps = 256;

// True when buffers overlap more than kDenseOverlaps others on average.
bool MostlyOverlapping(const Sections& sections);
// The same from an OverlapTotal already counted over `buffers` buffers.
inline bool MostlyOverlapping(int64_t overlap_total, int64_t buffers) {
  return overlap_total > kDenseOverlaps * buffers;
}

// How many parts of the buffers a sweep over `n` buffers is cut into to
// run on several threads: at least 2^18 buffers each, at most 4 (fixed by
// n alone, so the result never depends on the threads).
inline int BufferParts(int n) { return std::clamp(n / (1 << 18), 1, 4); }

// The type of weight(i): Bytes, or a struct of several weights summed at
// once (with += and -=, zero when value-initialized).
template <typename WeightFn>
using WeightOf = std::decay_t<std::invoke_result_t<WeightFn, int>>;

// Per section, the sum of weight(i) over the buffers live in it (i is a
// position as in Sections::first). O(n + sections). REQUIRES the sums to
// fit in 64 bits (they do for a validated problem: validate.h).
// Once `cancel` (may be null) fires it stops early, and the totals mean
// nothing.
template <typename WeightFn>
std::vector<WeightOf<WeightFn>> SectionTotals(
    const Sections& sections, WeightFn weight,
    const base::CancelToken* cancel = nullptr) {
  std::vector<WeightOf<WeightFn>> total(sections.size() + 1);
  for (int i = 0; i < static_cast<int>(sections.first.size()); ++i) {
    if (base::CancelledAt(cancel, i)) break;
    total[sections.first[i]] += weight(i);
    total[sections.last[i]] -= weight(i);
  }
  for (size_t k = 1; k < total.size(); ++k) total[k] += total[k - 1];
  total.pop_back();
  return total;
}

// The same in BufferParts parts of the buffers on the threads `parallel`
// gives, the parts' differences then added: the same totals, with at most 4
// arrays of sections at once. Once `cancel` (may be null) fires it stops
// early, and the totals mean nothing.
template <typename WeightFn>
std::vector<WeightOf<WeightFn>> SectionTotals(
    const Sections& sections, WeightFn weight,
    const base::Parallelism& parallel,
    const base::CancelToken* cancel = nullptr) {
  const int n = static_cast<int>(sections.first.size());
  const int parts = BufferParts(n);
  if (parts == 1) return SectionTotals(sections, weight, cancel);
  const int part = (n + parts - 1) / parts;
  // Allocated here, not on the workers (what they allocate can stay with
  // their threads' heaps).
  std::vector<std::vector<WeightOf<WeightFn>>> diff(
      parts, std::vector<WeightOf<WeightFn>>(sections.size() + 1));
  base::ParallelFor(parallel, parts, [&](int p) {
    for (int i = p * part; i < std::min(n, (p + 1) * part); ++i) {
      if (base::CancelledAt(cancel, i)) return;
      diff[p][sections.first[i]] += weight(i);
      diff[p][sections.last[i]] -= weight(i);
    }
  });
  std::vector<WeightOf<WeightFn>>& total = diff[0];
  base::ParallelForRange(parallel, total.size(), size_t{1} << 16,
                         [&](int, size_t begin, size_t end) {
                           for (int p = 1; p < parts; ++p) {
                             for (size_t k = begin; k < end; ++k) {
                               total[k] += diff[p][k];
                             }
                           }
                         });
  for (size_t k = 1; k < total.size(); ++k) total[k] += total[k - 1];
  total.pop_back();
  return std::move(total);
}

// Per section, the largest weight(i) (>= 0) among the buffers i in [lo,
// hi) live in it (0 where none is): buffers by decreasing weight paint the
// sections they cover that no heavier buffer painted, skipping painted
// runs with a union-find, so each section is painted once. O(n log n +
// sections). Once `cancel` (may be null) fires it stops early, and the
// maxima mean nothing.
template <typename WeightFn>
std::vector<Bytes> SectionMaxima(const Sections& sections, WeightFn weight,
                                 int lo, int hi,
                                 const base::CancelToken* cancel = nullptr) {
  std::vector<std::pair<Bytes, int>> by_weight(hi - lo);
  Bytes heaviest = 0;
  for (int i = lo; i < hi; ++i) {
    by_weight[i - lo] = {weight(i), i};
    heaviest = std::max(heaviest, by_weight[i - lo].first);
  }
  // Heaviest first, ties by index (the radix sort is stable), on the key
  // heaviest - weight: weights under 256 apart (paddings under an
  // alignment up to 256) take one pass.
  const bool sorted = base::RadixSortOrCancel(
      &by_weight,
      [heaviest](const std::pair<Bytes, int>& w) {
        return static_cast<uint64_t>(heaviest - w.first);
      },
      cancel);
  std::vector<Bytes> max(sections.size(), 0);
  if (!sorted) return max;
  std::vector<int> next(sections.size() + 1);  // next unpainted section
  for (size_t k = 0; k < next.size(); ++k) next[k] = static_cast<int>(k);
  const auto find = [&](int k) {
    while (next[k] != k) k = next[k] = next[next[k]];
    return k;
  };
  int64_t painted = 0;
  for (const auto& [w, i] : by_weight) {
    if (base::CancelledAt(cancel, painted++)) break;
    for (int k = find(sections.first[i]); k < sections.last[i];
         k = find(k + 1)) {
      max[k] = w;
      next[k] = k + 1;
    }
  }
  return max;
}

// The same over every buffer.
template <typename WeightFn>
std::vector<Bytes> SectionMaxima(const Sections& sections, WeightFn weight) {
  return SectionMaxima(sections, weight, 0,
                       static_cast<int>(sections.first.size()));
}

// The same in BufferParts parts of the buffers on the threads `parallel`
// gives, the parts' maxima then merged: the same maxima, with at most 4 arrays
// of sections at once (and the same early stop once `cancel` fires).
template <typename WeightFn>
std::vector<Bytes> SectionMaxima(const Sections& sections, WeightFn weight,
                                 const base::Parallelism& parallel,
                                 const base::CancelToken* cancel = nullptr) {
  const int n = static_cast<int>(sections.first.size());
  const int parts = BufferParts(n);
  if (parts == 1) return SectionMaxima(sections, weight, 0, n, cancel);
  const int part = (n + parts - 1) / parts;
  std::vector<std::vector<Bytes>> maxima(parts);
  base::ParallelFor(parallel, parts, [&](int p) {
    maxima[p] = SectionMaxima(sections, weight, p * part,
                              std::min(n, (p + 1) * part), cancel);
  });
  for (int p = 1; p < parts; ++p) {
    for (size_t k = 0; k < maxima[0].size(); ++k) {
      maxima[0][k] = std::max(maxima[0][k], maxima[p][k]);
    }
  }
  return std::move(maxima[0]);
}

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_SECTIONS_H_
