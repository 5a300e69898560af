// Validation of buffer lists: the REQUIRES of planner::Buffer checked once,
// at the boundary, with messages naming the offending buffer. Every stage
// after it may assume sizes, alignments and offsets that cannot overflow.
//
//   if (absl::Status s = planner::ValidateProblem(problem); !s.ok()) {
//     return s;  // INVALID_ARGUMENT: "buffer 'x' has size 0; ..."
//   }
#ifndef MEMPLAN_PLANNER_VALIDATE_H_
#define MEMPLAN_PLANNER_VALIDATE_H_

#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "base/cancel.h"
#include "base/parallel.h"
#include "planner/problem.h"

namespace memplan::planner {

// Sums of sizes (and fixed offset + size) stay at or below this, so that
// offsets, alignment padding and arena sizes never overflow 64 bits.
inline constexpr Bytes kMaxTotalBytes = Bytes{1} << 62;
// Steps lie in [-kMaxStep, kMaxStep] and a lifetime is at most kMaxStep
// steps long, so end - start never overflows. Stages compare steps but never
// index by them: memory depends on the number of buffers only.
inline constexpr Step kMaxStep = Step{1} << 62;
// The largest alignment accepted.
inline constexpr Bytes kMaxAlignment = Bytes{1} << 32;

inline bool IsPowerOfTwo(Bytes v) { return v > 0 && (v & (v - 1)) == 0; }

// A power of two up to kMaxAlignment.
inline bool IsValidAlignment(Bytes a) {
  return IsPowerOfTwo(a) && a <= kMaxAlignment;
}

// Adds `size` to `*total`; INVALID_ARGUMENT naming what() (called only
// then) when the sum passes kMaxTotalBytes.
[[nodiscard]] absl::Status AddToTotalSize(Bytes size,
                                          absl::FunctionRef<std::string()> what,
                                          Bytes* total);

// Checks each buffer alone and the sum of sizes: -kMaxStep <= start < end
// <= kMaxStep with end - start <= kMaxStep (any integers, negative
// included), size > 0, a valid alignment, fixed offsets non-negative, aligned
// and ending by kMaxTotalBytes, the sum of sizes up to kMaxTotalBytes. Names
// are not checked, and an empty list is fine. INVALID_ARGUMENT names the
// buffer.
[[nodiscard]] absl::Status ValidateBuffers(const Problem& problem);
// The same, polling `cancel` (may be null): DEADLINE_EXCEEDED once it fires.
[[nodiscard]] absl::Status ValidateBuffers(const Problem& problem,
                                           const base::CancelToken* cancel);

// Checks a buffer list (the MiniMalloc model) as the service takes it:
// ValidateBuffers, plus a non-empty list and unique non-empty names.
// INVALID_ARGUMENT names the buffer.
[[nodiscard]] absl::Status ValidateProblem(const Problem& problem);
// The same, checking the names beside the rest on the threads `parallel`
// gives (the same answer), polling `cancel` (may be null) every few
// thousand buffers: DEADLINE_EXCEEDED once it fires.
[[nodiscard]] absl::Status ValidateProblem(
    const Problem& problem, const base::Parallelism& parallel,
    const base::CancelToken* cancel = nullptr);

namespace internal {

// The name check of ValidateProblem on long lists, with the answer of one
// pass over one hash set (the first empty or repeated name in list order),
// on the threads `parallel` gives and in caches: names go to 256 buckets
// by `hash_of` (absl::HashOf; a test gives a weaker one), a count and a
// stable scatter chunk by chunk; each bucket's hashes go through a hash
// map of its own, and only names of equal hash are compared. O(n); about
// 40 bytes a buffer while it runs.
[[nodiscard]] absl::Status CheckNamesInBuckets(
    const Problem& problem, const base::Parallelism& parallel,
    const base::CancelToken* cancel, uint64_t (*hash_of)(absl::string_view));

}  // namespace internal

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_VALIDATE_H_
