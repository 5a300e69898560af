// memplan::formats: every file format memplan reads or writes. This header
// names the input formats and finds which one a file is: from an explicit
// choice, else from the file's extension, else by looking at its bytes
// (ONNX protobuf, TFLite's "TFL3" identifier, JSON, CSV).
//
//   absl::StatusOr<formats::Format> f =
//       formats::DetectFormat("model.bin", bytes, /*explicit_name=*/"");
//   if (f.ok() && *f == formats::Format::kTflite) ...
#ifndef MEMPLAN_FORMATS_FORMAT_H_
#define MEMPLAN_FORMATS_FORMAT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace memplan::formats {

enum class Format {
  kJson,    // protobuf JSON: a memplan.v1.PlanRequest or a bare Graph
  kCsv,     // MiniMalloc CSV: id,lower,upper,size[,alignment]
  kOnnx,    // an ONNX ModelProto
  kTflite,  // a TFLite flatbuffer
};

// "json", "csv", "onnx" or "tflite".
absl::string_view FormatName(Format format);

// The names FormatName gives, for help texts: "json, csv, onnx, tflite".
std::string FormatNames();

// A format by name (case-insensitive); INVALID_ARGUMENT listing the names.
[[nodiscard]] absl::StatusOr<Format> FormatFromName(absl::string_view name);

// The format `bytes` look like, or INVALID_ARGUMENT "unsupported input
// format" saying what they look like instead (e.g. a PNG image, binary
// data, empty). Text and magic numbers are judged from the first few KiB;
// ONNX (no magic number) from its first top-level fields' tags and lengths,
// which may run to the end of `bytes` (the whole file).
[[nodiscard]] absl::StatusOr<Format> SniffFormat(absl::string_view bytes,
                                                 absl::string_view name);

// `explicit_name` when set; else the extension of `path` (.json, .csv,
// .onnx, .tflite); else SniffFormat.
[[nodiscard]] absl::StatusOr<Format> DetectFormat(
    absl::string_view path, absl::string_view bytes,
    absl::string_view explicit_name);

// True for the model formats (ONNX, TFLite).
inline bool IsModel(Format format) {
  return format == Format::kOnnx || format == Format::kTflite;
}

}  // namespace memplan::formats

#endif  // MEMPLAN_FORMATS_FORMAT_H_
