// The CLI's inputs: a file (or standard input) read with a bounded size,
// its format found (formats::DetectFormat), and turned into the request
// memplan plans: protobuf JSON and MiniMalloc CSV as they are, model files
// (ONNX, TFLite) carried whole in PlanRequest.model so that the in-process
// engine and a server import them the same way.
//
//   absl::StatusOr<client::Input> in =
//       client::ReadInput("model.onnx", {.dims = {"batch=1"}});
#ifndef MEMPLAN_CLIENT_INPUT_H_
#define MEMPLAN_CLIENT_INPUT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/file_io.h"
#include "formats/format.h"
#include "formats/minimalloc_csv.h"
#include "formats/model.h"
#include "memplan/v1/memplan.pb.h"

namespace memplan::client {

// How to read an input.
struct InputOptions {
  std::string format;  // "json", "csv", "onnx", "tflite"; empty: detect
  std::vector<std::string> dims;                       // --dim lists (models)
  std::vector<std::string> shapes;                     // --input lists (models)
  int64_t max_bytes = formats::kDefaultMaxInputBytes;  // --max_input_bytes
  // The bound on a model file, which is mapped, not read: only its graph
  // is. Default formats::kMaxMappedBytes (2 GiB, protobuf's limit).
  int64_t max_model_bytes = formats::kMaxMappedBytes;
};

// An input read and ready to plan.
struct Input {
  std::string path;  // as given ("-" for standard input)
  formats::Format format = formats::Format::kJson;  // what it was
  v1::PlanRequest request;                          // what memplan plans
  // CSV input: the file as read (for CSV output).
  std::optional<formats::MinimallocCsv> csv;
};

// Reads, detects and converts. NOT_FOUND for a missing file or a
// directory, RESOURCE_EXHAUSTED over the size limit, INVALID_ARGUMENT for
// malformed input or flags (naming the line, value or flag).
[[nodiscard]] absl::StatusOr<Input> ReadInput(const std::string& path,
                                              const InputOptions& options);

// The --dim and --input lists as import options.
[[nodiscard]] absl::StatusOr<formats::ModelOptions> ModelOptionsFromFlags(
    const std::vector<std::string>& dims,
    const std::vector<std::string>& shapes);

}  // namespace memplan::client

#endif  // MEMPLAN_CLIENT_INPUT_H_
