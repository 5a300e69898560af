// memplan::api: conversions between the wire messages (memplan.v1) and the
// planner's plain types, and the one Plan entry point the server and the
// CLI's in-process mode share, so both give the same plan.
//
//   memplan::v1::PlanRequest request = ...;
//   absl::StatusOr<memplan::v1::PlanResponse> response =
//       api::Plan(request, api::Limits{}, &pool, &cancel);
#ifndef MEMPLAN_PROTO_CONVERT_H_
#define MEMPLAN_PROTO_CONVERT_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "memplan/v1/memplan.pb.h"
#include "planner/graph.h"
#include "planner/planner.h"

namespace memplan::api {

// What one request may ask for.
struct Limits {
  // Tensors (graph) or buffers (list) per request. Default 1,000,000.
  int64_t max_tensors = 1'000'000;
  // Ops per graph. Default 1,000,000.
  int64_t max_ops = 1'000'000;
  // Time budget used when a request gives none. Default 1 s.
  absl::Duration default_time_budget = absl::Seconds(1);
  // The largest time budget a request may ask for. Default 60 s.
  absl::Duration max_time_budget = absl::Seconds(60);
};

// A request, checked and turned into planner types.
struct PlanInput {
  std::optional<planner::Graph> graph;      // set for a graph request
  std::optional<planner::Problem> buffers;  // set for a buffer list
  planner::PlanOptions options;
};

// INVALID_ARGUMENT for a request with neither or both of graph and buffers,
// or bad options; RESOURCE_EXHAUSTED over `limits`. The graph or buffers
// themselves are validated by the planner.
[[nodiscard]] absl::StatusOr<PlanInput> FromProto(
    const v1::PlanRequest& request, const Limits& limits);

planner::Graph GraphFromProto(const v1::Graph& graph);

// Checks and converts plan options (alignment, strategy, budget, capacity).
[[nodiscard]] absl::StatusOr<planner::PlanOptions> OptionsFromProto(
    const v1::PlanOptions& options, const Limits& limits);

v1::PlanResponse ToProto(const planner::PlanResult& result);

// The planner's view of a response (for planner::FormatReport): buffers,
// offsets, pools and figures. Buffer alignment is not carried by the
// response and is left at 1.
planner::PlanResult ResultFromProto(const v1::PlanResponse& response);

// Validates and plans: the Plan RPC before its response is built.
[[nodiscard]] absl::StatusOr<planner::PlanResult> PlanToResult(
    const v1::PlanRequest& request, const Limits& limits,
    planner::WorkerPool* pool, const planner::CancelToken* cancel);

// Validates, plans and converts back: what the Plan RPC does.
[[nodiscard]] absl::StatusOr<v1::PlanResponse> Plan(
    const v1::PlanRequest& request, const Limits& limits,
    planner::WorkerPool* pool, const planner::CancelToken* cancel);

}  // namespace memplan::api

#endif  // MEMPLAN_PROTO_CONVERT_H_
