// Small graphs the planner's tests share.
//
//   absl::StatusOr<Problem> p = AnalyzeLiveness(testing::IoChain(), 64);
#ifndef MEMPLAN_PLANNER_TESTING_GRAPHS_H_
#define MEMPLAN_PLANNER_TESTING_GRAPHS_H_

#include "planner/graph.h"

namespace memplan::planner::testing {

// x(100) -> a(10) -> b(10) -> c(10) -> y(100) over four steps: the graph
// input x is read by the first op only, the output y written by the last.
inline Graph IoChain() {
  Graph g;
  g.tensors = {{"x", 100}, {"a", 10}, {"b", 10}, {"c", 10}, {"y", 100}};
  g.ops = {{"op0", {"x"}, {"a"}},
           {"op1", {"a"}, {"b"}},
           {"op2", {"b"}, {"c"}},
           {"op3", {"c"}, {"y"}}};
  g.inputs = {"x"};
  g.outputs = {"y"};
  return g;
}

}  // namespace memplan::planner::testing

#endif  // MEMPLAN_PLANNER_TESTING_GRAPHS_H_
