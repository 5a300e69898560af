// Shape rules for ops that change spatial sizes: Pad (pads from an
// attribute or input, axes from opset 18), Resize and Upsample (scales or
// sizes), and GridSample (the grid's spatial dims).
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "base/text.h"
#include "onnx/internal/rule_helpers.h"

namespace memplan::formats::internal {
namespace {

namespace onnx = ::ONNX_NAMESPACE;

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

// floor(d x scale), symbolically when the scale is n or 1/n. Scales are
// float32 (a Resize's scales tensor, an Upsample's attribute), and ONNX
// Runtime multiplies in float: 3 x float(7/3) is 7 there (6.99999976 in
// double, which would plan a row short of what the runtime writes).
SymDim ScaleDim(OnnxNodeContext& c, const SymDim& d, double scale) {
  if (d.is_constant()) {
    const float v = std::floor(static_cast<float>(d.constant()) *
                               static_cast<float>(scale));
    if (std::fabs(v) < 9e18f) return SymDim(static_cast<int64_t>(v));
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

// Resize-18's sizes under keep_aspect_ratio_policy not_larger or
// not_smaller: one scale for the axes, the least (or greatest) of size / in
// over them, and each output dim round(scale x in), in float as ONNX
// Runtime computes it (roundf: halves away from zero).
absl::Status KeepAspectRatio(OnnxNodeContext& c, const OnnxValue& x,
                             const std::vector<int64_t>& axes,
                             const std::vector<SymDim>& sizes, bool not_larger,
                             bool not_smaller) {
  if (!not_larger && !not_smaller) {
    return NodeError(c, "keep_aspect_ratio_policy '",
                     base::SafeText(c.Str("keep_aspect_ratio_policy", "")),
                     "' is not stretch, not_larger or not_smaller");
  }
  float scale = not_larger ? std::numeric_limits<float>::max()
                           : std::numeric_limits<float>::lowest();
  for (size_t j = 0; j < axes.size(); ++j) {
    const SymDim& in = x.dims[axes[j]];
    if (!in.is_constant() || !sizes[j].is_constant()) {
      std::vector<SymDim> out = x.dims;
      for (int64_t a : axes) {
        out[a] = c.UnknownDim("a dim kept in aspect ratio with unknown sizes",
                              false, c.table->Leaves(x.dims[a]));
      }
      SetOut(c, 0, x.elem_type, out);
      return absl::OkStatus();
    }
    if (in.constant() <= 0 || sizes[j].constant() < 0) {
      return NodeError(c, "sizes ", sizes[j].constant(), " for a dim of ",
                       in.constant(), " with keep_aspect_ratio_policy");
    }
    const float s = static_cast<float>(sizes[j].constant()) /
                    static_cast<float>(in.constant());
    scale = not_larger ? std::min(scale, s) : std::max(scale, s);
  }
  std::vector<SymDim> out = x.dims;
  for (int64_t a : axes) {
    const float v =
        std::roundf(scale * static_cast<float>(x.dims[a].constant()));
    if (!(v < 9e18f)) return NodeError(c, "scales a dim past 64 bits");
    out[a] = SymDim(static_cast<int64_t>(v));
  }
  SetOut(c, 0, x.elem_type, out);
  return absl::OkStatus();
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
    if (policy != "stretch") {
      return KeepAspectRatio(c, *x, axes, *sizes, policy == "not_larger",
                             policy == "not_smaller");
    }
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

}  // namespace

void AddPadResizeRules(RuleTable* table) {
  AddRule(&table->default_domain, PadOp, {"Pad"});
  AddRule(&table->default_domain, ResizeOp, {"Resize", "Upsample"});
  AddRule(&table->default_domain, GridSampleOp, {"GridSample"});
}

}  // namespace memplan::formats::internal
