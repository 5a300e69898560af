#include "onnx/import.h"

#include <algorithm>
#include <cctype>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "onnx/defs/schema.h"
#include "onnx/onnx_pb.h"
#include "onnx/shape_inference/implementation.h"
#include "onnx/shapes.h"

namespace memplan::formats {
namespace {

// Debian's libonnx is built with ONNX_NAMESPACE=onnx (and ONNX_ML); the alias
// keeps this file right for any namespace the library was built with.
namespace onnx = ::ONNX_NAMESPACE;

// Values, dims or names listed in one message, at most this many.
constexpr int kMaxListed = 20;
// Models larger than this are refused before they are read (protobuf's
// own limit is 2 GiB).
constexpr size_t kMaxModelBytes = (size_t{1} << 31) - 1;
constexpr int kStringType = 8;
// Op types renamed while ONNX's inference runs (see HideChangedOps).
constexpr char kHiddenPrefix[] = "memplan.hidden.";

// "a, b, c, and 4 more" from a sorted list.
std::string ListSome(const std::vector<std::string>& names) {
  std::vector<std::string> shown(
      names.begin(),
      names.begin() + std::min<size_t>(names.size(), kMaxListed));
  std::string out = absl::StrJoin(shown, ", ");
  if (names.size() > shown.size()) {
    absl::StrAppend(&out, ", and ", names.size() - shown.size(), " more");
  }
  return out;
}

// Parses the bytes; protobuf accepts some garbage, so a model also needs a
// graph with something in it.
absl::StatusOr<onnx::ModelProto> ParseModel(absl::string_view bytes,
                                            absl::string_view name) {
  onnx::ModelProto model;
  if (bytes.size() > kMaxModelBytes ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Invalid(name,
                   ": not an ONNX model, or truncated: it does not parse as "
                   "an onnx.ModelProto");
  }
  const onnx::GraphProto& g = model.graph();
  if (!model.has_graph() || (g.node_size() == 0 && g.input_size() == 0)) {
    return Invalid(name, ": not an ONNX model: it has no graph");
  }
  return model;
}

// Calls f(graph) for the main graph and every subgraph, outer first.
template <typename F>
void ForEachGraph(const onnx::GraphProto& g, const F& f) {
  f(g);
  for (const onnx::NodeProto& n : g.node()) {
    for (const onnx::AttributeProto& a : n.attribute()) {
      if (a.has_g()) ForEachGraph(a.g(), f);
      for (const onnx::GraphProto& s : a.graphs()) ForEachGraph(s, f);
    }
  }
}

template <typename F>
void ForEachMutableGraph(onnx::GraphProto* g, const F& f) {
  f(g);
  for (onnx::NodeProto& n : *g->mutable_node()) {
    for (onnx::AttributeProto& a : *n.mutable_attribute()) {
      if (a.has_g()) ForEachMutableGraph(a.mutable_g(), f);
      for (onnx::GraphProto& s : *a.mutable_graphs()) {
        ForEachMutableGraph(&s, f);
      }
    }
  }
}

// Elements the typed data fields of a tensor of `type` hold for `count`
// elements (complex types hold two numbers each, 4-bit types two to an
// int32), and how many they hold.
void TypedData(const onnx::TensorProto& t, int64_t count, int64_t* expected,
               int64_t* held) {
  const int32_t type = t.data_type();
  *held = t.float_data_size() + t.int32_data_size() + t.int64_data_size() +
          t.double_data_size() + t.uint64_data_size() + t.string_data_size();
  *expected = count;
  if (type == onnx::TensorProto::COMPLEX64 ||
      type == onnx::TensorProto::COMPLEX128) {
    *expected = count * 2;
  } else if (OnnxElementBits(type) == 4) {
    *expected = (count + 1) / 2;
  }
}

// Checks one tensor's data against its dims; clears data too large for the
// evaluation to fold (only shapes matter, and the model is copied several
// times) and marks tensors without data as external, so that ONNX 1.12's
// inference, which reads data without checking its length, throws instead
// of reading past it.
absl::Status SanitizeTensor(onnx::TensorProto* t, absl::string_view where) {
  if (t->data_location() == onnx::TensorProto::EXTERNAL)
    return absl::OkStatus();
  int64_t count = 1;
  for (int64_t d : t->dims()) {
    if (d < 0) return absl::OkStatus();  // the evaluation names it
    if (__builtin_mul_overflow(count, d, &count)) {
      return Invalid(where, ": tensor '", t->name(),
                     "' has more elements than 64 bits count");
    }
  }
  int64_t expected = 0, held = 0;
  TypedData(*t, count, &expected, &held);
  const int bits = OnnxElementBits(t->data_type());
  const bool raw = t->has_raw_data();
  const int64_t raw_expected =
      bits == 0 || count > INT64_MAX / bits ? -1 : (count * bits + 7) / 8;
  if ((raw && held > 0) ||
      (raw && static_cast<int64_t>(t->raw_data().size()) != raw_expected) ||
      (held > 0 && held != expected)) {
    return Invalid(where, ": tensor '", t->name(), "' holds ",
                   raw ? t->raw_data().size() : held,
                   raw ? " bytes" : " numbers", " of data that do not match ",
                   "its dims and type");
  }
  if (count > kMaxOnnxContent || (!raw && held == 0 && count > 0)) {
    t->clear_raw_data();
    t->clear_float_data();
    t->clear_int32_data();
    t->clear_int64_data();
    t->clear_double_data();
    t->clear_uint64_data();
    t->clear_string_data();
    t->set_data_location(onnx::TensorProto::EXTERNAL);
  }
  return absl::OkStatus();
}

// SanitizeTensor on every initializer and tensor attribute of every graph.
absl::Status SanitizeTensors(onnx::ModelProto* model, absl::string_view name) {
  absl::Status status;
  auto check = [&](onnx::TensorProto* t, const std::string& where) {
    if (status.ok()) status = SanitizeTensor(t, where);
  };
  ForEachMutableGraph(model->mutable_graph(), [&](onnx::GraphProto* g) {
    for (onnx::TensorProto& t : *g->mutable_initializer()) {
      check(&t, std::string(name));
    }
    for (int i = 0; i < g->node_size(); ++i) {
      onnx::NodeProto& n = *g->mutable_node(i);
      const std::string where =
          absl::StrCat(name, ": ", OnnxNodeLabel(n, i, ""));
      for (onnx::AttributeProto& a : *n.mutable_attribute()) {
        if (a.has_t()) check(a.mutable_t(), where);
        for (onnx::TensorProto& t : *a.mutable_tensors()) check(&t, where);
      }
    }
  });
  return status;
}

// --- Flags checked against the model
// -------------------------------------------

// Named dims declared on the main graph's inputs, outputs and value_info.
std::set<std::string> DeclaredDims(const onnx::GraphProto& g) {
  std::set<std::string> dims;
  for (const auto* list : {&g.input(), &g.output(), &g.value_info()}) {
    for (const onnx::ValueInfoProto& vi : *list) {
      for (const auto& d : vi.type().tensor_type().shape().dim()) {
        if (d.has_dim_param() && !d.dim_param().empty()) {
          dims.insert(d.dim_param());
        }
      }
    }
  }
  return dims;
}

// --dim names must be the model's; the error lists them.
absl::Status CheckDimNames(const ModelOptions& options,
                           const onnx::GraphProto& g) {
  const std::set<std::string> declared = DeclaredDims(g);
  std::vector<std::string> unknown;
  for (const auto& [dim, value] : options.dims) {
    if (declared.count(dim) == 0) unknown.push_back(dim.substr(0, 64));
  }
  if (unknown.empty()) return absl::OkStatus();
  const std::vector<std::string> valid(declared.begin(), declared.end());
  return Invalid("--dim ", absl::StrJoin(unknown, ", "),
                 ": the model has no dim of that name; ",
                 valid.empty() ? "it has no named dims"
                               : "its named dims are: " + ListSome(valid));
}

// Every value name in the model: inputs, initializers, node outputs.
absl::flat_hash_set<std::string> AllValueNames(const onnx::GraphProto& g) {
  absl::flat_hash_set<std::string> names;
  ForEachGraph(g, [&](const onnx::GraphProto& s) {
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
  ForEachGraph(g, [&](const onnx::GraphProto& s) {
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

// Required attributes the node's schema lists must be there, of their
// type: ONNX 1.12's inference functions read some without checking (a Scan
// without num_scan_inputs crashes it). Ops whose definition changed after
// the opsets ONNX knows are left to memplan's rules.
absl::Status CheckAttributes(const onnx::ModelProto& model,
                             absl::string_view name) {
  std::map<std::string, int> opsets;
  for (const onnx::OperatorSetIdProto& o : model.opset_import()) {
    opsets[o.domain() == "ai.onnx" ? "" : o.domain()] =
        static_cast<int>(o.version());
  }
  absl::Status status;
  ForEachGraph(model.graph(), [&](const onnx::GraphProto& g) {
    for (int i = 0; i < g.node_size() && status.ok(); ++i) {
      const onnx::NodeProto& n = g.node(i);
      const std::string domain = n.domain() == "ai.onnx" ? "" : n.domain();
      auto opset = opsets.find(domain);
      if (opset == opsets.end()) continue;
      if (domain.empty() &&
          OnnxOpChangedAfterKnownOpsets(n.op_type(), opset->second)) {
        continue;
      }
      const onnx::OpSchema* schema =
          onnx::OpSchemaRegistry::Schema(n.op_type(), opset->second, domain);
      if (schema == nullptr) continue;
      for (const auto& [attr, spec] : schema->attributes()) {
        const onnx::AttributeProto* a = nullptr;
        for (const onnx::AttributeProto& x : n.attribute()) {
          if (x.name() == attr) a = &x;
        }
        if ((a == nullptr && spec.required) ||
            (a != nullptr && a->type() != spec.type &&
             spec.type != onnx::AttributeProto::UNDEFINED)) {
          status = Invalid(
              name, ": node ",
              n.name().empty() ? absl::StrCat("#", i) : "'" + n.name() + "'",
              " (", n.op_type(), "): attribute '", attr, "' is ",
              a == nullptr ? "missing" : "not of its type");
        }
      }
    }
  });
  return status;
}

// Every name a node reads must be defined before it, in its graph or an
// enclosing one, and every graph output too: checked before ONNX's
// inference runs (it dereferences the type of an undefined input).
absl::Status CheckReads(
    const onnx::GraphProto& g,
    std::vector<const absl::flat_hash_set<std::string>*>* outer,
    const std::string& path, absl::string_view name) {
  absl::flat_hash_set<std::string> defined;
  for (const auto& vi : g.input()) defined.insert(vi.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  for (const auto& t : g.sparse_initializer())
    defined.insert(t.values().name());
  absl::flat_hash_map<std::string, int> producer;
  for (int i = 0; i < g.node_size(); ++i) {
    for (const std::string& o : g.node(i).output()) producer.emplace(o, i);
  }
  auto visible = [&](const std::string& n) {
    if (defined.contains(n)) return true;
    for (const auto* scope : *outer) {
      if (scope->contains(n)) return true;
    }
    return false;
  };
  outer->push_back(&defined);
  absl::Status status;
  for (int i = 0; i < g.node_size() && status.ok(); ++i) {
    const onnx::NodeProto& node = g.node(i);
    for (const std::string& in : node.input()) {
      if (in.empty() || visible(in)) continue;
      auto p = producer.find(in);
      status =
          p == producer.end()
              ? Invalid(OnnxNodeLabel(node, i, path), " reads '", in,
                        "', which is no graph input, initializer or node "
                        "output")
              : Invalid(OnnxNodeLabel(node, i, path), " reads '", in,
                        "' before ",
                        OnnxNodeLabel(g.node(p->second), p->second, path),
                        " produces it: nodes are not in topological order");
      break;
    }
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.has_g() && status.ok()) {
        status = CheckReads(a.g(), outer,
                            OnnxSubgraphPath(path, node, i, a.name()), name);
      }
    }
    for (const std::string& o : node.output()) {
      if (!o.empty()) defined.insert(o);
    }
  }
  for (const onnx::ValueInfoProto& vi : g.output()) {
    if (!status.ok() || visible(vi.name())) continue;
    status =
        Invalid(path.empty() ? std::string(name) : path, ": graph output '",
                vi.name(), "' is produced by no node (a truncated model?)");
  }
  outer->pop_back();
  return status;
}

// --- Overrides applied before ONNX's inference
// ---------------------------------

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

// --- ONNX's inference
// ---------------------------------------------------------

// The model's opset of the default domain, or -1.
int DefaultOpset(const onnx::ModelProto& model) {
  int version = -1;
  for (const onnx::OperatorSetIdProto& o : model.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") {
      version = static_cast<int>(o.version());
    }
  }
  return version;
}

// Renames ops whose shapes changed after the opsets ONNX 1.12 knows, so its
// inference leaves them to memplan's rules instead of applying an older
// schema (ReduceMean-13 would reduce every axis of a ReduceMean-18).
void HideChangedOps(onnx::ModelProto* model, bool hide) {
  const int opset = DefaultOpset(*model);
  if (opset <= OnnxNewestKnownOpset()) return;
  ForEachMutableGraph(model->mutable_graph(), [&](onnx::GraphProto* g) {
    for (onnx::NodeProto& n : *g->mutable_node()) {
      if (!(n.domain().empty() || n.domain() == "ai.onnx")) continue;
      if (hide && OnnxOpChangedAfterKnownOpsets(n.op_type(), opset)) {
        n.set_op_type(kHiddenPrefix + n.op_type());
      } else if (!hide && absl::StartsWith(n.op_type(), kHiddenPrefix)) {
        n.set_op_type(n.op_type().substr(sizeof(kHiddenPrefix) - 1));
      }
    }
  });
}

// Runs ONNX's shape inference, catching whatever ONNX throws. Its data
// propagation stays off: memplan's evaluation folds shape computations
// itself, and ONNX 1.12's propagation functions dereference the type of an
// input that has none (an output of an op without a schema) and crash.
absl::Status InferShapes(onnx::ModelProto* model, absl::string_view name) {
  std::string error;
  HideChangedOps(model, true);
  try {
    onnx::shape_inference::InferShapes(
        *model, onnx::OpSchemaRegistry::Instance(),
        onnx::ShapeInferenceOptions(/*check_type_val=*/false,
                                    /*strict_mode_val=*/0,
                                    /*data_prop_val=*/false));
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "unknown exception";
  }
  HideChangedOps(model, false);
  if (error.empty()) return absl::OkStatus();
  if (error.size() > 300) error = error.substr(0, 300) + "...";
  return Invalid(name, ": ONNX shape inference failed: ", error);
}

// Parses, applies the flags and runs ONNX's inference.
absl::StatusOr<onnx::ModelProto> Prepare(absl::string_view bytes,
                                         absl::string_view name,
                                         const ModelOptions& options,
                                         std::vector<std::string>* warnings) {
  absl::StatusOr<onnx::ModelProto> model = ParseModel(bytes, name);
  if (!model.ok()) return model.status();
  if (auto s = SanitizeTensors(&*model, name); !s.ok()) return s;
  if (auto s = CheckAttributes(*model, name); !s.ok()) return s;
  std::vector<const absl::flat_hash_set<std::string>*> scopes;
  if (auto s = CheckReads(model->graph(), &scopes, "", name); !s.ok()) return s;
  onnx::GraphProto* g = model->mutable_graph();
  if (auto s = CheckDimNames(options, *g); !s.ok()) return s;
  if (auto s = CheckShapeNames(options, *g); !s.ok()) return s;
  ApplyDims(options, g);
  if (auto s = ApplyShapes(options, g); !s.ok()) return s;
  DefaultUnnamedDims(g, warnings);
  if (auto s = InferShapes(&*model, name); !s.ok()) return s;
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
               absl::string_view graph_name)
      : e_(e), name_(name) {
    result_.graph.set_name(graph_name.empty() ? std::string(name)
                                              : std::string(graph_name));
  }

  absl::StatusOr<ImportedModel> Build() {
    ReserveMainNames();
    if (auto s = AddTensors(*e_.main, /*body=*/false); !s.ok()) return s;
    if (auto s = CheckAllSized(); !s.ok()) return s;
    AddOps(*e_.main);
    for (int id : e_.main->inputs) {
      if (Planned(id)) result_.graph.add_inputs(names_.at(id));
    }
    for (int id : e_.main->outputs) {
      if (Planned(id)) result_.graph.add_outputs(names_.at(id));
    }
    AddWarnings();
    result_.stats.tensors = result_.graph.tensors_size();
    result_.stats.ops = result_.graph.ops_size();
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
    if (used_names_.contains(name)) name = run.path + "/" + v.name;
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
    v1::Tensor* t = result_.graph.add_tensors();
    t->set_name(name);
    t->set_size_bytes(*size->bytes);
    if (v.constant) {
      t->set_constant(true);
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
    return Invalid(
        name_, ": the size of ", unknown_.size(),
        " value(s) is unknown after shape inference", dims, ": ",
        ListSome(unknown_), data,
        ". Set symbolic dims with --dim NAME=VALUE and shapes with --input "
        "NAME=SHAPE (e.g. 1x3x224x224)");
  }

  // Appends planned tensors of `ids` (in order, once) to a list.
  void AppendPlanned(const std::vector<int>& ids,
                     google::protobuf::RepeatedPtrField<std::string>* list) {
    absl::flat_hash_set<std::string>& listed = listed_[list];
    for (int id : ids) {
      if (id < 0 || !Planned(id)) continue;
      const std::string& n = names_.at(id);
      if (listed.insert(n).second) *list->Add() = n;
    }
  }

  // The node's name, or OpType_index when it has none or repeats one.
  std::string OpName(const OnnxGraphRun& run, const OnnxNodeRun& nr) {
    const onnx::NodeProto& node = run.graph->node(nr.index);
    std::string name = node.name();
    if (name.empty() || used_ops_.contains(name)) {
      name = absl::StrCat(node.name().empty() ? node.op_type() : node.name(),
                          "_", nr.index);
    }
    if (used_ops_.contains(name) && !run.path.empty()) {
      name = run.path + "/" + name;
    }
    while (used_ops_.contains(name)) absl::StrAppend(&name, "_");
    used_ops_.insert(name);
    return name;
  }

  v1::Op* NewOp(const std::string& name) {
    v1::Op* op = result_.graph.add_ops();
    op->set_name(name);
    used_ops_.insert(name);
    return op;
  }

  void AddOps(const OnnxGraphRun& run) {
    for (const OnnxNodeRun& nr : run.nodes) {
      const std::string name = OpName(run, nr);
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
      AppendPlanned({nr.inputs.begin() + carried, nr.inputs.end()},
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
  absl::flat_hash_map<int, std::string> names_;  // value id -> tensor name
  absl::flat_hash_set<int> seen_;                // value ids sized
  absl::flat_hash_set<std::string> used_names_;  // tensor names taken
  absl::flat_hash_set<std::string> used_ops_;    // op names taken
  // Names already in each op's input or output list.
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

absl::StatusOr<ImportedModel> ImportOnnx(absl::string_view bytes,
                                         absl::string_view name,
                                         const ModelOptions& options) {
  std::vector<std::string> warnings;
  absl::StatusOr<onnx::ModelProto> model =
      Prepare(bytes, name, options, &warnings);
  if (!model.ok()) return model.status();
  OnnxEvalOptions eval;
  eval.dims = options.dims;
  eval.shapes = options.shapes;
  absl::StatusOr<OnnxEvaluation> e = EvaluateOnnxShapes(*model, eval, name);
  if (!e.ok()) return e.status();
  GraphBuilder builder(*e, name, model->graph().name());
  absl::StatusOr<ImportedModel> result = builder.Build();
  if (!result.ok()) return result.status();
  warnings.insert(warnings.end(), result->warnings.begin(),
                  result->warnings.end());
  result->warnings = std::move(warnings);
  return result;
}

// --- Describing a model
// ---------------------------------------------------------

namespace {

// A dim as `memplan inspect` shows it: a number, a name or expression, or
// "?" when it depends on something unknown.
std::string ShowDim(const DimTable& table, const SymDim& d) {
  if (d.is_constant()) return absl::StrCat(d.constant());
  for (AtomId a : table.Leaves(d)) {
    if (table.atom(a).kind == AtomKind::kUnknown) return "?";
  }
  return table.ToString(d);
}

// A graph input or output from its declared type.
ValueSummary DeclaredSummary(const onnx::ValueInfoProto& vi) {
  ValueSummary v;
  v.name = vi.name();
  const onnx::TypeProto::Tensor& t = vi.type().tensor_type();
  v.element_type = OnnxElementTypeName(t.elem_type());
  std::vector<int64_t> dims;
  bool numbers = t.has_shape();
  for (const auto& d : t.shape().dim()) {
    if (d.has_dim_value() && d.dim_value() >= 0) {
      v.dims.push_back(absl::StrCat(d.dim_value()));
      dims.push_back(d.dim_value());
    } else {
      v.dims.push_back(
          d.has_dim_param() && !d.dim_param().empty() ? d.dim_param() : "?");
      numbers = false;
    }
  }
  if (numbers) {
    absl::StatusOr<int64_t> bytes =
        OnnxTensorBytes(t.elem_type(), dims, v.name);
    if (bytes.ok()) v.bytes = *bytes;
  }
  return v;
}

// Bytes of the data a graph keeps: initializers and Constant nodes.
int64_t ConstantBytes(const onnx::GraphProto& g) {
  int64_t total = 0;
  auto add = [&](int32_t type, const std::vector<int64_t>& dims) {
    absl::StatusOr<int64_t> b = OnnxTensorBytes(type, dims, "constant");
    if (b.ok() && *b <= INT64_MAX - total) total += *b;
  };
  ForEachGraph(g, [&](const onnx::GraphProto& s) {
    for (const onnx::TensorProto& t : s.initializer()) {
      add(t.data_type(), {t.dims().begin(), t.dims().end()});
    }
    for (const onnx::NodeProto& n : s.node()) {
      if (n.op_type() != "Constant") continue;
      for (const onnx::AttributeProto& a : n.attribute()) {
        if (a.name() == "value") {
          add(a.t().data_type(), {a.t().dims().begin(), a.t().dims().end()});
        } else if (a.name() == "value_float" || a.name() == "value_int") {
          add(a.name() == "value_int" ? 7 : 1, {});
        } else if (a.name() == "value_floats" || a.name() == "value_ints") {
          add(a.name() == "value_ints" ? 7 : 1,
              {a.name() == "value_ints" ? a.ints_size() : a.floats_size()});
        }
      }
    }
  });
  return total;
}

}  // namespace

namespace {

// A value's summary from what the evaluation knows of it.
ValueSummary EvaluatedSummary(const OnnxEvaluation& e, const OnnxValue& v) {
  ValueSummary out;
  out.name = v.name;
  out.element_type = OnnxElementTypeName(v.elem_type);
  std::vector<int64_t> dims;
  for (const SymDim& d : v.dims) {
    out.dims.push_back(ShowDim(e.table, d));
    if (d.is_constant()) dims.push_back(d.constant());
  }
  if (dims.size() == v.dims.size()) {
    absl::StatusOr<int64_t> b = OnnxTensorBytes(v.elem_type, dims, v.name);
    if (b.ok()) out.bytes = *b;
  }
  return out;
}

// Replaces the declared outputs by what the evaluation gives (symbolic dims
// kept); leaves them when it cannot run.
void EvaluateOutputs(const onnx::ModelProto& model, absl::string_view name,
                     ModelSummary* s) {
  onnx::ModelProto inferred = model;
  if (!SanitizeTensors(&inferred, name).ok()) return;
  if (!CheckAttributes(inferred, name).ok()) return;
  std::vector<const absl::flat_hash_set<std::string>*> scopes;
  if (!CheckReads(inferred.graph(), &scopes, "", name).ok()) return;
  if (!InferShapes(&inferred, name).ok()) return;
  absl::StatusOr<OnnxEvaluation> e =
      EvaluateOnnxShapes(inferred, OnnxEvalOptions(), name);
  if (!e.ok() || e->main->outputs.size() != s->outputs.size()) return;
  for (size_t i = 0; i < s->outputs.size(); ++i) {
    const OnnxValue& v = e->values[e->main->outputs[i]];
    if (v.has_shape) s->outputs[i] = EvaluatedSummary(*e, v);
  }
}

// Graph inputs (not initializers) and outputs as declared, and the named
// dims of the inputs.
void DeclaredInputsOutputs(const onnx::GraphProto& g, ModelSummary* s) {
  absl::flat_hash_set<std::string> initializers;
  for (const auto& t : g.initializer()) initializers.insert(t.name());
  for (const onnx::ValueInfoProto& vi : g.input()) {
    if (!initializers.contains(vi.name())) {
      s->inputs.push_back(DeclaredSummary(vi));
    }
  }
  for (const onnx::ValueInfoProto& vi : g.output()) {
    s->outputs.push_back(DeclaredSummary(vi));
  }
  std::set<std::string> named;
  for (const ValueSummary& in : s->inputs) {
    for (const std::string& d : in.dims) {
      if (d != "?" && !std::isdigit(static_cast<unsigned char>(d[0]))) {
        named.insert(d);
      }
    }
  }
  s->symbolic_dims.assign(named.begin(), named.end());
}

}  // namespace

absl::StatusOr<ModelSummary> SummarizeOnnx(absl::string_view bytes,
                                           absl::string_view name) {
  absl::StatusOr<onnx::ModelProto> model = ParseModel(bytes, name);
  if (!model.ok()) return model.status();
  const onnx::GraphProto& g = model->graph();
  ModelSummary s;
  s.format = Format::kOnnx;
  s.producer = std::string(absl::StripAsciiWhitespace(
      absl::StrCat(model->producer_name(), " ", model->producer_version())));
  const int opset = DefaultOpset(*model);
  s.version = opset < 0 ? "no default opset" : absl::StrCat("opset ", opset);
  DeclaredInputsOutputs(g, &s);
  s.subgraphs = 0;
  ForEachGraph(g, [&](const onnx::GraphProto& sub) {
    ++s.subgraphs;
    for (const onnx::NodeProto& n : sub.node()) {
      ++s.ops;
      ++s.op_types[n.op_type()];
    }
  });
  s.weight_bytes = ConstantBytes(g);
  EvaluateOutputs(*model, name, &s);
  return s;
}

}  // namespace memplan::formats
