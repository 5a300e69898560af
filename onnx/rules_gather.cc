// Shape rules for indexing and repeating ops: Gather, GatherElements,
// Expand, Tile, Range and NonZero (whose count depends on data unless its
// input's elements are known).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "onnx/internal/rule_helpers.h"

namespace memplan::formats::internal {
namespace {

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
    // As ONNX Runtime counts: limit - start in the element type (float32:
    // 0.4f - 0.1f is 0.3000000119f, so 4 elements of step 0.1f, where the
    // difference in double gives 3), then divided in double; the elements
    // added up in the element type too.
    const bool single = type == kFloat;
    const double span =
        single ? static_cast<double>(static_cast<float>(
                     static_cast<float>((*l)[0]) - static_cast<float>((*s)[0])))
               : (*l)[0] - (*s)[0];
    const double count = std::max(std::ceil(span / (*d)[0]), 0.0);
    if (!std::isfinite(count) || count > 9e18) {
      return NodeError(c, "gives ", count, " elements: too many");
    }
    const int64_t n = static_cast<int64_t>(count);
    SetOut(c, 0, type, {SymDim(n)});
    if (n <= kMaxOnnxContent) {
      std::vector<double> r;
      double value = (*s)[0];
      for (int64_t i = 0; i < n; ++i) {
        r.push_back(value);
        value = single ? static_cast<double>(static_cast<float>(value) +
                                             static_cast<float>((*d)[0]))
                       : value + (*d)[0];
      }
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

}  // namespace

void AddGatherRules(RuleTable* table) {
  AddRule(&table->default_domain, GatherOp, {"Gather"});
  AddRule(&table->default_domain, GatherElementsOp, {"GatherElements"});
  AddRule(&table->default_domain, ExpandOp, {"Expand"});
  AddRule(&table->default_domain, TileOp, {"Tile"});
  AddRule(&table->default_domain, RangeOp, {"Range"});
  AddRule(&table->default_domain, NonZeroOp, {"NonZero"});
}

}  // namespace memplan::formats::internal
