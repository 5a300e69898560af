// Shape rules for ops whose output 0 has input 0's shape: unary math and
// activations (folded on small inputs), normalizations, Dropout, and the
// casts (Cast, CastLike), which convert folded elements to the new type.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "onnx/internal/rule_helpers.h"

namespace memplan::formats::internal {
namespace {

std::optional<SymDim> Truth(std::optional<bool> b) {
  if (!b) return std::nullopt;
  return SymDim(*b ? 1 : 0);
}

// Ops whose output 0 has the shape and type of input 0 (some of them new
// in opsets 18 to 23, or ONNX Runtime's contrib ops of the same name).
constexpr const char* kSameShapeOps[] = {"Abs",
                                         "Acos",
                                         "Acosh",
                                         "Asin",
                                         "Asinh",
                                         "Atan",
                                         "Atanh",
                                         "Ceil",
                                         "Celu",
                                         "Clip",
                                         "Cos",
                                         "Cosh",
                                         "CumSum",
                                         "Elu",
                                         "Erf",
                                         "Exp",
                                         "Floor",
                                         "Gelu",
                                         "HardSigmoid",
                                         "HardSwish",
                                         "Hardmax",
                                         "IsInf",
                                         "IsNaN",
                                         "LeakyRelu",
                                         "Log",
                                         "LogSoftmax",
                                         "LpNormalization",
                                         "LRN",
                                         "MeanVarianceNormalization",
                                         "Mish",
                                         "Neg",
                                         "Not",
                                         "Reciprocal",
                                         "Relu",
                                         "Round",
                                         "Selu",
                                         "Shrink",
                                         "Sigmoid",
                                         "Sign",
                                         "Sin",
                                         "Sinh",
                                         "Softmax",
                                         "Softplus",
                                         "Softsign",
                                         "Sqrt",
                                         "Tan",
                                         "Tanh",
                                         "ThresholdedRelu",
                                         "Trilu",
                                         "BitwiseNot",
                                         "Swish",
                                         "InstanceNormalization",
                                         "GroupNormalization",
                                         "RMSNormalization",
                                         "RotaryEmbedding",
                                         "ReverseSequence",
                                         "Scatter",
                                         "ScatterElements",
                                         "ScatterND",
                                         "Bernoulli",
                                         "Identity"};

std::optional<SymDim> IntUnary(const std::string& op, DimTable& t,
                               const SymDim& x) {
  if (op == "Identity") return x;
  if (op == "Neg") return t.Neg(x);
  if (op == "Abs") {
    std::optional<int> s = t.Compare(x, SymDim(0));
    if (!s) return std::nullopt;
    return *s < 0 ? t.Neg(x) : x;
  }
  if (op == "Relu") return t.Max(x, SymDim(0));
  if (op == "Not")
    return Truth(IsNonZero(t, x).has_value()
                     ? std::optional<bool>(!*IsNonZero(t, x))
                     : std::nullopt);
  if (op == "Sign") {
    std::optional<int> s = t.Compare(x, SymDim(0));
    if (!s) return std::nullopt;
    return SymDim(*s);
  }
  if (op == "Floor" || op == "Ceil" || op == "Round") return x;
  return std::nullopt;
}

std::optional<double> RealUnary(const std::string& op, double x) {
  if (op == "Identity") return x;
  if (op == "Neg") return -x;
  if (op == "Abs") return std::fabs(x);
  if (op == "Relu") return std::max(x, 0.0);
  if (op == "Floor") return std::floor(x);
  if (op == "Ceil") return std::ceil(x);
  if (op == "Round") return std::nearbyint(x);
  if (op == "Sqrt") return std::sqrt(x);
  if (op == "Reciprocal") return 1.0 / x;
  if (op == "Exp") return std::exp(x);
  if (op == "Log") return std::log(x);
  if (op == "Sign") return static_cast<double>((x > 0) - (x < 0));
  if (op == "Not") return x == 0 ? 1 : 0;
  return std::nullopt;
}

absl::Status SameShape(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x)) return FallBackToOnnx();
  const std::string op = c.node->op_type();
  const int32_t type =
      (op == "IsInf" || op == "IsNaN" || op == "Not") ? kBool : x->elem_type;
  SetOut(c, 0, type, x->dims);
  if (op == "SkipLayerNormalization" ||
      op == "SkipSimplifiedLayerNormalization") {
    std::vector<SymDim> stat = x->dims;
    if (!stat.empty()) stat.back() = SymDim(1);
    SetOut(c, 1, kFloat, stat);
    SetOut(c, 2, kFloat, stat);
    SetOut(c, 3, type, x->dims);
  }
  if (!x->content) return absl::OkStatus();
  if (x->content->real) {
    std::vector<double> out;
    for (double v : x->content->reals) {
      std::optional<double> r = RealUnary(op, v);
      if (!r || !(std::fabs(*r) < 9e18)) return absl::OkStatus();
      out.push_back(*r);
    }
    if (IsRealType(type)) {
      SetReals(c, 0, std::move(out));
    } else {
      std::vector<SymDim> ints;
      for (double v : out) ints.push_back(SymDim(static_cast<int64_t>(v)));
      SetInts(c, 0, std::move(ints));
    }
    return absl::OkStatus();
  }
  std::vector<SymDim> out;
  for (const SymDim& v : x->content->ints) {
    std::optional<SymDim> r = IntUnary(op, *c.table, v);
    if (!r) return absl::OkStatus();
    out.push_back(*r);
  }
  SetInts(c, 0, std::move(out));
  return absl::OkStatus();
}

// --- Normalizations and Dropout ------------------------------------------

// Dropout: the output and a boolean mask of the same shape.
absl::Status DropoutOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x)) return FallBackToOnnx();
  SetOut(c, 0, x->elem_type, x->dims);
  SetOut(c, 1, kBool, x->dims);
  PassElements(c);
  return absl::OkStatus();
}

// LayerNormalization: Y like X; Mean and InvStdDev with the normalized
// axes set to 1.
absl::Status LayerNormOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x)) return FallBackToOnnx();
  SetOut(c, 0, x->elem_type, x->dims);
  int64_t axis = 0;
  const int64_t rank = static_cast<int64_t>(x->dims.size());
  if (!NormalizeAxis(c.Int("axis", -1), rank, &axis)) {
    return NodeError(c, "axis ", c.Int("axis", -1),
                     " is out of range for rank ", rank);
  }
  std::vector<SymDim> stat = x->dims;
  for (int64_t i = axis; i < rank; ++i) stat[i] = SymDim(1);
  const int32_t stash = static_cast<int32_t>(c.Int("stash_type", kFloat));
  SetOut(c, 1, stash, stat);
  SetOut(c, 2, stash, stat);
  return absl::OkStatus();
}

// BatchNormalization: Y like X; the training outputs like the scale.
absl::Status BatchNormOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x)) return FallBackToOnnx();
  SetOut(c, 0, x->elem_type, x->dims);
  for (size_t i = 1; i < c.out.size(); ++i) {
    const OnnxValue* s = c.In(std::min<size_t>(i + 2, 4));
    if (s == nullptr) s = c.In(1);
    if (!HasShape(s)) return FallBackToOnnx();
    SetOut(c, i, s->elem_type, s->dims);
  }
  return absl::OkStatus();
}

// --- Casts ----------------------------------------------------------------

// Converts input 0's elements to `type`.
void CastElements(OnnxNodeContext& c, int32_t type) {
  const OnnxValue* x = c.In(0);
  if (x == nullptr || !x->content) return;
  const bool to_real = IsRealType(type);
  if (x->content->real) {
    if (to_real) {
      std::vector<double> r = x->content->reals;
      if (type == kFloat) {
        for (double& v : r) v = static_cast<float>(v);
      }
      SetReals(c, 0, std::move(r));
      return;
    }
    std::vector<SymDim> ints;
    for (double v : x->content->reals) {
      if (type == kBool) {
        ints.push_back(SymDim(v != 0 ? 1 : 0));
        continue;
      }
      if (!std::isfinite(v) || std::fabs(v) >= 9.2e18) return;
      ints.push_back(SymDim(static_cast<int64_t>(v)));
    }
    SetInts(c, 0, std::move(ints));
    return;
  }
  if (to_real) {
    std::optional<std::vector<double>> r = AsReals(x);
    if (r) SetReals(c, 0, std::move(*r));
    return;
  }
  if (type == kBool) {
    std::vector<SymDim> ints;
    for (const SymDim& d : x->content->ints) {
      std::optional<bool> b = IsNonZero(*c.table, d);
      if (!b) return;
      ints.push_back(SymDim(*b ? 1 : 0));
    }
    SetInts(c, 0, std::move(ints));
    return;
  }
  SetInts(c, 0, x->content->ints);
}

absl::Status CastOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x)) return FallBackToOnnx();
  int32_t type = static_cast<int32_t>(c.Int("to", 0));
  if (c.node->op_type() == "CastLike") {
    if (c.In(1) == nullptr || c.In(1)->elem_type == 0) return FallBackToOnnx();
    type = c.In(1)->elem_type;
  }
  SetOut(c, 0, type, x->dims);
  CastElements(c, type);
  return absl::OkStatus();
}

}  // namespace

void AddSameShapeRules(RuleTable* table) {
  AddRule(&table->default_domain, SameShape, kSameShapeOps);
  AddRule(&table->default_domain, DropoutOp, {"Dropout"});
  AddRule(&table->default_domain, LayerNormOp, {"LayerNormalization"});
  AddRule(&table->default_domain, BatchNormOp, {"BatchNormalization"});
  AddRule(&table->default_domain, CastOp, {"Cast", "CastLike"});
  AddRule(&table->microsoft, SameShape,
          {"Gelu", "FastGelu", "BiasGelu", "QuickGelu", "BiasAdd",
           "SkipLayerNormalization", "SkipSimplifiedLayerNormalization"});
  AddRule(&table->microsoft, LayerNormOp,
          {"SimplifiedLayerNormalization", "LayerNormalization"});
}

}  // namespace memplan::formats::internal
