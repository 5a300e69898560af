// The ONNX importer on small models built here with ONNX's own protobuf
// types: one concern per test, each asserting what `memplan plan` would show.
#include "formats/onnx_import.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"
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

constexpr int kFloat = onnx::TensorProto::FLOAT;
constexpr int kInt64 = onnx::TensorProto::INT64;
constexpr int kBool = onnx::TensorProto::BOOL;

// Sets a shape from strings: "4" is a value, "batch" a symbolic dim, "?" a
// dim with neither.
void SetShape(onnx::TypeProto* type, int elem,
              const std::vector<std::string>& dims) {
  onnx::TypeProto::Tensor* t = type->mutable_tensor_type();
  t->set_elem_type(elem);
  onnx::TensorShapeProto* shape = t->mutable_shape();
  for (const std::string& d : dims) {
    onnx::TensorShapeProto::Dimension* dim = shape->add_dim();
    int64_t v = 0;
    if (absl::SimpleAtoi(d, &v)) {
      dim->set_dim_value(v);
    } else if (d != "?") {
      dim->set_dim_param(d);
    }
  }
}

// A float tensor attribute value of `dims`, all zeros.
onnx::TensorProto FloatTensor(const std::vector<int64_t>& dims) {
  onnx::TensorProto t;
  t.set_data_type(kFloat);
  int64_t n = 1;
  for (int64_t d : dims) {
    t.add_dims(d);
    n *= d;
  }
  for (int64_t i = 0; i < n; ++i) t.add_float_data(0);
  return t;
}

// Builds a graph (the main graph or a subgraph) one call per element.
class GraphBuilder {
 public:
  explicit GraphBuilder(onnx::GraphProto* g) : g_(g) {}

  GraphBuilder& Input(const std::string& name, int elem,
                      const std::vector<std::string>& dims) {
    onnx::ValueInfoProto* vi = g_->add_input();
    vi->set_name(name);
    SetShape(vi->mutable_type(), elem, dims);
    return *this;
  }
  GraphBuilder& Output(const std::string& name) {
    g_->add_output()->set_name(name);
    return *this;
  }
  GraphBuilder& Output(const std::string& name, int elem,
                       const std::vector<std::string>& dims) {
    onnx::ValueInfoProto* vi = g_->add_output();
    vi->set_name(name);
    SetShape(vi->mutable_type(), elem, dims);
    return *this;
  }
  // An initializer with int64 `values` (shape [n]) or float zeros of
  // `dims`; `external` puts its data in a file that does not exist.
  GraphBuilder& Int64Initializer(const std::string& name,
                                 const std::vector<int64_t>& values) {
    onnx::TensorProto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(kInt64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
    return *this;
  }
  GraphBuilder& FloatInitializer(const std::string& name,
                                 const std::vector<int64_t>& dims,
                                 bool external = false) {
    onnx::TensorProto* t = g_->add_initializer();
    *t = FloatTensor(dims);
    t->set_name(name);
    if (external) {
      t->clear_float_data();
      t->set_data_location(onnx::TensorProto::EXTERNAL);
      onnx::StringStringEntryProto* e = t->add_external_data();
      e->set_key("location");
      e->set_value("weights_that_do_not_exist.bin");
    }
    return *this;
  }
  onnx::NodeProto* Node(const std::string& op,
                        const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs,
                        const std::string& name = "") {
    onnx::NodeProto* n = g_->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return n;
  }
  GraphBuilder& Add(const std::string& op,
                    const std::vector<std::string>& inputs,
                    const std::vector<std::string>& outputs,
                    const std::string& name = "") {
    Node(op, inputs, outputs, name);
    return *this;
  }

 private:
  onnx::GraphProto* g_;
};

// A model with opset 13 of the default domain.
class Model {
 public:
  Model() {
    model_.set_ir_version(8);
    onnx::OperatorSetIdProto* o = model_.add_opset_import();
    o->set_domain("");
    o->set_version(13);
    model_.mutable_graph()->set_name("test");
  }
  GraphBuilder graph() { return GraphBuilder(model_.mutable_graph()); }
  onnx::ModelProto& proto() { return model_; }
  std::string Bytes() const { return model_.SerializeAsString(); }

 private:
  onnx::ModelProto model_;
};

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
  const v1::Graph& g = in->graph;
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
  // x and y persistent (128) + a, b, c live together at step 2 (192).
  EXPECT_EQ(plan.lower_bound_bytes(), 320);
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
  std::map<std::string, int64_t> sizes = Sizes(in->graph);
  EXPECT_EQ(sizes["values"], 4 * 3 * 4);
  EXPECT_EQ(sizes["indices"], 4 * 3 * 8);
  EXPECT_EQ(sizes["top"], 2 * 10 * 4);
  EXPECT_EQ(sizes["bottom"], 2 * 10 * 4);
  EXPECT_THAT(FindOp(in->graph, "topk").outputs(),
              ElementsAre("values", "indices"));
  EXPECT_GT(Plan(in->graph).arena_size_bytes(), 0);
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
  EXPECT_EQ(Sizes(set->graph)["x"], 3 * 16 * 4);
  EXPECT_EQ(Sizes(set->graph)["y"], 3 * 16 * 4);
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
  EXPECT_EQ(Sizes(in->graph)["y"], 5 * 16 * 4);

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
  EXPECT_EQ(Sizes(in->graph)["y"], 64);
  ASSERT_EQ(in->warnings.size(), 1u);
  EXPECT_THAT(in->warnings[0],
              AllOf(HasSubstr("'x'"), HasSubstr("dim 0 is dynamic and unnamed"),
                    HasSubstr("using 1")));
}

TEST(OnnxImportTest, DimFlagMatchingNothingWarns) {
  Model m;
  m.graph().Input("x", kFloat, {"4"}).Add("Relu", {"x"}, {"y"}).Output("y");
  ModelOptions options;
  options.dims["batchh"] = 2;
  absl::StatusOr<ImportedModel> in = Import(m, options);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_THAT(in->warnings, ElementsAre(HasSubstr("no input or output has a "
                                                  "dim named 'batchh'")));
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
  std::map<std::string, int64_t> sizes = Sizes(in->graph);
  EXPECT_EQ(sizes["w"], 128);
  EXPECT_EQ(sizes["b"], 32);
  EXPECT_EQ(sizes["y"], 32);
  EXPECT_THAT(in->graph.inputs(), ElementsAre("x"));
  EXPECT_EQ(in->stats.weights, 2);
  EXPECT_EQ(in->stats.tensors, 5);
  v1::PlanResponse plan = Plan(in->graph);
  // Weights stay in the model: not in the arena, counted apart.
  ASSERT_EQ(plan.unplanned_size(), 2);
  EXPECT_EQ(plan.unplanned(0).name(), "w");
  EXPECT_EQ(plan.unplanned(0).kind(), "weight");
  EXPECT_EQ(plan.unplanned(1).name(), "b");
  EXPECT_EQ(plan.weights_bytes(), 128 + 32);
  EXPECT_FALSE(FindAssignment(plan, "xw").persistent());
  EXPECT_EQ(FindAssignment(plan, "x").kind(), "input");
}

// An If whose branches give different shapes, one of them reading an outer
// value that no main-graph node reads.
Model IfModel() {
  Model m;
  GraphBuilder g = m.graph();
  g.Input("cond", kBool, {})
      .Input("x", kFloat, {"4"})
      .Add("Relu", {"x"}, {"outer"}, "relu");
  onnx::NodeProto* node = g.Node("If", {"cond"}, {"z"}, "if");
  onnx::AttributeProto* then_attr = node->add_attribute();
  then_attr->set_name("then_branch");
  then_attr->set_type(onnx::AttributeProto::GRAPH);
  then_attr->mutable_g()->set_name("then");
  GraphBuilder(then_attr->mutable_g())
      .Add("Sigmoid", {"outer"}, {"then_out"})
      .Output("then_out");
  onnx::AttributeProto* else_attr = node->add_attribute();
  else_attr->set_name("else_branch");
  else_attr->set_type(onnx::AttributeProto::GRAPH);
  else_attr->mutable_g()->set_name("else");
  onnx::NodeProto* constant =
      GraphBuilder(else_attr->mutable_g()).Node("Constant", {}, {"else_out"});
  onnx::AttributeProto* value = constant->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  *value->mutable_t() = FloatTensor({6});
  else_attr->mutable_g()->add_output()->set_name("else_out");
  g.Add("Neg", {"z"}, {"y"}, "neg").Output("y");
  return m;
}

TEST(OnnxImportTest, IfNodeOuterReadsStayAliveAndOutputsTakeTheLargerBranch) {
  absl::StatusOr<ImportedModel> in = Import(IfModel());
  ASSERT_TRUE(in.ok()) << in.status();
  const v1::Graph& g = in->graph;
  // Branches give 4 and 6 floats: the output is sized for 6.
  EXPECT_EQ(Sizes(g)["z"], 24);
  EXPECT_EQ(Sizes(g)["y"], 24);  // sized from z's declared shape
  EXPECT_THAT(FindOp(g, "if").inputs(), ElementsAre("cond", "outer"));
  EXPECT_EQ(in->stats.control_flow_nodes, 1);
  EXPECT_EQ(in->stats.subgraph_values, 2);  // then_out, else_out
  EXPECT_THAT(in->warnings,
              ElementsAre(HasSubstr("node 'if' (If, #1): the branches give 'z' "
                                    "different shapes; planning the larger (6 "
                                    "elements)"),
                          AllOf(HasSubstr("1 control-flow node(s) (If)"),
                                HasSubstr("not planned"))));
  v1::PlanResponse plan = Plan(g);
  const v1::Assignment& outer = FindAssignment(plan, "outer");
  EXPECT_EQ(outer.last_step(), 1);  // alive through the If (step 1)
  // z (step 1) cannot share memory with outer, which the If still reads.
  const v1::Assignment& z = FindAssignment(plan, "z");
  EXPECT_TRUE(z.offset() >= outer.offset() + outer.size() ||
              outer.offset() >= z.offset() + z.size());
}

// A Loop with a scan output: its leading dim (the trip count) is unknown.
Model LoopModel() {
  Model m;
  GraphBuilder g = m.graph();
  g.Input("trip", kInt64, {}).Input("cond", kBool, {});
  onnx::NodeProto* loop = g.Node("Loop", {"trip", "cond"}, {"scan"}, "loop");
  onnx::AttributeProto* body = loop->add_attribute();
  body->set_name("body");
  body->set_type(onnx::AttributeProto::GRAPH);
  body->mutable_g()->set_name("body");
  GraphBuilder b(body->mutable_g());
  b.Input("i", kInt64, {}).Input("c", kBool, {});
  onnx::NodeProto* constant = b.Node("Constant", {}, {"row"});
  onnx::AttributeProto* value = constant->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  *value->mutable_t() = FloatTensor({2});
  b.Add("Identity", {"c"}, {"c_out"})
      .Output("c_out", kBool, {})
      .Output("row", kFloat, {"2"});
  g.Output("scan");
  return m;
}

TEST(OnnxImportTest, LoopScanOutputNeedsAShapeThenPlans) {
  absl::StatusOr<ImportedModel> unknown = Import(LoopModel());
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(Msg(unknown.status()),
              AllOf(HasSubstr("1 value(s)"), HasSubstr("scan ("),
                    HasSubstr("node 'loop'"), HasSubstr("--input")));
  ModelOptions options;
  options.shapes["scan"] = {5, 2};
  absl::StatusOr<ImportedModel> in = Import(LoopModel(), options);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(Sizes(in->graph)["scan"], 40);
  EXPECT_GT(Plan(in->graph).arena_size_bytes(), 0);
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
      EXPECT_GT(Plan(in->graph).arena_size_bytes(), 0) << cut;
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

TEST(OnnxImportTest, NodesOutOfOrderNameTheNode) {
  Model m;
  m.graph()
      .Input("x", kFloat, {"4"})
      .Add("Relu", {"a"}, {"y"}, "second")
      .Add("Relu", {"x"}, {"a"}, "first")
      .Output("y");
  absl::Status s = Import(m).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s),
              AllOf(HasSubstr("node 'second' (Relu, #0) reads 'a' before "
                              "node 'first' (Relu, #1)"),
                    HasSubstr("topological order")));
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
  EXPECT_EQ(Sizes(in->graph)["y"], 48);
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
  EXPECT_EQ(Sizes(in->graph)["y"], 4 * 6 * 4);
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
  ASSERT_EQ(in->graph.ops_size(), 3);
  EXPECT_EQ(in->graph.ops(0).name(), "Relu_0");
  EXPECT_EQ(in->graph.ops(1).name(), "dup");
  EXPECT_EQ(in->graph.ops(2).name(), "dup_2");
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
  EXPECT_EQ(Sizes(in->graph).count("none"), 0u);
  EXPECT_THAT(in->graph.outputs(), ElementsAre("y"));
  EXPECT_THAT(FindOp(in->graph, "relu_empty").inputs(), IsEmpty());
  EXPECT_GT(Plan(in->graph).arena_size_bytes(), 0);
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
  const std::string models[] = {IfModel().Bytes(), LoopModel().Bytes()};
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
      absl::StatusOr<ImportedModel> in = ImportOnnx(bytes, "fuzz.onnx", {});
      (in.ok() ? ok : failed)++;
      if (in.ok()) Plan(in->graph);  // an imported graph must plan
    }
  }
  EXPECT_GT(failed, 0);
  EXPECT_GT(ok, 0);
}

}  // namespace
}  // namespace memplan::formats
