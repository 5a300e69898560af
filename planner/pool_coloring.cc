#include "planner/pool_coloring.h"

#include <algorithm>
#include <numeric>

#include "planner/time_index.h"

namespace memplan::planner {
namespace {

// First-fit coloring in size order. `neighbour_pools(i, pool_of, mark)`
// calls mark(pool) for the pool of every colored buffer interfering with
// buffer i; `colored(i, pool)` hears of each choice. Buffers spanning the
// whole schedule get pools of their own after the shared ones.
template <typename NeighbourPoolsFn, typename ColoredFn>
Pools Color(const Problem& problem, NeighbourPoolsFn neighbour_pools,
            ColoredFn colored) {
  const auto& b = problem.buffers;
  const auto span = ScheduleSpan(problem);
  // Largest first, ties by index; packed keys sort in cache.
  std::vector<std::pair<Bytes, int>> keys(b.size());
  for (int i = 0; i < static_cast<int>(b.size()); ++i)
    keys[i] = {-b[i].size, i};
  std::sort(keys.begin(), keys.end());
  std::vector<int> order(b.size());
  for (size_t k = 0; k < keys.size(); ++k) order[k] = keys[k].second;
  Pools pools;
  pools.pool_of.assign(b.size(), -1);
  std::vector<int> taken_by;  // taken_by[p] == i: p holds a neighbour of i
  for (int i : order) {
    if (SpansAll(b[i], span)) continue;
    neighbour_pools(i, pools.pool_of, [&](int p) { taken_by[p] = i; });
    int pool = 0;
    while (pool < static_cast<int>(taken_by.size()) && taken_by[pool] == i) {
      ++pool;
    }
    if (pool == static_cast<int>(taken_by.size())) {
      taken_by.push_back(-1);
      pools.size.push_back(b[i].size);  // largest member: sorted by size
    }
    pools.pool_of[i] = pool;
    colored(i, pool);
  }
  for (int i : order) {
    if (pools.pool_of[i] >= 0) continue;
    pools.pool_of[i] = static_cast<int>(pools.size.size());
    pools.size.push_back(b[i].size);
  }
  return pools;
}

}  // namespace

Bytes Pools::TotalBytes() const {
  return std::accumulate(size.begin(), size.end(), Bytes{0});
}

Pools ColorPools(const Problem& problem, const InterferenceGraph& graph) {
  return Color(
      problem,
      [&](int i, const std::vector<int>& pool_of, auto mark) {
        for (int j : graph.Neighbours(i)) {
          if (pool_of[j] >= 0) mark(pool_of[j]);
        }
      },
      [](int, int) {});
}

Pools ColorPools(const Problem& problem) {
  const Sections time = CompressTime(problem);
  TimeIndex<int> colored(time);  // colored lifetimes with their pools
  return Color(
      problem,
      [&](int i, const std::vector<int>&, auto mark) {
        colored.ForEachOverlapping(i, mark);
      },
      [&](int i, int pool) { colored.Insert(i, pool); });
}

}  // namespace memplan::planner
