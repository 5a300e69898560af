// Shape rules for elementwise ops over broadcast inputs: arithmetic,
// comparisons and logic (Add, Div, Equal, And...), variadic Sum/Max/Min/Mean,
// and Where. Small integer or real inputs are folded element by element.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "onnx/internal/rule_helpers.h"

namespace memplan::formats::internal {
namespace {

// One element of an elementwise op on integers; nullopt when unknown.
using IntOp = std::function<std::optional<SymDim>(
    DimTable&, const std::vector<const SymDim*>&)>;
// The same on reals.
using RealOp = std::function<std::optional<double>(const std::vector<double>&)>;

// The concrete shapes of the inputs when every input's elements are
// known; nullopt otherwise.
std::optional<std::vector<std::vector<int64_t>>> InputShapes(
    const OnnxNodeContext& c) {
  std::vector<std::vector<int64_t>> shapes;
  for (const OnnxValue* v : c.in) {
    if (v == nullptr || !v->content) return std::nullopt;
    std::optional<std::vector<int64_t>> s = Concrete(v->dims);
    std::optional<int64_t> n = OnnxElementCount(v->dims);
    if (!s || !n || *n != static_cast<int64_t>(v->content->size())) {
      return std::nullopt;
    }
    shapes.push_back(*s);
  }
  return shapes;
}

// Elementwise on reals (some input is floating-point): every element must
// be a number; the result converts to integers when `out_real` is false.
void RealElements(OnnxNodeContext& c, const std::vector<int64_t>& shape,
                  const std::vector<std::vector<int64_t>>& in_shapes,
                  bool out_real, const RealOp& op) {
  std::vector<std::vector<double>> ins;
  for (const OnnxValue* v : c.in) {
    std::optional<std::vector<double>> r = AsReals(v);
    if (!r) return;
    ins.push_back(std::move(*r));
  }
  bool ok = true;
  std::vector<double> reals, args(ins.size());
  ForEachBroadcast(shape, in_shapes, [&](const std::vector<int64_t>& src) {
    if (!ok) return;
    for (size_t j = 0; j < ins.size(); ++j) args[j] = ins[j][src[j]];
    std::optional<double> r = op(args);
    ok = r.has_value() &&
         (out_real || (std::isfinite(*r) && std::fabs(*r) < 9.2e18));
    if (ok) reals.push_back(*r);
  });
  if (!ok) return;
  if (out_real) {
    SetReals(c, 0, std::move(reals));
    return;
  }
  std::vector<SymDim> ints;
  for (double r : reals) ints.push_back(SymDim(static_cast<int64_t>(r)));
  SetInts(c, 0, std::move(ints));
}

// Elementwise on integers, symbolic ones included.
void IntElements(OnnxNodeContext& c, const std::vector<int64_t>& shape,
                 const std::vector<std::vector<int64_t>>& in_shapes,
                 const IntOp& op) {
  for (const OnnxValue* v : c.in) {
    if (v->content->real) return;
  }
  bool ok = true;
  std::vector<SymDim> ints;
  std::vector<const SymDim*> args(c.in.size());
  ForEachBroadcast(shape, in_shapes, [&](const std::vector<int64_t>& src) {
    if (!ok) return;
    for (size_t j = 0; j < c.in.size(); ++j) {
      args[j] = &c.in[j]->content->ints[src[j]];
    }
    std::optional<SymDim> r = op(*c.table, args);
    ok = r.has_value() && !c.table->failed();
    if (ok) ints.push_back(*r);
  });
  if (ok) SetInts(c, 0, std::move(ints));
}

// Computes the elements of an elementwise op over broadcast inputs, as
// integers or reals; nothing when any is unknown or the output is large.
void ElementwiseContent(OnnxNodeContext& c, const std::vector<SymDim>& out,
                        bool out_real, bool in_real, const IntOp& int_op,
                        const RealOp& real_op) {
  std::optional<std::vector<int64_t>> shape = Concrete(out);
  std::optional<int64_t> count = OnnxElementCount(out);
  if (!shape || !count || *count > kMaxOnnxContent) return;
  std::optional<std::vector<std::vector<int64_t>>> in_shapes = InputShapes(c);
  if (!in_shapes) return;
  if (in_real) {
    RealElements(c, *shape, *in_shapes, out_real, real_op);
  } else {
    IntElements(c, *shape, *in_shapes, int_op);
  }
}

// --- Binary and variadic ops ---------------------------------------------

// Integer Div and Mod: truncating as ONNX Runtime does on numbers, floor
// on symbolic dims (which are not negative).
std::optional<SymDim> IntDivMod(const std::string& op, DimTable& t,
                                const SymDim& x, const SymDim& y,
                                int64_t fmod) {
  const bool numbers = x.is_constant() && y.is_constant();
  if (numbers && (y.constant() == 0 ||
                  (x.constant() == INT64_MIN && y.constant() == -1))) {
    return std::nullopt;
  }
  if (op == "Div") {
    if (numbers) return SymDim(x.constant() / y.constant());
    return t.FloorDiv(x, y);
  }
  if (fmod != 0) {
    if (!numbers) return std::nullopt;
    return SymDim(x.constant() % y.constant());
  }
  if (y == SymDim(0)) return std::nullopt;
  return t.Mod(x, y);
}

// Comparisons of integers: known when the dims' ranges decide them.
std::optional<SymDim> IntCompare(const std::string& op, DimTable& t,
                                 const SymDim& x, const SymDim& y) {
  if (op == "LessOrEqual" && t.SurelyLessEqual(x, y)) return SymDim(1);
  if (op == "GreaterOrEqual" && t.SurelyLessEqual(y, x)) return SymDim(1);
  std::optional<int> cmp = t.Compare(x, y);
  if (!cmp) return std::nullopt;
  const bool r = op == "Equal"         ? *cmp == 0
                 : op == "Less"        ? *cmp < 0
                 : op == "Greater"     ? *cmp > 0
                 : op == "LessOrEqual" ? *cmp <= 0
                                       : *cmp >= 0;
  return SymDim(r ? 1 : 0);
}

// And, Or, Xor on booleans held as 0/1 integers.
std::optional<SymDim> IntLogic(const std::string& op, DimTable& t,
                               const SymDim& x, const SymDim& y) {
  std::optional<bool> bx = IsNonZero(t, x), by = IsNonZero(t, y);
  if (op == "And") {
    if ((bx && !*bx) || (by && !*by)) return SymDim(0);
    return bx && by ? std::optional<SymDim>(SymDim(1)) : std::nullopt;
  }
  if (op == "Or") {
    if ((bx && *bx) || (by && *by)) return SymDim(1);
    return bx && by ? std::optional<SymDim>(SymDim(0)) : std::nullopt;
  }
  if (!bx || !by) return std::nullopt;
  return SymDim(*bx != *by ? 1 : 0);
}

// Integer semantics of binary and variadic elementwise ops.
std::optional<SymDim> IntBinary(const std::string& op, DimTable& t,
                                const std::vector<const SymDim*>& a,
                                int64_t fmod) {
  const SymDim& x = *a[0];
  if (op == "Sum" || op == "Max" || op == "Min") {
    SymDim r = x;
    for (size_t i = 1; i < a.size(); ++i) {
      r = op == "Sum"   ? t.Add(r, *a[i])
          : op == "Max" ? t.Max(r, *a[i])
                        : t.Min(r, *a[i]);
    }
    return r;
  }
  if (a.size() < 2) return std::nullopt;
  const SymDim& y = *a[1];
  if (op == "Add") return t.Add(x, y);
  if (op == "Sub") return t.Sub(x, y);
  if (op == "Mul") return t.Mul(x, y);
  if (op == "Div" || op == "Mod") return IntDivMod(op, t, x, y, fmod);
  if (op == "And" || op == "Or" || op == "Xor") return IntLogic(op, t, x, y);
  if (op == "Pow") {
    if (!x.is_constant() || !y.is_constant() || y.constant() < 0 ||
        y.constant() >= 64) {
      return std::nullopt;
    }
    SymDim r(1);
    for (int64_t i = 0; i < y.constant(); ++i) r = t.Mul(r, x);
    return r;
  }
  if (op == "Mean") return std::nullopt;
  return IntCompare(op, t, x, y);
}

std::optional<double> RealBinary(const std::string& op,
                                 const std::vector<double>& a, int64_t fmod) {
  const double x = a[0];
  if (op == "Sum" || op == "Max" || op == "Min" || op == "Mean") {
    double r = x;
    for (size_t i = 1; i < a.size(); ++i) {
      r = op == "Max"   ? std::max(r, a[i])
          : op == "Min" ? std::min(r, a[i])
                        : r + a[i];
    }
    return op == "Mean" ? r / static_cast<double>(a.size()) : r;
  }
  if (a.size() < 2) return std::nullopt;
  const double y = a[1];
  if (op == "Add") return x + y;
  if (op == "Sub") return x - y;
  if (op == "Mul") return x * y;
  if (op == "Div") return x / y;
  if (op == "Pow") return std::pow(x, y);
  if (op == "Mod") {
    if (fmod != 0) return std::fmod(x, y);
    return x - y * std::floor(x / y);
  }
  if (op == "Equal") return x == y ? 1 : 0;
  if (op == "Less") return x < y ? 1 : 0;
  if (op == "Greater") return x > y ? 1 : 0;
  if (op == "LessOrEqual") return x <= y ? 1 : 0;
  if (op == "GreaterOrEqual") return x >= y ? 1 : 0;
  if (op == "And") return (x != 0 && y != 0) ? 1 : 0;
  if (op == "Or") return (x != 0 || y != 0) ? 1 : 0;
  if (op == "Xor") return ((x != 0) != (y != 0)) ? 1 : 0;
  return std::nullopt;
}

bool IsComparison(const std::string& op) {
  return op == "Equal" || op == "Less" || op == "Greater" ||
         op == "LessOrEqual" || op == "GreaterOrEqual" || op == "And" ||
         op == "Or" || op == "Xor";
}

// Binary and variadic elementwise ops with numpy broadcasting.
absl::Status BroadcastOp(OnnxNodeContext& c) {
  std::vector<const OnnxValue*> ins;
  for (const OnnxValue* v : c.in) {
    if (v == nullptr || !v->has_shape) return FallBackToOnnx();
    ins.push_back(v);
  }
  if (ins.empty()) return FallBackToOnnx();
  absl::StatusOr<std::vector<SymDim>> out = Broadcast(c, ins);
  if (!out.ok()) return out.status();
  const std::string op = c.node->op_type();
  const bool bitwise = op.rfind("Bitwise", 0) == 0;
  int32_t type = IsComparison(op) ? kBool : ins[0]->elem_type;
  if (op == "PRelu" || op == "BitShift" || bitwise) type = ins[0]->elem_type;
  SetOut(c, 0, type, *out);
  if (bitwise || op == "PRelu" || op == "BitShift") return absl::OkStatus();
  const int64_t fmod = c.Int("fmod", 0);
  bool in_real = false;
  for (const OnnxValue* v : ins) {
    if (IsRealType(v->elem_type)) in_real = true;
  }
  ElementwiseContent(
      c, *out, !IsComparison(op) && IsRealType(type), in_real,
      [&](DimTable& t, const std::vector<const SymDim*>& a) {
        return IntBinary(op, t, a, fmod);
      },
      [&](const std::vector<double>& a) { return RealBinary(op, a, fmod); });
  return absl::OkStatus();
}

// Where(cond, x, y).
absl::Status WhereOp(OnnxNodeContext& c) {
  if (!HasShape(c.In(0)) || !HasShape(c.In(1)) || !HasShape(c.In(2))) {
    return FallBackToOnnx();
  }
  absl::StatusOr<std::vector<SymDim>> out =
      Broadcast(c, {c.In(0), c.In(1), c.In(2)});
  if (!out.ok()) return out.status();
  const int32_t type = c.In(1)->elem_type;
  SetOut(c, 0, type, *out);
  const bool real = IsRealType(type);
  ElementwiseContent(
      c, *out, real, real,
      [](DimTable& t,
         const std::vector<const SymDim*>& a) -> std::optional<SymDim> {
        std::optional<bool> b = IsNonZero(t, *a[0]);
        if (!b) return std::nullopt;
        return *b ? *a[1] : *a[2];
      },
      [](const std::vector<double>& a) -> std::optional<double> {
        return a[0] != 0 ? a[1] : a[2];
      });
  return absl::OkStatus();
}

}  // namespace

void AddElementwiseRules(RuleTable* table) {
  AddRule(&table->default_domain, BroadcastOp,
          {"Add",       "Sub",         "Mul",
           "Div",       "Mod",         "Pow",
           "Min",       "Max",         "Sum",
           "Mean",      "And",         "Or",
           "Xor",       "Equal",       "Less",
           "Greater",   "LessOrEqual", "GreaterOrEqual",
           "PRelu",     "BitShift",    "BitwiseAnd",
           "BitwiseOr", "BitwiseXor"});
  AddRule(&table->default_domain, WhereOp, {"Where"});
}

}  // namespace memplan::formats::internal
