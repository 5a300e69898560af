#include "planner/memory_spaces.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/graph.h"
#include "planner/planner.h"
#include "planner/testing/random_problems.h"
#include "planner/verifier.h"

namespace memplan::planner {
namespace {

using ::testing::HasSubstr;

// Proves every space of a multi-space plan on its own, and that each space
// stays within its capacity.
void ExpectValidPools(const PlanResult& r,
                      const std::vector<MemorySpace>& spaces,
                      const std::string& what) {
  ASSERT_EQ(r.memory_spaces.size(), spaces.size()) << what;
  ASSERT_EQ(r.memory_space_of.size(), r.problem.buffers.size()) << what;
  Bytes total = 0;
  for (size_t k = 0; k < spaces.size(); ++k) {
    std::vector<int> members;
    for (size_t i = 0; i < r.memory_space_of.size(); ++i) {
      if (r.memory_space_of[i] == static_cast<int>(k)) members.push_back(i);
    }
    Problem sub = SubProblem(r.problem, members);
    Solution s;
    for (int i : members) s.offsets.push_back(r.solution.offsets[i]);
    s.arena_size = r.memory_spaces[k].arena_size;
    ASSERT_TRUE(VerifyAllPairs(sub, s).ok()) << what << " space " << k;
    EXPECT_EQ(r.memory_spaces[k].buffers, static_cast<int>(members.size()));
    EXPECT_EQ(r.memory_spaces[k].name, spaces[k].name);
    if (spaces[k].capacity > 0) {
      EXPECT_LE(r.memory_spaces[k].arena_size, spaces[k].capacity) << what;
    }
    total += r.memory_spaces[k].arena_size;
  }
  EXPECT_EQ(r.solution.arena_size, total);
}

TEST(MemoryPoolsTest, ClaimOrderIsSmallestAreaFirst) {
  Problem p;
  p.buffers = {{"big", 0, 4, 100},
               {"long", 0, 10, 10},
               {"tiny", 2, 3, 8},
               {"tie", 2, 3, 8}};
  EXPECT_THAT(SpaceClaimOrder(p), ::testing::ElementsAre(2, 3, 1, 0));
}

TEST(MemoryPoolsTest, FastPoolTakesWhatFitsAndTheRestSpills) {
  Problem p;
  // At step 0: a (40) and b (40) and c (100) are live; the fast space holds
  // 64 bytes, so it takes a (smallest area) and the rest spills.
  p.buffers = {{"a", 0, 1, 40}, {"b", 0, 2, 40}, {"c", 0, 3, 100}};
  absl::StatusOr<std::vector<SpaceShare>> shares =
      SplitOverSpaces(p, {{"fast", 64}, {"slow", 0}}, nullptr);
  ASSERT_TRUE(shares.ok()) << shares.status();
  EXPECT_THAT((*shares)[0].buffers, ::testing::ElementsAre(0));
  EXPECT_THAT((*shares)[1].buffers, ::testing::ElementsAre(1, 2));
  EXPECT_LE((*shares)[0].plan.arena_size, 64);
}

TEST(MemoryPoolsTest, WhatFitsNowhereIsFailedPrecondition) {
  Problem p;
  p.buffers = {{"a", 0, 2, 40}, {"b", 1, 3, 500}};
  absl::StatusOr<std::vector<SpaceShare>> shares =
      SplitOverSpaces(p, {{"fast", 64}, {"slow", 256}}, nullptr);
  EXPECT_EQ(shares.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(shares.status().message()), HasSubstr("'b'"));
}

TEST(MemoryPoolsTest, BadPoolsAndPinsAreInvalid) {
  Problem p;
  p.buffers = {{"a", 0, 2, 40}};
  EXPECT_EQ(SplitOverSpaces(p, {{"", 64}}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SplitOverSpaces(p, {{"x", 64}, {"x", 0}}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SplitOverSpaces(p, {{"x", -1}}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  p.buffers[0].fixed_offset = 0;
  EXPECT_EQ(SplitOverSpaces(p, {{"x", 0}}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MemoryPoolsTest, RandomProblemsArePlannedAndVerifiedPerPool) {
  for (uint32_t seed = 0; seed < 300; ++seed) {
    Problem p = testing::RandomProblem(5 + seed % 120, seed, 1 << (seed % 5));
    const Bytes bound = LowerBound(p);
    std::vector<MemorySpace> spaces = {
        {"sram", bound / 4 + 64}, {"l2", bound / 3 + 64}, {"dram", 0}};
    PlanOptions options;
    options.memory_spaces = spaces;
    absl::StatusOr<PlanResult> r = PlanBuffers(p, options, nullptr, nullptr);
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectValidPools(*r, spaces, "seed " + std::to_string(seed));
  }
}

TEST(MemoryPoolsTest, OneUnboundedPoolIsNoWorseThanTheBestHeuristic) {
  for (uint32_t seed = 0; seed < 30; ++seed) {
    Problem p = testing::RandomProblem(200, seed, 16);
    PlanOptions options;
    absl::StatusOr<PlanResult> single =
        PlanBuffers(p, options, nullptr, nullptr);
    options.memory_spaces = {{"all", 0}};
    absl::StatusOr<PlanResult> pooled =
        PlanBuffers(p, options, nullptr, nullptr);
    ASSERT_TRUE(single.ok() && pooled.ok());
    EXPECT_EQ(pooled->solution.arena_size, single->solution.arena_size);
    EXPECT_EQ(pooled->solution.offsets, single->solution.offsets);
  }
}

TEST(MemoryPoolsTest, GraphWithInPlaceOpsAndPoolsVerifiesPerTensor) {
  base::WorkerPool workers(2, 16);
  for (uint32_t seed = 0; seed < 100; ++seed) {
    Graph g = testing::RandomGraph(5 + seed % 40, seed);
    for (Op& op : g.ops) op.in_place = seed % 2 == 0;
    PlanOptions options;
    options.memory_spaces = {{"fast", 8192}, {"slow", 0}};
    absl::StatusOr<PlanResult> r = PlanGraph(g, options, &workers, nullptr);
    ASSERT_TRUE(r.ok()) << r.status();  // includes the per-tensor proof
    ExpectValidPools(*r, options.memory_spaces, "seed " + std::to_string(seed));
  }
}

TEST(MemoryPoolsTest, SamePlanOnEveryThreadCount) {
  Problem p = testing::RandomProblem(6000, 4, 64);
  PlanOptions options;
  options.memory_spaces = {{"fast", LowerBound(p) / 3}, {"slow", 0}};
  absl::StatusOr<PlanResult> base = PlanBuffers(p, options, nullptr, nullptr);
  ASSERT_TRUE(base.ok()) << base.status();
  for (int threads : {1, 2, 4}) {
    base::WorkerPool workers(threads, 64);
    absl::StatusOr<PlanResult> r = PlanBuffers(p, options, &workers, nullptr);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->memory_space_of, base->memory_space_of) << threads;
    EXPECT_EQ(r->solution.offsets, base->solution.offsets) << threads;
  }
}

TEST(MemoryPoolsTest, CapacityAndPoolsTogetherAreInvalid) {
  PlanOptions options;
  options.capacity = 1000;
  options.memory_spaces = {{"x", 0}};
  absl::StatusOr<PlanResult> r =
      PlanBuffers(testing::RandomProblem(10, 1), options, nullptr, nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace memplan::planner
