// Shape rules for ops that cut a tensor or join tensors along axes: Concat,
// Split and Slice (ONNX's clamping rules, symbolically), with their elements
// when known.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "onnx/internal/rule_helpers.h"

namespace memplan::formats::internal {
namespace {

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
  if (n == 0) return NodeError(c, "Split has no outputs");
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

// --- Slice ----------------------------------------------------------------

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
    if (a.steps[j] == std::numeric_limits<int64_t>::min()) {
      return NodeError(c, "a step is -2^63, which has no magnitude in 64 bits");
    }
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

}  // namespace

void AddSliceRules(RuleTable* table) {
  AddRule(&table->default_domain, ConcatOp, {"Concat"});
  AddRule(&table->default_domain, SplitOp, {"Split"});
  AddRule(&table->default_domain, SliceOp, {"Slice"});
}

}  // namespace memplan::formats::internal
