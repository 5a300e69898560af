// memplan::engine: the use cases the server and the CLI share, so that a
// request gives the same plan, the same figures and the same files whether
// it is planned in-process or by a memplan-server. This header is the Plan
// use case: a memplan.v1.PlanRequest (a graph, a buffer list or a model
// file) checked against the limits before any work, planned, and turned
// into a response, with the files asked for (a planned .tflite, a C
// header, pictures) written from the plan.
//
//   base::WorkerPool workers(2, 64);
//   base::CancelToken cancel(absl::Now() + absl::Seconds(10));
//   absl::StatusOr<engine::PlanOutcome> outcome =
//       engine::Plan(request, engine::Limits{}, &workers, &cancel);
//   v1::PlanResponse response = engine::ToResponse(*outcome);
#ifndef MEMPLAN_ENGINE_PLAN_H_
#define MEMPLAN_ENGINE_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/cancel.h"
#include "base/worker_pool.h"
#include "engine/plan_cache.h"
#include "formats/model.h"
#include "memplan/v1/memplan.pb.h"
#include "planner/planner.h"
#include "proto/convert.h"

namespace memplan::engine {

// What one request may cost; judged from the request before any work, and
// again on the graph a model file imports to.
struct Limits {
  // Tensors (graph) or buffers (list) per request. Default 1,000,000.
  int64_t max_tensors = 1'000'000;
  // Ops per graph. Default 1,000,000.
  int64_t max_ops = 1'000'000;
  // Tensor references (every op's inputs and outputs) per graph: the work
  // of liveness. Default 10,000,000.
  int64_t max_tensor_refs = 10'000'000;
  // Bytes of a model file carried in a request. Default 256 MiB.
  int64_t max_model_bytes = int64_t{256} << 20;
  // Time budgets of the search (default 1 s, at most 60 s).
  api::Budgets budgets;
};

// A file written from a plan (PlanRequest.emit).
struct EmittedFile {
  std::string format;  // "tflite", "c_header", "svg" or "html"
  std::string data;    // the file's contents
};

// The planner's answer to a request and everything a response carries.
struct PlanOutcome {
  planner::PlanResult result;         // the verified plan
  planner::PlanOptions options;       // the options it was made with
  bool no_timings = false;            // leave stage times out
  std::vector<std::string> warnings;  // notes on the input
  std::vector<EmittedFile> files;     // as asked, in that order
  // TFLite models: the arena TFLite Micro's own planner would need.
  std::optional<int64_t> tflm_arena_bytes;
  // TFLite models: the head of TFLite Micro's arena running this plan (the
  // planned .tflite): the plan's arena rounded up to 16, or more where
  // TFLM places tensors the plan leaves to it (a tensor without data that
  // no op uses). Unset when the plan cannot be emitted for TFLM.
  std::optional<int64_t> tflm_runtime_bytes;
  // TFLite models: why TFLite Micro would not run this plan as it is (what
  // `emit tflite` refuses it for), empty when it would. A warning says it,
  // and the response then has no runtime figure.
  std::string tflm_refusal;
  // When the request carried a model: what it imported to (its names
  // cleaned, engine/names.h).
  std::optional<formats::ImportedModel> model;
  // The model's file name or the graph's name, cleaned (base/text.h): what
  // the emitted files are titled with. Empty for a buffer list.
  std::string input_name;
  // How the plan was obtained: computed, or from the plan cache.
  CacheUse cache = CacheUse::kNone;
};

// Checks, plans and emits. Every name the outcome holds follows the text
// rule of base/text.h (applied after import, before planning:
// engine/names.h). INVALID_ARGUMENT for a malformed request
// (naming the field, tensor, op or buffer; an unknown strategy or emit
// format, a format in emit twice, or over kMaxEmit emit entries is
// refused before any work: engine/emit.h), RESOURCE_EXHAUSTED over `limits`
// (naming the limit), FAILED_PRECONDITION when a capacity is set and no
// plan fits, DEADLINE_EXCEEDED when `cancel` fires first, INTERNAL for a
// broken invariant. `workers` and `cancel` may be null. With a `cache`,
// the plan comes from it when it holds one for the request (verified), and
// a plan computed here is kept in it (plan_cache.h).
[[nodiscard]] absl::StatusOr<PlanOutcome> Plan(const v1::PlanRequest& request,
                                               const Limits& limits,
                                               base::WorkerPool* workers,
                                               const base::CancelToken* cancel,
                                               PlanCache* cache = nullptr);

// The response for an outcome (api::ToProto plus files and warnings).
v1::PlanResponse ToResponse(const PlanOutcome& outcome);
// The same, moving the emitted files (often the largest part) out of
// `outcome` instead of copying them; the rest of it stays as it was. Once
// `cancel` (may be null) fires the response may be left unfinished: for a
// call that has ended, whose response is dropped.
v1::PlanResponse ToResponse(PlanOutcome&& outcome,
                            const base::CancelToken* cancel = nullptr);
// The same into `response` (empty; on a protobuf arena or not), a long
// assignment list filled on up to the request's max_threads of `workers`
// (may be null; api::ResponseOptions::parallel).
void ToResponse(PlanOutcome&& outcome, const base::CancelToken* cancel,
                base::WorkerPool* workers, v1::PlanResponse* response);

// Plan then ToResponse: what the Plan RPC answers.
[[nodiscard]] absl::StatusOr<v1::PlanResponse> PlanToResponse(
    const v1::PlanRequest& request, const Limits& limits,
    base::WorkerPool* workers, const base::CancelToken* cancel,
    PlanCache* cache = nullptr);

// The names PlanRequest.emit takes: "tflite, c_header, svg, html".
std::string EmitFormatNames();

}  // namespace memplan::engine

#endif  // MEMPLAN_ENGINE_PLAN_H_
