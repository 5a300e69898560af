// Several memories with capacities (a small fast one, a large slow one...):
// which buffers go where (the request and CLI call them memory pools).
// Spaces are ordered fast to slow; each takes what
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
// keeps the smaller plan that fits. A space of capacity 0 is unbounded.
//
//   std::vector<planner::MemorySpace> spaces = {{"sram", 256 << 10},
//                                             {"dram", 0}};
//   absl::StatusOr<std::vector<planner::SpaceShare>> shares =
//       planner::SplitOverSpaces(problem, spaces, /*cancel=*/nullptr);
#ifndef MEMPLAN_PLANNER_MEMORY_SPACES_H_
#define MEMPLAN_PLANNER_MEMORY_SPACES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/cancel.h"
#include "planner/problem.h"

namespace memplan::planner {

// One memory of several.
struct MemorySpace {
  std::string name;    // unique, non-empty; reported with each assignment
  Bytes capacity = 0;  // bytes; 0: unbounded. REQUIRES >= 0
};

// What one space holds.
struct SpaceShare {
  std::vector<int> buffers;  // indices into the problem, ascending
  Solution plan;  // a plan of SubProblem(problem, buffers) within capacity
};

// The most memory spaces one plan may name. Each space is a placement over
// the buffers left (cost: spaces x buffers); memories of real targets number
// a handful (SRAM banks, DTCM, external RAM).
inline constexpr int kMaxMemorySpaces = 64;

// INVALID_ARGUMENT for more than kMaxMemorySpaces spaces, an empty or
// duplicate name or a negative capacity. Messages quote names escaped
// (base::SafeText).
[[nodiscard]] absl::Status ValidateMemorySpaces(
    const std::vector<MemorySpace>& spaces);

// The buffers `indices` of `problem`, in that order, as a problem of its own.
Problem SubProblem(const Problem& problem, const std::vector<int>& indices);

// The order in which buffers claim a space (the policy above).
std::vector<int> SpaceClaimOrder(const Problem& problem);

// Splits every buffer over `spaces` (one share per space, maybe empty).
// FAILED_PRECONDITION when some buffers fit in no space, INVALID_ARGUMENT for
// pinned buffers (a fixed offset names no space), DEADLINE_EXCEEDED when
// cancelled. Cost: one greedy placement per space.
[[nodiscard]] absl::StatusOr<std::vector<SpaceShare>> SplitOverSpaces(
    const Problem& problem, const std::vector<MemorySpace>& spaces,
    const base::CancelToken* cancel);

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_MEMORY_SPACES_H_
