// Stage 1, schedule + liveness: checks that a graph's ops are in a valid
// execution order and turns its tensors into buffers with lifetimes.
//
// Step i is op i. An intermediate tensor is born at its producer's step and
// dies after its last consumer (an unused one lives for its producer's step
// only). Graph inputs, graph outputs and weights (tensors no op produces that
// are not graph inputs) are persistent: live for the whole schedule, so they
// never share memory (Mini-Infer's rules).
//
//   absl::StatusOr<planner::Problem> p = planner::AnalyzeLiveness(graph, 64);
#ifndef MEMPLAN_PLANNER_LIVENESS_H_
#define MEMPLAN_PLANNER_LIVENESS_H_

#include "absl/status/statusor.h"
#include "planner/graph.h"
#include "planner/problem.h"
#include "planner/validate.h"  // ValidateProblem, IsPowerOfTwo (moved)

namespace memplan::planner {

// Returns one buffer per tensor, in the graph's tensor order, named as the
// tensor. `default_alignment` applies to tensors whose alignment is 0.
// INVALID_ARGUMENT, naming the tensor or op, for: an empty graph, an empty
// or duplicate name, size <= 0, sizes whose sum overflows 64 bits, an
// alignment that is not a power of two, an op reading or writing an unknown
// tensor, a tensor produced twice, a graph input produced by an op, a tensor
// read before it is produced (ops out of order, or a cycle).
[[nodiscard]] absl::StatusOr<Problem> AnalyzeLiveness(const Graph& graph,
                                                      Bytes default_alignment);

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

#endif  // MEMPLAN_PLANNER_LIVENESS_H_
