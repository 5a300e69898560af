#include "planner/gap.h"

#include <vector>

#include "gtest/gtest.h"

namespace memplan::planner {
namespace {

TEST(GapTest, BestFitTakesTheSmallestGapFirstFitTheLowest) {
  // Gaps: [0, 100) of 100 bytes, [150, 180) of 30, then the top from 200.
  const std::vector<TakenRange> taken = {{100, 150}, {180, 200}};
  EXPECT_EQ(FindGap(taken, 20, 1, FitPolicy::kBestFit, 0), 150);
  EXPECT_EQ(FindGap(taken, 20, 1, FitPolicy::kFirstFit, 0), 0);
  EXPECT_EQ(FindGap(taken, 40, 1, FitPolicy::kBestFit, 0), 0);
  EXPECT_EQ(FindGap(taken, 101, 1, FitPolicy::kBestFit, 0), 200);
}

TEST(GapTest, AlignmentAndBaseAreApplied) {
  const std::vector<TakenRange> taken = {{100, 150}, {180, 200}};
  // At alignment 64 the gap [150, 180) holds nothing: 192 + 20 > 180.
  EXPECT_EQ(FindGap(taken, 20, 64, FitPolicy::kBestFit, 0), 0);
  EXPECT_EQ(FindGap(taken, 20, 64, FitPolicy::kBestFit, 10), 64);
  EXPECT_EQ(FindGap(taken, 20, 64, FitPolicy::kBestFit, 70), 256);
}

TEST(GapTest, OverlappingRangesAndTiesToTheLowest) {
  // Ranges overlap each other; the two 10-byte gaps tie: the lower wins.
  const std::vector<TakenRange> taken = {
      {0, 50}, {10, 40}, {60, 70}, {60, 65}, {80, 90}};
  EXPECT_EQ(FindGap(taken, 10, 1, FitPolicy::kBestFit, 0), 50);
  EXPECT_EQ(FindGap(taken, 10, 1, FitPolicy::kFirstFit, 0), 50);
  EXPECT_EQ(FindGap({}, 10, 8, FitPolicy::kBestFit, 3), 8);
}

}  // namespace
}  // namespace memplan::planner
