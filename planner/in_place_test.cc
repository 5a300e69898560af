#include "planner/in_place.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/liveness.h"

namespace memplan::planner {
namespace {

// x -> relu -> a -> relu -> b -> relu -> c -> out -> y: a chain of
// elementwise ops that may each work in place.
Graph ChainGraph(bool in_place) {
  Graph g;
  g.tensors = {{"x", 64}, {"a", 256}, {"b", 256}, {"c", 128}, {"y", 64}};
  g.ops = {{"r0", {"x"}, {"a"}, in_place},
           {"r1", {"a"}, {"b"}, in_place},
           {"r2", {"b"}, {"c"}, in_place},
           {"out", {"c"}, {"y"}, in_place}};
  g.inputs = {"x"};
  g.outputs = {"y"};
  return g;
}

TEST(InPlaceTest, ChainSharesOneBufferSpanningEveryMember) {
  Graph g = ChainGraph(true);
  absl::StatusOr<Problem> tensors = AnalyzeLiveness(g, 64);
  ASSERT_TRUE(tensors.ok());
  InPlaceMerge m = MergeInPlace(g, *tensors);
  // a <- b <- c share a's buffer; x (graph input) and y (output) do not.
  ASSERT_EQ(m.aliases.size(), 2u);
  EXPECT_EQ(m.aliases[0].tensor, 2);  // b in place of a
  EXPECT_EQ(m.aliases[0].input, 1);
  EXPECT_EQ(m.aliases[1].tensor, 3);  // c in place of b
  EXPECT_EQ(m.aliases[1].input, 2);
  ASSERT_EQ(m.problem.buffers.size(), 3u);  // x, a(+b+c), y
  EXPECT_EQ(m.problem.buffers[1].name, "a");
  EXPECT_EQ(m.problem.buffers[1].start, 0);
  EXPECT_EQ(m.problem.buffers[1].end, 4);  // c's last reader is step 3
  EXPECT_EQ(m.problem.buffers[1].size, 256);
  EXPECT_THAT(m.buffer_of, ::testing::ElementsAre(0, 1, 1, 1, 2));
}

TEST(InPlaceTest, NothingMergesWithoutTheFlag) {
  Graph g = ChainGraph(false);
  InPlaceMerge m = MergeInPlace(g, *AnalyzeLiveness(g, 64));
  EXPECT_TRUE(m.aliases.empty());
  EXPECT_EQ(m.problem.buffers.size(), 5u);
}

TEST(InPlaceTest, RefusedWhenTheInputIsReadLaterOrTooSmallOrAligned) {
  Graph g;
  g.tensors = {{"x", 64},  {"a", 128}, {"b", 128}, {"c", 256},
               {"d", 128}, {"e", 64},  {"y", 64}};
  g.ops = {{"p", {"x"}, {"a"}},
           {"q", {"a"}, {"b"}, true},       // a is read again by s: no
           {"r", {"b"}, {"c"}, true},       // c larger than b: no
           {"s", {"a", "c"}, {"d"}, true},  // a dies here: d takes a
           {"t", {"d"}, {"e"}, true},       // e's alignment differs: no
           {"u", {"e"}, {"y"}, true}};      // y is a graph output: no
  g.tensors[5].alignment = 128;
  g.inputs = {"x"};
  g.outputs = {"y"};
  InPlaceMerge m = MergeInPlace(g, *AnalyzeLiveness(g, 64));
  ASSERT_EQ(m.aliases.size(), 1u);
  EXPECT_EQ(g.tensors[m.aliases[0].tensor].name, "d");
  EXPECT_EQ(g.tensors[m.aliases[0].input].name, "a");
}

TEST(InPlaceTest, AnInputIsReusedByOneOutputOnly) {
  Graph g;
  g.tensors = {{"x", 64}, {"a", 128}, {"b", 128}, {"c", 128}, {"y", 64}};
  g.ops = {{"p", {"x"}, {"a"}},
           {"split", {"a"}, {"b", "c"}, true},
           {"join", {"b", "c"}, {"y"}}};
  g.inputs = {"x"};
  g.outputs = {"y"};
  InPlaceMerge m = MergeInPlace(g, *AnalyzeLiveness(g, 64));
  ASSERT_EQ(m.aliases.size(), 1u);
  EXPECT_EQ(g.tensors[m.aliases[0].tensor].name, "b");
}

}  // namespace
}  // namespace memplan::planner
