// Nodes in any order, as ONNX Runtime accepts them: the import sorts them
// topologically and stably (onnx/internal/model_reading.h SortNodes), in
// the main graph and in every subgraph, so a shuffled model plans as the
// sorted one does; a cycle is an error naming its nodes.
#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx/import.h"
#include "onnx/inspect.h"
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
using ::testing::Not;

constexpr int kFloat = kOnnxFloat;
constexpr int kBool = kOnnxBool;

using GraphBuilder = OnnxTestGraph;
using Model = OnnxTestModel;

absl::StatusOr<ImportedModel> Import(const Model& model,
                                     const ModelOptions& options = {}) {
  return ImportOnnx(model.Bytes(), "test.onnx", options);
}

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

std::vector<std::string> OpNames(const v1::Graph& g) {
  std::vector<std::string> names;
  for (const v1::Op& op : g.ops()) names.push_back(op.name());
  return names;
}

// The plan of an imported graph with the default options, as JSON would
// show it.
std::string PlanOf(const v1::Graph& graph) {
  planner::PlanOptions options;
  absl::StatusOr<planner::PlanResult> r =
      planner::PlanGraph(api::GraphFromProto(graph), options, nullptr, nullptr);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return "";
  v1::PlanResponse response = api::ToProto(*r, options, {});
  response.clear_stage_micros();
  return response.SerializeAsString();
}

// Reverses the nodes of a graph.
void Reverse(onnx::GraphProto* g) {
  std::vector<onnx::NodeProto> nodes(g->node().begin(), g->node().end());
  std::reverse(nodes.begin(), nodes.end());
  g->clear_node();
  for (onnx::NodeProto& n : nodes) *g->add_node() = std::move(n);
}

// A model with one topological order, some nodes unnamed, holding an If
// whose then branch reads values of the main graph made before the If only
// for it, and a nested If reading a value of the main graph and one of the
// branch.
Model ChainWithIf() {
  Model m;
  GraphBuilder g = m.graph();
  g.Input("cond", kBool, {}).Input("x", kFloat, {"4"});
  g.Add("Relu", {"x"}, {"a"}, "relu");
  g.Add("Sigmoid", {"a"}, {"outer"});  // unnamed
  g.Add("Neg", {"outer"}, {"deep"}, "neg_deep");
  OnnxTestNode node = g.Node("If", {"cond"}, {"z"}, "if");
  GraphBuilder then_branch(node.Graph("then_branch"));
  then_branch.Add("Add", {"outer", "outer"}, {"t1"}, "t_add");
  OnnxTestNode inner = then_branch.Node("If", {"cond"}, {"t2"}, "inner");
  GraphBuilder(inner.Graph("then_branch"))
      .Add("Add", {"deep", "t1"}, {"d1"})
      .Output("d1");
  GraphBuilder(inner.Graph("else_branch"))
      .Add("Identity", {"t1"}, {"d2"})
      .Output("d2");
  then_branch.Add("Add", {"t1", "t2"}, {"t_out"}, "t_sum").Output("t_out");
  GraphBuilder(node.Graph("else_branch"))
      .Add("Identity", {"x"}, {"e_out"})
      .Output("e_out");
  g.Add("Neg", {"z"}, {"y"}, "last").Output("y");
  return m;
}

TEST(OnnxNodeOrderTest, ShuffledNodesPlanAsTheSortedOnes) {
  const Model sorted = ChainWithIf();
  Model shuffled = ChainWithIf();
  onnx::GraphProto* g = shuffled.proto().mutable_graph();
  Reverse(g);
  Reverse(g->mutable_node(1)->mutable_attribute(0)->mutable_g());  // if/then
  ASSERT_EQ(g->node(0).name(), "last");
  absl::StatusOr<ImportedModel> a = Import(sorted);
  absl::StatusOr<ImportedModel> b = Import(shuffled);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_THAT(
      OpNames(*b->graph),
      ElementsAre("relu", "Sigmoid_1", "neg_deep", "if/then_branch/enter",
                  "t_add", "inner/then_branch/enter", "Add_0",
                  "inner/then_branch/exit", "inner/else_branch/enter",
                  "Identity_0", "inner/else_branch/exit", "t_sum",
                  "if/then_branch/exit", "if/else_branch/enter",
                  "if/else_branch/Identity_0", "if/else_branch/exit", "last"));
  EXPECT_EQ(b->graph->SerializeAsString(), a->graph->SerializeAsString());
  EXPECT_EQ(b->warnings, a->warnings);
  EXPECT_EQ(PlanOf(*b->graph), PlanOf(*a->graph));
  // `inspect` evaluates the shuffled model's outputs too.
  absl::StatusOr<ModelSummary> s = SummarizeOnnx(shuffled.Bytes(), "m.onnx");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->outputs.size(), 1u);
  EXPECT_THAT(s->outputs[0].dims, ElementsAre("4"));
}

// Among the nodes ready to run, the first in the file runs first: a node
// moves only as far as what it reads needs.
TEST(OnnxNodeOrderTest, TheSortIsStable) {
  Model m;
  GraphBuilder g = m.graph();
  g.Input("x", kFloat, {"4"});
  g.Add("Relu", {"m"}, {"l"}, "late");
  g.Add("Relu", {"x"}, {"p_out"}, "p");
  g.Add("Relu", {"x"}, {"m"}, "m");
  g.Add("Relu", {"p_out"}, {"q_out"}, "q");
  g.Add("Sum", {"l", "q_out"}, {"y"}, "sum").Output("y");
  absl::StatusOr<ImportedModel> in = Import(m);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_THAT(OpNames(*in->graph), ElementsAre("p", "m", "late", "q", "sum"));
}

TEST(OnnxNodeOrderTest, ALongReversedChainIsSorted) {
  constexpr int kNodes = 3000;
  Model m;
  GraphBuilder g = m.graph();
  g.Input("v0", kFloat, {"4"});
  for (int i = kNodes; i >= 1; --i) {
    g.Add("Relu", {"v" + std::to_string(i - 1)}, {"v" + std::to_string(i)},
          "n" + std::to_string(i));
  }
  g.Output("v" + std::to_string(kNodes));
  absl::StatusOr<ImportedModel> in = Import(m);
  ASSERT_TRUE(in.ok()) << in.status();
  ASSERT_EQ(in->graph->ops_size(), kNodes);
  for (int i = 0; i < kNodes; ++i) {
    ASSERT_EQ(in->graph->ops(i).name(), "n" + std::to_string(i + 1));
  }
}

TEST(OnnxNodeOrderTest, ACycleIsAnErrorNamingItsNodes) {
  Model m;
  GraphBuilder g = m.graph();
  g.Input("x", kFloat, {"4"});
  g.Add("Relu", {"x"}, {"h"}, "in");
  g.Add("Add", {"h", "c_out"}, {"a_out"}, "a");
  g.Add("Relu", {"a_out"}, {"b_out"}, "b");
  g.Add("Relu", {"b_out"}, {"c_out"}, "c");
  g.Add("Relu", {"c_out"}, {"y"}, "out").Output("y");
  absl::Status s = Import(m).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Msg(s),
            "test.onnx: nodes form a cycle, so no order runs them: node 'a' "
            "(Add, #1) reads 'c_out' from node 'c' (Relu, #3), which reads "
            "'b_out' from node 'b' (Relu, #2), which reads 'a_out' from node "
            "'a' (Add, #1)");
  // `inspect` still describes the model, with its declared outputs.
  EXPECT_TRUE(SummarizeOnnx(m.Bytes(), "m.onnx").ok());
}

TEST(OnnxNodeOrderTest, ALongCycleNamesAFewOfItsNodes) {
  Model m;
  GraphBuilder g = m.graph();
  g.Input("x", kFloat, {"4"});
  g.Add("Add", {"x", "r9"}, {"r0"}, "n0");
  for (int i = 1; i < 10; ++i) {
    g.Add("Relu", {"r" + std::to_string(i - 1)}, {"r" + std::to_string(i)},
          "n" + std::to_string(i));
  }
  g.Output("r9");
  const std::string msg = Msg(Import(m).status());
  EXPECT_THAT(msg, AllOf(HasSubstr("node 'n0' (Add, #0) reads 'r9' from node "
                                   "'n9' (Relu, #9), which reads 'r8'"),
                         HasSubstr(", and so on (10 nodes in the cycle)"),
                         Not(HasSubstr("'n4'"))));
}

TEST(OnnxNodeOrderTest, CyclesThroughSubgraphsAndInSubgraphsAreNamed) {
  // A node reading its own output.
  Model self;
  self.graph()
      .Input("x", kFloat, {"4"})
      .Add("Add", {"x", "s_out"}, {"s_out"}, "s")
      .Output("s_out");
  EXPECT_THAT(Msg(Import(self).status()),
              HasSubstr("node 's' (Add, #0) reads 's_out' from node 's' "
                        "(Add, #0)"));
  // An If whose branch reads a value made from the If's output.
  Model through;
  GraphBuilder g = through.graph();
  g.Input("cond", kBool, {}).Input("x", kFloat, {"4"});
  OnnxTestNode node = g.Node("If", {"cond"}, {"z"}, "if");
  GraphBuilder(node.Graph("then_branch"))
      .Add("Relu", {"after"}, {"t"})
      .Output("t");
  GraphBuilder(node.Graph("else_branch")).Add("Relu", {"x"}, {"e"}).Output("e");
  g.Add("Relu", {"z"}, {"after"}, "after").Output("after");
  EXPECT_THAT(Msg(Import(through).status()),
              HasSubstr("node 'if' (If, #0) reads 'after' from node 'after' "
                        "(Relu, #1), which reads 'z' from node 'if' (If, "
                        "#0)"));
  // A cycle inside a branch names the branch.
  Model inside;
  GraphBuilder h = inside.graph();
  h.Input("cond", kBool, {}).Input("x", kFloat, {"4"});
  OnnxTestNode branchy = h.Node("If", {"cond"}, {"z"}, "if");
  GraphBuilder(branchy.Graph("then_branch"))
      .Add("Add", {"x", "q"}, {"p"}, "p")
      .Add("Relu", {"p"}, {"q"}, "q")
      .Output("q");
  GraphBuilder(branchy.Graph("else_branch"))
      .Add("Relu", {"x"}, {"e"})
      .Output("e");
  h.Output("z");
  EXPECT_THAT(Msg(Import(inside).status()),
              HasSubstr("node 'p' (Add, #0) in if/then_branch reads 'q' from "
                        "node 'q' (Relu, #1) in if/then_branch, which reads "
                        "'p' from node 'p'"));
}

// Values nobody makes are still errors naming the node, wherever it is.
TEST(OnnxNodeOrderTest, ReadingAValueNobodyMakesIsStillAnError) {
  Model m;
  m.graph()
      .Input("x", kFloat, {"4"})
      .Add("Relu", {"a"}, {"y"}, "second")
      .Add("Relu", {"ghost"}, {"a"}, "first")
      .Output("y");
  EXPECT_THAT(Msg(Import(m).status()),
              HasSubstr("node 'first' (Relu, #0) reads 'ghost', which is no "
                        "graph input, initializer or node output"));
}

}  // namespace
}  // namespace memplan::formats
