// Importing ONNX models: reads a ModelProto (weights in external data files
// are never read: only shapes and element types are needed), runs ONNX's
// own shape inference, evaluates what it leaves unknown (onnx/shapes.h),
// and builds the memplan.v1.Graph that memplan plans.
//
//   formats::ModelOptions options;
//   options.dims["batch"] = 1;  // a symbolic dim (dim_param)
//   absl::StatusOr<formats::ImportedModel> in =
//       formats::ImportOnnx(bytes, "model.onnx", options);
//   // in->graph: one tensor per value, one op per node, in execution order
//
// Callers usually go through ImportModel (engine/model_import.h); the
// `inspect` summary is onnx/inspect.h.
//
// What is planned:
// - One tensor per value: graph inputs, node outputs, and the values of
//   the subgraphs that run (If branches, Loop and Scan bodies). Its size is
//   element size x element count, with 4-bit types (int4, uint4,
//   float4e2m1) packed two to a byte, rounded up. Values with a zero dim
//   hold no memory and are left out (stats count them).
// - Weights: initializers (also those an older exporter lists among the
//   graph inputs too, IR < 4: a weight of the initializer's type and dims,
//   not an input), Constant nodes' outputs and values folded from those
//   alone (every input constant, a deterministic op) are tensors with
//   `constant` set: the planner keeps them out of the arena unless
//   options.weights is "arena", and reports their bytes apart. Folded
//   values also have `folded` set: the file does not store them, so
//   weights_bytes leaves them out. Values computed from shapes (Shape ->
//   Gather...) are not constants: a runtime computes them at run time.
// - One op per node, in the order ONNX Runtime runs them: the file's order
//   when it is topological, else sorted topologically as ONNX Runtime sorts
//   (stably: a node keeps its place among the others wherever what it
//   reads allows; in every subgraph too; numbers in unnamed nodes' op
//   names are their places after the sort). Nodes in a cycle are an error
//   naming some of them.
// - Control flow is flattened into the one op list (the planner needs no
//   new concept). For a node running subgraphs, per subgraph that runs:
//     "<node>/<branch>/enter" reads what the node passes in (its inputs and
//       the outer values the subgraph captures) and writes the subgraph's
//       formal inputs (Loop: iteration number, condition, carried values;
//       Scan: states and per-iteration slices) and, for Loop and Scan, the
//       scan outputs, which the runtime fills one slice per iteration;
//     the subgraph's own ops, nested control flow flattened the same way;
//     "<node>/<branch>/exit" reads the subgraph's outputs, every outer value
//       it captured (so they stay alive across the node), and for Loop and
//       Scan the formal inputs, scan inputs and scan outputs (so carried
//       values live across the whole body, as the loop carries them), and
//       writes the node's outputs (the last If branch's exit; the first
//       branch's exit writes nothing).
//   An If whose condition is known once shapes are known runs one branch:
//   only that branch is planned (the other's values are counted in the
//   warnings). Otherwise both branches are planned one after the other, so
//   their values may share memory; outputs take the larger branch's shape.
//   Loop and Scan bodies are planned as one iteration; a scan output is
//   trip count x the per-iteration value (a Loop's trip count from its M
//   input). Subgraph values whose names clash are prefixed with the path
//   "<node>/<branch>/".
//
// Dynamic dims: `dims` sets symbolic dims (dim_param) of the main graph;
// other names are an error listing the model's names. `shapes` sets the
// whole shape of a graph input (or of any value the evaluation cannot size,
// such as a Loop's scan output without a trip count); names the model does
// not have are an error listing its graph inputs. A dim of a graph input
// with neither value nor name becomes 1, with a warning. A value whose size
// is still unknown is an error listing such values by name with the op that
// makes them, and every symbolic dim that lacks a value, at once; a value is
// never sized 0.
//
// Opsets newer than ONNX 1.12 knows (18 and up): ops whose shapes changed
// since opset 17 (Reduce* and Pad with axes inputs, Split's num_outputs,
// Resize, LpPool, AveragePool...) are sized by memplan's own rules, never by
// ONNX's older schemas; new simple ops (elementwise, normalizations, known
// ops renamed such as Gelu) too; any other is an error naming the op and
// opset.
//
// Errors are INVALID_ARGUMENT naming the node or value (not an ONNX file,
// truncated file, string tensors, an op whose outputs cannot be typed, such
// as one from an unknown domain, a cycle, unknown sizes, a value
// over 1 TiB such as a hostile Range or ConstantOfShape, subgraphs nested
// more than 16 deep). Before ONNX's inference sees the model, tensor data
// is checked against its dims and required attributes against the op's
// schema (ONNX 1.12 reads both unchecked and crashes on hostile models):
// mismatches are errors naming the node or tensor. Nothing ONNX throws
// crosses this interface.
#ifndef MEMPLAN_ONNX_IMPORT_H_
#define MEMPLAN_ONNX_IMPORT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "formats/model.h"

namespace memplan::formats {

// Imports a serialized ModelProto. `name` (usually the path) appears in
// messages and names the graph when the model does not.
[[nodiscard]] absl::StatusOr<ImportedModel> ImportOnnx(
    absl::string_view bytes, absl::string_view name,
    const ModelOptions& options);

// Bytes of a tensor of ONNX element type `elem_type` (TensorProto.DataType)
// and shape `dims`: 4-bit types are packed, rounded up. INVALID_ARGUMENT,
// naming `what`, for strings, unknown types, negative dims and overflow.
[[nodiscard]] absl::StatusOr<int64_t> OnnxTensorBytes(
    int32_t elem_type, const std::vector<int64_t>& dims,
    absl::string_view what);

}  // namespace memplan::formats

#endif  // MEMPLAN_ONNX_IMPORT_H_
