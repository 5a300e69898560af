// Protobuf JSON, through protobuf's own JSON mapping: reading a
// memplan.v1.PlanRequest (or a bare Graph) and writing any message in a
// stable form (proto field names, every field, map keys sorted), so that
// the same message always gives the same bytes.
//
//   absl::StatusOr<v1::PlanRequest> r = formats::ParseRequestJson(text,
//   "g.json"); std::string json = formats::ToJson(response);
#ifndef MEMPLAN_FORMATS_REQUEST_JSON_H_
#define MEMPLAN_FORMATS_REQUEST_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/parallel.h"
#include "google/protobuf/message.h"
#include "memplan/v1/memplan.pb.h"

namespace memplan::formats {

// JSON nested deeper than this is refused before it is parsed (a request
// needs 5 levels).
inline constexpr int kMaxJsonDepth = 64;

// Parses a PlanRequest, or a bare Graph (a top level with "tensors" or
// "ops") as a request holding it. INVALID_ARGUMENT naming `name` and, for
// malformed JSON, the line; nesting deeper than kMaxJsonDepth is refused.
[[nodiscard]] absl::StatusOr<v1::PlanRequest> ParseRequestJson(
    absl::string_view text, absl::string_view name);

// `message` as indented protobuf JSON with the proto field names, every
// field (defaults too), and map entries in key order; ends with a newline.
// The elements of long repeated fields of the top level (a large plan's
// assignments) are printed in chunks on the threads `parallel` gives:
// the same bytes on any thread count.
std::string ToJson(const google::protobuf::Message& message,
                   const base::Parallelism& parallel = {});

}  // namespace memplan::formats

#endif  // MEMPLAN_FORMATS_REQUEST_JSON_H_
