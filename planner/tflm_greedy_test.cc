#include "planner/tflm_greedy.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/problem.h"
#include "planner/testing/random_problems.h"
#include "planner/verifier.h"

namespace memplan::planner {
namespace {

using ::testing::ElementsAre;

// The TFLM plan of `problem` as a memplan Solution, for the verifier.
Solution AsSolution(const TflmPlan& plan) {
  return Solution{plan.offsets, plan.arena_size};
}

// Known answers of TFLM's own planner tests (greedy_memory_planner_test.cc).
TEST(TflmGreedyTest, TwoBuffersAtDifferentTimesShareOffsetZero) {
  TflmGreedyPlanner tflm;
  tflm.AddBuffer(10, 0, 1);
  tflm.AddBuffer(20, 2, 3);
  const TflmPlan plan = tflm.Plan();
  EXPECT_THAT(plan.offsets, ElementsAre(0, 0));
  EXPECT_EQ(plan.arena_size, 20);
}

TEST(TflmGreedyTest, LargestFirstThenFirstGapInOffsetOrder) {
  TflmGreedyPlanner tflm;
  tflm.AddBuffer(10, 0, 1);
  tflm.AddBuffer(20, 1, 2);
  tflm.AddBuffer(30, 2, 3);
  tflm.AddBuffer(40, 3, 4);
  tflm.AddBuffer(50, 0, 1);
  const TflmPlan plan = tflm.Plan();
  EXPECT_THAT(plan.offsets, ElementsAre(50, 70, 40, 0, 0));
  EXPECT_EQ(plan.arena_size, 90);
}

TEST(TflmGreedyTest, OverlapCase) {
  TflmGreedyPlanner tflm;
  tflm.AddBuffer(100, 0, 1);
  tflm.AddBuffer(50, 2, 3);
  tflm.AddBuffer(20, 1, 2);
  EXPECT_EQ(tflm.Plan().arena_size, 120);
}

// Equal sizes: TFLM's stable sort runs over the buffers in reverse order of
// addition, so the one added last is placed first (lowest offset).
TEST(TflmGreedyTest, EqualSizesPlaceTheLastAddedFirst) {
  TflmGreedyPlanner tflm;
  tflm.AddBuffer(16, 0, 5);
  tflm.AddBuffer(16, 0, 5);
  tflm.AddBuffer(16, 0, 5);
  EXPECT_THAT(tflm.Plan().offsets, ElementsAre(32, 16, 0));
}

// Offline offsets are kept, placed first, and online buffers fill the gaps
// they leave (a 32-byte hole at 0 takes the 32-byte buffer).
TEST(TflmGreedyTest, OfflineOffsetsFirstAndOnlineBuffersAroundThem) {
  TflmGreedyPlanner tflm;
  tflm.AddBuffer(64, 0, 3);      // online
  tflm.AddBuffer(32, 0, 3, 32);  // offline at 32
  tflm.AddBuffer(32, 1, 2);      // online: fits below the offline one
  const TflmPlan plan = tflm.Plan();
  EXPECT_THAT(plan.offsets, ElementsAre(64, 32, 0));
  EXPECT_EQ(plan.arena_size, 128);
}

TEST(TflmGreedyTest, NoBuffersNoArena) {
  EXPECT_EQ(TflmGreedyPlanner().Plan().arena_size, 0);
}

TEST(TflmGreedyTest, FromProblemAlignsSizesAndKeepsLifetimes) {
  Problem p;
  p.buffers.push_back({"a", 0, 2, 10, 16});
  p.buffers.push_back({"b", 2, 4, 20, 16});
  TflmGreedyPlanner tflm = TflmGreedyPlanner::FromProblem(p);
  ASSERT_EQ(tflm.buffer_count(), 2);
  EXPECT_EQ(tflm.buffers()[0].size, 16);
  EXPECT_EQ(tflm.buffers()[0].last, 1);
  EXPECT_EQ(tflm.buffers()[1].first, 2);
  EXPECT_EQ(tflm.Plan().arena_size, 32);  // [0,1] and [2,3] share memory
}

// Property: on random problems TFLM's plan is valid (checked by memplan's
// verifier) and never below the lower bound.
TEST(TflmGreedyTest, RandomProblemsGiveValidPlans) {
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    Problem p = seed % 2 ? testing::RandomProblem(60, seed, 16)
                         : testing::DenseProblem(80, seed, 16);
    if (seed % 5 == 0) p.buffers[3].fixed_offset = 4096;
    const TflmPlan plan = TflmGreedyPlanner::FromProblem(p).Plan();
    ASSERT_TRUE(Verify(p, AsSolution(plan)).ok())
        << "seed " << seed << ": " << Verify(p, AsSolution(plan));
    EXPECT_GE(plan.arena_size, LowerBound(p)) << "seed " << seed;
  }
}

// The baseline of a large model stops when the call does: a cancelled
// token ends it with DEADLINE_EXCEEDED; a live one gives the same plan as
// planning without a token.
TEST(TflmGreedyTest, PlanningStopsOnceCancelled) {
  const TflmGreedyPlanner tflm =
      TflmGreedyPlanner::FromProblem(testing::RandomProblem(2000, 7, 16));
  base::CancelToken cancel;
  cancel.Cancel();
  absl::StatusOr<TflmPlan> cut = tflm.Plan(&cancel);
  EXPECT_TRUE(absl::IsDeadlineExceeded(cut.status())) << cut.status();

  base::CancelToken live;
  absl::StatusOr<TflmPlan> whole = tflm.Plan(&live);
  ASSERT_TRUE(whole.ok()) << whole.status();
  const TflmPlan plain = tflm.Plan();
  EXPECT_EQ(whole->offsets, plain.offsets);
  EXPECT_EQ(whole->arena_size, plain.arena_size);
}

}  // namespace
}  // namespace memplan::planner
