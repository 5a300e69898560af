// Shape evaluation for ONNX models beyond ONNX's own inference, in the
// manner of ONNX Runtime's symbolic shape inference: after ONNX's inference
// has run (onnx/import.cc), every node of the main graph and of the
// subgraphs that run is evaluated in order. Shapes are symbolic dims
// (onnx/dims.h); small integer tensors (the shape computations exporters
// emit: Shape -> Gather -> Concat -> Reshape, ConstantOfShape, Range...)
// are folded element by element, so that the sizes ONNX leaves unknown are
// computed. Ops without a rule here go to ONNX's inference function for
// that one node, fed with the shapes and values known so far.
//
//   absl::StatusOr<OnnxEvaluation> e =
//       EvaluateOnnxShapes(model, {{"batch", 1}}, {}, "model.onnx");
//   const OnnxValue& v = e->values[e->main->outputs[0]];
//   e->table.ToString(v.dims[1]);  // "seq" when seq has no value
//
// If nodes whose condition is known (computed from shapes) run one branch,
// evaluated alone; otherwise both are. Loop and Scan bodies are evaluated
// once with the shapes of their first iteration. A call of one of the
// model's own functions runs its body in its place, as a subgraph of its
// own (OnnxGraphRun::function) for each call, its values planned, as ONNX
// Runtime runs a function it inlined.
//
// Only a size that depends on tensor data stays unknown: such a dim is an
// unknown atom naming the node that makes it. Errors (INVALID_ARGUMENT)
// name the node: nodes out of order, a value produced twice, an impossible
// Reshape, arithmetic overflowing 64 bits, a value over the size limit (so
// a hostile Range, ConstantOfShape or Reshape is an error, never an
// allocation), subgraphs nested too deep.
#ifndef MEMPLAN_ONNX_SHAPES_H_
#define MEMPLAN_ONNX_SHAPES_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/cancel.h"
#include "google/protobuf/arena.h"
#include "onnx/dims.h"
#include "onnx/onnx_pb.h"

namespace memplan::formats {

// Tensors with more elements than this have their elements left unknown.
inline constexpr int64_t kMaxOnnxContent = 4096;
// A value larger than this (1 TiB) is an error naming its node.
inline constexpr int64_t kMaxOnnxValueBytes = int64_t{1} << 40;
// Subgraphs and calls of a model's functions nested deeper than this are
// an error.
inline constexpr int kMaxOnnxNesting = 16;
// Calls of a model's functions: at most this many body nodes evaluated in
// all, and this many bytes of bodies (each call counts the text of its
// function's nodes, or the whole function when it takes the call's
// attributes and is copied: a function calling another twice, nested,
// doubles the work at each level).
inline constexpr int64_t kMaxOnnxFunctionNodes = 250000;
inline constexpr int64_t kMaxOnnxFunctionBytes = int64_t{64} << 20;
// A shape computed with more dims than this is an error naming its node.
inline constexpr int64_t kMaxOnnxRank = 64;

// The elements of a small tensor, row-major.
struct OnnxContent {
  bool real = false;          // floating-point elements (else integers)
  std::vector<SymDim> ints;   // integer and bool elements (when !real)
  std::vector<double> reals;  // floating-point elements (when real)
  size_t size() const { return real ? reals.size() : ints.size(); }
};

// What the evaluation knows of one value.
struct OnnxValue {
  std::string name;                    // as in the model
  int32_t elem_type = 0;               // TensorProto.DataType; 0: unknown
  bool tensor = true;                  // false: a sequence, map, optional...
  bool has_shape = false;              // whether the rank (and `dims`) is known
  std::vector<SymDim> dims;            // one per axis when has_shape
  std::optional<OnnxContent> content;  // its elements, when known and small
  bool constant = false;   // data in the model: an initializer, a Constant
                           // node's output, or folded from those alone
  bool folded = false;     // a constant folded from constants: its bytes
                           // are not stored in the model
  bool from_data = false;  // its elements depend on tensor data (inputs)
  std::set<AtomId> taint;  // when the elements are unknown and not from
                           // data: the dims they depend on
  // The node making it, as its label (kept in OnnxEvaluation::labels; ""
  // for graph inputs, initializers and body inputs).
  absl::string_view origin;
  std::string why_unknown;  // when the type or rank is unknown: why
};

struct OnnxGraphRun;

// A subgraph that a node runs.
struct OnnxBodyRun {
  // "then_branch", "else_branch", "body"; a call's: the function's name
  std::string attribute;
  std::unique_ptr<OnnxGraphRun> run;  // the subgraph as evaluated
};

// One node of a graph run.
struct OnnxNodeRun {
  int index = 0;  // in GraphProto.node
  // "node 'n' (Op, #3)" for messages, kept in OnnxEvaluation::labels.
  absl::string_view label;
  // Value ids, -1 for an omitted one; most nodes have few (kept in place:
  // no allocation for each of a model's nodes).
  absl::InlinedVector<int, 3> inputs;
  absl::InlinedVector<int, 1> outputs;
  std::vector<int> captured;        // outer values its subgraphs read
  std::vector<OnnxBodyRun> bodies;  // subgraphs run, in execution order
  int64_t skipped_values = 0;       // values of If branches that never run
  int carried = 0;  // Loop, Scan: leading outputs that are carried values
                    // (Scan: states, also its leading inputs); the rest
                    // are scan outputs
};

// A graph as evaluated: the main graph, or a subgraph as one node runs it.
struct OnnxGraphRun {
  const ::ONNX_NAMESPACE::GraphProto* graph = nullptr;  // in the model
  std::string path;         // "" for the main graph, else "If_0/else_branch"
  std::vector<int> inputs;  // formal inputs (not initializers)
  std::vector<int> initializers;   // its initializers
  std::vector<OnnxNodeRun> nodes;  // in order
  std::vector<int> outputs;        // its outputs
  std::vector<int> captured;       // values of enclosing graphs it reads
  absl::flat_hash_map<std::string, int> scope;  // names defined here
  const OnnxGraphRun* parent = nullptr;         // the enclosing graph, if any
  // The body of a call of one of the model's functions: it sees only what
  // the call passes in (its formal inputs name the caller's values; those
  // the call omits are in `omitted`), not the enclosing graphs.
  bool function = false;
  absl::flat_hash_set<std::string> omitted;
};

// The result of EvaluateOnnxShapes.
struct OnnxEvaluation {
  DimTable table;  // the atoms of every dim
  // The characters of every node's label, once: nodes and the values they
  // make hold views into it. An arena (protobuf's): the labels of a large
  // model go in a few hundred blocks, not one allocation each, so that an
  // import stopped by its deadline frees them at once. Created by the
  // evaluation; its blocks stay where they are when the evaluation moves.
  std::unique_ptr<google::protobuf::Arena> labels;
  std::deque<OnnxValue> values;        // every value evaluated, by id
  std::unique_ptr<OnnxGraphRun> main;  // the main graph
  std::vector<std::string> warnings;   // e.g. an If whose branches disagree
  // The bodies of the model's functions as graphs (OnnxGraphRun::graph of
  // a call's body): one per function, or one per call for a function
  // whose nodes take attributes from the call (ref_attr_name).
  std::deque<::ONNX_NAMESPACE::GraphProto> function_graphs;
};

// How to evaluate.
struct OnnxEvalOptions {
  // Named dims with values; the others stay symbols. Default: none.
  std::map<std::string, int64_t> dims;
  // Whole shapes of values by name (--input), in any graph. Default: none.
  std::map<std::string, std::vector<int64_t>> shapes;
  // Stops the evaluation (DEADLINE_EXCEEDED) once it fires. Default: null.
  const base::CancelToken* cancel = nullptr;
};

// Evaluates `model`, on which ONNX's shape inference has run (its
// value_info is used where no rule knows better). `name` is for messages.
// A dim of a graph input with neither value nor name is an unknown atom
// (the importer gives such dims values before).
[[nodiscard]] absl::StatusOr<OnnxEvaluation> EvaluateOnnxShapes(
    const ::ONNX_NAMESPACE::ModelProto& model, const OnnxEvalOptions& options,
    absl::string_view name);

// A node as messages name it: "node 'n' (Op, #3)" or "node #3 (Op)", with
// " in <path>" for a node of a subgraph.
std::string OnnxNodeLabel(const ::ONNX_NAMESPACE::NodeProto& node, int index,
                          absl::string_view path);

// Whether `run` is a function call's body or a graph inside one: its
// labels, paths and names are made again at every call, so they are cut to
// kMaxOnnxFunctionNameBytes (labels to twice that).
bool OnnxRunInFunction(const OnnxGraphRun& run);
// Whether `nr` calls one of the model's functions (its one body is the
// function's: OnnxGraphRun::function).
bool OnnxNodeIsCall(const OnnxNodeRun& nr);
inline constexpr size_t kMaxOnnxFunctionNameBytes = 256;

// The path of subgraph `attribute` of node #`index` inside the graph at
// `parent` ("" for the main graph): "If_0/then_branch".
std::string OnnxSubgraphPath(absl::string_view parent,
                             const ::ONNX_NAMESPACE::NodeProto& node, int index,
                             absl::string_view attribute);

// Element bits of ONNX type `elem_type` (TensorProto.DataType); 0 for
// strings and unknown types.
int OnnxElementBits(int32_t elem_type);

// "float32", "int64", "bool"...; "type N" for a number ONNX did not have.
std::string OnnxElementTypeName(int32_t elem_type);

// The ops whose inference in ONNX 1.12 (opsets up to 17) gives wrong shapes
// at `opset`, because their definition changed since (e.g. ReduceMean-18
// takes its axes as an input): the importer hides them from ONNX.
bool OnnxOpChangedAfterKnownOpsets(absl::string_view op_type, int opset);

// The newest opset of the default domain this ONNX build knows (17).
int OnnxNewestKnownOpset();

}  // namespace memplan::formats

#endif  // MEMPLAN_ONNX_SHAPES_H_
