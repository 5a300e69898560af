#include "formats/onnx_import.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "onnx/defs/schema.h"
#include "onnx/onnx_pb.h"
#include "onnx/shape_inference/implementation.h"

namespace memplan::formats {
namespace {

// Debian's libonnx is built with ONNX_NAMESPACE=onnx (and ONNX_ML); the alias
// keeps this file right for any namespace the library was built with.
namespace onnx = ::ONNX_NAMESPACE;

// Unknown values listed by name in one error, at most this many.
constexpr int kMaxListed = 20;
// Models larger than this are refused before they are read (protobuf's
// own limit is 2 GiB).
constexpr std::streamoff kMaxModelBytes = (std::streamoff{1} << 31) - 1;

template <typename... Parts>
absl::Status Invalid(const Parts&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(parts...));
}

// ONNX element types by TensorProto.DataType number, with bits per element
// (0: not a fixed-size type). Numbers past BFLOAT16 (16) are newer than some
// ONNX releases; the fields holding them are plain int32, so they still
// arrive here.
struct ElementType {
  const char* name;  // as in onnx.proto
  int bits;          // bits per element; 0 for none (strings)
};
constexpr ElementType kElementTypes[] = {
    {"UNDEFINED", 0},      {"FLOAT", 32},     {"UINT8", 8},
    {"INT8", 8},           {"UINT16", 16},    {"INT16", 16},
    {"INT32", 32},         {"INT64", 64},     {"STRING", 0},
    {"BOOL", 8},           {"FLOAT16", 16},   {"DOUBLE", 64},
    {"UINT32", 32},        {"UINT64", 64},    {"COMPLEX64", 64},
    {"COMPLEX128", 128},   {"BFLOAT16", 16},  {"FLOAT8E4M3FN", 8},
    {"FLOAT8E4M3FNUZ", 8}, {"FLOAT8E5M2", 8}, {"FLOAT8E5M2FNUZ", 8},
    {"UINT4", 4},          {"INT4", 4},       {"FLOAT4E2M1", 4},
};
constexpr int kStringType = 8;

// A node as messages name it: its name (or #index) and op.
std::string NodeLabel(const onnx::NodeProto& node, int index) {
  std::string op = node.domain().empty() || node.domain() == "ai.onnx"
                       ? node.op_type()
                       : absl::StrCat(node.domain(), ".", node.op_type());
  if (node.name().empty()) return absl::StrCat("node #", index, " (", op, ")");
  return absl::StrCat("node '", node.name(), "' (", op, ", #", index, ")");
}

bool HasSubgraph(const onnx::NodeProto& node) {
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (a.has_g() || a.graphs_size() > 0) return true;
  }
  return false;
}

// Parses the bytes; protobuf accepts some garbage, so a model also needs a
// graph with something in it.
absl::StatusOr<onnx::ModelProto> ParseModel(absl::string_view bytes,
                                            absl::string_view name) {
  onnx::ModelProto model;
  if (bytes.size() > static_cast<size_t>(kMaxModelBytes) ||
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

// --- Overrides applied before shape inference -----------------------------

// Replaces symbolic dims named in `dims` by their values in one type.
void SetNamedDims(const std::map<std::string, int64_t>& dims,
                  onnx::TypeProto* type, std::set<std::string>* used) {
  if (!type->has_tensor_type() || !type->tensor_type().has_shape()) return;
  for (onnx::TensorShapeProto::Dimension& d :
       *type->mutable_tensor_type()->mutable_shape()->mutable_dim()) {
    if (!d.has_dim_param()) continue;
    auto it = dims.find(d.dim_param());
    if (it == dims.end()) continue;
    used->insert(it->first);
    d.set_dim_value(it->second);
  }
}

// Applies --dim to every declared type of the main graph, so that
// inference propagates values instead of symbols.
void ApplyDims(const ModelOptions& options, onnx::GraphProto* g,
               std::vector<std::string>* warnings) {
  std::set<std::string> used;
  for (auto* list :
       {g->mutable_input(), g->mutable_output(), g->mutable_value_info()}) {
    for (onnx::ValueInfoProto& vi : *list) {
      SetNamedDims(options.dims, vi.mutable_type(), &used);
    }
  }
  for (const auto& [dim, value] : options.dims) {
    if (!used.count(dim)) {
      warnings->push_back(absl::StrCat("--dim ", dim, "=", value,
                                       ": no input or output has a dim named '",
                                       dim, "'"));
    }
  }
}

// The declared entry for `name` (an input, output or value_info), or null.
onnx::ValueInfoProto* FindDeclared(onnx::GraphProto* g,
                                   const std::string& name) {
  for (auto* list :
       {g->mutable_input(), g->mutable_output(), g->mutable_value_info()}) {
    for (onnx::ValueInfoProto& vi : *list) {
      if (vi.name() == name) return &vi;
    }
  }
  return nullptr;
}

// Every value name of the main graph: inputs, initializers, node outputs.
absl::flat_hash_set<std::string> MainValueNames(const onnx::GraphProto& g) {
  absl::flat_hash_set<std::string> names;
  for (const auto& vi : g.input()) names.insert(vi.name());
  for (const auto& t : g.initializer()) names.insert(t.name());
  for (const auto& n : g.node()) {
    for (const std::string& o : n.output()) {
      if (!o.empty()) names.insert(o);
    }
  }
  return names;
}

// Applies --input: the whole shape of a value, declared if it was not.
absl::Status ApplyShapes(const ModelOptions& options,
                         onnx::GraphProto* g) {
  absl::flat_hash_set<std::string> names = MainValueNames(*g);
  absl::flat_hash_set<std::string> initializers;
  for (const auto& t : g->initializer()) initializers.insert(t.name());
  for (const auto& [name, shape] : options.shapes) {
    if (!names.contains(name)) {
      return Invalid("--input ", name, ": the model has no value named '", name,
                     "'");
    }
    if (initializers.contains(name)) {
      return Invalid("--input ", name, ": '", name,
                     "' is an initializer; its shape is fixed by the model");
    }
    onnx::ValueInfoProto* vi = FindDeclared(g, name);
    if (vi == nullptr) {
      vi = g->add_value_info();
      vi->set_name(name);
    }
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
      if (d->has_dim_value() || d->has_dim_param()) continue;
      d->set_dim_value(1);
      warnings->push_back(
          absl::StrCat("graph input '", vi.name(), "': dim ", i,
                       " is dynamic and unnamed; using 1 (set it with --input ",
                       vi.name(), "=SHAPE)"));
    }
  }
}

// Runs ONNX's shape inference (with data propagation, so shapes computed by
// Shape/Gather/Concat chains resolve), catching whatever ONNX throws.
absl::Status InferShapes(onnx::ModelProto* model, absl::string_view name) {
  std::string first_error;
  for (bool data_propagation : {true, false}) {
    onnx::ModelProto attempt = *model;
    try {
      onnx::shape_inference::InferShapes(
          attempt, onnx::OpSchemaRegistry::Instance(),
          onnx::ShapeInferenceOptions(/*check_type_val=*/false,
                                      /*strict_mode_val=*/0, data_propagation));
      *model = std::move(attempt);
      return absl::OkStatus();
    } catch (const std::exception& e) {
      if (first_error.empty()) first_error = e.what();
    } catch (...) {
      if (first_error.empty()) first_error = "unknown exception";
    }
  }
  return Invalid(name, ": ONNX shape inference failed: ", first_error);
}

// --- Sizes ----------------------------------------------------------------

// A size, or why it is not known.
struct Size {
  std::optional<int64_t> bytes;  // set when known
  std::string unknown_reason;    // why not, when not
  std::string missing_dim;       // the symbolic dim lacking a value, if any
};

// The bytes of a value of type `type`; INVALID_ARGUMENT for types memplan
// cannot plan at all (strings, sequences, maps).
absl::StatusOr<Size> SizeOfType(const std::string& name,
                                const onnx::TypeProto* type,
                                const ModelOptions& options) {
  if (type == nullptr || type->value_case() == onnx::TypeProto::VALUE_NOT_SET) {
    return Size{std::nullopt, "no type", ""};
  }
  if (!type->has_tensor_type()) {
    return Invalid("value '", name,
                   "' is not a dense tensor (a sequence, map, optional or "
                   "sparse tensor): memplan plans tensors only");
  }
  const onnx::TypeProto::Tensor& t = type->tensor_type();
  if (t.elem_type() == kStringType) {
    return Invalid("value '", name,
                   "' holds strings, whose size depends on their data: "
                   "memplan cannot plan string tensors");
  }
  if (t.elem_type() == 0) {
    return Size{std::nullopt, "element type unknown", ""};
  }
  if (!t.has_shape()) return Size{std::nullopt, "rank unknown", ""};
  std::vector<int64_t> dims;
  for (int i = 0; i < t.shape().dim_size(); ++i) {
    const onnx::TensorShapeProto::Dimension& d = t.shape().dim(i);
    if (d.has_dim_value()) {
      dims.push_back(d.dim_value());
    } else if (auto it = options.dims.find(d.dim_param());
               d.has_dim_param() && it != options.dims.end()) {
      dims.push_back(it->second);
    } else {
      if (!d.has_dim_param()) {
        return Size{std::nullopt, absl::StrCat("dim ", i, " unknown"), ""};
      }
      return Size{std::nullopt, absl::StrCat("dim '", d.dim_param(), "'"),
                  d.dim_param()};
    }
  }
  absl::StatusOr<int64_t> bytes =
      OnnxTensorBytes(t.elem_type(), dims, absl::StrCat("value '", name, "'"));
  if (!bytes.ok()) return bytes.status();
  return Size{*bytes, "", ""};
}

// The type of an initializer, from its TensorProto.
onnx::TypeProto InitializerType(const onnx::TensorProto& t) {
  onnx::TypeProto type;
  type.mutable_tensor_type()->set_elem_type(t.data_type());
  onnx::TensorShapeProto* s = type.mutable_tensor_type()->mutable_shape();
  for (int64_t d : t.dims()) s->add_dim()->set_dim_value(d);
  return type;
}

// The type a subgraph declares or inferred for `name`, or null.
const onnx::TypeProto* SubgraphType(const onnx::GraphProto& g,
                                    const std::string& name) {
  for (const auto* list : {&g.output(), &g.value_info(), &g.input()}) {
    for (const onnx::ValueInfoProto& vi : *list) {
      if (vi.name() == name && vi.has_type()) return &vi.type();
    }
  }
  return nullptr;
}

// --- If outputs ------------------------------------------------------------

// The number of elements of a fully known shape, or nullopt.
std::optional<int64_t> Elements(const onnx::TypeProto* type,
                                const ModelOptions& options) {
  if (type == nullptr || !type->tensor_type().has_shape()) return std::nullopt;
  int64_t n = 1;
  for (const auto& d : type->tensor_type().shape().dim()) {
    int64_t v = -1;
    if (d.has_dim_value()) v = d.dim_value();
    if (auto it = options.dims.find(d.dim_param());
        d.has_dim_param() && it != options.dims.end()) {
      v = it->second;
    }
    if (v < 0 || __builtin_mul_overflow(n, v, &n)) return std::nullopt;
  }
  return n;
}

// The type inferred for main-graph value `name`, or null.
onnx::ValueInfoProto* InferredInfo(onnx::GraphProto* g,
                                   const std::string& name) {
  for (auto* list : {g->mutable_value_info(), g->mutable_output()}) {
    for (onnx::ValueInfoProto& vi : *list) {
      if (vi.name() == name) return &vi;
    }
  }
  return nullptr;
}

// Conservative sizes for If nodes whose branches give outputs of different
// shapes (inference then leaves dims unknown): declares each such output
// with the shape of its larger branch, so inference can run again and size
// what follows. Returns whether anything changed.
bool DeclareLargerIfBranches(onnx::GraphProto* g,
                             const ModelOptions& options,
                             std::vector<std::string>* warnings) {
  bool changed = false;
  for (int i = 0; i < g->node_size(); ++i) {
    const onnx::NodeProto& node = g->node(i);
    if (node.op_type() != "If" ||
        !(node.domain().empty() || node.domain() == "ai.onnx")) {
      continue;
    }
    for (int k = 0; k < node.output_size(); ++k) {
      if (node.output(k).empty()) continue;
      onnx::ValueInfoProto* info = InferredInfo(g, node.output(k));
      if (info != nullptr && Elements(&info->type(), options)) continue;
      const onnx::TypeProto* larger = nullptr;
      int64_t most = -1;
      for (const onnx::AttributeProto& a : node.attribute()) {
        if (!a.has_g() || k >= a.g().output_size()) continue;
        const onnx::TypeProto* t = SubgraphType(a.g(), a.g().output(k).name());
        std::optional<int64_t> n = Elements(t, options);
        if (!n) {
          larger = nullptr;
          break;
        }
        if (*n > most) {
          most = *n;
          larger = t;
        }
      }
      if (larger == nullptr || larger->tensor_type().elem_type() == 0) continue;
      if (info == nullptr) {
        info = g->add_value_info();
        info->set_name(node.output(k));
      }
      *info->mutable_type() = *larger;
      changed = true;
      warnings->push_back(absl::StrCat(
          NodeLabel(node, i), ": the branches give '", node.output(k),
          "' different shapes; planning the larger (", most, " elements)"));
    }
  }
  return changed;
}

// --- Subgraphs ---------------------------------------------------------------

// Names a subgraph (and the subgraphs inside it) reads from enclosing
// scopes, in order of first use; counts the values it defines.
void OuterReferences(const onnx::GraphProto& g, std::vector<std::string>* refs,
                     absl::flat_hash_set<std::string>* seen, int64_t* values) {
  absl::flat_hash_set<std::string> local;
  for (const auto& vi : g.input()) local.insert(vi.name());
  for (const auto& t : g.initializer()) local.insert(t.name());
  for (const auto& t : g.sparse_initializer()) local.insert(t.values().name());
  *values += g.input_size();
  auto use = [&](const std::string& name) {
    if (!name.empty() && !local.contains(name) && seen->insert(name).second) {
      refs->push_back(name);
    }
  };
  for (const onnx::NodeProto& n : g.node()) {
    for (const std::string& in : n.input()) use(in);
    for (const onnx::AttributeProto& a : n.attribute()) {
      std::vector<const onnx::GraphProto*> subs;
      if (a.has_g()) subs.push_back(&a.g());
      for (const auto& s : a.graphs()) subs.push_back(&s);
      for (const onnx::GraphProto* s : subs) {
        std::vector<std::string> inner;
        absl::flat_hash_set<std::string> inner_seen;
        OuterReferences(*s, &inner, &inner_seen, values);
        for (const std::string& r : inner) use(r);
      }
    }
    for (const std::string& out : n.output()) {
      if (out.empty()) continue;
      local.insert(out);
      ++*values;
    }
  }
  for (const auto& vi : g.output()) use(vi.name());
}

// --- Building the graph ------------------------------------------------------

// Turns an inferred main graph into a memplan Graph, one pass per concern.
class GraphBuilder {
 public:
  GraphBuilder(const onnx::ModelProto& model, const ModelOptions& options,
               absl::string_view name)
      : g_(model.graph()),
        opset_imports_(model.opset_import()),
        options_(options),
        name_(name) {}

  absl::StatusOr<ImportedModel> Build() {
    result_.graph.set_name(g_.name().empty() ? name_ : g_.name());
    if (auto s = IndexProducers(); !s.ok()) return s;
    if (auto s = CheckOrder(); !s.ok()) return s;
    IndexTypes();
    if (auto s = AddTensors(); !s.ok()) return s;
    if (auto s = CheckAllSized(); !s.ok()) return s;
    AddOps();
    if (auto s = AddGraphInputsOutputs(); !s.ok()) return s;
    if (result_.stats.control_flow_nodes > 0) AddControlFlowNote();
    if (!empty_.empty()) {
      std::set<std::string> names(empty_.begin(), empty_.end());
      result_.warnings.push_back(
          absl::StrCat(names.size(),
                       " value(s) with zero elements hold no memory and are "
                       "not planned: ",
                       absl::StrJoin(names, ", ")));
    }
    result_.stats.tensors = result_.graph.tensors_size();
    result_.stats.ops = result_.graph.ops_size();
    return std::move(result_);
  }

 private:
  // Records which node produces each value; SSA: one producer per value.
  absl::Status IndexProducers() {
    for (const auto& t : g_.initializer()) initializers_.insert(t.name());
    for (const auto& vi : g_.input()) {
      if (!initializers_.contains(vi.name())) inputs_.insert(vi.name());
    }
    for (int i = 0; i < g_.node_size(); ++i) {
      for (const std::string& out : g_.node(i).output()) {
        if (out.empty()) continue;
        if (inputs_.contains(out) || initializers_.contains(out)) {
          return Invalid(NodeLabel(g_.node(i), i), " writes '", out,
                         "', which is a graph input or initializer");
        }
        auto [it, added] = producer_.emplace(out, i);
        if (!added) {
          return Invalid("value '", out, "' is produced twice, by ",
                         NodeLabel(g_.node(it->second), it->second), " and ",
                         NodeLabel(g_.node(i), i));
        }
      }
    }
    return absl::OkStatus();
  }

  // Types by name: declared or inferred, initializers from their dims.
  void IndexTypes() {
    for (const auto* list : {&g_.input(), &g_.value_info(), &g_.output()}) {
      for (const onnx::ValueInfoProto& vi : *list) {
        if (vi.has_type()) types_[vi.name()] = &vi.type();
      }
    }
    for (const onnx::TensorProto& t : g_.initializer()) {
      initializer_types_.emplace(t.name(), InitializerType(t));
    }
    for (const auto& [name, type] : initializer_types_) types_[name] = &type;
  }

  // Adds one tensor per value: inputs, initializers, then node outputs.
  absl::Status AddTensors() {
    for (const auto& vi : g_.input()) {
      if (inputs_.contains(vi.name())) {
        if (auto s = AddTensor(vi.name(), -1); !s.ok()) return s;
      }
    }
    for (const auto& t : g_.initializer()) {
      if (added_.contains(t.name())) continue;  // listed twice
      if (auto s = AddTensor(t.name(), -1); !s.ok()) return s;
      if (!empty_.contains(t.name())) ++result_.stats.weights;
    }
    for (int i = 0; i < g_.node_size(); ++i) {
      for (const std::string& out : g_.node(i).output()) {
        if (out.empty()) continue;
        if (auto s = AddTensor(out, i); !s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }

  // Adds one value as a tensor, or notes why its size is unknown.
  absl::Status AddTensor(const std::string& name, int producer) {
    added_.insert(name);
    auto it = types_.find(name);
    absl::StatusOr<Size> size =
        SizeOfType(name, it == types_.end() ? nullptr : it->second, options_);
    if (!size.ok()) return size.status();
    if (!size->bytes.has_value()) {
      if (!size->missing_dim.empty()) missing_dims_.insert(size->missing_dim);
      unknown_.push_back(absl::StrCat(
          name, " (", size->unknown_reason,
          producer >= 0
              ? WhyUntyped(producer, it != types_.end() &&
                                         it->second->value_case() !=
                                             onnx::TypeProto::VALUE_NOT_SET)
              : "",
          ")"));
      return absl::OkStatus();
    }
    if (*size->bytes == 0) {
      empty_.insert(name);
      ++result_.stats.empty_values;
      return absl::OkStatus();
    }
    v1::Tensor* t = result_.graph.add_tensors();
    t->set_name(name);
    t->set_size_bytes(*size->bytes);
    return absl::OkStatus();
  }

  // Explains a node output without a type: usually an op ONNX has no
  // schema for (an unknown domain).
  std::string WhyUntyped(int producer, bool typed) const {
    const onnx::NodeProto& node = g_.node(producer);
    std::string label = NodeLabel(node, producer);
    if (typed) return absl::StrCat(", from ", label);
    const std::string domain =
        node.domain() == "ai.onnx" ? std::string() : node.domain();
    int version = -1;
    for (const onnx::OperatorSetIdProto& o : opset_imports_) {
      if ((o.domain() == "ai.onnx" ? "" : o.domain()) == domain) {
        version = static_cast<int>(o.version());
      }
    }
    if (version < 0 || onnx::OpSchemaRegistry::Schema(node.op_type(), version,
                                                      domain) == nullptr) {
      return absl::StrCat(", from ", label,
                          ": ONNX has no schema for this op (unknown op or "
                          "domain '",
                          domain, "'), so shape inference gives no type");
    }
    return absl::StrCat(", from ", label);
  }

  // Fails listing every value whose size is unknown.
  absl::Status CheckAllSized() const {
    if (unknown_.empty()) return absl::OkStatus();
    std::vector<std::string> listed(
        unknown_.begin(),
        unknown_.begin() + std::min<size_t>(unknown_.size(), kMaxListed));
    std::string more =
        unknown_.size() > listed.size()
            ? absl::StrCat(", and ", unknown_.size() - listed.size(), " more")
            : "";
    const std::string dims =
        missing_dims_.empty()
            ? ""
            : absl::StrCat(" (symbolic dims without a value: ",
                           absl::StrJoin(missing_dims_, ", "), ")");
    return Invalid(
        name_, ": the size of ", unknown_.size(),
        " value(s) is unknown after shape inference", dims, ": ",
        absl::StrJoin(listed, ", "), more,
        ". Set symbolic dims with --dim NAME=VALUE and shapes with --input "
        "NAME=SHAPE (e.g. 1x3x224x224)");
  }

  // Lists what each node reads (with what its subgraphs read from outside),
  // checking that each value is defined by then: the order is topological.
  absl::Status CheckOrder() {
    absl::flat_hash_set<std::string> defined(inputs_.begin(), inputs_.end());
    defined.insert(initializers_.begin(), initializers_.end());
    reads_.resize(g_.node_size());
    for (int i = 0; i < g_.node_size(); ++i) {
      const onnx::NodeProto& node = g_.node(i);
      std::vector<std::string> reads(node.input().begin(), node.input().end());
      if (HasSubgraph(node)) AddOuterReads(node, &reads);
      absl::flat_hash_set<std::string> listed;
      for (const std::string& in : reads) {
        if (in.empty() || !listed.insert(in).second) continue;
        if (auto s = CheckDefined(node, i, in, defined); !s.ok()) return s;
        reads_[i].push_back(in);
      }
      for (const std::string& out : node.output()) {
        if (!out.empty()) defined.insert(out);
      }
    }
    return absl::OkStatus();
  }

  // Adds one op per node, reading and writing the planned (non-empty) values.
  void AddOps() {
    absl::flat_hash_set<std::string> op_names;
    for (int i = 0; i < g_.node_size(); ++i) {
      const onnx::NodeProto& node = g_.node(i);
      v1::Op* op = result_.graph.add_ops();
      op->set_name(UniqueOpName(node, i, &op_names));
      for (const std::string& in : reads_[i]) {
        if (!empty_.contains(in)) op->add_inputs(in);
      }
      for (const std::string& out : node.output()) {
        if (!out.empty() && !empty_.contains(out)) op->add_outputs(out);
      }
    }
  }

  // Appends what a control-flow node's subgraphs read from the main graph.
  void AddOuterReads(const onnx::NodeProto& node,
                     std::vector<std::string>* reads) {
    ++result_.stats.control_flow_nodes;
    control_flow_ops_.insert(node.op_type());
    for (const onnx::AttributeProto& a : node.attribute()) {
      std::vector<const onnx::GraphProto*> subs;
      if (a.has_g()) subs.push_back(&a.g());
      for (const auto& s : a.graphs()) subs.push_back(&s);
      for (const onnx::GraphProto* s : subs) {
        std::vector<std::string> refs;
        absl::flat_hash_set<std::string> seen;
        OuterReferences(*s, &refs, &seen, &result_.stats.subgraph_values);
        reads->insert(reads->end(), refs.begin(), refs.end());
      }
    }
  }

  // A value read by node `i` must be an input, initializer or earlier output.
  absl::Status CheckDefined(
      const onnx::NodeProto& node, int i, const std::string& name,
      const absl::flat_hash_set<std::string>& defined) const {
    if (defined.contains(name)) return absl::OkStatus();
    auto it = producer_.find(name);
    if (it == producer_.end()) {
      return Invalid(NodeLabel(node, i), " reads '", name,
                     "', which is no graph input, initializer or node output");
    }
    return Invalid(NodeLabel(node, i), " reads '", name, "' before ",
                   NodeLabel(g_.node(it->second), it->second),
                   " produces it: nodes are not in topological order");
  }

  // The node's name, or OpType_index when it has none or repeats one.
  static std::string UniqueOpName(const onnx::NodeProto& node, int i,
                                  absl::flat_hash_set<std::string>* used) {
    std::string name = node.name();
    if (name.empty() || used->contains(name)) {
      name = absl::StrCat(node.name().empty() ? node.op_type() : node.name(),
                          "_", i);
    }
    while (used->contains(name)) absl::StrAppend(&name, "_");
    used->insert(name);
    return name;
  }

  // Graph inputs (not initializers) and outputs, which must exist.
  absl::Status AddGraphInputsOutputs() {
    for (const auto& vi : g_.input()) {
      if (inputs_.contains(vi.name()) && !empty_.contains(vi.name())) {
        result_.graph.add_inputs(vi.name());
      }
    }
    for (const auto& vi : g_.output()) {
      const std::string& n = vi.name();
      if (!inputs_.contains(n) && !initializers_.contains(n) &&
          !producer_.contains(n)) {
        return Invalid("graph output '", n,
                       "' is produced by no node (a truncated model?)");
      }
      if (!empty_.contains(n)) result_.graph.add_outputs(n);
    }
    return absl::OkStatus();
  }

  // Says what is not planned inside control-flow nodes.
  void AddControlFlowNote() {
    result_.warnings.push_back(absl::StrCat(
        result_.stats.control_flow_nodes, " control-flow node(s) (",
        absl::StrJoin(control_flow_ops_, ", "), "): the ",
        result_.stats.subgraph_values,
        " values inside their subgraphs are not planned; outer values "
        "they read stay alive across the node"));
  }

  const onnx::GraphProto& g_;  // the main graph, after inference
  const google::protobuf::RepeatedPtrField<onnx::OperatorSetIdProto>&
      opset_imports_;                 // the model's opsets
  const ModelOptions& options_;  // --dim values
  const std::string name_;            // for messages and the graph's name
  absl::flat_hash_set<std::string> inputs_;         // graph inputs
  absl::flat_hash_set<std::string> initializers_;   // weights
  absl::flat_hash_map<std::string, int> producer_;  // value -> node index
  absl::flat_hash_map<std::string, const onnx::TypeProto*> types_;  // by name
  absl::flat_hash_map<std::string, onnx::TypeProto>
      initializer_types_;                   // built from the initializers' dims
  absl::flat_hash_set<std::string> added_;  // values seen by AddTensor
  absl::flat_hash_set<std::string> empty_;  // zero-element values
  std::vector<std::string> unknown_;        // "name (reason)"
  std::set<std::string> missing_dims_;      // symbolic dims without a value
  std::vector<std::vector<std::string>> reads_;  // per node, deduplicated
  std::set<std::string> control_flow_ops_;       // op types with subgraphs
  ImportedModel result_;                            // what Build returns
};

}  // namespace

absl::StatusOr<int64_t> OnnxTensorBytes(int32_t elem_type,
                                        const std::vector<int64_t>& dims,
                                        absl::string_view what) {
  constexpr int kTypes = sizeof(kElementTypes) / sizeof(kElementTypes[0]);
  if (elem_type == kStringType) {
    return Invalid(what, " holds strings: memplan cannot plan string tensors");
  }
  if (elem_type <= 0 || elem_type >= kTypes) {
    return Invalid(what, " has unknown element type ", elem_type);
  }
  int64_t elements = 1;
  for (int64_t d : dims) {
    if (d < 0) return Invalid(what, " has negative dim ", d);
    if (__builtin_mul_overflow(elements, d, &elements)) {
      return Invalid(what, " has more elements than 64 bits count");
    }
  }
  int64_t bits = 0;
  if (__builtin_mul_overflow(elements, kElementTypes[elem_type].bits, &bits) ||
      bits > INT64_MAX - 7) {
    return Invalid(what, " is larger than 64 bits count");
  }
  return (bits + 7) / 8;
}

absl::StatusOr<ImportedModel> ImportOnnx(absl::string_view bytes,
                                      absl::string_view name,
                                      const ModelOptions& options) {
  absl::StatusOr<onnx::ModelProto> model = ParseModel(bytes, name);
  if (!model.ok()) return model.status();
  std::vector<std::string> warnings;
  onnx::GraphProto* g = model->mutable_graph();
  ApplyDims(options, g, &warnings);
  if (auto s = ApplyShapes(options, g); !s.ok()) return s;
  DefaultUnnamedDims(g, &warnings);
  if (auto s = InferShapes(&*model, name); !s.ok()) return s;
  // InferShapes replaced the model's graph: `g` is stale from here on.
  if (DeclareLargerIfBranches(model->mutable_graph(), options, &warnings)) {
    if (auto s = InferShapes(&*model, name); !s.ok()) return s;
  }
  GraphBuilder builder(*model, options, name);
  absl::StatusOr<ImportedModel> result = builder.Build();
  if (!result.ok()) return result.status();
  warnings.insert(warnings.end(), result->warnings.begin(),
                  result->warnings.end());
  result->warnings = std::move(warnings);
  return result;
}

}  // namespace memplan::formats
