// The verifier: proves a Solution valid for its Problem. Every plan the
// service returns has passed Verify.
//
//   absl::Status ok = planner::Verify(problem, solution);
//   if (!ok.ok()) LOG(ERROR) << ok;  // names the two buffers that collide
#ifndef MEMPLAN_PLANNER_VERIFIER_H_
#define MEMPLAN_PLANNER_VERIFIER_H_

#include <vector>

#include "absl/status/status.h"
#include "base/cancel.h"
#include "base/parallel.h"
#include "planner/problem.h"

namespace memplan::planner {

// Checks that every buffer has an offset, every offset is non-negative and a
// multiple of the buffer's alignment, fixed offsets are kept, the arena holds
// every offset + size, and no two buffers whose lifetimes overlap share a
// byte. O(n log n) whatever the overlap: a sweep over lifetimes keeping
// live buffers ordered by offset (a new buffer is checked against its two
// neighbours only). Returns INTERNAL naming the buffers on the first
// violation.
[[nodiscard]] absl::Status Verify(const Problem& problem,
                                  const Solution& solution);
// The same, polling `cancel` (may be null) every few milliseconds, sorting
// included: DEADLINE_EXCEEDED when cancelled.
[[nodiscard]] absl::Status Verify(const Problem& problem,
                                  const Solution& solution,
                                  const base::CancelToken* cancel);

struct Sections;  // sections.h

// Verify with the problem's compressed time at hand (CompressTime), on the
// threads `parallel` gives: the checks of each buffer in chunks, and the
// sweep per time window (windows.h), each over the buffers live in it
// (two lifetimes overlap exactly where their sections do, in some window
// both touch). The same verdict as Verify; when several faults are found
// the first chunk's or the earliest window's is named.
[[nodiscard]] absl::Status Verify(const Problem& problem,
                                  const Solution& solution,
                                  const base::CancelToken* cancel,
                                  const Sections& time,
                                  const base::Parallelism& parallel);

// Two buffers an in-place op may put in the same memory: `output` is written
// by the op that reads `input` for the last time.
struct InPlacePair {
  int output = -1;  // index into problem.buffers
  int input = -1;   // index into problem.buffers
};

// Verify for a plan where each pair shares memory on purpose: the output
// sits at the input's offset, is no larger, has the same alignment, and is
// born at the input's last step; neither is persistent. Apart from that
// hand-over step, everything Verify checks still holds (the input is
// treated as dead from the output's birth). INTERNAL names the pair or the
// buffers on the first violation. O(n log n).
[[nodiscard]] absl::Status VerifyInPlace(const Problem& problem,
                                         const Solution& solution,
                                         const std::vector<InPlacePair>& pairs);
[[nodiscard]] absl::Status VerifyInPlace(const Problem& problem,
                                         const Solution& solution,
                                         const std::vector<InPlacePair>& pairs,
                                         const base::CancelToken* cancel);

struct SharedObjects;  // shared_objects.h

// Checks shared objects (stage 3) for their problem: one object per buffer,
// every object used, each as large as its largest member, and no two
// members of one object live together. O(n log n). INTERNAL naming the
// object or the two buffers on the first violation; DEADLINE_EXCEEDED once
// `cancel` (may be null) fires.
[[nodiscard]] absl::Status VerifySharedObjects(const Problem& problem,
                                               const SharedObjects& objects);
[[nodiscard]] absl::Status VerifySharedObjects(const Problem& problem,
                                               const SharedObjects& objects,
                                               const base::CancelToken* cancel);

// The same checks by comparing every pair: O(n^2), for tests only.
[[nodiscard]] absl::Status VerifyAllPairs(const Problem& problem,
                                          const Solution& solution);

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_VERIFIER_H_
