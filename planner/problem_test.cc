#include "planner/problem.h"

#include <algorithm>
#include <queue>
#include <random>
#include <tuple>
#include <vector>

#include "base/worker_pool.h"
#include "gtest/gtest.h"
#include "planner/sections.h"
#include "planner/testing/random_problems.h"

namespace memplan::planner {
namespace {

// PaddedLowerBound by its definition, one event at a time: at each step
// whose smallest live alignment is m, the live sizes rounded up to m less
// the largest rounding (a heap of roundings with lazy deletion).
Bytes PaddedByEvents(const Problem& problem) {
  const auto& b = problem.buffers;
  std::vector<std::tuple<Step, int, int>> events;
  std::vector<Bytes> alignments;
  for (int i = 0; i < static_cast<int>(b.size()); ++i) {
    events.emplace_back(b[i].start, 1, i);
    events.emplace_back(b[i].end, 0, i);
    alignments.push_back(b[i].alignment);
  }
  std::sort(events.begin(), events.end());
  std::sort(alignments.begin(), alignments.end());
  alignments.erase(std::unique(alignments.begin(), alignments.end()),
                   alignments.end());
  Bytes best = 0;
  for (Bytes m : alignments) {
    Bytes live = 0;
    int64_t with_m = 0, below = 0;
    std::vector<bool> alive(b.size(), false);
    std::priority_queue<std::pair<Bytes, int>> padding;
    for (size_t k = 0; k < events.size(); ++k) {
      const auto [step, is_start, i] = events[k];
      const Bytes padded = AlignUp(b[i].size, m);
      const int sign = is_start ? 1 : -1;
      live += sign * padded;
      if (b[i].alignment == m) with_m += sign;
      if (b[i].alignment < m) below += sign;
      alive[i] = is_start;
      if (is_start) padding.push({padded - b[i].size, i});
      const bool last_at_step =
          k + 1 == events.size() || std::get<0>(events[k + 1]) != step;
      if (!last_at_step || with_m == 0 || below > 0) continue;
      while (!alive[padding.top().second]) padding.pop();
      best = std::max(best, live - padding.top().first);
    }
  }
  return best;
}

// AlignedLowerBound by its definition: the peak of the live sizes rounded
// up to their alignments, taken at every buffer's start (where the live
// set grows). O(n^2).
Bytes AlignedByStarts(const Problem& problem) {
  Bytes best = 0;
  for (const Buffer& at : problem.buffers) {
    Bytes live = 0;
    for (const Buffer& b : problem.buffers) {
      if (b.start <= at.start && at.start < b.end) {
        live += AlignUp(b.size, b.alignment);
      }
    }
    best = std::max(best, live);
  }
  return best;
}

TEST(ProblemTest, PaddedLowerBoundMatchesTheEventSweep) {
  for (uint32_t seed = 0; seed < 500; ++seed) {
    Problem p = testing::DenseProblem(2 + seed % 80, seed);
    std::mt19937 rng(seed);
    for (Buffer& b : p.buffers) b.alignment = Bytes{1} << (rng() % 7);
    ASSERT_EQ(PaddedLowerBound(p), PaddedByEvents(p)) << "seed " << seed;
  }
}

TEST(ProblemTest, PaddedLowerBoundOfTwoSmallAlignedBuffers) {
  // Two live 4-byte buffers aligned to 64: an optimal plan takes 68.
  Problem p;
  p.buffers = {{"a", 0, 2, 4, 64}, {"b", 1, 3, 4, 64}};
  EXPECT_EQ(PaddedLowerBound(p), 68);
  EXPECT_EQ(LowerBound(p), 8);
  p.buffers[0].alignment = p.buffers[1].alignment = 1;
  EXPECT_EQ(PaddedLowerBound(p), 8);
}

}  // namespace
}  // namespace memplan::planner

namespace memplan::planner {
namespace {

TEST(ProblemTest, SpanningBuffersAreTheOnesSpanningAll) {
  base::WorkerPool pool(3, 64);
  for (int n : {0, 1, 50, 150000}) {
    Problem p = testing::RandomProblem(n, 7, 1);
    const auto span = ScheduleSpan(p);
    for (int i = 0; i < n; i += 9973)
      p.buffers[i] = {"all", span.first, span.second, 4};
    for (base::WorkerPool* workers : {(base::WorkerPool*)nullptr, &pool}) {
      int64_t count = -1;
      const std::vector<uint8_t> spanning =
          SpanningBuffers(p, {workers, 4}, &count);
      ASSERT_EQ(spanning.size(), p.buffers.size());
      int64_t want = 0;
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(spanning[i] == 1, SpansAll(p.buffers[i], span))
            << n << " " << i;
        want += spanning[i];
      }
      EXPECT_EQ(count, want);
      EXPECT_EQ(count, (n + 9972) / 9973);
    }
  }
}

TEST(ProblemTest, BoundsFromCompressedTimeAreTheSweptOnes) {
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    // One alignment everywhere (the maximal sections suffice), then mixed
    // alignments (the padded bound sweeps every section).
    Problem p = seed % 3 == 0 ? testing::DenseProblem(200, seed, 64)
                              : testing::RandomProblem(200, seed, 16);
    if (seed % 2 == 0) {
      for (size_t i = 0; i < p.buffers.size(); i += 3) {
        p.buffers[i].alignment = Bytes{1} << (i % 8);
      }
    }
    absl::StatusOr<Sections> time = CompressTime(p);
    ASSERT_TRUE(time.ok());
    const LowerBounds bounds = BoundsFromCompressedTime(p, *time);
    EXPECT_EQ(bounds.unaligned, LowerBound(p)) << "seed " << seed;
    EXPECT_EQ(bounds.padded, PaddedLowerBound(p)) << "seed " << seed;
    Bytes padded_sum = 0;
    for (const Buffer& b : p.buffers)
      padded_sum += AlignUp(b.size, b.alignment);
    EXPECT_EQ(bounds.padded_sum, padded_sum) << "seed " << seed;
    EXPECT_EQ(AlignedLowerBound(p, *time), AlignedByStarts(p))
        << "seed " << seed;
    EXPECT_EQ(AlignedLowerBound(p), AlignedByStarts(p)) << "seed " << seed;
  }
}

// With one alignment the padded bound is at a section of the largest
// padded live sizes (they are multiples of the alignment, the roundings
// below it): where a few sections tie for it, and where many do (past
// kMostPeakSections every section's largest rounding is found), on random
// lifetimes of small and large lists, on threads or not, the bound of the
// definition.
TEST(ProblemTest, BoundsOfOneAlignmentAtFewOrManyPeakSections) {
  base::WorkerPool pool(3, 64);
  std::vector<Problem> problems;
  for (uint32_t seed = 1; seed <= 30; ++seed) {
    problems.push_back(testing::RandomProblem(300, seed, 64));
  }
  problems.push_back(testing::RandomProblem(600'000, 5, 256));
  // Sections in turn, each with two buffers padded to 2 x 64 bytes, one
  // of them rounded up by less at each later section (60 bytes down to
  // 1): the bound is at the last section (128 - 1), not the first
  // (128 - 60).
  for (int sections : {10, 100}) {
    Problem tied;
    for (int k = 0; k < sections; ++k) {
      const Bytes rounding = 60 - k * 59 / (sections - 1);
      tied.buffers.push_back({"a", k, k + 1, 64 - rounding, 64});
      tied.buffers.push_back({"b", k, k + 1, 64, 64});
    }
    problems.push_back(tied);
  }
  for (const Problem& p : problems) {
    absl::StatusOr<Sections> time = CompressTime(p);
    ASSERT_TRUE(time.ok());
    const Bytes want = PaddedByEvents(p);
    for (base::WorkerPool* workers : {(base::WorkerPool*)nullptr, &pool}) {
      const LowerBounds bounds =
          BoundsFromCompressedTime(p, *time, {workers, 4});
      EXPECT_EQ(bounds.padded, want) << p.buffers.size() << " buffers";
      EXPECT_EQ(bounds.unaligned, LowerBound(p)) << p.buffers.size();
    }
  }
}

}  // namespace
}  // namespace memplan::planner
