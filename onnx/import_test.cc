// The ONNX importer on small models built here with ONNX's own protobuf
// types: one concern per test, each asserting what `memplan plan` would show.
#include "onnx/import.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx/inspect.h"
#include "onnx/internal/model_reading.h"
#include "onnx/onnx_pb.h"
#include "onnx/testing/onnx_builder.h"
#include "planner/planner.h"
#include "proto/convert.h"

namespace memplan::formats {
namespace {

// Debian's libonnx is built with ONNX_NAMESPACE=onnx (and ONNX_ML); the alias
// keeps this file right for any namespace the library was built with.
namespace onnx = ::ONNX_NAMESPACE;

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr int kFloat = kOnnxFloat;
constexpr int kInt64 = kOnnxInt64;
constexpr int kBool = kOnnxBool;

using GraphBuilder = OnnxTestGraph;
using Model = OnnxTestModel;

// A float tensor attribute value of `dims`, all zeros.
onnx::TensorProto FloatTensor(const std::vector<int64_t>& dims) {
  return OnnxFloatTensor(dims);
}

absl::StatusOr<ImportedModel> Import(const Model& model,
                                     const ModelOptions& options = {}) {
  return ImportOnnx(model.Bytes(), "test.onnx", options);
}

// The message as a std::string, which gmock prints readably.
std::string Msg(const absl::Status& s) { return std::string(s.message()); }

std::map<std::string, int64_t> Sizes(const v1::Graph& g) {
  std::map<std::string, int64_t> sizes;
  for (const v1::Tensor& t : g.tensors()) sizes[t.name()] = t.size_bytes();
  return sizes;
}

const v1::Op& FindOp(const v1::Graph& g, const std::string& name) {
  for (const v1::Op& op : g.ops()) {
    if (op.name() == name) return op;
  }
  ADD_FAILURE() << "no op " << name;
  return g.ops(0);
}

// Plans the imported graph in-process with the default options.
v1::PlanResponse Plan(const v1::Graph& graph) {
  planner::PlanOptions options;
  absl::StatusOr<planner::PlanResult> r =
      planner::PlanGraph(api::GraphFromProto(graph), options, nullptr, nullptr);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? api::ToProto(*r, options, {}) : v1::PlanResponse();
}

const v1::Assignment& FindAssignment(const v1::PlanResponse& r,
                                     const std::string& name) {
  for (const v1::Assignment& a : r.assignments()) {
    if (a.name() == name) return a;
  }
  ADD_FAILURE() << "no assignment " << name;
  return r.assignments(0);
}

TEST(OnnxTensorBytesTest, EveryElementTypeIncludingPackedOnes) {
  EXPECT_EQ(*OnnxTensorBytes(onnx::TensorProto::FLOAT, {2, 3}, "t"), 24);
  EXPECT_EQ(*OnnxTensorBytes(onnx::TensorProto::FLOAT, {}, "t"), 4);
  EXPECT_EQ(*OnnxTensorBytes(onnx::TensorProto::BOOL, {5}, "t"), 5);
  EXPECT_EQ(*OnnxTensorBytes(onnx::TensorProto::UINT8, {5}, "t"), 5);
  EXPECT_EQ(*OnnxTensorBytes(onnx::TensorProto::INT16, {5}, "t"), 10);
  EXPECT_EQ(*OnnxTensorBytes(onnx::TensorProto::FLOAT16, {3}, "t"), 6);
  EXPECT_EQ(*OnnxTensorBytes(onnx::TensorProto::BFLOAT16, {3}, "t"), 6);
  EXPECT_EQ(*OnnxTensorBytes(onnx::TensorProto::DOUBLE, {3}, "t"), 24);
  EXPECT_EQ(*OnnxTensorBytes(onnx::TensorProto::UINT64, {3}, "t"), 24);
  EXPECT_EQ(*OnnxTensorBytes(onnx::TensorProto::COMPLEX64, {2}, "t"), 16);
  EXPECT_EQ(*OnnxTensorBytes(onnx::TensorProto::COMPLEX128, {2}, "t"), 32);
  // Numbers newer than this ONNX release: float8 (17-20), uint4/int4
  // (21/22) and float4e2m1 (23), the 4-bit ones packed and rounded up.
  for (int float8 : {17, 18, 19, 20}) {
    EXPECT_EQ(*OnnxTensorBytes(float8, {3}, "t"), 3) << float8;
  }
  EXPECT_EQ(*OnnxTensorBytes(21, {4}, "t"), 2);
  EXPECT_EQ(*OnnxTensorBytes(22, {3}, "t"), 2);
  EXPECT_EQ(*OnnxTensorBytes(23, {1, 1}, "t"), 1);
  EXPECT_EQ(*OnnxTensorBytes(onnx::TensorProto::FLOAT, {0, 7}, "t"), 0);
}

TEST(OnnxTensorBytesTest, RejectsStringsUnknownTypesAndOverflow) {
  auto s = OnnxTensorBytes(onnx::TensorProto::STRING, {2}, "value 'names'");
  EXPECT_THAT(Msg(s.status()),
              AllOf(HasSubstr("value 'names'"), HasSubstr("strings")));
  EXPECT_THAT(Msg(OnnxTensorBytes(99, {2}, "t").status()),
              HasSubstr("unknown element type 99"));
  EXPECT_THAT(Msg(OnnxTensorBytes(0, {2}, "t").status()),
              HasSubstr("unknown element type 0"));
  EXPECT_FALSE(OnnxTensorBytes(kFloat, {int64_t{1} << 40, 1 << 30}, "t").ok());
  EXPECT_FALSE(OnnxTensorBytes(kFloat, {-1}, "t").ok());
}

TEST(OnnxImportTest, MultiConsumerTensorLivesUntilItsLastReader) {
  Model m;
  m.graph()
      .Input("x", kFloat, {"2", "8"})
      .Add("Relu", {"x"}, {"a"}, "relu")
      .Add("Sigmoid", {"a"}, {"b"}, "sigmoid")
      .Add("Add", {"a", "b"}, {"c"}, "add")
      .Add("Mul", {"a", "c"}, {"y"}, "mul")
      .Output("y");
  absl::StatusOr<ImportedModel> in = Import(m);
  ASSERT_TRUE(in.ok()) << in.status();
  const v1::Graph& g = *in->graph;
  EXPECT_EQ(Sizes(g),
            (std::map<std::string, int64_t>{
                {"x", 64}, {"a", 64}, {"b", 64}, {"c", 64}, {"y", 64}}));
  ASSERT_EQ(g.ops_size(), 4);
  EXPECT_EQ(g.ops(0).name(), "relu");
  EXPECT_EQ(g.ops(3).name(), "mul");
  EXPECT_THAT(FindOp(g, "add").inputs(), ElementsAre("a", "b"));
  EXPECT_THAT(g.inputs(), ElementsAre("x"));
  EXPECT_THAT(g.outputs(), ElementsAre("y"));
  EXPECT_EQ(in->stats.tensors, 5);
  EXPECT_EQ(in->stats.ops, 4);
  EXPECT_THAT(in->warnings, IsEmpty());
  v1::PlanResponse plan = Plan(g);
  const v1::Assignment& a = FindAssignment(plan, "a");
  EXPECT_EQ(a.first_step(), 0);
  EXPECT_EQ(a.last_step(), 3);
  // a, b, c live together at step 2 (192); x dies after relu (step 0) and
  // y is born at mul (step 3), beside two others each time. (Inputs and
  // outputs held for the whole run made it 128 + 192 = 320.)
  EXPECT_EQ(plan.lower_bound_bytes(), 192);
}

// An op lists each tensor it reads once, in order of first use: short
// lists (searched) and long ones (a set of names) alike.
// An input too small for a node (a length set below a Conv's kernel): the
// error names the file and the node, and says what to look at.
TEST(OnnxImportTest, ANegativeDimNamesTheFileAndTheLikelyCause) {
  Model m(13);
  auto g = m.graph();
  g.Input("x", kFloat, {"1", "1", "samples"}).FloatInitializer("w", {1, 1, 8});
  g.Node("Conv", {"x", "w"}, {"y"}, "conv");
  g.Output("y");
  absl::StatusOr<ImportedModel> ok = Import(m, {.dims = {{"samples", 8}}});
  ASSERT_TRUE(ok.ok()) << ok.status();
  absl::StatusOr<ImportedModel> small = Import(m, {.dims = {{"samples", 4}}});
  ASSERT_EQ(small.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(small.status()),
              ::testing::StartsWith(
                  "test.onnx: node 'conv' (Conv, #0): gives a negative dim "
                  "(-3): an input may be too small for it (the values of "
                  "--dim and --input, or dims defaulted to 1)"));
}

TEST(OnnxImportTest, OpsListEachInputOnce) {
  Model m;
  m.graph().Input("x", kFloat, {"2", "8"}).Add("Relu", {"x"}, {"a"}, "relu");
  std::vector<std::string> many;  // 40 inputs, 20 distinct, repeats spread
  for (int i = 0; i < 20; ++i) {
    const std::string name = "r" + std::to_string(i);
    m.graph().Add("Relu", {"a"}, {name}, "make" + std::to_string(i));
    many.push_back(name);
  }
  std::vector<std::string> inputs;
  for (int i = 0; i < 40; ++i) inputs.push_back(many[(i * 7) % 20]);
  m.graph().Add("Add", {"a", "a"}, {"twice"}, "twice");
  m.graph().Node("Concat", inputs, {"cat"}, "cat").Int("axis", 0);
  m.graph().Output("twice").Output("cat");
  absl::StatusOr<ImportedModel> in = Import(m);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_THAT(FindOp(*in->graph, "twice").inputs(), ElementsAre("a"));
  std::vector<std::string> once;
  for (int i = 0; i < 20; ++i) once.push_back(many[(i * 7) % 20]);
  EXPECT_THAT(FindOp(*in->graph, "cat").inputs(),
              ::testing::ElementsAreArray(once));
}

TEST(OnnxImportTest, MultiOutputOps) {
  Model m;
  m.graph()
      .Input("x", kFloat, {"4", "10"})
      .Int64Initializer("k", {3})
      .Add("TopK", {"x", "k"}, {"values", "indices"}, "topk")
      .Add("Split", {"x"}, {"top", "bottom"}, "split")
      .Output("values")
      .Output("indices")
      .Output("top")
      .Output("bottom");
  absl::StatusOr<ImportedModel> in = Import(m);
  ASSERT_TRUE(in.ok()) << in.status();
  std::map<std::string, int64_t> sizes = Sizes(*in->graph);
  EXPECT_EQ(sizes["values"], 4 * 3 * 4);
  EXPECT_EQ(sizes["indices"], 4 * 3 * 8);
  EXPECT_EQ(sizes["top"], 2 * 10 * 4);
  EXPECT_EQ(sizes["bottom"], 2 * 10 * 4);
  EXPECT_THAT(FindOp(*in->graph, "topk").outputs(),
              ElementsAre("values", "indices"));
  EXPECT_GT(Plan(*in->graph).arena_size_bytes(), 0);
}

TEST(OnnxImportTest, SymbolicDimsNeedAValue) {
  Model m;
  m.graph()
      .Input("x", kFloat, {"batch", "16"})
      .Add("Relu", {"x"}, {"y"}, "relu")
      .Output("y", kFloat, {"batch", "16"});
  absl::StatusOr<ImportedModel> unset = Import(m);
  ASSERT_FALSE(unset.ok());
  EXPECT_EQ(unset.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(unset.status()),
              AllOf(HasSubstr("x (dim 'batch')"), HasSubstr("y (dim 'batch'"),
                    HasSubstr("--dim NAME=VALUE")));

  ModelOptions options;
  options.dims["batch"] = 3;
  absl::StatusOr<ImportedModel> set = Import(m, options);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(Sizes(*set->graph)["x"], 3 * 16 * 4);
  EXPECT_EQ(Sizes(*set->graph)["y"], 3 * 16 * 4);
}

// A model with many values of unknown size: the message says what to do
// first and names a few of them, not all.
TEST(OnnxImportTest, UnknownSizesSayTheFixFirstAndListAFewValues) {
  Model m;
  m.graph().Input("x", kFloat, {"batch", "16"});
  std::string prev = "x";
  for (int i = 1; i <= 30; ++i) {
    const std::string next = absl::StrCat("v", i);
    m.graph().Add("Relu", {prev}, {next});
    prev = next;
  }
  m.graph().Output(prev);
  const std::string msg = Msg(Import(m).status());
  EXPECT_THAT(msg, AllOf(HasSubstr("the size of 31 value(s) is unknown"),
                         HasSubstr("(symbolic dims without a value: batch)"),
                         HasSubstr("x (dim 'batch'), v1 (dim 'batch'"),
                         HasSubstr(" and 27 more"), Not(HasSubstr("v5 ("))));
  EXPECT_LT(msg.find("--dim NAME=VALUE"), msg.find("x (dim 'batch')"));
}

TEST(OnnxImportTest, InputShapeOverride) {
  Model m;
  m.graph()
      .Input("x", kFloat, {"batch", "16"})
      .Add("Relu", {"x"}, {"y"}, "relu")
      .Output("y");
  ModelOptions options;
  options.shapes["x"] = {5, 16};
  absl::StatusOr<ImportedModel> in = Import(m, options);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(Sizes(*in->graph)["y"], 5 * 16 * 4);

  options.shapes["x"] = {5, 16, 1};
  EXPECT_THAT(Msg(Import(m, options).status()),
              HasSubstr("'x' has rank 2 in the model, the flag gives 3"));
  options.shapes = {{"nope", {1}}};
  EXPECT_THAT(Msg(Import(m, options).status()),
              HasSubstr("no value named 'nope'"));
}

TEST(OnnxImportTest, UnnamedDynamicDimIsOneWithAWarning) {
  Model m;
  m.graph()
      .Input("x", kFloat, {"?", "16"})
      .Add("Relu", {"x"}, {"y"}, "relu")
      .Output("y");
  absl::StatusOr<ImportedModel> in = Import(m);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(Sizes(*in->graph)["y"], 64);
  ASSERT_EQ(in->warnings.size(), 1u);
  EXPECT_THAT(in->warnings[0],
              AllOf(HasSubstr("'x'"), HasSubstr("dim 0 is dynamic and unnamed"),
                    HasSubstr("using 1")));
}

// A --dim that looks like one of the model's dims is an error suggesting
// it; one that no dim of the model could be meant by is a warning, so that
// one set of flags serves every model of a pipeline.
TEST(OnnxImportTest, FlagNamesTheModelDoesNotHaveAreErrorsListingValidOnes) {
  Model m;
  m.graph()
      .Input("x", kFloat, {"batch", "seq"})
      .Input("mask", kFloat, {"batch", "seq"})
      .Add("Add", {"x", "mask"}, {"y"})
      .Output("y");
  ModelOptions options;
  options.dims["bach"] = 2;
  absl::Status s = Import(m, options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("--dim bach: did you mean --dim batch?"),
                            HasSubstr("its named dims are: batch, seq")));
  options.dims.clear();
  options.dims["batch=1;seq"] = 512;  // "--dim 'batch=1;seq=512'"
  EXPECT_THAT(Msg(Import(m, options).status()),
              AllOf(HasSubstr("--dim batch=1;seq: the model has no dim"),
                    HasSubstr("separated by commas"),
                    HasSubstr("its named dims are: batch, seq")));
  // Other models' dims, however close to a word of this one's: ignored.
  options.dims = {{"batch", 2}, {"seq", 3}, {"height", 224}, {"batch_size", 1}};
  absl::StatusOr<ImportedModel> in = Import(m, options);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(Sizes(*in->graph)["y"], 2 * 3 * 4);
  EXPECT_THAT(in->warnings,
              ElementsAre(HasSubstr("--dim batch_size ignored"),
                          AllOf(HasSubstr("--dim height ignored"),
                                HasSubstr("its named dims are: batch, seq"))));
  // A one-letter dim is misspelt only in its case.
  Model n;
  n.graph()
      .Input("x", kFloat, {"N", "4"})
      .Add("Relu", {"x"}, {"y"})
      .Output("y");
  options.dims = {{"N", 2}, {"B", 8}};
  absl::StatusOr<ImportedModel> with_n = Import(n, options);
  ASSERT_TRUE(with_n.ok()) << with_n.status();
  EXPECT_THAT(with_n->warnings, ElementsAre(HasSubstr("--dim B ignored")));
  options.dims = {{"n", 2}};
  EXPECT_THAT(Msg(Import(n, options).status()),
              HasSubstr("--dim n: did you mean --dim N?"));
  options.dims.clear();
  options.shapes["inptu"] = {1, 2};
  EXPECT_THAT(Msg(Import(m, options).status()),
              AllOf(HasSubstr("--input inptu"),
                    HasSubstr("its graph inputs are: x, mask")));
}

TEST(OnnxImportTest, InitializersAreWeightsEvenWithMissingExternalData) {
  Model m;
  m.graph()
      .Input("x", kFloat, {"1", "4"})
      .FloatInitializer("w", {4, 8})
      .FloatInitializer("b", {8}, /*external=*/true)
      .Add("MatMul", {"x", "w"}, {"xw"}, "matmul")
      .Add("Add", {"xw", "b"}, {"y"}, "add")
      .Output("y");
  // IR version 3 style: an initializer also listed as a graph input.
  m.graph().Input("w", kFloat, {"4", "8"});
  absl::StatusOr<ImportedModel> in = Import(m);
  ASSERT_TRUE(in.ok()) << in.status();
  std::map<std::string, int64_t> sizes = Sizes(*in->graph);
  EXPECT_EQ(sizes["w"], 128);
  EXPECT_EQ(sizes["b"], 32);
  EXPECT_EQ(sizes["y"], 32);
  EXPECT_THAT(in->graph->inputs(), ElementsAre("x"));
  EXPECT_EQ(in->stats.weights, 2);
  EXPECT_EQ(in->stats.tensors, 5);
  v1::PlanResponse plan = Plan(*in->graph);
  // Weights stay in the model: not in the arena, counted apart.
  ASSERT_EQ(plan.unplanned_size(), 2);
  EXPECT_EQ(plan.unplanned(0).name(), "w");
  EXPECT_EQ(plan.unplanned(0).kind(), "weight");
  EXPECT_EQ(plan.unplanned(1).name(), "b");
  EXPECT_EQ(plan.weights_bytes(), 128 + 32);
  EXPECT_FALSE(FindAssignment(plan, "xw").persistent());
  EXPECT_EQ(FindAssignment(plan, "x").kind(), "input");
}

// Older exporters (IR < 4) list every initializer among the graph inputs,
// declared with dims of their own: the initializer's type and dims count,
// and it is a weight, not an input to plan.
TEST(OnnxImportTest, AnInitializerAlsoListedAsAnInputIsAWeightOfItsOwnShape) {
  Model m;
  m.proto().set_ir_version(3);
  m.graph()
      .Input("x", kFloat, {"1", "4"})
      .Input("w", kFloat, {"rows", "cols"})
      .FloatInitializer("w", {4, 8})
      .Add("MatMul", {"x", "w"}, {"y"}, "matmul")
      .Output("y");
  absl::StatusOr<ImportedModel> in = Import(m);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_THAT(in->graph->inputs(), ElementsAre("x"));
  std::map<std::string, int64_t> sizes = Sizes(*in->graph);
  EXPECT_EQ(sizes["w"], 128);
  EXPECT_EQ(sizes["y"], 32);
  EXPECT_TRUE(in->graph->tensors(1).constant());
  EXPECT_EQ(in->stats.weights, 1);
  EXPECT_THAT(in->warnings, IsEmpty());
  v1::PlanResponse plan = Plan(*in->graph);
  ASSERT_EQ(plan.unplanned_size(), 1);
  EXPECT_EQ(plan.unplanned(0).name(), "w");
  EXPECT_EQ(plan.unplanned(0).kind(), "weight");
  EXPECT_EQ(plan.weights_bytes(), 128);
  // Its declared dims are no dims of the model: a --dim for them is
  // ignored, with a warning.
  ModelOptions options;
  options.dims["rows"] = 4;
  absl::StatusOr<ImportedModel> with_dim = Import(m, options);
  ASSERT_TRUE(with_dim.ok()) << with_dim.status();
  EXPECT_EQ(Sizes(*with_dim->graph)["y"], 32);
  EXPECT_THAT(with_dim->warnings,
              ElementsAre(AllOf(HasSubstr("--dim rows ignored"),
                                HasSubstr("it has no named dims"))));
}

// weights_bytes counts what the file stores: an Identity of an initializer
// (torchvision exports have them) is a weight left out of the arena, but
// its bytes are the initializer's, not stored twice.
TEST(OnnxImportTest, WeightsBytesCountOnlyBytesStoredInTheFile) {
  Model m;
  GraphBuilder g = m.graph();
  g.Input("x", kFloat, {"1", "4"}).FloatInitializer("w", {4, 8});
  g.Add("Identity", {"w"}, {"w_copy"}, "copy");
  g.Node("Constant", {}, {"b"}, "b").Tensor("value", FloatTensor({8}));
  g.Add("MatMul", {"x", "w_copy"}, {"xw"}).Add("Add", {"xw", "b"}, {"y"});
  g.Output("y");
  absl::StatusOr<ImportedModel> in = Import(m);
  ASSERT_TRUE(in.ok()) << in.status();
  v1::PlanResponse plan = Plan(*in->graph);
  std::vector<std::string> unplanned;
  for (const v1::UnplannedTensor& u : plan.unplanned()) {
    unplanned.push_back(u.name());
  }
  EXPECT_THAT(unplanned, ElementsAre("w", "w_copy", "b"));
  EXPECT_EQ(plan.weights_bytes(), 128 + 32);
  // The summary counts the same bytes.
  absl::StatusOr<ModelSummary> s = SummarizeOnnx(m.Bytes(), "m.onnx");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->weight_bytes, plan.weights_bytes());
}

// An If on a condition that is data (a graph input), whose branches give
// different shapes, one of them reading an outer value that no main-graph
// node reads.
Model IfModel() {
  Model m;
  GraphBuilder g = m.graph();
  g.Input("cond", kBool, {})
      .Input("x", kFloat, {"4"})
      .Add("Relu", {"x"}, {"outer"}, "relu");
  OnnxTestNode node = g.Node("If", {"cond"}, {"z"}, "if");
  GraphBuilder(node.Graph("then_branch"))
      .Add("Sigmoid", {"outer"}, {"then_mid"})
      .Add("Neg", {"then_mid"}, {"then_out"})
      .Output("then_out");
  GraphBuilder else_branch(node.Graph("else_branch"));
  else_branch.Ints("else_pads", {0, 2})
      .Add("Pad", {"x", "else_pads"}, {"else_out"})
      .Output("else_out");
  g.Add("Neg", {"z"}, {"y"}, "neg").Output("y");
  return m;
}

// The op names of a graph, in order.
std::vector<std::string> OpNames(const v1::Graph& g) {
  std::vector<std::string> names;
  for (const v1::Op& op : g.ops()) names.push_back(op.name());
  return names;
}

TEST(OnnxImportTest, IfOnDataPlansBothBranchesOneAfterTheOther) {
  absl::StatusOr<ImportedModel> in = Import(IfModel());
  ASSERT_TRUE(in.ok()) << in.status();
  const v1::Graph& g = *in->graph;
  EXPECT_THAT(OpNames(g),
              ElementsAre("relu", "if/then_branch/enter", "Sigmoid_0", "Neg_1",
                          "if/then_branch/exit", "if/else_branch/enter",
                          "else_pads", "Pad_1", "if/else_branch/exit", "neg"));
  // Branches give 4 and 6 floats: the output is sized for 6.
  std::map<std::string, int64_t> sizes = Sizes(g);
  EXPECT_EQ(sizes["z"], 24);
  EXPECT_EQ(sizes["y"], 24);
  EXPECT_EQ(sizes["then_mid"], 16);
  EXPECT_EQ(sizes["else_out"], 24);
  EXPECT_THAT(FindOp(g, "if/then_branch/enter").inputs(),
              ElementsAre("cond", "outer"));
  EXPECT_THAT(FindOp(g, "if/else_branch/enter").inputs(), ElementsAre("x"));
  EXPECT_THAT(FindOp(g, "if/then_branch/exit").inputs(),
              ElementsAre("then_out", "outer"));
  EXPECT_THAT(FindOp(g, "if/then_branch/exit").outputs(), IsEmpty());
  EXPECT_THAT(FindOp(g, "if/else_branch/exit").outputs(), ElementsAre("z"));
  EXPECT_EQ(in->stats.control_flow_nodes, 1);
  EXPECT_EQ(in->stats.subgraphs, 2);
  EXPECT_EQ(in->stats.subgraph_values, 4);
  EXPECT_THAT(in->warnings,
              ElementsAre(HasSubstr("node 'if' (If, #1): the branches give 'z' "
                                    "different shapes; planning the larger (6 "
                                    "elements)")));
  v1::PlanResponse plan = Plan(g);
  // outer lives until the then branch's exit (step 4) reads it.
  EXPECT_EQ(FindAssignment(plan, "outer").last_step(), 4);
  // The else branch's Constant is a weight, kept out of the arena.
  ASSERT_EQ(plan.unplanned_size(), 1);
  EXPECT_EQ(plan.unplanned(0).name(), "else_pads");
  EXPECT_EQ(plan.unplanned(0).kind(), "weight");
  // The two branches never live at once: they may share memory.
  const v1::Assignment& a = FindAssignment(plan, "then_mid");
  const v1::Assignment& b = FindAssignment(plan, "else_out");
  EXPECT_LT(a.last_step(), b.first_step());
}

// An If whose condition comes from shapes: x's batch dim is 1 or not.
Model ShapeIfModel() {
  Model m;
  GraphBuilder g = m.graph();
  g.Input("x", kFloat, {"batch", "8"}).Add("Shape", {"x"}, {"shape"});
  g.Ints("zero", {0}, true).Add("Gather", {"shape", "zero"}, {"b"});
  g.Ints("one", {1}, true).Add("Equal", {"b", "one"}, {"is_one"});
  OnnxTestNode node = g.Node("If", {"is_one"}, {"y"}, "squeeze_if");
  GraphBuilder then_branch(node.Graph("then_branch"));
  then_branch.Ints("axes", {0}).Add("Squeeze", {"x", "axes"}, {"squeezed"});
  then_branch.Output("squeezed");
  GraphBuilder(node.Graph("else_branch"))
      .Add("Identity", {"x"}, {"same"})
      .Output("same");
  g.Output("y");
  return m;
}

TEST(OnnxImportTest, IfOnShapesPlansTheBranchThatRuns) {
  ModelOptions options;
  options.dims["batch"] = 1;
  absl::StatusOr<ImportedModel> one = Import(ShapeIfModel(), options);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_THAT(OpNames(*one->graph),
              ElementsAre("Shape_0", "zero", "Gather_2", "one", "Equal_4",
                          "squeeze_if/then_branch/enter", "axes", "Squeeze_1",
                          "squeeze_if/then_branch/exit"));
  EXPECT_EQ(Sizes(*one->graph)["y"], 32);
  EXPECT_THAT(one->warnings,
              ElementsAre(HasSubstr("1 If node(s) run one branch only with "
                                    "these shapes: the other branch's 1 "
                                    "value(s) are not planned")));
  options.dims["batch"] = 3;
  absl::StatusOr<ImportedModel> three = Import(ShapeIfModel(), options);
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_THAT(OpNames(*three->graph),
              ::testing::Contains("squeeze_if/else_branch/exit"));
  EXPECT_THAT(OpNames(*three->graph),
              Not(::testing::Contains("squeeze_if/then_branch/exit")));
  EXPECT_EQ(Sizes(*three->graph)["y"], 96);
  EXPECT_GT(Plan(*three->graph).arena_size_bytes(), 0);
}

TEST(OnnxImportTest, AnIfBranchThatCannotRunWithTheseShapesIsLeftOut) {
  Model m;
  GraphBuilder g = m.graph();
  g.Input("sr", kInt64, {}).Input("x", kFloat, {"512"});
  g.Ints("k", {16000}, true).Add("Equal", {"sr", "k"}, {"is16k"});
  OnnxTestNode node = g.Node("If", {"is16k"}, {"y"}, "rate");
  GraphBuilder(node.Graph("then_branch"))
      .Add("Relu", {"x"}, {"ok"})
      .Output("ok");
  GraphBuilder else_branch(node.Graph("else_branch"));
  else_branch.Ints("shape", {3, -1}).Add("Reshape", {"x", "shape"}, {"bad"});
  else_branch.Output("bad");
  g.Output("y");
  absl::StatusOr<ImportedModel> in = Import(m);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_THAT(OpNames(*in->graph),
              Not(::testing::Contains("rate/else_branch/enter")));
  EXPECT_THAT(in->warnings,
              ::testing::Contains(AllOf(
                  HasSubstr("node 'rate' (If, #2): its else_branch cannot run "
                            "with these shapes"),
                  HasSubstr("cannot reshape 512 elements"))));
  EXPECT_EQ(Sizes(*in->graph)["y"], 2048);
}

// A Loop running `trips` times (a Constant), carrying a value and
// stacking a scan output; its body reads an outer value.
Model LoopModel(int64_t trips) {
  Model m;
  GraphBuilder g = m.graph();
  g.Input("x", kFloat, {"4"}).Add("Relu", {"x"}, {"outer"}, "relu");
  g.Ints("m", {trips}, true);
  g.Node("Constant", {}, {"go"}).Tensor("value", [] {
    onnx::TensorProto t;
    t.set_data_type(kBool);
    t.add_int32_data(1);
    return t;
  }());
  OnnxTestNode loop =
      g.Node("Loop", {"m", "go", "x"}, {"final", "stack"}, "loop");
  GraphBuilder b(loop.Graph("body"));
  b.Input("i", kInt64, {}).Input("c", kBool, {}).Input("v", kFloat, {"4"});
  b.Add("Add", {"v", "outer"}, {"v_next"});
  b.Add("Identity", {"c"}, {"c_out"});
  b.Ints("two", {2, 2}).Add("Reshape", {"v_next", "two"}, {"row2"});
  b.Output("c_out").Output("v_next").Output("row2");
  g.Output("final").Output("stack");
  return m;
}

TEST(OnnxImportTest, LoopBodyIsPlannedAsOneIterationCarryingItsValues) {
  absl::StatusOr<ImportedModel> in = Import(LoopModel(5));
  ASSERT_TRUE(in.ok()) << in.status();
  const v1::Graph& g = *in->graph;
  std::map<std::string, int64_t> sizes = Sizes(g);
  EXPECT_EQ(sizes["final"], 16);
  EXPECT_EQ(sizes["stack"], 5 * 4 * 4);  // trip count x each row2
  EXPECT_EQ(sizes["i"], 8);
  EXPECT_EQ(sizes["v"], 16);
  EXPECT_THAT(FindOp(g, "loop/body/enter").inputs(),
              ElementsAre("m", "go", "x", "outer"));
  EXPECT_THAT(FindOp(g, "loop/body/enter").outputs(),
              ElementsAre("i", "c", "v", "stack"));
  EXPECT_THAT(FindOp(g, "loop/body/exit").outputs(), ElementsAre("final"));
  v1::PlanResponse plan = Plan(g);
  const std::vector<std::string> ops = OpNames(g);
  const int enter =
      std::find(ops.begin(), ops.end(), "loop/body/enter") - ops.begin();
  const int exit =
      std::find(ops.begin(), ops.end(), "loop/body/exit") - ops.begin();
  // Carried values and the scan output live across the whole body; the
  // outer value the body reads too.
  for (const char* name : {"v", "i", "c"}) {
    EXPECT_EQ(FindAssignment(plan, name).first_step(), enter) << name;
    EXPECT_EQ(FindAssignment(plan, name).last_step(), exit) << name;
  }
  EXPECT_LE(FindAssignment(plan, "stack").first_step(), enter);
  EXPECT_GE(FindAssignment(plan, "outer").last_step(), exit);
  // "m" and "go" are Constants: weights.
  EXPECT_EQ(plan.unplanned_size(), 3);  // m, go, two
}

TEST(OnnxImportTest, LoopWithoutAKnownTripCountNeedsAShapeThenPlans) {
  Model m = LoopModel(5);
  // The trip count becomes a graph input: data.
  onnx::GraphProto* g = m.proto().mutable_graph();
  g->mutable_node(1)->set_op_type("Identity");
  g->mutable_node(1)->clear_attribute();
  g->mutable_node(1)->add_input("trip");
  GraphBuilder(g).Input("trip", kInt64, {});
  absl::Status s = Import(m).status();
  EXPECT_THAT(Msg(s),
              AllOf(HasSubstr("1 value(s)"), HasSubstr("stack ("),
                    HasSubstr("trip count is computed from data"),
                    HasSubstr("node 'loop' (Loop, #3)"), HasSubstr("--input")));
  ModelOptions options;
  options.shapes["stack"] = {7, 2, 2};
  absl::StatusOr<ImportedModel> in = Import(m, options);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(Sizes(*in->graph)["stack"], 112);
  EXPECT_GT(Plan(*in->graph).arena_size_bytes(), 0);
}

TEST(OnnxImportTest, LoopWithAHugeTripCountIsAnErrorNotAnAllocation) {
  absl::Status s = Import(LoopModel(int64_t{1} << 45)).status();
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("node 'loop' (Loop"),
                            HasSubstr("'stack'"), HasSubstr("1 TiB")));
}

TEST(OnnxImportTest, ScanStatesAndScanOutputs) {
  Model m(13);
  GraphBuilder g = m.graph();
  g.Input("init", kFloat, {"3"}).Input("xs", kFloat, {"steps", "3"});
  OnnxTestNode scan = g.Node("Scan", {"init", "xs"}, {"last", "ys"}, "scan");
  scan.Int("num_scan_inputs", 1);
  GraphBuilder b(scan.Graph("body"));
  b.Input("state", kFloat, {"3"}).Input("x_t", kFloat, {"3"});
  b.Add("Add", {"state", "x_t"}, {"sum"});
  b.Add("Identity", {"sum"}, {"out_t"});
  b.Output("sum").Output("out_t");
  g.Output("last").Output("ys");
  ModelOptions options;
  options.dims["steps"] = 6;
  absl::StatusOr<ImportedModel> in = Import(m, options);
  ASSERT_TRUE(in.ok()) << in.status();
  std::map<std::string, int64_t> sizes = Sizes(*in->graph);
  EXPECT_EQ(sizes["last"], 12);
  EXPECT_EQ(sizes["ys"], 6 * 3 * 4);
  EXPECT_EQ(sizes["x_t"], 12);
  EXPECT_THAT(FindOp(*in->graph, "scan/body/exit").inputs(),
              ::testing::Contains("xs"));  // scanned all along
  EXPECT_GT(Plan(*in->graph).arena_size_bytes(), 0);
}

// Found by fuzzing: ONNX 1.12's Scan inference reads num_scan_inputs
// without checking it is there, and crashes.
TEST(OnnxImportTest, MissingRequiredAttributesAreErrorsBeforeOnnxSeesThem) {
  Model m(13);
  GraphBuilder g = m.graph();
  g.Input("init", kFloat, {"3"}).Input("xs", kFloat, {"5", "3"});
  OnnxTestNode scan = g.Node("Scan", {"init", "xs"}, {"last", "ys"}, "scan");
  scan.Int("num_scan_iCrops", 1);
  GraphBuilder b(scan.Graph("body"));
  b.Input("st", kFloat, {"3"}).Input("xt", kFloat, {"3"});
  b.Add("Add", {"st", "xt"}, {"sum"}).Add("Identity", {"sum"}, {"ot"});
  b.Output("sum").Output("ot");
  g.Output("last").Output("ys");
  EXPECT_THAT(Msg(Import(m).status()),
              HasSubstr("node 'scan' (Scan): attribute 'num_scan_inputs' is "
                        "missing"));
  Model wrong(13);
  wrong.graph().Input("x", kFloat, {"1", "1", "4", "4"});
  wrong.graph().Node("MaxPool", {"x"}, {"y"}, "pool").Float("kernel_shape", 2);
  wrong.graph().Output("y");
  EXPECT_THAT(Msg(Import(wrong).status()),
              HasSubstr("node 'pool' (MaxPool): attribute 'kernel_shape' is "
                        "not of its type"));
}

// Found by fuzzing: ONNX 1.12 reads tensor data without checking its
// length against the dims (raw bytes too few, or no data at all).
TEST(OnnxImportTest, TensorDataThatDoesNotMatchItsDimsIsAnError) {
  Model m(13);
  GraphBuilder g = m.graph();
  g.Input("x", kFloat, {"2", "6"});
  onnx::TensorProto shape = OnnxInt64Tensor({-1, 2});
  shape.set_raw_data("s2");  // 2 bytes for two int64, beside typed data
  g.Node("Constant", {}, {"shape"}, "bad").Tensor("value", shape);
  g.Add("Reshape", {"x", "shape"}, {"y"}).Output("y");
  EXPECT_THAT(Msg(Import(m).status()),
              AllOf(HasSubstr("node 'bad' (Constant, #0)"),
                    HasSubstr("tensor '' holds 2 bytes of data that do not "
                              "match its dims and type")));
  // A k with dims but no data: unknown, never read past its end.
  Model empty(13);
  GraphBuilder e = empty.graph();
  e.Input("x", kFloat, {"4", "10"});
  onnx::TensorProto k;
  k.set_data_type(kInt64);
  k.add_dims(1);
  e.Node("Constant", {}, {"k"}).Tensor("value", k);
  e.Add("TopK", {"x", "k"}, {"v", "i"}, "topk").Output("v").Output("i");
  EXPECT_THAT(Msg(Import(empty).status()),
              AllOf(HasSubstr("v ("), HasSubstr("node 'topk'")));
}

TEST(OnnxImportTest, SubgraphNamesThatClashArePrefixedWithTheirPath) {
  Model m;
  GraphBuilder g = m.graph();
  g.Input("cond", kBool, {}).Input("x", kFloat, {"4"});
  g.Add("Relu", {"x"}, {"t"}, "relu");
  OnnxTestNode node = g.Node("If", {"cond"}, {"y"}, "if");
  // Both branches name their value "t", like the main graph.
  GraphBuilder(node.Graph("then_branch")).Add("Neg", {"x"}, {"t"}).Output("t");
  GraphBuilder(node.Graph("else_branch"))
      .Add("Abs", {"x"}, {"e"})
      .Add("Neg", {"e"}, {"t"})
      .Output("t");
  g.Add("Add", {"y", "t"}, {"z"});
  // A main-graph value defined after the If keeps its name too.
  g.Add("Relu", {"z"}, {"e"}).Output("e");
  absl::StatusOr<ImportedModel> in = Import(m);
  ASSERT_TRUE(in.ok()) << in.status();
  std::map<std::string, int64_t> sizes = Sizes(*in->graph);
  EXPECT_EQ(sizes.count("t"), 1u);
  EXPECT_EQ(sizes.count("if/then_branch/t"), 1u);
  EXPECT_EQ(sizes.count("if/else_branch/t"), 1u);
  EXPECT_EQ(sizes.count("e"), 1u);
  EXPECT_EQ(sizes.count("if/else_branch/e"), 1u);
  EXPECT_THAT(in->graph->outputs(), ElementsAre("e"));
  EXPECT_THAT(FindOp(*in->graph, "Add_2").inputs(), ElementsAre("y", "t"));
  EXPECT_GT(Plan(*in->graph).arena_size_bytes(), 0);
}

TEST(OnnxImportTest, DeeplyNestedSubgraphsAreAnErrorNamingTheNode) {
  Model m;
  GraphBuilder g = m.graph();
  g.Input("c", kBool, {}).Input("x", kFloat, {"4"});
  onnx::GraphProto* current = m.proto().mutable_graph();
  for (int depth = 0; depth < 20; ++depth) {
    OnnxTestNode n =
        GraphBuilder(current).Node("If", {"c"}, {"y" + std::to_string(depth)},
                                   "if" + std::to_string(depth));
    GraphBuilder(n.Graph("else_branch"))
        .Add("Identity", {"x"}, {"e" + std::to_string(depth)})
        .Output("e" + std::to_string(depth));
    current = n.Graph("then_branch");
  }
  GraphBuilder(current).Add("Identity", {"x"}, {"deep"}).Output("deep");
  // Each then branch outputs its inner If's result.
  onnx::GraphProto* walk = m.proto().mutable_graph();
  std::vector<onnx::GraphProto*> thens;
  for (int depth = 0; depth < 20; ++depth) {
    onnx::NodeProto* n = walk->mutable_node(walk->node_size() - 1);
    for (auto& a : *n->mutable_attribute()) {
      if (a.name() == "then_branch") walk = a.mutable_g();
    }
    thens.push_back(walk);
  }
  for (int depth = 0; depth + 1 < 20; ++depth) {
    thens[depth]->add_output()->set_name("y" + std::to_string(depth + 1));
  }
  g.Output("y0");
  absl::Status s = Import(m).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("node 'if16' (If"),
                            HasSubstr("nested more than 16 deep")));
}

// Weights are initializers, Constant outputs and what is folded from them
// alone; values computed from shapes are activations.
TEST(OnnxImportTest, ConstantsAndFoldedValuesAreWeights) {
  Model m;
  GraphBuilder g = m.graph();
  g.Input("x", kFloat, {"2", "8"}).FloatInitializer("w", {8, 8});
  g.Node("Transpose", {"w"}, {"wt"}).Ints("perm", {1, 0});  // folded
  g.Node("Constant", {}, {"bias"}).Tensor("value", FloatTensor({8}));
  g.Node("Cast", {"bias"}, {"bias16"}).Int("to", onnx::TensorProto::FLOAT16);
  g.Add("Shape", {"x"}, {"shape"});  // depends on the input: not a weight
  g.Add("MatMul", {"x", "wt"}, {"xw"}).Add("Add", {"xw", "bias"}, {"y"});
  g.Add("Reshape", {"y", "shape"}, {"z"}).Output("z").Output("bias16");
  absl::StatusOr<ImportedModel> in = Import(m);
  ASSERT_TRUE(in.ok()) << in.status();
  std::map<std::string, bool> constant;
  for (const v1::Tensor& t : in->graph->tensors())
    constant[t.name()] = t.constant();
  EXPECT_TRUE(constant["w"]);
  EXPECT_TRUE(constant["wt"]);
  EXPECT_TRUE(constant["bias"]);
  EXPECT_TRUE(constant["bias16"]);
  EXPECT_FALSE(constant["shape"]);
  EXPECT_FALSE(constant["xw"]);
  EXPECT_EQ(in->stats.weights, 4);
  // Folded values are not stored in the file.
  std::map<std::string, bool> folded;
  for (const v1::Tensor& t : in->graph->tensors())
    folded[t.name()] = t.folded();
  EXPECT_FALSE(folded["w"]);
  EXPECT_TRUE(folded["wt"]);
  EXPECT_FALSE(folded["bias"]);
  EXPECT_TRUE(folded["bias16"]);
  v1::PlanResponse plan = Plan(*in->graph);
  // bias16 is a graph output: planned (persistent) although constant.
  EXPECT_EQ(FindAssignment(plan, "bias16").kind(), "output");
  // wt is left out of the arena, but only what the file stores counts: w
  // and bias.
  ASSERT_EQ(plan.unplanned_size(), 3);
  EXPECT_EQ(plan.unplanned(1).name(), "wt");
  EXPECT_EQ(plan.unplanned(1).kind(), "weight");
  EXPECT_EQ(plan.weights_bytes(), 256 + 32);
  EXPECT_EQ(FindAssignment(plan, "shape").kind(), "activation");
}

TEST(OnnxSummaryTest, InputsOutputsDimsWeightsAndOps) {
  Model m;
  GraphBuilder g = m.graph();
  g.Input("x", kFloat, {"batch", "seq", "768"})
      .Input("mask", kInt64, {"?", "seq"});
  g.FloatInitializer("w", {768, 64});
  g.Add("MatMul", {"x", "w"}, {"h"});
  g.Ints("flat", {-1, 64}).Add("Reshape", {"h", "flat"}, {"y"});
  g.Output("y").Output("mask");
  m.proto().set_producer_name("pytorch");
  m.proto().set_producer_version("2.1");
  absl::StatusOr<ModelSummary> s = SummarizeOnnx(m.Bytes(), "m.onnx");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->producer, "pytorch 2.1");
  EXPECT_EQ(s->version, "opset 13");
  ASSERT_EQ(s->inputs.size(), 2u);
  EXPECT_EQ(s->inputs[0].name, "x");
  EXPECT_EQ(s->inputs[0].element_type, "float32");
  EXPECT_THAT(s->inputs[0].dims, ElementsAre("batch", "seq", "768"));
  EXPECT_EQ(s->inputs[0].bytes, -1);
  EXPECT_THAT(s->inputs[1].dims, ElementsAre("?", "seq"));
  ASSERT_EQ(s->outputs.size(), 2u);
  EXPECT_THAT(s->outputs[0].dims, ElementsAre("batch*seq", "64"));
  EXPECT_EQ(s->outputs[1].element_type, "int64");
  EXPECT_THAT(s->symbolic_dims, ElementsAre("batch", "seq"));
  // Every name --dim can set, as the import takes them: an output's too
  // (inspect listed the inputs' only, where --dim's error listed both).
  Model out(13);
  out.graph().Input("x", kFloat, {"n", "4"});
  out.graph().Add("Relu", {"x"}, {"y"});
  out.graph().Output("y", kFloat, {"n_out", "4"});
  absl::StatusOr<ModelSummary> with_output = SummarizeOnnx(out.Bytes(), "o");
  ASSERT_TRUE(with_output.ok()) << with_output.status();
  EXPECT_THAT(with_output->symbolic_dims, ElementsAre("n", "n_out"));
  // The unnamed dim the import sets to 1, and how to set it instead.
  ASSERT_EQ(s->defaulted_dims.size(), 1u);
  EXPECT_EQ(s->defaulted_dims[0].value, "mask");
  EXPECT_EQ(s->defaulted_dims[0].dim, 0);
  EXPECT_EQ(s->defaulted_dims[0].size, 1);
  EXPECT_EQ(s->defaulted_dims[0].flag, "--input mask=SHAPE");
  EXPECT_EQ(s->weight_bytes, 768 * 64 * 4 + 2 * 8);
  EXPECT_EQ(s->ops, 3);
  EXPECT_EQ(s->subgraphs, 1);
  EXPECT_EQ(s->op_types, (std::map<std::string, int64_t>{
                             {"Constant", 1}, {"MatMul", 1}, {"Reshape", 1}}));
  // Subgraphs count, and their ops.
  absl::StatusOr<ModelSummary> with_if = SummarizeOnnx(IfModel().Bytes(), "if");
  ASSERT_TRUE(with_if.ok()) << with_if.status();
  EXPECT_EQ(with_if->subgraphs, 3);
  EXPECT_EQ(with_if->ops, 7);
  EXPECT_EQ(with_if->weight_bytes, 16);
  EXPECT_THAT(Msg(SummarizeOnnx("garbage", "g.onnx").status()),
              HasSubstr("not an ONNX model"));
}

TEST(OnnxImportTest, StringTensorsAreRejectedByName) {
  Model m;
  m.graph()
      .Input("names", onnx::TensorProto::STRING, {"2"})
      .Add("Identity", {"names"}, {"y"})
      .Output("y");
  absl::Status s = Import(m).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("'names'"), HasSubstr("strings")));
}

TEST(OnnxImportTest, NotAnOnnxFile) {
  for (const std::string& bytes :
       {std::string("{\"graph\": {\"tensors\": []}}\n"), std::string(),
        std::string("\x08\x07", 2)}) {
    absl::Status s = ImportOnnx(bytes, "model.onnx", {}).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Msg(s),
                AllOf(HasSubstr("model.onnx"), HasSubstr("not an ONNX model")));
  }
}

TEST(OnnxImportTest, TruncatedFilesAreErrorsNotCrashes) {
  Model m;
  m.graph()
      .Input("x", kFloat, {"1", "4"})
      .FloatInitializer("w", {4, 8})
      .Add("MatMul", {"x", "w"}, {"xw"}, "matmul")
      .Add("Relu", {"xw"}, {"y"}, "relu")
      .Output("y");
  const std::string bytes = m.Bytes();
  ASSERT_TRUE(ImportOnnx(bytes, "m.onnx", {}).ok());
  for (size_t cut = 1; cut < bytes.size(); ++cut) {
    absl::StatusOr<ImportedModel> in =
        ImportOnnx(bytes.substr(0, cut), "m.onnx", {});
    if (in.ok()) {
      // Cut between whole fields: the rest must still make a valid graph.
      EXPECT_GT(Plan(*in->graph).arena_size_bytes(), 0) << cut;
    } else {
      EXPECT_EQ(in.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
  absl::Status half =
      ImportOnnx(bytes.substr(0, bytes.size() / 2), "m.onnx", {}).status();
  EXPECT_THAT(Msg(half), HasSubstr("m.onnx"));
}

TEST(OnnxImportTest, UnknownOpDomainNamesTheNodeAndTensor) {
  Model m;
  onnx::OperatorSetIdProto* o = m.proto().add_opset_import();
  o->set_domain("com.example");
  o->set_version(1);
  m.graph()
      .Input("x", kFloat, {"4"})
      .Node("Frobnicate", {"x"}, {"y"}, "frob")
      .proto()
      ->set_domain("com.example");
  m.graph().Output("y");
  absl::Status s = Import(m).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("y (no type, from node 'frob' "
                                      "(com.example.Frobnicate, #0)"),
                            HasSubstr("unknown op or domain 'com.example'")));
  m.proto().mutable_opset_import()->RemoveLast();
  // ONNX itself refuses a domain the model does not import.
  EXPECT_THAT(Msg(Import(m).status()),
              AllOf(HasSubstr("shape inference failed"), HasSubstr("frob"),
                    HasSubstr("com.example")));
}

// Found by fuzzing: ONNX 1.12's inference dereferences the type of an
// input nobody defines; the check runs before it, in subgraphs too.
TEST(OnnxImportTest, UndefinedReadsAreCaughtBeforeOnnxInference) {
  Model m(13);
  GraphBuilder g = m.graph();
  g.Input("x", kFloat, {"4"}).Input("c", kBool, {});
  g.Add("ConstantOfShape", {"ps"}, {"y"}, "fill").Output("y");
  EXPECT_THAT(Msg(Import(m).status()),
              HasSubstr("node 'fill' (ConstantOfShape, #0) reads 'ps', which "
                        "is no graph input"));
  Model sub(13);
  GraphBuilder s = sub.graph();
  s.Input("x", kFloat, {"4"}).Input("c", kBool, {});
  OnnxTestNode node = s.Node("If", {"c"}, {"y"}, "if");
  GraphBuilder(node.Graph("then_branch"))
      .Add("Relu", {"ghost"}, {"t"}, "relu")
      .Output("t");
  GraphBuilder(node.Graph("else_branch")).Add("Relu", {"x"}, {"e"}).Output("e");
  s.Output("y");
  EXPECT_THAT(Msg(Import(sub).status()),
              HasSubstr("node 'relu' (Relu, #0) in if/then_branch reads "
                        "'ghost'"));
}

// Found by fuzzing: ONNX 1.12's data propagation crashes on the untyped
// output of an op it has no schema for, fed to Reshape or Slice.
TEST(OnnxImportTest, UntypedValuesFeedingShapeOpsAreReportedNotCrashes) {
  Model m(21);
  GraphBuilder g = m.graph();
  g.Input("x", kFloat, {"2", "6"});
  g.Node("ConsTant", {}, {"p"}, "typo")
      .Tensor("value", OnnxInt64Tensor({3, 4}));
  g.Ints("s", {2}).Add("Reshape", {"p", "s"}, {"p2"});
  g.Ints("b", {0}).Ints("e", {1}).Add("Slice", {"p2", "b", "e"}, {"p3"});
  g.Add("Reshape", {"x", "p3"}, {"y"}).Output("y");
  EXPECT_THAT(Msg(Import(m).status()),
              AllOf(HasSubstr("p (no type, from node 'typo' (ConsTant, #0): "
                              "op ConsTant of opset 21 is not in the opsets "
                              "ONNX 1.12 knows"),
                    HasSubstr("y (")));
}

TEST(OnnxImportTest, ReadingAnUndefinedValueNamesIt) {
  Model m;
  m.graph()
      .Input("x", kFloat, {"4"})
      .Add("Add", {"x", "ghost"}, {"y"}, "add")
      .Output("y", kFloat, {"4"});
  EXPECT_THAT(Msg(Import(m).status()),
              HasSubstr("node 'add' (Add, #0) reads 'ghost'"));
}

TEST(OnnxImportTest, ShapeInferenceCannotSizeAReshapeByARuntimeShape) {
  Model m;
  m.graph()
      .Input("x", kFloat, {"2", "6"})
      .Input("shape", kInt64, {"2"})
      .Add("Reshape", {"x", "shape"}, {"reshaped"}, "reshape")
      .Add("Relu", {"reshaped"}, {"y"}, "relu")
      .Output("y");
  absl::Status s = Import(m).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("reshaped ("), HasSubstr("y (")));
  EXPECT_THAT(Msg(s), Not(HasSubstr("x (")));
  ModelOptions options;
  options.shapes["reshaped"] = {3, 4};
  absl::StatusOr<ImportedModel> in = Import(m, options);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(Sizes(*in->graph)["y"], 48);
}

TEST(OnnxImportTest, ConstantShapesArePropagated) {
  Model m;
  m.graph()
      .Input("x", kFloat, {"batch", "6"})
      .Int64Initializer("shape", {-1, 3})
      .Add("Reshape", {"x", "shape"}, {"y"}, "reshape")
      .Output("y");
  ModelOptions options;
  options.dims["batch"] = 4;
  absl::StatusOr<ImportedModel> in = Import(m, options);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(Sizes(*in->graph)["y"], 4 * 6 * 4);
}

TEST(OnnxImportTest, GraphOutputNobodyProducesIsAnError) {
  Model m;
  m.graph()
      .Input("x", kFloat, {"4"})
      .Add("Relu", {"x"}, {"y"}, "relu")
      .Output("y")
      .Output("lost", kFloat, {"4"});
  EXPECT_THAT(Msg(Import(m).status()),
              HasSubstr("graph output 'lost' is produced by no node"));
}

TEST(OnnxImportTest, UnnamedAndRepeatedNodeNamesBecomeUnique) {
  Model m;
  m.graph()
      .Input("x", kFloat, {"4"})
      .Add("Relu", {"x"}, {"a"})
      .Add("Relu", {"a"}, {"b"}, "dup")
      .Add("Relu", {"b"}, {"y"}, "dup")
      .Output("y");
  absl::StatusOr<ImportedModel> in = Import(m);
  ASSERT_TRUE(in.ok()) << in.status();
  ASSERT_EQ(in->graph->ops_size(), 3);
  EXPECT_EQ(in->graph->ops(0).name(), "Relu_0");
  EXPECT_EQ(in->graph->ops(1).name(), "dup");
  EXPECT_EQ(in->graph->ops(2).name(), "dup_2");
}

TEST(OnnxImportTest, EmptyTensorsAreNotPlanned) {
  Model m;
  m.graph()
      .Input("x", kFloat, {"4"})
      .Input("none", kFloat, {"0", "4"})
      .Add("Relu", {"x"}, {"y"}, "relu")
      .Add("Relu", {"none"}, {"none_out"}, "relu_empty")
      .Output("y")
      .Output("none_out");
  absl::StatusOr<ImportedModel> in = Import(m);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->stats.empty_values, 2);
  EXPECT_THAT(in->warnings,
              ElementsAre(HasSubstr("2 value(s) with zero elements hold no "
                                    "memory and are not planned: none, "
                                    "none_out")));
  EXPECT_EQ(Sizes(*in->graph).count("none"), 0u);
  EXPECT_THAT(in->graph->outputs(), ElementsAre("y"));
  EXPECT_THAT(FindOp(*in->graph, "relu_empty").inputs(), IsEmpty());
  EXPECT_GT(Plan(*in->graph).arena_size_bytes(), 0);
}

TEST(OnnxFlagsTest, DimAndInputLists) {
  ModelOptions o;
  ASSERT_TRUE(ParseDimList("batch=1,seq=128", &o).ok());
  ASSERT_TRUE(ParseDimList("heads=12", &o).ok());
  EXPECT_EQ(o.dims, (std::map<std::string, int64_t>{
                        {"batch", 1}, {"seq", 128}, {"heads", 12}}));
  ASSERT_TRUE(ParseShapeList("x=1x3x224x224,onnx::Gemm_0=2x5,s=", &o).ok());
  EXPECT_THAT(o.shapes["x"], ElementsAre(1, 3, 224, 224));
  EXPECT_THAT(o.shapes["onnx::Gemm_0"], ElementsAre(2, 5));
  EXPECT_THAT(o.shapes["s"], IsEmpty());
  EXPECT_THAT(Msg(ParseDimList("batch", &o)), HasSubstr("NAME=VALUE"));
  EXPECT_THAT(Msg(ParseDimList("batch=x", &o)),
              HasSubstr("non-negative integer"));
  EXPECT_THAT(Msg(ParseDimList("batch=-1", &o)),
              HasSubstr("non-negative integer"));
  EXPECT_THAT(Msg(ParseShapeList("x=1xqx3", &o)), HasSubstr("dim 'q'"));
}

// Random byte flips in serialized models: every result is a Status or a
// graph that plans, never a crash or an exception.
TEST(OnnxImportFuzzTest, MutatedModelsNeverCrash) {
  const std::string models[] = {IfModel().Bytes(), LoopModel(3).Bytes(),
                                ShapeIfModel().Bytes()};
  uint32_t seed = 12345;
  auto next = [&seed] { return seed = seed * 1664525u + 1013904223u; };
  int ok = 0, failed = 0;  // both kinds must occur for the test to mean much
  for (const std::string& original : models) {
    for (int i = 0; i < 3000; ++i) {
      std::string bytes = original;
      const int flips = 1 + next() % 4;
      for (int f = 0; f < flips; ++f) {
        bytes[next() % bytes.size()] = static_cast<char>(next() >> 24);
      }
      ModelOptions options;
      if (bytes.find("batch") != std::string::npos) options.dims["batch"] = 1;
      absl::StatusOr<ImportedModel> in =
          ImportOnnx(bytes, "fuzz.onnx", options);
      (in.ok() ? ok : failed)++;
      if (in.ok()) Plan(*in->graph);  // an imported graph must plan
    }
  }
  EXPECT_GT(failed, 0);
  EXPECT_GT(ok, 0);
}

// A chain of `count` Relu nodes on a [1, 4] float input.
Model ReluChain(int count) {
  Model m(13);
  m.graph().Input("x", kOnnxFloat, {"1", "4"});
  std::string prev = "x";
  for (int i = 0; i < count; ++i) {
    const std::string next = "v" + std::to_string(i);
    m.graph().Node("Relu", {prev}, {next});
    prev = next;
  }
  m.graph().Output(prev);
  return m;
}

// A call whose token has fired stops the import: before any step, and
// inside ONNX's own shape inference (ended at the next node it looks up).
TEST(OnnxImportTest, ACancelledImportStops) {
  const Model m = ReluChain(1000);
  base::CancelToken cancelled;
  cancelled.Cancel();
  ModelOptions options;
  options.cancel = &cancelled;
  absl::StatusOr<ImportedModel> in = ImportOnnx(m.Bytes(), "m.onnx", options);
  EXPECT_EQ(in.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(in.status().message(), HasSubstr("m.onnx: import cancelled"));
  ::ONNX_NAMESPACE::ModelProto proto = m.proto();
  const absl::Status inferred =
      internal::InferShapes(&proto, "m.onnx", &cancelled);
  EXPECT_EQ(inferred.code(), absl::StatusCode::kDeadlineExceeded) << inferred;
  // Not cancelled: the same model imports.
  EXPECT_TRUE(ImportOnnx(m.Bytes(), "m.onnx", {}).ok());
}

// Reading the bytes stops too: the lean walk and protobuf's parse each
// poll the token (every few thousand nodes, every 256 KiB), so a token
// that fires at its k-th poll is never asked again and the read ends
// DEADLINE_EXCEEDED, wherever the k-th poll falls.
TEST(OnnxImportTest, ReadingTheBytesStopsWhenTheCallEnds) {
  const std::string bytes = ReluChain(40'000).Bytes();
  ASSERT_GT(bytes.size(), 3 * internal::kParseBlockBytes);
  int total = 0;
  {
    base::CancelToken counting(nullptr, absl::InfiniteFuture(), [&] {
      ++total;
      return false;
    });
    google::protobuf::Arena arena;
    ASSERT_TRUE(internal::ParseModel(bytes, "m.onnx", &arena, &counting).ok());
  }
  // The walk's polls, then one a block of the parse.
  ASSERT_GT(total, 6);
  for (int fire_at : {1, total / 2, total - 1, total}) {
    int polls = 0;
    base::CancelToken token(nullptr, absl::InfiniteFuture(),
                            [&] { return ++polls >= fire_at; });
    google::protobuf::Arena arena;
    absl::StatusOr<::ONNX_NAMESPACE::ModelProto*> model =
        internal::ParseModel(bytes, "m.onnx", &arena, &token);
    EXPECT_EQ(model.status().code(), absl::StatusCode::kDeadlineExceeded)
        << fire_at << " of " << total;
    EXPECT_THAT(model.status().message(),
                HasSubstr("m.onnx: import cancelled"));
    EXPECT_LE(polls, fire_at + 1);  // the parse's last check after it fails
  }
}

}  // namespace
}  // namespace memplan::formats
