// Stage 3, pool coloring: groups buffers into shared objects ("pools") so
// that no two buffers of a pool are live together; a pool is as large as its
// largest member. Mini-Infer's greedy: buffers by size, largest first, each
// into the first pool holding none of its interference neighbours (TFLite
// GPU's "greedy by size" shared objects).
//
//   planner::Pools pools = planner::ColorPools(problem, graph);
//   // pools.pool_of[i] is buffer i's pool; pools.size[p] its size.
#ifndef MEMPLAN_PLANNER_POOL_COLORING_H_
#define MEMPLAN_PLANNER_POOL_COLORING_H_

#include <vector>

#include "absl/status/statusor.h"
#include "planner/cancel.h"
#include "planner/interference.h"
#include "planner/problem.h"

namespace memplan::planner {

struct Pools {
  std::vector<int> pool_of;  // pool index of each buffer
  std::vector<Bytes> size;   // size of each pool: its largest member
  // The memory the pools take if each gets its own block.
  Bytes TotalBytes() const;
};

// Colors with the interference graph's adjacency. Buffers that span the
// whole schedule interfere with everything: each gets a pool alone, numbered
// after the shared pools. O(n log n + edges).
Pools ColorPools(const Problem& problem, const InterferenceGraph& graph);

// The same coloring without a materialized graph, for problems whose
// interference graph is too large to build; gives the same pools. When
// buffers overlap few others, neighbours come from a TimeIndex of the
// buffers colored so far (cost: the colored neighbours); when they overlap
// many, the lowest free pool is a first fit in a GapIndex holding each
// colored buffer as a one-slot range of pool numbers (cost: O(log^2 n) plus
// the merged pool ranges read), so an all-overlapping problem is not
// quadratic. O(n) memory, compressed time.
Pools ColorPools(const Problem& problem);

// Both, polling `cancel` (may be null) every few milliseconds of work,
// sorting included: DEADLINE_EXCEEDED when cancelled.
[[nodiscard]] absl::StatusOr<Pools> ColorPools(const Problem& problem,
                                               const InterferenceGraph& graph,
                                               const CancelToken* cancel);
[[nodiscard]] absl::StatusOr<Pools> ColorPools(const Problem& problem,
                                               const CancelToken* cancel);

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_POOL_COLORING_H_
