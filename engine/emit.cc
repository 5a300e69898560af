#include "engine/emit.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "formats/format.h"
#include "proto/convert.h"

namespace memplan::engine {

const std::vector<std::string>& EmitFormats() {
  static const auto* formats =
      new std::vector<std::string>{"tflite", "c_header", "svg", "html"};
  return *formats;
}

absl::Status CheckEmit(const v1::PlanRequest& request) {
  const std::vector<std::string>& known = EmitFormats();
  for (const std::string& name : request.emit()) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("emit: unknown format '", api::Clip(name),
                       "'; known: ", absl::StrJoin(known, ", ")));
    }
    if (name == "tflite" &&
        !(request.has_model() && (request.model().format() == "tflite" ||
                                  request.model().format().empty()))) {
      return absl::InvalidArgumentError(
          "emit: a planned .tflite needs a TFLite model as input");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Emit(absl::string_view format,
                                 const PlanOutcome& outcome,
                                 const v1::PlanRequest& request) {
  (void)outcome;
  (void)request;
  return absl::UnimplementedError(
      absl::StrCat("emit: '", format, "' is not built yet"));
}

}  // namespace memplan::engine
