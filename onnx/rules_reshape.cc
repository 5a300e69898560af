// Shape rules for ops that rearrange a tensor's elements without changing
// their number: Reshape (0 and -1 resolved), Flatten, Squeeze, Unsqueeze,
// Transpose, DepthToSpace and SpaceToDepth.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_join.h"
#include "onnx/internal/rule_helpers.h"

namespace memplan::formats::internal {
namespace {

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

// Transpose: the dims permuted by perm (reversed without it), and the
// elements too when known.
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

absl::Status DepthSpaceOp(OnnxNodeContext& c) {
  const OnnxValue* x = c.In(0);
  if (!HasShape(x) || x->dims.size() != 4) return FallBackToOnnx();
  const int64_t b = c.Int("blocksize", 0);
  if (b <= 0 || b > std::numeric_limits<int32_t>::max()) {
    return NodeError(c, "blocksize ", b, " is not from 1 to 2^31 - 1");
  }
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

}  // namespace

void AddReshapeRules(RuleTable* table) {
  AddRule(&table->default_domain, ReshapeOp, {"Reshape"});
  AddRule(&table->default_domain, FlattenOp, {"Flatten"});
  AddRule(&table->default_domain, SqueezeOp, {"Squeeze"});
  AddRule(&table->default_domain, UnsqueezeOp, {"Unsqueeze"});
  AddRule(&table->default_domain, TransposeOp, {"Transpose"});
  AddRule(&table->default_domain, DepthSpaceOp,
          {"DepthToSpace", "SpaceToDepth"});
}

}  // namespace memplan::formats::internal
