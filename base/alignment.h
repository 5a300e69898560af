// The alignment memplan gives every tensor, buffer and allocator block that
// asks for none (nor does the request's options): 64 bytes, a cache line and
// enough for any SIMD load. The one home of that number: the planner's
// options, the wire conversions and the allocators all read it here.
//
//   planner::PlanOptions options;  // options.alignment == kDefaultAlignment
//   void* p = allocator.Allocate(n, base::kDefaultAlignment);
#ifndef MEMPLAN_BASE_ALIGNMENT_H_
#define MEMPLAN_BASE_ALIGNMENT_H_

#include <cstdint>

namespace memplan::base {

inline constexpr int64_t kDefaultAlignment = 64;

}  // namespace memplan::base

#endif  // MEMPLAN_BASE_ALIGNMENT_H_
