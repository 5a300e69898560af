// Shape rules for ops that make a tensor from a shape or attributes: Shape
// and Size (whose elements are dims), Constant, ConstantOfShape, EyeLike and
// the Random* ops.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "onnx/internal/rule_helpers.h"
#include "onnx/onnx_pb.h"

namespace memplan::formats::internal {
namespace {

namespace onnx = ::ONNX_NAMESPACE;

absl::Status ShapeOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x)) return FallBackToOnnx();
  const int64_t rank = static_cast<int64_t>(x->dims.size());
  auto clamp = [rank](int64_t v) {
    if (v < 0) v += rank;
    return std::max<int64_t>(0, std::min(v, rank));
  };
  const int64_t start = clamp(c.Int("start", 0));
  const int64_t end = clamp(c.Int("end", rank));
  std::vector<SymDim> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(x->dims[i]);
  SetOut(c, 0, kInt64, {SymDim(static_cast<int64_t>(dims.size()))});
  SetInts(c, 0, std::move(dims));
  return absl::OkStatus();
}

absl::Status SizeOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x)) return FallBackToOnnx();
  SymDim n(1);
  for (const SymDim& d : x->dims) n = c.table->Mul(n, d);
  SetOut(c, 0, kInt64, {});
  SetInts(c, 0, {n});
  return absl::OkStatus();
}

absl::Status ConstantOp(OnnxNodeContext& c) {
  OnnxValue* y = c.Out(0);
  if (y == nullptr) return absl::OkStatus();
  for (const onnx::AttributeProto& a : c.node->attribute()) {
    if (a.name() == "value") return LoadOnnxTensor(a.t(), y, c.label);
    if (a.name() == "value_float") {
      SetOnnxShape(y, kFloat, {});
      SetReals(c, 0, {a.f()});
    } else if (a.name() == "value_floats") {
      SetOnnxShape(y, kFloat, {SymDim(a.floats_size())});
      SetReals(c, 0, {a.floats().begin(), a.floats().end()});
    } else if (a.name() == "value_int") {
      SetOnnxShape(y, kInt64, {});
      SetInts(c, 0, {SymDim(a.i())});
    } else if (a.name() == "value_ints") {
      SetOnnxShape(y, kInt64, {SymDim(a.ints_size())});
      std::vector<SymDim> ints;
      for (int64_t v : a.ints()) ints.push_back(SymDim(v));
      SetInts(c, 0, std::move(ints));
    } else if (a.name() == "value_string") {
      SetOnnxShape(y, 8, {});
    } else if (a.name() == "value_strings") {
      SetOnnxShape(y, 8, {SymDim(a.strings_size())});
    } else if (a.name() == "sparse_value") {
      std::vector<SymDim> dims;
      for (int64_t d : a.sparse_tensor().dims()) dims.push_back(SymDim(d));
      SetOnnxShape(y, a.sparse_tensor().values().data_type(), std::move(dims));
    } else {
      continue;
    }
    return absl::OkStatus();
  }
  return NodeError(c, "a Constant without a value");
}

absl::Status ConstantOfShapeOp(OnnxNodeContext& c) {
  std::optional<std::vector<SymDim>> dims;
  if (auto s = ShapeFromInput(c, 0, &dims); !s.ok()) return s;
  if (!dims) return FallBackToOnnx();
  if (auto s = CheckNotNegative(c, *dims); !s.ok()) return s;
  OnnxValue fill;
  fill.elem_type = kFloat;
  fill.content = OnnxContent{true, {}, {0.0}};
  if (const onnx::AttributeProto* a = c.Attr("value")) {
    if (auto s = LoadOnnxTensor(a->t(), &fill, c.label); !s.ok()) return s;
  }
  SetOut(c, 0, fill.elem_type, *dims);
  std::optional<int64_t> n = OnnxElementCount(*dims);
  if (!n || *n > kMaxOnnxContent || !fill.content ||
      fill.content->size() != 1) {
    return absl::OkStatus();
  }
  if (fill.content->real) {
    SetReals(c, 0, std::vector<double>(*n, fill.content->reals[0]));
  } else {
    SetInts(c, 0, std::vector<SymDim>(*n, fill.content->ints[0]));
  }
  return absl::OkStatus();
}

absl::Status EyeLikeOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x)) return FallBackToOnnx();
  SetOut(c, 0, static_cast<int32_t>(c.Int("dtype", x->elem_type)), x->dims);
  return absl::OkStatus();
}

absl::Status RandomOp(OnnxNodeContext& c) {
  const std::string& op = c.node->op_type();
  if (op == "RandomNormalLike" || op == "RandomUniformLike") {
    return EyeLikeOp(c);
  }
  std::vector<SymDim> dims;
  for (int64_t d : c.Ints("shape")) dims.push_back(SymDim(d));
  if (auto s = CheckNotNegative(c, dims); !s.ok()) return s;
  SetOut(c, 0, static_cast<int32_t>(c.Int("dtype", kFloat)), dims);
  return absl::OkStatus();
}

}  // namespace

void AddTensorRules(RuleTable* table) {
  AddRule(&table->default_domain, ShapeOp, {"Shape"});
  AddRule(&table->default_domain, SizeOp, {"Size"});
  AddRule(&table->default_domain, ConstantOp, {"Constant"});
  AddRule(&table->default_domain, ConstantOfShapeOp, {"ConstantOfShape"});
  AddRule(&table->default_domain, EyeLikeOp, {"EyeLike"});
  AddRule(&table->default_domain, RandomOp,
          {"RandomNormal", "RandomUniform", "RandomNormalLike",
           "RandomUniformLike"});
}

}  // namespace memplan::formats::internal
