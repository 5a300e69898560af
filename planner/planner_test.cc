#include "planner/planner.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <memory>
#include <random>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/parallel.h"
#include "base/testing/one_cpu.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/interference.h"
#include "planner/liveness.h"
#include "planner/peak_window.h"
#include "planner/portfolio.h"
#include "planner/shared_objects.h"
#include "planner/skyline.h"
#include "planner/strategy.h"
#include "planner/testing/cpu_time.h"
#include "planner/testing/graphs.h"
#include "planner/testing/random_problems.h"
#include "planner/testing/traces.h"
#include "planner/verifier.h"
#include "planner/windows.h"
#include "planner/work_cap.h"

namespace memplan::planner {
namespace {

using ::testing::HasSubstr;

// Best and first fit by size alone: the heuristics of the default plan.
Bytes QuickHeuristicsArena(const Problem& p) {
  Bytes arena = std::numeric_limits<Bytes>::max();
  for (const std::string& name : QuickHeuristicNames()) {
    PlanOptions options;
    options.strategy = name;
    absl::StatusOr<PlanResult> r = PlanBuffers(p, options, nullptr, nullptr);
    if (r.ok()) arena = std::min(arena, r->solution.arena_size);
  }
  return arena;
}

// The arena the default plan has before its search: the quick heuristics,
// then, above the aligned bound, the skyline pass by area.
Bytes BeforeTheSearch(const Problem& p) {
  const Bytes quick = QuickHeuristicsArena(p);
  if (quick <= AlignedLowerBound(p)) return quick;
  absl::StatusOr<Solution> s = SkylineOffsets(p, nullptr, {});
  return s.ok() ? std::min(quick, s->arena_size) : quick;
}

// A large graph's tensor table and weight bytes, built in chunks on
// threads: each planned tensor points at its own buffer, numbered in
// tensor order; the weights (marked constant, some folded) have none and
// count unless folded.
TEST(PlannerTest, LargeGraphTableNumbersBuffersAndSumsWeights) {
  Graph g = testing::RandomGraph(40000, 13);
  Bytes want_weights = g.tensors[1].size_bytes;  // "weight": no producer
  for (size_t t = 3; t < g.tensors.size(); t += 97) {
    g.tensors[t].constant = true;
    g.tensors[t].folded = t % 2 == 0;
    if (!g.tensors[t].folded) want_weights += g.tensors[t].size_bytes;
  }
  base::WorkerPool pool(3, 64);
  for (base::WorkerPool* workers : {(base::WorkerPool*)nullptr, &pool}) {
    PlanOptions options;
    options.max_threads = 4;
    absl::StatusOr<PlanResult> r = PlanGraph(g, options, workers, nullptr);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->weights_bytes, want_weights);
    ASSERT_EQ(r->tensors.size(), g.tensors.size());
    int next = 0;  // the next planned buffer
    for (size_t t = 0; t < g.tensors.size(); ++t) {
      const TensorPlacement& p = r->tensors[t];
      ASSERT_EQ(p.name, g.tensors[t].name);
      if (p.kind == TensorKind::kWeight) {
        ASSERT_EQ(p.buffer, -1) << p.name;
        continue;
      }
      ASSERT_EQ(p.buffer, next) << p.name;
      ASSERT_EQ(r->problem.buffers[next].name, p.name);
      ++next;
    }
    EXPECT_EQ(next, static_cast<int>(r->problem.buffers.size()));
  }
}

TEST(PlannerTest, GraphPlanIsVerifiedAndReportsEveryStage) {
  base::WorkerPool pool(2, 16);
  Graph g = testing::RandomGraph(50, 7);
  absl::StatusOr<PlanResult> r = PlanGraph(g, PlanOptions{}, &pool, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  // Every tensor but the weight, which stays in the model.
  EXPECT_EQ(r->problem.buffers.size(), g.tensors.size() - 1);
  EXPECT_EQ(r->weights_bytes, g.tensors[1].size_bytes);
  EXPECT_EQ(r->tensors.size(), g.tensors.size());
  EXPECT_EQ(r->tensors[1].kind, TensorKind::kWeight);
  EXPECT_EQ(r->tensors[1].buffer, -1);
  EXPECT_TRUE(VerifyAllPairs(r->problem, r->solution).ok());
  EXPECT_GE(r->solution.arena_size, r->lower_bound);
  EXPECT_LE(r->solution.arena_size, r->naive_bytes + 64 * 200);
  for (Offset o : r->solution.offsets) EXPECT_EQ(o % 64, 0);
  std::vector<std::string> stages;
  for (const StageTime& s : r->stages) stages.push_back(s.stage);
  std::vector<std::string> expected = {"liveness", "prepare", "pools",
                                       "offsets", "verify"};
  // The search follows where best and first fit, then the skyline pass,
  // end above the bound.
  if (BeforeTheSearch(r->problem) > AlignedLowerBound(r->problem)) {
    expected.push_back("search");
  }
  EXPECT_THAT(stages, ::testing::UnorderedElementsAreArray(expected));
  EXPECT_EQ(r->shared_objects.object_of.size(), g.tensors.size() - 1);
}

// A weight folded from another one (an ONNX Identity of an initializer)
// stays out of the arena like the other weights, but the model does not
// store it: weights_bytes counts the stored one alone.
TEST(PlannerTest, FoldedWeightsAreLeftOutOfWeightsBytes) {
  Graph g;
  g.tensors = {{"x", 64},
               {"w", 256, 0, /*constant=*/true},
               {"wt", 256, 0, /*constant=*/true},
               {"y", 64}};
  g.tensors[2].folded = true;
  g.ops = {{"t", {"w"}, {"wt"}}, {"f", {"x", "wt"}, {"y"}}};
  g.inputs = {"x"};
  g.outputs = {"y"};
  absl::StatusOr<PlanResult> r = PlanGraph(g, PlanOptions{}, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tensors[2].kind, TensorKind::kWeight);
  EXPECT_EQ(r->tensors[1].buffer, -1);
  EXPECT_EQ(r->tensors[2].buffer, -1);
  EXPECT_EQ(r->weights_bytes, 256);
}

TEST(PlannerTest, StrategiesAfterOneAtTheLowerBoundAreSkipped) {
  // Two buffers live together and one after: best fit stacks them at the
  // bound (48), so first fit and the climb could at best tie.
  Problem p;
  p.buffers = {{"a", 0, 2, 32}, {"b", 1, 3, 16}, {"c", 2, 4, 32}};
  const std::vector<std::string> names = {"best_fit_size", "first_fit_size",
                                          "hill_climb"};
  const SolveContext ctx;
  const std::vector<const SolveContext*> contexts(names.size(), &ctx);
  absl::StatusOr<PortfolioResult> r =
      RunPortfolio(p, names, contexts, nullptr, LowerBound(p));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->solution.arena_size, 48);
  EXPECT_EQ(r->strategy, "best_fit_size");
  EXPECT_EQ(r->skipped, 2);
  // Without a bound every strategy runs, and the winner is the same.
  r = RunPortfolio(p, names, contexts, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->strategy, "best_fit_size");
  EXPECT_EQ(r->skipped, 0);
}

TEST(PlannerTest, AutoPicksTheSmallestArenaOfAllStrategies) {
  Problem p = testing::RandomProblem(300, 3);
  PlanOptions options;
  absl::StatusOr<PlanResult> best = PlanBuffers(p, options, nullptr, nullptr);
  ASSERT_TRUE(best.ok());
  for (const std::string& name : QuickHeuristicNames()) {
    options.strategy = name;
    absl::StatusOr<PlanResult> one = PlanBuffers(p, options, nullptr, nullptr);
    ASSERT_TRUE(one.ok()) << name;
    EXPECT_EQ(one->strategy, name);
    EXPECT_LE(best->solution.arena_size, one->solution.arena_size) << name;
  }
}

// A buffer pinned just under 2^62 with the others above it: best fit's
// arena stays under 2^63, the skyline's would pass it. The default plan
// keeps best fit's instead of failing on the skyline pass that follows.
TEST(PlannerTest, AutoKeepsItsPlanWhenTheSkylinePassWouldPassTwoToThe63) {
  const Bytes g = int64_t{1} << 32;  // alignment
  Problem p = testing::ProblemOf({{0, 3, 1},
                                  {0, 2, int64_t{4611686018427387000}},
                                  {1, 3, 100},
                                  {2, 3, 100}});
  p.buffers[0].fixed_offset = int64_t{4611686014132420608};
  p.buffers[0].alignment = p.buffers[1].alignment = g;
  p.buffers[2].alignment = g;
  absl::StatusOr<PlanResult> r = PlanBuffers(p, {}, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(Verify(p, r->solution).ok());
  EXPECT_GT(r->solution.arena_size, int64_t{1} << 62);
}

TEST(PlannerTest, AutoWithOptimizeIsNoWorseThanTheHillClimb) {
  for (uint32_t seed = 0; seed < 10; ++seed) {
    Problem p = testing::DenseProblem(60, seed);
    PlanOptions options;
    // Bounded by work, not by a budget a loaded machine could cut short:
    // the climb inside "auto" is then the same climb as alone.
    options.effort = 20000;
    options.time_budget = absl::Seconds(60);
    options.strategy = "hill_climb";
    absl::StatusOr<PlanResult> climb =
        PlanBuffers(p, options, nullptr, nullptr);
    options.strategy = "auto";
    absl::StatusOr<PlanResult> quick =
        PlanBuffers(p, options, nullptr, nullptr);
    options.optimize = true;
    absl::StatusOr<PlanResult> best = PlanBuffers(p, options, nullptr, nullptr);
    ASSERT_TRUE(climb.ok() && quick.ok() && best.ok());
    EXPECT_EQ(climb->strategy, "hill_climb");
    EXPECT_NE(quick->strategy, "hill_climb");  // not in the quick portfolio
    EXPECT_LE(best->solution.arena_size, climb->solution.arena_size);
    EXPECT_LE(best->solution.arena_size, quick->solution.arena_size);
  }
}

TEST(PlannerTest, SamePlanOnEveryRunAndThreadCount) {
  base::WorkerPool one(1, 64), two(2, 64), four(4, 64);
  for (uint32_t seed = 0; seed < 12; ++seed) {
    // Quick auto on problems large enough for the portfolio to use the
    // pool's threads (2000 buffers and up); auto+optimize (hill climb and
    // exact search, which stops by itself here, long before the budget) on
    // small ones: a search cut by its time budget is the one part that is
    // not reproducible.
    const bool optimize = seed % 2 == 1;
    Problem p = optimize ? testing::RandomProblem(40, seed, 8)
                         : testing::RandomProblem(2500, seed, 64);
    PlanOptions options;
    options.optimize = optimize;
    options.time_budget = absl::Seconds(30);
    options.max_threads = kDefaultMaxThreads;  // 4 workers on any machine
    absl::StatusOr<PlanResult> base = PlanBuffers(p, options, nullptr, nullptr);
    ASSERT_TRUE(base.ok());
    for (int run = 0; run < 2; ++run) {
      for (base::WorkerPool* pool : {&one, &two, &four}) {
        absl::StatusOr<PlanResult> r = PlanBuffers(p, options, pool, nullptr);
        ASSERT_TRUE(r.ok());
        EXPECT_EQ(r->strategy, base->strategy) << "seed " << seed;
        ASSERT_EQ(r->solution.offsets, base->solution.offsets)
            << "seed " << seed << " threads " << pool->threads();
      }
    }
  }
}

TEST(PlannerTest, ExactSearchHonoursItsTimeBudgetWithin20Percent) {
  // Dense, alignment 1: the search cannot finish in 1 s here. Planning runs
  // on this thread (no workers), the whole pipeline from liveness to
  // verification. The budget is wall time; the work done is measured as
  // this thread's CPU time, which scheduling noise cannot inflate.
  Problem p = testing::DenseProblem(800, 1);
  PlanOptions options;
  options.strategy = "exact";
  options.time_budget = absl::Seconds(1);
  const absl::Time start = absl::Now();
  const absl::Duration cpu_start = testing::ThreadCpuTime();
  absl::StatusOr<PlanResult> r = PlanBuffers(p, options, nullptr, nullptr);
  const absl::Duration cpu = testing::ThreadCpuTime() - cpu_start;
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->proven_optimal);  // else the instance is not hard
  EXPECT_LE(cpu, absl::Milliseconds(1200));
  EXPECT_GE(took, absl::Milliseconds(900));  // it did use its budget
  EXPECT_TRUE(Verify(r->problem, r->solution).ok());
}

TEST(PlannerTest, ExactSearchClosesTheGapOnAHardInstance) {
  // Greedy by size leaves a gap here: two pairs that only fit crosswise.
  Problem p;
  p.buffers = {{"a", 0, 2, 3},
               {"b", 1, 3, 2},
               {"c", 2, 4, 3},
               {"d", 0, 1, 2},
               {"e", 3, 4, 2}};
  PlanOptions options;
  options.strategy = "best_fit_size";
  absl::StatusOr<PlanResult> greedy = PlanBuffers(p, options, nullptr, nullptr);
  options.strategy = "exact";
  absl::StatusOr<PlanResult> best = PlanBuffers(p, options, nullptr, nullptr);
  ASSERT_TRUE(greedy.ok() && best.ok());
  EXPECT_LE(best->solution.arena_size, greedy->solution.arena_size);
  EXPECT_EQ(best->solution.arena_size, LowerBound(p));
  EXPECT_TRUE(best->proven_optimal);
  EXPECT_TRUE(VerifyAllPairs(p, best->solution).ok());
}

TEST(PlannerTest, DefaultPlanTakesTheSkylineWhereItReachesTheBound) {
  // Best and first fit by size both end at 17 bytes here, one above the
  // bound (step 0); the skyline pass that follows reaches the bound, so the
  // search does not run.
  Problem p;
  p.buffers = {{"a", 1, 3, 6}, {"b", 0, 1, 5}, {"c", 0, 2, 5},
               {"d", 0, 3, 2}, {"e", 0, 1, 4}, {"f", 3, 4, 2}};
  ASSERT_EQ(LowerBound(p), 16);
  ASSERT_GT(QuickHeuristicsArena(p), LowerBound(p));
  absl::StatusOr<PlanResult> r =
      PlanBuffers(p, PlanOptions{}, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->solution.arena_size, LowerBound(p));
  EXPECT_EQ(r->strategy, "skyline_area");
  EXPECT_TRUE(r->proven_optimal);
  EXPECT_FALSE(r->time_limited);
  EXPECT_TRUE(VerifyAllPairs(p, r->solution).ok());
  for (const StageTime& stage : r->stages) EXPECT_NE(stage.stage, "search");
}

TEST(PlannerTest, DefaultPlanSearchesWhereTheHeuristicsEndAboveTheBound) {
  // Best and first fit by size and the skyline pass all end at 11 bytes
  // here, two above the bound (steps 0 and 2); the default plan reaches the
  // bound by its node-capped search, which no time budget cuts.
  Problem p;
  p.buffers = {{"a", 2, 4, 6},
               {"b", 0, 1, 5},
               {"c", 1, 3, 3},
               {"d", 0, 2, 1},
               {"e", 0, 2, 2}};
  ASSERT_EQ(LowerBound(p), 9);
  ASSERT_EQ(QuickHeuristicsArena(p), 11);
  ASSERT_EQ(BeforeTheSearch(p), 11);
  PlanOptions options;
  options.time_budget = absl::Nanoseconds(1);  // the search ignores it
  base::WorkerPool pool(4, 64);
  absl::StatusOr<PlanResult> first = PlanBuffers(p, options, nullptr, nullptr);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->solution.arena_size, LowerBound(p));
  EXPECT_EQ(first->strategy, "exact");
  EXPECT_TRUE(first->proven_optimal);
  EXPECT_FALSE(first->time_limited);
  EXPECT_TRUE(VerifyAllPairs(p, first->solution).ok());
  for (base::WorkerPool* workers :
       {static_cast<base::WorkerPool*>(nullptr), &pool, &pool}) {
    absl::StatusOr<PlanResult> again =
        PlanBuffers(p, options, workers, nullptr);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->solution.offsets, first->solution.offsets);
  }
}

TEST(PlannerTest, DefaultPlansReachTheBoundTheHeuristicsMissSameEveryRun) {
  // Graph-like problems (a chain of steps, each buffer living a few steps,
  // sizes from a few classes, as in a network's activations) where best and
  // first fit by size both end above the aligned bound: the default plan
  // reaches the bound on most, never ends above the heuristics, and is the
  // same on every run, with and without workers.
  base::WorkerPool one(1, 64), four(4, 64);
  int above = 0, reached = 0;
  for (uint32_t seed = 0; seed < 300 && above < 40; ++seed) {
    std::mt19937 rng(seed);
    Problem p;
    const int n = 20 + static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i) {
      const Step start = static_cast<Step>(i / 2 + rng() % 3);
      const Bytes size = Bytes{64} << (rng() % 4);
      p.buffers.push_back({"b" + std::to_string(i), start,
                           start + 1 + static_cast<Step>(rng() % 6),
                           size * (1 + static_cast<Bytes>(rng() % 3)), 64});
    }
    const Bytes heuristics = QuickHeuristicsArena(p);
    if (heuristics <= AlignedLowerBound(p)) continue;
    ++above;
    PlanOptions options;
    options.max_threads = kDefaultMaxThreads;  // 4 workers on any machine
    absl::StatusOr<PlanResult> base = PlanBuffers(p, options, nullptr, nullptr);
    ASSERT_TRUE(base.ok()) << base.status();
    EXPECT_LE(base->solution.arena_size, heuristics) << "seed " << seed;
    EXPECT_FALSE(base->time_limited);
    reached += base->solution.arena_size == AlignedLowerBound(p);
    for (base::WorkerPool* workers : {&one, &four}) {
      for (int run = 0; run < 2; ++run) {
        absl::StatusOr<PlanResult> r =
            PlanBuffers(p, options, workers, nullptr);
        ASSERT_TRUE(r.ok());
        EXPECT_EQ(r->strategy, base->strategy) << "seed " << seed;
        ASSERT_EQ(r->solution.offsets, base->solution.offsets)
            << "seed " << seed;
      }
    }
  }
  EXPECT_GE(above, 20);  // else the problems do not test the search
  EXPECT_GE(reached * 10, above * 8) << reached << " of " << above;
}

// "exact" starts its search from the default plan's heuristics and skyline
// passes: seeded by best fit alone, G_1 at alignment 1024 ended 5 KB above
// the default plan (the search's nodes found nothing smaller).
TEST(PlannerTest, ExactStartsFromTheDefaultPlansSkyline) {
  Problem g1 = testing::ReadTrace(std::string(MEMPLAN_SOURCE_DIR) +
                                  "/bench/data/traces/G_1.csv");
  ASSERT_EQ(g1.buffers.size(), 816u);
  for (Buffer& b : g1.buffers) b.alignment = 1024;  // as --alignment 1024
  PlanOptions options;
  options.effort = 2000;  // the same plan under any load
  options.time_budget = absl::Seconds(60);
  const absl::StatusOr<PlanResult> default_plan =
      PlanBuffers(g1, options, nullptr, nullptr);
  ASSERT_TRUE(default_plan.ok()) << default_plan.status();
  ASSERT_GT(default_plan->solution.arena_size, default_plan->lower_bound);
  options.strategy = "exact";
  const absl::StatusOr<PlanResult> exact =
      PlanBuffers(g1, options, nullptr, nullptr);
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_LE(exact->solution.arena_size, default_plan->solution.arena_size);
  EXPECT_FALSE(exact->time_limited);
}

// --optimize starts from the default plan: its quick heuristics, then its
// steps (the skyline passes, the search bounded by nodes), then the other
// heuristics and the search. Before, every heuristic ran first (160 ms of
// MiniMalloc's C, 203 buffers) and a 50 ms budget ended 29% above the
// default plan. Here the search's effort ends it (1 node, no time cut).
// No budget cuts the default plan's steps either: with a budget of 5 ms,
// which cut them, --optimize and "exact" ended 24% above the default plan
// on K, 28% on G and 11% on J.
TEST(PlannerTest, OptimizeStartsFromTheDefaultPlan) {
  const std::string dir =
      std::string(MEMPLAN_SOURCE_DIR) + "/bench/data/minimalloc/";
  for (const char* name :
       {"A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K"}) {
    Problem p = testing::ReadTrace(absl::StrCat(dir, name, ".1048576.csv"));
    ASSERT_FALSE(p.buffers.empty()) << name;
    const absl::StatusOr<PlanResult> default_plan =
        PlanBuffers(p, PlanOptions(), nullptr, nullptr);
    ASSERT_TRUE(default_plan.ok()) << default_plan.status();
    PlanOptions options;
    options.optimize = true;
    options.effort = 1;
    options.time_budget = absl::Seconds(60);
    const absl::StatusOr<PlanResult> optimized =
        PlanBuffers(p, options, nullptr, nullptr);
    ASSERT_TRUE(optimized.ok()) << optimized.status();
    EXPECT_LE(optimized->solution.arena_size, default_plan->solution.arena_size)
        << name;
    EXPECT_FALSE(optimized->time_limited) << name;
    // No time at all for what they add to the default plan.
    for (const char* strategy : {"auto", "exact"}) {
      PlanOptions hurried;
      hurried.strategy = strategy;
      hurried.optimize = hurried.strategy == "auto";
      hurried.time_budget = absl::ZeroDuration();
      const absl::StatusOr<PlanResult> r =
          PlanBuffers(p, hurried, nullptr, nullptr);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_LE(r->solution.arena_size, default_plan->solution.arena_size)
          << name << " " << strategy;
    }
  }
  // And in time: C under a budget ten times its default plan's wall time
  // (at least 100 ms, where the other heuristics alone took 160 ms).
  const Problem c = testing::ReadTrace(dir + "C.1048576.csv");
  const absl::Time start = absl::Now();
  const absl::StatusOr<PlanResult> default_plan =
      PlanBuffers(c, PlanOptions(), nullptr, nullptr);
  ASSERT_TRUE(default_plan.ok()) << default_plan.status();
  PlanOptions options;
  options.optimize = true;
  options.time_budget =
      std::max(absl::Milliseconds(100), 10 * (absl::Now() - start));
  const absl::StatusOr<PlanResult> optimized =
      PlanBuffers(c, options, nullptr, nullptr);
  ASSERT_TRUE(optimized.ok()) << optimized.status();
  EXPECT_LE(optimized->solution.arena_size, default_plan->solution.arena_size)
      << "budget " << options.time_budget;
}

// --optimize's other heuristics all run under the time budget: the plan of
// one the budget cut (the hill climb's best so far) is verified under the
// call's own token, given to RunPortfolio, not under the budget's, which
// has fired by then and would lose it.
TEST(PlannerTest, ABudgetCutPlanIsVerifiedUnderTheCallsToken) {
  const Problem p = testing::RandomProblem(400, 3);
  absl::StatusOr<std::unique_ptr<OffsetStrategy>> climb =
      MakeStrategy("hill_climb");
  ASSERT_TRUE(climb.ok());
  std::atomic<int64_t> polls{0};
  base::CancelToken counting(nullptr, absl::InfiniteFuture(), [&polls] {
    polls.fetch_add(1);
    return false;
  });
  SolveContext counted;
  counted.cancel = &counting;
  ASSERT_TRUE((*climb)->Solve(p, counted).ok());
  // Cut in its climb (the seed's placements come first, a few polls).
  const int64_t cut_at = polls.load() * 9 / 10;
  ASSERT_GT(cut_at, 10);
  // A budget that fires at its cut_at-th poll.
  const auto budget_token = [cut_at](std::atomic<int64_t>* seen) {
    return std::make_unique<base::CancelToken>(
        nullptr, absl::InfiniteFuture(),
        [cut_at, seen] { return seen->fetch_add(1) + 1 >= cut_at; });
  };
  std::atomic<int64_t> seen{0};
  const std::unique_ptr<base::CancelToken> budget = budget_token(&seen);
  SolveContext budgeted;
  budgeted.cancel = budget.get();
  const SolveContext call;  // the call's own: no deadline
  const absl::StatusOr<PortfolioResult> won = RunPortfolio(
      p, {"hill_climb"}, {&budgeted}, nullptr, /*lower_bound=*/0, &call);
  ASSERT_TRUE(won.ok()) << won.status();
  EXPECT_TRUE(budget->Cancelled());  // the climb was cut
  EXPECT_TRUE(Verify(p, won->solution).ok());
  // Verified under the budget's token, the same plan is lost.
  std::atomic<int64_t> seen_again{0};
  const std::unique_ptr<base::CancelToken> again = budget_token(&seen_again);
  budgeted.cancel = again.get();
  EXPECT_TRUE(absl::IsDeadlineExceeded(
      RunPortfolio(p, {"hill_climb"}, {&budgeted}, nullptr).status()));
}

// A capacity the heuristics miss gets the default plan's own steps first:
// its skyline passes (G_1 at alignment 1024: the skyline meets a capacity
// at the default plan with no time left for the search) and, on problems
// too large for the search, its climb (pangu_2.6B at its bound). Before,
// both failed: the search for the capacity ran alone, or not at all.
TEST(PlannerTest, AMissedCapacityGetsTheDefaultPlansStepsFirst) {
  const std::string dir =
      std::string(MEMPLAN_SOURCE_DIR) + "/bench/data/traces/";
  Problem g1 = testing::ReadTrace(dir + "G_1.csv");
  for (Buffer& b : g1.buffers) b.alignment = 1024;
  Problem pangu = testing::ReadTrace(dir + "pangu_2.6B.csv");
  ASSERT_EQ(pangu.buffers.size(), 18692u);
  for (const Problem* p : {&g1, &pangu}) {
    const absl::StatusOr<PlanResult> default_plan =
        PlanBuffers(*p, PlanOptions(), nullptr, nullptr);
    ASSERT_TRUE(default_plan.ok()) << default_plan.status();
    ASSERT_GT(QuickHeuristicsArena(*p), default_plan->solution.arena_size);
    PlanOptions options;
    options.capacity = default_plan->solution.arena_size;
    options.time_budget = absl::ZeroDuration();  // no capacity search
    const absl::StatusOr<PlanResult> within =
        PlanBuffers(*p, options, nullptr, nullptr);
    ASSERT_TRUE(within.ok()) << within.status();
    EXPECT_LE(within->solution.arena_size, *options.capacity);
  }
}

TEST(PlannerTest, DefaultPlanClimbsOnTracesTooLargeForTheSearch) {
  const std::string dir =
      std::string(MEMPLAN_SOURCE_DIR) + "/bench/data/traces/";
  // pangu_2.6B (18,692 buffers, over the search's 4,096): best and first
  // fit by size end 0.76% above the bound; the peak window's second variant
  // reaches it. The same plan with and without workers.
  const Problem pangu = testing::ReadTrace(dir + "pangu_2.6B.csv");
  ASSERT_EQ(pangu.buffers.size(), 18692u);
  ASSERT_GT(QuickHeuristicsArena(pangu),
            AlignedLowerBound(pangu) * 1007 / 1000);
  base::WorkerPool pool(2, 64);
  absl::StatusOr<PlanResult> alone =
      PlanBuffers(pangu, PlanOptions{}, nullptr, nullptr);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(alone->solution.arena_size, AlignedLowerBound(pangu));
  EXPECT_EQ(alone->strategy, "peak_window");
  EXPECT_TRUE(alone->proven_optimal);
  EXPECT_FALSE(alone->time_limited);
  EXPECT_TRUE(Verify(pangu, alone->solution).ok());
  absl::StatusOr<PlanResult> pooled =
      PlanBuffers(pangu, PlanOptions{}, &pool, nullptr);
  ASSERT_TRUE(pooled.ok());
  EXPECT_EQ(pooled->solution.offsets, alone->solution.offsets);
  // --optimize whose budget cuts its own heuristics climbs too: never above
  // the default plan.
  PlanOptions optimize;
  optimize.optimize = true;
  optimize.time_budget = absl::Milliseconds(1);
  absl::StatusOr<PlanResult> optimized =
      PlanBuffers(pangu, optimize, nullptr, nullptr);
  ASSERT_TRUE(optimized.ok()) << optimized.status();
  EXPECT_EQ(optimized->solution.arena_size, AlignedLowerBound(pangu));
  // So does "exact", which has no search on a list this large: the default
  // plan (before, the heuristics' plan, 0.76% above).
  PlanOptions exact;
  exact.strategy = "exact";
  absl::StatusOr<PlanResult> exact_plan =
      PlanBuffers(pangu, exact, nullptr, nullptr);
  ASSERT_TRUE(exact_plan.ok()) << exact_plan.status();
  EXPECT_EQ(exact_plan->solution.arena_size, AlignedLowerBound(pangu));
  // Cancelled at 60% of the plan's polls of its token (in the peak
  // window's variants, which follow the heuristics), the call ends soon
  // after. Polls, not time: the placements poll every so many units of
  // work, so on one thread the cut lands at the same point on any machine
  // and under any load (timed, a loaded sanitizer run once finished the
  // plan first).
  std::atomic<int64_t> polls{0};
  base::CancelToken counting(nullptr, absl::InfiniteFuture(), [&polls] {
    polls.fetch_add(1);
    return false;
  });
  ASSERT_TRUE(PlanBuffers(pangu, PlanOptions{}, nullptr, &counting).ok());
  const int64_t cut_at = polls.load() * 6 / 10;
  ASSERT_GT(cut_at, 10);
  std::atomic<int64_t> seen{0};
  std::atomic<int64_t> cancelled_ns{0};
  base::CancelToken token(nullptr, absl::InfiniteFuture(), [&] {
    if (seen.fetch_add(1) + 1 < cut_at) return false;
    int64_t unset = 0;
    cancelled_ns.compare_exchange_strong(unset, absl::GetCurrentTimeNanos());
    return true;
  });
  absl::StatusOr<PlanResult> cut =
      PlanBuffers(pangu, PlanOptions{}, nullptr, &token);
  const int64_t returned_ns = absl::GetCurrentTimeNanos();
  ASSERT_GT(cancelled_ns.load(), 0) << "the plan ended before its cut";
  // Cut by the call's deadline, it keeps the best plan it had verified
  // and says so (the server answers such a call DEADLINE_EXCEEDED).
  if (cut.ok()) {
    EXPECT_TRUE(cut->time_limited);
    EXPECT_TRUE(Verify(pangu, cut->solution).ok());
    EXPECT_LE(cut->solution.arena_size, QuickHeuristicsArena(pangu));
  } else {
    EXPECT_EQ(cut.status().code(), absl::StatusCode::kDeadlineExceeded)
        << cut.status();
  }
  EXPECT_LT(absl::Nanoseconds(returned_ns - cancelled_ns.load()),
            absl::Milliseconds(500));
  // S_1 (28,526 buffers, 1.6% above): its placements are dense (86.5
  // million units each): one variant of the peak window fits in the work,
  // and ends at the bound. pangu's (24.4 million) the default's two fit,
  // and would leave the climb its orders and 1 move had they missed.
  EXPECT_LE(PeakWindowWork(86'500'000), kTightClimbWork);
  EXPECT_GT(2 * PeakWindowWork(86'500'000), kTightClimbWork);
  EXPECT_GE(kTightClimbWork / PeakWindowWork(24'400'000),
            kDefaultPeakWindowVariants);
  EXPECT_EQ(TightClimbMoves(24'400'000, 2), 4);
  EXPECT_EQ(TightClimbMoves(24'400'000, 2, 2 * PeakWindowWork(24'400'000)), 1);
  EXPECT_EQ(TightClimbMoves(86'500'000, 2), 0);
  EXPECT_EQ(TightClimbMoves(1, 2), kTightClimbMoves);
  const Problem s1 = testing::ReadTrace(dir + "S_1.csv");
  ASSERT_GT(QuickHeuristicsArena(s1), AlignedLowerBound(s1) * 1015 / 1000);
  absl::StatusOr<PlanResult> dense =
      PlanBuffers(s1, PlanOptions{}, nullptr, nullptr);
  ASSERT_TRUE(dense.ok()) << dense.status();
  EXPECT_EQ(dense->strategy, "peak_window");
  EXPECT_EQ(dense->solution.arena_size, AlignedLowerBound(s1));
  EXPECT_TRUE(dense->proven_optimal);
  EXPECT_TRUE(Verify(s1, dense->solution).ok());
  // (The same plan on any number of workers: TraceThreadsTest.)
  // --optimize, whose budget cuts its portfolio before its own peak window,
  // runs the peak window after it: the bound.
  absl::StatusOr<PlanResult> dense_optimized =
      PlanBuffers(s1, optimize, nullptr, nullptr);
  ASSERT_TRUE(dense_optimized.ok()) << dense_optimized.status();
  EXPECT_EQ(dense_optimized->solution.arena_size, AlignedLowerBound(s1));
  EXPECT_EQ(dense_optimized->strategy, "peak_window");
  // bert_base (5,620 buffers): best fit by size ends 0.001% above the
  // bound, within the 0.1% under which the default plan does not climb.
  const Problem bert = testing::ReadTrace(dir + "bert_base.csv");
  absl::StatusOr<PlanResult> near =
      PlanBuffers(bert, PlanOptions{}, nullptr, nullptr);
  ASSERT_TRUE(near.ok());
  EXPECT_GT(near->solution.arena_size, AlignedLowerBound(bert));
  EXPECT_LE(near->solution.arena_size, AlignedLowerBound(bert) * 1001 / 1000);
  EXPECT_EQ(near->solution.arena_size, QuickHeuristicsArena(bert));
}

TEST(PlannerTest, AutoReachesTheBoundOnRandomInstancesMoreOftenThanGreedy) {
  int greedy_optimal = 0, auto_optimal = 0;
  for (uint32_t seed = 0; seed < 200; ++seed) {
    // Small dense instances where greedy often misses the bound.
    std::mt19937 rng(seed);
    Problem p;
    for (int i = 0; i < 10; ++i) {
      const Step start = rng() % 6;
      p.buffers.push_back({"b" + std::to_string(i), start,
                           start + 1 + static_cast<Step>(rng() % 4),
                           1 + static_cast<Bytes>(rng() % 10)});
    }
    PlanOptions options;
    options.optimize = true;
    options.time_budget = absl::Milliseconds(200);
    options.strategy = "best_fit_size";
    absl::StatusOr<PlanResult> g = PlanBuffers(p, options, nullptr, nullptr);
    options.strategy = "auto";
    absl::StatusOr<PlanResult> a = PlanBuffers(p, options, nullptr, nullptr);
    ASSERT_TRUE(g.ok() && a.ok());
    ASSERT_LE(a->solution.arena_size, g->solution.arena_size);
    greedy_optimal += g->solution.arena_size == g->lower_bound;
    auto_optimal += a->proven_optimal;
  }
  EXPECT_GT(auto_optimal, greedy_optimal);
  EXPECT_GT(auto_optimal, 150);
}

TEST(PlannerTest, CapacityModeFindsAPlanTheGreedyMisses) {
  // MiniMalloc's small example at its capacity 12 fits; so must we.
  Problem p;
  p.buffers = {{"b1", 0, 3, 4},
               {"b2", 3, 9, 4},
               {"b3", 0, 9, 4},
               {"b4", 9, 21, 4},
               {"b5", 0, 21, 4}};
  PlanOptions options;
  options.capacity = 12;
  absl::StatusOr<PlanResult> r = PlanBuffers(p, options, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LE(r->solution.arena_size, 12);
}

// AlignedLowerBound rounds every size up to its alignment, which a plan
// need not (a small buffer on top of the arena takes its own size): a plan
// at or below it may still be above the best one. A capacity between the
// two was refused without a search, and `exact` stopped at 132 bytes
// where 77 is the best (checked by brute force over every order).
TEST(PlannerTest, SearchesBelowTheAlignedBoundWhenAskedOrACapacityIsMissed) {
  Problem aligned;  // every buffer aligned to 64: the best plan is 258
  aligned.buffers = {{"b0", 2, 3, 2, 64},  {"b1", 4, 6, 9, 64},
                     {"b2", 2, 6, 8, 64},  {"b3", 2, 6, 2, 64},
                     {"b4", 4, 6, 10, 64}, {"b5", 4, 6, 10, 64}};
  PlanOptions capacity;
  capacity.capacity = 258;
  absl::StatusOr<PlanResult> r =
      PlanBuffers(aligned, capacity, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->solution.arena_size, 258);

  Problem mixed;
  mixed.buffers = {{"b0", 3, 4, 4, 2},   {"b1", 2, 3, 16, 1},
                   {"b2", 0, 3, 4, 64},  {"b3", 0, 1, 21, 1},
                   {"b4", 1, 2, 13, 64}, {"b5", 3, 4, 1, 16},
                   {"b6", 1, 3, 24, 2}};
  mixed.buffers[6].fixed_offset = 10;
  PlanOptions exact;
  exact.strategy = "exact";
  r = PlanBuffers(mixed, exact, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->solution.arena_size, 77);
  EXPECT_TRUE(r->proven_optimal);
  PlanOptions tight;
  tight.capacity = 77;
  r = PlanBuffers(mixed, tight, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->solution.arena_size, 77);
}

// By default a request works on one thread per core the process may use
// (more would only queue for the cores), at most kDefaultMaxThreads; a
// count asked for is kept.
TEST(PlannerTest, RequestsUseOneThreadPerUsableCoreByDefault) {
  PlanOptions options;
  EXPECT_EQ(RequestThreads(options),
            std::min(kDefaultMaxThreads, base::UsableCores()));
  {
    base::testing::OneCpu one;  // `taskset -c 0 memplan ...`
    ASSERT_TRUE(one.ok());
    EXPECT_EQ(RequestThreads(options), 1);
    options.max_threads = 8;
    EXPECT_EQ(RequestThreads(options), 8);
  }
  options.max_threads = 64;
  EXPECT_EQ(RequestThreads(options), 64);
}

// A pool of one thread, held by another call's task until Release() or
// 5 s: a plan that queued work behind it would wait that long for it.
class HeldPool {
 public:
  HeldPool() {
    absl::Notification held;
    EXPECT_TRUE(pool_.TrySchedule([this, &held] {
      held.Notify();
      if (!release_.WaitForNotificationWithTimeout(absl::Seconds(5))) {
        waited_out_ = true;
      }
    }));
    held.WaitForNotification();
  }
  ~HeldPool() { Release(); }
  base::WorkerPool* pool() { return &pool_; }
  // Whether the holding task ran its 5 s out.
  bool waited_out() const { return waited_out_.load(); }
  void Release() {
    if (!release_.HasBeenNotified()) release_.Notify();
  }

 private:
  absl::Notification release_;
  std::atomic<bool> waited_out_{false};
  base::WorkerPool pool_{1, 64};  // last: joined before the above go
};

// One thread asked for is the caller alone: no stage, portfolio member or
// side task goes to the workers.
TEST(PlannerTest, OneThreadAskedForLeavesTheWorkersAlone) {
  HeldPool held;
  PlanOptions options;  // the default plan: "auto"
  options.max_threads = 1;
  // Mid-size (coloring beside the offsets, members on workers) and cut
  // into time windows (the caller runs the first member).
  for (int n : {20000, 40000}) {
    absl::StatusOr<PlanResult> planned = PlanBuffers(
        testing::RandomProblem(n, 5, 64), options, held.pool(), nullptr);
    ASSERT_TRUE(planned.ok()) << planned.status();
    EXPECT_FALSE(held.waited_out()) << n << " buffers waited for the worker";
  }
}

// A request never waits for a busy worker: what it gave the workers and
// none has started, its caller runs. The request may use the held pool
// (two threads).
TEST(PlannerTest, ABusyPoolDoesNotHoldUpAPlan) {
  // Mid-size (the coloring beside the offsets, every member handed to the
  // workers) and cut into time windows (the caller runs the first member).
  for (int n : {20000, 40000}) {
    HeldPool held;
    PlanOptions options;  // the default plan: "auto"
    options.max_threads = 2;
    absl::StatusOr<PlanResult> planned = PlanBuffers(
        testing::RandomProblem(n, 5, 64), options, held.pool(), nullptr);
    ASSERT_TRUE(planned.ok()) << planned.status();
    EXPECT_FALSE(held.waited_out()) << n << " buffers waited for the worker";
  }
}

TEST(PlannerTest, SamePlanWithAndWithoutThreads) {
  base::WorkerPool pool(4, 64);
  for (uint32_t seed = 0; seed < 20; ++seed) {
    Problem p = testing::RandomProblem(400, seed);
    PlanOptions options;
    options.max_threads = kDefaultMaxThreads;  // 4 workers on any machine
    absl::StatusOr<PlanResult> threaded =
        PlanBuffers(p, options, &pool, nullptr);
    absl::StatusOr<PlanResult> inline_run =
        PlanBuffers(p, {}, nullptr, nullptr);
    ASSERT_TRUE(threaded.ok() && inline_run.ok());
    EXPECT_EQ(threaded->strategy, inline_run->strategy);
    EXPECT_EQ(threaded->solution.offsets, inline_run->solution.offsets);
  }
}

TEST(PlannerTest, LargeProblemsColorPoolsBesideOffsetsWithTheSameResult) {
  // Above 50,000 buffers pool coloring runs on a worker while offsets are
  // assigned; the plan and the pools must not change.
  Problem p = testing::RandomProblem(60000, 5, 64);
  base::WorkerPool pool(2, 16);
  absl::StatusOr<PlanResult> parallel = PlanBuffers(p, {}, &pool, nullptr);
  absl::StatusOr<PlanResult> serial = PlanBuffers(p, {}, nullptr, nullptr);
  ASSERT_TRUE(parallel.ok() && serial.ok());
  EXPECT_EQ(parallel->solution.offsets, serial->solution.offsets);
  EXPECT_EQ(parallel->shared_objects.object_of,
            serial->shared_objects.object_of);
  EXPECT_EQ(parallel->shared_objects.size, serial->shared_objects.size);
  std::vector<std::string> stages;
  for (const StageTime& s : parallel->stages) stages.push_back(s.stage);
  EXPECT_THAT(stages, ::testing::UnorderedElementsAre("prepare", "pools",
                                                      "offsets", "verify"));
}

// The pipeline colors shared objects from a time index of the lifetimes
// and never builds the interference graph: the pools are the graph's
// coloring all the same, for dense lists (more than 16 interfering pairs a
// buffer), sparse graph-like ones, one cut into time windows on two
// workers, and a graph's tensors.
TEST(PlannerTest, PoolsAreTheInterferenceGraphsColoring) {
  base::WorkerPool pool(2, 64);
  const auto expect_graphs_pools = [](const std::string& what,
                                      const PlanResult& r) {
    const InterferenceGraph graph =
        *BuildInterferenceGraph(r.problem, int64_t{1} << 30);
    const SharedObjects want = ColorSharedObjects(r.problem, graph);
    EXPECT_EQ(r.shared_objects.object_of, want.object_of) << what;
    EXPECT_EQ(r.shared_objects.size, want.size) << what;
  };
  std::vector<std::pair<std::string, Problem>> lists;
  for (uint32_t seed = 1; seed <= 2; ++seed) {
    lists.emplace_back("dense " + std::to_string(seed),
                       testing::DenseProblem(2000, seed));
    lists.emplace_back("graph-like " + std::to_string(seed),
                       *AnalyzeLiveness(testing::RandomGraph(1500, seed), 64));
  }
  lists.emplace_back("graph-like, windows",
                     *AnalyzeLiveness(testing::RandomGraph(25000, 3), 64));
  ASSERT_GT(lists.back().second.buffers.size(), 2u * kBuffersPerWindow);
  for (const auto& [what, p] : lists) {
    absl::StatusOr<PlanResult> r = PlanBuffers(p, {}, &pool, nullptr);
    ASSERT_TRUE(r.ok()) << what << ": " << r.status();
    expect_graphs_pools(what, *r);
  }
  absl::StatusOr<PlanResult> g =
      PlanGraph(testing::RandomGraph(130, 7), {}, &pool, nullptr);
  ASSERT_TRUE(g.ok()) << g.status();
  expect_graphs_pools("graph of 130 ops", *g);
}

TEST(PlannerTest, UnknownStrategyIsInvalidArgument) {
  PlanOptions options;
  options.strategy = "magic";
  absl::StatusOr<PlanResult> r =
      PlanBuffers(testing::RandomProblem(5, 1), options, nullptr, nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("unknown strategy 'magic'"));
}

TEST(PlannerTest, CapacityBelowLowerBoundIsInfeasible) {
  Problem p = testing::RandomProblem(50, 2);
  PlanOptions options;
  options.capacity = LowerBound(p) - 1;
  absl::StatusOr<PlanResult> r = PlanBuffers(p, options, nullptr, nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("infeasible"));
  options.capacity = NaiveBytes(p);
  EXPECT_TRUE(PlanBuffers(p, options, nullptr, nullptr).ok());
}

TEST(PlannerTest, CancelledBeforeAnyPlanIsDeadlineExceeded) {
  base::CancelToken token;
  token.Cancel();
  absl::StatusOr<PlanResult> r =
      PlanBuffers(testing::RandomProblem(20000, 1), {}, nullptr, &token);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(PlannerTest, TensorsLiveForTheWholeRunNeverShareMemory) {
  Graph g = testing::RandomGraph(30, 11);
  g.tensors[1].variable = true;  // "weight" made state: planned, whole run
  PlanOptions keep;
  keep.io = IoPolicy::kKeepInputs;  // "input" for the whole run too
  absl::StatusOr<PlanResult> r = PlanGraph(g, keep, nullptr, nullptr);
  ASSERT_TRUE(r.ok());
  const auto& b = r->problem.buffers;
  const Step steps = static_cast<Step>(g.ops.size());
  int whole_run = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    if (b[i].start != 0 || b[i].end != steps) continue;
    ++whole_run;
    for (size_t j = 0; j < b.size(); ++j) {
      if (i == j) continue;
      const Offset oi = r->solution.offsets[i], oj = r->solution.offsets[j];
      EXPECT_TRUE(oi + b[i].size <= oj || oj + b[j].size <= oi)
          << b[i].name << " shares memory with " << b[j].name;
      EXPECT_NE(r->shared_objects.object_of[i], r->shared_objects.object_of[j]);
    }
  }
  EXPECT_GE(whole_run, 2);  // the variable and the kept input
}

TEST(PlannerTest, InputsAndOutputsAsRuntimesRunThem) {
  PlanOptions options;
  options.alignment = 1;
  absl::StatusOr<PlanResult> r =
      PlanGraph(testing::IoChain(), options, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  // x lives at step 0 with a, y at step 3 with c: the peak is 110 bytes and
  // x and y share memory. Held for the whole run they needed x + y + a =
  // 210.
  EXPECT_EQ(r->solution.arena_size, 110);
  EXPECT_EQ(r->lower_bound, 110);
  EXPECT_EQ(r->io, IoPolicy::kRuntime);
  EXPECT_THAT(FormatReport(*r),
              HasSubstr("io:           arena (inputs from step 0 to their "
                        "last use, outputs from their producer to the end)"));
  // Inputs kept for the whole run: x + c + y at step 3.
  options.io = IoPolicy::kKeepInputs;
  r = PlanGraph(testing::IoChain(), options, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->solution.arena_size, 210);
  EXPECT_EQ(r->tensors[0].end, 4);
  EXPECT_THAT(FormatReport(*r), HasSubstr("io:           arena_keep_inputs"));
  // Excluded: the activations alone, two of 10 bytes live at once.
  options.io = IoPolicy::kExclude;
  r = PlanGraph(testing::IoChain(), options, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->solution.arena_size, 20);
  EXPECT_EQ(r->tensors[0].buffer, -1);
  EXPECT_THAT(FormatReport(*r), HasSubstr("io:           exclude"));
}

TEST(PlannerTest, RandomGraphsProperty) {
  base::WorkerPool pool(2, 16);
  for (uint32_t seed = 0; seed < 500; ++seed) {
    Graph g = testing::RandomGraph(1 + seed % 40, seed);
    absl::StatusOr<PlanResult> r = PlanGraph(g, {}, &pool, nullptr);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(VerifyAllPairs(r->problem, r->solution).ok()) << seed;
    ASSERT_GE(r->solution.arena_size, r->lower_bound);
    ASSERT_EQ(r->solution.offsets.size(), g.tensors.size() - 1);  // no weight
  }
}

TEST(PlannerTest, ReportShowsTheFiguresAndAPicture) {
  Graph g;
  g.name = "tiny";
  g.tensors = {{"x", 64}, {"h", 128}, {"y", 64}};
  g.ops = {{"f", {"x"}, {"h"}}, {"g", {"h"}, {"y"}}};
  g.inputs = {"x"};
  g.outputs = {"y"};
  absl::StatusOr<PlanResult> r = PlanGraph(g, {}, nullptr, nullptr);
  ASSERT_TRUE(r.ok());
  std::string report = FormatReport(*r);
  // x + h at step 0, h + y at step 1 (x dies after f, y is born at g):
  // 192 bytes, where inputs and outputs held for the whole run needed all
  // three, 256.
  EXPECT_THAT(report, HasSubstr("arena:        192 bytes"));
  EXPECT_THAT(report, HasSubstr("lower bound:  192 bytes"));
  EXPECT_THAT(report, HasSubstr("efficiency:   1.000"));
  EXPECT_THAT(report, HasSubstr("legend: A=x B=h C=y"));
}

// A random graph whose ops are all in-place capable.
Graph InPlaceGraph(int ops, uint32_t seed) {
  Graph g = testing::RandomGraph(ops, seed);
  for (Op& op : g.ops) op.in_place = true;
  return g;
}

TEST(PlannerTest, InPlaceGraphsAreVerifiedPerTensor) {
  int merged = 0;
  for (uint32_t seed = 0; seed < 300; ++seed) {
    Graph g = InPlaceGraph(2 + seed % 40, seed);
    PlanOptions all;  // every tensor planned, the weight too
    all.weights_in_arena = true;
    absl::StatusOr<PlanResult> r = PlanGraph(g, all, nullptr, nullptr);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->tensors.size(), g.tensors.size());
    // Rebuild the per-tensor plan from the tensor table and prove it
    // independently.
    absl::StatusOr<Problem> tensors = AnalyzeLiveness(g, 64);
    absl::flat_hash_map<std::string, int> index;
    for (size_t t = 0; t < tensors->buffers.size(); ++t) {
      index[tensors->buffers[t].name] = t;
    }
    std::vector<InPlacePair> pairs;
    Solution per_tensor{{}, r->solution.arena_size};
    for (size_t t = 0; t < r->tensors.size(); ++t) {
      const TensorPlacement& p = r->tensors[t];
      ASSERT_EQ(p.name, g.tensors[t].name);
      // Each tensor keeps its own lifetime, whoever reuses its memory.
      ASSERT_EQ(p.start, tensors->buffers[t].start) << p.name;
      ASSERT_EQ(p.end, tensors->buffers[t].end) << p.name;
      per_tensor.offsets.push_back(r->OffsetOf(t));
      if (p.in_place_of.empty()) continue;
      ++merged;
      pairs.push_back({static_cast<int>(t), index[p.in_place_of]});
      ASSERT_EQ(r->OffsetOf(t), r->OffsetOf(index[p.in_place_of]));
    }
    ASSERT_TRUE(VerifyInPlace(*tensors, per_tensor, pairs).ok())
        << "seed " << seed;
    // With equal sizes reuse never costs memory: the bound is at most that
    // of the plain plan. (A smaller output keeps its input's whole block
    // until it dies, which can raise the peak: the client's trade-off.)
    for (Tensor& t : g.tensors) t.size_bytes = 256;
    r = PlanGraph(g, {}, nullptr, nullptr);
    ASSERT_TRUE(r.ok());
    Graph plain = g;
    for (Op& op : plain.ops) op.in_place = false;
    absl::StatusOr<PlanResult> without = PlanGraph(plain, {}, nullptr, nullptr);
    ASSERT_TRUE(without.ok());
    for (const TensorPlacement& t : without->tensors) {
      EXPECT_TRUE(t.in_place_of.empty());
    }
    ASSERT_LE(r->lower_bound, without->lower_bound) << "seed " << seed;
  }
  EXPECT_GT(merged, 100);  // the property test did exercise reuse
}

TEST(PlannerTest, InPlaceChainReportsTheAliasesAtTheSameOffset) {
  Graph g;
  g.tensors = {{"x", 64}, {"a", 256}, {"b", 256}, {"c", 256}, {"y", 64}};
  g.ops = {{"r0", {"x"}, {"a"}, true},
           {"r1", {"a"}, {"b"}, true},
           {"r2", {"b"}, {"c"}, true},
           {"out", {"c"}, {"y"}, true}};
  g.inputs = {"x"};
  g.outputs = {"y"};
  absl::StatusOr<PlanResult> r = PlanGraph(g, {}, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->tensors.size(), 5u);
  EXPECT_EQ(r->tensors[1].in_place_of, "");
  EXPECT_EQ(r->tensors[2].in_place_of, "a");
  EXPECT_EQ(r->tensors[3].in_place_of, "b");
  EXPECT_EQ(r->tensors[1].buffer, r->tensors[2].buffer);
  EXPECT_EQ(r->tensors[2].buffer, r->tensors[3].buffer);
  // The tensor handed over keeps its own lifetime: a dies after r1 (step 1).
  EXPECT_EQ(r->tensors[1].start, 0);
  EXPECT_EQ(r->tensors[1].end, 2);
  EXPECT_EQ(r->tensors[3].end, 4);
  // One 256-byte buffer for a, b and c, beside x at step 0 and y at step 3:
  // x dies after r0 and y is born at out, so they share 64 bytes (held for
  // the whole run they took 64 + 64 + 256).
  EXPECT_EQ(r->solution.arena_size, 64 + 256);
  EXPECT_EQ(r->lower_bound, 64 + 256);
  EXPECT_THAT(FormatReport(*r), HasSubstr("in place:     2 tensors"));
}

TEST(WorkerPoolTest, FullQueueRefusesWork) {
  base::WorkerPool pool(1, 1);
  absl::Notification release, started;
  ASSERT_TRUE(pool.TrySchedule([&] {
    started.Notify();
    release.WaitForNotification();
  }));
  started.WaitForNotification();
  EXPECT_TRUE(pool.TrySchedule([] {}));  // waits in the queue
  EXPECT_EQ(pool.queue_depth(), 1);
  EXPECT_FALSE(pool.TrySchedule([] {}));  // queue full
  release.Notify();
}

}  // namespace
}  // namespace memplan::planner
