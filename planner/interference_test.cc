#include "planner/interference.h"

#include <set>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/shared_objects.h"
#include "planner/testing/random_problems.h"

namespace memplan::planner {
namespace {

TEST(InterferenceTest, MatchesAllPairsOnRandomProblems) {
  for (uint32_t seed = 0; seed < 300; ++seed) {
    Problem p = testing::RandomProblem(1 + seed % 80, seed);
    absl::StatusOr<InterferenceGraph> g = BuildInterferenceGraph(p, 1 << 20);
    ASSERT_TRUE(g.ok());
    std::set<std::pair<int, int>> expected, actual;
    const int n = static_cast<int>(p.buffers.size());
    const auto span = ScheduleSpan(p);
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(g->SpansAll(i), SpansAll(p.buffers[i], span));
      for (int j = i + 1; j < n; ++j) {
        // Edges of buffers spanning the whole schedule are implied.
        if (LifetimesOverlap(p.buffers[i], p.buffers[j]) &&
            !SpansAll(p.buffers[i], span) && !SpansAll(p.buffers[j], span)) {
          expected.insert({i, j});
        }
      }
      for (int j : g->Neighbours(i)) {
        if (i < j) actual.insert({i, j});
      }
    }
    ASSERT_EQ(actual, expected) << "seed " << seed;
    EXPECT_EQ(g->num_edges(), static_cast<int64_t>(expected.size()));
  }
}

// Large problems fill their rows in chunks, on workers or not: each row
// still lists exactly the buffers overlapping it, ascending.
TEST(InterferenceTest, ChunkedRowsMatchTheOverlapsOnWorkers) {
  Problem p = testing::RandomProblem(60000, 8);
  p.buffers[5].start = 0;  // and one spanning the schedule
  p.buffers[5].end = ScheduleSpan(p).second;
  base::WorkerPool pool(3, 64);
  for (base::WorkerPool* workers : {&pool, (base::WorkerPool*)nullptr}) {
    absl::StatusOr<InterferenceGraph> g =
        BuildInterferenceGraph(p, int64_t{1} << 26, nullptr, {workers, 4});
    ASSERT_TRUE(g.ok()) << g.status();
    const int n = static_cast<int>(p.buffers.size());
    const auto span = ScheduleSpan(p);
    EXPECT_TRUE(g->SpansAll(5));
    for (int i = 0; i < n; i += 997) {
      std::vector<int> expected;
      for (int j = 0; j < n; ++j) {
        if (j != i && LifetimesOverlap(p.buffers[i], p.buffers[j]) &&
            !SpansAll(p.buffers[j], span)) {
          expected.push_back(j);
        }
      }
      const auto row = g->Neighbours(i);
      ASSERT_EQ(std::vector<int>(row.begin(), row.end()), expected) << i;
    }
  }
}

TEST(InterferenceTest, EdgeLimitIsResourceExhausted) {
  Problem p;
  for (int i = 0; i < 100; ++i) p.buffers.push_back({"b", 0, 10, 1});
  p.buffers.push_back({"late", 10, 11, 1});
  absl::StatusOr<InterferenceGraph> g = BuildInterferenceGraph(p, 1000);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(g.status().message()),
              ::testing::HasSubstr("4950 interfering buffer pairs"));
  EXPECT_TRUE(BuildInterferenceGraph(p, 4950).ok());
}

// Given the compressed time, the pairs are counted from its sections: the
// same count (the limit's message, the graph's edges) as the sweep's, with
// buffers spanning the schedule or not.
TEST(InterferenceTest, CountsFromCompressedTimeMatchTheSweep) {
  for (uint32_t seed = 0; seed < 300; ++seed) {
    Problem p = testing::RandomProblem(2 + seed % 80, seed);
    const auto span = ScheduleSpan(p);
    for (size_t i = 0; i < seed % 4; ++i) {  // up to three spanning all
      p.buffers[i].start = span.first;
      p.buffers[i].end = span.second;
    }
    const Sections time = *CompressTime(p, nullptr);
    const InterferenceGraph want = *BuildInterferenceGraph(p, 1 << 20);
    absl::StatusOr<InterferenceGraph> got =
        BuildInterferenceGraph(p, 1 << 20, nullptr, {}, &time);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->num_edges(), want.num_edges()) << "seed " << seed;
    for (int i = 0; i < want.num_nodes(); ++i) {
      ASSERT_EQ(got->SpansAll(i), want.SpansAll(i));
      ASSERT_THAT(got->Neighbours(i),
                  ::testing::ElementsAreArray(want.Neighbours(i)));
    }
    if (want.num_edges() == 0) continue;
    const int64_t below = want.num_edges() - 1;
    EXPECT_EQ(BuildInterferenceGraph(p, below, nullptr, {}, &time).status(),
              BuildInterferenceGraph(p, below).status())
        << "seed " << seed;
  }
}

TEST(PoolColoringTest, NoPoolHoldsTwoInterferingBuffers) {
  for (uint32_t seed = 0; seed < 300; ++seed) {
    Problem p = testing::RandomProblem(1 + seed % 80, seed);
    InterferenceGraph g = *BuildInterferenceGraph(p, 1 << 20);
    SharedObjects objects = ColorSharedObjects(p, g);
    const int n = static_cast<int>(p.buffers.size());
    std::vector<Bytes> largest(objects.size.size(), 0);
    for (int i = 0; i < n; ++i) {
      const int object = objects.object_of[i];
      ASSERT_GE(object, 0);
      largest[object] = std::max(largest[object], p.buffers[i].size);
      for (int j = 0; j < n; ++j) {
        if (j != i && LifetimesOverlap(p.buffers[i], p.buffers[j])) {
          ASSERT_NE(objects.object_of[j], object) << "seed " << seed;
        }
      }
    }
    // Coloring from a time index gives the same objects as from the graph.
    SharedObjects indexed = ColorSharedObjects(p);
    EXPECT_EQ(indexed.object_of, objects.object_of);
    EXPECT_EQ(indexed.size, objects.size);
    EXPECT_EQ(largest,
              objects.size);  // a object is as big as its largest member
    EXPECT_GE(objects.TotalBytes(), LowerBound(p));
  }
}

TEST(PoolColoringTest, PaperExampleSharesObjects) {
  // Greedy by size on the paper's example: 64 ([5,7]) opens object 0, 40
  // ([7,8]) overlaps it and opens object 1, 32 ([0,1]) joins 64's object.
  Problem p;
  const int rows[8][3] = {{0, 1, 32}, {1, 4, 28}, {2, 5, 36}, {3, 5, 16},
                          {4, 5, 8},  {5, 7, 64}, {6, 8, 10}, {7, 8, 40}};
  for (auto& r : rows) p.buffers.push_back({"t", r[0], r[1] + 1, r[2]});
  SharedObjects objects =
      ColorSharedObjects(p, *BuildInterferenceGraph(p, 100));
  EXPECT_NE(objects.object_of[5], objects.object_of[7]);
  EXPECT_EQ(objects.object_of[5],
            objects.object_of[0]);  // 64 takes 32's object
  EXPECT_LT(objects.size.size(), 8u);
  EXPECT_LT(objects.TotalBytes(), NaiveBytes(p));
}

}  // namespace
}  // namespace memplan::planner
