#include "planner/exact/hole_groups.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "base/cancel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/problem.h"
#include "planner/testing/random_problems.h"
#include "planner/testing/zero_slack.h"

namespace memplan::planner {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// b1 (3) and b2 (4) end at 2 while b0 stays; the one buffer starting then
// (7) must fill the hole they leave, so they touch in every plan of 10.
TEST(HoleGroupsTest, BuffersEndingIntoOneStartTouch) {
  const Problem p =
      testing::ProblemOf({{0, 3, 3}, {0, 2, 3}, {0, 2, 4}, {2, 3, 7}});
  const HoleGroups at10 = FindHoleGroups(p, 10);
  EXPECT_TRUE(at10.zero_slack);
  ASSERT_EQ(at10.groups.size(), 1u);
  EXPECT_THAT(at10.groups[0].members, ElementsAre(1, 2));
  EXPECT_EQ(at10.groups[0].span, 7);
}

// A cancelled search set-up splits no event: no group, and no wait.
TEST(HoleGroupsTest, CancelledFindsNoGroup) {
  const Problem p =
      testing::ProblemOf({{0, 3, 3}, {0, 2, 3}, {0, 2, 4}, {2, 3, 7}});
  base::CancelToken cancelled;
  cancelled.Cancel();
  EXPECT_THAT(FindHoleGroups(p, 10, &cancelled).groups, IsEmpty());
}

// Two starting buffers (3 + 4) can fill the two ended ones' holes apart:
// nothing is forced.
TEST(HoleGroupsTest, HolesThatCanStayApartGiveNoGroup) {
  const Problem p = testing::ProblemOf(
      {{0, 3, 3}, {0, 2, 3}, {0, 2, 4}, {2, 3, 3}, {2, 3, 4}});
  const HoleGroups groups = FindHoleGroups(p, 10);
  EXPECT_TRUE(groups.zero_slack);
  EXPECT_THAT(groups.groups, IsEmpty());
}

// With a byte to spare, or when everything ends at once (the whole arena is
// free then), nothing is concluded.
TEST(HoleGroupsTest, SlackOrAClearedArenaGivesNoGroup) {
  const Problem p =
      testing::ProblemOf({{0, 3, 3}, {0, 2, 3}, {0, 2, 4}, {2, 3, 7}});
  const HoleGroups at11 = FindHoleGroups(p, 11);
  EXPECT_FALSE(at11.zero_slack);
  EXPECT_THAT(at11.groups, IsEmpty());
  const Problem cleared = testing::ProblemOf({{0, 2, 3}, {0, 2, 4}, {2, 3, 7}});
  const HoleGroups at7 = FindHoleGroups(cleared, 7);
  EXPECT_TRUE(at7.zero_slack);
  EXPECT_THAT(at7.groups, IsEmpty());
}

// Every group holds in the cut a zero-slack packing was made from (a plan
// within the capacity): the groups never rule out a real plan.
TEST(HoleGroupsTest, GroupsHoldInTheCutOfEveryPacking) {
  int groups_seen = 0;
  for (const testing::ZeroSlackCut cut :
       {testing::ZeroSlackCut::kSweep, testing::ZeroSlackCut::kGuillotine}) {
    for (uint32_t seed = 1; seed <= 60; ++seed) {
      testing::ZeroSlackOptions options;
      options.cut = cut;
      options.buffers = 40 + static_cast<int>(seed % 5) * 40;
      options.live = 6 + static_cast<int>(seed % 4) * 6;
      options.seed = seed;
      const auto [problem, plan] = testing::ZeroSlackPacking(options);
      const HoleGroups found = FindHoleGroups(problem, options.capacity);
      ASSERT_TRUE(found.zero_slack) << "seed " << seed;
      for (const HoleGroup& g : found.groups) {
        Offset lo = options.capacity, hi = 0;
        for (int b : g.members) {
          lo = std::min(lo, plan.offsets[b]);
          hi = std::max(hi, plan.offsets[b] + problem.buffers[b].size);
        }
        EXPECT_LE(hi - lo, g.span) << "seed " << seed;
        ++groups_seen;
      }
    }
  }
  EXPECT_GT(groups_seen, 100);
}

}  // namespace
}  // namespace memplan::planner
