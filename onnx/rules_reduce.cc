// Shape rules for ops that reduce or select along axes: Reduce* (axes from
// an attribute or, from opset 13 or 18, an input), ArgMax, ArgMin and TopK.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "onnx/internal/rule_helpers.h"

namespace memplan::formats::internal {
namespace {

// The opset from which a Reduce op takes its axes as an input.
int ReduceAxesInputOpset(const std::string& op) {
  return op == "ReduceSum" ? 13 : 18;
}

// The elements of ReduceSum/Prod/Min/Max over a small integer tensor;
// `reduce` marks the reduced axes, `out` the output dims.
void ReduceElements(OnnxNodeContext& c, const std::vector<bool>& reduce,
                    const std::vector<SymDim>& out) {
  const OnnxValue* x = c.In(0);
  const std::string& op = c.node->op_type();
  std::optional<std::vector<int64_t>> shape = Concrete(x->dims);
  std::optional<int64_t> n = OnnxElementCount(out);
  if (!x->content || x->content->real || !shape || !n ||
      (op != "ReduceSum" && op != "ReduceProd" && op != "ReduceMin" &&
       op != "ReduceMax")) {
    return;
  }
  const int64_t rank = static_cast<int64_t>(shape->size());
  std::vector<int64_t> out_shape;
  for (int64_t i = 0; i < rank; ++i) {
    out_shape.push_back(reduce[i] ? 1 : (*shape)[i]);
  }
  std::vector<std::optional<SymDim>> acc(*n);
  const std::vector<int64_t> out_strides = Strides(out_shape);
  std::vector<int64_t> index(rank, 0);
  DimTable& t = *c.table;
  for (const SymDim& v : x->content->ints) {
    int64_t dst = 0;
    for (int64_t a = 0; a < rank; ++a) {
      dst += (reduce[a] ? 0 : index[a]) * out_strides[a];
    }
    std::optional<SymDim>& r = acc[dst];
    r = !r                   ? v
        : op == "ReduceSum"  ? t.Add(*r, v)
        : op == "ReduceProd" ? t.Mul(*r, v)
        : op == "ReduceMin"  ? t.Min(*r, v)
                             : t.Max(*r, v);
    for (int64_t a = rank - 1; a >= 0; --a) {
      if (++index[a] < (*shape)[a]) break;
      index[a] = 0;
    }
  }
  std::vector<SymDim> ints;
  for (const std::optional<SymDim>& r : acc) {
    ints.push_back(r ? *r : SymDim(op == "ReduceProd" ? 1 : 0));
  }
  SetInts(c, 0, std::move(ints));
}

// Reduce* and ArgMax/ArgMin: axes from an attribute (ArgMax's axis, Reduce
// before ReduceAxesInputOpset) or an input; keepdims; noop_with_empty_axes.
absl::Status ReduceOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x)) return FallBackToOnnx();
  const std::string op = c.node->op_type();
  const bool arg = op == "ArgMax" || op == "ArgMin";
  const int64_t rank = static_cast<int64_t>(x->dims.size());
  const bool keep = c.Int("keepdims", 1) != 0;
  bool present = false, known = true;
  std::vector<int64_t> axes =
      arg ? std::vector<int64_t>{c.Int("axis", 0)}
          : AxesOf(c, ReduceAxesInputOpset(op), 1, &present, &known);
  if (!known) {
    // Which axes is unknown: with keepdims each dim is itself or 1.
    if (!keep) return FallBackToOnnx();
    std::vector<SymDim> out;
    for (int64_t i = 0; i < rank; ++i) out.push_back(c.FromUnknownElements(1));
    SetOut(c, 0, x->elem_type, out);
    return absl::OkStatus();
  }
  if (axes.empty() && c.Int("noop_with_empty_axes", 0) != 0) {
    SetOut(c, 0, x->elem_type, x->dims);
    PassElements(c);
    return absl::OkStatus();
  }
  std::vector<bool> reduce(rank, axes.empty());
  for (int64_t a : axes) {
    int64_t n = 0;
    if (!NormalizeAxis(a, rank, &n)) {
      return NodeError(c, "axis ", a, " is out of range for rank ", rank);
    }
    reduce[n] = true;
  }
  std::vector<SymDim> out;
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduce[i]) {
      out.push_back(x->dims[i]);
    } else if (keep) {
      out.push_back(SymDim(1));
    }
  }
  SetOut(c, 0, arg ? kInt64 : x->elem_type, out);
  if (!arg) ReduceElements(c, reduce, out);
  return absl::OkStatus();
}

absl::Status TopKOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x)) return FallBackToOnnx();
  const int64_t rank = static_cast<int64_t>(x->dims.size());
  int64_t axis = 0;
  if (!NormalizeAxis(c.Int("axis", -1), rank, &axis)) {
    return NodeError(c, "axis ", c.Int("axis", -1), " is out of range");
  }
  SymDim k;
  if (c.opset >= 0 && c.opset < 10) {
    k = SymDim(c.Int("k", 0));
  } else if (std::optional<SymDim> v = ScalarInt(c, 1)) {
    k = *v;
  } else {
    k = c.FromUnknownElements(1);
  }
  std::vector<SymDim> out = x->dims;
  out[axis] = k;
  SetOut(c, 0, x->elem_type, out);
  SetOut(c, 1, kInt64, out);
  return absl::OkStatus();
}

}  // namespace

void AddReduceRules(RuleTable* table) {
  AddRule(&table->default_domain, ReduceOp,
          {"ReduceSum", "ReduceProd", "ReduceMin", "ReduceMax", "ReduceMean",
           "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
           "ReduceSumSquare", "ArgMax", "ArgMin"});
  AddRule(&table->default_domain, TopKOp, {"TopK"});
}

}  // namespace memplan::formats::internal
