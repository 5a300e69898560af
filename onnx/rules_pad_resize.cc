// Shape rules for ops that change spatial sizes: Pad (pads from an
// attribute or input, axes from opset 18), Resize and Upsample (scales or
// sizes), and GridSample (the grid's spatial dims).
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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
