// `memplan plan model.tflite` as a user runs it: small models written with
// the test builder, in-process and through a real memplan-server (the file
// travels in the request), --emit tflite and c_header, planning the planned
// model again, --dim and --input, and the exit codes of bad input.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "memplan/v1/memplan.pb.h"
#include "tests/testing/cli.h"
#include "tests/testing/process.h"
#include "tests/testing/shared_server.h"
#include "tflite/testing/tflite_builder.h"

namespace memplan {
namespace {

namespace ts = ::memplan::tflite_schema;
using formats::testing::ChainModel;
using formats::testing::DecodeOfflinePlan;
using formats::testing::DynamicModel;
using formats::testing::TestSubgraph;
using formats::testing::TfliteBuilder;
using ::testing::AllOf;
using testing::CommandResult;
using ::testing::HasSubstr;

using testing::ParsePlanJson;
using testing::RunCli;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// main: x -> IF(c, x) -> y -> RELU -> z; both branches two RELUs.
TfliteBuilder IfModel() {
  TfliteBuilder b;
  TestSubgraph& g = b.Subgraph("main");
  const int c = g.Tensor("c", {4}, ts::TensorType_INT32);
  const int x = g.Tensor("x", {1, 64});
  const int w =
      g.Tensor("w", {64}, ts::TensorType_FLOAT32, std::string(256, 3));
  const int y = g.Tensor("y", {1, 64});
  const int z = g.Tensor("z", {1, 64});
  g.Op(ts::BuiltinOperator_IF, {c, x, w}, {y}, {1, 2});
  g.Op(ts::BuiltinOperator_RELU, {y}, {z});
  g.inputs = {c, x};
  g.outputs = {z};
  for (const char* name : {"then", "else"}) {
    TestSubgraph& s = b.Subgraph(name);
    const int in = s.Tensor("in", {1, 64}), v = s.Tensor("v", {64});
    const int mid = s.Tensor("mid", {1, 64}), out = s.Tensor("out", {1, 64});
    s.Op(ts::BuiltinOperator_ADD, {in, v}, {mid});
    s.Op(ts::BuiltinOperator_RELU, {mid}, {out});
    s.inputs = {in, v};
    s.outputs = {out};
  }
  b.metadata = {{"min_runtime_version", "2.3.0"}};
  return b;
}

class TfliteCliTest : public testing::SharedServerTest,
                      public testing::TestFiles {};

TEST_F(TfliteCliTest, PlansATfliteFileAgainstTflmsOwnPlanner) {
  CommandResult r = RunCli({"plan", Write("m.tflite", IfModel().Build())});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(HasSubstr("arena:"),
                           HasSubstr("baseline:     tflm_greedy needs")));
  CommandResult json =
      RunCli({"plan", "--format=json", Write("m2.tflite", IfModel().Build())});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const v1::PlanResponse response = ParsePlanJson(json.out);
  EXPECT_EQ(response.options().alignment(), 16);  // TFLM's, by default
  EXPECT_EQ(response.baseline().strategy(), "tflm_greedy");
  EXPECT_GE(response.baseline().arena_size_bytes(),
            response.arena_size_bytes());
  // The main graph's inputs and outputs are said to be what they are, while
  // planned with TFLM's lifetimes like the activations.
  std::map<std::string, std::string> kinds;
  for (const v1::Assignment& a : response.assignments()) {
    kinds[a.name()] = a.kind();
  }
  EXPECT_EQ(kinds["c"], "input");
  EXPECT_EQ(kinds["x"], "input");
  EXPECT_EQ(kinds["y"], "activation");
  EXPECT_EQ(kinds["z"], "output");
  // They cannot be left to the caller: TFLM keeps them in its arena.
  CommandResult io = RunCli({"plan", "--io=exclude", Path("m2.tflite")});
  EXPECT_EQ(io.exit_code, 65);
  EXPECT_THAT(io.err, HasSubstr("io 'exclude' does not apply to TFLite"));
  // The graph --dump_graph writes keeps TFLM's alignment: planned again,
  // it gives the same arena (a dump planned at 64 was larger).
  CommandResult dumped = RunCli({"plan", "--format=json", "--dump_graph",
                                 Path("dump.json"), Path("m2.tflite")});
  ASSERT_EQ(dumped.exit_code, 0) << dumped.err;
  CommandResult again = RunCli({"plan", "--format=json", Path("dump.json")});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(ParsePlanJson(again.out).options().alignment(), 16);
  EXPECT_EQ(ParsePlanJson(again.out).arena_size_bytes(),
            response.arena_size_bytes());
}

// The same plan and byte-identical files whether the server imports the
// model (--server sends the file) or the CLI plans it in-process.
TEST_F(TfliteCliTest, ServerAndInProcessGiveTheSamePlanAndFiles) {
  const std::string model = Write("m.tflite", IfModel().Build());
  for (const std::string emit : {"tflite", "c_header"}) {
    std::vector<std::string> args = {
        "plan", model, "--format=json",      "--no_timings", "--emit",
        emit,   "-o",  Path("local." + emit)};
    CommandResult local = RunCli(args);
    args.back() = Path("remote." + emit);
    args.push_back("--server=" + server_->address());
    CommandResult remote = RunCli(args);
    ASSERT_EQ(local.exit_code, 0) << local.err;
    ASSERT_EQ(remote.exit_code, 0) << remote.err;
    EXPECT_EQ(ParsePlanJson(local.out).SerializeAsString(),
              ParsePlanJson(remote.out).SerializeAsString());
    const std::string a = ReadAll(Path("local." + emit));
    EXPECT_FALSE(a.empty());
    EXPECT_EQ(a, ReadAll(Path("remote." + emit))) << emit;
  }
  const std::string planned = ReadAll(Path("local.tflite"));
  const formats::testing::DecodedPlan plan = DecodeOfflinePlan(planned);
  EXPECT_EQ(plan.entries, 1);
  EXPECT_EQ(plan.subgraphs, 3);
  EXPECT_EQ(plan.count, 13);       // 5 + 4 + 4 tensors
  EXPECT_EQ(plan.offsets[2], -1);  // w: a constant
  // ID: the file name and a hash of the model and plan.
  EXPECT_THAT(ReadAll(Path("local.c_header")),
              ::testing::ContainsRegex(
                  "#define MEMPLAN_M_[0-9A-F]{8}_TFLM_BUFFER_COUNT 12"));
}

// A plan TFLite Micro would not run as it is (another batch than the file
// stores): a warning says why, the report has no runtime figure, --emit
// tflite refuses it and the C header has no TFLite Micro section. Weights
// planned in the arena are written (TFLM leaves them to the model) with a
// warning that their room stays unused.
TEST_F(TfliteCliTest, PlansTfliteMicroWouldNotRunSaySoInEveryOutput) {
  const std::string model = Write("dyn.tflite", DynamicModel().Build());
  for (bool remote : {false, true}) {
    SCOPED_TRACE(remote);
    std::vector<std::string> args = {
        "plan",   "--format=json", model, "--dim",      "batch=2",
        "--emit", "c_header",      "-o",  Path("dyn.h")};
    if (remote) args.push_back("--server=" + server_->address());
    CommandResult r = RunCli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.err,
                HasSubstr("TFLite Micro would not run this plan as it is "
                          "(tensor 'x' is planned at 8 bytes, but TFLite "
                          "Micro allocates 4 from the shape stored in the "
                          "file"));
    EXPECT_EQ(ParsePlanJson(r.out).runtime_arena_bytes(), 0);
    const std::string header = ReadAll(Path("dyn.h"));
    EXPECT_THAT(header, HasSubstr("/* No TFLite Micro section"));
    EXPECT_THAT(header, ::testing::Not(HasSubstr("TFLM_ARENA_BYTES")));
  }
  CommandResult emit = RunCli({"plan", model, "--dim", "batch=2", "--emit",
                               "tflite", "-o", Path("dyn2.tflite")});
  EXPECT_EQ(emit.exit_code, 65) << emit.err;
  EXPECT_FALSE(Exists(Path("dyn2.tflite")));
  CommandResult weights =
      RunCli({"plan", Write("chain.tflite", ChainModel().Build()), "--weights",
              "arena", "--emit", "tflite", "-o", Path("chain2.tflite")});
  ASSERT_EQ(weights.exit_code, 0) << weights.err;
  EXPECT_THAT(weights.err,
              HasSubstr("weight(s) are planned in the arena (--weights "
                        "arena), but TFLite Micro reads weights from the "
                        "model"));
  EXPECT_EQ(DecodeOfflinePlan(ReadAll(Path("chain2.tflite"))).offsets[1], -1);
}

TEST_F(TfliteCliTest, PlanningThePlannedModelGivesTheSameFile) {
  const std::string model = Write("m.tflite", IfModel().Build());
  ASSERT_EQ(RunCli({"plan", model, "--emit", "tflite", "-o", Path("a.tflite")})
                .exit_code,
            0);
  CommandResult again =
      RunCli({"plan", Path("a.tflite"), "--emit", "tflite", "-o",
              Path("b.tflite"), "--server=" + server_->address()});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(ReadAll(Path("a.tflite")), ReadAll(Path("b.tflite")));
}

TEST_F(TfliteCliTest, FormatFromTheFlagOrTheContent) {
  const std::string bin = Write("model.bin", ChainModel().Build());
  EXPECT_EQ(RunCli({"plan", bin}).exit_code, 0);  // sniffed: TFL3
  EXPECT_EQ(RunCli({"plan", "--input_format=tflite", bin}).exit_code, 0);
  // Named as another format: refused as that format, with a hint.
  const std::string misnamed = Write("model.onnx", ChainModel().Build());
  for (bool remote : {false, true}) {
    std::vector<std::string> args = {"plan", misnamed};
    if (remote) args.push_back("--server=" + server_->address());
    CommandResult r = RunCli(args);
    EXPECT_EQ(r.exit_code, 65) << remote;
    EXPECT_THAT(r.err,
                HasSubstr("does not parse as an onnx.ModelProto; its bytes "
                          "look like a TFLite model: read it as tflite (the "
                          "CLI's --input_format tflite or a .tflite file "
                          "name"))
        << remote;
  }
}

// Every bad input: exit 65 with a message naming the problem, and nothing
// written at -o.
TEST_F(TfliteCliTest, BadModelsAreExit65AndWriteNothing) {
  const std::string full = ChainModel().Build();
  TfliteBuilder buffer = ChainModel();
  buffer.subgraphs[0].tensors[1].buffer = 99;
  TfliteBuilder type = ChainModel();
  type.subgraphs[0].tensors[2].type = 99;
  TfliteBuilder empty;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {full.substr(0, full.size() - 40), "verifier rejects it"},
      {"this is not a model at all", "not a TFLite model"},
      {buffer.Build(), "buffer index 99 is out of range"},
      {type.Build(), "unknown element type 99"},
      {empty.Build(), "has no subgraphs"},
  };
  int n = 0;
  for (const auto& [bytes, message] : cases) {
    const std::string model =
        Write("bad" + std::to_string(n++) + ".tflite", bytes);
    for (bool remote : {false, true}) {
      std::vector<std::string> args = {"plan",   model, "--emit",
                                       "tflite", "-o",  Path("out.tflite")};
      if (remote) args.push_back("--server=" + server_->address());
      CommandResult r = RunCli(args);
      EXPECT_EQ(r.exit_code, 65) << message << ": " << r.err;
      EXPECT_THAT(r.err, HasSubstr(message));
      EXPECT_FALSE(Exists(Path("out.tflite"))) << message;
    }
  }
}

TEST_F(TfliteCliTest, AnOutputThatCannotBeWrittenIsExit73) {
  const std::string model = Write("m.tflite", ChainModel().Build());
  const std::string blocker = Write("not_a_dir", "x");
  CommandResult r = RunCli(
      {"plan", model, "--emit", "tflite", "-o", blocker + "/out.tflite"});
  EXPECT_EQ(r.exit_code, 73) << r.err;
  EXPECT_THAT(r.err, HasSubstr("out.tflite"));
  EXPECT_FALSE(Exists(blocker + "/out.tflite"));
  CommandResult folder =
      RunCli({"plan", model, "--emit", "tflite", "-o", dir()});
  EXPECT_EQ(folder.exit_code, 73) << folder.err;
}

// TFLite Micro runs a model at its own shapes, and so does memplan by
// default; --dim and --input still set them. A --dim no dim of the model
// could be meant by is a warning (one flag set for a pipeline's models);
// a misspelt one is an error that suggests the right name.
TEST_F(TfliteCliTest, DynamicDimsTakeTheModelsOwnShapeUnlessFlagsSetThem) {
  const std::string model = Write("dyn.tflite", DynamicModel().Build());
  CommandResult own = RunCli({"plan", "--format=json", model});
  ASSERT_EQ(own.exit_code, 0) << own.err;
  EXPECT_THAT(own.err, AllOf(HasSubstr("2 tensor(s) have dynamic (-1) dims"),
                             HasSubstr("--dim batch=N")));
  EXPECT_EQ(ParsePlanJson(own.out).unaligned_lower_bound_bytes(), 4 + 4 * 8);
  CommandResult typo = RunCli({"plan", model, "--dim", "bach=1"});
  EXPECT_EQ(typo.exit_code, 65);
  EXPECT_THAT(typo.err, HasSubstr("did you mean --dim batch?"));
  CommandResult inspect = RunCli({"inspect", model});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_THAT(inspect.out,
              AllOf(HasSubstr("default dims:  x dim 0 = 1  (the model's own "
                              "shape; set with --dim batch=N)"),
                    HasSubstr("x dim 1 = 1  (the model's own shape; set with "
                              "--input x=SHAPE)"),
                    HasSubstr("2 tensors have -1 dims")));
  // A batch or dim of 0 leaves nothing to plan: bad input (65).
  CommandResult zero = RunCli({"plan", model, "--dim", "batch=0"});
  EXPECT_EQ(zero.exit_code, 65);
  EXPECT_THAT(zero.err, HasSubstr("--dim batch=0 would leave every tensor "
                                  "with a -1 first dim empty (nothing to "
                                  "plan); give a batch of 1 or more"));
  CommandResult zero_input = RunCli({"plan", model, "--input", "x=1x0"});
  EXPECT_EQ(zero_input.exit_code, 65);
  EXPECT_THAT(zero_input.err, HasSubstr("--input x=1x0: dim 1 of 0 would "
                                        "leave tensor 0 ('x') of subgraph 0 "
                                        "empty"));
  CommandResult pipeline =
      RunCli({"plan", Write("chain.tflite", ChainModel().Build()), "--dim",
              "batch=1,seq_len=16"});
  EXPECT_EQ(pipeline.exit_code, 0) << pipeline.err;
  EXPECT_THAT(pipeline.err, AllOf(HasSubstr("--dim batch ignored"),
                                  HasSubstr("--dim seq_len ignored")));
  for (bool remote : {false, true}) {
    std::vector<std::string> args = {"plan",   "--format=json", model,
                                     "--dim",  "batch=2",       "--input",
                                     "x=2x100"};
    if (remote) args.push_back("--server=" + server_->address());
    CommandResult ok = RunCli(args);
    ASSERT_EQ(ok.exit_code, 0) << ok.err;
    EXPECT_EQ(ParsePlanJson(ok.out).unaligned_lower_bound_bytes(),
              4 * 200 + 4 * 16);
  }
}

// A Vela-compiled model: the ethos-u operator's scratch tensors are in the
// arena and reported as scratch; Vela's own offline plan is kept (the NPU
// addresses the feature maps from the scratch tensor), so the arena is
// Vela's and the planned model carries Vela's offsets again.
TEST_F(TfliteCliTest, EthosUModelsPlanTheirScratchAndKeepVelasPlan) {
  using formats::testing::EthosUModel;
  using formats::testing::kVelaScratch;
  const std::string vela = Write("vela.tflite", EthosUModel(true).Build());
  CommandResult r = RunCli({"plan", "--format=json", vela, "--emit", "tflite",
                            "-o", Path("planned.tflite")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("(Vela's) is kept"));
  const v1::PlanResponse kept = ParsePlanJson(r.out);
  EXPECT_EQ(kept.arena_size_bytes(), kVelaScratch);
  EXPECT_EQ(kept.runtime_arena_bytes(), kVelaScratch);
  std::map<std::string, std::string> kinds;
  for (const v1::Assignment& a : kept.assignments()) kinds[a.name()] = a.kind();
  EXPECT_EQ(kinds["main_split_1_scratch"], "scratch");
  EXPECT_THAT(DecodeOfflinePlan(ReadAll(Path("planned.tflite"))).offsets,
              ::testing::ElementsAreArray(formats::testing::VelaOffsets()));
  CommandResult inspect = RunCli({"inspect", vela});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_THAT(inspect.out,
              HasSubstr("offline plan:  OfflineMemoryAllocation: version 0, "
                        "subgraphs word 1, 7 offsets (5 placed"));
  CommandResult header =
      RunCli({"plan", vela, "--emit", "c_header", "-o", Path("vela.h")});
  EXPECT_NE(header.exit_code, 0);
  EXPECT_THAT(header.err, HasSubstr("emit tflite instead"));

  const std::string bare = Write("bare.tflite", EthosUModel(false).Build());
  for (bool remote : {false, true}) {
    std::vector<std::string> args = {"plan", bare};
    if (remote) args.push_back("--server=" + server_->address());
    CommandResult text = RunCli(args);
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_THAT(text.out, HasSubstr("2 scratch"));
    EXPECT_THAT(text.err, HasSubstr("no usable offline plan"));
  }
  CommandResult json = RunCli({"plan", "--format=json", bare});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const v1::PlanResponse planned = ParsePlanJson(json.out);
  EXPECT_EQ(planned.arena_size_bytes(), 2048 + 2 * kVelaScratch + 2048);
  for (const v1::Assignment& a : planned.assignments()) {
    if (a.name().find("scratch") == std::string::npos) continue;
    EXPECT_EQ(a.kind(), "scratch") << a.name();
    EXPECT_FALSE(a.persistent()) << a.name();
  }
  EXPECT_EQ(planned.unplanned_size(), 2);  // the command stream, weights
}

}  // namespace
}  // namespace memplan
