#include "client/inspect.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/text.h"
#include "engine/model_import.h"
#include "formats/model.h"
#include "planner/graph.h"
#include "planner/planner.h"
#include "proto/convert.h"

namespace memplan::client {
namespace {

// Names from the model follow the text rule (base/text.h), as in a plan.
void AddValues(const std::vector<formats::ValueSummary>& values,
               google::protobuf::RepeatedPtrField<v1::ValueSummary>* out) {
  for (const formats::ValueSummary& v : values) {
    v1::ValueSummary* s = out->Add();
    s->set_name(base::SafeName(v.name));
    s->set_element_type(v.element_type);
    for (const std::string& d : v.dims) s->add_dims(base::SafeName(d));
    s->set_bytes(v.bytes);
  }
}

absl::StatusOr<v1::InputSummary> SummarizeModelInput(const Input& input) {
  const v1::ModelFile& model = input.request.model();
  // The model's own format: a JSON request may carry one.
  absl::StatusOr<formats::Format> format = engine::ModelFileFormat(model);
  if (!format.ok()) return format.status();
  absl::StatusOr<formats::ModelSummary> m =
      engine::SummarizeModel(*format, model.data(), model.name());
  if (!m.ok()) return m.status();
  v1::InputSummary s;
  s.set_format(std::string(formats::FormatName(*format)));
  s.set_producer(base::SafeText(m->producer));
  s.set_version(base::SafeText(m->version));
  s.set_subgraphs(m->subgraphs);
  AddValues(m->inputs, s.mutable_inputs());
  AddValues(m->outputs, s.mutable_outputs());
  for (const std::string& d : m->symbolic_dims) {
    s.add_symbolic_dims(base::SafeName(d));
  }
  s.set_weight_bytes(m->weight_bytes);
  s.set_ops(m->ops);
  for (const auto& [type, count] : m->op_types) {
    (*s.mutable_op_types())[base::SafeName(type)] = count;
  }
  for (const formats::DefaultedDim& d : m->defaulted_dims) {
    v1::DefaultedDim* out = s.add_defaulted_dims();
    out->set_value(base::SafeName(d.value));
    out->set_dim(d.dim);
    out->set_size(d.size);
    out->set_flag(base::SafeText(d.flag));
  }
  s.set_dynamic_tensors(m->dynamic_tensors);
  if (m->offline_plan.has_value()) {
    v1::OfflinePlanSummary* p = s.mutable_offline_plan();
    p->set_version(m->offline_plan->version);
    p->set_subgraphs(m->offline_plan->subgraphs);
    p->set_offsets(m->offline_plan->offsets);
    p->set_placed(m->offline_plan->placed);
    p->set_usable(m->offline_plan->usable);
  }
  return s;
}

// A graph: counts, weights (no producer, or marked constant) and the lower
// bound of what plan would place under the request's options (alignment,
// weights, io), as the plan reports it.
absl::StatusOr<v1::InputSummary> SummarizeGraph(
    const v1::Graph& g, const planner::PlanOptions& options) {
  v1::InputSummary s;
  s.set_format("json");
  s.set_tensors(g.tensors_size());
  s.set_ops(g.ops_size());
  absl::StatusOr<planner::PlanResult> preview =
      planner::PreviewGraph(api::GraphFromProto(g), options);
  if (!preview.ok()) return preview.status();
  s.set_weight_bytes(preview->weights_bytes);
  s.set_lower_bound_bytes(preview->lower_bound);
  for (const std::string& name : g.inputs()) {
    s.add_inputs()->set_name(base::SafeName(name));
  }
  for (const std::string& name : g.outputs()) {
    s.add_outputs()->set_name(base::SafeName(name));
  }
  return s;
}

// The dims an import sets by itself, one line each, and the -1 dims of a
// TFLite model's other tensors.
void AppendDefaults(const v1::InputSummary& s, std::string* out) {
  bool first = true;
  for (const v1::DefaultedDim& d : s.defaulted_dims()) {
    absl::StrAppendFormat(
        out, "%-14s %s dim %d = %d  (%s; set with %s)\n",
        first ? "default dims:" : "", d.value(), d.dim(), d.size(),
        s.format() == "tflite" ? "the model's own shape" : "unnamed", d.flag());
    first = false;
  }
  if (s.dynamic_tensors() > 0) {
    absl::StrAppendFormat(out,
                          "%-14s %d tensors have -1 dims; each takes the "
                          "model's own shape (what TFLite Micro runs)\n",
                          "dynamic:", s.dynamic_tensors());
  }
}

// A TFLite model's own offline plan, when it carries one.
void AppendOfflinePlan(const v1::InputSummary& s, std::string* out) {
  if (!s.has_offline_plan()) return;
  const v1::OfflinePlanSummary& p = s.offline_plan();
  absl::StrAppendFormat(
      out,
      "%-14s OfflineMemoryAllocation: version %d, subgraphs word %d, %d "
      "offsets (%d placed, the others left to TFLite Micro)%s\n",
      "offline plan:", p.version(), p.subgraphs(), p.offsets(), p.placed(),
      p.usable() ? ""
                 : "; not the model's tensor count: TFLite Micro refuses "
                   "the model");
}

std::string Dims(const v1::ValueSummary& v) {
  return absl::StrCat("[", absl::StrJoin(v.dims(), ", "), "]");
}

void AppendValues(
    const char* label,
    const google::protobuf::RepeatedPtrField<v1::ValueSummary>& values,
    std::string* out) {
  bool first = true;
  for (const v1::ValueSummary& v : values) {
    absl::StrAppendFormat(out, "%-14s %s", first ? label : "", v.name());
    if (!v.element_type().empty()) {
      absl::StrAppend(out, "  ", v.element_type(), " ", Dims(v));
      absl::StrAppend(out, v.bytes() >= 0
                               ? absl::StrCat("  ", v.bytes(), " bytes")
                               : std::string("  (size unknown)"));
    }
    absl::StrAppend(out, "\n");
    first = false;
  }
}

}  // namespace

absl::StatusOr<v1::InputSummary> Summarize(const Input& input) {
  const v1::PlanRequest& r = input.request;
  if (r.has_model()) return SummarizeModelInput(input);
  absl::StatusOr<planner::PlanOptions> options =
      api::OptionsFromProto(r.options(), api::Budgets{});
  if (!options.ok()) return options.status();
  if (r.has_graph()) return SummarizeGraph(r.graph(), *options);
  // A buffer list, checked as plan checks it.
  absl::StatusOr<planner::PlanResult> preview = planner::PreviewBuffers(
      api::BuffersFromProto(r.buffers(), options->alignment), *options);
  if (!preview.ok()) return preview.status();
  v1::InputSummary s;
  s.set_format(std::string(formats::FormatName(input.format)));
  s.set_buffers(r.buffers_size());
  s.set_lower_bound_bytes(preview->lower_bound);
  return s;
}

std::string FormatSummary(const v1::InputSummary& s) {
  std::string out = absl::StrFormat("%-14s %s", "format:", s.format());
  if (!s.version().empty()) absl::StrAppend(&out, " (", s.version(), ")");
  absl::StrAppend(&out, "\n");
  if (!s.producer().empty()) {
    absl::StrAppendFormat(&out, "%-14s %s\n", "producer:", s.producer());
  }
  if (s.buffers() > 0)
    absl::StrAppendFormat(&out, "%-14s %d\n", "buffers:", s.buffers());
  if (s.tensors() > 0)
    absl::StrAppendFormat(&out, "%-14s %d\n", "tensors:", s.tensors());
  if (s.subgraphs() > 1) {
    absl::StrAppendFormat(&out, "%-14s %d\n", "subgraphs:", s.subgraphs());
  }
  AppendValues("inputs:", s.inputs(), &out);
  AppendValues("outputs:", s.outputs(), &out);
  if (s.symbolic_dims_size() > 0) {
    absl::StrAppendFormat(
        &out, "%-14s %s  (set with --dim NAME=N)\n",
        "symbolic dims:", absl::StrJoin(s.symbolic_dims(), ", "));
  }
  AppendDefaults(s, &out);
  AppendOfflinePlan(s, &out);
  if (s.ops() > 0) {
    std::vector<std::pair<int64_t, std::string>> types;
    for (const auto& [type, count] : s.op_types())
      types.push_back({-count, type});
    std::sort(types.begin(), types.end());
    std::string list;
    for (const auto& [count, type] : types) {
      absl::StrAppend(&list, list.empty() ? "" : ", ", type, " ", -count);
    }
    absl::StrAppendFormat(&out, "%-14s %d%s\n", "ops:", s.ops(),
                          list.empty() ? "" : absl::StrCat(" (", list, ")"));
  }
  if (s.weight_bytes() > 0) {
    absl::StrAppendFormat(&out, "%-14s %d bytes (kept in the model)\n",
                          "weights:", s.weight_bytes());
  }
  if (s.lower_bound_bytes() > 0) {
    absl::StrAppendFormat(&out, "%-14s %d bytes\n",
                          "lower bound:", s.lower_bound_bytes());
  }
  return out;
}

}  // namespace memplan::client
