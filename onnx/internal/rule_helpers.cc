#include "onnx/internal/rule_helpers.h"

#include <algorithm>
#include <cassert>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace memplan::formats::internal {
namespace {

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

}  // namespace

bool IsRealType(int32_t t) {
  return t == 1 || t == 10 || t == 11 || t == 16 || (t >= 17 && t <= 20) ||
         t == 23;
}

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

bool NormalizeAxis(int64_t axis, int64_t rank, int64_t* out) {
  if (axis < -rank || axis >= rank) return false;
  *out = axis < 0 ? axis + rank : axis;
  return true;
}

void SetOut(OnnxNodeContext& c, size_t i, int32_t type,
            std::vector<SymDim> dims) {
  if (OnnxValue* v = c.Out(i)) SetOnnxShape(v, type, std::move(dims));
}

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

void SetContent(OnnxNodeContext& c, size_t i, OnnxContent content) {
  OnnxValue* v = c.Out(i);
  if (v != nullptr && static_cast<int64_t>(content.size()) <= kMaxOnnxContent) {
    v->content = std::move(content);
  }
}

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

std::optional<SymDim> ScalarInt(const OnnxNodeContext& c, size_t i) {
  const std::vector<SymDim>* v = c.Ints(i);
  if (v == nullptr || v->size() != 1) return std::nullopt;
  return (*v)[0];
}

void PassElements(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  OnnxValue* y = c.Out(0);
  if (x != nullptr && y != nullptr && x->content) y->content = x->content;
}

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

std::optional<bool> IsNonZero(DimTable& t, const SymDim& d) {
  std::optional<int> cmp = t.Compare(d, SymDim(0));
  if (!cmp) return std::nullopt;
  return *cmp != 0;
}

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
      return NodeError(c, "gives a negative dim (", d.constant(),
                       "): an input may be too small for it (the values of "
                       "--dim and --input, or dims defaulted to 1)");
    }
  }
  return absl::OkStatus();
}

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

void AddRule(OpRules* rules, OnnxShapeRule rule,
             absl::Span<const char* const> ops) {
  for (const char* op : ops) {
    const bool added = rules->emplace(op, rule).second;
    assert(added && "an op has one rule");
    (void)added;
  }
}

}  // namespace memplan::formats::internal
