#include "planner/sections.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/status/status.h"
#include "base/sort.h"

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

// Walks the distinct event steps in order and numbers the sections between
// consecutive ones (all of them, or only the maximal ones), filling every
// buffer's first and last section.
void NumberSections(const Events& starts, const Events& ends, SectionKind kind,
                    Sections* out) {
  const size_t m = starts.size();
  out->first.assign(m, 0);
  out->last.assign(m, 0);
  size_t s = 0, e = 0;
  bool started_here = false;  // a buffer starts at the previous event step
  Step previous = 0;
  while (s < m || e < m) {
    const Step t = e == m || (s < m && starts[s].first < ends[e].first)
                       ? starts[s].first
                       : ends[e].first;
    const bool ends_here = e < m && ends[e].first == t;
    // The section [previous, t) exists once some event came before t.
    if (s + e > 0 &&
        (kind == SectionKind::kAll || (started_here && ends_here))) {
      out->begin.push_back(previous);
      out->end.push_back(t);
    }
    const int count = static_cast<int>(out->begin.size());
    for (; e < m && ends[e].first == t; ++e) out->last[ends[e].second] = count;
    started_here = s < m && starts[s].first == t;
    for (; s < m && starts[s].first == t; ++s) {
      out->first[starts[s].second] = count;
    }
    previous = t;
  }
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
  NumberSections(starts, ends, options.kind, &out);
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

// Calls fn(i, count) with each buffer's OverlapCounts entry.
template <typename Fn>
void ForEachOverlapCount(const Sections& sections, Fn fn) {
  const size_t n = sections.first.size();
  // started[x]: buffers whose first section is < x; ended[x]: last <= x.
  std::vector<int64_t> started(sections.size() + 2, 0),
      ended(sections.size() + 2, 0);
  for (size_t i = 0; i < n; ++i) {
    ++started[sections.first[i] + 1];
    ++ended[sections.last[i]];
  }
  for (size_t x = 1; x < started.size(); ++x) {
    started[x] += started[x - 1];
    ended[x] += ended[x - 1];
  }
  for (size_t i = 0; i < n; ++i) {
    fn(i, started[sections.last[i]] - ended[sections.first[i]] - 1);
  }
}

}  // namespace

std::vector<int64_t> OverlapCounts(const Sections& sections) {
  std::vector<int64_t> counts(sections.first.size());
  ForEachOverlapCount(sections,
                      [&](size_t i, int64_t count) { counts[i] = count; });
  return counts;
}

int64_t OverlapTotal(const Sections& sections) {
  int64_t total = 0;
  ForEachOverlapCount(sections, [&](size_t, int64_t count) { total += count; });
  return total;
}

bool MostlyOverlapping(const Sections& sections) {
  return MostlyOverlapping(OverlapTotal(sections),
                           static_cast<int64_t>(sections.first.size()));
}

}  // namespace memplan::planner
