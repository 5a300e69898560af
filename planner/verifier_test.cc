#include "planner/verifier.h"

#include <algorithm>
#include <string>

#include "base/worker_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/greedy.h"
#include "planner/sections.h"
#include "planner/testing/random_problems.h"
#include "planner/windows.h"

namespace memplan::planner {
namespace {

using ::testing::HasSubstr;

Problem TwoBuffers() {
  Problem p;
  p.buffers = {{"a", 0, 2, 16, 8}, {"b", 1, 3, 16, 8}};
  return p;
}

TEST(VerifierTest, AcceptsDisjointPlacement) {
  EXPECT_TRUE(Verify(TwoBuffers(), {{0, 16}, 32}).ok());
}

TEST(VerifierTest, RejectsOverlapOfLiveBuffers) {
  absl::Status s = Verify(TwoBuffers(), {{0, 8}, 32});
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(s.message()), HasSubstr("'a'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("'b'"));
}

TEST(VerifierTest, AllowsOverlapOfBuffersNotLiveTogether) {
  Problem p = TwoBuffers();
  p.buffers[1].start = 2;  // [0,2) and [2,3): half-open, no overlap
  EXPECT_TRUE(Verify(p, {{0, 0}, 16}).ok());
}

TEST(VerifierTest, RejectsMisalignedOffset) {
  EXPECT_THAT(std::string(Verify(TwoBuffers(), {{0, 20}, 40}).message()),
              HasSubstr("not a multiple of 8"));
}

TEST(VerifierTest, RejectsArenaTooSmall) {
  EXPECT_THAT(std::string(Verify(TwoBuffers(), {{0, 16}, 31}).message()),
              HasSubstr("past the arena size 31"));
}

TEST(VerifierTest, RejectsMovedFixedOffset) {
  Problem p = TwoBuffers();
  p.buffers[0].fixed_offset = 16;
  EXPECT_THAT(std::string(Verify(p, {{0, 16}, 32}).message()),
              HasSubstr("pinned at 16"));
}

TEST(VerifierTest, RejectsMissingOffsets) {
  EXPECT_FALSE(Verify(TwoBuffers(), {{0}, 32}).ok());
}

// The sweep and the all-pairs check agree on random, often broken, plans.
TEST(VerifierTest, SweepAgreesWithAllPairs) {
  int rejected = 0;
  for (uint32_t seed = 0; seed < 2000; ++seed) {
    Problem p = testing::RandomProblem(2 + seed % 40, seed);
    Solution s = *PlaceInOrder(p, GreedyPlacementOrder(p, GreedyOrder::kSize),
                               FitPolicy::kBestFit, nullptr);
    // Break every third plan by moving one buffer onto another.
    if (seed % 3 == 0) s.offsets[seed % p.buffers.size()] = s.offsets[0];
    const bool sweep = Verify(p, s).ok();
    ASSERT_EQ(sweep, VerifyAllPairs(p, s).ok()) << "seed " << seed;
    rejected += sweep ? 0 : 1;
  }
  EXPECT_GT(rejected, 100);  // the breakage was really caught
}

// The same where many buffers are live at once (the sweep keeps them in a
// tree past a few dozen, in a vector below): long, dense lifetimes of 80
// to 280 buffers, and small lists for the vector.
TEST(VerifierTest, SweepAgreesWithAllPairsFewOrManyLive) {
  int rejected = 0;
  for (uint32_t seed = 0; seed < 120; ++seed) {
    const int n = seed % 2 == 0 ? 80 + static_cast<int>(seed) * 5
                                : 5 + static_cast<int>(seed % 30);
    Problem p = testing::LongDenseProblem(n, seed, 8);
    Solution s = *PlaceInOrder(p, GreedyPlacementOrder(p, GreedyOrder::kSize),
                               FitPolicy::kBestFit, nullptr);
    const int moved = static_cast<int>((seed * 7919) % n);
    if (seed % 4 < 2) s.offsets[moved] = s.offsets[(moved + 1) % n];
    if (seed % 4 == 2) s.offsets[moved] += 8;  // onto a neighbour, or not
    const bool sweep = Verify(p, s).ok();
    ASSERT_EQ(sweep, VerifyAllPairs(p, s).ok()) << "seed " << seed;
    rejected += sweep ? 0 : 1;
  }
  EXPECT_GT(rejected, 40);
}

// a [0,2) hands its memory to b [1,3) at step 1; c [0,3) lives apart.
Problem HandOver() {
  Problem p;
  p.buffers = {{"a", 0, 2, 32, 8}, {"b", 1, 3, 32, 8}, {"c", 0, 3, 16, 8}};
  return p;
}

TEST(VerifierTest, InPlaceHandOverIsAcceptedOnlyForItsPair) {
  Problem p = HandOver();
  Solution s{{0, 0, 32}, 48};
  EXPECT_FALSE(Verify(p, s).ok());  // without the pair: a collision
  EXPECT_TRUE(VerifyInPlace(p, s, {{1, 0}}).ok());
  // c on top of them is still a collision, pair or not.
  Solution bad{{0, 0, 16}, 48};
  EXPECT_THAT(std::string(VerifyInPlace(p, bad, {{1, 0}}).message()),
              HasSubstr("'c'"));
}

TEST(VerifierTest, InPlaceRulesAreChecked) {
  Problem p = HandOver();
  Solution s{{0, 0, 32}, 48};
  // Different offsets.
  EXPECT_THAT(
      std::string(VerifyInPlace(p, {{0, 8, 48}, 64}, {{1, 0}}).message()),
      HasSubstr("offsets differ"));
  // The output larger than the input.
  Problem larger = p;
  larger.buffers[1].size = 40;
  EXPECT_THAT(
      std::string(VerifyInPlace(larger, {{0, 0, 40}, 56}, {{1, 0}}).message()),
      HasSubstr("larger"));
  // The input still live after the output's first step.
  Problem late = p;
  late.buffers[0].end = 3;
  EXPECT_THAT(std::string(VerifyInPlace(late, s, {{1, 0}}).message()),
              HasSubstr("last step"));
  // A persistent tensor.
  Problem persistent = p;
  persistent.buffers[0].persistent = true;
  EXPECT_THAT(std::string(VerifyInPlace(persistent, s, {{1, 0}}).message()),
              HasSubstr("persistent"));
  // Alignment.
  Problem aligned = p;
  aligned.buffers[1].alignment = 16;
  EXPECT_THAT(std::string(VerifyInPlace(aligned, s, {{1, 0}}).message()),
              HasSubstr("alignments differ"));
}

// The sweep by time windows on several threads gives Verify's verdict:
// a valid plan passes, and a collision is found also between buffers
// reaching across windows.
TEST(VerifierTest, ByWindowsOnWorkersFindsWhatTheSweepFinds) {
  const Problem p = testing::RandomProblem(70000, 3, 64);
  absl::StatusOr<Sections> time = CompressTime(p);
  ASSERT_TRUE(time.ok());
  GreedyStrategy greedy(GreedyOrder::kSize, FitPolicy::kBestFit);
  absl::StatusOr<Solution> plan = greedy.Solve(p, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  base::WorkerPool pool(3, 64);
  const base::Parallelism parallel{&pool, 4};
  EXPECT_TRUE(Verify(p, *plan, nullptr, *time, parallel).ok());
  // The longest-lived buffer crosses windows; put an overlapping one on it.
  int longest = 0;
  for (int i = 0; i < static_cast<int>(p.buffers.size()); ++i) {
    const Buffer& b = p.buffers[i];
    const Buffer& l = p.buffers[longest];
    if (b.end - b.start > l.end - l.start) longest = i;
  }
  int other = -1;
  for (int i = static_cast<int>(p.buffers.size()); i-- > 0 && other < 0;) {
    if (i != longest && LifetimesOverlap(p.buffers[i], p.buffers[longest]) &&
        p.buffers[i].start > p.buffers[longest].start + 100) {
      other = i;
    }
  }
  ASSERT_GE(other, 0);
  Solution bad = *plan;
  bad.offsets[other] = bad.offsets[longest];
  bad.arena_size =
      std::max(bad.arena_size, bad.offsets[other] + p.buffers[other].size);
  EXPECT_TRUE(absl::IsInternal(Verify(p, bad)));
  const absl::Status s = Verify(p, bad, nullptr, *time, parallel);
  EXPECT_TRUE(absl::IsInternal(s)) << s;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("overlap"));
  EXPECT_TRUE(absl::IsInternal(Verify(p, bad, nullptr, *time, {})));
}

// Each window's sweep sees the buffers reaching into it from earlier
// windows: a collision that lies in one later window only, between a
// buffer crossing windows (from either chunk of the list's 2^16) and one
// living inside that window, is found on threads as in one pass.
TEST(VerifierTest, ByWindowsSeesBuffersReachingIntoEachWindow) {
  const Problem p = testing::RandomProblem(70000, 5, 64);
  absl::StatusOr<Sections> time = CompressTime(p);
  ASSERT_TRUE(time.ok());
  const TimeWindows windows = CutTime(*time);
  ASSERT_GT(windows.count(), 2);
  GreedyStrategy greedy(GreedyOrder::kSize, FitPolicy::kBestFit);
  absl::StatusOr<Solution> plan = greedy.Solve(p, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  base::WorkerPool pool(3, 64);
  const base::Parallelism parallel{&pool, 4};
  const auto window = [&](int i, bool last) {
    return windows.WindowOf(last ? time->last[i] - 1 : time->first[i]);
  };
  int checked[2] = {0, 0};  // pairs whose crossing buffer is in each chunk
  const int n = static_cast<int>(p.buffers.size());
  for (int crossing = 0; crossing < n; ++crossing) {
    const int chunk = crossing < (1 << 16) ? 0 : 1;
    if (checked[chunk] >= 6 ||
        window(crossing, false) == window(crossing, true))
      continue;
    // A buffer inside one later window the crossing one reaches into.
    int inside = -1;
    for (int j = 0; j < n && inside < 0; ++j) {
      if (j != crossing && window(j, false) == window(j, true) &&
          window(j, false) > window(crossing, false) &&
          window(j, false) <= window(crossing, true) &&
          LifetimesOverlap(p.buffers[j], p.buffers[crossing])) {
        inside = j;
      }
    }
    if (inside < 0) continue;
    Solution bad = *plan;
    bad.offsets[inside] = bad.offsets[crossing];
    bad.arena_size =
        std::max(bad.arena_size, bad.offsets[inside] + p.buffers[inside].size);
    ASSERT_TRUE(absl::IsInternal(Verify(p, bad))) << crossing << " " << inside;
    EXPECT_TRUE(absl::IsInternal(Verify(p, bad, nullptr, *time, parallel)))
        << "crossing " << crossing << ", inside " << inside;
    ++checked[chunk];
  }
  EXPECT_EQ(checked[0], 6);
  EXPECT_EQ(checked[1], 6);
}

}  // namespace
}  // namespace memplan::planner
