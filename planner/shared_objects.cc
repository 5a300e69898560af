#include "planner/shared_objects.h"

#include <algorithm>
#include <atomic>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "planner/gap.h"
#include "planner/gap_index.h"
#include "planner/sections.h"
#include "planner/sweep.h"
#include "planner/time_index.h"
#include "planner/windows.h"
#include "planner/work_cap.h"

namespace memplan::planner {
namespace {

// Units of work (base::WorkMeter's: a neighbour visited, a range read) a buffer
// colored counts.
constexpr int64_t kBufferWork = 16;

// The coloring's work cap, in FirstPlanWorkCap's. A unit here (an array
// slot marked; a merged range read counts kMergedReadCost) costs 3-7 ns, a
// quarter to a third of a placement's, and the time-order coloring it falls
// back to is much worse on real traces than on dense ones (S_1: 1.74 x the
// lower bound against 1.49; pangu: 4.1 against 1.27), so the cap is
// generous: S_1 colors in 44M units, under the 64M floor.
constexpr int64_t kCapScale = 4;

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
absl::StatusOr<SharedObjects> Color(
    const Problem& problem, const Sections& time,
    const base::CancelToken* cancel, int64_t work_cap,
    SizeOrderCache* size_order, LowestFreeFn lowest_free, ColoredFn colored) {
  const auto& b = problem.buffers;
  const auto span = ScheduleSpan(problem);
  // Largest first, ties by earliest start (greedy placement's size order):
  // equal sizes are colored in time order, so the TimeIndex lists a
  // coloring reads stay in cache (1M random buffers: 60 distinct sizes).
  std::vector<int> own_order;
  absl::StatusOr<const std::vector<int>*> order =
      SizeOrder(problem, size_order, cancel, {}, &own_order);
  if (absl::IsDeadlineExceeded(order.status())) {
    return absl::DeadlineExceededError("shared object coloring cancelled");
  }
  if (!order.ok()) return order.status();
  std::vector<Request> requests;
  requests.reserve((*order)->size());
  for (int i : **order) {
    if (!SpansAll(b[i], span))
      requests.push_back({i, time.first[i], time.last[i]});
  }
  SharedObjects objects;
  objects.object_of.assign(b.size(), -1);
  base::WorkMeter meter(cancel, work_cap);
  const int64_t total = static_cast<int64_t>(requests.size());
  int64_t done = 0;
  for (const Request& r : requests) {
    const auto [object, units] = lowest_free(r, objects.object_of);
    if (meter.Stop(kBufferWork + units, ++done, total))
      return meter.StopStatus("shared object coloring");
    if (object == static_cast<int>(objects.size.size())) {
      objects.size.push_back(b[r.index].size);  // largest member: by size
    }
    objects.object_of[r.index] = object;
    colored(r, object);
  }
  for (int i : **order) {
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

// A range read from a GapIndex (iterating a btree, then sorting) costs
// about this many neighbours visited by a scan (marking an array).
constexpr int64_t kMergedReadCost = 8;

// Finds the lowest free object either way: from merged object ranges (a
// GapIndex: cheap when the objects busy during a lifetime form few runs,
// e.g. thousands of buffers sharing one lifetime) or by scanning the
// colored neighbours (a TimeIndex: cheap when they are few). Starts merged
// and switches to the scan for good once the merged reads cost more than
// the scan would have (estimated from the overlap counts): the choice
// depends on work, never on time, and both give the same objects.
class ObjectFinder {
 public:
  // `merged`: start merged; `adaptive`: may switch to the scan.
  ObjectFinder(const Sections& time, bool merged, bool adaptive)
      : merged_(merged ? std::make_optional<GapIndex>(time.size())
                       : std::nullopt),
        colored_(time),
        adaptive_(adaptive) {
    if (merged) overlaps_ = OverlapCounts(time);
    requests_ = static_cast<int64_t>(time.first.size());
  }

  // The lowest object free during r's lifetime and the work it took.
  std::pair<int, int64_t> LowestFree(const Request& r) {
    if (!merged_) {
      return LowestUnmarked(r.index, &taken_by_, [&](int, auto mark) {
        colored_.ForEachOverlapping(r.lo, r.hi, mark);
      });
    }
    const int64_t read = merged_->ranges_read();
    const Offset object = merged_->FirstFit(r.lo, r.hi, 1, 1, 0);
    const int64_t work = kMergedReadCost * (merged_->ranges_read() - read);
    // A scan would visit the colored neighbours: about this many (the
    // colored share of its overlapping buffers).
    scan_estimate_ += overlaps_[r.index] * done_ / requests_;
    if (++done_ > 256 && adaptive_ &&
        kMergedReadCost * merged_->ranges_read() > scan_estimate_) {
      merged_.reset();  // the scan is cheaper here: keep to it
    }
    return {static_cast<int>(object), work};
  }

  void Colored(const Request& r, int object) {
    if (object == static_cast<int>(taken_by_.size())) taken_by_.push_back(-1);
    colored_.Insert(r.lo, r.hi, object);
    if (merged_) merged_->Insert(r.lo, r.hi, {object, object + 1});
  }

 private:
  std::optional<GapIndex> merged_;  // while the merged search pays
  TimeIndex<int> colored_;          // colored lifetimes with their objects
  std::vector<int> taken_by_;       // one entry per object
  bool adaptive_;                   // may leave the merged search
  std::vector<int64_t> overlaps_;   // per buffer (merged only)
  int64_t requests_ = 1;            // buffers to color
  int64_t done_ = 0;                // buffers colored through merged_
  int64_t scan_estimate_ = 0;       // what scans would have cost so far
};

}  // namespace

Bytes SharedObjects::TotalBytes() const {
  return std::accumulate(size.begin(), size.end(), Bytes{0});
}

namespace {

// The one-pass coloring with the graph, the size order from `size_order`
// (may be null) when it holds the problem's.
absl::StatusOr<SharedObjects> ColorWithGraph(const Problem& problem,
                                             const InterferenceGraph& graph,
                                             const base::CancelToken* cancel,
                                             SizeOrderCache* size_order) {
  // Sections are not needed with a graph: every request gets [0, 1).
  Sections none;
  none.first.assign(problem.buffers.size(), 0);
  none.last.assign(problem.buffers.size(), 1);
  std::vector<int> taken_by;  // one entry per object
  return Color(
      problem, none, cancel, /*work_cap=*/0, size_order,
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

// Buffers a window colors between two polls of the token.
constexpr int kColorPollStride = 4096;

// The lowest object none of i's neighbours holds, with `taken_by` as
// LowestUnmarked's (grown as needed). Neighbours not yet colored hold -1.
int LowestFreeObject(const InterferenceGraph& graph,
                     const std::vector<int>& object_of, int i,
                     std::vector<int>* taken_by) {
  for (int j : graph.Neighbours(i)) {
    const int p = object_of[j];
    if (p < 0) continue;
    if (p >= static_cast<int>(taken_by->size())) taken_by->resize(p + 1, -1);
    (*taken_by)[p] = i;
  }
  int object = 0;
  while (object < static_cast<int>(taken_by->size()) &&
         (*taken_by)[object] == i) {
    ++object;
  }
  return object;
}

// The end of a windowed coloring of `colored` (a part of `order`; every
// other buffer's object is still -1): each object as large as its largest
// member, read in list order (a pass sequential in memory), then an object
// of its own for every buffer left uncolored (one live over all of time),
// in `order`.
void FinishObjects(const std::vector<Buffer>& b,
                   const std::vector<int>& colored,
                   const std::vector<int>& order, SharedObjects* objects) {
  for (size_t i = 0; i < b.size(); ++i) {
    const int p = objects->object_of[i];
    if (p < 0) continue;
    if (static_cast<size_t>(p) >= objects->size.size()) {
      objects->size.resize(p + 1, 0);
    }
    objects->size[p] = std::max(objects->size[p], b[i].size);
  }
  if (colored.size() == order.size()) return;  // every buffer colored
  for (int i : order) {
    if (objects->object_of[i] >= 0) continue;
    objects->object_of[i] = static_cast<int>(objects->size.size());
    objects->size.push_back(b[i].size);
  }
}

// The coloring of Color with the graph, window by window (windows.h): the
// first-fit object of a buffer is the lowest one none of its colored
// neighbours holds, and its neighbours all touch its windows, so the
// objects are those of the one pass, on any number of threads.
absl::StatusOr<SharedObjects> ColorByWindows(const Problem& problem,
                                             const InterferenceGraph& graph,
                                             const Sections& time,
                                             const TimeWindows& windows,
                                             const base::CancelToken* cancel,
                                             const base::Parallelism& parallel,
                                             SizeOrderCache* size_order) {
  const auto& b = problem.buffers;
  std::vector<int> own_order;
  absl::StatusOr<const std::vector<int>*> order =
      SizeOrder(problem, size_order, cancel, parallel, &own_order);
  if (absl::IsDeadlineExceeded(order.status())) {
    return absl::DeadlineExceededError("shared object coloring cancelled");
  }
  if (!order.ok()) return order.status();
  const std::vector<int>& by_size = **order;
  std::vector<int> to_color;
  to_color.reserve(by_size.size());
  for (int i : by_size) {
    if (!graph.SpansAll(i)) to_color.push_back(i);
  }
  WindowedPass pass(time, windows, to_color, parallel);
  SharedObjects objects;
  objects.object_of.assign(b.size(), -1);
  std::vector<std::vector<int>> taken_by(windows.count());
  std::vector<int> colored(windows.count(), 0);  // since the last poll
  const auto color = [&](int w, int i) {
    objects.object_of[i] =
        LowestFreeObject(graph, objects.object_of, i, &taken_by[w]);
    if (++colored[w] < kColorPollStride) return true;
    colored[w] = 0;
    return cancel == nullptr || !cancel->Cancelled();
  };
  if (!pass.Run(parallel, color,
                [&](int wa, int, int i) { return color(wa, i); })) {
    return absl::DeadlineExceededError("shared object coloring cancelled");
  }
  FinishObjects(b, to_color, by_size, &objects);
  return objects;
}

// Work units a window adds up before it adds them to the shared count and
// polls the token.
constexpr int64_t kWindowWorkBatch = 1 << 14;

// One window of the graphless coloring by windows: its entries' sections
// cut to it, and the colored lifetimes in it with their objects.
struct ColoringWindow {
  Sections time;                        // per entry: its cut range
  std::optional<TimeIndex<int>> index;  // colored, with their objects
  std::vector<int> taken_by;            // one entry per object seen
  size_t cursor = 0;                    // the next entry
  int64_t unflushed = 0;                // work not yet in the shared count
};

// The scan coloring (a TimeIndex of colored lifetimes) window by window
// (windows.h): a buffer's object is the lowest none of its colored
// neighbours holds, and they all touch its windows, so the objects are
// those of the one pass. The work cap is kept on the total work, the same
// on any threads: RESOURCE_EXHAUSTED past it.
absl::StatusOr<SharedObjects> ColorScanByWindows(
    const Problem& problem, const Sections& time, const TimeWindows& windows,
    const base::CancelToken* cancel, int64_t work_cap,
    const base::Parallelism& parallel, SizeOrderCache* size_order) {
  const auto& b = problem.buffers;
  std::vector<int> own_order;
  absl::StatusOr<const std::vector<int>*> order =
      SizeOrder(problem, size_order, cancel, parallel, &own_order);
  if (absl::IsDeadlineExceeded(order.status())) {
    return absl::DeadlineExceededError("shared object coloring cancelled");
  }
  if (!order.ok()) return order.status();
  const std::vector<int>& by_size = **order;
  int64_t spanning = 0;
  const std::vector<uint8_t> spans =
      SpanningBuffers(problem, parallel, &spanning);
  std::vector<int> to_color;
  if (spanning == 0) {
    to_color = by_size;
  } else {
    to_color.reserve(by_size.size());
    for (int i : by_size) {
      if (spans[i] == 0) to_color.push_back(i);
    }
  }
  WindowedPass pass(time, windows, to_color, parallel);
  std::vector<ColoringWindow> state(windows.count());
  std::atomic<bool> set_up{true};  // false once a set-up saw the cancel
  base::ParallelFor(parallel, windows.count(), [&](int w) {
    ColoringWindow& s = state[w];
    const int lo = windows.begin[w], hi = windows.begin[w + 1];
    s.time.begin.resize(static_cast<size_t>(hi - lo));
    const std::vector<WindowedPass::Entry>& entries = pass.entries(w);
    for (size_t k = 0; k < entries.size(); ++k) {
      if (k % base::kPollStride == 0 &&
          (!set_up.load(std::memory_order_relaxed) ||
           (cancel != nullptr && cancel->Cancelled()))) {
        set_up = false;
        return;
      }
      const int i = entries[k].buffer;
      s.time.first.push_back(std::max(time.first[i], lo) - lo);
      s.time.last.push_back(std::min(time.last[i], hi) - lo);
    }
    s.index.emplace(s.time);
  });
  if (!set_up) {
    return absl::DeadlineExceededError("shared object coloring cancelled");
  }
  SharedObjects objects;
  objects.object_of.assign(b.size(), -1);
  std::atomic<int64_t> total_work{0};
  std::atomic<bool> capped{false};
  const auto charge = [&](ColoringWindow& s, int64_t units) {
    if ((s.unflushed += units) < kWindowWorkBatch) return true;
    const int64_t total = total_work.fetch_add(s.unflushed) + s.unflushed;
    s.unflushed = 0;
    if (work_cap > 0 && total > work_cap) {
      capped = true;
      return false;
    }
    return cancel == nullptr || !cancel->Cancelled();
  };
  // Marks in `taken_by` the objects of buffer i's colored neighbours in
  // window s; the marks made.
  const auto mark = [](ColoringWindow& s, std::vector<int>* taken_by, int i) {
    const size_t k = s.cursor;
    int64_t units = 0;
    s.index->ForEachOverlapping(s.time.first[k], s.time.last[k], [&](int p) {
      if (p >= static_cast<int>(taken_by->size())) taken_by->resize(p + 1, -1);
      (*taken_by)[p] = i;
      ++units;
    });
    return units;
  };
  const auto lowest = [](const std::vector<int>& taken_by, int i) {
    int object = 0;
    while (object < static_cast<int>(taken_by.size()) &&
           taken_by[object] == i) {
      ++object;
    }
    return object;
  };
  const auto insert = [](ColoringWindow& s, int object) {
    const size_t k = s.cursor++;
    s.index->Insert(s.time.first[k], s.time.last[k], object);
  };
  const bool done = pass.Run(
      parallel,
      [&](int w, int i) {
        ColoringWindow& s = state[w];
        const int64_t units = mark(s, &s.taken_by, i);
        if (!charge(s, kBufferWork + units)) return false;
        objects.object_of[i] = lowest(s.taken_by, i);
        insert(s, objects.object_of[i]);
        return true;
      },
      [&](int wa, int wb, int i) {
        std::vector<int>* taken_by = &state[wa].taken_by;
        int64_t units = 0;
        for (int w = wa; w <= wb; ++w) units += mark(state[w], taken_by, i);
        if (!charge(state[wa], kBufferWork + units)) return false;
        objects.object_of[i] = lowest(*taken_by, i);
        for (int w = wa; w <= wb; ++w) insert(state[w], objects.object_of[i]);
        return true;
      });
  int64_t total = total_work.load();
  for (const ColoringWindow& s : state) total += s.unflushed;
  if (capped || (done && work_cap > 0 && total > work_cap)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "shared object coloring passed its work cap (", work_cap, " units)"));
  }
  if (!done) {
    return absl::DeadlineExceededError("shared object coloring cancelled");
  }
  FinishObjects(b, to_color, by_size, &objects);
  return objects;
}

}  // namespace

absl::StatusOr<SharedObjects> ColorSharedObjects(
    const Problem& problem, const InterferenceGraph& graph,
    const base::CancelToken* cancel) {
  return ColorWithGraph(problem, graph, cancel, nullptr);
}

absl::StatusOr<SharedObjects> ColorSharedObjects(
    const Problem& problem, const InterferenceGraph& graph,
    const base::CancelToken* cancel, const Sections* time,
    const base::Parallelism& parallel, SizeOrderCache* size_order) {
  if (time != nullptr) {
    const TimeWindows windows = CutTime(*time);
    if (windows.count() > 1) {
      return ColorByWindows(problem, graph, *time, windows, cancel, parallel,
                            size_order);
    }
  }
  return ColorWithGraph(problem, graph, cancel, size_order);
}

absl::StatusOr<SharedObjects> ColorSharedObjects(
    const Problem& problem, const base::CancelToken* cancel) {
  return ColorSharedObjects(problem, cancel, nullptr);
}

absl::StatusOr<SharedObjects> ColorSharedObjects(
    const Problem& problem, const base::CancelToken* cancel,
    const Sections* time) {
  return ColorSharedObjects(problem, cancel, time, {});
}

absl::StatusOr<SharedObjects> ColorSharedObjects(
    const Problem& problem, const base::CancelToken* cancel,
    const Sections* time, const base::Parallelism& parallel,
    SizeOrderCache* size_order) {
  absl::StatusOr<SharedObjects> colored = ColorSharedObjects(
      problem, cancel, OverlapSearch::kAuto,
      kCapScale *
          FirstPlanWorkCap(static_cast<int64_t>(problem.buffers.size())),
      time, parallel, size_order);
  if (!absl::IsResourceExhausted(colored.status())) return colored;
  return SweepSharedObjects(problem, cancel, time);
}

absl::StatusOr<SharedObjects> ColorSharedObjects(
    const Problem& problem, const base::CancelToken* cancel,
    OverlapSearch search, int64_t work_cap, const Sections* given,
    const base::Parallelism& parallel, SizeOrderCache* size_order) {
  Sections own;
  absl::StatusOr<const Sections*> compressed =
      CompressedTime(problem, given, &own, cancel);
  if (!compressed.ok()) return compressed.status();
  const Sections* time = *compressed;
  const bool merged = search == OverlapSearch::kAuto
                          ? MostlyOverlapping(*time)
                          : search == OverlapSearch::kMerged;
  if (!merged) {  // the scan alone: cut into windows when large
    const TimeWindows windows = CutTime(*time);
    if (windows.count() > 1) {
      return ColorScanByWindows(problem, *time, windows, cancel, work_cap,
                                parallel, size_order);
    }
  }
  ObjectFinder finder(*time, merged, search == OverlapSearch::kAuto);
  return Color(
      problem, *time, cancel, work_cap, size_order,
      [&](const Request& r, const std::vector<int>&) {
        return finder.LowestFree(r);
      },
      [&](const Request& r, int object) { finder.Colored(r, object); });
}

SharedObjects ColorSharedObjects(const Problem& problem,
                                 const InterferenceGraph& graph) {
  return *ColorSharedObjects(problem, graph, nullptr);
}

SharedObjects ColorSharedObjects(const Problem& problem) {
  return *ColorSharedObjects(problem, nullptr);
}

}  // namespace memplan::planner
