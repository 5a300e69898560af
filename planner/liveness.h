// Stage 1, schedule + liveness: checks that a graph's ops are in a valid
// execution order and turns its tensors into buffers with lifetimes.
//
// Step i is op i. An intermediate tensor (an activation) is born at its
// producer's step and dies after its last consumer (an unused one lives for
// its producer's step only). Graph inputs, graph outputs, weights (tensors
// marked constant, and tensors no op produces that are not graph inputs) and
// variables are persistent: live for the whole schedule, so they never
// share memory (Mini-Infer's rules). Whether weights and graph inputs and
// outputs are planned at all is the pipeline's choice (PlanOptions).
//
//   std::vector<planner::TensorKind> kinds;
//   absl::StatusOr<planner::Problem> p =
//       planner::AnalyzeLiveness(graph, 64, &kinds);
#ifndef MEMPLAN_PLANNER_LIVENESS_H_
#define MEMPLAN_PLANNER_LIVENESS_H_

#include "absl/status/statusor.h"
#include "planner/graph.h"
#include "planner/problem.h"
#include "planner/validate.h"  // ValidateProblem, IsPowerOfTwo (moved)

namespace memplan::planner {

// Returns one buffer per tensor, in the graph's tensor order, named as the
// tensor, and when `kinds` is not null each tensor's kind. A tensor that is
// a graph input and output is an input; `default_alignment` applies to
// tensors whose alignment is 0.
// INVALID_ARGUMENT, naming the tensor or op, for: an empty graph, an empty
// or duplicate name, size <= 0, sizes whose sum overflows 64 bits, an
// alignment that is not a power of two, an op reading or writing an unknown
// tensor, a tensor produced twice, a graph input produced by an op, a tensor
// read before it is produced (ops out of order, or a cycle), a tensor marked
// both constant and variable.
[[nodiscard]] absl::StatusOr<Problem> AnalyzeLiveness(
    const Graph& graph, Bytes default_alignment,
    std::vector<TensorKind>* kinds = nullptr);

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_LIVENESS_H_
