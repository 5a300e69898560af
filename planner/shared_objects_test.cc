#include "planner/shared_objects.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "planner/interference.h"
#include "planner/sections.h"
#include "planner/testing/random_problems.h"

namespace memplan::planner {
namespace {

// No two buffers of a pool are live together; every pool holds its largest
// member's size.
void ExpectValid(const Problem& p, const SharedObjects& objects) {
  const int n = static_cast<int>(p.buffers.size());
  ASSERT_EQ(objects.object_of.size(), p.buffers.size());
  std::vector<Bytes> largest(objects.size.size(), 0);
  for (int i = 0; i < n; ++i) {
    const int pool = objects.object_of[i];
    ASSERT_GE(pool, 0);
    ASSERT_LT(pool, static_cast<int>(objects.size.size()));
    largest[pool] = std::max(largest[pool], p.buffers[i].size);
    for (int j = i + 1; j < n; ++j) {
      ASSERT_FALSE(pool == objects.object_of[j] &&
                   LifetimesOverlap(p.buffers[i], p.buffers[j]))
          << i << " and " << j << " share pool " << pool;
    }
  }
  EXPECT_EQ(largest, objects.size);
}

// Equal sizes are colored in start order, whatever their indices: b (the
// earliest) takes object 0, a (overlapping b) object 1, c (overlapping a
// only) object 0. In index order a would take 0 and c 1.
TEST(SharedObjectsTest, EqualSizesGoInStartOrder) {
  Problem p;
  p.buffers = {{"a", 2, 4, 64}, {"b", 0, 3, 64}, {"c", 3, 5, 64}};
  const std::vector<int> want = {1, 0, 0};
  absl::StatusOr<InterferenceGraph> graph =
      BuildInterferenceGraph(p, /*max_edges=*/100);
  ASSERT_TRUE(graph.ok());
  EXPECT_EQ(ColorSharedObjects(p, *graph).object_of, want);
  EXPECT_EQ(ColorSharedObjects(p).object_of, want);
}

// Dense problems (hundreds of overlaps per buffer) are colored from merged
// pool ranges; sparse ones by scanning neighbours: both as with the graph.
TEST(SharedObjectsTest, WithoutAGraphTheSamePoolsDenseOrSparse) {
  for (uint32_t seed = 0; seed < 12; ++seed) {
    const Problem p = seed % 2 ? testing::DenseProblem(1500 + 100 * seed, seed)
                               : testing::RandomProblem(1500, seed);
    absl::StatusOr<InterferenceGraph> graph =
        BuildInterferenceGraph(p, int64_t{1} << 30);
    ASSERT_TRUE(graph.ok());
    const SharedObjects with_graph = ColorSharedObjects(p, *graph);
    ExpectValid(p, with_graph);
    for (OverlapSearch search :
         {OverlapSearch::kAuto, OverlapSearch::kScan, OverlapSearch::kMerged}) {
      absl::StatusOr<SharedObjects> without =
          ColorSharedObjects(p, nullptr, search);
      ASSERT_TRUE(without.ok());
      EXPECT_EQ(with_graph.object_of, without->object_of)
          << "seed " << seed << " search " << static_cast<int>(search);
      EXPECT_EQ(with_graph.size, without->size) << "seed " << seed;
    }
  }
}

// 200,000 buffers sharing one lifetime (issue 10): each needs a pool of its
// own. Quadratic before (every buffer scanned every colored one).
TEST(SharedObjectsTest, OneSharedLifetimeIsNotQuadratic) {
  Problem p;
  for (int i = 0; i < 200000; ++i) {
    p.buffers.push_back({"b" + std::to_string(i), 0, 10, 1 + i % 100});
  }
  p.buffers.push_back({"after", 10, 11, 1000});
  const SharedObjects objects = ColorSharedObjects(p);
  EXPECT_EQ(objects.size.size(), 200000u);
  EXPECT_EQ(objects.object_of.back(), 0);  // shares the largest one's pool
}

// What the colorings of one problem start from: its interference graph,
// the one pass's objects with it, and its compressed time.
struct ColoringInputs {
  explicit ColoringInputs(const Problem& p)
      : graph(BuildInterferenceGraph(p, int64_t{1} << 24)),
        want(graph.ok() ? ColorSharedObjects(p, *graph) : SharedObjects{}),
        time(CompressTime(p)) {}
  absl::StatusOr<InterferenceGraph> graph;
  SharedObjects want;
  absl::StatusOr<Sections> time;
};

// Large problems are colored window by window (windows.h): the objects
// of the one pass, with and without workers.
TEST(SharedObjectsTest, WindowByWindowTheSameObjects) {
  Problem p = testing::RandomProblem(70000, 5, 64);
  const auto span = ScheduleSpan(p);
  p.buffers[3].start = span.first;  // one spanning the schedule too
  p.buffers[3].end = span.second;
  const ColoringInputs in(p);
  ASSERT_TRUE(in.graph.ok()) << in.graph.status();
  ASSERT_TRUE(in.time.ok());
  base::WorkerPool pool(3, 64);
  for (base::WorkerPool* workers : {&pool, (base::WorkerPool*)nullptr}) {
    absl::StatusOr<SharedObjects> got =
        ColorSharedObjects(p, *in.graph, nullptr, &*in.time, {workers, 4});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->object_of, in.want.object_of);
    EXPECT_EQ(got->size, in.want.size);
    // Without a graph, the scan by windows.
    got = ColorSharedObjects(p, nullptr, &*in.time, {workers, 4});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->object_of, in.want.object_of);
    EXPECT_EQ(got->size, in.want.size);
  }
}

// With the plan's size order at hand (greedy.h), the coloring takes it
// (sorting it into the cache when first) and gives the same objects, one
// pass or window by window, with a graph or without.
TEST(SharedObjectsTest, ASharedSizeOrderGivesTheSameObjects) {
  base::CancelToken cancelled;
  cancelled.Cancel();
  for (int n : {2000, 70000}) {
    const Problem p = testing::RandomProblem(n, 9, 64);
    const ColoringInputs in(p);
    ASSERT_TRUE(in.graph.ok()) << in.graph.status();
    ASSERT_TRUE(in.time.ok());
    for (bool with_graph : {true, false}) {
      SizeOrderCache cache(&p);
      absl::StatusOr<SharedObjects> got =
          with_graph
              ? ColorSharedObjects(p, *in.graph, nullptr, &*in.time, {}, &cache)
              : ColorSharedObjects(p, nullptr, &*in.time, {}, &cache);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->object_of, in.want.object_of) << n << " " << with_graph;
      EXPECT_EQ(got->size, in.want.size) << n << " " << with_graph;
      EXPECT_TRUE(cache.Get(&cancelled, {}).ok()) << n << " " << with_graph;
    }
  }
}

}  // namespace
}  // namespace memplan::planner
