#include "planner/time_index.h"

#include <algorithm>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "planner/testing/random_problems.h"

namespace memplan::planner {
namespace {

// Every query returns exactly the inserted lifetimes that overlap it, once.
TEST(TimeIndexTest, MatchesBruteForce) {
  for (uint32_t seed = 0; seed < 200; ++seed) {
    Problem p = testing::RandomProblem(2 + seed % 300, seed);
    TimeIndex<int> index(p);
    std::mt19937 rng(seed);
    std::vector<int> inserted;
    for (int i = 0; i < static_cast<int>(p.buffers.size()); ++i) {
      if (rng() % 2) continue;
      index.Insert(p.buffers[i].start, p.buffers[i].end, i);
      inserted.push_back(i);
    }
    for (const Buffer& q : p.buffers) {
      std::vector<int> got, want;
      index.ForEachOverlapping(q.start, q.end,
                               [&](int i) { got.push_back(i); });
      for (int i : inserted) {
        if (LifetimesOverlap(p.buffers[i], q)) want.push_back(i);
      }
      std::sort(got.begin(), got.end());
      ASSERT_EQ(got, want) << "seed " << seed;
    }
  }
}

TEST(TimeIndexTest, BlockLengthIsTheMeanLifetime) {
  Problem p;
  p.buffers = {{"a", 0, 2, 1}, {"b", 5, 11, 1}};
  EXPECT_EQ(ChooseBlockLength(p), 4);
  EXPECT_EQ(ChooseBlockLength(Problem{}), 1);
}

}  // namespace
}  // namespace memplan::planner
