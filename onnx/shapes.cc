#include "onnx/shapes.h"

#include <algorithm>
#include <exception>
#include <limits>
#include <unordered_map>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "base/text.h"
#include "onnx/defs/schema.h"
#include "onnx/internal/model_reading.h"
#include "onnx/shape_inference/implementation.h"
#include "onnx/shape_rules.h"

namespace memplan::formats {
namespace {

namespace onnx = ::ONNX_NAMESPACE;

// ONNX element types by TensorProto.DataType number: name and bits per
// element (0: no fixed size). Numbers past BFLOAT16 (16) are newer than
// ONNX 1.12; the fields holding them are plain int32, so they still arrive.
struct ElementType {
  const char* name;  // as `memplan inspect` shows it
  int bits;          // bits per element; 0 for none (strings)
};
constexpr ElementType kElementTypes[] = {
    {"undefined", 0},      {"float32", 32},   {"uint8", 8},
    {"int8", 8},           {"uint16", 16},    {"int16", 16},
    {"int32", 32},         {"int64", 64},     {"string", 0},
    {"bool", 8},           {"float16", 16},   {"float64", 64},
    {"uint32", 32},        {"uint64", 64},    {"complex64", 64},
    {"complex128", 128},   {"bfloat16", 16},  {"float8e4m3fn", 8},
    {"float8e4m3fnuz", 8}, {"float8e5m2", 8}, {"float8e5m2fnuz", 8},
    {"uint4", 4},          {"int4", 4},       {"float4e2m1", 4},
};
constexpr int kTypeCount = sizeof(kElementTypes) / sizeof(kElementTypes[0]);

// Marks errors of shape rules: shapes that cannot be (an If branch that
// cannot run), as opposed to a broken or hostile model.
constexpr char kShapeErrorPayload[] = "memplan.onnx.shape_error";

// Ops whose outputs are not folded to constants even from constant inputs.
bool NonDeterministic(const std::string& op) {
  return op == "RandomNormal" || op == "RandomUniform" ||
         op == "RandomNormalLike" || op == "RandomUniformLike" ||
         op == "Multinomial" || op == "Bernoulli";
}

bool IsDefaultDomain(const std::string& domain) {
  return domain.empty() || domain == "ai.onnx";
}

bool HasGraphAttribute(const onnx::NodeProto& node) {
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (a.has_g() || a.graphs_size() > 0) return true;
  }
  return false;
}

// What nodes hold, in their graphs too: how many; the bytes of their text
// (names, op types, the values they read and make: what evaluating them
// again copies into labels, value names and name tables; not their
// tensors); whether one takes an attribute from the function it is in
// (ref_attr_name).
struct NodesMeasure {
  int64_t nodes = 0;
  int64_t text_bytes = 0;
  bool references = false;
};

void Measure(const google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes,
             NodesMeasure* m) {
  for (const onnx::NodeProto& node : nodes) {
    ++m->nodes;
    m->text_bytes += static_cast<int64_t>(
        node.name().size() + node.op_type().size() + node.domain().size());
    for (const std::string& s : node.input()) m->text_bytes += s.size();
    for (const std::string& s : node.output()) m->text_bytes += s.size();
    for (const onnx::AttributeProto& a : node.attribute()) {
      m->references = m->references || !a.ref_attr_name().empty();
      if (a.has_g()) Measure(a.g().node(), m);
      for (const onnx::GraphProto& g : a.graphs()) Measure(g.node(), m);
    }
  }
}

// Values (inputs, initializers, node outputs) in a graph and all the
// graphs inside it: what an If branch that never runs holds.
int64_t CountValues(const onnx::GraphProto& g) {
  int64_t n = g.input_size() + g.initializer_size();
  for (const onnx::NodeProto& node : g.node()) {
    for (const std::string& o : node.output()) n += o.empty() ? 0 : 1;
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.has_g()) n += CountValues(a.g());
      for (const onnx::GraphProto& s : a.graphs()) n += CountValues(s);
    }
  }
  return n;
}

}  // namespace

std::string OnnxNodeLabel(const onnx::NodeProto& node, int index,
                          absl::string_view path) {
  // The model's text, quoted in messages: escaped (base/text.h), so that a
  // name holding a newline cannot start a line of a log or a terminal.
  std::string op =
      base::SafeText(IsDefaultDomain(node.domain())
                         ? node.op_type()
                         : absl::StrCat(node.domain(), ".", node.op_type()));
  std::string label = node.name().empty()
                          ? absl::StrCat("node #", index, " (", op, ")")
                          : absl::StrCat("node '", base::SafeText(node.name()),
                                         "' (", op, ", #", index, ")");
  if (!path.empty()) absl::StrAppend(&label, " in ", base::SafeText(path));
  return label;
}

bool OnnxNodeIsCall(const OnnxNodeRun& nr) {
  return !nr.bodies.empty() && nr.bodies[0].run->function;
}

bool OnnxRunInFunction(const OnnxGraphRun& run) {
  for (const OnnxGraphRun* r = &run; r != nullptr; r = r->parent) {
    if (r->function) return true;
  }
  return false;
}

std::string OnnxSubgraphPath(absl::string_view parent,
                             const onnx::NodeProto& node, int index,
                             absl::string_view attribute) {
  const std::string name = node.name().empty()
                               ? absl::StrCat(node.op_type(), "_", index)
                               : node.name();
  return absl::StrCat(parent, parent.empty() ? "" : "/", name, "/", attribute);
}

namespace {

// Evaluates a model's graphs, one node at a time (see the header).
class Evaluator {
 public:
  Evaluator(const onnx::ModelProto& model, const OnnxEvalOptions& options,
            absl::string_view name)
      : model_(model), options_(options), name_(name) {
    for (const onnx::OperatorSetIdProto& o : model.opset_import()) {
      opsets_[o.domain() == "ai.onnx" ? "" : o.domain()] =
          static_cast<int>(o.version());
    }
    for (const onnx::FunctionProto& f : model.functions()) {
      functions_[absl::StrCat(f.domain(), ":", f.name())] = &f;
    }
  }

  absl::StatusOr<OnnxEvaluation> Run() {
    CollectInputSymbols();
    google::protobuf::ArenaOptions text;
    text.start_block_size = 4096;
    text.max_block_size = 64 * 1024;
    result_.labels = std::make_unique<google::protobuf::Arena>(text);
    result_.main = std::make_unique<OnnxGraphRun>();
    OnnxGraphRun* main = result_.main.get();
    main->graph = &model_.graph();
    if (auto s = DefineMainInputs(main); !s.ok()) return s;
    if (auto s = EvalGraph(main, 0); !s.ok()) return s;
    return std::move(result_);
  }

 private:
  // --- Values and scopes -----------------------------------------------------

  int NewValue(const std::string& name, absl::string_view origin) {
    result_.values.emplace_back();
    result_.values.back().name = name;
    result_.values.back().origin = origin;
    return static_cast<int>(result_.values.size()) - 1;
  }
  // `label` kept in the evaluation's arena.
  absl::string_view KeepLabel(const std::string& label) {
    char* kept = google::protobuf::Arena::CreateArray<char>(
        result_.labels.get(), label.size());
    std::copy(label.begin(), label.end(), kept);
    return absl::string_view(kept, label.size());
  }
  OnnxValue& V(int id) { return result_.values[id]; }
  DimTable& T() { return result_.table; }

  // The value `name` seen from `run`: its own or an enclosing graph's
  // (then recorded as captured by every graph in between); -1 if none.
  int Lookup(OnnxGraphRun* run, const std::string& name) {
    std::vector<OnnxGraphRun*> crossed;
    for (OnnxGraphRun* r = run; r != nullptr;
         r = const_cast<OnnxGraphRun*>(r->parent)) {
      auto it = r->scope.find(name);
      if (it == r->scope.end()) {
        if (r->function) break;  // a function body sees no enclosing graph
        crossed.push_back(r);
        continue;
      }
      for (OnnxGraphRun* c : crossed) {
        if (captured_sets_[c].insert(it->second).second) {
          c->captured.push_back(it->second);
        }
      }
      return it->second;
    }
    return -1;
  }

  // Named dims of the main graph's inputs: the dims --dim can set.
  void CollectInputSymbols() {
    for (const onnx::ValueInfoProto& vi : model_.graph().input()) {
      for (const auto& d : vi.type().tensor_type().shape().dim()) {
        if (d.has_dim_param()) input_symbols_.insert(d.dim_param());
      }
    }
  }

  // A declared dim: a number, a named dim (a number when --dim gives it),
  // or nullopt when neither (or a name ONNX or an exporter made up).
  std::optional<SymDim> Declared(const onnx::TensorShapeProto::Dimension& d) {
    if (d.has_dim_value() && d.dim_value() >= 0) return SymDim(d.dim_value());
    if (!d.has_dim_param()) return std::nullopt;
    auto it = options_.dims.find(d.dim_param());
    if (it != options_.dims.end()) return SymDim(it->second);
    if (!input_symbols_.contains(d.dim_param())) return std::nullopt;
    return SymDim::Atom(T().Symbol(d.dim_param()));
  }

  // Sets a value from a declared type (graph and body inputs).
  void FromDeclaredType(const onnx::TypeProto& type, OnnxValue* v) {
    if (type.value_case() == onnx::TypeProto::VALUE_NOT_SET) return;
    if (!type.has_tensor_type()) {
      v->tensor = false;
      return;
    }
    v->elem_type = type.tensor_type().elem_type();
    if (!type.tensor_type().has_shape()) return;
    v->has_shape = true;
    v->dims.clear();
    const auto& dims = type.tensor_type().shape().dim();
    for (int i = 0; i < dims.size(); ++i) {
      std::optional<SymDim> d = Declared(dims[i]);
      v->dims.push_back(
          d ? *d
            : SymDim::Atom(T().Unknown(
                  absl::StrCat("graph input '", v->name, "'"),
                  absl::StrCat("dim ", i,
                               " has neither a value nor a name (set the "
                               "shape with --input)"),
                  false, {})));
    }
  }

  absl::Status DefineMainInputs(OnnxGraphRun* main) {
    absl::flat_hash_set<std::string> initializers;
    for (const auto& t : main->graph->initializer())
      initializers.insert(t.name());
    for (const onnx::ValueInfoProto& vi : main->graph->input()) {
      if (initializers.contains(vi.name())) continue;
      if (main->scope.contains(vi.name())) {
        return Invalid(name_, ": graph input '", vi.name(),
                       "' is listed twice");
      }
      const int id = NewValue(vi.name(), "");
      FromDeclaredType(vi.type(), &V(id));
      V(id).from_data = true;
      if (auto s = Override(&V(id)); !s.ok()) return s;
      main->inputs.push_back(id);
      main->scope[vi.name()] = id;
    }
    return absl::OkStatus();
  }

  // Applies --input to a value of that name.
  absl::Status Override(OnnxValue* v) {
    auto it = options_.shapes.find(v->name);
    if (it == options_.shapes.end()) return absl::OkStatus();
    if (v->has_shape && v->dims.size() != it->second.size()) {
      return Invalid("--input ", v->name, ": '", v->name, "' has rank ",
                     v->dims.size(), " in the model, the flag gives ",
                     it->second.size(), " dims");
    }
    v->has_shape = true;
    v->dims.clear();
    for (int64_t d : it->second) v->dims.push_back(SymDim(d));
    if (v->content &&
        OnnxElementCount(v->dims) != static_cast<int64_t>(v->content->size())) {
      v->content.reset();
    }
    return absl::OkStatus();
  }

  // --- Graphs
  // ------------------------------------------------------------------

  // Evaluates a graph whose formal inputs are in its scope already.
  absl::Status EvalGraph(OnnxGraphRun* run, int depth) {
    const onnx::GraphProto& g = *run->graph;
    for (const onnx::TensorProto& t : g.initializer()) {
      if (run->scope.contains(t.name())) continue;  // also an input (IR < 4)
      const int id = NewValue(t.name(), "");
      if (auto s = LoadOnnxTensor(t, &V(id), Where(run)); !s.ok()) return s;
      run->initializers.push_back(id);
      run->scope[t.name()] = id;
    }
    for (const onnx::SparseTensorProto& t : g.sparse_initializer()) {
      const std::string& n = t.values().name();
      if (run->scope.contains(n)) continue;
      const int id = NewValue(n, "");
      std::vector<SymDim> dims;
      for (int64_t d : t.dims())
        dims.push_back(SymDim(std::max<int64_t>(d, 0)));
      SetOnnxShape(&V(id), t.values().data_type(), std::move(dims));
      V(id).constant = true;
      run->initializers.push_back(id);
      run->scope[n] = id;
    }
    producers_.emplace_back();
    for (int i = 0; i < g.node_size(); ++i) {
      for (const std::string& o : g.node(i).output()) {
        if (!o.empty()) producers_.back().emplace(o, i);
      }
    }
    for (int i = 0; i < g.node_size(); ++i) {
      if (internal::ShouldStop(options_.cancel, ++nodes_seen_)) {
        producers_.pop_back();
        return internal::ImportCancelled(name_);
      }
      if (auto s = EvalNode(run, i, depth); !s.ok()) {
        producers_.pop_back();
        return s;
      }
    }
    producers_.pop_back();
    for (const onnx::ValueInfoProto& vi : g.output()) {
      const int id = Lookup(run, vi.name());
      if (id < 0) {
        return Invalid(Where(run), ": graph output '", vi.name(),
                       "' is produced by no node (a truncated model?)");
      }
      run->outputs.push_back(id);
    }
    return absl::OkStatus();
  }

  std::string Where(const OnnxGraphRun* run) const {
    return run->path.empty() ? name_ : absl::StrCat(name_, ": ", run->path);
  }

  // The ONNX-inferred type of `name` in graph `g`, or null.
  const onnx::TypeProto* GlobalType(const onnx::GraphProto* g,
                                    const std::string& name) {
    auto [it, added] = global_types_.try_emplace(g);
    if (added) {
      for (const auto* list : {&g->input(), &g->value_info(), &g->output()}) {
        for (const onnx::ValueInfoProto& vi : *list) {
          if (vi.has_type()) it->second[vi.name()] = &vi.type();
        }
      }
    }
    auto t = it->second.find(name);
    return t == it->second.end() ? nullptr : t->second;
  }

  // --- Nodes
  // -------------------------------------------------------------------

  absl::Status ResolveInputs(OnnxGraphRun* run, const onnx::NodeProto& node,
                             OnnxNodeRun* nr) {
    for (const std::string& in : node.input()) {
      if (in.empty()) {
        nr->inputs.push_back(-1);
        continue;
      }
      const int id = Lookup(run, in);
      if (id >= 0) {
        nr->inputs.push_back(id);
        continue;
      }
      if (run->omitted.contains(in)) {  // a function input the call omits
        nr->inputs.push_back(-1);
        continue;
      }
      auto it = producers_.back().find(in);
      if (it == producers_.back().end()) {
        return Invalid(nr->label, " reads '", in,
                       run->function ? "', which is no input of the function "
                                       "nor made by a node of its body"
                                     : "', which is no graph input, "
                                       "initializer or node output");
      }
      return Invalid(
          nr->label, " reads '", in, "' before ",
          OnnxNodeLabel(run->graph->node(it->second), it->second, run->path),
          " produces it: nodes are not in topological order");
    }
    return absl::OkStatus();
  }

  absl::Status DefineOutputs(OnnxGraphRun* run, const onnx::NodeProto& node,
                             OnnxNodeRun* nr) {
    for (const std::string& out : node.output()) {
      if (out.empty()) {
        nr->outputs.push_back(-1);
        continue;
      }
      auto it = run->scope.find(out);
      if (it != run->scope.end()) {
        const OnnxValue& prior = V(it->second);
        if (prior.origin.empty()) {
          return Invalid(nr->label, " writes '", out,
                         "', which is a graph input or initializer");
        }
        return Invalid("value '", out, "' is produced twice, by ", prior.origin,
                       " and ", nr->label);
      }
      nr->outputs.push_back(NewValue(out, nr->label));
    }
    return absl::OkStatus();
  }

  int Opset(const std::string& domain) const {
    auto it = opsets_.find(IsDefaultDomain(domain) ? "" : domain);
    return it == opsets_.end() ? -1 : it->second;
  }

  absl::Status EvalNode(OnnxGraphRun* run, int index, int depth) {
    const onnx::NodeProto& node = run->graph->node(index);
    OnnxNodeRun nr;
    nr.index = index;
    // Inside a function a label is made at every call: cut short.
    nr.label = KeepLabel(
        OnnxRunInFunction(*run)
            ? base::BoundedMessage(OnnxNodeLabel(node, index, run->path),
                                   2 * kMaxOnnxFunctionNameBytes)
            : OnnxNodeLabel(node, index, run->path));
    if (auto s = ResolveInputs(run, node, &nr); !s.ok()) return s;
    if (auto s = DefineOutputs(run, node, &nr); !s.ok()) return s;
    const std::string& op = node.op_type();
    absl::Status status;
    if (IsDefaultDomain(node.domain()) &&
        (op == "If" || op == "Loop" || (op == "Scan" && Opset("") >= 9))) {
      if (depth >= kMaxOnnxNesting) {
        return Invalid(nr.label,
                       ": subgraphs and function calls nested "
                       "more than ",
                       kMaxOnnxNesting, " deep");
      }
      status = op == "If"     ? EvalIf(run, node, &nr, depth)
               : op == "Loop" ? EvalLoop(run, node, &nr, depth)
                              : EvalScan(run, node, &nr, depth);
    } else if (const onnx::FunctionProto* f = LocalFunction(node)) {
      if (depth >= kMaxOnnxNesting) {
        return Invalid(nr.label,
                       ": function calls and subgraphs nested more "
                       "than ",
                       kMaxOnnxNesting, " deep (function ",
                       base::BoundedMessage(f->name(), 64), " calls itself?)");
      }
      status = EvalCall(run, node, *f, &nr, depth);
    } else {
      if (HasGraphAttribute(node)) CaptureNames(run, node, &nr);
      status = EvalOrdinary(node, &nr);
    }
    if (!status.ok()) return status;
    if (auto s = Finish(run, node, &nr); !s.ok()) return s;
    for (size_t k = 0; k < nr.outputs.size(); ++k) {
      if (nr.outputs[k] >= 0) run->scope[node.output(k)] = nr.outputs[k];
    }
    run->nodes.push_back(std::move(nr));
    return absl::OkStatus();
  }

  OnnxNodeContext Context(const onnx::NodeProto& node, const OnnxNodeRun& nr) {
    OnnxNodeContext c;
    c.node = &node;
    c.opset = Opset(node.domain());
    c.label = nr.label;
    c.table = &T();
    for (int id : nr.inputs) c.in.push_back(id < 0 ? nullptr : &V(id));
    for (int id : nr.outputs) c.out.push_back(id < 0 ? nullptr : &V(id));
    return c;
  }

  // A node without subgraphs: a rule here, or ONNX's inference.
  absl::Status EvalOrdinary(const onnx::NodeProto& node, OnnxNodeRun* nr) {
    OnnxNodeContext c = Context(node, *nr);
    OnnxShapeRule rule = FindOnnxShapeRule(node.domain(), node.op_type());
    if (rule != nullptr) {
      absl::Status s = rule(c);
      if (!s.ok() && !IsFallBack(s)) {
        s.SetPayload(kShapeErrorPayload, absl::Cord("1"));
        return s;
      }
      if (s.ok()) return s;
      for (OnnxValue* v : c.out) {
        if (v == nullptr) continue;
        v->elem_type = 0;
        v->has_shape = false;
        v->dims.clear();
        v->content.reset();
      }
    }
    absl::Status checked = CheckForOnnxInference(c);
    if (!checked.ok()) {
      checked.SetPayload(kShapeErrorPayload, absl::Cord("1"));
      return checked;
    }
    OnnxFallback(c);
    return absl::OkStatus();
  }

  // Why ONNX cannot be asked about this node, or "".
  std::string NoSchemaReason(const OnnxNodeContext& c,
                             const onnx::OpSchema* schema) const {
    const onnx::NodeProto& node = *c.node;
    const bool default_domain = IsDefaultDomain(node.domain());
    if (c.opset < 0) {
      return absl::StrCat("the model imports no opset for domain '",
                          node.domain(), "'");
    }
    const int newest = OnnxNewestKnownOpset();
    if (schema == nullptr) {
      if (default_domain && c.opset > newest) {
        return absl::StrCat("op ", node.op_type(), " of opset ", c.opset,
                            " is not in the opsets ONNX 1.12 knows (up to ",
                            newest, "), and memplan has no shape rule for it");
      }
      return absl::StrCat(
          "ONNX has no schema for this op (unknown op or "
          "domain '",
          node.domain(), "'), so shape inference gives no type");
    }
    if (default_domain &&
        OnnxOpChangedAfterKnownOpsets(node.op_type(), c.opset)) {
      return absl::StrCat("op ", node.op_type(), " changed after opset ",
                          newest,
                          " (the newest ONNX 1.12 knows) and the model uses "
                          "opset ",
                          c.opset, "; memplan has no shape rule for it");
    }
    return "";
  }

  // Runs ONNX's inference function for this one node on what is known.
  // What ONNX's inference function is given for one node: types (dims that
  // are not numbers named by their expressions) and the elements known.
  struct OnnxInputs {
    std::deque<onnx::TypeProto> types;   // storage for types_by_name
    std::deque<onnx::TensorProto> data;  // storage for data_by_name
    std::unordered_map<std::string, onnx::TypeProto*> types_by_name;
    std::unordered_map<std::string, const onnx::TensorProto*> data_by_name;
    std::map<std::string, SymDim> params;  // dim_param -> the dim it names
  };

  void FillOnnxInputs(const OnnxNodeContext& c, OnnxInputs* in) {
    for (size_t i = 0; i < c.in.size(); ++i) {
      const OnnxValue* v = c.in[i];
      if (v == nullptr) continue;
      in->types.push_back(ToTypeProto(*v, &in->params));
      in->types_by_name[c.node->input(i)] = &in->types.back();
      if (std::optional<onnx::TensorProto> t = ToTensorProto(*v)) {
        in->data.push_back(std::move(*t));
        in->data_by_name[c.node->input(i)] = &in->data.back();
      }
    }
  }

  // Marks every output of the node unknown, saying why.
  static void AllUnknown(OnnxNodeContext& c, const std::string& why) {
    for (OnnxValue* v : c.out) {
      if (v != nullptr) v->why_unknown = why;
    }
  }

  // What ONNX 1.12's inference of these ops trusts without checking: a
  // stride, dilation or kernel below 1 divides by zero; a kernel, stride
  // or weight of another rank than the input's spatial dims reads past a
  // vector; a blocksize past 2^31 squares to 0; a Split without outputs or
  // an STFT frame step of 0 divides by zero; an STFT signal of rank below
  // 3 is read past its dims. Any of these kills the process with a signal
  // no try catches, so a node holding one is refused before ONNX is asked
  // (memplan's rules refuse the same where they size the node themselves).
  static absl::Status CheckForOnnxInference(OnnxNodeContext& c) {
    if (!IsDefaultDomain(c.node->domain())) return absl::OkStatus();
    const std::string& op = c.node->op_type();
    static const auto* windowed = new absl::flat_hash_set<std::string>{
        "Conv",          "ConvInteger", "QLinearConv", "DeformConv",
        "ConvTranspose", "MaxPool",     "AveragePool", "LpPool"};
    const auto error = [&c](const auto&... parts) {
      return absl::InvalidArgumentError(absl::StrCat(c.label, ": ", parts...));
    };
    if (windowed->contains(op)) {
      if (c.Attr("group") != nullptr && c.Int("group", 1) < 1) {
        return error("group ", c.Int("group", 1), " is below 1");
      }
      for (const char* attr : {"kernel_shape", "strides", "dilations"}) {
        for (int64_t v : c.Ints(attr)) {
          if (v < 1) return error(attr, " holds ", v, ", below 1");
        }
      }
      const OnnxValue* x = c.In(0);
      if (x == nullptr || !x->has_shape) return absl::OkStatus();
      if (x->dims.size() < 3) {
        return error("input of rank ", x->dims.size(),
                     ": a convolution or pooling needs a batch, a channel "
                     "and at least one spatial dim");
      }
      const size_t spatial = x->dims.size() - 2;
      const size_t weight = op == "QLinearConv" ? 3 : 1;
      const OnnxValue* w =
          absl::StrContains(op, "Conv") ? c.In(weight) : nullptr;
      if (w != nullptr && w->has_shape && w->dims.size() != x->dims.size()) {
        return error("weight of rank ", w->dims.size(),
                     " for an input of rank ", x->dims.size());
      }
      for (const char* attr : {"kernel_shape", "strides", "dilations",
                               "output_padding", "output_shape"}) {
        const size_t n = c.Ints(attr).size();
        if (n != 0 && n != spatial) {
          return error(attr, " has ", n, " values for ", spatial,
                       " spatial dims");
        }
      }
      const size_t pads = c.Ints("pads").size();
      if (pads != 0 && pads != 2 * spatial) {
        return error("pads has ", pads, " values for ", spatial,
                     " spatial dims");
      }
    } else if (op == "DepthToSpace" || op == "SpaceToDepth") {
      const int64_t b = c.Int("blocksize", 0);
      if (b < 1 || b > std::numeric_limits<int32_t>::max()) {
        return error("blocksize ", b, " is not from 1 to 2^31 - 1");
      }
    } else if (op == "Split") {
      if (c.out.empty()) return error("Split has no outputs");
    } else if (op == "STFT") {
      const OnnxValue* signal = c.In(0);
      if (signal != nullptr && signal->has_shape && signal->dims.size() != 3) {
        return error("signal of rank ", signal->dims.size(),
                     " (STFT reads [batch, length, 1 or 2])");
      }
      if (const std::vector<SymDim>* step = c.Ints(1); step != nullptr) {
        for (const SymDim& d : *step) {
          if (d.is_constant() && d.constant() < 1) {
            return error("frame_step ", d.constant(), " is below 1");
          }
        }
      }
    }
    return absl::OkStatus();
  }

  // Runs `infer` (an ONNX inference function) for this one node on what is
  // known; whatever ONNX throws becomes the outputs' why_unknown.
  void InferWithOnnx(
      OnnxNodeContext& c,
      absl::FunctionRef<void(onnx::shape_inference::InferenceContextImpl&)>
          infer) {
    OnnxInputs in;
    FillOnnxInputs(c, &in);
    onnx::NodeProto copy = *c.node;
    std::string error;
    try {
      onnx::shape_inference::InferenceContextImpl ctx(copy, in.types_by_name,
                                                      in.data_by_name, {});
      infer(ctx);
      for (size_t k = 0; k < c.out.size(); ++k) {
        if (c.out[k] != nullptr && k < ctx.allOutputTypes_.size()) {
          FromInferred(c, ctx.allOutputTypes_[k], in.params, c.out[k]);
        }
      }
      return;
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
      error = "unknown exception";
    }
    if (error.size() > 200) error = error.substr(0, 200) + "...";
    AllUnknown(c, absl::StrCat("ONNX's shape inference failed: ", error));
  }

  // Sizes this node with its op's schema in ONNX.
  void OnnxFallback(OnnxNodeContext& c) {
    const onnx::NodeProto& node = *c.node;
    const onnx::OpSchema* schema =
        c.opset < 0 ? nullptr
                    : onnx::OpSchemaRegistry::Schema(
                          node.op_type(), c.opset,
                          IsDefaultDomain(node.domain()) ? "" : node.domain());
    const std::string reason = NoSchemaReason(c, schema);
    if (!reason.empty()) return AllUnknown(c, reason);
    InferWithOnnx(c, [&](onnx::shape_inference::InferenceContextImpl& ctx) {
      if (schema->has_type_and_shape_inference_function()) {
        schema->GetTypeAndShapeInferenceFunction()(ctx);
      } else if (schema->HasFunction() && schema->GetFunction() != nullptr) {
        onnx::shape_inference::InferShapeForFunctionNode(
            *schema->GetFunction(), onnx::OpSchemaRegistry::Instance(), ctx);
      }
    });
  }

  // The TypeProto ONNX's inference sees for a value; dims that are not
  // numbers are named by their expressions.
  onnx::TypeProto ToTypeProto(const OnnxValue& v,
                              std::map<std::string, SymDim>* params) {
    onnx::TypeProto type;
    if (!v.tensor || v.elem_type == 0) return type;
    auto* t = type.mutable_tensor_type();
    t->set_elem_type(v.elem_type);
    if (!v.has_shape) return type;
    auto* shape = t->mutable_shape();
    for (const SymDim& d : v.dims) {
      auto* dim = shape->add_dim();
      if (d.is_constant() && d.constant() >= 0) {
        dim->set_dim_value(d.constant());
      } else {
        const std::string key = "memplan:" + T().ToString(d);
        dim->set_dim_param(key);
        params->emplace(key, d);
      }
    }
    return type;
  }

  // The elements of a value as a TensorProto, when all are numbers.
  static std::optional<onnx::TensorProto> ToTensorProto(const OnnxValue& v) {
    if (!v.content || !v.has_shape) return std::nullopt;
    std::optional<int64_t> n = OnnxElementCount(v.dims);
    if (!n || *n != static_cast<int64_t>(v.content->size()))
      return std::nullopt;
    onnx::TensorProto t;
    t.set_data_type(v.elem_type);
    for (const SymDim& d : v.dims) t.add_dims(d.constant());
    const int32_t type = v.elem_type;
    if (v.content->real) {
      if (type == onnx::TensorProto::FLOAT) {
        for (double x : v.content->reals)
          t.add_float_data(static_cast<float>(x));
      } else if (type == onnx::TensorProto::DOUBLE) {
        for (double x : v.content->reals) t.add_double_data(x);
      } else {
        return std::nullopt;
      }
      return t;
    }
    for (const SymDim& d : v.content->ints) {
      if (!d.is_constant()) return std::nullopt;
      const int64_t x = d.constant();
      if (type == onnx::TensorProto::INT64) {
        t.add_int64_data(x);
      } else if (type == onnx::TensorProto::UINT32 ||
                 type == onnx::TensorProto::UINT64) {
        t.add_uint64_data(static_cast<uint64_t>(x));
      } else if (type >= 2 && type <= 9 && type != 8 && type != 7) {
        t.add_int32_data(static_cast<int32_t>(x));
      } else {
        return std::nullopt;
      }
    }
    return t;
  }

  // Reads ONNX's answer for one output.
  void FromInferred(OnnxNodeContext& c, const onnx::TypeProto& type,
                    const std::map<std::string, SymDim>& params, OnnxValue* v) {
    if (type.value_case() == onnx::TypeProto::VALUE_NOT_SET) {
      v->why_unknown = "ONNX's shape inference gives it no type";
      return;
    }
    if (!type.has_tensor_type()) {
      v->tensor = false;
      return;
    }
    v->elem_type = type.tensor_type().elem_type();
    if (!type.tensor_type().has_shape()) {
      v->why_unknown = "ONNX's shape inference gives it no rank";
      return;
    }
    v->has_shape = true;
    v->dims.clear();
    for (const auto& d : type.tensor_type().shape().dim()) {
      if (d.has_dim_value() && d.dim_value() >= 0) {
        v->dims.push_back(SymDim(d.dim_value()));
        continue;
      }
      auto it = params.find(d.dim_param());
      if (d.has_dim_param() && it != params.end()) {
        v->dims.push_back(it->second);
        continue;
      }
      v->dims.push_back(UnknownFromInputs(c));
    }
  }

  // An unknown dim of an output of `c`'s node.
  SymDim UnknownFromInputs(OnnxNodeContext& c) {
    const std::string& op = c.node->op_type();
    if (OnnxOpIsDataDependent(op)) {
      return c.UnknownDim(
          absl::StrCat("the size of ", op, "'s output depends on data"), true,
          {});
    }
    for (const OnnxValue* v : c.in) {
      if (v != nullptr && !v->has_shape) {
        return c.UnknownDim(
            absl::StrCat("its input '", v->name, "' has no known shape"), false,
            {});
      }
    }
    std::set<AtomId> deps;
    bool from_data = false;
    for (size_t i = 0; i < c.in.size(); ++i) {
      std::set<AtomId> l = c.InputLeaves(i);
      deps.insert(l.begin(), l.end());
      if (c.in[i] != nullptr && !c.in[i]->content && c.in[i]->from_data &&
          c.in[i]->has_shape && c.in[i]->dims.size() <= 1) {
        from_data = true;  // a small tensor of data, e.g. a Reshape shape
      }
    }
    return c.UnknownDim(
        absl::StrCat("ONNX's shape inference for ", op, " leaves it unknown",
                     from_data ? " (it reads values computed from data)" : ""),
        deps.empty() || from_data, deps);
  }

  // --- After each node
  // ---------------------------------------------------------

  absl::Status Finish(OnnxGraphRun* run, const onnx::NodeProto& node,
                      OnnxNodeRun* nr) {
    bool any_input = false, all_constant = true, from_data = false;
    std::set<AtomId> taint;
    for (int id : nr->inputs) {
      if (id < 0) continue;
      const OnnxValue& in = V(id);
      any_input = true;
      all_constant = all_constant && in.constant;
      if (!in.content && in.from_data) from_data = true;
      if (!in.content) taint.insert(in.taint.begin(), in.taint.end());
      for (const SymDim& d : in.dims) {
        std::set<AtomId> l = T().Leaves(d);
        taint.insert(l.begin(), l.end());
      }
    }
    for (int id : nr->captured) from_data = from_data || V(id).from_data;
    const bool foldable =
        node.op_type() == "Constant" ||
        (any_input && all_constant && nr->bodies.empty() &&
         nr->captured.empty() && !NonDeterministic(node.op_type()));
    // A call's outputs are its body's values (EvalCall): marked there.
    const bool call = OnnxNodeIsCall(*nr);
    for (size_t k = 0; k < nr->outputs.size(); ++k) {
      if (nr->outputs[k] < 0) continue;
      OnnxValue& v = V(nr->outputs[k]);
      MergeGlobal(GlobalType(run->graph, v.name), &v);
      if (auto s = Override(&v); !s.ok()) return s;
      if (!call) {
        v.folded = !v.constant && foldable && node.op_type() != "Constant";
        v.constant = v.constant || foldable;
        if (!v.content) {
          v.from_data = from_data;
          if (!from_data) v.taint = taint;
        }
      }
      if (auto s = CheckSize(*nr, v); !s.ok()) return s;
    }
    if (T().failed()) {
      const std::string failure = T().failure();
      T().ClearFailure();
      return Invalid(nr->label, ": ", failure);
    }
    return absl::OkStatus();
  }

  // Fills what ONNX's inference knows and the evaluation does not.
  void MergeGlobal(const onnx::TypeProto* global, OnnxValue* v) {
    if (global == nullptr || !v->tensor) return;
    if (!global->has_tensor_type()) {
      if (global->value_case() != onnx::TypeProto::VALUE_NOT_SET &&
          !v->has_shape && v->elem_type == 0) {
        v->tensor = false;
      }
      return;
    }
    const onnx::TypeProto::Tensor& t = global->tensor_type();
    if (v->elem_type == 0) v->elem_type = t.elem_type();
    if (!t.has_shape()) return;
    const auto& dims = t.shape().dim();
    if (!v->has_shape) {
      v->has_shape = true;
      v->dims.clear();
      for (const auto& d : dims) {
        std::optional<SymDim> s = Declared(d);
        v->dims.push_back(
            s ? *s
              : SymDim::Atom(
                    T().Unknown(v->origin,
                                v->why_unknown.empty()
                                    ? "ONNX's shape inference leaves it unknown"
                                    : v->why_unknown,
                                true, {})));
      }
      return;
    }
    if (static_cast<int>(v->dims.size()) != dims.size()) return;
    for (int i = 0; i < dims.size(); ++i) {
      if (!v->dims[i].is_constant() && dims[i].has_dim_value() &&
          dims[i].dim_value() >= 0) {
        v->dims[i] = SymDim(dims[i].dim_value());
      }
    }
  }

  // A value over the size limit is an error naming its node.
  absl::Status CheckSize(const OnnxNodeRun& nr, const OnnxValue& v) {
    if (!v.has_shape) return absl::OkStatus();
    for (const SymDim& d : v.dims) {
      if (d.is_constant() && d.constant() < 0) {
        return Invalid(nr.label, ": output '", v.name, "' has negative dim ",
                       d.constant());
      }
    }
    const int bits = OnnxElementBits(v.elem_type);
    if (bits == 0 || !Concrete(v.dims)) return absl::OkStatus();
    __int128 bytes = (bits + 7) / 8;
    for (const SymDim& d : v.dims) {
      bytes *= d.constant();
      if (bytes > kMaxOnnxValueBytes) {
        return Invalid(nr.label, ": output '", v.name,
                       "' would take more than 1 TiB (",
                       absl::StrJoin(v.dims, "x",
                                     [this](std::string* out, const SymDim& x) {
                                       out->append(T().ToString(x));
                                     }),
                       " elements of ", OnnxElementTypeName(v.elem_type),
                       "): memplan does not plan values that large");
      }
    }
    return absl::OkStatus();
  }

  static bool Concrete(const std::vector<SymDim>& dims) {
    for (const SymDim& d : dims) {
      if (!d.is_constant()) return false;
    }
    return true;
  }

  // --- Calls of the model's own functions ----------------------------------

  // What FunctionGraph knows of a function.
  struct FunctionInfo {
    int64_t bytes = 0;        // its serialized size
    int64_t nodes = 0;        // its nodes, in graphs too
    bool references = false;  // takes the call's attributes
    // The attributes' default values (ONNX IR 9's attribute_proto).
    std::vector<onnx::AttributeProto> defaults;
    const onnx::GraphProto* graph = nullptr;  // its body (the last made)
  };

  // The model's function `node` calls, or null (an op with a rule of
  // memplan's is that op).
  const onnx::FunctionProto* LocalFunction(const onnx::NodeProto& node) {
    if (functions_.empty() ||
        FindOnnxShapeRule(node.domain(), node.op_type()) != nullptr) {
      return nullptr;
    }
    auto it = functions_.find(absl::StrCat(node.domain(), ":", node.op_type()));
    return it == functions_.end() ? nullptr : it->second;
  }

  // A call of one of the model's own functions (torch.onnx's
  // export_modules_as_functions, the dynamo exporter's modules): its body
  // runs in the call's place, as ONNX Runtime runs a function it inlined.
  // The body is evaluated as a subgraph is, node by node, on the call's
  // inputs, with the attributes the call passes in and the function's
  // opsets, so each body node passes the checks of any node knowing what
  // the nodes before it made. Its values are planned as the graph's are; a
  // call's output is the body value that makes it (one that is a formal
  // input, or a second output of one value, is a copy: import.cc).
  absl::Status EvalCall(OnnxGraphRun* run, const onnx::NodeProto& node,
                        const onnx::FunctionProto& f, OnnxNodeRun* nr,
                        int depth) {
    absl::StatusOr<const onnx::GraphProto*> graph =
        FunctionGraph(f, node, nr->label);
    if (!graph.ok()) return graph.status();
    for (const onnx::OperatorSetIdProto& o : f.opset_import()) {
      // A domain only the function imports (the model's version wins).
      opsets_.try_emplace(o.domain() == "ai.onnx" ? "" : o.domain(),
                          static_cast<int>(o.version()));
    }
    std::unique_ptr<OnnxGraphRun> body =
        NewBody(run, *graph, node, nr->index, f.name());
    body->function = true;
    for (int k = 0; k < f.input_size(); ++k) {
      const int id =
          k < static_cast<int>(nr->inputs.size()) ? nr->inputs[k] : -1;
      if (id >= 0) {
        body->scope[f.input(k)] = id;
      } else {
        body->omitted.insert(f.input(k));
      }
    }
    if (auto s = EvalGraph(body.get(), depth + 1); !s.ok()) return s;
    // Names are looked up only while a graph is evaluated: a body's go.
    absl::flat_hash_map<std::string, int>().swap(body->scope);
    absl::flat_hash_set<int> taken(nr->inputs.begin(), nr->inputs.end());
    for (size_t k = 0; k < nr->outputs.size(); ++k) {
      const int out = nr->outputs[k];
      if (out < 0) continue;
      OnnxValue& v = V(out);
      if (k >= body->outputs.size()) {
        v.why_unknown =
            absl::StrCat("function ", base::BoundedMessage(f.name(), 64),
                         " has no output #", k);
        continue;
      }
      const int made = body->outputs[k];
      if (taken.insert(made).second) {
        V(made).name = v.name;  // the call's output is the body's value
        nr->outputs[k] = made;
        continue;
      }
      const OnnxValue& from = V(made);  // a copy of it
      v.elem_type = from.elem_type;
      v.tensor = from.tensor;
      v.has_shape = from.has_shape;
      v.dims = from.dims;
      v.content = from.content;
      v.constant = from.constant;
      v.folded = from.folded || from.constant;
      v.from_data = from.from_data;
      v.taint = from.taint;
      v.why_unknown = from.why_unknown;
    }
    nr->bodies.push_back(
        {base::BoundedMessage(f.name(), kMaxOnnxFunctionNameBytes),
         std::move(body)});
    return absl::OkStatus();
  }

  // The body of `f` as a graph for `call`: made once per function, or for
  // each call when its nodes take attributes from the call (ref_attr_name;
  // one the call does not pass is left out: its default). Every call
  // counts what it copies against kMaxOnnxFunctionBytes.
  absl::StatusOr<const onnx::GraphProto*> FunctionGraph(
      const onnx::FunctionProto& f, const onnx::NodeProto& call,
      absl::string_view label) {
    auto [it, added] = function_info_.try_emplace(&f);
    FunctionInfo& info = it->second;
    if (added) {
      NodesMeasure m;
      Measure(f.node(), &m);
      info.nodes = m.nodes;
      info.references = m.references;
      // A call copies the body's text, and the whole body when it takes
      // the call's attributes.
      info.bytes = info.references
                       ? static_cast<int64_t>(f.ByteSizeLong())
                       : static_cast<int64_t>(f.name().size()) + m.text_bytes;
      // FunctionProto.attribute_proto (field 11, ONNX IR 9: attributes'
      // default values) is newer than ONNX 1.12: kept as unknown bytes.
      const google::protobuf::UnknownFieldSet& unknown = f.unknown_fields();
      for (int i = 0; i < unknown.field_count(); ++i) {
        const google::protobuf::UnknownField& field = unknown.field(i);
        if (field.number() != 11) continue;
        onnx::AttributeProto& d = info.defaults.emplace_back();
        if (field.type() !=
                google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED ||
            !d.ParseFromString(field.length_delimited())) {
          return Invalid(label, ": function ",
                         base::BoundedMessage(f.name(), 64),
                         " has an attribute default (attribute_proto) that "
                         "is not an AttributeProto");
        }
      }
    }
    function_nodes_ += info.nodes;
    function_bytes_ += info.bytes;
    if (function_nodes_ > kMaxOnnxFunctionNodes ||
        function_bytes_ > kMaxOnnxFunctionBytes) {
      return Invalid(label, ": calls of the model's functions run more than ",
                     kMaxOnnxFunctionNodes, " body nodes or ",
                     kMaxOnnxFunctionBytes >> 20, " MiB of bodies in all");
    }
    if (info.graph != nullptr && !info.references) return info.graph;
    onnx::GraphProto& g = result_.function_graphs.emplace_back();
    g.set_name(f.name());
    *g.mutable_node() = f.node();
    for (const std::string& out : f.output()) g.add_output()->set_name(out);
    if (info.references) {
      for (onnx::NodeProto& n : *g.mutable_node()) {
        ResolveAttributeReferences(call, info, &n);
      }
    }
    info.graph = &g;
    return info.graph;
  }

  // Gives `node` and the nodes of its graphs the attributes the call
  // passes in (ref_attr_name), or the function's defaults for those it
  // does not; one with neither is left out (the op's own default).
  static void ResolveAttributeReferences(const onnx::NodeProto& call,
                                         const FunctionInfo& info,
                                         onnx::NodeProto* node) {
    auto* attributes = node->mutable_attribute();
    for (int i = attributes->size() - 1; i >= 0; --i) {
      onnx::AttributeProto& a = (*attributes)[i];
      if (a.ref_attr_name().empty()) {
        std::vector<onnx::GraphProto*> graphs;
        if (a.has_g()) graphs.push_back(a.mutable_g());
        for (onnx::GraphProto& g : *a.mutable_graphs()) graphs.push_back(&g);
        for (onnx::GraphProto* g : graphs) {
          for (onnx::NodeProto& n : *g->mutable_node()) {
            ResolveAttributeReferences(call, info, &n);
          }
        }
        continue;
      }
      // The call's value, else the function's default, else none (the
      // op's own default).
      const onnx::AttributeProto* given = nullptr;
      for (const onnx::AttributeProto& g : call.attribute()) {
        if (g.name() == a.ref_attr_name()) given = &g;
      }
      for (const onnx::AttributeProto& d : info.defaults) {
        if (given == nullptr && d.name() == a.ref_attr_name()) given = &d;
      }
      if (given == nullptr) {
        attributes->DeleteSubrange(i, 1);
        continue;
      }
      const std::string name = a.name();
      a = *given;
      a.set_name(name);
      a.clear_ref_attr_name();
    }
  }

  // --- Subgraphs
  // ---------------------------------------------------------------

  // Names read by `node`'s subgraphs from outside (an op memplan does not
  // run): they stay alive across the node.
  void CaptureNames(OnnxGraphRun* run, const onnx::NodeProto& node,
                    OnnxNodeRun* nr) {
    std::vector<std::string> names;
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.has_g()) OuterNames(a.g(), &names);
      for (const onnx::GraphProto& g : a.graphs()) OuterNames(g, &names);
    }
    for (const std::string& n : names) {
      const int id = Lookup(run, n);
      if (id >= 0 && std::find(nr->captured.begin(), nr->captured.end(), id) ==
                         nr->captured.end()) {
        nr->captured.push_back(id);
      }
    }
  }

  static void OuterNames(const onnx::GraphProto& g,
                         std::vector<std::string>* names) {
    absl::flat_hash_set<std::string> local;
    for (const auto& vi : g.input()) local.insert(vi.name());
    for (const auto& t : g.initializer()) local.insert(t.name());
    auto use = [&](const std::string& n) {
      if (!n.empty() && !local.contains(n)) names->push_back(n);
    };
    for (const onnx::NodeProto& n : g.node()) {
      for (const std::string& in : n.input()) use(in);
      for (const onnx::AttributeProto& a : n.attribute()) {
        std::vector<std::string> inner;
        if (a.has_g()) OuterNames(a.g(), &inner);
        for (const auto& s : a.graphs()) OuterNames(s, &inner);
        for (const std::string& r : inner) use(r);
      }
      for (const std::string& out : n.output()) local.insert(out);
    }
    for (const auto& vi : g.output()) use(vi.name());
  }

  const onnx::GraphProto* Body(const onnx::NodeProto& node,
                               absl::string_view attribute) {
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.name() == attribute && a.has_g()) return &a.g();
    }
    return nullptr;
  }

  // Starts the run of a body of `node` inside `run`.
  std::unique_ptr<OnnxGraphRun> NewBody(OnnxGraphRun* run,
                                        const onnx::GraphProto* g,
                                        const onnx::NodeProto& node, int index,
                                        absl::string_view attribute) {
    auto body = std::make_unique<OnnxGraphRun>();
    body->graph = g;
    body->parent = run;
    body->path = OnnxSubgraphPath(run->path, node, index, attribute);
    if (OnnxRunInFunction(*run) || LocalFunction(node) != nullptr) {
      // Made at every call: cut short and unique, however many calls share
      // a name or a cut ("#2", "#3"...; the body's values, labels and ops
      // are named under it).
      body->path = base::BoundedMessage(body->path, kMaxOnnxFunctionNameBytes);
      int& next = call_paths_[absl::HashOf(body->path)];
      std::string unique = body->path;
      while (!unique_paths_.insert(absl::HashOf(unique)).second) {
        unique = absl::StrCat(body->path, "#", ++next + 1);
      }
      body->path = std::move(unique);
    }
    return body;
  }

  // Defines a body's formal input `i` like `like` (when given), else from
  // its declared type.
  absl::Status DefineBodyInput(OnnxGraphRun* body, int i, const OnnxValue* like,
                               int32_t type, std::vector<SymDim> dims) {
    const onnx::ValueInfoProto& vi = body->graph->input(i);
    if (body->scope.contains(vi.name())) {
      return Invalid(Where(body), ": input '", vi.name(), "' is listed twice");
    }
    const int id = NewValue(vi.name(), "");
    OnnxValue& v = V(id);
    if (like != nullptr) {
      v.elem_type = like->elem_type;
      v.tensor = like->tensor;
      v.has_shape = like->has_shape;
      v.dims = like->dims;
    } else if (type != 0) {
      SetOnnxShape(&v, type, std::move(dims));
    }
    MergeGlobal(vi.has_type() ? &vi.type() : nullptr, &v);
    v.from_data = true;  // it changes from one iteration to the next
    if (auto s = Override(&v); !s.ok()) return s;
    body->inputs.push_back(id);
    body->scope[vi.name()] = id;
    return absl::OkStatus();
  }

  // Collects what a finished body captured into the node's list.
  static void AddCaptured(const OnnxGraphRun& body, OnnxNodeRun* nr) {
    absl::flat_hash_set<int> listed(nr->captured.begin(), nr->captured.end());
    for (int id : body.captured) {
      if (listed.insert(id).second) nr->captured.push_back(id);
    }
  }

  // The branch an If runs (0 then, 1 else) when its condition is known
  // once shapes are; -1 when it depends on data.
  int TakenBranch(const OnnxNodeRun& nr) {
    const OnnxValue& c = V(nr.inputs[0]);
    if (!c.content || c.content->size() != 1) return -1;
    if (c.content->real) return c.content->reals[0] != 0 ? 0 : 1;
    std::optional<int> cmp = T().Compare(c.content->ints[0], SymDim(0));
    return cmp ? (*cmp != 0 ? 0 : 1) : -1;
  }

  // Evaluates one If branch; with the condition unknown (`taken` < 0), a
  // branch that cannot run with these shapes is not an error: `failure`
  // says why.
  absl::Status EvalBranch(OnnxGraphRun* branch, const OnnxNodeRun& nr,
                          int taken, int depth, std::string* failure) {
    absl::Status s = EvalGraph(branch, depth + 1);
    if (s.ok() && branch->outputs.size() != nr.outputs.size()) {
      s = Invalid(nr.label, ": its ", branch->path, " has ",
                  branch->outputs.size(), " outputs, the node ",
                  nr.outputs.size());
    }
    if (!s.ok()) {
      if (taken >= 0 || !s.GetPayload(kShapeErrorPayload)) return s;
      *failure = std::string(s.message());
    } else if (taken < 0) {
      *failure = InconsistentShapes(*branch);
    }
    return absl::OkStatus();
  }

  absl::Status EvalIf(OnnxGraphRun* run, const onnx::NodeProto& node,
                      OnnxNodeRun* nr, int depth) {
    const char* names[2] = {"then_branch", "else_branch"};
    const onnx::GraphProto* branches[2] = {Body(node, names[0]),
                                           Body(node, names[1])};
    if (branches[0] == nullptr || branches[1] == nullptr) {
      return Invalid(nr->label, ": an If needs then_branch and else_branch");
    }
    if (nr->inputs.empty() || nr->inputs[0] < 0) {
      return Invalid(nr->label, ": an If needs a condition");
    }
    const int taken = TakenBranch(*nr);
    std::unique_ptr<OnnxGraphRun> runs[2];
    std::string failures[2];
    for (int b = 0; b < 2; ++b) {
      if (taken >= 0 && taken != b) continue;
      runs[b] = NewBody(run, branches[b], node, nr->index, names[b]);
      if (auto s = EvalBranch(runs[b].get(), *nr, taken, depth, &failures[b]);
          !s.ok()) {
        return s;
      }
    }
    if (!failures[0].empty() && !failures[1].empty()) {
      return Invalid(nr->label, ": neither branch can run with these shapes: ",
                     failures[0]);
    }
    for (int b = 0; b < 2; ++b) {
      if (runs[b] != nullptr && failures[b].empty()) {
        AddCaptured(*runs[b], nr);
        nr->bodies.push_back({names[b], std::move(runs[b])});
        continue;
      }
      nr->skipped_values += CountValues(*branches[b]);
      if (!failures[b].empty()) {
        result_.warnings.push_back(absl::StrCat(
            nr->label, ": its ", names[b],
            " cannot run with these shapes, so only the other branch is "
            "planned (",
            failures[b].substr(0, 300), ")"));
      }
    }
    for (size_t k = 0; k < nr->outputs.size(); ++k) {
      if (nr->outputs[k] < 0) continue;
      std::vector<const OnnxValue*> outs;
      for (const OnnxBodyRun& b : nr->bodies) {
        outs.push_back(&V(b.run->outputs[k]));
      }
      JoinBranches(*nr, outs, &V(nr->outputs[k]));
    }
    return absl::OkStatus();
  }

  // Why a branch's shapes are inconsistent (ONNX's inference refused a node
  // of it), or "".
  std::string InconsistentShapes(const OnnxGraphRun& body) {
    for (const OnnxNodeRun& nr : body.nodes) {
      for (int id : nr.outputs) {
        if (id >= 0 && absl::StartsWith(V(id).why_unknown,
                                        "ONNX's shape inference failed")) {
          return absl::StrCat(nr.label, ": ", V(id).why_unknown);
        }
      }
      for (const OnnxBodyRun& b : nr.bodies) {
        std::string why = InconsistentShapes(*b.run);
        if (!why.empty()) return why;
      }
    }
    return "";
  }

  // An If output from its branches' outputs: the one that runs, or the
  // larger of the two when either may.
  void JoinBranches(const OnnxNodeRun& nr,
                    const std::vector<const OnnxValue*>& outs, OnnxValue* v) {
    const OnnxValue& a = *outs[0];
    v->elem_type = a.elem_type;
    v->tensor = a.tensor;
    v->has_shape = a.has_shape;
    v->dims = a.dims;
    v->why_unknown = a.why_unknown;
    if (outs.size() == 1) {
      v->content = a.content;
      v->from_data = a.from_data;
      v->taint = a.taint;
      return;
    }
    const OnnxValue& b = *outs[1];
    if (v->elem_type == 0) v->elem_type = b.elem_type;
    if (a.has_shape && b.has_shape && a.dims == b.dims) return;
    if (!a.has_shape || !b.has_shape) {
      v->has_shape = false;
      return;
    }
    std::optional<int64_t> na = OnnxElementCount(a.dims);
    std::optional<int64_t> nb = OnnxElementCount(b.dims);
    if (na && nb) {
      v->dims = *na >= *nb ? a.dims : b.dims;
      result_.warnings.push_back(
          absl::StrCat(nr.label, ": the branches give '", v->name,
                       "' different shapes; planning the larger (",
                       std::max(*na, *nb), " elements)"));
      return;
    }
    if (a.dims.size() != b.dims.size()) {
      v->has_shape = false;
      v->why_unknown = "its branches give it different ranks";
      return;
    }
    for (size_t i = 0; i < a.dims.size(); ++i) {
      v->dims[i] = T().Max(a.dims[i], b.dims[i]);
    }
  }

  // A carried value after the last iteration: its shape if the body keeps
  // it, else unknown where the body changes it.
  void CarriedOut(OnnxNodeRun* nr, const OnnxValue& in, const OnnxValue& out,
                  OnnxValue* v) {
    v->elem_type = out.elem_type != 0 ? out.elem_type : in.elem_type;
    v->tensor = out.tensor;
    v->has_shape = in.has_shape && out.has_shape;
    if (!v->has_shape) {
      v->why_unknown = "the body gives no rank for it";
      return;
    }
    if (in.dims.size() != out.dims.size()) {
      v->has_shape = false;
      v->why_unknown = "its rank changes from one iteration to the next";
      return;
    }
    v->dims = out.dims;
    for (size_t i = 0; i < in.dims.size(); ++i) {
      if (in.dims[i] == out.dims[i]) continue;
      v->dims[i] = SymDim::Atom(T().Unknown(
          nr->label, "it changes from one iteration to the next", true, {}));
    }
  }

  absl::Status EvalLoop(OnnxGraphRun* run, const onnx::NodeProto& node,
                        OnnxNodeRun* nr, int depth) {
    const onnx::GraphProto* g = Body(node, "body");
    if (g == nullptr) return Invalid(nr->label, ": a Loop needs a body");
    const int carried = std::max(0, node.input_size() - 2);
    if (g->input_size() != carried + 2 || g->output_size() < carried + 1) {
      return Invalid(nr->label, ": its body has ", g->input_size(),
                     " inputs and ", g->output_size(), " outputs for ", carried,
                     " carried values");
    }
    nr->carried = carried;
    auto body = NewBody(run, g, node, nr->index, "body");
    if (auto s = DefineBodyInput(body.get(), 0, nullptr,
                                 onnx::TensorProto::INT64, {});
        !s.ok())
      return s;
    if (auto s = DefineBodyInput(body.get(), 1, nullptr,
                                 onnx::TensorProto::BOOL, {});
        !s.ok())
      return s;
    for (int j = 0; j < carried; ++j) {
      const int id = nr->inputs[j + 2];
      if (auto s = DefineBodyInput(body.get(), j + 2, id < 0 ? nullptr : &V(id),
                                   0, {});
          !s.ok())
        return s;
    }
    if (auto s = EvalGraph(body.get(), depth + 1); !s.ok()) return s;
    const SymDim trips = TripCount(*nr);
    for (size_t k = 0; k < nr->outputs.size(); ++k) {
      if (nr->outputs[k] < 0) continue;
      OnnxValue* v = &V(nr->outputs[k]);
      if (static_cast<int>(k) < carried) {
        CarriedOut(nr, V(body->inputs[k + 2]), V(body->outputs[k + 1]), v);
      } else if (k + 1 < body->outputs.size()) {
        Stacked(V(body->outputs[k + 1]), trips, 0, v);
      }
    }
    AddCaptured(*body, nr);
    nr->bodies.push_back({"body", std::move(body)});
    return absl::OkStatus();
  }

  // The number of iterations of a Loop: its M input when known.
  SymDim TripCount(const OnnxNodeRun& nr) {
    const int m = nr.inputs.empty() ? -1 : nr.inputs[0];
    if (m >= 0 && V(m).content && V(m).content->size() == 1 &&
        !V(m).content->real) {
      return V(m).content->ints[0];
    }
    const bool has_m = m >= 0;
    return SymDim::Atom(
        T().Unknown(nr.label,
                    has_m ? "its trip count is computed from data"
                          : "it loops until a condition computed from data",
                    true, {}));
  }

  // A scan output: the per-iteration value stacked `trips` times at `axis`.
  void Stacked(const OnnxValue& each, const SymDim& trips, int64_t axis,
               OnnxValue* v) {
    v->elem_type = each.elem_type;
    v->tensor = each.tensor;
    v->has_shape = each.has_shape;
    if (!each.has_shape) {
      v->why_unknown = "the body gives no rank for it";
      return;
    }
    v->dims = each.dims;
    const int64_t rank = static_cast<int64_t>(each.dims.size()) + 1;
    if (axis < 0) axis += rank;
    axis = std::max<int64_t>(0, std::min(axis, rank - 1));
    v->dims.insert(v->dims.begin() + axis, trips);
  }

  // Defines a Scan body's inputs: the states as given, each scan input
  // without its scanned axis; `trips` is the first scan input's length.
  absl::Status DefineScanInputs(OnnxGraphRun* body, const OnnxNodeRun& nr,
                                int states, const std::vector<int64_t>& axes,
                                std::optional<SymDim>* trips) {
    for (size_t j = 0; j < nr.inputs.size(); ++j) {
      const OnnxValue* in = nr.inputs[j] < 0 ? nullptr : &V(nr.inputs[j]);
      const int i = static_cast<int>(j);
      if (i < states || in == nullptr || !in->has_shape) {
        if (auto s = DefineBodyInput(body, i, in, 0, {}); !s.ok()) return s;
        continue;
      }
      int64_t axis = axes[j - states];
      const int64_t rank = static_cast<int64_t>(in->dims.size());
      if (axis < 0) axis += rank;
      if (axis < 0 || axis >= rank) {
        return Invalid(nr.label, ": scan axis ", axes[j - states],
                       " is out of range for '", in->name, "'");
      }
      if (!*trips) *trips = in->dims[axis];
      std::vector<SymDim> dims = in->dims;
      dims.erase(dims.begin() + axis);
      if (auto s = DefineBodyInput(body, i, nullptr, in->elem_type, dims);
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

  absl::Status EvalScan(OnnxGraphRun* run, const onnx::NodeProto& node,
                        OnnxNodeRun* nr, int depth) {
    const onnx::GraphProto* g = Body(node, "body");
    if (g == nullptr) return Invalid(nr->label, ": a Scan needs a body");
    OnnxNodeContext c = Context(node, *nr);
    const int scans = static_cast<int>(c.Int("num_scan_inputs", 0));
    const int states = node.input_size() - scans;
    if (scans <= 0 || states < 0 || g->input_size() != node.input_size() ||
        g->output_size() != node.output_size()) {
      return Invalid(nr->label,
                     ": its inputs, outputs and num_scan_inputs "
                     "do not match its body");
    }
    std::vector<int64_t> in_axes = c.Ints("scan_input_axes");
    const std::vector<int64_t> out_axes = c.Ints("scan_output_axes");
    in_axes.resize(scans, 0);
    nr->carried = states;
    auto body = NewBody(run, g, node, nr->index, "body");
    std::optional<SymDim> trips;
    if (auto s = DefineScanInputs(body.get(), *nr, states, in_axes, &trips);
        !s.ok()) {
      return s;
    }
    if (auto s = EvalGraph(body.get(), depth + 1); !s.ok()) return s;
    if (!trips) {
      trips = SymDim::Atom(T().Unknown(
          nr->label, "its scan inputs have no known shape", true, {}));
    }
    for (size_t k = 0; k < nr->outputs.size(); ++k) {
      if (nr->outputs[k] < 0) continue;
      OnnxValue* v = &V(nr->outputs[k]);
      if (static_cast<int>(k) < states) {
        CarriedOut(nr, V(body->inputs[k]), V(body->outputs[k]), v);
        continue;
      }
      const size_t s = k - states;
      Stacked(V(body->outputs[k]), *trips,
              s < out_axes.size() ? out_axes[s] : 0, v);
    }
    AddCaptured(*body, nr);
    nr->bodies.push_back({"body", std::move(body)});
    return absl::OkStatus();
  }

  const onnx::ModelProto& model_;  // after ONNX's inference
  // The model's own functions by "domain:name", as ONNX's inference keys
  // them.
  std::unordered_map<std::string, const onnx::FunctionProto*> functions_;
  std::unordered_map<const onnx::FunctionProto*, FunctionInfo> function_info_;
  int64_t function_nodes_ = 0;  // body nodes of calls evaluated
  int64_t function_bytes_ = 0;
  // Bodies run inside functions, by the hash of their path as cut: the
  // suffixes given so far; and the hashes of the paths given.
  absl::flat_hash_map<size_t, int> call_paths_;
  absl::flat_hash_set<size_t> unique_paths_;  // bytes of functions called
  const OnnxEvalOptions& options_;            // --dim and --input
  const std::string name_;                    // for messages
  std::map<std::string, int> opsets_;         // domain ("" default) -> version
  absl::flat_hash_set<std::string> input_symbols_;  // dims --dim can set
  absl::flat_hash_map<const onnx::GraphProto*,
                      absl::flat_hash_map<std::string, const onnx::TypeProto*>>
      global_types_;  // ONNX's inferred types, per graph
  // What each graph run captured, for deduplication.
  absl::flat_hash_map<const OnnxGraphRun*, absl::flat_hash_set<int>>
      captured_sets_;
  // Per graph being evaluated (innermost last): value -> producing node.
  std::vector<absl::flat_hash_map<std::string, int>> producers_;
  OnnxEvaluation result_;   // what Run returns
  int64_t nodes_seen_ = 0;  // nodes evaluated, for polling options_.cancel
};

}  // namespace

absl::StatusOr<OnnxEvaluation> EvaluateOnnxShapes(
    const onnx::ModelProto& model, const OnnxEvalOptions& options,
    absl::string_view name) {
  Evaluator evaluator(model, options, name);
  absl::StatusOr<OnnxEvaluation> e = evaluator.Run();
  if (!e.ok()) return absl::Status(e.status().code(), e.status().message());
  return e;
}

int OnnxElementBits(int32_t elem_type) {
  if (elem_type <= 0 || elem_type >= kTypeCount) return 0;
  return kElementTypes[elem_type].bits;
}

std::string OnnxElementTypeName(int32_t elem_type) {
  if (elem_type <= 0 || elem_type >= kTypeCount) {
    return absl::StrCat("type ", elem_type);
  }
  return kElementTypes[elem_type].name;
}

bool OnnxOpChangedAfterKnownOpsets(absl::string_view op_type, int opset) {
  // Ops whose shapes (not only types) changed in opsets 18 to 24.
  static const auto* changed =
      new absl::flat_hash_map<std::string, int>{{"Pad", 18},
                                                {"ReduceL1", 18},
                                                {"ReduceL2", 18},
                                                {"ReduceLogSum", 18},
                                                {"ReduceLogSumExp", 18},
                                                {"ReduceMax", 18},
                                                {"ReduceMean", 18},
                                                {"ReduceMin", 18},
                                                {"ReduceProd", 18},
                                                {"ReduceSumSquare", 18},
                                                {"Split", 18},
                                                {"Resize", 18},
                                                {"LpPool", 18},
                                                {"AveragePool", 19},
                                                {"GridSample", 20},
                                                {"GroupNormalization", 21}};
  auto it = changed->find(std::string(op_type));
  return it != changed->end() && opset >= it->second &&
         it->second > OnnxNewestKnownOpset();
}

int OnnxNewestKnownOpset() {
  static const int newest = [] {
    const auto& map =
        onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
    auto it = map.find(onnx::ONNX_DOMAIN);
    return it == map.end() ? 17 : it->second.second;
  }();
  return newest;
}

}  // namespace memplan::formats
