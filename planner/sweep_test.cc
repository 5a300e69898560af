#include "planner/sweep.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/cancel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/planner.h"
#include "planner/sections.h"
#include "planner/strategy.h"
#include "planner/testing/random_problems.h"
#include "planner/verifier.h"
#include "planner/work_cap.h"

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
  // a and b (largest first: a at 0, b at 33) end before c starts while
  // keep (above them, from step 1) lives on; c (48 bytes) fits only in
  // their room merged back into one range, whichever is given back first.
  for (bool a_first : {true, false}) {
    Problem p;
    p.buffers = {{"a", 0, a_first ? 2 : 3, 33},
                 {"b", 0, a_first ? 3 : 2, 31},
                 {"keep", 1, 5, 16},
                 {"c", 3, 5, 48},
                 {"small", 3, 4, 8}};
    absl::StatusOr<Solution> s = SweepOffsets(p, nullptr);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_TRUE(VerifyAllPairs(p, *s).ok());
    EXPECT_EQ(s->offsets[2], 64);  // keep above a and b
    EXPECT_EQ(s->offsets[3], 0);   // c in the merged room below keep
    EXPECT_EQ(s->offsets[4], 48);  // small: the best fit of what is left
    EXPECT_EQ(s->arena_size, 80);  // the lower bound: 33 + 31 + 16
  }
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
  // Past what validation lets through (sizes sum below 2^62): the sweep
  // still says so rather than wrapping around.
  Problem p;
  p.buffers = {{"a", 0, 4, Bytes{1} << 62},
               {"b", 0, 4, Bytes{1} << 62},
               {"later", 4, 5, 1}};
  absl::StatusOr<Solution> s = SweepOffsets(p, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(s.status())) << s.status();
  EXPECT_THAT(std::string(s.status().message()), ::testing::HasSubstr("2^63"));
}

TEST(SweepTest, TheRoomBelowAndBetweenPinsIsUsed) {
  Problem p;
  p.buffers = {{"high_pin", 2, 3, 16, 1, Offset{1000}},
               {"mid_pin", 0, 1, 8, 1, Offset{500}},
               {"x", 0, 4, 400},
               {"y", 0, 4, 300},
               {"z", 1, 4, 200}};
  absl::StatusOr<Solution> s = SweepOffsets(p, nullptr);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->offsets[0], 1000);
  EXPECT_EQ(s->offsets[1], 500);
  EXPECT_TRUE(VerifyAllPairs(p, *s).ok());
  // x below the middle pin, y and z between the pins: nothing above them.
  EXPECT_EQ(s->arena_size, 1016);
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
  // Compressed time at hand, so the sweeps themselves see the token.
  absl::StatusOr<Sections> time = CompressTime(p);
  ASSERT_TRUE(time.ok());
  base::CancelToken cancel;
  cancel.Cancel();
  EXPECT_TRUE(
      absl::IsDeadlineExceeded(SweepOffsets(p, &cancel, &*time).status()));
  EXPECT_TRUE(absl::IsDeadlineExceeded(
      SweepSharedObjects(p, &cancel, &*time).status()));
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

// A long trace of short lifetimes, about 150 overlapping each buffer: too
// few for merged ranges, too many pairs for a scan within the cap. The
// greedy passes are not run at all (they could only pass the cap: each
// overlapping pair is read once at least) and the plan is the sweep's, as
// it was when they ran to the cap; a heuristic asked for by name runs.
TEST(SweepTest, PassesCertainToPassTheCapAreNotRun) {
  Problem p;
  uint32_t seed = 7;
  auto next = [&seed] { return seed = seed * 1664525u + 1013904223u; };
  for (int i = 0; i < 120000; ++i) {
    Buffer b;
    b.name = "b" + std::to_string(i);
    b.start = next() % 40000;
    b.end = b.start + 1 + next() % 50;
    b.size = 1 + next() % 4096;
    p.buffers.push_back(b);
  }
  absl::StatusOr<PlanResult> r = PlanBuffers(p, {}, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->strategy, "sweep_best_fit");
  absl::StatusOr<Solution> sweep = SweepOffsets(r->problem, nullptr);
  ASSERT_TRUE(sweep.ok());
  EXPECT_EQ(r->solution.offsets, sweep->offsets);

  absl::StatusOr<Sections> time = CompressTime(r->problem);
  ASSERT_TRUE(time.ok());
  absl::StatusOr<std::unique_ptr<OffsetStrategy>> best =
      MakeStrategy("best_fit_size");
  ASSERT_TRUE(best.ok());
  SolveContext capped;
  capped.work_cap = FirstPlanWorkCap(p.buffers.size()) / 2;
  capped.time = &*time;
  const absl::StatusOr<Solution> refused = (*best)->Solve(r->problem, capped);
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(),
              ::testing::HasSubstr("would pass its work cap"));
  SolveContext uncapped;
  uncapped.time = &*time;
  const absl::StatusOr<Solution> full = (*best)->Solve(r->problem, uncapped);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_TRUE(Verify(r->problem, *full).ok());
}

TEST(SweepTest, TypicalProblemsKeepTheirFirstHeuristics) {
  // Graph-like buffer lists stay far under the cap at any size: the plan
  // and the shared objects are those of the uncapped passes.
  const Problem p = testing::RandomProblem(100000, 3, 64);
  absl::StatusOr<PlanResult> r = PlanBuffers(p, {}, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->strategy, "sweep_best_fit");
  // The graphless coloring (what a graph over its edge limit gets) stays
  // under its cap: the same objects as without one.
  absl::StatusOr<SharedObjects> capped =
      ColorSharedObjects(r->problem, nullptr, nullptr);
  absl::StatusOr<SharedObjects> uncapped = ColorSharedObjects(
      r->problem, nullptr, OverlapSearch::kAuto, /*work_cap=*/0);
  ASSERT_TRUE(capped.ok());
  ASSERT_TRUE(uncapped.ok());
  EXPECT_EQ(capped->object_of, uncapped->object_of);
}

TEST(SweepTest, TheCapIsNLogNWithAFloor) {
  EXPECT_EQ(FirstPlanWorkCap(10), 16'000'000);
  EXPECT_EQ(FirstPlanWorkCap(1 << 20), int64_t{8} * (1 << 20) * 20);
  base::WorkMeter meter(nullptr, 100);
  EXPECT_FALSE(meter.Stop(100));
  EXPECT_FALSE(meter.capped());
  EXPECT_TRUE(meter.Stop(1));
  EXPECT_TRUE(meter.capped());
}

// A loop whose items cost the same throughout is stopped once a sixteenth
// is through if the rest would take it past the cap; one that would stay
// under it, or has too few items to judge, runs on.
TEST(SweepTest, TheCapIsForecastFromTheWorkSoFar) {
  const int64_t total = 100000;
  base::WorkMeter over(nullptr, 1'000'000);  // 100 units an item: 10M in all
  int64_t done = 0;
  while (done < total && !over.Stop(100, done + 1, total)) ++done;
  EXPECT_TRUE(over.capped());
  EXPECT_GE(done + 1, total / 16);
  EXPECT_LT(done, total / 8);
  EXPECT_LE(over.work(), 1'000'000);
  const absl::Status why = over.StopStatus("greedy placement");
  EXPECT_TRUE(absl::IsResourceExhausted(why)) << why;
  EXPECT_THAT(why.message(), ::testing::HasSubstr("on course to pass"));

  base::WorkMeter under(nullptr, 1'000'000);  // 9 units an item: 900k in all
  for (done = 0; done < total; ++done) {
    ASSERT_FALSE(under.Stop(9, done + 1, total)) << done;
  }
  base::WorkMeter few(nullptr, 1'000'000);  // too few items: only the cap stops
  for (done = 0; done < 4000; ++done) {
    ASSERT_FALSE(few.Stop(250, done + 1, 4000)) << done;
  }
  EXPECT_TRUE(few.Stop(1, 4000, 4000));
}

}  // namespace
}  // namespace memplan::planner
