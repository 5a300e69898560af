#include "planner/interference.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "planner/sort.h"

namespace memplan::planner {
namespace {

constexpr int kCancelStride = 4096;

absl::Status Cancelled() {
  return absl::DeadlineExceededError("interference graph cancelled");
}

// Indices of the buffers that do not span the whole schedule, by start
// (ties by index: a stable radix sort of the index order).
absl::StatusOr<std::vector<int>> SharableByStart(const Problem& problem,
                                                 const CancelToken* cancel) {
  const auto& b = problem.buffers;
  const auto span = ScheduleSpan(problem);
  std::vector<std::pair<Step, int>> keys;  // packed keys sort in cache
  keys.reserve(b.size());
  for (int i = 0; i < static_cast<int>(b.size()); ++i) {
    if (!SpansAll(b[i], span)) keys.emplace_back(b[i].start, i);
  }
  if (!RadixSortOrCancel(
          &keys, [](const auto& k) { return SignedKey(k.first); }, cancel)) {
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
                                   const CancelToken* cancel) {
  std::vector<Step> ends;
  ends.reserve(by_start.size());
  for (int i : by_start) ends.push_back(problem.buffers[i].end);
  if (!RadixSortOrCancel(
          &ends, [](Step e) { return SignedKey(e); }, cancel)) {
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

// The interfering pairs (i, j), found by a sweep over lifetimes.
absl::Status SweepPairs(const Problem& problem,
                        const std::vector<int>& by_start,
                        const CancelToken* cancel,
                        std::vector<std::pair<int, int>>* pairs) {
  const auto& b = problem.buffers;
  // Buffers started so far that may still be live; starts only grow, so one
  // that has ended is dropped for good the next time the list is scanned.
  std::vector<int> live;
  int visited = 0;
  for (int i : by_start) {
    if (++visited % kCancelStride == 0 && cancel && cancel->Cancelled()) {
      return Cancelled();
    }
    size_t kept = 0;
    for (int j : live) {
      if (b[j].end <= b[i].start) continue;
      live[kept++] = j;
      pairs->emplace_back(std::min(i, j), std::max(i, j));
    }
    live.resize(kept);
    live.push_back(i);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<InterferenceGraph> BuildInterferenceGraph(
    const Problem& problem, int64_t max_edges, const CancelToken* cancel) {
  absl::StatusOr<std::vector<int>> by_start = SharableByStart(problem, cancel);
  if (!by_start.ok()) return by_start.status();
  absl::StatusOr<int64_t> count = CountPairs(problem, *by_start, cancel);
  if (!count.ok()) return count.status();
  if (*count > max_edges) {
    return absl::ResourceExhaustedError(absl::StrCat(
        *count, " interfering buffer pairs, over the limit of ", max_edges));
  }
  std::vector<std::pair<int, int>> pairs;
  pairs.reserve(*count);
  if (auto s = SweepPairs(problem, *by_start, cancel, &pairs); !s.ok()) {
    return s;
  }
  const size_t n = problem.buffers.size();
  std::vector<int64_t> row_start(n + 1, 0);
  for (const auto& [i, j] : pairs) {
    ++row_start[i + 1];
    ++row_start[j + 1];
  }
  std::partial_sum(row_start.begin(), row_start.end(), row_start.begin());
  std::vector<int> columns(pairs.size() * 2);
  std::vector<int64_t> fill(row_start.begin(), row_start.end() - 1);
  for (const auto& [i, j] : pairs) {
    columns[fill[i]++] = j;
    columns[fill[j]++] = i;
  }
  int64_t sorted = 0;  // entries sorted since the last poll
  for (size_t i = 0; i < n; ++i) {
    std::sort(columns.begin() + row_start[i],
              columns.begin() + row_start[i + 1]);
    if ((sorted += row_start[i + 1] - row_start[i] + 1) > (1 << 16)) {
      sorted = 0;
      if (cancel != nullptr && cancel->Cancelled()) return Cancelled();
    }
  }
  std::vector<bool> spans_all(n, true);
  for (int i : *by_start) spans_all[i] = false;
  return InterferenceGraph(std::move(row_start), std::move(columns),
                           std::move(spans_all));
}

}  // namespace memplan::planner
