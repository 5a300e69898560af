#include "onnx/import.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/types/span.h"
#include "base/edit_distance.h"
#include "base/status.h"
#include "base/text.h"
#include "onnx/internal/model_reading.h"
#include "onnx/onnx_pb.h"
#include "onnx/shapes.h"
#include "proto/convert.h"

namespace memplan::formats {
namespace {

// Debian's libonnx is built with ONNX_NAMESPACE=onnx (and ONNX_ML); the alias
// keeps this file right for any namespace the library was built with.
namespace onnx = ::ONNX_NAMESPACE;

// Names a message offers to choose from (dims, inputs), at most this many;
// values it lists as examples of a problem, at most kMaxExamples.
constexpr int kMaxListed = 20;
constexpr int kMaxExamples = 4;
constexpr int kStringType = 8;

// "a, b, c and 4 more" from a sorted list.
std::string ListSome(const std::vector<std::string>& names) {
  return base::ListFew(names, kMaxListed);
}

// --- Flags checked against the model
// -------------------------------------------

// A --dim the model has no use for: an error when it looks like one of the
// model's dims (a misspelling, or several dims run together in one flag),
// suggesting it, else a warning (one set of flags may serve every model of
// a pipeline) and the dim is ignored.
absl::Status CheckDimNames(const ModelOptions& options,
                           const onnx::GraphProto& g,
                           std::vector<std::string>* warnings) {
  const std::set<std::string> declared = internal::DeclaredDims(g);
  const std::vector<std::string> valid(declared.begin(), declared.end());
  const std::string named_dims = valid.empty()
                                     ? "it has no named dims"
                                     : "its named dims are: " + ListSome(valid);
  for (const auto& entry : options.dims) {
    const std::string& dim = entry.first;
    if (declared.count(dim) > 0) continue;
    const std::string given = api::Clip(dim);
    // A one- or two-letter dim ("N", "T") is misspelt only in its case:
    // any other short name is another model's dim.
    std::vector<std::string> candidates;
    for (const std::string& known : valid) {
      if (known.size() >= 3 || absl::EqualsIgnoreCase(known, dim)) {
        candidates.push_back(known);
      }
    }
    const std::string closest = base::ClosestName(dim, candidates);
    if (!closest.empty()) {
      return Invalid("--dim ", given, ": did you mean --dim ",
                     api::Clip(closest),
                     "? (the model has no dim of that name; ", named_dims, ")");
    }
    // "batch=1;seq": dims run together, one of them the model's.
    bool run_together = false;
    for (absl::string_view part :
         absl::StrSplit(dim, absl::ByAnyChar("=;:, "))) {
      run_together = run_together || (part.size() < dim.size() &&
                                      declared.count(std::string(part)) > 0);
    }
    if (run_together) {
      return Invalid("--dim ", given,
                     ": the model has no dim of that name (give one dim per "
                     "NAME=VALUE, separated by commas); ",
                     named_dims);
    }
    warnings->push_back(absl::StrCat("--dim ", given,
                                     " ignored: the model has no dim of that "
                                     "name; ",
                                     named_dims));
  }
  return absl::OkStatus();
}

// Every value name in the model: inputs, initializers, node outputs.
absl::flat_hash_set<std::string> AllValueNames(const onnx::GraphProto& g) {
  absl::flat_hash_set<std::string> names;
  internal::ForEachGraph(g, [&](const onnx::GraphProto& s) {
    for (const auto& vi : s.input()) names.insert(vi.name());
    for (const auto& t : s.initializer()) names.insert(t.name());
    for (const auto& n : s.node()) {
      for (const std::string& o : n.output()) {
        if (!o.empty()) names.insert(o);
      }
    }
  });
  return names;
}

// --input names must be values of the model, not initializers.
absl::Status CheckShapeNames(const ModelOptions& options,
                             const onnx::GraphProto& g) {
  if (options.shapes.empty()) return absl::OkStatus();
  const absl::flat_hash_set<std::string> names = AllValueNames(g);
  absl::flat_hash_set<std::string> initializers;
  internal::ForEachGraph(g, [&](const onnx::GraphProto& s) {
    for (const auto& t : s.initializer()) initializers.insert(t.name());
  });
  std::vector<std::string> inputs;
  for (const auto& vi : g.input()) {
    if (!initializers.contains(vi.name())) inputs.push_back(vi.name());
  }
  for (const auto& [name, shape] : options.shapes) {
    if (!names.contains(name)) {
      return Invalid("--input ", name.substr(0, 64),
                     ": the model has no value named '", name.substr(0, 64),
                     "'; its graph inputs are: ", ListSome(inputs),
                     " (any value's name is accepted)");
    }
    if (initializers.contains(name)) {
      return Invalid("--input ", name, ": '", name,
                     "' is an initializer; its shape is fixed by the model");
    }
  }
  return absl::OkStatus();
}

// --- Overrides applied before ONNX's inference
// ---------------------------------

// Gives each graph input that is also an initializer (exporters of IR < 4
// list every initializer among the inputs) the initializer's type and
// dims: it is a weight, so ONNX's inference and --dim see the shape the
// file holds, not a declared one with dim names of its own.
void TypeInitializerInputs(onnx::GraphProto* g) {
  absl::flat_hash_map<std::string, const onnx::TensorProto*> initializers;
  for (const onnx::TensorProto& t : g->initializer()) {
    initializers.emplace(t.name(), &t);
  }
  for (onnx::ValueInfoProto& vi : *g->mutable_input()) {
    auto it = initializers.find(vi.name());
    if (it == initializers.end()) continue;
    onnx::TypeProto::Tensor* type = vi.mutable_type()->mutable_tensor_type();
    type->set_elem_type(it->second->data_type());
    onnx::TensorShapeProto* shape = type->mutable_shape();
    shape->clear_dim();
    for (int64_t d : it->second->dims()) shape->add_dim()->set_dim_value(d);
  }
}

// Replaces symbolic dims named in `dims` by their values in one type.
void SetNamedDims(const std::map<std::string, int64_t>& dims,
                  onnx::TypeProto* type) {
  if (!type->has_tensor_type() || !type->tensor_type().has_shape()) return;
  for (onnx::TensorShapeProto::Dimension& d :
       *type->mutable_tensor_type()->mutable_shape()->mutable_dim()) {
    if (!d.has_dim_param()) continue;
    auto it = dims.find(d.dim_param());
    if (it != dims.end()) d.set_dim_value(it->second);
  }
}

// Applies --dim to every declared type of the main graph, so that ONNX's
// inference propagates values instead of symbols.
void ApplyDims(const ModelOptions& options, onnx::GraphProto* g) {
  for (auto* list :
       {g->mutable_input(), g->mutable_output(), g->mutable_value_info()}) {
    for (onnx::ValueInfoProto& vi : *list) {
      SetNamedDims(options.dims, vi.mutable_type());
    }
  }
}

// Applies --input to the declared types of main-graph values (the
// evaluation applies it everywhere).
absl::Status ApplyShapes(const ModelOptions& options, onnx::GraphProto* g) {
  for (const auto& [name, shape] : options.shapes) {
    onnx::ValueInfoProto* vi = nullptr;
    for (auto* list :
         {g->mutable_input(), g->mutable_output(), g->mutable_value_info()}) {
      for (onnx::ValueInfoProto& v : *list) {
        if (v.name() == name) vi = &v;
      }
    }
    if (vi == nullptr) continue;  // a node output only: the evaluation sets it
    onnx::TypeProto::Tensor* t = vi->mutable_type()->mutable_tensor_type();
    if (t->has_shape() &&
        t->shape().dim_size() != static_cast<int>(shape.size())) {
      return Invalid("--input ", name, ": '", name, "' has rank ",
                     t->shape().dim_size(), " in the model, the flag gives ",
                     shape.size(), " dims");
    }
    t->clear_shape();
    onnx::TensorShapeProto* s = t->mutable_shape();
    for (int64_t d : shape) s->add_dim()->set_dim_value(d);
  }
  return absl::OkStatus();
}

// Gives unnamed dynamic dims of graph inputs the value 1, with a warning.
void DefaultUnnamedDims(onnx::GraphProto* g,
                        std::vector<std::string>* warnings) {
  absl::flat_hash_set<std::string> initializers;
  for (const auto& t : g->initializer()) initializers.insert(t.name());
  for (onnx::ValueInfoProto& vi : *g->mutable_input()) {
    if (initializers.contains(vi.name())) continue;
    if (!vi.type().tensor_type().has_shape()) continue;
    auto* dims = vi.mutable_type()->mutable_tensor_type()->mutable_shape();
    for (int i = 0; i < dims->dim_size(); ++i) {
      onnx::TensorShapeProto::Dimension* d = dims->mutable_dim(i);
      if (d->has_dim_value() && d->dim_value() >= 0) continue;
      if (d->has_dim_param() && !d->dim_param().empty()) continue;
      d->set_dim_value(1);
      warnings->push_back(
          absl::StrCat("graph input '", vi.name(), "': dim ", i,
                       " is dynamic and unnamed; using 1 (set it with --input ",
                       vi.name(), "=SHAPE)"));
    }
  }
}

// Parses (onto `arena`), applies the flags and runs ONNX's inference.
absl::StatusOr<onnx::ModelProto*> Prepare(absl::string_view bytes,
                                          absl::string_view name,
                                          const ModelOptions& options,
                                          google::protobuf::Arena* arena,
                                          std::vector<std::string>* warnings) {
  // Each step below takes tens of milliseconds on a 100,000-node model;
  // the token is polled between them, and inside the long ones.
  const base::CancelToken* cancel = options.cancel;
  auto stop = [&] { return cancel != nullptr && cancel->Cancelled(); };
  absl::StatusOr<onnx::ModelProto*> parsed =
      internal::ParseModel(bytes, name, arena, cancel);
  if (!parsed.ok()) return parsed.status();
  onnx::ModelProto* model = *parsed;
  if (stop()) return internal::ImportCancelled(name);
  if (auto s = internal::SanitizeTensors(model, name, cancel); !s.ok()) {
    return s;
  }
  if (auto s = internal::CheckAttributes(*model, name, cancel); !s.ok()) {
    return s;
  }
  if (stop()) return internal::ImportCancelled(name);
  if (auto s = internal::SortNodes(model, name, cancel); !s.ok()) return s;
  internal::ReadScopes scopes;
  if (auto s = internal::CheckReads(model->graph(), &scopes, "", name, cancel);
      !s.ok()) {
    return s;
  }
  if (stop()) return internal::ImportCancelled(name);
  onnx::GraphProto* g = model->mutable_graph();
  TypeInitializerInputs(g);
  if (auto s = CheckDimNames(options, *g, warnings); !s.ok()) return s;
  if (auto s = CheckShapeNames(options, *g); !s.ok()) return s;
  ApplyDims(options, g);
  if (auto s = ApplyShapes(options, g); !s.ok()) return s;
  DefaultUnnamedDims(g, warnings);
  if (auto s = internal::InferShapes(model, name, cancel); !s.ok()) return s;
  return model;
}

// --- Sizes
// ---------------------------------------------------------------------

// A value's bytes, or why they are not known.
struct Size {
  std::optional<int64_t> bytes;  // set when known
  std::string reason;            // why not, when not
};

// Sizes one value; INVALID_ARGUMENT for what memplan cannot plan at all.
absl::StatusOr<Size> SizeOf(const OnnxEvaluation& e, const OnnxValue& v) {
  const std::string from =
      v.origin.empty() ? "" : absl::StrCat(", from ", v.origin);
  const std::string why = v.why_unknown.empty() ? "" : ": " + v.why_unknown;
  if (!v.tensor) {
    return Invalid("value '", v.name,
                   "' is not a dense tensor (a sequence, map, optional or "
                   "sparse tensor): memplan plans tensors only");
  }
  if (v.elem_type == kStringType) {
    return Invalid("value '", v.name,
                   "' holds strings, whose size depends on their data: "
                   "memplan cannot plan string tensors");
  }
  if (v.elem_type == 0) return Size{std::nullopt, "no type" + from + why};
  if (!v.has_shape) return Size{std::nullopt, "rank unknown" + from + why};
  std::vector<int64_t> dims;
  for (const SymDim& d : v.dims) {
    if (d.is_constant()) {
      dims.push_back(d.constant());
      continue;
    }
    std::vector<std::string> symbols;
    for (AtomId a : e.table.Leaves(d)) {
      const DimAtom& atom = e.table.atom(a);
      if (atom.kind == AtomKind::kSymbol) {
        symbols.push_back("'" + atom.name + "'");
      }
    }
    if (!symbols.empty()) {
      return Size{std::nullopt,
                  absl::StrCat("dim ", absl::StrJoin(symbols, ", "), from)};
    }
    for (AtomId a : e.table.Leaves(d)) {
      const DimAtom& atom = e.table.atom(a);
      if (atom.kind == AtomKind::kUnknown && !atom.reason.empty()) {
        return Size{
            std::nullopt,
            absl::StrCat(atom.reason,
                         atom.origin.empty() ? from : ", from " + atom.origin)};
      }
    }
    return Size{std::nullopt, "a dim unknown" + from};
  }
  absl::StatusOr<int64_t> bytes =
      OnnxTensorBytes(v.elem_type, dims, absl::StrCat("value '", v.name, "'"));
  if (!bytes.ok()) return bytes.status();
  return Size{*bytes, ""};
}

// --- Building the flattened graph
// -------------------------------------------------

// Turns an evaluation into a memplan Graph: every value of every run graph
// a tensor, control flow flattened into enter/body/exit ops (see the header).
class GraphBuilder {
 public:
  GraphBuilder(const OnnxEvaluation& e, absl::string_view name,
               absl::string_view graph_name, const base::CancelToken* cancel)
      : e_(e), name_(name), cancel_(cancel) {
    result_.graph->set_name(graph_name.empty() ? std::string(name)
                                               : std::string(graph_name));
  }

  absl::StatusOr<ImportedModel> Build() {
    ReserveMainNames();
    if (auto s = AddTensors(*e_.main, /*body=*/false); !s.ok()) return s;
    if (auto s = CheckAllSized(); !s.ok()) return s;
    AddOps(*e_.main);
    if (stopped_) return internal::ImportCancelled(name_);
    for (int id : e_.main->inputs) {
      if (Planned(id)) result_.graph->add_inputs(names_.at(id));
    }
    for (int id : e_.main->outputs) {
      if (Planned(id)) result_.graph->add_outputs(names_.at(id));
    }
    AddWarnings();
    result_.stats.tensors = result_.graph->tensors_size();
    result_.stats.ops = result_.graph->ops_size();
    return std::move(result_);
  }

 private:
  bool Planned(int id) const { return names_.contains(id); }

  // Names a value's tensor: its own name unless taken, else with the path.
  // Main-graph values keep their names (reserved first); subgraph values
  // clashing with a taken name get their path.
  std::string UniqueName(const OnnxValue& v, const OnnxGraphRun& run) {
    if (run.parent == nullptr) return v.name;
    std::string name = v.name;
    // A function body's names mean nothing outside it (every call has
    // them): under the call's path.
    if (run.function || used_names_.contains(name)) {
      // A name inside a function is cut: it is made again at every call.
      name =
          absl::StrCat(run.path, "/",
                       OnnxRunInFunction(run)
                           ? base::Utf8Prefix(v.name, kMaxOnnxFunctionNameBytes)
                           : absl::string_view(v.name));
    }
    while (used_names_.contains(name)) name += "_";
    used_names_.insert(name);
    return name;
  }

  // Reserves the names of the main graph's values.
  void ReserveMainNames() {
    const OnnxGraphRun& main = *e_.main;
    for (const auto* ids : {&main.inputs, &main.initializers}) {
      for (int id : *ids) used_names_.insert(e_.values[id].name);
    }
    for (const OnnxNodeRun& nr : main.nodes) {
      for (int id : nr.outputs) {
        if (id >= 0) used_names_.insert(e_.values[id].name);
      }
    }
  }

  // Sizes one value and adds its tensor (or notes why it has none).
  absl::Status AddTensor(int id, const OnnxGraphRun& run, bool body) {
    if (seen_.contains(id)) return absl::OkStatus();
    seen_.insert(id);
    if (body) ++result_.stats.subgraph_values;
    const OnnxValue& v = e_.values[id];
    absl::StatusOr<Size> size = SizeOf(e_, v);
    if (!size.ok()) return size.status();
    if (!size->bytes) {
      unknown_.push_back(absl::StrCat(v.name, " (", size->reason, ")"));
      unknown_ids_.push_back(id);
      return absl::OkStatus();
    }
    if (*size->bytes == 0) {
      empty_.insert(v.name);
      ++result_.stats.empty_values;
      return absl::OkStatus();
    }
    const std::string name = UniqueName(v, run);
    names_[id] = name;
    v1::Tensor* t = result_.graph->add_tensors();
    t->set_name(name);
    t->set_size_bytes(*size->bytes);
    if (v.constant) {
      t->set_constant(true);
      t->set_folded(v.folded);
      ++result_.stats.weights;
    }
    return absl::OkStatus();
  }

  // Adds the tensors of a run graph, nested runs in place.
  absl::Status AddTensors(const OnnxGraphRun& run, bool body) {
    for (const auto* ids : {&run.inputs, &run.initializers}) {
      for (int id : *ids) {
        if (auto s = AddTensor(id, run, body); !s.ok()) return s;
      }
    }
    for (const OnnxNodeRun& nr : run.nodes) {
      if (Stop()) return internal::ImportCancelled(name_);
      if (OnnxNodeIsCall(nr)) {
        // The call's outputs (values its body makes) keep the caller's
        // names; the rest of the body is named as a subgraph's values.
        for (int id : nr.outputs) {
          if (id < 0) continue;
          if (auto s = AddTensor(id, run, body); !s.ok()) return s;
        }
        if (auto s = AddTensors(*nr.bodies[0].run, body); !s.ok()) return s;
        continue;
      }
      for (const OnnxBodyRun& b : nr.bodies) {
        if (auto s = AddTensors(*b.run, true); !s.ok()) return s;
      }
      for (int id : nr.outputs) {
        if (id < 0) continue;
        if (auto s = AddTensor(id, run, body); !s.ok()) return s;
      }
      if (!nr.bodies.empty() || !nr.captured.empty()) {
        ++result_.stats.control_flow_nodes;
      }
      result_.stats.subgraphs += static_cast<int64_t>(nr.bodies.size());
      skipped_values_ += nr.skipped_values;
      if (nr.skipped_values > 0) ++skipped_nodes_;
    }
    return absl::OkStatus();
  }

  // Fails listing every value whose size is unknown, every named dim
  // without a value, and the nodes whose outputs depend on data.
  absl::Status CheckAllSized() const {
    if (unknown_.empty()) return absl::OkStatus();
    std::set<std::string> missing, data_nodes;
    for (int id : unknown_ids_) {
      for (const SymDim& d : e_.values[id].dims) {
        for (AtomId a : e_.table.Leaves(d)) {
          const DimAtom& atom = e_.table.atom(a);
          if (atom.kind == AtomKind::kSymbol) missing.insert(atom.name);
          if (atom.kind == AtomKind::kUnknown && atom.data_dependent &&
              !atom.origin.empty()) {
            data_nodes.insert(atom.origin);
          }
        }
      }
    }
    const std::string dims =
        missing.empty() ? ""
                        : absl::StrCat(" (symbolic dims without a value: ",
                                       absl::StrJoin(missing, ", "), ")");
    // With dims missing, what looks data-dependent may only wait for them.
    const std::string data =
        data_nodes.empty() || !missing.empty()
            ? ""
            : absl::StrCat("; sizes depending on tensor data come from ",
                           ListSome({data_nodes.begin(), data_nodes.end()}));
    // What to do first; then a few of the values, however many there are.
    return Invalid(
        name_, ": the size of ", unknown_.size(),
        " value(s) is unknown after shape inference", dims,
        ". Set symbolic dims with --dim NAME=VALUE and shapes with --input "
        "NAME=SHAPE (e.g. 1x3x224x224)",
        data, ". Unknown: ", base::ListFew(unknown_, kMaxExamples));
  }

  // Appends planned tensors of `ids` (in order, once) to a list that only
  // this appends to. A short list is searched; a long one gets a set of
  // its names (most ops list a few tensors: no set for each).
  void AppendPlanned(absl::Span<const int> ids,
                     google::protobuf::RepeatedPtrField<std::string>* list) {
    for (int id : ids) {
      if (id < 0 || !Planned(id)) continue;
      const std::string& n = names_.at(id);
      auto set = listed_.find(list);
      if (set == listed_.end() && list->size() >= kSearchedList) {
        set = listed_
                  .emplace(list, absl::flat_hash_set<std::string>(list->begin(),
                                                                  list->end()))
                  .first;
      }
      if (set != listed_.end()) {
        if (!set->second.insert(n).second) continue;
      } else if (std::find(list->begin(), list->end(), n) != list->end()) {
        continue;
      }
      *list->Add() = n;
    }
  }

  // The node's name, or OpType_index when it has none or repeats one.
  std::string OpName(const OnnxGraphRun& run, const OnnxNodeRun& nr) {
    const onnx::NodeProto& node = run.graph->node(nr.index);
    // Inside a function the names repeat at every call: cut short (the
    // op is named under its call's path).
    std::string name(
        OnnxRunInFunction(run)
            ? base::Utf8Prefix(node.name(), kMaxOnnxFunctionNameBytes)
            : absl::string_view(node.name()));
    if (name.empty() || used_ops_.contains(name)) {
      name = absl::StrCat(name.empty() ? node.op_type() : name, "_", nr.index);
    }
    if (used_ops_.contains(name) && !run.path.empty()) {
      name = run.path + "/" + name;
    }
    while (used_ops_.contains(name)) absl::StrAppend(&name, "_");
    used_ops_.insert(name);
    return name;
  }

  v1::Op* NewOp(const std::string& name) {
    v1::Op* op = result_.graph->add_ops();
    op->set_name(name);
    used_ops_.insert(name);
    return op;
  }

  // True (and from then on) once the token fires; polled per node.
  bool Stop() {
    stopped_ = stopped_ || internal::ShouldStop(cancel_, ++nodes_seen_);
    return stopped_;
  }

  void AddOps(const OnnxGraphRun& run) {
    for (const OnnxNodeRun& nr : run.nodes) {
      if (Stop()) return;
      const std::string name = OpName(run, nr);
      if (OnnxNodeIsCall(nr)) {
        AddCall(name, nr);
        continue;
      }
      if (nr.bodies.empty()) {
        v1::Op* op = NewOp(name);
        AppendPlanned(nr.inputs, op->mutable_inputs());
        AppendPlanned(nr.captured, op->mutable_inputs());
        AppendPlanned(nr.outputs, op->mutable_outputs());
        continue;
      }
      const std::string& type = run.graph->node(nr.index).op_type();
      if (type == "If") {
        AddIf(name, nr);
      } else {
        AddLoop(name, nr, type == "Scan");
      }
    }
  }

  // A call of one of the model's functions: its body's nodes in its place
  // (as ONNX Runtime runs a function it inlined); an output that is not a
  // value the body makes (a formal input passed through, one value given
  // twice) is a copy made at the end.
  void AddCall(const std::string& name, const OnnxNodeRun& nr) {
    const OnnxGraphRun& body = *nr.bodies[0].run;
    AddOps(body);
    std::vector<int> from, to;
    for (size_t k = 0; k < nr.outputs.size() && k < body.outputs.size(); ++k) {
      if (nr.outputs[k] < 0 || nr.outputs[k] == body.outputs[k]) continue;
      from.push_back(body.outputs[k]);
      to.push_back(nr.outputs[k]);
    }
    if (to.empty()) return;
    v1::Op* copy = NewOp(name + "/outputs");
    AppendPlanned(from, copy->mutable_inputs());
    AppendPlanned(to, copy->mutable_outputs());
  }

  // Both branches (or the one that runs) one after the other.
  void AddIf(const std::string& name, const OnnxNodeRun& nr) {
    for (size_t b = 0; b < nr.bodies.size(); ++b) {
      const OnnxGraphRun& body = *nr.bodies[b].run;
      const std::string prefix = name + "/" + nr.bodies[b].attribute;
      v1::Op* enter = NewOp(prefix + "/enter");
      if (b == 0) AppendPlanned({nr.inputs[0]}, enter->mutable_inputs());
      AppendPlanned(body.captured, enter->mutable_inputs());
      AddOps(body);
      v1::Op* exit = NewOp(prefix + "/exit");
      AppendPlanned(body.outputs, exit->mutable_inputs());
      AppendPlanned(body.captured, exit->mutable_inputs());
      if (b + 1 == nr.bodies.size()) {
        AppendPlanned(nr.outputs, exit->mutable_outputs());
      }
    }
  }

  // One iteration of a Loop or Scan body; carried values, scan inputs and
  // scan outputs live across all of it.
  void AddLoop(const std::string& name, const OnnxNodeRun& nr, bool scan) {
    const OnnxGraphRun& body = *nr.bodies[0].run;
    const std::string prefix = name + "/" + nr.bodies[0].attribute;
    const size_t carried = std::min<size_t>(nr.carried, nr.outputs.size());
    const std::vector<int> final_values(nr.outputs.begin(),
                                        nr.outputs.begin() + carried);
    const std::vector<int> scan_outputs(nr.outputs.begin() + carried,
                                        nr.outputs.end());
    v1::Op* enter = NewOp(prefix + "/enter");
    AppendPlanned(nr.inputs, enter->mutable_inputs());
    AppendPlanned(body.captured, enter->mutable_inputs());
    AppendPlanned(body.inputs, enter->mutable_outputs());
    AppendPlanned(scan_outputs, enter->mutable_outputs());
    AddOps(body);
    v1::Op* exit = NewOp(prefix + "/exit");
    AppendPlanned(body.outputs, exit->mutable_inputs());
    AppendPlanned(body.captured, exit->mutable_inputs());
    AppendPlanned(body.inputs, exit->mutable_inputs());
    AppendPlanned(scan_outputs, exit->mutable_inputs());
    if (scan && carried <= nr.inputs.size()) {
      AppendPlanned(absl::MakeConstSpan(nr.inputs).subspan(carried),
                    exit->mutable_inputs());
    }
    AppendPlanned(final_values, exit->mutable_outputs());
  }

  void AddWarnings() {
    result_.warnings = e_.warnings;
    if (skipped_values_ > 0) {
      result_.warnings.push_back(absl::StrCat(
          skipped_nodes_,
          " If node(s) run one branch only with these shapes: the other "
          "branch's ",
          skipped_values_, " value(s) are not planned"));
    }
    if (!empty_.empty()) {
      result_.warnings.push_back(
          absl::StrCat(empty_.size(),
                       " value(s) with zero elements hold no memory and are "
                       "not planned: ",
                       ListSome({empty_.begin(), empty_.end()})));
    }
  }

  const OnnxEvaluation& e_;                      // what is flattened
  const std::string name_;                       // for messages
  const base::CancelToken* cancel_;              // may be null
  int64_t nodes_seen_ = 0;                       // for polling cancel_
  bool stopped_ = false;                         // cancel_ fired
  absl::flat_hash_map<int, std::string> names_;  // value id -> tensor name
  absl::flat_hash_set<int> seen_;                // value ids sized
  absl::flat_hash_set<std::string> used_names_;  // tensor names taken
  absl::flat_hash_set<std::string> used_ops_;    // op names taken
  // Names already in each op's input or output list.
  // Lists this long (AppendPlanned) keep a set of their names.
  static constexpr int kSearchedList = 16;
  absl::flat_hash_map<const void*, absl::flat_hash_set<std::string>> listed_;
  std::set<std::string> empty_;       // zero-element values
  std::vector<std::string> unknown_;  // "name (reason)"
  std::vector<int> unknown_ids_;      // their value ids
  int64_t skipped_values_ = 0;        // values of If branches that never run
  int64_t skipped_nodes_ = 0;         // If nodes running one branch
  ImportedModel result_;              // what Build returns
};

}  // namespace

absl::StatusOr<int64_t> OnnxTensorBytes(int32_t elem_type,
                                        const std::vector<int64_t>& dims,
                                        absl::string_view what) {
  if (elem_type == kStringType) {
    return Invalid(what, " holds strings: memplan cannot plan string tensors");
  }
  const int bits = OnnxElementBits(elem_type);
  if (bits == 0) return Invalid(what, " has unknown element type ", elem_type);
  int64_t elements = 1;
  for (int64_t d : dims) {
    if (d < 0) return Invalid(what, " has negative dim ", d);
    if (__builtin_mul_overflow(elements, d, &elements)) {
      return Invalid(what, " has more elements than 64 bits count");
    }
  }
  int64_t total_bits = 0;
  if (__builtin_mul_overflow(elements, bits, &total_bits) ||
      total_bits > INT64_MAX - 7) {
    return Invalid(what, " is larger than 64 bits count");
  }
  return (total_bits + 7) / 8;
}

namespace {

// An import's error as the user sees it: the model file's name first, the
// model's text it quotes escaped (a name holding a newline cannot start a line
// of a log), and the warnings the import made before it failed (a dim defaulted
// to 1 is often the cause: Silero VAD's Conv then sizes a negative dim).
absl::Status ImportError(const absl::Status& s, absl::string_view name,
                         const std::vector<std::string>& warnings) {
  if (s.ok() || s.code() == absl::StatusCode::kDeadlineExceeded) return s;
  std::string message = base::SafeText(s.message());
  // Every message names the file (a node's error began with the node).
  const std::string file = base::SafeText(name);
  if (!file.empty() && !absl::StartsWith(message, absl::StrCat(file, ":"))) {
    message = absl::StrCat(file, ": ", message);
  }
  constexpr size_t kMaxNotes = 4;
  for (size_t i = 0; i < warnings.size() && i < kMaxNotes; ++i) {
    absl::StrAppend(&message, i == 0 ? " (import warnings: " : "; ",
                    base::SafeText(warnings[i]));
  }
  if (warnings.size() > kMaxNotes) {
    absl::StrAppend(&message, "; and ", warnings.size() - kMaxNotes, " more");
  }
  if (!warnings.empty()) message += ")";
  absl::Status out(s.code(), message);
  s.ForEachPayload([&out](absl::string_view url, const absl::Cord& payload) {
    out.SetPayload(url, payload);
  });
  return out;
}

// ImportOnnx, the warnings made so far in *kept, on failure too.
absl::StatusOr<ImportedModel> ImportOnnxWithWarnings(
    absl::string_view bytes, absl::string_view name,
    const ModelOptions& options, std::vector<std::string>* kept);

}  // namespace

absl::StatusOr<ImportedModel> ImportOnnx(absl::string_view bytes,
                                         absl::string_view name,
                                         const ModelOptions& options) {
  std::vector<std::string> warnings;
  absl::StatusOr<ImportedModel> imported =
      ImportOnnxWithWarnings(bytes, name, options, &warnings);
  if (!imported.ok()) return ImportError(imported.status(), name, warnings);
  return imported;
}

namespace {

absl::StatusOr<ImportedModel> ImportOnnxWithWarnings(
    absl::string_view bytes, absl::string_view name,
    const ModelOptions& options, std::vector<std::string>* kept) {
  std::vector<std::string>& warnings = *kept;
  // The parsed model lives on an arena: its hundreds of thousands of
  // messages go at once when the import ends (declared first: last freed).
  google::protobuf::Arena arena;
  absl::StatusOr<onnx::ModelProto*> model =
      Prepare(bytes, name, options, &arena, &warnings);
  if (!model.ok()) return model.status();
  OnnxEvalOptions eval;
  eval.dims = options.dims;
  eval.shapes = options.shapes;
  eval.cancel = options.cancel;
  absl::StatusOr<OnnxEvaluation> e = EvaluateOnnxShapes(**model, eval, name);
  if (!e.ok()) return e.status();
  GraphBuilder builder(*e, name, (*model)->graph().name(), options.cancel);
  absl::StatusOr<ImportedModel> result = builder.Build();
  if (!result.ok()) return result.status();
  warnings.insert(warnings.end(), result->warnings.begin(),
                  result->warnings.end());
  result->warnings = warnings;
  return result;
}

}  // namespace

}  // namespace memplan::formats
