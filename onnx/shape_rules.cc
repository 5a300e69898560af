#include "onnx/shape_rules.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace memplan::formats {
namespace {

namespace onnx = ::ONNX_NAMESPACE;

constexpr int32_t kFloat = 1;
constexpr int32_t kInt32 = 6;
constexpr int32_t kInt64 = 7;
constexpr int32_t kBool = 9;

template <typename... Parts>
absl::Status NodeError(const OnnxNodeContext& c, const Parts&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(c.label, ": ", parts...));
}

bool IsRealType(int32_t t) {
  return t == 1 || t == 10 || t == 11 || t == 16 || (t >= 17 && t <= 20) ||
         t == 23;
}

// The dims as numbers when all are.
std::optional<std::vector<int64_t>> Concrete(const std::vector<SymDim>& dims) {
  std::vector<int64_t> out;
  out.reserve(dims.size());
  for (const SymDim& d : dims) {
    if (!d.is_constant()) return std::nullopt;
    out.push_back(d.constant());
  }
  return out;
}

std::vector<int64_t> Strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) {
    s[i] = s[i + 1] * shape[i + 1];
  }
  return s;
}

// `axis` in [-rank, rank) made non-negative; false when out of range.
bool NormalizeAxis(int64_t axis, int64_t rank, int64_t* out) {
  if (axis < -rank || axis >= rank) return false;
  *out = axis < 0 ? axis + rank : axis;
  return true;
}

bool HasShape(const OnnxValue* v) { return v != nullptr && v->has_shape; }

// Sets output `i` (when present) to `type` and `dims`.
void SetOut(OnnxNodeContext& c, size_t i, int32_t type,
            std::vector<SymDim> dims) {
  if (OnnxValue* v = c.Out(i)) SetOnnxShape(v, type, std::move(dims));
}

// Gives output `i` elements, when there are few enough.
void SetInts(OnnxNodeContext& c, size_t i, std::vector<SymDim> ints) {
  OnnxValue* v = c.Out(i);
  if (v == nullptr || static_cast<int64_t>(ints.size()) > kMaxOnnxContent) {
    return;
  }
  OnnxContent content;
  content.ints = std::move(ints);
  v->content = std::move(content);
}

void SetReals(OnnxNodeContext& c, size_t i, std::vector<double> reals) {
  OnnxValue* v = c.Out(i);
  if (v == nullptr || static_cast<int64_t>(reals.size()) > kMaxOnnxContent) {
    return;
  }
  OnnxContent content;
  content.real = true;
  content.reals = std::move(reals);
  v->content = std::move(content);
}

// Gives output `i` (when present) the elements `content`.
void SetContent(OnnxNodeContext& c, size_t i, OnnxContent content) {
  OnnxValue* v = c.Out(i);
  if (v != nullptr && static_cast<int64_t>(content.size()) <= kMaxOnnxContent) {
    v->content = std::move(content);
  }
}

// The elements of `v` (known) as doubles when all are numbers.
std::optional<std::vector<double>> AsReals(const OnnxValue* v) {
  if (v == nullptr || !v->content) return std::nullopt;
  if (v->content->real) return v->content->reals;
  std::vector<double> out;
  for (const SymDim& d : v->content->ints) {
    if (!d.is_constant()) return std::nullopt;
    out.push_back(static_cast<double>(d.constant()));
  }
  return out;
}

// A scalar or one-element tensor's integer, when known.
std::optional<SymDim> ScalarInt(const OnnxNodeContext& c, size_t i) {
  const std::vector<SymDim>* v = c.Ints(i);
  if (v == nullptr || v->size() != 1) return std::nullopt;
  return (*v)[0];
}

// Passes input 0's elements to output 0 unchanged (Reshape, Squeeze...).
void PassElements(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  OnnxValue* y = c.Out(0);
  if (x != nullptr && y != nullptr && x->content) y->content = x->content;
}

// --- Broadcasting ------------------------------------------------------------

// The numpy-style broadcast of the inputs' shapes; an error when two
// numbers differ and neither is 1.
absl::StatusOr<std::vector<SymDim>> Broadcast(
    OnnxNodeContext& c, const std::vector<const OnnxValue*>& ins) {
  size_t rank = 0;
  for (const OnnxValue* v : ins) rank = std::max(rank, v->dims.size());
  std::vector<SymDim> out(rank, SymDim(1));
  for (const OnnxValue* v : ins) {
    const size_t offset = rank - v->dims.size();
    for (size_t i = 0; i < v->dims.size(); ++i) {
      const SymDim& d = v->dims[i];
      SymDim& o = out[offset + i];
      if (d == SymDim(1) || d == o) continue;
      if (o == SymDim(1)) {
        o = d;
      } else if (o.is_constant() && d.is_constant()) {
        return NodeError(c, "cannot broadcast dim ", o.constant(), " with ",
                         d.constant(), " (input '", v->name, "')");
      } else if (d.is_constant()) {
        o = d;  // the symbolic one must equal it
      } else if (!o.is_constant()) {
        o = c.table->Max(o, d);
      }
    }
  }
  return out;
}

// Index in an input of shape `in` of the element at `out_index` of the
// broadcast output.
int64_t BroadcastSource(const std::vector<int64_t>& out_index,
                        const std::vector<int64_t>& in) {
  const size_t offset = out_index.size() - in.size();
  int64_t flat = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    flat = flat * in[i] + (in[i] == 1 ? 0 : out_index[offset + i]);
  }
  return flat;
}

// Calls `f(out_flat, source_flat_per_input)` for every element of the
// broadcast output `out` (concrete), in row-major order.
void ForEachBroadcast(
    const std::vector<int64_t>& out,
    const std::vector<std::vector<int64_t>>& ins,
    const std::function<void(const std::vector<int64_t>&)>& f) {
  std::optional<int64_t> n = 1;
  int64_t count = 1;
  for (int64_t d : out) count *= d;
  std::vector<int64_t> index(out.size(), 0);
  std::vector<int64_t> sources(ins.size());
  for (int64_t k = 0; k < count; ++k) {
    for (size_t j = 0; j < ins.size(); ++j) {
      sources[j] = BroadcastSource(index, ins[j]);
    }
    f(sources);
    for (int a = static_cast<int>(out.size()) - 1; a >= 0; --a) {
      if (++index[a] < out[a]) break;
      index[a] = 0;
    }
  }
  (void)n;
}

// One element of an elementwise op on integers; nullopt when unknown.
using IntOp = std::function<std::optional<SymDim>(
    DimTable&, const std::vector<const SymDim*>&)>;
// The same on reals.
using RealOp = std::function<std::optional<double>(const std::vector<double>&)>;

std::optional<SymDim> Truth(std::optional<bool> b) {
  if (!b) return std::nullopt;
  return SymDim(*b ? 1 : 0);
}

// Truthiness of an integer element: known when it is surely 0 or not.
std::optional<bool> IsNonZero(DimTable& t, const SymDim& d) {
  std::optional<int> cmp = t.Compare(d, SymDim(0));
  if (!cmp) return std::nullopt;
  return *cmp != 0;
}

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

// --- Elementwise ops
// -----------------------------------------------------------

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

// --- Casts -------------------------------------------------------------------

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

// --- Shape, Size, Constant, ConstantOfShape
// -------------------------------------

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

// An output dim list from the integer elements of input `i` (a shape), in
// `out`; nullopt when its elements are unknown and its length too. A shape
// of more than kMaxOnnxRank dims is an error.
absl::Status ShapeFromInput(OnnxNodeContext& c, size_t i,
                            std::optional<std::vector<SymDim>>* out) {
  *out = std::nullopt;
  const OnnxValue* s = c.In(i);
  const std::vector<SymDim>* v = c.Ints(i);
  const bool length_known =
      v != nullptr ||
      (HasShape(s) && s->dims.size() == 1 && s->dims[0].is_constant());
  if (!length_known) return absl::OkStatus();
  const int64_t length =
      v != nullptr ? static_cast<int64_t>(v->size()) : s->dims[0].constant();
  if (length > kMaxOnnxRank) {
    return NodeError(c, "makes a shape of ", length, " dims from '", s->name,
                     "' (at most ", kMaxOnnxRank, ")");
  }
  if (v != nullptr) {
    *out = *v;
    return absl::OkStatus();
  }
  std::vector<SymDim> dims;
  for (int64_t k = 0; k < length; ++k) {
    dims.push_back(c.FromUnknownElements(i));
  }
  *out = std::move(dims);
  return absl::OkStatus();
}

absl::Status CheckNotNegative(const OnnxNodeContext& c,
                              const std::vector<SymDim>& dims) {
  for (const SymDim& d : dims) {
    if (d.is_constant() && d.constant() < 0) {
      return NodeError(c, "gives a negative dim (", d.constant(), ")");
    }
  }
  return absl::OkStatus();
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

// --- Reshaping
// -----------------------------------------------------------------

// Resolves Reshape's 0 (copy the input's dim, unless allowzero) in
// `out`; returns the index of its -1 (or -1) and the product of the others.
absl::StatusOr<int> ResolveReshapeTarget(OnnxNodeContext& c,
                                         std::vector<SymDim>* out,
                                         SymDim* known) {
  const OnnxValue* x = c.In(0);
  const bool allow_zero = c.Int("allowzero", 0) != 0;
  int infer = -1;
  *known = SymDim(1);
  for (size_t i = 0; i < out->size(); ++i) {
    SymDim& d = (*out)[i];
    if (d == SymDim(0) && !allow_zero) {
      if (!HasShape(x) || i >= x->dims.size()) {
        return NodeError(c, "target dim ", i,
                         " is 0 (copy the input's) but the input has no dim ",
                         i);
      }
      d = x->dims[i];
    } else if (d == SymDim(-1)) {
      if (infer >= 0) return NodeError(c, "the target shape has two -1 dims");
      infer = static_cast<int>(i);
      continue;
    } else if (d.is_constant() && d.constant() < 0) {
      return NodeError(c, "the target shape has dim ", d.constant());
    }
    *known = c.table->Mul(*known, d);
  }
  return infer;
}

// Infers Reshape's -1 from the input's element count, and checks that
// counts match when both are numbers (so a hostile target is an error).
absl::Status InferReshapeDim(OnnxNodeContext& c, int infer, SymDim known,
                             std::vector<SymDim>* out) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x)) {
    if (infer >= 0) {
      (*out)[infer] =
          c.UnknownDim("the input's rank is unknown", false, c.InputLeaves(0));
    }
    return absl::OkStatus();
  }
  SymDim total(1);
  for (const SymDim& d : x->dims) total = c.table->Mul(total, d);
  if (infer >= 0) {
    if (known == SymDim(0)) {
      return NodeError(c, "cannot infer the -1 dim next to a zero dim");
    }
    if (total.is_constant() && known.is_constant() &&
        total.constant() % known.constant() != 0) {
      return NodeError(c, "cannot reshape ", total.constant(),
                       " elements into a shape with ", known.constant(),
                       " elements and a -1");
    }
    (*out)[infer] = c.table->FloorDiv(total, known);
    known = total;
  }
  if (total.is_constant() && known.is_constant() &&
      total.constant() != known.constant()) {
    std::vector<std::string> shown;
    for (const SymDim& d : *out) shown.push_back(c.table->ToString(d));
    return NodeError(c, "cannot reshape ", total.constant(), " elements into [",
                     absl::StrJoin(shown, ", "), "] (", known.constant(),
                     " elements)");
  }
  return absl::OkStatus();
}

absl::Status ReshapeOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (x == nullptr) return FallBackToOnnx();
  std::vector<SymDim> out;
  if (c.opset >= 0 && c.opset < 5) {
    for (int64_t v : c.Ints("shape")) out.push_back(SymDim(v));
  } else if (const std::vector<SymDim>* t = c.Ints(1)) {
    out = *t;
  } else {
    // The target's elements are unknown: its length gives the rank.
    std::optional<std::vector<SymDim>> dims;
    if (auto s = ShapeFromInput(c, 1, &dims); !s.ok()) return s;
    if (!dims) return FallBackToOnnx();
    SetOut(c, 0, x->elem_type, *dims);
    return absl::OkStatus();
  }
  SymDim known;
  absl::StatusOr<int> infer = ResolveReshapeTarget(c, &out, &known);
  if (!infer.ok()) return infer.status();
  if (auto s = InferReshapeDim(c, *infer, known, &out); !s.ok()) return s;
  SetOut(c, 0, x->elem_type, out);
  PassElements(c);
  return absl::OkStatus();
}

absl::Status FlattenOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x)) return FallBackToOnnx();
  const int64_t rank = static_cast<int64_t>(x->dims.size());
  int64_t axis = c.Int("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank) {
    return NodeError(c, "axis ", c.Int("axis", 1), " is out of range");
  }
  SymDim a(1), b(1);
  for (int64_t i = 0; i < rank; ++i) {
    (i < axis ? a : b) = c.table->Mul(i < axis ? a : b, x->dims[i]);
  }
  SetOut(c, 0, x->elem_type, {a, b});
  PassElements(c);
  return absl::OkStatus();
}

// The axes of Squeeze/Unsqueeze/Reduce*: an attribute before `input_opset`,
// input 1 from it. `known` false when the input's elements are unknown.
std::vector<int64_t> AxesOf(OnnxNodeContext& c, int input_opset, size_t input,
                            bool* present, bool* known) {
  *known = true;
  *present = false;
  std::vector<int64_t> axes;
  if (c.opset >= 0 && c.opset < input_opset) {
    *present = c.Attr("axes") != nullptr;
    return c.Ints("axes");
  }
  const OnnxValue* v = c.In(input);
  if (v == nullptr) return axes;
  *present = true;
  const std::vector<SymDim>* ints = c.Ints(input);
  if (ints == nullptr) {
    *known = false;
    return axes;
  }
  for (const SymDim& d : *ints) {
    if (!d.is_constant()) {
      *known = false;
      return {};
    }
    axes.push_back(d.constant());
  }
  return axes;
}

absl::Status SqueezeOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x)) return FallBackToOnnx();
  bool present = false, known = true;
  std::vector<int64_t> axes = AxesOf(c, 13, 1, &present, &known);
  if (!known) return FallBackToOnnx();
  const int64_t rank = static_cast<int64_t>(x->dims.size());
  std::vector<bool> drop(rank, false);
  if (!present || axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) drop[i] = x->dims[i] == SymDim(1);
  }
  for (int64_t a : axes) {
    int64_t n = 0;
    if (!NormalizeAxis(a, rank, &n)) {
      return NodeError(c, "axis ", a, " is out of range for rank ", rank);
    }
    if (x->dims[n].is_constant() && x->dims[n].constant() != 1) {
      return NodeError(c, "cannot squeeze axis ", a, " of size ",
                       x->dims[n].constant());
    }
    drop[n] = true;
  }
  std::vector<SymDim> out;
  for (int64_t i = 0; i < rank; ++i) {
    if (!drop[i]) out.push_back(x->dims[i]);
  }
  SetOut(c, 0, x->elem_type, out);
  PassElements(c);
  return absl::OkStatus();
}

absl::Status UnsqueezeOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x)) return FallBackToOnnx();
  bool present = false, known = true;
  std::vector<int64_t> axes = AxesOf(c, 13, 1, &present, &known);
  if (!known) return FallBackToOnnx();
  const int64_t rank = static_cast<int64_t>(x->dims.size() + axes.size());
  std::vector<bool> one(rank, false);
  for (int64_t a : axes) {
    int64_t n = 0;
    if (!NormalizeAxis(a, rank, &n) || one[n]) {
      return NodeError(c, "axis ", a, " is out of range or repeated");
    }
    one[n] = true;
  }
  std::vector<SymDim> out;
  size_t k = 0;
  for (int64_t i = 0; i < rank; ++i) {
    out.push_back(one[i] ? SymDim(1) : x->dims[k++]);
  }
  SetOut(c, 0, x->elem_type, out);
  PassElements(c);
  return absl::OkStatus();
}

// Calls f(out_flat, in_flat) for a permutation of a concrete shape.
absl::Status TransposeOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x)) return FallBackToOnnx();
  const int64_t rank = static_cast<int64_t>(x->dims.size());
  std::vector<int64_t> perm = c.Ints("perm");
  if (perm.empty()) {
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  if (static_cast<int64_t>(perm.size()) != rank) {
    return NodeError(c, "perm has ", perm.size(), " entries for rank ", rank);
  }
  std::vector<bool> seen(rank, false);
  std::vector<SymDim> out;
  for (int64_t& p : perm) {
    if (!NormalizeAxis(p, rank, &p) || seen[p]) {
      return NodeError(c, "perm is not a permutation");
    }
    seen[p] = true;
    out.push_back(x->dims[p]);
  }
  SetOut(c, 0, x->elem_type, out);
  std::optional<std::vector<int64_t>> in_shape = Concrete(x->dims);
  if (!x->content || !in_shape) return absl::OkStatus();
  const std::vector<int64_t> in_strides = Strides(*in_shape);
  std::vector<int64_t> out_shape;
  for (int64_t p : perm) out_shape.push_back((*in_shape)[p]);
  std::vector<int64_t> index(rank, 0);
  const size_t n = x->content->size();
  OnnxContent content;
  content.real = x->content->real;
  for (size_t k = 0; k < n; ++k) {
    int64_t src = 0;
    for (int64_t a = 0; a < rank; ++a) src += index[a] * in_strides[perm[a]];
    if (content.real) {
      content.reals.push_back(x->content->reals[src]);
    } else {
      content.ints.push_back(x->content->ints[src]);
    }
    for (int64_t a = rank - 1; a >= 0; --a) {
      if (++index[a] < out_shape[a]) break;
      index[a] = 0;
    }
  }
  SetContent(c, 0, std::move(content));
  return absl::OkStatus();
}

// Copies elements [from, from + count) of `src` to the end of `dst`.
void AppendRange(const OnnxContent& src, int64_t from, int64_t count,
                 OnnxContent* dst) {
  if (src.real) {
    dst->reals.insert(dst->reals.end(), src.reals.begin() + from,
                      src.reals.begin() + from + count);
  } else {
    dst->ints.insert(dst->ints.end(), src.ints.begin() + from,
                     src.ints.begin() + from + count);
  }
}

// Concat's elements: for each outer index, each input's inner block.
void ConcatElements(OnnxNodeContext& c,
                    const std::vector<const OnnxValue*>& ins, int64_t axis,
                    const std::vector<SymDim>& out) {
  std::optional<int64_t> total = OnnxElementCount(out);
  if (!total || *total > kMaxOnnxContent) return;
  OnnxContent content;
  content.real = IsRealType(ins[0]->elem_type);
  std::vector<std::pair<const OnnxValue*, int64_t>> blocks;
  int64_t outer = 1;
  for (const OnnxValue* v : ins) {
    std::optional<std::vector<int64_t>> s = Concrete(v->dims);
    if (!v->content || !s || v->content->real != content.real) return;
    int64_t inner = 1, o = 1;
    for (size_t i = 0; i < s->size(); ++i) {
      (static_cast<int64_t>(i) < axis ? o : inner) *= (*s)[i];
    }
    if (static_cast<int64_t>(v->content->size()) != o * inner) return;
    outer = o;
    blocks.emplace_back(v, inner);
  }
  for (int64_t o = 0; o < outer; ++o) {
    for (const auto& [v, inner] : blocks) {
      AppendRange(*v->content, o * inner, inner, &content);
    }
  }
  SetContent(c, 0, std::move(content));
}

absl::Status ConcatOp(OnnxNodeContext& c) {
  std::vector<const OnnxValue*> ins;
  for (const OnnxValue* v : c.in) {
    if (v == nullptr) continue;
    if (!v->has_shape) return FallBackToOnnx();
    ins.push_back(v);
  }
  if (ins.empty()) return FallBackToOnnx();
  const int64_t rank = static_cast<int64_t>(ins[0]->dims.size());
  int64_t axis = 0;
  if (!NormalizeAxis(c.Int("axis", 0), rank, &axis)) {
    return NodeError(c, "axis ", c.Int("axis", 0), " is out of range for rank ",
                     rank);
  }
  std::vector<SymDim> out = ins[0]->dims;
  for (size_t k = 1; k < ins.size(); ++k) {
    if (static_cast<int64_t>(ins[k]->dims.size()) != rank) {
      return NodeError(c, "input '", ins[k]->name, "' has rank ",
                       ins[k]->dims.size(), ", not ", rank);
    }
    for (int64_t i = 0; i < rank; ++i) {
      if (i == axis) {
        out[i] = c.table->Add(out[i], ins[k]->dims[i]);
      } else if (!out[i].is_constant()) {
        out[i] = ins[k]->dims[i].is_constant() ? ins[k]->dims[i] : out[i];
      }
    }
  }
  SetOut(c, 0, ins[0]->elem_type, out);
  ConcatElements(c, ins, axis, out);
  return absl::OkStatus();
}

// Split's part sizes along a dim `d`: from its input (opset 13) or
// attribute, num_outputs (opset 18: the last part takes what is left), or
// `n` equal parts.
absl::StatusOr<std::vector<SymDim>> SplitSizes(OnnxNodeContext& c,
                                               const SymDim& d, int64_t n) {
  std::vector<SymDim> sizes;
  if (c.opset >= 13 && c.In(1) != nullptr) {
    const std::vector<SymDim>* s = c.Ints(1);
    if (s == nullptr) return FallBackToOnnx();
    sizes = *s;
  } else if (c.opset < 13 && c.Attr("split") != nullptr) {
    for (int64_t v : c.Ints("split")) sizes.push_back(SymDim(v));
  } else if (c.Attr("num_outputs") != nullptr) {
    const SymDim each = c.table->CeilDiv(d, SymDim(n));
    for (int64_t i = 0; i + 1 < n; ++i) sizes.push_back(each);
    sizes.push_back(c.table->Sub(d, c.table->Mul(each, SymDim(n - 1))));
  } else {
    if (d.is_constant() && d.constant() % n != 0) {
      return NodeError(c, "cannot split dim ", d.constant(), " into ", n,
                       " equal parts");
    }
    sizes.assign(n, c.table->FloorDiv(d, SymDim(n)));
  }
  if (static_cast<int64_t>(sizes.size()) != n) {
    return NodeError(c, "gives ", sizes.size(), " split sizes for ", n,
                     " outputs");
  }
  return sizes;
}

// The elements of part `k` of a split: [from, from + len) along `axis`.
void SplitElements(OnnxNodeContext& c, size_t k, int64_t axis, int64_t from,
                   int64_t len) {
  const OnnxValue* x = c.In(0);
  std::optional<std::vector<int64_t>> shape = Concrete(x->dims);
  if (!x->content || !shape || from < 0 || len < 0 ||
      from + len > (*shape)[axis]) {
    return;
  }
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= (*shape)[i];
  for (size_t i = axis + 1; i < shape->size(); ++i) inner *= (*shape)[i];
  OnnxContent content;
  content.real = x->content->real;
  for (int64_t o = 0; o < outer; ++o) {
    AppendRange(*x->content, (o * (*shape)[axis] + from) * inner, len * inner,
                &content);
  }
  SetContent(c, k, std::move(content));
}

absl::Status SplitOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x)) return FallBackToOnnx();
  const int64_t rank = static_cast<int64_t>(x->dims.size());
  int64_t axis = 0;
  if (!NormalizeAxis(c.Int("axis", 0), rank, &axis)) {
    return NodeError(c, "axis ", c.Int("axis", 0), " is out of range");
  }
  const int64_t n = static_cast<int64_t>(c.out.size());
  if (n == 0) return absl::OkStatus();
  absl::StatusOr<std::vector<SymDim>> sizes = SplitSizes(c, x->dims[axis], n);
  if (!sizes.ok()) return sizes.status();
  if (auto s = CheckNotNegative(c, *sizes); !s.ok()) return s;
  SymDim offset(0);
  for (int64_t k = 0; k < n; ++k) {
    std::vector<SymDim> dims = x->dims;
    dims[axis] = (*sizes)[k];
    SetOut(c, k, x->elem_type, dims);
    if (offset.is_constant() && (*sizes)[k].is_constant()) {
      SplitElements(c, k, axis, offset.constant(), (*sizes)[k].constant());
    }
    offset = c.table->Add(offset, (*sizes)[k]);
  }
  return absl::OkStatus();
}

// --- Slice
// ---------------------------------------------------------------------

// The length of a slice of a dim `d` from `s` to `e` by `k` (ONNX's
// clamping rules), symbolically.
SymDim SliceLength(DimTable& t, const SymDim& d, SymDim s, SymDim e,
                   int64_t k) {
  auto wrap = [&](const SymDim& v) {
    std::optional<int> sign = t.Compare(v, SymDim(0));
    return (sign && *sign < 0) ? t.Add(v, d) : v;
  };
  s = wrap(s);
  e = wrap(e);
  if (k > 0) {
    s = t.Min(t.Max(s, SymDim(0)), d);
    e = t.Min(t.Max(e, SymDim(0)), d);
    return t.Max(t.CeilDiv(t.Sub(e, s), SymDim(k)), SymDim(0));
  }
  const SymDim last = t.Sub(d, SymDim(1));
  s = t.Min(t.Max(s, SymDim(0)), last);
  e = t.Min(t.Max(e, SymDim(-1)), last);
  return t.Max(t.CeilDiv(t.Sub(s, e), SymDim(-k)), SymDim(0));
}

// The first index a slice takes from a dim of concrete size `d`.
int64_t SliceStart(int64_t d, int64_t s, int64_t k) {
  if (s < 0) s = s < -d ? 0 : s + d;
  return k > 0 ? std::min(s, d) : std::min(s, d - 1);
}

// Slice's starts, ends, axes and steps: attributes before opset 10,
// inputs from it. `known` false when starts or ends are not known.
struct SliceArgs {
  std::vector<SymDim> starts, ends;  // per sliced axis
  std::vector<int64_t> axes, steps;  // empty: defaults
  bool known = true;                 // starts and ends known
};

// Reads the slice's arguments; FallBackToOnnx when axes or steps are not
// numbers.
absl::Status ReadSliceArgs(const OnnxNodeContext& c, SliceArgs* a) {
  if (c.opset >= 0 && c.opset < 10) {
    for (int64_t v : c.Ints("starts")) a->starts.push_back(SymDim(v));
    for (int64_t v : c.Ints("ends")) a->ends.push_back(SymDim(v));
    a->axes = c.Ints("axes");
    return absl::OkStatus();
  }
  const std::vector<SymDim>* s = c.Ints(1);
  const std::vector<SymDim>* e = c.Ints(2);
  a->known = s != nullptr && e != nullptr;
  if (a->known) {
    a->starts = *s;
    a->ends = *e;
  }
  for (size_t i : {size_t{3}, size_t{4}}) {
    if (c.In(i) == nullptr) continue;
    const std::vector<SymDim>* v = c.Ints(i);
    if (v == nullptr) return FallBackToOnnx();
    for (const SymDim& d : *v) {
      if (!d.is_constant()) return FallBackToOnnx();
      (i == 3 ? a->axes : a->steps).push_back(d.constant());
    }
  }
  return absl::OkStatus();
}

// Slice with unknown starts or ends: the sliced axes (all, without `axes`)
// get unknown dims.
absl::Status SliceUnknown(OnnxNodeContext& c, const SliceArgs& a) {
  const OnnxValue* x = c.In(0);
  const int64_t rank = static_cast<int64_t>(x->dims.size());
  std::vector<SymDim> out = x->dims;
  std::vector<int64_t> sliced = a.axes;
  if (sliced.empty()) {
    for (int64_t i = 0; i < rank; ++i) sliced.push_back(i);
  }
  for (int64_t axis : sliced) {
    int64_t n = 0;
    if (NormalizeAxis(axis, rank, &n)) {
      out[n] = c.FromUnknownElements(c.Ints(1) == nullptr ? 1 : 2);
    }
  }
  SetOut(c, 0, x->elem_type, out);
  return absl::OkStatus();
}

// Copies the sliced elements: per axis from `first` by `step`.
void SliceElements(OnnxNodeContext& c, const std::vector<SymDim>& out,
                   const std::vector<int64_t>& first,
                   const std::vector<int64_t>& step) {
  const OnnxValue* x = c.In(0);
  std::optional<std::vector<int64_t>> in_shape = Concrete(x->dims);
  std::optional<std::vector<int64_t>> out_shape = Concrete(out);
  std::optional<int64_t> count = OnnxElementCount(out);
  if (!x->content || !in_shape || !out_shape || !count) return;
  const int64_t rank = static_cast<int64_t>(out.size());
  const std::vector<int64_t> strides = Strides(*in_shape);
  std::vector<int64_t> index(rank, 0);
  OnnxContent content;
  content.real = x->content->real;
  for (int64_t k = 0; k < *count; ++k) {
    int64_t src = 0;
    for (int64_t d = 0; d < rank; ++d) {
      src += (first[d] + index[d] * step[d]) * strides[d];
    }
    AppendRange(*x->content, src, 1, &content);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++index[d] < (*out_shape)[d]) break;
      index[d] = 0;
    }
  }
  SetContent(c, 0, std::move(content));
}

absl::Status SliceOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x)) return FallBackToOnnx();
  SliceArgs a;
  if (auto s = ReadSliceArgs(c, &a); !s.ok()) return s;
  if (!a.known) return SliceUnknown(c, a);
  const int64_t rank = static_cast<int64_t>(x->dims.size());
  if (a.axes.empty()) {
    for (size_t i = 0; i < a.starts.size(); ++i) a.axes.push_back(i);
  }
  if (a.steps.empty()) a.steps.assign(a.starts.size(), 1);
  if (a.starts.size() != a.ends.size() || a.axes.size() != a.starts.size() ||
      a.steps.size() != a.starts.size()) {
    return NodeError(c, "starts, ends, axes and steps differ in length");
  }
  std::vector<SymDim> out = x->dims;
  std::vector<int64_t> first(rank, 0), step(rank, 1);
  bool concrete = true;
  for (size_t j = 0; j < a.axes.size(); ++j) {
    int64_t d = 0;
    if (!NormalizeAxis(a.axes[j], rank, &d)) {
      return NodeError(c, "axis ", a.axes[j], " is out of range for rank ",
                       rank);
    }
    if (a.steps[j] == 0) return NodeError(c, "a step is 0");
    out[d] =
        SliceLength(*c.table, x->dims[d], a.starts[j], a.ends[j], a.steps[j]);
    concrete =
        concrete && x->dims[d].is_constant() && a.starts[j].is_constant();
    if (concrete) {
      first[d] =
          SliceStart(x->dims[d].constant(), a.starts[j].constant(), a.steps[j]);
      step[d] = a.steps[j];
    }
  }
  SetOut(c, 0, x->elem_type, out);
  if (concrete) SliceElements(c, out, first, step);
  return absl::OkStatus();
}

// --- Gather, Expand, Tile, Range
// -------------------------------------------------

absl::Status GatherOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  const OnnxValue* idx = c.In(1);
  if (!HasShape(x) || !HasShape(idx)) return FallBackToOnnx();
  const int64_t rank = static_cast<int64_t>(x->dims.size());
  int64_t axis = 0;
  if (!NormalizeAxis(c.Int("axis", 0), rank, &axis)) {
    return NodeError(c, "axis ", c.Int("axis", 0), " is out of range for rank ",
                     rank);
  }
  std::vector<SymDim> out(x->dims.begin(), x->dims.begin() + axis);
  out.insert(out.end(), idx->dims.begin(), idx->dims.end());
  out.insert(out.end(), x->dims.begin() + axis + 1, x->dims.end());
  SetOut(c, 0, x->elem_type, out);
  std::optional<std::vector<int64_t>> shape = Concrete(x->dims);
  const std::vector<SymDim>* indices = c.Ints(1);
  if (!x->content || !shape || indices == nullptr) return absl::OkStatus();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= (*shape)[i];
  for (int64_t i = axis + 1; i < rank; ++i) inner *= (*shape)[i];
  const int64_t d = (*shape)[axis];
  std::vector<int64_t> picks;
  for (const SymDim& i : *indices) {
    if (!i.is_constant()) return absl::OkStatus();
    int64_t v = i.constant();
    if (v < -d || v >= d) {
      return NodeError(c, "index ", v, " is out of range for a dim of ", d);
    }
    picks.push_back(v < 0 ? v + d : v);
  }
  if (outer * static_cast<int64_t>(picks.size()) * inner > kMaxOnnxContent) {
    return absl::OkStatus();
  }
  OnnxContent content;
  content.real = x->content->real;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t p : picks) {
      AppendRange(*x->content, (o * d + p) * inner, inner, &content);
    }
  }
  SetContent(c, 0, std::move(content));
  return absl::OkStatus();
}

absl::Status GatherElementsOp(OnnxNodeContext& c) {
  if (!HasShape(c.In(0)) || !HasShape(c.In(1))) return FallBackToOnnx();
  SetOut(c, 0, c.In(0)->elem_type, c.In(1)->dims);
  return absl::OkStatus();
}

// Copies input 0's elements broadcast to `out` (Expand) when small.
void BroadcastElements(OnnxNodeContext& c, const std::vector<SymDim>& out) {
  const OnnxValue* x = c.In(0);
  std::optional<std::vector<int64_t>> shape = Concrete(out);
  std::optional<std::vector<int64_t>> in = Concrete(x->dims);
  std::optional<int64_t> n = OnnxElementCount(out);
  if (!x->content || !shape || !in || !n || *n > kMaxOnnxContent) return;
  OnnxContent content;
  content.real = x->content->real;
  ForEachBroadcast(*shape, {*in}, [&](const std::vector<int64_t>& src) {
    AppendRange(*x->content, src[0], 1, &content);
  });
  SetContent(c, 0, std::move(content));
}

absl::Status ExpandOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x)) return FallBackToOnnx();
  std::optional<std::vector<SymDim>> shape;
  if (auto s = ShapeFromInput(c, 1, &shape); !s.ok()) return s;
  if (!shape) return FallBackToOnnx();
  OnnxValue target;
  target.name = c.In(1)->name;
  target.has_shape = true;
  target.dims = *shape;
  absl::StatusOr<std::vector<SymDim>> out = Broadcast(c, {x, &target});
  if (!out.ok()) return out.status();
  SetOut(c, 0, x->elem_type, *out);
  if (c.Out(0) != nullptr) BroadcastElements(c, *out);
  return absl::OkStatus();
}

absl::Status TileOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x)) return FallBackToOnnx();
  std::optional<std::vector<SymDim>> repeats;
  if (auto s = ShapeFromInput(c, 1, &repeats); !s.ok()) return s;
  if (!repeats) return FallBackToOnnx();
  if (repeats->size() != x->dims.size()) {
    return NodeError(c, "has ", repeats->size(), " repeats for rank ",
                     x->dims.size());
  }
  std::vector<SymDim> out;
  for (size_t i = 0; i < repeats->size(); ++i) {
    out.push_back(c.table->Mul(x->dims[i], (*repeats)[i]));
  }
  if (auto s = CheckNotNegative(c, out); !s.ok()) return s;
  SetOut(c, 0, x->elem_type, out);
  std::optional<std::vector<int64_t>> shape = Concrete(out);
  std::optional<std::vector<int64_t>> in = Concrete(x->dims);
  std::optional<int64_t> n = OnnxElementCount(out);
  if (!x->content || !shape || !in || !n || *n > kMaxOnnxContent ||
      c.Out(0) == nullptr) {
    return absl::OkStatus();
  }
  const std::vector<int64_t> strides = Strides(*in);
  std::vector<int64_t> index(shape->size(), 0);
  OnnxContent content;
  content.real = x->content->real;
  for (int64_t k = 0; k < *n; ++k) {
    int64_t src = 0;
    for (size_t a = 0; a < index.size(); ++a) {
      src += (index[a] % (*in)[a]) * strides[a];
    }
    AppendRange(*x->content, src, 1, &content);
    for (int a = static_cast<int>(index.size()) - 1; a >= 0; --a) {
      if (++index[a] < (*shape)[a]) break;
      index[a] = 0;
    }
  }
  SetContent(c, 0, std::move(content));
  return absl::OkStatus();
}

absl::Status RangeOp(OnnxNodeContext& c) {
  const OnnxValue* start = c.In(0);
  if (start == nullptr || c.In(1) == nullptr || c.In(2) == nullptr) {
    return FallBackToOnnx();
  }
  const int32_t type = start->elem_type;
  if (IsRealType(type)) {
    std::optional<std::vector<double>> s = c.Reals(0), l = c.Reals(1),
                                       d = c.Reals(2);
    if (!s || !l || !d || s->size() != 1 || l->size() != 1 || d->size() != 1) {
      size_t missing = !s ? 0 : !l ? 1 : 2;
      SetOut(c, 0, type, {c.FromUnknownElements(missing)});
      return absl::OkStatus();
    }
    if ((*d)[0] == 0) return NodeError(c, "delta is 0");
    const double count =
        std::max(std::ceil(((*l)[0] - (*s)[0]) / (*d)[0]), 0.0);
    if (!std::isfinite(count) || count > 9e18) {
      return NodeError(c, "gives ", count, " elements: too many");
    }
    const int64_t n = static_cast<int64_t>(count);
    SetOut(c, 0, type, {SymDim(n)});
    if (n <= kMaxOnnxContent) {
      std::vector<double> r;
      for (int64_t i = 0; i < n; ++i) r.push_back((*s)[0] + i * (*d)[0]);
      SetReals(c, 0, std::move(r));
    }
    return absl::OkStatus();
  }
  std::optional<SymDim> s = ScalarInt(c, 0), l = ScalarInt(c, 1),
                        d = ScalarInt(c, 2);
  if (!s || !l || !d) {
    size_t missing = !s ? 0 : !l ? 1 : 2;
    SetOut(c, 0, type, {c.FromUnknownElements(missing)});
    return absl::OkStatus();
  }
  if (*d == SymDim(0)) return NodeError(c, "delta is 0");
  DimTable& t = *c.table;
  const SymDim n = t.Max(t.CeilDiv(t.Sub(*l, *s), *d), SymDim(0));
  SetOut(c, 0, type, {n});
  if (n.is_constant() && n.constant() <= kMaxOnnxContent) {
    std::vector<SymDim> r;
    SymDim v = *s;
    for (int64_t i = 0; i < n.constant(); ++i) {
      r.push_back(v);
      v = t.Add(v, *d);
    }
    SetInts(c, 0, std::move(r));
  }
  return absl::OkStatus();
}

// --- Reductions
// ------------------------------------------------------------------

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

// --- Linear algebra, convolution, pooling
// -----------------------------------------

absl::Status MatMulLike(OnnxNodeContext& c, size_t ia, size_t ib, int32_t type,
                        bool trans_a, bool trans_b) {
  const OnnxValue* a = c.In(ia);
  const OnnxValue* b = c.In(ib);
  if (!HasShape(a) || !HasShape(b) || a->dims.empty() || b->dims.empty()) {
    return FallBackToOnnx();
  }
  std::vector<SymDim> da = a->dims, db = b->dims;
  const bool a_vector = da.size() == 1, b_vector = db.size() == 1;
  if (a_vector) da.insert(da.begin(), SymDim(1));
  if (b_vector) db.push_back(SymDim(1));
  if (trans_a) std::swap(da[da.size() - 1], da[da.size() - 2]);
  if (trans_b) std::swap(db[db.size() - 1], db[db.size() - 2]);
  const SymDim& ka = da.back();
  const SymDim& kb = db[db.size() - 2];
  if (ka.is_constant() && kb.is_constant() && ka != kb) {
    return NodeError(c, "inner dims differ (", ka.constant(), " and ",
                     kb.constant(), ")");
  }
  OnnxValue batch_a, batch_b;
  batch_a.dims.assign(da.begin(), da.end() - 2);
  batch_b.dims.assign(db.begin(), db.end() - 2);
  absl::StatusOr<std::vector<SymDim>> out = Broadcast(c, {&batch_a, &batch_b});
  if (!out.ok()) return out.status();
  if (!a_vector) out->push_back(da[da.size() - 2]);
  if (!b_vector) out->push_back(db.back());
  SetOut(c, 0, type == 0 ? a->elem_type : type, *out);
  return absl::OkStatus();
}

absl::Status MatMulOp(OnnxNodeContext& c) {
  const std::string& op = c.node->op_type();
  if (op == "MatMulInteger") return MatMulLike(c, 0, 1, kInt32, false, false);
  if (op == "QLinearMatMul") {
    const OnnxValue* zp = c.In(7);
    return MatMulLike(c, 0, 3, zp ? zp->elem_type : 0, false, false);
  }
  return MatMulLike(c, 0, 1, 0, c.Int("transA", 0) != 0,
                    c.Int("transB", 0) != 0);
}

absl::Status GemmOp(OnnxNodeContext& c) {
  const OnnxValue* a = c.In(0);
  const OnnxValue* b = c.In(1);
  if (!HasShape(a) || !HasShape(b) || a->dims.size() != 2 ||
      b->dims.size() != 2) {
    return FallBackToOnnx();
  }
  const SymDim m = a->dims[c.Int("transA", 0) != 0 ? 1 : 0];
  const SymDim n = b->dims[c.Int("transB", 0) != 0 ? 0 : 1];
  SetOut(c, 0, a->elem_type, {m, n});
  return absl::OkStatus();
}

// Spatial attributes of a convolution or pooling over `spatial` axes.
struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: 2 x spatial
  std::string auto_pad;
};

absl::StatusOr<Window> ReadWindow(OnnxNodeContext& c, size_t spatial,
                                  std::vector<int64_t> kernel) {
  Window w;
  w.kernel = c.Attr("kernel_shape") ? c.Ints("kernel_shape") : kernel;
  w.strides = c.Ints("strides");
  w.dilations = c.Ints("dilations");
  w.pads = c.Ints("pads");
  w.auto_pad = c.Str("auto_pad", "NOTSET");
  if (w.strides.empty()) w.strides.assign(spatial, 1);
  if (w.dilations.empty()) w.dilations.assign(spatial, 1);
  if (w.pads.empty()) w.pads.assign(2 * spatial, 0);
  if (w.kernel.size() != spatial || w.strides.size() != spatial ||
      w.dilations.size() != spatial || w.pads.size() != 2 * spatial) {
    return NodeError(c, "kernel, strides, dilations or pads do not match its ",
                     spatial, " spatial dims");
  }
  for (size_t i = 0; i < spatial; ++i) {
    if (w.strides[i] <= 0 || w.dilations[i] <= 0 || w.kernel[i] <= 0) {
      return NodeError(c, "has a kernel, stride or dilation below 1");
    }
  }
  return w;
}

// Output size of one spatial dim of a convolution or pooling.
SymDim WindowOutput(DimTable& t, const Window& w, size_t i, const SymDim& in,
                    bool ceil_mode) {
  const int64_t span = w.dilations[i] * (w.kernel[i] - 1) + 1;
  const SymDim stride(w.strides[i]);
  if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") {
    return t.CeilDiv(in, stride);
  }
  SymDim padded = in;
  if (w.auto_pad != "VALID") {
    padded = t.Add(in, SymDim(w.pads[i] + w.pads[i + w.kernel.size()]));
  }
  const SymDim room = t.Sub(padded, SymDim(span));
  const SymDim steps =
      ceil_mode ? t.CeilDiv(room, stride) : t.FloorDiv(room, stride);
  return t.Add(steps, SymDim(1));
}

absl::Status ConvLike(OnnxNodeContext& c, size_t ix, size_t iw) {
  const OnnxValue* x = c.In(ix);
  const OnnxValue* w = c.In(iw);
  if (!HasShape(x) || !HasShape(w) || x->dims.size() < 3 ||
      w->dims.size() != x->dims.size()) {
    return FallBackToOnnx();
  }
  const size_t spatial = x->dims.size() - 2;
  std::vector<int64_t> kernel;
  for (size_t i = 2; i < w->dims.size(); ++i) {
    kernel.push_back(w->dims[i].is_constant() ? w->dims[i].constant() : 0);
  }
  absl::StatusOr<Window> win = ReadWindow(c, spatial, kernel);
  if (!win.ok()) return win.status();
  std::vector<SymDim> out = {x->dims[0], w->dims[0]};
  for (size_t i = 0; i < spatial; ++i) {
    out.push_back(WindowOutput(*c.table, *win, i, x->dims[i + 2], false));
  }
  if (auto s = CheckNotNegative(c, out); !s.ok()) return s;
  int32_t type = x->elem_type;
  if (c.node->op_type() == "ConvInteger") type = kInt32;
  if (c.node->op_type() == "QLinearConv" && c.In(7) != nullptr) {
    type = c.In(7)->elem_type;
  }
  SetOut(c, 0, type, out);
  return absl::OkStatus();
}

absl::Status ConvOp(OnnxNodeContext& c) {
  if (c.node->op_type() == "QLinearConv") return ConvLike(c, 0, 3);
  return ConvLike(c, 0, 1);
}

absl::Status ConvTransposeOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  const OnnxValue* w = c.In(1);
  if (!HasShape(x) || !HasShape(w) || x->dims.size() < 3 ||
      w->dims.size() != x->dims.size()) {
    return FallBackToOnnx();
  }
  const size_t spatial = x->dims.size() - 2;
  std::vector<int64_t> kernel;
  for (size_t i = 2; i < w->dims.size(); ++i) {
    if (!w->dims[i].is_constant()) return FallBackToOnnx();
    kernel.push_back(w->dims[i].constant());
  }
  absl::StatusOr<Window> win = ReadWindow(c, spatial, kernel);
  if (!win.ok()) return win.status();
  DimTable& t = *c.table;
  std::vector<SymDim> out = {x->dims[0],
                             t.Mul(w->dims[1], SymDim(c.Int("group", 1)))};
  std::vector<int64_t> output_shape = c.Ints("output_shape");
  std::vector<int64_t> output_padding = c.Ints("output_padding");
  output_padding.resize(spatial, 0);
  for (size_t i = 0; i < spatial; ++i) {
    if (output_shape.size() == spatial) {
      out.push_back(SymDim(output_shape[i]));
    } else if (win->auto_pad == "SAME_UPPER" || win->auto_pad == "SAME_LOWER") {
      out.push_back(t.Mul(x->dims[i + 2], SymDim(win->strides[i])));
    } else {
      const int64_t span = win->dilations[i] * (kernel[i] - 1) + 1;
      int64_t pads = win->pads[i] + win->pads[i + spatial];
      if (win->auto_pad == "VALID") pads = 0;
      SymDim o =
          t.Mul(t.Sub(x->dims[i + 2], SymDim(1)), SymDim(win->strides[i]));
      out.push_back(t.Add(o, SymDim(output_padding[i] + span - pads)));
    }
  }
  if (auto s = CheckNotNegative(c, out); !s.ok()) return s;
  SetOut(c, 0, x->elem_type, out);
  return absl::OkStatus();
}

absl::Status PoolOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x) || x->dims.size() < 3 || c.Attr("kernel_shape") == nullptr) {
    return FallBackToOnnx();
  }
  const size_t spatial = x->dims.size() - 2;
  absl::StatusOr<Window> win = ReadWindow(c, spatial, {});
  if (!win.ok()) return win.status();
  const bool ceil_mode = c.Int("ceil_mode", 0) != 0;
  std::vector<SymDim> out = {x->dims[0], x->dims[1]};
  for (size_t i = 0; i < spatial; ++i) {
    out.push_back(WindowOutput(*c.table, *win, i, x->dims[i + 2], ceil_mode));
  }
  if (auto s = CheckNotNegative(c, out); !s.ok()) return s;
  SetOut(c, 0, x->elem_type, out);
  SetOut(c, 1, kInt64, out);  // MaxPool's indices
  return absl::OkStatus();
}

absl::Status GlobalPoolOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x) || x->dims.size() < 2) return FallBackToOnnx();
  std::vector<SymDim> out(x->dims.size(), SymDim(1));
  out[0] = x->dims[0];
  out[1] = x->dims[1];
  SetOut(c, 0, x->elem_type, out);
  return absl::OkStatus();
}

// --- Pad, Resize
// ---------------------------------------------------------------

absl::Status PadOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x)) return FallBackToOnnx();
  const int64_t rank = static_cast<int64_t>(x->dims.size());
  std::vector<SymDim> pads;
  bool known = true;
  if (c.opset >= 0 && c.opset < 11) {
    for (int64_t v : c.Ints(c.Attr("pads") ? "pads" : "paddings")) {
      pads.push_back(SymDim(v));
    }
  } else if (const std::vector<SymDim>* p = c.Ints(1)) {
    pads = *p;
  } else {
    known = false;
  }
  std::vector<int64_t> axes;
  if (c.opset >= 18 && c.In(3) != nullptr) {
    const std::vector<SymDim>* a = c.Ints(3);
    if (a == nullptr) return FallBackToOnnx();
    for (const SymDim& d : *a) {
      if (!d.is_constant()) return FallBackToOnnx();
      axes.push_back(d.constant());
    }
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  std::vector<SymDim> out = x->dims;
  if (!known) {
    for (int64_t a : axes) {
      int64_t n = 0;
      if (NormalizeAxis(a, rank, &n)) out[n] = c.FromUnknownElements(1);
    }
    SetOut(c, 0, x->elem_type, out);
    return absl::OkStatus();
  }
  if (pads.size() != 2 * axes.size()) {
    return NodeError(c, "has ", pads.size(), " pads for ", axes.size(),
                     " axes");
  }
  for (size_t j = 0; j < axes.size(); ++j) {
    int64_t n = 0;
    if (!NormalizeAxis(axes[j], rank, &n)) {
      return NodeError(c, "axis ", axes[j], " is out of range for rank ", rank);
    }
    out[n] = c.table->Add(out[n], c.table->Add(pads[j], pads[j + axes.size()]));
  }
  if (auto s = CheckNotNegative(c, out); !s.ok()) return s;
  SetOut(c, 0, x->elem_type, out);
  return absl::OkStatus();
}

// floor(d x scale), symbolically when the scale is n or 1/n.
SymDim ScaleDim(OnnxNodeContext& c, const SymDim& d, double scale) {
  if (d.is_constant()) {
    const double v = std::floor(static_cast<double>(d.constant()) * scale);
    if (std::fabs(v) < 9e18) return SymDim(static_cast<int64_t>(v));
    return c.UnknownDim("a dim scaled past 64 bits", false, {});
  }
  if (scale >= 1 && scale == std::floor(scale) && scale < 1e9) {
    return c.table->Mul(d, SymDim(static_cast<int64_t>(scale)));
  }
  const double inverse = 1.0 / scale;
  if (scale > 0 && inverse == std::floor(inverse) && inverse < 1e9) {
    return c.table->FloorDiv(d, SymDim(static_cast<int64_t>(inverse)));
  }
  return c.UnknownDim("a dim scaled by a fraction", false, c.table->Leaves(d));
}

absl::Status ResizeOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x)) return FallBackToOnnx();
  const int64_t rank = static_cast<int64_t>(x->dims.size());
  const std::string op = c.node->op_type();
  size_t scales_at = 2, sizes_at = 3;
  if (op == "Upsample" || (c.opset >= 0 && c.opset < 11)) scales_at = 1;
  std::vector<int64_t> axes = c.Ints("axes");
  if (axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  for (int64_t& a : axes) {
    if (!NormalizeAxis(a, rank, &a))
      return NodeError(c, "an axis is out of range");
  }
  std::vector<SymDim> out = x->dims;
  auto empty = [&](size_t i) {
    const OnnxValue* v = c.In(i);
    return v == nullptr ||
           (v->has_shape && v->dims.size() == 1 && v->dims[0] == SymDim(0));
  };
  std::vector<double> scales;
  if (op == "Upsample" && c.opset >= 0 && c.opset < 9) {
    if (const onnx::AttributeProto* a = c.Attr("scales")) {
      scales.assign(a->floats().begin(), a->floats().end());
    }
  } else if (scales_at != sizes_at && !empty(sizes_at)) {
    std::optional<std::vector<SymDim>> sizes;
    if (auto s = ShapeFromInput(c, sizes_at, &sizes); !s.ok()) return s;
    if (!sizes || sizes->size() != axes.size()) return FallBackToOnnx();
    const std::string policy = c.Str("keep_aspect_ratio_policy", "stretch");
    if (policy != "stretch") return FallBackToOnnx();
    for (size_t j = 0; j < axes.size(); ++j) out[axes[j]] = (*sizes)[j];
    if (auto s = CheckNotNegative(c, out); !s.ok()) return s;
    SetOut(c, 0, x->elem_type, out);
    return absl::OkStatus();
  } else if (!empty(scales_at)) {
    std::optional<std::vector<double>> s = c.Reals(scales_at);
    if (!s) {
      for (int64_t a : axes) out[a] = c.FromUnknownElements(scales_at);
      SetOut(c, 0, x->elem_type, out);
      return absl::OkStatus();
    }
    scales = *s;
  }
  if (scales.size() != axes.size()) return FallBackToOnnx();
  for (size_t j = 0; j < axes.size(); ++j) {
    if (!(scales[j] > 0) || scales[j] > 1e9) {
      return NodeError(c, "has scale ", scales[j]);
    }
    out[axes[j]] = ScaleDim(c, out[axes[j]], scales[j]);
  }
  SetOut(c, 0, x->elem_type, out);
  return absl::OkStatus();
}

// --- Other shape-changing ops
// ---------------------------------------------------

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

absl::Status NonZeroOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x)) return FallBackToOnnx();
  const int64_t rank = static_cast<int64_t>(x->dims.size());
  std::optional<std::vector<int64_t>> shape = Concrete(x->dims);
  if (x->content && shape) {
    std::vector<std::vector<int64_t>> coords(rank);
    int64_t count = 0;
    bool known = true;
    std::vector<int64_t> index(rank, 0);
    for (size_t k = 0; k < x->content->size() && known; ++k) {
      std::optional<bool> nz =
          x->content->real ? std::optional<bool>(x->content->reals[k] != 0)
                           : IsNonZero(*c.table, x->content->ints[k]);
      known = nz.has_value();
      if (known && *nz) {
        ++count;
        for (int64_t a = 0; a < rank; ++a) coords[a].push_back(index[a]);
      }
      for (int64_t a = rank - 1; a >= 0; --a) {
        if (++index[a] < (*shape)[a]) break;
        index[a] = 0;
      }
    }
    if (known) {
      SetOut(c, 0, kInt64, {SymDim(rank), SymDim(count)});
      std::vector<SymDim> ints;
      for (const auto& axis : coords) {
        for (int64_t v : axis) ints.push_back(SymDim(v));
      }
      SetInts(c, 0, std::move(ints));
      return absl::OkStatus();
    }
  }
  SetOut(c, 0, kInt64,
         {SymDim(rank),
          c.UnknownDim("its number of non-zero elements depends on data", true,
                       {})});
  return absl::OkStatus();
}

absl::Status DepthSpaceOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x) || x->dims.size() != 4) return FallBackToOnnx();
  const int64_t b = c.Int("blocksize", 0);
  if (b <= 0) return NodeError(c, "blocksize ", b, " is not positive");
  DimTable& t = *c.table;
  const SymDim bb(b * b), bs(b);
  std::vector<SymDim> out = x->dims;
  if (c.node->op_type() == "DepthToSpace") {
    out[1] = t.FloorDiv(out[1], bb);
    out[2] = t.Mul(out[2], bs);
    out[3] = t.Mul(out[3], bs);
  } else {
    out[1] = t.Mul(out[1], bb);
    out[2] = t.FloorDiv(out[2], bs);
    out[3] = t.FloorDiv(out[3], bs);
  }
  SetOut(c, 0, x->elem_type, out);
  return absl::OkStatus();
}

absl::Status GridSampleOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  const OnnxValue* grid = c.In(1);
  if (!HasShape(x) || !HasShape(grid) || x->dims.size() < 2 ||
      grid->dims.size() < 2) {
    return FallBackToOnnx();
  }
  std::vector<SymDim> out = {x->dims[0], x->dims[1]};
  out.insert(out.end(), grid->dims.begin() + 1, grid->dims.end() - 1);
  SetOut(c, 0, x->elem_type, out);
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

// Ops of the default domain and their rules.
struct RuleOps {
  OnnxShapeRule rule;            // the rule
  std::vector<const char*> ops;  // the ops it sizes
};

const absl::flat_hash_map<std::string, OnnxShapeRule>& DefaultRules() {
  static const auto* rules = [] {
    const RuleOps table[] = {
        {BroadcastOp, {"Add",       "Sub",         "Mul",
                       "Div",       "Mod",         "Pow",
                       "Min",       "Max",         "Sum",
                       "Mean",      "And",         "Or",
                       "Xor",       "Equal",       "Less",
                       "Greater",   "LessOrEqual", "GreaterOrEqual",
                       "PRelu",     "BitShift",    "BitwiseAnd",
                       "BitwiseOr", "BitwiseXor"}},
        {ReduceOp,
         {"ReduceSum", "ReduceProd", "ReduceMin", "ReduceMax", "ReduceMean",
          "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
          "ReduceSumSquare", "ArgMax", "ArgMin"}},
        {MatMulOp, {"MatMul", "MatMulInteger", "QLinearMatMul"}},
        {ConvOp, {"Conv", "ConvInteger", "QLinearConv", "DeformConv"}},
        {PoolOp, {"MaxPool", "AveragePool", "LpPool"}},
        {GlobalPoolOp, {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"}},
        {ResizeOp, {"Resize", "Upsample"}},
        {DepthSpaceOp, {"DepthToSpace", "SpaceToDepth"}},
        {RandomOp,
         {"RandomNormal", "RandomUniform", "RandomNormalLike",
          "RandomUniformLike"}},
        {CastOp, {"Cast", "CastLike"}},
        {WhereOp, {"Where"}},
        {ShapeOp, {"Shape"}},
        {SizeOp, {"Size"}},
        {ConstantOp, {"Constant"}},
        {ConstantOfShapeOp, {"ConstantOfShape"}},
        {ReshapeOp, {"Reshape"}},
        {FlattenOp, {"Flatten"}},
        {SqueezeOp, {"Squeeze"}},
        {UnsqueezeOp, {"Unsqueeze"}},
        {TransposeOp, {"Transpose"}},
        {ConcatOp, {"Concat"}},
        {SplitOp, {"Split"}},
        {SliceOp, {"Slice"}},
        {GatherOp, {"Gather"}},
        {GatherElementsOp, {"GatherElements"}},
        {ExpandOp, {"Expand"}},
        {TileOp, {"Tile"}},
        {RangeOp, {"Range"}},
        {GemmOp, {"Gemm"}},
        {ConvTransposeOp, {"ConvTranspose"}},
        {PadOp, {"Pad"}},
        {TopKOp, {"TopK"}},
        {NonZeroOp, {"NonZero"}},
        {GridSampleOp, {"GridSample"}},
        {EyeLikeOp, {"EyeLike"}},
        {DropoutOp, {"Dropout"}},
        {LayerNormOp, {"LayerNormalization"}},
        {BatchNormOp, {"BatchNormalization"}}};
    auto* r = new absl::flat_hash_map<std::string, OnnxShapeRule>;
    for (const RuleOps& entry : table) {
      for (const char* op : entry.ops) r->emplace(op, entry.rule);
    }
    for (const char* op : kSameShapeOps) r->emplace(op, SameShape);
    return r;
  }();
  return *rules;
}

// ONNX Runtime's contrib ops (com.microsoft) that are known ops renamed.
const absl::flat_hash_map<std::string, OnnxShapeRule>& MicrosoftRules() {
  static const auto* rules = [] {
    const RuleOps table[] = {
        {SameShape,
         {"Gelu", "FastGelu", "BiasGelu", "QuickGelu", "BiasAdd",
          "SkipLayerNormalization", "SkipSimplifiedLayerNormalization"}},
        {LayerNormOp, {"SimplifiedLayerNormalization", "LayerNormalization"}},
        {MatMulOp, {"FusedMatMul"}},
        {ConvOp, {"FusedConv"}}};
    auto* r = new absl::flat_hash_map<std::string, OnnxShapeRule>;
    for (const RuleOps& entry : table) {
      for (const char* op : entry.ops) r->emplace(op, entry.rule);
    }
    return r;
  }();
  return *rules;
}

}  // namespace

// --- OnnxNodeContext
// -----------------------------------------------------------

const onnx::AttributeProto* OnnxNodeContext::Attr(
    absl::string_view name) const {
  for (const onnx::AttributeProto& a : node->attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

int64_t OnnxNodeContext::Int(absl::string_view name, int64_t fallback) const {
  const onnx::AttributeProto* a = Attr(name);
  return a == nullptr ? fallback : a->i();
}

std::vector<int64_t> OnnxNodeContext::Ints(absl::string_view name) const {
  const onnx::AttributeProto* a = Attr(name);
  if (a == nullptr) return {};
  return {a->ints().begin(), a->ints().end()};
}

float OnnxNodeContext::Float(absl::string_view name, float fallback) const {
  const onnx::AttributeProto* a = Attr(name);
  return a == nullptr ? fallback : a->f();
}

std::string OnnxNodeContext::Str(absl::string_view name,
                                 absl::string_view fallback) const {
  const onnx::AttributeProto* a = Attr(name);
  return a == nullptr ? std::string(fallback) : a->s();
}

SymDim OnnxNodeContext::UnknownDim(absl::string_view reason,
                                   bool data_dependent,
                                   const std::set<AtomId>& depends_on) {
  return SymDim::Atom(
      table->Unknown(label, reason, data_dependent, depends_on));
}

std::set<AtomId> OnnxNodeContext::InputLeaves(size_t i) const {
  std::set<AtomId> out;
  const OnnxValue* v = In(i);
  if (v == nullptr) return out;
  out = v->taint;
  for (const SymDim& d : v->dims) {
    std::set<AtomId> l = table->Leaves(d);
    out.insert(l.begin(), l.end());
  }
  if (v->content && !v->content->real) {
    for (const SymDim& d : v->content->ints) {
      std::set<AtomId> l = table->Leaves(d);
      out.insert(l.begin(), l.end());
    }
  }
  return out;
}

SymDim OnnxNodeContext::FromUnknownElements(size_t i) {
  const OnnxValue* v = In(i);
  const std::string name = v == nullptr ? "?" : v->name;
  if (v != nullptr && v->from_data) {
    return UnknownDim(absl::StrCat("it depends on the values of '", name,
                                   "', which are computed from data"),
                      true, {});
  }
  std::set<AtomId> leaves = InputLeaves(i);
  return UnknownDim(absl::StrCat("it depends on the values of '", name,
                                 "', which memplan does not compute"),
                    leaves.empty(), leaves);
}

const std::vector<SymDim>* OnnxNodeContext::Ints(size_t i) const {
  const OnnxValue* v = In(i);
  if (v == nullptr || !v->content || v->content->real) return nullptr;
  return &v->content->ints;
}

std::optional<std::vector<double>> OnnxNodeContext::Reals(size_t i) const {
  return AsReals(In(i));
}

absl::Status FallBackToOnnx() {
  return absl::UnimplementedError("memplan: fall back to ONNX's inference");
}

bool IsFallBack(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnimplemented &&
         s.message() == "memplan: fall back to ONNX's inference";
}

OnnxShapeRule FindOnnxShapeRule(absl::string_view domain,
                                absl::string_view op_type) {
  const absl::flat_hash_map<std::string, OnnxShapeRule>* rules = nullptr;
  if (domain.empty() || domain == "ai.onnx") rules = &DefaultRules();
  if (domain == "com.microsoft") rules = &MicrosoftRules();
  if (rules == nullptr) return nullptr;
  auto it = rules->find(std::string(op_type));
  return it == rules->end() ? nullptr : it->second;
}

bool OnnxOpIsDataDependent(absl::string_view op_type) {
  static const auto* ops = new absl::flat_hash_set<std::string>{
      "NonZero",     "Unique",           "NonMaxSuppression", "Compress",
      "StringSplit", "StringNormalizer", "TfIdfVectorizer",   "RegexFullMatch"};
  return ops->contains(std::string(op_type));
}

std::optional<int64_t> OnnxElementCount(const std::vector<SymDim>& dims) {
  int64_t n = 1;
  for (const SymDim& d : dims) {
    if (!d.is_constant() || d.constant() < 0 ||
        __builtin_mul_overflow(n, d.constant(), &n)) {
      return std::nullopt;
    }
  }
  return n;
}

// --- Reading tensors ---------------------------------------------------------

namespace {

double HalfToDouble(uint16_t h) {
  const int sign = (h >> 15) & 1, exponent = (h >> 10) & 0x1f,
            mantissa = h & 0x3ff;
  double v = 0;
  if (exponent == 0) {
    v = std::ldexp(mantissa, -24);
  } else if (exponent == 31) {
    v = mantissa ? std::numeric_limits<double>::quiet_NaN()
                 : std::numeric_limits<double>::infinity();
  } else {
    v = std::ldexp(mantissa + 1024, exponent - 25);
  }
  return sign ? -v : v;
}

double Bfloat16ToDouble(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Reads `count` little-endian elements of `type` from raw bytes.
std::optional<OnnxContent> FromRaw(int32_t type, const std::string& raw,
                                   int64_t count) {
  const int bits = OnnxElementBits(type);
  if (bits < 8 || static_cast<int64_t>(raw.size()) != count * (bits / 8)) {
    return std::nullopt;
  }
  OnnxContent out;
  out.real = IsRealType(type);
  const unsigned char* p = reinterpret_cast<const unsigned char*>(raw.data());
  const int width = bits / 8;
  for (int64_t i = 0; i < count; ++i, p += width) {
    uint64_t u = 0;
    for (int b = width - 1; b >= 0; --b) u = (u << 8) | p[b];
    if (out.real) {
      if (type == 1) {
        uint32_t w = static_cast<uint32_t>(u);
        float f;
        std::memcpy(&f, &w, sizeof f);
        out.reals.push_back(f);
      } else if (type == 11) {
        double d;
        std::memcpy(&d, &u, sizeof d);
        out.reals.push_back(d);
      } else if (type == 10) {
        out.reals.push_back(HalfToDouble(static_cast<uint16_t>(u)));
      } else if (type == 16) {
        out.reals.push_back(Bfloat16ToDouble(static_cast<uint16_t>(u)));
      } else {
        return std::nullopt;  // float8 and others: not needed for shapes
      }
      continue;
    }
    int64_t v = 0;
    switch (type) {
      case 3:
        v = static_cast<int8_t>(u);
        break;  // INT8
      case 5:
        v = static_cast<int16_t>(u);
        break;  // INT16
      case 6:
        v = static_cast<int32_t>(u);
        break;  // INT32
      case 7:
        v = static_cast<int64_t>(u);
        break;  // INT64
      case 13:  // UINT64
        if (u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
        v = static_cast<int64_t>(u);
        break;
      default:
        v = static_cast<int64_t>(u);
        break;  // unsigned, bool
    }
    out.ints.push_back(SymDim(v));
  }
  return out;
}

// Reads the typed repeated fields of a TensorProto.
std::optional<OnnxContent> FromFields(const ::ONNX_NAMESPACE::TensorProto& t,
                                      int64_t count) {
  const int32_t type = t.data_type();
  OnnxContent out;
  out.real = IsRealType(type);
  if (type == 1 && t.float_data_size() == count) {
    out.reals.assign(t.float_data().begin(), t.float_data().end());
  } else if (type == 11 && t.double_data_size() == count) {
    out.reals.assign(t.double_data().begin(), t.double_data().end());
  } else if ((type == 10 || type == 16) && t.int32_data_size() == count) {
    for (int32_t bits : t.int32_data()) {
      out.reals.push_back(type == 10 ? HalfToDouble(bits)
                                     : Bfloat16ToDouble(bits));
    }
  } else if (type == 7 && t.int64_data_size() == count) {
    for (int64_t v : t.int64_data()) out.ints.push_back(SymDim(v));
  } else if ((type == 2 || type == 3 || type == 4 || type == 5 || type == 6 ||
              type == 9) &&
             t.int32_data_size() == count) {
    for (int32_t v : t.int32_data()) out.ints.push_back(SymDim(v));
  } else if ((type == 12 || type == 13) && t.uint64_data_size() == count) {
    for (uint64_t v : t.uint64_data()) {
      if (v > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
      out.ints.push_back(SymDim(static_cast<int64_t>(v)));
    }
  } else {
    return std::nullopt;
  }
  return out;
}

}  // namespace

absl::Status LoadOnnxTensor(const onnx::TensorProto& t, OnnxValue* v,
                            absl::string_view label) {
  std::vector<SymDim> dims;
  for (int64_t d : t.dims()) {
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          label, ": tensor '", t.name(), "' has negative dim ", d));
    }
    dims.push_back(SymDim(d));
  }
  SetOnnxShape(v, t.data_type(), std::move(dims));
  v->constant = true;
  std::optional<int64_t> count = OnnxElementCount(v->dims);
  if (!count || *count > kMaxOnnxContent ||
      t.data_location() == onnx::TensorProto::EXTERNAL) {
    return absl::OkStatus();
  }
  v->content = t.has_raw_data() ? FromRaw(t.data_type(), t.raw_data(), *count)
                                : FromFields(t, *count);
  return absl::OkStatus();
}

void SetOnnxShape(OnnxValue* v, int32_t elem_type, std::vector<SymDim> dims) {
  v->elem_type = elem_type;
  v->tensor = true;
  v->has_shape = true;
  v->dims = std::move(dims);
  v->content.reset();
}

}  // namespace memplan::formats
