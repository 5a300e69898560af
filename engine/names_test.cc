#include "engine/names.h"

#include <string>

#include "absl/time/clock.h"
#include "base/cancel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memplan::engine {
namespace {

using ::testing::ElementsAre;

// x -> op -> y, names given.
v1::PlanRequest Chain(const std::string& x, const std::string& y,
                      const std::string& op, const std::string& graph) {
  v1::PlanRequest r;
  v1::Graph* g = r.mutable_graph();
  g->set_name(graph);
  for (const std::string& name : {x, y}) {
    v1::Tensor* t = g->add_tensors();
    t->set_name(name);
    t->set_size_bytes(64);
  }
  v1::Op* o = g->add_ops();
  o->set_name(op);
  o->add_inputs(x);
  o->add_outputs(y);
  g->add_inputs(x);
  g->add_outputs(y);
  return r;
}

TEST(CleanNamesTest, CleanRequestsArePlannedAsTheyAre) {
  PlanOutcome outcome;
  outcome.options.memory_spaces = {{"sram", 0}};
  EXPECT_FALSE(
      CleanNames(Chain("x", "conv/Relu:0", "op", "g"), &outcome).has_value());
  EXPECT_EQ(outcome.input_name, "g");
  EXPECT_EQ(outcome.options.memory_spaces[0].name, "sram");
}

TEST(CleanNamesTest, EveryNameAndReferenceTheSameWay) {
  PlanOutcome outcome;
  outcome.options.memory_spaces = {{"s\xff", 0}, {"s\xfe", 0}};
  const std::optional<v1::PlanRequest> clean =
      CleanNames(Chain("v\xff", "v\xfe", "op\x01", "g\xc0\x80"), &outcome);
  ASSERT_TRUE(clean.has_value());
  const v1::Graph& g = clean->graph();
  EXPECT_EQ(g.name(), "g\\xC0\\x80");
  EXPECT_EQ(outcome.input_name, "g\\xC0\\x80");
  EXPECT_EQ(g.tensors(0).name(), "v\\xFF");
  EXPECT_EQ(g.tensors(1).name(), "v\\xFE");
  EXPECT_EQ(g.ops(0).name(), "op\\x01");
  EXPECT_THAT(g.ops(0).inputs(), ElementsAre("v\\xFF"));
  EXPECT_THAT(g.ops(0).outputs(), ElementsAre("v\\xFE"));
  EXPECT_THAT(g.inputs(), ElementsAre("v\\xFF"));
  EXPECT_THAT(g.outputs(), ElementsAre("v\\xFE"));
  EXPECT_EQ(outcome.options.memory_spaces[0].name, "s\\xFF");
  EXPECT_EQ(outcome.options.memory_spaces[1].name, "s\\xFE");
  EXPECT_FALSE(clean->has_model());
}

// A call that ended stops the walk at once: the tensors and ops keep their
// names (nothing is planned from them).
TEST(CleanNamesTest, AnEndedCallStopsCleaning) {
  base::CancelToken ended;
  ended.Cancel();
  v1::Graph g = Chain("v\xff", "v\xfe", "op\x01", "g").graph();
  CleanGraphNames(&g, &ended);
  EXPECT_EQ(g.tensors(0).name(), "v\xff");
  EXPECT_EQ(g.ops(0).name(), "op\x01");
  CleanGraphNames(&g);
  EXPECT_EQ(g.tensors(0).name(), "v\\xFF");
  PlanOutcome outcome;
  EXPECT_FALSE(
      CleanNames(Chain("v\xff", "y", "op", "g"), &outcome, &ended).has_value());
}

TEST(CleanNamesTest, BufferIds) {
  v1::PlanRequest r;
  r.add_buffers()->set_id("a\xed\xa0\x80");
  r.add_buffers()->set_id("b");
  PlanOutcome outcome;
  const std::optional<v1::PlanRequest> clean = CleanNames(r, &outcome);
  ASSERT_TRUE(clean.has_value());
  EXPECT_FALSE(clean->has_graph());
  EXPECT_EQ(clean->buffers(0).id(), "a\\xED\\xA0\\x80");
  EXPECT_EQ(clean->buffers(1).id(), "b");
  EXPECT_EQ(outcome.input_name, "");
}

TEST(CleanNamesTest, AnImportedModelIsCleanedInPlace) {
  v1::PlanRequest r;
  r.mutable_model()->set_name("dir/m\xff.onnx");
  PlanOutcome outcome;
  outcome.model.emplace();
  *outcome.model->graph = Chain("x\n", "y", "op", "main").graph();
  EXPECT_FALSE(CleanNames(r, &outcome).has_value());
  EXPECT_EQ(outcome.input_name, "dir/m\\xFF.onnx");
  EXPECT_EQ(outcome.model->graph->tensors(0).name(), "x\\x0A");
  EXPECT_THAT(outcome.model->graph->ops(0).inputs(), ElementsAre("x\\x0A"));
}

// Through the whole use case: a plan of hostile names, its response and
// warnings clean.
TEST(CleanNamesTest, PlanAnswersWithCleanNames) {
  v1::PlanRequest r = Chain("v\xff", "v\xfe", "op", "g");
  base::CancelToken cancel(absl::Now() + absl::Seconds(10));
  absl::StatusOr<v1::PlanResponse> response =
      PlanToResponse(r, Limits{}, nullptr, &cancel);
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->assignments_size(), 2);
  EXPECT_EQ(response->assignments(0).name(), "v\\xFF");
  EXPECT_EQ(response->assignments(1).name(), "v\\xFE");
}

}  // namespace
}  // namespace memplan::engine
