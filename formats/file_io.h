// Reading and writing whole files with the limits and messages a CLI user
// expects: input is bounded (standard input too), a directory is named as
// such, and output is written to a temporary file renamed into place, so
// nothing half-written is ever left at the destination.
//
//   absl::StatusOr<std::string> bytes =
//       formats::ReadFile("model.onnx", formats::kDefaultMaxInputBytes);
//   absl::Status s = formats::WriteFileAtomically("plan.h", text);
#ifndef MEMPLAN_FORMATS_FILE_IO_H_
#define MEMPLAN_FORMATS_FILE_IO_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace memplan::formats {

// The default bound on one input file: 512 MiB.
inline constexpr int64_t kDefaultMaxInputBytes = int64_t{512} << 20;

// Reads `path` ("-" is standard input) whole. NOT_FOUND for a missing file
// or a directory ("is a directory"); RESOURCE_EXHAUSTED when the input is
// larger than `max_bytes` (standard input stops being read right there);
// UNAVAILABLE for other read errors. Messages name the path.
[[nodiscard]] absl::StatusOr<std::string> ReadFile(const std::string& path,
                                                   int64_t max_bytes);

// Writes `contents` to `path` through a temporary file in the same
// directory and a rename; "-" writes to standard output. PERMISSION_DENIED
// naming the path when it cannot be written (no such directory, no right,
// a directory in the way); the temporary file is removed on failure.
[[nodiscard]] absl::Status WriteFileAtomically(const std::string& path,
                                               absl::string_view contents);

}  // namespace memplan::formats

#endif  // MEMPLAN_FORMATS_FILE_IO_H_
