// Shape rules for linear algebra, convolution and pooling: MatMul and its
// quantized forms, Gemm, Conv, ConvTranspose, the pools and the global pools.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "onnx/internal/rule_helpers.h"

namespace memplan::formats::internal {
namespace {

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
    // What WindowOutput computes, in 64 bits: the dilated kernel's span and
    // the two pads of the dim.
    int64_t span = 0, pads = 0;
    if (__builtin_mul_overflow(w.dilations[i], w.kernel[i] - 1, &span) ||
        __builtin_add_overflow(span, 1, &span) ||
        __builtin_add_overflow(w.pads[i], w.pads[i + spatial], &pads)) {
      return NodeError(c, "a dilated kernel or its pads pass 64 bits");
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

}  // namespace

void AddConvRules(RuleTable* table) {
  AddRule(&table->default_domain, MatMulOp,
          {"MatMul", "MatMulInteger", "QLinearMatMul"});
  AddRule(&table->default_domain, GemmOp, {"Gemm"});
  AddRule(&table->default_domain, ConvOp,
          {"Conv", "ConvInteger", "QLinearConv", "DeformConv"});
  AddRule(&table->default_domain, ConvTransposeOp, {"ConvTranspose"});
  AddRule(&table->default_domain, PoolOp, {"MaxPool", "AveragePool", "LpPool"});
  AddRule(&table->default_domain, GlobalPoolOp,
          {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"});
  AddRule(&table->microsoft, MatMulOp, {"FusedMatMul"});
  AddRule(&table->microsoft, ConvOp, {"FusedConv"});
}

}  // namespace memplan::formats::internal
