#include "proto/convert.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/cancel.h"
#include "base/worker_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/memory_spaces.h"
#include "planner/planner.h"
#include "planner/testing/random_problems.h"

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

TEST(ConvertTest, LongAssignmentListsAreTheSameOnThreads) {
  // 50,000 planned buffers (four chunks of the assignment list), with a
  // weight the plan leaves out every 7,000 tensors and a tensor written in
  // place of the one before every 5,000.
  constexpr int kBuffers = 50000;
  planner::PlanOptions options;
  absl::StatusOr<planner::PlanResult> r = planner::PlanBuffers(
      planner::testing::RandomProblem(kBuffers, 3), options, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<planner::TensorPlacement> tensors;
  std::vector<size_t> planned;  // where each planned tensor lies in `tensors`
  for (size_t t = 0; t < r->tensors.size(); ++t) {
    if (t % 7000 == 0) {
      planner::TensorPlacement w;
      w.name = "w" + std::to_string(t);
      w.kind = planner::TensorKind::kWeight;
      w.size = 8;
      tensors.push_back(w);
    }
    planner::TensorPlacement p = r->tensors[t];
    if (t % 5000 == 1) p.in_place_of = r->tensors[t - 1].name;
    planned.push_back(tensors.size());
    tensors.push_back(p);
  }
  r->tensors = tensors;
  ResponseOptions alone;
  alone.no_timings = true;
  const v1::PlanResponse one = ToProto(*r, options, alone);
  ASSERT_EQ(one.assignments_size(), kBuffers);
  ASSERT_EQ(one.unplanned_size(), 8);
  EXPECT_EQ(one.unplanned(1).name(), "w7000");
  for (int i = 0; i < kBuffers; ++i) {
    const v1::Assignment& a = one.assignments(i);
    const planner::TensorPlacement& p = tensors[planned[i]];
    ASSERT_EQ(a.name(), p.name) << i;
    ASSERT_EQ(a.offset(), r->OffsetOf(planned[i])) << i;
    ASSERT_EQ(a.in_place_of(), p.in_place_of) << i;
  }
  EXPECT_EQ(one.assignments(5001).in_place_of(), one.assignments(5000).name());
  // On four threads, also into a message on a protobuf arena: the same
  // bytes (compared as a bool: a failed EXPECT_EQ would print megabytes).
  base::WorkerPool workers(3, 16);
  ResponseOptions threads = alone;
  threads.parallel = {&workers, 4};
  const std::string bytes = one.SerializeAsString();
  EXPECT_TRUE(ToProto(*r, options, threads).SerializeAsString() == bytes);
  google::protobuf::Arena arena;
  auto* on_arena =
      google::protobuf::Arena::CreateMessage<v1::PlanResponse>(&arena);
  ToProto(*r, options, threads, on_arena);
  EXPECT_TRUE(on_arena->SerializeAsString() == bytes);
  // A call that ended: the list is left unfinished, on any thread count.
  base::CancelToken ended;
  ended.Cancel();
  threads.cancel = &ended;
  EXPECT_LT(ToProto(*r, options, threads).assignments_size(), kBuffers);
}

TEST(ConvertTest, ClipCutsLongNames) {
  EXPECT_EQ(Clip("short"), "short");
  EXPECT_EQ(Clip(std::string(100, 'a'), 4), "aaaa... (100 chars)");
}

// A name echoed in a message cannot start a line of its own (or move the
// terminal's cursor): its control characters are escaped.
TEST(ConvertTest, ClipEscapesWhatCouldForgeALine) {
  EXPECT_EQ(Clip("x\nmemplan: OK\x1b[2K"), "x\\x0Amemplan: OK\\x1B[2K");
  EXPECT_EQ(Clip("caf\xc3\xa9\xff"), "caf\xc3\xa9\\xFF");
}

TEST(ConvertTest, MemoryPoolsAreCountedAndTheirNamesEscapedInErrors) {
  v1::PlanOptions many;
  for (int i = 0; i <= planner::kMaxMemorySpaces; ++i) {
    many.add_memory_pools()->set_name(absl::StrCat("p", i));
  }
  absl::StatusOr<planner::PlanOptions> o = OptionsFromProto(many, Budgets{});
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(o.status().message(), HasSubstr("65 pools; at most 64"));

  v1::PlanOptions twice;
  for (int i = 0; i < 2; ++i) {
    twice.add_memory_pools()->set_name("x\nmemplan: OK");
  }
  o = OptionsFromProto(twice, Budgets{});
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(o.status().message(),
              HasSubstr("duplicate memory pool name 'x\\x0Amemplan: OK'"));
  EXPECT_THAT(std::string(o.status().message()),
              ::testing::Not(HasSubstr("\n")));
}

}  // namespace
}  // namespace memplan::api
