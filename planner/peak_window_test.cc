#include "planner/peak_window.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/cancel.h"
#include "base/parallel.h"
#include "base/worker_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/greedy.h"
#include "planner/strategy.h"
#include "planner/testing/random_problems.h"
#include "planner/testing/traces.h"
#include "planner/verifier.h"

namespace memplan::planner {
namespace {

using ::testing::ElementsAre;

// Live bytes: 100k over [0, 10), +50k over [2, 8), +30k over [4, 6) (the
// peak, 180k), +20k over [6, 7) (170k). Within 0.5% of the peak: [4, 6),
// which a, b and c span. Within 10%: [4, 7), which a and b span and c and
// d live in part of.
TEST(PeakWindowTest, TheWindowRunsFromTheFirstToTheLastHotStep) {
  const Problem p = testing::ProblemOf(
      {{0, 10, 100'000}, {2, 8, 50'000}, {4, 6, 30'000}, {6, 7, 20'000}});
  std::optional<PeakWindow> narrow =
      FindPeakWindow(p, {5, StackBy::kFirstStep});
  ASSERT_TRUE(narrow.has_value());
  EXPECT_EQ(narrow->begin, 4);
  EXPECT_EQ(narrow->end, 6);
  EXPECT_THAT(narrow->stacked, ElementsAre(0, 1, 2));
  EXPECT_TRUE(narrow->inside.empty());
  std::optional<PeakWindow> wide =
      FindPeakWindow(p, {100, StackBy::kFirstStep});
  ASSERT_TRUE(wide.has_value());
  EXPECT_EQ(wide->begin, 4);
  EXPECT_EQ(wide->end, 7);
  EXPECT_THAT(wide->stacked, ElementsAre(0, 1));
  EXPECT_THAT(wide->inside, ElementsAre(2, 3));
  EXPECT_FALSE(FindPeakWindow(Problem{}, {5, StackBy::kFirstStep}).has_value());
}

// The buffers over the window are stacked by their first step, not by
// index: the one pushed first is at the bottom.
TEST(PeakWindowTest, BuffersOverTheWindowAreStackedByFirstStep) {
  const Problem p =
      testing::ProblemOf({{3, 9, 4'000}, {0, 9, 8'000}, {5, 7, 2'000}});
  std::optional<PeakWindow> w = FindPeakWindow(p, {5, StackBy::kFirstStep});
  ASSERT_TRUE(w.has_value());
  EXPECT_THAT(w->stacked, ElementsAre(1, 0, 2));
  absl::StatusOr<Solution> s =
      PeakWindowOffsets(p, kPeakWindowVariants[0], nullptr);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(s->offsets, ElementsAre(8'000, 0, 12'000));
  EXPECT_EQ(s->arena_size, LowerBound(p));
  // By last step: the last to end at the bottom (a and b end together: by
  // index), then c.
  std::optional<PeakWindow> by_end = FindPeakWindow(p, {5, StackBy::kLastStep});
  ASSERT_TRUE(by_end.has_value());
  EXPECT_THAT(by_end->stacked, ElementsAre(0, 1, 2));
  absl::StatusOr<Solution> e =
      PeakWindowOffsets(p, {5, StackBy::kLastStep}, nullptr);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(e->offsets, ElementsAre(0, 4'000, 12'000));
}

// Valid plans, alignments kept, on random problems with and without
// alignment; the same plan each time.
TEST(PeakWindowTest, PlansAreValidAndRepeatable) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const Problem p = testing::RandomProblem(300, seed, seed % 2 ? 1 : 64);
    absl::StatusOr<Solution> s =
        PeakWindowOffsets(p, kPeakWindowVariants[0], nullptr);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_TRUE(Verify(p, *s).ok()) << "seed " << seed;
    EXPECT_GE(s->arena_size, LowerBound(p));
    absl::StatusOr<Solution> again =
        PeakWindowOffsets(p, kPeakWindowVariants[0], nullptr);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->offsets, s->offsets);
  }
}

// Buffers of mixed alignments (1 B to 4 KiB), in the stack, in the
// window's own problem and around it: every variant's plan is valid, each
// buffer at a multiple of its own alignment, and the same each time; a run
// given up below a plan at hand keeps exactly what a whole run keeps that
// is below it (the same variants placed).
TEST(PeakWindowTest, MixedAlignmentsAreKeptByEveryVariant) {
  constexpr Bytes kAlignments[] = {1, 4, 16, 64, 256, 4096};
  int seeds_with_inside = 0;  // whose windows have a problem of their own
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    Problem p = testing::RandomProblem(600, seed);
    std::mt19937_64 rng(seed);
    for (Buffer& b : p.buffers) {
      b.alignment = kAlignments[rng() % std::size(kAlignments)];
    }
    int with_inside = 0;
    for (const PeakWindowVariant& v : kPeakWindowVariants) {
      std::optional<PeakWindow> w = FindPeakWindow(p, v);
      ASSERT_TRUE(w.has_value());
      if (!w->inside.empty()) ++with_inside;
      absl::StatusOr<Solution> s = PeakWindowOffsets(p, v, nullptr);
      if (absl::IsFailedPrecondition(s.status())) continue;
      ASSERT_TRUE(s.ok()) << s.status();
      EXPECT_TRUE(Verify(p, *s).ok()) << "seed " << seed;
      for (size_t i = 0; i < p.buffers.size(); ++i) {
        ASSERT_EQ(s->offsets[i] % p.buffers[i].alignment, 0)
            << "seed " << seed << " buffer " << i;
      }
      absl::StatusOr<Solution> again = PeakWindowOffsets(p, v, nullptr);
      ASSERT_TRUE(again.ok());
      EXPECT_EQ(again->offsets, s->offsets);
    }
    if (with_inside > 0) ++seeds_with_inside;
    // No target, then a target the first applying variant meets (the run
    // ends there); `below` always above the target, as the default plan
    // has it.
    absl::StatusOr<PeakWindowPlan> first = PlanPeakWindow(p, 1, 0, nullptr);
    ASSERT_TRUE(first.ok());
    const Bytes met = first->solution ? first->solution->arena_size : 0;
    for (const Bytes stop_at : {Bytes{0}, met}) {
      absl::StatusOr<PeakWindowPlan> whole =
          PlanPeakWindow(p, kPeakWindowVariantCount, stop_at, nullptr);
      ASSERT_TRUE(whole.ok() && whole->solution.has_value());
      if (stop_at > 0) {
        EXPECT_EQ(whole->variants_run, 1);
      }
      const Bytes arena = whole->solution->arena_size;
      for (const Bytes below : {arena, arena + 1, arena + arena / 50}) {
        if (below <= stop_at) continue;
        absl::StatusOr<PeakWindowPlan> cut = PlanPeakWindow(
            p, kPeakWindowVariantCount, stop_at, nullptr, {}, below);
        ASSERT_TRUE(cut.ok());
        EXPECT_EQ(cut->variants_run, whole->variants_run);
        EXPECT_EQ(cut->variants_placed, whole->variants_placed);
        ASSERT_EQ(cut->solution.has_value(), arena < below);
        if (cut->solution) {
          EXPECT_EQ(cut->solution->offsets, whole->solution->offsets);
        }
      }
    }
  }
  EXPECT_GE(seeds_with_inside, 4);
}

// Pinned buffers may lie anywhere: no variant applies, and the plan is
// best fit by conflicts, the pins kept.
TEST(PeakWindowTest, PinnedProblemsGetBestFitByConflicts) {
  Problem p = testing::RandomProblem(200, 7);
  p.buffers[3].fixed_offset = 1 << 20;
  EXPECT_EQ(
      PeakWindowOffsets(p, kPeakWindowVariants[0], nullptr).status().code(),
      absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<PeakWindowPlan> s =
      PlanPeakWindow(p, kPeakWindowVariantCount, 0, nullptr);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->variants_run, kPeakWindowVariantCount);
  EXPECT_EQ(s->variants_placed, 0);  // none applies: no work counted
  EXPECT_FALSE(s->solution.has_value());
  absl::StatusOr<std::unique_ptr<OffsetStrategy>> strategy =
      MakeStrategy("peak_window");
  ASSERT_TRUE(strategy.ok());
  absl::StatusOr<Solution> planned = (*strategy)->Solve(p, SolveContext{});
  ASSERT_TRUE(planned.ok()) << planned.status();
  absl::StatusOr<Solution> conflicts =
      PlaceInOrder(p, GreedyPlacementOrder(p, GreedyOrder::kConflicts),
                   FitPolicy::kBestFit, nullptr);
  ASSERT_TRUE(conflicts.ok());
  EXPECT_EQ(planned->offsets, conflicts->offsets);
  EXPECT_EQ(planned->offsets[3], 1 << 20);
}

// The variants run in order, the smallest plan kept (the first of
// equals), until one is at most `stop_at`.
TEST(PeakWindowTest, VariantsRunUntilOneEndsAtTheTarget) {
  const Problem p = testing::RandomProblem(400, 11);
  std::vector<Solution> each;
  for (const PeakWindowVariant& v : kPeakWindowVariants) {
    absl::StatusOr<Solution> s = PeakWindowOffsets(p, v, nullptr);
    ASSERT_TRUE(s.ok()) << s.status();
    each.push_back(*std::move(s));
  }
  size_t best = 0;
  for (size_t k = 1; k < each.size(); ++k) {
    if (each[k].arena_size < each[best].arena_size) best = k;
  }
  absl::StatusOr<PeakWindowPlan> all =
      PlanPeakWindow(p, kPeakWindowVariantCount, 0, nullptr);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->variants_run, kPeakWindowVariantCount);
  ASSERT_TRUE(all->solution.has_value());
  EXPECT_EQ(all->solution->offsets, each[best].offsets);
  absl::StatusOr<PeakWindowPlan> two = PlanPeakWindow(p, 2, 0, nullptr);
  ASSERT_TRUE(two.ok() && two->solution.has_value());
  EXPECT_EQ(two->variants_run, 2);
  EXPECT_EQ(two->solution->arena_size,
            std::min(each[0].arena_size, each[1].arena_size));
  // A target the first variant meets ends the run there.
  absl::StatusOr<PeakWindowPlan> first =
      PlanPeakWindow(p, kPeakWindowVariantCount, each[0].arena_size, nullptr);
  ASSERT_TRUE(first.ok() && first->solution.has_value());
  EXPECT_EQ(first->variants_run, 1);
  EXPECT_EQ(first->solution->offsets, each[0].offsets);
  // Below a plan at hand: a variant that would reach it is given up, and
  // the best one is kept only when smaller.
  EXPECT_EQ(PeakWindowOffsets(p, kPeakWindowVariants[best], nullptr, {},
                              each[best].arena_size)
                .status()
                .code(),
            absl::StatusCode::kAborted);
  absl::StatusOr<Solution> under = PeakWindowOffsets(
      p, kPeakWindowVariants[best], nullptr, {}, each[best].arena_size + 1);
  ASSERT_TRUE(under.ok()) << under.status();
  EXPECT_EQ(under->offsets, each[best].offsets);
  absl::StatusOr<PeakWindowPlan> none = PlanPeakWindow(
      p, kPeakWindowVariantCount, 0, nullptr, {}, each[best].arena_size);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->solution.has_value());
}

// Variants placed at once on several threads (pieces of the earliest
// first, later ones cancelled once one meets the target) give what one
// thread gives: the same plan, the same variants counted, with or without
// a target and a plan to stay below.
TEST(PeakWindowTest, VariantsAtOnceGiveTheOneThreadPlan) {
  base::WorkerPool pool(4, 16);
  for (uint32_t seed : {11u, 12u, 13u}) {
    const Problem p = testing::RandomProblem(400, seed);
    absl::StatusOr<Solution> first =
        PeakWindowOffsets(p, kPeakWindowVariants[0], nullptr);
    ASSERT_TRUE(first.ok()) << first.status();
    const Bytes a = first->arena_size;
    for (Bytes stop_at : {Bytes{0}, a, AlignedLowerBound(p)}) {
      for (Bytes below : {Bytes{0}, a, a + 1}) {
        absl::StatusOr<PeakWindowPlan> one = PlanPeakWindow(
            p, kPeakWindowVariantCount, stop_at, nullptr, {}, below);
        ASSERT_TRUE(one.ok()) << one.status();
        for (int threads : {2, 3, 5}) {
          absl::StatusOr<PeakWindowPlan> many =
              PlanPeakWindow(p, kPeakWindowVariantCount, stop_at, nullptr,
                             {&pool, threads}, below);
          ASSERT_TRUE(many.ok()) << many.status();
          const std::string where =
              absl::StrCat("seed ", seed, " stop_at ", stop_at, " below ",
                           below, " threads ", threads);
          EXPECT_EQ(many->variants_run, one->variants_run) << where;
          EXPECT_EQ(many->variants_placed, one->variants_placed) << where;
          ASSERT_EQ(many->solution.has_value(), one->solution.has_value())
              << where;
          if (one->solution) {
            EXPECT_EQ(many->solution->offsets, one->solution->offsets) << where;
          }
        }
      }
    }
  }
  base::CancelToken token;
  token.Cancel();
  EXPECT_EQ(PlanPeakWindow(testing::RandomProblem(400, 11),
                           kPeakWindowVariantCount, 0, &token, {&pool, 4})
                .status()
                .code(),
            absl::StatusCode::kDeadlineExceeded);
}

// A call cancelled while its variants run on several threads returns (no
// thread left waiting) with DEADLINE_EXCEEDED, or, cancelled after its
// last poll, with the plan it gets uncancelled. The token fires at its
// k-th poll (work, not time: the same points on any machine).
TEST(PeakWindowTest, VariantsAtOnceStopWhenCancelledMidway) {
  base::WorkerPool pool(3, 16);
  const Problem p = testing::RandomProblem(2000, 5);
  absl::StatusOr<PeakWindowPlan> whole =
      PlanPeakWindow(p, kPeakWindowVariantCount, 0, nullptr);
  ASSERT_TRUE(whole.ok() && whole->solution.has_value()) << whole.status();
  int cancelled = 0;
  for (int64_t k : {1, 3, 10, 30, 100, 300, 1000, 3000, 10000, 100000}) {
    std::atomic<int64_t> polls{0};
    base::CancelToken token(nullptr, absl::InfiniteFuture(),
                            [&polls, k] { return ++polls >= k; });
    absl::StatusOr<PeakWindowPlan> run =
        PlanPeakWindow(p, kPeakWindowVariantCount, 0, &token, {&pool, 4});
    if (run.ok()) {
      ASSERT_TRUE(run->solution.has_value()) << k;
      EXPECT_EQ(run->solution->offsets, whole->solution->offsets) << k;
    } else {
      EXPECT_EQ(run.status().code(), absl::StatusCode::kDeadlineExceeded)
          << k << ": " << run.status();
      ++cancelled;
    }
  }
  EXPECT_GE(cancelled, 3);   // the early points cut the run
  EXPECT_LT(cancelled, 10);  // and the last ones come after its end
}

TEST(PeakWindowTest, CancelledBeforeItEnds) {
  base::CancelToken token;
  token.Cancel();
  absl::StatusOr<Solution> s = PeakWindowOffsets(
      testing::RandomProblem(500, 3), kPeakWindowVariants[0], &token);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDeadlineExceeded)
      << s.status();
}

// The trace it was made for: S_1 (28,526 buffers) peaks in one stretch of
// 52 steps; best fit ends 0.25% (by conflicts) to 1.6% (by size) above the
// bound, the peak window at it.
TEST(PeakWindowTest, ReachesTheBoundOnTheTraceS1) {
  const Problem s1 = testing::ReadTrace(std::string(MEMPLAN_SOURCE_DIR) +
                                        "/bench/data/traces/S_1.csv");
  ASSERT_EQ(s1.buffers.size(), 28526u);
  std::optional<PeakWindow> w = FindPeakWindow(s1, kPeakWindowVariants[0]);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->end - w->begin, 52);
  EXPECT_EQ(w->inside.size(), 50u);
  absl::StatusOr<Solution> s =
      PeakWindowOffsets(s1, kPeakWindowVariants[0], nullptr);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(Verify(s1, *s).ok());
  EXPECT_EQ(s->arena_size, LowerBound(s1));
  absl::StatusOr<Solution> conflicts =
      PlaceInOrder(s1, GreedyPlacementOrder(s1, GreedyOrder::kConflicts),
                   FitPolicy::kBestFit, nullptr);
  ASSERT_TRUE(conflicts.ok());
  EXPECT_GT(conflicts->arena_size, LowerBound(s1) * 1002 / 1000);
  // The two sides of the window placed at once: the same plan.
  base::WorkerPool pool(2, 16);
  absl::StatusOr<Solution> pooled =
      PeakWindowOffsets(s1, kPeakWindowVariants[0], nullptr, {&pool, 4});
  ASSERT_TRUE(pooled.ok()) << pooled.status();
  EXPECT_EQ(pooled->offsets, s->offsets);
  // The window's climbs at once too (three threads or more; only the
  // third order's reaches the window's bound, the fourth's is cancelled):
  // the same plan.
  base::WorkerPool four(4, 16);
  absl::StatusOr<PeakWindowPlan> climbs_at_once =
      PlanPeakWindow(s1, 1, AlignedLowerBound(s1), nullptr, {&four, 4});
  ASSERT_TRUE(climbs_at_once.ok()) << climbs_at_once.status();
  ASSERT_TRUE(climbs_at_once->solution.has_value());
  EXPECT_EQ(climbs_at_once->solution->offsets, s->offsets);
  // And the plan of one pass over both sides around the window's pins.
  Problem pinned = s1;
  for (const std::vector<int>* in : {&w->stacked, &w->inside}) {
    for (int i : *in) pinned.buffers[i].fixed_offset = s->offsets[i];
  }
  absl::StatusOr<Solution> one_pass = PlaceInOrder(
      pinned, GreedyPlacementOrder(pinned, GreedyOrder::kConflicts),
      FitPolicy::kBestFit, nullptr);
  ASSERT_TRUE(one_pass.ok());
  EXPECT_EQ(one_pass->offsets, s->offsets);
}

// pangu_2.6B peaks at one step; the second variant (2%, by last step:
// after the peak its buffers end as a stack pops) reaches its bound, the
// others do not.
TEST(PeakWindowTest, ReachesTheBoundOnTheTracePangu) {
  const Problem pangu = testing::ReadTrace(std::string(MEMPLAN_SOURCE_DIR) +
                                           "/bench/data/traces/pangu_2.6B.csv");
  ASSERT_EQ(pangu.buffers.size(), 18692u);
  absl::StatusOr<PeakWindowPlan> p = PlanPeakWindow(
      pangu, kPeakWindowVariantCount, AlignedLowerBound(pangu), nullptr);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->variants_run, 2);
  ASSERT_TRUE(p->solution.has_value());
  EXPECT_EQ(p->solution->arena_size, LowerBound(pangu));
  EXPECT_TRUE(Verify(pangu, *p->solution).ok());
  // The two variants at once (the second placed while the first's larger
  // side is), and the later two cancelled: the same plan.
  base::WorkerPool pool(3, 16);
  for (int threads : {2, 4}) {
    absl::StatusOr<PeakWindowPlan> pooled =
        PlanPeakWindow(pangu, kPeakWindowVariantCount, AlignedLowerBound(pangu),
                       nullptr, {&pool, threads});
    ASSERT_TRUE(pooled.ok()) << pooled.status();
    EXPECT_EQ(pooled->variants_run, 2);
    EXPECT_EQ(pooled->variants_placed, p->variants_placed);
    ASSERT_TRUE(pooled->solution.has_value());
    EXPECT_EQ(pooled->solution->offsets, p->solution->offsets);
  }
  for (int k : {0, 2, 3}) {
    absl::StatusOr<Solution> other =
        PeakWindowOffsets(pangu, kPeakWindowVariants[k], nullptr);
    ASSERT_TRUE(other.ok());
    EXPECT_GT(other->arena_size, LowerBound(pangu) * 1030 / 1000) << k;
  }
}

TEST(PeakWindowTest, IsAStrategyByName) {
  absl::StatusOr<std::unique_ptr<OffsetStrategy>> s =
      MakeStrategy("peak_window");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->name(), "peak_window");
  EXPECT_THAT(HeuristicNames(), ::testing::Contains("peak_window"));
  EXPECT_THAT(QuickHeuristicNames(),
              ::testing::Not(::testing::Contains("peak_window")));
}

}  // namespace
}  // namespace memplan::planner
