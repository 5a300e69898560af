#include "planner/interference.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/sort.h"

namespace memplan::planner {
namespace {

absl::Status Cancelled() {
  return absl::DeadlineExceededError("interference graph cancelled");
}

// Indices of the buffers that do not span the whole schedule, by start
// (ties by index: a stable radix sort of the index order).
absl::StatusOr<std::vector<int>> SharableByStart(
    const Problem& problem, const base::CancelToken* cancel,
    const base::Parallelism& parallel) {
  const auto& b = problem.buffers;
  const auto span = ScheduleSpan(problem);
  std::vector<std::pair<Step, int>> keys;  // packed keys sort in cache
  keys.reserve(b.size());
  for (int i = 0; i < static_cast<int>(b.size()); ++i) {
    if (!SpansAll(b[i], span)) keys.emplace_back(b[i].start, i);
  }
  if (!base::RadixSortOrCancel(
          &keys, [](const auto& k) { return base::SignedKey(k.first); }, cancel,
          parallel)) {
    return Cancelled();
  }
  std::vector<int> order(keys.size());
  for (size_t k = 0; k < keys.size(); ++k) order[k] = keys[k].second;
  return order;
}

// The number of interfering pairs among `by_start`, without listing them:
// buffer k of the sweep overlaps every earlier one that has not ended.
// O(n) after sorting the ends.
absl::StatusOr<int64_t> CountPairs(const Problem& problem,
                                   const std::vector<int>& by_start,
                                   const base::CancelToken* cancel,
                                   const base::Parallelism& parallel) {
  std::vector<Step> ends;
  ends.reserve(by_start.size());
  for (int i : by_start) ends.push_back(problem.buffers[i].end);
  if (!base::RadixSortOrCancel(
          &ends, [](Step e) { return base::SignedKey(e); }, cancel, parallel)) {
    return Cancelled();
  }
  int64_t pairs = 0;
  size_t ended = 0;  // ends <= the current start (starts only grow)
  for (size_t k = 0; k < by_start.size(); ++k) {
    const Step start = problem.buffers[by_start[k]].start;
    while (ended < ends.size() && ends[ended] <= start) ++ended;
    pairs += static_cast<int64_t>(k) - static_cast<int64_t>(ended);
  }
  return pairs;
}

// CountPairs from the problem's compressed time (`time`, kind kMaximal):
// two buffers overlap when their section ranges meet, and each of the
// buffers that span the schedule overlaps every other, so the sharable
// pairs are all pairs less theirs. O(n + sections), no sort and no
// access in start order.
absl::StatusOr<int64_t> PairsFromSections(const Problem& problem,
                                          const Sections& time,
                                          const base::CancelToken* cancel,
                                          const base::Parallelism& parallel) {
  const int64_t n = static_cast<int64_t>(problem.buffers.size());
  int64_t spanning = 0;
  (void)SpanningBuffers(problem, parallel, &spanning);
  if (cancel != nullptr && cancel->Cancelled()) return Cancelled();
  const int64_t twice = OverlapTotal(time, parallel);  // pairs from both ends
  return twice / 2 - spanning * (n - spanning) - spanning * (spanning - 1) / 2;
}

// Buffers of the start order per chunk of the parallel steps.
constexpr int kRowChunk = 1 << 14;

int Chunks(size_t n) {
  return static_cast<int>((n + kRowChunk - 1) / kRowChunk);
}

// Each sharable buffer's row in the adjacency: its degree (the sharable
// buffers overlapping it, by counting: starts before its end, less ends by
// its start, less itself), as running sums. O(n log n), the counting in
// chunks on the threads `parallel` gives.
std::vector<int64_t> RowStarts(const Problem& problem,
                               const std::vector<int>& by_start,
                               const base::Parallelism& parallel) {
  const auto& b = problem.buffers;
  std::vector<Step> starts, ends;
  starts.reserve(by_start.size());
  ends.reserve(by_start.size());
  for (int i : by_start) {
    starts.push_back(b[i].start);  // ascending already
    ends.push_back(b[i].end);
  }
  std::sort(ends.begin(), ends.end());
  std::vector<int64_t> row_start(b.size() + 1, 0);
  base::ParallelFor(parallel, Chunks(by_start.size()), [&](int c) {
    const size_t end =
        std::min(by_start.size(), size_t{1} * (c + 1) * kRowChunk);
    for (size_t k = size_t{1} * c * kRowChunk; k < end; ++k) {
      const int i = by_start[k];
      const int64_t started =
          std::lower_bound(starts.begin(), starts.end(), b[i].end) -
          starts.begin();
      const int64_t ended =
          std::upper_bound(ends.begin(), ends.end(), b[i].start) - ends.begin();
      row_start[i + 1] = started - ended - 1;
    }
  });
  std::partial_sum(row_start.begin(), row_start.end(), row_start.begin());
  return row_start;
}

// SweepPairs in chunks of the start order, on the threads `parallel`
// gives: the buffers overlapping buffer i that start after it in that
// order are the run of the order up to the first start at or past i's end,
// and i goes into each of their rows too. Row i holds that run first, then
// the earlier-started ones as they come (an atomic count per row); the rows
// are sorted afterwards, so they do not depend on the threads.
absl::Status FillPairs(const Problem& problem, const std::vector<int>& by_start,
                       const std::vector<int64_t>& row_start,
                       const base::CancelToken* cancel,
                       const base::Parallelism& parallel,
                       std::vector<int>* columns) {
  const auto& b = problem.buffers;
  const size_t m = by_start.size();
  std::vector<Step> starts(m);
  for (size_t k = 0; k < m; ++k) starts[k] = b[by_start[k]].start;
  std::vector<size_t> run_end(m);  // per position: one past its run
  std::unique_ptr<std::atomic<int64_t>[]> fill(
      new std::atomic<int64_t>[b.size()]);
  const int chunks = Chunks(m);
  base::ParallelFor(parallel, chunks, [&](int c) {
    const size_t end = std::min(m, size_t{1} * (c + 1) * kRowChunk);
    for (size_t k = size_t{1} * c * kRowChunk; k < end; ++k) {
      const int i = by_start[k];
      run_end[k] =
          std::lower_bound(starts.begin() + k + 1, starts.end(), b[i].end) -
          starts.begin();
      fill[i].store(row_start[i] + static_cast<int64_t>(run_end[k] - k - 1),
                    std::memory_order_relaxed);
    }
  });
  std::atomic<bool> cancelled{false};
  base::ParallelFor(parallel, chunks, [&](int c) {
    base::WorkMeter meter(cancel);
    const size_t end = std::min(m, size_t{1} * (c + 1) * kRowChunk);
    for (size_t k = size_t{1} * c * kRowChunk; k < end; ++k) {
      const int i = by_start[k];
      if (meter.Stop(16 + static_cast<int64_t>(run_end[k] - k))) {
        cancelled = true;
        return;
      }
      int64_t at = row_start[i];
      for (size_t r = k + 1; r < run_end[k]; ++r) {
        const int j = by_start[r];
        (*columns)[at++] = j;
        (*columns)[fill[j].fetch_add(1, std::memory_order_relaxed)] = i;
      }
    }
  });
  if (cancelled) return Cancelled();
  return absl::OkStatus();
}

// Sorts every row, in chunks of rows on the threads `parallel` gives.
absl::Status SortRows(const std::vector<int64_t>& row_start,
                      const base::CancelToken* cancel,
                      const base::Parallelism& parallel,
                      std::vector<int>* columns) {
  const size_t n = row_start.size() - 1;
  std::atomic<bool> cancelled{false};
  base::ParallelFor(parallel, Chunks(n), [&](int c) {
    const size_t end = std::min(n, size_t{1} * (c + 1) * kRowChunk);
    int64_t sorted = 0;  // entries sorted since the last poll
    for (size_t i = size_t{1} * c * kRowChunk; i < end; ++i) {
      std::sort(columns->begin() + row_start[i],
                columns->begin() + row_start[i + 1]);
      if ((sorted += row_start[i + 1] - row_start[i] + 1) > (1 << 16)) {
        sorted = 0;
        if (cancel != nullptr && cancel->Cancelled()) {
          cancelled = true;
          return;
        }
      }
    }
  });
  if (cancelled) return Cancelled();
  return absl::OkStatus();
}

// Fills both directions of every interfering pair into the rows, by a
// sweep over lifetimes: each buffer meets the earlier-started ones still
// live. The live list holds (end, index), so the sweep reads it in order.
absl::Status SweepPairs(const Problem& problem,
                        const std::vector<int>& by_start,
                        const std::vector<int64_t>& row_start,
                        const base::CancelToken* cancel,
                        std::vector<int>* columns) {
  const auto& b = problem.buffers;
  std::vector<int64_t> fill(row_start.begin(), row_start.end() - 1);
  // Buffers started so far that may still be live; starts only grow, so one
  // that has ended is dropped for good the next time the list is scanned.
  std::vector<std::pair<Step, int>> live;
  base::WorkMeter meter(cancel);
  for (int i : by_start) {
    if (meter.Stop(16 + static_cast<int64_t>(live.size()))) return Cancelled();
    const Step start = b[i].start;
    size_t kept = 0;
    for (const auto& [end, j] : live) {
      if (end <= start) continue;
      live[kept++] = {end, j};
      (*columns)[fill[i]++] = j;
      (*columns)[fill[j]++] = i;
    }
    live.resize(kept);
    live.emplace_back(b[i].end, i);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<InterferenceGraph> BuildInterferenceGraph(
    const Problem& problem, int64_t max_edges,
    const base::CancelToken* cancel) {
  return BuildInterferenceGraph(problem, max_edges, cancel, {}, nullptr);
}

absl::StatusOr<InterferenceGraph> BuildInterferenceGraph(
    const Problem& problem, int64_t max_edges, const base::CancelToken* cancel,
    const base::Parallelism& parallel, const Sections* time) {
  absl::StatusOr<int64_t> count = int64_t{0};
  if (time != nullptr) {  // over the limit before any sort
    count = PairsFromSections(problem, *time, cancel, parallel);
    if (!count.ok()) return count.status();
  }
  const auto over = [&] {
    return absl::ResourceExhaustedError(absl::StrCat(
        *count, " interfering buffer pairs, over the limit of ", max_edges));
  };
  if (*count > max_edges) return over();
  absl::StatusOr<std::vector<int>> by_start =
      SharableByStart(problem, cancel, parallel);
  if (!by_start.ok()) return by_start.status();
  if (time == nullptr) {
    count = CountPairs(problem, *by_start, cancel, parallel);
    if (!count.ok()) return count.status();
    if (*count > max_edges) return over();
  }
  const size_t n = problem.buffers.size();
  std::vector<int64_t> row_start = RowStarts(problem, *by_start, parallel);
  std::vector<int> columns(2 * static_cast<size_t>(*count));
  if (auto s =
          by_start->size() > kRowChunk
              ? FillPairs(problem, *by_start, row_start, cancel, parallel,
                          &columns)
              : SweepPairs(problem, *by_start, row_start, cancel, &columns);
      !s.ok()) {
    return s;
  }
  if (auto s = SortRows(row_start, cancel, parallel, &columns); !s.ok()) {
    return s;
  }
  std::vector<bool> spans_all(n, true);
  for (int i : *by_start) spans_all[i] = false;
  return InterferenceGraph(std::move(row_start), std::move(columns),
                           std::move(spans_all));
}

}  // namespace memplan::planner
