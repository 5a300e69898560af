#include "onnx/inspect.h"

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "onnx/dims.h"
#include "onnx/import.h"
#include "onnx/internal/model_reading.h"
#include "onnx/onnx_pb.h"
#include "onnx/shapes.h"

namespace memplan::formats {
namespace {

namespace onnx = ::ONNX_NAMESPACE;

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
  internal::ForEachGraph(g, [&](const onnx::GraphProto& s) {
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
  if (!internal::SanitizeTensors(&inferred, name).ok()) return;
  if (!internal::CheckAttributes(inferred, name).ok()) return;
  if (!internal::SortNodes(&inferred, name).ok()) return;
  internal::ReadScopes scopes;
  if (!internal::CheckReads(inferred.graph(), &scopes, "", name).ok()) return;
  if (!internal::InferShapes(&inferred, name).ok()) return;
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
      // Unnamed dynamic dims: the import sets them to 1 (onnx/import.h).
      const std::vector<std::string>& dims = s->inputs.back().dims;
      for (size_t d = 0; d < dims.size(); ++d) {
        if (dims[d] != "?") continue;
        s->defaulted_dims.push_back(
            {vi.name(), static_cast<int>(d), 1,
             absl::StrCat("--input ", vi.name(), "=SHAPE")});
      }
    }
  }
  for (const onnx::ValueInfoProto& vi : g.output()) {
    s->outputs.push_back(DeclaredSummary(vi));
  }
  // The names --dim sets: the import's (an output's or value_info's too).
  const std::set<std::string> named = internal::DeclaredDims(g);
  s->symbolic_dims.assign(named.begin(), named.end());
}

}  // namespace

absl::StatusOr<ModelSummary> SummarizeOnnx(absl::string_view bytes,
                                           absl::string_view name) {
  absl::StatusOr<onnx::ModelProto> model = internal::ParseModel(bytes, name);
  if (!model.ok()) return model.status();
  const onnx::GraphProto& g = model->graph();
  ModelSummary s;
  s.format = Format::kOnnx;
  s.producer = std::string(absl::StripAsciiWhitespace(
      absl::StrCat(model->producer_name(), " ", model->producer_version())));
  const int opset = internal::DefaultOpset(*model);
  s.version = opset < 0 ? "no default opset" : absl::StrCat("opset ", opset);
  DeclaredInputsOutputs(g, &s);
  s.subgraphs = 0;
  internal::ForEachGraph(g, [&](const onnx::GraphProto& sub) {
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
