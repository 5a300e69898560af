// Shape evaluation beyond ONNX's inference, rule by rule, on small models
// laid out as torch.onnx (dynamic batch and sequence axes) and paddle2onnx
// emit them: shape subgraphs feeding Reshape, Expand, Range, Slice, Pad.
// Each test checks what a user sees (the sizes memplan plans, or the
// error) and, where dims have no values, the symbolic shapes it carries.
#include "onnx/shapes.h"

#include <functional>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx/defs/schema.h"
#include "onnx/import.h"
#include "onnx/shape_inference/implementation.h"
#include "onnx/testing/onnx_builder.h"
#include "planner/planner.h"
#include "proto/convert.h"

namespace memplan::formats {
namespace {

namespace onnx = ::ONNX_NAMESPACE;

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

constexpr int kFloat = kOnnxFloat;
constexpr int kInt64 = kOnnxInt64;

using Sizes = std::map<std::string, int64_t>;

// Imports as `memplan plan` does; the graph must also plan (and verify).
Sizes Import(const OnnxTestModel& m, const std::map<std::string, int64_t>& dims,
             const std::map<std::string, std::vector<int64_t>>& shapes = {}) {
  ModelOptions options;
  options.dims = dims;
  options.shapes = shapes;
  absl::StatusOr<ImportedModel> in = ImportOnnx(m.Bytes(), "t.onnx", options);
  EXPECT_TRUE(in.ok()) << in.status();
  if (!in.ok()) return {};
  planner::PlanOptions plan_options;
  absl::StatusOr<planner::PlanResult> plan = planner::PlanGraph(
      api::GraphFromProto(*in->graph), plan_options, nullptr, nullptr);
  EXPECT_TRUE(plan.ok()) << plan.status();
  Sizes sizes;
  for (const v1::Tensor& t : in->graph->tensors())
    sizes[t.name()] = t.size_bytes();
  return sizes;
}

// The import's error message.
std::string ImportError(
    const OnnxTestModel& m, const std::map<std::string, int64_t>& dims = {},
    const std::map<std::string, std::vector<int64_t>>& shapes = {}) {
  ModelOptions options;
  options.dims = dims;
  options.shapes = shapes;
  absl::StatusOr<ImportedModel> in = ImportOnnx(m.Bytes(), "t.onnx", options);
  EXPECT_FALSE(in.ok());
  if (in.ok()) return "";
  EXPECT_EQ(in.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(in.status().message());
}

// The symbolic dims of value `name` when no dim has a value.
std::vector<std::string> SymbolicDims(const OnnxTestModel& m,
                                      const std::string& name) {
  onnx::ModelProto model = m.proto();
  onnx::shape_inference::InferShapes(model);
  absl::StatusOr<OnnxEvaluation> e =
      EvaluateOnnxShapes(model, OnnxEvalOptions(), "t.onnx");
  EXPECT_TRUE(e.ok()) << e.status();
  if (!e.ok()) return {};
  for (const OnnxValue& v : e->values) {
    if (v.name != name) continue;
    std::vector<std::string> dims;
    for (const SymDim& d : v.dims) dims.push_back(e->table.ToString(d));
    return dims;
  }
  ADD_FAILURE() << "no value " << name;
  return {};
}

// torch.onnx with dynamic_axes: x[batch, seq, 768] -> view(b, s, 12, 64).
OnnxTestModel TorchAttentionReshape() {
  OnnxTestModel m(13);
  m.graph()
      .Input("x", kFloat, {"batch", "seq", "768"})
      .Add("Shape", {"x"}, {"shape"})
      .Ints("zero", {0}, true)
      .Ints("one", {1}, true)
      .Add("Gather", {"shape", "zero"}, {"b"})
      .Add("Gather", {"shape", "one"}, {"s"})
      .Ints("axes", {0})
      .Add("Unsqueeze", {"b", "axes"}, {"b1"})
      .Add("Unsqueeze", {"s", "axes"}, {"s1"})
      .Ints("heads", {12, 64});
  m.graph().Node("Concat", {"b1", "s1", "heads"}, {"target"}).Int("axis", 0);
  m.graph().Add("Reshape", {"x", "target"}, {"split"}, "reshape");
  m.graph().Node("Transpose", {"split"}, {"y"}).Ints("perm", {0, 2, 1, 3});
  m.graph().Output("y");
  return m;
}

TEST(OnnxShapesTest, TorchShapeGatherConcatReshape) {
  OnnxTestModel m = TorchAttentionReshape();
  Sizes s = Import(m, {{"batch", 2}, {"seq", 7}});
  EXPECT_EQ(s["split"], 2 * 7 * 768 * 4);
  EXPECT_EQ(s["y"], 2 * 7 * 768 * 4);
  EXPECT_EQ(s["target"], 4 * 8);  // a shape tensor is an activation
  EXPECT_THAT(SymbolicDims(m, "y"), ElementsAre("batch", "12", "seq", "64"));
  EXPECT_THAT(SymbolicDims(m, "target"), ElementsAre("4"));
}

// A target shape whose length is known but not its elements gives the
// output's rank: a length past any real rank is an error naming the node,
// not a billion unknown dims (found by onnx_import_fuzz: minutes and GBs).
TEST(OnnxShapesTest, AShapeOfTooManyDimsIsAnError) {
  OnnxTestModel m(13);
  m.graph()
      .Input("x", kFloat, {"4"})
      .Input("target", kOnnxInt64, {"1000000000"})
      .Add("Reshape", {"x", "target"}, {"y"}, "reshape")
      .Output("y");
  EXPECT_THAT(ImportError(m),
              AllOf(HasSubstr("reshape"),
                    HasSubstr("makes a shape of 1000000000 dims from "
                              "'target' (at most 64)")));
}

// paddle2onnx: Reshape with 0 (copy) and -1 (infer) from a Constant.
TEST(OnnxShapesTest, PaddleReshapeZeroAndMinusOne) {
  OnnxTestModel m(11);
  m.graph()
      .Input("x", kFloat, {"batch", "seq", "768"})
      .Ints("shape", {0, -1, 64})
      .Add("Reshape", {"x", "shape"}, {"y"})
      .Ints("flat", {-1})
      .Add("Reshape", {"y", "flat"}, {"z"})
      .Output("z");
  Sizes s = Import(m, {{"batch", 3}, {"seq", 5}});
  EXPECT_EQ(s["y"], 3 * 5 * 768 * 4);
  EXPECT_THAT(SymbolicDims(m, "y"), ElementsAre("batch", "12*seq", "64"));
  EXPECT_THAT(SymbolicDims(m, "z"), ElementsAre("768*batch*seq"));
}

// paddle2onnx emulates Reshape's 0 with Equal/Where on the shapes.
TEST(OnnxShapesTest, PaddleEqualWhereOnShapes) {
  OnnxTestModel m(13);
  m.graph()
      .Input("x", kFloat, {"batch", "seq", "8"})
      .Add("Shape", {"x"}, {"in_shape"})
      .Ints("want", {0, 0, 2, 4})
      .Ints("zeros", {0, 0, 0, 0})
      .Add("Equal", {"want", "zeros"}, {"is_zero"})
      .Ints("pad", {1});
  m.graph().Node("Concat", {"in_shape", "pad"}, {"in_shape4"}).Int("axis", 0);
  m.graph()
      .Add("Where", {"is_zero", "in_shape4", "want"}, {"target"})
      .Add("Not", {"is_zero"}, {"not_zero"})
      .Add("Reshape", {"x", "target"}, {"y"})
      .Output("y")
      .Output("not_zero");
  Sizes s = Import(m, {{"batch", 2}, {"seq", 3}});
  EXPECT_EQ(s["y"], 2 * 3 * 8 * 4);
  EXPECT_THAT(SymbolicDims(m, "y"), ElementsAre("batch", "seq", "2", "4"));
}

TEST(OnnxShapesTest, ShapeWithStartAndEndSizeAndCast) {
  OnnxTestModel m(15);
  m.graph().Input("x", kFloat, {"batch", "seq", "4"}).Add("Size", {"x"}, {"n"});
  m.graph().Node("Shape", {"x"}, {"tail"}).Int("start", -2);
  m.graph().Node("Cast", {"n"}, {"nf"}).Int("to", kFloat);
  m.graph()
      .Ints("half_axes", {0})
      .Add("Unsqueeze", {"n", "half_axes"}, {"n1"})
      .Add("Reshape", {"x", "n1"}, {"flat"})
      .Ints("infer", {-1});
  m.graph().Node("Concat", {"infer", "tail"}, {"target"}).Int("axis", 0);
  m.graph()
      .Add("Reshape", {"flat", "target"}, {"back"})
      .Output("back")
      .Output("nf");
  Sizes s = Import(m, {{"batch", 2}, {"seq", 5}});
  EXPECT_EQ(s["flat"], 2 * 5 * 4 * 4);
  EXPECT_EQ(s["back"], 2 * 5 * 4 * 4);
  EXPECT_EQ(s["tail"], 2 * 8);
  EXPECT_THAT(SymbolicDims(m, "flat"), ElementsAre("4*batch*seq"));
  EXPECT_THAT(SymbolicDims(m, "back"), ElementsAre("batch", "seq", "4"));
}

// Upsampling as torch.onnx writes it with a float scale factor:
// Cast(Shape) -> Mul(2.0) -> Floor -> Cast -> Concat -> Resize sizes.
TEST(OnnxShapesTest, FloatArithmeticOnShapesFeedsResize) {
  OnnxTestModel m(13);
  auto g = m.graph();
  g.Input("x", kFloat, {"1", "3", "h", "w"}).Add("Shape", {"x"}, {"shape"});
  g.Ints("starts", {2}).Ints("ends", {4});
  g.Add("Slice", {"shape", "starts", "ends"}, {"hw"});
  g.Node("Cast", {"hw"}, {"hwf"}).Int("to", kFloat);
  onnx::TensorProto scale;
  scale.set_data_type(kFloat);
  scale.add_float_data(1.5f);
  g.Node("Constant", {}, {"scale"}).Tensor("value", scale);
  g.Add("Mul", {"hwf", "scale"}, {"scaled"}).Add("Floor", {"scaled"}, {"fl"});
  g.Node("Cast", {"fl"}, {"hw2"}).Int("to", kInt64);
  g.Ints("nc", {1, 3});
  g.Node("Concat", {"nc", "hw2"}, {"sizes"}).Int("axis", 0);
  g.Add("Resize", {"x", "", "", "sizes"}, {"y"}).Output("y");
  Sizes s = Import(m, {{"h", 10}, {"w", 7}});
  EXPECT_EQ(s["y"], 1 * 3 * 15 * 10 * 4);
}

TEST(OnnxShapesTest, ResizeByIntegerScalesStaysSymbolic) {
  OnnxTestModel m(13);
  auto g = m.graph();
  g.Input("x", kFloat, {"1", "3", "h", "w"});
  onnx::TensorProto scales;
  scales.set_data_type(kFloat);
  scales.add_dims(4);
  for (float f : {1.f, 1.f, 2.f, 0.5f}) scales.add_float_data(f);
  g.Node("Constant", {}, {"scales"}).Tensor("value", scales);
  g.Add("Resize", {"x", "", "scales"}, {"y"}).Output("y");
  EXPECT_THAT(SymbolicDims(m, "y"),
              ElementsAre("1", "3", "2*h", HasSubstr("floor((w)/(2))")));
  EXPECT_EQ(Import(m, {{"h", 5}, {"w", 9}})["y"], 3 * 10 * 4 * 4);
}

TEST(OnnxShapesTest, SqueezeUnsqueezeAttributesAndInputs) {
  for (int opset : {11, 13}) {
    OnnxTestModel m(opset);
    auto g = m.graph();
    g.Input("x", kFloat, {"batch", "1", "seq"});
    if (opset < 13) {
      g.Node("Squeeze", {"x"}, {"sq"}).Ints("axes", {1});
      g.Node("Unsqueeze", {"sq"}, {"y"}).Ints("axes", {0, -1});
    } else {
      g.Ints("a1", {1}).Add("Squeeze", {"x", "a1"}, {"sq"});
      g.Ints("a2", {0, -1}).Add("Unsqueeze", {"sq", "a2"}, {"y"});
    }
    g.Output("y");
    EXPECT_THAT(SymbolicDims(m, "y"), ElementsAre("1", "batch", "seq", "1"))
        << opset;
    EXPECT_EQ(Import(m, {{"batch", 2}, {"seq", 3}})["y"], 24) << opset;
  }
}

TEST(OnnxShapesTest, FlattenAndTranspose) {
  OnnxTestModel m(13);
  auto g = m.graph();
  g.Input("x", kFloat, {"batch", "3", "h", "w"});
  g.Node("Flatten", {"x"}, {"f"}).Int("axis", -2);
  g.Node("Transpose", {"f"}, {"t"});
  g.Output("t");
  EXPECT_THAT(SymbolicDims(m, "f"), ElementsAre("3*batch", "h*w"));
  EXPECT_THAT(SymbolicDims(m, "t"), ElementsAre("h*w", "3*batch"));
}

// An attention mask as torch.onnx exports it: Range over the sequence,
// compared, expanded to [batch, 1, seq, seq].
TEST(OnnxShapesTest, RangeExpandAndConstantOfShape) {
  OnnxTestModel m(13);
  auto g = m.graph();
  g.Input("ids", kInt64, {"batch", "seq"}).Add("Shape", {"ids"}, {"shape"});
  g.Ints("one", {1}, true).Ints("zero", {0}, true);
  g.Add("Gather", {"shape", "one"}, {"s"})
      .Add("Gather", {"shape", "zero"}, {"b"});
  g.Add("Range", {"zero", "s", "one"}, {"pos"});
  g.Ints("ax", {0}).Add("Unsqueeze", {"b", "ax"}, {"b1"});
  g.Add("Unsqueeze", {"s", "ax"}, {"s1"});
  g.Ints("c1", {1});
  g.Node("Concat", {"b1", "c1", "s1", "s1"}, {"mask_shape"}).Int("axis", 0);
  g.Node("ConstantOfShape", {"mask_shape"}, {"mask"})
      .Tensor("value", OnnxFloatTensor({1}));
  g.Add("Expand", {"pos", "mask_shape"}, {"pos4"});
  g.Output("mask").Output("pos4");
  EXPECT_THAT(SymbolicDims(m, "pos"), ElementsAre("seq"));
  EXPECT_THAT(SymbolicDims(m, "mask"), ElementsAre("batch", "1", "seq", "seq"));
  Sizes s = Import(m, {{"batch", 2}, {"seq", 6}});
  EXPECT_EQ(s["pos"], 6 * 8);
  EXPECT_EQ(s["mask"], 2 * 6 * 6 * 4);
  EXPECT_EQ(s["pos4"], 2 * 6 * 6 * 8);
}

TEST(OnnxShapesTest, TileByRepeatsFromShapes) {
  OnnxTestModel m(13);
  auto g = m.graph();
  g.Input("x", kFloat, {"batch", "4"}).Input("k", kFloat, {"n"});
  g.Add("Shape", {"k"}, {"n1"}).Ints("one", {1});
  g.Node("Concat", {"n1", "one"}, {"reps"}).Int("axis", 0);
  g.Add("Tile", {"x", "reps"}, {"y"}).Output("y");
  EXPECT_THAT(SymbolicDims(m, "y"), ElementsAre("batch*n", "4"));
  EXPECT_EQ(Import(m, {{"batch", 2}, {"n", 3}})["y"], 2 * 3 * 4 * 4);
}

// Integer arithmetic on shape tensors with broadcasting: torch computes
// head sizes as Div(Gather(Shape), 12); Mod, Min, Max likewise.
TEST(OnnxShapesTest, IntegerArithmeticOnShapes) {
  OnnxTestModel m(13);
  auto g = m.graph();
  g.Input("x", kFloat, {"batch", "seq", "768"}).Add("Shape", {"x"}, {"shape"});
  g.Ints("div", {1, 1, 12});
  g.Add("Div", {"shape", "div"}, {"d"});
  g.Ints("k", {2}, true);
  g.Add("Mul", {"d", "k"}, {"m"});              // [2b, 2s, 128]
  g.Add("Sub", {"m", "d"}, {"back"});           // [b, s, 64]
  g.Ints("cap", {2147483647, 2147483647, 32});  // paddle's INT32_MAX
  g.Add("Min", {"back", "cap"}, {"mn"});        // [b, s, 32]
  g.Ints("floor", {1, 1, 1});
  g.Add("Max", {"mn", "floor"}, {"mx"});  // [b, s, 32]
  g.Ints("mod", {7, 7, 20});
  g.Add("Mod", {"mx", "mod"}, {"md"});  // third: 32 mod 20 = 12
  g.Ints("two", {0, 1});
  g.Add("Gather", {"mx", "two"}, {"bs"});
  g.Ints("last", {2});
  g.Add("Gather", {"md", "last"}, {"twelve"});
  g.Node("Concat", {"bs", "twelve"}, {"target"}).Int("axis", 0);
  g.Ints("full", {-1});
  g.Add("Reshape", {"x", "full"}, {"flat"});
  g.Add("ConstantOfShape", {"target"}, {"y"}).Output("y").Output("flat");
  EXPECT_THAT(SymbolicDims(m, "y"), ElementsAre("batch", "seq", "12"));
  EXPECT_EQ(Import(m, {{"batch", 2}, {"seq", 5}})["y"], 2 * 5 * 12 * 4);
}

TEST(OnnxShapesTest, ReduceProdAndSumOnShapes) {
  OnnxTestModel m(13);
  auto g = m.graph();
  g.Input("x", kFloat, {"batch", "seq", "8"}).Add("Shape", {"x"}, {"shape"});
  g.Node("ReduceProd", {"shape"}, {"n"}).Int("keepdims", 1);
  g.Add("Reshape", {"x", "n"}, {"flat"});
  g.Ints("axes", {0});
  g.Node("ReduceSum", {"shape", "axes"}, {"sum"}).Int("keepdims", 1);
  g.Add("ConstantOfShape", {"sum"}, {"y"}).Output("flat").Output("y");
  EXPECT_THAT(SymbolicDims(m, "flat"), ElementsAre("8*batch*seq"));
  EXPECT_THAT(SymbolicDims(m, "y"), ElementsAre("batch + seq + 8"));
  Sizes s = Import(m, {{"batch", 2}, {"seq", 3}});
  EXPECT_EQ(s["y"], (2 + 3 + 8) * 4);
}

TEST(OnnxShapesTest, SplitBySizesEquallyAndByNumOutputs) {
  OnnxTestModel m13(13);
  auto g = m13.graph();
  g.Input("x", kFloat, {"batch", "12"}).Ints("sizes", {2, 10});
  g.Node("Split", {"x", "sizes"}, {"a", "b"}).Int("axis", 1);
  g.Node("Split", {"x"}, {"c", "d", "e"}).Int("axis", 1);
  g.Output("a").Output("b").Output("c").Output("d").Output("e");
  Sizes s = Import(m13, {{"batch", 1}});
  EXPECT_EQ(s["a"], 8);
  EXPECT_EQ(s["b"], 40);
  EXPECT_EQ(s["e"], 16);
  // Opset 18: num_outputs, the last part smaller; ONNX 1.12 does not know
  // opset 18's Split, memplan's rule sizes it.
  OnnxTestModel m18(18);
  m18.proto().set_ir_version(8);
  auto h = m18.graph();
  h.Input("x", kFloat, {"batch", "10"});
  h.Node("Split", {"x"}, {"p", "q", "r"}).Int("axis", 1).Int("num_outputs", 3);
  h.Output("p").Output("q").Output("r");
  Sizes t = Import(m18, {{"batch", 1}});
  EXPECT_EQ(t["p"], 16);
  EXPECT_EQ(t["r"], 8);
}

TEST(OnnxShapesTest, BroadcastingElementwiseOps) {
  OnnxTestModel m(13);
  m.graph()
      .Input("a", kFloat, {"batch", "1", "seq"})
      .Input("b", kFloat, {"heads", "1"})
      .Add("Add", {"a", "b"}, {"c"})
      .Add("Where", {"c", "a", "b"}, {"w"})
      .Output("c");
  EXPECT_THAT(SymbolicDims(m, "c"), ElementsAre("batch", "heads", "seq"));
  EXPECT_EQ(Import(m, {{"batch", 2}, {"seq", 3}, {"heads", 4}})["c"],
            2 * 4 * 3 * 4);
  OnnxTestModel bad(13);
  bad.graph()
      .Input("a", kFloat, {"3"})
      .Input("b", kFloat, {"4"})
      .Add("Add", {"a", "b"}, {"c"}, "add")
      .Output("c");
  EXPECT_THAT(ImportError(bad), AllOf(HasSubstr("node 'add'"),
                                      HasSubstr("cannot broadcast dim 3")));
}

TEST(OnnxShapesTest, MatMulAndGemm) {
  OnnxTestModel m(13);
  auto g = m.graph();
  g.Input("q", kFloat, {"batch", "heads", "seq", "64"})
      .Input("k", kFloat, {"batch", "heads", "64", "seq"})
      .Input("v", kFloat, {"64"})
      .Input("x", kFloat, {"batch", "32"})
      .FloatInitializer("w", {16, 32});
  g.Add("MatMul", {"q", "k"}, {"scores"}).Add("MatMul", {"q", "v"}, {"qv"});
  g.Node("Gemm", {"x", "w"}, {"y"}).Int("transB", 1);
  g.Output("scores").Output("qv").Output("y");
  EXPECT_THAT(SymbolicDims(m, "scores"),
              ElementsAre("batch", "heads", "seq", "seq"));
  EXPECT_THAT(SymbolicDims(m, "qv"), ElementsAre("batch", "heads", "seq"));
  EXPECT_THAT(SymbolicDims(m, "y"), ElementsAre("batch", "16"));
}

TEST(OnnxShapesTest, ConvAndPoolOutputSizes) {
  OnnxTestModel m(13);
  auto g = m.graph();
  g.Input("x", kFloat, {"batch", "3", "h", "w"})
      .FloatInitializer("w1", {8, 3, 3, 3});
  g.Node("Conv", {"x", "w1"}, {"c1"})
      .Ints("strides", {2, 2})
      .Ints("pads", {1, 1, 1, 1});
  g.FloatInitializer("w2", {8, 8, 3, 3});
  g.Node("Conv", {"c1", "w2"}, {"c2"})
      .Str("auto_pad", "SAME_UPPER")
      .Ints("strides", {2, 2});
  g.Node("MaxPool", {"c2"}, {"p", "idx"})
      .Ints("kernel_shape", {3, 3})
      .Ints("strides", {2, 2})
      .Int("ceil_mode", 1);
  g.FloatInitializer("wt", {8, 4, 2, 2});
  g.Node("ConvTranspose", {"p", "wt"}, {"up"}).Ints("strides", {2, 2});
  g.Add("GlobalAveragePool", {"up"}, {"gap"});
  g.Output("gap").Output("idx");
  Sizes s = Import(m, {{"batch", 1}, {"h", 64}, {"w", 50}});
  // 64x50 -> conv s2 p1 k3: 32x25 -> same s2: 16x13 -> pool ceil: 8x6
  // (ceil(13/2)=7? (13-3)/2=5, ceil -> 5 +1 = 6) -> transpose x2: 16x12.
  EXPECT_EQ(s["c1"], 8 * 32 * 25 * 4);
  EXPECT_EQ(s["c2"], 8 * 16 * 13 * 4);
  EXPECT_EQ(s["p"], 8 * 8 * 6 * 4);
  EXPECT_EQ(s["idx"], 8 * 8 * 6 * 8);
  EXPECT_EQ(s["up"], 4 * 16 * 12 * 4);
  EXPECT_EQ(s["gap"], 4 * 4);
  EXPECT_THAT(SymbolicDims(m, "c2"),
              ElementsAre("batch", "8", HasSubstr("h"), HasSubstr("w")));
}

// torch's F.pad: pads computed from shapes, reversed by a Slice with step
// -1, fed to Pad (the pattern of silero VAD's STFT).
TEST(OnnxShapesTest, TorchPadWithReversedPadsFromShapes) {
  OnnxTestModel m(13);
  auto g = m.graph();
  g.Input("x", kFloat, {"batch", "seq"});
  // F.pad(x, (0, 64)): torch's order, last dim first, zero-extended.
  g.Ints("p", {0, 64, 0, 0}).Ints("shape2", {-1, 2});
  g.Add("Reshape", {"p", "shape2"}, {"p2"});
  g.Ints("st", {-1})
      .Ints("en", {-9223372036854775807})
      .Ints("ax", {0})
      .Ints("sp", {-1});
  g.Add("Slice", {"p2", "st", "en", "ax", "sp"}, {"rev"});
  g.Node("Transpose", {"rev"}, {"tr"}).Ints("perm", {1, 0});
  g.Ints("flat", {-1}).Add("Reshape", {"tr", "flat"}, {"pads"});
  g.Node("Pad", {"x", "pads"}, {"y"}).Str("mode", "reflect");
  g.Output("y");
  EXPECT_THAT(SymbolicDims(m, "y"), ElementsAre("batch", "seq + 64"));
  EXPECT_EQ(Import(m, {{"batch", 1}, {"seq", 512}})["y"], 576 * 4);
}

TEST(OnnxShapesTest, SliceClampsAndSteps) {
  OnnxTestModel m(13);
  auto g = m.graph();
  g.Input("x", kFloat, {"batch", "seq", "10"});
  g.Ints("s", {1, -3}).Ints("e", {9223372036854775807, 10}).Ints("a", {1, 2});
  g.Add("Slice", {"x", "s", "e", "a"}, {"tail"});
  g.Ints("s2", {8}).Ints("e2", {0}).Ints("a2", {2}).Ints("st2", {-3});
  g.Add("Slice", {"x", "s2", "e2", "a2", "st2"}, {"back"});
  g.Output("tail").Output("back");
  EXPECT_THAT(SymbolicDims(m, "tail"), ElementsAre("batch", "seq - 1", "3"));
  EXPECT_THAT(SymbolicDims(m, "back"), ElementsAre("batch", "seq", "3"));
  EXPECT_EQ(Import(m, {{"batch", 1}, {"seq", 5}})["tail"], 4 * 3 * 4);
}

TEST(OnnxShapesTest, TopKByAConstantK) {
  OnnxTestModel m(13);
  auto g = m.graph();
  g.Input("x", kFloat, {"batch", "100"}).Ints("k", {5});
  g.Add("TopK", {"x", "k"}, {"v", "i"}).Output("v").Output("i");
  EXPECT_EQ(Import(m, {{"batch", 2}})["i"], 2 * 5 * 8);
}

// LSTM has no rule here: ONNX's own inference sizes it, fed the shapes
// known so far, symbolic dims included.
TEST(OnnxShapesTest, OpsWithoutARuleUseOnnxInferenceOnKnownShapes) {
  OnnxTestModel m(13);
  auto g = m.graph();
  g.Input("x", kFloat, {"seq", "batch", "16"})
      .FloatInitializer("w", {1, 128, 16})
      .FloatInitializer("r", {1, 128, 32});
  g.Node("LSTM", {"x", "w", "r"}, {"y", "h", "c"}).Int("hidden_size", 32);
  g.Output("y");
  EXPECT_THAT(SymbolicDims(m, "y"), ElementsAre("seq", "1", "batch", "32"));
  EXPECT_EQ(Import(m, {{"seq", 10}, {"batch", 2}})["y"], 10 * 2 * 32 * 4);
}

TEST(OnnxShapesTest, DataDependentSizesNameTheOp) {
  OnnxTestModel m(13);
  auto g = m.graph();
  g.Input("x", kFloat, {"4", "5"}).Add("NonZero", {"x"}, {"nz"}, "nonzero");
  g.Add("Transpose", {"nz"}, {"coords"}).Output("coords");
  EXPECT_THAT(ImportError(m), AllOf(HasSubstr("nz ("), HasSubstr("coords ("),
                                    HasSubstr("node 'nonzero' (NonZero, #0)"),
                                    HasSubstr("depend")));
  EXPECT_EQ(Import(m, {}, {{"nz", {2, 7}}})["coords"], 7 * 2 * 8);

  // A Reshape by a shape that is data: the error names the Reshape.
  OnnxTestModel r(13);
  r.graph()
      .Input("x", kFloat, {"2", "6"})
      .Input("shape", kInt64, {"2"})
      .Add("Reshape", {"x", "shape"}, {"y"}, "reshape")
      .Output("y");
  EXPECT_THAT(ImportError(r),
              AllOf(HasSubstr("y ("), HasSubstr("node 'reshape'"),
                    HasSubstr("'shape', which are computed from data")));
}

TEST(OnnxShapesTest, EveryMissingDimIsListedAtOnce) {
  OnnxTestModel m = TorchAttentionReshape();
  EXPECT_THAT(ImportError(m),
              HasSubstr("symbolic dims without a value: batch, seq"));
  EXPECT_THAT(ImportError(m, {{"batch", 1}}),
              AllOf(HasSubstr("symbolic dims without a value: seq"),
                    Not(HasSubstr("batch,"))));
}

// Hostile models: counts far past any memory are errors naming the node,
// computed without allocating anything of that size.
TEST(OnnxShapesTest, HugeRangeConstantOfShapeAndReshapeAreErrors) {
  OnnxTestModel range(13);
  range.graph()
      .Ints("start", {0}, true)
      .Ints("limit", {int64_t{1} << 50}, true)
      .Ints("delta", {1}, true)
      .Add("Range", {"start", "limit", "delta"}, {"r"}, "range")
      .Output("r");
  EXPECT_THAT(ImportError(range),
              AllOf(HasSubstr("node 'range' (Range"), HasSubstr("1 TiB")));

  OnnxTestModel fill(13);
  fill.graph()
      .Ints("shape", {int64_t{1} << 20, int64_t{1} << 20, 4096})
      .Add("ConstantOfShape", {"shape"}, {"big"}, "fill")
      .Output("big");
  EXPECT_THAT(
      ImportError(fill),
      AllOf(HasSubstr("node 'fill' (ConstantOfShape"), HasSubstr("1 TiB")));

  OnnxTestModel overflow(13);
  overflow.graph()
      .Ints("shape", {int64_t{1} << 40, int64_t{1} << 40})
      .Add("ConstantOfShape", {"shape"}, {"big"}, "fill")
      .Output("big");
  EXPECT_THAT(ImportError(overflow), HasSubstr("node 'fill'"));

  OnnxTestModel reshape(13);
  reshape.graph()
      .Input("x", kFloat, {"2", "6"})
      .Ints("shape", {int64_t{1} << 40})
      .Add("Reshape", {"x", "shape"}, {"y"}, "reshape")
      .Output("y");
  EXPECT_THAT(ImportError(reshape),
              AllOf(HasSubstr("node 'reshape' (Reshape"),
                    HasSubstr("cannot reshape 12 elements")));
}

// Shape arithmetic that squares itself 60 times: with the dim unknown the
// expression is capped (the error names the dim), with it known the
// arithmetic overflows and the error names the node. A Concat of 20,000
// shape tensors is folded without copying them all for every step.
TEST(OnnxShapesTest, HostileShapeArithmeticStaysBounded) {
  OnnxTestModel m(13);
  auto g = m.graph();
  g.Input("x", kFloat, {"batch"}).Add("Shape", {"x"}, {"d0"}).Ints("one", {1});
  for (int i = 0; i < 60; ++i) {
    const std::string d = "d" + std::to_string(i);
    g.Add("Add", {d, "one"}, {d + "p"});
    g.Add("Mul", {d, d + "p"}, {"d" + std::to_string(i + 1)},
          "mul" + std::to_string(i));
  }
  g.Add("ConstantOfShape", {"d60"}, {"y"}).Output("y");
  EXPECT_THAT(ImportError(m),
              HasSubstr("symbolic dims without a value: batch"));
  EXPECT_THAT(ImportError(m, {{"batch", 2}}),
              AllOf(HasSubstr("(Mul"), HasSubstr("overflows 64 bits")));

  OnnxTestModel wide(13);
  auto w = wide.graph();
  w.Input("x", kFloat, {"batch", "2"}).Add("Shape", {"x"}, {"s"});
  std::vector<std::string> parts(20000, "s");
  w.Node("Concat", parts, {"long"}).Int("axis", 0);
  w.Add("Size", {"long"}, {"n"}).Output("n");
  EXPECT_EQ(Import(wide, {{"batch", 1}})["long"], 40000 * 8);

  // Outputs left unnamed (as optional outputs are) on every folding rule.
  OnnxTestModel omitted(13);
  auto o = omitted.graph();
  o.Input("x", kFloat, {"2", "3"}).Add("Shape", {"x"}, {"s"});
  o.Ints("i0", {0}).Ints("o1", {1}).Ints("one", {1}, true);
  o.Ints("z", {0}, true);
  o.Node("Concat", {"s", "s"}, {""}).Int("axis", 0);
  o.Add("Transpose", {"s"}, {""}).Add("Gather", {"s", "i0"}, {""});
  o.Add("Slice", {"s", "i0", "one"}, {""}).Add("Tile", {"s", "one"}, {""});
  o.Add("Expand", {"s", "o1"}, {""}).Add("Split", {"s"}, {"", ""});
  o.Add("Range", {"z", "one", "one"}, {""}).Add("Reshape", {"s", "i0"}, {""});
  o.Add("NonZero", {"s"}, {""});
  o.Add("Relu", {"x"}, {"y"}).Output("y");
  EXPECT_EQ(Import(omitted, {})["y"], 24);
}

// Opset 18 changed Reduce*, Pad and Split; ONNX 1.12 stops at opset 17, so
// its older schemas would size them wrongly (ReduceMean-13 ignores an axes
// input and reduces everything). memplan's rules size them instead.
TEST(OnnxShapesTest, Opset18OpsAreSizedByTheirNewDefinitions) {
  OnnxTestModel m(18);
  auto g = m.graph();
  g.Input("x", kFloat, {"batch", "16", "seq"}).Ints("axes", {1});
  g.Node("ReduceMean", {"x", "axes"}, {"mean"}).Int("keepdims", 0);
  g.Ints("pads", {2, 3}).Ints("pad_axes", {-1});
  g.Add("Pad", {"x", "pads", "", "pad_axes"}, {"padded"});
  g.Add("Gelu", {"padded"}, {"act"});  // new in opset 20: elementwise
  g.Output("mean").Output("act");
  Sizes s = Import(m, {{"batch", 2}, {"seq", 10}});
  EXPECT_EQ(s["mean"], 2 * 10 * 4);
  EXPECT_EQ(s["padded"], 2 * 16 * 15 * 4);
  EXPECT_EQ(s["act"], 2 * 16 * 15 * 4);
}

TEST(OnnxShapesTest, NewOpsWithoutARuleNameTheOpAndOpset) {
  OnnxTestModel m(20);
  auto g = m.graph();
  g.Input("theta", kFloat, {"1", "2", "3"}).Ints("size", {1, 3, 8, 8});
  g.Add("AffineGrid", {"theta", "size"}, {"grid"}, "grid").Output("grid");
  EXPECT_THAT(ImportError(m),
              AllOf(HasSubstr("node 'grid' (AffineGrid, #1)"),
                    HasSubstr("opset 20"), HasSubstr("up to 17")));
}

// ONNX Runtime's contrib ops that are known ops renamed.
TEST(OnnxShapesTest, MicrosoftContribOpsOfKnownShape) {
  OnnxTestModel m(13);
  auto* o = m.proto().add_opset_import();
  o->set_domain("com.microsoft");
  o->set_version(1);
  auto g = m.graph();
  g.Input("x", kFloat, {"batch", "seq", "64"}).FloatInitializer("w", {64, 32});
  g.Node("FusedMatMul", {"x", "w"}, {"mm"})
      .proto()
      ->set_domain("com.microsoft");
  g.Node("Gelu", {"mm"}, {"y"}).proto()->set_domain("com.microsoft");
  g.Output("y");
  EXPECT_EQ(Import(m, {{"batch", 2}, {"seq", 3}})["y"], 2 * 3 * 32 * 4);
}

TEST(OnnxShapesTest, ContentsOfGatherConcatAndTransposeAreFolded) {
  OnnxTestModel m(13);
  auto g = m.graph();
  g.Input("x", kFloat, {"batch", "seq", "4", "5"})
      .Add("Shape", {"x"}, {"shape"});
  g.Ints("idx", {-1, 0});
  g.Add("Gather", {"shape", "idx"}, {"picked"});  // [5, batch]
  g.Ints("two", {2, 1}).Add("Reshape", {"picked", "two"}, {"col"});
  g.Node("Transpose", {"col"}, {"row"}).Ints("perm", {1, 0});  // [[5, batch]]
  g.Ints("flat", {-1}).Add("Reshape", {"row", "flat"}, {"target"});
  g.Add("ConstantOfShape", {"target"}, {"y"}).Output("y");
  EXPECT_THAT(SymbolicDims(m, "y"), ElementsAre("5", "batch"));
}

}  // namespace
}  // namespace memplan::formats

namespace memplan::formats {
namespace {

// A float32 Constant named `name` holding `values` (a scalar when dims is
// empty).
void FloatConstant(OnnxTestGraph g, const std::string& name,
                   const std::vector<float>& values,
                   const std::vector<int64_t>& dims) {
  onnx::TensorProto t;
  t.set_data_type(kFloat);
  for (int64_t d : dims) t.add_dims(d);
  for (float v : values) t.add_float_data(v);
  g.Node("Constant", {}, {name}).Tensor("value", t);
}

// Nodes ONNX 1.12's own inference trusts without checking (a stride of 0
// divides by zero, a kernel of another rank than the input reads past a
// vector, a blocksize of 2^32 squares to 0, a Split without outputs
// divides by 0): each is an error naming the node, never a signal that
// ends the process, and a server with it, on a request of 200 bytes.
TEST(OnnxShapesTest, HostileAttributesAndRanksAreErrorsNotCrashes) {
  struct Case {
    std::string label;
    std::function<void(OnnxTestGraph)> build;
    std::string error;
  };
  const auto image = [](OnnxTestGraph g) {
    g.Input("x", kFloat, {"1", "4", "8", "8"})
        .FloatInitializer("w", {1, 4, 3, 3});
  };
  const std::vector<Case> cases = {
      {"Conv strides 0",
       [&](OnnxTestGraph g) {
         image(g);
         g.Node("Conv", {"x", "w"}, {"y"}).Ints("strides", {0, 0});
       },
       "node #0 (Conv): strides holds 0, below 1"},
      {"MaxPool strides 0",
       [&](OnnxTestGraph g) {
         image(g);
         g.Node("MaxPool", {"x"}, {"y"})
             .Ints("kernel_shape", {2, 2})
             .Ints("strides", {0, 0});
       },
       "(MaxPool): strides holds 0, below 1"},
      {"AveragePool strides 0",
       [&](OnnxTestGraph g) {
         image(g);
         g.Node("AveragePool", {"x"}, {"y"})
             .Ints("kernel_shape", {2, 2})
             .Ints("strides", {1, 0});
       },
       "(AveragePool): strides holds 0, below 1"},
      {"Conv dilation past 64 bits",
       [&](OnnxTestGraph g) {
         image(g);
         g.Node("Conv", {"x", "w"}, {"y"})
             .Ints("dilations", {int64_t{1} << 62, 1});
       },
       "(Conv): a dilated kernel or its pads pass 64 bits"},
      {"Conv of a rank-2 input",
       [&](OnnxTestGraph g) {
         g.Input("x", kFloat, {"1", "4"}).FloatInitializer("w", {1, 4, 3, 3});
         g.Add("Conv", {"x", "w"}, {"y"});
       },
       "(Conv): input of rank 2: a convolution or pooling needs"},
      {"ConvTranspose weight of another rank",
       [&](OnnxTestGraph g) {
         g.Input("x", kFloat, {"1", "4", "8", "8"})
             .FloatInitializer("w", {4, 1, 3});
         g.Add("ConvTranspose", {"x", "w"}, {"y"});
       },
       "(ConvTranspose): weight of rank 3 for an input of rank 4"},
      {"DepthToSpace blocksize 2^32",
       [&](OnnxTestGraph g) {
         image(g);
         g.Node("DepthToSpace", {"x"}, {"y"})
             .Int("blocksize", int64_t{1} << 32);
       },
       "(DepthToSpace): blocksize 4294967296 is not from 1 to 2^31 - 1"},
      {"Split without outputs",
       [&](OnnxTestGraph g) {
         image(g);
         g.Node("Split", {"x"}, {}).Int("axis", 1);
         g.Add("Relu", {"x"}, {"y"});
       },
       "(Split): Split has no outputs"},
      {"Slice step -2^63",
       [&](OnnxTestGraph g) {
         image(g);
         g.Ints("starts", {7}).Ints("ends", {0}).Ints("axes", {2});
         g.Ints("steps", {std::numeric_limits<int64_t>::min()});
         g.Add("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"});
       },
       "(Slice): a step is -2^63"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label);
    OnnxTestModel m(13);
    c.build(m.graph());
    m.graph().Output("y");
    EXPECT_THAT(ImportError(m), HasSubstr(c.error));
  }
  // STFT (opset 17) has no rule of memplan's: ONNX's inference sizes it,
  // and a signal of rank 1 is refused before it is asked.
  OnnxTestModel stft(17);
  stft.graph().Input("signal", kFloat, {"64"}).Ints("step", {8}, true);
  stft.graph().Add("STFT", {"signal", "step"}, {"y"}).Output("y");
  EXPECT_THAT(ImportError(stft),
              HasSubstr("(STFT): signal of rank 1 (STFT reads [batch, "
                        "length, 1 or 2])"));
}

// A model with functions of its own (torch.onnx's export_modules_as_
// functions): a node calling one is sized from the shapes flowing in,
// Conv's included; a function body's Conv holding a stride of 0 is refused
// before ONNX's whole-model pass divides by it.
TEST(OnnxShapesTest, ModelLocalFunctionsAfterConvAndHostileBodies) {
  const auto with_function = [](OnnxTestModel* m, const std::string& name,
                                const std::string& op,
                                const std::vector<int64_t>& strides) {
    auto* o = m->proto().add_opset_import();
    o->set_domain("local");
    o->set_version(1);
    onnx::FunctionProto* f = m->proto().add_functions();
    f->set_name(name);
    f->set_domain("local");
    f->add_input("A");
    f->add_input("W");
    f->add_output("B");
    auto* fo = f->add_opset_import();
    fo->set_domain("");
    fo->set_version(13);
    onnx::NodeProto* n = f->add_node();
    n->set_op_type(op);
    n->add_input("A");
    if (op == "Conv") n->add_input("W");
    n->add_output("B");
    if (!strides.empty()) OnnxTestNode(n).Ints("strides", strides);
  };
  OnnxTestModel good(13);
  with_function(&good, "MyRelu", "Relu", {});
  auto g = good.graph();
  g.Input("x", kFloat, {"1", "3", "8", "8"})
      .FloatInitializer("w", {4, 3, 3, 3});
  g.Node("Conv", {"x", "w"}, {"c"}).Ints("pads", {1, 1, 1, 1});
  g.Node("MyRelu", {"c", "w"}, {"y"}).proto()->set_domain("local");
  g.Output("y");
  EXPECT_EQ(Import(good, {})["y"], 4 * 8 * 8 * 4);
  OnnxTestModel bad(13);
  with_function(&bad, "BadConv", "Conv", {0, 0});
  auto b = bad.graph();
  b.Input("x", kFloat, {"1", "3", "8", "8"})
      .FloatInitializer("w", {4, 3, 3, 3});
  b.Node("BadConv", {"x", "w"}, {"y"}).proto()->set_domain("local");
  b.Output("y");
  EXPECT_THAT(ImportError(bad),
              HasSubstr("function 'BadConv': node #0 (Conv): strides holds 0, "
                        "below 1"));
  // A stride the call passes in (ref_attr_name), and a weight of another
  // rank than the input the call passes: refused in the body (ONNX's
  // inference of the body died of SIGFPE and SIGSEGV on them).
  OnnxTestModel ref(13);
  with_function(&ref, "RefConv", "Conv", {});
  {
    onnx::AttributeProto* a =
        ref.proto().mutable_functions(0)->mutable_node(0)->add_attribute();
    a->set_name("strides");
    a->set_type(onnx::AttributeProto::INTS);
    a->set_ref_attr_name("s");
    ref.proto().mutable_functions(0)->add_attribute("s");
  }
  auto r = ref.graph();
  r.Input("x", kFloat, {"1", "3", "8", "8"})
      .FloatInitializer("w", {4, 3, 3, 3});
  auto call = r.Node("RefConv", {"x", "w"}, {"y"});
  call.proto()->set_domain("local");
  call.Ints("s", {0, 0});
  r.Output("y");
  EXPECT_THAT(ImportError(ref),
              HasSubstr("node #0 (Conv) in RefConv_0/RefConv: has a kernel, "
                        "stride or dilation below 1"));
  OnnxTestModel rank(13);
  with_function(&rank, "MyConv", "Conv", {});
  auto k = rank.graph();
  k.Input("x", kFloat, {"1", "3", "8", "8"})
      .FloatInitializer("w", {4, 3, 3, 3, 1, 1});
  k.Node("MyConv", {"x", "w"}, {"y"}).proto()->set_domain("local");
  k.Output("y");
  EXPECT_THAT(ImportError(rank),
              HasSubstr("node #0 (Conv) in MyConv_0/MyConv: weight of rank 6 "
                        "for an input of rank 4"));
  // The main graph's own Conv in a model with functions: checked as in any.
  OnnxTestModel main_conv(13);
  with_function(&main_conv, "MyRelu", "Relu", {});
  auto mc = main_conv.graph();
  mc.Input("x", kFloat, {"1", "3", "8", "8"})
      .FloatInitializer("w", {4, 3, 3, 3, 1, 1});
  mc.Add("Conv", {"x", "w"}, {"c"});
  mc.Node("MyRelu", {"c", "w"}, {"y"}).proto()->set_domain("local");
  mc.Output("y");
  EXPECT_THAT(ImportError(main_conv),
              HasSubstr("(Conv): weight of rank 6 for an input of rank 4"));
}

// A node of a test function: {op, inputs, outputs, domain}.
struct FnOp {
  std::string op;
  std::vector<std::string> in, out;
  std::string domain;
};

// Adds function `name` (domain "local", output "B") to `m`, its nodes
// `ops`.
onnx::FunctionProto* AddFunction(OnnxTestModel* m, const std::string& name,
                                 const std::vector<std::string>& in,
                                 const std::vector<FnOp>& ops) {
  if (m->proto().opset_import_size() == 1) {
    auto* o = m->proto().add_opset_import();
    o->set_domain("local");
    o->set_version(1);
  }
  onnx::FunctionProto* f = m->proto().add_functions();
  f->set_name(name);
  f->set_domain("local");
  for (const std::string& i : in) f->add_input(i);
  f->add_output("B");
  for (const char* domain : {"", "local"}) {
    auto* fo = f->add_opset_import();
    fo->set_domain(domain);
    fo->set_version(*domain == '\0' ? 13 : 1);
  }
  for (const FnOp& op : ops) {
    onnx::NodeProto* n = f->add_node();
    n->set_op_type(op.op);
    n->set_domain(op.domain);
    for (const std::string& i : op.in) n->add_input(i);
    for (const std::string& o : op.out) n->add_output(o);
  }
  return f;
}

// The main graph: x [1, 3, 8, 8], w [4, 3, 3, 3], y = name(in...).
OnnxTestNode CallFunction(OnnxTestModel* m, const std::string& name,
                          const std::vector<std::string>& in) {
  auto g = m->graph();
  g.Input("x", kFloat, {"1", "3", "8", "8"})
      .FloatInitializer("w", {4, 3, 3, 3});
  auto node = g.Node(name, in, {"y"});
  node.proto()->set_domain("local");
  g.Output("y");
  return node;
}

// A call of one of the model's functions runs its body in its place, as
// ONNX Runtime runs a function it inlined: the body is evaluated node by
// node on the call's inputs, so what a body node computes is known to the
// checks of the nodes after it (a Conv of a flattened input was read past
// its dims by ONNX's inference of the body: SIGSEGV), and the body's
// values are planned. A function calling itself, or calls doubling at
// every level, end in an error, not in a stack overflow or hours of work.
TEST(OnnxShapesTest, FunctionCallsRunTheirBodiesInPlace) {
  using Op = FnOp;
  const auto add_function = AddFunction;
  const auto call = CallFunction;

  // The body's Relu output is planned beside the call's output, named
  // under the call.
  OnnxTestModel inlined(13);
  onnx::FunctionProto* f =
      add_function(&inlined, "ReluConv", {"A", "W"},
                   {{"Relu", {"A"}, {"R"}}, {"Conv", {"R", "W"}, {"B"}}});
  OnnxTestNode(f->mutable_node(1)).Ints("pads", {1, 1, 1, 1});
  call(&inlined, "ReluConv", {"x", "w"});
  EXPECT_THAT(Import(inlined, {}),
              UnorderedElementsAre(Pair("x", 3 * 8 * 8 * 4),
                                   Pair("w", 4 * 3 * 3 * 3 * 4),
                                   Pair("ReluConv_0/ReluConv/R", 3 * 8 * 8 * 4),
                                   Pair("y", 4 * 8 * 8 * 4)));
  // An output that is an input passed through is a copy of it.
  OnnxTestModel through(13);
  f = add_function(&through, "Pass", {"A"}, {});
  f->set_output(0, "A");
  call(&through, "Pass", {"x"});
  EXPECT_THAT(Import(through, {}),
              UnorderedElementsAre(Pair("x", 3 * 8 * 8 * 4),
                                   Pair("w", 4 * 3 * 3 * 3 * 4),
                                   Pair("y", 3 * 8 * 8 * 4)));

  OnnxTestModel flat(13);
  add_function(&flat, "FlatConv", {"A", "W"},
               {{"Flatten", {"A"}, {"F"}}, {"Conv", {"F", "W"}, {"B"}}});
  call(&flat, "FlatConv", {"x", "w"});
  EXPECT_THAT(ImportError(flat),
              HasSubstr("node #1 (Conv) in FlatConv_0/FlatConv: input of rank "
                        "2: a convolution or pooling needs a batch, a channel "
                        "and at least one spatial dim"));

  OnnxTestModel nested(13);
  add_function(&nested, "FlatConv", {"A", "W"},
               {{"Flatten", {"A"}, {"F"}}, {"Conv", {"F", "W"}, {"B"}}});
  add_function(&nested, "Outer", {"A", "W"},
               {{"FlatConv", {"A", "W"}, {"B"}, "local"}});
  call(&nested, "Outer", {"x", "w"});
  EXPECT_THAT(ImportError(nested),
              HasSubstr("node #1 (Conv) in Outer_0/Outer/FlatConv_0/FlatConv: "
                        "input of rank 2"));

  OnnxTestModel itself(13);
  add_function(&itself, "Rec", {"A"}, {{"Rec", {"A"}, {"B"}, "local"}});
  call(&itself, "Rec", {"x"});
  EXPECT_THAT(ImportError(itself),
              HasSubstr("function calls and subgraphs nested more than 16 "
                        "deep (function Rec calls itself?)"));

  // F0 calls F1 four times, ... F9 is a Relu: 4^9 Relu nodes.
  OnnxTestModel doubling(13);
  for (int level = 0; level < 10; ++level) {
    std::vector<Op> ops;
    if (level == 9) {
      ops.push_back({"Relu", {"A"}, {"B"}});
    } else {
      const std::string next = absl::StrCat("F", level + 1);
      ops = {{next, {"A"}, {"C1"}, "local"},
             {next, {"C1"}, {"C2"}, "local"},
             {next, {"C2"}, {"C3"}, "local"},
             {next, {"C3"}, {"B"}, "local"}};
    }
    add_function(&doubling, absl::StrCat("F", level), {"A"}, ops);
  }
  call(&doubling, "F0", {"x"});
  EXPECT_THAT(ImportError(doubling),
              HasSubstr("calls of the model's functions run more than 250000 "
                        "body nodes or 64 MiB of bodies in all"));

  // Shape arithmetic inside the body: B = Reshape(A, [A's dim 0, -1]).
  OnnxTestModel shaped(13);
  f = add_function(&shaped, "Flat2", {"A"},
                   {{"Shape", {"A"}, {"S"}},
                    {"Constant", {}, {"Zero"}},
                    {"Constant", {}, {"One"}},
                    {"Constant", {}, {"Rest"}},
                    {"Slice", {"S", "Zero", "One"}, {"N"}},
                    {"Concat", {"N", "Rest"}, {"To"}},
                    {"Reshape", {"A", "To"}, {"B"}}});
  OnnxTestNode(f->mutable_node(1)).Tensor("value", OnnxInt64Tensor({0}));
  OnnxTestNode(f->mutable_node(2)).Tensor("value", OnnxInt64Tensor({1}));
  OnnxTestNode(f->mutable_node(3)).Tensor("value", OnnxInt64Tensor({-1}));
  OnnxTestNode(f->mutable_node(5)).Int("axis", 0);
  call(&shaped, "Flat2", {"x"});
  shaped.graph().Add("Relu", {"y"}, {"z"}).Output("z");
  const Sizes sizes = Import(shaped, {});
  EXPECT_EQ(sizes.at("y"), 3 * 8 * 8 * 4);
  EXPECT_EQ(sizes.at("z"), 3 * 8 * 8 * 4);

  // A stride the call does not pass keeps its default (1).
  OnnxTestModel unset(13);
  f = add_function(&unset, "RefConv", {"A", "W"},
                   {{"Conv", {"A", "W"}, {"B"}}});
  f->add_attribute("s");
  onnx::AttributeProto* strides = f->mutable_node(0)->add_attribute();
  strides->set_name("strides");
  strides->set_type(onnx::AttributeProto::INTS);
  strides->set_ref_attr_name("s");
  OnnxTestNode(f->mutable_node(0)).Ints("pads", {1, 1, 1, 1});
  call(&unset, "RefConv", {"x", "w"});
  EXPECT_EQ(Import(unset, {}).at("y"), 4 * 8 * 8 * 4);
  // ... and a stride of 2 passed in halves the output.
  OnnxTestModel set(13);
  *set.proto().mutable_functions() = unset.proto().functions();
  *set.proto().mutable_opset_import() = unset.proto().opset_import();
  call(&set, "RefConv", {"x", "w"}).Ints("s", {2, 2});
  EXPECT_EQ(Import(set, {}).at("y"), 4 * 4 * 4 * 4);
}

// Adds function `name`: B = If(true) with A in scope; `branch` fills each
// branch graph (named `branch`) and returns its output's name.
onnx::FunctionProto* AddIfFunction(
    OnnxTestModel* m, const std::string& name,
    const std::function<std::string(onnx::GraphProto*, const std::string&)>&
        branch) {
  onnx::FunctionProto* f = AddFunction(
      m, name, {"A"}, {{"Constant", {}, {"cond"}}, {"If", {"cond"}, {"B"}}});
  onnx::TensorProto yes;
  yes.set_data_type(kOnnxBool);
  yes.add_int32_data(1);
  OnnxTestNode(f->mutable_node(0)).Tensor("value", yes);
  for (const char* name : {"then_branch", "else_branch"}) {
    onnx::GraphProto* g = OnnxTestNode(f->mutable_node(1)).Graph(name);
    g->add_output()->set_name(branch(g, name));
  }
  return f;
}

// Adds `op`(in) -> out to `g`.
onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op,
                         const std::string& in, const std::string& out) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->add_input(in);
  n->add_output(out);
  return n;
}

// The main graph: x [1, 3, 8, 8], then `calls` calls of `name` in a chain
// (h0, h1, ...), the last making y.
void CallInChain(OnnxTestModel* m, const std::string& name, int calls) {
  auto g = m->graph();
  g.Input("x", kFloat, {"1", "3", "8", "8"});
  std::string last = "x";
  for (int i = 0; i < calls; ++i) {
    const std::string out = i + 1 == calls ? "y" : absl::StrCat("h", i);
    g.Node(name, {last}, {out}).proto()->set_domain("local");
    last = out;
  }
  g.Output("y");
}

// A body's If whose branch takes an attribute from the call (ref_attr_name)
// gets it (unresolved, ReduceMean's axes meant every axis: a 4-byte plan
// for 256 bytes); a function's attribute defaults (IR 9, which ONNX 1.12
// keeps as unknown bytes) apply where the call passes none; the limits
// count the nodes inside a body's graphs (an If of 1000 nodes called 256
// times ran 44 s and 8 GB); calls that share a name get bodies of distinct
// paths.
TEST(OnnxShapesTest, FunctionCallsResolveNestedReferencesAndCountEveryNode) {
  // B = If(true) { ReduceMean(A, axes=@ax, keepdims=0) } for both branches.
  const auto reduce_in_if = [](OnnxTestModel* m) {
    onnx::FunctionProto* f = AddIfFunction(
        m, "Reduce", [](onnx::GraphProto* g, const std::string& branch) {
          const std::string out = branch + "_r";
          onnx::NodeProto* r = AddNode(g, "ReduceMean", "A", out);
          onnx::AttributeProto* axes = r->add_attribute();
          axes->set_name("axes");
          axes->set_type(onnx::AttributeProto::INTS);
          axes->set_ref_attr_name("ax");
          OnnxTestNode(r).Int("keepdims", 0);
          return out;
        });
    f->add_attribute("ax");
    return f;
  };
  OnnxTestModel nested(13);
  reduce_in_if(&nested);
  CallFunction(&nested, "Reduce", {"x"}).Ints("ax", {1});
  EXPECT_EQ(Import(nested, {}).at("y"), 8 * 8 * 4);

  // ONNX IR 9's attribute_proto (kept as unknown field 11 by ONNX 1.12):
  // the function's default, ax = [1], where the call passes none.
  onnx::AttributeProto given;
  given.set_name("ax");
  given.set_type(onnx::AttributeProto::INTS);
  given.add_ints(1);
  const auto with_default = [&](OnnxTestModel* m, const std::string& field) {
    onnx::FunctionProto* f = reduce_in_if(m);
    f->clear_attribute();
    f->mutable_unknown_fields()->AddLengthDelimited(11, field);
  };
  OnnxTestModel defaults(13);
  with_default(&defaults, given.SerializeAsString());
  CallFunction(&defaults, "Reduce", {"x"});
  EXPECT_EQ(Import(defaults, {}).at("y"), 8 * 8 * 4);  // [1, 8, 8]
  OnnxTestModel overridden(13);
  with_default(&overridden, given.SerializeAsString());
  CallFunction(&overridden, "Reduce", {"x"}).Ints("ax", {2});
  EXPECT_EQ(Import(overridden, {}).at("y"), 3 * 8 * 4);  // [1, 3, 8]
  OnnxTestModel garbage(13);
  with_default(&garbage, "\xff\xff");
  CallFunction(&garbage, "Reduce", {"x"});
  EXPECT_THAT(ImportError(garbage),
              HasSubstr("function Reduce has an attribute default "
                        "(attribute_proto) that is not an AttributeProto"));

  // F0 calls F1 four times ... F3 calls Leaf, whose If holds 1000 Relus.
  OnnxTestModel bomb(13);
  for (int level = 0; level < 4; ++level) {
    const std::string next = level == 3 ? "Leaf" : absl::StrCat("F", level + 1);
    AddFunction(&bomb, absl::StrCat("F", level), {"A"},
                {{next, {"A"}, {"C1"}, "local"},
                 {next, {"C1"}, {"C2"}, "local"},
                 {next, {"C2"}, {"C3"}, "local"},
                 {next, {"C3"}, {"B"}, "local"}});
  }
  AddIfFunction(&bomb, "Leaf",
                [](onnx::GraphProto* g, const std::string& branch) {
                  std::string last = "A";
                  for (int i = 0; i < 1000; ++i) {
                    const std::string out = absl::StrCat(branch, i);
                    AddNode(g, "Relu", last, out);
                    last = out;
                  }
                  return last;
                });
  CallFunction(&bomb, "F0", {"x"});
  EXPECT_THAT(ImportError(bomb),
              HasSubstr("calls of the model's functions run more than 250000 "
                        "body nodes"));

  // Two calls named "n": their bodies' values are n/Twice/R and
  // n/Twice#2/R, not names made unique one "_" at a time.
  OnnxTestModel same(13);
  AddFunction(&same, "Twice", {"A"},
              {{"Relu", {"A"}, {"R"}}, {"Relu", {"R"}, {"B"}}});
  auto g = same.graph();
  g.Input("x", kFloat, {"1", "3", "8", "8"});
  g.Node("Twice", {"x"}, {"h"}, "n").proto()->set_domain("local");
  g.Node("Twice", {"h"}, {"y"}, "n").proto()->set_domain("local");
  g.Output("y");
  const Sizes sizes = Import(same, {});
  EXPECT_EQ(sizes.count("n/Twice/R"), 1u);
  EXPECT_EQ(sizes.count("n/Twice#2/R"), 1u);

  // An If with a 100 KB name inside a function: its branches' paths are
  // cut too (every value and label of every call held the whole name: a
  // 220 KB model took 4.3 GB).
  OnnxTestModel named(13);
  onnx::FunctionProto* with_if = AddIfFunction(
      &named, "Branchy", [](onnx::GraphProto* g, const std::string& branch) {
        AddNode(g, "Relu", "A", branch + "_r");
        return branch + "_r";
      });
  with_if->mutable_node(1)->set_name(std::string(100000, 'x'));
  CallInChain(&named, "Branchy", 3);
  const Sizes branchy = Import(named, {});
  EXPECT_EQ(branchy.size(), 10u);  // x, h0, h1, y; each call's cond and r
  for (const auto& [name, bytes] : branchy) EXPECT_LT(name.size(), 1024u);

  // A body's tensors are not what a call copies: a function holding a
  // 4 MB Constant called 20 times is no "64 MiB of bodies".
  OnnxTestModel heavy(13);
  onnx::FunctionProto* holds =
      AddFunction(&heavy, "Heavy", {"A"},
                  {{"Constant", {}, {"big"}}, {"Relu", {"A"}, {"B"}}});
  onnx::TensorProto big;
  big.set_data_type(kFloat);
  big.add_dims(1 << 20);
  big.mutable_float_data()->Resize(1 << 20, 0.f);
  OnnxTestNode(holds->mutable_node(0)).Tensor("value", big);
  CallInChain(&heavy, "Heavy", 20);
  EXPECT_EQ(Import(heavy, {}).at("y"), 3 * 8 * 8 * 4);
}

// Resize multiplies in float as ONNX Runtime does: 3 x float(7/3) is 7
// there (6.99999976 in double: a row short of what the runtime writes).
TEST(OnnxShapesTest, ResizeScalesMultiplyInFloat) {
  OnnxTestModel m(13);
  auto g = m.graph();
  g.Input("x", kFloat, {"1", "1", "3", "3"});
  FloatConstant(g, "scales", {1.f, 1.f, 7.f / 3.f, 5.f / 3.f}, {4});
  g.Add("Resize", {"x", "", "scales"}, {"y"}).Output("y");
  EXPECT_EQ(Import(m, {})["y"], 7 * 5 * 4);
}

// A float Range counts as ONNX Runtime does: limit - start in float
// (0.4f - 0.1f = 0.3000000119f), so 4 elements of 0.1f (3 in double).
TEST(OnnxShapesTest, FloatRangeCountsInItsElementType) {
  OnnxTestModel m(13);
  auto g = m.graph();
  FloatConstant(g, "start", {0.1f}, {});
  FloatConstant(g, "limit", {0.4f}, {});
  FloatConstant(g, "delta", {0.1f}, {});
  g.Add("Range", {"start", "limit", "delta"}, {"y"}).Output("y");
  EXPECT_EQ(Import(m, {})["y"], 4 * 4);
}

// Resize-18's sizes with keep_aspect_ratio_policy: one scale for the axes
// (the least of size / dim for not_larger, the greatest for not_smaller),
// each dim round(scale x dim).
TEST(OnnxShapesTest, ResizeKeepsTheAspectRatioAsAsked) {
  for (const auto& [policy, h, w] :
       std::vector<std::tuple<std::string, int, int>>{{"not_larger", 2, 4},
                                                      {"not_smaller", 4, 8}}) {
    SCOPED_TRACE(policy);
    OnnxTestModel m(18);
    auto g = m.graph();
    g.Input("x", kFloat, {"1", "3", "5", "10"}).Ints("sizes", {4, 4});
    g.Node("Resize", {"x", "", "", "sizes"}, {"y"})
        .Ints("axes", {2, 3})
        .Str("keep_aspect_ratio_policy", policy);
    g.Output("y");
    EXPECT_EQ(Import(m, {})["y"], 3 * h * w * 4);
  }
}

// The model's text in an error is escaped (a node named with a newline
// cannot start a line of the server's log), and a failed import says what
// it assumed: Silero VAD fails on the dims defaulted to 1.
TEST(OnnxShapesTest, ImportErrorsEscapeNamesAndCarryTheWarnings) {
  OnnxTestModel m(13);
  auto g = m.graph();
  g.Input("x", kFloat, {"1", ""});
  g.Add("Relu", {"nowhere"}, {"y"}, "evil\nmemplan-server: FORGED");
  g.Output("y");
  const std::string error = ImportError(m);
  EXPECT_THAT(error, HasSubstr("node 'evil\\x0Amemplan-server: FORGED'"));
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  OnnxTestModel reshape(13);
  auto r = reshape.graph();
  r.Input("x", kFloat, {"1", ""}).Ints("shape", {2});
  r.Add("Reshape", {"x", "shape"}, {"y"}).Output("y");
  EXPECT_THAT(ImportError(reshape),
              HasSubstr("(import warnings: graph input 'x': dim 1 is dynamic "
                        "and unnamed; using 1 (set it with --input x=SHAPE))"));
}

}  // namespace
}  // namespace memplan::formats
