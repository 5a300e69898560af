// Several memories with capacities (a small fast one, a large slow one...):
// which buffers go where. Pools are ordered fast to slow; each takes what
// fits of what the faster ones left, by one stated policy:
//
//   smallest size x lifetime first (then smallest, then index): a buffer's
//   area is the fast memory it occupies (bytes x steps); taking small areas
//   first puts the most buffers, and so most of the accesses, into the
//   fast memory for the space it has.
//
// Whether a buffer fits is decided by placing it with best fit within the
// capacity (PlaceWithinCapacity), so every share comes with a plan that
// fits; the pipeline then plans each share again with its strategies and
// keeps the smaller plan that fits. A pool of capacity 0 is unbounded.
//
//   std::vector<planner::MemoryPool> pools = {{"sram", 256 << 10},
//                                             {"dram", 0}};
//   absl::StatusOr<std::vector<planner::PoolShare>> shares =
//       planner::SplitOverPools(problem, pools, /*cancel=*/nullptr);
#ifndef MEMPLAN_PLANNER_MEMORY_POOLS_H_
#define MEMPLAN_PLANNER_MEMORY_POOLS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "planner/cancel.h"
#include "planner/problem.h"

namespace memplan::planner {

// One memory of several.
struct MemoryPool {
  std::string name;    // unique, non-empty; reported with each assignment
  Bytes capacity = 0;  // bytes; 0: unbounded. REQUIRES >= 0
};

// What one pool holds.
struct PoolShare {
  std::vector<int> buffers;  // indices into the problem, ascending
  Solution plan;  // a plan of SubProblem(problem, buffers) within capacity
};

// INVALID_ARGUMENT for an empty or duplicate name or a negative capacity.
[[nodiscard]] absl::Status ValidateMemoryPools(
    const std::vector<MemoryPool>& pools);

// The buffers `indices` of `problem`, in that order, as a problem of its own.
Problem SubProblem(const Problem& problem, const std::vector<int>& indices);

// The order in which buffers claim a pool (the policy above).
std::vector<int> PoolClaimOrder(const Problem& problem);

// Splits every buffer over `pools` (one share per pool, maybe empty).
// FAILED_PRECONDITION when some buffers fit in no pool, INVALID_ARGUMENT for
// pinned buffers (a fixed offset names no pool), DEADLINE_EXCEEDED when
// cancelled. Cost: one greedy placement per pool.
[[nodiscard]] absl::StatusOr<std::vector<PoolShare>> SplitOverPools(
    const Problem& problem, const std::vector<MemoryPool>& pools,
    const CancelToken* cancel);

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_MEMORY_POOLS_H_
