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
    const Sections time = *CompressTime(p);
    TimeIndex<int> index(time);
    std::mt19937 rng(seed);
    std::vector<int> inserted;
    for (int i = 0; i < static_cast<int>(p.buffers.size()); ++i) {
      if (rng() % 2) continue;
      index.Insert(i, i);
      inserted.push_back(i);
    }
    for (int q = 0; q < static_cast<int>(p.buffers.size()); ++q) {
      std::vector<int> got, want;
      index.ForEachOverlapping(q, [&](int i) { got.push_back(i); });
      for (int i : inserted) {
        if (LifetimesOverlap(p.buffers[i], p.buffers[q])) want.push_back(i);
      }
      std::sort(got.begin(), got.end());
      ASSERT_EQ(got, want) << "seed " << seed;
    }
  }
}

TEST(TimeIndexTest, BlockLengthIsTheMeanLifetimeInSections) {
  // Maximal sections: [1,2) holds {a, b}, [3,4) holds {a, c}; a spans both.
  Problem p;
  p.buffers = {{"a", 0, 10, 1}, {"b", 1, 2, 1}, {"c", 3, 4, 1}};
  const Sections time = *CompressTime(p);
  ASSERT_EQ(time.size(), 2);
  EXPECT_EQ(ChooseBlockLength(time), 1);  // (2 + 1 + 1) / 3 rounded
  p.buffers = {{"a", 0, 10, 1},
               {"b", 1, 2, 1},
               {"c", 3, 4, 1},
               {"d", 5, 6, 1},
               {"e", 0, 10, 1}};
  EXPECT_EQ(ChooseBlockLength(*CompressTime(p)), 2);  // (3+1+1+1+3) / 5
  EXPECT_EQ(ChooseBlockLength(*CompressTime(Problem{})), 1);
}

// Sparse short lifetimes over a span of 2^62 steps (issue 10: the index
// allocated per step): memory is a few entries per buffer, whatever the
// span, and answers stay exact.
TEST(TimeIndexTest, MemoryDependsOnBuffersNotOnTheSpan) {
  std::mt19937_64 rng(7);
  Problem p;
  for (int i = 0; i < 2000; ++i) {
    const Step start = -(Step{1} << 61) + static_cast<Step>(rng() >> 2);
    p.buffers.push_back(
        {"b", start, start + 1 + static_cast<Step>(rng() % 3), 1});
  }
  p.buffers.push_back({"long", -(Step{1} << 62), Step{1} << 62, 1});
  const Sections time = *CompressTime(p);
  TimeIndex<int> index(time);
  for (int i = 0; i < static_cast<int>(p.buffers.size()); ++i) {
    index.Insert(i, i);
  }
  EXPECT_LE(index.slots(), 3 * p.buffers.size());
  const int last = static_cast<int>(p.buffers.size()) - 1;
  for (int q : {0, 17, last}) {
    std::vector<int> got, want;
    index.ForEachOverlapping(q, [&](int i) { got.push_back(i); });
    for (int i = 0; i <= last; ++i) {
      if (LifetimesOverlap(p.buffers[i], p.buffers[q])) want.push_back(i);
    }
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want) << "query " << q;
  }
}

}  // namespace
}  // namespace memplan::planner
