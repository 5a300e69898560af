// memplan::api: the wire contract's pure conversions between memplan.v1
// messages and the planner's plain types. No use case lives here (planning
// a request is engine::Plan): this library depends on the planner only.
//
//   absl::StatusOr<planner::PlanOptions> options =
//       api::OptionsFromProto(request.options(), api::Budgets{});
//   planner::Graph graph = api::GraphFromProto(request.graph());
//   ...plan it...
//   v1::PlanResponse response = api::ToProto(result, *options, {});
#ifndef MEMPLAN_PROTO_CONVERT_H_
#define MEMPLAN_PROTO_CONVERT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/alignment.h"
#include "base/cancel.h"
#include "base/parallel.h"
#include "google/protobuf/repeated_field.h"
#include "memplan/v1/memplan.pb.h"
#include "planner/graph.h"
#include "planner/planner.h"

namespace memplan::api {

// The layout version PlanResponse.schema_version reports.
inline constexpr int kSchemaVersion = 2;

// The alignment of tensors and buffers that set none, when the request's
// options give none either.
using base::kDefaultAlignment;

// Time budgets applied while converting options.
struct Budgets {
  // Used when a request gives no time_budget_ms. Default 1 s.
  absl::Duration default_budget = absl::Seconds(1);
  // The largest budget a request may ask for (larger ones are cut to it).
  // Default 60 s.
  absl::Duration max_budget = absl::Seconds(60);
};

// Checks and converts plan options: alignment, strategy (an unknown name is
// INVALID_ARGUMENT listing the known ones, before any work), budget,
// effort, capacity, memory pools, weights and io placement.
[[nodiscard]] absl::StatusOr<planner::PlanOptions> OptionsFromProto(
    const v1::PlanOptions& options, const Budgets& budgets);

// The options as applied, for PlanResponse.options (defaults filled in).
v1::PlanOptions OptionsToProto(const planner::PlanOptions& options);

// The conversions of a request's input poll `cancel` (may be null) every
// base::kPollStride items (a 500,000-buffer list takes 0.15-0.2 s) and stop
// once it fires, leaving the result partial: the caller checks the token.
planner::Graph GraphFromProto(const v1::Graph& graph,
                              const base::CancelToken* cancel = nullptr);
v1::Graph GraphToProto(const planner::Graph& graph);

// A buffer list; buffers without an alignment get `default_alignment`.
planner::Problem BuffersFromProto(
    const google::protobuf::RepeatedPtrField<v1::Buffer>& buffers,
    int64_t default_alignment, const base::CancelToken* cancel = nullptr);

// The inverse: every buffer with its alignment and pin, in order.
void BuffersToProto(const planner::Problem& problem,
                    google::protobuf::RepeatedPtrField<v1::Buffer>* buffers);

// What ToProto leaves out, and how it works.
struct ResponseOptions {
  bool no_timings = false;  // no stage_micros (byte-identical responses)
  // Polled every few thousand tensors: once it fires the response is left
  // unfinished, for a caller that then drops it (a call that has ended).
  const base::CancelToken* cancel = nullptr;
  // The threads that fill a long assignment list, in chunks of
  // kAssignmentChunk tensors (a million assignments: about 90 ms on one
  // thread with warm memory, several times that on fresh pages). The
  // response is the same on any count.
  base::Parallelism parallel;
};

// The tensors one chunk of ToProto's assignment list holds.
inline constexpr size_t kAssignmentChunk = 16384;

// The response for a plan made with `options`: one assignment per planned
// tensor and one UnplannedTensor per other tensor, both in request order.
v1::PlanResponse ToProto(const planner::PlanResult& result,
                         const planner::PlanOptions& options,
                         const ResponseOptions& response_options);
// The same into `response` (empty; on a protobuf arena or not).
void ToProto(const planner::PlanResult& result,
             const planner::PlanOptions& options,
             const ResponseOptions& response_options,
             v1::PlanResponse* response);

// The planner's view of a response, for reports and pictures of a plan made
// by a server: one planned buffer per assignment (each with its own
// lifetime and offset; in-place tensors share their input's offset), the
// unplanned tensors, shared objects and figures. Alignment is not carried
// by the response and is left at 1.
planner::PlanResult ResultFromProto(const v1::PlanResponse& response);

// A name from a request cut to at most `max` bytes (with "...") and
// escaped (base::SafeText: control characters, newlines included, and
// bytes that are not UTF-8 as \xHH), for error messages that echo user
// input: a name cannot forge a line of the message.
std::string Clip(absl::string_view name, size_t max = 64);

}  // namespace memplan::api

#endif  // MEMPLAN_PROTO_CONVERT_H_
