#include "tflite/reader.h"

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "formats/model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/planner.h"
#include "planner/tflm_greedy.h"
#include "proto/convert.h"
#include "tflite/inspect.h"
#include "tflite/model.h"
#include "tflite/testing/tflite_builder.h"
#include "tflite/tflm_baseline.h"
#include "tflite/writer.h"

namespace memplan::formats {
namespace {

namespace ts = ::memplan::tflite_schema;
using testing::ChainModel;
using testing::DynamicModel;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing::TestSubgraph;
using testing::TfliteBuilder;

absl::StatusOr<ImportedModel> Import(const std::string& bytes,
                                     const ModelOptions& options = {}) {
  return ImportTflite(bytes, "m.tflite", options);
}

// Names of the graph's ops, in order.
std::vector<std::string> OpNames(const ImportedModel& m) {
  std::vector<std::string> names;
  for (const v1::Op& op : m.graph->ops()) names.push_back(op.name());
  return names;
}

int TensorIndex(const ImportedModel& m, const std::string& name) {
  for (int i = 0; i < m.graph->tensors_size(); ++i) {
    if (m.graph->tensors(i).name() == name) return i;
  }
  return -1;
}

absl::StatusOr<planner::PlanResult> Plan(const ImportedModel& m) {
  planner::PlanOptions options;
  options.alignment = 16;
  return planner::PlanGraph(api::GraphFromProto(*m.graph), options, nullptr,
                            nullptr);
}

TEST(TfliteReaderTest, ChainModelBecomesAGraph) {
  absl::StatusOr<ImportedModel> m = Import(ChainModel().Build());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->format, Format::kTflite);
  ASSERT_EQ(m->graph->tensors_size(), 4);
  EXPECT_EQ(m->graph->tensors(0).name(), "x");
  EXPECT_EQ(m->graph->tensors(0).size_bytes(), 4 * 48);
  EXPECT_TRUE(m->graph->tensors(1).constant());
  EXPECT_EQ(m->graph->tensors(1).size_bytes(), 12);
  EXPECT_THAT(OpNames(*m),
              ElementsAre("model/inputs", "ADD#0", "RELU#1", "model/outputs"));
  EXPECT_EQ(m->tflite_tensor_count, 4);
  ASSERT_EQ(m->tflite_tensors.size(), 4u);
  EXPECT_EQ(m->tflite_tensors[3].tensor, 3);
  EXPECT_EQ(m->stats.weights, 1);
  EXPECT_EQ(m->stats.subgraphs, 1);
}

// TFLM's lifetimes: the input dies after its last use, so x and y (not
// live together) share memory; the arena is two tensors, not three.
TEST(TfliteReaderTest, MainInputsAndOutputsLiveAsInTflm) {
  absl::StatusOr<ImportedModel> m = Import(ChainModel().Build());
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<planner::PlanResult> plan = Plan(*m);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->solution.arena_size, 2 * 192);
  EXPECT_EQ(plan->weights_bytes, 12);
}

TEST(TfliteReaderTest, TensorBytesForEveryType) {
  auto bytes = [](int type, std::vector<int64_t> dims) {
    absl::StatusOr<int64_t> b = TfliteTensorBytes(type, dims, "t");
    return b.ok() ? *b : -1;
  };
  EXPECT_EQ(bytes(ts::TensorType_FLOAT32, {2, 3}), 24);
  EXPECT_EQ(bytes(ts::TensorType_FLOAT16, {5}), 10);
  EXPECT_EQ(bytes(ts::TensorType_BFLOAT16, {5}), 10);
  EXPECT_EQ(bytes(ts::TensorType_INT64, {2}), 16);
  EXPECT_EQ(bytes(ts::TensorType_COMPLEX128, {2}), 32);
  EXPECT_EQ(bytes(ts::TensorType_COMPLEX64, {1}), 8);
  EXPECT_EQ(bytes(ts::TensorType_BOOL, {7}), 7);
  EXPECT_EQ(bytes(ts::TensorType_INT4, {3}), 2);  // packed, rounded up
  EXPECT_EQ(bytes(ts::TensorType_UINT4, {4}), 2);
  EXPECT_EQ(bytes(ts::TensorType_INT2, {5}), 2);
  EXPECT_EQ(bytes(ts::TensorType_FLOAT8_E5M2, {3}), 3);
  EXPECT_EQ(bytes(ts::TensorType_RESOURCE, {}), 4);
  EXPECT_EQ(bytes(ts::TensorType_UINT16, {}), 2);  // a scalar
  EXPECT_EQ(bytes(ts::TensorType_STRING, {2}), -1);
  EXPECT_EQ(bytes(ts::TensorType_VARIANT, {2}), -1);
  EXPECT_EQ(bytes(ts::TensorType_INT8, {1 << 30, 1 << 30, 1 << 30}), -1);
  // Up to 2^58 elements of up to 16 bytes: counted in bytes, not bits,
  // which would overflow (found by tflite_import_fuzz under UBSan).
  const int64_t many = int64_t{162770356053245952};
  EXPECT_EQ(bytes(ts::TensorType_FLOAT64, {many}), many * 8);
  EXPECT_EQ(bytes(ts::TensorType_COMPLEX128, {int64_t{1} << 58}),
            int64_t{1} << 62);
  EXPECT_EQ(bytes(ts::TensorType_INT4, {int64_t{1} << 58}), int64_t{1} << 57);
}

TEST(TfliteReaderTest, Int4ActivationsTakeAByteAsInTflmWithAWarning) {
  TfliteBuilder b = ChainModel();
  b.subgraphs[0].tensors[2].type = ts::TensorType_INT4;
  absl::StatusOr<ImportedModel> m = Import(b.Build());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->graph->tensors(2).size_bytes(), 48);
  ASSERT_EQ(m->warnings.size(), 1u);
  EXPECT_THAT(m->warnings[0], HasSubstr("one byte per element"));
}

TEST(TfliteReaderTest, EmptyTensorsAreLeftOut) {
  TfliteBuilder b = ChainModel();
  b.subgraphs[0].Tensor("unused_empty", {0, 4});
  absl::StatusOr<ImportedModel> m = Import(b.Build());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->graph->tensors_size(), 4);
  EXPECT_EQ(m->stats.empty_values, 1);
  EXPECT_EQ(m->tflite_tensor_count, 5);
}

TEST(TfliteReaderTest, VariableTensorsArePersistentNotConstant) {
  TfliteBuilder b = ChainModel();
  TestSubgraph& g = b.subgraphs[0];
  const int state =
      g.Tensor("state", {4}, ts::TensorType_FLOAT32, std::string(16, 0));
  g.tensors[state].variable = true;
  g.ops[1].inputs.push_back(state);
  absl::StatusOr<ImportedModel> m = Import(b.Build());
  ASSERT_TRUE(m.ok()) << m.status();
  const v1::Tensor& t = m->graph->tensors(TensorIndex(*m, "state"));
  EXPECT_TRUE(t.variable());
  EXPECT_FALSE(t.constant());
  absl::StatusOr<planner::PlanResult> plan = Plan(*m);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->tensors[TensorIndex(*m, "state")].kind,
            planner::TensorKind::kVariable);
}

// TFLite Micro runs a model at the shapes it stores: -1 dims take them,
// with one warning that counts the tensors and names the flags.
TEST(TfliteReaderTest, DynamicDimsTakeTheModelsOwnShapeWithAWarning) {
  absl::StatusOr<ImportedModel> m = Import(DynamicModel().Build());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->graph->tensors(0).size_bytes(), 4 * 1);  // x: 1x1
  EXPECT_EQ(m->graph->tensors(1).size_bytes(), 4 * 8);  // y: 1x8
  ASSERT_EQ(m->warnings.size(), 1u);
  EXPECT_THAT(m->warnings[0],
              ::testing::AllOf(HasSubstr("2 tensor(s) have dynamic (-1) dims"),
                               HasSubstr("model's own shapes"),
                               HasSubstr("--dim batch=N"),
                               HasSubstr("--input NAME=SHAPE")));
}

// A shape the model cannot stand in with (negative in `shape` itself): the
// message gives the fix first and names a few tensors, not all.
TEST(TfliteReaderTest, SizesNothingGivesAreAnErrorThatSaysTheFixFirst) {
  TfliteBuilder b;
  TestSubgraph& g = b.Subgraph("main");
  std::vector<int32_t> chain;
  for (int i = 0; i < 7; ++i) {
    chain.push_back(g.Tensor("t" + std::to_string(i), {-1, 4}));
  }
  for (int i = 0; i + 1 < 7; ++i) {
    g.Op(ts::BuiltinOperator_RELU, {chain[i]}, {chain[i + 1]});
  }
  g.inputs = {chain[0]};
  g.outputs = {chain[6]};
  absl::StatusOr<ImportedModel> m = Import(b.Build());
  ASSERT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(m.status().message());
  EXPECT_THAT(message, ::testing::StartsWith(
                           "m.tflite: give the shape of 7 tensor(s) with "
                           "--input NAME=1x2x3 (or the first dim with --dim "
                           "batch=N)"));
  EXPECT_THAT(message, ::testing::AllOf(HasSubstr("'t3'"), HasSubstr("-1x4"),
                                        HasSubstr("and 3 more")));
  EXPECT_THAT(message, ::testing::Not(HasSubstr("'t4'")));
  ModelOptions batch;
  batch.dims["batch"] = 2;
  m = Import(b.Build(), batch);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->graph->tensors(0).size_bytes(), 4 * 8);
}

TEST(TfliteReaderTest, BatchDimAndInputShapesOverrideTheModelsOwnShape) {
  ModelOptions options;
  options.dims["batch"] = 2;
  absl::StatusOr<ImportedModel> batch = Import(DynamicModel().Build(), options);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->graph->tensors(0).size_bytes(), 4 * 2);  // 2x(own 1)
  EXPECT_EQ(batch->graph->tensors(1).size_bytes(), 4 * 16);
  ASSERT_EQ(batch->warnings.size(), 1u);  // x's length is the model's own
  EXPECT_THAT(batch->warnings[0],
              ::testing::AllOf(HasSubstr("1 tensor(s)"),
                               ::testing::Not(HasSubstr("--dim batch"))));
  options.shapes["x"] = {2, 100};
  absl::StatusOr<ImportedModel> m = Import(DynamicModel().Build(), options);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->graph->tensors(0).size_bytes(), 4 * 200);
  EXPECT_EQ(m->graph->tensors(1).size_bytes(), 4 * 16);
  EXPECT_TRUE(m->warnings.empty());
}

// memplan sizes each TFLite tensor from its own shape: an --input that
// sets a first dim (or another -1 dim) to other than the stored value,
// while other tensors' dims of that kind keep theirs, would plan the rest
// of the model too small. It is an error that says what to set instead.
TEST(TfliteReaderTest, AnInputResizedAloneIsAnErrorNamingTheFix) {
  ModelOptions batch;
  batch.shapes["x"] = {2, 1};  // y's -1 first dim would stay 1
  absl::StatusOr<ImportedModel> m = Import(DynamicModel().Build(), batch);
  ASSERT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      m.status().message(),
      ::testing::AllOf(
          HasSubstr("--input x=2x1 (stored shape 1x1) sets a tensor's first "
                    "dim"),
          HasSubstr("1 other tensor(s) would keep their stored first dim"),
          HasSubstr("'y'"), HasSubstr("-1x8, stored shape 1x8"),
          HasSubstr("--dim batch=2 instead")));
  // The same first dim set for all: planned.
  batch.dims["batch"] = 2;
  m = Import(DynamicModel().Build(), batch);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->graph->tensors(1).size_bytes(), 4 * 16);
  // Another batch than --dim batch's: the model would hold two.
  batch.dims["batch"] = 4;
  m = Import(DynamicModel().Build(), batch);
  ASSERT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(),
              HasSubstr("--input x=2x1 sets the first dim of tensor 0 ('x') "
                        "of subgraph 0 to 2, but --dim batch=4 sets every "
                        "other -1 first dim: give both the same batch"));
  // Another dim, where no other tensor has one of that kind to keep: y's
  // second dim is no -1, its first keeps the value x keeps too.
  ModelOptions length;
  length.shapes["x"] = {1, 100};
  m = Import(DynamicModel().Build(), length);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->graph->tensors(0).size_bytes(), 4 * 100);
  // A second -1 dim elsewhere that would keep its stored value.
  TfliteBuilder b = DynamicModel();
  b.subgraphs[0].tensors[1].signature = {-1, -1};
  m = Import(b.Build(), length);
  ASSERT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(),
              ::testing::AllOf(HasSubstr("sets a tensor's -1 dims"),
                               HasSubstr("would keep their stored dims"),
                               HasSubstr("give each of them its shape with "
                                         "--input too")));
  // The stored value given again changes nothing: planned.
  ModelOptions same;
  same.shapes["x"] = {1, 1};
  EXPECT_TRUE(Import(b.Build(), same).ok());
}

// One set of flags for a pipeline's models: a --dim no dim of the model
// could be meant by is a warning; one that looks like a typo of the dim
// the model has is an error suggesting it.
TEST(TfliteReaderTest, DimsTheModelHasNoUseForAreWarningsUnlessMisspelt) {
  for (const char* typo : {"bach", "bacth", "Batch"}) {
    ModelOptions bad_dim;
    bad_dim.dims[typo] = 1;
    absl::StatusOr<ImportedModel> m = Import(DynamicModel().Build(), bad_dim);
    ASSERT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << typo;
    EXPECT_THAT(m.status().message(),
                ::testing::AllOf(HasSubstr(absl::StrCat("--dim ", typo)),
                                 HasSubstr("did you mean --dim batch?")));
  }
  ModelOptions other;
  other.dims["seq_len"] = 16;
  other.dims["batch"] = 1;
  absl::StatusOr<ImportedModel> m = Import(DynamicModel().Build(), other);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(m->warnings, ::testing::Contains(::testing::AllOf(
                               HasSubstr("--dim seq_len ignored"),
                               HasSubstr("only named dim is 'batch'"))));
  ModelOptions static_batch;
  static_batch.dims["batch"] = 1;
  static_batch.dims["bach"] = 1;  // no dim of the model: nothing to misspell
  m = Import(ChainModel().Build(), static_batch);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->warnings.size(), 2u);
  EXPECT_THAT(m->warnings[0], HasSubstr("--dim bach ignored"));
  EXPECT_THAT(m->warnings[1],
              ::testing::AllOf(HasSubstr("--dim batch ignored"),
                               HasSubstr("no dynamic (-1) first dim")));
}

TEST(TfliteReaderTest, UnknownInputNamesAreRejected) {
  ModelOptions typo;
  typo.shapes["xx"] = {1, 1};
  absl::StatusOr<ImportedModel> m = Import(DynamicModel().Build(), typo);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("did you mean --input x?"));
  ModelOptions bad_input;
  bad_input.shapes["zzz"] = {1};
  m = Import(DynamicModel().Build(), bad_input);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(),
              ::testing::AllOf(HasSubstr("--input zzz: give a tensor"),
                               HasSubstr("its inputs: 'x'")));
  ModelOptions wrong_rank;
  wrong_rank.shapes["x"] = {1, 2, 3};
  m = Import(DynamicModel().Build(), wrong_rank);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("has 2 dims"));
  ModelOptions static_dim;
  static_dim.shapes["y"] = {1, 9};
  m = Import(DynamicModel().Build(), static_dim);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("only -1 dims can be set"));
}

TEST(TfliteReaderTest, BadFilesAreInvalidArgumentsNamingTheProblem) {
  auto error = [](const std::string& bytes) {
    absl::StatusOr<ImportedModel> m = ImportTflite(bytes, "bad.tflite", {});
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument)
        << m.status();
    return std::string(m.status().message());
  };
  EXPECT_THAT(error("short"), HasSubstr("not a TFLite model"));
  EXPECT_THAT(error("{\"graph\": {\"tensors\": []}}"),
              HasSubstr("no 'TFL3' file identifier"));
  const std::string full = ChainModel().Build();
  EXPECT_THAT(error(full.substr(0, full.size() / 2)),
              HasSubstr("verifier rejects it"));

  TfliteBuilder buffer = ChainModel();
  buffer.subgraphs[0].tensors[1].buffer = 99;
  EXPECT_THAT(error(buffer.Build()),
              ::testing::AllOf(HasSubstr("tensor 1 ('w')"),
                               HasSubstr("buffer index 99 is out of range")));
  TfliteBuilder type = ChainModel();
  type.subgraphs[0].tensors[2].type = 77;
  EXPECT_THAT(error(type.Build()),
              ::testing::AllOf(HasSubstr("tensor 2 ('a')"),
                               HasSubstr("unknown element type 77")));
  TfliteBuilder none;
  EXPECT_THAT(error(none.Build()), HasSubstr("has no subgraphs"));
  TfliteBuilder code = ChainModel();
  code.subgraphs[0].ops[1].opcode_index = 5;
  EXPECT_THAT(error(code.Build()), HasSubstr("operator code index 5"));
  TfliteBuilder operand = ChainModel();
  operand.subgraphs[0].ops[0].outputs = {4};
  EXPECT_THAT(error(operand.Build()), HasSubstr("tensor index 4, out of"));
  TfliteBuilder io = ChainModel();
  io.subgraphs[0].inputs = {-1};
  EXPECT_THAT(error(io.Build()), HasSubstr("input #0 is tensor index -1"));
  TfliteBuilder string_tensor = ChainModel();
  string_tensor.subgraphs[0].tensors[2].type = ts::TensorType_STRING;
  EXPECT_THAT(error(string_tensor.Build()),
              HasSubstr("string tensors have no size"));
}

// main: x -> IF(c, x) -> y; then: x -> ADD -> t1 -> out; else: x -> RELU.
TfliteBuilder IfModel() {
  TfliteBuilder b;
  TestSubgraph& g = b.Subgraph("main");
  const int c = g.Tensor("c", {16}, ts::TensorType_BOOL);
  const int x = g.Tensor("x", {64});
  const int y = g.Tensor("y", {64});
  const int z = g.Tensor("z", {64});
  g.Op(ts::BuiltinOperator_IF, {c, x}, {y}, {1, 2});
  g.Op(ts::BuiltinOperator_RELU, {y}, {z});
  g.inputs = {c, x};
  g.outputs = {z};
  for (const char* name : {"then", "else"}) {
    TestSubgraph& s = b.Subgraph(name);
    const int in = s.Tensor("in", {64});
    const int mid = s.Tensor("mid", {64});
    const int out = s.Tensor("out", {64});
    s.Op(ts::BuiltinOperator_RELU, {in}, {mid});
    s.Op(ts::BuiltinOperator_RELU, {mid}, {out});
    s.inputs = {in};
    s.outputs = {out};
  }
  return b;
}

TEST(TfliteReaderTest, IfBranchesAreFlattenedAndShareMemory) {
  absl::StatusOr<ImportedModel> m = Import(IfModel().Build());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(OpNames(*m),
              ElementsAre("model/inputs", "IF#0/then/enter", "then/RELU#0",
                          "then/RELU#1", "IF#0/then/exit", "IF#0/else/enter",
                          "else/RELU#0", "else/RELU#1", "IF#0/else/exit",
                          "RELU#1", "model/outputs"));
  EXPECT_EQ(m->stats.control_flow_nodes, 1);
  EXPECT_EQ(m->stats.subgraph_values, 6);
  absl::StatusOr<planner::PlanResult> plan = Plan(*m);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const planner::TensorPlacement& y = plan->tensors[TensorIndex(*m, "y")];
  const planner::TensorPlacement& x = plan->tensors[TensorIndex(*m, "x")];
  // The node's output exists from the first enter, its input until the
  // last exit: both across every branch.
  EXPECT_EQ(y.start, 1);
  EXPECT_GE(x.end, 9);
  // Branch tensors are never live together: at most 2 live per branch (in
  // and mid, or mid and out) beside x and y: 4 x 256 bytes.
  EXPECT_EQ(plan->solution.arena_size, 4 * 256 + 16);
}

TEST(TfliteReaderTest, WhileWritesItsOutputsBeforeTheLoop) {
  TfliteBuilder b;
  TestSubgraph& g = b.Subgraph("main");
  const int x = g.Tensor("x", {16});
  const int y = g.Tensor("y", {16});
  g.Op(ts::BuiltinOperator_WHILE, {x}, {y}, {1, 2});
  g.inputs = {x};
  g.outputs = {y};
  TestSubgraph& cond = b.Subgraph("cond");
  const int ci = cond.Tensor("i", {16});
  const int cb = cond.Tensor("b", {}, ts::TensorType_BOOL);
  cond.Op(ts::BuiltinOperator_LESS, {ci}, {cb});
  cond.inputs = {ci};
  cond.outputs = {cb};
  TestSubgraph& body = b.Subgraph("body");
  const int bi = body.Tensor("i", {16});
  const int bo = body.Tensor("o", {16});
  body.Op(ts::BuiltinOperator_ADD, {bi}, {bo});
  body.inputs = {bi};
  body.outputs = {bo};
  absl::StatusOr<ImportedModel> m = Import(b.Build());
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_GE(m->graph->ops_size(), 2);
  EXPECT_EQ(m->graph->ops(1).name(), "WHILE#0/cond/enter");
  EXPECT_THAT(m->graph->ops(1).outputs(), ElementsAre("y", "cond/i"));
  absl::StatusOr<planner::PlanResult> plan = Plan(*m);
  ASSERT_TRUE(plan.ok()) << plan.status();
}

TEST(TfliteReaderTest, SubgraphRunTwiceKeepsItsTensorsUntilTheLastCall) {
  TfliteBuilder b;
  TestSubgraph& g = b.Subgraph("main");
  const int x = g.Tensor("x", {16});
  const int y = g.Tensor("y", {16});
  const int z = g.Tensor("z", {16});
  g.Op(ts::BuiltinOperator_CALL, {x}, {y}, {1});
  g.Op(ts::BuiltinOperator_CALL, {y}, {z}, {1});
  g.inputs = {x};
  g.outputs = {z};
  TestSubgraph& f = b.Subgraph("f");
  const int in = f.Tensor("in", {16});
  const int out = f.Tensor("out", {16});
  f.Op(ts::BuiltinOperator_RELU, {in}, {out});
  f.inputs = {in};
  f.outputs = {out};
  absl::StatusOr<ImportedModel> m = Import(b.Build());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(OpNames(*m), ElementsAre("model/inputs", "CALL#0/call/enter",
                                       "f/RELU#0", "CALL#0/call/exit",
                                       "CALL#1/call/call", "model/outputs"));
  absl::StatusOr<planner::PlanResult> plan = Plan(*m);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->tensors[TensorIndex(*m, "f/in")].end, 5);
}

TEST(TfliteReaderTest, SubgraphsNoOperatorRunsArePlannedAfterTheMainGraph) {
  TfliteBuilder b = ChainModel();
  TestSubgraph& other = b.Subgraph("other");
  const int in = other.Tensor("in", {8});
  const int out = other.Tensor("out", {8});
  other.Op(ts::BuiltinOperator_RELU, {in}, {out});
  other.inputs = {in};
  other.outputs = {out};
  absl::StatusOr<ImportedModel> m = Import(b.Build());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(OpNames(*m),
              ElementsAre("model/inputs", "ADD#0", "RELU#1", "model/outputs",
                          "other/enter", "other/RELU#0", "other/exit"));
  ASSERT_EQ(m->warnings.size(), 1u);
  EXPECT_THAT(m->warnings[0], HasSubstr("run by no operator"));
}

TEST(TfliteReaderTest, ASubgraphRunningItselfIsAnError) {
  TfliteBuilder b = IfModel();
  b.subgraphs[1].Op(ts::BuiltinOperator_CALL, {0}, {2}, {1});
  absl::StatusOr<ImportedModel> m = Import(b.Build());
  ASSERT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("already running"));
  TfliteBuilder out_of_range = IfModel();
  out_of_range.subgraphs[0].ops[0].subgraphs = {1, 7};
  m = Import(out_of_range.Build());
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(),
              HasSubstr("else subgraph index 7 is out of range"));
}

TEST(TfliteReaderTest, TensorNamesAreMadeUnique) {
  TfliteBuilder b = ChainModel();
  b.subgraphs[0].tensors[2].name = "x";
  b.subgraphs[0].tensors[3].name = "";
  absl::StatusOr<ImportedModel> m = Import(b.Build());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->graph->tensors(2).name(), "x#0:2");
  EXPECT_EQ(m->graph->tensors(3).name(), "tensor#3");
}

// Vela's scratch and fast scratch tensors: read by the ethos-u operator,
// written by nothing, no data. Without Vela's plan they are planned for
// the operator's lifetime (an op writes them just before it), in the
// arena: x + both scratch tensors + y at once.
TEST(TfliteReaderTest, ScratchTensorsArePlannedForTheOperatorReadingThem) {
  absl::StatusOr<ImportedModel> m = Import(testing::EthosUModel(false).Build());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(OpNames(*m),
              ElementsAre("model/inputs", "ethos-u#0/scratch", "ethos-u#0",
                          "SOFTMAX#1", "model/outputs"));
  EXPECT_EQ(m->stats.weights, 2);  // the command stream and the weights
  const int scratch = TensorIndex(*m, "main_split_1_scratch");
  const int fast = TensorIndex(*m, "main_split_1_scratch_fast");
  EXPECT_THAT(m->scratch, ElementsAre(scratch, fast));
  EXPECT_FALSE(m->graph->tensors(scratch).constant());
  EXPECT_TRUE(m->tflite_kept.empty());
  EXPECT_THAT(m->warnings,
              ::testing::Contains(HasSubstr("no usable offline plan")));
  absl::StatusOr<planner::PlanResult> plan = Plan(*m);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (int t : {scratch, fast}) {
    const planner::TensorPlacement& p = plan->tensors[t];
    EXPECT_EQ(p.kind, planner::TensorKind::kActivation);  // engine relabels
    EXPECT_GE(p.buffer, 0);
    EXPECT_EQ(p.start, 1);  // from its writer, just before ethos-u
    EXPECT_EQ(p.end, 3);    // to ethos-u (step 2)
  }
  EXPECT_EQ(plan->solution.arena_size, 2048 + 2 * testing::kVelaScratch + 2048);
}

// With the offline plan Vela wrote, the ethos-u command stream addresses
// x, y and the fast scratch from the scratch tensor's start: the tensors
// Vela placed keep its layout inside one block (the scratch tensor), and
// the planned model gives TFLite Micro Vela's offsets again.
TEST(TfliteReaderTest, AVelaModelKeepsVelasOfflinePlan) {
  // The bytes outlive the import (ImportedModel::tflite is a view of them).
  const std::string vela = testing::EthosUModel(true).Build();
  absl::StatusOr<ImportedModel> m = Import(vela);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->graph->tensors_size(), 3);  // cms, flash, the block
  const int block = TensorIndex(*m, "main_split_1_scratch");
  ASSERT_GE(block, 0);
  EXPECT_EQ(m->graph->tensors(block).size_bytes(), testing::kVelaScratch);
  EXPECT_EQ(m->graph->tensors(block).alignment(), 16);
  EXPECT_THAT(m->scratch, ElementsAre(block));
  EXPECT_TRUE(m->main_inputs.empty());     // x is inside the block
  ASSERT_EQ(m->tflite_kept.size(), 4u);    // x, the fast scratch, y, z
  EXPECT_EQ(m->tflite_kept[2].tensor, 5);  // y
  EXPECT_EQ(m->tflite_kept[2].block, block);
  EXPECT_EQ(m->tflite_kept[2].offset, 2048);
  EXPECT_THAT(m->warnings,
              ::testing::Contains(::testing::AllOf(
                  HasSubstr("(Vela's) is kept"), HasSubstr("5 tensor(s)"),
                  HasSubstr("8192 bytes"))));
  absl::StatusOr<planner::PlanResult> plan = Plan(*m);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->solution.arena_size, testing::kVelaScratch);
  absl::StatusOr<std::vector<int32_t>> offsets = OfflinePlanOffsets(*m, *plan);
  ASSERT_TRUE(offsets.ok()) << offsets.status();
  EXPECT_THAT(*offsets, ElementsAreArray(testing::VelaOffsets()));

  // A tensor Vela left to TFLite Micro (-1) is planned around the block,
  // which lives from x (written before ethos-u) to y (read by SOFTMAX).
  TfliteBuilder online = testing::EthosUModel(false);
  std::vector<int32_t> words = {0, 1, 7};
  words.insert(words.end(), testing::VelaOffsets().begin(),
               testing::VelaOffsets().end());
  words.back() = -1;  // z
  online.metadata = {{"OfflineMemoryAllocation", testing::Int32Words(words)}};
  const std::string online_bytes = online.Build();
  m = Import(online_bytes);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(m->main_outputs, ElementsAre(TensorIndex(*m, "z")));
  plan = Plan(*m);
  ASSERT_TRUE(plan.ok()) << plan.status();
  offsets = OfflinePlanOffsets(*m, *plan);
  ASSERT_TRUE(offsets.ok()) << offsets.status();
  EXPECT_EQ((*offsets)[5], 2048);                   // y: kept
  EXPECT_EQ((*offsets)[6], testing::kVelaScratch);  // z: after the block
  EXPECT_EQ(plan->solution.arena_size, testing::kVelaScratch + 2048);
}

// TFLM's AllocationInfoBuilder on the chain: x from scope 0 to its last use
// (ADD, scope 1); a from 1 to 2; y from 2 to the end (2); w is data.
TEST(TfliteReaderTest, TflmTensorUsesFollowTflmScopes) {
  const std::string bytes = ChainModel().Build();
  absl::StatusOr<TfliteModel> model = TfliteModel::Parse(bytes, "m");
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<std::vector<TflmTensorUse>> uses = TflmTensorUses(*model);
  ASSERT_TRUE(uses.ok()) << uses.status();
  ASSERT_EQ(uses->size(), 4u);
  EXPECT_TRUE((*uses)[0].planned);
  EXPECT_EQ((*uses)[0].first, 0);
  EXPECT_EQ((*uses)[0].last, 1);
  EXPECT_FALSE((*uses)[1].planned);  // constant
  EXPECT_EQ((*uses)[2].first, 1);
  EXPECT_EQ((*uses)[2].last, 2);
  EXPECT_EQ((*uses)[3].first, 2);
  EXPECT_EQ((*uses)[3].last, 2);
}

TEST(TfliteReaderTest, TflmRequestsGiveTheBaselineArena) {
  const std::string bytes = IfModel().Build();
  absl::StatusOr<ImportedModel> m = Import(bytes);
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<std::vector<planner::TflmBuffer>> requests = TflmRequests(*m);
  ASSERT_TRUE(requests.ok()) << requests.status();
  EXPECT_EQ(requests->size(), 10u);  // every tensor: none holds data
  for (const planner::TflmBuffer& b : *requests) {
    EXPECT_EQ(b.size % planner::kTflmAlignment, 0);
  }
  const planner::TflmPlan plan = planner::TflmGreedyPlanner(*requests).Plan();
  absl::StatusOr<planner::PlanResult> memplan = Plan(*m);
  ASSERT_TRUE(memplan.ok());
  EXPECT_LE(memplan->solution.arena_size, plan.arena_size);
}

TEST(TfliteReaderTest, SummaryShowsInputsDimsWeightsAndOps) {
  absl::StatusOr<ModelSummary> s =
      SummarizeTflite(DynamicModel().Build(), "d.tflite");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->format, Format::kTflite);
  EXPECT_EQ(s->producer, "memplan test model");
  EXPECT_EQ(s->version, "schema 3");
  ASSERT_EQ(s->inputs.size(), 1u);
  EXPECT_EQ(s->inputs[0].name, "x");
  EXPECT_EQ(s->inputs[0].element_type, "float32");
  EXPECT_THAT(s->inputs[0].dims, ElementsAre("batch", "?"));
  EXPECT_EQ(s->inputs[0].bytes, -1);
  EXPECT_THAT(s->outputs[0].dims, ElementsAre("batch", "8"));
  EXPECT_THAT(s->symbolic_dims, ElementsAre("batch"));
  EXPECT_EQ(s->ops, 1);
  EXPECT_EQ(s->op_types.at("FULLY_CONNECTED"), 1);
  // The -1 dims of the inputs, and what the import gives them.
  ASSERT_EQ(s->defaulted_dims.size(), 2u);
  EXPECT_EQ(s->defaulted_dims[0].value, "x");
  EXPECT_EQ(s->defaulted_dims[0].dim, 0);
  EXPECT_EQ(s->defaulted_dims[0].size, 1);
  EXPECT_EQ(s->defaulted_dims[0].flag, "--dim batch=N");
  EXPECT_EQ(s->defaulted_dims[1].dim, 1);
  EXPECT_EQ(s->defaulted_dims[1].flag, "--input x=SHAPE");
  EXPECT_EQ(s->dynamic_tensors, 2);
  EXPECT_FALSE(s->offline_plan.has_value());

  TfliteBuilder shared = ChainModel();
  shared.subgraphs[0].Tensor("w2", {3}, ts::TensorType_FLOAT32,
                             std::string(12, 2));
  absl::StatusOr<ModelSummary> c = SummarizeTflite(shared.Build(), "c.tflite");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->weight_bytes, 24);
  EXPECT_EQ(c->inputs[0].bytes, 192);
  EXPECT_TRUE(c->symbolic_dims.empty());
  EXPECT_TRUE(c->defaulted_dims.empty());

  // A model that already carries an offline plan (Vela's) says so.
  absl::StatusOr<ModelSummary> v =
      SummarizeTflite(testing::EthosUModel(true).Build(), "v.tflite");
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_TRUE(v->offline_plan.has_value());
  EXPECT_EQ(v->offline_plan->version, 0);
  EXPECT_EQ(v->offline_plan->subgraphs, 1);
  EXPECT_EQ(v->offline_plan->offsets, 7);
  EXPECT_EQ(v->offline_plan->placed, 5);
  EXPECT_TRUE(v->offline_plan->usable);
}

// Many tensors that are one table many times over: refused before any
// per-tensor work.
TEST(TfliteReaderTest, AliasedTablesCannotInflateTheGraph) {
  flatbuffers::FlatBufferBuilder fbb;
  auto tensor = ts::CreateTensor(fbb, fbb.CreateVector(std::vector<int>{4}));
  std::vector<flatbuffers::Offset<ts::Tensor>> tensors(kTfliteMaxTensors + 1,
                                                       tensor);
  auto graph = ts::CreateSubGraph(fbb, fbb.CreateVector(tensors));
  std::vector<flatbuffers::Offset<ts::SubGraph>> graphs = {graph};
  auto model = ts::CreateModel(fbb, 3, 0, fbb.CreateVector(graphs));
  ts::FinishModelBuffer(fbb, model);
  const std::string bytes(reinterpret_cast<const char*>(fbb.GetBufferPointer()),
                          fbb.GetSize());
  absl::StatusOr<ImportedModel> m = Import(bytes);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kResourceExhausted)
      << m.status();
}

// Robustness: every prefix and thousands of corrupted copies of valid models
// import cleanly or fail with a Status; never a crash.
TEST(TfliteReaderTest, CorruptedModelsNeverCrash) {
  std::mt19937 rng(7);
  for (const std::string& good :
       {ChainModel().Build(), IfModel().Build(), DynamicModel().Build()}) {
    for (size_t n = 0; n < good.size(); n += 3) {
      (void)Import(good.substr(0, n));
    }
    for (int trial = 0; trial < 2000; ++trial) {
      std::string bad = good;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f) {
        bad[rng() % bad.size()] = static_cast<char>(rng());
      }
      absl::StatusOr<ImportedModel> m = Import(bad);
      if (m.ok()) {
        EXPECT_EQ(m->tflite_tensors.size(),
                  static_cast<size_t>(m->graph->tensors_size()));
      }
      (void)SummarizeTflite(bad, "bad");
      if (auto parsed = TfliteModel::Parse(bad, "bad"); parsed.ok()) {
        (void)TflmTensorUses(*parsed);
      }
    }
  }
}

}  // namespace
}  // namespace memplan::formats
