#include "planner/skyline.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/cancel.h"
#include "gtest/gtest.h"
#include "planner/planner.h"
#include "planner/strategy.h"
#include "planner/testing/random_problems.h"
#include "planner/verifier.h"

namespace memplan::planner {
namespace {

// The lowest floor goes first, the largest area among equal floors: a
// (area 8) and c (8, a later index) take the floor 0, and b, queued at 0,
// finds its floor risen to a's top and goes there once nothing is lower.
TEST(SkylineTest, LowestFloorFirstThenLargestArea) {
  const Problem p = testing::ProblemOf({{0, 2, 4}, {1, 3, 2}, {2, 4, 4}});
  absl::StatusOr<Solution> s = SkylineOffsets(p, nullptr, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->offsets, (std::vector<Offset>{0, 4, 0}));
  EXPECT_EQ(s->arena_size, 6);
  EXPECT_EQ(s->arena_size, LowerBound(p));
}

// Among equal floors the largest size goes first with kSize, the largest
// area with kArea: y (size 5, area 5) and z (3 x 2 steps) take the floor 0
// by size, x (2 x 3 steps) by area.
TEST(SkylineTest, TiesGoToTheLargestSizeOrArea) {
  const Problem p = testing::ProblemOf({{0, 3, 2}, {0, 1, 5}, {1, 3, 3}});
  absl::StatusOr<Solution> area = SkylineOffsets(p, nullptr, {});
  absl::StatusOr<Solution> size =
      SkylineOffsets(p, nullptr, {.ties = SkylineTies::kSize});
  ASSERT_TRUE(area.ok() && size.ok()) << area.status() << size.status();
  EXPECT_EQ(area->offsets, (std::vector<Offset>{0, 2, 2}));
  EXPECT_EQ(size->offsets, (std::vector<Offset>{5, 0, 0}));
  EXPECT_EQ(area->arena_size, 7);
  EXPECT_EQ(size->arena_size, 7);
}

// Areas past 2^64 are ordered by their whole product: a's (2^40 bytes x
// 2^30 steps) is twice b's, so a takes the floor first though b comes
// first by index (cut to 64 bits both areas would read 0, a tie).
TEST(SkylineTest, OrdersAreasPastSixtyFourBits) {
  Problem p;
  p.buffers = {
      {.name = "b", .start = 0, .end = Step{1} << 28, .size = Bytes{1} << 41},
      {.name = "a", .start = 0, .end = Step{1} << 30, .size = Bytes{1} << 40}};
  absl::StatusOr<Solution> s = SkylineOffsets(p, nullptr, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->offsets, (std::vector<Offset>{Offset{1} << 40, 0}));
  // By size b goes first.
  absl::StatusOr<Solution> by_size =
      SkylineOffsets(p, nullptr, {.ties = SkylineTies::kSize});
  ASSERT_TRUE(by_size.ok()) << by_size.status();
  EXPECT_EQ(by_size->offsets, (std::vector<Offset>{0, Offset{1} << 41}));
}

// A pinned buffer keeps its offset; a buffer live with it is lifted over
// it (aligned), one that is not goes under it.
TEST(SkylineTest, LiftsOverPinnedBuffersLiveWithIt) {
  Problem p;
  p.buffers = {{.name = "pin", .start = 0, .end = 2, .size = 10},
               {.name = "x", .start = 1, .end = 3, .size = 4, .alignment = 8},
               {.name = "y", .start = 3, .end = 4, .size = 4}};
  p.buffers[0].fixed_offset = 0;
  absl::StatusOr<Solution> s = SkylineOffsets(p, nullptr, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->offsets, (std::vector<Offset>{0, 16, 0}));
  EXPECT_EQ(s->arena_size, 20);
  EXPECT_TRUE(VerifyAllPairs(p, *s).ok());
}

// Near the limits validation allows (sizes summing to 2^62, a pin ending
// at 2^62): the buffer lifted over the pin ends near 2^62 + 2^61, valid.
TEST(SkylineTest, PlansNearTheLimitsWithoutOverflow) {
  constexpr Bytes kHalf = Bytes{1} << 61;
  Problem p;
  p.buffers = {{.name = "pin", .start = 0, .end = 2, .size = 64},
               {.name = "a", .start = 0, .end = 2, .size = kHalf},
               {.name = "b", .start = 0, .end = 2, .size = kHalf}};
  p.buffers[0].fixed_offset = 2 * kHalf - 64;
  absl::StatusOr<Solution> s = SkylineOffsets(p, nullptr, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->offsets, (std::vector<Offset>{2 * kHalf - 64, 0, 2 * kHalf}));
  EXPECT_TRUE(VerifyAllPairs(p, *s).ok());
}

// Every plan is valid: random buffer lists, aligned or not, on steps near
// or far apart, with some buffers pinned where a valid plan had them.
TEST(SkylineTest, PlansAreValidOnRandomProblems) {
  for (int trial = 0; trial < 60; ++trial) {
    Problem p = trial % 2 == 0 ? testing::RandomProblem(120, trial,
                                                        trial % 4 == 0 ? 64 : 1)
                               : testing::DenseProblem(80, trial, 16);
    if (trial % 5 == 0) {  // steps far apart
      for (Buffer& x : p.buffers) {
        x.start *= 1'000'003;
        x.end *= 1'000'003;
      }
    }
    if (trial % 3 == 0) {
      absl::StatusOr<Solution> pinned = SkylineOffsets(p, nullptr, {});
      ASSERT_TRUE(pinned.ok()) << pinned.status();
      for (size_t i = 0; i < p.buffers.size(); i += 7) {
        p.buffers[i].fixed_offset = pinned->offsets[i];
      }
    }
    absl::StatusOr<Solution> s = SkylineOffsets(p, nullptr, {});
    ASSERT_TRUE(s.ok()) << "trial " << trial << ": " << s.status();
    EXPECT_TRUE(VerifyAllPairs(p, *s).ok()) << "trial " << trial;
    // By size too; the flat skyline and the segment tree place alike.
    for (SkylineTies ties : {SkylineTies::kArea, SkylineTies::kSize}) {
      absl::StatusOr<Solution> flat = SkylineOffsets(
          p, nullptr, {.ties = ties, .index = SkylineIndex::kFlat});
      absl::StatusOr<Solution> tree = SkylineOffsets(
          p, nullptr, {.ties = ties, .index = SkylineIndex::kTree});
      ASSERT_TRUE(flat.ok() && tree.ok()) << flat.status() << tree.status();
      EXPECT_TRUE(VerifyAllPairs(p, *flat).ok()) << "trial " << trial;
      EXPECT_EQ(flat->offsets, tree->offsets) << "trial " << trial;
      if (ties == SkylineTies::kArea) {
        EXPECT_EQ(flat->offsets, s->offsets) << "trial " << trial;
      }
    }
    EXPECT_GE(s->arena_size, LowerBound(p)) << "trial " << trial;
    for (size_t i = 0; i < p.buffers.size(); ++i) {
      if (p.buffers[i].fixed_offset) {
        EXPECT_EQ(s->offsets[i], *p.buffers[i].fixed_offset);
      }
    }
  }
}

// The graph of bench/rps_bench: greedy by size ends 8% above the bound,
// the skyline at it.
TEST(SkylineTest, ReachesTheBoundWhereGreedyBySizeDoesNot) {
  PlanOptions options;
  options.strategy = "best_fit_size";
  absl::StatusOr<PlanResult> greedy =
      PlanGraph(testing::RandomGraph(130, 7), options, nullptr, nullptr);
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  ASSERT_GT(greedy->solution.arena_size, greedy->lower_bound);
  absl::StatusOr<Solution> s = SkylineOffsets(greedy->problem, nullptr, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(Verify(greedy->problem, *s).ok());
  EXPECT_EQ(s->arena_size, greedy->lower_bound);
}

TEST(SkylineTest, StopsAtItsWorkCapOrWhenCancelled) {
  const Problem p = testing::DenseProblem(2000, 1);
  absl::StatusOr<Solution> capped =
      SkylineOffsets(p, nullptr, {.work_cap = 1000});
  EXPECT_TRUE(absl::IsResourceExhausted(capped.status())) << capped.status();
  // Polled every 2^16 units: 20,000 buffers take more.
  base::CancelToken cancel;
  cancel.Cancel();
  absl::StatusOr<Solution> cancelled =
      SkylineOffsets(testing::RandomProblem(20000, 1), &cancel, {});
  EXPECT_TRUE(absl::IsDeadlineExceeded(cancelled.status()))
      << cancelled.status();
  EXPECT_TRUE(SkylineOffsets(p, nullptr, {}).ok());
}

TEST(SkylineTest, RegisteredAsStrategies) {
  const Problem p = testing::ProblemOf({{0, 3, 2}, {0, 1, 5}, {1, 3, 3}});
  for (const char* name : {"skyline_area", "skyline_size"}) {
    absl::StatusOr<std::unique_ptr<OffsetStrategy>> s = MakeStrategy(name);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ((*s)->name(), name);
    absl::StatusOr<Solution> plan = (*s)->Solve(p, {});
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->offsets[0], name == std::string("skyline_area") ? 0 : 5);
  }
}

// The default plan of that graph: the skyline pass after greedy by size
// reaches the bound, so the search does not run.
TEST(SkylineTest, TheDefaultPlanTakesItAboveTheBoundBeforeSearching) {
  absl::StatusOr<PlanResult> r =
      PlanGraph(testing::RandomGraph(130, 7), PlanOptions{}, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->strategy, "skyline_area");
  EXPECT_EQ(r->solution.arena_size, r->lower_bound);
  EXPECT_TRUE(r->proven_optimal);
  EXPECT_FALSE(r->time_limited);
  for (const StageTime& stage : r->stages) EXPECT_NE(stage.stage, "search");
}

}  // namespace
}  // namespace memplan::planner
