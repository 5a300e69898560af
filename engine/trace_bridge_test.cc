#include "engine/trace_bridge.h"

#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/liveness.h"

namespace memplan::engine {
namespace {

using ::testing::ElementsAre;

// "A3" for an alloc of id 3, "F3" for a free: a compact view of a trace.
std::vector<std::string> Compact(const allocators::Trace& trace) {
  std::vector<std::string> out;
  for (const allocators::TraceEvent& e : trace.events) {
    out.push_back((e.kind == allocators::EventKind::kAlloc ? "A" : "F") +
                  std::to_string(e.id));
  }
  return out;
}

// input(0) and weight(1) feed conv, which writes hidden(2) and an unused
// side output(3); relu reads hidden and writes output(4).
planner::Graph SmallGraph() {
  planner::Graph g;
  g.tensors = {{"input", 1000},
               {"weight", 2000},
               {"hidden", 3000},
               {"side", 100},
               {"output", 1000}};
  g.ops = {{"conv", {"input", "weight"}, {"hidden", "side"}},
           {"relu", {"hidden"}, {"output"}}};
  g.inputs = {"input"};
  g.outputs = {"output"};
  return g;
}

TEST(TraceBridgeTest, AGraphsLifetimesBecomeItsEvents) {
  absl::StatusOr<planner::Problem> p =
      planner::AnalyzeLiveness(SmallGraph(), 64);
  ASSERT_TRUE(p.ok()) << p.status();
  const allocators::Trace trace = TraceFromProblem(*p);
  // Step 0: the input, the weight, and conv's outputs are born, then the
  // input (read by conv only) and the unused side output die; step 1: the
  // graph output is born at its producer, relu, then everything dies.
  EXPECT_THAT(Compact(trace), ElementsAre("A0", "A1", "A2", "A3", "F0", "F3",
                                          "A4", "F1", "F2", "F4"));
  EXPECT_EQ(trace.events[2].size, 3000);
  EXPECT_EQ(trace.events[5].size, 100);  // frees carry the size too
  EXPECT_EQ(trace.events[0].alignment, 64);
  EXPECT_EQ(trace.TensorName(2), "tensor 'hidden' (2)");
}

TEST(TraceBridgeTest, ASubsetKeepsItsIds) {
  absl::StatusOr<planner::Problem> p =
      planner::AnalyzeLiveness(SmallGraph(), 64);
  ASSERT_TRUE(p.ok());
  EXPECT_THAT(Compact(TraceFromProblem(*p, {2, 4})),
              ElementsAre("A2", "A4", "F2", "F4"));
}

TEST(TraceBridgeTest, HugeAndNegativeTimesCostNothingPerStep) {
  planner::Problem p;
  p.buffers = {{"a", -5, int64_t{1} << 62, 8},
               {"b", int64_t{1} << 61, (int64_t{1} << 61) + 1, 8}};
  const allocators::Trace trace = TraceFromProblem(p);
  EXPECT_THAT(Compact(trace), ElementsAre("A0", "A1", "F1", "F0"));
}

TEST(TraceBridgeTest, ATraceRoundTripsThroughItsProblem) {
  const allocators::Trace trace = allocators::LarsonWorkload(300, 16, 8, 512);
  const planner::Problem p = ProblemFromTrace(trace);
  ASSERT_EQ(p.buffers.size(), static_cast<size_t>(trace.NumIds()));
  const allocators::Trace again = TraceFromProblem(p);
  ASSERT_EQ(again.events.size(), trace.events.size());
  // Same peak of live bytes either way.
  EXPECT_EQ(planner::LowerBound(ProblemFromTrace(again)),
            planner::LowerBound(p));
}

// Past 65,536 buffers the events are sorted in runs merged together (the
// token is polled between them): the same order as one sort, births at a
// step before deaths, each by index. A token that fired leaves the trace
// unfinished.
TEST(TraceBridgeTest, LargeProblemsKeepTheOrderAndStopWhenCancelled) {
  planner::Problem p;
  std::mt19937 rng(7);
  for (int i = 0; i < 300000; ++i) {
    const planner::Step start = static_cast<planner::Step>(rng() % 50000);
    const planner::Step end =
        start + 1 + static_cast<planner::Step>(rng() % 100);
    p.buffers.push_back(
        {"", start, end, 64 + static_cast<int64_t>(rng() % 4096), 64});
  }
  const allocators::Trace trace = TraceFromProblem(p);
  ASSERT_EQ(trace.events.size(), 2 * p.buffers.size());
  auto key = [&](const allocators::TraceEvent& e) {
    const planner::Buffer& b = p.buffers[e.id];
    const bool alloc = e.kind == allocators::EventKind::kAlloc;
    return std::make_tuple(alloc ? b.start : b.end - 1, alloc ? 0 : 1, e.id);
  };
  for (size_t k = 1; k < trace.events.size(); ++k) {
    ASSERT_LT(key(trace.events[k - 1]), key(trace.events[k])) << k;
  }
  base::CancelToken cancelled;
  cancelled.Cancel();
  EXPECT_LT(TraceFromProblem(p, &cancelled).events.size(), trace.events.size());
}

}  // namespace
}  // namespace memplan::engine
