#include "planner/shared_objects.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "planner/gap.h"
#include "planner/gap_index.h"
#include "planner/sections.h"
#include "planner/sort.h"
#include "planner/time_index.h"

namespace memplan::planner {
namespace {

// Units of work between polls of the cancel token (a unit: a neighbour
// visited or a range read; a buffer colored counts kBufferWork).
constexpr int64_t kCancelWork = 1 << 16;
constexpr int64_t kBufferWork = 16;
// Above this many overlapping buffers per buffer on average, coloring
// reads merged object ranges from a GapIndex instead of scanning neighbours.
constexpr int64_t kDenseOverlaps = 128;

absl::Status Cancelled() {
  return absl::DeadlineExceededError("shared object coloring cancelled");
}

// Buffers largest first, ties by index; packed keys sort in cache.
absl::StatusOr<std::vector<int>> BySize(const Problem& problem,
                                        const CancelToken* cancel) {
  const auto& b = problem.buffers;
  std::vector<std::pair<Bytes, int>> keys(b.size());
  for (int i = 0; i < static_cast<int>(b.size()); ++i)
    keys[i] = {-b[i].size, i};
  if (!SortOrCancel(keys.begin(), keys.end(), std::less<>(), cancel)) {
    return Cancelled();
  }
  std::vector<int> order(b.size());
  for (size_t k = 0; k < keys.size(); ++k) order[k] = keys[k].second;
  return order;
}

// One buffer to color, gathered in size order so the coloring loop reads
// memory in sequence.
struct Request {
  int index;  // in problem.buffers
  int lo;     // its first section
  int hi;     // one past its last
};

// First-fit coloring in size order. `lowest_free(r)` returns the lowest
// object holding no colored buffer that interferes with request r (the
// number of objects when all do) and the work it took; `colored(r, object)`
// hears of each choice. Buffers spanning the whole schedule get objects of
// their own after the shared ones.
template <typename LowestFreeFn, typename ColoredFn>
absl::StatusOr<SharedObjects> Color(const Problem& problem,
                                    const Sections& time,
                                    const CancelToken* cancel,
                                    LowestFreeFn lowest_free,
                                    ColoredFn colored) {
  const auto& b = problem.buffers;
  const auto span = ScheduleSpan(problem);
  absl::StatusOr<std::vector<int>> order = BySize(problem, cancel);
  if (!order.ok()) return order.status();
  std::vector<Request> requests;
  requests.reserve(order->size());
  for (int i : *order) {
    if (!SpansAll(b[i], span))
      requests.push_back({i, time.first[i], time.last[i]});
  }
  SharedObjects objects;
  objects.object_of.assign(b.size(), -1);
  int64_t work = 0, next_poll = kCancelWork;
  for (const Request& r : requests) {
    const auto [object, units] = lowest_free(r, objects.object_of);
    if ((work += kBufferWork + units) >= next_poll) {
      next_poll = work + kCancelWork;
      if (cancel != nullptr && cancel->Cancelled()) return Cancelled();
    }
    if (object == static_cast<int>(objects.size.size())) {
      objects.size.push_back(b[r.index].size);  // largest member: by size
    }
    objects.object_of[r.index] = object;
    colored(r, object);
  }
  for (int i : *order) {
    if (objects.object_of[i] >= 0) continue;
    objects.object_of[i] = static_cast<int>(objects.size.size());
    objects.size.push_back(b[i].size);
  }
  return objects;
}

// The lowest object not marked by `mark_neighbours(i, mark)`, with the work
// it took. `taken_by` has an entry per object (taken_by[p] == i: p holds a
// neighbour of i).
template <typename MarkFn>
std::pair<int, int64_t> LowestUnmarked(int i, std::vector<int>* taken_by,
                                       MarkFn mark_neighbours) {
  const int objects = static_cast<int>(taken_by->size());
  int64_t units = 0;
  mark_neighbours(i, [&](int p) {
    (*taken_by)[p] = i;
    ++units;
  });
  int object = 0;
  while (object < objects && (*taken_by)[object] == i) ++object;
  return {object, units};
}

// True when buffers overlap more than kDenseOverlaps others on average.
bool IsDense(const Sections& time) {
  int64_t total = 0;
  std::vector<int64_t> started(time.size() + 2, 0), ended(time.size() + 2, 0);
  for (size_t i = 0; i < time.first.size(); ++i) {
    ++started[time.first[i] + 1];
    ++ended[time.last[i]];
  }
  for (size_t x = 1; x < started.size(); ++x) {
    started[x] += started[x - 1];
    ended[x] += ended[x - 1];
  }
  for (size_t i = 0; i < time.first.size(); ++i) {
    total += started[time.last[i]] - ended[time.first[i]] - 1;
  }
  return total > kDenseOverlaps * static_cast<int64_t>(time.first.size());
}

}  // namespace

Bytes SharedObjects::TotalBytes() const {
  return std::accumulate(size.begin(), size.end(), Bytes{0});
}

absl::StatusOr<SharedObjects> ColorSharedObjects(const Problem& problem,
                                                 const InterferenceGraph& graph,
                                                 const CancelToken* cancel) {
  // Sections are not needed with a graph: every request gets [0, 1).
  Sections none;
  none.first.assign(problem.buffers.size(), 0);
  none.last.assign(problem.buffers.size(), 1);
  std::vector<int> taken_by;  // one entry per object
  return Color(
      problem, none, cancel,
      [&](const Request& r, const std::vector<int>& object_of) {
        return LowestUnmarked(r.index, &taken_by, [&](int q, auto mark) {
          for (int j : graph.Neighbours(q)) {
            if (object_of[j] >= 0) mark(object_of[j]);
          }
        });
      },
      [&](const Request&, int object) {
        if (object == static_cast<int>(taken_by.size())) taken_by.push_back(-1);
      });
}

absl::StatusOr<SharedObjects> ColorSharedObjects(const Problem& problem,
                                                 const CancelToken* cancel) {
  absl::StatusOr<Sections> time = CompressTime(problem, cancel);
  if (!time.ok()) return time.status();
  if (IsDense(*time)) {
    // Objects as unit slots of an address space: the lowest object free
    // during a lifetime is the first fit of a 1-byte buffer.
    GapIndex merged(time->size());
    return Color(
        problem, *time, cancel,
        [&](const Request& r, const std::vector<int>&) {
          const int64_t read = merged.ranges_read();
          const std::vector<TakenRange>& taken = merged.Taken(r.lo, r.hi);
          const Offset object = FindGap(taken, 1, 1, FitPolicy::kFirstFit, 0);
          return std::make_pair(static_cast<int>(object),
                                merged.ranges_read() - read);
        },
        [&](const Request& r, int object) {
          merged.Insert(r.lo, r.hi, {object, object + 1});
        });
  }
  TimeIndex<int> colored(*time);  // colored lifetimes with their objects
  std::vector<int> taken_by;      // one entry per object
  return Color(
      problem, *time, cancel,
      [&](const Request& r, const std::vector<int>&) {
        return LowestUnmarked(r.index, &taken_by, [&](int, auto mark) {
          colored.ForEachOverlapping(r.lo, r.hi, mark);
        });
      },
      [&](const Request& r, int object) {
        if (object == static_cast<int>(taken_by.size())) taken_by.push_back(-1);
        colored.Insert(r.lo, r.hi, object);
      });
}

SharedObjects ColorSharedObjects(const Problem& problem,
                                 const InterferenceGraph& graph) {
  return *ColorSharedObjects(problem, graph, nullptr);
}

SharedObjects ColorSharedObjects(const Problem& problem) {
  return *ColorSharedObjects(problem, nullptr);
}

}  // namespace memplan::planner
