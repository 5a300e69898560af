#include "planner/shared_objects.h"

#include <algorithm>
#include <numeric>

#include "planner/time_index.h"

namespace memplan::planner {
namespace {

// First-fit coloring in size order. `neighbour_pools(i, object_of, mark)`
// calls mark(object) for the object of every colored buffer interfering with
// buffer i; `colored(i, object)` hears of each choice. Buffers spanning the
// whole schedule get objects of their own after the shared ones.
template <typename NeighbourPoolsFn, typename ColoredFn>
SharedObjects Color(const Problem& problem, NeighbourPoolsFn neighbour_pools,
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
  SharedObjects objects;
  objects.object_of.assign(b.size(), -1);
  std::vector<int> taken_by;  // taken_by[p] == i: p holds a neighbour of i
  for (int i : order) {
    if (SpansAll(b[i], span)) continue;
    neighbour_pools(i, objects.object_of, [&](int p) { taken_by[p] = i; });
    int object = 0;
    while (object < static_cast<int>(taken_by.size()) &&
           taken_by[object] == i) {
      ++object;
    }
    if (object == static_cast<int>(taken_by.size())) {
      taken_by.push_back(-1);
      objects.size.push_back(b[i].size);  // largest member: sorted by size
    }
    objects.object_of[i] = object;
    colored(i, object);
  }
  for (int i : order) {
    if (objects.object_of[i] >= 0) continue;
    objects.object_of[i] = static_cast<int>(objects.size.size());
    objects.size.push_back(b[i].size);
  }
  return objects;
}

}  // namespace

Bytes SharedObjects::TotalBytes() const {
  return std::accumulate(size.begin(), size.end(), Bytes{0});
}

SharedObjects ColorSharedObjects(const Problem& problem,
                                 const InterferenceGraph& graph) {
  return Color(
      problem,
      [&](int i, const std::vector<int>& object_of, auto mark) {
        for (int j : graph.Neighbours(i)) {
          if (object_of[j] >= 0) mark(object_of[j]);
        }
      },
      [](int, int) {});
}

SharedObjects ColorSharedObjects(const Problem& problem) {
  const Sections time = CompressTime(problem);
  TimeIndex<int> colored(time);  // colored lifetimes with their objects
  return Color(
      problem,
      [&](int i, const std::vector<int>&, auto mark) {
        colored.ForEachOverlapping(i, mark);
      },
      [&](int i, int object) { colored.Insert(i, object); });
}

}  // namespace memplan::planner
