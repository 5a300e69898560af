// `memplan inspect`: what an input holds, without planning it. For a model
// (formats::SummarizeModel): its inputs and outputs with shapes and element
// types, the symbolic dims to set with --dim, weight bytes, op count and op
// types. For a graph or a buffer list: the counts and the lower bound of
// what would be planned.
//
//   absl::StatusOr<v1::InputSummary> s = client::Summarize(input);
//   std::cout << client::FormatSummary(*s);
#ifndef MEMPLAN_CLIENT_INSPECT_H_
#define MEMPLAN_CLIENT_INSPECT_H_

#include <string>

#include "absl/status/statusor.h"
#include "client/input.h"
#include "memplan/v1/memplan.pb.h"

namespace memplan::client {

// The summary of an input read by ReadInput. INVALID_ARGUMENT for a model
// or graph that cannot be read (naming what is wrong).
[[nodiscard]] absl::StatusOr<v1::InputSummary> Summarize(const Input& input);

// The summary as text, one fact per line.
std::string FormatSummary(const v1::InputSummary& summary);

}  // namespace memplan::client

#endif  // MEMPLAN_CLIENT_INSPECT_H_
