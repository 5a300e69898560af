// In-place reuse: an op marked in_place may write an output into the memory
// of an input it reads for the last time (an elementwise op, say). Before
// offsets are assigned, each such output is merged into its input's buffer,
// so the pair is planned as one buffer living as long as both together.
//
//   absl::StatusOr<planner::Problem> tensors =
//       planner::AnalyzeLiveness(graph, 64);
//   planner::InPlaceMerge merge = planner::MergeInPlace(graph, *tensors);
//   // merge.problem: the buffers to plan; merge.buffer_of[t]: tensor t's
//   // buffer.
#ifndef MEMPLAN_PLANNER_IN_PLACE_H_
#define MEMPLAN_PLANNER_IN_PLACE_H_

#include <vector>

#include "planner/graph.h"
#include "planner/problem.h"

namespace memplan::planner {

// A tensor an in-place op writes into the memory of one of its inputs.
struct InPlaceTensor {
  int tensor = -1;  // the output, as an index into the graph's tensors
  int input = -1;   // the input whose memory it reuses (graph tensor index)
  int buffer = -1;  // the planned buffer holding both (index in `problem`)
};

// The buffers to plan once in-place outputs share their inputs' memory.
struct InPlaceMerge {
  // One buffer per tensor not written in place, in graph tensor order; a
  // buffer reused in place lives until the last of its tensors dies.
  Problem problem;
  // Per graph tensor, the index of the buffer holding it.
  std::vector<int> buffer_of;
  // The tensors written in place, in op order.
  std::vector<InPlaceTensor> aliases;
};

// Merges each output of an op marked in_place into an input's buffer when
// the op is the input's last reader, the output is no larger, both have the
// same alignment, and neither is persistent (graph input, output, weight).
// The first such input in the op's input list is used; an input is reused
// by one output at most; chains (a in place of b in place of c) share one
// buffer. `tensors` is AnalyzeLiveness(graph, ...). O(tensors + op edges).
InPlaceMerge MergeInPlace(const Graph& graph, const Problem& tensors);

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_IN_PLACE_H_
