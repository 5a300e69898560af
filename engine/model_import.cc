#include "engine/model_import.h"

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "onnx/import.h"
#include "onnx/inspect.h"
#include "onnx/lean.h"
#include "proto/convert.h"
#include "tflite/inspect.h"
#include "tflite/model.h"
#include "tflite/reader.h"

namespace memplan::engine {

using formats::Format;
using formats::FormatFromName;
using formats::FormatName;
using formats::ImportedModel;
using formats::ImportOnnx;
using formats::ImportTflite;
using formats::IsModel;
using formats::ModelOptions;
using formats::ModelSummary;
using formats::SniffFormat;
using formats::SummarizeOnnx;
using formats::SummarizeTflite;

// A model refused as not of `format`, whose bytes look like another
// model format (a .tflite file named .onnx): the refusal, with a hint.
absl::Status WithFormatHint(absl::Status status, Format format,
                            absl::string_view bytes) {
  if (!absl::IsInvalidArgument(status)) return status;
  absl::StatusOr<Format> looks = SniffFormat(bytes, "");
  if (!looks.ok() || *looks == format || !IsModel(*looks)) return status;
  const absl::string_view other = FormatName(*looks);
  return absl::InvalidArgumentError(absl::StrCat(
      status.message(), "; its bytes look like ",
      *looks == Format::kTflite ? "a TFLite" : "an ONNX", " model: read it as ",
      other, " (the CLI's --input_format ", other, " or a .", other,
      " file name; a request's model.format)"));
}

absl::StatusOr<ImportedModel> ImportModel(Format format,
                                          absl::string_view bytes,
                                          absl::string_view name,
                                          const ModelOptions& options) {
  absl::StatusOr<ImportedModel> model;
  switch (format) {
    case Format::kOnnx:
      model = ImportOnnx(bytes, name, options);
      break;
    case Format::kTflite:
      model = ImportTflite(bytes, name, options);
      break;
    case Format::kJson:
    case Format::kCsv:
      return Invalid(name, ": ", FormatName(format), " is not a model format");
  }
  if (!model.ok()) return WithFormatHint(model.status(), format, bytes);
  return model;
}

absl::StatusOr<ModelSummary> SummarizeModel(Format format,
                                            absl::string_view bytes,
                                            absl::string_view name) {
  if (format == Format::kTflite) return SummarizeTflite(bytes, name);
  if (format == Format::kOnnx) return SummarizeOnnx(bytes, name);
  return Invalid(name, ": ", FormatName(format), " is not a model format");
}

std::string ModelFileName(const v1::ModelFile& model) {
  return model.name().empty() ? "model" : api::Clip(model.name(), 256);
}

absl::StatusOr<Format> ModelFileFormat(const v1::ModelFile& model) {
  absl::StatusOr<Format> format =
      model.format().empty() ? SniffFormat(model.data(), ModelFileName(model))
                             : FormatFromName(model.format());
  if (!format.ok()) return format.status();
  if (!IsModel(*format)) {
    return Invalid(ModelFileName(model),
                   ": model.format must be onnx or tflite, not ",
                   FormatName(*format));
  }
  return format;
}

absl::StatusOr<ImportedModel> ImportModelFile(const v1::ModelFile& model,
                                              const base::CancelToken* cancel) {
  // The name messages start with: escaped and cut (api::Clip), so that a
  // request's name cannot forge a line of them.
  const std::string name = ModelFileName(model);
  absl::StatusOr<Format> format = ModelFileFormat(model);
  if (!format.ok()) return format.status();
  ModelOptions options;
  options.cancel = cancel;
  for (const auto& [dim, value] : model.dims()) {
    if (value < 0) {
      return Invalid("model.dims['", api::Clip(dim), "'] is negative");
    }
    options.dims[dim] = value;
  }
  for (const auto& [value, shape] : model.shapes()) {
    for (int64_t d : shape.dims()) {
      if (d < 0)
        return Invalid("model.shapes['", api::Clip(value),
                       "'] has a negative dim");
    }
    options.shapes[value] = {shape.dims().begin(), shape.dims().end()};
  }
  return ImportModel(*format, model.data(), name, options);
}

absl::StatusOr<std::string> RequestModelBytes(Format format,
                                              const formats::FileBytes& file,
                                              absl::string_view name) {
  if (format == Format::kOnnx) {
    absl::StatusOr<std::string> lean = formats::LeanOnnxModel(
        file.view(), [&file](absl::string_view part) { file.Release(part); });
    if (!lean.ok()) return WithFormatHint(lean.status(), format, file.view());
    return lean;
  }
  // A file that is no TFLite model is refused before it is copied (a 1 GiB
  // file took 2 GiB and 5 s to be told so): the parser's own message.
  const absl::string_view view = file.view();
  if (view.size() < 8 || view.substr(4, 4) != "TFL3") {
    return WithFormatHint(
        formats::TfliteModel::Parse(file.view().substr(0, 8), name).status(),
        format, view);
  }
  return std::string(file.view());
}

}  // namespace memplan::engine
