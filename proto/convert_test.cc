#include "proto/convert.h"

#include <string>

#include "absl/time/time.h"
#include "base/cancel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/planner.h"

namespace memplan::api {
namespace {

using ::testing::HasSubstr;

TEST(ConvertTest, OptionsDefaultsAndEcho) {
  absl::StatusOr<planner::PlanOptions> o =
      OptionsFromProto(v1::PlanOptions(), Budgets{});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->alignment, 64);
  EXPECT_EQ(o->strategy, "auto");
  EXPECT_EQ(o->time_budget, absl::Seconds(1));
  EXPECT_FALSE(o->weights_in_arena);
  EXPECT_EQ(o->io, planner::IoPolicy::kRuntime);
  const v1::PlanOptions echo = OptionsToProto(*o);
  EXPECT_EQ(echo.alignment(), 64);
  EXPECT_EQ(echo.strategy(), "auto");
  EXPECT_EQ(echo.time_budget_ms(), 1000);
  EXPECT_EQ(echo.weights(), "exclude");
  EXPECT_EQ(echo.io(), "arena");
}

TEST(ConvertTest, IoPoliciesRoundTripAndOthersAreRefused) {
  for (const char* name : {"arena", "arena_keep_inputs", "exclude"}) {
    v1::PlanOptions in;
    in.set_io(name);
    absl::StatusOr<planner::PlanOptions> o = OptionsFromProto(in, Budgets{});
    ASSERT_TRUE(o.ok()) << name << ": " << o.status();
    EXPECT_EQ(planner::IoPolicyName(o->io), name);
    EXPECT_EQ(OptionsToProto(*o).io(), name);
  }
  v1::PlanOptions in;
  in.set_io("keep");
  absl::StatusOr<planner::PlanOptions> o = OptionsFromProto(in, Budgets{});
  EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(o.status().message()),
              HasSubstr("options.io 'keep' is not \"arena\", "
                        "\"arena_keep_inputs\" or \"exclude\""));
}

TEST(ConvertTest, BudgetsAreCutToTheMaximum) {
  v1::PlanOptions in;
  in.set_time_budget_ms(int64_t{1} << 50);
  in.set_effort(1000);
  absl::StatusOr<planner::PlanOptions> o = OptionsFromProto(in, Budgets{});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->time_budget, absl::Seconds(60));
  EXPECT_EQ(o->effort, 1000);
  in.set_effort(-1);
  EXPECT_THAT(std::string(OptionsFromProto(in, {}).status().message()),
              HasSubstr("options.effort -1 is negative"));
}

TEST(ConvertTest, UnknownStrategyListsTheKnownOnesAndIsCut) {
  v1::PlanOptions in;
  in.set_strategy("best_fit_sise");
  absl::Status s = OptionsFromProto(in, {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("unknown strategy 'best_fit_sise'; valid: auto, "
                        "best_fit_size"));
  in.set_strategy(std::string(100000, 'z'));
  s = OptionsFromProto(in, {}).status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("(100000 bytes)"));
  EXPECT_LT(s.message().size(), 2000u);
}

// A request's input is read polling the call's token: a call cancelled
// during the reading of a large list stops there (a 500,000-buffer list
// takes 0.15-0.2 s), and reads everything otherwise.
TEST(ConvertTest, ReadingStopsWhenTheCallIsCancelled) {
  constexpr int kCount = 3 * base::kPollStride;
  v1::Graph graph;
  google::protobuf::RepeatedPtrField<v1::Buffer> buffers;
  for (int i = 0; i < kCount; ++i) {
    v1::Tensor* t = graph.add_tensors();
    t->set_name("t" + std::to_string(i));
    t->set_size_bytes(64);
    v1::Op* op = graph.add_ops();
    op->set_name("op" + std::to_string(i));
    op->add_outputs(t->name());
    v1::Buffer* b = buffers.Add();
    b->set_id(t->name());
    b->set_end(i + 1);
    b->set_size(64);
  }
  EXPECT_EQ(GraphFromProto(graph).tensors.size(), size_t{kCount});
  EXPECT_EQ(GraphFromProto(graph).ops.size(), size_t{kCount});
  EXPECT_EQ(BuffersFromProto(buffers, 64).buffers.size(), size_t{kCount});
  // Fires at its second question: the first poll reads kPollStride items.
  int asked = 0;
  base::CancelToken token(nullptr, absl::InfiniteFuture(),
                          [&asked] { return ++asked > 1; });
  EXPECT_EQ(BuffersFromProto(buffers, 64, &token).buffers.size(),
            size_t{base::kPollStride});
  base::CancelToken cancelled;
  cancelled.Cancel();
  const planner::Graph read = GraphFromProto(graph, &cancelled);
  EXPECT_TRUE(read.tensors.empty());
  EXPECT_TRUE(read.ops.empty());
}

TEST(ConvertTest, GraphRoundTripsWithConstantsAndVariables) {
  planner::Graph g;
  g.name = "g";
  g.tensors = {{"x", 4},
               {"w", 8, 16, true},
               {"s", 4, 0, false, true},
               {"wt", 8, 0, true}};
  g.tensors[3].folded = true;
  g.ops = {{"f", {"x", "w", "s"}, {}, true}, {"t", {"w"}, {"wt"}}};
  g.inputs = {"x"};
  const planner::Graph back = GraphFromProto(GraphToProto(g));
  ASSERT_EQ(back.tensors.size(), 4u);
  EXPECT_TRUE(back.tensors[1].constant);
  EXPECT_FALSE(back.tensors[1].folded);
  EXPECT_TRUE(back.tensors[3].constant);
  EXPECT_TRUE(back.tensors[3].folded);
  EXPECT_EQ(back.tensors[1].alignment, 16);
  EXPECT_TRUE(back.tensors[2].variable);
  EXPECT_TRUE(back.ops[0].in_place);
  EXPECT_EQ(back.inputs, g.inputs);
}

TEST(ConvertTest, ResponseRoundTripsForReports) {
  planner::Graph g;
  g.tensors = {{"x", 64}, {"w", 32}, {"h", 128}, {"y", 64}};
  g.ops = {{"f", {"x", "w"}, {"h"}}, {"g", {"h"}, {"y"}}};
  g.inputs = {"x"};
  g.outputs = {"y"};
  planner::PlanOptions options;
  absl::StatusOr<planner::PlanResult> r =
      planner::PlanGraph(g, options, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::PlanResponse response = ToProto(*r, options, {});
  const planner::PlanResult back = ResultFromProto(response);
  EXPECT_EQ(back.solution.arena_size, r->solution.arena_size);
  EXPECT_EQ(back.lower_bound, r->lower_bound);
  EXPECT_EQ(back.weights_bytes, 32);
  ASSERT_EQ(back.tensors.size(), 4u);  // 3 planned + the weight
  EXPECT_EQ(back.tensors[3].name, "w");
  EXPECT_EQ(back.tensors[3].buffer, -1);
  EXPECT_EQ(planner::FormatReport(back).substr(0, 40),
            planner::FormatReport(*r).substr(0, 40));
}

TEST(ConvertTest, ClipCutsLongNames) {
  EXPECT_EQ(Clip("short"), "short");
  EXPECT_EQ(Clip(std::string(100, 'a'), 4), "aaaa... (100 chars)");
}

}  // namespace
}  // namespace memplan::api
