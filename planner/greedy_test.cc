#include "planner/greedy.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "base/worker_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/portfolio.h"
#include "planner/testing/random_problems.h"
#include "planner/verifier.h"
#include "planner/windows.h"

namespace memplan::planner {
namespace {

// The 8-tensor example of "Efficient Memory Management for Deep Neural Net
// Inference" (Pisarchyk and Lee): (first, last inclusive, size).
Problem PaperExample() {
  const int rows[8][3] = {{0, 1, 32}, {1, 4, 28}, {2, 5, 36}, {3, 5, 16},
                          {4, 5, 8},  {5, 7, 64}, {6, 8, 10}, {7, 8, 40}};
  Problem p;
  for (int i = 0; i < 8; ++i) {
    p.buffers.push_back({std::string(1, static_cast<char>('a' + i)), rows[i][0],
                         rows[i][1] + 1, rows[i][2]});
  }
  return p;
}

TEST(GreedyTest, PaperExampleBestFitBySizeReachesTheLowerBound) {
  Problem p = PaperExample();
  EXPECT_EQ(LowerBound(p), 124);
  EXPECT_EQ(NaiveBytes(p), 234);
  GreedyStrategy greedy(GreedyOrder::kSize, FitPolicy::kBestFit);
  absl::StatusOr<Solution> s = greedy.Solve(p, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->arena_size, 124);
  EXPECT_TRUE(VerifyAllPairs(p, *s).ok());
}

TEST(GreedyTest, AlignmentIsApplied) {
  Problem p;
  p.buffers = {{"a", 0, 2, 10, 1}, {"b", 0, 2, 10, 64}, {"c", 1, 3, 3, 16}};
  for (FitPolicy fit : {FitPolicy::kBestFit, FitPolicy::kFirstFit}) {
    absl::StatusOr<Solution> s = PlaceInOrder(
        p, GreedyPlacementOrder(p, GreedyOrder::kSize), fit, nullptr);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->offsets[1] % 64, 0);
    EXPECT_EQ(s->offsets[2] % 16, 0);
    EXPECT_TRUE(VerifyAllPairs(p, *s).ok());
  }
}

TEST(GreedyTest, FixedOffsetsArePlacedFirstAndKept) {
  Problem p;
  p.buffers = {{"pinned", 0, 4, 16, 1, Offset{100}},
               {"big", 0, 4, 200},
               {"small", 1, 2, 50}};
  GreedyStrategy greedy(GreedyOrder::kSize, FitPolicy::kFirstFit);
  absl::StatusOr<Solution> s = greedy.Solve(p, {});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->offsets[0], 100);
  EXPECT_TRUE(VerifyAllPairs(p, *s).ok());
  // "small" fits in the gap below the pinned buffer; "big" goes above it.
  EXPECT_EQ(s->offsets[2], 0);
  EXPECT_EQ(s->offsets[1], 116);
}

TEST(GreedyTest, BestFitPicksTheSmallestGap) {
  // Two gaps open at step 1: [0,100) and [150,180); a 20-byte buffer goes
  // into the smaller one under best fit, into the first under first fit.
  Problem p;
  p.buffers = {{"hold1", 0, 3, 150, 1, Offset{100}},
               {"hold2", 0, 3, 20, 1, Offset{180}},
               {"x", 1, 2, 20}};
  auto place = [&](FitPolicy fit) {
    return PlaceInOrder(p, {0, 1, 2}, fit, nullptr)->offsets[2];
  };
  p.buffers[0].size = 50;  // [100,150) taken, gap [150,180) of 30 bytes
  EXPECT_EQ(place(FitPolicy::kBestFit), 150);
  EXPECT_EQ(place(FitPolicy::kFirstFit), 0);
}

TEST(GreedyTest, CancelledPlacementStops) {
  Problem p = testing::RandomProblem(5000, 1);
  base::CancelToken token;
  token.Cancel();
  absl::StatusOr<Solution> s =
      PlaceInOrder(p, GreedyPlacementOrder(p, GreedyOrder::kSize),
                   FitPolicy::kBestFit, &token);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(SizeOrderCacheTest, SortsOnceTheOrderOfGreedyPlacementBySize) {
  const Problem p = testing::RandomProblem(3000, 5, 8);
  SizeOrderCache cache(&p);
  absl::StatusOr<const std::vector<int>*> first = cache.Get(nullptr, {});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(**first, GreedyPlacementOrder(p, GreedyOrder::kSize));
  // Kept: the same order again, even under a cancelled token.
  base::CancelToken cancelled;
  cancelled.Cancel();
  absl::StatusOr<const std::vector<int>*> again = cache.Get(&cancelled, {});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *first);
  // Another problem, even an equal copy, gets an order of its own.
  const Problem copy = p;
  std::vector<int> own;
  absl::StatusOr<const std::vector<int>*> other =
      SizeOrder(copy, &cache, nullptr, {}, &own);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(*other, &own);
  EXPECT_EQ(own, **first);
}

TEST(SizeOrderCacheTest, ASortCutShortIsNotKept) {
  const Problem p = testing::RandomProblem(3000, 6, 8);
  SizeOrderCache cache(&p);
  base::CancelToken cancelled;
  cancelled.Cancel();
  EXPECT_EQ(cache.Get(&cancelled, {}).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  // The next caller sorts under its own token.
  absl::StatusOr<const std::vector<int>*> order = cache.Get(nullptr, {});
  ASSERT_TRUE(order.ok()) << order.status();
  EXPECT_EQ(**order, GreedyPlacementOrder(p, GreedyOrder::kSize));
}

TEST(SizeOrderCacheTest, SizeOrderedHeuristicsShareTheOrderAndPlanAsAlone) {
  const Problem p = testing::RandomProblem(4000, 7, 16);
  base::CancelToken cancelled;
  cancelled.Cancel();
  for (FitPolicy fit : {FitPolicy::kBestFit, FitPolicy::kFirstFit}) {
    const GreedyStrategy strategy(GreedyOrder::kSize, fit);
    absl::StatusOr<Solution> alone = strategy.Solve(p, {});
    ASSERT_TRUE(alone.ok()) << alone.status();
    SizeOrderCache cache(&p);
    SolveContext ctx;
    ctx.size_order = &cache;
    absl::StatusOr<Solution> shared = strategy.Solve(p, ctx);
    ASSERT_TRUE(shared.ok()) << shared.status();
    EXPECT_EQ(shared->offsets, alone->offsets);
    EXPECT_EQ(shared->arena_size, alone->arena_size);
    // The heuristic sorted into the cache: the order is there to take.
    EXPECT_TRUE(cache.Get(&cancelled, {}).ok());
  }
  // Other orders never touch it.
  SizeOrderCache cache(&p);
  SolveContext ctx;
  ctx.size_order = &cache;
  ASSERT_TRUE(GreedyStrategy(GreedyOrder::kArea, FitPolicy::kBestFit)
                  .Solve(p, ctx)
                  .ok());
  EXPECT_FALSE(cache.Get(&cancelled, {}).ok());
}

TEST(GreedyTest, RaceGivesUpOnlyWhenSettledAndItsTopIsFar) {
  HeuristicRace race(2, /*far_above=*/1000);
  race.Reached(0, 2000);
  race.Reached(1, 1000);
  EXPECT_FALSE(race.GiveUp(0));  // nothing settled: its plan may be kept
  EXPECT_FALSE(race.gave_up());
  race.Settle();
  EXPECT_FALSE(race.GiveUp(1));  // at far_above: it may still end there
  EXPECT_FALSE(race.gave_up());
  EXPECT_TRUE(race.GiveUp(0));
  EXPECT_TRUE(race.gave_up());
  race.Reached(1, 1001);
  EXPECT_TRUE(race.GiveUp(1));
}

// `strategy`'s plan of `p` as slot 0 of `race`.
absl::StatusOr<Solution> SolveRaced(const GreedyStrategy& strategy,
                                    const Problem& p, HeuristicRace* race) {
  SolveContext ctx;
  ctx.race = race;
  ctx.race_slot = 0;
  return strategy.Solve(p, ctx);
}

TEST(GreedyTest, RacedHeuristicReportsItsTopAndGivesUpWhenItCannotMatter) {
  const Problem p = testing::RandomProblem(5000, 3, 8);
  const GreedyStrategy best_fit(GreedyOrder::kSize, FitPolicy::kBestFit);
  absl::StatusOr<Solution> alone = best_fit.Solve(p, SolveContext{});
  ASSERT_TRUE(alone.ok()) << alone.status();
  {
    // Unsettled: runs to its end with the same plan, and tells its top.
    HeuristicRace race(1, alone->arena_size - 1);
    absl::StatusOr<Solution> raced = SolveRaced(best_fit, p, &race);
    ASSERT_TRUE(raced.ok()) << raced.status();
    EXPECT_EQ(raced->offsets, alone->offsets);
    EXPECT_FALSE(race.gave_up());
    race.Settle();
    EXPECT_TRUE(race.GiveUp(0));  // its top reached its arena
  }
  {
    // Settled, and every buffer ends far above (far_above 0): given up at
    // the first poll, and the race says so.
    HeuristicRace race(1, 0);
    race.Settle();
    EXPECT_EQ(SolveRaced(best_fit, p, &race).status().code(),
              absl::StatusCode::kDeadlineExceeded);
    EXPECT_TRUE(race.gave_up());
  }
  {
    // Settled, but the plan may end near the bound (far_above at its
    // arena): it never gives up.
    HeuristicRace race(1, alone->arena_size);
    race.Settle();
    absl::StatusOr<Solution> raced = SolveRaced(best_fit, p, &race);
    ASSERT_TRUE(raced.ok()) << raced.status();
    EXPECT_EQ(raced->offsets, alone->offsets);
    EXPECT_FALSE(race.gave_up());
  }
}

// What AssignOffsets (planner.cc) reads when it races the heuristics: a
// portfolio whose every member gave up has no plan, and the race says one
// gave up, so the window's plan is taken; unsettled, the same plan as
// without a race.
TEST(GreedyTest, PortfolioOfRacedHeuristicsHasNoPlanOnceAllGaveUp) {
  const Problem p = testing::RandomProblem(5000, 3, 8);
  const std::vector<std::string> names = {"best_fit_size", "first_fit_size"};
  const absl::StatusOr<PortfolioResult> alone =
      RunPortfolio(p, names, SolveContext{}, nullptr);
  ASSERT_TRUE(alone.ok()) << alone.status();
  for (bool settled : {false, true}) {
    HeuristicRace race(2, /*far_above=*/0);
    if (settled) race.Settle();
    std::vector<SolveContext> raced(2);
    std::vector<const SolveContext*> contexts;
    for (int slot = 0; slot < 2; ++slot) {
      raced[slot].race = &race;
      raced[slot].race_slot = slot;
      contexts.push_back(&raced[slot]);
    }
    const absl::StatusOr<PortfolioResult> got =
        RunPortfolio(p, names, contexts, nullptr);
    EXPECT_EQ(race.gave_up(), settled);
    if (settled) {
      EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded);
    } else {
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->solution.offsets, alone->solution.offsets);
      EXPECT_EQ(got->strategy, alone->strategy);
    }
  }
}

// A plan that ends far above the plan raced beside, once that one is
// settled, is returned unverified (AssignOffsets takes the other plan, or
// verifies this one); unsettled, or near enough, it is verified as ever.
// (The skyline places without polling the race, so it ends whatever the
// race says.)
TEST(GreedyTest, PortfolioLeavesAPlanTheRacedWindowBeatsUnverified) {
  const Problem p = testing::RandomProblem(3000, 5, 8);
  const std::vector<std::string> names = {"skyline_area"};
  const absl::StatusOr<PortfolioResult> alone =
      RunPortfolio(p, names, SolveContext{}, nullptr);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_TRUE(alone->verified);
  const Bytes arena = alone->solution.arena_size;
  struct Case {
    bool settled;
    Bytes far_above;
    bool verified;
  };
  for (const Case& c : {Case{false, 0, true}, Case{true, arena, true},
                        Case{true, arena - 1, false}}) {
    HeuristicRace race(1, c.far_above);
    if (c.settled) race.Settle();
    SolveContext raced;
    raced.race = &race;
    const absl::StatusOr<PortfolioResult> got =
        RunPortfolio(p, names, {&raced}, nullptr);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->verified, c.verified)
        << "settled " << c.settled << ", far_above " << c.far_above;
    EXPECT_EQ(got->solution.offsets, alone->solution.offsets);
    EXPECT_EQ(got->strategy, "skyline_area");
  }
}

TEST(GreedyTest, PlacementWithinALimitGivesUpOnlyAboveIt) {
  for (uint32_t seed = 0; seed < 40; ++seed) {
    const Problem p = testing::RandomProblem(50 + seed * 20, seed, 8);
    for (GreedyOrder o : {GreedyOrder::kSize, GreedyOrder::kConflicts}) {
      const std::vector<int> order = GreedyPlacementOrder(p, o);
      absl::StatusOr<Solution> full =
          PlaceInOrder(p, order, FitPolicy::kBestFit, nullptr);
      ASSERT_TRUE(full.ok());
      // At or above the arena best fit reaches: the same plan.
      for (Bytes limit : {full->arena_size, full->arena_size + 1}) {
        absl::StatusOr<Solution> within =
            PlaceInOrderWithin(p, order, limit, nullptr, nullptr);
        ASSERT_TRUE(within.ok()) << within.status();
        EXPECT_EQ(within->offsets, full->offsets) << "seed " << seed;
      }
      // Below it: given up.
      absl::StatusOr<Solution> below =
          PlaceInOrderWithin(p, order, full->arena_size - 1, nullptr, nullptr);
      EXPECT_TRUE(absl::IsAborted(below.status())) << below.status();
    }
  }
}

TEST(GreedyTest, ConflictCountsMatchAllPairsOnRandomProblems) {
  for (uint32_t seed = 0; seed < 200; ++seed) {
    Problem p = testing::RandomProblem(1 + seed % 80, seed);
    std::vector<int64_t> counts = CountConflicts(p);
    for (size_t i = 0; i < p.buffers.size(); ++i) {
      int64_t expected = 0;
      for (size_t j = 0; j < p.buffers.size(); ++j) {
        expected += j != i && LifetimesOverlap(p.buffers[i], p.buffers[j]);
      }
      ASSERT_EQ(counts[i], expected) << "seed " << seed << " buffer " << i;
    }
  }
}

TEST(GreedyTest, ConflictsOrderPutsTheMostInterferingFirstThenTheLargest) {
  Problem p;
  // "hub" overlaps everything; "x" and "y" overlap hub and each other only
  // at step 1; "lone" overlaps hub only.
  p.buffers = {
      {"lone", 4, 5, 500}, {"x", 0, 2, 10}, {"y", 1, 3, 20}, {"hub", 0, 6, 1}};
  EXPECT_THAT(CountConflicts(p), ::testing::ElementsAre(1, 2, 2, 3));
  EXPECT_THAT(GreedyPlacementOrder(p, GreedyOrder::kConflicts),
              ::testing::ElementsAre(3, 2, 1, 0));
}

// A slow breadth order straight from the definition: steps by decreasing
// live size (earlier first on ties), each step's unplaced buffers largest
// first (index on ties).
std::vector<int> BreadthOrderByDefinition(const Problem& p) {
  auto [first, last] = ScheduleSpan(p);
  std::vector<std::pair<Bytes, Step>> steps;
  for (Step t = first; t < last; ++t) {
    Bytes live = 0;
    for (const Buffer& b : p.buffers)
      live += b.start <= t && t < b.end ? b.size : 0;
    steps.push_back({-live, t});
  }
  std::sort(steps.begin(), steps.end());
  std::vector<bool> done(p.buffers.size());
  std::vector<int> order;
  for (const auto& [neg_live, t] : steps) {
    std::vector<std::pair<Bytes, int>> here;
    for (int i = 0; i < static_cast<int>(p.buffers.size()); ++i) {
      const Buffer& b = p.buffers[i];
      if (!done[i] && b.start <= t && t < b.end) here.push_back({-b.size, i});
    }
    std::sort(here.begin(), here.end());
    for (const auto& [neg_size, i] : here) {
      done[i] = true;
      order.push_back(i);
    }
  }
  return order;
}

TEST(GreedyTest, BreadthOrderMatchesTheDefinitionOnRandomProblems) {
  for (uint32_t seed = 0; seed < 300; ++seed) {
    Problem p = testing::RandomProblem(1 + seed % 70, seed);
    ASSERT_EQ(GreedyPlacementOrder(p, GreedyOrder::kBreadth),
              BreadthOrderByDefinition(p))
        << "seed " << seed;
  }
}

// The size and lifetime orders by their definitions (a sort of (key,
// key, index) triples), on lists whose sizes and steps pack into one
// 64-bit key, on lists whose ranges do not (sizes and steps near 2^62),
// and on lists of one size whose steps span 2^63 (one field takes all 64
// bits, the other none: packed), with and without threads: the order is
// the same.
TEST(GreedyTest, SizeAndLifetimeOrdersMatchTheDefinitionPackedOrNot) {
  base::WorkerPool pool(3, 64);
  const Bytes big = Bytes{1} << 62;
  for (uint32_t seed = 0; seed < 40; ++seed) {
    // Over 2^17 buffers on a few seeds, packed and not: the sorts then
    // split over the threads.
    const int n = seed % 10 <= 1 ? 140000 : 1 + static_cast<int>(seed) * 37;
    Problem p = testing::RandomProblem(n, seed, 1);
    if (seed % 4 == 3) {  // one size; steps from about -2^62 to 2^62
      for (size_t i = 0; i < p.buffers.size(); ++i) {
        Buffer& b = p.buffers[i];
        b.size = 64;
        if (i % 2 == 0) {
          b.start -= big;
          b.end -= big;
        } else {
          b.start += big;
          b.end += big;
        }
      }
    } else if (seed % 2 == 1) {  // ranges too wide to pack
      for (size_t i = 0; i < p.buffers.size(); i += 3) {
        p.buffers[i].size += big;
        p.buffers[i].start += big;
        p.buffers[i].end += big;
      }
    }
    for (GreedyOrder order : {GreedyOrder::kSize, GreedyOrder::kLifetime}) {
      std::vector<std::tuple<int64_t, int64_t, int>> want;
      for (int i = 0; i < n; ++i) {
        const Buffer& b = p.buffers[i];
        want.emplace_back(order == GreedyOrder::kSize ? -b.size : b.start,
                          order == GreedyOrder::kSize ? b.start : -b.size, i);
      }
      std::sort(want.begin(), want.end());
      std::vector<int> by_definition;
      for (const auto& [a, b, i] : want) by_definition.push_back(i);
      EXPECT_EQ(GreedyPlacementOrder(p, order), by_definition)
          << "seed " << seed << " order " << static_cast<int>(order);
      absl::StatusOr<std::vector<int>> threaded =
          GreedyPlacementOrder(p, order, nullptr, {&pool, 4});
      ASSERT_TRUE(threaded.ok());
      EXPECT_EQ(*threaded, by_definition) << "seed " << seed;
    }
  }
}

TEST(GreedyTest, BreadthOnThePaperExampleReachesTheLowerBound) {
  // The paper reports greedy by breadth reaching the optimum, 124, here.
  Problem p = PaperExample();
  GreedyStrategy greedy(GreedyOrder::kBreadth, FitPolicy::kBestFit);
  absl::StatusOr<Solution> s = greedy.Solve(p, {});
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(VerifyAllPairs(p, *s).ok());
  EXPECT_EQ(s->arena_size, 124);
}

class GreedyPropertyTest
    : public ::testing::TestWithParam<std::tuple<GreedyOrder, FitPolicy>> {};

TEST_P(GreedyPropertyTest, RandomProblemsVerifyAndRespectTheBound) {
  const auto [order, fit] = GetParam();
  GreedyStrategy greedy(order, fit);
  for (uint32_t seed = 0; seed < 3000; ++seed) {
    Problem p = testing::RandomProblem(2 + seed % 60, seed, 1 << (seed % 7));
    if (seed % 10 == 0) {  // some pinned buffers too
      p.buffers[0].fixed_offset = AlignUp(Bytes{1000}, p.buffers[0].alignment);
    }
    absl::StatusOr<Solution> s = greedy.Solve(p, {});
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE(VerifyAllPairs(p, *s).ok()) << "seed " << seed;
    ASSERT_GE(s->arena_size, LowerBound(p)) << "seed " << seed;
  }
}

// The definition of greedy placement, all pairs: each buffer in order goes
// into the gap `fit` picks among every placed buffer it overlaps; pinned
// ones first, those spanning the schedule stacked at the base (unless a
// pin exists). What PlaceInOrder must reproduce exactly.
Solution PlaceByDefinition(const Problem& p, const std::vector<int>& order,
                           FitPolicy fit) {
  const auto& b = p.buffers;
  Solution s;
  s.offsets.assign(b.size(), -1);
  const auto span = ScheduleSpan(p);
  const bool pinned = std::any_of(b.begin(), b.end(), [](const Buffer& x) {
    return x.fixed_offset.has_value();
  });
  std::vector<int> spanning;
  for (int i = 0; i < static_cast<int>(b.size()); ++i) {
    if (b[i].fixed_offset) s.offsets[i] = *b[i].fixed_offset;
    if (!pinned && SpansAll(b[i], span)) spanning.push_back(i);
  }
  std::sort(spanning.begin(), spanning.end(), [&](int x, int y) {
    return std::make_tuple(-b[x].alignment, -b[x].size, x) <
           std::make_tuple(-b[y].alignment, -b[y].size, y);
  });
  Offset base = 0;
  for (int i : spanning) {
    s.offsets[i] = AlignUp(base, b[i].alignment);
    base = s.offsets[i] + b[i].size;
  }
  std::vector<bool> indexed(b.size());  // placed, not stacked
  for (size_t i = 0; i < b.size(); ++i)
    indexed[i] = b[i].fixed_offset.has_value();
  for (int i : order) {
    if (s.offsets[i] >= 0) continue;
    std::vector<TakenRange> taken;
    for (size_t j = 0; j < b.size(); ++j) {
      if (indexed[j] && LifetimesOverlap(b[i], b[j])) {
        taken.push_back({s.offsets[j], s.offsets[j] + b[j].size});
      }
    }
    std::sort(taken.begin(), taken.end());
    s.offsets[i] = FindGap(taken, b[i].size, b[i].alignment, fit, base);
    indexed[i] = true;
  }
  for (size_t i = 0; i < b.size(); ++i) {
    s.arena_size = std::max(s.arena_size, s.offsets[i] + b[i].size);
  }
  return s;
}

TEST_P(GreedyPropertyTest, ScanAndMergedSearchesGiveThePlanOfTheDefinition) {
  const auto [order, fit] = GetParam();
  for (uint32_t seed = 0; seed < 400; ++seed) {
    Problem p =
        seed % 2
            ? testing::DenseProblem(2 + seed % 150, seed, 1 << (seed % 7))
            : testing::RandomProblem(2 + seed % 150, seed, 1 << (seed % 7));
    if (seed % 5 == 0) {  // some pinned buffers too
      p.buffers[0].fixed_offset = AlignUp(Bytes{1000}, p.buffers[0].alignment);
    }
    if (seed % 7 == 0) {  // and some spanning the schedule
      const auto span = ScheduleSpan(p);
      p.buffers[1].start = span.first;
      p.buffers[1].end = span.second;
    }
    const std::vector<int> o = GreedyPlacementOrder(p, order);
    const Solution want = PlaceByDefinition(p, o, fit);
    for (OverlapSearch search :
         {OverlapSearch::kScan, OverlapSearch::kMerged, OverlapSearch::kAuto}) {
      absl::StatusOr<Solution> got = PlaceInOrder(p, o, fit, nullptr, search);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_EQ(got->offsets, want.offsets)
          << "seed " << seed << " search " << static_cast<int>(search);
      ASSERT_EQ(got->arena_size, want.arena_size);
    }
  }
}

// Placement window by window (windows.h) gives the plan of one pass,
// whatever the windows, the search, pins, spanning buffers and threads.
TEST_P(GreedyPropertyTest, WindowedPlacementGivesThePlanOfTheDefinition) {
  const auto [order, fit] = GetParam();
  base::WorkerPool pool(3, 64);
  for (uint32_t seed = 0; seed < 60; ++seed) {
    Problem p =
        seed % 2
            ? testing::DenseProblem(100 + 7 * seed, seed, 1 << (seed % 7))
            : testing::RandomProblem(100 + 20 * seed, seed, 1 << (seed % 7));
    if (seed % 5 == 0) {
      p.buffers[0].fixed_offset = AlignUp(Bytes{1000}, p.buffers[0].alignment);
    }
    if (seed % 3 == 0) {
      const auto span = ScheduleSpan(p);
      p.buffers[1].start = span.first;
      p.buffers[1].end = span.second;
    }
    const std::vector<int> o = GreedyPlacementOrder(p, order);
    const Solution want = PlaceByDefinition(p, o, fit);
    for (OverlapSearch search :
         {OverlapSearch::kScan, OverlapSearch::kMerged}) {
      for (int per_window : {8, 37}) {
        for (base::WorkerPool* workers : {&pool, (base::WorkerPool*)nullptr}) {
          absl::StatusOr<Solution> got = PlaceInOrder(
              p, o, fit, nullptr, search, per_window, {workers, 4});
          ASSERT_TRUE(got.ok()) << got.status();
          ASSERT_EQ(got->offsets, want.offsets)
              << "seed " << seed << " search " << static_cast<int>(search)
              << " per window " << per_window;
          ASSERT_EQ(got->arena_size, want.arena_size);
        }
      }
    }
  }
}

// On a list of several chunks of 2^16 buffers, with pins and spanning
// buffers spread over them, the windowed placement on threads gives the
// plan of the one pass.
TEST(GreedyTest, LargeWindowedPlacementWithPinsIsTheOnePass) {
  base::WorkerPool pool(3, 64);
  for (bool pins : {false, true}) {
    Problem p = testing::RandomProblem(150000, 11, 64);
    const auto span = ScheduleSpan(p);
    for (int i = 0; i < 150000; i += 40000) {
      p.buffers[i + 1].start = span.first;
      p.buffers[i + 1].end = span.second;
      if (pins) p.buffers[i].fixed_offset = 64 * (i + 1);
    }
    const std::vector<int> o = GreedyPlacementOrder(p, GreedyOrder::kSize);
    absl::StatusOr<Solution> one = PlaceInOrder(
        p, o, FitPolicy::kBestFit, nullptr, OverlapSearch::kAuto, 1 << 30, {});
    ASSERT_TRUE(one.ok()) << one.status();
    absl::StatusOr<Solution> windowed =
        PlaceInOrder(p, o, FitPolicy::kBestFit, nullptr, OverlapSearch::kAuto,
                     kBuffersPerWindow / 4, {&pool, 4});
    ASSERT_TRUE(windowed.ok()) << windowed.status();
    EXPECT_EQ(windowed->offsets, one->offsets) << "pins " << pins;
    EXPECT_EQ(windowed->arena_size, one->arena_size);
    if (!pins) {  // the spanning buffers stacked at the base
      Bytes stack = 0;
      for (int i = 1; i < 150000; i += 40000) {
        stack += AlignUp(p.buffers[i].size, 64);
      }
      for (int i = 1; i < 150000; i += 40000) {
        EXPECT_LT(one->offsets[i], stack) << "buffer " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllStrategies, GreedyPropertyTest,
    ::testing::Combine(
        ::testing::Values(GreedyOrder::kSize, GreedyOrder::kLifetime,
                          GreedyOrder::kArea, GreedyOrder::kConflicts,
                          GreedyOrder::kBreadth),
        ::testing::Values(FitPolicy::kBestFit, FitPolicy::kFirstFit)));

}  // namespace
}  // namespace memplan::planner
