// Reading plan requests from files: protobuf JSON (a PlanRequest or a bare
// Graph) through protobuf's own JSON mapping, and MiniMalloc CSV
// (`id,lower,upper,size[,alignment]`, alignment 1 by default as in
// MiniMalloc). Errors are INVALID_ARGUMENT with the line number; a missing
// file is NOT_FOUND.
//
//   absl::StatusOr<client::Input> in = client::ReadInput("g.json", "");
#ifndef MEMPLAN_CLIENT_INPUT_H_
#define MEMPLAN_CLIENT_INPUT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "memplan/v1/memplan.pb.h"

namespace memplan::client {

enum class InputFormat { kJson, kCsv };

struct Input {
  v1::PlanRequest request;
  InputFormat format = InputFormat::kJson;
  bool csv_has_alignment = false;  // the CSV had an alignment column
};

// `format` is "json", "csv" or empty (from the file's extension; JSON when
// reading standard input, named "-").
[[nodiscard]] absl::StatusOr<Input> ReadInput(const std::string& path,
                                              absl::string_view format);

// Parses text already read. `name` appears in error messages.
[[nodiscard]] absl::StatusOr<v1::PlanRequest> ParseJsonRequest(
    const std::string& text, absl::string_view name);
[[nodiscard]] absl::StatusOr<Input> ParseCsv(const std::string& text,
                                             absl::string_view name);

// MiniMalloc's output: the input columns plus `offset`.
std::string FormatCsv(const Input& input, const v1::PlanResponse& response);

}  // namespace memplan::client

#endif  // MEMPLAN_CLIENT_INPUT_H_
