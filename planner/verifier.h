// The verifier: proves a Solution valid for its Problem. Every plan the
// service returns has passed Verify.
//
//   absl::Status ok = planner::Verify(problem, solution);
//   if (!ok.ok()) LOG(ERROR) << ok;  // names the two buffers that collide
#ifndef MEMPLAN_PLANNER_VERIFIER_H_
#define MEMPLAN_PLANNER_VERIFIER_H_

#include "absl/status/status.h"
#include "planner/problem.h"

namespace memplan::planner {

// Checks that every buffer has an offset, every offset is non-negative and a
// multiple of the buffer's alignment, fixed offsets are kept, the arena holds
// every offset + size, and no two buffers whose lifetimes overlap share a
// byte. O(n log n): a sweep over lifetimes keeping live buffers ordered by
// offset. Returns INTERNAL naming the buffers on the first violation.
[[nodiscard]] absl::Status Verify(const Problem& problem,
                                  const Solution& solution);

// The same checks by comparing every pair: O(n^2), for tests only.
[[nodiscard]] absl::Status VerifyAllPairs(const Problem& problem,
                                          const Solution& solution);

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_VERIFIER_H_
