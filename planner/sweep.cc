#include "planner/sweep.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <limits>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/sort.h"
#include "planner/gap.h"
#include "planner/greedy.h"
#include "planner/sections.h"
#include "planner/validate.h"

namespace memplan::planner {
namespace {

// Units of work (base::WorkMeter's) a buffer counts: a few tree operations.
constexpr int64_t kBufferWork = 16;

// Free ranges a request tries at its size before it asks for room for its
// worst alignment padding (which any range that large holds).
constexpr int kAlignedTries = 8;

absl::Status Cancelled(const char* what) {
  return absl::DeadlineExceededError(absl::StrCat(what, " (sweep) cancelled"));
}

// The buffers to plan, in sweep order: by first section, largest first,
// then by index; and the same buffers by the section they end in.
struct SweepOrder {
  const Sections* time = nullptr;  // the problem's compressed time
  std::vector<int> by_start;
  std::vector<int> by_end;
};

// What both sweeps set up first: the compressed time (`given`, or computed
// into `*own`) and `buffers` in the order the sweep meets them.
absl::StatusOr<SweepOrder> OrderFor(const Problem& problem,
                                    const Sections* given, Sections* own,
                                    const std::vector<int>& buffers,
                                    const base::CancelToken* cancel) {
  absl::StatusOr<const Sections*> compressed =
      CompressedTime(problem, given, own, cancel);
  if (!compressed.ok()) return compressed.status();
  const Sections& time = **compressed;
  const auto& b = problem.buffers;
  struct Key {
    int section;
    Bytes size;  // negated: largest first
    int index;
  };
  std::vector<Key> starts;
  std::vector<Key> ends;
  starts.reserve(buffers.size());
  ends.reserve(buffers.size());
  for (int i : buffers) {
    starts.push_back({time.first[i], -b[i].size, i});
    ends.push_back({time.last[i], 0, i});
  }
  if (!base::RadixSortOrCancel(
          &starts, [](const Key& k) { return base::SignedKey(k.size); },
          cancel) ||
      !base::RadixSortOrCancel(
          &starts, [](const Key& k) { return base::SignedKey(k.section); },
          cancel) ||
      !base::RadixSortOrCancel(
          &ends, [](const Key& k) { return base::SignedKey(k.section); },
          cancel)) {
    return absl::DeadlineExceededError("sweep order cancelled");
  }
  SweepOrder order;
  order.time = &time;
  order.by_start.reserve(starts.size());
  order.by_end.reserve(ends.size());
  for (const Key& k : starts) order.by_start.push_back(k.index);
  for (const Key& k : ends) order.by_end.push_back(k.index);
  return order;
}

// Walks sections in order: at each, `release(i)` for the buffers that end
// there, then `take(i)` for those that start there, largest first.
// False when `cancel` fired.
template <typename ReleaseFn, typename TakeFn>
bool Sweep(const SweepOrder& order, const base::CancelToken* cancel,
           ReleaseFn release, TakeFn take) {
  const Sections& time = *order.time;
  base::WorkMeter meter(cancel);
  size_t e = 0;
  for (int i : order.by_start) {
    const int section = time.first[i];
    for (; e < order.by_end.size() && time.last[order.by_end[e]] <= section;
         ++e) {
      release(order.by_end[e]);
    }
    take(i);
    if (meter.Stop(kBufferWork)) return false;
  }
  return true;
}

// Free address ranges of one arena, coalesced, found by start and by size.
// Everything from top() up is free too.
class FreeList {
 public:
  // Free from `base` up, and between `floor` and base except `taken`
  // (ranges sorted by offset, which may overlap; all below base).
  FreeList(Offset floor, Offset base, const std::vector<TakenRange>& taken)
      : top_(base), high_(base) {
    Offset cursor = floor;
    for (const TakenRange& t : taken) {
      if (t.offset > cursor) Add(cursor, t.offset);
      cursor = std::max(cursor, t.top);
    }
    if (cursor < base) Add(cursor, base);
  }

  // Where a block of `size` at `alignment` goes: the smallest free range
  // that holds it, else the top.
  Offset Take(Bytes size, Bytes alignment) {
    auto it = by_size_.lower_bound({size, 0});
    for (int tries = 0; it != by_size_.end() && tries < kAlignedTries;
         ++tries, ++it) {
      if (Holds(*it, size, alignment)) return TakeFrom(*it, size, alignment);
    }
    it = by_size_.lower_bound({size + alignment - 1, 0});
    if (it != by_size_.end()) return TakeFrom(*it, size, alignment);
    const Offset at = AlignUp(top_, alignment);
    if (at > kHighest - size) {  // pins near 2^62 below sums near 2^62
      overflowed_ = true;
      return 0;
    }
    if (at > top_) Add(top_, at);
    top_ = at + size;
    high_ = std::max(high_, top_);
    return at;
  }

  // Whether a block would have ended past kHighest (its offset is then 0).
  bool overflowed() const { return overflowed_; }

  // Gives [offset, offset + size) back, merged with free neighbours.
  void Give(Offset offset, Bytes size) {
    Offset lo = offset;
    Offset hi = offset + size;
    auto next = by_start_.lower_bound(lo);
    if (next != by_start_.end() && next->first == hi) {
      hi = next->second;
      Remove(next->first, next->second);
    }
    auto prev = by_start_.lower_bound(lo);
    if (prev != by_start_.begin()) {
      --prev;
      if (prev->second == lo) {
        lo = prev->first;
        Remove(prev->first, prev->second);
      }
    }
    if (hi == top_) {
      top_ = lo;
    } else {
      Add(lo, hi);
    }
  }

  // The highest top reached: the arena.
  Offset high() const { return high_; }

 private:
  using BySize = std::pair<Bytes, Offset>;  // (size, start)

  // The highest top: room above it for any alignment's rounding.
  static constexpr Offset kHighest =
      std::numeric_limits<Offset>::max() - kMaxAlignment;

  static bool Holds(const BySize& range, Bytes size, Bytes alignment) {
    return AlignUp(range.second, alignment) + size <=
           range.second + range.first;
  }

  Offset TakeFrom(BySize range, Bytes size, Bytes alignment) {
    const Offset start = range.second;
    const Offset end = start + range.first;
    const Offset at = AlignUp(start, alignment);
    Remove(start, end);
    if (at > start) Add(start, at);
    if (at + size < end) Add(at + size, end);
    return at;
  }

  void Add(Offset lo, Offset hi) {
    by_start_.emplace(lo, hi);
    by_size_.insert({hi - lo, lo});
  }
  void Remove(Offset lo, Offset hi) {
    by_start_.erase(lo);
    by_size_.erase({hi - lo, lo});
  }

  absl::btree_map<Offset, Offset> by_start_;  // start -> end
  absl::btree_set<BySize> by_size_;
  Offset top_;
  Offset high_;
  bool overflowed_ = false;
};

}  // namespace

absl::StatusOr<Solution> SweepOffsets(const Problem& problem,
                                      const base::CancelToken* cancel,
                                      const Sections* given) {
  const auto& b = problem.buffers;
  Solution solution;
  solution.offsets.assign(b.size(), -1);
  // Pinned buffers keep their ranges for the whole schedule (a plan that
  // is valid whatever their lifetimes); the room between them is free.
  const Offset stacked = StackSpanningBuffers(problem, &solution);
  Offset base = stacked;
  std::vector<TakenRange> pinned;
  for (size_t i = 0; i < b.size(); ++i) {
    if (!b[i].fixed_offset.has_value()) continue;
    solution.offsets[i] = *b[i].fixed_offset;
    pinned.push_back({*b[i].fixed_offset, *b[i].fixed_offset + b[i].size});
    base = std::max(base, pinned.back().top);
  }
  std::sort(pinned.begin(), pinned.end());
  std::vector<int> rest;
  for (int i = 0; i < static_cast<int>(b.size()); ++i) {
    if (solution.offsets[i] < 0) rest.push_back(i);
  }
  Sections own;
  absl::StatusOr<SweepOrder> order =
      OrderFor(problem, given, &own, rest, cancel);
  if (!order.ok()) return order.status();
  FreeList free(stacked, base, pinned);
  const bool done = Sweep(
      *order, cancel, [&](int i) { free.Give(solution.offsets[i], b[i].size); },
      [&](int i) {
        solution.offsets[i] = free.Take(b[i].size, b[i].alignment);
      });
  if (!done) return Cancelled("offset assignment");
  if (free.overflowed()) {
    return absl::InvalidArgumentError(
        "the plan's arena would pass 2^63 bytes: buffers pinned near 2^62 "
        "with the rest planned above them");
  }
  solution.arena_size = free.high();
  for (size_t i = 0; i < b.size(); ++i) {
    solution.arena_size =
        std::max(solution.arena_size, solution.offsets[i] + b[i].size);
  }
  return solution;
}

absl::StatusOr<SharedObjects> SweepSharedObjects(
    const Problem& problem, const base::CancelToken* cancel,
    const Sections* given) {
  const auto& b = problem.buffers;
  const auto span = ScheduleSpan(problem);
  std::vector<int> shared;
  for (int i = 0; i < static_cast<int>(b.size()); ++i) {
    if (!SpansAll(b[i], span)) shared.push_back(i);
  }
  Sections own;
  absl::StatusOr<SweepOrder> order =
      OrderFor(problem, given, &own, shared, cancel);
  if (!order.ok()) return order.status();
  SharedObjects objects;
  objects.object_of.assign(b.size(), -1);
  absl::btree_set<std::pair<Bytes, int>> free;  // (size, object)
  const bool done = Sweep(
      *order, cancel,
      [&](int i) {
        const int object = objects.object_of[i];
        free.insert({objects.size[object], object});
      },
      [&](int i) {
        auto it = free.lower_bound({b[i].size, 0});
        if (it == free.end() && !free.empty()) it = std::prev(free.end());
        if (it == free.end()) {
          objects.object_of[i] = static_cast<int>(objects.size.size());
          objects.size.push_back(b[i].size);
          return;
        }
        const int object = it->second;
        free.erase(it);
        objects.object_of[i] = object;
        objects.size[object] = std::max(objects.size[object], b[i].size);
      });
  if (!done) return Cancelled("shared object coloring");
  // Spanning buffers alone, largest first as the coloring numbers them.
  std::vector<int> alone;
  for (int i = 0; i < static_cast<int>(b.size()); ++i) {
    if (objects.object_of[i] < 0) alone.push_back(i);
  }
  std::stable_sort(alone.begin(), alone.end(),
                   [&](int x, int y) { return b[x].size > b[y].size; });
  for (int i : alone) {
    objects.object_of[i] = static_cast<int>(objects.size.size());
    objects.size.push_back(b[i].size);
  }
  return objects;
}

absl::StatusOr<Solution> SweepStrategy::Solve(const Problem& problem,
                                              const SolveContext& ctx) const {
  absl::StatusOr<Solution> s = SweepOffsets(problem, ctx.cancel, ctx.time);
  if (s.ok()) UpdateBest(ctx.best_arena, s->arena_size);
  return s;
}

}  // namespace memplan::planner
