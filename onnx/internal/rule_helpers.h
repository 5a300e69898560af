// Private to onnx/: what the per-op shape rules share (the rules_*.cc files,
// one per op family), and the registration that shape_rules.cc builds its
// tables from. A rule reads a node's inputs through OnnxNodeContext and
// fills its outputs with these helpers:
//
//   absl::Status IdentityOp(OnnxNodeContext& c) {  // in a rules_*.cc
//     const OnnxValue* x = c.In(0);
//     if (!HasShape(x)) return FallBackToOnnx();
//     SetOut(c, 0, x->elem_type, x->dims);
//     PassElements(c);
//     return absl::OkStatus();
//   }
//   AddRule(&table->default_domain, IdentityOp, {"Identity"});
#ifndef MEMPLAN_ONNX_INTERNAL_RULE_HELPERS_H_
#define MEMPLAN_ONNX_INTERNAL_RULE_HELPERS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "onnx/dims.h"
#include "onnx/shape_rules.h"
#include "onnx/shapes.h"

namespace memplan::formats::internal {

// --- Registration ------------------------------------------------------------

// Op type -> the rule that sizes it, for one domain.
using OpRules = absl::flat_hash_map<std::string, OnnxShapeRule>;

// The rules of every domain memplan sizes itself.
struct RuleTable {
  OpRules default_domain;  // "" and "ai.onnx"
  OpRules microsoft;       // "com.microsoft": ONNX Runtime's contrib ops
                           // that are known ops renamed
};

// Registers `rule` for each of `ops`. REQUIRES: no op has a rule yet.
void AddRule(OpRules* rules, OnnxShapeRule rule,
             absl::Span<const char* const> ops);

// One per op family, each in its rules_<family>.cc.
void AddElementwiseRules(RuleTable* table);  // Add, Equal, And..., Where
void AddSameShapeRules(RuleTable* table);    // unary, normalizations, Cast
void AddTensorRules(RuleTable* table);       // Shape, Size, Constant...
void AddReshapeRules(RuleTable* table);      // Reshape, Squeeze, Transpose...
void AddSliceRules(RuleTable* table);        // Concat, Split, Slice
void AddGatherRules(RuleTable* table);       // Gather, Expand, Tile, Range...
void AddReduceRules(RuleTable* table);       // Reduce*, ArgMax, TopK
void AddConvRules(RuleTable* table);         // MatMul, Gemm, Conv, pools
void AddPadResizeRules(RuleTable* table);    // Pad, Resize, GridSample

// --- Element types and messages ---------------------------------------------

inline constexpr int32_t kFloat = 1;
inline constexpr int32_t kInt32 = 6;
inline constexpr int32_t kInt64 = 7;
inline constexpr int32_t kBool = 9;

// INVALID_ARGUMENT: "<node label>: <parts>".
template <typename... Parts>
absl::Status NodeError(const OnnxNodeContext& c, const Parts&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(c.label, ": ", parts...));
}

// Whether ONNX element type `t` is floating-point.
bool IsRealType(int32_t t);

// --- Shapes ------------------------------------------------------------------

// The dims as numbers when all are.
std::optional<std::vector<int64_t>> Concrete(const std::vector<SymDim>& dims);

// Row-major strides of a concrete shape, in elements.
std::vector<int64_t> Strides(const std::vector<int64_t>& shape);

// `axis` in [-rank, rank) made non-negative; false when out of range.
bool NormalizeAxis(int64_t axis, int64_t rank, int64_t* out);

inline bool HasShape(const OnnxValue* v) {
  return v != nullptr && v->has_shape;
}

// An output dim list from the integer elements of input `i` (a shape), in
// `out`; nullopt when its elements are unknown and its length too. A shape
// of more than kMaxOnnxRank dims is an error.
absl::Status ShapeFromInput(OnnxNodeContext& c, size_t i,
                            std::optional<std::vector<SymDim>>* out);

// INVALID_ARGUMENT naming the node when a dim is a negative number.
absl::Status CheckNotNegative(const OnnxNodeContext& c,
                              const std::vector<SymDim>& dims);

// The axes of Squeeze/Unsqueeze/Reduce*: an attribute before `input_opset`,
// input `input` from it. `known` false when the input's elements are
// unknown; `present` whether axes were given at all.
std::vector<int64_t> AxesOf(OnnxNodeContext& c, int input_opset, size_t input,
                            bool* present, bool* known);

// --- Outputs and elements ----------------------------------------------------

// Sets output `i` (when present) to `type` and `dims`.
void SetOut(OnnxNodeContext& c, size_t i, int32_t type,
            std::vector<SymDim> dims);

// Gives output `i` integer elements, when there are few enough.
void SetInts(OnnxNodeContext& c, size_t i, std::vector<SymDim> ints);

// Gives output `i` real elements, when there are few enough.
void SetReals(OnnxNodeContext& c, size_t i, std::vector<double> reals);

// Gives output `i` (when present) the elements `content`.
void SetContent(OnnxNodeContext& c, size_t i, OnnxContent content);

// The elements of `v` (known) as doubles when all are numbers.
std::optional<std::vector<double>> AsReals(const OnnxValue* v);

// A scalar or one-element tensor's integer, when known.
std::optional<SymDim> ScalarInt(const OnnxNodeContext& c, size_t i);

// Passes input 0's elements to output 0 unchanged (Reshape, Squeeze...).
void PassElements(OnnxNodeContext& c);

// Copies elements [from, from + count) of `src` to the end of `dst`.
void AppendRange(const OnnxContent& src, int64_t from, int64_t count,
                 OnnxContent* dst);

// Truthiness of an integer element: known when it is surely 0 or not.
std::optional<bool> IsNonZero(DimTable& t, const SymDim& d);

// --- Broadcasting ------------------------------------------------------------

// The numpy-style broadcast of the inputs' shapes; an error when two
// numbers differ and neither is 1.
absl::StatusOr<std::vector<SymDim>> Broadcast(
    OnnxNodeContext& c, const std::vector<const OnnxValue*>& ins);

// Calls `f(source_flat_per_input)` for every element of the broadcast
// output `out` (concrete), in row-major order.
void ForEachBroadcast(
    const std::vector<int64_t>& out,
    const std::vector<std::vector<int64_t>>& ins,
    const std::function<void(const std::vector<int64_t>&)>& f);

}  // namespace memplan::formats::internal

#endif  // MEMPLAN_ONNX_INTERNAL_RULE_HELPERS_H_
