// Stage 3, shared objects: groups buffers into shared objects so that no two
// buffers of an object are live together; an object is as large as its
// largest member. Mini-Infer's greedy coloring: buffers by size, largest
// first (equal sizes by earliest start, then index, as greedy placement's
// size order), each into the first object holding none of its interference
// neighbours (TFLite GPU's "greedy by size" shared objects). The response
// calls them pools (Pool, pool_id) and the stage is timed as "pools".
//
//   planner::SharedObjects objects = planner::ColorSharedObjects(problem,
//   graph);
//   // objects.object_of[i] is buffer i's object; objects.size[p] its size.
#ifndef MEMPLAN_PLANNER_SHARED_OBJECTS_H_
#define MEMPLAN_PLANNER_SHARED_OBJECTS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "base/cancel.h"
#include "base/parallel.h"
#include "planner/greedy.h"  // OverlapSearch
#include "planner/interference.h"
#include "planner/problem.h"

namespace memplan::planner {

struct SharedObjects {
  std::vector<int> object_of;  // object index of each buffer
  std::vector<Bytes> size;     // size of each object: its largest member
  // The memory the objects take if each gets its own block.
  Bytes TotalBytes() const;
};

// Colors with the interference graph's adjacency. Buffers that span the
// whole schedule interfere with everything: each gets an object alone,
// numbered after the shared objects. O(n log n + edges).
SharedObjects ColorSharedObjects(const Problem& problem,
                                 const InterferenceGraph& graph);

// The same coloring without a materialized graph (what the planner runs
// on every problem: building the graph costs more than this coloring);
// gives the same objects (up to the work cap below). When
// buffers overlap few others, neighbours come from a TimeIndex of the
// buffers colored so far (cost: the colored neighbours); when they overlap
// many, the lowest free object is a first fit in a GapIndex holding each
// colored buffer as a one-slot range of object numbers (cost: O(log^2 n)
// plus the merged ranges read), so an all-overlapping problem is not
// quadratic. Where neither is cheap (lifetimes staggered across the
// schedule: the busy objects form no runs), the coloring stops at
// four times FirstPlanWorkCap (cancel.h) and the objects come from the
// O(n log n) time-order coloring of sweep.h instead (poorer objects, so
// the cap sits above what real traces need). O(n) memory, compressed time.
SharedObjects ColorSharedObjects(const Problem& problem);

// Both, polling `cancel` (may be null) every few milliseconds of work,
// sorting included: DEADLINE_EXCEEDED when cancelled.
[[nodiscard]] absl::StatusOr<SharedObjects> ColorSharedObjects(
    const Problem& problem, const InterferenceGraph& graph,
    const base::CancelToken* cancel);
[[nodiscard]] absl::StatusOr<SharedObjects> ColorSharedObjects(
    const Problem& problem, const base::CancelToken* cancel);
// The one with the graph, on the threads `parallel` gives: with the
// problem's compressed time `time` (may be null) and enough buffers, it
// colors window by window (windows.h). The same objects on any threads.
// The size order comes from `size_order` (may be null) when it holds the
// problem's.
[[nodiscard]] absl::StatusOr<SharedObjects> ColorSharedObjects(
    const Problem& problem, const InterferenceGraph& graph,
    const base::CancelToken* cancel, const Sections* time,
    const base::Parallelism& parallel, SizeOrderCache* size_order = nullptr);
// The graphless one with the problem's compressed time at hand (may be
// null: computed).
[[nodiscard]] absl::StatusOr<SharedObjects> ColorSharedObjects(
    const Problem& problem, const base::CancelToken* cancel,
    const Sections* time);
// The same on the threads `parallel` gives: when buffers overlap few others
// and there are enough of them, the scan colors window by window
// (windows.h). The same objects on any threads; the size order as above.
[[nodiscard]] absl::StatusOr<SharedObjects> ColorSharedObjects(
    const Problem& problem, const base::CancelToken* cancel,
    const Sections* time, const base::Parallelism& parallel,
    SizeOrderCache* size_order = nullptr);

// The graphless coloring with the search chosen (tests and benchmarks):
// every choice gives the same objects. With `work_cap` > 0, gives up with
// RESOURCE_EXHAUSTED once its work (base::WorkMeter units) passes the cap.
[[nodiscard]] absl::StatusOr<SharedObjects> ColorSharedObjects(
    const Problem& problem, const base::CancelToken* cancel,
    OverlapSearch search, int64_t work_cap = 0, const Sections* time = nullptr,
    const base::Parallelism& parallel = {},
    SizeOrderCache* size_order = nullptr);

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_SHARED_OBJECTS_H_
