#include "planner/hill_climb.h"

#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/strategy.h"
#include "planner/testing/random_problems.h"
#include "planner/verifier.h"

namespace memplan::planner {
namespace {

// Small dense problems on which greedy orders often miss the bound.
Problem Dense(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  Problem p;
  for (int i = 0; i < n; ++i) {
    const Step start = rng() % 12;
    p.buffers.push_back({"b" + std::to_string(i), start,
                         start + 1 + static_cast<Step>(rng() % 6),
                         1 + static_cast<Bytes>(rng() % 100)});
  }
  return p;
}

TEST(HillClimbTest, NeverWorseThanItsSeedAndAlwaysValid) {
  for (uint32_t seed = 0; seed < 500; ++seed) {
    Problem p = seed % 2 ? Dense(5 + seed % 40, seed)
                         : testing::RandomProblem(5 + seed % 200, seed,
                                                  1 << (seed % 4));
    for (GreedyOrder o : {GreedyOrder::kSize, GreedyOrder::kLifetime}) {
      absl::StatusOr<HillClimbResult> r =
          HillClimb(p, GreedyPlacementOrder(p, o), {.iterations = 60}, nullptr);
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_TRUE(Verify(p, r->solution).ok()) << "seed " << seed;
      ASSERT_LE(r->solution.arena_size, r->seed_arena) << "seed " << seed;
      ASSERT_GE(r->solution.arena_size, LowerBound(p));
      // The order it reports gives the plan it reports.
      absl::StatusOr<Solution> again =
          PlaceInOrder(p, r->order, FitPolicy::kBestFit, nullptr);
      ASSERT_EQ(again->offsets, r->solution.offsets) << "seed " << seed;
    }
  }
}

TEST(HillClimbTest, ImprovesOnGreedySomewhere) {
  int improved = 0;
  for (uint32_t seed = 0; seed < 100; ++seed) {
    Problem p = Dense(30, seed);
    absl::StatusOr<HillClimbResult> r =
        HillClimb(p, GreedyPlacementOrder(p, GreedyOrder::kSize), {}, nullptr);
    ASSERT_TRUE(r.ok());
    improved += r->solution.arena_size < r->seed_arena;
  }
  EXPECT_GT(improved, 10);
}

TEST(HillClimbTest, DeterministicForAGivenSeed) {
  Problem p = testing::RandomProblem(2000, 5, 64);
  HillClimbStrategy climb;
  absl::StatusOr<Solution> a = climb.Solve(p, {});
  absl::StatusOr<Solution> b = climb.Solve(p, {});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->offsets, b->offsets);
  EXPECT_EQ(a->arena_size, b->arena_size);
}

TEST(HillClimbTest, StrategyIsNoWorseThanEveryBestFitHeuristic) {
  for (uint32_t seed = 0; seed < 50; ++seed) {
    Problem p = Dense(25, seed + 1000);
    absl::StatusOr<Solution> climbed = HillClimbStrategy().Solve(p, {});
    ASSERT_TRUE(climbed.ok());
    ASSERT_TRUE(VerifyAllPairs(p, *climbed).ok());
    for (GreedyOrder o :
         {GreedyOrder::kSize, GreedyOrder::kArea, GreedyOrder::kConflicts,
          GreedyOrder::kBreadth, GreedyOrder::kLifetime}) {
      absl::StatusOr<Solution> g =
          GreedyStrategy(o, FitPolicy::kBestFit).Solve(p, {});
      EXPECT_LE(climbed->arena_size, g->arena_size) << "seed " << seed;
    }
  }
}

TEST(HillClimbTest, CancelledClimbReturnsAValidPlan) {
  Problem p = testing::RandomProblem(3000, 9, 16);
  const std::vector<int> order = GreedyPlacementOrder(p, GreedyOrder::kSize);
  // The deadline leaves time for the seed (measured here, so a slow build,
  // e.g. under a sanitizer, scales it; 300 ms more for a loaded machine
  // that stops this thread a while) but not for a million iterations
  // (minutes).
  absl::Time start = absl::Now();
  ASSERT_TRUE(PlaceInOrder(p, order, FitPolicy::kBestFit, nullptr).ok());
  const absl::Duration seed_time = absl::Now() - start;
  start = absl::Now();
  base::CancelToken token(start + 4 * seed_time + absl::Milliseconds(300));
  absl::StatusOr<HillClimbResult> r =
      HillClimb(p, order, {.iterations = 1'000'000}, &token);
  // The seed was placed before the deadline: a plan, not an error.
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(r->iterations, 1'000'000);
  EXPECT_LT(absl::Now() - start, 20 * seed_time + absl::Milliseconds(800));
  EXPECT_TRUE(Verify(p, r->solution).ok());
}

TEST(HillClimbTest, LargeProblemsGetTheSeedWithoutClimbing) {
  Problem p = testing::RandomProblem(kMaxHillClimbBuffers + 1, 3);
  absl::StatusOr<HillClimbResult> r =
      HillClimb(p, GreedyPlacementOrder(p, GreedyOrder::kSize), {}, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->iterations, 0);
  EXPECT_EQ(r->solution.arena_size, r->seed_arena);
}

TEST(HillClimbTest, StopsAtTheArenaAskedFor) {
  int stopped = 0;
  for (uint32_t seed = 0; seed < 100; ++seed) {
    Problem p = Dense(30, seed);
    const std::vector<int> order = GreedyPlacementOrder(p, GreedyOrder::kSize);
    absl::StatusOr<HillClimbResult> full =
        HillClimb(p, order, {.iterations = 200}, nullptr);
    ASSERT_TRUE(full.ok());
    if (full->solution.arena_size == full->seed_arena) continue;
    // Asked to stop at the arena the full climb reached: it ends there,
    // with a valid plan, in no more moves than the full climb needed.
    absl::StatusOr<HillClimbResult> r = HillClimb(
        p, order, {.iterations = 200, .stop_at = full->solution.arena_size},
        nullptr);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->solution.arena_size, full->solution.arena_size);
    EXPECT_LT(r->iterations, 200) << "seed " << seed;
    EXPECT_TRUE(Verify(p, r->solution).ok());
    ++stopped;
  }
  EXPECT_GT(stopped, 10);
  // A seed already at the arena asked for is not climbed at all.
  Problem p = Dense(30, 1);
  absl::StatusOr<HillClimbResult> at_seed = HillClimb(
      p, GreedyPlacementOrder(p, GreedyOrder::kSize),
      {.iterations = 50, .stop_at = std::numeric_limits<Bytes>::max()},
      nullptr);
  ASSERT_TRUE(at_seed.ok());
  EXPECT_EQ(at_seed->iterations, 0);
}

TEST(HillClimbTest, AClimbFromAPlacedSeedIsTheClimbFromItsOrder) {
  for (uint32_t seed = 0; seed < 50; ++seed) {
    Problem p = Dense(40, seed);
    const std::vector<int> order =
        GreedyPlacementOrder(p, GreedyOrder::kConflicts);
    absl::StatusOr<HillClimbResult> from_order =
        HillClimb(p, order, {.iterations = 40}, nullptr);
    absl::StatusOr<Solution> placed =
        PlaceInOrder(p, order, FitPolicy::kBestFit, nullptr);
    ASSERT_TRUE(from_order.ok() && placed.ok());
    const HillClimbResult from_plan =
        HillClimb(p, order, *placed, {.iterations = 40}, nullptr);
    EXPECT_EQ(from_plan.seed_arena, placed->arena_size);
    EXPECT_EQ(from_plan.solution.offsets, from_order->solution.offsets)
        << "seed " << seed;
    EXPECT_EQ(from_plan.order, from_order->order);
  }
}

TEST(HillClimbTest, RegisteredAsTheLastHeuristic) {
  EXPECT_EQ(HeuristicNames().back(), "hill_climb");
  EXPECT_THAT(HeuristicNames(), ::testing::IsSupersetOf({"best_fit_conflicts",
                                                         "first_fit_breadth"}));
  absl::StatusOr<std::unique_ptr<OffsetStrategy>> s =
      MakeStrategy("hill_climb");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->name(), "hill_climb");
}

}  // namespace
}  // namespace memplan::planner
