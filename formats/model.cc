#include "formats/model.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "formats/onnx_import.h"
#include "formats/tflite_reader.h"
#include "planner/status.h"

namespace memplan::formats {
namespace {

// Splits "a=b,c=d" into (name, value) pairs at the last '=' of each item.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> SplitPairs(
    absl::string_view text, absl::string_view flag, absl::string_view form) {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    item = absl::StripAsciiWhitespace(item);
    const size_t eq = item.rfind('=');
    if (eq == absl::string_view::npos || eq == 0) {
      return Invalid("--", flag, " '", item.substr(0, 64), "': expected ",
                     form);
    }
    pairs.emplace_back(std::string(item.substr(0, eq)),
                       std::string(item.substr(eq + 1)));
  }
  return pairs;
}

}  // namespace

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

absl::StatusOr<ImportedModel> ImportModelFile(const v1::ModelFile& model) {
  const std::string name = model.name().empty() ? "model" : model.name();
  absl::StatusOr<Format> format = model.format().empty()
                                      ? SniffFormat(model.data(), name)
                                      : FormatFromName(model.format());
  if (!format.ok()) return format.status();
  if (!IsModel(*format)) {
    return Invalid(name, ": model.format must be onnx or tflite, not ",
                   FormatName(*format));
  }
  ModelOptions options;
  for (const auto& [dim, value] : model.dims()) {
    if (value < 0) return Invalid("model.dims['", dim, "'] is negative");
    options.dims[dim] = value;
  }
  for (const auto& [value, shape] : model.shapes()) {
    for (int64_t d : shape.dims()) {
      if (d < 0)
        return Invalid("model.shapes['", value, "'] has a negative dim");
    }
    options.shapes[value] = {shape.dims().begin(), shape.dims().end()};
  }
  return ImportModel(*format, model.data(), name, options);
}

absl::Status ParseDimList(absl::string_view text, ModelOptions* options) {
  auto pairs = SplitPairs(text, "dim", "NAME=VALUE (e.g. batch=1)");
  if (!pairs.ok()) return pairs.status();
  for (const auto& [name, value] : *pairs) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(value, &v) || v < 0) {
      return Invalid("--dim ", name.substr(0, 64), "=", value.substr(0, 32),
                     ": the value must be a non-negative integer");
    }
    options->dims[name] = v;
  }
  return absl::OkStatus();
}

absl::Status ParseShapeList(absl::string_view text, ModelOptions* options) {
  auto pairs = SplitPairs(text, "input", "NAME=SHAPE (e.g. x=1x3x224x224)");
  if (!pairs.ok()) return pairs.status();
  for (const auto& [name, shape] : *pairs) {
    std::vector<int64_t> dims;
    for (absl::string_view d : absl::StrSplit(shape, 'x', absl::SkipEmpty())) {
      int64_t v = 0;
      if (!absl::SimpleAtoi(d, &v) || v < 0) {
        return Invalid("--input ", name.substr(0, 64), "=", shape.substr(0, 64),
                       ": dim '", d.substr(0, 32),
                       "' is not a non-negative integer (write 1x3x224x224)");
      }
      dims.push_back(v);
    }
    options->shapes[name] = std::move(dims);
  }
  return absl::OkStatus();
}

}  // namespace memplan::formats
