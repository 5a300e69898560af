#include "engine/emit.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "formats/c_header.h"
#include "formats/format.h"
#include "pictures/plan_html.h"
#include "pictures/plan_svg.h"
#include "proto/convert.h"
#include "tflite/writer.h"

namespace memplan::engine {

const std::vector<std::string>& EmitFormats() {
  static const auto* formats =
      new std::vector<std::string>{"tflite", "c_header", "svg", "html"};
  return *formats;
}

std::string CanonicalEmitFormat(absl::string_view name) {
  std::string canonical(name);
  std::replace(canonical.begin(), canonical.end(), '-', '_');
  return canonical;
}

absl::Status CheckEmit(const v1::PlanRequest& request) {
  const std::vector<std::string>& known = EmitFormats();
  if (request.emit_size() > kMaxEmit) {
    return absl::InvalidArgumentError(
        absl::StrCat("emit: ", request.emit_size(), " entries; at most ",
                     kMaxEmit, " (each format once)"));
  }
  std::vector<std::string> seen;
  for (const std::string& asked : request.emit()) {
    const std::string name = CanonicalEmitFormat(asked);
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("emit: unknown format '", api::Clip(name),
                       "'; known: ", absl::StrJoin(known, ", ")));
    }
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("emit: '", name,
                       "' is asked for more than once; ask for each "
                       "format once"));
    }
    seen.push_back(name);
    if (name == "tflite" &&
        !(request.has_model() && (request.model().format() == "tflite" ||
                                  request.model().format().empty()))) {
      return absl::InvalidArgumentError(
          "emit: a planned .tflite needs a TFLite model as input");
    }
  }
  if (!request.c_header_id().empty() &&
      !formats::IsCHeaderId(request.c_header_id())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "c_header_id '", api::Clip(request.c_header_id()),
        "' is not a C identifier part: letters, digits and '_', starting "
        "with a letter, at most 64 characters"));
  }
  return absl::OkStatus();
}

namespace {

// The pictures' title: the model's file name or the graph's name (both
// cleaned), else what was planned.
formats::PictureOptions PictureFor(const PlanOutcome& outcome,
                                   const v1::PlanRequest& request,
                                   const base::CancelToken* cancel) {
  formats::PictureOptions picture;
  picture.cancel = cancel;
  const std::string& name = outcome.input_name;
  picture.title =
      request.has_model() ? name.substr(name.find_last_of('/') + 1) : name;
  if (picture.title.empty()) {
    picture.title =
        absl::StrCat(outcome.result.problem.buffers.size(),
                     request.buffers_size() > 0 ? " buffers" : " tensors");
  }
  return picture;
}

// The file of `format` (canonical), `cancel` passed to the emitters that
// poll it.
absl::StatusOr<std::string> EmitFile(const std::string& format,
                                     const PlanOutcome& outcome,
                                     const v1::PlanRequest& request,
                                     const base::CancelToken* cancel) {
  const formats::ImportedModel* model =
      outcome.model.has_value() ? &*outcome.model : nullptr;
  if (format == "tflite") {
    if (model == nullptr || model->format != formats::Format::kTflite) {
      return absl::InvalidArgumentError(
          "emit: a planned .tflite needs a TFLite model as input");
    }
    return formats::EmitPlannedTflite(*model, outcome.result, cancel);
  }
  if (format == "c_header") {
    if (model != nullptr && !model->tflite_kept.empty()) {
      // Its TFLite Micro section lists the graph's tensors only.
      return absl::FailedPreconditionError(absl::StrCat(
          "emit c_header: ", model->tflite_kept.size(),
          " tensors of this model keep the offsets of the offline plan it "
          "carries (an Ethos-U model's), which the header cannot list yet; "
          "emit tflite instead"));
    }
    formats::CHeaderInput header{
        outcome.input_name.empty() ? "plan" : outcome.input_name,
        &outcome.result, &outcome.options, model};
    header.id = request.c_header_id();
    header.content = request.model().data();
    header.cancel = cancel;
    header.tflm_arena_bytes = outcome.tflm_runtime_bytes;
    // A plan `emit tflite` refuses gets no TFLite Micro section.
    header.tflm_refusal = outcome.tflm_refusal;
    return formats::EmitCHeader(header);
  }
  if (format == "svg") {
    return formats::PlanSvg(outcome.result, outcome.options,
                            PictureFor(outcome, request, cancel));
  }
  if (format == "html") {
    return formats::PlanHtml(outcome.result, outcome.options,
                             PictureFor(outcome, request, cancel));
  }
  return absl::UnimplementedError(
      absl::StrCat("emit: '", format, "' is not built yet"));
}

}  // namespace

absl::StatusOr<std::string> Emit(absl::string_view asked,
                                 const PlanOutcome& outcome,
                                 const v1::PlanRequest& request,
                                 const base::CancelToken* cancel) {
  const std::string format = CanonicalEmitFormat(asked);
  auto cancelled = [&] {
    return absl::DeadlineExceededError(
        absl::StrCat("emit ", format, " cancelled"));
  };
  if (cancel != nullptr && cancel->Cancelled()) return cancelled();
  absl::StatusOr<std::string> file = EmitFile(format, outcome, request, cancel);
  if (cancel != nullptr && cancel->Cancelled()) return cancelled();
  return file;
}

}  // namespace memplan::engine
