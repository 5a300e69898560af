#include "planner/sweep.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/cancel.h"
#include "planner/planner.h"
#include "planner/testing/random_problems.h"
#include "planner/verifier.h"

namespace memplan::planner {
namespace {

// Every pair of buffers sharing an object has disjoint lifetimes, and every
// object is as large as its largest member: checked pair by pair.
void ExpectValidObjects(const Problem& p, const SharedObjects& o) {
  ASSERT_EQ(o.object_of.size(), p.buffers.size());
  std::vector<Bytes> largest(o.size.size(), 0);
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    ASSERT_GE(o.object_of[i], 0) << p.buffers[i].name;
    ASSERT_LT(o.object_of[i], static_cast<int>(o.size.size()));
    largest[o.object_of[i]] =
        std::max(largest[o.object_of[i]], p.buffers[i].size);
    for (size_t j = 0; j < i; ++j) {
      if (o.object_of[i] == o.object_of[j]) {
        ASSERT_FALSE(LifetimesOverlap(p.buffers[i], p.buffers[j]))
            << p.buffers[i].name << " and " << p.buffers[j].name
            << " share object " << o.object_of[i];
      }
    }
  }
  EXPECT_EQ(largest, o.size);
}

TEST(SweepTest, FreedMemoryIsReusedBestFitAndCoalesced) {
  Problem p;
  // a and b end at 2; c (48 bytes) then fits only in their merged room.
  p.buffers = {
      {"a", 0, 2, 32}, {"b", 0, 2, 32}, {"keep", 0, 4, 16}, {"c", 2, 4, 48}};
  absl::StatusOr<Solution> s = SweepOffsets(p, nullptr);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(VerifyAllPairs(p, *s).ok());
  EXPECT_EQ(s->arena_size, 80);  // the lower bound: 32 + 32 + 16
  EXPECT_LT(s->offsets[3], 64);  // c went into a and b's room
}

TEST(SweepTest, AlignmentPinsAndSpanningBuffersAreKept) {
  Problem p;
  p.buffers = {{"pinned", 1, 3, 16, 1, Offset{200}},
               {"a", 0, 2, 10, 64},
               {"b", 1, 4, 7, 16},
               {"c", 2, 4, 100, 32}};
  absl::StatusOr<Solution> s = SweepOffsets(p, nullptr);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->offsets[0], 200);
  EXPECT_EQ(s->offsets[1] % 64, 0);
  EXPECT_EQ(s->offsets[2] % 16, 0);
  EXPECT_EQ(s->offsets[3] % 32, 0);
  EXPECT_TRUE(VerifyAllPairs(p, *s).ok());

  Problem spanning;
  spanning.buffers = {{"w", 0, 10, 100}, {"x", 0, 5, 50}, {"y", 5, 10, 60}};
  s = SweepOffsets(spanning, nullptr);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->offsets[0], 0);  // stacked at the base
  EXPECT_EQ(s->arena_size, 160);
  EXPECT_TRUE(VerifyAllPairs(spanning, *s).ok());
}

TEST(SweepTest, AnArenaPast63BitsIsAnErrorNotAnOverflow) {
  // A pin ending near 2^62 and 2^62 bytes more planned above it.
  const Bytes quarter = Bytes{1} << 60;
  Problem p;
  p.buffers = {{"pinned", 0, 4, 16, 1, (Bytes{1} << 62) - 16}};
  for (int i = 0; i < 3; ++i) {
    p.buffers.push_back({"q" + std::to_string(i), 0, 4, quarter, 1});
  }
  p.buffers.push_back({"last", 0, 4, quarter - 64, 1});
  absl::StatusOr<Solution> s = SweepOffsets(p, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(s.status())) << s.status();
  EXPECT_THAT(std::string(s.status().message()), ::testing::HasSubstr("2^63"));
}

TEST(SweepTest, RandomProblemsGiveValidPlansAndObjects) {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    const Problem p = seed % 2 ? testing::DenseProblem(300, seed, 1 + seed % 4)
                               : testing::RandomProblem(300, seed, 64);
    absl::StatusOr<Solution> s = SweepOffsets(p, nullptr);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE(VerifyAllPairs(p, *s).ok()) << "seed " << seed;
    EXPECT_GE(s->arena_size, LowerBound(p));
    absl::StatusOr<SharedObjects> o = SweepSharedObjects(p, nullptr);
    ASSERT_TRUE(o.ok()) << o.status();
    ExpectValidObjects(p, *o);
  }
}

TEST(SweepTest, ACancelledSweepSaysSo) {
  const Problem p = testing::StaggeredProblem(50000, 2);
  CancelToken cancel;
  cancel.Cancel();
  EXPECT_TRUE(absl::IsDeadlineExceeded(SweepOffsets(p, &cancel).status()));
  EXPECT_TRUE(
      absl::IsDeadlineExceeded(SweepSharedObjects(p, &cancel).status()));
}

// Staggered long lifetimes: the gap search of best fit grows like n^2
// there. The plan every request gets stops at the work cap and comes from
// the sweep; a heuristic asked for by name still runs to its end.
TEST(SweepTest, DenseProblemsFallBackToTheSweepAtTheWorkCap) {
  const Problem p = testing::MixedLongProblem(30000, 1);
  PlanOptions options;
  absl::StatusOr<PlanResult> r = PlanBuffers(p, options, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->strategy, "sweep_best_fit");
  EXPECT_TRUE(VerifyAllPairs(p, r->solution).ok());
  absl::StatusOr<Solution> sweep = SweepOffsets(r->problem, nullptr);
  ASSERT_TRUE(sweep.ok());
  EXPECT_EQ(r->solution.offsets, sweep->offsets);

  // The shared objects came from the time-order coloring, too.
  absl::StatusOr<SharedObjects> objects =
      SweepSharedObjects(r->problem, nullptr);
  ASSERT_TRUE(objects.ok());
  EXPECT_EQ(r->shared_objects.object_of, objects->object_of);

  options.strategy = "best_fit_size";
  r = PlanBuffers(p, options, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->strategy, "best_fit_size");
  EXPECT_TRUE(VerifyAllPairs(p, r->solution).ok());
}

TEST(SweepTest, TypicalProblemsKeepTheirFirstHeuristics) {
  // Graph-like buffer lists stay far under the cap at any size: the plan
  // and the shared objects are those of the uncapped passes.
  const Problem p = testing::RandomProblem(100000, 3, 64);
  absl::StatusOr<PlanResult> r = PlanBuffers(p, {}, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->strategy, "sweep_best_fit");
  absl::StatusOr<SharedObjects> uncapped = ColorSharedObjects(
      r->problem, nullptr, OverlapSearch::kAuto, /*work_cap=*/0);
  ASSERT_TRUE(uncapped.ok());
  EXPECT_EQ(r->shared_objects.object_of, uncapped->object_of);
}

TEST(SweepTest, TheCapIsNLogNWithAFloor) {
  EXPECT_EQ(FirstPlanWorkCap(10), 16'000'000);
  EXPECT_EQ(FirstPlanWorkCap(1 << 20), int64_t{8} * (1 << 20) * 20);
  WorkMeter meter(nullptr, 100);
  EXPECT_FALSE(meter.Stop(100));
  EXPECT_FALSE(meter.capped());
  EXPECT_TRUE(meter.Stop(1));
  EXPECT_TRUE(meter.capped());
}

}  // namespace
}  // namespace memplan::planner
