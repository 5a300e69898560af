// Importing ONNX models: reads a ModelProto (weights in external data files
// are never read: only shapes and element types are needed), runs ONNX's own
// shape inference, and builds the memplan.v1.Graph that memplan plans.
//
//   formats::ModelOptions options;
//   options.dims["batch"] = 1;  // a symbolic dim (dim_param)
//   absl::StatusOr<formats::ImportedModel> in =
//       formats::ImportOnnx(bytes, "model.onnx", options);
//   // in->graph: one tensor per value, one op per node, in the file's order
//
// Callers usually go through ImportModel (model.h).
//
// What is planned:
// - One tensor per value of the main graph: graph inputs, initializers
//   (weights: persistent, sized from their dims, never their data) and every
//   named node output. Its size is element size x element count, with 4-bit
//   types (int4, uint4, float4e2m1) packed two to a byte, rounded up.
//   Values with a zero dim hold no memory and are left out (stats count them).
// - One op per node, in the file's order, which must be topological (checked:
//   the error names the node).
// - Control flow (If, Loop, Scan, any node with a graph attribute): the node
//   is one op. Every outer value that its subgraphs read counts as an input
//   of that op, so it stays alive across the whole node. Its outputs are sized
//   from the inferred shapes; for an If whose branches disagree, the larger
//   branch's size is used. Values inside subgraphs are NOT planned (the
//   runtime allocates them while the node runs; stats count them), so the
//   arena does not cover a subgraph's own working memory.
//
// Dynamic dims: `dims` sets symbolic dims (dim_param) anywhere in the main
// graph; `shapes` sets the whole shape of a graph input (or of any value that
// shape inference cannot size, such as a Loop's scan output). A dim of a graph
// input with neither value nor name becomes 1, with a warning. A value whose
// size is still unknown after inference is an error listing it by name; it
// is never sized 0.
//
// Errors are INVALID_ARGUMENT naming the node or value (not an ONNX file,
// truncated file, string tensors, an op whose outputs shape inference cannot
// type, such as one from an unknown domain, nodes out of order, unknown
// sizes). Nothing ONNX throws crosses this interface.
#ifndef MEMPLAN_FORMATS_ONNX_IMPORT_H_
#define MEMPLAN_FORMATS_ONNX_IMPORT_H_

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

#endif  // MEMPLAN_FORMATS_ONNX_IMPORT_H_
