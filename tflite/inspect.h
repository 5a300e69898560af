// `memplan inspect` for TFLite: what a model holds, without planning it.
//
//   absl::StatusOr<formats::ModelSummary> s =
//       formats::SummarizeTflite(bytes, "model.tflite");
//   // s->inputs, s->outputs, s->weight_bytes, s->op_types...
#ifndef MEMPLAN_TFLITE_INSPECT_H_
#define MEMPLAN_TFLITE_INSPECT_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "formats/model.h"

namespace memplan::formats {

// What a TFLite model holds (`memplan inspect`): main inputs and outputs
// with their dims ("batch" or "?" for -1), weight bytes (distinct buffers
// of constants), operator counts by type over all subgraphs. Errors as
// TfliteModel::Parse; dynamic dims are no error here.
[[nodiscard]] absl::StatusOr<ModelSummary> SummarizeTflite(
    absl::string_view bytes, absl::string_view name);

}  // namespace memplan::formats

#endif  // MEMPLAN_TFLITE_INSPECT_H_
