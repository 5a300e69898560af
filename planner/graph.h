// A computation graph as the planner sees it: named tensors with sizes, and
// ops in execution order that read and write them by name. The liveness
// stage (liveness.h) validates it and turns it into a Problem.
//
//   planner::Graph g;
//   g.tensors = {{"x", 1024}, {"w", 512}, {"y", 1024}};
//   g.ops = {{"matmul", {"x", "w"}, {"y"}}};
//   g.inputs = {"x"};
//   g.outputs = {"y"};  // "w" has no producer and is no input: a weight
#ifndef MEMPLAN_PLANNER_GRAPH_H_
#define MEMPLAN_PLANNER_GRAPH_H_

#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "planner/problem.h"

namespace memplan::planner {

// How a runtime treats a tensor; liveness (liveness.h) decides it.
enum class TensorKind {
  kActivation,  // produced and consumed during a run: what an arena is for
  kInput,       // a graph input, written by the caller before the run
  kOutput,      // a graph output, read by the caller after the run
  kWeight,      // data stored in the model (weights, constants)
  kVariable,    // state kept from one run to the next
  // Memory an operator uses while it runs, that nothing writes before it
  // (TFLite: an Ethos-U operator's scratch tensors); set by the model
  // import, planned as an activation.
  kScratch,
};

// "activation", "input", "output", "weight", "variable" or "scratch": the
// names the response and the reports use.
absl::string_view TensorKindName(TensorKind kind);

struct Tensor {
  std::string name;      // unique, non-empty
  Bytes size_bytes = 0;  // REQUIRES > 0
  Bytes alignment = 0;   // 0: the plan's default alignment
  // Its data is stored in the model (a weight or constant, e.g. an ONNX
  // initializer or a TFLite tensor with a data buffer). Default false: a
  // tensor no op produces that is not a graph input is a weight anyway.
  bool constant = false;
  // State kept across runs (a TFLite variable tensor): live for the whole
  // run and never shared, like graph inputs. Default false.
  bool variable = false;
  // With `constant`: computed from constants when the model loads (ONNX
  // constant folding), its bytes not stored in the model: a weight that
  // PlanResult::weights_bytes leaves out. Default false.
  bool folded = false;
};

struct Op {
  std::string name;  // unique, non-empty
  // Inline room for the usual few names: a request of a few hundred ops
  // reads its graph without an allocation per list.
  absl::InlinedVector<std::string, 3> inputs;   // tensor names read
  absl::InlinedVector<std::string, 2> outputs;  // tensor names written
  // The op may write an output into the memory of an input it reads for
  // the last time (an elementwise op, say). Default false.
  bool in_place = false;
};

struct Graph {
  std::string name;  // for messages only
  std::vector<Tensor> tensors;
  std::vector<Op> ops;               // in execution order
  std::vector<std::string> inputs;   // graph inputs (persistent)
  std::vector<std::string> outputs;  // graph outputs (persistent)
};

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_GRAPH_H_
