// The TFLite Micro baseline: how TFLM's own allocator sees a model's
// tensors (lifetimes in its allocation scopes) and what its
// GreedyMemoryPlanner is asked to place, so that memplan's arena can be
// set against the one TFLM would need.
//
//   absl::StatusOr<std::vector<formats::TflmTensorUse>> uses =
//       formats::TflmTensorUses(model);  // a verified tflite/model.h model
//   absl::StatusOr<std::vector<planner::TflmBuffer>> asks =
//       formats::TflmRequests(imported);  // a TFLite import
#ifndef MEMPLAN_TFLITE_TFLM_BASELINE_H_
#define MEMPLAN_TFLITE_TFLM_BASELINE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "formats/model.h"
#include "planner/tflm_greedy.h"
#include "tflite/model.h"

namespace memplan::formats {

// One entry per tensor, subgraphs concatenated (the offline plan's order),
// with the lifetimes TFLM's AllocationInfoBuilder gives them: scope 0 is
// before the first operator; each operator opens a scope, and each
// subgraph an IF, WHILE or CALL_ONCE runs opens one before its operators
// (and is walked again at every such operator). INVALID_ARGUMENT as
// ImportTflite; RESOURCE_EXHAUSTED when TFLM's walk of the subgraph calls
// would open more than 10^8 allocation scopes. Time linear in the model
// (each subgraph walked once, however often it runs).
[[nodiscard]] absl::StatusOr<std::vector<TflmTensorUse>> TflmTensorUses(
    const TfliteModel& model);

// What TFLM's GreedyMemoryPlanner is asked to place for `model` (a TFLite
// import, whose tflm_uses it reads): each tensor it plans, with memplan's size
// for it rounded up to 16 (planner::kTflmAlignment) and TFLM's lifetime; then
// each variable tensor, live throughout (TFLM keeps them beside its plan), so
// that both planners' figures cover the same tensors.
// The error of the model's TFLM walk when it failed (tflm_uses_status).
[[nodiscard]] absl::StatusOr<std::vector<planner::TflmBuffer>> TflmRequests(
    const ImportedModel& model);

}  // namespace memplan::formats

#endif  // MEMPLAN_TFLITE_TFLM_BASELINE_H_
