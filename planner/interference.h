// Stage 2, interference graph: which buffers are live at the same time.
// Built by one sweep over lifetimes sorted by start (never an all-pairs
// loop); adjacency in compressed sparse rows, usable by pool coloring.
// Buffers live over the whole schedule (graph inputs, outputs, weights)
// interfere with every other buffer; they are flagged SpansAll() and their
// edges are implied, not stored, so they cost nothing per pair.
//
//   absl::StatusOr<planner::InterferenceGraph> g =
//       planner::BuildInterferenceGraph(problem, /*max_edges=*/1 << 26);
//   for (int j : g->Neighbours(i)) ...
//
// Cost: O(n log n + E) time and O(n + E) memory for E interfering pairs.
#ifndef MEMPLAN_PLANNER_INTERFERENCE_H_
#define MEMPLAN_PLANNER_INTERFERENCE_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/cancel.h"
#include "base/parallel.h"
#include "planner/problem.h"
#include "planner/sections.h"

namespace memplan::planner {

class InterferenceGraph {
 public:
  InterferenceGraph(std::vector<int64_t> row_start, std::vector<int> columns,
                    std::vector<bool> spans_all)
      : row_start_(std::move(row_start)),
        columns_(std::move(columns)),
        spans_all_(std::move(spans_all)) {}

  int num_nodes() const { return static_cast<int>(row_start_.size()) - 1; }
  int64_t num_edges() const {
    return static_cast<int64_t>(columns_.size()) / 2;
  }
  // True when buffer i spans the whole schedule: it interferes with all.
  bool SpansAll(int i) const { return spans_all_[i]; }
  // The buffers live at some step together with buffer i, ascending, not
  // counting those that span the whole schedule.
  absl::Span<const int> Neighbours(int i) const {
    return absl::MakeConstSpan(columns_.data() + row_start_[i],
                               row_start_[i + 1] - row_start_[i]);
  }

 private:
  std::vector<int64_t> row_start_;  // CSR offsets, num_nodes + 1 entries
  std::vector<int> columns_;        // both directions of every edge
  std::vector<bool> spans_all_;     // per buffer: interferes with all
};

// RESOURCE_EXHAUSTED when there are more than `max_edges` interfering pairs
// (counted in O(n log n) before anything is allocated); DEADLINE_EXCEEDED
// when cancelled.
[[nodiscard]] absl::StatusOr<InterferenceGraph> BuildInterferenceGraph(
    const Problem& problem, int64_t max_edges,
    const base::CancelToken* cancel = nullptr);
// The same, filling and sorting the rows in chunks on the threads
// `parallel` gives (the same graph). With the problem's compressed time
// (CompressTime; may be null) the pairs are counted from it in O(n), so a
// problem over the limit costs no sort.
[[nodiscard]] absl::StatusOr<InterferenceGraph> BuildInterferenceGraph(
    const Problem& problem, int64_t max_edges, const base::CancelToken* cancel,
    const base::Parallelism& parallel, const Sections* time = nullptr);

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_INTERFERENCE_H_
