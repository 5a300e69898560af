#include "planner/sections.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "base/sort.h"
#include "planner/windows.h"

namespace memplan::planner {
namespace {

// (step, position) pairs sorted, for the starts or the ends of the buffers.
using Events = std::vector<std::pair<Step, int>>;

constexpr int kCancelStride = 1 << 16;  // loop iterations between polls

absl::Status Cancelled() {
  return absl::DeadlineExceededError("section sweep cancelled");
}

// The sorted start and end events of the swept buffers.
absl::StatusOr<std::pair<Events, Events>> SortedEvents(
    const Problem& problem, const std::vector<int>* subset,
    const base::CancelToken* cancel, const base::Parallelism& parallel) {
  const int m =
      static_cast<int>(subset ? subset->size() : problem.buffers.size());
  Events starts(m), ends(m);
  base::ParallelForRange(
      parallel, m, size_t{1} << 16, [&](int, size_t begin, size_t end) {
        for (int k = static_cast<int>(begin); k < static_cast<int>(end); ++k) {
          const Buffer& b = problem.buffers[subset ? (*subset)[k] : k];
          starts[k] = {b.start, k};
          ends[k] = {b.end, k};
        }
      });
  // Stable on the step: positions stay ascending among equal steps.
  const auto step = [](const std::pair<Step, int>& e) {
    return base::SignedKey(e.first);
  };
  bool sorted[2] = {false, false};
  base::ParallelFor(parallel, 2, [&](int k) {
    sorted[k] = base::RadixSortOrCancel(k == 0 ? &starts : &ends, step, cancel,
                                        parallel);
  });
  if (!sorted[0] || !sorted[1]) return Cancelled();
  return std::make_pair(std::move(starts), std::move(ends));
}

// The events at steps in one range of time: starts[s, s_end) and
// ends[e, e_end).
struct EventRange {
  size_t s, s_end, e, e_end;
};

// Walks the distinct event steps of `range` in order, numbering from
// `count` the sections between consecutive ones (all of them, or only the
// maximal ones) as the walk over every event would: section(k, begin, end)
// for each, last_of(i, k) and first_of(i, k) for each buffer ending and
// starting there. Returns the next number. The walk's state where the
// range begins comes from the events before it. Adds to *overlaps (may be
// null) the range's share of the overlap total: per buffer ending here the
// buffers started before (itself among them), less per buffer starting
// here the buffers ended by then (OverlapTotal is their sum over all
// events, less one per buffer).
template <typename SectionFn, typename LastFn, typename FirstFn>
int WalkSections(const Events& starts, const Events& ends,
                 const EventRange& range, SectionKind kind, int count,
                 SectionFn section, LastFn last_of, FirstFn first_of,
                 int64_t* overlaps = nullptr) {
  int64_t started_before_ends = 0, ended_by_starts = 0;
  size_t s = range.s, e = range.e;
  Step previous = 0;          // the last event step before
  bool started_here = false;  // a buffer starts at `previous`
  if (s > 0 || e > 0) {
    previous = s == 0   ? ends[e - 1].first
               : e == 0 ? starts[s - 1].first
                        : std::max(starts[s - 1].first, ends[e - 1].first);
    started_here = s > 0 && starts[s - 1].first == previous;
  }
  while (s < range.s_end || e < range.e_end) {
    const Step t =
        e == range.e_end || (s < range.s_end && starts[s].first < ends[e].first)
            ? starts[s].first
            : ends[e].first;
    const bool ends_here = e < range.e_end && ends[e].first == t;
    // The section [previous, t) exists once some event came before t.
    if (s + e > 0 &&
        (kind == SectionKind::kAll || (started_here && ends_here))) {
      section(count++, previous, t);
    }
    for (; e < range.e_end && ends[e].first == t; ++e) {
      last_of(ends[e].second, count);
      started_before_ends += static_cast<int64_t>(s);
    }
    started_here = s < range.s_end && starts[s].first == t;
    for (; s < range.s_end && starts[s].first == t; ++s) {
      first_of(starts[s].second, count);
      ended_by_starts += static_cast<int64_t>(e);
    }
    previous = t;
  }
  if (overlaps != nullptr) *overlaps += started_before_ends - ended_by_starts;
  return count;
}

// Events numbered in one walk below this many starts.
constexpr size_t kNumberingChunk = size_t{1} << 16;

// Numbers the sections between consecutive event steps (all of them, or
// only the maximal ones) and fills every buffer's first and last section.
// Many events on several threads: time cut where the starts' chunks of
// kNumberingChunk begin (fixed by the input), each range's sections counted,
// then numbered from the count before it: the walk over every event's
// numbers.
void NumberSections(const Events& starts, const Events& ends, SectionKind kind,
                    const base::Parallelism& parallel, Sections* out) {
  const size_t m = starts.size();
  out->first.assign(m, 0);
  out->last.assign(m, 0);
  const auto set_last = [out](int i, int k) { out->last[i] = k; };
  const auto set_first = [out](int i, int k) { out->first[i] = k; };
  const int chunks = base::ChunkCount(m, kNumberingChunk);
  int64_t overlaps = -static_cast<int64_t>(m);  // less one per buffer
  if (parallel.helpers() == 0 || chunks < 2) {
    WalkSections(
        starts, ends, {0, m, 0, m}, kind, 0,
        [out](int, Step begin, Step end) {
          out->begin.push_back(begin);
          out->end.push_back(end);
        },
        set_last, set_first, &overlaps);
    out->overlap_total = overlaps;
    return;
  }
  // Range c holds the steps from the start of chunk c on, up to chunk c+1's.
  std::vector<EventRange> ranges(chunks);
  const auto by_step = [](const std::pair<Step, int>& event, Step t) {
    return event.first < t;
  };
  size_t s = 0, e = 0;
  for (int c = 0; c < chunks; ++c) {
    size_t s_end = m, e_end = m;
    if (c + 1 < chunks) {
      const Step t = starts[(c + 1) * kNumberingChunk].first;
      s_end = std::lower_bound(starts.begin(), starts.end(), t, by_step) -
              starts.begin();
      e_end =
          std::lower_bound(ends.begin(), ends.end(), t, by_step) - ends.begin();
    }
    ranges[c] = {s, s_end, e, e_end};
    s = s_end;
    e = e_end;
  }
  std::vector<int> counts(chunks + 1, 0);
  const auto nothing = [](int, int) {};
  base::ParallelFor(parallel, chunks, [&](int c) {
    counts[c + 1] = WalkSections(
        starts, ends, ranges[c], kind, 0, [](int, Step, Step) {}, nothing,
        nothing);
  });
  for (int c = 0; c < chunks; ++c) counts[c + 1] += counts[c];
  out->begin.resize(counts[chunks]);
  out->end.resize(counts[chunks]);
  std::vector<int64_t> shares(chunks, 0);
  base::ParallelFor(parallel, chunks, [&](int c) {
    WalkSections(
        starts, ends, ranges[c], kind, counts[c],
        [out](int k, Step begin, Step end) {
          out->begin[k] = begin;
          out->end[k] = end;
        },
        set_last, set_first, &shares[c]);
  });
  out->overlap_total = std::accumulate(shares.begin(), shares.end(), overlaps);
}

// SweepSectionsOrCancel with the two sorts on the threads `parallel` gives.
absl::StatusOr<Sections> Sweep(const Problem& problem,
                               const SectionOptions& options,
                               const base::CancelToken* cancel,
                               const base::Parallelism& parallel) {
  absl::StatusOr<std::pair<Events, Events>> events =
      SortedEvents(problem, options.subset, cancel, parallel);
  if (!events.ok()) return events.status();
  const auto& [starts, ends] = *events;
  Sections out;
  NumberSections(starts, ends, options.kind, parallel, &out);
  const Events& in_order = starts;  // a lambda cannot capture a binding
  out.window_cuts = CutsFromSortedStarts(
      static_cast<int64_t>(in_order.size()), out.size(),
      [&](int64_t m) { return out.first[in_order[m].second]; });
  if (options.list_live) {
    out.live.resize(out.begin.size());
    int visited = 0;
    for (const auto& [step, i] : starts) {  // by (start, position)
      if (++visited % kCancelStride == 0 && cancel && cancel->Cancelled()) {
        return Cancelled();
      }
      for (int k = out.first[i]; k < out.last[i]; ++k) out.live[k].push_back(i);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<Sections> SweepSectionsOrCancel(
    const Problem& problem, const SectionOptions& options,
    const base::CancelToken* cancel) {
  return Sweep(problem, options, cancel, {});
}

Sections SweepSections(const Problem& problem, const SectionOptions& options) {
  return *SweepSectionsOrCancel(problem, options, nullptr);
}

absl::StatusOr<Sections> CompressTime(const Problem& problem,
                                      const base::CancelToken* cancel) {
  return CompressTime(problem, cancel, {});
}

absl::StatusOr<Sections> CompressTime(const Problem& problem,
                                      const base::CancelToken* cancel,
                                      const base::Parallelism& parallel) {
  SectionOptions options;
  options.kind = SectionKind::kMaximal;
  return Sweep(problem, options, cancel, parallel);
}

namespace {

// Calls fn(chunk, i, count) with each buffer's OverlapCounts entry, for the
// buffers of each chunk of 2^16 in turn. With threads from `parallel` and
// at least two parts' worth of buffers, the counts come from
// BufferParts parts of the buffers counted at once, and the chunks run on
// the threads: the same entries.
template <typename Fn>
void ForEachOverlapCount(const Sections& sections,
                         const base::Parallelism& parallel, Fn fn) {
  const int n = static_cast<int>(sections.first.size());
  const int parts = parallel.helpers() == 0 ? 1 : BufferParts(n);
  const int part = (n + parts - 1) / parts;
  // started[x]: buffers whose first section is < x; ended[x]: last <= x
  // (fewer than 2^31: positions are ints).
  // Allocated here, not on the workers (what they allocate can stay with
  // their threads' heaps).
  std::vector<std::vector<int>> started(
      parts, std::vector<int>(sections.size() + 2, 0));
  std::vector<std::vector<int>> ended = started;
  base::ParallelFor(parallel, parts, [&](int p) {
    for (int i = p * part; i < std::min(n, (p + 1) * part); ++i) {
      ++started[p][sections.first[i] + 1];
      ++ended[p][sections.last[i]];
    }
  });
  std::vector<int>& start_count = started[0];
  std::vector<int>& end_count = ended[0];
  for (int p = 1; p < parts; ++p) {
    for (size_t x = 0; x < start_count.size(); ++x) {
      start_count[x] += started[p][x];
      end_count[x] += ended[p][x];
    }
  }
  for (size_t x = 1; x < start_count.size(); ++x) {
    start_count[x] += start_count[x - 1];
    end_count[x] += end_count[x - 1];
  }
  base::ParallelForRange(parallel, static_cast<size_t>(n), size_t{1} << 16,
                         [&](int chunk, size_t begin, size_t end) {
                           for (size_t i = begin; i < end; ++i) {
                             fn(chunk, i,
                                int64_t{start_count[sections.last[i]]} -
                                    end_count[sections.first[i]] - 1);
                           }
                         });
}

}  // namespace

std::vector<int64_t> OverlapCounts(const Sections& sections) {
  std::vector<int64_t> counts(sections.first.size());
  ForEachOverlapCount(sections, {},
                      [&](int, size_t i, int64_t count) { counts[i] = count; });
  return counts;
}

int64_t OverlapTotal(const Sections& sections) {
  return OverlapTotal(sections, {});
}

int64_t OverlapTotal(const Sections& sections,
                     const base::Parallelism& parallel) {
  if (sections.overlap_total >= 0) return sections.overlap_total;
  std::vector<int64_t> totals(
      base::ChunkCount(sections.first.size(), size_t{1} << 16), 0);
  ForEachOverlapCount(
      sections, parallel,
      [&](int chunk, size_t, int64_t count) { totals[chunk] += count; });
  return std::accumulate(totals.begin(), totals.end(), int64_t{0});
}

bool MostlyOverlapping(const Sections& sections) {
  return MostlyOverlapping(OverlapTotal(sections),
                           static_cast<int64_t>(sections.first.size()));
}

}  // namespace memplan::planner
