#include "planner/pool_coloring.h"

#include <algorithm>
#include <numeric>

namespace memplan::planner {

Bytes Pools::TotalBytes() const {
  return std::accumulate(size.begin(), size.end(), Bytes{0});
}

Pools ColorPools(const Problem& problem, const InterferenceGraph& graph) {
  const auto& b = problem.buffers;
  std::vector<int> order(b.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int x, int y) { return b[x].size > b[y].size; });
  Pools pools;
  pools.pool_of.assign(b.size(), -1);
  // taken_by[p] == i marks pool p as holding a neighbour of buffer i.
  std::vector<int> taken_by;
  for (int i : order) {
    for (int j : graph.Neighbours(i)) {
      if (int p = pools.pool_of[j]; p >= 0) taken_by[p] = i;
    }
    int pool = 0;
    while (pool < static_cast<int>(taken_by.size()) && taken_by[pool] == i) {
      ++pool;
    }
    if (pool == static_cast<int>(taken_by.size())) {
      taken_by.push_back(-1);
      pools.size.push_back(b[i].size);  // largest member: sorted by size
    }
    pools.pool_of[i] = pool;
  }
  return pools;
}

}  // namespace memplan::planner
