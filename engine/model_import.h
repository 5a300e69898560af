// Model files (ONNX, TFLite) imported into the graph memplan plans. The CLI,
// the server (PlanRequest.model) and bench/ all import through ImportModel,
// so a model gives the same graph, and the same plan, everywhere.
//
//   formats::ModelOptions options;
//   options.dims["batch"] = 1;
//   absl::StatusOr<formats::ImportedModel> m = engine::ImportModel(
//       formats::Format::kOnnx, bytes, "model.onnx", options);
//   // m->graph: one tensor per value, one op per node, in execution order
#ifndef MEMPLAN_ENGINE_MODEL_IMPORT_H_
#define MEMPLAN_ENGINE_MODEL_IMPORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/cancel.h"
#include "formats/file_io.h"
#include "formats/format.h"
#include "formats/model.h"
#include "memplan/v1/memplan.pb.h"

namespace memplan::engine {

// Describes a model of `format` (kOnnx or kTflite) without planning it.
// Errors as ImportModel.
[[nodiscard]] absl::StatusOr<formats::ModelSummary> SummarizeModel(
    formats::Format format, absl::string_view bytes, absl::string_view name);

// A request's model: its name as messages quote it (escaped, cut; "model"
// when it has none), and its format (model.format, or sniffed from the
// bytes when empty; INVALID_ARGUMENT when not onnx or tflite).
std::string ModelFileName(const v1::ModelFile& model);
[[nodiscard]] absl::StatusOr<formats::Format> ModelFileFormat(
    const v1::ModelFile& model);

// Imports a model of `format` (kOnnx or kTflite). `name` (usually the path)
// appears in messages and names the graph when the model does not.
// INVALID_ARGUMENT naming what is wrong (not a model of that format,
// truncated, unknown types, sizes that cannot be known...); never throws.
[[nodiscard]] absl::StatusOr<formats::ImportedModel> ImportModel(
    formats::Format format, absl::string_view bytes, absl::string_view name,
    const formats::ModelOptions& options);

// The bytes of a model file as a request carries them (PlanRequest.model):
// an ONNX model lean (formats::LeanOnnxModel: the payload of every tensor
// too large for the import to read is dropped, so that the request is the
// size of the graph, whatever the weights), a TFLite model as it is. The
// CLI and the Python module send this in-process and to a server alike, so
// the plan is the same either way. Errors as LeanOnnxModel.
// A mapped file's pages are dropped as the walk passes them.
// A TFLite file without its identifier is refused at once, before any
// copy (INVALID_ARGUMENT naming `name`, as the import would).
[[nodiscard]] absl::StatusOr<std::string> RequestModelBytes(
    formats::Format format, const formats::FileBytes& file,
    absl::string_view name = "model");

// The model carried by a request (PlanRequest.model), format detected from
// its bytes when not given. DEADLINE_EXCEEDED when `cancel` (may be null)
// fires during the import (formats::ModelOptions::cancel).
[[nodiscard]] absl::StatusOr<formats::ImportedModel> ImportModelFile(
    const v1::ModelFile& model, const base::CancelToken* cancel = nullptr);

}  // namespace memplan::engine

#endif  // MEMPLAN_ENGINE_MODEL_IMPORT_H_
