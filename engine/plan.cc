#include "engine/plan.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "base/status.h"
#include "base/text.h"
#include "engine/emit.h"
#include "engine/model_import.h"
#include "engine/names.h"
#include "planner/tflm_greedy.h"
#include "tflite/tflm_baseline.h"
#include "tflite/writer.h"

namespace memplan::engine {
namespace {

absl::Status OverLimit(absl::string_view what, int64_t count,
                       absl::string_view limit_name, int64_t limit) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "the request has ", count, " ", what, "; at most ", limit,
      " are planned (", limit_name, ": a server's --", limit_name, ")"));
}

// A graph within the limits: tensors, ops, and tensor references.
absl::Status CheckGraph(const v1::Graph& graph, const Limits& limits) {
  if (graph.tensors_size() > limits.max_tensors) {
    return OverLimit("tensors", graph.tensors_size(), "max_tensors",
                     limits.max_tensors);
  }
  if (graph.ops_size() > limits.max_ops) {
    return OverLimit("ops", graph.ops_size(), "max_ops", limits.max_ops);
  }
  int64_t refs = 0;
  for (const v1::Op& op : graph.ops()) {
    refs += op.inputs_size() + op.outputs_size();
  }
  if (refs > limits.max_tensor_refs) {
    return OverLimit("tensor references in ops", refs, "max_tensor_refs",
                     limits.max_tensor_refs);
  }
  return absl::OkStatus();
}

// DEADLINE_EXCEEDED once `cancel` (may be null) has fired: checked between
// the stages of a call, each of which polls it where it runs long.
absl::Status CheckCancel(const base::CancelToken* cancel,
                         absl::string_view stage) {
  if (cancel == nullptr || !cancel->Cancelled()) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat(stage, " cancelled"));
}

// Exactly one input, within the limits, judged from the request alone.
absl::Status CheckRequest(const v1::PlanRequest& request,
                          const Limits& limits) {
  const int inputs =
      request.has_graph() + (request.buffers_size() > 0) + request.has_model();
  if (inputs != 1) {
    return absl::InvalidArgumentError(
        inputs == 0 ? "the request has no graph, buffers or model (empty "
                      "request)"
                    : "the request has more than one of graph, buffers and "
                      "model; send one");
  }
  if (request.buffers_size() > limits.max_tensors) {
    return OverLimit("buffers", request.buffers_size(), "max_tensors",
                     limits.max_tensors);
  }
  if (static_cast<int64_t>(request.model().data().size()) >
      limits.max_model_bytes) {
    return OverLimit("model bytes", request.model().data().size(),
                     "max_model_bytes", limits.max_model_bytes);
  }
  if (request.has_graph()) return CheckGraph(request.graph(), limits);
  return absl::OkStatus();
}

// Plans the graph or buffers of `request` (the model already imported into
// outcome->model) with outcome->options.
absl::Status PlanInput(const v1::PlanRequest& request, const Limits& limits,
                       base::WorkerPool* workers,
                       const base::CancelToken* cancel, PlanCache* cache,
                       PlanOutcome* outcome) {
  absl::StatusOr<planner::PlanResult> result;
  const planner::PlanOptions& options = outcome->options;
  if (request.buffers_size() > 0) {
    planner::Problem problem =
        api::BuffersFromProto(request.buffers(), options.alignment, cancel);
    if (auto s = CheckCancel(cancel, "reading the buffer list"); !s.ok()) {
      return s;
    }
    result = cache != nullptr
                 ? cache->PlanBuffers(std::move(problem), options, workers,
                                      cancel, &outcome->cache)
                 : planner::PlanBuffers(std::move(problem), options, workers,
                                        cancel);
  } else {
    const v1::Graph& graph =
        outcome->model.has_value() ? *outcome->model->graph : request.graph();
    if (auto s = CheckGraph(graph, limits); !s.ok()) return s;
    const planner::Graph g = api::GraphFromProto(graph, cancel);
    if (auto s = CheckCancel(cancel, "reading the graph"); !s.ok()) return s;
    result = cache != nullptr ? cache->PlanGraph(g, options, workers, cancel,
                                                 &outcome->cache)
                              : planner::PlanGraph(g, options, workers, cancel);
  }
  if (!result.ok()) return result.status();
  outcome->result = *std::move(result);
  // A heuristic named by the request that passed its work cap: the plan
  // is the fallback's, which the response's strategy names.
  const std::string& asked = options.strategy;
  const std::string fallback(planner::kFallbackStrategy);
  if (!asked.empty() && asked != "auto" && asked != "exact" &&
      asked != fallback && outcome->result.strategy == fallback) {
    outcome->warnings.push_back(absl::StrCat(
        "strategy ", asked, " passed its work cap on this problem (",
        outcome->result.problem.buffers.size(), " buffers); the plan is ",
        fallback, "'s (O(n log n))"));
  }
  return absl::OkStatus();
}

// TFLite models with io "arena_keep_inputs": the import has the main
// inputs die after their last use, as TFLM does; the op after the main
// graph ("model/outputs", tflite/reader.h) reads them too, so they stay
// intact until the run ends.
void KeepTfliteInputs(formats::ImportedModel* model) {
  v1::Graph& graph = *model->graph;
  for (v1::Op& op : *graph.mutable_ops()) {
    if (op.name() != "model/outputs") continue;
    for (int t : model->main_inputs) {
      if (t >= 0 && t < graph.tensors_size()) {
        op.add_inputs(graph.tensors(t).name());
      }
    }
    return;
  }
}

// TFLite models: the main subgraph's inputs and outputs, planned as
// activations with TFLM's lifetimes, are reported as inputs and outputs,
// and operators' scratch tensors as scratch. A tensor without data that no
// op writes (nor reads: those are scratch), which the graph's rule calls a
// weight, is no weight kept in the model: TFLite Micro allocates it in
// its arena (the runtime figure counts it), so it is an activation, and
// not in weights_bytes.
void LabelModelIo(const formats::ImportedModel& model,
                  planner::PlanResult* result) {
  for (size_t t = 0; t < result->tensors.size(); ++t) {
    planner::TensorPlacement& p = result->tensors[t];
    if (p.kind != planner::TensorKind::kWeight ||
        t >= static_cast<size_t>(model.graph->tensors_size()) ||
        model.graph->tensors(static_cast<int>(t)).constant()) {
      continue;
    }
    p.kind = planner::TensorKind::kActivation;
    if (p.buffer < 0) result->weights_bytes -= p.size;
  }
  auto label = [&](const std::vector<int>& tensors, planner::TensorKind kind) {
    for (int t : tensors) {
      if (t < 0 || static_cast<size_t>(t) >= result->tensors.size()) continue;
      planner::TensorPlacement& p = result->tensors[t];
      if (p.kind == planner::TensorKind::kActivation) p.kind = kind;
    }
  };
  label(model.main_inputs, planner::TensorKind::kInput);
  label(model.main_outputs, planner::TensorKind::kOutput);
  label(model.scratch, planner::TensorKind::kScratch);
}

// TFLite models: when `offline` (OfflinePlanOffsets' status) says TFLite
// Micro would not run the plan as it is, says so in a warning and in
// outcome->tflm_refusal (the response then has no runtime figure), and
// returns true.
bool NoteTflmRefusal(const absl::Status& offline, PlanOutcome* outcome) {
  if (!absl::IsFailedPrecondition(offline)) return false;
  outcome->tflm_refusal =
      std::string(absl::StripPrefix(offline.message(), "emit tflite: "));
  outcome->warnings.push_back(absl::StrCat(
      "TFLite Micro would not run this plan as it is (", outcome->tflm_refusal,
      "): no runtime figure; --emit tflite and the C header's TFLite Micro "
      "section refuse it"));
  return true;
}

// TFLite models whose plan TFLite Micro runs (OfflinePlanOffsets OK):
// weights planned in the arena (--weights arena) are left to the model in
// the planned file (-1), as TFLM reads weights from there, so the room kept
// for them in the arena stays unused: a warning says how much.
void WarnUnusedWeightRoom(PlanOutcome* outcome) {
  const formats::ImportedModel& model = *outcome->model;
  int64_t weights = 0, weight_bytes = 0;
  for (size_t i = 0; i < outcome->result.tensors.size(); ++i) {
    if (outcome->result.OffsetOf(i) < 0 ||
        !model.graph->tensors(static_cast<int>(i)).constant()) {
      continue;
    }
    ++weights;
    weight_bytes += outcome->result.tensors[i].size;
  }
  if (weights > 0) {
    outcome->warnings.push_back(absl::StrCat(
        weights,
        " weight(s) are planned in the arena (--weights arena), but TFLite "
        "Micro reads weights from the model: the ",
        weight_bytes,
        " bytes kept for them stay unused when it runs this plan (plan "
        "without --weights arena for TFLite Micro)"));
  }
}

// TFLite models: the plan's offline offsets (OfflinePlanOffsets), with
// NoteTflmRefusal's warning when TFLite Micro would not run the plan and
// WarnUnusedWeightRoom's when it would.
absl::StatusOr<std::vector<int32_t>> CheckedTflmOffsets(PlanOutcome* outcome) {
  absl::StatusOr<std::vector<int32_t>> offline =
      formats::OfflinePlanOffsets(*outcome->model, outcome->result);
  if (!NoteTflmRefusal(offline.status(), outcome) && offline.ok()) {
    WarnUnusedWeightRoom(outcome);
  }
  return offline;
}

// TFLite models: the head of TFLM's arena running the planned file. TFLM
// places the tensors it plans and the offline plan leaves at -1 (a tensor
// without data that no op reads or writes, live in no scope) itself,
// around the planned ones: its planner, with the plan's offsets fixed,
// says where (the plan's arena rounded up when it leaves none).
absl::Status SetTflmRuntime(const base::CancelToken* cancel,
                            PlanOutcome* outcome) {
  const formats::ImportedModel& model = *outcome->model;
  const int64_t a = planner::kTflmAlignment;
  const int64_t rounded = (outcome->result.solution.arena_size + a - 1) / a * a;
  const absl::StatusOr<std::vector<int32_t>> offline =
      CheckedTflmOffsets(outcome);
  if (!offline.ok() || !model.tflm_uses_status.ok() ||
      offline->size() != model.tflm_uses.size()) {
    return absl::OkStatus();  // not a plan TFLM can run (emit says why)
  }
  std::vector<int64_t> size(model.tflm_uses.size(), 0);
  std::vector<std::string> name(model.tflm_uses.size());
  const formats::TfliteModel* m = model.tflite.get();
  for (size_t i = 0; i < model.tflite_tensors.size(); ++i) {
    const formats::TfliteTensorRef& ref = model.tflite_tensors[i];
    const int64_t g = m->global_index(ref.subgraph, ref.tensor);
    size[g] = model.graph->tensors(static_cast<int>(i)).size_bytes();
    name[g] = model.graph->tensors(static_cast<int>(i)).name();
  }
  std::vector<planner::TflmBuffer> buffers;
  std::vector<std::string> online;
  for (size_t g = 0; g < model.tflm_uses.size(); ++g) {
    const formats::TflmTensorUse& u = model.tflm_uses[g];
    if (!u.planned || size[g] <= 0) continue;
    buffers.push_back(
        {(size[g] + a - 1) / a * a, u.first, u.last, (*offline)[g]});
    if ((*offline)[g] >= 0) continue;
    online.push_back(absl::StrCat("'", name[g], "'"));
  }
  outcome->tflm_runtime_bytes = rounded;
  if (online.empty()) return absl::OkStatus();
  absl::StatusOr<planner::TflmPlan> plan =
      planner::TflmGreedyPlanner(std::move(buffers)).Plan(cancel);
  if (!plan.ok()) return plan.status();
  outcome->tflm_runtime_bytes = std::max(rounded, plan->arena_size);
  outcome->warnings.push_back(absl::StrCat(
      online.size(),
      " tensor(s) without data that TFLite Micro places itself "
      "(the plan leaves them to it; no op reads or writes ",
      online.size() == 1 ? "it" : "them", "): ", base::ListFew(online, 4),
      "; the runtime figure counts them (some TFLite Micro versions refuse "
      "such a model: 'invalid lifetime')"));
  return absl::OkStatus();
}

// TFLite models: the arena TFLite Micro's own planner would need for the
// same tensors (the response's baseline). Its planner is quadratic, so very
// large models go without.
absl::Status SetTflmBaseline(const base::CancelToken* cancel,
                             PlanOutcome* outcome) {
  constexpr size_t kMaxBaselineBuffers = 50'000;
  absl::StatusOr<std::vector<planner::TflmBuffer>> buffers =
      formats::TflmRequests(*outcome->model);
  if (!buffers.ok() || buffers->size() > kMaxBaselineBuffers) {
    outcome->warnings.push_back(
        buffers.ok() ? "no tflm_greedy baseline: too many tensors"
                     : absl::StrCat("no tflm_greedy baseline: ",
                                    buffers.status().message()));
    CheckedTflmOffsets(outcome).IgnoreError();  // its warnings only
    return absl::OkStatus();
  }
  absl::StatusOr<planner::TflmPlan> plan =
      planner::TflmGreedyPlanner(*buffers).Plan(cancel);
  if (!plan.ok()) return plan.status();
  outcome->tflm_arena_bytes = plan->arena_size;
  return SetTflmRuntime(cancel, outcome);
}

}  // namespace

std::string EmitFormatNames() { return absl::StrJoin(EmitFormats(), ", "); }

absl::StatusOr<PlanOutcome> Plan(const v1::PlanRequest& request,
                                 const Limits& limits,
                                 base::WorkerPool* workers,
                                 const base::CancelToken* cancel,
                                 PlanCache* cache) {
  if (auto s = CheckRequest(request, limits); !s.ok()) return s;
  absl::StatusOr<planner::PlanOptions> options =
      api::OptionsFromProto(request.options(), limits.budgets);
  if (!options.ok()) return options.status();
  if (auto s = CheckEmit(request); !s.ok()) return s;
  PlanOutcome outcome;
  outcome.options = *std::move(options);
  outcome.no_timings = request.no_timings();
  if (request.has_model()) {
    absl::StatusOr<formats::ImportedModel> model =
        engine::ImportModelFile(request.model(), cancel);
    if (!model.ok()) return model.status();
    outcome.warnings = model->warnings;
    outcome.model = *std::move(model);
    const bool tflite = outcome.model->format == formats::Format::kTflite;
    if (tflite && outcome.options.io == planner::IoPolicy::kExclude) {
      return Invalid(
          "io 'exclude' does not apply to TFLite models: TFLite Micro keeps "
          "a model's inputs and outputs in its arena (use io 'arena' or "
          "'arena_keep_inputs')");
    }
    if (tflite && outcome.options.io == planner::IoPolicy::kKeepInputs) {
      KeepTfliteInputs(&*outcome.model);
    }
    if (tflite && request.options().alignment() == 0) {
      outcome.options.alignment = planner::kTflmAlignment;  // TFLM's default
    }
  }
  // Every name from here on follows the text rule (engine/names.h).
  const std::optional<v1::PlanRequest> clean =
      CleanNames(request, &outcome, cancel);
  const v1::PlanRequest& input = clean.has_value() ? *clean : request;
  if (auto s = CheckCancel(cancel, "planning"); !s.ok()) return s;
  if (auto s = PlanInput(input, limits, workers, cancel, cache, &outcome);
      !s.ok()) {
    return s;
  }
  if (outcome.model.has_value() &&
      outcome.model->format == formats::Format::kTflite) {
    LabelModelIo(*outcome.model, &outcome.result);
    if (auto s = SetTflmBaseline(cancel, &outcome); !s.ok()) return s;
  }
  for (const std::string& format : request.emit()) {
    absl::StatusOr<std::string> data = Emit(format, outcome, input, cancel);
    if (!data.ok()) return data.status();
    outcome.files.push_back({format, *std::move(data)});
  }
  return outcome;
}

namespace {

// The response for `outcome` with `files` (its own, or a copy) moved in,
// into `response`.
void Response(const PlanOutcome& outcome, std::vector<EmittedFile>* files,
              const base::CancelToken* cancel,
              const base::Parallelism& parallel, v1::PlanResponse* response) {
  api::ToProto(outcome.result, outcome.options,
               {outcome.no_timings, cancel, parallel}, response);
  for (const std::string& w : outcome.warnings) {
    response->add_warnings(base::SafeText(w));  // they may quote raw names
  }
  for (EmittedFile& f : *files) {
    v1::EmittedFile* out = response->add_files();
    out->set_format(f.format);
    out->set_data(std::move(f.data));
  }
  if (outcome.model.has_value() &&
      outcome.model->format == formats::Format::kTflite &&
      outcome.tflm_refusal.empty()) {
    const int64_t a = planner::kTflmAlignment;
    response->set_runtime_arena_bytes(outcome.tflm_runtime_bytes.value_or(
        (outcome.result.solution.arena_size + a - 1) / a * a));
  }
  // Like stage_micros, left out with no_timings: the same request then
  // always gives the same bytes, from the cache or not.
  response->set_cached(!outcome.no_timings &&
                       (outcome.cache == CacheUse::kMemoryHit ||
                        outcome.cache == CacheUse::kStoreHit));
  if (outcome.tflm_arena_bytes.has_value()) {
    response->mutable_baseline()->set_strategy("tflm_greedy");
    response->mutable_baseline()->set_arena_size_bytes(
        *outcome.tflm_arena_bytes);
  }
}

}  // namespace

v1::PlanResponse ToResponse(const PlanOutcome& outcome) {
  std::vector<EmittedFile> files = outcome.files;
  v1::PlanResponse response;
  Response(outcome, &files, nullptr, {}, &response);
  return response;
}

v1::PlanResponse ToResponse(PlanOutcome&& outcome,
                            const base::CancelToken* cancel) {
  v1::PlanResponse response;
  Response(outcome, &outcome.files, cancel, {}, &response);
  return response;
}

void ToResponse(PlanOutcome&& outcome, const base::CancelToken* cancel,
                base::WorkerPool* workers, v1::PlanResponse* response) {
  Response(outcome, &outcome.files, cancel,
           {workers, planner::RequestThreads(outcome.options)}, response);
}

absl::StatusOr<v1::PlanResponse> PlanToResponse(const v1::PlanRequest& request,
                                                const Limits& limits,
                                                base::WorkerPool* workers,
                                                const base::CancelToken* cancel,
                                                PlanCache* cache) {
  absl::StatusOr<PlanOutcome> outcome =
      Plan(request, limits, workers, cancel, cache);
  if (!outcome.ok()) return outcome.status();
  return ToResponse(*std::move(outcome));
}

}  // namespace memplan::engine
