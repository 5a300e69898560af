#include "engine/model_import.h"

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

absl::StatusOr<ImportedModel> ImportModel(Format format,
                                          absl::string_view bytes,
                                          absl::string_view name,
                                          const ModelOptions& options) {
  switch (format) {
    case Format::kOnnx:
      return ImportOnnx(bytes, name, options);
    case Format::kTflite:
      return ImportTflite(bytes, name, options);
    case Format::kJson:
    case Format::kCsv:
      break;
  }
  return Invalid(name, ": ", FormatName(format), " is not a model format");
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
    return formats::LeanOnnxModel(
        file.view(), [&file](absl::string_view part) { file.Release(part); });
  }
  // A file that is no TFLite model is refused before it is copied (a 1 GiB
  // file took 2 GiB and 5 s to be told so): the parser's own message.
  const absl::string_view view = file.view();
  if (view.size() < 8 || view.substr(4, 4) != "TFL3") {
    return formats::TfliteModel::Parse(file.view().substr(0, 8), name).status();
  }
  return std::string(file.view());
}

}  // namespace memplan::engine
