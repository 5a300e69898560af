#include "planner/interference.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace memplan::planner {
namespace {

constexpr int kCancelStride = 4096;

// The interfering pairs (i, j), found by a sweep over lifetimes.
absl::Status SweepPairs(const Problem& problem, int64_t max_edges,
                        const CancelToken* cancel,
                        std::vector<std::pair<int, int>>* pairs) {
  const auto& b = problem.buffers;
  std::vector<int> by_start(b.size());
  std::iota(by_start.begin(), by_start.end(), 0);
  std::sort(by_start.begin(), by_start.end(), [&](int x, int y) {
    return b[x].start != b[y].start ? b[x].start < b[y].start : x < y;
  });
  // Buffers started so far that may still be live; starts only grow, so one
  // that has ended is dropped for good the next time the list is scanned.
  std::vector<int> live;
  int visited = 0;
  for (int i : by_start) {
    if (++visited % kCancelStride == 0 && cancel && cancel->Cancelled()) {
      return absl::DeadlineExceededError("interference graph cancelled");
    }
    size_t kept = 0;
    for (int j : live) {
      if (b[j].end <= b[i].start) continue;
      live[kept++] = j;
      pairs->emplace_back(std::min(i, j), std::max(i, j));
    }
    live.resize(kept);
    if (static_cast<int64_t>(pairs->size()) > max_edges) {
      return absl::ResourceExhaustedError(
          absl::StrCat("more than ", max_edges, " interfering buffer pairs"));
    }
    live.push_back(i);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<InterferenceGraph> BuildInterferenceGraph(
    const Problem& problem, int64_t max_edges, const CancelToken* cancel) {
  std::vector<std::pair<int, int>> pairs;
  if (auto s = SweepPairs(problem, max_edges, cancel, &pairs); !s.ok()) {
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
  for (size_t i = 0; i < n; ++i) {
    std::sort(columns.begin() + row_start[i],
              columns.begin() + row_start[i + 1]);
  }
  return InterferenceGraph(std::move(row_start), std::move(columns));
}

}  // namespace memplan::planner
