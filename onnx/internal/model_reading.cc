#include "onnx/internal/model_reading.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "base/text.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/repeated_field.h"
#include "onnx/defs/schema.h"
#include "onnx/lean.h"
#include "onnx/shape_inference/implementation.h"
#include "onnx/shapes.h"

namespace memplan::formats::internal {
namespace {

// Debian's libonnx is built with ONNX_NAMESPACE=onnx (and ONNX_ML); the alias
// keeps this file right for any namespace the library was built with.
namespace onnx = ::ONNX_NAMESPACE;

// Models larger than this are refused before they are read (protobuf's
// own limit is 2 GiB).
constexpr size_t kMaxModelBytes = (size_t{1} << 31) - 1;
// Op types renamed while ONNX's inference runs (see HideChangedOps).
constexpr char kHiddenPrefix[] = "memplan.hidden.";
// Nodes of a cycle named in its message, at most this many.
constexpr int kMaxCycleListed = 4;

// Calls f(graph) for the main graph and every subgraph, outer first, each
// mutable.
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

// Numbers the typed data fields of a tensor of `type` hold for `count`
// elements: complex types hold two numbers each, 4-bit types two to an
// int32 (-1: more than 64 bits count).
int64_t ExpectedTypedData(int32_t type, int64_t count) {
  if (type == onnx::TensorProto::COMPLEX64 ||
      type == onnx::TensorProto::COMPLEX128) {
    int64_t numbers = 0;
    return __builtin_mul_overflow(count, 2, &numbers) ? -1 : numbers;
  }
  if (OnnxElementBits(type) == 4) return (count + 1) / 2;
  return count;
}

// What SanitizeTensor reads of a parsed tensor.
TensorDataFacts FactsOf(const onnx::TensorProto& t) {
  TensorDataFacts f;
  f.data_type = t.data_type();
  f.external = t.data_location() == onnx::TensorProto::EXTERNAL;
  f.dims.assign(t.dims().begin(), t.dims().end());
  f.has_raw = t.has_raw_data();
  f.raw_bytes = static_cast<int64_t>(t.raw_data().size());
  f.held = t.float_data_size() + t.int32_data_size() + t.int64_data_size() +
           t.double_data_size() + t.uint64_data_size() + t.string_data_size();
  return f;
}

// Checks one tensor's data against its dims; clears data too large for the
// evaluation to fold (only shapes matter, and the model is copied several
// times) and marks tensors without data as external, so that ONNX 1.12's
// inference, which reads data without checking its length, throws instead
// of reading past it.
absl::Status SanitizeTensor(onnx::TensorProto* t, absl::string_view where) {
  const TensorDataFacts f = FactsOf(*t);
  switch (JudgeTensorData(f)) {
    case TensorDataVerdict::kKeep:
      return absl::OkStatus();
    case TensorDataVerdict::kTooManyElements:
      return Invalid(where, ": tensor '", t->name(),
                     "' has more elements than 64 bits count");
    case TensorDataVerdict::kMismatch:
      return Invalid(where, ": tensor '", t->name(), "' holds ",
                     f.has_raw ? f.raw_bytes : f.held,
                     f.has_raw ? " bytes" : " numbers",
                     " of data that do not match its dims and type");
    case TensorDataVerdict::kClearLarge:
    case TensorDataVerdict::kMarkNoData:
      break;
  }
  t->clear_raw_data();
  t->clear_float_data();
  t->clear_int32_data();
  t->clear_int64_data();
  t->clear_double_data();
  t->clear_uint64_data();
  t->clear_string_data();
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  return absl::OkStatus();
}

// Ops whose inference in ONNX 1.12 trusts its attributes and input ranks
// (a stride of 0 divides by zero, a kernel longer than the input's spatial
// rank reads past a vector, a blocksize of 2^32 squares to 0, a Split
// without outputs divides by 0): one hostile node kills the process with
// a signal no try can catch. memplan's own rules (rules_conv.cc,
// rules_reshape.cc, rules_slice.cc) check what they read and evaluate
// these; STFT goes to OnnxFallback, which checks its rank first.
bool UnsafeForOnnxInference(absl::string_view op) {
  static const auto* ops = new absl::flat_hash_set<absl::string_view>{
      "Conv",          "ConvInteger",  "QLinearConv", "DeformConv",
      "ConvTranspose", "MaxPool",      "AveragePool", "LpPool",
      "DepthToSpace",  "SpaceToDepth", "Split",       "STFT"};
  return ops->contains(op);
}

// Renames, while ONNX's inference runs, ops whose shapes changed after the
// opsets ONNX 1.12 knows, so its inference leaves them to memplan's rules
// instead of applying an older schema (ReduceMean-13 would reduce every
// axis of a ReduceMean-18), and ops ONNX cannot infer safely
// (UnsafeForOnnxInference).
// Nodes calling one of the model's own functions are hidden too: ONNX
// would infer the body's nodes unchecked (and a function calling itself
// without end); memplan's evaluation runs each call's body node by node,
// every node checked (shapes.cc, EvalCall).
void HideChangedOps(onnx::ModelProto* model, bool hide) {
  const int opset = DefaultOpset(*model);
  const bool newer = opset > OnnxNewestKnownOpset();
  absl::flat_hash_set<std::string> functions;
  for (const onnx::FunctionProto& f : model->functions()) {
    functions.insert(absl::StrCat(f.domain(), ":", f.name()));
  }
  ForEachMutableGraph(model->mutable_graph(), [&](onnx::GraphProto* g) {
    for (onnx::NodeProto& n : *g->mutable_node()) {
      if (!hide) {
        if (absl::StartsWith(n.op_type(), kHiddenPrefix)) {
          n.set_op_type(n.op_type().substr(sizeof(kHiddenPrefix) - 1));
        }
        continue;
      }
      const bool call =
          functions.contains(absl::StrCat(n.domain(), ":", n.op_type()));
      const bool onnx_op = n.domain().empty() || n.domain() == "ai.onnx";
      if (call || (onnx_op && ((newer && OnnxOpChangedAfterKnownOpsets(
                                             n.op_type(), opset)) ||
                               UnsafeForOnnxInference(n.op_type())))) {
        n.set_op_type(kHiddenPrefix + n.op_type());
      }
    }
  });
}

// --- Sorting nodes
// -------------------------------------------------------------

// One graph's nodes as SortNodes orders them: for each node, its edges to
// the nodes of the same graph making what it reads (CSR).
struct NodeDeps {
  std::vector<int> begin;  // node i's edges: [begin[i], begin[i + 1])
  std::vector<int> maker;  // per edge: the node making the value read
  std::vector<absl::string_view> value;  // per edge: the value's name (in
                                         // the maker's outputs)
};

// The stable topological order of `n` nodes: Kahn's algorithm, taking the
// ready node first in the file each time. Shorter than n when some nodes
// wait on a cycle.
std::vector<int> StableOrder(const NodeDeps& deps, int n) {
  std::vector<int> pending(n), next_begin(n + 1, 0);
  for (int i = 0; i < n; ++i) pending[i] = deps.begin[i + 1] - deps.begin[i];
  for (int m : deps.maker) ++next_begin[m + 1];
  for (int i = 0; i < n; ++i) next_begin[i + 1] += next_begin[i];
  std::vector<int> next(deps.maker.size()),
      at(next_begin.begin(), next_begin.end() - 1);
  for (int i = 0; i < n; ++i) {
    for (int e = deps.begin[i]; e < deps.begin[i + 1]; ++e) {
      next[at[deps.maker[e]]++] = i;
    }
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < n; ++i) {
    if (pending[i] == 0) ready.push(i);
  }
  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int e = next_begin[i]; e < next_begin[i + 1]; ++e) {
      if (--pending[next[e]] == 0) ready.push(next[e]);
    }
  }
  return order;
}

// Names a cycle among the nodes `order` left out: each of them reads from
// another one left out (its wait never ended), so walking back from one
// comes round to a node it saw.
absl::Status CycleError(const onnx::GraphProto& g, const NodeDeps& deps,
                        const std::vector<int>& order, const std::string& path,
                        absl::string_view name) {
  std::vector<bool> placed(g.node_size(), false);
  for (int i : order) placed[i] = true;
  int at = static_cast<int>(std::find(placed.begin(), placed.end(), false) -
                            placed.begin());
  std::vector<int> seen_at(g.node_size(), -1), walk, edges;
  while (seen_at[at] < 0) {
    seen_at[at] = static_cast<int>(walk.size());
    walk.push_back(at);
    int e = deps.begin[at];
    while (placed[deps.maker[e]]) ++e;
    edges.push_back(e);
    at = deps.maker[e];
  }
  // The cycle's edges, each read by the maker of the one before (the first
  // by the last one's), from its first node in the file: the last edge's.
  std::vector<int> cycle(edges.begin() + seen_at[at], edges.end());
  std::rotate(cycle.begin(),
              std::min_element(
                  cycle.begin(), cycle.end(),
                  [&](int a, int b) { return deps.maker[a] < deps.maker[b]; }),
              cycle.end());
  std::rotate(cycle.begin(), cycle.begin() + 1, cycle.end());
  auto label = [&](int i) { return OnnxNodeLabel(g.node(i), i, path); };
  std::string links = label(deps.maker[cycle.back()]);
  const int listed = std::min<int>(cycle.size(), kMaxCycleListed);
  for (int k = 0; k < listed; ++k) {
    absl::StrAppend(&links, k == 0 ? " reads '" : ", which reads '",
                    deps.value[cycle[k]], "' from ",
                    label(deps.maker[cycle[k]]));
  }
  if (listed < static_cast<int>(cycle.size())) {
    absl::StrAppend(&links, ", and so on (", cycle.size(),
                    " nodes in the cycle)");
  }
  return Invalid(name, ": nodes form a cycle, so no order runs them: ", links);
}

// Puts the nodes of `g` in `order`. The new list is on the graph's arena
// (if any), so that nodes move by pointer: across arenas, Swap copies every
// node, subgraphs included.
void Reorder(onnx::GraphProto* g, const std::vector<int>& order) {
  google::protobuf::RepeatedPtrField<onnx::NodeProto> sorted(g->GetArena());
  sorted.Reserve(static_cast<int>(order.size()));
  for (int i : order) sorted.Add()->Swap(g->mutable_node(i));
  g->mutable_node()->Swap(&sorted);
}

// Sorts the subgraphs of `g`, then `g` (see SortNodes); adds to *outer the
// names `g` reads and does not define (from enclosing graphs, or undefined).
absl::Status SortGraph(onnx::GraphProto* g, const std::string& path,
                       absl::string_view name,
                       absl::flat_hash_set<std::string>* outer,
                       const base::CancelToken* cancel) {
  absl::flat_hash_set<absl::string_view> local;
  for (const auto& vi : g->input()) local.insert(vi.name());
  for (const auto& t : g->initializer()) local.insert(t.name());
  for (const auto& t : g->sparse_initializer()) local.insert(t.values().name());
  absl::flat_hash_map<absl::string_view, int> maker;
  for (int i = 0; i < g->node_size(); ++i) {
    if (base::CancelledAt(cancel, i)) return ImportCancelled(name);
    for (const std::string& o : g->node(i).output()) {
      if (!o.empty() && !local.contains(o)) maker.try_emplace(o, i);
    }
  }
  NodeDeps deps;
  auto read = [&](absl::string_view in) {
    if (in.empty() || local.contains(in)) return;
    auto m = maker.find(in);
    if (m == maker.end()) {
      outer->emplace(in);
      return;
    }
    deps.maker.push_back(m->second);
    deps.value.push_back(m->first);
  };
  for (int i = 0; i < g->node_size(); ++i) {
    if (base::CancelledAt(cancel, i)) return ImportCancelled(name);
    deps.begin.push_back(static_cast<int>(deps.maker.size()));
    onnx::NodeProto* node = g->mutable_node(i);
    absl::flat_hash_set<std::string> inner;  // what its subgraphs read
    for (onnx::AttributeProto& a : *node->mutable_attribute()) {
      if (!a.has_g() && a.graphs_size() == 0) continue;
      const std::string sub = OnnxSubgraphPath(path, *node, i, a.name());
      absl::Status s;
      if (a.has_g()) {
        s.Update(SortGraph(a.mutable_g(), sub, name, &inner, cancel));
      }
      for (onnx::GraphProto& sg : *a.mutable_graphs()) {
        s.Update(SortGraph(&sg, sub, name, &inner, cancel));
      }
      if (!s.ok()) return s;
    }
    for (const std::string& in : node->input()) read(in);
    std::vector<std::string> captured(inner.begin(), inner.end());
    std::sort(captured.begin(), captured.end());  // a stable cycle message
    for (const std::string& in : captured) read(in);
  }
  deps.begin.push_back(static_cast<int>(deps.maker.size()));
  for (const auto& vi : g->output()) {
    if (!local.contains(vi.name()) && !maker.contains(vi.name())) {
      outer->insert(vi.name());
    }
  }
  bool in_order = true;
  for (int i = 0; i < g->node_size() && in_order; ++i) {
    for (int e = deps.begin[i]; e < deps.begin[i + 1]; ++e) {
      in_order = in_order && deps.maker[e] < i;
    }
  }
  if (in_order) return absl::OkStatus();
  if (cancel != nullptr && cancel->Cancelled()) return ImportCancelled(name);
  const std::vector<int> order = StableOrder(deps, g->node_size());
  if (static_cast<int>(order.size()) < g->node_size()) {
    return CycleError(*g, deps, order, path, name);
  }
  Reorder(g, order);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<onnx::ModelProto> ParseModel(absl::string_view bytes,
                                            absl::string_view name) {
  onnx::ModelProto model;
  if (auto s = ParseModelInto(bytes, name, &model); !s.ok()) return s;
  return model;
}

absl::StatusOr<onnx::ModelProto*> ParseModel(absl::string_view bytes,
                                             absl::string_view name,
                                             google::protobuf::Arena* arena,
                                             const base::CancelToken* cancel) {
  auto* model = google::protobuf::Arena::CreateMessage<onnx::ModelProto>(arena);
  if (auto s = ParseModelInto(bytes, name, model, cancel); !s.ok()) return s;
  return model;
}

namespace {

// The bytes of a message in blocks, as protobuf's parser asks for them,
// until a token fires: then no more (the parse fails, and the caller asks
// the token why). A block is parsed in a few milliseconds at most.
class CancellableBytes final
    : public google::protobuf::io::ZeroCopyInputStream {
 public:
  CancellableBytes(absl::string_view bytes, const base::CancelToken* cancel)
      : bytes_(bytes.data(), static_cast<int>(bytes.size()), kParseBlockBytes),
        cancel_(cancel) {}

  bool Next(const void** data, int* size) override {
    if (cancel_ != nullptr && cancel_->Cancelled()) return false;
    return bytes_.Next(data, size);
  }
  void BackUp(int count) override { bytes_.BackUp(count); }
  bool Skip(int count) override { return bytes_.Skip(count); }
  int64_t ByteCount() const override { return bytes_.ByteCount(); }

 private:
  google::protobuf::io::ArrayInputStream bytes_;
  const base::CancelToken* cancel_;
};

}  // namespace

absl::Status ParseModelInto(absl::string_view bytes, absl::string_view name,
                            onnx::ModelProto* model,
                            const base::CancelToken* cancel) {
  auto not_onnx = [&] {
    return Invalid(name,
                   ": not an ONNX model, or truncated: it does not parse as "
                   "an onnx.ModelProto");
  };
  if (bytes.size() > kMaxModelBytes) return not_onnx();
  // Large tensors' data, cleared after the parse, is never parsed at all.
  absl::StatusOr<std::string> lean = LeanOnnxModel(bytes, {}, cancel);
  if (!lean.ok()) {
    return lean.status().code() == absl::StatusCode::kDeadlineExceeded
               ? ImportCancelled(name)
               : lean.status();
  }
  CancellableBytes in(*lean, cancel);
  const bool parsed = model->ParseFromZeroCopyStream(&in);
  if (cancel != nullptr && cancel->Cancelled()) return ImportCancelled(name);
  if (!parsed) return not_onnx();
  const onnx::GraphProto& g = model->graph();
  if (!model->has_graph() || (g.node_size() == 0 && g.input_size() == 0)) {
    return Invalid(name, ": not an ONNX model: it has no graph");
  }
  return absl::OkStatus();
}

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

int DefaultOpset(const onnx::ModelProto& model) {
  int version = -1;
  for (const onnx::OperatorSetIdProto& o : model.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") {
      version = static_cast<int>(o.version());
    }
  }
  return version;
}

TensorDataVerdict JudgeTensorData(const TensorDataFacts& t) {
  if (t.external) return TensorDataVerdict::kKeep;
  int64_t count = 1;
  for (int64_t d : t.dims) {
    if (d < 0) return TensorDataVerdict::kKeep;  // the evaluation names it
    if (__builtin_mul_overflow(count, d, &count)) {
      return TensorDataVerdict::kTooManyElements;
    }
  }
  const int64_t expected = ExpectedTypedData(t.data_type, count);
  const int bits = OnnxElementBits(t.data_type);
  const int64_t raw_expected =
      bits == 0 || count > INT64_MAX / bits ? -1 : (count * bits + 7) / 8;
  if ((t.has_raw && t.held > 0) || (t.has_raw && t.raw_bytes != raw_expected) ||
      (t.held > 0 && t.held != expected)) {
    return TensorDataVerdict::kMismatch;
  }
  if (count > kMaxOnnxContent) return TensorDataVerdict::kClearLarge;
  if (!t.has_raw && t.held == 0 && count > 0) {
    return TensorDataVerdict::kMarkNoData;
  }
  return TensorDataVerdict::kKeep;
}

absl::Status SanitizeTensors(onnx::ModelProto* model, absl::string_view name,
                             const base::CancelToken* cancel) {
  absl::Status status;
  auto check = [&](onnx::TensorProto* t, const std::string& where) {
    if (status.ok()) status = SanitizeTensor(t, where);
  };
  int64_t seen = 0;  // nodes, for polling `cancel`
  ForEachMutableGraph(model->mutable_graph(), [&](onnx::GraphProto* g) {
    for (onnx::TensorProto& t : *g->mutable_initializer()) {
      check(&t, std::string(name));
    }
    for (int i = 0; i < g->node_size() && status.ok(); ++i) {
      if (base::CancelledAt(cancel, ++seen)) {
        status = ImportCancelled(name);
        break;
      }
      onnx::NodeProto& n = *g->mutable_node(i);
      for (onnx::AttributeProto& a : *n.mutable_attribute()) {
        if (!a.has_t() && a.tensors_size() == 0) continue;
        const std::string where =
            absl::StrCat(name, ": ", OnnxNodeLabel(n, i, ""));
        if (a.has_t()) check(a.mutable_t(), where);
        for (onnx::TensorProto& t : *a.mutable_tensors()) check(&t, where);
      }
    }
  });
  return status;
}

namespace {

// The attribute values of an UnsafeForOnnxInference node that ONNX 1.12's
// inference divides by or squares without checking, as the node holds
// them (a value a function's caller passes in is not known here): OK, or
// INVALID_ARGUMENT naming the node.
absl::Status CheckUnsafeAttributes(const onnx::NodeProto& n, int index,
                                   absl::string_view where) {
  if (!(n.domain().empty() || n.domain() == "ai.onnx") ||
      !UnsafeForOnnxInference(n.op_type())) {
    return absl::OkStatus();
  }
  const auto bad = [&](const auto&... parts) {
    return Invalid(where, ": ", OnnxNodeLabel(n, index, ""), ": ", parts...);
  };
  for (const onnx::AttributeProto& a : n.attribute()) {
    if (!a.ref_attr_name().empty()) continue;  // the caller's value
    if (a.name() == "strides" || a.name() == "dilations" ||
        a.name() == "kernel_shape") {
      for (int64_t v : a.ints()) {
        if (v < 1) return bad(a.name(), " holds ", v, ", below 1");
      }
    } else if (a.name() == "group" && a.i() < 1) {
      return bad("group ", a.i(), " is below 1");
    } else if (a.name() == "blocksize" &&
               (a.i() < 1 || a.i() > std::numeric_limits<int32_t>::max())) {
      return bad("blocksize ", a.i(), " is not from 1 to 2^31 - 1");
    }
  }
  if (n.op_type() == "Split" && n.output_size() == 0) {
    return bad("Split has no outputs");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckAttributes(const onnx::ModelProto& model,
                             absl::string_view name,
                             const base::CancelToken* cancel) {
  // Nodes whose literal attributes would crash ONNX's inference: in every
  // graph, and in the bodies of the model's own functions (and their
  // subgraphs), which that inference walks too.
  absl::Status unsafe;
  const auto check_graph = [&](const onnx::GraphProto& g) {
    for (int i = 0; i < g.node_size() && unsafe.ok(); ++i) {
      unsafe = CheckUnsafeAttributes(g.node(i), i, name);
    }
  };
  ForEachGraph(model.graph(), check_graph);
  for (const onnx::FunctionProto& f : model.functions()) {
    for (int i = 0; i < f.node_size() && unsafe.ok(); ++i) {
      unsafe = CheckUnsafeAttributes(
          f.node(i), i,
          absl::StrCat(name, ": function '", base::SafeText(f.name()), "'"));
      for (const onnx::AttributeProto& a : f.node(i).attribute()) {
        if (a.has_g() && unsafe.ok()) ForEachGraph(a.g(), check_graph);
        for (const onnx::GraphProto& sub : a.graphs()) {
          if (unsafe.ok()) ForEachGraph(sub, check_graph);
        }
      }
    }
  }
  if (!unsafe.ok()) return unsafe;
  std::map<std::string, int> opsets;
  for (const onnx::OperatorSetIdProto& o : model.opset_import()) {
    opsets[o.domain() == "ai.onnx" ? "" : o.domain()] =
        static_cast<int>(o.version());
  }
  absl::Status status;
  int64_t seen = 0;  // nodes, for polling `cancel`
  ForEachGraph(model.graph(), [&](const onnx::GraphProto& g) {
    for (int i = 0; i < g.node_size() && status.ok(); ++i) {
      if (base::CancelledAt(cancel, ++seen)) {
        status = ImportCancelled(name);
        break;
      }
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

absl::Status SortNodes(onnx::ModelProto* model, absl::string_view name,
                       const base::CancelToken* cancel) {
  absl::flat_hash_set<std::string> outer;  // undefined: CheckReads names them
  return SortGraph(model->mutable_graph(), "", name, &outer, cancel);
}

absl::Status CheckReads(const onnx::GraphProto& g, ReadScopes* outer,
                        const std::string& path, absl::string_view name,
                        const base::CancelToken* cancel) {
  absl::flat_hash_set<absl::string_view> defined;
  for (const auto& vi : g.input()) defined.insert(vi.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  for (const auto& t : g.sparse_initializer())
    defined.insert(t.values().name());
  auto visible = [&](absl::string_view n) {
    if (defined.contains(n)) return true;
    for (const auto* scope : *outer) {
      if (scope->contains(n)) return true;
    }
    return false;
  };
  outer->push_back(&defined);
  absl::Status status;
  for (int i = 0; i < g.node_size() && status.ok(); ++i) {
    if (base::CancelledAt(cancel, i)) {
      status = ImportCancelled(name);
      break;
    }
    const onnx::NodeProto& node = g.node(i);
    for (const std::string& in : node.input()) {
      if (in.empty() || visible(in)) continue;
      // SortNodes put every node of this graph making `in` before.
      status = Invalid(OnnxNodeLabel(node, i, path), " reads '", in,
                       "', which is no graph input, initializer or node "
                       "output");
      break;
    }
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.has_g() && status.ok()) {
        status =
            CheckReads(a.g(), outer, OnnxSubgraphPath(path, node, i, a.name()),
                       name, cancel);
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

namespace {

// Thrown through ONNX's inference to end it: not a std::exception, so that
// none of ONNX's handlers (which catch its own errors per node) takes it.
struct InferenceCancelled {};

// ONNX's schemas, until a token fires: then InferenceCancelled. ONNX asks
// once per node (skipping a node whose schema is missing costs it as much
// as inferring it).
class CancellableSchemas final : public onnx::ISchemaRegistry {
 public:
  explicit CancellableSchemas(const base::CancelToken* cancel)
      : cancel_(cancel) {}
  const onnx::OpSchema* GetSchema(const std::string& key, const int version,
                                  const std::string& domain) const override {
    if (ShouldStop(cancel_, ++asked_)) throw InferenceCancelled();
    return onnx::OpSchemaRegistry::Instance()->GetSchema(key, version, domain);
  }

 private:
  const base::CancelToken* cancel_;
  mutable int64_t asked_ = 0;
};

}  // namespace

absl::Status ImportCancelled(absl::string_view name) {
  return absl::DeadlineExceededError(absl::StrCat(name, ": import cancelled"));
}

absl::Status InferShapes(onnx::ModelProto* model, absl::string_view name,
                         const base::CancelToken* cancel) {
  std::string error;
  bool cancelled = false;
  HideChangedOps(model, true);
  const CancellableSchemas schemas(cancel);
  try {
    onnx::shape_inference::InferShapes(
        *model, &schemas,
        onnx::ShapeInferenceOptions(/*check_type_val=*/false,
                                    /*strict_mode_val=*/0,
                                    /*data_prop_val=*/false));
  } catch (const InferenceCancelled&) {
    cancelled = true;
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "unknown exception";
  }
  HideChangedOps(model, false);
  if (cancelled) return ImportCancelled(name);
  if (error.empty()) return absl::OkStatus();
  if (error.size() > 300) error = error.substr(0, 300) + "...";
  return Invalid(name, ": ONNX shape inference failed: ", error);
}

}  // namespace memplan::formats::internal
