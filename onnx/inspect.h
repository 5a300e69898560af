// `memplan inspect` for ONNX: what a model holds, without planning it.
//
//   absl::StatusOr<formats::ModelSummary> s =
//       formats::SummarizeOnnx(bytes, "model.onnx");
//   // s->inputs (declared shapes), s->outputs (evaluated shapes),
//   // s->symbolic_dims (what --dim can set), s->weight_bytes, s->op_types...
#ifndef MEMPLAN_ONNX_INSPECT_H_
#define MEMPLAN_ONNX_INSPECT_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "formats/model.h"

namespace memplan::formats {

// Describes a serialized ModelProto without planning it (`memplan
// inspect`): graph inputs with their declared shapes, outputs with the
// shapes the evaluation gives (symbolic dims as expressions, "?" where
// unknown), the named dims --dim can set, the bytes of initializers and
// Constant nodes, op counts over every graph. Errors as ImportOnnx's
// parsing (onnx/import.h); a model the evaluation cannot size is no error
// here: its outputs keep their declared shapes.
[[nodiscard]] absl::StatusOr<ModelSummary> SummarizeOnnx(
    absl::string_view bytes, absl::string_view name);

}  // namespace memplan::formats

#endif  // MEMPLAN_ONNX_INSPECT_H_
