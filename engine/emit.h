// Files written from a plan (PlanRequest.emit): one emitter per format,
// each a function of the plan, the request and what a model imported to.
// The emitters themselves live in formats/; this table is where the Plan
// use case finds them and checks a request's names before any work.
//
//   absl::StatusOr<std::string> header =
//       engine::Emit("c_header", outcome, request);
#ifndef MEMPLAN_ENGINE_EMIT_H_
#define MEMPLAN_ENGINE_EMIT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/cancel.h"
#include "engine/plan.h"
#include "memplan/v1/memplan.pb.h"

namespace memplan::engine {

// Every format PlanRequest.emit may name, in a fixed order. Names may also
// be written with '-' for '_' ("c-header").
const std::vector<std::string>& EmitFormats();

// `name` with '-' written as '_'.
std::string CanonicalEmitFormat(absl::string_view name);

// The most entries PlanRequest.emit may hold.
inline constexpr int kMaxEmit = 8;

// INVALID_ARGUMENT when a request asks for a format that does not exist, or
// one its input cannot give (a planned .tflite needs a TFLite model), or
// the same format twice ("svg" and "svg", or "c_header" and "c-header":
// repeats are refused, naming the format, not merged, since files come
// back one per entry in order), or more than kMaxEmit entries, or sets a
// c_header_id that cannot be one (formats::IsCHeaderId).
[[nodiscard]] absl::Status CheckEmit(const v1::PlanRequest& request);

// The file of `format` for a planned request (its names cleaned:
// engine/names.h), titled with outcome.input_name. DEADLINE_EXCEEDED when
// `cancel` (may be null) fires first (pictures stop within milliseconds).
[[nodiscard]] absl::StatusOr<std::string> Emit(
    absl::string_view format, const PlanOutcome& outcome,
    const v1::PlanRequest& request, const base::CancelToken* cancel = nullptr);

}  // namespace memplan::engine

#endif  // MEMPLAN_ENGINE_EMIT_H_
