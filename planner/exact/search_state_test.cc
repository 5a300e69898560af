// The exact search's helper classes on small hand-made states: the failure
// memo (failure_memo.h), the hole groups' state (hole_state.h) and the
// split into parts (parts.h). exact_solver_test.cc checks them at work.
#include <optional>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/exact/failure_memo.h"
#include "planner/exact/hole_groups.h"
#include "planner/exact/hole_state.h"
#include "planner/exact/parts.h"
#include "planner/problem.h"

namespace memplan::planner::exact_internal {
namespace {

using ::testing::ElementsAre;

// The key of the node with `placed` placed, in that order, in a run of
// `ordering` (no part entered, no hole groups).
Hash128 KeyAfter(FailureMemo& memo, const char* ordering,
                 const std::vector<int>& placed, bool any_order) {
  memo.StartRun(ordering, /*seed=*/0);
  for (int b : placed) memo.Toggle(b);
  return memo.Key(std::nullopt, any_order, /*last_offset=*/0,
                  /*last_rank=*/any_order ? -1 : 2);
}

// A failure is a fact about the placed set: another order of the same
// placements finds it, a different set does not.
TEST(FailureMemoTest, RemembersTheSetWhateverTheOrder) {
  FailureMemo memo(/*enabled=*/true);
  memo.Remember(KeyAfter(memo, "Zh", {1, 2}, /*any_order=*/true));
  EXPECT_TRUE(memo.Failed(KeyAfter(memo, "Zh", {2, 1}, true)));
  EXPECT_FALSE(memo.Failed(KeyAfter(memo, "Zh", {1, 3}, true)));
  EXPECT_FALSE(memo.Failed(KeyAfter(memo, "Zh", {1}, true)));
}

// Without a rank restriction a failure holds for every ordering; with one,
// only for the run's own.
TEST(FailureMemoTest, OnlyRestrictedKeysNameTheOrdering) {
  FailureMemo memo(/*enabled=*/true);
  memo.Remember(KeyAfter(memo, "Zh", {4}, /*any_order=*/true));
  memo.Remember(KeyAfter(memo, "Zh", {5}, /*any_order=*/false));
  EXPECT_TRUE(memo.Failed(KeyAfter(memo, "TZh", {4}, true)));
  EXPECT_TRUE(memo.Failed(KeyAfter(memo, "Zh", {5}, false)));
  EXPECT_FALSE(memo.Failed(KeyAfter(memo, "TZh", {5}, false)));
}

// A part's key names its sections; leaving it restores the enclosing one.
// The hole groups' term is part of the key.
TEST(FailureMemoTest, PartsAndHoleGroupsChangeTheKey) {
  FailureMemo memo(/*enabled=*/true);
  memo.StartRun("Zh", 0);
  memo.Toggle(0);
  const Hash128 outside = memo.Key(std::nullopt, true, 0, -1);
  const Hash128 saved = memo.EnterPart(2, 5);
  const Hash128 inside = memo.Key(std::nullopt, true, 0, -1);
  EXPECT_FALSE(inside == outside);
  memo.LeavePart(saved);
  EXPECT_TRUE(memo.Key(std::nullopt, true, 0, -1) == outside);
  EXPECT_FALSE(memo.Key(std::optional<uint64_t>(7), true, 0, -1) == outside);
}

// One group of buffers 0 and 1 (4 bytes each) within 10 bytes; buffer 2 is
// in no group.
struct GroupFixture {
  std::vector<HoleGroup> groups = {{{0, 1}, 10}};
  std::vector<std::vector<int>> groups_of = {{0}, {0}, {}};
  std::vector<Bytes> sizes = {4, 4, 4};
  std::vector<char> placed = {0, 0, 0};
  std::vector<Offset> offset = {-1, -1, -1};
  std::vector<Offset> min_offset = {0, 0, 0};
  std::vector<std::pair<int, Offset>> raised;  // none

  // Places b at `at` in the view and in `state`.
  void Place(HoleState& state, int b, Offset at) {
    placed[b] = 1;
    offset[b] = at;
    state.Place(b, at);
  }
  // Whether b's groups hold in `state`.
  bool Hold(const HoleState& state, int b) {
    return state.Hold(b, raised, 0, PlacedView{placed, offset, min_offset});
  }
};

// A member placed too far from the others, or an unplaced one pushed too
// high, breaks the group's span.
TEST(HoleStateTest, HoldsWhileTheGroupFitsItsSpan) {
  GroupFixture f;
  HoleState state(f.groups, f.groups_of, f.sizes, /*active=*/true);
  state.Reset();
  f.Place(state, 0, 0);
  f.min_offset[1] = 6;  // 6 + 4 <= 0 + 10
  EXPECT_TRUE(f.Hold(state, 0));
  f.min_offset[1] = 7;  // 7 + 4 > 10
  EXPECT_FALSE(f.Hold(state, 0));
  f.Place(state, 1, 8);  // [0, 12) spans more than 10
  EXPECT_FALSE(f.Hold(state, 1));
}

// The memo's term is nonzero only while the group is partly placed, and
// Remove undoes Place.
TEST(HoleStateTest, OpenKeyFollowsPartlyPlacedGroups) {
  GroupFixture f;
  HoleState state(f.groups, f.groups_of, f.sizes, /*active=*/true);
  state.Reset();
  EXPECT_EQ(state.open_key(), 0u);
  state.Place(0, 0);
  const uint64_t at0 = state.open_key();
  EXPECT_NE(at0, 0u);
  state.Remove(0, 0);
  state.Place(0, 4);
  EXPECT_NE(state.open_key(), at0);  // the placed member's offset counts
  state.Place(1, 0);
  EXPECT_EQ(state.open_key(), 0u);  // wholly placed
  state.Place(2, 0);                // in no group
  EXPECT_EQ(state.open_key(), 0u);
}

// Inactive (slack, or no groups), everything holds.
TEST(HoleStateTest, InactiveAlwaysHolds) {
  GroupFixture f;
  HoleState state(f.groups, f.groups_of, f.sizes, /*active=*/false);
  state.Reset();
  f.Place(state, 0, 0);
  f.Place(state, 1, 100);
  EXPECT_TRUE(f.Hold(state, 1));
  EXPECT_EQ(state.open_key(), 0u);
}

// Buffers in sections [0, 2), [1, 3) and [3, 4) of 4: no buffer crosses
// 2|3; once the second is placed, none crosses 1|2 either.
TEST(CutsTest, SplitsWhereNoUnplacedBufferCrosses) {
  const std::vector<int> sec_lo = {0, 1, 3}, sec_hi = {2, 3, 4};
  std::vector<char> placed = {0, 0, 0};
  Cuts cuts;
  cuts.Reset(sec_lo, sec_hi, 4);
  const Part all{{0, 1, 2}, 0, 4};
  std::vector<Part> parts = cuts.Split(all, placed, sec_lo);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_THAT(parts[0].buffers, ElementsAre(0, 1));
  EXPECT_EQ(parts[0].hi, 3);
  EXPECT_THAT(parts[1].buffers, ElementsAre(2));

  placed[1] = 1;
  EXPECT_TRUE(cuts.Remove(sec_lo[1], sec_hi[1]));
  parts = cuts.Split(all, placed, sec_lo);  // [2, 3) is empty: left out
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_THAT(parts[0].buffers, ElementsAre(0));
  EXPECT_EQ(parts[0].hi, 2);
  EXPECT_EQ(parts[1].lo, 3);

  placed[1] = 0;
  cuts.Restore(sec_lo[1], sec_hi[1]);
  EXPECT_EQ(cuts.Split(all, placed, sec_lo).size(), 2u);
  EXPECT_FALSE(cuts.Remove(sec_lo[2], sec_hi[2]));  // crosses no boundary
}

}  // namespace
}  // namespace memplan::planner::exact_internal
