// Internal to onnx/shapes.cc: the per-op shape rules (written by op family
// in onnx/rules_*.cc). A rule reads what is known of a node's inputs and
// fills its outputs (element type, shape and, for small tensors, elements),
// or returns FallBackToOnnx() to let ONNX's own inference function size that
// node.
#ifndef MEMPLAN_ONNX_SHAPE_RULES_H_
#define MEMPLAN_ONNX_SHAPE_RULES_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "onnx/dims.h"
#include "onnx/onnx_pb.h"
#include "onnx/shapes.h"

namespace memplan::formats {

// What a rule sees of one node.
struct OnnxNodeContext {
  const ::ONNX_NAMESPACE::NodeProto* node = nullptr;  // the node
  int opset = -1;               // of the node's domain; -1 when not imported
  absl::string_view label;      // "node 'n' (Op, #3)", for messages
  DimTable* table = nullptr;    // where dims live
  std::vector<OnnxValue*> in;   // per node input; null when omitted
  std::vector<OnnxValue*> out;  // per node output; null when omitted

  // Input `i`, or null when omitted or absent.
  const OnnxValue* In(size_t i) const {
    return i < in.size() ? in[i] : nullptr;
  }
  // Output `i`, or null when omitted or absent.
  OnnxValue* Out(size_t i) { return i < out.size() ? out[i] : nullptr; }

  const ::ONNX_NAMESPACE::AttributeProto* Attr(absl::string_view name) const;
  int64_t Int(absl::string_view name, int64_t fallback) const;
  std::vector<int64_t> Ints(absl::string_view name) const;  // empty: absent
  float Float(absl::string_view name, float fallback) const;
  std::string Str(absl::string_view name, absl::string_view fallback) const;

  // A new unknown dim made by this node.
  SymDim UnknownDim(absl::string_view reason, bool data_dependent,
                    const std::set<AtomId>& depends_on);
  // An unknown dim standing for what the unknown elements of input `i`
  // would have given: data-dependent when they come from data, else
  // depending on the dims they would be computed from.
  SymDim FromUnknownElements(size_t i);
  // The atoms that what input `i` holds depends on: the leaves of its dims
  // and known elements, and its taint.
  std::set<AtomId> InputLeaves(size_t i) const;
  // The integer elements of input `i` when all are known; else null.
  const std::vector<SymDim>* Ints(size_t i) const;
  // The elements of input `i` as doubles when all are known numbers.
  std::optional<std::vector<double>> Reals(size_t i) const;
};

// The sentinel status a rule returns to let ONNX's inference run instead.
absl::Status FallBackToOnnx();
bool IsFallBack(const absl::Status& s);

using OnnxShapeRule = absl::Status (*)(OnnxNodeContext&);

// The rule for `op_type` of `domain` ("" for the default domain), or null.
OnnxShapeRule FindOnnxShapeRule(absl::string_view domain,
                                absl::string_view op_type);

// Whether the op's output sizes depend on its input data (NonZero...).
bool OnnxOpIsDataDependent(absl::string_view op_type);

// Helpers shared with shapes.cc.
// The number of elements of `dims` when all are numbers (and no overflow).
std::optional<int64_t> OnnxElementCount(const std::vector<SymDim>& dims);
// Reads an initializer or Constant value: type, shape and (for small
// tensors whose data is in the model) elements. INVALID_ARGUMENT naming
// `label` and the tensor for negative dims.
absl::Status LoadOnnxTensor(const ::ONNX_NAMESPACE::TensorProto& t,
                            OnnxValue* v, absl::string_view label);
// Sets an output's type and shape; clears what it held.
void SetOnnxShape(OnnxValue* v, int32_t elem_type, std::vector<SymDim> dims);

}  // namespace memplan::formats

#endif  // MEMPLAN_ONNX_SHAPE_RULES_H_
