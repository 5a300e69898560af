// Importing ONNX models: reads a ModelProto (weights in external data files
// are never read: only shapes and element types are needed), runs ONNX's own
// shape inference, and builds the memplan.v1.Graph that memplan plans.
//
//   client::OnnxImportOptions options;
//   options.dims["batch"] = 1;  // a symbolic dim (dim_param)
//   absl::StatusOr<client::OnnxImport> in =
//       client::ImportOnnxFile("model.onnx", options);
//   // in->graph: one tensor per value, one op per node, in the file's order
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
// type, such as one from an unknown domain, nodes out of order, unknown sizes);
// a missing file is NOT_FOUND. Nothing ONNX throws crosses this interface.
#ifndef MEMPLAN_CLIENT_ONNX_IMPORT_H_
#define MEMPLAN_CLIENT_ONNX_IMPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/input.h"
#include "memplan/v1/memplan.pb.h"

namespace memplan::client {

// What the model file does not say: values of its dynamic dims.
struct OnnxImportOptions {
  // Symbolic dim (dim_param) -> value, e.g. {"batch", 1}. Default: empty.
  // REQUIRES values >= 0.
  std::map<std::string, int64_t> dims;
  // Value name -> whole shape, e.g. {"x", {1, 3, 224, 224}}; {} is a scalar.
  // For graph inputs, and for values shape inference leaves unsized.
  // Default: empty. REQUIRES dims >= 0.
  std::map<std::string, std::vector<int64_t>> shapes;
};

// Counts describing what was imported, and what was not planned.
struct OnnxImportStats {
  int64_t tensors = 0;             // tensors in the graph (planned)
  int64_t ops = 0;                 // nodes of the main graph
  int64_t weights = 0;             // initializers among the tensors
  int64_t control_flow_nodes = 0;  // nodes with subgraphs (If, Loop, Scan)
  int64_t subgraph_values = 0;     // values inside subgraphs (not planned)
  int64_t empty_values = 0;        // values with zero elements (not planned)
};

// The result of an import.
struct OnnxImport {
  v1::Graph graph;                    // what memplan plans
  std::vector<std::string> warnings;  // e.g. an unnamed dim set to 1
  OnnxImportStats stats;              // what was and was not planned
};

// Imports a serialized ModelProto. `name` (usually the path) appears in
// messages and names the graph when the model does not.
[[nodiscard]] absl::StatusOr<OnnxImport> ImportOnnx(
    absl::string_view bytes, absl::string_view name,
    const OnnxImportOptions& options);

// Reads `path` ("-" is standard input) and imports it.
[[nodiscard]] absl::StatusOr<OnnxImport> ImportOnnxFile(
    const std::string& path, const OnnxImportOptions& options);

// Bytes of a tensor of ONNX element type `elem_type` (TensorProto.DataType)
// and shape `dims`: 4-bit types are packed, rounded up. INVALID_ARGUMENT,
// naming `what`, for strings, unknown types, negative dims and overflow.
[[nodiscard]] absl::StatusOr<int64_t> OnnxTensorBytes(
    int32_t elem_type, const std::vector<int64_t>& dims,
    absl::string_view what);

// Adds "NAME=VALUE[,NAME=VALUE...]" (the --dim flag) to options->dims.
[[nodiscard]] absl::Status ParseDimFlag(absl::string_view text,
                                        OnnxImportOptions* options);

// Adds "NAME=1x3x224x224[,NAME=...]" (the --input flag; "NAME=" is a
// scalar) to options->shapes. The last '=' separates name and shape.
[[nodiscard]] absl::Status ParseInputFlag(absl::string_view text,
                                          OnnxImportOptions* options);

// True when `path` should be read as ONNX: `format` is "onnx", or `format`
// is empty and the name ends in ".onnx".
bool IsOnnxInput(absl::string_view path, absl::string_view format);

// For the CLI: imports `path` with the --dim and --input lists into an Input
// holding a PlanRequest; warnings are appended to `warnings`.
[[nodiscard]] absl::StatusOr<Input> ReadOnnxInput(
    const std::string& path, const std::vector<std::string>& dim_flags,
    const std::vector<std::string>& input_flags,
    std::vector<std::string>* warnings);

// Writes `request` to `path` as protobuf JSON (the --dump_graph flag), in a
// form `memplan plan` reads back.
[[nodiscard]] absl::Status WriteRequestJson(const std::string& path,
                                            const v1::PlanRequest& request);

}  // namespace memplan::client

#endif  // MEMPLAN_CLIENT_ONNX_IMPORT_H_
