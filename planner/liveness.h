// Stage 1, schedule + liveness: checks that a graph's ops are in a valid
// execution order and turns its tensors into buffers with lifetimes.
//
// Step i is op i. An intermediate tensor (an activation) is born at its
// producer's step and dies after its last consumer (an unused one lives for
// its producer's step only). Graph inputs and outputs live as runtimes run
// them (TFLite Micro's micro_allocation_info.cc): an input from the start
// (step 0) to its last use, an output from its producer to the end
// (IoPolicy). Weights (tensors marked constant, and tensors no op produces
// that are not graph inputs) and variables live for the whole schedule, so
// they never share memory (Mini-Infer's rules). Whether weights and graph
// inputs and outputs are planned at all is the pipeline's choice
// (PlanOptions).
//
//   std::vector<planner::TensorKind> kinds;
//   absl::StatusOr<planner::Problem> p = planner::AnalyzeLiveness(
//       graph, 64, &kinds, planner::IoPolicy::kKeepInputs);
#ifndef MEMPLAN_PLANNER_LIVENESS_H_
#define MEMPLAN_PLANNER_LIVENESS_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/cancel.h"
#include "base/parallel.h"
#include "planner/graph.h"
#include "planner/problem.h"
#include "planner/validate.h"  // ValidateProblem, IsPowerOfTwo (moved)

namespace memplan::planner {

// How graph inputs and outputs live, and whether they are planned
// (PlanOptions::io; options.io on the wire, by IoPolicyName).
enum class IoPolicy {
  // "arena": in the arena with the lifetimes a runtime gives them (TFLite
  // Micro): an input from the start (step 0) to its last use, an output
  // from its producer to the end. The default.
  kRuntime,
  // "arena_keep_inputs": in the arena, inputs intact for the whole run (the
  // caller reads them again after it), outputs as kRuntime.
  kKeepInputs,
  // "exclude": not planned, the caller owns their buffers (lifetimes as
  // kRuntime, for reports).
  kExclude,
};

// "arena", "arena_keep_inputs" or "exclude": the names on the wire and in
// reports.
absl::string_view IoPolicyName(IoPolicy policy);

// Returns one buffer per tensor, in the graph's tensor order, named as the
// tensor, and when `kinds` is not null each tensor's kind. A tensor that is
// a graph input and output is an input, and lives for the whole run; an
// input no op reads lives at step 0 only, an output no op produces for the
// whole run. `io` sets the other inputs' and outputs' lifetimes;
// `default_alignment` applies to tensors whose alignment is 0. Every
// tensor but activations is marked Buffer::persistent (never reused in
// place), whatever its lifetime.
// INVALID_ARGUMENT, naming the tensor or op, for: an empty graph, an empty
// or duplicate name, size <= 0, sizes whose sum overflows 64 bits, an
// alignment that is not a power of two, an op reading or writing an unknown
// tensor, a tensor produced twice, a graph input produced by an op, a tensor
// read before it is produced (ops out of order, or a cycle), a tensor marked
// both constant and variable.
[[nodiscard]] absl::StatusOr<Problem> AnalyzeLiveness(
    const Graph& graph, Bytes default_alignment,
    std::vector<TensorKind>* kinds = nullptr, IoPolicy io = IoPolicy::kRuntime);
// The same, polling `cancel` (may be null) every few thousand tensors and
// ops: DEADLINE_EXCEEDED once it fires.
[[nodiscard]] absl::StatusOr<Problem> AnalyzeLiveness(
    const Graph& graph, Bytes default_alignment, std::vector<TensorKind>* kinds,
    IoPolicy io, const base::CancelToken* cancel);
// The same on the threads `parallel` gives: the tensors' and the ops' name
// sets built at once, the names the ops read and write looked up in chunks
// of ops on every thread. The same buffers, kinds and errors on any count.
[[nodiscard]] absl::StatusOr<Problem> AnalyzeLiveness(
    const Graph& graph, Bytes default_alignment, std::vector<TensorKind>* kinds,
    IoPolicy io, const base::CancelToken* cancel,
    const base::Parallelism& parallel);

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_LIVENESS_H_
