// Helpers for tests that replay traces on an allocator or on a static plan
// whose arena comes from it.
//
//   int64_t arena = 0;
//   std::vector<int64_t> offsets = testing::DisjointOffsets(trace, &arena);
//   auto r = allocators::ReplayStaticPlan(trace, offsets, arena, source);
#ifndef MEMPLAN_ALLOCATORS_TESTING_REPLAY_H_
#define MEMPLAN_ALLOCATORS_TESTING_REPLAY_H_

#include <cstdint>
#include <vector>

#include "allocators/allocator.h"
#include "allocators/trace.h"

namespace memplan::allocators::testing {

// A static plan that cannot be wrong: every tensor of `trace` gets bytes of
// its own, one after another, each at a multiple of its alignment. Sets
// *arena_size to the bytes they take.
inline std::vector<int64_t> DisjointOffsets(const Trace& trace,
                                            int64_t* arena_size) {
  std::vector<int64_t> offsets(static_cast<size_t>(trace.NumIds()), 0);
  int64_t end = 0;
  for (const TraceEvent& e : trace.events) {
    if (e.kind != EventKind::kAlloc) continue;
    const auto alignment = static_cast<size_t>(e.alignment);
    offsets[static_cast<size_t>(e.id)] =
        static_cast<int64_t>(AlignUp(static_cast<size_t>(end), alignment));
    end = offsets[static_cast<size_t>(e.id)] + e.size;
  }
  *arena_size = end;
  return offsets;
}

}  // namespace memplan::allocators::testing

#endif  // MEMPLAN_ALLOCATORS_TESTING_REPLAY_H_
